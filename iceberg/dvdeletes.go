package iceberg

import (
	"fmt"
	"io"

	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table/dv"
	"github.com/lastmile/lastmile/decode"
)

// Deletion vectors.
//
// Iceberg format 3 records a data file's deleted rows as a deletion
// vector: a blob of a Puffin file holding a bitmap of positions (a
// portable 64-bit roaring bitmap, with its length, a magic number and a
// CRC). Its manifest entry is a position delete of format PUFFIN that
// names the data file it applies to (referenced_data_file) and where its
// blob lies in the Puffin file (content_offset, content_size_in_bytes).
// It applies as a position delete file does: to that data file, when
// the data file's data sequence number is at most its own.
//
// The blob is read by its range through the job's FS (the user's view),
// and parsed and checked (length, magic, CRC, and the cardinality
// against the entry's record count) by iceberg-go's table/dv package;
// its positions join the data file's other deletes. Only the blob's
// bytes are read: the Puffin footer is not needed to find it.

// dvDelete is a deletion vector of a snapshot.
type dvDelete struct {
	path     string // the Puffin file, as decode.FS opens it
	ref      string // the data file it applies to, as decode.FS opens it
	off, len int64  // the blob's byte range
	seq      int64  // data sequence number
	rows     int64  // positions, as its manifest entry says
}

// MaxDeletionVectorBytes bounds one deletion vector's blob.
const MaxDeletionVectorBytes = 256 << 20

// noteVector records a deletion vector's manifest entry.
func (s *Scan) noteVector(e ice.ManifestEntry, manifest string) error {
	df := e.DataFile()
	ref, off, size := df.ReferencedDataFile(), df.ContentOffset(), df.ContentSizeInBytes()
	if ref == nil || off == nil || size == nil {
		return fmt.Errorf("deletion vector %s (in manifest %s) does not name its data file and blob range", df.FilePath(), manifest)
	}
	if *off < 0 || *size < 12 || *size > MaxDeletionVectorBytes {
		return fmt.Errorf("deletion vector %s (in manifest %s): blob of %d bytes at %d", df.FilePath(), manifest, *size, *off)
	}
	d := dvDelete{off: *off, len: *size, seq: e.SequenceNum(), rows: df.Count()}
	var err error
	if d.path, err = localOrURL(df.FilePath()); err != nil {
		return fmt.Errorf("deletion vector: %v", err)
	}
	if d.ref, err = localOrURL(*ref); err != nil {
		return fmt.Errorf("deletion vector %s: referenced data file: %v", df.FilePath(), err)
	}
	s.vectors = append(s.vectors, d)
	return nil
}

// readVector adds one deletion vector's positions to its data file.
func (s *Scan) readVector(fsys decode.FS, d dvDelete, byPath map[string]int) error {
	i, ok := byPath[d.ref]
	if !ok || s.Files[i].seq > d.seq {
		return nil // a file not in the snapshot, or added after the vector
	}
	f, err := fsys.Open(d.path)
	if err != nil {
		return err
	}
	defer f.Close()
	blob := make([]byte, d.len)
	if n, err := f.ReadAt(blob, d.off); n != len(blob) {
		if err == nil || err == io.EOF {
			err = fmt.Errorf("the file ends inside the blob (%d of %d bytes at %d)", n, d.len, d.off)
		}
		return err
	}
	file := &s.Files[i]
	file.Deleted, err = vectorPositions(file.Deleted, blob, d.rows, file.Rows)
	if err != nil {
		return fmt.Errorf("%s: %w", file.Path, err)
	}
	return nil
}

// vectorPositions appends to dst the positions of a deletion vector's
// blob, which must hold count of them, each below rows.
func vectorPositions(dst []int64, blob []byte, count, rows int64) ([]int64, error) {
	if count < 0 {
		return dst, fmt.Errorf("a deletion vector of %d rows", count) // DeserializeDV checks no count below 0
	}
	bm, err := dv.DeserializeDV(blob, count)
	if err != nil {
		return dst, err
	}
	for p := range bm.Positions() {
		if p >= uint64(rows) {
			return dst, fmt.Errorf("the deletion vector deletes row %d, and the file has %d rows", p, rows)
		}
		dst = append(dst, int64(p))
	}
	return dst, nil
}
