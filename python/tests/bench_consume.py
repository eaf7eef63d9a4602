"""Consumer CPU per batch, against the pure-Python test producer.

Run: /usr/bin/python3 python/tests/bench_consume.py [--batches N] [--slots S]

A producer process (tests/ringwriter.py) publishes N batches of a schema like
examples/ctr-8rank.yaml (20 fields, B = 2048: float32/int64 [B] columns, an
int64 [B, 64] sequence, one ragged int64 field whose V changes every batch)
into a ring in a temporary LASTMILE_SHM_DIR. The consumer (this process)
measures ``time.process_time()`` per batch in two ways:

* ``ready``: it sleeps (no CPU) until the ring is full, then takes every
  published batch in a tight loop. Only the client's own work is timed:
  ``ring.next()`` (release of the previous slot, checks, tensor table) plus
  ``batch.torch()`` for the torch figure.
* ``stream``: the whole stream as a trainer (and ``lastmile cat``) sees it,
  including the spin/park while the (slow, Python) producer is behind.

The producer being Python is slower than the consumer; that only affects the
``stream`` figure (waiting), not ``ready``.

``--stack N`` measures instead what a stack op saves a trainer: the ``ready``
CPU per batch of taking N float32 features as the model wants them, a
``[B, N]`` tensor: from N ``[B]`` fields (``batch.torch()`` and
``torch.stack(..., 1)``, a copy) against one ``[B, N]`` field (``batch.torch()``
and ``batch["dense"]``, zero-copy).
"""

import argparse
import multiprocessing as mp
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

import lastmile  # noqa: E402
import ringwriter as rw  # noqa: E402

B = 2048
SEQ = 64

FIELDS = (
    [rw.FieldSpec("label_f", "dense", "float32"), rw.FieldSpec("weight", "dense", "float32")]
    + [rw.FieldSpec(n, "dense", "int64") for n in ("user_h", "item_h", "query_h")]
    + [rw.FieldSpec("dense_%d" % i, "dense", "float32") for i in range(8)]
    + [rw.FieldSpec("cat_%d" % i, "dense", "int64") for i in range(4)]
    + [rw.FieldSpec("seq_0", "dense", "int64", (SEQ,)), rw.FieldSpec("seq_0_len", "dense", "int32"),
       rw.FieldSpec("seq_1", "ragged", "int64")]
)


def make_batches(k=5, fields=FIELDS):
    """k distinct batches (the ragged field's V differs between them; k = 5 is coprime
    with the slot counts used, so a slot sees a new table each time)."""
    rng = np.random.default_rng(1)
    out = []
    for j in range(k):
        cols = {}
        for f in fields:
            if f.kind == "ragged":
                lens = rng.integers(0, 40, B)
                offs = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
                cols[f.name] = (rng.integers(0, 1 << 40, int(offs[-1])), offs)
            else:
                shape = (B,) + tuple(f.dims)
                cols[f.name] = rng.integers(0, 1000, shape).astype(rw.NP_DTYPES[f.dtype])
        out.append(cols)
    return out


def producer(name, dir, nbatches, slots, slot_size, created, stable=True, fields=FIELDS):
    w = rw.RingWriter(name, dir, fields, slot_count=slots, slot_size=slot_size)
    w.stable = stable  # lay payloads out as lastmile's Go producer does
    w.create()
    created.set()
    batches = make_batches(fields=fields)
    for s in range(nbatches):
        w.publish(batches[s % len(batches)], B, epoch=0, batch_index=s, rank=0,
                  last=s == nbatches - 1)
    w.finish("bench done")
    w.close()


