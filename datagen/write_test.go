package datagen_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/lastmile/lastmile/datagen"
	"github.com/parquet-go/parquet-go/format"
)

// testConfig is small enough to write and read back in well under a second
// but has several files, row groups and pages per chunk.
func testConfig() datagen.Config {
	c := datagen.DefaultConfig()
	c.Rows = 5000
	c.RowGroupRows = 1000
	c.Files = 3
	c.Dense = 4
	c.Cats = 8
	c.Seqs = 2
	c.SeqMeanLen = 20
	c.Nullable = true
	c.NullFraction = 0.05
	c.PageBytes = 16 << 10
	return c
}

func write(t testing.TB, cfg datagen.Config) []string {
	t.Helper()
	paths, err := datagen.Write(context.Background(), t.TempDir(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return paths
}

func TestWriteReadBack(t *testing.T) {
	for _, tc := range []struct {
		desc   string
		mutate func(*datagen.Config)
	}{
		{"snappy v1", func(c *datagen.Config) {}},
		{"zstd v2", func(c *datagen.Config) { c.Compression, c.DataPageVersion = "zstd", 2 }},
		{"none v1 one file", func(c *datagen.Config) { c.Compression, c.Files = "none", 1 }},
		{"not nullable", func(c *datagen.Config) { c.Nullable = false }},
		{"no features", func(c *datagen.Config) { c.Dense, c.Cats, c.Seqs = 0, 0, 0 }},
		{"all null", func(c *datagen.Config) { c.NullFraction = 1 }},
		{"no nulls", func(c *datagen.Config) { c.NullFraction = 0 }},
		{"all sequences empty", func(c *datagen.Config) { c.SeqMeanLen, c.SeqMaxLen = 0, 0 }},
		{"all sequences full", func(c *datagen.Config) { c.SeqMeanLen, c.SeqMaxLen = 7, 7 }},
		{"one row per group", func(c *datagen.Config) { c.Rows, c.RowGroupRows = 40, 1 }},
		{"one row per file", func(c *datagen.Config) { c.Rows, c.Files = 200, 200 }},
		{"pages of at most 300 rows", func(c *datagen.Config) { c.PageRows = 300 }},
		{"pages of 1 row", func(c *datagen.Config) { c.Rows, c.PageRows = 400, 1 }},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			cfg := testConfig()
			tc.mutate(&cfg)
			paths := write(t, cfg)
			if len(paths) != cfg.Files {
				t.Fatalf("%d paths, want %d", len(paths), cfg.Files)
			}
			for i, p := range paths {
				if filepath.Base(p) != cfg.FileName(i) {
					t.Errorf("path %d is %s, want %s", i, p, cfg.FileName(i))
				}
			}
			checkRows(t, cfg, readRows(t, cfg, paths...))
		})
	}
}

func TestFileLayout(t *testing.T) {
	for _, version := range []int{1, 2} {
		cfg := testConfig()
		cfg.DataPageVersion = version
		paths := write(t, cfg)
		cols := datagen.Schema(cfg)
		wantPage := format.DataPage
		if version == 2 {
			wantPage = format.DataPageV2
		}
		for i, p := range paths {
			pf := openFile(t, p)
			md := pf.Metadata()
			first, end := cfg.FileRows(i)
			if md.NumRows != end-first {
				t.Errorf("%s: %d rows, want %d", p, md.NumRows, end-first)
			}
			if want := int((end - first + cfg.RowGroupRows - 1) / cfg.RowGroupRows); len(md.RowGroups) != want {
				t.Errorf("%s: %d row groups, want %d", p, len(md.RowGroups), want)
			}
			got, ok := pf.Lookup(datagen.MetadataKey)
			if !ok {
				t.Fatalf("%s: no %s metadata", p, datagen.MetadataKey)
			}
			if c, err := datagen.ConfigFromMetadata(got); err != nil || c != cfg {
				t.Errorf("%s: metadata config %+v, %v; want %+v", p, c, err, cfg)
			}

			leaves := pf.Schema().Columns()
			for ci, c := range cols {
				if !slices.Equal(leaves[ci], c.Path()) {
					t.Errorf("leaf %d is %v, want %v", ci, leaves[ci], c.Path())
				}
				leaf, _ := pf.Schema().Lookup(c.Path()...)
				if got := leaf.Node.Type().PhysicalType().String(); got != c.Physical {
					t.Errorf("%s: physical type %s, want %s", c.Name, got, c.Physical)
				}
				top := pf.Schema().Fields()[ci]
				if top.Name() != c.Name || top.Optional() != c.Nullable {
					t.Errorf("field %d: %s optional=%v, want %s optional=%v", ci, top.Name(), top.Optional(), c.Name, c.Nullable)
				}
				var logical string
				if lt := top.Type().LogicalType(); lt != nil {
					switch lt.Value.(type) {
					case *format.ListType:
						logical = "LIST"
					case *format.StringType:
						logical = "STRING"
					}
				}
				if logical != c.Logical {
					t.Errorf("%s: logical type %q, want %q", c.Name, logical, c.Logical)
				}
				wantMaxDef := 0
				if c.Nullable {
					wantMaxDef++
				}
				if c.List {
					wantMaxDef++
				}
				if leaf.MaxDefinitionLevel != wantMaxDef {
					t.Errorf("%s: max definition level %d, want %d", c.Name, leaf.MaxDefinitionLevel, wantMaxDef)
				}
			}

			for ri, rg := range md.RowGroups {
				for ci, cc := range rg.Columns {
					c := cols[ci]
					var dictPages, dataPages int
					for _, st := range cc.MetaData.EncodingStats {
						switch st.PageType {
						case format.DictionaryPage:
							dictPages += int(st.Count)
							if st.Encoding != format.Plain {
								t.Errorf("%s rg %d: dictionary page encoded %s", c.Name, ri, st.Encoding)
							}
						case wantPage:
							dataPages += int(st.Count)
							want := format.Plain
							if c.Dict {
								want = format.RLEDictionary
							}
							if st.Encoding != want {
								t.Errorf("%s rg %d: data pages encoded %s, want %s", c.Name, ri, st.Encoding, want)
							}
						default:
							t.Errorf("%s rg %d: unexpected page type %s", c.Name, ri, st.PageType)
						}
					}
					if want := map[bool]int{true: 1}[c.Dict]; dictPages != want {
						t.Errorf("%s rg %d: %d dictionary pages, want %d", c.Name, ri, dictPages, want)
					}
					if dataPages == 0 {
						t.Errorf("%s rg %d: no data pages", c.Name, ri)
					}
					if (cc.MetaData.DictionaryPageOffset != 0) != c.Dict {
						t.Errorf("%s rg %d: dictionary page offset %d, dict %v", c.Name, ri, cc.MetaData.DictionaryPageOffset, c.Dict)
					}
					if c.List && ri == 0 && i == 0 && dataPages < 2 {
						t.Errorf("%s: %d data pages in the first chunk, want several (PageBytes %d)", c.Name, dataPages, cfg.PageBytes)
					}
				}
			}
		}
	}
}

