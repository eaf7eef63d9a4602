package main_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/lastmile/lastmile/peer"
)

// Faults between a GPU host and its peers, each injected while the run
// is known to be under way: a test that injects a fault also asserts
// that the fault landed mid-run (units in flight at the peer, counters
// that moved), so that it cannot pass by coming too late.

// peerView is one peer as the GPU host's status shows it. Abandoned
// (units given up on here before the peer answered, not failures) is
// read where the daemon reports it.
type peerView struct {
	peer.PeerStats
	Abandoned int64 `json:"abandoned"`
}

// peersOf returns the GPU host's view of its peers by address, or nil
// when the daemon does not answer.
func peersOf(e *env) map[string]peerView {
	var st struct {
		Peers struct{ Peers []peerView }
	}
	if code, err := e.do("GET", "/v1/status", nil, &st); code != 200 || err != nil {
		return nil
	}
	out := map[string]peerView{}
	for _, p := range st.Peers.Peers {
		out[p.Addr] = p
	}
	return out
}

// servedBy returns the units the peer daemon e has served, -1 when it
// does not answer.
func servedBy(e *env) int64 {
	units, _ := served(e)
	return units
}

// served returns the units a peer daemon has answered and those it has
// admitted and not yet answered, or -1s when it does not answer.
func served(e *env) (units, inFlight int64) {
	var st struct {
		Peers struct {
			Served struct{ Units, InFlight int64 }
		}
	}
	if code, err := e.do("GET", "/v1/status", nil, &st); code != 200 || err != nil {
		return -1, -1
	}
	return st.Peers.Served.Units, st.Peers.Served.InFlight
}

// until polls cond every 2ms and reports whether it held before stop
// was closed or timeout passed.
func until(stop <-chan struct{}, timeout time.Duration, cond func() bool) bool {
	deadline := time.After(timeout)
	for !cond() {
		select {
		case <-stop:
			return false
		case <-deadline:
			return false
		case <-time.After(2 * time.Millisecond):
		}
	}
	return true
}

// freeze stops the daemon's process (SIGSTOP): what it holds stays in
// flight, and nothing it computes gets out, until thaw or a kill.
func (e *env) freeze() { e.cur.cmd.Process.Signal(syscall.SIGSTOP) }
func (e *env) thaw()   { e.cur.cmd.Process.Signal(syscall.SIGCONT) }

// metricsOf returns the daemon's /metrics text.
func metricsOf(e *env) string {
	var st struct {
		Config struct{ Metrics string }
	}
	if code, err := e.do("GET", "/v1/status", nil, &st); code != 200 || err != nil {
		return ""
	}
	m, _ := scrape(st.Config.Metrics)
	return m
}

// metricValue returns the value of the first sample of name whose labels
// contain every one of labels (`job_id="..."`), and whether there is one.
func metricValue(text, name string, labels ...string) (float64, bool) {
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(line, l)
		}
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		return v, err == nil
	}
	return 0, false
}

// localRun is the reference: the job on a daemon without peers.
func localRun(t *testing.T, spec string) ([][][32]byte, map[uint64][]int64) {
	t.Helper()
	local := newEnv(t)
	local.start("-workers", "1")
	j := local.submit(spec, nil)
	return digests(t, local, j.ID, 2)
}

// addPeer gives the cluster another peer daemon, with its own
// certificate from the cluster's CA, listed in the GPU host's config
// beside the first; call it before start, and start the peer itself.
func (c *cluster) addPeer() (*env, string) {
	c.t.Helper()
	ca, err := peer.LoadCA(filepath.Join(c.gpu.dir, "certs"))
	if err != nil {
		c.t.Fatal(err)
	}
	addr := freePort(c.t)
	e := newEnv(c.t)
	_, port, _ := net.SplitHostPort(addr)
	f, err := ca.Issue(ca.Dir, "cpu-"+port, []string{"127.0.0.1"}, time.Hour)
	if err != nil {
		c.t.Fatal(err)
	}
	os.WriteFile(filepath.Join(e.dir, "lastmiled.yaml"), []byte(fmt.Sprintf(
		"roots: {data: %s}\npeer: {listen: %q, tls: {ca: %s, cert: %s, key: %s}, max_inflight: 2, trust_root: true}\n",
		c.data, addr, f.CA, f.Cert, f.Key)), 0o644)
	path := filepath.Join(c.gpu.dir, "lastmiled.yaml")
	b, _ := os.ReadFile(path)
	os.WriteFile(path, []byte(strings.Replace(string(b), "\"]", "\", \""+addr+"\"]", 1)), 0o644)
	return e, addr
}

