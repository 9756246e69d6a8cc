# SPDX-License-Identifier: MIT
"""Module names: the source found (as the import system finds it, without
running a package's code) and parsed, and the module imported in a child
Python with a clean environment, twice, whose `_config` gives the defaults
the source computes and checks the rest (ImportedModule).
"""

import ast
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time

from .library import check_option
from .model import PROG, InputError, Skip, coerce_default, join_and, normalize, show
from .reader import SEQ_ANN, ModuleReader, dotted, parse_annotation, subscript_args

# Names people use for a module that is named otherwise (torch.compiler.config's
# docstring points at torch.fx.experimental.config)
MODULE_ALIASES = {"torch.fx.experimental.config": "torch.fx.experimental._config"}
# Variables removed from the environment of the import, so that none makes
# a default: these prefixes, and every variable the module's source names
CLEAN_PREFIXES = ("TORCH", "PYTORCH")
# The two imports: the defaults that differ between them depend on the
# machine (a working directory, home, temporary directory, user and CPU
# count of its own each; in the second, the variables the source names that
# are not torch's set to "1") and are not written into a schema
IMPORT_RUNS = ({"cpus": 1, "other_home": False}, {"cpus": 97, "other_home": True})

SEARCH_PATH = None  # set by cli.main(): the current directory, then sys.path
# Seconds the imports may take (--import-timeout): torch's config modules
# take 5 to 20 s on a cold cache; a module that blocks is killed then
IMPORT_TIMEOUT = 120.0
# Run by `python -c` in a clean environment, in a process group of its own;
# reads a request (JSON) from the file named by its argument, writes the name
# of each module before importing it to req["progress"] and what it found
# to req["out"] (stdout is the module's; stderr a file, read once it exits).
IMPORT_CHILD = r'''
import collections.abc, importlib, json, os, sys, types, typing
with open(sys.argv[1], encoding="utf-8") as f:
    req = json.load(f)
progress = open(req["progress"], "w", encoding="utf-8")
sys.path[:] = req["path"]
n = req["cpus"]
os.cpu_count = lambda: n
if hasattr(os, "sched_getaffinity"):
    os.sched_getaffinity = lambda pid: set(range(n))
if hasattr(os, "process_cpu_count"):
    os.process_cpu_count = lambda: n

def cname(c):
    return getattr(c, "__qualname__", None) or getattr(c, "__name__", None) or repr(c)

def ann(t):
    """A type as Python source text."""
    if t is None or t is type(None):
        return "None"
    if isinstance(t, str):
        return t
    if isinstance(t, typing.ForwardRef):
        return t.__forward_arg__
    if t is typing.Any:
        return "Any"
    if t is Ellipsis:
        return "..."
    if isinstance(t, (list, tuple)):
        return "[" + ", ".join(ann(a) for a in t) + "]"
    o, a = typing.get_origin(t), typing.get_args(t)
    if o is typing.Union or o is getattr(types, "UnionType", None):
        return " | ".join(ann(x) for x in a)
    if o is typing.Literal:
        return "Literal[%s]" % ", ".join(repr(x) for x in a)
    if o is not None:
        base = "Callable" if o is collections.abc.Callable else cname(o)
        return "%s[%s]" % (base, ", ".join(ann(x) for x in a)) if a else base
    if isinstance(t, type):
        return cname(t)
    return repr(t)

def val(v):
    """A value as JSON: scalars as they are, the rest tagged."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (list, tuple, set, frozenset)):
        kind = "set" if isinstance(v, (set, frozenset)) else type(v).__name__
        if kind not in ("list", "tuple"):
            kind = "tuple" if isinstance(v, tuple) else "list"
        return {kind: [val(x) for x in v]}
    if isinstance(v, dict):
        return {"dict": len(v)}
    if callable(v) and not isinstance(v, type):
        return {"callable": cname(v)}
    return {"object": cname(type(v))}

out = {}
for name in req["modules"]:
    r = out[name] = {}
    progress.write(name + "\n")
    progress.flush()
    try:
        m = importlib.import_module(name)
    except BaseException as e:
        text = (str(e).strip().splitlines() or [""])[0]
        r["error"] = "%s%s" % (type(e).__name__, ": " + text if text else "")
        continue
    r["name"] = m.__name__
    r["file"] = getattr(m, "__file__", None)
    top = sys.modules.get(m.__name__.split(".")[0])
    ver = getattr(top, "__version__", None)
    r["version"] = "%s %s" % (top.__name__, ver) if isinstance(ver, str) else None
    tdir = os.path.dirname(os.path.realpath(getattr(top, "__file__", None) or "/"))
    r["paths"] = sorted({tdir, os.path.dirname(tdir)} - {"", "/"})
    cfg = getattr(m, "_config", None)
    if not isinstance(cfg, dict):
        r["error"] = "noconfig"
        continue
    opts = r["options"] = {}
    for key, e in cfg.items():
        alias = getattr(e, "alias", None)
        opts[key] = {
            "type": ann(getattr(e, "value_type", None)),
            "default": None if alias else val(getattr(e, "default", None)),
            "alias": alias,
            "justknob": getattr(e, "justknob", None),
            "deprecated": bool(getattr(e, "deprecated", False)),
            "deprecation_message": getattr(e, "deprecation_message", None),
        }
with open(req["out"], "w", encoding="utf-8") as f:
    json.dump(out, f)
# done: threads the module started (not daemons) and its atexit handlers
# are not waited for
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)
'''


