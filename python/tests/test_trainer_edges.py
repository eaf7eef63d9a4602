"""Review of the trainer-facing API (2026-11-29): cases a torchrun/torchrec
trainer runs into, against a real lastmiled (testdata/small, 10,000 rows,
batches of 500: 20 per epoch, 2 epochs, one rank).

Run: cd python && /usr/bin/python3 -m unittest tests.test_trainer_edges -v
"""

import os
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
    import torch  # noqa: F401
except Exception:  # pragma: no cover - torch is optional
    torch = None


@unittest.skipIf(torch is None, "needs torch")
class TestTrainerEdgesWithLastmiled(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="lm-rv-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.d = daemonproc.Lastmiled(self.tmp)
        self.addCleanup(self.d.kill)
        self.d.start()

    def dataset(self, name, pipeline="", **kw):
        path = os.path.join(self.tmp, name + ".yaml")
        with open(path, "w") as f:
            f.write("version: 1\nname: %s\ninputs: [%s]\ncolumns: [row_id]\n"
                    "batch: {size: 500}\nepochs: 2\nring: {slots: 3}\n%s"
                    % (name, daemonproc.SMALL, pipeline))
        ds = lastmile.Dataset(path, 0, 1, socket=self.d.socket, timeout=120, **kw)
        self.addCleanup(ds.close)
        return ds

    def test_epochs_from_end_of_epoch_cursor(self):
        # docs/python.md: "(e, n), with n the batches per epoch, is the end of
        # epoch e, the same as (e + 1, 0)". Going epoch by epoch from there
        # must not hand epoch 1's first batch out as part of epoch 0.
        ds = self.dataset("endcursor", cursor=(0, 20))
        self.assertEqual(len(ds), 20)
        seen = {}
        for epoch in ds.epochs():
            seen[epoch] = [tuple(b.cursor[:2]) for b in ds]
        for epoch, cursors in seen.items():
            self.assertEqual([c for c in cursors if c[0] != epoch], [], "epoch %d" % epoch)
        self.assertEqual(len(seen[1]), 20)
        self.assertTrue(all(c[0] == 1 for c in seen[1]))

    def test_set_epoch_from_end_of_epoch_cursor(self):
        ds = self.dataset("endcursor2", cursor=(0, 20))
        self.assertEqual(len(ds), 20)
        ds.set_epoch(1)  # (0, 20) is (1, 0): epoch 1 is the current one
        got = [tuple(b.cursor[:2]) for b in ds]
        self.assertEqual(got, [(1, i) for i in range(20)])


    def test_epochs_of_a_job_without_batches(self):
        # batch.size above the epoch's rows with last: drop: no batch at all
        # (a warning says so). Going epoch by epoch yields nothing, rather
        # than EpochError at epoch 1 ("stands at batch 0 of epoch 0").
        path = os.path.join(self.tmp, "nobatch.yaml")
        with open(path, "w") as f:
            f.write("version: 1\nname: nobatch\ninputs: [%s]\ncolumns: [row_id]\n"
                    "batch: {size: 20000, last: drop}\nepochs: 2\n" % daemonproc.SMALL)
        ds = lastmile.Dataset(path, 0, 1, socket=self.d.socket, timeout=60)
        self.addCleanup(ds.close)
        from torch.utils.data import DataLoader

        got = {e: sum(1 for _ in DataLoader(ds, batch_size=None)) for e in ds.epochs()}
        self.assertEqual(sum(got.values()), 0)
        self.assertEqual(len(ds), 0)

    def test_train_ddp_example_on_another_spec(self):
        # examples/train_ddp.py says its model "trains on any spec"; its label
        # column was fixed to ctr-8rank.yaml's label_f (KeyError: 'label_f' on
        # examples/tiny.yaml): --label names it
        import subprocess

        env = dict(os.environ, LASTMILE_SOCKET=self.d.socket, PYTHONPATH=os.path.dirname(HERE))
        for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK"):
            env.pop(k, None)
        ex = os.path.join(daemonproc.REPO, "examples")
        p = subprocess.run([sys.executable, "-m", "lastmile.launch", "--nproc", "2",
                            os.path.join(ex, "train_ddp.py"), "--spec", os.path.join(ex, "tiny-groups.yaml"),
                            "--label", "label", "--checkpoint", os.path.join(self.tmp, "ck.pt"),
                            "--max-steps", "3", "--log-every", "1"],
                           env=env, capture_output=True, text=True, timeout=240)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("done after 3 steps", p.stdout)

    def test_one_rank_job_on_every_torchrun_rank(self):
        # Every torchrun process makes Dataset(spec, rank=0, world_size=1) (a
        # "one-rank eval job" each): they all name the same job, and all but
        # one are refused. The refusal says why, not only "already has a
        # consumer".
        from unittest import mock

        with mock.patch.dict(os.environ, {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1",
                                          "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "0"}):
            a = self.dataset("evalall")
            self.assertIsNotNone(a.next())
            b = self.dataset("evalall")
            with self.assertRaises(lastmile.ConflictError) as cm:
                b.next()
        msg = str(cm.exception)
        self.assertIn("same job", msg)
        self.assertIn("RANK", msg)

class TestStagedPrefetch(unittest.TestCase):
    """Host staging (lastmile.cuda.HostStaging, FakeCUDA of test_cuda.py):
    a trainer that takes the next batch before it queues its step on the
    current one (a one-batch prefetch, as torchrec's pipelines do). Event
    ids of FakeCUDA grow in the order the events are recorded, which on the
    trainer's stream is stream order: a device slot may be overwritten only
    after the stream has passed the work queued on the batch it held."""

    def setUp(self):
        if torch is None:
            self.skipTest("needs torch")
        import threading

        import ringwriter as rw
        from test_cuda import FIELDS, FakeCUDA

        self.dir = tempfile.mkdtemp(prefix="lm-rv-stage-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.w = rw.RingWriter("stage", self.dir, FIELDS, slot_count=4, slot_size=2 << 20)
        self.w.create()
        self.addCleanup(self.w.close)

        def produce():
            for s in range(6):
                cols, valid, rows = rw.make_batch(s, FIELDS)
                self.w.publish(cols, rows, valid=valid, batch_index=s)
            self.w.finish("done")

        t = threading.Thread(target=produce, daemon=True)
        t.start()
        self.addCleanup(t.join, 10)
        self.ring = lastmile.Ring.open("stage", self.dir, timeout=30)
        self.addCleanup(self.ring.close)
        self.fake = FakeCUDA(self.ring)

    def _stager(self):
        """take(): the next batch, staged into one of 3 device slots (a
        batch's slot takes the batch 3 after it), as a trainer takes it."""
        import lastmile.cuda as lmcuda

        st = lmcuda.HostStaging(self.ring, "cuda:0", pool=3, backend=self.fake)
        self.addCleanup(st.close)

        def take():
            st.before_next()
            return st.stage(self.ring.next())

        return take

    def test_prefetch_one_batch_ahead(self):
        take = self._stager()
        cur = take()
        step_done = {}  # batch -> a mark on the trainer's stream after its step
        for j in range(5):
            nxt = take()                          # prefetch batch j + 1
            step_done[j] = self.fake.mark()       # then queue the step on batch j
            cur = nxt
        copies = [c for c in self.fake.calls if c[0] == "copy"]
        # batch j + 3 reuses batch j's device slot: its copy must wait for a
        # point of the trainer's stream after batch j's step was queued
        for j in range(len(copies) - 3):
            after = copies[j + 3][4]
            self.assertIsNotNone(after)
            self.assertGreater(after, step_done[j].id,
                               "batch %d's copy overwrites batch %d's device slot before its step ran"
                               % (j + 3, j))
        del cur

    def test_kept_staged_batch_is_refused_once_its_slot_is_reused(self):
        # A staged batch kept past its device slot's reuse (pool=3: batch 0's
        # slot takes batch 3) reads another batch's bytes: refused, like a
        # released ring batch, instead of released == False for ever.
        take = self._stager()
        b0 = take()
        kept = [take(), take()]
        self.assertFalse(b0.released)
        b0["id"]  # noqa: B018 - still valid: its slot is not reused yet
        kept.append(take())  # batch 3 into batch 0's device slot
        self.assertTrue(b0.released)
        with self.assertRaises(RuntimeError):
            b0["id"]  # noqa: B018
        self.assertFalse(kept[-1].released)
        kept[-1]["id"]  # noqa: B018
        self.assertFalse(kept[0].detach().released)  # a copy is its own

    def test_detach_of_a_staged_batch_outlives_its_device_slot(self):
        # batch.detach() is documented as the copy that stays valid after
        # the ring moves on. A staged batch is an OwnedBatch, which detach()
        # returned as it is: the "copy" was the batch itself, views of a
        # device slot that batch 3 overwrites (pool=3).
        take = self._stager()
        b0 = take()
        want = b0["id"].clone()
        d = b0.detach()
        self.assertIsNot(d, b0)
        kept = [take(), take(), take()]  # batch 3 into batch 0's device slot
        self.assertTrue(b0.released)
        self.assertFalse(d.released)
        self.assertTrue(torch.equal(d["id"], want))
        del kept

    def test_pin_memory_of_a_staged_batch_keeps_its_release_check(self):
        # DataLoader(pin_memory=True) over Dataset(device="cuda") pins each
        # staged batch: its tensors are on the device already, and the
        # batch handed on must still be refused once its device slot is
        # reused, not turn into an OwnedBatch that never is.
        take = self._stager()
        p = take().pin_memory()
        kept = [take(), take(), take()]  # batch 3 into batch 0's device slot
        self.assertTrue(p.released)
        with self.assertRaises(RuntimeError):
            p["id"]  # noqa: B018
        del kept


class TestCursorChecks(unittest.TestCase):
    def test_state_dict_cursor_negative(self):
        # a checkpoint's cursor (a dict, as state_dict() writes it) is checked
        # like cursor=(e, b): a negative epoch or batch is a ValueError here,
        # not an attach that lastmiled refuses later
        from lastmile.position import _position

        with self.assertRaises(ValueError):
            _position((-1, 0))
        with self.assertRaises(ValueError):
            _position({"epoch": -1, "batch": 0})
        with self.assertRaises(ValueError):
            _position({"epoch": 0, "batch": -3})
        self.assertEqual(_position({"epoch": 1, "batch": 2}), (1, 2))


@unittest.skipIf(torch is None, "needs torch")
class TestPinDeviceBatch(unittest.TestCase):
    def test_pin_memory_of_a_device_batch(self):
        # Dataset(device="cuda") with DataLoader(..., pin_memory=True), a
        # common reflex: the loader calls batch.pin_memory() on a batch whose
        # tensors are already on the device. Pinning is for host memory: the
        # device tensors are kept as they are, not "cannot pin
        # 'CUDALongType' only dense CPU tensors can be pinned". (A meta
        # tensor stands in for a CUDA one here.)
        from lastmile.format import Cursor, Field, KeyedJagged
        from lastmile.owned import OwnedBatch

        dev = torch.device("meta")
        kj = KeyedJagged(("a",), torch.zeros(3, dtype=torch.int64, device=dev),
                         torch.ones(3, dtype=torch.int64, device=dev), torch.arange(4, device=dev))
        fields = [Field(0, "x", "dense", 6, (), False, False), Field(1, "sparse", "jagged", 6, (), False, False, keys=("a",))]
        b = OwnedBatch(None, fields, {"x": torch.zeros(3, dtype=torch.int64, device=dev), "sparse": kj}, {}, 3, 0,
                       Cursor(0, 0, 0, False), 0, True)
        p = b.pin_memory()
        self.assertEqual(p["x"].device.type, "meta")
        self.assertEqual(p["sparse"].keys, ("a",))
        self.assertEqual(p.cursor, b.cursor)


class TestLaunchNamesGlobalRank(unittest.TestCase):
    def test_failed_rank_is_the_global_one(self):
        # node 1 of 2, 2 processes a node: its second process is rank 3 (its
        # RANK, and what --tag prints), not "rank 1"
        import contextlib
        import io

        from lastmile.launch import launch

        err = io.StringIO()
        code = "import os, sys; sys.exit(3 if os.environ['LOCAL_RANK'] == '1' else 0)"
        with contextlib.redirect_stderr(err):
            rc = launch([sys.executable, "-c", code], 2, nnodes=2, node_rank=1, master_port=29999, grace=5)
        self.assertEqual(rc, 3)
        self.assertIn("rank 3 exited with 3", err.getvalue())


if __name__ == "__main__":
    unittest.main()
