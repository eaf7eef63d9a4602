"""Tests of lastmile.Dataset and lastmile.control against a fake lastmiled
(tests/fakedaemon.py: the control API on a temporary unix socket, rings from
the pure-Python test producer in child processes).

Run: /usr/bin/python3 -m unittest discover -s python/tests -t python -v
"""

import gc
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

import lastmile  # noqa: E402
import lastmile.dataset  # noqa: E402
import daemonproc  # noqa: E402
import fakedaemon  # noqa: E402
from fakedaemon import row_id  # noqa: E402
from lastmile import control  # noqa: E402

try:
    import torch
except Exception:  # pragma: no cover - torch is optional
    torch = None

SPEC = "version: 1\nname: fake\ninputs: [data]\nbatch: {size: 4}\n"


class FakeDaemonCase(unittest.TestCase):
    rows, per_epoch, epochs = 4, 5, 2

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="lastmile-ds-")
        self.sock = os.path.join(self.tmp, "lastmiled.sock")
        self.shm = os.path.join(self.tmp, "shm")
        os.mkdir(self.shm)
        self.fake = fakedaemon.FakeDaemon(self.sock, self.shm, rows=self.rows,
                                          per_epoch=self.per_epoch, epochs=self.epochs).start()
        self.spec_path = os.path.join(self.tmp, "job.yaml")
        with open(self.spec_path, "w") as f:
            f.write(SPEC)
        self.datasets = []
        # keep reattach warnings out of the test output, but look at them
        self.logged = []
        handler = logging.Handler()
        handler.emit = lambda rec: self.logged.append(rec.getMessage())
        log = logging.getLogger("lastmile")
        log.addHandler(handler)
        self.addCleanup(log.removeHandler, handler)

    def tearDown(self):
        for ds in self.datasets:
            ds.close()
        self.fake.close()
        gc.collect()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def dataset(self, rank=0, world_size=2, **kw):
        kw.setdefault("socket", self.sock)
        kw.setdefault("open_timeout", 30)
        kw.setdefault("timeout", 60)
        ds = lastmile.Dataset(kw.pop("spec", self.spec_path), rank, world_size, **kw)
        self.datasets.append(ds)
        return ds

    def all_ids(self, rank, world=2, start=(0, 0)):
        out = []
        for e in range(self.epochs):
            for i in range(self.per_epoch):
                if (e, i) >= start:
                    out += [row_id(e, i, rank, r, world, self.rows) for r in range(self.rows)]
        return out

    def drain(self, ds, ids=None):
        """Take every batch, checking each against its cursor; returns the row ids."""
        ids = [] if ids is None else ids
        for b in ds:
            c = b.cursor
            col = b["id"]
            got = col.tolist()
            self.assertEqual(got, [row_id(c.epoch, c.batch_index, ds.rank, r, 2, self.rows)
                                   for r in range(self.rows)])
            ids += got
        return ids


class TestTorchrunEnv(unittest.TestCase):
    def dataset_from_env(self, **env):
        """A Dataset made with env set (torchrun's variables) over a fake
        daemon; returns it and the daemon."""
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp, True)
        fake = fakedaemon.FakeDaemon(os.path.join(tmp, "s"), tmp).start()
        self.addCleanup(fake.close)
        env["LASTMILE_SOCKET"] = fake.sock
        old = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            return lastmile.Dataset(SPEC), fake
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    def test_dataset_reads_torchrun_env(self):
        ds, fake = self.dataset_from_env(RANK="1", WORLD_SIZE="2", LOCAL_RANK="1")
        self.assertEqual((ds.rank, ds.world_size, ds.local_rank), (1, 2, 1))
        self.assertEqual(ds.client.socket, fake.sock)
        self.assertEqual(fake.requests[0][2]["world_size"], 2)
        self.assertNotIn("hosts", fake.requests[0][2])

    def test_dataset_on_the_second_of_two_hosts(self):
        ds, fake = self.dataset_from_env(RANK="3", WORLD_SIZE="4", LOCAL_RANK="1", LOCAL_WORLD_SIZE="2",
                                         GROUP_RANK="1")
        self.assertEqual((ds.rank, ds.world_size, ds.hosts, ds.host), (3, 4, 2, 1))
        body = fake.requests[0][2]
        self.assertEqual((body["world_size"], body["hosts"], body["host"]), (4, 2, 1))


