#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The Python binding where ported PyTorch code meets it (issue 15):
unittest.mock and monkeypatch restores, in-place changes of lists and sets,
PyTorch's save_config()/load_config() format, PyTorch's exception types,
deprecation warnings. Real segments, and real processes where another
process must see what one does. torch's own config modules served by a
segment are tests/test_torch.py's, on the real PyTorch.

Run by `make check`, or by hand from a built tree:

    python3 tests/test_torch_fidelity.py [-v] [TestClass.test_name]
"""

import os
import sys

if __name__ == "__main__" and os.environ.get("SHMCFG_SANITIZERS"):
    print("# skipped: libshmcfg is built with sanitizers", file=sys.stderr)
    sys.exit(77)  # ctypes cannot load an ASan-built library (test_python.py)

import json
import pickle
import subprocess
import tempfile
import textwrap
import unittest
import unittest.mock

HERE = os.path.dirname(os.path.abspath(__file__))
SRCDIR = os.path.abspath(os.environ.get("top_srcdir") or os.path.join(HERE, os.pardir))
BUILDDIR = os.path.abspath(os.environ.get("top_builddir") or SRCDIR)
PYDIR = os.path.join(SRCDIR, "python")
if "SHMCFG_LIBRARY" not in os.environ:
    _built = os.path.join(BUILDDIR, "lib", ".libs", "libshmcfg.so.3")
    if os.path.exists(_built):
        os.environ["SHMCFG_LIBRARY"] = _built  # inherited by child processes
sys.path.insert(0, PYDIR)

import shmcfg  # noqa: E402

SCHEMA = """\
format: 1
options:
  app.config.steps:
    type: int
    default: 8
  app.config.tags:
    type: list
    default: ["b", "a"]
  app.config.names:
    type: set
    default: ["x"]
  app.config.mode:
    type: str
    default: fast
    choices: [fast, slow]
  app.config._secret:
    type: int
    default: 1
    private: true
  app.config.unsaved:
    type: int
    default: 3
    save_ignored: true
  app.config.old_flag:
    type: bool
    default: false
    deprecated: "use steps"
  app.config.steps_alias:
    type: int
    alias: app.config.steps
  app.config.triton.level:
    type: int
    default: 2
"""

_counter = [0]


def segname():
    _counter[0] += 1
    return f"pytorchfid-{os.getpid()}-{_counter[0]}"


def child(code, *args, env=None, stdin=None):
    """Run Python code in a new process (PYTHONPATH: the package and
    ``env``'s); returns its stdout. Fails the test on a non-zero exit."""
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join([PYDIR] + ([env] if env else []))
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)] + list(args), input=stdin,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                       env=e, timeout=60)
    if p.returncode != 0:
        raise AssertionError(f"child failed ({p.returncode}):\n{p.stderr}")
    return p.stdout


class SegTest(unittest.TestCase):
    def app(self):
        name = segname()
        seg = shmcfg.create(name, schema_text=SCHEMA, force=True, no_env=True)
        self.addCleanup(shmcfg.unlink, name, True)
        self.addCleanup(seg.close)
        return seg, seg.module("app.config")


