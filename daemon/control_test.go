package daemon

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestControlConfig(t *testing.T) {
	def := DefaultConfig()
	if c := def.Control; c.ReadHeaderTimeout.D() >= time.Minute || c.IdleTimeout.D() >= time.Minute || c.BodyTimeout.D() >= time.Minute {
		t.Errorf("default timeouts %+v: a silent client must not hold a connection for a minute", c)
	}
	c, err := ParseConfig(strings.NewReader("control: {max_body: 64KiB, max_header_bytes: 8KiB, read_header_timeout: 2s, body_timeout: 3s, idle_timeout: 4s, max_conns: 10, max_conns_per_uid: 5, fd_reserve: 32}\nlimits: {jobs_per_user: 3, memory_per_user: 16GiB}\n"))
	if err != nil || c.Validate() != nil {
		t.Fatalf("%v %v", err, c.Validate())
	}
	want := ControlConfig{MaxBody: 64 << 10, MaxHeaderBytes: 8 << 10, ReadHeaderTimeout: Duration(2 * time.Second),
		BodyTimeout: Duration(3 * time.Second), IdleTimeout: Duration(4 * time.Second), MaxConns: 10, MaxConnsPerUID: 5, FDReserve: 32}
	if c.Control != want || c.Limits != (LimitsConfig{JobsPerUser: 3, MemoryPerUser: 16 << 30}) {
		t.Errorf("parsed %+v %+v", c.Control, c.Limits)
	}
	for _, tc := range []struct{ yaml, field string }{
		{"control: {max_body: 100}\n", "control.max_body"},
		{"control: {max_body: 1GiB}\n", "control.max_body"},
		{"control: {max_header_bytes: 1}\n", "control.max_header_bytes"},
		{"control: {read_header_timeout: 0s}\n", "control.read_header_timeout"},
		{"control: {body_timeout: 2h}\n", "control.body_timeout"},
		{"control: {idle_timeout: 1ms}\n", "control.idle_timeout"},
		{"control: {max_conns: 0}\n", "control.max_conns"},
		{"control: {max_conns: 4, max_conns_per_uid: 5}\n", "control.max_conns_per_uid"},
		{"control: {fd_reserve: 8}\n", "control.fd_reserve"},
		{"limits: {jobs_per_user: -1}\n", "limits.jobs_per_user"},
	} {
		c, err := ParseConfig(strings.NewReader(tc.yaml))
		if err == nil {
			err = c.Validate()
		}
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("%q: %v, want an error naming %s", tc.yaml, err, tc.field)
		}
	}
	// What only a restart applies is named, and kept.
	old := DefaultConfig()
	c = old
	c.Control.IdleTimeout, c.Control.MaxBody = Duration(time.Second), 2<<20
	if names := controlRestart(old, &c); len(names) != 1 || names[0] != "control.idle_timeout" || c.Control.IdleTimeout != old.Control.IdleTimeout || c.Control.MaxBody != 2<<20 {
		t.Errorf("controlRestart: %v, %+v", names, c.Control)
	}
}

// countingReader is an endless body that counts what was read of it.
type countingReader struct {
	n    atomic.Int64
	head string
}

func (r *countingReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	if n := r.n.Load(); n < int64(len(r.head)) {
		copy(p, r.head[n:])
	}
	r.n.Add(int64(len(p)))
	return len(p), nil
}

