#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The examples of README.md and tools/shmctl.1 do what they show.

Shell examples. In README.md, a code block (indented or fenced) whose first
line starts with "$ " is a session: every line that starts with "$ " is a
command (continued on the next lines while a quote is open or the line ends
with a backslash), and the lines after it, up to the next command or the end
of the block, are what it prints: its standard output, then its standard
error. In tools/shmctl.1, the same holds for the .nf/.fi blocks of EXAMPLES.
In what a command prints:

- a line "..." stands for any number of lines (none included);
- "..." inside a line stands for any text in that line (a generation, a
  time, a pid, a hash);
- a block right after the comment "<!-- example: skip REASON -->" (README)
  or '.\\" example: skip REASON' (man page) is not run: it needs a second
  terminal, a cluster, or minutes.

Each document's sessions run in order, as a user would type them: one shell
(bash -c) per command, in an empty directory, with the built shmctl,
shmcfg-sync and shmcfg-import first on PATH, python/ on PYTHONPATH, no
TORCH_* or SHMCFG_* variable, and a private /dev/shm (a mount namespace of
our own, so that the examples' segment names, "job", "demo", are theirs).
A command's exit status is not checked: what it prints is.

C examples. Every ```c block of README.md with a main(), and every such
.nf block of the EXAMPLES of doc/shmcfg.3, is compiled with -Wall -Wextra
-Werror against the built library, and run (after `shmctl create job`): it
must exit 0.

On a mismatch the test prints the command, what was expected and what it
printed, and exits 1. Updating the README after a change of shmctl's output:
run `python3 tests/readme.py --show` from the build tree, which prints what
every command printed, and paste it (with "..." for the parts that vary).
"""

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

SRC = os.path.abspath(os.environ.get("top_srcdir") or os.path.join(os.path.dirname(__file__), ".."))
BUILD = os.path.abspath(os.environ.get("top_builddir") or SRC)
SHOW = "--show" in sys.argv
SKIP_MD = re.compile(r"<!--\s*example:\s*skip\b")
SKIP_MAN = re.compile(r'^\.\\"\s*example:\s*skip\b')


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


def sessions(blocks):
    """[(line, [(line, command, [expected lines])])] of blocks [(line, [text lines])]."""
    out = []
    for lineno, lines in blocks:
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
        out.append((lineno, cmds))
    return out


def markdown_blocks(text):
    """[(first line number, lines)] of the code blocks not marked skip, and
    the ```c blocks separately."""
    blocks, cblocks = [], []
    lines = text.split("\n")
    i = 0
    skip = False
    while i < len(lines):
        line = lines[i]
        if SKIP_MD.search(line):
            skip = True
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
            elif not skip:
                blocks.append((i + 2, body))
            skip = False
            i = j + 1
            continue
        if line.startswith("    ") and (i == 0 or lines[i - 1].strip() == ""):
            j = i
            while j < len(lines) and (lines[j].startswith("    ") or
                                      (lines[j].strip() == "" and j + 1 < len(lines)
                                       and lines[j + 1].startswith("    "))):
                j += 1
            if not skip:
                blocks.append((i + 1, [l[4:] for l in lines[i:j]]))
            skip = False
            i = j
            continue
        if line.strip():
            skip = False
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
    """The .nf/.fi blocks of the EXAMPLES section, not marked skip."""
    blocks = []
    lines = text.split("\n")
    in_examples = False
    skip = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith(".SH"):
            in_examples = line.split(None, 1)[1:] == ["EXAMPLES"]
        elif in_examples and SKIP_MAN.match(line):
            skip = True
        elif in_examples and line.startswith(".nf"):
            j = i + 1
            while j < len(lines) and not lines[j].startswith(".fi"):
                j += 1
            if not skip:
                blocks.append((i + 2, [unroff(l) for l in lines[i + 1:j]]))
            skip = False
            i = j
        i += 1
    return blocks


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


def environment(work):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TORCH", "SHMCFG_")) and k != "LD_PRELOAD"}
    path = [os.path.join(BUILD, "tools"), os.path.join(SRC, "tools")]
    env["PATH"] = os.pathsep.join(path + [env.get("PATH", "/usr/bin:/bin")])
    env["PYTHONPATH"] = os.path.join(SRC, "python")
    env["NO_COLOR"] = "1"
    env["HOME"] = work
    env["LC_ALL"] = "C.UTF-8"
    # an in-tree build's library, for the Python package
    env["SHMCFG_LIBRARY"] = os.path.join(BUILD, "lib", ".libs", "libshmcfg.so.3")
    return env


def run_sessions(doc, found, failures):
    work = tempfile.mkdtemp(prefix="shmcfg-readme.")
    env = environment(work)
    try:
        for _, cmds in found:
            for lineno, cmd, expect in cmds:
                try:
                    r = subprocess.run(["bash", "-c", cmd], cwd=work, env=env,
                                       capture_output=True, text=True, timeout=30)
                except subprocess.TimeoutExpired:
                    failures.append(f"{doc}:{lineno}: $ {cmd}\n  still running after 30 s "
                                    "(mark a block that needs another terminal: see tests/readme.py)")
                    continue
                got = (r.stdout + r.stderr).rstrip("\n")
                got_lines = got.split("\n") if got else []
                if SHOW:
                    print(f"{doc}:{lineno}: $ {cmd}" + "".join("\n" + l for l in got_lines))
                if not matches(expect, got_lines):
                    failures.append(f"{doc}:{lineno}: $ {cmd}\n  expected:\n" +
                                    "".join(f"    {l}\n" for l in expect) + "  printed:\n" +
                                    "".join(f"    {l}\n" for l in got_lines) +
                                    f"  (exit status {r.returncode})")
    finally:
        shutil.rmtree(work, ignore_errors=True)
        for name in os.listdir("/dev/shm"):  # our private /dev/shm
            os.unlink(os.path.join("/dev/shm", name))


def run_c(doc, cblocks, failures):
    cc = shlex.split(os.environ.get("CC") or "cc")
    san = shlex.split(os.environ.get("SHMCFG_SANITIZERS") or "")
    libdir = os.path.join(BUILD, "lib", ".libs")
    env = environment(tempfile.gettempdir())
    n = 0
    for lineno, body in cblocks:
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
    in_private_shm()
    mount_private_shm()
    failures = []
    with open(os.path.join(SRC, "README.md")) as f:
        blocks, cblocks = markdown_blocks(f.read())
    readme = sessions(blocks)
    with open(os.path.join(SRC, "tools", "shmctl.1")) as f:
        man = sessions(man_blocks(f.read()))
    if not readme or not man:
        failures.append("no shell examples found in README.md or tools/shmctl.1")
    run_sessions("README.md", readme, failures)
    run_sessions("tools/shmctl.1", man, failures)
    run_c("README.md", cblocks, failures)
    with open(os.path.join(SRC, "doc", "shmcfg.3")) as f:
        run_c("doc/shmcfg.3", man_blocks(f.read()), failures)
    ncmd = sum(len(c) for _, c in readme + man)
    if failures:
        print(f"{len(failures)} example(s) of {ncmd} commands and the C examples differ:\n")
        print("\n\n".join(failures))
        sys.exit(1)
    print(f"ok: {ncmd} shell commands of README.md and tools/shmctl.1, and the C examples")


if __name__ == "__main__":
    main()
