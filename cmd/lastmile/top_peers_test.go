package main

import (
	"strings"
	"testing"
	"time"

	"github.com/lastmile/lastmile/peer"
)

func TestTopPeerLines(t *testing.T) {
	at := time.Unix(1000, 0)
	sample := func(dt time.Duration, units, bytes int64, healthy bool, total float64) *topSample {
		st := &apiStatus{Peers: &apiStatusPeers{Peers: []peer.PeerStats{{Addr: "10.0.0.7:7941", Healthy: healthy, InFlight: 2, Units: units,
			Bytes: bytes, WireBytes: bytes * 2 / 5}}}}
		return &topSample{at: at.Add(dt), status: st, metrics: promSamples{{name: "lastmile_units_total", value: total}}}
	}
	prev, cur := sample(0, 10, 0, true, 100), sample(2*time.Second, 30, 40e6, false, 140)
	f := &topFrame{cur: cur, prev: prev, dt: 2 * time.Second}
	got := strings.Join(f.peerLines(), "\n")
	for _, want := range []string{"peer 10.0.0.7:7941", "EXCLUDED", "2 in flight", "10 units/s", "20.0 MB/s", "spill share 50% of units on peers, 0.40 wire bytes an output byte"} {
		if !strings.Contains(got, want) {
			t.Errorf("top's peer lines lack %q:\n%s", want, got)
		}
	}
	cur.status.Peers.Peers[0].Quarantined = "unit ctr/part-0.parquet row group 3: column label: values differ"
	if got := strings.Join(f.peerLines(), "\n"); !strings.Contains(got, "10.0.0.7:7941 QUARANTINED") {
		t.Errorf("top's peer lines do not show the quarantined peer:\n%s", got)
	}
	if (&topFrame{cur: &topSample{status: &apiStatus{}}}).peerLines() != nil {
		t.Error("lines for a daemon without peers")
	}
}
