package peer

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/lastmile/lastmile/asuser"
	"github.com/lastmile/lastmile/decode"
)

// Version is the spill protocol's version, of tickets and of what peers
// report in Info. A ticket of another version is refused by the peer
// (codes.FailedPrecondition), and the requester runs the unit itself and
// excludes the peer until a probe finds it speaking this version.
//
// Versions before this one: 1, units without deleted rows; 2, deleted
// rows listed as JSON numbers; 3, deleted rows as a portable roaring
// bitmap (Ticket.DeletedSet). Version 4 adds the user a unit is read for
// (Ticket.User), whom a peer reads the unit's file and the job's side
// tables as. A peer of version 3 or before read them with its own
// credentials, so a requester never sends it a unit: the version change
// is what keeps it from doing so (it refuses a version 4 ticket), and a
// peer of version 4 refuses every older ticket, which names no user.
// Version 5 adds the requester's compute identity (Ticket.Compute,
// identity.go), which a peer refuses unless it is its own: a peer of
// version 4 would compute a ticket of any build, so it refuses version 5
// tickets, and a peer of version 5 refuses version 4 tickets, whose
// requester's build it cannot know.
const Version = 5

// maxGroups bounds the supplementary groups of a ticket's user (the
// kernel's NGROUPS_MAX).
const maxGroups = 65536

// User is whom a requester's unit is read for: the submitter of its job,
// as the requesting lastmiled recorded it from its control socket
// (SO_PEERCRED, SO_PEERGROUPS), or the user running `lastmile`. A peer
// opens the unit's file and the job's side tables beneath its roots with
// these credentials (asuser.Cred.Do), so that its kernel decides what it
// may read for them, as the GPU host's did. A peer takes a certified
// requester's word for the user, as an NFS server takes a client host's,
// and as such a server squashes root: uid 0 is read for as Nobody unless
// the peer trusts root (ServerConfig.TrustRoot), so that a requester's
// certificate alone never reads what no user may.
type User struct {
	UID    uint32   `json:"uid"`
	GID    uint32   `json:"gid"`
	Groups []uint32 `json:"groups,omitempty"`
}

// Nobody is whom a peer reads uid 0's units for when it does not trust
// root: the overflow uid and gid of Linux (65534), without groups.
var Nobody = User{UID: 65534, GID: 65534}

// Self is the user of this process (asuser.Self): what `lastmile` sends
// for the jobs it runs itself.
func Self() User {
	c := asuser.Self()
	return User{UID: c.UID, GID: c.GID, Groups: c.Groups}
}

// squash is u as a peer that does not trust root reads for it, and
// whether that changed anything: uid 0 is Nobody, without groups; gid 0,
// as the primary group or among Groups, is Nobody's gid, as an NFS
// server's root_squash maps both. Squashing the uid alone left the root
// group's files (0640 root:root) to any ticket naming uid 1, gid 0.
func (u User) squash() (User, bool) {
	if u.UID == 0 {
		return Nobody, true
	}
	squashed := false
	if u.GID == 0 {
		u.GID, squashed = Nobody.GID, true
	}
	if slices.Contains(u.Groups, 0) {
		groups := slices.Clone(u.Groups)
		for i, g := range groups {
			if g == 0 {
				groups[i] = Nobody.GID
			}
		}
		u.Groups, squashed = groups, true
	}
	return u, squashed
}

func (u User) cred() asuser.Cred { return asuser.Cred{UID: u.UID, GID: u.GID, Groups: u.Groups} }

// key is the user in the key of a peer's compiled jobs: a job compiled
// for one user (its side tables read as them) is never another's.
func (u User) key() string { return fmt.Sprintf("%d:%d:%v", u.UID, u.GID, u.Groups) }

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
	// User is whom the unit is read for (required).
	User *User `json:"user"`
	// Compute is the requester's compute identity (identity.go); a peer
	// computes the unit only if it is its own, so it refuses one without.
	Compute string `json:"compute"`
	// squashed: the ticket named uid 0 or gid 0 (primary or in Groups),
	// and the peer reads for Nobody's ids in their place (User.squash).
	squashed bool
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
	key := t.Hash + "@" + t.User.key()
	if len(t.Plan) == 0 {
		return key
	}
	return key + "+" + jobHash(t.Plan)
}

func jobHash(job []byte) string {
	sum := sha256.Sum256(job)
	return hex.EncodeToString(sum[:])
}

// maxCompute bounds a ticket's compute identity (identity.go, some
// hundred bytes): a longer one would be quoted whole in the refusal's
// log line and status, up to four times the ticket's size each call.
const maxCompute = 4 << 10

// maxTicket bounds a ticket a peer will parse.
const maxTicket = 1 << 20

// maxDeletedRows bounds the deleted rows of one ticket's unit (64 MiB
// once expanded): a bitmap of a few kilobytes can name billions of rows.
const maxDeletedRows = 1 << 24

// marshalTicket encodes the ticket for unit u (File already a ROOT/REL
// name) read for user, with plan the requester's columns (nil: none),
// its deleted rows, if any, as a bitmap.
func marshalTicket(job, hash string, plan json.RawMessage, u decode.Unit, wire int, user User) ([]byte, error) {
	t := Ticket{Version: Version, Job: job, Hash: hash, Unit: u, Wire: wire, Plan: plan, User: &user, Compute: Compute()}
	if len(u.Deleted) > 0 {
		if len(u.Deleted) > maxDeletedRows {
			return nil, fmt.Errorf("%d deleted rows in one unit (a peer takes at most %d)", len(u.Deleted), maxDeletedRows)
		}
		set, err := encodeDeleted(u.Deleted)
		if err != nil {
			return nil, err
		}
		t.DeletedSet, t.Unit.Deleted = set, nil
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
	if t.Version != Version {
		return &t, fmt.Errorf("%w: ticket of protocol version %d, this peer speaks %d: upgrade the older side",
			errVersion, t.Version, Version)
	}
	if len(t.Compute) > maxCompute {
		return nil, fmt.Errorf("ticket: compute identity of %d bytes (at most %d)", len(t.Compute), maxCompute)
	}
	if t.User == nil {
		return nil, fmt.Errorf("ticket: no user to read the unit for")
	}
	if len(t.User.Groups) > maxGroups {
		return nil, fmt.Errorf("ticket: user of %d groups (at most %d)", len(t.User.Groups), maxGroups)
	}
	if err := t.checkDeleted(); err != nil {
		return nil, err
	}
	if t.Job == "" || jobHash([]byte(t.Job)) != t.Hash {
		return nil, fmt.Errorf("ticket: job spec does not match its hash")
	}
	if t.Unit.Rows <= 0 || len(t.Unit.Chunks) == 0 || t.Unit.File == "" {
		return nil, fmt.Errorf("ticket: unit %+v is empty", t.Unit)
	}
	return &t, nil
}

// checkDeleted expands the ticket's deleted-row bitmap into
// Unit.Deleted, which travels empty.
func (t *Ticket) checkDeleted() error {
	if len(t.Unit.Deleted) > 0 {
		return fmt.Errorf("ticket: %d deleted rows listed (they travel as a set)", len(t.Unit.Deleted))
	}
	if len(t.DeletedSet) == 0 {
		return nil
	}
	rows, err := decodeDeleted(t.DeletedSet, t.Unit.Rows)
	if err != nil {
		return fmt.Errorf("ticket: %w", err)
	}
	t.Unit.Deleted, t.DeletedSet = rows, nil
	return nil
}
