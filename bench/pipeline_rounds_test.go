package bench

import (
	"context"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/decode"
)

// fakeSides records the calls of target (e)'s sides, in order, and times
// each run by its side's list: the nth call takes the nth seconds.
type fakeSides struct {
	calls   []string
	decodes []float64 // seconds of decode alone's passes, in call order
	runs    []float64 // seconds of the pipeline's runs, in call order
}

func (f *fakeSides) sides() roundSides {
	return roundSides{
		decode: func(context.Context) (decode.Result, error) {
			s := f.decodes[0]
			f.decodes = f.decodes[1:]
			f.calls = append(f.calls, "decode_only")
			return decode.Result{Seconds: s, CPUSeconds: 2 * s}, nil
		},
		pipeline: func(_ context.Context, epochs int) (PipelineRun, map[string]any, error) {
			s := f.runs[0]
			f.runs = f.runs[1:]
			f.calls = append(f.calls, runName(epochs))
			return PipelineRun{Epochs: epochs, Seconds: s}, map[string]any{"seconds": s}, nil
		},
	}
}

// Decode alone and the pipeline alternate round by round, each round in
// the other order from the one before, so that a drift of the machine's
// speed cannot favour either side; each side keeps its fastest run, and
// every round is reported.
func TestTargetEAlternatesItsSides(t *testing.T) {
	f := &fakeSides{
		decodes: []float64{1.0, 0.8, 0.9, 1.2},
		// Per round: the one-epoch run, then the 3-epoch one, in call order.
		runs: []float64{1.0, 1.5, 1.6, 0.9, 0.8, 1.2, 1.4, 1.1},
	}
	res, err := measureRounds(context.Background(), 4, []int{1, 3}, f.sides(), "", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	fwd := []string{"decode_only", "first_epoch", "pipeline"}
	rev := []string{"pipeline", "first_epoch", "decode_only"}
	want := slices.Concat(fwd, rev, fwd, rev)
	if !slices.Equal(f.calls, want) {
		t.Errorf("calls %v,\nwant %v", f.calls, want)
	}
	if len(res.Rounds) != 4 {
		t.Fatalf("%d rounds, want 4", len(res.Rounds))
	}
	for i, rd := range res.Rounds {
		if o := [][]string{fwd, rev}[i%2]; !slices.Equal(rd.Order, o) {
			t.Errorf("round %d: order %v, want %v", i, rd.Order, o)
		}
	}
	// Round 2 ran the 3-epoch pipeline first (1.6 s), then one epoch
	// (0.9 s), then decode alone (0.8 s).
	r2 := res.Rounds[1]
	if r2.DecodeOnlySeconds != 0.8 || r2.FirstEpochSeconds != 0.9 || r2.PipelineSeconds != 1.6 {
		t.Errorf("round 2: %+v", r2)
	}
	if got, want := r2.FirstEpochRatio, 0.8/0.9; !near(got, want) {
		t.Errorf("round 2's first-epoch ratio %v, want %v", got, want)
	}
	if got, want := r2.PipelineRatio, 3*0.8/1.6; !near(got, want) {
		t.Errorf("round 2's 3-epoch ratio %v, want %v", got, want)
	}
	if res.DecodeOnly.Seconds != 0.8 || res.Runs[0].Seconds != 0.8 || res.Runs[1].Seconds != 1.2 {
		t.Errorf("best: decode alone %v, 1 epoch %v, 3 epochs %v; want 0.8, 0.8, 1.2",
			res.DecodeOnly.Seconds, res.Runs[0].Seconds, res.Runs[1].Seconds)
	}
	if res.Runs[1].Epochs != 3 || res.Runs[0].Epochs != 1 {
		t.Errorf("runs kept for epochs %d and %d, want 1 and 3", res.Runs[0].Epochs, res.Runs[1].Epochs)
	}
	// The trainer's report is the last 3-epoch run's (round 4 ran it first).
	if s := res.Trainer["seconds"]; s != 1.4 {
		t.Errorf("trainer report of the run of %v s, want the last 3-epoch run's (1.4 s)", s)
	}
}

// The v2 variant's shape (one epoch count) alternates the same way, and
// the rounds print with the side that went first.
func TestTargetEOneEpochAlternates(t *testing.T) {
	f := &fakeSides{decodes: []float64{1, 1, 1}, runs: []float64{1, 1, 1}}
	res, err := measureRounds(context.Background(), 3, []int{1}, f.sides(), "v2 pages: ", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"decode_only", "first_epoch", "first_epoch", "decode_only", "decode_only", "first_epoch"}
	if !slices.Equal(f.calls, want) {
		t.Errorf("calls %v, want %v", f.calls, want)
	}
	var b strings.Builder
	writeRounds(&b, "v2 pages: ", res.Rounds, 1)
	out := b.String()
	if strings.Count(out, "decode alone first") != 2 || strings.Count(out, "decode alone last") != 1 || strings.Contains(out, "epochs ") {
		t.Errorf("rounds printed as\n%s", out)
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
