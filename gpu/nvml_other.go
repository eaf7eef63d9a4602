//go:build !(linux && cgo)

package gpu

import "fmt"

// Inventory needs cgo (go-nvml does): this build returns ErrNoNVML.
func Inventory(cfg Config) ([]GPU, error) {
	return nil, fmt.Errorf("%w: built without cgo, so NVML cannot be loaded", ErrNoNVML)
}
