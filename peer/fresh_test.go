package peer

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/roots"
)

// rememberingFS is an object store source as objstore.Source is since
// bb0d193: Open answers from the version an earlier open remembered (here:
// one a second older than the object is now), OpenFresh asks the store.
type rememberingFS struct {
	decode.OSFS
	dir string
}

type staleFile struct{ *os.File }

type staleInfo struct{ fs.FileInfo }

func (i staleInfo) ModTime() time.Time { return i.FileInfo.ModTime().Add(-time.Second) }

func (f staleFile) Stat() (fs.FileInfo, error) {
	fi, err := f.File.Stat()
	return staleInfo{fi}, err
}

func (u rememberingFS) path(name string) string {
	return filepath.Join(u.dir, strings.TrimPrefix(name, "s3://data/"))
}

func (u rememberingFS) Open(name string) (decode.File, error) {
	f, err := os.Open(u.path(name))
	if err != nil {
		return nil, err
	}
	return staleFile{f}, nil
}

func (u rememberingFS) OpenFresh(name string) (decode.File, error) { return os.Open(u.path(name)) }

// TestPeerDecoderAsksAgain: bb0d193 made a decoder whose source
// remembered an older version of an object ask again (OpenFresh) before
// refusing a unit planned from the version the store has now. A peer's
// decoder reads objects through rootsFS, which has no OpenFresh: a peer
// whose object client remembers the replaced version (metaFresh, a
// minute) still refuses the GPU host's units of it with ErrFileChanged,
// while the same source read directly (the GPU host's own decoders)
// accepts them.
func TestPeerDecoderAsksAgain(t *testing.T) {
	bucket, err := filepath.Abs("../testdata/small")
	if err != nil {
		t.Fatal(err)
	}
	plan, err := decode.PlanFiles(context.Background(), []string{filepath.Join(bucket, "part-00000.parquet")}, decode.PlanOptions{Columns: []string{"row_id"}})
	if err != nil {
		t.Fatal(err)
	}
	objs := rememberingFS{dir: bucket}

	u := plan.Units[0]
	u.File = "s3://data/part-00000.parquet"
	direct := decode.NewDecoderFS(plan.Fields, objs)
	defer direct.Close()
	if err := direct.Open(context.Background(), u); err != nil {
		t.Fatalf("through the source itself: %v", err)
	}

	r, err := roots.New(map[string]string{"ctr": "s3://data"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	u.File = "ctr/part-00000.parquet"
	dec := decode.NewDecoderFS(plan.Fields, rootsFS{r: r, objects: objs})
	defer dec.Close()
	if err := dec.Open(context.Background(), u); err != nil {
		t.Fatalf("through a peer's rootsFS: %v (ErrFileChanged %v)", err, errors.Is(err, decode.ErrFileChanged))
	}
}
