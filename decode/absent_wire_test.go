package decode

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/lastmile/lastmile/column"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/format"
)

// TestDefaultMemberOfOptionalStructRefused: a struct member added with an
// initial default would read null where the file's struct around it is
// null, and its default elsewhere; an absent chunk cannot tell the rows
// apart, so such a member of an optional struct is refused.
func TestDefaultMemberOfOptionalStructRefused(t *testing.T) {
	type user struct {
		Age int32 `parquet:"age,id(11)"`
	}
	type row struct {
		ID   int64 `parquet:"id,id(1)"`
		User *user `parquet:"user,id(10),optional"`
	}
	path := filepath.Join(t.TempDir(), "old.parquet")
	rows := make([]row, 10)
	for i := range rows {
		rows[i].ID = int64(i)
		if i%2 == 0 {
			rows[i].User = &user{Age: int32(i)}
		}
	}
	writePG(t, path, rows, "snappy", 1)
	top := format.SchemaElement{Name: "user", FieldID: 10}
	top.RepetitionType.Set(format.Optional)
	top.NumChildren.Set(2)
	city := leafElement("city", 13, format.Optional, format.ByteArray)
	city.ConvertedType.Set(deprecated.UTF8)
	city.LogicalType.Value = &format.StringType{}
	table := &TableSchema{IDs: map[string]int32{"id": 1, "user": 10},
		Stored: map[int32][]format.SchemaElement{1: {leafElement("id", 1, format.Required, format.Int64)},
			10: {top, leafElement("age", 11, format.Optional, format.Int32), city}},
		Nullable: map[int32]bool{10: true, 11: true},
		Defaults: map[int32][]byte{13: append([]byte{7, 0, 0, 0}, "nowhere"...)}}
	// Reading the default in every row would give it where the struct is
	// null; the absent chunk reads no levels to tell, so it is refused.
	planTable(t, []string{path}, []string{"user.age", "user.city"}, table, ErrUnsupported, "inside a struct that may be null")
}

type wireRow struct {
	ID int64   `parquet:"id,id(1)"`
	S  string  `parquet:"s,id(2)"`
	L  []int64 `parquet:"l,list,id(3)"`
}

func wirePlan(t *testing.T) *Plan {
	t.Helper()
	path := filepath.Join(t.TempDir(), "l.parquet")
	rows := make([]wireRow, 100)
	for i := range rows {
		rows[i] = wireRow{int64(i), "s", []int64{int64(i), 1}}
	}
	writePG(t, path, rows, "snappy", 1)
	return planPaths(t, PlanOptions{}, path)
}

// decodeAbsent decodes wirePlan's first unit as a CPU peer does
// (VerifyUnits), its chunk i replaced by an absent one with default def.
func decodeAbsent(t *testing.T, i int, def []byte) (*Plan, Unit, *column.Batch, error) {
	t.Helper()
	plan := wirePlan(t)
	d := plan.NewDecoder()
	defer d.Close()
	d.VerifyUnits()
	u := plan.Units[0]
	u.Chunks = append([]Chunk(nil), u.Chunks...)
	u.Chunks[i] = Chunk{Leaf: -1, Absent: true, Values: u.Rows, Default: def}
	var b column.Batch
	err := d.Decode(context.Background(), u, &b)
	return plan, u, &b, err
}

// TestAbsentChunkDefaultOnListRefused: a unit whose chunk of a list
// column says the column is absent with a default is refused; decoded,
// it gave a column that broke its own invariants (offsets in bytes
// where they count elements).
func TestAbsentChunkDefaultOnListRefused(t *testing.T) {
	_, _, b, err := decodeAbsent(t, 2, []byte{1, 2, 3})
	if err != nil {
		if !errors.Is(err, ErrBadUnit) {
			t.Fatalf("refused with %v, want ErrBadUnit", err)
		}
		return
	}
	for i := range b.Columns {
		if err := b.Columns[i].Check(); err != nil {
			t.Errorf("a verified unit decoded into a broken column: %v", err)
		}
	}
}

// TestAbsentChunkOfPresentColumnRefused: a unit that marks a string
// column the file has absent, with a default of 64 KiB, is refused;
// decoded, 100 rows of it took 6.5 MB, what a peer allocates no longer
// bounded by the file, as VerifyUnits says it is.
func TestAbsentChunkOfPresentColumnRefused(t *testing.T) {
	big := make([]byte, maxDefault)
	plan, u, b, err := decodeAbsent(t, 1, big)
	if err == nil {
		t.Errorf("a unit marking the file's column %q absent with a %d-byte default was decoded: %d bytes for %d rows (file %d bytes)",
			plan.Fields[1].Name, len(big), len(b.Columns[1].Data), b.Rows, u.FileSize)
	}
}

