package daemon

import (
	"bytes"
	"io"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// reviewCountingReader counts the bytes the handler read of a body.
type reviewCountingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *reviewCountingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n.Add(int64(n))
	return n, err
}

// TestReviewCountsBodyReadBeforeOwnerCheck: POST /v1/jobs/{id}/counts takes
// bodies up to 64 MiB (not control.max_body) because "only the job's owner
// may post it", but postCounts decodes the whole body before it looks the
// job up. Any local user may therefore make the daemon buffer and decode
// 64 MiB (hundreds of MiB of []int64) per connection, 128 connections at
// once, for a job that is not theirs or does not exist.
func TestReviewCountsBodyReadBeforeOwnerCheck(t *testing.T) {
	d := apiDaemon(t, nil)
	for _, rec := range fuzzJobs {
		r := *rec
		r.Created = time.Now()
		d.restore(&r)
	}
	h := d.api()
	limit := int64(d.Config().Control.MaxBody)
	// 8 MiB of a valid counts body: {"plan": "sha256:0", "rows": [1,1,...,1]}
	var b bytes.Buffer
	b.WriteString(`{"plan": "sha256:0", "rows": [`)
	b.WriteString(strings.Repeat("1,", 4<<20))
	b.WriteString(`1]}`)
	body := b.Bytes()
	for _, c := range []struct {
		name, path string
		uid        uint32
	}{
		{"another user's job", "/v1/jobs/share/counts", 1001},
		{"no such job", "/v1/jobs/nosuchjob/counts", 1001},
	} {
		cr := &reviewCountingReader{r: bytes.NewReader(body)}
		req := httptest.NewRequest("POST", c.path, cr)
		req.ContentLength = int64(len(body))
		a := serveAs(h, c.uid, req)
		if a.status != 403 && a.status != 404 {
			t.Errorf("%s: status %d (%s), want 403/404", c.name, a.status, a.Error)
		}
		if n := cr.n.Load(); n > limit {
			t.Errorf("%s: uid %d's request got %d bytes of its body read (and decoded) before being refused with %d; "+
				"a caller that may not post counts should get no more than control.max_body (%d)", c.name, c.uid, n, a.status, limit)
		}
	}
}
