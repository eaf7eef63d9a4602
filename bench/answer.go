package bench

import (
	"fmt"
	"io"
	"strings"

	"github.com/lastmile/lastmile/decode"
)

// Answer says in plain words what the parts of a bench run that ran
// (nil: not run) mean for a capacity planner: rows per core, the ring's
// bandwidth, what a CPU peer adds. It comes first in `lastmile bench`'s
// output; the developer targets come last, in their own section.
func Answer(spine *Report, pipe *PipelineReport, spill *SpillReport) string {
	var s []string
	if spine != nil {
		if d, ok := spine.find(decode.PathOwn.String(), 1); ok && d.Seconds > 0 {
			s = append(s, fmt.Sprintf("Decoding the generated sample (%d columns, %s) runs at about %s rows/s (%.0f MB/s) per core.",
				spine.Data.Columns, spine.Data.Compression, groupDigits(float64(d.Rows)/d.Seconds), d.MBps()))
		}
		if h := spine.Handoff.BytesPerSecond(); h > 0 {
			s = append(s, fmt.Sprintf("The ring hands %.1f GB/s to a trainer process: far more than a pipeline produces, so it binds only for very light pipelines.", h/1e9))
		}
	}
	if pipe != nil && pipe.Workers > 0 && pipe.Pipeline.Seconds > 0 {
		per := func(v float64) string { return groupDigits(v / float64(pipe.Workers)) }
		s = append(s, fmt.Sprintf("The pipeline %s keeps %.0f%% of its rows and gives about %s samples/s per core (%s input rows/s per core) in its first epoch, %s samples/s per core once its unit cache serves later epochs (%d workers).",
			pipe.Spec, 100*pipe.FirstEpoch.KeptFrac, per(pipe.FirstEpoch.OutRowsPS), per(pipe.FirstEpoch.InRowsPS), per(pipe.Pipeline.OutRowsPS), pipe.Workers))
	}
	if spill != nil && spill.LocalSeconds > 0 {
		s = append(s, fmt.Sprintf("A CPU peer of one core makes a 1-core host %.2fx faster on %s; receiving its output costs %.2f CPU s per GB here, against %.2f s to compute it.",
			spill.Speedup, spill.Spec, spill.RecvCPUPerGB, spill.LocalCPUPerGB))
	}
	s = append(s, "For the cores and peers a training job needs per GPU, measured on your own spec and inputs: lastmile plan SPEC.")
	return strings.Join(s, " ")
}

// Targets returns the spill measurement's target as a Target.
func (r *SpillReport) Targets() []Target {
	t := []Target{{Name: "spill: 1 core + a 1-core peer / 1 core alone (the spec's units)", Value: r.Speedup, Op: ">=", Target: r.Target, Met: r.Met}}
	if r.LocalSlicedSeconds > 0 && r.SpillSeconds > 0 {
		t = append(t, Target{Name: "  the same against 1 core alone on the peer run's smaller units", Value: r.LocalSlicedSeconds / r.SpillSeconds,
			Op: ">=", Target: r.Target, Info: true})
	}
	return t
}

// WriteTargets prints targets, one a line, with whether each was met.
func WriteTargets(w io.Writer, targets []Target) {
	for _, t := range targets {
		mark := "met"
		if t.Info {
			mark = "(reported beside the target)"
		} else if !t.Met {
			mark = "MISSED"
		}
		fmt.Fprintf(w, "  %-78s %7.3f %s %.2f  %s\n", t.Name, t.Value, t.Op, t.Target, mark)
	}
}

// groupDigits prints a rate rounded, with thousands separators.
func groupDigits(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 && s[i-1] != '-' {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