class NoRankEnvCase(FakeDaemonCase):
    """Without torchrun's variables in the environment."""

    def setUp(self):
        super().setUp()
        env = mock.patch.dict(os.environ)
        env.start()
        self.addCleanup(env.stop)
        for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK"):
            os.environ.pop(k, None)


class TestShareCounts(FakeDaemonCase):
    """With torch.distributed over the world, a Dataset on one of several
    hosts asks its daemon to count only its share (share_counts), and
    still runs against a lastmiled older than that."""

    def run_dataset(self, old):
        self.fake.old = old
        exchanged = []
        with mock.patch.object(lastmile.dataset, "usable_group", lambda w: object()), \
                mock.patch.object(lastmile.dataset, "exchange", lambda *a, **k: exchanged.append(a)):
            ds = lastmile.Dataset(SPEC, 0, 2, socket=self.fake.sock, hosts=2, host=0)
        posts = [b for (m, p, b) in self.fake.requests if m == "POST" and p == "/v1/jobs"]
        return ds, [b.get("share_counts") for b in posts], exchanged

    def test_share_counts(self):
        ds, posts, exchanged = self.run_dataset(old=False)
        self.assertEqual(posts, [True])
        self.assertEqual(len(exchanged), 1)

    def test_a_daemon_older_than_share_counts(self):
        ds, posts, exchanged = self.run_dataset(old=True)
        self.assertEqual(posts, [True, None])
        self.assertTrue(ds.job["id"])
        self.assertEqual(len(exchanged), 1)  # it finds the old daemon out itself (lastmile/hosts.py)


