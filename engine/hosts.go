package engine

// Several hosts.
//
// torchrun --nnodes H --nproc-per-node L runs a job's H×L ranks on H
// hosts, and each host's lastmiled serves only the L ranks that run on it
// (global ranks Index×L to Index×L+L-1). A host that made a ring for
// every rank of the world would see the rings of the other hosts' ranks
// never read: they fill, and stop its producer after a few steps.
//
// Invariants:
//   - Every rank of the world gets the same number of batches each epoch
//     (DDP hangs otherwise), although no host sees another's batches.
//   - Each input row goes to at most one rank of the world in an epoch
//     (exactly one, less the rows that last: drop leaves over).
//   - A host's batches depend only on the input, the spec, the seed, the
//     host count and its index: never on the workers, on timing, or on
//     anything another host does. So resume stays exact per rank.
//
// Steps:
//  1. Before its first epoch, each host counts every unit's rows: from the
//     plan where nothing drops rows, else with the Early columns and Select
//     only (what resuming uses), else, where later ops drop rows too, by
//     running the units whole. A unit's count does not change between
//     epochs (nothing row-local depends on the epoch; the unit cache
//     relies on the same), so once per job suffices (Options.Counted and
//     UnitRows carry them to the job's later runs), and every host finds
//     the same counts.
//  2. Units are dealt to hosts by those counts (assignUnits): the largest
//     first (ties in an order drawn from the job's seed), each to the host
//     with the fewest rows so far. A host reads the same units every
//     epoch, in that epoch's shuffled unit order, so its unit cache serves
//     its later epochs; the row shuffle then mixes them within the host. Dealing by rows kept,
//     not planned, keeps a filter that keeps some files' rows only from
//     leaving one host short and the others dropping rows to match it.
//  3. Each host batches its own units' rows for its L ranks, exactly as a
//     one-host job of world size L would, with a window seed of its own.
//  4. An epoch has the steps every host can fill: with last: drop the
//     least of the hosts' full steps, with last: pad the most, the hosts
//     with fewer rows padding whole steps from their epoch's first rows.
//
// Rejected designs:
//   - Every host batching the whole world's rows and packing only its own
//     ranks' batches: byte-identical to one host, but each host decodes
//     everything, H times the CPU of the job.
//   - Dealing rows (not units) to hosts: a page holds rows of every host,
//     so each host would still decompress every page.
//   - Hosts' daemons exchanging their counts with each other: it needs
//     them to find each other before training starts, and a protocol for
//     one that is late or gone. Counting locally costs the Early columns
//     of every unit once per job and needs nothing from anyone; it is a
//     fixed share of the whole job on every host, so it weighs more as
//     hosts are added. Where the trainers can relay the counts, each host
//     counts only its share instead (hostcounts.go).
//   - Dealing units by their planned rows, before counting: cheaper to
//     start, but a filter that keeps a few files' rows leaves the hosts
//     far apart, and with last: drop every host then drops down to the
//     poorest one's steps, each epoch.
//   - A new unit assignment every epoch: a host's unit cache would then
//     miss (or have to hold every unit) in later epochs.

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/iceberg"
	"github.com/lastmile/lastmile/pool"
	"github.com/lastmile/lastmile/spec"
)

// streamHosts draws the order in which units are dealt to hosts.
const streamHosts = 0x686f737473 // "hosts"

// Hosts says which part of a job's world this host serves: the job's
// world_size ranks run on Count hosts, world_size/Count each, and this is
// host Index, whose ranks are Index×L to Index×L+L-1 for L = world/Count.
// The zero value (or Count 1) is one host with every rank.
type Hosts struct {
	Count int
	Index int
}

// Split returns the number of ranks on this host and its first rank, or
// an error saying why the split does not fit a world of world ranks.
func (h Hosts) Split(world int) (local, base int, err error) {
	if h.Count <= 1 {
		if h.Index != 0 {
			return 0, 0, fmt.Errorf("host %d of %d: there is only host 0", h.Index, max(h.Count, 1))
		}
		return world, 0, nil
	}
	switch {
	case h.Index < 0 || h.Index >= h.Count:
		return 0, 0, fmt.Errorf("host %d of %d: want 0 to %d", h.Index, h.Count, h.Count-1)
	case world%h.Count != 0:
		return 0, 0, fmt.Errorf("world size %d does not split evenly between %d hosts: every host must run as many ranks (torchrun's --nproc-per-node)", world, h.Count)
	}
	local = world / h.Count
	return local, h.Index * local, nil
}

