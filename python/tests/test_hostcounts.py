"""lastmile.hosts: the trainers' relay of their hosts' unit counts, against a
fake control client and a fake process group.

Run: cd python && /usr/bin/python3 -m unittest tests.test_hostcounts -v
"""

import os
import sys
import time
import unittest
from unittest import mock

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from lastmile import control, hosts  # noqa: E402


class FakeClient:
    """A daemon's counts endpoint: views, given in turn, and the posts."""

    def __init__(self, *views, job=None):
        self.views = list(views)
        self.posts = []
        self.job_view = job or {}

    waited = 0

    def counts(self, job_id, wait=None, rows=True):
        v = self.views.pop(0) if len(self.views) > 1 else self.views[0]
        if isinstance(v, Exception):
            raise v
        return v

    def wait(self, timeout):
        self.waited += 1

    post_errors = ()

    def post_counts(self, job_id, plan, rows, count_here=False):
        if self.post_errors:
            e, self.post_errors = self.post_errors[0], self.post_errors[1:]
            raise e
        self.posts.append("count_here" if count_here else (plan, list(rows)))
        return {}

    canceled = 0

    def job(self, job_id):
        return self.job_view

    def cancel(self, job_id):
        self.canceled += 1
        return {}


class FakeGroup:
    """all_gather_object that puts this rank's object at its rank and the
    others' given ones elsewhere (or raises fail)."""

    def __init__(self, rank, others, fail=None):
        self.rank, self.others, self.sent, self.fail = rank, others, None, fail

    def get_backend(self):
        return "gloo"

    def all_gather_object(self, got, obj, group=None):
        self.sent = obj
        if self.fail:
            raise self.fail
        it = iter(self.others)
        for i in range(len(got)):
            got[i] = obj if i == self.rank else next(it)


def share(host, plan, rows, complete=False):
    return {"plan": plan, "hosts": 2, "host": host, "rows": rows, "complete": complete, "state": "running"}


