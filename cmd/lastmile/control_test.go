package main

// Tests of the control commands (submit, jobs, status, cancel, top) against a
// fake lastmiled: an httptest server on a temporary unix socket answering
// with the objects of docs/control-api.md.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeDaemon serves mux on a unix socket and records request bodies.
type fakeDaemon struct {
	socket string
	mu     sync.Mutex
	bodies map[string][]byte // "METHOD PATH" -> last body
}

func startFake(t *testing.T, mux *http.ServeMux) *fakeDaemon {
	t.Helper()
	dir, err := os.MkdirTemp("", "lm-ctl") // short: unix socket paths are limited to 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	f := &fakeDaemon{socket: filepath.Join(dir, "lastmiled.sock"), bodies: map[string][]byte{}}
	ln, err := net.Listen("unix", f.socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.bodies[r.Method+" "+r.URL.Path] = b
		f.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return f
}

func (f *fakeDaemon) body(key string) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bodies[key]
}

// answer returns a handler that writes status and v as JSON.
func answer(status int, v any) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		switch v := v.(type) {
		case string:
			io.WriteString(w, v)
		default:
			json.NewEncoder(w).Encode(v)
		}
	}
}

// runCmd runs the lastmile command line and returns its exit code and
// outputs.
func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// fixedNow pins the commands' clock for stable ages.
func fixedNow(t *testing.T, at string) {
	t.Helper()
	tm, err := time.Parse(time.RFC3339, at)
	if err != nil {
		t.Fatal(err)
	}
	old := now
	now = func() time.Time { return tm }
	t.Cleanup(func() { now = old })
}

const jobJSON = `{
  "id": "3f9a1c27b0d4", "name": "ctr", "owner": 1000, "gid": 1000, "state": "running",
  "world_size": 2, "epochs": 3, "weight": 1, "spec_hash": "sha256:5d41402abc4b",
  "created": "2026-03-01T12:00:00Z", "started": "2026-03-01T12:00:01Z", "ended": null,
  "error": "", "generation_restarts": 1, "memory_bytes": 302522368,
  "rings": [
    {"rank": 0, "name": "lastmile.ctr.r0", "dir": "/dev/shm", "generation": 1296754385628476211,
     "slots": 4, "head": 118, "tail": 121, "occupancy": 3, "consumer_attached": true,
     "consumer_pid": 48213, "consumer_waiting": false, "next": {"epoch": 0, "batch": 118},
     "produced": {"epoch": 0, "batch": 121}, "state": "running"},
    {"rank": 1, "name": "lastmile.ctr.r1", "dir": "/dev/shm", "generation": 77, "slots": 4,
     "head": 120, "tail": 120, "occupancy": 0, "consumer_attached": true, "consumer_pid": 48214,
     "consumer_waiting": true, "next": {"epoch": 0, "batch": 120},
     "produced": {"epoch": 0, "batch": 120}, "state": "running", "future_field": 1}
  ],
  "progress": {"epoch": 0, "rows": 3932160, "batches": 968, "bytes": 1015021568,
    "units_done": 214, "units_in_flight": 6, "decode_seconds": 41.7, "pack_seconds": 3.2,
    "full_wait_seconds": 12.9}
}`

const failedJobJSON = `{"id": "0000000000aa", "name": "old", "owner": 0, "gid": 0, "state": "failed",
  "world_size": 1, "epochs": 0, "weight": 3, "created": "2026-02-28T10:00:00Z", "started": null,
  "ended": "2026-02-28T10:01:00Z", "error": "input /data/x.parquet:\n  bad magic",
  "memory_bytes": 0, "rings": [], "progress": {}, "counts": "exchanging"}`

const statusJSON = `{"version": "v0.4.0-12-gabcdef0", "pid": 812, "started": "2026-03-01T11:58:00Z",
  "uptime_seconds": 7261.5, "draining": false,
  "config": {"socket": "/run/lastmile/lastmiled.sock", "state_dir": "/var/lib/lastmile",
    "shm_dir": "/dev/shm", "metrics": "127.0.0.1:9464", "workers": 16,
    "memory_per_job": 8589934592, "memory_total": 34359738368, "grace_seconds": 600,
    "drain_timeout_seconds": 30, "log_level": "info"},
  "jobs": {"total": 3, "pending": 0, "running": 2, "done": 1, "failed": 0, "canceled": 0},
  "cpu": {"available": 16, "workers": 16, "busy": 11},
  "memory": {"reserved": 3221225472, "total": 34359738368}}`

