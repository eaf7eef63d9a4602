"""Host staging (lastmile.cuda) against a stand-in for torch's CUDA calls.

No GPU here: FakeCUDA plays the device with CPU tensors and records every
call, so the tests check the protocol: the ring is registered once,
2 MiB-aligned; each batch is one copy; a ring slot is released only after
its copy's event has completed; device slots are reused after the trainer's
stream passed them; unregistration comes before the mapping is unmapped;
a failed registration falls back to host copies with a warning.
"""

import ctypes
import logging
import os
import shutil
import sys
import tempfile
import threading
import unittest
from unittest import mock

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import lastmile  # noqa: E402
import lastmile.cuda as lmcuda  # noqa: E402
import ringwriter as rw  # noqa: E402

try:
    import torch
except Exception:  # pragma: no cover - torch is optional
    torch = None

FIELDS = [f for f in rw.ALL_FIELDS if f.name in ("id", "x", "tokens", "score")]
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]


def mapped(addr):
    vec = ctypes.create_string_buffer(1)
    return _libc.mincore(addr, 4096, vec) == 0


class FakeEvent:
    n = 0

    def __init__(self, what):
        FakeEvent.n += 1
        self.id, self.what, self.done = FakeEvent.n, what, False


class FakeCUDA:
    """torch's CUDA calls as HostStaging uses them, on the CPU, recorded."""

    def __init__(self, ring, fail_register=False):
        self.ring, self.fail_register = ring, fail_register
        self.calls = []
        self.map_addr = None

    def register(self, addr, nbytes):
        self.calls.append(("register", addr, nbytes))
        if self.fail_register:
            raise lmcuda.StagingError("cudaHostRegister failed: cudaError 2")
        self.map_addr = addr

    def unregister(self, addr):
        self.calls.append(("unregister", addr, mapped(addr)))

    def alloc(self, nbytes):
        self.calls.append(("alloc", nbytes))
        return torch.zeros(nbytes, dtype=torch.uint8)

    def host(self, addr, nbytes):
        assert self.map_addr <= addr
        if self.ring is not None:
            assert addr + nbytes <= self.map_addr + os.fstat(self.ring._core.fd).st_size
        buf = (ctypes.c_uint8 * max(nbytes, 1)).from_address(addr)
        return torch.frombuffer(buf, dtype=torch.uint8, count=nbytes)

    def copy(self, dst, src, after):
        assert after is None or after.what == "mark", after
        dst[: src.numel()].copy_(src)
        ev = FakeEvent("copy")
        held = self.ring._core.held if self.ring is not None else None
        self.calls.append(("copy", src.numel(), held, ev, after.id if after else None))
        return ev

    def order_after(self, ev):
        self.calls.append(("order_after", ev.id))

    def mark(self):
        ev = FakeEvent("mark")
        self.calls.append(("mark", ev.id))
        return ev

    def wait(self, ev):
        ev.done = True
        self.calls.append(("wait", ev.id))

    def view(self, dst, offset, nbytes, dtype, shape):
        return dst[offset : offset + nbytes].view(dtype).view(shape)


