"""The consumer's attachment to a ring: its mapping, descriptor, cached slot
views and counters, kept apart from lastmile.ring.Ring so that a
``weakref.finalize`` can release the held slot and close everything without
keeping the Ring alive.
"""

from __future__ import annotations

import os
import time
import weakref

import numpy as np

from ._futex import FULL_FENCE, fence, futex_wake, load_u32, load_u64, store_u32, store_u64  # noqa: F401
from .format import (  # noqa: F401
    OFF_CONSUMER_HEARTBEAT, OFF_CONSUMER_PID, OFF_CONSUMER_WAITING, OFF_DATA_FUTEX, OFF_HEAD,
    OFF_PRODUCER_HEARTBEAT, OFF_PRODUCER_WAITING, OFF_SPACE_FUTEX, OFF_STATE, OFF_TAIL, RingError, _unlock,
)

_monotonic_ns = time.monotonic_ns

# This process's pid, kept current across fork() without a getpid() system
# call per batch (check_owner runs on every next()).
_PID = [os.getpid()]
os.register_at_fork(after_in_child=lambda: _PID.__setitem__(0, os.getpid()))

# The consumer heartbeat is informational (docs/ring-format.md 3): refresh it
# at most this often, not with a store per batch.
HEARTBEAT_NS = 5_000_000


class _Core:
    """Mapping, descriptor and counters of an attached consumer.

    Kept apart from :class:`Ring` so that ``weakref.finalize`` can release the
    held slot and close everything without keeping the Ring alive.
    """

    def __init__(self, fd, mm, geo, path, arena=None):
        self.fd = fd
        self.mm = mm
        # The unit arena the ring names (docs/ring-format.md 8), mapped
        # shared and writable as the ring is, or None. Place-1 tensors are views of it.
        self.arena = arena
        self.arena_base = self.arena_end = 0  # its address range, to tell its views from the slots'
        # The arena's and the ring's bytes as arrays that hold buffer exports:
        # every tensor of a batch is a view of one of them (format.view), so
        # neither mapping is unmapped while a tensor of it is alive.
        self.arena_u8 = None
        if arena is not None:
            self.arena_u8 = np.frombuffer(arena, dtype=np.uint8)
            self.arena_base = self.arena_u8.ctypes.data
            self.arena_end = self.arena_base + len(self.arena_u8)
        self.geo = geo
        self.path = path
        self.closed = False
        self.pid = os.getpid()  # a forked child must not touch the consumer state
        self.held = None  # sequence number of the slot we hold, if any
        self.u8 = np.frombuffer(mm, dtype=np.uint8)
        base = self.u8.ctypes.data
        self.base = base
        self.a_tail = base + OFF_TAIL
        self.a_data_futex = base + OFF_DATA_FUTEX
        self.a_producer_waiting = base + OFF_PRODUCER_WAITING
        self.a_producer_heartbeat = base + OFF_PRODUCER_HEARTBEAT
        self.a_state = base + OFF_STATE
        self.a_head = base + OFF_HEAD
        self.a_space_futex = base + OFF_SPACE_FUTEX
        self.a_consumer_waiting = base + OFF_CONSUMER_WAITING
        self.a_consumer_heartbeat = base + OFF_CONSUMER_HEARTBEAT
        self.a_consumer_pid = base + OFF_CONSUMER_PID
        self.head = load_u64(self.a_head)
        self.hb = 0  # monotonic ns of our last consumer_heartbeat store
        # We are the only writer of space_futex while we hold byte 1: keep its value.
        self.space = load_u32(self.a_space_futex)
        self.cache = [None] * geo.slot_count  # _SlotCache per slot index
        self.leftover = None  # what the ring was when opened, if a leftover (ring-format 6.7)

    def slot_offset(self, seq):
        return self.geo.data_offset + (seq % self.geo.slot_count) * self.geo.slot_size

    def check_owner(self):
        if _PID[0] != self.pid:
            raise RingError(
                "ring %s was opened by process %d and cannot be used in forked process %d; "
                "read the ring in the main process (DataLoader num_workers=0)"
                % (self.path, self.pid, os.getpid()))

    def release(self):
        if self.held is None:
            return
        self.check_owner()
        self.release_held()
        store_u64(self.a_consumer_heartbeat, _monotonic_ns())

    def release_held(self):
        """6.2 step 3 for the held slot (caller checked ownership and ``held``)."""
        h = self.held
        self.held = None
        # store_u64 is a release store: every read of the slot that this thread
        # made happens before the producer can see the new head.
        store_u64(self.a_head, h + 1)
        self.head = h + 1
        self.space = sp = (self.space + 1) & 0xFFFFFFFF
        store_u32(self.a_space_futex, sp)
        if FULL_FENCE:
            # Conditional wake (6.2 step 3), no lost wake-up: fence() is a
            # seq_cst atomic_thread_fence, a full barrier between the stores of
            # head / space_futex above and the load of producer_waiting below.
            # The producer, going to sleep (6.3), stores producer_waiting = 1,
            # has a full barrier (its seq_cst store / fence), then loads
            # space_futex into v and re-checks head before FUTEX_WAIT(v). With a
            # full barrier on both sides (store-buffering / Dekker), at least
            # one side sees the other's store: either we load 1 and wake it, or
            # its later loads see our head and space_futex, so it does not
            # sleep (head moved) or its FUTEX_WAIT(v) returns at once (the
            # word no longer holds v). A stale 1 (it woke on its own) costs one
            # spurious wake, nothing else.
            fence()
            if load_u32(self.a_producer_waiting) != 1:
                return
        # Without libatomic fence() is no guaranteed store->load barrier: wake
        # unconditionally, as the format requires.
        futex_wake(self.a_space_futex, 1)

    def close(self):
        if self.closed:
            return
        if os.getpid() != self.pid:
            # Forked copy: the lock and the counters belong to the parent. Closing
            # our descriptor does not drop the parent's open-file-description lock.
            self.closed = True
            os.close(self.fd)
            self.u8 = self.arena_u8 = None
            self.mm = None
            self.arena = None
            return
        try:
            self.release()
        finally:
            self.closed = True
            self.cache = None  # its arrays would keep the mapping from closing
            try:
                store_u32(self.a_consumer_waiting, 0)
                store_u32(self.a_consumer_pid, 0)
            except Exception:  # pragma: no cover
                pass
            try:
                _unlock(self.fd, 1)
            except OSError:  # pragma: no cover
                pass
            os.close(self.fd)
            self.u8 = self.arena_u8 = None
            try:
                self.mm.close()
            except BufferError:
                # Arrays of a batch are still alive: they keep the mapping (not
                # the slot) alive; it is unmapped when the last one is freed.
                pass
            self.mm = None
            if self.arena is not None:
                try:
                    self.arena.close()
                except BufferError:  # as above: a batch's arena arrays are alive
                    pass
                self.arena = None
