package daemon

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fuzzJobs are the jobs the fuzzed daemon holds, restored from records as
// after a restart: ended ones, so that no request starts production.
var fuzzJobs = []*record{
	{ID: "abc123def456", Name: "ctr", Owner: 1000, GID: 1000, State: "done", Spec: "name: ctr\ninputs: [/nonexistent/a.parquet]\nbatch: {size: 8}\nworld_size: 2\n"},
	{ID: "0123456789ab", Name: "gone", Owner: 1000, GID: 1000, State: "done", RingsRemoved: true, Spec: "name: gone\ninputs: [/nonexistent/a.parquet]\nbatch: {size: 8}\n"},
	{ID: "fedcba987654", Name: "theirs", Owner: 1001, GID: 1001, State: "failed", Error: "decode: corrupt page", Spec: "name: theirs\ninputs: [/nonexistent/b.parquet]\nbatch: {size: 8}\n"},
	{ID: "111111111111", Name: "stopped", Owner: 1000, GID: 1000, State: "canceled", Error: "job canceled by uid 1000", Spec: "name: stopped\ninputs: [/nonexistent/c.parquet]\nbatch: {size: 8}\n"},
	{ID: "222222222222", Name: "share", Owner: 1000, GID: 1000, State: "done", Hosts: 2, Host: 1, UnitRows: []int64{3, 4}, UnitRowsPlan: "sha256:0",
		Spec: "name: share\ninputs: [/nonexistent/d.parquet]\nbatch: {size: 8}\nworld_size: 4\n"},
}

// fuzzSeeds are requests as lastmile's clients send them (python/lastmile
// control.py, cmd/lastmile), and malformed ones.
func fuzzSeeds() [][3]string {
	const h = "Accept: application/json\nContent-Type: application/json\n"
	seeds := [][3]string{
		{"GET", "/v1/status", "Accept: application/json\n"},
		{"GET", "/v1/jobs", "Accept: application/json\n"},
		{"GET", "/v1/jobs/abc123def456", "Accept: application/json\n"},
		{"GET", "/v1/jobs/ctr", ""},
		{"GET", "/v1/jobs/theirs", ""},
		{"DELETE", "/v1/jobs/abc123def456", "Accept: application/json\n"},
		{"DELETE", "/v1/jobs/stopped", ""},
		{"DELETE", "/v1/jobs/%00", ""},
		{"PUT", "/v1/jobs", h},
		{"GET", "/v2/jobs", ""},
		{"GET", "/v1/jobs/ctr/counts?wait=0", ""},
		{"GET", "/v1/jobs/share/counts?wait=-1", ""},
		{"GET", "/v1/jobs/theirs/counts?wait=x", ""},
		{"GET", "/v1/jobs/share/counts?rows=0&wait=0", ""},
		{"GET", "/v1/jobs/share/counts?rows=maybe", ""},
		{"GET", "/v1/jobs/a%2F..%2Fb", ""},
		{"POST", "/v1/status", h + "Content-Length: 104857600\n"},
		{"POST", "/v1/jobs", h + "Content-Length: 2\n"},
		{"POST", "/v1/jobs", h + "Transfer-Encoding: chunked\nX-Long: " + strings.Repeat("x", 300) + "\n"},
	}
	for _, b := range []string{
		``, `{}`, `{"spec": ""}`, `{"spec": "name: x\ninputs: [/nonexistent]\nbatch: {size: 1}\n"}`,
		`{"spec": "version: 1\nname: ctr\ninputs: [/nonexistent/data/]\ncolumns: [row_id, label]\nbatch: {size: 4096}\nepochs: 3\n", "world_size": 8, "base_dir": "/home/alice/exp", "weight": 1}`,
		`{"spec": "{\"version\": 1, \"name\": \"j\", \"inputs\": [\"d\"], \"batch\": {\"size\": 8}}", "base_dir": "/nonexistent"}`,
		`{"spec": "name: [", "world_size": 3}`, `{"spec": "name: ctr\ninputs: [/x]\nbatch: {size: 1}\nring: {name: ../../etc}\n"}`,
		`{"spec": "name: \"a\\u0000b\"\ninputs: [/x]\nbatch: {size: 1}\n"}`, `{"spec": "x", "world_size": 99999, "weight": -1}`,
		`{"rank": 0, "cursor": {"epoch": 1, "batch": 2}}`, `{"rank": 1, "cursor": {"epoch": 0, "batch": 0}, "wait": 0}`,
		`{"rank": 3}`, `{"rank": -1}`, `{"rank": 1e40}`, `{"wait": -1}`, `{"rank": 0, "wait": 700}`,
		`[1]`, `null`, `"x"`, `{"spec": "x"} trailing`, `{"spec": "x", "spec": "y"}`, `{"rank": 0, "extra": 1}`,
		`{"spec": "version: 2\nname: ../../etc\ninputs: []\nbatch: {size: -5}\nring: {mode: \"0777\", slots: 70000}\n"}`,
		`{"spec": "name: w\ninputs: [/nonexistent/x.parquet]\nbatch: {size: 8}\n", "world_size": 16, "hosts": 2, "host": 1}`,
		`{"spec": "x", "world_size": 6, "hosts": 4, "host": 3}`, `{"spec": "x", "hosts": -1, "host": 7}`, `{"rank": 2}`,
		`{"spec": "x", "hosts": 2, "share_counts": true}`, `{"spec": "x", "share_counts": true}`,
		`{"plan": "sha256:0", "rows": [1, -1, 3]}`, `{"plan": "", "rows": null}`, `{"rows": [1e30]}`,
	} {
		for _, path := range []string{"/v1/jobs", "/v1/jobs/abc123def456/attach", "/v1/jobs/ctr/attach", "/v1/jobs/theirs/attach", "/v1/jobs/gone/attach",
			"/v1/jobs/share/attach", "/v1/jobs/ctr/counts", "/v1/jobs/share/counts"} {
			seeds = append(seeds, [3]string{"POST", path, h + "Content-Length: " + strconv.Itoa(len(b)) + "\n" + b})
		}
	}
	return seeds
}

