package engine

// Hosts that share their counts.
//
// Counting every unit on every host (hosts.go, step 1) needs nothing from
// anyone, but it costs each host the Early columns of the whole input, a
// share of the job that does not shrink as hosts are added: at 8 hosts
// it adds a third to two thirds to a host's first epoch. With
// Options.ShareCounts, host i counts only the units whose plan index is i
// modulo the host count, hands that share to ShareCounts, and gets back
// every unit's rows as the hosts counted them. lastmiled relays the shares
// through the job's trainers: each host's daemon publishes its share on
// the job's counts endpoint, the trainers all-gather the shares over the
// process group they already have (torch.distributed), and each host's
// trainers post the whole list back (docs/control-api.md, "Unit counts").
//
// Invariants:
//   - Every host deals the units from the same list, so their shares and
//     steps agree as when each counted everything: each unit is counted by
//     exactly one host, and a host only accepts a list for the plan it
//     planned (the digest of its units).
//   - A host takes no count on trust that it can check. Its own share
//     must come back unchanged, every unit must have a count, and each
//     unit it reads must yield the rows it was dealt at (hostSplit.check,
//     as the unit reaches the batcher): a count that disagrees fails the
//     job naming the unit, where it would otherwise leave one host's ranks
//     short of steps and DDP hung.
//   - A job's later runs reuse the list (Options.Counted and UnitRows), so
//     only a job's first run on a host exchanges.
//
// Steps:
//  1. Count the units of this host's share (countUnits with a filter),
//     through the daemon's CPU gate like any other counting.
//  2. Call ShareCounts with the share; it blocks until every host's
//     share has arrived, or its context ends.
//  3. Check the list it returns (CountShare.check) and deal the units by
//     it (hosts.go, step 2). Where ShareCounts says the list will not
//     come (ErrCountAlone), count the other hosts' units here instead.
//
// Rejected designs:
//   - Daemons exchanging counts directly, over the peer (Flight)
//     connections: the hosts of one world need not be each other's peers,
//     and the daemons would need a rendezvous and a protocol for a host
//     that is late or gone. The trainers already have both: the process
//     group that torchrun set up connects exactly the world's hosts, and
//     its collectives fail together when one is gone.
//   - Dealing units by planned rows first and exchanging counts later:
//     a host would start producing before the steps per epoch are known.
//   - Shares by contiguous ranges of units: a table whose files are
//     sorted (by date, say) has its filtered-out rows in runs, so one host
//     would count the expensive units. Index modulo the host count spreads
//     every range over all hosts.

import (
	"context"
	"errors"
	"fmt"

	"github.com/lastmile/lastmile/pool"
)

// ErrCountAlone, returned by Options.ShareCounts, says that the other
// hosts' counts will not come (the trainers could not relay them): the
// run counts the rest of the units itself, as without ShareCounts.
var ErrCountAlone = errors.New("the other hosts' unit counts will not come: this host counts every unit")

// CountShare is one host's count of its share of a plan's units (Options.
// ShareCounts).
type CountShare struct {
	// Plan is PlanDigest of the plan whose units are counted: the same on
	// every host of the world, or their lists cannot be merged.
	Plan string
	// Hosts and Host: the share is the units whose index in the plan is
	// Host modulo Hosts.
	Hosts, Host int
	// Rows are the rows each unit yields, by its index in the plan; -1
	// for the units that other hosts count.
	Rows []int64
}

// Counts reports whether unit i (its index in the plan) is this share's
// to count.
func (s CountShare) Counts(i int) bool { return i%s.Hosts == s.Host }

// check checks all, every unit's rows as the hosts counted them, against
// this host's share: as many units, none uncounted, this host's own
// counts unchanged.
func (s CountShare) check(all []int64) error {
	if len(all) != len(s.Rows) {
		return fmt.Errorf("the hosts' unit counts list %d units, but this host planned %d (plan %s): every host must plan the same input", len(all), len(s.Rows), s.Plan)
	}
	for i, n := range all {
		switch {
		case n < 0:
			return fmt.Errorf("the hosts' unit counts have none for unit %d (host %d's to count)", i, i%s.Hosts)
		case s.Counts(i) && n != s.Rows[i]:
			return fmt.Errorf("the hosts' unit counts give unit %d %d rows, but this host counted %d: every host must plan the same input (plan %s)", i, n, s.Rows[i], s.Plan)
		}
	}
	return nil
}

// count returns every unit's rows for prepare: from the plan, by this
// host's share and the other hosts' (hooks.shareCounts), or by counting
// every unit here.
func (hs *hostSplit) count(ctx context.Context, proc *processor, cfg pool.Config, hooks runHooks) ([]int64, error) {
	if proc.exact || hooks.shareCounts == nil {
		return countUnits(ctx, proc, cfg, hooks.gate, nil)
	}
	share := CountShare{Plan: tablesDigest(PlanDigest(proc.plan), hs.tables), Hosts: hs.Count, Host: hs.Index}
	var err error
	if share.Rows, err = countUnits(ctx, proc, cfg, hooks.gate, share.Counts); err != nil {
		return nil, err
	}
	all, err := hooks.shareCounts(ctx, share)
	if errors.Is(err, ErrCountAlone) {
		return hs.countRest(ctx, proc, cfg, hooks, share)
	}
	if err != nil {
		return nil, fmt.Errorf("exchanging the hosts' unit counts: %w", err)
	}
	if err := share.check(all); err != nil {
		return nil, err
	}
	return all, nil
}

// countRest counts the units of every other host's share, and returns
// them with share's: every unit's rows, as without ShareCounts.
func (hs *hostSplit) countRest(ctx context.Context, proc *processor, cfg pool.Config, hooks runHooks, share CountShare) ([]int64, error) {
	rest, err := countUnits(ctx, proc, cfg, hooks.gate, func(i int) bool { return !share.Counts(i) })
	if err != nil {
		return nil, err
	}
	for i, n := range share.Rows {
		if share.Counts(i) {
			rest[i] = n
		}
	}
	return rest, nil
}

// check returns an error when unit u (its index in the plan) yielded
// rows other than it was dealt at: another host's count of it was wrong,
// or the unit's file changed since it was counted. Nil on one host.
func (hs *hostSplit) check(proc *processor, u int32, rows int) error {
	if hs == nil || int(u) >= len(hs.counts) || hs.counts[u] == int64(rows) {
		return nil
	}
	pu := proc.plan.Units[u]
	return fmt.Errorf("unit %d (%s, row group %d) yielded %d rows, but the hosts dealt it at %d: "+
		"its file changed since it was counted, or the hosts read different inputs; submit the job again",
		u, pu.File, pu.RowGroup, rows, hs.counts[u])
}
