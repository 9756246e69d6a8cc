# SPDX-License-Identifier: MIT
"""The library's part: libshmcfg reads, checks and resolves schemas; the
importer only translates Python. Through the binding's public schema API
(shmcfg.Schema): each option is checked as it is declared, --merge files
are read and checked, and the schema written is loaded (and a private
segment built of it) before anything is written, so that what the library
would refuse is an error here, named FILE:LINE.
"""

import inspect
import json
import re

from .. import Error, OptionTypeError, OptionValueError, Schema, SchemaOption, UnknownOptionError
from .files import SCHEMA_FILE_MAX, read_regular
from .model import InputError, Option, Skip

# What a name the library found undeclared is declared as, to read a schema
# that refers to options of another input: an alias target takes the alias's
# type (tried in this order), an implication target a nullable str (any
# implied value parses as one).
STUB_TYPES = [(t, n) for n in (False, True) for t in SchemaOption.TYPES]
# The library's details that name such a target ("NAME: alias target T is not
# declared", "NAME: implies unknown option T") and an alias stub of the wrong
# type ("NAME: alias of T must have its type ..."); see lib/schema/schema_build.c.
# Those of an option read from a file start with its place, "FILE:LINE: ".
PLACE = r"(?:.*?:\d+: )?"
UNDECLARED_RE = re.compile(PLACE + r"(\S+): (?:alias target|implies unknown option) (\S+?)"
                           r"(?: is not declared)?\Z")
ALIAS_TYPE_RE = re.compile(PLACE + r"(\S+): alias of (\S+) must have its type ")
# "config implication cycle: a -> b -> a" (or alias): about its first member
CYCLE_RE = re.compile(r"config \w+ cycle: (\S+) -> ")
# The library's refusals the importer reports (a schema's, an option's)
LIBRARY_ERRORS = (Error, OptionValueError, OptionTypeError, UnknownOptionError)


def library_text(e):
    """The library's own text of a refusal: its detail, else its error."""
    return e.detail or e.args[0]


def check_option(o):
    """Let the library check one option as shmcfg_schema_add() declares it
    (names, types, defaults against ranges and choices, what an alias may
    carry...). Raise Skip with the library's reason."""
    try:
        with Schema() as s:
            s.add(o)
    except LIBRARY_ERRORS as e:
        why = library_text(e)
        if why.startswith(o.name + ": "):
            why = why[len(o.name) + 2:]
        raise Skip(why)


INT_RE = re.compile(r"[-+]?(?:0|[1-9][0-9_]*)\Z")
FLOAT_RE = re.compile(r"[-+]?(?:[0-9][0-9_]*)?(?:\.[0-9_]*)?(?:[eE][-+]?[0-9]+)?\Z")


def untyped(text):
    """A value implied on an option that the schema file does not declare:
    the library kept its text (a nullable str stands in for the target), read
    here as YAML would without a type."""
    if text is None or text in ("~", "null", "Null", "NULL"):
        return None
    if text in ("true", "True", "TRUE"):
        return True
    if text in ("false", "False", "FALSE"):
        return False
    if INT_RE.match(text):
        return int(text.replace("_", ""))
    if text.lower() in (".inf", "+.inf", "-.inf", ".nan"):
        return float(text.lower().replace(".", ""))
    if FLOAT_RE.match(text) and any(ch.isdigit() for ch in text):
        return float(text.replace("_", ""))
    if text.startswith("["):
        try:
            v = json.loads(text)
            if isinstance(v, list) and all(isinstance(x, str) for x in v):
                return v
        except ValueError:
            pass
    return text


def as_options(read, stubs, where):
    """The library's options read back as Option objects, stubs left out;
    docs as inspect.cleandoc() gives them, implied values on stubs untyped()."""
    out = []
    for r in read:
        if r.name in stubs:
            continue
        o = Option(r.name, where(r.name))
        o.__dict__.update({k: v for k, v in vars(r).items() if k != "name"})
        o.doc = inspect.cleandoc(r.doc or "") or None
        o.implies = [(t, untyped(v) if t in stubs else v) for t, v in r.implies]
        out.append(o)
    return out


def stub(name, type_, nullable):
    """A stand-in declaration of an option referred to but not declared."""
    o = SchemaOption(name, type_)
    o.nullable = nullable
    return o


