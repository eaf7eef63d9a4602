package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/lastmile/lastmile/datagen"
)

// requirePython returns the interpreter for the Python client, or skips
// the test when it lacks numpy, unless LASTMILE_REQUIRE_PYTHON is set (make
// test sets it), in which case a missing numpy fails the test.
func requirePython(t *testing.T) string {
	t.Helper()
	py := pythonPath()
	if err := exec.Command(py, "-c", "import numpy").Run(); err != nil {
		if os.Getenv("LASTMILE_REQUIRE_PYTHON") != "" {
			t.Fatalf("%s cannot import numpy (%v): run `make pydeps`", py, err)
		}
		t.Skipf("%s cannot import numpy: %v", py, err)
	}
	return py
}

var interopColumns = []string{"row_id", "user_id", "label", "dense_3", "cat_0", "seq_1", "query", "dense_opt", "cat_opt", "seq_opt", "query_opt"}

// expectedDigest computes the digest of the fixture's rows straight from
// datagen's definition of every value, independently of any Parquet reader.
func expectedDigest(t *testing.T, dir string) DigestResult {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "part-00000.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	meta, ok := pf.Lookup(datagen.MetadataKey)
	if !ok {
		t.Fatal("fixture lacks its datagen config")
	}
	cfg, err := datagen.ConfigFromMetadata(meta)
	if err != nil {
		t.Fatal(err)
	}
	type acc struct{ values, lengths, valid hash.Hash }
	accs := map[string]*acc{}
	for _, c := range interopColumns {
		accs[c] = &acc{sha256.New(), sha256.New(), sha256.New()}
	}
	le := binary.LittleEndian
	var b []byte
	put := func(h hash.Hash, v uint64, size int) {
		b = b[:0]
		switch size {
		case 8:
			b = le.AppendUint64(b, v)
		case 4:
			b = le.AppendUint32(b, uint32(v))
		}
		h.Write(b)
	}
	list := func(a *acc, vals []int64) {
		for _, v := range vals {
			put(a.values, uint64(v), 8)
		}
		put(a.lengths, uint64(len(vals)), 8)
	}
	str := func(a *acc, s string) {
		a.values.Write([]byte(s))
		put(a.lengths, uint64(len(s)), 8)
	}
	valid := func(a *acc, ok bool) {
		if ok {
			a.valid.Write([]byte{1})
		} else {
			a.valid.Write([]byte{0})
		}
	}
	g := datagen.NewGenerator(cfg)
	var row datagen.Row
	for id := int64(0); id < cfg.Rows; id++ {
		g.Fill(id, &row)
		put(accs["row_id"].values, uint64(row.RowID), 8)
		put(accs["user_id"].values, uint64(row.UserID), 8)
		put(accs["label"].values, uint64(uint32(row.Label)), 4)
		put(accs["dense_3"].values, uint64(math.Float32bits(row.Dense[3])), 4)
		put(accs["cat_0"].values, uint64(row.Cats[0]), 8)
		list(accs["seq_1"], row.Seqs[1])
		str(accs["query"], row.Query)
		d := float32(0)
		if row.DenseOptValid {
			d = row.DenseOpt
		}
		put(accs["dense_opt"].values, uint64(math.Float32bits(d)), 4)
		valid(accs["dense_opt"], row.DenseOptValid)
		c := int64(0)
		if row.CatOptValid {
			c = row.CatOpt
		}
		put(accs["cat_opt"].values, uint64(c), 8)
		valid(accs["cat_opt"], row.CatOptValid)
		if row.SeqOptValid {
			list(accs["seq_opt"], row.SeqOpt)
		} else {
			list(accs["seq_opt"], nil)
		}
		valid(accs["seq_opt"], row.SeqOptValid)
		if row.QueryOptValid {
			str(accs["query_opt"], row.QueryOpt)
		} else {
			str(accs["query_opt"], "")
		}
		valid(accs["query_opt"], row.QueryOptValid)
	}
	res := DigestResult{Rows: cfg.Rows, Fields: map[string]FieldDigest{}}
	for name, a := range accs {
		fd := FieldDigest{Values: hex.EncodeToString(a.values.Sum(nil))}
		if strings.HasPrefix(name, "seq_") || strings.HasPrefix(name, "query") {
			fd.Lengths = hex.EncodeToString(a.lengths.Sum(nil))
		}
		if strings.HasSuffix(name, "_opt") {
			fd.Valid = hex.EncodeToString(a.valid.Sum(nil))
		}
		res.Fields[name] = fd
	}
	return res
}

