"""Cases a trainer hits that the other modules do not cover, found by a
review of the trainer client (lastmile.Dataset, batches, ranks). Each test
failed on the code before its fix for the reason its docstring gives.

Run: cd python && LASTMILE_SHM_DIR=$(mktemp -d) /usr/bin/python3 -m unittest tests.test_trainer_cases -v
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

import lastmile  # noqa: E402
import daemonproc  # noqa: E402
import fakedaemon  # noqa: E402
from lastmile.ranks import resolve_hosts, resolve_ranks  # noqa: E402
from test_dataset import FakeDaemonCase  # noqa: E402

try:
    import torch
except Exception:  # pragma: no cover - torch is optional
    torch = None


class TestExplicitRanksUnderTorchrun(unittest.TestCase):
    """rank=/world_size= given to the Dataset describe a world of their own
    (a data-parallel group of a tensor- or pipeline-parallel job, a job read
    by one process): torchrun's LOCAL_RANK, which numbers the process in
    torchrun's world, must not be taken as the local rank of that world."""

    # torchrun --nproc-per-node 8 on one host, the process of RANK 5
    ENV = {"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "5", "LOCAL_WORLD_SIZE": "8", "GROUP_RANK": "0"}

    def resolve(self, rank, world_size, env):
        r, ws, local = resolve_ranks(rank, world_size, env=env)
        return (r, ws) + resolve_hosts(r, ws, local, env=env)

    def test_data_parallel_group_on_one_host(self):
        # tensor parallel 2: data-parallel rank 5 // 2 = 2 of 8 // 2 = 4 ranks
        self.assertEqual(self.resolve(2, 4, self.ENV), (2, 4, 1, 0))

    def test_single_process_job_in_a_torchrun_process(self):
        # each rank reads its own one-rank job (say, an evaluation set)
        self.assertEqual(self.resolve(0, 1, self.ENV), (0, 1, 1, 0))


class TestWithLastmiled(unittest.TestCase):
    """Against the real lastmiled (bin/lastmiled, make build)."""

    @classmethod
    def setUpClass(cls):
        if not os.access(daemonproc.LASTMILED, os.X_OK):
            raise unittest.SkipTest("bin/lastmiled is not built: run `make build`")

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="lm-review-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.d = daemonproc.Lastmiled(self.tmp)
        self.addCleanup(self.d.kill)
        self.d.start()
        self.spec = os.path.join(self.tmp, "job.yaml")
        with open(self.spec, "w") as f:
            f.write("version: 1\nname: step0\ninputs: [%s]\ncolumns: [row_id]\nbatch: {size: 500}\n"
                    "epochs: 1\nring: {slots: 4}\n" % daemonproc.SMALL)

    def dataset(self, **kw):
        ds = lastmile.Dataset(self.spec, 0, 1, socket=self.d.socket, torch=False, open_timeout=30,
                              timeout=60, **kw)
        self.addCleanup(ds.close)
        return ds

    def test_step0_checkpoint_resumes_at_the_first_batch(self):
        """A checkpoint taken before the first batch (a step-0 checkpoint)
        must resume at the job's first batch. Its cursor is None ("wherever
        the daemon has this rank"), so a run that read some batches, died
        and resumed from it continues where the dead run's ring stood: the
        batches the dead run read are skipped, silently."""
        ds = self.dataset()
        step0 = ds.state_dict()  # saved with the initial model
        for _ in range(7):
            ds.next()
        ds.close()  # the run dies before its next checkpoint
        again = self.dataset()
        again.load_state_dict(step0)
        b = again.next()
        self.assertEqual((b.cursor.epoch, b.cursor.batch_index), (0, 0),
                         "resumed from a checkpoint taken before any batch, at %s" % (b.cursor,))

    def test_resume_after_the_job_is_done(self):
        """A run that dies in the job's last ring-full (every batch already
        published: the job is done, its ring still holds the last ones)
        and resumes from an older checkpoint joins the done job when it
        submits again. Its attach was refused ("job is done: its rings
        cannot be regenerated ...; submit it again"), and submitting again
        joined the same done job, until lastmiled forgot it minutes later."""
        ds = self.dataset()
        it = iter(ds)
        for _ in range(12):
            next(it)
        ckpt = ds.state_dict()  # the last checkpoint before the crash
        seen = []
        for _ in range(5):  # batches 12..16: production is done
            b = next(it)
            seen.append((b.cursor.batch_index, b["row_id"].tobytes()))
        client = lastmile.Client(self.d.socket)
        deadline = time.monotonic() + 30
        while client.job(ds.job_id)["state"] != "done":
            self.assertLess(time.monotonic(), deadline, "the job did not finish")
            time.sleep(0.02)
        del b, it
        ds.close()  # the run dies holding batch 16
        again = self.dataset()
        again.load_state_dict(ckpt)
        got = [(b.cursor.batch_index, b["row_id"].tobytes()) for b in again]
        self.assertEqual([i for i, _ in got], list(range(12, 20)))
        self.assertEqual(got[:5], seen, "batches made again differ from the first time")

    def test_a_checkpoint_past_the_end_leaves_no_job(self):
        """A trainer whose checkpoint stands at the job's end (the training
        script run again after it finished, as docs/daemon-usage.md says to
        continue) submits before it knows it has nothing left: the finished
        job is gone, so the submission made a new one, the iteration was
        empty, and the new job ran on for nobody, holding its memory and
        its name until the grace period reclaimed it (found by following
        the docs as a new user)."""
        with open(self.spec, "w") as f:
            f.write("version: 1\nname: pastend\ninputs: [%s]\ncolumns: [row_id]\nbatch: {size: 500}\n"
                    "epochs: 2\nring: {slots: 4}\n" % daemonproc.SMALL)
        ds = self.dataset(cursor=(2, 0))
        self.assertEqual(list(ds), [])
        client = lastmile.Client(self.d.socket)
        deadline = time.monotonic() + 10
        while True:
            live = [(j["id"], j["state"]) for j in client.jobs() if j.get("state") in ("pending", "running")]
            if not live:
                break
            self.assertLess(time.monotonic(), deadline, "a cursor past the end left jobs producing for nobody: %s" % live)
            time.sleep(0.05)

    def test_a_dropped_dataset_frees_its_rank(self):
        """A Dataset with device= (or a CUDA device) refers to itself through
        a lambda (self._place, or DatasetStaging's staging callback), so
        dropping it without close() leaves it, its Ring and the rank's
        consumer lock alive until the cycle collector happens to run: a new
        Dataset of the same rank (an evaluation loop that builds its Dataset
        each time, a retry) is refused with ConflictError "rank 0's ring
        already has a consumer (pid <this process>)". (gc is held off to
        make "has not run yet" deterministic.)"""
        import gc
        ds = lastmile.Dataset(self.spec, 0, 1, socket=self.d.socket, device="cpu", open_timeout=30,
                              timeout=60)
        ds.next()
        cursor = ds.cursor
        gc.disable()
        self.addCleanup(gc.enable)
        del ds
        again = self.dataset(cursor=cursor)
        self.assertEqual(again.next().cursor.batch_index, 1)


@unittest.skipIf(torch is None, "needs torch")
class TestCachedTensorsAreSharedAcrossBatches(FakeDaemonCase):
    """Batch.torch() hands out the per-slot cached tensor objects: the batch
    taken slot_count batches later gets the very same tensor objects. What a
    step did to a tensor object itself (not its data) leaked into that later
    batch: ``x.requires_grad_()`` and the gradient of an input-gradient step
    (FGSM-style adversarial training, saliency) accumulated into the later
    batch's ``x.grad``; an in-place view op (``y.unsqueeze_(1)``) changed the
    later batch's shape. Touched tensors are now rebuilt first."""

    SLOTS = 4  # fakedaemon's rings

    def batches(self):
        ds = self.dataset(0)
        return iter(ds)

    def test_input_gradient_does_not_leak(self):
        it = self.batches()
        first = next(it)
        x = first["x"]
        x.requires_grad_(True)
        (x * 3.0).sum().backward()  # x.grad: 3 everywhere
        for _ in range(self.SLOTS):
            b = next(it)
        x2 = b["x"]  # same slot as the first batch
        self.assertFalse(x2.requires_grad, "batch %d's x requires grad: set on batch 0's" % b.seq)
        self.assertIsNone(x2.grad, "batch %d's x carries batch 0's gradient" % b.seq)

    def test_in_place_view_op_does_not_leak(self):
        it = self.batches()
        first = next(it)
        first["id"].unsqueeze_(1)  # [B] -> [B, 1], on batch 0's tensor
        for _ in range(self.SLOTS):
            b = next(it)
        self.assertEqual(tuple(b["id"].shape), (self.rows,),
                         "batch %d's id has batch 0's in-place reshape" % b.seq)


class TestAttachWaitLongerThanRequestTimeout(FakeDaemonCase):
    """Dataset asks lastmiled to hold the attach up to open_timeout seconds
    (``wait``, default 60) for the job's rings, but reads the answer with
    the request timeout (request_timeout, default 30): a job whose rings
    take longer than request_timeout to appear (planning a large input,
    counting rows) times the attach out on the client, which attaches
    again and again and finally raises "lastmiled did not answer ... in
    time: is lastmiled running?" although the daemon answers within the
    wait it was given. Scaled down: request_timeout 1 s, open_timeout 3 s,
    rings there after 2 s."""

    def test_attach_answered_within_its_wait(self):
        import time
        real = self.fake.attach

        def slow(job, body):
            time.sleep(2.0)  # planning: the rings exist after 2 s
            return real(job, body)

        self.fake.attach = slow
        ds = self.dataset(0, request_timeout=1.0, open_timeout=3)
        b = ds.next()
        self.assertEqual(b.cursor.batch_index, 0)
        self.assertEqual(len(self.fake.attaches()), 1, "attached %d times" % len(self.fake.attaches()))


@unittest.skipIf(torch is None, "needs torch")
class TestCopyOnACudaDevice(FakeDaemonCase):
    """Dataset(device="cuda:N", copy=True) is documented to give batches
    that own their tensors (docs/python.md, "Device placement": "Copies are
    lastmile.OwnedBatches ... never released"; its device.py example keeps
    six batches, "owned: safe to keep"). With host staging (the default
    on a GPU) copy= is ignored: next() returns the stager's batch, views of
    one of its 3 pooled device slots, so batch i's tensors are overwritten
    by batch i + 3's copy. No GPU here: test_cuda's FakeCUDA plays the
    device with CPU tensors, as test_cuda does."""

    def test_kept_batches_keep_their_data(self):
        from unittest import mock
        import lastmile.cuda as lmcuda
        from test_cuda import FakeCUDA
        with mock.patch.object(lmcuda, "TorchCUDA", lambda device: FakeCUDA(None)):
            ds = self.dataset(0, device="cuda:0", copy=True)
            kept = [b for _, b in zip(range(6), ds)]  # docs/python.md's device.py
        for b in kept:
            c = b.cursor
            want = [fakedaemon.row_id(c.epoch, c.batch_index, 0, r, 2, self.rows) for r in range(self.rows)]
            self.assertEqual(b["id"].tolist(), want, "kept batch %d holds another batch's ids" % c.batch_index)


if __name__ == "__main__":
    unittest.main()
