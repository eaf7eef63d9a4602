package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/lastmile/lastmile/bench"
	"github.com/lastmile/lastmile/daemon"
	"github.com/lastmile/lastmile/peer"
	"github.com/lastmile/lastmile/roots"
)

// peerDialTimeout bounds openPeers' first question to the peer.
const peerDialTimeout = 15 * time.Second

// peerSetup is what plan needs to measure a CPU peer: the lastmiled
// config's roots and its pool of peers.
type peerSetup struct {
	path  string
	roots *roots.Roots
	pool  *peer.Pool
}

// openPeers reads the lastmiled config at path (its roots and peers
// sections) and connects to its peers, before anything is measured, so
// that a config that cannot work is refused at once. It needs what a GPU
// host's daemon needs to spill: the peers' addresses, a client
// certificate they trust, and data roots holding the spec's inputs.
func openPeers(ctx context.Context, path string) (*peerSetup, error) {
	dc, err := daemon.LoadConfig(path, false)
	if err != nil {
		return nil, err
	}
	pc := dc.Peers
	if len(pc.Addrs) == 0 && pc.DNS == "" {
		return nil, fmt.Errorf("%s lists no peers (peers.addrs or peers.dns)", path)
	}
	if len(dc.Roots) == 0 {
		return nil, fmt.Errorf("%s names no data roots: units are named by root to peers", path)
	}
	poolCfg := peer.PoolConfig{Addrs: pc.Addrs, DNS: pc.DNS, Resolve: pc.Resolve.D(), Credits: pc.Credits}
	if !pc.Insecure {
		if poolCfg.TLS, err = pc.TLS.ClientTLS(pc.ServerName); err != nil {
			return nil, fmt.Errorf("%s: peers.tls: %w", path, err)
		}
	}
	rts, err := roots.New(dc.Roots)
	if err != nil {
		return nil, fmt.Errorf("%s: roots: %w", path, err)
	}
	pool, err := peer.NewPool(poolCfg)
	if err != nil {
		rts.Close()
		return nil, err
	}
	if len(pool.Stats()) == 0 {
		pool.Close()
		rts.Close()
		return nil, fmt.Errorf("%s: no peer address resolved", path)
	}
	// The pool dials lazily: ask the peer that will be measured what it
	// is now, so that an unreachable peer (or one that refuses this
	// host's certificate, or that would refuse every unit as another
	// protocol version or build) is found before minutes of measuring.
	addr := pool.Stats()[0].Addr
	ictx, cancel := context.WithTimeout(ctx, peerDialTimeout)
	defer cancel()
	in, err := pool.Info(ictx, addr)
	if err == nil {
		err = in.Mismatch(addr) // it would refuse every unit
	}
	if err != nil {
		pool.Close()
		rts.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &peerSetup{path: path, roots: rts, pool: pool}, nil
}

func (s *peerSetup) Close() {
	s.pool.Close()
	s.roots.Close()
}

// measure measures the first peer on the spec's units: its samples/s
// per core and this host's CPU to receive its output.
func (s *peerSetup) measure(ctx context.Context, cfg bench.PlanConfig, specPath string) (*bench.PeerMeasure, error) {
	text, err := os.ReadFile(specPath)
	if err != nil {
		return nil, err
	}
	addr := s.pool.Stats()[0].Addr
	// Every unit to the peer, whatever it costs to receive: this measures
	// the peer, and the plan weighs the cost.
	self := peer.Self()
	sp, err := peer.NewSpiller(s.pool, s.roots, string(text), cfg.Job, peer.SpillerConfig{
		User: &self, MaxCostRatio: 1e9, Policy: peer.PolicyConfig{Always: true}})
	if err != nil {
		return nil, fmt.Errorf("spill the spec's units to %s: %w", addr, err)
	}
	m, err := bench.MeasurePeer(ctx, cfg, bench.PeerSource{Spiller: sp, Pool: s.pool, Addr: addr})
	if err != nil {
		return nil, err
	}
	return &m, nil
}
