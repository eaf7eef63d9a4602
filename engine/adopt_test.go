package engine_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/shm"
	"github.com/lastmile/lastmile/spec"
)

// TestHandoverEqualsUninterrupted stops a running job mid-stream by
// detaching its rings, starts a second Run that adopts them with the
// resume cursors DetachRings implies, and checks that consumers reading
// all along (never reopening) get exactly the batches of an uninterrupted
// run.
func TestHandoverEqualsUninterrupted(t *testing.T) {
	src := fmt.Sprintf(shuffled, "pad", 1000)
	handover(t, src, time.Millisecond, 12)
}

// TestHandoverMidPack hands over a job whose consumer takes batches as
// fast as they come, so the batcher is often packing when the old run's
// mapping is swapped for private zeros. The pipeline packs lists, a stack
// and a weighted jagged group through a shuffle window that spans units.
// Where in a slot the swap lands is left to timing here;
// TestPackSurvivesDetachMidSlot puts it at each point where a packer once
// read back what it wrote.
func TestHandoverMidPack(t *testing.T) {
	src := strings.ReplaceAll(fmt.Sprintf(windowJob, 500), "PIPELINE", windowPipelines["groups"])
	src = strings.Replace(src, "ring: {dir: RINGDIR, name: w, slots: 3}\ndecode: {workers: 2, max_unit_rows: 700}\n", "", 1)
	for i := range 3 {
		t.Run(fmt.Sprint(i), func(t *testing.T) { handover(t, src, 0, int64(3+9*i)) })
	}
}

// handover runs src uninterrupted, then again with consumers that take a
// batch every delay, detaches the rings once after batches have been
// read, and resumes in a second Run that adopts them; the consumers,
// reading all along, must get exactly the uninterrupted batches.
func handover(t *testing.T, src string, delay time.Duration, after int64) {
	t.Helper()
	full := runStreams(t, src, 2, nil)
	dir := t.TempDir()
	abs, _ := filepath.Abs("../testdata/small")
	text := strings.ReplaceAll(src, "DATA", abs) +
		fmt.Sprintf("ring: {dir: %s, name: h, slots: 3}\ndecode: {workers: 2, max_unit_rows: 700}\n", dir)
	job, err := spec.Parse("t.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	res := make([]rankStream, job.WorldSize)
	errs := make([]error, job.WorldSize)
	var read atomic.Int64
	var wg sync.WaitGroup
	resume := handOver(t, job, &wg, &read, after, func(r int, name string) {
		res[r], errs[r] = consumeSlowly(dir, name, &read, delay)
	})
	prog2 := new(engine.Progress)
	if _, err := engine.Run(context.Background(), job, engine.Options{Progress: prog2, Resume: resume}); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for r := range full {
		if errs[r] != nil {
			t.Fatalf("rank %d: %v", r, errs[r])
		}
		if !reflect.DeepEqual(res[r], full[r]) {
			t.Fatalf("rank %d (resumed at %v): %d batches, want the uninterrupted %d", r, resume[r], len(res[r].cursors), len(full[r].cursors))
		}
	}
}

// consumeSlowly reads a ring to its end, waiting delay after each batch.
func consumeSlowly(dir, name string, read *atomic.Int64, delay time.Duration) (rankStream, error) {
	var s rankStream
	c, err := shm.Open(dir, name)
	if err != nil {
		return s, err
	}
	defer c.Close()
	ctx := context.Background()
	for {
		b, err := c.Next(ctx)
		if errors.Is(err, io.EOF) {
			return s, nil
		}
		if err != nil {
			return s, err
		}
		ids := b.Tensor("row_id", shm.RoleDense)
		v := unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(ids.Data))), b.Rows)
		s.rows = append(s.rows, append([]int64(nil), v...))
		s.cursors = append(s.cursors, b.Cursor)
		read.Add(1)
		time.Sleep(delay)
	}
}

// handOver runs job until its trainers have read after batches (consume
// reads rank r's ring, in a goroutine of wg), then hands its rings over
// (detachFirstRun) and returns the cursors its ranks resume at.
func handOver(t *testing.T, job *spec.Job, wg *sync.WaitGroup, read *atomic.Int64, after int64, consume func(r int, name string)) []engine.Cursor {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	prog := new(engine.Progress)
	done := make(chan error, 1)
	go func() {
		_, err := engine.Run(ctx, job, engine.Options{Progress: prog, Ready: func(rings []string) {
			for r, name := range rings {
				wg.Add(1)
				go func() {
					defer wg.Done()
					consume(r, name)
				}()
			}
		}})
		done <- err
	}()
	return detachFirstRun(t, prog, read, after, cancel, done)
}

// detachFirstRun waits until read reaches after batches (20 s at most), then
// hands the first run's rings over (DetachRings), cancels it, checks that
// it ended canceled, and returns the cursors its ranks resume at.
func detachFirstRun(t *testing.T, prog *engine.Progress, read *atomic.Int64, after int64, cancel func(), done <-chan error) []engine.Cursor {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for read.Load() < after && time.Now().Before(deadline) {
		time.Sleep(100 * time.Microsecond)
	}
	infos, err := prog.DetachRings()
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("first run: %v, want canceled", err)
	}
	resume := make([]engine.Cursor, len(infos))
	for r, in := range infos {
		if in.HasLast {
			resume[r] = engine.NextCursor(in.Last)
		}
	}
	return resume
}
