package bench

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/datagen"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/ops"
	"github.com/lastmile/lastmile/spec"
)

// Issue 14, part 3: what a first epoch can skip.
//
// The pipeline's first epoch is measured against decoding its input
// columns alone twice in one run: on the default data (v1 snappy pages,
// as Spark and pyarrow write) and on the same rows written with v2 data
// pages, whose page index (OffsetIndex) lets the late columns' decode
// jump over pages holding no kept row without reading them. Beside it,
// PageSkip says how many of the list columns' pages hold no kept row, at
// the data's real page size and at smaller ones, in the file's row order
// and with the rows of each row group sorted by user: what page size or
// row order would make skipping pay.

// PipelineVariant is the first epoch against decode alone on other data.
type PipelineVariant struct {
	Data       string        `json:"data"` // what differs from the default data
	Dir        string        `json:"dir"`
	DecodeOnly decode.Result `json:"decode_only"`
	FirstEpoch PipelineRun   `json:"first_epoch"`
	// Rounds are the rounds of decode alone and the first epoch, in
	// alternating order (pipeline_rounds.go).
	Rounds []PipelineRound `json:"rounds"`
}

// Ratio is the first epoch's input rows/s over decode alone's.
func (v *PipelineVariant) Ratio(rows int64) float64 {
	if v.DecodeOnly.Seconds == 0 || v.FirstEpoch.Seconds == 0 {
		return 0
	}
	return v.FirstEpoch.InRowsPS / (float64(rows) / v.DecodeOnly.Seconds)
}

// PageSkip is the fraction of a list column's pages that hold no row the
// pipeline keeps, for pages of RowsPerPage rows.
type PageSkip struct {
	RowsPerPage int     `json:"rows_per_page"`
	Real        bool    `json:"real"` // the data's own page size (1 MiB before compression)
	Skippable   float64 `json:"skippable"`
	SortedUser  float64 `json:"skippable_sorted_by_user"` // rows of each row group sorted by user_id
}

// runV2 measures the first epoch against decode alone on the pipeline's
// rows written with v2 data pages and the page index (datagen writes the
// index for every file), in rounds as the default data's (measureE).
func runV2(ctx context.Context, cfg PipelineConfig, job *spec.Job, r *PipelineReport) (*PipelineVariant, error) {
	gc := pipelineGenConfig(cfg)
	gc.DataPageVersion = 2
	v := &PipelineVariant{Data: "v2 data pages, page index", Dir: filepath.Join(cfg.Data, "parquet-v2")}
	if m, _ := filepath.Glob(filepath.Join(v.Dir, "*.parquet")); len(m) == 0 {
		fmt.Fprintf(cfg.Log, "generating %d rows of Parquet (v2 pages) in %s ...\n", gc.Rows, v.Dir)
		if _, err := datagen.Write(ctx, v.Dir, gc); err != nil {
			return nil, err
		}
	}
	plan, err := decode.PlanFiles(ctx, []string{v.Dir}, decode.PlanOptions{Columns: r.Columns})
	if err != nil {
		return nil, err
	}
	j := *job
	j.Inputs = []string{v.Dir}
	one := 1
	j.Epochs = &one
	sides := roundSides{
		decode: func(ctx context.Context) (decode.Result, error) {
			return decode.Measure(ctx, plan, decode.PathOwn, cfg.Workers)
		},
		pipeline: func(ctx context.Context, _ int) (PipelineRun, map[string]any, error) {
			return runPipelineOnce(ctx, cfg, &j, r)
		},
	}
	res, err := measureRounds(ctx, cfg.Repeats, []int{1}, sides, "v2 pages: ", cfg.Log)
	if err != nil {
		return nil, err
	}
	v.DecodeOnly, v.FirstEpoch, v.Rounds = res.DecodeOnly, res.Runs[0], res.Rounds
	return v, nil
}

// pipelineGenConfig is the data the pipeline bench generates.
func pipelineGenConfig(cfg PipelineConfig) datagen.Config {
	gc := datagen.DefaultConfig()
	gc.Rows, gc.Files, gc.Compression = cfg.Rows, 4, cfg.Compression
	return gc
}

