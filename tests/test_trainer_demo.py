#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""examples/trainer.py --demo: a launcher and two worker processes share a
segment; a change reaches every worker, a replaced segment is followed, and
all agree on the config hash. Run by `make regtest` (exit status), or by hand
from a built tree:

    python3 tests/test_trainer_demo.py [-v]

The setup (the package, the library, shmctl) is tests/test_python.py's.
"""

import os
import sys

if __name__ == "__main__" and os.environ.get("SHMCFG_SANITIZERS"):
    # as tests/test_python.py: ctypes cannot load an ASan-built library into
    # an uninstrumented python. 77: automake's SKIP.
    print("# skipped: libshmcfg is built with sanitizers", file=sys.stderr)
    sys.exit(77)

import re
import subprocess
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_python import SHMCTL, TRAINER, segname, shmcfg  # noqa: E402


class TestTrainerDemo(unittest.TestCase):
    def test_trainer_demo(self):
        env = dict(os.environ)
        if SHMCTL:
            env["SHMCTL"] = SHMCTL
        name = segname("trainer")
        p = subprocess.run([sys.executable, TRAINER, "--workers", "2", "--steps", "20", "--demo",
                            "--segment", name], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=120, env=env)
        shmcfg.unlink(name, missing_ok=True)
        out = p.stdout
        self.assertEqual(p.returncode, 0, out + p.stderr)
        self.assertIn("every worker saw generation 2 (the change)", out)
        # the replacement (fresh: generation 3) and the change to it (4)
        self.assertIn("every worker followed it and saw the new segment's generation 4", out)
        self.assertIn("all 2 workers agree: generation 4", out)
        for rank in (0, 1):
            self.assertRegex(out, rf"worker {rank}: step \d+: generation 2, recompile_limit=16, "
                                  rf"cache_key_tag='demo'")
            # the replacement: the worker followed the new segment by itself
            # (no reattach of its own) and read its values
            self.assertRegex(out, rf"worker {rank}: step \d+: generation 4, recompile_limit=32, "
                                  rf"cache_key_tag='replaced'")
            self.assertNotRegex(out, rf"worker {rank}: step \d+: the segment was removed")
        hashes = set(re.findall(r"worker \d+: step \d+: generation 2, .*'demo'.*config hash (\w+)",
                                out))
        self.assertEqual(len(hashes), 1, out)
        new = set(re.findall(r"worker \d+: step \d+: generation 4, .*'replaced'.*config hash (\w+)",
                             out))
        self.assertEqual(len(new), 1, out)
        self.assertNotEqual(hashes, new)
        final = re.search(r"workers agree: generation 4, config hash (\w+)", out).group(1)
        self.assertTrue(final.startswith(new.pop()), out)
        if SHMCTL:  # shmctl create --force named the processes attached
            m = re.search(rf"launcher: shmctl: {name} is attached by pids "
                          rf"([\d, ]+): they follow the new segment", out)
            self.assertIsNotNone(m, out)
            # the launcher and the two workers (and a `shmctl ls` alongside, maybe)
            self.assertGreaterEqual(len(m.group(1).split(", ")), 3, out)
        with self.assertRaises(FileNotFoundError):
            shmcfg.attach(name)  # the launcher removed its segment


if __name__ == "__main__":
    unittest.main(verbosity=int(os.environ.get("PYTEST_VERBOSITY", "1")))
