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
//     What Open learned is kept per Client (metaCache) for a minute, so the
//     decoders that open the object later make no request of their own.
//     The planner opens with OpenFresh, which never answers from the
//     cache: a plan describes the object as it is now.
//   - Every other read is a ranged GET with If-Match on the ETag Open saw: an
//     object replaced after planning fails with decode.ErrFileChanged instead
//     of mixing two versions.
//   - Prefetch (called by decode.Decoder.Open with a unit's projected column
//     chunks) and PrefetchUnit (called by the engine for the unit a worker
//     takes one round from now) merge ranges less than CoalesceGap apart,
//     split them at MaxBlock and fetch the blocks in the background, up to
//     Concurrency at a time, within the Client's memory bound
//     (PrefetchBytes). ReadAt serves what blocks hold and reads anything
//     else on demand, straight into the caller's buffer.
//   - Requests are retried with capped exponential backoff and jitter on
//     throttling (429, 503 SlowDown), other 5xx, timeouts and bodies cut
//     short; 403, 404 and 416 are not retried, and are errors naming the
//     object and saying what to check.
//
// # The read-ahead protocol (prefetch.go)
//
// Blocks belong to the Client, by object URL and ETag, so a block fetched
// before any decoder opened its unit serves whichever decoder does.
// Invariants:
//   - a block's bytes are written only by its fetch goroutine, and read only
//     after its done channel is closed (the close is the happens-before
//     edge); err is set before the close;
//   - a block holds budget bytes from its creation until it is removed, once:
//     when readers have taken all its asked bytes (not the coalesced gaps, which
//     nobody reads), from it or from their file's tail (a block PrefetchUnit
//     made may hold bytes of the tail, which a file that has it copies from
//     there: they count as taken, and a block so read while its fetch runs is
//     removed by that fetch when it ends), when its fetch failed (the read
//     then goes on demand, and that read retries and reports), or when it is
//     done and older than 30s (a unit served from the unit cache or never
//     decoded); removal is under the lock and idempotent;
//   - no two blocks of a version share a byte (prefetch makes blocks of
//     what no block holds yet), so bytes are fetched once, and every byte
//     a reader takes counts toward the one block holding it;
//   - a read takes from blocks what they hold and reads on demand only the
//     holes between them, so a block that starts inside a read is used;
//     what the file's tail holds is copied from it, also for a read that
//     starts before the tail, and never fetched again;
//   - prefetch never blocks on the network or on the budget: a block the
//     budget cannot hold now is not made, and its bytes are read on demand.
//
// Rejected: one GET per column chunk in ReadAt order (a unit of 40 narrow
// columns would pay 40 round trips in series); one GET of the whole row
// group (fetches the columns not projected, defeating projection); blocks
// per open file (a unit announced ahead has no open file yet, and workers
// open files of their own); an unbounded read-ahead of whole files (a
// remote dataset is larger than memory); the clients' own retry loops (they
// hide the error and the count, and a test must be able to see a retry).
//
// This package imports only decode from lastmile: the engine, daemon and
// peers reach it through decode.FS.
package objstore
