"""Device staging, the trainer's side, with a stand-in for the CUDA IPC calls."""

import ctypes
import mmap
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import lastmile  # noqa: E402
import lastmile.cuda as lmcuda  # noqa: E402
import lastmile.devstage as ds  # noqa: E402
import lastmile.format  # noqa: E402
import ringwriter as rw  # noqa: E402
from test_cuda import FIELDS, FakeCUDA  # noqa: E402

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None


class FakeIPC:
    """Device memory is a CPU tensor per opened handle, filled from the ring slot
    as lastmiled's copy would be."""

    def __init__(self, ring):
        self.ring, self.calls = ring, []

    def open_mem(self, handle, nbytes):
        self.calls.append(("open_mem", bytes(handle[:4])))
        return torch.zeros(nbytes, dtype=torch.uint8)

    def close_mem(self, mem):
        self.calls.append(("close_mem",))

    def open_event(self, handle):
        return ("event", handle[0])

    def close_event(self, ev):
        self.calls.append(("close_event", ev[1]))

    def stream_wait(self, ev):
        self.calls.append(("stream_wait", ev[1], self.ring._core.held))

    def mark(self):
        self.calls.append(("mark",))
        return "mark"

    def wait(self, ev):
        self.calls.append(("wait", ev, self.ring._core.held))

    def view(self, mem, offset, nbytes, dtype, shape):
        return mem[offset : offset + nbytes].view(dtype).view(shape)


def announce(path, gen, tag, slots=4, seq=None):
    """Write a device staging block as lastmiled does (format 1.2, 3.6.1)."""
    with open(path, "r+b") as f:
        mm = mmap.mmap(f.fileno(), 4096)
        cur = struct.unpack_from("<I", mm, 1536)[0]
        block = struct.pack("<II16sQ", 1, slots, b"0000:3b:00.0", gen) + tag * 64
        block += b"".join(bytes([k]) * 64 for k in range(slots))
        mm[1536:1540] = struct.pack("<I", cur + 1)
        mm[1540:1544] = struct.pack("<I", len(block))
        mm[1544 : 1544 + len(block)] = block
        mm[1536:1540] = struct.pack("<I", cur + 2)
        mm.close()


def withdraw(path):
    """Withdraw the announcement as lastmiled does when it falls back."""
    with open(path, "r+b") as f:
        mm = mmap.mmap(f.fileno(), 4096)
        seq = struct.unpack_from("<I", mm, 1536)[0]
        mm[1536:1540] = struct.pack("<I", seq + 1)
        mm[1540:1544] = struct.pack("<I", 0)
        mm[1536:1540] = struct.pack("<I", seq + 2)
        mm.close()