// TestPeerKilledOneOfTwo: of a GPU host's two peers, one is killed with
// SIGKILL while it holds units; they and the rest go to the other peer
// or run here, every epoch's rows arrive once and the batches equal a
// run without peers. The killed peer is frozen (SIGSTOP) first, so that
// the units it holds at the kill are known, and the surviving peer must
// do units after the kill.
func TestPeerKilledOneOfTwo(t *testing.T) {
	// Eight epochs, not three: long enough that the kill lands mid-run.
	spec := func(inputs string) string { return strings.Replace(clusterSpec(inputs), "epochs: 3", "epochs: 8", 1) }
	want, wantRows := localRun(t, spec(smallData))
	cl := newCluster(t, "always", "", "")
	b, bAddr := cl.addPeer()
	cl.start()
	b.start("-workers", "1")
	a, aAddr := cl.cpu, cl.peerAddr
	j := cl.gpu.submit(spec(cl.data), nil)

	var killedWith int          // units the killed peer held
	var bUnitsAtKill int64 = -1 // the survivor's units at the kill
	stop, faulted := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(faulted)
		// Stop a while the GPU host has units at it; it sends more, which
		// wait there, until the kill.
		if !until(stop, 30*time.Second, func() bool {
			return servedBy(a) >= 2 && servedBy(b) >= 1 && peersOf(cl.gpu)[aAddr].InFlight >= 1
		}) {
			return
		}
		a.freeze()
		// The counts come from the read that showed units in flight: a
		// later one may fail or come after the run has moved on.
		var ps map[string]peerView
		if !until(stop, 10*time.Second, func() bool { ps = peersOf(cl.gpu); return ps[aAddr].InFlight >= 1 }) {
			a.kill9()
			return
		}
		killedWith, bUnitsAtKill = ps[aAddr].InFlight, ps[bAddr].Units
		a.kill9()
	}()
	got, rows := digests(t, cl.gpu, j.ID, 2)
	close(stop)
	<-faulted
	checkEpochs(t, "one of two peers killed", rows, wantRows)
	sameBatches(t, got, want)
	ps := peersOf(cl.gpu)
	t.Logf("peers after the kill (it held %d units): %+v", killedWith, ps)
	if killedWith < 1 {
		t.Fatalf("the peer was not killed with units in flight (the run ended first?)")
	}
	if ps[aAddr].Failures < 1 {
		t.Errorf("the killed peer's units did not fail: %+v", ps[aAddr])
	}
	if ps[bAddr].Units <= bUnitsAtKill {
		t.Errorf("the surviving peer did %d units at the kill and %d at the end: none after it", bUnitsAtKill, ps[bAddr].Units)
	}
}

// versionRefuser is a Flight server that refuses every ticket as a peer
// of another protocol version does (peer/server.go, errVersion).
type versionRefuser struct {
	flight.BaseFlightServer
	gets atomic.Int64
}

func (v *versionRefuser) DoGet(*flight.Ticket, flight.FlightService_DoGetServer) error {
	v.gets.Add(1)
	return status.Error(codes.FailedPrecondition, "protocol version mismatch: ticket of protocol version 1, this peer speaks 2: upgrade the older side")
}

// TestPeerOtherVersion: the GPU host's peer speaks another protocol
// version (a Flight server in this process, behind the same mutual TLS,
// refusing every ticket with FailedPrecondition). The units run here,
// the rows and batches are those of a run without peers, and the GPU
// host shows the peer excluded for minutes with the peer's error.
func TestPeerOtherVersion(t *testing.T) {
	want, wantRows := localRun(t, clusterSpec(smallData))
	cl := newCluster(t, "always", "", "")
	tc, err := peer.TLSFiles{CA: filepath.Join(cl.gpu.dir, "certs", "ca.pem"), Cert: filepath.Join(cl.gpu.dir, "certs", "cpu.pem"),
		Key: filepath.Join(cl.gpu.dir, "certs", "cpu-key.pem")}.ServerTLS()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", cl.peerAddr)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(tc)))
	ref := &versionRefuser{}
	flight.RegisterFlightServiceServer(srv, ref)
	go srv.Serve(l)
	t.Cleanup(srv.Stop)

	cl.gpu.start("-workers", "1")
	j := cl.gpu.submit(clusterSpec(cl.data), nil)
	got, rows := digests(t, cl.gpu, j.ID, 2)
	checkEpochs(t, "peer of another version", rows, wantRows)
	sameBatches(t, got, want)

	p := peersOf(cl.gpu)[cl.peerAddr]
	t.Logf("the GPU host's view of the peer: %+v; tickets refused: %d", p, ref.gets.Load())
	if ref.gets.Load() == 0 {
		t.Fatal("no ticket reached the peer of another version")
	}
	if p.Units != 0 || p.Failures == 0 || p.Healthy || !strings.Contains(p.LastError, "FailedPrecondition") ||
		!strings.Contains(p.LastError, "protocol version mismatch") {
		t.Errorf("the peer is not shown excluded with its error: %+v", p)
	}
	if left := time.Until(p.ExcludedTill); left < 5*time.Minute {
		t.Errorf("the peer of another version is excluded for %v more, want about 10 minutes", left)
	}
	m := metricsOf(cl.gpu)
	if v, ok := metricValue(m, "lastmile_spill_fallbacks_total", `job_id="`+j.ID+`"`); !ok || v < 1 {
		t.Errorf("lastmile_spill_fallbacks_total = %v (reported: %v), want the refused units counted", v, ok)
	}
	if v, _ := metricValue(m, "lastmile_spill_units_total", `job_id="`+j.ID+`"`); v != 0 {
		t.Errorf("%v units counted as spilled to a peer that refused every ticket", v)
	}
}

