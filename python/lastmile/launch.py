"""Run N trainer processes on this host, as torchrun does for one node.

    python3 -m lastmile.launch --nproc 8 train.py [ARGS...]
    python3 -m lastmile.launch --nproc 2 -m mypackage.train [ARGS...]
    python3 -m lastmile.launch --nnodes 2 --node-rank 1 --nproc 8 \
        --master-addr HOST0 --master-port 29500 train.py     # on the second host

Each process gets torch.distributed's environment: ``RANK`` (``node_rank *
N + LOCAL_RANK``), ``LOCAL_RANK`` (0..N-1), ``WORLD_SIZE`` (``nnodes * N``),
``LOCAL_WORLD_SIZE`` (N), ``GROUP_RANK`` (the node rank), ``MASTER_ADDR``
(127.0.0.1) and ``MASTER_PORT`` (a free port unless ``--master-port``,
which several nodes must give), so that
``torch.distributed.init_process_group()`` and ``lastmile.Dataset()`` find
their rank and host. It is the launch for hosts where torchrun does not work
(Debian's torch 1.13 torchrun fails with ``AttributeError: ... 'to_map'``):
static nodes, no restarts, no elastic membership.

When a process fails, the others are stopped (SIGTERM, then SIGKILL after
``--grace`` seconds) and the launcher exits with the failed process's status
(128 + the signal for a process killed by one). SIGINT and SIGTERM are passed
on to every process. Output is the processes' own (stdout and stderr are
inherited); ``--tag`` prefixes each line with ``[rank]``.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import threading
import time

__all__ = ["free_port", "launch", "main", "rank_env"]


def free_port(host="127.0.0.1") -> int:
    """A TCP port nothing listens on now (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def rank_env(rank, nproc, master_addr, master_port, base=None, nnodes=1, node_rank=0) -> dict:
    """The environment of local process ``rank`` of ``nproc`` on node
    ``node_rank`` of ``nnodes``."""
    env = dict(os.environ if base is None else base)
    env.update({
        "RANK": str(node_rank * nproc + rank), "LOCAL_RANK": str(rank), "GROUP_RANK": str(node_rank),
        "WORLD_SIZE": str(nnodes * nproc), "LOCAL_WORLD_SIZE": str(nproc),
        "MASTER_ADDR": master_addr, "MASTER_PORT": str(master_port),
    })
    return env


def _pump(src, dst, tag):
    for line in iter(src.readline, b""):
        dst.write(tag + line)
        dst.flush()
    src.close()


def launch(cmd, nproc, *, master_addr="127.0.0.1", master_port=None, grace=10.0, tag=False,
           env=None, nnodes=1, node_rank=0) -> int:
    """Run ``cmd`` (an argv list) ``nproc`` times with each rank's
    environment, as node ``node_rank`` of ``nnodes``; return the exit status
    (0 when every process exited 0)."""
    if nproc < 1:
        raise ValueError("--nproc %d: at least 1" % nproc)
    if nnodes < 1 or not 0 <= node_rank < nnodes:
        raise ValueError("--node-rank %d of --nnodes %d: want 0 to %d" % (node_rank, nnodes, nnodes - 1))
    if nnodes > 1 and not master_port:
        raise ValueError("--nnodes %d: give --master-port (and --master-addr), the same on every node"
                         % nnodes)
    port = master_port or free_port(master_addr)
    procs, pumps = [], []
    out = getattr(sys.stdout, "buffer", sys.stdout)
    err = getattr(sys.stderr, "buffer", sys.stderr)
    for rank in range(nproc):
        kw = {}
        if tag:
            kw = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
        p = subprocess.Popen(cmd, env=rank_env(rank, nproc, master_addr, port, env, nnodes, node_rank), **kw)
        procs.append(p)
        if tag:
            t = ("[%d] " % (node_rank * nproc + rank)).encode()
            for src, dst in ((p.stdout, out), (p.stderr, err)):
                th = threading.Thread(target=_pump, args=(src, dst, t), daemon=True)
                th.start()
                pumps.append(th)

    def forward(sig, frame):
        for p in procs:
            if p.poll() is None:
                p.send_signal(sig)

    old = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    status = 0
    try:
        live = list(procs)
        while live:
            for p in list(live):
                rc = p.poll()
                if rc is None:
                    continue
                live.remove(p)
                if rc != 0 and status == 0:
                    rank = node_rank * nproc + procs.index(p)  # its RANK, as --tag prints it
                    status = rc if rc > 0 else 128 - rc
                    print("lastmile.launch: rank %d exited with %s; stopping the other %d"
                          % (rank, rc if rc > 0 else "signal %d" % -rc, len(live)),
                          file=sys.stderr, flush=True)
                    _stop(live, grace)
            time.sleep(0.05)
    finally:
        _stop([p for p in procs if p.poll() is None], grace)
        for s, h in old.items():
            signal.signal(s, h)
        for th in pumps:
            th.join(5)
    return status


def _stop(procs, grace):
    for p in procs:
        if p.poll() is None:
            p.terminate()
    deadline = time.monotonic() + grace
    for p in procs:
        try:
            p.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


_VALUED = ("--nproc", "--nproc-per-node", "--nproc_per_node", "--master-addr", "--master-port",
           "--grace", "--nnodes", "--node-rank", "--node_rank")


def _split(argv):
    """``(launcher options, command)``: the options end at the script, or
    after ``-m MODULE``; everything after belongs to the training process."""
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok == "-m":
            return argv[:i + 2], argv[i:i + 2]
        if tok == "--":
            return argv[:i], argv[i + 1:]
        if not tok.startswith("-"):
            return argv[:i], argv[i:]
        i += 2 if tok in _VALUED else 1
    return argv, []


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    ap = argparse.ArgumentParser(
        prog="python3 -m lastmile.launch",
        usage="%(prog)s --nproc N [options] (SCRIPT | -m MODULE) [ARGS...]",
        description="Run N processes of a training script with torch.distributed's environment "
                    "(RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), on this host: one "
                    "node of --nnodes.")
    ap.add_argument("--nproc", "--nproc-per-node", "--nproc_per_node", type=int, required=True,
                    metavar="N", help="processes to run (ranks 0..N-1)")
    ap.add_argument("--nnodes", type=int, default=1, metavar="H",
                    help="nodes (hosts) the job runs on, N processes each (default 1)")
    ap.add_argument("--node-rank", "--node_rank", type=int, default=0, metavar="I",
                    help="this node's index, 0 to H-1 (default 0)")
    ap.add_argument("--master-addr", default="127.0.0.1", help="MASTER_ADDR (default 127.0.0.1)")
    ap.add_argument("--master-port", type=int, default=0,
                    help="MASTER_PORT (default: a free port)")
    ap.add_argument("--grace", type=float, default=10.0,
                    help="seconds between SIGTERM and SIGKILL when stopping (default 10)")
    ap.add_argument("--tag", action="store_true", help="prefix each output line with [rank]")
    ap.add_argument("-m", dest="module", help="run a module (python3 -m MODULE) instead of a script")
    own, rest = _split(argv)
    a = ap.parse_args(own)
    if a.module:
        cmd = [sys.executable, "-m", a.module] + argv[len(own):]
    elif rest:
        cmd = [sys.executable] + rest
    else:
        ap.error("a script to run (or -m MODULE)")
    if a.nproc < 1:
        ap.error("--nproc must be at least 1")
    if a.nnodes < 1 or not 0 <= a.node_rank < a.nnodes:
        ap.error("--node-rank %d of --nnodes %d: want 0 to %d" % (a.node_rank, a.nnodes, a.nnodes - 1))
    if a.nnodes > 1 and not a.master_port:
        ap.error("--nnodes %d: give --master-port (and --master-addr), the same on every node" % a.nnodes)
    return launch(cmd, a.nproc, master_addr=a.master_addr, master_port=a.master_port or None,
                  grace=a.grace, tag=a.tag, nnodes=a.nnodes, node_rank=a.node_rank)


if __name__ == "__main__":
    sys.exit(main())
