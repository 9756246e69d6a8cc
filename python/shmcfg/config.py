# SPDX-License-Identifier: MIT
"""Config modules: the namespace of a segment with the interface of a
PyTorch config module (``ConfigModule``: attributes, patch(), closure
patchers, get_hash(), save/load, codegen), its nested namespaces
(``SubConfigProxy``) and the patch objects (private to the package;
``shmcfg`` re-exports the public names).
"""

from __future__ import annotations

import builtins
import contextlib
import ctypes
import hashlib
import io
import json
import pickle
import pickletools
import sys
import threading
import types
import unittest
import warnings
from types import TracebackType
from typing import TYPE_CHECKING, Any, Callable, Dict, Mapping, Optional, Set, Type, TypeVar, Union

from . import _lib as _L
from . import canon
from .errors import (ConfigLoadError, Error, PatchArgumentError, UnknownOptionError, _error,
                     _opt_error, _unknown)
from .values import _brief, _convert, _py_literal, _typename


_F = TypeVar("_F", bound=Callable[..., Any])


class ContextDecorator(contextlib.ContextDecorator):
    """contextlib.ContextDecorator that also decorates unittest.TestCase
    classes (patch for the whole class), as the seed's does."""

    if TYPE_CHECKING:  # what a subclass provides, for type checkers
        def __enter__(self) -> None: ...

        def __exit__(self, exc_type: Optional[Type[BaseException]],
                     exc: Optional[BaseException], tb: Optional[TracebackType]) -> None: ...

    def __call__(self, func: _F) -> _F:  # type: ignore[override]
        if isinstance(func, type) and issubclass(func, unittest.TestCase):
            patch = self

            class _TestCase(func):  # type: ignore[valid-type, misc]
                @classmethod
                def setUpClass(cls):
                    patch.__enter__()
                    try:
                        super().setUpClass()
                    except Exception:
                        patch.__exit__(None, None, None)
                        raise

                @classmethod
                def tearDownClass(cls):
                    try:
                        super().tearDownClass()
                    finally:
                        patch.__exit__(None, None, None)

            _TestCase.__name__ = func.__name__
            _TestCase.__qualname__ = func.__qualname__
            _TestCase.__module__ = func.__module__
            return _TestCase  # type: ignore[return-value]
        return super().__call__(func)


class _Patch(ContextDecorator):
    """What ConfigModule.patch() returns: enter/exit push and pop a patch
    frame of the calling thread. Re-entrant and usable from many threads."""

    def __init__(self, seg, pairs):
        self._seg = seg
        self._pairs = pairs
        self.changes = {o.name: None for o, _ in pairs}

    def __enter__(self) -> None:
        self._seg._push(self._pairs, id(self))

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        self._seg._pop(id(self))


_FastPatch: Any = None
if _L.fast is not None:
    class _FastPatch(ContextDecorator, _L.fast.Patch):  # type: ignore[misc, name-defined, no-redef]
        """_Patch with its enter and exit in C (shmcfg._fast.Patch): one call
        each, the values converted once, here; the Python enter and exit
        (Segment._push, _pop, with the patch's id() as the frame's owner,
        as the C enter and exit) serve what is not the common case."""


def _make_patch(seg, pairs):
    """What ConfigModule.patch() returns for segment seg (of a closed one:
    the Python patch, whose enter says so, as before)."""
    h = seg._h
    if seg._fastmod is None or _FastPatch is None or h is None:
        return _Patch(seg, pairs)
    p = _FastPatch(h, seg._state, pairs, tuple(o.opt for o, _ in pairs),
                   tuple(ctypes.addressof(cv.c) for _, cv in pairs), seg._push, seg._pop)
    p.changes = {o.name: None for o, _ in pairs}
    return p


class _Patcher:
    """A prepared patch (the seed's _make_closure_patcher): validated once."""

    def __init__(self, seg, pairs):
        self._seg = seg
        self._incarnation = seg._incarnation
        p = ctypes.c_void_p()
        r = _L.patcher_new(seg._handle(), ctypes.byref(p))
        if r < 0:
            raise _error(r, seg.name)
        self._p = p.value
        self._active = 0
        for o, cv in pairs:
            r = _L.patcher_set(self._p, o.opt, ctypes.byref(cv.c))
            if r < 0:
                e = _error(r, o.name)
                _L.patcher_free(self._p)
                self._p = None
                raise e

    def _live(self):
        """The segment, if the patcher may still reach its handle: its C
        patcher names the handle it was made on, freed at close."""
        seg = self._seg
        seg._handle()  # closed: raises
        if self._incarnation != seg._incarnation:
            raise Error(f"segment '{seg.name}': a closure patcher made before reattach(): "
                        "make it again")
        return seg

    def apply(self):
        seg = self._live()
        with seg._lock:
            seg._count_patch(1)
            self._active += 1
        r = _L.patcher_apply(self._p)
        if r < 0:
            e = _error(r, seg.name)
            with seg._lock:
                seg._count_patch(-1)
                self._active -= 1
            raise e
        seg._thread_patches(1)
        return self.restore

    def restore(self):
        seg = self._live()
        r = _L.patcher_restore(self._p)
        if r < 0:
            raise _error(r, f"segment '{seg.name}': this closure patch is not applied in this thread")
        seg._thread_patches(-1)
        with seg._lock:
            seg._count_patch(-1)
            self._active -= 1

    def __del__(self):
        # a frame still applied in some thread borrows the patcher's values:
        # keep them (a leak) rather than free them under it
        if getattr(self, "_p", None) and not self._active:
            _L.patcher_free(self._p)
            self._p = None


