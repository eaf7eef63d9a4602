"""A fake lastmiled for tests: the control API on a unix socket, served by a
thread, with rings produced by ringwriter.RingWriter in child processes.

Jobs are identified by (spec, world_size, weight): a second identical
submission joins (200), a new one creates (201). A job has ``epochs`` epochs
of ``per_epoch`` batches per rank, ``rows`` rows each; row ``r`` of batch
``i`` of epoch ``e`` for rank ``k`` has id ``row_id(e, i, k, r)`` so that a
test can check every row once.

Attaching starts a fresh producer for the rank at the cursor (killing the
previous one and replacing its ring file), like a daemon that recreated the
ring; knobs on the FakeDaemon simulate deaths, replays, gaps and errors.
"""

from __future__ import annotations

import http.server
import json
import multiprocessing as mp
import os
import re
import socketserver
import threading

import numpy as np

import ringwriter as rw

CTX = mp.get_context("spawn")

FIELDS = [
    rw.FieldSpec("id", "dense", "int64"),
    rw.FieldSpec("x", "dense", "float32", (2,)),
    rw.FieldSpec("tokens", "ragged", "int32"),
]


def row_id(epoch, batch, rank, row, world=2, rows=4):
    return epoch * 1_000_000 + (batch * world + rank) * rows + row


def produce(cfg, created):
    """Child process: publish the batches of one rank from ``cfg['start']``.

    cfg: name, dir, rank, world, rows, per_epoch, epochs, start (epoch, batch),
    die_after (publish this many, then exit without end of stream),
    fail_after (publish this many, then set the error state), interval.
    """
    import time

    w = rw.RingWriter(cfg["name"], cfg["dir"], FIELDS, slot_count=cfg.get("slots", 4),
                      slot_size=64 << 10)
    w.create()
    created.set()
    e, i = cfg["start"]
    n = 0
    B, world, rank = cfg["rows"], cfg["world"], cfg["rank"]
    while e < cfg["epochs"]:
        if cfg.get("die_after") is not None and n == cfg["die_after"]:
            w.close()  # drops the byte-0 lock without an end of stream: "died"
            os._exit(0)
        if cfg.get("fail_after") is not None and n == cfg["fail_after"]:
            w.fail(cfg.get("message", "job failed: boom"))
            w.close()
            return
        ids = np.array([row_id(e, i, rank, r, world, B) for r in range(B)], np.int64)
        lens = (ids % 3).astype(np.int64)
        cols = {
            "id": ids,
            "x": np.stack([ids.astype(np.float32), -ids.astype(np.float32)], axis=1),
            "tokens": (np.repeat(ids, lens).astype(np.int32),
                       np.concatenate([[0], np.cumsum(lens)])),
        }
        last = i == cfg["per_epoch"] - 1
        w.publish(cols, B, epoch=e, batch_index=i, rank=rank, last=last)
        n += 1
        if cfg.get("interval"):
            time.sleep(cfg["interval"])
        e, i = (e + 1, 0) if last else (e, i + 1)
    w.finish("done")
    w.close()


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    allow_reuse_address = True


