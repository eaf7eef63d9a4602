package shm

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors. Errors returned by this package wrap them, so callers
// test with errors.Is; the wrapping error names the ring and the problem.
var (
	// ErrNotRing: the file is not a lastmile ring (bad magic).
	ErrNotRing = errors.New("not a lastmile ring")
	// ErrVersion: the ring's major version is unknown to this reader.
	ErrVersion = errors.New("unsupported ring format version")
	// ErrTruncated: the file or buffer is shorter than the header says.
	ErrTruncated = errors.New("ring file truncated")
	// ErrSchemaHash: the schema block does not match schema_hash, or the
	// schema is not the one the caller expected.
	ErrSchemaHash = errors.New("ring schema hash mismatch")
	// ErrCorrupt: a header, schema or slot field breaks the format.
	ErrCorrupt = errors.New("corrupt ring")
	// ErrProtocol: a peer broke the protocol (a published slot whose seq
	// is not the expected sequence). The slot is never read.
	ErrProtocol = errors.New("ring protocol violation")
	// ErrInUse: the ring already has a live producer, or a consumer.
	ErrInUse = errors.New("ring in use")
	// ErrProducerDied: the producer died without ending the stream.
	ErrProducerDied = errors.New("ring producer died")
	// ErrProducerFailed: the producer ended the stream with an error.
	ErrProducerFailed = errors.New("ring producer failed")
	// ErrClosed: the Producer or Consumer was closed.
	ErrClosed = errors.New("ring closed")
	// ErrUntrusted: the file under a ring's name (or a temporary name) is
	// a symbolic link, not a regular file, has other hard links, or belongs
	// to an unexpected user; it is never opened for writing, reused or
	// replaced (trust.go).
	ErrUntrusted = errors.New("ring file not trusted")
)

// TooLargeError is returned when a batch does not fit a slot. It is
// detected before the batch's payloads are handed out, and the batch is
// never published.
type TooLargeError struct {
	Ring     string
	Need     int64 // bytes the batch needs, table included
	SlotSize int64 // bytes a slot holds
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("ring %q: batch needs %d bytes but a slot holds %d: recreate the ring with a slot size of at least %d bytes, or make batches smaller",
		e.Ring, e.Need, e.SlotSize, RoundSlotSize(e.Need))
}

// ProducerDiedError reports a producer that died with the stream still
// running, after every batch it published was delivered.
type ProducerDiedError struct {
	Ring         string
	PID          int32         // producer_pid from the header
	Published    uint64        // batches the producer published (tail)
	HeartbeatAge time.Duration // time since producer_heartbeat_ns
	// Replaced: the ring's name now belongs to another file, a new ring
	// (§6.7): reopen the name to read it.
	Replaced bool
}

func (e *ProducerDiedError) Error() string {
	if e.Replaced {
		return fmt.Sprintf("ring %q: producer (pid %d) died after publishing %d batches, all delivered; last heartbeat %v ago; a new ring has since been created under the name: reopen it",
			e.Ring, e.PID, e.Published, e.HeartbeatAge.Round(time.Millisecond))
	}
	return fmt.Sprintf("ring %q: producer (pid %d) died after publishing %d batches, all delivered; last heartbeat %v ago: restart the producer and reattach",
		e.Ring, e.PID, e.Published, e.HeartbeatAge.Round(time.Millisecond))
}

func (e *ProducerDiedError) Unwrap() error { return ErrProducerDied }

// ProducerError carries the message of a producer that ended the stream
// with an error (state 2), after every published batch was delivered.
type ProducerError struct {
	Ring    string
	Message string
}

func (e *ProducerError) Error() string {
	return fmt.Sprintf("ring %q: producer failed: %s", e.Ring, e.Message)
}

func (e *ProducerError) Unwrap() error { return ErrProducerFailed }

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}