class Steps:
    """A child process that patches while the parent watches: it prints a
    line at each step and waits for a line from the parent."""

    def __init__(self, test, code, env=None):
        e = dict(os.environ)
        e["PYTHONPATH"] = os.pathsep.join([PYDIR] + ([env] if env else []))
        self.p = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  universal_newlines=True, env=e)
        test.addCleanup(self.close)

    def expect(self, what):
        line = self.p.stdout.readline().strip()
        if line != what:
            raise AssertionError(f"child said {line!r}, not {what!r}")

    def go(self):
        self.p.stdin.write("go\n")
        self.p.stdin.flush()

    def close(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()
        self.p.stdin.close()
        self.p.stdout.close()

    def finish(self):
        self.p.stdin.close()
        rc = self.p.wait(timeout=60)
        if rc != 0:
            raise AssertionError(f"child exited {rc}")


# the child side of the patch tests: patch, report, wait, restore, report
PATCHER = """
import sys, unittest.mock, shmcfg
seg = shmcfg.attach(sys.argv[1] if len(sys.argv) > 1 else "%s")
m = seg.module("app.config")
def step(what):
    print(what, flush=True)
    sys.stdin.readline()
with unittest.mock.patch.object(m, "steps", 4):
    step("patched")
step(f"restored {m.steps} {hasattr(m, 'steps')}")
with unittest.mock.patch.object(m.triton, "level", 5):
    step("nested")
step(f"restored {m.triton.level}")
# pytest's monkeypatch: getattr, setattr, then setattr of the old value
old = m.steps
setattr(m, "steps", 6)
step("monkeypatched")
setattr(m, "steps", old)
step(f"restored {m.steps}")
"""


class TestMockPatch(SegTest):
    def test_mock_patch_object_restores_for_every_process(self):
        seg, m = self.app()
        m.steps = 16  # the operator's value
        m.triton.level = 3
        c = Steps(self, PATCHER % seg.name)
        c.expect("patched")
        self.assertEqual(m.steps, 4)  # every process sees the patch (a commit)
        g = seg.generation
        c.go()
        c.expect("restored 16 True")
        self.assertEqual(m.steps, 16)  # not the default 8
        self.assertFalse(m._is_default("steps"))
        self.assertEqual(seg.generation, g + 1)  # the restore is ONE commit...
        self.assertEqual(seg.commit_info(g + 1)["changed"],
                         ["app.config.steps", "app.config.steps_alias"])
        c.go()
        c.expect("nested")
        self.assertEqual(m.triton.level, 5)
        c.go()
        c.expect("restored 3")
        self.assertEqual(m.triton.level, 3)
        c.go()
        c.expect("monkeypatched")
        self.assertEqual(m.steps, 6)
        c.go()
        c.expect("restored 16")
        self.assertEqual(m.steps, 16)
        c.go()
        c.finish()

    def test_hide_flag(self):
        # the protocol mock relies on: after its delattr, hasattr() is false,
        # and its setattr brings the option back
        seg, m = self.app()
        m.steps = 16
        g = seg.generation
        p = unittest.mock.patch.object(m, "steps", 4)
        p.start()
        p.stop()
        self.assertEqual((m.steps, seg.generation), (16, g + 2))
        # a plain del still clears the user layer (one commit), readable after
        del m.steps
        self.assertEqual((m.steps, seg.generation), (8, g + 3))
        self.assertTrue(m._is_default("steps"))
        # the hidden state itself, as mock's exit sees it
        from shmcfg import config as configmod
        configmod.hide(m, "steps")
        self.assertFalse(hasattr(m, "steps"))
        with self.assertRaises(AttributeError) as cm:
            m.steps
        self.assertIn("app.config.steps does not exist", str(cm.exception))
        self.assertEqual(m.get_config_copy()["steps"], 8)  # other paths are unaffected
        m.steps = 9
        self.assertEqual(m.steps, 9)


# ---------------------------------------------------------------------------


class TestInPlaceChanges(SegTest):
    def other_sees(self, seg, name):
        return json.loads(child("""
            import sys, json, shmcfg
            v = shmcfg.attach(sys.argv[1]).get(sys.argv[2])
            print(json.dumps(sorted(v) if isinstance(v, set) else v))
            """, seg.name, name))

    def test_list_and_set_changes_commit(self):
        seg, m = self.app()
        g = seg.generation
        m.tags.append("c")
        self.assertEqual(m.tags, ["b", "a", "c"])
        self.assertEqual(seg.generation, g + 1)
        self.assertEqual(self.other_sees(seg, "app.config.tags"), ["b", "a", "c"])
        m.names.add("y")
        self.assertEqual(self.other_sees(seg, "app.config.names"), ["x", "y"])
        t = m.tags
        t.sort()
        t.extend(["d"])
        del t[0]
        t[0] = "B"
        self.assertEqual(m.tags, ["B", "c", "d"])
        m.tags += ["e"]  # __iadd__ commits; the assignment after it changes nothing
        self.assertEqual(m.tags, ["B", "c", "d", "e"])
        n = m.names
        n |= {"z"}
        n.discard("x")
        self.assertEqual(self.other_sees(seg, "app.config.names"), ["y", "z"])
        # the object a read returned: pickles and copies as a plain list
        self.assertIs(type(pickle.loads(pickle.dumps(m.tags))), list)

    def test_refused_change_raises_and_is_undone(self):
        seg, m = self.app()
        t = m.tags
        g = seg.generation
        with self.assertRaises(TypeError) as cm:
            t.append(3)
        self.assertIn("not a str", str(cm.exception))
        self.assertEqual(t, ["b", "a"])  # undone
        self.assertEqual((m.tags, seg.generation), (["b", "a"], g))
        ro = shmcfg.attach(seg.name, readonly=True)
        self.addCleanup(ro.close)
        s = ro.module("app.config").names
        with self.assertRaises(PermissionError):
            s.add("q")
        self.assertEqual(s, {"x"})
        # the value a patch of this thread supplies: no commit of it
        with m.patch(tags=["p"]):
            t = m.tags
            with self.assertRaises(RuntimeError) as cm:
                t.append("q")
            self.assertIn("app.config.tags is patched in this thread", str(cm.exception))
            self.assertEqual((t, m.tags), (["p"], ["p"]))
            m.names.add("n")  # another option: commits
        self.assertEqual((m.tags, m.names, seg.generation), (["b", "a"], {"x", "n"}, g + 1))
        change = m._make_closure_patcher(names={"c"})
        revert = change()
        with self.assertRaises(RuntimeError):
            m.names.add("d")
        revert()


# ---------------------------------------------------------------------------


class Evil:
    def __reduce__(self):
        return (os.system, ("touch " + MARKER,))


MARKER = os.path.join(tempfile.gettempdir(), f"shmcfg-pickle-ran-{os.getpid()}")


class TestSaveLoad(SegTest):
    def test_pytorch_format(self):
        seg, m = self.app()
        m.steps = 12
        m.names = {"p", "q"}
        blob = m.save_config()
        self.assertEqual(blob[:2], b"\x80\x02")  # pickle protocol 2
        saved = pickle.loads(blob)
        self.assertEqual(saved, {"steps": 12, "tags": ["b", "a"], "names": {"p", "q"},
                                 "mode": "fast", "_secret": 1, "old_flag": False,
                                 "triton.level": 2})  # no alias, no save-ignored option
        # what PyTorch's save_config() writes: pickle.dumps(dict, protocol=2)
        torch_blob = pickle.dumps({"steps": 20, "names": {"r"}, "triton.level": 4}, protocol=2)
        g = seg.generation
        m.load_config(torch_blob)
        self.assertEqual((m.steps, m.names, m.triton.level), (20, {"r"}, 4))
        self.assertEqual(seg.generation, g + 1)  # one commit
        m.load_config(blob)
        self.assertEqual((m.steps, m.names), (12, {"p", "q"}))
        # a dict, and the JSON of a dump
        m.load_config({"steps": 13})
        dump = seg.dump()
        m.steps = 1
        m.load_config(dump)
        self.assertEqual(m.steps, 13)
        # PyTorch's save_config_portable(): private options left out
        self.assertNotIn("_secret", m.save_config_portable())
        self.assertIn("_secret", m.save_config_portable(ignore_private_configs=False))
        self.assertNotIn("unsaved", m.get_serializable_config_copy())
        for old_api in (m.to_dict, m.shallow_copy_dict):  # deprecated in PyTorch
            with self.assertWarns(FutureWarning):
                self.assertEqual(old_api(), m.get_config_copy())

    def test_pickles_run_no_code(self):
        seg, m = self.app()
        self.addCleanup(lambda: os.path.exists(MARKER) and os.unlink(MARKER))
        g = seg.generation
        with self.assertRaises(pickle.UnpicklingError) as cm:
            m.load_config(pickle.dumps({"steps": Evil()}, protocol=2))
        self.assertIn("posix.system", str(cm.exception))
        self.assertIsInstance(cm.exception, ValueError)
        self.assertFalse(os.path.exists(MARKER))
        self.assertEqual(seg.generation, g)
        # a memo index of 2^31 in nine bytes: refused before the unpickler
        # allocates its memo (a child with 1 GiB of address space would
        # otherwise fail with MemoryError, an empty reason)
        out = child("""
            import resource, sys, shmcfg
            from shmcfg.config import parse_config, ConfigLoadError
            resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
            try:
                parse_config(b"\\x80\\x02Nr\\x00\\x00\\x00\\x80.")
            except ConfigLoadError as e:
                print(e)
            """)
        self.assertIn("memo index 2147483648", out)
        # shared references (BINGET): half a megabyte of pickle naming one
        # 500 kB string 3,000 times is 1.5 GB as stored; refused before any
        # of it is encoded, in a child with 1 GiB of address space (issue 24)
        out = child("""
            import pickle, resource, sys, shmcfg
            from shmcfg.config import parse_config, ConfigLoadError
            data = pickle.dumps({"tags": ["x" * 500_000] * 3000}, protocol=2)
            resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
            try:
                parse_config(data)
            except ConfigLoadError as e:
                print(len(data), e)
            """)
        self.assertRegex(out, r"^5\d{5} load_config: the pickle holds over 64 MiB or \d+ items as stored")
        with self.assertRaises(pickle.UnpicklingError):
            m.load_config(pickle.dumps({"tags": ["x" * 500_000] * 3000}, protocol=2))
        for bad in (b"\x80\x02garbage", pickle.dumps([1, 2], protocol=2), b"not json"):
            with self.assertRaises(pickle.UnpicklingError):
                m.load_config(bad)
        self.assertEqual(seg.generation, g)


    def hostile(self, name, cases):
        """load_config() of each hostile input of ``cases`` (Python code
        that makes it, with ``sys``, ``pickle``, ``S`` the full name of a
        list option and ``deep`` a list nested 5,000 deep in scope), in a
        child with 1 GiB of address space over what it has at start (a
        SIGSEGV or a hang fails the test, not the runner): {case: "Type:
        message"}, the warnings included (a ``W`` line)."""
        out = child("""
            import pickle, resource, sys, warnings, shmcfg
            m = shmcfg.attach(sys.argv[1]).module("app.config")
            S = "app.config.tags"
            deep = []
            for _ in range(5000):
                deep = [deep]
            with open("/proc/self/status") as f:
                vm = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmSize:"))
            resource.setrlimit(resource.RLIMIT_AS, (vm + (1 << 30), vm + (1 << 30)))
            for line in sys.stdin:
                case, code = line.rstrip("\\n").split(" ", 1)
                data = eval(code)
                with warnings.catch_warnings(record=True) as w:
                    warnings.simplefilter("always")
                    try:
                        if case.startswith("set_"):
                            setattr(m, case[4:], data)
                            r = "set"
                        else:
                            r = f"ok {m.load_config(data)}"
                    except Exception as e:
                        r = f"{type(e).__name__}: {e}"
                r = r[:300].replace("\\n", " ")
                print(case, r, *(f"W {x.message}"[:300] for x in w), flush=True)
            """, name, stdin="".join(f"{k} {v}\n" for k, v in cases.items()))
        return {line.split(" ", 1)[0]: line.split(" ", 1)[1] for line in out.splitlines()}

    def test_hostile_pickles(self):
        # what load_config() refuses before the unpickler makes anything
        # (config.py: _check_pickle), each of which crashed, hung or blew
        # the memory up before
        seg, m = self.app()
        g = seg.generation
        out = self.hostile(seg.name, {
            # a dict key that is a tuple nested 200,000 deep: hash() of it
            # recursed in C (SIGSEGV)
            "tuple_key": r"b'\x80\x02}' + b')' + b'\x85' * 200000 + b'Ns.'",
            # ints whose hashes collide: 40,000 took the unpickler 22 s
            "int_keys": "pickle.dumps({k * ((1 << 61) - 1): None "
                        "for k in range(1, 4001)}, protocol=2)",
            "int_set": "pickle.dumps({'names': {k * ((1 << 61) - 1) "
                       "for k in range(1, 4001)}}, protocol=4)",
            # a list nested 2,000 deep: repr() of it in the warning recursed
            "deep_list": r"b'\x80\x02}X\x02\x00\x00\x00zz' + b']' * 2000 + "
                         r"b'a' * 1999 + b's.'",
            # a sparse memo: a PUT at index 1,000,000 made the unpickler
            # allocate a memo of 1,000,000 slots for one object
            "sparse_memo": r"b'\x80\x02X' + (10**6).to_bytes(4, 'little') + b'a' * 10**6 "
                           r"+ b'0}r' + (10**6).to_bytes(4, 'little') + b'.'",
            # over STORED_MAX bytes: refused unread (the unpickler stops
            # at STOP and took the dict before)
            "too_long": r"b'\x80\x02}.' + b' ' * (64 << 20)",
            # a cycle: a list that is its own item
            "cycle": r"b'\x80\x02}X\x02\x00\x00\x00zz]q\x00h\x00as.'",
        })
        self.assertRegex(out["tuple_key"], r"^ConfigLoadError: .*nested over 8 deep")
        self.assertRegex(out["int_keys"], r"^ConfigLoadError: .*a dict key that is not a str")
        self.assertRegex(out["int_set"], r"^ConfigLoadError: .*a set item that is not a str")
        self.assertRegex(out["deep_list"], r"^ConfigLoadError: .*nested over 8 deep")
        self.assertRegex(out["sparse_memo"],
                         r"^ConfigLoadError: .*memo index 1000000 where the next is 0")
        self.assertRegex(out["too_long"],
                         r"^ConfigLoadError: load_config: 67108868 bytes, over 64 Mi")
        self.assertRegex(out["cycle"], r"^ConfigLoadError: .*changed after another container")
        self.assertEqual(seg.generation, g)
        # what save_config() writes, of every protocol, still loads
        for proto in range(2, 6):
            m.load_config(pickle.dumps({"steps": 3, "tags": ["a", "b"], "names": {"c", "d"},
                                        "triton.level": 3}, protocol=proto))
            self.assertEqual((m.steps, m.tags, m.names), (3, ["a", "b"], {"c", "d"}))
            m.load_config(pickle.dumps({"names": frozenset({"e"}), "tags": ("f",)},
                                       protocol=proto))
            self.assertEqual((m.tags, m.names), (["f"], {"e"}))

    def test_hostile_json(self):
        # the JSON of a dump is bounded as a pickle is (config.py: _load_json)
        seg, m = self.app()
        g = seg.generation
        out = self.hostile(seg.name, {
            # 2,000,000 items in 8 MB: json.loads made them all, and
            # load_config committed them (10 million: 26 s and 1.4 GB)
            "many_items": "'{\"' + S + '\": [' + ','.join(['\"a\"'] * 2_000_000) + ']}'",
            # nested past the interpreter's limit: RecursionError before
            "deep": "'[' * 100000",
            "nested_9": "'{\"zz\": ' + '[' * 9 + ']' * 9 + '}'",
            "too_long": "' ' * (64 << 20) + '{}'",
        })
        self.assertRegex(out["many_items"], r"^ConfigLoadError: .*over 1048576 items")
        self.assertRegex(out["deep"], r"^ConfigLoadError: .*nests containers over 8 deep")
        self.assertRegex(out["nested_9"], r"^ConfigLoadError: .*nests containers over 8 deep")
        self.assertRegex(out["too_long"],
                         r"^ConfigLoadError: load_config: 67108866 characters, over 64 Mi")
        self.assertEqual(seg.generation, g)

    def test_hostile_values_in_messages(self):
        # a value put in an error or a warning is shown bounded (values.py:
        # _brief): repr() of a deep list recursed, str() of an int of over
        # 4300 digits raised ValueError
        seg, m = self.app()
        g = seg.generation
        out = self.hostile(seg.name, {
            "unknown_deep": "{'zz': deep}",
            "tags_deep": "{'tags': deep}",
            "steps_huge": "{'steps': 10 ** 5000}",
            "json_steps_huge": "'{\"steps\": ' + '9' * 4000 + '}'",
            "set_tags": "deep",
            "set_steps": "-10 ** 5000",
            "set_mode": "[deep] * 1000",
        })
        self.assertRegex(out["unknown_deep"],
                         r"^ok \d+ W key zz with value \[\[\[\[\.\.\.\]\]\]\] is not")
        self.assertRegex(out["tags_deep"],
                         r"^OptionTypeError: .*item 0 is a list \(\[\[\[\[\.\.\.\]\]\]\]\)")
        self.assertRegex(out["steps_huge"],
                         r"^OptionValueError: .*value an int of 16610 bits does not fit in 64 bits")
        self.assertRegex(out["json_steps_huge"],
                         r"^OptionValueError: .*value an int of 13288 bits does not fit")
        self.assertRegex(out["set_tags"], r"^OptionTypeError: .*item 0 is a list")
        self.assertRegex(out["set_steps"], r"^OptionValueError: .*an int of 16610 bits")
        self.assertRegex(out["set_mode"], r"^OptionTypeError: .*expected str, got list \(\[\[\[\[")
        self.assertLess(max(len(v) for v in out.values()), 300)


# ---------------------------------------------------------------------------


class TestExceptionTypes(SegTest):
    def test_pytorch_types(self):
        seg, m = self.app()
        # patch() misuse: AssertionError, as PyTorch's (and TypeError, as before)
        for args in ((1, 2), ("steps",), (None, 3)):
            with self.assertRaises(AssertionError):
                m.patch(*args)
        with self.assertRaises(AssertionError):
            m.patch({"steps": 1}, mode="slow")
        # unknown names: AttributeError (and KeyError, as get_type's)
        for op in (lambda: m.nope, lambda: setattr(m, "nope", 1), lambda: delattr(m, "nope"),
                   lambda: m.patch(nope=1)):
            with self.assertRaises(AttributeError):
                op()
        with self.assertRaises(KeyError):
            m.get_type("nope")
        # a config module is made by the package, not by its class
        with self.assertRaises(NotImplementedError):
            shmcfg.ConfigModule("x")
        # load_config of what is no saved config: pickle.UnpicklingError
        with self.assertRaises(pickle.UnpicklingError):
            m.load_config(b"{not json")
        with self.assertRaises(TypeError):
            m.load_config(42)


# ---------------------------------------------------------------------------

DEPRECATION = """
import sys, warnings, shmcfg
warnings.simplefilter("always")
m = shmcfg.attach(sys.argv[1]).module("app.config")
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    for op in sys.argv[2].split(","):
        if op == "read":
            m.old_flag
        elif op == "write":
            m.old_flag = True
        elif op == "patch":
            with m.patch(old_flag=False):
                pass
        elif op == "root":
            getattr(shmcfg.attach(sys.argv[1]).module(""), "app.config.old_flag")
        elif op == "get":
            shmcfg.attach(sys.argv[1]).get("app.config.old_flag")
        elif op == "set":
            shmcfg.attach(sys.argv[1]).set({"app.config.old_flag": False})
for x in w:
    print(x.category.__name__, x.filename == "<string>", x.message)
"""


class TestDeprecation(SegTest):
    def test_read_and_write_warn_once_per_process(self):
        seg, m = self.app()
        text = ("FutureWarning True app.config.old_flag is deprecated and use steps. "
                "It will be removed in a future version.")
        for ops in ("read", "write", "patch", "root", "get", "set",
                    "read,write,read,patch,root,get,set", "write,read,root"):
            self.assertEqual(child(DEPRECATION, seg.name, ops).splitlines(), [text], ops)


if __name__ == "__main__":
    unittest.main(verbosity=int(os.environ.get("PYTEST_VERBOSITY", "1")))
