# SPDX-License-Identifier: MIT
"""Schemas as Python values: the options of a schema (``SchemaOption``), a
schema the library reads or declares and checks (``Schema``), and the
writer of schema files (``schema_yaml()``, a call of the library's one
writer, shmcfg_schema_write_yaml(); ``shmcfg`` re-exports the three).

A ``SchemaOption`` holds what a schema file says of an option
(doc/schema-format.md) as Python values: ``type`` one of ``TYPES``, values
as the binding reads them (None for null, a set for a set option). The
library checks every declaration (``Schema.add()``) and a whole schema when
it builds a segment of it (``Schema.options()``: references, alias types,
implied values, cycles); ``shmcfg-import`` (``shmcfg.importer``) declares
and writes its options through these.
"""

from __future__ import annotations

import ctypes
import json
import os
from typing import Any, Iterable, List, Optional, Tuple

from . import _lib as _L
from .errors import OptionValueError, _error, _opt_error
from .values import _choices, _decode

TYPES = ("bool", "int", "float", "str", "list", "set")
_TYPE_CODES = {name: code for code, name in _L.TYPE_NAMES.items()}
# SchemaOption attribute, shmcfg_optdef flag, its bit
_FLAG_BITS = (("nullable", "SHMCFG_F_NULLABLE", _L.F_NULLABLE),
              ("hash_ignored", "SHMCFG_F_HASH_IGNORED", _L.F_HASH_IGNORED),
              ("save_ignored", "SHMCFG_F_SAVE_IGNORED", _L.F_SAVE_IGNORED),
              ("deprecated", "SHMCFG_F_DEPRECATED", _L.F_DEPRECATED),
              ("private", "SHMCFG_F_PRIVATE", _L.F_PRIVATE))


class SchemaOption:
    """One option of a schema. ``alias`` is the full name of the option this
    one forwards to (an alias has no value of its own: no default, env,
    knob, implies, bounds or choices); ``implies`` a list of (full name,
    value) pairs; ``env_default``/``env_force`` lists of variable names;
    ``type`` one of ``SchemaOption.TYPES``;
    ``deprecated`` the deprecation message or None. A ``default`` of None
    on an option that is not nullable is no default: the type's zero."""

    TYPES = TYPES

    def __init__(self, name: str, type: Optional[str] = None) -> None:
        self.name = name
        self.type = type
        self.nullable = False
        self.default: Any = None
        self.env_default: List[str] = []
        self.env_force: List[str] = []
        self.knob: Optional[str] = None
        self.alias: Optional[str] = None
        self.implies: List[Tuple[str, Any]] = []
        self.deprecated: Optional[str] = None
        self.hash_ignored = False
        self.save_ignored = False
        self.private = False
        self.min: Any = None
        self.max: Any = None
        self.choices: Optional[List[Any]] = None
        self.doc: Optional[str] = None

    def __repr__(self) -> str:
        return f"<shmcfg.SchemaOption {self.name} {self.type}>"

    def _has_default(self) -> bool:
        """Whether a default is given: None on an option that is not
        nullable gives none (the type's zero: false, 0, 0.0, "", [])."""
        return self.default is not None or self.nullable

    def optdef(self) -> Tuple[List[str], List[Tuple[str, str]]]:
        """The option as a shmcfg_optdef: (flag names, [(field, text)]),
        values in the syntax of shmcfg_value_parse(). add() declares it so,
        and a C table of shmcfg_optdef written from it says the same."""
        flags = []
        for attr, name, _ in _FLAG_BITS:
            if attr == "nullable" and self.nullable:
                flags.append(name)
            elif attr != "nullable" and self.alias is None and \
                    (self.deprecated is not None if attr == "deprecated" else getattr(self, attr)):
                flags.append(name)
        fields = []
        if self.alias is None and self._has_default():
            fields.append(("def", _parse_text(self.default)))
        if self.doc:
            fields.append(("doc", self.doc))
        if self.alias is None:
            if self.env_default:
                fields.append(("env_default", _parse_text(self.env_default)))
            if self.env_force:
                fields.append(("env_force", _parse_text(self.env_force)))
            if self.knob is not None:
                fields.append(("knob", self.knob))
        else:
            fields.append(("alias", self.alias))
        if self.alias is None:
            if self.implies:
                fields.append(("implies", ";".join("%s=%s" % (k, _parse_text(v))
                                                   for k, v in self.implies)))
            for f in ("min", "max"):
                if getattr(self, f) is not None:
                    fields.append((f, _parse_text(getattr(self, f))))
            if self.choices is not None:  # a list of texts, as for env_default
                fields.append(("choices", json.dumps([c if isinstance(c, str) else _parse_text(c)
                                                      for c in self.choices],
                                                     separators=(",", ":"))))
            if self.deprecated is not None:
                fields.append(("deprecated", self.deprecated))
        return flags, fields


