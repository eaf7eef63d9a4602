package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/lastmile/lastmile/shm"
)

// The tests run the real binary, built once here, with a temporary socket,
// state directory and shm directory each.
var bin string

func TestMain(m *testing.M) {
	if role := os.Getenv("LASTMILED_HELPER"); role != "" {
		os.Exit(helperMain(role))
	}
	tmp, err := os.MkdirTemp("", "lastmiled-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Chmod(tmp, 0o755) // a client running as another uid execs from here
	bin = filepath.Join(tmp, "lastmiled")
	args := []string{"build", "-o", bin}
	if raceBuild {
		args = append(args, "-race")
	}
	out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build lastmiled: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(tmp)
	os.Exit(code)
}

var smallData, _ = filepath.Abs("../../testdata/small")

// childEnv is the environment of a process the tests start (the daemon,
// and this binary as a helper client), with vars added. Under -race it
// turns off the race runtime's one-second sleep at exit (GORACE
// atexit_sleep_ms, default 1000), which every helper request and every
// daemon stop otherwise waits out: races are still reported while the
// process runs.
func childEnv(vars ...string) []string {
	env := os.Environ()
	if raceBuild {
		env = append(env, strings.TrimSpace("GORACE=atexit_sleep_ms=0 "+os.Getenv("GORACE")))
	}
	return append(env, vars...)
}

// syncBuffer is a bytes.Buffer safe for a process writing and a test reading.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// env is one daemon's directories; daemons started on it share them, so a
// restarted daemon finds its predecessor's state and rings.
type env struct {
	t                     *testing.T
	dir, sock, state, shm string
	args                  []string
	wrap                  []string // command the daemon runs under, if any
	cur                   *daemonProc
	log                   *syncBuffer
	client                *http.Client
}

type daemonProc struct {
	cmd  *exec.Cmd
	done chan error
}

func newEnv(t *testing.T, args ...string) *env {
	t.Helper()
	dir, err := os.MkdirTemp("", "lastmiled-env-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	e := &env{t: t, dir: dir, sock: filepath.Join(dir, "lastmiled.sock"), state: filepath.Join(dir, "state"),
		shm: filepath.Join(dir, "shm"), args: args, log: new(syncBuffer)}
	os.MkdirAll(e.shm, 0o755)
	e.client = &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", e.sock)
	}}, Timeout: 60 * time.Second}
	t.Cleanup(func() {
		if e.cur != nil {
			e.kill9()
		}
		if strings.Contains(e.log.String(), "WARNING: DATA RACE") {
			t.Errorf("lastmiled reported a data race")
		}
		if t.Failed() {
			t.Logf("daemon log:\n%s", e.log.String())
		}
		os.RemoveAll(dir)
	})
	return e
}

// testMetricsToken is the bearer token the tests' daemons want for the
// jobs' series on /metrics (scrape).
const testMetricsToken = "lastmile-test-token"

// metricsToken writes the token file of e's daemons and returns its path.
func (e *env) metricsToken() string {
	path := filepath.Join(e.dir, "metrics.token")
	if err := os.WriteFile(path, []byte(testMetricsToken+"\n"), 0o600); err != nil {
		e.t.Fatal(err)
	}
	os.Chmod(path, 0o600) // a test may have opened up everything in e.dir
	return path
}

// scrape returns the text of /metrics at addr, the jobs' series included.
func scrape(addr string) (string, error) {
	req, err := http.NewRequest("GET", "http://"+addr+"/metrics", nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+testMetricsToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET /metrics: %s: %s", resp.Status, b)
	}
	return string(b), err
}

// start runs lastmiled and waits until it answers.
func (e *env) start(extra ...string) {
	e.t.Helper()
	args := append([]string{"-config", filepath.Join(e.dir, "lastmiled.yaml"), "-socket", e.sock, "-state-dir", e.state,
		"-shm-dir", e.shm, "-metrics", "127.0.0.1:0", "-metrics-token-file", e.metricsToken(), "-workers", "2", "-log-level", "debug"}, e.args...)
	args = append(args, extra...)
	if _, err := os.Stat(filepath.Join(e.dir, "lastmiled.yaml")); err != nil {
		os.WriteFile(filepath.Join(e.dir, "lastmiled.yaml"), []byte("# test\n"), 0o644)
	}
	cmd := exec.Command(bin, args...)
	if len(e.wrap) > 0 { // e.g. ip netns exec NS: the daemon on another host
		cmd = exec.Command(e.wrap[0], append(append(e.wrap[1:], bin), args...)...)
	}
	cmd.Stdout, cmd.Stderr = e.log, e.log
	cmd.Env = childEnv("LASTMILE_SHM_DIR=" + e.shm)
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	p := &daemonProc{cmd: cmd, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait() }()
	e.cur = p
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-p.done:
			e.cur = nil
			e.t.Fatalf("lastmiled exited at start: %v\n%s", err, e.log.String())
		default:
		}
		if st, _ := e.do("GET", "/v1/status", nil, nil); st == 200 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.t.Fatalf("lastmiled did not answer\n%s", e.log.String())
}

