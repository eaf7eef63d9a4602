package peer

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/keepalive"
	grpcpeer "google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/lastmile/lastmile/asuser"
	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/roots"
)

// maxMessage is gRPC's message limit on what a peer sends and a
// requester receives, raised from its 4 MiB default: a record batch is at
// most about maxRecordBytes plus framing.
const maxMessage = 64 << 20

// maxServerRecv is the largest message a peer receives: a ticket (at
// most maxTicket) in its Flight framing.
const maxServerRecv = maxTicket + 64<<10

// handshakeTimeout bounds a client's TLS handshake; keepaliveTime and
// keepaliveTimeout are when a peer pings a requester it has heard
// nothing from, and how long it waits for the answer. (Variables so that
// tests need not wait as long: gRPC takes 1 s at least.)
var (
	handshakeTimeout = 5 * time.Second
	keepaliveTime    = 10 * time.Second
	keepaliveTimeout = 10 * time.Second
)

// sendStall is how long a unit's stream may go without gRPC writing any
// of its output before the peer closes the requester's connection: a
// requester gives a unit up after its deadline (at most 8 times
// peers.deadline), canceling the stream, so only one that reads nothing
// and cancels nothing stalls this long. (A variable for tests.)
var sendStall = 2 * time.Minute

// streamWindow is the HTTP/2 flow-control window of a unit's stream, on
// the requester (pool.go): large enough for a typical unit's output.
const streamWindow = 16 << 20

var errVersion = errors.New("protocol version mismatch")

// ServerConfig configures a peer.
type ServerConfig struct {
	Roots *roots.Roots
	// Objects returns what the objects of the roots that are object-store
	// prefixes ("ctr: s3://bucket/ctr") are read with, by URL, for a
	// ticket's user (after the root squash: TrustRoot). The peer reads
	// them with its own object-store credentials, so the FS must refuse,
	// before any request, what the user may not have read (an error
	// wrapping fs.ErrPermission); lastmiled's checks the user against its
	// own s3.allow, as for its local jobs. nil refuses object-store roots.
	Objects func(asuser.Cred) decode.FS
	TLS     *tls.Config // nil: plaintext, allowed on loopback listeners only
	// ClientCAs, when set, is the CA bundle requesters are verified
	// with now (Creds.Roots), asked at each call: a connection's
	// handshake verified its requester once, and a CA removed from the
	// bundle by a reload since must refuse its calls (Unauthenticated),
	// not only its next handshakes. nil: the handshake's check only.
	ClientCAs func() *x509.CertPool
	// Workers is the units computed at once; default 4. MaxInFlight is
	// the units admitted at once, computing, waiting for a worker or
	// streaming their output; default twice Workers. Admitting more than
	// it computes keeps the peer's cores busy while finished units stream
	// back and the requesters send the next: with one unit a core, each
	// core idled for a round trip after every unit.
	Workers     int
	MaxInFlight int
	// MaxMemory bounds the bytes units hold at once, computing and
	// streaming back; default 1 GiB. A unit reserves an estimate before
	// it computes, and holds its output's size while it streams
	// (budget.go).
	MaxMemory int64
	// TrustRoot reads the units of uid 0's tickets with the peer's own
	// rights. Off (the default), uid 0 is read for as Nobody, as an NFS
	// server squashes root: any holder of a requester's certificate may
	// name any user in a ticket, and root would bypass every file's
	// permissions beneath the roots.
	TrustRoot bool
	Logger    *slog.Logger
}

// Server is a CPU peer: it computes units for requesters and streams
// their output back.
type Server struct {
	flight.BaseFlightServer
	cfg   ServerConfig
	log   *slog.Logger
	grpc  *grpc.Server
	jobs  jobCache
	slots chan struct{} // admitted units
	work  chan struct{} // units computing
	// batches holds unit output batches for reuse; a batch is back only
	// when gRPC has freed every buffer viewing it (send.go's lease).
	batches sync.Pool
	wires   sync.Pool // *wireUnit, each leased with a batch
	mem     *budget
	fair    fairShare
	drain   atomic.Bool
	busy    atomic.Int64 // units admitted and not yet answered
	stats   ServerStats
	// handshakeLog rate-limits the log lines of refused handshakes.
	handshakeLog logEvery
	mangle       func(*column.Batch) // tests: corrupt what is sent
	lie          func(*column.Batch) // tests: change the output before its checksum (a lying peer)
	delay        time.Duration       // tests: a slow peer
	hook         func()              // tests: runs while a unit holds a worker and its memory
	// identity is the peer's compute identity (Compute; tests set another).
	identity string
}

