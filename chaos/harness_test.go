package chaos_test

import (
	"context"
	"encoding/json"
	"flag"
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

	"github.com/lastmile/lastmile/datagen"
)

// The suite runs the real lastmiled, built once in TestMain (with the race
// detector when the test binary has it), and real Python trainers.
var (
	bin       string
	python    = pythonPath()
	pyroot, _ = filepath.Abs("../python")
	script, _ = filepath.Abs("testdata/trainer.py")
	keep      = flag.Bool("chaos.keep", false, "keep the runs' directories (daemon and trainer logs) for inspection")
)

func pythonPath() string {
	if p := os.Getenv("LASTMILE_PYTHON"); p != "" {
		return p
	}
	return "/usr/bin/python3"
}

func TestMain(m *testing.M) {
	flag.Parse()
	tmp, err := os.MkdirTemp("", "lastmile-chaos-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(tmp, "lastmiled")
	if b := os.Getenv("LASTMILED"); b != "" { // a binary built elsewhere
		bin = b
	} else if err := build(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(tmp)
	os.Exit(code)
}

func build() error {
	args := []string{"build", "-o", bin}
	if raceBuild && !soakRequested() {
		args = append(args, "-race")
	}
	out, err := exec.Command("go", append(args, "../cmd/lastmiled")...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("build lastmiled: %v\n%s", err, out)
	}
	return nil
}

// needPython skips the test when Python lacks numpy, unless `make test`
// asked for it (LASTMILE_REQUIRE_PYTHON), where that is a failure.
func needPython(t *testing.T) {
	t.Helper()
	if err := exec.Command(python, "-c", "import numpy").Run(); err != nil {
		msg := fmt.Sprintf("%s cannot import numpy (%v): run `make pydeps`", python, err)
		if os.Getenv("LASTMILE_REQUIRE_PYTHON") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
}

// daemon is one lastmiled over a directory: its socket, state directory and
// shm directory survive its restarts, as they do under systemd.
type daemon struct {
	t                     *testing.T
	dir, sock, state, shm string
	config                string // lastmiled.yaml ("": none)
	cmd                   *exec.Cmd
	done                  chan struct{}
	log                   *os.File
	client                *http.Client
}

func newDaemon(t *testing.T, dir, shmDir string) *daemon {
	d := &daemon{t: t, dir: dir, sock: filepath.Join(dir, "d.sock"), state: filepath.Join(dir, "state"), shm: shmDir}
	os.MkdirAll(d.state, 0o755)
	os.MkdirAll(d.shm, 0o755)
	var err error
	if d.log, err = os.OpenFile(filepath.Join(dir, "lastmiled.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err != nil {
		t.Fatal(err)
	}
	d.client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", d.sock)
		}}}
	t.Cleanup(func() {
		d.kill9()
		d.log.Close()
		if strings.Contains(d.logText(), "WARNING: DATA RACE") {
			t.Errorf("lastmiled reported a data race (log in %s)", d.log.Name())
		}
	})
	return d
}

// start runs lastmiled and waits until it answers.
func (d *daemon) start() {
	d.t.Helper()
	d.spawn()
	d.ready()
}

// spawn runs lastmiled without waiting for it.
func (d *daemon) spawn() {
	d.t.Helper()
	config := d.config
	if config == "" {
		config = "/dev/null"
	}
	cmd := exec.Command(bin, "-config", config, "-socket", d.sock, "-state-dir", d.state, "-shm-dir", d.shm,
		"-metrics", "off", "-workers", "2", "-grace", "120s", "-log-level", "info")
	cmd.Stdout, cmd.Stderr = d.log, d.log
	// The race runtime sleeps a second at exit (GORACE atexit_sleep_ms);
	// a drained daemon's stop would wait it out.
	cmd.Env = append(os.Environ(), strings.TrimSpace("GORACE=atexit_sleep_ms=0 "+os.Getenv("GORACE")))
	if err := cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	d.cmd, d.done = cmd, make(chan struct{})
	go func(done chan struct{}) { cmd.Wait(); close(done) }(d.done)
}

// ready waits until the daemon answers.
func (d *daemon) ready() {
	d.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-d.done:
			d.t.Fatalf("lastmiled exited at start:\n%s", d.logText())
		default:
		}
		if resp, err := d.client.Get("http://lastmiled/v1/status"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	d.t.Fatalf("lastmiled did not answer in 60s:\n%s", d.logText())
}

// kill9 kills the daemon with SIGKILL (continuing it first if stopped, so
// that it dies at once) and waits for it.
func (d *daemon) kill9() {
	if d.cmd == nil {
		return
	}
	d.cmd.Process.Kill()
	d.cmd.Process.Signal(syscall.SIGCONT)
	<-d.done
	d.cmd = nil
}

func (d *daemon) pid() int { return d.cmd.Process.Pid }

func (d *daemon) logText() string {
	b, _ := os.ReadFile(filepath.Join(d.dir, "lastmiled.log"))
	return string(b)
}

// job returns the state and error of a job, or "" when the daemon does not
// answer.
func (d *daemon) job(id string) (state, msg string) {
	resp, err := d.client.Get("http://lastmiled/v1/jobs/" + id)
	if err != nil {
		return "", ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var j struct{ State, Error string }
	json.Unmarshal(b, &j)
	return j.State, j.Error
}

// genData writes rows of datagen's table in files, with the columns the
// trainer reads, and returns its directory and generator.
func genData(t *testing.T, dir string, rows int64, files int, compression string, seed uint64) (string, *datagen.Generator) {
	t.Helper()
	cfg := datagen.DefaultConfig()
	cfg.Rows, cfg.Files, cfg.Compression, cfg.Seed = rows, files, compression, seed
	cfg.RowGroupRows = max(rows/int64(files)/4, 1)
	cfg.Dense, cfg.Cats, cfg.Seqs = 1, 1, 1
	cfg.PageBytes = 16 << 10
	data := filepath.Join(dir, "data")
	if _, err := datagen.Write(context.Background(), data, cfg); err != nil {
		t.Fatal(err)
	}
	return data, datagen.NewGenerator(cfg)
}

// workDir is a run's directory, removed after the test unless it failed or
// -chaos.keep was given (then its path is logged).
func workDir(t *testing.T, name string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "lastmile-"+name+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if *keep || t.Failed() {
			t.Logf("kept %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	return dir
}
