"""The per-slot tensor-table cache of lastmile.ring: reuse, rebuild, and validation.

Run: cd python && /usr/bin/python3 -m unittest tests.test_ring_cache -v
"""

import gc
import shutil
import struct
import sys
import os
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import lastmile  # noqa: E402
import ringwriter as rw  # noqa: E402

try:
    import torch
except Exception:  # pragma: no cover
    torch = None

FIELDS = [
    rw.FieldSpec("id", "dense", "int64"),
    rw.FieldSpec("seq", "dense", "int32", (4,)),
    rw.FieldSpec("toks", "ragged", "int64"),
    rw.FieldSpec("score", "dense", "float32", nullable=True),
    rw.FieldSpec("tail", "dense", "int16"),
]


def batch(seed, rows, maxlen=5):
    rng = np.random.default_rng(seed)
    lens = rng.integers(0, maxlen + 1, rows)
    offs = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    cols = {
        "id": np.arange(rows, dtype=np.int64) + seed * 1000,
        "seq": rng.integers(0, 100, (rows, 4)).astype(np.int32),
        "toks": (rng.integers(0, 1 << 40, int(offs[-1])), offs),
        "score": rng.random(rows).astype(np.float32),
        "tail": np.full(rows, seed, np.int16),
    }
    valid = {"score": rng.random(rows) < 0.7}
    return cols, valid


class CacheTests(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="lastmile-cache-")
        self.w = rw.RingWriter("c", self.dir, FIELDS, slot_count=1, slot_size=64 << 10)
        self.w.create()
        self.ring = lastmile.Ring.open("c", self.dir)

    def tearDown(self):
        self.ring.close()
        self.w.close()
        gc.collect()
        shutil.rmtree(self.dir, ignore_errors=True)

    def publish(self, seed, rows, maxlen=5):
        cols, valid = batch(seed, rows, maxlen)
        self.ring.release()
        self.w.publish(cols, rows, valid=valid, batch_index=seed)
        return cols, valid

    def check(self, b, cols, valid, rows):
        self.assertEqual(b.rows, rows)
        for f in FIELDS:
            got = b[f.name]
            if f.kind == "ragged":
                np.testing.assert_array_equal(got.values, cols[f.name][0])
                np.testing.assert_array_equal(got.offsets, cols[f.name][1])
            else:
                np.testing.assert_array_equal(got, cols[f.name])
        np.testing.assert_array_equal(b.valid["score"], valid["score"])
        if torch is not None:
            t = b.torch()
            self.assertEqual(list(t), [f.name for f in FIELDS])
            self.assertTrue(torch.equal(t["id"], torch.from_numpy(cols["id"])))
            self.assertTrue(torch.equal(t["toks"].values, torch.from_numpy(cols["toks"][0])))
            self.assertTrue(torch.equal(t["toks"].offsets, torch.from_numpy(cols["toks"][1])))
            self.assertTrue(torch.equal(t["tail"], torch.from_numpy(cols["tail"])))
            self.assertTrue(torch.equal(t.valid["score"], torch.from_numpy(valid["score"])))

    def test_reuse_and_rebuild(self):
        cols, valid = self.publish(1, 8)
        b1 = self.ring.next()
        self.check(b1, cols, valid, 8)
        id1, toks1 = b1["id"], b1["toks"]
        t1 = b1.torch()["id"] if torch is not None else None
        # same table (same rows and V), new contents: the very same arrays are reused
        cols2, valid2 = batch(1, 8)
        cols2["id"] += 5
        cols2["toks"] = (cols2["toks"][0] + 1, cols2["toks"][1])
        self.ring.release()
        self.assertTrue(b1.released)
        self.w.publish(cols2, 8, valid=valid2)
        b2 = self.ring.next()
        self.check(b2, cols2, valid2, 8)
        self.assertIs(b2["id"], id1)
        self.assertIs(b2["toks"].values, toks1.values)
        if torch is not None:
            self.assertIs(b2.torch()["id"], t1)
        with self.assertRaises(RuntimeError):
            b1["id"]  # a released batch stays unusable
        # different V: ragged values/offsets (and what follows them) are rebuilt
        for seed, rows, maxlen in [(3, 8, 9), (4, 8, 0), (5, 3, 5), (6, 1, 5), (7, 0, 5), (8, 8, 5)]:
            cols, valid = self.publish(seed, rows, maxlen)
            b = self.ring.next()
            self.check(b, cols, valid, rows)
            if seed == 3:
                self.assertIs(b["id"], id1)  # entries before the ragged field are unchanged
                self.assertIsNot(b["toks"].values, toks1.values)

    def test_corrupt_entry_after_cached_one_is_rejected(self):
        w = self.w
        so = w.slot_off(0)
        cols, valid = self.publish(1, 8)
        self.ring.next()
        # the same table again, then corrupt entry 0 (dense id): nbytes too large
        cols, valid = self.publish(1, 8)
        good = bytes(w.mm[so : so + 64 * 8])
        struct.pack_into("<Q", w.mm, so + 64 + 48, 1 << 20)
        with self.assertRaisesRegex(lastmile.RingFormatError, "nbytes"):
            self.ring.next()
        # offset out of the slot
        w.mm[so : so + len(good)] = good
        struct.pack_into("<Q", w.mm, so + 64 + 40, 1 << 30)
        with self.assertRaisesRegex(lastmile.RingFormatError, "used_bytes"):
            self.ring.next()
        # shape of the ragged values disagrees with nbytes
        w.mm[so : so + len(good)] = good
        struct.pack_into("<Q", w.mm, so + 64 + 2 * 64 + 8, 10**6)
        with self.assertRaisesRegex(lastmile.RingFormatError, "nbytes"):
            self.ring.next()
        # identical table, but used_bytes no longer covers the last payload
        w.mm[so : so + len(good)] = good
        used = struct.unpack_from("<Q", w.mm, so + 8)[0]
        struct.pack_into("<Q", w.mm, so + 8, used - 1)
        with self.assertRaisesRegex(lastmile.RingFormatError, "used_bytes %d" % (used - 1)):
            self.ring.next()
        # identical table, ragged offsets broken (contents are checked per batch)
        w.mm[so : so + len(good)] = good
        b = batch(1, 8)[0]
        offs_off = struct.unpack_from("<Q", w.mm, so + 64 + 3 * 64 + 40)[0]
        o = np.ndarray(9, np.int64, buffer=w.mm, offset=so + offs_off)
        saved = o.copy()
        broken = [saved.copy() for _ in range(3)]
        broken[0][0] = 1  # does not start at 0
        broken[1][-1] += 1  # does not end at V
        broken[2][4], broken[2][5] = saved[-1], 0  # decreases
        for bad in broken:
            o[:] = bad
            with self.assertRaisesRegex(lastmile.RingFormatError, "offsets of ragged field 'toks'"):
                self.ring.next()
        o[:] = saved
        del o
        got = self.ring.next()
        self.check(got, b, batch(1, 8)[1], 8)


