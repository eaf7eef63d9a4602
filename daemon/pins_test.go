package daemon

import (
	"context"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/iceberg/icebergtest"
	"github.com/lastmile/lastmile/spec"
)

// A job over an Iceberg table of a REST catalog is pinned to the current
// snapshot when accepted; its record keeps the pin, so that the job
// rebuilt from the record after a restart reads that snapshot, not the
// one committed since.
func TestIcebergPinRecorded(t *testing.T) {
	dir := t.TempDir()
	tab, err := icebergtest.New(filepath.Join(dir, "events"), icebergtest.Layout{ByPart: true})
	if err != nil {
		t.Fatal(err)
	}
	mk := func(start, n int) []icebergtest.Row {
		rows := make([]icebergtest.Row, n)
		for i := range rows {
			rows[i] = icebergtest.Row{ID: int64(start + i), Part: string(rune('a' + i%3))}
		}
		return rows
	}
	s1, _, err := tab.Append(mk(0, 300))
	if err != nil {
		t.Fatal(err)
	}
	cat := &icebergtest.Catalog{}
	cat.Add("db.events", tab)
	srv := httptest.NewServer(cat)
	defer srv.Close()

	cfg := DefaultConfig()
	cfg.StateDir, cfg.ShmDir, cfg.Socket, cfg.Metrics, cfg.Workers = filepath.Join(dir, "state"), filepath.Join(dir, "shm"), filepath.Join(dir, "s"), "off", 1
	d, err := New(cfg, nil, nil, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	text := fmt.Sprintf("name: ev\ninputs: [%q]\nbatch: {size: 10}\n", "iceberg:"+srv.URL+"?table=db.events")
	job, err := d.parseSpec(text, "", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pinned, pins, err := pinJob(ctx, job, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(pins) != 1 || pins[0].Field != "inputs[0]" || pins[0].Snapshot != s1 || pinned.Inputs[0] != pins[0].Input {
		t.Fatalf("pins %+v, pinned input %q", pins, pinned.Inputs[0])
	}
	st, err := openStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	if err := st.put(&record{ID: "aaaaaaaaaaaa", Name: "ev", Spec: text, State: string(Pending), Created: time.Now(), Pins: pins}); err != nil {
		t.Fatal(err)
	}
	// A commit, then a restart: the job comes back on snapshot s1.
	if _, _, err := tab.Append(mk(300, 200)); err != nil {
		t.Fatal(err)
	}
	recs, errs := st.load()
	if len(errs) > 0 || len(recs) != 1 {
		t.Fatalf("load: %v %v", recs, errs)
	}
	j, err := d.newJob(recs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer j.client.Close()
	if j.spec.Inputs[0] != pins[0].Input {
		t.Fatalf("restored job reads %q, want %q", j.spec.Inputs[0], pins[0].Input)
	}
	if got := j.record().Pins; len(got) != 1 || got[0] != pins[0] {
		t.Errorf("the job's record pins %+v, want %+v", got, pins)
	}
	fp, err := engine.EstimateFootprint(ctx, j.spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	if fp.Rows != 300 {
		t.Errorf("restored job plans %d rows, want snapshot %d's 300", fp.Rows, s1)
	}
	// Unpinned, the same spec now reads the new snapshot.
	if fp, err := engine.EstimateFootprint(ctx, job, nil); err != nil || fp.Rows != 500 {
		t.Errorf("unpinned: %d rows, %v; want 500", fp.Rows, err)
	}
}

func TestApplyPinsRefusesForeignPins(t *testing.T) {
	for _, tc := range []struct {
		pin  pin
		want string
	}{
		{pin{Field: "inputs[0]", Input: "iceberg:/other/v1.metadata.json?snapshot=3"}, "is not the spec's table"},
		{pin{Field: "inputs[1]", Input: "iceberg:/wh/v1.metadata.json?snapshot=3"}, "the spec has no Iceberg table there"},
		{pin{Field: "inputs[0]", Input: "iceberg:/wh/v1.metadata.json"}, "is not a pinned Iceberg table"},
	} {
		job, err := spec.Parse("", []byte("name: j\ninputs: [\"iceberg:/wh/v1.metadata.json\", /data]\nbatch: {size: 1}\n"))
		if err != nil {
			t.Fatal(err)
		}
		if err := applyPins(job, []pin{tc.pin}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.pin, err, tc.want)
		}
	}
	if !absoluteInput("iceberg:/wh/v1.json") || !absoluteInput("iceberg:file:///wh/v1.json") || !absoluteInput("s3://b/k") ||
		absoluteInput("iceberg:wh/v1.json") || absoluteInput("data") {
		t.Error("absoluteInput")
	}
}
