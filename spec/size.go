package spec

import (
	"fmt"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Size is a byte count written as a plain number of bytes or with a unit:
// "512KiB", "64MiB", "2GiB" (powers of 1024) or "64MB" (powers of 1000).
type Size int64

var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"B", 1},
}

// ParseSize parses a Size.
func ParseSize(s string) (Size, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || f < 0 {
		return 0, fmt.Errorf("want a size such as 4096, 512KiB or 64MiB, got %q", s)
	}
	v := f * float64(mult)
	if v > 1<<62 {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return Size(v), nil
}

func (s Size) String() string {
	for _, u := range sizeUnits[:4] {
		if s >= Size(u.mult) && int64(s)%u.mult == 0 && (u.mult == 1<<40 || int64(s)%(u.mult<<10) != 0) {
			return fmt.Sprintf("%d%s", int64(s)/u.mult, u.suffix)
		}
	}
	return strconv.FormatInt(int64(s), 10)
}

// DecodeNode implements NodeDecoder.
func (s *Size) DecodeNode(d *Decoder, n *yaml.Node, path string) {
	if n.Kind != yaml.ScalarNode {
		d.Errorf(n, path, "want a size such as 64MiB, got %s", kindName(n))
		return
	}
	v, err := ParseSize(n.Value)
	if err != nil {
		d.Errorf(n, path, "%v", err)
		return
	}
	*s = v
}

// Set implements flag.Value.
func (s *Size) Set(v string) error {
	p, err := ParseSize(v)
	if err != nil {
		return err
	}
	*s = p
	return nil
}
