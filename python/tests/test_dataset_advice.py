"""What lastmile.Dataset says when a job cannot go as its trainer expects:
a world size from the spec, a world read by one process, ranks without
trainers, an epoch without batches (lastmile/_advice.py); against the fake
lastmiled of test_dataset.

Run: /usr/bin/python3 -m unittest tests.test_dataset_advice -v (from python/)
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import lastmile  # noqa: E402
from test_dataset import NoRankEnvCase  # noqa: E402


class TestSpecWorldSize(NoRankEnvCase):
    """rank= without world_size= (and no WORLD_SIZE): the spec's world size
    (the fake daemon's jobs have world size 2 unless the submission says)."""

    def test_rank_takes_the_spec_world_size(self):
        ds = self.dataset(rank=1, world_size=None)
        self.assertEqual((ds.rank, ds.world_size), (1, 2))
        self.assertNotIn("world_size", self.fake.requests[0][2])
        self.assertEqual(self.drain(ds), self.all_ids(1))

    def test_rank_outside_the_spec_world_size(self):
        with self.assertRaisesRegex(ValueError, r"rank 5 is outside world size 2, the world_size of "
                                                r".*job.yaml"):
            self.dataset(rank=5, world_size=None)

    def test_world_size_env_wins_over_the_spec(self):
        os.environ["WORLD_SIZE"] = "4"
        ds = self.dataset(rank=3, world_size=None)
        self.assertEqual((ds.rank, ds.world_size), (3, 4))
        self.assertEqual(self.fake.requests[0][2]["world_size"], 4)


class TestNoBatch(NoRankEnvCase):
    """A job whose epoch fills no step gave len(ds) == 0 and no word: the
    trainer did 0 steps. It now warns, once the count is known."""

    def test_warns_when_an_epoch_gives_no_batch(self):
        self.fake.per_epoch, self.fake.count_known = 0, True
        ds = self.dataset()
        with self.assertLogs("lastmile", "WARNING") as logs:
            self.assertEqual(ds.batches_per_epoch, 0)
        self.assertIn("gives no batch per epoch", "\n".join(logs.output))


class TestReadingAlone(NoRankEnvCase):
    """A spec of several ranks read by a process that no launcher numbered:
    a warning that the other ranks must read, and a batch wait's timeout
    that says which ranks have no trainer."""

    def alone_warnings(self):
        return [m for m in self.logged if "this process is rank 0 of" in m]

    def test_warns_once_when_no_rank_is_given(self):
        lastmile._advice._WARNED_ALONE.clear()
        ds = self.dataset(rank=None, world_size=None)
        self.assertEqual((ds.rank, ds.world_size), (0, 2))
        w = self.alone_warnings()
        self.assertEqual(len(w), 1, self.logged)
        for part in ("rank 0 of 2 of job fake", "job.yaml", "The other 1 ranks must read too",
                     "stops after a few batches", "torchrun", "lastmile.launch --nproc 2",
                     "world_size=1"):
            self.assertIn(part, w[0])
        self.dataset(rank=None, world_size=None).close()  # the same job: said once
        self.assertEqual(len(self.alone_warnings()), 1)

    def test_no_warning_with_ranks_given(self):
        lastmile._advice._WARNED_ALONE.clear()
        self.dataset(rank=0, world_size=None)
        self.dataset(rank=None, world_size=1)
        os.environ.update(RANK="0", WORLD_SIZE="2")
        self.dataset(rank=None, world_size=None)
        self.assertEqual(self.alone_warnings(), [])

    def test_timeout_names_the_ranks_without_a_trainer(self):
        self.fake.interval = 30  # one batch, then nothing for the test's life
        ds = self.dataset(rank=0, world_size=4, timeout=0.5)
        self.assertIsNotNone(ds.next())
        gets = lambda: [r for r in self.fake.requests if r[0] == "GET" and "/jobs/" in r[1]]
        self.assertEqual(gets(), [])  # no request on the batch path
        self.fake.rings = [
            {"rank": 0, "consumer_attached": True, "consumer_pid": os.getpid(), "slots": 4,
             "occupancy": 0, "state": "running"},
            {"rank": 1, "consumer_attached": False, "consumer_pid": 0, "slots": 4, "occupancy": 4,
             "state": "running"},
            {"rank": 2, "consumer_attached": True, "consumer_pid": 7, "slots": 4, "occupancy": 1,
             "state": "running"},
            {"rank": 3, "consumer_attached": False, "consumer_pid": 0, "slots": 4, "occupancy": 2,
             "state": "running"},
        ]
        with self.assertRaises(TimeoutError) as cm:
            ds.next()
        msg = str(cm.exception)
        self.assertIn("no batch from ring", msg)
        self.assertIn("ranks 1, 3 of job fake: no trainer attached. Every rank", msg)
        self.assertIn("lastmile.launch --nproc 4", msg)
        self.assertEqual(len(gets()), 1)

    def test_timeout_with_every_rank_attached_is_unchanged(self):
        self.fake.interval = 30
        ds = self.dataset(rank=0, world_size=2, timeout=0.5)
        self.assertIsNotNone(ds.next())
        self.fake.rings = [{"rank": r, "consumer_attached": True, "consumer_pid": 7 + r, "slots": 4,
                            "occupancy": 0, "state": "running"} for r in range(2)]
        with self.assertRaisesRegex(TimeoutError, r"heartbeat [^;]*\)$"):
            ds.next()
