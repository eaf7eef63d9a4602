package peer

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/roots"
)

// fakeObjects is an object store of one object, whose HEADs answer as
// head says.
type fakeObjects struct {
	decode.OSFS
	head atomic.Pointer[func(ctx context.Context) (fs.FileInfo, error)]
}

// objInfo is an object's FileInfo: Sys is its ETag.
type objInfo struct {
	fs.FileInfo
	size int64
	etag string
}

func (o objInfo) Size() int64        { return o.size }
func (o objInfo) ModTime() time.Time { return time.Unix(1, 0) }
func (o objInfo) Sys() any           { return o.etag }

// objFile is an open object of version info.
type objFile struct {
	decode.File
	info objInfo
}

func (f objFile) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f objFile) Close() error               { return nil }

func (o *fakeObjects) Open(name string) (decode.File, error) {
	return objFile{info: objInfo{size: 10, etag: `"v1"`}}, nil
}

func (o *fakeObjects) StatContext(ctx context.Context, name string) (fs.FileInfo, error) {
	return (*o.head.Load())(ctx)
}

func (o *fakeObjects) answer(fn func(ctx context.Context) (fs.FileInfo, error)) { o.head.Store(&fn) }

var (
	headSame = func(context.Context) (fs.FileInfo, error) { return objInfo{size: 10, etag: `"v1"`}, nil }
	headNew  = func(context.Context) (fs.FileInfo, error) { return objInfo{size: 10, etag: `"v2"`}, nil }
	headHang = func(ctx context.Context) (fs.FileInfo, error) { <-ctx.Done(); return nil, ctx.Err() }
	head503  = func(context.Context) (fs.FileInfo, error) {
		return nil, errors.New("SlowDown (503): gave up after 4 attempts")
	}
)

// fakeSide returns the side tables of a compile that opened one object,
// ctr/side.parquet, sealed, and its store; every call checks, a check
// gives up after 50 ms and a job whose check fails serves on for 300 ms.
func fakeSide(t *testing.T) (*sideFiles, *fakeObjects) {
	t.Helper()
	setSideRecheck(t, 0)
	oldTimeout, oldGrace := sideCheckTimeout, sideGrace
	sideCheckTimeout, sideGrace = 50*time.Millisecond, 300*time.Millisecond
	t.Cleanup(func() { sideCheckTimeout, sideGrace = oldTimeout, oldGrace })
	r, err := roots.New(map[string]string{"ctr": "s3://data/ctr"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	objs := &fakeObjects{}
	objs.answer(headSame)
	fsys := rootsFS{r: r, objects: objs, user: Self()}
	fsys.side = newSideFiles(fsys, "")
	if _, err := fsys.Open("ctr/side.parquet"); err != nil {
		t.Fatal(err)
	}
	if n := fsys.side.seal(); n != 1 {
		t.Fatalf("%d side tables recorded, want the object", n)
	}
	return fsys.side, objs
}

// TestSideCheckAnswersDropTheJob: the store's answer to a check of a
// cached job's side object (another version, not found, refused) drops
// the job at once.
func TestSideCheckAnswersDropTheJob(t *testing.T) {
	for name, answer := range map[string]func(context.Context) (fs.FileInfo, error){
		"replaced":  headNew,
		"not found": func(context.Context) (fs.FileInfo, error) { return nil, fs.ErrNotExist },
		"refused":   func(context.Context) (fs.FileInfo, error) { return nil, fs.ErrPermission },
	} {
		t.Run(name, func(t *testing.T) {
			s, objs := fakeSide(t)
			if _, err := s.fresh(context.Background()); err != nil {
				t.Fatalf("the object as it was read: %v", err)
			}
			objs.answer(answer)
			if _, err := s.fresh(context.Background()); err == nil {
				t.Fatalf("the check of an object %s kept the job", name)
			}
		})
	}
}

// TestSideCheckThatCannotBeMade: a check of a cached job's side objects
// is bounded by sideCheckTimeout (a hung store holds no unit longer);
// one that cannot be made (a timeout, a 503) is tolerated, the job
// serving from what its last good check vouched for, until sideGrace
// after that check, and then drops the job; a check its caller's context
// ended is neither, and the next caller checks again.
func TestSideCheckThatCannotBeMade(t *testing.T) {
	ctx := context.Background()
	t.Run("hung store, then back", func(t *testing.T) {
		s, objs := fakeSide(t)
		objs.answer(headHang)
		t0 := time.Now()
		unchecked, err := s.fresh(ctx)
		if err != nil || unchecked == nil || time.Since(t0) > 2*time.Second {
			t.Fatalf("a first check of a hung store: %v, %v after %v; want the job kept, the check's failure said, within its timeout",
				unchecked, err, time.Since(t0))
		}
		objs.answer(headSame)
		if unchecked, err := s.fresh(ctx); unchecked != nil || err != nil {
			t.Fatalf("the store back: %v, %v", unchecked, err)
		}
		objs.answer(head503)
		time.Sleep(sideGrace / 2)
		if _, err := s.fresh(ctx); err != nil {
			t.Fatalf("a 503 within the grace of the last good check: %v; want the job kept", err)
		}
	})
	t.Run("never back", func(t *testing.T) {
		s, objs := fakeSide(t)
		objs.answer(head503)
		deadline := time.Now().Add(10 * sideGrace)
		for {
			_, err := s.fresh(ctx)
			if err != nil {
				if !strings.Contains(err.Error(), "not checked for") {
					t.Fatalf("dropped for %v", err)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("a job whose side object could not be checked for %v still served units", 10*sideGrace)
			}
			time.Sleep(sideGrace / 10)
		}
		if n := s.failed.Load(); n < 2 {
			t.Fatalf("dropped after %d failed checks, want more than one (one transient error must not flap)", n)
		}
	})
	t.Run("caller gone", func(t *testing.T) {
		s, objs := fakeSide(t)
		objs.answer(headHang)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := s.fresh(cctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("a check its caller gave up on: %v, want context.Canceled", err)
		}
		objs.answer(headNew)
		if _, err := s.fresh(ctx); err == nil {
			t.Fatal("the next caller did not check again")
		}
	})
}

// TestSideCheckWaitersKeepTheirContext: a unit of a cached job that
// waits for another's check of its side tables gives up when its own
// context ends (its requester gone, or hedged elsewhere), as the unit
// making the check does, and does not wait out the check: before, it
// waited on the check's lock until the check ended, sideCheckTimeout
// for a hung store, and for ever for a hung file system.
func TestSideCheckWaitersKeepTheirContext(t *testing.T) {
	s, objs := fakeSide(t)
	sideCheckTimeout = 3 * time.Second
	started := make(chan struct{})
	var once sync.Once
	objs.answer(func(ctx context.Context) (fs.FileInfo, error) {
		once.Do(func() { close(started) })
		<-ctx.Done()
		return nil, ctx.Err()
	})
	checked := make(chan struct{})
	go func() {
		defer close(checked)
		s.fresh(context.Background())
	}()
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	_, err := s.fresh(ctx)
	if d := time.Since(t0); !errors.Is(err, context.DeadlineExceeded) || d > time.Second {
		t.Errorf("a unit waiting for another's check, its context ended after 50ms: %v after %v", err, d)
	}
	<-checked
}
