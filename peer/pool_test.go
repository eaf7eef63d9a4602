package peer

import (
	"slices"
	"testing"
	"time"
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
	p.done(a, time.Millisecond, 10, 0, nil)
	p.done(b, time.Millisecond, 10, 0, nil)
	p.done(c, time.Millisecond, 0, 0, errCorrupt)
	if r := p.pick(""); r == nil || r.addr == c.addr {
		t.Fatalf("after a failure at %s: picked %v, want the other peer", c.addr, r)
	}
	for _, s := range p.Stats() {
		if s.Addr == c.addr && (s.Healthy || s.Corrupt != 1 || s.Units != 1) {
			t.Errorf("failed peer's stats: %+v", s)
		}
	}
}
