package main_test

import (
	"strings"
	"testing"
	"time"
)

// TestRefusalsLogged: a refused submission or attach leaves a trace. A
// user's job refused with 503 because memory.total is used up (or 429 at
// a per-user limit, 400 over memory.per_job, 409 because a rank already
// has a consumer) used to leave no line in journald and no metric: the
// operator asked "why does alice's job not start" had only the user's
// client output to go on, and could not see that the host's budget turned
// jobs away. Now each is logged ("request refused", with the uid, the
// job, the status and the reason; rate-limited per uid) and counted in
// lastmile_requests_refused_total{endpoint,status}.
func TestRefusalsLogged(t *testing.T) {
	e := newEnv(t)
	e.start("-memory-total", "3MiB")
	first := e.submit(specFor("first", smallData, "epochs: 0\n"), nil)
	var ej errJSON
	st, err := e.do("POST", "/v1/jobs", map[string]any{"spec": specFor("second", smallData, "epochs: 0\n")}, &ej)
	if err != nil || st != 503 {
		t.Fatalf("second job: %d %v %s; want 503 (memory.total)", st, err, ej.Error)
	}
	// An attach to a rank the job does not have: 400.
	if st, err := e.do("POST", "/v1/jobs/"+first.ID+"/attach", map[string]any{"rank": 5}, &ej); err != nil || st != 400 {
		t.Fatalf("attach to rank 5: %d %v %s; want 400", st, err, ej.Error)
	}
	waitFor(t, "the refusals logged", 5*time.Second, func() bool {
		log := e.log.String()
		return strings.Contains(log, `msg="request refused" endpoint=submit status=503`) && strings.Contains(log, "job=second") &&
			strings.Contains(log, `msg="request refused" endpoint=attach status=400`) && strings.Contains(log, "rank=5")
	})
	var s struct{ Config struct{ Metrics string } }
	if code, err := e.do("GET", "/v1/status", nil, &s); code != 200 || err != nil {
		t.Fatalf("status: %d %v", code, err)
	}
	m, err := scrape(s.Config.Metrics)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`lastmile_requests_refused_total{endpoint="submit",status="503"} 1`, `lastmile_requests_refused_total{endpoint="attach",status="400"} 1`} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
