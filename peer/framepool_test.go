package peer

import "testing"

func TestFramePool(t *testing.T) {
	p := new(framePool)
	for _, tc := range []struct {
		n, cap int
	}{
		{0, 256}, {1, 256}, {256, 256}, {257, 512}, {16384, 16384}, {16385, 32768},
		{1 << 20, 1 << 20},
		{1<<20 + 1, 1<<20 + 1}, // past the classes: exactly what was asked
	} {
		b := p.Get(tc.n)
		if len(*b) != tc.n || cap(*b) != tc.cap {
			t.Errorf("Get(%d): len %d cap %d, want len %d cap %d", tc.n, len(*b), cap(*b), tc.n, tc.cap)
		}
		for i := range *b {
			(*b)[i] = 0xAB
		}
		p.Put(b)
	}
	// A buffer comes back whole, whatever prefix was put, and is not
	// cleared: the caller overwrites what it asked for.
	b := p.Get(1000)
	(*b)[999] = 7
	short := (*b)[:10]
	p.Put(&short)
	again := p.Get(1024)
	if cap(*again) != 1024 || len(*again) != 1024 {
		t.Fatalf("Get after Put: len %d cap %d", len(*again), cap(*again))
	}
	// A buffer of no class's size is not pooled.
	odd := make([]byte, 300)
	p.Put(&odd)
	if got := p.Get(300); cap(*got) != 512 {
		t.Errorf("an odd buffer was pooled: cap %d", cap(*got))
	}
}
