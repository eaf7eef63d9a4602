#!/usr/bin/python3
"""The DataLoader baseline of lastmile's benchmark.

It feeds a trainer the way users write it today: a PyTorch
``torch.utils.data.DataLoader`` over a map-style ``Dataset`` that applies
the last-mile ops of examples/ctr-8rank.yaml in numpy, reading the rows
pre-decoded from the .npy files ``lastmile gen --npy DIR`` writes (memory
mapped with ``np.load(mmap_mode="r")``, so the baseline gets its Parquet
decode for free). docs/baseline.md says how to run it and what it prints.

The ops, as users write them:

* anti-join: drop rows whose ``user_id`` is in the spam-user table
  (``np.isin`` against the ids of ``lastmile gen --spam-users``, read from
  the .npy copy next to the Parquet file);
* negative downsampling: keep every positive and 10% of the negatives,
  decided by ``splitmix64(seed ^ XXH64(row_id)) < floor(rate * 2**64)``
  (lastmile's sample hash, docs/pipeline.md), with a float32 ``weight`` of
  ``1 / rate``;
* ``hash_mod`` of user_id, item_id and the query string: XXH64 (seed 0) of
  the int64's 8 little-endian bytes or of the string's bytes, modulo m
  (lastmile's hash_mod, docs/expressions.md), so the features are
  lastmile's exactly;
* ``clip(log1p(abs(x)), 0, 10)`` on dense_0 and dense_1, label cast to
  float32;
* seq_0 cut to its last 64 elements and padded on the right with 0 into
  ``[B, 64]``, with int32 lengths ``seq_0_len``; seq_1 kept ragged, cut to
  its last 256 elements, as ``(values, offsets)`` (offsets ``[B + 1]``
  int64, as lastmile's ``Ragged``);
* select label_f, weight, user_h, item_h, query_h, dense_0..7, cat_0..3,
  seq_0, seq_0_len, seq_1.

The anti-join and the sampling run up front over all rows in the main
process (vectorized, in chunks), giving the kept row ids; the DataLoader
then samples over those (shuffled by default, full batches only, as
lastmile's ``last: drop``). Two dataset styles:

* ``row``: ``__getitem__(i)`` returns one row as a dict of tensors and the
  DataLoader's ``batch_size`` batches them with the default collate (the
  ragged seq_1, which default_collate cannot stack, is concatenated by a
  thin wrapper around it): how most users write it.
* ``batch``: ``__getitem__(indices)`` takes a whole batch of indices from a
  ``BatchSampler`` (``batch_size=None``) and does every op vectorized: the
  strong baseline.
"""

import argparse
import json
import math
import os
import resource
import sys
import time

import numpy as np
import torch
from torch.utils.data import BatchSampler, DataLoader, Dataset, RandomSampler, SequentialSampler
from torch.utils.data._utils.collate import default_collate

# The example pipeline's constants (examples/ctr-8rank.yaml).
JOB_SEED = 20261121
NEG_RATE = 0.1
USER_MOD = 1000003
ITEM_MOD = 1000003
QUERY_MOD = 65536
SEQ0_LEN = 64
SEQ1_MAX = 256
DENSE_SELECTED = 8  # dense_0..dense_7
CLIPPED = (0, 1)  # dense columns that get clip(log1p(abs(x)), 0, 10)
CATS_SELECTED = 4  # cat_0..cat_3

MASK64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
C1, C2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
P1, P2, P3, P4, P5 = (
    11400714785074694791, 14029467366897019727, 1609587929392839161, 9650029242287828579, 2870177450012600261,
)

F0, F10 = np.float32(0), np.float32(10)  # clip bounds that keep float32 float32
_u = np.uint64
_GOLDEN, _C1, _C2 = _u(GOLDEN), _u(C1), _u(C2)
_P1, _P2, _P3, _P4, _P5 = _u(P1), _u(P2), _u(P3), _u(P4), _u(P5)


# ---- hashes, each in a scalar (pure Python int) and a vectorized (numpy
# uint64, wrapping mod 2^64) form. They are lastmile's (ops/sample.go,
# expr/hash.go, docs/pipeline.md, docs/expressions.md):
#
#   hash_mod(x, m) = XXH64(bytes, seed 0) mod m, bytes = the int64 as 8
#                    little-endian bytes, or a string's bytes
#   sample keeps   ⇔ splitmix64(seed ^ XXH64(row_id)) < floor(rate * 2^64)


