package expr_test

import (
	"encoding/binary"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/column"
)

// TestDocExamples evaluates the function examples of docs/expressions.md
// ("expr → result" lines) on the row the text describes.
func TestDocExamples(t *testing.T) {
	doc, err := os.ReadFile("../docs/expressions.md")
	if err != nil {
		t.Fatal(err)
	}
	b := batch(
		ints("label", column.Int32, []int64{1}, nil),
		floats("dense_0", column.Float32, []float64{2}, nil),
		ints("cat_opt", column.Int32, []int64{0}, []byte{0}),
		strs("query", []string{"abc"}, nil),
		column.Column{Name: "seq_0", Kind: column.List, DType: column.Int64, Len: 1, Offsets: []int64{0, 3}, Data: make([]byte, 24)},
	)
	_, text, _ := strings.Cut(string(doc), "Examples, for a row with")
	_, text, _ = strings.Cut(text, "```\n")
	text, _, _ = strings.Cut(text, "```")
	n := 0
	for _, line := range strings.Split(text, "\n") {
		src, want, ok := strings.Cut(line, "→")
		if !ok {
			continue
		}
		src, want = strings.TrimSpace(src), strings.Fields(want)[0]
		n++
		out := eval(t, b, src)
		var got string
		switch {
		case out.Valid != nil && out.Valid[0] == 0:
			got = "null"
		case out.DType == column.Bool:
			got = strconv.FormatBool(out.Data[0] == 1)
		case out.DType == column.Int32:
			got = strconv.Itoa(int(out.Int32s()[0]))
		case out.DType == column.Int64:
			got = strconv.Itoa(int(out.Int64s()[0]))
		case out.DType == column.Float32:
			got = strconv.FormatFloat(float64(out.Float32s()[0]), 'g', -1, 32)
			if w, err := strconv.ParseFloat(want, 32); err == nil && float32(w) == out.Float32s()[0] {
				got = want
			}
		case out.DType == column.Float64:
			got = strconv.FormatFloat(out.Float64s()[0], 'g', -1, 64)
			if w, err := strconv.ParseFloat(want, 64); err == nil && w == out.Float64s()[0] {
				got = want
			}
		case out.DType == column.BFloat16:
			got = "0x" + strconv.FormatUint(uint64(binary.LittleEndian.Uint16(out.Data)), 16)
		}
		if got != want {
			t.Errorf("%s = %s, docs/expressions.md says %s", src, got, want)
		}
	}
	if n < 15 {
		t.Errorf("found %d examples in docs/expressions.md", n)
	}
}
