"""lastmile.Dataset across a producer's death: it waits for lastmiled,
attaches again at its cursor and delivers every batch once; against the
fake lastmiled of test_dataset.

Run: /usr/bin/python3 -m unittest tests.test_dataset_reattach -v (from python/)
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import threading  # noqa: E402
import time  # noqa: E402

import lastmile  # noqa: E402
from test_dataset import FakeDaemonCase  # noqa: E402


class TestReattach(FakeDaemonCase):
    def test_producer_death(self):
        self.fake.die_after = {0: 3}
        ds = self.dataset(0)
        ids = self.drain(ds)
        self.assertEqual(ids, self.all_ids(0))
        self.assertEqual(ds.reattaches, 1)
        self.assertEqual(self.fake.attaches(),
                         [{"rank": 0}, {"rank": 0, "cursor": {"epoch": 0, "batch": 3}}])
        self.assertEqual(len(self.logged), 1)
        self.assertRegex(self.logged[0], "producer .* died after publishing 3 batches.*waiting up "
                         "to 300s for lastmiled to reattach rank 0 at \\(epoch 0, batch 3\\)")

    def test_death_at_epoch_end(self):
        self.fake.die_after = {1: 5}
        ds = self.dataset(1)
        self.assertEqual(self.drain(ds), self.all_ids(1))
        self.assertEqual(self.fake.attaches()[-1], {"rank": 1, "cursor": {"epoch": 1, "batch": 0}})

    def test_daemon_restart(self):
        """The producer dies with the daemon; the socket is gone for a while."""
        self.fake.die_after = {0: 2}
        ds = self.dataset(0)
        ids = [ds.next()["id"].tolist(), ds.next()["id"].tolist()]
        self.fake.stop()  # daemon down: socket removed

        def restart():
            time.sleep(1.0)
            self.fake.start()

        t = threading.Thread(target=restart)
        t.start()
        try:
            ids = sum(ids, []) + self.drain(ds)
        finally:
            t.join()
        self.assertEqual(ids, self.all_ids(0))
        self.assertEqual(ds.reattaches, 1)
        statuses = [p for (m, p, b) in self.fake.requests if p == "/v1/status"]
        self.assertGreaterEqual(len(statuses), 1)

    def test_daemon_does_not_come_back(self):
        self.fake.die_after = {0: 1}
        ds = self.dataset(0, reconnect_timeout=1.0)
        ds.next()
        self.fake.stop()
        t0 = time.monotonic()
        with self.assertRaises(lastmile.DaemonUnavailableError) as cm:
            ds.next()
        self.assertLess(time.monotonic() - t0, 20)
        msg = str(cm.exception)
        self.assertIn("died after publishing 1 batches", msg)
        self.assertIn("is lastmiled running?", msg)
        self.assertIsInstance(cm.exception.__cause__, lastmile.ProducerDiedError)

    def test_draining_daemon(self):
        """503 answers (draining, Retry-After) are retried while reattaching."""
        self.fake.die_after = {0: 2}
        ds = self.dataset(0)
        ds.next()
        ds.next()
        self.fake.attach_unavailable = 2
        t0 = time.monotonic()
        self.assertEqual(self.drain(ds), self.all_ids(0, start=(0, 2)))
        self.assertGreaterEqual(time.monotonic() - t0, 2.0)  # honored Retry-After: 1 twice
        self.assertEqual(len(self.fake.attaches()), 4)
        # without a reconnect budget, the 503 is the error
        fake_ds = self.dataset(1, reconnect_timeout=0.5, open_timeout=None)
        self.fake.attach_unavailable = 1
        with self.assertRaisesRegex(lastmile.DaemonUnavailableError,
                                    "cannot serve POST /v1/jobs/.*/attach now: draining"):
            fake_ds.next()

    def test_replayed_batches_are_skipped(self):
        self.fake.die_after = {0: 3}
        ds = self.dataset(0)
        for _ in range(3):
            ds.next()
        self.fake.replay = 2  # the new producer restarts 2 batches early
        self.assertEqual(self.drain(ds), self.all_ids(0, start=(0, 3)))
        self.assertEqual(ds.skipped, 2)

    def test_gap_is_an_error(self):
        self.fake.die_after = {0: 3}
        ds = self.dataset(0)
        for _ in range(3):
            ds.next()
        self.fake.gap = 1
        with self.assertRaisesRegex(lastmile.CursorError,
                                    "expected batch 3 of epoch 0 next, .* delivered batch 4 of "
                                    "epoch 0; refusing to skip"):
            ds.next()

    def test_job_lost_is_resubmitted(self):
        self.fake.die_after = {0: 2}
        ds = self.dataset(0)
        ds.next()
        ds.next()
        old = ds.job_id
        with self.fake.lock:
            self.fake.jobs.clear()  # the daemon forgot the job
        self.assertEqual(self.drain(ds), self.all_ids(0, start=(0, 2)))
        self.assertNotEqual(ds.job_id, old)
