package engine_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/spec"
)

// TestPlaceRing checks that every rank's ring is created through
// Options.PlaceRing, in rank order, and that its error fails the run.
func TestPlaceRing(t *testing.T) {
	abs, _ := filepath.Abs("../testdata/small")
	src := "version: 1\ninputs: [DATA]\nbatch: {size: 500}\nworld_size: 3\nring: {dir: RINGDIR}\n"
	src = strings.NewReplacer("DATA", abs, "RINGDIR", t.TempDir()).Replace(src)
	job, err := spec.Parse("test.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var ranks []int
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err = engine.Run(ctx, job, engine.Options{
		Remove: true,
		PlaceRing: func(rank int, create func() error) error {
			ranks = append(ranks, rank)
			return create()
		},
		Ready: func([]string) { cancel() },
	})
	if !errors.Is(err, context.Canceled) && err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ranks, []int{0, 1, 2}) {
		t.Fatalf("PlaceRing called for ranks %v, want 0, 1, 2", ranks)
	}
	boom := errors.New("no such NUMA node")
	_, err = engine.Run(context.Background(), job, engine.Options{
		Remove:    true,
		PlaceRing: func(rank int, create func() error) error { return boom },
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Run with a failing PlaceRing: %v, want its error", err)
	}
}
