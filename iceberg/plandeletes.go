package iceberg

import (
	"context"
	"fmt"
	"slices"

	"github.com/lastmile/lastmile/decode"
)

// A plan's units and a snapshot's deleted rows: each unit gets the rows of
// its own that the snapshot's position deletes, deletion vectors and
// equality deletes remove (decode.Unit.Deleted), for the job's inputs
// (package engine) and for side tables (package ops) alike; whoever
// decodes the unit drops them.

// Deletions returns the rows the tables' deletes remove from the data
// files in paths (those a job plans), by path: their position deletes,
// and their equality deletes turned into positions (EqualityDeleted
// reads the affected files' equality columns).
func Deletions(ctx context.Context, fsys decode.FS, tables []Input, paths []string) (map[string][]int64, error) {
	byFile := Deletes(tables)
	eq, err := EqualityDeleted(ctx, fsys, tables, paths)
	if err != nil {
		return nil, err
	}
	if len(eq) > 0 && byFile == nil {
		byFile = map[string][]int64{}
	}
	for file, pos := range eq {
		byFile[file] = pos // its position deletes included
	}
	return byFile, nil
}

// SetDeletions gives plan's units the rows byFile (sorted positions in
// each file) deletes, and returns how many it found. paths are the names
// the plan was made from: each one with deletions must name a planned
// file as the table does, or its deletions would go unapplied.
func SetDeletions(plan *decode.Plan, byFile map[string][]int64, paths []string) (int64, error) {
	if len(byFile) == 0 {
		return 0, nil
	}
	planned := make(map[string]bool, len(plan.Files))
	for _, f := range plan.Files {
		planned[f.Path] = true
	}
	for _, p := range paths {
		if _, ok := byFile[p]; ok && !planned[p] {
			return 0, fmt.Errorf("BUG: the table's data file %s, which has position deletes, was planned under another name: its deletes would not apply", p)
		}
	}
	starts, err := groupStarts(plan, byFile)
	if err != nil {
		return 0, err
	}
	var n int64
	for i := range plan.Units {
		u := &plan.Units[i]
		pos, ok := byFile[u.File]
		if !ok {
			continue
		}
		lo := starts[u.File][u.RowGroup] + u.RowStart
		hi := lo + u.Rows
		k, _ := slices.BinarySearch(pos, lo) // the first position >= lo
		u.Deleted = nil
		for ; k < len(pos) && pos[k] < hi; k++ {
			u.Deleted = append(u.Deleted, int32(pos[k]-lo))
		}
		n += int64(len(u.Deleted))
	}
	return n, nil
}

// groupStarts returns, for each planned file with deletions, the row (in
// the file) where each of its row groups starts, and checks that its
// deletions lie within its rows.
func groupStarts(plan *decode.Plan, byFile map[string][]int64) (map[string][]int64, error) {
	rows := map[string][]int64{} // rows of each row group
	for _, u := range plan.Units {
		if _, ok := byFile[u.File]; !ok {
			continue
		}
		g := rows[u.File]
		for len(g) <= u.RowGroup {
			g = append(g, 0)
		}
		g[u.RowGroup] += u.Rows
		rows[u.File] = g
	}
	starts := make(map[string][]int64, len(rows))
	for file, g := range rows {
		s := make([]int64, len(g)+1)
		for i, n := range g {
			s[i+1] = s[i] + n
		}
		pos := byFile[file]
		if len(pos) == 0 {
			continue
		}
		if last := pos[len(pos)-1]; last >= s[len(g)] {
			return nil, fmt.Errorf("%s: the table's position deletes name its row %d, and it has %d rows: the file is not the one the snapshot recorded", file, last, s[len(g)])
		}
		starts[file] = s
	}
	return starts, nil
}
