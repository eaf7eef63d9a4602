"""Trainer time (wall, perf_counter) of Batch.kjt() for a weighted KeyedJaggedTensor: the ring's
own weights (a jagged op with ``weights:``, ring format 3) against gathering
them from a ragged field per batch (``kjt(name, weights={...})``).

Run: cd python && /usr/bin/python3 tests/bench_kjt.py [--rows 2048] [--ids 128]
The batch is the example pipeline's sparse group: 7 keys of one id a row
and a weighted history of 0 to 2*ids ids a row (ids on average). Reports
the minimum over 7 interleaved rounds of 200 calls of each, in microseconds
a call, and their ratio; the host is shared, so only figures of the same
run compare.
"""

import argparse
import os
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import lastmile  # noqa: E402
from lastmile import format as fmt  # noqa: E402

KEYS = ("user", "item", "query", "cat_0", "cat_1", "cat_2", "cat_3", "history")


class _Batch:
    """What Batch.kjt reads of a batch: field() and torch()."""

    def __init__(self, data, weighted):
        self.data, self.weighted = data, weighted

    def field(self, name):
        return fmt.Field(0, name, "jagged", 6, (), False, False, KEYS, self.weighted)

    def torch(self):
        return self.data


def batches(rows, ids):
    rng = np.random.default_rng(7)
    hist = rng.integers(0, 2 * ids + 1, rows)
    lengths = np.concatenate([np.ones(7 * rows, np.int64), hist]).astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    values = rng.integers(0, 1 << 20, int(offsets[-1]), dtype=np.int64)
    w_hist = rng.random(int(hist.sum()), dtype=np.float32)
    weights = np.concatenate([np.ones(7 * rows, np.float32), w_hist])
    t = torch.from_numpy
    kj = lastmile.KeyedJagged(KEYS, t(values), t(lengths), t(offsets))
    hoffs = np.concatenate([[0], np.cumsum(hist)]).astype(np.int64)
    gather = _Batch({"sparse": kj, "history.w": lastmile.Ragged(t(w_hist), t(hoffs))}, False)
    ring = _Batch({"sparse": lastmile.WeightedKeyedJagged(*kj, t(weights))}, True)
    return gather, ring, len(values)


def per_call(fn, n=200):
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=2048)
    ap.add_argument("--ids", type=int, default=128)
    a = ap.parse_args()
    gather, ring, n = batches(a.rows, a.ids)
    g = lambda: lastmile.Batch.kjt(gather, "sparse", weights={"history": "history.w"})  # noqa: E731
    r = lambda: lastmile.Batch.kjt(ring, "sparse")  # noqa: E731
    assert torch.equal(g().weights, r().weights)
    best = {"gather": float("inf"), "ring": float("inf")}
    for _ in range(7):
        best["gather"] = min(best["gather"], per_call(g))
        best["ring"] = min(best["ring"], per_call(r))
    print("kjt() of %d rows, %d ids (%d KiB of weights): weights gathered %.1f us, the ring's %.1f us; "
          "%.1fx" % (a.rows, n, n * 4 // 1024, best["gather"], best["ring"], best["gather"] / best["ring"]))


if __name__ == "__main__":
    main()
