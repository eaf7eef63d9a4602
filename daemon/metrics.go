package daemon

import (
	"net/http"
	"runtime"
	"strconv"
	"time"

	"github.com/lastmile/lastmile/shm"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// collector reads the jobs' live counters at scrape time: nothing is
// counted twice and the engine's hot path pays nothing for metrics.
// Counters of a job add up the runs of its production (restarts included)
// since this daemon started.
type collector struct {
	d *Daemon
}

var (
	jobLabels  = []string{"job", "job_id"}
	rankLabels = []string{"job", "job_id", "rank"}

	descRows        = prometheus.NewDesc("lastmile_rows_total", "Rows packed into the job's rings (padding included).", jobLabels, nil)
	descBytes       = prometheus.NewDesc("lastmile_bytes_total", "Payload bytes packed into the job's rings.", jobLabels, nil)
	descBatches     = prometheus.NewDesc("lastmile_batches_total", "Batches published into the rank's ring.", rankLabels, nil)
	descUnits       = prometheus.NewDesc("lastmile_units_total", "Work units decoded.", jobLabels, nil)
	descInFlight    = prometheus.NewDesc("lastmile_units_in_flight", "Work units being decoded now.", jobLabels, nil)
	descStage       = prometheus.NewDesc("lastmile_stage_seconds_total", "Time spent per stage (decode: summed over workers; pack: copying into ring slots, waits on full rings excluded).", []string{"job", "job_id", "stage"}, nil)
	descOccupancy   = prometheus.NewDesc("lastmile_ring_occupancy", "Published batches the rank's consumer has not released yet.", rankLabels, nil)
	descSlots       = prometheus.NewDesc("lastmile_ring_slots", "Slots of the rank's ring.", rankLabels, nil)
	descAttached    = prometheus.NewDesc("lastmile_consumer_attached", "1 if a trainer holds the rank's ring.", rankLabels, nil)
	descEmptyWait   = prometheus.NewDesc("lastmile_consumer_empty_wait_seconds_total", "Time the rank's trainer waited on an empty ring (the input stall that idles its GPU), sampled every 10ms from the ring's consumer_waiting word.", rankLabels, nil)
	descFullWait    = prometheus.NewDesc("lastmile_producer_full_wait_seconds_total", "Time production waited on the rank's full ring (the trainer is the bottleneck).", rankLabels, nil)
	descErrors      = prometheus.NewDesc("lastmile_job_errors_total", "Production runs of the job that failed.", jobLabels, nil)
	descRestarts    = prometheus.NewDesc("lastmile_job_restarts_total", "Times the job's production was restarted (daemon restarts, trainers resuming from older cursors).", jobLabels, nil)
	descState       = prometheus.NewDesc("lastmile_job_state", "1 for the job's current state.", []string{"job", "job_id", "state"}, nil)
	descCPUWait     = prometheus.NewDesc("lastmile_cpu_wait_seconds_total", "Time the job's workers waited for a CPU token (the weighted fair share at work).", jobLabels, nil)
	descCPUHeld     = prometheus.NewDesc("lastmile_cpu_seconds_total", "Time the job's workers held CPU tokens.", jobLabels, nil)
	descWeight      = prometheus.NewDesc("lastmile_job_weight", "The job's CPU weight.", jobLabels, nil)
	descMemory      = prometheus.NewDesc("lastmile_job_memory_bytes", "The job's charge against the memory budget (rings plus in-flight units) while its rings exist; 0 once they are removed or the job failed or was canceled.", jobLabels, nil)
	descTokens      = prometheus.NewDesc("lastmile_cpu_tokens", "Decode tokens shared by the jobs.", nil, nil)
	descTokensBusy  = prometheus.NewDesc("lastmile_cpu_tokens_busy", "Decode tokens held now.", nil, nil)
	descMemReserved = prometheus.NewDesc("lastmile_memory_reserved_bytes", "Memory reserved by jobs whose rings exist.", nil, nil)
	descMemTotal    = prometheus.NewDesc("lastmile_memory_limit_bytes", "The total memory budget (0: none).", nil, nil)
	descUp          = prometheus.NewDesc("lastmile_daemon_start_time_seconds", "When this lastmiled started.", []string{"version"}, nil)
	descBuild       = prometheus.NewDesc("lastmile_build_info", "Always 1: the lastmiled build, by its version and the Go version it was built with.", []string{"version", "goversion"}, nil)
	descOpIn        = prometheus.NewDesc("lastmile_op_rows_in_total", "Rows that reached the job's row-dropping op (filter, sample, semi or anti join, nulls or on_long skip), by its field in the spec.", []string{"job", "job_id", "op"}, nil)
	descOpOut       = prometheus.NewDesc("lastmile_op_rows_out_total", "Rows the job's row-dropping op kept: out/in is a sample's rate, a filter's selectivity.", []string{"job", "job_id", "op"}, nil)
	descPersistFail = prometheus.NewDesc("lastmile_state_persist_failures_total", "Writes of a job's state record that failed (each is retried every second; lastmile status JOB says since when a job's record is behind).", nil, nil)
	descLatePages   = prometheus.NewDesc("lastmile_late_pages_total", "Data pages of the columns the job decodes only for the rows its pipeline keeps: read (decoded) or unread (no kept row in the page, by its offset index: neither decompressed nor, with deferred prefetch, fetched).", []string{"job", "job_id", "outcome"}, nil)
	descLateBytes   = prometheus.NewDesc("lastmile_late_unread_bytes_total", "Compressed bytes of the job's unread late pages (lastmile_late_pages_total{outcome=\"unread\"}).", jobLabels, nil)
	descRuledOut    = prometheus.NewDesc("lastmile_rows_ruled_out_total", "Rows of the units read that the job's filters ruled out by the page index (ColumnIndex), never decoded.", jobLabels, nil)
	descDeleted     = prometheus.NewDesc("lastmile_rows_deleted", "Rows of the job's planned units that its Iceberg tables' deletes remove, each epoch.", jobLabels, nil)
	descArenaUnits  = prometheus.NewDesc("lastmile_arena_units_total", "Units of a job with a unit arena (ring.arena) decoded into it (place=\"arena\": its batches name them, uncopied) or to the heap for want of a free chunk (place=\"heap\": their batches copied).", []string{"job", "job_id", "place"}, nil)
	descLateDefer   = prometheus.NewDesc("lastmile_late_fetch_deferred", "1 while the job fetches its late columns from object storage by the pages its kept rows need (a quarter or more of those pages went unread), 0 while it prefetches whole column chunks.", jobLabels, nil)
	descBatchWait   = prometheus.NewDesc("lastmile_consumer_batch_wait_seconds", "The time the rank's trainer waited on an empty ring for each batch it consumed (0: it did not wait), sampled every 10ms (docs/daemon.md).", rankLabels, nil)
)

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRows, descBytes, descBatches, descUnits, descInFlight, descStage,
		descOccupancy, descSlots, descAttached, descEmptyWait, descFullWait, descErrors, descRestarts, descState,
		descCPUWait, descCPUHeld, descWeight, descMemory, descTokens, descTokensBusy, descMemReserved, descMemTotal, descUp,
		descBuild, descBatchWait, descOpIn, descOpOut, descPersistFail, descLatePages, descLateBytes, descLateDefer, descRuledOut, descDeleted, descArenaUnits, descRequestsRefused} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	d := c.d
	m := metricSink(ch)
	capacity, busy := d.sched.Stats()
	m.gauge(descTokens, float64(capacity))
	m.gauge(descTokensBusy, float64(busy))
	d.mu.Lock()
	reserved := d.reservedLocked()
	d.mu.Unlock()
	m.gauge(descMemReserved, float64(reserved))
	m.gauge(descMemTotal, float64(d.Config().Memory.Total))
	m.counter(descPersistFail, float64(d.persistFailures.Load()))
	d.refused.collect(m)
	m.gauge(descUp, float64(d.started.UnixNano())/1e9, d.version)
	m.gauge(descBuild, 1, d.version, runtime.Version())

	for _, j := range d.jobsSnapshot() {
		c.collectJob(m, j)
	}
}

