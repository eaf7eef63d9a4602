package daemon

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"time"

	"github.com/lastmile/lastmile/asuser"
	cpupeer "github.com/lastmile/lastmile/peer"
	"github.com/lastmile/lastmile/roots"
)

// PeerConfig makes lastmiled a CPU peer (docs/peers.md): it computes
// other hosts' work units, reading files only beneath Roots.
type PeerConfig struct {
	// Listen is the TCP address to serve on, e.g. ":7941". Empty: not a
	// peer.
	Listen string `yaml:"listen"`
	// TLS is required unless Insecure, which is allowed on loopback only.
	TLS      cpupeer.TLSFiles `yaml:"tls"`
	Insecure bool             `yaml:"insecure"`
	// Workers bounds the units computed at once. Default: the daemon's
	// workers (the CPUs).
	Workers int `yaml:"workers"`
	// MaxInFlight bounds the units admitted at once: computing, queued
	// for a worker, or streaming back. Default: twice Workers.
	MaxInFlight int `yaml:"max_inflight"`
	// MaxMemory bounds the memory units hold (computing, then their
	// outputs while they stream back) and the side tables of the jobs the
	// peer keeps compiled. Default 1GiB.
	MaxMemory Bytes `yaml:"max_memory"`
	// TrustRoot reads root's units (tickets naming uid 0) with the
	// peer's own rights. Default off: root is read for as nobody (65534),
	// as NFS squashes root, and a unit nobody may read runs on the
	// requester instead.
	TrustRoot bool `yaml:"trust_root"`
}

// PeersConfig lists the peers this daemon spills units to.
type PeersConfig struct {
	// Addrs are peers' host:port addresses.
	Addrs []string `yaml:"addrs"`
	// DNS is a host:port whose name resolves to several peers (a
	// Kubernetes headless Service), resolved again every Resolve.
	DNS     string   `yaml:"dns"`
	Resolve Duration `yaml:"resolve"`
	// TLS is required unless Insecure (loopback peers only). ServerName,
	// if set, is the name every peer's certificate must carry.
	TLS        cpupeer.TLSFiles `yaml:"tls"`
	ServerName string           `yaml:"server_name"`
	Insecure   bool             `yaml:"insecure"`
	// Credits is the most units in flight at one peer. Default 4.
	Credits int `yaml:"credits"`
	// RecvSecondsPerGB is this host's CPU cost of receiving unit output
	// (lastmile bench -only spill measures it). Default 1.5.
	RecvSecondsPerGB float64 `yaml:"recv_seconds_per_gb"`
	// Deadline is the least time a peer gets for a unit before the unit
	// runs here instead (a hung or partitioned peer); 8 times the peer's
	// usual round trip when that is longer. Default 10s.
	Deadline Duration `yaml:"deadline"`
	// Hedge is how long a unit may wait on its peer before it is started
	// here as well, when a local worker's place is free; the first
	// complete result is used (docs/peers.md). Default 0: three times the
	// peers' usual round trip, at least 50ms. Negative: never.
	Hedge Duration `yaml:"hedge"`
	// Verify is the share of spilled units, 0 (none) to 1 (every one),
	// computed here as well and compared byte for byte before they are
	// used; a peer whose output differs is quarantined for the daemon's
	// life (docs/peers.md, "Verifying peers"). Default
	// peer.DefaultVerify.
	Verify float64 `yaml:"verify"`
	// Spill is "auto" (default: only while trainers starve with every
	// local worker busy, docs/peers.md) or "always" (whenever a peer has
	// credit: for benchmarks and tests).
	Spill string `yaml:"spill"`
}

func (c PeersConfig) enabled() bool { return len(c.Addrs) > 0 || c.DNS != "" }

