package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRequests sends malformed requests and specs: each gets a 4xx with a
// clear message (field errors for specs), and the daemon stays up.
func TestRequests(t *testing.T) {
	e := newEnv(t)
	e.start()
	good := specFor("req", smallData, "")
	cases := []struct {
		name, method, path string
		body               any
		status             int
		want               string // in the error message
		field              string // a field error's field
	}{
		{"malformed JSON", "POST", "/v1/jobs", `{"spec": `, 400, "truncated JSON", ""},
		{"bad syntax", "POST", "/v1/jobs", `{"spec" "x"}`, 400, "malformed JSON", ""},
		{"not an object", "POST", "/v1/jobs", `[1,2]`, 400, "want a JSON object", ""},
		{"unknown field", "POST", "/v1/jobs", `{"spec": "x", "wrld_size": 2}`, 400, `unknown field "wrld_size"`, ""},
		{"wrong type", "POST", "/v1/jobs", `{"spec": 3}`, 400, `field "spec"`, ""},
		{"trailing data", "POST", "/v1/jobs", `{"spec": "x"} {}`, 400, "after the JSON object", ""},
		{"empty body", "POST", "/v1/jobs", ``, 400, "empty request body", ""},
		{"oversized", "POST", "/v1/jobs", `{"spec": "` + strings.Repeat("a", 2<<20) + `"}`, 413, "over 1048576 bytes (1MiB, config control.max_body)", ""},
		{"no spec", "POST", "/v1/jobs", map[string]any{"world_size": 2}, 400, `"spec" is required`, ""},
		{"bad world size", "POST", "/v1/jobs", map[string]any{"spec": good, "world_size": -1}, 400, "world_size", ""},
		{"bad weight", "POST", "/v1/jobs", map[string]any{"spec": good, "weight": 5000}, 400, "weight", ""},
		{"spec field errors", "POST", "/v1/jobs", map[string]any{"spec": "name: x\ninputs: [/a]\nbatch: {size: 0}\nring: {slots: 1}\n"}, 400, "spec has 3 errors", "batch.size"}, // and input /a does not exist
		{"spec not YAML", "POST", "/v1/jobs", map[string]any{"spec": "name: [unclosed"}, 400, "not valid YAML", ""},
		{"unknown spec field", "POST", "/v1/jobs", map[string]any{"spec": good + "bogus: 1\n"}, 400, "", "bogus"},
		{"relative input", "POST", "/v1/jobs", map[string]any{"spec": specFor("rel", "data/", "")}, 400, "base_dir", "inputs[0]"},
		{"ring dir", "POST", "/v1/jobs", map[string]any{"spec": "name: rd\ninputs: [" + smallData + "]\nbatch: {size: 100}\nring: {dir: /etc}\n"}, 400, "creates rings in", "ring.dir"},
		{"missing inputs", "POST", "/v1/jobs", map[string]any{"spec": specFor("none", "/nonexistent/x.parquet", "")}, 400, "nonexistent", ""},
		{"unknown job", "GET", "/v1/jobs/nope", nil, 404, `no job "nope"`, ""},
		{"unknown path", "GET", "/v2/jobs", nil, 404, "no such endpoint", ""},
		{"wrong method", "PUT", "/v1/jobs", `{}`, 405, "not allowed", ""},
		{"attach unknown job", "POST", "/v1/jobs/nope/attach", `{"rank": 0}`, 404, "no job", ""},
	}
	for _, c := range cases {
		var ej errJSON
		st, err := e.do(c.method, c.path, c.body, &ej)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if st != c.status || !strings.Contains(ej.Error, c.want) {
			t.Errorf("%s: %d %q, want %d containing %q", c.name, st, ej.Error, c.status, c.want)
		}
		if c.field != "" {
			found := false
			for _, f := range ej.Fields {
				found = found || strings.HasPrefix(f.Field, c.field)
			}
			if !found {
				t.Errorf("%s: fields %+v, want one for %s", c.name, ej.Fields, c.field)
			}
		}
	}
	// Submitting the same job again joins it; another spec of that name
	// conflicts; bad ranks and cursors are refused.
	j := e.submit(good, nil)
	var again jobJSON
	if st, _ := e.do("POST", "/v1/jobs", map[string]any{"spec": good}, &again); st != 200 || again.ID != j.ID {
		t.Errorf("resubmit: %d %s, want 200 and job %s", st, again.ID, j.ID)
	}
	var ej errJSON
	if st, _ := e.do("POST", "/v1/jobs", map[string]any{"spec": good + "seed: 7\n"}, &ej); st != 409 || !strings.Contains(ej.Error, "another spec") {
		t.Errorf("conflicting spec: %d %q", st, ej.Error)
	}
	// (A cursor past the last epoch is a 400 too, which cancels a job
	// whose every rank says so: TestPastEndCancels.)
	for _, body := range []string{`{"rank": 1}`, `{"rank": -1}`, `{}`, `{"rank": 0, "wait": 9999}`} {
		if st, _ := e.do("POST", "/v1/jobs/"+j.ID+"/attach", body, &ej); st != 400 {
			t.Errorf("attach %s: %d %q, want 400", body, st, ej.Error)
		}
	}
	// A failing input is a failed job, not a crash.
	bad, _ := filepath.Abs("../../testdata/corrupt/badpage.parquet")
	f := e.submit(badSpec("bad", bad), nil)
	e.waitJob(f.ID, 20*time.Second, "failed")
	if st, _ := e.do("GET", "/v1/status", nil, nil); st != 200 {
		t.Fatalf("daemon not answering after bad requests: %d", st)
	}
	// Cancel: the ring carries who canceled it.
	var c jobJSON
	if st, _ := e.do("DELETE", "/v1/jobs/"+j.ID, nil, &c); st != 200 || c.State != "canceled" || !strings.Contains(c.Error, "canceled by uid") {
		t.Errorf("cancel: %d %+v", st, c)
	}
}

