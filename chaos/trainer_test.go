package chaos_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// trainer is one rank's Python process (testdata/trainer.py). Killed, it
// is started again on the same directory and resumes from its saved state.
type trainer struct {
	t     *testing.T
	rank  int
	cfg   []byte
	dir   string
	cmd   *exec.Cmd
	done  chan struct{}
	log   *os.File
	lives int // processes started for this rank
}

func newTrainer(t *testing.T, dir string, rank int, cfg map[string]any) *trainer {
	cfg["rank"], cfg["dir"], cfg["pyroot"] = rank, dir, pyroot
	b, _ := json.Marshal(cfg)
	log, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("rank%d.log", rank)), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	tr := &trainer{t: t, rank: rank, cfg: b, dir: dir, log: log}
	t.Cleanup(func() { tr.kill9(); log.Close() })
	return tr
}

func (tr *trainer) start() {
	tr.t.Helper()
	cmd := exec.Command(python, script, string(tr.cfg))
	cmd.Stdout, cmd.Stderr = tr.log, tr.log
	if err := cmd.Start(); err != nil {
		tr.t.Fatal(err)
	}
	tr.cmd, tr.done = cmd, make(chan struct{})
	tr.lives++
	go func(done chan struct{}) { cmd.Wait(); close(done) }(tr.done)
}

func (tr *trainer) running() bool {
	if tr.cmd == nil {
		return false
	}
	select {
	case <-tr.done:
		return false
	default:
		return true
	}
}

func (tr *trainer) kill9() {
	if tr.cmd == nil {
		return
	}
	tr.cmd.Process.Kill()
	tr.cmd.Process.Signal(syscall.SIGCONT)
	<-tr.done
	tr.cmd = nil
}

func (tr *trainer) path(ext string) string {
	return filepath.Join(tr.dir, fmt.Sprintf("rank%d.%s", tr.rank, ext))
}

// end is what the rank wrote when it stopped: ok, or its error.
type end struct {
	OK    bool
	Error string
}

func (tr *trainer) end() (end, bool) {
	var e end
	b, err := os.ReadFile(tr.path("end"))
	if err != nil {
		return e, false
	}
	return e, json.Unmarshal(b, &e) == nil
}

// batches is the number of batches the rank has recorded (or, soaking,
// read), from its state file.
func (tr *trainer) batches() int {
	var st struct{ Batches int }
	b, _ := os.ReadFile(tr.path("state"))
	json.Unmarshal(b, &st)
	return st.Batches
}

func (tr *trainer) logText() string {
	b, _ := os.ReadFile(tr.path("log"))
	return string(b)
}
