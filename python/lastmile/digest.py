"""Digest and summary of a ring's stream, for tests and ``python3 -m lastmile cat``.

The digest matches ``lastmile cat -digest`` (Go): per field, SHA-256 of the
values in stream order (dense tensors and ragged values, raw little-endian
bytes), of the row lengths of ragged fields (int64 little-endian), and of
the validity bytes of nullable fields. It does not depend on how rows were
cut into batches, so a test can compare it with one computed from the input;
except for jagged fields, hashed like ragged ones in each batch's key-major
order (their lengths from the offsets), which the batch size decides, and
their weights, if weighted, in the same order.
"""

import hashlib
import time

import numpy as np

from .ring import KeyedJagged, Ragged, Ring, WeightedKeyedJagged


class _NullHash:
    def update(self, data):
        pass


_NULL = _NullHash()


class Digest:
    """Counts a stream's batches, rows and bytes; with ``hash=True`` also hashes every column."""

    def __init__(self, hash=True):
        self.hashing = hash
        self.batches = 0
        self.rows = 0
        self.bytes = 0
        self.values = 0
        self._h = {}
        self._valid = {}
        self._len = {}
        self._w = {}
        self.nulls = {}
        self.ragged_values = {}
        self.pad = 0  # padding rows (pad_rows), counted in rows too
        self.pad_unknown = 0  # padded batches of a format 1.0 ring: count not written

    def _hash(self, table, name):
        if not self.hashing:
            return _NULL
        h = table.get(name)
        if h is None:
            h = table[name] = hashlib.sha256()
        return h

    def add(self, batch):
        self.batches += 1
        self.rows += batch.rows
        if batch.pad_rows is None:
            self.pad_unknown += 1
        else:
            self.pad += batch.pad_rows
        for name in batch:
            v = batch[name]
            if isinstance(v, (Ragged, KeyedJagged, WeightedKeyedJagged)):
                vals = np.ascontiguousarray(v.values)
                if self.hashing:
                    self._hash(self._h, name).update(vals.view(np.uint8).data if vals.size else b"")
                if self.hashing:
                    lengths = np.diff(v.offsets).astype("<i8")
                    self._hash(self._len, name).update(lengths.tobytes())
                self.bytes += vals.nbytes + v.offsets.nbytes
                if isinstance(v, (KeyedJagged, WeightedKeyedJagged)):
                    self.bytes += v.lengths.nbytes
                if isinstance(v, WeightedKeyedJagged):
                    w = np.ascontiguousarray(v.weights)
                    if self.hashing:
                        self._hash(self._w, name).update(w.view(np.uint8).data if w.size else b"")
                    self.bytes += w.nbytes
                self.ragged_values[name] = self.ragged_values.get(name, 0) + vals.size
            else:
                arr = np.ascontiguousarray(v)
                if self.hashing:
                    self._hash(self._h, name).update(arr.reshape(-1).view(np.uint8).data if arr.size else b"")
                self.bytes += arr.nbytes
            valid = batch.valid.get(name) if hasattr(batch, "valid") else None
            if valid is not None:
                vb = np.ascontiguousarray(valid).astype(np.uint8)
                if self.hashing:
                    self._hash(self._valid, name).update(vb.tobytes())
                self.nulls[name] = self.nulls.get(name, 0) + int(vb.size - vb.sum())
                self.bytes += vb.nbytes

    def field_lines(self):
        """One line per field of the ring (``cat``'s summary, as the Go CLI
        prints it): name, dtype, the shape of a batch's tensor (``[B]``,
        ``[B, 8]`` for a stack of 8) or the values per row of a ragged or
        jagged field, and the nulls of a nullable one."""
        lines = []
        for f in getattr(self, "schema", ()):
            if f.kind == "dense":
                kind = "dense [B%s]" % "".join(", %d" % n for n in f.dims)
            else:
                per_row = self.ragged_values.get(f.name, 0) / max(self.rows, 1)
                keys = ", %d keys" % len(f.keys) if f.kind == "jagged" else ""
                if f.weighted:
                    kind_word = "jagged weighted"
                else:
                    kind_word = f.kind
                kind = "%s%s, %.1f values/row" % (kind_word, keys, per_row)
            nulls = ", %d nulls" % self.nulls.get(f.name, 0) if f.nullable else ""
            lines.append("  %-16s %-8s %s%s" % (f.name, f.dtype, kind, nulls))
        return lines

    def result(self):
        fields = {}
        for name, h in self._h.items():
            d = {"values": h.hexdigest()}
            if name in self._len:
                d["lengths"] = self._len[name].hexdigest()
            if name in self._valid:
                d["valid"] = self._valid[name].hexdigest()
            if name in self._w:
                d["weights"] = self._w[name].hexdigest()
            fields[name] = d
        return {"batches": self.batches, "rows": self.rows, "fields": fields}


