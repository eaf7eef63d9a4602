"""End to end on a real GPU (make gpu-test): the real lastmiled, a job for
each ``gpu.staging`` mode, and a trainer that reads its batches as CUDA
tensors through ``lastmile.Dataset(..., device="cuda:0")``.

Every mode must give the batches a host-only read gives, byte for byte, and
device staging must really be done by lastmiled (its status counts the
batches it copied). The trainer's CPU per batch in each mode is printed,
not asserted: it is a figure for docs/gpu.md, measured on whatever GPU
machine runs this.

Skipped unless LASTMILE_GPU_TEST=1, torch sees a CUDA device and
bin/lastmiled is built.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

from . import daemonproc

try:
    import torch
except ImportError:  # pragma: no cover - torch is a test dependency
    torch = None

sys.path.insert(0, daemonproc.PYROOT)
import lastmile  # noqa: E402

BIN = os.environ.get("LASTMILE_BIN", os.path.join(daemonproc.REPO, "bin", "lastmile"))
ON_GPU = bool(os.environ.get("LASTMILE_GPU_TEST")) and torch is not None and torch.cuda.is_available()


@unittest.skipUnless(ON_GPU and os.access(daemonproc.LASTMILED, os.X_OK),
                     "needs a CUDA GPU, LASTMILE_GPU_TEST=1 and bin/lastmiled (make gpu-test)")
class RealGPUDatasetTest(unittest.TestCase):
    FIELDS = ("row_id", "dense_0")

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="lm-gpu-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        # rings on tmpfs: the kernel pins no shared pages of a disk file for CUDA
        shm = tempfile.mkdtemp(prefix="lm-gpu-", dir="/dev/shm")
        self.addCleanup(shutil.rmtree, shm, True)
        self.d = daemonproc.Lastmiled(self.tmp, shm=shm)
        self.addCleanup(self.d.kill)
        self.d.start()

    def spec(self, name, staging):
        path = os.path.join(self.tmp, name + ".yaml")
        with open(path, "w") as f:
            f.write("version: 1\nname: %s\ninputs: [%s]\ncolumns: [%s]\nbatch: {size: 250}\n"
                    "epochs: 2\nring: {slots: 4}\ngpu: {staging: %s}\n"
                    % (name, daemonproc.SMALL, ", ".join(self.FIELDS), staging))
        return path

    def read(self, spec, device=None):
        """Every batch of rank 0 of a 1-rank job, as CPU tensors, with the
        trainer's CPU seconds per batch (the clones' launches included)."""
        ds = lastmile.Dataset(spec, 0, 1, socket=self.d.socket, device=device, timeout=120,
                              open_timeout=60)
        kept, n = [], 0
        cpu0 = time.process_time()
        for b in ds:
            if device is not None:
                self.assertEqual(b["row_id"].device.type, "cuda", "batch %d is not on the GPU" % n)
            # clones: a staged batch's tensors are reused pool batches later
            kept.append({k: b[k].clone() for k in self.FIELDS})
            n += 1
        if device is not None:
            torch.cuda.synchronize()
        per_batch = (time.process_time() - cpu0) / max(n, 1)
        job = self.d_job(ds.job_id)
        st = ds._gpu.st if ds._gpu is not None else None
        job["trainer_device_batches"] = getattr(st, "device_batches", 0)
        ds.close()
        return [{k: v.cpu() for k, v in b.items()} for b in kept], per_batch, job

    def d_job(self, job_id):
        return lastmile.Client(self.d.socket, timeout=10).job(job_id)

    def assert_same(self, want, got, mode):
        self.assertEqual(len(got), len(want), "%s: batch count" % mode)
        for i, (w, g) in enumerate(zip(want, got)):
            for k in self.FIELDS:
                self.assertEqual(w[k].dtype, g[k].dtype, "%s: batch %d field %s" % (mode, i, k))
                self.assertTrue(torch.equal(w[k], g[k]), "%s: batch %d field %s differs" % (mode, i, k))

    def test_every_mode_gives_the_host_batches(self):
        want, host_cpu, _ = self.read(self.spec("ref", "off"))
        self.assertEqual(sum(len(b["row_id"]) for b in want), 20000)
        figures = {"host read (no device)": host_cpu}
        for mode in ("off", "host", "device"):
            got, cpu, job = self.read(self.spec("gpu-" + mode, mode), device="cuda:0")
            self.assert_same(want, got, mode)
            figures[mode] = cpu
            if mode == "device":
                staged = (job.get("gpu") or {}).get("device_staging") or []
                self.assertEqual(len(staged), 1, "device staging status: %r\n%s" % (job.get("gpu"), self.d.log()))
                self.assertEqual(staged[0]["mode"], "device", "rank fell back: %r\n%s" % (staged[0], self.d.log()))
                self.assertEqual(staged[0]["staged_batches"], len(want), staged[0])
                # and the trainer took them as views of lastmiled's device slots
                self.assertEqual(job["trainer_device_batches"], len(want), "trainer used host staging")
        for mode, cpu in figures.items():
            print("gpu e2e: staging %-22s trainer CPU %7.1f us per batch" % (mode, cpu * 1e6), file=sys.stderr)


# A trainer rank for the 2-rank test, run as its own process (CUDA is not
# forked): reads its rank as CUDA tensors, sums row_id on the GPU, and
# prints one JSON line: rows, row_id sum, batches, CPU and wall seconds.
RANK_READER = """
import json, sys, time
sys.path.insert(0, %(pyroot)r)
import torch, lastmile
ds = lastmile.Dataset(%(spec)r, %(rank)d, 2, socket=%(socket)r, device=%(device)r, timeout=120)
rows, total, n = 0, torch.zeros((), dtype=torch.int64, device="cuda:0"), 0
c0, w0 = time.process_time(), time.monotonic()
for b in ds:
    total += b["row_id"].sum()  # a kernel on every batch, as a step would queue
    rows += b.rows
    n += 1
