"""Command line of the lastmile client.

``python3 -m lastmile inspect NAME [--shm-dir DIR]``: print a ring's header as JSON.
``python3 -m lastmile cat NAME [--shm-dir DIR] [--digest] [-n N]``: read a ring as its
consumer and summarize it (or print a JSON digest, see lastmile.digest).
``--dir`` is the old name of ``--shm-dir`` (named as ``lastmile cat -shm-dir``
and lastmiled's ``shm_dir``).
"""

import argparse
import json
import sys

from .ring import RingError, inspect


def _shm_dir(p):
    """--shm-dir, the ring directory; --dir, its old name, stays hidden."""
    p.add_argument("--shm-dir", dest="dir", default=None, help="ring directory (default $LASTMILE_SHM_DIR or /dev/shm)")
    p.add_argument("--dir", dest="dir", default=None, help=argparse.SUPPRESS)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python3 -m lastmile")
    sub = p.add_subparsers(dest="cmd", required=True)
    i = sub.add_parser("inspect", help="print a ring's header, counters and state")
    i.add_argument("name")
    _shm_dir(i)
    c = sub.add_parser("cat", help="read a ring as its consumer and summarize its batches")
    c.add_argument("name")
    _shm_dir(c)
    c.add_argument("--digest", action="store_true", help="print a JSON digest of every column instead of the summary")
    c.add_argument("-n", type=int, default=0, help="stop after N batches (0: read to the end of the stream)")
    c.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the ring to appear")
    c.add_argument("--torch", action="store_true", help="take every batch as torch tensors, as a trainer would")
    c.add_argument("--step-ms", type=float, default=0.0, help="with --torch: sleep this long after each batch, standing in for a training step")
    c.add_argument("--ready", action="store_true", help="time only the client: wait (sleeping) until the ring is full or its producer finished, then take the waiting batches back to back")
    c.add_argument("--json", action="store_true", help="print the summary as JSON (batches, rows, seconds, cpu_seconds, cpu_ms_per_batch)")
    args = p.parse_args(argv)
    if args.cmd == "cat":
        return _cat(args)
    try:
        info = inspect(args.name, args.dir)
    except (OSError, RingError) as e:
        print("lastmile: %s" % e, file=sys.stderr)
        return 1
    json.dump(info, sys.stdout, indent=2)
    print()
    return 0


def rank_rings_hint(dir, name):
    """When there is no ring ``name`` but rings of a job's ranks ``name.r0``,
    ``name.r1``, ... exist (world_size > 1), a message that lists them;
    else None (as ``lastmile cat`` of the Go CLI)."""
    import os
    import re

    from .format import ring_dir

    d = ring_dir(dir)
    if os.path.lexists(os.path.join(d, name)):
        return None
    try:
        entries = os.listdir(d)
    except OSError:
        return None
    pat = re.compile(re.escape(name) + r"\.r(0|[1-9][0-9]*)")
    ranks = sorted((int(m.group(1)), e) for e in entries for m in [pat.fullmatch(e)] if m)
    if not ranks:
        return None
    names = [e for _, e in ranks]
    return ("no ring %s in %s, but %d rings of its ranks (one per rank when world_size > 1): %s; "
            "read one: python3 -m lastmile cat %s%s"
            % (name, d, len(names), ", ".join(names), "" if dir is None else "--shm-dir %s " % dir,
               names[0]))


def _cat(args):
    from .digest import cat

    if args.torch:
        import torch  # noqa: F401  (imported before the ring exists, not while timing)
    # Tools that start this consumer before its ring exists wait for this
    # line: the imports are done and the ring is being waited for.
    print("lastmile cat: waiting for ring %s" % args.name, file=sys.stderr, flush=True)
    hint = rank_rings_hint(args.dir, args.name)
    if hint:
        print("lastmile cat: %s" % hint, file=sys.stderr)
        return 1

    try:
        d, secs, cpu = cat(args.name, args.dir, digest=args.digest, limit=args.n, timeout=args.timeout, torch=args.torch, step=args.step_ms / 1e3, ready=args.ready)
    except (OSError, RingError, TimeoutError) as e:
        print("lastmile cat: %s" % e, file=sys.stderr)
        return 1
    if args.digest:
        json.dump(d.result(), sys.stdout)
        print()
        return 0
    secs = max(secs, 1e-9)
    if args.json:
        json.dump({"batches": d.batches, "rows": d.rows, "bytes": d.bytes, "seconds": round(secs, 4),
                   "cpu_seconds": round(cpu, 4),
                   "cpu_ms_per_batch": round(cpu / d.batches * 1e3, 4) if d.batches else None,
                   # Wall time inside next() and torch() per batch (with
                   # --step-ms it includes waiting when the producer is
                   # behind); cpu_ms_per_batch is the process's CPU time.
                   "client_ms_per_batch": round(getattr(d, "busy", 0.0) / d.batches * 1e3, 4) if d.batches else None},
                  sys.stdout)
        print()
        return 0
    pad = " (%d of them padding)" % d.pad if d.pad else ""
    if d.pad_unknown:
        pad += " (%d padded batches of a format 1.0 ring, which does not say how many rows are padding)" % d.pad_unknown
    print("python consumer: ring %s: %d batches, %d rows%s, %.1f MB in %.2fs (%.0f rows/s, %.0f MB/s), zero-copy numpy views"
          % (args.name, d.batches, d.rows, pad, d.bytes / 1e6, secs, d.rows / secs, d.bytes / 1e6 / secs))
    for line in d.field_lines():
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
