#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Tests of shmcfg._fast, the attribute read in C (python/shmcfg/_fast.c),
against the ctypes read it stands in for (the Python getter, which stays the
fallback): the same values and types for every option type, across commits
of other processes, fork, retirement and reattach, close, thread-local
patches; the Getter's contract (its slow flag, its fallback); references
and memory over a million reads; and the whole Python suite again with the
extension left out (SHMCFG_PYTHON_EXT=0), which must pass as well.

Run by `make check`, or by hand from a built tree:

    python3 tests/test_python_fast.py [-v] [TestClass.test_name]

tests/test_python.py's setup is shared (the package from $top_srcdir/python,
the library and the extension from $top_builddir, or $SHMCFG_LIBRARY and
$SHMCFG_PYTHON_EXT).
"""

import os
import sys

if __name__ == "__main__" and os.environ.get("SHMCFG_SANITIZERS"):
    # as tests/test_python.py: the package cannot load an ASan-built library
    print("# skipped: libshmcfg is built with sanitizers", file=sys.stderr)
    sys.exit(77)

import ctypes
import gc
import math
import struct
import subprocess
import textwrap
import threading
import time
import unittest
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_python as T  # noqa: E402  (paths, SCHEMA, SegTest; sets SHMCFG_*)
from test_python import SegTest  # noqa: E402

import shmcfg  # noqa: E402
from shmcfg import _lib  # noqa: E402

EXT_BUILT = os.path.join(T.BUILDDIR, "python", "shmcfg", ".libs", "_fast.so")
EXT_OFF = os.environ.get("SHMCFG_PYTHON_EXT") == "0"
need_ext = unittest.skipIf(_lib.fast is None, "shmcfg._fast not loaded: " + str(_lib.fast_info))

# Every type, nullable or not, aliases of each kind and an alias of an alias.
SCHEMA = T.SCHEMA + """\
  app.config.big:
    type: int
    default: -9223372036854775808
  app.config.label_alias:
    type: str
    nullable: true
    alias: app.config.label
  app.config.tags_alias:
    type: list
    alias: app.config.tags
  app.config.steps_alias2:
    type: int
    alias: app.config.steps_alias
  app.config.maybe_tags:
    type: list
    nullable: true
  app.config.maybe_names:
    type: set
    nullable: true
"""

# (full name, values) committed one after another; each is read back
VALUES = [
    ("app.config.steps", [1, 999, 1000]),
    ("app.config.lr", [0.0, 10.0, 1e-300, 2.5]),
    ("app.config.mode", ["slow", "fast"]),
    ("app.config.tags", [[], ["z"], ["b", "a", "b", ""], ["\u00fc\u00f1\u00ee \u2713"] * 40]),
    ("app.config.names", [set(), {"q"}, {"c", "b", "a"}]),
    ("app.config.ratio", [None, -0.0, float("nan"), float("inf"), float("-inf"), 1e308, None]),
    ("app.config.count", [None, -(1 << 63), (1 << 63) - 1, 0, -1]),
    ("app.config.big", [(1 << 63) - 1, 1 << 40, -(1 << 63)]),
    ("app.config.enabled", [None, True, False]),
    ("app.config.label", [None, "", "x" * 10000, "\u00e9t\u00e9 \U0001f600", None]),
    ("app.config.flag", [True, False]),
    ("app.config.triton.deep.level", [-5, 7]),
    ("app.config.maybe_tags", [None, ["a"], []]),
    ("app.config.maybe_names", [None, {"a"}, set()]),
]


def same(a, b, exact=True):
    """Equal, of the same type (exact=False: a list or set subclass counts as
    its base), floats bit for bit (NaN, -0.0)."""
    if not exact:
        a, b = (type(x).__mro__[-2](x) if isinstance(x, (list, set)) else x for x in (a, b))
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return struct.pack("<d", a) == struct.pack("<d", b)
    return a == b


def owner_and_attr(seg, name):
    """The object whose attribute `name` (a full name) is read, and the
    attribute's last part."""
    parts = name.split(".")
    obj = seg.module("")
    for p in parts[:-1]:
        obj = getattr(obj, p)
    return obj, parts[-1]


def rss_kib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


