package expr_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/expr"
)

func typ(k expr.Kind, nullable bool) expr.Type { return expr.Type{Kind: k, Nullable: nullable} }

// schema is the recommender-like input the black-box tests compile for.
var schema = expr.Schema{
	{Name: "label", Type: typ(expr.Int32, false)},
	{Name: "user_id", Type: typ(expr.Int64, false)},
	{Name: "dense_0", Type: typ(expr.Float32, false)},
	{Name: "dense_1", Type: typ(expr.Float32, true)},
	{Name: "d64", Type: typ(expr.Float64, false)},
	{Name: "cat_0", Type: typ(expr.Int32, false)},
	{Name: "cat_opt", Type: typ(expr.Int32, true)},
	{Name: "id_opt", Type: typ(expr.Int64, true), Unit: 1e3}, // a timestamp in microseconds
	{Name: "query", Type: typ(expr.String, false)},
	{Name: "query_opt", Type: typ(expr.String, true)},
	{Name: "seq_0", Type: typ(expr.List, true)},
	{Name: "flag", Type: typ(expr.Bool, false)},
	{Name: "flag_opt", Type: typ(expr.Bool, true)},
	{Name: "weird name", Type: typ(expr.Int64, false)},
}

func TestTypes(t *testing.T) {
	f := func(src, want string) {
		t.Helper()
		e, err := expr.Compile(src, schema)
		if err != nil {
			t.Fatalf("Compile(%q): %v", src, err)
		}
		if got := e.Type().String(); got != want {
			t.Errorf("Compile(%q).Type() = %s, want %s", src, got, want)
		}
	}
	// Promotion.
	f("label + 1", "int32")
	f("label + 3000000000", "int64")
	f("label + user_id", "int64")
	f("label * 2.5", "float64")
	f("dense_0 * 2.5", "float32")
	f("dense_0 * 2", "float32")
	f("dense_0 + d64", "float64")
	f("dense_0 + label", "float64")
	f("dense_0 + dense_1", "float32?")
	f("1 + 2", "int64")
	f("1 + 2.0", "float64")
	f("label + (1 + 2)", "int32") // constants of literals stay untyped
	f("label + -(1)", "int32")
	f("label * max(2, 3)", "int32")
	f("dense_0 + abs(-2.5) * 2", "float32")
	f("label + fill_null(1, 2)", "int32")
	f("-label", "int32")
	f("label / 2", "int32")
	f("label / cat_0", "int32?")
	f("label % 0", "int32?")
	f("dense_0 / 0", "float32")
	// Comparisons and logic.
	f("label == 1", "bool")
	f("cat_opt == 1", "bool")
	f("dense_0 * 2.5 - dense_1 >= 0.1", "bool")
	f("query == 'a' or starts_with(query_opt, 'b')", "bool")
	f("flag_opt", "bool?")
	f("not flag_opt", "bool")
	f("flag and flag_opt", "bool")
	f("flag == true", "bool")
	f("cat_0 in (3, 17, 42)", "bool")
	f("query not in ('a', 'b')", "bool")
	// Functions.
	f("is_null(cat_opt)", "bool")
	f("is_null(seq_0)", "bool")
	f("fill_null(cat_opt, -1)", "int32")
	f("fill_null(cat_opt, id_opt)", "int64?")
	f("fill_null(query_opt, '')", "string")
	f("if(label == 1, 1.0, 0.0)", "float64")
	f("if(flag, dense_0, null)", "float32?")
	f("if(flag, null, 1)", "int64?")
	f("if(flag, query, 'x')", "string")
	f("log1p(dense_0)", "float32")
	f("log(label)", "float64")
	f("exp(dense_1)", "float32?")
	f("sqrt(d64)", "float64")
	f("abs(label)", "int32")
	f("min(label, 3)", "int32")
	f("max(label, dense_0, 1)", "float64")
	f("clip(log1p(dense_0), 0, 10)", "float32")
	f("bucketize(dense_0, [0.1, 0.5, 1, 5])", "int32")
	f("bucketize(dense_1, [])", "int32?")
	f("hash_mod(user_id, 1000003)", "int64")
	f("hash_mod(query_opt, 65536)", "int64?")
	f("len(seq_0)", "int32?")
	f("len(query)", "int32")
	f("cast(label, float32)", "float32")
	f("cast(dense_0, int32)", "int32?")
	f("cast(flag, int64)", "int64")
	f("cast(dense_0, bfloat16)", "bfloat16")
	f("cast(label, bfloat16)", "bfloat16")
	f("`weird name` + 1", "int64")
	f("5", "int64")
	f("'s'", "string")
}

