"""A batch read from a ring, and the per-slot cache of its validated views.

lastmile.ring builds these; lastmile.ring re-exports Batch.
"""

from __future__ import annotations

import operator
from itertools import islice

import numpy as np

from ._torchrec import (  # noqa: F401
    TorchrecBatch, _dense_field, _kjt_weights, _torchrec_batch, _torchrec_kjt, register_torchrec,
)
from .format import (  # noqa: F401
    _TENSOR, BATCH_LAST_IN_EPOCH, BATCH_PADDED, DTYPE_BFLOAT16, PAYLOAD_ALIGN, TENSOR_ENTRY_SIZE, Field, Ragged,
    KeyedJagged, view,
    WeightedKeyedJagged,
)


class Batch:
    """One batch: a read-only mapping of field name -> array (or :class:`Ragged`).

    It has the methods of a mapping (``batch[name]``, ``keys()``,
    ``items()``, ``get()``, ``in``, ``dict(batch)``) without being a
    ``collections.abc.Mapping``: torch's DataLoader rebuilds every Mapping as
    a plain ``dict`` (``batch_size=None``, ``pin_memory=True``), which would
    lose ``kjt()``, ``cursor``, ``valid`` and ``row_mask()``. It passes a
    Batch through, and pins it with :meth:`pin_memory`.

    Dense fields are ``[rows, *dims]`` arrays (a ``stack`` op's ``[rows, N]``),
    ragged fields ``Ragged(values, offsets)``, jagged fields (a ``jagged`` op's
    group) ``KeyedJagged(keys, values, lengths, offsets)`` (see :meth:`kjt`);
    bfloat16 fields are uint16 arrays of the raw bits in numpy form
    (``torch()`` turns them into ``torch.bfloat16``).

    Nulls: ``valid[name]`` is the validity mask of every nullable field, a
    ``[rows]`` bool array (a ``torch.bool`` tensor after ``torch()``), True
    for a value and False for a null; ``valid`` has no entry for a field
    that is not nullable. A null row of a dense field holds 0 and a null
    row of a ragged field is empty, so only the mask tells a null from a 0
    or an empty list: ``x[batch.valid["x"]]``, or ``batch.is_null(name)``.

    Padding: with ``batch.last: pad`` the batches that complete an epoch's
    last step end with copies of earlier rows. ``real_rows`` rows are real,
    the last ``pad_rows`` are padding: leave them out of the loss and the
    metrics (``loss[:batch.real_rows]``, or weight by ``batch.row_mask()``).

    The arrays are zero-copy views of the ring slot and are valid only until the
    slot is released (the next batch, ``ring.release()``, ``ring.close()``).

    In a ring that names a unit arena (format 4.2, ``ring: {arena: true}``)
    dense, values and weights arrays may instead be views of the arena, a
    file shared by every rank of the job; they live exactly as long, and
    may be changed in place exactly as, views of the slot.
    """

    __slots__ = ("_data", "_valid", "rows", "seq", "cursor", "flags", "_ring", "_fields",
                 "is_torch", "_numpy", "_cache", "_pad", "__weakref__")

    def __init__(self, ring, fields, data, valid, rows, seq, cursor, flags, is_torch=False,
                 numpy_batch=None, cache=None, pad_rows=None):
        self._cache = cache  # the slot's _SlotCache this batch was built from
        self._ring = ring
        self._fields = fields
        self._data = data
        self._valid = valid
        self.rows = rows
        self.seq = seq
        self.cursor = cursor
        self.flags = flags
        self.is_torch = is_torch
        self._numpy = numpy_batch
        # pad_rows None: 0 for an unpadded batch, unknown for a padded one
        # (a format x.0 ring does not say how many rows are padding)
        if pad_rows is None and not flags & BATCH_PADDED:
            pad_rows = 0
        self._pad = pad_rows

    # Mapping interface --------------------------------------------------
    def __getitem__(self, name):
        self._check()
        return self._data[name]

    def __iter__(self):
        return iter(self._data)

    def __len__(self):
        return len(self._data)

    def __contains__(self, name):
        return name in self._data

    def keys(self):
        return self._data.keys()

    def items(self):
        self._check()
        return self._data.items()

    def values(self):
        self._check()
        return self._data.values()

    def get(self, name, default=None):
        self._check()
        return self._data.get(name, default)

    @property
    def valid(self) -> dict:
        """Field name -> validity mask of every nullable field (views of the
        slot, like the arrays: refused once the batch is released)."""
        self._check()
        return self._valid

    # ------------------------------------------------------------------------
    @property
    def released(self) -> bool:
        """True once the slot behind this batch has been handed back to the producer."""
        r = self._ring
        return r is None or r._core.closed or r._core.head > self.seq

    def _check(self):
        if self.released:
            raise RuntimeError(
                "batch %d was released (a later batch was taken or the ring was closed): its "
                "arrays now alias memory the producer reuses; copy data before taking the next "
                "batch (batch.detach(), or lastmile.Dataset(..., copy=True))" % self.seq)

    @property
    def padded(self) -> bool:
        """Batch flag bit 1: some rows are padding."""
        return bool(self.flags & BATCH_PADDED)

    @property
    def pad_rows(self):
        """How many of the batch's last rows are padding (0 without padding);
        None for a padded batch of a format 1.0/2.0 ring, which does not say."""
        return self._pad

    @property
    def real_rows(self):
        """Rows ``[0, real_rows)`` are real, the rest padding: what a trainer
        counts in its loss and metrics. None when unknown (see ``pad_rows``)."""
        return None if self._pad is None else self.rows - self._pad

    def row_mask(self):
        """A new ``[rows]`` bool array (a torch tensor for a torch batch, on
        the device of its tensors), True for the real rows and False for padding. Raises ``ValueError`` when the
        ring does not say how many rows are padding (format 1.0/2.0)."""
        n = self.real_rows
        if n is None:
            raise ValueError("batch %d is padded, but its ring (format %s) does not say how many "
                             "rows are padding; format 1.1 and 2.1 do (upgrade the producer)"
                             % (self.seq, "1.0 or 2.0"))
        m = np.zeros(self.rows, np.bool_)
        m[:n] = True
        if self.is_torch:
            return self._on_device(m)
        return m

    def is_null(self, name):
        """A new ``[rows]`` bool array (a torch tensor for a torch batch, on
        the device of its tensors): True
        where field ``name`` is null; all False for a field that is not nullable."""
        v = self.valid.get(name)
        if v is None:
            self.field(name)  # KeyError for an unknown name
            n = np.zeros(self.rows, np.bool_)
            if self.is_torch:
                return self._on_device(n)
            return n
        return ~v

    def _on_device(self, a):
        """Numpy array ``a`` as a tensor on the device of this torch batch's
        tensors: a ring batch's are on the CPU, an owned batch's
        (``to(device)``, ``Dataset(device=...)``, CUDA staging) may be on a GPU,
        where a CPU mask would fail ``loss * batch.row_mask()``."""
        import torch

        t = torch.from_numpy(a)
        if self._ring is None:  # an OwnedBatch: its tensors may be elsewhere
            for v in self._data.values():
                x = v if isinstance(v, torch.Tensor) else next(
                    (y for y in v if isinstance(y, torch.Tensor)), None) if isinstance(v, tuple) else None
                if x is not None:
                    if x.device.type != "cpu":
                        t = t.to(x.device)
                    break
        return t

    @property
    def last_in_epoch(self) -> bool:
        return bool(self.flags & BATCH_LAST_IN_EPOCH)

    def field(self, name) -> Field:
        for f in self._fields:
            if f.name == name:
                return f
        raise KeyError("no field %r in this batch (its fields: %s)" % (name, ", ".join(f.name for f in self._fields)))

    def text(self, name, i) -> str:
        """Row ``i`` of a UTF-8 string field, decoded (a copy)."""
        src = self._numpy if self.is_torch else self
        return bytes(src[name].row(i)).decode("utf-8")

    def texts(self, name) -> list:
        """Every row of a UTF-8 string field, decoded (copies)."""
        src = self._numpy if self.is_torch else self
        r = src[name]
        buf = r.values.tobytes()
        offs = r.offsets.tolist()
        return [buf[offs[i] : offs[i + 1]].decode("utf-8") for i in range(len(offs) - 1)]

    def detach(self) -> "Batch":
        """A copy of this batch that owns its arrays, valid after the ring
        moves on (:class:`lastmile.owned.OwnedBatch`)."""
        from .owned import detach

        return detach(self)

    def pin_memory(self, device=None) -> "Batch":
        """A copy of this batch in pinned (page-locked) host memory, as torch
        tensors: what ``DataLoader(pin_memory=True)`` calls. Needs CUDA. For
        a GPU trainer ``Dataset(device="cuda")`` is cheaper: it copies from
        the ring, registered in place, without this extra host copy."""
        from .owned import pin

        return pin(self, device)

    def to(self, device, non_blocking=False, *, copy=False) -> "Batch":
        """This batch's tensors on ``device``, copied (the batch itself on
        the CPU unless ``copy``); see :func:`lastmile.owned.to_device`.
        ``to(device, non_blocking)`` is also torchrec's ``Pipelineable.to``."""
        from .owned import to_device

        return to_device(self, device, non_blocking=non_blocking, copy=copy)

    def record_stream(self, stream) -> None:
        """``Tensor.record_stream(stream)`` on every tensor of this batch on
        a device (its fields' and its validity masks'): the caching
        allocator will not reuse their memory before the work queued on
        ``stream`` so far is done. torchrec's training pipelines call it on
        the batch they move to the GPU on a side stream
        (``torchrec.streamable.Multistreamable``); see docs/python.md,
        "torchrec training pipelines". Tensors on the CPU (and numpy
        arrays) have nothing to record. It keeps no memory alive that the
        batch does not: a ring batch's views are still released by the next
        batch, and refused here after that, like every read."""
        self._check()
        if not self.is_torch or self._ring is not None:
            return  # numpy arrays, or torch views of a host ring slot
        for t in islice(_flat_tensors(self._data, self._valid), 1, None):
            dev = getattr(t, "device", None)  # a part may be None (no weights)
            if dev is not None and dev.type != "cpu":
                t.record_stream(stream)

    def torch(self) -> "Batch":
        """The same batch as zero-copy torch tensors (needs torch)."""
        if self.is_torch:
            return self
        self._check()
        c = self._cache
        if c is not None:
            # Tensors cached per slot alongside the numpy arrays: while this
            # batch is not released the cache is the one it was built from.
            if c.tdirty or c.touched_torch():
                c.fill_torch()
            return Batch(self._ring, self._fields, c.tdata, c.tvalid, self.rows,
                         self.seq, self.cursor, self.flags, True, self, pad_rows=self._pad)
        import torch  # lazily: torch is optional

        conv = _torch_conv
        data = {}
        for f in self._fields:
            v = self._data[f.name]
            if f.kind == "ragged":
                data[f.name] = Ragged(conv(v.values, f.dtype_code), torch.from_numpy(v.offsets))
            elif f.weighted:
                data[f.name] = WeightedKeyedJagged(v.keys, conv(v.values, f.dtype_code), torch.from_numpy(v.lengths),
                                                   torch.from_numpy(v.offsets), conv(v.weights, 9))
            elif f.kind == "jagged":
                data[f.name] = KeyedJagged(v.keys, conv(v.values, f.dtype_code), torch.from_numpy(v.lengths),
                                           torch.from_numpy(v.offsets))
            else:
                data[f.name] = conv(v, f.dtype_code)
        valid = {k: torch.from_numpy(v) for k, v in self.valid.items()}
        return Batch(self._ring, self._fields, data, valid, self.rows, self.seq, self.cursor,
                     self.flags, is_torch=True, numpy_batch=self, pad_rows=self._pad)

    def kjt(self, name, weights=None):
        """Jagged field ``name`` as a ``torchrec.sparse.jagged_tensor.KeyedJaggedTensor``
        when torchrec is importable, else as a :class:`KeyedJagged` of torch
        tensors (``keys, values, lengths, offsets``), zero-copy either way (needs
        torch; valid until the batch is released, like every view).

        A jagged op whose keys have ``weights:`` makes a weighted field (ring
        format 3.0): its KJT carries the ring's float32 weights, key-major, 1.0
        for the ids of keys without weights, zero-copy like the ids.

        ``weights`` makes a weighted KJT of a field without them: a mapping
        from a key to the ragged field that holds its ids' weights, lined up
        id by id, as a map's values are with its keys (``{"scores":
        "scores.value"}`` for a key ``{column: scores.key, key: scores}``).
        The weights of every key, 1.0 for keys not named, are gathered
        key-major into one float32 tensor (one copy per batch: prefer
        ``weights:`` in the jagged op); a named field whose rows are not as
        long as the key's (a ``max_length`` cut, or another column) is a
        ``ValueError``. Given for a weighted field, it replaces the ring's
        weights. Without torchrec a weighted result is a
        :class:`WeightedKeyedJagged`."""
        f = self.field(name)
        if f.kind != "jagged":
            raise TypeError("field %r is %s, not jagged: kjt() reads the group of a jagged op" % (name, f.kind))
        t = self.torch()
        v = t[name]
        w = v.weights if f.weighted else None
        if f.weighted:
            v = KeyedJagged(*v[:4])
        if weights:
            w = _kjt_weights(t, name, v, weights)
        KeyedJaggedTensor = _torchrec_kjt()
        if KeyedJaggedTensor is None:
            return v if w is None else WeightedKeyedJagged(*v, w)
        if w is None:
            return KeyedJaggedTensor(keys=list(v.keys), values=v.values, lengths=v.lengths, offsets=v.offsets,
                                     stride=v.stride)
        return KeyedJaggedTensor(keys=list(v.keys), values=v.values, weights=w, lengths=v.lengths,
                                 offsets=v.offsets, stride=v.stride)

    def torchrec(self, *, dense, sparse, labels):
        """This batch as the input torchrec's models take: a
        ``torchrec.datasets.utils.Batch(dense_features, sparse_features,
        labels)`` when torchrec imports, else a :class:`TorchrecBatch` with
        the same fields and methods (``to``, ``record_stream``,
        ``pin_memory``). ``TrainPipelineSparseDist`` finds the KJT its
        sharded modules' input dist reads as ``batch.sparse_features``.

        ``dense``: a dense field's name or a list of them, their columns
        side by side as one float32 ``[rows, D]`` tensor (a ``[rows]`` field
        is one column); one float32 field is taken as it is, zero-copy, the
        others are cast and concatenated (a copy). ``sparse``: a jagged
        field, as :meth:`kjt`. ``labels``: a dense field, as it is. Nulls
        read as 0 (see ``valid``).

        The tensors are this batch's: a ring batch's are views of its slot,
        valid until the next batch is taken, so move them (``to(device)``,
        which a pipeline calls before it takes the next batch) or copy them
        before (``Dataset(copy=True)`` for a pipeline on the CPU, whose
        ``to("cpu")`` keeps them). A staged batch (``Dataset(device=...)``),
        whose device slot a later batch reuses, is copied on its device
        first."""
        if getattr(self, "_stager", None) is not None:
            from .owned import clone

            t = clone(self)
        else:
            t = self.torch()
        import torch

        cols = []
        for name in [dense] if isinstance(dense, str) else list(dense):
            x = t[_dense_field(t, name, "dense")]
            cols.append(x.reshape(x.shape[0], -1) if x.dim() != 2 else x)
        if not cols:
            raise ValueError("torchrec(dense=[]): name at least one dense field")
        if len(cols) == 1:
            d = cols[0].to(torch.float32)
        else:
            d = torch.cat([c.to(torch.float32) for c in cols], dim=1)
        k = t.kjt(sparse)
        y = t[_dense_field(t, labels, "labels")]
        return _torchrec_batch()(dense_features=d, sparse_features=k, labels=y)

    def __repr__(self):
        state = ", released" if self.released else ""
        pad = ""
        if self.padded:
            pad = ", padding %s" % ("unknown" if self._pad is None else self._pad)
        return "<lastmile.Batch seq=%d rows=%d%s cursor=(%d, %d, rank %d)%s fields=%s%s>" % (
            self.seq, self.rows, pad, self.cursor.epoch, self.cursor.batch_index, self.cursor.rank,
            ", last" if self.last_in_epoch else "", list(self._data), state)


