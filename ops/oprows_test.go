package ops_test

import (
	"testing"

	"github.com/lastmile/lastmile/ops"
)

// TestOpRows: each row-dropping op counts the rows that reached it and
// those it kept, over every State of the program; ops that keep every row
// are not listed; a State counting rows for a resume (CountRows(false))
// adds nothing.
func TestOpRows(t *testing.T) {
	ids := make([]int64, 1000)
	for i := range ids {
		ids[i] = int64(i)
	}
	b := batchOf(i64col("id", ids, nil))
	p := compile(t, b, "",
		`- filter: "id < 800"`,
		`- map: {y: "id * 2"}`,
		`- sample: {key: id, rates: [{rate: 0.25}]}`)
	out := run(t, p, b)
	run(t, p, b) // a second worker
	quiet := p.NewState()
	quiet.CountRows(false)
	if _, err := quiet.Select(b, nil); err != nil {
		t.Fatal(err)
	}
	got := p.OpRows()
	if len(got) != 2 {
		t.Fatalf("OpRows %+v: want the filter and the sample", got)
	}
	want := []ops.OpRows{
		{Op: "pipeline[0].filter", In: 2000, Out: 1600},
		{Op: "pipeline[2].sample", In: 1600, Out: 2 * int64(out.Rows)},
	}
	for i, w := range want {
		g := got[i]
		if g.Op != w.Op || g.In != w.In || g.Out != w.Out || g.Line == 0 {
			t.Errorf("OpRows[%d] %+v, want %+v and a line", i, g, w)
		}
	}
	if r := float64(out.Rows) / 800; r < 0.18 || r > 0.32 {
		t.Errorf("sample kept %d of 800 rows", out.Rows)
	}
}
