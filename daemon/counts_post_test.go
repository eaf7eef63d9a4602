package daemon

import (
	"bytes"
	"io"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// bodyByteCounter counts the bytes the handler read of a body.
type bodyByteCounter struct {
	r io.Reader
	n atomic.Int64
}

func (c *bodyByteCounter) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n.Add(int64(n))
	return n, err
}

// TestCountsBodyReadAfterOwnerCheck: POST /v1/jobs/{id}/counts takes
// bodies up to 64 MiB (not control.max_body) because only the job's owner
// may post it, so postCounts must look the job and its owner up before it
// reads the body: else any local user could make the daemon buffer and
// decode 64 MiB (hundreds of MiB of []int64) per connection, 128
// connections at once, for a job that is not theirs or does not exist.
func TestCountsBodyReadAfterOwnerCheck(t *testing.T) {
	d := apiDaemon(t, nil)
	for _, rec := range fuzzJobs {
		r := *rec
		r.Created = time.Now()
		d.restore(&r)
	}
	h := d.api()
	limit := int64(d.Config().Control.MaxBody)
	// 8 MiB of a valid counts body: {"plan": "sha256:0", "rows": [1,1,...,1]}
	var b bytes.Buffer
	b.WriteString(`{"plan": "sha256:0", "rows": [`)
	b.WriteString(strings.Repeat("1,", 4<<20))
	b.WriteString(`1]}`)
	body := b.Bytes()
	for _, c := range []struct {
		name, path string
		uid        uint32
	}{
		{"another user's job", "/v1/jobs/share/counts", 1001},
		{"no such job", "/v1/jobs/nosuchjob/counts", 1001},
	} {
		cr := &bodyByteCounter{r: bytes.NewReader(body)}
		req := httptest.NewRequest("POST", c.path, cr)
		req.ContentLength = int64(len(body))
		a := serveAs(h, c.uid, req)
		if a.status != 403 && a.status != 404 {
			t.Errorf("%s: status %d (%s), want 403/404", c.name, a.status, a.Error)
		}
		if n := cr.n.Load(); n > limit {
			t.Errorf("%s: uid %d's request got %d bytes of its body read (and decoded) before being refused with %d; "+
				"a caller that may not post counts should get no more than control.max_body (%d)", c.name, c.uid, n, a.status, limit)
		}
	}
}

// TestCountsPostBoundedByPlan: a list the owner's trainers post before
// this host counted its share is kept in the job's record (and re-written
// by every persist), so it may list no more units than the job's plan
// has, and only for the plan this host planned; one posted before the
// host planned the job (a restarted daemon estimates it again) waits for
// the plan (and is a 503 to retry after maxCountsWait).
func TestCountsPostBoundedByPlan(t *testing.T) {
	d := apiDaemon(t, nil)
	j, err := d.newJob(&record{ID: "c0c0c0c0c0c0", Name: "shared", Owner: 1000, GID: 1000, State: string(Pending), Created: time.Now(),
		Hosts: 2, Host: 0, ShareCounts: true,
		Spec: "name: shared\ninputs: [/nonexistent/a.parquet]\nbatch: {size: 8}\nworld_size: 2\n"})
	if err != nil {
		t.Fatal(err)
	}
	defer j.client.Close()
	d.mu.Lock()
	d.jobs[j.id] = j
	d.mu.Unlock()
	h := d.api()
	post := func(body string) apiAnswer {
		return serveAs(h, 1000, httptest.NewRequest("POST", "/v1/jobs/shared/counts", strings.NewReader(body)))
	}
	// Posted before the job is planned: it waits for the plan.
	go func() {
		time.Sleep(200 * time.Millisecond)
		j.mu.Lock()
		j.planDigest, j.planUnits = "sha256:p", 3
		j.mu.Unlock()
	}()
	for _, c := range []struct {
		body   string
		status int
		want   string
	}{
		{`{"plan": "sha256:p", "rows": [` + strings.Repeat("1,", 1<<16) + `1]}`, 400, "the plan has 3"},
		{`{"plan": "sha256:p", "rows": [1, 2]}`, 400, "the plan has 3"},
		{`{"plan": "sha256:q", "rows": [1, 2, 3]}`, 409, "this host planned sha256:p"},
		{`{"plan": "sha256:p", "rows": []}`, 400, "empty"},
		{`{"plan": "sha256:p", "rows": [1, 2, 3]}`, 200, ""},
	} {
		a := post(c.body)
		if a.status != c.status || !strings.Contains(a.Error, c.want) {
			t.Errorf("post %.60s: %d (%s), want %d saying %q", c.body, a.status, a.Error, c.status, c.want)
		}
	}
	if plan, rows, _ := j.exchange.posted(); plan != "sha256:p" || len(rows) != 3 {
		t.Errorf("kept %s %v, want the list of 3 units", plan, rows)
	}
}