func TestSubmit(t *testing.T) {
	mux := http.NewServeMux()
	status := http.StatusCreated
	mux.HandleFunc("POST /v1/jobs", func(w http.ResponseWriter, r *http.Request) {
		answer(status, jobJSON)(w, r)
	})
	f := startFake(t, mux)
	dir := t.TempDir()
	specPath := filepath.Join(dir, "job.yaml")
	spec := "version: 1\nname: ctr\ninputs: [data]\nbatch: {size: 8}\n"
	os.WriteFile(specPath, []byte(spec), 0o644)

	code, out, errs := runCmd(t, "submit", "-socket", f.socket, "-world-size", "2", "-weight", "3", specPath)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if want := "created job 3f9a1c27b0d4 \"ctr\": world size 2, weight 1, running\n"; out != want {
		t.Errorf("stdout %q, want %q", out, want)
	}
	var req map[string]any
	if err := json.Unmarshal(f.body("POST /v1/jobs"), &req); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"spec": spec, "world_size": 2.0, "weight": 3.0, "base_dir": dir, "file": specPath} // file: for the daemon's errors
	if fmt.Sprint(req) != fmt.Sprint(want) {
		t.Errorf("request %v, want %v", req, want)
	}

	// joining; defaults leave world_size and weight out
	status = http.StatusOK
	code, out, _ = runCmd(t, "submit", "-socket", f.socket, specPath)
	if code != 0 || !strings.HasPrefix(out, "joined job 3f9a1c27b0d4") {
		t.Errorf("join: exit %d, %q", code, out)
	}
	req = nil
	json.Unmarshal(f.body("POST /v1/jobs"), &req)
	if _, ok := req["world_size"]; ok {
		t.Errorf("world_size sent without -world-size: %v", req)
	}
	if _, ok := req["weight"]; ok {
		t.Errorf("weight sent without -weight: %v", req)
	}

	// -json prints the daemon's object, unknown fields included
	code, out, _ = runCmd(t, "submit", "-socket", f.socket, "-json", specPath)
	if code != 0 || !strings.Contains(out, `"future_field": 1`) || !strings.Contains(out, `"id": "3f9a1c27b0d4"`) {
		t.Errorf("-json: exit %d, %s", code, out)
	}
}

func TestSubmitErrors(t *testing.T) {
	mux := http.NewServeMux()
	var status int
	var body string
	mux.HandleFunc("POST /v1/jobs", func(w http.ResponseWriter, r *http.Request) {
		if status == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "30")
		}
		answer(status, body)(w, r)
	})
	f := startFake(t, mux)
	specPath := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(specPath, []byte("version: 1\n"), 0o644)

	check := func(st int, b, wantErr string) {
		t.Helper()
		status, body = st, b
		code, out, errs := runCmd(t, "submit", "-socket", f.socket, specPath)
		if code != 1 || out != "" || errs != wantErr {
			t.Errorf("status %d: exit %d, stdout %q, stderr\n%s\nwant\n%s", st, code, out, errs, wantErr)
		}
	}
	check(400, `{"error": "spec has 2 errors", "fields": [
	  {"line": 4, "field": "batch.size", "msg": "required: rows per batch, 1 to 16777216 (got 0)"},
	  {"line": 0, "field": "inputs", "msg": "required: list the Parquet files"}]}`,
		"lastmile submit: "+specPath+": spec has 2 errors\n"+
			specPath+":4: batch.size: required: rows per batch, 1 to 16777216 (got 0)\n"+
			specPath+": inputs: required: list the Parquet files\n")
	// One error is said once, with its line (not "spec has 1 error: ..." first).
	check(400, `{"error": "spec has 1 error: shufle: unknown field", "fields": [
	  {"line": 8, "field": "shufle", "msg": "unknown field"}]}`,
		"lastmile submit: "+specPath+":8: shufle: unknown field\n")
	check(400, `{"error": "weight 0: want 1 to 1000"}`, "lastmile submit: weight 0: want 1 to 1000\n")
	check(409, `{"error": "job \"ctr\" exists with another spec (sha256:12): cancel it first, or choose another name"}`,
		"lastmile submit: job \"ctr\" exists with another spec (sha256:12): cancel it first, or choose another name\n")
	check(503, `{"error": "draining"}`, "lastmile submit: draining (retry after 30s)\n")
	check(500, `not json`, "lastmile submit: POST /v1/jobs: 500 Internal Server Error: not json\n")

	code, _, errs := runCmd(t, "submit", "-socket", f.socket)
	if code != 2 || !strings.Contains(errs, "want one job spec file") {
		t.Errorf("no spec: exit %d, %q", code, errs)
	}
	code, _, errs = runCmd(t, "submit", "-socket", f.socket, filepath.Join(t.TempDir(), "missing.yaml"))
	if code != 1 || !strings.Contains(errs, "no such file") {
		t.Errorf("missing spec: exit %d, %q", code, errs)
	}
}

