package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/lastmile/lastmile/peer"
)

// now is the clock of the commands' ages and uptimes; tests set it.
var now = time.Now

func runJobs(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("jobs", stderr)
	socket := socketFlag(fs)
	asJSON := fs.Bool("json", false, "print the daemon's answer as JSON")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: lastmile jobs [flags]\n\nLists lastmiled's jobs: yours, or every job for root and the admin group.\n\nFlags:")
		printFlags(fs)
	}
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	c := newAPIClient(*socket)
	if *asJSON {
		var raw json.RawMessage
		if _, err := c.do(ctx, http.MethodGet, "/v1/jobs", nil, &raw); err != nil {
			return err
		}
		return writeJSON(stdout, raw)
	}
	jobs, err := c.jobs(ctx)
	if err != nil {
		return err
	}
	if len(jobs) == 0 {
		_, err := fmt.Fprintln(stdout, "no jobs")
		return err
	}
	tw := newTable(stdout)
	fmt.Fprintln(tw, "ID\tNAME\tSTATE\tOWNER\tRANKS\tATTACHED\tWEIGHT\tEPOCH\tROWS\tMEMORY\tAGE\tERROR")
	for _, j := range jobs {
		attached := 0
		for _, r := range j.Rings {
			if r.ConsumerAttached {
				attached++
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d/%d\t%d\t%s\t%s\t%s\t%s\t%s\n",
			j.ID, j.Name, j.State, j.Owner, j.WorldSize, attached, len(j.Rings), j.Weight,
			epochString(j), countString(j.Progress.Rows), bytesString(j.MemoryBytes), age(j.Created), oneLine(j.Error))
	}
	return tw.Flush()
}

func runCancel(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("cancel", stderr)
	socket := socketFlag(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: lastmile cancel [flags] ID|NAME...\n\nCancels jobs: production stops, and trainers get the error after the\nbatches already published.\n\nFlags:")
		printFlags(fs)
	}
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("%w: want the id or name of the job to cancel", errUsage)
	}
	c := newAPIClient(*socket)
	for _, id := range fs.Args() {
		j, err := c.cancel(ctx, id)
		if err != nil {
			return fmt.Errorf("cancel %s: %w", id, err)
		}
		fmt.Fprintf(stdout, "job %s %q: %s\n", j.ID, j.Name, j.State)
	}
	return nil
}

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("status", stderr)
	socket := socketFlag(fs)
	asJSON := fs.Bool("json", false, "print the daemon's answer as JSON")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: lastmile status [flags] [ID|NAME]\n\nShows lastmiled's status, or one job with its rings.\n\nFlags:")
		printFlags(fs)
	}
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 1 {
		return fmt.Errorf("%w: want at most one job id", errUsage)
	}
	c := newAPIClient(*socket)
	path := "/v1/status"
	if fs.NArg() == 1 {
		path = jobPath(fs.Arg(0))
	}
	var raw json.RawMessage
	if _, err := c.do(ctx, http.MethodGet, path, nil, &raw); err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(stdout, raw)
	}
	if fs.NArg() == 1 {
		var j apiJob
		if err := json.Unmarshal(raw, &j); err != nil {
			return fmt.Errorf("decode job: %w", err)
		}
		if err := printJob(stdout, &j); err != nil {
			return err
		}
		if err := printJobGPU(stdout, raw); err != nil {
			return err
		}
		return printJobAdvice(stdout, raw)
	}
	var st apiStatus
	if err := json.Unmarshal(raw, &st); err != nil {
		return fmt.Errorf("decode status: %w", err)
	}
	return printStatus(stdout, &st)
}

