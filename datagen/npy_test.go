package datagen_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lastmile/lastmile/datagen"
)

// npyArray is a 1-D array read by readNPY, an NPY reader independent of
// datagen's writer.
type npyArray struct {
	descr string
	n     int64
	data  []byte
}

var npyDict = regexp.MustCompile(`^\{'descr': '([<|][a-z][0-9])', 'fortran_order': False, 'shape': \((\d+),\), \} *\n$`)

func readNPY(t testing.TB, path string) npyArray {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 10 || string(b[:6]) != "\x93NUMPY" || b[6] != 1 || b[7] != 0 {
		t.Fatalf("%s: not an NPY 1.0 file: % x", path, b[:min(len(b), 10)])
	}
	hlen := int(binary.LittleEndian.Uint16(b[8:10]))
	if (10+hlen)%64 != 0 || len(b) < 10+hlen {
		t.Fatalf("%s: header length %d: want 10+len a multiple of 64 within the file", path, hlen)
	}
	m := npyDict.FindStringSubmatch(string(b[10 : 10+hlen]))
	if m == nil {
		t.Fatalf("%s: header %q", path, b[10:10+hlen])
	}
	n, _ := strconv.ParseInt(m[2], 10, 64)
	size := map[string]int64{"<i8": 8, "<i4": 4, "<f4": 4, "|u1": 1}[m[1]]
	if size == 0 {
		t.Fatalf("%s: dtype %s", path, m[1])
	}
	data := b[10+hlen:]
	if int64(len(data)) != n*size {
		t.Fatalf("%s: %d data bytes for %d elements of %s", path, len(data), n, m[1])
	}
	return npyArray{descr: m[1], n: n, data: data}
}

func (a npyArray) i64(i int64) int64 { return int64(binary.LittleEndian.Uint64(a.data[8*i:])) }
func (a npyArray) i32(i int64) int32 { return int32(binary.LittleEndian.Uint32(a.data[4*i:])) }
func (a npyArray) f32(i int64) float32 {
	return math.Float32frombits(binary.LittleEndian.Uint32(a.data[4*i:]))
}

// npyTable reads the files WriteNPY wrote into dir, checking their dtypes
// and lengths against NPYFiles.
type npyTable map[string]npyArray

func readNPYDir(t testing.TB, dir string, cfg datagen.Config) npyTable {
	t.Helper()
	tab := npyTable{}
	for _, f := range datagen.NPYFiles(cfg) {
		a := readNPY(t, filepath.Join(dir, f.Name))
		if a.descr != f.Descr {
			t.Fatalf("%s: dtype %s, want %s", f.Name, a.descr, f.Descr)
		}
		want := cfg.Rows
		if f.Part == "offsets" {
			want++
		}
		if f.Part != "values" && f.Part != "bytes" && a.n != want {
			t.Fatalf("%s: %d elements, want %d", f.Name, a.n, want)
		}
		tab[f.Name] = a
	}
	return tab
}

func (tab npyTable) list(name string, r int64) []int64 {
	off, vals := tab[name+".offsets.npy"], tab[name+".values.npy"]
	var out []int64
	for i := off.i64(r); i < off.i64(r+1); i++ {
		out = append(out, vals.i64(i))
	}
	return out
}

func (tab npyTable) str(name string, r int64) string {
	off := tab[name+".offsets.npy"]
	return string(tab[name+".bytes.npy"].data[off.i64(r):off.i64(r+1)])
}

func (tab npyTable) valid(name string, r int64) bool {
	v := tab[name+".valid.npy"].data[r]
	if v > 1 {
		panic(fmt.Sprintf("%s.valid[%d] = %d", name, r, v))
	}
	return v == 1
}

// row rebuilds row r of the table as a datagen.Row.
func (tab npyTable) row(cfg datagen.Config, r int64) datagen.Row {
	got := datagen.Row{
		RowID:  tab["row_id.npy"].i64(r),
		UserID: tab["user_id.npy"].i64(r),
		ItemID: tab["item_id.npy"].i64(r),
		Label:  tab["label.npy"].i32(r),
		Query:  tab.str("query", r),
	}
	for j := range cfg.Dense {
		got.Dense = append(got.Dense, tab[fmt.Sprintf("dense_%d.npy", j)].f32(r))
	}
	for j := range cfg.Cats {
		got.Cats = append(got.Cats, tab[fmt.Sprintf("cat_%d.npy", j)].i64(r))
	}
	for j := range cfg.Seqs {
		got.Seqs = append(got.Seqs, tab.list(fmt.Sprintf("seq_%d", j), r))
	}
	if cfg.Nullable {
		got.DenseOpt, got.DenseOptValid = tab["dense_opt.npy"].f32(r), tab.valid("dense_opt", r)
		got.CatOpt, got.CatOptValid = tab["cat_opt.npy"].i64(r), tab.valid("cat_opt", r)
		got.SeqOpt, got.SeqOptValid = tab.list("seq_opt", r), tab.valid("seq_opt", r)
		got.QueryOpt, got.QueryOptValid = tab.str("query_opt", r), tab.valid("query_opt", r)
	}
	return got
}

