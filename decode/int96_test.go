package decode

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	arrowpq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/lastmile/lastmile/column"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
)

// int96Bytes is t as Spark writes it: nanoseconds within the day, then
// the Julian day.
func int96Bytes(t time.Time) []byte {
	sec := t.Unix()
	days := sec / 86400
	if sec%86400 < 0 {
		days--
	}
	nod := (sec-days*86400)*1e9 + int64(t.Nanosecond())
	b := make([]byte, 12)
	binary.LittleEndian.PutUint64(b, uint64(nod))
	binary.LittleEndian.PutUint32(b[8:], uint32(int32(days+julianUnixEpoch)))
	return b
}

// maxInt96Days bounds |days since 1970| of an instant that int64
// nanoseconds hold.
const maxInt96Days = math.MaxInt64 / nanosPerDay

func TestInt96Value(t *testing.T) {
	for _, tc := range []struct {
		name string
		at   time.Time
	}{
		{"epoch", time.Unix(0, 0)},
		{"a nanosecond before the epoch", time.Unix(0, -1)},
		{"leap day", time.Date(2024, 2, 29, 12, 34, 56, 789012345, time.UTC)},
		{"1900", time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"the first whole day held", time.Date(1677, 9, 22, 0, 0, 0, 0, time.UTC)},
		{"the last whole day held", time.Date(2262, 4, 10, 23, 59, 59, 999999999, time.UTC)},
		{"the last instant held", time.Unix(0, math.MaxInt64)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := make([]byte, 8)
			if err := int96Values(dst, int96Bytes(tc.at), 1, 1); err != nil {
				t.Fatal(err)
			}
			if got, want := int64(binary.LittleEndian.Uint64(dst)), tc.at.UnixNano(); got != want {
				t.Fatalf("got %d, want %d (%v)", got, want, tc.at)
			}
		})
	}
	for _, tc := range []struct {
		name     string
		nod      int64
		jd       int32
		wantDate string
	}{
		{"the day before the first whole day", 0, int32(julianUnixEpoch - maxInt96Days - 1), "1677-09-21"},
		{"past the last instant", 86400e9 - 1, int32(julianUnixEpoch + maxInt96Days), "2262-04-11"},
		{"year 9999", 0, 5373484, "9999-12-31"},
		{"the smallest Julian day", 0, math.MinInt32, "about year"},
		{"the largest Julian day", 0, math.MaxInt32, "about year"},
		{"a negative time of day past the start", -2 * 86400e9, int32(julianUnixEpoch - maxInt96Days), "1677-09-22"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := int96Value(tc.nod, tc.jd, 1)
			if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), tc.wantDate) {
				t.Fatalf("got %v, want ErrUnsupported naming %s", err, tc.wantDate)
			}
		})
	}
}

// int96At is row i's timestamp in the INT96 test files: instants before
// and after 1970 down to the nanosecond, 400 distinct ones, so that the
// dictionary holds.
func int96At(i int) time.Time {
	base := []time.Time{
		time.Unix(0, 0), time.Unix(0, -1), time.Date(2024, 2, 29, 12, 34, 56, 789012345, time.UTC),
		time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(1677, 9, 22, 0, 0, 0, 7, time.UTC),
		time.Date(2262, 4, 10, 1, 2, 3, 4, time.UTC), time.Date(2001, 9, 9, 1, 46, 40, 0, time.UTC),
		time.Date(1969, 7, 20, 20, 17, 40, 0, time.UTC),
	}
	return base[i%len(base)].Add(time.Duration(i%50) * 1000000007)
}

