package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestControlFlood is a hostile local user against a daemon with a low
// open-file limit (256): hundreds of connections that send one request and
// stay open, and more that trickle a body a byte every half second, while
// a job runs. Status and submit still answer within a second, the job's
// state is persisted throughout, and the daemon closes every connection
// by its deadlines.
func TestControlFlood(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the flood runs as another uid (65534), the test's requests as an admin")
	}
	e := newEnv(t)
	os.WriteFile(filepath.Join(e.dir, "lastmiled.yaml"), []byte(
		"control:\n  idle_timeout: 4s\n  body_timeout: 4s\n  read_header_timeout: 2s\n"), 0o644)
	e.wrap = []string{"sh", "-c", `ulimit -n 256 && exec "$0" "$@"`}
	e.start("-socket-mode", "0666")

	j := e.submit(specFor("flooded", smallData, "epochs: 0\n"), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := &reader{e: e, job: j.ID, rank: 0, delay: 5 * time.Millisecond}
	done := make(chan error, 1)
	go func() { done <- r.run(ctx) }()
	waitFor(t, "10 batches read", 20*time.Second, func() bool { return r.count() >= 10 })

	flood := startFlood(t, e, 250, 50)
	defer flood.stop()
	if flood.admitted == 0 || flood.refused == 0 {
		t.Errorf("flood: %d connections admitted, %d refused; want some of each (the fd reserve at work)", flood.admitted, flood.refused)
	}
	// The flooding uid's own request is answered at once, with a refusal
	// that names the bound while its connections are held.
	code, body, took := requestAsNobodyTimed(t, e, "GET", "/v1/status", "")
	if took > time.Second || code == 200 || !strings.Contains(body, "control.") {
		t.Errorf("the flooding uid's own request: %d %s after %v, want a refusal naming the bound within 1s", code, body, took)
	}
	record := filepath.Join(e.state, "jobs", j.ID+".json")
	before, _ := os.ReadFile(record)
	timed := func(what string, f func() (int, error), want int) {
		start := time.Now()
		st, err := f()
		if took := time.Since(start); st != want || took > time.Second {
			t.Errorf("%s during the flood: status %d (%v) after %v, want %d within 1s", what, st, err, took, want)
		}
	}
	deadline := time.Now().Add(8 * time.Second)
	for time.Now().Before(deadline) {
		timed("status", func() (int, error) { return e.do("GET", "/v1/status", nil, nil) }, 200)
		timed("job status", func() (int, error) { return e.do("GET", "/v1/jobs/"+j.ID, nil, nil) }, 200)
		time.Sleep(500 * time.Millisecond)
	}
	b, _ := json.Marshal(map[string]any{"spec": specFor("during", smallData, "")})
	timed("submit", func() (int, error) { return e.do("POST", "/v1/jobs", b, nil) }, 201)
	after, _ := os.ReadFile(record)
	if string(before) == string(after) {
		t.Errorf("the job's state record did not change during 8 s of flood (it is persisted every 5 s)")
	}
	var view struct{ Unsaved string }
	e.do("GET", "/v1/jobs/"+j.ID, nil, &view)
	if view.Unsaved != "" {
		t.Errorf("job status says %q", view.Unsaved)
	}
	res := flood.result(t)
	t.Logf("flood: %d admitted, %d refused; the last connection closed %s after the flood began", flood.admitted, flood.refused, res.Held)
	if res.Open != 0 {
		t.Errorf("%d of the flood's connections still open %v after it started: the deadlines did not close them", res.Open, res.Held)
	}
	for _, bad := range []string{"too many open files", "persist job state"} {
		if strings.Contains(e.log.String(), bad) {
			t.Errorf("the daemon logged %q", bad)
		}
	}
	cancel()
	<-done
}

type flood struct {
	cmd      *exec.Cmd
	out      *bufio.Reader
	admitted int
	refused  int
}

type floodResult struct {
	Open int
	Held string
}

// startFlood runs the flood helper as uid 65534 and waits until its
// connections are open.
func startFlood(t *testing.T, e *env, idle, trickle int) *flood {
	t.Helper()
	requestAsNobody(t, e, "GET", "/v1/status", "") // copies the test binary where 65534 can run it
	cmd := exec.Command(filepath.Join(e.dir, "client"), "-test.run=^$")
	cmd.Env = childEnv("LASTMILED_HELPER=flood", "H_SOCK="+e.sock,
		"H_IDLE="+strconv.Itoa(idle), "H_TRICKLE="+strconv.Itoa(trickle))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	cmd.Stderr = os.Stderr
	pipe, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f := &flood{cmd: cmd, out: bufio.NewReader(pipe)}
	line, err := f.out.ReadString('\n')
	if _, serr := fmt.Sscanf(line, "ready %d %d", &f.admitted, &f.refused); err != nil || serr != nil {
		t.Fatalf("flood helper: %q %v", line, err)
	}
	return f
}

func (f *flood) result(t *testing.T) floodResult {
	t.Helper()
	var r floodResult
	line, err := f.out.ReadString('\n')
	if err := errorsJoin(err, json.Unmarshal([]byte(line), &r)); err != nil {
		t.Fatalf("flood helper result %q: %v", line, err)
	}
	return r
}

func (f *flood) stop() {
	f.cmd.Process.Kill()
	f.cmd.Wait()
}

func errorsJoin(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// floodHelper opens H_IDLE connections that each send one status request
// and then stay open, and H_TRICKLE that send a body's first bytes a byte
// every half second. It prints "ready ADMITTED REFUSED", then, once every
// connection is closed or 15 s have passed, a JSON line saying how many are
// still open and for how long the last one closed was held.
func floodHelper() int {
	sock := os.Getenv("H_SOCK")
	idle, _ := strconv.Atoi(os.Getenv("H_IDLE"))
	trickle, _ := strconv.Atoi(os.Getenv("H_TRICKLE"))
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted, refused, open := 0, 0, 0
	var held time.Duration
	start := time.Now()
	watch := func(c net.Conn, rd *bufio.Reader) {
		mu.Lock()
		admitted++
		open++
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.SetReadDeadline(time.Now().Add(15 * time.Second))
			for {
				if _, err := rd.ReadByte(); err != nil {
					break
				}
			}
			mu.Lock()
			open--
			held = max(held, time.Since(start))
			mu.Unlock()
		}()
	}
	for i := 0; i < idle+trickle; i++ {
		c, err := net.Dial("unix", sock)
		if err != nil {
			refused++
			continue
		}
		rd := bufio.NewReader(c)
		if i >= idle {
			fmt.Fprintf(c, "POST /v1/jobs HTTP/1.1\r\nHost: lastmiled\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
			go func() {
				for c.SetWriteDeadline(time.Now().Add(time.Second)) == nil {
					time.Sleep(500 * time.Millisecond)
					if _, err := c.Write([]byte(" ")); err != nil {
						return
					}
				}
			}()
			watch(c, rd)
			continue
		}
		fmt.Fprintf(c, "GET /v1/status HTTP/1.1\r\nHost: lastmiled\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(rd, nil)
		if err != nil || resp.StatusCode != 200 {
			refused++
			c.Close()
			continue
		}
		resp.Body.Close()
		watch(c, rd)
	}
	mu.Lock()
	fmt.Printf("ready %d %d\n", admitted, refused)
	mu.Unlock()
	wg.Wait()
	out, _ := json.Marshal(floodResult{Open: open, Held: held.Round(time.Millisecond).String()})
	fmt.Printf("%s\n", out)
	return 0
}
