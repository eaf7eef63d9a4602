package peer

// Fetching one unit's output from a peer: the Flight stream, its
// checks, and the CPU and bytes it cost the requester.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"runtime"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	gpeer "google.golang.org/grpc/peer"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/engine"
)

var errCorrupt = errors.New("corrupt unit stream")

// fetch runs one ticket at r and assembles its output into out. It
// returns the bytes received for it.
func fetch(ctx context.Context, r *remote, ticket []byte, out *column.Batch) (received, error) {
	return fetchRows(ctx, r, ticket, out, 0, nil)
}

// fetchRows is fetch of a unit of maxRows rows (0: not known) whose
// output has the columns fields (nil: not known): a stream with more
// rows is refused as soon as it has, one with other columns before any
// row is assembled.
func fetchRows(ctx context.Context, r *remote, ticket []byte, out *column.Batch, maxRows int64, fields []engine.OutField) (received, error) {
	// The fetching goroutine keeps its thread, so that the thread's CPU
	// clock counts its work alone: reading the stream's messages, Arrow's
	// reader, assembling and checking the unit. gRPC's transport
	// goroutine (TLS, HTTP/2 frames) is not counted; lastmile bench -only
	// spill measures the whole receive.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpu0 := threadCPU()
	codec := newStreamCodec()
	var from gpeer.Peer
	queue, err := fetchWith(ctx, codec, r, ticket, out, maxRows, fields, grpc.Peer(&from))
	// The reader and its records, which view the bodies, are released
	// by now, and the assembler has copied what it needs.
	codec.release()
	subject, cert := certOf(&from)
	return received{wire: codec.wire, cpu: threadCPU() - cpu0, queue: queue, subject: subject, cert: cert}, err
}

// received is what receiving a unit took: its bytes on the wire, and the
// CPU of the goroutine that received it (fetch); the units the peer
// had admitted as it sent it (trailer.Queue); and the subject and the
// SHA-256 fingerprint of the leaf certificate it answered with, over the
// connection the unit came by ("" over plaintext).
type received struct {
	wire    int64
	cpu     time.Duration
	queue   int
	subject string
	cert    string
}

// certOf is the subject and the SHA-256 fingerprint (hex) of the leaf
// certificate p presented, or "".
func certOf(p *gpeer.Peer) (subject, fingerprint string) {
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.PeerCertificates) == 0 {
		return "", ""
	}
	leaf := info.State.PeerCertificates[0]
	sum := sha256.Sum256(leaf.Raw)
	return leaf.Subject.String(), hex.EncodeToString(sum[:])
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
func fetchWith(ctx context.Context, codec *streamCodec, r *remote, ticket []byte, out *column.Batch, maxRows int64, fields []engine.OutField,
	opts ...grpc.CallOption) (int, error) {
	pc, release, err := r.conns.take()
	if err != nil {
		return 0, err
	}
	defer release()
	var via gpeer.Peer // filled once the stream ended
	stream, err := pc.client.DoGet(ctx, &flight.Ticket{Ticket: ticket}, append(opts, grpc.ForceCodecV2(codec), grpc.Peer(&via))...)
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
	// A stream whose columns are not the run's may still be an empty
	// unit's (a pruned unit leaves whatever columns the peer's batch
	// had, as here): the engine's check refuses it whole, and it is
	// computed here. Such a stream is corrupt once it has a row.
	badColumns := sameColumns(out, fields)
	a.MaxRows = int(min(maxRows, math.MaxInt32))
	var meta []byte
	for rd.Next() {
		if badColumns != nil && rd.RecordBatch().NumRows() > 0 {
			return 0, fmt.Errorf("%w: %v", errCorrupt, badColumns)
		}
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
	if receivedHook != nil {
		receivedHook()
	}
	// Recorded before the check below, for a later reload (revoke.go): a
	// reload that reads the records before this is seen by that check.
	if r.conns.trust != nil && r.conns.roots != nil {
		r.conns.trust.accepted(&via)
	}
	// Accepted only if the peer is still trusted now that it is whole
	// (conns.trusted): a CA reload may have come since the call began.
	if err := r.conns.trusted(pc); err != nil {
		return 0, err
	}
	if trustedHook != nil {
		trustedHook()
	}
	if err := out.Check(); err != nil {
		return 0, err
	}
	return tr.Queue, nil
}

// receivedHook, when set (by tests), runs once a unit's stream has been
// received whole, before it is accepted.
var receivedHook func()

// trustedHook, when set (by tests), runs once a unit's stream has been
// found trusted (conns.trusted), before fetchWith returns it.
var trustedHook func()

// corrupt marks an error of a malformed message header as a corrupt
// stream (counted as such); any other error passes as it is.
func corrupt(err error) error {
	if errors.Is(err, errBadHeader) {
		return fmt.Errorf("%w: %w", errCorrupt, err)
	}
	return err
}

// sameColumns checks the columns a stream's schema gave out (before any
// row) against fields, the run's output columns, as engine.checkOutput
// does once the unit is whole; nil fields: not known.
func sameColumns(out *column.Batch, fields []engine.OutField) error {
	if fields == nil {
		return nil
	}
	if len(out.Columns) != len(fields) {
		return fmt.Errorf("%d columns, the run has %d", len(out.Columns), len(fields))
	}
	for i, f := range fields {
		c := &out.Columns[i]
		if c.Name != f.Name || c.Kind != f.Kind || c.DType != f.DType || (f.Kind == column.Fixed && c.Width != f.Width) {
			return fmt.Errorf("column %d is %q %v %v width %d, the run's %q %v %v width %d",
				i, c.Name, c.Kind, c.DType, c.Width, f.Name, f.Kind, f.DType, f.Width)
		}
	}
	return nil
}
