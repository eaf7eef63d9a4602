package expr_test

import (
	"testing"

	"github.com/lastmile/lastmile/expr"
)

func TestMayMatch(t *testing.T) {
	// A row group of 100 rows: label in [0, 1]; user_id in [1000, 2000];
	// cat_opt all null; id_opt in [5, 5] with 10 nulls; dense_0 in
	// [-1, 1] (floats may hide NaNs); query in ["ba", "bz"]; flag all
	// true; d64 has no statistics; dense_1 has counts only.
	stats := map[string]expr.Range{
		"label":   {Min: 0, Max: 1, HasBounds: true, Rows: 100},
		"user_id": {Min: 1000, Max: 2000, HasBounds: true, Rows: 100},
		"cat_opt": {NullCount: 100, Rows: 100},
		"id_opt":  {Min: 5, Max: 5, HasBounds: true, NullCount: 10, Rows: 100},
		"dense_0": {Min: -1, Max: 1, HasBounds: true, Rows: 100},
		"dense_1": {NullCount: -1, Rows: 100},
		"query":   {MinString: "ba", MaxString: "bz", HasBounds: true, Rows: 100},
		"flag":    {Min: 1, Max: 1, HasBounds: true, Rows: 100},
		"cat_0":   {Min: 3, Max: 3, HasBounds: true, Rows: 100},
	}
	lookup := func(col string) (expr.Range, bool) { r, ok := stats[col]; return r, ok }
	f := func(src string, want bool) {
		t.Helper()
		e, err := expr.Compile(src, schema)
		if err != nil {
			t.Fatal(err)
		}
		if got := e.MayMatch(lookup); got != want {
			t.Errorf("MayMatch(%s) = %v, want %v", src, got, want)
		}
	}
	f("label == 1", true)
	f("label == 2", false)
	f("label > 1", false)
	f("label >= 1", true)
	f("label < 0", false)
	f("0 > label", false)
	f("2 == label", false)
	f("label != 1", true)
	f("label == 0.5", true) // within bounds: ranges cannot tell
	f("user_id < 1000", false)
	f("user_id <= 1000", true)
	f("user_id > label", true) // two columns: unknown
	f("user_id % 10 == 0", true)
	f("user_id in (1, 2, 3)", false)
	f("user_id in (1, 1500)", true)
	f("user_id not in (1, 2)", true)
	f("cat_0 not in (3, 4)", false)
	f("cat_0 != 3", false)
	f("not cat_0 == 3", false)
	f("not label == 2", true)
	f("cat_opt == 1", false) // all null
	f("cat_opt != 1", false)
	f("is_null(cat_opt)", true)
	f("not is_null(cat_opt)", false)
	f("is_null(label)", false) // not nullable: folded
	f("is_null(id_opt)", true)
	f("id_opt != 5", false)
	f("not id_opt != 5", true) // nulls make the comparison false
	f("is_null(dense_1)", true)
	f("dense_1 > 100", true) // counts only
	f("dense_0 > 1", false)
	f("dense_0 != 0", true)
	f("dense_0 == 2 or user_id == 3", false)
	f("dense_0 == 2 or user_id == 1500", true)
	f("label == 1 and user_id > 5000", false)
	f("label == 1 and not (user_id > 5000)", true)
	f("not (label == 1 or user_id > 5000)", true)
	f("not (label <= 1 or user_id > 5000)", false)
	f("query == 'a'", false)
	f("query == 'bb'", true)
	f("query > 'bz'", false)
	f("query in ('a', 'c')", false)
	f("starts_with(query, 'b')", true)
	f("starts_with(query, 'c')", false)
	f("starts_with(query, 'a')", false)
	f("starts_with(query, 'bzz')", false)
	f("starts_with(query, 'bz')", true)
	f("flag", true)
	f("not flag", false)
	f("flag == false", false)
	f("d64 > 1e300", true) // no statistics
	f("len(seq_0) > 100", true)
	f("true", true)
	f("false", false)
	f("label + 1", true) // not a predicate
	f("cast(label, int64) == 7", false)
	f("cast(label, float32) == 7", false)
	f("cast(dense_0, int32) == 7", true) // not order-preserving for nulls
}

func TestMayMatchEmptyAndBig(t *testing.T) {
	e, err := expr.Compile("user_id == 9007199254740993", schema)
	if err != nil {
		t.Fatal(err)
	}
	// 2^53 + 1 is not a float64: a rounded statistic must not prune it.
	big := func(string) (expr.Range, bool) {
		return expr.Range{Min: 9007199254740992, Max: 9007199254740992, HasBounds: true, Rows: 1}, true
	}
	if !e.MayMatch(big) {
		t.Error("pruned an int64 beyond 2^53")
	}
	e, _ = expr.Compile("user_id >= 0", schema)
	if e.MayMatch(func(string) (expr.Range, bool) { return expr.Range{Rows: 0}, true }) {
		t.Error("an empty row group may match")
	}
	if !e.MayMatch(func(string) (expr.Range, bool) { return expr.Range{}, false }) {
		t.Error("no statistics pruned")
	}
}
