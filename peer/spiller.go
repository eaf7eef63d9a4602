package peer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"gopkg.in/yaml.v3"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/iceberg"
	"github.com/lastmile/lastmile/roots"
	"github.com/lastmile/lastmile/spec"
)

// ErrNotSpillable says a job cannot run on peers: a file it needs is
// outside every data root of this host, or a side table is an Iceberg
// table (icebergSideWhy).
var ErrNotSpillable = errors.New("job cannot spill")

// SpillerConfig tunes one job's spilling.
type SpillerConfig struct {
	// User is whom the job's files are read for (required): its
	// submitter, or Self() for a job this process runs for its own user.
	// Peers open the job's files as this user (Ticket.User).
	User *User
	// Slots is the most units on peers at once for this job; default the
	// pool's credits times its peers, at most 32.
	Slots int
	// RecvSecondsPerGB is what receiving a unit's output costs this host's
	// CPU, per GB; default 1.5 (this package's receive path with mutual
	// TLS, as lastmile bench -only spill measures it on a 2-vCPU VM:
	// 1.3-1.6). A unit spills only when receiving it is
	// expected to cost less than MaxCostRatio of computing it here.
	RecvSecondsPerGB float64
	MaxCostRatio     float64 // default 0.8
	// MinDeadline is the least time a peer gets for a unit before the
	// unit is run locally instead; default 10s. The deadline is 8 times
	// the peer's usual round trip when that is longer, and at most 8
	// times MinDeadline (maxDeadlineFactor).
	MinDeadline time.Duration
	// Hedge is how long a unit may wait on its peer before the engine
	// starts it here as well, when a local worker is idle (engine.Hedger;
	// the first complete result wins). 0: three times the peers' usual
	// round trip, at least 50ms, once one is known; negative: never.
	Hedge time.Duration
	// Verify is the share of the units a peer ran that are computed here
	// as well and compared byte for byte before they are used
	// (engine.Verifier, quarantine.go): 0 < Verify <= 1; 0: DefaultVerify;
	// negative: none. A peer caught sending other values is quarantined.
	Verify float64
	Policy PolicyConfig
	Logger *slog.Logger
}

// Spiller is one job's engine.Spill: it names units portably, decides
// when to spill (policy.go), and runs units on the pool's peers.
type Spiller struct {
	cfg    SpillerConfig
	pool   *Pool
	roots  *roots.Roots
	job    string
	hash   string
	pol    *policy
	log    *slog.Logger
	outRow atomic.Uint64 // float64 bits: moving mean of output bytes per input row of spilled units
	stats  SpillStats
	verify float64 // the share of units verified, 0 to 1 (SpillerConfig.Verify)

	mu      sync.Mutex
	plan    json.RawMessage       // the run's columns (PlanColumns), sent in every ticket; set by Planned
	outputs []engine.OutField     // the run's output columns, which a unit's stream must have; set by Outputs
	ranBy   map[*column.Batch]ran // the peer each unit's output came from, until Ran (quarantine.go)
	// denied is set once a peer refused a unit of the job as one it may
	// not read (PermissionDenied): its user may not read a file of the
	// job on the peers, or a file lies outside their roots. The job's
	// units then all run here.
	denied atomic.Bool
}

// SpillStats counts one job's spilling.
type SpillStats struct {
	Spilled, Bytes, Fallbacks atomic.Int64
	// Verified counts the spilled units drawn to be computed here as
	// well and compared (the engine's Progress.UnitsVerified, those it
	// did: a unit whose output the engine refused anyway is computed
	// here once); Mismatches, those whose values differed (quarantine.go).
	Verified, Mismatches atomic.Int64
	// RecvCPUNanos is this host's CPU receiving the spilled units, as
	// PeerStats.RecvCPUSeconds counts it.
	RecvCPUNanos atomic.Int64
	mu           sync.Mutex
	declined     map[string]int64
}

// Declined returns how many units were kept local, by reason.
func (s *SpillStats) Declined() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int64{}
	for k, v := range s.declined {
		out[k] = v
	}
	return out
}

func (s *SpillStats) decline(why string) {
	s.mu.Lock()
	if s.declined == nil {
		s.declined = map[string]int64{}
	}
	s.declined[why]++
	s.mu.Unlock()
}

var _ engine.Spill = (*Spiller)(nil)

