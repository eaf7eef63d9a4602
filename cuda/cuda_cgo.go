//go:build linux && cgo

package cuda

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

// Hand-written prototypes of the driver API entry points lastmile calls
// (cuda.h, CUDA 11 and later). No CUDA header is needed to build.
typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef void *CUstream;
typedef void *CUevent;
typedef unsigned long long CUdeviceptr;
typedef struct { char reserved[64]; } CUipcMemHandle;
typedef struct { char reserved[64]; } CUipcEventHandle;

typedef struct {
	void *h;
	CUresult (*cuInit)(unsigned int);
	CUresult (*cuDriverGetVersion)(int *);
	CUresult (*cuDeviceGetCount)(int *);
	CUresult (*cuDeviceGet)(CUdevice *, int);
	CUresult (*cuDeviceGetName)(char *, int, CUdevice);
	CUresult (*cuDeviceGetAttribute)(int *, int, CUdevice);
	CUresult (*cuDeviceGetPCIBusId)(char *, int, CUdevice);
	CUresult (*cuDeviceTotalMem_v2)(size_t *, CUdevice);
	CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
	CUresult (*cuDevicePrimaryCtxRelease_v2)(CUdevice);
	CUresult (*cuCtxSetCurrent)(CUcontext);
	CUresult (*cuMemHostRegister_v2)(void *, size_t, unsigned int);
	CUresult (*cuMemHostUnregister)(void *);
	CUresult (*cuMemAlloc_v2)(CUdeviceptr *, size_t);
	CUresult (*cuMemFree_v2)(CUdeviceptr);
	CUresult (*cuMemAllocHost_v2)(void **, size_t);
	CUresult (*cuMemFreeHost)(void *);
	CUresult (*cuStreamCreate)(CUstream *, unsigned int);
	CUresult (*cuStreamDestroy_v2)(CUstream);
	CUresult (*cuStreamSynchronize)(CUstream);
	CUresult (*cuStreamWaitEvent)(CUstream, CUevent, unsigned int);
	CUresult (*cuEventCreate)(CUevent *, unsigned int);
	CUresult (*cuEventDestroy_v2)(CUevent);
	CUresult (*cuEventRecord)(CUevent, CUstream);
	CUresult (*cuEventQuery)(CUevent);
	CUresult (*cuEventSynchronize)(CUevent);
	CUresult (*cuEventElapsedTime)(float *, CUevent, CUevent);
	CUresult (*cuMemcpyHtoDAsync_v2)(CUdeviceptr, const void *, size_t, CUstream);
	CUresult (*cuMemcpyDtoH_v2)(void *, CUdeviceptr, size_t);
	CUresult (*cuIpcGetMemHandle)(CUipcMemHandle *, CUdeviceptr);
	CUresult (*cuIpcOpenMemHandle_v2)(CUdeviceptr *, CUipcMemHandle, unsigned int);
	CUresult (*cuIpcCloseMemHandle)(CUdeviceptr);
	CUresult (*cuIpcGetEventHandle)(CUipcEventHandle *, CUevent);
	CUresult (*cuIpcOpenEventHandle)(CUevent *, CUipcEventHandle);
	CUresult (*cuGetErrorName)(CUresult, const char **);
	CUresult (*cuGetErrorString)(CUresult, const char **);
} lm_cuda;

// lm_load opens path and resolves every entry point into l. It returns 0,
// or -1 with the reason in err. dlerror's state is per thread, so the
// whole sequence runs in this one C call.
static int lm_load(const char *path, lm_cuda *l, char *err, size_t errlen) {
	memset(l, 0, sizeof *l);
	l->h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!l->h) {
		const char *e = dlerror();
		strncpy(err, e ? e : "dlopen failed", errlen - 1);
		return -1;
	}
