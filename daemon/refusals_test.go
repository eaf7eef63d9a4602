package daemon

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestRefusalLogRateLimited: a client retrying a refused submission in a
// loop gets one log line per refusalLogEvery (per uid, endpoint and
// status), the next one saying how many were left out; every refusal is
// counted, and another uid or status is logged on its own.
func TestRefusalLogRateLimited(t *testing.T) {
	var buf bytes.Buffer
	d, err := New(DefaultConfig(), slog.New(slog.NewTextHandler(&buf, nil)), nil, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	refuse := func(uid uint32, status int) {
		r := httptest.NewRequest("POST", "/v1/jobs", nil)
		r = r.WithContext(context.WithValue(r.Context(), peerKey{}, peer{uid: uid, pid: 42, ok: true}))
		w := httptest.NewRecorder()
		d.refuse(w, r, "submit", func() string { return "ctr" }, nil, errorf(status, "memory.total used up"))
		if w.Code != status {
			t.Fatalf("answered %d, want %d", w.Code, status)
		}
	}
	lines := func() int { return strings.Count(buf.String(), `msg="request refused"`) }
	for range 3 {
		refuse(1000, http.StatusServiceUnavailable)
	}
	if n := lines(); n != 1 {
		t.Fatalf("3 refusals within %v: %d lines, want 1:\n%s", refusalLogEvery, n, buf.String())
	}
	if s := buf.String(); !strings.Contains(s, "level=WARN") || !strings.Contains(s, "uid=1000") || !strings.Contains(s, "job=ctr") ||
		!strings.Contains(s, "status=503") || !strings.Contains(s, `reason="memory.total used up"`) {
		t.Errorf("the line lacks the level, uid, job, status or reason:\n%s", s)
	}
	refuse(1001, http.StatusServiceUnavailable)
	refuse(1000, http.StatusTooManyRequests)
	if n := lines(); n != 3 {
		t.Fatalf("another uid and another status: %d lines in all, want 3:\n%s", n, buf.String())
	}
	d.refused.mu.Lock()
	d.refused.logged[refusalLogKey{1000, refusalKey{"submit", 503}}].last = time.Now().Add(-refusalLogEvery)
	d.refused.mu.Unlock()
	refuse(1000, http.StatusServiceUnavailable)
	if n := lines(); n != 4 || !strings.Contains(buf.String(), "suppressed=2") {
		t.Fatalf("after %v: %d lines, want 4, the last with suppressed=2:\n%s", refusalLogEvery, n, buf.String())
	}
	if got := d.refused.counts[refusalKey{"submit", 503}]; got != 5 {
		t.Errorf("counted %d refusals with 503, want 5", got)
	}
}