class Opaque:
    """A value of the import a schema cannot hold (a tuple, dict, callable,
    object; a list or set holding one), as a message names it."""

    def __init__(self, text):
        self.text = text

    def __eq__(self, other):
        return isinstance(other, Opaque) and other.text == self.text

    def __repr__(self):
        return self.text


def from_child(v):
    """A value the child wrote (IMPORT_CHILD's val()) as a Python value."""
    if not isinstance(v, dict):
        return v
    kind, x = next(iter(v.items()))
    if kind in ("list", "set"):
        items = [from_child(i) for i in x]
        if kind == "set" and all(isinstance(i, str) for i in items):
            return set(items)
        return items if kind == "list" else Opaque("a set holding %s" % show_items(items))
    if kind == "tuple":
        return Opaque("a tuple")
    if kind == "dict":
        return Opaque("a dict")
    return Opaque("a callable" if kind == "callable" else "a %s" % x)


def show_items(items):
    return ", ".join(repr(i) for i in items[:3]) + (", ..." if len(items) > 3 else "")


def same_value(a, b):
    """Equal and of the same kind (True is not 1; nan is nan)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    return a == b


def locate_module(name):
    """The source file of a module, found as the import system would find it
    on SEARCH_PATH without running a package's code (importlib's
    PathFinder, one package at a time); a module only other finders know
    (an editable install...) with importlib.util.find_spec(), which imports
    its parent packages. Raises InputError naming it."""
    import importlib.machinery
    import importlib.util
    spec, path = None, SEARCH_PATH
    parts = name.split(".")
    for i in range(len(parts)):
        spec = importlib.machinery.PathFinder.find_spec(".".join(parts[:i + 1]), path)
        if spec is None or (i < len(parts) - 1 and not spec.submodule_search_locations):
            spec = None
            break
        path = list(spec.submodule_search_locations or [])
    if spec is None or not (spec.origin or "").endswith(".py"):
        saved = sys.path[:]
        sys.path[:] = SEARCH_PATH
        try:
            spec = importlib.util.find_spec(name)
        except ModuleNotFoundError as e:
            if not (e.name and (name + ".").startswith(e.name + ".")):
                raise InputError(name, 0, "a package of it fails to import: %s: %s"
                                 % (type(e).__name__, e))
            spec = None  # a package of the name does not exist
        except Exception as e:  # a parent package that fails to import
            raise InputError(name, 0, "a package of it fails to import: %s: %s"
                             % (type(e).__name__, e))
        finally:
            sys.path[:] = saved
    if spec is None:
        raise InputError(name, 0, "no such file or module")
    if not spec.origin or not spec.origin.endswith(".py") or not os.path.isfile(spec.origin):
        raise InputError(name, 0, "the module has no Python source to read (%s)"
                         % (spec.origin or "a namespace package"))
    return spec.origin


def env_names(tree):
    """Every environment variable a module's source names: those of
    os.environ.get()/getenv()/get_tristate_env(), os.environ[...], `in
    os.environ`, and Config(env_name_default=..., env_name_force=...)."""
    names = set()

    def add(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            names.add(node.value)
        elif isinstance(node, (ast.List, ast.Tuple)):
            for e in node.elts:
                add(e)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = (dotted(node.func) or "").split(".")
            if ".".join(f[-2:]) in ("environ.get", "os.getenv") or f[-1] in (
                    "getenv", "get_tristate_env", "_read_env_variable"):
                for a in node.args[:1]:
                    add(a)
            if f[-1] == "Config":
                for a in node.args[2:4]:
                    add(a)
                for kw in node.keywords:
                    if kw.arg in ("env_name_default", "env_name_force"):
                        add(kw.value)
        elif isinstance(node, ast.Subscript) and (dotted(node.value) or "").endswith("environ"):
            add(subscript_args(node)[0])
        elif isinstance(node, ast.Compare) and any(
                (dotted(c) or "").endswith("environ") for c in node.comparators):
            add(node.left)
    return names


def import_modules(names, variables, twice, timeout=IMPORT_TIMEOUT):
    """Import each module in a child Python (this interpreter), in an
    environment without `variables` and the variables of CLEAN_PREFIXES;
    with `twice` (a default to take from the import), twice at once
    (IMPORT_RUNS). Each child runs in a process group of its own, killed
    when the child is done (what the module left running goes with it) or
    when `timeout` seconds have passed. Returns [result of run 1, of run 2
    (or 1 again)], each {name: what IMPORT_CHILD found}; raises InputError
    naming the module."""
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(CLEAN_PREFIXES) and k not in variables}
    with tempfile.TemporaryDirectory(prefix="shmcfg-import.") as tmp:
        procs, deadline = [], time.monotonic() + timeout
        try:
            for n, run in enumerate(IMPORT_RUNS if twice else IMPORT_RUNS[:1]):
                d = os.path.join(tmp, "run%d" % n)
                os.makedirs(os.path.join(d, "tmp"))
                # a temporary directory of the import's in both runs (they
                # still differ): what the module leaves there (torch's
                # torchinductor_USER) goes with it, not into the user's /tmp
                env = dict(base, TMPDIR=os.path.join(d, "tmp"))
                if run["other_home"]:
                    env.update(HOME=d, USER="shmcfg-import", LOGNAME="shmcfg-import")
                    # and the variables the source names that are no torch's own
                    # set: a default such as bool(os.getenv("CI")) differs then
                    env.update((v, "1") for v in variables
                               if not v.startswith(CLEAN_PREFIXES))
                req = {"modules": names, "path": SEARCH_PATH, "cpus": run["cpus"],
                       "out": os.path.join(d, "result.json"),
                       "progress": os.path.join(d, "progress")}
                with open(os.path.join(d, "request.json"), "w", encoding="utf-8") as f:
                    json.dump(req, f)
                # stderr to a file, not a pipe: a process the module leaves
                # running holds what the child holds, and reading a pipe to
                # its end would wait for it
                with open(os.path.join(d, "stderr"), "wb") as err:
                    p = subprocess.Popen([sys.executable, "-c", IMPORT_CHILD,
                                          os.path.join(d, "request.json")],
                                         cwd=d, env=env, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=err,
                                         **OWN_GROUP)
                procs.append((p, req, d))
            for p, req, d in procs:
                if not wait_exit(p, deadline):
                    raise InputError(timed_out(req, names), 0,
                                     "the import did not finish within %g s "
                                     "(--import-timeout)" % timeout)
                end_group(p)
        finally:
            for p, _, _ in procs:
                end_group(p)
        results = []
        for p, req, d in procs:
            try:
                with open(req["out"], encoding="utf-8") as f:
                    results.append(json.load(f))
            except (OSError, ValueError):
                last = (tail(os.path.join(d, "stderr")).strip().splitlines()
                        or ["no output"])[-1]
                raise InputError(None, 0, "importing %s in a child Python failed (%s): %s"
                                 % (join_and(names), exit_text(p.returncode), last))
    for result in results:
        for name in names:
            r = result[name]
            if r.get("error") == "noconfig":
                raise InputError(name, 0, "not a config module: it has no _config dict "
                                 "after import (torch.utils._config_module."
                                 "install_config_module() makes it)")
            if r.get("error"):
                raise InputError(name, 0, "the import fails: %s" % r["error"])
    return results if twice else results * 2


# Popen's arguments that start a child in a process group of its own (in the
# same session: the terminal's ^C reaches the importer, which kills it)
OWN_GROUP = {"process_group": 0} if sys.version_info >= (3, 11) else {
    "preexec_fn": os.setpgrp}


def wait_exit(p, deadline):
    """Wait for the child `p` to exit, until `deadline` (time.monotonic());
    False if it has not. The child is not reaped (os.waitid WNOWAIT): its
    pid, the id of its process group, stays its own until end_group()."""
    delay = 0.001
    while True:
        try:
            if os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT | os.WNOHANG):
                return True
        except ChildProcessError:  # reaped already
            return True
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(delay, left))
        delay = min(delay * 2, 0.05)


def end_group(p):
    """Kill the process group of the child `p` (the child, if it still runs,
    and whatever it started there), then reap the child."""
    if p.returncode is not None:
        return
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except OSError:  # no such group any more
        pass
    p.wait()


def timed_out(req, names):
    """The module a child was importing when it was stopped (the last its
    progress file names), else all of them."""
    try:
        with open(req["progress"], encoding="utf-8") as f:
            started = f.read().split()
    except OSError:
        started = []
    return started[-1] if started and started[-1] in names else join_and(names)


def tail(path, size=1 << 16):
    """The last `size` bytes of a file, as text ("" if it cannot be read)."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - size))
            return f.read(size).decode("utf-8", "replace")
    except OSError:
        return ""


