package ops

import (
	"context"
	"fmt"
	"path"
	"strconv"
	"strings"
	"sync"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/iceberg"
	"github.com/lastmile/lastmile/spec"
)

// Bucket joins.
//
// When the input and a join's side table are both bucketed on the join
// key into the same N buckets (Iceberg bucket[N] partitions, or declared
// with join.buckets for plain Parquet laid out as bucket=B directories),
// a row's match can only be in the table's bucket of the row's file. Each
// work unit then needs one bucket of the table, not all of it, and a
// table far larger than memory joins within max_memory.
//
// bucketTable owns the resident buckets of one join and is shared by all
// workers. The protocol:
//
//   - A worker starting a unit (State.BeginUnit) learns the unit file's
//     bucket; the join's step acquires that bucket the first time the unit
//     needs it, and releases it when the unit ends (State.EndUnit). A
//     worker holds at most one bucket of each join, and acquires the joins
//     of a pipeline in pipeline order, so waits cannot form a cycle.
//   - acquire finds the bucket resident (another worker loaded it: shared,
//     its reference count goes up, and a worker that finds it still
//     loading waits for the load), or admits a load: unreferenced buckets
//     are evicted, least recently used first, until the held bytes plus
//     the new bucket's estimate fit max_memory. When they still do not fit
//     (every resident bucket is in use), the worker waits for a release
//     and tries again; since every bucket fits max_memory alone (checked
//     before the job starts) and holders release at the end of their unit,
//     the wait ends.
//   - A load runs outside the lock, one at a time per join (it decodes
//     on several goroutines); its estimate is replaced by the bytes the
//     loaded table holds once it is built. held is the accounting; peak
//     its high-water mark. A load is admitted only while held plus its
//     estimate fit max_memory, and only one load's excess over its
//     estimate is ever unsettled, so the peak stays within max_memory plus
//     one bucket's excess: below max_memory plus one bucket.
//
// Rejected: loading buckets in plan order ahead of the workers (the pool
// reorders units only within InFlight, but shuffled unit orders visit
// buckets in any order, so a prefetcher would need the same admission
// anyway); one lock per bucket (eviction must see every bucket at once);
// a sync.Cond (its Wait cannot be canceled with the job's context);
// concurrent loads (each could exceed its estimate, and their excesses
// add up beyond one bucket).
type bucketTable struct {
	t       *sideTable     // the join, with the whole table's plan (never loaded)
	n       int            // buckets
	plans   []*decode.Plan // by bucket: its files (an empty plan for an empty bucket)
	budget  int64          // max_memory
	of      func(file string) (int, error)
	verify  bool // check that every table key lies in its bucket (declared layouts)
	workers int

	mu      sync.Mutex
	changed chan struct{} // closed and replaced at every release and failed load
	res     map[int]*bucketEntry
	held    int64 // bytes of resident buckets (estimates while loading)
	peak    int64
	clock   uint64
	loads   int64
	largest int64 // bytes of the largest bucket loaded
	loading bool  // a load is running: the next waits for it
}

type bucketEntry struct {
	tab   *sideTable
	refs  int
	bytes int64
	used  uint64
	ready chan struct{} // closed when the load ended
	err   error
}

// BucketStats is a bucket join's accounting, for tests and metrics.
type BucketStats struct {
	Buckets  int   // buckets of the table
	Loads    int64 // bucket loads so far (a bucket evicted and needed again loads again)
	Held     int64 // bytes held now
	Peak     int64 // most bytes held at once
	Budget   int64 // max_memory
	Largest  int64 // the largest bucket loaded, in bytes
	Resident int   // buckets in memory now
}

func (b *bucketTable) stats() BucketStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := BucketStats{Buckets: b.n, Loads: b.loads, Held: b.held, Peak: b.peak, Budget: b.budget, Resident: len(b.res)}
	s.Largest = b.largest
	return s
}

// estimate is bucket i's memory estimate from its plan's statistics.
func (b *bucketTable) estimate(i int) int64 {
	t := *b.t
	t.plan = b.plans[i]
	return t.estimate()
}

func (b *bucketTable) notifyLocked() {
	close(b.changed)
	b.changed = make(chan struct{})
}

func (b *bucketTable) note(delta int64) {
	b.held += delta
	b.peak = max(b.peak, b.held)
}

