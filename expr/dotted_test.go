package expr_test

import (
	"testing"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/expr"
)

// TestDottedNames: a column inside a struct is named by its path, bare
// or quoted, and prints back as the same path.
func TestDottedNames(t *testing.T) {
	b := batch(ints("user.age", column.Int32, []int64{20, 40, 60}, nil), ints("ctx.geo.zone", column.Int64, []int64{1, 2, 3}, nil))
	checkInts(t, b, "user.age >= 40 and ctx.geo.zone != 3", []int64{0, 1, 0}, nil)
	checkInts(t, b, "`user.age` + ctx.geo.zone", []int64{21, 42, 63}, nil)
	for src, want := range map[string]string{
		"user.age > 1":   "user.age > 1",
		"`user.age` > 1": "`user.age` > 1",
		"`a. b` > 1":     "`a. b` > 1",
		"x.y.z1 + x.y":   "x.y.z1 + x.y",
		"user.and_more":  "user.and_more",
	} {
		n, err := expr.Parse(src)
		if err != nil {
			t.Fatalf("Parse(%q): %v", src, err)
		}
		if got := n.String(); got != want {
			t.Errorf("Parse(%q).String() = %q, want %q", src, got, want)
		}
	}
	for _, src := range []string{"user. age > 1", "user.5 > 1", "user..age > 1", "user. > 1"} {
		if _, err := expr.Parse(src); err == nil {
			t.Errorf("Parse(%q): no error", src)
		}
	}
}
