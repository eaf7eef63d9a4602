package chaos_test

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The soak (`make soak SOAK=1h`): one job without end (epochs: 0) and one
// consumer, for -soak. The daemon's resident memory (VmRSS) and open file
// descriptors are sampled every -soak.interval. After a warm-up (the first
// tenth of the run), the mean RSS of the last 20% of the samples must be
// within 5% of the mean of the first 20%: memory that grows with the
// number of batches, epochs or attaches shows up as a slope. The fds must
// not grow either, and the consumer must still be making progress at the
// end (a hang is a failure, not a flat line).
var (
	soakFor      = flag.Duration("soak", 0, "run TestSoak for this long (0: skip it)")
	soakInterval = flag.Duration("soak.interval", 0, "sampling interval (default: the duration / 240, at least 1s)")
	soakDelay    = flag.Duration("soak.delay", 2*time.Millisecond, "the consumer's pause after each batch (keeps a shared machine usable)")
	soakRows     = flag.Int64("soak.rows", 200_000, "rows of the soak's data set (one epoch)")
)

func soakRequested() bool { return *soakFor > 0 }

type sample struct {
	at    time.Duration
	rssKB int64
	fds   int
}

func TestSoak(t *testing.T) {
	if !soakRequested() {
		t.Skip("no -soak duration given (make soak SOAK=1h)")
	}
	needPython(t)
	dir := workDir(t, "soak")
	data, _ := genData(t, dir, *soakRows, 4, "zstd", 11)
	d := newDaemon(t, dir, filepath.Join(dir, "shm"))
	d.start()
	spec := fmt.Sprintf("version: 1\nname: soak\ninputs: [%s]\ncolumns: [row_id, cat_0, dense_0, seq_0, query]\n"+
		"batch: {size: 512}\nepochs: 0\nseed: 3\nshuffle: {units: true, buffer: 8192}\nring: {slots: 4}\n", data)
	tr := newTrainer(t, dir, 0, map[string]any{"spec": spec, "world_size": 1, "socket": d.sock,
		"delay": soakDelay.Seconds(), "soak": true})
	tr.start()
	interval := *soakInterval
	if interval == 0 {
		interval = max(*soakFor/240, time.Second)
	}
	t0 := time.Now()
	var samples []sample
	var progress []int // consumer batches at each sample
	for time.Since(t0) < *soakFor {
		time.Sleep(interval)
		if !tr.running() {
			e, _ := tr.end()
			t.Fatalf("the consumer stopped after %v: %+v\n%s\ndaemon log:\n%s", time.Since(t0), e, tr.logText(), d.logText())
		}
		s, err := sampleProc(d.pid())
		if err != nil {
			t.Fatal(err)
		}
		s.at = time.Since(t0)
		samples = append(samples, s)
		progress = append(progress, tr.batches())
	}
	checkSoak(t, samples, progress, *soakFor/10)
}

// sampleProc reads a process's VmRSS and counts its open fds.
func sampleProc(pid int) (sample, error) {
	var s sample
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			s.rssKB, _ = strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	s.fds = len(fds)
	return s, err
}

// checkSoak prints the samples' summary and fails on growth: RSS (the last
// fifth against the first, after warm-up), fds, or a consumer that stopped.
func checkSoak(t *testing.T, all []sample, progress []int, warmup time.Duration) {
	var ss []sample
	var prog []int
	for i, s := range all {
		if s.at >= warmup {
			ss, prog = append(ss, s), append(prog, progress[i])
		}
	}
	if len(ss) < 10 {
		t.Fatalf("soak: only %d samples after the warm-up; run longer or sample more often", len(ss))
	}
	n := len(ss) / 5
	first, last := meanRSS(ss[:n]), meanRSS(ss[len(ss)-n:])
	drift := (last - first) / first * 100
	minRSS, maxRSS, minFD, maxFD := ss[0].rssKB, ss[0].rssKB, ss[0].fds, ss[0].fds
	for _, s := range ss {
		minRSS, maxRSS = min(minRSS, s.rssKB), max(maxRSS, s.rssKB)
		minFD, maxFD = min(minFD, s.fds), max(maxFD, s.fds)
	}
	for i := 0; i < len(ss); i += max(len(ss)/12, 1) {
		t.Logf("  t=%-8v RSS %7.1f MiB  fds %3d  consumer batches %d", ss[i].at.Round(time.Second), float64(ss[i].rssKB)/1024, ss[i].fds, prog[i])
	}
	fdFirst, fdLast := ss[n-1].fds, ss[len(ss)-1].fds
	batches := prog[len(prog)-1]
	stalled := prog[len(prog)-1] == prog[len(prog)-n]
	ok := drift <= 5 && drift >= -5 && fdLast <= fdFirst+4 && !stalled
	verdict := map[bool]string{true: "PASS", false: "FAIL"}[ok]
	fmt.Printf("soak: %v, %d samples after a %v warm-up; RSS MiB min %.1f max %.1f, first 20%% mean %.1f, last 20%% mean %.1f (%+.2f%%, limit ±5%%); fds %d..%d (first %d, last %d); consumer batches %d\n",
		all[len(all)-1].at.Round(time.Second), len(ss), warmup, float64(minRSS)/1024, float64(maxRSS)/1024, first/1024, last/1024, drift, minFD, maxFD, fdFirst, fdLast, batches)
	fmt.Printf("soak: %s\n", verdict)
	if !ok {
		t.Errorf("soak failed: RSS drift %+.2f%% (limit ±5%%), fds %d -> %d, consumer stalled %v", drift, fdFirst, fdLast, stalled)
	}
}

func meanRSS(ss []sample) float64 {
	var sum float64
	for _, s := range ss {
		sum += float64(s.rssKB)
	}
	return sum / float64(len(ss))
}