// acquire returns bucket i's table and its entry, loading it if needed;
// the caller releases the entry.
func (b *bucketTable) acquire(ctx context.Context, job *spec.Job, i int) (*sideTable, *bucketEntry, error) {
	b.mu.Lock()
	for {
		if e := b.res[i]; e != nil {
			e.refs++
			b.clock++
			e.used = b.clock
			b.mu.Unlock()
			select {
			case <-e.ready:
			case <-ctx.Done():
				b.release(e)
				return nil, nil, ctx.Err()
			}
			if e.err != nil {
				b.release(e)
				return nil, nil, e.err
			}
			return e.tab, e, nil
		}
		if !b.loading {
			est := b.estimate(i)
			b.evictLocked(est)
			if b.held+est <= b.budget || b.held == 0 {
				break
			}
		}
		wait := b.changed
		b.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		b.mu.Lock()
	}
	est := b.estimate(i)
	b.clock++
	e := &bucketEntry{refs: 1, bytes: est, used: b.clock, ready: make(chan struct{})}
	b.res[i] = e
	b.note(est)
	b.loads++
	b.loading = true
	b.mu.Unlock()

	tab, err := b.load(ctx, job, i)

	b.mu.Lock()
	defer b.mu.Unlock()
	e.tab, e.err = tab, err
	b.loading = false
	b.notifyLocked()
	if err != nil {
		delete(b.res, i)
		b.held -= e.bytes
		e.refs--
	} else {
		b.note(tab.bytes - e.bytes)
		e.bytes = tab.bytes
		b.largest = max(b.largest, tab.bytes)
	}
	close(e.ready)
	if err != nil {
		return nil, nil, err
	}
	return tab, e, nil
}

// evictLocked drops unreferenced buckets, least recently used first,
// until need more bytes fit the budget or none is left to drop.
func (b *bucketTable) evictLocked(need int64) {
	for b.held+need > b.budget {
		victim, oldest := -1, uint64(0)
		for i, e := range b.res {
			if e.refs == 0 && (victim < 0 || e.used < oldest) {
				victim, oldest = i, e.used
			}
		}
		if victim < 0 {
			return
		}
		b.held -= b.res[victim].bytes
		delete(b.res, victim)
	}
}

// release drops a reference to e (an evicted or failed entry, no longer
// resident, only loses the reference).
func (b *bucketTable) release(e *bucketEntry) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e.refs--
	b.notifyLocked()
}

