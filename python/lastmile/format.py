"""The lastmile ring format, versions 1.x to 4.x (docs/ring-format.md): constants,
errors, the header and schema parsers and the value types of batches.

The consumer protocol is in lastmile.ring, which re-exports every name here.
"""

from __future__ import annotations

import collections
import fcntl
import operator
import os
import re
import struct
import time

import numpy as np

# --------------------------------------------------------------------------
# Format constants (docs/ring-format.md)
# --------------------------------------------------------------------------

MAGIC = b"LMRING\x00\x01"
FORMAT_MAJOR = 4  # the newest major read: 1.x to 4.x (2.0 adds jagged fields, 3.0 their weights, 4.2 the unit arena)
FORMAT_MINOR = 2  # the newest minor known: x.1 adds pad_rows, ended_unix_ns; x.2 the announcement (docs/ring-format.md 7)
PAGE = 4096
SEQ_EMPTY = 2**64 - 1
MAX_SLOTS = 65536
MAX_FIELDS = 4096
MIN_ENTRY_SIZE = 96
MAX_ENTRY_SIZE = 4096  # entry_size is the stride of the field entries (4)
MESSAGE_MAX = 1020

# line 0: geometry (3.1)
_GEOMETRY = struct.Struct("<8sHHIIIQQQIIQiIQQ")  # 88 bytes from offset 0
# line 0, format 4.x: the unit arena the ring names (8.1), reserved (0) in 1.x-3.x
_ARENA_REF = struct.Struct("<QQ")  # arena_id, arena_size
OFF_ARENA_REF = 88
MAX_FILE_SIZE = 1 << 46  # the Go side's bound on a ring's or arena's size
# line 1: producer (3.2)
OFF_TAIL = 128
OFF_DATA_FUTEX = 136
OFF_PRODUCER_WAITING = 140
OFF_PRODUCER_HEARTBEAT = 144
OFF_STATE = 152
OFF_ENDED = 160  # ended_unix_ns, format x.1
# line 2: consumer (3.3)
OFF_HEAD = 256
OFF_SPACE_FUTEX = 264
OFF_CONSUMER_WAITING = 268
OFF_CONSUMER_HEARTBEAT = 272
OFF_CONSUMER_PID = 280
# status message (3.5)
OFF_MESSAGE_LEN = 512
OFF_MESSAGE = 516

STATE_RUNNING, STATE_END, STATE_ERROR = 0, 1, 2
_STATE_NAMES = {0: "running", 1: "end", 2: "error"}

# schema (4)
_SCHEMA_HEAD = struct.Struct("<II")
_FIELD = struct.Struct("<64sBBBBI3Q")  # 96 bytes
KIND_DENSE, KIND_RAGGED, KIND_JAGGED = 0, 1, 2
FIELD_NULLABLE, FIELD_UTF8, FIELD_WEIGHTED = 1, 2, 4
KEY_ENTRY_SIZE = 64  # a jagged field's key table entry (4.1)
MAX_KEYS = 4096

# slots (5)
_SLOT_HEADER = struct.Struct("<QQIIQQIII")  # 52 bytes used of 64 (pad_rows at 48: format x.1)
SLOT_HEADER_SIZE = 64
# field, role, dtype, ndim, place (4.x; reserved 0 before), reserved (bytes 6-7), shape[4], offset, nbytes
_TENSOR = struct.Struct("<HBBBBH4QQQ8x")  # 64 bytes
TENSOR_ENTRY_SIZE = 64
PLACE_SLOT, PLACE_ARENA = 0, 1  # tensor entry byte 5 (8.2): the payload lies in the slot, or in the arena
ROLE_DENSE, ROLE_VALUES, ROLE_OFFSETS, ROLE_VALIDITY, ROLE_LENGTHS, ROLE_WEIGHTS = 0, 1, 2, 3, 4, 5
BATCH_LAST_IN_EPOCH, BATCH_PADDED = 1, 2
PAYLOAD_ALIGN = 256

# the unit arena (8)
ARENA_MAGIC = b"LMARENA\x01"
ARENA_HEADER_SIZE = PAGE  # arena offsets are from the start of the file; data begins here
_ARENA_HEADER = struct.Struct("<8sQQ")  # magic, arena_id, data size