// validatePeers checks the peer sections.
func (c *Config) validatePeers(bad func(field string, v any, format string, args ...any)) {
	for name := range c.Roots {
		if err := roots.ValidName(name); err != nil {
			bad("roots", name, "%v", err)
		}
	}
	if p := c.Peer; p.Listen != "" {
		if _, _, err := net.SplitHostPort(p.Listen); err != nil {
			bad("peer.listen", p.Listen, "want host:port (e.g. :7941)")
		} else if p.Insecure && !loopbackHostPort(p.Listen) {
			bad("peer.insecure", p.Insecure, "peer.listen %q is not a loopback address, and plaintext is allowed only on loopback (tests): "+
				"configure peer.tls (ca, cert, key) and remove insecure, or listen on a loopback address such as 127.0.0.1:7941", p.Listen)
		}
		if !p.Insecure && (p.TLS.CA == "" || p.TLS.Cert == "" || p.TLS.Key == "") {
			bad("peer.tls", p.TLS, "a peer needs ca, cert and key (peers trust nobody without a certificate); insecure: true is for loopback tests only")
		}
		if len(c.Roots) == 0 {
			bad("roots", c.Roots, "a peer reads only beneath named data roots: list them (roots: {ctr: /mnt/datasets/ctr})")
		}
	}
	if s := c.Peers.Spill; s != "" && s != "auto" && s != "always" {
		bad("peers.spill", s, `want "auto" or "always"`)
	}
	if v := c.Peers.Verify; !(v >= 0 && v <= 1) {
		bad("peers.verify", v, "want the share of spilled units verified here, from 0 (none) to 1 (every one); default %v", cpupeer.DefaultVerify)
	}
	if p := c.Peers; p.enabled() {
		c.validatePeerAddrs(bad)
		if !p.Insecure && (p.TLS.CA == "" || p.TLS.Cert == "" || p.TLS.Key == "") {
			bad("peers.tls", p.TLS, "spilling needs ca, cert and key; insecure: true is for loopback tests only")
		}
		if len(c.Roots) == 0 {
			bad("roots", c.Roots, "units are named by data root to peers: list the roots this host's inputs lie in")
		}
	}
}

// validatePeerAddrs checks peers.addrs and peers.dns: host:port each,
// and loopback only when insecure (the pool refuses plaintext to any
// other address, but only once it runs).
func (c *Config) validatePeerAddrs(bad func(field string, v any, format string, args ...any)) {
	p := c.Peers
	const fix = "plaintext is allowed only to loopback peers (tests): configure peers.tls (ca, cert, key) and remove insecure"
	for _, a := range p.Addrs {
		if _, _, err := net.SplitHostPort(a); err != nil {
			bad("peers.addrs", a, "want host:port (e.g. 10.0.0.7:7941)")
		} else if p.Insecure && !loopbackHostPort(a) {
			bad("peers.insecure", p.Insecure, "peers.addrs has %q, which is not a loopback address; %s", a, fix)
		}
	}
	if p.DNS == "" {
		return
	}
	if _, _, err := net.SplitHostPort(p.DNS); err != nil {
		bad("peers.dns", p.DNS, "want host:port (e.g. lastmile-peers.ml.svc.cluster.local:7941)")
	} else if p.Insecure && !loopbackHostPort(p.DNS) {
		bad("peers.insecure", p.Insecure, "peers.dns %q may resolve outside loopback; %s", p.DNS, fix)
	}
}

// loopbackHostPort says whether host:port a names a loopback address: a
// loopback IP or "localhost". An empty host (every interface) and other
// names are not.
func loopbackHostPort(a string) bool {
	host, _, err := net.SplitHostPort(a)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback() || host == "localhost"
}

// startPeers starts the peer server and the pool the config asks for.
func (d *Daemon) startPeers(cfg Config) error {
	if len(cfg.Roots) > 0 {
		r, err := roots.New(cfg.Roots)
		if err != nil {
			return fmt.Errorf("roots: %w", err)
		}
		d.roots = r
	}
	if cfg.Peer.Listen != "" {
		if err := d.servePeer(cfg.Peer); err != nil {
			return err
		}
	}
	if cfg.Peers.enabled() {
		pc := cpupeer.PoolConfig{Addrs: cfg.Peers.Addrs, DNS: cfg.Peers.DNS, Resolve: cfg.Peers.Resolve.D(),
			Credits: cfg.Peers.Credits, Logger: d.log.With("role", "spill")}
		if !cfg.Peers.Insecure {
			creds, err := cfg.Peers.TLS.Open()
			if err != nil {
				return fmt.Errorf("peers.tls: %w", err)
			}
			d.peersTLS, pc.TLS, pc.Roots = creds, creds.ClientTLS(cfg.Peers.ServerName), creds.Roots
			d.warnExpiry("peers.tls", creds)
		}
		pool, err := cpupeer.NewPool(pc)
		if err != nil {
			return fmt.Errorf("peers: %w", err)
		}
		d.pool = pool
	}
	return nil
}

