package iceberg

// An equality delete on a member of a struct that also has a member of
// a type lastmile cannot describe (variant, geometry, geography,
// unknown): the table's schema gives no shape for the struct, so the
// decoder would find the member by name, and a member dropped and added
// again under the same name would match the old member's values. Such a
// delete is refused, saying why.

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
	f1OldUser struct {
		UID int64 `parquet:"uid,id(12)"` // the uid dropped since
	}
	f1DataRow struct {
		ID   int64     `parquet:"id,id(1)"`
		User f1OldUser `parquet:"user,id(2)"`
	}
	f1DelUser struct {
		UID int64 `parquet:"uid,id(13)"` // the uid added again
	}
	f1DelRow struct {
		User f1DelUser `parquet:"user,id(2)"`
	}
)

func TestEqualityDeleteMemberOfStructWithoutStoredShape(t *testing.T) {
	schema := ice.NewSchema(0,
		ice.NestedField{ID: 1, Name: "id", Type: ice.PrimitiveTypes.Int64, Required: true},
		ice.NestedField{ID: 2, Name: "user", Required: true, Type: &ice.StructType{FieldList: []ice.NestedField{
			{ID: 13, Name: "uid", Type: ice.PrimitiveTypes.Int64},
			{ID: 14, Name: "payload", Type: ice.VariantType{}},
		}}},
	)
	dir := t.TempDir()
	data, del := filepath.Join(dir, "data.parquet"), filepath.Join(dir, "del.parquet")
	if err := parquet.WriteFile(data, []f1DataRow{{0, f1OldUser{7}}, {1, f1OldUser{8}}}); err != nil {
		t.Fatal(err)
	}
	if err := parquet.WriteFile(del, []f1DelRow{{f1DelUser{7}}}); err != nil {
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
	e := ice.NewManifestEntry(ice.EntryStatusADDED, nil, &seq, &seq, b.EqualityFieldIDs([]int{13}).Build())
	if err := s.noteEquality(e, "m", schema, &spec); err == nil || !strings.Contains(err.Error(), "cannot be found by field id") {
		t.Fatalf("noteEquality: %v, want a refusal saying %q", err, "cannot be found by field id")
	}
}