// TestBodyBounds: a body over control.max_body is a 413 naming the limit;
// one that says its length up front is refused before any of it is read,
// one that does not after at most the limit.
func TestBodyBounds(t *testing.T) {
	for _, tc := range []struct {
		name     string
		maxBody  Bytes
		length   int64 // Content-Length; -1: not given (chunked)
		path     string
		status   int
		readMost int64
	}{
		{"100MB said", 1 << 20, 100 << 20, "/v1/jobs", 413, 0},
		{"100MB chunked", 1 << 20, -1, "/v1/jobs", 413, 1<<20 + 64<<10},
		{"100MB chunked attach", 1 << 20, -1, "/v1/jobs/abc123def456/attach", 413, 1<<20 + 64<<10},
		{"small limit said", 4 << 10, 5 << 10, "/v1/jobs", 413, 0},
		{"small limit chunked", 4 << 10, -1, "/v1/jobs", 413, 8 << 10},
		{"100MB said to a GET", 1 << 20, 100 << 20, "/v1/status", 413, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := apiDaemon(t, func(c *Config) { c.Control.MaxBody = tc.maxBody }).api()
			body := &countingReader{head: `{"spec": "`}
			req := httptest.NewRequest("POST", "http://lastmiled"+tc.path, body)
			if tc.path == "/v1/status" {
				req.Method = "GET"
			}
			req.ContentLength = tc.length
			start := time.Now()
			a := serveAs(h, 1000, req)
			want := fmt.Sprintf("request body over %d bytes", tc.maxBody)
			if a.status != tc.status || !strings.Contains(a.Error, want) || !strings.Contains(a.Error, "control.max_body") {
				t.Fatalf("%d %q, want %d saying %q and control.max_body", a.status, a.Error, tc.status, want)
			}
			if n := body.n.Load(); n > tc.readMost {
				t.Errorf("read %d bytes of the body, want at most %d", n, tc.readMost)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
	// Just under the limit is read and judged on its content.
	h := apiDaemon(t, nil).api()
	spec := "# " + strings.Repeat("x", 1<<20-100) + "\nbatch: {size: 1}\n"
	req := httptest.NewRequest("POST", "http://lastmiled/v1/jobs", strings.NewReader(fmt.Sprintf(`{"spec": %q}`, spec)))
	if a := serveAs(h, 1000, req); a.status != 400 || !strings.Contains(a.Error, "inputs") {
		t.Errorf("a body under the limit: %d %q, want the spec's error", a.status, a.Error)
	}
}

// TestConnLimiterAdmit: the per-uid bound is checked before the total, a
// peer without credentials counts as its own uid, an admin (uid 0 here)
// has no per-uid bound and goes past the total, the descriptor reserve
// refuses non-admins first, and release frees.
func TestConnLimiterAdmit(t *testing.T) {
	open := 0
	lim := &connLimiter{limits: func() ControlConfig { return ControlConfig{MaxConns: 4, MaxConnsPerUID: 2, FDReserve: 100} },
		admin: func(p peer) bool { return p.uid == 0 }, byUID: map[int64]int{},
		fds: fdGauge{count: func() (int, int) { return open, 1000 }}}
	u := func(uid uint32) peer { return peer{uid: uid, ok: true} }
	steps := []struct {
		p      peer
		open   int // descriptors open
		status int
		want   string
	}{
		{u(1000), 10, 0, ""},
		{u(1000), 10, 0, ""},
		{u(1000), 10, 429, "uid 1000 has 2 control connections open"},
		{u(1001), 10, 0, ""},
		{peer{}, 10, 0, ""},
		{u(1001), 10, 503, "control.max_conns"},
		{u(0), 10, 0, ""}, // an admin, past max_conns
		{u(0), 10, 0, ""}, // and past max_conns_per_uid
		{u(1002), 899, 503, "control.max_conns"},
		{u(0), 899, 0, ""}, // an admin may use half the reserve
		{u(0), 950, 503, "keeps 100 for its own work (config control.fd_reserve)"},
	}
	for i, s := range steps {
		open = s.open
		lim.fds.at = time.Time{} // count again
		status, msg := lim.admit(s.p)
		if status != s.status || !strings.Contains(msg, s.want) {
			t.Errorf("step %d (%+v): %d %q, want %d %q", i, s.p, status, msg, s.status, s.want)
		}
	}
	for _, p := range []peer{u(0), u(0), u(0), u(1001)} {
		lim.release(p)
	}
	open = 950
	lim.fds.at = time.Time{}
	if status, msg := lim.admit(u(1003)); status != 503 || !strings.Contains(msg, "control.fd_reserve") {
		t.Errorf("a user into the reserve: %d %s, want 503 naming control.fd_reserve", status, msg)
	}
	open = 10
	lim.fds.at = time.Time{}
	lim.release(u(1000))
	if status, msg := lim.admit(u(1000)); status != 0 {
		t.Errorf("after a release: %d %s", status, msg)
	}
	for _, p := range []peer{u(1000), u(1000), {}} {
		lim.release(p)
	}
	if lim.total != 0 || len(lim.byUID) != 0 {
		t.Errorf("after releasing all: total %d, by uid %v", lim.total, lim.byUID)
	}
}

// startControl starts a daemon in-process on a socket of its own.
func startControl(t testing.TB, mod func(*Config)) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "lmctl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	cfg := DefaultConfig()
	cfg.StateDir, cfg.ShmDir, cfg.Socket, cfg.Metrics, cfg.Workers = filepath.Join(dir, "state"), filepath.Join(dir, "shm"), filepath.Join(dir, "s"), "off", 1
	mod(&cfg)
	d, err := New(cfg, nil, nil, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return cfg.Socket
}

// ctlStatus sends GET /v1/status on a new connection and returns the status
// code, the body and how long it took.
func ctlStatus(sock string) (int, string, time.Duration, error) {
	start := time.Now()
	c, err := net.DialTimeout("unix", sock, 5*time.Second)
	if err != nil {
		return 0, "", 0, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "GET /v1/status HTTP/1.1\r\nHost: lastmiled\r\nConnection: close\r\n\r\n"); err != nil {
		return 0, "", 0, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, "", 0, err
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), time.Since(start), nil
}

// slowConn is a client that misbehaves; closed is when the server closed
// it (a read returned), answer what the server wrote first.
type slowConn struct {
	kind   string
	opened time.Time
	closed chan time.Duration
	answer string
}

// openSlow connects and then: "silent" sends nothing; "header" dribbles a
// request's headers, "body" its body, a byte every 50 ms; "idle" sends one
// request, reads the answer and then sends nothing.
func openSlow(t *testing.T, sock, kind string) *slowConn {
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	s := &slowConn{kind: kind, opened: time.Now(), closed: make(chan time.Duration, 1)}
	var drip string
	switch kind {
	case "header":
		drip = "GET /v1/status HTTP/1.1\r\nHost: lastmiled\r\nX-Slow: " + strings.Repeat("z", 4096)
	case "body":
		io.WriteString(c, "POST /v1/jobs HTTP/1.1\r\nHost: lastmiled\r\nContent-Length: 4000\r\n\r\n")
		drip = `{"spec": "` + strings.Repeat("z", 3000)
	case "idle":
		io.WriteString(c, "GET /v1/status HTTP/1.1\r\nHost: lastmiled\r\n\r\n")
	}
	go func() {
		for i := 0; i < len(drip); i++ {
			time.Sleep(50 * time.Millisecond)
			if _, err := c.Write([]byte{drip[i]}); err != nil {
				return
			}
		}
	}()
	go func() {
		br := bufio.NewReader(c)
		if kind == "idle" || kind == "body" {
			if resp, err := http.ReadResponse(br, nil); err == nil {
				b, _ := io.ReadAll(resp.Body)
				s.answer = fmt.Sprintf("%d %s", resp.StatusCode, b)
			}
		}
		io.Copy(io.Discard, br)
		s.closed <- time.Since(s.opened)
	}()
	return s
}

// TestSlowClients: clients that connect and send nothing, dribble headers
// or a body, or keep an idle connection, are closed by the server after
// the configured timeouts, while another client's requests are answered
// at once throughout.
func TestSlowClients(t *testing.T) {
	const timeout = 800 * time.Millisecond
	sock := startControl(t, func(c *Config) {
		c.Control.ReadHeaderTimeout, c.Control.BodyTimeout, c.Control.IdleTimeout = Duration(timeout), Duration(timeout), Duration(timeout)
	})
	var slow []*slowConn
	for _, k := range []struct {
		kind string
		n    int
	}{{"silent", 40}, {"header", 5}, {"body", 5}, {"idle", 5}} {
		for range k.n {
			slow = append(slow, openSlow(t, sock, k.kind))
		}
	}
	// Another client is served at once while they hold their connections.
	var worst time.Duration
	for end := time.Now().Add(timeout / 2); time.Now().Before(end); {
		code, body, took, err := ctlStatus(sock)
		if err != nil || code != 200 {
			t.Fatalf("status while slow clients are connected: %d %s %v", code, body, err)
		}
		worst = max(worst, took)
		time.Sleep(10 * time.Millisecond)
	}
	if worst > 500*time.Millisecond {
		t.Errorf("a status request took %v while slow clients were connected", worst)
	}
	for _, s := range slow {
		select {
		case d := <-s.closed:
			if d < timeout*9/10 {
				t.Errorf("%s connection closed after %v, before the %v timeout", s.kind, d, timeout)
			}
			if s.kind == "body" && !strings.HasPrefix(s.answer, "400 ") {
				t.Errorf("slow body answered %q, want a 400", s.answer)
			}
		case <-time.After(timeout + 5*time.Second):
			t.Fatalf("%s connection still open %v after it connected; the timeout is %v", s.kind, time.Since(s.opened), timeout)
		}
	}
}

// TestConnBound: a uid holding control.max_conns_per_uid connections gets
// a 429 that names the bound for the next one, and the silent connections
// holding the places are closed after read_header_timeout, freeing them.
func TestConnBound(t *testing.T) {
	const timeout = time.Second
	sock := startControl(t, func(c *Config) {
		c.Control.ReadHeaderTimeout, c.Control.MaxConnsPerUID = Duration(timeout), 4
	})
	var silent []*slowConn
	for range 4 {
		silent = append(silent, openSlow(t, sock, "silent"))
	}
	time.Sleep(50 * time.Millisecond) // accepted
	code, body, took, err := ctlStatus(sock)
	switch {
	case os.Geteuid() == 0: // root is an admin, held to no per-uid bound (cmd/lastmiled's TestControlBounds checks another uid)
		if err != nil || code != 200 {
			t.Fatalf("fifth connection of root: %d %s %v, want 200 (admins have no per-uid bound)", code, body, err)
		}
	case err != nil || code != 429 || !strings.Contains(body, "control.max_conns_per_uid") || !strings.Contains(body, "has 4 control connections open"):
		t.Fatalf("fifth connection of a uid: %d %s %v, want 429 naming control.max_conns_per_uid", code, body, err)
	}
	if took > time.Second {
		t.Errorf("the refusal took %v", took)
	}
	for _, s := range silent {
		<-s.closed
	}
	if code, body, _, err := ctlStatus(sock); err != nil || code != 200 {
		t.Fatalf("after the silent connections were closed: %d %s %v", code, body, err)
	}
}
