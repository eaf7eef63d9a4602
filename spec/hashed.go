package spec

import (
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Hashed names string and list<string> columns (and fixed-size binary
// ones: UUIDs) that the job reads as int64 ids, each with its modulus: `hashed: {tags: 1000003}` reads every
// string s of column tags as hash_mod(s, 1000003), the hashing trick a
// recommender's embedding tables expect. A list of strings can only be
// read this way: a batch holds no list of strings. The ids are those
// hash_mod gives in an expression, so hashing at decode and in a map op
// agree.
type Hashed map[string]uint64

// DecodeNode implements NodeDecoder: a mapping of column to modulus.
func (h *Hashed) DecodeNode(d *Decoder, n *yaml.Node, path string) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return
	}
	if n.Kind != yaml.MappingNode {
		d.Errorf(n, path, "want a mapping of string column to modulus, e.g. {tags: 1000003}; got %s", kindName(n))
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		fp := path + "." + k.Value
		d.lines[fp] = k.Line
		if k.Kind != yaml.ScalarNode || !columnRE.MatchString(k.Value) {
			d.Errorf(k, fp, "want a column name of 1 to 255 printable characters, got %s", kindName(k))
			continue
		}
		if _, dup := (*h)[k.Value]; dup {
			d.Errorf(k, fp, "given twice")
			continue
		}
		m, err := strconv.ParseUint(strings.ReplaceAll(v.Value, "_", ""), 10, 64)
		if v.Kind != yaml.ScalarNode || err != nil || m < 1 || m > math.MaxInt64 {
			d.Errorf(v, fp, "want a modulus from 1 to %d (the ids are 0 to modulus-1), got %s", int64(math.MaxInt64), kindName(v))
			continue
		}
		if *h == nil {
			*h = Hashed{}
		}
		(*h)[k.Value] = m
	}
}

// validateHashed checks what a single entry cannot: a hashed column is
// one the job reads from its files.
func (j *Job) validateHashed(d *Decoder) {
	for _, name := range slices.Sorted(maps.Keys(j.Hashed)) {
		p := "hashed." + name
		switch {
		case j.Partitions.Has(name):
			d.Errorf(nil, p, "%q is a partition column; hash it in the pipeline instead: map: {%s_id: \"hash_mod(%s, %d)\"}", name, name, name, j.Hashed[name])
		case len(j.Columns) > 0 && !slices.Contains(j.Columns, name):
			d.Errorf(nil, p, "%q is not in the job's columns; add it there", name)
		}
	}
}
