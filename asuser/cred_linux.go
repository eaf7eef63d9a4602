package asuser

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"

	"golang.org/x/sys/unix"
)

// Cred is the identity the kernel checks file access against: a file
// system uid and gid and the supplementary groups.
type Cred struct {
	UID    uint32
	GID    uint32
	Groups []uint32 // supplementary groups; the primary GID need not be repeated
}

// String is for logs and errors.
func (c Cred) String() string { return fmt.Sprintf("uid %d gid %d groups %v", c.UID, c.GID, c.Groups) }

// ErrNoPrivilege says the daemon lacks CAP_SETUID or CAP_SETGID to take a
// user's credentials.
var ErrNoPrivilege = errors.New("lastmiled lacks CAP_SETUID and CAP_SETGID to read files as the submitting user: run it as root, or as a system user with AmbientCapabilities=CAP_SETUID CAP_SETGID (deploy/lastmiled.service)")

// dacCaps are the capabilities that bypass file permission checks. A
// thread acting for a user must not hold them in its effective set.
const dacCaps = 1<<unix.CAP_DAC_OVERRIDE | 1<<unix.CAP_DAC_READ_SEARCH

// Do runs fn with c's file access credentials, on an OS thread that runs
// nothing else meanwhile, and returns fn's error. fn must not start
// goroutines that touch the file system for the user (see the package
// doc). A Cred with UID 0 runs fn as the daemon itself: root may read
// anything the daemon may.
func (c Cred) Do(fn func() error) error {
	if c.UID == 0 || c.isSelf() {
		return fn()
	}
	type result struct {
		err   error
		panic any
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		// No UnlockOSThread unless the credentials are restored: a goroutine
		// that exits locked takes its thread with it.
		s, err := c.enter()
		if err != nil {
			if s.restore() == nil {
				runtime.UnlockOSThread()
			}
			done <- result{err: err}
			return
		}
		var r result
		func() {
			defer func() { r.panic = recover() }()
			r.err = fn()
		}()
		if err := s.restore(); err != nil {
			r.err = errors.Join(r.err, fmt.Errorf("restore the daemon's credentials (thread discarded): %w", err))
		} else {
			runtime.UnlockOSThread()
		}
		done <- r
	}()
	r := <-done
	if r.panic != nil {
		panic(r.panic)
	}
	return r.err
}

// isSelf reports whether c is the process's own effective uid and the
// process holds no capability that bypasses file permissions: then the
// kernel already checks every open against the caller (a daemon run by a
// user for that user alone, tests, lastmile run).
func (c Cred) isSelf() bool {
	if int(c.UID) != os.Geteuid() {
		return false
	}
	var caps [2]unix.CapUserData
	hdr := capHeader
	return unix.Capget(&hdr, &caps[0]) == nil && caps[0].Effective&dacCaps == 0
}

// saved is a thread's credentials before enter, and which of them enter
// changed.
type saved struct {
	fsuid, fsgid int
	groups       []int
	caps         [2]unix.CapUserData
	setGroups    bool
	setGID       bool
	setUID       bool
	setCaps      bool
}

var capHeader = unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}

// enter switches the calling (locked) thread to c. On error, the returned
// saved undoes whatever it did.
func (c Cred) enter() (saved, error) {
	var s saved
	var err error
	if s.groups, err = unix.Getgroups(); err != nil {
		return s, fmt.Errorf("getgroups: %w", err)
	}
	s.fsuid, _ = unix.SetfsuidRetUid(-1) // an invalid id changes nothing and returns the current one
	s.fsgid, _ = unix.SetfsgidRetGid(-1)
	hdr := capHeader
	if err := unix.Capget(&hdr, &s.caps[0]); err != nil {
		return s, fmt.Errorf("capget: %w", err)
	}
	groups := make([]int, len(c.Groups))
	for i, g := range c.Groups {
		groups[i] = int(g)
	}
	s.setGroups = true
	if err := unix.Setgroups(groups); err != nil {
		return s, noPrivilege("setgroups", err)
	}
	s.setGID = true
	unix.SetfsgidRetGid(int(c.GID))
	if now, _ := unix.SetfsgidRetGid(-1); now != int(c.GID) {
		return s, noPrivilege("setfsgid", unix.EPERM)
	}
	s.setUID = true
	unix.SetfsuidRetUid(int(c.UID))
	if now, _ := unix.SetfsuidRetUid(-1); now != int(c.UID) {
		return s, noPrivilege("setfsuid", unix.EPERM)
	}
	// Leaving fsuid 0 cleared the file capabilities already; a daemon that
	// is not root but holds them (ambient capabilities) keeps them, so
	// clear them here.
	var now [2]unix.CapUserData
	hdr = capHeader
	if err := unix.Capget(&hdr, &now[0]); err != nil {
		return s, fmt.Errorf("capget: %w", err)
	}
	if now[0].Effective&dacCaps != 0 {
		now[0].Effective &^= dacCaps
		s.setCaps = true
		hdr = capHeader
		if err := unix.Capset(&hdr, &now[0]); err != nil {
			return s, fmt.Errorf("capset: %w", err)
		}
	}
	return s, nil
}

// restore puts back what enter changed, in the reverse order.
func (s *saved) restore() error {
	var errs []error
	if s.setUID {
		unix.SetfsuidRetUid(s.fsuid)
		if now, _ := unix.SetfsuidRetUid(-1); now != s.fsuid {
			errs = append(errs, fmt.Errorf("setfsuid %d: still %d", s.fsuid, now))
		}
	}
	if s.setGID {
		unix.SetfsgidRetGid(s.fsgid)
		if now, _ := unix.SetfsgidRetGid(-1); now != s.fsgid {
			errs = append(errs, fmt.Errorf("setfsgid %d: still %d", s.fsgid, now))
		}
	}
	if s.setGroups {
		if err := unix.Setgroups(s.groups); err != nil {
			errs = append(errs, fmt.Errorf("setgroups: %w", err))
		} else if now, err := unix.Getgroups(); err != nil || !slices.Equal(now, s.groups) {
			errs = append(errs, fmt.Errorf("setgroups: groups are %v, want %v", now, s.groups))
		}
	}
	if s.setCaps || s.setUID {
		// Returning to fsuid 0 raises the file capabilities again; set the
		// saved effective set exactly either way.
		hdr := capHeader
		if err := unix.Capset(&hdr, &s.caps[0]); err != nil {
			errs = append(errs, fmt.Errorf("capset: %w", err))
		}
	}
	return errors.Join(errs...)
}

func noPrivilege(call string, err error) error {
	if errors.Is(err, unix.EPERM) {
		return fmt.Errorf("%s: %w", call, ErrNoPrivilege)
	}
	return fmt.Errorf("%s: %w", call, err)
}

// Self returns the process's own credentials, for tests and for
// in-process runs: the effective uid and gid and the supplementary groups.
func Self() Cred {
	c := Cred{UID: uint32(os.Geteuid()), GID: uint32(os.Getegid())}
	if gs, err := os.Getgroups(); err == nil {
		for _, g := range gs {
			c.Groups = append(c.Groups, uint32(g))
		}
	}
	return c
}
