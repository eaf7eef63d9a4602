package engine_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/spec"
)

// drawnPeer is an honest peer whose units are all verified, and which
// calls drawn once, at the first.
type drawnPeer struct {
	honestPeer
	once  sync.Once
	drawn func()
}

func (p *drawnPeer) Ran(u decode.Unit, out *column.Batch) (bool, func(string)) {
	p.once.Do(p.drawn)
	return p.honestPeer.Ran(u, out)
}

// TestVerifyCanceled: a run stopped while a verification waits for a
// local worker's place, or for a CPU, or computes, returns (with the
// context's error) rather than hanging: with one local worker, the
// gate holds every unit computed here from the first verification on
// until the run is canceled.
func TestVerifyCanceled(t *testing.T) {
	src := strings.ReplaceAll(hedgeJob, "INPUT", "../testdata/small")
	for _, wait := range []time.Duration{0, 5 * time.Millisecond, 30 * time.Millisecond} {
		dir := t.TempDir()
		job, err := spec.Parse("test.yaml", []byte(strings.ReplaceAll(src, "RINGDIR", dir)))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var stuck atomic.Bool
		p := &drawnPeer{honestPeer: honestPeer{up: unitProcessor(t, src)}}
		p.drawn = func() {
			stuck.Store(true)
			time.AfterFunc(wait, cancel)
		}
		gate := func(ctx context.Context) (func(), error) {
			if stuck.Load() {
				<-ctx.Done()
				return nil, ctx.Err()
			}
			return func() {}, nil
		}
		var wg sync.WaitGroup
		opts := engine.Options{Spill: p, Gate: gate, Linger: true, Progress: new(engine.Progress)}
		opts.Ready = func(rings []string) {
			for _, name := range rings {
				wg.Add(1)
				go func() { defer wg.Done(); readTensors(ctx, dir, name) }()
			}
		}
		done := make(chan error, 1)
		go func() { _, err := engine.Run(ctx, job, opts); done <- err }()
		select {
		case err := <-done:
			if p.ran.Load() > 0 && !errors.Is(err, context.Canceled) {
				t.Errorf("wait %v: the run returned %v", wait, err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("wait %v: the run did not return 20s after it was canceled mid-verification", wait)
		}
		cancel()
		wg.Wait()
	}
}