// measurePageSkip runs the pipeline's selection (the Early columns and
// Select, as the engine's first phase does) over every unit of plan and
// counts, for pages of several row counts, those holding no kept row.
func measurePageSkip(ctx context.Context, job *spec.Job, dir string, log io.Writer) ([]PageSkip, error) {
	all, err := decode.PlanFiles(ctx, []string{dir}, decode.PlanOptions{})
	if err != nil {
		return nil, err
	}
	prog, err := ops.Compile(ctx, job, all.Fields, ops.Env{Seed: job.Seed, Workers: 1})
	if err != nil {
		return nil, err
	}
	early := prog.Early()
	user := slices.Index(early, "user_id")
	list := slices.IndexFunc(all.Fields, func(f decode.Field) bool { return f.Kind == column.List })
	if list < 0 {
		return nil, fmt.Errorf("no list column in %s", dir)
	}
	plan, err := decode.PlanFiles(ctx, []string{dir}, decode.PlanOptions{Columns: slices.Concat(early, []string{all.Fields[list].Name})})
	if err != nil {
		return nil, err
	}
	// The real page size: rows per 1 MiB page of the first list column
	// (seq_0), uncompressed.
	seq := len(early)
	u0 := plan.Units[0]
	real := int(max(1, u0.Rows*int64(datagen.DefaultConfig().PageBytes)/max(1, u0.Chunks[seq].Uncompressed)))
	sizes := []int{real, 256, 64, 16, 4}
	skips := make([]PageSkip, len(sizes))
	pages := make([]int64, len(sizes))
	fmt.Fprintf(log, "page skip: the pipeline's selection over %d units ...\n", len(plan.Units))
	dec := plan.NewDecoder()
	defer dec.Close()
	st := prog.NewState()
	var b column.Batch
	var kept, order []int32
	for _, u := range plan.Units {
		if err := dec.Open(ctx, u); err != nil {
			return nil, err
		}
		b.Columns = slices.Grow(b.Columns[:0], len(early))[:len(early)]
		for k := range early {
			if err := dec.DecodeColumn(k, nil, &b.Columns[k]); err != nil {
				return nil, err
			}
		}
		b.Rows = int(u.Rows)
		st.BeginUnit(ctx, u.File)
		sel, err := st.Select(&b, nil)
		st.EndUnit()
		if err != nil {
			return nil, err
		}
		kept = append(kept[:0], sel...)
		order = userOrder(&b, user, order)
		for i, size := range sizes {
			n, s, ss := countSkippable(int(u.Rows), size, kept, order)
			pages[i] += int64(n)
			skips[i].Skippable += float64(s)
			skips[i].SortedUser += float64(ss)
		}
	}
	for i, size := range sizes {
		skips[i].RowsPerPage, skips[i].Real = size, i == 0
		skips[i].Skippable /= float64(pages[i])
		skips[i].SortedUser /= float64(pages[i])
	}
	return skips, nil
}

// userOrder returns the unit's rows sorted by user_id (column user of b;
// ties in row order), or nil when there is no such column.
func userOrder(b *column.Batch, user int, order []int32) []int32 {
	if user < 0 {
		return nil
	}
	ids := b.Columns[user].Int64s()
	order = order[:0]
	for i := range b.Rows {
		order = append(order, int32(i))
	}
	slices.SortStableFunc(order, func(x, y int32) int {
		switch {
		case ids[x] < ids[y]:
			return -1
		case ids[x] > ids[y]:
			return 1
		}
		return 0
	})
	return order
}

// countSkippable cuts rows into pages of size rows and counts the pages
// holding no kept row: in row order, and (with order) with the rows laid
// out in that order.
func countSkippable(rows, size int, kept, order []int32) (pages, skip, skipSorted int) {
	pages = (rows + size - 1) / size
	hit := make([]bool, pages)
	for _, r := range kept {
		hit[int(r)/size] = true
	}
	for _, h := range hit {
		if !h {
			skip++
		}
	}
	if order == nil {
		return pages, skip, 0
	}
	isKept := make([]bool, rows)
	for _, r := range kept {
		isKept[r] = true
	}
	clear(hit)
	for pos, r := range order {
		if isKept[r] {
			hit[pos/size] = true
		}
	}
	for _, h := range hit {
		if !h {
			skipSorted++
		}
	}
	return pages, skip, skipSorted
}

// writeSkip prints the v2 variant and the page-skip counts.
func (r *PipelineReport) writeSkip(w io.Writer) {
	pages := func(p decode.Stats) string {
		return fmt.Sprintf("pages: %d decoded, %d skipped, %d unread (%.1f MB)", p.Pages, p.PagesSkipped, p.PagesUnread, float64(p.BytesUnread)/1e6)
	}
	fmt.Fprintf(w, "%-52s %s\n", "(e) pipeline, 1 epoch, v1 pages", pages(r.FirstEpoch.Pages))
	if v := r.V2; v != nil {
		fmt.Fprintf(w, "%-52s %10.2fs (CPU %.2fs)\n", "(e) v2 pages + page index: decode alone", v.DecodeOnly.Seconds, v.DecodeOnly.CPUSeconds)
		fmt.Fprintf(w, "%-52s %10.2fs (CPU %.2fs), %.2fx decode alone; %s\n", "(e) v2 pages + page index: pipeline, 1 epoch",
			v.FirstEpoch.Seconds, v.FirstEpoch.CPUSeconds, v.Ratio(r.InputRows), pages(v.FirstEpoch.Pages))
		writeRounds(w, "v2 pages: ", v.Rounds, 1)
	}
	for _, s := range r.PageSkip {
		real := ""
		if s.Real {
			real = " (the data's 1 MiB pages)"
		}
		fmt.Fprintf(w, "%-52s %5.1f%% in file order, %5.1f%% sorted by user\n",
			fmt.Sprintf("list pages of %d rows without a kept row%s", s.RowsPerPage, real), 100*s.Skippable, 100*s.SortedUser)
	}
}