#define SYM(name, required) do { \
		*(void **)(&l->name) = dlsym(l->h, #name); \
		if (!l->name && required) { \
			strncpy(err, "missing symbol " #name " (driver older than CUDA 11?)", errlen - 1); \
			dlclose(l->h); l->h = 0; return -1; \
		} } while (0)
	SYM(cuInit, 1); SYM(cuDriverGetVersion, 1); SYM(cuDeviceGetCount, 1); SYM(cuDeviceGet, 1);
	SYM(cuDeviceGetName, 1); SYM(cuDeviceGetAttribute, 1); SYM(cuDeviceGetPCIBusId, 1);
	SYM(cuDeviceTotalMem_v2, 1); SYM(cuDevicePrimaryCtxRetain, 1); SYM(cuDevicePrimaryCtxRelease_v2, 1);
	SYM(cuCtxSetCurrent, 1); SYM(cuMemHostRegister_v2, 1); SYM(cuMemHostUnregister, 1);
	SYM(cuMemAlloc_v2, 1); SYM(cuMemFree_v2, 1); SYM(cuMemAllocHost_v2, 1); SYM(cuMemFreeHost, 1);
	SYM(cuStreamCreate, 1); SYM(cuStreamDestroy_v2, 1); SYM(cuStreamSynchronize, 1); SYM(cuStreamWaitEvent, 1);
	SYM(cuEventCreate, 1); SYM(cuEventDestroy_v2, 1); SYM(cuEventRecord, 1); SYM(cuEventQuery, 1);
	SYM(cuEventSynchronize, 1); SYM(cuEventElapsedTime, 1); SYM(cuMemcpyHtoDAsync_v2, 1);
	SYM(cuMemcpyDtoH_v2, 1); SYM(cuIpcGetMemHandle, 1); SYM(cuIpcOpenMemHandle_v2, 1);
	SYM(cuIpcCloseMemHandle, 1); SYM(cuIpcGetEventHandle, 1); SYM(cuIpcOpenEventHandle, 1);
	SYM(cuGetErrorName, 0); SYM(cuGetErrorString, 0);
#undef SYM
	return 0;
}

