package iceberg

// An equality delete on a struct member whose dotted path is also a
// top-level column's name (Iceberg allows dots in names): the decoder
// takes a dotted name as a top-level column first, so the data files
// would read the other column. Such a delete is refused, saying why.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	ice "github.com/apache/iceberg-go"
	"github.com/lastmile/lastmile/decode"
	"github.com/parquet-go/parquet-go"
)

type (
	f2User struct {
		UID int64 `parquet:"uid,id(3)"`
	}
	f2DataRow struct {
		ID     int64  `parquet:"id,id(1)"`
		User   f2User `parquet:"user,id(2)"`
		Dotted int64  `parquet:"user.uid,id(5)"`
	}
	f2DelRow struct {
		User f2User `parquet:"user,id(2)"`
	}
)

func TestEqualityDeleteMemberPathCollidesWithTopLevelName(t *testing.T) {
	schema := ice.NewSchema(0,
		ice.NestedField{ID: 1, Name: "id", Type: ice.PrimitiveTypes.Int64, Required: true},
		ice.NestedField{ID: 2, Name: "user", Required: true, Type: &ice.StructType{FieldList: []ice.NestedField{
			{ID: 3, Name: "uid", Type: ice.PrimitiveTypes.Int64, Required: true}}}},
		ice.NestedField{ID: 5, Name: "user.uid", Type: ice.PrimitiveTypes.Int64, Required: true},
	)
	dir := t.TempDir()
	data, del := filepath.Join(dir, "data.parquet"), filepath.Join(dir, "del.parquet")
	// row 0: member 7; row 1: the top-level "user.uid" 7
	if err := parquet.WriteFile(data, []f2DataRow{{0, f2User{7}, 1}, {1, f2User{1}, 7}}); err != nil {
		t.Fatal(err)
	}
	if err := parquet.WriteFile(del, []f2DelRow{{f2User{7}}}); err != nil {
		t.Fatal(err)
	}
	ts := &decode.TableSchema{IDs: map[string]int32{}}
	ts.Stored, ts.Nullable, ts.Defaults = storedColumns(schema)
	for _, f := range schema.Fields() {
		ts.IDs[f.Name] = int32(f.ID)
		ts.Order = append(ts.Order, f.Name)
	}
	s := &Scan{Table: "t", Schema: ts, Files: []File{{Path: data, seq: 1}}}
	spec := ice.NewPartitionSpec()
	st, _ := os.Stat(del)
	b, err := ice.NewDataFileBuilder(spec, ice.EntryContentEqDeletes, del, ice.ParquetFile, nil, nil, nil, 1, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	seq := int64(2)
	e := ice.NewManifestEntry(ice.EntryStatusADDED, nil, &seq, &seq, b.EqualityFieldIDs([]int{3}).Build())
	if err := s.noteEquality(e, "m", schema, &spec); err == nil || !strings.Contains(err.Error(), "is ambiguous") {
		t.Fatalf("noteEquality: %v, want a refusal saying %q", err, "is ambiguous")
	}
}
