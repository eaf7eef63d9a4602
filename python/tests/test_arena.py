"""Format 4.2, the unit arena (docs/ring-format.md 8): tensors whose payload
lies in the job's arena file, read by the Python client from the test
producer (ringwriter.ArenaWriter).

Run: cd python && /usr/bin/python3 -m unittest tests.test_arena -v
"""

import contextlib
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import lastmile  # noqa: E402
import lastmile.cuda as lmcuda  # noqa: E402
import ringwriter as rw  # noqa: E402
from lastmile import __main__ as lmmain  # noqa: E402
from lastmile import devstage  # noqa: E402
from lastmile import format as lmformat  # noqa: E402
from test_cuda import FakeCUDA  # noqa: E402
from test_ring import RingTestCase  # noqa: E402

try:
    import torch
except Exception:  # pragma: no cover - torch is optional
    torch = None

# Every field's dense tensor or values in the arena; offsets and validity
# stay in the slot, as they must.
ALL = frozenset(f.name for f in rw.ALL_FIELDS)
# Index in the tensor table of ALL_FIELDS (id, x, img, flag, h, f16, then
# tokens values/offsets, text values/offsets, score + validity, tags
# values/offsets/validity).
T_ID, T_TOKENS_VALUES, T_TOKENS_OFFSETS, T_SCORE_VALIDITY = 0, 6, 7, 11


class ArenaTestCase(RingTestCase):
    def arena(self, **kw):
        a = rw.ArenaWriter(self.dir, **kw).create()
        self.addCleanup(a.remove)
        return a

    def arena_writer(self, arena=None, **kw):
        kw.setdefault("version", (4, 2))
        return self.writer(arena=arena if arena is not None else self.arena(), **kw)

    def publish(self, w, seq, in_arena=ALL):
        cols, valid, rows = rw.make_batch(seq, w.fields)
        c = rw.cursor_for(seq)  # a padded batch of an x.1 or later ring says how many rows
        w.publish(cols, rows, valid=valid, in_arena=in_arena, pad_rows=1 if c["padded"] else 0, **c)

    def in_arena(self, ring, a):
        """Whether array ``a`` is a view of ``ring``'s arena mapping."""
        core = ring._core
        return core.arena_base <= a.ctypes.data < core.arena_end