// writeInt96File writes rows rows of ts (required), ts_opt (a null every
// seventh row) and ts_list (lists of 0-3 timestamps, a null every
// eleventh row) as arrow-go writes timestamps for Spark (INT96).
func writeInt96File(t testing.TB, path string, rows int, codec compress.Compression, v2 bool) {
	t.Helper()
	mem := memory.DefaultAllocator
	tsType := arrow.FixedWidthTypes.Timestamp_ns
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "ts", Type: tsType},
		{Name: "ts_opt", Type: tsType, Nullable: true},
		{Name: "ts_list", Type: arrow.ListOf(tsType), Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	req := b.Field(0).(*array.TimestampBuilder)
	opt := b.Field(1).(*array.TimestampBuilder)
	lst := b.Field(2).(*array.ListBuilder)
	elems := lst.ValueBuilder().(*array.TimestampBuilder)
	for i := range rows {
		req.Append(arrow.Timestamp(int96At(i).UnixNano()))
		if i%7 == 3 {
			opt.AppendNull()
		} else {
			opt.Append(arrow.Timestamp(int96At(i + 1).UnixNano()))
		}
		if i%11 == 5 {
			lst.AppendNull()
			continue
		}
		lst.Append(true)
		for k := range i % 4 {
			elems.Append(arrow.Timestamp(int96At(i + k).UnixNano()))
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	version := arrowpq.DataPageV1
	if v2 {
		version = arrowpq.DataPageV2
	}
	props := arrowpq.NewWriterProperties(arrowpq.WithCompression(codec),
		arrowpq.WithDataPageVersion(version), arrowpq.WithDataPageSize(1024), arrowpq.WithMaxRowGroupLength(2000),
		arrowpq.WithPageIndexEnabled(true))
	writeArrow(t, path, rec, props, pqarrow.NewArrowWriterProperties(pqarrow.WithDeprecatedInt96Timestamps(true)))
}

// int96Want is what rows [lo, hi) of writeInt96File's columns decode to.
func int96Want(lo, hi int) []column.Column {
	ts := column.Column{Name: "ts", Kind: column.Fixed, DType: column.Int64, Width: 1}
	opt := column.Column{Name: "ts_opt", Kind: column.Fixed, DType: column.Int64, Width: 1}
	lst := column.Column{Name: "ts_list", Kind: column.List, DType: column.Int64, Width: 1, Offsets: []int64{0}}
	put := func(c *column.Column, v int64) { c.Data = binary.LittleEndian.AppendUint64(c.Data, uint64(v)) }
	for i := lo; i < hi; i++ {
		put(&ts, int96At(i).UnixNano())
		if i%7 == 3 {
			put(&opt, 0)
		} else {
			put(&opt, int96At(i+1).UnixNano())
		}
		opt.Valid = append(opt.Valid, b2u8(i%7 != 3))
		if i%11 != 5 {
			for k := range i % 4 {
				put(&lst, int96At(i+k).UnixNano())
			}
		}
		lst.Offsets = append(lst.Offsets, int64(len(lst.Data)/8))
		lst.Valid = append(lst.Valid, b2u8(i%11 != 5))
	}
	ts.Len, opt.Len, lst.Len = hi-lo, hi-lo, hi-lo
	return []column.Column{ts, opt, lst}
}

// pgInt96Row is writeInt96PG's row: the columns of writeInt96File,
// dictionary-encoded (arrow-go writes INT96 PLAIN only; Spark's writer,
// like parquet-go, dictionary-encodes it).
type pgInt96Row struct {
	TS   deprecated.Int96   `parquet:"ts,dict"`
	Opt  *deprecated.Int96  `parquet:"ts_opt,dict,optional"`
	List []deprecated.Int96 `parquet:"ts_list,dict,list,optional"`
}

func pgInt96(t time.Time) deprecated.Int96 {
	b := int96Bytes(t)
	return deprecated.Int96{binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint32(b[4:]), binary.LittleEndian.Uint32(b[8:])}
}

// writeInt96PG writes writeInt96File's rows with parquet-go, at is row
// i's timestamp.
func writeInt96PG(t testing.TB, path string, rows int, codec string, version int, at func(int) time.Time) {
	t.Helper()
	rs := make([]pgInt96Row, rows)
	for i := range rs {
		rs[i].TS = pgInt96(at(i))
		if i%7 != 3 {
			v := pgInt96(at(i + 1))
			rs[i].Opt = &v
		}
		if i%11 != 5 {
			rs[i].List = []deprecated.Int96{}
			for k := range i % 4 {
				rs[i].List = append(rs[i].List, pgInt96(at(i+k)))
			}
		}
	}
	writePG(t, path, rs, codec, version)
}

// writePG writes rows with parquet-go: 2,000-row groups, 1 KiB pages.
func writePG[T any](t testing.TB, path string, rows []T, codec string, version int) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := parquet.NewGenericWriter[T](f, parquet.DataPageVersion(version), parquet.Compression(codecFor(codec)),
		parquet.MaxRowsPerRowGroup(2000), parquet.PageBufferSize(1024))
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestInt96 decodes INT96 timestamps in every page version, codec and
// encoding they come in (PLAIN from arrow-go, dictionaries from
// parquet-go), whole and through a selection, and checks them against
// the instants written and against arrow's reader.
func TestInt96(t *testing.T) {
	codecs := []struct {
		name  string
		codec compress.Compression
	}{{"none", compress.Codecs.Uncompressed}, {"snappy", compress.Codecs.Snappy}, {"zstd", compress.Codecs.Zstd}}
	for _, version := range []int{1, 2} {
		for _, c := range codecs {
			for _, writer := range []string{"arrow", "parquet-go"} {
				t.Run(fmt.Sprintf("v%d/%s/%s", version, c.name, writer), func(t *testing.T) {
					t.Parallel()
					p := filepath.Join(t.TempDir(), "ts.parquet")
					if writer == "arrow" {
						writeInt96File(t, p, 3000, c.codec, version == 2)
					} else {
						writeInt96PG(t, p, 3000, c.name, version, int96At)
					}
					plan := planPaths(t, PlanOptions{}, p)
					checkInt96Plan(t, plan, writer == "parquet-go")
					comparePaths(t, plan, PathOwn, PathArrow)
				})
			}
		}
	}
}

// TestInt96OutOfRange: a timestamp that int64 nanoseconds cannot hold is
// an error naming the column and the date, in a dictionary or a PLAIN
// page.
func TestInt96OutOfRange(t *testing.T) {
	type plainRow struct {
		TS deprecated.Int96 `parquet:"ts"`
	}
	type dictRow struct {
		TS deprecated.Int96 `parquet:"ts,dict"`
	}
	for _, dict := range []bool{false, true} {
		t.Run(fmt.Sprintf("dict=%v", dict), func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "ts.parquet")
			plain, dicts := make([]plainRow, 3000), make([]dictRow, 3000)
			for i := range plain {
				v := pgInt96(int96At(i))
				if i == 2500 {
					v = pgInt96(time.Date(2300, 1, 2, 0, 0, 0, 0, time.UTC))
				}
				plain[i].TS, dicts[i].TS = v, v
			}
			if dict {
				writePG(t, p, dicts, "snappy", 1)
			} else {
				writePG(t, p, plain, "snappy", 1)
			}
			if hasDictionary(t, p) != dict {
				t.Fatalf("a dictionary page %v, want %v", !dict, dict)
			}
			plan := planPaths(t, PlanOptions{}, p)
			d := NewDecoder(plan.Fields)
			defer d.Close()
			var b column.Batch
			if err := d.Decode(context.Background(), plan.Units[0], &b); err != nil {
				t.Fatalf("the first row group, every date in range: %v", err)
			}
			err := d.Decode(context.Background(), plan.Units[1], &b)
			if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), `column "ts"`) || !strings.Contains(err.Error(), "2300-01-02") {
				t.Fatalf("got %v, want ErrUnsupported naming column ts and 2300-01-02", err)
			}
		})
	}
}

