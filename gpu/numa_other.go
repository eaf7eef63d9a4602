//go:build !linux

package gpu

import "errors"

var errNoNUMA = errors.New("NUMA placement is implemented for Linux only")

// ErrPolicy is OnNode's error when it could not set the memory policy
// (never, here).
var ErrPolicy = errors.New("NUMA memory policy not set")

// OnNode runs f without placing anything: NUMA policy is Linux-only.
func OnNode(node int, f func() error) error { return f() }

// PageNode is Linux-only.
func PageNode(b []byte) (int, error) { return -1, errNoNUMA }

// Nodes returns [0].
func Nodes() []int { return []int{0} }
