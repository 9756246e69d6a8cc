#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""lib/ by concern, no circles: checks the library's objects.

1. No circular dependencies between the files of lib/: file A depends on
   file B when A's object refers to a symbol that B's object defines (nm).
   A cycle is reported with the symbols that make each edge.
2. lib/internal.h's index is true: every function declared under a
   "/* name.c ... */" heading is defined in lib/LAYER/name.c (or name.h).
3. No file of lib/ is longer than LIMIT lines.
4. doc/design.md's table of files names every lib file, and a file uses
   only files listed before it there.
5. The layers: every file of lib/ is in a folder that lib/README.md's table
   of layers lists, and uses only files of its own layer or of the layers
   listed before it.
6. shmctl's files depend one way (tools/shmctl.h): shmctl.c -> the command
   files (shmctl-NAME.c) -> what they share (the *-util.c files and the
   other tools/ files); no command file uses another's.

Run by make check with top_builddir/top_srcdir set; exit 0 or 1, TAP output.
"""
import os
import re
import subprocess
import sys

LIMIT = 650

build = os.environ.get("top_builddir", ".")
src = os.environ.get("top_srcdir", ".")
libdir = os.path.join(src, "lib")


def layers():
    """[layer folder], lowest first, from lib/README.md's table."""
    text = open(os.path.join(libdir, "README.md")).read()
    return re.findall(r"^\| `([a-z]+)/` \|", text, re.M)


def sources():
    """{file name: layer} of every .c and .h under lib/ (one level of folders)."""
    out = {}
    for layer in sorted(os.listdir(libdir)):
        d = os.path.join(libdir, layer)
        if os.path.isdir(d) and not layer.startswith("."):
            for name in sorted(os.listdir(d)):
                if name.endswith(".c") or name.endswith(".h"):
                    out[name] = layer
    return out


def objects():
    """{file stem: object path}: the test copy's objects (the same sources,
    with the fault points compiled in), else the installed library's."""
    out = {}
    srcs = sources()
    for prefix in ("libshmcfg_test_la-", "libshmcfg_la-"):
        for stem, layer in ((n[:-2], l) for n, l in srcs.items() if n.endswith(".c")):
            p = os.path.join(build, "lib", layer, ".libs", prefix + stem + ".o")
            if os.path.exists(p):
                out[stem] = p
        if out:
            return out
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


def tool_layers():
    """Check 6, over the objects of tools/shmctl (tools/shmctl-FILE.o)."""
    what = "shmctl's files depend one way: shmctl.c -> command files -> shared files"
    objs = {}
    tools = os.path.join(build, "tools")
    for name in sorted(os.listdir(tools)) if os.path.isdir(tools) else []:
        if name.startswith("shmctl-") and name.endswith(".o"):
            objs[name[len("shmctl-"):-2] + ".c"] = os.path.join(tools, name)
    if "shmctl.c" not in objs:
        return (what + " (tools not built)", False, ["no tools/shmctl-*.o in " + tools])

    def rank(f):
        if f == "shmctl.c":
            return 0
        if f.startswith("shmctl-") and not f.endswith("-util.c"):
            return 1
        return 2

    syms = {f: symbols(p) for f, p in objs.items()}
    owner = {s: f for f, (d, _) in syms.items() for s in d}
    bad = set()
    graph = {f: set() for f in syms}
    for f, (_, u) in syms.items():
        for s in u:
            g = owner.get(s)
            if g and g != f:
                graph[f].add(g)
                # shared files may use one another, without a circle
                if rank(g) < rank(f) or (rank(g) == rank(f) < 2):
                    bad.add("tools/%s uses tools/%s (%s)" % (f, g, s))
    bad.update("a circle: " + " <-> ".join("tools/" + f for f in comp) for comp in cycles(graph))
    return (what, not bad, sorted(bad)[:20])


def main():
    results = []
    objs = objects()
    if not objs:
        print("1..0 # SKIP no library objects in %s/lib/*/.libs" % build)
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

    srcs = sources()
    # the index of lib/internal.h and lib/slot/slot.h
    header = "\n".join(open(os.path.join(src, "lib", h)).read() for h in ("internal.h", "handle.h", "slot/slot.h"))
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
                hdr = os.path.join(src, "lib", srcs.get(section + ".h", "-"), section + ".h")
                if os.path.exists(hdr) and name in open(hdr).read():
                    continue
                # macros and inline helpers of internal.h itself
                if re.search(r"static inline[^;{]*\b%s\(" % name, header):
                    continue
                wrong.append("%s is declared under %s.c but defined nowhere" % (name, section))
            elif where != section:
                wrong.append("%s is declared under %s.c but defined in %s.c" % (name, section, where))
    results.append(("the index of lib/internal.h and lib/slot/slot.h names the file that defines each function", not wrong, wrong))

    def path(name):
        return "lib/%s/%s" % (srcs[name], name) if name in srcs else "lib/" + name

    long_files = []
    top = sorted(n for n in os.listdir(libdir) if n.endswith(".h"))
    for name in sorted(srcs) + top:
        n = sum(1 for _ in open(os.path.join(src, path(name))))
        if n > LIMIT and name != "default_schema.c":
            long_files.append("%s: %d lines" % (path(name), n))
    results.append(("no file of lib/ is over %d lines" % LIMIT, not long_files, long_files))

    design = open(os.path.join(src, "doc", "design.md")).read()
    missing = [path(n) for n in sorted(srcs) + top if "`%s`" % path(n) not in design]
    results.append(("doc/design.md's file table names every lib file", not missing, missing))

    # the layering: a file uses only files above it in design.md's table
    order = {}
    for m in re.finditer(r"`lib/(?:[a-z]+/)?([a-z_]+)\.c`", design[design.find("## Files"):]):
        order.setdefault(m.group(1), len(order))
    upward = ["%s.c uses %s.c (%s), which the table lists below it" % (a, b, ", ".join(sorted(why[(a, b)])[:3]))
              for a in sorted(graph) for b in sorted(graph[a])
              if a in order and b in order and order[b] > order[a]]
    results.append(("each lib file uses only the files above it in doc/design.md's table", not upward, upward))

    # the layers of lib/README.md
    order = {layer: i for i, layer in enumerate(layers())}
    stray = ["%s: its folder is not a layer of lib/README.md" % path(n) for n in sorted(srcs)
             if srcs[n] not in order]
    stems = {n[:-2]: l for n, l in srcs.items() if n.endswith(".c")}
    back = ["%s (%s) uses %s (%s): %s" % (path(a + ".c"), stems[a], path(b + ".c"), stems[b],
                                          ", ".join(sorted(why[(a, b)])[:3]))
            for a in sorted(graph) for b in sorted(graph[a])
            if stems.get(a) in order and stems.get(b) in order and order[stems[b]] > order[stems[a]]]
    results.append(("each lib file uses only its own layer and the layers before it in lib/README.md",
                    not stray and not back and len(order) > 1, stray + back))

    results.append(tool_layers())

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