func equalRow(a, b datagen.Row) bool {
	eqF := func(x, y []float32) bool {
		return slices.EqualFunc(x, y, func(p, q float32) bool { return math.Float32bits(p) == math.Float32bits(q) })
	}
	return a.RowID == b.RowID && a.UserID == b.UserID && a.ItemID == b.ItemID && a.Label == b.Label &&
		eqF(a.Dense, b.Dense) && slices.Equal(a.Cats, b.Cats) &&
		slices.EqualFunc(a.Seqs, b.Seqs, func(p, q []int64) bool { return slices.Equal(p, q) }) &&
		a.Query == b.Query &&
		math.Float32bits(a.DenseOpt) == math.Float32bits(b.DenseOpt) && a.DenseOptValid == b.DenseOptValid &&
		a.CatOpt == b.CatOpt && a.CatOptValid == b.CatOptValid &&
		slices.Equal(a.SeqOpt, b.SeqOpt) && a.SeqOptValid == b.SeqOptValid &&
		a.QueryOpt == b.QueryOpt && a.QueryOptValid == b.QueryOptValid
}

func writeNPY(t testing.TB, cfg datagen.Config) string {
	t.Helper()
	dir := t.TempDir()
	if err := datagen.WriteNPY(context.Background(), dir, cfg); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestWriteNPYRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		desc   string
		mutate func(*datagen.Config)
	}{
		{"nullable", func(c *datagen.Config) {}},
		{"not nullable", func(c *datagen.Config) { c.Nullable = false }},
		{"no features", func(c *datagen.Config) { c.Dense, c.Cats, c.Seqs = 0, 0, 0 }},
		{"all null", func(c *datagen.Config) { c.NullFraction = 1 }},
		{"all sequences empty", func(c *datagen.Config) { c.SeqMeanLen, c.SeqMaxLen = 0, 0 }},
		{"empty table", func(c *datagen.Config) { c.Rows, c.Files = 0, 1 }},
		{"one row", func(c *datagen.Config) { c.Rows, c.Files = 1, 1 }},
		// Several chunks of 16384 rows, the last one short.
		{"several chunks", func(c *datagen.Config) {
			c.Rows, c.Dense, c.Cats, c.Seqs, c.SeqMeanLen, c.SeqMaxLen = 40000, 1, 1, 1, 3, 10
		}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			cfg := testConfig()
			tc.mutate(&cfg)
			dir := writeNPY(t, cfg)
			tab := readNPYDir(t, dir, cfg)
			g := datagen.NewGenerator(cfg)
			var want datagen.Row
			for r := range cfg.Rows {
				g.Fill(r, &want)
				if got := tab.row(cfg, r); !equalRow(got, want) {
					t.Fatalf("row %d:\n got %+v\nwant %+v", r, got, want)
				}
			}
			// Every list ends where its values do.
			for _, f := range datagen.NPYFiles(cfg) {
				if f.Part != "offsets" {
					continue
				}
				off := tab[f.Name]
				data := strings.TrimSuffix(f.Name, ".offsets.npy")
				vals, ok := tab[data+".values.npy"]
				if !ok {
					vals = tab[data+".bytes.npy"]
				}
				if off.i64(0) != 0 || off.i64(cfg.Rows) != vals.n {
					t.Errorf("%s: offsets run %d..%d over %d values", f.Name, off.i64(0), off.i64(cfg.Rows), vals.n)
				}
			}
			checkManifest(t, dir, cfg, tab)
			// Nothing but the files and the manifest.
			entries, _ := os.ReadDir(dir)
			if len(entries) != len(datagen.NPYFiles(cfg))+1 {
				var names []string
				for _, e := range entries {
					names = append(names, e.Name())
				}
				t.Errorf("dir holds %v", names)
			}
		})
	}
}

