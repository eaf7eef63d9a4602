"""Runs one of SHARDS shards of the client's tests and of the DataLoader
baseline's (bench/baseline), so that `make test` can run them all at once:
most of these tests wait on processes, not on a core.

    python3 python/tests/shard.py K      (0 <= K < SHARDS)

Modules are dealt to shards by their measured cost (SECONDS), the
costliest first, each to the shard with the least so far: the same
split on every machine, and a new module (cost NEW) is run without being
listed here. A module that fails to import is reported in shard 0. Each
shard exits 1 if a test failed.
"""

import os
import sys
import unittest

SHARDS = 3

# Seconds of each module run alone on the 2-vCPU development VM
# (2026-11-29); together about 205.
SECONDS = {
    "tests.test_dataset": 36,
    "tests.test_dataset_reattach": 10,
    "test_dataloader": 30,  # bench/baseline
    "tests.test_docs": 22,
    "tests.test_ring": 19,
    "tests.test_train": 18,
    "tests.test_hosts": 16,
    "tests.test_torch_dataset": 10,
    "tests.test_launch": 10,
    "tests.test_v11": 8,
}
NEW = 4


def module_of(suite):
    """The module name of a module's suite, from its first test's id."""
    for test in _tests(suite):
        parts = test.id().split(".")
        if parts[0] == "unittest":  # a module that failed to import
            return None
        return ".".join(parts[:-2])
    return None


def _tests(suite):
    for t in suite:
        if isinstance(t, unittest.TestSuite):
            yield from _tests(t)
        else:
            yield t


def deal(names):
    """Each module name's shard: the costliest first, to the lightest."""
    load = [0] * SHARDS
    out = {}
    for name in sorted(names, key=lambda n: (-SECONDS.get(n, NEW), n)):
        k = load.index(min(load))
        out[name] = k
        load[k] += SECONDS.get(name, NEW)
    return out


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in [str(k) for k in range(SHARDS)]:
        sys.exit("usage: shard.py K (0 <= K < %d)" % SHARDS)
    shard = int(sys.argv[1])
    here = os.path.dirname(os.path.abspath(__file__))
    top = os.path.dirname(here)
    baseline = os.path.join(os.path.dirname(top), "bench", "baseline")
    suites = list(unittest.defaultTestLoader.discover(here, top_level_dir=top))
    suites += list(unittest.defaultTestLoader.discover(baseline, top_level_dir=baseline))
    names = {module_of(s) for s in suites} - {None}
    shard_of = deal(names)
    picked = unittest.TestSuite()
    for suite in suites:
        name = module_of(suite)
        if (shard_of[name] if name else 0) == shard:
            picked.addTest(suite)
    print("shard %d: %d tests" % (shard, picked.countTestCases()), flush=True)
    result = unittest.TextTestRunner(verbosity=2).run(picked)
    sys.exit(0 if result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
