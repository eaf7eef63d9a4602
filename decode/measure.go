package decode

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/lastmile/lastmile/column"
)

// Path names a decode implementation for Measure.
type Path int

const (
	// PathOwn is the production Decoder.
	PathOwn Path = iota
	// PathParquetGo is parquet-go's low-level page API (compare_parquetgo.go).
	PathParquetGo
	// PathArrow is arrow-go v18 pqarrow (compare_arrow.go).
	PathArrow
)

// Paths lists every Path, production first.
var Paths = []Path{PathOwn, PathParquetGo, PathArrow}

func (p Path) String() string {
	switch p {
	case PathOwn:
		return "own"
	case PathParquetGo:
		return "parquetgo"
	case PathArrow:
		return "arrow"
	}
	return fmt.Sprintf("path(%d)", int(p))
}

// ParsePath maps "own", "parquetgo" or "arrow" to its Path.
func ParsePath(s string) (Path, error) {
	for _, p := range Paths {
		if p.String() == s {
			return p, nil
		}
	}
	return 0, fmt.Errorf("unknown decode path %q (want own, parquetgo or arrow)", s)
}

// UnitDecoder decodes units into batches; NewUnitDecoder gives one for
// each Path. Like Decoder, one is used by one goroutine at a time.
type UnitDecoder interface {
	Decode(ctx context.Context, u Unit, dst *column.Batch) error
	Close() error
}

var (
	_ UnitDecoder = (*Decoder)(nil)
	_ UnitDecoder = (*pgDecoder)(nil)
	_ UnitDecoder = (*arrowDecoder)(nil)
)

// NewUnitDecoder returns a decoder of the given path for fields. Only
// PathOwn is meant for production; the others exist to be compared.
func NewUnitDecoder(p Path, fields []Field) (UnitDecoder, error) {
	switch p {
	case PathOwn:
		return NewDecoder(fields), nil
	case PathParquetGo, PathArrow:
		for i := range fields {
			if err := comparable(p, &fields[i]); err != nil {
				return nil, err
			}
		}
		if p == PathArrow {
			return newArrowDecoder(fields), nil
		}
		return newPGDecoder(fields), nil
	}
	return nil, fmt.Errorf("unknown decode path %d", int(p))
}

// comparable refuses a field that comparison path p does not decode as
// the production decoder does: a column inside a struct (both read
// top-level columns by name), a converted one on parquet-go's path, a
// DECIMAL or UINT_32 on arrow's (which keeps their arrow types).
func comparable(p Path, f *Field) error {
	why := ""
	switch {
	case f.StoredAs != "":
		why = "a column found by its field id under another name"
	case f.Absent:
		why = "a column its files lack"
	case f.Name != f.Path[0]:
		why = "a column inside a struct"
	case p == PathParquetGo && f.converts():
		why = "a converted column (INT96, DECIMAL, UINT_32)"
	case p == PathArrow && (f.Decimal || f.Unsigned):
		why = "a DECIMAL or UINT_32 column"
	default:
		return nil
	}
	return fmt.Errorf("%w: the %s comparison path does not decode %q, %s", ErrUnsupported, p, f.Name, why)
}

// absentIn refuses a unit with a column its file lacks, or stores in a
// type its table has promoted since: the comparison paths read the
// file's columns as they are.
func absentIn(u *Unit, fields []Field) error {
	for i := range u.Chunks {
		if c := &u.Chunks[i]; c.Absent || c.Physical != 0 {
			return &Error{File: u.File, RowGroup: u.RowGroup, Column: fields[i].Name, PageOffset: -1,
				Err: fmt.Errorf("%w: the comparison paths read a file's columns only as it stores them", ErrUnsupported)}
		}
	}
	return nil
}

// Result is one measured pass over a plan's units.
type Result struct {
	Path       string  `json:"path"` // decode path, or "decompress"
	Workers    int     `json:"workers"`
	Units      int     `json:"units"`
	Rows       int64   `json:"rows"`
	OutBytes   int64   `json:"out_bytes"`   // decoded payload (column.Batch.Bytes), or decompressed bytes
	Seconds    float64 `json:"seconds"`     // wall time
	CPUSeconds float64 `json:"cpu_seconds"` // user+system time of the whole process over the pass
}

// MBps is output megabytes (1e6) per wall second.
func (r Result) MBps() float64 { return float64(r.OutBytes) / 1e6 / r.Seconds }

// MBpsPerCore is output megabytes per CPU second.
func (r Result) MBpsPerCore() float64 { return float64(r.OutBytes) / 1e6 / r.CPUSeconds }