// peerCanReadAsUsers checks that this process may take another user's
// file access credentials. A peer reads each unit's files as its job's
// user: without CAP_SETUID and CAP_SETGID it could serve root's jobs
// only, and every other unit would fail at its requester, which would
// exclude the peer (a review found deploy/k8s's peers so; they run as
// root with those two capabilities now).
func peerCanReadAsUsers() error {
	probe := asuser.Cred{UID: 65534, GID: 65534}
	if err := probe.Do(func() error { return nil }); err != nil {
		return fmt.Errorf("peer: a peer opens each unit's files as the user its job runs for: %w", err)
	}
	return nil
}

func (d *Daemon) servePeer(pc PeerConfig) error {
	if err := peerCanReadAsUsers(); err != nil {
		return err
	}
	sc := cpupeer.ServerConfig{Roots: d.roots, Objects: d.peerObjects(), Workers: pc.Workers, MaxInFlight: pc.MaxInFlight,
		MaxMemory: int64(pc.MaxMemory), TrustRoot: pc.TrustRoot, Logger: d.log.With("role", "peer")}
	if sc.Workers == 0 {
		sc.Workers = d.Config().Workers
	}
	if !pc.Insecure {
		creds, err := pc.TLS.Open()
		if err != nil {
			return fmt.Errorf("peer.tls: %w", err)
		}
		d.peerTLS, sc.TLS, sc.ClientCAs = creds, creds.ServerTLS(), creds.Roots
		d.warnExpiry("peer.tls", creds)
	}
	l, err := net.Listen("tcp", pc.Listen)
	if err != nil {
		return fmt.Errorf("peer.listen: %w", err)
	}
	d.peerSrv, d.peerLn = cpupeer.NewServer(sc), l
	go func() {
		if err := d.peerSrv.Serve(l); err != nil {
			d.log.Error("peer server stopped", "err", err)
		}
	}()
	d.log.Info("serving as a CPU peer", "addr", l.Addr().String(), "roots", d.roots.Names(), "tls", sc.TLS != nil)
	return nil
}

// PeerAddr returns the address the peer server listens on, "" if none.
func (d *Daemon) PeerAddr() string {
	if d.peerLn == nil {
		return ""
	}
	return d.peerLn.Addr().String()
}

// spillFor returns the job's spiller, or nil when this daemon has no peers
// or the job cannot spill (logged once); then, if it has peers, why not
// as the job's spill decision (off, for good: its status shows it).
func (j *Job) spillFor() (*cpupeer.Spiller, *spillView) {
	d := j.d
	if d.pool == nil || d.roots == nil {
		return nil, nil
	}
	cfg := d.Config()
	sp, err := cpupeer.NewSpiller(d.pool, d.roots, j.specText, j.spec, cpupeer.SpillerConfig{
		User:             &cpupeer.User{UID: j.owner, GID: j.gid, Groups: j.groups},
		RecvSecondsPerGB: cfg.Peers.RecvSecondsPerGB, MinDeadline: cfg.Peers.Deadline.D(), Hedge: cfg.Peers.Hedge.D(), Logger: j.log,
		Verify: spillerVerify(cfg.Peers.Verify),
		Policy: cpupeer.PolicyConfig{Always: cfg.Peers.Spill == "always"},
	})
	if err != nil {
		if errors.Is(err, cpupeer.ErrNotSpillable) {
			j.log.Info("job runs without peers", "why", err)
		} else {
			j.log.Warn("job runs without peers", "err", err)
		}
		return nil, &spillView{Since: time.Now().UTC(), Reason: err.Error()}
	}
	return sp, nil
}

// drainPeer stops taking units as a peer and lets those in flight finish.
func (d *Daemon) drainPeer(ctx context.Context) {
	if d.peerSrv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, d.Config().DrainTimeout.D()/2)
	defer cancel()
	if err := d.peerSrv.Drain(ctx); err != nil {
		d.log.Warn("peer drain cut short", "err", err)
	}
}

