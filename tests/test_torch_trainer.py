#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""examples/torch_trainer.py under the real torchrun: 4 ranks (gloo, CPU)
training a torch.compile'd model, one configuration in a shmcfg segment.

- every rank finishes on the same generation and config hash (exit 0);
- a `shmctl set` during the run is adopted by every rank at the same step,
  and a segment replaced during the run (`shmctl create --force`) is
  followed, again by all ranks at one step;
- a rank killed with SIGKILL ends the job: torchrun exits non-zero within
  KILL_BOUND_S seconds, naming the rank;
- a rank that fails writes its torchrun error file whole, even when
  torchrun's SIGTERM comes while it writes (without torchrun: the example's
  entry point in a child, held inside the write).

Run by `make regtest` (exit status; 77, a skip, when torch is missing), or
by hand from a built tree:

    python3 tests/test_torch_trainer.py [-v]

Skipped when `import torch` fails in this python, unless
SHMCFG_REQUIRE_TORCH=1 (then it is a failure); skipped when libshmcfg is
built with sanitizers. The setup (the package, the library, shmctl) is
tests/test_python.py's. Each test waits on lines the ranks print, never on
a sleep; the segments it makes are removed.
"""

import os
import sys

if __name__ == "__main__" and os.environ.get("SHMCFG_SANITIZERS"):
    # as tests/test_python.py: ctypes cannot load an ASan-built library into
    # an uninstrumented python. 77: automake's SKIP.
    print("# skipped: libshmcfg is built with sanitizers", file=sys.stderr)
    sys.exit(77)

import glob
import json
import re
import resource
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from linejob import LineJob  # noqa: E402
from test_python import SHMCTL, SRCDIR, segname, shmcfg  # noqa: E402

TRAINER = os.path.join(SRCDIR, "examples", "torch_trainer.py")
SCHEMA = os.path.join(SRCDIR, "examples", "torch_trainer.yaml")
RANKS = 4
# Bounds, in seconds, for what must happen; only a failure waits that long.
# Four ranks importing torch and compiling on two busy cores take 20-40 s.
START_S = 240
EVENT_S = 120
KILL_BOUND_S = 60

_torch_problem = []


def torch_problem():
    """Why torch cannot run here (None when it can): `import torch` and the
    gloo backend, checked once, in a child (it costs seconds and memory)."""
    if not _torch_problem:
        p = subprocess.run([sys.executable, "-c",
                            "import torch, torch.distributed as d\n"
                            "assert d.is_available() and d.is_gloo_available(), 'no gloo backend'"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True)
        last = (p.stdout.strip().splitlines() or ["?"])[-1]
        _torch_problem.append(None if p.returncode == 0 else
                              f"`import torch` fails in {sys.executable}: {last}")
    return _torch_problem[0]


def shmctl(*args):
    p = subprocess.run([SHMCTL] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    if p.returncode != 0:
        raise AssertionError(f"shmctl {' '.join(args)}: exit {p.returncode}: {p.stderr}")
    return p.stdout, p.stderr


def allow_cores():
    """In the job's process, before exec: core dumps up to the hard limit."""
    hard = resource.getrlimit(resource.RLIMIT_CORE)[1]
    resource.setrlimit(resource.RLIMIT_CORE, (hard, hard))


def native_stacks(directory, seen, cores=2):
    """Every thread's native stack in the core files in directory (the first
    `cores` of them), by gdb; "" when there is none. `seen`: what each core
    gave before (output() is called more than once)."""
    found = sorted(f for f in os.listdir(directory) if f == "core" or f.startswith("core."))
    gdb = shutil.which("gdb")
    out = []
    for f in found[:cores]:
        if f in seen:
            out.append(seen[f])
            continue
        if not gdb:
            out.append(f"\n{f}: a core dump, and no gdb to read it")
            continue
        p = subprocess.run([gdb, "-q", "-batch", "-ex", "info threads", "-ex", "thread apply all bt 25",
                            sys.executable, os.path.join(directory, f)],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                           timeout=300)
        lines = [ln for ln in p.stdout.splitlines() if not ln.startswith(("[New LWP", "warning:"))]
        seen[f] = f"\nthe native stacks in core dump {f}:\n" + "\n".join(lines[:300])
        out.append(seen[f])
    return "".join(out)


