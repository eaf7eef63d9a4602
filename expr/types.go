package expr

import (
	"fmt"

	"github.com/lastmile/lastmile/column"
)

// Kind is the type of an expression's values, without nullability.
type Kind uint8

// Kinds. BFloat16 is an output type only: cast(x, bfloat16) must be the
// outermost call. List is the type of list columns, which only len() and
// is_null() accept.
const (
	Invalid Kind = iota
	Bool
	Int32
	Int64
	Float32
	Float64
	BFloat16
	String
	List
)

var kindNames = [...]string{"invalid", "bool", "int32", "int64", "float32", "float64", "bfloat16", "string", "list"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// IsNumber reports whether k is int32, int64, float32 or float64.
func (k Kind) IsNumber() bool { return k == Int32 || k == Int64 || k == Float32 || k == Float64 }

// IsInt reports whether k is int32 or int64.
func (k Kind) IsInt() bool { return k == Int32 || k == Int64 }

// IsFloat reports whether k is float32 or float64.
func (k Kind) IsFloat() bool { return k == Float32 || k == Float64 }

// DType is the column dtype an Eval result of this kind has: Bool, Int32,
// Int64, Float32, Float64, BFloat16, or Uint8 for strings (a Bytes column).
func (k Kind) DType() column.DType {
	switch k {
	case Bool:
		return column.Bool
	case Int32:
		return column.Int32
	case Int64:
		return column.Int64
	case Float32:
		return column.Float32
	case Float64:
		return column.Float64
	case BFloat16:
		return column.BFloat16
	case String:
		return column.Uint8
	}
	return column.Invalid
}

// Type is a Kind and whether values may be null.
type Type struct {
	Kind     Kind
	Nullable bool
}

// String renders the type as "int64" or "int64?" when nullable.
func (t Type) String() string {
	if t.Nullable {
		return t.Kind.String() + "?"
	}
	return t.Kind.String()
}

// Field is a named input column and its type.
type Field struct {
	Name string
	Type Type
	// Unit, for a timestamp column, is the nanoseconds one of its values
	// counts (1, 1,000, 1,000,000; 86,400e9 for a DATE); 0 for any
	// other column. A timestamp() without a unit compared with the
	// column takes it. UnknownUnit marks a column computed from
	// timestamps whose unit is not known (Expr.Unit): a timestamp()
	// without a unit compared with it is an error.
	Unit int64
}

// Schema lists the columns an expression may read. Lookup is linear: a
// Schema is consulted at compile time only.
type Schema []Field

// Lookup returns the type of the named column.
func (s Schema) Lookup(name string) (Type, bool) {
	f, ok := s.field(name)
	return f.Type, ok
}

func (s Schema) field(name string) (Field, bool) {
	for _, f := range s {
		if f.Name == name {
			return f, true
		}
	}
	return Field{}, false
}

// ColumnType maps a column layout to the expression type that reads it:
//
//   - Fixed width-1 columns: bool → bool; int8, int16, uint8, int32 →
//     int32 (widened when read); int64 → int64; float32, float16 and
//     bfloat16 → float32 (converted when read); float64 → float64.
//   - Bytes columns → string.
//   - List columns and Fixed columns of width > 1 → list.
func ColumnType(kind column.Kind, dtype column.DType, width int, nullable bool) (Type, error) {
	t := Type{Nullable: nullable}
	switch {
	case kind == column.Bytes:
		t.Kind = String
	case kind == column.List || kind == column.Fixed && width > 1:
		t.Kind = List
	case kind == column.Fixed:
		switch dtype {
		case column.Bool:
			t.Kind = Bool
		case column.Int8, column.Int16, column.Uint8, column.Int32:
			t.Kind = Int32
		case column.Int64:
			t.Kind = Int64
		case column.Float16, column.BFloat16, column.Float32:
			t.Kind = Float32
		case column.Float64:
			t.Kind = Float64
		default:
			return t, fmt.Errorf("dtype %v has no expression type", dtype)
		}
	default:
		return t, fmt.Errorf("column kind %v has no expression type", kind)
	}
	return t, nil
}

// BatchSchema derives a Schema from a batch's columns; a column is
// nullable when it has a Valid mask. Columns without an expression type
// are left out.
func BatchSchema(b *column.Batch) Schema {
	s := make(Schema, 0, len(b.Columns))
	for i := range b.Columns {
		c := &b.Columns[i]
		t, err := ColumnType(c.Kind, c.DType, c.Width, c.Valid != nil)
		if err == nil {
			s = append(s, Field{Name: c.Name, Type: t})
		}
	}
	return s
}

// promote returns the kind two numeric operands are converted to before
// an arithmetic operation or a comparison:
//
//	same kind            → that kind
//	int32 with int64     → int64
//	float32 with float64 → float64
//	an int with a float  → float64
//
// Untyped literals are handled before this (see check.go): they take the
// kind of the other operand.
func promote(a, b Kind) Kind {
	switch {
	case a == b:
		return a
	case a.IsInt() && b.IsInt():
		return Int64
	default:
		return Float64
	}
}
