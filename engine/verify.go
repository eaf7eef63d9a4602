package engine

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
)

// Verifying a sample of spilled units
//
// A peer's stream is checked for its shape, its row count and a checksum
// of its bytes (spill.go, package peer), which catches a broken
// transport or a buggy encoder, not a peer that computes something else:
// a certified peer that sends well-formed output of the right shape but
// other values would be believed. A unit's output is a pure function of
// the unit and the job, so the requester can check a peer by computing
// some of its units here as well and comparing. A Spill that implements
// Verifier decides which.
//
// Invariants:
//   - The choice is the requester's alone: the Spill draws it from its
//     own randomness once the peer has answered, so the ticket the peer
//     saw is the same whether the unit is verified or not, and nothing
//     the peer sends can change the odds. The peer may guess afterwards
//     that a unit was verified (this spill worker's next ticket comes a
//     unit's compute later), but its answer is sent by then, and the
//     draws are independent: it learns nothing of the next unit's.
//   - A verified unit is delivered only once both outputs are whole and
//     compared. They must be equal byte for byte (sameOutput: the bytes
//     of every column's rows, as the wire checksum covers them); when
//     they are not, the local output is the unit's, so the batches stay
//     those of a run without peers, and the Spill is told
//     (mismatchFunc): it stops trusting the peer and has every later
//     unit from it, answered or not, computed here (Verifier.Ran says
//     verify for them).
//   - The local run is a unit computed here like any other: it claims a
//     local worker's place (claimHere, waiting for one) and then the CPU
//     gate, so it never computes beside a full set of local workers. It
//     waits rather than skips, as a hedge does: a sample that shrank
//     whenever the requester is busy would be one the peer can steer by
//     answering when it is, and a verification costs one unit's compute,
//     a share of the spill the operator chose (peers.verify).
//
// Steps (unitRun.verify): the spill worker has the peer's output in its
// buffer, not yet counted; it claims a local place, computes the unit
// into a spare batch on its own decoder (the peer run needed none),
// compares, and delivers one of the two, returning the other to the
// spare pool; the unit is counted done, as spilled or as computed here,
// by the one delivered.
//
// Rejected: starting the local run beside the peer's, as a hedge at
// time zero (a verified unit then costs its CPU even when the peer would
// have been quick, and the peer could tell a verified unit by the
// requester's cancellation of it when the local run finishes first);
// verifying only when a local worker is idle (the sample would depend on
// the requester's load, which a peer sees in the pace of its tickets);
// comparing hashes the peer sends of its own output (the peer computes
// those too).

// Verifier is implemented by a Spill that has some of its peers' units
// computed here as well and compared (verify.go).
type Verifier interface {
	// Ran is called once for each unit RunUnit reported a peer ran into
	// out, before the engine checks it. verify says whether the unit
	// is computed here too before either output is used; when the two
	// differ, the engine uses its own and calls mismatch once with a
	// description of the first difference. Ran answers verify for
	// every unit of a peer it no longer trusts.
	Ran(u decode.Unit, out *column.Batch) (verify bool, mismatch func(detail string))
}

// mismatchFunc reports that a verified unit's outputs differed; a nil
// one means the unit is not verified.
type mismatchFunc func(detail string)

// verifyRan asks the run's Spill whether the unit a peer ran into out is
// to be verified; nil: it is not (or the Spill is no Verifier).
func (rw runWorkers) verifyRan(u decode.Unit, out *column.Batch) mismatchFunc {
	v, ok := rw.spill.(Verifier)
	if !ok {
		return nil
	}
	verify, mismatch := v.Ran(u, out)
	if !verify {
		return nil
	}
	if mismatch == nil {
		mismatch = func(string) {}
	}
	return mismatch
}

// verify computes the epoch's i-th unit here and compares it with
// theirs, a peer's output of it, and returns
// the batch that is the unit's output: theirs when the two are equal,
// the local one otherwise (after calling mismatch).
func (ur *unitRun) verify(ctx context.Context, worker, i int, theirs *column.Batch, mismatch mismatchFunc) (*column.Batch, error) {
	release, err := ur.claimHere(ctx)
	if err != nil {
		return theirs, err
	}
	defer release()
	mine := ur.spare.get()
	took, err := ur.computeHere(ctx, worker, i, mine)
	if err != nil {
		ur.spare.put(mine)
		return theirs, err
	}
	ur.prog.UnitsVerified.Add(1)
	u := ur.proc.plan.Units[ur.units[i]]
	diff := sameOutput(theirs, mine)
	if diff == nil {
		ur.spare.put(mine)
		ur.acceptSpilled(u, theirs, nil)
		return theirs, nil
	}
	// The unit's output is the one computed here: counted as such.
	ur.countLocal(u, took)
	ur.prog.VerifyMismatches.Add(1)
	// A later epoch must not serve a lie believed before this one was
	// caught (cache.go: believed units).
	ur.proc.cache.distrust()
	mismatch(diff.Error())
	ur.spare.put(theirs)
	return mine, nil
}

// sameOutput compares two outputs of a unit byte for byte, over what a
// unit's output is: its row count and each column's name, type, width,
// length, and the bytes of its rows (values, offsets, validity; a reused
// batch's bytes past its rows are not its). Two outputs without rows
// are the same whatever their columns: a unit whose pipeline keeps no
// row leaves a local batch's columns as they were (shapeEmpty is the
// peer's), and adds nothing to any batch. It returns the first
// difference, or nil.
func sameOutput(a, b *column.Batch) error {
	if a.Rows == 0 && b.Rows == 0 {
		return nil
	}
	if a.Rows != b.Rows || len(a.Columns) != len(b.Columns) {
		return fmt.Errorf("%d rows in %d columns, here %d rows in %d columns", a.Rows, len(a.Columns), b.Rows, len(b.Columns))
	}
	for i := range a.Columns {
		x, y := &a.Columns[i], &b.Columns[i]
		if x.Name != y.Name || x.Kind != y.Kind || x.DType != y.DType || x.Width != y.Width || x.Len != y.Len {
			return fmt.Errorf("column %d is %s %v %v width %d len %d, here %s %v %v width %d len %d",
				i, x.Name, x.Kind, x.DType, x.Width, x.Len, y.Name, y.Kind, y.DType, y.Width, y.Len)
		}
		switch {
		case !bytes.Equal(rowBytes(x), rowBytes(y)):
			return fmt.Errorf("column %s: values differ", x.Name)
		case !slices.Equal(x.Offsets[:min(len(x.Offsets), x.Len+1)], y.Offsets[:min(len(y.Offsets), y.Len+1)]):
			return fmt.Errorf("column %s: offsets differ", x.Name)
		case (x.Valid == nil) != (y.Valid == nil) ||
			!bytes.Equal(x.Valid[:min(len(x.Valid), x.Len)], y.Valid[:min(len(y.Valid), y.Len)]):
			return fmt.Errorf("column %s: validity differs", x.Name)
		}
	}
	return nil
}

// rowBytes is the bytes of c's values, those past its rows left out.
func rowBytes(c *column.Column) []byte {
	return c.Data[:min(len(c.Data), c.Values()*c.DType.Size())]
}