class StableLayoutCacheTests(CacheTests):
    """The same tests, and the in-place patch, with lastmile's Go producer layout:
    fixed-size payloads first, ragged values after them (docs/ring-format.md 5.3)."""

    def setUp(self):
        super().setUp()
        self.w.stable = True

    def test_values_only_change_is_patched(self):
        cols, valid = self.publish(1, 8)
        b1 = self.ring.next()
        self.check(b1, cols, valid, 8)
        id1, score1, offs1 = b1["id"], b1.valid["score"], b1["toks"].offsets
        tid1 = b1.torch()["id"] if torch is not None else None
        cache = self.ring._core.cache[0]
        for seed, maxlen in [(2, 9), (3, 0), (4, 5), (5, 12)]:
            cols, valid = self.publish(seed, 8, maxlen)
            b = self.ring.next()
            self.check(b, cols, valid, 8)
            self.assertIs(self.ring._core.cache[0], cache, "patched in place, not rebuilt")
            # only the values changed: every other view is the same object
            self.assertIs(b["id"], id1)
            self.assertIs(b.valid["score"], score1)
            self.assertIs(b["toks"].offsets, offs1)
            if torch is not None:
                self.assertIs(b.torch()["id"], tid1)
                self.assertEqual(b.torch()["toks"].values.shape[0], len(cols["toks"][0]))

    def test_first_batch_makes_the_base_later_batches_slice(self):
        # The slot's first batch (which builds its views, untimed in the
        # bench's trainer figure) makes the base view and tensor of the
        # values, so the slot's second batch only slices them: it used to
        # make both on its second batch, once per slot.
        cols, valid = self.publish(1, 8)
        b1 = self.ring.next()
        if torch is not None:
            b1.torch()
        cache = self.ring._core.cache[0]
        i = self.ring._vkey["toks", "values"]
        base = cache.vbase[i]
        ptr = lambda a: a.__array_interface__["data"][0]  # noqa: E731
        self.assertEqual(ptr(b1["toks"].values), ptr(base[1]), "the values are a prefix of the base")
        if torch is not None:
            self.assertIsNotNone(base[2], "the first torch() converts the base")
            t2 = base[2]
        for seed, maxlen in [(2, 9), (3, 3)]:
            cols, valid = self.publish(seed, 8, maxlen)
            b = self.ring.next()
            self.check(b, cols, valid, 8)
            self.assertIs(cache.vbase[i], base, "the second batch reuses the first's base")
            if torch is not None:
                self.assertIs(base[2], t2)
                self.assertEqual(b.torch()["toks"].values.data_ptr(), t2.data_ptr())

    def test_bad_values_entry_is_rejected_not_patched(self):
        w = self.w
        so = w.slot_off(0)
        self.publish(1, 8)
        self.ring.next()
        vals = 64 + 2 * 64  # table entry of toks' values
        cases = [
            (vals + 8, 10**6, "nbytes"),  # shape disagrees with nbytes
            (vals + 48, 1 << 30, "nbytes"),  # nbytes disagrees with the shape
            (vals + 40, 1 << 30, "used_bytes"),  # offset beyond the slot
            (vals + 40, 64 * 1024 - 8, "256-byte aligned"),  # misaligned
        ]
        cols, valid = self.publish(2, 8, 9)  # a values-only change against the cached table
        good = bytes(w.mm[so : so + 64 * 8])
        for pos, value, msg in cases:
            w.mm[so : so + len(good)] = good
            struct.pack_into("<Q", w.mm, so + pos, value)
            with self.assertRaisesRegex(lastmile.RingFormatError, msg):
                self.ring.next()
        w.mm[so : so + len(good)] = good
        self.check(self.ring.next(), cols, valid, 8)
        # a corrupt fixed entry next to a values change is caught too
        self.publish(3, 8, 4)
        struct.pack_into("<Q", w.mm, so + 64 + 48, 1 << 20)
        with self.assertRaisesRegex(lastmile.RingFormatError, "nbytes"):
            self.ring.next()
        struct.pack_into("<Q", w.mm, so + 64 + 48, 8 * 8)
        cols, valid = batch(3, 8, 4)
        self.check(self.ring.next(), cols, valid, 8)


if __name__ == "__main__":
    unittest.main()