// fuzzRequest builds a request from the fuzzer's strings: headers are
// "Key: value" lines, then a blank line... everything after the header
// lines is the body.
func fuzzRequest(method, path, rest string) (*http.Request, bool) {
	if !strings.HasPrefix(path, "/") || strings.ContainsAny(path, " \r\n\t") {
		return nil, false
	}
	hdr := http.Header{}
	body := rest
	for body != "" {
		line, after, _ := strings.Cut(body, "\n")
		k, v, ok := strings.Cut(line, ": ")
		if !ok || k == "" || strings.ContainsAny(k, " \r\t{\"") {
			break
		}
		hdr.Add(k, v)
		body = after
	}
	req, err := http.NewRequest(method, "http://lastmiled"+path, strings.NewReader(body))
	if err != nil {
		return nil, false
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	if n, err := strconv.ParseInt(hdr.Get("Content-Length"), 10, 64); err == nil && n >= 0 {
		req.ContentLength = n
	}
	return req, true
}

// FuzzControlAPI sends arbitrary methods, paths, headers and bodies to
// every endpoint, as root, the owner of some jobs, another user and a peer
// without credentials. The answer is always one JSON object, an error
// with a message for 4xx, and never a 500 or a crash (or a redirect to the
// clean path).
func FuzzControlAPI(f *testing.F) {
	for i, s := range fuzzSeeds() {
		f.Add(s[0], s[1], s[2], uint8(i%4))
	}
	d := apiDaemon(f, func(c *Config) { c.Limits.JobsPerUser = 2 })
	for _, rec := range fuzzJobs {
		r := *rec
		r.Created = time.Now()
		d.restore(&r)
	}
	if len(d.jobs) != len(fuzzJobs) {
		f.Fatalf("restored %d jobs of %d", len(d.jobs), len(fuzzJobs))
	}
	h := d.api()
	f.Fuzz(func(t *testing.T, method, path, rest string, who uint8) {
		req, ok := fuzzRequest(method, path, rest)
		if !ok {
			return
		}
		p := []peer{{uid: 0, ok: true}, {uid: 1000, gid: 1000, ok: true}, {uid: 1001, gid: 1001, ok: true}, {}}[who%4]
		ctx, cancel := context.WithTimeout(context.WithValue(req.Context(), peerKey{}, p), 10*time.Second)
		defer cancel()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req.WithContext(ctx))
		checkAnswer(t, method+" "+path, w.Code, w.Header(), w.Body.Bytes())
	})
}

