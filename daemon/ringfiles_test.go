package daemon

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/lastmile/lastmile/spec"
)

// TestRingFileCollision: ring files are RING for world_size 1 and RING.rR
// otherwise, so two different ring names can name the same file: a job of
// world_size 1 with ring.name "lastmile.ctr.r0" would take the file of
// rank 0 of uid 1000's job "ctr" (world_size 2), and the reverse. Such a
// submission is refused with a 409 before it is planned, naming the file.
func TestRingFileCollision(t *testing.T) {
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
		if a.status != 409 || !strings.Contains(a.Error, "ring file") {
			t.Errorf("%s: uid 1001's submission got %d (%s), want 409 naming the ring file: it is a live job's of uid 1000", c.what, a.status, a.Error)
		}
	}
	// uid 1001's failed job "theirs" still has its ring lastmile.theirs,
	// which uid 1000 could not replace; uid 1001 itself may (a new job
	// replaces its own ended jobs' rings).
	b, _ := json.Marshal(map[string]any{"spec": "name: other\ninputs: [/nonexistent/z.parquet]\nbatch: {size: 8}\nring: {name: lastmile.theirs}\n"})
	if a := serveAs(h, 1000, httptest.NewRequest("POST", "/v1/jobs", strings.NewReader(string(b)))); a.status != 409 || !strings.Contains(a.Error, `job "theirs"`) {
		t.Errorf("uid 1000's ring on uid 1001's failed job's ring file: %d (%s), want 409", a.status, a.Error)
	}
	if a := serveAs(h, 1001, httptest.NewRequest("POST", "/v1/jobs", strings.NewReader(string(b)))); a.status == 409 {
		t.Errorf("uid 1001's ring on its own failed job's ring file: %d (%s), want it planned", a.status, a.Error)
	}
}

// TestAddJobRingNameRace: submit checks ring names in sameName
// (claimName), which serializes submissions of one job name only, and then
// plans the job (up to planTimeout, its inputs read as the user); addJob,
// the atomic check under d.mu, must check ring file names again, or two
// users submitting different job names with one ring.name at the same time
// both get their jobs, and the rings collide in shm_dir.
func TestAddJobRingNameRace(t *testing.T) {
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

// TestRingFilesCollide: which ring names and world sizes name a common
// ring file.
func TestRingFilesCollide(t *testing.T) {
	job := func(ring string, ws int) *spec.Job {
		j := &spec.Job{WorldSize: ws}
		j.Ring.Name = ring
		return j
	}
	for _, c := range []struct {
		a, b   *spec.Job
		file   string
		expect bool
	}{
		{job("x", 1), job("x", 1), "x", true},
		{job("x", 1), job("y", 1), "", false},
		{job("x", 2), job("x", 8), "x.r0", true},
		{job("x", 2), job("x.r0", 2), "", false},
		{job("x.r0", 1), job("x", 2), "x.r0", true},
		{job("x", 2), job("x.r1", 1), "x.r1", true},
		{job("x", 2), job("x.r2", 1), "", false},   // ranks 0 and 1 only
		{job("x", 20), job("x.r01", 1), "", false}, // never a leading zero
		{job("x", 20), job("x.r", 1), "", false},
		{job("x", 20), job("x.r1a", 1), "", false},
		{job("x", 20), job("x.r-1", 1), "", false},
		{job("x", 20), job("x.r19", 0), "x.r19", true}, // world_size 0: one ring
		{job("x.r1", 1), job("x.r1", 2), "", false},
	} {
		for _, swap := range []bool{false, true} {
			a, b := c.a, c.b
			if swap {
				a, b = b, a
			}
			file, ok := ringFilesCollide(a, b)
			if ok != c.expect || ok && file != c.file {
				t.Errorf("%q (world_size %d) and %q (world_size %d): %q %v, want %q %v",
					a.Ring.Name, a.WorldSize, b.Ring.Name, b.WorldSize, file, ok, c.file, c.expect)
			}
			if ok {
				found := false
				for _, j := range []*spec.Job{a, b} {
					for r := 0; r < max(j.WorldSize, 1); r++ {
						found = found || j.RingName(r) == file
					}
				}
				if !found {
					t.Errorf("%q: not a ring file of either", file)
				}
			}
		}
	}
}
