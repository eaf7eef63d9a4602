package peer

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lastmile/lastmile/column"
)

// sendThrough encodes b in the given form, writes it as an Arrow IPC
// stream, as a peer would, and rebuilds it into out. It returns the
// stream's bytes and records.
func sendThrough(t testing.TB, b *column.Batch, compact bool, out *column.Batch) (w *wireUnit, size, records int) {
	t.Helper()
	w = new(wireUnit)
	w.encode(b, compact)
	schema, err := w.schema()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	iw := ipc.NewWriter(&buf, ipc.WithSchema(schema))
	if err := Records(&w.batch, schema, func(rec arrow.RecordBatch, _ bool) error { records++; return iw.Write(rec) }); err != nil {
		t.Fatal(err)
	}
	iw.Close()
	size = buf.Len()
	if err := assemble(&buf, out); err != nil {
		t.Fatal(err)
	}
	return w, size, records
}

func assemble(buf *bytes.Buffer, out *column.Batch) error {
	rd, err := ipc.NewReader(buf)
	if err != nil {
		return err
	}
	defer rd.Release()
	a, err := NewAssembler(rd.Schema(), out)
	if err != nil {
		return err
	}
	for rd.Next() {
		if err := a.Add(rd.RecordBatch()); err != nil {
			return err
		}
	}
	return rd.Err()
}

func sameBatch(t *testing.T, got, want *column.Batch) {
	t.Helper()
	if err := got.Check(); err != nil {
		t.Fatal(err)
	}
	if got.Rows != want.Rows || len(got.Columns) != len(want.Columns) {
		t.Fatalf("rows %d columns %d, want %d %d", got.Rows, len(got.Columns), want.Rows, len(want.Columns))
	}
	for i := range want.Columns {
		g, w := &got.Columns[i], &want.Columns[i]
		if g.Name != w.Name || g.Kind != w.Kind || g.DType != w.DType || g.Width != w.Width || g.Len != w.Len ||
			!bytes.Equal(g.Data, w.Data) || !reflect.DeepEqual(nilIfEmpty(g.Offsets), nilIfEmpty(w.Offsets)) ||
			(g.Valid == nil) != (w.Valid == nil) || !bytes.Equal(g.Valid, w.Valid) {
			t.Fatalf("column %s differs after the round trip", w.Name)
		}
	}
	if Checksum(got) != Checksum(want) {
		t.Fatal("checksums differ")
	}
}

// fixedInts makes a fixed int column of dtype dt, width w, whose row j
// holds the values val(j, k).
func fixedInts(name string, dt column.DType, w, rows int, val func(j, k int) int64) column.Column {
	c := column.Column{Name: name, Kind: column.Fixed, DType: dt, Width: w, Len: rows, Data: make([]byte, rows*w*dt.Size())}
	for j := range rows {
		for k := range w {
			putInt(c.Data[(j*w+k)*dt.Size():], dt, val(j, k))
		}
	}
	return c
}

func putInt(p []byte, dt column.DType, v int64) {
	switch dt.Size() {
	case 1:
		p[0] = byte(v)
	case 2:
		binary.LittleEndian.PutUint16(p, uint16(v))
	case 4:
		binary.LittleEndian.PutUint32(p, uint32(v))
	case 8:
		binary.LittleEndian.PutUint64(p, uint64(v))
	}
}

