# SPDX-License-Identifier: MIT
"""ctypes declarations of libshmcfg (include/shmcfg.h).

Private to the shmcfg package. Every structure mirrors the C declaration
field by field; tests/test_python.py compares their sizes and offsets with
the header (by compiling a small C program when a compiler is there).

Where the library is found, first match wins:

1. ``$SHMCFG_LIBRARY``: the path of ``libshmcfg.so.3`` (or any file name);
2. the build tree: ``lib/.libs/libshmcfg.so.3`` two levels above this package
   (``python/shmcfg`` in a source tree built in place);
3. the ``libdir`` that ``make install`` recorded in ``shmcfg/_paths.py``;
4. the dynamic loader: ``ctypes.util.find_library("shmcfg")``, then
   ``libshmcfg.so.3`` (``LD_LIBRARY_PATH``, ``/etc/ld.so.cache``).
"""

import ctypes
import ctypes.util
import os

SONAME = "libshmcfg.so.3"

c_int = ctypes.c_int
c_uint = ctypes.c_uint
c_bool = ctypes.c_bool
c_size_t = ctypes.c_size_t
c_char_p = ctypes.c_char_p
c_void_p = ctypes.c_void_p
c_uint8 = ctypes.c_uint8
c_uint32 = ctypes.c_uint32
c_int32 = ctypes.c_int32
c_uint64 = ctypes.c_uint64
c_int64 = ctypes.c_int64
c_double = ctypes.c_double
POINTER = ctypes.POINTER

# enum shmcfg_type
BOOL, INT, FLOAT, STR, LIST, SET = 1, 2, 3, 4, 5, 6
TYPE_NAMES = {BOOL: "bool", INT: "int", FLOAT: "float", STR: "str", LIST: "list", SET: "set"}

# enum shmcfg_source
SOURCE_NAMES = ("default", "knob", "env_default", "cluster", "user", "env_force", "implied", "alias",
                "patch")
SRC_KNOB = 1
SRC_CLUSTER = 3
SRC_USER = 4
SRC_PATCH = 8

# option flags
F_NULLABLE = 1 << 0
F_HASH_IGNORED = 1 << 1
F_SAVE_IGNORED = 1 << 2
F_DEPRECATED = 1 << 3
F_PRIVATE = 1 << 4

CREATE_FORCE = 1 << 0
CREATE_NO_ENV = 1 << 1
CREATE_KEEP = 1 << 2
CREATE_EXIST_OK = 1 << 3
ATTACH_RDONLY = 1 << 0
ATTACH_OWNER = 1 << 1
ATTACH_PREFAULT = 1 << 2
DUMP_ALL = 1 << 0
CODEGEN_PYTHON, CODEGEN_SHELL, CODEGEN_JSON = 0, 1, 2

NO_OPT = 0xFFFFFFFF
NULL_RESULT = 1  # SHMCFG_NULL
VIEW_ABI = 3
SLOT_BITS = 8

# shmcfg's own error codes (SHMCFG_ERRNO_MAP)
E_FIRST = -30900
_ERRS = ("MAGIC", "VERSION", "SCHEMA", "CORRUPT", "NOTREADY", "NOOPT", "TYPE", "RANGE",
         "CHOICE", "NULLVAL", "PARSE", "CONFLICT", "CYCLE", "BUSY", "FULL", "READONLY",
         "READERS", "FORKED", "ENV", "SCHEMADEF", "LAYER", "LOCKED", "RETIRED", "OWNER")
E = {name: E_FIRST + i for i, name in enumerate(_ERRS)}
E_LAST = E["OWNER"]


class _Str(ctypes.Structure):
    _fields_ = [("ptr", c_void_p), ("len", c_size_t)]


class _List(ctypes.Structure):
    _fields_ = [("items", c_void_p), ("count", c_size_t), ("bytes", c_size_t)]


class _U(ctypes.Union):
    _fields_ = [("b", c_bool), ("i", c_int64), ("f", c_double), ("str", _Str), ("list", _List)]


