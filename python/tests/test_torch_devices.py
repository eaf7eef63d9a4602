"""Findings of the trainer API review on the torch-facing API (docs/python.md): masks and
weights of a batch that lives on a device, and KeyedJagged.key() indexing.

No ring needed: batches are built directly as lastmile.owned.OwnedBatch,
what Dataset(device=...), batch.to(device) and the CUDA staging hand out.
The "meta" device stands in for a GPU (no data, but a device that is not
the CPU). Run:
cd python && /usr/bin/python3 -m unittest tests.test_torch_devices -v
"""

import os
import sys
import unittest
from unittest import mock

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import lastmile  # noqa: E402
from lastmile import format as fmt  # noqa: E402

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None


def _batch(pad_rows=1):
    """A torch OwnedBatch of 2 rows: jagged "sparse" (keys scores, cat),
    ragged "scores.value" lined up with key scores, nullable dense "x"."""
    from lastmile.owned import OwnedBatch

    t = torch.tensor
    fields = (fmt.Field(0, "sparse", "jagged", 6, (), False, False, ("scores", "cat")),
              fmt.Field(1, "scores.value", "ragged", 9, (), False, False),
              fmt.Field(2, "x", "dense", 9, (), True, False),
              fmt.Field(3, "y", "dense", 9, (), False, False))
    data = {"sparse": lastmile.KeyedJagged(("scores", "cat"), t([10, 11, 12, 7, 8]), t([2, 1, 1, 1]),
                                           t([0, 2, 3, 4, 5])),
            "scores.value": lastmile.Ragged(t([0.5, 0.25, 2.0]), t([0, 2, 3])),
            "x": t([1.0, 2.0]), "y": t([3.0, 4.0])}
    valid = {"x": t([True, False])}
    return OwnedBatch(None, fields, data, valid, 2, 0, fmt.Cursor(0, 0, 0, True),
                      fmt.BATCH_PADDED | fmt.BATCH_LAST_IN_EPOCH, True, pad_rows=pad_rows)


@unittest.skipIf(torch is None, "needs torch")
class DeviceMaskTests(unittest.TestCase):
    """docs/python.md: "weight by batch.row_mask()". On a batch whose tensors
    are on a GPU (Dataset(device="cuda"), batch.to(device)) the mask must be
    there too: loss * batch.row_mask() with a CPU mask and a CUDA loss is
    "Expected all tensors to be on the same device"."""

    def test_row_mask_on_the_batch_device(self):
        b = _batch().to("meta")
        self.assertEqual(b["y"].device.type, "meta")
        self.assertEqual(b.row_mask().device, b["y"].device)

    def test_is_null_on_the_batch_device(self):
        b = _batch().to("meta")
        self.assertEqual(b.is_null("x").device, b["x"].device)  # nullable: ~valid
        self.assertEqual(b.is_null("y").device, b["y"].device)  # not nullable: all False

    def test_cpu_values_unchanged(self):
        b = _batch()
        self.assertEqual(b.row_mask().tolist(), [True, False])
        self.assertEqual(b.is_null("x").tolist(), [False, True])
        self.assertEqual(b.is_null("y").tolist(), [False, False])


@unittest.skipIf(torch is None, "needs torch")
class DeviceKJTWeightsTests(unittest.TestCase):
    """kjt(name, weights=...) on a device batch: the 1.0 weights of the keys
    not named were made on the CPU and torch.cat'ed with the named key's
    weights on the GPU (a RuntimeError on CUDA)."""

    @unittest.skipUnless(torch is not None and torch.cuda.is_available(), "needs CUDA")
    def test_cuda(self):
        b = _batch().to("cuda")
        k = b.kjt("sparse", weights={"scores": "scores.value"})
        self.assertEqual(k.weights.device, b["scores.value"].values.device)
        self.assertEqual(k.weights.tolist(), [0.5, 0.25, 2.0, 1.0, 1.0])

    def test_ones_made_on_the_values_device(self):
        # Without a GPU: every tensor _kjt_weights makes must be asked for on
        # the device of the group's values.
        b = _batch()
        seen = []
        real_ones = torch.ones

        def ones(*a, **kw):
            seen.append(kw.get("device"))
            return real_ones(*a, **kw)

        with mock.patch.object(torch, "ones", ones):
            k = b.kjt("sparse", weights={"scores": "scores.value"})
        self.assertEqual(k.weights.tolist(), [0.5, 0.25, 2.0, 1.0, 1.0])
        self.assertEqual(len(seen), 1)  # key "cat"
        self.assertEqual(seen[0], b["sparse"].values.device)


