"""A tiny model trained through DataLoader(lastmile.Dataset(...), batch_size=None)
for two epochs, stopped mid-epoch after a checkpoint and resumed in a new
process: the resumed run sees exactly the batches (byte for byte) and the
losses of the uninterrupted run, and ends with the same weights.

The trainer is tests/train_tiny.py; each run is its own process. Against
the real lastmiled (bin/lastmiled, testdata/small) and against the fake one.

Run: cd python && /usr/bin/python3 -m unittest tests.test_train -v
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import daemonproc  # noqa: E402
import fakedaemon  # noqa: E402

try:
    import torch  # noqa: F401
except Exception:  # pragma: no cover - torch is optional
    torch = None

TRAINER = os.path.join(HERE, "train_tiny.py")


class ResumeCase:
    per_epoch = None  # batches per epoch and rank the spec gives
    stop_after = None  # steps before the checkpoint, mid-epoch 0

    def train(self, spec, **cfg):
        n = len(os.listdir(self.tmp))
        cfg.update(spec=spec, socket=self.socket, out=os.path.join(self.tmp, "out%d.json" % n),
                   checkpoint=os.path.join(self.tmp, "ckpt.pt"))
        path = os.path.join(self.tmp, "cfg%d.json" % n)
        with open(path, "w") as f:
            json.dump(cfg, f)
        r = subprocess.run([sys.executable, TRAINER, path], capture_output=True, text=True,
                           timeout=600)
        self.assertEqual(r.returncode, 0, "trainer failed:\n%s\n%s" % (r.stderr, self.log()))
        with open(cfg["out"]) as f:
            return json.load(f)

    def log(self):
        return ""

    def check_resume(self, spec_a, spec_b, **kw):
        full = self.train(spec_a, **kw)
        steps = full["steps"]
        self.assertEqual(len(steps), 2 * self.per_epoch)
        self.assertEqual([s["epoch"] for s in steps], [0] * self.per_epoch + [1] * self.per_epoch)
        self.assertEqual({s["len"] for s in steps}, {self.per_epoch})
        self.assertEqual(full["cursor"], [2, 0])
        # the two epochs are shuffled differently: the batches are not repeated
        self.assertEqual(len({s["digest"] for s in steps}), len(steps))

        first = self.train(spec_b, stop_after=self.stop_after, **kw)
        self.assertEqual(first["cursor"], [0, self.stop_after])
        rest = self.train(spec_b, resume=True, **kw)
        resumed = first["steps"] + rest["steps"]
        self.assertEqual([s["digest"] for s in resumed], [s["digest"] for s in steps])
        self.assertEqual([s["loss"] for s in resumed], [s["loss"] for s in steps])
        self.assertEqual(rest["weights"], full["weights"])
        self.assertEqual(rest["cursor"], [2, 0])
        return full


@unittest.skipIf(torch is None, "needs torch")
@unittest.skipUnless(os.access(daemonproc.LASTMILED, os.X_OK),
                     "%s is not built: run `make build`" % daemonproc.LASTMILED)
class TestTrainWithLastmiled(ResumeCase, unittest.TestCase):
    """testdata/small (10,000 rows): batches of 500, 20 per epoch (one rank),
    shuffled units and rows; a stack group of three dense floats ([B, 3])
    and a jagged group (KeyedJaggedTensor layout) of two categorical ids and
    a list<int64> sequence."""

    per_epoch, stop_after = 20, 13

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="lm-train-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.d = daemonproc.Lastmiled(self.tmp)
        self.addCleanup(self.d.kill)
        self.d.start()
        self.socket = self.d.socket

    def log(self):
        return self.d.log()

    def spec(self, name):
        path = os.path.join(self.tmp, name + ".yaml")
        with open(path, "w") as f:
            f.write("version: 1\nname: %s\ninputs: [%s]\n"
                    "columns: [label, dense_0, dense_1, dense_2, cat_0, cat_1, seq_0]\n"
                    "batch: {size: 500}\nepochs: 2\nseed: 7\n"
                    "shuffle: {units: true, buffer: 2048}\nring: {slots: 3}\n"
                    "pipeline:\n"
                    "  - stack: {output: dense, columns: [dense_0, dense_1, dense_2]}\n"
                    "  - jagged: {output: sparse, keys: [cat_0, {column: cat_1, hash_mod: 97},"
                    " {column: seq_0, key: history, max_length: 50}]}\n"
                    % (name, daemonproc.SMALL))
        return path

    def test_resume_mid_epoch_equals_uninterrupted(self):
        # Two jobs of the same data, seed and pipeline (names differ, so the
        # second is not the first, finished, job): the same batches.
        full = self.check_resume(self.spec("full"), self.spec("resumed"))
        self.assertEqual(full["schema"], {
            "label": "tensor int32 [500]", "dense": "tensor float32 [500, 3]",
            "sparse": "KeyedJagged ['cat_0', 'cat_1', 'history'], lengths [1500], offsets [1501]"})


@unittest.skipIf(torch is None, "needs torch")
class TestTrainWithFakeDaemon(ResumeCase, unittest.TestCase):
    per_epoch, stop_after = 6, 4

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="lm-train-fake-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        shm = os.path.join(self.tmp, "shm")
        os.mkdir(shm)
        self.socket = os.path.join(self.tmp, "d.sock")
        self.fake = fakedaemon.FakeDaemon(self.socket, shm, rows=8, per_epoch=self.per_epoch,
                                          epochs=2).start()
        self.addCleanup(self.fake.close)

    def test_resume_mid_epoch_equals_uninterrupted(self):
        spec = "version: 1\nname: fake\ninputs: [data]\nbatch: {size: 8}\n"
        self.check_resume(spec, spec, rank=1, world_size=2)


if __name__ == "__main__":
    unittest.main()
