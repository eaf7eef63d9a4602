package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// runTop shows lastmiled's jobs and ranks live. Every frame is computed from
// two samples: GET /v1/status and /v1/jobs on the control socket (states,
// ring fill, cursors) and the Prometheus text of /metrics (counters, turned
// into rates over the interval). Without /metrics, the per-job rates come
// from the jobs' progress counters and the per-rank ones are left out.
func runTop(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("top", stderr)
	socket := socketFlag(fs)
	interval := fs.Duration("interval", time.Second, "time between frames (and between the two samples of -once)")
	once := fs.Bool("once", false, "print one frame without ANSI escapes and exit")
	all := fs.Bool("all", false, "also show jobs that ended (done, failed, canceled)")
	metrics := fs.String("metrics", "", `lastmiled's metrics address host:port, or "off" (default: the one GET /v1/status reports)`)
	tokenFile := fs.String("metrics-token-file", "", "the bearer token file lastmiled wants for the jobs' series (its metrics_token_file); without it, rates come from the jobs' progress counters")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: lastmile top [flags]\n\nShows lastmiled's jobs and ranks live: rows/s, MB/s, ring fill, how long\ntrainers waited on empty rings (the GPU stall), how long the producer\nwaited on full rings, work units in flight and errors. docs/top.md explains\nthe columns. Ctrl-C quits.\n\nFlags:")
		printFlags(fs)
	}
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	if *interval < 10*time.Millisecond {
		return fmt.Errorf("%w: -interval %v: want at least 10ms", errUsage, *interval)
	}
	t := &topper{c: newAPIClient(*socket), metricsAddr: *metrics, tokenFile: *tokenFile, hc: &http.Client{Timeout: 5 * time.Second}}
	prev, err := t.sample(ctx)
	if err != nil {
		return err
	}
	tick := time.NewTicker(*interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			if !*once {
				return nil // Ctrl-C is how one leaves top
			}
			return ctx.Err()
		case <-tick.C:
		}
		cur, err := t.sample(ctx)
		if err != nil {
			if ctx.Err() != nil && !*once {
				return nil // interrupted mid-sample
			}
			if *once {
				return err
			}
			// Keep going while the daemon restarts: show why.
			fmt.Fprintf(stdout, "\x1b[H%s  %v\x1b[K\n\x1b[J", now().Format("15:04:05"), err)
			continue
		}
		f := buildFrame(prev, cur, *all)
		if *once {
			return f.write(stdout, false)
		}
		// Redraw in place: home, each line cleared to its end, the rest of
		// the screen cleared (no flicker of a full clear).
		var buf bytes.Buffer
		if err := f.write(&buf, true); err != nil {
			return err
		}
		screen := "\x1b[H" + strings.ReplaceAll(buf.String(), "\n", "\x1b[K\n") + "\x1b[J"
		if _, err := io.WriteString(stdout, screen); err != nil {
			return err
		}
		prev = cur
	}
}

type topper struct {
	c           *apiClient
	metricsAddr string
	tokenFile   string // the bearer token for the jobs' series (lastmiled's metrics_token_file)
	hc          *http.Client
}

// topSample is what one refresh reads.
type topSample struct {
	at         time.Time
	status     *apiStatus
	jobs       []apiJob
	metrics    promSamples // nil when /metrics was not read
	metricsErr error
}

func (t *topper) sample(ctx context.Context) (*topSample, error) {
	s := &topSample{at: now()}
	var err error
	if s.status, err = t.c.status(ctx); err != nil {
		return nil, err
	}
	if s.jobs, err = t.c.jobs(ctx); err != nil {
		return nil, err
	}
	addr := t.metricsAddr
	if addr == "" {
		addr = s.status.Config.Metrics
	}
	if addr == "" || addr == "off" {
		s.metricsErr = errors.New("metrics off")
		return s, nil
	}
	s.metrics, s.metricsErr = t.scrape(ctx, addr)
	if s.metricsErr == nil && len(s.jobs) > 0 && !s.metrics.anyLabel("job_id") {
		// The jobs' series go only to a scrape with lastmiled's metrics
		// token: rates from the jobs' progress counters instead.
		s.metrics, s.metricsErr = nil, errors.New("needs -metrics-token-file")
	}
	return s, nil
}