class Value(ctypes.Structure):
    """struct shmcfg_value"""
    _fields_ = [("type", c_int), ("is_null", c_bool), ("source", c_int), ("u", _U),
                ("owned", c_void_p)]


class OptInfo(ctypes.Structure):
    """struct shmcfg_optinfo"""
    _fields_ = [("name", c_char_p), ("type", c_int), ("flags", c_uint), ("doc", c_char_p),
                ("env_default", c_void_p), ("n_env_default", c_size_t),
                ("env_force", c_void_p), ("n_env_force", c_size_t),
                ("knob", c_char_p), ("deprecated", c_char_p),
                ("alias", c_uint32), ("alias_final", c_uint32),
                ("has_min", c_bool), ("has_max", c_bool),
                ("min", Value), ("max", Value), ("choices", Value), ("def_", Value),
                ("n_implies", c_size_t)]


class OptDef(ctypes.Structure):
    """struct shmcfg_optdef (texts in the syntax of shmcfg_value_parse())"""
    _fields_ = [("name", c_char_p), ("type", c_int), ("flags", c_uint), ("def_", c_char_p),
                ("doc", c_char_p), ("env_default", c_char_p), ("env_force", c_char_p),
                ("knob", c_char_p), ("alias", c_char_p), ("implies", c_char_p),
                ("min", c_char_p), ("max", c_char_p), ("choices", c_char_p),
                ("deprecated", c_char_p)]


class CreateOpts(ctypes.Structure):
    """struct shmcfg_create_opts"""
    _fields_ = [("slots", c_uint32), ("readers", c_uint32), ("heap_bytes", c_uint64),
                ("mode", c_uint32), ("gid", c_uint32), ("flags", c_uint),
                ("envp", c_void_p), ("history", c_uint32), ("owner", c_uint32)]


class AttachOpts(ctypes.Structure):
    """struct shmcfg_attach_opts"""
    _fields_ = [("flags", c_uint), ("expect_schema_hash", c_void_p), ("owner", c_uint32)]


class View(ctypes.Structure):
    """struct shmcfg_view: the first member of every handle (versioned, SHMCFG_VIEW_ABI)."""
    _fields_ = [("abi", c_uint32), ("nopts", c_uint32), ("nslots", c_uint32),
                ("cells_off", c_uint32), ("current", c_void_p), ("slots", c_void_p),
                ("slot_size", c_uint64), ("slot", c_void_p * 256), ("copy", c_void_p)]


class Commit(ctypes.Structure):
    """struct shmcfg_commit"""
    _fields_ = [("generation", c_uint64), ("time_ns", c_uint64), ("pid", c_int32),
                ("uid", c_uint32), ("nchanged", c_uint32), ("nids", c_uint32),
                ("ids", c_uint32 * 20), ("cluster_rev", c_uint64), ("who", ctypes.c_char * 64)]


class LayerChange(ctypes.Structure):
    """struct shmcfg_layer_change"""
    _fields_ = [("opt", c_uint32), ("layer", c_int), ("old_set", c_bool), ("new_set", c_bool),
                ("old_value", Value), ("new_value", Value)]


class HistoryEntry(ctypes.Structure):
    """struct shmcfg_history_entry"""
    _fields_ = [("generation", c_uint64), ("time_ns", c_uint64), ("pid", c_int32),
                ("uid", c_uint32), ("user", ctypes.c_char * 33), ("process", ctypes.c_char * 16),
                ("who", ctypes.c_char * 64), ("cluster_rev", c_uint64), ("nchanges", c_uint32),
                ("values_kept", c_bool), ("changes", POINTER(LayerChange))]


