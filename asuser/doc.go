// Package asuser opens files with another user's credentials, so that the
// kernel, not lastmile, decides what a privileged daemon may read on a
// user's behalf: mode bits, ACLs, search permission on every directory,
// symlinks and races between a check and an open are all the kernel's.
//
// # How
//
// Linux keeps the credentials used for file access per thread: the file
// system uid and gid (setfsuid, setfsgid), the supplementary groups and the
// effective capabilities. Cred.Do runs a function on a fresh goroutine
// locked to its OS thread, after that thread alone has taken the caller's
// fsuid, fsgid and groups and dropped CAP_DAC_OVERRIDE and
// CAP_DAC_READ_SEARCH from its effective set. The function opens what it
// needs; the open file descriptors it returns are then used by any
// goroutine (a file descriptor carries no credentials once open, as with
// files passed over a unix socket). Afterwards the thread's credentials are
// restored; if restoring fails the goroutine exits still locked, and the Go
// runtime destroys the thread instead of reusing it.
//
// Invariants:
//   - only the locked thread ever carries a user's credentials, and it runs
//     nothing but the function given to Do;
//   - the function must not start goroutines that touch the file system on
//     the user's behalf: they would run on other threads, as the daemon;
//   - the raw system calls used (setfsuid, setfsgid, setgroups, capset) act
//     on the calling thread only. syscall.Setgroups and friends in the
//     standard library apply to every thread of the process and must never
//     be used here.
//
// Rejected designs:
//   - Checking permission bits by hand before opening as the daemon (what
//     lastmile did first): it ignores ACLs, and a symlink swapped between
//     the check and the open defeats it.
//   - access(2) or faccessat(2) before opening: the same race.
//   - A helper process per user (fork, setuid, pass fds back over a unix
//     socket): correct, but a process per open or per user costs far more
//     than four system calls, and the daemon would need to manage their
//     life cycle.
//   - Switching the whole process's uid: every other job's goroutines would
//     run as that user.
//
// The daemon needs CAP_SETUID and CAP_SETGID for the switch (root has
// them); the switch also clears the file capabilities of a root daemon by
// itself, and this package clears them explicitly for a daemon running as a
// system user with ambient capabilities.
//
// The package must never import another package of lastmile's; it owns no
// globals that change after start.
package asuser
