package main_test

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
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/lastmile/lastmile/peer"
	"github.com/lastmile/lastmile/shm"
)

// cluster is a GPU host's lastmiled that spills to a peer lastmiled, both
// real processes on loopback, over mutual TLS, sharing a data root.
type cluster struct {
	t        *testing.T
	data     string
	gpu, cpu *env
	peerAddr string
}

func freePort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// newCluster writes the two daemons' configs: the peer listens on
// peerAddr (a free loopback port if empty) with a certificate for its IP;
// extra is added to the GPU host's peers: section.
func newCluster(t *testing.T, spill, peerAddr, extra string) *cluster {
	if peerAddr == "" {
		peerAddr = freePort(t)
	}
	peerIP, _, _ := net.SplitHostPort(peerAddr)
	c := &cluster{t: t, gpu: newEnv(t), cpu: newEnv(t), peerAddr: peerAddr}
	c.data = filepath.Join(c.gpu.dir, "data")
	os.MkdirAll(c.data, 0o755)
	for i := range 3 {
		name := fmt.Sprintf("part-%05d.parquet", i)
		b, err := os.ReadFile(filepath.Join(smallData, name))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(c.data, name), b, 0o644)
	}
	ca, err := peer.NewCA(filepath.Join(c.gpu.dir, "certs"), "test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	gpuTLS, _ := ca.Issue(ca.Dir, "gpu", []string{"127.0.0.1"}, time.Hour)
	cpuTLS, _ := ca.Issue(ca.Dir, "cpu", []string{peerIP}, time.Hour)
	tlsYAML := func(f peer.TLSFiles) string { return fmt.Sprintf("{ca: %s, cert: %s, key: %s}", f.CA, f.Cert, f.Key) }
	os.WriteFile(filepath.Join(c.cpu.dir, "lastmiled.yaml"), []byte(fmt.Sprintf(
		"roots: {data: %s}\npeer: {listen: %q, tls: %s, max_inflight: 2, trust_root: true}\n", c.data, c.peerAddr, tlsYAML(cpuTLS))), 0o644)
	os.WriteFile(filepath.Join(c.gpu.dir, "lastmiled.yaml"), []byte(fmt.Sprintf(
		"roots: {data: %s}\npeers: {addrs: [%q], tls: %s, credits: 2, spill: %s%s}\n", c.data, c.peerAddr, tlsYAML(gpuTLS), spill, extra)), 0o644)
	return c
}

func (c *cluster) start() {
	c.cpu.start("-workers", "1")
	c.gpu.start("-workers", "1")
}

// peerUnits returns the units the peer has served, from its status.
func (c *cluster) peerUnits() int64 {
	var st struct {
		Peers struct{ Served struct{ Units int64 } }
	}
	if code, err := c.cpu.do("GET", "/v1/status", nil, &st); code != 200 || err != nil {
		return -1
	}
	return st.Peers.Served.Units
}

func clusterSpec(inputs string) string {
	return fmt.Sprintf("name: job\ninputs: [%s]\nbatch: {size: 100}\nring: {slots: 4}\ndecode: {max_unit_rows: 700}\n%s", inputs, clusterPipeline)
}

const clusterPipeline = `epochs: 3
seed: 9
world_size: 2
shuffle: {units: true, buffer: 300}
pipeline:
  - sample: {key: row_id, rates: [{when: "label == 1", rate: 1.0}, {rate: 0.6}], weight: weight}
  - map: {label_f: "cast(label, float32)", user_h: "hash_mod(user_id, 1000)"}
  - sequence: {column: seq_0, length: 8, lengths: seq_0_len}
  - select: [row_id, label_f, weight, user_h, seq_0, seq_0_len, query]
`

// digests reads every rank of job to the end (reattaching after a daemon
// restart) and returns each rank's batch digests and row ids per epoch.
func digests(t *testing.T, e *env, job string, world int) ([][][32]byte, map[uint64][]int64) {
	t.Helper()
	return pacedDigests(t, e, job, world, nil)
}