@unittest.skipIf(torch is None, "torch is not installed")
class HostStagingTest(unittest.TestCase):
    RING_DIR = None  # where the test ring is made (None: the temp directory)

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="lastmile-cuda-test-", dir=self.RING_DIR)
        self.w = rw.RingWriter("stage", self.dir, FIELDS, slot_count=4, slot_size=2 << 20)
        self.w.create()
        # Tests that stop early publish no more than the ring holds, so
        # that the producer thread never blocks on a full ring.
        self.n = 9 if self._testMethodName in ("test_protocol", "test_real_device") else 4

        def produce():
            for s in range(self.n):
                cols, valid, rows = rw.make_batch(s, FIELDS)
                self.w.publish(cols, rows, valid=valid, batch_index=s)
            self.w.finish("done")

        self.t = threading.Thread(target=produce, daemon=True)
        self.t.start()
        self.ring = lastmile.Ring.open("stage", self.dir, timeout=30)
        self.fake = FakeCUDA(self.ring)
        # Record, at every release of a ring slot, whether that slot's copy
        # had completed.
        self.released = []
        core = self.ring._core
        orig = core.release_held

        def release_held():
            copies = [c for c in self.fake.calls if c[0] == "copy" and c[2] == core.held]
            self.released.append((core.held, bool(copies) and copies[-1][3].done))
            orig()

        core.release_held = release_held

    def tearDown(self):
        self.ring.close()
        self.t.join(10)
        self.w.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def check_batch(self, b, s):
        cols, valid, rows = rw.make_batch(s, FIELDS)
        self.assertEqual(b.cursor.batch_index, s)
        np.testing.assert_array_equal(b["id"].numpy(), cols["id"])
        np.testing.assert_array_equal(b["x"].numpy(), cols["x"])
        np.testing.assert_array_equal(b["tokens"].values.numpy(), cols["tokens"][0])
        np.testing.assert_array_equal(b["tokens"].offsets.numpy(), cols["tokens"][1])
        np.testing.assert_array_equal(b.valid["score"].numpy(), valid["score"])

    def test_protocol(self):
        with mock.patch.object(lmcuda, "TorchCUDA", lambda device: self.fake):
            it = self.ring.iter_torch(device="cuda:0", pool=3)
            s = 0
            for b in it:
                self.check_batch(b, s)  # on the (fake) device, right after the copy
                s += 1
        self.assertEqual(s, self.n)
        calls = self.fake.calls
        kinds = [c[0] for c in calls]
        # Registered once, 2 MiB-aligned, the whole ring file.
        regs = [c for c in calls if c[0] == "register"]
        self.assertEqual(len(regs), 1)
        self.assertEqual(regs[0][1] % lmcuda.ALIGN, 0)
        self.assertEqual(regs[0][2], os.path.getsize(os.path.join(self.dir, "stage")))
        # One copy per batch, of the slot's used bytes, while the slot is held.
        copies = [c for c in calls if c[0] == "copy"]
        self.assertEqual([c[2] for c in copies], list(range(self.n)))
        self.assertTrue(all(0 < c[1] <= 2 << 20 for c in copies))
        # Every release came after its copy's event completed.
        self.assertEqual([h for h, _ in self.released], list(range(self.n)))
        self.assertTrue(all(done for _, done in self.released), self.released)
        # The trainer's stream waits on each copy.
        self.assertEqual(kinds.count("order_after"), self.n)
        # Three device slots, each reused only after a mark on the trainer's stream.
        self.assertEqual(kinds.count("alloc"), 3)
        self.assertEqual([c[4] is None for c in copies], [True] * 3 + [False] * (self.n - 3))
        # Unregistered last, while the mapping was still mapped.
        self.assertEqual(kinds[-1], "unregister")
        self.assertEqual(calls[-1][1], regs[0][1])
        self.assertTrue(calls[-1][2], "unregistered after the mapping was unmapped")
        self.assertFalse(mapped(regs[0][1]), "the aligned mapping was not unmapped on close")

    def test_close_midway(self):
        st = lmcuda.HostStaging(self.ring, "cuda:0", backend=self.fake)
        st.before_next()
        b = st.stage(self.ring.next())
        self.check_batch(b, 0)
        st.close()  # waits for the copy, unregisters, unmaps
        kinds = [c[0] for c in self.fake.calls]
        self.assertEqual(kinds[-2:], ["wait", "unregister"])
        self.assertTrue(self.fake.calls[-1][2])
        self.ring.next()  # releases slot 0: its copy is done
        self.assertEqual(self.released, [(0, True)])

    def test_register_fails_falls_back(self):
        self.fake.fail_register = True
        with self.assertLogs("lastmile", logging.WARNING) as logs:
            st = lmcuda.stager(self.ring, "cuda:0", backend=self.fake)
        self.assertIsInstance(st, lmcuda.HostCopies)
        self.assertIn("falling back to host copies", logs.output[0])
        self.assertIn("cudaError 2", logs.output[0])
        # The mapping made for the registration is gone again.
        self.assertFalse(mapped(self.fake.calls[0][1]))

    def test_register_fails_on_disk_says_why(self):
        """A ring on a disk filesystem cannot be registered (Linux 6.5 and
        later): the fallback's warning says so and where rings belong."""
        if lmcuda.unpinnable(self.ring._core.fd) is None:
            self.skipTest("the test ring is on tmpfs here")
        self.fake.fail_register = True
        with self.assertLogs("lastmile", logging.WARNING) as logs:
            st = lmcuda.stager(self.ring, "cuda:0", backend=self.fake)
        self.assertIsInstance(st, lmcuda.HostCopies)
        self.assertIn("put rings on tmpfs (/dev/shm", logs.output[0])

    def test_off_and_cpu_copy(self):
        self.assertIsInstance(lmcuda.stager(self.ring, "cuda:0", staging="off"), lmcuda.HostCopies)
        st = lmcuda.stager(self.ring, "cpu")
        b = st.stage(self.ring.next())
        self.check_batch(b, 0)
        with self.assertRaises(ValueError):
            lmcuda.stager(self.ring, "cuda:0", staging="pinned")