// compactable makes a batch of the shapes the compact form is for, and
// of the edges where it must keep its hands off.
func compactable(r *rand.Rand, rows int) *column.Batch {
	b := &column.Batch{Rows: rows}
	lens := make([]int, rows)
	for j := range lens {
		lens[j] = r.IntN(17) // 0 (all padding) to 16 (none)
	}
	seq := func(j, k int) int64 {
		if k < lens[j] {
			return int64(1 + r.IntN(50000))
		}
		return 0
	}
	b.Columns = append(b.Columns,
		fixedInts("hashed", column.Int64, 1, rows, func(j, k int) int64 { return int64(r.IntN(1000003)) }),
		fixedInts("signed", column.Int64, 1, rows, func(j, k int) int64 { return int64(r.IntN(200)) - 100 }),
		fixedInts("int64 min", column.Int64, 1, rows, func(j, k int) int64 {
			if j == rows/2 {
				return math.MinInt64
			}
			return 1
		}),
		fixedInts("int32 edge", column.Int32, 1, rows, func(j, k int) int64 { return int64(-32768 + j%2*65535) }),
		fixedInts("int16 small", column.Int16, 1, rows, func(j, k int) int64 { return int64(r.IntN(256)) - 128 }),
		fixedInts("int8", column.Int8, 1, rows, func(j, k int) int64 { return int64(r.IntN(256)) - 128 }),
		fixedInts("padded right", column.Int64, 16, rows, seq),
		fixedInts("padded left", column.Int64, 16, rows, func(j, k int) int64 { return seq(j, 15-k) }),
		fixedInts("dense", column.Int64, 16, rows, func(j, k int) int64 { return int64(r.Uint64()) | 1 }),
		fixedInts("small wide", column.Int64, 4, rows, func(j, k int) int64 { return int64(1 + r.IntN(30000)) }),
	)
	// Float rows padded with zeros, some ending in -0.0, which is not zero
	// bytes and must travel.
	f := column.Column{Name: "float padded", Kind: column.Fixed, DType: column.Float32, Width: 8, Len: rows, Data: make([]byte, rows*32)}
	for j := range rows {
		for k := range r.IntN(9) {
			binary.LittleEndian.PutUint32(f.Data[j*32+4*k:], math.Float32bits(float32(k+1)))
		}
		if j%5 == 0 {
			binary.LittleEndian.PutUint32(f.Data[j*32+28:], math.Float32bits(float32(math.Copysign(0, -1))))
		}
	}
	// A list of small ids with nulls (empty rows).
	l := column.Column{Name: "history", Kind: column.List, DType: column.Int64, Len: rows, Offsets: make([]int64, rows+1), Valid: make([]byte, rows)}
	for j := range rows {
		n := 0
		if j%7 != 0 {
			l.Valid[j] = 1
			n = r.IntN(40)
		}
		for range n {
			l.Data = binary.LittleEndian.AppendUint64(l.Data, uint64(r.IntN(50000)))
		}
		l.Offsets[j+1] = l.Offsets[j] + int64(n)
	}
	b.Columns = append(b.Columns, f, l)
	return b
}

func TestCompactRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	out := &column.Batch{}
	for _, rows := range []int{0, 1, 1000, 20000} {
		b := compactable(r, rows)
		_, plain, _ := sendThrough(t, b, false, out)
		sameBatch(t, out, b)
		w, compact, _ := sendThrough(t, b, true, out)
		sameBatch(t, out, b)
		if rows == 0 {
			continue
		}
		// How each column travels.
		want := map[string]colForm{
			"hashed":       {elem: column.Int32},
			"signed":       {elem: column.Int8},
			"int64 min":    {elem: column.Int64},
			"int32 edge":   {elem: column.Int16},
			"int16 small":  {elem: column.Int8},
			"int8":         {elem: column.Int8},
			"padded right": {elem: column.Int32, trim: trimTail},
			"padded left":  {elem: column.Int32, trim: trimHead},
			"dense":        {elem: column.Int64},
			"small wide":   {elem: column.Int16},
			"float padded": {elem: column.Float32, trim: trimTail},
			"history":      {elem: column.Int32},
		}
		if rows == 1 {
			continue // one row's values may fit anything
		}
		for i, c := range b.Columns {
			if w.forms[i] != want[c.Name] {
				t.Errorf("%d rows: column %q travels as %+v, want %+v", rows, c.Name, w.forms[i], want[c.Name])
			}
		}
		t.Logf("%d rows: %d bytes plain, %d compact", rows, plain, compact)
		if compact > plain*6/10 {
			t.Errorf("%d rows: the compact stream is %d bytes, the plain one %d", rows, compact, plain)
		}
	}
}

// TestCompactRandomBatches: every kind and dtype, random bytes (nothing
// to narrow or trim but by chance), through the compact form.
func TestCompactRandomBatches(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	out := &column.Batch{}
	for _, rows := range []int{0, 1, 600} {
		b := randomBatch(r, rows, rows == 600)
		sendThrough(t, b, true, out)
		sameBatch(t, out, b)
	}
}

// hostile builds a one-column stream from a field and array by hand.
func hostile(t *testing.T, f arrow.Field, arr arrow.Array) *bytes.Buffer {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{f}, nil)
	rec := array.NewRecordBatch(schema, []arrow.Array{arr}, int64(arr.Len()))
	defer rec.Release()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(schema))
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	w.Close()
	return &buf
}

func meta(kind column.Kind, dt column.DType, width int, trim string) arrow.Metadata {
	keys := []string{"lastmile.kind", "lastmile.dtype", "lastmile.width"}
	vals := []string{strconv.Itoa(int(kind)), strconv.Itoa(int(dt)), strconv.Itoa(width)}
	if trim != "" {
		keys, vals = append(keys, "lastmile.trim"), append(vals, trim)
	}
	return arrow.NewMetadata(keys, vals)
}

