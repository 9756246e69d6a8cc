#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The examples of README.md, examples/README.md and tools/shmctl.1 do what
they show (make check: README.md, tools/shmctl.1 and the C examples; make
regtest: examples/README.md, with --examples, tests/readme_examples.py).

Shell examples. In README.md and examples/README.md, a code block (indented
or fenced) whose first line starts with "$ " is a session: every line that
starts with "$ " is a command (continued on the next lines while a quote is
open or the line ends with a backslash), and the lines after it, up to the
next command or the end of the block, are what it prints: its standard
output, then its standard error. In tools/shmctl.1, the same holds for the
.nf/.fi blocks of EXAMPLES. In what a command prints (the same rules in
the three documents):

- a line "..." stands for any number of lines (none included);
- "..." inside a line stands for any text in that line (a generation, a
  time, a pid, a hash: "config hash 24b6dc0466ee..." checks the hash's first
  12 digits, whatever follows them).

A comment right before a block changes how it is run: "<!-- example:
OPTIONS -->" in the Markdown files, '.\\" example: OPTIONS' in the man
page, options separated by ";" (an unknown one is an error):

- "skip: REASON": the block is not run (REASON says why; it stays in the
  comment, for the reader of the source);
- "any order": the lines printed may come in any order (processes that
  print concurrently): every expected line must match a printed line of its
  own, and a line "..." anywhere allows any other lines (a background
  command's output is compared so, all of it, if any of its blocks says
  so);
- "background": the block's one command starts, and runs on while the
  blocks after it run, as in a first terminal while the next blocks are
  typed in a second one. Before going on, the test waits (BACKGROUND_S at
  most, polling) until what it printed so far (stdout and stderr as they
  came) matches the block's lines followed by anything;
- "output": the block (no "$ ") is more of what the background command
  prints: the test waits, as above, until it printed what every block of it
  so far shows. At the end of the document, or at the next "background"
  block, the test waits (BACKGROUND_S at most) for the command to end and
  compares all it printed with all its blocks show;
- "setup: COMMAND": COMMAND runs first (it must exit 0; what it prints is
  not checked): what a skipped block before would have done, e.g. create
  the segment that a torchrun job creates.

Each document's sessions run in order, as a user would type them: one shell
(bash -c, in a process group of its own, killed when it ends or after 30 s:
nothing a command starts outlives it) per command, in an empty directory,
with the built shmctl, shmcfg-sync and shmcfg-import first on PATH, python/
on PYTHONPATH, no TORCH_* or SHMCFG_* variable nor SHMCTL, and a private
/dev/shm (a mount namespace of our own, so that the examples' segment names,
"job", "demo", "trainer", are theirs, and whatever they leave there goes
with it; the test also empties it after each document). The Markdown files
run "from a built source tree": their directory has examples/ and python/
of the source and tools/ and lib/ of the build (symbolic links), so that
"python3 examples/trainer.py" and "tools/shmctl" run as written, in a
VPATH build too. A command's exit status is not checked: what it prints is.

Not run, each marked skip with its reason: README.md's blocks that need a
second terminal's commit without showing it, PyTorch, a cluster or etcd;
shmctl.1's "watch"; examples/README.md's torchrun job and its "kill -9"
(PyTorch, four ranks for a minute: tests/test_torch_trainer.py, make
regtest, runs them) and trainer.py's "kill -9" of a worker (it needs the pid
a run printed: tests/test_trainer_failures.py, make check, kills one). The
blocks of examples/README.md that show what the torchrun job prints, not a
command, are not compared either (their hashes are: the operator's session
there prints them).

