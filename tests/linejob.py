# SPDX-License-Identifier: MIT
"""A process whose output a test reads line by line as it comes, and waits
on (tests/test_trainer_failures.py, tests/test_torch_trainer.py)."""
import re
import subprocess
import threading
import time


class LineJob:
    """The process `cmd` running; its stdout and stderr lines in `lines` and
    `err` as they come. `what` names it in failures."""

    what = "the process"
    err_tail = None  # how many lines of stderr output() shows (None: all)

    def __init__(self, test, cmd, **popen):
        self.lines, self.err = [], []
        self.cond = threading.Condition()
        self.p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  universal_newlines=True, **popen)
        self.readers = [threading.Thread(target=self._read, args=(f, dst), daemon=True)
                        for f, dst in ((self.p.stdout, self.lines), (self.p.stderr, self.err))]
        for t in self.readers:
            t.start()
        test.addCleanup(self.stop)

    def _read(self, f, dst):
        for line in f:
            with self.cond:
                dst.append(line.rstrip("\n"))
                self.cond.notify_all()
        with self.cond:
            self.cond.notify_all()

    def output(self):
        with self.cond:
            err = self.err if self.err_tail is None else self.err[-self.err_tail:]
            tail = "" if self.err_tail is None else f" (last {self.err_tail} lines)"
            return ("stdout:\n" + "\n".join(self.lines) + f"\nstderr{tail}:\n" + "\n".join(err)
                    + self._fatal())

    def _fatal(self, lines=40):
        """Python's fatal-error reports in stderr (faulthandler's: the signal,
        then each thread's stack; `lines` lines of each), repeated last, where
        a report cut to its tail (a CI log) still shows them. Called under
        self.cond."""
        out = []
        for i, line in enumerate(self.err):
            if "Fatal Python error" in line:
                out += self.err[i:i + lines] + ["..."]
        return "\nfatal errors in stderr:\n" + "\n".join(out) if out else ""

    def wait_for(self, pattern, timeout=60, count=1):
        """The matches of `pattern` (a regex matching whole lines of stdout)
        once there are `count` of them; fails when the process ends or
        `timeout` passes first."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                found = [m for m in map(rx.fullmatch, self.lines) if m]
                if len(found) >= count:
                    return found
                if self.p.poll() is not None and not any(t.is_alive() for t in self.readers):
                    raise AssertionError(f"{self.what} ended (exit {self.p.returncode}) before "
                                         f"{count} lines /{pattern}/\n{self.output()}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no {count} lines /{pattern}/ within {timeout} s\n"
                                         f"{self.output()}")
                self.cond.wait(min(left, 1.0))

    def finish(self, timeout=60):
        """The exit status, once the process ended and its output is read."""
        self.p.wait(timeout)
        for t in self.readers:
            t.join(10)
        return self.p.returncode

    def stop(self):
        """Cleanup (a subclass stops what the process started)."""
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()
