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

from .batch import Batch, _SlotCache, _torch_conv, register_torchrec  # noqa: F401


from ._core import HEARTBEAT_NS, _Core  # noqa: E402
from ._slots import _SlotParser  # noqa: E402

_DEFAULT = object()


class Ring(_SlotParser):
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
        # tensor index -> element size, and (field, part) -> tensor index,
        # of those tensors: _build views them through a base (_SlotCache.vbase).
        self._vsize = {i: size for i, _, size, _, _ in vinfo}
        self._vkey = {(name, attr): i for i, name, _, _, attr in vinfo}
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
        register_torchrec()  # the trainer's torchrec, if imported: batch.register_torchrec
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
        register_torchrec()
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
