package main

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// topWidth is the terminal width a frame fits: every line, the table's
// included, is at most this many characters.
const topWidth = 80

func (f *topFrame) write(w io.Writer, ansi bool) error {
	bold, reset := "", ""
	if ansi {
		bold, reset = "\x1b[1m", "\x1b[0m"
	}
	var b strings.Builder
	for i, l := range f.headerLines() {
		l = fit(l)
		if i == 0 {
			l = bold + l + reset
		}
		b.WriteString(l + "\n")
	}
	b.WriteString("\n")
	hidden := ""
	if f.hidden > 0 {
		hidden = fmt.Sprintf("(%d ended jobs not shown; -all shows them)", f.hidden)
	}
	if len(f.rows) == 0 {
		b.WriteString(strings.TrimSpace("no running jobs " + hidden))
		b.WriteString("\n")
		_, err := io.WriteString(w, b.String())
		return err
	}
	f.table().write(&b, bold, reset)
	if hidden != "" {
		b.WriteString("\n" + hidden + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// headerLines are the daemon's lines above the table: who and when, what
// it holds, where the rates come from, and its CPU peers.
func (f *topFrame) headerLines() []string {
	st := f.cur.status
	up := time.Duration(st.UptimeSeconds * float64(time.Second)).Round(time.Second)
	state := ""
	if st.Draining {
		state = "  DRAINING"
	}
	mem := bytesString(st.Memory.Reserved)
	if st.Memory.Total > 0 {
		mem += " of " + bytesString(st.Memory.Total)
	}
	lines := []string{
		fmt.Sprintf("lastmiled %s  pid %d  up %s  %s%s", st.Version, st.PID, shortDuration(up), f.cur.at.Format("15:04:05"), state),
		fmt.Sprintf("cpu %d/%d busy  memory %s  jobs %d running, %d pending",
			st.CPU.Busy, st.CPU.Workers, mem, st.Jobs.Running, st.Jobs.Pending),
	}
	src := fmt.Sprintf("rates over %s from %s", f.dt.Round(time.Millisecond), "/metrics")
	if f.fromJobs {
		why := "no /metrics"
		if f.cur.metricsErr != nil {
			why = "no /metrics: " + f.cur.metricsErr.Error()
		}
		src = fmt.Sprintf("rates over %s from job counters (%s)", f.dt.Round(time.Millisecond), why)
	}
	return append(append(lines, src), f.peerLines()...)
}

// table lays the rows out in topWidth columns: the job names are cut to
// what the other columns leave.
func (f *topFrame) table() *table {
	t := &table{
		right: []bool{false, false, true, true, true, true, true, true, true, false},
		gap:   []int{0, 2, 2, 1, 1, 1, 1, 1, 1, 2},
		width: topWidth,
	}
	t.add("JOB / RANK", "STATE", "ROWS/S", "MB/S", "RING", "STALL", "FULL", "UNITS", "ERR", "NEXT")
	for _, r := range f.rows {
		t.add(r.label, r.state, rateString(r.rowsPS), mbString(r.mbPS), ringString(r), stallString(r), pct(r.full),
			num(r.units), num(r.errors), r.next)
	}
	return t
}

// ringString is a rank's ring fill: published batches its trainer has not
// released, plus the slots production holds (filling them, or waiting for
// the rest of their step), over the slots: "3+1/4" is full for production
// (FULL counts its wait), "0+1/4" empty for the trainer (STALL).
func ringString(r topRow) string {
	if r.slots == 0 {
		return ""
	}
	if r.held > 0 {
		return fmt.Sprintf("%d+%d/%d", r.fill, r.held, r.slots)
	}
	return fmt.Sprintf("%d/%d", r.fill, r.slots)
}

func stallString(r topRow) string {
	if r.rank >= 0 {
		switch {
		case !r.attached:
			return "detached"
		case math.IsNaN(r.stall) && r.waitingNow:
			return "waiting"
		}
	}
	return pct(r.stall)
}

// cut shortens a cell to w characters, marking the cut; a job's label
// "name (id)" loses the end of its name, not its id.
func cut(c string, w int) string {
	r := []rune(c)
	if len(r) <= w {
		return c
	}
	if i := strings.LastIndex(c, " ("); i > 0 && strings.HasSuffix(c, ")") {
		name, id := []rune(c[:i]), c[i:]
		if keep := w - utf8.RuneCountInString(id) - 1; keep > 0 && keep < len(name) {
			return string(name[:keep]) + "…" + id
		}
	}
	return string(r[:w-1]) + "…"
}

// fit cuts a line to topWidth characters, marking the cut.
func fit(s string) string {
	if utf8.RuneCountInString(s) <= topWidth {
		return s
	}
	r := []rune(s)
	return string(r[:topWidth-1]) + "…"
}

// table lays out columns two spaces apart, left- or right-aligned; the
// first row is the header. A width above 0 bounds the lines: when two
// spaces do not fit, column i comes gap[i] spaces after the previous one,
// and the first column is cut ("…") to what is left. No trailing blanks.
type table struct {
	right []bool
	gap   []int
	width int
	rows  [][]string
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) write(b *strings.Builder, bold, reset string) {
	width := make([]int, len(t.right))
	for _, r := range t.rows {
		for i, c := range r {
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	natural := 0
	for _, w := range width {
		natural += w + 2
	}
	narrow := t.width > 0 && natural-2 > t.width // then the gaps of t.gap
	gap := func(i int) int {
		if narrow && i < len(t.gap) {
			return t.gap[i]
		}
		return 2
	}
	if t.width > 0 {
		rest := 0
		for i := 1; i < len(width); i++ {
			rest += gap(i) + width[i]
		}
		width[0] = max(min(width[0], t.width-rest), 10)
	}
	for n, r := range t.rows {
		var line strings.Builder
		for i, c := range r {
			c = cut(c, width[i])
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(c))
			if i > 0 {
				line.WriteString(strings.Repeat(" ", gap(i)))
			}
			if t.right[i] {
				line.WriteString(pad + c)
			} else {
				line.WriteString(c + pad)
			}
		}
		s := strings.TrimRight(line.String(), " ")
		if n == 0 {
			s = bold + s + reset
		}
		b.WriteString(s + "\n")
	}
}

func rateString(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return countString(int64(math.Round(v)))
}

func mbString(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.1f", v)
}

func pct(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", math.Min(v, 1)*100)
}

func num(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}
