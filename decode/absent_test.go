package decode

import (
	"encoding/binary"
	"errors"
	"math"
	"path/filepath"
	"testing"

	"github.com/lastmile/lastmile/column"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/format"
)

// TestAbsentDefaults: a column added with an initial default reads that
// value in every row of a file written before, decoded as a file holding
// it would give it (hashed, a decimal converted, a boolean as a byte),
// every row valid; a default that does not fit its type is refused.
func TestAbsentDefaults(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.parquet")
	writeIDRows(t, path, 0, 300, func(id int64, s float64, g []int64) idRowAfter { return idRowAfter{id, s, g} })
	le := func(n int, v uint64) []byte {
		b := make([]byte, 8)
		binary.LittleEndian.PutUint64(b, v)
		return b[:n]
	}
	str := func(s string) []byte { return append(le(4, uint64(len(s))), s...) }
	decimal := leafElement("x", 12, format.Optional, format.Int32)
	decimal.LogicalType.Value = &format.DecimalType{Precision: 9, Scale: 2}
	decimal.ConvertedType.Set(deprecated.Decimal)
	utf8 := leafElement("x", 12, format.Optional, format.ByteArray)
	utf8.ConvertedType.Set(deprecated.UTF8)
	uuid := leafElement("x", 12, format.Optional, format.FixedLenByteArray)
	uuid.TypeLength.Set(16)
	uuid.LogicalType.Value = &format.UUIDType{}
	fixed := leafElement("x", 12, format.Optional, format.FixedLenByteArray)
	fixed.TypeLength.Set(2)
	nanos := leafElement("x", 12, format.Optional, format.Int64)
	nanos.LogicalType.Value = &format.TimestampType{Unit: format.TimeUnit{Value: &format.NanoSeconds{}}}
	clock := leafElement("x", 12, format.Optional, format.Int64)
	clock.LogicalType.Value = &format.TimeType{Unit: format.TimeUnit{Value: &format.MicroSeconds{}}}
	clock.ConvertedType.Set(deprecated.TimeMicros)
	id16 := []byte("0123456789abcdef")
	tests := []struct {
		name   string
		el     format.SchemaElement
		plain  []byte
		hash   uint64
		want   []byte // one row's value as decoded; nil: refused
		refuse error
	}{
		{"double", leafElement("x", 12, format.Optional, format.Double), le(8, math.Float64bits(0.5)), 0, le(8, math.Float64bits(0.5)), nil},
		{"long, required", leafElement("x", 12, format.Required, format.Int64), le(8, 7), 0, le(8, 7), nil},
		{"int", leafElement("x", 12, format.Optional, format.Int32), le(4, 0xfffffffe), 0, le(4, 0xfffffffe), nil},
		{"boolean", leafElement("x", 12, format.Optional, format.Boolean), []byte{1}, 0, []byte{1}, nil},
		{"string", utf8, str("free"), 0, []byte("free"), nil},
		{"string, hashed", utf8, str("free"), 1000, nil, nil},
		{"decimal(9, 2)", decimal, le(4, 1234), 0, le(8, math.Float64bits(12.34)), nil},
		{"binary", leafElement("x", 12, format.Optional, format.ByteArray), str("\x00\xff"), 0, []byte{0, 0xff}, nil},
		{"uuid, hashed", uuid, id16, 1000, nil, nil},
		{"fixed[2], hashed", fixed, []byte{0x0a, 0xff}, 1000, nil, nil},
		{"timestamp_ns", nanos, le(8, 1e9+2), 0, le(8, 1e9+2), nil},
		{"time", clock, le(8, 1e6+2), 0, le(8, 1e6+2), nil},
		{"a fixed[2] default of 3 bytes", fixed, []byte{1, 2, 3}, 1000, nil, ErrCorrupt},
		{"a uuid default of 15 bytes", uuid, id16[1:], 1000, nil, ErrCorrupt},
		{"a long default of 4 bytes", leafElement("x", 12, format.Optional, format.Int64), le(4, 7), 0, nil, ErrCorrupt},
		{"a string default with a wrong length", utf8, append(le(4, 9), "free"...), 0, nil, ErrCorrupt},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			table := &TableSchema{IDs: map[string]int32{"id": 1, "x": 12},
				Stored: map[int32][]format.SchemaElement{12: {tc.el}}, Defaults: map[int32][]byte{12: tc.plain}}
			opts := PlanOptions{Columns: []string{"id", "x"}, Table: func(string) *TableSchema { return table }}
			if tc.hash > 0 {
				opts.Hashed = map[string]uint64{"x": tc.hash}
			}
			plan, err := PlanFiles(t.Context(), []string{path}, opts)
			if tc.refuse != nil {
				if !errors.Is(err, tc.refuse) {
					t.Fatalf("plan: %v, want %v", err, tc.refuse)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want
			if tc.hash > 0 {
				want = make([]byte, 8)
				hash := func() error { return hashPlain(want, tc.plain, 1, tc.hash) }
				if tl, ok := tc.el.TypeLength.Get(); ok {
					hash = func() error { return hashFixed(want, tc.plain, 1, int(tl), tc.hash) }
				}
				if err := hash(); err != nil {
					t.Fatal(err)
				}
			}
			n := eachUnit(t, plan, func(u Unit, b *column.Batch, _ int) {
				c := &b.Columns[1]
				if c.NullCount() != 0 || c.Len != b.Rows {
					t.Fatalf("%d rows, %d null; want %d, none null", c.Len, c.NullCount(), b.Rows)
				}
				for r := range b.Rows {
					var got []byte
					if c.Kind == column.Fixed {
						w := c.DType.Size()
						got = c.Data[r*w : (r+1)*w]
					} else {
						got = c.Data[c.Offsets[r]:c.Offsets[r+1]]
					}
					if string(got) != string(want) {
						t.Fatalf("row %d: %v, want %v", r, got, want)
					}
				}
			})
			if n != 300 {
				t.Fatalf("%d rows, want 300", n)
			}
			decodeVerified(t, plan)
		})
	}
}
