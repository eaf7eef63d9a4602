"""lastmile batches in torchrec's training pipelines (TrainPipelineBase,
TrainPipelineSparseDist), against a stand-in "torchrec" package written to
a temporary directory: its Pipelineable/Multistreamable ABCs and a
pipeline loop that makes the calls torchrec's do on a batch
(torchrec/streamable.py; torchrec/distributed/train_pipeline/utils.py
_to_device, _wait_for_batch; train_pipelines.py TrainPipelineBase.progress):
an isinstance check, ``to(device=..., non_blocking=True)`` on a memcpy
stream, ``record_stream(stream)`` before the step, and the next batch taken
before the step on the current one (one batch of prefetch).

Only real torchrec on a GPU shows the streams themselves at work
(docs/python.md, "torchrec training pipelines").
Run: cd python && /usr/bin/python3 -m unittest tests.test_torchrec_pipeline -v
"""

import importlib
import os
import shutil
import sys
import tempfile
import textwrap
import threading
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import lastmile  # noqa: E402
import lastmile.cuda as lmcuda  # noqa: E402
import lastmile.devstage as ds  # noqa: E402
import ringwriter as rw  # noqa: E402
from lastmile.format import Ragged  # noqa: E402
from lastmile.owned import OwnedBatch  # noqa: E402

try:
    import torch
except ImportError:  # pragma: no cover - torch is optional
    torch = None

FAKE = {
    "torchrec/__init__.py": "",
    "torchrec/streamable.py": '''
        import abc

        class Multistreamable(abc.ABC):
            @abc.abstractmethod
            def record_stream(self, stream):
                ...

        class Pipelineable(Multistreamable):
            @abc.abstractmethod
            def to(self, device, non_blocking):
                ...
    ''',
    "torchrec/sparse/__init__.py": "",
    "torchrec/sparse/jagged_tensor.py": '''
        class KeyedJaggedTensor:
            def __init__(self, keys, values, lengths=None, offsets=None, weights=None, stride=None):
                self.keys, self.values, self.lengths, self.offsets = keys, values, lengths, offsets
                self.weights, self.stride = weights, stride
    ''',
    "torchrec/datasets/__init__.py": "",
    "torchrec/datasets/utils.py": '''
        from dataclasses import dataclass

        from torchrec.streamable import Pipelineable

        @dataclass
        class Batch(Pipelineable):
            dense_features: object
            sparse_features: object
            labels: object

            def to(self, device, non_blocking=False):
                return self

            def record_stream(self, stream):
                pass

            def pin_memory(self):
                return self
    ''',
    "torchrec/distributed/__init__.py": "",
    "torchrec/distributed/train_pipeline/__init__.py": '''
        from torchrec.streamable import Multistreamable, Pipelineable

        class Stream:
            """A stand-in for a CUDA stream: only passed along."""

        def _to_device(batch, device, non_blocking):
            assert isinstance(batch, Pipelineable), "%s must implement Pipelineable interface" % type(batch)
            return batch.to(device=device, non_blocking=non_blocking)

        def _wait_for_batch(batch, stream):
            assert isinstance(batch, Multistreamable), "%s must implement Multistreamable interface" % type(batch)
            batch.record_stream(stream)

        class TrainPipelineBase:
            """Takes batch i + 1 from the iterator before the step on batch i,
            whose to(device) was asked for one progress() earlier."""

            def __init__(self, model, device):
                self.model, self.device = model, device
                self.memcpy_stream, self.stream = Stream(), Stream()
                self.cur, self.connected = None, False

            def progress(self, it):
                if not self.connected:
                    self.cur = _to_device(next(it), self.device, non_blocking=True)
                    self.connected = True
                if self.cur is None:
                    raise StopIteration
                nxt = next(it, None)
                _wait_for_batch(self.cur, self.stream)
                out = self.model(self.cur)
                self.cur = None if nxt is None else _to_device(nxt, self.device, non_blocking=True)
                return out
    ''',
}


