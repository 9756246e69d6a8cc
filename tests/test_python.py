#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Tests of the Python binding (python/shmcfg); examples/trainer.py --demo is
tests/test_trainer_demo.py (make regtest).

Run by `make check` (exit status), or by hand from a built tree:

    python3 tests/test_python.py [-v] [TestClass.test_name]

The package comes from $top_srcdir/python, the library from $SHMCFG_LIBRARY
or $top_builddir/lib/.libs, shmctl from $top_builddir/tools (the tests that
need it are skipped when it is not built). Every test creates its own
segments under unique names and removes them.
"""

import os
import sys

if __name__ == "__main__" and os.environ.get("SHMCFG_SANITIZERS"):
    # ctypes cannot load an ASan-built library into an uninstrumented python
    # (and the package loads it on import); the plain build runs these tests.
    # 77: automake's SKIP.
    print("# skipped: libshmcfg is built with sanitizers", file=sys.stderr)
    sys.exit(77)

import copy
import ctypes
import ctypes.util
import errno
import gc
import hashlib
import json
import math
import multiprocessing
import os
import pickle
import pwd
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import types
import typing
import unittest
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
SRCDIR = os.path.abspath(os.environ.get("top_srcdir") or os.path.join(HERE, os.pardir))
BUILDDIR = os.path.abspath(os.environ.get("top_builddir") or SRCDIR)
PYDIR = os.path.join(SRCDIR, "python")
if "SHMCFG_LIBRARY" not in os.environ:
    _built = os.path.join(BUILDDIR, "lib", ".libs", "libshmcfg.so.3")
    if os.path.exists(_built):
        os.environ["SHMCFG_LIBRARY"] = _built  # inherited by child processes
if "SHMCFG_PYTHON_EXT" not in os.environ:  # the build tree's C read (shmcfg._fast)
    _built = os.path.join(BUILDDIR, "python", "shmcfg", ".libs", "_fast.so")
    if os.path.exists(_built):
        os.environ["SHMCFG_PYTHON_EXT"] = _built
sys.path.insert(0, PYDIR)
os.environ["PYTHONPATH"] = PYDIR + os.pathsep + os.environ.get("PYTHONPATH", "")

import shmcfg  # noqa: E402
from shmcfg import _lib  # noqa: E402
from shmcfg import canon, config as configmod  # noqa: E402

SHMCTL = os.path.join(BUILDDIR, "tools", "shmctl")
if not (os.path.isfile(SHMCTL) and os.access(SHMCTL, os.X_OK)):
    SHMCTL = None
TRAINER = os.path.join(SRCDIR, "examples", "trainer.py")

# "Promptly", in seconds: a retired segment's waits return within a 100 ms
# slice; the rest is for a busy machine (make -j16 check on 2 cores), and it
# still tells them from a 10 s timeout or none.
PROMPT_S = 5

DYNAMO = "torch._dynamo.config"
COMPILER = "torch.compiler.config"

SCHEMA = """\
format: 1
options:
  app.config.lr:
    type: float
    default: 0.5
    min: 0.0
    max: 10.0
  app.config.steps:
    type: int
    default: 10
    min: 1
    max: 1000
  app.config.mode:
    type: str
    default: "fast"
    choices: ["fast", "slow"]
  app.config.tags:
    type: list
    default: ["b", "a"]
  app.config.names:
    type: set
    default: ["y", "x"]
  app.config.ratio:
    type: float
    nullable: true
  app.config.count:
    type: int
    nullable: true
  app.config.enabled:
    type: bool
    nullable: true
  app.config.label:
    type: str
    nullable: true
  app.config.flag:
    type: bool
    default: false
    implies: {app.config.steps: 5}
  app.config.other_flag:
    type: bool
    default: false
    implies: {app.config.steps: 7}
  app.config.triton.cudagraphs:
    type: bool
    default: true
  app.config.triton.deep.level:
    type: int
    default: 2
  app.config.old_flag:
    type: bool
    default: false
    deprecated: "use flag"
  app.config.cache_dir:
    type: str
    default: "/tmp"
    hash_ignored: true
  app.config.from_env:
    type: str
    default: ""
    env_default: [SHMCFG_PYTEST_ENV]
  app.config.forced:
    type: bool
    default: false
    env_force: [SHMCFG_PYTEST_FORCE]
  app.config.steps_alias:
    type: int
    alias: app.config.steps
  app.config._secret:
    type: int
    default: 1
    private: true
  app.config.unsaved:
    type: int
    default: 3
    save_ignored: true
  other.config.x:
    type: int
    default: 1
