"""A trainer rank of the chaos suite (chaos/chaos_test.go), and the soak's
consumer (chaos/soak_test.go).

    trainer.py CONFIG_JSON

CONFIG_JSON: {"spec", "rank", "world_size", "socket", "dir", "delay",
"soak", "hosts", "host"}. The rank reads its batches with lastmile.Dataset and records them
in dir:

    rankR.rows   one line per row: "epoch row_id cat_0 dense_0_bits"
    rankR.state  {"sd": ds.state_dict(), "rows_bytes": N, "batches": B}
    rankR.end    {"ok": true} or {"error": "..."}, when the rank stops

Exactly once across kill -9: a batch is *recorded* when rankR.state names a
rows_bytes that covers its lines. Its lines are appended (and flushed to the
kernel, which keeps them through a kill -9 of this process) first, then the
state, holding the cursor of the batch after it, is written to a temporary
file and renamed over rankR.state: the rename is the commit point. A
trainer killed between the two has appended lines no state covers; the next
trainer truncates rankR.rows to the committed rows_bytes before it reads
anything, so those lines are dropped, and resumes at the committed cursor,
which is exactly that uncommitted batch. So the rows in rankR.rows up to
rows_bytes are exactly the batches before the committed cursor, each once.

A soak consumer ("soak": true) records nothing: it reads without end and
rewrites rankR.state ({"batches", "epoch", "time"}) about once a second.
"""

import json
import os
import sys
import time

import numpy as np


def load_state(path):
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return None


def write_json(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f)
    os.replace(tmp, path)


def lines(batch):
    """The batch's real rows (padding left out: last: pad repeats rows)."""
    e = batch.cursor.epoch
    n = batch.real_rows
    ids = np.asarray(batch["row_id"])[:n]
    cats = np.asarray(batch["cat_0"])[:n]
    bits = np.asarray(batch["dense_0"]).view(np.uint32)[:n]
    return "".join("%d %d %d %d\n" % (e, r, c, d) for r, c, d in zip(ids.tolist(), cats.tolist(), bits.tolist())).encode()


def train(ds, cfg, base):
    rows_path, state_path = base + ".rows", base + ".state"
    state = load_state(state_path)
    committed = state["rows_bytes"] if state else 0
    batches = state["batches"] if state else 0
    if state:
        ds.load_state_dict(state["sd"])
    with open(rows_path, "ab") as f:
        f.truncate(committed)  # drop the lines of a batch no state covers
        size = committed
        for b in ds:
            data = lines(b)
            f.write(data)
            f.flush()
            size += len(data)
            batches += 1
            write_json(state_path, {"sd": ds.state_dict(), "rows_bytes": size, "batches": batches})
            if cfg.get("delay"):
                time.sleep(cfg["delay"])


def soak(ds, cfg, base):
    batches, last = 0, 0.0
    for b in ds:
        batches += 1
        now = time.time()
        if now - last >= 1:
            write_json(base + ".state", {"batches": batches, "epoch": b.cursor.epoch, "time": now})
            last = now
        if cfg.get("delay"):
            time.sleep(cfg["delay"])


def open_dataset(lastmile, cfg):
    """The rank's Dataset. Its constructor submits the job; a daemon that is
    down (killed, restarting) is waited for, as a trainer restarted by its
    launcher would."""
    deadline = time.monotonic() + 120
    while True:
        try:
            return lastmile.Dataset(cfg["spec"], cfg["rank"], cfg["world_size"], socket=cfg["socket"],
                                    torch=False, timeout=300, open_timeout=120, reconnect_timeout=300,
                                    hosts=cfg.get("hosts"), host=cfg.get("host"))
        except lastmile.DaemonUnavailableError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def main():
    cfg = json.loads(sys.argv[1])
    sys.path.insert(0, cfg["pyroot"])
    import lastmile

    base = os.path.join(cfg["dir"], "rank%d" % cfg["rank"])
    try:
        ds = open_dataset(lastmile, cfg)
        (soak if cfg.get("soak") else train)(ds, cfg, base)
        ds.close()
    except Exception as e:  # the test reads the error from rankR.end
        write_json(base + ".end", {"error": "%s: %s" % (type(e).__name__, e)})
        return 3
    write_json(base + ".end", {"ok": True})
    return 0


if __name__ == "__main__":
    sys.exit(main())
