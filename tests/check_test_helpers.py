#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Every helper a shell test calls exists where it is called.

The shell tests run under /bin/sh without `set -e`: a call of a helper that
no lib defines (a typo, a helper of a lib the script does not source)
prints "not found" and the script goes on, so the check it was meant to
make silently never runs. This reads tests/**/*.sh and reports each command
word with an underscore (the helpers' names: t_out, wait_log, new_seg, ...)
that is neither a function of the script or of the files it sources (`. FILE`,
followed) nor a program on PATH.

A command word is the first word of a command: at the start of a line,
after ; && || | ( { $( or a backquote, after if/then/else/elif/do/while/
until/!, after VAR=value assignments, and the command that a helper runs
(`pass DESC CMD...`, `t_out DESC WANT CMD...`, `until_true SECONDS CMD...`,
and so on: WRAPPERS). Here-documents (C and Python sources), quoted text
that spans lines (Python checks) and $((arithmetic)) are skipped.

Run by make check with top_srcdir set; exit 0 or 1, TAP output.
"""
import glob
import os
import re
import shutil
import sys

src = os.path.abspath(os.environ.get("top_srcdir", "."))
scripts = sorted(glob.glob(os.path.join(src, "tests", "**", "*.sh"), recursive=True))

# helpers that run a command: how many arguments come before it
WRAPPERS = {"pass": 1, "run": 0, "t_rc": 2, "t_out": 2, "t_err": 3, "t_errmatch": 3, "t_usage": 1,
            "t_json": 2, "until_true": 1, "timeout": 1, "env": 0, "exec": 0, "nice": 0, "setsid": 0}
KEYWORDS = {"if", "then", "else", "elif", "do", "while", "until", "!", "time", "{", "}", "(", ")"}
DEF = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*\(\)", re.M)
SOURCE = re.compile(r"^\s*\.\s+(\S.*?)\s*$")
HEREDOC = re.compile(r"<<(?!<)(-?)\s*['\"]?([A-Za-z_][A-Za-z0-9_]*)['\"]?")
ARITH = re.compile(r"\$\(\((?:[^()]|\([^()]*\))*\)\)")
HELPERISH = re.compile(r"^[a-z][a-z0-9]*_[a-z0-9_]+$")


def sourced(script, line):
    """The file a `. FILE` line of script names, or None."""
    m = SOURCE.match(line)
    if not m:
        return None
    t = re.search(r"tests/[\w/.-]+\.sh", m.group(1))
    if t:
        return os.path.join(src, t.group(0))
    b = re.search(r"([\w.-]+\.sh)\W*$", m.group(1))
    return os.path.join(os.path.dirname(script), b.group(1)) if b else None


def segments(line, q):
    """The top-level text of line split into commands, given the quote q
    open at its start, and the quote open at its end. Text inside quotes is
    dropped but for $( ... ) in double quotes, which starts a command."""
    out, cur, i, outer = [], [], 0, []  # outer: the quotes a $( ... ) is in
    while i < len(line):
        c = line[i]
        if q == "'":
            if c == "'":
                q = None
            i += 1
            continue
        if c == "\\":
            i += 2
            continue
        if line.startswith("$(", i) or c == "`":
            out.append("".join(cur))
            cur = []
            if c != "`":
                outer.append(q)
                q = None
            i += 1 if c == "`" else 2
            continue
        if c == ")" and q is None and outer:
            out.append("".join(cur))
            cur = []
            q = outer.pop()
            i += 1
            continue
        if q == '"':
            if c == '"':
                q = None
                cur.append(" Q ")  # a quoted word: a word, not a command name
            i += 1
            continue
        if c == "#" and (i == 0 or line[i - 1] in " \t;|&("):
            break
        if c in "'\"":
            q = c
        elif c in ";|&(){}\n":
            out.append("".join(cur))
            cur = []
            if c in "({}":
                out.append(c)
        else:
            cur.append(c)
        i += 1
    out.append("".join(cur))
    return out, q


def unquoted_lt(line, q):
    """line with each '<' inside quotes (q open at its start) made a blank."""
    out = []
    for i, c in enumerate(line):
        inside = q is not None
        if q is None and c in "'\"" and (i == 0 or line[i - 1] != "\\"):
            q = c
        elif q is not None and c == q and (q == "'" or line[i - 1] != "\\"):
            q = None
        out.append(" " if inside and c == "<" else c)
    return "".join(out)


def command_words(words):
    """The command words of one command's words, following WRAPPERS."""
    i = 0
    while i < len(words):
        w = words[i]
        if w in KEYWORDS or re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", w):
            i += 1
            continue
        yield w
        if w not in WRAPPERS:
            return
        i += 1 + WRAPPERS[w]


def calls(path, unended):
    """(line number, word) of each command word with an underscore; a
    here-document that never ends goes to unended."""
    end, q, start = None, None, 0
    for n, line in enumerate(open(path, encoding="utf-8"), 1):
        if end is not None:
            if line.strip() == end:
                end = None
            continue
        line = ARITH.sub(" 0 ", line)
        m = HEREDOC.search(unquoted_lt(line, q))  # a << outside quotes only
        parts, q = segments(line, q)
        if m:
            end, start = m.group(2), n
        for part in parts:
            for w in command_words(part.split()):
                if HELPERISH.match(w):
                    yield n, w
    if end is not None:
        unended.append("%s:%d: a here-document that never ends (%s)" % (os.path.relpath(path, src), start, end))


def functions(path, seen):
    """The functions script path defines, and those of the files it sources."""
    if path in seen or not os.path.exists(path):
        return set()
    seen.add(path)
    text = open(path, encoding="utf-8").read()
    found = set(DEF.findall(text))
    for line in text.splitlines():
        f = sourced(path, line)
        if f:
            found |= functions(f, seen)
    return found


missing, nfound = [], 0
for s in scripts:
    defined = functions(s, set())
    for n, word in calls(s, missing):
        nfound += 1
        if word not in defined and not shutil.which(word):
            missing.append("%s:%d: %s is no function of this script or what it sources, and no program" %
                           (os.path.relpath(s, src), n, word))

print("1..2")
print("%s 1 - found the shell tests and their helpers' calls (%d scripts, %d calls)" %
      ("ok" if len(scripts) > 20 and nfound > 100 else "not ok", len(scripts), nfound))
print("%s 2 - every helper called is defined where it is called" % ("not ok" if missing else "ok"))
for m in missing:
    print("#   " + m)
sys.exit(1 if missing or len(scripts) <= 20 or nfound <= 100 else 0)