# -- read and write policies -------------------------------------------------
#
# The plain value fetch of an attribute read is Segment._value_fetcher();
# everything else a read or write may have to do is one of these named
# policies, applied only to the options that need them (a fast read path
# can skip to the fetch for the others): a deprecation warning, a name
# hidden by unittest.mock, a list or set value whose changes commit.

_warned: Set[str] = set()  # full names of the deprecated options warned of (once per process)
_warned_lock = threading.Lock()


def warn_deprecated(o):
    """Warn once per process that option o is deprecated (a read, a write,
    a patch), as PyTorch's config modules do: a FutureWarning, "NAME is
    deprecated and MESSAGE. It will be removed in a future version", shown
    at the first caller outside the shmcfg package."""
    if o.deprecated is None or o.name in _warned:
        return
    with _warned_lock:
        if o.name in _warned:
            return
        _warned.add(o.name)
    msg = f"{o.name} is deprecated"
    text = o.deprecated.strip().rstrip(".")
    if text:
        msg += f" and {text}"
    msg += ". It will be removed in a future version"
    msg += " of PyTorch." if o.name.startswith("torch.") else "."
    level, f = 1, sys._getframe(0)
    while f is not None and _in_package(f):
        level, f = level + 1, f.f_back
    warnings.warn(msg, FutureWarning, stacklevel=level)


def _in_package(frame):
    return frame.f_globals.get("__name__", "").startswith("shmcfg.")


def _mock_restores_after_delete():
    """Whether the delattr() being served comes from unittest.mock's patch
    exit, which sets the original value back when the attribute is gone
    afterwards (hasattr() false) and create=False. The frames between are
    skipped: shmcfg's own (SubConfigProxy, the torch bridge) and, for a
    nested option of a bridged module, torch's SubConfigProxy.__delattr__."""
    f = sys._getframe(2)
    while f is not None and (_in_package(f) or
                             f.f_globals.get("__name__") == "torch.utils._config_module"):
        f = f.f_back
    if f is None or f.f_code.co_name != "__exit__" or \
            f.f_globals.get("__name__") not in ("unittest.mock", "mock.mock"):
        return False
    return not getattr(f.f_locals.get("self"), "create", True)


def _attr_path(obj, rel):
    """The object and attribute name that serve the read of relative name
    rel of module obj with a class property (obj itself, or the nested
    SubConfigProxy), or (None, None)."""
    head, _, last = rel.rpartition(".")
    for part in head.split(".") if head else ():
        obj = vars(type(obj)).get(part) or getattr(obj, "__dict__", {}).get(part)
        if not isinstance(obj, SubConfigProxy):
            return None, None
    if not isinstance(vars(type(obj)).get(last), _L.OPTION_ATTRS):
        return None, None
    return obj, last


def hide(module, rel):
    """PyTorch's hide flag (its __delattr__): the option reads as missing
    from this module object (AttributeError, hasattr() false) until it is
    assigned again. Its property leaves the class (so reads of other names
    pay nothing); the module's __getattr__ then refuses the name."""
    d = module.__dict__
    hidden = d.setdefault("_shmcfg_hidden", {})
    if rel in hidden:
        return
    obj, attr = _attr_path(module, rel)
    if obj is None:
        hidden[rel] = None
        return
    cls = type(obj)
    hidden[rel] = (cls, attr, vars(cls)[attr])
    delattr(cls, attr)


def unhide(module, rel):
    """Undo hide() (an assignment)."""
    hidden = module.__dict__.get("_shmcfg_hidden")
    if not hidden or rel not in hidden:
        return
    entry = hidden.pop(rel)
    if entry is not None:
        cls, attr, prop = entry
        setattr(cls, attr, prop)


def _is_hidden(module, rel):
    hidden = module.__dict__.get("_shmcfg_hidden")
    return bool(hidden) and rel in hidden


