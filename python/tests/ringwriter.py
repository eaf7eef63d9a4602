"""A pure-Python *producer* of lastmile rings, for tests (docs/ring-format.md 1.0, and 1.1
with ``version=(1, 1)``: pad_rows, ended_unix_ns; 4.2 with ``arena=ArenaWriter(...)``: the
unit arena, payloads of the fields named by ``write_slot(in_arena=...)`` in the arena).

Written from the format document independently of lastmile.ring (only the
futex/atomic primitives of lastmile._futex are shared). It follows the
producer side of the protocol: build the file under ``.NAME.tmp-PID``,
``posix_fallocate`` it, lock byte 0, write header + schema + empty slots, the
magic last, rename; publish = payloads, tensor table, slot header, ``seq``
(release), ``tail`` (release), ``data_futex += 1``, wake the consumer if it
says it is waiting; block while ``tail - head == slot_count``.

``producer_main(cfg, ...)`` runs a scripted producer in a child process (used
with multiprocessing's spawn context so record locks behave as across
processes).
"""

from __future__ import annotations

import collections
import fcntl
import mmap
import os
import random
import struct
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
from lastmile import _futex  # noqa: E402

MAGIC = b"LMRING\x00\x01"
MAGIC_U64 = int.from_bytes(MAGIC, "little")
EMPTY = 2**64 - 1
TWO_MIB = 2 << 20

DTYPE_CODES = {"bool": 1, "uint8": 2, "int8": 3, "int16": 4, "int32": 5, "int64": 6,
               "float16": 7, "bfloat16": 8, "float32": 9, "float64": 10}
NP_DTYPES = {"bool": np.bool_, "uint8": np.uint8, "int8": np.int8, "int16": np.int16,
             "int32": np.int32, "int64": np.int64, "float16": np.float16, "bfloat16": np.uint16,
             "float32": np.float32, "float64": np.float64}

FieldSpec = collections.namedtuple("FieldSpec", "name kind dtype dims nullable text",
                                   defaults=((), False, False))

_FLOCK = struct.Struct("@hhqqi4x")


def fnv1a64(data: bytes) -> int:
    h = 0xCBF29CE484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001B3) % (1 << 64)
    return h


def _round_up(n, a):
    return (n + a - 1) // a * a


def _lock0(fd, mode):
    """Write-lock byte 0: 'ofd' (F_OFD_SETLK) or 'posix' (fcntl.lockf, F_SETLK)."""
    if mode == "ofd":
        fcntl.fcntl(fd, fcntl.F_OFD_SETLK, _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, 0, 1, 0))
    else:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)


def schema_block(fields) -> bytes:
    out = bytearray(struct.pack("<II", len(fields), 96))
    for f in fields:
        name = f.name.encode("utf-8")
        assert len(name) <= 63
        dims = list(f.dims) + [0] * (3 - len(f.dims))
        flags = (1 if f.nullable else 0) | (2 if f.text else 0)
        out += struct.pack("<64sBBBBI3Q", name, 0 if f.kind == "dense" else 1,
                           DTYPE_CODES[f.dtype], len(f.dims) if f.kind == "dense" else 0,
                           flags, 0, *dims)
    return bytes(out)


ARENA_MAGIC = b"LMARENA\x01"