# code -> (name, numpy dtype used for the view, element size)
DTYPES = {
    1: ("bool", np.dtype(np.bool_), 1),
    2: ("uint8", np.dtype("<u1"), 1),
    3: ("int8", np.dtype("<i1"), 1),
    4: ("int16", np.dtype("<i2"), 2),
    5: ("int32", np.dtype("<i4"), 4),
    6: ("int64", np.dtype("<i8"), 8),
    7: ("float16", np.dtype("<f2"), 2),
    8: ("bfloat16", np.dtype("<u2"), 2),  # raw bits; .torch() views as bfloat16
    9: ("float32", np.dtype("<f4"), 4),
    10: ("float64", np.dtype("<f8"), 8),
}
DTYPE_INT64, DTYPE_UINT8, DTYPE_BFLOAT16, DTYPE_FLOAT32 = 6, 2, 8, 9


_NAME_RE = re.compile(r"[A-Za-z0-9._-]{1,200}\Z")

# struct flock on Linux x86-64 and arm64 (l_type, l_whence, l_start, l_len, l_pid)
_FLOCK = struct.Struct("@hhqqi4x")
_HAVE_OFD = hasattr(fcntl, "F_OFD_SETLK")

# --------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------


class RingError(Exception):
    """Base class of every lastmile ring error."""


class RingFormatError(RingError):
    """The file is not a valid lastmile ring, or the producer broke the protocol."""


class RingVersionError(RingError):
    """The ring's major format version is not one this client reads."""

    def __init__(self, message, found=None, supported=FORMAT_MAJOR):
        super().__init__(message)
        self.found = found
        self.supported = supported


class RingBusyError(RingError):
    """The ring already has a consumer."""

    def __init__(self, message, pid=None):
        super().__init__(message)
        self.pid = pid


class ProducerDiedError(RingError):
    """The producer is gone; every batch it published has been delivered."""

    def __init__(self, message, published=None, pid=None, heartbeat_age=None):
        super().__init__(message)
        self.published = published
        self.pid = pid
        self.heartbeat_age = heartbeat_age


class ProducerHungError(ProducerDiedError):
    """The producer still holds the ring but its heartbeat is older than ``heartbeat_timeout``."""


class ProducerError(RingError):
    """The producer stopped with an error (state 2); ``.message`` is its text."""

    def __init__(self, message, published=None, pid=None):
        super().__init__(message)
        self.message = message
        self.published = published
        self.pid = pid


# --------------------------------------------------------------------------
# Public value types
# --------------------------------------------------------------------------


class Ragged(collections.namedtuple("Ragged", ["values", "offsets"])):
    """A ragged field: row ``i`` is ``values[offsets[i]:offsets[i+1]]``.

    ``offsets`` has ``rows + 1`` int64 entries, starting at 0 (the torchrec
    KeyedJaggedTensor layout). Works for numpy arrays and torch tensors alike.
    """

    __slots__ = ()

    @property
    def rows(self) -> int:
        return len(self.offsets) - 1

    @property
    def lengths(self):
        return self.offsets[1:] - self.offsets[:-1]

    def row(self, i: int):
        if i < 0:
            i += self.rows
        if not 0 <= i < self.rows:
            raise IndexError("row %d out of range for %d rows" % (i, self.rows))
        return self.values[int(self.offsets[i]) : int(self.offsets[i + 1])]


class KeyedJagged(collections.namedtuple("KeyedJagged", ["keys", "values", "lengths", "offsets"])):
    """A jagged field (format 2.0): torchrec's KeyedJaggedTensor layout.

    ``keys`` are the K keys; ``values`` the ids of every key, key-major (all
    of key 0's rows, then key 1's, ...); ``lengths`` has ``K * rows`` int64
    entries, ``lengths[k * rows + i]`` the ids of key ``k`` in row ``i``;
    ``offsets`` their running sum, ``K * rows + 1`` entries from 0.
    ``Batch.kjt(name)`` gives a ``torchrec.sparse.jagged_tensor.KeyedJaggedTensor``
    when torchrec is importable, else this tuple of torch tensors.
    """

    __slots__ = ()

    @property
    def stride(self) -> int:
        """The batch's rows (torchrec's stride)."""
        return len(self.lengths) // len(self.keys) if self.keys else 0

    def key(self, k):
        """``Ragged(values, offsets)`` of one key (a name or an index, negative
        from the end): views, no copy."""
        k = _key_index(self.keys, k)
        b = self.stride
        offs = self.offsets[k * b : (k + 1) * b + 1]
        lo, hi = int(offs[0]), int(offs[-1])
        return Ragged(self.values[lo:hi], offs - lo)


