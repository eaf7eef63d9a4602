package main

import (
	"fmt"
	"math"
)

// peerLines are top's lines for the daemon's CPU peers: health, units in
// flight, units/s and MB/s received, and the share of all units computed
// on peers over the interval; and what the daemon serves as a peer.
func (f *topFrame) peerLines() []string {
	cur, prev := f.cur.status.Peers, (*apiStatusPeers)(nil)
	if f.prev != nil && f.prev.status != nil {
		prev = f.prev.status.Peers
	}
	if cur == nil {
		return nil
	}
	secs := f.dt.Seconds()
	var lines []string
	if s := cur.Served; cur.Serving != "" && s != nil {
		lines = append(lines, fmt.Sprintf("serving as peer on %s: %d units, %s sent, refused %d busy, %d outside roots",
			cur.Serving, s.Units, bytesString(s.Bytes), s.RefusedBusy, s.RefusedOutside))
	}
	before := map[string][2]int64{}
	if prev != nil {
		for _, p := range prev.Peers {
			before[p.Addr] = [2]int64{p.Units, p.Bytes}
		}
	}
	var peerUnits float64
	for _, p := range cur.Peers {
		b := before[p.Addr]
		ups, mbps := float64(p.Units-b[0])/secs, float64(p.Bytes-b[1])/secs/1e6
		peerUnits += float64(p.Units - b[0])
		health := "healthy"
		if !p.Healthy {
			health = "EXCLUDED"
		}
		lines = append(lines, fmt.Sprintf("peer %s %s, %d in flight, %.0f units/s, %.1f MB/s, %d failed", p.Addr, health, p.InFlight,
			ups, mbps, p.Failures))
	}
	if len(cur.Peers) > 0 && f.cur.metrics != nil && f.prev != nil && f.prev.metrics != nil {
		now, ok1 := f.cur.metrics.sum("lastmile_units_total", nil)
		then, ok2 := f.prev.metrics.sum("lastmile_units_total", nil)
		share := math.NaN()
		if ok1 && ok2 && now > then {
			share = peerUnits / (now - then)
		}
		lines = append(lines, "spill share "+pct(share)+" of units on peers")
	}
	return lines
}
