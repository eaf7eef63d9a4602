package ops

import "unsafe"

// InterleaveForTest runs interleave over n sources of rows elements of es
// bytes, each byte a function of its source, row and byte, and returns its
// result and the same matrix built element by element.
func InterleaveForTest(es, n, rows int) (got, want []byte) {
	srcs := make([]unsafe.Pointer, n)
	cols := make([][]byte, n)
	for j := range n {
		cols[j] = make([]byte, rows*es)
		for k := range cols[j] {
			cols[j][k] = byte(j*31 + k*7)
		}
		srcs[j] = unsafe.Pointer(&cols[j][0])
	}
	got = make([]byte, rows*n*es)
	interleave(unsafe.Pointer(&got[0]), srcs, es, rows)
	want = make([]byte, rows*n*es)
	for r := range rows {
		for j := range n {
			copy(want[(r*n+j)*es:(r*n+j+1)*es], cols[j][r*es:(r+1)*es])
		}
	}
	return got, want
}