// TestEmptyStringDefaultOverTheWire: a string column added with
// the initial default "" reads "" in a file written before; a unit
// marshaled for a peer (MarshalBinary, UnmarshalBinary) reads null there
// instead, the empty default dropped by omitempty.
func TestEmptyStringDefaultOverTheWire(t *testing.T) {
	type row struct {
		ID int64 `parquet:"id,id(1)"`
	}
	path := filepath.Join(t.TempDir(), "old.parquet")
	writePG(t, path, []row{{1}, {2}, {3}}, "snappy", 1)
	city := leafElement("city", 2, format.Optional, format.ByteArray)
	city.ConvertedType.Set(deprecated.UTF8)
	city.LogicalType.Value = &format.StringType{}
	table := &TableSchema{IDs: map[string]int32{"id": 1, "city": 2},
		Stored:   map[int32][]format.SchemaElement{1: {leafElement("id", 1, format.Required, format.Int64)}, 2: {city}},
		Defaults: map[int32][]byte{2: {0, 0, 0, 0}}} // "" in PLAIN
	plan := planTable(t, []string{path}, []string{"id", "city"}, table, nil, "")
	nulls := func(u Unit) int {
		d := plan.NewDecoder()
		defer d.Close()
		var b column.Batch
		if err := d.Decode(context.Background(), u, &b); err != nil {
			t.Fatal(err)
		}
		return b.Columns[1].NullCount()
	}
	u := plan.Units[0]
	if n := nulls(u); n != 0 {
		t.Fatalf("here: %d null rows, want none (the default \"\")", n)
	}
	wire, err := u.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var pu Unit
	if err := pu.UnmarshalBinary(wire); err != nil {
		t.Fatal(err)
	}
	if n := nulls(pu); n != 0 {
		t.Errorf("on a peer: %d of %d rows null, want none (the default \"\"); chunk default %v, was %v",
			n, pu.Rows, pu.Chunks[1].Default, u.Chunks[1].Default)
	}
}

// TestDefaultFits: which defaults an absent chunk may carry for its field.
func TestDefaultFits(t *testing.T) {
	long := Field{Name: "n", Kind: column.Fixed, DType: column.Int64}
	str := Field{Name: "s", Kind: column.Bytes, DType: column.Uint8}
	list := Field{Name: "l", Kind: column.List, DType: column.Int64}
	for _, tc := range []struct {
		f    Field
		def  []byte
		rows int64
		ok   bool
	}{
		{long, nil, 10, true},
		{long, make([]byte, 8), 10, true},
		{long, make([]byte, 4), 10, false},
		{str, []byte{}, 10, true},
		{str, make([]byte, 1000), 1000, true},
		{str, make([]byte, maxDefault), maxDefaultBytes/maxDefault + 1, false},
		{list, nil, 10, true},
		{list, make([]byte, 8), 10, false},
	} {
		err := defaultFits(&tc.f, &Chunk{Leaf: -1, Absent: true, Values: tc.rows, Default: tc.def}, tc.rows)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrBadUnit)) {
			t.Errorf("%s with a %d-byte default over %d rows: %v, want ok %v", tc.f.Name, len(tc.def), tc.rows, err, tc.ok)
		}
	}
}

// TestPlanOfInconsistentFields: fields from the wire whose kind,
// repetition level and dtype disagree (a list leaf as a scalar, a string
// column as int64 strings, a scalar as a list) are refused by PlanOf, or,
// where taken, decode into valid columns: never into columns that break
// column.Column's invariants, which a peer's pipeline and the requester
// would read.
func TestPlanOfInconsistentFields(t *testing.T) {
	plan := wirePlan(t) // id int64, s string, l list<int64>
	for _, tc := range []struct {
		name string
		edit func(f []Field)
	}{
		{"a list leaf as a Fixed column", func(f []Field) { f[2].Kind = column.Fixed }},
		{"a string column as Bytes of int64", func(f []Field) { f[1].DType = column.Int64 }},
		{"an int64 column as a List", func(f []Field) { f[0].Kind = column.List }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fields := append([]Field(nil), plan.Fields...)
			tc.edit(fields)
			p, err := PlanOf(fields, nil, nil)
			if err != nil {
				return // refused: fine
			}
			d := p.NewDecoder()
			defer d.Close()
			d.VerifyUnits()
			var b column.Batch
			if err := d.Decode(context.Background(), plan.Units[0], &b); err != nil {
				return // refused: fine
			}
			if err := b.Check(); err != nil {
				t.Errorf("PlanOf accepted it, and a verified decode gave a broken batch: %v", err)
			}
		})
	}
}
