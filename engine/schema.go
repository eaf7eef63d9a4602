package engine

import (
	"fmt"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/shm"
)

// ringFields maps the decoded fields to the ring's schema: a fixed-width
// column becomes a dense [B] tensor, a list a ragged field, a byte array a
// ragged uint8 field flagged as text.
func ringFields(fields []decode.Field) ([]shm.Field, error) {
	out := make([]shm.Field, len(fields))
	for i, f := range fields {
		rf := shm.Field{Name: f.Name, DType: shm.DType(f.DType), Nullable: f.Nullable}
		switch f.Kind {
		case column.Fixed:
			rf.Kind = shm.Dense
		case column.List:
			rf.Kind = shm.Ragged
		case column.Bytes:
			rf.Kind, rf.DType, rf.UTF8 = shm.Ragged, shm.DType(column.Uint8), true
		default:
			return nil, fmt.Errorf("column %q: kind %v has no ring layout", f.Name, f.Kind)
		}
		if len(f.Name) > 63 {
			return nil, fmt.Errorf("column %q: ring field names are at most 63 bytes; rename it", f.Name)
		}
		out[i] = rf
	}
	return out, nil
}

// slotSize estimates the slot bytes a batch of rows rows needs, from the
// plan's chunk statistics: fixed-width columns exactly, variable-length
// ones at twice the densest unit's mean values per row plus slack, so that
// an unlucky batch of long rows still fits. A batch that does not fit
// anyway fails with an error naming both sizes and the spec field to raise.
func slotSize(p *decode.Plan, rows int) int64 {
	const tableEntry, align = 64, 256
	perRow := make([]float64, len(p.Fields))
	for _, u := range p.Units {
		for i := range p.Fields {
			if i < len(u.Chunks) && u.Rows > 0 {
				if v := float64(u.Chunks[i].Values) / float64(u.Rows); v > perRow[i] {
					perRow[i] = v
				}
			}
		}
	}
	n := int64(64)
	for i, f := range p.Fields {
		size := int64(f.DType.Size())
		if f.Kind == column.Bytes {
			// Values counts strings, not bytes: use the chunk's
			// uncompressed bytes per value instead.
			size = 1
			best := 0.0
			for _, u := range p.Units {
				c := u.Chunks[i]
				if c.Values > 0 {
					if v := float64(c.Uncompressed) / float64(c.Values); v > best {
						best = v
					}
				}
			}
			perRow[i] *= best
		}
		switch f.Kind {
		case column.Fixed:
			n += int64(rows)*size + tableEntry + align
		default:
			values := int64(2*perRow[i]*float64(rows)) + 4096
			n += values*size + int64(rows+1)*8 + 2*(tableEntry+align)
		}
		if f.Nullable {
			n += int64(rows) + tableEntry + align
		}
	}
	return n
}
