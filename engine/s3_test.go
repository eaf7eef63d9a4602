package engine_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/objstore"
	"github.com/lastmile/lastmile/objstore/s3test"
	"github.com/lastmile/lastmile/shm"
	"github.com/lastmile/lastmile/spec"
)

const s3Job = `
version: 1
name: s3
inputs: [INPUT]
columns: [row_id, label, dense_0, seq_0]
batch: {size: 256, last: drop}
world_size: 2
epochs: 2
shuffle: {units: true}
seed: 7
decode: {max_unit_rows: 1500, workers: 3}
pipeline:
  - filter: "label == 1 or row_id % 3 == 0"
ring: {dir: RINGDIR, slots: 4}
`

// TestS3JobSameAsLocal: a job over s3:// inputs (a glob, on the versitygw
// test server) hands trainers batches byte-identical to the same job over
// the local files.
func TestS3JobSameAsLocal(t *testing.T) {
	root := t.TempDir()
	srv, err := s3test.Start(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	bucket, _ := srv.Bucket("data")
	files, _ := filepath.Glob("../testdata/small/*.parquet")
	putObjects(t, filepath.Join(bucket, "small"), files)
	c, err := objstore.New(objstore.Config{Endpoint: srv.Endpoint, PathStyle: true, AccessKey: s3test.Access, SecretKey: s3test.Secret})
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs("../testdata/small")
	local := runTensors(t, strings.ReplaceAll(s3Job, "INPUT", abs+"/*.parquet"), nil)
	remote := runTensors(t, strings.ReplaceAll(s3Job, "INPUT", "s3://data/small/*.parquet"), objstore.Mount(nil, c.Source(nil)))
	if len(local) != 2 || len(local[0]) == 0 || len(remote) != len(local) {
		t.Fatalf("local ranks %d, remote %d", len(local), len(remote))
	}
	for r := range local {
		if len(remote[r]) != len(local[r]) {
			t.Fatalf("rank %d: %d batches over S3, %d locally", r, len(remote[r]), len(local[r]))
		}
		for i := range local[r] {
			if !bytes.Equal(remote[r][i], local[r][i]) {
				t.Fatalf("rank %d batch %d differs over S3", r, i)
			}
		}
	}
	if st := c.Stats(); st.Requests == 0 || st.Retries != 0 {
		t.Fatalf("S3 client stats %+v", st)
	}
}

// runTensors runs a job and returns, per rank, each batch's tensors'
// bytes concatenated.
// putObjects copies files into dir, a folder of the S3 test server's
// bucket (s3test.Server.Bucket), where they are objects.
func putObjects(tb testing.TB, dir string, files []string) {
	tb.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644)
		}
		if err != nil {
			tb.Fatal(err)
		}
	}
}

func runTensors(t testing.TB, src string, fsys decode.FS) [][][]byte {
	t.Helper()
	return runTensorsWith(t, src, engine.Options{FS: fsys})
}

// runTensorsWith is runTensors with the run's options (Linger and Ready
// are set here).
func runTensorsWith(t testing.TB, src string, opts engine.Options) [][][]byte {
	t.Helper()
	dir := t.TempDir()
	job, err := spec.Parse("test.yaml", []byte(strings.ReplaceAll(src, "RINGDIR", dir)))
	if err != nil {
		t.Fatal(err)
	}
	res := make([][][]byte, job.WorldSize)
	errs := make([]error, job.WorldSize)
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opts.Linger = true
	opts.Ready = func(rings []string) {
		for r, name := range rings {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res[r], errs[r] = readTensors(ctx, dir, name)
			}()
		}
	}
	_, err = engine.Run(ctx, job, opts)
	if err != nil {
		cancel()
	}
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range errs {
		if e != nil {
			t.Fatal(e)
		}
	}
	return res
}

func readTensors(ctx context.Context, dir, name string) ([][]byte, error) {
	c, err := shm.Open(dir, name)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var out [][]byte
	for {
		b, err := c.Next(ctx)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		var all []byte
		for _, tn := range b.Tensors {
			all = append(all, tn.Data...)
		}
		out = append(out, all)
	}
}

// startS3 starts the S3 test server for t, serving a bucket "lake"
// beneath a temporary directory, and skips t in -short runs.
func startS3(t *testing.T) *s3test.Server {
	t.Helper()
	if testing.Short() {
		t.Skip("starts the S3 test server")
	}
	srv, err := s3test.Start(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}