// cgo cannot call through a function pointer: one small wrapper each.
static CUresult w_init(lm_cuda *l) { return l->cuInit(0); }
static CUresult w_version(lm_cuda *l, int *v) { return l->cuDriverGetVersion(v); }
static CUresult w_count(lm_cuda *l, int *n) { return l->cuDeviceGetCount(n); }
static CUresult w_get(lm_cuda *l, CUdevice *d, int i) { return l->cuDeviceGet(d, i); }
static CUresult w_name(lm_cuda *l, char *s, int n, CUdevice d) { return l->cuDeviceGetName(s, n, d); }
static CUresult w_attr(lm_cuda *l, int *v, int a, CUdevice d) { return l->cuDeviceGetAttribute(v, a, d); }
static CUresult w_busid(lm_cuda *l, char *s, int n, CUdevice d) { return l->cuDeviceGetPCIBusId(s, n, d); }
static CUresult w_totalmem(lm_cuda *l, size_t *n, CUdevice d) { return l->cuDeviceTotalMem_v2(n, d); }
static CUresult w_retain(lm_cuda *l, CUcontext *c, CUdevice d) { return l->cuDevicePrimaryCtxRetain(c, d); }
static CUresult w_release(lm_cuda *l, CUdevice d) { return l->cuDevicePrimaryCtxRelease_v2(d); }
static CUresult w_setcurrent(lm_cuda *l, CUcontext c) { return l->cuCtxSetCurrent(c); }
static CUresult w_hostreg(lm_cuda *l, void *p, size_t n, unsigned f) { return l->cuMemHostRegister_v2(p, n, f); }
static CUresult w_hostunreg(lm_cuda *l, void *p) { return l->cuMemHostUnregister(p); }
static CUresult w_alloc(lm_cuda *l, CUdeviceptr *p, size_t n) { return l->cuMemAlloc_v2(p, n); }
static CUresult w_free(lm_cuda *l, CUdeviceptr p) { return l->cuMemFree_v2(p); }
static CUresult w_allochost(lm_cuda *l, void **p, size_t n) { return l->cuMemAllocHost_v2(p, n); }
static CUresult w_freehost(lm_cuda *l, void *p) { return l->cuMemFreeHost(p); }
static CUresult w_streamcreate(lm_cuda *l, CUstream *s, unsigned f) { return l->cuStreamCreate(s, f); }
static CUresult w_streamdestroy(lm_cuda *l, CUstream s) { return l->cuStreamDestroy_v2(s); }
static CUresult w_streamsync(lm_cuda *l, CUstream s) { return l->cuStreamSynchronize(s); }
static CUresult w_streamwait(lm_cuda *l, CUstream s, CUevent e) { return l->cuStreamWaitEvent(s, e, 0); }
static CUresult w_eventcreate(lm_cuda *l, CUevent *e, unsigned f) { return l->cuEventCreate(e, f); }
static CUresult w_eventdestroy(lm_cuda *l, CUevent e) { return l->cuEventDestroy_v2(e); }
static CUresult w_eventrecord(lm_cuda *l, CUevent e, CUstream s) { return l->cuEventRecord(e, s); }
static CUresult w_eventquery(lm_cuda *l, CUevent e) { return l->cuEventQuery(e); }
static CUresult w_eventsync(lm_cuda *l, CUevent e) { return l->cuEventSynchronize(e); }
static CUresult w_elapsed(lm_cuda *l, float *ms, CUevent a, CUevent b) { return l->cuEventElapsedTime(ms, a, b); }
static CUresult w_htod(lm_cuda *l, CUdeviceptr d, const void *s, size_t n, CUstream st) { return l->cuMemcpyHtoDAsync_v2(d, s, n, st); }
static CUresult w_dtoh(lm_cuda *l, void *d, CUdeviceptr s, size_t n) { return l->cuMemcpyDtoH_v2(d, s, n); }
static CUresult w_ipcget(lm_cuda *l, void *h, CUdeviceptr p) { return l->cuIpcGetMemHandle((CUipcMemHandle *)h, p); }
static CUresult w_ipcopen(lm_cuda *l, CUdeviceptr *p, void *h, unsigned f) { return l->cuIpcOpenMemHandle_v2(p, *(CUipcMemHandle *)h, f); }
static CUresult w_ipcclose(lm_cuda *l, CUdeviceptr p) { return l->cuIpcCloseMemHandle(p); }
static CUresult w_ipcgetev(lm_cuda *l, void *h, CUevent e) { return l->cuIpcGetEventHandle((CUipcEventHandle *)h, e); }
static CUresult w_ipcopenev(lm_cuda *l, CUevent *e, void *h) { return l->cuIpcOpenEventHandle(e, *(CUipcEventHandle *)h); }
static const char *w_errname(lm_cuda *l, CUresult r) {
	const char *s = 0;
	if (l->cuGetErrorName && l->cuGetErrorName(r, &s) == 0) return s;
	return 0;
}
static const char *w_errstring(lm_cuda *l, CUresult r) {
	const char *s = 0;
	if (l->cuGetErrorString && l->cuGetErrorString(r, &s) == 0) return s;
	return 0;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"
	"unsafe"
)

// library is a loaded libcuda. Loaded libraries are kept for the life of
// the process (unloading the driver under live contexts crashes), one per
// path.
type library struct {
	l *C.lm_cuda // C memory
}

var (
	libsMu sync.Mutex
	libs   = map[string]*library{}
)

// Open loads the driver library cfg names and initializes it (cuInit).
// Without a driver or a GPU it fails with an error for which NoDriver is
// true.
func Open(cfg Config) (*Driver, error) {
	path := cfg.LibraryPath()
	lib, err := load(path)
	if err != nil {
		return nil, err
	}
	d := &Driver{lib: lib, path: path}
	if r := C.w_init(lib.l); r != 0 {
		return nil, d.err("cuInit", "", r)
	}
	return d, nil
}

func load(path string) (*library, error) {
	libsMu.Lock()
	defer libsMu.Unlock()
	if lib := libs[path]; lib != nil {
		return lib, nil
	}
	l := (*C.lm_cuda)(C.calloc(1, C.size_t(unsafe.Sizeof(C.lm_cuda{}))))
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var msg [512]C.char
	if C.lm_load(cpath, l, &msg[0], C.size_t(len(msg))) != 0 {
		C.free(unsafe.Pointer(l))
		return nil, &LoadError{Path: path, Msg: C.GoString(&msg[0])}
	}
	lib := &library{l: l}
	libs[path] = lib
	return lib, nil
}

