package iceberg_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	ice "github.com/apache/iceberg-go"
	"github.com/lastmile/lastmile/iceberg"
	"github.com/lastmile/lastmile/iceberg/icebergtest"
	"github.com/parquet-go/parquet-go"
)

// commitDeletesRaw commits to tab (whose last snapshot is prevID, with
// manifest list prevList) a snapshot that adds one delete manifest of
// entries under spec, which becomes the table's default spec: the
// metadata file it writes is returned.
func commitDeletesRaw(t *testing.T, tab *icebergtest.Table, prevID int64, spec ice.PartitionSpec, entries []ice.ManifestEntry, id, seq int64) string {
	t.Helper()
	metaDir := filepath.Join(tab.Dir, "metadata")
	text, err := tab.MetadataJSON()
	if err != nil {
		t.Fatal(err)
	}
	var m iceberg.Metadata
	if err := json.Unmarshal(text, &m); err != nil {
		t.Fatal(err)
	}
	schema := m.Schemas[0]
	var buf bytes.Buffer
	w, err := ice.NewManifestWriter(2, &buf, spec, schema, id, ice.WithManifestWriterContent(ice.ManifestContentDeletes))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if err := w.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(metaDir, fmt.Sprintf("review-%d-deletes.avro", id))
	if err := os.WriteFile(manifest, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	mf, err := w.ToManifestFile("file://"+manifest, int64(buf.Len()), ice.WithManifestFileContent(ice.ManifestContentDeletes))
	if err != nil {
		t.Fatal(err)
	}
	prev, err := os.ReadFile(filepath.Join(metaDir, fmt.Sprintf("snap-%d.avro", prevID)))
	if err != nil {
		t.Fatal(err)
	}
	mfs, err := ice.ReadManifestList(bytes.NewReader(prev))
	if err != nil {
		t.Fatal(err)
	}
	mfs = append(mfs, mf)
	buf.Reset()
	if err := ice.WriteManifestList(2, &buf, id, &prevID, &seq, 0, mfs); err != nil {
		t.Fatal(err)
	}
	list := filepath.Join(metaDir, fmt.Sprintf("review-snap-%d.avro", id))
	if err := os.WriteFile(list, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	m.Specs = append(m.Specs, spec)
	m.DefaultSpecID = spec.ID()
	m.Snapshots = append(m.Snapshots, iceberg.Snapshot{ID: id, ParentID: &prevID, Sequence: seq, TimestampMs: 1700000000000 + seq,
		ManifestList: "file://" + list, Summary: map[string]string{"operation": "delete"}})
	m.CurrentSnapshotID = &id
	out, err := json.Marshal(&m)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(metaDir, fmt.Sprintf("review-v%d.metadata.json", id))
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// EqualityDeleteUnderVoidSpec: a partition spec whose every
// field has the void transform partitions nothing (Java's
// PartitionSpec.isUnpartitioned; what a format-1 table's spec becomes when
// its partition fields are dropped, since v1 cannot remove them), so an
// equality delete written under it is global and applies to the data
// files of every partition and spec, as an unpartitioned one does
// (Java's DeleteFileIndex). lastmile applies it only to data files of
// that spec with a null partition: none here, and the rows come back.
func TestEqualityDeleteUnderVoidSpec(t *testing.T) {
	tab, err := icebergtest.New(filepath.Join(t.TempDir(), "events"), icebergtest.Layout{ByPart: true})
	if err != nil {
		t.Fatal(err)
	}
	// ids 0..99, part by id%4: four files (parts a..d) of 25 rows, sequence 1.
	var rows []icebergtest.Row
	for id := range int64(100) {
		rows = append(rows, icebergtest.Row{ID: id, Part: string(rune('a' + id%4)), Key: id % 10, Score: float64(id)})
	}
	s1, _, err := tab.Append(rows)
	if err != nil {
		t.Fatal(err)
	}
	// The partition field dropped as format 1 drops it: kept, made void.
	void := ice.NewPartitionSpecID(1, ice.PartitionField{SourceIDs: []int{2}, FieldID: 1000, Name: "part", Transform: ice.VoidTransform{}})
	type delRow struct {
		ID int64 `parquet:"id,id(1)"`
	}
	del := filepath.Join(tab.Dir, "data", "eq-delete-void.parquet")
	if err := parquet.WriteFile(del, []delRow{{0}, {1}, {2}, {3}}); err != nil { // one id of each part
		t.Fatal(err)
	}
	st, err := os.Stat(del)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ice.NewDataFileBuilder(void, ice.EntryContentEqDeletes, "file://"+del, ice.ParquetFile, map[int]any{1000: nil}, nil, nil, 4, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	b.EqualityFieldIDs([]int{1})
	id, seq := int64(2000), int64(2)
	meta := commitDeletesRaw(t, tab, s1, void, []ice.ManifestEntry{ice.NewManifestEntry(ice.EntryStatusADDED, &id, &seq, &seq, b.Build())}, id, seq)

	sc, err := iceberg.Opener{}.Scan(context.Background(), "iceberg:"+meta)
	if err != nil {
		t.Fatal(err)
	}
	paths := iceberg.Paths(sc.Files)
	got, err := iceberg.EqualityDeleted(context.Background(), nil, []iceberg.Input{{Scan: sc}}, paths)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, pos := range got {
		n += len(pos)
	}
	if n != 4 {
		var names []string
		for _, p := range paths {
			names = append(names, filepath.Base(p))
		}
		t.Fatalf("an equality delete of ids 0..3 under an all-void (unpartitioned) spec deleted %d rows of files %s (%v); want 4, one in each part's file",
			n, strings.Join(names, ", "), got)
	}
}

// CatalogPrefixWithSlash: a REST catalog's route prefix (the
// "prefix" of GET /v1/config) goes into the path as the catalog gives it:
// Iceberg's Java client joins it unescaped ("v1/" + prefix +
// "/namespaces/..."; ResourcePaths), so that a prefix of several
// segments ("catalogs/main") addresses /v1/catalogs/main/namespaces/...
// lastmile path-escapes it whole: its '/' becomes %2F, a path that such a
// catalog does not serve (servers such as Jetty and Tomcat refuse an
// encoded slash outright).
func TestCatalogPrefixWithSlash(t *testing.T) {
	tab, _, _, _, _ := twoSnapshots(t)
	cat := &icebergtest.Catalog{Prefix: "catalogs/main"}
	cat.Add("db.events", tab)
	var uris []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		uris = append(uris, r.RequestURI)
		if strings.Contains(strings.ToLower(r.RequestURI), "%2f") { // as Jetty: "Ambiguous URI path separator"
			http.Error(w, "Ambiguous URI path separator", http.StatusBadRequest)
			return
		}
		cat.ServeHTTP(w, r)
	}))
	defer srv.Close()
	_, err := iceberg.Opener{}.Scan(context.Background(), "iceberg:"+srv.URL+"?table=db.events")
	if err != nil {
		t.Fatalf("catalog with prefix %q: %v (requests %q; Iceberg's Java client asks for /v1/catalogs/main/namespaces/db/tables/events)", cat.Prefix, err, uris)
	}
}

// ManifestDecompressionBomb: a manifest is read whole (at most
// MaxMetadataBytes), but its entries are all decoded and held before any
// is looked at: the bound on data files (decode.MaxFiles) and the check
// for a data file listed twice run only after. Avro's deflate blocks make
// a manifest of identical entries a fraction of a byte per entry, and
// each entry decoded takes about 500 bytes of heap: a manifest of a few
// hundred KB holds GBs, and one of the 256 MiB lastmile accepts holds
// hundreds of GBs. The metadata of a table any user may write (a local
// table) so stops lastmiled, the shared daemon, for every user.
func TestManifestDecompressionBomb(t *testing.T) {
	skipUnderRace(t)
	tab, err := icebergtest.New(filepath.Join(t.TempDir(), "events"), icebergtest.Layout{})
	if err != nil {
		t.Fatal(err)
	}
	id, meta, err := tab.Append(rows(0, 10))
	if err != nil {
		t.Fatal(err)
	}
	text, err := tab.MetadataJSON()
	if err != nil {
		t.Fatal(err)
	}
	var m iceberg.Metadata
	if err := json.Unmarshal(text, &m); err != nil {
		t.Fatal(err)
	}
	// The data manifest, made of one data file listed 3 Mi times.
	const n = 3 << 20
	var buf bytes.Buffer
	w, err := ice.NewManifestWriter(2, &buf, m.Specs[0], m.Schemas[0], id)
	if err != nil {
		t.Fatal(err)
	}
	first := tab.DataFiles()[0]
	seq := int64(1)
	for range n {
		b, err := ice.NewDataFileBuilder(m.Specs[0], ice.EntryContentData, first, ice.ParquetFile, map[int]any{}, nil, nil, 10, 100)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Add(ice.NewManifestEntry(ice.EntryStatusADDED, &id, &seq, &seq, b.Build())); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(tab.Dir, "metadata", "bomb.avro")
	if err := os.WriteFile(manifest, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	size := buf.Len()
	mf, err := w.ToManifestFile("file://"+manifest, int64(size))
	if err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	if err := ice.WriteManifestList(2, &buf, id, nil, &seq, 0, []ice.ManifestFile{mf}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tab.Dir, "metadata", "snap-"+itoa(id)+".avro"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	grew, err := scanHeapGrowth(meta)
	t.Logf("manifest of %d bytes (%d entries): scan error %v; heap grew %d MiB", size, n, err, grew>>20)
	if err == nil {
		t.Fatal("a data file listed 3 Mi times: scanned; want an error")
	}
	if grew > 256<<20 { // bounded before decoding: a few MiB
		t.Fatalf("a manifest of %d KiB made the scan hold %d MiB before refusing it (%.0f times its size); at MaxMetadataBytes (%d MiB) that is about %d GiB",
			size>>10, grew>>20, float64(grew)/float64(size), iceberg.MaxMetadataBytes>>20, grew/int64(size)*iceberg.MaxMetadataBytes>>30)
	}
}

// ManifestListDecompressionBomb: the same for a manifest list,
// which ReadManifestList decodes whole: a list naming one manifest 3 Mi
// times, a few MB of Avro, is held entry by entry before the scan finds
// the second listing of that manifest's data files.
func TestManifestListDecompressionBomb(t *testing.T) {
	skipUnderRace(t)
	tab, err := icebergtest.New(filepath.Join(t.TempDir(), "events"), icebergtest.Layout{})
	if err != nil {
		t.Fatal(err)
	}
	id, meta, err := tab.Append(rows(0, 10))
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
	const n = 3 << 20
	rep := make([]ice.ManifestFile, n)
	for i := range rep {
		rep[i] = mfs[0]
	}
	var buf bytes.Buffer
	seq := int64(1)
	if err := ice.WriteManifestList(2, &buf, id, nil, &seq, 0, rep); err != nil {
		t.Fatal(err)
	}
	rep = nil
	if err := os.WriteFile(list, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	size := buf.Len()
	buf = bytes.Buffer{}
	grew, err := scanHeapGrowth(meta)
	t.Logf("manifest list of %d bytes (%d entries): scan error %v; heap grew %d MiB", size, n, err, grew>>20)
	if err == nil {
		t.Fatal("a manifest listed 3 Mi times: scanned; want an error")
	}
	if grew > 256<<20 {
		t.Fatalf("a manifest list of %d KiB made the scan hold %d MiB before refusing it (%.0f times its size)", size>>10, grew>>20, float64(grew)/float64(size))
	}
}

// scanHeapGrowth scans the table of metadata file meta and returns how
// far the heap grew above where it stood before, sampled every 20 ms.
func scanHeapGrowth(meta string) (int64, error) {
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak atomic.Uint64
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peak.Load() {
				peak.Store(ms.HeapAlloc)
			}
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	_, err := iceberg.Opener{}.Scan(context.Background(), "iceberg:"+meta)
	close(done)
	<-sampled
	return int64(peak.Load()) - int64(base.HeapAlloc), err
}

// skipUnderRace skips a test that measures the heap of a large scan: the
// race detector makes it minutes long and its heap figures meaningless.
// make test runs these without -race (test-go).
func skipUnderRace(t *testing.T) {
	if raceEnabled {
		t.Skip("a heap measurement: run without -race (make test does)")
	}
}
