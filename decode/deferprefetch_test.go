package decode

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/lastmile/lastmile/column"
)

// askFS is readsFS whose files are Prefetchers that record what they
// are asked for.
type askFS struct {
	readsFS
	asked []span
}

type askFile struct {
	readsFile
	fs *askFS
}

func (p *askFS) Open(name string) (File, error) {
	f, err := p.readsFS.Open(name)
	if err != nil {
		return nil, err
	}
	return askFile{f.(readsFile), p}, nil
}

func (f askFile) Prefetch(ranges []Range) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	for _, r := range ranges {
		f.fs.asked = append(f.fs.asked, span{r.Off, r.Off + r.Len})
	}
}

func (p *askFS) takeAsked() []span {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.asked
	p.asked = nil
	return s
}

// union merges spans into sorted, disjoint ones.
func union(s []span) []span {
	s = slices.Clone(s)
	slices.SortFunc(s, func(a, b span) int { return int(min(max(a.start-b.start, -1), 1)) })
	var out []span
	for _, x := range s {
		if x.end <= x.start {
			continue
		}
		if n := len(out); n > 0 && x.start <= out[n-1].end {
			out[n-1].end = max(out[n-1].end, x.end)
			continue
		}
		out = append(out, x)
	}
	return out
}

// TestDeferredPrefetchCoversReads: with every field but the first
// deferred, Open prefetches the first field's chunk and no byte of the
// others; PrefetchSelected then asks for exactly the bytes that decoding
// the deferred fields for the selection reads (their OffsetIndexes
// aside, which are read once per unit): every read is covered, and no
// byte asked for goes unread.
func TestDeferredPrefetchCoversReads(t *testing.T) {
	sels := []struct {
		name string
		make func(n int64) []int32
	}{
		{"head", func(n int64) []int32 { return stride(10, 1, 0) }},
		{"tail", func(n int64) []int32 { return stride(n, 1, n-10) }},
		{"runs of 50 every 400", func(n int64) []int32 {
			var s []int32
			for i := int64(0); i < n; i++ {
				if i%400 < 50 {
					s = append(s, int32(i))
				}
			}
			return s
		}},
		{"every 3rd", func(n int64) []int32 { return stride(n, 3, 1) }},
		{"all rows (nil)", func(n int64) []int32 { return nil }},
	}
	for _, version := range []int{1, 2} {
		for _, maxRows := range []int64{0, 1100} {
			t.Run(fmt.Sprintf("v%d/max%d", version, maxRows), func(t *testing.T) {
				p := filepath.Join(t.TempDir(), "f.parquet")
				writeFile(t, p, fileSpec{rows: 3000, codec: "snappy", pageVersion: version, pageBytes: 1024})
				pfs := &askFS{}
				plan, err := PlanFiles(context.Background(), []string{p}, PlanOptions{MaxUnitRows: maxRows, FS: pfs})
				if err != nil {
					t.Fatal(err)
				}
				d := plan.NewDecoder()
				defer d.Close()
				var deferred []int
				for fi := 1; fi < len(plan.Fields); fi++ {
					deferred = append(deferred, fi)
				}
				d.DeferPrefetch(deferred)
				for _, u := range plan.Units {
					for _, s := range sels {
						checkDeferredPrefetch(t, d, pfs, u, s.name, s.make(u.Rows))
					}
				}
			})
		}
	}
}

func checkDeferredPrefetch(t *testing.T, d *Decoder, pfs *askFS, u Unit, name string, sel []int32) {
	t.Helper()
	pfs.takeAsked()
	if err := d.Open(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	first := &u.Chunks[0]
	wantOpen := []span{{first.Offset, first.End}}
	if first.DictLen > 0 {
		wantOpen = append(wantOpen, span{first.DictOffset, first.DictOffset + first.DictLen})
	}
	if got := union(pfs.takeAsked()); !slices.Equal(got, union(wantOpen)) {
		t.Fatalf("%s: Open asked for %v, want the first field's chunk only, %v", name, got, union(wantOpen))
	}
	pfs.take()
	if err := d.PrefetchSelected(sel); err != nil {
		t.Fatal(err)
	}
	asked := union(pfs.takeAsked())
	for fi := 1; fi < len(u.Chunks); fi++ {
		var col column.Column
		if err := d.DecodeColumn(fi, sel, &col); err != nil {
			t.Fatalf("%s, field %d: %v", name, fi, err)
		}
	}
	var reads []span
	indexReads := make([]int, len(u.Chunks))
	for _, r := range pfs.take() {
		isIndex := false
		for i := range u.Chunks {
			c := &u.Chunks[i]
			if r.start >= c.Index && r.end <= c.Index+int64(c.IndexLen) {
				isIndex = true
				indexReads[i]++
			}
		}
		if !isIndex {
			reads = append(reads, r)
		}
	}
	// Each deferred field's OffsetIndex is read once for the unit, by
	// PrefetchSelected; the decode reuses it. Without a selection nothing
	// needs it.
	for fi := 1; fi < len(u.Chunks); fi++ {
		if want := map[bool]int{true: 1}[sel != nil]; indexReads[fi] != want {
			t.Errorf("%s, field %d: its OffsetIndex was read %d times, want %d", name, fi, indexReads[fi], want)
		}
	}
	if got := union(reads); !slices.Equal(got, asked) {
		t.Errorf("%s: the deferred fields' decode read %v; PrefetchSelected asked for %v", name, got, asked)
	}
}