// err builds the *Error of a failed call, with the library's name and
// text for the code.
func (d *Driver) err(call, args string, r C.CUresult) *Error {
	e := &Error{Call: call, Args: args, Code: Result(r)}
	if s := C.w_errname(d.lib.l, r); s != nil {
		e.Name = C.GoString(s)
	} else {
		e.Name = Result(r).Error()
	}
	if s := C.w_errstring(d.lib.l, r); s != nil {
		e.Text = C.GoString(s)
	}
	return e
}

// Version returns the driver's CUDA version, e.g. 12040 for 12.4.
func (d *Driver) Version() (int, error) {
	var v C.int
	if r := C.w_version(d.lib.l, &v); r != 0 {
		return 0, d.err("cuDriverGetVersion", "", r)
	}
	return int(v), nil
}

// DeviceCount returns the number of devices the driver sees.
func (d *Driver) DeviceCount() (int, error) {
	var n C.int
	if r := C.w_count(d.lib.l, &n); r != 0 {
		return 0, d.err("cuDeviceGetCount", "", r)
	}
	return int(n), nil
}

// Device returns the device of an ordinal.
func (d *Driver) Device(ordinal int) (Device, error) {
	var dev C.CUdevice
	if r := C.w_get(d.lib.l, &dev, C.int(ordinal)); r != 0 {
		return 0, d.err("cuDeviceGet", fmt.Sprintf("ordinal=%d", ordinal), r)
	}
	return Device(dev), nil
}

// Attribute returns a device attribute.
func (d *Driver) Attribute(dev Device, a Attribute) (int, error) {
	var v C.int
	if r := C.w_attr(d.lib.l, &v, C.int(a), C.CUdevice(dev)); r != 0 {
		return 0, d.err("cuDeviceGetAttribute", fmt.Sprintf("attr=%d device=%d", a, dev), r)
	}
	return int(v), nil
}

// Info returns a device's name, PCI bus id and memory.
func (d *Driver) Info(ordinal int) (DeviceInfo, error) {
	info := DeviceInfo{Ordinal: ordinal}
	dev, err := d.Device(ordinal)
	if err != nil {
		return info, err
	}
	var buf [256]C.char
	if r := C.w_name(d.lib.l, &buf[0], C.int(len(buf)), C.CUdevice(dev)); r != 0 {
		return info, d.err("cuDeviceGetName", fmt.Sprintf("device=%d", dev), r)
	}
	info.Name = C.GoString(&buf[0])
	if r := C.w_busid(d.lib.l, &buf[0], C.int(len(buf)), C.CUdevice(dev)); r != 0 {
		return info, d.err("cuDeviceGetPCIBusId", fmt.Sprintf("device=%d", dev), r)
	}
	info.PCIBusID = C.GoString(&buf[0])
	var n C.size_t
	if r := C.w_totalmem(d.lib.l, &n, C.CUdevice(dev)); r != 0 {
		return info, d.err("cuDeviceTotalMem_v2", fmt.Sprintf("device=%d", dev), r)
	}
	info.Memory = uint64(n)
	return info, nil
}

// Retain retains the primary context of a device. Release it when done.
func (d *Driver) Retain(dev Device) (*Context, error) {
	var h C.CUcontext
	if r := C.w_retain(d.lib.l, &h, C.CUdevice(dev)); r != 0 {
		return nil, d.err("cuDevicePrimaryCtxRetain", fmt.Sprintf("device=%d", dev), r)
	}
	return &Context{d: d, dev: dev, h: unsafe.Pointer(h)}, nil
}

// call runs one driver call in c: it refuses when c is released or
// poisoned, makes c current on this goroutine's locked thread, runs f,
// and turns a failure into an *Error, recording a sticky one. ok lists
// codes f may return that are not failures (cuEventQuery's NOT_READY).
func (c *Context) call(name, args string, f func() C.CUresult, ok ...Result) (Result, error) {
	if err := c.Usable(); err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if r := C.w_setcurrent(c.d.lib.l, C.CUcontext(c.h)); r != 0 {
		return Result(r), c.fail("cuCtxSetCurrent", "", r)
	}
	r := f()
	if r == 0 || slices.Contains(ok, Result(r)) {
		return Result(r), nil
	}
	return Result(r), c.fail(name, args, r)
}

