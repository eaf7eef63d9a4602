package iceberg

import (
	"context"
	"fmt"
	"slices"

	ice "github.com/apache/iceberg-go"
	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
)

// Position deletes.
//
// An Iceberg format-2 table deletes rows without rewriting their data
// files ("merge on read": Spark's DELETE, UPDATE and MERGE with
// write.delete.mode=merge-on-read, and the deletions that privacy
// requests force on event tables). A position delete file is a Parquet
// file of (file_path, pos) rows: row pos of data file file_path is gone.
// A scan applies a delete file to a data file only when the data file's
// data sequence number is at most the delete file's (a file added after
// the delete is not touched by it), and only for the paths it names; it
// ignores rows naming files outside the snapshot (files compacted away
// since).
//
// ScanSnapshot reads every position delete file of the snapshot through
// the same FS as the manifests (a user's view, in the daemon), and gives
// each data file its deleted positions, sorted and without repeats
// (File.Deleted). The engine gives each work unit its own deleted rows
// (decode.Unit.Deleted) and drops them before any op sees them; a unit
// sent to a CPU peer carries them (engine/deletes.go).
//
// Deletion vectors (format 3, dvdeletes.go) give positions too, and
// equality deletes (eqdeletes.go) are turned into positions for the data
// files a job plans. Delete files that are neither Parquet nor Puffin are
// refused. Returning deleted rows to a trainer is never an option.
//
// Rejected: a peer reading the delete files itself. A peer compiles a
// job against the unit's own file, not the table, and would have to scan
// the table's manifests and delete files for every job it serves; the
// positions of one unit are few and travel with it.

// deleteFile is a position delete file of a snapshot.
type deleteFile struct {
	path string // as decode.FS opens it
	seq  int64  // data sequence number
	rows int64  // as its manifest entry says
}

// MaxDeletedRows bounds the position deletes a scan holds in memory
// (8 bytes each): past it, the table is refused with what to do.
const MaxDeletedRows = 64 << 20

// noteDeletes records the delete files of one delete manifest, and
// refuses the kinds lastmile does not apply.
func (s *Scan) noteDeletes(entries []ice.ManifestEntry, manifest string, schema *ice.Schema, spec *ice.PartitionSpec) error {
	for _, e := range entries {
		df := e.DataFile()
		switch df.ContentType() {
		case ice.EntryContentPosDeletes:
		case ice.EntryContentEqDeletes:
			if err := s.noteEquality(e, manifest, schema, spec); err != nil {
				return err
			}
			continue
		default:
			return fmt.Errorf("manifest %s is a delete manifest but lists data file %s", manifest, df.FilePath())
		}
		if df.FileFormat() == ice.PuffinFile {
			if err := s.noteVector(e, manifest); err != nil {
				return err
			}
			continue
		}
		if df.FileFormat() != ice.ParquetFile {
			return fmt.Errorf("delete file %s is %s: lastmile reads Parquet delete files only", df.FilePath(), df.FileFormat())
		}
		path, err := localOrURL(df.FilePath())
		if err != nil {
			return fmt.Errorf("delete file: %v", err)
		}
		s.deletes = append(s.deletes, deleteFile{path: path, seq: e.SequenceNum(), rows: df.Count()})
	}
	return nil
}

