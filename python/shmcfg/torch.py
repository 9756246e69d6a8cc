# SPDX-License-Identifier: MIT
"""torch's own config modules, their values read from a segment.

    import shmcfg, shmcfg.torch
    seg = shmcfg.attach("job42")       # created with `shmctl create job42 --schema torch`
    shmcfg.torch.install(seg)          # before or after `import torch`
    import torch
    torch._inductor.config.max_autotune    # the segment's value: `shmctl set` changes it

The rule, for every option the segment declares under the name of one of
torch's config modules (MODULES): the segment's value takes the place of the
option's *default* in torch's own config module, and everything else stays
torch's own code, unchanged:

- an assignment (``torch._dynamo.config.x = v``), ``patch()``,
  ``_make_closure_patcher()``, ``load_config()`` and unittest.mock's patches
  are what they are in PyTorch: a user override of the calling context, seen
  by this process only (by this thread only, in torch 2.13). Ported code
  never changes every rank of the host by accident. A host-wide change is
  explicit: ``shmctl set``, or the segment's own module objects
  (``seg.module("torch._dynamo.config").x = v``: one commit);
- the environment variables torch reads keep their meaning in the process
  that has them: a force variable overrides everything, a default variable
  overrides the segment's default, knob and env layers, and yields to its
  host-wide layers (cluster, user), as it yields to an assignment in torch;
- every method over the options (get_hash, save_config,
  save_config_portable, codegen_config, get_config_copy, _get_dict,
  _is_default, load_config, ...) is torch's own and sees the segment's
  values; the caches torch keeps per context (the hash, _get_dict) are
  dropped when the segment's generation moves, and not kept while the
  thread has a patch of the segment open (seg.module(...).patch()). ``_is_default`` is false
  for an option whose segment value is not its default either, so
  codegen_config() writes what an operator set.

What the segment cannot hold (callables, dicts, tuples, objects) is not in
its schema and stays torch's. A segment whose declaration of an option
differs from the installed torch's (another type, default or alias, choices
its Literal annotation does not allow, or an option this torch does not
have) is never served silently: that option
stays torch's and a DeclarationWarning names it (``strict=True``: a
DeclarationError instead, and nothing is bridged). The declarations are
checked again after ``seg.reattach()`` and after every replacement the
handle follows by itself (``shmctl create --force``), before a value of the
new segment is served: a warning then, whatever ``strict``. python/README.md,
"torch reading the segment", lists the remaining differences and the torch
versions supported.
"""

import contextvars
import ctypes
import functools
import importlib.abc
import math
import os
import sys
import threading
import types
import typing
import warnings

from . import _lib as _L
from .config import _mock_restores_after_delete
from .errors import Error, UnknownOptionError
from .mutable import committing
from .values import _choices, _decode

MODULES = ("torch.compiler.config", "torch._dynamo.config", "torch._inductor.config",
           "torch._functorch.config", "torch.fx.experimental._config")
# Left to torch whatever a schema says: in PyTorch they hold callables (a
# segment holds their names as strings: the seed's schema declares them).
EXCLUDE = ("torch.compiler.config.reorderable_logging_functions",
           "torch._dynamo.config.reorderable_logging_functions")
# torch's own settings of its config machinery, never served whatever a
# schema says: they steer torch's save, hash and cache key (a segment writer
# could make the FX graph cache key ignore every option, or make torch call
# a string)
META = frozenset(("_save_config_ignore", "_cache_config_ignore_prefix",
                  "_cache_config_factory_keys", "_compile_ignored_keys"))


class DeclarationWarning(UserWarning):
    """A segment declares an option otherwise than the installed torch:
    that option stays torch's."""


class DeclarationError(Error):
    """install(strict=True) of a segment whose declarations differ from the
    installed torch's."""

    def __init__(self, msg):
        super().__init__(msg)


_lock = threading.RLock()
_pending: dict = {}  # module name -> (Segment, exclude, strict) to bridge it with once imported


