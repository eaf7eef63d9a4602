"""Ring format 1.1 in the Python client (docs/ring-format.md): padding rows,
validity of nullable dense and ragged fields, leftover rings, the
consumer_pid hint, and the checks 1.1 adds.

Run: cd python && /usr/bin/python3 -m unittest tests.test_v11 -v
The end-to-end tests need bin/lastmile (``make build``).
"""

import os
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
REPO = os.path.dirname(ROOT)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

import lastmile  # noqa: E402
import ringwriter as rw  # noqa: E402

try:
    import torch
except Exception:  # pragma: no cover - torch is optional
    torch = None

BIN = os.environ.get("LASTMILE_BIN", os.path.join(REPO, "bin", "lastmile"))

FIELDS = [
    rw.FieldSpec("id", "dense", "int64"),
    rw.FieldSpec("score", "dense", "float64", nullable=True),
    rw.FieldSpec("tags", "ragged", "int16", nullable=True),
]


def batch_of(seq, rows):
    """Columns and validity of a batch: ids seq*100+i; score and tags null
    on every third row (a null dense row holds 0, a null ragged row is empty)."""
    r = np.arange(rows)
    ok = r % 3 != 1
    lens = np.where(ok, r % 3 + 1, 0)
    cols = {
        "id": seq * 100 + r,
        "score": np.where(ok, r * 0.5, 0.0),
        "tags": (np.arange(lens.sum(), dtype=np.int16), np.concatenate([[0], np.cumsum(lens)])),
    }
    return cols, {"score": ok, "tags": ok}


class V11Case(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="lastmile-v11-")
        self.writers = []

    def tearDown(self):
        for w in self.writers:
            w.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def writer(self, name="r", version=(1, 1), fields=FIELDS):
        w = rw.RingWriter(name, self.dir, fields, slot_count=4, version=version).create()
        self.writers.append(w)
        return w

    def publish(self, w, seq, rows, pad=0, valid=None, **kw):
        cols, v = batch_of(seq, rows)
        w.publish(cols, rows, valid=valid or v, batch_index=seq, padded=pad > 0, pad_rows=pad, **kw)


class PaddingTests(V11Case):
    def test_pad_rows(self):
        """The real-row count reaches every form of a batch: numpy, torch,
        copies and a CPU device copy."""
        w = self.writer()
        self.publish(w, 0, 6)
        self.publish(w, 1, 6, pad=2)
        self.publish(w, 2, 6, pad=6)  # a batch that is all padding
        w.finish()
        want = [(0, 6), (2, 4), (6, 0)]
        with lastmile.Ring.open("r", dir=self.dir) as ring:
            self.assertEqual(ring.version, (1, 1))
            for b, (pad, real) in zip(ring, want):
                forms = [b, b.detach()]
                if torch is not None:
                    forms += [b.torch(), b.to("cpu", copy=True)]
                for x in forms:
                    self.assertEqual((x.rows, x.pad_rows, x.real_rows, x.padded), (6, pad, real, pad > 0), x)
                    m = x.row_mask()
                    self.assertEqual([bool(v) for v in m], [True] * real + [False] * pad)
                self.assertIn("padding %d" % pad if pad else "rows=6 cursor", repr(b))

    def test_pad_rows_iter_torch(self):
        if torch is None:
            self.skipTest("needs torch")
        w = self.writer()
        self.publish(w, 0, 5, pad=3)
        w.finish()
        with lastmile.Ring.open("r", dir=self.dir) as ring:
            (b,) = list(ring.iter_torch())
            self.assertTrue(b.is_torch)
            self.assertEqual((b.real_rows, b.pad_rows), (2, 3))
            self.assertIsInstance(b.row_mask(), torch.Tensor)

    def test_cat_counts_padding(self):
        """python3 -m lastmile cat says how many of the rows read are padding."""
        import contextlib
        import io

        from lastmile.__main__ import main

        w = self.writer()
        self.publish(w, 0, 6)
        self.publish(w, 1, 6, pad=4)
        w.finish()
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            self.assertEqual(main(["cat", "r", "--shm-dir", self.dir]), 0)
        self.assertIn("2 batches, 12 rows (4 of them padding),", out.getvalue())

    def test_format_10_padding_unknown(self):
        """A 1.0 ring flags padded batches without a count: the client says
        unknown rather than counting padding as real."""
        w = self.writer(version=(1, 0))
        self.publish(w, 0, 4)
        cols, v = batch_of(1, 4)
        w.publish(cols, 4, valid=v, padded=True)
        w.finish()
        with lastmile.Ring.open("r", dir=self.dir) as ring:
            a = ring.next().detach()
            b = ring.next()
            self.assertEqual((a.pad_rows, a.real_rows), (0, 4))
            self.assertEqual((b.padded, b.pad_rows, b.real_rows), (True, None, None))
            with self.assertRaisesRegex(ValueError, "does not say how many"):
                b.row_mask()
            self.assertIn("padding unknown", repr(b))

    def test_bad_pad_rows(self):
        for pad, padded, version, what in [(5, True, (1, 1), "pad_rows 5 in a batch of 4"),
                                           (2, False, (1, 1), "pad_rows 2"),
                                           (0, True, (1, 1), "pad_rows 0"),
                                           (2, False, (1, 0), "pad_rows 2")]:
            with self.subTest(pad=pad, padded=padded, version=version):
                name = "bad%d%d%d" % (pad, padded, version[1])
                w = self.writer(name=name, version=version)
                cols, v = batch_of(0, 4)
                w.publish(cols, 4, valid=v, padded=padded, pad_rows=pad)
                with lastmile.Ring.open(name, dir=self.dir) as ring:
                    with self.assertRaisesRegex(lastmile.RingFormatError, what):
                        ring.next()