// TestOtherUser checks SO_PEERCRED authorization: a client running as
// another uid cannot see, attach to or cancel the job (403), and does not
// see it listed.
func TestOtherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a client as uid 65534")
	}
	e := newEnv(t)
	e.start("-socket-mode", "0666")
	j := e.submit(specFor("mine", smallData, "epochs: 0\n"), nil)
	exe, _ := os.Executable()
	// The test binary must be executable by uid 65534.
	copyTo := filepath.Join(e.dir, "client")
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(copyTo, data, 0o755); err != nil {
		t.Fatal(err)
	}
	as := func(method, path, body string) (int, string) {
		cmd := exec.Command(copyTo, "-test.run=^$")
		cmd.Env = childEnv("LASTMILED_HELPER=request", "H_SOCK="+e.sock, "H_METHOD="+method, "H_PATH="+path, "H_BODY="+body)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("client as uid 65534: %v %s", err, out)
		}
		var code int
		var rest string
		fmt.Sscanf(string(out), "%d", &code)
		if i := strings.IndexByte(string(out), '\n'); i >= 0 {
			rest = string(out[i+1:])
		}
		return code, rest
	}
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/v1/jobs/" + j.ID, ""},
		{"GET", "/v1/jobs/mine", ""},
		{"DELETE", "/v1/jobs/" + j.ID, ""},
		{"POST", "/v1/jobs/" + j.ID + "/attach", `{"rank": 0}`},
	} {
		if code, body := as(c.method, c.path, c.body); code != 403 || !strings.Contains(body, "belongs to uid 0") {
			t.Errorf("%s %s as uid 65534: %d %s, want 403", c.method, c.path, code, body)
		}
	}
	if code, body := as("GET", "/v1/jobs", ""); code != 200 || strings.Contains(body, j.ID) {
		t.Errorf("list as uid 65534: %d %s; want 200 without the job", code, body)
	}
	// Inputs the other user cannot read are refused.
	priv := filepath.Join(e.dir, "private")
	os.Mkdir(priv, 0o700)
	src, _ := os.ReadFile(filepath.Join(smallData, "part-00000.parquet"))
	os.WriteFile(filepath.Join(priv, "p.parquet"), src, 0o600)
	spec, _ := json.Marshal(map[string]string{"spec": specFor("theirs", filepath.Join(priv, "p.parquet"), "")})
	if code, body := as("POST", "/v1/jobs", string(spec)); code != 403 || !strings.Contains(body, "may not read") {
		t.Errorf("submit of unreadable input as uid 65534: %d %s", code, body)
	}
	// A partitioned table one of whose files the other user cannot read:
	// a job whose filter leaves that partition out reads nothing of it,
	// and is accepted; one that keeps it is refused.
	table := filepath.Join(e.dir, "table")
	for _, dt := range []string{"open", "closed"} {
		os.MkdirAll(filepath.Join(table, "dt="+dt), 0o755)
		os.WriteFile(filepath.Join(table, "dt="+dt, "part-0.parquet"), src, 0o644)
	}
	os.Chmod(filepath.Join(table, "dt=closed", "part-0.parquet"), 0o600)
	for _, c := range []struct {
		dt   string
		want int
	}{{"open", 201}, {"closed", 403}} {
		text := fmt.Sprintf("name: part-%s\ninputs: [%s]\npartitions: {dt: string}\nbatch: {size: 100}\npipeline:\n  - filter: 'dt == \"%s\"'\n  - select: [row_id, dt]\n", c.dt, table, c.dt)
		spec, _ := json.Marshal(map[string]string{"spec": text})
		if code, body := as("POST", "/v1/jobs", string(spec)); code != c.want {
			t.Errorf("submit as uid 65534 of a job reading partition %s: %d %s, want %d", c.dt, code, body, c.want)
		}
	}
	// The accepted job plans and produces as its user too.
	waitFor(t, "the partitioned job's ring", 10*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(e.shm, "lastmile.part-open"))
		return err == nil
	})
	code, body := as("GET", "/v1/jobs/part-open", "")
	var view struct {
		State    string
		Progress struct {
			FilesPruned int64 `json:"files_pruned"`
		}
	}
	if err := json.Unmarshal([]byte(body), &view); code != 200 || err != nil || view.State == "failed" || view.Progress.FilesPruned != 1 {
		t.Errorf("the partitioned job as uid 65534: %d %s; want it running, with the closed partition's file pruned", code, body)
	}
	if j2 := e.job(j.ID); j2.State != "running" && j2.State != "pending" {
		t.Errorf("job is %s after the other user's attempts", j2.State)
	}
	// The ring is the owner's, mode 0600.
	waitFor(t, "ring", 10*time.Second, func() bool { _, err := os.Stat(filepath.Join(e.shm, "lastmile.mine")); return err == nil })
	st, _ := os.Stat(filepath.Join(e.shm, "lastmile.mine"))
	if st.Mode().Perm() != 0o600 {
		t.Errorf("ring mode %v, want 0600", st.Mode().Perm())
	}
}