// TestCompactRefusesWhatItCannotCarry: a stream whose fields claim a form
// their data does not fit is corrupt, never assembled.
func TestCompactRefusesWhatItCannotCarry(t *testing.T) {
	mem := memory.DefaultAllocator
	list32 := func(vals []int32, offs []int32) arrow.Array {
		lb := array.NewListBuilder(mem, arrow.PrimitiveTypes.Int32)
		defer lb.Release()
		vb := lb.ValueBuilder().(*array.Int32Builder)
		for j := 0; j+1 < len(offs); j++ {
			lb.Append(true)
			vb.AppendValues(vals[offs[j]:offs[j+1]], nil)
		}
		return lb.NewArray()
	}
	i32 := func(v ...int32) arrow.Array {
		b := array.NewInt32Builder(mem)
		defer b.Release()
		b.AppendValues(v, nil)
		return b.NewArray()
	}
	f64 := func(v ...float64) arrow.Array {
		b := array.NewFloat64Builder(mem)
		defer b.Release()
		b.AppendValues(v, nil)
		return b.NewArray()
	}
	cases := []struct {
		name string
		f    arrow.Field
		arr  arrow.Array
		want string
	}{
		{"a trimmed row longer than its width", arrow.Field{Name: "s", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Metadata: meta(column.Fixed, column.Int64, 2, "tail")},
			list32([]int32{1, 2, 3}, []int32{0, 3}), "more than its width"},
		{"a trimmed list column", arrow.Field{Name: "s", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Metadata: meta(column.List, column.Int64, 0, "tail")},
			list32([]int32{1}, []int32{0, 1}), "does not carry"},
		{"a trimmed scalar", arrow.Field{Name: "s", Type: arrow.PrimitiveTypes.Int32, Metadata: meta(column.Fixed, column.Int64, 1, "head")},
			i32(1), "does not carry"},
		{"an unknown trim", arrow.Field{Name: "s", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Metadata: meta(column.Fixed, column.Int64, 4, "middle")},
			list32([]int32{1}, []int32{0, 1}), "trimmed"},
		{"narrowed into a float", arrow.Field{Name: "s", Type: arrow.PrimitiveTypes.Int32, Metadata: meta(column.Fixed, column.Float64, 1, "")},
			i32(1), "do not carry"},
		{"widened", arrow.Field{Name: "s", Type: arrow.PrimitiveTypes.Float64, Metadata: meta(column.Fixed, column.Int32, 1, "")},
			f64(1), "do not carry"},
		{"narrowed no narrower", arrow.Field{Name: "s", Type: arrow.PrimitiveTypes.Int32, Metadata: meta(column.Fixed, column.Int16, 1, "")},
			i32(1), "do not carry"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			defer c.arr.Release()
			err := assemble(hostile(t, c.f, c.arr), &column.Batch{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want one saying %q", err, c.want)
			}
		})
	}
}

// FuzzCompactRoundTrip: whatever the values, the compact form gives back
// the batch byte for byte.
func FuzzCompactRoundTrip(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, uint8(2))
	f.Add(bytes.Repeat([]byte{0xff}, 64), uint8(4))
	f.Add([]byte{0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80}, uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, width uint8) {
		w := int(width%8) + 1
		data = append(make([]byte, 0, len(data)+8), data...) // aligned, as a decoder's buffers are
		out := &column.Batch{}
		for _, dt := range []column.DType{column.Int16, column.Int32, column.Int64, column.Float32} {
			rows := len(data) / (w * dt.Size())
			c := column.Column{Name: "c", Kind: column.Fixed, DType: dt, Width: w, Len: rows, Data: data[:rows*w*dt.Size()]}
			l := column.Column{Name: "l", Kind: column.List, DType: dt, Len: 1, Offsets: []int64{0, int64(rows * w)}, Data: c.Data}
			b := &column.Batch{Rows: rows, Columns: []column.Column{c}}
			sendThrough(t, b, true, out)
			sameBatch(t, out, b)
			b = &column.Batch{Rows: 1, Columns: []column.Column{l}}
			sendThrough(t, b, true, out)
			sameBatch(t, out, b)
		}
	})
}

// BenchmarkWireForms: a unit's output of the shapes the compact form is
// for, encoded, written as an Arrow IPC stream and assembled again, in
// each form (no TLS, no gRPC: the bytes those would carry are reported).
func BenchmarkWireForms(b *testing.B) {
	batch := compactable(rand.New(rand.NewPCG(9, 10)), 4096)
	for _, form := range []struct {
		name    string
		compact bool
	}{{"plain", false}, {"compact", true}} {
		b.Run(form.name, func(b *testing.B) {
			out := &column.Batch{}
			var wire int
			b.SetBytes(int64(batch.Bytes()))
			for b.Loop() {
				_, wire, _ = sendThrough(b, batch, form.compact, out)
			}
			b.ReportMetric(float64(wire)/float64(batch.Bytes()), "wire/output")
		})
	}
}