C examples. Every ```c block of README.md with a main(), and every such
.nf block of the EXAMPLES of doc/shmcfg.3, is compiled with -Wall -Wextra
-Werror against the built library, and run (after `shmctl create job`): it
must exit 0.

On a mismatch the test prints the command, what was expected and what it
printed, and exits 1. Updating the documents after a change of shmctl's
output: run `python3 tests/readme.py --show` from the build tree, which
prints what every command printed (a background command's, all of it, when
it ended), and paste it (with "..." for the parts that vary).
"""

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SRC = os.path.abspath(os.environ.get("top_srcdir") or os.path.join(os.path.dirname(__file__), ".."))
BUILD = os.path.abspath(os.environ.get("top_builddir") or SRC)
SHOW = "--show" in sys.argv
# examples/README.md alone (make regtest: its trainer runs take their
# time); without it, README.md, tools/shmctl.1 and the C examples (make check)
EXAMPLES = "--examples" in sys.argv
MARK_MD = re.compile(r"^<!--\s*example:\s*(.*?)\s*(-->|$)")
MARK_MAN = re.compile(r'^\.\\"\s*example:\s*(.*)$')
# how long a background command may take to print what a block shows, or to end
BACKGROUND_S = 60


NS_ARG = "--private-shm-of="


def in_private_shm():
    """Re-run this script in a mount namespace with its own /dev/shm. The
    child is told the parent's namespace, and mounts only where it differs:
    never over the /dev/shm of the machine."""
    mine = os.readlink("/proc/self/ns/mnt")
    for arg in sys.argv[1:]:
        if arg.startswith(NS_ARG):
            if arg[len(NS_ARG):] == mine:
                print("FAIL: not in a mount namespace of our own")
                sys.exit(99)
            sys.argv.remove(arg)
            return
    unshare = shutil.which("unshare")
    if not unshare:
        print("SKIP: unshare(1) is missing (util-linux)")
        sys.exit(77)
    flags = ["-m"] if os.geteuid() == 0 else ["-r", "-m"]
    probe = subprocess.run([unshare] + flags + ["true"], capture_output=True)
    if probe.returncode != 0:
        print("SKIP: cannot make a mount namespace:", probe.stderr.decode().strip())
        sys.exit(77)
    r = subprocess.run([unshare] + flags + ["--propagation", "private", sys.executable,
                                            os.path.abspath(__file__), NS_ARG + mine] +
                       sys.argv[1:])
    sys.exit(r.returncode)


def mount_private_shm():
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=1777", "tmpfs", "/dev/shm"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        print("SKIP: cannot mount a tmpfs on /dev/shm:", r.stderr.strip())
        sys.exit(77)


def complete(cmd):
    """Whether a command's text is complete (no open quote, no trailing \\)."""
    if cmd.endswith("\\"):
        return False
    try:
        shlex.split(cmd, comments=True)
    except ValueError:
        return False
    return True


MARKS = ("skip", "any order", "background", "output", "setup")


def marks(text):
    """The options of a marker ("any order; background"): {name: value or
    True}. "skip" and "setup" take the rest of the marker (a reason, a
    command, which may hold a ";"). ValueError names an option this script
    does not know."""
    opts = {}
    while text.strip():
        part, _, rest = text.strip().partition(";")
        for k in MARKS:
            if part == k or part.startswith((k + ":", k + " ")):
                if k in ("skip", "setup"):
                    part, rest = text.strip(), ""
                opts[k] = part[len(k):].lstrip(": ").strip() or True
                break
        else:
            raise ValueError(f"unknown example marker {part!r} (known: {', '.join(MARKS)})")
        text = rest
    return opts


def sessions(blocks):
    """[(line, [(line, command, [expected lines])], options)] of blocks
    [(line, [text lines], options)]; an "output" block is one entry whose
    command is None."""
    out = []
    for lineno, lines, opts in blocks:
        if "output" in opts:
            expect = list(lines)
            while expect and expect[-1] == "":
                expect.pop()
            out.append((lineno, [(lineno, None, expect)], opts))
            continue
        if not lines or not lines[0].startswith("$ "):
            continue
        cmds = []
        i = 0
        while i < len(lines):
            at = lineno + i
            cmd = lines[i][2:]
            while not complete(cmd) and i + 1 < len(lines):
                i += 1
                cmd += "\n" + lines[i]
            i += 1
            expect = []
            while i < len(lines) and not lines[i].startswith("$ "):
                expect.append(lines[i])
                i += 1
            while expect and expect[-1] == "":
                expect.pop()
            cmds.append((at, cmd, expect))
        out.append((lineno, cmds, opts))
    return out


def markdown_blocks(text):
    """[(first line number, lines, options)] of the code blocks not marked
    skip, and the ```c blocks separately."""
    blocks, cblocks = [], []
    lines = text.split("\n")
    i = 0
    opts = {}
    while i < len(lines):
        line = lines[i]
        m = MARK_MD.match(line)
        if m:
            opts = marks(m.group(1))
            i += 1
            continue
        if line.startswith("```"):
            lang = line[3:].strip()
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            body = lines[i + 1:j]
            if lang == "c":
                cblocks.append((i + 2, body))
            elif "skip" not in opts:
                blocks.append((i + 2, body, opts))
            opts = {}
            i = j + 1
            continue
        if line.startswith("    ") and (i == 0 or lines[i - 1].strip() == "" or
                                         MARK_MD.match(lines[i - 1])):
            j = i
            while j < len(lines) and (lines[j].startswith("    ") or
                                      (lines[j].strip() == "" and j + 1 < len(lines)
                                       and lines[j + 1].startswith("    "))):
                j += 1
            if "skip" not in opts:
                blocks.append((i + 1, [l[4:] for l in lines[i:j]], opts))
            opts = {}
            i = j
            continue
        if line.strip():
            opts = {}
        i += 1
    return blocks, cblocks


ROFF = [("\\-", "-"), ("\\(aq", "'"), ("\\(dq", '"'), ("\\(em", "--"), ("\\e", "\\"),
        ("\\&", ""), ("\\ ", " ")]


def unroff(line):
    out = ""
    i = 0
    while i < len(line):
        for a, b in ROFF:
            if line.startswith(a, i):
                out += b
                i += len(a)
                break
        else:
            out += line[i]
            i += 1
    return out


def man_blocks(text):
    """The .nf/.fi blocks of the EXAMPLES section, not marked skip, with
    their options."""
    blocks = []
    lines = text.split("\n")
    in_examples = False
    opts = {}
    i = 0
    while i < len(lines):
        line = lines[i]
        m = MARK_MAN.match(line)
        if line.startswith(".SH"):
            in_examples = line.split(None, 1)[1:] == ["EXAMPLES"]
        elif in_examples and m:
            opts = marks(m.group(1))
        elif in_examples and line.startswith(".nf"):
            j = i + 1
            while j < len(lines) and not lines[j].startswith(".fi"):
                j += 1
            if "skip" not in opts:
                blocks.append((i + 2, [unroff(l) for l in lines[i + 1:j]], opts))
            opts = {}
            i = j
        i += 1
    return blocks


def line_re(expect):
    """An expected line as a regular expression ("..." any text)."""
    return re.compile("\\A" + ".*".join(re.escape(p) for p in expect.split("...")) + "\\Z")


def matches(expect, got):
    """Whether the lines got match the expected lines, in order ("..."
    wildcards)."""
    if not expect:
        return not got
    if expect[0] == "...":
        return any(matches(expect[1:], got[k:]) for k in range(len(got) + 1))
    if not got:
        return False
    return line_re(expect[0]).match(got[0]) is not None and matches(expect[1:], got[1:])


def matches_any_order(expect, got):
    """Whether the lines got match the expected lines in some order: each
    expected line a line of its own; other lines only if a line "..." is
    expected."""
    pats = [line_re(e) for e in expect if e != "..."]
    if "..." not in expect and len(pats) != len(got):
        return False
    owner = {}  # printed line -> the expected line it stands for

    def place(i, seen):
        for j, g in enumerate(got):
            if j not in seen and pats[i].match(g):
                seen.add(j)
                if j not in owner or place(owner[j], seen):
                    owner[j] = i
                    return True
        return False
    return all(place(i, set()) for i in range(len(pats)))


def mismatch(doc, lineno, cmd, expect, got_lines, how):
    """The report of a command whose output does not match: what was
    expected, what it printed, and the difference, line by line: "- " an
    expected line that no printed line matches, "+ " a printed line that no
    expected line matches (where a line "..." is expected, some are fine)."""
    pats = [line_re(e) for e in expect if e != "..."]
    missing = [e for e in expect if e != "..." and not any(line_re(e).match(g) for g in got_lines)]
    extra = [g for g in got_lines if not any(p.match(g) for p in pats)]
    diff = "".join(f"    - {l}\n" for l in missing) + "".join(f"    + {l}\n" for l in extra)
    return (f"{doc}:{lineno}: $ {cmd}\n  expected:\n" +
            "".join(f"    {l}\n" for l in expect) + "  printed:\n" +
            "".join(f"    {l}\n" for l in got_lines) + f"  ({how})\n" +
            "  difference (- expected, not printed; + printed, not expected" +
            (", which \"...\" may allow" if "..." in expect else "") + "):\n" +
            (diff or "    (every line matches one: the order differs, or a line repeats)\n"))


def environment(work):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TORCH", "SHMCFG_")) and k not in ("LD_PRELOAD", "SHMCTL")}
    path = [os.path.join(BUILD, "tools"), os.path.join(SRC, "tools")]
    env["PATH"] = os.pathsep.join(path + [env.get("PATH", "/usr/bin:/bin")])
    env["PYTHONPATH"] = os.path.join(SRC, "python")
    env["NO_COLOR"] = "1"
    env["HOME"] = work
    env["LC_ALL"] = "C.UTF-8"
    # an in-tree build's library, for the Python package
    env["SHMCFG_LIBRARY"] = os.path.join(BUILD, "lib", ".libs", "libshmcfg.so.3")
    return env


class Background:
    """A command of a block marked "background": it runs on (in its own
    process group, its output, stdout and stderr as they come, in a file)
    while the blocks after it run. expect: what its blocks show so far."""

    def __init__(self, doc, lineno, cmd, cwd, env):
        self.doc, self.lineno, self.cmd = doc, lineno, cmd
        self.expect, self.any_order, self.failed = [], False, False
        # O_APPEND, and read with pread: the command's processes share this
        # file description, so a seek of ours would move where they write
        self.out = tempfile.TemporaryFile(mode="a+b")
        self.proc = subprocess.Popen(["bash", "-c", cmd], cwd=cwd, env=env,
                                     stdin=subprocess.DEVNULL, stdout=self.out,
                                     stderr=subprocess.STDOUT, start_new_session=True)

    def lines(self):
        """The complete lines it printed so far."""
        fd = self.out.fileno()
        text = os.pread(fd, os.fstat(fd).st_size, 0).decode(errors="replace")
        text = text[:text.rfind("\n") + 1].rstrip("\n")
        return text.split("\n") if text else []

    def fits(self, ended):
        """Whether what it printed matches what its blocks show; until it
        ended, followed by anything."""
        expect = self.expect if ended else self.expect + ["..."]
        return (matches_any_order if self.any_order else matches)(expect, self.lines())

    def show(self, lineno, expect, any_order, failures):
        """A block shows more of its output: wait until it printed that
        (BACKGROUND_S at most); False, and a failure, if it did not."""
        self.expect += expect
        self.any_order = self.any_order or any_order
        if self.failed:
            return False
        deadline = time.monotonic() + BACKGROUND_S
        while not self.fits(False):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                if self.fits(False):  # it printed that, and ended, since
                    break
                how = (f"it ended with exit status {self.proc.returncode}"
                       if self.proc.poll() is not None else f"still running after {BACKGROUND_S} s")
                failures.append(mismatch(self.doc, self.lineno,
                                         self.cmd + "    (in the background)",
                                         self.expect + ["..."], self.lines(),
                                         f"by the block of line {lineno}: {how}"))
                self.failed = True
                self.stop()
                return False
            time.sleep(0.05)
        return True

    def end(self, failures):
        """Wait for it to end (BACKGROUND_S at most), then compare all it
        printed with all its blocks show."""
        try:
            self.proc.wait(BACKGROUND_S)
            how = f"exit status {self.proc.returncode}"
        except subprocess.TimeoutExpired:
            how = f"still running after {BACKGROUND_S} s: killed"
        self.stop()
        got = self.lines()
        if SHOW:
            print(f"{self.doc}:{self.lineno}: $ {self.cmd}    (in the background)" +
                  "".join("\n" + l for l in got))
        if not self.failed and not self.fits(True):
            failures.append(mismatch(self.doc, self.lineno, self.cmd + "    (in the background)",
                                     self.expect, got, how))

    def stop(self):
        """Kill what is left of its process group, and reap it."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()