// ServerStats counts what a peer did, for metrics and tests.
type ServerStats struct {
	Units, Bytes                              atomic.Int64
	RefusedBusy, RefusedVersion, RefusedBad   atomic.Int64
	RefusedOutside, RefusedDraining, Failures atomic.Int64
	// RefusedPermission counts units whose file or side table the
	// ticket's user may not read on this host: its kernel said so, or,
	// beneath an object-store root, ServerConfig.Objects did.
	RefusedPermission atomic.Int64
	// RefusedBuild counts tickets of a requester of another compute
	// identity (identity.go): another architecture or lastmile build.
	RefusedBuild atomic.Int64
	// Canceled units: their requester gave up on them (hedged, or gone)
	// before they were answered.
	Canceled     atomic.Int64
	ComputeNanos atomic.Int64
	// Refused TLS handshakes, by reason (handshake.go): no certificate,
	// one the CA did not sign (or expired), another failure, and a
	// connection closed before it sent anything. RefusedUntrusted also
	// counts calls whose certificate the CA bundle in force no longer
	// verifies (ServerConfig.ClientCAs).
	RefusedNoCert, RefusedUntrusted  atomic.Int64
	RefusedHandshake, RefusedNoHello atomic.Int64
}

// NewServer returns a peer serving on the listeners given to Serve.
func NewServer(cfg ServerConfig) *Server {
	if cfg.Workers <= 0 {
		cfg.Workers = 4
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = 2 * cfg.Workers
	}
	if cfg.MaxMemory <= 0 {
		cfg.MaxMemory = 1 << 30
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, log: cfg.Logger, identity: Compute(), slots: make(chan struct{}, cfg.MaxInFlight),
		work: make(chan struct{}, cfg.Workers), mem: newBudget(cfg.MaxMemory)}
	s.jobs.max = 8
	s.jobs.resident = func(delta int64) { // s.mem read at each call: tests replace it
		if delta > 0 {
			s.mem.hold(delta)
		} else {
			s.mem.drop(-delta)
		}
	}
	s.jobs.sem = make(chan struct{}, cfg.Workers)
	s.fair.perClient = map[string]int{}
	// A peer receives only tickets and actions: gRPC refuses a larger
	// message before reading it into memory, uncounted in max_memory
	// (maxMessage allowed an authenticated requester 64 MiB a stream).
	opts := []grpc.ServerOption{grpc.MaxRecvMsgSize(maxServerRecv), grpc.MaxSendMsgSize(maxMessage),
		grpc.ForceServerCodecV2(newSendCodec()), experimental.BufferPool(frames),
		// A client that has not finished its TLS handshake (shown its
		// certificate) in handshakeTimeout is dropped, rather than
		// holding a descriptor for gRPC's default of 120 s.
		grpc.ConnectionTimeout(handshakeTimeout),
		// A requester that answers nothing (its host died, or is cut off)
		// is found by keepalive pings, and its units' streams end: they
		// free their slots and memory instead of blocking in a send until
		// TCP gives up.
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: keepaliveTime, Timeout: keepaliveTimeout})}
	if cfg.TLS != nil {
		creds := &handshakeCreds{TransportCredentials: credentials.NewTLS(cfg.TLS), refused: s.refuseHandshake}
		opts = append(opts, grpc.Creds(creds))
	}
	s.grpc = grpc.NewServer(opts...)
	flight.RegisterFlightServiceServer(s.grpc, s)
	return s
}

// Stats returns the peer's counters.
func (s *Server) Stats() *ServerStats { return &s.stats }

