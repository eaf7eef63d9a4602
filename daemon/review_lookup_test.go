package daemon

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestReviewNameLookupOtherOwner: a path {id} that is a name resolves to
// the newest job of that name whoever owns it, and only then checks the
// caller. Once uid 1000's job "stopped" has ended (its name is free),
// uid 1001 may submit a job "stopped"; from then on uid 1000's
// `lastmile status stopped` / `cancel stopped` answer 403 with uid 1001's
// job id and uid instead of uid 1000's own job.
func TestReviewNameLookupOtherOwner(t *testing.T) {
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
}
