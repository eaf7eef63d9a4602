package iceberg

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"math/big"
	"time"

	ice "github.com/apache/iceberg-go"
	"github.com/google/uuid"
)

// Initial defaults (format v3). A column added with an initial default
// reads that value, not null, in every row of a file written before it
// was added. The metadata holds the default in the spec's JSON
// single-value form (numbers, booleans, and strings for strings, dates,
// timestamps and decimals); plainDefault writes it as Parquet's PLAIN
// encoding of the column's stored type (storedColumn), which the decoder
// converts as it would a file's value (decode.TableSchema.Defaults).

// plainDefault is v, the initial default of a column of type t, in PLAIN
// encoding; an error for a type or value it does not take.
func plainDefault(t ice.Type, v any) ([]byte, error) {
	switch t := t.(type) {
	case ice.BooleanType:
		b, ok := v.(bool)
		if !ok {
			return nil, fmt.Errorf("boolean default %v", v)
		}
		if b {
			return []byte{1}, nil
		}
		return []byte{0}, nil
	case ice.Int32Type:
		n, err := integer(v, math.MinInt32, math.MaxInt32)
		return le(4, uint64(n)), err
	case ice.Int64Type:
		n, err := integer(v, math.MinInt64, math.MaxInt64)
		return le(8, uint64(n)), err
	case ice.Float32Type:
		f, err := float(v)
		return le(4, uint64(math.Float32bits(float32(f)))), err
	case ice.Float64Type:
		f, err := float(v)
		return le(8, math.Float64bits(f)), err
	case ice.StringType:
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("string default %v", v)
		}
		return append(le(4, uint64(len(s))), s...), nil
	case ice.DateType:
		d, err := parseTime(v, "2006-01-02")
		return le(4, uint64(int32(d.Unix()/86400))), err
	case ice.TimestampType, ice.TimestampTzType:
		ts, err := parseTime(v, "2006-01-02T15:04:05.999999", "2006-01-02T15:04:05.999999Z07:00")
		return le(8, uint64(ts.UnixMicro())), err
	case ice.TimestampNsType, ice.TimestampTzNsType:
		ts, err := parseTime(v, "2006-01-02T15:04:05.999999999", "2006-01-02T15:04:05.999999999Z07:00")
		if err == nil && (ts.Before(time.Unix(0, math.MinInt64)) || ts.After(time.Unix(0, math.MaxInt64))) {
			return nil, fmt.Errorf("default %v is past what a timestamp in nanoseconds holds (the years 1677 to 2262)", v)
		}
		return le(8, uint64(ts.UnixNano())), err
	case ice.TimeType:
		tm, err := parseTime(v, "15:04:05.999999")
		return le(8, uint64(tm.Sub(time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)).Microseconds())), err
	case ice.BinaryType:
		b, err := hexDefault(v, -1)
		return append(le(4, uint64(len(b))), b...), err
	case ice.FixedType:
		return hexDefault(v, t.Len())
	case ice.UUIDType:
		s, ok := v.(string)
		u, err := uuid.Parse(s)
		if !ok || err != nil || len(s) != 36 {
			return nil, fmt.Errorf("uuid default %v", v)
		}
		return u[:], nil
	case ice.DecimalType:
		return decimalDefault(t, v)
	}
	return nil, fmt.Errorf("no default of type %s is read", t)
}

// hexDefault is a binary or fixed default, a string of hexadecimal digits
// in the spec's JSON form, of n bytes (any number where n < 0).
func hexDefault(v any, n int) ([]byte, error) {
	s, ok := v.(string)
	b, err := hex.DecodeString(s)
	switch {
	case !ok || err != nil:
		return nil, fmt.Errorf("binary default %v: want a string of hexadecimal digits, two a byte", v)
	case n >= 0 && len(b) != n:
		return nil, fmt.Errorf("fixed default %v: %d bytes, want %d", v, len(b), n)
	}
	return b, nil
}

func le(n int, v uint64) []byte {
	b := make([]byte, 8)
	binary.LittleEndian.PutUint64(b, v)
	return b[:n]
}

// integer is v, a JSON number or a Go integer, as an int64 in [lo, hi].
func integer(v any, lo, hi int64) (int64, error) {
	var n int64
	switch x := v.(type) {
	case float64:
		if x != math.Trunc(x) || x < -(1<<53) || x > 1<<53 {
			return 0, fmt.Errorf("integer default %v", v)
		}
		n = int64(x)
	case int:
		n = int64(x)
	case int32:
		n = int64(x)
	case int64:
		n = x
	default:
		return 0, fmt.Errorf("integer default %v", v)
	}
	if n < lo || n > hi {
		return 0, fmt.Errorf("default %d out of range", n)
	}
	return n, nil
}

func float(v any) (float64, error) {
	switch x := v.(type) {
	case float64:
		return x, nil
	case float32:
		return float64(x), nil
	}
	return 0, fmt.Errorf("floating-point default %v", v)
}

func parseTime(v any, layouts ...string) (time.Time, error) {
	s, ok := v.(string)
	if ok {
		for _, l := range layouts {
			if t, err := time.Parse(l, s); err == nil {
				return t, nil
			}
		}
	}
	return time.Time{}, fmt.Errorf("date or time default %v", v)
}

// decimalDefault is a decimal's default ("14.20") as its unscaled value,
// stored as storedColumn stores the type: INT32, INT64 or big-endian
// FIXED_LEN_BYTE_ARRAY.
func decimalDefault(t ice.DecimalType, v any) ([]byte, error) {
	s, ok := v.(string)
	r, ok2 := new(big.Rat).SetString(s)
	if !ok || !ok2 {
		return nil, fmt.Errorf("decimal default %v", v)
	}
	r.Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(t.Scale())), nil)))
	if !r.IsInt() {
		return nil, fmt.Errorf("decimal default %s has more than %d places", s, t.Scale())
	}
	n := r.Num()
	switch p := int32(t.Precision()); {
	case p <= 9 && n.IsInt64() && n.Int64() >= math.MinInt32 && n.Int64() <= math.MaxInt32:
		return le(4, uint64(n.Int64())), nil
	case p <= 18 && p > 9 && n.IsInt64():
		return le(8, uint64(n.Int64())), nil
	case p > 18:
		w := int(decimalBytes(p))
		b := make([]byte, w)
		if n.Sign() < 0 { // two's complement
			n = new(big.Int).Add(n, new(big.Int).Lsh(big.NewInt(1), uint(8*w)))
		}
		if n.BitLen() > 8*w {
			return nil, fmt.Errorf("decimal default %s out of range", s)
		}
		return n.FillBytes(b), nil
	}
	return nil, fmt.Errorf("decimal default %s out of range", s)
}
