package shm_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lastmile/lastmile/shm"
)

// TestReviewTruncatedRingFaultsProducer: lastmiled gives every ring file to
// the job's owner (fchown, mode 0600) so that the trainer can map it
// read-write, and the producer (lastmiled, root, shared by every user)
// keeps the file mapped. The owner can ftruncate the file: the producer's
// next store into the mapping (its heartbeat every few ms, the next
// Acquire/Publish, Close's state word) is a SIGBUS, which the Go runtime
// turns into a fatal "unexpected fault address": the whole daemon dies,
// with every other user's jobs. Nothing sets debug.SetPanicOnFault or
// otherwise survives it. Run in a child process, as a ring's producer;
// the truncation stands in for the trainer's.
func TestReviewTruncatedRingFaultsProducer(t *testing.T) {
	if os.Getenv("REVIEW_TRUNCATE_CHILD") == "1" {
		reviewTruncateChild(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestReviewTruncatedRingFaultsProducer$", "-test.count=1")
	cmd.Env = append(os.Environ(), "REVIEW_TRUNCATE_CHILD=1", "REVIEW_TRUNCATE_DIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "PRODUCER SURVIVED") {
		lines := strings.Split(string(out), "\n")
		if len(lines) > 12 {
			lines = lines[:12]
		}
		t.Fatalf("a producer whose ring file its consumer's owner truncated did not survive (%v):\n%s", err, strings.Join(lines, "\n"))
	}
}

func reviewTruncateChild(t *testing.T) {
	cfg := shm.Config{Dir: os.Getenv("REVIEW_TRUNCATE_DIR"), Name: "victim", Slots: 4, SlotSize: 8192, Fields: testFields}
	p, err := shm.Create(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := writeBatch(ctx, p, 0); err != nil {
		t.Fatal(err)
	}
	// The trainer (the ring's owner) truncates the file it may write.
	if err := os.Truncate(filepath.Join(cfg.Dir, cfg.Name), 0); err != nil {
		t.Fatal(err)
	}
	// Any outcome but a fault is fine: an error from the producer.
	_ = writeBatch(ctx, p, 1)
	time.Sleep(200 * time.Millisecond) // the heartbeat's stores
	_ = p.Fail("ring truncated")
	os.Stdout.WriteString("PRODUCER SURVIVED\n")
}