def install(seg, modules=None, exclude=EXCLUDE, strict=False):
    """Serve torch's config modules from segment ``seg``: bridge those
    already imported now, the others when torch imports them. ``modules``:
    the module names (default: those of MODULES the segment has options
    under); ``exclude``: full option names left to torch. Returns the names
    bridged now. Raises UnknownOptionError when the segment has no option
    under a module named in ``modules``, TypeError when an imported module
    is not a torch config module this bridge knows, Error when one is
    bridged to another segment already, DeclarationError (strict) as
    bridge()."""
    if modules is None:
        modules = [m for m in MODULES if _declares(seg, m)]
        if not modules:
            raise UnknownOptionError(
                f"segment '{seg.name}' has no options under any of {', '.join(MODULES)}")
    else:
        modules = list(modules)
        for name in modules:
            seg.module(name)
    exclude = frozenset(exclude)
    now = []
    with _lock:
        for name in modules:
            mod = sys.modules.get(name)
            spec = getattr(mod, "__spec__", None)
            if mod is not None and not getattr(spec, "_initializing", False):
                bridge(mod, seg, exclude, strict)
                now.append(name)
            else:
                _pending[name] = (seg, exclude, strict)
        if _pending and _finder not in sys.meta_path:
            sys.meta_path.insert(0, _finder)
    return now


def _declares(seg, name):
    try:
        seg.module(name)
        return True
    except UnknownOptionError:
        return False


def bridge(mod, seg, exclude=EXCLUDE, strict=False):
    """Make torch config module ``mod`` (already executed) read the options
    ``seg`` declares under its name from the segment, but those named (full
    names) in ``exclude`` and those declared otherwise than ``mod`` declares
    them (a DeclarationWarning; with ``strict`` a DeclarationError). The
    bridge follows ``seg.reattach()`` and the replacements the handle
    follows by itself (``shmctl create --force``): the new segment's
    declarations are checked again (a warning, whatever ``strict``)."""
    d = mod.__dict__
    if isinstance(mod, TorchBridge):
        if d["_shmcfg_seg"] is not seg:
            raise Error(f"{mod.__name__} is served by segment "
                        f"'{d['_shmcfg_seg'].name}' already")
        return
    _check_torch(mod)
    served, live, schema = _declarations(mod, seg, exclude, strict)
    cm = sys.modules[type(mod).__module__]
    d["_shmcfg_seg"] = seg
    d["_shmcfg_exclude"] = exclude
    d["_shmcfg_torch_class"] = type(mod)
    d["_shmcfg_unset"] = cm._UNSET_SENTINEL
    d["_shmcfg_patch"] = _patch_class(cm)
    d["_shmcfg_gen"] = contextvars.ContextVar(f"{mod.__name__}._shmcfg_gen", default=None)
    d["_shmcfg_served"] = {}
    _serve_module(mod, served)
    d["_shmcfg_live"], d["_shmcfg_schema"] = live, schema
    seg._reattach_hooks.append(lambda: _reserve(mod))


class _Redeclared(Exception):
    """Raised by a read of a served option that found its serving ended (a
    replacement's declarations checked again, _check_live()): its reader
    reads it again, through what the module serves now."""


def _user_level():
    """The stacklevel, for a warnings.warn() of this function's caller, of
    the first frame that is neither shmcfg's, torch's nor the import
    machinery's: the user's line (an import, install(), a read of a config
    attribute), not torch's code that imported the module. Python 3.11
    lacks warn()'s skip_file_prefixes; warn() itself does not count the
    frozen bootstrap's frames, and neither does this. With no such frame (a
    read on a thread that only torch runs), the outermost one."""
    def uncounted(f):  # as warnings._is_internal_frame
        return "importlib" in f.f_code.co_filename and "_bootstrap" in f.f_code.co_filename

    def ours(f):
        return (f.f_globals.get("__name__", "").partition(".")[0] in ("shmcfg", "torch", "importlib")
                or uncounted(f))
    level, f, last = 1, sys._getframe(1), 1
    while f is not None and ours(f):
        last = level
        f, level = f.f_back, level + 1
        while f is not None and uncounted(f):
            f = f.f_back
    return level if f is not None else last


