package datagen

import (
	"fmt"
	"slices"
	"strings"
)

// Config says what Write generates. Start from DefaultConfig and change
// fields: Write and Validate use a Config as given, so a zero field means
// zero, not "default". Only Rows, Seed, the feature counts, the sequence
// lengths and the null settings change the values; Files, RowGroupRows,
// Compression, DataPageVersion, PageBytes, PageRows and Prefix change only how they are laid out.
type Config struct {
	Rows         int64   // total rows, >= 0 (default 1_000_000)
	RowGroupRows int64   // rows per row group, >= 1; the last of a file may be short (default 131072)
	Files        int     // number of files the rows are split over, contiguously (default 1)
	Compression  string  // "snappy" (default), "zstd", "gzip", "brotli" or "none"
	Dense        int     // number of float32 dense features, 0..1024 (default 32)
	Cats         int     // number of skewed int64 categorical features, 0..1024 (default 8)
	Seqs         int     // number of list<int64> sequence features, 0..64 (default 2)
	SeqMeanLen   int     // mean sequence length before clamping to SeqMaxLen (default 50)
	SeqMaxLen    int     // longest sequence, 0..65536 (default 300, so some rows exceed 256)
	Nullable     bool    // add the nullable columns dense_opt, cat_opt, seq_opt, query_opt (default false)
	NullFraction float64 // expected fraction of nulls in each nullable column, 0..1 (default 0.01)
	Seed         uint64  // any value (default 1)
	Prefix       string  // file name prefix: files are Prefix-00000.parquet, ... (default "part")

	// DataPageVersion is the Parquet data page header version, 1 or 2
	// (default 1: what Spark and pyarrow write by default; parquet-go's own
	// default is 2).
	DataPageVersion int

	// PageBytes is the target size of a data page before compression
	// (default 1 MiB, as parquet-mr and pyarrow use). A page closes at the
	// end of the batch of rows that takes it past this size, so pages run
	// somewhat over. Small values give many pages per column chunk, which
	// decoder tests want.
	PageBytes int

	// PageRows, when above 0, also closes a data page of every column
	// once it holds that many rows, counted from the start of the row
	// group, as parquet-java (Spark's writer) and arrow-rs do by default
	// at 20,000. 0 (the default) closes pages by PageBytes alone, so a
	// row group's 8-byte scalar column of up to 131,072 rows is one page.
	PageRows int `json:",omitempty"`
}

// Limits on Config fields, checked by Validate.
const (
	MaxDense     = 1024
	MaxCats      = 1024
	MaxSeqs      = 64
	MaxSeqMaxLen = 1 << 16
	MaxFiles     = 100_000
	MinPageBytes = 1 << 10
	MaxPageBytes = 64 << 20
)

// DefaultConfig returns the configuration `lastmile gen` uses when given no
// flags: 1M rows in one snappy file of 131072-row row groups, 32 dense, 8
// categorical and 2 sequence features, no nullable columns.
func DefaultConfig() Config {
	return Config{
		Rows:            1_000_000,
		RowGroupRows:    131072,
		Files:           1,
		Compression:     "snappy",
		Dense:           32,
		Cats:            8,
		Seqs:            2,
		SeqMeanLen:      50,
		SeqMaxLen:       300,
		Nullable:        false,
		NullFraction:    0.01,
		Seed:            1,
		Prefix:          "part",
		DataPageVersion: 1,
		PageBytes:       1 << 20,
	}
}

// ConfigError reports a Config field that Validate rejected.
type ConfigError struct {
	Field   string // name of the Config field, e.g. "RowGroupRows"
	Value   any    // the rejected value
	Allowed string // what the field accepts, e.g. ">= 1"
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("datagen: invalid Config.%s %#v: allowed %s", e.Field, e.Value, e.Allowed)
}

// Validate returns a *ConfigError naming the first field that is out of
// range, or nil.
func (c Config) Validate() error {
	bad := func(field string, value any, allowed string) error {
		return &ConfigError{Field: field, Value: value, Allowed: allowed}
	}
	switch {
	case c.Rows < 0:
		return bad("Rows", c.Rows, ">= 0")
	case c.RowGroupRows < 1:
		return bad("RowGroupRows", c.RowGroupRows, ">= 1")
	case c.Files < 1 || c.Files > MaxFiles:
		return bad("Files", c.Files, fmt.Sprintf("1..%d", MaxFiles))
	case c.Rows > 0 && int64(c.Files) > c.Rows:
		return bad("Files", c.Files, fmt.Sprintf("at most Rows (%d), so that no file is empty", c.Rows))
	case c.Rows == 0 && c.Files != 1:
		return bad("Files", c.Files, "1 when Rows is 0 (one empty file)")
	case !slices.Contains(Compressions, c.Compression):
		return bad("Compression", c.Compression, `"snappy", "zstd", "gzip", "brotli" or "none"`)
	case c.Dense < 0 || c.Dense > MaxDense:
		return bad("Dense", c.Dense, fmt.Sprintf("0..%d", MaxDense))
	case c.Cats < 0 || c.Cats > MaxCats:
		return bad("Cats", c.Cats, fmt.Sprintf("0..%d", MaxCats))
	case c.Seqs < 0 || c.Seqs > MaxSeqs:
		return bad("Seqs", c.Seqs, fmt.Sprintf("0..%d", MaxSeqs))
	case c.SeqMaxLen < 0 || c.SeqMaxLen > MaxSeqMaxLen:
		return bad("SeqMaxLen", c.SeqMaxLen, fmt.Sprintf("0..%d", MaxSeqMaxLen))
	case c.SeqMeanLen < 0 || c.SeqMeanLen > c.SeqMaxLen:
		return bad("SeqMeanLen", c.SeqMeanLen, fmt.Sprintf("0..SeqMaxLen (%d)", c.SeqMaxLen))
	case !(c.NullFraction >= 0 && c.NullFraction <= 1): // also rejects NaN
		return bad("NullFraction", c.NullFraction, "0..1")
	case c.Prefix == "" || strings.ContainsAny(c.Prefix, `/\`+"\x00") || c.Prefix == "." || c.Prefix == "..":
		return bad("Prefix", c.Prefix, "a non-empty file name prefix without path separators")
	case c.DataPageVersion != 1 && c.DataPageVersion != 2:
		return bad("DataPageVersion", c.DataPageVersion, "1 or 2")
	case c.PageBytes < MinPageBytes || c.PageBytes > MaxPageBytes:
		return bad("PageBytes", c.PageBytes, fmt.Sprintf("%d..%d", MinPageBytes, MaxPageBytes))
	case c.PageRows < 0:
		return bad("PageRows", c.PageRows, "0 (pages closed by size alone) or more")
	}
	return nil
}

// FileName returns the name of file i (0-based): "part-00000.parquet".
func (c Config) FileName(i int) string {
	return fmt.Sprintf("%s-%05d.parquet", c.Prefix, i)
}

// FileRows returns the half-open range of row ids [first, end) that file i
// holds. Rows are split contiguously and as evenly as possible.
func (c Config) FileRows(i int) (first, end int64) {
	n := int64(c.Files)
	q, r := c.Rows/n, c.Rows%n // r*i stays small, so no overflow
	at := func(i int64) int64 { return q*i + r*i/n }
	return at(int64(i)), at(int64(i) + 1)
}
