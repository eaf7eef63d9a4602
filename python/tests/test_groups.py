"""Feature groups read from a Go-produced ring: a stack's [B, N] tensor and a
jagged group (batch.kjt) checked row by row against the generator's .npy
copy of the same rows, and the ring format 2.0 schema with its keys; a
weighted jagged group (format 3.0) against testdata/weighted.

Needs bin/lastmile (``make build``). Run:
cd python && /usr/bin/python3 -m unittest tests.test_groups -v
"""

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import types
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))

import lastmile  # noqa: E402
from lastmile import format as fmt  # noqa: E402

BIN = os.environ.get("LASTMILE_BIN", os.path.join(ROOT, "bin", "lastmile"))
try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

SPEC = """
inputs: [{data}]
columns: [row_id, dense_0, dense_1, dense_opt, cat_0, cat_opt, seq_0, seq_opt]
batch: {{size: 256, last: keep}}
seed: 3
shuffle: {{units: true, buffer: 700}}
ring: {{dir: {ring}, name: groups, slots: 4}}
pipeline:
  - stack: {{output: dense, columns: [dense_1, dense_opt, dense_0], nulls: fill, fill: -1}}
  - jagged:
      output: sparse
      nulls: fill
      keys:
        - cat_0
        - {{column: cat_opt, key: opt}}
        - {{column: seq_0, key: recent, max_length: 5}}
        - {{column: seq_opt, max_length: 3, truncate: right}}
"""


