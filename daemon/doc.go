// Package daemon is lastmiled, the per-host service that trainers ask for
// data: a control API (HTTP+JSON on a unix socket, docs/control-api.md),
// many jobs at once, each an engine.Run in its own goroutine sharing the
// CPUs by weight (Scheduler), state persisted so that a restart (kill -9
// included) resumes every job on its surviving rings, and Prometheus
// metrics read live from the engine and the rings.
//
// Restart without loss rests on three things: the rings outlive the
// process (they are files in /dev/shm); every published batch carries its
// cursor; and a new producer can adopt a ring (shm.Claim, shm.Take) and
// continue at its tail. See docs/daemon.md.
//
// The package must never let one job disturb another: a job's failure or
// panic ends that job only, and a request, however malformed, gets an
// error, never a crash. It must never hand a trainer a ring it may not
// read, nor read a file on behalf of a user who could not read it: every
// file a job names is opened with its submitter's credentials (package
// asuser, docs/daemon-security.md). It does not parse flags (cmd/lastmiled
// does) and owns no globals.
package daemon
