package main_test

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/lastmile/lastmile/peer"
)

// netHost is a network namespace joined to this one by a veth pair: the
// peer's own host, whose link the test can cut.
type netHost struct {
	t            *testing.T
	ns, hostLink string
	hostIP, ip   string
}

func run(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// newNetHost makes the namespace, or skips the test where that is not
// possible (not root, no ip command, no namespaces).
func newNetHost(t *testing.T) *netHost {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a network namespace")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2's ip")
	}
	n := os.Getpid() % 200
	h := &netHost{t: t, ns: fmt.Sprintf("lmpeer%d", os.Getpid()), hostLink: fmt.Sprintf("lmv%da", os.Getpid()),
		hostIP: fmt.Sprintf("10.203.%d.1", n), ip: fmt.Sprintf("10.203.%d.2", n)}
	if out, err := exec.Command("ip", "netns", "add", h.ns).CombinedOutput(); err != nil {
		t.Skipf("no network namespaces here: %v %s", err, out)
	}
	t.Cleanup(func() {
		exec.Command("ip", "link", "del", h.hostLink).Run()
		exec.Command("ip", "netns", "del", h.ns).Run()
	})
	peerLink := fmt.Sprintf("lmv%db", os.Getpid())
	run(t, "ip", "link", "add", h.hostLink, "type", "veth", "peer", "name", peerLink)
	run(t, "ip", "link", "set", peerLink, "netns", h.ns)
	run(t, "ip", "addr", "add", h.hostIP+"/24", "dev", h.hostLink)
	run(t, "ip", "link", "set", h.hostLink, "up")
	run(t, "ip", "netns", "exec", h.ns, "ip", "addr", "add", h.ip+"/24", "dev", peerLink)
	run(t, "ip", "netns", "exec", h.ns, "ip", "link", "set", peerLink, "up")
	run(t, "ip", "netns", "exec", h.ns, "ip", "link", "set", "lo", "up")
	return h
}

func (h *netHost) link(up bool) {
	state := "down"
	if up {
		state = "up"
	}
	run(h.t, "ip", "link", "set", h.hostLink, state)
}

// TestPeerPartition: the peer is another host (a network namespace); its
// link goes down mid-run and comes back. Units stuck behind the partition
// run locally (hedged, or after the deadline), the peer is excluded and
// re-admitted, and the batches are byte-identical to a run without peers.
func TestPeerPartition(t *testing.T) {
	h := newNetHost(t)
	local := newEnv(t)
	local.start("-workers", "1")
	// Long enough (12 epochs) that the partition falls mid-run.
	long := func(inputs string) string { return strings.Replace(clusterSpec(inputs), "epochs: 3", "epochs: 12", 1) }
	lj := local.submit(long(smallData), nil)
	want, wantRows := digests(t, local, lj.ID, 2)

	cl := newCluster(t, "always", h.ip+":7941", ", deadline: 1s")
	cl.cpu.wrap = []string{"ip", "netns", "exec", h.ns}
	cl.start()
	gpu, data := cl.gpu, cl.data
	j := gpu.submit(long(data), nil)
	stop, faulted := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(faulted)
		for cl.peerUnits() < 2 {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
		h.link(false)
		time.Sleep(1500 * time.Millisecond)
		h.link(true)
	}()
	got, rows := digests(t, gpu, j.ID, 2)
	close(stop)
	<-faulted
	checkEpochs(t, "partition", rows, wantRows)
	sameBatches(t, got, want)
	var st struct {
		Peers struct{ Peers []peer.PeerStats }
	}
	gpu.do("GET", "/v1/status", nil, &st)
	t.Logf("after the partition: %+v", st.Peers.Peers)
	// The units stuck behind the partition were given up on: failed at
	// their deadline, or hedged here and abandoned (and the peer excluded
	// once three in a row were).
	if len(st.Peers.Peers) != 1 || st.Peers.Peers[0].Failures+st.Peers.Peers[0].Abandoned == 0 {
		t.Fatalf("nothing stuck behind the partition was given up on: %+v", st.Peers.Peers)
	}
	// Recovery: once its backoff ends the peer answers a probe (once TCP
	// has retransmitted what the partition dropped) and is re-admitted,
	// and the next job spills to it again.
	deadline := time.Now().Add(15 * time.Second)
	for !peersOf(gpu)[cl.peerAddr].Healthy {
		if time.Now().After(deadline) {
			t.Fatalf("the peer was not re-admitted within 15 s of the partition: %+v", peersOf(gpu)[cl.peerAddr])
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Excluded, it comes back only by answering a probe. It may also
	// never have been excluded: the check after the abandoned units
	// excludes a peer only if none of its units came back meanwhile, and
	// once the link is up again TCP's retransmissions may bring one.
	log := gpu.log.String()
	excluded := strings.Contains(log, "peer failed; excluded")
	t.Logf("the peer was excluded during the partition: %v", excluded)
	if excluded && !strings.Contains(log, "peer answers again; re-admitted") {
		t.Error("the peer is healthy again without a probe's answer")
	}
	before := cl.peerUnits()
	j2 := gpu.submit(strings.Replace(long(data), "name: job", "name: job2", 1), nil)
	got, rows = digests(t, gpu, j2.ID, 2)
	checkEpochs(t, "after the partition", rows, wantRows)
	sameBatches(t, got, want)
	if after := cl.peerUnits(); after <= before {
		t.Errorf("the peer served %d units before the second job and %d after: not re-admitted", before, after)
	}
}