@unittest.skipUnless(os.access(BIN, os.X_OK), "bin/lastmile is not built: run `make build`")
class GoRingGroupsTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="lastmile-groups-")
        data, npy = os.path.join(cls.tmp, "data"), os.path.join(cls.tmp, "npy")
        cls.ringdir = os.path.join(cls.tmp, "rings")
        os.mkdir(cls.ringdir)
        subprocess.run([BIN, "gen", "-rows", "3000", "-nullable", "-null-fraction", "0.1", "-npy", npy, data],
                       check=True, capture_output=True)
        load = lambda name: np.load(os.path.join(npy, name + ".npy"))  # noqa: E731
        cls.np = {n: load(n) for n in ["dense_0", "dense_1", "dense_opt", "dense_opt.valid", "cat_0", "cat_opt",
                                        "cat_opt.valid", "seq_0.values", "seq_0.offsets", "seq_opt.values",
                                        "seq_opt.offsets", "seq_opt.valid"]}
        spec = os.path.join(cls.tmp, "job.yaml")
        with open(spec, "w") as f:
            f.write(SPEC.format(data=data, ring=cls.ringdir))
        cls.proc = subprocess.Popen([BIN, "run", spec], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        cls.batches = []
        with lastmile.Ring.open("groups", dir=cls.ringdir, timeout=60) as ring:
            cls.geo = ring._core.geo
            for b in ring:
                t = b.torch()
                cls.batches.append({
                    "rows": b["row_id"].copy(),
                    "dense": b["dense"].copy(),
                    "tdense": t["dense"].clone(),
                    "sparse": lastmile.KeyedJagged(*(x if isinstance(x, tuple) else x.copy() for x in b["sparse"])),
                    "kjt": b.kjt("sparse"),
                })
                cls.batches[-1]["kjt"] = lastmile.KeyedJagged(*(
                    x if isinstance(x, tuple) else x.clone() for x in cls.batches[-1]["kjt"]))
                cls.batches[-1]["owned"] = t.detach()  # copies, valid after the ring moves on
        out, err = cls.proc.communicate(timeout=60)
        if cls.proc.returncode:
            raise AssertionError("lastmile run failed: %s" % err.decode())

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def ids(self, name, r):
        o = self.np[name + ".offsets"]
        return list(self.np[name + ".values"][o[r]:o[r + 1]])

    def key_rows(self, r):
        """Row r's ids for each key, as the spec's jagged op makes them."""
        n = self.np
        opt = [int(n["cat_opt"][r])] if n["cat_opt.valid"][r] else []
        seq_opt = self.ids("seq_opt", r)[:3] if n["seq_opt.valid"][r] else []
        return [[int(n["cat_0"][r])], opt, self.ids("seq_0", r)[-5:], seq_opt]

    def test_schema(self):
        self.assertEqual((self.geo.major, self.geo.minor), (2, 2))
        f = {x.name: x for x in self.geo.fields}
        self.assertEqual((f["dense"].kind, f["dense"].dims, f["dense"].dtype), ("dense", (3,), "float32"))
        self.assertEqual((f["sparse"].kind, f["sparse"].keys, f["sparse"].dtype),
                         ("jagged", ("cat_0", "opt", "recent", "seq_opt"), "int64"))
        self.assertEqual([x.name for x in self.geo.fields], ["row_id", "dense", "sparse"])

    def test_stack(self):
        n = self.np
        seen = 0
        for b in self.batches:
            r = b["rows"]
            opt = np.where(n["dense_opt.valid"][r] == 1, n["dense_opt"][r], np.float32(-1))
            want = np.stack([n["dense_1"][r], opt, n["dense_0"][r]], axis=1)
            np.testing.assert_array_equal(b["dense"], want)
            self.assertEqual(b["dense"].dtype, np.float32)
            if torch is not None:
                self.assertEqual(tuple(b["tdense"].shape), (len(r), 3))
                self.assertTrue(torch.equal(b["tdense"], torch.from_numpy(want)))
            seen += len(r)
        self.assertEqual(seen, 3000)

    def test_jagged(self):
        for b in self.batches:
            kj = b["sparse"]
            rows = b["rows"]
            vals, lens = [], []
            for k in range(4):
                for r in rows:
                    ids = self.key_rows(int(r))[k]
                    vals += ids
                    lens.append(len(ids))
            self.assertEqual(kj.keys, ("cat_0", "opt", "recent", "seq_opt"))
            self.assertEqual(kj.values.tolist(), vals)
            self.assertEqual(kj.lengths.tolist(), lens)
            self.assertEqual(kj.offsets.tolist(), np.concatenate([[0], np.cumsum(lens)]).tolist())
            self.assertEqual(kj.stride, len(rows))
            r0 = int(rows[0])
            self.assertEqual(kj.key("recent").row(0).tolist(), self.key_rows(r0)[2])

    @unittest.skipIf(torch is None, "needs torch")
    def test_detach(self):
        # An owned copy keeps the keys and copies the tensors of a jagged field.
        for b in self.batches:
            o, s = b["owned"]["sparse"], b["sparse"]
            self.assertIsInstance(o, lastmile.KeyedJagged)
            self.assertEqual(o.keys, s.keys)
            self.assertEqual(o.values.tolist(), s.values.tolist())
            self.assertEqual(o.offsets.tolist(), s.offsets.tolist())
            np.testing.assert_array_equal(b["owned"]["dense"].numpy(), b["dense"])

    @unittest.skipIf(torch is None, "needs torch")
    def test_kjt_fallback(self):
        # torchrec is not installed here: kjt() is the named tuple of tensors.
        for b in self.batches:
            k, s = b["kjt"], b["sparse"]
            self.assertIsInstance(k, lastmile.KeyedJagged)
            self.assertEqual(k.keys, s.keys)
            for part in ("values", "lengths", "offsets"):
                t = getattr(k, part)
                self.assertEqual(t.dtype, torch.int64)
                self.assertEqual(t.tolist(), getattr(s, part).tolist())


WEIGHTED_SPEC = """
inputs: [{data}]
batch: {{size: 128, last: keep}}
seed: 5
shuffle: {{units: true, buffer: 300}}
ring: {{dir: {ring}, name: weighted, slots: 4}}
pipeline:
  - jagged:
      output: sparse
      keys:
        - {{column: scores.id, key: scores, max_length: 4, weights: scores.score}}
        - hist
  - select: [row_id, sparse]
"""

WEIGHTED_FIXTURE = os.path.join(ROOT, "testdata", "weighted", "scores.parquet")


def fixture_rows(r):
    """Row r of testdata/weighted/scores.parquet (engine/weighted_test.go's
    scoredRows): its (ids, weights) of the scores cut to the last 4, and its
    history ids."""
    ids = [r * 10 + k for k in range(r % 6)][-4:]
    weights = [k / 2 + 0.25 for k in range(r % 6)][-4:]
    return ids, weights, [r * 100 + k for k in range(r % 4)]


@unittest.skipIf(torch is None, "needs torch")
@unittest.skipUnless(os.access(BIN, os.X_OK), "bin/lastmile is not built: run `make build`")
class GoRingWeightedTests(unittest.TestCase):
    """A jagged op with weights: (ring format 3): the weights reach the
    trainer as a float32 tensor lined up with the ids, key-major, 1.0 for
    a key without weights, and kjt() hands them over without a copy."""

    def test_weighted(self):
        tmp = tempfile.mkdtemp(prefix="lastmile-weighted-")
        self.addCleanup(shutil.rmtree, tmp, True)
        spec = os.path.join(tmp, "job.yaml")
        with open(spec, "w") as f:
            f.write(WEIGHTED_SPEC.format(data=WEIGHTED_FIXTURE, ring=tmp))
        proc = subprocess.Popen([BIN, "run", spec], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        seen = 0
        with lastmile.Ring.open("weighted", dir=tmp, timeout=60) as ring:
            self.assertEqual(ring._core.geo.major, 3)
            f = {x.name: x for x in ring._core.geo.fields}["sparse"]
            self.assertTrue(f.weighted)
            self.assertEqual(f.as_dict()["weighted"], True)
            for b in ring:
                seen += self.check_batch(b)
        out, err = proc.communicate(timeout=60)
        self.assertEqual(proc.returncode, 0, err.decode())
        self.assertEqual(seen, 1200)

    def check_batch(self, b):
        rows = [int(r) for r in b["row_id"]]
        v = b["sparse"]
        self.assertIsInstance(v, lastmile.WeightedKeyedJagged)
        want_ids, want_w = [], []
        for r in rows:
            ids, w, _ = fixture_rows(r)
            want_ids += ids
            want_w += w
        for r in rows:
            hist = fixture_rows(r)[2]
            want_ids += hist
            want_w += [1.0] * len(hist)
        self.assertEqual(v.values.tolist(), want_ids)
        self.assertEqual(v.weights.dtype, np.float32)
        self.assertEqual(v.weights.tolist(), want_w)
        self.assertEqual(v.key_weights("scores").row(0).tolist(), fixture_rows(rows[0])[1])
        k = b.kjt("sparse")
        self.assertIsInstance(k, lastmile.WeightedKeyedJagged)
        self.assertEqual(k.weights.dtype, torch.float32)
        self.assertEqual(k.weights.tolist(), want_w)
        # Zero-copy: the KJT's weights are the ring slot's bytes.
        self.assertEqual(k.weights.data_ptr(), v.weights.ctypes.data)
        # A detached copy keeps them (the Dataset's copy=True and device paths).
        o = b.torch().detach().kjt("sparse")
        self.assertIsInstance(o, lastmile.WeightedKeyedJagged)
        self.assertEqual(o.weights.tolist(), want_w)
        self.assertNotEqual(o.weights.data_ptr(), v.weights.ctypes.data)
        return len(rows)


@unittest.skipIf(torch is None, "needs torch")
@unittest.skipUnless(os.access(BIN, os.X_OK), "bin/lastmile is not built: run `make build`")
class TorchrecTests(unittest.TestCase):
    """kjt() builds torchrec's KeyedJaggedTensor when torchrec imports (a
    stand-in module here, recording what it was given)."""

    def test_kjt_torchrec(self):
        made = []
        with _stand_in_torchrec(made) as KeyedJaggedTensor:
            b = GoRingGroupsTests.batches[0] if hasattr(GoRingGroupsTests, "batches") else None
            if b is None:
                self.skipTest("the Go ring test did not run")
            fake = _FakeBatch(b["sparse"])
            out = lastmile.Batch.kjt(fake, "sparse")
        self.assertIsInstance(out, KeyedJaggedTensor)
        kw = made[0]
        self.assertEqual(kw["keys"], ["cat_0", "opt", "recent", "seq_opt"])
        self.assertEqual(kw["stride"], len(b["rows"]))
        self.assertEqual(kw["lengths"].tolist(), b["sparse"].lengths.tolist())


@contextlib.contextmanager
def _stand_in_torchrec(made):
    """Makes torchrec importable for the block: a stand-in module whose
    KeyedJaggedTensor records its keyword arguments in made (and is
    yielded)."""

    class KeyedJaggedTensor:
        def __init__(self, **kw):
            made.append(kw)

    mods = {"torchrec": types.ModuleType("torchrec"), "torchrec.sparse": types.ModuleType("torchrec.sparse"),
            "torchrec.sparse.jagged_tensor": types.ModuleType("torchrec.sparse.jagged_tensor")}
    mods["torchrec.sparse.jagged_tensor"].KeyedJaggedTensor = KeyedJaggedTensor
    saved = {m: sys.modules.get(m) for m in mods}
    sys.modules.update(mods)
    try:
        yield KeyedJaggedTensor
    finally:
        for m, v in saved.items():
            if v is None:
                sys.modules.pop(m, None)
            else:
                sys.modules[m] = v


def schema_block(keys, count=None, off=None, flags=0, kind=None):
    """A schema block of one jagged int64 field "s" with its key table (4.1)."""
    entries_end = 8 + 96
    head = fmt._SCHEMA_HEAD.pack(1, 96)
    entry = fmt._FIELD.pack(b"s", fmt.KIND_JAGGED if kind is None else kind, 6, 0, flags,
                            len(keys) if count is None else count, entries_end if off is None else off, 0, 0)
    return head + entry + b"".join(k.ljust(64, b"\0") for k in keys)


class KeyTableTests(unittest.TestCase):
    def test_parse(self):
        f, = fmt._parse_schema(schema_block([b"a", b"bb"]), "t")
        self.assertEqual((f.kind, f.keys, f.weighted), ("jagged", ("a", "bb"), False))
        f, = fmt._parse_schema(schema_block([b"a"], flags=fmt.FIELD_WEIGHTED), "t")
        self.assertTrue(f.weighted)
        self.assertEqual([role for _, role, _ in fmt._expected_tensors((f,))],
                         [fmt.ROLE_VALUES, fmt.ROLE_OFFSETS, fmt.ROLE_LENGTHS, fmt.ROLE_WEIGHTS])

    def test_flags(self):
        for what, block, want in [
            ("nullable jagged", schema_block([b"a"], flags=fmt.FIELD_NULLABLE), "flags 1"),
            ("unknown flag", schema_block([b"a"], flags=8), "flags 8"),
            ("weighted ragged", schema_block([], flags=fmt.FIELD_WEIGHTED, kind=fmt.KIND_RAGGED, off=0),
             "weighted flag but is not jagged"),
        ]:
            with self.subTest(what):
                with self.assertRaisesRegex(lastmile.RingFormatError, want):
                    fmt._parse_schema(block, "t")

    def test_damaged(self):
        for what, block, want in [
            ("no keys", schema_block([], count=0), "key_count 0"),
            ("too many", schema_block([b"a"], count=2), "do not lie after"),
            ("over the entries", schema_block([b"a"], off=16), "do not lie after"),
            ("empty key", schema_block([b""]), "not 1 to 63"),
            ("unterminated", schema_block([b"x" * 64]), "not 1 to 63"),
            ("twice", schema_block([b"a", b"a"]), "a key twice"),
            ("not UTF-8", schema_block([b"\xff"]), "not UTF-8"),
        ]:
            with self.subTest(what):
                with self.assertRaisesRegex(lastmile.RingFormatError, want):
                    fmt._parse_schema(block, "t")


class _FakeBatch:
    """What Batch.kjt needs of a batch: field() and torch()."""

    def __init__(self, kj):
        self.kj = kj

    def field(self, name):
        return fmt.Field(0, name, "jagged", 6, (), False, False, self.kj.keys)

    def torch(self):
        kj = self.kj
        return {"sparse": lastmile.KeyedJagged(kj.keys, torch.from_numpy(kj.values),
                                               torch.from_numpy(kj.lengths), torch.from_numpy(kj.offsets))}


class _WeightedBatch:
    """A batch of two rows with a jagged field "sparse" (keys "scores" and
    "cat") and ragged fields "scores.value" (lined up with key "scores") and
    "short" (not)."""

    def field(self, name):
        return fmt.Field(0, name, "jagged", 6, (), False, False, ("scores", "cat"))

    def torch(self):
        t = torch.tensor
        return {
            # scores: row 0 ids [10, 11], row 1 [12]; cat: one id a row.
            "sparse": lastmile.KeyedJagged(("scores", "cat"), t([10, 11, 12, 7, 8]), t([2, 1, 1, 1]), t([0, 2, 3, 4, 5])),
            "scores.value": lastmile.Ragged(t([0.5, 0.25, 2.0], dtype=torch.float64), t([0, 2, 3])),
            "short": lastmile.Ragged(t([1.0, 1.0]), t([0, 1, 2])),
            "dense": t([1, 2]),
        }


@unittest.skipIf(torch is None, "needs torch")
class WeightedKJTTests(unittest.TestCase):
    """kjt(name, weights=...): a map's values as the weights of its keys' ids."""

    def test_weights(self):
        k = lastmile.Batch.kjt(_WeightedBatch(), "sparse", weights={"scores": "scores.value"})
        self.assertIsInstance(k, lastmile.WeightedKeyedJagged)
        self.assertEqual(k.values.tolist(), [10, 11, 12, 7, 8])
        self.assertEqual(k.weights.dtype, torch.float32)
        self.assertEqual(k.weights.tolist(), [0.5, 0.25, 2.0, 1.0, 1.0])  # cat weighs 1.0
        self.assertEqual(k.stride, 2)

    def test_torchrec(self):
        made = []
        with _stand_in_torchrec(made):
            lastmile.Batch.kjt(_WeightedBatch(), "sparse", weights={"scores": "scores.value"})
        self.assertEqual(made[0]["weights"].tolist(), [0.5, 0.25, 2.0, 1.0, 1.0])
        self.assertEqual(made[0]["keys"], ["scores", "cat"])

    def test_errors(self):
        b = _WeightedBatch()
        for weights, err, want in [
            ({"nope": "scores.value"}, KeyError, "weights for 'nope', which the group does not have"),
            ({"scores": "short"}, ValueError, "the rows of 'short' are not as long as key 'scores'"),
            ({"scores": "dense"}, TypeError, "not a ragged field"),
        ]:
            with self.subTest(want):
                with self.assertRaisesRegex(err, want):
                    lastmile.Batch.kjt(b, "sparse", weights=weights)


if __name__ == "__main__":
    unittest.main()
