"""Tests of the lastmile ring consumer against the pure-Python test producer.

Run: cd python && /usr/bin/python3 -m unittest discover -s tests -v
Producers run in separate processes (multiprocessing, spawn) unless a test only
needs a file on disk; every ring lives in a fresh temporary directory.
"""

import errno
import gc
import json
import multiprocessing as mp
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from unittest import mock

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

import lastmile  # noqa: E402
import ringwriter as rw  # noqa: E402
from lastmile import ring as lmring  # noqa: E402

try:
    import torch
except Exception:  # pragma: no cover - torch is optional
    torch = None

CTX = mp.get_context("spawn")
WAIT = 60  # generous bound for child start-up on a loaded machine


class RingTestCase(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="lastmile-test-")
        self.procs = []
        self.writers = []
        self._n = 0

    def tearDown(self):
        for p in self.procs:
            if p.is_alive():
                p.kill()
            p.join(10)
        for w in self.writers:
            w.close()
        gc.collect()
        shutil.rmtree(self.dir, ignore_errors=True)

    def name(self):
        self._n += 1
        return "t%d.%s" % (self._n, self._testMethodName[:40])

    def producer(self, **cfg):
        """Start a producer process; returns (process, name, halted event)."""
        cfg.setdefault("name", self.name())
        cfg["dir"] = self.dir
        created, halted = CTX.Event(), CTX.Event()
        p = CTX.Process(target=rw.producer_main, args=(cfg, created, halted), daemon=True)
        p.start()
        self.procs.append(p)
        self.assertTrue(created.wait(WAIT), "test producer did not start")
        return p, cfg["name"], halted

    def writer(self, fields=rw.ALL_FIELDS, **kw):
        """An in-process producer (for tests that only need a file on disk)."""
        kw.setdefault("slot_count", 4)
        w = rw.RingWriter(kw.pop("name", None) or self.name(), self.dir, fields, **kw).create()
        self.writers.append(w)
        return w

    def publish(self, w, seq):
        cols, valid, rows = rw.make_batch(seq, w.fields)
        w.publish(cols, rows, valid=valid, **rw.cursor_for(seq))

    def wait_tail(self, name, n):
        deadline = time.monotonic() + WAIT
        while lastmile.inspect(name, self.dir)["tail"] < n:
            self.assertLess(time.monotonic(), deadline, "producer did not reach tail %d" % n)
            time.sleep(0.01)

    def check_batch(self, b, seq, fields=rw.ALL_FIELDS):
        cols, valid, rows = rw.make_batch(seq, fields)
        self.assertEqual(b.seq, seq)
        self.assertEqual(b.rows, rows)
        c = rw.cursor_for(seq)
        self.assertEqual(b.cursor, (c["epoch"], c["batch_index"], c["rank"], c["last"]))
        self.assertEqual(b.last_in_epoch, c["last"])
        self.assertEqual(b.padded, c["padded"])
        self.assertEqual(list(b), [f.name for f in fields])
        for f in fields:
            got = b[f.name]
            if f.kind == "dense":
                self.assertIsInstance(got, np.ndarray)
                self.assertEqual(got.dtype, np.dtype(rw.NP_DTYPES[f.dtype]), f.name)
                self.assertEqual(got.shape, (rows,) + tuple(f.dims), f.name)
                np.testing.assert_array_equal(got, cols[f.name], err_msg=f.name)
            else:
                self.assertIsInstance(got, lastmile.Ragged)
                np.testing.assert_array_equal(got.values, cols[f.name][0], err_msg=f.name)
                np.testing.assert_array_equal(got.offsets, cols[f.name][1], err_msg=f.name)
                self.assertEqual(got.offsets.dtype, np.int64)
            if f.nullable:
                self.assertEqual(b.valid[f.name].dtype, np.bool_)
                np.testing.assert_array_equal(b.valid[f.name], valid[f.name], err_msg=f.name)
            else:
                self.assertNotIn(f.name, b.valid)
            if f.text:
                want = [rw.text_row(seq, i) for i in range(rows)]
                self.assertEqual(b.texts(f.name), want)
                for i in range(rows):
                    self.assertEqual(b.text(f.name, i), want[i])


