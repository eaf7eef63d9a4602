package daemon

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	cpupeer "github.com/lastmile/lastmile/peer"
)

// Metrics of spilling and serving (docs/peers.md lists them).
var (
	peerLabels       = []string{"peer"}
	descPeerUnits    = prometheus.NewDesc("lastmile_peer_units_total", "Units this host spilled that the peer computed.", peerLabels, nil)
	descPeerBytes    = prometheus.NewDesc("lastmile_peer_bytes_total", "Output bytes received from the peer.", peerLabels, nil)
	descPeerWire     = prometheus.NewDesc("lastmile_peer_wire_bytes_total", "Bytes received from the peer for those outputs, as they travelled (compact wire form).", peerLabels, nil)
	descPeerFailures = prometheus.NewDesc("lastmile_peer_failures_total", "Spilled units the peer failed (died, hung, cut off, corrupt, refused for a reason other than being busy); each ran here or elsewhere.", peerLabels, nil)
	descPeerCorrupt  = prometheus.NewDesc("lastmile_peer_corrupt_total", "Unit streams from the peer whose checksum or shape was wrong.", peerLabels, nil)
	descPeerBusy     = prometheus.NewDesc("lastmile_peer_busy_total", "Units the peer refused because it was full.", peerLabels, nil)
	descPeerRecv     = prometheus.NewDesc("lastmile_peer_receive_seconds_total", "Wall time from each unit's ticket to its checked output, the peer's work included.", peerLabels, nil)
	descPeerRecvCPU  = prometheus.NewDesc("lastmile_peer_receive_cpu_seconds_total", "This host's CPU receiving the peer's units: the receiving goroutines' own (messages, assembly, checksum), gRPC's transport goroutine not included.", peerLabels, nil)
	descPeerAbandon  = prometheus.NewDesc("lastmile_peer_abandoned_total", "Units given up on at the peer before it answered: a hedge here finished first, or the job stopped. Not failures.", peerLabels, nil)
	descPeerLatency  = prometheus.NewDesc("lastmile_peer_latency_seconds", "Moving mean of a unit's round trip to the peer.", peerLabels, nil)
	descPeerInFlight = prometheus.NewDesc("lastmile_peer_units_in_flight", "Units at the peer now.", peerLabels, nil)
	descPeerHealthy  = prometheus.NewDesc("lastmile_peer_healthy", "1 unless the peer is excluded after a failure, or quarantined.", peerLabels, nil)
	descPeerMismatch = prometheus.NewDesc("lastmile_peer_mismatch_total", "Units from the peer, computed here as well to verify them (peers.verify), whose values differed; the local output was used.", peerLabels, nil)
	descPeerQuarant  = prometheus.NewDesc("lastmile_peer_quarantined", "1 once the peer sent a unit whose values differed from this host's: it gets no units until this daemon restarts.", peerLabels, nil)
	descSpilled      = prometheus.NewDesc("lastmile_spill_units_total", "The job's units computed on peers.", jobLabels, nil)
	descSpillBytes   = prometheus.NewDesc("lastmile_spill_bytes_total", "Output bytes of the job's spilled units.", jobLabels, nil)
	descSpillLocal   = prometheus.NewDesc("lastmile_spill_fallbacks_total", "The job's units that failed on peers and ran here.", jobLabels, nil)
	descSpillKept    = prometheus.NewDesc("lastmile_spill_declined_total", "The job's units a spill worker kept local, by reason.", []string{"job", "job_id", "reason"}, nil)
	descSpillOn      = prometheus.NewDesc("lastmile_spill_on", "1 while the job spills; reason: why it last switched.", []string{"job", "job_id", "reason"}, nil)
	descSpillFlips   = prometheus.NewDesc("lastmile_spill_switches_total", "Times the job's spill decision switched.", jobLabels, nil)
	descSpillVerify  = prometheus.NewDesc("lastmile_spill_verified_total", "The job's spilled units computed here as well and compared with the peer's output (peers.verify).", jobLabels, nil)
	descSpillHedged  = prometheus.NewDesc("lastmile_spill_hedged_total", "The job's spilled units also started here because their peer was slow, by which side's result was used.", []string{"job", "job_id", "winner"}, nil)
	descServed       = prometheus.NewDesc("lastmile_peer_served_units_total", "Units this host computed as a peer.", nil, nil)
	descServedBytes  = prometheus.NewDesc("lastmile_peer_served_bytes_total", "Output bytes this host sent as a peer.", nil, nil)
	descServedCPU    = prometheus.NewDesc("lastmile_peer_compute_seconds_total", "Time this host spent computing units as a peer.", nil, nil)
	descRefused      = prometheus.NewDesc("lastmile_peer_refused_total", "Units and TLS handshakes this host refused as a peer, by reason.", []string{"reason"}, nil)
	descServing      = prometheus.NewDesc("lastmile_peer_serving_units", "Units this host has admitted as a peer and not yet answered.", nil, nil)
	descCanceled     = prometheus.NewDesc("lastmile_peer_canceled_total", "Units this host admitted as a peer whose requester gave them up before the answer.", nil, nil)
	descSideMemory   = prometheus.NewDesc("lastmile_peer_side_table_bytes", "Memory the join side tables of the jobs this host keeps compiled as a peer hold, counted against peer.max_memory.", nil, nil)
)

