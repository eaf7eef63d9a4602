package decode

import (
	"fmt"
	"math"

	"github.com/lastmile/lastmile/column"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/format"
)

// DECIMAL columns (prices, amounts: Spark writes decimal(p, s) as INT32
// for p <= 9, INT64 for p <= 18 and FIXED_LEN_BYTE_ARRAY above) decode
// to float64, the unscaled integer divided by 10^scale: what a trainer's
// feature becomes in any case, since torch has no decimal type. The
// quotient is correctly rounded where the unscaled value has at most 15
// digits (|v| < 2^53) and the scale is at most 22, so 123.45 stored as
// 12345 with scale 2 decodes to the float64 nearest 123.45; wider values
// keep float64's 15-17 significant digits. BYTE_ARRAY decimals are
// refused. Files whose scales differ disagree on the column
// (ErrSchemaMismatch): each unit is decoded with the plan's scale.

// decimalScale returns the scale of a DECIMAL leaf, and whether it is
// one.
func decimalScale(el *format.SchemaElement) (int32, bool) {
	if dt, ok := el.LogicalType.Value.(*format.DecimalType); ok {
		return dt.Scale, true
	}
	if ct, ok := el.ConvertedType.Get(); ok && ct == deprecated.Decimal {
		s, _ := el.Scale.Get()
		return s, true
	}
	return 0, false
}

// decimalDType checks that a DECIMAL leaf of physical type pt (and
// fixed length n) is one this package converts, to float64.
func decimalDType(pt format.Type, n int32, scale int32) (column.DType, error) {
	if scale < 0 || scale > 76 {
		return 0, fmt.Errorf("%w: DECIMAL scale %d", ErrUnsupported, scale)
	}
	switch {
	case pt == format.Int32, pt == format.Int64, pt == format.FixedLenByteArray && n >= 1 && n <= 16:
		return column.Float64, nil
	}
	return 0, fmt.Errorf("%w: DECIMAL stored as %v (only INT32, INT64 and FIXED_LEN_BYTE_ARRAY of up to 16 bytes)", ErrUnsupported, pt)
}

// pow10 holds 10^0 through 10^76: exact through 10^22, the nearest
// float64 above.
var pow10 = func() (p [77]float64) {
	for i := range p {
		p[i] = math.Pow(10, float64(i))
	}
	return p
}()

// beFloat is the nearest float64 to the big-endian two's-complement
// integer b (1 to 16 bytes).
func beFloat(b []byte) float64 {
	var hi int64
	if b[0]&0x80 != 0 {
		hi = -1
	}
	var lo uint64
	for i, c := range b {
		if len(b)-i > 8 {
			hi = hi<<8 | int64(c)
			continue
		}
		lo = lo<<8 | uint64(c)
	}
	if len(b) <= 8 {
		// Sign-extend lo from its 8*len(b) bits.
		sh := 64 - 8*uint(len(b))
		return float64(int64(lo<<sh) >> sh)
	}
	if hi == 0 && lo < 1<<63 || hi == -1 && lo >= 1<<63 {
		return float64(int64(lo)) // fits an int64: no cancellation
	}
	return float64(hi)*0x1p64 + float64(lo)
}
