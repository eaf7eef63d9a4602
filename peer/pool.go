package peer

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/status"
)

// PoolConfig lists a GPU host's peers and how to reach them.
type PoolConfig struct {
	// Addrs are peers' host:port addresses.
	Addrs []string
	// DNS is a host:port whose name resolves to several peers (a
	// Kubernetes headless Service); it is resolved again every Resolve.
	DNS     string
	Resolve time.Duration // default 30s
	// TLS is the requester's mutual TLS; nil is plaintext, allowed only
	// to loopback addresses.
	TLS *tls.Config
	// Roots, when set, is the CA bundle peers are verified with in place
	// of TLS.RootCAs, asked for at each call and at CredsReloaded: once a
	// reload replaced it (Creds.Roots), a connection whose peer it does
	// not verify is closed, with the calls on it, and one it verifies
	// stays (conn.go). nil: TLS.RootCAs, always.
	Roots func() *x509.CertPool
	// Credits is the most units in flight at one peer; default 4.
	Credits int
	Logger  *slog.Logger
}

// Pool is the set of peers a daemon may spill to, shared by its jobs.
type Pool struct {
	cfg    PoolConfig
	log    *slog.Logger
	mu     sync.Mutex
	freed  chan struct{} // closed and replaced whenever a credit is returned
	peers  map[string]*remote
	stop   chan struct{}
	closed sync.Once

	// quarantined is the peers caught sending other values than this
	// host computes, by address, with why (quarantine.go): never given
	// units again, even once DNS lists them anew. quarantinedCerts is
	// the same by their certificates' SHA-256 fingerprints: any peer
	// presenting one is quarantined too.
	quarantined      map[string]string
	quarantinedCerts map[string]string
	// trust is the chains of peers whose units were accepted, and the
	// count of trust withdrawn from them by reloads (revoke.go).
	trust trustLog
}

// remote is one peer as the requester sees it.
type remote struct {
	addr     string
	conns    *conns
	inflight int
	excluded time.Time // until then, not picked
	backoff  time.Duration
	refusals int // its certificate's refusals in a row (refusedBackoff)
	// suspect: the peer failed, and gets units again only once it has
	// answered a probe (probe) after its exclusion; probing: one is out.
	suspect, probing bool
	slow             int // units lost to hedges in a row (abandon)
	// others is the units other requesters had at the peer by its last
	// answer (trailer.Queue less ours then), as of othersAt.
	others   int
	othersAt time.Time
	gone     bool          // no longer listed: closed when idle
	latency  time.Duration // moving average of a unit's round trip
	rate     rate          // units and output bytes received, per second
	st       PeerStats

	subject string // its certificate's subject, from its last answer over TLS
	cert    string // the SHA-256 fingerprint of that certificate (hex)
	// quarantined: it sent a unit whose values were not this host's
	// (quarantine.go); never given units again.
	quarantined bool
}

// PeerStats counts one peer's work for metrics and `lastmile status`.
type PeerStats struct {
	Addr      string `json:"addr"`
	Healthy   bool   `json:"healthy"`
	InFlight  int    `json:"in_flight"`
	Units     int64  `json:"units"`
	Bytes     int64  `json:"bytes"`      // output bytes of the units received
	WireBytes int64  `json:"wire_bytes"` // the same units' bytes as received (compact.go)
	Failures  int64  `json:"failures"`
	Corrupt   int64  `json:"corrupt"`
	Refused   int64  `json:"refused"`
	// Abandoned counts units given up on here before the peer answered:
	// a local hedge finished first, or the job stopped. Not failures.
	Abandoned   int64   `json:"abandoned"`
	RecvSeconds float64 `json:"recv_seconds"` // wall time from ticket to checked unit, the peer's work included
	// RecvCPUSeconds is this host's CPU receiving the units: the
	// receiving goroutines' own (reading messages, assembling, checking),
	// gRPC's transport goroutine not included (fetch).
	RecvCPUSeconds float64 `json:"recv_cpu_seconds"`
	// UnitsPerSec and BytesPerSec are the units and output bytes received
	// from the peer per second, over about the last rateWindow.
	UnitsPerSec  float64       `json:"units_per_sec"`
	BytesPerSec  float64       `json:"bytes_per_sec"`
	Latency      time.Duration `json:"latency_ns"`
	LastError    string        `json:"last_error,omitempty"`
	ExcludedTill time.Time     `json:"excluded_until,omitzero"`

	// Mismatches counts units whose output, computed here as well to
	// verify it (peers.verify), had other values; Quarantined says why
	// the peer gets no units since the first, for the daemon's life.
	Mismatches  int64  `json:"mismatches"`
	Quarantined string `json:"quarantined,omitempty"`
	Subject     string `json:"subject,omitempty"`     // its certificate's subject, once it answered over TLS
	Cert        string `json:"cert_sha256,omitempty"` // that certificate's SHA-256 fingerprint (hex)
	// Compute is the peer's compute identity (identity.go), as it last
	// answered a probe: a peer of another is excluded.
	Compute string `json:"compute,omitempty"`
}

