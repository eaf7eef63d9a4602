package ops

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"math/bits"
	"sync"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/spec"
)

// sideTable is a join's table: loaded once by Compile, then read-only and
// shared by every worker. Its key column becomes a hash table (open
// addressing, linear probing, load at most 1/2); a left join keeps the
// columns it adds, in table row order, to gather from.
type sideTable struct {
	op     *spec.Op
	jn     *spec.Join
	plan   *decode.Plan // fields: the key, then jn.Columns
	intKey bool
	unique bool // left join: duplicate keys are an error

	keys  column.Column   // the key column as loaded
	cols  []column.Column // jn.Columns as loaded
	ints  intTable
	strs  strTable
	rows  int   // table rows
	bytes int64 // memory held, as compared with max_memory

	buckets *bucketTable // a bucket join: loaded by bucket, never whole
}

// intTable maps int64 keys to table rows. Slot s is empty when key[s] is
// the sentinel math.MinInt64; a table key equal to the sentinel is kept
// aside. Probes read only key until they hit, so a semi or anti join's
// table is 8 bytes a slot (no rows are kept for it) and stays in cache
// longer.
type intTable struct {
	key    []int64
	row    []int32 // nil unless rows are wanted (left join)
	shift  uint8
	mask   uint64
	hasMin bool
	minRow int32
}

const emptyKey = math.MinInt64

func slotsFor(n int) int {
	return max(16, 1<<bits.Len(uint(2*n)))
}

func (t *intTable) init(n int, rows bool) {
	size := slotsFor(n)
	t.key = make([]int64, size)
	for i := range t.key {
		t.key[i] = emptyKey
	}
	if rows {
		t.row = make([]int32, size)
	}
	t.mask = uint64(size - 1)
	t.shift = uint8(64 - bits.TrailingZeros(uint(size)))
}

func (t *intTable) slot(k int64) uint64 { return (uint64(k) * 0x9e3779b97f4a7c15) >> t.shift }

// insert adds k for row and returns -1, or the row that already has k
// (any row >= 0 when rows are not kept).
func (t *intTable) insert(k int64, row int32) int32 {
	if k == emptyKey {
		if t.hasMin {
			return t.minRow
		}
		t.hasMin = true
		if t.row != nil {
			t.minRow = row
		}
		return -1
	}
	for s := t.slot(k); ; s = (s + 1) & t.mask {
		switch t.key[s] {
		case emptyKey:
			t.key[s] = k
			if t.row != nil {
				t.row[s] = row
			}
			return -1
		case k:
			if t.row != nil {
				return t.row[s]
			}
			return 0
		}
	}
}

// find returns the table row of k (0 when rows are not kept), or -1.
func (t *intTable) find(k int64) int32 {
	if k == emptyKey {
		if t.hasMin {
			return t.minRow
		}
		return -1
	}
	for s := t.slot(k); ; s = (s + 1) & t.mask {
		switch t.key[s] {
		case k:
			if t.row != nil {
				return t.row[s]
			}
			return 0
		case emptyKey:
			return -1
		}
	}
}

// strTable maps byte-string keys to table rows; keys live in the table's
// key column, slots hold their hashes.
type strTable struct {
	keys *column.Column
	seed maphash.Seed
	hash []uint64
	row  []int32
	mask uint64
}

func (t *strTable) init(keys *column.Column, n int) {
	size := slotsFor(n)
	t.keys, t.seed = keys, maphash.MakeSeed()
	t.hash, t.row = make([]uint64, size), make([]int32, size)
	t.mask = uint64(size - 1)
}

func (t *strTable) key(row int32) []byte {
	return t.keys.Data[t.keys.Offsets[row]:t.keys.Offsets[row+1]]
}

func (t *strTable) insert(k []byte, row int32) int32 {
	h := maphash.Bytes(t.seed, k)
	for s := h & t.mask; ; s = (s + 1) & t.mask {
		r := t.row[s]
		switch {
		case r == 0:
			t.hash[s], t.row[s] = h, row+1
			return -1
		case t.hash[s] == h && bytes.Equal(t.key(r-1), k):
			return r - 1
		}
	}
}

