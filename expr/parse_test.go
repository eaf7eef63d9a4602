package expr_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/expr"
)

func TestParseString(t *testing.T) {
	f := func(src, want string) {
		t.Helper()
		n, err := expr.Parse(src)
		if err != nil {
			t.Fatalf("Parse(%q): %v", src, err)
		}
		if got := n.String(); got != want {
			t.Errorf("Parse(%q).String() = %q, want %q", src, got, want)
		}
		n2, err := expr.Parse(n.String())
		if err != nil || n2.String() != n.String() {
			t.Errorf("round trip of %q: %v, %v", src, n2, err)
		}
	}
	f("label == 1 or (user_id % 10 == 0 and not is_null(cat_opt))", "label == 1 or user_id % 10 == 0 and not is_null(cat_opt)")
	f("(a or b) and c", "(a or b) and c")
	f("a or b and c", "a or b and c")
	f("not a == b", "not a == b")
	f("(not a) == b", "(not a) == b")
	f("a - (b - c)", "a - (b - c)")
	f("(a - b) - c", "a - b - c")
	f("a * (b + c) / d % e", "a * (b + c) / d % e")
	f("-x * -2.5", "-x * -2.5")
	f("- -1", "-(-1)")
	f("--0", "-(0)")
	f("-(a + b)", "-(a + b)")
	f("--x", "- -x")
	f("dense_0 * 2.5 - dense_1 >= 0.1", "dense_0 * 2.5 - dense_1 >= 0.1")
	f("cat_0 in (3, 17, 42)", "cat_0 in (3, 17, 42)")
	f("cat_0 in (3)", "cat_0 in (3,)")
	f("cat_0 not in [3,]", "cat_0 not in [3]")
	f("x in ()", "x in ()")
	f(`query == "foo" or starts_with(query, 'ab')`, `query == "foo" or starts_with(query, "ab")`)
	f(`"a\"b\n\x00\u00e9\\"`, `"a\"b\n\x00é\\"`)
	f(`"\xff"`, `"\xff"`)
	f("1e-3 + .5 + 2. + 1E+2", "0.001 + 0.5 + 2.0 + 100.0")
	f("`weird name` + `and`", "`weird name` + `and`")
	f("clip(log1p(dense_0), 0, 10)", "clip(log1p(dense_0), 0, 10)")
	f("bucketize(dense_3, [0.1, 0.5, 1, 5])", "bucketize(dense_3, [0.1, 0.5, 1, 5])")
	f("f()", "f()")
	f("true and false or null", "true and false or null")
	f("(a == b) == c", "(a == b) == c")
	f("a == (b == c)", "a == (b == c)")
	f("-9223372036854775808", "-9223372036854775808")
	f("  x\t\n", "x")
}

func TestParseErrors(t *testing.T) {
	f := func(src string, pos int, msg string) {
		t.Helper()
		_, err := expr.Parse(src)
		var e *expr.Error
		if !errors.As(err, &e) {
			t.Fatalf("Parse(%q) = %v, want an *expr.Error", src, err)
		}
		if e.Pos != pos || !strings.Contains(e.Msg, msg) {
			t.Errorf("Parse(%q) = %q (pos %d), want pos %d and %q", src, e.Msg, e.Pos, pos, msg)
		}
	}
	f("clip(log1p(x), 0 10)", 17, `expected "," or ")" after the arguments of clip, got number 10`)
	f("clip(x, 0", 9, `expected "," or ")" after the arguments of clip, got end of expression`)
	f("(a + b", 6, `expected ")" to close the parenthesis, got end of expression`)
	f("a +", 3, "expected an operand, got end of expression")
	f("a b", 2, `expected an operator or the end of the expression, got identifier "b"`)
	f("a = 1", 2, `unexpected "=" (use == to compare)`)
	f("a && b", 2, "use and")
	f("a || b", 2, "use or")
	f("!a", 0, "use not")
	f("a < b < c", 6, "comparisons do not chain")
	f("a == b in (1)", 7, "comparisons do not chain")
	f(`"abc`, 0, "unterminated string")
	f(`"a\qb"`, 2, "bad escape")
	f("`abc", 0, "unterminated `quoted name`")
	f("``", 0, "empty `quoted name`")
	f("1e", 0, "malformed number")
	f("12abc", 0, "malformed number")
	f("1.2.3", 0, "malformed number")
	f("9223372036854775808", 0, "does not fit in int64")
	f("1e999", 0, "out of the float64 range")
	f("x in 3", 5, `expected "(" or "[" after "in", got number 3`)
	f("x not 3", 6, `expected "in" after "not", got number 3`)
	f("x in (1, 2", 10, `expected "," or ")" to close the values after in`)
	f("[1, 2", 5, `expected "," or "]" to close the list`)
	f("(1, 2)", 2, "only allowed after in")
	f("and", 0, `expected an operand, got "and"`)
	f("a $ b", 2, "unexpected character '$'")
	f("a \xff", 2, "unexpected byte 0xff")
	f(strings.Repeat("(", 300)+"x"+strings.Repeat(")", 300), 200, "nested more than 200 deep")
	f(strings.Repeat("-", 300)+"x", 200, "nested more than 200 deep")
	f("x"+strings.Repeat(" + x", 10001), 40002, "more than 10000 operators")
	f(`'it''s'`, 4, `got string "s"`)
}

func TestErrorString(t *testing.T) {
	_, err := expr.Parse("clip(x, 0 10)")
	if got, want := err.Error(), `at 10: expected "," or ")" after the arguments of clip, got number 10`; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
