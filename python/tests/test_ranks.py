"""Rank and host resolution (lastmile.ranks): from the arguments, else
torchrun's environment.

Run: cd python && /usr/bin/python3 -m unittest tests.test_ranks -v
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from lastmile.ranks import resolve_hosts, resolve_ranks  # noqa: E402


class TestRanks(unittest.TestCase):
    def test_env(self):
        f = resolve_ranks
        self.assertEqual(f(env={}), (0, None, 0))
        self.assertEqual(f(env={"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "3"}), (3, 8, 3))
        self.assertEqual(f(env={"RANK": "11", "WORLD_SIZE": "16", "LOCAL_RANK": "3"}), (11, 16, 3))
        self.assertEqual(f(env={"WORLD_SIZE": "1"}), (0, 1, 0))
        # arguments win over the environment
        self.assertEqual(f(2, 4, env={"RANK": "3", "WORLD_SIZE": "8"}), (2, 4, 2))
        self.assertEqual(f(5, env={"RANK": "3", "WORLD_SIZE": "8"}), (5, 8, 5))
        self.assertEqual(f(None, 8, env={"RANK": "7"}), (7, 8, 7))
        # a rank without a world size: the spec's, checked by lastmile.Dataset
        self.assertEqual(f(3, env={}), (3, None, 3))
        self.assertEqual(f(env={"RANK": "2"}), (2, None, 2))

    def test_env_errors(self):
        for env, want in [
            ({"RANK": "x", "WORLD_SIZE": "8"}, "RANK='x' is not an integer"),
            ({"RANK": "8", "WORLD_SIZE": "8"}, "rank 8 is outside world size 8"),
            ({"WORLD_SIZE": "8"}, "world size 8 but no rank"),
            ({"RANK": "0", "WORLD_SIZE": "0"}, "must be at least 1"),
        ]:
            with self.subTest(env=env):
                with self.assertRaisesRegex(ValueError, want):
                    resolve_ranks(env=env)

    def test_hosts(self):
        f = resolve_hosts
        self.assertEqual(f(0, None, 0, env={}), (1, 0))
        self.assertEqual(f(3, 8, 3, env={"LOCAL_WORLD_SIZE": "8"}), (1, 0))
        # torchrun --nnodes 2 --nproc-per-node 8, the second host
        self.assertEqual(f(11, 16, 3, env={"LOCAL_WORLD_SIZE": "8", "GROUP_RANK": "1"}), (2, 1))
        self.assertEqual(f(11, 16, 3, env={"LOCAL_WORLD_SIZE": "8"}), (2, 1))
        self.assertEqual(f(5, 6, 1, env={"LOCAL_WORLD_SIZE": "2"}), (3, 2))
        # arguments win over the environment
        self.assertEqual(f(5, 8, 5, hosts=2, env={"LOCAL_WORLD_SIZE": "8"}), (2, 1))
        self.assertEqual(f(2, 4, 0, hosts=2, host=1), (2, 1))

    def test_hosts_errors(self):
        for args, kw, want in [
            ((11, 16, 3), {"env": {}}, "LOCAL_WORLD_SIZE is not set"),
            ((11, 16, 3), {"env": {"LOCAL_WORLD_SIZE": "6"}}, "not a multiple of LOCAL_WORLD_SIZE 6"),
            ((11, 16, 3), {"env": {"LOCAL_WORLD_SIZE": "8", "GROUP_RANK": "0"}}, "rank 11 does not run on host 0"),
            ((1, 4, 1), {"hosts": 3, "env": {}}, "want a divisor of world size 4"),
            ((1, 4, 1), {"hosts": 2, "host": 2, "env": {}}, "host 2: want 0 to 1"),
            ((0, None, 0), {"hosts": 2, "env": {}}, "hosts=2 but no world size"),
        ]:
            with self.subTest(args=args, kw=kw):
                with self.assertRaisesRegex(ValueError, want):
                    resolve_hosts(*args, **kw)


if __name__ == "__main__":
    unittest.main()
