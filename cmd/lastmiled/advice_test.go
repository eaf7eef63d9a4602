package main_test

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestAdviceStarved: a trainer faster than the pool (one decode worker,
// a reader that takes batches as fast as they come) starves, and the
// job's view says so in words: the rank, the share of the window it
// waited, and the cores it lacks.
func TestAdviceStarved(t *testing.T) {
	e := newEnv(t)
	e.start("-workers", "1")
	j := e.submit(specFor("starve", smallData, "epochs: 0\n"), nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := &reader{e: e, job: j.ID}
	done := make(chan error, 1)
	go func() { done <- r.run(ctx) }()
	var v struct {
		Advice *struct {
			WindowSeconds float64   `json:"window_seconds"`
			Stall         []float64 `json:"stall"`
			WorstRank     int       `json:"worst_rank"`
			MoreCores     int       `json:"more_cores"`
			Advice        string    `json:"advice"`
		} `json:"advice"`
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if st, err := e.do("GET", "/v1/jobs/"+j.ID, nil, &v); err != nil || st != 200 {
			t.Fatalf("get job: %d %v", st, err)
		}
		if a := v.Advice; a != nil && a.WindowSeconds >= 3 && len(a.Stall) == 1 && a.Stall[0] >= 0.05 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no advice of a stall after 30s: %+v", v.Advice)
		}
		time.Sleep(200 * time.Millisecond)
	}
	a := v.Advice
	if a.WorstRank != 0 || a.MoreCores < 1 || !strings.Contains(a.Advice, "rank 0 waited") || !strings.Contains(a.Advice, "more core") {
		t.Errorf("advice %+v: want rank 0's stall and the cores it lacks", a)
	}
	t.Logf("advice after %.0fs: %s", a.WindowSeconds, a.Advice)
	cancel()
	<-done
}
