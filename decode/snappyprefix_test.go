package decode

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/snappy"
)

func TestSnappyPrefix(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{0, 1, 7, 100, 5000, 200_000} {
		for _, kind := range []string{"random", "runs", "mixed"} {
			src := make([]byte, size)
			for i := range src {
				switch kind {
				case "random":
					src[i] = byte(r.Uint32())
				case "runs":
					src[i] = byte(i / 37 % 3)
				default:
					if i%1000 < 500 {
						src[i] = byte(r.Uint32())
					} else {
						src[i] = byte(i % 7)
					}
				}
			}
			for _, enc := range []func([]byte) []byte{
				func(b []byte) []byte { return snappy.Encode(nil, b) },
				func(b []byte) []byte { return s2.EncodeSnappy(nil, b) },
			} {
				comp := enc(src)
				var p snappyPrefix
				if !p.init(comp, size, nil) {
					t.Fatalf("%s/%d: init failed", kind, size)
				}
				for _, until := range []int{0, 1, 3, 64, 65, 1000, 4096, size} {
					until = min(until, size)
					if !p.fill(until) {
						t.Fatalf("%s/%d: fill(%d) failed", kind, size, until)
					}
					if len(p.out) < until || !bytes.Equal(p.out, src[:len(p.out)]) {
						t.Fatalf("%s/%d: prefix of %d differs", kind, size, until)
					}
				}
				if p.init(comp, size+1, nil) {
					t.Fatal("wrong length accepted")
				}
			}
		}
	}
}
