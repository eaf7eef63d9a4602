package daemon

import (
	"errors"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gopkg.in/yaml.v3"
)

// refusalLogEvery is the least time between two log lines of one uid's
// refusals of one kind (endpoint and status): a client retrying in a loop
// must not flood the journal. The next line says how many were left out.
const refusalLogEvery = 10 * time.Second

// maxRefusalKeys bounds the rate limiter's memory: beyond it, the entries
// of quiet keys are dropped.
const maxRefusalKeys = 4096

var descRequestsRefused = prometheus.NewDesc("lastmile_requests_refused_total",
	"Submissions (endpoint=\"submit\") and attaches (endpoint=\"attach\") the daemon refused, by HTTP status: 400 bad request or spec, over memory.per_job; 403 not the caller's job; 404 no such job; 409 conflict (a rank already attached, a done job's rings gone); 429 a per-user limit; 503 memory.total used up or draining.",
	[]string{"endpoint", "status"}, nil)

type refusalKey struct {
	endpoint string
	status   int
}

type refusalLogKey struct {
	uid uint32
	refusalKey
}

type refusalLog struct {
	last       time.Time
	suppressed int
}

// refusals counts and logs the refused submissions and attaches, so that
// an operator asked why a job does not start finds the answer in the
// journal and on /metrics rather than only in the user's client output.
type refusals struct {
	mu     sync.Mutex
	counts map[refusalKey]int64
	logged map[refusalLogKey]*refusalLog
}

// refuse answers err (as writeError does), counts the refusal and logs it,
// at most once per uid, endpoint and status every refusalLogEvery. job
// returns the job's name (or what the request named), for the log only.
func (d *Daemon) refuse(w http.ResponseWriter, r *http.Request, endpoint string, job func() string, rank *int, err error) {
	writeError(w, err)
	status := http.StatusInternalServerError
	reason := err.Error()
	var ae *apiError
	if errors.As(err, &ae) {
		status, reason = ae.status, ae.msg
		if len(ae.fields) > 1 {
			f := ae.fields[0]
			reason += " (first: line " + strconv.Itoa(f.Line) + ": " + f.Field + ": " + f.Msg + ")"
		}
	}
	p := peerFrom(r.Context())
	now := time.Now()
	rf := &d.refused
	k := refusalKey{endpoint, status}
	rf.mu.Lock()
	if rf.counts == nil {
		rf.counts = make(map[refusalKey]int64)
		rf.logged = make(map[refusalLogKey]*refusalLog)
	}
	rf.counts[k]++
	lk := refusalLogKey{p.uid, k}
	l := rf.logged[lk]
	if l == nil {
		if len(rf.logged) >= maxRefusalKeys {
			for k, v := range rf.logged {
				if now.Sub(v.last) >= refusalLogEvery {
					delete(rf.logged, k)
				}
			}
		}
		l = &refusalLog{}
		rf.logged[lk] = l
	} else if now.Sub(l.last) < refusalLogEvery {
		l.suppressed++
		rf.mu.Unlock()
		return
	}
	suppressed := l.suppressed
	l.last, l.suppressed = now, 0
	rf.mu.Unlock()

	level := slog.LevelInfo
	if status == http.StatusTooManyRequests || status >= 500 {
		level = slog.LevelWarn // the host turns work away: limits or budget
	}
	attrs := []any{"endpoint", endpoint, "status", status, "uid", p.uid, "pid", p.pid, "job", clip(job())}
	if rank != nil {
		attrs = append(attrs, "rank", *rank)
	}
	attrs = append(attrs, "reason", reason)
	if suppressed > 0 {
		attrs = append(attrs, "suppressed", suppressed, "suppressed_within", refusalLogEvery.String())
	}
	d.log.Log(r.Context(), level, "request refused", attrs...)
}

// collect sends lastmile_requests_refused_total.
func (rf *refusals) collect(m metricSink) {
	rf.mu.Lock()
	keys := make([]refusalKey, 0, len(rf.counts))
	for k := range rf.counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool {
		if keys[a].endpoint != keys[b].endpoint {
			return keys[a].endpoint < keys[b].endpoint
		}
		return keys[a].status < keys[b].status
	})
	vals := make([]int64, len(keys))
	for i, k := range keys {
		vals[i] = rf.counts[k]
	}
	rf.mu.Unlock()
	for i, k := range keys {
		m.counter(descRequestsRefused, float64(vals[i]), k.endpoint, strconv.Itoa(k.status))
	}
}

// specName is the name a submitted spec gives its job, "" if it cannot be
// read: for the log of a refusal only.
func specName(text string) string {
	var s struct {
		Name string `yaml:"name"`
	}
	if yaml.Unmarshal([]byte(text), &s) != nil {
		return ""
	}
	return s.Name
}
