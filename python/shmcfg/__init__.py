"""shmcfg: a program's configuration in POSIX shared memory, for Python.

A ctypes binding of libshmcfg (standard library only). A *segment* holds a
typed option table that every process of the host sees; a namespace of it
(``torch._dynamo.config``) behaves like a PyTorch config module::

    import shmcfg
    seg = shmcfg.attach("job42")               # or shmcfg.create("job42")
    config = seg.module("torch._dynamo.config")
    config.recompile_limit                     # 8: a read of shared memory
    config.recompile_limit = 16                # one commit, seen by every process
    with config.patch(recompile_limit=4):      # this thread only
        ...
    seg.generation, seg.config_hash            # what `shmctl hash` prints
    seg.wait(after=seg.generation, timeout=1)  # block until the next commit

A segment removed or replaced (``shmctl rm``, ``shmctl create --force``,
``shmcfg.unlink``) is *retired*: reads keep answering its last values,
``seg.retired`` is True and ``seg.wait()`` raises RetiredError;
``seg.reattach()`` moves the Segment (and its modules) to the segment now
of that name.

Differences from PyTorch's ``torch.utils._config_module``:

- An assignment commits to the segment at once (every process sees it). An
  assignment made inside ``patch()`` commits too (the seed keeps it in the
  thread and drops it when the patch ends): the patching thread keeps reading
  its patched value until the patch ends, then reads the committed one.
- Patches are per OS thread (the seed's are per ``contextvars`` context: in
  one thread, asyncio tasks share them here).
- ``save_config()`` returns the portable JSON of ``shmctl dump`` (the seed
  pickles); ``load_config()`` takes that JSON, or a dict, as one commit.
- Values are typed by the schema: bool options take bool only, int options int
  (not bool), float options int or float, str options str, list and set
  options a list, tuple, set or frozenset of str; None only where the option
  is nullable (``Optional[...]``). Others raise TypeError before anything is
  sent; range and choice violations raise ValueError with the library's text.
- ``get_hash()`` is a BLAKE2b-128 digest of this module's options in the
  library's canonical encoding (doc/design.md), not an MD5 of a repr; it
  reflects the calling thread's patches, as in the seed. ``seg.config_hash``
  is the segment-wide XXH3-128 hash that ``shmctl hash`` prints.

Reads: an attribute read checks one word of the segment header (the
current generation and slot, read directly from shared memory) and returns
the value it cached for that generation; the first read after a commit asks
the library. A published generation never changes, so a cached value is
exact. While any thread of the process has a patch open on the segment,
every read asks the library (which applies the calling thread's patches).
Lists and sets are returned as fresh copies. ``SHMCFG_PYTHON_FAST=0`` (or
``fast_reads=False``) makes every read ask the library.

Library loading: see ``shmcfg._lib`` (``$SHMCFG_LIBRARY``, the build tree,
the installed ``libdir``, the dynamic loader).
"""

import contextlib
import ctypes
import errno
import hashlib
import json
import math
import os
import pwd
import struct
import threading
import time
import types
import typing
import unittest
import warnings
from collections import namedtuple

from . import _lib as _L

__all__ = [
    "attach", "create", "unlink", "Segment", "ConfigModule", "SubConfigProxy",
    "Transaction", "Error", "NotFoundError", "ExistsError", "PermissionDeniedError",
    "OwnerError", "RetiredError",
    "InvalidArgumentError", "UnknownOptionError", "OptionTypeError", "OptionValueError",
    "library_version", "library_path",
]

_ver = _L.version(None, None, None)
library_version = _ver.decode() if _ver else "?"
library_path = _L.path
__version__ = library_version

# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------


class Error(OSError):
    """A failure reported by libshmcfg.

    ``code`` is the library's negative code, ``errname`` its symbolic name
    ("ENOENT", "SHMCFG_E_BUSY"), ``detail`` the library's detail text, and
    ``errno`` the positive code (an errno value, or 30900 + n for shmcfg's
    own codes).
    """

    code = 0
    errname = ""
    detail = ""


class NotFoundError(Error, FileNotFoundError):
    """No such segment (ENOENT)."""


class ExistsError(Error, FileExistsError):
    """A segment of that name exists (EEXIST): pass force=True."""


class PermissionDeniedError(Error, PermissionError):
    """EACCES/EPERM, or a commit on a read-only handle."""


class InvalidArgumentError(Error, ValueError):
    """A bad argument (EINVAL): a bad segment name, bad creation options."""


class OwnerError(PermissionDeniedError):
    """SHMCFG_E_OWNER: the segment is owned by another user than the caller
    or root, or than the owner named with ``attach(..., owner=)``. Anyone
    may create an object under a name another user expects: name the owner
    to trust it."""


class RetiredError(Error):
    """SHMCFG_E_RETIRED: the segment was removed or replaced since it was
    attached. Reads keep answering its last values; ``Segment.reattach()``
    moves to the segment now of that name."""


class _OptionErrorMixin:
    code = 0
    errname = ""
    detail = ""

    def __str__(self):
        return BaseException.__str__(self)


class UnknownOptionError(_OptionErrorMixin, AttributeError, KeyError):
    """No such option; an AttributeError (and a KeyError, as the seed's
    ``get_type`` raises). The message names the module and the option."""


class OptionTypeError(_OptionErrorMixin, TypeError):
    """A value of the wrong type for an option, or None for one that is not
    nullable."""


class OptionValueError(_OptionErrorMixin, ValueError):
    """A value the option refuses: out of range, not one of its choices, a
    NUL byte, conflicting implications, a bad environment variable."""


_ERRNO_CLASS = {
    -2: NotFoundError,        # ENOENT
    -17: ExistsError,         # EEXIST
    -13: PermissionDeniedError,  # EACCES
    -1: PermissionDeniedError,   # EPERM
    -22: InvalidArgumentError,   # EINVAL
    _L.E["READONLY"]: PermissionDeniedError,
    _L.E["OWNER"]: OwnerError,
    _L.E["RETIRED"]: RetiredError,
    _L.E["NOOPT"]: UnknownOptionError,
    _L.E["TYPE"]: OptionTypeError,
    _L.E["NULLVAL"]: OptionTypeError,
}
for _n in ("RANGE", "CHOICE", "PARSE", "CONFLICT", "CYCLE", "ENV", "SCHEMADEF", "LAYER"):
    _ERRNO_CLASS[_L.E[_n]] = OptionValueError


