package peer

import (
	"math/bits"
	"sync"

	"google.golang.org/grpc/mem"
)

// framePool is the buffer pool gRPC reads HTTP/2 frames into and batches
// its writes in, on both sides of a peer connection. gRPC's own pool
// zeroes every buffer it hands out, although each caller overwrites the
// buffer whole before reading it (a frame's payload is read with
// io.ReadFull into a buffer of exactly its length; a write batch is
// copied into before it is flushed). On the requester that zeroing was
// 6% of the CPU to receive a unit (pprof of the receive path, docs/peers.md),
// all of it spent on memory the next instruction overwrites. framePool
// keeps gRPC's size classes (powers of two; a buffer is a prefix of one)
// and leaves out the clearing. The bytes are this process's own unit
// output; a stale byte would only be visible to a caller that reads past
// what it wrote, which gRPC does not.
type framePool struct {
	classes [framePoolClasses]sync.Pool
}

const (
	framePoolMinShift = 8  // 256 B
	framePoolClasses  = 13 // up to 1 MiB
)

var _ mem.BufferPool = (*framePool)(nil)

func frameClass(n int) int {
	if n <= 1<<framePoolMinShift {
		return 0
	}
	return bits.Len(uint(n-1)) - framePoolMinShift
}

// Get returns a buffer of length n; its bytes are not cleared.
func (p *framePool) Get(n int) *[]byte {
	c := frameClass(n)
	if c >= framePoolClasses {
		b := make([]byte, n)
		return &b
	}
	if b, ok := p.classes[c].Get().(*[]byte); ok {
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n, 1<<(framePoolMinShift+c))
	return &b
}

// Put takes back a buffer that Get returned (or a prefix of one).
func (p *framePool) Put(b *[]byte) {
	c := frameClass(cap(*b))
	if c >= framePoolClasses || cap(*b) != 1<<(framePoolMinShift+c) {
		return
	}
	*b = (*b)[:cap(*b)]
	p.classes[c].Put(b)
}

// frames is the pool both sides of every peer connection share.
var frames = new(framePool)
