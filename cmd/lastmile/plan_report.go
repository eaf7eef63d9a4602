package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/lastmile/lastmile/bench"
	"github.com/lastmile/lastmile/plan"
)

// planAnswer is the prediction in plain words, printed first.
func planAnswer(name string, out planOutput) string {
	p, t := out.Prediction, out.Target
	var b strings.Builder
	fmt.Fprintf(&b, "To feed %s at %s samples/s each (%s samples/s in all), %s ", count(t.GPUs, "GPU", "GPUs"), commaRate(t.SamplesPerGPU), commaRate(p.HostRate), name)
	switch {
	case !p.Feasible:
		fmt.Fprintf(&b, "cannot be fed on this host: %s. ", strings.Join(p.Notes, "; "))
		if p.Peers > 0 {
			// The capacity counts the peers' output the host receives.
			fmt.Fprintf(&b, "With the host's %s and %s of %s it gives %s samples/s in all, %s of them from the peers (%.0f%% of the target): the trainers would wait about %.0f%% of their time. ",
				count(out.Resources.HostCores, "core", "cores"), count(p.Peers, "CPU peer", "CPU peers"), count(out.Resources.PeerCores, "core", "cores"),
				commaRate(p.Capacity), commaRate(min(p.PeerRate, p.Capacity)), 100*p.Capacity/p.HostRate, 100*p.Stall)
		} else {
			fmt.Fprintf(&b, "With %s it gives %s samples/s (%.0f%% of the target): the trainers would wait about %.0f%% of their time. ",
				count(min(p.CoresPerHost, out.Resources.HostCores), "core", "cores"), commaRate(p.Capacity), 100*p.Capacity/p.HostRate, 100*p.Stall)
		}
	case p.Peers > 0:
		all := fmt.Sprintf("all %d of the host's cores", p.CoresPerHost)
		if p.CoresPerHost == 1 {
			all = "the host's 1 core"
		}
		fmt.Fprintf(&b, "needs %s plus %s of %s, which send %s/s over the network and cost %.1f of the host's cores to receive; ",
			all, count(p.Peers, "CPU peer", "CPU peers"), count(out.Resources.PeerCores, "core", "cores"),
			bytesString(int64(p.NetworkBytesPerSec)), p.ReceiveCores)
		fmt.Fprintf(&b, "memory about %s; expected stall %.1f%%. ", bytesString(p.MemoryBytes), 100*p.Stall)
	default:
		fmt.Fprintf(&b, "needs %s per host (%.2f per GPU) and about %s of memory, without peers; expected stall %.1f%%. ",
			count(p.CoresPerHost, "core", "cores"), p.CoresPerGPU, bytesString(p.MemoryBytes), 100*p.Stall)
	}
	fmt.Fprintf(&b, "The binding resource is %s.", bindingString(p, out.Resources))
	if r := out.Measured; r != nil && len(r.Points) > 0 && p.CoresPerHost > int(r.Points[len(r.Points)-1].Cores) {
		fmt.Fprintf(&b, " Caution: that is more cores than were measured (%g): the curve beyond is extrapolated, and a part of the job that does not scale shows only in points measured with more cores (-measure-cores).",
			r.Points[len(r.Points)-1].Cores)
	}
	// The cores are the target over a rate per core: a point where the
	// process used well under its quota measured something else.
	if r := out.Measured; r != nil {
		for _, pt := range r.Points {
			if pt.Seconds > 0 && pt.Cores > 0 && pt.CPUSeconds/pt.Seconds < 0.7*pt.Cores {
				fmt.Fprintf(&b, " Caution: with %s the process used only %.2f of them (CPU GOT): its rate was held by something other than its CPU (the host's other work, or waits: too few or too small units, epoch boundaries), so the cores that rate gives are not what the CPU needs; measure again on a quiet host, or with more rows.",
					coresString(pt.Cores), pt.CPUSeconds/pt.Seconds)
				break
			}
		}
	}
	// Output comes a unit at a time: a window of few units measures
	// where their boundaries fell (bench.PlanConfig.MinUnits).
	if r := out.Measured; r != nil {
		for _, pt := range r.Points {
			if pt.Units < minPlanUnits {
				fmt.Fprintf(&b, " Caution: with %s only %d units were decoded in the window: the rate is mostly where their boundaries fell; measure longer (-seconds) or with smaller units (decode.max_unit_rows).",
					coresString(pt.Cores), pt.Units)
				break
			}
		}
	}
	// The curve is measured with a worker per core; a job decodes on no
	// more cores than its workers, whatever its CPU tokens.
	if r := out.Measured; r != nil && r.DecodeWorkers > 0 && r.DecodeWorkers < p.CoresPerHost {
		fmt.Fprintf(&b, " Caution: the spec sets decode.workers: %d, fewer than the %d cores this answer asks for: the job decodes on at most %s of them and would fall short of the target; set decode.workers: %d (or leave it out: lastmiled gives a job 2 workers per CPU token).",
			r.DecodeWorkers, p.CoresPerHost, count(r.DecodeWorkers, "core", "cores"), p.CoresPerHost)
	}
	if pm := out.Peer; peerProducedNothing(pm) {
		fmt.Fprintf(&b, " The measured peer %s is not counted: it returned no samples in its %gs window (%d units, %s), so it has no rate to size peers by; check that it can read the spec's inputs under the same roots, and measure again.",
			pm.Addr, pm.Seconds, pm.Units, count(pm.Workers, "worker", "workers"))
	}
	// A peer's rate is the curve at the peer's cores, or the measured
	// peer's put through the curve's serial share for another size.
	if r := out.Measured; r != nil && len(r.Points) > 0 && p.Peers > 0 {
		measured, what := r.Points[len(r.Points)-1].Cores, "the curve measured here"
		if out.Peer != nil {
			measured, what = float64(out.Peer.Workers), "the peer measured"
		}
		if float64(out.Resources.PeerCores) > measured {
			fmt.Fprintf(&b, " Caution: a peer's rate with its %d cores is extrapolated from %s with %g: measure a peer of that size (-peers-config).",
				out.Resources.PeerCores, what, measured)
		}
	}
	return b.String()
}

