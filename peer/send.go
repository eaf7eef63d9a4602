package peer

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow/ipc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

// Sending a unit without copying it.
//
// Flight's record writer serializes each record's body into one buffer
// (a copy) and gRPC's proto codec marshals the FlightData into another (a
// second copy), before TLS encrypts it into a third. The peer instead
// hands gRPC the record's Arrow buffers themselves, which view the unit's
// output batch: payloadSender writes each IPC payload as the protobuf
// encoding of a FlightData (a small prefix of tags and lengths, then the
// body's buffers and their padding) in an encodedFlightData, and the
// server's codec (sendCodec) passes that to gRPC as it is. The bytes on
// the wire are the same.
//
// The invariant is that nothing writes to the output batch while gRPC
// still holds a buffer viewing it: gRPC sends asynchronously, after
// SendMsg has returned. Every such buffer holds a reference on the
// batch's lease (batchLease), and only when the last is freed, by gRPC
// once the bytes are written, or by the handler once it is done with
// the batch, does the batch go back to the server's pool. A lease whose
// buffers gRPC never frees (a stream torn down oddly) leaves its batch to
// the garbage collector, never back in the pool. Buffers of at most
// mem.BufferPoolingThreshold bytes of capacity, which gRPC does not
// track, are copied instead.
//
// The handler waits until gRPC has freed every buffer it gave it
// (batchLease.sent), so that the unit's slot and memory are held until
// its output is written, not only queued.
//
// Rejected: a fresh output batch per unit with no reuse (every unit
// then grew every column from nothing).

// encodedFlightData is a FlightData already in protobuf wire format.
type encodedFlightData struct{ data mem.BufferSlice }

// sendCodec is the peer server's codec: encodedFlightData goes out as it
// is; everything else through gRPC's proto codec.
type sendCodec struct{ proto encoding.CodecV2 }

func newSendCodec() sendCodec { return sendCodec{proto: encoding.GetCodecV2("proto")} }

func (c sendCodec) Name() string { return "proto" }

func (c sendCodec) Marshal(v any) (mem.BufferSlice, error) {
	if e, ok := v.(*encodedFlightData); ok {
		return e.data, nil
	}
	return c.proto.Marshal(v)
}

func (c sendCodec) Unmarshal(data mem.BufferSlice, v any) error { return c.proto.Unmarshal(data, v) }

// batchLease counts the references to an output batch: the handler's,
// and one per buffer gRPC holds. release runs when the last is gone.
type batchLease struct {
	refs    atomic.Int32
	release func()
	// written is signaled each time gRPC frees one of the lease's
	// buffers: it has written them to the connection.
	written chan struct{}
}

func newLease(release func()) *batchLease {
	l := &batchLease{release: release, written: make(chan struct{}, 1)}
	l.refs.Store(1) // the handler's
	return l
}

// done drops a reference: the handler's, or (through Put) a buffer's.
func (l *batchLease) done() {
	if n := l.refs.Add(-1); n == 0 {
		l.release()
	} else if n < 0 {
		panic("BUG: peer: batch lease released more often than taken")
	}
}

// Get is never called for a lease's buffers; it is here because a
// mem.BufferPool must have it.
func (l *batchLease) Get(n int) *[]byte { b := make([]byte, n); return &b }

// Put is gRPC freeing one of the lease's buffers.
func (l *batchLease) Put(*[]byte) {
	l.done()
	select {
	case l.written <- struct{}{}:
	default:
	}
}

// errStalled says a requester read none of a unit's output for
// sendStall.
var errStalled = errors.New("the requester read nothing of the unit's output")

// sent waits until gRPC has written every buffer of the lease it was
// given, ctx is done, or stall passes without one being written
// (errStalled). A unit's slot and memory are held until then: SendMsg
// returns once a message is queued, and gRPC queues a message whole
// past its write quota, so a unit's output (one record up to 4 MiB) was
// otherwise held by gRPC, unsent, after its handler had given both
// back, for as long as a requester that reads nothing answers pings.
func (l *batchLease) sent(ctx context.Context, stall time.Duration) error {
	timer := time.NewTimer(stall)
	defer timer.Stop()
	for l.refs.Load() > 1 {
		select {
		case <-l.written:
			timer.Reset(stall)
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			return errStalled
		}
	}
	return nil
}

// buffer wraps b, which views the leased batch, for gRPC.
func (l *batchLease) buffer(b []byte) mem.Buffer {
	if mem.IsBelowBufferPoolingThreshold(cap(b)) {
		return mem.SliceBuffer(append([]byte(nil), b...))
	}
	l.refs.Add(1)
	p := new([]byte)
	*p = b
	return mem.NewBuffer(p, l)
}

// payloadSender is an ipc.PayloadWriter that sends each payload as a
// FlightData message without copying its body (see above). meta, while
// set, goes with every payload as its app metadata.
type payloadSender struct {
	stream grpc.ServerStream
	lease  *batchLease
	meta   []byte
}

func (s *payloadSender) Start() error { return nil }
func (s *payloadSender) Close() error { return nil }

func (s *payloadSender) WritePayload(p ipc.Payload) error {
	var body bodyParts
	if err := p.SerializeBody(&body); err != nil {
		return err
	}
	m := p.Meta()
	prefix := protowire.AppendTag(nil, 2, protowire.BytesType)
	prefix = protowire.AppendBytes(prefix, m.Bytes())
	m.Release()
	if len(s.meta) > 0 {
		prefix = protowire.AppendTag(prefix, 3, protowire.BytesType)
		prefix = protowire.AppendBytes(prefix, s.meta)
	}
	if body.size > 0 {
		prefix = protowire.AppendTag(prefix, 1000, protowire.BytesType)
		prefix = protowire.AppendVarint(prefix, uint64(body.size))
	}
	data := mem.BufferSlice{mem.SliceBuffer(prefix)}
	for _, b := range body.parts {
		data = append(data, s.lease.buffer(b))
	}
	if err := s.stream.SendMsg(&encodedFlightData{data: data}); err != nil {
		return fmt.Errorf("send a record: %w", err)
	}
	return nil
}

// bodyParts collects what Payload.SerializeBody writes, without copying:
// the record's buffers, and the ipc package's shared zero padding.
type bodyParts struct {
	parts [][]byte
	size  int
}

func (b *bodyParts) Write(p []byte) (int, error) {
	b.parts = append(b.parts, p)
	b.size += len(p)
	return len(p), nil
}
