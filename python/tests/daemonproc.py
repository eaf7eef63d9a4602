"""Helpers of the end-to-end tests: a real lastmiled in a temporary
directory, and trainer processes that read a rank through lastmile.Dataset.

The daemon is the repository's bin/lastmiled (``make build`` or
``go build -o bin/ ./cmd/...``), started with its own socket, state
directory, shm directory and a free metrics port, so that tests never touch
/run/lastmile, /var/lib/lastmile or /dev/shm.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PYROOT = os.path.dirname(HERE)
REPO = os.path.dirname(PYROOT)
LASTMILED = os.environ.get("LASTMILED") or os.path.join(REPO, "bin", "lastmiled")
SMALL = os.path.join(REPO, "testdata", "small")  # 10,000 rows, row_id 0..9999


class Lastmiled:
    """A lastmiled process over ``dir``: ``dir/d.sock``, ``dir/state``,
    ``dir/shm`` (or ``shm``); log in ``dir/lastmiled.log`` (appended across
    restarts)."""

    def __init__(self, dir, binary=LASTMILED, extra=(), wrapper=(), socket=None, shm=None):
        self.dir = dir
        self.binary = binary
        self.wrapper = list(wrapper)  # e.g. setpriv ... to run as another user
        self.socket = socket or os.path.join(dir, "d.sock")
        self.state = os.path.join(dir, "state")
        self.shm = shm or os.path.join(dir, "shm")  # tmpfs (/dev/shm) for rings CUDA registers
        self.logpath = os.path.join(dir, "lastmiled.log")
        self.extra = list(extra)
        self.proc = None
        os.makedirs(self.state, exist_ok=True)
        os.makedirs(self.shm, exist_ok=True)

    def start(self, timeout=30):
        log = open(self.logpath, "ab")
        self.proc = subprocess.Popen(
            self.wrapper + [self.binary, "-config", "/dev/null", "-socket", self.socket, "-state-dir", self.state,
             "-shm-dir", self.shm, "-metrics", "127.0.0.1:0", "-grace", "60s"] + self.extra,
            stdout=log, stderr=subprocess.STDOUT)
        log.close()
        sys.path.insert(0, PYROOT)
        import lastmile

        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError("lastmiled exited with %d:\n%s" % (self.proc.returncode, self.log()))
            try:
                return lastmile.Client(self.socket, timeout=5).status()
            except lastmile.DaemonUnavailableError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def kill(self, sig=signal.SIGKILL):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(60)

    def stop(self):
        self.kill(signal.SIGTERM)

    def log(self):
        try:
            with open(self.logpath, errors="replace") as f:
                return f.read()
        except OSError:
            return ""


def unit_capabilities(unit=os.path.join(REPO, "deploy", "lastmiled.service")):
    """The AmbientCapabilities= of the unit file, as setpriv's list
    (``+chown,+dac_override,+fowner``)."""
    caps = []
    with open(unit) as f:
        for line in f:
            if line.startswith("AmbientCapabilities="):
                caps += line.split("=", 1)[1].split()
    return ",".join("+" + c.lower().removeprefix("cap_") for c in caps)


_PUBLIC = []


def public_pyroot():
    """A directory holding a copy of the lastmile package that any user can
    import. Tests that run a client as another uid cannot import it from the
    checkout, which need not be readable by others (a clone in a mktemp -d
    directory, mode 0700, is not). Made once per test process."""
    if not _PUBLIC:
        d = tempfile.mkdtemp(prefix="lastmile-pyroot-")
        shutil.copytree(os.path.join(PYROOT, "lastmile"), os.path.join(d, "lastmile"),
                        ignore=shutil.ignore_patterns("__pycache__"))
        for root, _, files in os.walk(d):
            os.chmod(root, 0o755)
            for f in files:
                os.chmod(os.path.join(root, f), 0o644)
        atexit.register(shutil.rmtree, d, True)
        _PUBLIC.append(d)
    return _PUBLIC[0]


def as_service_user(uid, gid, caps):
    """A setpriv prefix that runs a command as uid:gid with exactly ``caps``
    (ambient, inheritable and bounding set) and no new privileges, as
    systemd does for User=, AmbientCapabilities=, CapabilityBoundingSet= and
    NoNewPrivileges=."""
    return ["setpriv", "--reuid=%d" % uid, "--regid=%d" % gid, "--clear-groups",
            "--inh-caps=-all," + caps, "--ambient-caps=-all," + caps,
            "--bounding-set=-all," + caps, "--no-new-privs"]


READER = """
import json, os, sys, time
sys.path.insert(0, %(pyroot)r)
import lastmile
ds = lastmile.Dataset(%(spec)r, 0, 1, socket=%(socket)r, torch=False, open_timeout=60,
                      timeout=120, reconnect_timeout=120)
rows, n = [], 0
try:
    for b in ds:
        rows += b["row_id"].tolist()
        n += 1
        with open(%(progress)r + ".tmp", "w") as f:
            f.write(str(n))
        os.replace(%(progress)r + ".tmp", %(progress)r)
        time.sleep(%(delay)r)
    res = {"rows": rows, "reattaches": ds.reattaches, "error": None}
except BaseException as e:
    res = {"rows": rows, "error": "%%s: %%s" %% (type(e).__name__, e)}
with open(%(out)r, "w") as f:
    json.dump(res, f)
"""


def reader_main(cfg, progress):
    """Trainer process: read rank ``cfg['rank']`` to the end, writing
    ``[[epoch, row_id], ...]`` as JSON to ``cfg['out']``.

    cfg: spec, rank, world_size, socket, out, delay (seconds per batch),
    cursor, checkpoint (a path: after every batch, write ``{"state":
    ds.state_dict(), "rows": rows so far}`` there atomically, as a trainer
    checkpoints). ``progress.value`` counts the batches taken.
    """
    sys.path.insert(0, PYROOT)
    import lastmile

    result = {"rows": [], "reattaches": 0, "error": None}
    try:
        ds = lastmile.Dataset(cfg["spec"], cfg["rank"], cfg["world_size"], socket=cfg["socket"],
                              torch=False, open_timeout=60, timeout=120, reconnect_timeout=120,
                              cursor=cfg.get("cursor"))
        for b in ds:
            e = b.cursor.epoch
            result["rows"] += [[e, int(r)] for r in b["row_id"].tolist()]
            if cfg.get("checkpoint"):  # before counting: the test reads it after the count
                tmp = cfg["checkpoint"] + ".tmp"
                with open(tmp, "w") as f:
                    json.dump({"state": ds.state_dict(), "rows": result["rows"]}, f)
                os.replace(tmp, cfg["checkpoint"])
            progress.value += 1
            if cfg.get("delay"):
                time.sleep(cfg["delay"])
        result["reattaches"] = ds.reattaches
        result["skipped"] = ds.skipped
        result["cursor"] = list(ds.cursor) if ds.cursor else None
        ds.close()
    except BaseException as e:  # reported to the test through the file
        result["error"] = "%s: %s" % (type(e).__name__, e)
    with open(cfg["out"], "w") as f:
        json.dump(result, f)
