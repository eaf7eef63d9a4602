package peer

// The fixture the peer package's tests share: a data root, TLS, a
// server, a pool, runs into rings and their digests.

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/roots"
	"github.com/lastmile/lastmile/shm"
	"github.com/lastmile/lastmile/spec"
)

// fixture is a data root with testdata/small's files, TLS material, and a
// job spec over them with every kind of row-local op.
type fixture struct {
	t     *testing.T
	dir   string
	data  string
	roots *roots.Roots
	ca    *testCA
	shm   string
	// bucket is the directory of the test S3 server's buckets (s3Bucket).
	bucket string
	// options, if not nil, changes the engine's options of each run.
	options func(*engine.Options)
}

func newFixture(t *testing.T) *fixture {
	dir := t.TempDir()
	f := &fixture{t: t, dir: dir, data: filepath.Join(dir, "data"), shm: filepath.Join(dir, "shm")}
	os.MkdirAll(f.data, 0o755)
	os.MkdirAll(f.shm, 0o755)
	for i := range 3 {
		name := fmt.Sprintf("part-%05d.parquet", i)
		b, err := os.ReadFile(filepath.Join("../testdata/small", name))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(f.data, name), b, 0o644)
	}
	r, err := roots.New(map[string]string{"data": f.data})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	f.roots = r
	f.ca = newTestCA(t, dir, "test-ca")
	return f
}

func (f *fixture) job(name string) *spec.Job {
	job, err := spec.Parse("", []byte(f.text(name)))
	if err != nil {
		f.t.Fatal(err)
	}
	return job
}

