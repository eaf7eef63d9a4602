package main_test

import (
	"context"
	"errors"
	"flag"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lastmile/lastmile/datagen"
	"github.com/lastmile/lastmile/shm"
)

var (
	long         = flag.Bool("long", false, "run the long tests (weighted CPU share)")
	shareWorkers = flag.Int("share-workers", 1, "decode tokens of the weighted-share test's daemon")
)

// TestWeightedShare runs two endless jobs on the same data with weights 1
// and 3, both consumed as fast as possible, and checks that over a window
// in which both run each gets its weighted share of the decode throughput
// (units per second) within 10%. Run it with -long (about 20 s):
//
//	go test ./cmd/lastmiled -run TestWeightedShare -long -v
func TestWeightedShare(t *testing.T) {
	if !*long {
		t.Skip("long test: go test ./cmd/lastmiled -run TestWeightedShare -long -v")
	}
	// Units heavy enough that decoding dominates (about 10 ms each), and
	// many per epoch, so that epoch ends are a small part of the time.
	data := t.TempDir()
	cfg := datagen.DefaultConfig()
	cfg.Rows, cfg.RowGroupRows, cfg.Files = 200_000, 8192, 4
	if _, err := datagen.Write(context.Background(), data, cfg); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	// One token by default: on a 2-core host that leaves a core for the
	// packing, the rings and this test's consumers, so that both jobs stay
	// backlogged on the token pool, which is what is being shared. With as
	// many tokens as cores, decode alone oversubscribes the CPUs, the
	// consumers starve and the jobs stop being backlogged (docs/daemon.md).
	e.start("-log-level", "info", "-workers", strconv.Itoa(*shareWorkers))
	spec := func(name string) string {
		return "name: " + name + "\ninputs: [" + data + "]\nbatch: {size: 1024}\nring: {slots: 16}\nepochs: 0\ndecode: {max_unit_rows: 512}\n"
	}
	a := e.submit(spec("light"), map[string]any{"weight": 1})
	b := e.submit(spec("heavy"), map[string]any{"weight": 3})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, id := range []string{a.ID, b.ID} {
		var at attachJSON
		if st, err := e.do("POST", "/v1/jobs/"+id+"/attach", map[string]any{"rank": 0}, &at); err != nil || st != 200 {
			t.Fatalf("attach: %d %v", st, err)
		}
		c, err := shm.Open(at.Dir, at.Ring)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			defer c.Close()
			for {
				if _, err := c.Next(ctx); err != nil {
					if !errors.Is(err, context.Canceled) {
						t.Error(err)
					}
					return
				}
			}
		}()
	}
	units := func() (int64, int64, float64, float64) {
		var ja, jb struct {
			Progress struct {
				UnitsDone int64   `json:"units_done"`
				Decode    float64 `json:"decode_seconds"`
				Pack      float64 `json:"pack_seconds"`
			}
			CPU float64 `json:"cpu_seconds"`
		}
		e.do("GET", "/v1/jobs/"+a.ID, nil, &ja)
		e.do("GET", "/v1/jobs/"+b.ID, nil, &jb)
		return ja.Progress.UnitsDone, jb.Progress.UnitsDone, ja.CPU, jb.CPU
	}
	time.Sleep(2 * time.Second) // warm up
	a0, b0, ca0, cb0 := units()
	const window = 10 * time.Second
	time.Sleep(window)
	a1, b1, ca1, cb1 := units()
	var st struct{ Config struct{ Metrics string } }
	e.do("GET", "/v1/status", nil, &st)
	if m, err := scrape(st.Config.Metrics); err == nil {
		for _, l := range strings.Split(m, "\n") {
			if strings.HasPrefix(l, "lastmile_cpu") || strings.HasPrefix(l, "lastmile_producer_full") || strings.HasPrefix(l, "lastmile_consumer_empty") {
				t.Log(l)
			}
		}
	}
	da, db := float64(a1-a0), float64(b1-b0)
	if da == 0 {
		t.Fatal("the weight-1 job made no progress")
	}
	ratio := db / da
	cpuRatio := (cb1 - cb0) / (ca1 - ca0)
	t.Logf("weight 1: %.0f units/s, weight 3: %.0f units/s: ratio %.2f (want 3 ± 10%%); decode CPU ratio %.2f",
		da/window.Seconds(), db/window.Seconds(), ratio, cpuRatio)
	if ratio < 2.7 || ratio > 3.3 {
		t.Errorf("throughput ratio %.2f, want 2.7 to 3.3", ratio)
	}
}