class _ValuesUnpickler(pickle.Unpickler):
    """pickle.loads() of a saved config, refusing every global but the
    builtin containers a config value can be: a pickle names the callables
    it calls, so this one runs no code."""

    def find_class(self, module, name):
        # protocol 2 names Python 2's module (__builtin__)
        if module in ("builtins", "__builtin__") and name in ("set", "frozenset"):
            return getattr(builtins, name)
        raise ConfigLoadError(f"load_config: the pickle names {module}.{name}; a saved config "
                              "holds only bool, int, float, str, None, lists and sets")


STORED_MAX = 64 << 20  # bytes a loaded config may take as stored (a torch config: a few KiB)
NODES_MAX = 1 << 20      # containers and items it may hold; opcodes its pickle may have
DEPTH_MAX = 8            # nesting of containers (a config: dict -> list or set -> str is 2)


def _refuse(why):
    return ConfigLoadError(f"load_config: not a pickled config ({why})")


class _Node:
    """What the pre-scan knows of an object the unpickler would make."""

    __slots__ = ("kind", "depth", "sealed", "allstr", "text", "items")

    def __init__(self, kind, depth=0, text=None):
        self.kind = kind      # "str", "scalar", "list", "tuple", "dict", "set", "mark", "global"
        self.depth = depth    # containers nested in it, itself included
        self.sealed = False   # an item of another container: never changed again
        self.allstr = True    # every item is a str
        self.text = text      # a str's value (short ones: a STACK_GLOBAL's names)
        self.items = None     # a tuple's items (REDUCE's arguments)


_SCALAR_OPS = frozenset(("NONE", "NEWTRUE", "NEWFALSE", "INT", "BININT", "BININT1", "BININT2",
                         "LONG", "LONG1", "LONG4", "FLOAT", "BINFLOAT", "BINBYTES",
                         "SHORT_BINBYTES", "BINBYTES8"))
_STR_OPS = frozenset(("STRING", "BINSTRING", "SHORT_BINSTRING", "UNICODE", "BINUNICODE",
                      "SHORT_BINUNICODE", "BINUNICODE8"))
_EMPTY_OPS = {"EMPTY_DICT": "dict", "EMPTY_LIST": "list", "EMPTY_TUPLE": "tuple",
              "EMPTY_SET": "set"}
_PUT_OPS = frozenset(("PUT", "BINPUT", "LONG_BINPUT", "MEMOIZE"))
_GET_OPS = frozenset(("GET", "BINGET", "LONG_BINGET"))


def _check_global(module, name):
    """find_class()'s rule, applied before anything is unpickled."""
    if module in ("builtins", "__builtin__") and name in ("set", "frozenset"):
        return
    raise ConfigLoadError(f"load_config: the pickle names {module}.{name}; a saved config "
                          "holds only bool, int, float, str, None, lists and sets")