func checkInt96Plan(t *testing.T, plan *Plan, dict bool) {
	t.Helper()
	if md := plan.Files[0]; dict != hasDictionary(t, md.Path) {
		t.Fatalf("%s: a dictionary page %v, want %v", md.Path, !dict, dict)
	}
	kinds := []column.Kind{column.Fixed, column.Fixed, column.List}
	for i, f := range plan.Fields {
		if f.DType != column.Int64 || f.Kind != kinds[i] || !f.isInt96() {
			t.Fatalf("field %s: %v %v physical %d, want %v int64 from INT96", f.Name, f.Kind, f.DType, f.Physical, kinds[i])
		}
	}
	sd := NewDecoder(plan.Fields) // decodes selections
	defer sd.Close()
	row := eachUnit(t, plan, func(u Unit, b *column.Batch, first int) {
		want := int96Want(first, first+int(u.Rows))
		for ci := range want {
			if diff := diffColumn(&b.Columns[ci], &want[ci]); diff != "" {
				t.Fatalf("unit %d: %s", u.Seq, diff)
			}
		}
		// Late materialization: every fifth row, gathered from the pages.
		sel := stride(u.Rows, 5, 2)
		if err := sd.Open(context.Background(), u); err != nil {
			t.Fatal(err)
		}
		for ci := range want {
			var got column.Column
			if err := sd.DecodeColumn(ci, sel, &got); err != nil {
				t.Fatal(err)
			}
			var w column.Batch
			w.Gather(&column.Batch{Columns: []column.Column{want[ci]}, Rows: want[ci].Len}, sel)
			if diff := diffColumn(&got, &w.Columns[0]); diff != "" {
				t.Fatalf("unit %d, selected rows: %s", u.Seq, diff)
			}
		}
	})
	if row != 3000 {
		t.Fatalf("decoded %d rows, want 3000", row)
	}
}