// closePeers stops the peer server and the pool at once.
func (d *Daemon) closePeers() {
	if d.peerSrv != nil {
		d.peerSrv.Stop()
	}
	if d.pool != nil {
		d.pool.Close()
	}
	if d.roots != nil {
		d.roots.Close()
	}
}

// peersStatus is /v1/status's view of the peers.
type peersStatus struct {
	Serving string              `json:"serving,omitempty"` // the peer server's address
	Compute string              `json:"compute"`           // this daemon's compute identity (peer.Compute)
	Served  *servedStatus       `json:"served,omitempty"`
	Peers   []cpupeer.PeerStats `json:"peers,omitempty"`
}

type servedStatus struct {
	InFlight                                int64 // admitted, not yet answered
	Units, Bytes, Failures                  int64
	RefusedBusy, RefusedOutside, RefusedBad int64
	RefusedDraining                         int64
	RefusedBuild                            int64 // tickets of requesters of another build
	ComputeSeconds                          float64
}

func (d *Daemon) peersStatus() *peersStatus {
	if d.peerSrv == nil && d.pool == nil {
		return nil
	}
	ps := &peersStatus{Serving: d.PeerAddr(), Compute: cpupeer.Compute()}
	if d.peerSrv != nil {
		st := d.peerSrv.Stats()
		ps.Served = &servedStatus{InFlight: d.peerSrv.InFlight(),
			Units: st.Units.Load(), Bytes: st.Bytes.Load(), Failures: st.Failures.Load(),
			RefusedBusy: st.RefusedBusy.Load(), RefusedOutside: st.RefusedOutside.Load(),
			RefusedBad:      st.RefusedBad.Load() + st.RefusedVersion.Load(),
			RefusedDraining: st.RefusedDraining.Load(), RefusedBuild: st.RefusedBuild.Load(),
			ComputeSeconds: time.Duration(st.ComputeNanos.Load()).Seconds()}
	}
	if d.pool != nil {
		ps.Peers = d.pool.Stats()
	}
	return ps
}

// spillerVerify is peers.verify as SpillerConfig.Verify says it, whose
// 0 is the default: none is negative there.
func spillerVerify(v float64) float64 {
	if v == 0 {
		return -1
	}
	return v
}

// reloadStartOnly returns the names of the changed keys that are read
// only at Start (roots, the peer role, the peer pool) or at the first job
// (gpu.nvml), and keeps their old values in cfg: the daemon goes on
// running with those, and GET /v1/status and the heap limit (which counts
// peer.max_memory while peer.listen is set) must describe what runs, not
// what a restart would bring. peers.recv_seconds_per_gb, deadline, hedge,
// verify and spill, and gpu.libcuda, are read as each job starts, so they reload.
func reloadStartOnly(old Config, cfg *Config) []string {
	var names []string
	if !maps.Equal(old.Roots, cfg.Roots) {
		names = append(names, "roots")
	}
	cfg.Roots = old.Roots
	op, cp := old.Peer, cfg.Peer
	for _, f := range []struct {
		name    string
		changed bool
	}{
		{"peer.listen", cp.Listen != op.Listen}, {"peer.tls", cp.TLS != op.TLS}, {"peer.insecure", cp.Insecure != op.Insecure},
		{"peer.workers", cp.Workers != op.Workers}, {"peer.max_inflight", cp.MaxInFlight != op.MaxInFlight},
		{"peer.max_memory", cp.MaxMemory != op.MaxMemory}, {"peer.trust_root", cp.TrustRoot != op.TrustRoot},
	} {
		if f.changed {
			names = append(names, f.name)
		}
	}
	cfg.Peer = old.Peer
	o, c := old.Peers, &cfg.Peers
	for _, f := range []struct {
		name    string
		changed bool
	}{
		{"peers.addrs", !slices.Equal(c.Addrs, o.Addrs)}, {"peers.dns", c.DNS != o.DNS}, {"peers.resolve", c.Resolve != o.Resolve},
		{"peers.tls", c.TLS != o.TLS}, {"peers.server_name", c.ServerName != o.ServerName},
		{"peers.insecure", c.Insecure != o.Insecure}, {"peers.credits", c.Credits != o.Credits},
	} {
		if f.changed {
			names = append(names, f.name)
		}
	}
	c.Addrs, c.DNS, c.Resolve, c.TLS, c.ServerName, c.Insecure, c.Credits =
		o.Addrs, o.DNS, o.Resolve, o.TLS, o.ServerName, o.Insecure, o.Credits
	if cfg.GPU.NVML != old.GPU.NVML {
		names = append(names, "gpu.nvml")
	}
	cfg.GPU.NVML, cfg.GPU.Inventory = old.GPU.NVML, old.GPU.Inventory
	return names
}

