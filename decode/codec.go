package decode

import (
	"bytes"
	"fmt"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Parquet compression codecs (parquet.thrift CompressionCodec).
const (
	codecNone   = 0
	codecSnappy = 1
	codecGzip   = 2
	codecLz4    = 5 // deprecated "LZ4": Hadoop-framed, or a bare block (lz4.go)
	codecZstd   = 6
	codecLz4Raw = 7
)

func codecName(c int32) string {
	switch c {
	case codecNone:
		return "UNCOMPRESSED"
	case codecSnappy:
		return "SNAPPY"
	case codecGzip:
		return "GZIP"
	case 3:
		return "LZO"
	case 4:
		return "BROTLI"
	case 5:
		return "LZ4"
	case codecZstd:
		return "ZSTD"
	case 7:
		return "LZ4_RAW"
	}
	return fmt.Sprintf("codec(%d)", c)
}

func codecSupported(c int32) bool {
	return c == codecNone || c == codecSnappy || c == codecGzip || c == codecZstd || c == codecLz4Raw || c == codecLz4
}

// decompressor decompresses page bodies; one per Decoder, not safe for
// concurrent use. The zstd decoder is created on first use.
type decompressor struct {
	zstd *zstd.Decoder
	gz   *gzip.Reader
	br   bytes.Reader
}

// decompress decompresses src, which must expand to exactly len(dst)
// bytes, into dst. dst is written in place: callers pass the final
// location of the values where they can.
func (z *decompressor) decompress(codec int32, dst, src []byte) error {
	switch codec {
	case codecNone:
		if len(src) != len(dst) {
			return fmt.Errorf("uncompressed page holds %d bytes, header says %d", len(src), len(dst))
		}
		copy(dst, src)
		return nil
	case codecSnappy:
		n, err := snappy.DecodedLen(src)
		if err != nil {
			return fmt.Errorf("snappy: %w", err)
		}
		if n != len(dst) {
			return fmt.Errorf("snappy page expands to %d bytes, header says %d", n, len(dst))
		}
		// s2 decodes snappy blocks and is the faster decoder.
		out, err := s2.Decode(dst, src)
		if err != nil {
			return fmt.Errorf("snappy: %w", err)
		}
		if len(out) != len(dst) || (len(out) > 0 && &out[0] != &dst[0]) {
			return fmt.Errorf("snappy page expands to %d bytes, header says %d", len(out), len(dst))
		}
		return nil
	case codecZstd:
		if z.zstd == nil {
			d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(false),
				zstd.WithDecoderMaxMemory(1<<31))
			if err != nil {
				return fmt.Errorf("zstd: %w", err)
			}
			z.zstd = d
		}
		out, err := z.zstd.DecodeAll(src, dst[:0:len(dst)])
		if err != nil {
			return fmt.Errorf("zstd: %w", err)
		}
		if len(out) != len(dst) || (len(out) > 0 && &out[0] != &dst[0]) {
			return fmt.Errorf("zstd page expands to %d bytes, header says %d", len(out), len(dst))
		}
		return nil
	case codecLz4Raw:
		n, err := lz4.UncompressBlock(src, dst)
		if err != nil {
			return fmt.Errorf("lz4: %w", err)
		}
		if n != len(dst) {
			return fmt.Errorf("lz4 page expands to %d bytes, header says %d", n, len(dst))
		}
		return nil
	case codecLz4:
		return lz4Page(dst, src)
	case codecGzip:
		z.br.Reset(src)
		if z.gz == nil {
			gz, err := gzip.NewReader(&z.br)
			if err != nil {
				return fmt.Errorf("gzip: %w", err)
			}
			z.gz = gz
		} else if err := z.gz.Reset(&z.br); err != nil {
			return fmt.Errorf("gzip: %w", err)
		}
		if _, err := io.ReadFull(z.gz, dst); err != nil {
			return fmt.Errorf("gzip: %w", err)
		}
		return nil
	}
	return fmt.Errorf("unsupported compression codec %s", codecName(codec))
}

// close releases the zstd decoder's goroutines and memory.
func (z *decompressor) close() {
	if z.zstd != nil {
		z.zstd.Close()
		z.zstd = nil
	}
}
