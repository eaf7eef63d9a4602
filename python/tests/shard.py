"""Runs one of two shards of the client's tests, so that `make test` can
run both at once (most of these tests wait on processes, not on a core).

    python3 python/tests/shard.py 0|1

Shard 0 holds the modules in HEAVY, shard 1 every other module, so a new
test module is run without being listed here; a module that fails to
import is reported in shard 1. Each shard exits 1 if a test failed.
"""

import os
import sys
import unittest

# The slowest modules (seconds on the 2-vCPU development VM, run alone):
# test_dataset 39, test_ring 15; the rest add up to about 60.
HEAVY = {"tests.test_dataset", "tests.test_ring"}


def module_of(suite):
    """The module name of a module's suite, from its first test's id."""
    for test in _tests(suite):
        parts = test.id().split(".")
        if parts[0] == "unittest":  # a module that failed to import
            return None
        return ".".join(parts[:2])
    return None


def _tests(suite):
    for t in suite:
        if isinstance(t, unittest.TestSuite):
            yield from _tests(t)
        else:
            yield t


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in ("0", "1"):
        sys.exit("usage: shard.py 0|1")
    shard = int(sys.argv[1])
    here = os.path.dirname(os.path.abspath(__file__))
    top = os.path.dirname(here)
    found = unittest.defaultTestLoader.discover(here, top_level_dir=top)
    picked = unittest.TestSuite()
    for suite in found:
        if (module_of(suite) in HEAVY) == (shard == 0):
            picked.addTest(suite)
    print("shard %d: %d tests" % (shard, picked.countTestCases()), flush=True)
    result = unittest.TextTestRunner(verbosity=2).run(picked)
    sys.exit(0 if result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
