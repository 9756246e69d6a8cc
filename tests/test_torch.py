#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The torch bridge (python/shmcfg/torch.py) on the real PyTorch (issue 21):
torch's five compiler config modules served by a segment of the shipped
schema (schemas/torch.yaml), compared with torch's own modules in processes
that never load shmcfg; PyTorch's assignment semantics (process-local);
environment variables; declarations that differ; torch.compile end to end.

Skips (exit 77) where torch is not installed, unless SHMCFG_REQUIRE_TORCH=1
(CI), where a missing torch is a failure. Run by `make check`, or by hand
from a built tree:

    python3 tests/test_torch.py [-v] [TestClass.test_name]
"""

import os
import sys

if __name__ == "__main__" and os.environ.get("SHMCFG_SANITIZERS"):
    print("# skipped: libshmcfg is built with sanitizers", file=sys.stderr)
    sys.exit(77)  # ctypes cannot load an ASan-built library (test_python.py)

try:
    import torch
except ImportError as e:
    if os.environ.get("SHMCFG_REQUIRE_TORCH") == "1":
        raise
    print(f"# skipped: PyTorch is not installed ({e}); .ci/deps installs torch==2.13.0",
          file=sys.stderr)
    sys.exit(77)

import atexit
import contextvars
import json
import shutil
import subprocess
import tempfile
import textwrap
import threading
import unittest
import unittest.mock
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
SRCDIR = os.path.abspath(os.environ.get("top_srcdir") or os.path.join(HERE, os.pardir))
BUILDDIR = os.path.abspath(os.environ.get("top_builddir") or SRCDIR)
PYDIR = os.path.join(SRCDIR, "python")
SHMCTL = os.path.join(BUILDDIR, "tools", "shmctl")
TORCH_SCHEMA = os.path.join(SRCDIR, "schemas", "torch.yaml")
if "SHMCFG_LIBRARY" not in os.environ:
    _built = os.path.join(BUILDDIR, "lib", ".libs", "libshmcfg.so.3")
    if os.path.exists(_built):
        os.environ["SHMCFG_LIBRARY"] = _built  # inherited by child processes
sys.path.insert(0, PYDIR)
# torch's own environment variables would make this process and its
# children disagree with the segments the tests make: none is inherited
for _k in [k for k in os.environ if k.startswith(("TORCH", "PYTORCH"))]:
    del os.environ[_k]
# but the compile cache in a directory of the test's, removed at its exit
# (torch's default, torchinductor_USER in the system's temporary directory,
# stays behind): no option reads this variable
INDUCTOR_CACHE = os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="shmcfg-test-torch.")
atexit.register(shutil.rmtree, INDUCTOR_CACHE, True)

import shmcfg  # noqa: E402
import shmcfg.torch  # noqa: E402

MODULES = shmcfg.torch.MODULES
# options of each module set by the operator in the fidelity test, with
# values that differ from torch 2.13's defaults
OPERATOR = {
    "torch.compiler.config.job_id": "job-7",
    "torch._dynamo.config.recompile_limit": 3,
    "torch._dynamo.config.assume_static_by_default": False,
    "torch._inductor.config.max_autotune": True,
    "torch._inductor.config.triton.cudagraphs": True,
    "torch._inductor.config.cpp.threads": 3,
    "torch._functorch.config.activation_memory_budget": 0.5,
    "torch.fx.experimental._config.no_data_dependent_graph_break": True,
}

_counter = [0]


def segname():
    _counter[0] += 1
    return f"torchtest-{os.getpid()}-{_counter[0]}"


def shmctl(*args):
    p = subprocess.run([SHMCTL] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=60)
    if p.returncode != 0:
        raise AssertionError(f"shmctl {' '.join(args)}: {p.stderr}")
    return p.stdout


def child(code, *args, env=None, stdin=None):
    """Run Python code in a new process; returns its stdout (the last line
    parsed as JSON). Fails the test on a non-zero exit."""
    e = dict(os.environ)
    e["PYTHONPATH"] = PYDIR
    e.update(env or {})
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)] + list(args), input=stdin,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                       env=e, timeout=300)
    if p.returncode != 0:
        raise AssertionError(f"child failed ({p.returncode}):\n{p.stderr}")
    return json.loads(p.stdout.splitlines()[-1])


def torch_segment(test, schema=TORCH_SCHEMA, **kw):
    name = segname()
    seg = shmcfg.create(name, schema=schema, force=True, no_env=True, **kw)
    test.addCleanup(shmcfg.unlink, name, True)
    test.addCleanup(seg.close)
    return seg


def edited_schema(test, old, new, extra=""):
    """The shipped schema's text with old replaced by new (which must
    occur), and extra appended."""
    with open(TORCH_SCHEMA) as f:
        text = f.read()
    edited = text.replace(old, new)
    test.assertNotEqual(edited, text)
    return edited + extra


def edited_segment(test, old, new, extra=""):
    """A segment of edited_schema(); its name."""
    name = segname()
    seg = shmcfg.create(name, schema_text=edited_schema(test, old, new, extra), force=True,
                        no_env=True)
    test.addCleanup(shmcfg.unlink, name, True)
    test.addCleanup(seg.close)
    return name


# What torch's methods say of its five modules, as JSON: run by a process
# bridged to a segment that holds OPERATOR's values, and by one that never
# loads shmcfg and assigns them through torch, the answers must be equal.
METHODS = """
import importlib, json, pickle, warnings
def canon(v):
    # a set's repr follows its insertion history: compare sets as sets
    if isinstance(v, dict):
        return sorted((k, canon(x)) for k, x in v.items())
    if isinstance(v, (set, frozenset)):
        return ["set"] + sorted(map(repr, v))
    return repr(v)
