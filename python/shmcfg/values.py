# SPDX-License-Identifier: MIT
"""Options and their values: what the schema says of an option (``_Opt``,
``OptionInfo``), and the conversion of Python values to and from the C
``shmcfg_value`` (``_convert()``: type-checked, ``_decode()``), with the
Python form of a value that codegen writes (private to the
package; ``shmcfg`` re-exports OptionInfo).
"""

from __future__ import annotations

import ctypes
import math
import reprlib
import typing
from typing import Any, NamedTuple, Optional, Type

from . import _lib as _L
from .errors import OptionTypeError, OptionValueError, _error, _opt_error


_PYTYPE = {_L.BOOL: bool, _L.INT: int, _L.FLOAT: float, _L.STR: str, _L.LIST: list,
           _L.SET: set}
_INT_MIN, _INT_MAX = -(1 << 63), (1 << 63) - 1


class OptionInfo(NamedTuple):
    """What the schema says of one option (``Segment.describe()``).

    ``type`` is the Python type (bool, int, float, str, list, set); ``alias``
    the full name of the option this one forwards to, or None.
    """

    name: str
    handle: int
    type: Type[Any]
    nullable: bool
    flags: int
    doc: str
    alias: Optional[str]
    deprecated: Optional[str]
    knob: Optional[str]

    @property
    def hash_ignored(self) -> bool:
        return bool(self.flags & _L.F_HASH_IGNORED)

    @property
    def save_ignored(self) -> bool:
        return bool(self.flags & _L.F_SAVE_IGNORED)

    @property
    def private(self) -> bool:
        return bool(self.flags & _L.F_PRIVATE)


class _Opt:
    __slots__ = ("name", "opt", "kind", "nullable", "flags", "alias", "final", "doc",
                 "deprecated", "knob")

    def python_type(self):
        t = _PYTYPE[self.kind]
        return typing.Optional[t] if self.nullable else t


class _CVal:
    """A shmcfg_value for the library to read, with the Python objects its
    pointers point into, and the memory it owns (lists: the value's owned
    pointer, which shmcfg_value_clear() frees; NULL for the others)."""

    __slots__ = ("c", "keep")

    def __init__(self):
        self.c = _L.Value()
        self.keep = None

    def __del__(self):
        # an exception in __init__ (KeyboardInterrupt) leaves no c
        c = getattr(self, "c", None)
        if c is not None and c.owned:
            _L.value_clear(ctypes.byref(c))


def _typename(v):
    return type(v).__name__


class _BriefRepr(reprlib.Repr):
    """repr() for a value put in an error or a warning: bounded in depth,
    items and length. A value is whatever a caller, a pickle or a JSON text
    gave: repr() of a deeply nested list recurses past the interpreter's
    limit (RecursionError), repr() builds all of a long one before a
    format's precision cuts it, and str() of an int of over 4300 digits
    raises ValueError."""

    def __init__(self):
        super().__init__()
        self.maxlevel = 3
        self.maxstring = self.maxother = 80
        self.maxlong = 80

    def repr1(self, x, level):
        if isinstance(x, int) and not isinstance(x, bool) and x.bit_length() > 128:
            return f"an int of {x.bit_length()} bits"
        return super().repr1(x, level)


_brief = _BriefRepr().repr


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
                             f"{label}: expected bool, got {_typename(v)} ({_brief(v)})")
        c.u.b = v
    elif k == _L.INT:
        if not isinstance(v, int) or isinstance(v, bool):
            raise _opt_error(OptionTypeError, "TYPE",
                             f"{label}: expected int, got {_typename(v)} ({_brief(v)})")
        if not _INT_MIN <= v <= _INT_MAX:
            raise _opt_error(OptionValueError, "RANGE",
                             f"{label}: value {_brief(v)} does not fit in 64 bits")
        c.u.i = v
    elif k == _L.FLOAT:
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            raise _opt_error(OptionTypeError, "TYPE",
                             f"{label}: expected float, got {_typename(v)} ({_brief(v)})")
        try:
            c.u.f = float(v)
        except OverflowError:
            raise _opt_error(OptionValueError, "RANGE",
                             f"{label}: value {_brief(v)} is too large for a float") from None
    elif k == _L.STR:
        if not isinstance(v, str):
            raise _opt_error(OptionTypeError, "TYPE",
                             f"{label}: expected str, got {_typename(v)} ({_brief(v)})")
        b = _encode(v, label)
        buf = ctypes.create_string_buffer(b, len(b) + 1)
        cv.keep = buf
        c.u.str.ptr = ctypes.addressof(buf)
        c.u.str.len = len(b)
    else:  # list, set
        if not isinstance(v, (list, tuple, set, frozenset)):
            raise _opt_error(OptionTypeError, "TYPE",
                             f"{label}: expected {_PYTYPE[k].__name__} of str, got "
                             f"{_typename(v)} ({_brief(v)})")
        items = list(v)
        for i, it in enumerate(items):
            if not isinstance(it, str):
                raise _opt_error(OptionTypeError, "TYPE",
                                 f"{label}: item {i} is a {_typename(it)} ({_brief(it)}), "
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


def _choices(info):
    """The choices an OptInfo declares, as values of its type, or None
    (any value)."""
    if not info.choices.u.list.count:
        return None
    conv = {_L.INT: int, _L.FLOAT: float}.get(info.type, str)  # stored as texts
    return [conv(c) for c in _decode(info.choices)]


def _py_literal(v):
    """A Python literal of a value, as codegen_config() writes it."""
    if isinstance(v, set):
        if not v:
            return "set()"
        return "{" + ", ".join(repr(s) for s in sorted(v, key=lambda s: s.encode())) + "}"
    if isinstance(v, float) and not math.isfinite(v):
        return f"float('{v}')"
    return repr(v)