class _FakeTorchrec:
    """Puts the stand-in torchrec first on sys.path (and out again)."""

    def __enter__(self):
        self.dir = tempfile.mkdtemp(prefix="lm-fake-torchrec-")
        for path, text in FAKE.items():
            p = os.path.join(self.dir, path)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "w") as f:
                f.write(textwrap.dedent(text))
        self.saved = {m: v for m, v in sys.modules.items() if m == "torchrec" or m.startswith("torchrec.")}
        for m in self.saved:
            del sys.modules[m]
        sys.path.insert(0, self.dir)
        importlib.invalidate_caches()
        self.streamable = importlib.import_module("torchrec.streamable")
        self.jagged_tensor = importlib.import_module("torchrec.sparse.jagged_tensor")
        self.pipeline = importlib.import_module("torchrec.distributed.train_pipeline")
        return self

    def __exit__(self, *exc):
        sys.path.remove(self.dir)
        for m in [m for m in sys.modules if m == "torchrec" or m.startswith("torchrec.")]:
            del sys.modules[m]
        sys.modules.update(self.saved)
        shutil.rmtree(self.dir, True)


FIELDS = [f for f in rw.ALL_FIELDS if f.name in ("id", "x", "tokens", "score")]


@unittest.skipIf(torch is None, "needs torch")
class RingCase(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="lm-trec-")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def ring(self, n=4):
        # n > 4 (the slot count) only where the test takes every batch
        w = rw.RingWriter("trec", self.dir, FIELDS, slot_count=4, slot_size=2 << 20)
        w.create()
        self.addCleanup(w.close)

        def produce():
            for s in range(n):
                cols, valid, rows = rw.make_batch(s, FIELDS)
                w.publish(cols, rows, valid=valid, batch_index=s)
            w.finish("done")

        t = threading.Thread(target=produce, daemon=True)
        t.start()
        self.addCleanup(t.join, 10)
        r = lastmile.Ring.open("trec", self.dir, timeout=30)
        self.addCleanup(r.close)
        return r


class PipelineableTests(RingCase):
    def test_batches_pass_torchrecs_pipelineable_check(self):
        with _FakeTorchrec() as fake:
            P, M = fake.streamable.Pipelineable, fake.streamable.Multistreamable
            ring = self.ring(2)
            b = next(iter(ring))
            self.assertIsInstance(b, P)
            self.assertIsInstance(b, M)
            self.assertIsInstance(b.torch(), P)
            self.assertIsInstance(b.to("cpu", copy=True), P)
            self.assertTrue(issubclass(OwnedBatch, P))
            self.assertTrue(issubclass(lmcuda.StagedBatch, P))

    def test_torchrec_imported_after_lastmile_is_registered_when_iteration_starts(self):
        # kjt() imports torchrec lazily, and so does this: lastmile never
        # imports torchrec itself (it is heavy), it registers with the
        # torchrec the trainer imported.
        ring = self.ring(2)
        with _FakeTorchrec() as fake:
            it = iter(ring)
            self.assertIsInstance(next(it), fake.streamable.Pipelineable)

    def test_to_takes_non_blocking_as_torchrecs_abc_declares_it(self):
        ring = self.ring(2)
        b = next(iter(ring)).torch()
        o = b.to("cpu", True, copy=True)  # Pipelineable.to(device, non_blocking)
        self.assertEqual(o["id"].tolist(), b["id"].tolist())

    def test_prefetching_pipeline_on_owned_batches_sees_every_batch_once(self):
        with _FakeTorchrec() as fake:
            ring = self.ring(6)
            seen = []
            pipe = fake.pipeline.TrainPipelineBase(lambda b: seen.append(b["id"].tolist()), "cpu")
            it = (b.detach() for b in ring)
            with self.assertRaises(StopIteration):
                while True:
                    pipe.progress(it)
        self.assertEqual(seen, [rw.make_batch(s, FIELDS)[0]["id"].tolist() for s in range(6)])

    def test_prefetching_pipeline_on_zero_copy_cpu_batches_is_refused_not_corrupted(self):
        # to("cpu") of a CPU batch is the batch itself (as Tensor.to); the
        # pipeline takes the next batch, which releases it, before its step.
        with _FakeTorchrec() as fake:
            ring = self.ring(4)
            pipe = fake.pipeline.TrainPipelineBase(lambda b: b["id"], "cpu")
            with self.assertRaisesRegex(RuntimeError, "released"):
                pipe.progress(iter(ring))

    def test_without_torchrec_batches_still_have_record_stream_and_nothing_is_imported(self):
        ring = self.ring(2)
        b = next(iter(ring))
        self.assertFalse(any(m == "torchrec" or m.startswith("torchrec.") for m in sys.modules))
        self.assertIsNone(b.torch().record_stream(object()))
        self.assertFalse(lastmile.register_torchrec())


