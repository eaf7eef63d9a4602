package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/spec"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// forgeNumValues rewrites the footer of the Parquet file at path so that
// every column chunk (or those of cols) claims n values: num_values is
// the file's word, and a submitter writes their own input files.
func forgeNumValues(t *testing.T, path string, n int64, cols ...int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	flen := int(binary.LittleEndian.Uint32(b[len(b)-8:]))
	var md format.FileMetaData
	if err := thrift.Unmarshal(new(thrift.CompactProtocol), b[len(b)-8-flen:len(b)-8], &md); err != nil {
		t.Fatal(err)
	}
	for g := range md.RowGroups {
		for c := range md.RowGroups[g].Columns {
			if len(cols) == 0 || slices.Contains(cols, c) {
				md.RowGroups[g].Columns[c].MetaData.NumValues = n
			}
		}
	}
	foot, err := thrift.Marshal(new(thrift.CompactProtocol), &md)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	out.Write(b[:len(b)-8-flen])
	out.Write(foot)
	binary.Write(&out, binary.LittleEndian, uint32(len(foot)))
	out.WriteString("PAR1")
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// forgedFile writes a one-row file (a scalar and a list column) whose
// list chunk, or every chunk with all, claims n values. The decoder takes
// num_values as an upper bound only, so the file still decodes.
func forgedFile(t *testing.T, n int64, all bool) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "forged.parquet")
	type row struct {
		X int64   `parquet:"x"`
		L []int64 `parquet:"l,list"`
	}
	if err := parquet.WriteFile(path, []row{{1, []int64{2}}}, parquet.MaxRowsPerRowGroup(1)); err != nil {
		t.Fatal(err)
	}
	if all {
		forgeNumValues(t, path, n)
	} else {
		forgeNumValues(t, path, n, 1) // the list's chunk: the unit stays whole
	}
	plan, err := decode.PlanFiles(context.Background(), []string{path}, decode.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dec := plan.NewDecoder()
	defer dec.Close()
	var b column.Batch
	if err := dec.Decode(context.Background(), plan.Units[0], &b); err != nil {
		t.Fatalf("the forged file does not decode, so it tests nothing: %v", err)
	}
	return path
}

// TestForgedValueCountsFootprint: footers that claim absurd value counts
// make a job whose footprint is large, never one whose need wraps to
// little or less than nothing: the daemon holds it against memory.per_job,
// the user's limits and memory.total, and sums it into every other
// job's admission.
func TestForgedValueCountsFootprint(t *testing.T) {
	cases := []struct {
		name   string
		values int64
		all    bool
		arena  bool
		slots  int
	}{
		{"list chunk at 2^31, arena", math.MaxInt32, false, true, 38},
		{"every chunk at 2^31, arena", math.MaxInt32, true, true, 65536},
		{"list chunk at 2^62", 1 << 62, false, false, 4},
		{"every chunk at int64's end, arena", math.MaxInt64, true, true, 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := forgedFile(t, c.values, c.all)
			job := &spec.Job{Name: "fp", Inputs: []string{path}, WorldSize: 8,
				Batch:  spec.Batch{Size: 1 << 24}, // the spec's most
				Ring:   spec.Ring{Slots: c.slots, Arena: c.arena},
				Decode: spec.Decode{Workers: 1, InFlight: 65536}}
			fp, err := EstimateFootprint(context.Background(), job, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, fp := range []Footprint{fp, fp.ForRanks(1)} {
				parts := []int64{fp.RingBytes, fp.ArenaBytes, fp.UnitBytes, fp.ShuffleBytes, fp.CacheBytes, fp.SideBytes}
				for _, p := range parts {
					if p < 0 {
						t.Errorf("a part of the footprint wrapped: %+v", parts)
					}
				}
				if fp.Bytes() < min(fp.RingBytes, maxFootprint) || fp.Bytes() < fp.ArenaBytes || fp.Bytes() < 1<<40 {
					t.Errorf("footprint %d bytes for files claiming %d values (parts %+v)", fp.Bytes(), c.values, parts)
				}
				if h := HeapLimit(fp); h <= 0 {
					t.Errorf("heap limit %d", h)
				}
			}
		})
	}
}

// TestForgedValueCountsArena: an arena sized from forged footers is
// refused, or fails to be created, with an error, and leaves no file
// behind in the ring directory (a root-owned one, in the daemon, that
// nobody else could remove).
func TestForgedValueCountsArena(t *testing.T) {
	cases := []struct {
		name     string
		inflight int
		refused  bool // by arithmetic, before any file
	}{
		{"past maxArenaBytes", 65536, true},
		{"larger than the ring directory", 25, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := forgedFile(t, math.MaxInt32, false)
			ring := t.TempDir()
			job := &spec.Job{Name: "forged", Inputs: []string{path}, WorldSize: 1,
				Batch:  spec.Batch{Size: 16306282},
				Ring:   spec.Ring{Dir: ring, Slots: 62, Arena: true},
				Decode: spec.Decode{Workers: 1, InFlight: c.inflight}}
			plan, err := decode.PlanFiles(context.Background(), []string{path}, decode.PlanOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ua, err := arenaFor(job, Options{}, plan, 1, 1)
			switch {
			case err == nil:
				ua.close(true)
				t.Errorf("an arena of %d chunks of %d bytes was created", len(ua.chunks), ua.chunk)
			case c.refused && !strings.Contains(err.Error(), "footers claim"):
				t.Errorf("refused with %v, want the footers named", err)
			}
			ents, _ := os.ReadDir(ring)
			for _, e := range ents {
				t.Errorf("%s left in the ring directory", e.Name())
			}
		})
	}
}