@unittest.skipIf(torch is None, "torch is not installed")
class DeviceStagingTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="lastmile-devstage-")
        self.w = rw.RingWriter("dev", self.dir, FIELDS, slot_count=4, slot_size=2 << 20, version=(1, 2))
        self.w.create()
        self.ring = lastmile.Ring.open("dev", self.dir, timeout=30)
        self.ipc = FakeIPC(self.ring)
        self.alive = True
        host = lmcuda.HostStaging(self.ring, "cuda:0", backend=FakeCUDA(self.ring))
        self.st = ds.DeviceStaging(self.ring, "cuda:0", self.ipc, host, lambda: self.alive)

    def tearDown(self):
        self.st.close()
        self.ring.close()
        self.w.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def take(self):
        self.st.before_next()
        return self.st.stage(self.ring.next(timeout=10))

    def publish(self, s):
        cols, valid, rows = rw.make_batch(s, FIELDS)
        self.w.publish(cols, rows, valid=valid, batch_index=s)

    def test_open_once_wait_per_batch_release_after(self):
        announce(self.w.path, 7, b"A")
        for s in range(6):
            self.publish(s)
            self.take()
        calls = self.ipc.calls
        self.assertEqual([c for c in calls if c[0] == "open_mem"], [("open_mem", b"AAAA")])
        # Per batch: one stream wait on its slot's event while it is held;
        # then, when the next is asked for, a mark on the trainer's stream
        # waited for before the release.
        per = [c for c in calls if c[0] in ("stream_wait", "mark", "wait")]
        want = []
        for s in range(6):
            want.append(("stream_wait", s % 4, s))
            if s < 5:
                want += [("mark",), ("wait", "mark", s)]
        self.assertEqual(per, want)

    def test_withdrawn_falls_back_and_generation_reattaches(self):
        announce(self.w.path, 7, b"A")
        self.publish(0)
        self.take()
        # The daemon withdrew (a fallback): host staging, no stream wait.
        withdraw(self.w.path)
        self.publish(1)
        self.take()
        self.assertEqual(len([c for c in self.ipc.calls if c[0] == "stream_wait"]), 1)
        self.assertIn(("close_mem",), self.ipc.calls)
        self.assertEqual(len([c for c in self.ipc.calls if c[0] == "close_event"]), 4)
        # A restarted daemon announces a new generation: opened once more.
        announce(self.w.path, 8, b"B")
        self.publish(2)
        self.take()
        self.assertEqual([c for c in self.ipc.calls if c[0] == "open_mem"], [("open_mem", b"AAAA"), ("open_mem", b"BBBB")])

    def test_close_fails_midway(self):
        # A handle whose close fails does not leave the others open, and a
        # withdrawal still falls back to host staging instead of raising.
        announce(self.w.path, 7, b"A")
        self.publish(0)
        self.take()
        calls = self.ipc.calls

        def close_event(ev):
            calls.append(("close_event", ev[1]))
            if ev[1] == 1:
                raise RuntimeError("cuEventDestroy failed: CUresult 700")

        self.ipc.close_event = close_event
        withdraw(self.w.path)
        self.publish(1)
        with self.assertLogs("lastmile", "WARNING") as logs:
            b = self.take()
        self.assertEqual(b.seq, 1)
        self.assertIn("CUresult 700", "\n".join(logs.output))
        self.assertEqual(sorted(c[1] for c in calls if c[0] == "close_event"), [0, 1, 2, 3])
        self.assertIn(("close_mem",), calls)

    def test_daemon_died(self):
        announce(self.w.path, 7, b"A")
        for s in range(3):
            self.publish(s)
        self.take()
        # lastmiled dies while the trainer works on batch 0: asking for the
        # next one raises before taking it, with the handles closed.
        self.alive = False
        with self.assertRaisesRegex(ds.DeviceStagingLost, "generation 7\\), died.*Iterate again"):
            self.st.before_next()
        self.assertIn(("close_mem",), self.ipc.calls)
        self.assertEqual(self.ring._core.held, 0)
        # Iterating again: batch 1 from the ring (host staging), no reopen.
        b = self.take()
        self.assertEqual(b.seq, 1)
        self.assertEqual(len([c for c in self.ipc.calls if c[0] in ("open_mem", "stream_wait")]), 2)
        # A new stager (a new iterator) does not open the dead daemon's handles either.
        other = ds.DeviceStaging(self.ring, "cuda:0", self.ipc, lmcuda.HostCopies("cpu"), lambda: self.alive)
        other.before_next()
        other.stage(self.ring.next(timeout=10))
        self.assertEqual(len([c for c in self.ipc.calls if c[0] == "open_mem"]), 1)
        # A restarted daemon announces generation 8: opened, device views again.
        self.alive = True
        announce(self.w.path, 8, b"B")
        self.publish(3)
        self.take()
        self.assertEqual([c[1] for c in self.ipc.calls if c[0] == "open_mem"], [b"AAAA", b"BBBB"])
        self.assertEqual(self.ipc.calls[-1], ("stream_wait", 3, 3))

    def test_dies_between(self):
        # Dead between before_next and stage: the taken batch is served from
        # the ring slot, with a warning, not lost to an exception.
        announce(self.w.path, 7, b"A")
        self.publish(0)
        self.publish(1)
        self.take()
        self.st.before_next()
        b = self.ring.next(timeout=10)
        self.alive = False
        with self.assertLogs("lastmile", "WARNING") as logs:
            out = self.st.stage(b)
        self.assertEqual(out.seq, 1)
        self.assertIn("died", logs.output[0])
        self.assertEqual([c[1] for c in self.ipc.calls if c[0] == "stream_wait"], [0])
        self.assertIn(("close_mem",), self.ipc.calls)

    def test_open_fails(self):
        announce(self.w.path, 7, b"A")
        self.publish(0)

        def refuse(handle, nbytes):
            raise RuntimeError("cuIpcOpenMemHandle failed: CUresult 201")

        self.ipc.open_mem = refuse
        with self.assertLogs("lastmile", "WARNING") as logs:
            self.take()
        self.assertIn("cannot open lastmiled's device slots (cuIpcOpenMemHandle failed", logs.output[0])
        self.assertNotIn("stream_wait", [c[0] for c in self.ipc.calls])

    def test_stager_choice(self):
        # Device staging cannot open handles (no CUDA in torch, no driver):
        # the ring is staged here (host staging), with a warning naming it.
        # Forced, so that a machine with a GPU takes the same path.
        def no_driver(device):
            raise lmcuda.StagingError("no CUDA driver (test)")

        with mock.patch.object(ds, "DriverIPC", no_driver), self.assertLogs("lastmile", "WARNING") as logs:
            st = lmcuda.stager(self.ring, "cuda:0", staging="device", backend=FakeCUDA(self.ring))
        self.assertIsInstance(st, lmcuda.HostStaging)
        self.assertIn("ring dev: cannot use lastmiled's device slots", logs.output[0])
        st.close()
        st = lmcuda.stager(self.ring, "cuda:0", staging="device", backend=FakeCUDA(self.ring), ipc=FakeIPC(self.ring))
        self.assertIsInstance(st, ds.DeviceStaging)
        st.close()