@unittest.skipIf(torch is None, "needs torch")
class KeyIndexTests(unittest.TestCase):
    """KeyedJagged.key(k) / WeightedKeyedJagged.key_weights(k) with an index:
    out of range it returned an empty 0-row Ragged, and -1 (the last key, as
    Ragged.row(-1) is the last row) an obscure IndexError; a numpy integer
    was looked up as a key name (ValueError)."""

    def setUp(self):
        t = torch.tensor
        self.kj = lastmile.KeyedJagged(("scores", "cat"), t([10, 11, 12, 7, 8]), t([2, 1, 1, 1]), t([0, 2, 3, 4, 5]))
        self.wkj = lastmile.WeightedKeyedJagged(*self.kj, t([0.5, 0.25, 2.0, 1.0, 1.0]))

    def test_out_of_range(self):
        for k in (2, -3):
            with self.subTest(k):
                with self.assertRaisesRegex(IndexError, "key %d out of range for 2 keys" % k):
                    self.kj.key(k)
                with self.assertRaisesRegex(IndexError, "out of range"):
                    self.wkj.key_weights(k)

    def test_negative(self):
        self.assertEqual(self.kj.key(-1).values.tolist(), [7, 8])
        self.assertEqual(self.kj.key(-1).offsets.tolist(), [0, 1, 2])
        self.assertEqual(self.wkj.key_weights(-2).values.tolist(), [0.5, 0.25, 2.0])
        self.assertEqual(self.wkj.key_weights(-1).values.tolist(), [1.0, 1.0])

    def test_numpy_index(self):
        self.assertEqual(self.kj.key(np.int64(1)).values.tolist(), [7, 8])
        self.assertEqual(self.wkj.key_weights(np.int64(0)).values.tolist(), [0.5, 0.25, 2.0])

    def test_unknown_name(self):
        with self.assertRaisesRegex(KeyError, "no key 'nope'.*scores, cat"):
            self.kj.key("nope")


@unittest.skipIf(torch is None, "needs torch")
class DataLoaderPassesBatchTests(unittest.TestCase):
    """README.md: ``DataLoader(ds, batch_size=None)``, then
    ``batch.kjt("sparse")``. A Batch was a Mapping, and torch rebuilds every
    Mapping (default_convert with batch_size=None, pin_memory with
    pin_memory=True) as a plain dict: the README's loop failed at its first
    batch ('dict' object has no attribute 'kjt'), and pinned batches lost
    kjt(), valid, cursor and row_mask(). A Batch now has the mapping methods
    without being a Mapping, so torch passes it through, and pins it with its
    own pin_memory() (Tensor.pin_memory needs CUDA: mocked by a clone)."""

    def test_default_convert_passes_the_batch(self):
        from torch.utils.data._utils.collate import default_convert

        b = _batch()
        self.assertIs(default_convert(b), b)
        self.assertEqual(sorted(b.keys()), ["scores.value", "sparse", "x", "y"])
        self.assertEqual(dict(b)["x"].tolist(), [1.0, 2.0])
        self.assertIn("x", b)
        self.assertIsNone(b.get("nope"))
        self.assertEqual(len(list(b.items())), 4)

    def test_pinned_batch_keeps_its_methods(self):
        from torch.utils.data._utils.pin_memory import pin_memory

        b = _batch()
        with mock.patch.object(torch.Tensor, "pin_memory", lambda self, device=None: self.clone()):
            p = pin_memory(b)
        self.assertIsInstance(p, lastmile.Batch)
        self.assertEqual(p.cursor, b.cursor)
        self.assertEqual(p.row_mask().tolist(), [True, False])
        self.assertEqual(p.valid["x"].tolist(), [True, False])
        self.assertEqual(p["sparse"].key("cat").values.tolist(), [7, 8])
        self.assertIsNot(p["x"], b["x"])
        with open(os.path.join(os.path.dirname(os.path.dirname(HERE)), "docs", "python.md")) as f:
            doc = f.read()
        self.assertNotIn("leave `pin_memory` off", doc)


