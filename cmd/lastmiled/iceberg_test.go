package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
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

// TestIcebergDeletesAsCaller: a table's delete files are read with the
// submitting user's credentials, as its data is: a user who may not read
// one is refused, naming it; once readable, the user's job runs without
// the deleted rows.
func TestIcebergDeletesAsCaller(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to submit as another uid")
	}
	e := newEnv(t)
	e.start("-socket-mode", "0666")
	u := newAsUser(t, e)
	tab, err := icebergtest.New(filepath.Join(e.dir, "lake", "events"), icebergtest.Layout{ByPart: true})
	if err != nil {
		t.Fatal(err)
	}
	rows := make([]icebergtest.Row, 400)
	for i := range rows {
		rows[i] = icebergtest.Row{ID: int64(i), Part: string(rune('a' + i%2)), Key: int64(i)}
	}
	if _, _, err := tab.Append(rows); err != nil {
		t.Fatal(err)
	}
	var pos []icebergtest.Position
	for id := int64(0); id < 400; id += 3 {
		p, _ := tab.Locate(id)
		pos = append(pos, p)
	}
	if _, _, err := tab.DeletePositions(pos, 0); err != nil {
		t.Fatal(err)
	}
	_, meta, err := tab.DeleteEquality("b", "id", []int64{1, 5, 7}, 0)
	if err != nil {
		t.Fatal(err)
	}
	filepath.Walk(filepath.Join(e.dir, "lake"), func(p string, fi os.FileInfo, _ error) error {
		if fi.IsDir() {
			return os.Chmod(p, 0o755)
		}
		return os.Chmod(p, 0o644)
	})
	dels, _ := filepath.Glob(filepath.Join(e.dir, "lake", "events", "data", "*delete-*.parquet"))
	if len(dels) != 2 {
		t.Fatalf("delete files %v", dels)
	}
	spec := func(name string) string {
		return fmt.Sprintf("name: %s\ninputs: [%q]\nbatch: {size: 10, last: keep}\nring: {slots: 4}\npipeline:\n  - rename: {id: row_id}\n  - select: [row_id]\n", name, "iceberg:"+meta)
	}
	// The data manifest and manifest list of the last commit too.
	for _, pat := range []string{"manifest-1002-data.avro", "snap-1002.avro"} {
		m, _ := filepath.Glob(filepath.Join(e.dir, "lake", "events", "metadata", pat))
		if len(m) != 1 {
			t.Fatalf("no %s", pat)
		}
		dels = append(dels, m[0])
	}
	for i, del := range dels {
		os.Chmod(del, 0o600)
		code, body := u.submit(spec(fmt.Sprintf("refused%d", i)))
		if code != 403 || !strings.Contains(body, filepath.Base(del)) || !strings.Contains(body, "permission denied") {
			t.Errorf("%s unreadable: %d %q; want 403 naming it", filepath.Base(del), code, body)
		}
		os.Chmod(del, 0o644)
	}
	code, body := u.submit(spec("readable"))
	if code != 201 {
		t.Fatalf("readable: %d %s", code, body)
	}
	var j jobJSON
	json.Unmarshal([]byte(body), &j)
	ids, err := readAll(e, j.ID, accessUID)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(ids)
	var want []int64
	for id := range int64(400) {
		if id%3 != 0 && id != 1 && id != 5 && id != 7 {
			want = append(want, id)
		}
	}
	if !slices.Equal(ids, want) {
		t.Fatalf("%d rows; want %d", len(ids), len(want))
	}
	if got := e.waitJob(j.ID, 10*time.Second, "done"); got.Progress.RowsDeleted != int64(400-len(want)) {
		t.Errorf("progress.rows_deleted %d; want %d", got.Progress.RowsDeleted, 400-len(want))
	}
	m := metricsOf(e)
	if v, ok := metricValue(m, "lastmile_rows_deleted", `job_id="`+j.ID+`"`); !ok || v != float64(400-len(want)) {
		t.Errorf("lastmile_rows_deleted %v (reported %v); want %d", v, ok, 400-len(want))
	}
}
