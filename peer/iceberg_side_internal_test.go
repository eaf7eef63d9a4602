package peer

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/iceberg/icebergtest"
	"github.com/lastmile/lastmile/roots"
	"github.com/lastmile/lastmile/spec"
)

// icebergSideText is the fixture's job with an anti join of its rows
// against table, an Iceberg table, by its ids.
func (f *fixture) icebergSideText(name, table string) string {
	return strings.Replace(f.text(name), fmt.Sprintf("{kind: anti, table: %s, on: row_id}", filepath.Join(f.data, "part-00002.parquet")),
		fmt.Sprintf("{kind: anti, table: %q, on: row_id, table_key: id}", table), 1)
}

// TestIcebergSideTableRunsHere: a job whose side table is an Iceberg
// table, of any kind (a metadata file beneath a directory root, one
// beneath an object-store root, a REST catalog's), is not spilled: a
// peer would read the table by the locations its metadata holds, which
// are this host's paths, or ask a catalog as whom it cannot say, so the
// snapshot the requester pinned could not be read there as it is here.
// Every unit runs here, on the pinned snapshot, and the reason names
// the table and says so; before, it said the table lay outside this
// host's data roots when it lay beneath one. A ticket naming an Iceberg
// side table is refused by the peer's compile, before any read.
func TestIcebergSideTableRunsHere(t *testing.T) {
	f := newFixture(t)
	tab, err := icebergtest.New(filepath.Join(f.dir, "tables", "side"), icebergtest.Layout{})
	if err != nil {
		t.Fatal(err)
	}
	var rows []icebergtest.Row
	for id := range int64(2000) {
		if id%3 == 0 {
			rows = append(rows, icebergtest.Row{ID: id, Part: "a"})
		}
	}
	if _, _, err := tab.Append(rows); err != nil {
		t.Fatal(err)
	}
	r, err := roots.New(map[string]string{"data": f.data, "tables": filepath.Join(f.dir, "tables"), "ctr": "s3://data/ctr"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	local := "iceberg:" + tab.MetadataPath()
	for _, c := range []struct{ kind, table string }{
		{"a metadata file beneath a directory root", local},
		{"a file:// metadata URL beneath a directory root", "iceberg:file://" + tab.MetadataPath() + "?snapshot=7"},
		{"a metadata object beneath an object-store root", "iceberg:s3://data/ctr/side/metadata/v1.metadata.json?snapshot=7"},
		{"a REST catalog's table", "iceberg:http://127.0.0.1:8181/api/catalog?table=db.side&snapshot=7"},
	} {
		t.Run(c.kind, func(t *testing.T) {
			text := f.icebergSideText("iceside", c.table)
			job, err := spec.Parse("", []byte(text))
			if err != nil {
				t.Fatal(err)
			}
			if c.table == local { // the daemon pins it when it accepts the job
				if job, err = engine.PinInputs(context.Background(), job, decode.OSFS{}); err != nil {
					t.Fatal(err)
				}
			}
			_, err = testSpiller(f.pool(f.ca.issue("gpu-host"), "127.0.0.1:1"), r, text, job, SpillerConfig{})
			if !errors.Is(err, ErrNotSpillable) || !strings.Contains(err.Error(), "Iceberg table") ||
				!strings.Contains(err.Error(), "every unit of the job runs here") || strings.Contains(err.Error(), "outside") {
				t.Fatalf("NewSpiller: %v; want ErrNotSpillable saying an Iceberg side table's job runs here", err)
			}
		})
	}
	t.Run("pinned, then committed to", func(t *testing.T) {
		text := f.icebergSideText("icepinned", local)
		job, err := spec.Parse("", []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		pinned, err := engine.PinInputs(context.Background(), job, decode.OSFS{})
		if err != nil {
			t.Fatal(err)
		}
		want := f.run(pinned, nil)
		var more []icebergtest.Row // the rest of the ids: an unpinned anti join would keep no row
		for id := range int64(2000) {
			if id%3 != 0 {
				more = append(more, icebergtest.Row{ID: id, Part: "a"})
			}
		}
		if _, _, err := tab.Append(more); err != nil {
			t.Fatal(err)
		}
		if _, err := testSpiller(f.pool(f.ca.issue("gpu-host"), "127.0.0.1:1"), r, text, pinned, SpillerConfig{}); !errors.Is(err, ErrNotSpillable) {
			t.Fatalf("NewSpiller: %v; want ErrNotSpillable", err)
		}
		same(t, "the pinned job after a commit to its side table", f.run(pinned, nil), want)
	})
	t.Run("a ticket naming one", func(t *testing.T) {
		text := f.icebergSideText("iceticket", "iceberg:tables/side/metadata/v1.metadata.json")
		tk := &Ticket{Job: text, Unit: decode.Unit{File: "data/part-00000.parquet"}, User: &User{}}
		if _, err := compile(tk, rootsFS{r: r}, 1); err == nil || !strings.Contains(err.Error(), "side table iceberg:") {
			t.Fatalf("a peer compiled a ticket naming an Iceberg side table: %v", err)
		}
	})
}
