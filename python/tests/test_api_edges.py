"""Trainer API edges a PyTorch user runs into, against a real lastmiled
(testdata/small, 10,000 rows, batches of 500: 20 per epoch, 2 epochs, one
rank): a DataLoader left at torch's default batch_size, dict specs (key
order, pathlib.Path values, checkpoints of either form), and leaving an
epoch early.

Run: cd python && /usr/bin/python3 -m unittest tests.test_api_edges -v
"""

import hashlib
import json
import os
import pathlib
import shutil
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import daemonproc  # noqa: E402
import lastmile  # noqa: E402

try:
    import torch
    from torch.utils.data import DataLoader
except Exception:  # pragma: no cover - torch is optional
    torch = None


class _WithLastmiled(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="lm-edges-")
        cls.d = daemonproc.Lastmiled(cls.tmp)
        cls.d.start()

    @classmethod
    def tearDownClass(cls):
        cls.d.kill()
        shutil.rmtree(cls.tmp, True)

    def spec(self, name, **extra):
        s = {"version": 1, "name": name, "inputs": [daemonproc.SMALL], "columns": ["row_id"],
             "batch": {"size": 500}, "epochs": 2, "ring": {"slots": 3}}
        s.update(extra)
        return s

    def dataset(self, spec, **kw):
        ds = lastmile.Dataset(spec, 0, 1, socket=self.d.socket, timeout=120, **kw)
        self.addCleanup(ds.close)
        return ds


@unittest.skipIf(torch is None, "needs torch")
class TestDataLoaderBatchSize(_WithLastmiled):
    def test_default_batch_size_says_to_pass_batch_size_none(self):
        ds = self.dataset(self.spec("dl-default"))
        with self.assertRaises(TypeError) as cm:
            next(iter(DataLoader(ds)))
        self.assertIn("batch_size=None", str(cm.exception))

    def test_default_batch_size_takes_no_batch(self):
        ds = self.dataset(self.spec("dl-nobatch"))
        with self.assertRaises(TypeError):
            next(iter(DataLoader(ds, batch_size=2)))
        b = next(iter(DataLoader(ds, batch_size=None)))
        self.assertEqual(tuple(b.cursor[:2]), (0, 0))

    def test_default_collate_of_a_batch_says_to_pass_batch_size_none(self):
        from torch.utils.data.dataloader import default_collate

        ds = self.dataset(self.spec("dl-collate"))
        b = next(iter(ds))
        with self.assertRaises(TypeError) as cm:
            default_collate([b])
        self.assertIn("batch_size=None", str(cm.exception))

    def test_batch_size_one_with_a_collate_fn_of_ones_own(self):
        ds = self.dataset(self.spec("dl-own-collate"))
        ds.set_epoch(0)
        got = [tuple(b.cursor[:2]) for b in DataLoader(ds, batch_size=1, collate_fn=lambda xs: xs[0])]
        self.assertEqual(got, [(0, i) for i in range(20)])

    def test_a_collate_fn_of_ones_own_over_several_batches_reads_released_ones(self):
        # batch_size=2 hands a collate_fn two batches, the first released
        # when the second was taken: reading it must fail, never alias the
        # slot the producer refills.
        ds = self.dataset(self.spec("dl-own-collate-2"))
        ds.set_epoch(0)
        loader = DataLoader(ds, batch_size=2, collate_fn=lambda xs: [x["row_id"] for x in xs])
        with self.assertRaises(RuntimeError) as cm:
            next(iter(loader))
        self.assertIn("was released", str(cm.exception))


