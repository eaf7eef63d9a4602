package daemon

import (
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/plan"
	"github.com/prometheus/client_golang/prometheus"
)

// Live advice
//
// Cachew scales on what the trainer feels; so does this. Once a second
// the daemon records, per running job, each rank's time waited on an
// empty ring so far (j.emptyWait, which sampleWaits adds up from the
// rings' consumer_waiting words every 10 ms) and the CPU its workers held
// (the scheduler's token hold time). Over a window of the last
// adviceWindow (or the job's life, when shorter) that gives:
//
//   - each rank's stall: the share of the window it waited;
//   - the CPU the job used: held time over the window, in cores;
//   - its headroom: the share of the daemon's decode tokens it left idle;
//   - the shortfall of the most starved rank (plan.Need): cores to add,
//     or CPU peers, in words for `lastmile status`.
//
// The same stall over the last few seconds goes to the engine
// (Progress.SetStall), where a configured spill policy counts it as
// starvation (peer/policy.go).
//
// A rank without a consumer never waits; its stall is 0. When production
// itself waited on a rank's full ring over the window, the ranks starve
// because that rank's trainer is slower than the others (ranks get equal
// batch counts): the advice says so instead of asking for CPU.

const (
	adviceWindow    = 5 * time.Minute
	adviceEvery     = time.Second
	adviceThreshold = 0.05 // a stall under this is noise, not advice
	spillWindow     = 3 * time.Second
)

// adviceSample is one job's counters at one time.
type adviceSample struct {
	at     time.Time
	waited []int64 // per rank, ns waited on an empty ring so far
	full   []int64 // per rank, ns production waited on the rank's full ring so far
	held   time.Duration
	unread []bool // per rank, no trainer attached to its ring at the sample
}

// adviceTracker keeps each running job's samples over the window.
type adviceTracker struct {
	mu   sync.Mutex
	last time.Time
	m    map[*Job][]adviceSample
}

// maybeSample samples the jobs if adviceEvery has passed (sampleWaits
// calls it every 10 ms).
func (t *adviceTracker) maybeSample(jobs []*Job, now time.Time) {
	t.mu.Lock()
	if now.Sub(t.last) < adviceEvery {
		t.mu.Unlock()
		return
	}
	t.last = now
	t.mu.Unlock()
	t.sample(jobs, now)
}

func (t *adviceTracker) sample(jobs []*Job, now time.Time) {
	live := make(map[*Job]bool, len(jobs))
	type update struct {
		j    *Job
		s    adviceSample
		prog *engine.Progress
	}
	var ups []update
	for _, j := range jobs {
		j.mu.Lock()
		running := j.state == Running
		s := adviceSample{at: now, waited: make([]int64, len(j.emptyWait))}
		for r := range j.emptyWait {
			s.waited[r] = j.emptyWait[r].Load()
		}
		s.full = make([]int64, len(j.fullWait))
		for r, w := range j.fullWait {
			s.full[r] = int64(w)
		}
		var prog *engine.Progress
		if r := j.liveLocked(); r != nil { // an ended run's waits are in j.fullWait already
			prog = r.prog
			for r, st := range prog.RingStats() {
				if r < len(s.full) {
					s.full[r] += int64(st.FullWait)
				}
			}
		}
		j.mu.Unlock()
		if !running {
			continue
		}
		if j.client != nil {
			s.held = j.client.Stats().HoldTime
		}
		infos, ok := j.ringInfos()
		s.unread = make([]bool, len(infos))
		for r := range infos {
			s.unread[r] = ok[r] && !infos[r].ConsumerAttached
		}
		live[j] = true
		ups = append(ups, update{j, s, prog})
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[*Job][]adviceSample{}
	}
	for _, u := range ups {
		ss := append(t.m[u.j], u.s)
		// Keep one sample at or before the window's start.
		i := 0
		for i+1 < len(ss) && now.Sub(ss[i+1].at) >= adviceWindow {
			i++
		}
		ss = ss[i:]
		t.m[u.j] = ss
		if u.prog != nil {
			stall, _ := worstSince(ss, now.Add(-spillWindow))
			u.prog.SetStall(stall)
		}
	}
	for j := range t.m {
		if !live[j] {
			delete(t.m, j)
		}
	}
}

// worstSince returns the worst rank's stall between the last sample at or
// before from (or the first) and the latest one, and that rank.
func worstSince(ss []adviceSample, from time.Time) (float64, int) {
	if len(ss) < 2 {
		return 0, 0
	}
	a, b := ss[0], ss[len(ss)-1]
	for _, s := range ss[:len(ss)-1] {
		if !s.at.After(from) {
			a = s
		}
	}
	secs := b.at.Sub(a.at).Seconds()
	worst, rank := 0.0, 0
	for r := range b.waited {
		if r >= len(a.waited) || secs <= 0 {
			continue
		}
		if s := float64(b.waited[r]-a.waited[r]) / 1e9 / secs; s > worst {
			worst, rank = s, r
		}
	}
	return min(worst, 1), rank
}

// adviceView is a job's live advice, as the API shows it.
type adviceView struct {
	WindowSeconds float64   `json:"window_seconds"`
	Stall         []float64 `json:"stall"`      // per rank: share of the window waited on an empty ring
	WorstRank     int       `json:"worst_rank"` // the rank that waited most
	Cores         float64   `json:"cores"`      // CPU the job's workers held, on average over the window
	Headroom      float64   `json:"headroom"`   // share of the daemon's decode tokens the job left idle
	MoreCores     int       `json:"more_cores"` // to add for the worst rank's stall to go
	Peers         int       `json:"peers"`      // or CPU peers (0: none configured)
	Advice        string    `json:"advice"`     // in words
}