// waitShmEmpty waits until the shm directory holds nothing (rings,
// arenas, temporary files), what naming what was awaited.
func (e *env) waitShmEmpty(what string, within time.Duration) {
	e.t.Helper()
	waitFor(e.t, what, within, func() bool {
		m, _ := filepath.Glob(filepath.Join(e.shm, "*"))
		return len(m) == 0
	})
}

func (e *env) kill9() {
	if e.cur == nil {
		return
	}
	e.cur.cmd.Process.Kill()
	<-e.cur.done
	e.cur = nil
}

// signal sends sig and returns the channel the exit arrives on.
func (e *env) signal(sig syscall.Signal) chan error {
	e.cur.cmd.Process.Signal(sig)
	return e.cur.done
}

// do sends a request; body is marshaled unless it is a string or []byte.
// It returns the status and decodes the response into out (if not nil).
func (e *env) do(method, path string, body, out any) (int, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, _ := json.Marshal(b)
		rd = bytes.NewReader(data)
	}
	req, _ := http.NewRequest(method, "http://lastmiled"+path, rd)
	resp, err := e.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("decode %s: %w", data, err)
		}
	}
	return resp.StatusCode, nil
}

type cursor struct {
	Epoch uint64 `json:"epoch"`
	Batch uint64 `json:"batch"`
}

type jobJSON struct {
	ID, Name, State, Error string
	Owner                  uint32
	WorldSize              int    `json:"world_size"`
	Hosts, Host            int    // one host's share of a world on several
	PlanDigest             string `json:"plan_digest"`
	Memory                 int64  `json:"memory_bytes"` // its charge against the memory budget
	Restarts               int    `json:"generation_restarts"`
	Rings                  []struct {
		Rank             int
		Name             string
		Generation       uint64
		Head, Tail       uint64
		ConsumerAttached bool `json:"consumer_attached"`
		Next             *cursor
		State            string
	}
	Progress struct {
		Rows        int64
		Batches     int64
		UnitsDone   int64 `json:"units_done"`
		RowsDeleted int64 `json:"rows_deleted"`
		ArenaUnits  int64 `json:"arena_units"`
		ArenaToHeap int64 `json:"arena_units_to_heap"`
	}
}

type attachJSON struct {
	Job, Ring, Dir string
	Rank           int
	Generation     uint64
	Next           *cursor
	Restarted      bool
}

type errJSON struct {
	Error  string
	Fields []struct {
		File  string
		Line  int
		Field string
		Msg   string
	}
}

// submit posts a spec and returns the job.
func (e *env) submit(specText string, extra map[string]any) jobJSON {
	e.t.Helper()
	body := map[string]any{"spec": specText}
	for k, v := range extra {
		body[k] = v
	}
	var j jobJSON
	st, err := e.do("POST", "/v1/jobs", body, &j)
	if err != nil || st != 201 && st != 200 {
		e.t.Fatalf("submit: %d %v", st, err)
	}
	return j
}

func (e *env) job(id string) jobJSON {
	e.t.Helper()
	var j jobJSON
	if st, err := e.do("GET", "/v1/jobs/"+id, nil, &j); err != nil || st != 200 {
		e.t.Fatalf("get job: %d %v", st, err)
	}
	return j
}

