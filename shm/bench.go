package shm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// The ring's benchmark, as a library so that `lastmile bench` can run it:
// the CLI runs RunHandoffProducer (or the Handoff steps) in one process and
// re-executes itself to run RunHandoffConsumer in another. MeasureMemcpy is
// the reference the handoff is compared with: the producer's copy alone.

// BenchResult is the outcome of a measurement.
type BenchResult struct {
	Batches int64
	Bytes   int64
	Elapsed time.Duration
	// Wait is the time the measured side slept: the producer on a full
	// ring, or the consumer on an empty one.
	Wait time.Duration
	// CPU is the user and system time the measuring process used meanwhile.
	// Unlike Elapsed it hardly depends on what else the host runs, which
	// makes it the fairer comparison on a busy machine.
	CPU time.Duration
}

// processCPU returns the user and system time this process has used.
func processCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BytesPerSecond returns Bytes / Elapsed.
func (r BenchResult) BytesPerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Bytes) / r.Elapsed.Seconds()
}

func (r BenchResult) String() string {
	return fmt.Sprintf("%d batches, %d bytes in %v: %.0f MB/s (waited %v, cpu %v)",
		r.Batches, r.Bytes, r.Elapsed.Round(time.Microsecond), r.BytesPerSecond()/1e6, r.Wait.Round(time.Microsecond), r.CPU.Round(time.Microsecond))
}

// HandoffConfig describes a handoff measurement.
type HandoffConfig struct {
	Dir     string // default DefaultDir()
	Name    string // ring name; default "lastmile-bench-PID"
	Payload int    // bytes per batch; default 4 MiB
	Slots   int    // default 4
	Batches int    // measured batches; default 256
}

func (c *HandoffConfig) defaults() {
	if c.Dir == "" {
		c.Dir = DefaultDir()
	}
	if c.Name == "" {
		c.Name = "lastmile-bench-" + strconv.Itoa(os.Getpid())
	}
	if c.Payload <= 0 {
		c.Payload = 4 << 20
	}
	if c.Slots <= 0 {
		c.Slots = 4
	}
	if c.Batches <= 0 {
		c.Batches = 256
	}
}

// Handoff is the producer side of a handoff measurement: a ring whose
// schema is one dense uint8 field "payload" of Payload bytes per row, one
// row per batch.
type Handoff struct {
	p   *Producer
	src []byte
	cfg HandoffConfig
}

// StartHandoff creates the benchmark ring. Start the consumer (another
// process running RunHandoffConsumer on cfg.Dir and cfg.Name) next.
func StartHandoff(cfg HandoffConfig) (*Handoff, error) {
	cfg.defaults()
	fields := []Field{{Name: "payload", Kind: Dense, DType: Uint8, Dims: []int64{int64(cfg.Payload)}}}
	p, err := Create(Config{
		Dir:      cfg.Dir,
		Name:     cfg.Name,
		Slots:    cfg.Slots,
		SlotSize: SlotBytes(1, []int64{int64(cfg.Payload)}),
		Fields:   fields,
	})
	if err != nil {
		return nil, err
	}
	src := make([]byte, cfg.Payload)
	for i := range src {
		src[i] = byte(i*7 + 1)
	}
	return &Handoff{p: p, src: src, cfg: cfg}, nil
}

// Config returns the configuration with its defaults filled in.
func (h *Handoff) Config() HandoffConfig { return h.cfg }

// WaitConsumer waits until a consumer has attached.
func (h *Handoff) WaitConsumer(ctx context.Context) error {
	for !h.p.ConsumerAttached() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("ring %q: wait for the benchmark consumer: %w", h.p.name, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
	return nil
}

// Run hands off n batches, each a copy of the payload into a slot, and
// returns once the consumer has released them all.
func (h *Handoff) Run(ctx context.Context, n int) (BenchResult, error) {
	p := h.p
	before := p.Stats().FullWait
	cpu := processCPU()
	start := time.Now()
	for i := 0; i < n; i++ {
		s, err := p.Acquire(ctx)
		if err != nil {
			return BenchResult{}, err
		}
		s.SetRows(1)
		s.SetCursor(Cursor{BatchIndex: s.Seq()})
		dst, err := s.Add(0, RoleDense, Uint8, 1, int64(len(h.src)))
		if err != nil {
			p.Discard(s)
			return BenchResult{}, err
		}
		copy(dst, h.src)
		if err := p.Publish(s); err != nil {
			return BenchResult{}, err
		}
	}
	if err := p.WaitDrained(ctx); err != nil {
		return BenchResult{}, err
	}
	return BenchResult{
		Batches: int64(n),
		Bytes:   int64(n) * int64(len(h.src)),
		Elapsed: time.Since(start),
		Wait:    p.Stats().FullWait - before,
		CPU:     processCPU() - cpu,
	}, nil
}

// Close ends the stream and removes the ring.
func (h *Handoff) Close() error {
	err := h.p.Close()
	if rerr := h.p.Remove(); err == nil {
		err = rerr
	}
	return err
}

// RunHandoffProducer creates the ring, waits for a consumer to attach
// (start it as another process once the ring exists, or before: the
// consumer waits for the ring), hands off a warm-up of 2×Slots batches and
// then cfg.Batches measured ones, and removes the ring.
func RunHandoffProducer(ctx context.Context, cfg HandoffConfig) (BenchResult, error) {
	h, err := StartHandoff(cfg)
	if err != nil {
		return BenchResult{}, err
	}
	defer h.Close()
	if err := h.WaitConsumer(ctx); err != nil {
		return BenchResult{}, err
	}
	if _, err := h.Run(ctx, 2*h.cfg.Slots); err != nil {
		return BenchResult{}, err
	}
	res, err := h.Run(ctx, h.cfg.Batches)
	if err != nil {
		return BenchResult{}, err
	}
	return res, h.Close()
}

// waitOpen attaches to ring dir/name, waiting for it to exist.
func waitOpen(ctx context.Context, dir, name string) (*Consumer, error) {
	for {
		c, err := Open(dir, name)
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(time.Millisecond):
		}
	}
}