def _error(code, what=None, cls=None):
    """The exception for a negative library code. Call it right after the
    failing call, in the same thread: the detail text is thread-local."""
    d = _L.errdetail()
    detail = d.decode("utf-8", "replace") if d else ""
    n = _L.errname(code)
    t = _L.strerror(code)
    text = t.decode("utf-8", "replace") if t else f"error {code}"
    if detail:  # names the segment, option, value and reason
        msg = detail if text in detail else f"{detail} ({text})"
    else:
        msg = f"{what}: {text}" if what else text
    cls = cls or _ERRNO_CLASS.get(code, Error)
    e = cls(msg)
    e.code = code
    e.errname = n.decode() if n else ""
    e.detail = detail
    if isinstance(e, OSError):
        e.errno = -code
        e.strerror = msg
    return e


def _opt_error(cls, code_name, msg):
    e = cls(msg)
    e.code = _L.E[code_name]
    e.errname = "SHMCFG_E_" + code_name
    e.detail = msg
    return e


def _unknown(module, name, seg):
    full = f"{module}.{name}" if module else name
    return _opt_error(UnknownOptionError, "NOOPT",
                      f"{full} does not exist (segment '{seg}')")


# ---------------------------------------------------------------------------
# Options and values
# ---------------------------------------------------------------------------

_PYTYPE = {_L.BOOL: bool, _L.INT: int, _L.FLOAT: float, _L.STR: str, _L.LIST: list,
           _L.SET: set}
_INT_MIN, _INT_MAX = -(1 << 63), (1 << 63) - 1


class OptionInfo(namedtuple("OptionInfo", "name handle type nullable flags doc alias "
                            "deprecated knob")):
    """What the schema says of one option (``Segment.describe()``).

    ``type`` is the Python type (bool, int, float, str, list, set); ``alias``
    the full name of the option this one forwards to, or None.
    """

    __slots__ = ()

    @property
    def hash_ignored(self):
        return bool(self.flags & _L.F_HASH_IGNORED)

    @property
    def save_ignored(self):
        return bool(self.flags & _L.F_SAVE_IGNORED)

    @property
    def private(self):
        return bool(self.flags & _L.F_PRIVATE)


class _Opt:
    __slots__ = ("name", "opt", "kind", "nullable", "flags", "alias", "final", "doc",
                 "deprecated", "knob")

    def python_type(self):
        t = _PYTYPE[self.kind]
        return typing.Optional[t] if self.nullable else t


class _CVal:
    """A shmcfg_value for the library to read, with the Python objects its
    pointers point into, and the memory it owns (lists)."""

    __slots__ = ("c", "keep", "owned")

    def __init__(self):
        self.c = _L.Value()
        self.keep = None
        self.owned = False

    def __del__(self):
        if self.owned:
            self.owned = False
            _L.value_clear(ctypes.byref(self.c))


def _typename(v):
    return type(v).__name__


def _convert(o, v, label):
    """Check a Python value against option o and make its shmcfg_value."""
    k = o.kind
    cv = _CVal()
    c = cv.c
    c.type = k
    if v is None:
        if not o.nullable:
            raise _opt_error(OptionTypeError, "NULLVAL",
                             f"{label}: None is not allowed (the option is not nullable; "
                             f"expected {_PYTYPE[k].__name__})")
        c.is_null = True
        return cv
    if k == _L.BOOL:
        if type(v) is not bool:
            raise _opt_error(OptionTypeError, "TYPE",
                             f"{label}: expected bool, got {_typename(v)} ({v!r:.80})")
        c.u.b = v
    elif k == _L.INT:
        if not isinstance(v, int) or isinstance(v, bool):
            raise _opt_error(OptionTypeError, "TYPE",
                             f"{label}: expected int, got {_typename(v)} ({v!r:.80})")
        if not _INT_MIN <= v <= _INT_MAX:
            raise _opt_error(OptionValueError, "RANGE",
                             f"{label}: value {v} does not fit in 64 bits")
        c.u.i = v
    elif k == _L.FLOAT:
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            raise _opt_error(OptionTypeError, "TYPE",
                             f"{label}: expected float, got {_typename(v)} ({v!r:.80})")
        try:
            c.u.f = float(v)
        except OverflowError:
            raise _opt_error(OptionValueError, "RANGE",
                             f"{label}: value {v} is too large for a float") from None
    elif k == _L.STR:
        if not isinstance(v, str):
            raise _opt_error(OptionTypeError, "TYPE",
                             f"{label}: expected str, got {_typename(v)} ({v!r:.80})")
        b = _encode(v, label)
        buf = ctypes.create_string_buffer(b, len(b) + 1)
        cv.keep = buf
        c.u.str.ptr = ctypes.addressof(buf)
        c.u.str.len = len(b)
    else:  # list, set
        if not isinstance(v, (list, tuple, set, frozenset)):
            raise _opt_error(OptionTypeError, "TYPE",
                             f"{label}: expected {_PYTYPE[k].__name__} of str, got "
                             f"{_typename(v)} ({v!r:.80})")
        items = list(v)
        for i, it in enumerate(items):
            if not isinstance(it, str):
                raise _opt_error(OptionTypeError, "TYPE",
                                 f"{label}: item {i} is a {_typename(it)} ({it!r:.80}), "
                                 f"not a str")
        if isinstance(v, (set, frozenset)):
            items.sort(key=lambda s: s.encode("utf-8", "surrogatepass"))
        enc = []
        for i, it in enumerate(items):
            b = _encode(it, label)
            if b"\0" in b:
                raise _opt_error(OptionValueError, "PARSE",
                                 f"{label}: item {i} contains a NUL byte")
            enc.append(b)
        arr = (ctypes.c_char_p * max(len(enc), 1))(*enc)
        r = _L.value_list(k, arr, len(enc), ctypes.byref(c))
        if r < 0:
            raise _error(r, label)
        cv.owned = True
    return cv


def _encode(s, label):
    try:
        return s.encode("utf-8")
    except UnicodeEncodeError as e:
        raise _opt_error(OptionValueError, "PARSE",
                         f"{label}: text is not valid UTF-8 ({e.reason})") from None


