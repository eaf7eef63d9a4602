package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/datagen"
	"github.com/lastmile/lastmile/engine"
)

// fixtureConfig is the datagen config of testdata/small (testdata/README.md).
func fixtureConfig(t *testing.T) datagen.Config {
	t.Helper()
	var cfg datagen.Config
	src := `{"Rows":10000,"RowGroupRows":2048,"Files":3,"Compression":"snappy","Dense":8,"Cats":8,"Seqs":2,"SeqMeanLen":10,"SeqMaxLen":300,"Nullable":true,"NullFraction":0.05,"Seed":1,"Prefix":"part","DataPageVersion":1,"PageBytes":16384}`
	if err := json.Unmarshal([]byte(src), &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

const pipelineJob = `
inputs: [DATA]
batch: {size: 200, last: drop}
world_size: 3
epochs: 2
seed: 5
shuffle: {units: true, buffer: 900}
pipeline:
  - join: {kind: anti, table: SPAM, on: user_id}
  - filter: "label == 1 or row_id %% 3 == 0"
  - map:
      user_h: "hash_mod(user_id, 1000)"
      d0: "clip(log1p(abs(dense_0)), 0, 10)"
  - sequence: {column: seq_0, length: 16, lengths: seq_0_len}
  - select: [row_id, label, user_h, d0, seq_0, seq_0_len, seq_1]
`

func pipelineSrc(t *testing.T) string {
	t.Helper()
	spam := filepath.Join(t.TempDir(), "spam.parquet")
	if err := datagen.WriteSpamUsers(context.Background(), spam, fixtureConfig(t), 0.1); err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(fmt.Sprintf(pipelineJob), "SPAM", spam)
}

// The rows a pipeline keeps are exactly those its filter and anti-join
// keep, each once per epoch, whatever the number of workers.
func TestPipelineRowsAndDeterminism(t *testing.T) {
	src := pipelineSrc(t)
	one := runStreams(t, src, 1, nil)
	many := runStreams(t, src, 3, nil)
	if !reflect.DeepEqual(one, many) {
		t.Fatal("batches with 1 worker differ from 3 workers")
	}
	cfg := fixtureConfig(t)
	spamIDs, err := datagen.SpamUsers(cfg, 0.1)
	if err != nil {
		t.Fatal(err)
	}
	spam := map[int64]bool{}
	for _, u := range spamIDs {
		spam[u] = true
	}
	g := datagen.NewGenerator(cfg)
	var row datagen.Row
	want := map[int64]bool{}
	for id := int64(0); id < cfg.Rows; id++ {
		g.Fill(id, &row)
		if !spam[row.UserID] && (row.Label == 1 || id%3 == 0) {
			want[id] = true
		}
	}
	perEpoch := int64(len(want)) / (3 * 200) * 3 * 200
	seen := map[uint64]map[int64]bool{}
	for _, rs := range one {
		for k, c := range rs.cursors {
			if seen[c.Epoch] == nil {
				seen[c.Epoch] = map[int64]bool{}
			}
			for _, id := range rs.rows[k] {
				if !want[id] {
					t.Fatalf("row %d should have been dropped", id)
				}
				if seen[c.Epoch][id] {
					t.Fatalf("row %d twice in epoch %d", id, c.Epoch)
				}
				seen[c.Epoch][id] = true
			}
		}
	}
	for e := uint64(0); e < 2; e++ {
		if int64(len(seen[e])) != perEpoch {
			t.Errorf("epoch %d: %d rows, want %d (%d survive, cut to whole steps)", e, len(seen[e]), perEpoch, len(want))
		}
	}
}

// Resuming a pipeline with filters equals the uninterrupted tail: the
// engine counts the surviving rows of the units it skips.
func TestPipelineResume(t *testing.T) {
	src := pipelineSrc(t)
	full := runStreams(t, src, 2, nil)
	cur := []engine.Cursor{{Epoch: 0, Batch: 2}, {Epoch: 1, Batch: 1}, {Epoch: 0, Batch: 3}}
	got := runStreams(t, src, 2, cur)
	for r := range full {
		var want rankStream
		for k, c := range full[r].cursors {
			if !(engine.Cursor{Epoch: c.Epoch, Batch: c.BatchIndex}).Less(cur[r]) {
				want.cursors = append(want.cursors, c)
				want.rows = append(want.rows, full[r].rows[k])
			}
		}
		if !reflect.DeepEqual(got[r], want) {
			t.Fatalf("rank %d: resumed stream (%d batches) differs from the uninterrupted tail (%d)", r, len(got[r].cursors), len(want.cursors))
		}
	}
}

// Later epochs served from the unit cache give exactly the batches of a
// run without it, with a cache large enough for every unit and with one
// that holds only some.
func TestUnitCacheExact(t *testing.T) {
	src := pipelineSrc(t)
	want := runStreams(t, src, 2, nil)
	for _, size := range []string{"1GiB", "64KiB"} {
		got := runStreams(t, src+"cache: {max_memory: "+size+"}\n", 2, nil)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("cache %s: batches differ from a run without cache", size)
		}
		got = runStreams(t, src+"cache: {max_memory: "+size+"}\n", 3, []engine.Cursor{{Epoch: 1, Batch: 1}, {Epoch: 1, Batch: 2}, {Epoch: 0, Batch: 4}})
		for r := range got {
			if len(got[r].cursors) == 0 {
				t.Fatalf("cache %s: resumed rank %d got nothing", size, r)
			}
		}
	}
}