class ValidityTests(V11Case):
    def check_validity(self, b, seq, rows):
        cols, v = batch_of(seq, rows)
        self.assertEqual(sorted(b.valid), ["score", "tags"])  # every nullable field, no other
        for name in ("score", "tags"):
            self.assertEqual([bool(x) for x in b.valid[name]], list(v[name]))
            self.assertEqual([bool(x) for x in b.is_null(name)], list(~v[name]))
        self.assertEqual([bool(x) for x in b.is_null("id")], [False] * rows)
        with self.assertRaises(KeyError):
            b.is_null("nope")
        score = np.asarray(b["score"])
        self.assertEqual(list(score[~v["score"]]), [0.0] * int((~v["score"]).sum()))
        tags = b["tags"]
        lens = np.asarray(tags.offsets[1:] - tags.offsets[:-1])
        self.assertTrue((lens[~v["tags"]] == 0).all())  # null ragged rows are empty

    def test_validity_every_form(self):
        """Dense and ragged nullable fields carry a mask in numpy batches,
        torch batches (iter_torch), copies and device copies."""
        w = self.writer()
        self.publish(w, 0, 7)
        self.publish(w, 1, 5)
        w.finish()
        with lastmile.Ring.open("r", dir=self.dir) as ring:
            for seq, b in enumerate(ring):
                rows = b.rows
                self.check_validity(b, seq, rows)
                self.check_validity(b.detach(), seq, rows)
                if torch is not None:
                    t = b.torch()
                    self.assertEqual(t.valid["score"].dtype, torch.bool)
                    self.check_validity(t, seq, rows)
                    self.check_validity(b.to("cpu", copy=True), seq, rows)
        if torch is not None:
            w = self.writer(name="t")
            self.publish(w, 0, 4)
            w.finish()
            with lastmile.Ring.open("t", dir=self.dir) as ring:
                for b in ring.iter_torch():
                    self.check_validity(b, 0, 4)

    def test_null_ragged_row_must_be_empty(self):
        """From 1.1 on a null ragged row that holds values is refused; a 1.0
        ring, which did not promise it, is read as it is."""
        for version in ((1, 1), (1, 0)):
            name = "n%d" % version[1]
            w = self.writer(name=name, version=version)
            cols, v = batch_of(0, 4)
            bad = dict(v, tags=np.zeros(4, bool))  # rows with tags marked null
            w.publish(cols, 4, valid=bad)
            with lastmile.Ring.open(name, dir=self.dir) as ring:
                if version == (1, 1):
                    with self.assertRaisesRegex(lastmile.RingFormatError, "is null but holds"):
                        ring.next()
                else:
                    self.assertEqual(ring.next().rows, 4)


