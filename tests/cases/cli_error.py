#!/usr/bin/env python3
"""The shmctl error cases of tests/cases/cli-error (tests/cases/README),
run by tests/cases/cli-error.sh; prints TAP.

Each case runs `shmctl ARGS...` (ARGS: the lines of its `args` file, one
argument a line; an empty file: no argument) and
must exit with the status its `expected` file names on its first line
("exit N"), print nothing on stdout, and print on stderr the rest of
`expected`: line by line, where a line "..." stands for any number of lines
and "..." inside a line for any text. In `args` and `expected`:

  $S     a segment of tests/cases/cli-error/segment.yaml, created for the run
  $D     a segment of the embedded default schema, created for the run
  $N     a segment name that does not exist
  $B     a segment name the case must not create
  $CASE  the case's directory (for the files it passes)

and every case must leave $S and $D as they were (generation and config
hash) and create no $B: a failed command changes nothing.
"""

import json
import os
import re
import subprocess
import sys

SRC = os.path.abspath(os.environ.get("top_srcdir") or os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.abspath(os.environ.get("top_builddir") or SRC)
CASES = os.path.join(SRC, "tests", "cases", "cli-error")


def shmctl_command():
    """The shmctl to run, as tests/cli/lib.sh chooses it (SHMCTL may name
    another command, e.g. valgrind and shmctl)."""
    env = dict(os.environ)
    if os.environ.get("SHMCTL"):
        return os.environ["SHMCTL"].split(), env
    real = os.path.join(BUILD, "tools", ".libs", "shmctl")
    if os.access(real, os.X_OK) and os.path.isdir(os.path.join(BUILD, "lib", ".libs")):
        lib = os.path.join(BUILD, "lib", ".libs")
        env["LD_LIBRARY_PATH"] = lib + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
        return [real], env
    return [os.path.join(BUILD, "tools", "shmctl")], env


SHMCTL, ENV = shmctl_command()
for k in list(ENV):  # the env layers of the segments created here
    if k.startswith("TORCH"):
        del ENV[k]
ENV["NO_COLOR"] = "1"


def shmctl(*args):
    return subprocess.run(SHMCTL + list(args), env=ENV, capture_output=True, text=True, timeout=60)


def chomp(text):
    return text[:-1] if text.endswith("\n") else text


def matches(expect, got):
    """Whether the lines got match the expected lines ("..." wildcards)."""
    if not expect:
        return not got
    if expect[0] == "...":
        return any(matches(expect[1:], got[k:]) for k in range(len(got) + 1))
    if not got:
        return False
    pat = "\\A" + ".*".join(re.escape(p) for p in expect[0].split("...")) + "\\Z"
    return re.match(pat, got[0]) is not None and matches(expect[1:], got[1:])


class ShmctlSegment:
    """A segment's generation and config hash read with shmctl hash, where
    the binding cannot load (a library built with sanitizers)."""

    def __init__(self, name):
        self.name = name

    def current(self):
        r = shmctl("hash", self.name, "--json")
        return r.stdout if r.returncode == 0 else "error: " + r.stderr


def attach_all(names):
    """{key: segment} to read each one's generation and config hash: with
    the Python binding of this tree, in this process (not a shmctl per
    case), unless the library is built with sanitizers (ctypes cannot load
    an ASan-built library into an uninstrumented python)."""
    if os.environ.get("SHMCFG_SANITIZERS"):
        return {k: ShmctlSegment(n) for k, n in names.items()}
    os.environ["SHMCFG_LIBRARY"] = os.path.join(BUILD, "lib", ".libs", "libshmcfg.so.3")
    sys.path.insert(0, os.path.join(SRC, "python"))
    import shmcfg
    return {k: shmcfg.attach(n, readonly=True) for k, n in names.items()}


def main():
    pid = os.getpid()
    names = {"$S": f"cases-{pid}-typed", "$D": f"cases-{pid}-default", "$N": f"cases-{pid}-nosuch",
             "$B": f"cases-{pid}-made"}
    cases = sorted(d for d in os.listdir(CASES) if os.path.isdir(os.path.join(CASES, d)))
    if not cases:
        print("1..1\nnot ok 1 - no cases in " + CASES)
        return 1
    failed = 0
    try:
        for seg, how in (("$S", ["--schema", os.path.join(CASES, "segment.yaml"), "--slots", "3", "--no-env"]),
                         ("$D", ["--no-env"])):
            r = shmctl("create", "-q", names[seg], *how)
            if r.returncode:
                print(f"1..0 # SKIP cannot create the segments: {r.stderr.strip()}")
                return 0 if "Permission denied" in r.stderr else 1
        segs = attach_all({s: names[s] for s in ("$S", "$D")})
        before = {s: segs[s].current() for s in segs}
        print(f"1..{len(cases)}")
        for n, case in enumerate(cases, 1):
            d = os.path.join(CASES, case)
            subst = dict(names, **{"$CASE": d})

            def fill(text):
                # $CASE first: no other placeholder is a prefix of it
                for k in sorted(subst, key=len, reverse=True):
                    text = text.replace(k, subst[k])
                return text

            with open(os.path.join(d, "args")) as f:
                text = chomp(f.read())
            args = [fill(a) for a in text.split("\n")] if text else []
            with open(os.path.join(d, "expected")) as f:
                expected = fill(chomp(f.read())).split("\n")
            problems = []
            m = re.fullmatch(r"exit (\d+)", expected[0])
            if not m:
                problems.append("expected: the first line is not 'exit N'")
            r = shmctl(*args)
            err = chomp(r.stderr).split("\n") if r.stderr else []
            if m and r.returncode != int(m.group(1)):
                problems.append(f"exit status {r.returncode}, not {m.group(1)}")
            if r.stdout:
                problems.append("printed on stdout")
            if not matches(expected[1:], err):
                problems.append("stderr differs")
            for s in segs:
                if segs[s].current() != before[s]:
                    problems.append(f"it changed {s}")
                    before[s] = segs[s].current()
            if os.path.exists("/dev/shm/shmcfg." + names["$B"]):
                problems.append("it created $B")
                shmctl("rm", "-f", names["$B"])
            if problems:
                failed = 1
                print(f"not ok {n} - {case}: " + "; ".join(problems))
                print("#   shmctl " + " ".join(args))
                print("#   expected stderr:")
                print("".join(f"#     {l}\n" for l in expected[1:]), end="")
                print(f"#   exit status {r.returncode}; stdout:")
                print("".join(f"#     {l}\n" for l in chomp(r.stdout).split("\n") if r.stdout), end="")
                print("#   stderr:")
                print("".join(f"#     {l}\n" for l in err), end="")
            else:
                print(f"ok {n} - {case}")
    finally:
        for name in names.values():
            shmctl("rm", "-f", name)
    return failed


if __name__ == "__main__":
    sys.exit(main())