// SideMemory returns the memory the side tables of the jobs this peer
// keeps compiled hold, as counted against its max_memory.
func (s *Server) SideMemory() int64 { return s.mem.residentBytes() }

// Serve serves on l until Stop. Plaintext is refused on a listener that
// is not loopback.
func (s *Server) Serve(l net.Listener) error {
	if s.cfg.TLS == nil && !isLoopback(l.Addr()) {
		return fmt.Errorf("peer: plaintext on %s: only loopback addresses may go without TLS; configure peer.tls (ca, cert, key)", l.Addr())
	}
	return s.grpc.Serve(l)
}

// InFlight is how many units the server has admitted and not yet
// answered.
func (s *Server) InFlight() int64 { return s.busy.Load() }

// Drain refuses new units, waits for those in flight (or ctx), and stops.
// It logs how many it held when it began and how many it answered.
func (s *Server) Drain(ctx context.Context) error {
	s.drain.Store(true)
	held, start := s.busy.Load(), time.Now()
	answered, canceled := s.stats.Units.Load(), s.stats.Canceled.Load()
	s.log.Info("peer draining: refusing new units, finishing those in flight", "units_in_flight", held)
	defer func() {
		s.log.Info("peer drained", "units_answered", s.stats.Units.Load()-answered,
			"units_canceled", s.stats.Canceled.Load()-canceled, "took", time.Since(start).Round(time.Millisecond))
	}()
	// A unit admitted just before the flag was seen is counted in busy
	// before its handler checks again; polling busy is enough, and
	// GracefulStop then waits for the handlers' last writes.
	for s.busy.Load() > 0 {
		select {
		case <-time.After(10 * time.Millisecond):
		case <-ctx.Done():
			s.grpc.Stop()
			return ctx.Err()
		}
	}
	s.grpc.GracefulStop()
	return nil
}

// Stop stops at once.
func (s *Server) Stop() { s.grpc.Stop(); s.jobs.closeAll() }

// ForgetJobs drops the compiled jobs the peer keeps, so that the next
// unit of each compiles its job again, its files and objects opened
// through ServerConfig.Objects as it reads them then. A cached job opens
// its side tables no more: without this, a grant that ServerConfig.Objects
// no longer gives (lastmiled's s3.allow, reloaded) went on joining the
// side table read under it into the units of its job and of the next
// runs of the same spec by the same user. Units computing now finish
// with the job they hold.
func (s *Server) ForgetJobs() { s.jobs.forget() }