class LeftoverTests(V11Case):
    def finished(self, name="r", n=2):
        """A ring whose n batches were read and whose stream ended."""
        w = self.writer(name=name)
        for s in range(n):
            self.publish(w, s, 3)
        w.finish("done: old run")
        with lastmile.Ring.open(name, dir=self.dir) as ring:
            self.assertEqual(len(list(ring)), n)
            gen = ring.generation
        w.close(unmap=True)
        return gen

    def open_async(self, name, timeout):
        out = {}

        def run():
            try:
                out["ring"] = lastmile.Ring.open(name, dir=self.dir, timeout=timeout)
            except Exception as e:  # pragma: no cover - reported below
                out["error"] = e

        t = threading.Thread(target=run, daemon=True)
        t.start()
        return t, out

    def test_reader_before_run_waits_for_new_ring(self):
        """A reader started before the producer, with a finished leftover of
        the same name there, waits for the new ring and reads it."""
        old = self.finished()
        t, out = self.open_async("r", 30)
        t.join(0.4)
        self.assertTrue(t.is_alive(), "Ring.open returned on the leftover: %r" % out)
        w = self.writer()  # the new run: renames a new ring over the leftover
        for s in range(3):
            self.publish(w, s, 2)
        w.finish()
        t.join(30)
        self.assertNotIn("error", out)
        with out["ring"] as ring:
            self.assertNotEqual(ring.generation, old)
            self.assertIsNone(ring.leftover)
            self.assertEqual([int(b["id"][0]) for b in ring], [0, 100, 200])

    def test_dead_leftover_then_new_ring(self):
        """A dead producer's ring, every batch read, is a leftover too."""
        w = self.writer()
        self.publish(w, 0, 3)
        with lastmile.Ring.open("r", dir=self.dir) as ring:
            ring.next()
        w.close(unmap=True)  # drops the producer lock without ending the stream: dead
        t, out = self.open_async("r", 30)
        t.join(0.4)
        self.assertTrue(t.is_alive(), "Ring.open returned on the dead leftover: %r" % out)
        w = self.writer()
        self.publish(w, 7, 1)
        t.join(30)
        with out["ring"] as ring:
            self.assertEqual(int(ring.next()["id"][0]), 700)

    def test_leftover_after_timeout(self):
        """With no new ring in time the leftover is opened, says what it
        is, and ends at once; without a timeout nothing is waited for."""
        self.finished()
        start = time.monotonic()
        with lastmile.Ring.open("r", dir=self.dir, timeout=0.3) as ring:
            self.assertGreaterEqual(time.monotonic() - start, 0.3)
            self.assertRegex(ring.leftover, "left from an earlier run: its stream ended .*done: old "
                                            "run.* after 2 batches, all of them read; no new ring")
            self.assertIsNone(ring.next())
        start = time.monotonic()
        with lastmile.Ring.open("r", dir=self.dir) as ring:
            self.assertLess(time.monotonic() - start, 0.25)
            self.assertIsNotNone(ring.leftover)
        info = lastmile.inspect("r", dir=self.dir)
        self.assertIn("all of them read", info["leftover"])
        self.assertGreater(info["ended_unix_ns"], 0)

    def test_generation(self):
        """With the generation it wants, a reader waits past a ring of
        another one, and opens its own even when nothing is left in it."""
        old = self.finished()
        start = time.monotonic()
        with lastmile.Ring.open("r", dir=self.dir, timeout=10, generation=old) as ring:
            self.assertLess(time.monotonic() - start, 5)
            self.assertIsNone(ring.next())
        t, out = self.open_async_gen("r", 3, old + 1)
        t.join(0.4)
        self.assertTrue(t.is_alive(), "Ring.open opened another generation: %r" % out)
        w = self.writer()
        with lastmile.Ring.open("r", dir=self.dir) as ring:
            new = ring.generation
        w.close(unmap=True)
        t.join(1)
        self.assertTrue(t.is_alive())  # still not the generation it wants
        t.join(30)  # its timeout ends: it opens what is there
        with out["ring"] as ring:
            self.assertEqual(ring.generation, new)

    def open_async_gen(self, name, timeout, gen):
        out = {}

        def run():
            out["ring"] = lastmile.Ring.open(name, dir=self.dir, timeout=timeout, generation=gen)

        t = threading.Thread(target=run, daemon=True)
        t.start()
        return t, out

    def test_unread_ring_is_no_leftover(self):
        w = self.writer()
        self.publish(w, 0, 3)
        w.finish()
        start = time.monotonic()
        with lastmile.Ring.open("r", dir=self.dir, timeout=10) as ring:
            self.assertLess(time.monotonic() - start, 5)
            self.assertIsNone(ring.leftover)
            self.assertEqual(ring.next().rows, 3)