def _check_pickle(data):
    """Run a pickle's opcodes (pickletools.genops) on a model of the
    unpickler's stack and memo before the unpickler makes anything, and
    refuse what no saved config (pickle.dumps of a dict of scalars, lists,
    tuples and sets) has but what makes the unpickler, or what it made,
    take unbounded time or memory:
      - over NODES_MAX opcodes (each makes at most one object);
      - a memo index that is not the next one (CPython's picklers number
        their PUTs 0, 1, 2... and MEMOIZE is the next one by definition):
        the unpickler sizes its memo from the index, nine bytes could ask
        for gigabytes;
      - containers nested over DEPTH_MAX deep (hash() and repr() of them
        recurse in C: a 200,000-deep tuple is a SIGSEGV);
      - a dict key or a set item that is not a str (an int's hash is its
        value: 40,000 colliding keys take the unpickler 20 s);
      - a container changed after it became an item of another (picklers
        finish each container before its parent takes it; this keeps the
        depths above exact and makes cycles impossible);
      - other globals than set and frozenset, and any opcode a config's
        pickle has no use for (objects, extensions, buffers, DUP)."""
    stack = []
    memo = []
    ops = 0

    def pop_mark():
        for i in range(len(stack) - 1, -1, -1):
            if stack[i].kind == "mark":
                items = stack[i + 1:]
                del stack[i:]
                return items
        raise _refuse("no MARK")

    def pop():
        if not stack or stack[-1].kind == "mark":
            raise _refuse("stack underflow")
        return stack.pop()

    def container(kind, items):
        n = _Node(kind, 1)
        add(n, items)
        return n

    def add(target, items):
        for it in items:
            if it.kind in ("mark", "global"):
                raise _refuse(f"a {it.kind} as an item")
            it.sealed = True  # (first: a container added to itself is refused below)
            if it.depth + 1 > target.depth:
                target.depth = it.depth + 1
            if it.kind != "str":
                target.allstr = False
        if target.sealed:
            raise _refuse(f"a {target.kind} changed after another container took it")
        if target.depth > DEPTH_MAX:
            raise _refuse(f"containers nested over {DEPTH_MAX} deep")

    def top(kind):
        if not stack or stack[-1].kind != kind:
            raise _refuse(f"no {kind} to add items to")
        return stack[-1]

    for op, arg, _ in pickletools.genops(data):
        name = op.name
        ops += 1
        if ops > NODES_MAX:
            raise _refuse(f"over {NODES_MAX} opcodes")
        if name in _STR_OPS:
            stack.append(_Node("str", text=arg if len(arg) <= 256 else None))
        elif name in _SCALAR_OPS:
            stack.append(_Node("scalar"))
        elif name in _PUT_OPS:
            if name != "MEMOIZE" and arg != len(memo):
                raise _refuse(f"memo index {arg} where the next is {len(memo)}")
            if not stack or stack[-1].kind == "mark":
                raise _refuse("nothing to memoize")
            memo.append(stack[-1])
        elif name in _GET_OPS:
            if not 0 <= arg < len(memo):
                raise _refuse(f"memo index {arg} of {len(memo)}")
            stack.append(memo[arg])
        elif name in _EMPTY_OPS:
            stack.append(_Node(_EMPTY_OPS[name], 1))
        elif name == "MARK":
            stack.append(_Node("mark"))
        elif name in ("APPEND", "APPENDS"):
            items = [pop()] if name == "APPEND" else pop_mark()
            add(top("list"), items)
        elif name in ("SETITEM", "SETITEMS"):
            items = [pop(), pop()][::-1] if name == "SETITEM" else pop_mark()
            if len(items) % 2 or any(k.kind != "str" for k in items[::2]):
                raise _refuse("a dict key that is not a str")
            add(top("dict"), items)
        elif name == "ADDITEMS":
            items = pop_mark()
            add(top("set"), items)
            if not stack[-1].allstr:
                raise _refuse("a set item that is not a str")
        elif name in ("LIST", "TUPLE", "DICT", "FROZENSET"):
            items = pop_mark()
            if name == "DICT" and (len(items) % 2 or
                                   any(k.kind != "str" for k in items[::2])):
                raise _refuse("a dict key that is not a str")
            n = container({"LIST": "list", "TUPLE": "tuple", "DICT": "dict",
                           "FROZENSET": "set"}[name], items)
            if name == "FROZENSET" and not n.allstr:
                raise _refuse("a set item that is not a str")
            if name == "TUPLE":
                n.items = items
            stack.append(n)
        elif name in ("TUPLE1", "TUPLE2", "TUPLE3"):
            items = [pop() for _ in range(int(name[-1]))][::-1]
            n = container("tuple", items)
            n.items = items
            stack.append(n)
        elif name == "POP":
            if not stack:
                raise _refuse("stack underflow")
            stack.pop()
        elif name == "POP_MARK":
            pop_mark()
        elif name in ("GLOBAL", "STACK_GLOBAL"):
            if name == "GLOBAL":
                module, _, attr = arg.partition(" ")
            else:
                attr, module = pop().text, pop().text
            _check_global(module, attr)
            stack.append(_Node("global"))
        elif name == "REDUCE":
            # set(list) and frozenset(list): how protocols 2 and 3 write sets
            args, func = pop(), pop()
            if func.kind != "global" or args.kind != "tuple":
                raise _refuse("REDUCE of no set")
            if args.items is None:
                args.items = []  # EMPTY_TUPLE: set()
            if len(args.items) > 1 or any(x.kind not in ("list", "tuple") or not x.allstr
                                          for x in args.items):
                raise _refuse("a set item that is not a str")
            stack.append(_Node("set", 1))
        elif name in ("PROTO", "FRAME", "STOP"):
            pass
        else:
            raise _refuse(f"opcode {name}")




def _check_stored(config, what):
    """A config's values as they would be stored, each shared reference
    counted each time (a pickle's BINGET repeats an object for a few bytes:
    half a megabyte could ask for gigabytes): refused past STORED_MAX bytes,
    NODES_MAX items or DEPTH_MAX levels of containers, before anything is
    encoded. Iterative: a deep or cyclic value costs at most NODES_MAX
    steps."""
    total = nodes = 0
    stack = [(config, 1)]
    while stack:
        x, depth = stack.pop()
        nodes += 1
        if isinstance(x, (str, bytes, bytearray)):
            total += len(x) + 1
        elif isinstance(x, dict):
            total += 16 * len(x)
            stack.extend((k, depth + 1) for k in x.keys())
            stack.extend((v, depth + 1) for v in x.values())
        elif isinstance(x, (list, tuple, set, frozenset)):
            total += 8 * len(x)
            stack.extend((v, depth + 1) for v in x)
        else:
            total += 8
        if total > STORED_MAX or nodes > NODES_MAX:
            raise ConfigLoadError(f"load_config: {what} holds over {STORED_MAX >> 20} MiB or "
                                  f"{NODES_MAX} items as stored (a shared reference counts each "
                                  f"time): not a config")
        if depth > DEPTH_MAX and isinstance(x, (dict, list, tuple, set, frozenset)):
            raise ConfigLoadError(f"load_config: {what} nests containers over {DEPTH_MAX} "
                                  f"deep: not a config")


