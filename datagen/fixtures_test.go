package datagen_test

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/lastmile/lastmile/datagen"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

var update = flag.Bool("update", false, "regenerate the fixtures in ../testdata instead of checking them")

const testdata = "../testdata"

// fixtures are the generated tables under testdata/, by directory. Keep
// testdata/README.md in step.
func fixtures() map[string]datagen.Config {
	small := datagen.DefaultConfig()
	small.Rows = 10_000
	small.RowGroupRows = 2048
	small.Files = 3
	small.Dense = 8
	small.SeqMeanLen = 10
	small.Nullable = true
	small.NullFraction = 0.05
	small.PageBytes = 16 << 10

	zstd := small
	zstd.Rows, zstd.RowGroupRows, zstd.Files = 2000, 1000, 1
	zstd.Compression, zstd.DataPageVersion, zstd.PageBytes = "zstd", 2, 1<<20

	none := zstd
	none.Rows, none.RowGroupRows = 2000, 2000
	none.Compression, none.DataPageVersion, none.Nullable = "none", 1, false

	empty := none
	empty.Rows = 0

	return map[string]datagen.Config{"small": small, "zstd": zstd, "none": none, "empty": empty}
}

// corruptBase is the valid table the corrupt fixtures are cut from.
func corruptBase() datagen.Config {
	c := datagen.DefaultConfig()
	c.Rows, c.RowGroupRows = 1000, 500
	c.Dense, c.Cats, c.Seqs, c.SeqMeanLen = 4, 4, 1, 10
	c.PageBytes = 4 << 10
	return c
}

// TestGenerateFixtures checks that regenerating every fixture gives
// byte-identical files: the generator is deterministic and the fixtures are
// what this code writes. With -update it rewrites them instead:
//
//	go test ./datagen -run TestGenerateFixtures -update
func TestGenerateFixtures(t *testing.T) {
	if runtime.GOARCH != "amd64" && !*update {
		// Values are the same everywhere, but compressors may choose other
		// matches in their pure-Go or other-assembly versions.
		t.Skip("fixtures are checked byte for byte on amd64 only")
	}
	tmp := t.TempDir()
	for dir, cfg := range fixtures() {
		paths, err := datagen.Write(context.Background(), filepath.Join(tmp, dir), cfg)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		for _, p := range paths {
			checkFixture(t, filepath.Join(dir, filepath.Base(p)), mustRead(t, p))
		}
	}

	base, err := datagen.Write(context.Background(), filepath.Join(tmp, "corrupt"), corruptBase())
	if err != nil {
		t.Fatal(err)
	}
	valid := mustRead(t, base[0])
	checkFixture(t, "corrupt/truncated.parquet", valid[:len(valid)/2])
	checkFixture(t, "corrupt/garbage.parquet", garbage(valid))
	checkFixture(t, "corrupt/badpage.parquet", badPage(t, valid, base[0]))

	readme := string(mustRead(t, filepath.Join(testdata, "README.md")))
	for dir, cfg := range fixtures() {
		for i := range cfg.Files {
			if name := dir + "/" + cfg.FileName(i); !strings.Contains(readme, name) {
				t.Errorf("testdata/README.md does not mention %s", name)
			}
		}
	}
}

// garbage breaks both magic numbers and the footer length of a valid file.
func garbage(valid []byte) []byte {
	b := bytes.Clone(valid)
	copy(b, "XAR1")
	copy(b[len(b)-8:], "\xff\xff\xff\x7fPAR0")
	return b
}

// badPage scrambles the payload of the first data page of seq_0 in row
// group 0, leaving its page header and the footer intact: the snappy
// block, its length prefix included, is XORed with 0x5a, so decompressing
// fails (and the page CRC no longer matches).
func badPage(t *testing.T, valid []byte, path string) []byte {
	t.Helper()
	start, end := seq0FirstPage(t, valid, path)
	b := bytes.Clone(valid)
	for i := start; i < end; i++ {
		b[i] ^= 0x5a
	}
	return b
}

