package cuda

import (
	"errors"
	"fmt"
)

// Result is a CUresult, the driver API's status code.
type Result int

// The CUresult codes lastmile looks at by value (cuda.h's enum).
const (
	Success              Result = 0
	ErrInvalidValue      Result = 1
	ErrOutOfMemory       Result = 2
	ErrNotInitialized    Result = 3
	ErrDeinitialized     Result = 4
	ErrNoDevice          Result = 100
	ErrInsufficientDrv   Result = 35
	ErrInvalidDevice     Result = 101
	ErrInvalidContext    Result = 201
	ErrECCUncorrectable  Result = 214
	ErrNotReady          Result = 600
	ErrIllegalAddress    Result = 700
	ErrLaunchTimeout     Result = 702
	ErrHostMemRegistered Result = 712
	ErrHostMemNotReg     Result = 713
	ErrHardwareStack     Result = 714
	ErrIllegalInstr      Result = 715
	ErrMisalignedAddress Result = 716
	ErrInvalidAddrSpace  Result = 717
	ErrInvalidPC         Result = 718
	ErrLaunchFailed      Result = 719
	ErrNotSupported      Result = 801
	ErrUnknown           Result = 999
)

// names are the codes' names for when the library cannot say
// (cuGetErrorName missing or failing).
var names = map[Result]string{
	Success: "CUDA_SUCCESS", ErrInvalidValue: "CUDA_ERROR_INVALID_VALUE",
	ErrOutOfMemory: "CUDA_ERROR_OUT_OF_MEMORY", ErrNotInitialized: "CUDA_ERROR_NOT_INITIALIZED",
	ErrDeinitialized: "CUDA_ERROR_DEINITIALIZED", ErrNoDevice: "CUDA_ERROR_NO_DEVICE",
	ErrInsufficientDrv: "CUDA_ERROR_INSUFFICIENT_DRIVER", ErrInvalidDevice: "CUDA_ERROR_INVALID_DEVICE",
	ErrInvalidContext: "CUDA_ERROR_INVALID_CONTEXT", ErrECCUncorrectable: "CUDA_ERROR_ECC_UNCORRECTABLE",
	ErrNotReady: "CUDA_ERROR_NOT_READY", ErrIllegalAddress: "CUDA_ERROR_ILLEGAL_ADDRESS",
	ErrLaunchTimeout: "CUDA_ERROR_LAUNCH_TIMEOUT", ErrHostMemRegistered: "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
	ErrHostMemNotReg: "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED", ErrHardwareStack: "CUDA_ERROR_HARDWARE_STACK_ERROR",
	ErrIllegalInstr: "CUDA_ERROR_ILLEGAL_INSTRUCTION", ErrMisalignedAddress: "CUDA_ERROR_MISALIGNED_ADDRESS",
	ErrInvalidAddrSpace: "CUDA_ERROR_INVALID_ADDRESS_SPACE", ErrInvalidPC: "CUDA_ERROR_INVALID_PC",
	ErrLaunchFailed: "CUDA_ERROR_LAUNCH_FAILED", ErrNotSupported: "CUDA_ERROR_NOT_SUPPORTED",
	ErrUnknown: "CUDA_ERROR_UNKNOWN",
}

// Sticky reports whether r leaves the context unusable: after one of
// these every later call in the context fails, and only a new process
// recovers (CUDA's documentation of each code says "the CUDA context
// cannot be used ... the process must be terminated and relaunched").
func (r Result) Sticky() bool {
	switch r {
	case ErrECCUncorrectable, ErrIllegalAddress, ErrLaunchTimeout, ErrHardwareStack,
		ErrIllegalInstr, ErrMisalignedAddress, ErrInvalidAddrSpace, ErrInvalidPC, ErrLaunchFailed:
		return true
	}
	return false
}

// Error is a failed driver call.
type Error struct {
	// Call is the entry point, e.g. "cuMemHostRegister_v2".
	Call string
	// Args describes the call's arguments for the log, e.g. "bytes=4194304".
	Args string
	// Code is the CUresult.
	Code Result
	// Name and Text are cuGetErrorName's and cuGetErrorString's words for
	// it ("CUDA_ERROR_INVALID_VALUE", "invalid argument").
	Name, Text string
}

func (e *Error) Error() string {
	s := e.Call
	if e.Args != "" {
		s += "(" + e.Args + ")"
	}
	s += fmt.Sprintf(": %s (%d)", e.Name, int(e.Code))
	if e.Text != "" {
		s += ": " + e.Text
	}
	if e.Code.Sticky() {
		s += " [sticky: the CUDA context is unusable until the process restarts]"
	}
	return s
}

// Is lets errors.Is(err, cuda.ErrNoDevice) and the like match an *Error
// by code.
func (e *Error) Is(target error) bool {
	if r, ok := target.(Result); ok {
		return e.Code == r
	}
	return false
}

// Error makes a Result usable as an errors.Is target.
func (r Result) Error() string {
	if n, ok := names[r]; ok {
		return n
	}
	return fmt.Sprintf("CUresult %d", int(r))
}

var (
	// ErrNoCUDASupport is Open's error in a build without cgo, or for a
	// system other than Linux.
	ErrNoCUDASupport = errors.New("built without CUDA support (lastmile was built with CGO_ENABLED=0 or for a system other than Linux): rebuild with cgo on Linux to use GPUs")
	// ErrContextUnusable is returned, wrapped with the first sticky
	// error, by every call on a Context after a sticky error.
	ErrContextUnusable = errors.New("CUDA context unusable after a sticky error")
	// ErrClosed is returned by calls on a released context or a freed
	// object.
	ErrClosed = errors.New("cuda: use after release")
)

// NoDriver reports whether err says there is no usable GPU or driver
// here (the library is missing, or cuInit found no device or too old a
// driver): the case where GPU features switch themselves off, rather
// than fail.
func NoDriver(err error) bool {
	var le *LoadError
	return errors.As(err, &le) || errors.Is(err, ErrNoDevice) || errors.Is(err, ErrInsufficientDrv) ||
		errors.Is(err, ErrNoCUDASupport)
}

// LoadError is a failed dlopen or dlsym.
type LoadError struct {
	Path string
	Msg  string
}

func (e *LoadError) Error() string {
	return fmt.Sprintf("load CUDA driver library %s: %s (no NVIDIA driver on this host? set LASTMILE_LIBCUDA to libcuda.so.1's path if it is installed elsewhere)", e.Path, e.Msg)
}