func TestDaemonNotRunning(t *testing.T) {
	dir, _ := os.MkdirTemp("", "lm-ctl")
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "none.sock")
	for _, args := range [][]string{{"jobs"}, {"status"}, {"cancel", "x"}, {"top", "-once"}} {
		code, _, errs := runCmd(t, append([]string{args[0], "-socket", sock}, args[1:]...)...)
		if code != 1 || !strings.Contains(errs, "no socket at "+sock+": is lastmiled running? (systemctl status lastmiled)") {
			t.Errorf("%v: exit %d, %q", args, code, errs)
		}
	}
	// a socket file nobody listens on
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	code, _, errs := runCmd(t, "jobs", "-socket", sock)
	if code != 1 || !strings.Contains(errs, "nothing accepts connections on "+sock) {
		t.Errorf("stale socket: exit %d, %q", code, errs)
	}
	// LASTMILE_SOCKET is the default
	t.Setenv("LASTMILE_SOCKET", sock+".env")
	_, _, errs = runCmd(t, "jobs")
	if !strings.Contains(errs, "no socket at "+sock+".env") {
		t.Errorf("LASTMILE_SOCKET ignored: %q", errs)
	}
}

func TestJobs(t *testing.T) {
	fixedNow(t, "2026-03-01T14:01:05Z")
	mux := http.NewServeMux()
	list := `{"jobs": [` + jobJSON + `,` + failedJobJSON + `]}`
	mux.HandleFunc("GET /v1/jobs", func(w http.ResponseWriter, r *http.Request) { answer(200, list)(w, r) })
	f := startFake(t, mux)
	code, out, errs := runCmd(t, "jobs", "-socket", f.socket)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	want := `ID            NAME  STATE    OWNER  RANKS  ATTACHED  WEIGHT  EPOCH  ROWS   MEMORY     AGE   ERROR
3f9a1c27b0d4  ctr   running  1000   2      2/2       1       0/3    3.93M  288.5 MiB  2h1m
0000000000aa  old   failed   0      1      0/0       3       0/-    0      0 B        1d4h  input /data/x.parquet: bad magic
`
	if out != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
	code, out, _ = runCmd(t, "jobs", "-socket", f.socket, "-json")
	if code != 0 || !strings.Contains(out, `"jobs": [`) {
		t.Errorf("-json: %d %s", code, out)
	}
	list = `{"jobs": []}`
	if _, out, _ = runCmd(t, "jobs", "-socket", f.socket); out != "no jobs\n" {
		t.Errorf("empty: %q", out)
	}
	code, _, errs = runCmd(t, "jobs", "-socket", f.socket, "extra")
	if code != 2 || !strings.Contains(errs, "unexpected arguments") {
		t.Errorf("extra args: %d %q", code, errs)
	}
}