class WeightedKeyedJagged(collections.namedtuple("WeightedKeyedJagged", ["keys", "values", "lengths", "offsets",
                                                                          "weights"])):
    """A jagged field with a float32 weight for every id: a weighted jagged
    field of the ring (format 3.0: a ``jagged`` op whose keys have
    ``weights:``), or ``Batch.kjt(name, weights=...)`` without torchrec.
    torchrec's weighted KeyedJaggedTensor layout, ``weights`` key-major like
    ``values``, 1.0 for the ids of a key without weights."""

    __slots__ = ()

    @property
    def stride(self) -> int:
        """The batch's rows (torchrec's stride)."""
        return len(self.lengths) // len(self.keys) if self.keys else 0

    def key(self, k):
        """``Ragged(values, offsets)`` of one key's ids (a name or an index): views, no copy."""
        return KeyedJagged(*self[:4]).key(k)

    def key_weights(self, k):
        """``Ragged(weights, offsets)`` of one key (a name or an index): views, no copy."""
        k = _key_index(self.keys, k)
        r = self.key(k)
        lo = int(self.offsets[k * self.stride])
        return Ragged(self.weights[lo:lo + len(r.values)], r.offsets)


def _key_index(keys, k):
    """The index of key ``k`` (a name, or an index: negative from the end) of
    a jagged field with ``keys``; KeyError or IndexError saying which exist."""
    if isinstance(k, str):
        try:
            return keys.index(k)
        except ValueError:
            raise KeyError("no key %r in this jagged field (its keys: %s)" % (k, ", ".join(keys))) from None
    i = operator.index(k)  # an int, numpy integer or 0-d integer tensor
    n = len(keys)
    if not -n <= i < n:
        raise IndexError("key %d out of range for %d keys (%s)" % (i, n, ", ".join(keys)))
    return i + n if i < 0 else i


class Cursor(collections.namedtuple("Cursor", ["epoch", "batch_index", "rank", "last_in_epoch"])):
    """Where a batch stands in the job's plan: what a trainer checkpoints (5.1)."""

    __slots__ = ()

    def following(self) -> tuple:
        """``(epoch, batch_index)`` of the batch that comes after this one."""
        if self.last_in_epoch:
            return (self.epoch + 1, 0)
        return (self.epoch, self.batch_index + 1)


class Field:
    """One schema entry (section 4)."""

    __slots__ = ("index", "name", "kind", "dtype_code", "dtype", "np_dtype", "itemsize",
                 "dims", "nullable", "text", "keys", "weighted")

    def __init__(self, index, name, kind, dtype_code, dims, nullable, text, keys=(), weighted=False):
        self.index = index
        self.name = name
        self.kind = kind  # "dense", "ragged" or "jagged"
        self.keys = tuple(keys)  # a jagged field's keys
        self.weighted = weighted  # a jagged field with float32 weights (format 3.0)
        self.dtype_code = dtype_code
        self.dtype, self.np_dtype, self.itemsize = DTYPES[dtype_code]
        self.dims = tuple(dims)  # trailing dimensions of a dense field
        self.nullable = nullable
        self.text = text

    def as_dict(self):
        d = {"name": self.name, "kind": self.kind, "dtype": self.dtype,
             "dims": list(self.dims), "nullable": self.nullable, "text": self.text}
        if self.kind == "jagged":
            d["keys"] = list(self.keys)
            if self.weighted:
                d["weighted"] = True
        return d

    def __repr__(self):
        extra = "".join([", nullable" if self.nullable else "", ", text" if self.text else ""])
        shape = "[B%s]" % "".join(", %d" % d for d in self.dims) if self.kind == "dense" else self.kind
        if self.kind == "jagged":
            shape += " %d keys%s" % (len(self.keys), ", weighted" if self.weighted else "")
        return "Field(%r, %s %s%s)" % (self.name, self.dtype, shape, extra)


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------


