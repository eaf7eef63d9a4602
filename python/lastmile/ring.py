"""Consumer side of the lastmile shared-memory ring (docs/ring-format.md, 1.x to 4.x).

Written from the format document alone. A ring is a single-producer,
single-consumer queue of batches in a file ``DIR/NAME`` (``DIR`` defaults to
``$LASTMILE_SHM_DIR`` or ``/dev/shm``)::

    with lastmile.Ring.open("train-rank0") as ring:
        for batch in ring:            # or ring.iter_torch()
            x = torch.from_numpy(batch["x"]).to("cuda")   # copy out first
            ...

Lifetime contract (like torch's pinned-memory staging buffers): the arrays of
a batch are zero-copy views of a slot in shared memory and are only valid until
that slot is released, which happens when the next batch is taken, on
:meth:`Ring.release`, on leaving the ``with`` block and on :meth:`Ring.close`.
Copy them (``np.array(a)``, ``t.clone()``) or move them to the device
(``t.to("cuda")``) before asking for the next batch. After release the producer
overwrites the slot; the arrays cannot be revoked zero-copy, so using them
afterwards silently reads another batch. Accessing a released :class:`Batch`
object itself raises ``RuntimeError``.

A ``Ring`` is not thread-safe and must not be shared across ``fork``.
"""

from __future__ import annotations

import mmap
import os
import re
import struct
import sys
import time
import weakref

import numpy as np

from . import _futex
from ._futex import (FULL_FENCE, fence, futex_wait, futex_wake, load_u32, load_u64, store_u32,
                     store_u64)

_less = np.less
_not_equal = np.not_equal
_greater = np.greater
_monotonic_ns = time.monotonic_ns

__all__ = [
    "Batch",
    "Cursor",
    "Field",
    "KeyedJagged",
    "ProducerDiedError",
    "ProducerError",
    "ProducerHungError",
    "Ragged",
    "Ring",
    "RingBusyError",
    "RingError",
    "RingFormatError",
    "RingVersionError",
    "WeightedKeyedJagged",
    "inspect",
]
from .format import (  # noqa: F401  (re-exported: lastmile.ring is the public module)
    MAGIC, FORMAT_MAJOR, FORMAT_MINOR, PAGE, SEQ_EMPTY, MAX_SLOTS, MAX_FIELDS, MIN_ENTRY_SIZE,
    MESSAGE_MAX, _GEOMETRY, OFF_TAIL, OFF_DATA_FUTEX, OFF_PRODUCER_WAITING,
    OFF_PRODUCER_HEARTBEAT, OFF_STATE, OFF_ENDED, OFF_HEAD, OFF_SPACE_FUTEX, OFF_CONSUMER_WAITING,
    OFF_CONSUMER_HEARTBEAT, OFF_CONSUMER_PID, OFF_MESSAGE_LEN, OFF_MESSAGE, STATE_RUNNING,
    STATE_END, STATE_ERROR, _STATE_NAMES, _SCHEMA_HEAD, _FIELD, KIND_DENSE, KIND_RAGGED,
    FIELD_NULLABLE, FIELD_UTF8, FIELD_WEIGHTED, ROLE_WEIGHTS, DTYPE_FLOAT32, _SLOT_HEADER, SLOT_HEADER_SIZE, _TENSOR, TENSOR_ENTRY_SIZE,
    ROLE_DENSE, ROLE_VALUES, ROLE_OFFSETS, ROLE_VALIDITY, ROLE_LENGTHS, KIND_JAGGED, KeyedJagged,
    WeightedKeyedJagged, BATCH_LAST_IN_EPOCH, BATCH_PADDED,
    PAYLOAD_ALIGN, PLACE_SLOT, PLACE_ARENA, ARENA_HEADER_SIZE, DTYPES, DTYPE_INT64, DTYPE_UINT8, DTYPE_BFLOAT16, _NAME_RE, _FLOCK,
    _HAVE_OFD, RingError, RingFormatError, RingVersionError, RingBusyError, ProducerDiedError,
    ProducerHungError, ProducerError, Ragged, Cursor, Field, fnv1a64, ring_dir, ring_path,
    _lock_free, _try_lock, _unlock, _message, _age, _fmt_age, _Geometry, _parse_schema,
    _expected_tensors,
)
from ._ringfile import (  # noqa: F401  (inspect is re-exported: lastmile.ring is the public module)
    _Leftover, _Unfinished, _check_trusted, _describe_consumer, _leftover, inspect, open_arena,
)

