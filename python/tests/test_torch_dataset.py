"""lastmile.Dataset as a torch IterableDataset: len(), DataLoader, epochs one
at a time, device placement, owned copies, and the zero-copy trap.

Against the fake lastmiled of tests/fakedaemon.py (2 ranks, 5 batches of 4
rows per epoch, 2 epochs). The training tests are in tests/test_train.py.

Run: cd python && /usr/bin/python3 -m unittest tests.test_torch_dataset -v
"""

import os
import shutil
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import daemonproc  # noqa: E402
import lastmile  # noqa: E402
from fakedaemon import row_id  # noqa: E402
from test_dataset import FakeDaemonCase  # noqa: E402

try:
    import torch
    from torch.utils.data import DataLoader, IterableDataset
except Exception:  # pragma: no cover - torch is optional
    torch = None


def ids_of(batches):
    return [int(i) for b in batches for i in b["id"]]


@unittest.skipIf(torch is None, "needs torch")
class TestTorchDataset(FakeDaemonCase):
    def want(self, rank=0, epochs=None, start=(0, 0)):
        out = []
        for e in (range(self.epochs) if epochs is None else epochs):
            for i in range(self.per_epoch):
                if (e, i) >= start:
                    out += [row_id(e, i, rank, r, 2, self.rows) for r in range(self.rows)]
        return out

    def test_is_iterable_dataset_with_len(self):
        ds = self.dataset(0)
        self.assertIsInstance(ds, IterableDataset)
        self.assertEqual(len(ds), self.per_epoch)
        self.assertEqual(ds.batches_per_epoch, self.per_epoch)
        self.assertEqual(ds.num_epochs, 2)

    def test_len_unknown_until_an_epoch_ended(self):
        self.fake.count_known = False  # a pipeline that drops rows
        ds = self.dataset(1)
        with self.assertRaisesRegex(TypeError, "batches per epoch of job .* not known yet: its "
                                    "pipeline drops rows .* once the first epoch has ended"):
            len(ds)
        self.assertIsNone(ds.batches_per_epoch)
        for _ in range(self.per_epoch):  # the epoch's last batch tells
            ds.next()
        self.assertEqual(len(ds), self.per_epoch)

    def test_dataloader(self):
        ds = self.dataset(0)
        loader = DataLoader(ds, batch_size=None)
        got = []  # (len(loader) is one epoch: torch warns when more come; see test_set_epoch)
        for b in loader:
            self.assertIsInstance(b["x"], torch.Tensor)
            self.assertIsInstance(b["tokens"], lastmile.Ragged)
            got += b["id"].tolist()
        self.assertEqual(got, self.want(0))  # straight through both epochs
        self.assertEqual(tuple(ds.cursor), (2, 0))

    def test_dataloader_with_workers_fails_clearly(self):
        ds = self.dataset(0)
        loader = DataLoader(ds, batch_size=None, num_workers=2)
        with self.assertRaisesRegex(RuntimeError, "num_workers=0\\). The ring is the worker"):
            next(iter(loader))
        with self.assertRaisesRegex(TypeError, "cannot be pickled"):
            import pickle

            pickle.dumps(ds)
        # the dataset is untouched: it still reads from the start
        self.assertEqual(ids_of([ds.next()]), self.want(0)[: self.rows])

    def test_set_epoch(self):
        ds = self.dataset(1)
        loader = DataLoader(ds, batch_size=None)
        seen = []
        for epoch in range(self.epochs):
            ds.set_epoch(epoch)
            batches = [b["id"].tolist() for b in loader]
            self.assertEqual(len(batches), len(loader))
            seen.append(sum(batches, []))
        self.assertEqual(seen, [self.want(1, [0]), self.want(1, [1])])
        ds.set_epoch(0)  # done already: nothing
        self.assertEqual(list(ds), [])

    def test_epochs_iterator_and_resume_mid_epoch(self):
        ds = self.dataset(0)
        got = {}
        for epoch in ds.epochs():
            for k, b in enumerate(ds):
                self.assertEqual(b.cursor.epoch, epoch)
                got.setdefault(epoch, []).extend(b["id"].tolist())
                if epoch == 0 and k == 2:
                    sd = ds.state_dict()
                    break  # an interrupted epoch: the iterator stops at the cursor's
            if epoch == 0:
                break
        self.assertEqual(sd["cursor"], {"epoch": 0, "batch": 3})
        # a new trainer resumes: the epochs go on from the checkpoint
        ds2 = self.dataset(0)
        ds2.load_state_dict(sd)
        rest = {}
        for epoch in ds2.epochs():
            rest[epoch] = ids_of(ds2)
        self.assertEqual(sorted(rest), [0, 1])
        self.assertEqual(got[0] + rest[0], self.want(0, [0]))
        self.assertEqual(rest[1], self.want(0, [1]))
        self.assertEqual(list(ds2.epochs()), [])  # the job is done

    def test_set_epoch_ahead_of_the_cursor(self):
        ds = self.dataset(0)
        ds.next()
        ds.set_epoch(1)
        with self.assertRaisesRegex(lastmile.EpochError, "stands at batch 1 of epoch 0: epoch 1 "
                                    "would skip the rest of epoch 0"):
            next(iter(ds))
        ds.set_epoch(None)  # straight through again
        self.assertEqual(ids_of(ds), self.want(0, start=(0, 1)))

    def test_set_epoch_when_the_daemon_does_not_say_where(self):
        """Without "next" in the attach answer the epoch iterator looks at the
        first batch and gives it back when it belongs to another epoch."""
        self.fake.no_next = True
        ds = self.dataset(0)
        ds.set_epoch(1)
        with self.assertRaisesRegex(lastmile.EpochError, "stands at batch 0 of epoch 0"):
            next(iter(ds))
        self.assertEqual(tuple(ds.cursor), (0, 0))  # the batch looked at is not consumed
        self.assertEqual(ds.state_dict()["cursor"], {"epoch": 0, "batch": 0})
        ds.set_epoch(0)
        self.assertEqual(ids_of(ds), self.want(0, [0]))
        ds.set_epoch(1)
        self.assertEqual(ids_of(ds), self.want(0, [1]))

    def test_zero_copy_trap(self):
        ds = self.dataset(0)
        it = iter(ds)
        first = next(it)
        kept = first["id"]  # a view of the ring slot
        want = kept.tolist()
        second = next(it)
        with self.assertRaisesRegex(RuntimeError, "batch 0 was released .*\\(batch.detach\\(\\), "
                                    "or lastmile.Dataset\\(..., copy=True\\)"):
            first["id"]
        self.assertEqual(second["id"].tolist(), self.want(0)[4:8])
        owned = second.detach()
        for _ in range(4):  # every slot reused at least once
            next(it)
        self.assertNotEqual(kept.tolist(), want, "the kept view should alias a later batch")
        self.assertEqual(owned["id"].tolist(), self.want(0)[4:8])
        self.assertEqual(owned["tokens"].values.tolist(), second_tokens(self.want(0)[4:8]))
        self.assertIsInstance(owned, lastmile.OwnedBatch)
        self.assertEqual(owned.cursor[:2], (0, 1))

    def test_copy(self):
        ds = self.dataset(0, copy=True)
        batches = list(ds)  # all kept: each owns its tensors
        self.assertEqual(ids_of(batches), self.want(0))
        for b in batches:
            ids = b["id"].tolist()
            self.assertEqual(b["x"][:, 0].tolist(), [float(i) for i in ids])
            self.assertEqual(b["tokens"].values.tolist(), second_tokens(ids))
            self.assertFalse(b.released)

    def test_device(self):
        ds = self.dataset(0, device="cpu")  # on the CPU: the zero-copy batch itself
        b = ds.next()
        self.assertNotIsInstance(b, lastmile.OwnedBatch)
        ds = self.dataset(1, device="cpu", copy=True)
        batches = list(ds)
        self.assertEqual(ids_of(batches), self.want(1))
        self.assertTrue(all(b["x"].device.type == "cpu" for b in batches))
        # A batch on another device (a GPU-staged one; "meta" here) is not
        # "on the CPU already": .to("cpu") copies it back instead of
        # returning it (the bug an H100 found).
        from lastmile import owned

        other = owned._like(batches[0], {n: owned._map(v, lambda t: t.to("meta"))
                                         for n, v in batches[0]._data.items()}, {}, True)
        self.assertFalse(owned._on_cpu(other, torch))
        self.assertTrue(owned._on_cpu(batches[0], torch))
        if torch.cuda.is_available():  # pragma: no cover - no GPU in CI
            ds = self.dataset(1, device="cuda", cursor=(0, 0))
            b = ds.next()
            self.assertEqual(b["x"].device.type, "cuda")
            self.assertEqual(b["tokens"].offsets.device.type, "cuda")
        with self.assertRaisesRegex(ValueError, "needs torch=True"):
            self.dataset(0, device="cpu", torch=False)

    def test_numpy_copy(self):
        ds = self.dataset(0, torch=False, copy=True)
        batches = list(ds)
        self.assertEqual(ids_of(batches), self.want(0))
        t = batches[0].torch()  # an owned numpy batch becomes owned tensors
        self.assertIsInstance(t, lastmile.OwnedBatch)
        self.assertEqual(t["id"].tolist(), self.want(0)[:4])