class ReadTests(ArenaTestCase):
    def test_dense_and_ragged_from_the_arena(self):
        # 13 batches through 4 slots: every slot is reused with other arena
        # offsets, and batches alternate between payloads in the arena, in
        # the slot, and some of each, so that each slot's cached views see
        # every transition (place 1 to 0 and back, offsets that move).
        plans = [ALL, ALL, (), {"id", "tokens"}, ALL, (), ALL, {"x", "text", "tags"}, ALL, ALL, (),
                 ALL, {"score"}]
        for stable in (False, True):
            with self.subTest(stable=stable):
                w = self.arena_writer()
                w.stable = stable
                with lastmile.Ring.open(w.name, self.dir) as ring:
                    self.assertEqual(ring.version, (4, 2))
                    for s, plan in enumerate(plans):
                        self.publish(w, s, plan)
                        b = ring.next(timeout=5)
                        self.check_batch(b, s)
                        if b.rows:
                            self.assertEqual(self.in_arena(ring, b["id"]), "id" in plan)
                            self.assertEqual(self.in_arena(ring, b["x"]), "x" in plan)
                            self.assertFalse(self.in_arena(ring, b.valid["score"]))
                            self.assertTrue(b["id"].flags.writeable)  # in place, as a slot's views
                        t = b["tokens"]
                        if len(t.values):
                            self.assertEqual(self.in_arena(ring, t.values), "tokens" in plan)
                        self.assertFalse(self.in_arena(ring, t.offsets))

    def test_values_move_between_slot_and_arena(self):
        # Batches of the same rows in the same slot, whose only change is
        # where a ragged field's values lie: the slot's table differs only
        # in the values entries, the case the per-slot cache patches in
        # place for payloads in the slot (batch.py, _SlotCache.patch).
        fields = [rw.FieldSpec("id", "dense", "int64"), rw.FieldSpec("tokens", "ragged", "int32")]
        plans = [(), (), {"tokens"}, {"tokens"}, (), (), {"tokens"}, (), {"id", "tokens"}, {"tokens"}, (), ()]
        w = self.arena_writer(fields=fields, slot_count=2)
        w.stable = True
        with lastmile.Ring.open(w.name, self.dir) as ring:
            for s, plan in enumerate(plans):
                lens = np.array([s % 3, 1, (s * 7) % 5, 2])
                cols = {"id": np.arange(4) + 100 * s,
                        "tokens": (np.arange(lens.sum(), dtype=np.int32) * (s + 1),
                                   np.concatenate([[0], np.cumsum(lens)]))}
                w.publish(cols, 4, in_arena=plan)
                b = ring.next(timeout=5)
                np.testing.assert_array_equal(b["id"], cols["id"])
                np.testing.assert_array_equal(b["tokens"].values, cols["tokens"][0])
                np.testing.assert_array_equal(b["tokens"].offsets, cols["tokens"][1])
                self.assertEqual(self.in_arena(ring, b["tokens"].values), "tokens" in plan)
                if torch is not None:
                    t = b.torch()
                    np.testing.assert_array_equal(t["tokens"].values.numpy(), cols["tokens"][0])
                    self.assertEqual(t["tokens"].values.data_ptr(), b["tokens"].values.ctypes.data)

    @unittest.skipIf(torch is None, "torch is not installed")
    def test_torch_views_of_the_arena(self):
        w = self.arena_writer()
        with lastmile.Ring.open(w.name, self.dir) as ring:
            for s in range(9):
                self.publish(w, s, ALL if s % 3 else {"tokens"})
                b = ring.next(timeout=5)
                t = b.torch()
                cols, valid, rows = rw.make_batch(s, w.fields)
                np.testing.assert_array_equal(t["id"].numpy(), cols["id"])
                np.testing.assert_array_equal(t["x"].numpy(), cols["x"])
                np.testing.assert_array_equal(t["h"].view(torch.int16).numpy().view(np.uint16), cols["h"])
                self.assertEqual(t["h"].dtype, torch.bfloat16)
                np.testing.assert_array_equal(t["tokens"].values.numpy(), cols["tokens"][0])
                np.testing.assert_array_equal(t["tokens"].offsets.numpy(), cols["tokens"][1])
                np.testing.assert_array_equal(t.valid["score"].numpy(), valid["score"])
                if len(cols["tokens"][0]):  # zero-copy: the tensor is the arena's memory
                    self.assertEqual(t["tokens"].values.data_ptr(), b["tokens"].values.ctypes.data)

    def test_arena_closed_with_the_ring(self):
        w = self.arena_writer()
        self.publish(w, 0)
        ring = lastmile.Ring.open(w.name, self.dir)
        b = ring.next(timeout=5)
        self.check_batch(b, 0)
        arena = ring._core.arena
        del b
        ring.close()
        self.assertTrue(arena.closed)
        self.assertIsNone(ring._core.arena)

    def test_ring_without_arena_is_4_2_too(self):
        # arena_id and arena_size both 0: a 4.x ring that names no arena
        w = self.writer(version=(4, 2))
        self.publish(w, 0, ())
        with lastmile.Ring.open(w.name, self.dir) as ring:
            self.assertIsNone(ring._core.arena)
            self.check_batch(ring.next(timeout=5), 0)

    def test_inspect_names_the_arena(self):
        a = self.arena()
        w = self.arena_writer(a)
        info = lastmile.inspect(w.name, self.dir)
        self.assertEqual((info["version"], info["arena"], info["arena_size"]),
                         ("4.2", os.path.basename(a.path), a.size))

    def test_digest_and_cat_read_the_arena(self):
        # The same batches in an arena ring and in a 3.2-style ring: the
        # digest hashes the tensors' bytes, wherever they lie.
        digests = []
        for arena in (True, False):
            if arena:
                w = self.arena_writer(slot_count=8)
            else:
                w = self.writer(slot_count=8, version=(1, 2))
            for s in range(7):
                self.publish(w, s, ALL if arena else ())
            w.finish("done")
            out = io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
                rc = lmmain.main(["cat", w.name, "--shm-dir", self.dir, "--digest"])
            self.assertEqual(rc, 0)
            digests.append(json.loads(out.getvalue()))
        self.assertEqual(digests[0], digests[1])
        self.assertEqual(digests[0]["batches"], 7)


