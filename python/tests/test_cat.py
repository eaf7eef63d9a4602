"""``lastmile cat`` as the benchmarks use it: the ready mode's accounting.

Run: cd python && /usr/bin/python3 -m unittest tests.test_cat -v
"""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import ringwriter as rw  # noqa: E402
from lastmile.digest import cat  # noqa: E402
from test_ring import RingTestCase  # noqa: E402


class ReadyTests(RingTestCase):
    def run_ready(self, nbatches, slots, end="eos", limit=0):
        _, name, _ = self.producer(nbatches=nbatches, slot_count=slots, end=end)
        d, secs, cpu = cat(name, self.dir, ready=True, limit=limit, timeout=30)
        return d, secs, cpu

    def test_counts_exclude_each_slots_first_batch(self):
        d, secs, cpu = self.run_ready(nbatches=13, slots=4)
        self.assertEqual(d.batches, 13 - 4)
        self.assertEqual(d.rows, sum(rw.rows_for(s) for s in range(4, 13)))
        self.assertGreater(cpu, 0.0)
        self.assertGreaterEqual(secs, 0.0)

    def test_fewer_batches_than_slots(self):
        # nothing left to time after the warm-up: no batches, no error
        d, _, cpu = self.run_ready(nbatches=3, slots=4)
        self.assertEqual(d.batches, 0)
        self.assertEqual(cpu, 0.0)

    def test_limit(self):
        d, _, _ = self.run_ready(nbatches=20, slots=4, limit=5)
        self.assertEqual(d.batches, 5)

    def test_producer_that_stops_publishing(self):
        # A producer that keeps its ring open after its last batch (as the Go
        # engine does until every batch is released) never fills the ring
        # again: after 200 ms without a new batch the waiting ones are taken.
        _, name, _ = self.producer(nbatches=9, slot_count=4, end="halt")
        d, _, _ = cat(name, self.dir, ready=True, limit=5, timeout=30)
        self.assertEqual(d.batches, 5)


class BareNameTests(RingTestCase):
    def test_lists_rank_rings(self):
        from lastmile.__main__ import main

        for n in ["job.r0", "job.r1", "job.r10", "job.rx", "job.r01", "jobs.r0"]:
            open(os.path.join(self.dir, n), "w").close()
        import contextlib
        import io

        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            rc = main(["cat", "job", "--shm-dir", self.dir, "--timeout", "600"])
        self.assertEqual(rc, 1)
        self.assertIn("no ring job in %s, but 3 rings of its ranks (one per rank when "
                      "world_size > 1): job.r0, job.r1, job.r10; read one: python3 -m lastmile "
                      "cat --shm-dir %s job.r0" % (self.dir, self.dir), err.getvalue())
        # --dir, the old name of --shm-dir, still works
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            rc = main(["cat", "job", "--dir", self.dir, "--timeout", "600"])
        self.assertEqual(rc, 1)
        self.assertIn("rings of its ranks", err.getvalue())


class SummaryTests(RingTestCase):
    def test_fields_with_shapes(self):
        # The summary gives each field's shape: the width of [B, N] columns.
        import contextlib
        import io

        from lastmile.__main__ import main

        _, name, _ = self.producer(nbatches=3, slot_count=4, end="eos")
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            rc = main(["cat", name, "--shm-dir", self.dir, "--timeout", "30"])
        self.assertEqual(rc, 0)
        lines = out.getvalue().splitlines()
        fields = {ln.split()[0]: ln.split(None, 2)[2] for ln in lines[1:]}
        self.assertEqual(fields["id"], "dense [B]")
        self.assertEqual(fields["x"], "dense [B, 3]")
        self.assertEqual(fields["img"], "dense [B, 2, 2, 2]")
        self.assertEqual(fields["score"], "dense [B], %d nulls" % sum(
            int((~rw.make_batch(s)[1]["score"]).sum()) for s in range(3)))
        self.assertTrue(fields["tokens"].startswith("ragged, "), fields["tokens"])


if __name__ == "__main__":
    unittest.main()