// assignUnits deals units to hosts by their rows (step 2 above) and
// returns each unit's host, by its index in rows.
func assignUnits(rows []int64, hosts int, seed uint64) []int32 {
	owner := make([]int32, len(rows))
	order := make([]int32, len(rows))
	permute(order, newRNG(seed, streamHosts, 0, 0))
	// The largest first (ties in the seed's order): each host then ends
	// within one unit's rows of the others.
	slices.SortStableFunc(order, func(a, b int32) int { return cmp.Compare(rows[b], rows[a]) })
	load := make([]int64, hosts)
	for _, u := range order {
		h := 0
		for k := 1; k < hosts; k++ {
			if load[k] < load[h] {
				h = k
			}
		}
		owner[u] = int32(h)
		load[h] += rows[u]
	}
	return owner
}

// PlanDigest identifies the units plan deals out: each one's file, the
// file's size, its row group and rows. Every host of a world must plan the
// same units, or their shares overlap and their steps disagree (a host
// that lists a directory after a file landed in it, or an Iceberg table
// after a commit); the trainers compare the hosts' digests
// (docs/python.md, "Several hosts").
func PlanDigest(plan *decode.Plan) string { return planDigest(plan, false) }

// JobPlanDigest is PlanDigest for a job's plan: beside the units, the
// snapshots of the job's Iceberg tables (its inputs and side tables, as
// pinned), which the units alone do not show. A delete-only commit (a
// merge-on-read DELETE) leaves every data file, and so every unit, as it
// was, but removes rows; and a side table is in no unit. Hosts that
// pinned different snapshots must not start as if they read the same
// rows. A job without Iceberg tables has PlanDigest's digest.
func JobPlanDigest(plan *decode.Plan, job *spec.Job) string {
	return tablesDigest(planDigest(plan, false), tablesOf(job))
}

// tablesOf returns the Iceberg tables job reads, as pinned, one a line.
func tablesOf(job *spec.Job) string {
	var b strings.Builder
	for i, in := range job.Inputs {
		if iceberg.IsRef(in) {
			fmt.Fprintf(&b, "inputs[%d]\x00%s\n", i, in)
		}
	}
	for _, op := range job.Pipeline {
		if op.Kind == "join" && op.Join != nil && iceberg.IsRef(op.Join.Table) {
			fmt.Fprintf(&b, "%s.join.table\x00%s\n", op.Path, op.Join.Table)
		}
	}
	return b.String()
}

