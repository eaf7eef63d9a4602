package ops_test

import (
	"context"
	"encoding/binary"
	"math"
	"slices"
	"testing"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/ops"
)

// A list column of dtype dt, one row per element of rows.
func typedList(name string, dt column.DType, rows [][]float64) column.Column {
	c := column.Column{Name: name, Kind: column.List, DType: dt, Width: 1, Len: len(rows), Offsets: []int64{0}}
	n := int64(0)
	for _, r := range rows {
		for _, v := range r {
			switch dt {
			case column.Float32:
				c.Data = binary.LittleEndian.AppendUint32(c.Data, math.Float32bits(float32(v)))
			case column.Float64:
				c.Data = binary.LittleEndian.AppendUint64(c.Data, math.Float64bits(v))
			case column.Int8:
				c.Data = append(c.Data, byte(int8(v)))
			case column.Int64:
				c.Data = binary.LittleEndian.AppendUint64(c.Data, uint64(int64(v)))
			}
			n++
		}
		c.Offsets = append(c.Offsets, n)
	}
	return c
}

// elems reads every element of a fixed-width column as float64.
func elems(t *testing.T, b *column.Batch, name string) []float64 {
	t.Helper()
	c := col(t, b, name)
	var out []float64
	for i := range c.Len * c.Width {
		switch c.DType {
		case column.Float32:
			out = append(out, float64(c.Float32s()[i]))
		case column.Float64:
			out = append(out, c.Float64s()[i])
		case column.Int8:
			out = append(out, float64(int8(c.Data[i])))
		case column.Int64:
			out = append(out, float64(c.Int64s()[i]))
		default:
			t.Fatalf("column %q is %v", name, c.DType)
		}
	}
	return out
}

// pad_value is a number: a fraction pads a float list, and an integer
// list refuses what its elements cannot hold, naming the field.
func TestSequencePadValue(t *testing.T) {
	cases := []struct {
		name, pad string
		dt        column.DType
		want      []float64 // the two rows, padded to 3
		err       string
	}{
		{"float32 list, a fraction", "1.5", column.Float32, []float64{7, 1.5, 1.5, 8, 9, 1.5}, ""},
		{"float64 list, negative", "-0.25", column.Float64, []float64{7, -0.25, -0.25, 8, 9, -0.25}, ""},
		{"float list, a whole number", "-1", column.Float32, []float64{7, -1, -1, 8, 9, -1}, ""},
		{"int8 list, in range", "-128", column.Int8, []float64{7, -128, -128, 8, 9, -128}, ""},
		{"int64 list, 1e3 is whole", "1e3", column.Int64, []float64{7, 1000, 1000, 8, 9, 1000}, ""},
		{"int64 list, a fraction", "1.5", column.Int64, nil,
			"pad_value 1.5 for an integer (int64) column; want a whole number"},
		{"int8 list, too large", "300", column.Int8, nil, "pad_value 300 does not fit int8 (-128 to 127)"},
		{"int64 list, beyond int64", "1e19", column.Int64, nil, "pad_value 1e+19 does not fit int64"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := batchOf(typedList("s", tc.dt, [][]float64{{7}, {8, 9}}))
			op := "- sequence: {column: s, length: 3, pad_value: " + tc.pad + "}"
			p, err := ops.Compile(context.Background(), job(t, "", op), fieldsOf(b), ops.Env{})
			if tc.err != "" {
				wantErr(t, err, tc.err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := elems(t, run(t, p, b), "s"); !slices.Equal(got, tc.want) {
				t.Errorf("rows %v, want %v", got, tc.want)
			}
		})
	}
}

// An int64 pad beyond 2^53 is kept exactly (it is not read through a
// float64).
func TestSequencePadValueExact(t *testing.T) {
	b := batchOf(listcol("s", [][]int64{{7}}, nil))
	p := compile(t, b, "", "- sequence: {column: s, length: 2, pad_value: 9007199254740993}")
	if got := ints(t, run(t, p, b), "s"); !slices.Equal(got, []int64{7, 9007199254740993}) {
		t.Errorf("rows %v", got)
	}
}
