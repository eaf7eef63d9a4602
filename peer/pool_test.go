package peer

import (
	"encoding/json"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
)

// TestPoolResolvesDNS: a DNS name that resolves to several peers (here
// localhost, through /etc/hosts) becomes one peer per address, and the
// static addresses stay beside them.
func TestPoolResolvesDNS(t *testing.T) {
	p, err := NewPool(PoolConfig{DNS: "localhost:7941", Addrs: []string{"127.0.0.2:7941"}, Resolve: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var addrs []string
	for _, s := range p.Stats() {
		addrs = append(addrs, s.Addr)
	}
	if !slices.Contains(addrs, "127.0.0.1:7941") || !slices.Contains(addrs, "127.0.0.2:7941") {
		t.Fatalf("peers %v, want 127.0.0.1:7941 (localhost) and the static 127.0.0.2:7941", addrs)
	}
	// Resolving again keeps the same peers (no churn of connections).
	time.Sleep(60 * time.Millisecond)
	if n := len(p.Stats()); n != len(addrs) {
		t.Fatalf("%d peers after re-resolving, %d before", n, len(addrs))
	}
	// A plaintext pool refuses a name that resolves outside loopback.
	if err := p.set([]string{"192.0.2.1:7941"}, ""); err == nil {
		t.Fatal("plaintext to a non-loopback address accepted")
	}
}

// TestPoolPicksShortestQueue: the peer with the fewest units in flight is
// picked, credits bound each, and a failed peer is skipped until its
// backoff ends.
func TestPoolPicksShortestQueue(t *testing.T) {
	p, err := NewPool(PoolConfig{Addrs: []string{"127.0.0.1:1", "127.0.0.1:2"}, Credits: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	a, b := p.pick(""), p.pick("")
	if a == nil || b == nil || a == b {
		t.Fatalf("two picks gave %v and %v, want both peers", a, b)
	}
	c, d := p.pick(""), p.pick("")
	if c == nil || d == nil || p.pick("") != nil {
		t.Fatal("credits: want 2 per peer, then none")
	}
	p.done(a, time.Millisecond, 10, received{}, nil)
	p.done(b, time.Millisecond, 10, received{}, nil)
	p.done(c, time.Millisecond, 0, received{}, errCorrupt)
	if r := p.pick(""); r == nil || r.addr == c.addr {
		t.Fatalf("after a failure at %s: picked %v, want the other peer", c.addr, r)
	}
	for _, s := range p.Stats() {
		if s.Addr == c.addr && (s.Healthy || s.Corrupt != 1 || s.Units != 1) {
			t.Errorf("failed peer's stats: %+v", s)
		}
	}
}

// infoServer is a Flight server that answers InfoAction as a peer of
// version speaks, and nothing else.
type infoServer struct {
	flight.BaseFlightServer
	version int
	compute string
}

func (s *infoServer) DoAction(a *flight.Action, stream flight.FlightService_DoActionServer) error {
	b, _ := json.Marshal(Info{Version: s.version, Compute: s.compute, Workers: 1, MaxInFlight: 2})
	return stream.Send(&flight.Result{Body: b})
}

// serveInfo serves an infoServer on addr ("127.0.0.1:0" for any port) and
// returns its address and a function that stops it.
func serveInfo(t *testing.T, addr string, version int) (string, func()) {
	t.Helper()
	return serveInfoOf(t, addr, version, Compute())
}

// serveInfoOf is serveInfo of a peer of compute identity compute.
func serveInfoOf(t *testing.T, addr string, version int, compute string) (string, func()) {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	flight.RegisterFlightServiceServer(g, &infoServer{version: version, compute: compute})
	go g.Serve(l)
	return l.Addr().String(), g.Stop
}

// failedPeer returns a pool of the one peer at addr, which it picked and
// then failed (a corrupt unit): excluded for its first backoff.
func failedPeer(t *testing.T, addr string) (*Pool, *remote) {
	t.Helper()
	p, err := NewPool(PoolConfig{Addrs: []string{addr}, Credits: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	r := p.pick("")
	p.done(r, time.Millisecond, 0, received{}, errCorrupt)
	return p, r
}

// TestFailedPeerReadmittedByProbe: a peer that failed gets no unit until,
// its exclusion over, it answers a probe in this protocol version; one
// that does not answer, or speaks another version, stays out for longer.
func TestFailedPeerReadmittedByProbe(t *testing.T) {
	addr, stop := serveInfo(t, "127.0.0.1:0", Version)
	p, r := failedPeer(t, addr)
	stop()
	expire := func() {
		p.mu.Lock()
		r.excluded = time.Now()
		p.mu.Unlock()
	}
	// Excluded, then unanswered: a probe fails and the exclusion doubles.
	expire()
	if p.pick("") != nil {
		t.Fatal("a failed peer was picked before answering a probe")
	}
	eventually(t, "the failed probe", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return !r.probing && r.backoff == 2*time.Second && r.suspect
	})
	// Back, answering: re-admitted by the next probe, then picked.
	_, stop = serveInfo(t, addr, Version)
	defer stop()
	expire()
	p.pick("")
	eventually(t, "re-admission", func() bool { return p.Stats()[0].Healthy })
	if got := p.pick(""); got != r {
		t.Fatalf("re-admitted peer not picked: %v", got)
	}
}

// TestExcludedPeerProbedWhenDue: a failed peer is probed as soon as its
// exclusion ends, with no pick to start the probe (no job need be
// spilling), and re-admitted once it answers.
func TestExcludedPeerProbedWhenDue(t *testing.T) {
	addr, stop := serveInfo(t, "127.0.0.1:0", Version)
	defer stop()
	p, _ := failedPeer(t, addr)
	if st := p.Stats()[0]; st.Healthy {
		t.Fatalf("a failed peer is still healthy: %+v", st)
	}
	start := time.Now()
	eventually(t, "re-admission without a pick", func() bool { return p.Stats()[0].Healthy })
	if took := time.Since(start); took < 900*time.Millisecond {
		t.Fatalf("re-admitted after %v, before its 1 s exclusion ended", took)
	}
}

// TestProbeRefusesAnotherVersion: a peer that answers the probe in
// another protocol version stays excluded, for versionBackoff, saying so.
func TestProbeRefusesAnotherVersion(t *testing.T) {
	addr, stop := serveInfo(t, "127.0.0.1:0", Version+1)
	defer stop()
	p, r := failedPeer(t, addr)
	p.mu.Lock()
	r.excluded = time.Now()
	p.mu.Unlock()
	p.pick("")
	eventually(t, "the probe", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return !r.probing && r.backoff == versionBackoff
	})
	if st := p.Stats()[0]; st.Healthy || !strings.Contains(st.LastError, "protocol version") {
		t.Fatalf("a peer of another version: %+v", st)
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestRate: a steady stream of units reads as its rate once the window
// has filled, and decays once it stops.
func TestRate(t *testing.T) {
	var r rate
	t0 := time.Unix(1000, 0)
	for i := range 600 { // 10 units/s of 1 MB each, for a minute
		r.add(t0.Add(time.Duration(i)*100*time.Millisecond), 1e6)
	}
	end := t0.Add(60 * time.Second)
	u, b := r.at(end)
	if u < 9.5 || u > 10.5 || b < 9.5e6 || b > 10.5e6 {
		t.Fatalf("steady 10 units/s of 1 MB: read %.2f units/s, %.0f B/s", u, b)
	}
	if u2, _ := r.at(end.Add(rateWindow)); u2 > u/2.5 || u2 < u/3 {
		t.Fatalf("a window after the stream stopped: %.2f units/s, from %.2f", u2, u)
	}
	if u, b := (&rate{}).at(end); u != 0 || b != 0 {
		t.Fatal("an empty rate is not 0")
	}
}

// TestHedgedAwayPeerExcluded: a peer whose units are all done here first
// is checked after slowLimit in a row and excluded when it does not
// answer; one that answers keeps its units. An answer between resets the
// count, and a unit given up on because the job stopped does not count.
func TestHedgedAwayPeerExcluded(t *testing.T) {
	up, stop := serveInfo(t, "127.0.0.1:0", Version)
	defer stop()
	for _, c := range []struct {
		name     string
		addr     string
		excluded bool
	}{
		{"a peer that answers", up, false},
		{"a peer that does not", "127.0.0.1:1", true},
	} {
		p, err := NewPool(PoolConfig{Addrs: []string{c.addr}, Credits: 8})
		if err != nil {
			t.Fatal(err)
		}
		lose := func(n int, hedged bool) {
			for range n {
				p.abandon(p.pick(""), hedged)
			}
		}
		lose(slowLimit-1, true)
		lose(3, false)
		p.done(p.pick(""), time.Millisecond, 10, received{}, nil)
		lose(slowLimit-1, true)
		if st := p.Stats()[0]; !st.Healthy || st.Abandoned != int64(2*(slowLimit-1)+3) {
			t.Fatalf("%s: after runs shorter than %d: %+v", c.name, slowLimit, st)
		}
		lose(1, true)
		checked := func() bool {
			p.mu.Lock()
			defer p.mu.Unlock()
			return !p.peers[c.addr].probing
		}
		eventually(t, "the check", checked)
		st := p.Stats()[0]
		if st.Healthy == c.excluded || c.excluded && !strings.Contains(st.LastError, "done here first, and it does not answer") {
			t.Errorf("%s, after %d units in a row lost to hedges: %+v", c.name, slowLimit, st)
		}
		p.Close()
	}
}

// TestPickCountsOtherRequesters: a peer's answer says how many units it
// had admitted from every requester; the pick counts other requesters'
// units, for a while, beside this host's own, and prefers the peer whose
// whole queue is shorter.
func TestPickCountsOtherRequesters(t *testing.T) {
	p, err := NewPool(PoolConfig{Addrs: []string{"127.0.0.1:1", "127.0.0.1:2"}, Credits: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	a, b := p.pick(""), p.pick("")
	// a answers with 6 units admitted: ours (1) and 5 of other hosts'.
	p.done(a, time.Millisecond, 10, received{queue: 6}, nil)
	p.done(b, time.Millisecond, 10, received{queue: 1}, nil)
	if got := p.pick(""); got != b {
		t.Fatalf("picked %s, want %s: the other's queue holds 5 units of other hosts", got.addr, b.addr)
	}
	if q := p.leastInFlight(); q != 1 {
		t.Fatalf("least queued %d, want 1 (b, with ours)", q)
	}
	// Ours now: b 1 of 1 (others 0), a 0 (others 5). Two more go to b.
	if p.pick("") != b || p.pick("") != b {
		t.Fatal("want b while its whole queue is shorter")
	}
	// A second later, others' units are no longer counted.
	p.mu.Lock()
	a.othersAt = time.Now().Add(-2 * time.Second)
	p.mu.Unlock()
	if got := p.pick(""); got != a {
		t.Fatalf("picked %s with others' units stale, want %s", got.addr, a.addr)
	}
}