class TestSubmit(FakeDaemonCase):
    def test_submit_then_join(self):
        a = self.dataset(0)
        b = self.dataset(1)
        self.assertTrue(a.created)
        self.assertFalse(b.created)
        self.assertEqual(a.job_id, b.job_id)
        m, p, body = self.fake.requests[0]
        self.assertEqual((m, p), ("POST", "/v1/jobs"))
        self.assertEqual(body, {"spec": SPEC, "world_size": 2, "weight": 1, "base_dir": self.tmp,
                                "file": self.spec_path})
        # a different weight is a different job
        c = self.dataset(0, weight=3)
        self.assertTrue(c.created)
        self.assertNotEqual(c.job_id, a.job_id)
        # no attach before the first batch
        self.assertEqual(self.fake.attaches(), [])

    def test_spec_forms(self):
        ds = self.dataset(spec=SPEC)  # text: base dir is the working directory
        self.assertEqual(self.fake.requests[-1][2]["base_dir"], os.getcwd())
        self.assertEqual(ds.spec, SPEC)
        self.dataset(spec={"version": 1, "name": "d"})
        self.assertEqual(self.fake.requests[-1][2]["spec"], '{"version": 1, "name": "d"}')
        with self.assertRaisesRegex(FileNotFoundError, "job spec .*missing.yaml not found"):
            self.dataset(spec=os.path.join(self.tmp, "missing.yaml"))

    def test_errors_are_in_lastmile(self):
        # docs/python.md, Reference: "Errors (all in `lastmile`)"
        for name in ("SpecError", "FieldError", "DaemonUnavailableError", "PermissionDeniedError",
                     "ConflictError", "JobNotFoundError", "ProducerError", "CursorError", "EpochError"):
            with self.subTest(name=name):
                self.assertIn(name, lastmile.__all__)
                self.assertTrue(hasattr(lastmile, name))
        self.assertIs(lastmile.FieldError, control.FieldError)

    def test_spec_error_lines(self):
        self.fake.submit_error = (400, {"error": "spec has 3 errors", "fields": [
            {"line": 4, "field": "batch.size", "msg": "must be at least 1"},
            {"line": 9, "field": "pipeline[0].map.x", "msg": "unknown function foo"},
            {"line": 0, "field": "", "msg": "no inputs"}]})
        with self.assertRaises(lastmile.SpecError) as cm:
            self.dataset()
        e = cm.exception
        self.assertIsInstance(e, ValueError)
        self.assertEqual(e.status, 400)
        self.assertEqual([(x.field, x.line) for x in e.errors],
                         [("batch.size", 4), ("pipeline[0].map.x", 9), ("", None)])
        self.assertEqual(str(e), self.spec_path + ": spec has 3 errors\n"
                         "  line 4: batch.size: must be at least 1\n"
                         "  line 9: pipeline[0].map.x: unknown function foo\n"
                         "  no inputs")

    def test_one_spec_error_said_once(self):
        self.fake.submit_error = (400, {"error": "spec has 1 error: shufle: unknown field", "fields": [
            {"line": 8, "field": "shufle", "msg": "unknown field", "file": self.spec_path}]})
        with self.assertRaises(lastmile.SpecError) as cm:
            self.dataset()
        self.assertEqual(str(cm.exception), self.spec_path + ":8: shufle: unknown field")

    def test_conflict_and_refusal(self):
        self.fake.submit_error = (409, {"error": "job \"fake\" exists with another spec"})
        with self.assertRaisesRegex(lastmile.ConflictError, "exists with another spec"):
            self.dataset()
        self.fake.submit_error = (403, {"error": "uid 1000 may not submit jobs"})
        with self.assertRaisesRegex(lastmile.PermissionDeniedError,
                                    "lastmiled refused POST /v1/jobs: uid 1000 may not"):
            self.dataset()
        self.fake.submit_error = (500, {"error": "disk full"})
        with self.assertRaisesRegex(lastmile.ControlError, "answered 500 to POST /v1/jobs: disk full"):
            self.dataset()

    def test_daemon_not_running(self):
        missing = os.path.join(self.tmp, "nope.sock")
        with self.assertRaises(lastmile.DaemonUnavailableError) as cm:
            self.dataset(socket=missing)
        msg = str(cm.exception)
        self.assertIn("no lastmiled socket at " + missing, msg)
        self.assertIn("is lastmiled running? Check `systemctl status lastmiled`", msg)
        self.assertIn("LASTMILE_SOCKET", msg)
        self.assertIsInstance(cm.exception, ConnectionError)
        # a stale socket file: refused
        self.fake.stop(remove_socket=False)
        import socket as so
        s = so.socket(so.AF_UNIX)
        stale = os.path.join(self.tmp, "stale.sock")
        s.bind(stale)
        s.close()
        with self.assertRaisesRegex(lastmile.DaemonUnavailableError,
                                    "does not accept connections on .*stale.sock"):
            self.dataset(socket=stale)

    @unittest.skipUnless(os.geteuid() == 0, "needs root to run a client as another user")
    def test_socket_permission_denied(self):
        os.chmod(self.tmp, 0o755)
        os.chmod(self.sock, 0o600)  # root-only socket; the client runs as nobody
        code = ("import sys; sys.path.insert(0, %r)\n"
                "import lastmile\n"
                "try:\n"
                "    lastmile.Client(%r).status()\n"
                "except lastmile.PermissionDeniedError as e:\n"
                "    print('DENIED', e)\n" % (daemonproc.public_pyroot(), self.sock))
        out = subprocess.run([sys.executable, "-c", code], user=65534, group=65534,
                             capture_output=True, text=True, timeout=60, cwd="/")
        self.assertIn("DENIED permission denied on lastmiled's socket " + self.sock, out.stdout,
                      out.stderr)