func TestStatus(t *testing.T) {
	fixedNow(t, "2026-03-01T14:01:05Z")
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status", answer(200, statusJSON))
	mux.HandleFunc("GET /v1/jobs/3f9a1c27b0d4", answer(200, jobJSON))
	mux.HandleFunc("GET /v1/jobs/old", answer(200, failedJobJSON))
	mux.HandleFunc("GET /v1/jobs/nope", answer(404, `{"error": "no job \"nope\""}`))
	mux.HandleFunc("GET /v1/jobs/alice", answer(403, `{"error": "job 3f9a1c27b0d5 belongs to uid 1001"}`))
	f := startFake(t, mux)

	code, out, errs := runCmd(t, "status", "-socket", f.socket)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	want := `lastmiled  v0.4.0-12-gabcdef0, pid 812, up 2h1m2s, running
socket     /run/lastmile/lastmiled.sock
state dir  /var/lib/lastmile
shm dir    /dev/shm
metrics    http://127.0.0.1:9464/metrics
jobs       3: 0 pending, 2 running, 1 done, 0 failed, 0 canceled
cpu        11 of 16 decode workers busy (16 CPUs available)
memory     3.0 GiB reserved of 32.0 GiB (8.0 GiB per job)
`
	if out != want {
		t.Errorf("status: got\n%s\nwant\n%s", out, want)
	}

	code, out, errs = runCmd(t, "status", "-socket", f.socket, "3f9a1c27b0d4")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	want = `job       3f9a1c27b0d4 "ctr"
state     running
owner     uid 1000, gid 1000
shape     2 ranks, 3 epochs, weight 1
spec      sha256:5d41402abc4b
times     created 2026-03-01T12:00:00Z (2h1m ago), started 2026-03-01T12:00:01Z (2h1m ago)
produced  epoch 0: 3.93M rows, 968 batches, 968.0 MiB
work      214 units done, 6 in flight; decode 41.7s, pack 3.2s, waited on full rings 12.9s
memory    288.5 MiB
restarts  1

RANK  RING                      STATE    NEXT   PRODUCED  RING FILL  CONSUMER
0     /dev/shm/lastmile.ctr.r0  running  0:118  0:121     3/4        pid 48213
1     /dev/shm/lastmile.ctr.r1  running  0:120  0:120     0/4        pid 48214, waiting for data
`
	if out != want {
		t.Errorf("status ID: got\n%s\nwant\n%s", out, want)
	}

	_, out, _ = runCmd(t, "status", "-socket", f.socket, "old")
	for _, s := range []string{"state     failed\n", "error     input /data/x.parquet: bad magic\n", "0 epochs" + "", "no rings: the job has ended",
		"counts    exchanging: this host's share is counted; the trainers relay the other hosts' counts\n"} {
		if s == "0 epochs" {
			s = "without end epochs"
		}
		if !strings.Contains(out, s) {
			t.Errorf("status old: missing %q in\n%s", s, out)
		}
	}

	for id, want := range map[string]string{
		"nope":  "lastmile status: no job \"nope\"\n",
		"alice": "lastmile status: job 3f9a1c27b0d5 belongs to uid 1001\n",
	} {
		code, _, errs := runCmd(t, "status", "-socket", f.socket, id)
		if code != 1 || errs != want {
			t.Errorf("status %s: exit %d, %q, want %q", id, code, errs, want)
		}
	}
	code, out, _ = runCmd(t, "status", "-socket", f.socket, "-json")
	if code != 0 || !strings.Contains(out, `"uptime_seconds": 7261.5`) {
		t.Errorf("-json: %d %s", code, out)
	}
}

func TestCancel(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("DELETE /v1/jobs/ctr", answer(200, strings.Replace(jobJSON, `"state": "running"`, `"state": "canceled"`, 1)))
	mux.HandleFunc("DELETE /v1/jobs/other", answer(403, `{"error": "job 0000000000bb belongs to uid 1001"}`))
	f := startFake(t, mux)
	code, out, errs := runCmd(t, "cancel", "-socket", f.socket, "ctr")
	if code != 0 || out != "job 3f9a1c27b0d4 \"ctr\": canceled\n" {
		t.Errorf("cancel: exit %d, %q %q", code, out, errs)
	}
	code, _, errs = runCmd(t, "cancel", "-socket", f.socket, "ctr", "other")
	if code != 1 || errs != "lastmile cancel: cancel other: job 0000000000bb belongs to uid 1001\n" {
		t.Errorf("cancel other: exit %d, %q", code, errs)
	}
	code, _, errs = runCmd(t, "cancel", "-socket", f.socket)
	if code != 2 || !strings.Contains(errs, "want the id or name") {
		t.Errorf("cancel without id: exit %d, %q", code, errs)
	}
}