// RunDrainConsumer attaches to ring dir/name (waiting for it to exist) and
// releases every batch unread until the end of the stream: a trainer's
// stand-in whose own cost should be next to nothing, where the trainer's
// reading is not what is measured. Its slots are not even parsed: on the
// example pipeline, checking each batch's offsets was half of the
// stand-in's CPU, taken from whichever core it shares.
func RunDrainConsumer(ctx context.Context, dir, name string) error {
	c, err := waitOpen(ctx, dir, name)
	if err != nil {
		return err
	}
	defer c.Close()
	c.unread = true
	for {
		if _, err := c.Next(ctx); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// sink keeps the consumer's reads from being optimized away.
var sink byte

// RunHandoffConsumer attaches to the benchmark ring dir/name (waiting for
// it to exist), reads one byte of every 64-byte cache line of every batch,
// releases it, and returns at the end of the stream. Elapsed runs from the
// first batch to the end.
func RunHandoffConsumer(ctx context.Context, dir, name string) (BenchResult, error) {
	c, err := waitOpen(ctx, dir, name)
	if err != nil {
		return BenchResult{}, err
	}
	defer c.Close()
	var res BenchResult
	var start time.Time
	var cpu time.Duration
	var acc byte
	for {
		b, err := c.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return res, err
		}
		if res.Batches == 0 {
			start, cpu = time.Now(), processCPU()
		}
		for _, t := range b.Tensors {
			acc += touchLines(t.Data)
			res.Bytes += int64(len(t.Data))
		}
		res.Batches++
	}
	sink += acc
	if res.Batches > 0 {
		res.Elapsed = time.Since(start)
		res.CPU = processCPU() - cpu
	}
	res.Wait = c.Stats().EmptyWait
	return res, nil
}

// touchLines reads one byte of every 64-byte line of b.
func touchLines(b []byte) byte {
	var acc byte
	for i := 0; i < len(b); i += 64 {
		acc += b[i]
	}
	return acc
}

// shmRegion is a pre-faulted shared mapping of an unlinked file in dir: the
// memory a ring's slots live in, without the ring.
type shmRegion struct{ mem []byte }

func newShmRegion(dir string, size int64) (*shmRegion, error) {
	f, err := os.CreateTemp(dir, ".lastmile-memcpy-*")
	if err != nil {
		return nil, fmt.Errorf("memcpy region: %w", err)
	}
	defer f.Close()
	os.Remove(f.Name())
	if err := reserve(int(f.Fd()), size); err != nil {
		return nil, fmt.Errorf("memcpy region: reserve %d bytes in %s: %w", size, dir, err)
	}
	mem, err := mapFile(int(f.Fd()), size, false)
	if err != nil {
		return nil, fmt.Errorf("memcpy region: %w", err)
	}
	prefault(mem)
	return &shmRegion{mem: mem}, nil
}

func (r *shmRegion) close() { unix.Munmap(r.mem) }

// MeasureMemcpy measures the reference for the handoff: copying size bytes
// from the heap into one of slots size-byte areas of a pre-faulted shared
// mapping in dir ("" means DefaultDir()), round robin, iters times.
func MeasureMemcpy(dir string, size, slots, iters int) (BenchResult, error) {
	if dir == "" {
		dir = DefaultDir()
	}
	if size <= 0 || slots <= 0 || iters <= 0 {
		return BenchResult{}, fmt.Errorf("memcpy: size %d, slots %d and iters %d must be positive", size, slots, iters)
	}
	r, err := newShmRegion(filepath.Clean(dir), int64(size)*int64(slots))
	if err != nil {
		return BenchResult{}, err
	}
	defer r.close()
	src := make([]byte, size)
	for i := range src {
		src[i] = byte(i*7 + 1)
	}
	cpu := processCPU()
	start := time.Now()
	for i := 0; i < iters; i++ {
		off := (i % slots) * size
		copy(r.mem[off:off+size], src)
	}
	return BenchResult{Batches: int64(iters), Bytes: int64(iters) * int64(size), Elapsed: time.Since(start), CPU: processCPU() - cpu}, nil
}
