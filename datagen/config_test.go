package datagen_test

import (
	"errors"
	"math"
	"testing"

	"github.com/lastmile/lastmile/datagen"
)

func TestDefaultConfigIsValid(t *testing.T) {
	if err := datagen.DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestValidate(t *testing.T) {
	f := func(desc, field string, mutate func(c *datagen.Config)) {
		t.Helper()
		c := datagen.DefaultConfig()
		mutate(&c)
		err := c.Validate()
		if field == "" {
			if err != nil {
				t.Errorf("%s: unexpected error %v", desc, err)
			}
			return
		}
		var ce *datagen.ConfigError
		if !errors.As(err, &ce) {
			t.Errorf("%s: got %v, want a *ConfigError for %s", desc, err, field)
			return
		}
		if ce.Field != field || ce.Allowed == "" {
			t.Errorf("%s: error names field %q (allowed %q), want %q", desc, ce.Field, ce.Allowed, field)
		}
	}
	f("negative rows", "Rows", func(c *datagen.Config) { c.Rows = -1 })
	f("zero rows, one file", "", func(c *datagen.Config) { c.Rows = 0 })
	f("zero rows, two files", "Files", func(c *datagen.Config) { c.Rows, c.Files = 0, 2 })
	f("zero row group rows", "RowGroupRows", func(c *datagen.Config) { c.RowGroupRows = 0 })
	f("zero files", "Files", func(c *datagen.Config) { c.Files = 0 })
	f("more files than rows", "Files", func(c *datagen.Config) { c.Rows, c.Files = 3, 4 })
	f("as many files as rows", "", func(c *datagen.Config) { c.Rows, c.Files = 4, 4 })
	f("unknown compression", "Compression", func(c *datagen.Config) { c.Compression = "lzo" })
	f("empty compression", "Compression", func(c *datagen.Config) { c.Compression = "" })
	f("zstd", "", func(c *datagen.Config) { c.Compression = "zstd" })
	f("gzip", "", func(c *datagen.Config) { c.Compression = "gzip" })
	f("brotli", "", func(c *datagen.Config) { c.Compression = "brotli" })
	f("none", "", func(c *datagen.Config) { c.Compression = "none" })
	f("negative dense", "Dense", func(c *datagen.Config) { c.Dense = -1 })
	f("too many dense", "Dense", func(c *datagen.Config) { c.Dense = datagen.MaxDense + 1 })
	f("no features", "", func(c *datagen.Config) { c.Dense, c.Cats, c.Seqs = 0, 0, 0 })
	f("negative cats", "Cats", func(c *datagen.Config) { c.Cats = -1 })
	f("too many seqs", "Seqs", func(c *datagen.Config) { c.Seqs = datagen.MaxSeqs + 1 })
	f("negative max len", "SeqMaxLen", func(c *datagen.Config) { c.SeqMaxLen = -1 })
	f("huge max len", "SeqMaxLen", func(c *datagen.Config) { c.SeqMaxLen = datagen.MaxSeqMaxLen + 1 })
	f("mean over max", "SeqMeanLen", func(c *datagen.Config) { c.SeqMeanLen = c.SeqMaxLen + 1 })
	f("negative mean", "SeqMeanLen", func(c *datagen.Config) { c.SeqMeanLen = -1 })
	f("mean equals max", "", func(c *datagen.Config) { c.SeqMeanLen = c.SeqMaxLen })
	f("negative null fraction", "NullFraction", func(c *datagen.Config) { c.NullFraction = -0.1 })
	f("null fraction over 1", "NullFraction", func(c *datagen.Config) { c.NullFraction = 1.5 })
	f("NaN null fraction", "NullFraction", func(c *datagen.Config) { c.NullFraction = math.NaN() })
	f("all nulls", "", func(c *datagen.Config) { c.Nullable, c.NullFraction = true, 1 })
	f("empty prefix", "Prefix", func(c *datagen.Config) { c.Prefix = "" })
	f("prefix with slash", "Prefix", func(c *datagen.Config) { c.Prefix = "a/b" })
	f("dot-dot prefix", "Prefix", func(c *datagen.Config) { c.Prefix = ".." })
	f("page version 3", "DataPageVersion", func(c *datagen.Config) { c.DataPageVersion = 3 })
	f("page version 0", "DataPageVersion", func(c *datagen.Config) { c.DataPageVersion = 0 })
	f("page version 2", "", func(c *datagen.Config) { c.DataPageVersion = 2 })
	f("tiny pages", "PageBytes", func(c *datagen.Config) { c.PageBytes = datagen.MinPageBytes - 1 })
	f("huge pages", "PageBytes", func(c *datagen.Config) { c.PageBytes = datagen.MaxPageBytes + 1 })
	f("negative page rows", "PageRows", func(c *datagen.Config) { c.PageRows = -1 })
	f("pages of 20000 rows", "", func(c *datagen.Config) { c.PageRows = 20000 })
}

func TestConfigErrorMessage(t *testing.T) {
	c := datagen.DefaultConfig()
	c.Compression = "lz4"
	const want = `datagen: invalid Config.Compression "lz4": allowed "snappy", "zstd", "gzip", "brotli" or "none"`
	if err := c.Validate(); err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
}

func TestFileRows(t *testing.T) {
	f := func(rows int64, files int) {
		t.Helper()
		c := datagen.DefaultConfig()
		c.Rows, c.Files = rows, files
		next := int64(0)
		for i := range files {
			first, end := c.FileRows(i)
			if first != next || end <= first {
				t.Fatalf("rows %d files %d: file %d has [%d, %d), want to start at %d and be non-empty", rows, files, i, first, end, next)
			}
			if n, even := end-first, rows/int64(files); n != even && n != even+1 {
				t.Fatalf("rows %d files %d: file %d has %d rows, want %d or %d", rows, files, i, n, even, even+1)
			}
			next = end
		}
		if next != rows {
			t.Fatalf("rows %d files %d: files end at %d", rows, files, next)
		}
	}
	f(1, 1)
	f(10, 3)
	f(20000, 3)
	f(7, 7)
	f(math.MaxInt64, datagen.MaxFiles)
}
