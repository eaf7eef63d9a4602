//go:build !linux

package gpu

import "errors"

var errNoNUMA = errors.New("NUMA placement is implemented for Linux only")

// OnNode runs f without placing anything: NUMA policy is Linux-only.
func OnNode(node int, f func() error) error { return f() }

// PageNode is Linux-only.
func PageNode(b []byte) (int, error) { return -1, errNoNUMA }

// Nodes returns [0].
func Nodes() []int { return []int{0} }
