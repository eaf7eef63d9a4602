package daemon

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzRequests sends arbitrary bodies to every endpoint: the answer is
// always a well-formed 4xx or 2xx, never a 500 or a crash.
func FuzzRequests(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `{"spec": ""}`, `{"spec": "name: x\ninputs: [/nonexistent]\nbatch: {size: 1}\n"}`,
		`{"spec": "name: [", "world_size": 3}`, `{"rank": 0, "cursor": {"epoch": 1, "batch": 2}}`,
		`{"rank": -1}`, `{"rank": 1e40}`, `{"wait": -1}`, `[1]`, `null`, `"x"`, `{"spec": "x"} trailing`,
		`{"spec": "version: 2\nname: ../../etc\ninputs: []\nbatch: {size: -5}\nring: {mode: \"0777\", slots: 70000}\n"}`,
	} {
		f.Add("POST", "/v1/jobs", s)
		f.Add("POST", "/v1/jobs/x/attach", s)
	}
	f.Add("GET", "/v1/status", "")
	f.Add("DELETE", "/v1/jobs/%00", "")
	cfg := DefaultConfig()
	cfg.StateDir, cfg.ShmDir, cfg.Socket = f.TempDir(), f.TempDir(), "/nonexistent/sock"
	d, err := New(cfg, nil, nil, "test", nil)
	if err != nil {
		f.Fatal(err)
	}
	if d.store, err = openStore(cfg.StateDir); err != nil {
		f.Fatal(err)
	}
	h := d.api()
	f.Fuzz(func(t *testing.T, method, path, body string) {
		if !strings.HasPrefix(path, "/") || strings.ContainsAny(path, " \r\n\t") {
			return
		}
		req, err := http.NewRequest(method, "http://lastmiled"+path, strings.NewReader(body))
		if err != nil {
			return
		}
		ctx := context.WithValue(req.Context(), peerKey{}, peer{uid: 1000, gid: 1000, ok: true})
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req.WithContext(ctx))
		if w.Code >= 500 {
			t.Fatalf("%s %s %q: %d %s", method, path, body, w.Code, w.Body.String())
		}
	})
}
