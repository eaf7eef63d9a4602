"""What sharing the unit counts saves a world on several hosts: H lastmileds
on this machine, one per "host", each fed by one trainer rank started with
``lastmile.launch --nnodes H`` (one gloo world across them), one epoch of
SPEC drained. Prints each daemon's user+system CPU for the job and each
rank's time in the Dataset constructor (submit, counting, the exchange)
and in all.

``--share 0`` makes the trainers submit without share_counts, so each
daemon counts every unit (what a world without torch.distributed gets).
The trainers still compare plans, so the constructor then also waits for
the counting. docs/benchmarks.md, "Several hosts: the counts shared".

Run from the repository root, after ``make build``:

    /usr/bin/python3 bench/hosts/counts.py --hosts 4 --share 1 SPEC
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "python", "tests"))
sys.path.insert(0, os.path.join(REPO, "python"))

import daemonproc  # noqa: E402
from lastmile.launch import free_port  # noqa: E402

TRAIN = """
import os, sys, time
import torch.distributed as dist
import lastmile, lastmile.dataset
if os.environ.get("SHARE") == "0":
    lastmile.dataset.usable_group = lambda w: None  # submit without share_counts
dist.init_process_group("gloo")
t0 = time.time()
ds = lastmile.Dataset(sys.argv[1], torch=False)
t1 = time.time()
n = sum(1 for _ in ds)
dist.barrier()
os.write(1, ("rank %d: %d batches, constructor %.2f s, in all %.2f s\\n" % (ds.rank, n, t1 - t0, time.time() - t0)).encode())
dist.destroy_process_group()
"""


def cpu_seconds(pid):
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def once(spec, hosts, share, tmp):
    script = os.path.join(tmp, "train.py")
    with open(script, "w") as f:
        f.write(TRAIN)
    daemons = []
    for n in range(hosts):
        d = daemonproc.Lastmiled(os.path.join(tmp, "d%d" % n))
        d.start()
        daemons.append(d)
    try:
        before = [cpu_seconds(d.proc.pid) for d in daemons]
        port, procs = free_port(), []
        for n, d in enumerate(daemons):
            env = dict(os.environ, LASTMILE_SOCKET=d.socket, PYTHONPATH=daemonproc.PYROOT, SHARE=str(share))
            argv = [sys.executable, "-m", "lastmile.launch", "--nnodes", str(hosts), "--node-rank", str(n),
                    "--nproc", "1", "--master-port", str(port), script, spec]
            procs.append(subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        outs = [p.communicate(timeout=600) for p in procs]
        for p, (_, err) in zip(procs, outs):
            if p.returncode:
                raise SystemExit("a rank failed:\n" + err[-2000:])
        cpu = [cpu_seconds(d.proc.pid) - b for d, b in zip(daemons, before)]
    finally:
        for d in daemons:
            d.kill()
    return cpu, [o.strip() for o, _ in outs]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("spec", help="the job spec (its world_size is replaced by the hosts' ranks)")
    ap.add_argument("--hosts", type=int, default=2)
    ap.add_argument("--share", type=int, choices=(0, 1), default=1)
    ap.add_argument("--repeats", type=int, default=1)
    a = ap.parse_args()
    for _ in range(a.repeats):
        tmp = tempfile.mkdtemp(prefix="lm-hostcounts-")
        try:
            cpu, lines = once(os.path.abspath(a.spec), a.hosts, a.share, tmp)
        finally:
            shutil.rmtree(tmp, True)
        print("hosts %d share_counts %d: daemon CPU s %s (mean %.2f); %s"
              % (a.hosts, a.share, " ".join("%.2f" % c for c in cpu), sum(cpu) / len(cpu), "; ".join(lines)), flush=True)


if __name__ == "__main__":
    main()
