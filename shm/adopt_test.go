package shm_test

import (
	"errors"
	"io"
	"strconv"
	"testing"

	"github.com/lastmile/lastmile/shm"
)

// startHangingProducer runs a helper producer that publishes n batches,
// half-writes batch n and waits; it returns the helper after the half
// write, and its ring's generation.
func startHangingProducer(t *testing.T, cfg shm.Config, n int) (*helper, uint64) {
	t.Helper()
	h := startHelper(t, "produce", "H_DIR="+cfg.Dir, "H_NAME="+cfg.Name,
		"H_SLOTS="+strconv.Itoa(cfg.Slots), "H_BATCHES="+strconv.Itoa(n), "H_END=hang")
	f := h.expect(t, "READY")
	gen, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	h.expect(t, "HALF")
	return h, gen
}

// TestAdoptAfterKill: a producer killed with SIGKILL mid-batch leaves a
// ring that Adopt continues; a consumer holding a batch through the gap
// reads every batch once, in order, the torn one included.
func TestAdoptAfterKill(t *testing.T) {
	ctx := testCtx(t)
	cfg := testConfig(t, "adopt", 4)
	h, gen := startHangingProducer(t, cfg, 3)

	c, err := shm.Open(cfg.Dir, cfg.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for seq := uint64(0); seq < 2; seq++ { // releases 0, holds 1
		b, err := c.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkBatch(b, seq); err != nil {
			t.Fatal(err)
		}
	}
	h.kill(t)

	p, err := shm.Adopt(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if p.Generation() != gen {
		t.Fatalf("generation %d after adopt, want the old ring's %d", p.Generation(), gen)
	}
	last, ok := p.LastCursor()
	if !ok || last != batchCursor(2) {
		t.Fatalf("LastCursor = %+v, %v; want %+v", last, ok, batchCursor(2))
	}
	done := make(chan error, 1)
	go func() {
		for seq := uint64(3); seq < 12; seq++ {
			if err := writeBatch(ctx, p, seq); err != nil {
				done <- err
				return
			}
		}
		done <- p.CloseWith("done")
	}()
	n, err := consumeAll(ctx, c, 2)
	if !errors.Is(err, io.EOF) || n != 10 {
		t.Fatalf("after adopt: %d batches from 2, then %v; want 10 and EOF", n, err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestAdoptReopen: a consumer that saw the producer die reopens the same
// name after the adoption and continues at its head.
func TestAdoptReopen(t *testing.T) {
	ctx := testCtx(t)
	cfg := testConfig(t, "reopen", 4)
	h, gen := startHangingProducer(t, cfg, 2)
	c, err := shm.Open(cfg.Dir, cfg.Name)
	if err != nil {
		t.Fatal(err)
	}
	h.kill(t)
	n, err := consumeAll(ctx, c, 0)
	if !errors.Is(err, shm.ErrProducerDied) || n != 2 {
		t.Fatalf("got %d batches then %v; want 2 and ErrProducerDied", n, err)
	}
	c.Close()

	p, err := shm.Adopt(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if p.Generation() != gen {
		t.Fatal("adopt replaced the ring")
	}
	go func() {
		for seq := uint64(2); seq < 7; seq++ {
			if err := writeBatch(ctx, p, seq); err != nil {
				t.Error(err)
				break
			}
		}
		p.Close()
	}()
	c, err = shm.Open(cfg.Dir, cfg.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Header().Generation != gen {
		t.Fatal("reopened another generation")
	}
	n, err = consumeAll(ctx, c, 2)
	if !errors.Is(err, io.EOF) || n != 5 {
		t.Fatalf("after reopen: %d batches then %v; want 5 and EOF", n, err)
	}
}

// TestAdoptFallsBack: rings that cannot be continued are replaced by a
// fresh one (Create), and a live producer is never displaced.
func TestAdoptFallsBack(t *testing.T) {
	ctx := testCtx(t)
	f := func(name string, mutate func(cfg *shm.Config), end func(p *shm.Producer)) {
		t.Helper()
		cfg := testConfig(t, "fallback", 4)
		p, err := shm.Create(cfg)
		if err != nil {
			t.Fatal(err)
		}
		gen := p.Generation()
		if err := writeBatch(ctx, p, 0); err != nil {
			t.Fatal(err)
		}
		end(p)
		mutate(&cfg)
		q, err := shm.Adopt(cfg)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		defer q.Close()
		if q.Generation() == gen {
			t.Fatalf("%s: adopted, want a new ring", name)
		}
		if _, ok := q.LastCursor(); ok {
			t.Fatalf("%s: new ring has a last cursor", name)
		}
	}
	closeIt := func(p *shm.Producer) { p.Close() }
	detach := func(p *shm.Producer) {
		if _, err := p.Detach(); err != nil {
			t.Fatal(err)
		}
		p.Close()
	}
	f("ended stream", func(*shm.Config) {}, closeIt)
	f("other schema", func(cfg *shm.Config) { cfg.Fields = cfg.Fields[:2] }, detach)
	f("other slot count", func(cfg *shm.Config) { cfg.Slots = 8 }, detach)
	f("other slot size", func(cfg *shm.Config) { cfg.SlotSize = 16384 }, detach)

	cfg := testConfig(t, "live", 4)
	p, err := shm.Create(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := shm.Adopt(cfg); !errors.Is(err, shm.ErrInUse) {
		t.Fatalf("adopt of a live ring: %v, want ErrInUse", err)
	}
	if _, err := shm.Claim(cfg.Dir, cfg.Name, 0); !errors.Is(err, shm.ErrInUse) {
		t.Fatalf("claim of a live ring: %v, want ErrInUse", err)
	}
}

// TestDetachHandover: Detach passes a live ring to the next Take without
// the lock ever dropping; what the old producer does afterwards never
// reaches the file, and the consumer reads one uninterrupted stream.
func TestDetachHandover(t *testing.T) {
	ctx := testCtx(t)
	cfg := testConfig(t, "handover", 4)
	old, err := shm.Create(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := shm.Open(cfg.Dir, cfg.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for seq := uint64(0); seq < 3; seq++ {
		if err := writeBatch(ctx, old, seq); err != nil {
			t.Fatal(err)
		}
	}
	info, err := old.Detach()
	if err != nil {
		t.Fatal(err)
	}
	if info.Tail != 3 || !info.HasLast || info.Last != batchCursor(2) || !info.ConsumerAttached {
		t.Fatalf("detach info %+v", info)
	}
	// The lock is still held (by the claim): the ring looks alive.
	if in, err := shm.Inspect(cfg.Dir, cfg.Name); err != nil || !in.ProducerAlive {
		t.Fatalf("after detach: alive %v, err %v; want alive", in.ProducerAlive, err)
	}
	// The old producer writes on, publishes and fails: all private.
	if err := writeBatch(ctx, old, 3); err != nil {
		t.Fatal(err)
	}
	old.Fail("must not be seen")

	p, err := shm.Take(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if p.Generation() != old.Generation() {
		t.Fatal("take created a new ring")
	}
	go func() {
		for seq := uint64(3); seq < 20; seq++ {
			if err := writeBatch(ctx, p, seq); err != nil {
				t.Error(err)
				break
			}
		}
		p.CloseWith("done")
	}()
	n, err := consumeAll(ctx, c, 0)
	if !errors.Is(err, io.EOF) || n != 20 {
		t.Fatalf("%d batches then %v; want 20 and EOF", n, err)
	}
	if m := c.Message(); m != "done" {
		t.Fatalf("message %q, want done", m)
	}
}

// TestClaimTake: a daemon that restarts claims its rings, reads where they
// stand, and Take adopts them; an unclaimed name is created afresh.
func TestClaimTake(t *testing.T) {
	ctx := testCtx(t)
	cfg := testConfig(t, "claim", 4)
	h, gen := startHangingProducer(t, cfg, 3)
	h.kill(t)
	c, err := shm.Open(cfg.Dir, cfg.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Next(ctx); err != nil { // holds batch 0
		t.Fatal(err)
	}
	info, err := shm.Claim(cfg.Dir, cfg.Name, 0)
	if err != nil {
		t.Fatal(err)
	}
	if info.Generation != gen || info.Head != 0 || info.Tail != 3 || info.State != shm.StateRunning ||
		!info.HasNext || info.Next != batchCursor(0) || !info.HasLast || info.Last != batchCursor(2) ||
		!info.ConsumerAttached || info.ProducerAlive {
		t.Fatalf("claim info %+v", info)
	}
	p, err := shm.Take(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.Generation() != gen {
		t.Fatal("take did not adopt the claimed ring")
	}
	other := cfg
	other.Name = "fresh"
	q, err := shm.Take(other)
	if err != nil {
		t.Fatal(err)
	}
	q.Close()
	shm.Unclaim(cfg.Dir, "nothing") // no claim: nothing happens
}

// TestObserver: a read-only view reports occupancy, the consumer's state
// and notices when the name is replaced.
func TestObserver(t *testing.T) {
	ctx := testCtx(t)
	cfg := testConfig(t, "observe", 4)
	p, err := shm.Create(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	o, err := shm.Observe(cfg.Dir, cfg.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	for seq := uint64(0); seq < 2; seq++ {
		if err := writeBatch(ctx, p, seq); err != nil {
			t.Fatal(err)
		}
	}
	in := o.Info()
	if in.Occupancy() != 2 || !in.ProducerAlive || in.ConsumerAttached || in.ConsumerWaiting || o.ConsumerWaiting() {
		t.Fatalf("info %+v", in)
	}
	if in.Next != batchCursor(0) || in.Last != batchCursor(1) {
		t.Fatalf("cursors next %+v last %+v", in.Next, in.Last)
	}
	if o.Replaced() {
		t.Fatal("replaced too early")
	}
	p.Remove()
	if !o.Replaced() {
		t.Fatal("not replaced after remove")
	}
	if _, err := shm.Inspect(cfg.Dir, "missing"); err == nil {
		t.Fatal("inspect of a missing ring succeeded")
	}
}