func checkManifest(t *testing.T, dir string, cfg datagen.Config, tab npyTable) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, datagen.NPYManifest))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Rows   int64
		Config datagen.Config
		Files  []datagen.NPYFile
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m.Rows != cfg.Rows || m.Config != cfg {
		t.Errorf("manifest rows %d config %+v", m.Rows, m.Config)
	}
	want := datagen.NPYFiles(cfg)
	if len(m.Files) != len(want) {
		t.Fatalf("manifest lists %d files, want %d", len(m.Files), len(want))
	}
	for i, f := range m.Files {
		w := want[i]
		w.Len = tab[w.Name].n
		if f != w {
			t.Errorf("manifest file %d: %+v, want %+v", i, f, w)
		}
	}
}

// TestWriteNPYLayoutIndependent: only the value-changing fields matter.
func TestWriteNPYLayoutIndependent(t *testing.T) {
	a := testConfig()
	b := a
	b.Files, b.RowGroupRows, b.Compression, b.Prefix = 1, 7, "zstd", "x"
	da, db := writeNPY(t, a), writeNPY(t, b)
	for _, f := range datagen.NPYFiles(a) {
		x, _ := os.ReadFile(filepath.Join(da, f.Name))
		y, _ := os.ReadFile(filepath.Join(db, f.Name))
		if string(x) != string(y) {
			t.Errorf("%s differs", f.Name)
		}
	}
}

// TestWriteNPYNumpy loads the files with numpy itself, when there is one.
func TestWriteNPYNumpy(t *testing.T) {
	py := "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	if exec.Command(py, "-c", "import numpy").Run() != nil {
		t.Skip("no numpy")
	}
	cfg := testConfig()
	dir := writeNPY(t, cfg)
	tab := readNPYDir(t, dir, cfg)
	script := `
import json, sys, numpy as np
out = {}
for f in json.load(open(sys.argv[1] + "/manifest.json"))["files"]:
    a = np.load(sys.argv[1] + "/" + f["name"], mmap_mode="r")
    out[f["name"]] = [a.dtype.str, list(a.shape), float(a.astype(np.float64).sum()), bool(a.flags.c_contiguous)]
print(json.dumps(out))
`
	outb, err := exec.Command(py, "-c", script, dir).CombinedOutput()
	if err != nil {
		t.Fatalf("numpy: %v\n%s", err, outb)
	}
	var got map[string][]any
	if err := json.Unmarshal(outb, &got); err != nil {
		t.Fatalf("%v: %s", err, outb)
	}
	for _, f := range datagen.NPYFiles(cfg) {
		a := tab[f.Name]
		var sum float64
		for i := range a.n {
			switch a.descr {
			case "<i8":
				sum += float64(a.i64(i))
			case "<i4":
				sum += float64(a.i32(i))
			case "<f4":
				sum += float64(a.f32(i))
			case "|u1":
				sum += float64(a.data[i])
			}
		}
		g := got[f.Name]
		if len(g) != 4 || g[0] != f.Descr || fmt.Sprint(g[1]) != fmt.Sprint([]any{float64(a.n)}) || g[3] != true {
			t.Errorf("%s: numpy sees %v, want %s (%d,)", f.Name, g, f.Descr, a.n)
			continue
		}
		if s := g[2].(float64); math.Abs(s-sum) > 1e-6*math.Max(1, math.Abs(sum)) {
			t.Errorf("%s: numpy sum %v, Go sum %v", f.Name, s, sum)
		}
	}
}

func TestWriteNPYInvalid(t *testing.T) {
	cfg := testConfig()
	cfg.Dense = -1
	var ce *datagen.ConfigError
	if err := datagen.WriteNPY(context.Background(), t.TempDir(), cfg); !errors.As(err, &ce) {
		t.Errorf("err = %v, want a *ConfigError", err)
	}
}

func TestWriteNPYCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dir := filepath.Join(t.TempDir(), "out")
	if err := datagen.WriteNPY(ctx, dir, testConfig()); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}

	// Cancelled part-way: no file is left behind.
	cfg := testConfig()
	cfg.Rows, cfg.Dense, cfg.Nullable = 300_000, 64, false
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			if m, _ := filepath.Glob(filepath.Join(dir, "*.tmp*")); len(m) > 0 {
				cancel()
				return
			}
			time.Sleep(50 * time.Microsecond)
		}
	}()
	err := datagen.WriteNPY(ctx, dir, cfg)
	if err == nil {
		t.Skip("WriteNPY finished before it could be cancelled")
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("%d files left after cancellation, first %s", len(entries), entries[0].Name())
	}
}
