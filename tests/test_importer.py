#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Tests of tools/shmcfg-import, the config-module importer.

Runs the real tool as a subprocess. Standard library only; PyYAML and a C
compiler are used when present (those tests are skipped otherwise). The tool
loads libshmcfg through python/shmcfg: $SHMCFG_LIBRARY, else
$top_builddir/lib/.libs (set for it here), else the source tree's build.

    python3 tests/test_importer.py            # from the repository root
    srcdir=/path/to/repo python3 .../test_importer.py

The seed is looked up as $SHMCFG_SEED, $srcdir/seed/torch_compiler_config.py,
then $srcdir/../shared/seed/torch_compiler_config.py; the tests that need it
are skipped when it is not found.
"""

import inspect
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

if __name__ == "__main__" and os.environ.get("SHMCFG_SANITIZERS"):
    # the tool loads libshmcfg with ctypes, which cannot load an ASan-built
    # library into an uninstrumented python (as tests/test_python.py); the
    # plain build runs these tests. 77: automake's SKIP.
    print("# skipped: libshmcfg is built with sanitizers", file=sys.stderr)
    sys.exit(77)

SRCDIR = os.path.abspath(os.environ.get("srcdir") or
                         os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
TOOL = os.path.join(SRCDIR, "tools", "shmcfg-import")
ALIASED = os.path.join(SRCDIR, "schemas", "torch_dynamo_aliased.yaml")
COMMITTED_YAML = os.path.join(SRCDIR, "schemas", "torch_compiler.yaml")
COMMITTED_C = os.path.join(SRCDIR, "lib", "schema", "default_schema.c")
HEADER = os.path.join(SRCDIR, "include", "shmcfg.h.in")
BUILDDIR = os.path.abspath(os.environ.get("top_builddir") or SRCDIR)
if "SHMCFG_LIBRARY" not in os.environ:
    _built = os.path.join(BUILDDIR, "lib", ".libs", "libshmcfg.so.3")
    if os.path.exists(_built):
        os.environ["SHMCFG_LIBRARY"] = _built  # inherited by the tool
PREFIX = "torch.compiler.config."
DYNAMO = "torch._dynamo.config."


def find_seed():
    cands = [os.environ.get("SHMCFG_SEED"),
             os.path.join(SRCDIR, "seed", "torch_compiler_config.py"),
             os.path.join(SRCDIR, os.pardir, "shared", "seed", "torch_compiler_config.py")]
    for c in cands:
        if c and os.path.isfile(c):
            return c
    return None


SEED = find_seed()
SEED_ARGS = ["--module", "torch.compiler.config", SEED or "", "--merge", ALIASED]
REGEN = ("regenerate with: tools/shmcfg-import --module torch.compiler.config "
         "SEED --merge schemas/torch_dynamo_aliased.yaml [--format c] -o FILE")


def run(*args, cwd=None, timeout=None):
    return subprocess.run([TOOL] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, cwd=cwd, timeout=timeout)


def run_ok(test, *args, cwd=None):
    p = run(*args, cwd=cwd)
    test.assertEqual(p.returncode, 0, p.stderr.decode())
    return p


def options_json(test, *args, cwd=None):
    p = run_ok(test, *(list(args) + ["--format", "json"]), cwd=cwd)
    return json.loads(p.stdout.decode("utf-8")), p.stderr.decode("utf-8")


def by_name(doc):
    return {o["name"]: o for o in doc["options"]}


try:
    import yaml  # noqa: F401  (optional: only to cross-check)
    HAVE_YAML = True
except ImportError:
    HAVE_YAML = False

CC = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc") or shutil.which("clang")


def standin_header(tmp):
    """An internal.h with the schema definitions of include/shmcfg.h.in."""
    with open(HEADER) as f:
        h = f.read()
    pats = [r"typedef enum shmcfg_type \{.*?\} shmcfg_type;",
            r"enum \{[^{}]*SHMCFG_F_NULLABLE[^{}]*\};",
            r"typedef struct shmcfg_optdef \{.*?\} shmcfg_optdef;"]
    parts = []
    for p in pats:
        m = re.search(p, h, re.S)
        if not m:
            return None
        parts.append(m.group(0))
    with open(os.path.join(tmp, "internal.h"), "w") as f:
        f.write("#include <stddef.h>\n#include <stdint.h>\n#include <stdbool.h>\n")
        f.write("\n".join(parts) + "\n")
        f.write("extern const shmcfg_optdef shmcfg__default_opts[];\n"
                "extern const size_t shmcfg__default_nopts;\n")
    return True


DUMP_C = r"""
#include "internal.h"
#include <stdio.h>
static void put(const char *s) { fputs(s ? s : "\x02", stdout); fputc('\x1f', stdout); }
int main(void)
{
	for (size_t i = 0; i < shmcfg__default_nopts; i++) {
		const shmcfg_optdef *d = &shmcfg__default_opts[i];
		printf("%d\x1f%u\x1f", (int)d->type, d->flags);
		put(d->name); put(d->def); put(d->doc); put(d->env_default); put(d->env_force);
		put(d->knob); put(d->alias); put(d->implies); put(d->min); put(d->max);
		put(d->choices); put(d->deprecated);
		fputc('\x1e', stdout);
	}
	return 0;
}
"""
C_FIELDS = ("name", "def", "doc", "env_default", "env_force", "knob", "alias", "implies",
            "min", "max", "choices", "deprecated")
C_TYPES = {1: "bool", 2: "int", 3: "float", 4: "str", 5: "list", 6: "set"}


def compile_and_dump(test, c_text):
    """Compile a generated table against a stand-in header and read it back."""
    if not CC:
        test.skipTest("no C compiler")
    if not os.path.isfile(HEADER):
        test.skipTest("no include/shmcfg.h.in")
    with tempfile.TemporaryDirectory() as tmp:
        if not standin_header(tmp):
            test.skipTest("shmcfg.h.in has no shmcfg_optdef/shmcfg_type/flags to copy")
        with open(os.path.join(tmp, "table.c"), "w") as f:
            f.write(c_text)
        with open(os.path.join(tmp, "main.c"), "w") as f:
            f.write(DUMP_C)
        exe = os.path.join(tmp, "dump")
        p = subprocess.run([CC, "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic",
                            "-I", tmp, "-o", exe, os.path.join(tmp, "table.c"),
                            os.path.join(tmp, "main.c")],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        test.assertEqual(p.returncode, 0, p.stderr.decode())
        out = subprocess.run([exe], stdout=subprocess.PIPE, check=True).stdout
    rows = []
    for rec in out.split(b"\x1e")[:-1]:
        f = rec.split(b"\x1f")
        row = {"type": C_TYPES[int(f[0])], "flags": int(f[1])}
        for k, v in zip(C_FIELDS, f[2:]):
            row[k] = None if v == b"\x02" else v.decode("utf-8")
        rows.append(row)
    return rows


FLAG_BITS = {"nullable": 1, "hash_ignored": 2, "save_ignored": 4, "deprecated": 8,
             "private": 16}


def check_c_against_json(test, rows, opts):
    """Every field of the C table says what the JSON output says."""
    test.assertEqual([r["name"] for r in rows], [o["name"] for o in opts])
    for r, o in zip(rows, opts):
        msg = o["name"]
        test.assertEqual(r["type"], o["type"], msg)
        flags = sum(bit for k, bit in FLAG_BITS.items() if o.get(k))
        test.assertEqual(r["flags"], flags, msg)
        test.assertEqual(r["doc"], o.get("doc"), msg)
        for k in ("knob", "alias", "deprecated"):
            test.assertEqual(r[k], o.get(k), msg)
        for k in ("env_default", "env_force"):
            test.assertEqual(None if r[k] is None else json.loads(r[k]), o.get(k), msg)
        # choices are texts in the C table (a list of names, as the library
        # takes them): ["1", "2"] for an int option
        conv = {"int": int, "float": float}.get(o["type"], str)
        test.assertEqual(None if r["choices"] is None else
                         [conv(c) for c in json.loads(r["choices"])], o.get("choices"), msg)
        if "alias" in o:
            test.assertIsNone(r["def"], msg)
            continue
        d = o["default"]
        text = r["def"]
        if d is None:
            test.assertEqual(text, "none", msg)
        elif isinstance(d, bool):
            test.assertEqual(text, "true" if d else "false", msg)
        elif o["type"] in ("int", "float"):
            test.assertEqual(float(text), float(d), msg)
        else:  # str: a JSON string literal; list/set: a JSON array
            test.assertEqual(json.loads(text), d, msg)


SEED_ORDER = [
    "job_id", "pgo_extra_read_key", "pgo_extra_write_key", "cache_key_tag",
    "force_disable_caches", "dynamic_sources", "unbacked_sources", "force_cudagraph_gc",
    "dynamic_shapes", "assume_static_by_default", "automatic_dynamic_shapes",
    "recompile_limit", "accumulated_recompile_limit", "verbose", "capture_scalar_outputs",
    "capture_dynamic_output_shape_ops", "log_file_name", "fail_on_recompile_limit_hit",
    "allow_unspec_int_on_nn_module", "skip_tensor_guards_with_matching_dict_tags",
    "enable_cpp_symbolic_shape_guards", "wrap_top_frame", "reorderable_logging_functions",
]
ALIASES = SEED_ORDER[8:]
# name: (type, default, env_default, hash_ignored), from doc/design.md
DYNAMO_EXPECT = {
    "dynamic_shapes": ("bool", True, None, False),
    "assume_static_by_default": ("bool", True, None, False),
    "automatic_dynamic_shapes": ("bool", True, None, False),
    "recompile_limit": ("int", 8, None, True),
    "accumulated_recompile_limit": ("int", 256, None, True),
    "verbose": ("bool", False, ["TORCHDYNAMO_VERBOSE"], True),
    "capture_scalar_outputs": ("bool", False, ["TORCHDYNAMO_CAPTURE_SCALAR_OUTPUTS"], False),
    "capture_dynamic_output_shape_ops":
        ("bool", False, ["TORCHDYNAMO_CAPTURE_DYNAMIC_OUTPUT_SHAPE_OPS"], False),
    "log_file_name": ("str", None, None, True),
    "fail_on_recompile_limit_hit": ("bool", False, None, True),
    "allow_unspec_int_on_nn_module": ("bool", False, None, False),
    "skip_tensor_guards_with_matching_dict_tags": ("bool", True, None, False),
    "enable_cpp_symbolic_shape_guards": ("bool", False, None, False),
    "wrap_top_frame": ("bool", False, None, False),
    "reorderable_logging_functions": ("set", [], None, False),
}


class ToolTest(unittest.TestCase):
    def test_executable(self):
        self.assertTrue(os.access(TOOL, os.X_OK), "tools/shmcfg-import is not executable")
        with open(TOOL, "rb") as f:
            self.assertEqual(f.readline(), b"#!/usr/bin/env python3\n")

    def test_module(self):
        # python3 -m shmcfg.importer is the same command as the script
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(d, "config.py")
            with open(src, "w") as f:
                f.write("retries: int = 3\nname = 'x'  # @compile_ignored\nbad = f()\n")
            env = dict(os.environ, PYTHONPATH=os.path.join(SRCDIR, "python"))
            for fmt in ("yaml", "c", "json"):
                args = ["--module", "app.config", src, "--format", fmt]
                script = run(*args)
                module = subprocess.run([sys.executable, "-m", "shmcfg.importer"] + args,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
                self.assertEqual(script.returncode, 0, script.stderr.decode())
                self.assertEqual((module.returncode, module.stdout, module.stderr),
                                 (script.returncode, script.stdout, script.stderr), fmt)
            usage = subprocess.run([sys.executable, "-m", "shmcfg.importer"],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
            self.assertEqual(usage.returncode, 2)
            self.assertIn(b"shmcfg-import: error: give a config module", usage.stderr)

    def test_public_api_only(self):
        # the importer uses the binding as any program would: the names the
        # package exports (shmcfg.__all__), nothing private, no ctypes
        pkg = os.path.join(SRCDIR, "python", "shmcfg", "importer")
        sys.path.insert(0, os.path.join(SRCDIR, "python"))
        try:
            import shmcfg
        finally:
            sys.path.pop(0)
        files = sorted(f for f in os.listdir(pkg) if f.endswith(".py"))
        self.assertIn("__main__.py", files)
        for f in files + [os.path.join(os.pardir, os.pardir, os.pardir, "tools",
                                       "shmcfg-import")]:
            with open(os.path.join(pkg, f), encoding="utf-8") as fh:
                text = fh.read()
            for m in re.finditer(r"^\s*(?:from\s+(\S+)\s+)?import\s+(.+)$", text, re.M):
                mod, names = m.group(1), m.group(2)
                self.assertNotIn("ctypes", names, f)
                self.assertNotRegex(names, r"\b_", "%s: %s" % (f, m.group(0)))
                if mod in ("..", "shmcfg"):
                    for n in re.split(r"[\s,()]+", names):
                        if n:
                            self.assertIn(n, shmcfg.__all__, "%s imports shmcfg.%s" % (f, n))
                elif mod and (mod.startswith("..") or mod.startswith("shmcfg")):
                    self.assertIn(mod, ("shmcfg.importer",), "%s: %s" % (f, m.group(0)))


@unittest.skipIf(SEED is None, "seed/torch_compiler_config.py not found")
class SeedTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        p = run(*(SEED_ARGS + ["--format", "json", "--strict"]))
        cls.rc, cls.stderr = p.returncode, p.stderr.decode()
        cls.doc = json.loads(p.stdout.decode("utf-8")) if p.returncode == 0 else None
        cls.opts = cls.doc["options"] if cls.doc else []
        cls.by = {o["name"]: o for o in cls.opts}

    def test_nothing_skipped(self):
        self.assertEqual(self.rc, 0, self.stderr)
        self.assertEqual(self.stderr, "")

    def test_order_and_count(self):
        names = [o["name"] for o in self.opts]
        self.assertEqual(names, [PREFIX + n for n in SEED_ORDER] +
                         [DYNAMO + n for n in DYNAMO_EXPECT])
        self.assertEqual(len(names), 38)

    def test_seed_types_and_defaults(self):
        expect = {
            "job_id": ("str", True, None), "pgo_extra_read_key": ("str", True, None),
            "pgo_extra_write_key": ("str", True, None), "cache_key_tag": ("str", False, ""),
            "force_disable_caches": ("bool", False, False),
            "dynamic_sources": ("str", False, ""), "unbacked_sources": ("str", False, ""),
            "force_cudagraph_gc": ("bool", False, False),
        }
        for n, (t, nullable, default) in expect.items():
            o = self.by[PREFIX + n]
            self.assertEqual(o["type"], t, n)
            self.assertEqual(o.get("nullable", False), nullable, n)
            self.assertIs(type(o["default"]), type(default), n)
            self.assertEqual(o["default"], default, n)
            for k in ("hash_ignored", "save_ignored", "private", "alias"):
                self.assertNotIn(k, o, n)

    def test_seed_envs_and_knob(self):
        env = {o["name"][len(PREFIX):]: o.get("env_default") for o in self.opts
               if o["name"].startswith(PREFIX)}
        self.assertEqual(env["job_id"], ["TORCH_COMPILE_JOB_ID", "TORCH_COMPILE_STICKY_PGO_KEY"])
        self.assertEqual(env["pgo_extra_read_key"], ["TORCH_COMPILE_STICKY_PGO_READ"])
        self.assertEqual(env["pgo_extra_write_key"], ["TORCH_COMPILE_STICKY_PGO_WRITE"])
        self.assertEqual(env["cache_key_tag"], ["TORCH_COMPILE_CACHE_KEY_TAG"])
        self.assertEqual(env["dynamic_sources"], ["TORCH_COMPILE_DYNAMIC_SOURCES"])
        self.assertEqual(env["unbacked_sources"], ["TORCH_COMPILE_UNBACKED_SOURCES"])
        self.assertEqual(env["force_cudagraph_gc"], ["TORCH_CUDAGRAPH_GC"])
        self.assertIsNone(env["force_disable_caches"])
        fdc = self.by[PREFIX + "force_disable_caches"]
        self.assertEqual(fdc["env_force"], ["TORCHINDUCTOR_FORCE_DISABLE_CACHES",
                                            "TORCH_COMPILE_FORCE_DISABLE_CACHES"])
        self.assertEqual(fdc["knob"], "pytorch/remote_cache:force_disable_caches")
        self.assertEqual([o["name"] for o in self.opts if "knob" in o],
                         [PREFIX + "force_disable_caches"])
        self.assertEqual([o["name"] for o in self.opts if "env_force" in o],
                         [PREFIX + "force_disable_caches"])

    def test_aliases(self):
        for n in ALIASES:
            o = self.by[PREFIX + n]
            self.assertEqual(o["alias"], DYNAMO + n)
            self.assertEqual(set(o) - {"name", "type", "nullable", "alias", "doc"}, set(), n)
            target = self.by[o["alias"]]  # every target is in the schema
            self.assertNotIn("alias", target)
            self.assertEqual(o["type"], target["type"], n)
            self.assertEqual(o.get("nullable", False), target.get("nullable", False), n)
        self.assertEqual(self.by[PREFIX + "recompile_limit"]["type"], "int")
        self.assertEqual(self.by[PREFIX + "log_file_name"]["type"], "str")
        self.assertTrue(self.by[PREFIX + "log_file_name"]["nullable"])
        self.assertEqual(self.by[PREFIX + "reorderable_logging_functions"]["type"], "set")

    def test_dynamo_targets(self):
        for n, (t, default, env, hash_ignored) in DYNAMO_EXPECT.items():
            o = self.by[DYNAMO + n]
            self.assertEqual(o["type"], t, n)
            self.assertIs(type(o["default"]), type(default), n)
            self.assertEqual(o["default"], default, n)
            self.assertEqual(o.get("env_default"), env, n)
            self.assertEqual(o.get("hash_ignored", False), hash_ignored, n)
            self.assertEqual(o.get("nullable", False), n == "log_file_name", n)
            self.assertNotIn("min", o, n)
            self.assertTrue(o.get("doc"), n)

    def test_docs(self):
        for o in self.opts:
            if o["name"] == PREFIX + "pgo_extra_read_key":
                # its neighbour's docstring sits under pgo_extra_write_key
                self.assertNotIn("doc", o)
                continue
            self.assertTrue(o.get("doc"), o["name"])
            d = o["doc"]
            self.assertEqual(d, d.strip("\n"), o["name"])
            self.assertFalse(d.startswith(" "), o["name"])
        job = self.by[PREFIX + "job_id"]["doc"]
        self.assertTrue(job.startswith("Semantically, this should be an identifier"))
        self.assertIn("is running in.\n\nProfiles are always collected", job)
        self.assertTrue(job.endswith("consistent profiles across all ranks."))
        self.assertEqual(self.by[PREFIX + "force_disable_caches"]["doc"],
                         "Force disables all caching -- This will take precedence over "
                         "and override any other caching flag")

    def test_committed_yaml_is_current(self):
        p = run_ok(self, *SEED_ARGS)
        with open(COMMITTED_YAML, "rb") as f:
            self.assertEqual(p.stdout, f.read(), "schemas/torch_compiler.yaml is stale; " + REGEN)

    def test_committed_c_is_current(self):
        p = run_ok(self, *(SEED_ARGS + ["--format", "c"]))
        with open(COMMITTED_C, "rb") as f:
            self.assertEqual(p.stdout, f.read(), "lib/schema/default_schema.c is stale; " + REGEN)

    def test_c_header_line(self):
        with open(COMMITTED_C) as f:
            first = f.readline()
        self.assertEqual(first, "/* Generated by tools/shmcfg-import from "
                         "seed/torch_compiler_config.py and schemas/torch_dynamo_aliased.yaml;"
                         " do not edit. */\n")

    def test_yaml_reads_back(self):
        doc, err = options_json(self, "--merge", COMMITTED_YAML)
        self.assertEqual(err, "")
        self.assertEqual(doc["options"], self.opts)

    def test_yaml_output_is_stable(self):
        """Reading the committed schema and writing it again changes nothing."""
        p = run_ok(self, "--merge", COMMITTED_YAML)
        with open(COMMITTED_YAML, "rb") as f:
            body = f.read().split(b"\n", 2)[2]  # past the "Generated by" line
        self.assertEqual(p.stdout.split(b"\n", 2)[2], body)

    @unittest.skipUnless(HAVE_YAML, "PyYAML not installed")
    def test_pyyaml_agrees(self):
        import yaml
        for path in (COMMITTED_YAML, ALIASED):
            with open(path) as f:
                y = yaml.safe_load(f)
            self.assertEqual(y["format"], 1)
            doc, _ = options_json(self, "--merge", path)
            self.assertEqual(list(y["options"]), [o["name"] for o in doc["options"]])
            for o in doc["options"]:
                yo = y["options"][o["name"]]
                for k, v in o.items():
                    if k == "name":
                        continue
                    got = yo[k]
                    if o["type"] == "set" and k == "default":
                        got = sorted(got)
                    self.assertEqual(got, v, "%s %s" % (o["name"], k))
                self.assertEqual(set(yo), set(o) - {"name"}, o["name"])

    def test_c_table_compiles_and_matches(self):
        with open(COMMITTED_C) as f:
            rows = compile_and_dump(self, f.read())
        check_c_against_json(self, rows, self.opts)


SYNTHETIC = '''\
"""Module docstring: not the doc of any option."""
import os
import sys
from typing import List, Literal, Optional, Set, Union

from torch.utils._config_module import Config, install_config_module

flag = True
"""A flag.

    Indented second paragraph.
