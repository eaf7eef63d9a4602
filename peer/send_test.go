package peer

import (
	"bytes"
	"testing"

	"google.golang.org/grpc/mem"
)

// TestBatchLease: the batch goes back only when the handler and every
// buffer gRPC holds are done with it, once; small buffers are copies that
// hold nothing.
func TestBatchLease(t *testing.T) {
	released := 0
	l := newLease(func() { released++ })
	big := bytes.Repeat([]byte{7}, 4096)
	b1, b2 := l.buffer(big[:100]), l.buffer(big[2048:])
	small := make([]byte, 16, 16)
	s := l.buffer(small)
	small[0] = 9 // the batch is reused: the copy must not change
	if s.ReadOnlyData()[0] != 0 {
		t.Error("a small buffer views the batch instead of copying it")
	}
	if &b1.ReadOnlyData()[0] != &big[0] {
		t.Error("a large buffer was copied")
	}
	half := mem.BufferSlice{b2}
	b2.Ref() // gRPC splitting or holding a buffer twice
	l.done() // the handler is done
	b1.Free()
	s.Free()
	if released != 0 {
		t.Fatal("released while gRPC still holds a buffer")
	}
	half.Free()
	if released != 0 {
		t.Fatal("released while one reference to a buffer is left")
	}
	b2.Free()
	if released != 1 {
		t.Fatalf("released %d times, want once", released)
	}
}
