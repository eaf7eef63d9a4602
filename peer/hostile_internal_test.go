package peer

// A certified but hostile (or buggy) peer, as the requester sees it: a
// Flight server that answers DoGet with whatever stream the test writes.

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/engine"
)

type hostilePeer struct {
	flight.BaseFlightServer
	doGet func(stream flight.FlightService_DoGetServer) error
}

func (h *hostilePeer) DoGet(_ *flight.Ticket, stream flight.FlightService_DoGetServer) error {
	return h.doGet(stream)
}

// hostileServer serves doGet on loopback with a certificate of f's CA,
// and returns its address.
func (f *fixture) hostileServer(doGet func(stream flight.FlightService_DoGetServer) error) string {
	f.t.Helper()
	tc, err := f.ca.issue("peer").ServerTLS()
	if err != nil {
		f.t.Fatal(err)
	}
	g := grpc.NewServer(grpc.Creds(credentials.NewTLS(tc)), grpc.MaxSendMsgSize(maxMessage))
	flight.RegisterFlightServiceServer(g, &hostilePeer{doGet: doGet})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.t.Fatal(err)
	}
	go g.Serve(l)
	f.t.Cleanup(g.Stop)
	return l.Addr().String()
}

// hostileUnit is a unit of 100 rows of one of f's files: enough for a
// ticket; the hostile peer never reads it.
func (f *fixture) hostileUnit() decode.Unit {
	return decode.Unit{File: filepath.Join(f.data, "part-00000.parquet"), Rows: 100,
		Chunks: []decode.Chunk{{}}}
}

// int64Column is a record of rows int64 values of one plain column "a".
func int64Column(rows int) (arrow.RecordBatch, *arrow.Schema) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64,
		Metadata: meta(column.Fixed, column.Int64, 1, "")}}, nil)
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	b.AppendValues(make([]int64, rows), nil)
	arr := b.NewArray()
	defer arr.Release()
	return array.NewRecordBatch(schema, []arrow.Array{arr}, int64(rows)), schema
}

// TestRequesterSurvivesHostileValidityField: a peer whose stream has a
// validity field that belongs to no column made the requester's spill
// worker panic in NewAssembler (found by a review); in lastmiled that goroutine is the
// engine's, and the panic ends the daemon and every trainer's feed. It
// must be a corrupt stream, and the unit computed here.
func TestRequesterSurvivesHostileValidityField(t *testing.T) {
	f := newFixture(t)
	addr := f.hostileServer(func(stream flight.FlightService_DoGetServer) error {
		schema := arrow.NewSchema([]arrow.Field{{Name: "x" + validSuffix, Type: arrow.PrimitiveTypes.Uint8}}, nil)
		w := flight.NewRecordWriter(stream, ipc.WithSchema(schema))
		defer w.Close()
		b := array.NewUint8Builder(memory.DefaultAllocator)
		defer b.Release()
		b.Append(1)
		arr := b.NewArray()
		defer arr.Release()
		rec := array.NewRecordBatch(schema, []arrow.Array{arr}, 1)
		defer rec.Release()
		return w.Write(rec)
	})
	p := f.pool(f.ca.issue("gpu-host"), addr)
	job := f.job("hostile-valid")
	s := f.spiller(p, job, SpillerConfig{MinDeadline: 5 * time.Second})
	var out column.Batch
	var ran bool
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("the requester panicked on a peer's stream: %v", r)
			}
		}()
		ran, err = s.RunUnit(context.Background(), f.hostileUnit(), &out, engine.Load{})
	}()
	if ran || err == nil {
		t.Fatalf("ran %v, err %v: want a failed (corrupt) unit", ran, err)
	}
	if st := p.Stats()[0]; st.Corrupt != 1 {
		t.Errorf("peer stats %+v: want the stream counted as corrupt", st)
	}
}

