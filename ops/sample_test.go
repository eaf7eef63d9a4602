package ops_test

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/ops"
)

func TestSampleKeeps(t *testing.T) {
	// Rows 0..19 by id, seed 7, rate 0.5: the rows the docs' reference
	// Python keeps.
	ids := make([]int64, 20)
	for i := range ids {
		ids[i] = int64(i)
	}
	b := batchOf(i64col("id", ids, nil))
	p := compile(t, b, "", `- sample: {key: id, rates: [{rate: 0.5}]}`)
	out := run(t, p, b)
	want := []int64{3, 5, 6, 7, 9, 10, 12, 15, 16, 17, 18, 19}
	if got := ints(t, out, "id"); !slices.Equal(got, want) {
		t.Errorf("kept %v, want %v", got, want)
	}
	// The sample's own seed wins over the job's; Env.Seed over the spec's.
	p = compile(t, b, "", `- sample: {key: id, seed: 7, rates: [{rate: 0.5}]}`)
	if got := ints(t, run(t, p, b), "id"); !slices.Equal(got, want) {
		t.Errorf("seed 7 in the op: kept %v", got)
	}
	p, err := ops.Compile(context.Background(), job(t, "", `- sample: {key: id, rates: [{rate: 0.5}]}`), fieldsOf(b), ops.Env{Seed: 8})
	if err != nil {
		t.Fatal(err)
	}
	if got := ints(t, run(t, p, b), "id"); slices.Equal(got, want) {
		t.Errorf("Env.Seed 8 keeps what seed 7 keeps: %v", got)
	}
}

func TestSampleRate(t *testing.T) {
	const n = 100_000
	ids := make([]int64, n)
	labels := make([]int32, n)
	for i := range ids {
		ids[i] = int64(i) * 7919
		if i%20 == 0 {
			labels[i] = 1
		}
	}
	b := batchOf(i64col("row_id", ids, nil), i32col("label", labels, nil))
	p := compile(t, b, "", `- sample: {key: row_id, rates: [{when: "label == 1", rate: 1.0}, {rate: 0.1}], weight: w}`)
	out := run(t, p, b)
	pos, neg := 0, 0
	w := floats(t, out, "w")
	for i, l := range ints(t, out, "label") {
		switch l {
		case 1:
			pos++
			if w[i] != 1 {
				t.Fatalf("positive with weight %v", w[i])
			}
		default:
			neg++
			if float32(w[i]) != float32(1/0.1) {
				t.Fatalf("negative with weight %v", w[i])
			}
		}
	}
	if pos != n/20 {
		t.Errorf("kept %d positives of %d", pos, n/20)
	}
	// Negatives: binomial(95000, 0.1); allow 4 standard deviations.
	mean := 0.1 * 95000
	sd := math.Sqrt(95000 * 0.1 * 0.9)
	if math.Abs(float64(neg)-mean) > 4*sd {
		t.Errorf("kept %d negatives, want %.0f ± %.0f", neg, mean, 4*sd)
	}
	// Exactly reproducible: another State, and the rows in another order
	// of units, keep the same rows.
	again := run(t, p, b)
	if !slices.Equal(ints(t, again, "row_id"), ints(t, out, "row_id")) {
		t.Error("a second run kept other rows")
	}
}

func TestSampleRules(t *testing.T) {
	b := batchOf(
		i64col("id", []int64{0, 1, 2, 3, 4, 5}, nil),
		strcol("country", []string{"us", "de", "us", "fr", "de", ""}, []byte{1, 1, 1, 1, 1, 0}),
	)
	// First matching rule wins; rows that match none are kept, weight 1.
	p := compile(t, b, "", `- sample: {key: id, rates: [{when: "country == 'us'", rate: 1.0}, {when: "country in ('us', 'de')", rate: 0.000001}], weight: w}`)
	out := run(t, p, b)
	if got := ints(t, out, "id"); !slices.Equal(got, []int64{0, 2, 3, 5}) {
		t.Errorf("kept %v", got)
	}
	if got := floats(t, out, "w"); !slices.Equal(got, []float64{1, 1, 1, 1}) {
		t.Errorf("weights %v", got)
	}
	if p.Output()[2] != (ops.OutField{Name: "w", Kind: column.Fixed, DType: column.Float32, Width: 1}) {
		t.Errorf("weight field %+v", p.Output()[2])
	}
}

func TestSampleStringKey(t *testing.T) {
	names := []string{"", "alice", "bob", "a-rather-long-user-name-0001"}
	b := batchOf(strcol("user", names, nil))
	// Hashes (seed 7) from the docs' reference: 0xfc16…, 0xa95f…, 0x7615…,
	// 0x634f…; at rate 0.5 (threshold 0x8000…) only the last two stay.
	p := compile(t, b, "", `- sample: {key: user, rates: [{rate: 0.5}]}`)
	if got := strs(t, run(t, p, b), "user"); !slices.Equal(got, []string{"bob", "a-rather-long-user-name-0001"}) {
		t.Errorf("kept %q", got)
	}
}
