package main_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// rawRequest writes head on a new connection and then body, if not nil,
// chunked, until the daemon stops reading; it returns the answer and the number of
// body bytes the client got to write.
func rawRequest(t *testing.T, sock, head string, body io.Reader) (*http.Response, string, int64) {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	wrote := make(chan int64, 1)
	go func() { // the daemon may answer and close before all is written
		var n int64
		if _, err := io.WriteString(c, head); err == nil && body != nil {
			cw := httputil.NewChunkedWriter(c)
			n, _ = io.Copy(cw, body)
		}
		wrote <- n
	}()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	data, _ := io.ReadAll(resp.Body)
	c.Close() // ends the writer if the daemon left the connection open
	return resp, string(data), <-wrote
}

// TestControlBounds drives the real binary with its bounds set in the
// config file: a 100 MB body is refused without being read, the per-uid
// connection bound refuses a uid's extra connection while another uid is
// served, and the silent connections are closed after
// read_header_timeout.
func TestControlBounds(t *testing.T) {
	e := newEnv(t)
	os.WriteFile(filepath.Join(e.dir, "lastmiled.yaml"), []byte("control:\n  read_header_timeout: 2s\n  max_conns_per_uid: 4\n"), 0o644)
	e.start("-socket-mode", "0666")

	head := "POST /v1/jobs HTTP/1.1\r\nHost: lastmiled\r\nContent-Type: application/json\r\n"
	resp, body, _ := rawRequest(t, e.sock, head+"Content-Length: 104857600\r\n\r\n", nil)
	if resp.StatusCode != 413 || !strings.Contains(body, "request body over 1048576 bytes") || !strings.Contains(body, "control.max_body") {
		t.Errorf("100 MB Content-Length: %d %s, want 413 naming control.max_body", resp.StatusCode, body)
	}
	resp, body, wrote := rawRequest(t, e.sock, head+"Transfer-Encoding: chunked\r\n\r\n", io.MultiReader(strings.NewReader(`{"spec": "`), &chunked{left: 100 << 20}))
	if resp.StatusCode != 413 || !strings.Contains(body, "control.max_body") {
		t.Errorf("100 MB chunked: %d %s, want 413", resp.StatusCode, body)
	}
	if wrote > 16<<20 {
		t.Errorf("the daemon let the client write %d bytes of a body over 1 MiB", wrote)
	}
	resp, body, _ = rawRequest(t, e.sock, "GET /v1/status HTTP/1.1\r\nHost: lastmiled\r\nX-Big: "+strings.Repeat("h", 1<<20)+"\r\n\r\n", nil)
	if resp.StatusCode != 431 {
		t.Errorf("1 MiB header: %d %s, want 431", resp.StatusCode, body)
	}

	e.client.CloseIdleConnections()
	var silent []net.Conn
	if os.Geteuid() == 0 {
		silent = adminPastBound(t, e)
	} else {
		silent = ownBound(t, e)
	}
	for _, c := range silent {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if n, err := c.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("silent connection: read %d, %v; want it closed by the daemon (EOF)", n, err)
		}
	}
	if st, err := e.do("GET", "/v1/status", nil, nil); st != 200 {
		t.Errorf("after the silent connections were closed: %d %v", st, err)
	}
}

// ownBound fills the test's own uid's bound with silent connections and
// checks that its next connection is refused with a 429 naming the bound.
func ownBound(t *testing.T, e *env) []net.Conn {
	t.Helper()
	var silent []net.Conn
	// The connections above count until the daemon has seen them closed,
	// which it may not have yet when the silent ones connect: then one of
	// those is refused instead, and the test tries again.
	for try := 0; ; try++ {
		waitFor(t, "the daemon to close the other connections", 10*time.Second, func() bool {
			resp, body, _ := rawRequest(t, e.sock, "GET /v1/status HTTP/1.1\r\nHost: lastmiled\r\nConnection: close\r\n\r\n", nil)
			var st struct{ Control struct{ Connections int } }
			return resp.StatusCode == 200 && json.Unmarshal([]byte(body), &st) == nil && st.Control.Connections == 1
		})
		time.Sleep(100 * time.Millisecond) // the poll's own connection
		silent = dialSilent(t, e.sock, 4)
		time.Sleep(100 * time.Millisecond)
		resp, body, _ := rawRequest(t, e.sock, "GET /v1/status HTTP/1.1\r\nHost: lastmiled\r\n\r\n", nil)
		if resp.StatusCode == 429 && strings.Contains(body, "control.max_conns_per_uid") {
			break
		}
		if try == 3 {
			t.Fatalf("a uid's fifth connection: %d %s, want 429 naming control.max_conns_per_uid", resp.StatusCode, body)
		}
		for _, c := range silent {
			c.Close()
		}
	}
	return silent
}

// dialSilent opens n connections that send nothing, closed at the
// test's end.
func dialSilent(t *testing.T, sock string, n int) []net.Conn {
	t.Helper()
	var conns []net.Conn
	for range n {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		conns = append(conns, c)
	}
	return conns
}

