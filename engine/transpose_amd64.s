#include "textflag.h"

// func transpose8x8(d unsafe.Pointer, stride uintptr, srcs *unsafe.Pointer, off, blocks uintptr)
//
// For each of blocks blocks of 8 rows: loads 8 float32 (or any 4-byte
// elements) at byte offset off of each of the 8 sources srcs[0..7], and
// stores the transposed 8x8 block, row k (the 8 sources' element k) to
// d + k*stride; then the next block 8 rows on (off+32, d+8*stride). AVX2.
TEXT ·transpose8x8(SB), NOSPLIT, $0-40
	MOVQ d+0(FP), DI
	MOVQ stride+8(FP), DX
	MOVQ srcs+16(FP), SI
	MOVQ off+24(FP), CX
	MOVQ blocks+32(FP), BX
	TESTQ BX, BX
	JZ done

loop:
	MOVQ 0(SI), AX
	VMOVUPS (AX)(CX*1), Y0
	MOVQ 8(SI), AX
	VMOVUPS (AX)(CX*1), Y1
	MOVQ 16(SI), AX
	VMOVUPS (AX)(CX*1), Y2
	MOVQ 24(SI), AX
	VMOVUPS (AX)(CX*1), Y3
	MOVQ 32(SI), AX
	VMOVUPS (AX)(CX*1), Y4
	MOVQ 40(SI), AX
	VMOVUPS (AX)(CX*1), Y5
	MOVQ 48(SI), AX
	VMOVUPS (AX)(CX*1), Y6
	MOVQ 56(SI), AX
	VMOVUPS (AX)(CX*1), Y7
	VUNPCKLPS Y1, Y0, Y8
	VUNPCKHPS Y1, Y0, Y9
	VUNPCKLPS Y3, Y2, Y10
	VUNPCKHPS Y3, Y2, Y11
	VUNPCKLPS Y5, Y4, Y12
	VUNPCKHPS Y5, Y4, Y13
	VUNPCKLPS Y7, Y6, Y14
	VUNPCKHPS Y7, Y6, Y15
	VSHUFPS $0x44, Y10, Y8, Y0
	VSHUFPS $0xEE, Y10, Y8, Y1
	VSHUFPS $0x44, Y11, Y9, Y2
	VSHUFPS $0xEE, Y11, Y9, Y3
	VSHUFPS $0x44, Y14, Y12, Y4
	VSHUFPS $0xEE, Y14, Y12, Y5
	VSHUFPS $0x44, Y15, Y13, Y6
	VSHUFPS $0xEE, Y15, Y13, Y7
	VPERM2F128 $0x20, Y4, Y0, Y8
	VPERM2F128 $0x20, Y5, Y1, Y9
	VPERM2F128 $0x20, Y6, Y2, Y10
	VPERM2F128 $0x20, Y7, Y3, Y11
	VPERM2F128 $0x31, Y4, Y0, Y12
	VPERM2F128 $0x31, Y5, Y1, Y13
	VPERM2F128 $0x31, Y6, Y2, Y14
	VPERM2F128 $0x31, Y7, Y3, Y15
	VMOVUPS Y8, (DI)
	ADDQ DX, DI
	VMOVUPS Y9, (DI)
	ADDQ DX, DI
	VMOVUPS Y10, (DI)
	ADDQ DX, DI
	VMOVUPS Y11, (DI)
	ADDQ DX, DI
	VMOVUPS Y12, (DI)
	ADDQ DX, DI
	VMOVUPS Y13, (DI)
	ADDQ DX, DI
	VMOVUPS Y14, (DI)
	ADDQ DX, DI
	VMOVUPS Y15, (DI)
	ADDQ DX, DI
	ADDQ $32, CX
	DECQ BX
	JNZ loop
	VZEROUPPER

done:
	RET