class SlotsAliveTest(unittest.TestCase):
    """The trainer's probe of lastmiled's device slots, with real record locks
    held through other open files, as lastmiled holds them (6.4)."""

    def test_locks(self):
        import fcntl

        fd, path = tempfile.mkstemp()
        self.addCleanup(os.unlink, path)
        self.addCleanup(os.close, fd)
        os.ftruncate(fd, 4096)

        def holder(byte):
            h = os.open(path, os.O_RDWR)  # another open file description
            fcntl.fcntl(h, fcntl.F_OFD_SETLK, lastmile.format._FLOCK.pack(fcntl.F_WRLCK, 0, byte, 1, 0))
            return h

        for name, bytes_held, alive in [
            ("lastmiled gone", [], False),
            ("the producer runs", [0], True),
            ("the run ended; the slots serve its last batches", [2], True),
            ("running, slots held", [0, 2], True),
            ("only a consumer attached", [1], False),
        ]:
            with self.subTest(name):
                hs = [holder(b) for b in bytes_held]
                try:
                    self.assertEqual(ds.slots_alive(fd), alive)
                finally:
                    for h in hs:
                        os.close(h)


class AnnouncementParseTest(unittest.TestCase):
    """The block comes from a file another process writes: random page-0 bytes
    give an announcement, none, or a ValueError/RuntimeError naming the
    problem; never another exception."""

    def test_random_pages(self):
        import random

        rnd = random.Random(13)
        for i in range(3000):
            page = bytearray(4096)
            seq = rnd.choice([0, 1, 2, 4, rnd.getrandbits(32)])
            n = rnd.choice([0, 95, 96, 160, 96 + 64 * 38, 2552, 2553, rnd.getrandbits(32)])
            body = bytes(rnd.getrandbits(8) for _ in range(rnd.choice([8, 200])))
            if rnd.random() < 0.5:
                body = struct.pack("<II", 1, rnd.choice([0, 1, 2, 38, 39, 2 ** 31])) + body[8:]
            struct.pack_into("<II", page, 1536, seq, n)
            page[1544 : 1544 + len(body)] = body
            try:
                got, ann = ds.read_announcement(page, 2)
            except (ValueError, RuntimeError):
                continue
            self.assertEqual(got, seq)
            if ann is not None:
                self.assertTrue(1 <= ann.slots <= 38 and len(ann.mem) == 64 and len(ann.events) == ann.slots)
                self.assertTrue(all(len(e) == 64 for e in ann.events))

    def test_golden(self):
        # Page 0 bytes 1536-4095 as lastmiled writes them (gpu's
        # TestAnnouncementGolden pins the same file).
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "gpu", "testdata",
                            "announcement-1.2.golden")
        page = bytearray(4096)
        with open(path, "rb") as f:
            page[1536:] = f.read()
        seq, a = ds.read_announcement(page, 2)
        self.assertEqual((seq, a.slots, a.bus_id, a.generation), (2, 2, "0000:3b:00.0", 0x0102030405060708))
        self.assertEqual(a.mem, bytes(range(64)))
        self.assertEqual(a.events, [bytes(0x80 + 16 * k + i % 16 for i in range(64)) for k in range(2)])

    def test_old_ring(self):
        page = bytearray(4096)
        struct.pack_into("<II", page, 1536, 2, 100)
        self.assertEqual(ds.read_announcement(page, 1), (0, None))