def _decode(v):
    """A Python value from a shmcfg_value (which the caller clears)."""
    if v.is_null:
        return None
    k = v.type
    if k == _L.BOOL:
        return bool(v.u.b)
    if k == _L.INT:
        return v.u.i
    if k == _L.FLOAT:
        return v.u.f
    if k == _L.STR:
        n = v.u.str.len
        return ctypes.string_at(v.u.str.ptr, n).decode("utf-8") if n else ""
    n = v.u.list.count
    if not n:
        return set() if k == _L.SET else []
    items = [s.decode("utf-8")
             for s in ctypes.string_at(v.u.list.items, v.u.list.bytes).split(b"\0")[:n]]
    return set(items) if k == _L.SET else items


def _to_json(v):
    """A decoded value as the dump writes it (sets as sorted lists)."""
    if isinstance(v, set):
        return sorted(v, key=lambda s: s.encode("utf-8"))
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    return v


def _py_literal(v):
    """A Python literal of a value, as codegen_config() writes it."""
    if isinstance(v, set):
        if not v:
            return "set()"
        return "{" + ", ".join(repr(s) for s in sorted(v, key=lambda s: s.encode())) + "}"
    if isinstance(v, float) and not math.isfinite(v):
        return f"float('{v}')"
    return repr(v)


# canonical encoding of a value, as lib/hash.c (doc/design.md, version 1)
_u32 = struct.Struct("<I").pack
_i64 = struct.Struct("<q").pack
_f64 = struct.Struct("<d").pack
_NAN_BITS = struct.pack("<Q", 0x7FF8000000000000)


def _canon(kind, v):
    if v is None:
        return bytes((kind, 1))
    out = [bytes((kind, 0))]
    if kind == _L.BOOL:
        out.append(b"\1" if v else b"\0")
    elif kind == _L.INT:
        out.append(_i64(v))
    elif kind == _L.FLOAT:
        out.append(_NAN_BITS if math.isnan(v) else _f64(v))
    elif kind == _L.STR:
        b = v.encode("utf-8")
        out += (_u32(len(b)), b)
    else:
        items = [s.encode("utf-8") for s in v]
        if kind == _L.SET:
            items.sort()
        out.append(_u32(len(items)))
        for b in items:
            out += (_u32(len(b)), b)
    return b"".join(out)


# ---------------------------------------------------------------------------
# Segments
# ---------------------------------------------------------------------------

_NO_FAST = 1 << 40  # bits of Segment._state[0]: reasons to call the library
_CLOSED = 1 << 41
_STALE = 1 << 42  # the getters of a handle that reattach() replaced
_PATCHES = _NO_FAST - 1  # the low bits count the patches open


Current = namedtuple("Current", "generation config_hash")
Current.__doc__ = "A generation and its config hash, read together."


