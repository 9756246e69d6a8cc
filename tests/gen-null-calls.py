#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes tests/gen/null_calls.c: a test that calls every function of the
public API with NULL arguments (issue 24).

The functions are every name of lib/libshmcfg.sym that
include/shmcfg.h declares, and the header's public static inline functions;
an export the header does not declare stops the generation, so a new export
is covered as soon as it is declared. Each function is called in a child
process (a crash or a hang is reported, not suffered):

  - once with valid arguments of each type (the test's segment, snapshot,
    transaction, patcher, history entry, schema, values, buffers);
  - once more for each pointer parameter, with that one NULL.

The rule checked (include/shmcfg.h.in, "Errors"): no call crashes or hangs;
a NULL object (the handle, snapshot, transaction, patcher, history entry,
schema or cluster apply a call works on) is an error, as the function
reports errors: a negative int, a NULL pointer, 0 for a count, generation or
revision; a NULL `ret` out-pointer of a function returning int is a negative
int. Other NULL pointers are either refused or documented as optional.

usage: gen-null-calls.py include/shmcfg.h lib/libshmcfg.sym OUT.c
"""
import os
import re
import sys

# The objects a call works on: (C type, fixture expression, pointer-to-it out).
OBJECTS = {
    "shmcfg": "fx.h",
    "shmcfg_snapshot": "fx.snap",
    "shmcfg_txn": "fx.txn",
    "shmcfg_patcher": "fx.pat",
    "shmcfg_history_entry": "fx.hist",
    "shmcfg_schema": "fx.schema",
    "shmcfg_cluster_apply": "fx.capply",
}
# Segment names: the test's segment, except where the call would create,
# grow, unlink or reap one (then a name no segment has; the parent unlinks
# it at the end).
ABSENT_NAME = {"shmcfg_create", "shmcfg_resize", "shmcfg_unlink", "shmcfg_orphans"}
# Valid text for `const char *` parameters, by parameter name.
TEXT = {"text": '"1"', "json": '"{}"', "label": '"x"', "who": '"x"', "v": '"s"',
        "path": "fx.schema_path"}
# Pointers whose valid value is NULL (optional by the documentation).
OPTIONAL = {"prev", "userdata", "expect_schema_hash", "comment"}
# Functions whose NULL object is a no-op by design rather than an error:
# the releasers (free(NULL)), and calls whose every answer is valid.
NULL_OK = {"shmcfg_close", "shmcfg_closep", "shmcfg_schema_free", "shmcfg_snapshot_release",
           "shmcfg_txn_abort", "shmcfg_patcher_free", "shmcfg_history_free",
           "shmcfg_value_clear", "shmcfg_set_log", "shmcfg_set_commit_timeout",
           "shmcfg_set_heap_growth", "shmcfg_schema_hash", "shmcfg_snapshot_hash",
           "shmcfg_cluster_apply_abort"}


def strip_comments(s):
    return re.sub(r"/\*.*?\*/|//[^\n]*", " ", s, flags=re.S)


def split_params(p):
    out, depth, cur = [], 0, ""
    for ch in p:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return [] if out == ["void"] else out


def declarations(header):
    """name -> (return type, [param text]) of every function declared
    SHMCFG_EXPORT, and of the public static inline ones."""
    src = strip_comments(header)
    found = {}
    pat = re.compile(r"(SHMCFG_EXPORT|static inline)\s+([^;{}()]*?)\b(shmcfg_\w+)\s*\(")
    for m in pat.finditer(src):
        kind, ret, name = m.group(1), " ".join(m.group(2).split()), m.group(3)
        if kind == "static inline" and name.startswith("shmcfg__"):
            continue  # the inline read's internals: not the API
        i, depth = m.end(), 1
        while depth:
            depth += {"(": 1, ")": -1}.get(src[i], 0)
            i += 1
        params = split_params(src[m.end():i - 1])
        ret = re.sub(r"\b(SHMCFG_\w+|__attribute__\s*\(\(.*?\)\))\s*", "", ret).strip()
        found[name] = (ret, params)
    return found


def param_parts(p):
    """(type without the name, name, is pointer, is function pointer)"""
    if "(*" in p:
        name = re.search(r"\(\s*\*\s*(\w+)", p).group(1)
        return p, name, True, True
    m = re.match(r"(.*?)(\w+)\s*(\[[^\]]*\])?$", p)
    typ, name, arr = m.group(1).strip(), m.group(2), m.group(3)
    if arr:
        typ += " *"
    typ = " ".join(typ.replace("*", " * ").split()).replace("* *", "**")
    return typ, name, "*" in typ, typ.rstrip("*").strip().endswith("_fn")


def base(typ):
    return typ.replace("const", "").replace("*", "").strip()


def valid_arg(fn, typ, name, params, idx):
    """A valid argument for parameter idx of fn, as a C expression."""
    b, stars = base(typ), typ.count("*")
    if typ.rstrip("*").strip().endswith("_fn") or "(*" in typ:
        return "NULL"
    if name in OPTIONAL:
        return "NULL"
    if b in OBJECTS and stars == 1:
        return OBJECTS[b]
    if b in OBJECTS and stars == 2:
        return "&fx.h" if name == "h" else f"(({b} **)fx.out)"
    if b == "char" and stars == 1:
        if name == "name":
            return "fx.absent" if fn in ABSENT_NAME else "fx.name"
        return TEXT.get(name, '"x"')
    if b == "shmcfg_value" and "const" in typ:
        return "&fx.val"
    if stars:
        return f"(({typ})fx.out)"
    if b == "size_t" and name == "len" and idx:
        prev_typ, prev_name, _, _ = param_parts(params[idx - 1])
        if base(prev_typ) == "char":
            return f"strlen({valid_arg(fn, prev_typ, prev_name, params, idx - 1)})"
    if b == "shmcfg_opt":  # an option of the type a typed call reads
        return {"bool": "fx.opt_bool", "float": "fx.opt_float"}.get(fn.rsplit("_", 1)[-1], "fx.opt")
    return f"({typ})0"


def error_check(ret):
    """C condition on `r` that says the call reported an error, or None."""
    if ret == "int":
        return "r < 0"
    if ret.endswith("*"):
        return "r == NULL"
    if ret in ("uint64_t", "uint32_t", "size_t"):
        return "r == 0"
    return None  # void, bool: nothing to tell


def gen_function(fn, ret, params):
    parsed = [param_parts(p) for p in params]
    cases = [(None, "valid arguments")]
    for i, (typ, name, is_ptr, is_fn) in enumerate(parsed):
        if not is_ptr or is_fn:
            continue
        if valid_arg(fn, typ, name, params, i) == "NULL":
            continue
        obj = base(typ) in OBJECTS and (typ.count("*") == 1 or name == "h")
        must_err = (obj and fn not in NULL_OK) or (name == "ret" and ret == "int")
        cases.append((i, f"NULL {name}", must_err))
    lines = []
    for case in cases:
        null_at = case[0]
        args = ", ".join("NULL" if i == null_at else valid_arg(fn, t, n, params, i)
                         for i, (t, n, _, _) in enumerate(parsed))
        check = error_check(ret) if null_at is not None and case[2] else None
        what = case[1]
        body = f"{fn}({args});"
        if ret == "void":
            call = f"{body} return 0;"
        elif check:
            call = f"{ret} r = {body} return ({check}) ? 0 : 2;"
        else:
            call = f"{ret} r = {body} (void)r; return 0;"
        cname = f"c_{fn}_{len(lines)}"
        lines.append((cname, call, what, bool(check)))
    return lines


def with_includes(path):
    """The header's text with its #include "shmcfg/X.h" lines replaced by
    those files (beside it, or in $top_srcdir/include in a VPATH build)."""
    dirs = [os.path.dirname(path), os.path.join(os.environ.get("top_srcdir", "."), "include")]

    def expand(m):
        for d in dirs:
            p = os.path.join(d, m.group(1))
            if os.path.exists(p):
                return open(p).read()
        sys.exit(f"gen-null-calls.py: {m.group(1)}, included by {path}, not found in {dirs}")
    return re.sub(r'^#include "(shmcfg/[a-z_]+\.h)".*$', expand, open(path).read(), flags=re.M)


def main():
    header_path, exports_path, out_path = sys.argv[1:4]
    decls = declarations(with_includes(header_path))
    script = re.sub(r"/\*.*?\*/", "", open(exports_path).read(), flags=re.S)
    exports = [n for body in re.findall(r"\{\s*global:(.*?)\}", script, re.S)
               for n in re.findall(r"([A-Za-z_][A-Za-z0-9_]*)\s*;", body)]
    missing = [e for e in exports if e not in decls and not e.startswith("shmcfg__tls_")]
    if missing:
        sys.exit(f"gen-null-calls.py: {header_path} declares no function {', '.join(missing)} "
                 f"of {exports_path} (a variable must start with shmcfg__tls_, or teach this script)")
    names = sorted(set(e for e in exports if e in decls) |
                   set(n for n in decls if not n.startswith("shmcfg__")))
    out = ["/* Generated by tests/gen-null-calls.py from include/shmcfg.h and",
           " * lib/libshmcfg.sym: do not edit. */",
           '#include "null_calls.h"', ""]
    table = []
    for fn in names:
        ret, params = decls[fn]
        for cname, call, what, must_err in gen_function(fn, ret, params):
            out.append(f"static int {cname}(void) {{ {call} }}")
            table.append(f'\t{{"{fn}", "{what}", {int(must_err)}, {cname}}},')
    out.append("")
    out.append("const struct null_call null_calls[] = {")
    out += table
    out.append("\t{NULL, NULL, 0, NULL},")
    out.append("};")
    with open(out_path + ".tmp", "w") as f:
        f.write("\n".join(out) + "\n")
    import os
    os.replace(out_path + ".tmp", out_path)


if __name__ == "__main__":
    main()
