#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Tests of tools/shmcfg-import on module names, against the installed
PyTorch (the slow tier: each run imports torch in child processes): the five
compiler config modules by name, schemas/torch.yaml current, computed
defaults, disagreements and the errors of a module name. The rest of the
importer's tests are tests/test_importer.py (the fast tier), whose helpers
these use.

    python3 tests/test_importer_torch.py      # from the repository root
"""

import json
import os
import re
import subprocess
import sys
import tempfile
import shutil
import unittest

if __name__ == "__main__" and os.environ.get("SHMCFG_SANITIZERS"):
    print("# skipped: libshmcfg is built with sanitizers", file=sys.stderr)
    sys.exit(77)  # as tests/test_importer.py

if __name__ == "__main__" and os.environ.get("SHMCFG_REQUIRE_TORCH") != "1":
    import importlib.util
    if importlib.util.find_spec("torch") is None:
        print("# skipped: PyTorch is not installed; .ci/deps installs torch==2.13.0",
              file=sys.stderr)
        sys.exit(77)  # automake's SKIP (each test would skip, which counts as a pass)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_importer import SRCDIR, TOOL, by_name, run  # noqa: E402

# ---------------------------------------------------------------------------
# Module names: the source parsed, the module imported in a child Python
# ---------------------------------------------------------------------------

TORCH_MODULES = ["torch.compiler.config", "torch._dynamo.config", "torch._inductor.config",
                 "torch._functorch.config", "torch.fx.experimental._config"]
SHIPPED = os.path.join(SRCDIR, "schemas", "torch.yaml")
SHIPPED_TORCH = "2.13.0"  # the torch schemas/torch.yaml was generated from
REQUIRE_TORCH = os.environ.get("SHMCFG_REQUIRE_TORCH") == "1"
# Set for the import of the five modules: none may reach the schema (the
# shipped file, made without them, must come out the same; the defaults of
# layout_optimization and trace.graph_diagram are computed from the first
# and the last). INDUCTOR_POST_FUSION_SVG does not start with TORCH:
# torch._inductor.config's source names it.
LEAKS = {"TORCHINDUCTOR_LAYOUT_OPTIMIZATION": "0", "TORCH_COMPILE_JOB_ID": "leaked",
         "TORCHINDUCTOR_MAX_AUTOTUNE_GEMM_BACKENDS": "TRITON", "TORCHDYNAMO_VERBOSE": "1",
         "PYTORCH_TEST_WITH_SLOW": "1", "INDUCTOR_POST_FUSION_SVG": "1"}


def torch_version():
    """torch.__version__ as `import torch` gives it, or SkipTest (a failure
    with SHMCFG_REQUIRE_TORCH=1)."""
    p = subprocess.run([sys.executable, "-c",
                        "import sys, torch; sys.stdout.write(torch.__version__)"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode == 0:
        return p.stdout.decode().strip()
    why = "import torch fails (%s)" % ((p.stderr.decode().strip().splitlines() or ["?"])[-1])
    if REQUIRE_TORCH:
        raise AssertionError(why + ", and SHMCFG_REQUIRE_TORCH=1")
    raise unittest.SkipTest(why + "; SHMCFG_REQUIRE_TORCH=1 makes this a failure")


def skipped_lines(test, err):
    """NAME -> (FILE, LINE or None, REASON) of the `skipped` lines; every
    other line must be a warning."""
    out = {}
    for ln in err.splitlines():
        if ln.startswith("warning: "):
            continue
        m = re.match(r"skipped (\S+) \((.+?)(?::(\d+))?\): (\S.*)\Z", ln)
        test.assertIsNotNone(m, ln)
        test.assertNotIn(m.group(1), out, ln)
        out[m.group(1)] = (m.group(2), int(m.group(3)) if m.group(3) else None, m.group(4))
    return out


def body(text):
    """A schema file without its header comment."""
    lines = text.split("\n")
    while lines and lines[0].startswith("#"):
        lines.pop(0)
    return "\n".join(lines)


def join_and(items):
    return ", ".join(items[:-1]) + " and " + items[-1] if len(items) > 2 else " and ".join(items)


class TorchModulesTest(unittest.TestCase):
    """The five compiler config modules of the installed torch, by name,
    in one run (torch.fx.experimental.config, the name torch.compiler.config's
    docstring uses, for torch.fx.experimental._config), with variables of
    torch's set (LEAKS)."""

    @classmethod
    def setUpClass(cls):
        cls.version = torch_version()
        cls.tmp = tempfile.mkdtemp()
        cls.out = os.path.join(cls.tmp, "torch.yaml")
        # the importer's temporary directory: empty again after it
        cls.tmpdir = os.path.join(cls.tmp, "tmpdir")
        os.mkdir(cls.tmpdir)
        names = TORCH_MODULES[:-1] + ["torch.fx.experimental.config"]
        p = subprocess.run([TOOL] + names + ["-o", cls.out], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           env=dict(os.environ, TMPDIR=cls.tmpdir, **LEAKS), cwd=cls.tmp)
        cls.rc, cls.err = p.returncode, p.stderr.decode()
        cls.doc = {"options": []}
        if cls.rc == 0:
            cls.doc = json.loads(run("--merge", cls.out, "--format", "json").stdout.decode())
        cls.by = by_name(cls.doc)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def test_leaves_nothing_in_tmpdir(self):
        """What the imports leave in their temporary directory (torch's
        torchinductor_USER) goes with the importer's own, not into the
        user's."""
        self.assertEqual(self.rc, 0, self.err)
        self.assertEqual(os.listdir(self.tmpdir), [])

    def release(self):
        if self.version.split("+")[0] != SHIPPED_TORCH:
            self.skipTest("these are torch %s's options; torch %s is installed"
                          % (SHIPPED_TORCH, self.version))

    def test_each_module(self):
        self.assertEqual(self.rc, 0, self.err)
        skipped = skipped_lines(self, self.err)
        for mod in TORCH_MODULES:
            with self.subTest(module=mod):
                mine = [o for o in self.doc["options"] if o["name"].startswith(mod + ".")]
                self.assertGreater(len(mine), 10)
                src = os.path.join(*mod.split(".")) + ".py"
                for name, (path, line, reason) in skipped.items():
                    if name.startswith(mod + "."):
                        self.assertTrue(path.endswith(src), (name, path))
        self.assertTrue(all(o["name"].startswith(tuple(m + "." for m in TORCH_MODULES))
                            for o in self.doc["options"]))
        with open(self.out) as f:
            head = f.read().split("\n", 4)
        self.assertEqual(head[1], "# Generated by tools/shmcfg-import from %s; do not edit."
                         % join_and(TORCH_MODULES))
        self.assertEqual(head[2], "# Read from torch %s: each module parsed, and imported "
                         "without TORCH*/PYTORCH* variables." % self.version)

    def test_what_the_source_says(self):
        """Env variable names, docs, @compile_ignored, aliases and nested
        classes come from the source, as for a file."""
        self.assertEqual(self.rc, 0, self.err)
        self.release()
        job = self.by["torch.compiler.config.job_id"]
        self.assertEqual(job["env_default"],
                         ["TORCH_COMPILE_JOB_ID", "TORCH_COMPILE_STICKY_PGO_KEY"])
        self.assertIsNone(job["default"])
        self.assertTrue(job["doc"].startswith("Semantically, this should be an identifier"))
        self.assertEqual(self.by["torch.compiler.config.recompile_limit"]["alias"],
                         "torch._dynamo.config.recompile_limit")
        self.assertEqual(self.by["torch._dynamo.config.recompile_limit"]["default"], 8)
        self.assertEqual(self.by["torch._inductor.config.triton.cudagraphs"]["type"], "bool")
        self.assertTrue(self.by["torch._dynamo.config.verbose"].get("hash_ignored"))
        self.assertEqual(self.by["torch._dynamo.config."
                                 "skip_code_recursive_on_recompile_limit_hit"]["deprecated"],
                         "does not do anything")
        # @inherit_fields_from(cutlass) class cuda(cutlass)
        self.assertEqual(self.by["torch._inductor.config.cuda.cutlass_tma_only"]["type"], "bool")

    def test_computed_defaults_from_the_import(self):
        self.assertEqual(self.rc, 0, self.err)
        self.release()
        # os.environ.get(VAR, '1' if not is_fbcode() else '0') == '1': the
        # variable is the source's, the default the import's
        self.assertEqual(self.by["torch._inductor.config.graph_partition"],
                         {"name": "torch._inductor.config.graph_partition", "type": "bool",
                          "default": True, "env_default": ["TORCHINDUCTOR_GRAPH_PARTITION"]})
        self.assertEqual(self.by["torch._inductor.config.layout_optimization"]["default"], True)
        # bool(os.getenv("CI")), os.environ.get("INDUCTOR_POST_FUSION_SVG", "0") == "1":
        # defaults of a variable the reader does not take, set in the second
        # import: they stay torch's (test_what_stays_torchs)
        self.assertNotIn("torch._functorch.config.error_on_custom_op_aliasing", self.by)
        self.assertNotIn("torch._inductor.config.trace.graph_diagram", self.by)
        self.assertEqual(self.by["torch._dynamo.config.capture_sparse_compute"]["default"], True)
        self.assertEqual(self.by["torch._inductor.config.max_autotune_gemm_backends"]
                         ["default"], "ATEN,TRITON,CPP")
        self.assertEqual(self.by["torch._inductor.config.worker_start_method"]["default"],
                         "subprocess")
        # fx_graph_remote_cache_default(): return get_tristate_env(VAR)
        self.assertEqual(self.by["torch._inductor.config.fx_graph_remote_cache"]
                         ["env_default"], ["TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE"])

    def test_what_stays_torchs(self):
        self.assertEqual(self.rc, 0, self.err)
        self.release()
        skipped = skipped_lines(self, self.err)
        want = {
            "torch._inductor.config.post_grad_custom_pre_pass": "holds a callable: ",
            "torch._dynamo.config.compiled_autograd_kwargs_override":
                "holds a dict: dict[str, Any]",
            "torch._inductor.config.cpp.cxx": "holds a tuple: tuple[None, str]",
            "torch._inductor.config.multi_kernel_hints":
                "holds a list of non-strings: list[int]",
            "torch._dynamo.config.dynamo_profiler": "mixes types: bool | str",
            "torch._inductor.config.compile_threads":
                "its default depends on the machine: 1 here, ",
            "torch._functorch.config.error_on_custom_op_aliasing":
                "its default depends on the machine: False here, True on another",
            "torch._dynamo.config.debug_dir_root": "its default depends on the machine: ",
            "torch._dynamo.config.base_dir": "its default '",
            "torch._dynamo.config.TYPE_CHECKING": "a name the module imports, not an assignment",
            "torch.compiler.config.reorderable_logging_functions":
                "an alias of torch._dynamo.config.reorderable_logging_functions, which is not "
                "in the schema",
        }
        for name, reason in want.items():
            self.assertIn(name, skipped)
            self.assertTrue(skipped[name][2].startswith(reason), skipped[name])
            self.assertNotIn(name, self.by)
        self.assertRegex(skipped["torch._dynamo.config.base_dir"][2],
                         r"names a directory of this installation \(/")
        # each line names the assignment
        path, line, _ = skipped["torch._inductor.config.multi_kernel_hints"]
        with open(path) as f:
            self.assertTrue(f.read().split("\n")[line - 1].startswith("multi_kernel_hints"))

    def test_shipped_schema_is_current(self):
        """schemas/torch.yaml is what the importer makes of the installed
        torch (when it is the one it was made from)."""
        self.assertEqual(self.rc, 0, self.err)
        with open(SHIPPED) as f:
            shipped = f.read()
        m = re.search(r"^# Read from torch (\S+):", shipped, re.M)
        self.assertIsNotNone(m, "schemas/torch.yaml names no torch version")
        self.assertEqual(m.group(1).split("+")[0], SHIPPED_TORCH)
        self.assertIn("\n# Regenerate with: make update-torch-schema", shipped)
        self.release()
        with open(self.out) as f:
            made = f.read()
        self.assertEqual(made.split("\n", 3)[:3], shipped.split("\n", 3)[:3])
        self.assertEqual(body(made), body(shipped),
                         "schemas/torch.yaml is stale: make update-torch-schema")


