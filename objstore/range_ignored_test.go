package objstore_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/objstore"
)

// ignoreRange answers every GET of the test bucket as a store (or a
// cache in front of it) that ignores Range does: 200 and the whole object.
type ignoreRange struct{ dir string }

func (t ignoreRange) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodGet || r.Header.Get("Range") == "" {
		return http.DefaultTransport.RoundTrip(r)
	}
	key := strings.TrimPrefix(r.URL.Path, "/data/")
	b, err := os.ReadFile(filepath.Join(t.dir, key))
	if err != nil {
		return http.DefaultTransport.RoundTrip(r)
	}
	h := http.Header{}
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set("Last-Modified", time.Now().UTC().Format(http.TimeFormat))
	h.Set("ETag", `"abc"`)
	h.Set("Content-Type", "application/octet-stream")
	return &http.Response{StatusCode: 200, Status: "200 OK", Header: h, Body: io.NopCloser(bytes.NewReader(b)),
		ContentLength: int64(len(b)), Request: r, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}, nil
}

// TestStoreIgnoringRangeOnOpen: Open asks for the object's last 64 KiB.
// A store that ignores Range answers 200 with the whole object; Open took
// that body's FIRST 64 KiB as the object's last, and the planner then
// reported the object as corrupt Parquet ("no PAR1 magic at the end"),
// sending the user to check a file that is fine. Ranged reads after Open
// already say "the store ignored the Range header"; Open must too (or
// use the whole body's end).
func TestStoreIgnoringRangeOnOpen(t *testing.T) {
	setup(t)
	writeTable(t, filepath.Join(bucket, "norange/t.parquet"), 30000)
	src := newSource(t, objstore.Config{Endpoint: server.Endpoint, Transport: ignoreRange{dir: bucket}, PrefetchBytes: -1})
	_, err := decode.PlanFiles(context.Background(), []string{"s3://data/norange/t.parquet"}, decode.PlanOptions{FS: mount(src)})
	if err == nil {
		return // read right from the whole body: fine too
	}
	if !strings.Contains(err.Error(), "Range") {
		t.Fatalf("a store that ignores Range: %v; want an error that says the store ignored the Range header", err)
	}
	t.Log(err)
}
