package decode

import (
	"encoding/binary"
	"fmt"

	"github.com/pierrec/lz4/v4"
)

// The deprecated LZ4 codec (5). Parquet never said how its bytes are
// framed, and writers disagree:
//
//   - parquet-mr, and so Spark's spark.sql.parquet.compression.codec=lz4,
//     compresses through Hadoop's Lz4Codec: blocks of [uncompressed
//     length][compressed length][an LZ4 block], the lengths big-endian
//     32-bit. A block larger than the compressor's buffer carries its
//     uncompressed length once, then several [compressed length][LZ4
//     block] chunks that decompress to it together.
//   - parquet-cpp before Arrow 2.0 (old pyarrow) wrote one bare LZ4 block.
//
// As Arrow's reader does, a page is read as Hadoop framing when the
// framing describes its bytes exactly, and as a bare block otherwise.
// LZ4_RAW (7), the codec that replaced it, is always a bare block.

// lz4Page decompresses an LZ4 (5) page into dst, which it must fill
// exactly.
func lz4Page(dst, src []byte) error {
	if lz4Hadoop(dst, src) {
		return nil
	}
	n, err := lz4.UncompressBlock(src, dst)
	if err != nil {
		return fmt.Errorf("lz4 page neither Hadoop-framed nor a bare block: %w", err)
	}
	if n != len(dst) {
		return fmt.Errorf("lz4 page expands to %d bytes, header says %d", n, len(dst))
	}
	return nil
}

// lz4Hadoop decompresses src as Hadoop-framed LZ4 into dst, and reports
// whether the framing held: every length in bounds, every chunk a valid
// LZ4 block, each block filled exactly, and dst filled exactly. On false
// dst holds garbage.
func lz4Hadoop(dst, src []byte) bool {
	out := 0
	for len(src) > 0 {
		if len(src) < 4 {
			return false
		}
		block := int64(binary.BigEndian.Uint32(src))
		src = src[4:]
		if block > int64(len(dst)-out) {
			return false
		}
		end := out + int(block)
		for out < end {
			if len(src) < 4 {
				return false
			}
			clen := int64(binary.BigEndian.Uint32(src))
			src = src[4:]
			if clen == 0 || clen > int64(len(src)) {
				return false
			}
			n, err := lz4.UncompressBlock(src[:clen], dst[out:end])
			if err != nil || n == 0 {
				return false
			}
			out += n
			src = src[clen:]
		}
	}
	return out == len(dst)
}
