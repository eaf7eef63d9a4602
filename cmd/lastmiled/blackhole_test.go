package main_test

import (
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// blackHole stands for a network that can be partitioned without root
// (TestPeerPartition needs it for network namespaces): a relay whose
// link, while cut, holds every connection open and forwards nothing
// either way, as a network that drops every packet, new connections'
// handshakes included; once mended it forwards what it held (TCP's
// retransmissions getting through) and goes on.
type blackHole struct {
	mu     sync.Mutex
	mended chan struct{} // nil while the link is up; closed on mend
	held   atomic.Int64  // chunks held back by a cut
}

func (b *blackHole) cut() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mended == nil {
		b.mended = make(chan struct{})
	}
}

func (b *blackHole) mend() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mended != nil {
		close(b.mended)
		b.mended = nil
	}
}

// pass blocks while the link is cut.
func (b *blackHole) pass() {
	b.mu.Lock()
	ch := b.mended
	b.mu.Unlock()
	if ch != nil {
		b.held.Add(1)
		<-ch
	}
}

// relay forwards connections from a loopback port to target through b.
func (b *blackHole) relay(t *testing.T, target string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(); b.mend() })
	pipe := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				b.pass()
				if _, err := dst.Write(buf[:n]); err != nil {
					return
				}
			}
			if err != nil {
				if err == io.EOF {
					dst.(*net.TCPConn).CloseWrite()
				}
				return
			}
		}
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				up, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer up.Close()
				go pipe(up, c)
				pipe(c, up)
			}()
		}
	}()
	return l.Addr().String()
}

// hedgesOf returns the job's units started here too because their peer
// was slow, and those whose local run was used (0 where the daemon does
// not hedge).
func hedgesOf(e *env, id string) (hedged, won int64) {
	var j struct {
		Progress struct {
			Hedged int64 `json:"units_hedged"`
			Won    int64 `json:"hedges_won"`
		}
	}
	e.do("GET", "/v1/jobs/"+id, nil, &j)
	return j.Progress.Hedged, j.Progress.Won
}

// TestPeerPartitionLoopback is TestPeerPartition without root: the link
// to the peer (a black-hole relay) drops everything for 1.5 s (longer
// than any unit's deadline) mid-run,
// with units in flight at the peer, then recovers. Every unit stuck
// behind the partition is given up on at the peer while the link is
// down and runs here: hedged, where a local worker is idle (the peer's
// run abandoned, not held against it), or once its deadline
// (peers.deadline: 1s) passes (a failure: the peer is excluded, and
// re-admitted by a probe once the link is back). After the partition the
// peer computes units again in the same run; every epoch's rows arrive
// once and the batches equal a run without peers. The trainers read at
// a steady pace until the peer is back, so that the run outlasts the
// partition and any exclusion.
func TestPeerPartitionLoopback(t *testing.T) {
	long := func(inputs string) string { return strings.Replace(clusterSpec(inputs), "epochs: 3", "epochs: 40", 1) }
	want, wantRows := localRun(t, long(smallData))
	cl := newCluster(t, "always", "", ", deadline: 1s")
	var bh blackHole
	addr := bh.relay(t, cl.peerAddr)
	cl.via(addr)
	cl.start()
	j := cl.gpu.submit(long(cl.data), nil)

	var pace atomic.Int64
	pace.Store(int64(10 * time.Millisecond))
	var atCut, stuck, during, back peerView // the GPU host's view of the peer
	var excluded atomic.Bool                // seen excluded while cut
	var wonAtCut, wonDuring int64           // hedges won here
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		defer pace.Store(0)
		defer bh.mend()
		if !until(stop, 30*time.Second, func() bool { return cl.peerUnits() >= 3 }) {
			return
		}
		_, wonAtCut = hedgesOf(cl.gpu, j.ID)
		atCut = peersOf(cl.gpu)[addr]
		bh.cut()
		cutAt := time.Now()
		// Units sent from now on cannot come back: they are stuck.
		// The view that shows them is the one kept: a second look may
		// come after they were hedged and given up on.
		if !until(stop, 5*time.Second, func() bool { stuck = peersOf(cl.gpu)[addr]; return stuck.InFlight >= 1 }) {
			return
		}
		// Longer than the deadline of any unit stuck (at least 1s, 8
		// times the peer's usual round trip when that is longer), and
		// than the check of a peer whose units are all hedged away (1s
		// after the third). Whether it is excluded meanwhile is watched.
		mend := cutAt.Add(max(2500*time.Millisecond, 8*stuck.Latency+500*time.Millisecond))
		for time.Now().Before(mend) {
			if !peersOf(cl.gpu)[addr].Healthy {
				excluded.Store(true)
			}
			time.Sleep(10 * time.Millisecond)
		}
		during = peersOf(cl.gpu)[addr]
		_, wonDuring = hedgesOf(cl.gpu, j.ID)
		bh.mend()
		until(stop, 15*time.Second, func() bool {
			back = peersOf(cl.gpu)[addr]
			return back.Units > during.Units && back.Healthy
		})
	}()
	got, rows := pacedDigests(t, cl.gpu, j.ID, 2, func() time.Duration { return time.Duration(pace.Load()) })
	close(stop)
	<-done
	checkEpochs(t, "partition", rows, wantRows)
	sameBatches(t, got, want)
	failed, abandoned := during.Failures-stuck.Failures, during.Abandoned-stuck.Abandoned
	t.Logf("cut with %d units in flight at the peer, %d chunks held back; while cut: %d units failed, %d abandoned, %d hedges won here; "+
		"during: %+v; after: %+v", stuck.InFlight, bh.held.Load(), failed, abandoned, wonDuring-wonAtCut, during, back)
	if stuck.InFlight < 1 {
		t.Fatalf("the link was not cut while units were in flight at the peer (the run ended first?); at the cut: %+v; at the end: %+v",
			atCut, peersOf(cl.gpu)[addr])
	}
	if bh.held.Load() == 0 {
		t.Errorf("the partition held nothing back")
	}
	// Each unit stuck at the cut was given up on before the link came
	// back, and ran here.
	if failed+abandoned < int64(stuck.InFlight) {
		t.Fatalf("of %d units stuck behind the partition, %d failed and %d were abandoned while it lasted", stuck.InFlight, failed, abandoned)
	}
	if failed > 0 && (!strings.Contains(during.LastError, "no complete answer within") || during.Healthy) {
		t.Errorf("units failed behind the partition, but not by their deadline, or the peer was not excluded: %+v", during)
	}
	if abandoned > 0 && wonDuring <= wonAtCut {
		t.Errorf("%d units were abandoned at the peer, and no hedge here won", abandoned)
	}
	// A peer whose units are all done here first, and that does not
	// answer, is as good as hung.
	if (abandoned >= 3 || failed > 0) && !excluded.Load() {
		t.Errorf("%d units lost to hedges and %d failed, and the peer was never excluded while cut: %+v", abandoned, failed, during)
	}
	// Back once the link is: re-admitted by a probe if it was excluded.
	if back.Units <= during.Units || !back.Healthy {
		t.Fatalf("the peer computed no unit after the partition (%d before it ended): %+v", during.Units, back)
	}
	if excluded.Load() && !strings.Contains(cl.gpu.log.String(), "peer answers again; re-admitted") {
		t.Errorf("the excluded peer was not re-admitted by a probe")
	}
}