def _parse_text(v: Any) -> str:
    """A value in the syntax of shmcfg_value_parse()."""
    if v is None:
        return "none"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, set)):
        return json.dumps(sorted(v) if isinstance(v, set) else list(v), separators=(",", ":"))
    raise TypeError(v)


class Schema:
    """A schema in the library (shmcfg_schema): new and empty, or read from
    a schema file (``Schema.load()``) or text (``Schema.from_text()``).
    Library errors raise the binding's exceptions, whose ``detail`` is the
    library's text ("FILE:LINE: reason" for what a file says)."""

    _s: Optional[ctypes.c_void_p]

    def __init__(self) -> None:
        self._s = ctypes.c_void_p()
        r = _L.schema_new(ctypes.byref(self._s))
        if r < 0:
            raise _error(r)

    @classmethod
    def _loaded(cls, load) -> Schema:
        self = cls.__new__(cls)
        self._s = ctypes.c_void_p()
        r = load(ctypes.byref(self._s))
        if r < 0:
            raise _error(r)
        return self

    @classmethod
    def load(cls, path: "os.PathLike[str] | str") -> Schema:
        """The schema of a YAML schema file (or a shipped schema's name, as
        create() takes it)."""
        return cls._loaded(lambda ret: _L.schema_load(os.fsencode(path), ret))

    @classmethod
    def from_text(cls, text: str, label: str = "<schema_text>") -> Schema:
        """The schema of YAML text; ``label`` names it in messages."""
        b = text.encode("utf-8")
        return cls._loaded(lambda ret: _L.schema_load_text(b, len(b), label.encode("utf-8"), ret))

    def add(self, option: SchemaOption) -> None:
        """Declare an option (shmcfg_schema_add()): the library checks it
        (its name, type, values against its bounds and choices, what an alias
        may carry). Raises OptionValueError whose text starts with the
        option's name."""
        if self._s is None:
            raise ValueError("the schema is closed")
        code = _TYPE_CODES.get(option.type or "")
        if code is None:
            raise _opt_error(OptionValueError, "SCHEMADEF", "%s: type %r is not one of %s"
                             % (option.name, option.type, ", ".join(TYPES)))
        flags, fields = option.optdef()
        d = _L.OptDef()
        d.type = code
        d.flags = sum(bit for _, name, bit in _FLAG_BITS if name in flags)
        keep = []
        for field, text in [("name", option.name)] + fields:
            why = None
            if "\0" in text:
                why = "%s holds a NUL character" % field
            else:
                try:
                    b = text.encode("utf-8")
                except UnicodeEncodeError as e:
                    why = "%s is not valid UTF-8 (%s)" % (field, e.reason)
            if why:
                raise _opt_error(OptionValueError, "SCHEMADEF", "%s: %s" % (option.name, why))
            keep.append(b)
            setattr(d, "def_" if field == "def" else field, b)
        r = _L.schema_add(self._s, ctypes.byref(d))
        if r < 0:
            raise _error(r)

    def options(self) -> List[SchemaOption]:
        """The options as the library reads them back from a segment of this
        schema, which it builds only of a sound schema (references, alias
        types, implied values, cycles): private, gone from /dev/shm at once.
        Raises the library's refusal."""
        if self._s is None:
            raise ValueError("the schema is closed")
        seg = "shmcfg-schema.%d.%s" % (os.getpid(), os.urandom(6).hex())
        opts = _L.CreateOpts(slots=2, readers=1, mode=0o600, flags=_L.CREATE_NO_ENV)
        h = ctypes.c_void_p()
        r = _L.create(seg.encode(), self._s, ctypes.byref(opts), ctypes.byref(h))
        if r < 0:
            raise _error(r)
        _L.unlink(seg.encode())
        try:
            return _read_options(h)
        finally:
            _L.close(h)

    def yaml(self, comments: Iterable[str] = ()) -> str:
        """The schema as a schema file (shmcfg_schema_write_yaml()):
        ``comments`` are the lines of its header comment."""
        if self._s is None:
            raise ValueError("the schema is closed")
        text = "\n".join(comments).encode("utf-8")
        out = ctypes.c_void_p()
        r = _L.schema_write_yaml(self._s, text or None, ctypes.byref(out))
        if r < 0:
            raise _error(r)
        return _L.take_string(out)

    def close(self) -> None:
        if self._s is not None:
            _L.schema_free(self._s)
            self._s = None

    def __enter__(self) -> Schema:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_s", None) is not None:
            self.close()


