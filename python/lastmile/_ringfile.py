"""What a ring file is before a consumer attaches to it (docs/ring-format.md):
whether it may be trusted (6), whether it is a leftover of an earlier run
(6.7), who holds its consumer lock (3.3), and ``inspect``, which reads its
header without attaching. :mod:`lastmile.ring` attaches; this module never
takes a lock, maps rings only read-only (the unit arena a consumer attaches
to, open_arena, writable as its ring is), and imports nothing from it.
"""

from __future__ import annotations

import mmap
import os
import stat
import struct
import time

import numpy as np

from . import _futex
from ._futex import load_u32, load_u64
from .format import (ARENA_HEADER_SIZE, ARENA_MAGIC, _ARENA_HEADER, MAGIC, OFF_CONSUMER_HEARTBEAT, OFF_CONSUMER_PID, OFF_CONSUMER_WAITING,
                     OFF_DATA_FUTEX, OFF_ENDED, OFF_HEAD, OFF_PRODUCER_HEARTBEAT,
                     OFF_PRODUCER_WAITING, OFF_SPACE_FUTEX, OFF_STATE, OFF_TAIL, PAGE,
                     STATE_ERROR, STATE_RUNNING, _STATE_NAMES, RingError, RingFormatError, _age,
                     _Geometry, _lock_free, _message, arena_name, ring_path)


class _Leftover(Exception):
    """Internal: the ring under the name is a leftover of an earlier run (6.7)."""


def _leftover(mm, fd):
    """A description of the ring mapped as ``mm`` (file ``fd``) if it is a
    leftover (docs/ring-format.md 6.7): nothing left to read, and its stream
    ended or its producer is dead. None otherwise."""
    u8 = np.frombuffer(mm, dtype=np.uint8)
    base = u8.ctypes.data
    del u8
    state = load_u32(base + OFF_STATE)  # state before tail (6.2)
    head = load_u64(base + OFF_HEAD)
    if load_u64(base + OFF_TAIL) != head:
        return None
    if state == STATE_RUNNING:
        if not _lock_free(fd, 0):
            return None
        # The lock is free: reload before calling it dead (6.4).
        state = load_u32(base + OFF_STATE)
        if load_u64(base + OFF_TAIL) != head:
            return None
    if state == STATE_RUNNING:
        pid = struct.unpack_from("<i", mm, 64)[0]
        return "its producer (pid %d) died after %d batches, all of them read" % (pid, head)
    what = "failed" if state == STATE_ERROR else "ended"
    ended = load_u64(base + OFF_ENDED)
    if ended:
        what += " %.0fs ago" % max(0.0, (time.time_ns() - ended) / 1e9)
    msg = _message(mm)
    if msg:
        what += " (%r)" % msg
    return "its stream %s after %d batches, all of them read" % (what, head)


def _describe_consumer(pid):
    """The holder of a ring's consumer lock, from the pid it recorded (a hint,
    docs/ring-format.md 3.3)."""
    if pid <= 0:
        return "it has not recorded its pid yet"
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return ("pid %d recorded it, but that process is gone: a process that inherited its "
                "descriptor (a fork) holds the lock" % pid)
    except OSError:
        pass
    return "pid %d" % pid


class _Unfinished(Exception):
    """Internal: the file may still be in construction; retried briefly by open()."""

    def __init__(self, error):
        super().__init__(str(error))
        self.error = error


# --------------------------------------------------------------------------
# inspect
# --------------------------------------------------------------------------