class Info(ctypes.Structure):
    """struct shmcfg_stat (typedef shmcfg_info)"""
    _fields_ = [("layout_version", c_uint32), ("generation", c_uint64), ("size", c_uint64),
                ("nopts", c_uint32), ("nslots", c_uint32), ("nreaders", c_uint32),
                ("heap_bytes", c_uint64), ("heap_used", c_uint64),
                ("schema_hash", c_uint8 * 16), ("config_hash", c_uint8 * 16),
                ("create_time_ns", c_uint64), ("create_uid", c_uint32),
                ("create_pid", c_int32), ("slot_gen", c_uint64 * 256),
                ("retired", c_bool), ("readers_hwm", c_uint32), ("copy_fallbacks", c_uint64),
                ("writer", c_uint32), ("writer_pid", c_int32), ("writer_entry", c_uint32),
                ("building", c_uint64)]


# Sizes and offsets on LP64 (x86-64, aarch64), checked against the header.
EXPECTED_SIZES = {"Value": 48, "OptInfo": 288, "OptDef": 104, "CreateOpts": 48,
                  "AttachOpts": 24, "View": 2096, "Commit": 184, "Info": 2192,
                  "LayerChange": 112, "HistoryEntry": 168}


def _candidates():
    env = os.environ.get("SHMCFG_LIBRARY")
    if env:
        yield env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    build = os.path.join(here, os.pardir, os.pardir, "lib", ".libs")
    yield os.path.normpath(os.path.join(build, SONAME))
    try:
        from . import _paths  # written by `make install`
        yield os.path.join(_paths.LIBDIR, SONAME)
    except ImportError:
        pass
    found = ctypes.util.find_library("shmcfg")
    if found:
        yield found
    yield SONAME


def _load():
    errors = []
    for cand in _candidates():
        if os.sep in cand and not os.path.exists(cand):
            errors.append(f"{cand}: no such file")
            continue
        try:
            return ctypes.CDLL(cand), cand
        except OSError as e:
            errors.append(str(e))
    raise ImportError("shmcfg: cannot load libshmcfg (set SHMCFG_LIBRARY to its path): " +
                      "; ".join(errors))


lib, path = _load()

_H = c_void_p  # shmcfg *


