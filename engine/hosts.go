package engine

// Several hosts.
//
// torchrun --nnodes H --nproc-per-node L runs a job's H×L ranks on H
// hosts, and each host's lastmiled serves only the L ranks that run on it
// (global ranks Index×L to Index×L+L-1). Before this, a host made a ring
// for every rank of the world; the rings of the other hosts' ranks were
// never read, filled, and stopped its producer after a few steps.
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
//  1. Units are dealt to hosts once for the job (assignUnits): in an order
//     drawn from the job's seed, each unit to the host with the fewest
//     planned rows so far. A host reads the same units every epoch, in
//     that epoch's shuffled unit order, so its unit cache serves its later
//     epochs; the row shuffle then mixes them within the host.
//  2. Each host batches its own units' rows for its L ranks, exactly as a
//     one-host job of world size L would, with a window seed of its own.
//  3. The steps of an epoch are what every host can fill: with last: drop
//     the least of the hosts' full steps, with last: pad the most, the
//     hosts with fewer rows padding whole steps from their epoch's first
//     rows. A unit's row count does not change between epochs (nothing
//     row-local depends on the epoch; the unit cache relies on the same),
//     so each host counts the other hosts' units once per run, before its
//     first epoch: from the plan where nothing drops rows, else with the
//     Early columns and Select only (what resuming uses), or by running
//     the units whole where later ops drop rows too.
//
// Rejected designs:
//   - Every host batching the whole world's rows and packing only its own
//     ranks' batches: byte-identical to one host, but each host decodes
//     everything, H times the CPU of the job.
//   - Dealing rows (not units) to hosts: a page holds rows of every host,
//     so each host would still decompress every page.
//   - Hosts exchanging their counts over the network: it needs the hosts'
//     daemons to find each other before training starts, and a protocol
//     for one that is late or gone. Counting locally costs the other
//     hosts' Early columns once per run and needs nothing from anyone.
//   - A new unit assignment every epoch: a host's unit cache would then
//     miss (or have to hold every unit) in later epochs.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/pool"
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

// assignUnits deals the units to hosts (step 1 above) and returns each
// unit's host, by its index in units.
func assignUnits(units []decode.Unit, hosts int, seed uint64) []int32 {
	owner := make([]int32, len(units))
	order := make([]int32, len(units))
	permute(order, newRNG(seed, streamHosts, 0, 0))
	load := make([]int64, hosts)
	for _, u := range order {
		h := 0
		for k := 1; k < hosts; k++ {
			if load[k] < load[h] {
				h = k
			}
		}
		owner[u] = int32(h)
		load[h] += units[u].Rows
	}
	return owner
}