class _OnDevice(torch.Tensor if torch is not None else object):
    """A CPU tensor that says it is on cuda:0 and records record_stream calls."""

    @property
    def device(self):
        return torch.device("cuda:0")

    def record_stream(self, stream):
        self.recorded.append(stream)


def _dev(t):
    d = torch.Tensor._make_subclass(_OnDevice, t)
    d.recorded = []
    return d


class RecordStreamTests(RingCase):
    def test_record_stream_records_every_device_tensor(self):
        ring = self.ring(2)
        b = next(iter(ring)).torch()
        data = {"id": _dev(b["id"].clone()), "x": _dev(b["x"].clone()),
                "tokens": Ragged(_dev(b["tokens"].values.clone()), _dev(b["tokens"].offsets.clone()))}
        valid = {"score": _dev(b.valid["score"].clone())}
        o = OwnedBatch(None, b._fields, data, valid, b.rows, b.seq, b.cursor, b.flags, True)
        s = object()
        self.assertIsNone(o.record_stream(s))
        ts = [data["id"], data["x"], data["tokens"].values, data["tokens"].offsets, valid["score"]]
        self.assertEqual([t.recorded for t in ts], [[s]] * len(ts))

    def test_record_stream_of_a_cpu_batch_does_nothing(self):
        ring = self.ring(2)
        b = next(iter(ring))
        self.assertIsNone(b.record_stream(object()))  # a numpy batch too
        self.assertIsNone(b.torch().record_stream(object()))

    def test_record_stream_of_a_released_batch_is_refused(self):
        ring = self.ring(3)
        it = iter(ring)
        b = next(it).torch()
        next(it)
        with self.assertRaisesRegex(RuntimeError, "released"):
            b.record_stream(object())


class DeviceStagedLifetimeTests(RingCase):
    """gpu: {staging: device}: a batch is views of lastmiled's device slot,
    which is released with the ring slot when the next batch is taken."""

    def test_device_staged_batch_is_refused_once_the_next_is_taken(self):
        from test_cuda import FakeCUDA
        from test_devstage import FakeIPC, announce

        w = rw.RingWriter("dev", self.dir, FIELDS, slot_count=4, slot_size=2 << 20, version=(1, 2))
        w.create()
        self.addCleanup(w.close)
        ring = lastmile.Ring.open("dev", self.dir, timeout=30)
        self.addCleanup(ring.close)
        host = lmcuda.HostStaging(ring, "cuda:0", backend=FakeCUDA(ring))
        st = ds.DeviceStaging(ring, "cuda:0", FakeIPC(ring), host, lambda: True)
        self.addCleanup(st.close)
        announce(w.path, 7, b"A")
        for s in range(2):
            cols, valid, rows = rw.make_batch(s, FIELDS)
            w.publish(cols, rows, valid=valid, batch_index=s)

        def take():
            st.before_next()
            return st.stage(ring.next(timeout=10))

        b0 = take()
        self.assertEqual(st.device_batches, 1)
        self.assertFalse(b0.released)
        b0.record_stream(object())
        want = b0["id"].tolist()
        d0 = b0.detach()  # documented as the copy that outlives the slot
        self.assertIsNot(d0, b0)
        b1 = take()
        self.assertTrue(b0.released)
        self.assertFalse(d0.released)
        self.assertEqual(d0["id"].tolist(), want)
        with self.assertRaisesRegex(RuntimeError, "device slot"):
            b0["id"]  # noqa: B018
        with self.assertRaisesRegex(RuntimeError, "device slot"):
            b0.record_stream(object())
        # what a prefetching pipeline keeps instead: a copy, valid on
        self.assertFalse(b1.released)
        kept = b1.to("cpu", copy=True)
        self.assertEqual(kept["id"].tolist(), b1["id"].tolist())
        st.close()
        self.assertTrue(b1.released)
        self.assertEqual(len(kept["id"]), rw.rows_for(1))