def run(cmd, cwd, env, timeout=30):
    """Run a command (bash -c) in a process group of its own: its
    CompletedProcess; None if it still ran after `timeout` seconds (then
    the whole group is killed: nothing it started outlives the test)."""
    p = subprocess.Popen(["bash", "-c", cmd], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        out = err = None
    try:
        os.killpg(p.pid, signal.SIGKILL)  # what it left running
    except ProcessLookupError:
        pass
    if out is None:
        p.communicate()
        return None
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


def source_tree(work):
    """Make work look like a built source tree (for examples/README.md):
    examples/ and python/ of the source, tools/ and lib/ of the build."""
    for name, top in (("examples", SRC), ("python", SRC), ("tools", BUILD), ("lib", BUILD)):
        os.symlink(os.path.join(top, name), os.path.join(work, name))


def run_sessions(doc, found, failures, tree=False):
    work = tempfile.mkdtemp(prefix="shmcfg-readme.")
    env = environment(work)
    bg = None
    if tree:
        source_tree(work)
    try:
        for _, cmds, opts in found:
            if "setup" in opts:
                r = run(opts["setup"], work, env)
                if r is None or r.returncode != 0:
                    failures.append(f"{doc}:{cmds[0][0]}: the setup command {opts['setup']!r} "
                                    f"fails:\n{r and r.stdout}{r and r.stderr}")
            if "output" in opts:
                lineno, _, expect = cmds[0]
                if bg is None:
                    failures.append(f"{doc}:{lineno}: a block marked output, and no command "
                                    "runs in the background")
                else:
                    bg.show(lineno, expect, "any order" in opts, failures)
                continue
            if "background" in opts:
                if bg is not None:
                    bg.end(failures)
                lineno, cmd, expect = cmds[0]
                if len(cmds) != 1:
                    failures.append(f"{doc}:{lineno}: a block marked background has one command")
                bg = Background(doc, lineno, cmd, work, env)
                bg.show(lineno, expect, "any order" in opts, failures)
                continue
            for lineno, cmd, expect in cmds:
                r = run(cmd, work, env)
                if r is None:
                    failures.append(f"{doc}:{lineno}: $ {cmd}\n  still running after 30 s: killed "
                                    "(mark a block that needs another terminal: "
                                    "see tests/readme.py)")
                    continue
                got = (r.stdout + r.stderr).rstrip("\n")
                got_lines = got.split("\n") if got else []
                if SHOW:
                    print(f"{doc}:{lineno}: $ {cmd}" + "".join("\n" + l for l in got_lines))
                fit = matches_any_order if "any order" in opts else matches
                if not fit(expect, got_lines):
                    failures.append(mismatch(doc, lineno, cmd, expect, got_lines,
                                             f"exit status {r.returncode}"))
        if bg is not None:
            bg.end(failures)
            bg = None
    finally:
        if bg is not None:
            bg.stop()
        shutil.rmtree(work, ignore_errors=True)
        for name in os.listdir("/dev/shm"):  # our private /dev/shm
            os.unlink(os.path.join("/dev/shm", name))


def run_c(doc, cblocks, failures):
    cc = shlex.split(os.environ.get("CC") or "cc")
    san = shlex.split(os.environ.get("SHMCFG_SANITIZERS") or "")
    libdir = os.path.join(BUILD, "lib", ".libs")
    env = environment(tempfile.gettempdir())
    n = 0
    for lineno, body, *_ in cblocks:
        if not any(re.match(r"int main\(", l) for l in body):
            continue  # a fragment
        n += 1
        with tempfile.TemporaryDirectory(prefix="shmcfg-readme-c.") as d:
            src = os.path.join(d, "example.c")
            with open(src, "w") as f:
                f.write("\n".join(body) + "\n")
            exe = os.path.join(d, "example")
            r = subprocess.run(cc + san + ["-std=gnu11", "-Wall", "-Wextra", "-Werror",
                                           "-I" + os.path.join(BUILD, "include"),
                                           "-I" + os.path.join(SRC, "include"), src,
                                           "-L" + libdir, "-Wl,-rpath," + libdir, "-lshmcfg",
                                           "-o", exe], capture_output=True, text=True)
            if r.returncode != 0:
                failures.append(f"{doc}:{lineno}: the C example does not compile "
                                f"with -Wall -Wextra -Werror:\n{r.stderr}")
                continue
            subprocess.run(["shmctl", "create", "job", "--force", "--quiet"], env=env, check=True)
            r = subprocess.run([exe], env=env, capture_output=True, text=True, timeout=60)
            subprocess.run(["shmctl", "rm", "job"], env=env, capture_output=True)
            if r.returncode != 0:
                failures.append(f"{doc}:{lineno}: the C example exits {r.returncode}:\n"
                                f"{r.stdout}{r.stderr}")
    if n == 0:
        failures.append(f"{doc}: no C example with a main() found")


def main():
    try:
        check()
    except ValueError as e:  # a marker this script does not know
        print(f"FAIL: {e}")
        sys.exit(1)


def check():
    in_private_shm()
    mount_private_shm()
    failures = []
    # an ASan-built library cannot be loaded by an uninstrumented python3,
    # which the Markdown files' sessions run (the trainers): with sanitizers
    # only shmctl(1)'s sessions and the C examples (built with them) run
    san = bool(os.environ.get("SHMCFG_SANITIZERS"))
    if EXAMPLES and san:
        print("SKIP: examples/README.md runs python3, which cannot load a library built with sanitizers")
        sys.exit(77)
    if EXAMPLES:
        with open(os.path.join(SRC, "examples", "README.md")) as f:
            examples = sessions(markdown_blocks(f.read())[0])
        if not examples:
            failures.append("no shell examples found in examples/README.md")
        run_sessions("examples/README.md", examples, failures, tree=True)
        ncmd, what = sum(len(c) for _, c, _ in examples), "examples/README.md"
    else:
        with open(os.path.join(SRC, "README.md")) as f:
            blocks, cblocks = markdown_blocks(f.read())
        readme = sessions(blocks)
        with open(os.path.join(SRC, "tools", "shmctl.1")) as f:
            man = sessions(man_blocks(f.read()))
        if not readme or not man:
            failures.append("no shell examples found in README.md or tools/shmctl.1")
        if not san:
            run_sessions("README.md", readme, failures, tree=True)
        run_sessions("tools/shmctl.1", man, failures)
        run_c("README.md", cblocks, failures)
        with open(os.path.join(SRC, "doc", "shmcfg.3")) as f:
            run_c("doc/shmcfg.3", man_blocks(f.read()), failures)
        ncmd = sum(len(c) for _, c, _ in readme + man)
        what = "README.md and tools/shmctl.1, and the C examples"
    if failures:
        print(f"{len(failures)} example(s) of {ncmd} commands differ:\n")
        print("\n\n".join(failures))
        sys.exit(1)
    print(f"ok: {ncmd} shell commands and outputs of {what}")

if __name__ == "__main__":
    main()