// pacedDigests is digests with a trainer whose pace the test sets: each
// rank sleeps pace() after each batch, before releasing its slot (nil:
// not at all).
func pacedDigests(t *testing.T, e *env, job string, world int, pace func() time.Duration) ([][][32]byte, map[uint64][]int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	out := make([][][32]byte, world)
	rows := map[uint64][]int64{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for r := range world {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var next *cursor
			for {
				err := readRank(ctx, e, job, r, &next, func(b *shm.Batch) {
					d, ids := batchDigest(b)
					mu.Lock()
					out[r] = append(out[r], d)
					rows[b.Cursor.Epoch] = append(rows[b.Cursor.Epoch], ids...)
					mu.Unlock()
					if pace == nil {
						return
					}
					if d := pace(); d > 0 {
						time.Sleep(d)
					}
				})
				if errors.Is(err, shm.ErrProducerDied) || errors.Is(err, errRestarting) {
					time.Sleep(20 * time.Millisecond) // the daemon restarts: attach again at the next batch
					continue
				}
				if err != nil {
					t.Errorf("rank %d: %v", r, err)
				}
				return
			}
		}()
	}
	wg.Wait()
	return out, rows
}

var errRestarting = errors.New("daemon restarting")

// readRank attaches to rank r of job at *next (nil: where the job stands)
// and reads to the end or an error, calling got with each batch and
// keeping *next at the batch after it.
func readRank(ctx context.Context, e *env, job string, r int, next **cursor, got func(*shm.Batch)) error {
	body := map[string]any{"rank": r}
	if *next != nil {
		body["cursor"] = **next
	}
	var a attachJSON
	var ej errJSON
	st, err := e.do("POST", "/v1/jobs/"+job+"/attach", body, &a)
	if err != nil || st == 503 {
		return errRestarting
	}
	if st != 200 {
		e.do("POST", "/v1/jobs/"+job+"/attach", body, &ej)
		return fmt.Errorf("attach: %d %s", st, ej.Error)
	}
	c, err := shm.Open(a.Dir, a.Ring)
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
		got(b)
		n := cursor{b.Cursor.Epoch, b.Cursor.BatchIndex + 1}
		if b.Cursor.Flags&shm.FlagLastInEpoch != 0 {
			n = cursor{b.Cursor.Epoch + 1, 0}
		}
		*next = &n
		c.Release()
	}
}

// batchDigest is a batch's cursor, shape and bytes, hashed, and its row ids.
func batchDigest(b *shm.Batch) ([32]byte, []int64) {
	h := sha256.New()
	binary.Write(h, binary.LittleEndian, []uint64{b.Cursor.Epoch, b.Cursor.BatchIndex, uint64(b.Rows)})
	for _, tn := range b.Tensors {
		fmt.Fprintf(h, "%s/%d/%d/%v|", tn.Name, tn.Role, tn.DType, tn.Shape)
		h.Write(tn.Data)
	}
	ids := b.Tensor("row_id", shm.RoleDense)
	v := unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(ids.Data))), b.Rows)
	return [32]byte(h.Sum(nil)), append([]int64(nil), v...)
}

// sameBatches checks that every rank got the local run's batches, byte
// for byte.
func sameBatches(t *testing.T, got, want [][][32]byte) {
	t.Helper()
	for r := range want {
		if len(got[r]) != len(want[r]) {
			t.Fatalf("rank %d: %d batches, the local run %d", r, len(got[r]), len(want[r]))
		}
		for i := range want[r] {
			if got[r][i] != want[r][i] {
				t.Fatalf("rank %d batch %d differs from the local run's", r, i)
			}
		}
	}
}

// checkEpochs checks that each epoch delivered each kept row once.
func checkEpochs(t *testing.T, what string, got, want map[uint64][]int64) {
	t.Helper()
	for ep, w := range want {
		seen := map[int64]int{}
		for _, id := range got[ep] {
			seen[id]++
		}
		lost, dup := 0, 0
		for _, id := range w {
			switch seen[id] {
			case 0:
				lost++
			case 1:
			default:
				dup += seen[id] - 1
			}
		}
		if lost > 0 || dup > 0 || len(got[ep]) != len(w) {
			t.Fatalf("%s epoch %d: %d rows lost, %d repeated (%d read, want %d)", what, ep, lost, dup, len(got[ep]), len(w))
		}
	}
}

