package peer

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/engine"
)

// lying makes a test server change a value of every unit with rows
// before its checksum: well-formed output of the right shape and a
// checksum that matches, but other values. It counts the units it
// changed.
func lying(n *atomic.Int64) func(*Server) {
	return func(s *Server) {
		s.lie = func(b *column.Batch) {
			if c := &b.Columns[0]; b.Rows > 0 && len(c.Data) > 0 {
				c.Data[0] ^= 0x5a
				n.Add(1)
			}
		}
	}
}

// TestVerifyQuarantinesLyingPeer: at peers.verify 1 a certified peer
// that sends other values is caught at its first unit with rows: the
// unit is computed here, the batches are the local run's byte for byte,
// the mismatch is counted and logged at ERROR with the peer's address
// and certificate subject, and the peer gets no unit again, from this
// job or the next.
func TestVerifyQuarantinesLyingPeer(t *testing.T) {
	f := newFixture(t)
	want := f.run(f.job("local"), nil)
	var lied atomic.Int64
	s, addr := f.server(lying(&lied))
	p := f.pool(f.ca.issue("gpu-host"), addr)
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	job := f.job("spill")
	sp := f.spiller(p, job, SpillerConfig{Verify: 1, Logger: log})
	same(t, "a lying peer verified", f.run(job, sp), want)
	if lied.Load() == 0 {
		t.Fatal("the peer changed no unit: the test shows nothing")
	}
	st := p.Stats()[0]
	if st.Mismatches == 0 || st.Quarantined == "" || st.Healthy || sp.Stats().Mismatches.Load() != st.Mismatches {
		t.Errorf("the lying peer: %+v; the job counted %d mismatches", st, sp.Stats().Mismatches.Load())
	}
	if v := sp.Stats().Verified.Load(); v != sp.Stats().Spilled.Load() {
		t.Errorf("%d units verified of %d spilled at verify 1", v, sp.Stats().Spilled.Load())
	}
	line := logs.String()
	if !strings.Contains(line, "level=ERROR") || !strings.Contains(line, "peer="+addr) || !strings.Contains(line, "CN=peer") ||
		!strings.Contains(line, "row_group=") {
		t.Errorf("the mismatch's log: %s", line)
	}
	served := s.Stats().Units.Load()
	sp2 := f.spiller(p, job, SpillerConfig{Verify: 1})
	same(t, "after the quarantine", f.run(job, sp2), want)
	if n := s.Stats().Units.Load(); n != served || sp2.Stats().Spilled.Load() != 0 {
		t.Errorf("the quarantined peer served %d more units, %d spilled", n-served, sp2.Stats().Spilled.Load())
	}
	t.Logf("lied %d, served %d; peer %+v", lied.Load(), served, st)
}

// TestVerifyNegativeNone: SpillerConfig.Verify negative verifies
// nothing, and the lying peer's values are believed; 0 is DefaultVerify.
func TestVerifyNegativeNone(t *testing.T) {
	f := newFixture(t)
	var lied atomic.Int64
	_, addr := f.server(lying(&lied))
	p := f.pool(f.ca.issue("gpu-host"), addr)
	job := f.job("spill")
	sp := f.spiller(p, job, SpillerConfig{Verify: -1})
	f.run(job, sp)
	if sp.Stats().Spilled.Load() == 0 {
		t.Fatal("nothing spilled: the test shows nothing")
	}
	if v, st := sp.Stats().Verified.Load(), p.Stats()[0]; v != 0 || st.Mismatches != 0 || st.Quarantined != "" {
		t.Errorf("%d units verified; peer %+v", v, st)
	}
	if d := f.spiller(p, job, SpillerConfig{}); d.verify != DefaultVerify {
		t.Errorf("Verify 0 verifies %v, want DefaultVerify %v", d.verify, DefaultVerify)
	}
}

// TestQuarantinedPeersUnitsComputedHere: once a peer is quarantined,
// every unit of it that answers is verified whatever the share (so
// computed here, and its local output used on a mismatch), it is picked
// for no unit, and it stays quarantined when DNS drops it and lists it
// again.
func TestQuarantinedPeersUnitsComputedHere(t *testing.T) {
	f := newFixture(t)
	const addr = "127.0.0.1:1" // never dialled: the pool connects lazily
	p := f.pool(f.ca.issue("gpu-host"), addr)
	sp := f.spiller(p, f.job("spill"), SpillerConfig{Verify: -1})
	r := p.peers[addr]
	u, out := f.hostileUnit(), new(column.Batch)
	sp.ranAt(out, r, "")
	if verify, _ := sp.Ran(u, out); verify {
		t.Fatal("a unit drawn at Verify -1")
	}
	sp.ranAt(out, r, "")
	p.quarantine(r, "", u, "column a: values differ")
	verify, mismatch := sp.Ran(u, out)
	if !verify || mismatch == nil || len(sp.ranBy) != 0 {
		t.Fatalf("a quarantined peer's unit: verify %v, mismatch %v, %d remembered", verify, mismatch != nil, len(sp.ranBy))
	}
	if got := p.pick(""); got != nil {
		t.Fatalf("picked the quarantined peer %s", got.addr)
	}
	if err := p.set(nil, ""); err != nil {
		t.Fatal(err)
	}
	if err := p.set([]string{addr}, ""); err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); len(st) != 1 || st[0].Healthy || st[0].Quarantined == "" || p.pick("") != nil || !p.peers[addr].quarantined {
		t.Fatalf("listed again, the peer is %+v", st)
	}
}

