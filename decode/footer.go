package decode

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"

	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

const maxFooterLen = 256 << 20

// readFooter reads and decodes the file metadata of a Parquet file.
func readFooter(f *os.File, size int64) (*format.FileMetaData, error) {
	if size < 12 {
		return nil, corruptf("file of %d bytes is too short for parquet", size)
	}
	var tail [8]byte
	if _, err := f.ReadAt(tail[:], size-8); err != nil {
		return nil, fmt.Errorf("read footer: %w", err)
	}
	if string(tail[4:]) != "PAR1" {
		if string(tail[4:]) == "PARE" {
			return nil, fmt.Errorf("%w: encrypted footer", ErrUnsupported)
		}
		return nil, corruptf("no PAR1 magic at the end (truncated or not parquet)")
	}
	n := int64(binary.LittleEndian.Uint32(tail[:4]))
	if n <= 0 || n > size-12 || n > maxFooterLen {
		return nil, corruptf("footer length %d does not fit a file of %d bytes", n, size)
	}
	var head [4]byte
	if _, err := f.ReadAt(head[:], 0); err != nil {
		return nil, fmt.Errorf("read header: %w", err)
	}
	if string(head[:]) != "PAR1" {
		return nil, corruptf("no PAR1 magic at the start")
	}
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, size-8-n); err != nil && err != io.EOF {
		return nil, fmt.Errorf("read footer: %w", err)
	}
	md := new(format.FileMetaData)
	if err := unmarshalThrift(buf, md); err != nil {
		return nil, corruptf("footer: %v", err)
	}
	return md, nil
}

// unmarshalThrift runs the reflective thrift decoder, turning a panic on
// hostile input into an error.
func unmarshalThrift(b []byte, v any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("thrift decoder panic: %v", r)
		}
	}()
	var p thrift.CompactProtocol
	return thrift.Unmarshal(&p, b, v)
}

// readOffsetIndex reads a column chunk's OffsetIndex, or returns nil when
// the chunk has none.
func readOffsetIndex(f *os.File, size int64, cc *format.ColumnChunk) (*format.OffsetIndex, error) {
	if cc.OffsetIndexLength <= 0 || cc.OffsetIndexOffset <= 0 {
		return nil, nil
	}
	if cc.OffsetIndexOffset+int64(cc.OffsetIndexLength) > size {
		return nil, corruptf("offset index [%d, +%d) past the end of the file", cc.OffsetIndexOffset, cc.OffsetIndexLength)
	}
	buf := make([]byte, cc.OffsetIndexLength)
	if _, err := f.ReadAt(buf, cc.OffsetIndexOffset); err != nil {
		return nil, fmt.Errorf("read offset index: %w", err)
	}
	oi := new(format.OffsetIndex)
	if err := unmarshalThrift(buf, oi); err != nil {
		return nil, corruptf("offset index: %v", err)
	}
	return oi, nil
}
