// Package shm owns lastmile's shared-memory ring: the file format of
// docs/ring-format.md and the single-producer, single-consumer protocol
// that hands batches from the daemon to a trainer without copying them
// again.
//
// A Producer (Create) builds the ring file in /dev/shm (or
// $LASTMILE_SHM_DIR), reserves and pre-faults all of it once, and then
// writes each batch in place: Acquire a slot, Add each tensor of the schema
// and fill the returned region, Publish. A Consumer (Open) validates the
// file and returns each batch as zero-copy views (Next), releasing the slot
// on the next call; WaitOpen waits for a ring to appear, taking a leftover
// of an earlier run under the name for one not there yet (leftover.go). ParseHeader, ParseSchema and ParseSlot are the pure
// parsers both sides use, fuzzed in this package. RunHandoffProducer,
// RunHandoffConsumer and MeasureMemcpy are the ring's benchmark, for
// `lastmile bench`.
//
// The protocol's invariants, memory-ordering rules and rejected designs
// are in the comment at the top of ring.go.
//
// This is a leaf package: it must never import another lastmile package
// (not even column; DType mirrors its codes), so that the trainer-facing
// contract cannot grow a dependency on the decode side. It must never
// store a Go pointer in shared memory, never map the ring per batch, and
// never overwrite a slot the consumer has not released. It is Linux-only.
//
// The ring directory is shared: /dev/shm is world-writable, and a daemon
// using this package runs privileged. So the package never follows a
// symbolic link under a ring's name, never writes into, adopts, reuses or
// replaces a file it did not make sure of, and never deletes one it does
// not own (trust.go, name.go):
//
//   - it creates files only with O_CREAT|O_EXCL|O_NOFOLLOW, under a
//     temporary name with a random part, and renames them into place with
//     RENAME_NOREPLACE; it replaces a name only when it is a stale ring
//     it checked and locked, and only while it still is that file;
//   - every existing file it opens under a ring's name (Create, Claim,
//     Adopt, Take, Open, the removal of a dead producer's temporary file)
//     is opened with O_NOFOLLOW and O_NONBLOCK, and used only if fstat
//     says it is a regular file with one link, owned by this process's
//     uid, root, or the caller's expected owner (Config.Owner, Claim's
//     owner, OpenOptions.Owner). Anything else fails with ErrUntrusted and
//     an error naming the file, its owner and what to do.
package shm
