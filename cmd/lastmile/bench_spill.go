package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/lastmile/lastmile/bench"
	"github.com/lastmile/lastmile/peer"
)

// spillFlags are bench's flags for the spill measurement, and the hidden
// ones of its peer process.
type spillFlags struct {
	cfg     bench.SpillConfig
	peer    *bool
	contend *bool
	cpu     *int
	tls     *string
	root    *string
}

func addSpillFlags(fs *flag.FlagSet) *spillFlags {
	s := &spillFlags{}
	fs.Int64Var(&s.cfg.Rows, "spill-rows", 4<<20, "rows of generated data for the spill measurement")
	fs.IntVar(&s.cfg.UnitRows, "spill-unit-rows", 0, "units of the run with the peer: at most this many rows where the spec sets no size (0: the spec's own units, as the reference's; -1: 16384)")
	fs.IntVar(&s.cfg.Repeats, "spill-repeats", 3, "runs of each side of the spill measurement, alternating; the fastest of each counts")
	fs.Float64Var(&s.cfg.Verify, "spill-verify", 0, "share of the spilled units verified here, as peers.verify (0: its default; negative: none)")
	fs.StringVar(&s.cfg.Spec, "spill-pipeline", "examples/ctr-8rank.yaml", "pipeline spec of the spill measurement")
	s.peer = fs.Bool("spill-peer", false, "internal: serve as the spill measurement's peer on the address given as argument")
	s.contend = fs.Bool("spill-contend", false, "internal: compute the spill measurement's units on -spill-cpu until killed")
	s.cpu = fs.Int("spill-cpu", 1, "internal: the CPU the spill measurement's peer runs on")
	s.tls = fs.String("spill-tls", "", "internal: CA,CERT,KEY of the spill measurement's peer")
	s.root = fs.String("spill-root", "", "internal: the data root of the spill measurement's peer")
	return s
}

// servePeer runs the measurement's peer until ctx ends.
func (s *spillFlags) servePeer(ctx context.Context, args []string) error {
	parts := strings.Split(*s.tls, ",")
	if len(args) != 1 || len(parts) != 3 || *s.root == "" {
		return fmt.Errorf("%w: -spill-peer wants -spill-tls CA,CERT,KEY -spill-root DIR ADDR", errUsage)
	}
	return bench.ServePeer(ctx, args[0], *s.root, *s.cpu, peer.TLSFiles{CA: parts[0], Cert: parts[1], Key: parts[2]})
}

// runContender computes the measurement's units until ctx ends.
func (s *spillFlags) runContender(ctx context.Context, stdout io.Writer) error {
	if *s.root == "" {
		return fmt.Errorf("%w: -spill-contend wants -spill-root DIR", errUsage)
	}
	return bench.RunContender(ctx, s.cfg.Spec, *s.root, *s.cpu, stdout)
}
