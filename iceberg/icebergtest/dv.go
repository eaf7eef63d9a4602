package icebergtest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/puffin"
	"github.com/apache/iceberg-go/table/dv"
)

// DeleteVector commits a snapshot that adds a deletion vector (format 3)
// of the data file at location file (as DataFiles gives it) deleting
// positions, in a Puffin file of its own; seq, when > 0, is its data
// sequence number instead of the snapshot's.
func (t *Table) DeleteVector(file string, positions []int64, seq int64) (int64, string, error) {
	if t.version < 3 {
		return 0, "", fmt.Errorf("deletion vectors need format version 3, the table is %d", t.version)
	}
	id := int64(1000 + len(t.meta.Snapshots))
	snapSeq := int64(len(t.meta.Snapshots) + 1)
	if seq <= 0 {
		seq = snapSeq
	}
	bm := dv.NewRoaringPositionBitmap()
	for _, p := range positions {
		bm.Set(uint64(p))
	}
	blob, err := dv.SerializeDV(bm)
	if err != nil {
		return 0, "", err
	}
	path := filepath.Join(t.Dir, "data", fmt.Sprintf("dv-%d.puffin", id))
	f, err := os.Create(path)
	if err != nil {
		return 0, "", err
	}
	w, err := puffin.NewWriter(f)
	if err != nil {
		return 0, "", err
	}
	meta, err := w.AddBlob(puffin.BlobMetadataInput{Type: "deletion-vector-v1", SnapshotID: -1, SequenceNumber: -1, Fields: []int32{},
		Properties: map[string]string{"referenced-data-file": file, "cardinality": strconv.Itoa(int(bm.Cardinality()))}}, blob)
	if err != nil {
		return 0, "", err
	}
	if err := w.Finish(); err != nil {
		return 0, "", err
	}
	if err := f.Close(); err != nil {
		return 0, "", err
	}
	var part map[int]any
	for _, e := range t.live {
		if e.DataFile().FilePath() == file {
			part = e.DataFile().Partition()
		}
	}
	b, err := ice.NewDataFileBuilder(t.spec, ice.EntryContentPosDeletes, t.loc(path), ice.PuffinFile, part, nil, nil, bm.Cardinality(), fileSize(path))
	if err != nil {
		return 0, "", err
	}
	b.ReferencedDataFile(file).ContentOffset(meta.Offset).ContentSizeInBytes(meta.Length)
	t.dels = append(t.dels, ice.NewManifestEntry(ice.EntryStatusADDED, &id, &seq, &snapSeq, b.Build()))
	return t.commit(id, snapSeq, t.live, t.dels)
}