class Job(LineJob):
    """torchrun running the trainer; its output read line by line."""

    what = "the job"
    # enough for a rank's fatal error: faulthandler's dump of every thread,
    # then torchrun's report (a CI run once showed only the report's tail)
    err_tail = 400

    def __init__(self, test, name, steps, *args):
        env = dict(os.environ)
        env["TORCHINDUCTOR_CACHE_DIR"] = test.cachedir
        # torchrun's own directory (torchelastic_*, its workers' error
        # files) too: it never removes it, and the test's cleanup does
        env["TMPDIR"] = test.cachedir
        env.pop("TORCHELASTIC_ERROR_FILE", None)
        self.cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(RANKS),
                    "--standalone", TRAINER, "--segment", name, "--steps", str(steps)] + list(args)
        self.started = time.monotonic()
        # in a directory of the test's, with core dumps allowed: a rank that
        # dies of a signal leaves a core there (where the kernel's
        # core_pattern is a plain file name), whose native stacks output()
        # adds (gdb): faulthandler shows only the Python ones
        self.coredir = test.cachedir
        self.cores_seen = {}
        super().__init__(test, self.cmd, env=env, cwd=self.coredir, preexec_fn=allow_cores)

    def output(self):
        return super().output() + native_stacks(self.coredir, self.cores_seen)

    def worker_pids(self):
        return {int(m.group(1)): int(m.group(2)) for m in
                self.wait_for(r"rank (\d+): pid (\d+), segment .*", START_S, RANKS)}

    def stop(self):
        """Cleanup of a job that is still running: torchrun stops its workers
        on SIGTERM; SIGKILL after a bound, to it and to the workers it
        started (in sessions of their own)."""
        if self.p.poll() is None:
            pids = {int(m.group(1)) for m in map(re.compile(r"rank \d+: pid (\d+),.*").fullmatch,
                                                 list(self.lines)) if m}
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(40)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
                for pid in pids:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
        for t in self.readers:
            t.join(10)
        for f in (self.p.stdout, self.p.stderr):
            f.close()


def rank_lines(job, generation, count=RANKS):
    """{rank: (step, hash prefix, lr)} of the ranks' lines applying `generation`
    (the last of each rank, once every rank printed one)."""
    ms = job.wait_for(rf"rank (\d+): step (\d+): generation {generation}, config hash (\w+)\.\.\., "
                      rf"lr ([\d.]+), recompile_limit \d+", EVENT_S, count)
    return {int(m.group(1)): (int(m.group(2)), m.group(3), float(m.group(4))) for m in ms}


