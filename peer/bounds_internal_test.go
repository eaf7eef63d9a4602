package peer

import (
	"context"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/spec"
)

// TestUnreadOutputBounded: an authenticated requester that asks
// for units and never reads their output (a 64 KiB window, nothing
// consumed) gets each unit's handler to finish (a unit under 4 MiB goes
// as one message, which gRPC queues whole past its write quota), so the
// unit's slot and its max_memory are given back while gRPC still holds
// the whole output, unsent, for as long as the requester answers pings.
// Stream after stream, the peer then holds far more than max_memory.
func TestUnreadOutputBounded(t *testing.T) {
	f := newFixture(t)
	const budget = 4 << 20
	s, addr := f.server(func(s *Server) { s.mem = newBudget(budget) })
	tk, greedy := greedyRequester(t, f, addr, "stall")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	heap := func() int64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return int64(ms.HeapAlloc)
	}
	// One unit first, so that the job's compile is not counted.
	if _, err := greedy.DoGet(ctx, &flight.Ticket{Ticket: tk}); err != nil {
		t.Fatal(err)
	}
	seen := func() int64 { return s.Stats().Units.Load() + s.Stats().RefusedBusy.Load() + s.InFlight() }
	waitFor(t, "the first unit answered or held", func() bool { return seen() == 1 })
	time.Sleep(100 * time.Millisecond)
	before := heap()
	const n = 200
	for k := range n {
		if _, err := greedy.DoGet(ctx, &flight.Ticket{Ticket: tk}); err != nil {
			t.Fatal(err)
		}
		want := int64(k + 2)
		deadline := time.Now().Add(10 * time.Second)
		for seen() < want && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	}
	time.Sleep(200 * time.Millisecond)
	grown := heap() - before
	t.Logf("%d units answered, %d refused busy, %d in flight, %d bytes of output; the heap grew %d MiB (max_memory %d MiB)",
		s.Stats().Units.Load(), s.Stats().RefusedBusy.Load(), s.InFlight(), s.Stats().Bytes.Load(), grown>>20, budget>>20)
	if grown > 4*budget {
		t.Errorf("the peer holds %d MiB of unread output for one requester, past its max_memory of %d MiB", grown>>20, budget>>20)
	}
}

// TestDeadlineBounded: a peer that answers each unit just within
// its deadline (8 times its usual round trip, which each answer raises)
// grows that deadline without bound: after 15 such answers a unit it
// then never answers holds its spill worker for about an hour, with
// MinDeadline 100 ms. The unit must still run here within a bounded
// multiple of MinDeadline.
func TestDeadlineBounded(t *testing.T) {
	f := newFixture(t)
	addr := f.hostileServer(func(stream flight.FlightService_DoGetServer) error {
		<-stream.Context().Done() // never answers
		return stream.Context().Err()
	})
	p := f.pool(f.ca.issue("gpu-host"), addr)
	const minDeadline = 100 * time.Millisecond
	s := f.spiller(p, f.job("slow-loris"), SpillerConfig{MinDeadline: minDeadline, Hedge: -1})
	// The peer's history: each unit answered at 90% of its deadline.
	for range 15 {
		r := p.pick("")
		if r == nil {
			t.Fatal("no credit")
		}
		p.mu.Lock()
		took := max(minDeadline, 8*r.latency) * 9 / 10
		p.mu.Unlock()
		p.done(r, took, 1, received{}, nil)
	}
	p.mu.Lock()
	for _, r := range p.peers {
		t.Logf("the peer's usual round trip after 15 answers: %v; its deadline now %v", r.latency, max(minDeadline, 8*r.latency))
	}
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out column.Batch
	start := time.Now()
	ran, err := s.RunUnit(ctx, f.hostileUnit(), &out, engine.Load{})
	if ctx.Err() != nil {
		t.Fatalf("a unit the peer never answers was not given up on in %v (MinDeadline %v): ran %v, %v", time.Since(start).Round(time.Millisecond), minDeadline, ran, err)
	}
	if ran {
		t.Fatal("ran on a peer that never answers")
	}
}

// TestStalledRequesterClosed: a requester that reads nothing of
// its units' output holds their slots (and memory) while gRPC holds it
// unsent, but not for ever: after sendStall without a byte written the
// peer closes its connection, and another requester is served.
func TestStalledRequesterClosed(t *testing.T) {
	old := sendStall
	sendStall = time.Second
	t.Cleanup(func() { sendStall = old })
	f := newFixture(t)
	s, addr := f.server(nil)
	tk, greedy := greedyRequester(t, f, addr, "stalled")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range 4 { // the fixture's MaxInFlight
		if _, err := greedy.DoGet(ctx, &flight.Ticket{Ticket: tk}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the stalled units holding every slot", func() bool { return s.InFlight() == 4 })
	goodTLS, err := f.ca.issue("gpu-host").ClientTLS("")
	if err != nil {
		t.Fatal(err)
	}
	good := grpc.WithTransportCredentials(credentials.NewTLS(goodTLS))
	if err := callOnce(t, addr, good, tk); err == nil {
		t.Fatal("served while a stalled requester held every slot")
	}
	waitFor(t, "the stalled units given up", func() bool { return s.InFlight() == 0 })
	if err := callOnce(t, addr, good, tk); err != nil {
		t.Fatalf("after the stalled requester was closed: %v", err)
	}
}

// TestServerReceivesSmallMessages: a peer receives only tickets
// (at most maxTicket) and actions, but let gRPC take messages of up to
// maxMessage (64 MiB) into memory, each before its handler refuses it:
// an authenticated requester with many streams of 60 MiB tickets held
// gigabytes, none of it counted in max_memory. gRPC must refuse a
// message past a ticket's bound before reading it.
func TestServerReceivesSmallMessages(t *testing.T) {
	f := newFixture(t)
	s, addr := f.server(nil)
	client := f.flightClient(addr)
	big := make([]byte, 8<<20)
	stream, err := client.DoGet(context.Background(), &flight.Ticket{Ticket: big})
	if err == nil {
		_, err = stream.Recv()
	}
	if code := status.Code(err); code != codes.ResourceExhausted {
		t.Errorf("a ticket of 8 MiB: %v (%d bad tickets counted), want gRPC's ResourceExhausted before it is read", err, s.Stats().RefusedBad.Load())
	}
	// A ticket within the bound still reaches the handler.
	stream, err = client.DoGet(context.Background(), &flight.Ticket{Ticket: make([]byte, maxTicket)})
	if err == nil {
		_, err = stream.Recv()
	}
	if code := status.Code(err); code != codes.InvalidArgument {
		t.Errorf("a ticket of maxTicket bytes: %v, want the handler's InvalidArgument", err)
	}
}

// greedyRequester returns the ticket of a whole row group's unit of job
// name (not of the anti-join's table: output larger than a 64 KiB
// window) and a requester connected to addr with 64 KiB flow-control
// windows, which reads only what a test has it read.
func greedyRequester(t *testing.T, f *fixture, addr, name string) ([]byte, flight.Client) {
	t.Helper()
	text := strings.Replace(f.text(name), "max_unit_rows: 700", "max_unit_rows: 1000000", 1)
	job, err := spec.Parse("", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	units := localPlan(t, job).Units
	i := slices.IndexFunc(units, func(u decode.Unit) bool { return !strings.Contains(u.File, "part-00002") })
	tk := f.unitTicket(text, job, units[i]).Ticket
	tc, err := f.ca.issue("greedy").ClientTLS("")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(tc)),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return tk, flight.NewClientFromConn(conn, nil)
}