// metricSink sends constant metrics, made at scrape time, to a Collect
// channel.
type metricSink chan<- prometheus.Metric

// counter sends a counter of value v.
func (ch metricSink) counter(desc *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, v, labels...)
}

// gauge sends a gauge of value v.
func (ch metricSink) gauge(desc *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, labels...)
}

// collectJob sends the metrics of one job. It reads the job's counters
// under j.mu, adding the current run's to those of the runs before it,
// and sends them once the lock is released.
func (c collector) collectJob(m metricSink, j *Job) {
	d := c.d
	infos, ok := j.ringInfos()
	j.mu.Lock()
	tot := j.base
	published := append([]uint64(nil), j.published...)
	fullWait := append([]time.Duration(nil), j.fullWait...)
	var inFlight int64
	deferred := false
	if r := j.liveLocked(); r != nil {
		tot.add(r.prog)
		inFlight = r.prog.UnitsInFlight.Load()
		deferred = r.prog.LatePages().Deferred
		for i, st := range r.prog.RingStats() {
			if i < len(published) {
				published[i] += st.Published
				fullWait[i] += st.FullWait
			}
		}
	}
	state, errs, restarts, mem := j.state, j.runErrors, j.restarts, j.chargedLocked()
	opRows := j.opRowsLocked()
	j.mu.Unlock()
	for _, o := range opRows {
		m.counter(descOpIn, float64(o.In), j.name, j.id, o.Op)
		m.counter(descOpOut, float64(o.Out), j.name, j.id, o.Op)
	}
	l := []string{j.name, j.id}
	m.counter(descRows, float64(tot.rows), l...)
	m.counter(descBytes, float64(tot.bytes), l...)
	m.counter(descUnits, float64(tot.units), l...)
	m.gauge(descInFlight, float64(inFlight), l...)
	m.counter(descStage, tot.decode.Seconds(), j.name, j.id, "decode")
	m.counter(descStage, tot.pack.Seconds(), j.name, j.id, "pack")
	m.counter(descErrors, float64(errs), l...)
	m.counter(descRestarts, float64(restarts), l...)
	m.counter(descLatePages, float64(tot.latePages), j.name, j.id, "read")
	m.counter(descLatePages, float64(tot.lateUnread), j.name, j.id, "unread")
	m.counter(descLateBytes, float64(tot.lateUnreadBytes), l...)
	m.counter(descRuledOut, float64(tot.rowsRuledOut), l...)
	m.gauge(descDeleted, float64(tot.rowsDeleted), l...)
	m.gauge(descLateDefer, b2f(deferred), l...)
	m.counter(descArenaUnits, float64(tot.arenaUnits), j.name, j.id, "arena")
	m.counter(descArenaUnits, float64(tot.arenaHeap), j.name, j.id, "heap")
	for _, s := range []State{Pending, Running, Done, Failed, Canceled} {
		v := 0.0
		if s == state {
			v = 1
		}
		m.gauge(descState, v, j.name, j.id, string(s))
	}
	cs := j.client.Stats()
	m.counter(descCPUWait, cs.WaitTime.Seconds(), l...)
	m.counter(descCPUHeld, cs.HoldTime.Seconds(), l...)
	m.gauge(descWeight, float64(d.weightOf(j)), l...)
	m.gauge(descMemory, float64(mem), l...)
	c.collectRanks(m, j, published, fullWait, infos, ok)
}

