package shm_test

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/lastmile/lastmile/shm"
)

// TestStatsWaitUnderWay: FullWait counts a wait on the full ring while it
// lasts (a trainer that stopped shows as a full ring the producer waits
// on, not as 0 until it comes back), never goes back, and Held counts
// the slots acquired and not yet published.
func TestStatsWaitUnderWay(t *testing.T) {
	ctx := testCtx(t)
	cfg := testConfig(t, "stats", 3)
	p, err := shm.Create(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Remove()
	defer p.Close()
	for seq := uint64(0); seq < 2; seq++ {
		if err := writeBatch(ctx, p, seq); err != nil {
			t.Fatal(err)
		}
	}
	s, err := p.Acquire(ctx) // the third slot, held
	if err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); st.Held != 1 || st.Occupancy() != 2 || st.FullWait != 0 {
		t.Fatalf("stats %+v: want 1 held, 2 published, no wait", st)
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := p.Acquire(wctx) // the ring is full: waits
		done <- err
	}()
	time.Sleep(150 * time.Millisecond)
	mid := p.Stats()
	if mid.FullWait < 100*time.Millisecond {
		t.Errorf("FullWait %v while the producer waits for 150ms", mid.FullWait)
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("Acquire on a full ring returned a slot")
	}
	end := p.Stats()
	if end.FullWait < mid.FullWait || end.FullWaits != 1 {
		t.Errorf("after the wait: %+v, before its end FullWait %v", end, mid.FullWait)
	}
	p.Discard(s)
	if st := p.Stats(); st.Held != 0 {
		t.Errorf("after Discard: held %d", st.Held)
	}
}

// TestHeadBeyondTail: head is the consumer's word, in a file its owner may
// write. A head beyond the batches published neither wraps Occupancy nor
// makes the ring look full for ever: Acquire and WaitDrained fail with
// ErrProtocol, and the observer reports it as it is.
func TestHeadBeyondTail(t *testing.T) {
	ctx := testCtx(t)
	cfg := testConfig(t, "headbeyond", 3)
	p, err := shm.Create(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Remove()
	defer p.Close()
	if err := writeBatch(ctx, p, 0); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p.Path(), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], 1<<62)
	if _, err := f.WriteAt(b[:], 256); err != nil { // head (ring-format.md §3.3)
		t.Fatal(err)
	}
	f.Close()
	if st := p.Stats(); st.Occupancy() != 0 {
		t.Errorf("occupancy with head 1<<62 and tail 1: %d, want 0", st.Occupancy())
	}
	o, err := shm.Observe(cfg.Dir, cfg.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if head, tail, waiting := o.ConsumerState(); head != 1<<62 || tail != 1 || waiting {
		t.Errorf("ConsumerState: %d %d %v", head, tail, waiting)
	}
	if in := o.Info(); in.Occupancy() != 0 {
		t.Errorf("Info().Occupancy(): %d, want 0", in.Occupancy())
	}
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := p.Acquire(actx); !errors.Is(err, shm.ErrProtocol) {
		t.Errorf("Acquire with the consumer's head beyond the tail: %v, want ErrProtocol", err)
	}
	if err := p.WaitDrained(actx); !errors.Is(err, shm.ErrProtocol) {
		t.Errorf("WaitDrained with the consumer's head beyond the tail: %v, want ErrProtocol", err)
	}
}
