"""Batches that own their arrays: copies, or tensors on a device.

A :class:`lastmile.Batch` from a ring is a zero-copy view of a ring slot,
valid until the next batch is taken. ``batch.detach()`` and
``batch.to(device)`` (or ``lastmile.Dataset(..., copy=True, device=...)``)
return an :class:`OwnedBatch` instead: the same mapping of names to arrays,
cursor, rows, padding and validity masks, but its arrays are the batch's own and stay
valid for as long as they are kept.

Copies cost memory bandwidth (a host copy of every payload per batch);
keep the zero-copy default when each step is done with its batch before
the next one is taken.
"""

from __future__ import annotations

import contextlib

import numpy as np

from .batch import Batch

__all__ = ["OwnedBatch", "clone", "detach", "pin", "to_device"]


class OwnedBatch(Batch):
    """A :class:`lastmile.Batch` whose arrays are its own (never released)."""

    # False for a batch of views of memory reused later (a staged batch,
    # lastmile.cuda.StagedBatch): detach() copies it then.
    _owns = True

    @property
    def released(self) -> bool:
        return False

    def _check(self):
        pass

    def torch(self) -> "OwnedBatch":
        if self.is_torch:
            return self
        import torch  # lazily: torch is optional

        from .batch import _torch_conv

        codes = {f.name: f.dtype_code for f in self._fields}

        def conv(name):
            code = codes.get(name)  # bfloat16 bits are uint16 in numpy; offsets are int64
            return lambda a: _torch_conv(a, code) if a.dtype == np.uint16 else torch.from_numpy(a)

        data = {n: _map(v, conv(n)) for n, v in self._data.items()}
        valid = {n: torch.from_numpy(v) for n, v in self.valid.items()}
        return _like(self, data, valid, True)

    def text(self, name, i) -> str:
        r = self[name]
        n = len(r.offsets) - 1
        if i < 0:  # as Batch.text (Ragged.row): negative from the end
            i += n
        if not 0 <= i < n:
            raise IndexError("row %d out of range for %d rows" % (i, n))
        a, b = int(r.offsets[i]), int(r.offsets[i + 1])
        return bytes(_host(r.values)[a:b]).decode("utf-8")

    def texts(self, name) -> list:
        r = self[name]
        buf = _host(r.values).tobytes()
        offs = _host(r.offsets).tolist()
        return [buf[offs[i] : offs[i + 1]].decode("utf-8") for i in range(len(offs) - 1)]

    def __repr__(self):
        return Batch.__repr__(self).replace("<lastmile.Batch", "<lastmile.OwnedBatch", 1)


def _host(a):
    """A numpy array of a numpy array or a (CPU or device) tensor."""
    if isinstance(a, np.ndarray):
        return a
    return a.detach().cpu().numpy()


def _map(v, conv):
    """Apply ``conv`` to an array, or to every array of a named tuple
    (Ragged, and any other layout of several arrays)."""
    if isinstance(v, tuple) and hasattr(v, "_fields"):
        return type(v)(*(_map(x, conv) for x in v))
    if isinstance(v, tuple):  # a jagged field's keys: names, not arrays
        return v
    return conv(v)


def _like(batch, data, valid, is_torch):
    return OwnedBatch(None, batch._fields, data, valid, batch.rows, batch.seq, batch.cursor,
                      batch.flags, is_torch, pad_rows=batch.pad_rows)


def detach(batch) -> OwnedBatch:
    """A copy of ``batch`` that owns its arrays (numpy or torch, as ``batch``)."""
    batch._check()
    if isinstance(batch, OwnedBatch) and batch._owns:
        return batch
    if batch.is_torch:
        conv = _clone
    else:
        conv = _copy
    data = {n: _map(v, conv) for n, v in batch._data.items()}
    valid = {n: conv(v) for n, v in batch.valid.items()}
    return _like(batch, data, valid, batch.is_torch)


def clone(batch) -> OwnedBatch:
    """A copy of a torch ``batch`` whose tensors are its own, an
    :class:`OwnedBatch`'s too: a staged batch's tensors are views of a
    device slot that a later batch reuses (lastmile.cuda)."""
    batch._check()
    with _after_staging(batch):
        data = {n: _map(v, _clone) for n, v in batch._data.items()}
        valid = {n: _clone(v) for n, v in batch.valid.items()}
    return _like(batch, data, valid, True)


def pin(batch, device=None) -> OwnedBatch:
    """A copy of ``batch`` whose tensors are in pinned host memory. Tensors
    already on a device (``Dataset(device="cuda")`` under
    ``DataLoader(pin_memory=True)``) are kept as they are: pinning is for
    host memory, and torch refuses to pin them."""
    batch._check()
    if isinstance(batch, OwnedBatch) and not batch._owns:
        return batch  # a staged batch: on the device already, and still refused once its slot is reused
    src = batch.torch()

    def conv(t):
        if t.device.type != "cpu":
            return t
        return t.pin_memory() if device is None else t.pin_memory(device)

    data = {n: _map(v, conv) for n, v in src._data.items()}
    valid = {n: conv(v) for n, v in src.valid.items()}
    return _like(batch, data, valid, True)


def to_device(batch, device, *, non_blocking=False, copy=False) -> Batch:
    """``batch``'s tensors on ``device`` (a torch device or its name).

    The result owns its tensors when they were copied: always for another
    device than the one they are on, and with ``copy=True`` for the CPU
    too. A CPU batch asked for on the CPU without ``copy`` is returned
    itself (its zero-copy views); a staged batch on a GPU is copied back.
    A numpy batch is taken as tensors first. ``non_blocking``: see
    ``torch.Tensor.to``; the copy must have completed (synchronize) before
    the ring's next batch is taken, since its source is the ring slot.
    """
    import torch

    batch._check()
    dev = torch.device(device)
    src = batch.torch()
    if dev.type == "cpu" and not copy and _on_cpu(src, torch):
        return src

    def conv(t):
        return t.to(dev, non_blocking=non_blocking, copy=True)

    with _after_staging(batch):
        data = {n: _map(v, conv) for n, v in src._data.items()}
        valid = {n: conv(v) for n, v in src.valid.items()}
    return _like(src, data, valid, True)


@contextlib.contextmanager
def _after_staging(batch):
    """Around copies of a staged batch (``Dataset(device=...)``,
    lastmile.cuda and lastmile.devstage) queued on another stream than the
    one it was staged on (``_ready_on``, where its copy or lastmiled's
    event was waited for): that stream first waits for the staging stream,
    and the staging stream, whose mark releases the slot when the next
    batch is taken, then waits for the copies. torchrec's TrainPipelineBase
    takes a batch on its default stream and calls ``to(device)`` on its
    memcpy stream."""
    ready = getattr(batch, "_ready_on", None)
    if ready is None:
        yield
        return
    import torch

    cur = torch.cuda.current_stream(ready.device)
    if cur == ready:
        yield
        return
    cur.wait_stream(ready)
    yield
    ready.wait_stream(cur)


def _on_cpu(b, torch):
    """Whether batch ``b``'s tensors are on the CPU (all are on one device)."""
    for v in b._data.values():
        t = _first_tensor(v, torch)
        if t is not None:
            return t.device.type == "cpu"
    return True


def _first_tensor(v, torch):
    """``v`` if a tensor, else the first tensor of a named tuple (Ragged)."""
    if isinstance(v, torch.Tensor):
        return v
    if isinstance(v, tuple):
        for x in v:
            t = _first_tensor(x, torch)
            if t is not None:
                return t
    return None


def _clone(t):
    return t.clone()


def _copy(a):
    return np.array(a, copy=True)