def _declarations(mod, seg, exclude, strict, known=None):
    """(served, live, schema): the options of seg to serve in mod
    (_declared()), checked against the declarations of the incarnation the
    handle reads now (a replacement it followed may have another schema),
    the _live_id() they were checked under and its schema hash; served is
    None when that schema is ``known`` (a replacement of the same schema:
    the same declarations)."""
    for tries in range(8):
        live = seg._live_id()
        schema = bytes(seg._stat().schema_hash)
        if schema == known:
            return None, live, schema
        if schema == seg.schema_hash:  # the handle's own option table says it
            return (_declared(mod, seg, (seg._handle(), seg._byindex, None), exclude, strict,
                              known is not None), live, schema)
        try:
            h = seg._attach_schema(schema)
        except Error as e:  # replaced again since: by another schema
            if e.code != _L.E["SCHEMA"] or tries == 7:
                raise
            continue
        try:
            decl = (h, seg._load_options(h)[0], seg._opts)
            return (_declared(mod, seg, decl, exclude, strict, known is not None),
                    live, schema)
        finally:
            _L.close(h)


def _declared(mod, seg, decl, exclude, strict, replaced):
    """The options of seg to serve in mod, {relative name: _Opt}: those
    declared as mod's torch declares them (the others warned about, or with
    strict a DeclarationError). decl: (handle, option list, by name) of the
    declarations to check, those of a successor the handle follows (by name:
    the handle's own options, which its reads take, by which the library
    maps them to the successor's), or the handle's own (by name None)."""
    name = mod.__name__
    prefix = name + "."
    config = mod.__dict__["_config"]
    h, byindex, own = decl
    served = {}
    differ = []
    declared = set()
    for o in byindex:
        rel = o.name[len(prefix):]
        if not o.name.startswith(prefix) or o.name in exclude or rel in META:
            continue
        declared.add(rel)
        why = _differs(h, byindex, o, config.get(rel))
        if not why and o.alias is None and own is not None:
            mine = own.get(o.name)
            if mine is None:
                continue  # not one of the handle's options: it cannot read it
            if mine.kind != o.kind or (o.nullable and not mine.nullable):
                why = "declared otherwise when the segment was attached: seg.reattach() serves it"
            o = mine
        if why:
            differ.append(f"{rel} ({why})")
        elif o.alias is None:  # torch follows its aliases to the bridged target
            served[rel] = o
    if replaced:  # what the segment served before and no longer declares
        differ += [f"{rel} (no longer declared)"
                   for rel in mod.__dict__["_shmcfg_served"] if rel not in declared]
    if differ:
        how = "was replaced by one that declares" if replaced else "declares"
        msg = (f"{name}: segment '{seg.name}' {how} {len(differ)} option"
               f"{'s' if len(differ) > 1 else ''} otherwise than torch {_torch_version()}: "
               f"{'; '.join(differ)}")
        if strict:
            raise DeclarationError(msg + " (nothing bridged)")
        warnings.warn(msg + ": left to torch", DeclarationWarning, stacklevel=_user_level())
    return served


def _serve_module(mod, served):
    """Serve the options ``served`` of mod from its segment, and only those:
    entries served before and not now are torch's again."""
    d = mod.__dict__
    seg = d["_shmcfg_seg"]
    config = d["_config"]
    for rel in d["_shmcfg_served"]:
        _unserve(config[rel])
    for rel, o in served.items():
        _serve(config[rel], mod, seg, o, d["_shmcfg_unset"])
    d["_shmcfg_served"] = served
    readers = {rel: _reader(rel, config[rel]) for rel in served}
    d["_shmcfg_readers"] = readers
    _reader_properties(mod, readers)
    base = d["_shmcfg_torch_class"]
    taken = set(dir(base))
    cls = type(f"ShmcfgBridge[{mod.__name__}]", (TorchBridge, base),
               {rel: property(r) for rel, r in readers.items() if "." not in rel and rel not in taken})
    types.ModuleType.__setattr__(mod, "__class__", cls)  # past torch's __setattr__
    mod._hash_dirty_var.set(True)
    mod._get_dict_dirty_keys_var.set(None)