// NewPool connects lazily to the configured peers and starts resolving
// cfg.DNS. Close it when done.
func NewPool(cfg PoolConfig) (*Pool, error) {
	if cfg.Credits <= 0 {
		cfg.Credits = 4
	}
	if cfg.Resolve <= 0 {
		cfg.Resolve = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	p := &Pool{cfg: cfg, log: cfg.Logger, peers: map[string]*remote{}, stop: make(chan struct{}), freed: make(chan struct{})}
	if err := p.set(cfg.Addrs, ""); err != nil {
		return nil, err
	}
	if cfg.DNS != "" {
		p.resolve()
		go p.resolveLoop()
	}
	return p, nil
}

// Close stops resolving and closes the connections.
func (p *Pool) Close() {
	p.closed.Do(func() {
		close(p.stop)
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, r := range p.peers {
			r.conns.shut()
		}
	})
}

func (p *Pool) resolveLoop() {
	t := time.NewTicker(p.cfg.Resolve)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.resolve()
		}
	}
}

// resolve looks the DNS name up and replaces the resolved peers.
func (p *Pool) resolve() {
	host, port, err := net.SplitHostPort(p.cfg.DNS)
	if err != nil {
		p.log.Error("peers: dns is not host:port", "dns", p.cfg.DNS, "err", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupHost(ctx, host)
	if err != nil {
		p.log.Warn("peers: resolve", "dns", p.cfg.DNS, "err", err) // keep the last answer
		return
	}
	var addrs []string
	for _, ip := range ips {
		addrs = append(addrs, net.JoinHostPort(ip, port))
	}
	if err := p.set(append(slices.Clone(p.cfg.Addrs), addrs...), host); err != nil {
		p.log.Error("peers: resolved", "dns", p.cfg.DNS, "err", err)
	}
}

// set makes the peer list addrs: new ones are added, missing ones leave
// once idle. serverName is the name their certificates must carry when
// they were found by DNS.
func (p *Pool) set(addrs []string, serverName string) error {
	want := map[string]bool{}
	for _, a := range addrs {
		if p.cfg.TLS == nil && !loopbackAddr(a) {
			return fmt.Errorf("peer %s: plaintext is allowed only to loopback addresses; configure peers.tls (ca, cert, key)", a)
		}
		want[a] = true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for a, r := range p.peers {
		if !want[a] {
			r.gone = true
			if r.inflight == 0 {
				p.dropLocked(r)
			}
		}
	}
	for a := range want {
		if r, ok := p.peers[a]; ok {
			r.gone = false
			continue
		}
		r := &remote{addr: a, st: PeerStats{Addr: a, Quarantined: p.quarantined[a]}, quarantined: p.quarantined[a] != ""}
		if err := p.dial(r, serverName); err != nil {
			return err
		}
		p.peers[a] = r
	}
	return nil
}

func (p *Pool) dropLocked(r *remote) {
	r.conns.close()
	delete(p.peers, r.addr)
}

func loopbackAddr(a string) bool {
	host, _, err := net.SplitHostPort(a)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback() || host == "localhost"
}

// dial makes r's connections, verifying the peer's certificate with
// serverName when TLS names none (peers found by DNS).
func (p *Pool) dial(r *remote, serverName string) error {
	var roots func() *x509.CertPool
	if p.cfg.TLS != nil {
		roots = p.cfg.Roots
	}
	c, err := newConns(func(pool *x509.CertPool) (*peerConn, error) { return p.dialConn(r.addr, serverName, pool) }, roots)
	if err != nil {
		return err
	}
	c.trust = &p.trust
	r.conns = c
	return nil
}

// dialConn makes a connection to the peer at addr whose handshakes
// verify it with roots (nil: TLS.RootCAs), or the bundle a reload gives
// it since (verifiedTLS).
func (p *Pool) dialConn(addr, serverName string, roots *x509.CertPool) (*peerConn, error) {
	pc := &peerConn{roots: roots}
	creds := insecure.NewCredentials()
	if p.cfg.TLS != nil {
		c := p.cfg.TLS.Clone()
		if c.ServerName == "" && serverName != "" {
			c.ServerName = serverName
		}
		creds = &verifiedTLS{base: c, pc: pc}
	}
	// Flow-control windows that hold whole units: with gRPC's 64 KiB a
	// peer stalls after each window until this host, whose CPUs are busy
	// by definition while it spills, gets round to reading; the peer then
	// idles. The bound on memory is the credits: at most Credits units'
	// output per peer are in flight.
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds), grpc.WithConnectParams(connectParams),
		grpc.WithInitialWindowSize(streamWindow), grpc.WithInitialConnWindowSize(int32(min(int64(streamWindow)*int64(p.cfg.Credits), 1<<30))),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessage), grpc.MaxCallSendMsgSize(maxMessage)),
		experimental.WithBufferPool(frames))
	if err != nil {
		return nil, fmt.Errorf("peer %s: %w", addr, err)
	}
	pc.cc, pc.client = conn, flight.NewClientFromConn(conn, nil)
	return pc, nil
}

