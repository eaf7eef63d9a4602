package iceberg

import (
	"bytes"
	"testing"

	ice "github.com/apache/iceberg-go"
)

// TestPlainPartition: a file's identity partition values become the
// PLAIN encoding of their columns' stored types, as an initial default
// would (plainDefault); a value that does not fit its column's type is
// left out.
func TestPlainPartition(t *testing.T) {
	cases := []struct {
		name string
		t    ice.Type
		v    any
		want []byte
		ok   bool
	}{
		{"int", ice.PrimitiveTypes.Int32, int32(-2), []byte{0xfe, 0xff, 0xff, 0xff}, true},
		{"int as long", ice.PrimitiveTypes.Int64, int32(7), []byte{7, 0, 0, 0, 0, 0, 0, 0}, true},
		{"long", ice.PrimitiveTypes.Int64, int64(1) << 40, []byte{0, 0, 0, 0, 0, 1, 0, 0}, true},
		{"string", ice.PrimitiveTypes.String, "ab", []byte{2, 0, 0, 0, 'a', 'b'}, true},
		{"bool", ice.PrimitiveTypes.Bool, true, []byte{1}, true},
		{"date", ice.PrimitiveTypes.Date, ice.Date(20000), []byte{0x20, 0x4e, 0, 0}, true},
		{"timestamp", ice.PrimitiveTypes.Timestamp, ice.Timestamp(1), []byte{1, 0, 0, 0, 0, 0, 0, 0}, true},
		{"double", ice.PrimitiveTypes.Float64, float64(1), []byte{0, 0, 0, 0, 0, 0, 0xf0, 0x3f}, true},
		{"null", ice.PrimitiveTypes.String, nil, nil, false},
		{"a long for an int", ice.PrimitiveTypes.Int32, int64(1), nil, false},
		{"a string for a date", ice.PrimitiveTypes.Date, "2026-11-29", nil, false},
	}
	for _, c := range cases {
		got, ok := plainPartition(c.t, c.v)
		if ok != c.ok || !bytes.Equal(got, c.want) {
			t.Errorf("%s: %v %v, want %v %v", c.name, got, ok, c.want, c.ok)
		}
	}
}