// NewSpiller prepares job for spilling to pool's peers; text is its spec
// as submitted. r is this host's data roots: every side table must lie
// beneath one, and units whose file lies beneath none run locally.
func NewSpiller(pool *Pool, r *roots.Roots, text string, job *spec.Job, cfg SpillerConfig) (*Spiller, error) {
	if cfg.User == nil {
		return nil, errors.New("BUG: spilling a job for no user")
	}
	text, err := portableJob(r, text, job)
	if err != nil {
		return nil, err
	}
	if cfg.Slots <= 0 {
		pool.mu.Lock()
		cfg.Slots = min(32, pool.cfg.Credits*max(1, len(pool.peers)))
		pool.mu.Unlock()
	}
	if cfg.RecvSecondsPerGB <= 0 {
		cfg.RecvSecondsPerGB = 1.5
	}
	if cfg.MaxCostRatio <= 0 {
		cfg.MaxCostRatio = 0.8
	}
	if cfg.MinDeadline <= 0 {
		cfg.MinDeadline = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Spiller{cfg: cfg, pool: pool, roots: r, job: text, hash: jobHash([]byte(text)), log: cfg.Logger}
	switch {
	case cfg.Verify == 0:
		s.verify = DefaultVerify
	case cfg.Verify > 0:
		s.verify = min(cfg.Verify, 1)
	}
	s.pol = newPolicy(cfg.Policy, s.log)
	return s, nil
}

// icebergSideWhy is why a job with an Iceberg side table is not
// spilled, and what to do about it. A peer would read the table's
// snapshot by the locations its metadata holds, which are this host's
// paths (a peer's roots may lie elsewhere, and it reads ROOT/REL names
// only), and a REST catalog's through a catalog it may not reach, as
// whom the kernel cannot say; so it could not be made to read exactly
// the snapshot the job pinned, as the job's user.
const icebergSideWhy = "its metadata names the table's files by this host's paths; to spill the job, join a Parquet copy of the table's snapshot beneath a data root"

// portableJob returns the spec text with its side tables named as
// ROOT/REL. text is the job's spec as submitted; job is what it parsed to
// (its tables resolved against the spec's directory). Only the table
// scalars of the text change, so the peer parses exactly the pipeline the
// requester runs.
func portableJob(r *roots.Roots, text string, job *spec.Job) (string, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil || len(doc.Content) == 0 {
		return "", fmt.Errorf("job spec: %v", err)
	}
	pipeline := mapValue(doc.Content[0], "pipeline")
	for i, op := range job.Pipeline {
		if op.Kind != "join" {
			continue
		}
		if iceberg.IsRef(op.Join.Table) {
			return "", fmt.Errorf("%w: side table %s is an Iceberg table, which peers do not read: every unit of the job runs here (%s)",
				ErrNotSpillable, op.Join.Table, icebergSideWhy)
		}
		name, ok := r.Locate(op.Join.Table)
		if !ok {
			return "", fmt.Errorf("%w: side table %s is outside this host's data roots (%v)", ErrNotSpillable, op.Join.Table, r.Names())
		}
		if pipeline == nil || i >= len(pipeline.Content) {
			return "", fmt.Errorf("BUG: pipeline[%d] not in the spec text", i)
		}
		table := mapValue(mapValue(pipeline.Content[i], "join"), "table")
		if table == nil {
			return "", fmt.Errorf("BUG: pipeline[%d].join.table not in the spec text", i)
		}
		*table = yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: name}
	}
	b, err := yaml.Marshal(&doc)
	if err != nil {
		return "", err
	}
	if _, err := spec.Parse("", b); err != nil {
		return "", fmt.Errorf("BUG: the portable spec does not parse: %w", err)
	}
	return string(b), nil
}

// mapValue returns the value of key in mapping n, or nil.
func mapValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// Slots implements engine.Spill.
func (s *Spiller) Slots() int { return s.cfg.Slots }

// Planned implements engine.Spill: every later ticket carries the plan's
// columns, which its peer computes the unit by.
func (s *Spiller) Planned(plan *decode.Plan) {
	b, err := json.Marshal(PlanColumns{Fields: plan.Fields, Partitions: plan.Partitions})
	if err != nil {
		s.log.Warn("spill: the plan's columns do not encode; peers plan each unit's file themselves", "err", err)
		b = nil
	}
	s.mu.Lock()
	s.plan = b
	s.mu.Unlock()
}

var _ engine.SpillOutputs = (*Spiller)(nil)

// Outputs implements engine.SpillOutputs: a unit's stream whose columns
// are not fields is refused before any of its rows is assembled.
func (s *Spiller) Outputs(fields []engine.OutField) {
	s.mu.Lock()
	s.outputs = fields
	s.mu.Unlock()
}

