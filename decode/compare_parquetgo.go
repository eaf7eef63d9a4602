package decode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/lastmile/lastmile/column"
	"github.com/parquet-go/parquet-go"
)

// pgDecoder decodes units with parquet-go's low-level page API
// (RowGroup.ColumnChunks → Pages → page.Data), looking dictionary indexes
// up itself and assembling rows from the page's levels. It exists to be
// measured against the production Decoder (docs/decode.md).
type pgDecoder struct {
	fields []Field
	files  map[string]*pgFile
	dense  []byte
}

type pgFile struct {
	f  *os.File
	pf *parquet.File
}

func newPGDecoder(fields []Field) *pgDecoder {
	return &pgDecoder{fields: fields, files: map[string]*pgFile{}}
}

func (p *pgDecoder) Close() error {
	for _, f := range p.files {
		f.f.Close()
	}
	p.files = nil
	return nil
}

func (p *pgDecoder) file(path string) (*parquet.File, error) {
	if f, ok := p.files[path]; ok {
		return f.pf, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	pf, err := parquet.OpenFile(f, st.Size(), parquet.SkipBloomFilters(true), parquet.SkipPageIndex(true))
	if err != nil {
		f.Close()
		return nil, err
	}
	p.files[path] = &pgFile{f: f, pf: pf}
	return pf, nil
}

func (p *pgDecoder) Decode(ctx context.Context, u Unit, dst *column.Batch) error {
	if err := absentIn(&u, p.fields); err != nil {
		return err
	}
	pf, err := p.file(u.File)
	if err != nil {
		return &Error{File: u.File, RowGroup: u.RowGroup, PageOffset: -1, Err: err}
	}
	rg := pf.RowGroups()[u.RowGroup]
	if cap(dst.Columns) < len(p.fields) {
		dst.Columns = make([]column.Column, len(p.fields))
	}
	dst.Columns = dst.Columns[:len(p.fields)]
	for i := range p.fields {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := p.decodeColumn(&p.fields[i], rg.ColumnChunks()[u.Chunks[i].Leaf], u, &dst.Columns[i]); err != nil {
			return &Error{File: u.File, RowGroup: u.RowGroup, Column: p.fields[i].Name, PageOffset: -1, Err: err}
		}
	}
	dst.Rows = int(u.Rows)
	return nil
}

func (p *pgDecoder) decodeColumn(f *Field, cc parquet.ColumnChunk, u Unit, col *column.Column) error {
	startColumn(f, col)
	pages := cc.Pages()
	defer pages.Close()
	if u.RowStart > 0 {
		if err := pages.SeekToRow(u.RowStart); err != nil {
			return err
		}
	}
	for col.Len < int(u.Rows) {
		page, err := pages.ReadPage()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		p.appendPage(f, page, col)
		parquet.Release(page)
	}
	if col.Len < int(u.Rows) {
		return fmt.Errorf("column chunk ended after %d of %d rows", col.Len, u.Rows)
	}
	endColumn(col, 0, int(u.Rows))
	return nil
}

func (p *pgDecoder) appendPage(f *Field, page parquet.Page, col *column.Column) {
	rep, def := page.RepetitionLevels(), page.DefinitionLevels()
	if f.MaxRep == 0 {
		rep = nil
	}
	if f.MaxDef == 0 {
		def = nil
	}
	vals := page.Data()
	dict := page.Dictionary()
	if f.Kind == column.Bytes {
		n := int(page.NumValues())
		if dict != nil {
			idx := vals.Int32()
			dv := dict.Page().Data()
			data, offs := dv.ByteArray()
			appendByteRows(f, def, n, func(k int) []byte { j := idx[k]; return data[offs[j]:offs[j+1]] }, col)
		} else {
			data, offs := vals.ByteArray()
			appendByteRows(f, def, n, func(k int) []byte { return data[offs[k]:offs[k+1]] }, col)
		}
		return
	}
	size := f.DType.Size()
	var dense []byte
	var nvals int
	if dict != nil {
		idx := vals.Int32()
		dvals := dict.Page().Data()
		dv, _ := dvals.Data()
		p.dense = growBytes(p.dense, len(idx)*size)
		for k, j := range idx {
			copy(p.dense[k*size:(k+1)*size], dv[int(j)*size:(int(j)+1)*size])
		}
		dense, nvals = p.dense, len(idx)
	} else if f.DType == column.Bool {
		bits, _ := vals.Data()
		nvals = int(page.NumValues() - page.NumNulls())
		p.dense = growBytes(p.dense, nvals)
		for k := range nvals {
			p.dense[k] = bits[k>>3] >> (k & 7) & 1
		}
		dense = p.dense
	} else {
		dense, _ = vals.Data()
		nvals = len(dense) / size
	}
	appendLeveled(f, rep, def, dense, nvals, col)
}
