package bench

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/spec"
)

// Two cores are not twice one core
//
// The spill speed-up compares one core computing alone, its neighbour
// idle, with two cores computing at once. On a machine whose cores share
// a cache, memory bandwidth or a physical core (two vCPUs of a VM can be
// the two hyperthreads of one host core, which the guest cannot see), a
// core computes more slowly while its neighbour works. No way of sharing
// the work, a peer or another local worker, can beat that: it is the
// ceiling of any two-core run, before a byte is sent. contention measures
// it with the same units: a pass over them on this process's core, alone
// and then while a second process (RunContender) computes the same units
// on the other core; the ceiling is 2 × alone / contended.

// contention measures the CPU seconds of a pass over job's units here, alone
// and beside a contender on CPU other, in Repeats pairs, and returns the
// pair whose slowdown is the median. It returns (0, 0, nil) without
// ContendCommand.
func contention(ctx context.Context, cfg SpillConfig, job *spec.Job, other int) (alone, contended float64, err error) {
	if len(cfg.ContendCommand) == 0 {
		return 0, 0, nil
	}
	up, err := engine.NewUnitProcessor(ctx, job, nil, 1)
	if err != nil {
		return 0, 0, err
	}
	defer up.Close()
	units := up.Units()
	var out column.Batch
	pass := func() (float64, error) {
		c0 := processCPU()
		for _, u := range units {
			if err := up.Compute(ctx, u, &out); err != nil {
				return 0, err
			}
		}
		return processCPU() - c0, nil
	}
	// Pairs, not the fastest of each side: the host's speed drifts over
	// seconds, and a pass is compared with the one just before it.
	type pair struct{ alone, contended float64 }
	var pairs []pair
	for i := range cfg.Repeats {
		fmt.Fprintf(cfg.Log, "spill: contention %d of %d: the units alone, then beside the same units on CPU %d ...\n", i+1, cfg.Repeats, other)
		a, err := pass()
		if err != nil {
			return 0, 0, err
		}
		stop, err := startContender(ctx, cfg, other)
		if err != nil {
			return 0, 0, err
		}
		c, err := pass()
		stop()
		if err != nil {
			return 0, 0, err
		}
		pairs = append(pairs, pair{a, c})
	}
	// The pair of the median slowdown.
	slices.SortFunc(pairs, func(x, y pair) int { return cmp.Compare(x.contended/x.alone, y.contended/y.alone) })
	m := pairs[len(pairs)/2]
	return m.alone, m.contended, nil
}

// startContender starts RunContender's process on cpu and waits until it
// computes.
func startContender(ctx context.Context, cfg SpillConfig, cpu int) (stop func(), err error) {
	args := append(append([]string{}, cfg.ContendCommand[1:]...), "-spill-cpu", strconv.Itoa(cpu),
		"-spill-pipeline", cfg.Spec, "-spill-root", cfg.Data)
	cmd := exec.CommandContext(ctx, cfg.ContendCommand[0], args...)
	cmd.Stderr = cfg.Log
	outp, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("spill: contender: %w", err)
	}
	stop = func() { cmd.Process.Kill(); cmd.Wait() }
	line, err := bufio.NewReader(outp).ReadString('\n')
	if err != nil || line != "computing\n" {
		stop()
		return nil, fmt.Errorf("spill: the contender did not start computing (%q, %v)", line, err)
	}
	return stop, nil
}

// RunContender is the contender of the spill measurement: on cpu, it
// computes the units of spec's job over the measurement's data in dir
// (as RunSpill generated it) round and round until ctx ends, and writes
// "computing" to ready once it has computed its first unit.
func RunContender(ctx context.Context, specPath, dir string, cpu int, ready io.Writer) error {
	if err := PinProcess(cpu); err != nil {
		return err
	}
	return contend(ctx, specPath, dir, ready)
}

// contend is RunContender on the CPUs this process has.
func contend(ctx context.Context, specPath, dir string, ready io.Writer) error {
	cfg := SpillConfig{Spec: specPath, Data: dir, ShmDir: os.TempDir()}
	cfg.defaults()
	text, err := os.ReadFile(cfg.Spec)
	if err != nil {
		return err
	}
	alone, err := spillJob(cfg, text, dir+"/parquet", dir+"/spam.parquet")
	if err != nil {
		return err
	}
	job := slicedJob(alone, 0) // the run with the peer's units by default: the spec's own
	up, err := engine.NewUnitProcessor(ctx, job, nil, 1)
	if err != nil {
		return err
	}
	defer up.Close()
	units := up.Units()
	var out column.Batch
	for i := 0; ctx.Err() == nil; i++ {
		if err := up.Compute(ctx, units[i%len(units)], &out); err != nil {
			return err
		}
		if i == 0 {
			if _, err := io.WriteString(ready, "computing\n"); err != nil {
				return err
			}
		}
	}
	return nil
}