"""

count: int = 5
ratio: float = 1.5
whole: float = 2
neg = -3
big = 64 * 1024
tiny = 1e-3
name: str = "x"
empty = ""
maybe: Optional[str] = None
maybe_int: "Optional[int]" = 7
union_none: Union[int, None] = None
pipe_none: int | None = None
mode: Literal["fast", "slow"] = "fast"
level: Literal[1, 2, 3] = 2
tags: set[str] = set()
names: list[str] = []
typing_list: List[str] = ["q"]
items = ["b", "a"]
uniq = {"b", "a", "b"}
plain_set: set = set()
_private = 1

# [@compile_ignored: debug]
ignored = False

# a comment block
# [@compile_ignored: runtime_behaviour] several lines above
# more text
ignored2 = 1

# [@compile_ignored: debug] a blank line separates this from the next

not_ignored = 2
trailing = 3  # [@compile_ignored: debug]

env_flag = os.environ.get("SYN_FLAG", "0") == "1"
env_on = (
    os.environ.get("SYN_ON", "1") == "1"
)
env_noarg = os.environ.get("SYN_NOARG") == "1"
env_getenv = os.getenv("SYN_GETENV", "1") == "1"
env_str: Optional[str] = os.environ.get("SYN_STR")
env_str_default = os.environ.get("SYN_STR2", "dflt")
env_int = int(os.environ.get("SYN_INT", "42"))

cfg: bool = Config(
    default=False,
    justknob="team/knobs:cfg",
    env_name_default="SYN_A",
    env_name_force=["SYN_F1", "SYN_F2"],
)
"""Config doc."""
cfg_alias: int = Config(alias="other.module.count")
"""Alias doc."""
cfg_dep = Config(default=3, deprecated="use count instead")
cfg_range: int = Config(default=4, min=0, max=10)
cfg_list: list[str] = Config(default=["x"], env_name_default=["SYN_L1", "SYN_L2"])
cfg_positional = Config(False, None, "SYN_POS")


class triton:
    """Class docstring: not an option."""

    cudagraphs = False
    """Nested doc."""

    # [@compile_ignored: debug]
    debug_sync: bool = False

    class inner:
        depth = 1

    def method(self):
        local = 1


weird = {"a": 1}
fn = lambda: 1
computed = compute()
tup = (1, 2)
nothing = None
ints: list[int] = []
bad_default: int = "x"
bad_choice: Literal["a", "b"] = "c"
truthy = bool(os.environ.get("SYN_TRUTHY", False))
mixed: Union[bool, str] = True
unknown_field = Config(default=1, colour="red")
alias_default: int = Config(alias="a.b", default=1)
mutated = ["a"]
mutated.append("b")
changed = 1
changed += 1
if os.environ.get("SYN_IF"):
    conditional = 1
__dunder__ = 1


def helper():
    inside = 1
    return inside


install_config_module(sys.modules[__name__])
'''

SYN_SKIPPED = ["weird", "fn", "computed", "tup", "nothing", "ints", "bad_default",
               "bad_choice", "truthy", "mixed", "unknown_field", "alias_default",
               "mutated", "changed", "conditional"]


FOLDS = """\
x = (((9**128)**128)**128)**128
y = ((9**128)**128)**128
z = 2**10 * 3
w = (1 << 100) * 3
"""


class FoldBoundTest(unittest.TestCase):
    """Constant folding bounded by what it produces (issue 24): a power past
    the 64-bit range of an int option is refused at once, as a FILE:LINE
    line, not folded for minutes nor a ValueError traceback."""

    def test_powers_past_int64_refused_at_once(self):
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp)
        path = os.path.join(tmp, "folds.py")
        with open(path, "w") as f:
            f.write(FOLDS)
        p = run("--module", "f.c", path, "--format", "json", timeout=60)
        err = p.stderr.decode()
        self.assertEqual(p.returncode, 0, err)
        self.assertNotIn("Traceback", err)
        for n, name in ((1, "x"), (2, "y"), (4, "w")):
            self.assertRegex(err, r"skipped f\.c\.%s \(%s:%d\): .*out of the 64-bit range" %
                             (name, re.escape(path), n))
        opts = {o["name"]: o for o in json.loads(p.stdout.decode())["options"]}
        self.assertEqual(opts["f.c.z"]["default"], 3072)


def run_bounded(test, *args, cwd=None):
    """The tool on a hostile input, bounded: 60 s (a hang fails the test, not
    the run) and 1 GiB of address space (a runaway read or fold fails fast)."""
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
    try:
        return subprocess.run([TOOL] + list(args), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, cwd=cwd, timeout=60, preexec_fn=limit)
    except subprocess.TimeoutExpired:
        test.fail("%s hangs" % " ".join(args))


class ReliabilityTest(unittest.TestCase):
    """Issue "Reliability III": whatever the input, a failure is one line
    naming FILE[:LINE] (exit 1), never a traceback, a hang or a runaway
    memory; an expression too deep or too big to evaluate is skipped."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.tmp)

    def write(self, name, text):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def assert_error(self, p, path, line=None):
        """Exit 1, and stderr one line "shmcfg-import: PATH[:LINE]: reason"."""
        err = p.stderr.decode("utf-8", "replace")
        self.assertNotIn("Traceback", err)
        self.assertEqual(p.returncode, 1, err)
        self.assertEqual(len(err.splitlines()), 1, err)
        place = re.escape(path) + (":%d" % line if line is not None else "")
        self.assertRegex(err, r"\Ashmcfg-import: %s: \S" % place)

    def assert_skipped(self, p, path, line, reason):
        """Exit 0, stderr one `skipped` line for x at PATH:LINE."""
        err = p.stderr.decode("utf-8", "replace")
        self.assertNotIn("Traceback", err)
        self.assertEqual(p.returncode, 0, err)
        self.assertEqual(len(err.splitlines()), 1, err)
        self.assertRegex(err, r"\Askipped t\.x \(%s:%d\): .*%s" % (re.escape(path), line, reason))
        self.assertNotIn("t.x", [o["name"] for o in json.loads(p.stdout.decode())["options"]])

    def test_too_deep_for_the_parser(self):
        # RecursionError "during ast construction", the parser's MemoryError
        for n, text in enumerate(("x = " + "+".join(["1"] * 3000),
                                  "x = " + "-" * 3000 + "1",
                                  "x = " + "-" * 100000 + "1",
                                  "x = " + "not " * 5000 + "True",
                                  "x: " + "|".join(["int"] * 20000) + " = 1")):
            path = self.write("deep%d.py" % n, "a = 1\nb = [\n  'c']\n" + text + "\n")
            p = run_bounded(self, "--module", "t", path)
            self.assert_error(p, path, 4)
            self.assertIn("nested too deeply", p.stderr.decode())

    def test_too_deep_to_evaluate_is_skipped(self):
        # ast.parse takes these; the importer's recursion does not
        for n, text in enumerate(("x = " + "+".join(["1"] * 600),
                                  "x: float = " + "-" * 1500 + "1.5",
                                  "x: " + "|".join(["int"] * 900) + " = 1",
                                  "def f() -> int:\n    return " + "+".join(["1"] * 600)
                                  + "\nx = f()")):
            path = self.write("deep%d.py" % n, "a = 1\nb = 2\n" + text + "\n")
            p = run_bounded(self, "--module", "t", path, "--format", "json")
            self.assert_skipped(p, path, text.count("\n") + 3, "nested too deeply")
        p = run_bounded(self, "--strict", "--module", "t", path)
        self.assertEqual(p.returncode, 1)

    def test_int_constants_past_64_bits_skipped(self):
        # str() of them raised ValueError (Python's int digit limit)
        big = "0x" + "f" * 5000
        cfg = "from torch.utils._config_module import Config\n"
        for n, text in enumerate(("x = %s" % big, "x: int = %s" % big, "x: str = %s" % big,
                                  "x = [%s]" % big, "x = -%s" % big,
                                  "x: int = Config(default=1, min=%s)" % big,
                                  "x: str = Config(default='a', choices=['a', %s])" % big,
                                  "x: Literal[%s, 1] = 1" % big)):
            path = self.write("big%d.py" % n, cfg + "from typing import Literal\n" + text + "\n")
            p = run_bounded(self, "--module", "t", path, "--format", "json")
            self.assert_skipped(p, path, 3, "an int constant of 20000 bits is out of the "
                                            "64-bit range")
        path = self.write("env.py", "import os\nx = int(os.environ.get('X', '%s'))\n"
                          % ("9" * 4000))
        p = run_bounded(self, "--module", "t", path, "--format", "json")
        self.assert_skipped(p, path, 2, "out of the 64-bit range")
        self.assertLess(len(p.stderr), 200)

    def test_complex_fold_skipped(self):
        # untyped, it reached c_value(): TypeError
        for n, text in enumerate(("x = (-8) ** 0.5", "x: float = (-8.0) ** 0.5")):
            path = self.write("c%d.py" % n, "a = 1\nb = 2\n" + text + "\n")
            p = run_bounded(self, "--module", "t", path, "--format", "json")
            self.assert_skipped(p, path, 3, "is a complex number")

    def test_fifo_refused_not_waited_for(self):
        fifo = os.path.join(self.tmp, "f.py")
        os.mkfifo(fifo)
        self.assert_error(run_bounded(self, fifo), fifo)
        self.assert_error(run_bounded(self, "--merge", fifo), fifo)

    def test_device_refused_not_read_for_ever(self):
        self.assert_error(run_bounded(self, "/dev/zero"), "/dev/zero")
        self.assert_error(run_bounded(self, "--merge", "/dev/zero"), "/dev/zero")

    def test_sizes_capped(self):
        big = os.path.join(self.tmp, "big.py")
        with open(big, "w") as f:
            f.truncate((16 << 20) + 1)
        p = run_bounded(self, big)
        self.assert_error(p, big)
        self.assertIn("at most 16 MiB", p.stderr.decode())
        yml = os.path.join(self.tmp, "big.yaml")
        with open(yml, "w") as f:
            f.truncate((64 << 20) + 1)
        p = run_bounded(self, "--merge", yml)
        self.assert_error(p, yml)
        self.assertIn("at most 64 MiB", p.stderr.decode())


class SyntheticTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        cls.path = os.path.join(cls.tmp, "conf.py")
        with open(cls.path, "w") as f:
            f.write(SYNTHETIC)
        p = run("--module", "syn.conf", cls.path, "--format", "json")
        cls.rc = p.returncode
        cls.stderr = p.stderr.decode()
        cls.doc = json.loads(p.stdout.decode()) if p.returncode == 0 else {"options": []}
        cls.by = {o["name"][len("syn.conf."):]: o for o in cls.doc["options"]}

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def line_of(self, name):
        for n, line in enumerate(SYNTHETIC.split("\n"), 1):
            if re.match(r"\s*%s\s*[:=+]" % re.escape(name), line):
                return n
        raise AssertionError(name)

    def test_exit_status(self):
        self.assertEqual(self.rc, 0, self.stderr)
        p = run("--strict", "--module", "syn.conf", self.path)
        self.assertEqual(p.returncode, 1)
        # --strict's reason comes before the summary, which stays last
        last = p.stderr.decode().splitlines()[-2:]
        self.assertRegex(last[0], r"^shmcfg-import: \d+ assignment\(s\) skipped \(--strict\)$")
        self.assertTrue(last[1].startswith("warning: the schema refers to "), last)
        # and when the output cannot be written: its error, then the summary
        p = run("--module", "syn.conf", self.path, "-o", "/nonexistent/dir/out.yaml")
        self.assertEqual(p.returncode, 1)
        last = p.stderr.decode().splitlines()[-2:]
        self.assertTrue(last[0].startswith("shmcfg-import: /nonexistent/dir/out.yaml: "), last)
        self.assertTrue(last[1].startswith("warning: the schema refers to "), last)

    def test_skipped_lines(self):
        lines = self.stderr.splitlines()
        skipped = []
        for ln in lines:
            if ln.startswith("warning: "):
                continue
            m = re.match(r"skipped syn\.conf\.(\S+) \((.+):(\d+)\): \S.*\Z", ln)
            self.assertIsNotNone(m, ln)
            self.assertEqual(m.group(2), self.path)
            skipped.append(m.group(1))
            name = m.group(1)
            # a later change is reported where it happens
            marker = {"mutated": "mutated.append(", "changed": "changed +="}.get(name)
            want = (SYNTHETIC.split("\n").index(marker + ("\"b\")" if name == "mutated"
                                                          else " 1")) + 1
                    if marker else self.line_of(name))
            self.assertEqual(int(m.group(3)), want, ln)
        self.assertEqual(skipped, SYN_SKIPPED)
        for name in SYN_SKIPPED:
            self.assertNotIn(name, self.by)
        self.assertNotIn("__dunder__", self.by)
        self.assertNotIn("inside", self.by)
        self.assertNotIn("triton.inner.method", self.by)
        self.assertNotIn("triton.local", self.by)

    def test_reasons(self):
        reasons = dict(re.findall(r"skipped syn\.conf\.(\S+) \(.*?\): (.*)", self.stderr))
        self.assertIn("dict", reasons["weird"])
        self.assertIn("lambda", reasons["fn"])
        self.assertIn("compute()", reasons["computed"])
        self.assertIn("tuple", reasons["tup"])
        self.assertIn("None without a type annotation", reasons["nothing"])
        self.assertIn("strings", reasons["ints"])
        self.assertIn("choices", reasons["bad_choice"])
        self.assertIn("colour", reasons["unknown_field"])
        self.assertIn(".append()", reasons["mutated"])
        self.assertIn("if block", reasons["conditional"])

    def test_warns_about_missing_alias_target(self):
        self.assertIn("warning: syn.conf.cfg_alias: alias target other.module.count is not "
                      "in the schema", self.stderr)
        # and, last, what to do about it
        self.assertRegex(self.stderr.splitlines()[-1],
                         r"^warning: the schema refers to \d+ options? it does not declare "
                         r"\(.*other\.module\.count.*\): shmctl create refuses it alone; import the "
                         r"modules that declare them in the same command, or --merge their schema$")

    def test_order(self):
        names = list(self.by)
        self.assertEqual(names[:3], ["flag", "count", "ratio"])
        self.assertLess(names.index("cfg_positional"), names.index("triton.cudagraphs"))
        self.assertEqual(names[-3:], ["triton.cudagraphs", "triton.debug_sync",
                                      "triton.inner.depth"])

    def check(self, name, **want):
        o = self.by[name]
        got = {k: v for k, v in o.items() if k != "name"}
        self.assertEqual(got, want, name)

    def test_scalars(self):
        self.check("flag", type="bool", default=True,
                   doc="A flag.\n\nIndented second paragraph.")
        self.check("count", type="int", default=5)
        self.check("ratio", type="float", default=1.5)
        self.check("whole", type="float", default=2.0)
        self.assertIs(type(self.by["whole"]["default"]), float)
        self.check("neg", type="int", default=-3)
        self.check("big", type="int", default=65536)
        self.check("tiny", type="float", default=0.001)
        self.check("name", type="str", default="x")
        self.check("empty", type="str", default="")

    def test_optional(self):
        self.check("maybe", type="str", nullable=True, default=None)
        self.check("maybe_int", type="int", nullable=True, default=7)
        self.check("union_none", type="int", nullable=True, default=None)
        self.check("pipe_none", type="int", nullable=True, default=None)

    def test_literal_choices(self):
        self.check("mode", type="str", default="fast", choices=["fast", "slow"])
        self.check("level", type="int", default=2, choices=[1, 2, 3])

    def test_lists_and_sets(self):
        self.check("tags", type="set", default=[])
        self.check("names", type="list", default=[])
        self.check("typing_list", type="list", default=["q"])
        self.check("items", type="list", default=["b", "a"])
        self.check("uniq", type="set", default=["a", "b"])
        self.check("plain_set", type="set", default=[])

    def test_private(self):
        self.check("_private", type="int", default=1, private=True)

    def test_compile_ignored(self):
        self.check("ignored", type="bool", default=False, hash_ignored=True)
        self.check("ignored2", type="int", default=1, hash_ignored=True)
        self.check("not_ignored", type="int", default=2)
        self.check("trailing", type="int", default=3, hash_ignored=True)
        self.check("triton.debug_sync", type="bool", default=False, hash_ignored=True)

    def test_environment(self):
        self.check("env_flag", type="bool", default=False, env_default=["SYN_FLAG"])
        self.check("env_on", type="bool", default=True, env_default=["SYN_ON"])
        self.check("env_noarg", type="bool", default=False, env_default=["SYN_NOARG"])
        self.check("env_getenv", type="bool", default=True, env_default=["SYN_GETENV"])
        self.check("env_str", type="str", nullable=True, default=None, env_default=["SYN_STR"])
        self.check("env_str_default", type="str", default="dflt", env_default=["SYN_STR2"])
        self.check("env_int", type="int", default=42, env_default=["SYN_INT"])

    def test_config_calls(self):
        self.check("cfg", type="bool", default=False, knob="team/knobs:cfg",
                   env_default=["SYN_A"], env_force=["SYN_F1", "SYN_F2"], doc="Config doc.")
        self.check("cfg_alias", type="int", alias="other.module.count", doc="Alias doc.")
        self.check("cfg_dep", type="int", default=3, deprecated="use count instead")
        self.check("cfg_range", type="int", default=4, min=0, max=10)
        self.check("cfg_list", type="list", default=["x"], env_default=["SYN_L1", "SYN_L2"])
        self.check("cfg_positional", type="bool", default=False, env_default=["SYN_POS"])

    def test_nested_class(self):
        self.check("triton.cudagraphs", type="bool", default=False, doc="Nested doc.")
        self.check("triton.inner.depth", type="int", default=1)

    def test_yaml_round_trip(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "syn.yaml")
            run_ok(self, "--module", "syn.conf", self.path, "-o", out)
            doc, _ = options_json(self, "--merge", out)
            self.assertEqual(doc["options"], self.doc["options"])
            with open(out) as f:
                text = f.read()
        self.assertTrue(text.startswith("# shmcfg schema (format 1)\n"))
        self.assertIn('\n  syn.conf.mode:\n    type: str\n    default: "fast"\n'
                      '    choices: ["fast", "slow"]\n', text)
        self.assertIn("\n    doc: |-\n      A flag.\n\n      Indented second paragraph.\n", text)
        self.assertIn("\n    default: 0.001\n", text)

    def test_c_output(self):
        p = run_ok(self, "--module", "syn.conf", self.path, "--format", "c")
        rows = compile_and_dump(self, p.stdout.decode())
        check_c_against_json(self, rows, self.doc["options"])
        by = {r["name"]: r for r in rows}
        self.assertEqual(by["syn.conf.cfg_range"]["min"], "0")
        self.assertEqual(by["syn.conf.cfg_range"]["max"], "10")
        self.assertEqual(by["syn.conf.tiny"]["def"], "0.001")
        self.assertEqual(by["syn.conf.empty"]["def"], '""')
        self.assertEqual(by["syn.conf.uniq"]["def"], '["a","b"]')


