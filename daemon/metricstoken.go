package daemon

import (
	"crypto/subtle"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
)

// Who may read the jobs' series.
//
// /metrics listens on TCP (loopback by default), where any local user
// can scrape it, and a job's series say what its submitter's files hold:
// its rows and bytes, each filter's rows in and out (a selectivity over
// files another user may not read), its name. So the jobs' series (those
// labeled job_id) go only to a scrape that sends the bearer token of
// config metrics_token_file; every other scrape gets the daemon's own
// series (memory, CPU tokens, peers, GPUs, the Go runtime). A wrong token
// is a 401, so that a misconfigured Prometheus is told, rather than
// silently given less. The token is read at each scrape, so it can be
// replaced without a restart.
//
// Rejected: serving /metrics on a Unix socket with a group (Prometheus
// scrapes TCP only), and leaving the jobs' series open by default (the
// daemon may never tell a user what it read for another).

// readToken reads a bearer token file: one line, not readable by every
// user.
func readToken(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if st.Mode().Perm()&0o004 != 0 {
		return "", fmt.Errorf("%s is readable by every user, who could then scrape every job's series: chmod o-r it", path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" || strings.ContainsAny(tok, " \t\r\n") {
		return "", fmt.Errorf("%s: want one token of printable characters without spaces", path)
	}
	return tok, nil
}

// scrapeHandler serves g, the jobs' series only to a scrape with the
// token of tokenFile (none: to no scrape).
func scrapeHandler(g prometheus.Gatherer, tokenFile func() string) http.Handler {
	all := promhttp.HandlerFor(g, promhttp.HandlerOpts{})
	own := promhttp.HandlerFor(withoutJobs(g), promhttp.HandlerOpts{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		if auth == "" {
			own.ServeHTTP(w, r)
			return
		}
		file := tokenFile()
		if file == "" {
			http.Error(w, "lastmiled: this daemon has no metrics_token_file: scrape without a token for its own series", http.StatusUnauthorized)
			return
		}
		tok, err := readToken(file)
		if err != nil {
			http.Error(w, "lastmiled: metrics_token_file: "+err.Error(), http.StatusInternalServerError)
			return
		}
		sent, ok := strings.CutPrefix(auth, "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(sent), []byte(tok)) != 1 {
			http.Error(w, "lastmiled: wrong bearer token for the jobs' series (config metrics_token_file)", http.StatusUnauthorized)
			return
		}
		all.ServeHTTP(w, r)
	})
}

// withoutJobs is g less every series labeled job_id.
func withoutJobs(g prometheus.Gatherer) prometheus.Gatherer {
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		mfs, err := g.Gather()
		out := mfs[:0]
		for _, mf := range mfs {
			mf.Metric = slices.DeleteFunc(mf.Metric, func(m *dto.Metric) bool {
				return slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == "job_id" })
			})
			if len(mf.Metric) > 0 {
				out = append(out, mf)
			}
		}
		return out, err
	})
}