// view returns j's advice, nil before two samples of it.
func (t *adviceTracker) view(j *Job, tokens, peerCores int) *adviceView {
	t.mu.Lock()
	ss := t.m[j]
	if len(ss) < 2 {
		t.mu.Unlock()
		return nil
	}
	a, b := ss[0], ss[len(ss)-1]
	t.mu.Unlock()
	win := b.at.Sub(a.at)
	secs := win.Seconds()
	v := &adviceView{WindowSeconds: secs, Stall: make([]float64, len(b.waited))}
	for r := range b.waited {
		if r < len(a.waited) {
			v.Stall[r] = min(float64(b.waited[r]-a.waited[r])/1e9/secs, 1)
		}
	}
	worst, rank := worstSince(ss, a.at)
	v.WorstRank = rank
	v.Cores = (b.held - a.held).Seconds() / secs
	v.Headroom = -1
	if tokens > 0 {
		v.Headroom = max(1-v.Cores/float64(tokens), 0)
	}
	need := plan.Need(worst, rank, max(v.Cores, 1), peerCores)
	if worst >= adviceThreshold {
		v.MoreCores, v.Peers = need.MoreCores, need.Peers
	}
	v.Advice = need.Advice(win.Round(time.Second), adviceThreshold, v.Headroom)
	if worst >= adviceThreshold {
		// Only a rank that does not starve itself can be the slow one: a
		// fast trainer also makes production wait on its ring in bursts
		// (a unit's batches outnumber the slots) between its own waits.
		if slow, share := slowestRank(a, b, secs); share >= adviceThreshold && slow != rank && v.Stall[slow] < adviceThreshold {
			// Production waited on a full ring: a trainer slower than the
			// others holds every rank back, and more CPU would not help.
			v.MoreCores, v.Peers = 0, 0
			v.Advice = fmt.Sprintf("rank %d waited %.0f%% of the last %s, but production waited %.0f%% of the window on rank %d's full ring: that trainer is slower than the others and holds every rank back; more CPU would not help",
				rank, 100*worst, win.Round(time.Second), 100*share, slow)
			if slow < len(b.unread) && b.unread[slow] {
				v.Advice = fmt.Sprintf("rank %d waited %.0f%% of the last %s, but production waited %.0f%% of the window on rank %d's full ring, which no trainer reads: start rank %d's trainer (every rank of the job's world_size must read: ranks get equal batches), or give the job the world size of the trainers that run",
					rank, 100*worst, win.Round(time.Second), 100*share, slow, slow)
			}
		}
	}
	return v
}

// slowestRank returns the rank whose full ring production waited on most
// between a and b, and the share of the window it waited.
func slowestRank(a, b adviceSample, secs float64) (int, float64) {
	slow, share := 0, 0.0
	for r := range b.full {
		if r < len(a.full) && secs > 0 {
			if s := float64(b.full[r]-a.full[r]) / 1e9 / secs; s > share {
				slow, share = r, s
			}
		}
	}
	return slow, min(share, 1)
}

var (
	descStall     = prometheus.NewDesc("lastmile_rank_stall_ratio", "Share of the advice window (the last 5 minutes, or the job's life) the rank's trainer waited on an empty ring.", rankLabels, nil)
	descHeadroom  = prometheus.NewDesc("lastmile_job_headroom_ratio", "Share of the daemon's decode tokens the job left idle over the advice window.", jobLabels, nil)
	descMoreCores = prometheus.NewDesc("lastmile_job_advice_more_cores", "Cores the job needs besides those it used for its most starved rank not to wait (0: fed).", jobLabels, nil)
	descAdvPeers  = prometheus.NewDesc("lastmile_job_advice_peers", "CPU peers that would do instead of more cores (0: fed, or no peers configured).", jobLabels, nil)
)

// adviceCollector exports the advice of every running job.
type adviceCollector struct{ d *Daemon }

func (c adviceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descStall, descHeadroom, descMoreCores, descAdvPeers} {
		ch <- d
	}
}

func (c adviceCollector) Collect(ch chan<- prometheus.Metric) {
	for _, j := range c.d.jobsSnapshot() {
		v := c.d.jobAdvice(j)
		if v == nil {
			continue
		}
		gauge := func(desc *prometheus.Desc, x float64, labels ...string) {
			ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, x, labels...)
		}
		for r, s := range v.Stall {
			gauge(descStall, s, j.name, j.id, strconv.Itoa(j.rankBase+r))
		}
		if v.Headroom >= 0 {
			gauge(descHeadroom, v.Headroom, j.name, j.id)
		}
		gauge(descMoreCores, float64(v.MoreCores), j.name, j.id)
		gauge(descAdvPeers, float64(v.Peers), j.name, j.id)
	}
}

// jobAdvice is j's advice with this daemon's tokens and peers.
func (d *Daemon) jobAdvice(j *Job) *adviceView {
	tokens, _ := d.sched.Stats()
	peerCores := 0
	if d.pool != nil {
		// A peer lends about as many cores as it takes units at once.
		peerCores = d.Config().Peers.Credits
	}
	return d.advice.view(j, tokens, peerCores)
}
