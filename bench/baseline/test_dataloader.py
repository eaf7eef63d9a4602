"""Tests of the DataLoader baseline on a tiny table from `lastmile gen --npy`.

Run from the repository root after `make build` (or `go build -o bin/
./cmd/...`):

    /usr/bin/python3 -m unittest discover -s bench/baseline -v

The lastmile binary is $LASTMILE_BIN or bin/lastmile; without it the tests
skip, saying so.
"""

import collections
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import dataloader as dl  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))
BIN = os.environ.get("LASTMILE_BIN", os.path.join(ROOT, "bin", "lastmile"))
ROWS = 30000


def setUpModule():
    global TMP, NPY, SPAM, T, SPAM_IDS
    if not os.access(BIN, os.X_OK):
        raise unittest.SkipTest(f"no lastmile binary at {BIN}: run `make build` (or set LASTMILE_BIN) to test the baseline")
    TMP = tempfile.TemporaryDirectory(prefix="lastmile-baseline-")
    NPY, SPAM = os.path.join(TMP.name, "npy"), os.path.join(TMP.name, "spam.parquet")
    subprocess.run(
        [BIN, "gen", "--rows", str(ROWS), "--dense", "8", "--cats", "4", "--npy", NPY, "--spam-users", SPAM],
        check=True, capture_output=True,
    )
    T = dl.Table(NPY)
    SPAM_IDS = dl.load_spam(SPAM)


def tearDownModule():
    TMP.cleanup()


def batches(style, batch=512, workers=0, shuffle=False):
    rows, weights = dl.filter_rows(T, SPAM_IDS)
    return list(dl.make_loader(style, T, rows, weights, batch, workers, shuffle))


class TestHashes(unittest.TestCase):
    def test_splitmix64_known_values(self):
        # The first outputs of splitmix64 seeded with 0 (Vigna's reference).
        self.assertEqual(dl.splitmix64(0), 0xE220A8397B1DCDAF)
        self.assertEqual(dl.splitmix64(0x9E3779B97F4A7C15), 0x6E789E6AA1B965F4)

    # XXH64 vectors: the first three are xxHash's reference values; all were
    # printed by lastmile's expr.HashBytes and expr.HashInt.
    STRINGS = {
        "": 0xEF46DB3751D8E999,
        "a": 0xD24EC4F1A98C6E5B,
        "abc": 0x44BC2CF5AD770999,
        "red blue shoes": 0xEDEF076EE7CEC892,
        "headphones wireless charger laptop": 0x348E5C54C59664FB,
        "0123456789abcdef0123456789abcdef0123456789abcdefXYZ12": 0x4B0DA477B3EAD278,
        "東京 café größe niño": 0x290F97C435BACDA1,
    }
    INTS = {0: 0x34C96ACDCADB1BBB, 1: 0x9F29CB17A2A49995, -1: 0x85D136ADB773C6C9,
            123456789: 0xCB7C2941B198004D, 1 << 62: 0x88804A4927A4014B}

    def test_xxh64_known_values(self):
        for s, want in self.STRINGS.items():
            self.assertEqual(dl.xxh64(s.encode()), want, s)
        for v, want in self.INTS.items():
            self.assertEqual(dl.xxh64_int(v), want, v)
            self.assertEqual(dl.xxh64_int(v), dl.xxh64(int(v & dl.MASK64).to_bytes(8, "little")))

    def test_vectorized_match_scalar(self):
        x = np.array(list(self.INTS) + [2**63 - 1, -(2**63)], dtype=np.int64)
        want = [dl.xxh64_int(int(v)) for v in x]
        self.assertEqual([int(v) for v in dl.xxh64_int_np(x)], want)
        self.assertEqual(list(dl.hash_mod_int_np(x, 1000003)), [w % 1000003 for w in want])
        self.assertEqual([int(v) for v in dl.splitmix64_np(x)], [dl.splitmix64(int(v) & dl.MASK64) for v in x])
        # Every length 0..80 (stripes, words, a half word, bytes), at odd offsets.
        blob = bytes(range(7, 256)) + "".join(self.STRINGS).encode()
        data = np.frombuffer(blob, dtype=np.uint8)
        lens = np.array(list(range(81)) * 2)
        starts = (np.arange(len(lens)) * 37) % (len(blob) - 81)
        got = dl.xxh64_ragged(data, starts, lens)
        self.assertEqual([int(v) for v in got], [dl.xxh64(blob[s : s + n]) for s, n in zip(starts, lens)])
        flat = "".join(self.STRINGS).encode()
        lens = np.array([len(s.encode()) for s in self.STRINGS])
        starts = np.concatenate([[0], np.cumsum(lens)[:-1]])
        got = dl.xxh64_ragged(np.frombuffer(flat, np.uint8), starts, lens)
        self.assertEqual([int(v) for v in got], list(self.STRINGS.values()))


