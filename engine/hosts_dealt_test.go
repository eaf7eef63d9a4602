package engine_test

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/engine"
)

// A later run of a job whose hosts dealt its units (Options.Dealt), whose
// plan no longer matches the counts' (a file touched, or changed), counts
// every unit itself: the same counts (a file touched, the same rows) deal
// as before; other counts fail the run, saying that the input changed,
// where dealing anew would leave its ranks out of step with the other
// hosts' (which keep the old deal), and where waiting for the trainers to
// exchange counts again would wait for ever.
func TestHostsDealtPlanChanged(t *testing.T) {
	src := fmt.Sprintf(hostsJob, 100, "drop", 4, 500, "pipeline:\n  - filter: \"row_id % 3 != 1\"\n")
	hosts := engine.Hosts{Count: 2, Index: 1}
	var rows []int64
	first, _, err := runRings(t, src, 1, engine.Options{Hosts: hosts, Counted: func(_ string, r []int64) { rows = r }})
	if err != nil || len(rows) == 0 {
		t.Fatalf("%v, %d counts", err, len(rows))
	}
	// The same counts, under another plan digest (a file's mtime changed).
	again, _, err := runRings(t, src, 1, engine.Options{Hosts: hosts, UnitRows: rows, UnitRowsPlan: "sha256:0", Dealt: true})
	if err != nil {
		t.Fatalf("the same counts under a touched file: %v", err)
	}
	if !reflect.DeepEqual(again, first) {
		t.Fatal("the batches differ from the first run's")
	}
	// Other counts: the hosts dealt another input.
	other := slices.Clone(rows)
	other[0]++
	_, _, err = runRings(t, src, 1, engine.Options{Hosts: hosts, UnitRows: other, UnitRowsPlan: "sha256:0", Dealt: true})
	if err == nil || !strings.Contains(err.Error(), "plans other units than when the 2 hosts dealt them") {
		t.Fatalf("counts of another input: %v", err)
	}
}

// OnDealt is called before the run's steps per epoch are known
// (Progress.BatchesPerEpoch): a daemon shows the trainers that their
// counts are complete from then on, and they go on past their exchange,
// so it must have kept the deal first (a daemon killed between, its
// input changed, would otherwise wait for counts they will not post
// again, or deal the new plan alone).
func TestHostsOnDealtBeforeStepsKnown(t *testing.T) {
	src := fmt.Sprintf(hostsJob, 100, "drop", 4, 500, "")
	prog := new(engine.Progress)
	calls := 0
	_, _, err := runRings(t, src, 1, engine.Options{Hosts: engine.Hosts{Count: 2, Index: 0}, Progress: prog, OnDealt: func() {
		calls++
		if n, ok := prog.BatchesPerEpoch(); ok {
			t.Errorf("OnDealt called with the steps per epoch known already (%d)", n)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := prog.BatchesPerEpoch(); calls != 1 || !ok {
		t.Fatalf("OnDealt called %d times, steps per epoch known %v: want once, and known", calls, ok)
	}
}
