package peer

import (
	"bytes"
	"testing"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// wireOf is fd in protobuf wire format, as a peer's stock codec sends it,
// with extra appended (fields FlightData does not know).
func wireOf(t testing.TB, fd *flight.FlightData, extra []byte) []byte {
	b, err := proto.Marshal(fd)
	if err != nil {
		t.Fatal(err)
	}
	return append(b, extra...)
}

// TestStreamCodec: the codec reads what protobuf writes, field for field,
// skips fields it does not know, gives the body a 64-byte-aligned buffer
// from its pool, and refuses cut or malformed messages.
func TestStreamCodec(t *testing.T) {
	body := bytes.Repeat([]byte{1, 2, 3, 4, 5, 6, 7}, 40000)
	unknown := protowire.AppendTag(nil, 7, protowire.VarintType)
	unknown = protowire.AppendVarint(unknown, 300)
	unknown = protowire.AppendTag(unknown, 8, protowire.Fixed64Type)
	unknown = protowire.AppendFixed64(unknown, 9)
	unknown = protowire.AppendTag(unknown, 9, protowire.Fixed32Type)
	unknown = protowire.AppendFixed32(unknown, 9)
	unknown = protowire.AppendTag(unknown, 10, protowire.BytesType)
	unknown = protowire.AppendBytes(unknown, []byte("x"))
	full := &flight.FlightData{
		FlightDescriptor: &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"a", "b"}},
		DataHeader:       []byte("header"), AppMetadata: []byte(`{"rows":3}`), DataBody: body,
	}
	tests := []struct {
		name string
		wire []byte
		want *flight.FlightData
	}{
		{"every field", wireOf(t, full, nil), full},
		{"unknown fields", wireOf(t, full, unknown), full},
		{"body only", wireOf(t, &flight.FlightData{DataBody: body[:100]}, nil), &flight.FlightData{DataBody: body[:100]}},
		{"empty", nil, &flight.FlightData{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newStreamCodec()
			// Split the message over several buffers, as gRPC's frames are.
			var data mem.BufferSlice
			for rest := tt.wire; len(rest) > 0; {
				n := min(len(rest), 16384)
				data = append(data, mem.SliceBuffer(rest[:n]))
				rest = rest[n:]
			}
			var got flight.FlightData
			if err := c.Unmarshal(data, &got); err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(&got, tt.want) {
				t.Fatalf("got %v", &got)
			}
			if len(got.DataBody) > 0 && uintptr(unsafe.Pointer(&got.DataBody[0]))%64 != 0 {
				t.Errorf("body not aligned to 64 bytes")
			}
			if len(got.DataBody) > 0 && len(c.bodies) != 1 {
				t.Errorf("%d bodies lent, want 1", len(c.bodies))
			}
			c.release()
		})
	}
	bad := map[string][]byte{
		"cut in the body":     wireOf(t, full, nil)[:len(wireOf(t, full, nil))-10],
		"cut in a tag":        {0x80},
		"length past the end": append(protowire.AppendTag(nil, 2, protowire.BytesType), 0x20, 1),
		"field number 0":      {0x02, 0x00},
		"group wire type":     protowire.AppendTag(nil, 5, protowire.StartGroupType),
	}
	for name, wire := range bad {
		t.Run(name, func(t *testing.T) {
			var got flight.FlightData
			if err := newStreamCodec().Unmarshal(mem.BufferSlice{mem.SliceBuffer(wire)}, &got); err == nil {
				t.Errorf("no error for %x", wire)
			}
		})
	}
}

// TestBodyPool: bodies come back in their size class and are reused;
// sizes below smallBody or past the largest class are not pooled.
func TestBodyPool(t *testing.T) {
	for _, n := range []int{0, 1, smallBody - 1} { // small bodies: their own size, not pooled
		if b := bodies.get(n); len(b) != n || cap(b) != n {
			t.Errorf("get(%d): len %d cap %d, want exactly %d", n, len(b), cap(b), n)
		}
	}
	for _, n := range []int{smallBody, 65536, 65537, 3 << 20, maxMessage} {
		b := bodies.get(n)
		if len(b) != n || cap(b) != 1<<(minBodyShift+bodyClass(n)) {
			t.Errorf("get(%d): len %d cap %d, want class %d", n, len(b), cap(b), bodyClass(n))
		}
		bodies.put(b)
	}
	if c := bodyClass(maxMessage); 1<<(minBodyShift+c) < maxMessage {
		t.Errorf("the largest class (%d bytes) is smaller than a message may be (%d)", 1<<(minBodyShift+c), maxMessage)
	}
}

// FuzzStreamCodec: any bytes give a FlightData or an error, never a
// panic; what protobuf accepts as FlightData, the codec reads the same.
func FuzzStreamCodec(f *testing.F) {
	f.Add(wireOf(f, &flight.FlightData{DataHeader: []byte("h"), DataBody: []byte("body")}, nil))
	f.Add([]byte{0x82, 0x3e, 0x01, 0x00})
	d1, _ := proto.Marshal(&flight.FlightData{FlightDescriptor: &flight.FlightDescriptor{Path: []string{"a"}}})
	d2, _ := proto.Marshal(&flight.FlightData{FlightDescriptor: &flight.FlightDescriptor{Cmd: []byte("c")}})
	f.Add(append(d1, d2...)) // a message field twice: merged
	f.Fuzz(func(t *testing.T, wire []byte) {
		var got flight.FlightData
		err := newStreamCodec().Unmarshal(mem.BufferSlice{mem.SliceBuffer(wire)}, &got)
		var want flight.FlightData
		werr := proto.Unmarshal(wire, &want)
		if err == nil && werr == nil && !sameFields(&got, &want) {
			t.Fatalf("codec read %v, protobuf %v", &got, &want)
		}
		if err != nil && werr == nil && len(wire) > 0 && !hasGroup(wire) {
			t.Fatalf("codec refused what protobuf accepts: %v", err)
		}
	})
}

// sameFields compares FlightData's four fields, not the unknown ones
// protobuf keeps and the codec skips.
func sameFields(a, b *flight.FlightData) bool {
	return bytes.Equal(a.DataHeader, b.DataHeader) && bytes.Equal(a.AppMetadata, b.AppMetadata) &&
		bytes.Equal(a.DataBody, b.DataBody) && proto.Equal(a.FlightDescriptor, b.FlightDescriptor)
}

// hasGroup reports whether wire holds a group field (which protobuf
// accepts as an unknown field and FlightData never carries).
func hasGroup(wire []byte) bool {
	for len(wire) > 0 {
		_, typ, n := protowire.ConsumeTag(wire)
		if n < 0 {
			return false
		}
		if typ == protowire.StartGroupType || typ == protowire.EndGroupType {
			return true
		}
		m := protowire.ConsumeFieldValue(0, typ, wire[n:])
		if m < 0 {
			return false
		}
		wire = wire[n+m:]
	}
	return false
}
