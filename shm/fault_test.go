package shm_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lastmile/lastmile/shm"
)

// A ring's file belongs to its job's owner, who may truncate it under the
// producer (lastmiled, shared by every user). Every producer and observer
// entry point then fails with ErrFault instead of a SIGBUS, which the Go
// runtime makes fatal: the whole daemon would die. Run in a child process,
// where a fault only kills the child.
func TestTruncatedRingFailsOnlyItsProducer(t *testing.T) {
	if os.Getenv("SHM_TRUNCATE_CHILD") == "1" {
		if err := truncateChild(); err != nil {
			fmt.Println("FAILED:", err)
			return
		}
		fmt.Println("PRODUCER SURVIVED")
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestTruncatedRingFailsOnlyItsProducer$", "-test.count=1")
	cmd.Env = append(os.Environ(), "SHM_TRUNCATE_CHILD=1", "SHM_TRUNCATE_DIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "PRODUCER SURVIVED") {
		lines := strings.Split(string(out), "\n")
		t.Fatalf("a producer whose ring file was truncated did not survive it (%v):\n%s", err, strings.Join(lines[:min(len(lines), 16)], "\n"))
	}
}

func truncateChild() error {
	cfg := shm.Config{Dir: os.Getenv("SHM_TRUNCATE_DIR"), Name: "victim", Slots: 4, SlotSize: 8192, Fields: testFields}
	p, err := shm.Create(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := writeBatch(ctx, p, 0); err != nil {
		return err
	}
	o, err := shm.Observe(cfg.Dir, cfg.Name)
	if err != nil {
		return err
	}
	defer o.Close()
	if err := os.Truncate(filepath.Join(cfg.Dir, cfg.Name), 0); err != nil {
		return err
	}
	time.Sleep(100 * time.Millisecond) // heartbeats into the gone pages
	faults := func(what string, err error) error {
		if !errors.Is(err, shm.ErrFault) || !strings.Contains(err.Error(), "truncated") || !strings.Contains(err.Error(), cfg.Name) {
			return fmt.Errorf("%s: error %v, want one wrapping ErrFault that names the ring and says it was truncated", what, err)
		}
		return nil
	}
	if _, err := p.Acquire(ctx); faults("Acquire", err) != nil {
		return faults("Acquire", err)
	}
	if err := faults("WaitDrained", p.WaitDrained(ctx)); err != nil {
		return err
	}
	if st := p.Stats(); st.Tail != 0 || st.Head != 0 {
		return fmt.Errorf("Stats after the fault: %+v, want Head and Tail 0", st)
	}
	if c, ok := p.LastCursor(); ok {
		return fmt.Errorf("LastCursor after the fault: %+v", c)
	}
	if info := o.Info(); info.Name != cfg.Name || info.Tail != 0 || info.State != shm.StateRunning {
		return fmt.Errorf("Observer.Info after the fault: %+v, want its identity only", info)
	}
	if head, tail, waiting := o.ConsumerState(); head != 0 || tail != 0 || waiting || o.ConsumerWaiting() {
		return fmt.Errorf("Observer.ConsumerState after the fault: %d %d %v", head, tail, waiting)
	}
	return faults("Fail", p.Fail("ring truncated"))
}

// AsFault finds a fault in a recovered value and in errors that wrap one,
// and nothing else.
func TestAsFault(t *testing.T) {
	f := &shm.FaultError{What: "r", Addr: 0x1000}
	cases := []struct {
		name string
		v    any
		want bool
	}{
		{"a fault", f, true},
		{"wrapped", fmt.Errorf("unit 3: %w", f), true},
		{"another error", errors.New("boom"), false},
		{"a string", "boom", false},
		{"nil", nil, false},
	}
	for _, c := range cases {
		if _, got := shm.AsFault(c.v); got != c.want {
			t.Errorf("%s: AsFault %v, want %v", c.name, got, c.want)
		}
	}
	if !errors.Is(f, shm.ErrFault) {
		t.Errorf("%v does not wrap ErrFault", f)
	}
}
