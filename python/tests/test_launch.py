"""python3 -m lastmile.launch: N processes with torch.distributed's
environment, failures stop the rest, and a real gloo all-reduce across them.

Run: cd python && /usr/bin/python3 -m unittest tests.test_launch -v
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PYROOT = os.path.dirname(HERE)

try:
    import torch.distributed as dist
except Exception:  # pragma: no cover - torch is optional
    dist = None


class TestLaunch(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="lm-launch-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def script(self, body):
        path = os.path.join(self.tmp, "s%d.py" % len(os.listdir(self.tmp)))
        with open(path, "w") as f:
            f.write(textwrap.dedent(body))
        return path

    def launch(self, *args, timeout=120):
        env = dict(os.environ, PYTHONPATH=PYROOT)
        return subprocess.run([sys.executable, "-m", "lastmile.launch"] + list(args), env=env,
                              capture_output=True, text=True, timeout=timeout)

    def test_environment_and_arguments(self):
        s = self.script("""
            import json, os, sys
            keys = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                    "MASTER_ADDR", "MASTER_PORT"]
            out = {k: os.environ.get(k) for k in keys}
            out["argv"] = sys.argv[1:]
            with open(os.path.join(sys.argv[1], "rank%s.json" % os.environ["RANK"]), "w") as f:
                json.dump(out, f)
            print("hello from", os.environ["RANK"])
            """)
        r = self.launch("--nproc", "3", "--tag", s, self.tmp, "--lr", "0.1")
        self.assertEqual(r.returncode, 0, r.stderr)
        got = []
        for rank in range(3):
            with open(os.path.join(self.tmp, "rank%d.json" % rank)) as f:
                got.append(json.load(f))
        port = got[0]["MASTER_PORT"]
        self.assertTrue(port.isdigit() and int(port) > 0)
        for rank, g in enumerate(got):
            self.assertEqual(g, {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "3",
                                 "LOCAL_WORLD_SIZE": "3", "GROUP_RANK": "0",
                                 "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port,
                                 "argv": [self.tmp, "--lr", "0.1"]})
        self.assertEqual(sorted(r.stdout.splitlines()),
                         ["[%d] hello from %d" % (k, k) for k in range(3)])

    def test_second_node(self):
        s = self.script("""
            import json, os, sys
            keys = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_PORT"]
            with open(os.path.join(sys.argv[1], "rank%s.json" % os.environ["RANK"]), "w") as f:
                json.dump({k: os.environ.get(k) for k in keys}, f)
            """)
        r = self.launch("--nnodes", "3", "--node-rank", "1", "--nproc", "2", "--master-port", "29999",
                        "--tag", s, self.tmp)
        self.assertEqual(r.returncode, 0, r.stderr)
        for local in range(2):
            with open(os.path.join(self.tmp, "rank%d.json" % (2 + local))) as f:
                self.assertEqual(json.load(f), {
                    "RANK": str(2 + local), "LOCAL_RANK": str(local), "WORLD_SIZE": "6",
                    "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "1", "MASTER_PORT": "29999"})

    def test_failure_stops_the_others(self):
        s = self.script("""
            import os, sys, time
            if os.environ["RANK"] == "1":
                sys.exit(3)
            time.sleep(120)
            """)
        t0 = time.monotonic()
        r = self.launch("--nproc", "2", "--grace", "2", s)
        self.assertLess(time.monotonic() - t0, 60)
        self.assertEqual(r.returncode, 3)
        self.assertIn("rank 1 exited with 3; stopping the other 1", r.stderr)

    def test_usage_errors(self):
        r = self.launch("--nproc", "0", "x.py")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--nproc must be at least 1", r.stderr)
        r = self.launch("--nproc", "2")
        self.assertEqual(r.returncode, 2)
        self.assertIn("a script to run", r.stderr)
        r = self.launch("--nnodes", "2", "--nproc", "2", "x.py")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--nnodes 2: give --master-port", r.stderr)
        r = self.launch("--nnodes", "2", "--node-rank", "2", "--master-port", "1", "--nproc", "2", "x.py")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--node-rank 2 of --nnodes 2: want 0 to 1", r.stderr)

    def test_module(self):
        r = self.launch("--nproc", "2", "-m", "json.tool", "--help")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.count("usage:"), 2)

    @unittest.skipIf(dist is None or not dist.is_available(), "needs torch.distributed")
    def test_gloo_all_reduce(self):
        s = self.script("""
            import os, sys, torch, torch.distributed as dist
            dist.init_process_group("gloo")
            t = torch.tensor([dist.get_rank() + 1.0])
            dist.all_reduce(t)
            with open(os.path.join(sys.argv[1], "sum%d" % dist.get_rank()), "w") as f:
                f.write("%d %d %g" % (dist.get_rank(), dist.get_world_size(), t.item()))
            dist.destroy_process_group()
            """)
        r = self.launch("--nproc", "2", s, self.tmp, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        for rank in range(2):
            with open(os.path.join(self.tmp, "sum%d" % rank)) as f:
                self.assertEqual(f.read(), "%d 2 3" % rank)


if __name__ == "__main__":
    unittest.main()
