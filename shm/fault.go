package shm

import (
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
)

// Memory faults in a mapping someone else may shrink.
//
// The problem. lastmiled maps every ring and unit arena it produces into
// and gives each file to its job's owner, whose trainer opens it
// read-write (the consumer stores its head and waiting words there). Write
// permission on a file is permission to truncate it, so that owner may
// shrink the file under the daemon, and the daemon's next load or store
// into a page past the new end raises SIGBUS. The Go runtime makes a fault
// at an address it did not expect a fatal error, which would take the
// daemon down with every other user's jobs, unless the goroutine that
// faulted asked for a panic instead (debug.SetPanicOnFault), which it can
// then recover.
//
// Invariants.
//   - Every method of this package that touches a mapping for a caller
//     that may be a daemon's shared goroutine (Producer's Acquire, Publish,
//     WaitDrained, LastCursor, Stats, the end of the stream, the
//     heartbeat; Observer's Info and consumer words) turns a fault into an
//     error that wraps ErrFault, or a zero answer where it returns no
//     error, with RecoverFault deferred first (so it runs after the
//     method's own deferred unlocks: a fault never leaves a lock held).
//   - Memory written outside this package, a slot's payloads and the
//     unit arena, is written by goroutines that run with SetPanicOnFault
//     on and recover at their top: the engine's Run (RecoverFault) and the
//     decode pool's workers (every panic of a unit becomes its error).
//     AsFault finds the fault in what they return.
//   - Nothing is retried: a file shrunk under its producer fails that job
//     (its other rings get the error as the job's failure) and only it.
//
// Steps, in a method: `defer RecoverFault(debug.SetPanicOnFault(true),
// &err, what)` as its first statement; SetPanicOnFault is per goroutine
// and RecoverFault restores the caller's setting, so guards nest.
//
// Rejected designs. Rings in memfds sealed against shrinking
// (F_SEAL_SHRINK) would make the fault impossible, but a memfd has no name
// under /dev/shm: trainers open rings by name, other tools inspect them by
// name, and a restarted daemon adopts its rings by name. A ring owned by
// root that the owner may write through an ACL: any write permission
// allows ftruncate. Checking the file's size before each access: the
// truncation may come between the check and the access.

// ErrFault is wrapped by the error of an access to a ring or arena whose
// file was shrunk under its mapping.
var ErrFault = errors.New("shared memory fault")

// FaultError is a memory fault in a mapped ring or arena file.
type FaultError struct {
	// What names the mapping (a ring's path, "a unit arena"), or is empty
	// where the faulting code did not know it.
	What string
	Addr uintptr
}

func (e *FaultError) Error() string {
	what := e.What
	if what == "" {
		what = "a ring or unit arena"
	}
	return fmt.Sprintf("%v: memory fault at %#x in %s: its file was truncated under lastmile (by its trainer, "+
		"its user or another process with write access to it); this job cannot go on: submit it again, "+
		"and do not resize ring files", ErrFault, e.Addr, what)
}

func (e *FaultError) Unwrap() error { return ErrFault }

// addressed is the runtime.Error of a memory fault that SetPanicOnFault
// turned into a panic: it carries the faulting address.
type addressed interface {
	runtime.Error
	Addr() uintptr
}

// AsFault returns the memory fault in v (a recovered panic value, or an
// error that wraps one, such as a worker pool's panic error), if any.
func AsFault(v any) (*FaultError, bool) {
	switch x := v.(type) {
	case *FaultError:
		return x, true
	case addressed:
		return &FaultError{Addr: x.Addr()}, true
	case error:
		var f *FaultError
		if errors.As(x, &f) {
			return f, true
		}
		var a addressed
		if errors.As(x, &a) {
			return &FaultError{Addr: a.Addr()}, true
		}
	}
	return nil, false
}

// RecoverFault, deferred as
//
//	defer shm.RecoverFault(debug.SetPanicOnFault(true), &err, what)
//
// at the top of a function that touches mapped memory, turns a memory
// fault in it into *err (a *FaultError naming what; err may be nil where
// the function returns no error) and restores the goroutine's earlier
// setting (old). Any other panic goes on. It must be the deferred call
// itself (recover works only there), never called from another function.
func RecoverFault(old bool, err *error, what string) {
	debug.SetPanicOnFault(old)
	if r := recover(); r != nil {
		f, ok := AsFault(r)
		if !ok {
			panic(r)
		}
		if what != "" {
			f.What = what
		}
		if err != nil {
			*err = f
		}
	}
}
