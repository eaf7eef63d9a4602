package bench

import "testing"

func TestCountSkippable(t *testing.T) {
	cases := []struct {
		name                    string
		rows, size              int
		kept, order             []int32
		pages, skip, skipSorted int
	}{
		{"nothing kept", 10, 4, nil, nil, 3, 3, 0},
		{"every page hit", 8, 2, []int32{0, 3, 5, 6}, nil, 4, 0, 0},
		{"one run", 12, 3, []int32{3, 4, 5}, nil, 4, 3, 0},
		{"last page short", 10, 4, []int32{9}, nil, 3, 2, 0},
		// Kept rows 0 and 5 land together once rows are reordered.
		{"reordered", 6, 2, []int32{0, 5}, []int32{0, 5, 1, 2, 3, 4}, 3, 1, 2},
		{"reordered apart", 4, 2, []int32{0, 1}, []int32{0, 2, 1, 3}, 2, 1, 0},
	}
	for _, c := range cases {
		pages, skip, sorted := countSkippable(c.rows, c.size, c.kept, c.order)
		if pages != c.pages || skip != c.skip || sorted != c.skipSorted {
			t.Errorf("%s: %d pages, %d skippable, %d sorted; want %d, %d, %d", c.name, pages, skip, sorted, c.pages, c.skip, c.skipSorted)
		}
	}
}