def view(u8, off, nbytes, dtype, shape):
    """An array of ``shape`` and ``dtype`` over ``u8[off:off + nbytes]``.

    ``u8`` is a uint8 array made with ``np.frombuffer`` over a mapping: it
    holds a buffer export, and so does every view of it, so the mapping's
    ``close()`` raises ``BufferError`` (and leaves it mapped) while a batch's
    arrays are alive. ``np.ndarray(buffer=mm)`` holds none: closing the ring
    would unmap memory those arrays still point at.
    """
    return u8[off:off + nbytes].view(dtype).reshape(shape)


def fnv1a64(data) -> int:
    """FNV-1a 64 of ``data`` (the schema hash of 3.1)."""
    h = 0xCBF29CE484222325
    for b in bytes(data):
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def ring_dir(dir=None) -> str:
    """The directory rings live in: ``dir``, else ``$LASTMILE_SHM_DIR``, else ``/dev/shm``."""
    if dir is not None:
        return os.fspath(dir)
    return os.environ.get("LASTMILE_SHM_DIR") or "/dev/shm"


def arena_name(arena_id: int) -> str:
    """The file name of the unit arena with id ``arena_id`` (8.1): ``arena+`` and 16 lowercase hex digits."""
    return "arena+%016x" % arena_id


def ring_path(name: str, dir=None) -> str:
    if not isinstance(name, str) or not _NAME_RE.match(name) or name.startswith("."):
        raise ValueError(
            "invalid ring name %r: 1 to 200 characters of [A-Za-z0-9._-], not starting with '.'"
            % (name,))
    return os.path.join(ring_dir(dir), name)


def _lock_free(fd: int, byte: int) -> bool:
    """True when no other process / open file description locks ``byte`` (no lock is taken)."""
    req = _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, byte, 1, 0)
    cmd = fcntl.F_OFD_GETLK if _HAVE_OFD else fcntl.F_GETLK
    res = fcntl.fcntl(fd, cmd, req)
    return _FLOCK.unpack(res)[0] == fcntl.F_UNLCK


def _try_lock(fd: int, byte: int) -> bool:
    """Take a write lock on ``byte`` without blocking; False when someone else holds it.

    An open-file-description lock where the platform has them: it belongs to
    this Ring's descriptor, so closing other descriptors of the same file in
    this process (``inspect``, a second ``Ring.open``) cannot drop it, and a
    second consumer in the same process is refused as well.
    """
    try:
        if _HAVE_OFD:
            fcntl.fcntl(fd, fcntl.F_OFD_SETLK, _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, byte, 1, 0))
        else:  # pragma: no cover
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, byte)
        return True
    except OSError as e:
        if e.errno in (11, 13):  # EAGAIN, EACCES
            return False
        raise


def _unlock(fd: int, byte: int) -> None:
    if _HAVE_OFD:
        fcntl.fcntl(fd, fcntl.F_OFD_SETLK, _FLOCK.pack(fcntl.F_UNLCK, os.SEEK_SET, byte, 1, 0))
    else:  # pragma: no cover
        fcntl.lockf(fd, fcntl.LOCK_UN, 1, byte)


def _message(mm) -> str:
    n = struct.unpack_from("<I", mm, OFF_MESSAGE_LEN)[0]
    n = min(n, MESSAGE_MAX)
    return bytes(mm[OFF_MESSAGE : OFF_MESSAGE + n]).decode("utf-8", "replace")


def _age(ns: int):
    if not ns:
        return None
    return max(0.0, (time.monotonic_ns() - ns) / 1e9)


def _fmt_age(age) -> str:
    return "never" if age is None else "%.1fs ago" % age


