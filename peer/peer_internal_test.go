package peer

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/spec"
)

// TestSpillByteIdentical: with every unit it can spill on a peer, a run's
// batches are byte for byte the local run's; so they are when the peer
// dies mid-run, sends corrupt streams, or is too slow.
func TestSpillByteIdentical(t *testing.T) {
	var mangled struct {
		sync.Mutex
		n int // streams corrupted
	}
	f := newFixture(t)
	want := f.run(f.job("local"), nil)
	client := f.ca.issue("gpu-host")

	cases := []struct {
		name  string
		tweak func(*Server)
		cfg   SpillerConfig
		check func(t *testing.T, s *Server, sp *Spiller, p *Pool)
	}{
		{"healthy peer", nil, SpillerConfig{}, func(t *testing.T, s *Server, sp *Spiller, p *Pool) {
			// A unit given up on here (a hedge that won) may still be
			// computed there: served is spilled plus at most those.
			spilled, served, abandoned := sp.Stats().Spilled.Load(), s.Stats().Units.Load(), p.Stats()[0].Abandoned
			if spilled == 0 || served < spilled || served > spilled+abandoned {
				t.Errorf("spilled %d, peer served %d (%d abandoned here)", spilled, served, abandoned)
			}
			// Units the anti-join empties (all of part-00002's) are taken
			// as the peer sent them, not computed again here.
			if n := sp.Stats().Fallbacks.Load(); n != 0 {
				t.Errorf("%d units of a healthy peer ran here again", n)
			}
		}},
		{"corrupt streams", func(s *Server) {
			// The first three units with rows are corrupted. Units
			// without rows (the anti-join drops every row of
			// part-00002) are sent as they are: counting them, the
			// peer might be sent only those before its three.
			s.mangle = func(b *column.Batch) {
				mangled.Lock()
				defer mangled.Unlock()
				if b.Rows > 0 && mangled.n < 3 {
					mangled.n++
					b.Columns[0].Data[0] ^= 1
				}
			}
		}, SpillerConfig{}, func(t *testing.T, s *Server, sp *Spiller, p *Pool) {
			mangled.Lock()
			n := mangled.n
			mangled.Unlock()
			// Each corrupted stream is noticed, unless given up on
			// before it was read whole (none is, without hedging).
			if st := p.Stats()[0]; n == 0 || st.Corrupt == 0 || st.Corrupt+st.Abandoned < int64(n) {
				t.Errorf("%d streams corrupted, %d noticed (%d given up on)", n, st.Corrupt, st.Abandoned)
			}
		}},
		{"slow peer", func(s *Server) { s.delay = 3 * time.Second }, SpillerConfig{MinDeadline: 200 * time.Millisecond},
			func(t *testing.T, s *Server, sp *Spiller, p *Pool) {
				if sp.Stats().Fallbacks.Load() == 0 {
					t.Error("no unit fell back from the slow peer")
				}
			}},
		{"slow peer, hedged here", func(s *Server) { s.delay = 2 * time.Second },
			SpillerConfig{MinDeadline: 30 * time.Second, Hedge: 20 * time.Millisecond},
			func(t *testing.T, s *Server, sp *Spiller, p *Pool) {
				// Every unit the peer took was hedged and won here: given
				// up on, not failed; and the peer, slow but answering its
				// checks, stays.
				st := p.Stats()[0]
				if st.Abandoned < slowLimit || st.Failures != 0 || !st.Healthy || sp.Stats().Fallbacks.Load() != 0 {
					t.Errorf("the slow peer: %+v; %d fell back", st, sp.Stats().Fallbacks.Load())
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, addr := f.server(c.tweak)
			p := f.pool(client, addr)
			job := f.job("spill")
			sp := f.spiller(p, job, c.cfg)
			same(t, c.name, f.run(job, sp), want)
			c.check(t, s, sp, p)
			t.Logf("%d batches a rank; spilled %d units, %d fell back; peer: %+v", len(want[0]), sp.Stats().Spilled.Load(), sp.Stats().Fallbacks.Load(), p.Stats()[0])
		})
	}
	t.Run("peer dies mid-run", func(t *testing.T) {
		s, addr := f.server(nil)
		p := f.pool(client, addr)
		job := f.job("spill")
		sp := f.spiller(p, job, SpillerConfig{})
		go func() {
			for s.Stats().Units.Load() < 3 {
				time.Sleep(time.Millisecond)
			}
			s.Stop()
		}()
		same(t, "peer died", f.run(job, sp), want)
		if st := p.Stats()[0]; st.Failures == 0 || st.Healthy {
			t.Errorf("the dead peer: %+v", st)
		}
	})
}

// TestStrangersRefused: a requester whose certificate another CA signed,
// or none, gets nothing; its run goes on locally.
func TestStrangersRefused(t *testing.T) {
	f := newFixture(t)
	s, addr := f.server(nil)
	other := newTestCA(t, t.TempDir(), "other-ca")
	stranger := other.issue("stranger")
	stranger.CA = f.ca.issue("x").CA // it trusts the peer; the peer does not trust it
	p := f.pool(stranger, addr)
	job := f.job("stranger")
	sp := f.spiller(p, job, SpillerConfig{})
	want := f.run(f.job("local"), nil)
	same(t, "stranger", f.run(job, sp), want)
	if s.Stats().Units.Load() != 0 || sp.Stats().Spilled.Load() != 0 || p.Stats()[0].Failures == 0 {
		t.Errorf("served %d, spilled %d, peer %+v", s.Stats().Units.Load(), sp.Stats().Spilled.Load(), p.Stats()[0])
	}
	if _, err := NewPool(PoolConfig{Addrs: []string{"10.1.2.3:7000"}}); err == nil {
		t.Error("a plaintext pool to a non-loopback address was accepted")
	}
}

// TestPeerRefusals: tickets naming files outside the roots, a side table
// outside them, another protocol version, or garbage are refused with
// their own codes and counted.
func TestPeerRefusals(t *testing.T) {
	f := newFixture(t)
	os.WriteFile(filepath.Join(f.dir, "secret.parquet"), []byte("PAR1 secret PAR1"), 0o644)
	os.Symlink(filepath.Join(f.dir, "secret.parquet"), filepath.Join(f.data, "link.parquet"))
	s, addr := f.server(nil)
	client := f.flightClient(addr)
	job := f.job("refusals")
	text, err := portableJob(f.roots, f.text(job.Name), job)
	if err != nil {
		t.Fatal(err)
	}
	plan := localPlan(t, job)
	unit := plan.Units[0]
	ticket := func(mod func(*Ticket)) []byte {
		self := Self()
		tk := Ticket{Version: Version, Job: text, Hash: jobHash([]byte(text)), Unit: unit, User: &self, Compute: Compute()}
		tk.Unit.File, _ = f.roots.Locate(unit.File)
		mod(&tk)
		b, _ := json.Marshal(tk)
		return b
	}
	for _, c := range []struct {
		name string
		tk   []byte
		code codes.Code
	}{
		{"dot-dot", ticket(func(t *Ticket) { t.Unit.File = "data/../secret.parquet" }), codes.PermissionDenied},
		{"absolute", ticket(func(t *Ticket) { t.Unit.File = f.dir + "/secret.parquet" }), codes.PermissionDenied},
		{"symlink out", ticket(func(t *Ticket) { t.Unit.File = "data/link.parquet" }), codes.PermissionDenied},
		{"unknown root", ticket(func(t *Ticket) { t.Unit.File = "other/x.parquet" }), codes.PermissionDenied},
		{"side table outside", ticket(func(t *Ticket) {
			t.Job = replaceTable(t.Job, "data/part-00002.parquet", "data/../secret.parquet")
			t.Hash = jobHash([]byte(t.Job))
		}), codes.PermissionDenied},
		{"values not the file's", ticket(func(t *Ticket) {
			t.Unit.Chunks = append([]decode.Chunk(nil), t.Unit.Chunks...)
			t.Unit.Chunks[0].Values *= 1000
		}), codes.InvalidArgument},
		{"version", ticket(func(t *Ticket) { t.Version = Version + 1 }), codes.FailedPrecondition},
		{"version 3, whose tickets name no user", ticket(func(t *Ticket) { t.Version, t.User = 3, nil }), codes.FailedPrecondition},
		{"no user", ticket(func(t *Ticket) { t.User = nil }), codes.InvalidArgument},
		{"another build", ticket(func(t *Ticket) { t.Compute = "arm64 go1.26.8 rev 0ther" }), codes.FailedPrecondition},
		{"no compute identity", ticket(func(t *Ticket) { t.Compute = "" }), codes.FailedPrecondition},
		// Deleted rows travel as a set (TestParseTicket has every case).
		{"deleted rows listed", ticket(func(t *Ticket) { t.Unit.Deleted = []int32{0} }), codes.InvalidArgument},
		{"deleted-row set past the unit", ticket(func(t *Ticket) {
			t.DeletedSet = rangeSet(uint64(t.Unit.Rows)-1, uint64(t.Unit.Rows)+1)
		}), codes.InvalidArgument},
		{"bad hash", ticket(func(t *Ticket) { t.Hash = "00" }), codes.InvalidArgument},
		{"garbage", []byte("{not json"), codes.InvalidArgument},
	} {
		t.Run(c.name, func(t *testing.T) {
			stream, err := client.DoGet(context.Background(), &flight.Ticket{Ticket: c.tk})
			if err == nil {
				_, err = stream.Recv()
			}
			if status.Code(err) != c.code {
				t.Fatalf("got %v, want %v", err, c.code)
			}
		})
	}
	if st := s.Stats(); st.RefusedOutside.Load() != 5 || st.RefusedVersion.Load() != 2 || st.RefusedBad.Load() != 6 ||
		st.RefusedBuild.Load() != 2 {
		t.Errorf("refusals counted: outside %d version %d bad %d build %d", st.RefusedOutside.Load(), st.RefusedVersion.Load(),
			st.RefusedBad.Load(), st.RefusedBuild.Load())
	}
	// A job whose side table is outside every root does not spill at all.
	job.Pipeline[0].Join.Table = filepath.Join(f.dir, "secret.parquet")
	if _, err := testSpiller(f.pool(f.ca.issue("g2"), addr), f.roots, f.text(job.Name), job, SpillerConfig{}); !errors.Is(err, ErrNotSpillable) {
		t.Errorf("NewSpiller with a side table outside the roots: %v", err)
	}
}

// TestSpillOnAndOff: spill switches on while the trainers starve and off
// once they are fed, within one run, and the batches are still the local
// run's.
func TestSpillOnAndOff(t *testing.T) {
	f := newFixture(t)
	text := strings.Replace(f.text("auto"), "epochs: 1", "epochs: 4", 1)
	job, err := spec.Parse("", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	want := f.run(job, nil)
	_, addr := f.server(nil)
	p := f.pool(f.ca.issue("gpu-host"), addr)
	sp, err := testSpiller(p, f.roots, text, job, SpillerConfig{Slots: 2, Policy: PolicyConfig{
		OnAfter: 20 * time.Millisecond, OffAfter: 100 * time.Millisecond, Smooth: 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	// The trainers starve until a few units went to the peer, then are
	// fed, reading a batch every 10 ms so that the run outlasts OffAfter.
	// (The scripted load, not the pace, is what the policy sees.)
	starving := func() bool { return sp.Stats().Spilled.Load() < 3 }
	load := func() engine.Load {
		if starving() {
			return engine.Load{LocalWorkers: 1, LocalBusy: 1, RingFill: 0}
		}
		return engine.Load{LocalWorkers: 1, LocalBusy: 1, RingFill: 1}
	}
	// While starving the trainer still takes a little time per batch, so
	// that the run outlasts OnAfter even on a loaded machine, where the
	// policy's ticks come late.
	pace := func() time.Duration {
		if starving() {
			return 2 * time.Millisecond
		}
		return 10 * time.Millisecond
	}
	same(t, "on and off", f.runPaced(job, scripted{sp, load}, pace), want)
	on, _, why, flips := sp.PolicyState()
	t.Logf("spilled %d units; %d switches, on %v (%s); declined %v", sp.Stats().Spilled.Load(), flips, on, why, sp.Stats().Declined())
	if flips != 2 || on || sp.Stats().Spilled.Load() < 3 || sp.Stats().Declined()["trainers are fed"] == 0 {
		t.Errorf("spill did not switch on and then off: %d switches, on %v (%s), %d spilled", flips, on, why, sp.Stats().Spilled.Load())
	}
}

// ticket is the ticket of the first unit of a job named name, as a
// requester sends it.
func (f *fixture) ticket(name string) []byte {
	return f.ticketFor(name, localPlan(f.t, f.job(name+"plan")).Units[0])
}

// ticketFor is the ticket of a unit of the job named name.
func (f *fixture) ticketFor(name string, unit decode.Unit) []byte {
	f.t.Helper()
	job := f.job(name)
	text, err := portableJob(f.roots, f.text(job.Name), job)
	if err != nil {
		f.t.Fatal(err)
	}
	unit.File, _ = f.roots.Locate(unit.File)
	tk, err := json.Marshal(Ticket{Version: Version, Job: text, Hash: jobHash([]byte(text)), Unit: unit, User: &User{}, Compute: Compute()})
	if err != nil {
		f.t.Fatal(err)
	}
	return tk
}

// TestDrain: a draining peer finishes the units in flight and refuses new
// ones with Unavailable, so that requesters run them elsewhere.
func TestDrain(t *testing.T) {
	f := newFixture(t)
	s, addr := f.server(func(s *Server) { s.delay = 300 * time.Millisecond })
	p := f.pool(f.ca.issue("gpu-host"), addr)
	tk := f.ticket("drain")
	r := p.pick("")
	inflight := make(chan error, 1)
	go func() {
		var out column.Batch
		_, err := fetch(context.Background(), r, tk, &out)
		inflight <- err
	}()
	for s.busy.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	drained := make(chan error, 1)
	go func() { drained <- s.Drain(context.Background()) }()
	for !s.drain.Load() {
		time.Sleep(time.Millisecond)
	}
	var out column.Batch
	if _, err := fetch(context.Background(), r, tk, &out); status.Code(err) != codes.Unavailable {
		t.Errorf("a new unit while draining: %v, want Unavailable", err)
	}
	if err := <-inflight; err != nil {
		t.Errorf("the unit in flight: %v", err)
	}
	if err := <-drained; err != nil {
		t.Errorf("drain: %v", err)
	}
	if s.Stats().RefusedDraining.Load() != 1 || s.Stats().Units.Load() != 1 {
		t.Errorf("served %d, refused while draining %d", s.Stats().Units.Load(), s.Stats().RefusedDraining.Load())
	}
}

// TestWireForms: a ticket that names no wire form (an older requester's,
// or a stock Flight client's) gets the plain form, one that asks for the
// compact form gets that, and both assemble to the same output.
func TestWireForms(t *testing.T) {
	f := newFixture(t)
	_, addr := f.server(nil)
	p := f.pool(f.ca.issue("gpu-host"), addr)
	r := p.pick("")
	// A unit of the anti-join's own table keeps no row: take one of
	// another file.
	units := localPlan(t, f.job("formsplan")).Units
	i := slices.IndexFunc(units, func(u decode.Unit) bool { return !strings.Contains(u.File, "part-00002") })
	if i < 0 {
		t.Fatal("every unit recorded is of the anti-join's table")
	}
	plain := f.ticketFor("forms", units[i])
	var tk Ticket
	if err := json.Unmarshal(plain, &tk); err != nil {
		t.Fatal(err)
	}
	tk.Wire = WireCompact
	compact, _ := json.Marshal(tk)
	var outs [2]column.Batch
	var sizes [2]int
	for i, tk := range [][]byte{plain, compact} {
		got, err := fetch(context.Background(), r, tk, &outs[i])
		if err != nil {
			t.Fatal(err)
		}
		if got.cpu <= 0 || got.queue < 1 {
			t.Errorf("ticket %d: receiving took %v of CPU; the peer had %d units admitted", i, got.cpu, got.queue)
		}
		sizes[i] = int(got.wire)
		client, release, err := r.conns.use()
		if err != nil {
			t.Fatal(err)
		}
		stream, err := client.DoGet(context.Background(), &flight.Ticket{Ticket: tk})
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		rd, err := flight.NewRecordReader(stream)
		if err != nil {
			t.Fatal(err)
		}
		large := 0
		for _, fd := range rd.Schema().Fields() {
			if largeOffsets(fd.Type) {
				large++
			}
		}
		if (large > 0) != (i == 0) {
			t.Errorf("ticket %d: %d fields with int64 offsets: %v", i, large, rd.Schema())
		}
		rd.Release()
	}
	sameBatch(t, &outs[1], &outs[0])
	if outs[0].Rows == 0 || sizes[1] >= sizes[0] {
		t.Errorf("%d rows; %d bytes received in the plain form, %d in the compact one", outs[0].Rows, sizes[0], sizes[1])
	}
	t.Logf("%d rows; %d bytes received in the plain form, %d in the compact one", outs[0].Rows, sizes[0], sizes[1])
}
