package cuda

import "unsafe"

// ptrAt turns an address outside Go's heap (mmap'd memory) into a pointer.
func ptrAt(addr uintptr) unsafe.Pointer {
	return unsafe.Add(unsafe.Pointer(nil), addr)
}

// unsafeBytes is the slice over size bytes at p, memory outside Go's heap.
func unsafeBytes(p unsafe.Pointer, size int64) []byte {
	return unsafe.Slice((*byte)(p), size)
}