class _Geometry:
    """Parsed and validated line 0 plus the schema (6.5 steps 1-4)."""

    def __init__(self, mm, size, path):
        # callers guarantee size >= PAGE
        if bytes(mm[:8]) != MAGIC:
            raise RingFormatError(
                "%s is not a lastmile ring (bad magic %r; expected %r), or it is not finished"
                % (path, bytes(mm[:8]), MAGIC))
        (_, self.major, self.minor, self.header_size, self.slot_count, self.flags,
         self.slot_size, self.data_offset, self.generation, self.schema_offset,
         self.schema_len, self.schema_hash, self.producer_pid, _, self.producer_start,
         self.created_unix_ns) = _GEOMETRY.unpack_from(mm, 0)
        if not 1 <= self.major <= FORMAT_MAJOR:
            raise RingVersionError(
                "%s has ring format version %d.%d; this lastmile client reads formats 1.x to %d.x "
                "only. Upgrade the lastmile Python package (or use a matching producer)."
                % (path, self.major, self.minor, FORMAT_MAJOR),
                found=(self.major, self.minor))

        def bad(what):
            return RingFormatError("%s: invalid ring geometry: %s" % (path, what))

        if not 1 <= self.slot_count <= MAX_SLOTS:
            raise bad("slot_count %d not in 1..%d" % (self.slot_count, MAX_SLOTS))
        if self.slot_size == 0 or self.slot_size % PAGE:
            raise bad("slot_size %d is not a positive multiple of 4096" % self.slot_size)
        if self.schema_offset < PAGE:
            raise bad("schema_offset %d overlaps the header page" % self.schema_offset)
        if not self.schema_offset + self.schema_len <= self.header_size <= self.data_offset:
            raise bad("need schema_offset+schema_len (%d) <= header_size (%d) <= data_offset (%d)"
                      % (self.schema_offset + self.schema_len, self.header_size, self.data_offset))
        if self.data_offset % PAGE:
            raise bad("data_offset %d is not a multiple of 4096" % self.data_offset)
        end = self.data_offset + self.slot_count * self.slot_size
        if end > size:
            raise RingFormatError(
                "%s is truncated: data_offset %d + %d slots x %d bytes = %d > file size %d"
                % (path, self.data_offset, self.slot_count, self.slot_size, end, size))
        self.data_end = end
        # 8.1: the unit arena, named in line 0 of a 4.x ring (reserved bytes before)
        self.arena_id = self.arena_size = 0
        if self.major >= 4:
            self.arena_id, self.arena_size = _ARENA_REF.unpack_from(mm, OFF_ARENA_REF)
            if ((self.arena_id == 0) != (self.arena_size == 0) or self.arena_size % PAGE
                    or self.arena_size > MAX_FILE_SIZE):
                raise bad("arena_id 0x%x with arena_size %d: want both 0 (no arena), or an id with a "
                          "positive multiple of 4096 (at most %d)"
                          % (self.arena_id, self.arena_size, MAX_FILE_SIZE))
        schema = bytes(mm[self.schema_offset : self.schema_offset + self.schema_len])
        h = fnv1a64(schema)
        if h != self.schema_hash:
            raise RingFormatError("%s: schema hash mismatch (header 0x%016x, schema block 0x%016x)"
                                  % (path, self.schema_hash, h))
        self.fields = _parse_schema(schema, path)

    def as_dict(self):
        d = {
            "version": "%d.%d" % (self.major, self.minor),
            "slot_count": self.slot_count,
            "slot_size": self.slot_size,
            "data_offset": self.data_offset,
            "header_size": self.header_size,
            "generation": self.generation,
            "producer_pid": self.producer_pid,
            "producer_start": self.producer_start,
            "created_unix_ns": self.created_unix_ns,
            "schema": [f.as_dict() for f in self.fields],
        }
        if self.arena_id:
            d["arena"] = arena_name(self.arena_id)
            d["arena_size"] = self.arena_size
        return d


