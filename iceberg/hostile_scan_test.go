package iceberg_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	ice "github.com/apache/iceberg-go"
	"github.com/parquet-go/parquet-go"

	"github.com/lastmile/lastmile/iceberg"
	"github.com/lastmile/lastmile/iceberg/icebergtest"
)

// TestScanRefusesRepeatedDataFiles: a manifest list that names the same
// data manifest many times (or manifests that list one data file twice)
// made the scan return every data file once per listing: its rows read
// twice, and a metadata file any user can write (a local table, or one
// in a bucket they are granted) multiplied the daemon's memory by the
// number of repetitions with nothing to bound it (a 256 MiB manifest
// list of references to one 256 MiB manifest). Iceberg never lists a
// live data file twice.
func TestScanRefusesRepeatedDataFiles(t *testing.T) {
	tab, err := icebergtest.New(filepath.Join(t.TempDir(), "events"), icebergtest.Layout{ByPart: true})
	if err != nil {
		t.Fatal(err)
	}
	id, meta, err := tab.Append(rows(0, 100))
	if err != nil {
		t.Fatal(err)
	}
	list := filepath.Join(tab.Dir, "metadata", "snap-"+itoa(id)+".avro")
	data, err := os.ReadFile(list)
	if err != nil {
		t.Fatal(err)
	}
	mfs, err := ice.ReadManifestList(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	var rep []ice.ManifestFile
	for range 3 {
		rep = append(rep, mfs...)
	}
	var buf bytes.Buffer
	seq := int64(1)
	if err := ice.WriteManifestList(2, &buf, id, nil, &seq, 0, rep); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(list, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	sc, err := iceberg.Opener{}.Scan(context.Background(), "iceberg:"+meta)
	if err == nil {
		t.Fatalf("a manifest list naming its manifest 3 times: scanned %d data files of %d rows (the table has 4 files of 100 rows); want an error", len(sc.Files), countRows(sc.Files))
	}
	if !strings.Contains(err.Error(), "twice") {
		t.Fatalf("error %q does not say a data file is listed twice", err)
	}
	t.Log(err)
}

// TestPositionDeleteFileHoldsMoreThanItsManifestSays: the bound on
// position deletes (MaxDeletedRows) was checked against the row counts the
// manifests declare, and then every row of every delete file was read
// into memory whatever its count: a delete file whose manifest entry says
// 1 row, holding a billion (a few MB of Parquet: one repeated path, delta
// encoded positions), was read whole. A delete file that holds more rows
// than its entry says is damaged, and is refused before its rows are
// read.
func TestPositionDeleteFileHoldsMoreThanItsManifestSays(t *testing.T) {
	tab, err := icebergtest.New(filepath.Join(t.TempDir(), "events"), icebergtest.Layout{ByPart: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := tab.Append(rows(0, 100)); err != nil {
		t.Fatal(err)
	}
	first := tab.DataFiles()[0]
	id, meta, err := tab.DeletePositions([]icebergtest.Position{{File: first, Pos: 0}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The same delete file, now with three rows; its entry still says one.
	path := filepath.Join(tab.Dir, "data", "delete-"+itoa(id)+".parquet")
	if err := parquet.WriteFile(path, []icebergtest.Position{{File: first, Pos: 0}, {File: first, Pos: 1}, {File: first, Pos: 2}}); err != nil {
		t.Fatal(err)
	}
	sc, err := iceberg.Opener{}.Scan(context.Background(), "iceberg:"+meta)
	if err == nil {
		t.Fatalf("a delete file of 3 rows whose manifest says 1: scanned, %d rows deleted; want an error", sc.DeletedRows)
	}
	if !strings.Contains(err.Error(), "its manifest says") {
		t.Fatalf("error %q does not say the file holds more rows than its manifest says", err)
	}
	t.Log(err)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
