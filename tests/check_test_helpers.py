#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Every helper a shell test calls exists.

The shell tests run under /bin/sh without `set -e`: a call of a helper that
no lib defines (a typo, a helper of another lib) prints "not found" and the
script goes on, so the check it was meant to make silently never runs. This
reads tests/**/*.sh and reports each command word with an underscore (the
helpers' names: t_out, wait_log, new_seg, ...) that is neither a function
defined in some test script or lib nor a program on PATH. Here-documents (C
and Python sources) and quoted text spanning lines are skipped.

Run by make check with top_srcdir set; exit 0 or 1, TAP output.
"""
import glob
import os
import re
import shutil
import sys

src = os.environ.get("top_srcdir", ".")
scripts = sorted(glob.glob(os.path.join(src, "tests", "**", "*.sh"), recursive=True))

DEF = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*\(\)", re.M)
# a command word at the start of a line, after a keyword or operator
CALL = re.compile(r"^\s*(?:(?:!|if|then|else|elif|do|while|until|\|\||&&)\s+)*([a-z][a-z0-9]*_[a-z0-9_]+)(?:\s|$)")
HEREDOC = re.compile(r"<<(-?)\s*['\"]?([A-Za-z_]+)['\"]?")


def quote_after(line, q):
    """The quote open at the end of line (None, "'" or '"'), given the one
    open at its start: a sketch of sh's quoting, enough for these scripts."""
    i = 0
    while i < len(line):
        c = line[i]
        if q is None:
            if c == "#" and (i == 0 or line[i - 1] in " \t;"):
                break
            if c in "'\"":
                q = c
            elif c == "\\":
                i += 1
        elif q == "'":
            if c == "'":
                q = None
        else:
            if c == "\\":
                i += 1
            elif c == '"':
                q = None
        i += 1
    return q


def calls(path):
    """(line number, word) of each helper-like command word outside
    here-documents and quoted text that spans lines (Python checks)."""
    end = None
    q = None
    for n, line in enumerate(open(path, encoding="utf-8"), 1):
        if end is not None:
            if line.strip() == end:
                end = None
            continue
        if q is None:
            m = HEREDOC.search(line)
            if m:
                end = m.group(2)
            c = CALL.match(line)
            if c:
                yield n, c.group(1)
        q = quote_after(line, q)


defined = set()
for s in scripts:
    defined.update(DEF.findall(open(s, encoding="utf-8").read()))

missing = []
for s in scripts:
    for n, word in calls(s):
        if word not in defined and not shutil.which(word):
            missing.append("%s:%d: %s is no function of the tests and no program" % (os.path.relpath(s, src), n, word))

print("1..2")
print("%s 1 - found the shell tests and their helpers (%d scripts, %d functions)" %
      ("ok" if len(scripts) > 20 and "t_out" in defined else "not ok", len(scripts), len(defined)))
print("%s 2 - every helper-like command word is defined" % ("not ok" if missing else "ok"))
for m in missing:
    print("#   " + m)
sys.exit(1 if missing or len(scripts) <= 20 else 0)
