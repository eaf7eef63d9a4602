"""Spec errors at submit: lastmile.Dataset(...) raises SpecError in its
constructor, against a real lastmiled (bin/lastmiled), with every error of
the file at once, syntactic and semantic, each naming the file, its line
and field; the file name goes to the daemon in the request's ``file``.
Run: cd python && /usr/bin/python3 -m unittest tests.test_spec_errors -v
"""

import os
import shutil
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import daemonproc  # noqa: E402
import lastmile  # noqa: E402
from lastmile import control  # noqa: E402
from test_dataset import FakeDaemonCase  # noqa: E402

BAD = """version: 1
name: bad
inputs: [%s]
batch: {size: 100}
pipeline:
  - filter: "lable == 1"
  - cast: {dense_0: float8}
  - sequence: {column: seq_0, length: 8, pading: 0}
"""


@unittest.skipUnless(os.access(daemonproc.LASTMILED, os.X_OK),
                     "%s is not built: run `make build`" % daemonproc.LASTMILED)
class TestSpecErrorsWithLastmiled(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="lm-specerr-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.d = daemonproc.Lastmiled(self.tmp)
        self.addCleanup(self.d.kill)
        self.d.start()

    def test_constructor_raises_every_error(self):
        path = os.path.join(self.tmp, "bad2.yaml")
        with open(path, "w") as f:
            f.write(BAD % daemonproc.SMALL)
        with self.assertRaises(lastmile.SpecError) as cm:
            lastmile.Dataset(path, 0, 1, socket=self.d.socket)
        e = cm.exception
        self.assertEqual(e.status, 400)
        self.assertEqual([(x.line, x.field) for x in e.errors], [
            (6, "pipeline[0].filter"),
            (7, "pipeline[1].cast.dense_0"),
            (8, "pipeline[2].sequence.pading"),
        ])
        self.assertEqual({x.file for x in e.errors}, {path})
        self.assertIn('unknown column "lable" (did you mean "label"?)', e.errors[0].message)
        text = str(e)
        self.assertTrue(text.startswith(path + ": spec has 3 errors"), text)
        self.assertIn("%s:7: pipeline[1].cast.dense_0: want int32" % path, text)
        self.assertEqual(control.Client(self.d.socket).jobs(), [])  # nothing was created

    def test_good_spec_still_accepted(self):
        path = os.path.join(self.tmp, "good.yaml")
        with open(path, "w") as f:
            f.write("version: 1\nname: good\ninputs: [%s]\ncolumns: [row_id]\nbatch: {size: 500}\n"
                    % daemonproc.SMALL)
        ds = lastmile.Dataset(path, 0, 1, socket=self.d.socket, torch=False, timeout=60)
        self.addCleanup(ds.close)
        self.assertTrue(ds.created)


class TestFileSent(FakeDaemonCase):
    def test_file_in_request(self):
        self.dataset()
        self.assertEqual(self.fake.requests[-1][2]["file"], self.spec_path)

    def test_field_error_text(self):
        self.assertEqual(str(control.FieldError("batch.size", 4, "required", "a.yaml")),
                         "a.yaml:4: batch.size: required")
        self.assertEqual(str(control.FieldError("", None, "not YAML", "a.yaml")), "a.yaml: not YAML")
        self.assertEqual(str(control.FieldError("x", 2, "m")), "line 2: x: m")
        field, line, msg = control.FieldError("x", 2, "m", "a.yaml")  # still a 3-tuple
        self.assertEqual((field, line, msg), ("x", 2, "m"))


if __name__ == "__main__":
    unittest.main()
