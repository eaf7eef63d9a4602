package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/peer"
)

// PeerMeasure is what MeasurePeer found of one configured CPU peer.
type PeerMeasure struct {
	Addr    string `json:"addr"`
	Workers int    `json:"workers"` // units the peer computes at once: its cores
	// InFlight is the units this host kept in flight there for the rate:
	// its credits, at most what the peer admits from one requester.
	InFlight int `json:"in_flight"`
	// SamplesPerSec is the peer's output rows per second with this host's
	// credits busy there; PerCore is that over Workers.
	SamplesPerSec float64 `json:"samples_per_s"`
	PerCore       float64 `json:"samples_per_s_per_core"`
	// ReceiveCPUPerByte is this process's CPU, in seconds per byte of
	// unit output, to receive units fetched one at a time.
	ReceiveCPUPerByte float64 `json:"receive_cpu_s_per_byte"`
	BytesPerSample    float64 `json:"bytes_per_sample"`
	// WirePerByte is the bytes those units took on the wire per byte of
	// their output (the compact form, peer/compact.go).
	WirePerByte float64 `json:"wire_bytes_per_byte"`
	// RoundTrip is a unit's mean round trip when fetched alone.
	RoundTrip time.Duration `json:"round_trip_ns"`
	Units     int           `json:"units"`   // units fetched for the rate
	Seconds   float64       `json:"seconds"` // the rate's window
}

// PeerSource is what MeasurePeer needs of the spill machinery: a job's
// spiller and the pool it draws from (peer.NewSpiller, peer.NewPool).
type PeerSource struct {
	Spiller *peer.Spiller
	Pool    *peer.Pool
	Addr    string // the peer measured (one of the pool's)
}

// MeasurePeer measures one peer on the job's own units, in two steps:
// up to 8 units fetched one at a time, for this host's CPU to receive a
// byte and a unit's round trip; then units fetched with every credit busy
// for cfg.Seconds, for the peer's samples/s. Every unit goes to the peer
// (the spiller's policy must be always): one the peer refuses is asked
// for again, never run here.
func MeasurePeer(ctx context.Context, cfg PlanConfig, src PeerSource) (PeerMeasure, error) {
	cfg.defaults()
	m := PeerMeasure{Addr: src.Addr}
	info, err := src.Pool.Info(ctx, src.Addr)
	if err != nil {
		return m, err
	}
	m.Workers = info.Workers
	m.InFlight = max(min(src.Pool.Credits(), info.MaxInFlight), 1)
	up, err := engine.NewUnitProcessor(ctx, cfg.Job, nil, 1)
	if err != nil {
		return m, err
	}
	units := up.Units()
	up.Close()
	if len(units) == 0 {
		return m, errors.New("peer: the job has no units to measure a peer on")
	}
	// A unit the peer refuses (busy with other requesters' units) is
	// asked for again a little later, a few times.
	fetch := func(u decode.Unit, out *column.Batch) error {
		for try := 0; ; try++ {
			ran, err := src.Spiller.RunUnit(ctx, u, out, engine.Load{})
			switch {
			case err != nil:
				return err
			case ran:
				return nil
			case try == 50:
				return fmt.Errorf("peer %s did not take a unit in 50 tries (%s)", src.Addr, whyNot(src))
			}
			select {
			case <-time.After(20 * time.Millisecond):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	var out column.Batch
	if err := fetch(units[0], &out); err != nil { // the peer compiles the job once
		return m, err
	}
	var bytes, rows int64
	n := min(len(units), 8)
	wire0 := wireBytes(src)
	cpu0, t0 := processCPU(), time.Now()
	for _, u := range units[:n] {
		if err := fetch(u, &out); err != nil {
			return m, err
		}
		bytes += int64(out.Bytes())
		rows += int64(out.Rows)
	}
	m.RoundTrip = time.Since(t0) / time.Duration(n)
	if bytes > 0 {
		m.ReceiveCPUPerByte = (processCPU() - cpu0) / float64(bytes)
		m.WirePerByte = float64(wireBytes(src)-wire0) / float64(bytes)
	}
	if rows > 0 {
		m.BytesPerSample = float64(bytes) / float64(rows)
	}
	m.Units, m.Seconds, m.SamplesPerSec, err = peerRate(ctx, fetch, units, m.InFlight, cfg.Seconds)
	m.PerCore = m.SamplesPerSec / float64(max(m.Workers, 1))
	return m, err
}

// wireBytes is what the measured peer's units have taken on the wire so
// far.
func wireBytes(src PeerSource) int64 {
	for _, st := range src.Pool.Stats() {
		if st.Addr == src.Addr {
			return st.WireBytes
		}
	}
	return 0
}

// peerRate fetches units round robin on credits goroutines for about
// seconds and returns the units fetched, the window and output rows/s.
func peerRate(ctx context.Context, fetch func(decode.Unit, *column.Batch) error, units []decode.Unit,
	inflight int, seconds float64) (int, float64, float64, error) {
	var next, done, rows atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	t0 := time.Now()
	stop := t0.Add(time.Duration(seconds * float64(time.Second)))
	for range inflight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out column.Batch
			for time.Now().Before(stop) && ctx.Err() == nil {
				u := units[int(next.Add(1)-1)%len(units)]
				if err := fetch(u, &out); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				done.Add(1)
				rows.Add(int64(out.Rows))
			}
		}()
	}
	wg.Wait()
	secs := time.Since(t0).Seconds()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return int(done.Load()), secs, float64(rows.Load()) / secs, firstErr
}

// whyNot says why the spiller kept a unit: its declines, and the peer's
// last error as the pool saw it.
func whyNot(src PeerSource) string {
	why := fmt.Sprintf("declined: %v", src.Spiller.Stats().Declined())
	for _, st := range src.Pool.Stats() {
		if st.Addr == src.Addr && (st.LastError != "" || st.Refused > 0) {
			why += fmt.Sprintf("; %d refused, last error: %s", st.Refused, st.LastError)
		}
	}
	return why
}