// metricsServer serves Prometheus text whose counters grow by step per scrape.
func metricsServer(t *testing.T) *httptest.Server {
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		k := float64(n)
		n++
		mu.Unlock()
		// The job: 30000 rows/s, 30 MB/s; rank 0 publishes twice the batches
		// of rank 1. The interval is what the clock says, and the test's
		// clock steps by 1s.
		const l = `job="ctr",job_id="3f9a1c27b0d4"`
		fmt.Fprintf(w, "# HELP lastmile_rows_total Rows packed.\n# TYPE lastmile_rows_total counter\n")
		fmt.Fprintf(w, "lastmile_rows_total{%s} %g\n", l, 1e6+k*3e4)
		fmt.Fprintf(w, "lastmile_bytes_total{%s} %g 1700000000000\n", l, 5e8+k*3e7)
		fmt.Fprintf(w, "lastmile_units_in_flight{%s} 6\n", l)
		fmt.Fprintf(w, "lastmile_job_errors_total{%s} 1\n", l)
		for rank := 0; rank < 2; rank++ {
			fmt.Fprintf(w, "lastmile_batches_total{%s,rank=\"%d\"} %g\n", l, rank, 100+k*float64(2-rank))
			fmt.Fprintf(w, "lastmile_consumer_empty_wait_seconds_total{%s,rank=\"%d\"} %g\n", l, rank, 3+k*0.3*float64(rank))
			fmt.Fprintf(w, "lastmile_producer_full_wait_seconds_total{%s,rank=\"%d\"} %g\n", l, rank, 9+k*0.5)
		}
		// another job's series must not leak in
		fmt.Fprintf(w, "lastmile_rows_total{job=\"x\",job_id=\"00000000ffff\"} %g\n", k*1e9)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// steppingClock makes every call of now one second later.
func steppingClock(t *testing.T, start string) {
	t.Helper()
	tm, _ := time.Parse(time.RFC3339, start)
	var mu sync.Mutex
	old := now
	now = func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		tm = tm.Add(time.Second)
		return tm
	}
	t.Cleanup(func() { now = old })
}

func TestTopOnce(t *testing.T) {
	steppingClock(t, "2026-03-01T14:01:04Z")
	ms := metricsServer(t)
	mux := http.NewServeMux()
	st := strings.Replace(statusJSON, "127.0.0.1:9464", strings.TrimPrefix(ms.URL, "http://"), 1)
	mux.HandleFunc("GET /v1/status", answer(200, st))
	mux.HandleFunc("GET /v1/jobs", answer(200, `{"jobs": [`+jobJSON+`,`+failedJobJSON+`]}`))
	f := startFake(t, mux)

	code, out, errs := runCmd(t, "top", "-socket", f.socket, "-once", "-interval", "10ms")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	want := `lastmiled v0.4.0-12-gabcdef0  pid 812  up 2h1m  14:01:06
cpu 11/16 busy  memory 3.0 GiB of 32.0 GiB  jobs 2 running, 0 pending
rates over 1s from /metrics

JOB / RANK    STATE    ROWS/S  MB/S  RING  STALL  FULL  UNITS  ERR  NEXT
ctr (3f9a1c)  running   30.0k  30.0          15%  100%      6    1
  rank 0      running   20.0k  20.0   3/4     0%   50%      -    -  0:118
  rank 1      running   10.0k  10.0   0/4    30%   50%      -    -  0:120

(1 ended jobs not shown; -all shows them)
`
	if out != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
	if strings.Contains(out, "\x1b") {
		t.Error("-once printed ANSI escapes")
	}

	// Without metrics: job rates from the progress counters, no per-rank rates.
	code, out, errs = runCmd(t, "top", "-socket", f.socket, "-once", "-interval", "10ms", "-metrics", "off")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, s := range []string{
		"rates over 1s from job counters (no /metrics: metrics off)",
		"ctr (3f9a1c)  running       0   0.0              -    0%      6    -\n",
		"  rank 1      running       0   0.0   0/4  waiting     -      -    -  0:120\n",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("no metrics: missing %q in\n%s", s, out)
		}
	}

	// -all shows ended jobs too
	_, out, _ = runCmd(t, "top", "-socket", f.socket, "-once", "-interval", "10ms", "-all")
	if !strings.Contains(out, "\nold (000000)  failed") || strings.Contains(out, "not shown") {
		t.Errorf("-all:\n%s", out)
	}

	// An unreachable metrics address is reported, not fatal.
	_, out, _ = runCmd(t, "top", "-socket", f.socket, "-once", "-interval", "10ms", "-metrics", "127.0.0.1:1")
	if !strings.Contains(out, "from job counters (no /metrics: ") {
		t.Errorf("bad metrics address: %s", out)
	}
}