class TestWhichRead(unittest.TestCase):
    def test_extension_loaded_when_built(self):
        seg = shmcfg.create(T.segname("which"), force=True)
        self.addCleanup(shmcfg.unlink, seg.name, True)
        self.addCleanup(seg.close)
        attr = type(seg.module(T.DYNAMO)).__dict__["recompile_limit"]
        if EXT_OFF or not os.path.exists(EXT_BUILT):
            self.assertIsNone(_lib.fast)
            self.assertIsNone(shmcfg.fast_extension)
            self.assertIsInstance(attr, property)
        else:  # built in this tree: a silent fallback would hide a broken loader
            self.assertIsNotNone(_lib.fast, _lib.fast_info)
            self.assertEqual(shmcfg.fast_extension, os.environ["SHMCFG_PYTHON_EXT"])
            self.assertIsInstance(attr, _lib.fast.Getter)
            self.assertFalse(attr.slow)
            self.assertEqual(attr.__doc__, seg.describe(T.DYNAMO + ".recompile_limit").doc)

    def child(self, env_ext):
        code = textwrap.dedent("""
            import shmcfg
            seg = shmcfg.create("%s", force=True)
            try:
                m = seg.module("torch._dynamo.config")
                m.recompile_limit = 12
                print(shmcfg.fast_extension, m.recompile_limit)
            finally:
                seg.close()
                shmcfg.unlink(seg.name)
        """ % T.segname("child"))
        env = dict(os.environ, SHMCFG_PYTHON_EXT=env_ext)
        return subprocess.run([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, universal_newlines=True, timeout=60)

    def test_disabled_by_env(self):
        p = self.child("0")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.split(), ["None", "12"])

    def test_named_path_must_load(self):
        p = self.child("/nonexistent/_fast.so")
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("SHMCFG_PYTHON_EXT=/nonexistent/_fast.so: no such file", p.stderr)
        self.assertIn("ImportError", p.stderr)


