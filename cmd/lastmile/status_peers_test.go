package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/lastmile/lastmile/peer"
)

// TestStatusPeers: `lastmile status` shows what the daemon serves as a
// peer, each peer's health, units in flight and throughput, and a job's
// spill decision and share.
func TestStatusPeers(t *testing.T) {
	until := time.Now().Add(time.Minute)
	st := &apiStatus{Peers: &apiStatusPeers{Peers: []peer.PeerStats{
		{Addr: "10.0.0.2:7941", Healthy: true, InFlight: 3, Units: 120, Bytes: 3 << 30, UnitsPerSec: 4.25, BytesPerSec: 52e6},
		{Addr: "10.0.0.3:7941", ExcludedTill: until, LastError: "peer 10.0.0.3:7941: connection refused", Failures: 2},
		{Addr: "10.0.0.4:7941", LastError: "corrupt unit stream", Failures: 1, Corrupt: 1},
		{Addr: "10.0.0.5:7941", Mismatches: 2, Subject: "CN=cpu-5", Quarantined: "unit ctr/part-0.parquet row group 3 rows 0+700: column label: values differ"},
		{Addr: "10.0.0.6:7941", Subject: "CN=cpu-5", Quarantined: "presents the certificate of a quarantined peer, which sent unit u: column label: values differ"},
		{Addr: "10.0.0.7:7941", ExcludedTill: until, Failures: 1, LastError: `peer 10.0.0.7:7941: rpc error: code = Unavailable desc = connection error: ` +
			`desc = "transport: authentication handshake failed: tls: failed to verify certificate: x509: certificate has expired or is not yet valid: ` +
			`current time 2026-11-30T01:56:14Z is after 2026-11-30T01:26:14Z" (to fix: ` + usageHint + `)`},
	}}}
	st.Peers.Serving, st.Peers.Compute = "10.0.0.1:7941", "amd64/v1 go1.26.8 rev abc"
	st.Peers.Served = &apiServed{InFlight: 2, Units: 40, Bytes: 1 << 30, RefusedBusy: 5, RefusedDraining: 1, RefusedOutside: 3, RefusedBuild: 2}
	var b bytes.Buffer
	printPeers(&b, st)
	out := b.String()
	for _, want := range []string{
		"compute identity\tamd64/v1 go1.26.8 rev abc (a peer computes only for requesters of the same)",
		"serving as peer\ton 10.0.0.1:7941: 2 in flight; 40 units, 1.0 GiB sent, 0 failed; refused: 5 busy, 1 draining, 3 outside roots, 0 bad tickets, 2 of another build",
		"peer 10.0.0.2:7941\thealthy; 3 in flight, 4.2 units/s, 49.6 MiB/s; in all 120 units, 3.0 GiB received",
		"peer 10.0.0.3:7941\tEXCLUDED until " + until.Local().Format("15:04:05") + ": peer 10.0.0.3:7941: connection refused",
		"peer 10.0.0.4:7941\tEXCLUDED until it answers a probe: corrupt unit stream",
		"peer 10.0.0.5:7941\tQUARANTINED (CN=cpu-5) until this daemon restarts, 2 units whose values differed from this host's; " +
			"the first: unit ctr/part-0.parquet row group 3 rows 0+700: column label: values differ",
		"peer 10.0.0.6:7941\tQUARANTINED (CN=cpu-5) until this daemon restarts: presents the certificate of a quarantined peer, which sent unit u",
		// What to do about a refused certificate, whole after the error cut short.
		"peer 10.0.0.7:7941\tEXCLUDED until " + until.Local().Format("15:04:05") + ": peer 10.0.0.7:7941: rpc error: code = Unavailable desc = connection error: desc = \"transport: authentication handshak...; " +
			"to fix: " + usageHint + ";",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}

	since := time.Date(2026, 11, 27, 9, 30, 0, 0, time.UTC)
	cases := []struct {
		name string
		job  apiJob
		want string
	}{
		{"no peers", apiJob{}, ""},
		{"spilling", apiJob{Spill: &apiSpill{On: true, Since: since, Reason: "trainers wait on empty rings", Switches: 3},
			Progress: apiProgress{UnitsDone: 200, UnitsSpilled: 90, UnitsHedged: 4, HedgesWon: 3}},
			"on since " + since.Local().Format("15:04:05") + " (trainers wait on empty rings; 3 switches); 45% of units on peers (90 of 200), 4 hedged here (3 won here)"},
		{"verified", apiJob{Spill: &apiSpill{On: true, Since: since, Reason: "trainers wait on empty rings"},
			Progress: apiProgress{UnitsDone: 200, UnitsSpilled: 100, UnitsVerified: 3, VerifyMismatches: 1}},
			"on since " + since.Local().Format("15:04:05") + " (trainers wait on empty rings; 0 switches); 50% of units on peers (100 of 200), 3 verified here (1 differed)"},
		{"off, nothing done", apiJob{Spill: &apiSpill{Since: since, Reason: "rings full"}},
			"off since " + since.Local().Format("15:04:05") + " (rings full; 0 switches); - of units on peers (0 of 0)"},
	}
	for _, c := range cases {
		if got := spillLine(&c.job); got != c.want {
			t.Errorf("%s: spill line\n%q, want\n%q", c.name, got, c.want)
		}
	}
}

