package engine

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/spec"
)

// planFields is the output schema of a job without a pipeline: the
// decoded columns as they are, then the partition columns.
func planFields(p *decode.Plan) []OutField {
	fields := make([]OutField, 0, len(p.Fields)+len(p.Partitions))
	for _, f := range slices.Concat(p.Fields, p.Partitions) {
		fields = append(fields, OutField{Name: f.Name, Kind: f.Kind, DType: f.DType, Width: 1, Nullable: f.Nullable})
	}
	return fields
}

// slotSize estimates the slot bytes a batch of rows rows of the output
// fields needs: fixed-width columns exactly; variable-length ones from the
// plan's chunk statistics, at twice the densest row group's mean values
// per row plus slack, so that an unlucky batch of long rows still fits. An
// output list column takes the statistics of the input column of its
// name, or else the largest of any input list column. A batch that does
// not fit anyway fails with an error naming both sizes and the spec field
// to raise.
func slotSize(p *decode.Plan, fields []packField, rows int) int64 {
	const tableEntry, align = 64, 256
	perRow, widest := listRowStats(p)
	n := int64(64)
	for _, f := range fields {
		if f.jagged() {
			n += jaggedSlotSize(perRow, widest, f.group.Keys, f.parts, rows, f.weighted())
			continue
		}
		size := int64(f.DType.Size())
		if f.Kind == column.Bytes {
			size = 1
		}
		switch f.Kind {
		case column.Fixed:
			n += int64(rows)*int64(f.Width)*size + tableEntry + align
		default:
			pr, ok := perRow[f.Name]
			if !ok {
				pr = widest / float64(size)
			}
			// Footers may claim any value count: no slot holds 2^40 values.
			values := int64(min(2*pr*float64(rows), 1<<40)) + 4096
			n += values*size + int64(rows+1)*8 + 2*(tableEntry+align)
		}
		if f.Nullable {
			n += int64(rows) + tableEntry + align
		}
	}
	return n
}

// listRowStats returns, for each input column, its values per row (bytes
// for text) in the densest row group, and the widest variable-length
// column's bytes per row. A chunk's value count is its whole row group's,
// so it is divided by the row group's rows (the sum of its units' rows),
// never by one unit's: a row group cut into eight units has eight times
// as many values as any of them.
func listRowStats(p *decode.Plan) (perRow map[string]float64, widest float64) {
	type groupKey struct {
		file  string
		group int
	}
	groupRows := map[groupKey]int64{}
	for _, u := range p.Units {
		groupRows[groupKey{u.File, u.RowGroup}] += u.Rows
	}
	perRow = map[string]float64{}
	for i, f := range p.Fields {
		best := 0.0
		for _, u := range p.Units {
			rows := groupRows[groupKey{u.File, u.RowGroup}]
			if i >= len(u.Chunks) || rows == 0 {
				continue
			}
			c := u.Chunks[i]
			v := float64(c.Values) / float64(rows)
			if f.Kind == column.Bytes && c.Values > 0 {
				v *= float64(c.Uncompressed) / float64(c.Values)
			}
			if c.Absent && f.Kind == column.Bytes {
				// A column the file lacks: each row is its default (an
				// initial default, or the file's identity partition
				// value), of no bytes in the file.
				v = float64(len(c.Default))
			}
			best = max(best, v)
		}
		perRow[f.Name] = best
		if f.Kind != column.Fixed {
			widest = max(widest, best*float64(f.DType.Size()))
		}
	}
	// A string partition column's row is its value: the longest sizes it.
	for k, f := range p.Partitions {
		if f.Kind == column.Fixed {
			continue
		}
		best := 0.0
		for _, u := range p.Units {
			if k < len(u.Partition) {
				best = max(best, float64(len(u.Partition[k])))
			}
		}
		perRow[f.Name] = best
	}
	return perRow, widest
}

// jaggedSlotSize estimates the bytes of a jagged group of batches of rows
// rows: a scalar member's ids exactly (Width a row), a list member's as
// slotSize estimates a list column of the key's name, then the offsets
// and lengths, and a float32 weight per id if weighted.
func jaggedSlotSize(perRow map[string]float64, widest float64, keys []string, parts []OutField, rows int, weighted bool) int64 {
	const tableEntry, align = 64, 256
	var values float64
	for i, k := range keys {
		if i < len(parts) && parts[i].Kind == column.Fixed {
			values += float64(rows * max(parts[i].Width, 1))
			continue
		}
		pr, ok := perRow[k]
		if !ok {
			pr = widest / 8
		}
		values += 2*max(pr, 1)*float64(rows) + 4096
	}
	kb := int64(rows) * int64(len(keys))
	n := int64(values)*8 + (2*kb+1)*8 + 3*(tableEntry+align)
	if weighted {
		n += int64(values)*4 + tableEntry + align
	}
	return n
}

// warnUnreadable says which columns a job that names none (every column)
// goes without because the decoder cannot read them: its trainers would
// otherwise look for them in vain.
func warnUnreadable(log *slog.Logger, job *spec.Job, plan *decode.Plan) {
	if len(job.Columns) > 0 || len(plan.Unreadable) == 0 {
		return
	}
	var b strings.Builder
	for i, u := range plan.Unreadable {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s: %s", u.Name, u.Why)
	}
	log.Warn("left out of every column: columns the decoder cannot read (list the columns to read in the spec's columns to be told of this as an error)",
		"left_out", b.String())
}
