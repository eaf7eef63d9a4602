package iceberg

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
)

// A manifest list is read whole by iceberg-go v0.7.0, which has no
// streaming reader for it, and its Avro blocks are compressed: a list of
// a few MB can name one manifest millions of times, or hold a path of a
// hundred MB, and decode to gigabytes in the shared daemon before any
// check of lastmile's runs. avroBound walks the file's blocks first (an
// Avro object container: a header, then blocks of a record count, a byte
// size, the data and a 16-byte sync marker) and refuses one whose records
// or decompressed bytes pass the bounds. The counts are read without
// decompressing; the bytes are counted by decompressing each block into
// nothing, within the bound.

// errAvroBound is avroBound's error for a file over its bounds.
var errAvroBound = errors.New("larger than lastmile reads (damaged, or made to exhaust memory; a real table this large needs its manifests compacted: Spark CALL system.rewrite_manifests)")

// avroBound checks the Avro object container data: at most maxRecords
// records, at most maxBytes bytes once decompressed.
func avroBound(data []byte, maxRecords, maxBytes int64) error {
	r := bytes.NewReader(data)
	codec, err := avroHeader(r)
	if err != nil {
		return err
	}
	var records, size int64
	for r.Len() > 0 {
		n, err := binary.ReadVarint(r)
		if err != nil {
			return fmt.Errorf("avro block count: %w", err)
		}
		bn, err := binary.ReadVarint(r)
		if err != nil {
			return fmt.Errorf("avro block size: %w", err)
		}
		if n < 0 || bn < 0 || bn > int64(r.Len()) {
			return fmt.Errorf("avro block of %d records in %d bytes: the file is damaged", n, bn)
		}
		if records += n; records > maxRecords {
			return fmt.Errorf("more than %d records: %w", maxRecords, errAvroBound)
		}
		block := data[len(data)-r.Len():][:bn]
		got, err := inflated(codec, block, maxBytes-size)
		if err != nil {
			return err
		}
		if size += got; size > maxBytes {
			return fmt.Errorf("more than %d bytes once decompressed: %w", maxBytes, errAvroBound)
		}
		if _, err := r.Seek(bn+16, io.SeekCurrent); err != nil {
			return err
		}
	}
	return nil
}

// avroHeader reads the container's header up to its first block and
// returns its codec.
func avroHeader(r *bytes.Reader) (string, error) {
	magic := make([]byte, 4)
	if _, err := io.ReadFull(r, magic); err != nil || string(magic) != "Obj\x01" {
		return "", errors.New("not an Avro object container file")
	}
	codec := "null"
	for {
		n, err := binary.ReadVarint(r)
		if err != nil {
			return "", fmt.Errorf("avro header: %w", err)
		}
		if n == 0 {
			break
		}
		if n < 0 { // a negative count is followed by the block's size
			n = -n
			if _, err := binary.ReadVarint(r); err != nil {
				return "", fmt.Errorf("avro header: %w", err)
			}
		}
		for range n {
			k, err := avroBytes(r)
			if err != nil {
				return "", err
			}
			v, err := avroBytes(r)
			if err != nil {
				return "", err
			}
			if string(k) == "avro.codec" {
				codec = string(v)
			}
		}
	}
	if _, err := r.Seek(16, io.SeekCurrent); err != nil { // the sync marker
		return "", err
	}
	return codec, nil
}

func avroBytes(r *bytes.Reader) ([]byte, error) {
	n, err := binary.ReadVarint(r)
	if err != nil || n < 0 || n > int64(r.Len()) {
		return nil, errors.New("avro header: damaged")
	}
	b := make([]byte, n)
	_, err = io.ReadFull(r, b)
	return b, err
}

// inflated returns the size of block decompressed by codec, reading at
// most limit+1 bytes of it.
func inflated(codec string, block []byte, limit int64) (int64, error) {
	var rd io.Reader
	switch codec {
	case "null", "":
		return int64(len(block)), nil
	case "deflate":
		f := flate.NewReader(bytes.NewReader(block))
		defer f.Close()
		rd = f
	case "snappy": // the block, then its CRC-32
		if len(block) < 4 {
			return 0, errors.New("avro snappy block: damaged")
		}
		n, err := snappy.DecodedLen(block[:len(block)-4])
		return int64(n), err
	case "zstandard":
		// A frame's header declares its window: held to the bound, so
		// that a declared window is no allocation of its own.
		z, err := zstd.NewReader(bytes.NewReader(block), zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderMaxMemory(uint64(max(limit, 1)+1)), zstd.WithDecoderMaxWindow(uint64(min(max(limit, 1<<10), 1<<29))))
		if err != nil {
			return 0, err
		}
		defer z.Close()
		rd = z
	default:
		return 0, fmt.Errorf("avro codec %q: lastmile reads null, deflate, snappy and zstandard", codec)
	}
	n, err := io.Copy(io.Discard, io.LimitReader(rd, limit+1))
	if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) {
		return limit + 1, nil // past the bound: the caller says so
	}
	if err != nil {
		return n, fmt.Errorf("avro %s block: %w", codec, err)
	}
	return n, nil
}