def methods(values):
    out = {}
    for name in MODULES:
        m = importlib.import_module(name)
        mine = [k[len(name) + 1:] for k in values if k.startswith(name + ".")]
        hashed = m._get_dict(ignored_keys=list(m._compile_ignored_keys))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            out[name] = {
                "values": {k: repr(getattr(m, k)) for k in mine},
                # torch hashes the repr of its values: where a set is among
                # them, the hash follows that set's insertion history, which
                # differs between processes; compare what it hashes then
                "get_hash": canon(hashed) if any(isinstance(v, set) for v in hashed.values())
                            else m.get_hash().hex(),
                "codegen_config": sorted(m.codegen_config().splitlines()),
                "save_config": canon(pickle.loads(m.save_config())),
                "save_config_portable": canon(m.save_config_portable()),
                "portable_all": canon(m.save_config_portable(
                    ignore_private_configs=False, readonly_values=True)),
                "get_config_copy": canon(m.get_config_copy()),
                "serializable": canon(m.get_serializable_config_copy()),
                "to_dict": canon(m.to_dict()),
                "shallow_copy_dict": canon(m.shallow_copy_dict()),
                "_get_dict": canon(m._get_dict(skip_default=True)),
                "_is_default": {k: m._is_default(k) for k in mine + ["debug"] if k in m._config},
                "get_type": {k: repr(m.get_type(k)) for k in mine},
            }
    return out
