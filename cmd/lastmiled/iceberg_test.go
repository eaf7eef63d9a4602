package main_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lastmile/lastmile/iceberg/icebergtest"
)

// TestIcebergResumeSameSnapshot: a job over an Iceberg table of a REST
// catalog, given without a snapshot, is pinned when lastmiled accepts it.
// A commit lands mid-epoch, lastmiled is killed (-9) and restarted: the
// job resumes on the pinned snapshot, and the trainers get exactly its
// rows, each once, none of the new commit's.
func TestIcebergResumeSameSnapshot(t *testing.T) {
	e := newEnv(t)
	tab, err := icebergtest.New(filepath.Join(e.dir, "events"), icebergtest.Layout{ByPart: true})
	if err != nil {
		t.Fatal(err)
	}
	mk := func(start, n int) []icebergtest.Row {
		rows := make([]icebergtest.Row, n)
		for i := range rows {
			id := int64(start + i)
			rows[i] = icebergtest.Row{ID: id, Part: string(rune('a' + id%4)), Key: id}
		}
		return rows
	}
	s1, _, err := tab.Append(mk(0, 6000))
	if err != nil {
		t.Fatal(err)
	}
	filepath.Walk(e.dir, func(p string, _ os.FileInfo, _ error) error { return os.Chmod(p, 0o755) })
	cat := &icebergtest.Catalog{}
	cat.Add("db.events", tab)
	srv := httptest.NewServer(cat)
	defer srv.Close()
	e.start()
	spec := fmt.Sprintf("name: ice\ninputs: [%q]\nbatch: {size: 100}\nring: {slots: 4}\ndecode: {max_unit_rows: 700}\npipeline:\n  - rename: {id: row_id}\n  - select: [row_id]\n",
		"iceberg:"+srv.URL+"?table=db.events")
	j := e.submit(spec, nil)
	var view struct {
		Snapshots []struct {
			Field    string
			Snapshot int64
		} `json:"iceberg_snapshots"`
	}
	if st, err := e.do("GET", "/v1/jobs/"+j.ID, nil, &view); err != nil || st != 200 {
		t.Fatalf("get job: %d %v", st, err)
	}
	if len(view.Snapshots) != 1 || view.Snapshots[0].Field != "inputs[0]" || view.Snapshots[0].Snapshot != s1 {
		t.Fatalf("iceberg_snapshots %+v, want inputs[0] at %d", view.Snapshots, s1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := &reader{e: e, job: j.ID, rank: 0, delay: 3 * time.Millisecond}
	errs := make(chan error, 1)
	go func() { errs <- r.run(ctx) }()
	waitFor(t, "10 batches read", 30*time.Second, func() bool { return r.count() >= 10 })
	if _, _, err := tab.Append(mk(6000, 2000)); err != nil { // the catalog now answers a new snapshot
		t.Fatal(err)
	}
	filepath.Walk(e.dir, func(p string, _ os.FileInfo, _ error) error { return os.Chmod(p, 0o755) })
	e.kill9()
	time.Sleep(300 * time.Millisecond)
	e.start()
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	if r.reattach == 0 {
		t.Errorf("the reader never saw the producer die: the job ended before the kill")
	}
	checkExactlyOnce(t, "pinned snapshot after kill -9", r.rows, 6000)
	e.waitJob(j.ID, 10*time.Second, "done")
}