// TestQuarantineOfADroppedPeerListedAgain: a peer whose unit is being
// verified may leave the pool meanwhile (DNS drops it, its last unit
// done) and be listed again, as a new remote under the same address,
// before the mismatch is found: the quarantine must reach the peer the
// pool lists now, not only the one that answered, or the liar gets
// units again, unverified.
func TestQuarantineOfADroppedPeerListedAgain(t *testing.T) {
	f := newFixture(t)
	const addr = "127.0.0.1:1" // never dialled: the pool connects lazily
	p := f.pool(f.ca.issue("gpu-host"), addr)
	sp := f.spiller(p, f.job("spill"), SpillerConfig{Verify: -1})
	old := p.peers[addr]
	// Its unit answered (inflight 0), then DNS dropped it and listed it
	// again while the unit was verified here.
	if err := p.set(nil, ""); err != nil {
		t.Fatal(err)
	}
	if err := p.set([]string{addr}, ""); err != nil {
		t.Fatal(err)
	}
	if p.peers[addr] == old {
		t.Fatal("the peer was not dropped and listed anew: the test shows nothing")
	}
	u := f.hostileUnit()
	p.quarantine(old, "", u, "column a: values differ")
	if got := p.pick(""); got != nil {
		t.Fatalf("picked %s, quarantined under its address", got.addr)
	}
	if st := p.Stats(); len(st) != 1 || st[0].Healthy || st[0].Quarantined == "" {
		t.Errorf("the peer listed now: %+v", st)
	}
	out := new(column.Batch)
	sp.ranAt(out, p.peers[addr], "")
	if verify, _ := sp.Ran(u, out); !verify {
		t.Error("a unit of the peer listed now, quarantined under its address, is not verified")
	}
}

// TestQuarantinedPoolDeclinesAtOnce: with every peer quarantined (for
// the daemon's life) a unit is declined at once, not after waiting for
// a credit no peer will ever give: each spill worker's unit waited
// creditWait (20ms to 1s) before it was computed here, for every unit
// of every job, while the unit held up the reorder stage.
func TestQuarantinedPoolDeclinesAtOnce(t *testing.T) {
	f := newFixture(t)
	const addr = "127.0.0.1:1" // never dialled: the pool connects lazily
	p := f.pool(f.ca.issue("gpu-host"), addr)
	sp := f.spiller(p, f.job("spill"), SpillerConfig{Verify: -1})
	p.quarantine(p.peers[addr], "", f.hostileUnit(), "column a: values differ")
	start := time.Now()
	for range 5 {
		var out column.Batch
		if ran, err := sp.RunUnit(context.Background(), f.hostileUnit(), &out, engine.Load{LocalWorkers: 1}); ran || err != nil {
			t.Fatalf("ran %v, %v on a quarantined peer", ran, err)
		}
	}
	took := time.Since(start)
	if d := sp.Stats().Declined(); d["every peer is quarantined"] != 5 || took >= 5*sp.creditWait() {
		t.Errorf("5 units declined in %v (a credit wait is %v): %v", took, sp.creditWait(), d)
	}
}

// TestCreditWaitLeavesQuarantinedOut: how long a unit waits for a
// credit follows the peers that may still answer: a quarantined peer's
// round trip (which may be why it was slow to be caught) does not make
// every unit wait on the others longer, for the daemon's life.
func TestCreditWaitLeavesQuarantinedOut(t *testing.T) {
	f := newFixture(t)
	const liar, honest = "127.0.0.1:1", "127.0.0.1:2" // never dialled
	p := f.pool(f.ca.issue("gpu-host"), liar, honest)
	sp := f.spiller(p, f.job("spill"), SpillerConfig{Verify: -1})
	p.mu.Lock()
	p.peers[liar].latency, p.peers[honest].latency = 900*time.Millisecond, 30*time.Millisecond
	p.mu.Unlock()
	p.quarantine(p.peers[liar], "", f.hostileUnit(), "column a: values differ")
	if w := sp.creditWait(); w != 30*time.Millisecond {
		t.Errorf("a unit waits %v for a credit, want the usable peer's 30ms", w)
	}
}