class TestFilter(unittest.TestCase):
    def test_against_scalar_definition(self):
        rows, weights = dl.filter_rows(T, SPAM_IDS, chunk=4096)  # several chunks
        spam = set(int(u) for u in SPAM_IDS)
        thr = dl.sample_threshold(dl.NEG_RATE)
        want, want_w = [], []
        for r in range(T.rows):
            if int(T.user_id[r]) in spam:
                continue
            if T.label[r] == 1:
                want.append(r)
                want_w.append(1.0)
            elif dl.splitmix64(dl.JOB_SEED ^ dl.xxh64_int(int(T.row_id[r]))) < thr:
                want.append(r)
                want_w.append(10.0)
        self.assertEqual(rows.tolist(), want)
        self.assertEqual(weights.dtype, np.float32)
        self.assertEqual(weights.tolist(), want_w)

    def test_rates(self):
        rows, weights = dl.filter_rows(T, SPAM_IDS)
        label, user = np.asarray(T.label), np.asarray(T.user_id)
        spam = np.isin(user, SPAM_IDS)
        self.assertGreater(spam.sum(), 0, "the tiny table has no spam user: the test proves nothing")
        self.assertFalse(np.isin(user[rows], SPAM_IDS).any(), "a spam user survived the anti-join")
        pos = np.flatnonzero((label == 1) & ~spam)
        self.assertTrue(np.isin(pos, rows).all(), "a positive was dropped")
        neg = (label == 0) & ~spam
        rate = np.isin(np.flatnonzero(neg), rows).mean()
        self.assertAlmostEqual(rate, 0.1, delta=0.015)
        self.assertTrue(np.all(weights[label[rows] == 1] == 1) and np.all(weights[label[rows] == 0] == 10))
        # The default spam share is 2% of all user ids: check the ids.
        self.assertTrue(np.all(np.diff(SPAM_IDS) > 0))
        self.assertAlmostEqual(len(SPAM_IDS) / 1_000_000, 0.02, delta=0.002)

    def test_spam_paths(self):
        a = dl.load_spam(SPAM)
        b = dl.load_spam(SPAM[: -len(".parquet")] + ".npy")
        self.assertTrue(np.array_equal(a, b))
        self.assertEqual(a.dtype, np.int64)