def _torch_conv(arr, code):
    import torch  # lazily: torch is optional

    if code == DTYPE_BFLOAT16:
        return torch.from_numpy(arr.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(arr)


_REQUIRES_GRAD = operator.attrgetter("requires_grad")
_VERSION = operator.attrgetter("_version")


def _flat_tensors(tdata, tvalid):
    """Every tensor of a slot's torch views, those of Ragged and KeyedJagged
    fields' parts included, after a first item: where each part is, by
    (field name, part name), for patch to replace a part in place."""
    where = {}
    flat = [where]
    for name, v in tdata.items():
        if isinstance(v, tuple):
            for attr, x in zip(v._fields, v):
                if not isinstance(x, (list, tuple)):
                    where[name, attr] = len(flat)
                    flat.append(x)
        else:
            flat.append(v)
    flat.extend(tvalid.values())
    return flat


def _touched(t):
    """Whether tensor ``t`` (or any of a Ragged's or KeyedJagged's) is no
    longer as it was built."""
    if t is None:
        return False
    if isinstance(t, tuple):  # Ragged, KeyedJagged, WeightedKeyedJagged
        return any(_touched(x) for x in t if not isinstance(x, (list, tuple)))
    return t.requires_grad or t._version != 0 or t.grad is not None


class _SlotCache:
    """The validated tensor table of one slot and the views built from it.

    A slot's tensor table is usually byte-for-byte the same from one use of the
    slot to the next (same rows, same payload layout), so the numpy arrays (and
    torch tensors) built for it are views of the very same memory: they are
    reused, and only the entries whose 64 bytes changed (typically a ragged
    field's values and the payloads behind it) are validated and rebuilt. What
    depends on the slot's *contents* and not its table is re-checked for every
    batch (``used_bytes`` covers every payload; ragged offsets start at 0, end
    at V and never decrease).

    A batch's ``_cache`` describes that batch while it is not released: a
    cache is rebuilt as a new object, or patched in place (``patch``) only
    when the slot's previous batch was already released. Arrays of an earlier
    batch of the same slot are mostly the same objects as the new batch's:
    like every array of a released batch, they alias whatever the slot holds
    now.
    """

    __slots__ = ("rows", "table", "arrs", "ends", "max_end", "data", "valid",
                 "rchecks", "nchecks", "ragged", "tdata", "tvalid", "tdirty", "fields", "vbase", "vkey",
                 "tflat")

    def patch(self, table, used, vinfo, runs, u8, so, slot_size):
        """Take ``table`` in place if it differs from this cache's only in the
        lengths of ragged values, and return True; return False, changing
        nothing, on any other difference (the caller then rebuilds, validating
        entry by entry).

        This is the common case with lastmile's producer, which gives every
        fixed-size payload a fixed place and puts ragged values after them
        (docs/ring-format.md 5.3): from one batch of a slot to the next only
        the values entries' shape and nbytes change. The new values arrays are
        prefixes of a view of the slot from the values' offset to its end,
        built once per offset, so a batch costs a slice per ragged field
        instead of a validated rebuild. ``vinfo`` lists the values tensors as
        (tensor index, field name, dtype size, dtype code); ``runs`` the byte
        ranges of the table that hold every other entry.

        Mutating in place is safe: the slot's previous batch was released
        before this one was taken (a consumer holds one batch), and a released
        Batch refuses every access.
        """
        old = self.table
        for a, b in runs:
            if table[a:b] != old[a:b]:
                return False
        unpack = _TENSOR.unpack_from
        todo = []
        for i, name, size, code, attr in vinfo:
            e = unpack(table, i * TENSOR_ENTRY_SIZE)
            oe = unpack(old, i * TENSOR_ENTRY_SIZE)
            if e == oe:
                continue
            # e: field, role, dtype, ndim, place, reserved, shape[4], offset, nbytes. Only a
            # payload in the slot is patched: one in the unit arena (place 1, format 4.2; or
            # a values entry that was there) takes the caller's full validation.
            s0, off, nbytes = e[6], e[10], e[11]
            if e[:6] != oe[:6] or e[4] or e[5] or e[7:10] != oe[7:10] or nbytes != s0 * size \
                    or off % PAYLOAD_ALIGN or off + nbytes > used or off + nbytes > slot_size:
                return False
            todo.append((i, name, size, code, s0, off, nbytes, attr))
        for i, name, size, code, attr in vinfo:  # a jagged field's weights: one per value (3 entries before)
            if attr == "weights" and unpack(table, i * TENSOR_ENTRY_SIZE)[6] != \
                    unpack(table, (i - 3) * TENSOR_ENTRY_SIZE)[6]:
                return False
        vbase, data, tdata, ragged = self.vbase, self.data, self.tdata, self.ragged
        for i, name, size, code, s0, off, nbytes, attr in todo:
            base = vbase.get(i)
            if base is None or base[0] != off:
                arr = self.arrs[i]
                n = (slot_size - off) // size
                base = [off, view(u8, so + off, n * size, arr.dtype, (n,)), None]
                vbase[i] = base
            arr = base[1][:s0]
            self.arrs[i] = arr
            self.ends[i] = off + nbytes
            data[name] = data[name]._replace(**{attr: arr})  # Ragged, KeyedJagged or WeightedKeyedJagged
            if attr == "values":
                ragged[name] = (name, s0) + ragged[name][2:]
            t = tdata.get(name)
            if t is not None:
                if base[2] is None:
                    base[2] = _torch_conv(base[1], code)
                new = base[2][:s0]
                tdata[name] = t._replace(**{attr: new})
                if self.tflat is not None:  # the new slice is checked in the old one's place
                    self.tflat[self.tflat[0][name, attr]] = new
        self.table = table
        self.max_end = max(self.ends)
        self.rchecks = tuple(ragged.values())
        return True

    def touched_torch(self):
        """Mark for rebuilding, and say whether there are, fields whose cached
        tensors a step changed as objects: autograd asked of them
        (``requires_grad_``, then a gradient in ``.grad``) or an in-place op
        (``unsqueeze_`` and the like bump ``_version``; the data under them is
        the ring's either way). The slot hands the same objects out again
        ``slots`` batches later, which must come as fresh as the arrays under
        them. The common case, nothing touched, costs two passes over the
        tensors in C: about 15 us a batch of 21 tensors (bench_consume.py),
        against 75 us for the rest of taking it."""
        flat = self.tflat
        if flat is None:
            flat = self.tflat = _flat_tensors(self.tdata, self.tvalid)
        if not any(map(_REQUIRES_GRAD, islice(flat, 1, None))) and not any(map(_VERSION, islice(flat, 1, None))):
            return False
        tdata, tvalid = self.tdata, self.tvalid
        touched = tuple(f for f in self.fields
                        if _touched(tdata.get(f.name)) or (f.nullable and _touched(tvalid.get(f.name))))
        self.tdirty = touched
        return bool(touched)

    def _vconv(self, name, attr, arr, code):
        """The tensor of a values (or weights) array: a prefix of its base's
        tensor where it has a base (``arr`` is then ``base[1][:len(arr)]``),
        so that the slot's later batches slice that tensor (``patch``)
        instead of converting a new view."""
        base = self.vbase.get(self.vkey.get((name, attr)))
        if base is None:
            return _torch_conv(arr, code)
        if base[2] is None:
            base[2] = _torch_conv(base[1], code)
        return base[2][:len(arr)]

    def fill_torch(self):
        """Build the torch views of the fields not converted yet."""
        tdata, tvalid, data, valid = self.tdata, self.tvalid, self.data, self.valid
        for f in self.tdirty:
            name = f.name
            v = data[name]
            if f.kind == "ragged":
                tdata[name] = Ragged(self._vconv(name, "values", v.values, f.dtype_code), _torch_conv(v.offsets, 6))
            elif f.weighted:
                tdata[name] = WeightedKeyedJagged(v.keys, self._vconv(name, "values", v.values, f.dtype_code),
                                                  _torch_conv(v.lengths, 6), _torch_conv(v.offsets, 6),
                                                  self._vconv(name, "weights", v.weights, 9))
            elif f.kind == "jagged":
                tdata[name] = KeyedJagged(v.keys, self._vconv(name, "values", v.values, f.dtype_code),
                                          _torch_conv(v.lengths, 6), _torch_conv(v.offsets, 6))
            else:
                tdata[name] = _torch_conv(v, f.dtype_code)
            if f.nullable:
                tvalid[name] = _torch_conv(valid[name], 1)
        # Dict order stays the schema order: a fresh cache fills every field in
        # order, a rebuilt one replaces keys already there.
        self.tdirty = ()
        self.tflat = None


# --------------------------------------------------------------------------
# Ring
# --------------------------------------------------------------------------