// minPlanUnits is the units a window of the curve is stretched to
// (bench.PlanConfig.MinUnits' default).
const minPlanUnits = 16

// bindingString names the binding resource with how much of it the target
// takes.
func bindingString(p plan.Prediction, res plan.Resources) string {
	u := 100 * p.Utilization[p.Binding]
	switch p.Binding {
	case plan.ResDecode, plan.ResOps:
		if u >= 1e11 {
			return fmt.Sprintf("%s: adding cores does not add throughput here", p.Binding)
		}
		if p.Peers > 0 {
			return fmt.Sprintf("%s: the host's %s all busy and the peers take the rest", p.Binding, count(res.HostCores, "core is", "cores are"))
		}
		return fmt.Sprintf("%s (%.0f%% of the host's %s at the target)", p.Binding, u, count(res.HostCores, "core", "cores"))
	case plan.ResRing:
		return fmt.Sprintf("the ring: packing batches, one batcher per job, is %.0f%% busy at the target", u)
	case plan.ResClient:
		return fmt.Sprintf("the trainer's client: taking batches is %.0f%% of a trainer's time at the target", u)
	case plan.ResNetwork:
		return fmt.Sprintf("the network: the peers' traffic is %.0f%% of %.0f Gbit/s", u, res.NetworkBytesPerSec*8/1e9)
	}
	return p.Binding
}

// writePlan prints the answer, then the prediction, the measurements,
// the stall curve and the validation as tables.
func writePlan(w io.Writer, out planOutput) {
	fmt.Fprintln(w, wrap(out.Answer, 78))
	writePrediction(w, out)
	writeMeasured(w, out.Measured)
	writeStall(w, out.Measured)
	if out.Validation != nil {
		writeValidation(w, out.Validation, out.Measured)
	}
	if out.Plot != "" {
		fmt.Fprintf(w, "\nplot: %s\n", out.Plot)
	}
}

