//go:build !(linux && cgo)

package cuda_test

import (
	"errors"
	"testing"

	"github.com/lastmile/lastmile/cuda"
)

func TestNoCUDASupport(t *testing.T) {
	_, err := cuda.Open(cuda.Config{})
	if !errors.Is(err, cuda.ErrNoCUDASupport) || !cuda.NoDriver(err) {
		t.Fatalf("Open in a build without cgo: %v, want ErrNoCUDASupport", err)
	}
}