class _Stream:
    """A stand-in CUDA stream that logs wait_stream calls."""

    def __init__(self, name, log):
        self.name, self.log, self.device = name, log, torch.device("cuda:0") if torch else None

    def wait_stream(self, other):
        self.log.append("%s waits for %s" % (self.name, other.name))


class StagedOnAnotherStreamTests(RingCase):
    """TrainPipelineBase takes a batch on the default stream and calls its
    to(device) on its memcpy stream: the staged batch is ready (its copy
    done, lastmiled's event passed) on the first, so the copy on the second
    must wait for it; and the staging stream, whose mark releases the device
    slot at the next batch, must come after the copy."""

    def test_to_on_another_stream_waits_for_the_staging_stream_and_the_release_waits_for_the_copy(self):
        from unittest import mock

        from test_cuda import FakeCUDA

        log = []
        default, memcpy = _Stream("default", log), _Stream("memcpy", log)

        class Backend(FakeCUDA):
            def current_stream(self):
                return default

        ring = self.ring(2)
        st = lmcuda.HostStaging(ring, "cuda:0", pool=3, backend=Backend(ring))
        self.addCleanup(st.close)
        st.before_next()
        b = st.stage(ring.next(timeout=10))
        with mock.patch("torch.cuda.current_stream", return_value=memcpy):
            o = b.to("cpu", True, copy=True)
        self.assertEqual(log, ["memcpy waits for default", "default waits for memcpy"])
        self.assertEqual(o["id"].tolist(), b["id"].tolist())
        log.clear()
        with mock.patch("torch.cuda.current_stream", return_value=default):
            b.to("cpu", True, copy=True)  # on the stream it was staged on: nothing to order
        self.assertEqual(log, [])


def _hand_made(rows=3):
    """A CPU torch OwnedBatch with a [rows, 2] float32, a [rows] float64 and
    an int64 label field, and a jagged field of keys a and b."""
    from lastmile.format import Field, KeyedJagged

    fields = [Field(0, "x", "dense", 9, (2,), False, False), Field(1, "d", "dense", 10, (), False, False),
              Field(2, "label", "dense", 6, (), False, False),
              Field(3, "sparse", "jagged", 6, (), False, False, keys=("a", "b"))]
    lengths = torch.tensor([1, 0, 2, 1, 1, 1])
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)])
    data = {"x": torch.arange(rows * 2, dtype=torch.float32).view(rows, 2),
            "d": torch.arange(rows, dtype=torch.float64) / 2,
            "label": torch.arange(rows) % 2,
            "sparse": KeyedJagged(("a", "b"), torch.arange(6), lengths, offsets)}
    return OwnedBatch(None, fields, data, {}, rows, 0, lastmile.Cursor(0, 0, 0, False), 0, True)