// collectRanks sends the metrics of each rank of job j: published and
// fullWait are its counters by rank as read under j.mu, infos its rings
// (where ok says they could be read).
func (c collector) collectRanks(m metricSink, j *Job, published []uint64, fullWait []time.Duration, infos []shm.RingInfo, ok []bool) {
	for r := range published {
		rl := []string{j.name, j.id, strconv.Itoa(j.rankBase + r)}
		m.counter(descBatches, float64(published[r]), rl...)
		m.counter(descFullWait, fullWait[r].Seconds(), rl...)
		m.counter(descEmptyWait, time.Duration(j.emptyWait[r].Load()).Seconds(), rl...)
		w := c.d.waits.rank(j, r)
		n, sum, buckets := w.histogram()
		m <- prometheus.MustNewConstHistogram(descBatchWait, n, sum, buckets, rl...)
		if r < len(infos) && ok[r] {
			in := infos[r]
			m.gauge(descOccupancy, float64(in.Occupancy()), rl...)
			m.gauge(descSlots, float64(in.Slots), rl...)
			att := 0.0
			if in.ConsumerAttached {
				att = 1
			}
			m.gauge(descAttached, att, rl...)
		}
	}
}

// metricsHandler serves /metrics: the jobs' metrics plus the Go runtime's
// and the process's.
func (d *Daemon) metricsHandler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collector{d}, peerCollector{d}, adviceCollector{d}, gpuCollector{d}, stagingCollector{d}, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("/metrics", scrapeHandler(reg, func() string { return d.Config().MetricsTokenFile }))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "lastmiled: metrics are at /metrics", http.StatusNotFound)
	})
	return mux
}

// chargedLocked is what the job holds of the memory budget now: its
// footprint while its rings exist or will, ended or not; 0 once they are
// removed (reservedLocked and the per-user limits add up the same). j.mu
// is held.
func (j *Job) chargedLocked() int64 {
	if holdsRings(j) {
		return j.footprint
	}
	return 0
}
