package decode

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/lastmile/lastmile/column"
)

// A unit decoded into a mapped file (lastmile's unit arena) that its
// owner truncated faults on the decoder's stores. The decoder turns its
// own panics into ErrCorrupt errors about the Parquet file; a memory fault
// is not the file's, so it goes on as a panic to the worker that runs the
// unit (pool), which recovers it as the unit's error and the engine
// reports it as a truncated shared file (shm/fault.go).
func TestFaultIntoMappedColumnIsNotCorruptFile(t *testing.T) {
	plan, err := PlanFiles(t.Context(), []string{"../testdata/small"}, PlanOptions{Columns: []string{"row_id"}})
	if err != nil {
		t.Fatal(err)
	}
	u := plan.Units[0]
	d := NewDecoder(plan.Fields)
	defer d.Close()
	if err := d.Open(t.Context(), u); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "arena"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	size := int(u.Rows*8) + 1<<16
	if err := f.Truncate(int64(size)); err != nil {
		t.Fatal(err)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	if err := f.Truncate(0); err != nil { // the owner shrinks it
		t.Fatal(err)
	}
	col := column.Column{Data: mem[:0]}
	var got any
	err = func() (err error) {
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		defer func() { got = recover() }()
		return d.DecodeColumn(0, nil, &col)
	}()
	if _, fault := got.(interface{ Addr() uintptr }); !fault {
		t.Fatalf("DecodeColumn into a truncated mapping: panic %v, error %v; want the memory fault passed on as a panic", got, err)
	}
}