class Segment:
    """An attached segment. Get one from attach() or create().

    Attribute reads of the modules it hands out (``module()``) need no lock
    and no system call. Commits are serialized by the library. A Segment may
    be used from any thread; close() it only when no other thread uses it.

    After fork() a child keeps reading through the inherited mapping; its
    first commit (or dump) attaches the segment again by name, as the library
    requires of a child process. A Segment pickles as its name, so
    multiprocessing's spawn start method attaches again in the child.
    """

    def __init__(self, handle, name, fast_reads=None, owner=None):
        self._h = handle
        self._hp = ctypes.c_void_p(handle)
        self._pid = os.getpid()
        self._child = None  # (pid, handle) attached again after fork
        self._owner = owner  # the uid named at attach, or None
        self._fast_arg = fast_reads
        self._incarnation = 0  # bumped by reattach()
        self.name = name
        self._lock = threading.Lock()
        self._modlock = threading.Lock()
        self._state = [0]
        self._tl = threading.local()
        self._modules = {}
        self._hashcache = {}
        self._byindex, self._opts = self._load_options(handle)
        self.readonly = bool(_L.readonly(handle))
        self._setup_view(fast_reads)

    def _load_options(self, handle):
        """The option table of a handle: (list by index, dict by name)."""
        n = _L.count(handle)
        byindex = []
        opts = {}
        info = _L.OptInfo()
        for i in range(n):
            r = _L.opt_info(handle, i, ctypes.byref(info))
            if r < 0:
                raise _error(r, self.name)
            o = _Opt()
            o.name = info.name.decode("utf-8")
            o.opt = i
            o.kind = info.type
            o.flags = info.flags
            o.nullable = bool(info.flags & _L.F_NULLABLE)
            o.alias = info.alias if info.alias != _L.NO_OPT else None
            o.final = info.alias_final
            o.doc = info.doc.decode("utf-8", "replace") if info.doc else ""
            o.deprecated = (info.deprecated.decode("utf-8", "replace")
                            if info.deprecated is not None else None)
            o.knob = info.knob.decode("utf-8", "replace") if info.knob is not None else None
            byindex.append(o)
            opts[o.name] = o
        return byindex, opts

    # -- the inline view -------------------------------------------------

    def _setup_view(self, fast):
        v = _L.View.from_address(self._h)
        self._cur = None
        if v.abi != _L.VIEW_ABI or not v.current:
            self._state[0] |= _NO_FAST
            return
        word = (ctypes.c_int64 * 1).from_address(v.current)
        self._cur = memoryview(word).cast("B").cast("q")
        self._word = word
        if fast is None:
            fast = os.environ.get("SHMCFG_PYTHON_FAST", "1") != "0"
        if not fast:
            self._state[0] |= _NO_FAST

    @property
    def fast_reads(self):
        """Whether attribute reads are served from the per-generation cache
        now (False while a thread has a patch open on this segment)."""
        return not self._state[0]

    def _handle(self):
        h = self._h
        if h is None:
            raise Error(f"segment '{self.name}' is closed")
        return h

    def _wh(self):
        """The handle to commit and take snapshots with in this process."""
        h = self._handle()
        pid = os.getpid()
        if pid == self._pid:
            return h
        c = self._child
        if c is not None and c[0] == pid:
            return c[1]
        nh = _L.c_void_p()
        r = _L.attach_with(self.name.encode(), _attach_opts(self.readonly, self._owner),
                           ctypes.byref(nh))
        if r < 0:
            raise _error(r, f"segment '{self.name}' (attaching again after fork)")
        self._child = (pid, nh.value)
        return nh.value

    # -- reading -----------------------------------------------------------

    @property
    def generation(self):
        """The current generation (1 after creation)."""
        cur = self._cur
        if cur is not None and self._h is not None:
            return cur[0] >> _L.SLOT_BITS
        info = _L.Info()
        r = _L.stat(self._handle(), ctypes.byref(info))
        if r < 0:
            raise _error(r, self.name)
        return info.generation

    def current(self):
        """The current generation and its config hash, read together."""
        out = (ctypes.c_uint8 * 16)()
        g = _L.config_hash(self._handle(), out)
        return Current(g, bytes(out))

    @property
    def config_hash(self):
        """The segment's config hash (16 bytes; ``shmctl hash`` prints it as hex)."""
        return self.current().config_hash

    @property
    def schema_hash(self):
        out = (ctypes.c_uint8 * 16)()
        _L.schema_hash(self._handle(), out)
        return bytes(out)

    def _lookup(self, name):
        o = self._opts.get(name)
        if o is None:
            raise _unknown("", name, self.name)
        return o

    def _patched_here(self):
        return getattr(self._tl, "depth", 0) > 0

    def _read(self, o, _bits=_L.c_uint64, _byref=ctypes.byref, _unpack=struct.Struct("<d").unpack,
              _pack=struct.Struct("<Q").pack):
        """Read an option through the library (honours this thread's patches)."""
        hp = self._hp
        if hp is None:
            raise Error(f"segment '{self.name}' is closed")
        k = o.kind
        if k <= _L.FLOAT:
            bits = _bits()
            r = _L.raw_get_slow(hp, o.opt, k, _byref(bits))
            if r == 0:
                b = bits.value
                if k == _L.INT:
                    return b - (1 << 64) if b >> 63 else b
                if k == _L.BOOL:
                    return b != 0
                return _unpack(_pack(b))[0]
            if r == _L.NULL_RESULT:
                return None
            raise _error(r, o.name)
        v = _L.Value()
        r = _L.raw_get(hp, o.opt, _byref(v))
        if r < 0:
            raise _error(r, o.name)
        try:
            return _decode(v)
        finally:
            _L.value_clear(_byref(v))

    def _getter(self, o):
        """A function(obj) reading option o: the attribute read of a module.

        Values are cached per generation: the word ``current`` of the segment
        header ((generation << 8) | slot) is read directly from shared memory
        and, while it is the one a cached value was read under, the value
        stands (a published generation never changes). Otherwise, and while
        any thread of the process has a patch open on this segment, the
        library reads the value (honouring the calling thread's patches).
        The word is read before the library call, so a commit that races it
        can only make the entry unused, never wrong.
        """
        read = self._read
        state = self._state
        cur = self._cur
        k = o.kind
        if o.deprecated is not None:
            warned = []

            def get_deprecated(_obj, o=o):
                if not warned:
                    warned.append(1)
                    warnings.warn(f"{o.name} is deprecated: {o.deprecated}", FutureWarning,
                                  stacklevel=2)
                return read(o)
            return get_deprecated
        if cur is None:
            return lambda _obj: read(o)
        cache = [(-1, None)]
        if k <= _L.STR:  # immutable values
            def get(_obj):
                if not state[0]:
                    c = cur[0]
                    e = cache[0]
                    if e[0] == c:
                        return e[1]
                    v = read(o)
                    cache[0] = (c, v)
                    return v
                return read(o)
            return get
        freeze, copy = (tuple, list) if k == _L.LIST else (frozenset, set)

        def get_copy(_obj):
            if not state[0]:
                c = cur[0]
                e = cache[0]
                if e[0] != c:
                    v = read(o)
                    cache[0] = (c, None if v is None else freeze(v))
                    return v
                v = e[1]
                return None if v is None else copy(v)
            return read(o)
        return get_copy

    def get(self, name):
        """The value of an option by its full name (honours this thread's patches)."""
        return self._read(self._lookup(name))

    def options(self):
        """The full names of every option, in declaration order."""
        return [o.name for o in self._byindex]

    def describe(self, name):
        """An OptionInfo for an option's full name."""
        o = self._lookup(name)
        return OptionInfo(o.name, o.opt, _PYTYPE[o.kind], o.nullable, o.flags, o.doc,
                          self._byindex[o.alias].name if o.alias is not None else None,
                          o.deprecated, o.knob)

    def _snapshot(self, opts):
        """Values of several options, all from one generation (and this
        thread's patches)."""
        for _ in range(1000):
            g = self.generation
            vals = [self._read(o) for o in opts]
            if self.generation == g:
                return g, vals
        return g, vals

    def is_default(self, name):
        o = self._lookup(name)
        return self._is_default(o)

    def _is_default(self, o):
        r = _L.is_default(self._handle(), o.opt)
        if r < 0:
            raise _error(r, o.name)
        return r == 1

    # -- modules -----------------------------------------------------------

    def module(self, name=""):
        """The config module of the options named ``NAME.*``, e.g.
        ``seg.module("torch._dynamo.config")``; ``module("")`` holds every
        option under its full name. The same object is returned each time."""
        m = self._modules.get(name)
        if m is None:
            with self._modlock:
                m = self._modules.get(name)
                if m is None:
                    m = _make_module(self, name)
                    self._modules[name] = m
        return m

    # -- writing -----------------------------------------------------------

    def _commit(self, changes, layer=_L.SRC_USER):
        """One transaction: changes is a list of (_Opt, _CVal or None=reset).
        Returns the generation (the current one when nothing changed)."""
        h = self._wh()
        t = ctypes.c_void_p()
        r = _L.txn_begin(h, ctypes.byref(t))
        if r < 0:
            raise _error(r, f"segment '{self.name}'")
        try:
            if layer != _L.SRC_USER:
                r = _L.txn_layer(t, layer)
                if r < 0:
                    raise _error(r, f"segment '{self.name}'")
            for o, cv in changes:
                if cv is None:
                    r = _L.txn_reset(t, o.opt)
                else:
                    r = _L.txn_set(t, o.opt, ctypes.byref(cv.c))
                if r < 0:
                    raise _error(r, o.name)
        except BaseException:
            _L.txn_abort(t)
            raise
        gen = _L.c_uint64()
        r = _L.txn_commit(t, ctypes.byref(gen))
        if r < 0:
            raise _error(r, f"segment '{self.name}'")
        return gen.value

    def set(self, values, **kw):
        """Set options by full name, all in one commit: ``seg.set({"a.b": 1})``.
        Returns the generation published (or the current one if nothing changed)."""
        return self.transaction(**kw).update(values).commit()

    def reset(self, *names, **kw):
        """Clear the user layer of options, in one commit."""
        t = self.transaction(**kw)
        for n in names:
            t.reset(n)
        return t.commit()

    def transaction(self, layer="user"):
        """A Transaction: collect sets and resets, commit them as one
        generation. As a context manager it commits on success."""
        return Transaction(self, layer)

    # -- patches -------------------------------------------------------------

    def _push(self, pairs):
        h = self._handle()
        with self._lock:
            self._state[0] += 1
        r = _L.patch_push(h)
        if r < 0:
            e = _error(r, self.name)
            with self._lock:
                self._state[0] -= 1
            raise e
        tl = self._tl
        tl.depth = getattr(tl, "depth", 0) + 1
        for o, cv in pairs:
            r = _L.patch_set(h, o.opt, ctypes.byref(cv.c))
            if r < 0:
                e = _error(r, o.name)
                self._pop()
                raise e

    def _pop(self):
        r = _L.patch_pop(self._handle())
        if r < 0:
            raise _error(r, f"segment '{self.name}': patch closed out of order")
        self._tl.depth -= 1
        with self._lock:
            self._state[0] -= 1

    # -- waiting and history ---------------------------------------------

    def wait(self, after=None, timeout=None):
        """Block until the generation is greater than ``after`` (default: the
        current one), or ``timeout`` seconds pass (None: forever). Returns the
        new generation, or None on timeout. A futex on the segment: commits
        wake every waiter; signals (KeyboardInterrupt) are served. Raises
        RetiredError once the segment was removed or replaced (see
        reattach())."""
        h = self._handle()
        if after is None:
            after = self.generation
        deadline = None if timeout is None else time.monotonic() + max(timeout, 0)
        gen = _L.c_uint64()
        while True:
            if deadline is None:
                ms = 1000  # wake once a second to serve signals
            else:
                left = deadline - time.monotonic()
                ms = max(0, min(int(math.ceil(left * 1000)), 1000))
            r = _L.wait(h, after, ms, ctypes.byref(gen))
            if r == 0:
                return gen.value
            if r not in (-errno.ETIMEDOUT, -errno.EINTR):
                raise _error(r, self.name)
            if deadline is not None and time.monotonic() >= deadline:
                return None

    def changes(self, from_gen, to_gen=None):
        """The full names of the options that changed between two generations,
        or None when the library no longer knows (commits were missed)."""
        if to_gen is None:
            to_gen = self.generation
        if to_gen <= from_gen:
            return []
        n = len(self._byindex)
        arr = (ctypes.c_bool * max(n, 1))()
        r = _L.changes(self._handle(), from_gen, to_gen, arr)
        if r == -2:
            return None
        if r < 0:
            raise _error(r, self.name)
        return [self._byindex[i].name for i in range(n) if arr[i]]

    def commit_info(self, gen):
        """Who committed a recent generation: a dict (generation, time,
        pid, uid, changed names, nchanged), or None if no longer logged."""
        c = _L.Commit()
        r = _L.commit_info(self._handle(), gen, ctypes.byref(c))
        if r == -2:
            return None
        if r < 0:
            raise _error(r, self.name)
        return {"generation": c.generation, "time": c.time_ns / 1e9, "pid": c.pid,
                "uid": c.uid, "nchanged": c.nchanged,
                "changed": [self._byindex[c.ids[i]].name for i in range(c.nids)
                            if c.ids[i] < len(self._byindex)]}

    # -- dump, load, codegen ---------------------------------------------

    def dump(self, all=False):
        """The portable JSON text that ``shmctl dump`` prints."""
        p = ctypes.c_void_p()
        r = _L.dump(self._wh(), _L.DUMP_ALL if all else 0, ctypes.byref(p))
        if r < 0:
            raise _error(r, self.name)
        return _L.take_string(p)

    def load(self, data):
        """Load a dump (text, bytes or dict) or a {full name: value} dict as
        one commit; unknown names warn. Returns the generation."""
        return self.module("").load_config(data)

    def codegen(self, format="python"):
        """The non-default settings as code: "python", "shell" (shmctl
        commands) or "json" (the library's codegen, without thread patches)."""
        fmt = {"python": _L.CODEGEN_PYTHON, "shell": _L.CODEGEN_SHELL,
               "json": _L.CODEGEN_JSON}.get(format)
        if fmt is None:
            raise ValueError(f"unknown codegen format {format!r}")
        p = ctypes.c_void_p()
        r = _L.codegen(self._handle(), fmt, ctypes.byref(p))
        if r < 0:
            raise _error(r, self.name)
        return _L.take_string(p)

    # -- lifetime ------------------------------------------------------------

    def unlink(self):
        """Remove the segment (see shmcfg.unlink()): this Segment, as every
        process attached to it, keeps its last values and is retired."""
        unlink(self.name)

    @property
    def retired(self):
        """Whether the segment was removed or replaced since it was attached
        (``shmctl rm``, ``shmctl create --force``, unlink()): reads keep
        answering its last values, wait() raises RetiredError, reattach()
        moves to the segment now of that name. One fstat(2)."""
        return bool(_L.retired(self._handle()))

    def reattach(self):
        """Attach the segment now of this name (with the options of the first
        attach: read-only, owner) and move this Segment to it; returns self.

        The modules handed out (``module()``) read the new segment, their
        values cached for the old one dropped; option handles are looked up
        again by name (an option the new schema lacks raises
        UnknownOptionError when read; a namespace it lacks keeps its old
        module, whose reads fail so). Closure patchers made before must be
        made again. Call it when no other thread of the process uses the
        Segment and no patch is open (RuntimeError otherwise), in the process
        that attached it. On failure (no segment of that name yet...) the
        Segment stays on the old segment and the error is raised."""
        h = self._handle()
        if os.getpid() != self._pid:
            raise Error(f"segment '{self.name}': reattach() in a child process: attach it "
                        "by name")
        if self._state[0] & _PATCHES:
            raise RuntimeError(f"segment '{self.name}': reattach() with a patch open")
        hp = ctypes.c_void_p(h)
        r = _L.reattach(ctypes.byref(hp))
        if r < 0:
            raise _error(r, f"segment '{self.name}'")
        # the old handle is closed (unmapped): nothing may read through it
        # again. Its getters (held by the modules and proxies handed out)
        # go to the library through the new handle from now on.
        old_state = self._state
        with self._lock:
            old_state[0] |= _STALE
        self._h = hp.value
        self._hp = ctypes.c_void_p(hp.value)
        self._child = None
        self._incarnation += 1
        self._hashcache = {}
        self._state = [0]
        # option handles by name: keep each _Opt object (getters hold it),
        # with the new segment's index and attributes
        byindex, opts = self._load_options(hp.value)
        old = self._opts
        for i, o in enumerate(byindex):
            prev = old.get(o.name)
            if prev is not None:
                for f in _Opt.__slots__:
                    setattr(prev, f, getattr(o, f))
                byindex[i] = prev
                opts[o.name] = prev
        for name, o in old.items():
            if name not in opts:
                o.opt = _L.NO_OPT  # the library says it does not exist
        self._byindex, self._opts = byindex, opts
        self.readonly = bool(_L.readonly(hp.value))
        self._setup_view(self._fast_arg)
        # the modules handed out: new getters (new header word, empty caches)
        with self._modlock:
            for mname, m in list(self._modules.items()):
                try:
                    fresh = _make_module(self, mname)
                except UnknownOptionError:
                    continue
                _transplant(m, fresh)
        return self

    def close(self):
        """Detach. Modules of this segment then raise Error. Call it when no
        other thread of the process reads through this segment."""
        h = self._h
        if h is None:
            return
        with self._lock:
            self._state[0] |= _CLOSED
        self._h = None
        self._hp = None
        self._cur = None
        if os.getpid() == self._pid:
            _L.close(h)
        c = self._child
        if c is not None and c[0] == os.getpid():
            _L.close(c[1])
        self._child = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __reduce__(self):
        return (_attach_pickled, (self.name, self.readonly, self._owner))

    def __repr__(self):
        state = "closed" if self._h is None else f"generation {self.generation}"
        return f"<shmcfg.Segment '{self.name}' {len(self._byindex)} options, {state}>"


