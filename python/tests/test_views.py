"""What a batch's arrays may outlive, and what a reused slot cache re-checks
(format 4.2 rings with a unit arena, and plain slots).

Run: cd python && LASTMILE_SHM_DIR=$(mktemp -d) /usr/bin/python3 -m unittest tests.test_views -v
"""

import os
import struct
import subprocess
import sys
import textwrap
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import lastmile  # noqa: E402
import ringwriter as rw  # noqa: E402
from test_arena import ArenaTestCase  # noqa: E402

FIELDS = [rw.FieldSpec("id", "dense", "int64"), rw.FieldSpec("tokens", "ragged", "int32")]
# tensor table of FIELDS: 0 id (dense), 1 tokens values, 2 tokens offsets
T_ID, T_VALUES, T_OFFSETS = 0, 1, 2


def cols(s):
    lens = np.array([1, 2, 3, 4])
    return {"id": np.arange(4) + 100 * s,
            "tokens": (np.arange(lens.sum(), dtype=np.int32) + s, np.concatenate([[0], np.cumsum(lens)]))}


class UsedBytesAfterRebuild(ArenaTestCase):
    def test_unchanged_slot_entry_past_used_bytes_is_refused(self):
        # One slot, so every batch meets the previous batch's cache. Dense id
        # and the ragged values lie in the arena, at offsets that move with
        # every batch (as the Go producer's do): the table differs in those
        # entries only, so _parse rebuilds the cache with reuse, validating
        # just the changed entries. The offsets entry (in the slot) is byte for
        # byte the previous one's. A producer that then says used_bytes = the
        # end of the table (offsets payload lies past it) must be refused, as
        # Go's parseTensor refuses it (off > used) and as Python itself
        # refuses it for a first use of the slot or a patched cache.
        w = self.arena_writer(fields=FIELDS, slot_count=1)
        with lastmile.Ring.open(w.name, self.dir) as ring:
            w.publish(cols(0), 4, in_arena={"id", "tokens"})
            b = ring.next(timeout=5)
            np.testing.assert_array_equal(b["id"], cols(0)["id"])
            ring.release()
            w.wait_space(timeout=5)
            w.write_slot(cols(1), 4, in_arena={"id", "tokens"})
            so = w.slot_off(0)
            off = struct.unpack_from("<Q", w.mm, so + 64 + 64 * T_OFFSETS + 40)[0]
            table_end = 64 + 64 * 3
            self.assertGreater(off, table_end - 1)  # the offsets payload lies past the table
            struct.pack_into("<Q", w.mm, so + 8, table_end)  # used_bytes: the table only
            w.commit()
            with self.assertRaisesRegex(lastmile.RingFormatError, r"> used_bytes %d" % table_end):
                ring.next(timeout=5)

    def test_same_slot_refused_on_first_use(self):
        # The same crafted batch as the slot's first use, refused as Go refuses it.
        w = self.arena_writer(fields=FIELDS, slot_count=1)
        with lastmile.Ring.open(w.name, self.dir) as ring:
            w.write_slot(cols(1), 4, in_arena={"id", "tokens"})
            struct.pack_into("<Q", w.mm, w.slot_off(0) + 8, 64 + 64 * 3)
            w.commit()
            with self.assertRaisesRegex(lastmile.RingFormatError, r"> used_bytes 256"):
                ring.next(timeout=5)


LIFETIME = textwrap.dedent('''
    import gc, os, sys
    sys.path.insert(0, %(tests)r); sys.path.insert(0, %(pkg)r)
    import numpy as np
    import lastmile, ringwriter as rw
    d, which = sys.argv[1], sys.argv[2]
    FIELDS = [rw.FieldSpec("id", "dense", "int64"), rw.FieldSpec("tokens", "ragged", "int32")]
    def job(name):
        a = rw.ArenaWriter(d).create()
        w = rw.RingWriter(name, d, FIELDS, slot_count=2, version=(4, 2), arena=a).create()
        c = {"id": np.arange(4) + 7,
             "tokens": (np.arange(10, dtype=np.int32), np.array([0, 1, 3, 6, 10]))}
        w.publish(c, 4, in_arena=() if which == "slot" else {"id", "tokens"})
        return a, w
    a, w = job("r0")
    ring = lastmile.Ring.open("r0", d)
    b = ring.next(timeout=5)
    x = b["id"]                     # a view of the arena (or of the slot, which="slot")
    if which == "torch":
        x = b.torch()["id"]         # torch.from_numpy of that view
    del b
    if which == "gc":
        del ring                    # the Ring's finalizer closes it
    else:
        ring.close()
    gc.collect()
    if which == "replaced":
        # the job ends, a new one makes a new arena and ring under the same name
        a.remove(); w.close(unlink=True, unmap=True)
        a2, w2 = job("r0")
        r2 = lastmile.Ring.open("r0", d); r2.next(timeout=5); r2.close()
    print("sum", int(x.sum()), flush=True)   # 34 = 7+8+9+10
''')


class ViewsOutliveTheRing(ArenaTestCase):
    """A batch's arrays (numpy or torch) stay readable after the ring is
    closed, collected or replaced: closing leaves a mapping that arrays still
    view mapped until the last of them is freed (format.view). Built with
    np.ndarray(buffer=mm), which holds no buffer export, they pointed at
    unmapped memory once the ring closed: a segfault on the next read. Each
    case runs in a child process, whose crash the test sees as its exit
    status."""

    def run_child(self, which):
        src = LIFETIME % {"tests": HERE, "pkg": os.path.dirname(HERE)}
        p = subprocess.run([sys.executable, "-c", src, self.dir, which], capture_output=True, text=True,
                           timeout=60)
        self.assertEqual((p.returncode, p.stdout.strip()), (0, "sum 34"),
                         "child died: rc %d, stderr %s" % (p.returncode, p.stderr[-500:]))

    def test_arena_view_after_close(self):
        self.run_child("arena")

    def test_arena_view_after_ring_is_collected(self):
        self.run_child("gc")

    def test_arena_view_after_ring_replaced_with_new_arena(self):
        self.run_child("replaced")

    @unittest.skipIf(__import__("importlib").util.find_spec("torch") is None, "torch is not installed")
    def test_torch_view_of_arena_after_close(self):
        self.run_child("torch")

    def test_slot_view_after_close(self):
        self.run_child("slot")
