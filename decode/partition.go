package decode

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/lastmile/lastmile/column"
)

// Partition columns, Hive style: a table written by Spark, Hive or
// pyarrow as ".../dt=2026-11-27/hour=3/part-0.parquet" keeps dt and hour
// in its directory names, not in its files. A plan declares such keys
// (PlanOptions.Partitions); each planned file's path must name every key
// once, and its units carry the values (Unit.Partition), so that a CPU
// peer given a unit fills the same columns without looking for the
// table's root (a peer checks them against its own file's path:
// Plan.CheckPartition). Values are %-unescaped as Spark escapes them,
// kept as text in the unit and parsed when a column is filled. Spark's
// marker for a null value, __HIVE_DEFAULT_PARTITION__, is kept as that
// text in a string column and refused in an int64 or date one: partition
// columns are never null, so that a column's layout does not depend on
// which files a host planned.

// PartitionKey declares one partition column.
type PartitionKey struct {
	Name string
	Type PartitionType
}

// PartitionType is what a partition column's values decode to.
type PartitionType uint8

const (
	PartitionString PartitionType = iota // the text, a Bytes column
	PartitionInt64                       // an int64
	PartitionDate                        // YYYY-MM-DD, int32 days since 1970 as DATE columns hold them
)

// MaxPartitionValue bounds a partition value's bytes: longer than any
// directory name (NAME_MAX is 255) or object key (1,024), so that a unit
// from elsewhere cannot make a worker fill rows of a huge constant.
const MaxPartitionValue = 1024

// hiveNull is Spark's and Hive's directory value for a null partition.
const hiveNull = "__HIVE_DEFAULT_PARTITION__"

// Field is the column of a declared key.
func (k PartitionKey) Field() Field {
	switch k.Type {
	case PartitionInt64:
		return Field{Name: k.Name, Kind: column.Fixed, DType: column.Int64, Leaf: -1}
	case PartitionDate:
		// Days, as a DATE column counts them: a filter's timestamp()
		// compared with it takes that unit (Field.Counts).
		return Field{Name: k.Name, Kind: column.Fixed, DType: column.Int32, Leaf: -1, TimeUnit: nanosPerDay}
	}
	return Field{Name: k.Name, Kind: column.Bytes, DType: column.Uint8, Leaf: -1}
}

// partitionKey is the key a partition column was declared by.
func partitionKey(f *Field) PartitionKey {
	k := PartitionKey{Name: f.Name}
	switch {
	case f.Kind == column.Fixed && f.DType == column.Int64:
		k.Type = PartitionInt64
	case f.Kind == column.Fixed && f.DType == column.Int32:
		k.Type = PartitionDate
	}
	return k
}

// PartitionNumber is the value of a partition column whose values are
// numbers (int64 or date): the int64, or the day counted since
// 1970-01-01.
func PartitionNumber(f *Field, value string) (int64, error) {
	if f.DType == column.Int32 {
		t, err := time.Parse(time.DateOnly, value)
		if err != nil {
			return 0, fmt.Errorf("%w: column %q: %q is not a date (YYYY-MM-DD)", ErrBadPartition, f.Name, value)
		}
		return t.Unix() / 86400, nil // before 1970, Unix() is a whole negative number of days
	}
	v, err := strconv.ParseInt(value, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: column %q: %q is not an int64", ErrBadPartition, f.Name, value)
	}
	return v, nil
}

// splitPartitions separates the partition keys among columns (the
// projection; empty: every column) from the file columns, and returns
// the partition keys to plan, in the projection's order, or every key in
// declared order when columns is empty.
func splitPartitions(columns []string, keys []PartitionKey) (files []string, parts []PartitionKey, err error) {
	if len(keys) == 0 {
		return columns, nil, nil
	}
	if len(columns) == 0 {
		return nil, keys, nil
	}
	for _, c := range columns {
		k, ok := findKey(keys, c)
		if !ok {
			files = append(files, c)
			continue
		}
		parts = append(parts, k)
	}
	if len(files) == 0 {
		return nil, nil, fmt.Errorf("plan: the columns %q are all partition columns: read at least one column of the files too (the rows are counted from them)", columns)
	}
	return files, parts, nil
}

func findKey(keys []PartitionKey, name string) (PartitionKey, bool) {
	for _, k := range keys {
		if k.Name == name {
			return k, true
		}
	}
	return PartitionKey{}, false
}