func requestHelper() int {
	sock := os.Getenv("H_SOCK")
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	var body io.Reader
	if b := os.Getenv("H_BODY"); b != "" {
		body = strings.NewReader(b)
	}
	req, _ := http.NewRequest(os.Getenv("H_METHOD"), "http://lastmiled"+os.Getenv("H_PATH"), body)
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	fmt.Printf("%d %d\n%s", resp.StatusCode, time.Since(start).Milliseconds(), data) // status, ms
	return 0
}

// TestTwoJobs runs two good jobs and a failing one at once: the good ones
// complete with exact row sets, the failing one fails alone. The metrics
// endpoint reports both jobs per rank.
func TestTwoJobs(t *testing.T) {
	e := newEnv(t)
	e.start()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a := e.submit(specFor("a", smallData, "epochs: 2\nshuffle: {units: true, buffer: 1000}\nseed: 3\n"), nil)
	b := e.submit(specFor("b", smallData, "world_size: 2\n"), map[string]any{"weight": 3})
	bad, _ := filepath.Abs("../../testdata/corrupt/badpage.parquet")
	c := e.submit(badSpec("c", bad), nil)
	readers := []*reader{{e: e, job: a.ID}, {e: e, job: b.ID, rank: 0}, {e: e, job: b.ID, rank: 1}}
	if err := startReaders(ctx, readers)(); err != nil {
		t.Fatal(err)
	}
	// Job a: two epochs, each row once per epoch.
	var e0, e1 []int64
	for i, cur := range readers[0].cursors {
		rows := readers[0].rows[100*i : 100*(i+1)]
		if cur.Epoch == 0 {
			e0 = append(e0, rows...)
		} else {
			e1 = append(e1, rows...)
		}
	}
	checkExactlyOnce(t, "job a epoch 0", e0, 10000)
	checkExactlyOnce(t, "job a epoch 1", e1, 10000)
	checkExactlyOnce(t, "job b", append(readers[1].rows, readers[2].rows...), 10000)
	e.waitJob(a.ID, 10*time.Second, "done")
	e.waitJob(b.ID, 10*time.Second, "done")
	fc := e.waitJob(c.ID, 10*time.Second, "failed")
	if fc.Error == "" {
		t.Error("failed job has no error")
	}

	var st struct {
		Config struct{ Metrics string }
	}
	e.do("GET", "/v1/status", nil, &st)
	m, err := scrape(st.Config.Metrics)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`lastmile_rows_total{job="a",job_id="` + a.ID + `"} 20000`,
		`lastmile_batches_total{job="b",job_id="` + b.ID + `",rank="1"} 50`,
		`lastmile_job_state{job="c",job_id="` + c.ID + `",state="failed"} 1`,
		`lastmile_job_errors_total{job="c"`,
		`lastmile_consumer_empty_wait_seconds_total{job="b"`,
		`lastmile_producer_full_wait_seconds_total{job="a"`,
		`lastmile_stage_seconds_total{job="a",job_id="` + a.ID + `",stage="decode"}`,
		`lastmile_units_in_flight{job="a"`,
		`lastmile_job_weight{job="b",job_id="` + b.ID + `"} 3`,
		`lastmile_cpu_tokens 2`,
	} {
		if !strings.Contains(string(m), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// badSpec reads the column whose first page is corrupt in
// testdata/corrupt/badpage.parquet.
func badSpec(name, input string) string {
	return fmt.Sprintf("name: %s\ninputs: [%s]\ncolumns: [row_id, seq_0]\nbatch: {size: 100}\n", name, input)
}

// TestReclaimAndBudget: a job nobody attaches to is canceled and its ring
// removed after the grace period; a finished, drained job's rings are
// removed; jobs over the memory budget are refused with a clear message.
func TestReclaimAndBudget(t *testing.T) {
	e := newEnv(t)
	e.start("-grace", "1s", "-memory-per-job", "3MiB", "-memory-total", "3MiB")
	idle := e.submit(specFor("idle", smallData, ""), nil)
	ring := filepath.Join(e.shm, "lastmile.idle")
	waitFor(t, "ring", 10*time.Second, func() bool { _, err := os.Stat(ring); return err == nil })
	var ej errJSON
	if st, _ := e.do("POST", "/v1/jobs", map[string]any{"spec": specFor("big", smallData, "world_size: 2\n")}, &ej); st != 400 || !strings.Contains(ej.Error, "per-job limit") {
		t.Errorf("job over the per-job limit: %d %q", st, ej.Error)
	}
	if st, _ := e.do("POST", "/v1/jobs", map[string]any{"spec": specFor("more", smallData, "")}, &ej); st != 503 || !strings.Contains(ej.Error, "total memory budget") {
		t.Errorf("job over the total budget: %d %q", st, ej.Error)
	}
	j := e.waitJob(idle.ID, 10*time.Second, "canceled")
	if !strings.Contains(j.Error, "reclaimed") {
		t.Errorf("reclaimed job's error %q", j.Error)
	}
	waitFor(t, "ring removed", 10*time.Second, func() bool { _, err := os.Stat(ring); return os.IsNotExist(err) })
	// Memory is free again: a job that is read to its end has its ring
	// removed once drained.
	done := e.submit(specFor("more", smallData, ""), nil)
	r := &reader{e: e, job: done.ID}
	if err := r.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.waitJob(done.ID, 10*time.Second, "done")
	waitFor(t, "drained ring removed", 10*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(e.shm, "lastmile.more"))
		return os.IsNotExist(err)
	})
}