class Transaction:
    """Changes committed as one generation (``Segment.transaction()``).

    ``t[name] = value``, ``t.set(name, value)``, ``t.update(mapping)``,
    ``del t[name]`` / ``t.reset(name)`` (clear the layer), then ``commit()``.
    Names are full names. Types are checked as they are given; the library
    checks ranges and choices at commit, where one bad value fails all.
    """

    def __init__(self, seg, layer="user"):
        if layer not in ("user", "knob"):
            raise ValueError(f"layer must be 'user' or 'knob', not {layer!r}")
        self._seg = seg
        self._layer = _L.SRC_USER if layer == "user" else _L.SRC_KNOB
        self._changes = []
        self._done = False

    def set(self, name, value):
        o = self._seg._lookup(name)
        self._changes.append((o, _convert(o, value, o.name)))
        return self

    __setitem__ = set

    def update(self, values):
        for k, v in dict(values).items():
            self.set(k, v)
        return self

    def reset(self, name):
        self._changes.append((self._seg._lookup(name), None))
        return self

    __delitem__ = reset

    def commit(self):
        """Publish; returns the generation (the current one if nothing changed)."""
        if self._done:
            raise RuntimeError("transaction already committed or aborted")
        self._done = True
        return self._seg._commit(self._changes, self._layer)

    def abort(self):
        self._done = True
        self._changes = []

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None and not self._done:
            self.commit()
        else:
            self.abort()


