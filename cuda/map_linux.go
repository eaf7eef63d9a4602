package cuda

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Mapping is a shared mapping of a file (a ring) whose start is 2 MiB
// aligned, so that it can be registered in place.
type Mapping struct {
	// Bytes is the mapped file, from offset 0.
	Bytes []byte
	reg   *Registration
	fs    int64 // statfs magic of the file's filesystem, 0 if unknown
}

// Map maps size bytes of fd, shared and read-write, at a 2 MiB-aligned
// address: it reserves size + 2 MiB of address space, maps the file over
// the aligned part of the reservation (MAP_FIXED) and gives the slack
// back. A plain mmap aligns only to 4 KiB.
func Map(fd int, size int64) (*Mapping, error) {
	if size <= 0 {
		return nil, fmt.Errorf("map %d bytes: want at least 1", size)
	}
	span := size + RegisterAlign
	res, err := unix.MmapPtr(-1, 0, nil, uintptr(span), unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return nil, fmt.Errorf("reserve %d bytes of address space: %w", span, err)
	}
	base := uintptr(res)
	aligned := (base + RegisterAlign - 1) &^ (RegisterAlign - 1)
	addr, err := unix.MmapPtr(fd, 0, ptrAt(aligned), uintptr(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_FIXED)
	if err != nil {
		unix.MunmapPtr(res, uintptr(span))
		return nil, fmt.Errorf("map %d bytes of the file at %#x: %w", size, aligned, err)
	}
	if head := aligned - base; head > 0 {
		unix.MunmapPtr(res, head)
	}
	end := aligned + uintptr(size)
	if tail := base + uintptr(span) - end; tail > 0 {
		unix.MunmapPtr(ptrAt(end), tail)
	}
	return &Mapping{Bytes: unsafeBytes(addr, size), fs: fdFSType(fd)}, nil
}

// Register registers the whole mapping with c (see Context.Register).
// Close unregisters it.
func (m *Mapping) Register(c *Context, flags int) (*Registration, error) {
	if m.reg != nil {
		return nil, fmt.Errorf("register mapping: already registered")
	}
	reg, err := c.Register(m.Bytes, flags)
	if err != nil {
		if m.fs != 0 && !pinnable(m.fs) {
			// the driver's INVALID_VALUE names nothing of the cause
			return nil, fmt.Errorf("%w: the ring's file is on %s: %w", err, fsName(m.fs), errNotPinnable)
		}
		return nil, err
	}
	m.reg = reg
	return reg, nil
}

// Close unregisters the mapping if it is registered, and only then unmaps
// it: the driver must never hold pinned pages of a range that is gone. An
// unregistration that fails leaves the range mapped (leaked, not freed
// under the driver) and returns the error.
func (m *Mapping) Close() error {
	if m.Bytes == nil {
		return nil
	}
	if m.reg != nil {
		if err := m.reg.Unregister(); err != nil {
			return fmt.Errorf("close mapping: %w (left mapped)", err)
		}
		m.reg = nil
	}
	err := unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(m.Bytes)), uintptr(len(m.Bytes)))
	m.Bytes = nil
	if err != nil {
		return fmt.Errorf("unmap: %w", err)
	}
	return nil
}