class ArenaWriter:
    """A job's unit arena (docs/ring-format.md 8): ``DIR/arena+HEX``, a 4096-byte
    header (magic, id, data size) and ``size`` data bytes. ``put`` copies a
    payload in and returns its offset from the start of the file: the next
    free offset aligned to ``align`` (wrapping to the start of the data when
    the end is reached, which tests size so that no unreleased batch is hit).
    ``header_id``, ``header_size`` and ``magic`` write another header than the
    true one (tests of the reader's checks)."""

    def __init__(self, dir, size=1 << 20, arena_id=None, magic=ARENA_MAGIC, header_id=None,
                 header_size=None):
        self.dir = dir
        self.size = size
        self.id = arena_id if arena_id is not None else random.getrandbits(64) | 1
        self.path = os.path.join(dir, "arena+%016x" % self.id)
        self.magic, self.header_id, self.header_size = magic, header_id, header_size
        self.mm = None
        self.pos = 4096

    def create(self):
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            os.ftruncate(fd, 4096 + self.size)
            self.mm = mmap.mmap(fd, 4096 + self.size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
        struct.pack_into("<QQ", self.mm, 8, self.id if self.header_id is None else self.header_id,
                         self.size if self.header_size is None else self.header_size)
        self.mm[0:8] = self.magic  # written last
        return self

    def put(self, a, align):
        pos = _round_up(self.pos, align)
        if pos + a.nbytes > 4096 + self.size:
            pos = 4096
        assert pos + a.nbytes <= 4096 + self.size, "arena too small for one payload"
        self.mm[pos : pos + a.nbytes] = a.tobytes()
        self.pos = pos + a.nbytes
        return pos

    def remove(self):
        if self.mm is not None:
            self.mm.close()
            self.mm = None
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


class RingWriter:
    """Producer of one ring. ``create()`` it, ``publish()`` batches, ``finish()``/``fail()``, ``close()``."""

    def __init__(self, name, dir, fields, slot_count=4, slot_size=64 << 10, lock="ofd",
                 version=(1, 0), heartbeat=True, magic=MAGIC, schema_hash=None, arena=None,
                 arena_ref=None):
        self.name = name
        self.dir = dir
        self.path = os.path.join(dir, name)
        self.fields = [f if isinstance(f, FieldSpec) else FieldSpec(*f) for f in fields]
        self.slot_count = slot_count
        self.slot_size = slot_size
        self.lock = lock
        self.version = version
        self.heartbeat = heartbeat
        self.magic = magic
        self.schema_hash = schema_hash
        # format 4.2: the ArenaWriter this ring names (line 0 bytes 88-103);
        # arena_ref=(id, size) writes those bytes as given instead
        self.arena = arena
        self.arena_ref = arena_ref
        if arena_ref is None and arena is not None:
            self.arena_ref = (arena.id, arena.size)
        self.tail = 0
        self.park = 0.1  # FUTEX_WAIT timeout while the ring is full
        self.fd = None
        self.mm = None
        self._hb_stop = threading.Event()
        self._hb_thread = None

    # -- creation -------------------------------------------------------------
    def create(self):
        schema = schema_block(self.fields)
        header_size = 4096 + _round_up(len(schema), 4096)
        data_offset = header_size
        if self.slot_size % TWO_MIB == 0:
            data_offset = _round_up(data_offset, TWO_MIB)
        size = data_offset + self.slot_count * self.slot_size
        tmp = os.path.join(self.dir, ".%s.tmp-%d" % (self.name, os.getpid()))
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            os.posix_fallocate(fd, 0, size)
            _lock0(fd, self.lock)
            mm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            self._base = np.frombuffer(mm, np.uint8).ctypes.data  # mapping is never closed while used
            with open("/proc/self/stat") as f:
                start = int(f.read().rsplit(")", 1)[1].split()[19])
            struct.pack_into("<HHIIIQQQIIQiIQQ", mm, 8, self.version[0], self.version[1],
                             header_size, self.slot_count, 0, self.slot_size, data_offset,
                             random.getrandbits(64), 4096, len(schema),
                             fnv1a64(schema) if self.schema_hash is None else self.schema_hash,
                             os.getpid(), 0, start, time.time_ns())
            mm[4096 : 4096 + len(schema)] = schema
            if self.arena_ref is not None:
                struct.pack_into("<QQ", mm, 88, *self.arena_ref)
            self.data_offset = data_offset
            self.mm, self.fd = mm, fd
            for k in range(self.slot_count):
                _futex.store_u64(self._base + self.slot_off(k), EMPTY)
            self._beat()
            # magic last, release store
            _futex.store_u64(self._base, int.from_bytes(self.magic, "little"))
            self._replace_stale()
            os.rename(tmp, self.path)
        except BaseException:
            os.close(fd)
            os.unlink(tmp)
            self.fd = self.mm = None
            raise
        if self.heartbeat:
            self._hb_thread = threading.Thread(target=self._hb_loop, daemon=True)
            self._hb_thread.start()
        return self

    def _replace_stale(self):
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            return
        try:
            r = fcntl.fcntl(fd, fcntl.F_OFD_GETLK, _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, 0, 1, 0))
            if _FLOCK.unpack(r)[0] != fcntl.F_UNLCK:
                pid = struct.unpack_from("<i", os.pread(fd, 4, 64))[0]
                raise FileExistsError("ring %s is in use by producer pid %d" % (self.path, pid))
        finally:
            os.close(fd)

    def slot_off(self, k):
        return self.data_offset + k * self.slot_size

    # -- words ----------------------------------------------------------------
    def _u64(self, off):
        return _futex.load_u64(self._base + off)

    def _u32(self, off):
        return _futex.load_u32(self._base + off)

    def _beat(self):
        _futex.store_u64(self._base + 144, time.monotonic_ns())

    def _hb_loop(self):
        while not self._hb_stop.wait(0.05):
            if self.mm is None:
                return
            self._beat()

    def stop_heartbeat(self):
        self._hb_stop.set()
        if self._hb_thread is not None:
            self._hb_thread.join()

    @property
    def head(self):
        return self._u64(256)

    def _bump_data_futex(self):
        _futex.store_u32(self._base + 136, self._u32(136) + 1)
        _futex.fence()  # full barrier: conditional wake allowed (6.1 step 5)
        if self._u32(268) == 1:
            _futex.futex_wake(self._base + 136, 1)

    def wait_space(self, timeout=60.0):
        """6.1 step 1 with the sleep of 6.3 on space_futex."""
        deadline = time.monotonic() + timeout
        while self.tail - self.head >= self.slot_count:
            if time.monotonic() > deadline:
                raise TimeoutError("test producer: no space for %s" % timeout)
            _futex.store_u32(self._base + 140, 1)
            _futex.fence()
            v = self._u32(264)
            if self.tail - self.head < self.slot_count:
                _futex.store_u32(self._base + 140, 0)
                break
            _futex.futex_wait(self._base + 264, v, self.park)
            _futex.store_u32(self._base + 140, 0)
            self._beat()

    # -- publishing -----------------------------------------------------------
    def write_slot(self, columns, rows, valid=None, epoch=0, batch_index=0, rank=0, last=False,
                   padded=False, stop_after_payloads=None, pad_rows=0, in_arena=()):
        """Fill slot ``tail % N`` (6.1 step 2) without publishing it.

        ``columns``: name -> ndarray ``[rows, *dims]`` (dense) or ``(values, offsets)``
        (ragged). ``valid``: name -> bool/uint8 ``[rows]`` for nullable fields.
        ``stop_after_payloads=k`` writes only the first k payloads and returns
        (simulates a producer dying mid-write). ``in_arena``: names of fields
        whose dense tensor or values lie in the unit arena (place 1, aligned
        to their dtype's size only), not in the slot.
        """
        valid = valid or {}
        tensors = []  # (field, role, dtype_code, array)
        for i, f in enumerate(self.fields):
            code = DTYPE_CODES[f.dtype]
            if f.kind == "dense":
                a = np.ascontiguousarray(columns[f.name], dtype=NP_DTYPES[f.dtype])
                assert a.shape == (rows,) + tuple(f.dims), (f.name, a.shape)
                tensors.append((i, 0, code, a))
            else:
                vals, offs = columns[f.name]
                vals = np.ascontiguousarray(vals, dtype=NP_DTYPES[f.dtype]).reshape(-1)
                offs = np.ascontiguousarray(offs, dtype=np.int64)
                tensors.append((i, 1, code, vals))
                tensors.append((i, 2, 6, offs))
            if f.nullable:
                v = np.ascontiguousarray(valid[f.name], dtype=np.uint8)
                tensors.append((i, 3, 2, v))
        if in_arena:
            assert self.arena is not None, "in_arena needs a ring with an ArenaWriter"
        # tensor index -> arena offset, for the payloads in the arena
        arena_at = {n: self.arena.put(t[3], t[3].itemsize) for n, t in enumerate(tensors)
                    if t[1] in (0, 1) and self.fields[t[0]].name in in_arena}
        pos = _round_up(64 + 64 * len(tensors), 256)
        layout = [0] * len(tensors)
        # Payloads in table order, or (``stable``, as lastmile's Go producer
        # does) every fixed-size one first and the ragged values after them.
        order = [n for n in range(len(tensors)) if n not in arena_at]
        if getattr(self, "stable", False):
            order.sort(key=lambda n: tensors[n][1] == 1)
        used = 64 + 64 * len(tensors)
        for n in order:
            layout[n] = pos
            used = pos + tensors[n][3].nbytes
            pos = _round_up(used, 256)
        if used > self.slot_size:
            raise ValueError("batch needs %d bytes, slot_size is %d" % (used, self.slot_size))
        so = self.slot_off(self.tail % self.slot_count)
        mm = self.mm
        for n, ((fi, role, code, a), off) in enumerate(zip(tensors, layout)):
            if stop_after_payloads is not None and n >= stop_after_payloads:
                return
            if n not in arena_at:
                mm[so + off : so + off + a.nbytes] = a.tobytes()
        for n, ((fi, role, code, a), off) in enumerate(zip(tensors, layout)):
            shape = list(a.shape) + [0] * (4 - a.ndim)
            place = 1 if n in arena_at else 0
            struct.pack_into("<HBBBB2x4QQQ8x", mm, so + 64 + 64 * n, fi, role, code, a.ndim, place,
                             *shape, arena_at.get(n, off), a.nbytes)
        flags = (1 if last else 0) | (2 if padded else 0)
        # pad_rows (1.1) at slot offset 48; a 1.0 producer leaves it 0
        struct.pack_into("<QIIQQIII12x", mm, so + 8, used, rows, len(tensors), epoch,
                         batch_index, rank, flags, pad_rows)

    def commit(self):
        """6.1 steps 3-5 for the slot filled by write_slot."""
        s = self.tail
        _futex.store_u64(self._base + self.slot_off(s % self.slot_count), s)  # seq (release)
        _futex.store_u64(self._base + 128, s + 1)  # tail (release)
        self.tail = s + 1
        self._bump_data_futex()
        return s

    def publish(self, columns, rows, **kw):
        self.wait_space()
        self.write_slot(columns, rows, **kw)
        return self.commit()

    def _set_state(self, state, message):
        if message:
            m = message.encode("utf-8")[:1020]
            struct.pack_into("<I", self.mm, 512, len(m))
            self.mm[516 : 516 + len(m)] = m
        if self.version[1] >= 1:
            _futex.store_u64(self._base + 160, time.time_ns())  # ended_unix_ns (1.1)
        _futex.store_u32(self._base + 152, state)
        self._bump_data_futex()

    def finish(self, message=""):
        self._set_state(1, message)

    def fail(self, message):
        self._set_state(2, message)

    def close(self, unlink=False, unmap=False):
        """Close the descriptor. Python's mmap keeps a duplicate of it, which
        shares the open file description and so its byte-0 lock: the lock
        drops only with ``unmap=True`` (or when the mapping is collected)."""
        self.stop_heartbeat()
        if unlink:
            os.unlink(self.path)
        if self.fd is not None:
            os.close(self.fd)  # drops the byte-0 lock, with the mapping's duplicate
            self.fd = None
        if unmap and self.mm is not None:
            self.mm.close()
            self.mm = None


