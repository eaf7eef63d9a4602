package decode

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go/format"
)

// TestThriftStructBytes: listStructBytes covers every struct of parquet's
// metadata that the reflective decoder may make a slice of, so that
// checkThrift's bound holds after a parquet-go upgrade grows one.
func TestThriftStructBytes(t *testing.T) {
	seen := map[reflect.Type]bool{}
	var walk func(reflect.Type)
	walk = func(ty reflect.Type) {
		switch ty.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array:
			walk(ty.Elem())
			return
		case reflect.Struct:
		default:
			return
		}
		if seen[ty] {
			return
		}
		seen[ty] = true
		if ty.Size() > listStructBytes {
			t.Errorf("%s is %d bytes, more than listStructBytes (%d): raise it", ty, ty.Size(), listStructBytes)
		}
		for i := range ty.NumField() {
			walk(ty.Field(i).Type)
		}
	}
	walk(reflect.TypeFor[format.FileMetaData]())
	walk(reflect.TypeFor[format.ColumnIndex]())
	walk(reflect.TypeFor[format.OffsetIndex]())
	if len(seen) < 10 {
		t.Fatalf("walked only %d struct types", len(seen))
	}
}

// footerOf returns the thrift footer of the Parquet file at path.
func footerOf(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := int(binary.LittleEndian.Uint32(b[len(b)-8:]))
	return b[len(b)-8-n : len(b)-8]
}

func TestCheckThrift(t *testing.T) {
	real := footerOf(t, filepath.Join("..", "testdata", "small", "part-00000.parquet"))
	// A struct whose field 1 is a list of structs declaring n elements,
	// followed by fill bytes of empty structs (each a stop byte).
	list := func(n uint64, fill int) []byte {
		b := []byte{0x19, 0xfc} // field 1, list; size 15 (long form), element type struct
		b = binary.AppendUvarint(b, n)
		b = append(b, make([]byte, fill)...)
		return append(b, 0) // the outer stop
	}
	deep := []byte{}
	for range 20 {
		deep = append(deep, 0x1c) // field 1, struct
	}
	deep = append(deep, make([]byte, 21)...)
	for _, c := range []struct {
		name string
		b    []byte
		want string // "" accepts
	}{
		{"a real footer", real, ""},
		{"an empty struct", []byte{0}, ""},
		{"a list of 100 empty structs", list(100, 100), ""},
		{"a list longer than its bytes", list(1<<32, 100), "malformed thrift metadata"},
		{"truncated", real[:len(real)/2], "malformed thrift metadata"},
		{"nested 20 deep", deep, "malformed thrift metadata"},
		{"2M empty structs: 1.1 GiB decoded", list(2<<20, 2<<20), "would take 1154 MiB to decode (the limit is 1024 MiB)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := checkThrift(c.b, metaFile)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("got %v, want an error with %q", err, c.want)
			}
		})
	}
}

// TestThriftAllocOfRealFooters: the bound's estimate of a real footer is
// about ten times its size, what the decoder allocates for it
// (thriftcheck.go), so maxThriftAlloc admits footers of about 100 MiB.
func TestThriftAllocOfRealFooters(t *testing.T) {
	var paths []string
	for _, dir := range []string{"small", "none", "zstd", "weighted"} {
		m, _ := filepath.Glob(filepath.Join("..", "testdata", dir, "*.parquet"))
		paths = append(paths, m...)
	}
	p := filepath.Join(t.TempDir(), "gen.parquet")
	writeFile(t, p, fileSpec{rows: 5000, rowGroupRows: 100, codec: "snappy", pageVersion: 1, pageBytes: 4096})
	for _, path := range append(paths, p) {
		b := footerOf(t, path)
		r := thriftReader{b: b}
		if err := r.checkStruct(metaFile, 0); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		ratio := float64(r.alloc+int64(len(b))) / float64(len(b))
		t.Logf("%s: footer %d bytes, counted %d (%.1fx)", filepath.Base(path), len(b), r.alloc+int64(len(b)), ratio)
		if ratio > 12 {
			t.Errorf("%s: the estimate is %.1fx the footer: too coarse for maxThriftAlloc", path, ratio)
		}
	}
}

// TestPlanRefusesHostileFooter: a footer of a few bytes that declares 2^32
// row groups (before checkThrift, a 24 GiB allocation that crashed the
// process) is refused with an error naming the file.
func TestPlanRefusesHostileFooter(t *testing.T) {
	footer := []byte{0x15, 0x04}        // field 1 (version), i32 2
	footer = append(footer, 0x19, 0x0c) // field 2 (schema): an empty list of structs
	footer = append(footer, 0x26, 0x00) // field 4 (num_rows), i64 0
	footer = append(footer, 0x19, 0xfc) // field 4... as a list of 2^32 structs
	footer = binary.AppendUvarint(footer, 1<<32)
	footer = append(footer, 0, 0, 0, 0)
	var file []byte
	file = append(file, "PAR1"...)
	file = append(file, footer...)
	file = binary.LittleEndian.AppendUint32(file, uint32(len(footer)))
	file = append(file, "PAR1"...)
	path := filepath.Join(t.TempDir(), "hostile.parquet")
	if err := os.WriteFile(path, file, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := PlanFiles(t.Context(), []string{path}, PlanOptions{})
	if err == nil || !strings.Contains(err.Error(), "hostile.parquet") || !strings.Contains(err.Error(), "malformed thrift metadata") {
		t.Fatalf("got %v, want a malformed-footer error naming the file", err)
	}
	t.Log(err)
}