class DocEscapingTest(unittest.TestCase):
    """Docs that a literal block cannot hold still round-trip."""

    DOCS = {
        "plain": "One line.",
        "trailing_space": "Ends with spaces.   \nNext line. ",
        "tab": "A\ttab and a \\ backslash and \"quotes\"",
        "unicode": "Caf\u00e9 \u2014 \u00fcber \U0001F600 and a \u2028 separator",
        "control": "bell\x07 and escape\x1b and DEL\x7f",
        "trigraph": "what??( ??) ??/ ok?",
        "hashes": "# not a comment\n  indented line\n- not a list: [x] {y}",
        "carriage": "carriage\rreturn",
    }

    def test_round_trip(self):
        src = ["import os"]
        for k, v in self.DOCS.items():
            src.append("%s = 1" % k)
            src.append(repr(v))
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "docs.py")
            with open(path, "w", encoding="utf-8") as f:
                f.write("\n".join(src) + "\n")
            doc, err = options_json(self, "--module", "d", path)
            self.assertEqual(err, "")
            got = {o["name"][2:]: o.get("doc") for o in doc["options"]}
            want = {k: inspect.cleandoc(v) for k, v in self.DOCS.items()}
            self.assertEqual(want["tab"], "A       tab and a \\ backslash and \"quotes\"")
            self.assertEqual(got, want)
            out = os.path.join(tmp, "docs.yaml")
            run_ok(self, "--module", "d", path, "-o", out)
            back, _ = options_json(self, "--merge", out)
            self.assertEqual(back["options"], doc["options"])
            with open(out, encoding="utf-8") as f:
                text = f.read()
            self.assertIn("  d.plain:\n    type: int\n    default: 1\n    doc: |-\n"
                          "      One line.\n", text)
            self.assertIn('    doc: "Ends with spaces.   \\nNext line. "\n', text)
            if HAVE_YAML:
                import yaml
                y = yaml.safe_load(text)
                self.assertEqual({k[2:]: v["doc"] for k, v in y["options"].items()}, want)
            p = run_ok(self, "--module", "d", path, "--format", "c")
            c_text = p.stdout.decode("ascii")  # C output is pure ASCII
            self.assertNotIn("??", c_text.replace("?\\?", ""))
            rows = compile_and_dump(self, c_text)
            self.assertEqual({r["name"][2:]: r["doc"] for r in rows}, want)

    def test_json_safe_on_a_terminal(self):
        """--format json: DEL, C1 controls (U+009B is CSI) and line
        separators as \\u escapes, which read back as the same doc; the
        rest of the UTF-8 as it is."""
        doc_text = "csi\x9b[2J nel\x85 sep\u2028x par\u2029y del\x7f caf\u00e9 \u4e2d"
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "c1.py")
            with open(path, "w", encoding="utf-8") as f:
                f.write("c1 = 1\n%r\n" % doc_text)
            p = run_ok(self, "--module", "d", path, "--format", "json")
            text = p.stdout.decode("utf-8")
            self.assertIsNone(re.search("[\x7f-\x9f\u2028\u2029]", text), text)
            self.assertIn(r'"csi\u009b[2J nel\u0085 sep\u2028x par\u2029y del\u007f caf'
                          "\u00e9 \u4e2d\"", text)
            self.assertEqual(json.loads(text)["options"][0]["doc"], doc_text)