FAKECUDA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "cuda", "testdata", "fakecuda.c")


@unittest.skipIf(shutil.which("gcc") is None, "gcc not found: the fake libcuda needs it")
class DriverFakeTest(unittest.TestCase):
    """The ctypes calls of the real backend, against the fake libcuda of
    cuda/testdata (compiled once): the handles pass by value, errors name
    the call."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="lastmile-fakecuda-")
        cls.lib = os.path.join(cls.dir, "libcuda.so.1")
        subprocess.run(["gcc", "-shared", "-fPIC", "-pthread", "-O1", "-o", cls.lib, FAKECUDA], check=True)
        cls.log = os.path.join(cls.dir, "calls.log")
        os.environ["FAKECUDA_LOG"] = cls.log
        cls.drv = ds.Driver(cls.lib)
        cls.c = cls.drv.lib
        assert cls.c.cuInit(0) == 0

    @classmethod
    def tearDownClass(cls):
        os.environ.pop("FAKECUDA_LOG", None)
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_ipc_calls(self):
        c = self.c
        ptr = ctypes.c_uint64()
        self.assertEqual(c.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(4096)), 0)
        h = ds._IPCHandle()
        self.assertEqual(c.cuIpcGetMemHandle(ctypes.byref(h), ptr), 0)
        self.assertEqual(self.drv.open_mem(bytes(h)), ptr.value)
        self.drv.close_mem(ptr.value)
        ev = ctypes.c_void_p()
        self.assertEqual(c.cuEventCreate(ctypes.byref(ev), 4), 0)  # interprocess
        eh = ds._IPCHandle()
        self.assertEqual(c.cuIpcGetEventHandle(ctypes.byref(eh), ev), 0)
        opened = self.drv.open_event(bytes(eh))
        self.assertEqual(opened, ev.value)
        self.drv.stream_wait(None, opened)
        with self.assertRaisesRegex(RuntimeError, "cuIpcOpenMemHandle failed: CUresult 1"):
            self.drv.open_mem(b"\0" * 64)
        self.drv.destroy_event(opened)
        with open(self.log) as f:
            log = f.read()
        self.assertIn("cuIpcOpenMemHandle_v2 flags=1 -> 0", log)
        self.assertIn("cuStreamWaitEvent", log)

    def test_backend_plumbing(self):
        # DriverIPC's calls through a stub of torch.cuda (no CUDA in this
        # torch): each runs with the device made current, the trainer's
        # current stream is the one that waits.
        import contextlib
        import types

        entered = []

        @contextlib.contextmanager
        def device(d):
            entered.append(d)
            yield

        stub = types.SimpleNamespace(cuda=types.SimpleNamespace(
            device=device, current_stream=lambda d: types.SimpleNamespace(cuda_stream=0)))
        b = ds.DriverIPC.__new__(ds.DriverIPC)
        b.torch, b.device, b.drv = stub, "cuda:1", self.drv
        c = self.c
        ptr = ctypes.c_uint64()
        self.assertEqual(c.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(4096)), 0)
        h = ds._IPCHandle()
        c.cuIpcGetMemHandle(ctypes.byref(h), ptr)
        ev = ctypes.c_void_p()
        c.cuEventCreate(ctypes.byref(ev), 4)
        eh = ds._IPCHandle()
        c.cuIpcGetEventHandle(ctypes.byref(eh), ev)
        mem = b.open_mem(bytes(h), 4096)
        self.assertEqual(mem, (ptr.value, 4096))
        e = b.open_event(bytes(eh))
        b.stream_wait(e)
        b.close_event(e)
        b.close_mem(mem)
        self.assertEqual(entered, ["cuda:1"] * 5)


if __name__ == "__main__":
    unittest.main()