// writePrediction prints the prediction as a table.
func writePrediction(w io.Writer, out planOutput) {
	p, t, m := out.Prediction, out.Target, out.Measured.Measured
	fmt.Fprintln(w, "\nPrediction")
	tw := newTable(w)
	fmt.Fprintf(tw, "  target\t%s × %s samples/s = %s samples/s\n", count(t.GPUs, "GPU", "GPUs"), commaRate(t.SamplesPerGPU), commaRate(p.HostRate))
	exact := "out of reach"
	if !math.IsInf(p.CoresExact, 1) {
		exact = fmt.Sprintf("%.2f exactly", p.CoresExact)
	}
	fmt.Fprintf(tw, "  cores per host\t%d (%s; the host gives %d)\n", p.CoresPerHost, exact, out.Resources.HostCores)
	fmt.Fprintf(tw, "  cores per GPU\t%.2f\n", p.CoresPerGPU)
	peers := "none needed"
	if out.Resources.PeerCores == 0 && p.Peers == 0 {
		peers = "none configured (-peer-cores)"
	}
	if pm := out.Peer; peerProducedNothing(pm) {
		peers = fmt.Sprintf("none counted: the measured peer %s returned no samples", pm.Addr)
	}
	if p.Peers > 0 {
		peers = fmt.Sprintf("%d of %s: %s samples/s, %s/s over the network, %.2f cores here to receive",
			p.Peers, count(out.Resources.PeerCores, "core", "cores"), commaRate(p.PeerRate), bytesString(int64(p.NetworkBytesPerSec)), p.ReceiveCores)
	}
	fmt.Fprintf(tw, "  peers\t%s\n", peers)
	if pm := out.Peer; pm != nil {
		fmt.Fprintf(tw, "  peer measured\t%s: %s, %s samples/s (%s per core) with %d units in flight; %.2f CPU s per GB to receive here; %.2f bytes on the wire a byte of output; round trip %v\n",
			pm.Addr, count(pm.Workers, "core", "cores"), commaRate(pm.SamplesPerSec), commaRate(pm.PerCore), pm.InFlight, pm.ReceiveCPUPerByte*1e9,
			pm.WirePerByte, pm.RoundTrip.Round(time.Millisecond))
	}
	arena := ""
	if m.ArenaBytes > 0 {
		arena = fmt.Sprintf(", unit arena %s", bytesString(m.ArenaBytes))
	}
	fmt.Fprintf(tw, "  memory\t%s (%s of %s, %s of %s, unit cache %s, shuffle window and side tables %s%s)\n", bytesString(p.MemoryBytes),
		count(t.GPUs, "ring", "rings"), bytesString(m.RingBytesPerGPU), count(p.UnitsInFlight, "unit in flight", "units in flight"), bytesString(m.UnitBytes),
		bytesString(m.CacheBytes), bytesString(m.OtherBytes), arena)
	fmt.Fprintf(tw, "  capacity at that size\t%s samples/s\n", commaRate(p.Capacity))
	fmt.Fprintf(tw, "  expected stall\t%.1f%%\n", 100*p.Stall)
	fmt.Fprintf(tw, "  binding resource\t%s\n", p.Binding)
	var us []string
	for _, n := range []string{plan.ResDecode, plan.ResOps, plan.ResRing, plan.ResClient, plan.ResNetwork} {
		if u, ok := p.Utilization[n]; ok {
			if u >= 1e9 {
				us = append(us, n+" out of reach")
				continue
			}
			us = append(us, fmt.Sprintf("%s %.0f%%", n, 100*u))
		}
	}
	fmt.Fprintf(tw, "  utilization at target\t%s\n", strings.Join(us, ", "))
	tw.Flush()
}

// writeMeasured prints the curve's points and the figures beside them.
func writeMeasured(w io.Writer, r *bench.PlanReport) {
	m := r.Measured
	fmt.Fprintf(w, "\nMeasured on this host (CPU limited by %s; first epoch, no unit cache)\n", r.Limit)
	tw := newTable(w)
	fmt.Fprintln(tw, "  CORES\tSAMPLES/S\tINPUT ROWS/S\tUNITS\tSECONDS\tCPU GOT\tCPU µs/SAMPLE\tPACK ms/BATCH")
	for _, pt := range r.Points {
		cpu := 0.0
		if pt.Samples > 0 {
			cpu = 1e6 * pt.CPUSeconds / float64(pt.Samples)
		}
		fmt.Fprintf(tw, "  %g\t%s\t%s\t%d\t%.1f\t%s\t%.2f\t%.3f\n", pt.Cores, commaRate(pt.Rate), commaRate(pt.InputRate), pt.Units, pt.Seconds,
			cpuGot(pt), cpu, 1e3*pt.PackPerBatch)
	}
	tw.Flush()
	fmt.Fprintf(w, "  fit: samples/s = min(k × %s / (1 + %.3f (k − 1)), %s) for k cores\n", commaRate(m.Curve.PerCore), m.Curve.Serial, ceilingString(m.Curve.Ceiling))
	fmt.Fprintf(w, "  decode is %.0f%% of a row's CPU (decode alone: %s rows/s on 1 core); %.0f bytes per sample; %s per unit in flight\n",
		100*m.DecodeShare, commaRate(float64(r.DecodeAlone.Rows)/max(r.DecodeAlone.Seconds, 1e-9)), m.BytesPerSample, bytesString(m.UnitBytes))
	if r.Client == "python" {
		fmt.Fprintf(w, "  client: %.1f µs per batch in the Python client's next() and torch() (lastmile cat --torch, batches waiting for it)\n", 1e6*m.ClientPerBatch)
	} else {
		fmt.Fprintf(w, "  client: %.1f µs per batch in the Go consumer's Next for a batch already in the ring (-python measures the Python client's)\n", 1e6*m.ClientPerBatch)
	}
	fmt.Fprintln(w, "  CPU GOT is the CPU the process got over the window: under its quota when other work shares the host")
}