class TestBatches(unittest.TestCase):
    def check_batch(self, b, rows, weights, B):
        self.assertEqual(
            set(b),
            {"label_f", "weight", "user_h", "item_h", "query_h", "seq_0", "seq_0_len", "seq_1"}
            | {f"dense_{j}" for j in range(8)} | {f"cat_{j}" for j in range(4)},
        )
        self.assertEqual(tuple(b["seq_0"].shape), (B, dl.SEQ0_LEN))
        dtypes = {"label_f": "float32", "weight": "float32", "user_h": "int64", "item_h": "int64", "query_h": "int64",
                  "seq_0": "int64", "seq_0_len": "int32", "dense_0": "float32", "dense_5": "float32", "cat_1": "int64"}
        for k, want in dtypes.items():
            self.assertEqual(str(b[k].dtype), "torch." + want, k)
            if k != "seq_0":
                self.assertEqual(tuple(b[k].shape), (B,), k)
        values, offsets = b["seq_1"]
        self.assertEqual(tuple(offsets.shape), (B + 1,))
        self.assertEqual(int(offsets[0]), 0)
        self.assertEqual(int(offsets[-1]), len(values))
        for i, r in enumerate(rows):
            r = int(r)
            self.assertEqual(float(b["label_f"][i]), float(T.label[r]))
            self.assertEqual(float(b["weight"][i]), float(weights[i]))
            self.assertEqual(int(b["user_h"][i]), dl.xxh64_int(int(T.user_id[r])) % 1000003)
            self.assertEqual(int(b["item_h"][i]), dl.xxh64_int(int(T.item_id[r])) % 1000003)
            q = bytes(T.query_bytes[T.query_offsets[r] : T.query_offsets[r + 1]])
            self.assertEqual(int(b["query_h"][i]), dl.xxh64(q) % 65536)
            for j in range(8):
                x = float(T.dense[j][r])
                if j < 2:
                    x = min(max(math.log1p(abs(x)), 0), 10)
                self.assertAlmostEqual(float(b[f"dense_{j}"][i]), x, places=5)
            for j in range(4):
                self.assertEqual(int(b[f"cat_{j}"][i]), int(T.cat[j][r]))
            s0 = T.seq0_values[T.seq0_offsets[r] : T.seq0_offsets[r + 1]].tolist()
            n = min(len(s0), 64)
            self.assertEqual(int(b["seq_0_len"][i]), n)
            self.assertEqual(b["seq_0"][i].tolist(), s0[len(s0) - n :] + [0] * (64 - n))
            s1 = T.seq1_values[T.seq1_offsets[r] : T.seq1_offsets[r + 1]].tolist()
            self.assertEqual(values[offsets[i] : offsets[i + 1]].tolist(), s1[-256:])

    def test_styles_agree_and_match_definitions(self):
        rows, weights = dl.filter_rows(T, SPAM_IDS)
        B = 512
        a, b = batches("row", B), batches("batch", B)
        self.assertEqual(len(a), len(rows) // B)
        self.assertEqual(len(b), len(a))
        for k in range(len(a)):
            for key in a[k]:
                x, y = a[k][key], b[k][key]
                if key == "seq_1":
                    self.assertTrue(all((p == q).all() for p, q in zip(x, y)), key)
                else:
                    self.assertTrue((x == y).all(), f"batch {k} {key}")
        self.check_batch(b[0], rows[:B], weights[:B], B)
        self.check_batch(a[-1], rows[(len(a) - 1) * B : len(a) * B], weights[(len(a) - 1) * B : len(a) * B], B)
        # Some rows are long enough to be cut, some short enough to be padded.
        lens0 = np.diff(np.asarray(T.seq0_offsets))[rows]
        self.assertTrue((lens0 > 64).any() and (lens0 < 64).any())
        self.assertTrue((np.diff(np.asarray(T.seq1_offsets))[rows] > 256).any())

    def test_shuffle_workers(self):
        rows, _ = dl.filter_rows(T, SPAM_IDS)
        all_users = collections.Counter(dl.hash_mod_int_np(T.user_id[rows], dl.USER_MOD).tolist())
        for style in ("row", "batch"):
            got = batches(style, 256, workers=2, shuffle=True)
            self.assertEqual(len(got), len(rows) // 256, style)
            seen = collections.Counter()
            for b in got:
                seen.update(b["user_h"].tolist())
                self.assertEqual(tuple(b["seq_0"].shape), (256, 64))
            self.assertFalse(seen - all_users, f"{style}: rows that are not kept rows")
            in_order = batches(style, 256)
            self.assertFalse(all((p["user_h"] == q["user_h"]).all() for p, q in zip(got, in_order)), f"{style}: not shuffled")


class TestCommandLine(unittest.TestCase):
    def run_cli(self, *args):
        out = subprocess.run(
            [sys.executable, os.path.join(HERE, "dataloader.py"), "--npy", NPY, "--spam", SPAM, "--batch", "256", "--json", *args],
            check=True, capture_output=True, text=True,
        )
        return json.loads(out.stdout)

    def test_json(self):
        for style in ("row", "batch"):
            for workers in (0, 2):
                r = self.run_cli("--style", style, "--workers", str(workers), "--max-batches", "3")
                self.assertEqual((r["style"], r["workers"], r["batches"], r["rows"]), (style, workers, 3, 768))
                self.assertEqual(r["input_rows"], ROWS)
                for k in ("seconds", "rows_per_s", "main_cpu_seconds", "main_cpu_ms_per_batch", "total_cpu_seconds",
                          "total_cpu_ms_per_batch", "setup_seconds", "steady_rows_per_s", "input_rows_per_s"):
                    self.assertGreater(r[k], 0, k)
                if workers:
                    self.assertGreater(r["workers_cpu_seconds"], 0)
                else:
                    self.assertEqual(r["workers_cpu_seconds"], 0)
                self.assertAlmostEqual(r["total_cpu_seconds"], r["main_cpu_seconds"] + r["workers_cpu_seconds"], places=3)

    def test_step(self):
        # Sleeping 50 ms after each of 3 batches: the wall time shows the
        # steps, the main process's CPU time does not.
        r = self.run_cli("--style", "batch", "--max-batches", "3", "--step-ms", "50")
        self.assertEqual((r["batches"], r["step_ms"]), (3, 50.0))
        self.assertGreaterEqual(r["seconds"], 0.1)
        self.assertLess(r["main_cpu_seconds"], r["seconds"] - 0.09)

    def test_whole_epoch(self):
        r = self.run_cli("--no-shuffle")
        self.assertEqual(r["batches"], r["kept_rows"] // 256)
        self.assertFalse(r["shuffle"])


class TestReady(unittest.TestCase):
    def test_ready_takes_waiting_batches(self):
        # --ready: the workers make the whole epoch before the main process
        # takes a batch, and its CPU per batch is the taking alone (the
        # like-for-like reference of (g), whose trainer takes batches
        # waiting in the ring). Every batch of the epoch still comes, once.
        r = TestCommandLine.run_cli(self, "--style", "batch", "--workers", "2", "--ready", "--no-shuffle")
        self.assertTrue(r["ready"])
        self.assertEqual(r["batches"], r["kept_rows"] // 256)
        self.assertGreater(r["main_cpu_ms_per_batch"], 0)
        self.assertLess(r["main_cpu_ms_per_batch"] * r["batches"] / 1e3, r["main_cpu_seconds"])
        plain = TestCommandLine.run_cli(self, "--style", "batch", "--workers", "2", "--no-shuffle")
        self.assertFalse(plain["ready"])

    def test_ready_needs_workers(self):
        out = subprocess.run(
            [sys.executable, os.path.join(HERE, "dataloader.py"), "--npy", NPY, "--spam", SPAM, "--ready"],
            capture_output=True, text=True)
        self.assertEqual(out.returncode, 2)
        self.assertIn("--ready needs --workers", out.stderr)


class TestSetupLeftOut(unittest.TestCase):
    def test_main_cpu_per_batch_leaves_out_the_filtering_pass(self):
        # The filtering pass runs once per job, before any batch: like
        # steady_rows_per_s, the main process's CPU per batch (the
        # reference of (g)) leaves it out. Here it burns 0.5 CPU s.
        real = dl.filter_rows

        def slow_filter(*a, **k):
            t0 = time.process_time()
            while time.process_time() - t0 < 0.5:
                pass
            return real(*a, **k)

        dl.filter_rows = slow_filter
        try:
            r = dl.run(NPY, SPAM, style="batch", batch=256, workers=0, max_batches=3)
        finally:
            dl.filter_rows = real
        self.assertGreaterEqual(r["main_cpu_seconds"], 0.5)
        self.assertLess(r["main_cpu_ms_per_batch"] * r["batches"] / 1e3, 0.4, r)


if __name__ == "__main__":
    unittest.main()
