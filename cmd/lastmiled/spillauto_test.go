package main_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// spillState is a job's spill decision as the GPU host's /metrics shows
// it: lastmile_spill_on (1 while spilling) and lastmile_spill_switches_total.
type spillState struct {
	on, known bool
	switches  float64
	reason    string
}

func spillOf(e *env, jobID string) spillState {
	m := metricsOf(e)
	var s spillState
	for _, line := range strings.Split(m, "\n") {
		if strings.HasPrefix(line, "lastmile_spill_on{") && strings.Contains(line, `job_id="`+jobID+`"`) {
			s.known, s.on = true, strings.HasSuffix(line, " 1")
			if i := strings.Index(line, `reason="`); i >= 0 {
				s.reason = line[i+len(`reason="`):]
				s.reason = s.reason[:strings.IndexByte(s.reason, '"')]
			}
		}
	}
	s.switches, _ = metricValue(m, "lastmile_spill_switches_total", `job_id="`+jobID+`"`)
	return s
}

// TestSpillAutoOnOff: with the automatic policy (peers.spill: auto),
// real processes, the trainers' pace switches spill on and off during
// one run. Trainers that read as fast as they can keep the rings empty
// with the local worker busy: spill turns on. Slow trainers keep the
// rings full: it turns off (after the policy's 2 s). Fast again: on
// again. The GPU host's /metrics and log report each switch, the peer
// computes units only while spill is on, and every epoch's rows arrive
// once with batches byte-identical to a run without peers.
func TestSpillAutoOnOff(t *testing.T) {
	// Long enough for the three phases: the slow one alone reads about 3
	// of the 20 epochs.
	long := func(inputs string) string { return strings.Replace(clusterSpec(inputs), "epochs: 3", "epochs: 20", 1) }
	if !raceBuild {
		// Without the race detector the daemon outruns the test's
		// trainers at the cluster's keep rate, so they never starve.
		// Keep few rows (much decoding for little to read) over many
		// more epochs: the producer is the bottleneck again, and the run
		// lasts the three phases.
		long = func(inputs string) string {
			s := strings.Replace(clusterSpec(inputs), "epochs: 3", "epochs: 400", 1)
			return strings.Replace(s, `rates: [{when: "label == 1", rate: 1.0}, {rate: 0.6}]`, `rates: [{when: "label == 1", rate: 0.1}, {rate: 0.05}]`, 1)
		}
	}
	want, wantRows := localRun(t, long(smallData))
	cl := newCluster(t, "auto", "", "")
	cl.start()
	j := cl.gpu.submit(long(cl.data), nil)

	var pace atomic.Int64 // each rank's sleep after a batch, ns
	type seen struct {
		s      spillState
		served int64
	}
	var phases []seen // at each switch the test waited for
	var offServed int64 = -1
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		defer pace.Store(0)
		wait := func(on bool, switches float64) bool {
			var s spillState
			ok := until(stop, 20*time.Second, func() bool {
				s = spillOf(cl.gpu, j.ID)
				return s.known && s.on == on && s.switches >= switches
			})
			if ok {
				phases = append(phases, seen{s, cl.peerUnits()})
			}
			return ok
		}
		if !wait(true, 1) { // fast trainers: starved
			return
		}
		pace.Store(int64(30 * time.Millisecond))
		if !wait(false, 2) { // slow trainers: fed
			return
		}
		// Off stays off while they are slow: once the units sent before
		// the switch are back, the peer gets no more.
		time.Sleep(200 * time.Millisecond)
		offServed = cl.peerUnits()
		time.Sleep(500 * time.Millisecond)
		offServed = cl.peerUnits() - offServed
		pace.Store(0)
		wait(true, 3) // fast again: starved again
	}()
	got, rows := pacedDigests(t, cl.gpu, j.ID, 2, func() time.Duration { return time.Duration(pace.Load()) })
	close(stop)
	<-done
	checkEpochs(t, "spill switched on and off", rows, wantRows)
	sameBatches(t, got, want)
	t.Logf("switches seen: %+v; units served while off and slow: %d", phases, offServed)
	if len(phases) < 3 {
		t.Fatalf("spill switched %d of the 3 times the run's pace asked for (on, off, on): %+v", len(phases), phases)
	}
	if phases[0].s.reason != "trainers starve with every local worker busy" || phases[2].s.reason != phases[0].s.reason {
		t.Errorf("spill turned on for %q and %q", phases[0].s.reason, phases[2].s.reason)
	}
	if r := phases[1].s.reason; r != "rings stay full" && r != "local workers idle" {
		t.Errorf("spill turned off for %q", r)
	}
	if phases[1].served < 1 {
		t.Errorf("the peer served %d units while spill was on", phases[1].served)
	}
	if offServed != 0 {
		t.Errorf("the peer served %d units while spill was off", offServed)
	}
	if end := cl.peerUnits(); end <= phases[2].served {
		t.Errorf("the peer served no unit after spill turned on again (%d, then %d)", phases[2].served, end)
	}
	// While off, the spill workers kept their units here, counted by why.
	var kept float64
	for _, why := range []string{"no stall seen yet", "waiting for the stall to last", "trainers are fed", "local workers idle"} {
		v, _ := metricValue(metricsOf(cl.gpu), "lastmile_spill_declined_total", `job_id="`+j.ID+`"`, `reason="`+why+`"`)
		kept += v
	}
	if kept == 0 {
		t.Errorf("no unit was kept here for spill being off (lastmile_spill_declined_total)")
	}
	log := cl.gpu.log.String()
	if !strings.Contains(log, `msg="spill switched" job=job job_id=`+j.ID+` on=true`) ||
		!strings.Contains(log, `msg="spill switched" job=job job_id=`+j.ID+` on=false`) {
		t.Errorf("the GPU host's log does not show spill switching on and off")
	}
}