func (t *strTable) find(k []byte) int32 {
	h := maphash.Bytes(t.seed, k)
	for s := h & t.mask; ; s = (s + 1) & t.mask {
		r := t.row[s]
		if r == 0 {
			return -1
		}
		if t.hash[s] == h && bytes.Equal(t.key(r-1), k) {
			return r - 1
		}
	}
}

// slotBytes is the size of the hash table's slots for n keys.
func (t *sideTable) slotBytes(n int) int64 {
	per := int64(12) // hash and row of a string key; key and row of a left join's int
	if t.intKey && !t.unique {
		per = 8
	}
	return int64(slotsFor(n)) * per
}

// estimate is the memory the table will need, from the plan's statistics:
// exact for fixed-width columns, the uncompressed chunk sizes for strings
// and lists.
func (t *sideTable) estimate() int64 {
	rows := t.plan.Rows
	n := t.slotBytes(int(rows))
	for i, f := range t.plan.Fields {
		switch f.Kind {
		case column.Fixed:
			n += rows * int64(f.DType.Size())
		default:
			n += 8 * (rows + 1)
			for _, u := range t.plan.Units {
				n += u.Chunks[i].Uncompressed
			}
		}
		if f.Nullable {
			n += rows
		}
	}
	return n
}

func (t *sideTable) tooBig(job *spec.Job, need int64) error {
	return job.OpError(t.op, "max_memory", "side table %s needs %s, over max_memory %s; raise max_memory or filter the table",
		t.jn.Table, sizeText(need), sizeText(int64(t.jn.MaxMemory)))
}

func sizeText(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1fGiB (%d bytes)", float64(n)/(1<<30), n)
	case n >= 1<<20:
		return fmt.Sprintf("%.1fMiB (%d bytes)", float64(n)/(1<<20), n)
	}
	return fmt.Sprintf("%d bytes", n)
}

// load decodes the table and builds its hash table. It refuses, before
// reading any data, a table whose statistics say it exceeds max_memory,
// and checks the memory actually held once loaded.
func (t *sideTable) load(ctx context.Context, job *spec.Job, env Env) error {
	limit := int64(t.jn.MaxMemory)
	if limit <= 0 {
		limit = 1 << 30
	}
	if est := t.estimate(); est > limit {
		return t.tooBig(job, est)
	}
	if t.plan.Rows > 1<<31-2 {
		return job.OpError(t.op, "table", "side table %s has %d rows, more than a join supports (2^31-2)", t.jn.Table, t.plan.Rows)
	}
	batches, err := decodeAll(ctx, t.plan, env.Workers)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return job.OpError(t.op, "table", "load side table: %v", err)
	}
	var all column.Batch
	for i := range batches {
		appendKept(&all, &batches[i], t.plan.Units[i].Deleted)
	}
	if len(all.Columns) == 0 {
		all.Columns = make([]column.Column, len(t.plan.Fields))
		for i, f := range t.plan.Fields {
			all.Columns[i] = column.Column{Name: f.Name, Kind: f.Kind, DType: f.DType, Width: 1}
			if f.Kind != column.Fixed {
				all.Columns[i].Offsets = []int64{0}
			}
		}
	}
	t.rows = all.Rows
	t.keys, t.cols = all.Columns[0], all.Columns[1:]
	for _, c := range all.Columns {
		t.bytes += int64(cap(c.Data)) + 8*int64(cap(c.Offsets)) + int64(cap(c.Valid))
	}
	t.bytes += t.slotBytes(t.rows)
	if t.bytes > limit {
		return t.tooBig(job, t.bytes)
	}
	return t.build(job)
}