func TestDeterministic(t *testing.T) {
	cfg := testConfig()
	a, b := write(t, cfg), write(t, cfg)
	for i := range a {
		x, err := os.ReadFile(a[i])
		if err != nil {
			t.Fatal(err)
		}
		y, err := os.ReadFile(b[i])
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(x, y) {
			t.Errorf("%s: two writes differ", filepath.Base(a[i]))
		}
	}

	// The layout does not change the rows.
	base := readRows(t, cfg, a...)
	other := cfg
	other.Files, other.RowGroupRows, other.Compression, other.PageBytes = 2, 777, "zstd", 1<<20
	got := readRows(t, other, write(t, other)...)
	if len(got) != len(base) {
		t.Fatalf("%d rows, want %d", len(got), len(base))
	}
	for i := range got {
		if d := diffRow(got[i], base[i]); d != "" {
			t.Fatalf("row %d differs between layouts: %s", i, d)
		}
	}

	// A different seed changes them.
	other = cfg
	other.Seed++
	if g := datagen.Expected(other, 7); g.UserID == base[7].UserID && slices.Equal(g.Cats, base[7].Cats) {
		t.Errorf("seed %d and %d give the same row 7", cfg.Seed, other.Seed)
	}
}

func TestWriteEmpty(t *testing.T) {
	cfg := testConfig()
	cfg.Rows, cfg.Files = 0, 1
	paths := write(t, cfg)
	if rows := readRows(t, cfg, paths...); len(rows) != 0 {
		t.Fatalf("read %d rows from an empty table", len(rows))
	}
	if n := openFile(t, paths[0]).NumRows(); n != 0 {
		t.Fatalf("%d rows", n)
	}
}

func TestWriteInvalidConfig(t *testing.T) {
	cfg := testConfig()
	cfg.RowGroupRows = 0
	dir := t.TempDir()
	_, err := datagen.Write(context.Background(), dir, cfg)
	var ce *datagen.ConfigError
	if !errors.As(err, &ce) || ce.Field != "RowGroupRows" {
		t.Fatalf("got %v, want a ConfigError for RowGroupRows", err)
	}
	assertEmptyDir(t, dir)
}

func TestWriteCancel(t *testing.T) {
	t.Run("before", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		dir := t.TempDir()
		if _, err := datagen.Write(ctx, dir, testConfig()); !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", err)
		}
		assertEmptyDir(t, dir)
	})
	t.Run("during", func(t *testing.T) {
		cfg := datagen.DefaultConfig()
		cfg.Rows = 1 << 30 // would take minutes
		cfg.Files = 4
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		dir := t.TempDir()
		start := time.Now()
		_, err := datagen.Write(ctx, dir, cfg)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v, want context.DeadlineExceeded", err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("Write took %v to stop", d)
		}
		assertEmptyDir(t, dir)
	})
}

func TestWriteBadDir(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := datagen.Write(context.Background(), file, testConfig()); err == nil {
		t.Fatal("Write into a path that is a file succeeded")
	}
}

func assertEmptyDir(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("left behind %s", e.Name())
	}
}

func BenchmarkWrite(b *testing.B) {
	for _, comp := range []string{"snappy", "zstd", "none"} {
		b.Run(comp, func(b *testing.B) {
			cfg := datagen.DefaultConfig()
			cfg.Rows = 1 << 17
			cfg.RowGroupRows = 1 << 15 // four row groups, built in parallel
			cfg.Compression = comp
			dir := b.TempDir()
			var size int64
			b.ReportAllocs()
			for b.Loop() {
				paths, err := datagen.Write(context.Background(), dir, cfg)
				if err != nil {
					b.Fatal(err)
				}
				size = 0
				for _, p := range paths {
					st, err := os.Stat(p)
					if err != nil {
						b.Fatal(err)
					}
					size += st.Size()
				}
			}
			b.SetBytes(size)
			b.ReportMetric(float64(cfg.Rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