class FakeDaemon:
    """Serve the control API on ``sock`` with rings in ``shm``.

    Knobs (set before the request they affect):
      submit_error: (status, body) answered to the next submissions;
      attach_error: (status, body) answered to attaches;
      die_after: {rank: k} the next producer of rank publishes k batches, then dies
                 (consumed: a later attach runs normally);
      fail_after: {rank: k} the producer sets the error state after k batches;
      replay: batches before the cursor the next producer starts at (then 0);
      gap: batches after the cursor the next producer starts at (then 0);
      interval: seconds between batches;
      keep: answer an attach with the running producer's ring, if any;
      attach_unavailable: answer this many attaches 503 with Retry-After: 1;
      no_next: attach answers "next": null (the daemon does not know where the rank stands);
      count_known: GET /v1/jobs/{id} tells batches_per_epoch (else null, as
                   lastmiled for a pipeline that drops rows, before an epoch ended).
      rings: the "rings" of GET /v1/jobs/{id} (lastmiled's per-rank view:
             rank, consumer_attached, consumer_pid, slots, occupancy, state).
    ``requests`` records (method, path, body) of every request.
    """

    def __init__(self, sock, shm, *, rows=4, per_epoch=5, epochs=2):
        self.sock = sock
        self.shm = shm
        self.rows, self.per_epoch, self.epochs = rows, per_epoch, epochs
        self.jobs = {}
        self.njobs = 0
        self.procs = {}
        self.requests = []
        self.lock = threading.Lock()
        self.submit_error = None
        self.attach_error = None
        self.die_after = {}
        self.fail_after = {}
        self.replay = 0
        self.gap = 0
        self.interval = 0
        self.keep = False
        self.attach_unavailable = 0
        self.count_known = True
        self.rings = None
        self.old = False  # a lastmiled older than the counts exchange
        self.no_next = False
        self.generation = 0
        self.server = None
        self.thread = None

    # -- server lifetime ------------------------------------------------------
    def start(self):
        if os.path.exists(self.sock):
            os.unlink(self.sock)
        self.server = _Server(self.sock, _handler(self))
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self

    def stop(self, remove_socket=True):
        """Stop answering (the producers keep running unless killed)."""
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None
        if remove_socket and os.path.exists(self.sock):
            os.unlink(self.sock)

    def kill_producers(self):
        for p in self.procs.values():
            if p.is_alive():
                p.kill()
            p.join(10)

    def close(self):
        self.stop()
        self.kill_producers()

    # -- API ------------------------------------------------------------------
    def handle(self, method, path, body):
        with self.lock:
            self.requests.append((method, path, body))
        if method == "GET" and path == "/v1/status":
            return 200, {"version": "fake", "jobs": len(self.jobs)}
        if method == "POST" and path == "/v1/jobs":
            return self.submit(body)
        if method == "GET" and path == "/v1/jobs":
            return 200, {"jobs": list(self.jobs.values())}
        m = re.fullmatch(r"/v1/jobs/([^/]+)(/attach)?", path)
        if not m or m.group(1) not in self.jobs:
            return 404, {"error": "no job \"%s\"" % (m.group(1) if m else path)}
        job = self.jobs[m.group(1)]
        if m.group(2) and method == "POST":
            return self.attach(job, body)
        if not m.group(2) and method == "GET":
            view = dict(job, batches_per_epoch=self.per_epoch if self.count_known else None)
            if self.rings is not None:
                view["rings"] = self.rings
            return 200, view
        if not m.group(2) and method == "DELETE":
            job["state"] = "canceled"
            return 200, job
        return 405, {"error": "method not allowed"}

    def submit(self, body):
        if self.submit_error:
            return self.submit_error
        if self.old and isinstance(body, dict) and "share_counts" in body:
            return 400, {"error": 'request body: unknown field "share_counts"'}
        if not isinstance(body, dict) or not isinstance(body.get("spec"), str):
            return 400, {"error": "invalid request", "fields": [
                {"line": 0, "field": "spec", "msg": "required"}]}
        key = (body["spec"], body.get("world_size"), body.get("weight"))
        with self.lock:
            for j in self.jobs.values():
                if j["_key"] == list(key):
                    return 200, j
            self.njobs += 1
            jid = "%012x" % (0xabc000000000 + self.njobs)
            job = {"id": jid, "name": "fake", "state": "running",
                   "world_size": body.get("world_size") or 2, "weight": body.get("weight"),
                   "epochs": self.epochs,
                   "base_dir": body.get("base_dir"), "_key": list(key)}
            self.jobs[jid] = job
        return 201, job

    def attach(self, job, body):
        if self.attach_error:
            return self.attach_error
        if self.attach_unavailable:
            self.attach_unavailable -= 1
            return 503, {"error": "draining: lastmiled is shutting down"}, {"Retry-After": "1"}
        rank = body.get("rank")
        ws = job["world_size"]
        if not isinstance(rank, int) or not 0 <= rank < ws:
            return 400, {"error": "rank %r out of range: job has world size %d" % (rank, ws)}
        c = body.get("cursor") or {"epoch": 0, "batch": 0}
        e, i = c["epoch"], c["batch"]
        # replay / gap: start before or after the cursor (within the epoch)
        i = max(0, i - self.replay) + self.gap
        self.replay = self.gap = 0
        if i >= self.per_epoch:  # as lastmiled: a batch past the epoch's is the next epoch's start
            e, i = e + 1, 0
        name = "fake.%s.r%d" % (job["id"], rank)
        old = self.procs.get((job["id"], rank))
        if self.keep and old is not None and old.is_alive():
            return 200, {"job": job["id"], "rank": rank, "ring": name, "dir": self.shm,
                         "generation": _generation(self.shm, name), "next": {"epoch": e, "batch": i},
                         "restarted": False}
        if old is not None and old.is_alive():
            old.kill()
            old.join(10)
        cfg = {"name": name, "dir": self.shm, "rank": rank, "world": ws, "rows": self.rows,
               "per_epoch": self.per_epoch, "epochs": self.epochs, "start": (e, i),
               "die_after": self.die_after.pop(rank, None),
               "fail_after": self.fail_after.pop(rank, None), "interval": self.interval}
        created = CTX.Event()
        p = CTX.Process(target=produce, args=(cfg, created), daemon=True)
        p.start()
        if not created.wait(60):
            return 500, {"error": "fake producer did not start"}
        self.procs[(job["id"], rank)] = p
        self.generation += 1  # restarts so far
        return 200, {"job": job["id"], "rank": rank, "ring": name, "dir": self.shm,
                     "generation": _generation(self.shm, name),
                     "next": None if self.no_next else {"epoch": e, "batch": i},
                     "restarted": True}

    def attaches(self):
        """Bodies of the attach requests, without ``wait``."""
        return [{k: v for k, v in b.items() if k != "wait"}
                for (m, p, b) in self.requests if p.endswith("/attach")]


def _generation(dir, name):
    """The generation in the header of ring dir/name (ring-format 3.1), as
    lastmiled's attach answer gives it."""
    with open(os.path.join(dir, name), "rb") as f:
        return int.from_bytes(f.read(48)[40:48], "little")


def _handler(fake):
    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):  # client_address is '' on unix sockets
            pass

        def _do(self):
            n = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(n) if n else b""
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                status, obj, hdrs = 400, {"error": "body is not JSON"}, []
            else:
                status, obj, *hdrs = fake.handle(self.command, self.path, body)
            data = json.dumps(obj).encode()
            self.send_response(status)
            for k, v in (hdrs[0] if hdrs else {}).items():
                self.send_header(k, v)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_DELETE = _do

    return H