class ConsumerPidTests(V11Case):
    def test_pid_is_a_hint(self):
        w = self.writer()
        gone = subprocess.Popen(["true"])
        gone.wait()
        struct.pack_into("<i", w.mm, 280, gone.pid)  # a consumer that died left its pid
        self.assertEqual(lastmile.inspect("r", dir=self.dir)["consumer_pid"], 0)
        with lastmile.Ring.open("r", dir=self.dir):
            self.assertEqual(lastmile.inspect("r", dir=self.dir)["consumer_pid"], os.getpid())
            with self.assertRaisesRegex(lastmile.RingBusyError, "pid %d" % os.getpid()):
                lastmile.Ring.open("r", dir=self.dir)
            struct.pack_into("<i", w.mm, 280, gone.pid)
            with self.assertRaisesRegex(lastmile.RingBusyError, "process is gone"):
                lastmile.Ring.open("r", dir=self.dir)

    def test_entry_size_is_a_stride(self):
        """entry_size is the stride of the field entries: a larger one is
        read (its tail ignored), one past 4096 refused."""
        for size, ok in ((128, True), (8192, False)):
            block = bytearray(struct.pack("<II", 1, size))
            block += struct.pack("<64sBBBBI3Q", b"id", 0, 6, 0, 0, 0, 0, 0, 0)
            block += bytes(size - 96)
            with self.subTest(entry_size=size):
                if ok:
                    fields = lastmile.format._parse_schema(bytes(block), "x")
                    self.assertEqual(fields[0].name, "id")
                else:
                    with self.assertRaisesRegex(lastmile.RingFormatError, "entry_size 8192"):
                        lastmile.format._parse_schema(bytes(block), "x")


SPEC = """
inputs: [{data}]
columns: [row_id, dense_opt, seq_opt]
batch: {{size: 256, last: pad}}
world_size: 3
seed: 5
ring: {{dir: {ring}, name: pad, slots: 4}}
"""