@unittest.skipIf(torch is None, "needs torch")
class TorchrecBatchTests(unittest.TestCase):
    """batch.torchrec(dense=, sparse=, labels=): the structure torchrec's
    models take (torchrec.datasets.utils.Batch), whose sparse_features is
    the KJT TrainPipelineSparseDist's input dist reads."""

    def test_torchrec_gives_torchrecs_batch_of_dense_sparse_and_labels(self):
        b = _hand_made()
        with _FakeTorchrec() as fake:
            tb = b.torchrec(dense=["x", "d"], sparse="sparse", labels="label")
            utils = sys.modules["torchrec.datasets.utils"]
            self.assertIsInstance(tb, utils.Batch)
            self.assertIsInstance(tb.sparse_features, fake.jagged_tensor.KeyedJaggedTensor)
        self.assertEqual(tb.sparse_features.keys, ["a", "b"])
        self.assertEqual(tb.dense_features.dtype, torch.float32)
        self.assertEqual(tb.dense_features.tolist(), [[0, 1, 0], [2, 3, 0.5], [4, 5, 1]])
        self.assertEqual(tb.labels.tolist(), [0, 1, 0])

    def test_one_float32_dense_field_is_taken_zero_copy(self):
        b = _hand_made()
        tb = b.torchrec(dense="x", sparse="sparse", labels="label")
        self.assertEqual(tb.dense_features.data_ptr(), b["x"].data_ptr())
        self.assertEqual(tb.labels.data_ptr(), b["label"].data_ptr())

    def test_a_one_column_dense_field_becomes_a_column(self):
        tb = _hand_made().torchrec(dense=["d"], sparse="sparse", labels="label")
        self.assertEqual(tuple(tb.dense_features.shape), (3, 1))

    def test_without_torchrec_the_result_is_a_pipelineable_stand_in(self):
        self.assertNotIn("torchrec", sys.modules)
        b = _hand_made()
        tb = b.torchrec(dense="x", sparse="sparse", labels="label")
        self.assertIsInstance(tb, lastmile.TorchrecBatch)
        self.assertIsInstance(tb.sparse_features, lastmile.KeyedJagged)
        moved = tb.to("cpu", True)
        self.assertEqual(moved.dense_features.tolist(), b["x"].tolist())
        self.assertEqual(moved.sparse_features.lengths.tolist(), b["sparse"].lengths.tolist())
        self.assertIsNone(tb.record_stream(object()))
        self.assertTrue(callable(tb.pin_memory))
        with _FakeTorchrec() as fake:
            lastmile.register_torchrec()
            self.assertIsInstance(tb, fake.streamable.Pipelineable)

    def test_a_staged_batch_is_copied_first_as_its_device_slot_is_reused(self):
        class Stager:
            i, slots = 1, [None] * 3

        h = _hand_made()
        b = lmcuda.StagedBatch(None, h._fields, h._data, {}, h.rows, h.seq, h.cursor, h.flags, True)
        b._stager, b._staged, b._ready_on = Stager(), 0, None
        tb = b.torchrec(dense="x", sparse="sparse", labels="label")
        self.assertEqual(tb.dense_features.tolist(), h["x"].tolist())
        self.assertNotEqual(tb.dense_features.data_ptr(), h["x"].data_ptr())
        self.assertNotEqual(tb.sparse_features.values.data_ptr(), h["sparse"].values.data_ptr())

    def test_unknown_or_wrong_kind_of_field_is_refused(self):
        b = _hand_made()
        with self.assertRaises(KeyError):
            b.torchrec(dense="nope", sparse="sparse", labels="label")
        with self.assertRaisesRegex(TypeError, "jagged"):
            b.torchrec(dense="x", sparse="x", labels="label")
        with self.assertRaisesRegex(TypeError, "dense"):
            b.torchrec(dense="sparse", sparse="sparse", labels="label")


if __name__ == "__main__":
    unittest.main()