def _load_pickle(data):
    try:
        _check_pickle(data)
        config = _ValuesUnpickler(io.BytesIO(data)).load()
    except ConfigLoadError:
        raise
    except Exception as e:  # (MemoryError and RecursionError too: no bound let them happen)
        raise ConfigLoadError(f"load_config: not a pickled config ({e})") from None
    if not isinstance(config, dict):
        raise ConfigLoadError(f"load_config: the pickle holds a "
                              f"{_typename(config)}, not a dict")
    _check_stored(config, "the pickle")
    return config


def _load_json(text):
    # json.loads makes every value before anything can be checked: a value
    # can be 3 bytes of text ("[],") and 60 of object, so the values are
    # bounded first by the commas that separate them (those in strings too)
    if text.count("," if isinstance(text, str) else b",") > NODES_MAX:
        raise ConfigLoadError(f"load_config: the JSON holds over {NODES_MAX} items (commas): "
                              f"not a config")
    deep = False
    try:
        config = json.loads(text)
    except RecursionError:
        # the C decoder guards its recursion (Py_EnterRecursiveCall): a
        # clean refusal of a text nested deeper than the interpreter's limit
        deep = True
    except (ValueError, MemoryError) as e:
        raise ConfigLoadError(f"load_config: neither a pickled config nor the JSON of a "
                              f"dump ({e})") from None
    if deep:  # (raised here, not chained to the RecursionError)
        raise ConfigLoadError(f"load_config: the JSON nests containers over {DEPTH_MAX} "
                              f"deep: not a config")
    if not isinstance(config, dict):
        raise ConfigLoadError("load_config: the JSON is not an object")
    _check_stored(config, "the JSON")
    if isinstance(config.get("values"), dict) and ("format" in config or len(config) == 1):
        config = config["values"]
    return config


def parse_config(maybe_config):
    """The dict of values of what load_config() takes: a dict; PyTorch's
    save_config() bytes (a pickled dict); the JSON of ``shmctl dump`` or
    ``seg.dump()`` (bytes or str; its "values"). Bytes and text over
    STORED_MAX are refused before they are read."""
    if isinstance(maybe_config, dict):
        return maybe_config
    if isinstance(maybe_config, (bytes, bytearray, memoryview)):
        maybe_config = bytes(maybe_config)
    elif not isinstance(maybe_config, str):
        raise TypeError(f"load_config takes a dict, the bytes of save_config() or the JSON "
                        f"of a dump, not {_typename(maybe_config)}")
    if len(maybe_config) > STORED_MAX:
        unit = "characters" if isinstance(maybe_config, str) else "bytes"
        raise ConfigLoadError(f"load_config: {len(maybe_config)} {unit}, over "
                              f"{STORED_MAX >> 20} Mi: not a config")
    if isinstance(maybe_config, bytes) and maybe_config[:1] == b"\x80":
        return _load_pickle(maybe_config)  # a pickle of protocol 2 or later
    return _load_json(maybe_config)


def patch_changes(arg1, arg2, kwargs):
    """The {name: value} of patch()'s three forms (PyTorch's rules; a
    misuse raises PatchArgumentError, an AssertionError as in PyTorch)."""
    if arg1 is not None:
        if arg2 is not None:
            if not isinstance(arg1, str):
                raise PatchArgumentError("first argument must be a string when passing 2 "
                                         "positional args to patch")
            changes = {arg1: arg2}
        else:
            if not isinstance(arg1, dict):
                raise PatchArgumentError("first argument must be a dict when passing a single "
                                         "positional arg to patch")
            changes = arg1
        if kwargs:
            raise PatchArgumentError("cannot pass both positional and keyword arguments to "
                                     "patch")
    else:
        if arg2 is not None:
            raise PatchArgumentError("second positional argument is only valid when first "
                                     "argument is a key string")
        changes = kwargs
    return changes


class _NotConstructible(TypeError, NotImplementedError):
    """ConfigModule() called directly (PyTorch raises NotImplementedError)."""


_MODULE_ATTRS = ("_shmcfg_seg", "_shmcfg_opts", "_shmcfg_prefix", "__getattr__")