FAKE_GOOD = '''\
import os
import sys
from typing import Callable, Optional

from torch.utils._config_module import Config, install_config_module


def _seven():
    n = 7
    return n


def _leak():
    name = "TORCH_FAKE_LEAK"  # a variable the source does not name as a constant
    return os.environ.get(name, "no")


plain = 5
"""A literal: checked against the import."""
flag = os.environ.get("FAKE_FLAG", "1" if sys.maxsize > 0 else "0") == "1"
count: int = _seven()
knob: bool = Config(default=sys.maxsize > 0, env_name_default="FAKE_KNOB")
joined = "-".join(["a", "b"])
leaky = _leak()
here = os.getcwd()
package_dir = os.path.dirname(__file__)
cpus: int = os.cpu_count()
callback: Optional[Callable[[], None]] = None
table: dict = {}
pair = (1, 2)
nothing = None


class sub:
    deep: bool = not sys.maxsize


install_config_module(sys.modules[__name__])
after_install = 3
'''

FAKE_BAD = '''\
import sys

from torch.utils._config_module import install_config_module

count = 1
name = "a"
flag = True
fine = 2.5
setattr(sys.modules[__name__], "count", 2)
globals()["name"] = "b"
setattr(sys.modules[__name__], "flag", 1)

install_config_module(sys.modules[__name__])
'''


