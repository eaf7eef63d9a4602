package expr

import (
	"math/big"
	"testing"
)

// FuzzCountOf: countOf gives sec*perSec + q exactly where an int64
// holds it, and refuses it exactly where it does not.
func FuzzCountOf(f *testing.F) {
	f.Add(int64(-9223372037), int64(145224192), uint8(0))
	f.Add(int64(9223372036), int64(854775807), uint8(0))
	f.Add(int64(-1), int64(500), uint8(2))
	f.Fuzz(func(t *testing.T, sec, q int64, u uint8) {
		perSec := []int64{1e9, 1e6, 1e3, 1}[u%4]
		if q < 0 || q >= perSec {
			return
		}
		exact := new(big.Int).Mul(big.NewInt(sec), big.NewInt(perSec))
		exact.Add(exact, big.NewInt(q))
		v, ok := countOf(sec, q, perSec)
		if ok != exact.IsInt64() || ok && v != exact.Int64() {
			t.Fatalf("countOf(%d, %d, %d) = %d, %v; exact %v", sec, q, perSec, v, ok, exact)
		}
	})
}