class OwnedTextTests(unittest.TestCase):
    """OwnedBatch.text(name, -1) (a detached or device batch) gave "" where
    Batch.text(name, -1) gives the last row: offsets[-1]:offsets[0]."""

    def test_negative_row(self):
        from lastmile.owned import OwnedBatch

        f = (fmt.Field(0, "s", "ragged", 2, (), False, True),)
        d = {"s": lastmile.Ragged(np.frombuffer(b"abcde", np.uint8).copy(), np.array([0, 2, 5]))}
        b = OwnedBatch(None, f, d, {}, 2, 0, fmt.Cursor(0, 0, 0, False), 0, False)
        self.assertEqual(b.text("s", -1), "cde")
        self.assertEqual(b.text("s", -2), "ab")
        self.assertEqual(b.texts("s"), ["ab", "cde"])
        for i in (2, -3):
            with self.assertRaisesRegex(IndexError, "out of range for 2 rows"):
                b.text("s", i)


@unittest.skipIf(torch is None, "needs torch")
class KJTErrorTests(unittest.TestCase):
    """Errors of kjt() that say what to do: an unknown field name was a bare
    KeyError('nope'); a weights field the batch does not have (not
    selected, or misspelt) a bare KeyError of its name."""

    def test_unknown_field(self):
        want = "no field 'nope' in this batch \\(its fields: sparse, scores.value, x, y\\)"
        with self.assertRaisesRegex(KeyError, want):
            _batch().kjt("nope")

    def test_weights_field_not_in_batch(self):
        with self.assertRaisesRegex(KeyError, "kjt\\('sparse'\\): weights of key 'scores' come from 'scores.valu', "
                                    "which the batch does not have"):
            _batch().kjt("sparse", weights={"scores": "scores.valu"})


class ReleasedValidityTests(unittest.TestCase):
    """A released Batch refuses batch[name] (its arrays alias what the
    producer writes next), but batch.valid[name] and batch.is_null(name)
    still handed out the slot's validity views: a kept batch's null mask
    silently became a later batch's."""

    def setUp(self):
        import tempfile
        import shutil

        sys.path.insert(0, HERE)
        import ringwriter as rw

        self.dir = tempfile.mkdtemp(prefix="lastmile-torchdev-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        fields = [rw.FieldSpec("id", "dense", "int64"), rw.FieldSpec("score", "dense", "float64", nullable=True)]
        self.w = rw.RingWriter("r", self.dir, fields, slot_count=2, version=(1, 1)).create()
        self.addCleanup(self.w.close)

    def publish(self, seq, ok):
        ok = np.array(ok)
        self.w.publish({"id": np.arange(3) + 10 * seq, "score": np.where(ok, 1.0, 0.0)}, 3,
                       valid={"score": ok}, batch_index=seq)

    def check(self, torch_batches):
        self.publish(0, [True, False, True])
        self.publish(1, [False, True, True])
        with lastmile.Ring.open("r", dir=self.dir, timeout=10) as ring:
            first = ring.next()
            if torch_batches:
                first = first.torch()
            self.assertEqual(first.is_null("score").tolist(), [False, True, False])
            ring.next()
            for what, f in [("valid", lambda: first.valid["score"]), ("is_null", lambda: first.is_null("score"))]:
                with self.subTest(what):
                    with self.assertRaisesRegex(RuntimeError, "batch 0 was released"):
                        f()

    def test_numpy(self):
        self.check(False)

    @unittest.skipIf(torch is None, "needs torch")
    def test_torch(self):
        self.check(True)


if __name__ == "__main__":
    unittest.main()