func (c *Context) fail(name, args string, r C.CUresult) error {
	e := c.d.err(name, args, r)
	if e.Code.Sticky() {
		c.mu.Lock()
		if c.sticky == nil {
			c.sticky = e
		}
		c.mu.Unlock()
	}
	return e
}

// Release releases the primary context. Later calls fail with ErrClosed.
// Release the context's streams, events and memory first.
func (c *Context) Release() error {
	c.mu.Lock()
	if c.released {
		c.mu.Unlock()
		return nil
	}
	c.released = true
	c.mu.Unlock()
	if r := C.w_release(c.d.lib.l, C.CUdevice(c.dev)); r != 0 {
		return c.d.err("cuDevicePrimaryCtxRelease_v2", fmt.Sprintf("device=%d", c.dev), r)
	}
	return nil
}

// Register page-locks mem in place (cuMemHostRegister) so that copies
// from it run at the DMA engine's speed. mem must be memory Go does not
// manage (an mmap'd range: see Map), start on a 2 MiB boundary and be
// whole 4 KiB pages; anything else is refused before the driver is
// called. Unregister it before unmapping it (Mapping.Close does).
func (c *Context) Register(mem []byte, flags int) (*Registration, error) {
	p := unsafe.Pointer(unsafe.SliceData(mem))
	addr, n := uintptr(p), int64(len(mem))
	if err := checkRange(addr, n); err != nil {
		return nil, err
	}
	args := fmt.Sprintf("ptr=%#x bytes=%d flags=%d", addr, n, flags)
	if _, err := c.call("cuMemHostRegister_v2", args, func() C.CUresult {
		return C.w_hostreg(c.d.lib.l, p, C.size_t(n), C.uint(flags))
	}); err != nil {
		return nil, err
	}
	return &Registration{c: c, Addr: addr, Size: n, p: p}, nil
}

// Unregister undoes Register. Once it succeeded, calling it again does
// nothing; after a failure, the next call asks the driver again (the range
// is still registered, and must stay mapped until it is not).
func (g *Registration) Unregister() error {
	if g.done {
		return nil
	}
	_, err := g.c.call("cuMemHostUnregister", fmt.Sprintf("ptr=%#x", g.Addr), func() C.CUresult {
		return C.w_hostunreg(g.c.d.lib.l, g.p)
	})
	if err == nil || errors.Is(err, ErrHostMemNotReg) {
		g.done = true
		return nil
	}
	return err
}

// Alloc allocates n bytes of device memory.
func (c *Context) Alloc(n int64) (*DeviceBuffer, error) {
	if n <= 0 {
		return nil, fmt.Errorf("allocate device memory: %d bytes: want at least 1", n)
	}
	var p C.CUdeviceptr
	if _, err := c.call("cuMemAlloc_v2", fmt.Sprintf("bytes=%d", n), func() C.CUresult {
		return C.w_alloc(c.d.lib.l, &p, C.size_t(n))
	}); err != nil {
		return nil, err
	}
	return &DeviceBuffer{c: c, Ptr: DevicePtr(p), Size: n}, nil
}

// Free frees the allocation (or closes an opened IPC allocation). Calling
// it again does nothing.
func (b *DeviceBuffer) Free() error {
	if b.freed {
		return nil
	}
	b.freed = true
	if b.opened {
		_, err := b.c.call("cuIpcCloseMemHandle", fmt.Sprintf("dptr=%#x", b.Ptr), func() C.CUresult {
			return C.w_ipcclose(b.c.d.lib.l, C.CUdeviceptr(b.Ptr))
		})
		return err
	}
	_, err := b.c.call("cuMemFree_v2", fmt.Sprintf("dptr=%#x", b.Ptr), func() C.CUresult {
		return C.w_free(b.c.d.lib.l, C.CUdeviceptr(b.Ptr))
	})
	return err
}

