package chaos_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// inputRun damages one input file while a one-epoch job reads it: garbage
// written over its middle, truncation to half, or removal. The job either
// fails with an error that names the file (an error seen; what the ranks
// recorded before it must be correct and unrepeated), or it had read the
// file already and completes exactly.
func inputRun(t *testing.T, c *tally, rng *rand.Rand, seed uint64, _ dataset) {
	compression := []string{"none", "snappy", "zstd"}[rng.IntN(3)]
	data := dataset{rows: 2 * dataRows}
	data.dir, data.g = genData(t, workDir(t, "chaos-input"), data.rows, 8, compression, seed)
	j := newJob(t, startDaemon(t, ""), rng, seed, data, 4*time.Second, 1)
	files, _ := filepath.Glob(filepath.Join(data.dir, "*.parquet"))
	file, after, how := files[rng.IntN(len(files))], 1+rng.IntN(10), rng.IntN(3)
	waitRecorded(j, after)
	what, err := damage(file, how, rng)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fault: input-corrupt: %s %s (%s) after %d batches recorded", what, filepath.Base(file), compression, after)
	c.count(&c.in)
	if !j.wait(3 * time.Minute) {
		return
	}
	var errs []string
	for _, tr := range j.trainers {
		if e, _ := tr.end(); !e.OK {
			errs = append(errs, fmt.Sprintf("rank %d: %s", tr.rank, e.Error))
		}
	}
	if len(errs) == 0 {
		t.Logf("the job completed: lastmiled had read %s before the fault", filepath.Base(file))
		j.check(c, true)
	} else {
		checkInputError(j, c, file, errs)
		j.check(c, false)
	}
	c.count(&c.runs)
}

// waitRecorded waits until the job's ranks have recorded n batches in all,
// or have stopped.
func waitRecorded(j *job, n int) {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) && len(j.running()) > 0 {
		total := 0
		for _, tr := range j.trainers {
			total += tr.batches()
		}
		if total >= n {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// damage corrupts, truncates or removes file.
func damage(file string, how int, rng *rand.Rand) (string, error) {
	st, err := os.Stat(file)
	if err != nil {
		return "", err
	}
	size := st.Size()
	switch how {
	case 0:
		f, err := os.OpenFile(file, os.O_WRONLY, 0)
		if err != nil {
			return "", err
		}
		defer f.Close()
		junk := make([]byte, 4096)
		for i := range junk {
			junk[i] = byte(rng.Uint32())
		}
		off := size/8 + rng.Int64N(size*3/8)
		_, err = f.WriteAt(junk, off)
		return fmt.Sprintf("overwrote 4 KiB at %d of %d bytes of", off, size), err
	case 1:
		return fmt.Sprintf("truncated to %d of %d bytes", size/2, size), os.Truncate(file, size/2)
	default:
		return "removed", os.Remove(file)
	}
}

// checkInputError requires every error, the job's included, to name the
// damaged file; then counts an error seen.
func checkInputError(j *job, c *tally, file string, errs []string) {
	base := filepath.Base(file)
	state, msg := j.d.job(jobID(j))
	j.t.Logf("the job failed (state %q): %s", state, msg)
	if state != "" {
		errs = append(errs, "job: "+msg)
	}
	for _, e := range errs {
		if !strings.Contains(e, base) {
			j.fail("unclear error: %q does not name the damaged file %s", e, base)
			return
		}
	}
	c.count(&c.errors)
}

// jobID is the job's id, from a rank's saved state ("" before any).
func jobID(j *job) string {
	for _, tr := range j.trainers {
		var st struct {
			SD struct {
				JobID string `json:"job_id"`
			}
		}
		if b, err := os.ReadFile(tr.path("state")); err == nil && jsonInto(b, &st) && st.SD.JobID != "" {
			return st.SD.JobID
		}
	}
	return ""
}