def exit_text(code):
    return "killed by signal %d" % -code if code < 0 else "exit status %d" % code


def import_type(text):
    """The AnnType of a type the import gives (value_type: the annotation,
    else the default's class), or Skip with what it holds."""
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        raise Skip("holds a %s, which is not a shmcfg type" % text)
    try:
        t = parse_annotation(node)
    except Skip:
        raise Skip(unholdable(node, text))
    if t.type is None:
        raise Skip("its default is None and no annotation gives its type")
    return t


def unholdable(node, text):
    """Why a type is not a shmcfg type, in words."""
    names = {(dotted(n) or "").split(".")[-1] for n in ast.walk(node)
             if isinstance(n, (ast.Name, ast.Attribute))}
    if names & {"Callable", "FunctionType", "MethodType"}:
        return "holds a callable: %s" % text
    members = [m for m in union_members(node)
               if not (isinstance(m, ast.Constant) and m.value is None)
               and (dotted(m) or "") not in ("None", "NoneType")]
    if len(members) > 1:
        return "mixes types: %s" % text
    m = members[0] if members else node
    base = (dotted(m.value if isinstance(m, ast.Subscript) else m) or "").split(".")[-1]
    if base in ("dict", "Dict", "Mapping", "MutableMapping", "defaultdict", "OrderedDict"):
        return "holds a dict: %s" % text
    if base in ("tuple", "Tuple"):
        return "holds a tuple: %s" % text
    if base in SEQ_ANN:
        return "holds a %s of non-strings: %s" % (SEQ_ANN[base], text)
    if base == "Any":
        return "holds any value: %s" % text
    if base in ("type", "Type"):
        return "holds a class: %s" % text
    return "holds an object: %s" % text


