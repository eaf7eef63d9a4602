package peer

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// streamCodec receives one unit stream's FlightData with one copy of
// each body, into buffers it borrows from a pool and gives back when the
// stream is done.
//
// gRPC's proto codec joins a message's received frames into one buffer
// and protobuf then copies each bytes field out of it into a new
// allocation, zeroed and faulted in per message: a unit's output was
// copied twice, and its memory touched three times, before the Arrow
// arrays saw it (SPILL-NOTES.md). This codec walks FlightData's four
// fields itself and copies the body once, from gRPC's frames into a
// pooled buffer aligned to 64 bytes, as Arrow's IPC format aligns buffers
// within a body; the arrays view that buffer until the assembler has
// copied them into the unit's batch (wire.go). The header and app
// metadata are small and copied as they are. The wire format is
// protobuf's: a peer sends with the stock codec, and the content subtype
// stays "proto".
//
// One codec serves one stream (a grpc.ForceCodecV2 call option): gRPC
// calls Unmarshal from the goroutine reading the stream, and the bodies it
// lent are given back (release) only once that reader and every record it
// made are released. Every other message, and marshalling, goes to gRPC's
// proto codec.
type streamCodec struct {
	proto  encoding.CodecV2
	bodies [][]byte
	wire   int64 // bytes of FlightData received
}

func newStreamCodec() *streamCodec { return &streamCodec{proto: encoding.GetCodecV2("proto")} }

func (c *streamCodec) Name() string { return "proto" }

func (c *streamCodec) Marshal(v any) (mem.BufferSlice, error) { return c.proto.Marshal(v) }

func (c *streamCodec) Unmarshal(data mem.BufferSlice, v any) error {
	fd, ok := v.(*flight.FlightData)
	if !ok {
		return c.proto.Unmarshal(data, v)
	}
	c.wire += int64(data.Len())
	r := data.Reader()
	defer r.Close()
	if err := unmarshalFlightData(r, data.Len(), fd, c.body); err != nil {
		return fmt.Errorf("flight data: %w", err)
	}
	return nil
}

// body lends an aligned buffer of n bytes for a message body.
func (c *streamCodec) body(n int) []byte {
	b := bodies.get(n)
	c.bodies = append(c.bodies, b)
	return b
}

// release gives back every body lent: call it only when nothing views
// them any more.
func (c *streamCodec) release() {
	for _, b := range c.bodies {
		bodies.put(b)
	}
	c.bodies = c.bodies[:0]
}

// bodies pools message bodies by size class: powers of two from 64 KiB
// to maxMessage. A class holds buffers of exactly its size, aligned to 64
// bytes; a body is a prefix of one.
var bodies bodyPool

type bodyPool struct{ classes [12]sync.Pool }

const minBodyShift = 16 // 64 KiB

// smallBody is the size below which a body is allocated, not pooled.
const smallBody = 16 << 10

func bodyClass(n int) int {
	c := 0
	for n > 1<<(minBodyShift+c) && c < len(bodies.classes)-1 {
		c++
	}
	return c
}

func (p *bodyPool) get(n int) []byte {
	if n < smallBody {
		// Exactly its size: a stream's bodies are held until it ends,
		// and many small messages must not each hold a pooled 64 KiB.
		return alignedBytes(n)
	}
	c := bodyClass(n)
	size := 1 << (minBodyShift + c)
	if n > size {
		return alignedBytes(n) // past maxMessage: gRPC refuses such messages anyway
	}
	if b, ok := p.classes[c].Get().(*[]byte); ok {
		return (*b)[:n]
	}
	return alignedBytes(size)[:n]
}

func (p *bodyPool) put(b []byte) {
	c := bodyClass(cap(b))
	if cap(b) != 1<<(minBodyShift+c) {
		return
	}
	b = b[:cap(b)]
	p.classes[c].Put(&b)
}

// byteReader is what unmarshalFlightData reads: a mem.Reader, or a
// bytes.Reader in tests.
type byteReader interface {
	io.Reader
	io.ByteReader
}

// unmarshalFlightData parses size bytes of protobuf wire format from r
// into fd.
func unmarshalFlightData(r byteReader, size int, fd *flight.FlightData, body func(int) []byte) error {
	*fd = flight.FlightData{}
	left := size
	for left > 0 {
		tag, n, err := readVarint(r)
		if err != nil {
			return err
		}
		left -= n
		num, typ := protowire.DecodeTag(tag)
		if num <= 0 {
			return errors.New("bad field number")
		}
		if typ != protowire.BytesType {
			n, err := skipScalar(r, typ)
			if err != nil {
				return fmt.Errorf("field %d: %w", num, err)
			}
			left -= n
			continue
		}
		l, n, err := readVarint(r)
		if err != nil {
			return err
		}
		left -= n
		if l > uint64(left) {
			return fmt.Errorf("field %d: %d bytes, %d left in the message", num, l, left)
		}
		var b []byte
		if num == 1000 {
			// A repeated body replaces the last (protobuf keeps the
			// last): it reuses the last one's buffer where that holds it,
			// so that what a message costs is bounded by its size, not
			// by its fields times the pool's least buffer.
			if fd.DataBody != nil && uint64(cap(fd.DataBody)) >= l {
				b = fd.DataBody[:l]
			} else {
				b = body(int(l))
			}
		} else {
			b = make([]byte, l)
		}
		if _, err := io.ReadFull(r, b); err != nil {
			return fmt.Errorf("field %d: %w", num, err)
		}
		left -= int(l)
		switch num {
		case 1: // a repeated message field merges, as protobuf does
			if fd.FlightDescriptor == nil {
				fd.FlightDescriptor = &flight.FlightDescriptor{}
			}
			if err := (proto.UnmarshalOptions{Merge: true}).Unmarshal(b, fd.FlightDescriptor); err != nil {
				return fmt.Errorf("flight descriptor: %w", err)
			}
		case 2:
			fd.DataHeader = b
		case 3:
			fd.AppMetadata = b
		case 1000:
			fd.DataBody = b
		}
	}
	if left < 0 {
		return errors.New("a field runs past the message")
	}
	return nil
}

// alignedBytes returns n bytes starting at a 64-byte boundary.
func alignedBytes(n int) []byte {
	b := make([]byte, n+63)
	off := int(-uintptr(unsafe.Pointer(unsafe.SliceData(b))) & 63)
	return b[off : off+n : off+n]
}

// readVarint reads a protobuf varint and says how many bytes it took.
func readVarint(r io.ByteReader) (uint64, int, error) {
	var v uint64
	for i := 0; i < 10; i++ {
		b, err := r.ReadByte()
		if err != nil {
			if err == io.EOF && i > 0 {
				err = io.ErrUnexpectedEOF
			}
			return 0, i, err
		}
		v |= uint64(b&0x7f) << (7 * i)
		if b < 0x80 {
			return v, i + 1, nil
		}
	}
	return 0, 10, errors.New("varint overflows 64 bits")
}

// skipScalar consumes a field of wire type typ other than bytes.
func skipScalar(r byteReader, typ protowire.Type) (int, error) {
	var skip [8]byte
	switch typ {
	case protowire.VarintType:
		_, n, err := readVarint(r)
		return n, err
	case protowire.Fixed32Type:
		_, err := io.ReadFull(r, skip[:4])
		return 4, err
	case protowire.Fixed64Type:
		_, err := io.ReadFull(r, skip[:])
		return 8, err
	}
	return 0, fmt.Errorf("wire type %d is not allowed in FlightData", typ)
}
