package datagen

import (
	"fmt"
	"reflect"

	"github.com/klauspost/compress/s2"
	"github.com/lastmile/lastmile/column"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/compress/brotli"
	"github.com/parquet-go/parquet-go/compress/gzip"
	"github.com/parquet-go/parquet-go/compress/zstd"
	"github.com/parquet-go/parquet-go/encoding"
	"github.com/parquet-go/parquet-go/format"
)

// ColumnInfo describes one top-level column of the files Write produces.
type ColumnInfo struct {
	Name string
	// Physical is the Parquet physical type of the leaf values: "INT32",
	// "INT64", "FLOAT" or "BYTE_ARRAY".
	Physical string
	// Logical is the Parquet logical type of the column: "" for none,
	// "STRING" (BYTE_ARRAY with the UTF8 converted type) or "LIST".
	Logical string
	// DType and Kind are what a decoder turns the column into: Fixed columns
	// of Int32/Int64/Float32, List columns of Int64, Bytes columns (Uint8)
	// for strings.
	DType column.DType
	Kind  column.Kind
	// Nullable is true for an OPTIONAL column. A list's elements are always
	// required; only the list itself may be null.
	Nullable bool
	// List is true for a 3-level LIST: <name> (LIST) { repeated group list {
	// required int64 element } }, so the leaf path is <name>.list.element.
	List bool
	// Dict is true when the column's chunks are dictionary encoded: one
	// PLAIN dictionary page, then RLE_DICTIONARY data pages. Otherwise its
	// data pages are PLAIN.
	Dict bool
	// Cardinality bounds id columns and list elements: values are in
	// [0, Cardinality). 0 for columns that are not ids (row_id is in
	// [0, Rows)).
	Cardinality int64
}

// Path returns the column's leaf path in the Parquet schema.
func (c ColumnInfo) Path() []string {
	if c.List {
		return []string{c.Name, "list", "element"}
	}
	return []string{c.Name}
}

// Schema describes the columns Write produces for cfg, in file order. Every
// column has exactly one leaf, so the i-th ColumnInfo is leaf column i.
func Schema(cfg Config) []ColumnInfo {
	i64 := func(name string, card int64, dict, nullable bool) ColumnInfo {
		return ColumnInfo{Name: name, Physical: "INT64", DType: column.Int64, Kind: column.Fixed,
			Cardinality: card, Dict: dict, Nullable: nullable}
	}
	f32 := func(name string, nullable bool) ColumnInfo {
		return ColumnInfo{Name: name, Physical: "FLOAT", DType: column.Float32, Kind: column.Fixed, Nullable: nullable}
	}
	str := func(name string, nullable bool) ColumnInfo {
		return ColumnInfo{Name: name, Physical: "BYTE_ARRAY", Logical: "STRING", DType: column.Uint8, Kind: column.Bytes,
			Dict: true, Nullable: nullable}
	}
	list := func(name string, card int64, nullable bool) ColumnInfo {
		return ColumnInfo{Name: name, Physical: "INT64", Logical: "LIST", DType: column.Int64, Kind: column.List,
			List: true, Cardinality: card, Nullable: nullable}
	}
	cols := []ColumnInfo{
		i64("row_id", 0, false, false),
		i64("user_id", Users, false, false),
		i64("item_id", Items, false, false),
		{Name: "label", Physical: "INT32", DType: column.Int32, Kind: column.Fixed, Dict: true, Cardinality: 2},
	}
	for j := range cfg.Dense {
		cols = append(cols, f32(fmt.Sprintf("dense_%d", j), false))
	}
	for j := range cfg.Cats {
		card := CatCardinality(j)
		cols = append(cols, i64(fmt.Sprintf("cat_%d", j), card, card <= DictMaxCardinality, false))
	}
	for j := range cfg.Seqs {
		cols = append(cols, list(fmt.Sprintf("seq_%d", j), SeqCardinality(j), false))
	}
	cols = append(cols, str("query", false))
	if cfg.Nullable {
		cols = append(cols,
			f32("dense_opt", true),
			i64("cat_opt", CatOptCard, true, true),
			list("seq_opt", Items, true),
			str("query_opt", true),
		)
	}
	return cols
}