"""

_counter = [0]


def segname(tag="t"):
    _counter[0] += 1
    return f"pytest-{tag}-{os.getpid()}-{_counter[0]}"


def run_shmctl(*args):
    p = subprocess.run([SHMCTL] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    if p.returncode != 0:
        raise AssertionError(f"shmctl {' '.join(args)}: {p.returncode} {p.stderr}")
    return p.stdout


def in_thread(fn, *args):
    """Run fn in a new thread; return its result (or raise its exception)."""
    out = {}

    def run():
        try:
            out["v"] = fn(*args)
        except BaseException as e:  # noqa: B902
            out["e"] = e
    t = threading.Thread(target=run)
    t.start()
    t.join()
    if "e" in out:
        raise out["e"]
    return out["v"]


class SegTest(unittest.TestCase):
    FAST = None  # fast_reads of the segments made here (None: the default)

    def make(self, schema_text=None, **kw):
        name = segname()
        kw.setdefault("fast_reads", self.FAST)
        seg = shmcfg.create(name, schema_text=schema_text, force=True, **kw)
        self.addCleanup(shmcfg.unlink, name, True)
        self.addCleanup(seg.close)
        return seg

    def app(self, **kw):
        kw.setdefault("no_env", True)
        seg = self.make(SCHEMA, **kw)
        return seg, seg.module("app.config")


# ---------------------------------------------------------------------------
# Structures
# ---------------------------------------------------------------------------

LAYOUT_C = r"""
#include <stdio.h>
#include <stddef.h>
#include "shmcfg.h"
#define S(T) printf("size %s %zu\n", #T, sizeof(T));
#define O(T, f) printf("off %s %s %zu\n", #T, #f, offsetof(T, f));
int main(void) {
    S(shmcfg_value) O(shmcfg_value, type) O(shmcfg_value, is_null) O(shmcfg_value, source)
    O(shmcfg_value, u) O(shmcfg_value, u.str.len) O(shmcfg_value, u.list.count)
    O(shmcfg_value, u.list.bytes) O(shmcfg_value, owned)
    S(shmcfg_optinfo) O(shmcfg_optinfo, type) O(shmcfg_optinfo, flags) O(shmcfg_optinfo, doc)
    O(shmcfg_optinfo, env_default) O(shmcfg_optinfo, n_env_default) O(shmcfg_optinfo, env_force)
    O(shmcfg_optinfo, n_env_force) O(shmcfg_optinfo, knob) O(shmcfg_optinfo, deprecated)
    O(shmcfg_optinfo, alias) O(shmcfg_optinfo, alias_final) O(shmcfg_optinfo, has_min)
    O(shmcfg_optinfo, has_max) O(shmcfg_optinfo, min) O(shmcfg_optinfo, max)
    O(shmcfg_optinfo, choices) O(shmcfg_optinfo, def) O(shmcfg_optinfo, n_implies)
    S(shmcfg_create_opts) O(shmcfg_create_opts, readers) O(shmcfg_create_opts, heap_bytes)
    O(shmcfg_create_opts, mode) O(shmcfg_create_opts, gid) O(shmcfg_create_opts, flags)
    O(shmcfg_create_opts, envp)
    S(shmcfg_attach_opts) O(shmcfg_attach_opts, flags) O(shmcfg_attach_opts, expect_schema_hash)
    O(shmcfg_attach_opts, owner)
    S(struct shmcfg_view) O(struct shmcfg_view, nopts) O(struct shmcfg_view, nslots)
    O(struct shmcfg_view, cells_off) O(struct shmcfg_view, current)
    O(struct shmcfg_view, slots) O(struct shmcfg_view, slot_size) O(struct shmcfg_view, slot)
    O(struct shmcfg_view, copy)
    S(shmcfg_commit) O(shmcfg_commit, time_ns) O(shmcfg_commit, pid) O(shmcfg_commit, uid)
    O(shmcfg_commit, nchanged) O(shmcfg_commit, nids) O(shmcfg_commit, ids)
    S(shmcfg_layer_change) O(shmcfg_layer_change, layer) O(shmcfg_layer_change, old_set)
    O(shmcfg_layer_change, new_set) O(shmcfg_layer_change, old_value) O(shmcfg_layer_change, new_value)
    S(shmcfg_history_entry) O(shmcfg_history_entry, time_ns) O(shmcfg_history_entry, pid)
    O(shmcfg_history_entry, uid) O(shmcfg_history_entry, user) O(shmcfg_history_entry, process)
    O(shmcfg_history_entry, who) O(shmcfg_history_entry, cluster_rev) O(shmcfg_history_entry, nchanges)
    O(shmcfg_history_entry, values_kept) O(shmcfg_history_entry, changes)
    O(shmcfg_create_opts, history) O(shmcfg_create_opts, owner)
    S(shmcfg_info) O(shmcfg_info, generation) O(shmcfg_info, size) O(shmcfg_info, nopts)
    O(shmcfg_info, nslots) O(shmcfg_info, nreaders) O(shmcfg_info, heap_bytes)
    O(shmcfg_info, heap_used) O(shmcfg_info, schema_hash) O(shmcfg_info, config_hash)
    O(shmcfg_info, create_time_ns) O(shmcfg_info, create_uid) O(shmcfg_info, create_pid)
    O(shmcfg_info, slot_gen) O(shmcfg_info, retired) O(shmcfg_info, readers_hwm)
    O(shmcfg_info, copy_fallbacks) O(shmcfg_info, writer) O(shmcfg_info, writer_pid)
    O(shmcfg_info, writer_entry) O(shmcfg_info, building)
    printf("const SHMCFG_ATTACH_OWNER %d\n", (int)SHMCFG_ATTACH_OWNER);
    printf("const SHMCFG_E_RETIRED %d\n", (int)SHMCFG_E_RETIRED);
    printf("const SHMCFG_E_OWNER %d\n", (int)SHMCFG_E_OWNER);
    printf("const SHMCFG_E_LAST %d\n", (int)SHMCFG_E_LAST);
    return 0;
}
"""

CTYPES_OF = {"shmcfg_value": _lib.Value, "shmcfg_optinfo": _lib.OptInfo,
             "shmcfg_create_opts": _lib.CreateOpts, "shmcfg_attach_opts": _lib.AttachOpts,
             "struct shmcfg_view": _lib.View, "shmcfg_commit": _lib.Commit,
             "shmcfg_info": _lib.Info, "shmcfg_layer_change": _lib.LayerChange,
             "shmcfg_history_entry": _lib.HistoryEntry}
# constants of the header the binding declares
CONSTS_OF = {"SHMCFG_ATTACH_OWNER": _lib.ATTACH_OWNER, "SHMCFG_E_RETIRED": _lib.E["RETIRED"],
             "SHMCFG_E_OWNER": _lib.E["OWNER"], "SHMCFG_E_LAST": _lib.E_LAST}


def ctypes_offset(cls, path):
    off = 0
    for part in path.split("."):
        if part == "def":
            part = "def_"
        f = getattr(cls, part)
        off += f.offset
        cls = dict((n, t) for n, t, *_ in cls._fields_)[part]
    return off


class TestLayout(unittest.TestCase):
    def test_sizes(self):
        for name, size in _lib.EXPECTED_SIZES.items():
            self.assertEqual(ctypes.sizeof(getattr(_lib, name)), size, name)

    def test_against_header(self):
        cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
        inc = [d for d in (os.path.join(BUILDDIR, "include"), os.path.join(SRCDIR, "include"))
               if os.path.isfile(os.path.join(d, "shmcfg.h"))]
        if not cc or not inc:
            self.skipTest("no C compiler or no generated include/shmcfg.h")
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(d, "layout.c")
            exe = os.path.join(d, "layout")
            with open(src, "w") as f:
                f.write(LAYOUT_C)
            p = subprocess.run(cc.split() + ["-I" + inc[0], src, "-o", exe],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            if p.returncode:
                self.skipTest(f"cannot compile the layout probe: {p.stdout[-300:]!r}")
            out = subprocess.run([exe], stdout=subprocess.PIPE, check=True,
                                 universal_newlines=True).stdout
        n = 0
        for line in out.splitlines():
            kind, rest = line.split(" ", 1)
            if kind == "size":
                t, size = rest.rsplit(" ", 1)
                self.assertEqual(ctypes.sizeof(CTYPES_OF[t]), int(size), t)
            elif kind == "const":
                c, v = rest.split()
                self.assertEqual(CONSTS_OF[c], int(v), c)
            else:
                t, field, off = rest.rsplit(" ", 2)
                self.assertEqual(ctypes_offset(CTYPES_OF[t], field), int(off), f"{t}.{field}")
            n += 1
        self.assertGreater(n, 50)


# ---------------------------------------------------------------------------
# Reads, types, writes
# ---------------------------------------------------------------------------


class TestAttributes(SegTest):
    def test_default_schema_types(self):
        seg = self.make(no_env=True)
        for modname in (DYNAMO, COMPILER):
            m = seg.module(modname)
            copy = m.get_config_copy()
            self.assertTrue(copy)
            for rel, value in copy.items():
                t = m.get_type(rel)
                v = getattr(m, rel)
                self.assertEqual(v, value, rel)
                if typing.get_origin(t) is typing.Union:
                    base = typing.get_args(t)[0]
                    self.assertIn(type(v), (base, type(None)), rel)
                else:  # lists and sets: their committing subclasses
                    self.assertIs(type(v).__mro__[1] if t in (list, set) else type(v), t, rel)
        d = seg.module(DYNAMO)
        c = seg.module(COMPILER)
        self.assertIs(d.get_type("recompile_limit"), int)
        self.assertIs(d.get_type("verbose"), bool)
        self.assertEqual(d.get_type("log_file_name"), typing.Optional[str])
        self.assertIs(d.get_type("reorderable_logging_functions"), set)
        self.assertIs(c.get_type("cache_key_tag"), str)
        self.assertEqual(c.get_type("job_id"), typing.Optional[str])
        self.assertEqual(d.recompile_limit, 8)
        self.assertEqual(d.accumulated_recompile_limit, 256)
        self.assertIs(d.dynamic_shapes, True)
        self.assertIs(d.verbose, False)
        self.assertIsNone(d.log_file_name)
        self.assertEqual(d.reorderable_logging_functions, set())
        self.assertEqual(c.cache_key_tag, "")
        self.assertEqual(c.recompile_limit, 8)  # an alias

    def test_app_types(self):
        seg, m = self.app()
        self.assertEqual(m.lr, 0.5)
        self.assertIs(type(m.lr), float)
        self.assertIs(type(m.steps), int)
        self.assertEqual(m.mode, "fast")
        self.assertEqual(m.tags, ["b", "a"])
        self.assertIs(type(m.tags), shmcfg.CommittingList)
        self.assertIsInstance(m.tags, list)
        self.assertEqual(m.names, {"x", "y"})
        self.assertIs(type(m.names), shmcfg.CommittingSet)
        self.assertIsInstance(m.names, set)
        for n in ("ratio", "count", "enabled", "label"):
            self.assertIsNone(getattr(m, n))
        self.assertEqual(m.get_type("ratio"), typing.Optional[float])
        self.assertEqual(m.get_type("count"), typing.Optional[int])
        self.assertEqual(m.get_type("enabled"), typing.Optional[bool])
        self.assertEqual(m.get_type("label"), typing.Optional[str])
        self.assertIs(m.get_type("lr"), float)
        self.assertIs(m.get_type("tags"), list)
        self.assertIs(m.get_type("names"), set)
        self.assertIs(m.get_type("triton.cudagraphs"), bool)

    def test_assign_every_type(self):
        seg, m = self.app()
        cases = [("lr", 2.25), ("lr", 3), ("steps", 999), ("mode", "slow"), ("tags", ["z", "a", "z"]),
                 ("tags", ("q",)), ("names", {"b", "a"}), ("names", ["c", "c", "a"]),
                 ("ratio", 0.125), ("ratio", None), ("count", -(1 << 63)), ("count", (1 << 63) - 1),
                 ("count", None), ("enabled", True), ("enabled", None), ("label", "h\u00e9llo \u2603"),
                 ("label", ""), ("label", None), ("lr", 0.0)]
        for name, value in cases:
            g = seg.generation
            setattr(m, name, value)
            got = getattr(m, name)
            if isinstance(value, (set, frozenset)) or (name == "names" and value is not None):
                self.assertEqual(got, set(value), name)
            elif isinstance(value, tuple):
                self.assertEqual(got, list(value), name)
            else:
                self.assertEqual(got, value, name)
                self.assertIs(type(got) if type(got) is not shmcfg.CommittingList else list,
                              float if name in ("lr", "ratio") and value is not None
                              else type(value), name)
            self.assertGreaterEqual(seg.generation, g)
        m.ratio = float("inf")
        self.assertEqual(m.ratio, float("inf"))
        m.ratio = float("nan")
        self.assertNotEqual(m.ratio, m.ratio)

    def test_nested_names(self):
        seg, m = self.app()
        self.assertIs(m.triton.cudagraphs, True)
        self.assertEqual(m.triton.deep.level, 2)
        self.assertEqual(getattr(m, "triton.deep.level"), 2)
        m.triton.deep.level = 4
        self.assertEqual(m.triton.deep.level, 4)
        setattr(m, "triton.cudagraphs", False)
        self.assertIs(m.triton.cudagraphs, False)
        del m.triton.cudagraphs
        self.assertIs(m.triton.cudagraphs, True)
        with m.patch({"triton.deep.level": 9}):
            self.assertEqual(m.triton.deep.level, 9)
        self.assertEqual(m.triton.deep.level, 4)
        with self.assertRaises(AttributeError) as cm:
            m.triton.nope
        self.assertIn("app.config.triton.nope", str(cm.exception))
        self.assertIn("triton.deep.level", m.get_config_copy())
        self.assertEqual(seg.module("app.config.triton").deep.level, 4)

    def test_fresh_lists_and_sets(self):
        # each read is a copy; its in-place changes commit (tests/test_torch_fidelity.py)
        seg, m = self.app()
        self.assertIsNot(m.tags, m.tags)
        self.assertIsNot(m.names, m.names)
        copy = m.get_config_copy()
        self.assertIs(type(copy["tags"]), list)  # copies are plain and stay copies
        copy["tags"].append("z")
        copy["names"].add("z")
        self.assertEqual(m.tags, ["b", "a"])
        self.assertEqual(m.names, {"x", "y"})
        with m.patch(tags=["p"]):
            self.assertEqual(m.tags, ["p"])
        self.assertEqual(m.tags, ["b", "a"])

    def test_assignment_commits(self):
        seg, m = self.app()
        g = seg.generation
        m.steps = 42
        self.assertEqual(seg.generation, g + 1)
        other = shmcfg.attach(seg.name, fast_reads=self.FAST)
        self.addCleanup(other.close)
        self.assertEqual(other.module("app.config").steps, 42)
        other.module("app.config").steps = 43
        self.assertEqual(m.steps, 43)  # the cached value of the old generation is not served
        m.steps = 43  # nothing changes: no new generation
        self.assertEqual(seg.generation, g + 2)
        self.assertEqual(seg.get("app.config.steps"), 43)

    def test_alias(self):
        seg, m = self.app()
        m.steps_alias = 12
        self.assertEqual(m.steps, 12)
        m.steps = 13
        self.assertEqual(m.steps_alias, 13)
        self.assertNotIn("steps_alias", m.get_config_copy())
        seg2 = self.make(no_env=True)
        d, c = seg2.module(DYNAMO), seg2.module(COMPILER)
        c.recompile_limit = 32
        self.assertEqual(d.recompile_limit, 32)
        del c.recompile_limit
        self.assertEqual(d.recompile_limit, 8)
        self.assertTrue(c._is_default("recompile_limit"))

    def test_del_clears_user_layer(self):
        seg, m = self.app()
        self.assertTrue(m._is_default("steps"))
        m.steps = 10  # equal to the default, but set: not default (the seed's rule)
        self.assertFalse(m._is_default("steps"))
        g = seg.generation
        del m.steps
        self.assertTrue(m._is_default("steps"))
        self.assertEqual(m.steps, 10)
        self.assertEqual(seg.generation, g + 1)
        m.names = {"q"}
        del m.names
        self.assertEqual(m.names, {"x", "y"})
        self.assertEqual(seg.generation, g + 3)
        del m.names  # nothing to clear: no commit
        self.assertEqual(seg.generation, g + 3)

    def test_env_layers(self):
        seg, m = self.app(no_env=False, env={"SHMCFG_PYTEST_ENV": "from-env",
                                             "SHMCFG_PYTEST_FORCE": "1"})
        self.assertEqual(m.from_env, "from-env")
        self.assertFalse(m._is_default("from_env"))
        m.from_env = "user"
        self.assertEqual(m.from_env, "user")  # user beats env_default
        self.assertIs(m.forced, True)
        m.forced = False
        self.assertIs(m.forced, True)  # env_force beats user
        with m.patch(forced=False):
            self.assertIs(m.forced, True)  # and patches

    def test_implications(self):
        seg, m = self.app()
        m.flag = True
        self.assertEqual(m.steps, 5)
        m.steps = 100
        self.assertEqual(m.steps, 5)  # the implication wins over the user layer
        m.flag = False
        self.assertEqual(m.steps, 100)
        with m.patch(flag=True):
            self.assertEqual(m.steps, 5)
            self.assertEqual(in_thread(lambda: m.steps), 100)
        self.assertEqual(m.steps, 100)

    def test_deprecated_warns_once(self):
        seg, m = self.app()
        configmod._warned.discard("app.config.old_flag")  # once per process
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            self.assertIs(m.old_flag, False)
            self.assertIs(m.old_flag, False)
        msgs = [str(x.message) for x in w if issubclass(x.category, FutureWarning)]
        self.assertEqual(len(msgs), 1)
        self.assertIn("app.config.old_flag", msgs[0])
        self.assertIn("use flag", msgs[0])

    def test_module_object(self):
        seg, m = self.app()
        self.assertIsInstance(m, types.ModuleType)
        self.assertIsInstance(m, shmcfg.ConfigModule)
        self.assertEqual(m.__name__, "app.config")
        self.assertIs(seg.module("app.config"), m)
        self.assertIn("steps", dir(m))
        self.assertTrue(hasattr(m, "steps"))
        self.assertFalse(hasattr(m, "nope"))
        self.assertFalse(hasattr(m, "__path__"))
        root = seg.module("")
        self.assertEqual(getattr(root, "app.config.steps"), 10)
        self.assertEqual(root.other.config.x, 1)
        m2 = pickle.loads(pickle.dumps(m))
        self.addCleanup(m2.__dict__["_shmcfg_seg"].close)
        self.assertEqual(m2.steps, 10)
        self.assertEqual(m2.__name__, "app.config")
        self.assertEqual(pickle.loads(pickle.dumps(seg)).name, seg.name)

    def test_segment_api(self):
        seg, m = self.app()
        self.assertEqual(seg.generation, 1)
        self.assertEqual(len(seg.config_hash), 16)
        self.assertEqual(len(seg.schema_hash), 16)
        self.assertIn("app.config.steps", seg.options())
        info = seg.describe("app.config.steps_alias")
        self.assertEqual(info.alias, "app.config.steps")
        self.assertIs(info.type, int)
        self.assertTrue(seg.describe("app.config.cache_dir").hash_ignored)
        g = seg.set({"app.config.steps": 7, "app.config.mode": "slow"})
        self.assertEqual(g, 2)
        self.assertEqual((m.steps, m.mode), (7, "slow"))
        self.assertEqual(sorted(seg.changes(1, 2)), ["app.config.mode", "app.config.steps",
                                                     "app.config.steps_alias"])
        info = seg.commit_info(2)
        self.assertEqual(info["pid"], os.getpid())
        self.assertIn("app.config.steps", info["changed"])
        self.assertEqual(seg.reset("app.config.steps", "app.config.mode"), 3)
        self.assertEqual((m.steps, m.mode), (10, "fast"))
        with seg.transaction() as t:
            t["app.config.steps"] = 8
            t.set("app.config.lr", 1.5)
            del t["app.config.mode"]
        self.assertEqual(seg.generation, 4)
        with self.assertRaises(RuntimeError):
            with seg.transaction() as t:
                t["app.config.steps"] = 9
                raise RuntimeError("abort")
        self.assertEqual(m.steps, 8)
        self.assertEqual(seg.current(), (4, seg.config_hash))
        self.assertIn("app.config.steps = 8", seg.codegen())
        self.assertIn("shmctl set", seg.codegen("shell"))
        self.assertEqual(json.loads(seg.codegen("json"))["app.config.steps"], 8)

    def test_cluster_layer_and_revision(self):
        """The cluster layer sits under user; the revision a commit applied
        is every process's to read, and stays through local commits."""
        seg, m = self.app()
        self.assertEqual(seg.cluster_revision, 0)
        with seg.transaction(layer="cluster", origin=(17, "alice@h1")) as t:
            t["app.config.steps"] = 21
        g = seg.generation
        self.assertEqual(m.steps, 21)
        self.assertEqual(seg.cluster_revision, 17)
        info = seg.commit_info(g)
        self.assertEqual((info["cluster_rev"], info["who"]), (17, "alice@h1"))
        seg.set({"app.config.steps": 5})  # this host's override wins
        self.assertEqual(m.steps, 5)
        self.assertEqual(seg.cluster_revision, 17)
        seg.reset("app.config.steps")
        self.assertEqual(m.steps, 21)
        ro = shmcfg.attach(seg.name, readonly=True)
        try:
            self.assertEqual(ro.cluster_revision, 17)
        finally:
            ro.close()
        with self.assertRaises(ValueError):
            seg.transaction(layer="env_force")

    @unittest.skipUnless(SHMCTL, "tools/shmctl is not built")
    def test_watch_names_the_cluster_revision_as_log_does(self):
        """shmctl watch --json gives each commit's who and the cluster
        revision its generation carries, as log --json does: a local commit
        after a cluster one still carries the cluster's revision."""
        seg, m = self.app()
        w = subprocess.Popen([SHMCTL, "watch", seg.name, "--json", "--count", "2", "--timeout", "60"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
        try:
            self.assertIn("shmctl: watching", w.stderr.readline())
            with seg.transaction(layer="cluster", origin=(17, "alice@h1")) as t:
                t["app.config.steps"] = 21
            first = w.stdout.readline()  # printed before the next commit: not merged with it
            seg.set({"app.config.steps": 5})
            out, err = w.communicate(timeout=60)
            out = first + out
        finally:
            if w.poll() is None:
                w.kill()
                w.wait()
        self.assertEqual(w.returncode, 0, err)
        seen = [json.loads(x) for x in out.splitlines()]
        log = {e["generation"]: e for e in json.loads(run_shmctl("log", seg.name, "--json"))}
        self.assertEqual([(x["who"], x["cluster_revision"]) for x in seen],
                         [("alice@h1", 17), (log[seen[1]["generation"]]["who"], 17)])
        for x in seen:
            e = log[x["generation"]]
            self.assertEqual((x["who"], x["cluster_revision"]), (e["who"], e["cluster_revision"]))


# ---------------------------------------------------------------------------
# History
# ---------------------------------------------------------------------------


class TestHistory(SegTest):
    def test_entries_with_values(self):
        """Every commit with its committer and each layer change's values."""
        seg, m = self.app()
        g1 = seg.set({"app.config.steps": 7, "app.config.tags": ["q", "p"]})
        g2 = seg.set({"app.config.label": None})
        with seg.transaction(layer="cluster", origin=(5, "bob@h2")) as t:
            t["app.config.steps"] = 20
        g3 = seg.generation
        g4 = seg.reset("app.config.steps")
        h = seg.history()
        self.assertEqual([e["generation"] for e in h], [g4, g3, g2, g1, 1])
        e = h[3]
        self.assertEqual((e["pid"], e["uid"], e["origin"], e["values_kept"], e["nchanges"]),
                         (os.getpid(), os.getuid(), e["process"], True, 2))
        self.assertEqual(e["user"], pwd.getpwuid(os.getuid()).pw_name)
        self.assertEqual(sorted((c["name"], c["layer"], c["old_set"], c["old"], c["new"])
                                for c in e["changes"]),
                         [("app.config.steps", "user", False, None, 7),
                          ("app.config.tags", "user", False, None, ["q", "p"])])
        self.assertEqual(h[2]["changes"], [{"name": "app.config.label", "layer": "user",
                                            "old_set": False, "old": None,
                                            "new_set": True, "new": None}])
        self.assertEqual((h[1]["changes"][0]["layer"], h[1]["who"], h[1]["origin"], h[1]["cluster_rev"]),
                         ("cluster", "bob@h2", "bob@h2", 5))
        self.assertEqual(h[0]["changes"], [{"name": "app.config.steps", "layer": "user",
                                            "old_set": True, "old": 7,
                                            "new_set": False, "new": None}])
        # filters: an alias stands for its target; n
        self.assertEqual([e["generation"] for e in seg.history(options=["app.config.steps_alias"])],
                         [g4, g3, g1])
        self.assertEqual([e["generation"] for e in seg.history(n=2, options="app.config.steps")],
                         [g4, g3])
        with self.assertRaises(shmcfg.UnknownOptionError):
            seg.history(options=["app.config.nope"])
        # a reader of its own reads the same
        ro = shmcfg.attach(seg.name, readonly=True)
        try:
            self.assertEqual(ro.history(), h)
        finally:
            ro.close()

    def test_values_at_and_rollback(self):
        """The values of every generation, as they were read then; changes
        with values; rollback as one commit."""
        seg, m = self.app()
        seen = {seg.generation: {n: seg.get(n) for n in seg.options()}}
        for steps, mode, label in ((3, "slow", "a"), (4, "fast", None), (5, "slow", "é b")):
            g = seg.set({"app.config.steps": steps, "app.config.mode": mode,
                         "app.config.label": label})
            seen[g] = {n: seg.get(n) for n in seg.options()}
        for g, vals in seen.items():
            self.assertEqual(seg.values_at(g), vals, g)
        self.assertEqual(seg.changes(2, 3, values=True),
                         {"app.config.steps": (3, 4), "app.config.steps_alias": (3, 4),
                          "app.config.mode": ("slow", "fast"), "app.config.label": ("a", None)})
        g = seg.rollback(2, who="pytest")
        self.assertEqual(g, 5)
        self.assertEqual((m.steps, m.mode, m.label), (3, "slow", "a"))
        self.assertEqual(seg.history(n=1)[0]["who"], "pytest")
        self.assertEqual(seg.rollback(2), 5)  # nothing to restore: no commit
        oldest, rebuildable, cur = seg.history_range()
        self.assertEqual((oldest, rebuildable, cur), (1, 1, 5))

    def test_too_old(self):
        """A small history: the oldest generations can no longer be rebuilt."""
        seg, m = self.app(history=8)
        for i in range(1, 21):
            seg.set({"app.config.steps": i})
        self.assertEqual([e["generation"] for e in seg.history()], list(range(21, 13, -1)))
        self.assertEqual(seg.values_at(13)["app.config.steps"], 12)
        with self.assertRaises(shmcfg.NotFoundError) as cm:
            seg.values_at(12)
        self.assertIn("the oldest the history can rebuild is 13", str(cm.exception))
        # the library's detail alone, as shmctl prints it: not followed by
        # the code's generic text ("No such file or directory" misled)
        self.assertTrue(str(cm.exception).endswith("13"), str(cm.exception))
        self.assertEqual(cm.exception.errname, "ENOENT")
        self.assertIsNone(seg.changes(5, values=True))
        with self.assertRaises(shmcfg.NotFoundError):
            seg.rollback(3)
        self.assertEqual(seg.generation, 21)


# ---------------------------------------------------------------------------
# Patches
# ---------------------------------------------------------------------------


class TestPatch(SegTest):
    def test_three_forms(self):
        seg, m = self.app()
        for p in (m.patch("steps", 20), m.patch(steps=20), m.patch({"steps": 20})):
            with p:
                self.assertEqual(m.steps, 20)
            self.assertEqual(m.steps, 10)
        with m.patch(steps=3, mode="slow", names={"q"}):
            self.assertEqual((m.steps, m.mode, m.names), (3, "slow", {"q"}))
        self.assertEqual((m.steps, m.mode, m.names), (10, "fast", {"x", "y"}))
        self.assertEqual(seg.generation, 1)  # patches never commit

    def test_decorator(self):
        seg, m = self.app()

        @m.patch("steps", 21)
        def f1():
            return m.steps

        @m.patch(steps=22, label="x")
        def f2():
            return m.steps, m.label

        @m.patch({"steps": 23})
        def f3():
            return m.steps

        self.assertEqual(f1(), 21)
        self.assertEqual(f2(), (22, "x"))
        self.assertEqual(f3(), 23)
        self.assertEqual(m.steps, 10)
        self.assertEqual(in_thread(f1), 21)

    def test_testcase_decorator(self):
        seg, m = self.app()
        seen = []

        @m.patch(steps=31)
        class Inner(unittest.TestCase):
            def test_it(self):
                seen.append(m.steps)

        with open(os.devnull, "w") as devnull:
            r = unittest.TextTestRunner(stream=devnull).run(
                unittest.defaultTestLoader.loadTestsFromTestCase(Inner))
        self.assertTrue(r.wasSuccessful())
        self.assertEqual(seen, [31])
        self.assertEqual(m.steps, 10)

    def test_nesting(self):
        seg, m = self.app()
        p = m.patch(steps=2)
        with m.patch(steps=1, mode="slow"):
            with p:
                self.assertEqual((m.steps, m.mode), (2, "slow"))
                with p:  # the same patch object, re-entered
                    self.assertEqual(m.steps, 2)
                    with m.patch(steps=3):
                        self.assertEqual(m.steps, 3)
                    self.assertEqual(m.steps, 2)
                self.assertEqual(m.steps, 2)
            self.assertEqual((m.steps, m.mode), (1, "slow"))
        self.assertEqual((m.steps, m.mode), (10, "fast"))

    def test_restored_on_exception(self):
        seg, m = self.app()
        with self.assertRaises(KeyError):
            with m.patch(steps=4):
                raise KeyError("x")
        self.assertEqual(m.steps, 10)
        self.assertTrue(seg.fast_reads or self.FAST is False)

    def test_thread_local(self):
        seg, m = self.app()
        with m.patch(steps=50):
            self.assertEqual(m.steps, 50)
            self.assertEqual(in_thread(lambda: m.steps), 10)
            self.assertEqual(in_thread(lambda: m.get_config_copy()["steps"]), 10)
        # a patch in another thread is invisible here
        inside = threading.Event()
        release = threading.Event()
        seen = []

        def patched():
            with m.patch(steps=60, mode="slow"):
                seen.append(m.steps)
                inside.set()
                release.wait(10)
            seen.append(m.steps)
        t = threading.Thread(target=patched)
        t.start()
        self.assertTrue(inside.wait(10))
        try:
            self.assertEqual((m.steps, m.mode), (10, "fast"))
            self.assertFalse(seg.fast_reads)  # a patch is open in the process
        finally:
            release.set()
            t.join()
        self.assertEqual(seen, [60, 10])
        self.assertEqual(m.steps, 10)

    def test_new_thread_sees_shared_values(self):
        seg, m = self.app()
        m.steps = 77
        self.assertEqual(in_thread(lambda: m.steps), 77)

    def test_assignment_inside_patch_commits(self):
        seg, m = self.app()
        g = seg.generation
        with m.patch(steps=5):
            m.steps = 99
            self.assertEqual(seg.generation, g + 1)  # committed at once
            self.assertEqual(m.steps, 5)  # this thread keeps its patch
            self.assertEqual(in_thread(lambda: m.steps), 99)  # others see the commit
            self.assertEqual(seg.get("app.config.steps"), 5)
            m.mode = "slow"  # not patched: this thread sees the commit too
            self.assertEqual(m.mode, "slow")
        self.assertEqual(m.steps, 99)  # the committed value, not the one before
        self.assertEqual(m.mode, "slow")

    def test_closure_patcher(self):
        seg, m = self.app()
        change = m._make_closure_patcher(steps=11, mode="slow")
        revert = change()
        try:
            self.assertEqual((m.steps, m.mode), (11, "slow"))
            self.assertEqual(in_thread(lambda: m.steps), 10)
            revert2 = change()  # nests
            revert2()
            self.assertEqual(m.steps, 11)
        finally:
            revert()
        self.assertEqual((m.steps, m.mode), (10, "fast"))
        with m.patch(steps=3):
            r = change()
            self.assertEqual(m.steps, 11)
            r()
            self.assertEqual(m.steps, 3)
        self.assertEqual(in_thread(lambda: (change()(), m.steps)[1]), 10)
        self.assertEqual(seg.generation, 1)

    def test_patches_end_out_of_order(self):
        seg, m = self.app()
        # each takes away only its own changes, as the seed's patches do
        p1, p2 = m.patch(steps=1), m.patch(mode="slow")
        p1.__enter__()
        p2.__enter__()
        p1.__exit__(None, None, None)
        self.assertEqual((m.steps, m.mode), (10, "slow"))
        p2.__exit__(None, None, None)
        self.assertEqual((m.steps, m.mode), (10, "fast"))
        # a patch that is not open closes nothing, and says so
        with m.patch(steps=3):
            with self.assertRaises(shmcfg.NotFoundError):
                m.patch(mode="slow").__exit__(None, None, None)
            with self.assertRaises(shmcfg.NotFoundError):
                p1.__exit__(None, None, None)
            self.assertEqual(m.steps, 3)
        self.assertEqual(m.steps, 10)
        # generators interleaved in one thread

        def gen(**kw):
            with m.patch(**kw):
                yield
                yield
        g1, g2 = gen(steps=7), gen(mode="slow")
        next(g1)
        next(g2)
        self.assertEqual((m.steps, m.mode), (7, "slow"))
        self.assertEqual(list(g1), [None])  # g1's block ends first
        self.assertEqual((m.steps, m.mode), (10, "slow"))
        self.assertEqual(list(g2), [None])
        self.assertEqual((m.steps, m.mode), (10, "fast"))
        # one patch object re-entered: its innermost entry ends first
        p = m.patch(steps=4)
        with p:
            m.steps = 20
            with m.patch(steps=5), p:
                self.assertEqual(m.steps, 4)
            self.assertEqual(m.steps, 4)
        self.assertEqual(m.steps, 20)

    def test_closure_patcher_reverted_under_a_patch(self):
        seg, m = self.app()
        revert = m._make_closure_patcher(steps=11)()
        with m.patch(mode="slow"):
            revert()  # its own frame, under the patch's
            self.assertEqual((m.steps, m.mode), (10, "slow"))
            with self.assertRaises(shmcfg.NotFoundError):
                revert()
        self.assertEqual((m.steps, m.mode), (10, "fast"))

    def test_closure_patcher_after_close(self):
        seg, m = self.app()
        change = m._make_closure_patcher(steps=5)
        revert = change()
        seg.close()  # the C patcher's handle is gone: neither may reach it
        with self.assertRaisesRegex(shmcfg.Error, "is closed"):
            revert()
        with self.assertRaisesRegex(shmcfg.Error, "is closed"):
            change()
        other = shmcfg.attach(seg.name, fast_reads=self.FAST)
        self.addCleanup(other.close)
        self.assertEqual(other.get("app.config.steps"), 10)

    def test_patch_errors(self):
        seg, m = self.app()
        with self.assertRaises(AttributeError) as cm:
            m.patch(nope=1)
        self.assertIn("app.config.nope", str(cm.exception))
        with self.assertRaises(TypeError):
            m.patch(steps="3")
        with self.assertRaises(TypeError):
            m.patch(label=3)
        with self.assertRaises(TypeError):
            m.patch(steps=None)
        with self.assertRaises(TypeError):
            m.patch(1, 2)
        with self.assertRaises(TypeError):
            m.patch("steps")
        with self.assertRaises(TypeError):
            m.patch({"steps": 1}, mode="slow")
        with self.assertRaises(TypeError):
            m.patch(None, 3)
        with self.assertRaises(ValueError) as cm:
            with m.patch(steps=0):  # range: checked by the library when entered
                pass
        self.assertIn("minimum", str(cm.exception))
        with self.assertRaises(ValueError):
            with m.patch(mode="medium"):
                pass
        self.assertEqual(m.steps, 10)  # no frame was left open
        self.assertTrue(seg.fast_reads or self.FAST is False)
        with self.assertRaises(AttributeError):
            m._make_closure_patcher(nope=1)
        with self.assertRaises(TypeError):
            m._make_closure_patcher(steps=1.5)
        with self.assertRaises(ValueError):
            m._make_closure_patcher(steps=-1)
        # ended out of order: a closure patch inside a patch(), reverted
        # after it, each taking away its own change only
        change = m._make_closure_patcher(steps=11)
        p = m.patch(steps=3, mode="slow")
        p.__enter__()
        revert = change()
        p.__exit__(None, None, None)
        self.assertEqual((m.steps, m.mode), (11, "fast"))
        revert()
        with self.assertRaises(shmcfg.NotFoundError):
            p.__exit__(None, None, None)
        self.assertEqual(m.steps, 10)


# ---------------------------------------------------------------------------
# Hash, save/load, codegen
# ---------------------------------------------------------------------------


def _child_hash(q, name, modname):
    seg = shmcfg.attach(name)
    m = seg.module(modname)
    q.put((m.get_hash(), seg.config_hash, seg.generation, m.get_config_copy()))


def _child_commit(q, seg, value):
    """Runs in a forked child, with the parent's Segment object."""
    try:
        m = seg.module("app.config")
        before = m.steps
        m.steps = value
        q.put((before, m.steps, seg.generation))
    except BaseException as e:  # noqa: B902
        q.put(repr(e))


class TestHashSaveLoad(SegTest):
    def test_get_hash(self):
        seg, m = self.app()
        h0 = m.get_hash()
        self.assertIsInstance(h0, bytes)
        self.assertEqual(len(h0), 16)
        self.assertEqual(m.get_hash(), h0)
        m.steps = 11
        h1 = m.get_hash()
        self.assertNotEqual(h1, h0)
        m.cache_dir = "/elsewhere"  # hash-ignored
        self.assertEqual(m.get_hash(), h1)
        seg.module("other.config").x = 5  # another module
        self.assertEqual(m.get_hash(), h1)
        self.assertNotEqual(seg.module("").get_hash(), m.get_hash())
        with m.patch(steps=10):
            self.assertEqual(m.get_hash(), h0)  # the patch is hashed...
            self.assertEqual(in_thread(m.get_hash), h1)  # ...in this thread only
        self.assertEqual(m.get_hash(), h1)
        del m.steps
        self.assertEqual(m.get_hash(), h0)  # a function of the values only

    def test_get_hash_encoding(self):
        # BLAKE2b-128 of canon's module framing of the records that
        # TestCanonicalEncoding proves equal to the library's
        seg, m = self.app()
        m.names = {"z", "\u00e9", "a"}
        m.ratio = -0.0
        _, items = configmod._hashed_values(m)
        self.assertEqual(m.get_hash(), hashlib.blake2b(
            canon.module_encoding("app.config", items), digest_size=16).digest())
        # golden values (of SCHEMA's defaults): a change of the encoding or
        # of its framing would change every get_hash() between releases
        seg2, m2 = self.app()
        self.assertEqual(m2.get_hash().hex(), "497899d1229286ff83295ccd494a312d")
        self.assertEqual(seg2.module("other.config").get_hash().hex(),
                         "9345b878e491804ff73fa813184cda59")

    def test_hash_equal_across_processes(self):
        seg, m = self.app()
        m.steps = 123
        m.names = {"p", "q", "r"}
        ctx = multiprocessing.get_context("spawn")  # a fresh interpreter: new hash seed
        q = ctx.Queue()
        ps = [ctx.Process(target=_child_hash, args=(q, seg.name, "app.config")) for _ in range(2)]
        for p in ps:
            p.start()
        res = [q.get(timeout=60) for _ in ps]
        for p in ps:
            p.join(30)
        for h, ch, g, copy in res:
            self.assertEqual(h, m.get_hash())
            self.assertEqual(ch, seg.config_hash)
            self.assertEqual(g, seg.generation)
            self.assertEqual(copy, m.get_config_copy())

    @unittest.skipUnless(SHMCTL, "tools/shmctl is not built")
    def test_config_hash_matches_shmctl(self):
        seg, m = self.app()
        m.steps = 9
        out = run_shmctl("hash", seg.name, "--json")
        j = json.loads(out)
        self.assertEqual(j["config_hash"], seg.config_hash.hex())
        self.assertEqual(j["generation"], seg.generation)

    def test_save_load(self):
        seg, m = self.app()
        m.steps = 17
        m.names = {"k", "j"}
        m.ratio = float("inf")
        m.label = "saved"
        blob = m.save_config()
        self.assertIsInstance(blob, bytes)
        self.assertEqual(blob[:2], b"\x80\x02")  # PyTorch's: pickle protocol 2...
        vals = pickle.loads(blob)  # ...of a dict of relative names
        self.assertEqual(vals["steps"], 17)
        self.assertEqual(vals["names"], {"j", "k"})
        self.assertIs(type(vals["names"]), set)
        self.assertEqual(vals["ratio"], float("inf"))
        self.assertEqual(vals["_secret"], 1)  # private: kept, as PyTorch's
        self.assertNotIn("steps_alias", vals)  # alias
        self.assertNotIn("unsaved", vals)  # save-ignored
        self.assertNotIn("x", vals)  # another module
        self.assertEqual(set(vals), set(m.get_config_copy()) - {"unsaved"})
        for n in ("steps", "names", "ratio", "label"):
            delattr(m, n)
        g = seg.generation
        self.assertEqual(m.load_config(blob), g + 1)  # one commit
        self.assertEqual((m.steps, m.names, m.ratio, m.label), (17, {"j", "k"}, float("inf"), "saved"))
        # a dict of relative names, and of full names
        m.load_config({"steps": 18, "app.config.mode": "slow"})
        self.assertEqual((m.steps, m.mode), (18, "slow"))
        with m.patch(steps=1):
            self.assertEqual(pickle.loads(m.save_config())["steps"], 1)
        self.assertEqual(pickle.loads(m.save_config())["steps"], 18)
        # the root module's: every option by full name
        root = pickle.loads(seg.module("").save_config())
        self.assertEqual(root["app.config.steps"], 18)
        self.assertEqual(root["other.config.x"], 1)
        # the JSON of a dump loads too
        seg.module("").load_config({"app.config.steps": 19})
        dump = seg.dump()
        m.steps = 1
        m.load_config(dump)
        self.assertEqual(m.steps, 19)
        m.steps = 1
        m.load_config(dump.encode())
        self.assertEqual(m.steps, 19)

    def test_load_errors(self):
        seg, m = self.app()
        g = seg.generation
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            m.load_config({"steps": 12, "no_such_key": 1})
        self.assertTrue(any("no_such_key" in str(x.message) for x in w))
        self.assertEqual(m.steps, 12)
        g = seg.generation
        with self.assertRaises(ValueError):
            m.load_config({"mode": "slow", "steps": 0})  # one bad value: nothing changes
        with self.assertRaises(TypeError):
            m.load_config({"mode": "slow", "steps": "0"})
        self.assertEqual((m.mode, seg.generation), ("fast", g))
        with self.assertRaises(ValueError):
            m.load_config(b"{not json")
        with self.assertRaises(ValueError):
            m.load_config(b"[1, 2]")
        with self.assertRaises(TypeError):
            m.load_config(42)

    @unittest.skipUnless(SHMCTL, "tools/shmctl is not built")
    def test_save_matches_shmctl_dump(self):
        seg, m = self.app()
        m.steps = 19
        m.tags = ["z", "y"]
        dump = json.loads(run_shmctl("dump", seg.name))
        mine = json.loads(seg.dump())
        self.assertEqual(mine["values"], dump["values"])
        self.assertEqual(mine["config_hash"], dump["config_hash"])
        del m.steps
        # and shmctl loads what seg.dump() wrote
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            f.write(seg.dump())
        self.addCleanup(os.unlink, f.name)
        m.steps = 3
        run_shmctl("load", seg.name, f.name)
        self.assertEqual(m.steps, 10)

    def test_codegen(self):
        seg, m = self.app()
        self.assertEqual(m.codegen_config(), "")
        m.steps = 14
        m.names = {"b", "a"}
        m.label = "it's"
        m.ratio = float("nan")
        m.triton.deep.level = 3
        m.unsaved = 4  # save-ignored: left out
        code = m.codegen_config()
        lines = code.splitlines()
        self.assertIn("app.config.steps = 14", lines)
        self.assertIn("app.config.names = {'a', 'b'}", lines)
        self.assertIn("app.config.label = \"it's\"", lines)
        self.assertIn("app.config.ratio = float('nan')", lines)
        self.assertIn("app.config.triton.deep.level = 3", lines)
        self.assertFalse(any("unsaved" in x or "steps_alias" in x for x in lines))
        # the statements reproduce the settings
        seg2, m2 = self.app()
        exec(code, {"app": types.SimpleNamespace(config=m2)})
        self.assertEqual((m2.steps, m2.names, m2.label, m2.triton.deep.level),
                         (14, {"a", "b"}, "it's", 3))
        self.assertNotEqual(m2.ratio, m2.ratio)
        with m.patch(steps=2):
            self.assertIn("app.config.steps = 2", m.codegen_config().splitlines())

    def test_config_copies(self):
        seg, m = self.app()
        copy = m.get_config_copy()
        self.assertEqual(copy["steps"], 10)
        self.assertIn("_secret", copy)
        self.assertNotIn("steps_alias", copy)
        port = m.save_config_portable()
        self.assertNotIn("_secret", port)
        self.assertIn("steps", port)
        self.assertTrue(m._is_default("steps"))
        with m.patch(steps=3):
            self.assertFalse(m._is_default("steps"))
        with self.assertRaises(KeyError):
            m._is_default("nope")


# ---------------------------------------------------------------------------
# The canonical encoding: the binding's equals lib/slot/hash.c's
# ---------------------------------------------------------------------------


class _XXH128(ctypes.Structure):
    _fields_ = [("low64", ctypes.c_uint64), ("high64", ctypes.c_uint64)]


def _load_xxh3_128():
    """XXH3-128 (canonical form: big-endian high64 then low64) from libxxhash,
    which libshmcfg links; None if it cannot be loaded."""
    for cand in ("libxxhash.so.0", ctypes.util.find_library("xxhash")):
        if not cand:
            continue
        try:
            f = ctypes.CDLL(cand).XXH3_128bits
        except (OSError, AttributeError):
            continue
        f.restype = _XXH128
        f.argtypes = [ctypes.c_char_p, ctypes.c_size_t]

        def xxh3_128(data, f=f):
            h = f(data, len(data))
            return struct.pack(">QQ", h.high64, h.low64)
        xxh3_128.halves = lambda data, f=f: (lambda h: (h.low64, h.high64))(f(data, len(data)))
        return xxh3_128
    return None


XXH3_128 = _load_xxh3_128()

# Every type and its edge values (more are committed by the test), names
# declared out of bytewise order, an alias and a hash-ignored option.
CANON_SCHEMA = """\
format: 1
options:
  z.set.items:
    type: set
    default: ["y", "é", "x", "", "X", "€😀"]
  z.set.empty:
    type: set
    default: []
  y.list.items:
    type: list
    default: ["b", "a", "", "é", "b"]
  y.list.empty:
    type: list
    default: []
  x.str.empty:
    type: str
    default: ""
  x.str.text:
    type: str
    default: "héllo € 😀"
  w.float.v:
    type: float
    default: 1.5
  w.float.negzero:
    type: float
    default: -0.0
  w.float.nan:
    type: float
    default: 0.0
  w.float.nan2:
    type: float
    default: 0.0
  w.float.inf:
    type: float
    default: 0.0
  w.float.ninf:
    type: float
    default: 0.0
  v.int.zero:
    type: int
    default: 0
  v.int.neg:
    type: int
    default: -1
  v.int.min:
    type: int
    default: -9223372036854775808
  v.int.max:
    type: int
    default: 9223372036854775807
  u.bool.on:
    type: bool
    default: true
  u.bool.off:
    type: bool
    default: false
  n.bool:
    type: bool
    nullable: true
  n.int:
    type: int
    nullable: true
  n.float:
    type: float
    nullable: true
  n.str:
    type: str
    nullable: true
  n.list:
    type: list
    nullable: true
  n.set:
    type: set
    nullable: true
  o.ab:
    type: int
    default: 1
  o.a_b:
    type: int
    default: 2
  o.a.c:
    type: int
    default: 3
  o.A:
    type: int
    default: 4
  o.a:
    type: int
    default: 5
  a.alias:
    type: int
    alias: v.int.neg
  h.ignored:
    type: str
    default: "not hashed"
    hash_ignored: true
"""


def _bits_float(bits):
    return struct.unpack("<d", struct.pack("<Q", bits))[0]


@unittest.skipUnless(XXH3_128, "libxxhash.so.0 cannot be loaded")
class TestCanonicalEncoding(SegTest):
    """get_hash() encodes values with shmcfg.canon, which asks the library
    for each option's record (shmcfg_value_record(), lib/slot/hash.c's encoder).
    Here the config hash of a segment is computed again from what the
    binding encodes (the same option selection, reads, conversion of values
    and records as get_hash(), framed as lib/slot/hash.c frames them) and
    digested with XXH3-128 from libxxhash: it must equal the library's,
    value for value, on every type."""

    def assert_encoding_equal(self, seg):
        g, items = configmod._hashed_values(seg.module(""))
        cur = seg.current()
        self.assertEqual(g, cur.generation)
        low = high = 0
        for rec in canon.config_records(items):
            lo, hi = XXH3_128.halves(rec)
            low, high = low + lo, high + hi
        data = canon.config_final(low, high)
        self.assertTrue(data.startswith(b"shmcfg config hash v2\n"))
        self.assertEqual(XXH3_128(data).hex(), cur.config_hash.hex(),
                         f"generation {g}: {items!r}")
        return items

    def test_record_refuses_a_nul(self):
        # a name with a NUL would reach the library cut at it (ctypes):
        # the record of another option; a string with one, no setter takes
        with self.assertRaises(ValueError):
            canon.record("a\0b", _lib.INT, 1)
        with self.assertRaises((shmcfg.Error, ValueError)):
            canon.record("ab", _lib.STR, "a\0b")
        self.assertTrue(canon.record("ab", _lib.STR, "ab").endswith(b"ab"))

    def test_every_type(self):
        seg = self.make(CANON_SCHEMA, no_env=True)
        seen = self.assert_encoding_equal(seg)
        names = [n for n, _, _ in seen]
        self.assertNotIn("a.alias", names)
        self.assertNotIn("h.ignored", names)
        self.assertEqual(len(names), len(seg.options()) - 2)
        before = seg.config_hash
        seg.set({"h.ignored": "changed"})  # a new generation, the same hash
        self.assertEqual(seg.config_hash, before)
        self.assert_encoding_equal(seg)
        seg.set({
            "w.float.nan": math.nan,
            "w.float.nan2": _bits_float(0xFFF0000000000001),  # negative, signalling, payload
            "w.float.inf": math.inf,
            "w.float.ninf": -math.inf,
            "w.float.v": 5e-324,
            "v.int.zero": 1 << 62,
            "u.bool.on": False,
            "u.bool.off": True,
            "n.bool": False,
            "n.int": -(1 << 63),
            "n.float": -0.0,
            "n.str": "",
            "n.list": [],
            "n.set": set(),
            "x.str.text": "\u00fc" + "\U0001f600" * 3,
            "y.list.items": ("\u20ac", "a\u00e9", ""),
            "z.set.items": frozenset({"b", "\u00e9", "B", "\U0001f600"}),
        })
        seen += self.assert_encoding_equal(seg)
        seg.set({"n.bool": True, "n.int": (1 << 63) - 1, "n.float": math.nan,
                 "n.str": "\u00e9", "n.list": ["", "x"], "n.set": {"", "x", "\u00e9"}})
        seen += self.assert_encoding_equal(seg)
        seg.reset(*[n for n in seg.options() if n != "a.alias"])
        seen += self.assert_encoding_equal(seg)
        self.assertEqual(seg.config_hash, before)
        # what was compared: every type, null and not, and the edge values
        by = {}
        for _, kind, v in seen:
            by.setdefault(kind, []).append(v)
        for kind in (_lib.BOOL, _lib.INT, _lib.FLOAT, _lib.STR, _lib.LIST, _lib.SET):
            self.assertIn(None, by[kind], kind)
            self.assertTrue(any(v is not None for v in by[kind]), kind)
        self.assertTrue({True, False} <= set(by[_lib.BOOL]))
        self.assertTrue({0, -1, 1 << 62, -(1 << 63), (1 << 63) - 1} <= set(by[_lib.INT]))
        floats = [v for v in by[_lib.FLOAT] if v is not None]
        self.assertTrue(any(math.isnan(v) for v in floats))
        self.assertTrue(any(v == 0 and math.copysign(1, v) < 0 for v in floats))
        self.assertTrue({math.inf, -math.inf, 5e-324} <= set(floats))
        strs = [v for v in by[_lib.STR] if v is not None]
        self.assertIn("", strs)
        self.assertTrue(any(not v.isascii() for v in strs))
        for kind in (_lib.LIST, _lib.SET):
            vals = [v for v in by[kind] if v is not None]
            self.assertTrue(any(not v for v in vals), kind)
            self.assertTrue(any(len(v) > 2 and any(not s.isascii() for s in v) for v in vals),
                            kind)

    def test_embedded_default_schema(self):
        seg = self.make(no_env=True)
        self.assert_encoding_equal(seg)
        m = seg.module(DYNAMO)
        m.recompile_limit = 16
        self.assert_encoding_equal(seg)


# ---------------------------------------------------------------------------
# Processes, generations, waiting
# ---------------------------------------------------------------------------


# ---------------------------------------------------------------------------
# Schemas as Python values: shmcfg.Schema, SchemaOption, schema_yaml()
# ---------------------------------------------------------------------------


def _opt(name, type_, **fields):
    o = shmcfg.SchemaOption(name, type_)
    for k, v in fields.items():
        setattr(o, k, v)
    return o


# every attribute a schema file has, and values that need care in YAML
SCHEMA_OPTIONS = [
    _opt("m.flag", "bool", default=False, implies=[("m.n", 5), ("m.s", "x")],
         doc="Turns it on.\n\n  Indented."),
    _opt("m.n", "int", default=3, min=1, max=9, env_default=["M_N"], env_force=["yes"],
         knob="pytorch/m:n", hash_ignored=True),
    _opt("m.f", "float", default=1e-05, choices=[1e-05, 0.5], save_ignored=True),
    _opt("m.s", "str", nullable=True, default=None, deprecated="use \"m.t\"",
         doc=" a leading space, a tab\t"),
    _opt("m.t", "str", default="h\u00e9 \"q\" \\ \n"),
    _opt("m.l", "list", default=["b", "a", ""], private=True),
    _opt("m.set", "set", default={"y", "x"}),
    _opt("m.z", "int"),  # no default: the type's zero
    _opt("m.alias", "int", alias="m.n", doc="Old name."),
]

SCHEMA_OPTIONS_YAML = """\
# shmcfg schema (format 1)
# a comment
format: 1
options:
  m.flag:
    type: bool
    default: false
    implies: {m.n: 5, m.s: "x"}
    doc: |-
      Turns it on.

        Indented.
  m.n:
    type: int
    default: 3
    env_default: [M_N]
    env_force: ["yes"]
    knob: "pytorch/m:n"
    hash_ignored: true
    min: 1
    max: 9
  m.f:
    type: float
    default: 1.0e-05
    save_ignored: true
    choices: [1.0e-05, 0.5]
  m.s:
    type: str
    nullable: true
    default: null
    deprecated: "use \\"m.t\\""
    doc: " a leading space, a tab\\t"
  m.t:
    type: str
    default: "h\u00e9 \\"q\\" \\\\ \\n"
  m.l:
    type: list
    default: ["b", "a", ""]
    private: true
  m.set:
    type: set
    default: ["x", "y"]
  m.z:
    type: int
  m.alias:
    type: int
    alias: m.n
    doc: |-
      Old name.
"""


class TestSchema(unittest.TestCase):
    """The binding's schemas: declared and checked by the library, read back
    from a segment of them, and written as a schema file by the one writer
    (shmcfg-import's too)."""

    FIELDS = ("type", "nullable", "default", "env_default", "env_force", "knob", "alias",
              "implies", "deprecated", "hash_ignored", "save_ignored", "private", "min",
              "max", "choices", "doc")

    def fields(self, o):
        return {k: getattr(o, k) for k in self.FIELDS}

    def test_yaml_text(self):
        self.assertEqual(shmcfg.schema_yaml(SCHEMA_OPTIONS, ["a comment"]), SCHEMA_OPTIONS_YAML)
        self.assertEqual(shmcfg.schema_yaml([]),
                         "# shmcfg schema (format 1)\nformat: 1\noptions: {}\n")

    def test_yaml_read_back(self):
        # what the writer writes, the library reads back to the same options
        with shmcfg.Schema.from_text(shmcfg.schema_yaml(SCHEMA_OPTIONS), "t.yaml") as s:
            back = s.options()
        self.assertEqual([o.name for o in back], [o.name for o in SCHEMA_OPTIONS])
        for want, got in zip(SCHEMA_OPTIONS, back):
            w = self.fields(want)
            if w["type"] == "int" and w["default"] is None and not w["nullable"] \
                    and w["alias"] is None:
                w["default"] = 0
            self.assertEqual(self.fields(got), w, want.name)

    def test_declared_one_by_one(self):
        # add() declares each as the C table would (optdef()): the same options
        with shmcfg.Schema() as s:
            for o in SCHEMA_OPTIONS:
                s.add(o)
            back = s.options()
        with shmcfg.Schema.from_text(shmcfg.schema_yaml(SCHEMA_OPTIONS)) as s:
            self.assertEqual([self.fields(o) for o in back],
                             [self.fields(o) for o in s.options()])

    def test_add_refuses(self):
        cases = [
            (_opt("a.b", "int", default=20, max=9), "a.b: default: value 20 is above the maximum 9"),
            (_opt("a.b", "float", default=0.0, doc="x\0y"), "a.b: doc holds a NUL character"),
            (_opt("a.b", "str", default="\udc80"), "a.b: default: value"),
            (_opt("a.b", "str", default="x", doc="\udc80"), "a.b: doc is not valid UTF-8"),
            (_opt("a.b", "tuple", default=()), "a.b: type 'tuple' is not one of bool, int"),
            (_opt("a.b", "int", default=1, min=5, max=2), "a.b: min 5 is above max 2"),
            (_opt("a b", "int", default=1), "option name 'a b' is invalid"),
        ]
        for o, text in cases:
            with shmcfg.Schema() as s:
                with self.assertRaises(shmcfg.OptionValueError, msg=text) as cm:
                    s.add(o)
                self.assertTrue(str(cm.exception).startswith(text), (str(cm.exception), text))
                s.add(_opt("ok.x", "int", default=1))  # the refused one left nothing
                self.assertEqual([x.name for x in s.options()], ["ok.x"])

    def test_unsound_schema_refused(self):
        before = set(os.listdir("/dev/shm"))
        with shmcfg.Schema() as s:
            s.add(_opt("a.x", "int", alias="a.y"))
            with self.assertRaises(shmcfg.OptionValueError) as cm:
                s.options()
        self.assertIn("a.x: alias target a.y is not declared", str(cm.exception))
        self.assertFalse({n for n in os.listdir("/dev/shm") if "shmcfg-schema." in n} - before)
        with self.assertRaises(shmcfg.Error) as cm:
            shmcfg.Schema.load(os.path.join(SRCDIR, "no-such-schema.yaml"))
        with self.assertRaises(shmcfg.OptionValueError) as cm:
            shmcfg.Schema.from_text("format: 1\noptions:\n  a:\n    type: nope\n", "x.yaml")
        self.assertIn("x.yaml:4", cm.exception.detail)
        s = shmcfg.Schema()
        s.close()
        with self.assertRaises(ValueError):
            s.add(_opt("a.b", "int", default=1))
        with self.assertRaises(ValueError):
            s.options()


PKG_DIR = os.path.dirname(os.path.abspath(shmcfg.__file__))


def _other_user_python():
    """The command that runs this package's Python as uid and gid 65534
    (setpriv, util-linux), or skip the test: the interpreter and the build
    tree must be theirs to read."""
    for py in (sys.executable, "/usr/bin/python3"):
        cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", py]
        try:
            p = subprocess.run(cmd + ["-c", "import shmcfg"], env=dict(os.environ, PYTHONPATH=PYDIR),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
        except OSError:
            break
        if p.returncode == 0:
            return cmd
    raise unittest.SkipTest("no Python that uid 65534 can run this package with (setpriv)")


def _interrupted_at(k, fn):
    """Run fn() with a KeyboardInterrupt raised at the k-th point of the
    package's code where CPython delivers one (a signal's handler, an
    asynchronous exception): after a call of a C function returns and at
    the entry of a Python function, but in a finaliser (whose exceptions
    CPython reports and drops). Whether it was raised (False: fn() has
    fewer points)."""
    seen = [0]

    def profile(frame, event, arg):
        if event not in ("call", "c_return") or not frame.f_code.co_filename.startswith(PKG_DIR):
            return
        f = frame
        while f is not None:
            if f.f_code.co_name == "__del__":
                return
            f = f.f_back
        seen[0] += 1
        if seen[0] == k:
            raise KeyboardInterrupt  # and CPython unsets the profile function
    sys.setprofile(profile)
    try:
        fn()
    except KeyboardInterrupt:
        return True
    finally:
        sys.setprofile(None)
    return False


class TestProcesses(SegTest):
    def test_child_sees_commit_and_commits(self):
        seg, m = self.app()
        m.steps = 31
        ctx = multiprocessing.get_context("fork")
        q = ctx.Queue()
        p = ctx.Process(target=_child_commit, args=(q, seg, 32))
        p.start()
        res = q.get(timeout=60)
        p.join(30)
        self.assertIsInstance(res, tuple, res)
        before, after, gen = res
        self.assertEqual((before, after), (31, 32))
        self.assertEqual(m.steps, 32)  # the child's commit is seen here
        self.assertEqual(seg.generation, gen)

    def test_subprocess_attach(self):
        seg, m = self.app()
        code = textwrap.dedent(f"""
            import shmcfg
            seg = shmcfg.attach({seg.name!r})
            m = seg.module("app.config")
            print(m.steps, m.names == {{"x", "y"}})
            g = seg.generation
            m.mode = "slow"
            print(seg.generation - g)
        """)
        m.steps = 44
        p = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.split(), ["44", "True", "1"])
        self.assertEqual(m.mode, "slow")

    def test_reads_never_go_backwards(self):
        seg, m = self.app()
        code = textwrap.dedent(f"""
            import shmcfg
            seg = shmcfg.attach({seg.name!r})
            for i in range(11, 211):
                seg.set({{"app.config.steps": i, "app.config.label": str(i)}})
        """)
        p = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE)
        last = 0
        reads = 0
        deadline = time.monotonic() + 60
        while last < 210 and time.monotonic() < deadline:
            g = seg.generation
            v = m.steps
            label = m.label
            self.assertGreaterEqual(v, last)
            self.assertGreaterEqual(v, g + 9 if g > 1 else 10)  # steps = generation + 9
            if label is not None:
                self.assertGreaterEqual(int(label), v)  # read after steps: same or later
            last = v
            reads += 1
        _, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 0, err)
        self.assertEqual(m.steps, 210)
        self.assertEqual(seg.generation, 201)
        self.assertGreater(reads, 0)

    def test_snapshot_reads_agree_under_commits(self):
        """A writer commits steps = i and label = str(i) together; reads of
        both from one snapshot always agree, and stay as they were while
        it is held, in a read-write and a read-only Segment."""
        seg, m = self.app()
        ro = shmcfg.attach(seg.name, readonly=True, fast_reads=self.FAST)
        self.addCleanup(ro.close)
        code = textwrap.dedent(f"""
            import shmcfg
            seg = shmcfg.attach({seg.name!r})
            for i in range(11, 611):
                seg.set({{"app.config.steps": i, "app.config.label": str(i)}})
        """)
        p = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE)
        snaps = mixed = 0
        deadline = time.monotonic() + 60
        while seg.generation < 601 and time.monotonic() < deadline:
            for s in (seg, ro):
                with s.snapshot() as snap:
                    steps, label = snap["app.config.steps"], snap["label"]  # a full name, a suffix
                    if label is not None and label != str(steps):
                        mixed += 1
                    g = snap.generation
                    self.assertEqual(steps, g + 9 if g > 1 else 10)
                    self.assertEqual((snap["app.config.steps"], snap.generation), (steps, g))
                snaps += 1
        _, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 0, err)
        self.assertEqual(mixed, 0, f"{mixed} of {snaps} snapshots mixed two generations")
        self.assertGreater(snaps, 0)

    def test_snapshot_api(self):
        seg, m = self.app()
        snap = seg.snapshot()
        g = snap.generation
        self.assertEqual((g, snap.config_hash), tuple(seg.current()))
        m.steps = 77
        self.assertEqual(snap.get("app.config.steps"), 10)  # held: the old generation
        self.assertEqual(snap["app.config.tags"], ["b", "a"])
        with self.assertRaises(shmcfg.UnknownOptionError):
            snap["app.config.nope"]
        with m.patch(steps=5):  # a patch is this thread's, not the generation's
            with seg.snapshot() as now:
                self.assertEqual((now["steps"], now.generation), (77, g + 1))
        self.assertIn("generation %d" % g, repr(snap))
        snap.release()
        snap.release()  # again: nothing
        self.assertIn("released", repr(snap))
        with self.assertRaises(shmcfg.Error):
            snap["app.config.steps"]
        # any thread may release, and one held across the Segment's close stays readable
        snap = seg.snapshot()
        t = threading.Thread(target=snap.release)
        t.start()
        t.join()
        other = shmcfg.attach(seg.name, fast_reads=self.FAST)
        held = other.snapshot()
        other.close()
        self.assertEqual(held["app.config.steps"], 77)
        held.release()
        # a copy would release the generation twice: copies and pickles are refused
        snap = seg.snapshot()
        for how in (copy.copy, copy.deepcopy, pickle.dumps):
            with self.assertRaisesRegex(TypeError, "cannot be copied or pickled"):
                how(snap)
        # reattach() renumbers the Segment's options for the new schema: a
        # snapshot of the old one says so instead of reading another option
        first = SCHEMA.replace("options:\n", "options:\n  app.config.first:\n    type: str\n", 1)
        shmcfg.create(seg.name, schema_text=first, force=True, no_env=True).close()
        seg.reattach()
        with self.assertRaisesRegex(shmcfg.Error, "before seg.reattach"):
            snap["app.config.steps"]
        snap.release()
        with seg.snapshot() as now:
            self.assertEqual(now["app.config.first"], "")

    def test_interrupts_leave_no_pin_and_no_error(self):
        """A KeyboardInterrupt at any point of snapshot(), release() or a
        value's conversion where CPython can deliver one leaves no pin held
        (a writer of a segment of 2 slots commits twice after each) and no
        error in a finaliser."""
        seg, m = self.app(slots=2)
        _lib.set_commit_timeout(seg._handle(), 200)  # a leaked pin fails the commit
        unraisable = []
        self.addCleanup(setattr, sys, "unraisablehook", sys.unraisablehook)
        sys.unraisablehook = unraisable.append

        def take_and_release():
            snap = seg.snapshot()
            snap.release()

        def assign():
            m.tags = ["x", "y"]  # a _CVal of a list, which owns memory

        for fn in (take_and_release, assign):
            k = 1
            while _interrupted_at(k, fn):
                gc.collect()
                for i in range(2):
                    m.steps = k * 2 + i
                k += 1
            self.assertGreater(k, 5, fn.__name__)
        self.assertEqual([u.exc_value for u in unraisable
                          if not isinstance(u.exc_value, KeyboardInterrupt)], [])

    def test_wait(self):
        seg, m = self.app()
        g = seg.generation
        t0 = time.monotonic()
        self.assertIsNone(seg.wait(g, timeout=0.05))
        self.assertGreaterEqual(time.monotonic() - t0, 0.04)
        self.assertIsNone(seg.wait(timeout=0))
        self.assertEqual(seg.wait(g - 1, timeout=0), g)  # already past

        def commit():
            time.sleep(0.1)
            m.steps = 2
        t = threading.Thread(target=commit)
        t.start()
        got = seg.wait(g, timeout=10)
        t.join()
        self.assertEqual(got, g + 1)
        self.assertEqual(m.steps, 2)

    @unittest.skipUnless(SHMCTL, "tools/shmctl is not built")
    def test_shmctl_set_is_seen(self):
        seg, m = self.app()
        d = seg.module("app.config")
        self.assertEqual(d.steps, 10)
        run_shmctl("set", seg.name, "app.config.steps=66", "app.config.names=[\"n\"]")
        self.assertEqual(seg.generation, 2)
        self.assertEqual((d.steps, d.names), (66, {"n"}))
        self.assertEqual(run_shmctl("get", seg.name, "app.config.steps").strip(), "66")

    def test_readonly(self):
        seg, m = self.app()
        ro = shmcfg.attach(seg.name, readonly=True, fast_reads=self.FAST)
        self.addCleanup(ro.close)
        self.assertTrue(ro.readonly)
        rm = ro.module("app.config")
        m.steps = 3
        self.assertEqual(rm.steps, 3)
        with self.assertRaises(PermissionError) as cm:
            rm.steps = 4
        self.assertIsInstance(cm.exception, shmcfg.Error)
        with rm.patch(steps=8):  # patches need no write access
            self.assertEqual(rm.steps, 8)


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------