@unittest.skipIf(torch is None, "needs torch")
@unittest.skipUnless(os.access(daemonproc.LASTMILED, os.X_OK),
                     "%s is not built: run `make build`" % daemonproc.LASTMILED)
class TestLenWithLastmiled(unittest.TestCase):
    """len() from the real lastmiled's batches_per_epoch (testdata/small,
    10,000 rows, batches of 500, one rank)."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="lm-len-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.d = daemonproc.Lastmiled(self.tmp)
        self.addCleanup(self.d.kill)
        self.d.start()

    def dataset(self, name, pipeline=""):
        path = os.path.join(self.tmp, name + ".yaml")
        with open(path, "w") as f:
            f.write("version: 1\nname: %s\ninputs: [%s]\ncolumns: [row_id]\n"
                    "batch: {size: 500}\nepochs: 2\nring: {slots: 3}\n%s"
                    % (name, daemonproc.SMALL, pipeline))
        ds = lastmile.Dataset(path, 0, 1, socket=self.d.socket, timeout=120)
        self.addCleanup(ds.close)
        return ds

    def test_known_once_planned(self):
        ds = self.dataset("plain")
        self.assertEqual(len(ds), 20)  # waits for planning
        self.assertEqual(sum(1 for _ in DataLoader(ds, batch_size=None)), 40)

    def test_pipeline_that_drops_rows(self):
        pipeline = "pipeline:\n  - filter: \"row_id % 2 == 0\"\n"
        ds = self.dataset("filtered", pipeline)
        ds.set_epoch(0)
        it = iter(ds)
        next(it)  # the daemon produces a few batches ahead, not the whole epoch
        with self.assertRaisesRegex(TypeError, "not known yet: its pipeline drops rows"):
            len(ds)
        rows = [next(it)["row_id"]]
        rows += [b["row_id"] for b in it]  # the rest of epoch 0
        self.assertEqual(len(ds), 10)  # learnt from the epoch's last batch
        # lastmiled knows it too now: a second trainer's Dataset asks it
        self.assertEqual(self.dataset("filtered", pipeline).batches_per_epoch, 10)
        ds.set_epoch(None)
        self.assertEqual(sum(1 for _ in ds), 10)  # epoch 1: the job ends
        client = lastmile.Client(self.d.socket)
        deadline = time.monotonic() + 60
        while client.job(ds.job_id)["state"] != "done":
            self.assertLess(time.monotonic(), deadline, self.d.log())
            time.sleep(0.05)
        self.assertEqual(client.job(ds.job_id)["batches_per_epoch"], 10)  # kept after its run


def second_tokens(ids):
    """The fake producer's ragged field: each id repeated id % 3 times."""
    return [i for i in ids for _ in range(i % 3)]


if __name__ == "__main__":
    unittest.main()