// parquetSchema builds the parquet-go schema for cols.
func parquetSchema(cols []ColumnInfo) *parquet.Schema {
	root := make(orderedGroup, len(cols))
	for i, c := range cols {
		var leaf parquet.Node
		switch c.Physical {
		case "INT32":
			leaf = parquet.Leaf(parquet.Int32Type)
		case "INT64":
			leaf = parquet.Leaf(parquet.Int64Type)
		case "FLOAT":
			leaf = parquet.Leaf(parquet.FloatType)
		case "BYTE_ARRAY":
			leaf = parquet.String()
		default:
			panic("BUG: datagen: unknown physical type " + c.Physical)
		}
		var enc encoding.Encoding = &parquet.Plain
		if c.Dict {
			enc = &parquet.RLEDictionary
		}
		node := parquet.Encoded(leaf, enc)
		if c.List {
			node = parquet.List(node)
		}
		if c.Nullable {
			node = parquet.Optional(node)
		}
		root[i] = field{Node: node, name: c.Name}
	}
	return parquet.NewSchema("schema", root)
}

func codec(name string) compress.Codec {
	switch name {
	case "snappy":
		return snappyCodec{}
	case "zstd":
		return zstdCodec
	case "gzip":
		return &gzip.Codec{Level: gzip.DefaultCompression}
	case "brotli":
		return &brotli.Codec{Quality: brotliQuality}
	case "none":
		return &parquet.Uncompressed
	}
	panic("BUG: datagen: unknown compression " + name)
}

// Compressions are the page codecs Write can use.
var Compressions = []string{"snappy", "zstd", "gzip", "brotli", "none"}

// brotliQuality is Arrow's default brotli level (kBrotliDefaultCompressionLevel),
// what pyarrow writes with compression="brotli".
const brotliQuality = 8

// zstdCodec compresses at klauspost's SpeedFastest, about zstd level 1:
// pyarrow's default level. parquet-go's default (level 3, Spark's default)
// made zstd generation four times slower than snappy.
var zstdCodec = &zstd.Codec{Level: zstd.SpeedFastest}

// snappyCodec writes raw snappy blocks with s2's fast snappy-compatible
// encoder, as the C++ snappy in pyarrow and Spark does. parquet-go's own
// codec uses the "better" mode, which took a third of the generation time
// for a few percent smaller files.
type snappyCodec struct{}

func (snappyCodec) String() string                            { return "SNAPPY" }
func (snappyCodec) CompressionCodec() format.CompressionCodec { return format.Snappy }
func (snappyCodec) Encode(dst, src []byte) ([]byte, error) {
	return s2.EncodeSnappy(dst[:cap(dst)], src), nil
}
func (snappyCodec) Decode(dst, src []byte) ([]byte, error) { return s2.Decode(dst[:cap(dst)], src) }

// orderedGroup is a Parquet group whose fields keep the order given;
// parquet.Group sorts them by name.
type orderedGroup []field

type field struct {
	parquet.Node
	name string
}

func (f field) Name() string { return f.name }

func (f field) Value(base reflect.Value) reflect.Value {
	panic("BUG: datagen: orderedGroup does not map Go values")
}

func (g orderedGroup) ID() int                     { return 0 }
func (g orderedGroup) String() string              { return fmt.Sprintf("orderedGroup(%d fields)", len(g)) }
func (g orderedGroup) Type() parquet.Type          { return parquet.Group{}.Type() }
func (g orderedGroup) Optional() bool              { return false }
func (g orderedGroup) Repeated() bool              { return false }
func (g orderedGroup) Required() bool              { return true }
func (g orderedGroup) Leaf() bool                  { return false }
func (g orderedGroup) Encoding() encoding.Encoding { return nil }
func (g orderedGroup) Compression() compress.Codec { return nil }
func (g orderedGroup) GoType() reflect.Type        { return reflect.TypeFor[map[string]any]() }
func (g orderedGroup) Fields() []parquet.Field {
	fields := make([]parquet.Field, len(g))
	for i := range g {
		fields[i] = g[i]
	}
	return fields
}
