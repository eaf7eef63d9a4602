package peer

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lastmile/lastmile/column"
)

// TestQuarantineFollowsTheCertificate: a peer caught lying is
// quarantined by its certificate too: another address presenting the
// same certificate (the same host under a second address, or after its
// IP changed, or a host sharing its key) gets no unit once it has shown
// it, and any unit it answered meanwhile is verified; a peer of another
// certificate keeps its units.
func TestQuarantineFollowsTheCertificate(t *testing.T) {
	f := newFixture(t)
	want := f.run(f.job("local"), nil)
	shared, own := f.ca.issue("peer-shared"), f.ca.issue("peer-own")
	var lied atomic.Int64
	_, liar := f.serverOf(shared, lying(&lied))
	twin, twinAddr := f.serverOf(shared, nil)
	_, other := f.serverOf(own, nil)
	p := f.pool(f.ca.issue("gpu-host"), liar, twinAddr, other)
	job := f.job("spill")
	for range 2 {
		sp := f.spiller(p, job, SpillerConfig{Verify: 1})
		same(t, "a liar and its twin", f.run(job, sp), want)
	}
	if lied.Load() == 0 {
		t.Fatal("the liar changed no unit: the test shows nothing")
	}
	served := twin.Stats().Units.Load()
	sp := f.spiller(p, job, SpillerConfig{Verify: -1})
	same(t, "after the quarantine, verifying nothing", f.run(job, sp), want)
	if n := twin.Stats().Units.Load(); n != served {
		t.Errorf("the peer presenting the liar's certificate served %d more units", n-served)
	}
	for _, st := range p.Stats() {
		quarantined := st.Addr != other
		if (st.Quarantined != "") != quarantined {
			t.Errorf("peer %s (liar %s, twin %s): %+v", st.Addr, liar, twinAddr, st)
		}
	}
	if sp.Stats().Spilled.Load() == 0 {
		t.Error("nothing spilled to the peer of its own certificate")
	}
}

// TestQuarantinedCertificateFirstAnswer: a peer not yet known by its
// certificate keeps its units until it answers one with a quarantined
// certificate; that unit is verified whatever the share, and the peer
// is quarantined, saying why.
func TestQuarantinedCertificateFirstAnswer(t *testing.T) {
	f := newFixture(t)
	const liar, twin = "127.0.0.1:1", "127.0.0.1:2" // never dialled: the pool connects lazily
	p := f.pool(f.ca.issue("gpu-host"), liar, twin)
	sp := f.spiller(p, f.job("spill"), SpillerConfig{Verify: -1})
	u, out := f.hostileUnit(), new(column.Batch)
	if _, _, also := p.quarantine(p.peers[liar], "feed", u, "column a: values differ"); len(also) != 0 {
		t.Fatalf("quarantined %v, not known by the certificate yet", also)
	}
	r := p.pick("")
	if r == nil || r.addr != twin {
		t.Fatalf("picked %v, want the twin, not known by its certificate yet", r)
	}
	sp.ranAt(out, r, "feed")
	if verify, mismatch := sp.Ran(u, out); !verify || mismatch == nil {
		t.Fatalf("a unit answered with a quarantined certificate: verify %v", verify)
	}
	p.done(r, time.Millisecond, 10, received{cert: "feed"}, nil)
	if got := p.pick(""); got != nil {
		t.Fatalf("picked %s, which presented a quarantined certificate", got.addr)
	}
	for _, st := range p.Stats() {
		if st.Addr == twin && (!strings.Contains(st.Quarantined, "presents the certificate of a quarantined peer") || st.Cert != "feed") {
			t.Errorf("the twin: %+v", st)
		}
	}
}

// TestQuarantineSurvivesRenewal: a liar whose certificate is renewed
// after its quarantine (a new fingerprint) stays quarantined by its
// address: it is not picked, and a unit it answers with the new
// certificate is verified.
func TestQuarantineSurvivesRenewal(t *testing.T) {
	f := newFixture(t)
	const liar = "127.0.0.1:1" // never dialled
	p := f.pool(f.ca.issue("gpu-host"), liar)
	sp := f.spiller(p, f.job("spill"), SpillerConfig{Verify: -1})
	u := f.hostileUnit()
	p.quarantine(p.peers[liar], "feed", u, "column a: values differ")
	p.done(p.peers[liar], time.Millisecond, 10, received{cert: "beef"}, nil)
	if got := p.pick(""); got != nil {
		t.Fatalf("picked %s after its certificate was renewed", got.addr)
	}
	out := new(column.Batch)
	sp.ranAt(out, p.peers[liar], "beef")
	if verify, _ := sp.Ran(u, out); !verify {
		t.Error("a unit of the quarantined address, under a renewed certificate, not verified")
	}
	if st := p.Stats()[0]; st.Quarantined == "" {
		t.Errorf("after renewal: %+v", st)
	}
}

// TestQuarantineRevokesOtherJobsCaches: a liar caught by one job's
// verification is distrusted by every job's unit cache: the count the
// engine polls (Spiller.Revoked, engine.Revoker) grows for another job
// of the same pool, once, at the first quarantine. Before, only the job
// that caught it stopped serving its believed units; another job's
// cache went on serving the liar's units in its later epochs.
func TestQuarantineRevokesOtherJobsCaches(t *testing.T) {
	f := newFixture(t)
	const liar = "127.0.0.1:1" // never dialled
	p := f.pool(f.ca.issue("gpu-host"), liar)
	other := f.spiller(p, f.job("other"), SpillerConfig{Verify: -1})
	before := other.Revoked()
	u := f.hostileUnit()
	p.quarantine(p.peers[liar], "feed", u, "column a: values differ")
	after := other.Revoked()
	if after == before {
		t.Fatal("another job's cache was not told of the liar caught by this one")
	}
	p.quarantine(p.peers[liar], "feed", u, "column a: values differ")
	if again := other.Revoked(); again != after {
		t.Errorf("a second mismatch of the quarantined liar grew the count again (%d, then %d)", after, again)
	}
}
