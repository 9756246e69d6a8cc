#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""examples/trainer.py when something goes wrong under it (issue 23, item 6):
a worker killed with SIGKILL makes the launcher stop the others and exit
non-zero within 5 s, naming the rank, without a traceback; a segment
replaced during the run (shmctl create --force) is followed by the workers,
and the launcher's final check compares them with the new segment, not with
its own retired handle (no false MISMATCH). Real processes, real signals;
every wait is on a line of the trainer's output, bounded. Run by
`make check` (exit status), or by hand from a built tree:

    python3 tests/test_trainer_failures.py [-v]

The setup (the package, the library, shmctl) is tests/test_python.py's.
"""

import json
import os
import sys

if __name__ == "__main__" and os.environ.get("SHMCFG_SANITIZERS"):
    # as tests/test_python.py: ctypes cannot load an ASan-built library into
    # an uninstrumented python. 77: automake's SKIP.
    print("# skipped: libshmcfg is built with sanitizers", file=sys.stderr)
    sys.exit(77)

import re
import signal
import subprocess
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from linejob import LineJob  # noqa: E402
from test_python import SHMCTL, TRAINER, segname, shmcfg  # noqa: E402

# The promise: the launcher exits within 5 s of a rank's death. It sees the
# death at once (it waits on the processes' sentinels), so 5 s leaves room
# for a busy machine (make -j16 check on 2 cores).
KILL_S = 5
# Bounds for what must happen (the start of the workers...); only a failure
# waits that long.
EVENT_S = 60


class Trainer(LineJob):
    """examples/trainer.py running; its output read line by line."""

    what = "the trainer"

    def __init__(self, test, *args):
        super().__init__(test, [sys.executable, TRAINER] + list(args))

    def stop(self):
        """Cleanup: a trainer still running is killed, with its workers."""
        pids = set()
        for line in list(self.lines):
            m = re.fullmatch(r"launcher: worker pids ([\d ]+)", line)
            if m:
                pids = {int(x) for x in m.group(1).split()}
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()
        for pid in pids:
            if running(pid):
                os.kill(pid, signal.SIGKILL)
        for t in self.readers:
            t.join(10)
        for f in (self.p.stdout, self.p.stderr):
            f.close()


def running(pid):
    """Whether process `pid` exists and is no zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def step_lines(job, workers, generation, rest=""):
    """Once every worker printed it: the lines of each worker reporting
    `generation` (followed by `rest`, a regex)."""
    return job.wait_for(rf"worker (\d+): step \d+: generation {generation}, {rest}.*", EVENT_S,
                        workers)


class TestTrainerFailures(unittest.TestCase):
    def segment(self):
        name = segname("trainerfail")
        self.addCleanup(shmcfg.unlink, name, missing_ok=True)
        return name

    def test_sigkill_of_a_worker(self):
        """A worker killed with SIGKILL: the launcher names it, stops the
        others and exits 1 within KILL_S seconds, without a traceback."""
        workers, victim = 4, 2
        name = self.segment()
        job = Trainer(self, "--workers", str(workers), "--steps", "100000", "--segment", name)
        m = job.wait_for(r"launcher: worker pids ([\d ]+)", EVENT_S)[0]
        pids = [int(x) for x in m.group(1).split()]
        self.assertEqual(len(pids), workers, job.output())
        step_lines(job, workers, 1)  # every worker attached and runs its steps
        t0 = time.monotonic()
        os.kill(pids[victim], signal.SIGKILL)
        try:
            rc = job.finish(EVENT_S)
        except subprocess.TimeoutExpired:
            self.fail(f"the launcher still runs {EVENT_S} s after the SIGKILL of worker "
                      f"{victim}\n{job.output()}")
        took = time.monotonic() - t0
        print(f"# the launcher exited {took:.2f} s after the SIGKILL of worker {victim}",
              file=sys.stderr)
        out = job.output()
        self.assertEqual(rc, 1, out)
        self.assertLess(took, KILL_S, out)
        self.assertIn(f"launcher: rank {victim} (pid {pids[victim]}) was killed by SIGKILL; "
                      f"stopping the other ranks", job.err, out)
        self.assertFalse([ln for ln in job.err if "Traceback" in ln], out)
        for r, pid in enumerate(pids):
            self.assertFalse(running(pid), f"worker {r} (pid {pid}) still runs\n{out}")
        with self.assertRaises(FileNotFoundError):
            shmcfg.attach(name)  # the launcher removed its segment

    @unittest.skipUnless(SHMCTL, "tools/shmctl is not built")
    def test_replaced_segment(self):
        """shmctl set, then shmctl create --force during the run: the workers
        follow the new segment by themselves (the library does, with the
        values kept), a change to it reaches them, and the launcher finds
        them in agreement with it, not with its own handle of the replaced
        segment: no false MISMATCH."""
        workers = 2
        name = self.segment()
        # 100 steps of 50 ms: the run lasts 5 s, time for two shmctl runs
        job = Trainer(self, "--workers", str(workers), "--steps", "100", "--step-ms", "50",
                      "--segment", name)
        step_lines(job, workers, 1)
        shmctl("set", name, "torch.compiler.config.cache_key_tag=before")
        step_lines(job, workers, 2, "recompile_limit=8, cache_key_tag='before'")
        _, err = shmctl("create", "--force", name)
        self.assertIn("they follow the new segment by themselves", err)
        shmctl("set", name, "torch.compiler.config.cache_key_tag=after")
        job.wait_for(r"worker \d+: step \d+: generation \d+, recompile_limit=8, cache_key_tag='after'.*",
                     EVENT_S, workers)
        new = shmctl("hash", name)[0].strip()
        gen = json.loads(shmctl("stat", name, "--json")[0])["generation"]
        rc = job.finish()
        out = job.output()
        self.assertEqual(rc, 0, out)
        self.assertNotIn("MISMATCH", out)
        self.assertIn("launcher: the segment was replaced during the run: comparing with the "
                      "new one", job.lines, out)
        self.assertIn(f"launcher: all {workers} workers agree: generation {gen}, config hash {new}",
                      job.lines, out)
        self.assertFalse([ln for ln in job.err if "Traceback" in ln], out)


def shmctl(*args):
    p = subprocess.run([SHMCTL] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    if p.returncode != 0:
        raise AssertionError(f"shmctl {' '.join(args)}: exit {p.returncode}: {p.stderr}")
    return p.stdout, p.stderr


if __name__ == "__main__":
    unittest.main(verbosity=int(os.environ.get("PYTEST_VERBOSITY", "1")))