def _fn(name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


def _sized(name, restype, struct, *argtypes):
    """A call whose struct grows by release (include/shmcfg.h.in, "The ABI"):
    the library's NAME_sized, told the size of the struct this binding
    declares, as the header's NAME macro does for C programs."""
    f = _fn(name + "_sized", restype, *argtypes, c_size_t)
    size = ctypes.sizeof(struct)

    def call(*args):
        return f(*args, size)

    call.__name__ = name
    return call


version = _fn("shmcfg_version", c_char_p, POINTER(c_int), POINTER(c_int), POINTER(c_int))
strerror = _fn("shmcfg_strerror", c_char_p, c_int)
errname = _fn("shmcfg_errname", c_char_p, c_int)
errdetail = _fn("shmcfg_errdetail", c_char_p)
value_clear = _fn("shmcfg_value_clear", None, POINTER(Value))
value_list = _fn("shmcfg_value_list", c_int, c_int, POINTER(c_char_p), c_size_t, POINTER(Value))
value_format = _fn("shmcfg_value_format", c_int, POINTER(Value), POINTER(c_void_p))
value_record = _fn("shmcfg_value_record", c_int, c_char_p, POINTER(Value), c_void_p, c_size_t,
                   POINTER(c_size_t))
schema_load = _fn("shmcfg_schema_load", c_int, c_char_p, POINTER(c_void_p))
schema_load_text = _fn("shmcfg_schema_load_text", c_int, c_char_p, c_size_t, c_char_p,
                       POINTER(c_void_p))
schema_free = _fn("shmcfg_schema_free", c_void_p, c_void_p)
schema_new = _fn("shmcfg_schema_new", c_int, POINTER(c_void_p))
schema_add = _fn("shmcfg_schema_add", c_int, c_void_p, POINTER(OptDef))
schema_write_yaml = _fn("shmcfg_schema_write_yaml", c_int, c_void_p, c_char_p, POINTER(c_void_p))
create = _sized("shmcfg_create", c_int, CreateOpts, c_char_p, c_void_p, POINTER(CreateOpts), POINTER(_H))
resize = _sized("shmcfg_resize", c_int, CreateOpts, c_char_p, POINTER(CreateOpts), POINTER(_H))
attach = _fn("shmcfg_attach", c_int, c_char_p, c_uint, c_void_p, POINTER(_H))
attach_with = _sized("shmcfg_attach_with", c_int, AttachOpts, c_char_p, POINTER(AttachOpts), POINTER(_H))
retired = _fn("shmcfg_retired", c_bool, _H)
reattach = _fn("shmcfg_reattach", c_int, POINTER(_H))
close = _fn("shmcfg_close", c_void_p, _H)
unlink = _fn("shmcfg_unlink", c_int, c_char_p)
name = _fn("shmcfg_name", c_char_p, _H)
count = _fn("shmcfg_count", c_uint32, _H)
readonly = _fn("shmcfg_readonly", c_bool, _H)
schema_hash = _fn("shmcfg_schema_hash", None, _H, POINTER(c_uint8 * 16))
lookup = _fn("shmcfg_lookup", c_int, _H, c_char_p, POINTER(c_uint32))
resolve = _fn("shmcfg_resolve", c_int, _H, c_char_p, POINTER(c_uint32))
opt_info = _fn("shmcfg_opt_info", c_int, _H, c_uint32, POINTER(OptInfo))
opt_implies = _fn("shmcfg_opt_implies", c_int, _H, c_uint32, c_size_t, POINTER(c_uint32),
                  POINTER(Value))
get_slow = _fn("shmcfg__get_slow", c_int, _H, c_uint32, c_int, POINTER(c_uint64))
get = _fn("shmcfg_get", c_int, _H, c_uint32, POINTER(Value))
get_stored = _fn("shmcfg_get_stored", c_int, _H, c_uint32, POINTER(Value))
config_hash = _fn("shmcfg_config_hash", c_uint64, _H, POINTER(c_uint8 * 16))
txn_begin = _fn("shmcfg_txn_begin", c_int, _H, POINTER(c_void_p))
txn_layer = _fn("shmcfg_txn_layer", c_int, c_void_p, c_int)
txn_origin = _fn("shmcfg_txn_origin", c_int, c_void_p, c_uint64, c_char_p)
txn_set = _fn("shmcfg_txn_set", c_int, c_void_p, c_uint32, POINTER(Value))
txn_reset = _fn("shmcfg_txn_reset", c_int, c_void_p, c_uint32)
txn_commit = _fn("shmcfg_txn_commit", c_int, c_void_p, POINTER(c_uint64))
txn_abort = _fn("shmcfg_txn_abort", None, c_void_p)
set_commit_timeout = _fn("shmcfg_set_commit_timeout", None, _H, c_int)
wait = _fn("shmcfg_wait", c_int, _H, c_uint64, c_int, POINTER(c_uint64))
commit_info = _sized("shmcfg_commit_info", c_int, Commit, _H, c_uint64, POINTER(Commit))
cluster_revision = _fn("shmcfg_cluster_revision", c_uint64, _H)
changes = _fn("shmcfg_changes", c_int, _H, c_uint64, c_uint64, POINTER(c_bool))
history_get = _fn("shmcfg_history_get", c_int, _H, c_uint64, POINTER(POINTER(HistoryEntry)))
history_free = _fn("shmcfg_history_free", None, POINTER(HistoryEntry))
history_range = _fn("shmcfg_history_range", c_uint64, _H, POINTER(c_uint64), POINTER(c_uint64))
snapshot_at = _fn("shmcfg_snapshot_at", c_int, _H, c_uint64, POINTER(c_void_p))
snapshot_get = _fn("shmcfg_snapshot_get", c_int, c_void_p, c_uint32, POINTER(Value))
snapshot_release = _fn("shmcfg_snapshot_release", None, c_void_p)
snapshot_acquire = _fn("shmcfg_snapshot_acquire", c_int, _H, POINTER(c_void_p))
snapshot_generation = _fn("shmcfg_snapshot_generation", c_uint64, c_void_p)
snapshot_hash = _fn("shmcfg_snapshot_hash", None, c_void_p, POINTER(c_uint8 * 16))
rollback = _fn("shmcfg_rollback", c_int, _H, c_uint64, c_uint, c_char_p, POINTER(c_uint64),
               POINTER(c_bool))
ROLLBACK_KNOB = 1 << 0
is_default = _fn("shmcfg_is_default", c_int, _H, c_uint32)
dump = _fn("shmcfg_dump", c_int, _H, c_uint, POINTER(c_void_p))
codegen = _fn("shmcfg_codegen", c_int, _H, c_int, POINTER(c_void_p))
patch_push = _fn("shmcfg_patch_push", c_int, _H)
patch_set = _fn("shmcfg_patch_set", c_int, _H, c_uint32, POINTER(Value))
patch_pop = _fn("shmcfg_patch_pop", c_int, _H)
patch_enter = _fn("shmcfg_patch_enter", c_int, _H, c_void_p)
patch_exit = _fn("shmcfg_patch_exit", c_int, _H, c_void_p)
patcher_new = _fn("shmcfg_patcher_new", c_int, _H, POINTER(c_void_p))
patcher_set = _fn("shmcfg_patcher_set", c_int, c_void_p, c_uint32, POINTER(Value))
patcher_apply = _fn("shmcfg_patcher_apply", c_int, c_void_p)
patcher_restore = _fn("shmcfg_patcher_restore", c_int, c_void_p)
patcher_free = _fn("shmcfg_patcher_free", None, c_void_p)
stat = _sized("shmcfg_stat", c_int, Info, _H, POINTER(Info))

# The read path without argtypes (about half the cost of a call): pass the
# handle as a c_void_p, the option and type as ints, byref() out values.
raw_get_slow = lib["shmcfg__get_slow"]
raw_get_slow.restype = c_int
raw_get = lib["shmcfg_get"]
raw_get.restype = c_int


def _load_fast():
    """shmcfg._fast, the attribute read in C (python/shmcfg/_fast.c), and
    its path; (None, why) when the package reads through ctypes alone.

    ``$SHMCFG_PYTHON_EXT``: ``0`` leaves it out, a path loads that file
    (an error if it cannot). Otherwise the installed ``shmcfg/_fast*.so``,
    then the build tree's ``python/shmcfg/.libs/_fast.so``. The module is
    used only when it calls the library loaded above (a handle of one copy
    of libshmcfg means nothing to another).
    """
    import importlib.machinery
    import importlib.util
    import sys

    env = os.environ.get("SHMCFG_PYTHON_EXT", "")
    if env == "0":
        return None, "SHMCFG_PYTHON_EXT=0"
    here = os.path.dirname(os.path.abspath(__file__))
    if env:
        paths = [env]
    else:
        paths = [os.path.join(here, "_fast" + s) for s in importlib.machinery.EXTENSION_SUFFIXES]
        paths.append(os.path.join(here, ".libs", "_fast.so"))
    for p in paths:
        if not os.path.exists(p):
            if env:
                raise ImportError(f"shmcfg: SHMCFG_PYTHON_EXT={env}: no such file")
            continue
        try:
            spec = importlib.util.spec_from_file_location(__package__ + "._fast", p)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
        except ImportError as e:
            if env:
                raise ImportError(f"shmcfg: SHMCFG_PYTHON_EXT={env}: {e}") from None
            return None, f"{p}: {e}"
        if mod.library_address() != ctypes.cast(lib.shmcfg_get, c_void_p).value:
            return None, f"{p}: linked with another libshmcfg than {path}"
        sys.modules[spec.name] = mod
        return mod, p
    return None, "not built"


fast, fast_info = _load_fast()  # the module and its path, or None and why not
# what serves an option's attribute on a module's class (Segment._attr())
OPTION_ATTRS = (property,) if fast is None else (property, fast.Getter)

_libc = ctypes.CDLL(None)
free = _libc.free
free.restype = None
free.argtypes = [c_void_p]


def take_string(p):
    """The text of a malloc'd char * that the library returned; frees it."""
    try:
        return ctypes.string_at(p.value).decode("utf-8")
    finally:
        free(p)
