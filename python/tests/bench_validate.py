"""Per-batch validation cost of the Python client, ring format 1.0 against 1.1
(1.1 adds the check that null rows of nullable ragged fields are empty).

Run: cd python && /usr/bin/python3 tests/bench_validate.py
Reports the minimum of 7 interleaved rounds of 3000 validations of one held
4096-row batch (id int64, tags ragged int64 nullable), and the ratio: the
host is shared, so only the ratio of figures taken in the same run means
much.
"""

import os
import shutil
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import lastmile  # noqa: E402
import ringwriter as rw  # noqa: E402

FIELDS = [rw.FieldSpec("id", "dense", "int64"),
          rw.FieldSpec("tags", "ragged", "int64", nullable=True)]
ROWS = 4096


def main():
    d = tempfile.mkdtemp()
    rings, best = {}, {}
    try:
        for ver in ((1, 0), (1, 1)):
            name = "b%d" % ver[1]
            w = rw.RingWriter(name, d, FIELDS, slot_count=4, slot_size=1 << 20, version=ver).create()
            ok = np.arange(ROWS) % 5 != 0
            lens = np.where(ok, 3, 0)
            w.publish({"id": np.arange(ROWS),
                       "tags": (np.arange(lens.sum()), np.concatenate([[0], np.cumsum(lens)]))},
                      ROWS, valid={"tags": ok})
            r = lastmile.Ring.open(name, dir=d)
            b = r.next()  # held: its slot stays valid while _parse runs again
            rings[ver] = (r, r._core.slot_offset(0), b, w)
        for _ in range(7):
            for ver, (r, so, _, _) in rings.items():
                n = 3000
                t = time.perf_counter()
                for _ in range(n):
                    r._parse(0, 0, so)
                best[ver] = min(best.get(ver, 1e9), (time.perf_counter() - t) / n * 1e6)
    finally:
        for r, _, _, w in rings.values():
            r.close()
            w.close(unmap=True)
        shutil.rmtree(d, ignore_errors=True)
    for ver, us in best.items():
        print("format %d.%d: %.1f us per batch validation (%d rows, one nullable ragged field)"
              % (ver + (us, ROWS)))
    print("ratio 1.1/1.0: %.2f" % (best[(1, 1)] / best[(1, 0)]))


if __name__ == "__main__":
    main()