class TestIterate(FakeDaemonCase):
    def test_every_batch_once_and_cursor(self):
        ds = self.dataset(1)
        self.assertIsNone(ds.cursor)
        ds.next()
        self.assertEqual(ds.cursor, (0, 1))
        # back to "where the ring stands" (the fake starts the ring over)
        ds.load_state_dict(dict(ds.state_dict(), cursor=None))
        self.assertIsNone(ds.cursor)
        seen = []
        for b in ds:
            seen.append((b.cursor.epoch, b.cursor.batch_index))
            c = b.cursor
            self.assertEqual(ds.cursor, c.following())
            if torch is not None:
                self.assertIsInstance(b["id"], torch.Tensor)
                tok = b["tokens"]
                self.assertIsInstance(tok, lastmile.Ragged)
                self.assertEqual(tok.offsets.dtype, torch.int64)
                ids = b["id"].tolist()
                want = [i for i in ids for _ in range(i % 3)]
                self.assertEqual(tok.values.tolist(), want)
                self.assertEqual(b["x"][:, 1].tolist(), [-float(i) for i in ids])
        self.assertEqual(seen, [(e, i) for e in range(2) for i in range(5)])
        self.assertEqual(ds.cursor, (2, 0))
        self.assertEqual(ds.next(), None)
        self.assertEqual(self.fake.attaches(), [{"rank": 1}, {"rank": 1}])
        self.assertEqual(self.fake.requests[-1][2]["wait"], 30)  # open_timeout
        self.assertEqual(ds.state_dict()["cursor"], {"epoch": 2, "batch": 0})

    def test_numpy(self):
        ds = self.dataset(0, torch=False)
        b = ds.next()
        import numpy as np
        self.assertIsInstance(b["id"], np.ndarray)
        self.assertEqual(b["id"].tolist(), [row_id(0, 0, 0, r) for r in range(4)])

    def test_two_ranks(self):
        a, b = self.dataset(0), self.dataset(1)
        ids = self.drain(a) + self.drain(b)
        self.assertEqual(sorted(ids), sorted(self.all_ids(0) + self.all_ids(1)))
        self.assertEqual(len(set(ids)), len(ids))

    def test_start_cursor(self):
        ds = self.dataset(0, cursor=(0, 3))
        ids = self.drain(ds)
        self.assertEqual(self.fake.attaches(), [{"rank": 0, "cursor": {"epoch": 0, "batch": 3}}])
        self.assertEqual(ids, self.all_ids(0, start=(0, 3)))
        # a checkpoint taken at the end of the job: nothing left, and no
        # ring opened; the daemon is told so (an attach at that cursor,
        # which it refuses), so that a job made for nobody is canceled
        done = self.dataset(1, cursor=(2, 0))
        self.assertEqual(list(done), [])
        self.assertEqual(self.fake.attaches()[1:], [{"rank": 1, "cursor": {"epoch": 2, "batch": 0}}])
        self.assertIsNone(done.ring)

    def test_cursor_past_the_epoch(self):
        # 5 batches per epoch: (0, 6) would skip to epoch 1 silently
        ds = self.dataset(cursor=(0, 6))
        with self.assertRaisesRegex(ValueError, r"cursor \(0, 6\): batch 6 is past the end of epoch 0 "
                                                r"of job fake, which has 5 batches per rank"):
            ds.next()
        self.assertEqual(self.fake.attaches(), [])  # refused before lastmiled restarts the rank
        ds2 = self.dataset(rank=1, cursor=(0, 0))
        self.assertEqual(len(ds2), 5)  # known: load_state_dict refuses at once
        with self.assertRaisesRegex(ValueError, "which has 5 batches per rank"):
            ds2.load_state_dict({"version": 1, "cursor": {"epoch": 1, "batch": 7}}, strict=False)
        self.assertEqual(ds2.cursor, (0, 0))  # unchanged by the refused state
        ds3 = self.dataset(rank=1)  # unknown count: refused at the attach
        ds3.load_state_dict({"version": 1, "cursor": {"epoch": 1, "batch": 7}}, strict=False)
        with self.assertRaisesRegex(ValueError, r"cursor \(1, 7\): .* 5 batches per rank"):
            ds3.next()

    def test_cursor_at_the_end_of_an_epoch(self):
        # (0, 5) with 5 batches per epoch is the end of epoch 0: exact resume at (1, 0)
        ds = self.dataset(cursor=(0, 5))
        self.assertEqual(self.drain(ds), self.all_ids(0, start=(1, 0)))

    def test_cursor_unchecked_while_the_count_is_unknown(self):
        self.fake.count_known = False  # a pipeline that drops rows, before an epoch ended
        ds = self.dataset(cursor=(0, 9))
        self.assertEqual(self.drain(ds), self.all_ids(0, start=(1, 0)))

    def test_state_dict_roundtrip(self):
        ds = self.dataset(0)
        for _ in range(6):  # epoch 0 entirely (5) and batch 0 of epoch 1
            ds.next()
        sd = ds.state_dict()
        self.assertEqual(sd["cursor"], {"epoch": 1, "batch": 1})
        self.assertEqual((sd["rank"], sd["world_size"], sd["job_id"]), (0, 2, ds.job_id))
        # a new trainer of rank 1 resumes from rank 0's checkpoint (DDP: same step)
        ds.close()
        other = self.dataset(1)
        other.load_state_dict(sd)
        self.assertEqual(other.cursor, (1, 1))
        first = other.next()
        self.assertEqual((first.cursor.epoch, first.cursor.batch_index, first.cursor.rank), (1, 1, 1))
        self.assertEqual(self.fake.attaches()[-1], {"rank": 1, "cursor": {"epoch": 1, "batch": 1}})
        # loading mid-stream detaches and reattaches at the new cursor
        other.load_state_dict(dict(sd, cursor={"epoch": 0, "batch": 2}))
        self.assertEqual(other.next().cursor.batch_index, 2)
        # mismatches
        with self.assertRaisesRegex(ValueError, "world size 4"):
            other.load_state_dict(dict(sd, world_size=4))
        with self.assertRaisesRegex(ValueError, "different job spec"):
            other.load_state_dict(dict(sd, spec_sha256="0" * 64))
        other.load_state_dict(dict(sd, spec_sha256="0" * 64), strict=False)
        with self.assertRaisesRegex(ValueError, "not a lastmile.Dataset state_dict"):
            other.load_state_dict({"cursor": None})

    def test_job_error(self):
        self.fake.fail_after = {0: 2}
        ds = self.dataset(0)
        self.assertIsNotNone(ds.next())
        self.assertIsNotNone(ds.next())
        with self.assertRaisesRegex(lastmile.ProducerError, "job failed: boom"):
            ds.next()

    def test_attach_errors(self):
        ds = self.dataset(0)
        self.fake.attach_error = (400, {"error": "cursor epoch 9 is beyond the job's 2 epochs"})
        with self.assertRaisesRegex(lastmile.SpecError, "cursor epoch 9 is beyond"):
            ds.next()
        self.fake.attach_error = (409, {"error": "rank 0's ring already has a consumer (pid 7): "
                                                 "close it before attaching again"})
        with self.assertRaisesRegex(lastmile.ConflictError, "already has a consumer \\(pid 7\\)"):
            ds.next()
        self.fake.attach_error = None
        self.assertEqual(ds.next().cursor.batch_index, 0)

    def test_busy_rank(self):
        a = self.dataset(0)
        a.next()
        self.fake.keep = True  # hand out the running ring again
        b = self.dataset(0)
        with self.assertRaisesRegex(lastmile.RingBusyError,
                                    "rank 0 of job abc000000001 is already being read \\(pid %d\\): one "
                                    "trainer per rank" % os.getpid()):
            b.next()