def through_library(load, stubs, guess, where):
    """Load a schema with load() (a new shmcfg.Schema; raises InputError),
    declare `stubs` (name: (type, nullable)) in it for the options it refers
    to without declaring them, and make a private segment of it, which the
    library only does for a sound schema (references, alias types, implied
    values, cycles). With `guess`, the names the library finds undeclared
    become stubs as they are found. Returns the options read back (stubs
    left out); raises LibraryRefused with the library's detail."""
    stubs = dict(stubs)
    tried = {}
    for _ in range(100 + 20 * len(STUB_TYPES)):
        with load() as s:
            try:
                for name, (t, nullable) in stubs.items():
                    s.add(stub(name, t, nullable))
            except LIBRARY_ERRORS as e:
                raise LibraryRefused(library_text(e))
            try:
                return as_options(s.options(), stubs, where)
            except LIBRARY_ERRORS as e:
                detail = library_text(e)
        m = UNDECLARED_RE.match(detail) if guess else None
        if m and m.group(2) not in stubs:
            stubs[m.group(2)] = STUB_TYPES[0] if "alias target" in detail else ("str", True)
            continue
        m = ALIAS_TYPE_RE.match(detail) if guess else None
        if m and m.group(2) in stubs and tried.get(m.group(2), -1) + 1 < len(STUB_TYPES):
            tried[m.group(2)] = tried.get(m.group(2), -1) + 1
            stubs[m.group(2)] = STUB_TYPES[tried[m.group(2)]]
            continue
        raise LibraryRefused(detail)
    raise LibraryRefused("too many options referred to but not declared")


class LibraryRefused(Exception):
    """The library refused a schema; str() is its detail."""


def load_file(path):
    """A loader of a schema file for through_library()."""
    def load():
        try:
            return Schema.load(path)
        except LIBRARY_ERRORS as e:
            raise InputError(None, 0, library_text(e))  # "FILE:LINE: reason"
    return load


def load_text(text, label):
    def load():
        try:
            return Schema.from_text(text, label)
        except LIBRARY_ERRORS as e:
            raise InputError(None, 0, library_text(e))
    return load


def key_lines(path):
    """name -> line of the names written as mapping keys at the start of a
    line of a schema file (the least indented occurrence), for messages."""
    try:  # what the library refuses to read (a FIFO, /dev/zero...) it names itself
        text = read_regular(path, SCHEMA_FILE_MAX, "a schema file").decode("utf-8", "replace")
    except (OSError, ValueError):
        return {}
    found = {}
    key = re.compile(r"""([ \t]*)(?:"([^"\\]*)"|'([^']*)'|([^\s"'#:][^\s:#]*))[ \t]*:(?:[ \t]|$)""")
    for n, line in enumerate(text.split("\n"), 1):
        m = key.match(line)
        if m:
            name = m.group(2) or m.group(3) or m.group(4)
            depth = len(m.group(1).expandtabs())
            if name not in found or depth < found[name][1]:
                found[name] = (n, depth)
    return {k: v[0] for k, v in found.items()}


def split_place(detail, label):
    """A library detail "LABEL:LINE: rest" as (LINE, rest); (0, detail)
    when it does not start with that place."""
    m = re.match(re.escape(label) + r":(\d+): ", detail)
    return (int(m.group(1)), detail[m.end():]) if m else (0, detail)


def detail_option(detail):
    """The option a library detail (without its place) is about."""
    m = CYCLE_RE.match(detail)
    return m.group(1) if m else detail.split(": ", 1)[0]


def read_schema_file(path):
    """The options of a schema file, as the library reads and checks it."""
    lines = key_lines(path)

    def where(name):
        return (path, lines.get(name, 0))
    try:
        return through_library(load_file(path), {}, True, where)
    except LibraryRefused as e:
        line, detail = split_place(str(e), path)
        raise InputError(path, line or lines.get(detail_option(detail), 0), detail)


def self_check(options, text, label):
    """Let the library load the schema written and build a segment of it:
    what it refuses (an implication cycle, an alias of another type, an
    implied value its target refuses...) fails the run, named at the option's
    origin. Options referred to but in no input are declared as stand-ins
    (the importer warned about them)."""
    by = {o.name: o for o in options}
    stubs = {}
    for o in options:
        for target, _ in o.implies:
            if target not in by:
                stubs.setdefault(target, ("str", True))
    for o in options:
        if o.alias is not None and o.alias not in by:
            stubs[o.alias] = (o.type, o.nullable)
    if not options:  # the library builds no segment of no options
        load_text(text, label)().close()
        return
    try:
        through_library(load_text(text, label), stubs, False, lambda name: None)
    except LibraryRefused as e:
        line, detail = split_place(str(e), label)
        o = by.get(detail_option(detail))
        if o is None:
            raise InputError(label, line, detail)
        raise InputError(o.where[0], o.where[1], detail)
