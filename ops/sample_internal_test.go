package ops

import (
	"testing"

	"github.com/lastmile/lastmile/expr"
)

// TestSampleFunction pins the sample hash docs/pipeline.md specifies. The
// vectors were checked against an independent pure-Python XXH64 and
// splitmix64 (the docs' reference code), as the Python baseline in
// bench/baseline computes them.
func TestSampleFunction(t *testing.T) {
	if got := splitmix64(0); got != 0xe220a8397b1dcdaf {
		t.Errorf("splitmix64(0) = %#x, want 0xe220a8397b1dcdaf (SplitMix64's first output for seed 0)", got)
	}
	ints := []struct {
		key  int64
		want uint64
	}{
		{0, 0x44f08a97f358b02d}, {1, 0x8bbd95166aa2c60b}, {2, 0xdb6b433a8da1e623},
		{1000003, 0x89ba3eb524d38097}, {-1, 0x8658ae93576fc731},
	}
	for _, tc := range ints {
		if got := splitmix64(20261121 ^ expr.HashInt(tc.key)); got != tc.want {
			t.Errorf("key %d, seed 20261121: %#x, want %#x", tc.key, got, tc.want)
		}
	}
	strs := []struct {
		key  string
		want uint64
	}{
		{"", 0xfc16537ad5f094a8}, {"alice", 0xa95f13872476363c}, {"bob", 0x761575a0235a3f67},
		{"a-rather-long-user-name-0001", 0x634f90c98b90a825},
	}
	for _, tc := range strs {
		if got := splitmix64(7 ^ expr.HashBytes([]byte(tc.key))); got != tc.want {
			t.Errorf("key %q, seed 7: %#x, want %#x", tc.key, got, tc.want)
		}
	}
	if thr, ok := threshold(0.5); !ok || thr != 1<<63 {
		t.Errorf("threshold(0.5) = %#x, %v", thr, ok)
	}
	if thr, ok := threshold(0.1); !ok || thr != 1844674407370955264 {
		t.Errorf("threshold(0.1) = %d, want floor(0.1·2^64) = 1844674407370955264", thr)
	}
	if _, ok := threshold(1); ok {
		t.Error("rate 1 must keep every row")
	}
}