// AllocHost allocates n bytes of page-locked host memory.
func (c *Context) AllocHost(n int64) (*HostBuffer, error) {
	if n <= 0 {
		return nil, fmt.Errorf("allocate pinned host memory: %d bytes: want at least 1", n)
	}
	var p unsafe.Pointer
	if _, err := c.call("cuMemAllocHost_v2", fmt.Sprintf("bytes=%d", n), func() C.CUresult {
		return C.w_allochost(c.d.lib.l, &p, C.size_t(n))
	}); err != nil {
		return nil, err
	}
	return &HostBuffer{c: c, Bytes: unsafe.Slice((*byte)(p), n)}, nil
}

// Free frees the buffer. Calling it again does nothing.
func (h *HostBuffer) Free() error {
	if h.freed {
		return nil
	}
	h.freed = true
	p := unsafe.Pointer(unsafe.SliceData(h.Bytes))
	h.Bytes = nil
	_, err := h.c.call("cuMemFreeHost", "", func() C.CUresult { return C.w_freehost(h.c.d.lib.l, p) })
	return err
}

// NewStream creates a stream (flags: StreamNonBlocking or 0).
func (c *Context) NewStream(flags int) (*Stream, error) {
	var s C.CUstream
	if _, err := c.call("cuStreamCreate", fmt.Sprintf("flags=%d", flags), func() C.CUresult {
		return C.w_streamcreate(c.d.lib.l, &s, C.uint(flags))
	}); err != nil {
		return nil, err
	}
	return &Stream{c: c, h: unsafe.Pointer(s)}, nil
}

// Destroy destroys the stream.
func (s *Stream) Destroy() error {
	_, err := s.c.call("cuStreamDestroy_v2", "", func() C.CUresult { return C.w_streamdestroy(s.c.d.lib.l, C.CUstream(s.h)) })
	return err
}

// Synchronize waits for everything queued on the stream.
func (s *Stream) Synchronize() error {
	_, err := s.c.call("cuStreamSynchronize", "", func() C.CUresult { return C.w_streamsync(s.c.d.lib.l, C.CUstream(s.h)) })
	return err
}

// Wait makes later work on s wait for e.
func (s *Stream) Wait(e *Event) error {
	_, err := s.c.call("cuStreamWaitEvent", "", func() C.CUresult {
		return C.w_streamwait(s.c.d.lib.l, C.CUstream(s.h), C.CUevent(e.h))
	})
	return err
}

// CopyHtoD queues a copy of src to dst on s. src must stay valid and
// unchanged until the copy completes (record an event after it): it must
// be memory Go does not manage (mmap'd or AllocHost's), as the copy runs
// after the call returns. src larger than dst is refused.
func (s *Stream) CopyHtoD(dst DevicePtr, dstSize int64, src []byte) error {
	n := int64(len(src))
	if n == 0 {
		return nil
	}
	if n > dstSize {
		return fmt.Errorf("copy %d bytes to a device buffer of %d bytes: too large", n, dstSize)
	}
	p := unsafe.Pointer(unsafe.SliceData(src))
	_, err := s.c.call("cuMemcpyHtoDAsync_v2", fmt.Sprintf("dptr=%#x src=%#x bytes=%d", dst, uintptr(p), n), func() C.CUresult {
		return C.w_htod(s.c.d.lib.l, C.CUdeviceptr(dst), p, C.size_t(n), C.CUstream(s.h))
	})
	return err
}

// CopyDtoH copies device memory back, synchronously (checks and tests).
func (c *Context) CopyDtoH(dst []byte, src DevicePtr) error {
	if len(dst) == 0 {
		return nil
	}
	_, err := c.call("cuMemcpyDtoH_v2", fmt.Sprintf("bytes=%d", len(dst)), func() C.CUresult {
		return C.w_dtoh(c.d.lib.l, unsafe.Pointer(unsafe.SliceData(dst)), C.CUdeviceptr(src), C.size_t(len(dst)))
	})
	return err
}

