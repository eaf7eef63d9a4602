package main

import (
	"fmt"
	"math"
)

// peerLines are top's lines for the daemon's CPU peers: health, units in
// flight, units/s and MB/s of output received, the share of all units
// computed on peers over the interval and the bytes their output took on
// the wire for each byte; and what the daemon serves as a peer.
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
		lines = append(lines, fmt.Sprintf("serving as peer on %s: %d in flight, %d units, %s sent, refused %d busy, %d draining, %d outside roots",
			cur.Serving, s.InFlight, s.Units, bytesString(s.Bytes), s.RefusedBusy, s.RefusedDraining, s.RefusedOutside))
	}
	before := map[string][3]int64{}
	if prev != nil {
		for _, p := range prev.Peers {
			before[p.Addr] = [3]int64{p.Units, p.Bytes, p.WireBytes}
		}
	}
	var peerUnits, out, wire float64
	for _, p := range cur.Peers {
		b := before[p.Addr]
		ups, mbps := float64(p.Units-b[0])/secs, float64(p.Bytes-b[1])/secs/1e6
		peerUnits += float64(p.Units - b[0])
		out, wire = out+float64(p.Bytes-b[1]), wire+float64(p.WireBytes-b[2])
		health := "healthy"
		switch {
		case p.Quarantined != "":
			health = "QUARANTINED"
		case !p.Healthy:
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
		line := "spill share " + pct(share) + " of units on peers"
		if out > 0 {
			line += fmt.Sprintf(", %.2f wire bytes an output byte", wire/out)
		}
		lines = append(lines, line)
	}
	return lines
}
