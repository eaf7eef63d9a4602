"""Review findings on the trainer's side of device staging (stand-ins, no GPU)."""

import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import lastmile  # noqa: E402
import lastmile.cuda as lmcuda  # noqa: E402
import lastmile.devstage as ds  # noqa: E402
import ringwriter as rw  # noqa: E402
from test_cuda import FIELDS, FakeCUDA  # noqa: E402
from test_devstage import FakeIPC, announce, torch  # noqa: E402


@unittest.skipIf(torch is None, "torch is not installed")
class ReviewBusIdTest(unittest.TestCase):
    """lastmiled announces the PCI bus id of the GPU it copied to (the rank's
    GPU as *it* mapped it). The trainer must not open those slots on another
    device: cuIpcOpenMemHandle with lazy peer access maps the other GPU's
    memory (every batch then read over the peer link) or fails."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="lastmile-busid-")
        self.w = rw.RingWriter("dev", self.dir, FIELDS, slot_count=4, slot_size=2 << 20, version=(1, 2))
        self.w.create()
        self.ring = lastmile.Ring.open("dev", self.dir, timeout=30)
        self.ipc = FakeIPC(self.ring)
        host = lmcuda.HostStaging(self.ring, "cuda:0", backend=FakeCUDA(self.ring))
        self.st = ds.DeviceStaging(self.ring, "cuda:0", self.ipc, host, lambda: True)

    def tearDown(self):
        self.st.close()
        self.ring.close()
        self.w.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def take(self, s):
        cols, valid, rows = rw.make_batch(s, FIELDS)
        self.w.publish(cols, rows, valid=valid, batch_index=s)
        self.st.before_next()
        return self.st.stage(self.ring.next(timeout=10))

    def test_slots_on_another_gpu_are_not_opened(self):
        self.ipc.bus_id = lambda: "0000:b1:00.0"  # the trainer's cuda:0; lastmiled copied to 3b
        announce(self.w.path, 7, b"A")
        with self.assertLogs("lastmile", "WARNING"):
            self.take(0)
        self.assertEqual([c for c in self.ipc.calls if c[0] in ("open_mem", "stream_wait")], [],
                         "opened lastmiled's slots of another GPU")
        self.assertEqual(self.st.device_batches, 0)

    def test_same_gpu_any_spelling(self):
        self.ipc.bus_id = lambda: "00000000:3B:00.0"  # NVML's/torch's spelling of the announced 0000:3b:00.0
        announce(self.w.path, 7, b"A")
        self.take(0)
        self.assertEqual(self.st.device_batches, 1)



@unittest.skipIf(shutil.which("gcc") is None, "gcc not found: the fake libcuda needs it")
class ReviewDriverBusIdTest(unittest.TestCase):
    """Driver.bus_id's ctypes calls against the fake libcuda."""

    def test_bus_id(self):
        import subprocess

        from test_devstage import FAKECUDA

        d = tempfile.mkdtemp(prefix="lastmile-fakecuda-")
        try:
            lib = os.path.join(d, "libcuda.so.1")
            subprocess.run(["gcc", "-shared", "-fPIC", "-pthread", "-O1", "-o", lib, FAKECUDA], check=True)
            drv = ds.Driver(lib)
            self.assertEqual(drv.lib.cuInit(0), 0)
            self.assertEqual(drv.bus_id(0), "0000:3b:00.0")
            self.assertEqual(ds.norm_bus_id("00000000:3B:00.0"), "0000:3b:00.0")
        finally:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