def _ready(ring, d, torch, limit):
    """``cat --ready``: the client's own cost per batch, with batches waiting.

    Sleeps (no CPU) until the ring is full, its producer has finished or it
    has published nothing for 200 ms, then
    takes every published batch back to back, converting each to torch
    tensors if asked; only those back-to-back takes are timed, with
    ``time.process_time`` (the whole process's CPU, as the DataLoader
    baseline's main process is measured). The first batch of each burst
    follows a sleep and runs on a cold cache; a ring large enough for the
    whole stream gives one burst. The first batch taken from each slot is
    not timed: it builds and validates the views the slot's later batches
    reuse, once per slot in a run of any length.
    """
    cpu = secs = 0.0
    n = ring.slot_count
    warm = 0  # batches taken untimed (the first use of each slot)
    pt, pc = time.process_time, time.perf_counter
    while limit == 0 or d.batches < limit:
        # Until the ring is full, the producer finished, or it published
        # nothing for 200 ms (it may be lingering until we drain the ring).
        last, quiet = ring.tail, pc()
        while ring.tail - ring.head < n and ring.state == "running":
            time.sleep(0.001)
            if ring.tail != last:
                last, quiet = ring.tail, pc()
            elif pc() - quiet > 0.2:
                if ring.tail > ring.head + (ring._core.held is not None):
                    break
                ring.release()  # a lingering producer ends once we hand back the last batch
        avail = ring.tail - ring.head - (1 if ring._core.held is not None else 0)
        if avail <= 0:
            if ring.state != "running" and ring.tail - ring.head <= 1:
                break
            ring.release()
            continue
        if warm < n:
            k = min(avail, n - warm)
            for _ in range(k):
                b = ring.next(timeout=None)
                if torch:
                    b.torch()
            warm += k
            avail -= k
            if avail == 0:
                continue
        if limit:
            avail = min(avail, limit - d.batches)
        c0, t0 = pt(), pc()
        for _ in range(avail):
            b = ring.next(timeout=None)
            if torch:
                b.torch()
            d.batches += 1
            d.rows += b.rows
        cpu += pt() - c0
        secs += pc() - t0
    d.busy = secs
    return d, secs, cpu


def cat(name, dir=None, *, digest=False, limit=0, timeout=10.0, torch=False, step=0.0, ready=False):
    """Read a ring to its end (or ``limit`` batches).

    Returns the Digest, the wall seconds from the first batch to the end and
    the CPU seconds this process spent meanwhile (``time.process_time``):
    what a trainer pays for its input, per batch. With ``torch`` every batch
    is converted to torch tensors, as a trainer would take it. ``step``
    seconds of sleep after each batch stand in for a training step (sleep
    costs no CPU time), so that batches wait in the ring as they do for a
    trainer whose GPU step is the bottleneck.
    """
    d = Digest(hash=digest)
    d.busy = 0.0  # seconds spent in next() and torch() once batches flow
    with Ring.open(name, dir, timeout=timeout) as ring:
        d.schema = ring.schema
        if ready and not digest:
            return _ready(ring, d, torch, limit)
        start = cpu0 = None
        while limit == 0 or d.batches < limit:
            t0 = time.perf_counter()
            b = ring.next(timeout=None)
            if b is None:
                break
            if start is None:
                start, cpu0 = time.perf_counter(), time.process_time()
                t0 = start
            if torch and not digest:
                # What a trainer does with its input: take the tensors.
                b.torch()
                d.busy += time.perf_counter() - t0
                d.batches += 1
                d.rows += b.rows
                if step:
                    time.sleep(step)
                continue
            d.add(b.torch() if torch else b)
        ring.release()
        if start is None:
            return d, 0.0, 0.0
        return d, time.perf_counter() - start, time.process_time() - cpu0