# ---------------------------------------------------------------------------
# Deterministic test content
# ---------------------------------------------------------------------------

ALL_FIELDS = [
    FieldSpec("id", "dense", "int64"),
    FieldSpec("x", "dense", "float32", (3,)),
    FieldSpec("img", "dense", "uint8", (2, 2, 2)),
    FieldSpec("flag", "dense", "bool"),
    FieldSpec("h", "dense", "bfloat16", (2,)),
    FieldSpec("f16", "dense", "float16"),
    FieldSpec("tokens", "ragged", "int32"),
    FieldSpec("text", "ragged", "uint8", text=True),
    FieldSpec("score", "dense", "float64", nullable=True),
    FieldSpec("tags", "ragged", "int16", nullable=True),
]


def rows_for(seq):
    return (5, 1, 7, 0, 3)[seq % 5]


def bf16_bits(x):
    return (np.asarray(x, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)


def text_row(seq, i):
    return "row-%d-%d-é%s" % (seq, i, "ü" * (i % 3))


def make_batch(seq, fields=ALL_FIELDS):
    """Columns, validity and row count of batch ``seq`` (what the consumer must see)."""
    B = rows_for(seq)
    r = np.arange(B)
    cols, valid = {}, {}
    for f in fields:
        n = f.name
        if n == "id":
            cols[n] = seq * 1000 + r
        elif n == "x":
            cols[n] = (seq + r[:, None] * 0.5 + np.arange(3)[None, :]).astype(np.float32)
        elif n == "img":
            cols[n] = ((seq * 7 + np.arange(B * 8)) % 251).astype(np.uint8).reshape(B, 2, 2, 2)
        elif n == "flag":
            cols[n] = (r + seq) % 2 == 0
        elif n == "h":
            cols[n] = bf16_bits((seq + r[:, None] + np.array([0.5, 0.25])).astype(np.float32))
        elif n == "f16":
            cols[n] = (r / 4 + seq).astype(np.float16)
        elif n == "tokens":
            lens = (r + seq) % 4
            cols[n] = (np.arange(lens.sum(), dtype=np.int32) + seq,
                       np.concatenate([[0], np.cumsum(lens)]))
        elif n == "text":
            rows = [text_row(seq, i).encode("utf-8") for i in range(B)]
            cols[n] = (np.frombuffer(b"".join(rows), np.uint8),
                       np.concatenate([[0], np.cumsum([len(x) for x in rows])]))
        elif n == "score":
            v = (r + seq) % 3 != 0
            cols[n] = np.where(v, r * 1.5 + seq, 0.0)
            valid[n] = v
        elif n == "tags":
            lens = np.where((r + seq) % 2 == 0, 2, 0)
            cols[n] = (np.arange(lens.sum(), dtype=np.int16) - 3,
                       np.concatenate([[0], np.cumsum(lens)]))
            valid[n] = lens > 0
        elif n == "t_ns":
            cols[n] = np.zeros(B, np.int64)
        else:
            raise KeyError(n)
    return cols, valid, B


def cursor_for(seq, per_epoch=4):
    return dict(epoch=seq // per_epoch, batch_index=seq % per_epoch, rank=3,
                last=(seq % per_epoch) == per_epoch - 1, padded=seq == 2)


# ---------------------------------------------------------------------------
# Child-process entry point
# ---------------------------------------------------------------------------


def producer_main(cfg, created=None, halted=None):
    """Scripted producer. cfg keys:

    name, dir, fields (list of FieldSpec tuples, default ALL_FIELDS), slot_count,
    slot_size, lock ('ofd'|'posix'), version, heartbeat, nbatches, start_delay,
    interval (sleep between batches), park (producer's futex timeout), stamp (write monotonic ns into field t_ns),
    half_write_at (fill batch k's slot partially, then halt), end ('eos', 'error',
    'halt' = keep the ring open without publishing more, 'exit' = close without
    end of stream), message, unlink.
    ``created`` is set once the ring exists; ``halted`` once it stops publishing
    for 'halt'/half-write.
    """
    fields = [FieldSpec(*f) for f in cfg.get("fields", ALL_FIELDS)]
    w = RingWriter(cfg["name"], cfg["dir"], fields, cfg.get("slot_count", 4),
                   cfg.get("slot_size", 64 << 10), lock=cfg.get("lock", "ofd"),
                   version=tuple(cfg.get("version", (1, 0))), heartbeat=cfg.get("heartbeat", True))
    w.park = cfg.get("park", 0.1)
    w.create()
    if created is not None:
        created.set()
    time.sleep(cfg.get("start_delay", 0))
    half = cfg.get("half_write_at")
    for s in range(cfg.get("nbatches", 10)):
        if half is not None and s == half:
            w.wait_space()
            cols, valid, B = make_batch(s, fields)
            # garbage in the slot header too: nothing may be read before seq is published
            w.write_slot(cols, B, valid=valid, **cursor_for(s))
            w.mm[w.slot_off(s % w.slot_count) + 256 : w.slot_off(s % w.slot_count) + 1024] = b"\xee" * 768
            if halted is not None:
                halted.set()
            time.sleep(3600)
        cols, valid, B = make_batch(s, fields)
        if cfg.get("stamp"):
            w.wait_space()
            cols["t_ns"] = np.full(B, time.monotonic_ns(), np.int64)
        w.publish(cols, B, valid=valid, **cursor_for(s))
        if cfg.get("interval"):
            time.sleep(cfg["interval"])
    end = cfg.get("end", "eos")
    if end == "eos":
        w.finish(cfg.get("message", ""))
    elif end == "error":
        w.fail(cfg.get("message", "boom"))
    elif end == "halt":
        if halted is not None:
            halted.set()
        time.sleep(3600)
    w.close(unlink=cfg.get("unlink", False))
