package peer

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/lastmile/lastmile/decode"
)

// TestParseTicket: a ticket's unit's deleted rows travel as a roaring
// bitmap, and one whose rows are listed, or whose set is corrupt or past
// the unit, is refused, so a peer never computes a unit without the
// deletes its requester meant. A ticket of another protocol version, or
// naming no user to read the unit for, is refused too: a peer never
// reads a unit with its own rights for a requester that did not say whom
// it reads for.
func TestParseTicket(t *testing.T) {
	unit := decode.Unit{File: "data/x.parquet", Rows: 1000, Chunks: []decode.Chunk{{Offset: 4, End: 10}}}
	job := "version: 1\n"
	alice := &User{UID: 1001, GID: 1001, Groups: []uint32{2000}}
	enc := func(tk Ticket) []byte {
		tk.Job, tk.Hash = job, jobHash([]byte(job))
		if tk.User == nil {
			tk.User = alice
		} else if tk.User.UID == 0xffffffff {
			tk.User = nil // none
		}
		b, err := json.Marshal(tk)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	set := func(rows ...uint32) []byte {
		b, err := roaring.BitmapOf(rows...).ToBytes()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	with := func(rows ...int32) decode.Unit {
		u := unit
		u.Deleted = rows
		return u
	}
	many := make([]int32, 0, 600)
	for r := int32(0); r < 1000; r++ {
		if r%5 != 0 || r > 700 {
			many = append(many, r)
		}
	}
	sent, err := marshalTicket(job, jobHash([]byte(job)), nil, with(many...), WireCompact, Self())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		ticket  []byte
		deleted []int32
		err     string // "" to accept; "version" for errVersion
	}{
		{"no deleted rows", enc(Ticket{Version: Version, Unit: unit}), nil, ""},
		{"a set of rows", enc(Ticket{Version: Version, Unit: unit, DeletedSet: set(0, 3, 999)}), []int32{0, 3, 999}, ""},
		{"as a requester sends it", sent, many, ""},
		{"rows listed", enc(Ticket{Version: Version, Unit: with(1)}), nil, "deleted rows listed"},
		{"rows listed and a set", enc(Ticket{Version: Version, Unit: with(1), DeletedSet: set(1)}), nil, "deleted rows listed"},
		{"version 3 (no user)", enc(Ticket{Version: 3, Unit: unit, DeletedSet: set(1)}), nil, "version"},
		{"version 1 (no user)", enc(Ticket{Version: 1, Unit: unit}), nil, "version"},
		{"version 5", enc(Ticket{Version: Version + 1, Unit: unit}), nil, "version"},
		{"no user", enc(Ticket{Version: Version, Unit: unit, User: &User{UID: 0xffffffff}}), nil, "no user"},
		{"too many groups", enc(Ticket{Version: Version, Unit: unit, User: &User{UID: 7, Groups: make([]uint32, maxGroups+1)}}), nil, "groups"},
		{"set past the unit", enc(Ticket{Version: Version, Unit: unit, DeletedSet: set(5, 1000)}), nil, "past the unit"},
		{"set past int32", enc(Ticket{Version: Version, Unit: decode.Unit{File: "f", Rows: 1 << 40, Chunks: unit.Chunks}, DeletedSet: set(1 << 31)}), nil, "past the unit"},
		{"empty set", enc(Ticket{Version: Version, Unit: unit, DeletedSet: set()}), nil, "empty"},
		{"set not a bitmap", enc(Ticket{Version: Version, Unit: unit, DeletedSet: []byte("not a bitmap")}), nil, "deleted-row set"},
		{"set of too many rows", enc(Ticket{Version: Version, Unit: decode.Unit{File: "f", Rows: 1 << 30, Chunks: unit.Chunks},
			DeletedSet: rangeSet(0, maxDeletedRows+1)}), nil, "at most"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tk, err := parseTicket(c.ticket)
			switch {
			case c.err == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.err == "":
				if !slices.Equal(tk.Unit.Deleted, c.deleted) || tk.DeletedSet != nil {
					t.Fatalf("deleted rows %v (set %d bytes), want %v", tk.Unit.Deleted, len(tk.DeletedSet), c.deleted)
				}
			case c.err == "version":
				if !errors.Is(err, errVersion) {
					t.Fatalf("got %v, want a version mismatch", err)
				}
			case err == nil || !strings.Contains(err.Error(), c.err) || errors.Is(err, errVersion):
				t.Fatalf("got %v, want an error saying %q", err, c.err)
			}
		})
	}
}

// TestTicketDeletedSize: deleted rows cost a ticket at most about a bit a
// row of the unit, and a few bytes a run, where JSON numbers cost up to
// eight bytes a row.
func TestTicketDeletedSize(t *testing.T) {
	job := "version: 1\n"
	const rows = 1 << 20
	for _, c := range []struct {
		name  string
		every int32 // delete every row r with r%every == 0 ...
		run   int32 // ... or r < run
		most  int
	}{
		{"one run of 900,000", rows, 900_000, 2 << 10},
		{"every other row", 2, 0, 180 << 10},
		{"one row in 7", 7, 0, 180 << 10},
	} {
		u := decode.Unit{File: "data/x.parquet", Rows: rows, Chunks: []decode.Chunk{{Offset: 4, End: 10}}}
		for r := int32(0); r < rows; r++ {
			if r%c.every == 0 || r < c.run {
				u.Deleted = append(u.Deleted, r)
			}
		}
		b, err := marshalTicket(job, jobHash([]byte(job)), nil, u, WireCompact, Self())
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > c.most {
			t.Errorf("%s: %d deleted rows take a ticket of %d bytes, want at most %d", c.name, len(u.Deleted), len(b), c.most)
		}
		tk, err := parseTicket(b)
		if err != nil || !slices.Equal(tk.Unit.Deleted, u.Deleted) {
			t.Fatalf("%s: round trip: %v", c.name, err)
		}
	}
}