# ---------------------------------------------------------------------------
# Config modules
# ---------------------------------------------------------------------------


class ContextDecorator(contextlib.ContextDecorator):
    """contextlib.ContextDecorator that also decorates unittest.TestCase
    classes (patch for the whole class), as the seed's does."""

    def __call__(self, func):
        if isinstance(func, type) and issubclass(func, unittest.TestCase):
            patch = self

            class _TestCase(func):
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
            return _TestCase
        return super().__call__(func)


class _Patch(ContextDecorator):
    """What ConfigModule.patch() returns: enter/exit push and pop a patch
    frame of the calling thread. Re-entrant and usable from many threads."""

    def __init__(self, seg, pairs):
        self._seg = seg
        self._pairs = pairs
        self.changes = {o.name: None for o, _ in pairs}

    def __enter__(self):
        self._seg._push(self._pairs)

    def __exit__(self, exc_type, exc, tb):
        self._seg._pop()


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

    def apply(self):
        seg = self._seg
        if self._incarnation != seg._incarnation:
            raise Error(f"segment '{seg.name}': a closure patcher made before reattach(): "
                        "make it again")
        with seg._lock:
            seg._state[0] += 1
            self._active += 1
        r = _L.patcher_apply(self._p)
        if r < 0:
            e = _error(r, seg.name)
            with seg._lock:
                seg._state[0] -= 1
                self._active -= 1
            raise e
        tl = seg._tl
        tl.depth = getattr(tl, "depth", 0) + 1
        return self.restore

    def restore(self):
        seg = self._seg
        r = _L.patcher_restore(self._p)
        if r < 0:
            raise _error(r, f"segment '{seg.name}': closure patch reverted out of order")
        seg._tl.depth -= 1
        with seg._lock:
            seg._state[0] -= 1
            self._active -= 1

    def __del__(self):
        # a frame still applied in some thread borrows the patcher's values:
        # keep them (a leak) rather than free them under it
        if getattr(self, "_p", None) and not self._active:
            _L.patcher_free(self._p)
            self._p = None


_MODULE_ATTRS = ("_shmcfg_seg", "_shmcfg_opts", "_shmcfg_prefix", "__getattr__")


