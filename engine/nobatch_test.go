package engine_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/engine"
)

// TestNoBatchWarns: a finite job whose steps are larger than its epoch
// (10,000 rows, four ranks of 3,000) ends with no batch. That is not an
// error (a finite job over an empty input ends), but it was silent: the
// run reported "0 batches" and exited 0, and its trainers trained on
// nothing. It now warns, saying the step's size and what to change.
func TestNoBatchWarns(t *testing.T) {
	cases := []struct {
		name, size, world string
		warn              bool
	}{
		{"rows fewer than a step", "3000", "4", true},
		{"one step fits", "2500", "4", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			src := `
inputs: [DATA]
columns: [row_id]
batch: {size: ` + tc.size + `, last: drop}
world_size: ` + tc.world + `
ring: {dir: RINGDIR, name: t, slots: 3}
`
			st, _, err := runJobWith(t, src, func(o *engine.Options) {
				o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
			})
			if err != nil {
				t.Fatal(err)
			}
			warned := strings.Contains(logs.String(), "gave no batch")
			if warned != tc.warn || warned && !strings.Contains(logs.String(), "world_size = 12000 rows") {
				t.Fatalf("%d batches; warned %v, want %v: %q", st.Batches, warned, tc.warn, logs.String())
			}
		})
	}
}
