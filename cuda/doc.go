// Package cuda owns lastmile's use of the NVIDIA CUDA driver API: loading
// libcuda.so.1 at run time, the device inventory the driver reports, a
// device's primary context, page-locking (registering) host memory that
// is already mapped, device allocations, streams, events, asynchronous
// host-to-device copies, and CUDA IPC handles for memory and events.
//
// The library is opened with dlopen, never linked, and called through
// function pointers whose prototypes are written by hand in the cgo
// preamble (cuda_cgo.go), so lastmile builds without the CUDA toolkit or
// its headers and runs on hosts without a GPU or a driver: Open then
// fails with an error that says so. The path of the library is
// LASTMILE_LIBCUDA, the caller's Config.Library, or "libcuda.so.1" (the
// dynamic linker's search). Tests load a fake libcuda compiled from
// testdata/fakecuda.c that records every call and fails any of them on
// request.
//
// Errors carry the CUresult's name and text (Error). A sticky error (an
// illegal address, a failed launch, an uncorrectable ECC error: Sticky)
// poisons a CUDA context for the life of the process; the Context that
// saw one refuses every later call with ErrContextUnusable, naming the
// first error, instead of handing the driver more work.
//
// A CUDA context is current per OS thread, and goroutines move between
// threads: every call that needs the context locks the goroutine to its
// thread, makes the context current and calls the driver, all under one
// LockOSThread.
//
// Builds without cgo, or for other systems than Linux, get the same API
// from cuda_other.go; there Open returns ErrNoCUDASupport.
//
// This is a leaf package: it must never import another lastmile package.
// It must never hand the driver Go-heap memory to register or to copy
// from asynchronously (the cgo pointer rules forbid C keeping a Go
// pointer past the call): host ranges are mmap'd or driver-allocated.
// It never unmaps memory it did not map, and unregisters a range before
// unmapping it (Mapping.Close).
package cuda