def run(nbatches, slots, torch_mode, mode, fields=FIELDS, use=None):
    """``use(batch)``, if given, is what the trainer does with each batch (timed in ready mode)."""
    ctx = mp.get_context("spawn")
    dir = tempfile.mkdtemp(prefix="lastmile-bench-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    name = "bench"
    try:
        created = ctx.Event()
        p = ctx.Process(target=producer, args=(name, dir, nbatches, slots, 4 << 20, created, True, fields),
                        daemon=True)
        p.start()
        if not created.wait(60):
            raise RuntimeError("producer did not start")
        cpu = 0.0
        n = 0
        with lastmile.Ring.open(name, dir, timeout=60) as ring:
            if mode == "stream":
                b = ring.next()
                t0 = time.process_time()
                while b is not None:
                    if torch_mode:
                        b.torch()
                    n += 1
                    b = ring.next()
                cpu = time.process_time() - t0
                n -= 1  # the first batch was taken before the clock started
                if torch_mode:
                    pass
            else:
                nxt, pt = ring.next, time.process_time
                done = False
                while not done:
                    # wait, sleeping, until the ring is full or the producer finished
                    while ring.tail - ring.head < slots and ring.state == "running":
                        time.sleep(0.001)
                    avail = ring.tail - ring.head
                    if avail == 0:
                        break
                    # the held batch (if any) counts in head's slot; take the published ones
                    if ring._core.held is not None:
                        avail -= 1
                    if avail <= 0:
                        ring.release()
                        continue
                    t0 = pt()
                    for _ in range(avail):
                        b = nxt()
                        if use is not None:
                            use(b)
                        elif torch_mode:
                            b.torch()
                    cpu += pt() - t0
                    n += avail
                    if ring.state != "running" and ring.tail - ring.head <= 1:
                        done = True
        p.join(60)
        return n, cpu
    finally:
        shutil.rmtree(dir, ignore_errors=True)


def stack_bench(n, nbatches, slots):
    """Trainer CPU per batch to get a [B, n] float32 tensor: n fields + torch.stack, or a stack op's field."""
    import torch

    names = ["dense_%d" % i for i in range(n)]
    columns = [rw.FieldSpec(x, "dense", "float32") for x in names]
    stacked = [rw.FieldSpec("dense", "dense", "float32", (n,))]

    def from_columns(b):
        t = b.torch()
        x = torch.stack([t[x] for x in names], 1)
        assert x.shape == (B, n)

    def from_stack(b):
        x = b.torch()["dense"]
        assert x.shape == (B, n)

    out = {}
    for what, fields, use in [("columns", columns, from_columns), ("stack", stacked, from_stack)]:
        k, cpu = run(nbatches, slots, True, "ready", fields, use)
        out[what] = cpu / max(k, 1) * 1e6
        print("%-8s B=%d N=%d  %4d batches  trainer CPU %.1f us/batch" % (what, B, n, k, out[what]))
    print("stack/columns %.3f" % (out["stack"] / out["columns"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", type=int, default=400)
    ap.add_argument("--slots", type=int, default=16)
    ap.add_argument("--modes", default="ready,stream")
    ap.add_argument("--stack", type=int, default=0, metavar="N",
                    help="compare N [B] float32 fields + torch.stack with one [B, N] field instead")
    args = ap.parse_args()
    if args.stack:
        stack_bench(args.stack, args.batches, args.slots)
        return
    try:
        import torch  # noqa: F401  (imported before timing)
        kinds = (False, True)
    except Exception:
        kinds = (False,)
    # cost of the clock itself, for reference
    t0 = time.process_time()
    for _ in range(1000):
        time.process_time()
    clk = (time.process_time() - t0) / 1000
    print("schema: %d fields, B=%d, [B,%d] int64 + ragged int64; atomics=%s; process_time call ~%.2f us"
          % (len(FIELDS), B, SEQ, lastmile.ring._futex.ATOMICS, clk * 1e6))
    for mode in args.modes.split(","):
        for t in kinds:
            n, cpu = run(args.batches, args.slots, t, mode)
            print("%-6s %-5s  %4d batches  consumer CPU %.1f us/batch"
                  % (mode, "torch" if t else "numpy", n, cpu / max(n, 1) * 1e6))


if __name__ == "__main__":
    main()