class TestClient(FakeDaemonCase):
    def test_calls(self):
        c = lastmile.Client(self.sock)
        self.assertEqual(c.status()["version"], "fake")
        job, created = c.submit(SPEC, world_size=2)
        self.assertTrue(created)
        self.assertEqual([j["id"] for j in c.jobs()], [job["id"]])
        self.assertEqual(c.job(job["id"])["id"], job["id"])
        self.assertEqual(c.attach(job["id"], 1, (0, 2))["ring"], "fake.%s.r1" % job["id"])
        self.assertEqual(c.cancel(job["id"])["state"], "canceled")
        with self.assertRaisesRegex(lastmile.JobNotFoundError, 'no job "nope"'):
            c.job("nope")
        self.assertEqual(self.fake.requests[-1][1], "/v1/jobs/nope")

    def test_default_socket(self):
        old = os.environ.pop("LASTMILE_SOCKET", None)
        try:
            self.assertEqual(control.default_socket(), "/run/lastmile/lastmiled.sock")
            os.environ["LASTMILE_SOCKET"] = self.sock
            self.assertEqual(lastmile.Client().socket, self.sock)
        finally:
            os.environ.pop("LASTMILE_SOCKET", None)
            if old is not None:
                os.environ["LASTMILE_SOCKET"] = old

    def test_wait(self):
        c = lastmile.Client(os.path.join(self.tmp, "never.sock"))
        t0 = time.monotonic()
        with self.assertRaises(lastmile.DaemonUnavailableError):
            c.wait(0.5)
        self.assertGreaterEqual(time.monotonic() - t0, 0.5)


