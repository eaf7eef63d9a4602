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