torch.cuda.synchronize()
out = dict(rows=rows, sum=int(total.item()), batches=n, cpu=time.process_time() - c0,
           wall=time.monotonic() - w0, on=str(b["row_id"].device))
ds.close()
print(json.dumps(out))
"""


@unittest.skipUnless(ON_GPU and os.access(daemonproc.LASTMILED, os.X_OK) and os.access(BIN, os.X_OK),
                     "needs a CUDA GPU, LASTMILE_GPU_TEST=1, bin/lastmiled and bin/lastmile (make gpu-test)")
class RealGPUTwoRanksTest(unittest.TestCase):
    """A 2-rank job of every generated column (dense floats, ids, list
    sequences) in batches of 4096, both ranks on GPU 0, with staging off,
    host and device: every row once across the ranks in each mode, and the
    trainers' CPU per batch and rows per second printed for docs/gpu.md."""

    ROWS = 262144

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="lm-gpu2-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        shm = tempfile.mkdtemp(prefix="lm-gpu2-", dir="/dev/shm")
        self.addCleanup(shutil.rmtree, shm, True)
        self.data = os.path.join(self.tmp, "ctr")
        subprocess.run([BIN, "gen", "--rows", str(self.ROWS), "--files", "2", self.data], check=True,
                       stdout=subprocess.DEVNULL)
        self.d = daemonproc.Lastmiled(self.tmp, shm=shm)
        self.addCleanup(self.d.kill)
        self.d.start()

    def run_job(self, mode):
        spec = os.path.join(self.tmp, "two-%s.yaml" % mode)
        with open(spec, "w") as f:
            f.write("version: 1\nname: two-%s\ninputs: [%s]\nbatch: {size: 4096}\nepochs: 1\n"
                    "world_size: 2\nring: {slots: 4}\ngpu: {staging: %s, devices: [\"0\", \"0\"]}\n"
                    % (mode, self.data, mode))
        procs = [subprocess.Popen([sys.executable, "-c", RANK_READER % dict(
            pyroot=daemonproc.PYROOT, spec=spec, rank=r, socket=self.d.socket, device="cuda:0")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(2)]
        res = []
        for p in procs:
            out, err = p.communicate(timeout=300)
            self.assertEqual(p.returncode, 0, "%s rank failed:\n%s\n%s" % (mode, err, self.d.log()))
            res.append(json.loads(out.strip().splitlines()[-1]))
        return res

    def test_two_ranks_every_mode(self):
        want = self.ROWS * (self.ROWS - 1) // 2  # row_id is 0..ROWS-1
        for mode in ("off", "host", "device"):
            res = self.run_job(mode)
            self.assertEqual(sum(r["rows"] for r in res), self.ROWS, "%s: %r" % (mode, res))
            self.assertEqual(sum(r["sum"] for r in res), want, "%s: row_id sum %r" % (mode, res))
            self.assertTrue(all(r["on"] == "cuda:0" for r in res), res)
            for rank, r in enumerate(res):
                print("gpu e2e 2 ranks: staging %-6s rank %d  %3d batches  trainer CPU %7.1f us per batch  "
                      "%9.0f rows/s" % (mode, rank, r["batches"], r["cpu"] / r["batches"] * 1e6,
                                        r["rows"] / r["wall"]), file=sys.stderr)


# A trainer that survives lastmiled's death in device mode: it catches
# DeviceStagingLost and iterates again, as docs/gpu.md tells trainers to.
# After each batch it writes "rows lost views" to the progress file, and
# at the end it prints its row ids, how often it was told, and how many
# batches came as views of lastmiled's device slots. A batch read from
# freed device memory would show as row ids lost, repeated or wrong.
SURVIVOR = """
import json, os, sys, time
sys.path.insert(0, %(pyroot)r)
import torch, lastmile
from lastmile.devstage import DeviceStagingLost
ds = lastmile.Dataset(%(spec)r, 0, 1, socket=%(socket)r, device="cuda:0", timeout=120,
                      reconnect_timeout=120)
rows, lost, lost_at = [], 0, None
def views():
    return getattr(ds._gpu.st, "device_batches", 0)
def progress():
    with open(%(progress)r + ".tmp", "w") as f:
        f.write("%%d %%d %%d" %% (len(rows), lost, views()))
    os.replace(%(progress)r + ".tmp", %(progress)r)
while True:
    try:
        for b in ds:
            rows += b["row_id"].cpu().tolist()
            progress()
            time.sleep(0.1)
        break
    except DeviceStagingLost:
        lost += 1
        lost_at = views()
        progress()
print(json.dumps(dict(rows=rows, lost=lost, views=views(), views_when_lost=lost_at,
                      stager=type(ds._gpu.st).__name__)))
"""


@unittest.skipUnless(ON_GPU and os.access(daemonproc.LASTMILED, os.X_OK),
                     "needs a CUDA GPU, LASTMILE_GPU_TEST=1 and bin/lastmiled (make gpu-test)")
class RealGPUDaemonDeathTest(unittest.TestCase):
    """lastmiled killed with SIGKILL mid-run while it device-stages a
    trainer's batches: the trainer is told (DeviceStagingLost) before its
    next batch, iterates again with host copies from the ring, takes device
    views again from the restarted daemon, and gets every row of the epoch
    exactly once."""

    def progress(self, path):
        try:
            with open(path) as f:
                return [int(x) for x in f.read().split()]
        except (OSError, ValueError):
            return [0, 0, 0]

    def wait_for(self, p, d, prog, what, cond, timeout=120):
        deadline = time.monotonic() + timeout
        while not cond():
            if p.poll() is not None or time.monotonic() > deadline:
                p.kill()
                _, err = p.communicate()
                self.fail("%s did not happen (progress: rows, lost, views %r); trainer's stderr:\n%s\n"
                          "lastmiled's log:\n%s" % (what, self.progress(prog), err[-3000:], d.log()[-4000:]))
            time.sleep(0.01)

    def test_kill9_mid_run(self):
        tmp = tempfile.mkdtemp(prefix="lm-gpu-kill-")
        self.addCleanup(shutil.rmtree, tmp, True)
        shm = tempfile.mkdtemp(prefix="lm-gpu-kill-", dir="/dev/shm")
        self.addCleanup(shutil.rmtree, shm, True)
        d = daemonproc.Lastmiled(tmp, shm=shm)
        self.addCleanup(d.kill)
        d.start()
        spec = os.path.join(tmp, "kill.yaml")
        with open(spec, "w") as f:
            f.write("version: 1\nname: kill\ninputs: [%s]\ncolumns: [row_id]\nbatch: {size: 100}\n"
                    "epochs: 1\nring: {slots: 4}\ngpu: {staging: device}\n" % daemonproc.SMALL)
        prog = os.path.join(tmp, "progress")
        p = subprocess.Popen([sys.executable, "-c", SURVIVOR % dict(
            pyroot=daemonproc.PYROOT, spec=spec, socket=d.socket, progress=prog)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(p.kill)
        self.wait_for(p, d, prog, "20 batches as device views", lambda: self.progress(prog)[2] >= 20)
        d.kill()  # SIGKILL, and reaped: its locks are gone, the ring holds batches
        self.wait_for(p, d, prog, "DeviceStagingLost", lambda: self.progress(prog)[1] >= 1, timeout=30)
        d.start()
        out, err = p.communicate(timeout=300)
        self.assertEqual(p.returncode, 0, "trainer failed:\n%s\n%s" % (err, d.log()))
        r = json.loads(out.strip().splitlines()[-1])
        self.assertEqual(sorted(r["rows"]), list(range(10000)), "rows lost or repeated: %d rows" % len(r["rows"]))
        summary = {k: v for k, v in r.items() if k != "rows"}
        self.assertEqual(r["lost"], 1, summary)
        self.assertGreater(r["views"], r["views_when_lost"], "device staging did not resume: %r" % summary)
        self.assertIn("adopting ring", d.log())
        print("gpu e2e kill -9: %r" % summary, file=sys.stderr)


if __name__ == "__main__":
    unittest.main()
