package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/lastmile/lastmile/datagen"
	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/spec"
)

// The memory measurement (lastmile bench -only memory): peak RSS of
// `lastmile run` over N and 10N rows at the same unit size, all columns,
// a 16384-row shuffle window and 4 slots, against the job's accounted
// bound (rings + in-flight units + shuffle window + cache + side tables +
// engine.RuntimeOverhead). Each size runs twice: as run runs by default,
// with the heap limited to the accounted memory, and with GOMEMLIMIT=off,
// the collector's own pacing (the reference). Each run is a process of
// its own, so its peak is its own (getrusage's ru_maxrss).

// memoryRun is one run's peak.
type memoryRun struct {
	Rows      int64   `json:"rows"`
	HeapLimit bool    `json:"heap_limit"`
	PeakRSS   int64   `json:"peak_rss_bytes"`
	Bound     int64   `json:"bound_bytes"`
	CPU       float64 `json:"cpu_seconds"`
	Seconds   float64 `json:"seconds"`
}

type memoryReport struct {
	UnitRows int64       `json:"unit_rows"`
	Runs     []memoryRun `json:"runs"`
	// Growth is the peak at 10N over the peak at N, with the heap limit
	// (target <= 1.1); WithinBound says every limited run stayed within
	// its bound.
	Growth      float64 `json:"growth"`
	WithinBound bool    `json:"within_bound"`
}

const memoryUnitRows = 100000

func benchMemory(ctx context.Context, self, shmDir string, rows int64, log io.Writer) (*memoryReport, error) {
	tmp, err := os.MkdirTemp("", "lastmile-bench-memory-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	rep := &memoryReport{UnitRows: memoryUnitRows}
	peak := map[int64]int64{}
	rep.WithinBound = true
	for _, n := range []int64{rows, 10 * rows} {
		dir := filepath.Join(tmp, fmt.Sprint(n))
		cfg := datagen.DefaultConfig()
		cfg.Rows, cfg.RowGroupRows, cfg.Files = n, memoryUnitRows, int(max(1, n/memoryUnitRows))
		fmt.Fprintf(log, "memory: generating %d rows\n", n)
		if _, err := datagen.Write(ctx, dir, cfg); err != nil {
			return nil, fmt.Errorf("generate %d rows: %w", n, err)
		}
		specPath := filepath.Join(tmp, fmt.Sprintf("mem%d.yaml", n))
		text := fmt.Sprintf("version: 1\nname: benchmem%d\ninputs: [%s]\nbatch: {size: 4096, last: drop}\nshuffle: {units: true, buffer: 16384}\nring: {slots: 4}\ndecode: {workers: 2}\nseed: 7\n", n, dir)
		if err := os.WriteFile(specPath, []byte(text), 0o644); err != nil {
			return nil, err
		}
		job, err := readJob(ctx, specPath)
		if err != nil {
			return nil, err
		}
		fp, err := engine.EstimateFootprint(ctx, job, nil)
		if err != nil {
			return nil, err
		}
		for _, limited := range []bool{true, false} {
			r, err := memoryRunOnce(ctx, self, shmDir, specPath, job, limited)
			if err != nil {
				return nil, err
			}
			r.Rows, r.Bound = n, fp.Bytes()+engine.RuntimeOverhead
			if limited {
				peak[n] = r.PeakRSS
				rep.WithinBound = rep.WithinBound && r.PeakRSS <= r.Bound
			}
			fmt.Fprintf(log, "memory: %d rows, heap limit %v: peak RSS %s (bound %s)\n", n, limited, bytesString(r.PeakRSS), bytesString(r.Bound))
			rep.Runs = append(rep.Runs, r)
		}
	}
	rep.Growth = float64(peak[10*rows]) / float64(max(peak[rows], 1))
	return rep, nil
}

// memoryRunOnce runs the job in a process of its own, read by `lastmile
// cat` in another, and returns the producer's peak RSS and CPU.
func memoryRunOnce(ctx context.Context, self, shmDir, specPath string, job *spec.Job, limited bool) (memoryRun, error) {
	env := os.Environ()
	if shmDir != "" {
		env = append(env, "LASTMILE_SHM_DIR="+shmDir)
	}
	if !limited {
		env = append(env, "GOMEMLIMIT=off")
	}
	cat := exec.CommandContext(ctx, self, "cat", "-wait", "60s", "lastmile."+job.Name)
	cat.Env = env
	if err := cat.Start(); err != nil {
		return memoryRun{}, err
	}
	defer cat.Wait()
	run := exec.CommandContext(ctx, self, "run", specPath)
	run.Env = env
	start := time.Now()
	if out, err := run.CombinedOutput(); err != nil {
		cat.Process.Kill()
		return memoryRun{}, fmt.Errorf("run %s: %v\n%s", specPath, err, out)
	}
	ru, _ := run.ProcessState.SysUsage().(*syscall.Rusage)
	if ru == nil {
		return memoryRun{}, fmt.Errorf("run %s: no resource usage", specPath)
	}
	return memoryRun{HeapLimit: limited, PeakRSS: ru.Maxrss << 10, Seconds: time.Since(start).Seconds(),
		CPU: time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()}, nil
}

// WriteTable prints the memory measurement.
func (r *memoryReport) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "Memory: peak RSS of lastmile run, all columns, %d-row units, shuffle 16384, 4 slots, 2 workers\n", r.UnitRows)
	tw := newTable(w)
	fmt.Fprintln(tw, "rows\theap\tpeak RSS\tbound\tpeak/bound\tCPU s")
	for _, x := range r.Runs {
		heap := "limited (default)"
		if !x.HeapLimit {
			heap = "GOMEMLIMIT=off"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%.2f\t%.2f\n", x.Rows, heap, bytesString(x.PeakRSS), bytesString(x.Bound),
			float64(x.PeakRSS)/float64(max(x.Bound, 1)), x.CPU)
	}
	tw.Flush()
	verdict := "met"
	if r.Growth > 1.1 || !r.WithinBound {
		verdict = "MISSED"
	}
	fmt.Fprintf(w, "peak at 10N / peak at N: %.2f (target <= 1.10), every limited run within its bound: %v: %s\n", r.Growth, r.WithinBound, verdict)
}
