package decode

import (
	"bytes"
	"fmt"
	"io"

	"github.com/andybalholm/brotli"
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
	codecBrotli = 4
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
	case codecBrotli:
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
	return c == codecNone || c == codecSnappy || c == codecGzip || c == codecZstd || c == codecLz4Raw || c == codecLz4 ||
		c == codecBrotli
}

// decompressor decompresses page bodies; one per Decoder, not safe for
// concurrent use. The zstd, gzip and brotli decoders are created on
// first use and reset for each page after that.
type decompressor struct {
	zstd   *zstd.Decoder
	gz     *gzip.Reader
	brotli *brotli.Reader
	br     bytes.Reader

	// held is a brotli page decoded ahead by holdBrotli; heldFrom and
	// heldLen name the stored bytes it came from.
	held     []byte
	heldFrom *byte
	heldLen  int
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
				zstd.WithDecoderMaxMemory(maxPageBytes), zstd.WithDecodeAllCapLimit(true))
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
		return readExactly(z.gz, dst, "gzip")
	case codecBrotli:
		return z.decompressBrotli(dst, src)
	}
	return fmt.Errorf("unsupported compression codec %s", codecName(codec))
}

// decompressBrotli decompresses one brotli stream, which must expand to
// exactly len(dst) bytes. andybalholm/brotli is the pure-Go port of the
// reference decoder that arrow-go and parquet-go use; its Reader keeps
// its window and tables across Reset, so one per decompressor is reused.
func (z *decompressor) decompressBrotli(dst, src []byte) error {
	if len(src) > 0 && z.heldLen == len(src) && z.heldFrom == &src[0] {
		z.heldFrom, z.heldLen = nil, 0
		if len(z.held) != len(dst) {
			return fmt.Errorf("brotli page expands to %d bytes, header says %d", len(z.held), len(dst))
		}
		copy(dst, z.held)
		return nil
	}
	if err := z.startBrotli(src); err != nil {
		return err
	}
	return readExactly(z.brotli, dst, "brotli")
}

func (z *decompressor) startBrotli(src []byte) error {
	z.br.Reset(src)
	if z.brotli == nil {
		z.brotli = brotli.NewReader(&z.br)
	} else if err := z.brotli.Reset(&z.br); err != nil {
		return fmt.Errorf("brotli: %w", err)
	}
	return nil
}

// holdBrotli decodes the brotli stream src, which must expand to exactly
// want bytes, into z.held, growing it only as the stream gives bytes, and
// keeps it for the decompress of the same src that follows. A brotli
// stream gives no size a reader can trust before it is decoded, so a page
// of a few bytes whose header claims a gigabyte costs, this way, only
// what the stream really holds; the values are then copied from z.held
// (a brotli page decodes at a few hundred MB/s, the copy at several GB/s).
func (z *decompressor) holdBrotli(src []byte, want int) error {
	z.heldFrom, z.heldLen = nil, 0
	if len(src) == 0 {
		return nil // decompress reports it
	}
	if err := z.startBrotli(src); err != nil {
		return err
	}
	// Read until the stream ends or holds one byte more than want; the
	// buffer grows with what arrives, never past want+1.
	buf := z.held[:0]
	var err error
	for err == nil && len(buf) <= want {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(max(2*cap(buf), 64<<10), want+1))
			buf = grown[:copy(grown, buf)]
		}
		var n int
		n, err = z.brotli.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
	}
	z.held = buf
	switch {
	case err != nil && err != io.EOF:
		return fmt.Errorf("brotli: %w", err)
	case len(buf) > want:
		return fmt.Errorf("brotli page expands to more than its header's %d bytes", want)
	case len(buf) < want:
		return fmt.Errorf("brotli: page shorter than its header's %d bytes: %d", want, len(buf))
	}
	z.heldFrom, z.heldLen = &src[0], len(src)
	return nil
}

// readExactly fills dst from a streaming decompressor and checks that
// the stream ends there: a page that expands to more than its header
// says is corrupt, not a page to cut short. Bytes after the end of the
// stream that decompress to nothing (padding) are ignored, as Arrow's
// reader ignores them.
func readExactly(r io.Reader, dst []byte, codec string) error {
	if _, err := io.ReadFull(r, dst); err != nil {
		return fmt.Errorf("%s: page shorter than its header's %d bytes: %w", codec, len(dst), err)
	}
	var one [1]byte
	if n, _ := r.Read(one[:]); n > 0 {
		return fmt.Errorf("%s page expands to more than its header's %d bytes", codec, len(dst))
	}
	return nil
}

// close releases the zstd decoder's goroutines and memory.
func (z *decompressor) close() {
	if z.zstd != nil {
		z.zstd.Close()
		z.zstd = nil
	}
}