// waitJob polls until the job's state is one of states.
func (e *env) waitJob(id string, timeout time.Duration, states ...string) jobJSON {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		j := e.job(id)
		for _, s := range states {
			if j.State == s {
				return j
			}
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("job %s is %s (%s), want %v", id, j.State, j.Error, states)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// copySmallData copies testdata/small's files into dir, readable by
// every uid: jobs read their files as their submitter, and the checkout
// may sit in a private directory (mktemp -d).
func copySmallData(t *testing.T, dir string) {
	t.Helper()
	for _, name := range []string{"part-00000.parquet", "part-00001.parquet", "part-00002.parquet"} {
		b, err := os.ReadFile(filepath.Join(smallData, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func specFor(name, inputs string, extra string) string {
	return fmt.Sprintf("name: %s\ninputs: [%s]\ncolumns: [row_id]\nbatch: {size: 100}\nring: {slots: 4}\ndecode: {max_unit_rows: 700}\n%s", name, inputs, extra)
}

// reader is a trainer rank read by the test: it attaches through the API,
// reads its ring with the Go consumer, and when the producer dies (the
// daemon was killed) closes, attaches again with its cursor and goes on.
type reader struct {
	e         *env
	job       string
	rank      int
	delay     time.Duration
	rows      []int64
	cursors   []shm.Cursor
	gens      []uint64
	reattach  int
	restarted bool
	mu        sync.Mutex
}

// startReaders runs each of readers in a goroutine of its own, as trainer
// ranks run; the function it returns waits for all of them and gives the
// first error.
func startReaders(ctx context.Context, readers []*reader) (wait func() error) {
	errs := make(chan error, len(readers))
	for _, r := range readers {
		go func() { errs <- r.run(ctx) }()
	}
	return func() error {
		var first error
		for range readers {
			if err := <-errs; err != nil && first == nil {
				first = err
			}
		}
		return first
	}
}

func (r *reader) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.cursors)
}

func (r *reader) run(ctx context.Context) error {
	for {
		body := map[string]any{"rank": r.rank}
		r.mu.Lock()
		if n := len(r.cursors); n > 0 {
			last := r.cursors[n-1]
			next := cursor{last.Epoch, last.BatchIndex + 1}
			if last.Flags&shm.FlagLastInEpoch != 0 {
				next = cursor{last.Epoch + 1, 0}
			}
			body["cursor"] = next
		}
		r.mu.Unlock()
		var a attachJSON
		st, err := r.e.do("POST", "/v1/jobs/"+r.job+"/attach", body, &a)
		if err != nil || st == 503 {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			time.Sleep(20 * time.Millisecond) // the daemon is restarting
			continue
		}
		if st != 200 {
			return fmt.Errorf("rank %d attach: status %d", r.rank, st)
		}
		r.mu.Lock()
		r.gens = append(r.gens, a.Generation)
		r.restarted = r.restarted || a.Restarted
		r.mu.Unlock()
		c, err := shm.Open(a.Dir, a.Ring)
		if err != nil {
			return fmt.Errorf("rank %d open: %w", r.rank, err)
		}
		err = r.read(ctx, c)
		c.Close()
		if errors.Is(err, shm.ErrProducerDied) {
			r.mu.Lock()
			r.reattach++
			r.mu.Unlock()
			continue
		}
		return err
	}
}

func (r *reader) read(ctx context.Context, c *shm.Consumer) error {
	for {
		if err := ctx.Err(); err != nil { // Next serves a ready batch even after ctx ends
			return err
		}
		b, err := c.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		r.mu.Lock()
		r.rows = append(r.rows, rowIDs(b)...)
		r.cursors = append(r.cursors, b.Cursor)
		r.mu.Unlock()
		if r.delay > 0 {
			time.Sleep(r.delay)
		}
	}
}

func rowIDs(b *shm.Batch) []int64 {
	t := b.Tensor("row_id", shm.RoleDense)
	v := unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(t.Data))), b.Rows)
	return append([]int64(nil), v...)
}

// checkExactlyOnce checks that rows hold every id of [0, n) once.
func checkExactlyOnce(t *testing.T, what string, rows []int64, n int) {
	t.Helper()
	seen := make([]int, n)
	for _, id := range rows {
		if id < 0 || id >= int64(n) {
			t.Fatalf("%s: row id %d out of range", what, id)
		}
		seen[id]++
	}
	var lost, dup int
	for _, c := range seen {
		switch {
		case c == 0:
			lost++
		case c > 1:
			dup += c - 1
		}
	}
	if lost > 0 || dup > 0 {
		t.Fatalf("%s: %d rows lost, %d repeated (of %d read, want %d each once)", what, lost, dup, len(rows), n)
	}
}

func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