// tablesDigest folds tables (tablesOf) into a plan digest.
func tablesDigest(digest, tables string) string {
	if tables == "" {
		return digest
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s", digest, tables)
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// planDigest is PlanDigest, with each file's modification time too where
// mtimes is set: what this host's counts of a plan's units hold for (a
// file rewritten in place, its size kept, yields other rows).
func planDigest(plan *decode.Plan, mtimes bool) string {
	h := sha256.New()
	for _, u := range plan.Units {
		fmt.Fprintf(h, "%s\x00%d\x00%d\x00%d\x00%d\n", u.File, u.FileSize, u.RowGroup, u.RowStart, u.Rows)
		if mtimes {
			fmt.Fprintf(h, "%d\n", u.ModTime)
		}
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// hostSplit is a multi-host run's share of the job (nil: one host).
type hostSplit struct {
	Hosts
	local, base int
	seed        uint64
	tables      string  // the job's Iceberg tables as pinned (tablesOf): in the digest the hosts compare
	owner       []int32 // host of each plan unit (assignUnits), set by prepare
	counts      []int64 // rows of each plan unit, set by prepare
	rows        []int64 // each host's rows in an epoch, set by prepare
}

// newHostSplit checks h against a job of world ranks over the units of
// proc's plan; prepare deals the units.
func newHostSplit(h Hosts, world int, proc *processor, seed uint64, tables string) (*hostSplit, error) {
	local, base, err := h.Split(world)
	if err != nil || h.Count <= 1 {
		return nil, err
	}
	if n := len(proc.plan.Units); n < h.Count {
		return nil, fmt.Errorf("%d hosts but the input has %d work units: each host needs one at least (use fewer hosts, or smaller units: decode.max_unit_rows)", h.Count, n)
	}
	return &hostSplit{Hosts: h, local: local, base: base, seed: seed, tables: tables}, nil
}

// units returns the units of order that this host reads.
func (hs *hostSplit) units(order []int32) []int32 {
	if hs == nil {
		return order
	}
	mine := order[:0:0]
	for _, u := range order {
		if hs.owner[u] == int32(hs.Index) {
			mine = append(mine, u)
		}
	}
	return mine
}

// prepare counts every unit's rows before a multi-host run's first epoch
// (countUnits; an earlier run's counts of the same plan serve as well),
// deals the units to hosts by them, and sets bt's steps per epoch to what
// every host fills (steps 1, 2 and 4 above).
func (hs *hostSplit) prepare(ctx context.Context, proc *processor, cfg pool.Config, bt *batcher, prog *Progress,
	hooks runHooks) error {
	if hs == nil {
		return nil
	}
	rows, plan := hooks.unitRows, planDigest(proc.plan, true)
	if len(rows) != len(proc.plan.Units) || hooks.unitRowsPlan != plan {
		var err error
		if hooks.dealt && len(hooks.unitRows) > 0 {
			// The other hosts deal by the old counts: only the same ones do.
			if rows, err = countUnits(ctx, proc, cfg, hooks.gate, nil); err != nil {
				return err
			}
			if !slices.Equal(rows, hooks.unitRows) {
				return fmt.Errorf("this host plans other units than when the %d hosts dealt them (%d units, then %d; plan %s, then %s): "+
					"its input changed since (a file added, removed or rewritten), and it cannot deal them as the other hosts did; submit the job again on every host",
					hs.Count, len(rows), len(hooks.unitRows), plan, hooks.unitRowsPlan)
			}
		} else if rows, err = hs.count(ctx, proc, cfg, hooks); err != nil {
			return err
		}
		if hooks.counted != nil {
			hooks.counted(plan, slices.Clone(rows))
		}
	}
	hs.counts = rows
	hs.owner = assignUnits(rows, hs.Count, hs.seed)
	hs.rows = make([]int64, hs.Count)
	for u, h := range hs.owner {
		hs.rows[h] += rows[u]
	}
	n := hs.perEpoch(bt.size, bt.last)
	if n == 0 && slices.Max(hs.rows) > 0 {
		return fmt.Errorf("the %d hosts cannot each fill a step of %d ranks × %d rows: their units yield %v rows "+
			"(use fewer hosts, a smaller batch, or last: pad)", hs.Count, hs.local, bt.size, hs.rows)
	}
	if bt.last == "pad" {
		// A host whose units yield no row has nothing to pad its steps
		// with (the batcher would fail at its first epoch's end, the other
		// hosts' ranks waiting on its ranks meanwhile): every host says so
		// now, before a batch.
		if h := slices.Index(hs.rows, 0); h >= 0 && n > 0 {
			return fmt.Errorf("host %d of %d is dealt units that yield no rows, so last: pad has nothing to fill its ranks' %d steps with (the hosts' rows: %v): "+
				"use last: drop, fewer hosts, or smaller units (decode.max_unit_rows)", h, hs.Count, n, hs.rows)
		}
		bt.padTo = n
	} else {
		bt.capSteps = n
	}
	if hooks.onDealt != nil {
		hooks.onDealt() // before the steps are known (Options.OnDealt)
	}
	prog.setBatchesPerEpoch(n)
	return nil
}

// perEpoch is the steps of an epoch that every host fills: with last:
// pad the most any host's rows make, else the fewest full ones.
func (hs *hostSplit) perEpoch(size int, last string) int64 {
	var n int64 = -1
	for _, rows := range hs.rows {
		k := batchesPerEpoch(rows, size, hs.local, last)
		if n < 0 || last == "pad" && k > n || last != "pad" && k < n {
			n = k
		}
	}
	return n
}

// countUnits returns the rows each unit of proc's plan yields: the plan's
// where nothing drops rows, else counted on the pool, each unit through
// gate (nil: none), the daemon's share of the CPU between jobs.
// Where mine is not nil, only the units i it reports are counted; the
// others' rows are -1.
func countUnits(ctx context.Context, proc *processor, cfg pool.Config, gate func(context.Context) (func(), error),
	mine func(i int) bool) ([]int64, error) {
	units := proc.plan.Units
	rows := make([]int64, len(units))
	if proc.exact {
		for i, u := range units {
			rows[i] = u.Rows
		}
		return rows, nil
	}
	work := func(ctx context.Context, worker, i int, buf *column.Batch) (*column.Batch, error) {
		if mine != nil && !mine(i) {
			rows[i] = -1
			return buf, nil
		}
		if proc.skips(units[i].Seq) {
			return buf, nil // pruned by its statistics: no rows, nothing read
		}
		if gate != nil {
			release, err := gate(ctx)
			if err != nil {
				return buf, err
			}
			defer release()
		}
		n, b, err := countUnit(ctx, proc, worker, units[i], buf)
		rows[i] = n
		return b, err
	}
	if err := pool.Run(ctx, cfg, len(units), work, func(int, *column.Batch) error { return nil }); err != nil {
		return nil, fmt.Errorf("counting the units' rows to deal them to hosts: %w", err)
	}
	return rows, nil
}

// countUnit returns how many rows unit u yields: with Select only where
// that tells (processor.count), else by running it whole into buf.
func countUnit(ctx context.Context, proc *processor, worker int, u decode.Unit, buf *column.Batch) (int64, *column.Batch, error) {
	if proc.counted {
		n, err := proc.count(ctx, worker, u)
		return n, buf, err
	}
	if buf == nil {
		buf = new(column.Batch)
	}
	if st := proc.workers[worker].state; st != nil {
		// Counted, not emitted: the ops' counters leave these rows out.
		st.CountRows(false)
		defer st.CountRows(true)
	}
	err := proc.run(ctx, worker, u, buf)
	return int64(buf.Rows), buf, err
}