func TestLatePagesLine(t *testing.T) {
	tests := []struct {
		p    apiProgress
		want string
	}{
		{apiProgress{}, ""},
		{apiProgress{LatePages: 1062}, "1062 read, 0 unread (0%, 0 B not decompressed)"},
		{apiProgress{LatePages: 75, LatePagesUnread: 285, LateUnreadBytes: 11831303, LateFetchDeferred: true},
			"75 read, 285 unread (79%, 11.3 MiB not decompressed); from object storage fetched by the pages kept rows need"},
	}
	for _, tc := range tests {
		if got := latePagesLine(tc.p); got != tc.want {
			t.Errorf("latePagesLine(%+v) = %q, want %q", tc.p, got, tc.want)
		}
	}
}

func TestPrunedLine(t *testing.T) {
	for _, tc := range []struct {
		p    apiProgress
		want string
	}{
		{apiProgress{}, ""},
		{apiProgress{FilesPruned: 358}, "358 input files unopened, 0 units unread, by the filters"},
		{apiProgress{FilesPruned: 1, UnitsPruned: 1}, "1 input file unopened, 1 unit unread, by the filters"},
		{apiProgress{UnitsPruned: 2, RowsRuledOut: 917504}, "0 input files unopened, 2 units unread, by the filters; 917504 rows ruled out undecoded by the page index"},
	} {
		if got := prunedLine(tc.p); got != tc.want {
			t.Errorf("prunedLine(%+v) = %q, want %q", tc.p, got, tc.want)
		}
	}
}

func TestArenaLine(t *testing.T) {
	for _, tc := range []struct {
		p    apiProgress
		want string
	}{
		{apiProgress{}, ""},
		{apiProgress{ArenaUnits: 48}, "48 units decoded into it, their batches uncopied"},
		{apiProgress{ArenaUnits: 19, ArenaUnitsToHeap: 1}, "19 units decoded into it, their batches uncopied; 1 unit to the heap for want of a free chunk, copied (trainers holding batches long, or units of very mixed sizes)"},
	} {
		if got := arenaLine(tc.p); got != tc.want {
			t.Errorf("arenaLine(%+v) = %q, want %q", tc.p, got, tc.want)
		}
	}
}

// usageHint is one of the hints package peer gives (refusal.go): only
// those are split off whole (peer.SplitFix).
const usageHint = "the peer's certificate is not one for serving (issued -role requester): issue it with " +
	"lastmile certs -role peer (or both) and SIGHUP the peer"