// expiryWarning is how long before its end a certificate in use is
// logged as expiring, at start and at each reload.
const expiryWarning = 30 * 24 * time.Hour

// reloadTLS reads the peer role's and the spill pool's certificate
// files again (same paths: a renewal in place), as SIGHUP asks: a peer
// presents the new certificate and trusts the new CA bundle from its next
// handshake; a requester presents the new certificate from its next
// connection, verifies peers with the new CA bundle at once (a
// connection whose peer it no longer verifies is closed, with the units
// on it, which are computed here; one it verifies stays: peer/conn.go),
// and probes its failed peers now (Pool.CredsReloaded). Files that do
// not load leave the ones in use, and say so.
func (d *Daemon) reloadTLS() {
	for _, c := range []struct {
		key   string
		creds *cpupeer.Creds
	}{{"peer.tls", d.peerTLS}, {"peers.tls", d.peersTLS}} {
		if c.creds == nil {
			continue
		}
		if err := c.creds.Reload(); err != nil {
			d.log.Warn("SIGHUP: the certificate files do not load; the ones read before stay in use: fix the files and send SIGHUP again",
				"key", c.key, "err", err, "not_after", c.creds.NotAfter())
			continue
		}
		d.log.Info("certificates reloaded", "key", c.key, "not_after", c.creds.NotAfter())
		d.warnExpiry(c.key, c.creds)
		if c.key == "peers.tls" && d.pool != nil {
			d.pool.CredsReloaded()
		}
	}
}

// warnExpiry logs a certificate, or a CA it is verified against, that
// ends within expiryWarning. The CA is looked at too: lastmile certs
// renews a host's certificate under the CA it has, and a renewed
// certificate may outlive it.
func (d *Daemon) warnExpiry(key string, c *cpupeer.Creds) {
	end := c.NotAfter()
	if left := time.Until(end); left < expiryWarning {
		d.log.Warn("certificate expires soon: renew it in place (lastmile certs) and send SIGHUP",
			"key", key, "not_after", end, "days_left", int(left.Hours()/24))
	}
	if ca := c.CANotAfter(); !ca.IsZero() && time.Until(ca) < expiryWarning {
		d.log.Warn("the CA the certificates are verified against expires soon: every handshake fails after it; "+
			"make a new CA (lastmile certs ca), add it to every host's CA bundle beside the old one and send every host SIGHUP, "+
			"then issue certificates from it and send SIGHUP again",
			"key", key+".ca", "what", "CA", "not_after", ca, "days_left", int(time.Until(ca).Hours()/24))
	}
}

// CheckFiles opens what the start opens beyond the config file (the data
// roots, peer.tls and peers.tls) and closes them again: lastmiled
// -check-config, run before a restart, reports a root or a TLS file the
// start would fail on, each as FILE:LINE: key: problem.
func (c *Config) CheckFiles() error {
	var errs []error
	bad := func(field string, v any, err error) {
		errs = append(errs, &ConfigError{File: c.file, Line: c.lineOf(field), Field: field, Value: v, Err: err})
	}
	for _, name := range slices.Sorted(maps.Keys(c.Roots)) {
		r, err := roots.New(map[string]string{name: c.Roots[name]})
		if err != nil {
			bad("roots."+name, c.Roots[name], err)
			continue
		}
		r.Close()
	}
	if c.Peer.Listen != "" && !c.Peer.Insecure {
		if _, err := c.Peer.TLS.Open(); err != nil {
			bad("peer.tls", c.Peer.TLS, err)
		}
	}
	if c.Peers.enabled() && !c.Peers.Insecure {
		if _, err := c.Peers.TLS.Open(); err != nil {
			bad("peers.tls", c.Peers.TLS, err)
		}
	}
	return errors.Join(errs...)
}
