package shm_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/lastmile/lastmile/shm"
)

// In-process tests: producer and consumer hold separate open file
// descriptions, so their record locks conflict as across processes.

func create(t *testing.T, cfg shm.Config) *shm.Producer {
	t.Helper()
	p, err := shm.Create(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func open(t *testing.T, dir, name string) *shm.Consumer {
	t.Helper()
	c, err := shm.Open(dir, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestFullRingBlocksProducer(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	cfg := testConfig(t, "full", 2)
	p := create(t, cfg)
	c := open(t, cfg.Dir, "full")
	for seq := uint64(0); seq < 2; seq++ {
		if err := writeBatch(ctx, p, seq); err != nil {
			t.Fatal(err)
		}
	}
	// acquire runs writeBatch(seq) in a goroutine; the channel says when it
	// is done.
	acquire := func(seq uint64) chan error {
		done := make(chan error, 1)
		go func() { done <- writeBatch(ctx, p, seq) }()
		return done
	}
	blocked := func(done chan error) {
		t.Helper()
		waitForWord(t, p.Path(), offProducerWaiting, 1) // asleep on the futex
		select {
		case err := <-done:
			t.Fatalf("producer did not block on a full ring: %v", err)
		default:
		}
	}

	done := acquire(2)
	blocked(done)
	b0, err := c.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkBatch(b0, 0); err != nil {
		t.Fatal(err)
	}
	blocked(done) // batch 0 is delivered but not released yet
	b1, err := c.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil { // batch 0 released: batch 2 goes to its slot
		t.Fatal(err)
	}
	done = acquire(3)
	blocked(done) // batch 1 is still held
	if err := checkBatch(b1, 1); err != nil {
		t.Fatalf("held batch overwritten: %v", err)
	}
	if st := p.Stats(); st.Occupancy() != 2 || st.Published != 3 {
		t.Errorf("stats %+v, want occupancy 2 and 3 published", st)
	}
	for seq := uint64(2); seq < 4; seq++ {
		b, err := c.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkBatch(b, seq); err != nil {
			t.Fatal(err)
		}
		if seq == 2 {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
	}
	if st := p.Stats(); st.FullWaits < 2 || st.FullWait <= 0 {
		t.Errorf("stats %+v, want at least 2 full waits", st)
	}
	p.Close()
	if _, err := c.Next(ctx); err != io.EOF {
		t.Fatalf("after close: %v, want EOF", err)
	}
}

func TestBatchTooLarge(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	cfg := testConfig(t, "big", 2)
	cfg.Fields = []shm.Field{{Name: "x", Kind: shm.Dense, DType: shm.Float32, Dims: []int64{256}}}
	p := create(t, cfg)
	c := open(t, cfg.Dir, "big")
	if got := p.SlotSize(); got != 8192 {
		t.Fatalf("slot size %d, want 8192", got)
	}

	// Before writing anything.
	need, err := p.Need([]int64{8 * 1024})
	var tl *shm.TooLargeError
	if !errors.As(err, &tl) || tl.Need != need || need != 256+8*1024 || tl.SlotSize != 8192 {
		t.Fatalf("Need: %d, %v; want a TooLargeError for %d bytes", need, err, 256+8*1024)
	}
	for _, want := range []string{`"big"`, "8448", "8192", "slot size of at least 12288"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if _, err := p.Need([]int64{4 * 1024}); err != nil {
		t.Errorf("Need for a batch that fits: %v", err)
	}

	// While adding: the region is refused, the batch never published.
	s, err := p.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.SetRows(8)
	if _, err := s.Add(0, shm.RoleDense, shm.Float32, 8, 256); !errors.As(err, &tl) || tl.Need != 256+8*1024 {
		t.Fatalf("Add of 8 KiB into an 8 KiB slot: %v", err)
	}
	p.Discard(s)

	// The next batch gets the same sequence number and arrives first.
	s, err = p.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.SetRows(2)
	if _, err := s.Add(0, shm.RoleDense, shm.Float32, 2, 256); err != nil {
		t.Fatal(err)
	}
	if err := p.Publish(s); err != nil {
		t.Fatal(err)
	}
	p.Close()
	b, err := c.Next(ctx)
	if err != nil || b.Seq != 0 || b.Rows != 2 {
		t.Fatalf("first batch: %+v, %v; want seq 0 with 2 rows", b, err)
	}
	if _, err := c.Next(ctx); err != io.EOF {
		t.Fatalf("second Next: %v, want EOF", err)
	}
}

func TestSlotMisuse(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	cfg := testConfig(t, "misuse", 2)
	p := create(t, cfg)
	s, err := p.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Add(0, shm.RoleDense, shm.Float32, 1); err == nil {
		t.Error("Add before SetRows succeeded")
	}
	s.SetRows(2)
	for _, tc := range []struct {
		desc  string
		field int
		role  shm.Role
		dtype shm.DType
		shape []int64
	}{
		{"wrong field", 1, shm.RoleDense, shm.Int32, []int64{2, 4}},
		{"wrong role", 0, shm.RoleValues, shm.Float32, []int64{2}},
		{"wrong dtype", 0, shm.RoleDense, shm.Float64, []int64{2}},
		{"wrong ndim", 0, shm.RoleDense, shm.Float32, []int64{2, 1}},
		{"negative", 0, shm.RoleDense, shm.Float32, []int64{-1}},
	} {
		if _, err := s.Add(tc.field, tc.role, tc.dtype, tc.shape...); err == nil {
			t.Errorf("%s: Add succeeded", tc.desc)
		}
	}
	if err := p.Publish(s); err == nil {
		t.Error("Publish of a batch without its tensors succeeded")
	}
	// A second slot may be held (MaxHeld is 2), a third may not; slots
	// are published oldest first and discarded newest first.
	s2, err := p.Acquire(ctx)
	if err != nil {
		t.Fatalf("second Acquire: %v", err)
	}
	if s2.Seq() != 1 {
		t.Errorf("second held slot has seq %d, want 1", s2.Seq())
	}
	if _, err := p.Acquire(ctx); err == nil {
		t.Error("third Acquire while two slots are held succeeded")
	}
	if err := p.Publish(s2); err == nil {
		t.Error("Publish of the newer held slot before the older succeeded")
	}
	p.Discard(s) // not the newest: does nothing, s stays held
	p.Discard(s2)
	if _, err := s2.Add(0, shm.RoleDense, shm.Float32, 3); err == nil {
		t.Error("Add on a discarded slot succeeded")
	}
	// A tensor whose rows disagree with the batch's is refused at once
	// (it would not fit its fixed place in the layout), and nothing is
	// published while a tensor is missing.
	if _, err := s.Add(0, shm.RoleDense, shm.Float32, 3); err == nil || !strings.Contains(err.Error(), "2 rows") {
		t.Errorf("Add of a 3-row tensor to a 2-row batch: %v, want an error naming the rows", err)
	}
	if err := p.Publish(s); err == nil {
		t.Error("Publish of a batch without its tensors succeeded")
	}
	p.Discard(s)
	if st := p.Stats(); st.Published != 0 || st.Tail != 0 {
		t.Errorf("stats %+v after failed publishes, want nothing published", st)
	}
	if err := writeBatch(ctx, p, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Add(0, shm.RoleDense, shm.Float32, 3); err == nil {
		t.Error("Add on a published slot succeeded")
	}
	p.Close()
	if _, err := s.Add(0, shm.RoleDense, shm.Float32, 3); err == nil {
		t.Error("Add after Close succeeded")
	}
	if _, err := p.Need([]int64{1, 2, 3, 4, 5, 6, 7}); err != nil {
		t.Errorf("Need after Close: %v", err)
	}
}

func TestCancelBlocked(t *testing.T) {
	t.Parallel()
	t.Run("acquire", func(t *testing.T) {
		t.Parallel()
		cfg := testConfig(t, "ca", 1)
		p := create(t, cfg)
		if err := writeBatch(testCtx(t), p, 0); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { _, err := p.Acquire(ctx); done <- err }()
		waitForWord(t, p.Path(), offProducerWaiting, 1)
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Acquire: %v, want context.Canceled", err)
		}
		if st := p.Stats(); st.Tail != 1 || st.Published != 1 {
			t.Fatalf("stats %+v after a cancelled Acquire, want 1 published", st)
		}
	})
	t.Run("next", func(t *testing.T) {
		t.Parallel()
		cfg := testConfig(t, "cn", 1)
		p := create(t, cfg)
		c := open(t, cfg.Dir, "cn")
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { _, err := c.Next(ctx); done <- err }()
		waitForWord(t, p.Path(), offConsumerWaiting, 1)
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Next: %v, want context.Canceled", err)
		}
		// Cancellation is not final: the next batch still arrives.
		if err := writeBatch(testCtx(t), p, 0); err != nil {
			t.Fatal(err)
		}
		b, err := c.Next(testCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		if err := checkBatch(b, 0); err != nil {
			t.Fatal(err)
		}
	})
}

// patch overwrites bytes of a ring file, as a broken or foreign writer would.
func patch(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc   string
		break_ func(t *testing.T, path string)
		is     error
		want   string
	}{
		{"missing", func(t *testing.T, path string) { os.Remove(path) }, fs.ErrNotExist, "is its producer running"},
		{"not a ring", func(t *testing.T, path string) { patch(t, path, 0, []byte("PK\x03\x04")) }, shm.ErrNotRing, "magic"},
		{"empty file", func(t *testing.T, path string) { os.Truncate(path, 0) }, shm.ErrTruncated, "shorter than the magic"},
		{"truncated", func(t *testing.T, path string) { os.Truncate(path, 12288) }, shm.ErrTruncated, "the header describes"},
		{"major version", func(t *testing.T, path string) { patch(t, path, 8, []byte{5, 0}) }, shm.ErrVersion, "upgrade lastmile"},
		{"major version 0", func(t *testing.T, path string) { patch(t, path, 8, []byte{0, 0}) }, shm.ErrVersion, "upgrade lastmile"},
		{"schema hash", func(t *testing.T, path string) { patch(t, path, 4096+8, []byte("L")) }, shm.ErrSchemaHash, "hashes to"},
		{"slot count", func(t *testing.T, path string) { patch(t, path, 16, []byte{0, 0, 0, 0}) }, shm.ErrCorrupt, "slot_count 0"},
		{"slot size", func(t *testing.T, path string) { patch(t, path, 24, []byte{1, 16}) }, shm.ErrCorrupt, "slot_size"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig(t, "bad", 2)
			p := create(t, cfg)
			p.Close()
			tc.break_(t, p.Path())
			_, err := shm.Open(cfg.Dir, "bad")
			if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `open ring "bad"`) {
				t.Fatalf("%v; want %v mentioning %q and the ring", err, tc.is, tc.want)
			}
		})
	}
	t.Run("expected schema", func(t *testing.T) {
		t.Parallel()
		cfg := testConfig(t, "sch", 2)
		create(t, cfg)
		other := append([]shm.Field(nil), testFields...)
		other[0].DType = shm.Float64
		_, err := shm.OpenWith(cfg.Dir, "sch", shm.OpenOptions{Schema: other})
		if !errors.Is(err, shm.ErrSchemaHash) {
			t.Fatalf("%v, want ErrSchemaHash", err)
		}
		c, err := shm.OpenWith(cfg.Dir, "sch", shm.OpenOptions{Schema: testFields})
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
	})
}

func TestProtocolViolation(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	cfg := testConfig(t, "pv", 2)
	p := create(t, cfg)
	c := open(t, cfg.Dir, "pv")
	for seq := uint64(0); seq < 2; seq++ {
		if err := writeBatch(ctx, p, seq); err != nil {
			t.Fatal(err)
		}
	}
	hdr := c.Header()
	// Slot 1 claims to hold batch 7.
	patch(t, p.Path(), hdr.DataOffset+hdr.SlotSize, []byte{7, 0, 0, 0, 0, 0, 0, 0})
	if b, err := c.Next(ctx); err != nil || checkBatch(b, 0) != nil {
		t.Fatalf("batch 0: %v", err)
	}
	_, err := c.Next(ctx)
	if !errors.Is(err, shm.ErrProtocol) || !strings.Contains(err.Error(), "holds sequence 7, want 1") {
		t.Fatalf("%v, want ErrProtocol about sequence 7", err)
	}
	if _, err2 := c.Next(ctx); !errors.Is(err2, shm.ErrProtocol) {
		t.Fatalf("protocol error not final: %v", err2)
	}
}

func TestFailMessageTruncated(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, "msg", 2)
	p := create(t, cfg)
	c := open(t, cfg.Dir, "msg")
	msg := strings.Repeat("é", 600) + "\xff" // 1201 bytes, ending in invalid UTF-8
	if err := p.Fail(msg); err != nil {
		t.Fatal(err)
	}
	_, err := c.Next(testCtx(t))
	var pe *shm.ProducerError
	if !errors.As(err, &pe) {
		t.Fatalf("%v, want a ProducerError", err)
	}
	if len(pe.Message) != 1020 || !utf8.ValidString(pe.Message) || !strings.HasPrefix(msg, pe.Message) {
		t.Errorf("message of %d bytes (valid UTF-8: %v), want the first 510 runes", len(pe.Message), utf8.ValidString(pe.Message))
	}
	if err := p.Close(); err != nil {
		t.Errorf("Close after Fail: %v", err)
	}
}

func TestConsumerAttachedAndRemove(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, "att", 2)
	p := create(t, cfg)
	if p.ConsumerAttached() {
		t.Error("consumer attached before any opened")
	}
	c, err := shm.Open(cfg.Dir, "att")
	if err != nil {
		t.Fatal(err)
	}
	if !p.ConsumerAttached() {
		t.Error("consumer not seen attached")
	}
	c.Close()
	// The lock goes with the last descriptor of its open file description:
	// a parallel test's fork may hold a copy until its child execs
	// (close-on-exec), so allow that moment.
	for deadline := time.Now().Add(5 * time.Second); p.ConsumerAttached(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Error("consumer still seen 5 s after Close")
			break
		}
	}
	p.Close()
	// Remove does not unlink a ring that replaced ours.
	p2 := create(t, cfg)
	if err := p.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p2.Path()); err != nil {
		t.Fatalf("Remove of the old producer removed its successor: %v", err)
	}
	if err := p2.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p2.Path()); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("after Remove: %v", err)
	}
}