def splitmix64(x):
    """splitmix64 (Vigna's finalizer, after adding the golden gamma) of one
    64-bit value."""
    x = (x + GOLDEN) & MASK64
    x = ((x ^ (x >> 30)) * C1) & MASK64
    x = ((x ^ (x >> 27)) * C2) & MASK64
    return x ^ (x >> 31)


def splitmix64_np(x):
    """splitmix64 of a uint64 (or int64, reinterpreted) array."""
    x = np.asarray(x).view(np.uint64) + _GOLDEN
    x = (x ^ (x >> _u(30))) * _C1
    x = (x ^ (x >> _u(27))) * _C2
    return x ^ (x >> _u(31))


def _rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & MASK64


def _round(acc, v):
    return (_rotl((acc + v * P2) & MASK64, 31) * P1) & MASK64


def _avalanche(h):
    h = ((h ^ (h >> 33)) * P2) & MASK64
    h = ((h ^ (h >> 29)) * P3) & MASK64
    return h ^ (h >> 32)


def xxh64(b):
    """XXH64 of a bytes object, seed 0, in pure Python."""
    n, i = len(b), 0
    if n >= 32:
        v = [(P1 + P2) & MASK64, P2, 0, (-P1) & MASK64]
        while i + 32 <= n:
            for k in range(4):
                v[k] = _round(v[k], int.from_bytes(b[i + 8 * k : i + 8 * k + 8], "little"))
            i += 32
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & MASK64
        for k in range(4):
            h = ((h ^ _round(0, v[k])) * P1 + P4) & MASK64
    else:
        h = P5
    h = (h + n) & MASK64
    while i + 8 <= n:
        h = (_rotl(h ^ _round(0, int.from_bytes(b[i : i + 8], "little")), 27) * P1 + P4) & MASK64
        i += 8
    if i + 4 <= n:
        h = (_rotl(h ^ ((int.from_bytes(b[i : i + 4], "little") * P1) & MASK64), 23) * P2 + P3) & MASK64
        i += 4
    while i < n:
        h = (_rotl(h ^ ((b[i] * P5) & MASK64), 11) * P1) & MASK64
        i += 1
    return _avalanche(h)


def xxh64_int(x):
    """XXH64 of an int64's 8 little-endian bytes, seed 0."""
    h = (P5 + 8) ^ _round(0, int(x) & MASK64)
    return _avalanche((_rotl(h, 27) * P1 + P4) & MASK64)


def _rotl_np(x, r):
    return (x << _u(r)) | (x >> _u(64 - r))


def _round_np(acc, v):
    return _rotl_np(acc + v * _P2, 31) * _P1


def _avalanche_np(h):
    h = (h ^ (h >> _u(33))) * _P2
    h = (h ^ (h >> _u(29))) * _P3
    return h ^ (h >> _u(32))


def xxh64_int_np(x):
    """XXH64 of each int64 of an array (as 8 little-endian bytes), seed 0."""
    h = _round_np(_u(0), np.asarray(x, dtype=np.int64).view(np.uint64)) ^ _u(P5 + 8)
    return _avalanche_np(_rotl_np(h, 27) * _P1 + _P4)