@unittest.skipUnless(os.access(daemonproc.LASTMILED, os.X_OK),
                     "%s is not built: run `make build` (go build -o bin/ ./cmd/...); `make test` "
                     "builds it first" % daemonproc.LASTMILED)
class TestWithLastmiled(unittest.TestCase):
    """End to end: the real lastmiled (bin/lastmiled) in a temporary directory,
    trainers in separate processes reading testdata/small (row_id 0..9999)."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="lm-e2e-")
        self.d = daemonproc.Lastmiled(self.tmp)
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.addCleanup(self.d.kill)
        self.d.start()
        self.procs = []

    def tearDown(self):
        for p, _, _ in self.procs:
            if p.is_alive():
                p.kill()
            p.join(10)

    def spec(self, name, batch, epochs, extra=""):
        path = os.path.join(self.tmp, name + ".yaml")
        with open(path, "w") as f:
            f.write("version: 1\nname: %s\ninputs: [%s]\ncolumns: [row_id, dense_0]\n"
                    "batch: {size: %d}\nepochs: %d\nring: {slots: 2}\n%s"
                    % (name, daemonproc.SMALL, batch, epochs, extra))
        return path

    def readers(self, spec, world_size=2, delay=0.0, ranks=None, **kw):
        ranks = range(world_size) if ranks is None else ranks
        for rank in ranks:
            out = os.path.join(self.tmp, "rank%d-%d.json" % (rank, len(self.procs)))
            progress = fakedaemon.CTX.Value("i", 0)
            cfg = dict(kw, spec=spec, rank=rank, world_size=world_size, socket=self.d.socket,
                       out=out, delay=delay)
            p = fakedaemon.CTX.Process(target=daemonproc.reader_main, args=(cfg, progress),
                                       daemon=True)
            p.start()
            self.procs.append((p, out, progress))
        return self.procs[-len(ranks):]

    def results(self, procs, timeout=300):
        out = []
        for p, path, _ in procs:
            p.join(timeout)
            self.assertFalse(p.is_alive(), "reader did not finish; daemon log:\n" + self.d.log())
            with open(path) as f:
                r = json.load(f)
            self.assertIsNone(r["error"], "reader failed; daemon log:\n" + self.d.log())
            out.append(r)
        return out

    def assert_every_row_once_per_epoch(self, results, epochs):
        by_epoch = {}
        for r in results:
            for e, row in r["rows"]:
                by_epoch.setdefault(e, []).append(row)
        self.assertEqual(sorted(by_epoch), list(range(epochs)))
        for e, rows in by_epoch.items():
            self.assertEqual(len(rows), 10000, "epoch %d: %d rows" % (e, len(rows)))
            self.assertEqual(sorted(rows), list(range(10000)), "epoch %d" % e)

    def test_cursor_past_the_epoch(self):
        # 10,000 rows in batches of 500: 20 batches per epoch. lastmiled
        # starts a cursor past them at the next epoch; the Dataset refuses
        # it, and takes (0, 20), the end of epoch 0, as (1, 0).
        spec = self.spec("e2e-cursor", batch=500, epochs=2)
        ds = lastmile.Dataset(spec, 0, 1, socket=self.d.socket, cursor=(0, 999), timeout=60, torch=False)
        self.addCleanup(ds.close)
        with self.assertRaisesRegex(ValueError, r"cursor \(0, 999\): batch 999 is past the end of epoch 0 "
                                                r"of job e2e-cursor, which has 20 batches per rank"):
            ds.next()
        ds = lastmile.Dataset(spec, 0, 1, socket=self.d.socket, cursor=(0, 20), timeout=60, torch=False)
        self.addCleanup(ds.close)
        got = [(b.cursor.epoch, b.cursor.batch_index) for b in ds]
        self.assertEqual(got, [(1, i) for i in range(20)])

    def test_two_ranks_every_row_once(self):
        spec = self.spec("e2e-two", batch=500, epochs=1)
        res = self.results(self.readers(spec))
        self.assert_every_row_once_per_epoch(res, 1)
        self.assertEqual([r["cursor"] for r in res], [[1, 0], [1, 0]])

    def test_kill9_daemon_mid_epoch(self):
        spec = self.spec("e2e-kill", batch=250, epochs=2)  # 20 batches per rank and epoch
        procs = self.readers(spec, delay=0.05)
        deadline = time.monotonic() + 120
        while min(pr.value for _, _, pr in procs) < 5:
            self.assertLess(time.monotonic(), deadline, "readers made no progress:\n" + self.d.log())
            time.sleep(0.02)
        self.d.kill()  # SIGKILL mid-epoch 0
        time.sleep(0.5)
        self.d.start()
        res = self.results(procs)
        self.assert_every_row_once_per_epoch(res, 2)
        self.assertTrue(all(r["reattaches"] >= 1 for r in res), res and [r["reattaches"] for r in res])
        self.assertIn("adopting ring", self.d.log())

    def test_kill9_trainer_and_resume_from_checkpoint(self):
        spec = self.spec("e2e-trainer", batch=250, epochs=1)
        ckpt = os.path.join(self.tmp, "rank1.ckpt")
        self.readers(spec, ranks=[0])
        (p1, _, pr1), = self.readers(spec, ranks=[1], delay=0.05, checkpoint=ckpt)
        deadline = time.monotonic() + 120
        while pr1.value < 6:
            self.assertLess(time.monotonic(), deadline, "reader made no progress:\n" + self.d.log())
            time.sleep(0.01)
        p1.kill()  # SIGKILL: the trainer dies holding a batch
        p1.join(10)
        with open(ckpt) as f:
            saved = json.load(f)
        self.assertGreaterEqual(saved["state"]["cursor"]["batch"], 6)
        # the restarted trainer resumes from its checkpoint
        (p1b, out1b, _), = self.readers(spec, ranks=[1], cursor=saved["state"]["cursor"])
        res = self.results([self.procs[0], (p1b, out1b, None)])
        rank1 = {"rows": saved["rows"] + res[1]["rows"]}
        self.assert_every_row_once_per_epoch([res[0], rank1], 1)


@unittest.skipUnless(os.access(daemonproc.LASTMILED, os.X_OK), "bin/lastmiled is not built")
@unittest.skipUnless(os.geteuid() == 0 and shutil.which("setpriv"),
                     "needs root and setpriv to run lastmiled as a service user")
class TestServiceCredentials(unittest.TestCase):
    """lastmiled as deploy/lastmiled.service runs it: an unprivileged user
    with exactly the unit's AmbientCapabilities=, serving a trainer of
    another user whose data only that user may read. The daemon is killed
    with SIGKILL mid-epoch and must adopt the trainer's ring (mode 0600,
    owned by the trainer) on restart."""

    SERVICE, TRAINER = 990, 65534  # a system uid; nobody

    def test_unit_capabilities_suffice(self):
        caps = daemonproc.unit_capabilities()
        self.assertIn("+dac_override", caps)
        self.assertIn("+setuid", caps)  # files are opened as their submitter
        self.assertIn("+setgid", caps)
        tmp = tempfile.mkdtemp(prefix="lm-unit-")
        self.addCleanup(shutil.rmtree, tmp, True)
        os.chmod(tmp, 0o755)
        run, state, shm, data, out = (os.path.join(tmp, n) for n in ("run", "state", "shm", "data", "out"))
        for d in (run, state, shm, data, out):
            os.mkdir(d)
        for d in (run, state):  # RuntimeDirectory=, StateDirectory=
            os.chown(d, self.SERVICE, self.SERVICE)
        os.chmod(shm, 0o1777)  # like /dev/shm
        os.chmod(out, 0o1777)
        for name in os.listdir(daemonproc.SMALL):
            shutil.copy(os.path.join(daemonproc.SMALL, name), data)
            os.chown(os.path.join(data, name), self.TRAINER, self.TRAINER)
            os.chmod(os.path.join(data, name), 0o600)
        os.chown(data, self.TRAINER, self.TRAINER)
        os.chmod(data, 0o700)
        spec = os.path.join(tmp, "job.yaml")
        with open(spec, "w") as f:
            f.write("version: 1\nname: unit\ninputs: [%s]\ncolumns: [row_id]\nbatch: {size: 250}\n"
                    "epochs: 1\nring: {slots: 2}\n" % data)
        os.chmod(spec, 0o644)

        d = daemonproc.Lastmiled(tmp, socket=os.path.join(run, "d.sock"),
                                 wrapper=daemonproc.as_service_user(self.SERVICE, self.SERVICE, caps),
                                 extra=["-socket-mode", "0666"])
        d.state = state
        self.addCleanup(d.kill)
        d.start()
        progress, result = os.path.join(out, "progress"), os.path.join(out, "result.json")
        code = daemonproc.READER % {"pyroot": daemonproc.public_pyroot(), "spec": spec, "socket": d.socket,
                                    "progress": progress, "out": result, "delay": 0.05}
        reader = subprocess.Popen([sys.executable, "-c", code], user=self.TRAINER,
                                  group=self.TRAINER, cwd="/", stderr=subprocess.PIPE)
        self.addCleanup(reader.kill)

        def taken():
            try:
                with open(progress) as f:
                    return int(f.read() or 0)
            except (OSError, ValueError):
                return 0

        deadline = time.monotonic() + 120
        while taken() < 5:
            if reader.poll() is not None:
                self.fail("reader exited: %s\n%s" % (reader.stderr.read(), d.log()))
            self.assertLess(time.monotonic(), deadline, "no progress:\n" + d.log())
            time.sleep(0.02)
        ring = os.path.join(shm, "lastmile.unit")
        st = os.stat(ring)
        self.assertEqual((st.st_uid, st.st_mode & 0o777), (self.TRAINER, 0o600))
        d.kill()
        time.sleep(0.3)
        d.start()
        _, err = reader.communicate(timeout=180)
        with open(result) as f:
            res = json.load(f)
        self.assertIsNone(res["error"], "%s\n%s" % (err, d.log()))
        self.assertEqual(sorted(res["rows"]), list(range(10000)))
        self.assertEqual(res["reattaches"], 1, d.log())
        self.assertIn("ring adopted", d.log())


if __name__ == "__main__":
    unittest.main()