def _reserve(mod, replaced=False):
    """Serve what the segment declares as torch does (warned about
    otherwise): after seg.reattach(), and when a read finds that the handle
    followed a replacement (``replaced``: nothing to do if it is of the
    schema checked last)."""
    d = mod.__dict__
    served, live, schema = _declarations(mod, d["_shmcfg_seg"], d["_shmcfg_exclude"], False,
                                         d["_shmcfg_schema"] if replaced else None)
    if served is not None:
        _serve_module(mod, served)
    d["_shmcfg_live"], d["_shmcfg_schema"] = live, schema


def _follow(mod):
    """If the segment's handle follows another incarnation than the one
    mod's declarations were checked under (a replacement: shmctl create
    --force, resize), check them again and serve what they allow
    (_reserve())."""
    d = mod.__dict__
    seg = d["_shmcfg_seg"]
    if seg._live_id() != d["_shmcfg_live"]:
        with _lock:
            if seg._live_id() != d["_shmcfg_live"]:
                _reserve(mod, replaced=True)


def _check_live(mod, alive):
    """_follow(mod), then raise _Redeclared unless the serving that
    ``alive`` marks still stands."""
    _follow(mod)
    if not alive[0]:
        raise _Redeclared


def _checked_read(mod, alive, read, o):
    """read(o) of a served option, its serving checked (_check_live())
    after it, and when it fails (the option gone with a replacement), so
    that no value of a declaration the bridge did not check is returned."""
    try:
        v = read(o)
    except Error:
        _check_live(mod, alive)
        raise
    _check_live(mod, alive)
    return v


def _torch_version():
    t = sys.modules.get("torch")
    return getattr(t, "__version__", "?")


def _check_torch(mod):
    """torch's _config of mod, or TypeError when mod is no config module of
    the shape this bridge reads (torch 2.13's install_config_module(): a
    ContextVar user override per entry, per-context caches)."""
    d = getattr(mod, "__dict__", {})
    config = d.get("_config")
    entry = next(iter(config.values()), None) if isinstance(config, dict) else None
    if (not isinstance(mod, types.ModuleType) or entry is None
            or not isinstance(getattr(entry, "user_override", None), contextvars.ContextVar)
            or not all(isinstance(d.get(k), contextvars.ContextVar)
                       for k in ("_hash_dirty_var", "_get_dict_dirty_keys_var"))):
        raise TypeError(f"{getattr(mod, '__name__', mod)} is not a torch config module "
                        f"this bridge knows (torch 2.13's install_config_module())")
    return config


def _kind_of(v):
    """The shmcfg type a torch value needs, or None."""
    if isinstance(v, bool):
        return _L.BOOL
    if isinstance(v, int):
        return _L.INT
    if isinstance(v, float):
        return _L.FLOAT
    if isinstance(v, str):
        return _L.STR
    if isinstance(v, (list, set)) and all(isinstance(s, str) for s in v):
        return _L.LIST if isinstance(v, list) else _L.SET
    return None


def _env_names(h, o):
    """The environment variables the schema of handle h names for option o:
    (its env_default ones, its env_force ones)."""
    info = _L.OptInfo()
    if _L.opt_info(h, o.opt, ctypes.byref(info)) < 0:
        return (), ()
    out = []
    for ptr, n in ((info.env_default, info.n_env_default), (info.env_force, info.n_env_force)):
        out.append(tuple(ctypes.string_at(ptr, _strs_len(ptr, n)).decode().split("\0")[:n])
                   if n else ())
    return tuple(out)


def _type_differs(vt, kind, nullable):
    """Why torch's annotation vt (entry.value_type) is not a shmcfg type of
    kind and nullability, or None: a nullable option needs Optional, a list
    or set one strings as its items."""
    args = typing.get_args(vt)
    optional = typing.get_origin(vt) in (typing.Union, types.UnionType) and type(None) in args
    if nullable and not optional and vt is not type(None):
        return f"nullable here, {_type_name(vt)} in torch"
    if kind not in (_L.LIST, _L.SET):
        return None
    if optional:
        rest = [a for a in args if a is not type(None)]
        vt = rest[0] if len(rest) == 1 else None
    items = typing.get_args(vt)
    if (typing.get_origin(vt) or vt) not in (list, set) or (items and items != (str,)):
        return f"a {_L.TYPE_NAMES[kind]} of strings here, {_type_name(vt)} in torch"
    return None


