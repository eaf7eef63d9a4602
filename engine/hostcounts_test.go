package engine_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lastmile/lastmile/engine"
)

// exchange relays count shares between hosts run in one process, as the
// trainers do between lastmileds: each host's share is kept until every
// host has given one, then every host gets the merged list.
type exchange struct {
	mu     sync.Mutex
	shares []engine.CountShare
	all    chan struct{}
	hosts  int
}

func newExchange(hosts int) *exchange { return &exchange{hosts: hosts, all: make(chan struct{})} }

func (x *exchange) share(ctx context.Context, s engine.CountShare) ([]int64, error) {
	x.mu.Lock()
	x.shares = append(x.shares, s)
	if len(x.shares) == x.hosts {
		close(x.all)
	}
	x.mu.Unlock()
	select {
	case <-x.all:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	merged := make([]int64, len(s.Rows))
	for i := range merged {
		merged[i] = -1
	}
	for _, o := range x.shares {
		if o.Plan != s.Plan || o.Hosts != s.Hosts || len(o.Rows) != len(s.Rows) {
			return nil, fmt.Errorf("host %d planned %s, host %d %s", o.Host, o.Plan, s.Host, s.Plan)
		}
		for i, n := range o.Rows {
			if n >= 0 {
				merged[i] = n
			}
		}
	}
	return merged, nil
}

// runHosts runs every host of src at once, each with opts and the
// options that opt gives it, and returns their ranks' batches by world
// rank and each host's error.
func runHosts(t *testing.T, src string, hosts int, opt func(h int, o *engine.Options)) (map[int]got, []error) {
	t.Helper()
	world := map[int]got{}
	errs := make([]error, hosts)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for h := range hosts {
		wg.Go(func() {
			opts := engine.Options{Hosts: engine.Hosts{Count: hosts, Index: h}}
			opt(h, &opts)
			res, _, err := runRings(t, src, 2, opts)
			mu.Lock()
			defer mu.Unlock()
			errs[h] = err
			for _, g := range res {
				if len(g.batches) > 0 {
					world[int(g.batches[0].Rank)] = g
				}
			}
		})
	}
	wg.Wait()
	return world, errs
}

// Hosts that share their counts produce exactly the batches of hosts that
// each count every unit, and each counts only its share of the units.
func TestHostsShareCounts(t *testing.T) {
	filter := "pipeline:\n  - filter: \"row_id % 3 != 1\"\n"
	long := "pipeline:\n  - filter: \"row_id % 2 == 0\"\n  - sequence: {column: seq_0, length: 8, on_long: skip}\n" +
		"  - select: [row_id, seq_0]\n"
	for _, tc := range []struct {
		name     string
		hosts    int
		last     string
		pipeline string
	}{
		{"2 hosts, a filter, drop", 2, "drop", filter},
		{"3 hosts, a filter, pad", 3, "pad", filter},
		{"2 hosts, ops after Select drop rows", 2, "drop", long},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := fmt.Sprintf(hostsJob, 100, tc.last, 2*tc.hosts, 300, tc.pipeline)
			var alone, shared atomic.Int64 // units counted, all hosts together
			gate := func(n *atomic.Int64) func(context.Context) (func(), error) {
				return func(context.Context) (func(), error) { n.Add(1); return func() {}, nil }
			}
			counted := make([][]int64, tc.hosts)
			want, errs := runHosts(t, src, tc.hosts, func(h int, o *engine.Options) {
				o.Gate = gate(&alone)
				o.Counted = func(_ string, rows []int64) { counted[h] = rows }
			})
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			x := newExchange(tc.hosts)
			got, errs := runHosts(t, src, tc.hosts, func(h int, o *engine.Options) {
				o.Gate, o.ShareCounts = gate(&shared), x.share
				o.Counted = func(_ string, rows []int64) {
					if !reflect.DeepEqual(rows, counted[h]) {
						t.Errorf("host %d: shared counts %v, counted alone %v", h, rows, counted[h])
					}
				}
			})
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatal("the batches of hosts that shared their counts differ from those of hosts that counted alone")
			}
			// The gate is taken once a unit counted and once a unit run.
			units := int64(len(counted[0]))
			if d := alone.Load() - shared.Load(); d != units*int64(tc.hosts-1) {
				t.Fatalf("%d hosts of %d units counted %d units fewer by sharing, want %d", tc.hosts, units, d, units*int64(tc.hosts-1))
			}
		})
	}
}

// A host refuses a list of counts it can tell is wrong, and stops at the
// first unit that yields other rows than it was dealt at.
func TestHostsShareCountsErrors(t *testing.T) {
	src := fmt.Sprintf(hostsJob, 100, "drop", 4, 300, "pipeline:\n  - filter: \"row_id % 3 != 1\"\n")
	for _, tc := range []struct {
		name  string
		alter func(s engine.CountShare, all []int64) ([]int64, error)
		want  string
	}{
		{"too few units", func(_ engine.CountShare, all []int64) ([]int64, error) { return all[1:], nil },
			"the hosts' unit counts list"},
		{"a unit uncounted", func(_ engine.CountShare, all []int64) ([]int64, error) { all[1] = -1; return all, nil },
			"have none for unit 1 (host 1's to count)"},
		{"its own share changed", func(s engine.CountShare, all []int64) ([]int64, error) {
			all[s.Host]++
			return all, nil
		}, "but this host counted"},
		{"another host's counts wrong", func(s engine.CountShare, all []int64) ([]int64, error) {
			for i := range all {
				if !s.Counts(i) {
					all[i] += 7
				}
			}
			return all, nil
		}, "but the hosts dealt it at"},
		{"the exchange failed", func(engine.CountShare, []int64) ([]int64, error) { return nil, errors.New("trainers gone") },
			"exchanging the hosts' unit counts: trainers gone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := newExchange(2)
			_, errs := runHosts(t, src, 2, func(h int, o *engine.Options) {
				o.ShareCounts = func(ctx context.Context, s engine.CountShare) ([]int64, error) {
					all, err := x.share(ctx, s)
					if err != nil || h != 0 {
						return all, err
					}
					return tc.alter(s, all)
				}
			})
			if errs[1] != nil {
				t.Fatalf("host 1, given the right counts: %v", errs[1])
			}
			if errs[0] == nil || !strings.Contains(errs[0].Error(), tc.want) {
				t.Fatalf("host 0: %v, want an error with %q", errs[0], tc.want)
			}
		})
	}
}

// A host told that the other hosts' counts will not come counts their
// units itself, and produces what it would have with the counts shared.
func TestHostsShareCountsAlone(t *testing.T) {
	src := fmt.Sprintf(hostsJob, 100, "drop", 4, 300, "pipeline:\n  - filter: \"row_id % 3 != 1\"\n")
	want, errs := runHosts(t, src, 2, func(int, *engine.Options) {})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	x := newExchange(2)
	got, errs := runHosts(t, src, 2, func(h int, o *engine.Options) {
		o.ShareCounts = func(ctx context.Context, s engine.CountShare) ([]int64, error) {
			if h == 0 {
				return nil, fmt.Errorf("the trainers gave up: %w", engine.ErrCountAlone)
			}
			return x.share(ctx, s)
		}
		if h == 1 {
			o.ShareCounts = nil // counts every unit: no exchange to wait for
		}
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatal("a host that counted alone after sharing failed gave other batches")
	}
}