func (t *topper) scrape(ctx context.Context, addr string) (promSamples, error) {
	url := addr
	if !strings.Contains(url, "://") {
		url = "http://" + url + "/metrics"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	if t.tokenFile != "" {
		tok, err := os.ReadFile(t.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("-metrics-token-file: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	}
	resp, err := t.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	return parseProm(resp.Body)
}

// Metrics of lastmiled's /metrics (daemon/metrics.go) that top reads. They
// are labeled job (the name) and job_id; the per-rank ones also rank. Rows
// and bytes are counted per job: top splits a job's rates between its ranks
// in proportion to the ranks' batches.
const (
	mRows      = "lastmile_rows_total"
	mBytes     = "lastmile_bytes_total"
	mBatches   = "lastmile_batches_total"                     // per rank
	mEmptyWait = "lastmile_consumer_empty_wait_seconds_total" // per rank
	mFullWait  = "lastmile_producer_full_wait_seconds_total"  // per rank
	mUnits     = "lastmile_units_in_flight"
	mErrors    = "lastmile_job_errors_total"
)

// topRow is one line of the table: a job (rank -1) or one of its ranks.
type topRow struct {
	label, state         string
	rank                 int
	rowsPS, mbPS         float64 // NaN: unknown
	fill, held, slots    int     // ring occupancy, slots production holds; slots 0: not a ring row
	stall, full          float64 // fractions of the interval; NaN: unknown
	waitingNow, attached bool
	units                float64 // NaN: unknown
	errors               float64 // NaN: unknown
	next                 string
}

type topFrame struct {
	cur      *topSample
	prev     *topSample
	dt       time.Duration
	rows     []topRow
	fromJobs bool // rates from the jobs' progress counters (no /metrics)
	hidden   int  // ended jobs left out
}

// ended reports whether a job state is final.
func ended(state string) bool {
	return state == "done" || state == "failed" || state == "canceled"
}

func buildFrame(prev, cur *topSample, all bool) *topFrame {
	f := &topFrame{cur: cur, prev: prev, dt: cur.at.Sub(prev.at)}
	fc := &frameRates{prev: prev, cur: cur, secs: f.dt.Seconds(), metrics: cur.metrics != nil && prev.metrics != nil}
	if fc.secs <= 0 {
		fc.secs = math.NaN()
	}
	f.fromJobs = !fc.metrics
	prevJobs := map[string]apiJob{}
	for _, j := range prev.jobs {
		prevJobs[j.ID] = j
	}
	for _, j := range cur.jobs {
		if !all && ended(j.State) {
			f.hidden++
			continue
		}
		p, seen := prevJobs[j.ID]
		jr := fc.jobRow(j, p, seen)
		ranks := fc.rankRows(j, p, &jr)
		f.rows = append(f.rows, jr)
		f.rows = append(f.rows, ranks...)
	}
	return f
}

// frameRates turns two samples into a frame's rates.
type frameRates struct {
	prev, cur *topSample
	secs      float64 // between the samples; NaN if not positive
	metrics   bool    // both samples have /metrics
}

// rate is a counter's increase per second between the samples, divided by
// scale; NaN without /metrics, for a new series, or after a daemon restart.
func (fc *frameRates) rate(name string, lbl map[string]string, scale float64) float64 {
	if !fc.metrics {
		return math.NaN()
	}
	a, ok1 := fc.prev.metrics.sum(name, lbl)
	b, ok2 := fc.cur.metrics.sum(name, lbl)
	if !ok1 || !ok2 || b < a { // a new series, or counters restarted with the daemon
		return math.NaN()
	}
	return (b - a) / fc.secs / scale
}

func (fc *frameRates) gauge(name string, lbl map[string]string) float64 {
	if fc.cur.metrics == nil {
		return math.NaN()
	}
	v, ok := fc.cur.metrics.sum(name, lbl)
	if !ok {
		return math.NaN()
	}
	return v
}

// jobRow is a job's row; p is its previous sample, if seen. The job's FULL
// is the sum of its ranks': one producer fills the rings in turn, so its
// waits on them add up to the time it waited (the mean would hide a rank
// it always waits on). STALL is set by rankRows.
func (fc *frameRates) jobRow(j, p apiJob, seen bool) topRow {
	jl := map[string]string{"job_id": j.ID}
	jr := topRow{label: fmt.Sprintf("%s (%s)", j.Name, shortID(j.ID)), state: j.State, rank: -1,
		rowsPS: fc.rate(mRows, jl, 1), mbPS: fc.rate(mBytes, jl, 1e6),
		stall: math.NaN(), full: fc.rate(mFullWait, jl, 1),
		units: fc.gauge(mUnits, jl), errors: fc.gauge(mErrors, jl)}
	if !fc.metrics {
		// The progress counters restart with each production run.
		jr.rowsPS, jr.mbPS, jr.full = math.NaN(), math.NaN(), math.NaN()
		if seen && p.Progress.Rows <= j.Progress.Rows && p.Progress.Bytes <= j.Progress.Bytes {
			jr.rowsPS = float64(j.Progress.Rows-p.Progress.Rows) / fc.secs
			jr.mbPS = float64(j.Progress.Bytes-p.Progress.Bytes) / fc.secs / 1e6
			if d := j.Progress.FullWaitSeconds - p.Progress.FullWaitSeconds; d >= 0 {
				jr.full = d / fc.secs
			}
		}
		jr.units = float64(j.Progress.UnitsInFlight)
	}
	return jr
}

// rankRows are the rows of j's ranks: the job's rates split between them
// by the batches each got; the job row's STALL is their mean.
func (fc *frameRates) rankRows(j, p apiJob, jr *topRow) []topRow {
	prevRings := map[int]apiRing{}
	for _, r := range p.Rings {
		prevRings[r.Rank] = r
	}
	rows := make([]topRow, len(j.Rings))
	batches := make([]float64, len(j.Rings))
	var batchSum, stallSum float64
	stallN := 0
	for i, r := range j.Rings {
		rl := map[string]string{"job_id": j.ID, "rank": strconv.Itoa(r.Rank)}
		rows[i] = topRow{label: fmt.Sprintf("  rank %d", r.Rank), state: r.State, rank: r.Rank,
			fill: r.Occupancy, held: r.Held, slots: r.Slots,
			stall: fc.rate(mEmptyWait, rl, 1), full: fc.rate(mFullWait, rl, 1),
			waitingNow: r.ConsumerWaiting, attached: r.ConsumerAttached,
			units: math.NaN(), errors: math.NaN(), next: r.Next.String()}
		batches[i] = fc.rate(mBatches, rl, 1)
		if !fc.metrics {
			batches[i] = math.NaN()
			if q, ok := prevRings[r.Rank]; ok && q.Generation == r.Generation && q.Tail <= r.Tail {
				batches[i] = float64(r.Tail-q.Tail) / fc.secs
			}
		}
		batchSum += batches[i]
		if !math.IsNaN(rows[i].stall) {
			stallSum += rows[i].stall
			stallN++
		}
	}
	for i := range rows {
		share := math.NaN() // NaN unless every rank's batch rate is known
		if batchSum > 0 {
			share = batches[i] / batchSum
		} else if batchSum == 0 {
			share = 0
		}
		rows[i].rowsPS = jr.rowsPS * share
		rows[i].mbPS = jr.mbPS * share
	}
	if stallN > 0 {
		jr.stall = stallSum / float64(stallN)
	}
	return rows
}

// promSample is one line of the Prometheus text format.
type promSample struct {
	name   string
	labels map[string]string
	value  float64
}

type promSamples []promSample

// anyLabel reports whether a sample has label name.
func (ps promSamples) anyLabel(name string) bool {
	for _, p := range ps {
		if _, ok := p.labels[name]; ok {
			return true
		}
	}
	return false
}

// sum adds the samples of name whose labels include want; ok is false when
// there is none.
func (ps promSamples) sum(name string, want map[string]string) (float64, bool) {
	var s float64
	ok := false
next:
	for _, p := range ps {
		if p.name != name {
			continue
		}
		for k, v := range want {
			if p.labels[k] != v {
				continue next
			}
		}
		s += p.value
		ok = true
	}
	return s, ok
}

// parseProm reads the Prometheus text exposition format (version 0.0.4):
// comments and blank lines are skipped; a sample is NAME[{labels}] VALUE
// [TIMESTAMP].
func parseProm(r io.Reader) (promSamples, error) {
	var out promSamples
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		p, err := parsePromLine(line)
		if err != nil {
			return nil, fmt.Errorf("metrics line %d: %w", n, err)
		}
		out = append(out, p)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read metrics: %w", err)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

func parsePromLine(line string) (promSample, error) {
	p := promSample{labels: map[string]string{}}
	i := strings.IndexAny(line, "{ \t")
	if i <= 0 {
		return p, fmt.Errorf("no value in %q", line)
	}
	p.name = line[:i]
	rest := line[i:]
	if rest[0] == '{' {
		rest = rest[1:]
		for {
			rest = strings.TrimLeft(rest, " \t,")
			if rest == "" {
				return p, fmt.Errorf("unterminated labels in %q", line)
			}
			if rest[0] == '}' {
				rest = rest[1:]
				break
			}
			eq := strings.IndexByte(rest, '=')
			if eq <= 0 || len(rest) < eq+2 || rest[eq+1] != '"' {
				return p, fmt.Errorf("bad label in %q", line)
			}
			key := strings.TrimSpace(rest[:eq])
			rest = rest[eq+2:]
			var val strings.Builder
			closed := false
			for j := 0; j < len(rest); j++ {
				c := rest[j]
				if c == '\\' && j+1 < len(rest) {
					j++
					switch rest[j] {
					case 'n':
						val.WriteByte('\n')
					default:
						val.WriteByte(rest[j])
					}
					continue
				}
				if c == '"' {
					rest = rest[j+1:]
					closed = true
					break
				}
				val.WriteByte(c)
			}
			if !closed {
				return p, fmt.Errorf("unterminated label value in %q", line)
			}
			p.labels[key] = val.String()
		}
	}
	fields := strings.Fields(rest)
	if len(fields) < 1 || len(fields) > 2 {
		return p, fmt.Errorf("want a value and an optional timestamp in %q", line)
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return p, fmt.Errorf("bad value in %q", line)
	}
	p.value = v
	return p, nil
}

// shortID is the start of a job's id that top shows (lastmile jobs lists
// the whole ids).
func shortID(id string) string {
	if len(id) > 6 {
		return id[:6]
	}
	return id
}