// TestPythonReadsGoRing runs a job in this process and has a separate
// Python process (the trainer client) read every batch; the contents must
// match the Parquet input exactly, by row ids and per-column digests. The
// Go consumer (lastmile cat) must agree too.
func TestPythonReadsGoRing(t *testing.T) {
	py := requirePython(t)
	data, _ := filepath.Abs("../../testdata/small")
	want := expectedDigest(t, data)

	// With ring.arena (format 4.2) units are decoded whole into the
	// arena, and most tensors are read from it.
	ring := map[bool]string{false: "slots: 3}\ndecode: {workers: 2, max_unit_rows: 1000}", true: "slots: 3, arena: true}\ndecode: {workers: 2}"}
	for _, tc := range []struct {
		consumer string
		arena    bool
	}{{"python", false}, {"go", false}, {"python", true}, {"go", true}} {
		consumer := tc.consumer
		t.Run(fmt.Sprintf("%s/arena=%v", consumer, tc.arena), func(t *testing.T) {
			ringDir := t.TempDir()
			specPath := filepath.Join(t.TempDir(), "job.yaml")
			cols, _ := json.Marshal(interopColumns)
			src := fmt.Sprintf("version: 1\nname: interop\ninputs: [%s]\ncolumns: %s\nbatch: {size: 777, last: keep}\nring: {dir: %s, %s\n", data, cols, ringDir, ring[tc.arena])
			if err := os.WriteFile(specPath, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			got, log := digestRun(t, py, consumer, ringDir, "lastmile.interop", specPath)
			if tc.arena && !regexp.MustCompile(`unit arena took [1-9][0-9]* units \(0 more`).MatchString(log) {
				t.Errorf("the run's summary does not say that every unit went into the arena:\n%s", log)
			}
			if got.Rows != want.Rows {
				t.Fatalf("consumer saw %d rows, want %d", got.Rows, want.Rows)
			}
			if wantBatches := (want.Rows + 776) / 777; got.Batches != wantBatches {
				t.Errorf("consumer saw %d batches, want %d", got.Batches, wantBatches)
			}
			for _, c := range interopColumns {
				if got.Fields[c] != want.Fields[c] {
					t.Errorf("column %s: digest %+v, want %+v", c, got.Fields[c], want.Fields[c])
				}
			}
		})
	}
}

// digestRun runs the job in specPath in this process while consumer
// ("python": python -m lastmile cat, or "go": lastmile cat) reads ring
// name in ringDir, and returns the consumer's digest and the run's summary.
func digestRun(t *testing.T, py, consumer, ringDir, name, specPath string) (DigestResult, string) {
	t.Helper()
	ctx := context.Background()
	var out bytes.Buffer
	var consumerErr error
	done := make(chan struct{})
	switch consumer {
	case "python":
		cmd := exec.Command(py, "-m", "lastmile", "cat", "--digest", "--shm-dir", ringDir, name)
		cmd.Env = append(os.Environ(), "PYTHONPATH="+pythonDir())
		cmd.Stdout = &out
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() {
			consumerErr = cmd.Wait()
			if consumerErr != nil {
				consumerErr = fmt.Errorf("%v: %s", consumerErr, stderr.String())
			}
			close(done)
		}()
	case "go":
		go func() {
			var stderr bytes.Buffer
			if code := run(ctx, []string{"cat", "-digest", "-shm-dir", ringDir, name}, &out, &stderr); code != 0 {
				consumerErr = fmt.Errorf("lastmile cat exited %d: %s", code, stderr.String())
			}
			close(done)
		}()
	}
	var stdout, stderr bytes.Buffer
	if code := run(ctx, []string{"run", specPath}, &stdout, &stderr); code != 0 {
		t.Fatalf("lastmile run exited %d: %s", code, stderr.String())
	}
	<-done
	if consumerErr != nil {
		t.Fatal(consumerErr)
	}
	var got DigestResult
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("consumer output %q: %v", out.String(), err)
	}
	return got, stdout.String()
}

// TestWeightedDigestsAgree: the Go and Python digests of a ring with a
// weighted jagged field (format 3) agree, weights included.
func TestWeightedDigestsAgree(t *testing.T) {
	py := requirePython(t)
	data, _ := filepath.Abs("../../testdata/weighted/scores.parquet")
	var digests []DigestResult
	for _, consumer := range []string{"python", "go"} {
		ringDir := t.TempDir()
		specPath := filepath.Join(t.TempDir(), "job.yaml")
		src := fmt.Sprintf("version: 1\nname: weighted\ninputs: [%s]\nbatch: {size: 100, last: keep}\nring: {dir: %s, slots: 3}\n"+
			"pipeline:\n  - jagged: {output: sparse, keys: [{column: scores.id, key: scores, max_length: 3, weights: scores.score}, hist]}\n"+
			"  - select: [row_id, sparse]\n", data, ringDir)
		if err := os.WriteFile(specPath, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		d, _ := digestRun(t, py, consumer, ringDir, "lastmile.weighted", specPath)
		digests = append(digests, d)
	}
	p, g := digests[0], digests[1]
	if p.Rows != 1200 || g.Rows != 1200 || g.Fields["sparse"].Weights == "" {
		t.Fatalf("rows %d and %d, Go's sparse digest %+v: want 1200 rows and weights", p.Rows, g.Rows, g.Fields["sparse"])
	}
	for name, f := range g.Fields {
		if p.Fields[name] != f {
			t.Errorf("field %s: Python's digest %+v, Go's %+v", name, p.Fields[name], f)
		}
	}
}