class HandWrittenYamlTest(unittest.TestCase):
    """The reader takes the hand-written forms of format 1."""

    def read(self, text):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "s.yaml")
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            p = run("--merge", path, "--format", "json")
            return p.returncode, p.stdout.decode(), p.stderr.decode(), path

    def test_forms(self):
        rc, out, err, _ = self.read(textwrap.dedent('''\
            # a comment
            format: 1   # trailing comment
            options:

              # comment between options
              a.str:
                type: str
                default: plain text here   # comment
                doc: |
                  Clipped block.

                  Second paragraph.
              a.single:
                type: str
                default: 'it''s'
              a.knob:
                type: int
                knob: 'x:y'
              a.dq:
                type: str
                default: "tab\\there \\u00e9 \\x41"
              a.nodefault:
                type: int
              a.nullnodefault:
                type: str
                nullable: true
              a.list:
                type: list
                default: [one, "two",
                  'three']
              a.set:
                type: set
                default: [b, a]
              a.float:
                type: float
                default: 1
                min: 0
                max: 1.0e+3
              a.imp:
                type: bool
                implies: {a.str: "x", a.float: 2.5}
              "a.quoted":
                type: bool
                default: TRUE
                env_default: SINGLE_VAR
            '''))
        self.assertEqual(rc, 0, err)
        by = by_name(json.loads(out))
        self.assertEqual(by["a.str"]["default"], "plain text here")
        self.assertEqual(by["a.str"]["doc"], "Clipped block.\n\nSecond paragraph.")
        self.assertEqual(by["a.single"]["default"], "it's")
        self.assertEqual(by["a.knob"], {"name": "a.knob", "type": "int", "default": 0,
                                        "knob": "x:y"})
        self.assertEqual(by["a.dq"]["default"], "tab\there \u00e9 A")
        self.assertEqual(by["a.nodefault"]["default"], 0)
        self.assertIsNone(by["a.nullnodefault"]["default"])
        self.assertEqual(by["a.list"]["default"], ["one", "two", "three"])
        self.assertEqual(by["a.set"]["default"], ["a", "b"])
        self.assertEqual(by["a.float"], {"name": "a.float", "type": "float", "default": 1.0,
                                         "min": 0.0, "max": 1000.0})
        self.assertEqual(by["a.imp"]["implies"], {"a.str": "x", "a.float": 2.5})
        self.assertIs(by["a.quoted"]["default"], True)
        self.assertEqual(by["a.quoted"]["env_default"], ["SINGLE_VAR"])

    def test_errors_name_file_and_line(self):
        # the library reads the file: its messages, its lines (an option's
        # declaration is refused at the option's name; a YAML error where
        # libyaml stops)
        cases = [
            ("format: 1\noptions:\n  a.b:\n    type: int\n    colour: red\n", 5, "colour"),
            ("format: 1\noptions:\n  a.b:\n    type: int\n    default: \"x\"\n", 3,
             "not a valid int"),
            ("format: 1\noptions:\n  a.b:\n    type: blob\n", 4, "blob"),
            ("format: 2\noptions: {}\n", 1, "format"),
            ("format: 1\noptions:\n  a.b:\n    type: str\n    default: \"open\n", 6,
             "end of stream"),
            ("format: 1\noptions:\n  a.b:\n    type: bool\n    default: null\n", 3,
             "not a valid bool"),
            ("format: 1\noptions:\n  a.b:\n    type: str\n    knob: \"k\"\n", 3, "knob"),
            ("format: 1\noptions:\n  a.b:\n    type: int\n  a.b:\n    type: int\n", 5,
             "declared twice"),
        ]
        for text, line, word in cases:
            rc, out, err, path = self.read(text)
            self.assertEqual(rc, 1, text)
            self.assertEqual(out, "")
            self.assertEqual(len(err.splitlines()), 1, err)
            self.assertIn("%s:%d:" % (path, line), err)
            self.assertIn(word, err)


