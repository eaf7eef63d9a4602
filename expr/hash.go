package expr

import (
	"encoding/binary"
	"math"
	"math/bits"
)

// The hash of hash_mod(x, m) is XXH64 with seed 0 (the xxHash64 of
// github.com/Cyan4973/xxHash, as Python's xxhash.xxh64_intdigest computes
// it) over bytes that depend on x's type:
//
//	string          its bytes
//	int32, int64    the value as an int64, 8 bytes little-endian
//	bool            as the int64 0 or 1
//	float32/float64 the value as a float64, its 8 IEEE-754 bytes
//	                little-endian, with -0.0 as 0.0 and every NaN as
//	                0x7ff8000000000000
//
// and hash_mod is that uint64 modulo m. docs/expressions.md has the same
// text and test vectors; hash_test.go checks them.

const (
	prime1 uint64 = 11400714785074694791
	prime2 uint64 = 14029467366897019727
	prime3 uint64 = 1609587929392839161
	prime4 uint64 = 9650029242287828579
	prime5 uint64 = 2870177450012600261
)

// HashBytes is XXH64(b, seed 0): the hash hash_mod gives a string.
func HashBytes(b []byte) uint64 {
	n := len(b)
	var h uint64
	if n >= 32 {
		p1, p2 := prime1, prime2 // variables: the constant sums overflow
		v1 := p1 + p2
		v2 := p2
		v3 := uint64(0)
		v4 := -p1
		for len(b) >= 32 {
			v1 = round(v1, binary.LittleEndian.Uint64(b[0:8]))
			v2 = round(v2, binary.LittleEndian.Uint64(b[8:16]))
			v3 = round(v3, binary.LittleEndian.Uint64(b[16:24]))
			v4 = round(v4, binary.LittleEndian.Uint64(b[24:32]))
			b = b[32:]
		}
		h = bits.RotateLeft64(v1, 1) + bits.RotateLeft64(v2, 7) + bits.RotateLeft64(v3, 12) + bits.RotateLeft64(v4, 18)
		h = mergeRound(h, v1)
		h = mergeRound(h, v2)
		h = mergeRound(h, v3)
		h = mergeRound(h, v4)
	} else {
		h = prime5
	}
	h += uint64(n)
	for ; len(b) >= 8; b = b[8:] {
		h ^= round(0, binary.LittleEndian.Uint64(b[:8]))
		h = bits.RotateLeft64(h, 27)*prime1 + prime4
	}
	if len(b) >= 4 {
		h ^= uint64(binary.LittleEndian.Uint32(b[:4])) * prime1
		h = bits.RotateLeft64(h, 23)*prime2 + prime3
		b = b[4:]
	}
	for _, c := range b {
		h ^= uint64(c) * prime5
		h = bits.RotateLeft64(h, 11) * prime1
	}
	return avalanche(h)
}

// HashInt is the hash hash_mod gives an integer (or a bool as 0 or 1):
// XXH64 of its 8 little-endian bytes, seed 0.
func HashInt(v int64) uint64 {
	h := prime5 + 8
	h ^= round(0, uint64(v))
	h = bits.RotateLeft64(h, 27)*prime1 + prime4
	return avalanche(h)
}

// HashFloat is the hash hash_mod gives a float: XXH64 of the float64's 8
// little-endian IEEE-754 bytes, seed 0, after mapping -0.0 to 0.0 and
// every NaN to 0x7ff8000000000000.
func HashFloat(f float64) uint64 {
	return HashInt(int64(floatKey(f)))
}

func floatKey(f float64) uint64 {
	switch {
	case f == 0:
		return 0
	case f != f:
		return 0x7ff8000000000000
	}
	return math.Float64bits(f)
}

func round(acc, in uint64) uint64 {
	acc += in * prime2
	acc = bits.RotateLeft64(acc, 31)
	return acc * prime1
}

func mergeRound(acc, v uint64) uint64 {
	acc ^= round(0, v)
	return acc*prime1 + prime4
}

func avalanche(h uint64) uint64 {
	h ^= h >> 33
	h *= prime2
	h ^= h >> 29
	h *= prime3
	h ^= h >> 32
	return h
}

// Kernels: out[i] = hash(x[i]) mod m.

func hashModInts[T integer](out []int64, x []T, dv *divisor) {
	x = x[:len(out)]
	for i, v := range x {
		out[i] = int64(dv.mod(HashInt(int64(v))))
	}
}

func hashModFloats[T float](out []int64, x []T, dv *divisor) {
	x = x[:len(out)]
	for i, v := range x {
		out[i] = int64(dv.mod(HashFloat(float64(v))))
	}
}

func hashModBools(out []int64, x []byte, dv *divisor) {
	x = x[:len(out)]
	for i, v := range x {
		out[i] = int64(dv.mod(HashInt(int64(v))))
	}
}

func hashModStrings(out []int64, x *vec, dv *divisor) {
	off := x.off[:len(out)+1]
	for i := range out {
		out[i] = int64(dv.mod(HashBytes(x.data[off[i]:off[i+1]])))
	}
}