def _check_trusted(fd, path):
    """Refuse a ring file someone else may have planted: not a regular file,
    hard-linked elsewhere, or owned by neither this user nor root."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise RingError("%s is not a regular file: not a lastmile ring; remove it, or ask "
                        "the owner of the shm directory to" % path)
    if st.st_nlink != 1:
        raise RingError("%s has %d hard links: a ring has one; refusing a file that may be "
                        "someone else's" % (path, st.st_nlink))
    if st.st_uid not in (os.geteuid(), 0):
        raise RingError("%s is owned by uid %d, not by this user (uid %d) or root: lastmiled "
                        "gives each ring to its trainer, so this file may have been planted; "
                        "remove it" % (path, st.st_uid, os.geteuid()))


def open_arena(dir, arena_id, arena_size, ring):
    """Map the unit arena a ring names (docs/ring-format.md 8.1), shared and
    writable as the ring is, so that a trainer may change its batch's
    tensors in place wherever they lie:
    ``DIR/arena+HEX``, opened and trusted as a ring file is, at least
    ``4096 + arena_size`` bytes, its header naming the same id and size.
    Returns the mapping (header page and data); the caller closes it."""
    path = os.path.join(dir, arena_name(arena_id))
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        raise RingError("ring %s names the unit arena %s, which is missing: its producer removed it "
                        "(the ring is left from a finished run) or it was deleted; the ring cannot be "
                        "read. Start the job again (lastmiled makes a new arena with its rings)"
                        % (ring, path)) from None
    except PermissionError:
        raise RingError("ring %s names the unit arena %s, which this user (uid %d) may not open for "
                        "reading and writing: the job belongs to another user, or lastmiled could not "
                        "give the arena to its owner (its log says why: it needs CAP_CHOWN)"
                        % (ring, path, os.geteuid())) from None
    except OSError as e:
        raise RingError("ring %s names the unit arena %s, which cannot be opened (%s): it must be a "
                        "regular file, not a symlink" % (ring, path, e.strerror or e)) from None
    try:
        _check_trusted(fd, path)
        size = os.fstat(fd).st_size
        need = ARENA_HEADER_SIZE + arena_size
        if size < need:
            raise RingFormatError("unit arena %s is truncated: %d bytes, ring %s says %d data bytes after "
                                  "a %d-byte header" % (path, size, ring, arena_size, ARENA_HEADER_SIZE))
        mm = mmap.mmap(fd, need, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    finally:
        os.close(fd)
    magic, got_id, got_size = _ARENA_HEADER.unpack_from(mm, 0)
    err = None
    if magic != ARENA_MAGIC:
        err = "magic is %r, want %r (not a lastmile arena, or not finished)" % (magic, ARENA_MAGIC)
    elif got_id != arena_id:
        err = "its arena_id is 0x%016x, ring %s names 0x%016x" % (got_id, ring, arena_id)
    elif got_size != arena_size:
        err = "its data size is %d, ring %s says %d" % (got_size, ring, arena_size)
    if err is not None:
        mm.close()
        raise RingFormatError("unit arena %s: %s; the ring cannot be read" % (path, err))
    return mm


def inspect(name, dir=None) -> dict:
    """Header information about ring ``name`` for debugging (does not attach).

    Returns geometry, schema, head/tail, state and message, futex words, the
    heartbeat ages and whether the producer / a consumer hold their locks.
    Raises like :meth:`Ring.open` for files that are not rings.
    """
    path = ring_path(name, dir)
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise RingFormatError("%s is not a regular file" % path)
        size = os.fstat(fd).st_size
        if size < PAGE:
            head = os.pread(fd, 8, 0)
            if head != MAGIC:
                raise RingFormatError("%s is not a lastmile ring (bad magic %r)" % (path, head))
            raise RingFormatError("%s is truncated (%d bytes)" % (path, size))
        mm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ)
        try:
            geo = _Geometry(mm, size, path)
            u64 = lambda off: struct.unpack_from("<Q", mm, off)[0]  # noqa: E731
            u32 = lambda off: struct.unpack_from("<I", mm, off)[0]  # noqa: E731
            state = u32(OFF_STATE)
            info = {"name": name, "path": path, "file_size": size}
            info.update(geo.as_dict())
            head, tail = u64(OFF_HEAD), u64(OFF_TAIL)
            attached = not _lock_free(fd, 1)
            info.update({
                "tail": tail,
                "head": head,
                "in_flight": tail - head,
                "state": _STATE_NAMES.get(state, "unknown(%d)" % state),
                "message": _message(mm),
                "producer_alive": not _lock_free(fd, 0),
                "producer_heartbeat_age": _age(u64(OFF_PRODUCER_HEARTBEAT)),
                "producer_waiting": u32(OFF_PRODUCER_WAITING),
                "data_futex": u32(OFF_DATA_FUTEX),
                "consumer_attached": attached,
                # a hint, and only while a consumer is attached (ring-format 3.3)
                "consumer_pid": struct.unpack_from("<i", mm, OFF_CONSUMER_PID)[0] if attached else 0,
                "ended_unix_ns": u64(OFF_ENDED),
                "leftover": _leftover(mm, fd),
                "consumer_heartbeat_age": _age(u64(OFF_CONSUMER_HEARTBEAT)),
                "consumer_waiting": u32(OFF_CONSUMER_WAITING),
                "space_futex": u32(OFF_SPACE_FUTEX),
                "atomics": _futex.ATOMICS,
            })
            return info
        finally:
            mm.close()
    finally:
        os.close(fd)