// PartitionValues returns the value of each key in path's directory
// names: a directory KEY=VALUE names key KEY. Each key must be named
// once; the file name itself names none.
func PartitionValues(path string, keys []PartitionKey) ([]string, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	dirs := strings.Split(path, "/")
	dirs = dirs[:len(dirs)-1]
	values := make([]string, len(keys))
	for i, k := range keys {
		found := false
		for _, d := range dirs {
			raw, ok := strings.CutPrefix(d, k.Name+"=")
			if !ok {
				continue
			}
			if found {
				return nil, fmt.Errorf("partition %q: two directories of the path name it", k.Name)
			}
			found = true
			v, err := url.PathUnescape(raw)
			if err != nil {
				return nil, fmt.Errorf("partition %q: directory %q: %v", k.Name, d, err)
			}
			values[i] = v
		}
		if !found {
			return nil, fmt.Errorf("partition %q: no directory of the path is named %s=VALUE (check the spec's partitions against the table's layout)", k.Name, k.Name)
		}
		if err := checkPartitionValue(k, values[i]); err != nil {
			return nil, err
		}
	}
	return values, nil
}

// checkPartitionValue checks one value against its key's type.
func checkPartitionValue(k PartitionKey, v string) error {
	if len(v) > MaxPartitionValue {
		return fmt.Errorf("partition %q: a value of %d bytes (at most %d)", k.Name, len(v), MaxPartitionValue)
	}
	if k.Type == PartitionString {
		return nil
	}
	kind := map[PartitionType]string{PartitionInt64: "an int64", PartitionDate: "a date (YYYY-MM-DD)"}[k.Type]
	if v == hiveNull {
		return fmt.Errorf("partition %q: the value is null (%s), which %s partition column cannot hold: declare it a string", k.Name, hiveNull, kind)
	}
	f := k.Field()
	if _, err := PartitionNumber(&f, v); err != nil {
		return fmt.Errorf("partition %q: value %q is not %s: declare it a string", k.Name, v, kind)
	}
	return nil
}

// checkPartitionNames refuses a partition key that is also a column of
// the file: which of the two a name means would be a guess.
func checkPartitionNames(root *schemaNode, keys []PartitionKey) error {
	for _, c := range root.children {
		if _, ok := findKey(keys, c.el.Name); ok {
			return fmt.Errorf("partition %q is also a column of the file: rename one of them", c.el.Name)
		}
	}
	return nil
}

// ErrBadPartition is returned by FillPartition for a value that does not
// fit its column.
var ErrBadPartition = errors.New("decode: bad partition value")

// FillPartition makes dst the column of partition field f for rows rows,
// every row holding value. dst's buffers are reused.
func FillPartition(f *Field, value string, rows int, dst *column.Column) error {
	if len(value) > MaxPartitionValue {
		return fmt.Errorf("%w: column %q: %d bytes (at most %d)", ErrBadPartition, f.Name, len(value), MaxPartitionValue)
	}
	dst.Name, dst.Kind, dst.DType, dst.Width, dst.Len, dst.Valid = f.Name, f.Kind, f.DType, 1, rows, nil
	if f.Kind == column.Fixed {
		v, err := PartitionNumber(f, value)
		if err != nil {
			return err
		}
		dst.Offsets = nil
		if f.DType == column.Int32 {
			dst.Data = column.Grow(dst.Data, rows*4)
			vs := dst.Int32s()
			for i := range vs {
				vs[i] = int32(v)
			}
			return nil
		}
		dst.Data = column.Grow(dst.Data, rows*8)
		vs := dst.Int64s()
		for i := range vs {
			vs[i] = v
		}
		return nil
	}
	n := rows * len(value)
	dst.Data = column.Grow(dst.Data, n)[:0]
	for range rows {
		dst.Data = append(dst.Data, value...)
	}
	if cap(dst.Offsets) < rows+1 {
		dst.Offsets = make([]int64, rows+1)
	}
	dst.Offsets = dst.Offsets[:rows+1]
	for i := range dst.Offsets {
		dst.Offsets[i] = int64(i * len(value))
	}
	return nil
}

// CheckPartition checks that unit u's partition values are those its
// file's path gives for the plan's partition columns: a CPU peer takes
// a unit's values from the unit, and refuses one whose values its file
// does not name (ErrBadUnit).
func (p *Plan) CheckPartition(u *Unit) error {
	if len(u.Partition) != len(p.Partitions) {
		return fmt.Errorf("%w: %d partition values, the job has %d partition columns", ErrBadUnit, len(u.Partition), len(p.Partitions))
	}
	if len(p.Partitions) == 0 {
		return nil
	}
	keys := make([]PartitionKey, len(p.Partitions))
	for i := range p.Partitions {
		keys[i] = partitionKey(&p.Partitions[i])
	}
	want, err := PartitionValues(u.File, keys)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrBadUnit, u.File, err)
	}
	for i := range want {
		if u.Partition[i] != want[i] {
			return fmt.Errorf("%w: %s: partition %q is %q in the unit, %q in the path", ErrBadUnit, u.File, keys[i].Name, u.Partition[i], want[i])
		}
	}
	return nil
}
