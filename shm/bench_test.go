package shm_test

import (
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/lastmile/lastmile/shm"
)

// BenchmarkRingHandoff hands 4 MiB batches to a consumer in another
// process that reads every cache line of each and releases it. It uses
// shm.DefaultDir() (/dev/shm, or $LASTMILE_SHM_DIR): the real medium.
func BenchmarkRingHandoff(b *testing.B) {
	for _, payload := range []int{1 << 20, 4 << 20} {
		b.Run(fmt.Sprintf("payload=%dMiB", payload>>20), func(b *testing.B) {
			ctx := testCtx(b)
			name := fmt.Sprintf("lastmile-bench-%d-%d", os.Getpid(), payload)
			h, err := shm.StartHandoff(shm.HandoffConfig{Name: name, Payload: payload, Slots: 4})
			if err != nil {
				b.Fatal(err)
			}
			defer h.Close()
			cons := startBenchConsumer(b, h.Config().Dir, name)
			if err := h.WaitConsumer(ctx); err != nil {
				b.Fatal(err)
			}
			if _, err := h.Run(ctx, 8); err != nil { // warm up both sides
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.SetBytes(int64(payload))
			b.ResetTimer()
			res, err := h.Run(ctx, b.N)
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(res.Wait.Nanoseconds())/float64(b.N), "full-wait-ns/op")
			b.ReportMetric(float64(res.CPU.Nanoseconds())/float64(b.N), "cpu-ns/op")
			if err := h.Close(); err != nil {
				b.Fatal(err)
			}
			// The consumer's sleep on an empty ring, per batch (warm-up included).
			if w, err := strconv.ParseFloat(cons.expect(b, "CONSUMED")[1], 64); err == nil {
				b.ReportMetric(w, "empty-wait-ns/op")
			}
		})
	}
}

func startBenchConsumer(b *testing.B, dir, name string) *helper {
	return startHelper(b, "bench-consume", "H_DIR="+dir, "H_NAME="+name)
}

// TestHandoffFunctions runs the exported benchmark functions the way
// `lastmile bench` will: the producer here, the consumer in another process.
func TestHandoffFunctions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cons := startHelper(t, "bench-consume", "H_DIR="+dir, "H_NAME=hb")
	res, err := shm.RunHandoffProducer(testCtx(t), shm.HandoffConfig{Dir: dir, Name: "hb", Payload: 64 << 10, Slots: 2, Batches: 50})
	if err != nil {
		t.Fatal(err)
	}
	if res.Batches != 50 || res.Bytes != 50<<16 || res.Elapsed <= 0 || res.BytesPerSecond() <= 0 {
		t.Errorf("producer result %v", res)
	}
	if got := cons.expect(t, "CONSUMED")[0]; got != "54" { // 2×2 warm-up batches + 50
		t.Errorf("consumer got %s batches, want 54", got)
	}
	if _, err := os.Stat(dir + "/hb"); !os.IsNotExist(err) {
		t.Errorf("benchmark ring not removed: %v", err)
	}
	m, err := shm.MeasureMemcpy(dir, 64<<10, 2, 10)
	if err != nil || m.Bytes != 10<<16 {
		t.Errorf("MeasureMemcpy: %v, %v", m, err)
	}
}

// TestDrainConsumer: the trainers' stand-in of the spill and plan
// benchmarks releases every batch of a ring smaller than the stream (the
// producer would block otherwise), without parsing a slot, and returns
// nil at the end of the stream.
func TestDrainConsumer(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	cfg := testConfig(t, "drain", 2)
	p := create(t, cfg)
	done := make(chan error, 1)
	go func() { done <- shm.RunDrainConsumer(ctx, cfg.Dir, "drain") }()
	for seq := uint64(0); seq < 20; seq++ {
		if err := writeBatch(ctx, p, seq); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("drain consumer: %v", err)
	}
}