// seq0FirstPage returns where the payload of the first data page of seq_0
// in row group 0 lies in data, the bytes of the file at path.
func seq0FirstPage(t *testing.T, data []byte, path string) (start, end int64) {
	t.Helper()
	pf := openFile(t, path)
	var chunk *format.ColumnChunk
	for i, c := range datagen.Schema(corruptBase()) {
		if c.Name == "seq_0" {
			chunk = &pf.Metadata().RowGroups[0].Columns[i]
		}
	}
	if chunk == nil {
		t.Fatal("BUG: no seq_0 column")
	}
	off := chunk.MetaData.DataPageOffset
	r := bytes.NewReader(data[off:])
	var header format.PageHeader
	if err := thrift.NewDecoder(new(thrift.CompactProtocol).NewReader(r)).Decode(&header); err != nil {
		t.Fatalf("decode page header: %v", err)
	}
	if header.Type != format.DataPage {
		t.Fatalf("page at %d is a %s, want a data page", off, header.Type)
	}
	start = off + int64(len(data[off:])-r.Len())
	end = start + int64(header.CompressedPageSize)
	if end > off+chunk.MetaData.TotalCompressedSize {
		t.Fatalf("page [%d, %d) overruns its chunk", start, end)
	}
	return start, end
}

func checkFixture(t *testing.T, name string, data []byte) {
	t.Helper()
	path := filepath.Join(testdata, filepath.FromSlash(name))
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	old, err := os.ReadFile(path)
	if err != nil {
		t.Errorf("%v (regenerate with go test ./datagen -run TestGenerateFixtures -update)", err)
		return
	}
	if !bytes.Equal(old, data) {
		t.Errorf("testdata/%s differs from what the generator writes now (%d bytes, was %d); if the change is intended, regenerate with -update and say why in the commit", name, len(data), len(old))
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFixturesReadBack reads the committed fixtures with parquet-go and
// checks every row against Expected, using the Config each file carries.
func TestFixturesReadBack(t *testing.T) {
	for dir, cfg := range fixtures() {
		var paths []string
		for i := range cfg.Files {
			paths = append(paths, filepath.Join(testdata, dir, cfg.FileName(i)))
		}
		got, ok := openFile(t, paths[0]).Lookup(datagen.MetadataKey)
		if !ok {
			t.Fatalf("%s: no config metadata", dir)
		}
		meta, err := datagen.ConfigFromMetadata(got)
		if err != nil || meta != cfg {
			t.Fatalf("%s: metadata config %+v (%v), want %+v", dir, meta, err, cfg)
		}
		checkRows(t, cfg, readRows(t, cfg, paths...))
	}
}

// TestCorruptFixtures checks that parquet-go rejects each corrupt fixture
// where its README entry says a reader should.
func TestCorruptFixtures(t *testing.T) {
	open := func(name string) error {
		f, err := os.Open(filepath.Join(testdata, "corrupt", name))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		st, _ := f.Stat()
		_, err = parquetOpen(f, st.Size())
		return err
	}
	for _, name := range []string{"truncated.parquet", "garbage.parquet"} {
		if err := open(name); err == nil {
			t.Errorf("%s: opened without error", name)
		}
	}
	if err := open("badpage.parquet"); err != nil {
		t.Fatalf("badpage.parquet: footer should be valid: %v", err)
	}
	bad := filepath.Join(testdata, "corrupt", "badpage.parquet")
	if err := readAllPages(bad); err == nil {
		t.Error("badpage.parquet: read every page without error")
	} else {
		t.Logf("badpage.parquet: %v", err)
	}
	// A reader that skips the CRC still fails to decompress the page.
	data := mustRead(t, bad)
	start, end := seq0FirstPage(t, data, bad)
	if _, err := s2.Decode(nil, data[start:end]); err == nil {
		t.Error("badpage.parquet: scrambled page payload decompresses")
	} else {
		t.Logf("badpage.parquet: snappy: %v", err)
	}
}