// Stats returns the job's spill counters.
func (s *Spiller) Stats() *SpillStats { return &s.stats }

// PolicyState says whether spill is on, since when, and why.
func (s *Spiller) PolicyState() (on bool, since time.Time, reason string, switches int64) {
	return s.pol.state()
}

// Watch implements engine.Spill: it samples the local side for the
// policy until ctx is done.
func (s *Spiller) Watch(ctx context.Context, load func() engine.Load) { s.pol.watch(ctx, load) }

// RunUnit implements engine.Spill.
func (s *Spiller) RunUnit(ctx context.Context, u decode.Unit, out *column.Batch, load engine.Load) (bool, error) {
	if on, why := s.pol.current(); !on {
		s.stats.decline(why)
		return false, nil
	}
	if s.denied.Load() {
		s.stats.decline("a peer may not read the job's files")
		return false, nil
	}
	name, ok := s.roots.Locate(u.File)
	if !ok {
		s.stats.decline("outside roots")
		return false, nil
	}
	if !s.worth(u, load) {
		s.stats.decline("costs more to receive than to compute")
		return false, nil
	}
	if s.pool.allQuarantined() {
		s.stats.decline("every peer is quarantined")
		return false, nil
	}
	if !peerSooner(s.pool.leastInFlight(), load) {
		s.stats.decline("the local workers finish it sooner")
		return false, nil
	}
	pu := u
	pu.File = name
	s.mu.Lock()
	plan, outputs := s.plan, s.outputs
	s.mu.Unlock()
	ticket, err := marshalTicket(s.job, s.hash, plan, pu, WireCompact, *s.cfg.User)
	if err != nil || len(ticket) > maxTicket { // a unit with very many deleted rows: a peer would refuse it
		s.stats.decline("ticket too large")
		return false, nil
	}
	var lastErr error
	tried := ""
	for range 2 { // a second peer once, then local
		r := s.pool.pickWait(ctx, tried, s.creditWait())
		if r == nil {
			if lastErr == nil {
				s.stats.decline("no peer has credit")
			}
			break
		}
		cert, err := s.fetchFrom(ctx, r, ticket, u, outputs, out)
		if err == nil {
			s.ranAt(out, r, cert)
			return true, nil
		}
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		lastErr, tried = err, r.addr
		switch status.Code(err) {
		case codes.ResourceExhausted:
			lastErr = nil
		case codes.PermissionDenied:
			if !s.denied.Swap(true) {
				s.log.Warn("a peer may not read the job's files: its units run here", "peer", r.addr, "err", err)
			}
			s.stats.Fallbacks.Add(1)
			return false, err
		}
	}
	if lastErr != nil {
		s.stats.Fallbacks.Add(1)
	}
	return false, lastErr
}

var _ engine.Hedger = (*Spiller)(nil)

// HedgeAfter implements engine.Hedger (SpillerConfig.Hedge). A peer's
// usual round trip includes its queue, so a unit waits that long as a
// matter of course; three times it is a peer slower than it was.
func (s *Spiller) HedgeAfter() time.Duration {
	switch {
	case s.cfg.Hedge < 0:
		return 0
	case s.cfg.Hedge > 0:
		return s.cfg.Hedge
	}
	lat := s.pool.usualLatency()
	if lat <= 0 {
		return 0
	}
	return max(3*lat, 50*time.Millisecond)
}

// creditWait is how long a spill worker waits for a peer's credit before
// computing its unit locally: about a unit's round trip to the peers, at
// least 20 ms and at most 1 s.
func (s *Spiller) creditWait() time.Duration {
	var lat time.Duration
	s.pool.mu.Lock()
	for _, r := range s.pool.peers {
		if !r.quarantined { // it gives no credit again
			lat = max(lat, r.latency)
		}
	}
	s.pool.mu.Unlock()
	return min(max(lat, 20*time.Millisecond), time.Second)
}