// appendKept appends the rows of b to all but those in deleted (sorted
// rows of b: the rows an Iceberg snapshot deletes from its unit).
func appendKept(all, b *column.Batch, deleted []int32) {
	lo := 0
	for _, d := range deleted {
		if int(d) > lo {
			all.AppendRows(b, lo, int(d))
		}
		lo = int(d) + 1
	}
	if lo < b.Rows {
		all.AppendRows(b, lo, b.Rows)
	}
}

// decodeAll decodes every unit of plan, on up to workers goroutines.
func decodeAll(ctx context.Context, plan *decode.Plan, workers int) ([]column.Batch, error) {
	out := make([]column.Batch, len(plan.Units))
	workers = max(1, min(workers, len(plan.Units)))
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := plan.NewDecoder()
			defer d.Close()
			for i := w; i < len(plan.Units); i += workers {
				if err := d.Decode(ctx, plan.Units[i], &out[i]); err != nil {
					errs[w] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// build fills the hash table. Rows with a null key are left out: a null
// matches nothing.
func (t *sideTable) build(job *spec.Job) error {
	k := &t.keys
	dup := func(key string, a, b int32) error {
		return job.OpError(t.op, "table", "side table %s has key %s twice (table rows %d and %d); a left join needs unique keys: deduplicate the table",
			t.jn.Table, key, a, b)
	}
	if t.intKey {
		t.ints.init(t.rows, t.unique)
		for i := range t.rows {
			if k.Valid != nil && k.Valid[i] == 0 {
				continue
			}
			v := intAt(k, i)
			if prev := t.ints.insert(v, int32(i)); prev >= 0 && t.unique {
				return dup(fmt.Sprint(v), prev, int32(i))
			}
		}
		return nil
	}
	t.strs.init(k, t.rows)
	for i := range t.rows {
		if k.Valid != nil && k.Valid[i] == 0 {
			continue
		}
		v := k.Data[k.Offsets[i]:k.Offsets[i+1]]
		if prev := t.strs.insert(v, int32(i)); prev >= 0 && t.unique {
			return dup(fmt.Sprintf("%q", v), prev, int32(i))
		}
	}
	return nil
}

// intAt reads row i of an integer column as an int64. For the cold path;
// probes use the typed loops of lookupInts.
func intAt(c *column.Column, i int) int64 {
	switch c.DType {
	case column.Int64:
		return c.Int64s()[i]
	case column.Int32:
		return int64(c.Int32s()[i])
	case column.Int16:
		return int64(c.Int16s()[i])
	case column.Int8:
		return int64(c.Int8s()[i])
	}
	return int64(c.Uint8s()[i])
}

// lookup sets idx[j] to the table row matching row rows[j] of key (all
// rows when rows is nil), -1 for none or a null key.
func (t *sideTable) lookup(key *column.Column, rows []int32, idx []int32) {
	n := len(idx)
	at := func(j int) int {
		if rows == nil {
			return j
		}
		return int(rows[j])
	}
	switch {
	case !t.intKey:
		for j := range n {
			i := at(j)
			idx[j] = t.strs.find(key.Data[key.Offsets[i]:key.Offsets[i+1]])
		}
	case key.DType == column.Int64:
		ks := key.Int64s()
		if rows == nil {
			for j, v := range ks[:n] {
				idx[j] = t.ints.find(v)
			}
		} else {
			for j, i := range rows {
				idx[j] = t.ints.find(ks[i])
			}
		}
	default:
		for j := range n {
			idx[j] = t.ints.find(intAt(key, at(j)))
		}
	}
	if key.Valid != nil {
		for j := range n {
			if key.Valid[at(j)] == 0 {
				idx[j] = -1
			}
		}
	}
}

// keyKind says whether a column can be a join key, and which kind.
func keyKind(kind column.Kind, dtype column.DType, width int) (isInt, ok bool) {
	switch {
	case kind == column.Bytes:
		return false, true
	case kind == column.Fixed && width == 1 && isIntDType(dtype):
		return true, true
	}
	return false, false
}
