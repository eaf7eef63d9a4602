package peer

import (
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/lastmile/lastmile/column"
)

// messages collects what an IPC writer emits, as FlightData.
type messages []*flight.FlightData

func (m *messages) Start() error { return nil }
func (m *messages) Close() error { return nil }
func (m *messages) WritePayload(p ipc.Payload) error {
	meta := p.Meta()
	defer meta.Release()
	var body bodyParts
	if err := p.SerializeBody(&body); err != nil {
		return err
	}
	fd := &flight.FlightData{DataHeader: append([]byte(nil), meta.Bytes()...)}
	for _, b := range body.parts {
		fd.DataBody = append(fd.DataBody, b...)
	}
	*m = append(*m, fd)
	return nil
}

// unitMessages are the FlightData of a unit's output of the compactable
// shapes, in the plain or the compact form: a schema, then records.
func unitMessages(t testing.TB, compact bool) messages {
	t.Helper()
	w := new(wireUnit)
	w.encode(compactable(rand.New(rand.NewPCG(13, 14)), 50), compact)
	schema, err := w.schema()
	if err != nil {
		t.Fatal(err)
	}
	var m messages
	iw := ipc.NewWriterWithPayloadWriter(&m, ipc.WithSchema(schema))
	if err := Records(&w.batch, schema, func(rec arrow.RecordBatch, _ bool) error { return iw.Write(rec) }); err != nil {
		t.Fatal(err)
	}
	iw.Close()
	return m
}

// fieldsVector is where a schema header stores its number of fields.
func fieldsVector(t testing.TB, header []byte) int {
	c := fbCheck{b: header}
	v := c.deref(c.field(c.table(c.root(), 2), 1))
	if c.err != nil {
		t.Fatal(c.err)
	}
	return v
}

// replay is a unit stream that yields fixed messages.
type replay struct{ m messages }

func (r *replay) Recv() (*flight.FlightData, error) {
	if len(r.m) == 0 {
		return nil, io.EOF
	}
	fd := r.m[0]
	r.m = r.m[1:]
	return fd, nil
}

func TestCheckMessage(t *testing.T) {
	for _, compact := range []bool{false, true} {
		m := unitMessages(t, compact)
		for i, fd := range m {
			if err := checkMessage(fd.DataHeader); err != nil {
				t.Fatalf("compact %v: message %d of a real stream refused: %v", compact, i, err)
			}
			// No prefix of a header makes the check read past it.
			for n := range len(fd.DataHeader) {
				checkMessage(fd.DataHeader[:n])
			}
		}
	}
	schema := unitMessages(t, true)[0].DataHeader
	huge := append([]byte(nil), schema...)
	binary.LittleEndian.PutUint32(huge[fieldsVector(t, huge):], 1<<30)
	cases := []struct {
		name   string
		header []byte
	}{
		{"a schema claiming 2^30 fields", huge},
		{"an empty header", []byte{}},
		{"a root past the end", []byte{0xff, 0xff, 0, 0}},
		{"a header past the bound", make([]byte, maxHeader+1)},
	}
	for _, c := range cases {
		if err := checkMessage(c.header); !errors.Is(err, errBadHeader) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	// Through the reader a requester uses: refused, not allocated.
	stream := &replay{m: messages{{DataHeader: huge}}}
	if _, err := flight.NewRecordReader(checkedStream{stream}); !errors.Is(err, errBadHeader) {
		t.Errorf("a stream whose schema claims 2^30 fields: %v", err)
	}
}

// FuzzMessageHeader: whatever header a peer sends, after a schema or as
// the schema, the requester's reader ends with a record or an error, and
// the process lives (arrow-go recovers its own panics; what it cannot
// survive is an allocation of the size a header claims).
func FuzzMessageHeader(f *testing.F) {
	m := unitMessages(f, true)
	for _, fd := range m {
		f.Add(fd.DataHeader, false)
	}
	f.Add(m[1].DataHeader, true)
	f.Fuzz(func(t *testing.T, header []byte, afterSchema bool) {
		fd := &flight.FlightData{DataHeader: header, DataBody: make([]byte, 1<<12)}
		stream := &replay{m: messages{fd}}
		if afterSchema {
			stream.m = messages{m[0], fd}
		}
		rd, err := flight.NewRecordReader(checkedStream{stream})
		if err != nil {
			return
		}
		defer rd.Release()
		for rd.Next() {
			var out column.Batch
			if a, err := NewAssembler(rd.Schema(), &out); err == nil {
				a.Add(rd.RecordBatch())
			}
		}
	})
}