def _parse_schema(block: bytes, path) -> tuple:
    def bad(what):
        return RingFormatError("%s: invalid schema: %s" % (path, what))

    if len(block) < _SCHEMA_HEAD.size:
        raise bad("schema_len %d is shorter than its 8-byte head" % len(block))
    count, entry_size = _SCHEMA_HEAD.unpack_from(block, 0)
    if count > MAX_FIELDS:
        raise bad("field_count %d > %d" % (count, MAX_FIELDS))
    if not MIN_ENTRY_SIZE <= entry_size <= MAX_ENTRY_SIZE:
        raise bad("entry_size %d is not in %d..%d" % (entry_size, MIN_ENTRY_SIZE, MAX_ENTRY_SIZE))
    if 8 + count * entry_size > len(block):
        raise bad("%d entries of %d bytes do not fit in schema_len %d" % (count, entry_size, len(block)))
    fields, names = [], set()
    for i in range(count):
        raw, kind, dtype, ndim, flags, kcount, d0, d1, d2 = _FIELD.unpack_from(block, 8 + i * entry_size)
        try:
            name = raw.rstrip(b"\0").decode("utf-8")
        except UnicodeDecodeError:
            raise bad("field %d name is not UTF-8: %r" % (i, raw)) from None
        if not name or b"\0" in raw.rstrip(b"\0") or len(raw.rstrip(b"\0")) > 63:
            raise bad("field %d has an invalid name %r" % (i, raw))
        if name in names:
            raise bad("duplicate field name %r" % name)
        names.add(name)
        if dtype not in DTYPES:
            raise bad("field %r has unknown dtype code %d" % (name, dtype))
        if kind == KIND_DENSE:
            if ndim > 3:
                raise bad("field %r has ndim %d > 3" % (name, ndim))
            dims = (d0, d1, d2)[:ndim]
        elif kind == KIND_RAGGED:
            if ndim != 0:
                raise bad("ragged field %r has ndim %d (must be 0)" % (name, ndim))
            dims = ()
        elif kind == KIND_JAGGED:
            if ndim != 0 or flags & ~FIELD_WEIGHTED or d1 or d2:
                raise bad("jagged field %r has ndim %d, flags %d or dims (must be 0, or flags 4: weighted)"
                          % (name, ndim, flags))
            keys = _parse_keys(block, name, kcount, d0, 8 + count * entry_size, bad)
            dims = ()
        else:
            raise bad("field %r has unknown kind %d" % (name, kind))
        text = bool(flags & FIELD_UTF8)
        if text and (kind != KIND_RAGGED or dtype != DTYPE_UINT8):
            raise bad("field %r has the UTF-8 flag but is not ragged uint8" % name)
        if flags & FIELD_WEIGHTED and kind != KIND_JAGGED:
            raise bad("field %r has the weighted flag but is not jagged" % name)
        kname = {KIND_DENSE: "dense", KIND_RAGGED: "ragged", KIND_JAGGED: "jagged"}[kind]
        fields.append(Field(i, name, kname, dtype, dims, bool(flags & FIELD_NULLABLE), text,
                            keys if kind == KIND_JAGGED else (), bool(flags & FIELD_WEIGHTED)))
    return tuple(fields)


def _parse_keys(block, name, count, off, entries_end, bad):
    """The key table of a jagged field (4.1): ``count`` 64-byte names at ``off``."""
    if not 1 <= count <= MAX_KEYS:
        raise bad("jagged field %r has key_count %d (want 1 to %d)" % (name, count, MAX_KEYS))
    if off < entries_end or off + count * KEY_ENTRY_SIZE > len(block):
        raise bad("jagged field %r: %d keys at offset %d do not lie after the field entries (%d) "
                  "within schema_len %d" % (name, count, off, entries_end, len(block)))
    keys = []
    for j in range(count):
        raw = block[off + j * KEY_ENTRY_SIZE : off + (j + 1) * KEY_ENTRY_SIZE]
        key = raw.rstrip(b"\0")
        if not key or b"\0" in key or len(key) > 63:
            raise bad("jagged field %r: key %d is not 1 to 63 NUL-padded bytes" % (name, j))
        try:
            keys.append(key.decode("utf-8"))
        except UnicodeDecodeError:
            raise bad("jagged field %r: key %d is not UTF-8" % (name, j)) from None
    if len(set(keys)) != len(keys):
        raise bad("jagged field %r has a key twice: %r" % (name, keys))
    return tuple(keys)


def _expected_tensors(fields):
    """The (field, role, dtype) sequence every batch's tensor table must have (5.2)."""
    out = []
    for f in fields:
        if f.kind == "dense":
            out.append((f, ROLE_DENSE, f.dtype_code))
        else:
            out.append((f, ROLE_VALUES, f.dtype_code))
            out.append((f, ROLE_OFFSETS, DTYPE_INT64))
        if f.kind == "jagged":
            out.append((f, ROLE_LENGTHS, DTYPE_INT64))
        if f.weighted:
            out.append((f, ROLE_WEIGHTS, DTYPE_FLOAT32))
        if f.nullable:
            out.append((f, ROLE_VALIDITY, DTYPE_UINT8))
    return tuple(out)


# --------------------------------------------------------------------------
# Batch
# --------------------------------------------------------------------------
