"""Two hosts on one machine: torchrun --nnodes 2, each "host" with its own
lastmiled and its own lastmile.launch group, one gloo world across both.

Each host's daemon serves its own ranks (docs/python.md, "Several hosts"),
and DDP's all-reduce at every step would hang if one rank of the world ran
out of batches before the others: the run finishing, with the same steps on
every rank, is the check.

Run: cd python && /usr/bin/python3 -m unittest tests.test_hosts -v
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import daemonproc  # noqa: E402

try:
    import torch.distributed as dist
except Exception:  # pragma: no cover - torch is optional
    dist = None

TRAIN = """
import os
import sys
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

import lastmile

dist.init_process_group("gloo")
ds = lastmile.Dataset(sys.argv[1])
torch.manual_seed(0)
model = DDP(nn.Linear(3, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
steps = rows = 0
for epoch in ds.epochs():
    for batch in ds:
        x = torch.stack([batch["dense_0"], batch["dense_1"], batch["dense_2"]], dim=1)
        loss = F.binary_cross_entropy_with_logits(model(x).squeeze(1), batch["label"].float())
        opt.zero_grad()
        loss.backward()
        opt.step()
        steps += 1
        rows += len(batch["label"])
# One write: the ranks share the launcher's stdout, and print() may split a line.
os.write(1, ("rank %d of %d on host %d of %d: %d steps, %d rows\\n"
             % (ds.rank, ds.world_size, ds.host, ds.hosts, steps, rows)).encode())
dist.destroy_process_group()
"""

SPEC = """
version: 1
name: hosts
inputs: [%s]
columns: [label, dense_0, dense_1, dense_2]
pipeline:
  - filter: "label == 1 or dense_0 > 0"
batch: {size: 250, last: drop}
epochs: 2
seed: 5
shuffle: {units: true, buffer: 1000}
decode: {max_unit_rows: 1500}
ring: {slots: 4}
"""


@unittest.skipIf(dist is None, "needs torch")
@unittest.skipUnless(os.access(daemonproc.LASTMILED, os.X_OK),
                     "%s is not built: run `make build`" % daemonproc.LASTMILED)
class TestTwoHosts(unittest.TestCase):
    def run_hosts(self, inputs):
        """Run TRAIN on two hosts, host h reading inputs[h]; return each
        host's (returncode, stdout, stderr, daemon log)."""
        tmp = tempfile.mkdtemp(prefix="lm-hosts-")
        self.addCleanup(shutil.rmtree, tmp, True)
        script = os.path.join(tmp, "train.py")
        with open(script, "w") as f:
            f.write(textwrap.dedent(TRAIN))
        sys.path.insert(0, daemonproc.PYROOT)
        from lastmile.launch import free_port

        port = free_port()
        groups = []
        for node in range(2):
            spec = os.path.join(tmp, "hosts%d.yaml" % node)
            with open(spec, "w") as f:
                f.write(SPEC % inputs[node])
            d = daemonproc.Lastmiled(os.path.join(tmp, "d%d" % node))
            self.addCleanup(d.kill)
            d.start()
            env = dict(os.environ, LASTMILE_SOCKET=d.socket, PYTHONPATH=daemonproc.PYROOT)
            argv = [sys.executable, "-m", "lastmile.launch", "--nnodes", "2", "--node-rank", str(node),
                    "--nproc", "2", "--master-port", str(port), script, spec]
            groups.append((d, subprocess.Popen(argv, env=env, stdout=subprocess.PIPE,
                                               stderr=subprocess.PIPE, text=True)))
        res = []
        for d, p in groups:
            try:
                out, err = p.communicate(timeout=240)
            except subprocess.TimeoutExpired:
                for _, q in groups:
                    q.kill()
                self.fail("the two hosts' ranks did not finish (a rank ran out of batches?):\n%s" % d.log())
            res.append((p.returncode, out, err, d.log()))
        return res

    def test_hosts_that_plan_different_inputs_stop(self):
        tmp = tempfile.mkdtemp(prefix="lm-hosts-copy-")
        self.addCleanup(shutil.rmtree, tmp, True)
        copy = os.path.join(tmp, "small")
        shutil.copytree(daemonproc.SMALL, copy)
        os.remove(sorted(os.path.join(copy, n) for n in os.listdir(copy) if n.endswith(".parquet"))[-1])
        for rc, out, err, log in self.run_hosts([daemonproc.SMALL, copy]):
            self.assertNotEqual(rc, 0, out)
            self.assertIn("the 2 hosts planned different inputs (host 0: sha256:", err)
            self.assertIn("cancel requested", log)  # the job cannot run: its trainers cancel it

    def test_ddp_across_two_hosts(self):
        lines = []
        for rc, out, err, log in self.run_hosts([daemonproc.SMALL] * 2):
            self.assertEqual(rc, 0, "%s\n%s" % (err, log))
            lines += out.splitlines()
            # Each host counted only its share of the units; the trainers
            # relayed the other host's counts.
            self.assertIn("counted this host's share of the units", log)
            self.assertIn("the hosts' unit counts arrived from a trainer", log)
        got = {}
        for m in re.finditer(r"rank (\d) of 4 on host (\d) of 2: (\d+) steps, (\d+) rows", "\n".join(lines)):
            rank, host, steps, rows = map(int, m.groups())
            self.assertEqual(host, rank // 2, m.group(0))
            got[rank] = (steps, rows)
        self.assertEqual(sorted(got), [0, 1, 2, 3], lines)
        self.assertEqual(len(set(got.values())), 1, got)
        steps, rows = got[0]
        self.assertGreater(steps, 0)
        self.assertEqual(rows, steps * 250)


if __name__ == "__main__":
    unittest.main()
