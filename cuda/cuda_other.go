//go:build !(linux && cgo)

package cuda

import "time"

// This file is the pure-Go twin of cuda_cgo.go: the same API, for builds
// without cgo or for other systems. Open fails with ErrNoCUDASupport, so
// no other method is ever reached; each still fails the same way.

type library struct{}

// Open returns ErrNoCUDASupport: this build cannot call the driver.
func Open(cfg Config) (*Driver, error) { return nil, ErrNoCUDASupport }

func (d *Driver) Version() (int, error)                          { return 0, ErrNoCUDASupport }
func (d *Driver) DeviceCount() (int, error)                      { return 0, ErrNoCUDASupport }
func (d *Driver) Device(ordinal int) (Device, error)             { return 0, ErrNoCUDASupport }
func (d *Driver) Attribute(dev Device, a Attribute) (int, error) { return 0, ErrNoCUDASupport }
func (d *Driver) Info(ordinal int) (DeviceInfo, error)           { return DeviceInfo{}, ErrNoCUDASupport }
func (d *Driver) Retain(dev Device) (*Context, error)            { return nil, ErrNoCUDASupport }

func (c *Context) Release() error { return ErrNoCUDASupport }
func (c *Context) Register(mem []byte, flags int) (*Registration, error) {
	return nil, ErrNoCUDASupport
}
func (c *Context) Alloc(n int64) (*DeviceBuffer, error)     { return nil, ErrNoCUDASupport }
func (c *Context) AllocHost(n int64) (*HostBuffer, error)   { return nil, ErrNoCUDASupport }
func (c *Context) NewStream(flags int) (*Stream, error)     { return nil, ErrNoCUDASupport }
func (c *Context) NewEvent(flags int) (*Event, error)       { return nil, ErrNoCUDASupport }
func (c *Context) CopyDtoH(dst []byte, src DevicePtr) error { return ErrNoCUDASupport }
func (c *Context) OpenIPC(h IPCMemHandle, size int64) (*DeviceBuffer, error) {
	return nil, ErrNoCUDASupport
}
func (c *Context) OpenIPCEvent(h IPCEventHandle) (*Event, error) { return nil, ErrNoCUDASupport }

func (g *Registration) Unregister() error                { return ErrNoCUDASupport }
func (b *DeviceBuffer) Free() error                      { return ErrNoCUDASupport }
func (b *DeviceBuffer) IPCHandle() (IPCMemHandle, error) { return IPCMemHandle{}, ErrNoCUDASupport }
func (h *HostBuffer) Free() error                        { return ErrNoCUDASupport }

func (s *Stream) Destroy() error                                          { return ErrNoCUDASupport }
func (s *Stream) Synchronize() error                                      { return ErrNoCUDASupport }
func (s *Stream) Wait(e *Event) error                                     { return ErrNoCUDASupport }
func (s *Stream) CopyHtoD(dst DevicePtr, dstSize int64, src []byte) error { return ErrNoCUDASupport }

func (e *Event) Destroy() error                            { return ErrNoCUDASupport }
func (e *Event) Record(s *Stream) error                    { return ErrNoCUDASupport }
func (e *Event) Done() (bool, error)                       { return false, ErrNoCUDASupport }
func (e *Event) Synchronize() error                        { return ErrNoCUDASupport }
func (e *Event) Since(start *Event) (time.Duration, error) { return 0, ErrNoCUDASupport }
func (e *Event) IPCHandle() (IPCEventHandle, error)        { return IPCEventHandle{}, ErrNoCUDASupport }
