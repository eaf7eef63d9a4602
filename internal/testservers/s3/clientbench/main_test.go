package main

import (
	"slices"
	"testing"
)

// The clients swap places every round, so that over an even number of
// rounds each runs first, and right after the other, as often.
func TestRoundOrderAlternates(t *testing.T) {
	names := []string{"aws-sdk-go-v2", "minio-go"}
	first := map[string]int{}
	for r := range 4 {
		o := roundOrder(r, names)
		want := names
		if r%2 == 1 {
			want = []string{"minio-go", "aws-sdk-go-v2"}
		}
		if !slices.Equal(o, want) {
			t.Errorf("round %d: order %v, want %v", r, o, want)
		}
		first[o[0]]++
	}
	if first["aws-sdk-go-v2"] != 2 || first["minio-go"] != 2 {
		t.Errorf("first in 4 rounds: %v, want 2 each", first)
	}
	if names[0] != "aws-sdk-go-v2" {
		t.Errorf("roundOrder changed its argument: %v", names)
	}
}