class ConfigModule(types.ModuleType):
    """A namespace of a segment with the interface of a PyTorch config module.

    Made by ``Segment.module(name)``; its class has one descriptor per option.
    Option names that are also method names here (``patch``...) are reached
    with ``Segment.get()``/``set()``.
    """

    def __init__(self, *a, **kw):
        raise TypeError("use shmcfg.attach(NAME).module(MODULE)")

    # attribute protocol ----------------------------------------------------

    # Reads: one property per option on the module's own class. Names that
    # are not attributes (dotted names, unknown names) reach the module-level
    # __getattr__ (PEP 562) that _make_module() puts in the module's dict: a
    # __getattr__ method on the class would slow every read down.

    def __setattr__(self, name, value):
        d = self.__dict__
        o = d["_shmcfg_opts"].get(name)
        if o is None:
            if name.startswith("__") and name.endswith("__"):
                types.ModuleType.__setattr__(self, name, value)
                return
            raise _unknown(d["__name__"], name, d["_shmcfg_seg"].name)
        seg = d["_shmcfg_seg"]
        seg._commit([(o, _convert(o, value, o.name))])

    def __delattr__(self, name):
        d = self.__dict__
        o = d["_shmcfg_opts"].get(name)
        if o is None:
            raise _unknown(d["__name__"], name, d["_shmcfg_seg"].name)
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
            raise _unknown(d["__name__"], name, d["_shmcfg_seg"].name)
        return o

    def _changes(self, changes):
        out = []
        for k, v in changes.items():
            o = self._o(k)
            out.append((o, _convert(o, v, o.name)))
        return out

    def _items(self, skip=lambda o: False):
        """(relative name, _Opt) of the module's own options, aliases left out."""
        return [(rel, o) for rel, o in self.__dict__["_shmcfg_opts"].items()
                if o.alias is None and not skip(o)]

    def _values(self, items):
        _, vals = self.__dict__["_shmcfg_seg"]._snapshot([o for _, o in items])
        return {rel: v for (rel, _), v in zip(items, vals)}

    # the seed's interface -----------------------------------------------

    def get_type(self, config_name):
        """The option's Python type: bool, int, float, str, list, set, or
        typing.Optional[T] for a nullable option."""
        return self._o(config_name).python_type()

    def _is_default(self, name):
        """Whether the option holds its schema default (a value set in any
        layer, even an equal one, is not default). Honours this thread's
        patches."""
        return self.__dict__["_shmcfg_seg"]._is_default(self._o(name))

    def patch(self, arg1=None, arg2=None, **kwargs):
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
        if arg1 is not None:
            if arg2 is not None:
                if not isinstance(arg1, str):
                    raise TypeError("first argument must be a string when passing 2 "
                                    "positional args to patch")
                changes = {arg1: arg2}
            else:
                if not isinstance(arg1, dict):
                    raise TypeError("first argument must be a dict when passing a single "
                                    "positional arg to patch")
                changes = arg1
            if kwargs:
                raise TypeError("cannot pass both positional and keyword arguments to patch")
        else:
            if arg2 is not None:
                raise TypeError("second positional argument is only valid when first "
                                "argument is a key string")
            changes = kwargs
        return _Patch(self.__dict__["_shmcfg_seg"], self._changes(changes))

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

    def get_hash(self):
        """A 16-byte digest of this module's options that are not hash-ignored
        (aliases left out), as the calling thread sees them (its patches
        included): BLAKE2b-128 over the library's canonical encoding, keyed by
        the module's name. Equal in every process that sees the same values."""
        d = self.__dict__
        seg = d["_shmcfg_seg"]
        patched = seg._patched_here()
        key = d["__name__"]
        if not patched:
            g = seg.generation
            c = seg._hashcache.get(key)
            if c is not None and c[0] == g:
                return c[1]
        items = self._items(lambda o: o.flags & _L.F_HASH_IGNORED)
        items.sort(key=lambda it: it[0].encode("utf-8"))
        g, vals = seg._snapshot([o for _, o in items])
        name = key.encode("utf-8")
        buf = [b"shmcfg module hash v1\n", _u32(len(name)), name]
        for (rel, o), v in zip(items, vals):
            b = rel.encode("utf-8")
            buf += (_u32(len(b)), b, _canon(o.kind, v))
        digest = hashlib.blake2b(b"".join(buf), digest_size=16).digest()
        if not patched:
            seg._hashcache[key] = (g, digest)
        return digest

    def get_config_copy(self):
        """A dict of every option of this module (aliases left out), by
        relative name; lists and sets are fresh copies."""
        return self._values(self._items())

    get_serializable_config_copy = get_config_copy

    def save_config_portable(self, *, ignore_private_configs=True):
        """get_config_copy() without private (``_``) options, as the seed's."""
        def skip(o):
            rel = o.name[len(self.__dict__["_shmcfg_prefix"]):]
            return ignore_private_configs and (o.flags & _L.F_PRIVATE or
                                               rel.startswith("_"))
        return self._values(self._items(skip))

    def save_config(self):
        """The portable JSON of ``shmctl dump`` (UTF-8 bytes), with the values
        of this module's options (full names; aliases, save-ignored and
        private options left out) as this thread sees them."""
        d = self.__dict__
        seg = d["_shmcfg_seg"]
        prefix = d["_shmcfg_prefix"]
        doc = json.loads(seg.dump())
        values = doc.get("values", {})
        keep = {k: v for k, v in values.items() if k.startswith(prefix)}
        if seg._patched_here():
            opts = [seg._opts[k] for k in keep]
            _, vals = seg._snapshot(opts)
            keep = {o.name: _to_json(v) for o, v in zip(opts, vals)}
        doc["values"] = keep
        return (json.dumps(doc, indent=2) + "\n").encode("utf-8")

    def load_config(self, maybe_config):
        """Apply a save_config()/``shmctl dump`` JSON (bytes or str) or a dict
        of values as ONE commit. Keys are names relative to this module or
        full names; unknown keys warn and are skipped. Returns the generation."""
        if isinstance(maybe_config, (bytes, bytearray, str)):
            config = json.loads(maybe_config)
        elif isinstance(maybe_config, dict):
            config = maybe_config
        else:
            raise TypeError(f"load_config takes JSON bytes/str or a dict, not "
                            f"{_typename(maybe_config)}")
        if not isinstance(config, dict):
            raise _opt_error(OptionValueError, "PARSE", "load_config: not a JSON object")
        if isinstance(config.get("values"), dict) and ("format" in config or len(config) == 1):
            config = config["values"]
        d = self.__dict__
        seg = d["_shmcfg_seg"]
        opts = d["_shmcfg_opts"]
        changes = []
        for k, v in config.items():
            o = opts.get(k) or seg._opts.get(k)
            if o is None:
                warnings.warn(f"key {k} with value {v!r} is not understood by this config",
                              stacklevel=2)
                continue
            if (o.kind == _L.FLOAT and isinstance(v, str) and v in ("nan", "inf", "-inf")):
                v = float(v)
            changes.append((o, _convert(o, v, o.name)))
        return seg._commit(changes)

    def codegen_config(self):
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

    def __init__(self, config, prefix):
        object.__setattr__(self, "_config", config)
        object.__setattr__(self, "_prefix", prefix)

    def __getattr__(self, name):
        return getattr(self._config, self._prefix + name)

    def __setattr__(self, name, value):
        setattr(self._config, self._prefix + name, value)

    def __delattr__(self, name):
        delattr(self._config, self._prefix + name)

    def __repr__(self):
        return f"<shmcfg.SubConfigProxy {self._config.__name__}.{self._prefix[:-1]}>"


