package daemon

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestMetricsJobsOnlyWithToken: any local user can scrape /metrics, so
// a job's series (which say what its submitter's files hold) go only to a
// scrape with the token of metrics_token_file; others get the daemon's
// own series, and a wrong token is a 401. (A security review found every
// job's rows and filter selectivities open to every local user.)
func TestMetricsJobsOnlyWithToken(t *testing.T) {
	reg := prometheus.NewRegistry()
	job := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "lastmile_rows_total", Help: "h"}, []string{"job", "job_id"})
	job.WithLabelValues("alice-ctr", "0123456789ab").Set(42)
	own := prometheus.NewGauge(prometheus.GaugeOpts{Name: "lastmile_memory_total_bytes", Help: "h"})
	own.Set(7)
	reg.MustRegister(job, own)

	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, file, auth string
		code             int
		jobs             bool
	}{
		{"no token configured, none sent", "", "", 200, false},
		{"no token configured, one sent", "", "Bearer s3cret", 401, false},
		{"token configured, none sent", tokenFile, "", 200, false},
		{"right token", tokenFile, "Bearer s3cret", 200, true},
		{"wrong token", tokenFile, "Bearer guess", 401, false},
		{"not a bearer token", tokenFile, "Basic czNjcmV0", 401, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := scrapeHandler(reg, func() string { return c.file })
			req := httptest.NewRequest("GET", "/metrics", nil)
			if c.auth != "" {
				req.Header.Set("Authorization", c.auth)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			body, _ := io.ReadAll(rec.Result().Body)
			if rec.Code != c.code {
				t.Fatalf("status %d, want %d: %s", rec.Code, c.code, body)
			}
			if c.code != http.StatusOK {
				return
			}
			if got := strings.Contains(string(body), "alice-ctr"); got != c.jobs {
				t.Errorf("job series served: %v, want %v:\n%s", got, c.jobs, body)
			}
			if !strings.Contains(string(body), "lastmile_memory_total_bytes 7") {
				t.Errorf("the daemon's own series missing:\n%s", body)
			}
		})
	}
}

// TestMetricsTokenFileChecked: a token file every user may read, or one
// that is empty, is refused by the configuration check, naming the field.
func TestMetricsTokenFileChecked(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, text string
		mode       os.FileMode
		ok         bool
	}{
		{"0600", "tok", 0o600, true},
		{"0640", "tok\n", 0o640, true},
		{"readable by every user", "tok", 0o644, false},
		{"empty", "\n", 0o600, false},
		{"two words", "a b", 0o600, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_"))
			os.WriteFile(path, []byte(c.text), 0o600)
			os.Chmod(path, c.mode)
			cfg := DefaultConfig()
			cfg.MetricsTokenFile = path
			err := cfg.Validate()
			if (err == nil) != c.ok {
				t.Fatalf("Validate: %v, want ok=%v", err, c.ok)
			}
			if err != nil && !strings.Contains(err.Error(), "metrics_token_file") {
				t.Errorf("error does not name the field: %v", err)
			}
		})
	}
}