class LibraryTest(unittest.TestCase):
    """libshmcfg checks what the importer reads and writes; its refusals
    reach the user as one line naming FILE:LINE."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def write(self, name, text):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def one_line_error(self, p):
        self.assertEqual(p.returncode, 1)
        self.assertEqual(p.stdout, b"")
        err = p.stderr.decode()
        self.assertEqual(len(err.splitlines()), 1, err)
        return err

    CYCLE = ("from torch.utils._config_module import Config\n"
             "a: bool = Config(default=False, implies={\"m.b\": True})\n"
             "b: bool = Config(default=False, implies={\"m.a\": True})\n")

    def test_cycle_from_a_module(self):
        """The importer cannot see an implication cycle; the library refuses
        the schema written, and nothing is written."""
        path = self.write("c.py", self.CYCLE)
        out = os.path.join(self.tmp, "c.yaml")
        for fmt in ("yaml", "c", "json"):
            err = self.one_line_error(run("--module", "m", path, "--format", fmt, "-o", out))
            self.assertEqual(err, "shmcfg-import: %s:2: config implication cycle: m.a -> m.b -> m.a\n" % path)
            self.assertFalse(os.path.exists(out))

    def test_cycle_in_a_schema_file(self):
        """The same schema as the importer would write it, given to --merge:
        the library's message, at the line of the option it names."""
        path = self.write("c.yaml", "# shmcfg schema (format 1)\nformat: 1\noptions:\n"
                          "  m.a:\n    type: bool\n    default: false\n"
                          "    implies: {m.b: true}\n"
                          "  m.b:\n    type: bool\n    default: false\n"
                          "    implies: {m.a: true}\n")
        err = self.one_line_error(run("--merge", path))
        self.assertEqual(err, "shmcfg-import: %s:4: config implication cycle: m.a -> m.b -> m.a\n" % path)

    def test_alias_of_another_type(self):
        path = self.write("a.yaml", "format: 1\noptions:\n  a.x:\n    type: int\n"
                          "    default: 1\n  a.y:\n    type: str\n    alias: a.x\n")
        err = self.one_line_error(run("--merge", path))
        self.assertEqual(err, "shmcfg-import: %s:6: a.y: alias of a.x must have its type int\n"
                         % path)
        src = self.write("s.py", "from torch.utils._config_module import Config\n"
                         "y: str = Config(alias=\"a.x\")\n")
        target = self.write("t.yaml", "format: 1\noptions:\n  a.x:\n    type: int\n")
        err = self.one_line_error(run("--module", "s", src, "--merge", target))
        self.assertEqual(err, "shmcfg-import: %s:2: s.y: alias of a.x must have its type int\n"
                         % src)

    def test_refused_option_is_skipped(self):
        """An option the library would not declare is skipped with its reason."""
        path = self.write("r.py", "from torch.utils._config_module import Config\n"
                          "r: int = Config(default=5, min=7)\n"
                          "k: str = Config(default=\"x\", justknob=\"kk\")\n"
                          "ok = 1\n")
        doc, err = options_json(self, "--module", "m", path)
        self.assertEqual(err.splitlines(), [
            "skipped m.r (%s:2): default: value 5 is below the minimum 7" % path,
            "skipped m.k (%s:3): a knob needs a bool or int option" % path])
        self.assertEqual([o["name"] for o in doc["options"]], ["m.ok"])
        self.assertEqual(run("--strict", "--module", "m", path).returncode, 1)

    def test_references_to_other_inputs(self):
        """A schema file may alias and imply options it does not declare (those
        of another input): they are read as written, with a warning."""
        text = ("# shmcfg schema (format 1)\n"
                "# Generated by tools/shmcfg-import from x/r.yaml; do not edit.\n"
                "format: 1\noptions:\n"
                "  a.s:\n    type: str\n    nullable: true\n    alias: other.s\n"
                "  a.l:\n    type: list\n    alias: other.l\n"
                "  a.imp:\n    type: bool\n    default: false\n"
                "    implies: {x.f: 2.5, x.s: \"q\", x.b: true, x.l: [\"a\", \"b\"], "
                "x.n: null, a.t: 3}\n"
                "  a.t:\n    type: int\n    default: 1\n")
        path = self.write("r.yaml", text)
        doc, err = options_json(self, "--merge", path)
        self.assertIn("warning: a.s: alias target other.s is not in the schema", err)
        by = by_name(doc)
        self.assertEqual(by["a.s"], {"name": "a.s", "type": "str", "nullable": True,
                                     "alias": "other.s"})
        self.assertEqual(by["a.l"]["alias"], "other.l")
        self.assertEqual(by["a.imp"]["implies"], {"x.f": 2.5, "x.s": "q", "x.b": True,
                                                  "x.l": ["a", "b"], "x.n": None, "a.t": 3})
        p = run_ok(self, "--merge", path)
        self.assertEqual(p.stdout.split(b"\n", 2)[2], text.encode().split(b"\n", 2)[2])