def xxh64_ragged(data, starts, lens):
    """XXH64, seed 0, of each string data[starts[i] : starts[i] + lens[i]]
    (data a uint8 array), vectorized: the strings are copied into a
    zero-padded [B, L] block, read as little-endian words."""
    B = len(starts)
    starts, lens = np.asarray(starts, dtype=np.int64), np.asarray(lens, dtype=np.int64)
    L = max(8, (int(lens.max(initial=0)) + 7) // 8 * 8)
    pos = np.arange(L)
    mask = pos[None, :] < lens[:, None]
    block = np.where(mask, np.asarray(data[np.where(mask, starts[:, None] + pos[None, :], 0)]), 0).astype(np.uint8)
    words = block.view("<u8")  # [B, L/8]
    rows = np.arange(B)
    nst = lens // 32
    h = np.full(B, P5, dtype=np.uint64)
    if (nst > 0).any():
        v = [np.full(B, (P1 + P2) & MASK64, np.uint64), np.full(B, P2, np.uint64),
             np.zeros(B, np.uint64), np.full(B, (-P1) & MASK64, np.uint64)]
        for s in range(int(nst.max())):
            m = nst > s
            for k in range(4):
                v[k][m] = _round_np(v[k][m], words[m, 4 * s + k])
        big = nst > 0
        hb = _rotl_np(v[0], 1) + _rotl_np(v[1], 7) + _rotl_np(v[2], 12) + _rotl_np(v[3], 18)
        for k in range(4):
            hb = (hb ^ _round_np(_u(0), v[k])) * _P1 + _P4
        h[big] = hb[big]
    h += lens.astype(np.uint64)
    w = 4 * nst  # next word
    t8 = (lens - 32 * nst) // 8
    for k in range(int(t8.max(initial=0))):
        m = t8 > k
        word = words[rows[m], w[m] + k]
        h[m] = _rotl_np(h[m] ^ _round_np(_u(0), word), 27) * _P1 + _P4
    p = 32 * nst + 8 * t8  # next byte, a multiple of 8
    m = lens - p >= 4
    if m.any():
        low = words[rows[m], p[m] // 8] & _u(0xFFFFFFFF)
        h[m] = _rotl_np(h[m] ^ (low * _P1), 23) * _P2 + _P3
        p = p + 4 * m
    for k in range(3):
        m = lens - p > k
        if not m.any():
            break
        b = block[rows[m], p[m] + k].astype(np.uint64)
        h[m] = _rotl_np(h[m] ^ (b * _P5), 11) * _P1
    return _avalanche_np(h)


def hash_mod_int(x, m):
    return xxh64_int(x) % m


def hash_mod_int_np(x, m):
    return (xxh64_int_np(x) % _u(m)).astype(np.int64)


def sample_threshold(rate):
    """floor(rate * 2^64): a row is kept when its sample hash is below."""
    return min(int(rate * 2.0**64), MASK64)


def sample_hash_np(row_id, seed):
    return splitmix64_np(xxh64_int_np(row_id) ^ _u(seed & MASK64))


# ---- the table


class Table:
    """The .npy files of ``lastmile gen --npy DIR``, memory mapped."""

    def __init__(self, npy_dir):
        def load(name):
            return np.load(os.path.join(npy_dir, name), mmap_mode="r")

        self.dir = npy_dir
        self.row_id = load("row_id.npy")
        self.rows = len(self.row_id)
        self.user_id = load("user_id.npy")
        self.item_id = load("item_id.npy")
        self.label = load("label.npy")
        self.dense = [load(f"dense_{j}.npy") for j in range(DENSE_SELECTED)]
        self.cat = [load(f"cat_{j}.npy") for j in range(CATS_SELECTED)]
        self.seq0_values, self.seq0_offsets = load("seq_0.values.npy"), load("seq_0.offsets.npy")
        self.seq1_values, self.seq1_offsets = load("seq_1.values.npy"), load("seq_1.offsets.npy")
        self.query_bytes, self.query_offsets = load("query.bytes.npy"), load("query.offsets.npy")


def load_spam(path):
    """The spam user ids: PATH if it is a .npy, else the .npy that
    ``lastmile gen --spam-users PATH`` writes next to it."""
    if not path.endswith(".npy"):
        path = (path[: -len(".parquet")] if path.endswith(".parquet") else path) + ".npy"
    return np.load(path)


def filter_rows(t, spam, seed=JOB_SEED, rate=NEG_RATE, chunk=1 << 20):
    """The anti-join and the negative downsampling over every row, in chunks
    of ``chunk`` rows: returns the kept row indices (int64) and their
    weights (float32)."""
    thr = np.uint64(sample_threshold(rate))
    kept, weights = [], []
    for lo in range(0, t.rows, chunk):
        hi = min(lo + chunk, t.rows)
        keep = ~np.isin(np.asarray(t.user_id[lo:hi]), spam)
        pos = np.asarray(t.label[lo:hi]) == 1
        h = sample_hash_np(np.asarray(t.row_id[lo:hi]), seed)
        keep &= pos | (h < thr)
        idx = np.flatnonzero(keep)
        kept.append(idx + lo)
        weights.append(np.where(pos[idx], np.float32(1.0), np.float32(1.0 / rate)).astype(np.float32))
    if not kept:
        return np.zeros(0, np.int64), np.zeros(0, np.float32)
    return np.concatenate(kept).astype(np.int64), np.concatenate(weights)


# ---- style (a): one row per __getitem__, default collate


class RowDataset(Dataset):
    def __init__(self, table, rows, weights):
        self.t, self.rows, self.weights = table, rows, weights

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        t = self.t
        r = int(self.rows[i])
        out = {
            "label_f": torch.tensor(t.label[r], dtype=torch.float32),
            "weight": torch.tensor(self.weights[i]),
            "user_h": torch.tensor(hash_mod_int(t.user_id[r], USER_MOD)),
            "item_h": torch.tensor(hash_mod_int(t.item_id[r], ITEM_MOD)),
        }
        q = bytes(t.query_bytes[t.query_offsets[r] : t.query_offsets[r + 1]])
        out["query_h"] = torch.tensor(xxh64(q) % QUERY_MOD)
        for j in range(DENSE_SELECTED):
            x = t.dense[j][r]
            if j in CLIPPED:
                x = np.clip(np.log1p(np.abs(x)), F0, F10)
            out[f"dense_{j}"] = torch.tensor(x)
        for j in range(CATS_SELECTED):
            out[f"cat_{j}"] = torch.tensor(t.cat[j][r])
        lo, hi = int(t.seq0_offsets[r]), int(t.seq0_offsets[r + 1])
        n = min(hi - lo, SEQ0_LEN)
        s0 = np.zeros(SEQ0_LEN, dtype=np.int64)
        s0[:n] = t.seq0_values[hi - n : hi]
        out["seq_0"] = torch.from_numpy(s0)
        out["seq_0_len"] = torch.tensor(n, dtype=torch.int32)
        lo, hi = int(t.seq1_offsets[r]), int(t.seq1_offsets[r + 1])
        out["seq_1"] = torch.from_numpy(np.array(t.seq1_values[max(lo, hi - SEQ1_MAX) : hi]))
        return out


def collate_rows(rows):
    """default_collate, except for the ragged seq_1, which it cannot stack:
    that becomes (values, offsets) as in torchrec's KeyedJaggedTensor."""
    seq1 = [r.pop("seq_1") for r in rows]
    batch = default_collate(rows)
    offsets = torch.zeros(len(seq1) + 1, dtype=torch.int64)
    torch.cumsum(torch.tensor([len(s) for s in seq1], dtype=torch.int64), 0, out=offsets[1:])
    batch["seq_1"] = (torch.cat(seq1), offsets)
    return batch


# ---- style (b): a whole batch per __getitem__, vectorized


class BatchDataset(Dataset):
    def __init__(self, table, rows, weights):
        self.t, self.rows, self.weights = table, rows, weights

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, indices):
        t = self.t
        idx = np.sort(np.asarray(indices, dtype=np.int64))  # a batch is a set: read in file order
        r = self.rows[idx]
        out = {
            "label_f": torch.from_numpy(t.label[r].astype(np.float32)),
            "weight": torch.from_numpy(self.weights[idx]),
            "user_h": torch.from_numpy(hash_mod_int_np(t.user_id[r], USER_MOD)),
            "item_h": torch.from_numpy(hash_mod_int_np(t.item_id[r], ITEM_MOD)),
        }
        qs = np.asarray(t.query_offsets[r])
        ql = np.asarray(t.query_offsets[r + 1]) - qs
        out["query_h"] = torch.from_numpy((xxh64_ragged(t.query_bytes, qs, ql) % np.uint64(QUERY_MOD)).astype(np.int64))
        for j in range(DENSE_SELECTED):
            x = np.asarray(t.dense[j][r])
            if j in CLIPPED:
                x = np.clip(np.log1p(np.abs(x)), F0, F10)
            out[f"dense_{j}"] = torch.from_numpy(x)
        for j in range(CATS_SELECTED):
            out[f"cat_{j}"] = torch.from_numpy(np.asarray(t.cat[j][r]))

        hi = np.asarray(t.seq0_offsets[r + 1])
        n = np.minimum(hi - np.asarray(t.seq0_offsets[r]), SEQ0_LEN)
        pos = np.arange(SEQ0_LEN)
        mask = pos[None, :] < n[:, None]
        at = np.where(mask, (hi - n)[:, None] + pos[None, :], 0)
        out["seq_0"] = torch.from_numpy(np.where(mask, t.seq0_values[at], 0))
        out["seq_0_len"] = torch.from_numpy(n.astype(np.int32))

        hi = np.asarray(t.seq1_offsets[r + 1])
        n = np.minimum(hi - np.asarray(t.seq1_offsets[r]), SEQ1_MAX)
        offsets = np.zeros(len(r) + 1, dtype=np.int64)
        np.cumsum(n, out=offsets[1:])
        at = np.repeat(hi - n - offsets[:-1], n) + np.arange(offsets[-1])
        out["seq_1"] = (torch.from_numpy(np.asarray(t.seq1_values[at])), torch.from_numpy(offsets))
        return out


# ---- the loaders


def make_loader(style, table, rows, weights, batch, workers, shuffle, seed=JOB_SEED, prefetch=None):
    g = torch.Generator()
    g.manual_seed(seed)
    more = {"prefetch_factor": prefetch} if workers and prefetch else {}
    if style == "row":
        ds = RowDataset(table, rows, weights)
        return DataLoader(
            ds, batch_size=batch, shuffle=shuffle, generator=g if shuffle else None,
            drop_last=True, num_workers=workers, collate_fn=collate_rows, **more,
        )
    if style == "batch":
        ds = BatchDataset(table, rows, weights)
        base = RandomSampler(ds, generator=g) if shuffle else SequentialSampler(ds)
        return DataLoader(ds, sampler=BatchSampler(base, batch, drop_last=True), batch_size=None, num_workers=workers,
                          **more)
    raise ValueError(f"unknown style {style!r}: want row or batch")


def _proc_cpu(pid):
    """utime + stime of a live process, in clock ticks (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return 0


def _wait_workers_idle(it, settle=0.5, limit=600.0):
    """Wait until the DataLoader iterator's workers stop using CPU: with a
    prefetch that holds the epoch, every batch is then made and queued."""
    pids = [w.pid for w in getattr(it, "_workers", [])]
    last, still, end = None, 0.0, time.monotonic() + limit
    while time.monotonic() < end:
        now = sum(_proc_cpu(p) for p in pids)
        still = still + 0.1 if now == last else 0.0
        if still >= settle:
            return
        last = now
        time.sleep(0.1)


def _rss_anon_mib():
    """Private (anonymous) resident memory of this process: unlike
    ru_maxrss it leaves out the page-cache pages of the mapped .npy files."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


def _children_cpu():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run(npy_dir, spam_path, style="batch", batch=2048, workers=0, max_batches=0, shuffle=True, seed=JOB_SEED,
        step=0.0, ready=False):
    """Runs the baseline and returns its measurements (see docs/baseline.md).

    ``step`` seconds of sleep after each batch stand in for a training step
    (as ``lastmile cat --step-ms`` does for lastmile's trainer): the main
    process then takes each batch on a CPU that sat idle meanwhile.

    ``ready`` (workers only): the workers make the whole epoch first (a
    prefetch that holds it), and the main process's CPU per batch is that
    of taking the batches waiting for it, back to back, as lastmile's
    trainer is measured (``lastmile cat --ready``); its rows/s then count
    no overlap and are not a throughput.
    """
    if ready and not workers:
        raise ValueError("ready needs workers: with num_workers 0 the main process makes every batch")
    torch.set_num_threads(1)
    wall0, cpu0, child0 = time.perf_counter(), time.process_time(), _children_cpu()
    table = Table(npy_dir)
    spam = load_spam(spam_path)
    rows, weights = filter_rows(table, spam, seed=seed)
    setup_s, setup_cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    prefetch = -(-(len(rows) // batch) // workers) + 1 if ready else None
    loader = make_loader(style, table, rows, weights, batch, workers, shuffle, seed, prefetch)

    batches, out_rows, first_batch_s = 0, 0, None
    it = iter(loader)
    if ready:
        _wait_workers_idle(it)
    loop_cpu0 = time.process_time()
    for b in it:
        n = b["label_f"].shape[0]
        if n != batch or b["seq_0"].shape != (batch, SEQ0_LEN):
            raise AssertionError(f"batch {batches}: {n} rows, seq_0 {tuple(b['seq_0'].shape)}")
        if first_batch_s is None:
            first_batch_s = time.perf_counter() - wall0
        batches += 1
        out_rows += n
        if max_batches and batches >= max_batches:
            break
        if step:
            time.sleep(step)
    wall = time.perf_counter() - wall0
    loop_cpu = time.process_time() - loop_cpu0
    rss_anon = _rss_anon_mib()
    # Stop and reap the workers so that RUSAGE_CHILDREN holds their CPU time.
    if hasattr(it, "_shutdown_workers"):
        it._shutdown_workers()
    del it, loader
    main_cpu = time.process_time() - cpu0
    workers_cpu = _children_cpu() - child0

    per_batch = lambda s: s / batches * 1e3 if batches else None  # noqa: E731
    kept_frac = len(rows) / table.rows if table.rows else 0.0
    return {
        "baseline": "torch.utils.data.DataLoader",
        "style": style,
        "workers": workers,
        "batch": batch,
        "shuffle": shuffle,
        "seed": seed,
        "step_ms": step * 1e3,
        "input_rows": table.rows,
        "kept_rows": int(len(rows)),
        "kept_fraction": round(kept_frac, 6),
        "batches": batches,
        "rows": out_rows,
        "seconds": round(wall, 4),
        "setup_seconds": round(setup_s, 4),
        "first_batch_seconds": round(first_batch_s, 4) if first_batch_s is not None else None,
        "rows_per_s": round(out_rows / wall, 1) if wall > 0 else None,
        "steady_rows_per_s": round(out_rows / (wall - setup_s), 1) if wall > setup_s else None,
        "input_rows_per_s": round(out_rows / kept_frac / wall, 1) if wall > 0 and kept_frac else None,
        "main_cpu_seconds": round(main_cpu, 4),
        "setup_cpu_seconds": round(setup_cpu, 4),
        # Per batch without the one-off setup (the filtering pass), as
        # steady_rows_per_s leaves it out: the reference of bench's (g).
        # Ready: the batches' taking alone (the workers had made them all).
        "ready": ready,
        "main_cpu_ms_per_batch": round(per_batch(loop_cpu if ready else main_cpu - setup_cpu), 3) if batches else None,
        "workers_cpu_seconds": round(workers_cpu, 4),
        "total_cpu_seconds": round(main_cpu + workers_cpu, 4),
        "total_cpu_ms_per_batch": round(per_batch(main_cpu + workers_cpu), 3) if batches else None,
        "cores_busy": round((main_cpu + workers_cpu) / wall, 3) if wall > 0 else None,
        "main_rss_anon_mib": rss_anon,
        "main_max_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "workers_max_rss_mib": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "cpus": os.cpu_count(),
        "loadavg_1m": round(os.getloadavg()[0], 2),
    }


def main(argv=None):
    p = argparse.ArgumentParser(description="lastmile's DataLoader baseline over `lastmile gen --npy` files (docs/baseline.md)")
    p.add_argument("--npy", required=True, help="directory written by `lastmile gen --npy DIR`")
    p.add_argument("--spam", required=True, help="spam-user table: the .npy, or the .parquet of `lastmile gen --spam-users` (its .npy is read)")
    p.add_argument("--batch", type=int, default=2048, help="rows per batch (default 2048)")
    p.add_argument("--workers", type=int, default=0, help="DataLoader num_workers (default 0)")
    p.add_argument("--style", choices=["row", "batch"], default="batch", help="row: per-row __getitem__ + collate; batch: vectorized per batch (default)")
    p.add_argument("--max-batches", type=int, default=0, help="stop after N batches (default 0: one whole epoch)")
    p.add_argument("--seed", type=int, default=JOB_SEED, help=f"job seed for the sample hash and the shuffle (default {JOB_SEED}, the example's)")
    p.add_argument("--no-shuffle", action="store_true", help="read the kept rows in order instead of a seeded random permutation")
    p.add_argument("--step-ms", type=float, default=0.0, help="sleep this long after each batch, standing in for a training step (default 0)")
    p.add_argument("--ready", action="store_true",
                   help="the workers make the whole epoch first; main CPU per batch is the taking of waiting batches")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    a = p.parse_args(argv)
    if a.ready and a.workers < 1:
        p.error("--ready needs --workers 1 or more")
    res = run(a.npy, a.spam, a.style, a.batch, a.workers, a.max_batches, not a.no_shuffle, a.seed, a.step_ms / 1e3,
              a.ready)
    if a.json:
        print(json.dumps(res))
    else:
        print(
            f"{res['style']} workers={res['workers']}: {res['batches']} batches, {res['rows']} rows in {res['seconds']:.2f}s "
            f"({res['rows_per_s']:.0f} rows/s, setup {res['setup_seconds']:.2f}s); CPU main {res['main_cpu_seconds']:.2f}s "
            f"+ workers {res['workers_cpu_seconds']:.2f}s = {res['total_cpu_ms_per_batch']:.1f} ms/batch"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