def union_members(node):
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return union_members(node.left) + union_members(node.right)
    if isinstance(node, ast.Subscript) and (dotted(node.value) or "").split(".")[-1] in (
            "Union", "Optional"):
        return [m for a in subscript_args(node) for m in union_members(a)]
    return [node]


def machine_paths(value, paths):
    """The first of `paths` (the imported package's directories) in a str,
    list or set value."""
    items = value if isinstance(value, (list, set)) else [value]
    for item in items:
        for p in paths:
            if isinstance(item, str) and p in item:
                return p
    return None


class ImportedModule:
    """A config module named on the command line: its source read by
    ModuleReader, completed and checked against its import."""

    def __init__(self, arg):
        self.arg = arg
        self.name = MODULE_ALIASES.get(arg, arg)
        self.path = locate_module(self.name)
        self.reader = ModuleReader(self.path, self.name, lambda msg: None, take_computed=True)
        self.read = self.reader.read()
        self.computed = any(o.computed is not None for o in self.read)

    def options(self, runs, warn):
        """The options; one `skipped` line each (through warn) for the
        import's options that stay torch's. Returns (options, skipped).
        A disagreement between the source and the import is an error, one
        line each (the last raised as InputError)."""
        got, other = runs[0][self.name], runs[1][self.name]
        if got.get("file") and os.path.realpath(got["file"]) != os.path.realpath(self.path):
            raise InputError(self.arg, 0, "imported from %s, but its source was found at %s"
                             % (got["file"], self.path))
        self.real_name, self.version = got["name"], got.get("version")
        reader, read = self.reader, self.read
        if self.real_name != self.name:  # the options are named by its __name__
            reader = ModuleReader(self.path, self.real_name, lambda msg: None, True)
            read = reader.read()
        imported, again, paths = got["options"], other["options"], got.get("paths", [])
        by_key = {o.name[len(self.real_name) + 1:]: o for o in read}
        out, lines, errors = [], [], []
        for key, o in by_key.items():
            entry = imported.get(key)
            if o.computed is not None:
                try:
                    if entry is None:
                        raise Skip("%s, and the import has no such option" % o.computed)
                    complete(o, entry, again.get(key), paths)
                except Skip as e:
                    lines.append((key, o.where[1], e.reason))
                    continue
            elif entry is None:  # e.g. assigned after install_config_module()
                lines.append((key, o.where[1], "not an option of the imported module"))
                continue
            else:
                why = disagreement(o, entry)
                if why:
                    errors.append((o, why))
                    continue
            out.append(o)
        for n, (o, why) in enumerate(errors):  # one line each, the last raised
            err = InputError(o.where[0], o.where[1], "%s: %s" % (o.name, why))
            if n == len(errors) - 1:
                raise err
            warn("%s: %s" % (PROG, err))
        # what the import has and the schema will not: one line each
        skips = {key: (line, reason) for key, line, reason in reader.skips}
        for key, entry in imported.items():
            if key in by_key:
                continue
            line, reason = skips.get(key) or covering_skip(skips, key) or (0, None)
            if reason is None and key in reader.imports:
                line, reason = reader.imports[key], "a name the module imports, not an assignment"
            try:
                import_type(entry["type"])
                type_reason = None
                value = from_child(entry["default"])
                if isinstance(value, list) and not all(isinstance(v, str) for v in value):
                    type_reason = "holds a list of non-strings: %s" % show(value)
            except Skip as e:
                type_reason = e.reason
            if type_reason and (entry["type"] != "None" or not reason):
                reason = type_reason  # what it holds, unless only that it is None
            lines.append((key, line, reason or "not read from the source (set by code the "
                                               "importer does not follow)"))
        order = {k: n for n, k in enumerate(imported)}
        for key, line, reason in sorted(lines, key=lambda x: order.get(x[0], len(order))):
            warn("skipped %s.%s (%s%s): %s" % (self.real_name, key, self.path,
                                                ":%d" % line if line else "", reason))
        keep = {id(o) for o in out}
        return [o for o in read if id(o) in keep], len(lines)