// NewEvent creates an event (flags: Event*).
func (c *Context) NewEvent(flags int) (*Event, error) {
	var e C.CUevent
	if _, err := c.call("cuEventCreate", fmt.Sprintf("flags=%d", flags), func() C.CUresult {
		return C.w_eventcreate(c.d.lib.l, &e, C.uint(flags))
	}); err != nil {
		return nil, err
	}
	return &Event{c: c, h: unsafe.Pointer(e)}, nil
}

// Destroy destroys the event.
func (e *Event) Destroy() error {
	_, err := e.c.call("cuEventDestroy_v2", "", func() C.CUresult { return C.w_eventdestroy(e.c.d.lib.l, C.CUevent(e.h)) })
	return err
}

// Record records e on s: it completes when everything queued before it has.
func (e *Event) Record(s *Stream) error {
	_, err := e.c.call("cuEventRecord", "", func() C.CUresult {
		return C.w_eventrecord(e.c.d.lib.l, C.CUevent(e.h), C.CUstream(s.h))
	})
	return err
}

// Done reports whether e has completed, without waiting.
func (e *Event) Done() (bool, error) {
	r, err := e.c.call("cuEventQuery", "", func() C.CUresult { return C.w_eventquery(e.c.d.lib.l, C.CUevent(e.h)) }, ErrNotReady)
	return err == nil && r == Success, err
}

// Synchronize waits for e.
func (e *Event) Synchronize() error {
	_, err := e.c.call("cuEventSynchronize", "", func() C.CUresult { return C.w_eventsync(e.c.d.lib.l, C.CUevent(e.h)) })
	return err
}

// Since returns the device time from start to e, both recorded and
// completed, created without EventDisableTiming.
func (e *Event) Since(start *Event) (time.Duration, error) {
	var ms C.float
	_, err := e.c.call("cuEventElapsedTime", "", func() C.CUresult {
		return C.w_elapsed(e.c.d.lib.l, &ms, C.CUevent(start.h), C.CUevent(e.h))
	})
	return time.Duration(float64(ms) * float64(time.Millisecond)), err
}

// IPCHandle exports the allocation for another process (cuIpcGetMemHandle).
func (b *DeviceBuffer) IPCHandle() (IPCMemHandle, error) {
	var h IPCMemHandle
	_, err := b.c.call("cuIpcGetMemHandle", fmt.Sprintf("dptr=%#x", b.Ptr), func() C.CUresult {
		return C.w_ipcget(b.c.d.lib.l, unsafe.Pointer(&h[0]), C.CUdeviceptr(b.Ptr))
	})
	return h, err
}

// OpenIPC maps another process's allocation of size bytes into c. Free
// closes it.
func (c *Context) OpenIPC(h IPCMemHandle, size int64) (*DeviceBuffer, error) {
	var p C.CUdeviceptr
	if _, err := c.call("cuIpcOpenMemHandle_v2", "", func() C.CUresult {
		return C.w_ipcopen(c.d.lib.l, &p, unsafe.Pointer(&h[0]), IPCLazyEnablePeerAccess)
	}); err != nil {
		return nil, err
	}
	return &DeviceBuffer{c: c, Ptr: DevicePtr(p), Size: size, opened: true}, nil
}

// IPCHandle exports an event created with EventInterprocess|EventDisableTiming.
func (e *Event) IPCHandle() (IPCEventHandle, error) {
	var h IPCEventHandle
	_, err := e.c.call("cuIpcGetEventHandle", "", func() C.CUresult {
		return C.w_ipcgetev(e.c.d.lib.l, unsafe.Pointer(&h[0]), C.CUevent(e.h))
	})
	return h, err
}

// OpenIPCEvent opens another process's event.
func (c *Context) OpenIPCEvent(h IPCEventHandle) (*Event, error) {
	var e C.CUevent
	if _, err := c.call("cuIpcOpenEventHandle", "", func() C.CUresult {
		return C.w_ipcopenev(c.d.lib.l, &e, unsafe.Pointer(&h[0]))
	}); err != nil {
		return nil, err
	}
	return &Event{c: c, h: unsafe.Pointer(e)}, nil
}