class DeliveryTests(RingTestCase):
    def test_every_batch_once_in_order_with_content(self):
        _, name, _ = self.producer(nbatches=23, slot_count=3, message="done: 23 batches")
        with lastmile.Ring.open(name, self.dir, timeout=WAIT) as ring:
            self.assertEqual([f.name for f in ring.schema], [f.name for f in rw.ALL_FIELDS])
            self.assertEqual(ring.version, (1, 0))
            seqs = []
            for b in ring:
                self.check_batch(b, b.seq)
                seqs.append(b.seq)
            self.assertEqual(seqs, list(range(23)))
            self.assertTrue(ring.ended)
            self.assertEqual(ring.state, "end")
            self.assertEqual(ring.message, "done: 23 batches")
            self.assertIsNone(ring.next())  # stays at end of stream

    def test_small_ring_many_batches_wakes_both_ways(self):
        # 300 batches through 2 slots: producer and consumer repeatedly block on
        # each other. Both park with a 10 s futex timeout here, so only working
        # FUTEX_WAKEs in both directions finish in time.
        fields = [rw.FieldSpec("id", "dense", "int64"), rw.FieldSpec("tokens", "ragged", "int32")]
        _, name, _ = self.producer(nbatches=300, slot_count=2, fields=fields, park=10.0)
        t0 = time.monotonic()
        with mock.patch.object(lmring, "PARK_SECONDS", 10.0), \
                lastmile.Ring.open(name, self.dir, timeout=WAIT) as ring:
            n = 0
            for b in ring:
                self.assertEqual(b.seq, n)
                self.check_batch(b, n, fields)
                n += 1
                if n % 50 == 0:
                    time.sleep(0.02)  # let the producer fill the ring and sleep
        self.assertEqual(n, 300)
        self.assertLess(time.monotonic() - t0, 30.0)

    def test_huge_page_sized_slots(self):
        _, name, _ = self.producer(nbatches=5, slot_count=2, slot_size=2 << 20)
        with lastmile.Ring.open(name, self.dir, timeout=WAIT) as ring:
            self.assertEqual(ring.slot_size, 2 << 20)
            self.assertEqual(lastmile.inspect(name, self.dir)["data_offset"] % (2 << 20), 0)
            self.assertEqual([b.seq for b in ring], list(range(5)))

    def test_attach_after_producer_published(self):
        p, name, halted = self.producer(nbatches=6, slot_count=4, end="halt")
        self.wait_tail(name, 4)  # ring full, producer blocked
        with lastmile.Ring.open(name, self.dir) as ring:
            for i in range(6):
                self.check_batch(next(ring), i)
        self.assertTrue(halted.wait(WAIT))

    def test_detach_and_reattach_continues_at_head(self):
        _, name, _ = self.producer(nbatches=8, slot_count=4)
        with lastmile.Ring.open(name, self.dir, timeout=WAIT) as ring:
            self.assertEqual(next(ring).seq, 0)
            self.assertEqual(next(ring).seq, 1)
        info = lastmile.inspect(name, self.dir)
        self.assertEqual(info["head"], 2)
        self.assertFalse(info["consumer_attached"])
        self.assertEqual(info["consumer_pid"], 0)
        with lastmile.Ring.open(name, self.dir, timeout=WAIT) as ring:
            self.assertEqual([b.seq for b in ring], list(range(2, 8)))

    def test_all_batches_delivered_after_producer_exited_at_eos(self):
        # The producer finishes and exits (its lock is gone) before the consumer
        # attaches: end of stream, not "producer died".
        p, name, _ = self.producer(nbatches=4, slot_count=4, message="bye")
        p.join(WAIT)
        self.assertEqual(p.exitcode, 0)
        with lastmile.Ring.open(name, self.dir) as ring:
            self.assertEqual([b.seq for b in ring], [0, 1, 2, 3])
            self.assertEqual(ring.message, "bye")

    def test_env_dir(self):
        w = self.writer(slot_count=2)
        self.publish(w, 0)
        with mock.patch.dict(os.environ, {"LASTMILE_SHM_DIR": self.dir}):
            with lastmile.Ring.open(w.name) as ring:
                self.check_batch(next(ring), 0)
            self.assertEqual(lastmile.inspect(w.name)["tail"], 1)


