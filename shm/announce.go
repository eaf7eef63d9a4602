package shm

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"unsafe"
)

// The announcement (format x.2, docs/ring-format.md §3.6)
//
// Page 0's bytes 1536-4095 carry one opaque block that the producer
// publishes to the consumer after the ring exists and may change or
// withdraw while the ring runs. shm stores and reads bytes; what they mean
// belongs to the caller (lastmile's only block is device staging's, whose
// layout package gpu owns: docs/gpu.md).
//
// Invariants
//
//  1. Only the producer writes the area (as line 1). A new producer
//     adopting a ring withdraws what its predecessor announced before it
//     publishes anything: an announcement names resources of the process
//     that wrote it.
//  2. announce_seq is a sequence lock: odd while the producer rewrites the
//     length and the block, even (and at least 2) once they are whole; 0
//     when nothing was ever announced. A reader copies the length and the
//     block between two loads of announce_seq and keeps the copy only if
//     both loads returned the same even value.
//  3. A producer changes the announcement before it publishes the batch
//     the change concerns: a consumer that took batch s (its acquire load
//     of tail) and then reads the announcement reads one at least as new
//     as the one in force when s was published.
//
// Rejected: writing the block before the magic, as the immutable part of
// page 0. The block names resources (device memory, events) that exist
// only once the ring does, fail later (a sticky driver error) and die
// with the producer, so it must be replaceable under a running consumer.
// Rejected too: a second file beside the ring. The consumer already maps
// page 0, and one file keeps one lifetime.

const (
	offAnnounceSeq = 1536
	offAnnounceLen = 1540
	offAnnounce    = 1544
	// MaxAnnouncement is the most bytes an announcement holds.
	MaxAnnouncement = pageSize - offAnnounce
)

// errOldRing is Announce's error on a ring older than format x.2.
var errOldRing = errors.New("the ring is older than format 1.2 and has no announcement area")

func (p *Producer) announceSeq() *atomic.Uint32 { return u32At(p.mem, offAnnounceSeq) }

// Announce replaces the ring's announcement with b (at most
// MaxAnnouncement bytes); an empty b withdraws it. Call it before
// publishing the batch the change concerns (invariant 3). The ring must be
// of format x.2 or later: an adopted older ring has no area.
func (p *Producer) Announce(b []byte) error {
	p.life.RLock()
	defer p.life.RUnlock()
	if p.closed {
		return fmt.Errorf("ring %q: announce: %w", p.name, ErrClosed)
	}
	if len(b) > MaxAnnouncement {
		return fmt.Errorf("ring %q: announce: %d bytes, at most %d fit", p.name, len(b), MaxAnnouncement)
	}
	if p.minor() < 2 {
		return fmt.Errorf("ring %q: announce: %w", p.name, errOldRing)
	}
	p.writeAnnouncement(b)
	return nil
}

func (p *Producer) minor() uint16 {
	return uint16(p.mem[offVersionMinor]) | uint16(p.mem[offVersionMinor+1])<<8
}

// writeAnnouncement is Announce's sequence-locked write (invariant 2).
func (p *Producer) writeAnnouncement(b []byte) {
	seq := p.announceSeq()
	s := seq.Load()
	if s%2 == 1 { // a predecessor died mid-write
		s++
	}
	seq.Store(s + 1)
	u32At(p.mem, offAnnounceLen).Store(uint32(len(b)))
	area := p.mem[offAnnounce:pageSize]
	n := copy(area, b)
	clear(area[n:])
	seq.Store(s + 2)
}

// withdrawInherited clears an adopted ring's announcement (invariant 1).
func (p *Producer) withdrawInherited() {
	if p.minor() >= 2 && u32At(p.mem, offAnnounceLen).Load() != 0 {
		p.writeAnnouncement(nil)
	}
}

// Announcement returns a copy of the ring's announcement and its sequence
// number, which changes whenever the announcement does; b is empty when
// nothing is announced (or the ring is older than x.2, seq then 0). It
// retries while the producer is mid-write.
func (c *Consumer) Announcement() (b []byte, seq uint32, err error) {
	c.life.RLock()
	defer c.life.RUnlock()
	if c.closed {
		return nil, 0, fmt.Errorf("ring %q: announcement: %w", c.name, ErrClosed)
	}
	if c.hdr.VersionMinor < 2 {
		return nil, 0, nil
	}
	return ReadAnnouncement(c.mem)
}

// ReadAnnouncement reads the announcement of page 0 (mem starts at the
// ring's first byte) under the sequence lock: see Consumer.Announcement.
// It is for readers with a mapping of their own (tools, tests); the
// length is checked, as any field of a file another process writes.
func ReadAnnouncement(mem []byte) (b []byte, seq uint32, err error) {
	if len(mem) < pageSize {
		return nil, 0, fmt.Errorf("announcement: page 0 is %d bytes, want %d", len(mem), pageSize)
	}
	sp := (*atomic.Uint32)(unsafe.Pointer(&mem[offAnnounceSeq]))
	lp := (*atomic.Uint32)(unsafe.Pointer(&mem[offAnnounceLen]))
	for try := 0; ; try++ {
		s := sp.Load()
		if s%2 == 0 {
			n := lp.Load()
			if n > MaxAnnouncement {
				if sp.Load() == s {
					return nil, s, fmt.Errorf("announcement: announce_len %d, at most %d", n, MaxAnnouncement)
				}
				continue
			}
			b = append(b[:0], mem[offAnnounce:offAnnounce+int(n)]...)
			if sp.Load() == s {
				return b, s, nil
			}
		}
		if try > 1000 {
			return nil, s, errors.New("announcement: the producer stayed mid-write (announce_seq odd) through 1000 tries: it may have died writing; wait for a new producer")
		}
		runtime.Gosched()
	}
}
