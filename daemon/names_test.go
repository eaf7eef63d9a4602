package daemon

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// apiDaemon returns a daemon that is not started, with its store open, for
// calling its handler directly as uid 1000.
func apiDaemon(t testing.TB, mod func(*Config)) *Daemon {
	t.Helper()
	cfg := DefaultConfig()
	cfg.StateDir, cfg.ShmDir, cfg.Socket, cfg.Metrics = t.TempDir(), t.TempDir(), "/nonexistent/sock", "off"
	if mod != nil {
		mod(&cfg)
	}
	d, err := New(cfg, nil, nil, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	if d.store, err = openStore(cfg.StateDir); err != nil {
		t.Fatal(err)
	}
	return d
}

type apiAnswer struct {
	status int
	Error  string
	Fields []fieldError
	ID     string `json:"id"` // of a job answered
}

func serveAs(h http.Handler, uid uint32, req *http.Request) apiAnswer {
	ctx := context.WithValue(req.Context(), peerKey{}, peer{uid: uid, gid: uid, ok: true})
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req.WithContext(ctx))
	a := apiAnswer{status: w.Code}
	json.Unmarshal(w.Body.Bytes(), &a)
	return a
}

// TestNamesInRequests: names that could escape a directory are refused
// with a 400 that names the field, in URL paths and in specs.
func TestNamesInRequests(t *testing.T) {
	h := apiDaemon(t, nil).api()
	long := strings.Repeat("a", 129)
	specWith := func(extra string) string {
		b, _ := json.Marshal(map[string]string{"spec": "inputs: [/nonexistent/x.parquet]\nbatch: {size: 1}\n" + extra})
		return string(b)
	}
	cases := []struct {
		name, method, path, body string
		status                   int
		field, want              string // field: the spec field named; want: in the error
	}{
		{"slash in id", "GET", "/v1/jobs/a%2Fb", "", 400, "", "path {id}"},
		{"dot-dot slash in id", "DELETE", "/v1/jobs/..%2F..%2Fetc", "", 400, "", "path {id}"},
		{"escaped dot-dot id", "GET", "/v1/jobs/%2E%2E/attach", "", 0, "", ""},
		{"NUL in id", "GET", "/v1/jobs/a%00b", "", 400, "", "path {id}"},
		{"NUL in attach id", "POST", "/v1/jobs/a%00b/attach", `{"rank": 0}`, 400, "", "path {id}"},
		{"space in id", "GET", "/v1/jobs/a%20b", "", 400, "", "path {id}"},
		{"long id", "GET", "/v1/jobs/" + long, "", 400, "", "path {id}"},
		{"unknown name", "GET", "/v1/jobs/nope", "", 404, "", `no job "nope"`},
		{"unknown id", "GET", "/v1/jobs/0123456789ab", "", 404, "", "no job"},
		{"name with slash", "POST", "/v1/jobs", specWith("name: a/b\n"), 400, "name", "'/' or a NUL"},
		{"name dot-dot", "POST", "/v1/jobs", specWith("name: ../../etc\n"), 400, "name", "want 1 to 128"},
		{"name is dot-dot", "POST", "/v1/jobs", specWith("name: ..\n"), 400, "name", "want 1 to 128"},
		{"name with NUL", "POST", "/v1/jobs", specWith("name: \"a\\0b\"\n"), 400, "name", "'/' or a NUL"},
		{"name too long", "POST", "/v1/jobs", specWith("name: " + long + "\n"), 400, "name", "129 bytes"},
		{"ring name with slash", "POST", "/v1/jobs", specWith("ring: {name: x/../../y}\n"), 400, "ring.name", "'/' or a NUL"},
		{"ring name dot-dot", "POST", "/v1/jobs", specWith("ring: {name: ..}\n"), 400, "ring.name", "want 1 to 160"},
		{"ring name too long", "POST", "/v1/jobs", specWith("ring: {name: " + strings.Repeat("r", 161) + "}\n"), 400, "ring.name", "want 1 to 160"},
		{"ring dir elsewhere", "POST", "/v1/jobs", specWith("ring: {dir: /etc}\n"), 400, "ring.dir", "creates rings in"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, "http://lastmiled"+tc.path, strings.NewReader(tc.body))
			a := serveAs(h, 1000, req)
			if tc.status == 0 { // the mux cleans the path: anything but success or a crash
				if a.status < 300 || a.status >= 500 {
					t.Fatalf("%d %s", a.status, a.Error)
				}
				return
			}
			if tc.field != "" {
				// Every error of the spec is reported: the input, which
				// does not exist, is one too.
				found := false
				for _, f := range a.Fields {
					found = found || f.Field == tc.field && strings.Contains(f.Msg, tc.want)
				}
				if a.status != tc.status || !found {
					t.Fatalf("%d %q %+v, want %d with %s: %q", a.status, a.Error, a.Fields, tc.status, tc.field, tc.want)
				}
				return
			}
			if a.status != tc.status || !strings.Contains(a.Error, tc.want) {
				t.Fatalf("%d %q, want %d with %q", a.status, a.Error, tc.status, tc.want)
			}
		})
	}
}

// TestStoreNames: the state store builds paths from valid ids only, and
// skips records whose id or name could not have been submitted.
func TestStoreNames(t *testing.T) {
	parent := t.TempDir()
	s, err := openStore(filepath.Join(parent, "state"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id string
		ok bool
	}{
		{"abc123def456", true},
		{"000000000000", true},
		{"", false},
		{"abc123def45", false},
		{"abc123def4567", false},
		{"ABC123DEF456", false},
		{"../../escape", false},
		{"../x", false},
		{"abc/23def456", false},
		{"abc\x0023def45", false},
		{"..", false},
	} {
		rec := &record{ID: tc.id, Name: "j", Spec: "name: j\n", State: "running"}
		perr := s.put(rec)
		rerr := s.remove(tc.id)
		if (perr == nil) != tc.ok || (rerr == nil) != tc.ok {
			t.Errorf("id %q: put %v, remove %v; want ok %v", tc.id, perr, rerr, tc.ok)
		}
	}
	if ents, _ := os.ReadDir(parent); len(ents) != 1 {
		t.Errorf("files outside the store: %v", ents)
	}
	for _, tc := range []struct{ file, body, want string }{
		{"abc123def456.json", `{"version": 1, "id": "abc123def456", "name": "../../etc"}`, "job name"},
		{"abc123def457.json", `{"version": 1, "id": "abc123def457", "name": "a/b"}`, "job name"},
		{"abc123def458.json", `{"version": 1, "id": "abc123def458", "name": ""}`, "job name"},
		{"x.json", `{"version": 1, "id": "x", "name": "ok"}`, "job id"},
		{"abc123def459.json", `{"version": 1, "id": "abc123def458", "name": "ok"}`, "not a version 1 record of that id"},
	} {
		os.WriteFile(filepath.Join(s.dir, tc.file), []byte(tc.body), 0o600)
		recs, errs := s.load()
		if len(recs) != 0 || len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.want) {
			t.Errorf("%s %s: loaded %v, errors %v; want it skipped with %q", tc.file, tc.body, recs, errs, tc.want)
		}
		os.Remove(filepath.Join(s.dir, tc.file))
	}
}
