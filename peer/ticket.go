package peer

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/lastmile/lastmile/decode"
)

// Version is the spill protocol's version. A ticket of another version is
// refused by the peer (codes.FailedPrecondition), and the requester runs
// the unit itself.
const Version = 1

// VersionDeletes is the version of a ticket whose unit has deleted rows
// (decode.Unit.Deleted: an Iceberg table's deletes) listed in the unit
// as JSON numbers. A peer that does not drop deleted rows would ignore
// the field and send them back, so such a ticket is of a version that
// peers before deletes refuse (the requester then runs the unit
// itself). Requesters now send VersionDeleteSet; peers still take this
// version from requesters that send it. The version peers report in Info
// stays Version.
const VersionDeletes = 2

// VersionDeleteSet is the version of a ticket whose unit's deleted rows
// travel as a portable roaring bitmap (Ticket.DeletedSet, deleteset.go)
// instead: a few bytes for a run of deleted rows, at most one bit a row
// of the unit, where JSON numbers took up to eight bytes a row and kept
// units with more than about 150,000 deleted rows on the GPU host.
// Peers of version 2 refuse it, so they never see deletes they would
// not drop.
const VersionDeleteSet = 3

// Ticket is a Flight ticket: one unit of one job, named portably.
type Ticket struct {
	Version int         `json:"v"`
	Job     string      `json:"job"`  // the job's spec, inputs and side tables as ROOT/REL names
	Hash    string      `json:"hash"` // sha256 of Job, the key of the peer's compiled jobs
	Unit    decode.Unit `json:"unit"` // File as ROOT/REL
	// Wire is the most compact wire form the requester reads (WirePlain
	// or WireCompact, compact.go). A peer that knows no such field sends
	// the plain form, which every requester reads.
	Wire int `json:"wire,omitempty"`
	// DeletedSet is Unit.Deleted as a portable roaring bitmap (version
	// 3 only; Unit.Deleted is then empty on the wire).
	DeletedSet []byte `json:"deleted_set,omitempty"`
	// Plan is the requester's plan's columns (PlanColumns, as JSON): the
	// peer decodes and computes the unit by them. A requester before it
	// sends none, and the peer then plans the unit's file itself, which
	// gives the same columns unless the job reads an Iceberg table whose
	// schema changed since some of its files were written.
	Plan json.RawMessage `json:"plan,omitempty"`
}

// PlanColumns are a requester's plan's columns: its fields and
// partition columns (decode.PlanOf).
type PlanColumns struct {
	Fields     []decode.Field `json:"fields"`
	Partitions []decode.Field `json:"partitions,omitempty"`
}

// planKey is the key a peer's compiled jobs are cached by: the job's
// hash and, where the ticket carries the requester's columns, theirs.
func (t *Ticket) planKey() string {
	if len(t.Plan) == 0 {
		return t.Hash
	}
	return t.Hash + "+" + jobHash(t.Plan)
}

func jobHash(job []byte) string {
	sum := sha256.Sum256(job)
	return hex.EncodeToString(sum[:])
}

// maxTicket bounds a ticket a peer will parse.
const maxTicket = 1 << 20

// maxDeletedRows bounds the deleted rows of one ticket's unit (64 MiB
// once expanded): a bitmap of a few kilobytes can name billions of rows.
const maxDeletedRows = 1 << 24

// marshalTicket encodes the ticket for unit u (File already a ROOT/REL
// name), with plan the requester's columns (nil: none): version 1
// without deleted rows, version 3 with them.
func marshalTicket(job, hash string, plan json.RawMessage, u decode.Unit, wire int) ([]byte, error) {
	t := Ticket{Version: Version, Job: job, Hash: hash, Unit: u, Wire: wire, Plan: plan}
	if len(u.Deleted) > 0 {
		if len(u.Deleted) > maxDeletedRows {
			return nil, fmt.Errorf("%d deleted rows in one unit (a peer takes at most %d)", len(u.Deleted), maxDeletedRows)
		}
		set, err := encodeDeleted(u.Deleted)
		if err != nil {
			return nil, err
		}
		t.Version, t.DeletedSet, t.Unit.Deleted = VersionDeleteSet, set, nil
	}
	return json.Marshal(t)
}

// parseTicket decodes and checks a ticket from the wire.
func parseTicket(b []byte) (*Ticket, error) {
	if len(b) > maxTicket {
		return nil, fmt.Errorf("ticket of %d bytes (at most %d)", len(b), maxTicket)
	}
	var t Ticket
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("ticket: %w", err)
	}
	if err := t.checkDeleted(); err != nil {
		return &t, err
	}
	if t.Job == "" || jobHash([]byte(t.Job)) != t.Hash {
		return nil, fmt.Errorf("ticket: job spec does not match its hash")
	}
	if t.Unit.Rows <= 0 || len(t.Unit.Chunks) == 0 || t.Unit.File == "" {
		return nil, fmt.Errorf("ticket: unit %+v is empty", t.Unit)
	}
	return &t, nil
}

// checkDeleted checks that the ticket's version matches how its unit's
// deleted rows travel, and expands a version 3 bitmap into Unit.Deleted.
// A version this peer does not speak wraps errVersion.
func (t *Ticket) checkDeleted() error {
	switch {
	case t.Version != Version && t.Version != VersionDeletes && t.Version != VersionDeleteSet:
		return fmt.Errorf("%w: ticket of protocol version %d, this peer speaks %d to %d: upgrade the older side",
			errVersion, t.Version, Version, VersionDeleteSet)
	case t.Version == Version && (len(t.Unit.Deleted) > 0 || len(t.DeletedSet) > 0),
		t.Version == VersionDeletes && (len(t.Unit.Deleted) == 0 || len(t.DeletedSet) > 0),
		t.Version == VersionDeleteSet && (len(t.Unit.Deleted) > 0 || len(t.DeletedSet) == 0):
		return fmt.Errorf("ticket: version %d with %d deleted rows listed and a deleted-row set of %d bytes",
			t.Version, len(t.Unit.Deleted), len(t.DeletedSet))
	case t.Version == VersionDeletes && len(t.Unit.Deleted) > maxDeletedRows:
		return fmt.Errorf("ticket: %d deleted rows (at most %d)", len(t.Unit.Deleted), maxDeletedRows)
	case t.Version == VersionDeleteSet:
		rows, err := decodeDeleted(t.DeletedSet, t.Unit.Rows)
		if err != nil {
			return fmt.Errorf("ticket: %w", err)
		}
		t.Unit.Deleted, t.DeletedSet = rows, nil
	}
	return nil
}
