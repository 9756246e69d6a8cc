# SPDX-License-Identifier: MIT
"""The importer's option model: an Option (a shmcfg.SchemaOption with where
it was found), what cannot become one (Skip, Computed), what fails the run
(InputError), and the checks and conversions of Python values that only the
importer can make (the library checks the rest: library.py).
"""

import re

from .. import SchemaOption

PROG = "shmcfg-import"
TOOL_PATH = "tools/shmcfg-import"  # the tool the outputs name
NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*\Z")
IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
COMPILE_IGNORED_MARKER = "@compile_ignored"
# Config(...) arguments, positional order as in torch.utils._config_module.Config
CONFIG_POSITIONAL = ("default", "justknob", "env_name_default", "env_name_force",
                     "value_type", "alias")
# shmcfg extensions accepted as keywords of Config(...)
CONFIG_EXTRA = ("deprecated", "deprecation_message", "min", "max", "choices", "implies",
                "hash_ignored", "save_ignored")
MUTATING_METHODS = {"append", "extend", "insert", "remove", "pop", "clear", "add",
                    "discard", "update", "sort", "reverse", "difference_update",
                    "intersection_update", "symmetric_difference_update",
                    "setdefault", "popitem"}
ENV_FUNCS = {"os.environ.get", "os.getenv", "environ.get", "getenv"}


class Skip(Exception):
    """An assignment the importer cannot turn into an option."""

    def __init__(self, reason):
        super().__init__(reason)
        self.reason = reason


class Computed(Skip):
    """A default that Python computes (a call, a name, a condition...): the
    importer does not evaluate it; with a module name, the import gives it.
    `env` and `type` are what the assignment's own form says (the variable
    of os.environ.get(VAR, <computed>) == "1" and its bool)."""

    def __init__(self, reason, env=None, type_=None, nullable=False):
        super().__init__(reason)
        self.env, self.type, self.nullable = env or [], type_, nullable


class InputError(Exception):
    """An input that does not parse or is invalid: exit 1."""

    def __init__(self, path, line, msg):
        super().__init__(msg)
        self.path, self.line, self.msg = path, line, msg

    def __str__(self):
        if self.path is None:  # a message that names its place itself
            return self.msg
        if self.line:
            return "%s:%d: %s" % (self.path, self.line, self.msg)
        return "%s: %s" % (self.path, self.msg)


class Option(SchemaOption):
    """One option of a schema, with where the importer found it. `default`
    is a Python value (None = null)."""

    def __init__(self, name, where):
        super().__init__(name)
        self.where = where  # (path, line)
        self.computed = None  # a computed default: why the source does not give it
        self.form_typed = False  # its type is its form's (os.environ.get(VAR, <computed>))

    def to_json(self):
        d = {"name": self.name, "type": self.type}
        if self.nullable:
            d["nullable"] = True
        if self.alias is None:
            d["default"] = sorted(self.default) if isinstance(self.default, set) \
                else self.default
        for key in ("env_default", "env_force"):
            if getattr(self, key):
                d[key] = list(getattr(self, key))
        for key in ("knob", "alias"):
            if getattr(self, key) is not None:
                d[key] = getattr(self, key)
        if self.implies:
            d["implies"] = dict(self.implies)
        if self.deprecated is not None:
            d["deprecated"] = self.deprecated
        for key in ("hash_ignored", "save_ignored", "private"):
            if getattr(self, key):
                d[key] = True
        for key in ("min", "max", "choices", "doc"):
            if getattr(self, key) is not None:
                d[key] = getattr(self, key)
        return d


# ---------------------------------------------------------------------------
# Values: from Python to shmcfg
# ---------------------------------------------------------------------------

def kind_of(value):
    """The shmcfg type of a Python value, or None for None."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, set):
        return "set"
    if isinstance(value, list):
        return "list"
    return type(value).__name__


def show(value):
    """A value as the user wrote it, for messages."""
    if isinstance(value, set):
        return repr(sorted(value)) if value else "set()"
    return repr(value)


def coerce_default(opt, value):
    """Check/convert a default against the option's type; raise Skip."""
    if value is None:
        if not opt.nullable:
            raise Skip("default is None but the option is not nullable")
        return None
    k = kind_of(value)
    t = opt.type
    if t == "float" and k == "int":
        return float(value)
    if k != t:
        raise Skip("default %s is a %s, not a %s" % (show(value), k, t))
    if t in ("list", "set"):
        for item in value:
            if not isinstance(item, str):
                raise Skip("%s holds %s; shmcfg lists and sets hold strings"
                           % (t, show(item)))
        if t == "set":
            return set(value)
    return value


def normalize(opt):
    """Give an option's Python values the types of the option (an int default,
    bound or choice of a float option becomes a float; sets, unique choices)
    and check what only the importer can tell: that the Python value matches
    its annotation or Config() fields, and the names the option refers to.
    The library checks the rest (library.check_option()). Raise Skip."""
    if opt.alias is not None:
        if not NAME_RE.match(opt.alias):
            raise Skip("alias %r is not a dotted name" % opt.alias)
        if opt.alias == opt.name:
            raise Skip("alias of itself")
        return
    opt.default = coerce_default(opt, opt.default)
    for key in ("env_default", "env_force"):
        for var in getattr(opt, key):
            if not isinstance(var, str) or not var or "=" in var or "\0" in var:
                raise Skip("%s holds %r, not an environment variable name" % (key, var))
    if opt.type == "float":
        for key in ("min", "max"):
            if kind_of(getattr(opt, key)) == "int":
                setattr(opt, key, float(getattr(opt, key)))
    if opt.choices is not None:
        fixed = []
        for c in opt.choices:
            if opt.type == "float" and kind_of(c) == "int":
                c = float(c)
            if c not in fixed:
                fixed.append(c)
        if not fixed:
            raise Skip("empty choices")
        opt.choices = fixed
        if opt.default is not None and opt.default not in fixed:
            raise Skip("default %s is not one of the choices" % show(opt.default))
    for target, _ in opt.implies:
        if not isinstance(target, str) or not NAME_RE.match(target):
            raise Skip("implies target %r is not a dotted name" % (target,))


def join_and(items):
    items = list(items)
    if len(items) <= 2:
        return " and ".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]