// connectParams are gRPC's own reconnection schedule of a peer's
// connection: its defaults (backoff from 1s, times 1.6 to 120s; 20s to
// connect). A variable for the tests, which stand for the backoff a long
// outage leaves.
var connectParams = grpc.ConnectParams{Backoff: backoff.DefaultConfig, MinConnectTimeout: 20 * time.Second}

// pick takes a credit at the healthy peer with the fewest units in
// flight, or returns nil when none has credit.
func (p *Pool) pick(exclude string) *remote {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	var best *remote
	for _, r := range p.peers {
		p.probeLocked(r, now)
		if !r.usable(now) || r.addr == exclude || r.inflight >= p.cfg.Credits {
			continue
		}
		if best == nil || r.queued(now) < best.queued(now) || r.queued(now) == best.queued(now) && r.latency < best.latency {
			best = r
		}
	}
	if best != nil {
		best.inflight++
	}
	return best
}

// leastInFlight is the fewest units in flight at any peer that could be
// picked now, credits aside, or -1 when there is none.
func (p *Pool) leastInFlight() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	now, least := time.Now(), -1
	for _, r := range p.peers {
		if !r.usable(now) {
			continue
		}
		if q := r.queued(now); least < 0 || q < least {
			least = q
		}
	}
	return least
}

// queued is the units in r's queue as this host knows it: its own in
// flight, and other requesters' as r last said (for a second, or two of
// its round trips if longer; after that it may have changed entirely).
func (r *remote) queued(now time.Time) int {
	if now.Sub(r.othersAt) > max(time.Second, 2*r.latency) {
		return r.inflight
	}
	return r.inflight + r.others
}

// usable reports whether r may be given units now: listed, not
// excluded nor quarantined, and not failed since it last answered.
func (r *remote) usable(now time.Time) bool {
	return !r.gone && !r.suspect && !r.quarantined && !now.Before(r.excluded)
}

// pickWait is pick, waiting up to wait for a credit to be returned when
// every healthy peer is at its credits: a spill worker's unit is better
// sent to a peer that is about to be free than computed on the CPUs the
// spill is relieving.
func (p *Pool) pickWait(ctx context.Context, exclude string, wait time.Duration) *remote {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		p.mu.Lock()
		freed := p.freed
		p.mu.Unlock()
		if r := p.pick(exclude); r != nil {
			return r
		}
		select {
		case <-freed:
		case <-deadline.C:
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}

// done returns r's credit and records how its unit went.
func (p *Pool) done(r *remote, took time.Duration, bytes int64, got received, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r.inflight--
	close(p.freed)
	p.freed = make(chan struct{})
	wire := got.wire
	r.st.RecvSeconds += took.Seconds()
	r.st.RecvCPUSeconds += got.cpu.Seconds()
	switch {
	case err == nil:
		r.st.Units++
		r.st.Bytes += bytes
		r.st.WireBytes += wire
		r.rate.add(time.Now(), bytes)
		if got.subject != "" {
			r.subject = got.subject
		}
		p.learnCertLocked(r, got.cert)
		r.backoff, r.slow = 0, 0
		// Ours at the peer as it sent this unit: those in flight now, and
		// this one (r.inflight was decremented above).
		r.others, r.othersAt = max(got.queue-(r.inflight+1), 0), time.Now()
		if r.latency == 0 {
			r.latency = took
		} else {
			r.latency = (7*r.latency + took) / 8
		}
	case status.Code(err) == codes.ResourceExhausted:
		r.st.Refused++ // busy, not broken: try again soon
		r.st.LastError = err.Error()
		r.excluded = time.Now().Add(50 * time.Millisecond)
	case status.Code(err) == codes.PermissionDenied:
		// The job's, not the peer's: its user may not read a file of it
		// there (or the file is outside the peer's roots). The spiller
		// stops sending that job's units; other jobs keep the peer.
		r.st.Refused++
		r.st.LastError = err.Error()
	default:
		r.st.Failures++
		if errors.Is(err, errCorrupt) {
			r.st.Corrupt++
		}
		p.excludeLocked(r, err)
	}
	if r.gone && r.inflight == 0 {
		p.dropLocked(r)
	}
}

// abandon returns r's credit for a unit given up on here (hedged: a hedge
// here finished first). Such a unit is not held against the peer. But a
// peer whose units are hedged and lost slowLimit times in a row, with no
// answer between, may be hung, or behind a link that holds connections
// open and carries nothing: it is asked (check) whether it answers at
// all, and excluded if it does not. A peer that is only slow answers,
// and keeps its units.
func (p *Pool) abandon(r *remote, hedged bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r.inflight--
	close(p.freed)
	p.freed = make(chan struct{})
	r.st.Abandoned++
	if hedged {
		if r.slow++; r.slow >= slowLimit && !r.suspect && !r.probing {
			r.slow, r.probing = 0, true
			go p.check(r, slowLimit)
		}
	}
	if r.gone && r.inflight == 0 {
		p.dropLocked(r)
	}
}

// usualLatency is the mean of the healthy peers' usual round trips, or 0
// while none has answered yet.
func (p *Pool) usualLatency() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	var sum time.Duration
	n := 0
	for _, r := range p.peers {
		if !r.usable(now) || r.latency == 0 {
			continue
		}
		sum += r.latency
		n++
	}
	if n == 0 {
		return 0
	}
	return sum / time.Duration(n)
}

