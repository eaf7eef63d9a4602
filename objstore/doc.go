// Package objstore reads Parquet files from S3-compatible object storage
// (AWS S3, MinIO, Ceph RGW, versitygw) for package decode: a Source is a
// decode.FS and decode.Lister over "s3://bucket/key" names, and its files
// are decode.Files that are also decode.Prefetchers.
//
// # Reads
//
//   - Open makes one request: a GET of the object's last 64 KiB (a suffix
//     range), whose Content-Range gives the size and whose ETag and
//     Last-Modified the version. The planner's footer read is then served
//     from those bytes; a footer longer than that costs one more ranged GET.
//     What Open learned is kept per Client (metaCache), so the decoders that
//     open the object later make no request of their own.
//   - Every other read is a ranged GET with If-Match on the ETag Open saw: an
//     object replaced after planning fails with decode.ErrFileChanged instead
//     of mixing two versions.
//   - Prefetch (called by decode.Decoder.Open with a unit's projected column
//     chunks) merges ranges less than CoalesceGap apart and fetches the
//     merged blocks in the background, up to Concurrency at a time and within
//     Client's memory bound (PrefetchBytes, shared by every file of the
//     Client). ReadAt serves what a block holds and reads anything else on
//     demand, straight into the caller's buffer.
//   - Requests are retried with capped exponential backoff and jitter on
//     throttling (429, 503 SlowDown), other 5xx, timeouts and bodies cut
//     short; 403, 404 and 416 are not retried, and are errors naming the
//     object and saying what to check.
//
// # The prefetch protocol (file.go)
//
// A File belongs to one decode.Decoder, which calls Prefetch, ReadAt and
// Close from one goroutine; only the fetches run elsewhere. Invariants:
//   - a block's bytes are written only by its fetch goroutine, and read only
//     after its done channel is closed (the close is the happens-before
//     edge); err is set before the close;
//   - a block holds budget bytes from before its fetch starts until it is
//     dropped; dropping waits for the fetch to end (it is cancelled first),
//     so a buffer is never released while a goroutine writes it;
//   - Prefetch never blocks on the network or on the budget: a block the
//     budget cannot hold now is not prefetched, and is read on demand.
//
// Steps: Prefetch drops the blocks of the previous unit (fully read or not),
// merges the new ranges, and for each merged block takes budget (TryAcquire)
// and starts its fetch. ReadAt looks for a block covering [off, off+len);
// it waits for that block and copies, or reads the range itself.
//
// Rejected: one GET per column chunk in ReadAt order (a unit of 40 narrow
// columns would pay 40 round trips in series); one GET of the whole row
// group (fetches the columns not projected, defeating projection); an
// unbounded read-ahead of whole files (a remote dataset is larger than
// memory); the clients' own retry loops (they hide the error and the count,
// and a test must be able to see a retry happen).
//
// This package imports only decode from lastmile: the engine, daemon and
// peers reach it through decode.FS.
package objstore