def covering_skip(skips, key):
    """The skip of a class that holds `key` (class cuda(...) for cuda.x)."""
    parts = key.split(".")
    for n in range(len(parts) - 1, 0, -1):
        hit = skips.get(".".join(parts[:n]))
        if hit:
            return hit
    return None


def complete(o, entry, again, paths):
    """Give an option whose default is computed the import's default, when
    a schema can hold it and it does not depend on the machine; raise Skip."""
    if entry.get("alias") is not None:
        raise Skip("%s (an alias in the import)" % o.computed)
    try:
        t = import_type(entry["type"])
    except Skip:
        if o.type is None:  # else the default is checked against the source's type
            raise
        t = None
    if o.type is None:
        o.type, o.nullable, o.choices = t.type, t.nullable, t.choices
    elif t is not None and t.type != o.type and not (o.type == "float" and t.type == "int"):
        raise Skip("the source says %s, the import %s" % (o.type, entry["type"]))
    value = from_child(entry["default"])
    if isinstance(value, Opaque):
        raise Skip("its default is %s" % value.text)
    if again is None or not same_value(from_child(again["default"]), value):
        raise Skip("its default depends on the machine: %s here, %s on another (its "
                   "directory, home, user, CPU count and environment)"
                   % (show(value), show(from_child(again["default"])) if again else "none"))
    p = machine_paths(value, paths)
    if p is not None:
        raise Skip("its default %s names a directory of this installation (%s)"
                   % (show(value), p))
    if value is None and o.form_typed:
        o.nullable = True  # os.environ.get(VAR, <computed None>)
    o.default = coerce_default(o, value)
    normalize(o)
    check_option(o)
    o.computed = None


def disagreement(o, entry):
    """What the source says of an option that its import does not, or None."""
    if o.alias is not None or entry.get("alias") is not None:
        if o.alias != entry.get("alias"):
            return "the source says alias %s, the import %s" % (o.alias, entry.get("alias"))
        return None
    try:
        t = import_type(entry["type"])
    except Skip as e:
        if entry["type"] != "None":  # None: the default's class, checked below
            return "the source says %s, the import %s" % (o.type, e.reason)
        t = None
    if t is not None and t.type != o.type and not (o.type == "float" and t.type == "int"):
        return "the source says type %s, the import %s" % (o.type, entry["type"])
    value = from_child(entry["default"])
    if o.type == "float" and type(value) is int:
        value = float(value)
    if o.type == "set" and isinstance(value, list):
        value = set(value)
    if not same_value(o.default, value):
        return ("the source says default %s, the import %s (imported without TORCH*/"
                "PYTORCH* variables)" % (show(o.default), show(value)))
    if o.knob != entry.get("justknob"):
        return "the source says justknob %r, the import %r" % (o.knob, entry.get("justknob"))
    if (o.deprecated is not None) != entry.get("deprecated") or (
            o.deprecated and o.deprecated != (entry.get("deprecation_message") or "")):
        return "the source says deprecated %r, the import %r" % (
            o.deprecated, entry.get("deprecation_message") if entry.get("deprecated") else None)
    return None