// applyDeletes reads the snapshot's position delete files and sets each
// data file's Deleted positions. Its equality delete files are read only
// when a job plans (EqualityDeleted), but opened here: a user who may
// not read one is refused as early as for any other file of the table.
func (s *Scan) applyDeletes(ctx context.Context, fsys decode.FS) error {
	for _, d := range s.eqDeletes {
		f, err := fsys.Open(d.path)
		if err != nil {
			return fmt.Errorf("equality delete file: %w", err)
		}
		f.Close()
	}
	if len(s.deletes) == 0 && len(s.vectors) == 0 {
		return nil
	}
	var total int64
	for _, d := range s.deletes {
		total += min(max(d.rows, 0), MaxDeletedRows+1) // the manifest's word: no wrap, no negative
	}
	for _, d := range s.vectors {
		total += min(max(d.rows, 0), MaxDeletedRows+1)
	}
	if total > MaxDeletedRows {
		return fmt.Errorf("has %d position deletes, more than the %d lastmile holds; compact the table first (Spark: CALL system.rewrite_data_files with delete-file-threshold)", total, MaxDeletedRows)
	}
	byPath := make(map[string]int, len(s.Files))
	for i := range s.Files {
		byPath[s.Files[i].Path] = i
	}
	for _, d := range s.deletes {
		if err := s.readDeleteFile(ctx, fsys, d, byPath); err != nil {
			return fmt.Errorf("delete file %s: %w", d.path, err)
		}
	}
	for _, d := range s.vectors {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := s.readVector(fsys, d, byPath); err != nil {
			return fmt.Errorf("deletion vector in %s at %d: %w", d.path, d.off, err)
		}
	}
	for i := range s.Files {
		f := &s.Files[i]
		if len(f.Deleted) > 0 {
			slices.Sort(f.Deleted)
			f.Deleted = slices.Compact(f.Deleted)
			s.DeletedRows += int64(len(f.Deleted))
		}
	}
	return nil
}

// readDeleteFile adds the positions of one delete file to the data files
// it applies to.
func (s *Scan) readDeleteFile(ctx context.Context, fsys decode.FS, d deleteFile, byPath map[string]int) error {
	plan, err := decode.PlanFiles(ctx, []string{d.path}, decode.PlanOptions{FS: fsys, Columns: []string{"file_path", "pos"}, Listed: true})
	if err != nil {
		return err
	}
	// MaxDeletedRows was checked against the rows the manifests declare:
	// a file that holds more is damaged (or hostile), and is not read.
	if plan.Rows > d.rows {
		return fmt.Errorf("holds %d rows, and its manifest says %d: the table's metadata does not match its files", plan.Rows, d.rows)
	}
	dec := plan.NewDecoder()
	defer dec.Close()
	var b column.Batch
	for _, u := range plan.Units {
		if err := dec.Decode(ctx, u, &b); err != nil {
			return err
		}
		paths, pos := &b.Columns[0], &b.Columns[1]
		if paths.Kind != column.Bytes || pos.Kind != column.Fixed || pos.DType != column.Int64 {
			return fmt.Errorf("columns file_path %s and pos %s; want a string and an int64", paths.Kind, pos.DType)
		}
		if paths.NullCount() > 0 || pos.NullCount() > 0 {
			return fmt.Errorf("a null file_path or pos")
		}
		if err := s.addPositions(d, paths, pos.Int64s(), byPath); err != nil {
			return err
		}
	}
	return nil
}

// addPositions adds the rows of one decoded batch of a delete file.
func (s *Scan) addPositions(d deleteFile, paths *column.Column, pos []int64, byPath map[string]int) error {
	last, lastIdx := "", -1
	for r, p := range pos {
		name := string(paths.Row(r))
		if name != last {
			path, err := localOrURL(name)
			if err != nil {
				return fmt.Errorf("row %d: %v", r, err)
			}
			i, ok := byPath[path]
			if !ok || s.Files[i].seq > d.seq {
				i = -1 // a file not in the snapshot, or added after the delete
			}
			last, lastIdx = name, i
		}
		if lastIdx < 0 {
			continue
		}
		f := &s.Files[lastIdx]
		if p < 0 || p >= f.Rows {
			return fmt.Errorf("deletes row %d of %s, which has %d rows", p, f.Path, f.Rows)
		}
		f.Deleted = append(f.Deleted, p)
	}
	return nil
}

// Deletes returns the deleted row positions of every data file of ins
// that has some, by path (decode.Unit.File): what the engine drops.
func Deletes(ins []Input) map[string][]int64 {
	var out map[string][]int64
	for _, in := range ins {
		if in.Scan == nil {
			continue
		}
		for _, f := range in.Scan.Files {
			if len(f.Deleted) == 0 {
				continue
			}
			if out == nil {
				out = map[string][]int64{}
			}
			out[f.Path] = f.Deleted
		}
	}
	return out
}