// fetchFrom runs the unit at r within a deadline and learns from it; it
// returns the fingerprint of the certificate the output came with.
func (s *Spiller) fetchFrom(ctx context.Context, r *remote, ticket []byte, u decode.Unit, outputs []engine.OutField, out *column.Batch) (string, error) {
	s.pool.mu.Lock()
	lat := r.latency
	s.pool.mu.Unlock()
	// A peer that takes far longer than it usually does is treated as
	// failed: the unit is run locally and the late answer discarded whole.
	// The usual round trip is learned from the peer's own answers, so a
	// peer answering each unit just within its deadline would raise it
	// without end (eight-fold a step, hours after a dozen units): it is
	// held to maxDeadlineFactor times MinDeadline.
	deadline := min(max(s.cfg.MinDeadline, 8*lat), maxDeadlineFactor*s.cfg.MinDeadline)
	cctx, cancel := context.WithTimeout(ctx, deadline)
	t0 := time.Now()
	got, err := fetchRows(cctx, r, ticket, out, u.Rows, outputs)
	timedOut := errors.Is(cctx.Err(), context.DeadlineExceeded)
	cancel()
	if ctx.Err() != nil {
		// Given up here (a hedge won, the job stopped): not the peer's
		// failure, and what it sent is discarded.
		s.pool.abandon(r, errors.Is(context.Cause(ctx), engine.ErrHedged))
		return "", ctx.Err()
	}
	bytes := int64(0)
	switch {
	case err == nil:
		bytes = int64(out.Bytes())
	case timedOut && ctx.Err() == nil:
		err = fmt.Errorf("peer %s: no complete answer within %v: %w", r.addr, deadline, err)
	default:
		err = fmt.Errorf("peer %s: %w", r.addr, err)
	}
	s.pool.done(r, time.Since(t0), bytes, got, err)
	s.stats.RecvCPUNanos.Add(int64(got.cpu))
	if err != nil {
		s.log.Debug("spilled unit failed", "peer", r.addr, "file", u.File, "row_group", u.RowGroup, "err", err)
		return "", err
	}
	s.stats.Spilled.Add(1)
	s.stats.Bytes.Add(bytes)
	s.learn(float64(bytes) / float64(u.Rows))
	return got.cert, nil
}

// maxDeadlineFactor bounds a unit's deadline at a peer to this many
// MinDeadlines, whatever the peer's usual round trip.
const maxDeadlineFactor = 8

// learn updates the moving mean of output bytes per input row.
func (s *Spiller) learn(perRow float64) {
	for {
		old := s.outRow.Load()
		cur := float64frombits(old)
		next := perRow
		if cur > 0 {
			next = (7*cur + perRow) / 8
		}
		if s.outRow.CompareAndSwap(old, float64bits(next)) {
			return
		}
	}
}

// peerSooner reports whether a unit offered now should go to a peer with
// queued units already there (-1: no healthy peer) rather than stay
// here. Mid-epoch it should: both sides stay busy whichever takes it.
// At the end of an epoch the local workers run out of units while a peer
// still works through its queue, and the epoch ends with the last unit
// done. A unit queued behind q others at a peer is done after about q+1
// units' time; here, computed beside the LocalBusy units already claimed
// on LocalWorkers cores, after (LocalBusy+1)/LocalWorkers. Peer and local
// units are taken to cost the same (the same code on the same units). So
// a unit stays here when the epoch is ending (fewer units left than the
// peer's queue would take the local workers: UnitsLeft < q·LocalWorkers)
// and it would be done here sooner. Without local workers to compare
// with, or a healthy peer (picking one says why not), it does not
// decline.
func peerSooner(queued int, load engine.Load) bool {
	if load.LocalWorkers <= 0 || queued < 0 {
		return true
	}
	ending := load.UnitsLeft < queued*load.LocalWorkers
	localSooner := load.LocalBusy+1 < (queued+1)*load.LocalWorkers
	return !(ending && localSooner)
}

// worth reports whether receiving u's output is expected to cost this
// host less CPU than computing u: SPILL-NOTES.md's rule. Until both sides
// have been measured, it is. The cost of receiving a GB is the larger of
// the configured figure (which lastmile bench measures whole) and what
// this host's receiving goroutines have measured of their own part.
func (s *Spiller) worth(u decode.Unit, load engine.Load) bool {
	perRow := float64frombits(s.outRow.Load())
	if perRow == 0 || load.SecondsPerRow == 0 {
		return true
	}
	recv := perRow * float64(u.Rows) / 1e9 * max(s.cfg.RecvSecondsPerGB, s.measuredRecvPerGB())
	local := load.SecondsPerRow * float64(u.Rows)
	return recv < s.cfg.MaxCostRatio*local
}

// measuredRecvPerGB is the receiving goroutines' CPU seconds per GB of
// unit output received so far, or 0 before the first GB's tenth.
func (s *Spiller) measuredRecvPerGB() float64 {
	b := s.stats.Bytes.Load()
	if b < 1e8 {
		return 0
	}
	return float64(s.stats.RecvCPUNanos.Load()) / float64(b)
}
