package shm_test

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/lastmile/lastmile/shm"
)

// Tests with the producer or the consumer in another process: the test
// binary re-executed as a helper (TestHelperProcess).

func TestCrossProcess(t *testing.T) {
	t.Parallel()
	const batches = 40
	for _, tc := range []struct {
		name    string
		end     string // how the producer ends
		wantErr func(error) bool
	}{
		{"close", "close", func(err error) bool { return err == io.EOF }},
		{"fail", "fail:disk on fire: données perdues", func(err error) bool {
			var pe *shm.ProducerError
			return errors.As(err, &pe) && pe.Message == "disk on fire: données perdues" && errors.Is(err, shm.ErrProducerFailed)
		}},
	} {
		t.Run("producer-helper/"+tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			h := startHelper(t, "produce", "H_DIR="+dir, "H_NAME=x", "H_SLOTS=3",
				"H_BATCHES="+strconv.Itoa(batches), "H_END="+tc.end)
			h.expect(t, "READY")
			c, err := shm.Open(dir, "x")
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			got, err := consumeAll(testCtx(t), c, 0)
			if got != batches || !tc.wantErr(err) {
				t.Fatalf("got %d batches then %v, want %d then the %s outcome", got, err, batches, tc.name)
			}
			if tc.name == "close" && c.Message() != "done" {
				t.Errorf("message %q, want %q", c.Message(), "done")
			}
			if _, err2 := c.Next(testCtx(t)); err2 != err && err2.Error() != err.Error() {
				t.Errorf("Next after the end: %v, want %v again", err2, err)
			}
		})
	}
	// The consumer in the helper; one slot makes every batch a full
	// round trip through both futexes, many batches shake out races.
	for _, tc := range []struct{ slots, batches int }{{2, batches}, {1, 2000}} {
		t.Run(fmt.Sprintf("consumer-helper/slots=%d", tc.slots), func(t *testing.T) {
			t.Parallel()
			cfg := testConfig(t, "y", tc.slots)
			p, err := shm.Create(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Remove()
			h := startHelper(t, "consume", "H_DIR="+cfg.Dir, "H_NAME=y")
			ctx := testCtx(t)
			for seq := uint64(0); seq < uint64(tc.batches); seq++ {
				if err := writeBatch(ctx, p, seq); err != nil {
					t.Fatal(err)
				}
			}
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			if got := h.expect(t, "END"); got[0] != strconv.Itoa(tc.batches) || got[1] != "EOF" {
				t.Fatalf("consumer says %v, want %d EOF", got, tc.batches)
			}
		})
	}
}