func printStatus(w io.Writer, st *apiStatus) error {
	tw := newTable(w)
	state := "running"
	if st.Draining {
		state = "DRAINING (shutting down: no new jobs or attaches)"
	}
	up := time.Duration(st.UptimeSeconds * float64(time.Second)).Round(time.Second)
	fmt.Fprintf(tw, "lastmiled\t%s, pid %d, up %s, %s\n", st.Version, st.PID, up, state)
	if len(st.RestartNeeded) > 0 {
		fmt.Fprintf(tw, "restart needed\tthe config file changes %s: a reload cannot apply them (systemctl restart lastmiled)\n", strings.Join(st.RestartNeeded, ", "))
	}
	fmt.Fprintf(tw, "socket\t%s\n", st.Config.Socket)
	fmt.Fprintf(tw, "state dir\t%s\n", st.Config.StateDir)
	fmt.Fprintf(tw, "shm dir\t%s\n", st.Config.ShmDir)
	if m := st.Config.Metrics; m == "" || m == "off" {
		fmt.Fprintf(tw, "metrics\toff (the daemon's metrics setting)\n")
	} else {
		fmt.Fprintf(tw, "metrics\thttp://%s/metrics\n", m)
	}
	j := st.Jobs
	fmt.Fprintf(tw, "jobs\t%d: %d pending, %d running, %d done, %d failed, %d canceled\n", j.Total, j.Pending, j.Running, j.Done, j.Failed, j.Canceled)
	fmt.Fprintf(tw, "cpu\t%d of %d decode workers busy (%d CPUs available)\n", st.CPU.Busy, st.CPU.Workers, st.CPU.Available)
	limit := "no limit"
	if st.Memory.Total > 0 {
		limit = bytesString(st.Memory.Total)
	}
	perJob := "no per-job limit"
	if st.Config.MemoryPerJob > 0 {
		perJob = bytesString(st.Config.MemoryPerJob) + " per job"
	}
	fmt.Fprintf(tw, "memory\t%s reserved of %s (%s)\n", bytesString(st.Memory.Reserved), limit, perJob)
	if st.Memory.RSS > 0 {
		heap := "heap limit: GOMEMLIMIT"
		if st.Memory.HeapLimit > 0 {
			heap = "heap limited to " + bytesString(st.Memory.HeapLimit) + ": reserved + peer budget + runtime"
		}
		fmt.Fprintf(tw, "process	%s resident (%s)\n", bytesString(st.Memory.RSS), heap)
	}
	printPeers(tw, st)
	return tw.Flush()
}

func printJob(w io.Writer, j *apiJob) error {
	tw := newTable(w)
	fmt.Fprintf(tw, "job\t%s %q\n", j.ID, j.Name)
	fmt.Fprintf(tw, "state\t%s\n", j.State)
	if j.Error != "" {
		fmt.Fprintf(tw, "error\t%s\n", strings.Join(strings.Fields(j.Error), " "))
	}
	if j.Unsaved != "" {
		fmt.Fprintf(tw, "WARNING\t%s (retrying every second)\n", oneLine(j.Unsaved))
	}
	fmt.Fprintf(tw, "owner\tuid %d, gid %d\n", j.Owner, j.GID)
	epochs := fmt.Sprint(j.Epochs)
	if j.Epochs == 0 {
		epochs = "without end"
	}
	shape := fmt.Sprintf("%d ranks", j.WorldSize)
	if j.Hosts > 1 {
		local := j.WorldSize / j.Hosts
		shape = fmt.Sprintf("%d ranks on %d hosts; this is host %d, ranks %d to %d", j.WorldSize, j.Hosts, j.Host, j.Host*local, j.Host*local+local-1)
	}
	fmt.Fprintf(tw, "shape\t%s, %s epochs, weight %d\n", shape, epochs, j.Weight)
	if j.PlanDigest != "" {
		fmt.Fprintf(tw, "plan\t%s\n", j.PlanDigest)
	}
	if why, ok := countsStates[j.Counts]; ok {
		fmt.Fprintf(tw, "counts\t%s: %s\n", j.Counts, why)
	}
	fmt.Fprintf(tw, "spec\t%s\n", j.SpecHash)
	times := "created " + timeString(j.Created)
	if j.Started != nil {
		times += ", started " + timeString(j.Started)
	}
	if j.Ended != nil {
		times += ", ended " + timeString(j.Ended)
	}
	fmt.Fprintf(tw, "times\t%s\n", times)
	p := j.Progress
	fmt.Fprintf(tw, "produced\tepoch %d: %s rows, %d batches, %s\n", p.Epoch, countString(p.Rows), p.Batches, bytesString(p.Bytes))
	fmt.Fprintf(tw, "work\t%d units done, %d in flight; decode %.1fs, pack %.1fs, waited on full rings %.1fs\n",
		p.UnitsDone, p.UnitsInFlight, p.DecodeSeconds, p.PackSeconds, p.FullWaitSeconds)
	if line := prunedLine(p); line != "" {
		fmt.Fprintf(tw, "pruned\t%s\n", line)
	}
	if line := latePagesLine(p); line != "" {
		fmt.Fprintf(tw, "late pages\t%s\n", line)
	}
	if line := spillLine(j); line != "" {
		fmt.Fprintf(tw, "spill\t%s\n", line)
	}
	if line := arenaLine(p); line != "" {
		fmt.Fprintf(tw, "unit arena\t%s\n", line)
	}
	fmt.Fprintf(tw, "memory\t%s\n", bytesString(j.MemoryBytes))
	fmt.Fprintf(tw, "restarts\t%d\n", j.GenerationRestarts)
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(j.Rings) == 0 {
		msg := "\nno rings yet"
		if j.State == "done" || j.State == "failed" || j.State == "canceled" {
			msg = "\nno rings: the job has ended and its rings were removed"
		}
		_, err := fmt.Fprintln(w, msg)
		return err
	}
	fmt.Fprintln(w)
	tw = newTable(w)
	fmt.Fprintln(tw, "RANK\tRING\tSTATE\tNEXT\tPRODUCED\tRING FILL\tCONSUMER")
	for _, r := range j.Rings {
		consumer := "none"
		if r.ConsumerAttached {
			consumer = fmt.Sprintf("pid %d", r.ConsumerPID)
			if r.ConsumerWaiting {
				consumer += ", waiting for data"
			}
		}
		fmt.Fprintf(tw, "%d\t%s/%s\t%s\t%s\t%s\t%d/%d\t%s\n", r.Rank, r.Dir, r.Name, r.State,
			r.Next, r.Produced, r.Occupancy, r.Slots, consumer)
	}
	return tw.Flush()
}

