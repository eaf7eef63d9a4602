package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"
)

// TestStackKernels checks interleave and gatherStack against the
// definition, element r*N+j = source j's element r (or idx[r]), for every
// element size and for N and row counts around the kernels' blocks (the
// 8x8 transposes where the CPU has them and their tails, four and two
// sources at a time, one at a time).
func TestStackKernels(t *testing.T) {
	for _, es := range []int{1, 2, 4, 8} {
		for _, n := range []int{1, 2, 3, 4, 7, 8, 9, 17, 200} {
			for _, rows := range []int{1, 7, 8, 9, 300, 1000} {
				t.Run(fmt.Sprintf("es=%d/n=%d/rows=%d", es, n, rows), func(t *testing.T) {
					cols := make([][]byte, n)
					srcs := make([]unsafe.Pointer, n)
					for j := range n {
						cols[j] = make([]byte, rows*es)
						for k := range cols[j] {
							cols[j][k] = byte(j*31 + k*7)
						}
						srcs[j] = unsafe.Pointer(&cols[j][0])
					}
					idx := make([]int32, rows)
					for i, r := range rand.New(rand.NewPCG(uint64(rows), 1)).Perm(rows) {
						idx[i] = int32(r)
					}
					for _, perm := range [][]int32{nil, idx} {
						got := make([]byte, rows*n*es)
						if perm == nil {
							interleave(unsafe.Pointer(&got[0]), slices.Clone(srcs), es, rows)
						} else {
							gatherStack(unsafe.Pointer(&got[0]), srcs, es, perm)
						}
						want := make([]byte, rows*n*es)
						for r := range rows {
							s := r
							if perm != nil {
								s = int(perm[r])
							}
							for j := range n {
								copy(want[(r*n+j)*es:(r*n+j+1)*es], cols[j][s*es:(s+1)*es])
							}
						}
						if !slices.Equal(got, want) {
							t.Fatalf("shuffled %v: the [rows, N] matrix differs from the definition", perm != nil)
						}
					}
				})
			}
		}
	}
}
