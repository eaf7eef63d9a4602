package peer

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

// TestStreamCodecRepeatedBodies: a FlightData message may repeat a
// field; protobuf keeps the last. The requester's codec gave every
// body field (number 1000) a buffer from its pool, of at least 64 KiB
// whatever the field's length, and kept each until the unit's stream
// was done (found by a review). A peer's message of nothing but empty
// body fields (three bytes each) so made the requester allocate 64 KiB for every three
// bytes received: gRPC's 64 MiB message limit lets one message cost
// about 1.4 TB, and the GPU host's daemon dies out of memory. What one
// message costs must be bounded by its size.
func TestStreamCodecRepeatedBodies(t *testing.T) {
	for _, c := range []struct {
		name   string
		fields int
		length int
	}{
		{"empty bodies", 2000, 0},
		{"one-byte bodies", 2000, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			var wire []byte
			for range c.fields {
				wire = protowire.AppendTag(wire, 1000, protowire.BytesType)
				wire = protowire.AppendBytes(wire, make([]byte, c.length))
			}
			codec := newStreamCodec()
			defer codec.release()
			var fd flight.FlightData
			err := codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(wire)}, &fd)
			held := 0
			for _, b := range codec.bodies {
				held += cap(b)
			}
			t.Logf("a message of %d bytes: err %v, %d body buffers of %d bytes held", len(wire), err, len(codec.bodies), held)
			if limit := 64*len(wire) + 1<<20; held > limit {
				t.Fatalf("a message of %d bytes made the codec hold %d bytes (%dx) in %d body buffers",
					len(wire), held, held/len(wire), len(codec.bodies))
			}
		})
	}
}

// TestStreamCodecSmallBodiesHeld: the codec keeps every message's body
// until the unit's stream is done (release), and kept each in a buffer
// of at least 64 KiB. A peer that sends many small messages (records of
// no rows, each with a few bytes of body: no row bound stops them) made
// the requester hold 64 KiB for every few dozen bytes received, until
// the unit's deadline. What a stream holds must stay in proportion to
// what it received.
func TestStreamCodecSmallBodiesHeld(t *testing.T) {
	codec := newStreamCodec()
	defer codec.release()
	wireBytes := 0
	for range 1000 {
		var wire []byte
		wire = protowire.AppendTag(wire, 2, protowire.BytesType)
		wire = protowire.AppendBytes(wire, make([]byte, 24)) // a header's worth
		wire = protowire.AppendTag(wire, 1000, protowire.BytesType)
		wire = protowire.AppendBytes(wire, make([]byte, 8))
		wireBytes += len(wire)
		var fd flight.FlightData
		if err := codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(wire)}, &fd); err != nil {
			t.Fatal(err)
		}
	}
	held := 0
	for _, b := range codec.bodies {
		held += cap(b)
	}
	t.Logf("%d messages, %d bytes received, %d bytes of bodies held", 1000, wireBytes, held)
	if limit := 16*wireBytes + 1<<20; held > limit {
		t.Fatalf("%d bytes received hold %d bytes of body buffers (%dx)", wireBytes, held, held/wireBytes)
	}
}