def _names(ptr: int, n: int) -> List[str]:
    """n NUL-terminated strings stored back to back."""
    out = []
    for _ in range(n):
        b = ctypes.string_at(ptr)
        out.append(b.decode("utf-8"))
        ptr += len(b) + 1
    return out


def _read_options(h: ctypes.c_void_p) -> List[SchemaOption]:
    """The options of a segment, as SchemaOption objects."""
    infos, names = [], []
    for i in range(_L.count(h)):
        info = _L.OptInfo()
        r = _L.opt_info(h, i, ctypes.byref(info))
        if r < 0:
            raise _error(r)
        infos.append(info)
        names.append(info.name.decode("utf-8"))
    out = []
    for i, info in enumerate(infos):
        t = _L.TYPE_NAMES[info.type]
        o = SchemaOption(names[i], t)
        o.nullable = bool(info.flags & _L.F_NULLABLE)
        o.hash_ignored = bool(info.flags & _L.F_HASH_IGNORED)
        o.save_ignored = bool(info.flags & _L.F_SAVE_IGNORED)
        o.private = bool(info.flags & _L.F_PRIVATE)
        o.doc = info.doc.decode("utf-8") if info.doc else None
        out.append(o)
        if info.alias != _L.NO_OPT:
            o.alias = names[info.alias]
            continue
        o.default = _decode(info.def_)
        o.env_default = _names(info.env_default, info.n_env_default) if info.n_env_default else []
        o.env_force = _names(info.env_force, info.n_env_force) if info.n_env_force else []
        o.knob = info.knob.decode("utf-8") if info.knob is not None else None
        o.deprecated = info.deprecated.decode("utf-8") if info.deprecated is not None else None
        if info.has_min:
            o.min = _decode(info.min)
        if info.has_max:
            o.max = _decode(info.max)
        o.choices = _choices(info)
        for k in range(info.n_implies):
            target = ctypes.c_uint32()
            v = _L.Value()
            r = _L.opt_implies(h, i, k, ctypes.byref(target), ctypes.byref(v))
            if r < 0:
                raise _error(r)
            o.implies.append((names[target.value], _decode(v)))
    return out


# -- the schema file writer ---------------------------------------------


def schema_yaml(options: Iterable[SchemaOption], comments: Iterable[str] = ()) -> str:
    """A schema file (YAML, format 1) of these options, in their order, that
    the library reads back to the same options: the library's one writer
    (shmcfg_schema_write_yaml(), as ``shmctl schema`` writes): names plain
    where YAML cannot misread them, strings double-quoted, floats exact (as
    repr), docs as literal blocks where one gives the text back exactly.
    ``comments``: lines of the header comment, after "# shmcfg schema
    (format 1)". The options are declared first (``Schema.add()``), and an
    unsound set of them (references, cycles) raises the library's refusal."""
    with Schema() as s:
        for o in options:
            s.add(o)
        return s.yaml(comments)
