package decode

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/lastmile/lastmile/column"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/compress/brotli"
	"github.com/parquet-go/parquet-go/compress/gzip"
	"github.com/parquet-go/parquet-go/compress/lz4"
	"github.com/parquet-go/parquet-go/compress/snappy"
	"github.com/parquet-go/parquet-go/compress/uncompressed"
	"github.com/parquet-go/parquet-go/compress/zstd"
)

// tRow is the row type of the files the tests write themselves: every
// column kind lastmile decodes, plain and dictionary, required and
// optional, lists with empty and null entries.
type tRow struct {
	RowID    int64     `parquet:"row_id"`
	Label    int32     `parquet:"label"`
	Dense    float32   `parquet:"dense_0"`
	D64      float64   `parquet:"d64"`
	Flag     bool      `parquet:"flag"`
	Cat      int64     `parquet:"cat_0,dict"`
	CatI32   int32     `parquet:"cat_i32,dict"`
	Seq      []int64   `parquet:"seq_0,list"`
	SeqF     []float32 `parquet:"seq_f,list"`
	Query    string    `parquet:"query,dict"`
	Name     string    `parquet:"name"`
	DenseOpt *float32  `parquet:"dense_opt,optional"`
	CatOpt   *int64    `parquet:"cat_opt,optional,dict"`
	SeqOpt   []int64   `parquet:"seq_opt,optional,list"`
	QueryOpt *string   `parquet:"query_opt,optional,dict"`
	NameOpt  *string   `parquet:"name_opt,optional"`
	SplitF   float32   `parquet:"split_f,split"`
	SplitOpt *float64  `parquet:"split_opt,optional,split"`
}