_RESERVED = set(dir(ConfigModule)) | set(_MODULE_ATTRS) | {"__dict__"}


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
            ns[rel] = property(seg._getter(o), doc=o.doc or None)
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
        o = opts.get(attr)
        if o is None:
            if attr.startswith("__") and attr.endswith("__"):
                raise AttributeError(f"module '{name}' has no attribute '{attr}'")
            raise _unknown(name, attr, seg.name)
        return seg._read(o)
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
            ns[rel] = property(seg._getter(o), doc=o.doc or None)
    for head, s in nested.items():
        if head not in ns and head not in ("_config", "_prefix"):
            ns[head] = _make_proxy(seg, module, prefix + head + ".", s)
    cls = type(f"SubConfigProxy[{module.__name__}.{prefix[:-1]}]", (SubConfigProxy,), ns)
    return cls(module, prefix)


def _module_of(seg, name):
    return seg.module(name)


# ---------------------------------------------------------------------------
# Entry points
# ---------------------------------------------------------------------------


def attach(name, readonly=False, fast_reads=None, *, owner=None):
    """Attach an existing segment. Raises NotFoundError (a FileNotFoundError)
    when there is none, PermissionDeniedError, OwnerError (owned by another
    user than you or root, or than ``owner``), or Error (SHMCFG_E_MAGIC,
    SHMCFG_E_VERSION, SHMCFG_E_CORRUPT...).

    ``owner``: the user (a name or a uid) that must own the segment. Without
    it only segments of the caller's user or root are trusted: anyone may
    create an object under a name another user expects.
    """
    uid = _owner_uid(owner)
    h = _L.c_void_p()
    r = _L.attach_with(_segname(name), _attach_opts(readonly, uid), ctypes.byref(h))
    if r < 0:
        raise _error(r, f"segment '{name}'")
    return _wrap(h.value, name, fast_reads, uid)


def _attach_pickled(name, readonly, owner):
    return attach(name, readonly, owner=owner)


def _owner_uid(owner):
    """A uid from a user name or a uid; None for None."""
    if owner is None:
        return None
    if isinstance(owner, bool) or not isinstance(owner, (int, str)):
        raise TypeError(f"owner must be a user name or a uid, not {_typename(owner)}")
    if isinstance(owner, int):
        if not 0 <= owner < 0xFFFFFFFF:
            raise InvalidArgumentError(f"owner: uid {owner} is out of range")
        return owner
    try:
        return pwd.getpwnam(owner).pw_uid
    except KeyError:
        raise InvalidArgumentError(f"owner: no such user {owner!r}") from None


def _attach_opts(readonly, uid):
    o = _L.AttachOpts()
    o.flags = (_L.ATTACH_RDONLY if readonly else 0) | (_L.ATTACH_OWNER if uid is not None else 0)
    o.owner = uid if uid is not None else 0
    return ctypes.byref(o)


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


def create(name, schema=None, *, force=False, no_env=False, env=None, schema_text=None,
           slots=0, readers=0, heap_bytes=0, mode=0, fast_reads=None):
    """Create a segment and attach it.

    ``schema``: None for the embedded default (torch.compiler.config and the
    torch._dynamo.config options its aliases point at), or the path of a
    YAML schema file; ``schema_text``: a schema as YAML text. ``force``
    replaces a segment of that name (else ExistsError). ``env``: a mapping
    to fill the environment layers from instead of os.environ; ``no_env``
    leaves them empty. ``slots``, ``readers``, ``heap_bytes``, ``mode``: see
    shmcfg_create_opts (0: the defaults).
    """
    sch = ctypes.c_void_p()
    if schema is not None and schema_text is not None:
        raise TypeError("give schema or schema_text, not both")
    if schema is not None:
        r = _L.schema_load(os.fsencode(schema), ctypes.byref(sch))
        if r < 0:
            raise _error(r, f"schema {os.fsdecode(schema)}")
    elif schema_text is not None:
        b = schema_text.encode("utf-8") if isinstance(schema_text, str) else bytes(schema_text)
        r = _L.schema_load_text(b, len(b), b"<schema_text>", ctypes.byref(sch))
        if r < 0:
            raise _error(r, "schema_text")
    opts = _L.CreateOpts()
    opts.slots = slots
    opts.readers = readers
    opts.heap_bytes = heap_bytes
    opts.mode = mode
    opts.flags = (_L.CREATE_FORCE if force else 0) | (_L.CREATE_NO_ENV if no_env else 0)
    keep = None
    if env is not None:
        items = [f"{k}={v}".encode() for k, v in env.items()]
        keep = (ctypes.c_char_p * (len(items) + 1))(*items, None)
        opts.envp = ctypes.cast(keep, ctypes.c_void_p)
    h = _L.c_void_p()
    try:
        r = _L.create(_segname(name), sch, ctypes.byref(opts), ctypes.byref(h))
        if r < 0:
            raise _error(r, f"segment '{name}'")
    finally:
        _L.schema_free(sch)
    del keep
    return _wrap(h.value, name, fast_reads)


def unlink(name, missing_ok=False):
    """Remove a segment. It is retired first: attached processes keep their
    mapping and last values, and learn it (Segment.retired, RetiredError from
    wait()). Another user's object raises PermissionDeniedError."""
    r = _L.unlink(_segname(name))
    if r < 0 and not (missing_ok and r == -2):
        raise _error(r, f"segment '{name}'")


def _segname(name):
    if not isinstance(name, str):
        raise TypeError(f"segment name must be a str, not {_typename(name)}")
    return name.encode("utf-8")


def _wrap(h, name, fast_reads, owner=None):
    try:
        return Segment(h, name, fast_reads, owner)
    except BaseException:
        _L.close(h)
        raise
