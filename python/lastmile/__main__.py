"""``python3 -m lastmile inspect NAME [--dir DIR]``: print a ring's header as JSON."""

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
    args = p.parse_args(argv)
    try:
        info = inspect(args.name, args.dir)
    except (OSError, RingError) as e:
        print("lastmile: %s" % e, file=sys.stderr)
        return 1
    json.dump(info, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