class ConfigModule(types.ModuleType):
    """A namespace of a segment with the interface of a PyTorch config module.

    Made by ``Segment.module(name)``; its class has one descriptor per option.
    Option names that are also method names here (``patch``...) are reached
    with ``Segment.get()``/``set()``.
    """

    def __init__(self, *a, **kw):
        raise _NotConstructible("use shmcfg.attach(NAME).module(MODULE)")

    # attribute protocol ----------------------------------------------------

    # Reads: one property per option on the module's own class. Names that
    # are not attributes (dotted names, unknown names) reach the module-level
    # __getattr__ (PEP 562) that _make_module() puts in the module's dict: a
    # __getattr__ method on the class would slow every read down.

    def __setattr__(self, name: str, value: Any) -> None:
        d = self.__dict__
        o = d["_shmcfg_opts"].get(name)
        if o is None:
            if name.startswith("__") and name.endswith("__"):
                types.ModuleType.__setattr__(self, name, value)
                return
            raise _unknown(d["__name__"], name, d["_shmcfg_seg"].name, d["_shmcfg_opts"])
        warn_deprecated(o)
        cv = _convert(o, value, o.name)
        if "_shmcfg_hidden" in d:
            unhide(self, name)
        d["_shmcfg_seg"]._commit([(o, cv)])

    def __delattr__(self, name: str) -> None:
        """Clear the option's user layer (one commit). From unittest.mock's
        patch exit, which sets the original value back when hasattr() is
        false afterwards, hide the option instead (PyTorch's hide flag):
        mock's restore is then one commit of the original value."""
        d = self.__dict__
        o = d["_shmcfg_opts"].get(name)
        if o is None:
            raise _unknown(d["__name__"], name, d["_shmcfg_seg"].name, d["_shmcfg_opts"])
        if _mock_restores_after_delete():
            hide(self, name)
            return
        d["_shmcfg_seg"]._commit([(o, None)])

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self.__dict__["_shmcfg_opts"]))

    def __reduce__(self):
        d = self.__dict__
        return (_module_of, (d["_shmcfg_seg"], d["__name__"]))

    def __repr__(self):
        d = self.__dict__
        return (f"<shmcfg.ConfigModule '{d['__name__']}' of segment "
                f"'{d['_shmcfg_seg'].name}', {len(d['_shmcfg_opts'])} options>")

    # internals ---------------------------------------------------------------

    def _o(self, name):
        d = self.__dict__
        o = d["_shmcfg_opts"].get(name)
        if o is None:
            raise _unknown(d["__name__"], name, d["_shmcfg_seg"].name, d["_shmcfg_opts"])
        return o

    def _changes(self, changes):
        out = []
        for k, v in changes.items():
            o = self._o(k)
            warn_deprecated(o)
            out.append((o, _convert(o, v, o.name)))
        return out

    def _items(self, skip=lambda o: False):
        """(relative name, _Opt) of the module's own options, aliases left out."""
        return [(rel, o) for rel, o in self.__dict__["_shmcfg_opts"].items()
                if o.alias is None and not skip(o)]

    def _values(self, items):
        """{relative name: stored value}: what the seed's _get_dict() gives
        (its save_config(), get_config_copy(), codegen_config()), the values
        an active implication overrides included, as a dump writes them."""
        _, vals = self.__dict__["_shmcfg_seg"]._snapshot([o for _, o in items], stored=True)
        return {rel: v for (rel, _), v in zip(items, vals)}

    # the seed's interface -----------------------------------------------

    def get_type(self, config_name: str) -> Any:
        """The option's Python type: bool, int, float, str, list, set, or
        typing.Optional[T] for a nullable option."""
        return self._o(config_name).python_type()

    def _is_default(self, name):
        """Whether the option holds its schema default (a value set in any
        layer, even an equal one, is not default). Honours this thread's
        patches."""
        return self.__dict__["_shmcfg_seg"]._is_default(self._o(name))

    def patch(self, arg1: Union[str, Mapping[str, Any], None] = None, arg2: Any = None,
              **kwargs: Any) -> ContextDecorator:
        """Temporary changes for the calling thread, as a context manager or
        a decorator (also of a unittest.TestCase class)::

            @config.patch("name", val)
            @config.patch(name1=val1, name2=val2)
            @config.patch({"name1": val1, "name2": val2})

        Patches nest, never touch the segment, and are seen by this thread
        only. Names and types are checked here; ranges when it is entered.
        An assignment inside the patch commits to the segment; this thread
        reads its patched value until the patch ends.
        """
        changes = patch_changes(arg1, arg2, kwargs)
        return _make_patch(self.__dict__["_shmcfg_seg"], self._changes(changes))

    def _make_closure_patcher(self, **changes):
        """A lower-overhead patch() for the critical path, checked once::

            change_fn = config._make_closure_patcher(foo=True)
            revert = change_fn()
            try:
                ...
            finally:
                revert()
        """
        p = _Patcher(self.__dict__["_shmcfg_seg"], self._changes(changes))
        return p.apply

    def get_hash(self) -> bytes:
        """A 16-byte digest of this module's options that are not hash-ignored
        (aliases left out), as the calling thread sees them (its patches
        included): BLAKE2b-128 over the library's canonical encoding
        (shmcfg.canon.module_encoding()), headed by the module's name. Equal
        in every process that sees the same values."""
        d = self.__dict__
        seg = d["_shmcfg_seg"]
        patched = seg._patched_here()
        key = d["__name__"]
        if not patched:
            g = seg.generation
            c = seg._hashcache.get(key)
            if c is not None and c[0] == g:
                return c[1]
        g, items = _hashed_values(self)
        digest = hashlib.blake2b(canon.module_encoding(key, items), digest_size=16).digest()
        if not patched:
            seg._hashcache[key] = (g, digest)
        return digest

    def get_config_copy(self) -> Dict[str, Any]:
        """A dict of every option of this module (aliases left out), by
        relative name, with stored values as the seed's (an option an active
        implication overrides gives what its layers hold); lists and sets
        are fresh copies."""
        return self._values(self._items())

    def _serializable(self, ignored=()):
        """get_config_copy() without save-ignored options (the schema's
        save_ignored; the names in ``ignored`` and in a
        ``_save_config_ignore`` option or attribute: PyTorch's list)."""
        ignored = set(ignored) | set(getattr(self, "_save_config_ignore", None) or ())
        return self._values(self._items(lambda o: o.flags & _L.F_SAVE_IGNORED or
                                        self._rel(o) in ignored))

    def to_dict(self) -> Dict[str, Any]:
        """Deprecated in PyTorch (a FutureWarning): get_config_copy()."""
        warnings.warn("`config.to_dict()` has been deprecated. It no longer changes the "
                      "underlying config. use `config.get_config_copy()` instead",
                      FutureWarning, stacklevel=2)
        return self.get_config_copy()

    def shallow_copy_dict(self) -> Dict[str, Any]:
        """Deprecated in PyTorch (a FutureWarning): get_config_copy()."""
        warnings.warn("`config.shallow_copy_dict()` has been deprecated. It no longer changes "
                      "the underlying config. use `config.get_config_copy()` instead",
                      FutureWarning, stacklevel=2)
        return self.get_config_copy()

    def get_serializable_config_copy(self) -> Dict[str, Any]:
        """get_config_copy() without the save-ignored options."""
        return self._serializable()

    def _rel(self, o):
        return o.name[len(self.__dict__["_shmcfg_prefix"]):]

    def _portable(self, ignore_private_configs, prefixes=()):
        prefixes = tuple(prefixes) + tuple(getattr(self, "_cache_config_ignore_prefix", None)
                                           or ())
        if ignore_private_configs:
            prefixes += ("_",)

        def skip(o):
            return (self._rel(o).startswith(prefixes) or
                    (ignore_private_configs and o.flags & _L.F_PRIVATE))
        return self._values(self._items(skip))

    def save_config_portable(self, *, ignore_private_configs: bool = True,
                             readonly_values: bool = False) -> Dict[str, Any]:
        """get_config_copy() without private options (a ``_`` name or the
        schema's private flag) unless ignore_private_configs is False, nor
        names under a prefix of a ``_cache_config_ignore_prefix`` option or
        attribute, as PyTorch's. readonly_values is accepted for PyTorch's
        signature (every value returned here is a fresh copy)."""
        return self._portable(ignore_private_configs)

    def save_config(self) -> bytes:
        """PyTorch's format: a pickle (protocol 2) of the dict of this
        module's values by relative name (aliases and save-ignored options
        left out), as this thread sees them. load_config() of any module of
        the same options takes it; ``seg.dump()`` is the portable JSON of
        the whole segment."""
        return pickle.dumps(self._serializable(), protocol=2)

    def load_config(self, maybe_pickled_config: Union[bytes, str, Mapping[str, Any]]) -> int:
        """Apply, as ONE commit, what save_config() returned (a pickled dict:
        only builtin containers and scalars are unpickled), a dict of values,
        or the JSON of a dump (``seg.dump()``, ``shmctl dump``; bytes or
        str). Keys are names relative to this module or full names; unknown
        keys warn and are skipped. Returns the generation."""
        config = parse_config(maybe_pickled_config)
        d = self.__dict__
        seg = d["_shmcfg_seg"]
        opts = d["_shmcfg_opts"]
        changes = []
        for k, v in config.items():
            o = opts.get(k) or seg._opts.get(k)
            if o is None:
                warnings.warn(f"key {_brief(k) if type(k) is not str or len(k) > 200 else k} "
                              f"with value {_brief(v)} is not understood by this config",
                              stacklevel=2)
                continue
            if (o.kind == _L.FLOAT and isinstance(v, str) and v in ("nan", "inf", "-inf")):
                v = float(v)
            warn_deprecated(o)
            changes.append((o, _convert(o, v, o.name)))
        return seg._commit(changes)

    def codegen_config(self) -> str:
        """Python statements that reproduce this module's non-default
        settings (``torch._dynamo.config.recompile_limit = 16``), sets as
        set literals; aliases and save-ignored options left out."""
        d = self.__dict__
        seg = d["_shmcfg_seg"]
        mod = d["__name__"]
        items = [(rel, o) for rel, o in self._items(lambda o: o.flags & _L.F_SAVE_IGNORED)
                 if not seg._is_default(o)]
        vals = self._values(items)
        return "\n".join(f"{mod}.{rel} = {_py_literal(vals[rel])}" if mod else
                         f"{rel} = {_py_literal(vals[rel])}" for rel, _ in items)