def _literal_differs(vt, kind, choices):
    """Why the schema's choices (None: any value) let a value through that
    torch's annotation vt does not allow, or None: an annotation that names
    its values (Literal[...], Optional or in a Union of Literals) needs
    choices among them."""
    members = (typing.get_args(vt) if typing.get_origin(vt) in (typing.Union, types.UnionType)
               else (vt,))
    allowed = []
    for m in members:
        if m is type(None):
            continue
        if typing.get_origin(m) is not typing.Literal:
            return None  # a type: any value of it
        allowed.extend(typing.get_args(m))
    if not allowed:
        return None
    if choices is None:
        names = ", ".join(map(repr, allowed))
        return (f"any {_L.TYPE_NAMES[kind]} here, one of "
                f"{names if len(names) <= 60 else names[:57] + '...'} in torch")
    for c in choices:
        if not any(type(c) is type(a) and c == a for a in allowed):
            return f"choice {c!r:.40} here, not one of torch's Literal"
    return None


def _type_name(vt):
    return getattr(vt, "__name__", None) if isinstance(vt, type) else repr(vt)


def _differs(h, byindex, o, entry):
    """Why option o of handle h (byindex: its options) is not what torch's
    entry declares, or None."""
    if entry is None:
        return "this torch has no such option"
    info = _L.OptInfo()
    if _L.opt_info(h, o.opt, ctypes.byref(info)) < 0:
        return "unreadable in the segment"
    if o.alias is not None or entry.alias is not None:
        mine = byindex[o.alias].name if o.alias is not None else None
        if mine != entry.alias:
            return f"an alias of {mine} here, of {entry.alias} in torch"
        return None
    # torch's own default (a served entry's default property is the segment's)
    d = entry.__dict__
    default = d["_shmcfg_torch_default"] if "_shmcfg_torch_default" in d else entry.default
    if default is None:
        if not o.nullable:
            return "torch's default is None, the segment's option is not nullable"
    elif _kind_of(default) != o.kind:
        return (f"a {_L.TYPE_NAMES[o.kind]} here, "
                f"{type(default).__name__} {default!r:.40} in torch")
    elif o.kind in (_L.LIST, _L.SET) and not default and not typing.get_args(entry.value_type):
        return f"a {_L.TYPE_NAMES[o.kind]} of strings here, items of unknown type in torch"
    why = (_type_differs(entry.value_type, o.kind, o.nullable)
           or _literal_differs(entry.value_type, o.kind, _choices(info)))
    if why:
        return why
    # torch's default may have been read from the environment (x =
    # os.environ.get(...) == "1"): compare only where none of the option's
    # variables is set (_serve() then keeps what torch read)
    if any(v in os.environ for names in _env_names(h, o) for v in names):
        return None
    mine = _decode(info.def_)
    same = (mine == default or (isinstance(mine, float) and isinstance(default, float)
                                and math.isnan(mine) and math.isnan(default)))
    if not same:
        return f"default {mine!r:.40} here, {default!r:.40} in torch"
    return None


def _strs_len(ptr, n):
    """The byte length of n NUL-terminated strings at ptr."""
    total = 0
    for _ in range(n):
        total += len(ctypes.string_at(ptr + total)) + 1
    return total


# -- the entries: the segment in place of the default -----------------------

def _segment_default(entry):
    """torch's _ConfigEntry.default of a served option: the segment's value
    (plain copies of lists and sets, cached per generation). A list or set
    equal to torch's own default is torch's object itself, which torch
    copies where it copies its default: a set's iteration order follows its
    insertion order, and torch's repr of it (get_hash, codegen_config) is
    then torch's own."""
    d = entry.__dict__
    try:
        v = d["_shmcfg_fetch"](None)
    except _Redeclared:
        return entry.default  # what the entry is now: torch's, or served again
    if isinstance(v, (list, set)):
        own = d["_shmcfg_torch_default"]
        if type(own) is type(v) and own == v:
            return own
    return v