// Measure decodes every unit of plan once with the given path on workers
// goroutines (one unit per goroutine at a time, each with its own decoder
// and batch) and reports the time taken. Each worker warms up on the
// largest unit first, untimed, so the figure is the steady state.
func Measure(ctx context.Context, plan *Plan, path Path, workers int) (Result, error) {
	var out atomic.Int64
	res, err := runUnits(ctx, plan, workers, func() (func(u Unit) error, func(), error) {
		// The production path reads through the plan's FS (an object
		// store, for the S3 benchmark); the others open local files.
		var dec UnitDecoder = plan.NewDecoder()
		if path != PathOwn {
			var err error
			if dec, err = NewUnitDecoder(path, plan.Fields); err != nil {
				return nil, nil, err
			}
		}
		var b column.Batch
		return func(u Unit) error {
				if err := dec.Decode(ctx, u, &b); err != nil {
					return err
				}
				out.Add(int64(b.Bytes()))
				return nil
			}, func() {
				dec.Close()
			}, nil
	}, func() { out.Store(0) })
	res.Path, res.OutBytes = path.String(), out.Load()
	return res, err
}

// MeasureDecompress is the reference floor for Measure: for every unit it
// reads the same projected column-chunk bytes and decompresses every page
// (whole v1 pages, the value section of v2 pages, dictionary pages) into
// a reused buffer, and does nothing else.
func MeasureDecompress(ctx context.Context, plan *Plan, workers int) (Result, error) {
	var out atomic.Int64
	res, err := runUnits(ctx, plan, workers, func() (func(u Unit) error, func(), error) {
		d := NewDecoder(plan.Fields)
		return func(u Unit) error {
				n, err := d.DecompressOnly(ctx, u)
				out.Add(n)
				return err
			}, func() {
				d.Close()
			}, nil
	}, func() { out.Store(0) })
	res.Path, res.OutBytes = "decompress", out.Load()
	return res, err
}

// runUnits times one pass of workers goroutines over plan's units. Each
// worker first handles the largest unit once, untimed, so that its buffers
// have grown and their pages are touched, as in a long-running job whose
// buffers circulate; reset then clears what that warm-up counted.
func runUnits(ctx context.Context, plan *Plan, workers int, mk func() (func(Unit) error, func(), error), reset func()) (Result, error) {
	workers = max(workers, 1)
	res := Result{Workers: workers, Units: len(plan.Units), Rows: plan.Rows}
	fns := make([]func(Unit) error, workers)
	for i := range fns {
		fn, closeFn, err := mk()
		if err != nil {
			return res, err
		}
		defer closeFn()
		fns[i] = fn
	}
	if len(plan.Units) > 0 {
		largest := plan.Units[0]
		for _, u := range plan.Units {
			if u.Rows > largest.Rows {
				largest = u
			}
		}
		for _, fn := range fns {
			if err := fn(largest); err != nil {
				return res, err
			}
		}
		reset()
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, workers)
	cpu0 := cpuSeconds()
	t0 := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(plan.Units) || ctx.Err() != nil {
					return
				}
				if err := fns[w](plan.Units[i]); err != nil {
					errs[w] = err
					next.Store(int64(len(plan.Units)))
					return
				}
			}
		}()
	}
	wg.Wait()
	res.Seconds = time.Since(t0).Seconds()
	res.CPUSeconds = cpuSeconds() - cpu0
	for _, err := range errs {
		if err != nil {
			return res, err
		}
	}
	return res, ctx.Err()
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

// DecompressOnly reads u's projected column chunks and decompresses their
// pages into a reused buffer, returning the decompressed bytes: the floor
// a decode of u is measured against.
func (d *Decoder) DecompressOnly(ctx context.Context, u Unit) (int64, error) {
	if err := d.Open(ctx, u); err != nil {
		return 0, err
	}
	var total int64
	h := &d.hdr
	for fi := range d.fields {
		c := &d.unit.Chunks[fi]
		if c.Absent {
			continue
		}
		d.pr.reset(d.file, c, h)
		for {
			_, body, ok, err := d.pr.next()
			if err != nil {
				return total, d.errorf(fi, -1, err)
			}
			if !ok {
				break
			}
			if err := checkPageSize(c, h, body); err != nil {
				return total, d.errorf(fi, -1, err)
			}
			if err := d.holdPage(c, h, body); err != nil {
				return total, d.errorf(fi, -1, err)
			}
			n := int(h.uncompressed)
			compressed := c.Codec != codecNone
			if h.typ == pageDataV2 {
				lv := int(h.repLen + h.defLen)
				body, n = body[lv:], n-lv
				compressed = compressed && h.isCompressed
			}
			if !compressed || n < 0 {
				continue
			}
			d.page = growBytes(d.page, n)
			if err := d.z.decompress(c.Codec, d.page, body); err != nil {
				return total, d.errorf(fi, -1, corrupt(err))
			}
			total += int64(n)
		}
	}
	return total, nil
}
