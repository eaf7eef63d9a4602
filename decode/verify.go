package decode

import (
	"fmt"
	"slices"

	"github.com/parquet-go/parquet-go/format"
)

// VerifyUnits makes every later Open check its unit against the unit's
// file's own footer before anything is decoded: the row group exists and
// holds the unit's rows, and each chunk is the planned field's column
// chunk of that row group, with its level count, sizes and codec, and
// byte ranges inside it. A CPU peer decodes units that other hosts
// planned; their figures size its buffers (reserveWhole, growData) and
// bound its reads, so a peer takes them from the file, not from the
// requester. Each file's footer is read once while the decoder keeps the
// file open. A unit that does not match fails Open with ErrBadUnit.
func (d *Decoder) VerifyUnits() { d.verify = true }

// checkUnit compares u with the footer of f (size bytes).
func (d *Decoder) checkUnit(f File, u *Unit, size int64) error {
	md, err := d.files.footer(u.File, f, size)
	if err != nil {
		return err
	}
	if u.RowGroup >= len(md.RowGroups) {
		return fmt.Errorf("%w: row group %d of a file of %d", ErrBadUnit, u.RowGroup, len(md.RowGroups))
	}
	g := &md.RowGroups[u.RowGroup]
	if u.RowStart+u.Rows > g.NumRows {
		return fmt.Errorf("%w: rows [%d, %d) of a row group of %d", ErrBadUnit, u.RowStart, u.RowStart+u.Rows, g.NumRows)
	}
	if u.GroupRowCount != 0 && u.GroupRowCount != g.NumRows {
		return fmt.Errorf("%w: a row group of %d rows, the file's has %d", ErrBadUnit, u.GroupRowCount, g.NumRows)
	}
	for i := range u.Chunks {
		if u.Chunks[i].Absent {
			if err := absentFrom(g, &d.base[i]); err != nil {
				return err
			}
			continue // reads nothing from the file
		}
		// At the unit's own leaf: the files of a table may order their
		// columns differently, and the plan's field is the first's.
		f := d.base[i]
		f.Leaf = u.Chunks[i].Leaf
		f = renamedIn(g, f)
		want, err := chunkOf(g, &f, size)
		if err != nil {
			return err
		}
		if err := sameChunk(&u.Chunks[i], &want); err != nil {
			return fmt.Errorf("%w: column %q: %v", ErrBadUnit, d.fields[i].Name, err)
		}
		if p := u.Chunks[i].Physical; p != 0 && p != int32(g.Columns[want.Leaf].MetaData.Type) {
			return fmt.Errorf("%w: column %q: stored as %v, the file has %v", ErrBadUnit, d.fields[i].Name,
				format.Type(p), g.Columns[want.Leaf].MetaData.Type)
		}
	}
	return nil
}

// sameChunk checks a unit's chunk c against the footer's whole chunk w.
// A unit cut from a row group may start and end its pages inside the
// chunk (the OffsetIndex told the planner where), and read its
// dictionary page apart; everything else is the footer's.
func sameChunk(c, w *Chunk) error {
	switch {
	case c.Leaf != w.Leaf || c.Codec != w.Codec:
		return fmt.Errorf("leaf %d codec %d, the file has leaf %d codec %d", c.Leaf, c.Codec, w.Leaf, w.Codec)
	case c.Values != w.Values || c.Uncompressed != w.Uncompressed:
		return fmt.Errorf("%d values in %d bytes, the file has %d in %d", c.Values, c.Uncompressed, w.Values, w.Uncompressed)
	case c.Offset < w.Offset || c.End > w.End || c.Offset > c.End:
		return fmt.Errorf("pages [%d, %d) outside the chunk [%d, %d)", c.Offset, c.End, w.Offset, w.End)
	case c.DictLen > 0 && (c.DictOffset < w.Offset || c.DictOffset+c.DictLen > w.End):
		return fmt.Errorf("dictionary [%d, %d) outside the chunk [%d, %d)", c.DictOffset, c.DictOffset+c.DictLen, w.Offset, w.End)
	case c.IndexLen > 0 && (c.Index != w.Index || c.IndexLen != w.IndexLen):
		return fmt.Errorf("offset index at %d (%d bytes), the file's at %d (%d)", c.Index, c.IndexLen, w.Index, w.IndexLen)
	case c.ColIndexLen > 0 && (c.ColIndex != w.ColIndex || c.ColIndexLen != w.ColIndexLen):
		return fmt.Errorf("column index at %d (%d bytes), the file's at %d (%d)", c.ColIndex, c.ColIndexLen, w.ColIndex, w.ColIndexLen)
	}
	return nil
}

// renamedIn returns f with the path its leaf has in row group g, where
// the two differ in names only, at the same depth: a file of an Iceberg
// table written before that column, or a struct member around it, was
// renamed (fieldid.go, fieldmember.go). The planner found the column by
// field ids there, which a footer's column chunks do not carry; a peer
// checks the depth, sizes, codec and byte ranges against the file as for
// any unit. A unit naming another leaf of the same depth could only
// garble its requester's own batches: the peer still reads nothing
// outside the chunk the footer gives that leaf.
func renamedIn(g *format.RowGroup, f Field) Field {
	if f.Leaf < 0 || f.Leaf >= len(g.Columns) {
		return f
	}
	p := g.Columns[f.Leaf].MetaData.PathInSchema
	if len(p) == len(f.Path) && len(p) > 0 && !slices.Equal(p, f.Path) {
		f.Path = slices.Clone(p)
	}
	return f
}

// absentFrom checks that row group g has no column at f's path: a unit
// may call a column absent (nulls, or its default, in every row) only in
// a file that lacks it.
func absentFrom(g *format.RowGroup, f *Field) error {
	for i := range g.Columns {
		if slices.Equal(g.Columns[i].MetaData.PathInSchema, f.Path) {
			return fmt.Errorf("%w: column %q is absent in the unit, and the file has it", ErrBadUnit, f.Name)
		}
	}
	return nil
}
