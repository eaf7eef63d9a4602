package iceberg

import (
	"testing"
	"time"

	ice "github.com/apache/iceberg-go"
)

// TestTimeBounds: date and timestamp column bounds bound a filter in the
// numbers the columns decode to, and a bound a float64 cannot hold
// exactly bounds nothing. A long or double promoted since a file was
// written keeps that file's int or float bounds, 4 bytes (the spec's
// rule for promoted types), and so does a timestamp that was a date
// (format v3), whose days bound the first instant of each.
func TestTimeBounds(t *testing.T) {
	at := time.Date(2025, 11, 20, 6, 0, 0, 123456000, time.UTC)
	enc := func(l ice.Literal) []byte {
		b, err := l.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tc := range []struct {
		name string
		typ  ice.Type
		lit  ice.Literal
		want float64
		ok   bool
	}{
		{"date", ice.PrimitiveTypes.Date, ice.NewLiteral(ice.Date(20412)), 20412, true},
		{"timestamp", ice.PrimitiveTypes.Timestamp, ice.NewLiteral(ice.Timestamp(at.UnixMicro())), float64(at.UnixMicro()), true},
		{"timestamptz", ice.PrimitiveTypes.TimestampTz, ice.NewLiteral(ice.Timestamp(at.UnixMicro())), float64(at.UnixMicro()), true},
		{"timestamp before 1970", ice.PrimitiveTypes.Timestamp, ice.NewLiteral(ice.Timestamp(-86400e6)), -86400e6, true},
		{"timestamp_ns of today", ice.PrimitiveTypes.TimestampNs, ice.NewLiteral(ice.TimestampNano(at.UnixNano())), 0, false},
		{"timestamp_ns of 1970", ice.PrimitiveTypes.TimestampNs, ice.NewLiteral(ice.TimestampNano(1000)), 1000, true},
		{"long, promoted from int", ice.PrimitiveTypes.Int64, ice.NewLiteral(int32(-70000)), -70000, true},
		{"double, promoted from float", ice.PrimitiveTypes.Float64, ice.NewLiteral(float32(2.5)), 2.5, true},
		{"long", ice.PrimitiveTypes.Int64, ice.NewLiteral(int64(1 << 40)), 1 << 40, true},
		{"timestamp, promoted from date", ice.PrimitiveTypes.Timestamp, ice.NewLiteral(ice.Date(-3)), -3 * 86400e6, true},
		{"timestamptz, promoted from date", ice.PrimitiveTypes.TimestampTz, ice.NewLiteral(ice.Date(20412)), 20412 * 86400e6, true},
		{"timestamp_ns of 1970, promoted from date", ice.PrimitiveTypes.TimestampNs, ice.NewLiteral(ice.Date(1)), 86400e9, true},
		{"timestamp_ns of today, promoted from date", ice.PrimitiveTypes.TimestampNs, ice.NewLiteral(ice.Date(20412)), 0, false},
		{"long of neither width", ice.PrimitiveTypes.Int64, ice.NewLiteral(true), 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _, ok := boundOf(tc.typ, enc(tc.lit))
			if ok != tc.ok || ok && got != tc.want {
				t.Fatalf("boundOf = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
