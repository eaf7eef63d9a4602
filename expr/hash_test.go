package expr_test

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/expr"
)

// The vectors of docs/expressions.md ("hash_mod"). The first three are
// xxHash's own XXH64 test values for seed 0.
func TestHashVectors(t *testing.T) {
	for _, c := range []struct {
		s    string
		want uint64
	}{
		{"", 0xef46db3751d8e999},
		{"a", 0xd24ec4f1a98c6e5b},
		{"abc", 0x44bc2cf5ad770999},
		{"foo", 0x33bf00a859c4ba3f},
		{"hello world", 0x45ab6734b21e6968},
		{"0123456789abcdef0123456789abcdef!", 0x8afff4daac4e677e},
	} {
		if got := expr.HashBytes([]byte(c.s)); got != c.want {
			t.Errorf("HashBytes(%q) = %#x, want %#x", c.s, got, c.want)
		}
	}
	for _, c := range []struct {
		v    int64
		want uint64
	}{
		{0, 0x34c96acdcadb1bbb},
		{1, 0x9f29cb17a2a49995},
		{-1, 0x85d136adb773c6c9},
		{42, 0xb556806fb6d14353},
		{1 << 40, 0xa13ea4c7924fd453},
		{math.MinInt64, 0x3f425eacf01544e0},
	} {
		if got := expr.HashInt(c.v); got != c.want {
			t.Errorf("HashInt(%d) = %#x, want %#x", c.v, got, c.want)
		}
	}
	for _, c := range []struct {
		f    float64
		want uint64
	}{
		{0, 0x34c96acdcadb1bbb},
		{math.Copysign(0, -1), 0x34c96acdcadb1bbb},
		{1.5, 0x49f7b96b6b5ccaf9},
		{-2.25, 0xedc48cc538c7e06e},
	} {
		if got := expr.HashFloat(c.f); got != c.want {
			t.Errorf("HashFloat(%v) = %#x, want %#x", c.f, got, c.want)
		}
	}
	if expr.HashFloat(math.NaN()) != expr.HashFloat(-math.NaN()) || expr.HashFloat(math.NaN()) != expr.HashInt(0x7ff8000000000000) {
		t.Errorf("NaNs hash differently")
	}
}

// TestHashAllLengths checks HashBytes on every prefix, 0 to 200 bytes, of
// a fixed pattern, which takes every path of XXH64 (short inputs, 32-byte
// stripes, 8-, 4- and 1-byte tails), against a checksum of the same
// prefixes' hashes computed with github.com/cespare/xxhash/v2.
func TestHashAllLengths(t *testing.T) {
	p := make([]byte, 200)
	for i := range p {
		p[i] = byte(i*131 + 7)
	}
	var acc uint64
	for n := 0; n <= len(p); n++ {
		acc = acc*31 + expr.HashBytes(p[:n])
	}
	if want := uint64(0x931128aca5914bcd); acc != want {
		t.Errorf("checksum of the prefix hashes = %#x, want %#x", acc, want)
	}
	for _, v := range []int64{0, 1, -1, 1 << 40, math.MinInt64, math.MaxInt64, 123456789} {
		if got, want := expr.HashInt(v), expr.HashBytes(binary.LittleEndian.AppendUint64(nil, uint64(v))); got != want {
			t.Errorf("HashInt(%d) = %#x, HashBytes of its bytes %#x", v, got, want)
		}
	}
}

// TestHashModColumns checks hash_mod over columns against the documented
// vectors: an int32 and an int64 column hash alike, strings by bytes.
func TestHashModColumns(t *testing.T) {
	b := batch(
		ints("i32", column.Int32, []int64{0, 1, -1, 42}, nil),
		ints("i64", column.Int64, []int64{0, 1, -1, 42}, nil),
		strs("s", []string{"foo", "abc", "", "a"}, nil),
	)
	wantInts := []int64{7099, 39317, 50889, 17235}
	checkInts(t, b, "hash_mod(i32, 65536)", wantInts, nil)
	checkInts(t, b, "hash_mod(i64, 65536)", wantInts, nil)
	checkInts(t, b, "hash_mod(i64, 1000003)", []int64{147490, 595905, 594702, 807713}, nil)
	checkInts(t, b, "hash_mod(s, 65536)", []int64{47679, 2457, 0xe999, 0x6e5b}, nil)
	checkInts(t, b, "hash_mod(s, 1)", []int64{0, 0, 0, 0}, nil)
	h := expr.HashBytes([]byte("foo"))
	checkInts(t, b, "hash_mod(s, 9223372036854775807)", []int64{int64(h % math.MaxInt64), int64(expr.HashBytes([]byte("abc")) % math.MaxInt64), int64(0xef46db3751d8e999 % uint64(math.MaxInt64)), int64(0xd24ec4f1a98c6e5b % uint64(math.MaxInt64))}, nil)
}