@need_ext
class TestSameValues(SegTest):
    def app(self, **kw):
        seg = self.make(SCHEMA, no_env=True, **kw)
        return seg, seg.module("app.config")

    def check_all(self, seg, names=None):
        """Every option read three ways: the C read (twice: the miss, then
        the cached value), its Python fallback, and Segment.get()."""
        n = 0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # deprecated options
            for name in names or seg.options():
                obj, attr = owner_and_attr(seg, name)
                g = type(obj).__dict__.get(attr)
                if not isinstance(g, _lib.fast.Getter):
                    continue  # a name the module's own methods take (patch...)
                want = seg.get(name)
                for _ in range(2):
                    got = getattr(obj, attr)
                    self.assertTrue(same(got, want, exact=False), f"{name}: {got!r} != {want!r}")
                if isinstance(want, (list, set)):
                    self.assertIsNot(getattr(obj, attr), got, f"{name}: not a fresh copy")
                fb = g.fallback(obj)
                self.assertTrue(same(got, fb), f"{name}: {got!r} != the fallback's {fb!r}")
                n += 1
        return n

    def test_default_schema(self):
        seg = self.make()
        self.assertGreater(self.check_all(seg), 20)
        seg.set({"torch._dynamo.config.recompile_limit": 3,
                 "torch.compiler.config.cache_key_tag": "t\u00e4g"})
        self.check_all(seg)

    def test_every_type_and_alias(self):
        seg, m = self.app()
        self.assertEqual(self.check_all(seg), len([o for o in seg.options()
                                                   if not o.startswith("other.")]) + 1)
        for name, values in VALUES:
            for v in values:
                seg.set({name: v})
                self.assertTrue(same(seg.get(name), v), (name, v, seg.get(name)))
                self.check_all(seg)
        self.assertEqual((m.steps_alias2, m.label_alias, m.tags_alias),
                         (1000, None, ["\u00fc\u00f1\u00ee \u2713"] * 40))

    def test_implied_env_and_knob_values(self):
        seg, m = self.app()
        seg.set({"app.config.flag": True})  # implies steps = 5
        self.assertEqual((m.steps, m.steps_alias, m.steps_alias2), (5, 5, 5))
        seg.set({"app.config.steps": 9}, layer="cluster")
        self.check_all(seg)
        seg.reset("app.config.flag")
        self.assertEqual((m.steps, m.steps_alias2), (9, 9))
        self.check_all(seg)

    def test_commits_by_another_process(self):
        """A child process commits increasing values as fast as it can; every
        read here is one it committed, never older than the read before."""
        seg, m = self.app()
        n = 300
        code = textwrap.dedent(f"""
            import shmcfg
            seg = shmcfg.attach({seg.name!r})
            for i in range(1, {n} + 1):
                seg.set({{"app.config.count": i, "app.config.label": str(i),
                         "app.config.tags": [str(i)] * (i % 5)}})
        """)
        child = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE,
                                 universal_newlines=True)
        last = {"count": -1, "label": -1}
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            c = m.count
            lab = m.label
            tags = m.tags
            if c is not None:
                self.assertGreaterEqual(c, last["count"])
                last["count"] = c
            if lab is not None:
                self.assertGreaterEqual(int(lab), last["label"])
                last["label"] = int(lab)
                self.assertEqual(len(set(tags)), 0 if not tags else 1)
            if last["count"] == n and last["label"] == n:
                break
        _, err = child.communicate(timeout=60)
        self.assertEqual(child.returncode, 0, err)
        self.assertEqual((m.count, m.label, m.tags), (n, str(n), [str(n)] * (n % 5)))
        self.check_all(seg)
        if T.SHMCTL:  # and the real tool
            T.run_shmctl("set", seg.name, "app.config.mode=slow", "app.config.lr=1.5")
            self.assertEqual((m.mode, m.lr), ("slow", 1.5))

    def test_fork_child_reads_through_the_inherited_mapping(self):
        seg, m = self.app()
        m.steps = 21
        rd, wr = os.pipe()
        go_r, go_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.close(rd)
                os.close(go_w)
                os.write(wr, f"{m.steps} ".encode())
                os.read(go_r, 1)  # the parent has committed
                os.write(wr, f"{m.steps} {m.mode}".encode())
                code = 0
            finally:
                os._exit(code)
        os.close(wr)
        os.close(go_r)
        out = os.read(rd, 3).decode()
        m.steps = 22
        m.mode = "slow"
        os.write(go_w, b"x")
        out += os.read(rd, 100).decode()
        os.close(rd)
        os.close(go_w)
        _, st = os.waitpid(pid, 0)
        self.assertEqual(st, 0)
        self.assertEqual(out, "21 22 slow")

    def test_retired_and_reattached(self):
        seg, m = self.app()
        m.steps = 20
        old_getter = type(m).__dict__["steps"]
        self.assertEqual((m.steps, m.tags), (20, ["b", "a"]))
        new = shmcfg.create(seg.name, schema_text=SCHEMA, force=True, no_env=True)
        self.addCleanup(new.close)
        new.set({"app.config.steps": 30, "app.config.tags": ["n"]})
        self.assertTrue(seg.retired)
        # the C read follows the new segment by itself (lib/read/follow.c), and
        # keeps following it: nothing cached for the old one is handed out
        self.assertEqual((m.steps, m.tags), (30, ["n"]))
        new.set({"app.config.steps": 32})
        self.assertEqual((m.steps, seg.generation), (32, new.generation))
        self.assertFalse(old_getter.slow)
        seg.reattach()
        self.assertEqual((m.steps, m.tags, m.steps_alias2), (32, ["n"], 32))
        self.assertIsInstance(type(m).__dict__["steps"], _lib.fast.Getter)
        self.assertIsNot(type(m).__dict__["steps"], old_getter)
        # a getter of the old class goes to its fallback, which reads the new handle
        self.assertEqual(old_getter.__get__(m, type(m)), 32)
        new.set({"app.config.steps": 31})
        self.assertEqual((m.steps, old_getter.__get__(m, type(m))), (31, 31))
        self.check_all(seg)

    def test_closed(self):
        seg, m = self.app()
        g = type(m).__dict__["steps"]
        self.assertEqual(m.steps, 10)
        seg.close()
        with self.assertRaisesRegex(shmcfg.Error, "closed"):
            m.steps
        with self.assertRaisesRegex(shmcfg.Error, "closed"):
            g.__get__(m, type(m))

    def test_patches_stay_in_their_thread(self):
        seg, m = self.app()
        m.steps = 40
        inside = threading.Event()
        done = threading.Event()
        seen = {}

        def patched():
            with m.patch(steps=41, label="p"):
                seen["in"] = (m.steps, m.steps_alias2, m.label)
                inside.set()
                done.wait(30)
                seen["in2"] = m.steps
            seen["after"] = m.steps

        t = threading.Thread(target=patched)
        t.start()
        self.assertTrue(inside.wait(30))
        self.assertFalse(seg.fast_reads)
        seen["other"] = (m.steps, m.label)  # this thread: no patch
        m.steps = 42  # a commit while the other thread's patch is open
        seen["other2"] = m.steps
        done.set()
        t.join(30)
        self.assertEqual(seen, {"in": (41, 41, "p"), "other": (40, None), "other2": 42,
                                "in2": 41, "after": 42})
        self.assertTrue(seg.fast_reads)
        self.assertEqual(m.steps, 42)
        revert = m._make_closure_patcher(steps=3)()
        try:
            self.assertEqual((m.steps, T.in_thread(lambda: m.steps)), (3, 42))
        finally:
            revert()
        self.assertEqual(m.steps, 42)

    def test_deprecated_option_takes_the_python_getter(self):
        seg, m = self.app()
        g = type(m).__dict__["old_flag"]
        self.assertTrue(g.slow)
        # warned once per process (where the package keeps that): afresh
        getattr(shmcfg.config, "_warned", set()).discard("app.config.old_flag")
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            self.assertIs(m.old_flag, False)
            self.assertIs(m.old_flag, False)
        self.assertEqual(len([x for x in w if "deprecated" in str(x.message)]), 1)