class OpenRefusalTests(ArenaTestCase):
    """What the reader checks of the arena when it opens a ring (8.1)."""

    def test_refusals(self):
        def missing(w, a):
            a.remove()

        def symlink(w, a):
            os.rename(a.path, a.path + ".real")
            os.symlink(a.path + ".real", a.path)

        def linked(w, a):
            os.link(a.path, os.path.join(self.dir, "second-name"))

        def truncated(w, a):
            os.truncate(a.path, 4096 + a.size - 4096)

        cases = [
            # (what, arena kwargs, ring kwargs, change before open, error, message)
            ("missing", {}, {}, missing, lastmile.RingError, r"arena\+[0-9a-f]{16}, which is missing"),
            ("symlink", {}, {}, symlink, lastmile.RingError, r"cannot be opened"),
            ("two links", {}, {}, linked, lastmile.RingError, r"2 hard links"),
            ("truncated", {}, {}, truncated, lastmile.RingFormatError, r"truncated"),
            ("bad magic", {"magic": b"LMRING\x00\x01"}, {}, None, lastmile.RingFormatError, r"magic"),
            ("wrong id", {"header_id": 5}, {}, None, lastmile.RingFormatError,
             r"arena_id is 0x0000000000000005, ring .* names 0x"),
            ("wrong size", {"header_size": 8192}, {}, None, lastmile.RingFormatError,
             r"data size is 8192, ring .* says 1048576"),
            ("id without size", {}, {"arena_ref": (7, 0)}, None, lastmile.RingFormatError,
             r"arena_id 0x7 with arena_size 0"),
            ("size without id", {}, {"arena_ref": (0, 4096)}, None, lastmile.RingFormatError,
             r"arena_id 0x0 with arena_size 4096"),
            ("size not of pages", {}, {"arena_ref": (7, 100)}, None, lastmile.RingFormatError,
             r"arena_size 100: want"),
        ]
        for what, akw, wkw, change, err, msg in cases:
            with self.subTest(what):
                a = self.arena(**akw)
                w = self.arena_writer(a, **wkw)
                if change is not None:
                    change(w, a)
                with self.assertRaisesRegex(err, msg):
                    lastmile.Ring.open(w.name, self.dir)
                # refused, and left without a consumer: its lock (byte 1) is free
                fd = os.open(w.path, os.O_RDONLY)
                try:
                    self.assertTrue(lmformat._lock_free(fd, 1))
                finally:
                    os.close(fd)

    def test_missing_arena_names_the_file(self):
        a = self.arena()
        w = self.arena_writer(a)
        a.remove()
        with self.assertRaises(lastmile.RingError) as cm:
            lastmile.Ring.open(w.name, self.dir)
        self.assertIn(a.path, str(cm.exception))
        self.assertNotIsInstance(cm.exception, FileNotFoundError)

    @unittest.skipUnless(os.geteuid() == 0, "needs root to act as another user")
    def test_arena_the_user_may_not_open(self):
        # The ring is the user's, its arena still root's 0600 (lastmiled could
        # not chown it): the error says so, not that it is a symlink.
        a = self.arena()
        w = self.arena_writer(a)
        nobody = 65534
        os.chmod(self.dir, 0o755)
        os.chown(w.path, nobody, nobody)
        os.chmod(a.path, 0o600)
        # The package, where uid 65534 can read it whatever the checkout's
        # permissions (a clone under `mktemp -d` is 0700).
        pkg = tempfile.mkdtemp(prefix="lastmile-pkg-")
        self.addCleanup(shutil.rmtree, pkg, True)
        os.chmod(pkg, 0o755)
        shutil.copytree(os.path.join(os.path.dirname(HERE), "lastmile"), os.path.join(pkg, "lastmile"),
                        ignore=shutil.ignore_patterns("__pycache__"))
        code = ("import sys, os; os.setgid(%d); os.setuid(%d); sys.path.insert(0, %r)\n"
                "import lastmile\n"
                "try:\n    lastmile.Ring.open(%r, %r)\nexcept lastmile.RingError as e:\n    print(e)\n"
                % (nobody, nobody, pkg, w.name, self.dir))
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        self.assertIn("may not open for reading and writing", out.stdout, out.stderr)
        self.assertIn("CAP_CHOWN", out.stdout)

    def test_major_5_is_refused(self):
        w = self.writer(version=(5, 2), arena=self.arena())
        with self.assertRaisesRegex(lastmile.RingVersionError, r"5\.2; this lastmile client reads formats 1\.x to 4\.x"):
            lastmile.Ring.open(w.name, self.dir)

    def test_3_x_ring_ignores_bytes_88_to_103(self):
        # Reserved before 4.x: a 3.x reader never looked at them, and neither
        # does this one for a 3.x ring.
        w = self.writer(version=(1, 2), arena_ref=(7, 100))
        self.publish(w, 0, ())
        with lastmile.Ring.open(w.name, self.dir) as ring:
            self.assertIsNone(ring._core.arena)
            self.check_batch(ring.next(timeout=5), 0)