class SubConfigProxy:
    """A nested namespace of a config module (``config.triton.cudagraphs``)."""

    __slots__ = ("_config", "_prefix")

    def __init__(self, config: ConfigModule, prefix: str) -> None:
        object.__setattr__(self, "_config", config)
        object.__setattr__(self, "_prefix", prefix)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._config, self._prefix + name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._config, self._prefix + name, value)

    def __delattr__(self, name: str) -> None:
        delattr(self._config, self._prefix + name)

    def __repr__(self) -> str:
        return f"<shmcfg.SubConfigProxy {self._config.__name__}.{self._prefix[:-1]}>"


_RESERVED = set(dir(ConfigModule)) | set(_MODULE_ATTRS) | {"__dict__"}


def _hashed_values(m):
    """The generation and the (relative name, type, value) of the hashed
    options of module m (canon.hashed()), as the calling thread sees them:
    what get_hash() encodes (and, for module "", what the config hash of
    the segment encodes)."""
    items = m._items(lambda o: not canon.hashed(o))
    g, vals = m.__dict__["_shmcfg_seg"]._snapshot([o for _, o in items])
    return g, [(rel, o.kind, v) for (rel, o), v in zip(items, vals)]


def _make_module(seg, name):
    prefix = name + "." if name else ""
    opts = {}
    for o in seg._byindex:
        if o.name.startswith(prefix):
            opts[o.name[len(prefix):]] = o
    if not opts:
        raise _opt_error(UnknownOptionError, "NOOPT",
                         f"segment '{seg.name}' has no options under '{name}'")
    ns = {}
    nested = {}
    for rel, o in opts.items():
        head, dot, rest = rel.partition(".")
        if dot:
            nested.setdefault(head, {})[rest] = o
        elif rel not in _RESERVED:
            ns[rel] = seg._attr(o)
    cls = type(f"ConfigModule[{name}]", (ConfigModule,), ns)
    m = types.ModuleType.__new__(cls)
    types.ModuleType.__init__(m, name)
    d = m.__dict__
    d["_shmcfg_seg"] = seg
    d["_shmcfg_opts"] = opts
    d["_shmcfg_prefix"] = prefix
    # nested namespaces live in the module's dict: a read is a dict lookup
    for head, sub in nested.items():
        if head not in ns and head not in _RESERVED:
            d[head] = _make_proxy(seg, m, head + ".", sub)

    def __getattr__(attr):
        # names without a property: dotted and unknown names, hidden ones
        o = opts.get(attr)
        if o is None or _is_hidden(m, attr):
            if attr.startswith("__") and attr.endswith("__"):
                raise AttributeError(f"module '{name}' has no attribute '{attr}'")
            raise _unknown(name, attr, seg.name, opts)
        return seg._read_with_policies(o)
    d["__getattr__"] = __getattr__
    return m