// prunedLine says what the job's filters left out of its plan, or ""
// when nothing.
func prunedLine(p apiProgress) string {
	if p.FilesPruned == 0 && p.UnitsPruned == 0 && p.RowsRuledOut == 0 && p.RowsDeleted == 0 {
		return ""
	}
	s := fmt.Sprintf("%s unopened, %s unread, by the filters",
		count(int(p.FilesPruned), "input file", "input files"), count(int(p.UnitsPruned), "unit", "units"))
	if p.RowsRuledOut > 0 {
		s += fmt.Sprintf("; %s ruled out undecoded by the page index", count(int(p.RowsRuledOut), "row", "rows"))
	}
	if p.RowsDeleted > 0 {
		s += fmt.Sprintf("; %s an epoch dropped as deleted by the tables' deletes", count(int(p.RowsDeleted), "row", "rows"))
	}
	return s
}

// arenaLine says how many of the job's units went into its unit arena
// (ring.arena), or "" when none did either way.
func arenaLine(p apiProgress) string {
	if p.ArenaUnits+p.ArenaUnitsToHeap == 0 {
		return ""
	}
	s := fmt.Sprintf("%s decoded into it, their batches uncopied", count(int(p.ArenaUnits), "unit", "units"))
	if p.ArenaUnitsToHeap > 0 {
		s += fmt.Sprintf("; %s to the heap for want of a free chunk, copied (trainers holding batches long, or units of very mixed sizes)",
			count(int(p.ArenaUnitsToHeap), "unit", "units"))
	}
	return s
}

// latePagesLine says what the job's late columns (decoded for kept rows
// only) did with their data pages, or "" when it has none.
func latePagesLine(p apiProgress) string {
	total := p.LatePages + p.LatePagesUnread
	if total == 0 {
		return ""
	}
	line := fmt.Sprintf("%d read, %d unread (%.0f%%, %s not decompressed)",
		p.LatePages, p.LatePagesUnread, 100*float64(p.LatePagesUnread)/float64(total), bytesString(p.LateUnreadBytes))
	if p.LateFetchDeferred { // only object storage defers its fetches; local files say nothing
		line += "; from object storage fetched by the pages kept rows need"
	}
	return line
}

// tableWriter is a tabwriter whose lines lose their trailing blanks.
type tableWriter struct {
	*tabwriter.Writer
	buf bytes.Buffer
	out io.Writer
}

func newTable(w io.Writer) *tableWriter {
	t := &tableWriter{out: w}
	t.Writer = tabwriter.NewWriter(&t.buf, 0, 0, 2, ' ', 0)
	return t
}

func (t *tableWriter) Flush() error {
	if err := t.Writer.Flush(); err != nil {
		return err
	}
	lines := strings.SplitAfter(t.buf.String(), "\n")
	t.buf.Reset()
	for _, l := range lines {
		if strings.HasSuffix(l, "\n") {
			l = strings.TrimRight(l[:len(l)-1], " ") + "\n"
		}
		if _, err := io.WriteString(t.out, l); err != nil {
			return err
		}
	}
	return nil
}

func epochString(j apiJob) string {
	if j.Epochs == 0 {
		return fmt.Sprintf("%d/-", j.Progress.Epoch)
	}
	return fmt.Sprintf("%d/%d", j.Progress.Epoch, j.Epochs)
}

func age(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return shortDuration(now().Sub(*t))
}

func timeString(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339) + " (" + age(t) + " ago)"
}

// shortDuration prints at most two units: 45s, 3m12s, 2h5m, 3d4h.
func shortDuration(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	s := int64(d / time.Second)
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm%ds", s/60, s%60)
	case s < 86400:
		return fmt.Sprintf("%dh%dm", s/3600, s%3600/60)
	}
	return fmt.Sprintf("%dd%dh", s/86400, s%86400/3600)
}

