package shm

import (
	"fmt"
	"testing"
)

// BenchmarkMemcpyShm is the reference for BenchmarkRingHandoff: the same
// copies into a pre-faulted shared mapping of the same size (4 slots), with
// no ring protocol and no consumer.
func BenchmarkMemcpyShm(b *testing.B) {
	const slots = 4
	for _, size := range []int{1 << 20, 4 << 20} {
		b.Run(fmt.Sprintf("payload=%dMiB", size>>20), func(b *testing.B) {
			r, err := newShmRegion(DefaultDir(), int64(size)*slots)
			if err != nil {
				b.Fatal(err)
			}
			defer r.close()
			src := make([]byte, size)
			for i := range src {
				src[i] = byte(i)
			}
			b.ReportAllocs()
			b.SetBytes(int64(size))
			b.ResetTimer()
			cpu := processCPU()
			for i := 0; i < b.N; i++ {
				off := (i % slots) * size
				copy(r.mem[off:off+size], src)
			}
			b.ReportMetric(float64((processCPU()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}