func TestProducerKilledMidBatch(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const published = 6 // with 4 slots, batch 6 reuses the slot of batch 2
	h := startHelper(t, "produce", "H_DIR="+dir, "H_NAME=k", "H_SLOTS=4",
		"H_BATCHES="+strconv.Itoa(published), "H_END=hang")
	pid, _ := strconv.Atoi(h.expect(t, "READY")[0])
	c, err := shm.Open(dir, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := testCtx(t)
	// Read until the producer has half-written batch 6, then kill it.
	for seq := uint64(0); seq < 3; seq++ {
		b, err := c.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkBatch(b, seq); err != nil {
			t.Fatal(err)
		}
	}
	c.Release()
	h.expect(t, "HALF")
	h.kill(t)
	got, err := consumeAll(ctx, c, 3)
	var died *shm.ProducerDiedError
	if got != published-3 || !errors.As(err, &died) || !errors.Is(err, shm.ErrProducerDied) {
		t.Fatalf("got %d more batches then %v, want %d then ErrProducerDied", got, err, published-3)
	}
	if died.Published != published || died.PID != int32(pid) {
		t.Errorf("died error %+v, want %d published by pid %d", died, published, pid)
	}
	for _, want := range []string{"pid " + strconv.Itoa(pid), "6 batches", "heartbeat"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestLateConsumerAndReattach(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const batches = 12
	h := startHelper(t, "produce", "H_DIR="+dir, "H_NAME=late", "H_SLOTS=4",
		"H_BATCHES="+strconv.Itoa(batches), "H_PAUSE=3", "H_END=close")
	h.expect(t, "READY")
	h.expect(t, "PUBLISHED") // 3 batches wait in the ring; nobody was attached
	ctx := testCtx(t)

	c1, err := shm.Open(dir, "late")
	if err != nil {
		t.Fatal(err)
	}
	_, err = shm.Open(dir, "late")
	if !errors.Is(err, shm.ErrInUse) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Fatalf("second consumer: %v, want ErrInUse naming pid %d", err, os.Getpid())
	}
	for seq := uint64(0); seq < 2; seq++ {
		b, err := c1.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkBatch(b, seq); err != nil {
			t.Fatal(err)
		}
	}
	if err := c1.Close(); err != nil { // releases batch 1: head is 2
		t.Fatal(err)
	}
	c2, err := shm.Open(dir, "late")
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	h.goAhead(t)
	got, err := consumeAll(ctx, c2, 2)
	if got != batches-2 || err != io.EOF {
		t.Fatalf("reattached consumer got %d batches then %v, want %d then EOF", got, err, batches-2)
	}
}

func TestStaleRingReclaimed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	h := startHelper(t, "produce", "H_DIR="+dir, "H_NAME=s", "H_END=wait")
	f := h.expect(t, "READY")
	pid, oldGen := f[0], f[1]
	h.expect(t, "WAITING")

	// A live ring is not stolen.
	_, err := shm.Create(shm.Config{Dir: dir, Name: "s", SlotSize: 8192, Fields: testFields})
	if !errors.Is(err, shm.ErrInUse) || !strings.Contains(err.Error(), "pid "+pid) {
		t.Fatalf("create over a live ring: %v, want ErrInUse naming pid %s", err, pid)
	}

	// A dead producer's ring, and a temporary file of a producer that died
	// while creating one, are replaced and removed.
	h.kill(t)
	staleTmp := filepath.Join(dir, ".s.tmp-2147483646")
	if err := os.WriteFile(staleTmp, []byte("partial"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := shm.Create(shm.Config{Dir: dir, Name: "s", SlotSize: 8192, Fields: testFields})
	if err != nil {
		t.Fatalf("create over a stale ring: %v", err)
	}
	defer p.Close()
	if strconv.FormatUint(p.Generation(), 10) == oldGen {
		t.Error("the reclaimed ring kept the old generation")
	}
	if _, err := os.Stat(staleTmp); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale temporary file left behind: %v", err)
	}
	c, err := shm.Open(dir, "s")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.Header().ProducerPID; got != int32(os.Getpid()) {
		t.Errorf("ring's producer pid %d, want ours %d", got, os.Getpid())
	}
}

func TestSmallSpace(t *testing.T) {
	t.Parallel()
	check := func(t *testing.T, out []string, wants ...string) {
		t.Helper()
		if len(out) == 0 {
			t.Fatal("helper said nothing")
		}
		if out[0] == "SKIP" {
			t.Skip(strings.Join(out[1:], " "))
		}
		if out[0] != "ERROR" {
			t.Fatalf("helper: %v, want an ERROR from Create", out)
		}
		msg := strings.Join(out[1:len(out)-1], " ")
		for _, w := range wants {
			if !strings.Contains(msg, w) {
				t.Errorf("error %q does not mention %q", msg, w)
			}
		}
		if left := out[len(out)-1]; left != "LEFT=0" {
			t.Errorf("files left behind: %s", left)
		}
	}
	run := func(t *testing.T, cmd *exec.Cmd) []string {
		t.Helper()
		h := startCmd(t, cmd)
		var out []string
		for h.lines.Scan() {
			out = append(out, strings.Fields(h.lines.Text())...)
		}
		return out
	}
	helperCmd := func(prefix []string, mode, dir string) *exec.Cmd {
		argv := append(prefix, os.Args[0], "-test.run=^TestHelperProcess$")
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = childEnv(helperEnv+"=small-space", "H_DIR="+dir, "H_MODE="+mode)
		return cmd
	}
	t.Run("tmpfs", func(t *testing.T) {
		t.Parallel()
		unshare, err := exec.LookPath("unshare")
		if err != nil {
			t.Skip("no unshare(1) to mount a tiny tmpfs in a private mount namespace")
		}
		if err := exec.Command(unshare, "-m", "true").Run(); err != nil {
			t.Skipf("cannot create a mount namespace (needs root or user namespaces): %v", err)
		}
		out := run(t, helperCmd([]string{unshare, "-m", "--propagation", "private"}, "tmpfs", t.TempDir()))
		check(t, out, `"tiny"`, "no space left on device", "bytes free", "--shm-size", "fewer or smaller slots")
	})
	t.Run("rlimit-fsize", func(t *testing.T) {
		t.Parallel()
		out := run(t, helperCmd(nil, "fsize", t.TempDir()))
		check(t, out, `"tiny"`, "file size limit exceeded", "bytes free", "fewer or smaller slots")
	})
}

// smallSpaceHelper tries to create a 4 MiB ring where only 1 MiB fits and
// prints the error and how many files are left in the directory.
func smallSpaceHelper(dir string) error {
	switch os.Getenv("H_MODE") {
	case "tmpfs":
		if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
			fmt.Println("SKIP cannot mount a tmpfs:", err)
			return nil
		}
	case "fsize":
		lim := unix.Rlimit{Cur: 1 << 20, Max: unix.RLIM_INFINITY}
		if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &lim); err != nil {
			fmt.Println("SKIP cannot set RLIMIT_FSIZE:", err)
			return nil
		}
	}
	_, err := shm.Create(shm.Config{Dir: dir, Name: "tiny", Slots: 4, SlotSize: 1 << 20, Fields: testFields})
	if err == nil {
		fmt.Println("CREATED")
		return nil
	}
	ents, _ := os.ReadDir(dir)
	fmt.Println("ERROR", err)
	fmt.Printf("LEFT=%d\n", len(ents))
	return nil
}
