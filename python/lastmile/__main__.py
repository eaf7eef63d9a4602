"""Command line of the lastmile client.

``python3 -m lastmile inspect NAME [--dir DIR]``: print a ring's header as JSON.
``python3 -m lastmile cat NAME [--dir DIR] [--digest] [-n N]``: read a ring as its
consumer and summarize it (or print a JSON digest, see lastmile.digest).
"""

import argparse
import json
import sys

from .ring import RingError, inspect


def main(argv=None):
    p = argparse.ArgumentParser(prog="python3 -m lastmile")
    sub = p.add_subparsers(dest="cmd", required=True)
    i = sub.add_parser("inspect", help="print a ring's header, counters and state")
    i.add_argument("name")
    i.add_argument("--dir", default=None, help="ring directory (default $LASTMILE_SHM_DIR or /dev/shm)")
    c = sub.add_parser("cat", help="read a ring as its consumer and summarize its batches")
    c.add_argument("name")
    c.add_argument("--dir", default=None, help="ring directory (default $LASTMILE_SHM_DIR or /dev/shm)")
    c.add_argument("--digest", action="store_true", help="print a JSON digest of every column instead of the summary")
    c.add_argument("-n", type=int, default=0, help="stop after N batches (0: read to the end of the stream)")
    c.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the ring to appear")
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


def _cat(args):
    from .digest import cat

    try:
        d, secs = cat(args.name, args.dir, digest=args.digest, limit=args.n, timeout=args.timeout)
    except (OSError, RingError, TimeoutError) as e:
        print("lastmile cat: %s" % e, file=sys.stderr)
        return 1
    if args.digest:
        json.dump(d.result(), sys.stdout)
        print()
        return 0
    secs = max(secs, 1e-9)
    print("python consumer: ring %s: %d batches, %d rows, %.1f MB in %.2fs (%.0f rows/s, %.0f MB/s), zero-copy numpy views"
          % (args.name, d.batches, d.rows, d.bytes / 1e6, secs, d.rows / secs, d.bytes / 1e6 / secs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
