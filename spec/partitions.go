package spec

import (
	"fmt"
	"regexp"

	"gopkg.in/yaml.v3"
)

// Partition types: what a partition column's values decode to.
const (
	PartitionString = "string"
	PartitionInt64  = "int64"
	// PartitionDate is a day written YYYY-MM-DD, read as int32 days
	// since 1970-01-01 as DATE columns are: `dt >= date("2026-11-20")`.
	PartitionDate = "date"
)

// Partition is a column whose value comes from its file's path, Hive
// style: a directory named NAME=VALUE above the file, as Spark, Hive and
// pyarrow write partitioned tables (".../dt=2026-11-27/hour=3/part-0.parquet").
// Every row of the file has that value.
type Partition struct {
	Name string
	// Type is PartitionString, PartitionInt64 or PartitionDate.
	Type string
	Line int
}

// Partitions declares a job's partition columns, in the order the spec
// lists them: a mapping from name to type, `partitions: {dt: string,
// hour: int64}` (or `dt: date`). They are declared, not guessed from the paths, so that
// every host (a CPU peer reads one file of the job at a time) and every
// resume gives a column the same type.
type Partitions []Partition

// partitionRE is a partition key: a plain identifier, so that it reads
// the same in a path, in an expression and in a trainer's batch.
var partitionRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

// DecodeNode implements NodeDecoder: a mapping, its order kept.
func (p *Partitions) DecodeNode(d *Decoder, n *yaml.Node, path string) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return
	}
	if n.Kind != yaml.MappingNode {
		d.Errorf(n, path, "want a mapping of partition column to type, e.g. {dt: string, hour: int64}; got %s", kindName(n))
		return
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		fp := path + "." + k.Value
		d.lines[fp] = k.Line
		if k.Kind != yaml.ScalarNode || !partitionRE.MatchString(k.Value) {
			d.Errorf(k, fp, "want a partition key of letters, digits and _ (not starting with a digit), as in a directory named KEY=VALUE; got %q", k.Value)
			continue
		}
		if seen[k.Value] {
			d.Errorf(k, fp, "given twice")
			continue
		}
		seen[k.Value] = true
		if v.Kind != yaml.ScalarNode || (v.Value != PartitionString && v.Value != PartitionInt64 && v.Value != PartitionDate) {
			d.Errorf(v, fp, "want the type string, int64 or date, got %s", kindName(v))
			continue
		}
		*p = append(*p, Partition{Name: k.Value, Type: v.Value, Line: k.Line})
	}
	if len(*p) > MaxPartitions {
		d.Errorf(n, path, "%d partition columns, at most %d", len(*p), MaxPartitions)
	}
}

// MaxPartitions bounds a job's partition columns (decode's bound on a
// unit's values is the same).
const MaxPartitions = 64

// MarshalYAML writes the mapping back in its order.
func (p Partitions) MarshalYAML() (any, error) {
	n := &yaml.Node{Kind: yaml.MappingNode}
	for _, c := range p {
		n.Content = append(n.Content,
			&yaml.Node{Kind: yaml.ScalarNode, Value: c.Name},
			&yaml.Node{Kind: yaml.ScalarNode, Value: c.Type})
	}
	return n, nil
}

// Has reports whether name is one of the partition columns.
func (p Partitions) Has(name string) bool {
	for _, c := range p {
		if c.Name == name {
			return true
		}
	}
	return false
}

// validatePartitions checks what a single partition entry cannot: that
// the inputs have paths to take values from.
func (j *Job) validatePartitions(d *Decoder) {
	if len(j.Partitions) == 0 {
		return
	}
	for i, in := range j.Inputs {
		if IsIceberg(in) {
			d.Errorf(nil, fmt.Sprintf("inputs[%d]", i),
				"partitions: an Iceberg table keeps its partition values in its metadata, and its identity partitions in its files; drop `partitions` to read %s", in)
		}
	}
}
