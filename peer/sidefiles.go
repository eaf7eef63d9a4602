package peer

// The files beneath directory roots that a cached job read as its user
// while it compiled (its side tables), and the check that the user may
// still open each and that each is still the file that was read.
//
// A compiled job keeps its side tables loaded for the units that follow,
// of its run and of the next runs of the same spec by the same user: it
// opens them no more, so the kernel is not asked again. A chmod or chown
// that took the user's access away, or a file replaced under the same
// name, went unseen for as long as the job stayed cached. Before a cached
// job serves a unit, the cache re-checks, as the user, every file its
// compile opened, at most once every sideRecheck per job.
//
// Why by time and not by run: a ticket names its job's spec (Hash), its
// user, its columns (Plan) and its unit, and nothing that tells one run
// of a spec from the next; the next run's tickets are the same bytes but
// for their units. A check per unit would cost an open, an fstat and a
// switch of credentials per side table file for every unit, which is
// what the cache is there to avoid. So a revocation, or a replaced file,
// is seen by the first unit that comes more than sideRecheck after the
// job's last check: within one run, and a new run in any case when more
// than sideRecheck passed since the last unit of the one before. The
// steady state of a run costs each unit a read of the monotonic clock
// (no system call); one unit every sideRecheck pays for the check.
//
// Rejected: a per-run identity in the ticket (a new field, which a peer
// must not trust to be new: a requester may send the same one for ever,
// so a time bound was needed anyway); watching the files with inotify
// (no event for a change of a directory's permissions above the file,
// nor for a group membership the user lost, and a descriptor per file).

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/lastmile/lastmile/asuser"
	"github.com/lastmile/lastmile/roots"
)

// sideRecheck is the most time a cached job serves units without its
// side tables being checked again (a variable for tests).
var sideRecheck = 2 * time.Second

// fileID is what tells one file from another, or from itself changed:
// its device and inode, its size and its modification time.
type fileID struct {
	dev, ino uint64
	size     int64
	mtime    int64 // nanoseconds
}

func idOf(fi fs.FileInfo) (fileID, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, false
	}
	return fileID{dev: uint64(st.Dev), ino: st.Ino, size: st.Size, mtime: st.Mtim.Nano()}, true
}

// sideFiles records the files of a job's compile, then checks them.
// Safe for concurrent use.
type sideFiles struct {
	r    *roots.Roots
	cred asuser.Cred
	unit string // the ticket's unit file: opened afresh by every unit, not recorded

	sealed atomic.Bool // the compile is over: opens are not recorded

	mu    sync.Mutex
	files map[string]fileID // by ROOT/REL name
	err   error             // the check that failed: it fails for good

	base    time.Time    // the monotonic origin of checked
	checked atomic.Int64 // nanoseconds after base of the last check (or of the seal)
	checks  atomic.Int64 // checks made (tests)
}

func newSideFiles(r *roots.Roots, cred asuser.Cred, unit string) *sideFiles {
	return &sideFiles{r: r, cred: cred, unit: unit, files: map[string]fileID{}, base: time.Now()}
}

// note records name, opened as f, unless the compile is over (then it
// costs no system call). A file whose identity cannot be read is
// recorded as the zero fileID, which no check matches: its job is
// compiled again at its first check.
func (s *sideFiles) note(name string, f *os.File) {
	if s == nil || name == s.unit || s.sealed.Load() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sealed.Load() {
		return
	}
	var id fileID
	if fi, err := f.Stat(); err == nil {
		id, _ = idOf(fi)
	}
	s.files[name] = id
}

// seal ends the recording: the files are those the compile opened, and
// the next check is due sideRecheck from now. It returns how many there
// are: a job that opened none (no side table beneath a directory root)
// needs no check.
func (s *sideFiles) seal() int {
	s.mu.Lock()
	s.sealed.Store(true)
	n := len(s.files)
	s.mu.Unlock()
	s.checked.Store(int64(time.Since(s.base)))
	return n
}

// fresh returns nil when the files were checked less than sideRecheck
// ago, or when they check now: the user may open each (as the kernel
// says, as that user) and each is the file the compile read. Otherwise
// the error, for this call and every later one.
func (s *sideFiles) fresh() error {
	if s == nil {
		return nil
	}
	if time.Duration(int64(time.Since(s.base))-s.checked.Load()) < sideRecheck {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	now := int64(time.Since(s.base))
	if time.Duration(now-s.checked.Load()) < sideRecheck { // another caller checked meanwhile
		return nil
	}
	s.checks.Add(1)
	if err := s.cred.Do(s.checkAll); err != nil {
		s.err = err
		return err
	}
	s.checked.Store(now)
	return nil
}

// errSideChanged is the error of a side table file that is no longer
// the one a cached job read.
var errSideChanged = errors.New("changed since the job was compiled")

// checkAll opens each file beneath its root, with the caller's
// credentials (cred.Do), and compares it with what was read. s.mu is held.
func (s *sideFiles) checkAll() error {
	for name, want := range s.files {
		f, err := s.r.Open(name)
		if err != nil {
			return fmt.Errorf("side table %s: %w", name, err)
		}
		fi, err := f.Stat()
		f.Close()
		if err != nil {
			return fmt.Errorf("side table %s: %w", name, err)
		}
		if got, ok := idOf(fi); !ok || got != want || want == (fileID{}) {
			return fmt.Errorf("side table %s: %w", name, errSideChanged)
		}
	}
	return nil
}