func TestTopLive(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status", answer(200, statusJSON))
	mux.HandleFunc("GET /v1/jobs", answer(200, `{"jobs": []}`))
	f := startFake(t, mux)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var out, errb bytes.Buffer
	code := run(ctx, []string{"top", "-socket", f.socket, "-interval", "50ms", "-metrics", "off"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	frames := strings.Count(out.String(), "\x1b[H")
	if frames < 2 || !strings.Contains(out.String(), "no running jobs\x1b[K\n") {
		t.Errorf("%d frames:\n%q", frames, out.String())
	}
}

func TestParseProm(t *testing.T) {
	in := `# HELP x help
# TYPE x counter
x 1
y{a="1",b="q\"uo\\te\n"} 2.5 1700000000
z{} -3e2

w{a="x y",} +Inf
`
	ps, err := parseProm(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(ps)
	want := `[{w map[a:x y] +Inf} {x map[] 1} {y map[a:1 b:q"uo\te` + "\n" + `] 2.5} {z map[] -300}]`
	if got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
	if v, ok := ps.sum("y", map[string]string{"a": "1"}); !ok || v != 2.5 {
		t.Errorf("sum = %v %v", v, ok)
	}
	if _, ok := ps.sum("y", map[string]string{"a": "2"}); ok {
		t.Error("sum matched a wrong label")
	}
	for _, bad := range []string{"x", `x{a="1" 2`, `x{a=1} 2`, "x one", "x 1 2 3", `x{a="1} 2`} {
		if _, err := parseProm(strings.NewReader(bad)); err == nil {
			t.Errorf("parseProm(%q): no error", bad)
		}
	}
}

// TestTopMetricsToken: lastmiled serves the jobs' series only to a scrape
// with its metrics token; top without the token takes the jobs' rates
// from their progress counters, and with -metrics-token-file from
// /metrics.
func TestTopMetricsToken(t *testing.T) {
	steppingClock(t, "2026-03-01T14:01:04Z")
	ms := metricsServer(t)
	guarded := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			fmt.Fprintf(w, "lastmile_memory_total_bytes 1e9\n") // the daemon's own series only
			return
		}
		resp, err := http.Get(ms.URL + r.URL.Path)
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		defer resp.Body.Close()
		io.Copy(w, resp.Body)
	}))
	t.Cleanup(guarded.Close)
	mux := http.NewServeMux()
	st := strings.Replace(statusJSON, "127.0.0.1:9464", strings.TrimPrefix(guarded.URL, "http://"), 1)
	mux.HandleFunc("GET /v1/status", answer(200, st))
	mux.HandleFunc("GET /v1/jobs", answer(200, `{"jobs": [`+jobJSON+`]}`))
	f := startFake(t, mux)
	tok := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tok, []byte("tok\n"), 0o600)
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "rates over 1s from job counters (no /metrics: needs -metrics-token-file)"},
		{[]string{"-metrics-token-file", tok}, "rates over 1s from /metrics"},
	} {
		code, out, errs := runCmd(t, append([]string{"top", "-socket", f.socket, "-once", "-interval", "10ms"}, c.args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", c.args, code, errs)
		}
		if !strings.Contains(out, c.want) {
			t.Errorf("%v: missing %q in\n%s", c.args, c.want, out)
		}
	}
}

// TestSubmitEmptyFile: an empty spec file (or one the user's redirect
// emptied) is named as such, before any request, instead of the daemon's
// `"spec" is required`, which names no file.
func TestSubmitEmptyFile(t *testing.T) {
	mux := http.NewServeMux()
	asked := false
	mux.HandleFunc("POST /v1/jobs", func(w http.ResponseWriter, r *http.Request) {
		asked = true
		answer(http.StatusBadRequest, `{"error": "\"spec\" is required: the job spec as YAML or JSON text"}`)(w, r)
	})
	f := startFake(t, mux)
	specPath := filepath.Join(t.TempDir(), "empty.yaml")
	os.WriteFile(specPath, []byte(" \n"), 0o644)
	code, _, errs := runCmd(t, "submit", "-socket", f.socket, specPath)
	if code == 0 || !strings.Contains(errs, specPath) || !strings.Contains(errs, "empty") || asked {
		t.Fatalf("exit %d, asked the daemon %v, stderr %q; want an error naming %s as empty, before any request", code, asked, errs, specPath)
	}
}