// hasDictionary reports whether path's first column chunk has a
// dictionary page.
func hasDictionary(t *testing.T, path string) bool {
	t.Helper()
	r, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cc, err := r.MetaData().RowGroup(0).ColumnChunk(0)
	if err != nil {
		t.Fatal(err)
	}
	return cc.HasDictionaryPage()
}

// FuzzInt96: any 12 bytes convert to the instant exact arithmetic gives,
// or, when int64 nanoseconds cannot hold it, to ErrUnsupported; never to
// a wrapped value.
func FuzzInt96(f *testing.F) {
	f.Add(int96Bytes(time.Unix(0, 0)))
	f.Add(int96Bytes(time.Unix(0, math.MaxInt64)))
	f.Add(int96Bytes(time.Date(1677, 9, 21, 12, 0, 0, 0, time.UTC)))
	f.Add(bytes.Repeat([]byte{0xff}, 12))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < 12 {
			return
		}
		nod := int64(binary.LittleEndian.Uint64(b))
		jd := int32(binary.LittleEndian.Uint32(b[8:]))
		ns := new(big.Int).Mul(big.NewInt(int64(jd)-julianUnixEpoch), big.NewInt(nanosPerDay))
		ns.Add(ns, big.NewInt(nod))
		days := int64(jd) - julianUnixEpoch
		for _, unit := range []int64{1, 1e3, 1e6} {
			exact := new(big.Int).Div(ns, big.NewInt(unit)) // Euclidean: rounded down for a positive unit
			dst := make([]byte, 8)
			err := int96Values(dst, b, 1, unit)
			maxDays := math.MaxInt64 / (nanosPerDay / unit)
			switch got := int64(binary.LittleEndian.Uint64(dst)); {
			case err == nil && !exact.IsInt64():
				t.Fatalf("nod %d jd %d unit %d: %d, but the instant %v is out of range", nod, jd, unit, got, exact)
			case err == nil && got != exact.Int64():
				t.Fatalf("nod %d jd %d unit %d: %d, want %v", nod, jd, unit, got, exact)
			case err != nil && !errors.Is(err, ErrUnsupported):
				t.Fatalf("nod %d jd %d unit %d: %v", nod, jd, unit, err)
			case err != nil && exact.IsInt64() && days >= -maxDays && days <= maxDays:
				t.Fatalf("nod %d jd %d unit %d: %v, but %v is in range", nod, jd, unit, err, exact)
			}
		}
	})
}
