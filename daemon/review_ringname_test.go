package daemon

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestReviewRingFileCollision: sameName refuses a ring.name equal to a
// live job's, but ring files are RING for world_size 1 and RING.rR
// otherwise, so two different ring names can name the same file: a job of
// world_size 1 with ring.name "lastmile.ctr.r0" takes the file of rank 0
// of uid 1000's job "ctr" (world_size 2), and the reverse. The second job
// is accepted and then fails creating its ring (or the first one fails when
// it recreates its ring: a restart, a revive), across users.
func TestReviewRingFileCollision(t *testing.T) {
	d := apiDaemon(t, nil)
	recs := append([]*record{}, fuzzJobs...)
	recs = append(recs, &record{ID: "333333333333", Name: "solo", Owner: 1000, GID: 1000, State: "done",
		Spec: "name: solo\ninputs: [/nonexistent/a.parquet]\nbatch: {size: 8}\nring: {name: shared.r1}\n"})
	for _, rec := range recs {
		r := *rec
		r.Created = time.Now()
		d.restore(&r)
	}
	h := d.api()
	for _, c := range []struct{ what, spec string }{
		{"world_size 1, ring file lastmile.ctr.r0 of job ctr's rank 0",
			"name: mine\ninputs: [/nonexistent/z.parquet]\nbatch: {size: 8}\nring: {name: lastmile.ctr.r0}\n"},
		{"world_size 2, ring files shared.r0 and shared.r1, job solo's ring",
			"name: mine2\ninputs: [/nonexistent/z.parquet]\nbatch: {size: 8}\nworld_size: 2\nring: {name: shared}\n"},
	} {
		b, _ := json.Marshal(map[string]any{"spec": c.spec})
		req := httptest.NewRequest("POST", "/v1/jobs", strings.NewReader(string(b)))
		a := serveAs(h, 1001, req)
		if a.status != 409 {
			t.Errorf("%s: uid 1001's submission got %d (%s), want 409: its ring file is a live job's of uid 1000", c.what, a.status, a.Error)
		}
	}
}

// TestReviewAddJobRingNameRace: submit checks ring names in sameName
// (claimName), which serializes submissions of one job name only, and then
// plans the job (up to planTimeout, its inputs read as the user); addJob,
// the atomic check under d.mu, checks the job name again but not the ring
// name. Two users submitting different job names with one ring.name at the
// same time both get their jobs; the rings then collide in shm_dir.
func TestReviewAddJobRingNameRace(t *testing.T) {
	d := apiDaemon(t, nil)
	mk := func(id, name string, owner uint32) *Job {
		j, err := d.newJob(&record{ID: id, Name: name, Owner: owner, GID: owner, State: string(Pending), Created: time.Now(),
			Spec: "name: " + name + "\ninputs: [/nonexistent/a.parquet]\nbatch: {size: 8}\nring: {name: contested}\n"})
		if err != nil {
			t.Fatal(err)
		}
		j.footprint = 1 << 20
		return j
	}
	// Both passed claimName before either was added (planning in between).
	a, b := mk("aaaaaaaaaaaa", "first", 1000), mk("bbbbbbbbbbbb", "second", 1001)
	if err := d.addJob(a, 1000, false); err != nil {
		t.Fatal(err)
	}
	defer a.client.Close()
	if err := d.addJob(b, 1001, false); err == nil {
		b.client.Close()
		t.Errorf("uid 1001's job %q was added with ring.name %q, the ring name of uid 1000's pending job %q: addJob does not check ring names",
			b.name, b.spec.Ring.Name, a.name)
	}
}