// bytesString prints a byte count in binary units: 512 B, 1.5 KiB, 288.5 MiB.
func bytesString(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v := float64(n)
	for _, u := range []string{"KiB", "MiB", "GiB", "TiB"} {
		v /= unit
		if v < unit || u == "TiB" {
			return fmt.Sprintf("%.1f %s", v, u)
		}
	}
	panic("BUG: unreachable")
}

// countString prints a count with a decimal suffix: 950, 12.3k, 3.93M, 1.2G.
func countString(n int64) string {
	v := float64(n)
	switch {
	case n < 1000:
		return fmt.Sprint(n)
	case n < 1e6:
		return trimFloat(v/1e3) + "k"
	case n < 1e9:
		return trimFloat(v/1e6) + "M"
	}
	return trimFloat(v/1e9) + "G"
}

func trimFloat(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return s
}

// printPeers shows the daemon's CPU peers, and what it serves as one.
func printPeers(w io.Writer, st *apiStatus) {
	p := st.Peers
	if p == nil {
		return
	}
	if p.Compute != "" {
		fmt.Fprintf(w, "compute identity\t%s (a peer computes only for requesters of the same)\n", p.Compute)
	}
	if s := p.Served; p.Serving != "" && s != nil {
		fmt.Fprintf(w, "serving as peer\ton %s: %d in flight; %d units, %s sent, %d failed; refused: %d busy, %d draining, %d outside roots, %d bad tickets, %d of another build\n",
			p.Serving, s.InFlight, s.Units, bytesString(s.Bytes), s.Failures, s.RefusedBusy, s.RefusedDraining, s.RefusedOutside, s.RefusedBad,
			s.RefusedBuild)
	}
	for _, x := range p.Peers {
		fmt.Fprintf(w, "peer %s\t%s; %d in flight, %.1f units/s, %s/s; in all %d units, %s received (%s on the wire), %d failed (%d corrupt), %d abandoned; latency %v\n",
			x.Addr, peerHealth(x), x.InFlight, x.UnitsPerSec, bytesString(int64(x.BytesPerSec)), x.Units, bytesString(x.Bytes),
			bytesString(x.WireBytes), x.Failures, x.Corrupt, x.Abandoned, x.Latency.Round(time.Millisecond))
	}
}

// peerHealth says whether a peer gets units, and if not, until when and
// why.
func peerHealth(x peer.PeerStats) string {
	switch {
	case x.Quarantined != "":
		who := ""
		if x.Subject != "" {
			who = " (" + x.Subject + ")"
		}
		if x.Mismatches == 0 { // quarantined by its certificate, another peer's
			return fmt.Sprintf("QUARANTINED%s until this daemon restarts: %s", who, oneLine(x.Quarantined))
		}
		return fmt.Sprintf("QUARANTINED%s until this daemon restarts, %d units whose values differed from this host's; the first: %s",
			who, x.Mismatches, oneLine(x.Quarantined))
	case x.Healthy:
		return "healthy"
	case !x.ExcludedTill.IsZero():
		return "EXCLUDED until " + x.ExcludedTill.Local().Format("15:04:05") + ": " + lastErrorLine(x.LastError)
	default:
		return "EXCLUDED until it answers a probe: " + lastErrorLine(x.LastError)
	}
}

// lastErrorLine is a peer's last error on one line, shortened, and what
// to do about it (a refused certificate's), whole.
func lastErrorLine(s string) string {
	err, fix := peer.SplitFix(s)
	if fix == "" {
		return oneLine(err)
	}
	return oneLine(err) + "; to fix: " + fix
}

// spillLine is a job's spill decision and share, or "" without peers.
func spillLine(j *apiJob) string {
	s, p := j.Spill, j.Progress
	if s == nil {
		return ""
	}
	state := "off"
	if s.On {
		state = "on"
	}
	line := fmt.Sprintf("%s since %s (%s; %d switches); %s of units on peers (%d of %d)", state,
		s.Since.Local().Format("15:04:05"), s.Reason, s.Switches, pct(ratio(p.UnitsSpilled, p.UnitsDone)), p.UnitsSpilled, p.UnitsDone)
	if p.UnitsHedged > 0 {
		line += fmt.Sprintf(", %d hedged here (%d won here)", p.UnitsHedged, p.HedgesWon)
	}
	if p.UnitsVerified > 0 {
		line += fmt.Sprintf(", %d verified here (%d differed)", p.UnitsVerified, p.VerifyMismatches)
	}
	return line
}

func ratio(a, b int64) float64 {
	if b <= 0 {
		return math.NaN()
	}
	return float64(a) / float64(b)
}

// countsStates explain the job view's counts (a job on several hosts).
var countsStates = map[string]string{
	"counting":   "this host counts the rows its share of the units yields, before the first batch",
	"exchanging": "this host's share is counted; the trainers relay the other hosts' counts",
	"known":      "every unit's rows are known, and the units dealt to hosts",
}