@unittest.skipUnless(SHMCTL, "tools/shmctl is not built")
class TestTorchTrainer(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        why = torch_problem()
        if why:
            if os.environ.get("SHMCFG_REQUIRE_TORCH") == "1":
                raise AssertionError(f"SHMCFG_REQUIRE_TORCH=1, but {why}")
            raise unittest.SkipTest(f"{why} (SHMCFG_REQUIRE_TORCH=1 makes this a failure)")

    def setUp(self):
        self.cachedir = tempfile.mkdtemp(prefix="torch-trainer-test.")
        self.addCleanup(shutil.rmtree, self.cachedir, True)

    def segment(self):
        name = segname("torchtrainer")
        self.addCleanup(shmcfg.unlink, name, missing_ok=True)
        return name

    def finished(self, job, steps):
        """{rank: (generation, hash)} of the ranks' final lines."""
        ms = job.wait_for(rf"rank (\d+): done: {steps} steps, generation (\d+), config hash (\w+)",
                          EVENT_S, RANKS)
        return {int(m.group(1)): (int(m.group(2)), m.group(3)) for m in ms}

    def test_agree_without_changes(self):
        """No segment yet: rank 0 creates it, the others attach it; all end
        on generation 1 and its hash, which `shmctl hash` prints."""
        name = self.segment()
        job = Job(self, name, 3)
        rc = job.finish(START_S)
        out = job.output()
        self.assertEqual(rc, 0, out)
        self.assertIn(f"rank 0: pid {job.worker_pids()[0]}, segment '{name}' created", out)
        for r in range(1, RANKS):
            self.assertRegex(out, rf"rank {r}: pid \d+, segment '{name}' attached")
        self.assertRegex(out, r"step 0: generation 1: app.config.lr 0.1, .*"
                              r"torch._dynamo.config.recompile_limit 8, config hash")
        done = self.finished(job, 3)
        self.assertEqual(sorted(done), list(range(RANKS)), out)
        want = shmctl("hash", name)[0].strip()
        self.assertEqual(set(done.values()), {(1, want)}, out)
        # torchrun kept its files in the test's directory, which the
        # cleanup removes, not in the system's (where each run left one)
        self.assertTrue(glob.glob(os.path.join(self.cachedir, "torchelastic_*")), os.listdir(self.cachedir))

    def test_change_then_replacement(self):
        """A segment made by the operator (attached, not created, by rank
        0). While the job runs: `shmctl set` of the learning rate, adopted by
        every rank at one step; then the segment replaced, followed by every
        rank at one step; then a change in the new segment."""
        name = self.segment()
        shmctl("create", name, "--schema", SCHEMA)
        shmctl("set", name, "app.config.pause_ms=200")  # generation 2: time to act
        steps = 150  # at 200 ms a step, 30 s at least: the test acts within a few
        job = Job(self, name, steps)
        pids = job.worker_pids()
        self.assertIn(f"rank 0: pid {pids[0]}, segment '{name}' attached", job.output())
        rank_lines(job, 2)  # every rank runs on generation 2

        # (b) a change, adopted by every rank at the same step
        out, _ = shmctl("set", name, "app.config.lr=0.05")
        self.assertIn("generation 3", out)
        [m] = job.wait_for(r"step (\d+): generation 3: app.config.lr 0.1 -> 0.05")
        s3 = int(m.group(1))
        h3 = shmctl("hash", name)[0].strip()
        got = rank_lines(job, 3)
        self.assertEqual(got, {r: (s3, h3[:12], 0.05) for r in range(RANKS)}, job.output())

        # (d) the segment replaced (same schema, --fresh: the defaults;
        # generations go on: 4), followed by every rank at the same step
        _, err = shmctl("create", "--force", "--fresh", name, "--schema", SCHEMA)
        m = re.search(rf"{name} is attached by pids ([\d, ]+):", err)
        self.assertIsNotNone(m, err)
        self.assertTrue(set(pids.values()) <= {int(p) for p in m.group(1).split(", ")}, err)
        h1 = shmctl("hash", name)[0].strip()
        [m] = job.wait_for(r"step (\d+): segment replaced, following generation 4")
        s1 = int(m.group(1))
        self.assertGreater(s1, s3)
        job.wait_for(rf"step {s1}: generation 4: app.config.lr 0.05 -> 0.1")
        job.wait_for(rf"step {s1}: generation 4: app.config.pause_ms 200 -> 100")
        got = rank_lines(job, 4)
        self.assertEqual(got, {r: (s1, h1[:12], 0.1) for r in range(RANKS)}, job.output())

        # a change in the new segment (and the rest of the steps at full speed)
        out, _ = shmctl("set", name, "app.config.pause_ms=0",
                        "torch._dynamo.config.recompile_limit=4")
        self.assertIn("generation 5", out)
        [m] = job.wait_for(r"step (\d+): generation 5: torch._dynamo.config.recompile_limit 8 -> 4")
        s2 = int(m.group(1))
        self.assertGreater(s2, s1)
        self.assertRegex(job.output(), rf"step {s2}: generation 5: app.config.pause_ms 100 -> 0")
        # torch itself reads the segment's value: the ranks print what
        # torch._dynamo.config.recompile_limit gave
        job.wait_for(rf"rank \d+: step {s2}: generation 5, config hash {h1[:12]}\.\.\., lr 0.1, "
                     rf"recompile_limit 4", EVENT_S, RANKS)

        rc = job.finish(EVENT_S)
        self.assertEqual(rc, 0, job.output())
        done = self.finished(job, steps)
        self.assertEqual(set(done.values()), {(5, shmctl("hash", name)[0].strip())}, job.output())
        # one report per change, no other
        reports = [ln for ln in job.lines if re.fullmatch(r"step \d+: (generation|segment) .*", ln)]
        self.assertEqual(len(reports), 7, "\n".join(reports))

    def test_sigkill_of_a_rank(self):
        """A rank killed with SIGKILL: torchrun stops the others and exits
        non-zero, naming the rank and the signal, within KILL_BOUND_S."""
        name = self.segment()
        job = Job(self, name, 100000)
        pids = job.worker_pids()
        rank_lines(job, 1)
        job.wait_for(r"step 0: loss .*")  # the ranks train: past their first collectives
        victim = 2
        t0 = time.monotonic()
        os.kill(pids[victim], signal.SIGKILL)
        try:
            rc = job.finish(KILL_BOUND_S)
        except subprocess.TimeoutExpired:
            self.fail(f"torchrun still runs {KILL_BOUND_S} s after the SIGKILL of rank {victim}\n"
                      f"{job.output()}")
        took = time.monotonic() - t0
        out = job.output()
        err = "\n".join(job.err)
        print(f"# torchrun exited {took:.1f} s after the SIGKILL of rank {victim}", file=sys.stderr)
        self.assertNotEqual(rc, 0, out)
        self.assertRegex(err, r"torch_trainer.py FAILED", out)
        # torchrun's failure report names the rank, its pid and the signal
        self.assertRegex(err, rf"rank\s*: {victim} \(local_rank: {victim}\)\n\s*exitcode\s*: -9 "
                              rf"\(pid: {pids[victim]}\)", out)
        self.assertIn(f"Signal 9 (SIGKILL) received by PID {pids[victim]}", err, out)
        # and the other ranks are gone
        for r, pid in pids.items():
            self.assertFalse(running(pid), f"rank {r} (pid {pid}) still runs\n{out}")


    def test_error_file_whole_under_sigterm(self):
        """A failing rank writes its torchrun error file whole even when
        torchrun's SIGTERM (it stops the other ranks when one fails) comes
        while @record writes it: torch 2.13's agent dies of a JSONDecodeError
        on a file cut short, in place of its failure report. A rank whose
        main() raised is held inside the error file's json.dump, after the
        file was opened (truncated), until this test has sent SIGTERM."""
        errfile = os.path.join(self.cachedir, "error.json")
        child = subprocess.Popen(
            [sys.executable, "-c",
             "import json, sys\n"
             f"sys.path.insert(0, {os.path.dirname(TRAINER)!r})\n"
             "import torch_trainer as tt\n"
             "real_dump = json.dump\n"
             "def held_dump(obj, fp, *a, **k):\n"
             "    print('writing', flush=True)\n"
             "    sys.stdin.readline()  # the test's SIGTERM came first\n"
             "    real_dump(obj, fp, *a, **k)\n"
             "json.dump = held_dump\n"
             "def failing(argv=None):\n"
             "    raise RuntimeError('a peer is gone')\n"
             "tt.main = failing\n"
             "tt.recorded_main()\n"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            universal_newlines=True, env=dict(os.environ, TORCHELASTIC_ERROR_FILE=errfile))
        self.addCleanup(child.kill)
        line = child.stdout.readline()
        self.assertEqual(line, "writing\n", child.stderr.read() if not line else line)
        child.send_signal(signal.SIGTERM)
        _, err = child.communicate("go\n", timeout=EVENT_S)
        # the exception's exit, not SIGTERM's, and a file torchrun can read
        self.assertEqual(child.returncode, 1, err)
        with open(errfile) as f:
            data = json.load(f)
        self.assertIn("a peer is gone", json.dumps(data), data)


def running(pid):
    """Whether process `pid` exists and is no zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


if __name__ == "__main__":
    prog = unittest.main(verbosity=int(os.environ.get("PYTEST_VERBOSITY", "1")), exit=False)
    r = prog.result
    if not r.wasSuccessful():
        sys.exit(1)
    # every test skipped (no torch): automake's SKIP, not a PASS
    # (a skip of setUpClass counts one skip and no test run)
    if r.skipped and len(r.skipped) >= r.testsRun:
        print(f"# skipped: {r.skipped[0][1]}", file=sys.stderr)
        sys.exit(77)