class TestErrors(SegTest):
    def test_unknown_names(self):
        seg, m = self.app()
        for op in (lambda: m.nope, lambda: setattr(m, "nope", 1), lambda: delattr(m, "nope"),
                   lambda: m.get_type("nope")):
            with self.assertRaises(AttributeError) as cm:
                op()
            msg = str(cm.exception)
            self.assertIn("app.config.nope", msg)
            self.assertIn("does not exist", msg)
            self.assertIsInstance(cm.exception, shmcfg.UnknownOptionError)
        with self.assertRaises(KeyError):  # as the seed's get_type
            m.get_type("nope")
        with self.assertRaises(AttributeError):
            seg.get("app.config.nope")
        with self.assertRaises(AttributeError):
            seg.set({"nope": 1})
        with self.assertRaises(shmcfg.UnknownOptionError):
            seg.module("no.such.module")
        d = self.make(no_env=True).module(DYNAMO)
        with self.assertRaises(AttributeError) as cm:
            d.recompile_limt
        self.assertIn("torch._dynamo.config.recompile_limt", str(cm.exception))
        # a typo of an attribute: the closest option named, on a read, a write
        # and a delete; none when nothing is close
        hint = "; did you mean torch._dynamo.config.recompile_limit?"
        for op in (lambda: d.recompile_limt, lambda: setattr(d, "recompile_limt", 3),
                   lambda: delattr(d, "recompile_limt")):
            with self.assertRaises(shmcfg.UnknownOptionError) as cm:
                op()
            self.assertTrue(str(cm.exception).endswith(hint), str(cm.exception))
        with self.assertRaises(AttributeError) as cm:
            m.zzzz
        self.assertNotIn("did you mean", str(cm.exception))

    def test_user_typed_names(self):
        """seg.get/set/describe/transaction take what shmctl takes: a unique
        suffix, resolved by the library (shmcfg_resolve), with its
        ambiguity and did-you-mean details; attribute access stays exact."""
        seg, m = self.app()
        self.assertEqual(seg.get("steps"), 10)
        self.assertEqual(seg.get("deep.level"), 2)
        seg.set({"steps": 42, "triton.cudagraphs": False})
        self.assertEqual(m.steps, 42)
        self.assertIs(m.triton.cudagraphs, False)
        self.assertEqual(seg.describe("lr").name, "app.config.lr")
        with seg.transaction() as t:
            t["mode"] = "slow"
        self.assertEqual(m.mode, "slow")
        seg.reset("mode")
        self.assertEqual(m.mode, "fast")
        # flag: a full part of app.config.flag only (other_flag ends in _flag)
        self.assertEqual(seg.describe("flag").name, "app.config.flag")
        with self.assertRaises(shmcfg.UnknownOptionError) as cm:
            seg.get("stpes")
        self.assertEqual(cm.exception.detail,
                         f"no option 'stpes' in segment '{seg.name}'; did you mean steps?")
        self.assertEqual(cm.exception.errname, "SHMCFG_E_NOOPT")
        with self.assertRaises(shmcfg.UnknownOptionError) as cm:
            seg.set({"stpes": 1})
        self.assertIn("did you mean steps?", str(cm.exception))
        self.assertEqual(m.steps, 42)  # nothing changed
        amb = self.make("format: 1\noptions:\n  a.level:\n    type: int\n"
                        "  b.level:\n    type: int\n", no_env=True)
        with self.assertRaises(shmcfg.UnknownOptionError) as cm:
            amb.get("level")
        self.assertEqual(cm.exception.detail, "'level' is ambiguous: a.level, b.level")
        for bad in ("", "\udcff\udcfe", "x" * 65536, "app.config.steps\n"):
            with self.assertRaises(shmcfg.UnknownOptionError):
                seg.get(bad)
        with self.assertRaises(AttributeError):
            m.triton.deep.lvel  # attributes stay exact: no suffix, no guess
        with self.assertRaises(AttributeError):
            seg.module("app").steps

    def test_wrong_types(self):
        seg, m = self.app()
        bad = [("steps", "3"), ("steps", 3.0), ("steps", True), ("steps", None),
               ("lr", "1.0"), ("lr", True), ("lr", None), ("mode", 3), ("mode", b"fast"),
               ("mode", None), ("tags", "a,b"), ("tags", [1]), ("tags", None), ("names", {3}),
               ("names", "x"), ("flag", 1), ("flag", "true"), ("flag", None), ("enabled", 0),
               ("count", 1.0), ("count", False), ("ratio", "nan"), ("label", 5)]
        g = seg.generation
        for name, value in bad:
            with self.assertRaises(TypeError, msg=f"{name}={value!r}") as cm:
                setattr(m, name, value)
            self.assertIn(f"app.config.{name}", str(cm.exception))
        self.assertEqual(seg.generation, g)

    def test_bad_values(self):
        seg, m = self.app()
        bad = [("steps", 0, "minimum"), ("steps", 1001, "maximum"), ("lr", -0.5, "minimum"),
               ("lr", float("nan"), "range"), ("lr", float("inf"), "maximum"),
               ("mode", "medium", "choices"), ("count", 1 << 63, "64 bits"),
               ("label", "a\0b", "NUL"), ("tags", ["a\0"], "NUL"), ("label", "\udc80", "UTF-8"),
               ("lr", 10 ** 400, "too large")]
        g = seg.generation
        for name, value, text in bad:
            with self.assertRaises(ValueError, msg=f"{name}={value!r}") as cm:
                setattr(m, name, value)
            self.assertIn(text, str(cm.exception).replace("one of", "choices"))
            self.assertIn(f"app.config.{name}", str(cm.exception))
        self.assertEqual(seg.generation, g)
        m.flag = True
        with self.assertRaises(ValueError) as cm:
            m.other_flag = True  # both imply app.config.steps
        # the detail names both impliers and values (the code's generic
        # "conflicting implications" is errname's, no longer appended)
        self.assertIn("app.config.flag implies 5 but app.config.other_flag implies 7", str(cm.exception))
        self.assertEqual(cm.exception.errname, "SHMCFG_E_CONFLICT")
        self.assertIs(m.other_flag, False)

    def test_segment_errors(self):
        name = segname("missing")
        with self.assertRaises(FileNotFoundError) as cm:
            shmcfg.attach(name)
        e = cm.exception
        self.assertIsInstance(e, shmcfg.Error)
        self.assertIsInstance(e, OSError)
        self.assertEqual(e.errno, errno.ENOENT)
        self.assertEqual(e.errname, "ENOENT")
        self.assertIn(name, str(e))
        with self.assertRaises(FileNotFoundError):
            shmcfg.unlink(name)
        shmcfg.unlink(name, missing_ok=True)
        seg = self.make()
        with self.assertRaises(FileExistsError):
            shmcfg.create(seg.name)
        with self.assertRaises(ValueError):
            shmcfg.create("bad/name")
        with self.assertRaises(ValueError):
            shmcfg.attach("")
        with self.assertRaises(TypeError):
            shmcfg.attach(3)
        with self.assertRaises(FileNotFoundError):
            shmcfg.create(segname(), "/nonexistent/schema.yaml")
        with self.assertRaises(ValueError) as cm:
            shmcfg.create(segname(), schema_text="format: 1\noptions:\n  a:\n    type: nope\n")
        self.assertEqual(cm.exception.errname, "SHMCFG_E_SCHEMADEF")
        with self.assertRaises(ValueError) as cm:
            shmcfg.create(segname(), env={"TORCHDYNAMO_VERBOSE": "maybe"})
        self.assertIn("TORCHDYNAMO_VERBOSE", str(cm.exception))
        with self.assertRaises(TypeError):
            shmcfg.create(segname(), "x", schema_text="y")

    def test_closed(self):
        seg, m = self.app()
        seg.close()
        with self.assertRaises(shmcfg.Error):
            m.steps
        with self.assertRaises(shmcfg.Error):
            m.steps = 3
        with self.assertRaises(shmcfg.Error):
            seg.config_hash
        seg.close()  # twice is fine

    def test_transaction_errors(self):
        seg, m = self.app()
        t = seg.transaction()
        t["app.config.steps"] = 3
        t.commit()
        with self.assertRaises(RuntimeError):
            t.commit()
        with self.assertRaises(ValueError):
            seg.transaction(layer="nope")
        with self.assertRaises(ValueError) as cm:
            seg.set({"app.config.steps": 5}, layer="knob")  # steps has no knob
        self.assertEqual(cm.exception.errname, "SHMCFG_E_LAYER")
        with self.assertRaises(ValueError):
            seg.codegen("nope")