@unittest.skipUnless(os.access(BIN, os.X_OK), "bin/lastmile is not built: run `make build`")
class GoProducerTests(unittest.TestCase):
    """Batches of lastmile's Go producer: with batch.last: pad the real rows
    of all ranks are the epoch's rows, each once; validity matches the
    data's."""

    def test_pad_and_validity(self):
        tmp = tempfile.mkdtemp(prefix="lastmile-v11-go-")
        self.addCleanup(shutil.rmtree, tmp, True)
        data, npy, rings = (os.path.join(tmp, n) for n in ("data", "npy", "rings"))
        os.mkdir(rings)
        rows = 2000  # 7 full batches of 256 and one of 208 rows: 3 steps of 3 ranks, 304 rows of padding
        subprocess.run([BIN, "gen", "-rows", str(rows), "-nullable", "-null-fraction", "0.2",
                        "-npy", npy, data], check=True, capture_output=True)
        ld = lambda n: np.load(os.path.join(npy, n + ".npy"))  # noqa: E731
        dense, dvalid = ld("dense_opt"), ld("dense_opt.valid")
        svals, soffs, svalid = ld("seq_opt.values"), ld("seq_opt.offsets"), ld("seq_opt.valid")
        spec = os.path.join(tmp, "job.yaml")
        with open(spec, "w") as f:
            f.write(SPEC.format(data=data, ring=rings))
        proc = subprocess.Popen([BIN, "run", spec], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.addCleanup(proc.kill)
        # Every rank is read at once, as trainers do: lastmile run ends the
        # streams only once every ring is drained.
        got, errors = [None] * 3, []

        def read(r):
            try:
                with lastmile.Ring.open("pad.r%d" % r, dir=rings, timeout=60) as ring:
                    self.assertEqual(ring.version[0], 1)
                    self.assertGreaterEqual(ring.version[1], 1)  # 1.1 or later: pad_rows
                    got[r] = [b.detach() for b in ring]
            except Exception as e:  # reported below
                errors.append(e)

        threads = [threading.Thread(target=read, args=(r,)) for r in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        self.assertEqual(errors, [])
        seen, pads = {}, 0
        for b in (b for bs in got for b in bs):
            self.assertIsNotNone(b.real_rows)
            self.assertEqual(b.padded, b.pad_rows > 0)
            pads += b.pad_rows
            ids = np.asarray(b["row_id"])
            for i in range(b.rows):
                rid = int(ids[i])
                if i < b.real_rows:
                    seen[rid] = seen.get(rid, 0) + 1
                self.assertEqual(bool(b.valid["dense_opt"][i]), bool(dvalid[rid]))
                self.assertEqual(bool(b.valid["seq_opt"][i]), bool(svalid[rid]))
                want = dense[rid] if dvalid[rid] else 0
                self.assertEqual(float(b["dense_opt"][i]), float(want))
                got_row = list(b["seq_opt"].values[b["seq_opt"].offsets[i]:b["seq_opt"].offsets[i + 1]])
                want = list(svals[soffs[rid]:soffs[rid + 1]]) if svalid[rid] else []
                self.assertEqual(got_row, want)
        out, err = proc.communicate(timeout=60)
        self.assertEqual(proc.returncode, 0, err)
        self.assertEqual(sorted(seen), list(range(rows)))
        self.assertEqual(set(seen.values()), {1})  # padding is never counted as real
        self.assertEqual(pads, 3 * 3 * 256 - rows)
        self.assertEqual(sum(b.padded for bs in got for b in bs), 2)  # 208 real rows + 48, then 256


    def test_reader_before_run(self):
        """A trainer started before `lastmile run`, with the finished ring of
        an earlier run of the same name still there (-keep, every batch
        read), waits for the new run's ring and reads all of it."""
        tmp = tempfile.mkdtemp(prefix="lastmile-v11-go-")
        self.addCleanup(shutil.rmtree, tmp, True)
        data, rings = os.path.join(tmp, "data"), os.path.join(tmp, "rings")
        os.mkdir(rings)
        subprocess.run([BIN, "gen", "-rows", "1000", data], check=True, capture_output=True)
        spec = os.path.join(tmp, "job.yaml")
        with open(spec, "w") as f:
            f.write("inputs: [%s]\ncolumns: [row_id]\nbatch: {size: 100}\n"
                    "ring: {dir: %s, name: again, slots: 4}\n" % (data, rings))

        def run():
            p = subprocess.Popen([BIN, "run", "-keep", spec], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE)
            self.addCleanup(p.kill)
            return p

        first = run()
        with lastmile.Ring.open("again", dir=rings, timeout=60) as ring:
            old = ring.generation
            self.assertEqual(len(list(ring)), 10)
        first.communicate(timeout=60)
        out = {}

        def read():
            with lastmile.Ring.open("again", dir=rings, timeout=60) as ring:
                out["gen"] = ring.generation
                out["ids"] = [int(i) for b in ring for i in b["row_id"]]

        t = threading.Thread(target=read)
        t.start()
        t.join(0.5)
        self.assertTrue(t.is_alive(), "the reader ended on the leftover: %r" % out)
        second = run()
        t.join(120)
        second.communicate(timeout=60)
        self.assertNotEqual(out["gen"], old)
        self.assertEqual(sorted(out["ids"]), list(range(1000)))


if __name__ == "__main__":
    unittest.main()
