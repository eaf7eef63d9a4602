package peer

// Fetching one unit's output from a peer: the Flight stream, its
// checks, and the CPU and bytes it cost the requester.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"

	"github.com/lastmile/lastmile/column"
)

var errCorrupt = errors.New("corrupt unit stream")

// fetch runs one ticket at r and assembles its output into out. It
// returns the bytes received for it.
func fetch(ctx context.Context, r *remote, ticket []byte, out *column.Batch) (received, error) {
	// The fetching goroutine keeps its thread, so that the thread's CPU
	// clock counts its work alone: reading the stream's messages, Arrow's
	// reader, assembling and checking the unit. gRPC's transport
	// goroutine (TLS, HTTP/2 frames) is not counted; lastmile bench -only
	// spill measures the whole receive.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpu0 := threadCPU()
	codec := newStreamCodec()
	queue, err := fetchWith(ctx, codec, r, ticket, out)
	// The reader and its records, which view the bodies, are released
	// by now, and the assembler has copied what it needs.
	codec.release()
	return received{wire: codec.wire, cpu: threadCPU() - cpu0, queue: queue}, err
}

// received is what receiving a unit took: its bytes on the wire, and the
// CPU of the goroutine that received it (fetch); and the units the peer
// had admitted as it sent it (trailer.Queue).
type received struct {
	wire  int64
	cpu   time.Duration
	queue int
}

// threadCPU is the CPU time of the calling thread.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// fetchWith is fetch, receiving through codec, whose buffers the caller
// releases after it returns. It returns the trailer's Queue.
func fetchWith(ctx context.Context, codec *streamCodec, r *remote, ticket []byte, out *column.Batch) (int, error) {
	stream, err := r.client.DoGet(ctx, &flight.Ticket{Ticket: ticket}, grpc.ForceCodecV2(codec))
	if err != nil {
		return 0, err
	}
	rd, err := flight.NewRecordReader(checkedStream{stream})
	if err != nil {
		return 0, corrupt(err)
	}
	defer rd.Release()
	a, err := NewAssembler(rd.Schema(), out)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", errCorrupt, err)
	}
	var meta []byte
	for rd.Next() {
		if err := a.Add(rd.RecordBatch()); err != nil {
			return 0, fmt.Errorf("%w: %v", errCorrupt, err)
		}
		meta = append(meta[:0], rd.LatestAppMetadata()...)
	}
	if err := rd.Err(); err != nil {
		return 0, corrupt(err)
	}
	var tr trailer
	if err := json.Unmarshal(meta, &tr); err != nil {
		return 0, fmt.Errorf("%w: no trailer (stream cut short?)", errCorrupt)
	}
	if tr.Rows != out.Rows || tr.Checksum != Checksum(out) {
		return 0, fmt.Errorf("%w: %d rows, checksum %x; the peer sent %d rows, checksum %x", errCorrupt, out.Rows, Checksum(out), tr.Rows, tr.Checksum)
	}
	return tr.Queue, out.Check()
}

// corrupt marks an error of a malformed message header as a corrupt
// stream (counted as such); any other error passes as it is.
func corrupt(err error) error {
	if errors.Is(err, errBadHeader) {
		return fmt.Errorf("%w: %w", errCorrupt, err)
	}
	return err
}