# ---------------------------------------------------------------------------
# Lifecycle: retired segments, reattach, owners
# ---------------------------------------------------------------------------


# SCHEMA with one more option, declared first: every option handle moves
SCHEMA_MORE = SCHEMA.replace("options:\n", "options:\n  app.config.aaa:\n    type: int\n"
                             "    default: 5\n", 1)


class TestLifecycle(SegTest):
    def replace(self, seg, schema_text=SCHEMA):
        """Replace seg's segment as shmctl create --force does; the new one
        is closed and removed at the end."""
        new = shmcfg.create(seg.name, schema_text=schema_text, force=True, no_env=True,
                            fast_reads=self.FAST)
        self.addCleanup(new.close)
        return new

    def test_forked_child_never_writes_a_replacement(self):
        """A child's writes go through a handle it attaches itself: only to the
        parent's segment, never to another schema's under the same name."""
        seg, m = self.app()
        rd, wr = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: the name is replaced, then it writes
            os.close(rd)
            code = 1
            try:
                while not seg.retired:
                    time.sleep(0.01)
                try:
                    m.steps = 42
                    code = 2  # wrote through a stale handle map
                except shmcfg.RetiredError:
                    code = 0
            finally:
                os.write(wr, bytes([code]))
                os._exit(code)
        os.close(wr)
        self.replace(seg, SCHEMA_MORE)
        code = os.read(rd, 1)
        os.close(rd)
        _, st = os.waitpid(pid, 0)
        self.assertEqual(code, b"\x00", "the child's write was not refused")
        new = shmcfg.attach(seg.name)
        self.addCleanup(new.close)
        self.assertNotEqual(new.module("app.config").steps, 42)

    def test_retired_wait_reads_reattach(self):
        seg, m = self.app()
        triton = m.triton  # a nested namespace, held across reattach
        m.steps = 20  # generation 2, in slot 1
        g = seg.generation
        old_hash = m.get_hash()  # cached for generation 2
        self.assertEqual((g, m.steps, m.mode, triton.cudagraphs), (2, 20, "fast", True))
        self.assertIs(seg.retired, False)
        with self.assertRaises(AttributeError):
            m.aaa
        new = self.replace(seg, SCHEMA_MORE)
        # generation 2 in slot 1 again: the same header word as the old one's
        new.set({"app.config.steps": 30, "app.config.mode": "slow",
                 "app.config.triton.cudagraphs": False})
        self.assertIs(seg.retired, True)
        # replaced by another schema that still has these options: followed by
        # itself, the handle keeping its own schema (a new option: reattach)
        t0 = time.monotonic()
        self.assertGreater(seg.wait(g, timeout=10), g)
        self.assertLess(time.monotonic() - t0, PROMPT_S)
        self.assertEqual((seg.generation, m.steps, m.mode, triton.cudagraphs), (new.generation, 30, "slow", False))
        self.assertEqual(seg.get("app.config.steps"), 30)
        with self.assertRaises(AttributeError):
            m.aaa
        # then one where mode has another type: its reads fail, saying so,
        # never the old segment's value; the other options are followed
        other = self.replace(seg, SCHEMA_MORE.replace(
            'app.config.mode:\n    type: str\n    default: "fast"\n    choices: ["fast", "slow"]\n',
            "app.config.mode:\n    type: int\n    default: 1\n"))
        nm = other.module("app.config")
        other.set({"app.config.steps": 30, "app.config.triton.cudagraphs": False})
        for read in (lambda: m.mode, lambda: seg.get("app.config.mode")):
            with self.assertRaises(shmcfg.Error) as cm:
                read()
            self.assertEqual(cm.exception.errname, "SHMCFG_E_SCHEMA")
            self.assertIn("replaced by one of another schema, without option app.config.mode", str(cm.exception))
            self.assertIn(seg.name, str(cm.exception))
        self.assertEqual((m.steps, triton.cudagraphs), (30, False))
        self.assertIs(seg.reattach(), seg)
        self.assertIs(seg.retired, False)
        # the same module and proxy objects read the new segment: nothing
        # cached for the old one survives
        self.assertIs(seg.module("app.config"), m)
        # generations go on across a replacement
        self.assertEqual((seg.generation, m.steps, m.mode, triton.cudagraphs),
                         (other.generation, 30, 1, False))
        self.assertEqual(seg.get("app.config.steps"), 30)
        self.assertEqual((m.aaa, seg.get("app.config.aaa")), (5, 5))  # option handles anew
        self.assertEqual(seg.config_hash, other.config_hash)
        self.assertEqual(m.get_hash(), nm.get_hash())
        self.assertNotEqual(m.get_hash(), old_hash)
        self.assertEqual(seg.wait(seg.generation, timeout=0), None)  # waits work again
        gn = other.generation
        m.steps = 31  # and commits go to the new segment
        self.assertEqual((nm.steps, new.generation), (31, gn + 1))
        self.assertEqual(seg.wait(gn, timeout=0), gn + 1)

    def test_create_or_attach(self):
        """exist_ok: the ranks of a job all call create(); the first makes the
        segment, the others attach it (of this schema; another raises), and
        a restarted job attaches what is there, values and all."""
        name = segname("ranks")
        self.addCleanup(shmcfg.unlink, name, missing_ok=True)
        ctx = multiprocessing.get_context("fork")
        q = ctx.Queue()

        def rank(i):
            s = shmcfg.create(name, schema_text=SCHEMA, exist_ok=True, no_env=True)
            q.put((i, s.schema_hash, s.module("app.config").steps))
            s.close()

        procs = [ctx.Process(target=rank, args=(i,)) for i in range(4)]
        for p in procs:
            p.start()
        got = [q.get(timeout=30) for _ in procs]
        for p in procs:
            p.join(30)
            self.assertEqual(p.exitcode, 0)
        self.assertEqual(len({(h, v) for _, h, v in got}), 1, got)  # one segment, seen by all
        s = shmcfg.create(name, schema_text=SCHEMA, exist_ok=True, no_env=True)
        self.addCleanup(s.close)
        self.assertEqual(s.generation, 1)  # nobody replaced it
        s.module("app.config").steps = 7
        again = shmcfg.create(name, schema_text=SCHEMA, exist_ok=True)  # a restarted job
        self.addCleanup(again.close)
        self.assertEqual(again.module("app.config").steps, 7)
        with self.assertRaises(shmcfg.Error) as cm:
            shmcfg.create(name, schema_text=SCHEMA_MORE, exist_ok=True)
        self.assertEqual(cm.exception.errname, "SHMCFG_E_SCHEMA")
        with self.assertRaises(shmcfg.InvalidArgumentError):
            shmcfg.create(name, schema_text=SCHEMA, exist_ok=True, force=True)
        shmcfg.resize(name, heap_bytes=1 << 20)  # the API's resize: followed here too
        self.assertEqual((s.module("app.config").steps, s.generation), (7, 3))

    @unittest.skipUnless(SHMCTL, "tools/shmctl is not built")
    def test_resize_and_force_followed(self):
        """shmctl resize and create --force: the Segment, its modules and
        its waits follow the new segment by themselves, with its values."""
        seg, m = self.app()
        m.steps = 20
        g = seg.generation
        run_shmctl("resize", seg.name, "--size", "1M", "-q")
        self.assertIs(seg.retired, True)
        self.assertEqual((m.steps, seg.generation), (20, g + 1))  # kept; generations go on
        run_shmctl("set", "-q", seg.name, "app.config.steps=21")
        self.assertEqual((m.steps, seg.get("app.config.steps"), seg.generation), (21, 21, g + 2))
        m.steps = 22  # a commit through the old Segment lands in the new segment
        self.assertEqual(run_shmctl("get", seg.name, "app.config.steps").strip(), "22")
        import tempfile
        with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
            f.write(SCHEMA)
            f.flush()  # the same schema: the values are kept too
            run_shmctl("create", "-q", "--force", "--no-env", "--schema", f.name, seg.name)
        self.assertEqual(seg.wait(g + 3, timeout=10), g + 4)  # woken by the replacement
        run_shmctl("set", "-q", seg.name, "app.config.steps=23")
        self.assertEqual((m.steps, seg.generation), (23, g + 5))

    def test_unlink_retires(self):
        seg, m = self.app()
        m.steps = 12
        shmcfg.unlink(seg.name)
        self.assertIs(seg.retired, True)
        with self.assertRaises(shmcfg.RetiredError):
            seg.wait(timeout=1)
        with self.assertRaises(FileNotFoundError):
            seg.reattach()  # nothing under the name yet: the Segment stays
        self.assertEqual(m.steps, 12)
        self.assertIs(seg.retired, True)
        self.replace(seg)
        seg.reattach()
        self.assertEqual((m.steps, seg.generation), (10, 1))

    def test_wait_wakes_when_retired(self):
        seg, m = self.app()
        g = seg.generation

        def remove():
            time.sleep(0.2)
            shmcfg.unlink(seg.name)
        t = threading.Thread(target=remove)
        t.start()
        t0 = time.monotonic()
        try:
            with self.assertRaises(shmcfg.RetiredError):
                seg.wait(g)  # no timeout
        finally:
            t.join()
        self.assertLess(time.monotonic() - t0, 0.2 + PROMPT_S)

    def test_reattach_other_schema(self):
        seg, m = self.app()
        m.steps = 7
        self.replace(seg, schema_text=None)  # the default schema: no app.config
        seg.reattach()
        with self.assertRaises(shmcfg.UnknownOptionError):
            m.steps  # a namespace the new segment lacks
        self.assertEqual(seg.module(DYNAMO).recompile_limit, 8)
        self.assertNotIn("app.config.steps", seg.options())

    def test_reattach_refused(self):
        seg, m = self.app()
        change = m._make_closure_patcher(steps=3)
        self.replace(seg)
        with m.patch(steps=4):
            with self.assertRaises(RuntimeError):
                seg.reattach()
            self.assertEqual(m.steps, 4)
        seg.reattach()
        with self.assertRaises(shmcfg.Error):
            change()  # made for the old handle
        self.assertEqual(m._make_closure_patcher(steps=3)()(), None)

    def test_owner(self):
        seg, m = self.app()
        me = os.geteuid()
        for owner in (me, pwd.getpwuid(me).pw_name):
            s2 = shmcfg.attach(seg.name, owner=owner)
            self.assertEqual(s2.module("app.config").steps, 10)
            self.assertEqual(pickle.loads(pickle.dumps(s2))._owner, me)
            s2.close()
        other = 65534 if me != 65534 else 65533
        with self.assertRaises(shmcfg.OwnerError) as cm:
            shmcfg.attach(seg.name, readonly=True, owner=other)
        e = cm.exception
        self.assertIsInstance(e, PermissionError)
        self.assertEqual(e.errname, "SHMCFG_E_OWNER")
        self.assertIn(f"not by the expected owner {other}", str(e))
        with self.assertRaises(ValueError):
            shmcfg.attach(seg.name, owner="no-such-user-shmcfg")
        with self.assertRaises(TypeError):
            shmcfg.attach(seg.name, owner=1.5)

    def test_attach_that_fails_half_way_closes_once(self):
        """An attach whose option table cannot be loaded (a spoiled option)
        raises, and the half-made segment never closes the handle again when
        collected (it did: a double close, SIGSEGV). Run in a child: a
        crash there is a failure, not the end of the run."""
        seg, m = self.app()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                def spoiled(self, handle):
                    raise RuntimeError("a spoiled option")
                shmcfg.segment.Segment._load_options = spoiled
                try:
                    shmcfg.attach(seg.name)
                    code = 2
                except RuntimeError:
                    gc.collect()
                    code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        self.assertTrue(os.WIFEXITED(status), f"the child ended by signal {os.WTERMSIG(status)}")
        self.assertEqual(os.WEXITSTATUS(status), 0)

    def test_option_table_loaded_in_one_call(self):
        """shmcfg._fast.options() makes the option table the Python loop
        makes (every attribute of every record: aliases, deprecations,
        knobs, docs, nullable), and a spoiled option fails it with the
        library's error, as the loop did."""
        if _lib.fast is None:
            self.skipTest(f"no shmcfg._fast: {_lib.fast_info}")
        seg = self.make(SCHEMA_OPTIONS_YAML)
        slots = shmcfg.values._Opt.__slots__

        def table():
            byindex, byname = seg._load_options(seg._handle())
            self.assertEqual(list(byname), [o.name for o in byindex])
            self.assertTrue(all(byname[o.name] is o for o in byindex))
            return [tuple(getattr(o, k) for k in slots) for o in byindex]

        fast = table()
        real = _lib.fast
        # without the extension, or with one built before options() was
        # (the Python loop either way)
        for way in (None, types.SimpleNamespace()):
            _lib.fast = way
            try:
                loop = table()
            finally:
                _lib.fast = real
            self.assertEqual(fast, loop)
        by = {r[0]: dict(zip(slots, r)) for r in fast}
        self.assertEqual(by["m.alias"]["alias"], by["m.n"]["opt"])
        self.assertEqual(by["m.s"]["deprecated"], 'use "m.t"')
        self.assertEqual((by["m.n"]["knob"], by["m.s"]["nullable"]), ("pytorch/m:n", True))
        self.assertEqual((by["m.z"]["doc"], by["m.z"]["deprecated"], by["m.z"]["alias"]), ("", None, None))
        # m.t's name unterminated in the segment (its NUL made a letter):
        # an attach's table, by either way, says the option is corrupt
        path = f"/dev/shm/shmcfg.{seg.name}"
        with open(path, "r+b") as f:
            data = f.read()
            self.assertEqual(data.count(b"\0m.t\0"), 1)
            f.seek(data.index(b"\0m.t\0") + 4)
            f.write(b"X")
        for way in (real, None):
            _lib.fast = way
            try:
                with self.assertRaises(shmcfg.Error) as cm:
                    shmcfg.attach(seg.name)
            finally:
                _lib.fast = real
            self.assertIn("bad string reference", str(cm.exception))

    def test_prefault(self):
        # the attach maps and validates everything (tests/test_attach.c
        # checks that); here: the flag reaches it, and the handle works
        seg, m = self.app()
        m.steps = 12
        for readonly in (False, True):
            s2 = shmcfg.attach(seg.name, readonly=readonly, prefault=True)
            self.addCleanup(s2.close)
            self.assertEqual(s2.module("app.config").steps, 13 if readonly else 12)
            if not readonly:
                s2.module("app.config").steps = 13
                self.assertEqual(m.steps, 13)
        # in the flags: an old library would refuse the bit (EINVAL)
        o = shmcfg.segment._attach_opts(False, None, prefault=True)
        self.assertEqual(o._obj.flags, shmcfg._lib.ATTACH_PREFAULT)
        # kept by a pickle, and by the attach a forked child makes
        s3 = shmcfg.attach(seg.name, prefault=True)
        self.addCleanup(s3.close)
        self.assertIs(pickle.loads(pickle.dumps(s3))._prefault, True)
        self.assertIs(pickle.loads(pickle.dumps(seg))._prefault, False)
        seen = []
        real = shmcfg.segment._attach_opts
        def spy(*a, **k):
            o = real(*a, **k)
            seen.append(o._obj.flags)
            return o
        shmcfg.segment._attach_opts = spy
        try:
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    s3.module("app.config").steps = 14  # attaches again, in the child
                    code = 0 if seen and all(f & shmcfg._lib.ATTACH_PREFAULT for f in seen) else 2
                finally:
                    os._exit(code)
            _, status = os.waitpid(pid, 0)
        finally:
            shmcfg.segment._attach_opts = real
        self.assertEqual(os.waitstatus_to_exitcode(status), 0)
        self.assertEqual(m.steps, 14)

    @unittest.skipUnless(os.geteuid() == 0, "chown needs root")
    def test_other_users_segment(self):
        seg, m = self.app()
        m.steps = 9
        import glob
        for path in [f"/dev/shm/shmcfg.{seg.name}"] + glob.glob(f"/dev/shm/shmcfg-lock.{seg.name}.*"):
            os.chown(path, 65534, -1)
        with self.assertRaises(shmcfg.OwnerError) as cm:
            shmcfg.attach(seg.name)
        self.assertIn("owned by uid 65534", str(cm.exception))
        s2 = shmcfg.attach(seg.name, owner=65534)
        self.addCleanup(s2.close)
        self.assertEqual(s2.module("app.config").steps, 9)
        s2.module("app.config").steps = 11  # read-write too
        self.assertEqual(m.steps, 11)
        self.replace(seg)  # root may replace it; the new one is root's
        self.assertIs(s2.retired, True)
        with self.assertRaises(shmcfg.OwnerError):
            s2.reattach()  # attached with owner=65534: the new root-owned one is refused
        self.assertEqual(s2.module("app.config").steps, 11)  # removed, not replaced: as it was


    @unittest.skipUnless(os.geteuid() == 0, "another user's process needs root (setpriv)")
    def test_replacement_a_reader_cannot_open(self):
        """A reader of another user, when root replaces the segment by one
        of mode 0600, cannot follow it: its reads, seg.generation and
        seg.current() raise why (never a generation 0, never the old
        values as current); it follows once it can open the new one."""
        as_other = _other_user_python()
        seg, m = self.app(mode=0o644)
        m.steps = 5
        child = subprocess.Popen(as_other + ["-c", textwrap.dedent("""
            import json, sys, shmcfg
            seg = shmcfg.attach(sys.argv[1], readonly=True,
                                fast_reads={"None": None, "False": False}[sys.argv[2]])
            m = seg.module("app.config")
            def now():
                out = {}
                for what, read in (("generation", lambda: seg.generation),
                                   ("steps", lambda: m.steps),
                                   ("current", lambda: seg.current().generation)):
                    try:
                        out[what] = read()
                    except shmcfg.Error as e:
                        out[what] = f"{type(e).__name__}: {e}"
                return out
            print(json.dumps(now()), flush=True)
            for _ in sys.stdin:  # a line: what it reads now
                print(json.dumps(now()), flush=True)
            """), seg.name, str(self.FAST)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            universal_newlines=True, env=dict(os.environ, PYTHONPATH=PYDIR))
        self.addCleanup(child.wait)
        self.addCleanup(child.stdin.close)

        def now():
            child.stdin.write("\n")
            child.stdin.flush()
            return json.loads(child.stdout.readline())
        g = seg.generation
        self.assertEqual(json.loads(child.stdout.readline()),
                         {"generation": g, "steps": 5, "current": g})
        new = shmcfg.create(seg.name, schema_text=SCHEMA, force=True, keep=True, no_env=True,
                            mode=0o600)
        self.addCleanup(new.close)
        why = (f"PermissionDeniedError: {seg.name}: the segment was replaced, and its "
               "successor cannot be attached: Permission denied")
        self.assertEqual(now(), {"generation": why, "steps": why, "current": why})
        os.chmod(f"/dev/shm/shmcfg.{seg.name}", 0o644)
        deadline = time.monotonic() + 60
        while True:  # the library tries the follow again, 5 ms after a failure
            seen = now()
            if seen["generation"] != why or time.monotonic() > deadline:
                break
        self.assertEqual(seen, {"generation": new.generation, "steps": 5,
                                "current": new.generation})


    @unittest.skipUnless(os.geteuid() == 0, "another user's process needs root (setpriv)")
    def test_attach_permission_denied_says_which_access(self):
        """An attach refused by the segment's mode says which access, as
        shmctl does, without an OSError's "[Errno 13]" before it."""
        as_other = _other_user_python()
        seg, _ = self.app(mode=0o644)
        out = {}
        for ro in ("False", "True"):
            p = subprocess.run(as_other + ["-c", textwrap.dedent("""
                import sys, shmcfg
                try:
                    shmcfg.attach(sys.argv[1], readonly=sys.argv[2] == "True")
                    print("attached")
                except shmcfg.PermissionDeniedError as e:
                    print(e)
                """), seg.name, ro], stdout=subprocess.PIPE, universal_newlines=True,
                env=dict(os.environ, PYTHONPATH=PYDIR), timeout=60)
            out[ro] = p.stdout.strip()
        self.assertEqual(out, {"False": f"segment '{seg.name}': permission denied "
                                        "(write access; readonly=True to read)",
                               "True": "attached"})
        os.chmod(f"/dev/shm/shmcfg.{seg.name}", 0o600)
        p = subprocess.run(as_other + ["-c", "import sys, shmcfg\n"
                                       "try: shmcfg.attach(sys.argv[1], readonly=True)\n"
                                       "except shmcfg.PermissionDeniedError as e: print(e)", seg.name],
                           stdout=subprocess.PIPE, universal_newlines=True,
                           env=dict(os.environ, PYTHONPATH=PYDIR), timeout=60)
        self.assertEqual(p.stdout.strip(), f"segment '{seg.name}': permission denied (read access)")

class TestLifecycleLibraryReads(TestLifecycle):
    FAST = False


# the same tests with every read going through the library
class TestAttributesLibraryReads(TestAttributes):
    FAST = False


class TestPatchLibraryReads(TestPatch):
    FAST = False


# ---------------------------------------------------------------------------
# Saved values under an implication (the seed's _get_dict(): stored values)
# ---------------------------------------------------------------------------

IMPLYING = """format: 1
options:
  m.fast:
    type: bool
    default: false
    implies: {m.level: 5}
  m.level:
    type: int
    default: 1
  m.other:
    type: int
    default: 2
"""


class TestSavedValues(SegTest):
    """save_config(), get_config_copy() and codegen_config() give stored
    values, as PyTorch's do: the round trip through another segment is exact
    under an active implication, and once it is turned off."""

    def test_round_trip_under_an_implication(self):
        a = self.make(IMPLYING, no_env=True)
        b = self.make(IMPLYING, no_env=True)
        ma, mb = a.module("m"), b.module("m")
        ma.level = 3
        ma.fast = True
        self.assertEqual(ma.level, 5)
        self.assertEqual(ma.get_config_copy(), {"fast": True, "level": 3, "other": 2})
        self.assertEqual(json.loads(a.dump())["values"]["m.level"], 3)
        self.assertIn("m.level = 3", ma.codegen_config())
        mb.load_config(ma.save_config())
        self.assertEqual((mb.fast, mb.level), (True, 5))
        ma.fast = False
        mb.fast = False
        self.assertEqual(mb.level, 3)
        self.assertEqual(json.loads(a.dump())["values"], json.loads(b.dump())["values"])

    def test_a_patch_is_the_stored_value(self):
        a = self.make(IMPLYING, no_env=True)
        m = a.module("m")
        m.fast = True
        with m.patch(level=7):
            self.assertEqual(m.level, 5)
            self.assertEqual(m.get_config_copy()["level"], 7)
            b = self.make(IMPLYING, no_env=True)
            b.module("m").load_config(m.save_config())
            b.module("m").fast = False
            self.assertEqual(b.module("m").level, 7)
        self.assertEqual(m.get_config_copy()["level"], 1)


# ---------------------------------------------------------------------------
# Example and benchmark
# ---------------------------------------------------------------------------


class TestExample(unittest.TestCase):
    # examples/trainer.py --demo: tests/test_trainer_demo.py (make regtest); a killed
    # worker and a replaced segment: tests/test_trainer_failures.py (make check)

    def test_bench(self):
        from shmcfg import bench
        res = bench.measure(number=2000, repeat=1)
        labels = [r[0] for r in res]
        self.assertEqual(labels[0], "plain instance attribute")
        self.assertIn("int option", labels)
        for label, ns, ratio in res:
            self.assertGreater(ns, 0, label)


if __name__ == "__main__":
    unittest.main(verbosity=int(os.environ.get("PYTEST_VERBOSITY", "1")))
