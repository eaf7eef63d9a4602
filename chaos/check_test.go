package chaos_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strings"
)

// row is one recorded row: "epoch row_id cat_0 dense_0_bits".
type row struct {
	epoch, id, cat int64
	dense          uint32
}

// saved is a trainer's committed state (testdata/trainer.py).
type saved struct {
	SD struct {
		Cursor *struct{ Epoch, Batch int }
	}
	RowsBytes int64 `json:"rows_bytes"`
	Batches   int
}

// recorded returns the rows a rank committed and its committed state: the
// lines of rankR.rows up to the committed length, not beyond.
func (tr *trainer) recorded() ([]row, saved, error) {
	var st saved
	b, err := os.ReadFile(tr.path("state"))
	if os.IsNotExist(err) {
		return nil, st, nil // nothing recorded
	}
	if err != nil {
		return nil, st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, st, fmt.Errorf("%s: %w", tr.path("state"), err)
	}
	data, err := os.ReadFile(tr.path("rows"))
	if err != nil {
		return nil, st, err
	}
	if int64(len(data)) < st.RowsBytes {
		return nil, st, fmt.Errorf("%s holds %d bytes, its state commits %d", tr.path("rows"), len(data), st.RowsBytes)
	}
	var rows []row
	for _, line := range bytes.Split(data[:st.RowsBytes], []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var r row
		if _, err := fmt.Sscan(string(line), &r.epoch, &r.id, &r.cat, &r.dense); err != nil {
			return nil, st, fmt.Errorf("%s: line %q: %w", tr.path("rows"), line, err)
		}
		rows = append(rows, r)
	}
	return rows, st, nil
}

// check counts the rows that all ranks recorded, epoch by epoch: each row
// id once (complete: none missing), each with datagen's values. It adds to
// the tally and fails the run on any lost, repeated or wrong row.
func (j *job) check(c *tally, complete bool) {
	n := j.data.rows
	seen := make([][]int, j.epochs)
	for e := range seen {
		seen[e] = make([]int, n)
	}
	var wrong int
	var msgs []string
	note := func(format string, args ...any) {
		if len(msgs) < 5 {
			msgs = append(msgs, fmt.Sprintf(format, args...))
		}
	}
	for _, tr := range j.trainers {
		rows, st, err := tr.recorded()
		if err != nil {
			j.fail("rank %d: %v", tr.rank, err)
			return
		}
		if complete && (st.SD.Cursor == nil || st.SD.Cursor.Epoch != j.epochs || st.SD.Cursor.Batch != 0) {
			note("rank %d ended at cursor %+v, want (%d, 0)", tr.rank, st.SD.Cursor, j.epochs)
		}
		for _, r := range rows {
			if r.epoch < 0 || r.epoch >= int64(j.epochs) || r.id < 0 || r.id >= n {
				wrong++
				note("rank %d: row %+v is outside %d epochs of %d rows", tr.rank, r, j.epochs, n)
				continue
			}
			if j.keep != nil && !j.keep(r.id) {
				wrong++
				note("rank %d: row %d of epoch %d is one the filter drops", tr.rank, r.id, r.epoch)
			}
			if r.cat != j.data.g.Cat(r.id, 0) || r.dense != math.Float32bits(j.data.g.Dense(r.id, 0)) {
				wrong++
				note("rank %d: row %d of epoch %d has cat_0 %d dense_0 %v, datagen says %d %v", tr.rank, r.id, r.epoch,
					r.cat, math.Float32frombits(r.dense), j.data.g.Cat(r.id, 0), j.data.g.Dense(r.id, 0))
			}
			seen[r.epoch][r.id]++
		}
	}
	lost, repeated := 0, 0
	for e, s := range seen {
		for id, k := range s {
			if k == 0 && complete && (j.keep == nil || j.keep(int64(id))) {
				lost++
				note("epoch %d: row %d lost", e, id)
			}
			if k > 1 {
				repeated += k - 1
				note("epoch %d: row %d recorded %d times", e, id, k)
			}
		}
	}
	c.mu.Lock()
	c.lost, c.repeated, c.wrong = c.lost+lost, c.repeated+repeated, c.wrong+wrong
	c.mu.Unlock()
	if lost+repeated+wrong > 0 || len(msgs) > 0 {
		j.fail("%d rows lost, %d repeated, %d wrong:\n  %s", lost, repeated, wrong, strings.Join(msgs, "\n  "))
	}
}

func jsonInto(b []byte, v any) bool { return json.Unmarshal(b, v) == nil }