"""


class TestBridge(unittest.TestCase):
    """torch imported, then bridged, in this process: one segment for the
    class (a process bridges each module to one segment)."""

    @classmethod
    def setUpClass(cls):
        cls.name = segname()
        cls.seg = shmcfg.create(cls.name, schema=TORCH_SCHEMA, force=True, no_env=True)
        import torch._functorch.config  # noqa: F401
        import torch._inductor.config  # noqa: F401
        import torch.fx.experimental._config  # noqa: F401
        with warnings.catch_warnings(record=True) as cls.install_warnings:
            warnings.simplefilter("always")
            cls.bridged = shmcfg.torch.install(cls.seg)

    @classmethod
    def tearDownClass(cls):
        shmcfg.unlink(cls.name, True)

    def setUp(self):
        g = self.seg.generation
        self.addCleanup(lambda: self.seg.generation != g and self.seg.rollback(g))

    def test_every_module_bridged(self):
        self.assertEqual(self.bridged, list(MODULES))
        # the shipped schema declares each option as this torch does
        self.assertEqual([str(w.message) for w in self.install_warnings], [])
        for name in MODULES:
            m = sys.modules[name]
            self.assertIsInstance(m, shmcfg.torch.TorchBridge, name)
            shm = self.seg.module(name).__dict__["_shmcfg_opts"]
            plain = {rel for rel, o in shm.items() if o.alias is None}
            self.assertEqual(set(m.__dict__["_shmcfg_served"]),
                             plain - {n[len(name) + 1:] for n in shmcfg.torch.EXCLUDE}
                             - shmcfg.torch.META, name)
        self.assertIs(torch._inductor.config, sys.modules["torch._inductor.config"])

    def test_operator_values_reach_torch(self):
        shmctl("set", self.name, *[f"{k}={json.dumps(v)}" for k, v in OPERATOR.items()])
        for full, v in OPERATOR.items():
            mod, _, rel = full.rpartition(".")
            while mod not in MODULES:  # a nested namespace
                mod, _, head = mod.rpartition(".")
                rel = f"{head}.{rel}"
            self.assertEqual(getattr(sys.modules[mod], rel), v, full)
        # through torch's SubConfigProxy, torch's alias and torch's own code
        self.assertIs(torch._inductor.config.triton.cudagraphs, True)
        self.assertEqual(torch._inductor.config.cpp.threads, 3)
        self.assertEqual(torch.compiler.config.recompile_limit, 3)
        shmctl("reset", self.name, "torch._dynamo.config.recompile_limit")
        self.assertEqual(torch._dynamo.config.recompile_limit, 8)

    def test_assignment_is_process_local(self):
        """PyTorch: an assignment is a user override of the calling context.
        It stays in this process: the segment and other processes keep the
        operator's value."""
        dyn = torch._dynamo.config
        g = self.seg.generation

        def assign():
            dyn.recompile_limit = 11
            torch._inductor.config.triton.cudagraphs = True
            return (dyn.recompile_limit, torch._inductor.config.triton.cudagraphs,
                    dyn._is_default("recompile_limit"))
        self.assertEqual(contextvars.copy_context().run(assign), (11, True, False))
        self.assertEqual(self.seg.generation, g)  # nothing committed
        self.assertEqual(shmctl("get", self.name, "torch._dynamo.config.recompile_limit"), "8\n")
        self.assertEqual(dyn.recompile_limit, 8)  # the assignment's context is gone
        # another thread of this process: torch 2.13 keeps user overrides
        # per context, and a thread starts with a context of its own
        seen = {}

        def in_thread():
            seen["served"] = dyn.recompile_limit

        def assign_then_look():
            dyn.recompile_limit = 12
            t = threading.Thread(target=in_thread)
            t.start()
            t.join()
        contextvars.copy_context().run(assign_then_look)
        self.assertEqual(seen["served"], 8)  # torch 2.13: user overrides are per context
        # host-wide, explicitly: the segment's own module
        self.seg.module("torch._dynamo.config").recompile_limit = 13
        self.assertEqual(dyn.recompile_limit, 13)
        self.assertEqual(shmctl("get", self.name, "torch._dynamo.config.recompile_limit"), "13\n")

    def test_patch_forms(self):
        ind = torch._inductor.config

        @ind.patch(max_autotune=True)
        def decorated():
            return ind.max_autotune
        self.assertIs(decorated(), True)
        self.assertIs(ind.max_autotune, False)
        with ind.patch("triton.cudagraphs", True), ind.patch({"cpp.threads": 2}):
            self.assertEqual((ind.triton.cudagraphs, ind.cpp.threads), (True, 2))
            # the operator's change underneath a patch is not seen...
            self.seg.module("torch._inductor.config").cpp.threads = 5
            self.assertEqual(ind.cpp.threads, 2)
        # ...and is once the patch is gone: it gave back no override at all
        self.assertEqual((ind.triton.cudagraphs, ind.cpp.threads), (False, 5))
        self.assertTrue(ind._is_default("triton.cudagraphs"))
        self.seg.module("torch._inductor.config").cpp.threads = 6
        self.assertEqual(ind.cpp.threads, 6)
        # a patch of served and torch-only names together
        with torch._dynamo.config.patch(recompile_limit=2, reorderable_logging_functions={print}):
            self.assertEqual(torch._dynamo.config.recompile_limit, 2)
            self.assertEqual(torch._dynamo.config.reorderable_logging_functions, {print})
        self.assertEqual(torch._dynamo.config.recompile_limit, 8)
        self.assertEqual(torch._dynamo.config.reorderable_logging_functions, set())
        # torch's argument checks and unknown names
        with self.assertRaises(AssertionError):
            ind.patch("max_autotune")
        with self.assertRaises(AttributeError):
            with ind.patch(no_such_option=1):
                pass
        # the closure patcher (torch's own: it restores the raw override)
        change = ind._make_closure_patcher(max_autotune=True)
        revert = change()
        self.assertIs(ind.max_autotune, True)
        revert()
        self.seg.module("torch._inductor.config").max_autotune = True
        self.assertIs(ind.max_autotune, True)
        # unittest.mock: its restore leaves no override, so the option
        # follows the segment again
        with unittest.mock.patch.object(torch._dynamo.config, "recompile_limit", 4):
            self.assertEqual(torch._dynamo.config.recompile_limit, 4)
        self.assertEqual(torch._dynamo.config.recompile_limit, 8)
        self.assertTrue(torch._dynamo.config._is_default("recompile_limit"))
        with unittest.mock.patch("torch._inductor.config.triton.cudagraphs", True):
            self.assertIs(ind.triton.cudagraphs, True)
        self.seg.module("torch._dynamo.config").recompile_limit = 9
        self.assertEqual(torch._dynamo.config.recompile_limit, 9)
        self.assertIs(ind.triton.cudagraphs, False)
        # ... a nested option too (torch's SubConfigProxy between mock and the bridge)
        with unittest.mock.patch.object(ind.triton, "cudagraphs", True):
            self.assertIs(ind.triton.cudagraphs, True)
        self.assertTrue(ind._is_default("triton.cudagraphs"))
        self.seg.module("torch._inductor.config").triton.cudagraphs = True
        self.assertIs(ind.triton.cudagraphs, True)
        self.seg.module("torch._inductor.config").triton.cudagraphs = False
        self.assertIs(ind.triton.cudagraphs, False)
        # patch_dynamo_config, which reads the patch's changes
        with torch._dynamo.patch_dynamo_config(verbose=True):
            self.assertIs(torch._dynamo.config.verbose, True)
        self.assertIs(torch._dynamo.config.verbose, False)

    def test_patch_through_an_alias(self):
        """torch.compiler.config.recompile_limit is an alias of the served
        torch._dynamo.config.recompile_limit: a patch or mock through it
        gives the target back no override, as one of the target does."""
        comp, dyn = torch.compiler.config, torch._dynamo.config
        with comp.patch(recompile_limit=16):
            self.assertEqual(dyn.recompile_limit, 16)
        with unittest.mock.patch.object(comp, "recompile_limit", 4):
            self.assertEqual(dyn.recompile_limit, 4)
        shmctl("set", self.name, "torch._dynamo.config.recompile_limit=32")
        self.assertEqual((comp.recompile_limit, dyn.recompile_limit), (32, 32))

    def test_torch_machinery_stays_torch(self):
        """Options of torch's config machinery are never served: a segment
        writer cannot make the FX graph cache key ignore every option."""
        ind = torch._inductor.config
        before = ind.save_config_portable()
        self.assertIn("_cache_config_ignore_prefix", self.seg.module("torch._inductor.config")
                      .__dict__["_shmcfg_opts"])
        self.seg.set({"torch._inductor.config._cache_config_ignore_prefix": [""]})
        self.assertNotIn("_cache_config_ignore_prefix", ind.__dict__["_shmcfg_served"])
        self.assertEqual(ind.save_config_portable(), before)

    def test_patch_inside_compiled_function(self):
        from torch._dynamo.utils import counters

        def f(x):
            with torch._dynamo.patch_dynamo_config(verbose=True):
                y = x * 2
            return y + 1
        torch._dynamo.reset()
        counters.clear()
        x = torch.arange(4.0)
        self.assertTrue(torch.equal(torch.compile(f, backend="eager")(x), f(x)))
        self.assertGreaterEqual(counters["stats"]["unique_graphs"], 1)
        self.assertIs(torch._dynamo.config.verbose, False)

    def test_list_and_set_values(self):
        dyn = torch._dynamo.config
        names = [k for k, o in dyn.__dict__["_shmcfg_served"].items()
                 if o.kind in (shmcfg._lib.LIST, shmcfg._lib.SET)]
        self.assertTrue(names)
        rel = names[0]
        before = getattr(dyn, rel)

        def mutate():
            v = getattr(dyn, rel)
            (v.append if isinstance(v, list) else v.add)("zz")
            # in torch the change stays in this context, as an assignment
            return "zz" in getattr(dyn, rel)
        self.assertTrue(contextvars.copy_context().run(mutate))
        self.assertEqual(getattr(dyn, rel), before)  # not committed, not kept

    def test_hash_follows_the_segment(self):
        ind = torch._inductor.config
        h = ind.get_hash()
        self.assertEqual(ind.get_hash(), h)
        shmctl("set", self.name, "torch._inductor.config.max_autotune=true")
        self.assertNotEqual(ind.get_hash(), h)
        shmctl("reset", self.name, "torch._inductor.config.max_autotune")
        self.assertEqual(ind.get_hash(), h)
        # torch leaves its @compile_ignored options out of the hash
        dyn = torch._dynamo.config
        self.assertIn("recompile_limit", dyn._compile_ignored_keys)
        h = dyn.get_hash()
        shmctl("set", self.name, "torch._dynamo.config.recompile_limit=2")
        self.assertEqual(dyn.recompile_limit, 2)
        self.assertEqual(dyn.get_hash(), h)
        shmctl("set", self.name, "torch._dynamo.config.assume_static_by_default=false")
        self.assertNotEqual(dyn.get_hash(), h)

    def test_hash_in_a_patch_of_the_segment(self):
        """A patch of the segment's own module (seg.module(...).patch(),
        this thread's values) changes what torch reads, and its hash and
        _get_dict with it, at its entry and again at its exit, with no
        commit between."""
        dyn = torch._dynamo.config
        m = self.seg.module("torch._dynamo.config")
        h = dyn.get_hash()
        before = dyn._get_dict()["assume_static_by_default"]
        with m.patch(assume_static_by_default=not before):
            self.assertIs(dyn.assume_static_by_default, not before)
            self.assertIs(dyn._get_dict()["assume_static_by_default"], not before)
            patched = dyn.get_hash()
            self.assertNotEqual(patched, h)
            # another thread, without the patch, reads and hashes as before
            other = []
            t = threading.Thread(target=lambda: other.append(dyn.get_hash()))
            t.start()
            t.join()
            self.assertEqual(other, [h])
        self.assertEqual(dyn.get_hash(), h)
        self.assertIs(dyn._get_dict()["assume_static_by_default"], before)

    def test_fx_graph_cache_key(self):
        """The FX graph cache key changes with an option torch hashes, and
        not with one it leaves out (_cache_config_ignore_prefix)."""
        from torch._inductor.codecache import compiled_fx_graph_hash

        class M(torch.nn.Module):
            def forward(self, x):
                return x + 1
        gm = torch.fx.symbolic_trace(M())
        x = torch.zeros(2)

        def key():
            return compiled_fx_graph_hash(gm, [x], {}, [])[0]
        k = key()
        self.assertEqual(key(), k)
        shmctl("set", self.name, "torch._inductor.config.max_autotune=true")
        self.assertNotEqual(key(), k)
        shmctl("reset", self.name, "torch._inductor.config.max_autotune")
        self.assertEqual(key(), k)
        shmctl("set", self.name, "torch._inductor.config.fx_graph_cache=false")
        self.assertFalse(torch._inductor.config.fx_graph_cache)
        self.assertEqual(key(), k)  # fx_graph_cache is in _cache_config_ignore_prefix

    def test_recompile_limit_from_the_operator(self):
        """shmctl set while the process runs changes what torch does on its
        next compile: recompile_limit lowered makes a recompilation fall
        back to eager."""
        from torch._dynamo.utils import counters

        def run():
            torch._dynamo.reset()
            counters.clear()

            @torch.compile(backend="eager")
            def f(x):
                return x * 2 + 1
            for n in range(1, 6):
                self.assertTrue(torch.equal(f(torch.ones(n)), torch.ones(n) * 3))
            return counters["stats"]["unique_graphs"], str(counters["unimplemented"])
        shmctl("set", self.name, "torch._dynamo.config.automatic_dynamic_shapes=false")
        self.assertEqual(run(), (5, "Counter()"))
        shmctl("set", self.name, "torch._dynamo.config.recompile_limit=2")
        graphs, unimplemented = run()
        self.assertEqual(graphs, 2)
        self.assertIn("recompile limit exceeded", unimplemented)

    def test_compile_models(self):
        """torch.compile of an MLP, a model with a graph break and dynamic
        shapes gives the eager results with the bridge installed."""
        from torch._dynamo.utils import counters
        torch.manual_seed(0)
        mlp = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))

        class Break(torch.nn.Module):
            def forward(self, x):
                x = torch.sin(x)
                torch._dynamo.graph_break()
                return torch.cos(x) * 2

        torch._dynamo.reset()
        counters.clear()
        for model, shapes, dynamic in ((mlp, [(3, 8)], None), (Break(), [(5,)], None),
                                       (mlp, [(2, 8), (3, 8), (7, 8)], True)):
            c = torch.compile(model, backend="aot_eager", dynamic=dynamic)
            for s in shapes:
                x = torch.randn(*s)
                torch.testing.assert_close(c(x), model(x))
        self.assertGreaterEqual(counters["stats"]["unique_graphs"], 4)
        from torch._inductor.runtime.cache_dir_utils import cache_dir
        self.assertEqual(cache_dir(), INDUCTOR_CACHE)  # not left in the system's


