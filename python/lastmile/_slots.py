"""Parsing a ring slot into a :class:`Batch` (docs/ring-format.md 5 and
6.5 step 5, 8.2 for tensors in the unit arena): the part of
:class:`lastmile.ring.Ring` that validates a slot's header and tensor
table and builds the numpy views of its payloads, reusing a slot's views
when its table is unchanged (:class:`lastmile.batch._SlotCache`)."""

from __future__ import annotations

import numpy as np

from .batch import Batch, _SlotCache
from .format import (
    ARENA_HEADER_SIZE, BATCH_LAST_IN_EPOCH, BATCH_PADDED, DTYPES, PAYLOAD_ALIGN, PLACE_ARENA,
    PLACE_SLOT, ROLE_DENSE, ROLE_LENGTHS, ROLE_OFFSETS, ROLE_VALIDITY, ROLE_VALUES, ROLE_WEIGHTS,
    SLOT_HEADER_SIZE, TENSOR_ENTRY_SIZE, _SLOT_HEADER, _TENSOR, Cursor, Field, KeyedJagged, Ragged,
    RingFormatError, WeightedKeyedJagged, view,
)

_less = np.less
_not_equal = np.not_equal
_greater = np.greater


class _SlotParser:
    """Mixed into :class:`lastmile.ring.Ring`: needs ``self._core`` and
    ``self.name``."""

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
                c.table != table and not c.patch(table, used, self._vinfo, self._runs, core.u8, so,
                                                 core.geo.slot_size)):
            c = self._build(c, h, so, rows, used, table)
            core.cache[k] = c
        if c.max_end > used:  # after a rebuild too: its unchanged entries were not re-checked
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
        bases = {}  # tensor index -> new vbase entry
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
                vsize = self._vsize.get(i)
                if vsize is None:
                    arr = view(self._core.u8, so + off, nbytes, npdt, shape)
                else:
                    # A values (or weights) tensor: a prefix of a view from its
                    # offset to the slot's end, which the slot's next batches
                    # reuse (_SlotCache.patch) as long as the offset stays.
                    n = (self._core.geo.slot_size - off) // vsize
                    base = [off, view(self._core.u8, so + off, n * vsize, npdt, (n,)), None]
                    bases[i] = base
                    arr = base[1][:s0]
                ends[i] = off + nbytes
            if role == ROLE_VALIDITY:
                arr = arr.view(np.bool_)
            arrs[i] = arr
            changed[tpos[i]] = f
        c = _SlotCache()
        c.rows = rows
        c.table = table
        vbase = dict(old.vbase) if reuse else {}
        for i in todo:  # a rebuilt tensor keeps a base only if it has a new one
            vbase.pop(i, None)
        vbase.update(bases)
        c.vbase = vbase
        c.vkey = self._vkey
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
        c.tdata, c.tvalid, c.tdirty, c.tflat = tdata, tvalid, tuple(dirty), None
        return c

    def _arena_view(self, h, i, f, role, shape, npdt, size, off, nbytes):
        """The view of a place-1 tensor (docs/ring-format.md 8.2): in the ring's
        arena, a dense, values or weights tensor, aligned to its dtype, within
        the arena's data."""
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
        return view(self._core.arena_u8, off, nbytes, npdt, shape)

    # ------------------------------------------------------------------------
    # Closing
    # ------------------------------------------------------------------------
