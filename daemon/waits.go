package daemon

import (
	"sync"
	"time"

	"github.com/lastmile/lastmile/shm"
)

// Trainer wait per batch
//
// The daemon does not hear from trainers between attaches; what it sees is
// each ring's header, sampled every 10 ms by sampleWaits: the consumer's
// head (batches it released) and its consumer_waiting word (set while it
// sleeps on an empty ring). A run of consecutive waiting samples is one
// wait, for the batch whose arrival ended it; every other batch the
// consumer took waited 0. Each batch is observed once, when its release
// moves head (a wait is credited to the first batch released after it
// ended), so the histogram's count is the batches consumed and its sum is
// lastmile_consumer_empty_wait_seconds_total's (the wait still under way
// excepted). Waits are multiples of the 10 ms period; one shorter than a
// period may be missed and count as 0.

// waitBuckets are the upper bounds of the per-batch wait histogram, in
// seconds; 0 counts the batches that did not wait.
var waitBuckets = []float64{0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30}

// rankWaits is one rank's sampler state and histogram.
type rankWaits struct {
	obs      *shm.Observer // the ring observed; another one starts over
	head     uint64        // head at the last sample
	streak   time.Duration // the wait under way
	credited int           // batches whose wait is observed, not yet released
	counts   []uint64      // per bucket (not cumulative); the last one is +Inf
	sum      float64
	n        uint64
	// warned: a head beyond the ring's tail was logged (kept across
	// start-overs, so that a consumer flipping it logs once).
	warned bool
}

func (w *rankWaits) observe(d time.Duration) {
	if w.counts == nil {
		w.counts = make([]uint64, len(waitBuckets)+1)
	}
	s := d.Seconds()
	i := 0
	for i < len(waitBuckets) && s > waitBuckets[i] {
		i++
	}
	w.counts[i]++
	w.sum += s
	w.n++
}

// sample takes one sample of a ring: its consumer's head and whether it
// waits on an empty ring now.
func (w *rankWaits) sample(o *shm.Observer, head uint64, waiting bool, every time.Duration) {
	if o != w.obs || head < w.head {
		*w = rankWaits{obs: o, head: head, counts: w.counts, sum: w.sum, n: w.n, warned: w.warned}
	}
	if waiting {
		w.streak += every
	} else if w.streak > 0 {
		w.observe(w.streak)
		w.streak = 0
		w.credited++
	}
	// Every batch released since the last sample, in O(1): head is the
	// consumer's word, which its owner may set to anything (a loop of one
	// step per batch would spin for ever, holding the job's lock).
	n := head - w.head
	c := min(n, uint64(w.credited))
	w.credited -= int(c)
	if z := n - c; z > 0 {
		if w.counts == nil {
			w.counts = make([]uint64, len(waitBuckets)+1)
		}
		w.counts[0] += z // waited 0 (bucket 0)
		w.n += z
	}
	w.head = head
}

// histogram returns the count, sum and cumulative bucket counts, as
// prometheus.MustNewConstHistogram takes them.
func (w *rankWaits) histogram() (uint64, float64, map[float64]uint64) {
	b := make(map[float64]uint64, len(waitBuckets))
	var c uint64
	for i, ub := range waitBuckets {
		if w.counts != nil {
			c += w.counts[i]
		}
		b[ub] = c
	}
	return w.n, w.sum, b
}

// jobWaits are the per-rank wait histograms of the jobs, by job.
type jobWaits struct {
	mu sync.Mutex
	m  map[*Job][]rankWaits
}

// sample records one sample of every rank of running jobs, and forgets the
// jobs that are gone.
func (jw *jobWaits) sample(jobs []*Job, every time.Duration) {
	jw.mu.Lock()
	defer jw.mu.Unlock()
	if jw.m == nil {
		jw.m = map[*Job][]rankWaits{}
	}
	live := make(map[*Job]bool, len(jobs))
	for _, j := range jobs {
		live[j] = true
		j.mu.Lock()
		if j.state == Running {
			ws := jw.m[j]
			for len(ws) < len(j.obs) {
				ws = append(ws, rankWaits{})
			}
			for r, o := range j.obs {
				if o == nil {
					continue
				}
				head, tail, waiting := o.ConsumerState()
				if head > tail {
					// The consumer released batches never published: it
					// broke the ring protocol (or its owner wrote the
					// word). Its head means nothing: ignore it, and start
					// over from the next sane one. (The producer fails
					// the run when it next needs a slot: shm Acquire.)
					if !ws[r].warned {
						j.log.Warn("ring protocol violation by the consumer: its head is beyond the ring's tail; ignored for wait accounting",
							"rank", r, "head", head, "tail", tail)
						ws[r].warned = true
					}
					ws[r].obs = nil
					continue
				}
				ws[r].sample(o, head, waiting, every)
				if waiting && r < len(j.emptyWait) {
					j.emptyWait[r].Add(int64(every))
				}
			}
			jw.m[j] = ws
		}
		j.mu.Unlock()
	}
	for j := range jw.m {
		if !live[j] {
			delete(jw.m, j)
		}
	}
}

// rank returns a copy of rank r's histogram of job j.
func (jw *jobWaits) rank(j *Job, r int) rankWaits {
	jw.mu.Lock()
	defer jw.mu.Unlock()
	ws := jw.m[j]
	if r >= len(ws) {
		return rankWaits{}
	}
	w := ws[r]
	w.counts = append([]uint64(nil), w.counts...)
	return w
}