func TestCheckErrors(t *testing.T) {
	f := func(src string, pos int, msg string) {
		t.Helper()
		_, err := expr.Compile(src, schema)
		var e *expr.Error
		if !errors.As(err, &e) {
			t.Fatalf("Compile(%q) = %v, want an *expr.Error", src, err)
		}
		if e.Pos != pos || e.Msg != msg {
			t.Errorf("Compile(%q) = at %d: %s\nwant            at %d: %s", src, e.Pos, e.Msg, pos, msg)
		}
	}
	f("lable == 1", 0, `unknown column "lable" (did you mean "label"?)`)
	f("LABEL == 1", 0, `unknown column "LABEL" (did you mean "label"?)`)
	f("zzz == 1", 0, `unknown column "zzz"`)
	f("lg1p(dense_0)", 0, `unknown function "lg1p" (did you mean "log1p"?)`)
	f("log1p(query)", 6, `log1p wants a number, got string column "query"`)
	f("label + query", 6, `+ wants numbers, got string column "query"`)
	f("label == 'a'", 6, `cannot compare int32 column "label" with string "a"`)
	f("flag < true", 5, `cannot compare bool column "flag" with bool true`)
	f("label and flag", 6, `and wants bools on both sides, got int32 column "label"`)
	f("not label", 0, `not wants a bool, got int32 column "label"`)
	f("-query", 0, `- wants a number, got string column "query"`)
	f("label == null", 9, `null is only allowed as a branch of if(); test for nulls with is_null(x)`)
	f("null", 0, `the expression is null; it needs a type`)
	f("seq_0", 0, `list column "seq_0" can only be used in len() or is_null()`)
	f("seq_0 + 1", 0, `list column "seq_0" can only be used in len() or is_null()`)
	f("len(label)", 4, `len wants a list or string column, got int32 column "label"`)
	f("clip(dense_0, 0)", 0, `clip wants 3 arguments (x, lo, hi), got 2`)
	f("clip(dense_0, 10, 0)", 14, `clip: lo 10 is above hi 0`)
	f("min(dense_0)", 0, `min wants at least 2 arguments, got 1`)
	f("cast(label, int8)", 12, `cast wants a type (int32, int64, float32, float64 or bfloat16), got int8`)
	f("cast(label, `float32`)", 12, "cast wants a type (int32, int64, float32, float64 or bfloat16), got `float32`")
	f("cast(query, int32)", 5, `cast wants a number or bool, got string column "query"`)
	f("cast(dense_0, bfloat16) + 1", 0, `bfloat16 is an output type: cast(..., bfloat16) must be the outermost call`)
	f("bucketize(dense_0, [1, 0.5])", 23, `bucketize boundaries must be sorted ascending, got 0.5 after 1`)
	f("bucketize(dense_0, 1)", 19, `bucketize wants its boundaries as a list [b0, b1, ...], got 1`)
	f("bucketize(dense_0, [label])", 20, `bucketize wants constant numbers as boundaries, got int32 column "label"`)
	f("hash_mod(user_id, 0)", 18, `hash_mod wants a constant integer modulus >= 1, got integer 0`)
	f("hash_mod(user_id, label)", 18, `hash_mod wants a constant integer modulus >= 1, got int32 column "label"`)
	f("hash_mod(seq_0, 10)", 9, `list column "seq_0" can only be used in len() or is_null()`)
	f("label in (1, 'a')", 13, `in: cannot compare int32 column "label" with string "a"`)
	f("label in (1, cat_0)", 13, `in wants constants, got int32 column "cat_0"`)
	f("flag in (true)", 5, `in does not apply to bools; use == true or == false`)
	f("starts_with(query, query)", 19, `starts_with wants a constant string prefix, got string column "query"`)
	f("starts_with(label, 'a')", 12, `starts_with wants a string, got int32 column "label"`)
	f("if(label, 1, 2)", 3, `if wants a bool condition, got int32 column "label"`)
	f("if(flag, 1, 'a')", 0, `if wants values of one type, got integer 1 and string "a"`)
	f("if(flag, null, null)", 0, `if needs a non-null value to know its type`)
	f("fill_null(cat_opt, 'x')", 0, `fill_null wants values of one type, got int32 column "cat_opt" and string "x"`)
	f("[1, 2]", 0, `a list is only allowed after in and as the boundaries of bucketize`)
	f("is_null(x, y)", 0, `is_null wants 1 arguments (x), got 2`)
}

func TestColumns(t *testing.T) {
	f := func(src string, want ...string) {
		t.Helper()
		e, err := expr.Compile(src, schema)
		if err != nil {
			t.Fatal(err)
		}
		if got := e.Columns(); !slices.Equal(got, want) {
			t.Errorf("Compile(%q).Columns() = %q, want %q", src, got, want)
		}
	}
	f("label == 1 or (user_id % 10 == 0 and not is_null(cat_opt))", "label", "user_id", "cat_opt")
	f("label + label * dense_0", "label", "dense_0")
	f("is_null(label) or 1 == 2") // folded to false: reads nothing
	f("len(seq_0) > 3 and `weird name` > 0", "seq_0", "weird name")
}

func TestCompileString(t *testing.T) {
	e, err := expr.Compile("label==1 OR x", schema)
	if err == nil || !strings.Contains(err.Error(), "expected an operator") {
		t.Fatalf("keywords are lower case: %v, %v", e, err)
	}
	e, err = expr.Compile("(label==1)or(cat_0 in(1,2))", schema)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := e.String(), "label == 1 or cat_0 in (1, 2)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