def running(pid, comm=None):
    """The process `pid` runs (`comm`, if given; a zombie, which a PID 1
    that reaps nothing keeps, is not running)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            stat = f.read()
    except OSError:
        return False
    name, state = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2]
    return comm in (None, name) and state != "Z"


class ImportChildTest(unittest.TestCase):
    """The child Python that imports a module name: bounded by
    --import-timeout, and killed with its process group when it is done,
    so that nothing the module started outlives the importer or keeps it
    waiting."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.tmp)
        self.pids = os.path.join(self.tmp, "pids")
        self.addCleanup(self.kill_left)

    def kill_left(self):
        for pid in self.read_pids():
            try:
                os.kill(pid, 9)
            except OSError:
                pass

    def read_pids(self):
        try:
            with open(self.pids) as f:
                return [int(x) for x in f.read().split()]
        except OSError:
            return []

    def module(self, name, text):
        with open(os.path.join(self.tmp, name + ".py"), "w") as f:
            f.write("import os, subprocess, time\n"
                    "def note(pid):\n"
                    "    with open(%r, 'a') as f:\n"
                    "        f.write('%%d\\n' %% pid)\n" % self.pids + text)

    def assert_gone(self, comm):
        pids = self.read_pids()
        self.assertTrue(pids, "the module did not run")
        for pid in pids:
            for _ in range(100):  # SIGKILL is delivered at once; allow 1 s
                if not running(pid, comm):
                    break
                time.sleep(0.01)
            self.assertFalse(running(pid, comm), "%s %d left running" % (comm, pid))

    def test_blocking_module_times_out(self):
        self.module("shmcfg_slow_mod", "note(os.getpid())\ntime.sleep(600)\n")
        start = time.monotonic()
        try:
            p = run("shmcfg_slow_mod", "--import-timeout", "2", cwd=self.tmp, timeout=60)
        except subprocess.TimeoutExpired:
            self.fail("the import of a module that sleeps hangs")
        self.assertLess(time.monotonic() - start, 30)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertEqual(p.stderr.decode(), "shmcfg-import: shmcfg_slow_mod: the import did "
                         "not finish within 2 s (--import-timeout)\n")
        self.assertEqual(p.stdout, b"")
        self.assert_gone(None)  # the child Python

    def test_background_child_neither_waited_for_nor_left(self):
        # a computed default: imported twice, two children, two sleeps
        self.module("shmcfg_bg_mod", "p = subprocess.Popen(['sleep', '30'])\nnote(p.pid)\n")
        start = time.monotonic()
        try:
            p = run("shmcfg_bg_mod", cwd=self.tmp, timeout=20)
        except subprocess.TimeoutExpired:
            self.fail("the importer waits for what the module left running")
        self.assertLess(time.monotonic() - start, 15)
        self.assertEqual(p.stderr.decode().splitlines(), [
            "shmcfg-import: shmcfg_bg_mod: not a config module: it has no _config dict after "
            "import (torch.utils._config_module.install_config_module() makes it)"])
        self.assertEqual(len(self.read_pids()), 2)
        self.assert_gone("sleep")

    def test_timeout_usage(self):
        for bad in ("0", "-1", "nan", "inf", "x"):
            p = run("--import-timeout", bad, "some.module")
            self.assertEqual(p.returncode, 2, bad)
            self.assertIn(b"usage:", p.stderr)


class ErrorTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def write(self, name, text):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_syntax_error(self):
        path = self.write("bad.py", "x = 1\ny = (\n\nz = 3\n")
        out = os.path.join(self.tmp, "out.yaml")
        p = run(path, "-o", out)
        self.assertEqual(p.returncode, 1)
        err = p.stderr.decode()
        self.assertEqual(len(err.splitlines()), 1, err)
        self.assertRegex(err, r"^shmcfg-import: %s:\d+: syntax error" % re.escape(path))
        self.assertEqual(p.stdout, b"")
        self.assertFalse(os.path.exists(out))

    def test_syntax_error_line(self):
        path = self.write("bad2.py", "a = 1\nb = 2\nc = = 3\n")
        p = run(path)
        self.assertEqual(p.returncode, 1)
        self.assertIn("%s:3:" % path, p.stderr.decode())

    def test_usage_errors(self):
        path = self.write("ok.py", "a = 1\n")
        for args in (["--no-such-flag", path], [], ["--format", "xml", path],
                     ["--module", "1bad", path], ["--module", "m", path, path], ["-o"],
                     ["--module", "m", "some.module"], ["--comment", "a\nb", path]):
            p = run(*args)
            self.assertEqual(p.returncode, 2, args)
            self.assertEqual(p.stdout, b"", args)
            self.assertIn(b"usage:", p.stderr, args)

    def test_missing_input(self):
        p = run(os.path.join(self.tmp, "nope.py"))
        self.assertEqual(p.returncode, 1)
        self.assertIn("nope.py", p.stderr.decode())
        p = run("--merge", os.path.join(self.tmp, "nope.yaml"))
        self.assertEqual(p.returncode, 1)

    def test_paths_are_never_module_names(self):
        """A SOURCE that is a directory entry (a symbolic link loop, a broken
        link) or ends in .py is a file path: its error is the OS's, and no
        module is looked up, imported or run (shmcfg_pkg.py, missing, made
        the importer import the package shmcfg_pkg in its own process)."""
        os.symlink("loop2", os.path.join(self.tmp, "loop1"))
        os.symlink("loop1", os.path.join(self.tmp, "loop2"))
        os.symlink("loop.py", os.path.join(self.tmp, "loop.py"))
        os.symlink("nowhere", os.path.join(self.tmp, "shmcfg_broken"))
        marker = os.path.join(self.tmp, "imported")
        os.makedirs(os.path.join(self.tmp, "shmcfg_pkg"))
        self.write(os.path.join("shmcfg_pkg", "__init__.py"),
                   "open(%r, 'w').close()\n" % marker)
        self.write(os.path.join("shmcfg_pkg", "py.py"), "open(%r, 'w').close()\n" % marker)
        for arg, why in (("loop1", "Too many levels of symbolic links"),
                         ("loop.py", "Too many levels of symbolic links"),
                         ("shmcfg_broken", "No such file or directory"),
                         ("shmcfg_pkg.py", "No such file or directory"),
                         ("shmcfg_nope.py", "No such file or directory")):
            p = run(arg, cwd=self.tmp)
            self.assertEqual(p.returncode, 1, arg)
            self.assertEqual(p.stdout, b"", arg)
            self.assertEqual(p.stderr.decode(), "shmcfg-import: %s: cannot read: %s\n"
                             % (arg, why))
            self.assertFalse(os.path.exists(marker), "%s imported shmcfg_pkg" % arg)

    def test_duplicate_between_inputs(self):
        path = self.write("m.py", "a = 1\n")
        schema = self.write("s.yaml", "format: 1\noptions:\n  m.a:\n    type: int\n")
        p = run("--module", "m", path, "--merge", schema)
        self.assertEqual(p.returncode, 1)
        self.assertIn("%s:3: option m.a is already defined" % schema, p.stderr.decode())

    def test_output_file_and_prefix_from_path(self):
        os.makedirs(os.path.join(self.tmp, "torch", "_dynamo"))
        self.write(os.path.join("torch", "_dynamo", "config.py"), "x: int = 1\n")
        out = os.path.join(self.tmp, "o.yaml")
        run_ok(self, os.path.join("torch", "_dynamo", "config.py"), "-o", out, cwd=self.tmp)
        with open(out) as f:
            self.assertIn("\n  torch._dynamo.config.x:\n", f.read())
        # packages (__init__.py) give the prefix whatever the path
        self.write(os.path.join("torch", "__init__.py"), "")
        self.write(os.path.join("torch", "_dynamo", "__init__.py"), "")
        doc, _ = options_json(self, os.path.join(self.tmp, "torch", "_dynamo", "config.py"))
        self.assertEqual(doc["options"][0]["name"], "torch._dynamo.config.x")

    def refused_output(self, out, kind):
        """-o OUT is refused, one line, exit 1, nothing written anywhere."""
        src = self.write("ok.py", "a = 1\n")
        p = run(src, "-o", out)
        err = p.stderr.decode()
        self.assertEqual(p.returncode, 1, err)
        self.assertEqual(p.stdout, b"")
        self.assertEqual(err, "shmcfg-import: %s: not a regular file (%s); not replaced\n"
                         % (out, kind))

    def test_output_only_replaces_a_regular_file(self):
        """-o replaces a regular file atomically, as shmctl save does, and
        nothing else: a FIFO, a symbolic link (to stdout, to a file) and a
        directory are refused and stay what they were; - is stdout."""
        import stat
        fifo = os.path.join(self.tmp, "fifo")
        os.mkfifo(fifo)
        self.refused_output(fifo, "a device, FIFO or socket")
        self.assertTrue(stat.S_ISFIFO(os.lstat(fifo).st_mode))
        target = self.write("target.yaml", "kept\n")
        for dest in ("/proc/self/fd/1", target):
            link = os.path.join(self.tmp, "link")
            os.symlink(dest, link)
            self.refused_output(link, "a symbolic link")
            self.assertEqual(os.readlink(link), dest)
            os.unlink(link)
        with open(target) as f:
            self.assertEqual(f.read(), "kept\n")
        self.refused_output(self.tmp, "a directory")
        self.assertEqual(sorted(os.listdir(self.tmp)), ["fifo", "ok.py", "target.yaml"])
        # a regular file is replaced; - is stdout
        src = os.path.join(self.tmp, "ok.py")
        run_ok(self, src, "-o", target)
        with open(target) as f:
            self.assertIn("\n  ok.a:\n", f.read())
        self.assertIn(b"\n  ok.a:\n", run_ok(self, src, "-o", "-").stdout)

    def test_output_device_not_replaced(self):
        """-o on a character device (the node of /dev/null, made here: as
        root, -o /dev/null replaced the system's) is refused."""
        import stat
        if os.geteuid() != 0:
            self.skipTest("making a device node needs root")
        dev = os.path.join(self.tmp, "devnull")
        try:
            os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        except PermissionError:
            self.skipTest("mknod is not permitted here (no CAP_MKNOD)")
        self.refused_output(dev, "a device, FIFO or socket")
        st = os.lstat(dev)
        self.assertTrue(stat.S_ISCHR(st.st_mode))
        self.assertEqual(st.st_rdev, os.makedev(1, 3))

    def test_several_sources_are_merged(self):
        a = self.write("a.py", "x = 1\n")
        os.makedirs(os.path.join(self.tmp, "pb"))
        b = self.write(os.path.join("pb", "b.py"), "y: str = 'q'\n")
        schema = self.write("s.yaml", "format: 1\noptions:\n  z.z:\n    type: bool\n")
        doc, _ = options_json(self, "a.py", os.path.join("pb", "b.py"), "--merge", schema,
                              cwd=self.tmp)
        self.assertEqual([o["name"] for o in doc["options"]], ["a.x", "pb.b.y", "z.z"])
        self.assertEqual(doc["sources"], [display(a), display(b), display(schema)])
        p = run(a, a)
        self.assertEqual(p.returncode, 1)
        self.assertIn("%s:1: option a.x is already defined (%s:1)" % (a, a), p.stderr.decode())

    def test_comment(self):
        path = self.write("ok.py", "a = 1\n")
        p = run_ok(self, "--module", "m", path, "--comment", "one", "--comment", "two")
        self.assertEqual(p.stdout.decode().split("\n")[:4],
                         ["# shmcfg schema (format 1)",
                          "# Generated by tools/shmcfg-import from %s; do not edit."
                          % display(path), "# one", "# two"])

    def test_deprecation_message(self):
        """torch's Config(deprecated=True, deprecation_message=...)."""
        path = self.write("dep.py", textwrap.dedent("""\
            a = Config(default=True, deprecated=True, deprecation_message="does nothing")
            b = Config(default=1, deprecated=True)
            c = Config(default=1, deprecated=False, deprecation_message="unused")
            """))
        doc, err = options_json(self, "--module", "m", path)
        by = by_name(doc)
        self.assertEqual(by["m.a"]["deprecated"], "does nothing")
        self.assertEqual(by["m.b"]["deprecated"], "")
        self.assertNotIn("deprecated", by["m.c"])
        self.assertEqual(err, "")

    def test_json_non_finite_floats(self):
        """--format json is JSON: a float that is not finite (a default, a
        bound, a choice, an implied value) is written as the library's JSON
        writes it (shmcfg_value_json() in lib/values/json.c: "inf", "-inf",
        "nan"), not Infinity or NaN."""
        path = self.write("nf.py", textwrap.dedent("""\
            a: float = 1e999
            b: float = -1e999
            c: float = 1e999 - 1e999
            d: float = Config(default=1.0, min=-1e999, max=1e999, choices=[1.0, 1e999])
            e: bool = Config(default=False, implies={"m.a": -1e999, "m.c": 1e999 * 0})
            """))
        p = run_ok(self, "--module", "m", path, "--format", "json")

        def refuse(name):
            raise ValueError("not JSON: %s" % name)
        doc = json.loads(p.stdout.decode(), parse_constant=refuse)
        by = by_name(doc)
        self.assertEqual([by[n]["default"] for n in ("m.a", "m.b", "m.c")],
                         ["inf", "-inf", "nan"])
        self.assertEqual((by["m.d"]["min"], by["m.d"]["max"], by["m.d"]["choices"]),
                         ("-inf", "inf", [1.0, "inf"]))
        self.assertEqual(by["m.e"]["implies"], {"m.a": "-inf", "m.c": "nan"})

    def test_helpers_and_inherited_fields(self):
        """x = f() where f returns one expression the importer reads; the
        fields @inherit_fields_from(P) copies into a class."""
        path = self.write("h.py", textwrap.dedent("""\
            def tri():
                "A docstring."
                return get_tristate_env("H_TRI")
            def two():
                a = 1
                return a
            x: Optional[bool] = tri()
            y = two()
            class base:
                one = 1
                two: str = "b"
                _hidden = 3
            @inherit_fields_from(base)
            class child(base):
                two: str = "c"
                three = 3
            """))
        doc, err = options_json(self, "--module", "m", path)
        by = by_name(doc)
        self.assertEqual(by["m.x"], {"name": "m.x", "type": "bool", "nullable": True,
                                     "default": None, "env_default": ["H_TRI"]})
        self.assertIn("skipped m.y (%s:8): call to two() is not understood" % path, err)
        self.assertEqual([n for n in by if n.startswith("m.child.")],
                         ["m.child.two", "m.child.three", "m.child.one"])
        self.assertEqual(by["m.child.two"]["default"], "c")
        self.assertEqual(by["m.child.one"]["default"], 1)


def display(path):
    return "%s/%s" % (os.path.basename(os.path.dirname(path)), os.path.basename(path))


if __name__ == "__main__":
    unittest.main()