class TestDictSpec(_WithLastmiled):
    def test_path_values_are_taken_as_strings(self):
        ds = self.dataset(self.spec("dict-path", inputs=[pathlib.Path(daemonproc.SMALL)]))
        b = ds.next()
        self.assertEqual(tuple(b.cursor[:2]), (0, 0))

    def test_key_order_is_not_part_of_the_identity(self):
        a = self.spec("dict-order")
        b = dict(reversed(list(a.items())))
        b["batch"] = dict(reversed(list(a["batch"].items())))
        self.assertNotEqual(json.dumps(a), json.dumps(b))
        ds1 = self.dataset(a)
        for _ in range(3):
            ds1.next()
        sd = ds1.state_dict()
        ds1.close()
        ds2 = self.dataset(b)
        self.assertEqual(ds2.job_id, ds1.job_id)
        self.assertEqual(ds2.spec_sha256, ds1.spec_sha256)
        ds2.load_state_dict(sd)  # strict
        self.assertEqual(tuple(ds2.next().cursor[:2]), (0, 3))

    def test_checkpoint_of_a_dict_spec_from_before_still_resumes(self):
        # Before, a dict spec's hash was that of json.dumps(spec) in the
        # dict's own key order.
        spec = self.spec("dict-old-ckpt")
        ds = self.dataset(spec)
        old = {"version": 1, "job_id": ds.job_id, "rank": 0, "world_size": 1,
               "spec_sha256": hashlib.sha256(json.dumps(spec).encode("utf-8")).hexdigest(),
               "cursor": {"epoch": 0, "batch": 5}}
        ds.load_state_dict(old)  # strict
        self.assertEqual(tuple(ds.next().cursor[:2]), (0, 5))

    def test_checkpoint_from_before_in_another_key_order_is_refused_clearly(self):
        spec = self.spec("dict-old-order")
        other = dict(reversed(list(spec.items())))
        ds = self.dataset(spec)
        old = {"version": 1, "job_id": ds.job_id, "rank": 0, "world_size": 1,
               "spec_sha256": hashlib.sha256(json.dumps(other).encode("utf-8")).hexdigest(),
               "cursor": {"epoch": 0, "batch": 5}}
        with self.assertRaises(ValueError) as cm:
            ds.load_state_dict(old)
        msg = str(cm.exception)
        self.assertIn("strict=False", msg)
        self.assertIn("key order", msg)
        ds.load_state_dict(old, strict=False)
        self.assertEqual(tuple(ds.next().cursor[:2]), (0, 5))

    def test_order_of_map_assignments_is_part_of_the_identity(self):
        # The pipeline's map, cast and rename are ordered mappings (the
        # columns come out in the order written): another order is another job.
        a = self.spec("dict-map", pipeline=[{"map": {"x": "row_id + 1", "y": "row_id * 2"}}])
        b = self.spec("dict-map", pipeline=[{"map": {"y": "row_id * 2", "x": "row_id + 1"}}])
        ds1 = self.dataset(a)
        ds1.next()
        sd = ds1.state_dict()
        self.assertEqual(list(ds1.next().keys())[-2:], ["x", "y"])
        ds1.cancel()
        ds2 = self.dataset(b)
        self.assertNotEqual(ds2.spec_sha256, ds1.spec_sha256)
        with self.assertRaises(ValueError):
            ds2.load_state_dict(sd)


class TestDictSpecIdentity(unittest.TestCase):
    """Without a daemon: which differences of a dict spec name another spec."""

    def sha(self, spec):
        from lastmile.control import _read_spec, _spec_sha256

        return _spec_sha256(spec, _read_spec(spec)[0])

    def test_nested_key_order_is_not_part_of_the_identity(self):
        a = {"name": "j", "shuffle": {"buffer": 10, "seed": 1}, "batch": {"size": 8, "last": "pad"}}
        b = {"batch": {"last": "pad", "size": 8}, "shuffle": {"seed": 1, "buffer": 10}, "name": "j"}
        self.assertEqual(self.sha(a), self.sha(b))

    def test_order_of_partitions_cast_and_rename_is_part_of_the_identity(self):
        for a, b in [
            ({"partitions": {"dt": "string", "hour": "int64"}}, {"partitions": {"hour": "int64", "dt": "string"}}),
            ({"pipeline": [{"cast": {"a": "int32", "b": "float32"}}]},
             {"pipeline": [{"cast": {"b": "float32", "a": "int32"}}]}),
            ({"pipeline": [{"rename": {"a": "x", "b": "y"}}]}, {"pipeline": [{"rename": {"b": "y", "a": "x"}}]}),
        ]:
            self.assertNotEqual(self.sha(a), self.sha(b), a)

    def test_a_path_and_its_string_are_the_same_spec(self):
        self.assertEqual(self.sha({"inputs": [pathlib.Path("/data/x")]}), self.sha({"inputs": ["/data/x"]}))

    def test_a_value_no_spec_holds_is_refused_by_type(self):
        with self.assertRaisesRegex(TypeError, "type object"):
            self.sha({"inputs": [object()]})


class TestLeavingAnEpochEarly(_WithLastmiled):
    def test_epoch_error_says_how_to_skip_the_rest_of_the_epoch(self):
        ds = self.dataset(self.spec("break-msg"))
        with self.assertRaises(lastmile.EpochError) as cm:
            for _epoch in ds.epochs():
                for i, _ in enumerate(ds):
                    if i == 2:
                        break
        msg = str(cm.exception)
        self.assertIn('ds.load_state_dict({**ds.state_dict(), "cursor": {"epoch": 1, "batch": 0}})', msg)

    def test_skipping_the_rest_of_an_epoch_with_the_cursor(self):
        ds = self.dataset(self.spec("break-skip"))
        got = {}
        for epoch in ds.epochs():
            got[epoch] = []
            for i, b in enumerate(ds):
                got[epoch].append(tuple(b.cursor[:2]))
                if epoch == 0 and i == 2:
                    break
            if ds.cursor.epoch == epoch:
                ds.load_state_dict({**ds.state_dict(), "cursor": {"epoch": epoch + 1, "batch": 0}})
        self.assertEqual(got, {0: [(0, 0), (0, 1), (0, 2)], 1: [(1, i) for i in range(20)]})


if __name__ == "__main__":
    unittest.main()
