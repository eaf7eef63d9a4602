package ops_test

import (
	"context"
	"slices"
	"testing"

	"github.com/lastmile/lastmile/ops"
)

// docs/pipeline.md, nulls: "fill must suit the column: a whole number that
// fits for integer columns". spec.Nulls.Fill was a float64, so an int64
// fill beyond 2^53 silently became another number (2^53+1 → 2^53), and
// the int64 maximum, which fits, was refused ("does not fit int64"). It
// is a spec.Number now, which keeps integers exact.
func TestNullsFillBigInt(t *testing.T) {
	b := batchOf(i64col("n", []int64{0, 5}, []byte{0, 1}))
	for _, fill := range []int64{9007199254740993, 9223372036854775807} {
		op := "- nulls: {policy: fill, columns: [n], fill: " + itoa(fill) + "}"
		p, err := ops.Compile(context.Background(), job(t, "", op), fieldsOf(b), ops.Env{})
		if err != nil {
			t.Errorf("fill %d: %v", fill, err)
			continue
		}
		if got := ints(t, run(t, p, b), "n"); !slices.Equal(got, []int64{fill, 5}) {
			t.Errorf("fill %d: got %v", fill, got)
		}
	}
}

func itoa(v int64) string {
	s := ""
	if v == 0 {
		return "0"
	}
	for v > 0 {
		s = string(rune('0'+v%10)) + s
		v /= 10
	}
	return s
}
