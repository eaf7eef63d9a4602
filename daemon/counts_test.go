package daemon

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lastmile/lastmile/engine"
)

// A run waiting for the hosts' counts gets the first list posted that
// checks out, gives up when its context ends, and a later run of another
// plan does not take a list posted for the earlier one.
func TestCountExchange(t *testing.T) {
	share := engine.CountShare{Plan: "sha256:a", Hosts: 2, Host: 1, Rows: []int64{-1, 6, -1, 8}}
	x := newCountExchange("", nil, false)
	got := make(chan []int64, 1)
	go func() {
		all, err := x.wait(context.Background(), share)
		if err != nil {
			t.Error(err)
		}
		got <- all
	}()
	for published := false; !published; time.Sleep(time.Millisecond) {
		x.mu.Lock()
		published = x.share != nil
		x.mu.Unlock()
	}
	for _, bad := range []struct {
		plan string
		rows []int64
		want string
	}{
		{"sha256:b", []int64{5, 6, 7, 8}, "but this host planned sha256:a"},
		{"sha256:a", []int64{5, 6, 7}, `"rows" lists 3 units, but the plan has 4`},
		{"sha256:a", []int64{5, 6, -1, 8}, `"rows"[2] is -1`},
		{"sha256:a", []int64{5, 9, 7, 8}, `"rows"[1] is 9, but this host counted 6`},
	} {
		if err := x.post(bad.plan, bad.rows, 2); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("post %s %v: %v, want %q", bad.plan, bad.rows, err, bad.want)
		}
	}
	if err := x.post("sha256:a", []int64{5, 6, 7, 8}, 2); err != nil {
		t.Fatal(err)
	}
	if all := <-got; !slices.Equal(all, []int64{5, 6, 7, 8}) {
		t.Fatalf("the run got %v", all)
	}
	if err := x.post("sha256:a", []int64{5, 6, 7, 8}, 2); err != nil {
		t.Fatalf("the same list again: %v", err)
	}
	if err := x.post("sha256:a", []int64{4, 6, 7, 8}, 2); err == nil || !strings.Contains(err.Error(), "already has other counts") {
		t.Fatalf("another list: %v", err)
	}
	// A later run of the same plan takes the list at once; one of another
	// plan fails: the trainers that posted it have moved on.
	if all, err := x.wait(context.Background(), share); err != nil || !slices.Equal(all, []int64{5, 6, 7, 8}) {
		t.Fatalf("the same plan again: %v %v", all, err)
	}
	other := share
	other.Plan = "sha256:c"
	if _, err := x.wait(context.Background(), other); err == nil || !strings.Contains(err.Error(), "the counts are for plan sha256:a, but this host planned sha256:c") {
		t.Fatalf("another plan: %v", err)
	}
}

// A list posted before this host counted its share (the trainers were
// quicker, or it was kept in the job's record across a restart) is taken,
// and checked once the share is counted.
func TestCountExchangePostedFirst(t *testing.T) {
	share := engine.CountShare{Plan: "sha256:a", Hosts: 2, Host: 0, Rows: []int64{5, -1, 7, -1}}
	for _, tc := range []struct {
		name string
		plan string
		rows []int64
		want string // "": the run takes the list
	}{
		{"the right list", "sha256:a", []int64{5, 6, 7, 8}, ""},
		{"this host's count changed", "sha256:a", []int64{5, 6, 9, 8}, `"rows"[2] is 9, but this host counted 7`},
		{"another plan", "sha256:b", []int64{5, 6, 7, 8}, "but this host planned sha256:a"},
		{"another length", "sha256:a", []int64{5, 6, 7}, `"rows" lists 3 units, but the plan has 4`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, x := range []*countExchange{newCountExchange("", nil, false), newCountExchange(tc.plan, tc.rows, false)} {
				if x.all == nil {
					if err := x.post(tc.plan, tc.rows, 2); err != nil {
						t.Fatalf("a post before the share is counted: %v", err)
					}
				}
				if plan, rows, _ := x.posted(); plan != tc.plan || !slices.Equal(rows, tc.rows) {
					t.Fatalf("kept %s %v", plan, rows)
				}
				all, err := x.wait(context.Background(), share)
				switch {
				case tc.want == "" && (err != nil || !slices.Equal(all, tc.rows)):
					t.Fatalf("the run got %v, %v", all, err)
				case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
					t.Fatalf("the run: %v, want an error with %q", err, tc.want)
				}
			}
		})
	}
	x := newCountExchange("", nil, false)
	if err := x.post("sha256:a", []int64{5, -1}, 2); err == nil || !strings.Contains(err.Error(), `"rows"[1] is -1: every unit needs its count (host 1's to count)`) {
		t.Fatalf("a list with a unit uncounted: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := x.wait(ctx, share); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "waiting for the other hosts' unit counts") {
		t.Fatalf("nothing posted: %v", err)
	}
}

// Told to count alone, a waiting run returns engine.ErrCountAlone, and so
// does a later one (the word is kept in the job's record).
func TestCountExchangeAlone(t *testing.T) {
	share := engine.CountShare{Plan: "sha256:a", Hosts: 2, Host: 0, Rows: []int64{5, -1}}
	x := newCountExchange("", nil, false)
	got := make(chan error, 1)
	go func() { _, err := x.wait(context.Background(), share); got <- err }()
	x.countAlone()
	if err := <-got; !errors.Is(err, engine.ErrCountAlone) {
		t.Fatalf("the waiting run: %v", err)
	}
	_, _, alone := x.posted()
	if _, err := newCountExchange("", nil, alone).wait(context.Background(), share); !errors.Is(err, engine.ErrCountAlone) {
		t.Fatalf("a run after a restart: %v", err)
	}
}
