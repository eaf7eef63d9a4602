package engine_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/engine"
)

// honestPeer computes every unit with the engine's own UnitProcessor
// into the spill worker's reused batch and has every one verified: an
// honest peer is never caught, whatever its units hold.
type honestPeer struct {
	up         *engine.UnitProcessor
	ran        atomic.Int64
	mu         sync.Mutex
	mismatches []string
}

func (p *honestPeer) Slots() int                                { return 2 }
func (p *honestPeer) Planned(*decode.Plan)                      {}
func (p *honestPeer) Watch(context.Context, func() engine.Load) {}

func (p *honestPeer) RunUnit(ctx context.Context, u decode.Unit, out *column.Batch, _ engine.Load) (bool, error) {
	if err := p.up.Compute(ctx, u, out); err != nil {
		return false, err
	}
	p.ran.Add(1)
	return true, nil
}

func (p *honestPeer) Ran(u decode.Unit, _ *column.Batch) (bool, func(string)) {
	return true, func(detail string) {
		p.mu.Lock()
		p.mismatches = append(p.mismatches, fmt.Sprintf("%s rg %d rows %d+%d: %s", filepath.Base(u.File), u.RowGroup, u.RowStart, u.Rows, detail))
		p.mu.Unlock()
	}
}

const honestJob = `
version: 1
name: honest
inputs: [INPUT]
batch: {size: 64, last: pad}
world_size: 2
epochs: 2
seed: 5
decode: {max_unit_rows: 300, workers: 1}
pipeline:
PIPELINE
ring: {dir: RINGDIR, slots: 4}
`

// TestVerifyHonestPeer: every unit of an honest peer is verified and
// none differs: units with nulls, empty units (every row filtered out),
// sliced units, jagged and list fields, strings, NaN payloads, reused
// batches on both sides; the batches are the local run's.
func TestVerifyHonestPeer(t *testing.T) {
	pipelines := map[string]string{
		"nulls": `  - select: [row_id, label, dense_opt, cat_opt, seq_opt, query_opt, seq_0]`,
		"empty units": `  - filter: "row_id % 2000 < 150"
  - select: [row_id, dense_opt, seq_opt, query_opt]`,
		"jagged": `  - stack: {output: dense, columns: [dense_0, dense_opt, label], nulls: fill, fill: -2}
  - jagged: {output: sparse, keys: [cat_0, cat_opt, seq_opt, {column: seq_0, key: hist, max_length: 20}], nulls: fill}
  - select: [row_id, dense, sparse, query_opt]`,
		"nan": `  - map: {n: "dense_0 * 0.0 / 0.0", m: "(dense_opt - dense_opt) / 0.0", k: "label / (label - label)"}
  - select: [row_id, n, m, k, dense_opt]`,
		"sequence": `  - filter: "label == 1 or row_id % 3 == 0"
  - sequence: {column: seq_opt, length: 8}
  - select: [row_id, seq_opt, seq_0]`,
	}
	for name, pipeline := range pipelines {
		t.Run(name, func(t *testing.T) {
			src := strings.NewReplacer("INPUT", "../testdata/small", "PIPELINE", pipeline).Replace(honestJob)
			want := runTensors(t, src, nil)
			prog := new(engine.Progress)
			p := &honestPeer{up: unitProcessor(t, src)}
			got := runTensorsWith(t, src, engine.Options{Spill: p, Progress: prog})
			sameTensors(t, got, want)
			if p.ran.Load() == 0 {
				t.Fatal("nothing spilled: the test shows nothing")
			}
			p.mu.Lock()
			defer p.mu.Unlock()
			if len(p.mismatches) > 0 || prog.VerifyMismatches.Load() != 0 {
				t.Errorf("an honest peer caught %d times of %d verified: %q", prog.VerifyMismatches.Load(), prog.UnitsVerified.Load(), p.mismatches)
			}
			t.Logf("ran %d, verified %d", p.ran.Load(), prog.UnitsVerified.Load())
		})
	}
}