class TestExchange(unittest.TestCase):
    def run_exchange(self, client, others, rank=0, host=0):
        g = FakeGroup(rank, others)
        with mock.patch.object(hosts, "usable_group", lambda w: g):
            return hosts.exchange(client, "j1", host, 2, 2, "spec.yaml"), g

    def test_shares_merge_and_post(self):
        c = FakeClient({"rows": None, "state": "running"}, share(0, "sha256:a", [5, -1, 7, -1]))
        ok, g = self.run_exchange(c, [((1, "sha256:a", [6, 8], False, False), None)])
        self.assertTrue(ok)
        self.assertEqual(g.sent, ((0, "sha256:a", [5, 7], False, False), None))
        self.assertEqual(c.posts, [("sha256:a", [5, 6, 7, 8])])

    def test_a_restarting_daemon_is_waited_for(self):
        c = FakeClient(control.DaemonUnavailableError("restarting"), share(0, "sha256:a", [5, -1]))
        c.post_errors = (control.DaemonUnavailableError("restarting again"),)
        self.run_exchange(c, [((1, "sha256:a", [6], False, False), None)])
        self.assertEqual((c.waited, c.posts), (2, [("sha256:a", [5, 6])]))

    def test_a_hosts_other_ranks_send_the_plan_only(self):
        c = FakeClient(share(0, "sha256:a", [5, -1]))
        g = FakeGroup(1, [((0, "sha256:a", [5], False, False), None), ((1, "sha256:a", [6], False, False), None),
                          ((1, "sha256:a", None, False, False), None)])
        with mock.patch.object(hosts, "usable_group", lambda w: g):
            self.assertTrue(hosts.exchange(c, "j1", 0, 2, 4, "spec.yaml", first=False))
        self.assertEqual((g.sent, c.posts), (((0, "sha256:a", None, False, False), None), []))

    def test_a_host_that_knows_every_count_posts_nothing(self):
        c = FakeClient(share(0, "sha256:a", [5, 6, 7, 8], complete=True))
        self.run_exchange(c, [((1, "sha256:a", [6, 8], False, False), None)])
        self.assertEqual(c.posts, [])

    def test_complete_list_fills_a_share(self):
        c = FakeClient(share(1, "sha256:a", [-1, 6, -1, 8]))
        self.run_exchange(c, [((0, "sha256:a", [5, 7], True, False), None)], rank=1, host=1)
        self.assertEqual(c.posts, [("sha256:a", [5, 6, 7, 8])])

    def test_errors(self):
        for name, other, want in [
            ("plans differ", ((1, "sha256:b", [6, 8], False, False), None),
             "the 2 hosts planned different inputs (host 0: sha256:a; host 1: sha256:b)"),
            ("a share of another length", ((1, "sha256:a", [6, 8, 9], True, False), None), "host 0 sent 2 counts for its share of 3 units"),
            ("a unit nobody counted", ((1, "sha256:a", [-1, 8], False, False), None), "no host counted unit 1"),
        ]:
            with self.subTest(name):
                c = FakeClient(share(0, "sha256:a", [5, -1, 7, -1]))
                with self.assertRaises(ValueError) as cm:
                    self.run_exchange(c, [other])
                self.assertIn(want, str(cm.exception))
                self.assertEqual((c.posts, c.canceled), ([], 1))

    def test_a_failed_host_stops_every_rank(self):
        # This host's job failed: its rank still joins the collective, with the error.
        c = FakeClient({"rows": None, "state": "failed"}, job={"error": "unit 3: corrupt page"})
        with self.assertRaises(control.ControlError) as cm:
            _, g = self.run_exchange(c, [((1, "sha256:a", [6], False, False), None)])
        self.assertIn("host 0: job j1 failed before its units were counted: unit 3: corrupt page", str(cm.exception))
        # The other host's rank raises the same error.
        c = FakeClient(share(1, "sha256:a", [-1, 6]))
        with self.assertRaises(control.ControlError) as cm:
            self.run_exchange(c, [(None, "host 0: job j1 failed")], rank=1, host=1)
        self.assertIn("host 0: job j1 failed", str(cm.exception))
        self.assertEqual(c.posts, [])

    def test_a_group_that_cannot_gather_counts_each_host_alone(self):
        for first, posts in [(True, ["count_here"]), (False, [])]:
            c = FakeClient(share(0, "sha256:a", [5, -1]))
            g = FakeGroup(0, [], fail=RuntimeError("NCCL error: duplicate GPU detected"))
            with mock.patch.object(hosts, "usable_group", lambda w: g), self.assertLogs("lastmile", "WARNING") as logs:
                self.assertFalse(hosts.exchange(c, "j1", 0, 2, 2, "spec.yaml", first=first))
            self.assertEqual(c.posts, posts)
            self.assertIn("each host counts every unit itself", logs.output[0])

    def test_a_rank_waiting_for_slower_hosts_keeps_its_job(self):
        c = FakeClient(share(0, "sha256:a", [5, -1]))
        calls = []
        c.counts = lambda job_id, wait=None, rows=True: calls.append(rows) or {}
        with hosts._keepalive(c, "j1", every=0.01):
            deadline = time.monotonic() + 5
            while len(calls) < 3 and time.monotonic() < deadline:
                time.sleep(0.01)
        n = len(calls)
        self.assertGreaterEqual(n, 3)
        self.assertEqual(set(calls), {False})  # without the rows
        time.sleep(0.05)
        self.assertEqual(len(calls), n)  # stopped with the collective

    def test_a_daemon_older_than_the_exchange_makes_every_host_count_alone(self):
        c = FakeClient(control.JobNotFoundError("no such endpoint GET /v1/jobs/j1/counts: see docs/control-api.md"),
                       job={"plan_digest": "sha256:a"})
        _, g = self.run_exchange(c, [((1, "sha256:a", [6], False, False), None)])
        self.assertEqual((g.sent, c.posts), (((0, "sha256:a", None, True, True), None), []))
        # The other host, whose lastmiled shares, is told to count alone.
        c = FakeClient(share(1, "sha256:a", [-1, 6]))
        self.run_exchange(c, [((0, "sha256:a", None, True, True), None)], rank=1, host=1)
        self.assertEqual(c.posts, ["count_here"])

    def test_objects_travel_over_gloo(self):
        made = []

        class Dist:
            group = type("G", (), {"WORLD": object()})

            def __init__(self, backend):
                self.backend = backend

            def get_backend(self):
                return self.backend

            def new_group(self, backend):
                made.append(backend)
                return "gloo group %d" % len(made)

        self.assertIsNone(hosts._object_group(Dist("gloo")))
        nccl = Dist("nccl")
        self.assertEqual([hosts._object_group(nccl), hosts._object_group(nccl)], ["gloo group 1"] * 2)
        self.assertEqual(made, ["gloo"])

    def test_without_a_process_group_nothing_is_exchanged(self):
        c = FakeClient(share(0, "sha256:a", [5, -1]))
        with mock.patch.object(hosts, "usable_group", lambda w: None):
            self.assertFalse(hosts.exchange(c, "j1", 0, 2, 2, "spec.yaml"))
        self.assertEqual(c.posts, [])


if __name__ == "__main__":
    unittest.main()
