package engine

import (
	"strings"
	"testing"

	"github.com/lastmile/lastmile/column"
)

// TestSameOutput: two outputs of a unit are compared over their rows'
// bytes only, and two without rows are the same whatever columns their
// reused batches kept (a local empty unit keeps its buffer's; the peer
// test found the lying-peer run quarantining an honest empty unit).
func TestSameOutput(t *testing.T) {
	batch := func(vals []byte, valid []byte, extra int) *column.Batch {
		data := append(append([]byte(nil), vals...), make([]byte, extra)...)
		return &column.Batch{Rows: len(vals), Columns: []column.Column{
			{Name: "a", Kind: column.Fixed, DType: column.Uint8, Width: 1, Len: len(vals), Data: data, Valid: valid}}}
	}
	f := func(what string, a, b *column.Batch, want string) {
		t.Helper()
		err := sameOutput(a, b)
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v", what, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%s: %v, want %q", what, err, want)
		}
	}
	f("equal", batch([]byte{1, 2, 3}, nil, 0), batch([]byte{1, 2, 3}, nil, 0), "")
	f("bytes past the rows", batch([]byte{1, 2, 3}, nil, 5), batch([]byte{1, 2, 3}, nil, 0), "")
	f("a value", batch([]byte{1, 2, 3}, nil, 0), batch([]byte{1, 9, 3}, nil, 0), "values differ")
	f("validity", batch([]byte{1, 2, 3}, []byte{1, 1, 1}, 0), batch([]byte{1, 2, 3}, nil, 0), "validity differs")
	f("rows", batch([]byte{1, 2}, nil, 0), batch([]byte{1, 2, 3}, nil, 0), "rows")
	f("empty, other columns", &column.Batch{}, batch(nil, nil, 0), "")
}