// TestPeersSpill: a job on a GPU host whose daemon spills to a peer gives
// batches byte-identical to the same job on a daemon without peers, with
// every epoch's rows exactly once, also when the peer is killed with
// SIGKILL mid-run and when it comes back, and when the GPU host's daemon
// is. Each kill is asserted to have landed mid-run: the peer's with
// units in flight at it, which must fail; the GPU host's before its job
// ended, which must restart it.
func TestPeersSpill(t *testing.T) {
	local := newEnv(t)
	local.start("-workers", "1")
	lj := local.submit(clusterSpec(smallData), nil)
	want, wantRows := digests(t, local, lj.ID, 2)

	// The link flips a bit in the first large chunk (units' records, past
	// the TLS handshake) that each of the first three connections carries
	// back from the peer; or it delays every chunk. Under mutual TLS a
	// flipped bit fails the connection (bad record MAC); the unit checksum
	// that catches what TLS would not is tested in package peer.
	var flips [4]atomic.Bool
	var flipped atomic.Int64
	corrupt := func(conn int64, p []byte) int {
		if conn < int64(len(flips)) && len(p) > 4096 && flips[conn].CompareAndSwap(false, true) {
			flipped.Add(1)
			p[len(p)/2] ^= 0x40
		}
		return len(p)
	}
	slow := func(_ int64, p []byte) int { time.Sleep(15 * time.Millisecond); return len(p) }
	// The kills must land mid-run, and each case asserts that they did:
	// a test whose fault came after the run ended would pass without
	// testing anything. The GPU host, killed mid-run, resumes its job
	// (a restart of the job counted); the peer is frozen (SIGSTOP) until
	// the GPU host has units in flight at it, then killed, so that those
	// units are lost with it and must fail.
	var gpuKilled atomic.Bool
	var heldAtKill atomic.Int64
	for _, c := range []struct {
		name   string
		fault  func(cl *cluster, stop <-chan struct{})
		tamper func(conn int64, p []byte) int
		check  func(t *testing.T, cl *cluster, j jobJSON, p peer.PeerStats)
	}{
		{"healthy", nil, nil, nil},
		{"corrupted stream", nil, corrupt, nil},
		{"slow link", nil, slow, nil},
		{"GPU host killed mid-run, resumed", func(cl *cluster, stop <-chan struct{}) {
			if !until(stop, 30*time.Second, func() bool { return cl.peerUnits() >= 3 }) {
				return
			}
			cl.gpu.kill9()
			gpuKilled.Store(true)
			cl.gpu.start("-workers", "1")
		}, nil, func(t *testing.T, cl *cluster, j jobJSON, p peer.PeerStats) {
			if !gpuKilled.Load() {
				t.Fatal("the GPU host was not killed: the run ended before the peer had done 3 units")
			}
			if j.Restarts == 0 {
				t.Fatalf("the GPU host was killed after its job ended: no restart of it counted (%+v)", j)
			}
		}},
		{"peer killed mid-run, then back", func(cl *cluster, stop <-chan struct{}) {
			var seen int
			if !until(stop, 30*time.Second, func() bool {
				seen = peersOf(cl.gpu)[cl.peerAddr].InFlight
				return cl.peerUnits() >= 2 && seen >= 1
			}) {
				return
			}
			cl.cpu.freeze()
			// What the GPU host had at the peer as it froze stays there.
			// A status read after the freeze may come too late to show it:
			// the run can end meanwhile (its hedges done here), and
			// until then a read can fail; so the count seen just before
			// the freeze stands unless a later one is read.
			heldAtKill.Store(int64(seen))
			if until(stop, 10*time.Second, func() bool {
				seen = peersOf(cl.gpu)[cl.peerAddr].InFlight
				return seen >= 1
			}) {
				heldAtKill.Store(int64(seen))
			}
			cl.cpu.kill9()
			time.Sleep(300 * time.Millisecond)
			cl.cpu.start("-workers", "1")
		}, nil, func(t *testing.T, cl *cluster, j jobJSON, p peer.PeerStats) {
			if heldAtKill.Load() < 1 {
				t.Fatal("the peer was not killed while the GPU host had units in flight at it (the run ended first?)")
			}
			if p.Failures < 1 {
				t.Fatalf("the GPU host had %d units at the peer when it was killed, and no failure counted: %+v", heldAtKill.Load(), p)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl := newCluster(t, "always", "", "")
			if c.tamper != nil {
				cl.via(relay(t, cl.peerAddr, c.tamper))
			}
			cl.start()
			j := cl.gpu.submit(clusterSpec(cl.data), nil)
			faulted, stop := make(chan struct{}), make(chan struct{})
			go func() {
				defer close(faulted)
				if c.fault != nil {
					c.fault(cl, stop)
				}
			}()
			got, rows := digests(t, cl.gpu, j.ID, 2)
			close(stop)
			<-faulted
			checkEpochs(t, c.name, rows, wantRows)
			sameBatches(t, got, want)
			var st struct {
				Peers struct{ Peers []peer.PeerStats }
			}
			cl.gpu.do("GET", "/v1/status", nil, &st)
			// A fault may cost every unit the peer had in flight (the peer
			// killed before it finished one, and back only after the run
			// ended): only the healthy run must have units from it.
			if len(st.Peers.Peers) != 1 || c.name == "healthy" && st.Peers.Peers[0].Units == 0 {
				t.Errorf("the GPU host's peers: %+v", st.Peers.Peers)
			}
			if c.name == "healthy" {
				checkSpillMetrics(t, cl, j.ID)
			}
			if p := st.Peers.Peers[0]; c.name == "corrupted stream" && (flipped.Load() == 0 || p.Failures == 0) {
				t.Errorf("%d bytes flipped, %d units failed", flipped.Load(), p.Failures)
			} else if c.name == "slow link" && (p.Units == 0 || p.Latency < 15*time.Millisecond) {
				t.Errorf("over the slow link: %d units, a round trip of %v", p.Units, p.Latency)
			}
			t.Logf("peer stats seen by the GPU host: %+v", st.Peers.Peers)
			if c.check != nil {
				c.check(t, cl, cl.gpu.job(j.ID), st.Peers.Peers[0])
			}
		})
	}
}

// checkSpillMetrics: the GPU host's /metrics has the spill figures of a
// run that spilled: units, bytes and receive CPU per peer, its
// mismatches and quarantine, the job's spilled units, those verified and
// its hedges by winner; and its job status agrees.
func checkSpillMetrics(t *testing.T, cl *cluster, id string) {
	t.Helper()
	text := metricsOf(cl.gpu)
	for _, c := range []struct {
		name     string
		labels   []string
		positive bool
	}{
		{"lastmile_peer_units_total", nil, true},
		{"lastmile_peer_bytes_total", nil, true},
		{"lastmile_peer_receive_cpu_seconds_total", nil, true},
		{"lastmile_peer_abandoned_total", nil, false},
		{"lastmile_peer_mismatch_total", nil, false},
		{"lastmile_peer_quarantined", nil, false},
		{"lastmile_spill_verified_total", []string{`job_id="` + id + `"`}, false},
		{"lastmile_spill_units_total", []string{`job_id="` + id + `"`}, true},
		{"lastmile_spill_hedged_total", []string{`job_id="` + id + `"`, `winner="here"`}, false},
		{"lastmile_spill_hedged_total", []string{`job_id="` + id + `"`, `winner="peer"`}, false},
	} {
		v, ok := metricValue(text, c.name, c.labels...)
		if !ok || c.positive && v <= 0 {
			t.Errorf("/metrics: %s%v = %v (present: %v)", c.name, c.labels, v, ok)
		}
	}
	// The peer's side: what it computed, and, once its last handler has
	// returned, nothing left admitted.
	var ptext string
	until(nil, 5*time.Second, func() bool {
		ptext = metricsOf(cl.cpu)
		v, ok := metricValue(ptext, "lastmile_peer_serving_units")
		return ok && v == 0
	})
	for _, c := range []struct {
		name string
		want func(float64) bool
	}{
		{"lastmile_peer_served_units_total", func(v float64) bool { return v > 0 }},
		{"lastmile_peer_compute_seconds_total", func(v float64) bool { return v > 0 }},
		{"lastmile_peer_serving_units", func(v float64) bool { return v == 0 }},
		{"lastmile_peer_canceled_total", func(v float64) bool { return v >= 0 }},
		{"lastmile_peer_side_table_bytes", func(v float64) bool { return v >= 0 }},
	} {
		if v, ok := metricValue(ptext, c.name); !ok || !c.want(v) {
			t.Errorf("the peer's /metrics: %s = %v (present: %v)", c.name, v, ok)
		}
	}
	var j struct {
		Progress struct {
			Done    int64 `json:"units_done"`
			Spilled int64 `json:"units_spilled"`
		}
		Spill *struct {
			On     bool   `json:"on"`
			Reason string `json:"reason"`
		}
	}
	cl.gpu.do("GET", "/v1/jobs/"+id, nil, &j)
	if j.Spill == nil || j.Spill.Reason == "" || j.Progress.Spilled == 0 || j.Progress.Spilled > j.Progress.Done {
		t.Errorf("job status: spill %+v, %d of %d units spilled", j.Spill, j.Progress.Spilled, j.Progress.Done)
	}
}