// antiJoin returns a job spec anti-joining inputs with table on row_id,
// batches of 10 in units of at most unitRows rows, one worker, its ring
// beneath f.shm, and the job it parses to.
func (f *fixture) antiJoin(t *testing.T, name string, epochs, unitRows int, table string, inputs ...string) (*spec.Job, string) {
	t.Helper()
	text := fmt.Sprintf(`version: 1
name: %s
inputs: [%s]
batch: {size: 10, last: keep}
epochs: %d
seed: 1
ring: {slots: 4, dir: %s}
decode: {max_unit_rows: %d, workers: 1}
pipeline:
  - join: {kind: anti, table: %s, on: row_id}
`, name, strings.Join(inputs, ", "), epochs, f.shm, unitRows, table)
	job, err := spec.Parse("", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return job, text
}

// newBobFixture is newFixture with the data root reachable by bob
// (65534; t.TempDir is 0700), for tests that read as him: skipped
// unless run as root, which switching to another uid takes.
func newBobFixture(t *testing.T) *fixture {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to read as another uid")
	}
	f := newFixture(t)
	for _, d := range []string{filepath.Dir(f.dir), f.dir, f.data} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func (f *fixture) text(name string) string {
	return fmt.Sprintf(`version: 1
name: %s
inputs: [%s]
batch: {size: 100, last: drop}
world_size: 2
epochs: 1
seed: 5
shuffle: {units: true, buffer: 500}
ring: {slots: 4, dir: %s}
decode: {max_unit_rows: 700, workers: 1}
pipeline:
  - join: {kind: anti, table: %s, on: row_id}
  - sample:
      key: row_id
      rates:
        - {when: "label == 1", rate: 1.0}
        - {rate: 0.5}
      weight: weight
  - map: {label_f: "cast(label, float32)", user_h: "hash_mod(user_id, 1000)"}
  - sequence: {column: seq_0, length: 8, truncate: left, pad_side: right, lengths: seq_0_len}
  - select: [row_id, label_f, weight, user_h, seq_0, seq_0_len, seq_1, query]
`, name, f.data, f.shm, filepath.Join(f.data, "part-00002.parquet"))
}

// server starts a peer over the fixture's roots on loopback with mutual
// TLS, and returns it and its address.
func (f *fixture) server(tweak func(*Server)) (*Server, string) {
	f.t.Helper()
	return f.serverOf(f.ca.issue("peer"), tweak)
}

// serverOf is server presenting the certificate of files.
func (f *fixture) serverOf(files TLSFiles, tweak func(*Server)) (*Server, string) {
	f.t.Helper()
	tc, err := files.ServerTLS()
	if err != nil {
		f.t.Fatal(err)
	}
	// The tests run as root (SpillerConfig.User defaults to Self) and
	// read their own temporary directories, which only root may: their
	// peers trust root. TestPeerSquashesRoot tweaks this off.
	s := NewServer(ServerConfig{Roots: f.roots, TLS: tc, MaxInFlight: 4, TrustRoot: true})
	if tweak != nil {
		tweak(s)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.t.Fatal(err)
	}
	go s.Serve(l)
	f.t.Cleanup(s.Stop)
	return s, l.Addr().String()
}

// held returns a channel that a test server's units wait on in its hook,
// and the func that frees them, once; a failed test's held units end
// too.
func held(t *testing.T) (<-chan struct{}, func()) {
	hold := make(chan struct{})
	var release sync.Once
	free := func() { release.Do(func() { close(hold) }) }
	t.Cleanup(free)
	return hold, free
}

func (f *fixture) pool(tlsFiles TLSFiles, addrs ...string) *Pool {
	f.t.Helper()
	tc, err := tlsFiles.ClientTLS("")
	if err != nil {
		f.t.Fatal(err)
	}
	p, err := NewPool(PoolConfig{Addrs: addrs, TLS: tc, Credits: 3})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(p.Close)
	return p
}

// run runs job with spill (nil: locally) and returns each rank's batches
// as digests, in order.
func (f *fixture) run(job *spec.Job, spill engine.Spill) [][][32]byte {
	f.t.Helper()
	return f.runPaced(job, spill, nil)
}

// runPaced is run with a trainer that sleeps pace() after each batch.
func (f *fixture) runPaced(job *spec.Job, spill engine.Spill, pace func() time.Duration) [][][32]byte {
	f.t.Helper()
	return f.runWith(job, spill, pace, nil)
}

// runAs is run reading the job's files through fsys (a user's).
func (f *fixture) runAs(job *spec.Job, spill engine.Spill, fsys decode.FS) [][][32]byte {
	f.t.Helper()
	return f.runWith(job, spill, nil, fsys)
}

func (f *fixture) runWith(job *spec.Job, spill engine.Spill, pace func() time.Duration, fsys decode.FS) [][][32]byte {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out := make([][][32]byte, job.WorldSize)
	var wg sync.WaitGroup
	errs := make(chan error, job.WorldSize)
	ready := func(rings []string) {
		for rank, name := range rings {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- readRing(ctx, f.shm, name, &out[rank], pace)
			}()
		}
	}
	// One CPU token, as lastmiled's scheduler would give a one-worker job:
	// spill workers that compute locally wait for it.
	token := make(chan struct{}, 1)
	gate := func(ctx context.Context) (func(), error) {
		select {
		case token <- struct{}{}:
			return func() { <-token }, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	opts := engine.Options{Spill: spill, Ready: ready, Remove: true, Gate: gate, FS: fsys}
	if f.options != nil {
		f.options(&opts)
	}
	if _, err := engine.Run(ctx, job, opts); err != nil {
		f.t.Fatalf("run: %v", err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			f.t.Fatal(err)
		}
	}
	return out
}

func readRing(ctx context.Context, dir, name string, out *[][32]byte, pace func() time.Duration) error {
	c, err := shm.Open(dir, name)
	if err != nil {
		return err
	}
	defer c.Close()
	for {
		b, err := c.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		h := sha256.New()
		binary.Write(h, binary.LittleEndian, []uint64{b.Cursor.Epoch, b.Cursor.BatchIndex, uint64(b.Rows)})
		for _, t := range b.Tensors {
			fmt.Fprintf(h, "%s/%d/%d/%v|", t.Name, t.Role, t.DType, t.Shape)
			h.Write(t.Data)
		}
		var d [32]byte
		copy(d[:], h.Sum(nil))
		*out = append(*out, d)
		c.Release()
		if pace != nil {
			time.Sleep(pace())
		}
	}
}

func same(t *testing.T, what string, got, want [][][32]byte) {
	t.Helper()
	for r := range want {
		if len(got[r]) != len(want[r]) {
			t.Fatalf("%s: rank %d has %d batches, the local run %d", what, r, len(got[r]), len(want[r]))
		}
		for i := range want[r] {
			if got[r][i] != want[r][i] {
				t.Fatalf("%s: rank %d batch %d differs from the local run's", what, r, i)
			}
		}
	}
	if len(want[0]) == 0 {
		t.Fatalf("%s: no batches", what)
	}
}

func (f *fixture) spiller(p *Pool, job *spec.Job, cfg SpillerConfig) *Spiller {
	f.t.Helper()
	cfg.Policy.Always = true
	s, err := testSpiller(p, f.roots, f.text(job.Name), job, cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

// recordSpill declines every unit and remembers them: the units a run
// plans, exactly as the engine makes them.
type recordSpill struct {
	mu    sync.Mutex
	units []decode.Unit
}

func (r *recordSpill) Slots() int                                { return 1 }
func (r *recordSpill) Planned(*decode.Plan)                      {}
func (r *recordSpill) Watch(context.Context, func() engine.Load) {}
func (r *recordSpill) RunUnit(_ context.Context, u decode.Unit, _ *column.Batch, _ engine.Load) (bool, error) {
	r.mu.Lock()
	r.units = append(r.units, u)
	r.mu.Unlock()
	return false, nil
}

// localThenSpilled parses the job text, runs it locally, then through a
// peer (spilledSame), and returns the job, the local run's batches
// (never none) and the peer's address.
func (f *fixture) localThenSpilled(what, text string) (*spec.Job, [][][32]byte, string) {
	f.t.Helper()
	job, err := spec.Parse("", []byte(text))
	if err != nil {
		f.t.Fatal(err)
	}
	want := f.run(job, nil)
	if len(want[0]) == 0 {
		f.t.Fatalf("%s: the local run gave no batches", what)
	}
	return job, want, f.spilledSame(what, text, job, want)
}

// spilledSame runs job (its spec text) with every unit offered to a new
// peer, checks its batches against want, the local run's, and that the
// peer computed some; it returns the peer's address. A short job on a
// loaded machine may finish on its local worker before the spill worker
// claims a unit: the run is repeated, each time checked, until the peer
// computed one, at most 5 times.
func (f *fixture) spilledSame(what, text string, job *spec.Job, want [][][32]byte) string {
	f.t.Helper()
	_, addr := f.server(nil)
	p := f.pool(f.ca.issue("gpu-host"), addr)
	// Every unit verified: an honest peer's outputs, whatever they hold,
	// are never taken for a liar's (engine.Verifier).
	cfg := SpillerConfig{Verify: 1}
	cfg.Policy.Always = true
	for range 5 {
		sp, err := testSpiller(p, f.roots, text, job, cfg)
		if err != nil {
			f.t.Fatal(err)
		}
		same(f.t, what, f.run(job, sp), want)
		if v, n := sp.Stats().Verified.Load(), sp.Stats().Spilled.Load(); v != n {
			f.t.Errorf("%s: %d units verified of %d spilled at verify 1", what, v, n)
		}
		if n := sp.Stats().Mismatches.Load(); n != 0 {
			f.t.Fatalf("%s: an honest peer's units differed from this host's %d times: %+v", what, n, p.Stats())
		}
		if sp.Stats().Spilled.Load() > 0 {
			return addr
		}
	}
	f.t.Fatal("nothing was spilled in 5 runs")
	return ""
}

// flightClient is a Flight client of the peer at addr, with a
// certificate of the fixture's CA; it is closed when the test ends.
func (f *fixture) flightClient(addr string) flight.Client {
	f.t.Helper()
	tc, _ := f.ca.issue("gpu-host").ClientTLS("")
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { conn.Close() })
	return flight.NewClientFromConn(conn, nil)
}

func localPlan(t *testing.T, job *spec.Job) *decode.Plan {
	t.Helper()
	rec := &recordSpill{}
	f := &fixture{t: t, shm: job.Ring.Dir}
	f.run(job, rec)
	if len(rec.units) == 0 {
		t.Fatal("no unit recorded")
	}
	return &decode.Plan{Units: rec.units}
}

func replaceTable(job, from, to string) string { return strings.Replace(job, from, to, 1) }

// scripted is a Spiller whose policy sees a scripted local side instead
// of the run's: the engine, the pool and the peer are real, and the test
// chooses when the trainers starve.
type scripted struct {
	*Spiller
	load func() engine.Load
}

func (s scripted) Watch(ctx context.Context, _ func() engine.Load) { s.Spiller.Watch(ctx, s.load) }

// testSpiller is NewSpiller for this process's own user unless cfg names
// one.
func testSpiller(p *Pool, r *roots.Roots, text string, job *spec.Job, cfg SpillerConfig) (*Spiller, error) {
	if cfg.User == nil {
		self := Self()
		cfg.User = &self
	}
	return NewSpiller(p, r, text, job, cfg)
}

// unitTicket is the ticket of unit u of the job of spec text (parsed as
// job), as this process's user, in the plain wire form: what a requester
// sends, built by hand to send over a flight client directly.
func (f *fixture) unitTicket(text string, job *spec.Job, u decode.Unit) *flight.Ticket {
	f.t.Helper()
	u.File, _ = f.roots.Locate(u.File)
	ptext, err := portableJob(f.roots, text, job)
	if err != nil {
		f.t.Fatal(err)
	}
	b, err := marshalTicket(ptext, jobHash([]byte(ptext)), nil, u, WirePlain, Self())
	if err != nil {
		f.t.Fatal(err)
	}
	return &flight.Ticket{Ticket: b}
}