// TestSleepWhileEmpty: a consumer that sleeps while the ring is empty
// (in-process trainers) gets every batch in order, then the end of the
// stream as the futex waiter does, stops on a cancelled context, and
// never tells the producer it waits.
func TestSleepWhileEmpty(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		end  func(p *shm.Producer) error
		want func(error) bool
	}{
		{"closed", func(p *shm.Producer) error { return p.Close() }, func(err error) bool { return errors.Is(err, io.EOF) }},
		{"failed", func(p *shm.Producer) error { return p.Fail("disk on fire") }, func(err error) bool {
			var pe *shm.ProducerError
			return errors.As(err, &pe) && pe.Message == "disk on fire"
		}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			name := fmt.Sprintf("sw%d", i)
			cfg := testConfig(t, name, 2)
			p := create(t, cfg)
			c := open(t, cfg.Dir, name)
			c.SleepWhileEmpty()
			ctx, cancel := context.WithTimeout(testCtx(t), 60*time.Millisecond)
			waited := make(chan error, 1)
			go func() { _, err := c.Next(ctx); waited <- err }()
			time.Sleep(30 * time.Millisecond)
			if w := readWord(t, p.Path(), offConsumerWaiting); w != 0 {
				t.Errorf("consumer_waiting is %d: a sleeping consumer told the producer it waits", w)
			}
			if err := <-waited; !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Next on an empty ring with a deadline: %v", err)
			}
			cancel()
			go func() {
				for seq := range uint64(5) {
					time.Sleep(3 * time.Millisecond) // the consumer sleeps between batches
					if err := writeBatch(testCtx(t), p, seq); err != nil {
						t.Error(err)
						return
					}
				}
				if err := tt.end(p); err != nil {
					t.Error(err)
				}
			}()
			for seq := range uint64(5) {
				b, err := c.Next(testCtx(t))
				if err != nil {
					t.Fatal(err)
				}
				if err := checkBatch(b, seq); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := c.Next(testCtx(t)); !tt.want(err) {
				t.Fatalf("after the last batch: %v", err)
			}
			if c.Stats().EmptyWaits == 0 {
				t.Error("no empty wait counted")
			}
		})
	}
}
