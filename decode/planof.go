package decode

import (
	"fmt"

	"github.com/lastmile/lastmile/column"
	"github.com/parquet-go/parquet-go/format"
)

// PlanOf returns a plan of no files whose fields and partition columns
// are those another host planned: a CPU peer computes its requester's
// units by the requester's fields, which hold what planning every file
// of the job gave (an Iceberg table's renamed, added and promoted
// columns among them), where planning the one file of a unit would not.
// The fields come from the wire, so each is checked to be one a decoder
// can take; that the units' files hold them is checked unit by unit
// (VerifyUnits).
func PlanOf(fields, partitions []Field, fsys FS) (*Plan, error) {
	for i := range fields {
		if err := fields[i].check(); err != nil {
			return nil, fmt.Errorf("field %d (%q): %w", i, fields[i].Name, err)
		}
	}
	for i := range partitions {
		if f := &partitions[i]; f.Name == "" || !validDType(f.DType) || (f.Kind != column.Fixed && f.Kind != column.Bytes) {
			return nil, fmt.Errorf("partition column %d (%q): kind %v dtype %v", i, f.Name, f.Kind, f.DType)
		}
	}
	if len(fields)+len(partitions) == 0 {
		return nil, fmt.Errorf("no fields")
	}
	return &Plan{Fields: fields, Partitions: partitions, fs: fsys}, nil
}

// maxLevel bounds a field's definition and repetition levels, as
// buildSchema bounds a schema's depth.
const maxLevel = 64

// check reports what makes f one no plan of this package gives.
func (f *Field) check() error {
	switch {
	case f.Name == "" || len(f.Path) == 0 || len(f.Path) > maxLevel:
		return fmt.Errorf("name %q, path of %d names", f.Name, len(f.Path))
	case f.Kind != column.Fixed && f.Kind != column.List && f.Kind != column.Bytes:
		return fmt.Errorf("kind %d", f.Kind)
	case !validDType(f.DType):
		return fmt.Errorf("dtype %d", f.DType)
	case f.MaxDef < 0 || f.MaxRep < 0 || f.MaxDef > maxLevel || f.MaxRep > maxLevel || f.RowDef < 0 || f.RowDef > f.MaxDef:
		return fmt.Errorf("levels def %d rep %d row %d", f.MaxDef, f.MaxRep, f.RowDef)
	case (f.Kind == column.List) != (f.MaxRep == 1) || f.MaxRep > 1:
		// A list has one repetition level (lists of lists are not
		// read), a value of a row none.
		return fmt.Errorf("kind %v with repetition level %d", f.Kind, f.MaxRep)
	case f.Kind == column.Bytes && (f.DType != column.Uint8 || f.Hash > 0):
		return fmt.Errorf("strings of %v (hashed %d)", f.DType, f.Hash)
	case f.Physical < int32(format.Boolean) || f.Physical > int32(format.FixedLenByteArray) || f.TypeLen < 0 || f.TypeLen > 1<<16:
		return fmt.Errorf("parquet type %d (length %d)", f.Physical, f.TypeLen)
	case f.Scale < 0 || f.Scale > 76 || !storableAs(f.StoredPhysical, f.StoredTypeLen):
		return fmt.Errorf("scale %d, stored as %d (length %d)", f.Scale, f.StoredPhysical, f.StoredTypeLen)
	case f.TimeUnit != 0 && f.TimeUnit != 1 && f.TimeUnit != 1e3 && f.TimeUnit != 1e6 && f.TimeUnit != nanosPerDay:
		return fmt.Errorf("time unit %d ns", f.TimeUnit)
	case f.StoredPhysical != 0 && viewable(f, &Chunk{Physical: f.StoredPhysical, TypeLen: f.StoredTypeLen}, 0) != nil:
		return fmt.Errorf("stored as %v, read as %v", format.Type(f.StoredPhysical), format.Type(f.Physical))
	case f.Leaf < -1:
		return fmt.Errorf("leaf %d", f.Leaf)
	}
	return nil
}

func validDType(d column.DType) bool { return d != column.Invalid && d.Size() > 0 }