@need_ext
class TestGetter(SegTest):
    """The contract of shmcfg._fast.Getter, driven directly."""

    def getter(self, seg, name, fallback, state=None):
        o = seg._opts[name]
        return _lib.fast.Getter(seg._h, seg._h + _lib.View.current.offset,
                                state if state is not None else [0], fallback, o.opt, o.kind)

    def test_slow_flag_state_and_failure_call_the_fallback(self):
        seg = self.make(SCHEMA, no_env=True)
        calls = []

        def fallback(obj):
            calls.append(obj)
            return "fallback"

        state = [0]
        g = self.getter(seg, "app.config.steps", fallback, state)
        obj = object()
        self.assertEqual(g.__get__(obj), 10)
        g.slow = True
        self.assertEqual(g.__get__(obj), "fallback")
        g.slow = False
        state[0] = 1 << 41  # a flag bit (segment.py: _CLOSED)
        self.assertEqual(g.__get__(obj), "fallback")
        state[0] = 1  # a patch open in some thread: not this one, which reads in C
        self.assertEqual(g.__get__(obj), 10)
        state[0] = 0
        self.assertEqual(g.__get__(obj), 10)
        self.assertEqual(calls, [obj, obj])
        self.assertIs(g.__get__(None, object), g)  # the class's attribute: itself
        # a read the library refuses (a handle past the option table)
        bad = _lib.fast.Getter(seg._h, seg._h + _lib.View.current.offset, [0], fallback,
                               len(seg.options()) + 5, _lib.INT)
        self.assertEqual(bad.__get__(obj), "fallback")
        # a fallback's exception propagates
        boom = self.getter(seg, "app.config.mode", lambda o: 1 / 0)
        boom.slow = 1
        with self.assertRaises(ZeroDivisionError):
            boom.__get__(obj)
        with self.assertRaisesRegex(AttributeError, "through the config module"):
            g.__set__(obj, 1)

    def test_patched_thread_reads_in_c(self):
        # a thread with a patch open reads its patched value through the
        # library, in C: the fallback is not called, nothing is cached
        seg = self.make(SCHEMA, no_env=True)
        calls = []

        def fallback(obj):
            calls.append(obj)
            return "fallback"

        state = [0]
        g = self.getter(seg, "app.config.steps", fallback, state)
        obj = object()
        self.assertEqual(g.__get__(obj), 10)  # cached
        o = seg._opts["app.config.steps"]
        v = _lib.Value(type=_lib.INT)
        v.u.i = 77
        self.assertEqual(_lib.patch_push(seg._h), 0)
        try:
            state[0] = 1
            self.assertEqual(_lib.patch_set(seg._h, o.opt, ctypes.byref(v)), 0)
            self.assertEqual((g.__get__(obj), g.__get__(obj)), (77, 77))
            self.assertEqual(T.in_thread(lambda: g.__get__(obj)), 10)
            # a change of the frame, a frame more, a frame less: each
            # names the thread's frames anew (no read of the one before)
            v.u.i = 78
            self.assertEqual(_lib.patch_set(seg._h, o.opt, ctypes.byref(v)), 0)
            self.assertEqual(g.__get__(obj), 78)
            self.assertEqual(_lib.patch_push(seg._h), 0)
            v.u.i = 79
            self.assertEqual(_lib.patch_set(seg._h, o.opt, ctypes.byref(v)), 0)
            self.assertEqual(g.__get__(obj), 79)
            self.assertEqual(_lib.patch_pop(seg._h), 0)
            self.assertEqual(g.__get__(obj), 78)
            seg.set({"app.config.mode": "slow"})  # a commit: a new generation
            self.assertEqual(g.__get__(obj), 78)
        finally:
            self.assertEqual(_lib.patch_pop(seg._h), 0)
        state[0] = 0
        self.assertEqual(g.__get__(obj), 10)
        self.assertEqual(calls, [])

    def test_patched_threads_take_turns(self):
        # two threads with patches of their own read one option in turns:
        # each reads its own value, never the other's
        seg, m = self.app()
        turn = [threading.Event(), threading.Event()]
        seen = []

        def other():
            with m.patch(steps=41):
                for _ in range(3):
                    turn[1].wait(30)
                    turn[1].clear()
                    seen.append(("other", m.steps))
                    turn[0].set()

        t = threading.Thread(target=other)
        t.start()
        try:
            with m.patch(steps=42):
                for _ in range(3):
                    seen.append(("main", m.steps))
                    turn[1].set()
                    self.assertTrue(turn[0].wait(30))
                    turn[0].clear()
        finally:
            turn[1].set()
            t.join(30)
        self.assertEqual(seen, [("main", 42), ("other", 41)] * 3)
        self.assertEqual(m.steps, 10)

    def test_patch_enter_exit_in_c(self):
        # patch() of a segment with the extension: the C enter and exit,
        # counting in the state word, the Python ones never called when
        # nothing fails; a refused value goes to them, which raise
        seg, m = self.app()
        p = m.patch(steps=5)
        self.assertIsInstance(p, _lib.fast.Patch)
        self.assertEqual(p.changes, {"app.config.steps": None})
        with p:
            self.assertEqual(seg._state[0], 1)
            with p:
                self.assertEqual((m.steps, seg._state[0]), (5, 2))
            self.assertEqual(seg._state[0], 1)
            self.assertTrue(seg._patched_here())
            self.assertEqual(T.in_thread(seg._patched_here), False)
        self.assertEqual((m.steps, seg._state[0], seg._patched_here()), (10, 0, False))
        bad = m.patch(steps=10 ** 6)  # past the schema's maximum: refused when entered
        with self.assertRaisesRegex(shmcfg.OptionValueError, "above the maximum 1000"):
            with bad:
                pass
        self.assertEqual((m.steps, seg._state[0]), (10, 0))
        seg.close()
        with self.assertRaisesRegex(shmcfg.Error, "closed"):
            with p:
                pass
        q = m.patch(steps=6)  # made on a closed segment: refused when entered, as before
        with self.assertRaisesRegex(shmcfg.Error, "closed"):
            with q:
                pass

    def test_copy_of_a_container(self):
        seg = self.make(SCHEMA, no_env=True)
        seg.set({"app.config.tags": ["x", "y"]})
        made = []

        def copy(frozen):
            made.append(frozen)
            return ("copy", list(frozen))

        g = self.getter(seg, "app.config.tags", len)
        o = seg._opts["app.config.tags"]
        c = _lib.fast.Getter(seg._h, seg._h + _lib.View.current.offset, [0], len, o.opt,
                             o.kind, None, copy)
        self.assertEqual(c.__get__(1), ("copy", ["x", "y"]))
        self.assertEqual(c.__get__(1), ("copy", ["x", "y"]))
        self.assertEqual(made, [("x", "y")] * 2)  # the frozen value, read once
        self.assertEqual((g.__get__(1), type(g.__get__(1))), (["x", "y"], list))
        seg.set({"app.config.tags": []})
        self.assertEqual(c.__get__(1), ("copy", []))

    def test_bad_arguments(self):
        seg = self.make(SCHEMA, no_env=True)
        cur = seg._h + _lib.View.current.offset
        for args in [(0, cur, [0], len, 0, 1), (seg._h, 0, [0], len, 0, 1),
                     (seg._h, cur, [0, 1], len, 0, 1), (seg._h, cur, [0], 5, 0, 1),
                     (seg._h, cur, [0], len, 0, 7), (seg._h, cur, [0], len, 0, 0),
                     (seg._h, cur, [0], len, 0, 1, None, len), (seg._h, cur, [0], len, 0, 5,
                                                                 None, 3)]:
            with self.assertRaises(ValueError, msg=args):
                _lib.fast.Getter(*args)
        with self.assertRaises(TypeError):
            _lib.fast.Getter(seg._h, cur, (0,), len, 0, 1)

    def test_made_without_init_or_with_a_bad_state(self):
        """A Getter or Patch made by __new__ alone, or whose state list lost
        its word, raises when used, never crashes (a child process: a crash
        is a failure of this test, not of the run)."""
        seg = self.make(SCHEMA, no_env=True)
        out = subprocess.run([sys.executable, "-c", textwrap.dedent("""
            import sys, shmcfg
            from shmcfg import _lib
            G, P = _lib.fast.Getter, _lib.fast.Patch
            class Holder:
                g = G.__new__(G)
            uses = [("get", lambda: Holder().g), ("enter", lambda: P.__new__(P).__enter__()),
                    ("exit", lambda: P.__new__(P).__exit__(None, None, None))]
            seg = shmcfg.attach(sys.argv[1])
            state = [0]
            o = seg._opts["app.config.steps"]
            Holder.h = G(seg._h, seg._h + _lib.View.current.offset, state, lambda m: "fallback",
                         o.opt, o.kind)
            def emptied():
                state.clear()
                return Holder().h
            uses.append(("emptied", emptied))
            for what, use in uses:
                try:
                    print(what, "returned", use())
                except TypeError as e:
                    print(what, "TypeError", e)
            """), seg.name], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            universal_newlines=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stdout)
        self.assertEqual(out.stdout.splitlines(), [
            "get TypeError shmcfg._fast.Getter was not initialised (made by __new__ without __init__)",
            "enter TypeError shmcfg._fast.Patch was not initialised (made by __new__ without __init__)",
            "exit TypeError shmcfg._fast.Patch was not initialised (made by __new__ without __init__)",
            "emptied returned fallback"])

    def test_library_identity(self):
        self.assertEqual(_lib.fast.library_address(),
                         _lib.ctypes.cast(_lib.lib.shmcfg_get, _lib.c_void_p).value)