// mix is a cheap deterministic hash.
func mix(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

func makeRow(i int64) tRow {
	h := mix(uint64(i) + 1)
	r := tRow{
		RowID:  i,
		Label:  int32(h % 2),
		Dense:  float32(i) * 0.5,
		D64:    float64(i) / 3,
		Flag:   h&4 != 0,
		Cat:    int64(h % 37),
		CatI32: int32(h % 11),
		Query:  fmt.Sprintf("q%d", h%13),
		Name:   fmt.Sprintf("name-%d", i),
	}
	n := int(h>>8) % 12
	if h%17 == 0 {
		n = 0
	}
	for k := range n {
		r.Seq = append(r.Seq, i*100+int64(k))
	}
	for k := range n % 5 {
		r.SeqF = append(r.SeqF, float32(k)+0.25)
	}
	if h%9 != 0 {
		v := float32(i) + 0.125
		r.DenseOpt = &v
	}
	if h%7 != 1 {
		v := int64(h % 5)
		r.CatOpt = &v
	}
	switch h % 6 {
	case 0: // null list
	case 1:
		r.SeqOpt = []int64{}
	default:
		for k := range int(h>>16) % 6 {
			r.SeqOpt = append(r.SeqOpt, -i-int64(k))
		}
		if len(r.SeqOpt) == 0 {
			r.SeqOpt = []int64{}
		}
	}
	if h%11 != 3 {
		s := fmt.Sprintf("o%d", h%4)
		r.QueryOpt = &s
	}
	if h%5 != 2 {
		s := fmt.Sprintf("n%d", i%100)
		r.NameOpt = &s
	}
	r.SplitF = float32(i) * 1.5
	if h%3 != 0 {
		v := float64(i) * -0.75
		r.SplitOpt = &v
	}
	return r
}

// fileSpec says how a test file is written.
type fileSpec struct {
	rows, rowGroupRows int64
	first              int64 // row id of the first row
	pageVersion        int
	codec              string
	pageBytes          int
}

func codecFor(name string) compress.Codec {
	switch name {
	case "snappy":
		return &snappy.Codec{}
	case "zstd":
		return &zstd.Codec{}
	case "lz4":
		return &lz4.Codec{}
	case "lz4-hadoop": // the deprecated LZ4 codec as parquet-mr writes it (lz4_test.go)
		return &lz4Writer{block: 256 << 10, chunk: 256 << 10}
	case "lz4-hadoop-chunked":
		return &lz4Writer{block: 1000, chunk: 300}
	case "lz4-bare":
		return &lz4Writer{bare: true}
	case "gzip":
		return &gzip.Codec{}
	case "brotli":
		return &brotli.Codec{}
	}
	return &uncompressed.Codec{}
}

func writeFile(t testing.TB, path string, s fileSpec) {
	t.Helper()
	if s.pageVersion == 0 {
		s.pageVersion = 2
	}
	if s.rowGroupRows == 0 {
		s.rowGroupRows = s.rows
	}
	var buf bytes.Buffer
	opts := []parquet.WriterOption{
		parquet.DataPageVersion(s.pageVersion),
		parquet.Compression(codecFor(s.codec)),
		parquet.MaxRowsPerRowGroup(s.rowGroupRows),
	}
	if s.pageBytes > 0 {
		opts = append(opts, parquet.PageBufferSize(s.pageBytes))
	}
	w := parquet.NewGenericWriter[tRow](&buf, opts...)
	batch := make([]tRow, 0, 256)
	for i := s.first; i < s.first+s.rows; i++ {
		batch = append(batch, makeRow(i))
		if len(batch) == cap(batch) || i == s.first+s.rows-1 {
			if _, err := w.Write(batch); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// expectColumn builds the column a decoder must produce for the named
// field over rows ids (in order).
func expectColumn(name string, ids []int64) column.Column {
	if len(ids) == 0 {
		c := expectColumn(name, []int64{1})
		c.Len, c.Data, c.Valid = 0, []byte{}, nil
		if c.Offsets != nil {
			c.Offsets = []int64{0}
		}
		return c
	}
	c := column.Column{Name: name, Width: 1, Len: len(ids)}
	var valid []byte
	anyNull := false
	putFixed := func(dt column.DType, v uint64, ok bool) {
		c.Kind, c.DType = column.Fixed, dt
		var b [8]byte
		if ok {
			binary.LittleEndian.PutUint64(b[:], v)
		}
		c.Data = append(c.Data, b[:dt.Size()]...)
		valid = append(valid, b2u8(ok))
		anyNull = anyNull || !ok
	}
	putList := func(dt column.DType, vals []uint64, ok bool) {
		c.Kind, c.DType = column.List, dt
		if c.Offsets == nil {
			c.Offsets = []int64{0}
		}
		for _, v := range vals {
			var b [8]byte
			binary.LittleEndian.PutUint64(b[:], v)
			c.Data = append(c.Data, b[:dt.Size()]...)
		}
		c.Offsets = append(c.Offsets, c.Offsets[len(c.Offsets)-1]+int64(len(vals)))
		valid = append(valid, b2u8(ok))
		anyNull = anyNull || !ok
	}
	putBytes := func(s string, ok bool) {
		c.Kind, c.DType = column.Bytes, column.Uint8
		if c.Offsets == nil {
			c.Offsets = []int64{0}
		}
		c.Data = append(c.Data, s...)
		c.Offsets = append(c.Offsets, int64(len(c.Data)))
		valid = append(valid, b2u8(ok))
		anyNull = anyNull || !ok
	}
	i64s := func(v []int64) (out []uint64) {
		for _, x := range v {
			out = append(out, uint64(x))
		}
		return
	}
	for _, id := range ids {
		r := makeRow(id)
		switch name {
		case "row_id":
			putFixed(column.Int64, uint64(r.RowID), true)
		case "label":
			putFixed(column.Int32, uint64(uint32(r.Label)), true)
		case "dense_0":
			putFixed(column.Float32, uint64(math.Float32bits(r.Dense)), true)
		case "d64":
			putFixed(column.Float64, math.Float64bits(r.D64), true)
		case "flag":
			putFixed(column.Bool, uint64(b2u8(r.Flag)), true)
		case "cat_0":
			putFixed(column.Int64, uint64(r.Cat), true)
		case "cat_i32":
			putFixed(column.Int32, uint64(uint32(r.CatI32)), true)
		case "seq_0":
			putList(column.Int64, i64s(r.Seq), true)
		case "seq_f":
			var v []uint64
			for _, x := range r.SeqF {
				v = append(v, uint64(math.Float32bits(x)))
			}
			putList(column.Float32, v, true)
		case "query":
			putBytes(r.Query, true)
		case "name":
			putBytes(r.Name, true)
		case "dense_opt":
			var v uint64
			if r.DenseOpt != nil {
				v = uint64(math.Float32bits(*r.DenseOpt))
			}
			putFixed(column.Float32, v, r.DenseOpt != nil)
		case "cat_opt":
			var v uint64
			if r.CatOpt != nil {
				v = uint64(*r.CatOpt)
			}
			putFixed(column.Int64, v, r.CatOpt != nil)
		case "seq_opt":
			putList(column.Int64, i64s(r.SeqOpt), r.SeqOpt != nil)
		case "query_opt":
			s := ""
			if r.QueryOpt != nil {
				s = *r.QueryOpt
			}
			putBytes(s, r.QueryOpt != nil)
		case "name_opt":
			s := ""
			if r.NameOpt != nil {
				s = *r.NameOpt
			}
			putBytes(s, r.NameOpt != nil)
		case "split_f":
			putFixed(column.Float32, uint64(math.Float32bits(r.SplitF)), true)
		case "split_opt":
			var v uint64
			if r.SplitOpt != nil {
				v = math.Float64bits(*r.SplitOpt)
			}
			putFixed(column.Float64, v, r.SplitOpt != nil)
		default:
			panic("expectColumn: unknown column " + name)
		}
	}
	if c.Data == nil {
		c.Data = []byte{}
	}
	if c.Kind != column.Fixed && c.Offsets == nil {
		c.Offsets = []int64{0}
	}
	if anyNull {
		c.Valid = valid
	}
	return c
}

// diffColumn describes the first difference between got and want, or "".
func diffColumn(got, want *column.Column) string {
	switch {
	case got.Name != want.Name:
		return fmt.Sprintf("name %q, want %q", got.Name, want.Name)
	case got.Len != want.Len:
		return fmt.Sprintf("%s: len %d, want %d", want.Name, got.Len, want.Len)
	case got.DType != want.DType || got.Kind != want.Kind || got.Width != 1:
		return fmt.Sprintf("%s: %v %v width %d, want %v %v", want.Name, got.Kind, got.DType, got.Width, want.Kind, want.DType)
	case (got.Valid == nil) != (want.Valid == nil):
		return fmt.Sprintf("%s: valid nil %v, want nil %v", want.Name, got.Valid == nil, want.Valid == nil)
	case !bytes.Equal(got.Valid, want.Valid):
		return fmt.Sprintf("%s: validity differs", want.Name)
	}
	if err := got.Check(); err != nil {
		return err.Error()
	}
	if want.Kind != column.Fixed {
		for i := range want.Offsets {
			if got.Offsets[i] != want.Offsets[i] {
				return fmt.Sprintf("%s: offsets[%d] = %d, want %d", want.Name, i, got.Offsets[i], want.Offsets[i])
			}
		}
	}
	if !bytes.Equal(got.Data, want.Data) {
		size := want.DType.Size()
		for i := 0; i < len(want.Data) && i < len(got.Data); i += size {
			if !bytes.Equal(got.Data[i:i+size], want.Data[i:i+size]) {
				return fmt.Sprintf("%s: element %d = %x, want %x", want.Name, i/size, got.Data[i:i+size], want.Data[i:i+size])
			}
		}
		return fmt.Sprintf("%s: %d data bytes, want %d", want.Name, len(got.Data), len(want.Data))
	}
	return ""
}

var allColumns = []string{"row_id", "label", "dense_0", "d64", "flag", "cat_0", "cat_i32", "seq_0", "seq_f",
	"query", "name", "dense_opt", "cat_opt", "seq_opt", "query_opt", "name_opt", "split_f", "split_opt"}