// FuzzAssemble: whatever a field claims and its arrays hold (lengths,
// offsets and values as they come off the wire), the assembler gives a
// batch that passes its checks, or an error; it never panics. (Arrow's
// IPC reader, which turns the stream's bytes into the arrays, is
// arrow-go's and not fuzzed here.)
func FuzzAssemble(f *testing.F) {
	f.Add(uint8(column.Fixed), uint8(column.Int64), uint8(4), uint8(trimTail), uint8(1), uint16(2),
		[]byte{0, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0}, []byte{1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0})
	f.Add(uint8(column.List), uint8(column.Int64), uint8(0), uint8(trimNone), uint8(2), uint16(1),
		[]byte{0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0}, []byte{7, 0, 0, 0, 0, 0, 0, 0})
	f.Add(uint8(column.Fixed), uint8(column.Int32), uint8(1), uint8(trimNone), uint8(0), uint16(3), []byte{}, []byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, kind, dtype, width, trim, typ uint8, rows uint16, offs, vals []byte) {
		offs = append(make([]byte, 0, len(offs)+8), offs...) // aligned, as the codec's buffers are
		vals = append(make([]byte, 0, len(vals)+8), vals...)
		elem := []arrow.DataType{arrow.PrimitiveTypes.Int8, arrow.PrimitiveTypes.Int16, arrow.PrimitiveTypes.Int32,
			arrow.PrimitiveTypes.Int64, arrow.PrimitiveTypes.Float32}[int(typ>>3)%5]
		n := int(rows % 512)
		var d arrow.ArrayData
		child := array.NewData(elem, len(vals)/max(elem.(arrow.FixedWidthDataType).Bytes(), 1),
			[]*memory.Buffer{nil, memory.NewBufferBytes(vals)}, nil, 0, 0)
		defer child.Release()
		var ft arrow.DataType
		switch typ % 8 {
		case 0:
			ft = elem
			d = array.NewData(elem, n, []*memory.Buffer{nil, memory.NewBufferBytes(vals)}, nil, 0, 0)
		case 1:
			ft = arrow.ListOf(elem)
			d = array.NewData(ft, n, []*memory.Buffer{nil, memory.NewBufferBytes(offs)}, []arrow.ArrayData{child}, 0, 0)
		case 2:
			ft = arrow.LargeListOf(elem)
			d = array.NewData(ft, n, []*memory.Buffer{nil, memory.NewBufferBytes(offs)}, []arrow.ArrayData{child}, 0, 0)
		case 3:
			ft = arrow.FixedSizeListOf(int32(width%16)+1, elem)
			d = array.NewData(ft, n, []*memory.Buffer{nil}, []arrow.ArrayData{child}, 0, 0)
		case 4:
			ft = arrow.BinaryTypes.Binary
			d = array.NewData(ft, n, []*memory.Buffer{nil, memory.NewBufferBytes(offs), memory.NewBufferBytes(vals)}, nil, 0, 0)
		default:
			ft = arrow.BinaryTypes.LargeBinary
			d = array.NewData(ft, n, []*memory.Buffer{nil, memory.NewBufferBytes(offs), memory.NewBufferBytes(vals)}, nil, 0, 0)
		}
		defer d.Release()
		trimName := ""
		if trim%3 != trimNone {
			trimName = trimNames[trim%3]
		}
		field := arrow.Field{Name: "c", Type: ft, Metadata: meta(column.Kind(kind%3), column.DType(dtype%12), int(width%16), trimName)}
		schema := arrow.NewSchema([]arrow.Field{field}, nil)
		var out column.Batch
		a, err := NewAssembler(schema, &out)
		if err != nil {
			return
		}
		arr := arrayOf(d)
		if arr == nil {
			return // arrow's own checks refuse these buffers
		}
		defer arr.Release()
		rec := array.NewRecordBatch(schema, []arrow.Array{arr}, int64(n))
		defer rec.Release()
		if a.Add(rec) == nil {
			if err := out.Check(); err != nil {
				t.Fatalf("assembled a batch that fails its checks: %v", err)
			}
		}
	})
}

// arrayOf makes an array of d, or nil where arrow refuses d (it panics).
func arrayOf(d arrow.ArrayData) (arr arrow.Array) {
	defer func() {
		if recover() != nil {
			arr = nil
		}
	}()
	return array.MakeFromData(d)
}
