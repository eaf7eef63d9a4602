package shm_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/shm"
)

// writePadded publishes batch seq of testFields with its last pad rows
// marked as padding.
func writePadded(ctx context.Context, p *shm.Producer, seq uint64, pad int) error {
	s, err := p.Acquire(ctx)
	if err != nil {
		return err
	}
	if err := s.SetRows(batchRows(seq)); err != nil {
		return err
	}
	if err := s.SetPadRows(pad); err != nil {
		return err
	}
	s.SetCursor(batchCursor(seq))
	for _, td := range expectBatch(seq) {
		if err := s.AddTensor(td.field, td.role, td.dtype, td.data, td.shape...); err != nil {
			p.Discard(s)
			return err
		}
	}
	if err := p.Publish(s); err != nil {
		p.Discard(s)
		return err
	}
	return nil
}

// TestPadRows: the real-row count of a padded batch (format x.1) reaches
// the consumer, FlagPadded follows it, and the producer refuses a batch
// flagged padded without a count.
func TestPadRows(t *testing.T) {
	ctx := testCtx(t)
	cfg := testConfig(t, "pad", 4)
	p := create(t, cfg)
	c := open(t, cfg.Dir, cfg.Name)
	for _, tc := range []struct {
		seq  uint64
		pad  int
		real int
	}{
		{0, 0, 3}, // 3 rows, none padding
		{1, 2, 2}, // 4 rows, the last 2 padding
		{2, 5, 0}, // 5 rows, all padding (a rank whose whole batch pads the step)
	} {
		if err := writePadded(ctx, p, tc.seq, tc.pad); err != nil {
			t.Fatal(err)
		}
		b, err := c.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkBatch(b, tc.seq); err != nil && tc.pad == 0 {
			t.Fatal(err)
		}
		n, known := b.RealRows()
		padded := b.Cursor.Flags&shm.FlagPadded != 0
		if b.PadRows != tc.pad || n != tc.real || !known || padded != (tc.pad > 0) {
			t.Fatalf("batch %d: PadRows %d, RealRows %d (known %v), padded flag %v; want %d, %d, true, %v",
				tc.seq, b.PadRows, n, known, padded, tc.pad, tc.real, tc.pad > 0)
		}
	}

	s, err := p.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Discard(s)
	s.SetRows(batchRows(3))
	s.SetCursor(shm.Cursor{Flags: shm.FlagPadded})
	for _, td := range expectBatch(3) {
		if err := s.AddTensor(td.field, td.role, td.dtype, td.data, td.shape...); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Publish(s); err == nil || !strings.Contains(err.Error(), "SetPadRows") {
		t.Fatalf("publish of a padded batch without a count: %v, want an error naming SetPadRows", err)
	}
	s.SetCursor(shm.Cursor{})
	s.SetPadRows(batchRows(3) + 1)
	if err := p.Publish(s); !errors.Is(err, shm.ErrCorrupt) {
		t.Fatalf("publish with more padding rows than rows: %v, want ErrCorrupt", err)
	}
	if err := s.SetPadRows(-1); err == nil {
		t.Fatal("SetPadRows(-1) succeeded")
	}
}

// TestPadRowsFormat10: a consumer reading a ring of format 1.0, whose
// producer did not write pad_rows, reports a padded batch's real rows as
// unknown instead of counting the padding as real.
func TestPadRowsFormat10(t *testing.T) {
	ctx := testCtx(t)
	cfg := testConfig(t, "old", 4)
	p := create(t, cfg)
	if err := writePadded(ctx, p, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := writePadded(ctx, p, 1, 1); err != nil {
		t.Fatal(err)
	}
	// Make it a 1.0 ring: version_minor 0, and pad_rows 0 as a 1.0
	// producer leaves it (the reserved bytes).
	f, err := os.OpenFile(filepath.Join(cfg.Dir, cfg.Name), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte{0, 0}, 10); err != nil {
		t.Fatal(err)
	}
	slot1 := int64(dataOffsetOf(t, f)) + cfg.SlotSize
	if _, err := f.WriteAt(make([]byte, 4), slot1+48); err != nil {
		t.Fatal(err)
	}
	c := open(t, cfg.Dir, cfg.Name)
	if h := c.Header(); h.VersionMajor != 1 || h.VersionMinor != 0 {
		t.Fatalf("version %d.%d, want 1.0", h.VersionMajor, h.VersionMinor)
	}
	b, err := c.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n, known := b.RealRows(); b.PadRows != 0 || n != b.Rows || !known {
		t.Fatalf("unpadded 1.0 batch: PadRows %d, RealRows %d, %v; want 0, %d, true", b.PadRows, n, known, b.Rows)
	}
	b, err = c.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n, known := b.RealRows(); b.PadRows != -1 || n != b.Rows || known {
		t.Fatalf("padded 1.0 batch: PadRows %d, RealRows %d, %v; want -1, %d, false", b.PadRows, n, known, b.Rows)
	}
}

// dataOffsetOf reads data_offset from the header of the ring open as f.
func dataOffsetOf(t *testing.T, f *os.File) uint64 {
	t.Helper()
	var b [8]byte
	if _, err := f.ReadAt(b[:], 32); err != nil {
		t.Fatal(err)
	}
	return binary.LittleEndian.Uint64(b[:])
}

// TestNullRaggedRowsEmpty: from format x.1 on a null row of a ragged field
// is empty (§5.2); the producer refuses to publish one that is not.
func TestNullRaggedRowsEmpty(t *testing.T) {
	ctx := testCtx(t)
	cfg := testConfig(t, "nulls", 4)
	p := create(t, cfg)
	s, err := p.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Discard(s)
	s.SetRows(batchRows(0))
	for _, td := range expectBatch(0) {
		if td.role == shm.RoleValidity {
			td.data = append([]byte(nil), td.data...)
			for i := range td.data {
				td.data[i] = 0 // every row null, but the ids rows have values
			}
		}
		if err := s.AddTensor(td.field, td.role, td.dtype, td.data, td.shape...); err != nil {
			t.Fatal(err)
		}
	}
	err = p.Publish(s)
	if !errors.Is(err, shm.ErrCorrupt) || !strings.Contains(err.Error(), "null") {
		t.Fatalf("publish of a non-empty null row: %v, want ErrCorrupt naming the null row", err)
	}
}

// TestConsumerPIDHint: consumer_pid is a hint (§3.3). Inspect shows it
// only while a consumer holds the lock, and the "in use" error says when
// the process it names is gone (a fork that inherited the consumer's
// descriptor holds the lock).
func TestConsumerPIDHint(t *testing.T) {
	cfg := testConfig(t, "pid", 4)
	create(t, cfg)
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	pid := gone.Process.Pid // reaped: no such process any more
	f, err := os.OpenFile(filepath.Join(cfg.Dir, cfg.Name), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	setPID := func(pid int) {
		t.Helper()
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], uint32(pid))
		if _, err := f.WriteAt(b[:], 280); err != nil {
			t.Fatal(err)
		}
	}

	setPID(pid) // a consumer that died left its pid
	if info, err := shm.Inspect(cfg.Dir, cfg.Name); err != nil || info.ConsumerAttached || info.ConsumerPID != 0 {
		t.Fatalf("no consumer attached: %+v, %v; want ConsumerPID 0", info, err)
	}
	c := open(t, cfg.Dir, cfg.Name)
	if info, _ := shm.Inspect(cfg.Dir, cfg.Name); !info.ConsumerAttached || info.ConsumerPID != int32(os.Getpid()) {
		t.Fatalf("attached: ConsumerAttached %v, ConsumerPID %d; want true, %d", info.ConsumerAttached, info.ConsumerPID, os.Getpid())
	}
	_, err = shm.Open(cfg.Dir, cfg.Name)
	if !errors.Is(err, shm.ErrInUse) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Fatalf("second consumer: %v, want ErrInUse naming pid %d", err, os.Getpid())
	}
	setPID(pid) // the lock is held, the recorded process is gone
	_, err = shm.Open(cfg.Dir, cfg.Name)
	if !errors.Is(err, shm.ErrInUse) || !strings.Contains(err.Error(), "process is gone") {
		t.Fatalf("second consumer, recorded pid gone: %v", err)
	}
	c.Close()
}