// rangeSet is the serialized bitmap of rows [lo, hi).
func rangeSet(lo, hi uint64) []byte {
	bm := roaring.New()
	bm.AddRange(lo, hi)
	b, _ := bm.ToBytes()
	return b
}

// FuzzDeletedSet: no bitmap from the wire panics the peer or expands
// into rows that are not increasing rows of the unit.
func FuzzDeletedSet(f *testing.F) {
	f.Add(rangeSet(0, 100), int64(100))
	f.Add(rangeSet(5, 70000), int64(1<<20))
	b, _ := roaring.BitmapOf(1, 7, 65536, 70000).ToBytes()
	f.Add(b, int64(80000))
	f.Add([]byte{0x3b, 0x30, 0, 0, 1, 0, 0, 0}, int64(10))
	f.Fuzz(func(t *testing.T, b []byte, unitRows int64) {
		rows, err := decodeDeleted(b, unitRows)
		if err != nil {
			return
		}
		if len(rows) == 0 || len(rows) > maxDeletedRows {
			t.Fatalf("%d rows", len(rows))
		}
		for i, r := range rows {
			if r < 0 || int64(r) >= unitRows || (i > 0 && r <= rows[i-1]) {
				t.Fatalf("row %d at %d of a %d-row unit", r, i, unitRows)
			}
		}
	})
}

// FuzzParseTicket: no ticket from the wire panics the peer, and one it
// accepts is of the version it speaks, names a user, matches its hash,
// and has its deleted rows expanded, increasing, inside the unit.
func FuzzParseTicket(f *testing.F) {
	job := "version: 1\n"
	u := decode.Unit{File: "data/x.parquet", Rows: 100, Chunks: []decode.Chunk{{Offset: 4, End: 10}}}
	for _, del := range [][]int32{nil, {0}, {1, 2, 3, 50, 99}} {
		u.Deleted = del
		b, err := marshalTicket(job, jobHash([]byte(job)), nil, u, WireCompact, Self())
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"v":2,"job":"version: 1\n","unit":{"rows":5,"deleted":[4,1]}}`))
	// Tickets of another compute identity, none, a malformed one and an
	// oversized one (the field's bound).
	for _, c := range []string{"arm64 go1.26.8 rev 0ther", "", "\xff\x00\"", strings.Repeat("x", maxCompute+1)} {
		u.Deleted = nil
		b, _ := marshalTicket(job, jobHash([]byte(job)), nil, u, WireCompact, Self())
		var tk map[string]any
		if err := json.Unmarshal(b, &tk); err != nil {
			f.Fatal(err)
		}
		tk["compute"] = c
		b, _ = json.Marshal(tk)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		tk, err := parseTicket(b)
		if err != nil {
			return
		}
		if tk.Version != Version || tk.User == nil || len(tk.User.Groups) > maxGroups || tk.DeletedSet != nil ||
			jobHash([]byte(tk.Job)) != tk.Hash || tk.Unit.Rows <= 0 || len(tk.Compute) > maxCompute {
			t.Fatalf("accepted %+v", tk)
		}
		for i, r := range tk.Unit.Deleted {
			if r < 0 || int64(r) >= tk.Unit.Rows || (i > 0 && r <= tk.Unit.Deleted[i-1]) {
				t.Fatalf("deleted row %d at %d of a %d-row unit", r, i, tk.Unit.Rows)
			}
		}
	})
}

// TestTicketComputeBounded: a ticket's compute identity is bounded, so a
// huge one is refused as a bad ticket, not quoted whole (escaped, up to
// four times its size) into the peer's log and the refusal it sends,
// each call; one at the bound is parsed (and then refused for build).
func TestTicketComputeBounded(t *testing.T) {
	job := "version: 1\n"
	u := decode.Unit{File: "data/x.parquet", Rows: 100, Chunks: []decode.Chunk{{Offset: 4, End: 10}}}
	for _, n := range []int{maxCompute, maxCompute + 1, maxTicket - 4096} {
		b, err := marshalTicket(job, jobHash([]byte(job)), nil, u, WireCompact, Self())
		if err != nil {
			t.Fatal(err)
		}
		var tk map[string]any
		if err := json.Unmarshal(b, &tk); err != nil {
			t.Fatal(err)
		}
		tk["compute"] = strings.Repeat("x", n)
		b, _ = json.Marshal(tk)
		_, err = parseTicket(b)
		if n == maxCompute && err != nil {
			t.Errorf("a compute identity of %d bytes: %v", n, err)
		}
		if n > maxCompute && (err == nil || len(err.Error()) > 200) {
			t.Errorf("a compute identity of %d bytes: accepted, or refused at length %d", n, len(fmt.Sprint(err)))
		}
	}
}