def _make_proxy(seg, module, prefix, sub):
    """The SubConfigProxy of a nested namespace: its own class, with a
    property per option and the proxies of the namespaces below it."""
    ns = {"__slots__": ()}
    nested = {}
    for rel, o in sub.items():
        head, dot, rest = rel.partition(".")
        if dot:
            nested.setdefault(head, {})[rest] = o
        elif rel not in ("_config", "_prefix"):
            ns[rel] = seg._attr(o)
    for head, s in nested.items():
        if head not in ns and head not in ("_config", "_prefix"):
            ns[head] = _make_proxy(seg, module, prefix + head + ".", s)
    cls = type(f"SubConfigProxy[{module.__name__}.{prefix[:-1]}]", (SubConfigProxy,), ns)
    return cls(module, prefix)


def _module_of(seg, name):
    return seg.module(name)


def _transplant(m, fresh):
    """Make module m what fresh is (its class: the getters; its dict: the
    options, nested proxies and __getattr__), keeping the object the caller
    holds."""
    m.__class__ = type(fresh)
    d = m.__dict__
    keep = ("__name__", "__doc__", "__package__", "__loader__", "__spec__")
    for k in [k for k in d if k not in keep]:
        del d[k]
    d.update({k: v for k, v in fresh.__dict__.items() if k not in keep})