// adminPastBound: uid 65534 holding max_conns_per_uid (4) silent
// connections is refused a fifth with a 429 naming the bound, and root,
// an admin, is held to no per-uid bound: with 4 silent connections of its
// own, its fifth request is answered.
func adminPastBound(t *testing.T, e *env) []net.Conn {
	t.Helper()
	f := startFlood(t, e, 4, 0)
	t.Cleanup(f.stop)
	if f.admitted != 4 {
		t.Fatalf("uid 65534's 4 silent connections: %d admitted", f.admitted)
	}
	if code, body := requestAsNobody(t, e, "GET", "/v1/status", ""); code != 429 ||
		!strings.Contains(body, "control.max_conns_per_uid") || !strings.Contains(body, "uid 65534 has 4") {
		t.Errorf("uid 65534's fifth connection: %d %s, want 429 naming control.max_conns_per_uid", code, body)
	}
	silent := dialSilent(t, e.sock, 4)
	start := time.Now()
	resp, body, _ := rawRequest(t, e.sock, "GET /v1/status HTTP/1.1\r\nHost: lastmiled\r\nConnection: close\r\n\r\n", nil)
	if resp.StatusCode != 200 || time.Since(start) > time.Second {
		t.Errorf("root's fifth connection: %d %s after %v, want 200 at once (admins have no per-uid bound)", resp.StatusCode, body, time.Since(start))
	}
	return silent
}

// chunked is a body of left bytes of a JSON string.
type chunked struct{ left int64 }

func (c *chunked) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, io.EOF
	}
	n := min(int64(len(p)), c.left)
	for i := range p[:n] {
		p[i] = 'a'
	}
	c.left -= n
	return int(n), nil
}

// requestAsNobody sends one request as uid 65534 (the test binary's
// "request" helper) and returns the status and body.
func requestAsNobody(t *testing.T, e *env, method, path, body string) (int, string) {
	t.Helper()
	code, rest, _ := requestAsNobodyTimed(t, e, method, path, body)
	return code, rest
}

// requestAsNobodyTimed is requestAsNobody that also returns how long the
// request took in the client, its process start excluded.
func requestAsNobodyTimed(t *testing.T, e *env, method, path, body string) (int, string, time.Duration) {
	t.Helper()
	client := filepath.Join(e.dir, "client")
	if _, err := os.Stat(client); err != nil {
		exe, _ := os.Executable()
		data, err := os.ReadFile(exe)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(client, data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(client, "-test.run=^$")
	cmd.Env = childEnv("LASTMILED_HELPER=request", "H_SOCK="+e.sock, "H_METHOD="+method, "H_PATH="+path, "H_BODY="+body)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("client as uid 65534: %v %s", err, out)
	}
	var code, ms int
	fmt.Sscanf(string(out), "%d %d", &code, &ms)
	_, rest, _ := strings.Cut(string(out), "\n")
	return code, rest, time.Duration(ms) * time.Millisecond
}

// TestJobsPerUser: a user at limits.jobs_per_user is refused a new job
// with a 429 that says what to do, may still join a job it has, and may
// submit again once it canceled one; root is exempt.
func TestJobsPerUser(t *testing.T) {
	e := newEnv(t)
	os.WriteFile(filepath.Join(e.dir, "lastmiled.yaml"), []byte("limits:\n  jobs_per_user: 2\n"), 0o644)
	e.start("-socket-mode", "0666")
	do := func(method, path, body string) (int, string) {
		if os.Geteuid() == 0 {
			return requestAsNobody(t, e, method, path, body)
		}
		var out json.RawMessage
		st, _ := e.do(method, path, body, &out)
		return st, string(out)
	}
	// The jobs read files as their submitter (uid 65534 when run as root):
	// a copy under the world-searchable env directory, since the checkout
	// may sit in a private one (mktemp -d).
	data := filepath.Join(e.dir, "data")
	os.MkdirAll(data, 0o755)
	copySmallData(t, data)
	submit := func(name string) string {
		b, _ := json.Marshal(map[string]any{"spec": specFor(name, data, "epochs: 0\n")})
		return string(b)
	}
	for _, name := range []string{"u1", "u2"} {
		if code, body := do("POST", "/v1/jobs", submit(name)); code != 201 {
			t.Fatalf("submit %s: %d %s", name, code, body)
		}
	}
	code, body := do("POST", "/v1/jobs", submit("u3"))
	for _, want := range []string{"holds 2 jobs", "limits.jobs_per_user = 2", "lastmile cancel", "u1 (", "u2 ("} {
		if code != 429 || !strings.Contains(body, want) {
			t.Errorf("third job: %d %s, want 429 saying %q", code, body, want)
		}
	}
	if code, body := do("POST", "/v1/jobs", submit("u1")); code != 200 {
		t.Errorf("joining a job of one's own at the bound: %d %s, want 200", code, body)
	}
	if os.Geteuid() == 0 {
		for _, name := range []string{"r1", "r2", "r3"} {
			e.submit(specFor(name, smallData, "epochs: 0\n"), nil) // root: exempt
		}
	}
	if code, body := do("DELETE", "/v1/jobs/u1", ""); code != 200 {
		t.Fatalf("cancel u1: %d %s", code, body)
	}
	if code, body := do("POST", "/v1/jobs", submit("u3")); code != 201 {
		t.Errorf("third job after canceling one: %d %s, want 201", code, body)
	}
}
