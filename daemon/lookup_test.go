package daemon

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestNameLookupOtherOwner: a path {id} that is a name resolves to the
// newest job of that name the caller may access. Once uid 1000's job
// "stopped" has ended (its name is free), uid 1001 may submit a job
// "stopped"; uid 1000's `lastmile status stopped` / `cancel stopped` must
// still find uid 1000's own job, not answer 403 with uid 1001's job id and
// uid. A name only another user's jobs have is refused without their ids.
func TestNameLookupOtherOwner(t *testing.T) {
	d := apiDaemon(t, nil)
	now := time.Now()
	for i, rec := range []*record{
		{ID: "111111111111", Name: "stopped", Owner: 1000, GID: 1000, State: "canceled", Error: "job canceled by uid 1000",
			Spec: "name: stopped\ninputs: [/nonexistent/c.parquet]\nbatch: {size: 8}\n"},
		{ID: "999999999999", Name: "stopped", Owner: 1001, GID: 1001, State: "failed", Error: "x",
			Spec: "name: stopped\ninputs: [/nonexistent/d.parquet]\nbatch: {size: 8}\n"},
	} {
		r := *rec
		r.Created = now.Add(time.Duration(i) * time.Second)
		d.restore(&r)
	}
	h := d.api()
	req := httptest.NewRequest("GET", "/v1/jobs/stopped", nil)
	a := serveAs(h, 1000, req)
	if a.status != 200 {
		t.Errorf("uid 1000 GET /v1/jobs/stopped: %d (%s), want 200 and its own job 111111111111", a.status, a.Error)
	}
	if strings.Contains(a.Error, "999999999999") {
		t.Errorf("uid 1000 learned uid 1001's job id: %s", a.Error)
	}
	if a.ID != "111111111111" {
		t.Errorf("uid 1000 GET /v1/jobs/stopped: job %q, want its own 111111111111", a.ID)
	}
	// uid 1002 has no job "stopped": refused, without the others' ids.
	b := serveAs(h, 1002, httptest.NewRequest("GET", "/v1/jobs/stopped", nil))
	if b.status != 403 || strings.Contains(b.Error, "999999999999") || strings.Contains(b.Error, "111111111111") {
		t.Errorf("uid 1002 GET /v1/jobs/stopped: %d (%s), want 403 without job ids", b.status, b.Error)
	}
	// An admin gets the newest.
	c := serveAs(h, 0, httptest.NewRequest("GET", "/v1/jobs/stopped", nil))
	if c.status != 200 || c.ID != "999999999999" {
		t.Errorf("root GET /v1/jobs/stopped: %d %q (%s), want 200 and the newest, 999999999999", c.status, c.ID, c.Error)
	}
}
