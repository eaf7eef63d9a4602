package iceberg

import (
	"context"
	"fmt"
	"net/http"

	"github.com/lastmile/lastmile/expr"

	"github.com/lastmile/lastmile/decode"
)

// Opener reads tables. A zero Opener reads metadata files through
// decode.OSFS and catalogs with a default HTTP client.
type Opener struct {
	// FS is where metadata files, manifests and data files come from.
	FS decode.FS
	// HTTP is the REST catalog client; nil: one with a 30s timeout.
	HTTP *http.Client
}

// Scan reads the table named by input (a spec input, see Ref) and lists
// the data files of its pinned snapshot, or of the current one.
func (o Opener) Scan(ctx context.Context, input string) (*Scan, error) {
	r, err := ParseRef(input)
	if err != nil {
		return nil, err
	}
	m, err := o.Metadata(ctx, r)
	if err != nil {
		return nil, err
	}
	name := r
	name.Snapshot = 0
	return ScanSnapshot(ctx, o.fs(), name.String(), m, r.Snapshot)
}

// Metadata reads a table's metadata, from its metadata file or its
// catalog.
func (o Opener) Metadata(ctx context.Context, r Ref) (*Metadata, error) {
	if r.Catalog != "" {
		m, _, err := loadREST(ctx, o.HTTP, r)
		if err != nil {
			return nil, fmt.Errorf("iceberg table %s: %w", r, err)
		}
		return m, nil
	}
	data, err := readLocation(o.fs(), r.Metadata)
	if err != nil {
		return nil, fmt.Errorf("iceberg table %s: metadata: %w", r, err)
	}
	m, err := ParseMetadata(data)
	if err != nil {
		return nil, fmt.Errorf("iceberg table %s: %s: %w", r, r.Metadata, err)
	}
	return m, nil
}

// Pin returns input with its snapshot fixed: the one it names, or the
// table's current snapshot now. A job whose inputs are pinned reads the
// same rows in every epoch and after every resume, whatever is committed
// to the table meanwhile.
func (o Opener) Pin(ctx context.Context, input string) (string, int64, error) {
	r, err := ParseRef(input)
	if err != nil {
		return "", 0, err
	}
	if r.Snapshot != 0 {
		return input, r.Snapshot, nil
	}
	m, err := o.Metadata(ctx, r)
	if err != nil {
		return "", 0, err
	}
	s, err := m.Snapshot(0)
	if err != nil {
		return "", 0, fmt.Errorf("iceberg table %s: %w", r, err)
	}
	r.Snapshot = s.ID
	return r.String(), s.ID, nil
}

func (o Opener) fs() decode.FS {
	if o.FS == nil {
		return decode.OSFS{}
	}
	return o.FS
}

// Input is one job input after Expand: an Iceberg table's scan, or a
// plain input (file, glob, directory, object prefix) as it is.
type Input struct {
	Plain string
	Scan  *Scan // nil for a plain input
}

// Expand scans the Iceberg tables among inputs; the others are kept as
// they are, in order.
func (o Opener) Expand(ctx context.Context, inputs []string) ([]Input, error) {
	out := make([]Input, len(inputs))
	for i, in := range inputs {
		if !IsRef(in) {
			out[i].Plain = in
			continue
		}
		s, err := o.Scan(ctx, in)
		if err != nil {
			return nil, err
		}
		out[i].Scan = s
	}
	return out, nil
}

// Files returns what the planner reads for ins: the plain inputs and the
// tables' data files, in order, with keep (nil: keep all) deciding which
// data files a job's filters may need (see Scan.Prune), and the number
// of data files left out. A table whose files are all left out is an
// error: the job would read nothing of it.
func Files(ins []Input, keep func(stats func(col string) (expr.Range, bool)) bool) ([]string, int, error) {
	var paths []string
	skipped := 0
	for _, in := range ins {
		if in.Scan == nil {
			paths = append(paths, in.Plain)
			continue
		}
		files := in.Scan.Files
		if keep != nil {
			var n int
			files, n = in.Scan.Prune(keep)
			skipped += n
		}
		if len(files) == 0 {
			return nil, skipped, fmt.Errorf("iceberg table %s snapshot %d: %s", in.Scan.Table, in.Scan.SnapshotID, emptyWhy(in.Scan, keep))
		}
		paths = append(paths, Paths(files)...)
	}
	return paths, skipped, nil
}

func emptyWhy(s *Scan, keep func(func(string) (expr.Range, bool)) bool) string {
	if len(s.Files) == 0 {
		return "has no data files"
	}
	return fmt.Sprintf("the job's filters exclude all %d data files (by their partition values and column statistics): nothing to read", len(s.Files))
}