class EntryRefusalTests(ArenaTestCase):
    """What the reader checks of a tensor entry's place (8.2)."""

    def entry(self, w, i):
        return w.slot_off(w.tail % w.slot_count) + 64 + 64 * i

    def test_refusals(self):
        def put(i, fmt, at, *v):
            return lambda w: struct.pack_into(fmt, w.mm, self.entry(w, i) + at, *v)

        def offset(i, f):  # entry i's offset, as f of its offset and the arena's length
            def change(w):
                e = self.entry(w, i)
                off, nbytes = struct.unpack_from("<QQ", w.mm, e + 40)
                struct.pack_into("<Q", w.mm, e + 40, f(off, nbytes, 4096 + w.arena.size))
            return change

        cases = [
            # (what, the ring has an arena, change to the entries, message)
            ("misaligned", True, offset(T_ID, lambda o, n, end: o + 4), r"not 8-byte aligned"),
            ("in the header page", True, offset(T_ID, lambda o, n, end: 0), r"arena offset 0,"),
            ("past the end", True, offset(T_ID, lambda o, n, end: end - 8), r"not 8-byte aligned within"),
            ("far past the end", True, offset(T_ID, lambda o, n, end: 1 << 62), r"arena offset %d" % (1 << 62)),
            ("offsets in the arena", True, put(T_TOKENS_OFFSETS, "<B", 5, 1),
             r"tokens' \(role 2\) lies in the unit arena; only dense, values and weights"),
            ("validity in the arena", True, put(T_SCORE_VALIDITY, "<B", 5, 1), r"\(role 3\) lies in the unit arena"),
            ("unknown place", True, put(T_ID, "<B", 5, 2), r"place 2, want 0 \(the slot\) or 1"),
            ("unknown place of a slot tensor", True, put(T_TOKENS_OFFSETS, "<B", 5, 7), r"place 7"),
            ("reserved byte 6", True, put(T_ID, "<B", 6, 1), r"reserved bytes 6-7 are 0x0001"),
            ("reserved byte 7", True, put(T_TOKENS_VALUES, "<B", 7, 1), r"reserved bytes 6-7 are 0x0100"),
            ("place 1 without an arena", False, put(T_ID, "<B", 5, 1), r"lies in a unit arena \(place 1\), "
                                                                        r"and the ring names none"),
        ]
        for what, with_arena, change, msg in cases:
            with self.subTest(what):
                if with_arena:
                    w = self.arena_writer()
                    in_arena = ALL
                else:
                    w = self.writer(version=(4, 2))
                    in_arena = ()
                with lastmile.Ring.open(w.name, self.dir) as ring:
                    # A good batch in every slot first, so that the bad one
                    # meets a slot whose views are cached.
                    for s in range(w.slot_count):
                        self.publish(w, s, in_arena)
                        self.check_batch(ring.next(timeout=5), s)
                    w.wait_space()
                    cols, valid, rows = rw.make_batch(2, w.fields)  # 7 rows: id is 56 bytes
                    w.write_slot(cols, rows, valid=valid, in_arena=in_arena)
                    change(w)
                    w.commit()
                    with self.assertRaisesRegex(lastmile.RingFormatError, msg):
                        ring.next(timeout=5)


