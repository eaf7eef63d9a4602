package cuda

import (
	"fmt"
	"os"
	"sync"
	"unsafe"
)

// DefaultLibrary is the driver library's name, found by the dynamic
// linker's search path.
const DefaultLibrary = "libcuda.so.1"

// EnvLibrary names the environment variable that overrides the library's
// path (tests point it at the fake).
const EnvLibrary = "LASTMILE_LIBCUDA"

// RegisterAlign is the alignment lastmile registers host memory at: 2 MiB,
// the huge-page size, so that a registration never shares a huge page
// with memory outside it and the DMA engine sees whole pages.
const RegisterAlign = 2 << 20

// Host-register flags (CU_MEMHOSTREGISTER_*).
const (
	RegisterPortable  = 0x01
	RegisterDeviceMap = 0x02
	RegisterReadOnly  = 0x08
)

// Event flags (CU_EVENT_*).
const (
	EventDefault       = 0x0
	EventBlockingSync  = 0x1
	EventDisableTiming = 0x2
	EventInterprocess  = 0x4
)

// StreamNonBlocking is CU_STREAM_NON_BLOCKING: the stream does not
// synchronize with the legacy default stream.
const StreamNonBlocking = 0x1

// IPCLazyEnablePeerAccess is CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS, the only
// flag cuIpcOpenMemHandle takes.
const IPCLazyEnablePeerAccess = 0x1

// Attribute is a CUdevice_attribute.
type Attribute int

// The device attributes lastmile reads.
const (
	AttrPCIBusID          Attribute = 33
	AttrPCIDeviceID       Attribute = 34
	AttrPCIDomainID       Attribute = 50
	AttrAsyncEngineCount  Attribute = 40
	AttrUnifiedAddressing Attribute = 41
	AttrCanMapHostMemory  Attribute = 19
	AttrHostRegisterSupp  Attribute = 99
	AttrComputeMode       Attribute = 20
)

// Compute modes (CUcomputemode), the value of AttrComputeMode.
const (
	ComputeModeDefault          = 0 // any number of contexts, from any process
	ComputeModeProhibited       = 2 // no context at all
	ComputeModeExclusiveProcess = 3 // contexts of one process only
)

// Config says where the driver library is.
type Config struct {
	// Library is the path of libcuda.so.1; "" means $LASTMILE_LIBCUDA, or
	// DefaultLibrary when that is unset too. A daemon's config file sets
	// it where the driver lives outside the linker's search path.
	Library string
}

// LibraryPath returns the library cfg loads.
func (cfg Config) LibraryPath() string {
	if cfg.Library != "" {
		return cfg.Library
	}
	if p := os.Getenv(EnvLibrary); p != "" {
		return p
	}
	return DefaultLibrary
}

// Device is a CUdevice, a device ordinal as the driver numbers it (after
// CUDA_VISIBLE_DEVICES).
type Device int

// DevicePtr is a CUdeviceptr, an address in device memory.
type DevicePtr uint64

// IPCMemHandle is a CUipcMemHandle: 64 opaque bytes another process opens
// to map the same device allocation.
type IPCMemHandle [64]byte

// IPCEventHandle is a CUipcEventHandle: 64 opaque bytes another process
// opens to wait on the same event.
type IPCEventHandle [64]byte

// DeviceInfo is what the driver says about one device.
type DeviceInfo struct {
	Ordinal  int
	Name     string
	PCIBusID string // "0000:3b:00.0"
	Memory   uint64 // bytes
}

// Driver is an open driver library on which cuInit succeeded. It is safe
// for concurrent use.
type Driver struct {
	lib  *library
	path string
}

// Path returns the library's path.
func (d *Driver) Path() string { return d.path }

// Context is a device's primary context, retained by this process. Its
// methods are safe for concurrent use. After a sticky error every call
// fails with ErrContextUnusable.
type Context struct {
	d   *Driver
	dev Device
	h   unsafe.Pointer // CUcontext

	mu       sync.Mutex
	released bool
	sticky   error // the first sticky error, once seen
}

// Device returns the context's device.
func (c *Context) Device() Device { return c.dev }

// Usable returns nil, or the error that made the context unusable
// (wrapping ErrContextUnusable), or ErrClosed after Release.
func (c *Context) Usable() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.usableLocked()
}

func (c *Context) usableLocked() error {
	if c.released {
		return ErrClosed
	}
	if c.sticky != nil {
		return fmt.Errorf("%w: %w", ErrContextUnusable, c.sticky)
	}
	return nil
}

// Stream is a CUstream of a context.
type Stream struct {
	c *Context
	h unsafe.Pointer
}

// Event is a CUevent of a context.
type Event struct {
	c *Context
	h unsafe.Pointer
}

// DeviceBuffer is a device allocation (cuMemAlloc) or an opened IPC
// allocation.
type DeviceBuffer struct {
	c      *Context
	Ptr    DevicePtr
	Size   int64
	opened bool // from IPCOpenMem: closed with cuIpcCloseMemHandle
	freed  bool
}

// HostBuffer is page-locked host memory the driver allocated
// (cuMemAllocHost), the pinned reference of the self-test.
type HostBuffer struct {
	c     *Context
	Bytes []byte // C memory: never append to it
	freed bool
}

// Registration is a host range registered with cuMemHostRegister. Unregister
// it before the range is unmapped.
type Registration struct {
	c    *Context
	Addr uintptr
	Size int64
	p    unsafe.Pointer
	done bool
}

// checkRange checks a host range for registration: non-empty, starting
// on a RegisterAlign (2 MiB) boundary, and whole 4 KiB pages.
func checkRange(addr uintptr, n int64) error {
	switch {
	case n <= 0:
		return fmt.Errorf("register host memory: empty range (%d bytes): the driver refuses a zero-byte registration", n)
	case addr%RegisterAlign != 0:
		return fmt.Errorf("register host memory at %#x: not 2 MiB-aligned (map the range with Map, which aligns it)", addr)
	case n%4096 != 0:
		return fmt.Errorf("register host memory: %d bytes is not a whole number of 4 KiB pages", n)
	}
	return nil
}