// Stats returns each peer's counters, sorted by address.
func (p *Pool) Stats() []PeerStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []PeerStats
	now := time.Now()
	for _, r := range p.peers {
		s := r.st
		s.InFlight, s.Latency = r.inflight, r.latency
		s.UnitsPerSec, s.BytesPerSec = r.rate.at(now)
		s.Healthy = !r.suspect && !r.quarantined && !now.Before(r.excluded)
		s.Subject, s.Cert = r.subject, r.cert
		if now.Before(r.excluded) {
			s.ExcludedTill = r.excluded
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Addr < out[j].Addr })
	return out
}

// Credits is the most units in flight at one peer.
func (p *Pool) Credits() int { return p.cfg.Credits }

// Info asks the peer at addr, one of the pool's, what it says of itself
// (InfoAction).
func (p *Pool) Info(ctx context.Context, addr string) (Info, error) {
	p.mu.Lock()
	r := p.peers[addr]
	p.mu.Unlock()
	if r == nil {
		return Info{}, fmt.Errorf("peer %s is not in the pool", addr)
	}
	return r.info(ctx)
}

// info asks r for its Info.
func (r *remote) info(ctx context.Context, opts ...grpc.CallOption) (Info, error) {
	client, release, err := r.conns.use()
	if err != nil {
		return Info{}, fmt.Errorf("peer %s: info: %w", r.addr, err)
	}
	defer release()
	stream, err := client.DoAction(ctx, &flight.Action{Type: InfoAction}, opts...)
	if err != nil {
		return Info{}, fmt.Errorf("peer %s: info: %w", r.addr, err)
	}
	res, err := stream.Recv()
	if err != nil {
		return Info{}, fmt.Errorf("peer %s: info: %w", r.addr, err)
	}
	var in Info
	if err := json.Unmarshal(res.GetBody(), &in); err != nil || in.Workers <= 0 {
		return Info{}, fmt.Errorf("peer %s: info: malformed answer %q", r.addr, res.GetBody())
	}
	return in, nil
}

// rateWindow is the time constant of a peer's rates: a rate falls to
// 1/e of itself after rateWindow without a unit.
const rateWindow = 10 * time.Second

// rate is an exponentially decaying rate of units and bytes per second.
type rate struct {
	units, bytes float64 // per second, as of last
	last         time.Time
}

// add counts a unit of b bytes at now.
func (r *rate) add(now time.Time, b int64) {
	r.units, r.bytes = r.at(now)
	r.units += 1 / rateWindow.Seconds()
	r.bytes += float64(b) / rateWindow.Seconds()
	r.last = now
}

// at returns the rates as of now.
func (r *rate) at(now time.Time) (units, bytes float64) {
	if r.last.IsZero() {
		return 0, 0
	}
	f := math.Exp(-now.Sub(r.last).Seconds() / rateWindow.Seconds())
	return r.units * f, r.bytes * f
}
