package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"sync"

	"github.com/lastmile/lastmile/engine"
)

// PythonClient measures the Python trainer client's own cost per batch
// on the job's batches: `python -m lastmile cat --torch` takes batches
// batches as torch tensors from one rank's ring, with a 10 ms step after
// each so that batches wait for it in the ring (then what it reports as
// time in next() and torch() is its own cost, not waits), while the job
// runs on all the cores. pythonPath is the directory holding the lastmile
// package. It returns seconds per batch, the first batches' warm-up
// (torch's first calls) spread over them: take enough batches.
func PythonClient(ctx context.Context, cfg PlanConfig, python, pythonPath string, batches int) (float64, error) {
	cfg.defaults()
	job := *cfg.Job
	zero := 0
	job.WorldSize, job.Epochs = 1, &zero
	job.Cache.MaxMemory = 0
	job.Ring.Dir = cfg.ShmDir
	job.Ring.Name = fmt.Sprintf("lastmile-plan-py-%d", os.Getpid())
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, python, "-m", "lastmile", "cat", "--json", "--torch", "--shm-dir", ringDir(cfg.ShmDir),
		"--step-ms", "10", "-n", fmt.Sprint(batches), "--timeout", "60", job.Ring.Name)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+pythonPath)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("python client: %w", err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		engine.Run(ctx, &job, engine.Options{Remove: true})
	}()
	err := cmd.Wait()
	cancel()
	wg.Wait()
	if err != nil {
		return 0, fmt.Errorf("python client: %w: %s", err, bytes.TrimSpace(errb.Bytes()))
	}
	var rep struct {
		ClientMS *float64 `json:"client_ms_per_batch"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || rep.ClientMS == nil {
		return 0, fmt.Errorf("python client: no client_ms_per_batch in %q", out.String())
	}
	return *rep.ClientMS / 1e3, nil
}
