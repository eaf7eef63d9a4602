package engine

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// haveTranspose8x8 says whether transpose8x8 may be called (AVX2).
var haveTranspose8x8 = cpu.X86.HasAVX2

// transpose8x8 stores blocks 8x8 blocks of 4-byte elements, from byte
// offset off of the sources srcs[0..7] on, transposed: row k, the
// sources' element k, at d + k*stride (transpose_amd64.s).
//
//go:noescape
func transpose8x8(d unsafe.Pointer, stride uintptr, srcs *unsafe.Pointer, off, blocks uintptr)
