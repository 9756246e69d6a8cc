#!/usr/bin/env python3
"""lib/ by concern, no circles: checks the library's objects.

1. No circular dependencies between the files of lib/: file A depends on
   file B when A's object refers to a symbol that B's object defines (nm).
   A cycle is reported with the symbols that make each edge.
2. lib/internal.h's index is true: every function declared under a
   "/* name.c ... */" heading is defined in lib/name.c (or name.h).
3. No file of lib/ is longer than LIMIT lines (the issue asks for ~600).

Run by make check with top_builddir/top_srcdir set; exit 0 or 1, TAP output.
"""
import os
import re
import subprocess
import sys

LIMIT = 650

build = os.environ.get("top_builddir", ".")
src = os.environ.get("top_srcdir", ".")
objdir = os.path.join(build, "lib", ".libs")


def objects():
    """{file stem: object path}: the test copy's objects (the same sources,
    with the fault points compiled in), else the installed library's."""
    out = {}
    names = sorted(os.listdir(objdir))
    prefix = "libshmcfg_test_la-" if any(n.startswith("libshmcfg_test_la-") for n in names) else "libshmcfg_la-"
    for name in names:
        m = re.fullmatch(re.escape(prefix) + r"(.+)\.o", name)
        # objects of sources that no longer exist are left-overs of a build
        if m and os.path.exists(os.path.join(src, "lib", m.group(1) + ".c")):
            out[m.group(1)] = os.path.join(objdir, name)
    return out


def symbols(path):
    defined, undefined = set(), set()
    text = subprocess.run(["nm", path], check=True, capture_output=True, text=True).stdout
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "U":
            undefined.add(parts[1])
        elif len(parts) == 3 and parts[1] in "TDBRVWG" and parts[1].isupper():
            defined.add(parts[2])
    return defined, undefined


def cycles(graph):
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main():
    results = []
    objs = objects()
    if not objs:
        print("1..0 # SKIP no library objects in %s" % objdir)
        return 0
    syms = {f: symbols(p) for f, p in objs.items()}
    owner = {}
    for f, (d, _) in syms.items():
        for s in d:
            owner[s] = f
    graph = {f: set() for f in syms}
    why = {}
    for f, (_, u) in syms.items():
        for s in u:
            g = owner.get(s)
            if g and g != f:
                graph[f].add(g)
                why.setdefault((f, g), []).append(s)
    found = cycles(graph)
    detail = []
    for comp in found:
        for a in comp:
            for b in comp:
                if b in graph[a]:
                    detail.append("%s.c -> %s.c (%s)" % (a, b, ", ".join(sorted(why[(a, b)])[:4])))
    results.append(("no circular dependencies between lib files", not found, detail))

    # the index of lib/internal.h and lib/commit.h
    header = "\n".join(open(os.path.join(src, "lib", h)).read() for h in ("internal.h", "commit.h"))
    wrong = []
    section = None
    for line in header.splitlines():
        m = re.match(r"/\* ([a-z_]+)\.[ch][ :]", line.strip() + " ")
        if m:
            section = m.group(1)
            continue
        m = re.match(r"^[a-z].*?\b(shmcfg__[a-z0-9_]+)\(", line)
        if m and section:
            name = m.group(1)
            where = owner.get(name)
            if where is None:
                hdr = os.path.join(src, "lib", section + ".h")
                if os.path.exists(hdr) and name in open(hdr).read():
                    continue
                # macros and inline helpers of internal.h itself
                if re.search(r"static inline[^;{]*\b%s\(" % name, header):
                    continue
                wrong.append("%s is declared under %s.c but defined nowhere" % (name, section))
            elif where != section:
                wrong.append("%s is declared under %s.c but defined in %s.c" % (name, section, where))
    results.append(("the index of lib/internal.h and lib/commit.h names the file that defines each function", not wrong, wrong))

    long_files = []
    libdir = os.path.join(src, "lib")
    for name in sorted(os.listdir(libdir)):
        if name.endswith(".c") or name.endswith(".h"):
            n = sum(1 for _ in open(os.path.join(libdir, name)))
            if n > LIMIT and name != "default_schema.c":
                long_files.append("lib/%s: %d lines" % (name, n))
    results.append(("no file of lib/ is over %d lines" % LIMIT, not long_files, long_files))

    design = open(os.path.join(src, "doc", "design.md")).read()
    missing = ["lib/%s" % n for n in sorted(os.listdir(libdir))
               if (n.endswith(".c") or n.endswith(".h")) and "`lib/%s`" % n not in design]
    results.append(("doc/design.md's file table names every lib file", not missing, missing))

    # the layering: a file uses only files above it in design.md's table
    order = {}
    for m in re.finditer(r"`lib/([a-z_]+)\.c`", design[design.find("## Files"):]):
        order.setdefault(m.group(1), len(order))
    upward = ["%s.c uses %s.c (%s), which the table lists below it" % (a, b, ", ".join(sorted(why[(a, b)])[:3]))
              for a in sorted(graph) for b in sorted(graph[a])
              if a in order and b in order and order[b] > order[a]]
    results.append(("each lib file uses only the files above it in doc/design.md's table", not upward, upward))

    print("1..%d" % len(results))
    bad = 0
    for i, (what, ok, lines) in enumerate(results, 1):
        print("%s %d - %s" % ("ok" if ok else "not ok", i, what))
        for l in lines:
            print("#   " + l)
        bad += not ok
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