// cutRelay is relay, except that on each of the first conns connections
// it forwards only the first half of the first large chunk (a unit's
// answer, past the TLS handshake) the target sends back, then closes the
// connection both ways: a stream cut short. It counts the cuts.
func cutRelay(t *testing.T, target string, conns int64) (string, *atomic.Int64) {
	t.Helper()
	var cuts atomic.Int64
	cut := make([]atomic.Bool, conns+1)
	return relay(t, target, func(id int64, p []byte) int {
		if len(p) > 4096 && id <= conns && cut[id].CompareAndSwap(false, true) {
			cuts.Add(1)
			return len(p) / 2
		}
		return len(p)
	}), &cuts
}

// TestPeerTruncatedStream: the link between the GPU host and its peer
// cuts the peer's answers short (half a unit's first chunk, then the
// connection closes) on the first connections. The requester counts the
// failures, the units run here or again, and the rows and batches are
// those of a run without peers.
func TestPeerTruncatedStream(t *testing.T) {
	want, wantRows := localRun(t, clusterSpec(smallData))
	cl := newCluster(t, "always", "", "")
	addr, cuts := cutRelay(t, cl.peerAddr, 2)
	cl.via(addr)
	cl.start()
	j := cl.gpu.submit(clusterSpec(cl.data), nil)
	got, rows := digests(t, cl.gpu, j.ID, 2)
	checkEpochs(t, "truncated stream", rows, wantRows)
	sameBatches(t, got, want)
	p := peersOf(cl.gpu)[addr]
	t.Logf("%d streams cut; the GPU host's view of the peer: %+v", cuts.Load(), p)
	if cuts.Load() == 0 {
		t.Fatal("no answer was cut short (the run ended before the peer answered?)")
	}
	if p.Failures == 0 || p.LastError == "" {
		t.Errorf("the cut streams were not counted as failures: %+v", p)
	}
	if served := servedBy(cl.cpu); served < 1 {
		t.Errorf("the peer served %d units: the cut was not of a unit's answer", served)
	}
}

