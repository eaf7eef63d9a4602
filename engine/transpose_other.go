//go:build !amd64

package engine

import "unsafe"

const haveTranspose8x8 = false

func transpose8x8(d unsafe.Pointer, stride uintptr, srcs *unsafe.Pointer, off, blocks uintptr) {
	panic("BUG: transpose8x8 without AVX2")
}
