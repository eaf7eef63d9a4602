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
// (decode.Unit.Deleted: an Iceberg table's position deletes). A peer
// that does not drop them would ignore the field and send deleted rows
// back, so such a ticket is of a version that peers before deletes
// refuse (the requester then runs the unit itself); peers since take
// both versions. The version peers report in Info stays Version.
const VersionDeletes = 2

// ticketVersion is the version of a ticket for u.
func ticketVersion(u *decode.Unit) int {
	if len(u.Deleted) > 0 {
		return VersionDeletes
	}
	return Version
}

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
}

func jobHash(job []byte) string {
	sum := sha256.Sum256(job)
	return hex.EncodeToString(sum[:])
}

// maxTicket bounds a ticket a peer will parse.
const maxTicket = 1 << 20

// parseTicket decodes and checks a ticket from the wire.
func parseTicket(b []byte) (*Ticket, error) {
	if len(b) > maxTicket {
		return nil, fmt.Errorf("ticket of %d bytes (at most %d)", len(b), maxTicket)
	}
	var t Ticket
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("ticket: %w", err)
	}
	if t.Version != Version && t.Version != VersionDeletes {
		return &t, fmt.Errorf("%w: ticket of protocol version %d, this peer speaks %d: upgrade the older side", errVersion, t.Version, Version)
	}
	if t.Version != ticketVersion(&t.Unit) {
		return nil, fmt.Errorf("ticket: version %d for a unit with %d deleted rows", t.Version, len(t.Unit.Deleted))
	}
	if t.Job == "" || jobHash([]byte(t.Job)) != t.Hash {
		return nil, fmt.Errorf("ticket: job spec does not match its hash")
	}
	if t.Unit.Rows <= 0 || len(t.Unit.Chunks) == 0 || t.Unit.File == "" {
		return nil, fmt.Errorf("ticket: unit %+v is empty", t.Unit)
	}
	return &t, nil
}