class UnpinnableTest(unittest.TestCase):
    """Which ring files CUDA can register in place, by their filesystem."""

    def test_filesystems(self):
        for d in ("/dev/shm", tempfile.gettempdir()):
            if not os.path.isdir(d):
                continue
            with tempfile.NamedTemporaryFile(dir=d) as f:
                t, why = lmcuda.fs_type(f.fileno()), lmcuda.unpinnable(f.fileno())
                self.assertIsNotNone(t)
                if t == 0x01021994:  # tmpfs
                    self.assertIsNone(why, d)
                else:
                    self.assertIn("put rings on tmpfs", why, d)
                    self.assertIn("Linux (6.5 and later)", why)


@unittest.skipUnless(os.environ.get("LASTMILE_GPU_TEST") and torch is not None and torch.cuda.is_available(),
                     "needs a CUDA GPU and LASTMILE_GPU_TEST=1 (make gpu-test)")
class RealGPUTest(HostStagingTest):
    """The same ring staged onto a real GPU through torch (make gpu-test)."""

    RING_DIR = "/dev/shm"  # rings live on tmpfs: the kernel pins no disk file's shared pages

    def test_registers_in_place(self):
        st = lmcuda.stager(self.ring, "cuda:0")
        self.assertIsInstance(st, lmcuda.HostStaging, "registration fell back to host copies")
        for s in range(3):
            st.before_next()
            b = st.stage(self.ring.next())
            self.assertEqual(b["id"].device.type, "cuda")
            torch.cuda.synchronize()
            self.check_batch(b.to("cpu"), s)
        st.close()

    def test_failed_call_leaves_torch_usable(self):
        """A refused registration must not poison torch's next CUDA call: the
        runtime keeps the error as the thread's last one until cleared."""
        cu = lmcuda.TorchCUDA("cuda:0")
        with self.assertRaises(lmcuda.StagingError):
            cu.register(4096, 4096)  # nothing is mapped at page 1
        x = torch.arange(16).to("cuda:0", non_blocking=True)
        self.assertEqual(int(x.sum().item()), 120)

    def test_real_device(self):
        s = 0
        for b in self.ring.iter_torch(device="cuda:0"):
            self.assertEqual(b["id"].device.type, "cuda")
            torch.cuda.synchronize()
            self.check_batch(b.to("cpu"), s)
            s += 1
        self.assertEqual(s, self.n)

    # The stand-in's tests do not run again here.
    test_protocol = test_close_midway = test_register_fails_falls_back = test_off_and_cpu_copy = None
    test_register_fails_on_disk_says_why = None


@unittest.skipIf(torch is None, "torch is not installed")
class DatasetStagingTest(unittest.TestCase):
    """Dataset(device="cuda:...") stages through the registered ring."""

    def setUp(self):
        import fakedaemon

        self.tmp = tempfile.mkdtemp(prefix="lastmile-cuda-ds-")
        self.shm = os.path.join(self.tmp, "shm")
        os.mkdir(self.shm)
        self.sock = os.path.join(self.tmp, "s")
        self.daemon = fakedaemon.FakeDaemon(self.sock, self.shm, rows=4, per_epoch=5, epochs=2).start()
        self.row_id = fakedaemon.row_id

    def tearDown(self):
        self.daemon.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_dataset_device(self):
        fakes = []

        def backend(device):
            self.assertEqual(str(device), "cuda:0")
            fakes.append(FakeCUDA(None))
            return fakes[-1]

        spec = "version: 1\nname: t\ninputs: [x.parquet]\nbatch: {size: 4}\n"
        with mock.patch.object(lmcuda, "TorchCUDA", backend):
            ds = lastmile.Dataset(spec, 1, 2, socket=self.sock, device="cuda:0", open_timeout=30, timeout=60)
            n = 0
            for b in ds:
                c = b.cursor
                self.assertEqual(b["id"].tolist(), [self.row_id(c.epoch, c.batch_index, 1, r, 2, 4) for r in range(4)])
                n += 1
            ds.close()
        self.assertEqual(n, 10)
        self.assertEqual(len(fakes), 1)
        kinds = [c[0] for c in fakes[0].calls]
        self.assertEqual(kinds.count("register"), 1)
        self.assertEqual(kinds.count("copy"), 10)
        self.assertEqual(kinds[-1], "unregister")
        self.assertTrue(fakes[0].calls[-1][2], "unregistered after unmapping")


if __name__ == "__main__":
    unittest.main()
