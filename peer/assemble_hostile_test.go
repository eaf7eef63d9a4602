package peer

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lastmile/lastmile/column"
)

// TestAssembleHostileValidityFields: a stream's validity fields
// ("NAME\x00valid") come from the peer, as every other field does. One
// that follows no column of its name, or is of a type with no values
// buffer, is a corrupt stream: the assembler must refuse it with an
// error, never panic (the requester's spill worker runs it on a
// goroutine of the engine's, so a panic ends lastmiled and every
// trainer's feed).
func TestAssembleHostileValidityFields(t *testing.T) {
	mem := memory.DefaultAllocator
	i64 := func(v ...int64) arrow.Array {
		b := array.NewInt64Builder(mem)
		defer b.Release()
		b.AppendValues(v, nil)
		return b.NewArray()
	}
	u8 := func(v ...uint8) arrow.Array {
		b := array.NewUint8Builder(mem)
		defer b.Release()
		b.AppendValues(v, nil)
		return b.NewArray()
	}
	fsl := func() arrow.Array { // a fixed-size list of 1 uint8 per row: buffers [nil]
		b := array.NewFixedSizeListBuilder(mem, 1, arrow.PrimitiveTypes.Uint8)
		defer b.Release()
		vb := b.ValueBuilder().(*array.Uint8Builder)
		b.Append(true)
		vb.Append(1)
		return b.NewArray()
	}
	col := arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int64, Metadata: meta(column.Fixed, column.Int64, 1, "")}
	cases := []struct {
		name   string
		fields []arrow.Field
		arrs   func() []arrow.Array
	}{
		{"a validity field alone", []arrow.Field{{Name: "a" + validSuffix, Type: arrow.PrimitiveTypes.Uint8}},
			func() []arrow.Array { return []arrow.Array{u8(1)} }},
		{"a validity field of another column", []arrow.Field{col, {Name: "b" + validSuffix, Type: arrow.PrimitiveTypes.Uint8}},
			func() []arrow.Array { return []arrow.Array{i64(1), u8(1)} }},
		{"a validity field before its column", []arrow.Field{{Name: "a" + validSuffix, Type: arrow.PrimitiveTypes.Uint8}, col},
			func() []arrow.Array { return []arrow.Array{u8(1), i64(1)} }},
		{"a validity field with no values buffer", []arrow.Field{col, {Name: "a" + validSuffix, Type: arrow.FixedSizeListOf(1, arrow.PrimitiveTypes.Uint8)}},
			func() []arrow.Array { return []arrow.Array{i64(1), fsl()} }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			schema := arrow.NewSchema(c.fields, nil)
			arrs := c.arrs()
			rec := array.NewRecordBatch(schema, arrs, 1)
			for _, a := range arrs {
				a.Release()
			}
			var buf bytes.Buffer
			w := ipc.NewWriter(&buf, ipc.WithSchema(schema))
			if err := w.Write(rec); err != nil {
				t.Fatal(err)
			}
			w.Close()
			rec.Release()
			err := func() (err error) {
				defer func() {
					if p := recover(); p != nil {
						err = fmt.Errorf("PANIC: %v", p)
					}
				}()
				return assemble(&buf, &column.Batch{})
			}()
			if err == nil {
				t.Fatal("assembled a stream whose validity field belongs to no column")
			}
			if bytes.HasPrefix([]byte(err.Error()), []byte("PANIC")) {
				t.Fatalf("the assembler panicked on a peer's stream: %v", err)
			}
		})
	}
}
