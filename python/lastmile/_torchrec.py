"""torchrec, where the trainer has it: the KeyedJaggedTensor that
Batch.kjt() returns, the torchrec Batch that Batch.torchrec() builds (or
TorchrecBatch in its place), and the registration of lastmile's batch
classes with torchrec's Pipelineable, which its training pipelines check
a batch against. lastmile never needs torchrec: every function here
looks for it in sys.modules first and tries an import at most once.
"""

from __future__ import annotations

import sys

from .format import Ragged


_TORCHREC_KJT = "torchrec.sparse.jagged_tensor"
_torchrec_missing = False  # an import of torchrec failed: not tried again


def _torchrec_kjt():
    """torchrec's KeyedJaggedTensor, or None without torchrec. A failed
    import costs about 55 us, so it is tried once; a module imported (or
    put in sys.modules) since is still found."""
    global _torchrec_missing
    m = sys.modules.get(_TORCHREC_KJT)
    if m is None and not _torchrec_missing:
        try:
            from torchrec.sparse import jagged_tensor as m
        except ImportError:
            _torchrec_missing = True
        else:
            register_torchrec()
    return getattr(m, "KeyedJaggedTensor", None) if m is not None else None


def _dense_field(t, name, arg):
    f = t.field(name)  # KeyError for an unknown name
    if f.kind != "dense":
        raise TypeError("torchrec(%s=%r): the field is %s, not dense" % (arg, name, f.kind))
    return name


class TorchrecBatch:
    """What :meth:`Batch.torchrec` returns where ``torchrec.datasets.utils``
    does not import: torchrec's ``Batch`` fields (``dense_features``,
    ``sparse_features``: a KeyedJaggedTensor, or without torchrec a
    :class:`KeyedJagged` of tensors, ``labels``) and its Pipelineable
    methods; registered with torchrec's ``Pipelineable`` as
    :class:`Batch` is (:func:`register_torchrec`)."""

    __slots__ = ("dense_features", "sparse_features", "labels")

    def __init__(self, dense_features, sparse_features, labels):
        self.dense_features = dense_features
        self.sparse_features = sparse_features
        self.labels = labels

    def _parts(self):
        return (self.dense_features, self.sparse_features, self.labels)

    def to(self, device, non_blocking=False) -> "TorchrecBatch":
        return TorchrecBatch(*(_each(v, lambda x: x.to(device=device, non_blocking=non_blocking))
                               for v in self._parts()))

    def pin_memory(self) -> "TorchrecBatch":
        return TorchrecBatch(*(_each(v, lambda x: x.pin_memory()) for v in self._parts()))

    def record_stream(self, stream) -> None:
        """``record_stream(stream)`` on every part on a device (a no-op on the CPU)."""
        for v in self._parts():
            for x in (v if _is_named_tuple(v) else (v,)):
                dev = getattr(x, "device", None)
                dev = dev() if callable(dev) else dev  # a KJT's device() is a method
                if dev is not None and dev.type != "cpu":
                    x.record_stream(stream)

    def __repr__(self):
        return "<lastmile.TorchrecBatch dense_features=%s sparse_features=%s labels=%s>" % (
            tuple(getattr(self.dense_features, "shape", ())), type(self.sparse_features).__name__,
            tuple(getattr(self.labels, "shape", ())))


def _is_named_tuple(v):
    return isinstance(v, tuple) and hasattr(v, "_fields")


def _each(v, f):
    """``f`` of ``v``, or of every tensor of a named tuple (KeyedJagged: its
    keys kept)."""
    if _is_named_tuple(v):
        return type(v)(*(x if x is None or isinstance(x, (str, tuple, list)) else f(x) for x in v))
    return f(v)


_TORCHREC_BATCH = "torchrec.datasets.utils"
_torchrec_batch_missing = False


def _torchrec_batch():
    """torchrec.datasets.utils.Batch where torchrec imports (and that
    module with it: it needs iopath), else :class:`TorchrecBatch`."""
    global _torchrec_batch_missing
    m = sys.modules.get(_TORCHREC_BATCH)
    if m is None and not _torchrec_batch_missing and _torchrec_kjt() is not None:
        try:
            from torchrec.datasets import utils as m
        except ImportError:
            _torchrec_batch_missing = True
    return (getattr(m, "Batch", None) or TorchrecBatch) if m is not None else TorchrecBatch


_TORCHREC_STREAMABLE = "torchrec.streamable"
_registered_with = None  # the Pipelineable class Batch is registered with


def register_torchrec() -> bool:
    """Registers :class:`Batch` (so every batch class of lastmile: owned,
    staged) and :class:`TorchrecBatch` as virtual subclasses of ``torchrec.streamable.Pipelineable``,
    which torchrec's training pipelines check a batch against
    (``isinstance``) before ``to(device, non_blocking)`` and
    ``record_stream(stream)``. Only once the trainer has imported torchrec:
    lastmile never imports it for this (torchrec's import is heavy).
    Iterating a ring or a Dataset, and ``kjt()``, call it; call it yourself
    after importing torchrec if batches already came. True when registered."""
    global _registered_with
    m = sys.modules.get(_TORCHREC_STREAMABLE)
    p = getattr(m, "Pipelineable", None) if m is not None else None
    if p is None:
        return False
    if _registered_with is not p:
        from .batch import Batch  # batch imports this module

        p.register(Batch)
        p.register(TorchrecBatch)
        _registered_with = p
    return True


def _kjt_weights(t, name, v, weights):
    """The float32 weights of jagged field v (named name) of torch batch t,
    key-major: key k's from the ragged field weights[k], 1.0 for the others."""
    import torch  # lazily: torch is optional

    unknown = sorted(set(weights) - set(v.keys))
    if unknown:
        raise KeyError("kjt(%r): weights for %s, which the group does not have (its keys: %s)"
                       % (name, ", ".join(map(repr, unknown)), ", ".join(v.keys)))
    b = v.stride
    parts = []
    for k, key in enumerate(v.keys):
        lens = v.lengths[k * b:(k + 1) * b]
        field = weights.get(key)
        if field is None:
            parts.append(torch.ones(int(lens.sum()), dtype=torch.float32, device=v.values.device))
            continue
        try:
            r = t[field]
        except KeyError:
            raise KeyError("kjt(%r): weights of key %r come from %r, which the batch does not have (select the "
                           "ragged field beside the group: select: [..., %s])" % (name, key, field, field)) from None
        if not isinstance(r, Ragged):
            raise TypeError("kjt(%r): weights of key %r come from %r, which is not a ragged field" % (name, key, field))
        if len(r.offsets) != b + 1 or not torch.equal(r.offsets[1:] - r.offsets[:-1], lens):
            raise ValueError("kjt(%r): the rows of %r are not as long as key %r's: the weights must line up with the "
                             "ids (the same map or list of structs; with max_length on the key, give it weights: %s in the jagged op "
                             "so the weights are cut with the ids)" % (name, field, key, field))
        parts.append(r.values[int(r.offsets[0]):int(r.offsets[-1])].to(torch.float32))
    return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.float32, device=v.values.device)
