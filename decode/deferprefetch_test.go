package decode

import (
	"context"
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
	pfs := &askFS{}
	forIndexedFiles(t, pfs, func(t *testing.T, plan *Plan) {
		d := plan.NewDecoder()
		defer d.Close()
		var deferred []int
		for fi := 1; fi < len(plan.Fields); fi++ {
			deferred = append(deferred, fi)
		}
		d.DeferPrefetch(deferred)
		for _, u := range plan.Units {
			for _, s := range selectionCases {
				checkDeferredPrefetch(t, d, pfs, u, s.name, s.make(u.Rows))
			}
			checkDeferredPrefetch(t, d, pfs, u, "every row (nil)", nil)
		}
	})
}

func checkDeferredPrefetch(t *testing.T, d *Decoder, pfs *askFS, u Unit, name string, sel []int32) {
	t.Helper()
	pfs.takeAsked()
	if err := d.Open(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	// Open asks for the first field's chunk, and of the others only what
	// their decode needs whatever the rows: dictionaries and indexes.
	first := &u.Chunks[0]
	wantOpen := []span{{first.Offset, first.End}}
	for fi := range u.Chunks {
		c := &u.Chunks[fi]
		if c.DictLen > 0 {
			wantOpen = append(wantOpen, span{c.DictOffset, c.DictOffset + c.DictLen})
		}
		if fi > 0 && c.IndexLen > 0 {
			wantOpen = append(wantOpen, span{c.Index, c.Index + int64(c.IndexLen)})
		}
	}
	openAsked := union(pfs.takeAsked())
	if !slices.Equal(openAsked, union(wantOpen)) {
		t.Fatalf("%s: Open asked for %v, want %v", name, openAsked, union(wantOpen))
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
		} else if len(dictsIn([]span{r}, openAsked)) == 0 {
			t.Errorf("%s: the index read %v was not prefetched at Open (%v)", name, r, openAsked)
		}
	}
	// Each deferred field's OffsetIndex is read once for the unit, by
	// PrefetchSelected; the decode reuses it. Without a selection (nil:
	// every row; empty: none) nothing needs it.
	for fi := 1; fi < len(u.Chunks); fi++ {
		if want := map[bool]int{true: 1}[len(sel) > 0]; indexReads[fi] != want {
			t.Errorf("%s, field %d: its OffsetIndex was read %d times, want %d", name, fi, indexReads[fi], want)
		}
	}
	// Dictionaries were asked for at Open; the pages now.
	got := union(reads)
	if want := union(append(slices.Clone(asked), dictsIn(got, openAsked)...)); !slices.Equal(got, want) {
		t.Errorf("%s: the deferred fields' decode read %v; PrefetchSelected asked for %v, Open %v", name, got, asked, openAsked)
	}
}

// dictsIn returns the spans of reads that lie within one span of at (the
// reads of what Open prefetched).
func dictsIn(reads, at []span) []span {
	var out []span
	for _, r := range reads {
		for _, a := range at {
			if r.start >= a.start && r.end <= a.end {
				out = append(out, r)
			}
		}
	}
	return out
}