def _env_default(entry):
    """torch's _ConfigEntry.env_value_default of a served option: what this
    process's environment says, unless the segment's value comes from a
    layer above it (cluster, user, or the thread's patch of the segment's
    own module, which stands for the user layer), to which it yields as
    torch's does to a user override. Raises _Redeclared (the reader's,
    below)."""
    d = entry.__dict__
    v = d["_shmcfg_env_default"]
    if v is d["_shmcfg_unset"]:
        return v
    mod, seg, o, alive = d["_shmcfg_where"]
    source = _checked_read(mod, alive, seg._source, o)
    return d["_shmcfg_unset"] if source >= _L.SRC_CLUSTER else v


def _env_default_property(entry):
    try:
        return _env_default(entry)
    except _Redeclared:
        return entry.env_value_default


def _set_env_default(entry, v):
    entry.__dict__["_shmcfg_env_default"] = v


_entry_classes: dict = {}


def _serve(entry, mod, seg, o, unset):
    """Make torch's entry of option o read its default from the segment.

    The environment keeps torch's meaning in this process: torch read its
    variables at import, into env_value_default/_force for a
    Config(env_name_...) option, into the default itself for a computed one
    (``x = os.environ.get("TORCHINDUCTOR_X") == "1"``); a computed default
    of a variable the schema names and this process has set is kept as the
    entry's env default (its env force, for a variable the schema names a
    force one)."""
    cls = _entry_classes.get(type(entry))
    if cls is None:
        cls = type("ShmcfgEntry", (type(entry),), {
            "default": property(_segment_default, doc="the segment's value"),
            "env_value_default": property(_env_default_property, _set_env_default)})
        _entry_classes[type(entry)] = cls
    d = entry.__dict__
    own = d.get("default")
    env_default = d.get("env_value_default", unset)
    names_default, names_force = _env_names(seg._handle(), o)
    if entry.env_value_force is unset and any(v in os.environ for v in names_force):
        d["env_value_force"] = own
        d["_shmcfg_set_force"] = True
    elif env_default is unset and any(v in os.environ for v in names_default):
        env_default = own
    d["_shmcfg_torch_default"] = own
    d["_shmcfg_env_default"] = env_default
    d["_shmcfg_unset"] = unset
    alive = [True]  # until _unserve(): what the reads of this serving check
    d["_shmcfg_where"] = (mod, seg, o, alive)
    d["_shmcfg_fetch"] = seg._value_fetcher(o, read=functools.partial(_checked_read, mod, alive,
                                                                     seg._read))
    entry.__class__ = cls


def _unserve(entry):
    """Give an entry _serve() changed back to torch as it was. Its data
    stays (the next _serve() replaces it): a read of it under way in another
    thread finds its serving ended (_check_live()), and reads again."""
    d = entry.__dict__
    d["_shmcfg_where"][3][0] = False
    entry.__class__ = type(entry).__mro__[1]
    if d.pop("_shmcfg_set_force", False):
        del d["env_value_force"]


def _reader(name, entry):
    """The read of served option ``name`` (torch's entry ``entry``):
    torch's ConfigModule.__getattr__ but for its last step, where torch
    hands out the default (and pins a copy of a list or set one as the
    context's user override): the segment's value is returned, a list or
    set as a copy whose in-place changes become the context's user
    override, as they do in torch. The bridged class has it as a property
    (a read then never reaches __getattr__), dotted names through
    __getattr__ (torch's SubConfigProxy calls it)."""
    e = entry.__dict__
    unset = e["_shmcfg_unset"]
    fetch = e["_shmcfg_fetch"]
    override = entry.user_override

    def read(config):
        if entry.hide:
            raise AttributeError(f"{config.__name__}.{name} does not exist")
        if entry.deprecated:
            config._warn_if_deprecated(name, entry)
        v = entry.env_value_force
        if v is not unset:
            return v
        v = override.get()
        if v is not unset:
            return v
        try:
            if e["_shmcfg_env_default"] is not unset:
                v = _env_default(entry)
                if v is not unset:
                    return v
            v = fetch(None)
        except _Redeclared:  # what the module serves now: torch's, or served again
            return config.__getattr__(name)
        if entry.justknob is not None:
            from torch._utils_internal import justknobs_check
            return justknobs_check(name=entry.justknob, default=v)
        if v.__class__ is list or v.__class__ is set:
            return committing(v.__class__ is list, lambda value: config.__setattr__(name, value))(v)
        return v
    return read