// PlanDigest identifies the units plan deals out: each one's file, the
// file's size, its row group and rows. Every host of a world must plan the
// same units, or their shares overlap and their steps disagree (a host
// that lists a directory after a file landed in it, or an Iceberg table
// after a commit); the trainers compare the hosts' digests
// (docs/python.md, "Several hosts").
func PlanDigest(plan *decode.Plan) string {
	h := sha256.New()
	for _, u := range plan.Units {
		fmt.Fprintf(h, "%s\x00%d\x00%d\x00%d\x00%d\n", u.File, u.FileSize, u.RowGroup, u.RowStart, u.Rows)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// hostSplit is a multi-host run's share of the job (nil: one host).
type hostSplit struct {
	Hosts
	local, base int
	owner       []int32 // host of each plan unit (assignUnits)
	// rows is each host's rows in an epoch: counted for the other hosts
	// before the first epoch, and for this one only where the plan tells
	// (exact); -1 where not known.
	rows []int64
}

// newHostSplit plans this host's share of a job of world ranks over the
// units of proc's plan.
func newHostSplit(h Hosts, world int, proc *processor, seed uint64) (*hostSplit, error) {
	local, base, err := h.Split(world)
	if err != nil || h.Count <= 1 {
		return nil, err
	}
	units := proc.plan.Units
	if len(units) < h.Count {
		return nil, fmt.Errorf("%d hosts but the input has %d work units: each host needs one at least (use fewer hosts, or smaller units: decode.max_unit_rows)", h.Count, len(units))
	}
	hs := &hostSplit{Hosts: h, local: local, base: base, owner: assignUnits(units, h.Count, seed)}
	hs.rows = slices.Repeat([]int64{-1}, h.Count)
	return hs, nil
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

// count fills hs.rows for every host but this one (and for this one too
// where the plan tells), running the other hosts' units as far as their
// row counts need (step 3 above), each through gate (nil: none).
func (hs *hostSplit) count(ctx context.Context, proc *processor, cfg pool.Config, gate func(context.Context) (func(), error)) error {
	units := proc.plan.Units
	if proc.exact { // every unit yields its planned rows
		clear(hs.rows)
		for u, h := range hs.owner {
			hs.rows[h] += units[u].Rows
		}
		return nil
	}
	var theirs []int32
	for u, h := range hs.owner {
		if int(h) != hs.Index {
			theirs = append(theirs, int32(u))
		}
	}
	counts := make([]int64, len(theirs))
	work := func(ctx context.Context, worker, i int, buf *column.Batch) (*column.Batch, error) {
		if gate != nil { // the daemon's share of the CPU between jobs
			release, err := gate(ctx)
			if err != nil {
				return buf, err
			}
			defer release()
		}
		n, b, err := countUnit(ctx, proc, worker, units[theirs[i]], buf)
		counts[i] = n
		return b, err
	}
	if err := pool.Run(ctx, cfg, len(theirs), work, func(int, *column.Batch) error { return nil }); err != nil {
		return fmt.Errorf("counting the other hosts' rows: %w", err)
	}
	for h := range hs.rows {
		if h != hs.Index {
			hs.rows[h] = 0
		}
	}
	for i, u := range theirs {
		hs.rows[hs.owner[u]] += counts[i]
	}
	return nil
}

// countUnit returns how many rows unit u yields: with Select only where
// that tells (processor.count), else by running it whole into buf.
func countUnit(ctx context.Context, proc *processor, worker int, u decode.Unit, buf *column.Batch) (int64, *column.Batch, error) {
	if proc.counted || proc.skips(u.Seq) {
		n, err := proc.count(ctx, worker, u)
		return n, buf, err
	}
	if n := proc.cache.rows(u.Seq); n >= 0 {
		return n, buf, nil
	}
	if buf == nil {
		buf = new(column.Batch)
	}
	if st := proc.workers[worker].state; st != nil {
		// Not this host's rows: the ops' counters leave them out.
		st.CountRows(false)
		defer st.CountRows(true)
	}
	err := proc.run(ctx, worker, u, buf)
	return int64(buf.Rows), buf, err
}

// steps returns the limits on an epoch's steps that the other hosts set
// (step 3 above): with last: drop the least of their full steps (capped),
// with pad the most of their steps, padded ones included (padTo). capped
// is -1 where nothing caps this host, padTo 0 where nothing pads it.
func (hs *hostSplit) steps(size int, last string) (capped, padTo int64) {
	capped = -1
	if hs == nil {
		return capped, 0
	}
	step := int64(size) * int64(hs.local)
	for h, n := range hs.rows {
		if h == hs.Index || n < 0 {
			continue
		}
		switch last {
		case "pad":
			padTo = max(padTo, (n+step-1)/step)
		default:
			if capped < 0 || n/step < capped {
				capped = n / step
			}
		}
	}
	return capped, padTo
}

// perEpoch is every rank's batches in an epoch where every host's rows
// are known (the plan's, when nothing drops rows), else -1.
func (hs *hostSplit) perEpoch(size int, last string) int64 {
	var n int64 = -1
	for _, rows := range hs.rows {
		if rows < 0 {
			return -1
		}
		k := batchesPerEpoch(rows, size, hs.local, last)
		if n < 0 || last == "pad" && k > n || last != "pad" && k < n {
			n = k
		}
	}
	return n
}

// prepare counts the other hosts' rows before a multi-host run's first
// epoch and sets bt's limits on every epoch's steps from them.
func (hs *hostSplit) prepare(ctx context.Context, proc *processor, cfg pool.Config, bt *batcher, prog *Progress,
	gate func(context.Context) (func(), error)) error {
	if hs == nil {
		return nil
	}
	if err := hs.count(ctx, proc, cfg, gate); err != nil {
		return err
	}
	bt.capSteps, bt.padTo = hs.steps(bt.size, bt.last)
	if n := hs.perEpoch(bt.size, bt.last); n >= 0 {
		prog.setBatchesPerEpoch(n)
	}
	return nil
}