type peerCollector struct{ d *Daemon }

func (c peerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descPeerUnits, descPeerBytes, descPeerWire, descPeerFailures, descPeerCorrupt, descPeerBusy,
		descPeerRecv, descPeerRecvCPU, descPeerAbandon, descPeerLatency, descPeerInFlight, descPeerHealthy, descPeerMismatch, descPeerQuarant, descSpilled, descSpillBytes,
		descSpillLocal, descSpillKept, descSpillOn, descSpillFlips, descSpillHedged, descSpillVerify, descServed, descServedBytes, descServedCPU,
		descRefused, descServing, descCanceled, descSideMemory} {
		ch <- d
	}
}

func (c peerCollector) Collect(ch chan<- prometheus.Metric) {
	d := c.d
	m := func(desc *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, t, v, labels...)
	}
	if d.pool != nil {
		for _, p := range d.pool.Stats() {
			m(descPeerUnits, prometheus.CounterValue, float64(p.Units), p.Addr)
			m(descPeerBytes, prometheus.CounterValue, float64(p.Bytes), p.Addr)
			m(descPeerWire, prometheus.CounterValue, float64(p.WireBytes), p.Addr)
			m(descPeerFailures, prometheus.CounterValue, float64(p.Failures), p.Addr)
			m(descPeerCorrupt, prometheus.CounterValue, float64(p.Corrupt), p.Addr)
			m(descPeerBusy, prometheus.CounterValue, float64(p.Refused), p.Addr)
			m(descPeerRecv, prometheus.CounterValue, p.RecvSeconds, p.Addr)
			m(descPeerRecvCPU, prometheus.CounterValue, p.RecvCPUSeconds, p.Addr)
			m(descPeerAbandon, prometheus.CounterValue, float64(p.Abandoned), p.Addr)
			m(descPeerLatency, prometheus.GaugeValue, p.Latency.Seconds(), p.Addr)
			m(descPeerInFlight, prometheus.GaugeValue, float64(p.InFlight), p.Addr)
			m(descPeerHealthy, prometheus.GaugeValue, b2f(p.Healthy), p.Addr)
			m(descPeerMismatch, prometheus.CounterValue, float64(p.Mismatches), p.Addr)
			m(descPeerQuarant, prometheus.GaugeValue, b2f(p.Quarantined != ""), p.Addr)
		}
	}
	for _, j := range d.jobsSnapshot() {
		j.mu.Lock()
		sp := j.spill
		var hedged, won, verified int64
		if r := j.liveLocked(); r != nil {
			hedged, won, verified = r.prog.UnitsHedged.Load(), r.prog.HedgesWon.Load(), r.prog.UnitsVerified.Load()
		}
		hedged, won, verified = hedged+j.base.hedged, won+j.base.hedgesWon, verified+j.base.verified
		j.mu.Unlock()
		if sp == nil {
			continue
		}
		m(descSpillHedged, prometheus.CounterValue, float64(won), j.name, j.id, "here")
		m(descSpillHedged, prometheus.CounterValue, float64(hedged-won), j.name, j.id, "peer")
		st := sp.Stats()
		m(descSpilled, prometheus.CounterValue, float64(st.Spilled.Load()), j.name, j.id)
		m(descSpillBytes, prometheus.CounterValue, float64(st.Bytes.Load()), j.name, j.id)
		m(descSpillLocal, prometheus.CounterValue, float64(st.Fallbacks.Load()), j.name, j.id)
		m(descSpillVerify, prometheus.CounterValue, float64(verified), j.name, j.id)
		for why, n := range st.Declined() {
			m(descSpillKept, prometheus.CounterValue, float64(n), j.name, j.id, why)
		}
		on, _, why, flips := sp.PolicyState()
		m(descSpillOn, prometheus.GaugeValue, b2f(on), j.name, j.id, why)
		m(descSpillFlips, prometheus.CounterValue, float64(flips), j.name, j.id)
	}
	if d.peerSrv != nil {
		st := d.peerSrv.Stats()
		m(descServed, prometheus.CounterValue, float64(st.Units.Load()))
		m(descServedBytes, prometheus.CounterValue, float64(st.Bytes.Load()))
		m(descServedCPU, prometheus.CounterValue, time.Duration(st.ComputeNanos.Load()).Seconds())
		m(descServing, prometheus.GaugeValue, float64(d.peerSrv.InFlight()))
		m(descCanceled, prometheus.CounterValue, float64(st.Canceled.Load()))
		m(descSideMemory, prometheus.GaugeValue, float64(d.peerSrv.SideMemory()))
		for reason, n := range map[string]int64{"busy": st.RefusedBusy.Load(), "outside_roots": st.RefusedOutside.Load(),
			"permission": st.RefusedPermission.Load(),
			"version":    st.RefusedVersion.Load(), "bad_ticket": st.RefusedBad.Load(), "draining": st.RefusedDraining.Load(),
			"build":                     st.RefusedBuild.Load(),
			cpupeer.ReasonNoCertificate: st.RefusedNoCert.Load(), cpupeer.ReasonUntrusted: st.RefusedUntrusted.Load(),
			cpupeer.ReasonHandshake: st.RefusedHandshake.Load(), cpupeer.ReasonNoHello: st.RefusedNoHello.Load()} {
			m(descRefused, prometheus.CounterValue, float64(n), reason)
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
