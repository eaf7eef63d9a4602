package daemon

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestUserLimitError(t *testing.T) {
	jobs := func(n int) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprintf("j%d (%012x)", i, i))
		}
		return out
	}
	cases := []struct {
		name string
		lim  LimitsConfig
		hold userHold
		need int64
		want []string // substrings of the error; nil: allowed
	}{
		{"none held", LimitsConfig{JobsPerUser: 16}, userHold{}, 1 << 30, nil},
		{"below the count", LimitsConfig{JobsPerUser: 2}, userHold{jobs: jobs(1)}, 0, nil},
		{"at the count", LimitsConfig{JobsPerUser: 2}, userHold{jobs: jobs(2)}, 0,
			[]string{"uid 1000 holds 2 jobs", "limits.jobs_per_user = 2", "lastmile cancel", `submit "new"`, "j0 (000000000000), j1 (000000000001)"}},
		{"over the count, long list", LimitsConfig{JobsPerUser: 3}, userHold{jobs: jobs(12)}, 0,
			[]string{"holds 12 jobs", "j7 (000000000007) and 4 more"}},
		{"no count limit", LimitsConfig{}, userHold{jobs: jobs(1000)}, 0, nil},
		{"memory fits exactly", LimitsConfig{MemoryPerUser: 3 << 30}, userHold{jobs: jobs(1), bytes: 2 << 30}, 1 << 30, nil},
		{"memory over", LimitsConfig{MemoryPerUser: 3 << 30}, userHold{jobs: jobs(1), bytes: 2 << 30}, 1<<30 + 1,
			[]string{`job "new" needs`, "hold 2GiB of the 3GiB", "limits.memory_per_user", "cancel one of them"}},
		{"no memory limit", LimitsConfig{JobsPerUser: 16}, userHold{bytes: 1 << 50}, 1 << 50, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := userLimitError(tc.lim, 1000, "new", tc.hold, tc.need)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var ae *apiError
			if !errors.As(err, &ae) || ae.status != http.StatusTooManyRequests {
				t.Fatalf("got %v, want a 429", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(ae.msg, w) {
					t.Errorf("%q\ndoes not say %q", ae.msg, w)
				}
			}
		})
	}
}

// TestUserHold: what a user's jobs hold counts exactly the jobs with
// rings, of that user only: ended ones (done, failed, canceled) until
// their rings are removed, so that canceling and submitting again never
// leaves uncounted rings behind. memory.total counts the same jobs.
func TestUserHold(t *testing.T) {
	d := apiDaemon(t, nil)
	now := time.Now()
	for i, j := range []struct {
		owner   uint32
		state   State
		removed bool
		counts  bool
	}{
		{1000, Pending, false, true},
		{1000, Running, false, true},
		{1000, Done, false, true},
		{1000, Done, true, false},
		{1000, Failed, false, true},
		{1000, Canceled, false, true},
		{1000, Failed, true, false},
		{1000, Canceled, true, false},
		{1001, Running, false, false},
	} {
		d.jobs[fmt.Sprint(i)] = &Job{id: fmt.Sprintf("%012d", i), name: fmt.Sprintf("j%d", i), owner: j.owner, state: j.state, removed: j.removed,
			footprint: 1 << i, ended: now, d: d}
	}
	d.mu.Lock()
	h := d.holdLocked(1000)
	reserved := d.reservedLocked()
	d.mu.Unlock()
	if len(h.jobs) != 5 || h.bytes != 1|2|4|16|32 || h.ended != 3 {
		t.Errorf("uid 1000 holds %v, %d bytes, %d ended; want j0, j1, j2, j4, j5, 55 bytes, 3 ended", h.jobs, h.bytes, h.ended)
	}
	if reserved != 1|2|4|16|32|256 {
		t.Errorf("reserved %d bytes, want %d (the jobs whose rings exist or will)", reserved, 1|2|4|16|32|256)
	}
	// The refusal says which jobs are ended, until when their rings are
	// kept, and how they go.
	err := userLimitError(LimitsConfig{JobsPerUser: 5}, 1000, "new", h, 0)
	until := now.Add(d.Config().Grace.D()).UTC().Format(time.RFC3339)
	for _, want := range []string{"j5 (000000000005, canceled: its rings are kept until read to their end, or until " + until + " at the latest)",
		"3 of yours ended and still hold their rings", "at once when it is canceled with no trainer reading its rings"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %v\ndoes not say %q", err, want)
		}
	}
	// Root is exempt, uid 1000 at jobs_per_user = 3 is not.
	d.cfg.Limits.JobsPerUser = 3
	if ex, err := d.checkUserLimits(peer{uid: 0, ok: true}, "x"); !ex || err != nil {
		t.Errorf("root: exempt %v, %v", ex, err)
	}
	if ex, err := d.checkUserLimits(peer{uid: 1000, ok: true}, "x"); ex || err == nil {
		t.Errorf("uid 1000 at its bound: exempt %v, %v", ex, err)
	}
	if ex, err := d.checkUserLimits(peer{uid: 1001, ok: true}, "x"); ex || err != nil {
		t.Errorf("uid 1001: exempt %v, %v", ex, err)
	}
}