// stillTrusted verifies the client certificate of ctx's call with the
// CA bundle in force now (ServerConfig.ClientCAs), as its connection's
// handshake did with the bundle of then. A call whose certificate it no
// longer verifies (its CA removed by a reload, or the certificate ended
// since) is refused, counted as untrusted, and its connection closed:
// the requester's next call makes a new one, presenting the certificate
// it holds now, which a renewal in place may have replaced.
func (s *Server) stillTrusted(ctx context.Context, log *slog.Logger) error {
	if s.cfg.ClientCAs == nil || s.cfg.TLS == nil {
		return nil
	}
	p, ok := grpcpeer.FromContext(ctx)
	if !ok {
		return status.Error(codes.Unauthenticated, "peer: a call without a connection")
	}
	ti, ok := tlsInfo(p.AuthInfo)
	if !ok || len(ti.State.PeerCertificates) == 0 {
		return status.Error(codes.Unauthenticated, "peer: a call without a client certificate")
	}
	certs := ti.State.PeerCertificates
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, err := certs[0].Verify(x509.VerifyOptions{Roots: s.cfg.ClientCAs(), Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err == nil {
		return nil
	}
	s.stats.RefusedUntrusted.Add(1)
	log.Warn("refused a call whose client certificate the CA bundle in force no longer verifies; closing its connection",
		"subject", certs[0].Subject.CommonName, "err", err)
	// Closed after the refusal has had the time to reach the requester
	// (closed at once, it read the connection's end instead).
	time.AfterFunc(untrustedClose, func() { closeConn(ctx) })
	return status.Error(codes.Unauthenticated, fmt.Sprintf("peer: the client certificate is not verified by this peer's CA bundle now: %v", err))
}

// untrustedClose is how long after refusing a call as untrusted its
// connection is closed.
const untrustedClose = 500 * time.Millisecond

func isLoopback(a net.Addr) bool {
	t, ok := a.(*net.TCPAddr)
	return ok && t.IP.IsLoopback()
}

// DoGet computes the unit a ticket names and streams its output.
func (s *Server) DoGet(tkt *flight.Ticket, stream flight.FlightService_DoGetServer) error {
	ctx := stream.Context()
	who := requesterOf(ctx)
	log := s.log.With("client", who.name, "addr", who.host)
	if s.drain.Load() {
		s.stats.RefusedDraining.Add(1)
		return status.Error(codes.Unavailable, "peer is draining: run the unit elsewhere")
	}
	if err := s.stillTrusted(ctx, log); err != nil {
		return err
	}
	t, err := parseTicket(tkt.GetTicket())
	if err != nil {
		if errors.Is(err, errVersion) {
			s.stats.RefusedVersion.Add(1)
			log.Warn("refused a unit of another protocol version", "err", err)
			return status.Error(codes.FailedPrecondition, err.Error())
		}
		s.stats.RefusedBad.Add(1)
		log.Warn("refused a bad ticket", "err", err)
		return status.Error(codes.InvalidArgument, err.Error())
	}
	if t.Compute != s.identity {
		s.stats.RefusedBuild.Add(1)
		err := anotherBuild(t.Compute, s.identity)
		log.Warn("refused a unit of a requester of another build", "err", err)
		return status.Error(codes.FailedPrecondition, err.Error())
	}
	release, err := s.admit(who.key())
	if err != nil {
		s.stats.RefusedBusy.Add(1)
		return err
	}
	defer release()
	err = s.serveUnit(ctx, log, t, stream)
	if err != nil && ctx.Err() != nil {
		s.stats.Canceled.Add(1)
	}
	return err
}

// admit takes a unit slot for the requester whose key is who, refusing
// at once when the peer or the requester's fair share of it is full: the
// requester then tries another peer or runs the unit itself, which is
// better than queueing.
func (s *Server) admit(who string) (func(), error) {
	if !s.fair.take(who, s.cfg.MaxInFlight) {
		return nil, status.Error(codes.ResourceExhausted, "peer: this requester's share of units in flight is taken")
	}
	select {
	case s.slots <- struct{}{}:
	default:
		s.fair.give(who)
		return nil, status.Error(codes.ResourceExhausted, "peer: every unit slot is busy")
	}
	s.busy.Add(1)
	return func() { <-s.slots; s.fair.give(who); s.busy.Add(-1) }, nil
}

func (s *Server) serveUnit(ctx context.Context, log *slog.Logger, t *Ticket, stream flight.FlightService_DoGetServer) error {
	if !s.cfg.TrustRoot {
		u, squashed := t.User.squash()
		t.User, t.squashed = &u, squashed
	}
	fsys := rootsFS{r: s.cfg.Roots, user: *t.User}
	if s.cfg.Objects != nil {
		fsys.objects = s.cfg.Objects(t.User.cred())
	}
	j, done, err := s.jobs.get(ctx, log, t, fsys, s.cfg.Workers)
	if err != nil {
		if denied := s.refuseDenied(log, t, err); denied != nil {
			return denied
		}
		s.stats.Failures.Add(1)
		if errors.Is(err, errCompilePanic) {
			return status.Error(codes.Internal, fmt.Sprintf("compile job: %v", err))
		}
		return status.Error(codes.InvalidArgument, fmt.Sprintf("compile job: %v", err))
	}
	defer done()
	// Output batches are reused, as the engine reuses its units' buffers:
	// a fresh one grows every column from nothing for every unit. So are
	// their wire forms' buffers (compact.go).
	out, _ := s.batches.Get().(*column.Batch)
	if out == nil {
		out = new(column.Batch)
	}
	wire, _ := s.wires.Get().(*wireUnit)
	if wire == nil {
		wire = new(wireUnit)
	}
	// Back in the pools once gRPC has sent what views them (send.go).
	lease := newLease(func() { s.batches.Put(out); s.wires.Put(wire) })
	defer lease.done()
	held, err := s.compute(ctx, log, j, t, out)
	defer func() { s.mem.give(held) }()
	if err != nil {
		return err
	}
	if s.lie != nil {
		s.lie(out)
	}
	if s.delay > 0 {
		select {
		case <-time.After(s.delay):
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
	wire.encode(out, t.Wire >= WireCompact)
	// The output exists now: hold its size, not the estimate, while it
	// streams. Growing does not wait, since waiting would not free it.
	size := int64(out.Bytes() + wire.extra())
	s.mem.resize(held, size)
	held = size
	if err := sendUnit(stream, wire, lease, int(s.busy.Load()), s.mangle); err != nil {
		if ctx.Err() == nil {
			s.stats.Failures.Add(1)
		}
		return err
	}
	if err := lease.sent(ctx, sendStall); err != nil {
		if !errors.Is(err, errStalled) {
			return status.FromContextError(err).Err()
		}
		// A handler's return cannot reset its stream (the status queues
		// behind the unsent output): the connection is closed, which
		// ends every stream on it and frees what gRPC holds of them.
		s.stats.Failures.Add(1)
		log.Warn("closing the connection of a requester that read nothing of a unit's output", "for", sendStall)
		closeConn(ctx)
		return status.Error(codes.DeadlineExceeded, fmt.Sprintf("peer: %v for %v", err, sendStall))
	}
	s.stats.Units.Add(1)
	s.stats.Bytes.Add(int64(out.Bytes()))
	return nil
}

// compute computes t's unit into out once one of Workers and an estimate
// of the unit's memory are free (budget.go), and returns the bytes of the
// memory budget it holds, which the caller gives back, error or not.
// Admitted units wait for a worker in arrival order (a channel's blocked
// senders are woken first in, first out); a unit waits for memory
// holding its worker, so that the units computing are the ones whose
// memory is reserved.
func (s *Server) compute(ctx context.Context, log *slog.Logger, j *cachedJob, t *Ticket, out *column.Batch) (int64, error) {
	select {
	case s.work <- struct{}{}:
	case <-ctx.Done():
		return 0, status.FromContextError(ctx.Err()).Err()
	}
	defer func() { <-s.work }()
	est := min(j.estimate(&t.Unit), s.mem.limit)
	if err := s.mem.take(ctx, est); err != nil {
		return 0, status.FromContextError(err).Err()
	}
	start := time.Now()
	if err := s.computeUnit(ctx, log, j, t, out); err != nil {
		return est, s.computeError(log, t, err)
	}
	s.stats.ComputeNanos.Add(int64(time.Since(start)))
	j.learn(t.Unit.Rows, out.Bytes())
	s.jobs.refreshSide(j)
	return est, nil
}

// computeUnit computes t's unit into out. A panic while computing one
// unit (a bug, or a file no check foresaw) fails that unit with an
// error, logged with its stack, instead of ending the daemon that serves
// every requester and its own trainers.
func (s *Server) computeUnit(ctx context.Context, log *slog.Logger, j *cachedJob, t *Ticket, out *column.Batch) (err error) {
	defer func() {
		if p := recover(); p != nil {
			log.Error("computing a unit panicked", "file", t.Unit.File, "row_group", t.Unit.RowGroup, "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("BUG: computing the unit panicked: %v", p)
		}
	}()
	if s.hook != nil {
		s.hook()
	}
	return j.up.Compute(ctx, t.Unit, out)
}

// computeError counts a unit's failure and returns its status.
func (s *Server) computeError(log *slog.Logger, t *Ticket, err error) error {
	if denied := s.refuseDenied(log, t, err); denied != nil {
		return denied
	}
	if errors.Is(err, decode.ErrBadUnit) {
		s.stats.RefusedBad.Add(1)
		log.Warn("refused a unit that does not match its file", "err", err)
		return status.Error(codes.InvalidArgument, err.Error())
	}
	s.stats.Failures.Add(1)
	return status.Error(codes.Internal, fmt.Sprintf("unit %s row group %d: %v", t.Unit.File, t.Unit.RowGroup, err))
}

// refuseDenied returns the PermissionDenied status of err, counted and
// logged, where it is a refusal to read: a file outside the data roots,
// or one the ticket's user may not read here. Otherwise nil.
func (s *Server) refuseDenied(log *slog.Logger, t *Ticket, err error) error {
	switch {
	case errors.Is(err, roots.ErrOutside) || errors.Is(err, roots.ErrUnknownRoot):
		s.stats.RefusedOutside.Add(1)
		log.Warn("refused a unit outside the data roots", "err", err)
	case errors.Is(err, fs.ErrPermission):
		s.stats.RefusedPermission.Add(1)
		log.Warn("refused a unit whose files its user may not read here", "uid", t.User.UID, "gid", t.User.GID, "err", err)
		who := fmt.Sprintf("uid %d", t.User.UID)
		if t.squashed {
			who = fmt.Sprintf("uid %d gid %d (uid and gid 0 are read for as %d: the peer's peer.trust_root is off)",
				t.User.UID, t.User.GID, Nobody.UID)
		}
		err = fmt.Errorf("%s may not read a file or object of the job on this peer: %w", who, err)
	default:
		return nil
	}
	return status.Error(codes.PermissionDenied, err.Error())
}

// trailer is the app metadata of a unit stream's last message.
type trailer struct {
	Rows     int    `json:"rows"`
	Checksum uint64 `json:"checksum"`
	// Queue is the units the peer had admitted, from every requester,
	// as it sent this one (this one included): what a requester that
	// knows only its own units in flight needs to pick the peer with the
	// shortest queue. 0 from peers that do not say.
	Queue int `json:"queue,omitempty"`
}

// sendUnit writes a unit's output, laid out in wire, as records, the
// last with a trailer holding the output's checksum. mangle, a test hook,
// may change what is sent after the checksum.
func sendUnit(stream flight.FlightService_DoGetServer, wire *wireUnit, lease *batchLease, queue int, mangle func(*column.Batch)) error {
	schema, err := wire.schema()
	if err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	ps := &payloadSender{stream: stream, lease: lease}
	w := ipc.NewWriterWithPayloadWriter(ps, ipc.WithSchema(schema))
	defer w.Close()
	meta, _ := json.Marshal(trailer{Rows: wire.src.Rows, Checksum: Checksum(wire.src), Queue: queue})
	if mangle != nil {
		mangle(&wire.batch)
	}
	return Records(&wire.batch, schema, func(rec arrow.RecordBatch, last bool) error {
		if !last {
			return w.Write(rec)
		}
		// Every payload of this Write carries the trailer (the schema's
		// too, when the unit is one record), as Flight's own writer does.
		ps.meta = meta
		defer func() { ps.meta = nil }()
		return w.Write(rec)
	})
}

// InfoAction is the Flight action a requester calls for a peer's Info.
const InfoAction = "lastmile.info"

// Info is what a peer says of itself: its protocol version, its compute
// identity (identity.go; none before version 5) and how many units it
// computes at once (its cores), for capacity planning.
type Info struct {
	Version     int    `json:"version"`
	Compute     string `json:"compute,omitempty"`
	Workers     int    `json:"workers"`
	MaxInFlight int    `json:"max_inflight"`
}

// DoAction answers InfoAction; a peer has no other action.
func (s *Server) DoAction(a *flight.Action, stream flight.FlightService_DoActionServer) error {
	if err := s.stillTrusted(stream.Context(), s.log); err != nil {
		return err
	}
	if a.GetType() != InfoAction {
		return status.Errorf(codes.Unimplemented, "peer: no action %q (only %q)", a.GetType(), InfoAction)
	}
	b, _ := json.Marshal(Info{Version: Version, Compute: s.identity, Workers: s.cfg.Workers, MaxInFlight: s.cfg.MaxInFlight})
	return stream.Send(&flight.Result{Body: b})
}