class TestProcesses(unittest.TestCase):
    def test_methods_as_torch_own(self):
        """Every method torch calls on its config modules answers in a bridged
        process (the operator's values in the segment) what it answers in a
        process that never loads shmcfg and assigns the same values."""
        seg = torch_segment(self)
        seg.set(OPERATOR)
        prog = METHODS + textwrap.dedent("""
            import sys, torch, importlib
            if len(sys.argv) > 1:
                import shmcfg, shmcfg.torch
                shmcfg.torch.install(shmcfg.attach(sys.argv[1]))
            for n in MODULES:
                importlib.import_module(n)
            if len(sys.argv) == 1:
                for k, v in VALUES.items():
                    mod, _, rel = k.rpartition(".")
                    while mod not in MODULES:
                        mod, _, head = mod.rpartition(".")
                        rel = head + "." + rel
                    setattr(importlib.import_module(mod), rel, v)
            print(json.dumps(methods(VALUES)))
            """)
        prog = f"MODULES = {list(MODULES)!r}\nVALUES = {OPERATOR!r}\n" + prog
        bridged = child(prog, seg.name)
        plain = child(prog)
        for name in MODULES:
            for method in plain[name]:
                self.assertEqual(bridged[name][method], plain[name][method], f"{name}.{method}")
        # the operator's values are what both say
        self.assertEqual(bridged["torch._dynamo.config"]["values"]["recompile_limit"], "3")

    def test_install_before_import(self):
        """install() before `import torch`: each module is bridged when torch
        imports it, inductor's included, and torch's code reads the segment."""
        seg = torch_segment(self)
        seg.set({"torch._inductor.config.cpp.threads": 4,
                 "torch._dynamo.config.recompile_limit": 5})
        out = child("""
            import json, sys, shmcfg, shmcfg.torch
            seg = shmcfg.attach(sys.argv[1])
            now = shmcfg.torch.install(seg)
            assert "torch" not in sys.modules
            import torch
            import torch._inductor.config as ind
            from torch._inductor import config as ind2
            import torch._functorch.config, torch.fx.experimental._config
            print(json.dumps({"now": now,
                "classes": [type(sys.modules[n]).__name__ for n in shmcfg.torch.MODULES],
                "threads": ind.cpp.threads, "same": ind is ind2,
                "limit": torch._dynamo.config.recompile_limit,
                "alias": torch.compiler.config.recompile_limit}))
            """, seg.name)
        self.assertEqual(out["now"], [])
        self.assertEqual(out["classes"], [f"ShmcfgBridge[{n}]" for n in MODULES])
        self.assertEqual((out["threads"], out["same"], out["limit"], out["alias"]), (4, True, 5, 5))

    def test_environment_keeps_torch_meaning(self):
        """A process's TORCH_COMPILE_JOB_ID (an env default in torch) overrides
        the segment's default, and yields to the operator's value; a force
        variable (TORCHINDUCTOR_FX_GRAPH_CACHE) overrides everything; a
        default torch computes from a variable (max_autotune =
        os.environ.get("TORCHINDUCTOR_MAX_AUTOTUNE") == "1") is an env
        default."""
        seg = torch_segment(self)
        prog = """
            import json, sys, shmcfg, shmcfg.torch, torch
            shmcfg.torch.install(shmcfg.attach(sys.argv[1]))
            import torch._inductor.config as ind
            print(json.dumps([torch.compiler.config.job_id, ind.fx_graph_cache,
                              torch.compiler.config._is_default("job_id"), ind.max_autotune]))
            """
        env = {"TORCH_COMPILE_JOB_ID": "from-env", "TORCHINDUCTOR_FX_GRAPH_CACHE": "0",
               "TORCHINDUCTOR_MAX_AUTOTUNE": "1"}
        self.assertEqual(child(prog, seg.name, env=env), ["from-env", False, False, True])
        self.assertEqual(child(prog, seg.name), [None, True, True, False])
        seg.set({"torch.compiler.config.job_id": "operator",
                 "torch._inductor.config.fx_graph_cache": True,
                 "torch._inductor.config.max_autotune": False})
        self.assertEqual(child(prog, seg.name, env=env), ["operator", False, False, False])
        self.assertEqual(child(prog, seg.name), ["operator", True, False, False])
        # a patch of the segment's own module stands for the user layer in
        # its thread: the env default yields to it, as to the operator's
        prog = """
            import json, sys, shmcfg, shmcfg.torch, torch
            seg = shmcfg.attach(sys.argv[1])
            shmcfg.torch.install(seg)
            import torch._inductor.config as ind
            m = seg.module("torch._inductor.config")
            seen = [ind.max_autotune]
            with m.patch(max_autotune=True):
                seen += [ind.max_autotune, ind.get_config_copy()["max_autotune"]]
            print(json.dumps(seen + [ind.max_autotune]))
            """
        self.assertEqual(child(prog, seg.name, env=env), [False, True, True, False])
        seg.reset("torch._inductor.config.max_autotune")
        prog = prog.replace("max_autotune=True", "max_autotune=False")
        self.assertEqual(child(prog, seg.name, env=env), [True, False, False, True])

    def test_errors_of_an_env_default_name_what(self):
        """An option whose torch default a variable of this process set reads
        the layer of the segment's value: when that read fails (the Segment
        closed), the error says what failed, as every other read's."""
        seg = torch_segment(self)
        out = child("""
            import json, sys, shmcfg, shmcfg.torch, torch
            import torch._inductor.config as ind
            seg = shmcfg.attach(sys.argv[1])
            shmcfg.torch.install(seg, ["torch._inductor.config"])
            before = ind.max_autotune
            seg.close()
            errors = []
            for name in ("max_autotune", "epilogue_fusion"):  # env default, none
                try:
                    getattr(ind, name)
                except shmcfg.Error as e:
                    errors.append(str(e))
            print(json.dumps([before, errors]))
            """, seg.name, env={"TORCHINDUCTOR_MAX_AUTOTUNE": "1"})
        self.assertEqual(out, [True, [f"segment '{seg.name}' is closed"] * 2])

    def test_declarations_that_differ(self):
        """A schema whose declarations differ from the installed torch's:
        those options stay torch's, and a warning names them; strict=True
        refuses."""
        name = edited_segment(
            self, "  torch._dynamo.config.recompile_limit:\n    type: int\n    default: 8\n",
            "  torch._dynamo.config.recompile_limit:\n    type: int\n    default: 9\n",
            "  torch._dynamo.config.no_such_option:\n    type: int\n    default: 1\n")
        out = child("""
            import json, sys, warnings, shmcfg, shmcfg.torch, torch
            import torch._dynamo.config
            seg = shmcfg.attach(sys.argv[1])
            try:
                shmcfg.torch.install(seg, ["torch._dynamo.config"], strict=True)
                strict = "installed"
            except shmcfg.torch.DeclarationError as e:
                strict = str(e)
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                shmcfg.torch.install(seg, ["torch._dynamo.config"])
            print(json.dumps({"strict": strict, "warnings": [str(x.message) for x in w],
                              "limit": torch._dynamo.config.recompile_limit,
                              }))
            """, name)
        self.assertIn("otherwise than torch 2.13", out["strict"])
        self.assertIn("nothing bridged", out["strict"])
        self.assertEqual(len(out["warnings"]), 1)
        w = out["warnings"][0]
        self.assertIn("recompile_limit (default 9 here, 8 in torch)", w)
        self.assertIn("no_such_option (this torch has no such option)", w)
        self.assertEqual(out["limit"], 8)  # torch's, never the segment's 9

    def test_types_that_differ(self):
        """torch's annotation counts too: a nullable option where torch's
        is not Optional, a list of strings where torch holds ints."""
        name = edited_segment(
            self, "  torch._inductor.config.cpp.threads:\n    type: int\n",
            "  torch._inductor.config.cpp.threads:\n    type: int\n    nullable: true\n",
            "  torch._inductor.config.multi_kernel_hints:\n    type: list\n    default: []\n")
        out = child("""
            import json, sys, warnings, shmcfg, shmcfg.torch, torch
            import torch._inductor.config
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                shmcfg.torch.install(shmcfg.attach(sys.argv[1]), ["torch._inductor.config"])
            print(json.dumps([str(x.message) for x in w]))
            """, name)
        self.assertEqual(len(out), 1, out)
        self.assertIn("cpp.threads (nullable here, int in torch)", out[0])
        self.assertIn("multi_kernel_hints (a list of strings here, list[int] in torch)", out[0])

    def test_choices_of_a_literal(self):
        """torch's Literal[...] annotation counts too: an option declared
        without choices, or with one the Literal lacks, stays torch's (a
        value outside the Literal never reaches torch); choices among the
        Literal's are served."""
        text = edited_schema(
            self, '    env_default: [TORCHINDUCTOR_MEMORY_POOL]\n'
            '    choices: ["none", "intermediates", "outputs", "combined"]\n',
            '    env_default: [TORCHINDUCTOR_MEMORY_POOL]\n')
        for old, new in (("    env_default: [TORCHINDUCTOR_MULTI_KERNEL]\n    choices: [0, 1, 2, 3]\n",
                          "    env_default: [TORCHINDUCTOR_MULTI_KERNEL]\n    choices: [0, 1, 2, 3, 7]\n"),
                         ('    default: "none"\n    choices: ["none", "all"]\n',
                          '    default: "none"\n    choices: ["none"]\n')):
            self.assertIn(old, text)
            text = text.replace(old, new, 1)
        seg = shmcfg.create(segname(), schema_text=text, force=True, no_env=True)
        self.addCleanup(shmcfg.unlink, seg.name, True)
        self.addCleanup(seg.close)
        seg.set({"torch._inductor.config.memory_pool": "bogus",
                 "torch._inductor.config.triton.multi_kernel": 7})
        out = child("""
            import json, sys, warnings, shmcfg, shmcfg.torch, torch
            import torch._inductor.config as ind
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                shmcfg.torch.install(shmcfg.attach(sys.argv[1]), ["torch._inductor.config"])
            print(json.dumps({"warnings": [str(x.message) for x in w],
                              "values": [ind.memory_pool, ind.triton.multi_kernel],
                              "served": sorted(k for k in ind.__dict__["_shmcfg_served"]
                                               if k.startswith("bucket_"))}))
            """, seg.name)
        self.assertEqual(len(out["warnings"]), 1, out)
        self.assertIn("memory_pool (any str here, one of 'none', 'intermediates', 'outputs', "
                      "'combined' in torch)", out["warnings"][0])
        self.assertIn("triton.multi_kernel (choice 7 here, not one of torch's Literal)",
                      out["warnings"][0])
        self.assertEqual(out["values"], ["intermediates", 0])  # torch's, never bogus or 7
        self.assertIn("bucket_reduce_scatters_fx", out["served"])  # fewer choices: served

    def test_reattach_is_followed_and_checked(self):
        """seg.reattach() to a replacement of another schema moves the bridge:
        the new values (generations go on: the replacement, then the set),
        the hash cache dropped, and the new declarations checked."""
        seg = torch_segment(self)
        seg.set({"torch._dynamo.config.recompile_limit": 16})
        changed = edited_schema(
            self, "  torch._inductor.config.max_autotune:\n    type: bool\n    default: false\n",
            "  torch._inductor.config.max_autotune:\n    type: str\n    default: lots\n")
        out = child("""
            import json, subprocess, sys, warnings, shmcfg, shmcfg.torch, torch
            import torch._dynamo.config as dyn, torch._inductor.config as ind
            seg = shmcfg.attach(sys.argv[1])
            shmcfg.torch.install(seg, ["torch._dynamo.config", "torch._inductor.config"])
            before = [seg.generation, dyn.recompile_limit, dyn.get_hash().hex()]
            new = shmcfg.create(sys.argv[1], schema_text=sys.stdin.read(), force=True,
                                no_env=True)
            new.set({"torch._dynamo.config.recompile_limit": 3,  # hash-ignored in torch
                     "torch._dynamo.config.assume_static_by_default": False})
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                seg.reattach()
            print(json.dumps({"before": before,
                              "after": [seg.generation, dyn.recompile_limit, dyn.get_hash().hex()],
                              "max_autotune": ind.max_autotune,
                              "warnings": [str(x.message) for x in w],
                              "where": [x.filename for x in w]}))
            """, seg.name, stdin=changed)
        self.assertEqual(out["before"][:2], [2, 16])
        self.assertEqual(out["after"][:2], [out["before"][0] + 2, 3])
        self.assertNotEqual(out["after"][2], out["before"][2])
        self.assertIs(out["max_autotune"], False)  # torch's: the segment's is a str now
        self.assertEqual(len(out["warnings"]), 1)
        self.assertIn("max_autotune (a str here, bool False in torch)", out["warnings"][0])
        self.assertEqual(out["where"], ["<string>"])  # the reattach() line, not shmcfg's

    def test_replacement_followed_is_checked(self):
        """A replacement of another schema that the handle follows by itself
        (another process's shmctl create --force) is checked as
        seg.reattach()'s: an option the new schema declares otherwise than
        torch, or no longer declares, is torch's again, never the new
        segment's, and a DeclarationWarning names it; the others serve the
        new segment; a later replacement that declares it as torch does
        serves it again."""
        seg = torch_segment(self)
        seg.set({"torch._dynamo.config.recompile_limit": 16,
                 "torch._inductor.config.epilogue_fusion": False})
        other = edited_schema(
            self, "  torch._dynamo.config.recompile_limit:\n    type: int\n    default: 8\n",
            "  torch._dynamo.config.recompile_limit:\n    type: int\n    default: 9\n")
        for gone in ("  torch._inductor.config.max_autotune:\n    type: bool\n    default: false\n"
                     "    env_default: [TORCHINDUCTOR_MAX_AUTOTUNE]\n",
                     "  torch._inductor.config.epilogue_fusion:\n    type: bool\n"
                     "    default: true\n"):
            self.assertIn(gone, other)
            other = other.replace(gone, "", 1)
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            f.write(other)
        self.addCleanup(os.unlink, f.name)
        out = child("""
            import json, subprocess, sys, warnings, shmcfg, shmcfg.torch, torch
            import torch._dynamo.config as dyn, torch._inductor.config as ind
            name, shmctl, other, shipped = sys.argv[1:]
            shmcfg.torch.install(shmcfg.attach(name), ["torch._dynamo.config",
                                                      "torch._inductor.config"])
            def replace(schema, *sets):
                subprocess.run([shmctl, "create", "-q", name, "--schema", schema, "--force",
                                "--no-env"], check=True, stderr=subprocess.DEVNULL)
                subprocess.run([shmctl, "set", "-q", name] + list(sets), check=True)
            def values():
                return [dyn.recompile_limit, dyn.assume_static_by_default, ind.max_autotune,
                        ind.epilogue_fusion]
            out = {"before": values()}
            replace(other, "torch._dynamo.config.recompile_limit=5",
                    "torch._dynamo.config.assume_static_by_default=false")
            for step in ("other", "shipped"):
                with warnings.catch_warnings(record=True) as w:
                    warnings.simplefilter("always")
                    out[step] = values() + [dyn.get_hash() == dyn.get_hash()]
                out[step + " warnings"] = sorted(str(x.message) for x in w)
                out[step + " where"] = sorted({x.filename for x in w})
                replace(shipped, "torch._dynamo.config.recompile_limit=6")
            print(json.dumps(out))
            """, seg.name, SHMCTL, f.name, TORCH_SCHEMA, env={"TORCHINDUCTOR_MAX_AUTOTUNE": "1"})
        self.assertEqual(out["before"], [16, True, True, False])
        # recompile_limit and epilogue_fusion: torch's 8 and True, never the
        # new segment's 5; max_autotune: torch's, from the environment
        self.assertEqual(out["other"], [8, False, True, True, True])
        self.assertEqual(len(out["other warnings"]), 2, out)
        dyn_warning, ind_warning = out["other warnings"]
        self.assertRegex(dyn_warning, r"^torch._dynamo.config: segment '[^']*' was replaced by one "
                         r"that declares 1 option otherwise than torch 2\.13[^:]*: "
                         r"recompile_limit \(default 9 here, 8 in torch\): left to torch$")
        self.assertEqual(out["other where"], ["<string>"])  # the read in values(), not torch's code
        self.assertIn("max_autotune (no longer declared)", ind_warning)
        self.assertIn("epilogue_fusion (no longer declared)", ind_warning)
        self.assertEqual(out["shipped"], [6, True, True, True, True])  # served again
        self.assertEqual(out["shipped warnings"], [])

    def test_warning_through_the_import_hook_names_the_import(self):
        """install() before import: a declaration that differs warns at
        the import that brought the module in (the user's line), not in
        torch's code that imported it."""
        name = edited_segment(
            self, "  torch._dynamo.config.recompile_limit:\n    type: int\n    default: 8\n",
            "  torch._dynamo.config.recompile_limit:\n    type: int\n    default: 9\n")
        out = child("""
            import json, sys, warnings, shmcfg, shmcfg.torch
            shmcfg.torch.install(shmcfg.attach(sys.argv[1]), ["torch._dynamo.config"])
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                import torch._dynamo.config
            print(json.dumps([(str(x.message), x.filename, x.lineno) for x in w]))
            """, name)
        self.assertEqual(len(out), 1, out)
        self.assertIn("recompile_limit (default 9 here, 8 in torch)", out[0][0])
        self.assertEqual(out[0][1:], ["<string>", 6])  # the import's line
        out = child("""
            import importlib, json, sys, warnings, shmcfg, shmcfg.torch
            shmcfg.torch.install(shmcfg.attach(sys.argv[1]), ["torch._dynamo.config"])
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                importlib.import_module("torch._dynamo.config")
            print(json.dumps([(x.filename, x.lineno) for x in w]))
            """, name)
        self.assertEqual(out, [["<string>", 6]])  # through importlib's own frames too

    def test_strict_through_the_import_hook(self):
        """install(strict=True) before import: a declaration that differs
        fails the import of that module, and every later one alike."""
        name = edited_segment(
            self, "  torch._dynamo.config.recompile_limit:\n    type: int\n    default: 8\n",
            "  torch._dynamo.config.recompile_limit:\n    type: int\n    default: 9\n")
        out = child("""
            import json, sys, shmcfg, shmcfg.torch
            shmcfg.torch.install(shmcfg.attach(sys.argv[1]), ["torch._dynamo.config"],
                                 strict=True)
            import torch
            r = []
            for _ in range(2):
                try:
                    import torch._dynamo.config
                    r.append(type(torch._dynamo.config).__name__)
                except shmcfg.torch.DeclarationError as e:
                    r.append("refused: " + str(e)[:60])
            print(json.dumps(r))
            """, name)
        self.assertEqual(len(out), 2)
        for r in out:
            self.assertTrue(r.startswith("refused: torch._dynamo.config: segment"), r)

    def test_install_errors(self):
        seg = torch_segment(self)
        out = child("""
            import json, sys, types, shmcfg, shmcfg.torch
            seg = shmcfg.attach(sys.argv[1])
            r = {}
            try:
                shmcfg.torch.install(seg, ["app.config"])
            except AttributeError as e:
                r["unknown"] = str(e)
            sys.modules["torch._dynamo.config"] = types.ModuleType("torch._dynamo.config")
            try:
                shmcfg.torch.install(seg, ["torch._dynamo.config"])
            except TypeError as e:
                r["type"] = str(e)
            print(json.dumps(r))
            """, seg.name)
        self.assertIn("no options under 'app.config'", out["unknown"])
        self.assertIn("torch._dynamo.config is not a torch config module", out["type"])


if __name__ == "__main__":
    unittest.main(verbosity=int(os.environ.get("PYTEST_VERBOSITY", "1")))
