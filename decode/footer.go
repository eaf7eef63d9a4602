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

// footerGuess is how much of a file's end the first footer read takes.
// Most footers fit, so an object in a remote store costs one request for
// its footer, and two when it is larger.
const footerGuess = 64 << 10

// readFooter reads and decodes the file metadata of a Parquet file: one
// read of the last footerGuess bytes, then the rest of a longer footer.
// The leading magic is checked when the tail read covers it or the file is
// local; for a remote object it would cost a request of its own, and the
// trailing magic and every chunk's bounds are checked anyway.
func readFooter(f io.ReaderAt, size int64) (*format.FileMetaData, error) {
	if size < 12 {
		return nil, corruptf("file of %d bytes is too short for parquet", size)
	}
	tn := min(size, footerGuess)
	tail := make([]byte, tn)
	if err := readAtFull(f, tail, size-tn); err != nil {
		return nil, fmt.Errorf("read footer: %w", err)
	}
	end := tail[tn-8:]
	if string(end[4:]) != "PAR1" {
		if string(end[4:]) == "PARE" {
			return nil, fmt.Errorf("%w: encrypted footer", ErrUnsupported)
		}
		return nil, corruptf("no PAR1 magic at the end (truncated or not parquet)")
	}
	n := int64(binary.LittleEndian.Uint32(end[:4]))
	if n <= 0 || n > size-12 || n > maxFooterLen {
		return nil, corruptf("footer length %d does not fit a file of %d bytes", n, size)
	}
	if err := checkHead(f, tail, size); err != nil {
		return nil, err
	}
	var buf []byte
	if n+8 <= tn {
		buf = tail[tn-8-n : tn-8]
	} else {
		buf = make([]byte, n)
		have := tn - 8
		copy(buf[n-have:], tail[:have])
		if err := readAtFull(f, buf[:n-have], size-8-n); err != nil {
			return nil, fmt.Errorf("read footer: %w", err)
		}
	}
	md := new(format.FileMetaData)
	if err := unmarshalThrift(buf, md); err != nil {
		return nil, corruptf("footer: %v", err)
	}
	return md, nil
}

// checkHead checks the leading PAR1 magic where it costs no request.
func checkHead(f io.ReaderAt, tail []byte, size int64) error {
	var head []byte
	switch {
	case int64(len(tail)) == size:
		head = tail[:4]
	case isLocal(f):
		var b [4]byte
		if err := readAtFull(f, b[:], 0); err != nil {
			return fmt.Errorf("read header: %w", err)
		}
		head = b[:]
	default:
		return nil
	}
	if string(head) != "PAR1" {
		return corruptf("no PAR1 magic at the start")
	}
	return nil
}

func isLocal(f io.ReaderAt) bool { _, ok := f.(*os.File); return ok }

// readAtFull reads len(b) bytes at off; a short read is an error.
func readAtFull(f io.ReaderAt, b []byte, off int64) error {
	n, err := f.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || err == io.EOF {
		return fmt.Errorf("%w: read %d of %d bytes at offset %d", io.ErrUnexpectedEOF, n, len(b), off)
	}
	return err
}

// unmarshalThrift runs the reflective thrift decoder, turning a panic on
// hostile input into an error. It first checks that b is well formed and
// decodes to a bounded size (checkThrift, thriftcheck.go).
func unmarshalThrift(b []byte, v any) (err error) {
	if err := checkThrift(b, metaKind(v)); err != nil {
		return err
	}
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
func readOffsetIndex(f io.ReaderAt, size int64, cc *format.ColumnChunk) (*format.OffsetIndex, error) {
	if cc.OffsetIndexLength <= 0 || cc.OffsetIndexOffset <= 0 {
		return nil, nil
	}
	if cc.OffsetIndexOffset+int64(cc.OffsetIndexLength) > size {
		return nil, corruptf("offset index [%d, +%d) past the end of the file", cc.OffsetIndexOffset, cc.OffsetIndexLength)
	}
	buf := make([]byte, cc.OffsetIndexLength)
	if err := readAtFull(f, buf, cc.OffsetIndexOffset); err != nil {
		return nil, fmt.Errorf("read offset index: %w", err)
	}
	oi := new(format.OffsetIndex)
	if err := unmarshalThrift(buf, oi); err != nil {
		return nil, corruptf("offset index: %v", err)
	}
	return oi, nil
}
