package peer

import "testing"

// BenchmarkDeletedSet: a unit of 1 Mi rows with every third row deleted,
// encoded as the GPU host does for each spilled unit, and expanded as
// the peer does.
func BenchmarkDeletedSet(b *testing.B) {
	rows := make([]int32, 0, 1<<20/3+1)
	for r := int32(0); r < 1<<20; r += 3 {
		rows = append(rows, r)
	}
	set, err := encodeDeleted(rows)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("encode", func(b *testing.B) {
		for b.Loop() {
			if _, err := encodeDeleted(rows); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		for b.Loop() {
			if _, err := decodeDeleted(set, 1<<20); err != nil {
				b.Fatal(err)
			}
		}
	})
}