// load decodes bucket i and builds its hash table, within max_memory,
// checking that its keys belong to it when the layout was declared.
func (b *bucketTable) load(ctx context.Context, job *spec.Job, i int) (*sideTable, error) {
	t := &sideTable{op: b.t.op, jn: b.t.jn, plan: b.plans[i], intKey: b.t.intKey, unique: b.t.unique}
	if err := t.load(ctx, job, Env{Workers: b.workers}); err != nil {
		return nil, fmt.Errorf("bucket %d of %d: %w", i, b.n, err)
	}
	if b.verify {
		if err := t.checkBucket(job, b.n, i); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// checkBucket fails when a key of t is not in bucket i of n: the files
// are not laid out as declared, and a bucket join would miss matches.
func (t *sideTable) checkBucket(job *spec.Job, n, i int) error {
	k := &t.keys
	for r := range t.rows {
		if k.Valid != nil && k.Valid[r] == 0 {
			continue
		}
		var got int
		var shown string
		if t.intKey {
			v := intAt(k, r)
			got, shown = iceberg.BucketInt(n, v), strconv.FormatInt(v, 10)
		} else {
			v := k.Data[k.Offsets[r]:k.Offsets[r+1]]
			got, shown = iceberg.BucketBytes(n, v), strconv.Quote(string(v))
		}
		if got != i {
			return job.OpError(t.op, "buckets", "side table %s: key %s lies in the files of bucket %d, but Iceberg's bucket[%d] puts it in bucket %d: the table is not bucketed as declared (remove buckets: to load it whole)",
				t.jn.Table, shown, i, n, got)
		}
	}
	return nil
}

// pathBucket finds a declared layout's bucket in a file path: the last
// path element "bucket=B" (or "NAME_bucket=B", as Iceberg writers name
// bucket partition directories), B in [0, n).
func pathBucket(p string, n int) (int, error) {
	dir := path.Dir(p)
	for dir != "." && dir != "/" && dir != "" {
		el := path.Base(dir)
		if name, v, ok := strings.Cut(el, "="); ok && (name == "bucket" || strings.HasSuffix(name, "_bucket")) {
			b, err := strconv.Atoi(v)
			if err != nil || b < 0 || b >= n {
				return 0, fmt.Errorf("file %s: %s: want a bucket from 0 to %d", p, el, n-1)
			}
			return b, nil
		}
		dir = path.Dir(dir)
	}
	return 0, fmt.Errorf("file %s is under no bucket=B directory, as buckets: %d declares", p, n)
}

// Buckets describes a bucketed input: each input file's bucket of
// bucket[N](Column).
type Buckets struct {
	Column string
	N      int
	Of     map[string]int // input file path → bucket
}

// emptyPlan is a plan of no rows with the fields of p.
func emptyPlan(p *decode.Plan) *decode.Plan { return &decode.Plan{Fields: p.Fields} }

// tableLayout is how a side table's files are bucketed, as its Iceberg
// partitions say.
type tableLayout struct {
	col    string
	n      int
	of     map[string]int                        // file → bucket
	schema func(path string) *decode.TableSchema // each file's columns (decode.PlanOptions.Table)
}

// bucketJoin decides whether join t runs as a bucket join, and prepares
// it when it does: with join.buckets declared (a layout that does not
// match is an error), or when the input's and the table's Iceberg bucket
// partitions match on the join keys (anything else loads the table whole).
func (c *compiler) bucketJoin(ctx context.Context, op *spec.Op, t *sideTable, l *tableLayout, cols []string) error {
	jn, in := op.Join, c.env.InputBuckets
	var n int
	var tableOf map[string]int
	inputOf := func(file string) (int, error) { return pathBucket(file, n) }
	switch {
	case jn.Buckets > 0:
		n = jn.Buckets
		if l != nil && (l.n != n || l.col != jn.TableKey) {
			return c.errf(op, "buckets", "side table %s is bucketed as bucket[%d](%s), not bucket[%d](%s) as declared", jn.Table, l.n, l.col, n, jn.TableKey)
		}
		if in != nil && (in.N != n || in.Column != jn.On) {
			return c.errf(op, "buckets", "the input is bucketed as bucket[%d](%s), not bucket[%d](%s) as declared", in.N, in.Column, n, jn.On)
		}
		if l != nil {
			tableOf = l.of
		} else {
			tableOf = map[string]int{}
			for _, f := range t.plan.Files {
				b, err := pathBucket(f.Path, n)
				if err != nil {
					return c.errf(op, "buckets", "side table: %v", err)
				}
				tableOf[f.Path] = b
			}
		}
	case l != nil && in != nil && l.n == in.N && l.col == jn.TableKey && in.Column == jn.On:
		n, tableOf = l.n, l.of
	default:
		return nil
	}
	if in != nil {
		inputOf = func(file string) (int, error) {
			b, ok := in.Of[file]
			if !ok {
				return 0, fmt.Errorf("BUG: input file %s has no bucket", file)
			}
			return b, nil
		}
	}
	byBucket := make([][]string, n)
	for _, f := range t.plan.Files {
		b := tableOf[f.Path]
		byBucket[b] = append(byBucket[b], f.Path)
	}
	bt := &bucketTable{t: t, n: n, plans: make([]*decode.Plan, n), budget: int64(jn.MaxMemory), of: inputOf,
		verify: l == nil, workers: max(1, c.env.Workers), changed: make(chan struct{}), res: map[int]*bucketEntry{}}
	for b, paths := range byBucket {
		if len(paths) == 0 {
			bt.plans[b] = emptyPlan(t.plan)
			continue
		}
		opts := decode.PlanOptions{Columns: cols, FS: c.env.FS, Listed: true} // the files of the plan of the whole table
		if l != nil {
			opts.Table = l.schema
		}
		p, err := decode.PlanFiles(ctx, paths, opts)
		if err != nil {
			return c.tableErr(ctx, op, "table", err)
		}
		sameDeletions(p, t.plan)
		bt.plans[b] = p
	}
	t.buckets = bt
	return nil
}

// checkBuckets refuses, before the job starts, a bucket join with a
// bucket that would not fit max_memory alone.
func (b *bucketTable) check(job *spec.Job) error {
	for i := range b.plans {
		if est := b.estimate(i); est > b.budget {
			return job.OpError(b.t.op, "max_memory", "bucket %d of side table %s needs %s, over max_memory %s; raise max_memory or use more buckets",
				i, b.t.jn.Table, sizeText(est), sizeText(b.budget))
		}
	}
	return nil
}

// bucketUse is one worker's hold on a bucket join's table for the unit it
// runs (see bucketTable). Its zero value, or one without b, stands for a
// whole-table join.
type bucketUse struct {
	b    *bucketTable
	ctx  context.Context
	job  *spec.Job
	file string
	cur  *sideTable
	ent  *bucketEntry
	idx  int // the unit's bucket, while cur is set
}

// table returns the table to probe for the current unit.
func (u *bucketUse) table(whole *sideTable) (*sideTable, error) {
	if u.b == nil {
		return whole, nil
	}
	if u.cur != nil {
		return u.cur, nil
	}
	if u.file == "" {
		return nil, fmt.Errorf("BUG: bucket join of %s outside a unit (State.BeginUnit not called)", whole.jn.Table)
	}
	i, err := u.b.of(u.file)
	if err != nil {
		return nil, u.job.OpError(whole.op, "buckets", "input %v", err)
	}
	tab, ent, err := u.b.acquire(u.ctx, u.job, i)
	if err != nil {
		return nil, err
	}
	u.cur, u.ent, u.idx = tab, ent, i
	return tab, nil
}

// checkKeys fails when a row's key (rows sel of key, all when nil) is
// not in the unit's bucket: with a declared layout, the input's files
// are checked as the table's are, since a row in the wrong bucket would
// silently miss its match. Iceberg layouts, written by Iceberg, are not.
func (u *bucketUse) checkKeys(whole *sideTable, key *column.Column, sel []int32, n int) error {
	if u.b == nil || !u.b.verify || u.cur == nil {
		return nil
	}
	for j := range n {
		r := j
		if sel != nil {
			r = int(sel[j])
		}
		if key.Valid != nil && key.Valid[r] == 0 {
			continue
		}
		var got int
		var shown string
		if whole.intKey {
			v := intAt(key, r)
			got, shown = iceberg.BucketInt(u.b.n, v), strconv.FormatInt(v, 10)
		} else {
			v := key.Data[key.Offsets[r]:key.Offsets[r+1]]
			got, shown = iceberg.BucketBytes(u.b.n, v), strconv.Quote(string(v))
		}
		if got != u.idx {
			return u.job.OpError(whole.op, "buckets", "input file %s is in bucket %d, but its key %s is in bucket %d of bucket[%d]: the input is not bucketed as declared (remove buckets: to load the table whole)",
				u.file, u.idx, shown, got, u.b.n)
		}
	}
	return nil
}

func (u *bucketUse) begin(ctx context.Context, job *spec.Job, file string) {
	u.end()
	u.ctx, u.job, u.file = ctx, job, file
}

func (u *bucketUse) end() {
	if u.ent != nil {
		u.b.release(u.ent)
		u.cur, u.ent = nil, nil
	}
	u.file, u.ctx = "", nil
}

// unitUser is a step that holds something for the unit being run.
type unitUser interface {
	beginUnit(ctx context.Context, job *spec.Job, file string)
	endUnit()
}

func (s *joinDrop) beginUnit(ctx context.Context, job *spec.Job, file string) {
	s.use.begin(ctx, job, file)
}
func (s *joinDrop) endUnit() { s.use.end() }
func (s *joinLeft) beginUnit(ctx context.Context, job *spec.Job, file string) {
	s.use.begin(ctx, job, file)
}
func (s *joinLeft) endUnit() { s.use.end() }

// BeginUnit tells the state which input file the rows of the next Select
// and Apply calls come from, until EndUnit: a bucket join probes that
// file's bucket of its table, loading it if needed (ctx bounds the wait).
// Without bucket joins it does nothing.
func (s *State) BeginUnit(ctx context.Context, file string) {
	for _, st := range s.steps {
		if u, ok := st.(unitUser); ok {
			u.beginUnit(ctx, s.p.job, file)
		}
	}
}

// EndUnit releases what the unit held (bucket joins' buckets), so that
// they may be evicted.
func (s *State) EndUnit() {
	for _, st := range s.steps {
		if u, ok := st.(unitUser); ok {
			u.endUnit()
		}
	}
}

// BucketStats returns the accounting of each bucket join of the
// pipeline, in pipeline order (whole-table joins are left out).
func (p *Program) BucketStats() []BucketStats {
	var out []BucketStats
	for _, t := range p.tables {
		if t.buckets != nil {
			out = append(out, t.buckets.stats())
		}
	}
	return out
}

// SideMemory returns the memory the program's join side tables hold now:
// each whole table's bytes as loaded, and each bucket join's resident
// buckets (at most its max_memory, plus one bucket's excess while a load
// settles).
func (p *Program) SideMemory() int64 {
	var n int64
	for _, t := range p.tables {
		if t.buckets != nil {
			n += t.buckets.stats().Held
			continue
		}
		n += t.bytes
	}
	return n
}

// sameDeletions gives the units of p, a bucket's plan, the deleted rows
// (an Iceberg snapshot's deletes) of the same units of whole, the table's
// plan, for the loader to drop. Both are planned alike from the same
// files, so their units are the same: by file, row group and first row.
func sameDeletions(p, whole *decode.Plan) {
	type key struct {
		file     string
		group    int
		rowStart int64
	}
	del := map[key][]int32{}
	for _, u := range whole.Units {
		if len(u.Deleted) > 0 {
			del[key{u.File, u.RowGroup, u.RowStart}] = u.Deleted
		}
	}
	for i := range p.Units {
		u := &p.Units[i]
		u.Deleted = del[key{u.File, u.RowGroup, u.RowStart}]
	}
}