class FakeModuleTest(unittest.TestCase):
    """Config modules of our own (a package on a temporary directory, made
    with torch.utils._config_module.install_config_module)."""

    @classmethod
    def setUpClass(cls):
        torch_version()
        cls.tmp = tempfile.mkdtemp()
        pkg = os.path.join(cls.tmp, "shmcfgfake")
        os.makedirs(pkg)
        for name, text in (("__init__.py", ""), ("good.py", FAKE_GOOD), ("bad.py", FAKE_BAD)):
            with open(os.path.join(pkg, name), "w") as f:
                f.write(text)
        cls.good_path = os.path.join(pkg, "good.py")
        cls.bad_path = os.path.join(pkg, "bad.py")
        cls.bad_out = os.path.join(cls.tmp, "bad.yaml")
        # both at once: each imports torch
        env = dict(os.environ, FAKE_FLAG="0", FAKE_KNOB="0", TORCH_FAKE_LEAK="yes")
        good = subprocess.Popen([TOOL, "shmcfgfake.good", "--format", "json"], cwd=cls.tmp,
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        bad = subprocess.Popen([TOOL, "shmcfgfake.bad", "-o", cls.bad_out], cwd=cls.tmp,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, err = good.communicate()
        cls.good_rc, cls.good_err = good.returncode, err.decode()
        cls.good = json.loads(out.decode()) if good.returncode == 0 else {"options": []}
        cls.by = {o["name"][len("shmcfgfake.good."):]: o for o in cls.good["options"]}
        out, err = bad.communicate()
        cls.bad_rc, cls.bad_stdout, cls.bad_err = bad.returncode, out, err.decode()

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def line_of(self, text, name):
        return next(n for n, ln in enumerate(text.split("\n"), 1)
                    if re.match(r"%s\s*[:=]" % re.escape(name), ln))

    def test_computed_defaults_are_imported(self):
        self.assertEqual(self.good_rc, 0, self.good_err)
        self.assertEqual(self.by["plain"], {"name": "shmcfgfake.good.plain", "type": "int",
                                            "default": 5, "doc": "A literal: checked against "
                                            "the import."})
        # the variable the source names is kept; its value (set here) is not the default
        self.assertEqual(self.by["flag"], {"name": "shmcfgfake.good.flag", "type": "bool",
                                           "default": True, "env_default": ["FAKE_FLAG"]})
        self.assertEqual(self.by["count"]["default"], 7)
        self.assertEqual(self.by["knob"], {"name": "shmcfgfake.good.knob", "type": "bool",
                                           "default": True, "env_default": ["FAKE_KNOB"]})
        self.assertEqual(self.by["joined"]["default"], "a-b")
        self.assertEqual(self.by["leaky"]["default"], "no")  # TORCH*: not in the import's
        self.assertEqual(self.by["sub.deep"]["default"], False)
        self.assertEqual(list(self.by), ["plain", "flag", "count", "knob", "joined", "leaky",
                                         "sub.deep"])

    def test_what_stays_torchs(self):
        self.assertEqual(self.good_rc, 0, self.good_err)
        skipped = skipped_lines(self, self.good_err)
        reasons = {k[len("shmcfgfake.good."):]: v for k, v in skipped.items()}
        self.assertEqual(sorted(reasons), sorted(["here", "package_dir", "cpus", "callback",
                                                  "table", "pair", "nothing", "after_install"]))
        for name, (path, line, _) in reasons.items():
            self.assertEqual(path, self.good_path)
            self.assertEqual(line, self.line_of(FAKE_GOOD, name), name)
        self.assertRegex(reasons["here"][2], r"^its default depends on the machine: '.*' here, ")
        self.assertRegex(reasons["cpus"][2], r"^its default depends on the machine: 1 here, 97 ")
        pkg = os.path.realpath(os.path.dirname(self.good_path))
        self.assertEqual(reasons["package_dir"][2],
                         "its default %r names a directory of this installation (%s)"
                         % (pkg, os.path.dirname(pkg)))
        self.assertEqual(reasons["callback"][2], "holds a callable: Callable[[], None] | None")
        self.assertEqual(reasons["table"][2], "holds a dict: dict")
        self.assertEqual(reasons["pair"][2], "holds a tuple: tuple")
        self.assertEqual(reasons["nothing"][2], "None without a type annotation")
        # in the source, but not a config option of torch
        self.assertEqual(reasons["after_install"][2], "not an option of the imported module")

    def test_disagreement_is_an_error(self):
        self.assertEqual(self.bad_rc, 1, self.bad_err)
        self.assertEqual(self.bad_stdout, b"")
        self.assertFalse(os.path.exists(self.bad_out))

        def where(name):
            return "%s:%d" % (self.bad_path, self.line_of(FAKE_BAD, name))
        self.assertEqual(self.bad_err.splitlines(), [
            "shmcfg-import: %s: shmcfgfake.bad.count: the source says default 1, the import 2 "
            "(imported without TORCH*/PYTORCH* variables)" % where("count"),
            "shmcfg-import: %s: shmcfgfake.bad.name: the source says default 'a', the import "
            "'b' (imported without TORCH*/PYTORCH* variables)" % where("name"),
            "shmcfg-import: %s: shmcfgfake.bad.flag: the source says type bool, the import int"
            % where("flag")])


class ModuleNameErrorTest(unittest.TestCase):
    """A module that does not exist, is not a config module or fails to
    import: one line naming it, exit 1, nothing written. (No torch needed.)"""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        pkg = os.path.join(cls.tmp, "shmcfgerr")
        os.makedirs(pkg)
        for name, text in (("__init__.py", ""), ("plain.py", "x = 1\n"),
                           ("broken.py", "x = 1\nraise RuntimeError('boom at import')\n")):
            with open(os.path.join(pkg, name), "w") as f:
                f.write(text)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def fails(self, module, message):
        out = os.path.join(self.tmp, "out.yaml")
        p = run(module, "-o", out, cwd=self.tmp)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertEqual(p.stderr.decode().splitlines(), ["shmcfg-import: %s" % message])
        self.assertEqual(p.stdout, b"")
        self.assertFalse(os.path.exists(out))

    def test_no_such_module(self):
        self.fails("shmcfgerr.nope", "shmcfgerr.nope: no such file or module")
        self.fails("no_such_package_at_all.config",
                   "no_such_package_at_all.config: no such file or module")
        # a name ending in .py is a file path, never a module
        self.fails("missing.py", "missing.py: cannot read: No such file or directory")

    def test_not_a_config_module(self):
        self.fails("shmcfgerr.plain", "shmcfgerr.plain: not a config module: it has no "
                   "_config dict after import (torch.utils._config_module."
                   "install_config_module() makes it)")

    def test_import_fails(self):
        self.fails("shmcfgerr.broken",
                   "shmcfgerr.broken: the import fails: RuntimeError: boom at import")



if __name__ == "__main__":
    unittest.main()