SPIN_SECONDS = 50e-6  # "tens of microseconds" (6.3)
PARK_SECONDS = 0.1  # FUTEX_WAIT timeout, doubles as the liveness period
OPEN_RETRY_SECONDS = 0.25  # "not finished: retry briefly" (6.5.1)
LEFTOVER_POLL_SECONDS = 0.05  # how often open() looks again past a leftover (6.7)

from .batch import Batch, _SlotCache, _torch_conv  # noqa: F401


from ._core import HEARTBEAT_NS, _Core  # noqa: E402

_DEFAULT = object()


class Ring:
    """An attached consumer of a lastmile ring. Create it with :meth:`Ring.open`."""

    def __init__(self, *a, **k):
        raise TypeError("use lastmile.Ring.open(name, dir=None, timeout=..., heartbeat_timeout=...)")

    @classmethod
    def open(cls, name, dir=None, *, timeout=None, heartbeat_timeout=None, generation=None) -> "Ring":
        """Attach to ring ``name`` in ``dir`` (default ``$LASTMILE_SHM_DIR`` or /dev/shm).

        ``timeout`` (seconds): how long to wait for the ring to appear and be
        complete; it is also the default ``timeout`` of :meth:`next` (and so of
        iteration), where it bounds the wait for each batch. ``None`` fails at
        once when the file is missing and waits for batches forever.

        While waiting, a *leftover* of an earlier run under the name counts as
        not there yet (docs/ring-format.md 6.7): a ring with no batch left to
        read whose stream ended, or whose producer died. So a trainer started
        before its producer gets the new ring, not the old one. When
        ``timeout`` ends with only a leftover there, it is opened anyway:
        reading it reports its end (or its producer's death) at once, and
        :attr:`leftover` says what it is. Without ``timeout`` nothing is
        waited for and whatever is there is opened.

        ``generation``: the ring's generation when the caller knows it (the
        daemon's attach answer gives it). Then a ring of another generation
        counts as not there yet, and one of this generation is opened even
        if nothing is left to read in it; when ``timeout`` ends, whatever is
        there is opened.
        ``heartbeat_timeout`` (seconds): while waiting for a batch, raise
        :class:`ProducerHungError` if the producer still holds the ring but its
        heartbeat is older than this. ``None`` relies on the lock probe alone.

        Raises ``FileNotFoundError``, :class:`RingFormatError`,
        :class:`RingVersionError`, :class:`RingBusyError` or ``TimeoutError``.
        """
        if sys.byteorder != "little":  # pragma: no cover
            raise RingError("lastmile rings are little-endian; this host is big-endian")
        path = ring_path(name, dir)
        start = time.monotonic()
        deadline = None if timeout is None else start + timeout
        format_deadline = start + (OPEN_RETRY_SECONDS if timeout is None else max(timeout, 0.0))
        while True:
            try:
                core = cls._attach(path, deadline is not None and time.monotonic() < deadline,
                                   generation)
                break
            except _Leftover:
                time.sleep(LEFTOVER_POLL_SECONDS)
                continue
            except FileNotFoundError:
                if deadline is None:
                    raise FileNotFoundError(
                        2, "no lastmile ring %r in %s (is the producer running, and with the "
                           "same LASTMILE_SHM_DIR?)" % (name, os.path.dirname(path)), path) from None
                if time.monotonic() >= deadline:
                    raise TimeoutError("ring %r did not appear in %s within %gs"
                                       % (name, os.path.dirname(path), timeout)) from None
            except _Unfinished as e:
                if time.monotonic() >= format_deadline:
                    raise e.error from None
            time.sleep(0.01)
        self = object.__new__(cls)
        self.name = name
        self.path = path
        self.timeout = timeout
        self.heartbeat_timeout = heartbeat_timeout
        self.leftover = None
        if core.leftover:
            self.leftover = "ring %s is left from an earlier run: %s%s" % (
                path, core.leftover,
                "" if timeout is None else "; no new ring replaced it within %gs" % timeout)
        self._core = core
        self._fields = core.geo.fields
        self._plan = _expected_tensors(self._fields)
        self._field_of = tuple(f for f, _, _ in self._plan)  # tensor index -> field
        # per field: (Field, tensor index, offsets index or -1, validity index
        # or -1); a jagged field's lengths follow its offsets, and its
        # weights, if weighted, its lengths
        layout, tpos, i = [], [], 0
        for pos, f in enumerate(self._fields):
            io = i + 1 if f.kind != "dense" else -1
            iv = i + (2 if io >= 0 else 1) if f.nullable else -1
            layout.append((f, i, io, iv))
            n = 1 + (io >= 0) + (iv >= 0) + (f.kind == "jagged") + f.weighted
            tpos += [pos] * n
            i += n
        self._layout = tuple(layout)
        # For _SlotCache.patch: the tensors of a size of their own in every
        # batch (ragged and jagged values, jagged weights), and the byte
        # ranges of the tensor table that hold every other entry.
        vinfo, runs, start = [], [], 0
        for i, (f, role, dcode) in enumerate(self._plan):
            if role in (ROLE_VALUES, ROLE_WEIGHTS):
                vinfo.append((i, f.name, DTYPES[dcode][2], dcode, "values" if role == ROLE_VALUES else "weights"))
                if start < i * TENSOR_ENTRY_SIZE:
                    runs.append((start, i * TENSOR_ENTRY_SIZE))
                start = (i + 1) * TENSOR_ENTRY_SIZE
        if start < len(self._plan) * TENSOR_ENTRY_SIZE:
            runs.append((start, len(self._plan) * TENSOR_ENTRY_SIZE))
        self._vinfo, self._runs = tuple(vinfo), tuple(runs)
        self._tensor_pos = tuple(tpos)  # tensor index -> field position
        self._spin = SPIN_SECONDS  # adaptive spin before parking (see next())
        self._next_probe = 0.0  # monotonic time of the next liveness probe while waiting
        self._eos = False
        self._finalizer = weakref.finalize(self, _Core.close, core)
        return self

    @staticmethod
    def _attach(path, skip_leftover=False, generation=None) -> _Core:
        # Never follow a symlink planted under the ring's name, and never
        # block on a planted FIFO; what is opened must be a regular file of
        # one link owned by this user or root (docs/daemon-security.md).
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
        mm = arena = None
        try:
            _check_trusted(fd, path)
            size = os.fstat(fd).st_size
            if size < PAGE:
                head = os.pread(fd, 8, 0)
                err = RingFormatError(
                    "%s is truncated (%d bytes, smaller than the %d-byte header page)"
                    % (path, size, PAGE) if head == MAGIC else
                    "%s is not a lastmile ring (bad magic %r; expected %r), or it is not finished"
                    % (path, head, MAGIC))
                raise _Unfinished(err)
            mm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            # 6.5.1: the magic is published last (acquire it before the rest).
            u8 = np.frombuffer(mm, dtype=np.uint8)
            load_u64(u8.ctypes.data)
            del u8
            try:
                geo = _Geometry(mm, size, path)
            except RingFormatError as e:
                if bytes(mm[:8]) != MAGIC:
                    raise _Unfinished(e) from None
                raise
            what = _leftover(mm, fd)
            if skip_leftover and (what if generation is None else geo.generation != generation):
                raise _Leftover(what or "generation %d, not %d" % (geo.generation, generation))
            if not _try_lock(fd, 1):
                pid = struct.unpack_from("<i", mm, OFF_CONSUMER_PID)[0]
                raise RingBusyError(
                    "ring %s already has a consumer (%s); one consumer per ring"
                    % (path, _describe_consumer(pid)), pid=pid)
            if geo.arena_id:  # 8.1: mapped once, for as long as the ring
                arena = open_arena(os.path.dirname(path), geo.arena_id, geo.arena_size, path)
            core = _Core(fd, mm, geo, path, arena)
            core.leftover = what
        except BaseException:
            if arena is not None:
                arena.close()
            if mm is not None:
                try:
                    mm.close()
                except BufferError:  # pragma: no cover
                    pass
            os.close(fd)
            raise
        head, tail = core.head, load_u64(core.a_tail)
        if not head <= tail <= head + geo.slot_count:
            core.close()
            raise RingFormatError("%s: corrupt counters: head %d, tail %d, %d slots"
                                  % (path, head, tail, geo.slot_count))
        # We are the only writer of line 2 now that we hold byte 1.
        store_u32(core.a_consumer_waiting, 0)
        store_u32(core.a_consumer_pid, os.getpid())
        store_u64(core.a_consumer_heartbeat, time.monotonic_ns())
        return core

    # ------------------------------------------------------------------------
    # Properties
    # ------------------------------------------------------------------------
    @property
    def schema(self) -> tuple:
        """The fields, in schema order."""
        return self._fields

    @property
    def fields(self) -> dict:
        return {f.name: f for f in self._fields}

    @property
    def slot_count(self) -> int:
        return self._core.geo.slot_count

    @property
    def slot_size(self) -> int:
        return self._core.geo.slot_size

    @property
    def generation(self) -> int:
        return self._core.geo.generation

    @property
    def version(self) -> tuple:
        return (self._core.geo.major, self._core.geo.minor)

    @property
    def producer_pid(self) -> int:
        return self._core.geo.producer_pid

    @property
    def closed(self) -> bool:
        return self._core.closed

    @property
    def head(self) -> int:
        """Batches released so far (the next batch to read has this sequence number)."""
        return self._core.head

    @property
    def tail(self) -> int:
        self._check_open()
        return load_u64(self._core.a_tail)

    @property
    def state(self) -> str:
        self._check_open()
        s = load_u32(self._core.a_state)
        return _STATE_NAMES.get(s, "unknown(%d)" % s)

    @property
    def message(self) -> str:
        """The producer's status message (error text, or an end-of-stream summary)."""
        self._check_open()
        load_u32(self._core.a_state)
        return _message(self._core.mm)

    @property
    def ended(self) -> bool:
        """True once iteration reached the end of stream."""
        return self._eos

    def _check_open(self):
        if self._core.closed:
            raise ValueError("ring %s is closed" % self.name)

    # ------------------------------------------------------------------------
    # Consuming
    # ------------------------------------------------------------------------
    def __iter__(self):
        return self

    def __next__(self) -> Batch:
        b = self.next()
        if b is None:
            raise StopIteration
        return b

    def iter_torch(self, device=None, *, staging="host", pool=3):
        """Iterate batches as torch tensors (``batch.torch()``).

        With a CUDA ``device`` the tensors are on it, staged through the
        registered ring (one async copy per batch; :mod:`lastmile.cuda`,
        ``staging="off"`` copies each tensor with ``.to(device)`` instead;
        ``staging="device"`` takes them from lastmiled's device slots when
        the ring announces them: :mod:`lastmile.devstage`)."""
        if device is None:
            while True:
                b = self.next()
                if b is None:
                    return
                yield b.torch()
        from .cuda import stager

        st = stager(self, device, staging=staging, pool=pool)
        try:
            while True:
                st.before_next()  # the held slot's copy is done before next() releases it
                b = self.next()
                if b is None:
                    return
                yield st.stage(b)
        finally:
            st.close()

    def release(self) -> None:
        """Hand the current batch's slot back to the producer now."""
        if not self._core.closed:
            self._core.release()

    def next(self, timeout=_DEFAULT):
        """Release the previous batch and return the next one, or ``None`` at end of stream.

        Blocks while the ring is empty (spin ~50 us, then sleep on the futex in
        100 ms steps, probing the producer's liveness each time). ``timeout``
        (default: the one given to :meth:`open`) raises ``TimeoutError``.
        Raises :class:`ProducerError` (the producer failed),
        :class:`ProducerDiedError` (it died), :class:`ProducerHungError`
        (heartbeat too old) -- always only after every published batch was
        delivered -- and :class:`RingFormatError` on a protocol violation.
        """
        core = self._core
        if core.closed:
            raise ValueError("ring %s is closed" % self.name)
        core.check_owner()
        if core.held is not None:
            core.release_held()  # the heartbeat is stored when the next batch is taken
        if self._eos:
            return None
        h = core.head
        a_tail = core.a_tail
        tail = load_u64(a_tail)
        if tail > h:  # fast path: a batch is ready
            return self._take(h, tail)
        store_u64(core.a_consumer_heartbeat, _monotonic_ns())
        if timeout is _DEFAULT:
            timeout = self.timeout
        a_state = core.a_state
        start = time.monotonic()
        deadline = None if timeout is None else start + timeout
        spin_until = start + self._spin
        while True:
            tail = load_u64(a_tail)
            if tail > h:
                # Adaptive spin (6.3 step 1 only buys latency): spin the full
                # SPIN_SECONDS again when the batch came within that time,
                # otherwise halve it (down to none), so a consumer that is
                # always ahead of its producer does not burn CPU spinning
                # in vain before every park.
                if time.monotonic() - start <= SPIN_SECONDS:
                    self._spin = SPIN_SECONDS
                else:
                    self._spin = self._spin / 2 if self._spin > 4e-6 else 0.0
                return self._take(h, tail)
            state = load_u32(a_state)
            if state != STATE_RUNNING:
                if load_u64(a_tail) > h:  # published just before the state change
                    continue
                return self._finish(state, h)
            now = time.monotonic()
            if now < spin_until:
                continue
            # Slow path: liveness (at most every PARK_SECONDS, across calls),
            # timeout, then park on data_futex (6.3).
            if now >= self._next_probe:
                if self._producer_gone(h):
                    continue  # it published or changed state before dying
                self._next_probe = now + PARK_SECONDS
            if deadline is not None and now >= deadline:
                raise TimeoutError(
                    "no batch from ring %s within %gs (waiting for batch %d; producer pid %d is "
                    "alive, heartbeat %s)" % (self.name, timeout, h, core.geo.producer_pid,
                                               _fmt_age(_age(load_u64(core.a_producer_heartbeat)))))
            store_u32(core.a_consumer_waiting, 1)
            try:
                fence()  # the waiting flag is visible before we re-check
                v = load_u32(core.a_data_futex)
                if load_u64(a_tail) > h or load_u32(a_state) != STATE_RUNNING:
                    continue
                wait = PARK_SECONDS
                if deadline is not None:
                    wait = min(wait, max(deadline - now, 0.0))
                futex_wait(core.a_data_futex, v, wait)
            finally:
                store_u32(core.a_consumer_waiting, 0)

    def _producer_gone(self, h) -> bool:
        """Liveness check (6.4). Returns True if the caller should re-check tail/state,
        raises ProducerDiedError / ProducerHungError, or returns False (alive)."""
        core = self._core
        if _lock_free(core.fd, 0):
            # The kernel dropped the lock after the producer's last store; re-read.
            tail = load_u64(core.a_tail)
            if tail > h or load_u32(core.a_state) != STATE_RUNNING:
                return True
            age = _age(load_u64(core.a_producer_heartbeat))
            hint = ""
            try:
                if os.stat(self.path).st_ino != os.fstat(core.fd).st_ino:
                    hint = "; a new ring has since been created at %s: reopen it" % self.path
            except OSError:
                pass
            raise ProducerDiedError(
                "lastmile producer (pid %d) of ring %s died after publishing %d batches; all of "
                "them were delivered (last heartbeat %s)%s"
                % (core.geo.producer_pid, self.name, tail, _fmt_age(age), hint),
                published=tail, pid=core.geo.producer_pid, heartbeat_age=age)
        if self.heartbeat_timeout is not None:
            age = _age(load_u64(core.a_producer_heartbeat))
            if age is not None and age > self.heartbeat_timeout:
                tail = load_u64(core.a_tail)
                raise ProducerHungError(
                    "lastmile producer (pid %d) of ring %s holds the ring but its heartbeat is "
                    "%.1fs old (heartbeat_timeout=%gs); %d batches were published and delivered"
                    % (core.geo.producer_pid, self.name, age, self.heartbeat_timeout, tail),
                    published=tail, pid=core.geo.producer_pid, heartbeat_age=age)
        return False

    def _finish(self, state, h):
        core = self._core
        if state == STATE_END:
            self._eos = True
            return None
        if state == STATE_ERROR:
            msg = _message(core.mm)
            raise ProducerError(msg or "lastmile producer failed (no message)", published=h,
                                pid=core.geo.producer_pid)
        raise RingFormatError("ring %s: unknown producer state %d" % (self.name, state))

    def _take(self, h, tail) -> Batch:
        core = self._core
        geo = core.geo
        n = geo.slot_count
        if tail - h > n:
            raise RingFormatError("protocol violation in ring %s: tail %d is more than %d slots "
                                  "ahead of head %d" % (self.name, tail, n, h))
        k = h % n
        so = geo.data_offset + k * geo.slot_size
        seq = load_u64(core.base + so)  # acquire: the slot's contents are visible after this
        if seq != h:
            raise RingFormatError(
                "protocol violation in ring %s: slot %d has seq %s, expected %d (tail %d); "
                "not reading it" % (self.name, k, "empty" if seq == SEQ_EMPTY else seq, h, tail))
        batch = self._parse(h, k, so)
        core.held = h
        now = _monotonic_ns()
        if now - core.hb >= HEARTBEAT_NS:
            core.hb = now
            store_u64(core.a_consumer_heartbeat, now)
        return batch

    def _bad(self, h, what):
        return RingFormatError("ring %s, batch %d (slot %d): %s"
                               % (self.name, h, h % self._core.geo.slot_count, what))

    def _parse(self, h, k, so) -> Batch:
        """Validate slot ``k`` (6.5 step 5) and return its batch, reusing the slot's cache."""
        core = self._core
        mm = core.mm
        _, used, rows, count, epoch, bidx, rank, bflags, pad = _SLOT_HEADER.unpack_from(mm, so)
        if pad:  # 5.1: at most rows, and only in a padded batch
            if pad > rows or not bflags & BATCH_PADDED:
                raise self._bad(h, "pad_rows %d in a batch of %d rows with batch_flags 0x%x"
                                % (pad, rows, bflags))
        elif bflags & BATCH_PADDED:
            if core.geo.minor >= 1:
                raise self._bad(h, "padded batch (batch_flags 0x%x) with pad_rows 0" % bflags)
            pad = None  # format x.0: the count is not written
        if used > core.geo.slot_size:
            raise self._bad(h, "used_bytes %d > slot_size %d" % (used, core.geo.slot_size))
        if count != len(self._plan):
            raise self._bad(h, "tensor_count %d, schema needs %d" % (count, len(self._plan)))
        tend = SLOT_HEADER_SIZE + count * TENSOR_ENTRY_SIZE
        if tend > used:
            raise self._bad(h, "tensor table (%d entries) exceeds used_bytes %d" % (count, used))
        # One copy of the table; everything below is validated from these bytes,
        # never re-read from shared memory.
        table = mm[so + SLOT_HEADER_SIZE : so + tend]
        c = core.cache[k]
        if c is None or c.rows != rows or (
                c.table != table and not c.patch(table, used, self._vinfo, self._runs, mm, so,
                                                 core.geo.slot_size)):
            c = self._build(c, h, so, rows, used, table)
            core.cache[k] = c
        elif c.max_end > used:
            for i, end in enumerate(c.ends):
                if end > used:
                    off = end - _TENSOR.unpack_from(table, i * TENSOR_ENTRY_SIZE)[11]
                    raise self._bad(h, "tensor %d of field %r: offset %d + nbytes %d > used_bytes %d"
                                    % (i, self._field_of[i].name, off, end - off, used))
        # Per batch: ragged offsets (their contents change with every batch).
        for name, nv, o, o1, o0, buf in c.rchecks:
            if o[0] != 0 or o[-1] != nv or (buf is not None and buf[_less(o1, o0, out=buf).argmax()]):
                raise self._bad(h, "offsets of ragged field %r are not 0 <= non-decreasing <= %d "
                                   "(first %d, last %d)" % (name, nv, o[0], o[-1]))
        # Per batch, format x.1: null rows of ragged fields are empty (4).
        for name, o1, o0, v, buf in c.nchecks:
            # buf = (o1 != o0) > v, that is a non-empty row & not valid, without allocating
            if _greater(_not_equal(o1, o0, out=buf), v, out=buf).any():
                i = int(buf.argmax())
                raise self._bad(h, "row %d of ragged field %r is null but holds %d values (a null "
                                   "row is empty)" % (i, name, o1[i] - o0[i]))
        return Batch(self, self._fields, c.data, c.valid, rows, h,
                     Cursor(epoch, bidx, rank, bool(bflags & BATCH_LAST_IN_EPOCH)), bflags,
                     False, None, c, pad)

    def _build(self, old, h, so, rows, used, table) -> _SlotCache:
        """Validate the entries of ``table`` that differ from ``old``'s and build a new cache."""
        mm = self._core.mm
        plan = self._plan
        count = len(plan)
        tab = np.frombuffer(table, dtype="<u8").reshape(count, 8)
        reuse = old is not None and old.rows == rows
        if reuse:
            # Entries are compared as whole 64-byte rows: only those that differ
            # are validated and rebuilt, the others were validated for this
            # slot with the same rows (used_bytes is re-checked per batch).
            otab = np.frombuffer(old.table, dtype="<u8").reshape(count, 8)
            todo = (tab != otab).any(1).nonzero()[0].tolist()
            arrs, ends = list(old.arrs), list(old.ends)
        else:
            todo = range(count)
            arrs, ends = [None] * count, [0] * count
        changed = {}  # field position -> Field, for the fields to rebuild
        tpos = self._tensor_pos
        for i in todo:
            f, role, dcode = plan[i]
            fi, r, dt, ndim, place, reserved, s0, s1, s2, s3, off, nbytes = _TENSOR.unpack_from(
                table, i * TENSOR_ENTRY_SIZE)
            if fi != f.index or r != role or dt != dcode:
                raise self._bad(h, "tensor %d is (field %d, role %d, dtype %d), expected (%d, %d, %d) "
                                   "for field %r" % (i, fi, r, dt, f.index, role, dcode, f.name))
            if not 1 <= ndim <= 4:
                raise self._bad(h, "tensor %d of field %r has ndim %d" % (i, f.name, ndim))
            shape = (s0, s1, s2, s3)[:ndim]
            if role == ROLE_DENSE:
                want = (rows,) + f.dims
            elif role in (ROLE_VALUES, ROLE_WEIGHTS):
                want = (s0,) if ndim == 1 else None  # weights: as many as the values, checked below
            elif role == ROLE_OFFSETS:
                want = (rows * max(len(f.keys), 1) + 1,)
            elif role == ROLE_LENGTHS:
                want = (rows * len(f.keys),)
            else:
                want = (rows,)
            if shape != want:
                raise self._bad(h, "tensor %d of field %r has shape %s, expected %s"
                                % (i, f.name, list(shape), list(want) if want else "[V]"))
            _, npdt, size = DTYPES[dt]
            nel = 1
            for d in shape:
                nel *= d
            if nbytes != nel * size:
                raise self._bad(h, "tensor %d of field %r: nbytes %d != %d elements x %d"
                                % (i, f.name, nbytes, nel, size))
            if reserved:
                raise self._bad(h, "tensor %d of field %r: reserved bytes 6-7 are 0x%04x, want 0"
                                % (i, f.name, reserved))
            if place == PLACE_ARENA:
                arr = self._arena_view(h, i, f, role, shape, npdt, size, off, nbytes)
                ends[i] = 0  # used_bytes counts the slot only (8.2)
            elif place != PLACE_SLOT:
                raise self._bad(h, "tensor %d of field %r: place %d, want 0 (the slot) or 1 (the "
                                   "unit arena, format 4.2)" % (i, f.name, place))
            else:
                if off % PAYLOAD_ALIGN:
                    raise self._bad(h, "tensor %d of field %r: offset %d is not 256-byte aligned"
                                    % (i, f.name, off))
                if off + nbytes > used:
                    raise self._bad(h, "tensor %d of field %r: offset %d + nbytes %d > used_bytes %d"
                                    % (i, f.name, off, nbytes, used))
                arr = np.ndarray(shape, dtype=npdt, buffer=mm, offset=so + off)
                ends[i] = off + nbytes
            if role == ROLE_VALIDITY:
                arr = arr.view(np.bool_)
            arrs[i] = arr
            changed[tpos[i]] = f
        c = _SlotCache()
        c.rows = rows
        c.table = table
        c.vbase = dict(old.vbase) if reuse else {}
        c.arrs = arrs
        c.ends = ends
        c.max_end = max(ends) if ends else 0
        c.fields = self._fields
        if reuse:
            data, valid, ragged = dict(old.data), dict(old.valid), dict(old.ragged)
            tdata, tvalid = dict(old.tdata), dict(old.tvalid)
            dirty = dict.fromkeys(old.tdirty)
            dirty.update(dict.fromkeys(changed.values()))
        else:
            data, valid, ragged, tdata, tvalid = {}, {}, {}, {}, {}
            dirty = dict.fromkeys(self._fields)
        layout = self._layout
        for k in sorted(changed):  # schema order: first build inserts keys in order
            f, i, io, iv = layout[k]
            name = f.name
            if io < 0:
                data[name] = arrs[i]
            else:
                vals, offs = arrs[i], arrs[io]
                if f.weighted:
                    w = arrs[io + 2]
                    if len(w) != len(vals):
                        raise self._bad(h, "jagged field %r has %d weights for %d values" % (name, len(w), len(vals)))
                    data[name] = WeightedKeyedJagged(f.keys, vals, arrs[io + 1], offs, w)
                elif f.kind == "jagged":
                    data[name] = KeyedJagged(f.keys, vals, arrs[io + 1], offs)
                else:
                    data[name] = Ragged(vals, offs)
                buf = np.empty(len(offs) - 1, np.bool_) if len(offs) > 2 else None
                ragged[name] = (name, len(vals), offs, offs[1:], offs[:-1], buf)
            if iv >= 0:
                valid[name] = arrs[iv]
        c.data, c.valid, c.ragged = data, valid, ragged
        c.rchecks = tuple(ragged.values())
        c.nchecks = ()
        if self._core.geo.minor >= 1:
            c.nchecks = tuple((f.name, arrs[io][1:], arrs[io][:-1], arrs[iv], np.empty(rows, np.bool_))
                              for f, i, io, iv in layout if f.kind == "ragged" and iv >= 0)
        c.tdata, c.tvalid, c.tdirty = tdata, tvalid, tuple(dirty)
        return c

    def _arena_view(self, h, i, f, role, shape, npdt, size, off, nbytes):
        """The view of a place-1 tensor (docs/ring-format.md 8.2): in the ring's
        arena, a dense, values or weights tensor, aligned to its dtype, within
        the arena's data. Read-only, as the arena is mapped."""
        arena = self._core.arena
        if arena is None:
            raise self._bad(h, "tensor %d of field %r lies in a unit arena (place 1), and the ring "
                               "names none" % (i, f.name))
        if role not in (ROLE_DENSE, ROLE_VALUES, ROLE_WEIGHTS):
            raise self._bad(h, "tensor %d of field %r (role %d) lies in the unit arena; only dense, "
                               "values and weights tensors may (offsets, lengths and validity are "
                               "always in the slot)" % (i, f.name, role))
        n = len(arena)
        if off % size or off < ARENA_HEADER_SIZE or off > n or nbytes > n - off:
            raise self._bad(h, "tensor %d of field %r at arena offset %d, %d bytes: not %d-byte "
                               "aligned within the arena's data (%d to %d)"
                            % (i, f.name, off, nbytes, size, ARENA_HEADER_SIZE, n))
        return np.ndarray(shape, dtype=npdt, buffer=arena, offset=off)

    # ------------------------------------------------------------------------
    # Closing
    # ------------------------------------------------------------------------
    def close(self) -> None:
        """Release the current slot, detach (drop the consumer lock) and unmap."""
        self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        if self._core.closed:
            return "<lastmile.Ring %r closed>" % self.name
        return "<lastmile.Ring %r head=%d tail=%d slots=%dx%d state=%s>" % (
            self.name, self.head, self.tail, self.slot_count, self.slot_size, self.state)
