//go:build !linux

package cuda

import "errors"

// Mapping is a 2 MiB-aligned shared mapping of a file (Linux only).
type Mapping struct {
	Bytes []byte
}

var errNotLinux = errors.New("cuda: aligned mappings are implemented for Linux only")

// Map fails: lastmile's rings are Linux-only.
func Map(fd int, size int64) (*Mapping, error) { return nil, errNotLinux }

func (m *Mapping) Register(c *Context, flags int) (*Registration, error) { return nil, errNotLinux }
func (m *Mapping) Close() error                                          { return nil }
func PinnableDir(dir string) error                                       { return errNotLinux }
