package expr

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestDivisor(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	ds := []uint64{1, 2, 3, 5, 6, 7, 10, 641, 65536, 1000003, 1<<32 + 1, math.MaxInt64, math.MaxUint64, math.MaxUint64 - 1}
	for range 200 {
		ds = append(ds, rng.Uint64()>>rng.IntN(64)|1, rng.Uint64N(1000)+1)
	}
	ns := []uint64{0, 1, 2, math.MaxUint64, math.MaxUint64 - 1, 1 << 63, 1<<63 - 1}
	for _, d := range ds {
		dv := newDivisor(d)
		for _, n := range append(ns, rng.Uint64(), rng.Uint64()>>32, d, d-1, d+1, d*3, d*3-1) {
			if got, want := dv.div(n), n/d; got != want {
				t.Fatalf("%d / %d = %d, want %d", n, d, got, want)
			}
			if got, want := dv.mod(n), n%d; got != want {
				t.Fatalf("%d %% %d = %d, want %d", n, d, got, want)
			}
		}
	}
}

func TestIdivConst(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	xs := []int64{0, 1, -1, math.MinInt64, math.MaxInt64, math.MinInt64 + 1}
	for range 1000 {
		xs = append(xs, int64(rng.Uint64()), rng.Int64N(2000)-1000)
	}
	for _, d := range []int64{1, 2, 3, 7, 10, 64, 1000003, math.MaxInt64} {
		q, r := make([]int64, len(xs)), make([]int64, len(xs))
		idivConst(opDiv, q, xs, d)
		idivConst(opMod, r, xs, d)
		for i, x := range xs {
			wq, wr := x/d, x%d
			if wr != 0 && wr < 0 {
				wq, wr = wq-1, wr+d
			}
			if q[i] != wq || r[i] != wr {
				t.Fatalf("%d divmod %d = %d, %d; want %d, %d", x, d, q[i], r[i], wq, wr)
			}
		}
	}
}

func TestBF16Exhaustive(t *testing.T) {
	// Every float32 whose low 16 bits are a tie or next to one, and a
	// random sample of the rest, against the reference rounding.
	rng := rand.New(rand.NewPCG(9, 10))
	for hi := uint32(0); hi < 1<<16; hi++ {
		for _, lo := range []uint32{0, 1, 0x7fff, 0x8000, 0x8001, 0xffff, rng.Uint32() & 0xffff} {
			f := math.Float32frombits(hi<<16 | lo)
			got, want := bf16(f), refBFloat16(f)
			if f != f {
				if got&0x7fff <= 0x7f80 {
					t.Fatalf("bf16(%#x) = %#x, not a NaN", hi<<16|lo, got)
				}
				continue
			}
			if got != want {
				t.Fatalf("bf16(%#x) = %#x, want %#x", hi<<16|lo, got, want)
			}
		}
	}
}

func TestLog1p32(t *testing.T) {
	for b := uint32(0); b < 0xff800000; b += 1021 {
		f := math.Float32frombits(b)
		want, got := float32(math.Log1p(float64(f))), float32(log1p32(float64(f)))
		if got != want && !(got != got && want != want) {
			t.Fatalf("log1p32(%g) = %g, want %g", f, got, want)
		}
	}
}
