package shm_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/lastmile/lastmile/shm"
)

type opened struct {
	c   *shm.Consumer
	err error
}

// waitOpenAsync starts WaitOpen in a goroutine.
func waitOpenAsync(ctx context.Context, cfg shm.Config, wait time.Duration) chan opened {
	ch := make(chan opened, 1)
	go func() {
		c, err := shm.WaitOpen(ctx, cfg.Dir, cfg.Name, shm.OpenOptions{}, wait)
		ch <- opened{c, err}
	}()
	return ch
}

// notYet checks that WaitOpen is still waiting a while after it started.
func notYet(t *testing.T, ch chan opened) {
	t.Helper()
	select {
	case o := <-ch:
		if o.c != nil {
			o.c.Close()
		}
		t.Fatalf("WaitOpen returned (%v) while only a leftover was there", o.err)
	case <-time.After(300 * time.Millisecond):
	}
}

// finishedRing creates a ring, publishes n batches, reads them all and
// closes the producer: the leftover a run leaves with -keep.
func finishedRing(t *testing.T, cfg shm.Config, n uint64) uint64 {
	t.Helper()
	ctx := testCtx(t)
	p, err := shm.Create(cfg)
	if err != nil {
		t.Fatal(err)
	}
	gen := p.Generation()
	for seq := range n {
		if err := writeBatch(ctx, p, seq); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.CloseWith("done: old run"); err != nil {
		t.Fatal(err)
	}
	c, err := shm.Open(cfg.Dir, cfg.Name)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := consumeAll(ctx, c, 0); got != n || !errors.Is(err, io.EOF) {
		t.Fatalf("old run: %d batches then %v", got, err)
	}
	c.Close()
	return gen
}

// TestWaitOpenLeftoverFinished: a reader that starts before the producer,
// with a finished and fully read ring of the same name present, waits for
// the new ring instead of ending at once, and reads the new stream.
func TestWaitOpenLeftoverFinished(t *testing.T) {
	ctx := testCtx(t)
	cfg := testConfig(t, "left", 4)
	old := finishedRing(t, cfg, 3)

	ch := waitOpenAsync(ctx, cfg, 20*time.Second)
	notYet(t, ch)
	p := create(t, cfg) // the new run replaces the leftover
	if p.Generation() == old {
		t.Fatal("the new producer adopted the finished ring")
	}
	go func() {
		for seq := range uint64(5) {
			if err := writeBatch(ctx, p, seq); err != nil {
				t.Error(err)
				return
			}
		}
		p.Close()
	}()
	o := <-ch
	if o.err != nil {
		t.Fatal(o.err)
	}
	defer o.c.Close()
	if g := o.c.Header().Generation; g != p.Generation() || o.c.Leftover() != "" {
		t.Fatalf("attached to generation %d (leftover %q), want the new ring's %d", g, o.c.Leftover(), p.Generation())
	}
	if n, err := consumeAll(ctx, o.c, 0); n != 5 || !errors.Is(err, io.EOF) {
		t.Fatalf("new ring: %d batches then %v; want 5 and EOF", n, err)
	}
}

// TestWaitOpenLeftoverDead: the ring of a producer that died, every batch
// read, is a leftover too, until a producer continues it (adoption: the
// same generation) or replaces it.
func TestWaitOpenLeftoverDead(t *testing.T) {
	ctx := testCtx(t)
	cfg := testConfig(t, "dead", 4)
	h, gen := startHangingProducer(t, cfg, 2)
	c := open(t, cfg.Dir, cfg.Name)
	for seq := range uint64(2) {
		if _, err := c.Next(ctx); err != nil {
			t.Fatal(err, seq)
		}
	}
	c.Close()
	h.kill(t)

	ch := waitOpenAsync(ctx, cfg, 20*time.Second)
	notYet(t, ch)
	p, err := shm.Adopt(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.Generation() != gen {
		t.Fatal("adopt replaced the ring")
	}
	o := <-ch
	if o.err != nil {
		t.Fatal(o.err)
	}
	defer o.c.Close()
	if o.c.Header().Generation != gen || o.c.Leftover() != "" {
		t.Fatalf("attached to generation %d (leftover %q), want the adopted %d", o.c.Header().Generation, o.c.Leftover(), gen)
	}
	if err := writeBatch(ctx, p, 2); err != nil {
		t.Fatal(err)
	}
	b, err := o.c.Next(ctx)
	if err != nil || checkBatch(b, 2) != nil {
		t.Fatalf("after adoption: %v", err)
	}
}

// TestWaitOpenLeftoverTimeout: when no new ring comes, WaitOpen attaches
// to the leftover and says what it is; reading it ends at once. A ring
// with batches left to read is no leftover, nor is a missing file.
func TestWaitOpenLeftoverTimeout(t *testing.T) {
	ctx := testCtx(t)
	cfg := testConfig(t, "stale", 4)
	finishedRing(t, cfg, 2)
	start := time.Now()
	c, err := shm.WaitOpen(ctx, cfg.Dir, cfg.Name, shm.OpenOptions{}, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if time.Since(start) < 200*time.Millisecond {
		t.Fatal("WaitOpen did not wait for a new ring")
	}
	if l := c.Leftover(); !strings.Contains(l, "left from an earlier run") || !strings.Contains(l, "done: old run") || !strings.Contains(l, "2 batches") {
		t.Fatalf("Leftover() = %q", l)
	}
	if _, err := c.Next(ctx); !errors.Is(err, io.EOF) {
		t.Fatalf("Next on the leftover: %v, want io.EOF", err)
	}

	kept := testConfig(t, "kept", 4)
	p := create(t, kept)
	writeBatch(ctx, p, 0)
	p.Close()
	start = time.Now()
	k, err := shm.WaitOpen(ctx, kept.Dir, kept.Name, shm.OpenOptions{}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if time.Since(start) > 5*time.Second || k.Leftover() != "" {
		t.Fatalf("a ring with a batch to read: waited %v, leftover %q", time.Since(start), k.Leftover())
	}

	if _, err := shm.WaitOpen(ctx, kept.Dir, "none", shm.OpenOptions{}, 100*time.Millisecond); err == nil || !strings.Contains(err.Error(), "no ring") {
		t.Fatalf("WaitOpen of a missing ring: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := shm.WaitOpen(cctx, kept.Dir, "none", shm.OpenOptions{}, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitOpen with a canceled context: %v", err)
	}
}

// TestDiedAndReplaced: a consumer whose producer died, and whose ring's
// name a new ring has taken since, is told to reopen it.
func TestDiedAndReplaced(t *testing.T) {
	ctx := testCtx(t)
	cfg := testConfig(t, "replaced", 4)
	h, _ := startHangingProducer(t, cfg, 1)
	c := open(t, cfg.Dir, cfg.Name)
	if _, err := c.Next(ctx); err != nil {
		t.Fatal(err)
	}
	h.kill(t)
	create(t, cfg)
	var died *shm.ProducerDiedError
	if _, err := c.Next(ctx); !errors.As(err, &died) || !died.Replaced || !strings.Contains(err.Error(), "reopen") {
		t.Fatalf("Next: %v, want a ProducerDiedError with Replaced", err)
	}
}

// TestAdoptRefusesFinished: a ring whose stream ended is never adopted,
// though its producer lock is free (§6.6): Adopt, and Claim then Take,
// replace it with a new generation, and a consumer that saw its end keeps
// seeing it, with state never going back to running.
func TestAdoptRefusesFinished(t *testing.T) {
	ctx := testCtx(t)
	for _, how := range []string{"adopt", "claim"} {
		t.Run(how, func(t *testing.T) {
			cfg := testConfig(t, "fin", 4)
			p := create(t, cfg)
			gen := p.Generation()
			if err := writeBatch(ctx, p, 0); err != nil {
				t.Fatal(err)
			}
			p.CloseWith("done")
			c := open(t, cfg.Dir, cfg.Name)
			if n, err := consumeAll(ctx, c, 0); n != 1 || !errors.Is(err, io.EOF) {
				t.Fatalf("%d batches then %v", n, err)
			}
			var q *shm.Producer
			var err error
			if how == "adopt" {
				q, err = shm.Adopt(cfg)
			} else {
				if _, err := shm.Claim(cfg.Dir, cfg.Name, 0); err != nil {
					t.Fatal(err)
				}
				q, err = shm.Take(cfg)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			if q.Generation() == gen {
				t.Fatal("the finished ring was adopted")
			}
			if err := writeBatch(ctx, q, 0); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Next(ctx); !errors.Is(err, io.EOF) || c.Message() != "done" {
				t.Fatalf("old consumer after the new ring: %v, message %q; want EOF and done", err, c.Message())
			}
			if s := c.Stats(); s.Tail != 1 {
				t.Fatalf("old ring's tail is %d, want 1", s.Tail)
			}
		})
	}
}