def _served_target(config, key):
    """The (bridged module, name) whose served option key of config means,
    following torch's aliases (torch.compiler.config.recompile_limit is
    torch._dynamo.config.recompile_limit), or None."""
    for _ in range(8):  # torch's aliases are one step; a bound all the same
        d = config.__dict__
        if key in d.get("_shmcfg_served", ()):
            return config, key
        entry = d["_config"].get(key)
        alias = getattr(entry, "alias", None)
        if alias is None:
            return None
        modname, _, key = alias.rpartition(".")
        config = sys.modules.get(modname)
        if not isinstance(config, TorchBridge):
            return None
    return None


def _restore_override(config, key, value):
    """Set the user override of served option key of bridged module config
    (torch's unset sentinel: none) and drop the caches torch keeps of it."""
    entry = config._config[key]
    entry.user_override.set(value)
    entry.hide = False
    config._hash_dirty_var.set(True)
    config._mark_get_dict_dirty(key)


def _reader_properties(mod, readers):
    """Give each of torch's SubConfigProxy objects of mod (inductor's
    ``triton``, ``cpp``...) a class with a property per served option in
    it: a read of ``config.triton.cudagraphs`` then takes the reader at
    once, not torch's proxy __getattr__ and the module's."""
    nested = {}
    for rel, r in readers.items():
        head, _, leaf = rel.rpartition(".")
        if head:
            nested.setdefault(head, {})[leaf] = r
    for head, leaves in nested.items():
        proxy = mod
        for part in head.split("."):
            proxy = proxy.__dict__.get(part)
            if proxy is None:
                break
        if proxy is None or isinstance(proxy, types.ModuleType):
            continue
        base = getattr(type(proxy), "_shmcfg_base", type(proxy))  # torch's (again: reattach)
        taken = set(dir(base))
        ns = {leaf: property(lambda _self, r=r: r(mod))
              for leaf, r in leaves.items() if leaf not in taken and leaf not in proxy.__dict__}
        ns["_shmcfg_base"] = base
        object.__setattr__(proxy, "__class__", type(base.__name__, (base,), ns))


def _patch_class(cm):
    """The patch class of a bridged module: a ContextDecorator of torch's
    module cm (unittest.TestCase classes decorated as torch's are), with
    torch's ConfigPatch's attributes (changes: what patch_dynamo_config()
    reads) and behaviour, but for the restore of served options."""

    class ConfigPatch(cm.ContextDecorator):
        def __init__(self, config, changes):
            self.config = config
            self.changes = changes
            self._prior = contextvars.ContextVar(
                f"{config.__name__}.ConfigPatch[{id(self)}]", default=())

        def __enter__(self):
            config = self.config
            prior = {}
            for key in self.changes:
                value = config.__getattr__(key)  # an unknown name raises, as torch's
                target = _served_target(config, key)
                if target is None:
                    prior[key] = (None, value)
                else:
                    prior[key] = (target, target[0]._config[target[1]].user_override.get())
            stack = self._prior.get()
            self._prior.set((*stack, prior))
            try:
                for k, v in self.changes.items():
                    config.__setattr__(k, v)
            except Exception:
                self._prior.set(stack)
                raise

        def __exit__(self, exc_type, exc_val, exc_tb):
            stack = self._prior.get()
            if not stack:
                raise AssertionError("prior should not be empty when exiting ConfigPatch")
            self._prior.set(stack[:-1])
            config = self.config
            for k, (target, v) in stack[-1].items():
                if target is None:
                    config.__setattr__(k, v)
                else:
                    _restore_override(*target, v)
    return ConfigPatch


# -- the import hook -------------------------------------------------------

class _Finder(importlib.abc.MetaPathFinder):
    """Finds nothing itself: wraps the loader the other finders give a
    pending torch config module, so that it is bridged once executed."""

    def find_spec(self, fullname, path, target=None):
        if fullname not in _pending:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _BridgingLoader(spec.loader)
                return spec
        return None