@unittest.skipIf(torch is None, "torch is not installed")
class StagingTests(ArenaTestCase):
    """Batches of an arena ring on the device: arena tensors are copied from
    the arena's host mapping, never taken from a slot."""

    def check_staged(self, b, s, w):
        """Batch s, staged: torch tensors (on the CPU or a device) that hold
        what the producer wrote. Returns its rows."""
        cols, valid, rows = rw.make_batch(s, w.fields)
        for name in ("id", "x", "img", "f16", "score"):
            np.testing.assert_array_equal(b[name].cpu().numpy(), cols[name], err_msg=name)
        np.testing.assert_array_equal(b["h"].cpu().view(torch.int16).numpy().view(np.uint16), cols["h"])
        for name in ("tokens", "text", "tags"):
            np.testing.assert_array_equal(b[name].values.cpu().numpy(), cols[name][0], err_msg=name)
            np.testing.assert_array_equal(b[name].offsets.cpu().numpy(), cols[name][1], err_msg=name)
        np.testing.assert_array_equal(b.valid["score"].cpu().numpy(), valid["score"])
        return rows

    def test_host_staging_uploads_arena_tensors(self):
        class Uploads(FakeCUDA):
            def upload(self, t):
                self.calls.append(("upload", t.numel()))
                return t.clone()

        w = self.arena_writer(slot_size=2 << 20)
        with lastmile.Ring.open(w.name, self.dir) as ring:
            fake = Uploads(ring)
            st = lmcuda.HostStaging(ring, "cuda:0", pool=3, backend=fake)
            try:
                for s in range(6):
                    self.publish(w, s, ALL if s % 2 else {"x"})
                    st.before_next()
                    b = st.stage(ring.next(timeout=5))
                    rows = self.check_staged(b, s, w)
                    uploads = [c for c in fake.calls if c[0] == "upload"]
                    self.assertTrue(uploads or not rows)
                    fake.calls = [c for c in fake.calls if c[0] != "upload"]
            finally:
                st.close()

    @unittest.skipUnless(os.environ.get("LASTMILE_GPU_TEST") and torch is not None and torch.cuda.is_available(),
                         "needs a CUDA GPU and LASTMILE_GPU_TEST=1 (make gpu-test)")
    def test_real_gpu(self):
        # The ring registered in place, the arena not: its tensors are
        # pageable copies beside the slot's one copy.
        d = self.tmpfs_dir()  # rings and arena on tmpfs: the kernel pins no disk file's shared pages
        a = rw.ArenaWriter(d).create()
        self.addCleanup(a.remove)
        w = rw.RingWriter("gpu-arena", d, rw.ALL_FIELDS, slot_count=4, slot_size=2 << 20, version=(4, 2),
                          arena=a).create()
        self.writers.append(w)
        with lastmile.Ring.open(w.name, d) as ring:
            st = lmcuda.stager(ring, "cuda:0")
            self.assertIsInstance(st, lmcuda.HostStaging, "registration fell back to host copies")
            try:
                for s in range(6):
                    self.publish(w, s, ALL if s % 2 else {"tokens"})
                    st.before_next()
                    b = st.stage(ring.next(timeout=5))
                    self.assertEqual(b["id"].device.type, "cuda")
                    self.assertEqual(b["tokens"].values.device.type, "cuda")
                    torch.cuda.synchronize()
                    self.check_staged(b, s, w)
            finally:
                st.close()

    def tmpfs_dir(self):
        import shutil
        import tempfile

        d = tempfile.mkdtemp(prefix="lastmile-arena-gpu-", dir="/dev/shm")
        self.addCleanup(shutil.rmtree, d, True)
        return d

    def test_device_staging_is_not_used_on_an_arena_ring(self):
        w = self.arena_writer()
        self.publish(w, 0)
        # an announcement of device slots (3.6.1), which lastmiled never
        # writes on an arena ring
        block = struct.pack("<II16sQ", 1, w.slot_count, b"0000:00:00.0", 9) + bytes(64) + bytes(64 * w.slot_count)
        w.mm[devstage.ANNOUNCE : devstage.ANNOUNCE + len(block)] = block
        struct.pack_into("<I", w.mm, devstage.ANNOUNCE_LEN, len(block))
        struct.pack_into("<I", w.mm, devstage.ANNOUNCE_SEQ, 2)

        class Fallback:
            staged = 0

            def before_next(self):
                pass

            def stage(self, b):
                Fallback.staged += 1
                return b

            def close(self):
                pass

        ipc = mock.Mock()
        with lastmile.Ring.open(w.name, self.dir) as ring:
            ds = devstage.DeviceStaging(ring, "cuda:0", ipc, Fallback(), lambda: True)
            with self.assertLogs("lastmile", "WARNING") as logs:
                ds.before_next()
                b = ds.stage(ring.next(timeout=5))
            self.check_batch(b, 0)
            ds.close()
        self.assertEqual(Fallback.staged, 1)
        self.assertFalse(ipc.open_mem.called)
        self.assertIn("names a unit arena", "\n".join(logs.output))


if __name__ == "__main__":
    unittest.main()
