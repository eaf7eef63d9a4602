"""The examples of docs/python.md run as shown, against a real lastmiled.

Each ```python block after a ``<!-- example: COMMANDS -->`` line is written
to a file in a fresh directory (with examples/tiny.yaml and
tiny-groups.yaml, their inputs made absolute) and run with a fresh lastmiled: COMMANDS is ``FILE [ARGS]``
commands separated by ``;``, ``launch N FILE`` meaning ``python3 -m
lastmile.launch --nproc N FILE``.

Run: cd python && /usr/bin/python3 -m unittest tests.test_docs -v
"""

import inspect
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import daemonproc  # noqa: E402

DOC = os.path.join(daemonproc.REPO, "docs", "python.md")
SPECS = [os.path.join(daemonproc.REPO, "examples", n) for n in ("tiny.yaml", "tiny-groups.yaml")]

try:
    import torch  # noqa: F401
except Exception:  # pragma: no cover - torch is optional
    torch = None

# What each example must print, besides exiting 0.
EXPECT = {
    "loop.py": ["done: next would be epoch 2, batch 0"],
    "loader.py": ["20 batches per epoch, 2 epochs", "epoch 0: 20 batches", "epoch 1: 20 batches"],
    "resume.py": ["stopped after 15 steps", "resuming at epoch 0, batch 15",
                  "done after 40 steps"],
    "ddp.py": ["rank 0 of 2: 20 steps (10 per epoch)", "rank 1 of 2: 20 steps (10 per epoch)"],
    "device.py": ["kept 6 batches on"],
    "groups.py": ["trained on dense [500, 3] and sparse keys ['cat_0', 'cat_1', 'history']"],
}


def examples():
    """[(commands, code)] of the doc."""
    with open(DOC) as f:
        text = f.read()
    pat = re.compile(r"<!-- example: (.*?) -->\n```python\n(.*?)```", re.S)
    return [(m.group(1), m.group(2)) for m in pat.finditer(text)]


@unittest.skipIf(torch is None, "needs torch")
@unittest.skipUnless(os.access(daemonproc.LASTMILED, os.X_OK),
                     "%s is not built: run `make build`" % daemonproc.LASTMILED)
class TestDocExamples(unittest.TestCase):
    def test_every_example_is_checked(self):
        names = sorted(self.commands(c)[0] for c, _ in examples())
        self.assertEqual(names, sorted(EXPECT))

    @staticmethod
    def commands(spec):
        """(file, [argv, ...]) of an example's COMMANDS."""
        file, runs = None, []
        for cmd in spec.split(";"):
            tok = cmd.split()
            if tok[0] == "launch":
                argv = ["-m", "lastmile.launch", "--nproc", tok[1]] + tok[2:]
                tok = tok[2:]
            else:
                argv = tok
            file = file or tok[0]
            runs.append([sys.executable] + argv)
        return file, runs

    def run_example(self, spec, code):
        file, runs = self.commands(spec)
        tmp = tempfile.mkdtemp(prefix="lm-doc-")
        self.addCleanup(shutil.rmtree, tmp, True)
        d = daemonproc.Lastmiled(os.path.join(tmp, "d"))
        self.addCleanup(d.kill)
        d.start()
        work = os.path.join(tmp, "work")
        os.makedirs(os.path.join(work, "examples"))
        for path in SPECS:
            with open(path) as f:
                text = f.read().replace("../testdata/small", daemonproc.SMALL)
            self.assertIn(daemonproc.SMALL, text)
            with open(os.path.join(work, "examples", os.path.basename(path)), "w") as f:
                f.write(text)
        with open(os.path.join(work, file), "w") as f:
            f.write(code)
        env = dict(os.environ, LASTMILE_SOCKET=d.socket, PYTHONPATH=daemonproc.PYROOT)
        out = ""
        for argv in runs:
            r = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True,
                               timeout=300)
            self.assertEqual(r.returncode, 0, "%s: %s\n%s\n%s" % (file, argv, r.stderr, d.log()))
            out += r.stdout
        for want in EXPECT[file]:
            self.assertIn(want, out, file)

    def test_examples(self):
        for spec, code in examples():
            with self.subTest(example=spec):
                self.run_example(spec, code)


class TestReference(unittest.TestCase):
    """The documented signature of lastmile.Dataset is the real one, and the
    Reference table of docs/python.md has a line for every argument."""

    @staticmethod
    def documented(path):
        with open(path) as f:
            text = f.read()
        m = re.search(r"`lastmile\.Dataset\((spec_or_path,.*?)\)`", text, re.S)
        assert m, "%s: no lastmile.Dataset(...) signature" % path
        params = []
        for p in " ".join(m.group(1).split()).split(", "):
            if p == "*":
                continue
            name, _, default = p.partition("=")
            params.append((name, eval(default) if default else inspect.Parameter.empty))
        return text, params

    def real(self):
        sys.path.insert(0, daemonproc.PYROOT)
        from lastmile.dataset import Dataset

        sig = inspect.signature(Dataset.__init__)
        return [(n, p.default) for n, p in sig.parameters.items() if n != "self"]

    def test_signatures(self):
        real = self.real()
        for name in ("python.md", "daemon-usage.md"):
            with self.subTest(doc=name):
                _, params = self.documented(os.path.join(daemonproc.REPO, "docs", name))
                self.assertEqual(params, real)

    def test_every_argument_has_a_line(self):
        text, params = self.documented(DOC)
        table = text[text.index("## Reference"):]
        table = table[:table.index("| member |")]
        rows = [line.split("|")[1] for line in table.splitlines() if line.startswith("| `")]
        named = set(re.findall(r"`(\w+)`", " ".join(rows)))
        self.assertEqual([n for n, _ in params if n not in named], [])


if __name__ == "__main__":
    unittest.main()