// TestPeerDrainMidRun: SIGTERM to a peer while it holds units. It
// finishes the units it has admitted and refuses new ones (drain), then
// exits 0; every epoch's rows arrive once and the batches equal a run
// without peers. The peer is frozen (SIGSTOP) when the signal is sent,
// and kept frozen until what it sent before has arrived, so that the
// units the GPU host has at it are known and none can come back before
// the signal: each must then come back complete (admitted before the
// drain began) or be refused as draining (its ticket still unread), and
// no unit beyond them may be served.
func TestPeerDrainMidRun(t *testing.T) {
	want, wantRows := localRun(t, clusterSpec(smallData))
	// No hedging: a unit the frozen peer holds could otherwise be given
	// up on (run here as well, and won) before the SIGTERM, leaving no
	// unit outstanding for the drain to meet.
	cl := newCluster(t, "always", "", ", hedge: -1s")
	cl.start()
	j := cl.gpu.submit(clusterSpec(cl.data), nil)

	var at peerView // the GPU host's view of the peer at SIGTERM
	var logAt int   // the GPU host's log up to SIGTERM
	var exited chan error
	var missed string // why SIGTERM was not sent
	stop, faulted := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(faulted)
		// Stop the peer while it holds admitted units: it keeps up to
		// max_inflight (2) admitted while the GPU host spills.
		if !until(stop, 30*time.Second, func() bool { u, in := served(cl.cpu); return u >= 3 && in >= 1 }) {
			u, in := served(cl.cpu)
			missed = fmt.Sprintf("the peer never held a unit after serving 3 (served %d, holding %d)", u, in)
			return
		}
		cl.cpu.freeze()
		if !until(stop, 10*time.Second, func() bool { return peersOf(cl.gpu)[cl.peerAddr].InFlight >= 1 }) {
			missed = fmt.Sprintf("the GPU host saw no unit at the frozen peer: %+v", peersOf(cl.gpu)[cl.peerAddr])
			cl.cpu.thaw()
			return
		}
		// Let what the peer sent before it froze arrive, and the GPU host
		// take every credit it will: from then on no unit comes back and
		// no ticket leaves for the peer until the peer runs again.
		time.Sleep(200 * time.Millisecond)
		at, logAt = peersOf(cl.gpu)[cl.peerAddr], len(cl.gpu.log.String())
		exited = cl.cpu.signal(syscall.SIGTERM)
		cl.cpu.thaw()
	}()
	got, rows := digests(t, cl.gpu, j.ID, 2)
	close(stop)
	<-faulted
	checkEpochs(t, "peer drained", rows, wantRows)
	sameBatches(t, got, want)
	if exited == nil {
		t.Fatalf("SIGTERM did not reach the peer while it held units (the run ended first?): %s", missed)
	}
	select {
	case err := <-exited:
		cl.cpu.cur = nil
		if err != nil {
			t.Errorf("the drained peer exited with %v, want 0", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the peer did not exit after SIGTERM")
	}
	plog := cl.cpu.log.String()
	for _, line := range []string{"draining: no new jobs, no new units", "peer drained", "msg=stopped"} {
		if !strings.Contains(plog, line) {
			t.Errorf("the peer's log lacks %q", line)
		}
	}
	// The units the peer had admitted when it began draining are the ones
	// it must finish: each was answered, or its requester gave up on it
	// (a hedge here won) before the answer; none is cut off.
	m := regexp.MustCompile(`peer draining.*units_in_flight=(\d+)(?s:.*)peer drained.*units_answered=(\d+) units_canceled=(\d+)`).FindStringSubmatch(plog)
	if m == nil {
		t.Fatalf("the peer did not log the units it held as it began draining and what became of them:\n%s", plog)
	}
	admitted, _ := strconv.Atoi(m[1])
	answered, _ := strconv.Atoi(m[2])
	canceled, _ := strconv.Atoi(m[3])
	// The drain must meet units outstanding, counted on either side: the
	// peer may hold admitted units the GPU host has already given up (a
	// hedge won while the peer was stopped), and the GPU host may hold
	// tickets that reach the peer only after it began draining.
	if admitted < 1 && at.InFlight < 1 {
		t.Fatalf("no unit was outstanding as the peer began draining: the test did not exercise a drain mid-run: %+v\n%s", at, plog)
	}
	if answered+canceled < admitted {
		t.Errorf("the peer held %d units as it began draining, and answered %d (%d canceled by the GPU host): it cut off the rest",
			admitted, answered, canceled)
	}
	p := peersOf(cl.gpu)[cl.peerAddr]
	after := cl.gpu.log.String()[logAt:]
	held, done := at.InFlight, int(p.Units-at.Units)
	refused := len(regexp.MustCompile(`spilled unit failed.*peer is draining`).FindAllString(after, -1))
	abandoned := int(p.Abandoned - at.Abandoned) // given up on here (hedged), where the daemon does that
	// A ticket sent while the peer was stopped may reach it past its
	// admission bound, before the SIGTERM is handled: it is turned away
	// as busy, as it would be without the drain.
	busy := int(p.Refused - at.Refused)
	t.Logf("held %d units at SIGTERM, %d admitted at the peer (%d answered, %d canceled): %d came back, %d refused as draining, %d as busy, %d abandoned here; then: %+v",
		held, admitted, answered, canceled, done, refused, busy, abandoned, p)
	if done+refused+busy+abandoned < held {
		t.Errorf("of %d units held at SIGTERM, %d came back, %d were refused as draining, %d as busy, %d abandoned: the rest were cut off",
			held, done, refused, busy, abandoned)
	}
	if done > held {
		t.Errorf("the draining peer served %d units, more than the %d it held at SIGTERM", done, held)
	}
	// A unit counts as canceled at the peer when its stream's context
	// ends; the GPU host ends one only when it gives the unit up. More
	// canceled than given up is the drain cutting units off.
	if canceled > int(p.Abandoned) {
		t.Errorf("the draining peer counts %d units canceled, and the GPU host gave up on only %d in the whole run", canceled, p.Abandoned)
	}

	// The units offered once the held ones came back were turned away:
	// refused as draining, or finding the peer gone.
	if p.Failures == at.Failures {
		t.Errorf("no unit offered to the draining peer was turned away: %+v", p)
	}
}