// writeStall prints the simulated trainers' stall against load.
func writeStall(w io.Writer, r *bench.PlanReport) {
	fmt.Fprintf(w, "\nSimulated trainers against load (steps %s, %gs each; every rank's ring read by its own trainer)\n", distString(r), r.Seconds)
	tw := newTable(w)
	fmt.Fprintln(tw, "  LOAD\tSLOTS\tSAMPLES/S\tSTALL\t")
	for _, s := range r.Stall {
		check := ""
		if s.Load == 0.9 {
			check = "≤ 1%: met"
			if s.Stall > 0.01 {
				check = "> 1%: the ring is too shallow"
			}
		}
		fmt.Fprintf(tw, "  %.0f%%\t%d\t%s\t%.2f%%\t%s\n", 100*s.Load, s.Slots, commaRate(s.Rate), 100*s.Stall, check)
	}
	tw.Flush()
	if r.DepthNeeded > 0 {
		fmt.Fprintf(w, "  a ring of %d slots suffices at 90%% of capacity (ring: {slots: %d})\n", r.DepthNeeded, r.DepthNeeded)
	} else if deepest, failed := depthSearchFailed(r); failed {
		fmt.Fprintf(w, "  no ring depth tried, up to %d slots, brought the stall at 90%% of capacity to 1%% or under: a deeper ring does not absorb it (the pipeline's bursts, or the host's other work, hold it)\n", deepest)
	}
}

// depthSearchFailed reports whether the stall at 90% of capacity stayed
// above 1% at every depth measured (the spec's, then doubled up to 64
// slots: bench's deepen), and the deepest.
func depthSearchFailed(r *bench.PlanReport) (int, bool) {
	deepest, seen := 0, false
	for _, s := range r.Stall {
		if s.Load != 0.9 {
			continue
		}
		if s.Stall <= 0.01 {
			return 0, false
		}
		deepest, seen = max(deepest, s.Slots), true
	}
	return deepest, seen
}

// writeValidation prints a validation beside the prediction.
func writeValidation(w io.Writer, v *bench.Validation, r *bench.PlanReport) {
	fmt.Fprintf(w, "\nValidation at %s (CPU limited by %s)\n", count(v.Cores, "core", "cores"), v.Limit)
	within := "within ±10%"
	if !v.Within {
		within = "MISSED ±10%"
	}
	fmt.Fprintf(w, "  capacity    measured %s samples/s, predicted %s: %+.1f%% (%s)\n", commaRate(v.Capacity.Rate), commaRate(v.PredictedCapacity), 100*v.Error, within)
	fmt.Fprintf(w, "  cpu         the process got %s cores of the %d (measuring: %.2f per core); %.2f µs of CPU per sample (measuring: %.2f)\n",
		cpuGot(v.Capacity), v.Cores, v.MeasureCPUGot, 1e6*v.Capacity.CPUSeconds/max(float64(v.Capacity.Samples), 1), 1e6*r.CPUPerSample)
	if v.MeasureCPUGot > 0 {
		within = "within ±10%"
		if !v.NormalizedWithin {
			within = "MISSED ±10%"
		}
		fmt.Fprintf(w, "  full quota  measured %s samples/s, predicted %s, each scaled to the whole quota by the CPU got: %+.1f%% (%s)\n",
			commaRate(v.Capacity.Rate*float64(v.Cores)/v.CPUGot), commaRate(v.PredictedCapacity/v.MeasureCPUGot), 100*v.NormalizedError, within)
	}
	fmt.Fprintf(w, "  at target   trainers took %s of the %s samples/s target; stall %.2f%% (predicted %.1f%%)\n",
		commaRate(v.AtTarget.Rate), commaRate(v.TargetRate), 100*v.AtTarget.Stall, 100*v.PredictedStall)
}

func distString(r *bench.PlanReport) string {
	if r.Dist == "fixed" {
		return "of a fixed time"
	}
	return "drawn from the " + r.Dist + " distribution"
}

func ceilingString(c float64) string {
	if c <= 0 {
		return "∞"
	}
	return commaRate(c) + " (the batcher)"
}

// rateString prints a rate with thousands separators: 12,345.
func commaRate(v float64) string {
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return fmt.Sprint(v)
	}
	s := fmt.Sprintf("%.0f", v)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// wrap breaks text into lines of at most width columns, at spaces.
func wrap(text string, width int) string {
	var b strings.Builder
	n := 0
	for i, word := range strings.Fields(text) {
		l := len([]rune(word))
		if i > 0 && n+1+l > width {
			b.WriteByte('\n')
			n = 0
		} else if i > 0 {
			b.WriteByte(' ')
			n++
		}
		b.WriteString(word)
		n += l
	}
	return b.String()
}

// cpuGot is the CPU the process got over a point's window, in cores.
func cpuGot(p bench.PlanPoint) string {
	if p.Seconds <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", p.CPUSeconds/p.Seconds)
}

// coresString says x cores, singular for one.
func coresString(x float64) string {
	if x == 1 {
		return "1 core"
	}
	return fmt.Sprintf("%g cores", x)
}

// count says n things, singular or plural.
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
