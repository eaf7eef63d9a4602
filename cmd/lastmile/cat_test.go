package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/shm"
)

// TestCatBareNameListsRankRings: `lastmile cat NAME` of a job with one ring
// per rank says which rings exist instead of waiting for NAME.
func TestCatBareNameListsRankRings(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"lastmile.train.r0", "lastmile.train.r10", "lastmile.train.r1", "lastmile.train.rx",
		"lastmile.train.r01", ".lastmile.train.r2.tmp-1-2", "lastmile.trainer.r0"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var out, errb bytes.Buffer
	err := runCat(context.Background(), []string{"-shm-dir", dir, "-wait", "10m", "lastmile.train"}, &out, &errb)
	if err == nil {
		t.Fatal("no error")
	}
	want := "no ring lastmile.train in " + dir + ", but 3 rings of its ranks (one per rank when world_size > 1): " +
		"lastmile.train.r0, lastmile.train.r1, lastmile.train.r10; read one: lastmile cat -shm-dir " + dir + " lastmile.train.r0"
	if err.Error() != want {
		t.Errorf("error\n%s\nwant\n%s", err, want)
	}
	// Without rank rings the name is waited for as before.
	// -dir, the old name of -shm-dir, still works.
	err = runCat(context.Background(), []string{"-dir", dir, "-wait", "0", "other"}, &out, &errb)
	if err == nil || strings.Contains(err.Error(), "rings of its ranks") {
		t.Errorf("error %v", err)
	}
}

// TestCatShowsShapes: the summary gives a dense field's shape, the width
// of a [B, N] column.
func TestCatShowsShapes(t *testing.T) {
	dir := t.TempDir()
	p, err := shm.Create(shm.Config{Dir: dir, Name: "shapes", Slots: 3, SlotSize: 1 << 16, Fields: []shm.Field{
		{Name: "label", Kind: shm.Dense, DType: shm.DType(column.Float32)},
		{Name: "dense", Kind: shm.Dense, DType: shm.DType(column.Float32), Dims: []int64{8}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Remove()
	s, err := p.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetRows(4); err != nil {
		t.Fatal(err)
	}
	for i, shape := range [][]int64{{4}, {4, 8}} {
		if _, err := s.Add(i, shm.RoleDense, shm.DType(column.Float32), shape...); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Publish(s); err != nil {
		t.Fatal(err)
	}
	p.Close()
	var out, errb bytes.Buffer
	if err := runCat(context.Background(), []string{"-shm-dir", dir, "shapes"}, &out, &errb); err != nil {
		t.Fatal(err, errb.String())
	}
	for _, want := range []string{"  label            float32  dense [B]\n", "  dense            float32  dense [B, 8]\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
}

// TestCatPaddingAndLeftover: the summary counts the padding rows of padded
// batches (pad_rows), and a second cat of the ring, finished and read,
// waits for a new ring, then says that it found a leftover.
func TestCatPaddingAndLeftover(t *testing.T) {
	dir := t.TempDir()
	p, err := shm.Create(shm.Config{Dir: dir, Name: "pad", Slots: 3, SlotSize: 1 << 16, Fields: []shm.Field{
		{Name: "label", Kind: shm.Dense, DType: shm.DType(column.Float32)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Remove()
	for _, pad := range []int{0, 3} {
		s, err := p.Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		s.SetRows(4)
		if err := s.SetPadRows(pad); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Add(0, shm.RoleDense, shm.DType(column.Float32), 4); err != nil {
			t.Fatal(err)
		}
		if err := p.Publish(s); err != nil {
			t.Fatal(err)
		}
	}
	p.CloseWith("done: test")
	var out, errb bytes.Buffer
	if err := runCat(context.Background(), []string{"-shm-dir", dir, "pad"}, &out, &errb); err != nil {
		t.Fatal(err, errb.String())
	}
	if !strings.Contains(out.String(), "2 batches, 8 rows (3 of them padding),") {
		t.Errorf("summary:\n%s", out.String())
	}
	out.Reset()
	if err := runCat(context.Background(), []string{"-shm-dir", dir, "-wait", "100ms", "pad"}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errb.String(), "is left from an earlier run: its stream ended") || !strings.Contains(out.String(), "0 batches") {
		t.Errorf("cat of a leftover: stdout\n%s\nstderr\n%s", out.String(), errb.String())
	}
}