// checkAnswer checks one answer of the control API.
func checkAnswer(t *testing.T, what string, code int, hdr http.Header, body []byte) {
	t.Helper()
	if code >= 500 && !(code == 503 && hdr.Get("Retry-After") != "") {
		t.Fatalf("%s: %d %s", what, code, body)
	}
	if code/100 == 3 && hdr.Get("Location") != "" {
		return // the mux cleaning a path ("/v1/./jobs")
	}
	if ct := hdr.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s: %d with Content-Type %q: %s", what, code, ct, body)
	}
	var obj map[string]any
	if err := json.Unmarshal(body, &obj); err != nil {
		t.Fatalf("%s: %d, not one JSON object (%v): %s", what, code, err, body)
	}
	if msg, _ := obj["error"].(string); code >= 400 && msg == "" {
		t.Fatalf("%s: %d without an error message: %s", what, code, body)
	}
}

// FuzzControlWire writes arbitrary bytes to the control socket of a
// running daemon, with short timeouts: whatever comes back is HTTP, the
// API's own answers are JSON and never a 500, and the daemon still
// answers another client afterwards.
func FuzzControlWire(f *testing.F) {
	for i, s := range fuzzSeeds() {
		req, ok := fuzzRequest(s[0], s[1], s[2])
		if !ok || i%4 != 0 {
			continue
		}
		var b bytes.Buffer
		req.Write(&b)
		f.Add(b.Bytes())
	}
	f.Add([]byte("GET /v1/status HTTP/1.1\r\nHost: lastmiled\r\n\r\nGET /v1/jobs HTTP/1.1\r\nHost: x\r\n\r\n"))
	f.Add([]byte("POST /v1/jobs HTTP/1.1\r\nHost: lastmiled\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"spe\r\n0\r\n\r\n"))
	f.Add([]byte("GET /v1/status HTTP/1.0\r\n\r\n"))
	f.Add([]byte("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello"))
	f.Add([]byte("\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03"))
	sock := startControl(f, func(c *Config) {
		t := Duration(30 * time.Millisecond) // every input waits this out once
		c.Control.ReadHeaderTimeout, c.Control.BodyTimeout, c.Control.IdleTimeout = t, t, t
		c.Control.MaxBody, c.Control.MaxHeaderBytes, c.Limits.JobsPerUser = 4<<10, 4<<10, 2
	})
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		go c.Write(raw) // the server may stop reading at any point
		br := bufio.NewReader(c)
		for {
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				break
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			// The http.Server's own refusals (400, 431, 501, 505) are text.
			if resp.Header.Get("Content-Type") == "application/json" || resp.StatusCode == 500 {
				checkAnswer(t, "wire", resp.StatusCode, resp.Header, body)
			}
		}
		// A status request that stalls 30 ms before its headers (a loaded
		// machine) is closed like any slow client: only three in a row
		// failing mean the daemon stopped serving.
		for try := 0; ; try++ {
			code, body, _, err := ctlStatus(sock)
			if err == nil && code == 200 {
				break
			}
			if try == 2 {
				t.Fatalf("status after %q: %d %s %v", raw, code, body, err)
			}
		}
	})
}