@need_ext
class TestReferences(SegTest):
    def test_cached_value_references(self):
        seg = self.make(SCHEMA, no_env=True)
        m = seg.module("app.config")
        m.label = "v" * 1000
        first = m.label
        rc = sys.getrefcount(first)
        for _ in range(100000):
            m.label
        self.assertEqual(sys.getrefcount(first), rc)  # no reference leaked per read
        m.label = "w" * 1000
        self.assertEqual(m.label, "w" * 1000)
        self.assertEqual(sys.getrefcount(first), rc - 1)  # the cache let the old one go

    def test_a_million_reads_keep_memory_flat(self):
        seg = self.make(SCHEMA, no_env=True)
        m = seg.module("app.config")
        seg.set({"app.config.label": "x" * 200, "app.config.big": 1 << 62,
                 "app.config.ratio": 0.25})

        def reads(n):
            for _ in range(n // 8):
                m.steps, m.big, m.lr, m.ratio, m.label, m.tags, m.names, m.steps_alias2

        def commits(n):
            for i in range(n):
                seg.set({"app.config.big": (1 << 62) + i, "app.config.label": str(i) * 50})
                m.big, m.label, m.tags, m.names

        reads(100000)
        commits(200)
        gc.collect()
        before = rss_kib()
        reads(1000000)
        commits(2000)
        gc.collect()
        grown = rss_kib() - before
        self.assertLess(grown, 2048, f"RSS grew by {grown} KiB over 1e6 reads")


class TestWithoutExtension(unittest.TestCase):
    @unittest.skipIf(EXT_OFF, "already without the extension")
    def test_python_suite_with_ctypes_reads(self):
        """The whole Python suite again, the extension left out."""
        here = os.path.dirname(os.path.abspath(__file__))
        env = dict(os.environ, SHMCFG_PYTHON_EXT="0")
        files = [f for f in ("test_python.py", "test_python_fast.py", "test_torch_fidelity.py")
                 if os.path.exists(os.path.join(here, f))]
        self.assertIn("test_python.py", files)
        for f in files:
            p = subprocess.run([sys.executable, os.path.join(here, f)], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               universal_newlines=True, timeout=600)
            self.assertEqual(p.returncode, 0, f"{f} with SHMCFG_PYTHON_EXT=0:\n{p.stdout[-4000:]}")


if __name__ == "__main__":
    unittest.main(verbosity=int(os.environ.get("PYTEST_VERBOSITY", "1")))