// TestRequesterBoundsRowsOfAUnit: a peer (buggy or hostile) that streams
// more rows than the unit has was read to the end of its stream, or to
// the unit's deadline, every row appended to the unit's batch (found by
// a review): the requester's memory grew with whatever the peer sent,
// and the check that refuses the rows (engine.checkOutput, rows at most
// the unit's) ran only once all of them were held. The requester knows the unit's
// rows (a unit's output never has more) and must stop reading at the
// first record past them.
func TestRequesterBoundsRowsOfAUnit(t *testing.T) {
	f := newFixture(t)
	const recRows = 64 << 10 // 512 KiB a record
	const records = 128      // 64 MiB in all; an endless stream is the same until the deadline
	var sent atomic.Int64
	addr := f.hostileServer(func(stream flight.FlightService_DoGetServer) error {
		rec, schema := int64Column(recRows)
		defer rec.Release()
		w := flight.NewRecordWriter(stream, ipc.WithSchema(schema))
		defer w.Close()
		for range records {
			if err := w.Write(rec); err != nil {
				return err
			}
			sent.Add(1)
		}
		return nil
	})
	p := f.pool(f.ca.issue("gpu-host"), addr)
	job := f.job("hostile-rows")
	s := f.spiller(p, job, SpillerConfig{MinDeadline: 30 * time.Second})
	var out column.Batch
	u := f.hostileUnit()
	ran, err := s.RunUnit(context.Background(), u, &out, engine.Load{})
	if ran || err == nil {
		t.Fatalf("ran %v, err %v: want a failed unit", ran, err)
	}
	t.Logf("err: %v; the peer sent %d records (%d rows) for a unit of %d rows", err, sent.Load(), sent.Load()*recRows, u.Rows)
	if int64(out.Rows) > u.Rows+recRows {
		t.Fatalf("the requester assembled %d rows (%d MiB) of a unit of %d rows before refusing them", out.Rows, out.Bytes()>>20, u.Rows)
	}
	if !strings.Contains(fmt.Sprint(err), "rows") {
		t.Errorf("err %v: want one saying the stream has more rows than the unit", err)
	}
}

// TestRequesterBoundsTrimmedWidth: a trimmed fixed column (compact
// form) travels as a list of each row's elements and is padded back to
// its width on arrival; the width is the field's metadata, up to 1<<20
// elements, and the requester checked it against the run's columns only
// after the whole unit was assembled (engine.checkOutput; found by a
// review). A peer that
// declares a column [N, 1<<17] of int64 trimmed to nothing sends four
// bytes of offsets a row and makes the requester write 1 MiB a row:
// 100 rows, within the unit's, are 100 MiB from a stream of about a
// kilobyte (and 1<<20 elements, 8 MiB a row). The requester must refuse
// a field that is not the run's before it pads a row.
func TestRequesterBoundsTrimmedWidth(t *testing.T) {
	f := newFixture(t)
	const width = 1 << 17
	const rows = 100
	addr := f.hostileServer(func(stream flight.FlightService_DoGetServer) error {
		schema := arrow.NewSchema([]arrow.Field{{Name: "row_id", Type: arrow.ListOf(arrow.PrimitiveTypes.Int8),
			Metadata: meta(column.Fixed, column.Int64, width, "tail")}}, nil)
		lb := array.NewListBuilder(memory.DefaultAllocator, arrow.PrimitiveTypes.Int8)
		defer lb.Release()
		for range rows {
			lb.Append(true) // no elements: the whole row is padding
		}
		arr := lb.NewArray()
		defer arr.Release()
		rec := array.NewRecordBatch(schema, []arrow.Array{arr}, rows)
		defer rec.Release()
		w := flight.NewRecordWriter(stream, ipc.WithSchema(schema))
		defer w.Close()
		return w.Write(rec)
	})
	p := f.pool(f.ca.issue("gpu-host"), addr)
	job := f.job("hostile-width")
	// A whole run, as lastmiled's: the engine tells the spiller what it
	// knows of the run's columns, and a unit that fails on the peer runs
	// here.
	sp := &heldSpill{Spiller: f.spiller(p, job, SpillerConfig{MinDeadline: 5 * time.Second})}
	f.run(job, sp)
	t.Logf("%d units tried on the peer; the most unit output assembled from it: %d bytes", sp.tried.Load(), sp.most.Load())
	if sp.tried.Load() == 0 {
		t.Fatal("no unit was tried on the peer")
	}
	if sp.most.Load() > 16<<20 {
		t.Fatalf("a stream of one record of %d empty rows made the requester assemble %d MiB (a column of width %d the run does not have)",
			rows, sp.most.Load()>>20, width)
	}
}

// heldSpill is a Spiller that records the most bytes a unit's batch
// held as RunUnit returned (what the peer's stream made it assemble).
type heldSpill struct {
	*Spiller
	tried, most atomic.Int64
}

func (h *heldSpill) RunUnit(ctx context.Context, u decode.Unit, out *column.Batch, load engine.Load) (bool, error) {
	ran, err := h.Spiller.RunUnit(ctx, u, out, load)
	held := 0
	for _, c := range out.Columns {
		held += cap(c.Data)
	}
	if h.Spiller.Stats().Fallbacks.Load()+h.Spiller.Stats().Spilled.Load() > h.tried.Load() {
		h.tried.Add(1)
	}
	for m := h.most.Load(); int64(held) > m && !h.most.CompareAndSwap(m, int64(held)); m = h.most.Load() {
	}
	return ran, err
}