class WaitingTests(RingTestCase):
    def test_blocking_wait_is_cheap_and_woken_promptly(self):
        fields = [rw.FieldSpec("t_ns", "dense", "int64")]
        _, name, _ = self.producer(nbatches=6, slot_count=2, fields=fields, stamp=True,
                                   start_delay=1.0, interval=0.25)
        # 10 s park timeout: a batch arriving well before that was delivered by FUTEX_WAKE.
        with mock.patch.object(lmring, "PARK_SECONDS", 10.0), \
                lastmile.Ring.open(name, self.dir) as ring:
            cpu0, t0 = time.thread_time(), time.monotonic()
            b = next(ring)
            waited, cpu = time.monotonic() - t0, time.thread_time() - cpu0
            self.assertGreater(waited, 0.5)
            # ~10 park/liveness rounds per second; a busy loop would burn ~waited.
            self.assertLess(cpu, 0.05 * waited, "consumer burned %.3fs CPU in %.3fs" % (cpu, waited))
            lat = [(time.monotonic_ns() - int(b["t_ns"][0])) / 1e6]
            for b in ring:
                if b.rows:
                    lat.append((time.monotonic_ns() - int(b["t_ns"][0])) / 1e6)
        self.assertEqual(len(lat), 5)  # batch 3 has no rows
        self.assertLess(max(lat), 3000.0, "wake-up latencies (ms): %s" % lat)

    def test_next_timeout(self):
        _, name, _ = self.producer(nbatches=1, end="halt")
        with lastmile.Ring.open(name, self.dir, timeout=0.3) as ring:
            self.assertEqual(next(ring).seq, 0)
            t0 = time.monotonic()
            with self.assertRaises(TimeoutError) as cm:
                next(ring)
            self.assertLess(time.monotonic() - t0, 5.0)
            self.assertGreaterEqual(time.monotonic() - t0, 0.3)
            self.assertIn("alive", str(cm.exception))
            with self.assertRaises(TimeoutError):
                ring.next(timeout=0.05)

    def test_open_missing_and_open_timeout(self):
        with self.assertRaises(FileNotFoundError):
            lastmile.Ring.open("nope", self.dir)
        t0 = time.monotonic()
        with self.assertRaises(TimeoutError):
            lastmile.Ring.open("nope", self.dir, timeout=0.2)
        self.assertGreaterEqual(time.monotonic() - t0, 0.2)
        with self.assertRaises(ValueError):
            lastmile.Ring.open(".hidden", self.dir)
        with self.assertRaises(ValueError):
            lastmile.Ring.open("a/b", self.dir)

    def test_open_waits_for_ring_to_appear(self):
        name = self.name()
        t = threading.Timer(0.3, lambda: self.publish(self.writer(name=name, slot_count=2), 0))
        t.start()
        try:
            with lastmile.Ring.open(name, self.dir, timeout=WAIT) as ring:
                self.check_batch(next(ring), 0)
        finally:
            t.join()

    def test_ctrl_c_interrupts_wait(self):
        w = self.writer(slot_count=2)  # alive, never publishes
        # A child of a shell's background job inherits SIGINT ignored, and
        # Python then installs no KeyboardInterrupt handler: put it back, as
        # a trainer started from a terminal has it.
        code = ("import signal, sys, lastmile; signal.signal(signal.SIGINT, signal.default_int_handler); "
                "r = lastmile.Ring.open(sys.argv[1], sys.argv[2]); "
                "print('waiting', flush=True); next(r)")
        p = subprocess.Popen([sys.executable, "-c", code, w.name, self.dir], cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            self.assertEqual(p.stdout.readline().strip(), "waiting")
            time.sleep(0.4)  # parked in FUTEX_WAIT by now
            t0 = time.monotonic()
            p.send_signal(signal.SIGINT)
            _, err = p.communicate(timeout=10)
            self.assertLess(time.monotonic() - t0, 3.0)
            self.assertIn("KeyboardInterrupt", err)
            self.assertNotEqual(p.returncode, 0)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        # the interrupted consumer's lock died with it
        self.assertFalse(lastmile.inspect(w.name, self.dir)["consumer_attached"])


class FailureTests(RingTestCase):
    def _killed_mid_write(self, lock):
        # 5 batches published, the 6th half-written (payloads, table, header,
        # garbage, no seq), then SIGKILL.
        p, name, halted = self.producer(nbatches=10, slot_count=8, half_write_at=5, lock=lock)
        self.assertTrue(halted.wait(WAIT))
        pid = p.pid
        p.kill()
        p.join(WAIT)
        with lastmile.Ring.open(name, self.dir) as ring:
            for i in range(5):
                self.check_batch(next(ring), i)
            with self.assertRaises(lastmile.ProducerDiedError) as cm:
                next(ring)
            e = cm.exception
            self.assertEqual(e.published, 5)
            self.assertEqual(e.pid, pid)
            self.assertIsNotNone(e.heartbeat_age)
            self.assertIn("5 batches", str(e))
            self.assertIn(str(pid), str(e))
            self.assertNotIsInstance(e, lastmile.ProducerHungError)
            with self.assertRaises(lastmile.ProducerDiedError):  # sticky
                next(ring)

    def test_producer_killed_mid_write_ofd_lock(self):
        self._killed_mid_write("ofd")

    def test_producer_killed_mid_write_posix_lock(self):
        self._killed_mid_write("posix")

    def test_producer_killed_while_consuming_never_torn(self):
        fields = [f for f in rw.ALL_FIELDS if f.name != "img"]
        for lock in ("ofd", "posix"):
            p, name, _ = self.producer(nbatches=10**9, slot_count=4, lock=lock, fields=fields)
            kill_at = random.randint(20, 60)
            killer = threading.Timer(random.uniform(0, 0.02), p.kill)
            n = 0
            with lastmile.Ring.open(name, self.dir, timeout=WAIT) as ring:
                with self.assertRaises(lastmile.ProducerDiedError) as cm:
                    for b in ring:
                        self.assertEqual(b.seq, n)
                        self.check_batch(b, n, fields)
                        n += 1
                        if n == kill_at:
                            killer.start()  # SIGKILL at a random point of its loop
            killer.join()
            self.assertEqual(cm.exception.published, n)
            self.assertGreaterEqual(n, kill_at)

    def test_consumer_waiting_when_producer_dies(self):
        p, name, halted = self.producer(nbatches=2, end="halt")
        with lastmile.Ring.open(name, self.dir) as ring:
            self.assertEqual([next(ring).seq, next(ring).seq], [0, 1])
            threading.Timer(0.3, p.kill).start()
            t0 = time.monotonic()
            with self.assertRaises(lastmile.ProducerDiedError) as cm:
                next(ring)
            self.assertLess(time.monotonic() - t0, 5.0)
            self.assertEqual(cm.exception.published, 2)

    def test_producer_error_message_after_published_batches(self):
        msg = "decode failed: part-0007.parquet row group 3: bad page header (ü)"
        _, name, _ = self.producer(nbatches=3, end="error", message=msg)
        with lastmile.Ring.open(name, self.dir, timeout=WAIT) as ring:
            got = []
            with self.assertRaises(lastmile.ProducerError) as cm:
                for b in ring:
                    got.append(b.seq)
            self.assertEqual(got, [0, 1, 2])
            self.assertEqual(cm.exception.message, msg)
            self.assertEqual(str(cm.exception), msg)
            self.assertEqual(ring.state, "error")
            self.assertIsInstance(cm.exception, lastmile.RingError)

    def test_heartbeat_timeout(self):
        w = self.writer(slot_count=2, heartbeat=False)  # alive, heartbeat frozen
        self.publish(w, 0)
        with lastmile.Ring.open(w.name, self.dir, heartbeat_timeout=0.3) as ring:
            self.assertEqual(next(ring).seq, 0)
            time.sleep(0.35)
            with self.assertRaises(lastmile.ProducerHungError) as cm:
                next(ring)
            self.assertIsInstance(cm.exception, lastmile.ProducerDiedError)
            self.assertGreater(cm.exception.heartbeat_age, 0.3)
        # A live heartbeat passes.
        _, name, _ = self.producer(nbatches=1, end="halt")
        with lastmile.Ring.open(name, self.dir, heartbeat_timeout=10.0) as ring:
            next(ring)
            with self.assertRaises(TimeoutError):
                ring.next(timeout=1.0)

    def test_second_consumer_is_refused(self):
        w = self.writer(slot_count=2)
        self.publish(w, 0)
        self.publish(w, 1)
        ring = lastmile.Ring.open(w.name, self.dir)
        try:
            self.assertEqual(next(ring).seq, 0)
            # same process (the lock is per open file description)
            with self.assertRaises(lastmile.RingBusyError) as cm:
                lastmile.Ring.open(w.name, self.dir)
            self.assertEqual(cm.exception.pid, os.getpid())
            self.assertIn(str(os.getpid()), str(cm.exception))
            # inspect in the same process must not drop our lock
            self.assertTrue(lastmile.inspect(w.name, self.dir)["consumer_attached"])
            # another process
            code = ("import sys, lastmile\n"
                    "try:\n lastmile.Ring.open(sys.argv[1], sys.argv[2])\n"
                    "except lastmile.RingBusyError as e:\n print('busy', e.pid)\n")
            out = subprocess.run([sys.executable, "-c", code, w.name, self.dir], cwd=ROOT,
                                 capture_output=True, text=True, timeout=WAIT)
            self.assertEqual(out.stdout.strip(), "busy %d" % os.getpid(), out.stderr)
        finally:
            ring.close()
        with lastmile.Ring.open(w.name, self.dir) as ring2:
            self.assertEqual(next(ring2).seq, 1)


class PlantedFileTests(RingTestCase):
    """A file someone else put under a ring's name is never used."""

    def test_symlink_is_not_followed(self):
        w = self.writer()
        self.publish(w, 0)
        os.symlink(w.path, os.path.join(self.dir, "planted"))
        with self.assertRaises(OSError) as cm:
            lastmile.Ring.open("planted", self.dir)
        self.assertEqual(cm.exception.errno, errno.ELOOP)

    def test_fifo_does_not_block(self):
        os.mkfifo(os.path.join(self.dir, "fifo"))
        with self.assertRaises((lastmile.RingError, OSError)):
            lastmile.Ring.open("fifo", self.dir)

    def test_hard_link_is_refused(self):
        w = self.writer()
        self.publish(w, 0)
        os.link(w.path, os.path.join(self.dir, "linked"))
        with self.assertRaisesRegex(lastmile.RingError, "hard links"):
            lastmile.Ring.open("linked", self.dir)

    @unittest.skipUnless(os.geteuid() == 0, "needs root to give the file to another uid")
    def test_foreign_owner_is_refused(self):
        w = self.writer()
        self.publish(w, 0)
        os.chown(w.path, 65534, 65534)
        with self.assertRaisesRegex(lastmile.RingError, "owned by uid 65534"):
            lastmile.Ring.open(w.name, self.dir)


class FormatTests(RingTestCase):
    def test_unknown_major_version(self):
        for v in [(5, 2), (0, 2)]:
            w = self.writer(version=v)
            with self.assertRaises(lastmile.RingVersionError) as cm:
                lastmile.Ring.open(w.name, self.dir)
            msg = str(cm.exception)
            self.assertIn("%d.%d" % v, msg)
            self.assertIn("1.x to 4.x", msg)
            self.assertIn("pgrade", msg)
            self.assertEqual(cm.exception.found, v)
            os.unlink(w.path)

    def test_newer_minor_version_is_read(self):
        w = self.writer(version=(1, 7))
        self.publish(w, 0)
        with lastmile.Ring.open(w.name, self.dir) as ring:
            self.assertEqual(ring.version, (1, 7))
            self.check_batch(next(ring), 0)

    def _file(self, name, data):
        with open(os.path.join(self.dir, name), "wb") as f:
            f.write(data)
        return name

    def test_bad_magic(self):
        name = self._file("junk", b"PAR1" + b"\0" * 8188)
        t0 = time.monotonic()
        with self.assertRaises(lastmile.RingFormatError) as cm:
            lastmile.Ring.open(name, self.dir)
        self.assertIn("not a lastmile ring", str(cm.exception))
        self.assertLess(time.monotonic() - t0, 5.0)
        self._file("empty", b"")
        with self.assertRaises(lastmile.RingFormatError):
            lastmile.Ring.open("empty", self.dir)
        with self.assertRaises(lastmile.RingFormatError):
            lastmile.inspect("junk", self.dir)

    def test_truncated(self):
        w = self.writer()
        with open(w.path, "rb") as f:
            data = f.read()
        for n, cut in (("short", 100), ("headeronly", w.data_offset), ("oneslot", len(data) - 4096)):
            self._file(n, data[:cut])
            with self.assertRaises(lastmile.RingFormatError) as cm:
                lastmile.Ring.open(n, self.dir)
            self.assertIn("truncated", str(cm.exception))

    def test_schema_hash_mismatch(self):
        w = self.writer(schema_hash=12345)
        with self.assertRaisesRegex(lastmile.RingFormatError, "hash"):
            lastmile.Ring.open(w.name, self.dir)

    def test_bad_geometry(self):
        w = self.writer()
        with open(w.path, "rb") as f:
            data = f.read()
        cases = {
            "slotsize": (24, "<Q", 1000),
            "slotcount": (16, "<I", 0),
            "dataoff": (32, "<Q", 4096),  # below header_size
            "schemalen": (52, "<I", 100000),
        }
        for n, (off, fmt, v) in cases.items():
            d = bytearray(data)
            struct.pack_into(fmt, d, off, v)
            self._file(n, bytes(d))
            with self.assertRaises(lastmile.RingFormatError, msg=n):
                lastmile.Ring.open(n, self.dir)

    def test_protocol_violation_and_bad_tensor_table(self):
        w = self.writer(slot_count=2)
        self.publish(w, 0)
        so = w.slot_off(0)
        with lastmile.Ring.open(w.name, self.dir) as ring:
            struct.pack_into("<Q", w.mm, so, 7)  # seq != head
            with self.assertRaisesRegex(lastmile.RingFormatError, "protocol violation"):
                next(ring)
            struct.pack_into("<Q", w.mm, so, 0)
            good = bytes(w.mm[so : so + 64 * 20])
            # first tensor's payload runs past used_bytes
            struct.pack_into("<Q", w.mm, so + 64 + 48, 1 << 20)
            with self.assertRaisesRegex(lastmile.RingFormatError, "nbytes"):
                next(ring)
            w.mm[so : so + len(good)] = good
            struct.pack_into("<Q", w.mm, so + 64 + 40, 1 << 30)  # offset out of the slot
            with self.assertRaisesRegex(lastmile.RingFormatError, "used_bytes"):
                next(ring)
            w.mm[so : so + len(good)] = good
            struct.pack_into("<I", w.mm, so + 20, 3)  # tensor_count
            with self.assertRaisesRegex(lastmile.RingFormatError, "tensor_count"):
                next(ring)
            w.mm[so : so + len(good)] = good
            self.check_batch(next(ring), 0)

    def test_inspect_and_cli(self):
        _, name, halted = self.producer(nbatches=3, slot_count=4, end="halt")
        self.assertTrue(halted.wait(WAIT))
        info = lastmile.inspect(name, self.dir)
        self.assertEqual((info["tail"], info["head"], info["state"]), (3, 0, "running"))
        self.assertEqual((info["slot_count"], info["slot_size"], info["version"]), (4, 65536, "1.0"))
        self.assertTrue(info["producer_alive"])
        self.assertFalse(info["consumer_attached"])
        self.assertEqual([f["name"] for f in info["schema"]], [f.name for f in rw.ALL_FIELDS])
        out = subprocess.run([sys.executable, "-m", "lastmile", "inspect", name, "--dir", self.dir],
                             cwd=ROOT, capture_output=True, text=True, timeout=WAIT)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(json.loads(out.stdout)["tail"], 3)


class ReleaseTests(RingTestCase):
    def test_context_manager_and_explicit_release(self):
        w = self.writer(slot_count=4)
        for s in range(4):
            self.publish(w, s)
        with lastmile.Ring.open(w.name, self.dir) as ring:
            b0 = next(ring)
            self.assertEqual(w.head, 0)  # held, not released
            self.assertFalse(b0.released)
            b1 = next(ring)  # taking the next releases the previous
            self.assertEqual(w.head, 1)
            self.assertTrue(b0.released)
            with self.assertRaises(RuntimeError):
                b0["id"]
            ring.release()
            self.assertEqual(w.head, 2)
            self.assertTrue(b1.released)
            self.assertEqual(next(ring).seq, 2)
        self.assertEqual(w.head, 3)  # released on exit
        info = lastmile.inspect(w.name, self.dir)
        self.assertFalse(info["consumer_attached"])
        self.assertEqual(info["consumer_pid"], 0)
        self.assertTrue(ring.closed)
        ring.close()  # idempotent
        with self.assertRaises(ValueError):
            next(ring)

    def test_release_wakes_blocked_producer(self):
        w = self.writer(slot_count=1)
        self.publish(w, 0)
        ring = lastmile.Ring.open(w.name, self.dir)
        self.assertEqual(next(ring).seq, 0)
        done = threading.Event()

        def produce():
            self.publish(w, 1)  # blocks: the ring is full
            done.set()

        t = threading.Thread(target=produce)
        t.start()
        time.sleep(0.3)
        self.assertFalse(done.is_set())
        ring.release()
        self.assertTrue(done.wait(5))
        t.join()
        self.check_batch(next(ring), 1)
        ring.close()

    def test_forked_child_cannot_consume_or_detach(self):
        w = self.writer(slot_count=4)
        for s in range(3):
            self.publish(w, s)
        ring = lastmile.Ring.open(w.name, self.dir)
        self.assertEqual(next(ring).seq, 0)
        pid = os.fork()
        if pid == 0:  # child
            code = 1
            try:
                try:
                    next(ring)
                except lastmile.RingError:
                    code = 3
                ring.close()
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        self.assertEqual(os.waitstatus_to_exitcode(status), 3)
        self.assertEqual(w.head, 0)
        self.assertTrue(lastmile.inspect(w.name, self.dir)["consumer_attached"])
        self.assertEqual(next(ring).seq, 1)
        ring.close()

    def test_finalizer_releases_and_detaches(self):
        w = self.writer(slot_count=2)
        self.publish(w, 0)
        ring = lastmile.Ring.open(w.name, self.dir)
        b = next(ring)
        x = b["id"]
        del ring, b
        gc.collect()
        self.assertEqual(w.head, 1)
        self.assertFalse(lastmile.inspect(w.name, self.dir)["consumer_attached"])
        self.assertEqual(x.shape, (5,))  # the mapping outlives the ring while arrays exist

    def test_batch_keeps_ring_alive(self):
        w = self.writer(slot_count=2)
        self.publish(w, 0)
        b = next(lastmile.Ring.open(w.name, self.dir))
        gc.collect()
        self.assertFalse(b.released)
        self.check_batch(b, 0)
        self.assertEqual(w.head, 0)
        del b
        gc.collect()
        self.assertEqual(w.head, 1)


@unittest.skipIf(torch is None, "torch is not installed")
class TorchTests(RingTestCase):
    def test_tensors_are_zero_copy_views(self):
        _, name, _ = self.producer(nbatches=5, slot_count=2)
        with lastmile.Ring.open(name, self.dir, timeout=WAIT) as ring:
            core = ring._core
            lo = core.base + core.geo.data_offset
            hi = core.base + core.geo.data_end
            n = 0
            for t in ring.iter_torch():
                self.assertTrue(t.is_torch)
                cols, valid, rows = rw.make_batch(t.seq)
                tensors = []
                for f in rw.ALL_FIELDS:
                    v = t[f.name]
                    tensors += [v] if f.kind == "dense" else [v.values, v.offsets]
                    if f.nullable:
                        tensors.append(t.valid[f.name])
                for x in tensors:
                    self.assertIsInstance(x, torch.Tensor)
                    if x.numel():
                        self.assertTrue(lo <= x.data_ptr() < hi, "tensor not in the ring mapping")
                self.assertEqual(t["h"].dtype, torch.bfloat16)
                want = torch.from_numpy(cols["h"].astype(np.int16)).view(torch.bfloat16)
                self.assertTrue(torch.equal(t["h"], want))
                self.assertEqual(t["flag"].dtype, torch.bool)
                self.assertEqual(t["f16"].dtype, torch.float16)
                self.assertEqual(t["tokens"].offsets.dtype, torch.int64)
                self.assertTrue(torch.equal(t["x"], torch.from_numpy(cols["x"])))
                self.assertEqual(t.valid["score"].dtype, torch.bool)
                self.assertEqual([t.text("text", i) for i in range(rows)],
                                 [rw.text_row(t.seq, i) for i in range(rows)])
                if rows:
                    # same memory as the numpy view
                    t["id"][0] = -1
                    self.assertEqual(int(t._numpy["id"][0]), -1)
                n += 1
        self.assertEqual(n, 5)


if __name__ == "__main__":
    unittest.main()