class _BridgingLoader(importlib.abc.Loader):
    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        name = module.__name__
        with _lock:
            how = _pending.get(name)
            if how is not None:
                # a DeclarationError (strict) fails this import, and leaves
                # the module pending: the next import of it fails alike
                bridge(sys.modules.get(name, module), *how)
                del _pending[name]
            if not _pending and _finder in sys.meta_path:
                sys.meta_path.remove(_finder)  # every later import would ask it

    def __getattr__(self, attr):  # get_source (inspect), get_filename...
        return getattr(self._loader, attr)


_finder = _Finder()


# -- the module -------------------------------------------------------------

class TorchBridge(types.ModuleType):
    """The first base of a bridged torch config module's class (the second
    is torch's own): reads of the served options (``_shmcfg_served``) and
    the per-context caches torch keeps over all options."""

    def __getattr__(self, name):
        d = self.__dict__
        reader = d.get("_shmcfg_readers", {}).get(name)
        if reader is None and name in d["_config"]:
            # an option left to torch: a replacement since may declare it
            # as torch does (an error of the segment's leaves it torch's)
            try:
                _follow(self)
            except Error:
                pass
            reader = d["_shmcfg_readers"].get(name)
        if reader is None:
            return super().__getattr__(name)
        return reader(self)

    def __delattr__(self, name):
        """torch's (no override, hidden), and a note for __setattr__ when
        unittest.mock's patch exit is the caller: it sets the original back
        right after."""
        super().__delattr__(name)
        if _served_target(self, name) is not None and _mock_restores_after_delete():
            self._config[name].__dict__["_shmcfg_mock_restore"] = True

    def __setattr__(self, name, value):
        """torch's; but unittest.mock's restore of a served option that
        gives back what the option reads with no override leaves it with
        none, so that it follows the segment again, as it did before the
        mock (torch's would pin the value in this context)."""
        entry = self.__dict__.get("_config", {}).get(name)
        if entry is not None and entry.__dict__.pop("_shmcfg_mock_restore", False):
            entry.hide = False
            target = _served_target(self, name)
            if target is not None:
                mod, key = target
                _restore_override(mod, key, mod.__dict__["_shmcfg_unset"])
                if mod.__dict__["_shmcfg_readers"][key](mod) == value:
                    return
        super().__setattr__(name, value)

    def _shmcfg_fresh(self):
        """Drop this context's hash and _get_dict caches when the segment's
        generation (and incarnation: seg.reattach()) is not the one they
        were computed under, and whenever the calling thread has a patch of
        the segment open (seg.module(...).patch(): the thread reads its own
        values, under the same generation; tagged None, the caches are
        dropped again after the patch's exit). The generation
        is read before the values: a commit racing the computation leaves
        the caches tagged older than their values, and the next call
        computes them again."""
        d = self.__dict__
        seg = d["_shmcfg_seg"]
        _follow(self)  # what torch's methods read is what the module serves now
        g = None if seg._patched_here() else (seg._incarnation, seg.generation)
        var = d["_shmcfg_gen"]
        if g is None or var.get() != g:
            self._hash_dirty_var.set(True)
            self._get_dict_dirty_keys_var.set(None)
            var.set(g)

    def _get_dict(self, *args, **kwargs):
        self._shmcfg_fresh()
        return super()._get_dict(*args, **kwargs)

    def get_hash(self):
        self._shmcfg_fresh()
        return super().get_hash()

    def patch(self, arg1=None, arg2=None, **kwargs):
        """torch's patch(), but that its exit gives a served option back the
        user override it had (none, mostly) where torch's assigns the value
        read at its entry: with torch's, an option patched once would keep
        that value in this context and stop following the segment. An alias
        of a served option (torch.compiler.config.recompile_limit) counts as
        the option."""
        p = super().patch(arg1, arg2, **kwargs)  # torch's argument checks
        if all(_served_target(self, k) is None for k in p.changes):
            return p
        return self.__dict__["_shmcfg_patch"](self, p.changes)

    def _is_default(self, name):
        if not super()._is_default(name):
            return False
        o = self.__dict__["_shmcfg_served"].get(name)
        return o is None or self.__dict__["_shmcfg_seg"]._is_default(o)
