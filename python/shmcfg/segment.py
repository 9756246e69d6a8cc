# SPDX-License-Identifier: MIT
"""Segments: attach(), create(), unlink(), the Segment object (reads,
commits, patches' bookkeeping, waiting, dump/load/codegen, lifetime) and
Transaction (private to the package; ``shmcfg`` re-exports the public
names).
"""

from __future__ import annotations

import ctypes
import errno
import math
import os
import pwd
import struct
import threading
import time
from collections import namedtuple
from types import TracebackType
from typing import (TYPE_CHECKING, Any, Dict, Iterable, List, Mapping, NamedTuple, Optional,
                    Tuple, Type, Union)

from . import _lib as _L
from .config import _make_module, _transplant, warn_deprecated
from .errors import Error, InvalidArgumentError, NotFoundError, UnknownOptionError, _error, _unknown
from .mutable import committing
from .values import _PYTYPE, OptionInfo, _convert, _decode, _Opt, _typename


# bits of Segment._state[0] (also shmcfg/_fast.c's STATE_*): reasons to call the library
_NO_FAST = 1 << 40
_CLOSED = 1 << 41
_STALE = 1 << 42  # the getters of a handle that reattach() replaced
_PATCHES = _NO_FAST - 1  # the low bits count the patches open
# the slot index of the word `current` of a replaced segment: no slot has it
# (lib/read/seqlock.h, FROZEN_SLOT); the library follows the new one
_FROZEN = 0xFF


class Current(NamedTuple):
    """A generation and its config hash, read together."""
    generation: int
    config_hash: bytes


class Snapshot:
    """One generation of a segment, held until release(): every read from it
    belongs to that generation, whatever commits come meanwhile
    (shmcfg_snapshot_acquire()). Reads take a full name or a unique suffix,
    as Segment.get() does; the thread's patches do not apply (a snapshot is
    the segment's generation). Use it as a ``with`` block, or release() it;
    any thread may release it."""

    __slots__ = ("_box", "_seg", "_incarnation", "generation", "__weakref__")

    def __init__(self, seg: "Segment") -> None:
        # An exception may come at any point (KeyboardInterrupt): the library
        # writes the pointer into _box, which exists before it is called and
        # which release() and __del__ take it back from in one step
        # (_release_snapshot), so that a pin is neither leaked nor released
        # twice (Segment.snapshot()).
        self._box = ctypes.c_void_p()
        self._seg = seg
        self._incarnation = seg._incarnation  # its option handles are of that schema
        self.generation = 0

    def _ptr(self) -> ctypes.c_void_p:
        if not self._box.value:
            raise Error(f"snapshot of generation {self.generation} of '{self._seg.name}' is released")
        return self._box

    def get(self, name: str) -> Any:
        """The value of an option in this generation (a plain list or set).
        After the Segment's close, full names only (a suffix is resolved by
        the library, through the Segment)."""
        p = self._ptr()
        if self._seg._incarnation != self._incarnation:
            # reattach() renumbered the Segment's options for the new schema
            raise Error(f"snapshot of generation {self.generation} of '{self._seg.name}' was taken "
                        f"before seg.reattach(): take a new one")
        o = self._seg._lookup(name)
        warn_deprecated(o)
        v = _L.Value()
        r = _L.snapshot_get(p, o.opt, ctypes.byref(v))
        if r < 0:
            raise _error(r, o.name)
        return _decode(v)

    __getitem__ = get

    @property
    def config_hash(self) -> bytes:
        """This generation's config hash (16 bytes)."""
        out = (ctypes.c_uint8 * 16)()
        _L.snapshot_hash(self._ptr(), out)
        return bytes(out)

    def release(self) -> None:
        """Let the generation go (again: nothing)."""
        box = getattr(self, "_box", None)  # a half-made one (__del__) has none
        if box is not None and box.value:
            _release_snapshot(box)

    def __reduce__(self) -> Any:
        # copy, deepcopy and pickle come here: a copy would release the one
        # generation twice, and another process cannot hold this one's
        raise TypeError("a shmcfg.Snapshot cannot be copied or pickled: take another with seg.snapshot()")

    def __enter__(self) -> "Snapshot":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()

    def __del__(self) -> None:
        self.release()

    def __repr__(self) -> str:
        state = "" if self._box.value else ", released"
        return f"<shmcfg.Snapshot of '{self._seg.name}', generation {self.generation}{state}>"


def _release_snapshot(box):
    """Release the snapshot whose pointer ctypes.c_void_p box holds, and
    clear the box, as one step for an exception that may come between any
    two (KeyboardInterrupt, at the interpreter's checks of pending calls):
    one call of shmcfg._fast, or, without it, two stores and one call, with
    no such check between the clear and the call (CPython checks after a
    call returns, at a function's entry and on a backward jump)."""
    f = _L.fast
    if f is not None:
        f.snapshot_release(box)
        return
    p = box.value
    box.value = None
    _L.snapshot_release(p)


if TYPE_CHECKING:
    from .config import ConfigModule

# what a segment name or schema path may be given as
StrPath = Union[str, "os.PathLike[str]"]


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

    name: str
    readonly: bool

    def __init__(self, handle: int, name: str, fast_reads: Optional[bool] = None,
                 owner: Optional[int] = None) -> None:
        self._h: Optional[int] = handle
        self._hp: Optional[ctypes.c_void_p] = ctypes.c_void_p(handle)
        self._pid = os.getpid()
        self._child = None  # (pid, handle) attached again after fork
        self._owner = owner  # the uid named at attach, or None
        self._prefault = False  # attached with prefault=True: so are its re-attaches
        self._fast_arg = fast_reads
        self._incarnation = 0  # bumped by reattach()
        self._reattach_hooks: List[Any] = []  # called after reattach() (the torch bridge)
        self.name = name
        self._lock = threading.Lock()
        self._modlock = threading.Lock()
        self._state = [0]
        self._tl = threading.local()
        # the C module's patch enter/exit and count (config._FastPatch), or
        # None: the Python ones
        self._fastmod = _L.fast
        self._modules: Dict[str, ConfigModule] = {}
        self._hashcache: Dict[str, Tuple[int, bytes]] = {}
        try:
            self._byindex, self._opts = self._load_options(handle)
            self.readonly = bool(_L.readonly(handle))
            self._setup_view(fast_reads)
        except BaseException:
            # the caller (_wrap) closes the handle: this half-made segment
            # must not close it again when collected
            self._h = None
            self._hp = None
            raise

    def _load_options(self, handle):
        """The option table of a handle: (list by index, dict by name)."""
        options = getattr(_L.fast, "options", None)  # an extension of before 0.16 has none
        if options is not None:
            # one call (shmcfg._fast.options): ~4x the loop below at
            # 100,000 options
            got = options(handle, _Opt)
            if isinstance(got, int):
                raise _error(got, self.name)
            return got
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
        self._view = v
        self._cur = None
        self._curbox = [None]
        if v.abi != _L.VIEW_ABI or not v.current:
            self._state[0] |= _NO_FAST
            return
        self._resolve_word()
        if fast is None:
            fast = os.environ.get("SHMCFG_PYTHON_FAST", "1") != "0"
        if not fast:
            self._state[0] |= _NO_FAST

    def _resolve_word(self):
        """The word ``current`` this handle's view names now: the library
        points the view at a new incarnation when it follows a replacement
        (lib/read/follow.c), whose old word then names no slot (FROZEN)."""
        word = (ctypes.c_int64 * 1).from_address(self._view.current)
        self._cur = memoryview(word).cast("B").cast("q")
        self._word = word
        self._curbox[0] = self._cur

    def _refollow(self):
        """The segment was replaced: let the library follow it (any call
        that reads does), then read the word its view names now."""
        _L.cluster_revision(self._handle())
        self._resolve_word()

    @property
    def fast_reads(self) -> bool:
        """Whether attribute reads are served from the per-generation cache
        now (False while a thread has a patch open on this segment: with
        shmcfg._fast, the threads without patches still are; that thread
        reads through the library)."""
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
        # The parent's option handles are indices into its schema: attach
        # again only to that segment, never to whatever now has the name.
        if _L.retired(h):
            raise _error(_L.E["RETIRED"], f"segment '{self.name}' was removed or replaced "
                         "(attaching again after fork); reattach()")
        want = (ctypes.c_uint8 * 16)()
        _L.schema_hash(h, ctypes.byref(want))
        nh = _L.c_void_p()
        r = _L.attach_with(self.name.encode(),
                           _attach_opts(self.readonly, self._owner, ctypes.addressof(want),
                                        self._prefault),
                           ctypes.byref(nh))
        if r < 0:
            raise _error(r, f"segment '{self.name}' (attaching again after fork)")
        self._child = (pid, nh.value)
        return nh.value

    # -- reading -----------------------------------------------------------

    @property
    def generation(self) -> int:
        """The current generation (1 after creation). A replacement this
        process cannot attach (another user's segment, mode 0600) raises
        the library's error, as every read of the segment then does."""
        if self._cur is not None and self._h is not None:
            c = self._current_word()
            if c:
                return c >> _L.SLOT_BITS
        return self._stat().generation  # 0: no generation, the library says why

    def _current_word(self):
        """The word ``current`` of the incarnation the handle reads now (a
        replaced one's names FROZEN: the library follows it first); 0, a word
        of the handle's own, when it cannot follow it (lib/read/follow.c)."""
        c = self._cur[0]
        if c & _FROZEN == _FROZEN:
            self._refollow()
            c = self._cur[0]
        return c

    def _stat(self):
        """shmcfg_stat() of the handle (of the incarnation it reads now)."""
        info = _L.Info()
        r = _L.stat(self._handle(), ctypes.byref(info))
        if r < 0:
            raise _error(r, self.name)
        return info

    def _live_id(self):
        """What names the incarnation the handle reads now, to tell that it
        followed a replacement: the address of the word ``current`` its view
        names (the library points the view at a successor it follows, or at
        a word of the handle's own when it cannot follow one:
        lib/read/follow.c); without a view, its schema hash."""
        if self._cur is None or self._h is None:
            return bytes(self._stat().schema_hash)
        self._current_word()
        return self._view.current

    def _attach_schema(self, schema_hash):
        """A read-only handle of the segment now of this name, refused unless
        its schema hash is schema_hash (bytes): the declarations of a
        successor the handle follows, which its own option table does not
        give (they are the schema attached first's). The caller closes it."""
        want = (ctypes.c_uint8 * 16).from_buffer_copy(schema_hash)
        h = _L.c_void_p()
        r = _L.attach_with(_segname(self.name),
                           _attach_opts(True, self._owner, ctypes.addressof(want)),
                           ctypes.byref(h))
        if r < 0:
            raise _error(r, f"segment '{self.name}'")
        return h.value

    @property
    def cluster_revision(self) -> int:
        """The etcd revision of the cluster layer this host has applied (0 if
        none): a trainer switches at a step boundary once every rank reports
        at least the revision it waits for (examples/trainer.py)."""
        return _L.cluster_revision(self._handle())

    def current(self) -> Current:
        """The current generation and its config hash, read together."""
        _ = self.generation  # raises as it does, where the library cannot follow a replacement
        out = (ctypes.c_uint8 * 16)()
        g = _L.config_hash(self._handle(), out)
        return Current(g, bytes(out))

    @property
    def config_hash(self) -> bytes:
        """The segment's config hash (16 bytes; ``shmctl hash`` prints it as hex)."""
        return self.current().config_hash

    @property
    def schema_hash(self) -> bytes:
        out = (ctypes.c_uint8 * 16)()
        _L.schema_hash(self._handle(), out)
        return bytes(out)

    def _lookup(self, name):
        """The option a user-typed name means: a full name (a dict hit), else
        the library's resolution (shmcfg_resolve: a unique suffix; an unknown
        or ambiguous name raises UnknownOptionError saying "did you mean"
        or listing the candidates), the rules shmctl uses."""
        o = self._opts.get(name)
        if o is not None:
            return o
        if not isinstance(name, str):
            raise _unknown("", name, self.name)
        opt = ctypes.c_uint32()
        r = _L.resolve(self._handle(), name.encode("utf-8", "surrogateescape"), ctypes.byref(opt))
        if r < 0:
            raise _error(r, name)
        return self._byindex[opt.value]

    def _patched_here(self):
        """Whether the calling thread may have a patch of this segment open
        (with shmcfg._fast: a patch of any segment)."""
        f = self._fastmod
        if f is not None:
            return f.thread_patched()
        return getattr(self._tl, "depth", 0) > 0

    def _thread_patches(self, d):
        """Count the calling thread's patches for _patched_here() (with
        shmcfg._fast, which asks the library's thread-local count, none)."""
        if self._fastmod is None:
            tl = self._tl
            tl.depth = getattr(tl, "depth", 0) + d

    def _set_flag(self, state, bits):
        """Set bits of state word state (as _count_patch(), under self._lock)."""
        f = self._fastmod
        if f is not None:
            f.state_or(state, bits)
        else:
            state[0] |= bits

    def _count_patch(self, d):
        """Add d to the count of patches open in the process (the low bits
        of the state word). Under self._lock; with shmcfg._fast one step
        under the GIL, as its Patch enter and exit, which take no lock."""
        f = self._fastmod
        if f is not None:
            f.state_add(self._state, d)
        else:
            self._state[0] += d

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

        The plain value fetch (_value_fetcher()) with the read policies
        option o needs, and only those (config.py): the copies of a list or
        set value are CommittingList/CommittingSet objects, whose in-place
        changes commit; a deprecated option warns once per process.
        """
        if o.kind <= _L.STR:
            fetch = self._value_fetcher(o)
        else:
            fetch = self._value_fetcher(o, self._committing_copy(o))
        if o.deprecated is None:
            return fetch

        def get_deprecated(obj):
            warn_deprecated(o)
            return fetch(obj)
        return get_deprecated

    def _read_with_policies(self, o):
        """A read of option o with the policies of _getter() (the module's
        __getattr__: dotted names)."""
        warn_deprecated(o)
        v = self._read(o)
        if o.kind <= _L.STR or v is None:
            return v
        return self._committing_copy(o)(v)

    def _committing_copy(self, o):
        """The in-place change policy of list or set option o: a function
        making the committing copy (mutable.py) of its items that a read
        returns."""
        def commit(value):
            if self._patched_in_thread(o):
                raise RuntimeError(f"{o.name} is patched in this thread: an in-place change "
                                   "would commit the patched value for every process; change "
                                   "it with patch(), or assign it")
            warn_deprecated(o)
            self._commit([(o, _convert(o, value, o.name))])
        return committing(o.kind == _L.LIST, commit)

    def _patched_in_thread(self, o):
        """Whether the calling thread reads option o from one of its patches."""
        if not self._patched_here():
            return False
        if o.alias is not None:
            o = self._byindex[o.final]
        return self._source(o) == _L.SRC_PATCH

    def _source(self, o):
        """The layer option o's value comes from, as this thread reads it
        (an SRC_* constant; SRC_PATCH: one of the thread's patches)."""
        hp = self._hp
        if hp is None:
            raise Error(f"segment '{self.name}' is closed")
        v = _L.Value()
        r = _L.raw_get(hp, o.opt, ctypes.byref(v))
        if r < 0:
            raise _error(r, o.name)
        try:
            return v.source
        finally:
            _L.value_clear(ctypes.byref(v))

    def _value_fetcher(self, o, copy=None, read=None):
        """The ONE plain value fetch of option o: a function(obj) returning
        its value as this thread sees it, with no policy. Lists and sets are
        fresh copies, made by ``copy(items)`` (default: list or set).
        ``read(o)``: the read through the library (default: _read(); the
        torch bridge checks what it read came from a segment it serves).

        Values are cached per generation: the word ``current`` of the segment
        header ((generation << 8) | slot) is read directly from shared memory
        and, while it is the one a cached value was read under, the value
        stands (a published generation never changes). Otherwise, and while
        any thread of the process has a patch open on this segment, the
        library reads the value (honouring the calling thread's patches).
        The word is read before the library call, so a commit that races it
        can only make the entry unused, never wrong.
        """
        if read is None:
            read = self._read
        state = self._state
        box = self._curbox
        refollow = self._refollow
        k = o.kind
        if k > _L.STR and copy is not None:
            plain_read = read

            def read(o):
                v = plain_read(o)
                return None if v is None else copy(v)
        if box[0] is None:
            return lambda _obj: read(o)
        cache = [(-1, None)]
        # a word that names FROZEN: the segment was replaced; the library
        # read follows it, and the word to key on is the new one's
        if k <= _L.STR:  # immutable values
            def get(_obj):
                if not state[0]:
                    c = box[0][0]
                    e = cache[0]
                    if e[0] == c:
                        return e[1]
                    v = read(o)
                    if c & _FROZEN == _FROZEN:
                        refollow()
                    else:
                        cache[0] = (c, v)
                    return v
                return read(o)
            return get
        freeze = tuple if k == _L.LIST else frozenset
        if copy is None:
            copy = list if k == _L.LIST else set

        def get_copy(_obj):
            if not state[0]:
                c = box[0][0]
                e = cache[0]
                if e[0] != c:
                    v = read(o)
                    if c & _FROZEN == _FROZEN:
                        refollow()
                    else:
                        cache[0] = (c, None if v is None else freeze(v))
                    return v
                v = e[1]
                return None if v is None else copy(v)
            return read(o)
        return get_copy

    def _attr(self, o):
        """The attribute of option o on a module's class: the C read of
        shmcfg._fast when it is loaded, with _getter()'s function as its
        fallback (called whenever the state word or the ``slow`` flag asks),
        else a property of that function. A list or set read hands out
        the committing copy (mutable.py) of the cached items, as the getter
        does. A deprecated option's getter warns: its reads always take it."""
        get = self._getter(o)
        doc = o.doc or None
        if _L.fast is None or self._cur is None:
            return property(get, doc=doc)
        copy = self._committing_copy(o) if o.kind > _L.STR else None
        # the address of the view's pointer to the word: the Getter reads the
        # word the view names at each read (a replacement moves it)
        g = _L.fast.Getter(self._h, self._h + _L.View.current.offset, self._state, get, o.opt,
                           o.kind, doc, copy)
        g.slow = o.deprecated is not None
        return g

    def snapshot(self) -> Snapshot:
        """The current generation, held: several reads that must agree (a
        Snapshot; ``with seg.snapshot() as s: s["recompile_limit"]``)."""
        s = Snapshot(self)  # first: it owns the pin from the moment the library takes it
        r = _L.snapshot_acquire(self._wh(), ctypes.byref(s._box))
        if r < 0:
            raise _error(r, self.name)
        s.generation = _L.snapshot_generation(s._box)
        return s

    def get(self, name: str) -> Any:
        """The value of an option by its full name or a unique suffix
        of it (honours this thread's
        patches; a plain list or set). A deprecated option warns (once per
        process)."""
        o = self._lookup(name)
        warn_deprecated(o)
        return self._read(o)

    def options(self) -> List[str]:
        """The full names of every option, in declaration order."""
        return [o.name for o in self._byindex]

    def describe(self, name: str) -> OptionInfo:
        """An OptionInfo for an option's full name or a unique suffix of it."""
        o = self._lookup(name)
        return OptionInfo(o.name, o.opt, _PYTYPE[o.kind], o.nullable, o.flags, o.doc,
                          self._byindex[o.alias].name if o.alias is not None else None,
                          o.deprecated, o.knob)

    def _snapshot(self, opts, stored=False):
        """Values of several options, all from one generation (and this
        thread's patches). With `stored`, their stored values, as the seed's
        save_config() and get_config_copy() give them: no implication."""
        read = self._read_stored if stored else self._read
        for _ in range(1000):
            g = self.generation
            vals = [read(o) for o in opts]
            if self.generation == g:
                return g, vals
        return g, vals

    def _read_stored(self, o):
        """An option's stored value (shmcfg_get_stored(): the highest layer
        set, this thread's patch for the user layer, else the default)."""
        hp = self._hp
        if hp is None:
            raise Error(f"segment '{self.name}' is closed")
        v = _L.Value()
        r = _L.get_stored(hp, o.opt, ctypes.byref(v))
        if r < 0:
            raise _error(r, o.name)
        try:
            return _decode(v)
        finally:
            _L.value_clear(ctypes.byref(v))

    def is_default(self, name: str) -> bool:
        o = self._lookup(name)
        return self._is_default(o)

    def _is_default(self, o):
        r = _L.is_default(self._handle(), o.opt)
        if r < 0:
            raise _error(r, o.name)
        return r == 1

    # -- modules -----------------------------------------------------------

    def module(self, name: str = "") -> ConfigModule:
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

    def _commit(self, changes, layer=_L.SRC_USER, origin=None):
        """One transaction: changes is a list of (_Opt, _CVal or None=reset),
        origin None or (cluster revision, who). Returns the generation (the
        current one when nothing changed)."""
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
            if origin is not None:
                rev, who = origin
                r = _L.txn_origin(t, int(rev), (who or "").encode())
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

    def set(self, values: Mapping[str, Any], *, layer: str = "user",
            origin: Optional[Tuple[int, Optional[str]]] = None) -> int:
        """Set options by full name (or unique suffix), all in one commit:
        ``seg.set({"a.b": 1})``.
        Returns the generation published (or the current one if nothing changed)."""
        return self.transaction(layer, origin).update(values).commit()

    def reset(self, *names: str, layer: str = "user",
              origin: Optional[Tuple[int, Optional[str]]] = None) -> int:
        """Clear the user layer of options, in one commit."""
        t = self.transaction(layer, origin)
        for n in names:
            t.reset(n)
        return t.commit()

    def transaction(self, layer: str = "user",
                    origin: Optional[Tuple[int, Optional[str]]] = None) -> Transaction:
        """A Transaction: collect sets and resets, commit them as one
        generation. As a context manager it commits on success. layer:
        "user", "knob" or "cluster"; origin: (cluster revision, who) for the
        commit log, as shmcfg-sync tags its commits."""
        return Transaction(self, layer, origin)

    # -- patches -------------------------------------------------------------

    def _push(self, pairs, owner):
        """Open the calling thread's patch frame of pairs, owned by owner
        (an int: the patch object's id(), which _pop() closes by)."""
        h = self._handle()
        with self._lock:
            self._count_patch(1)
        r = _L.patch_enter(h, owner)
        if r < 0:
            e = _error(r, self.name)
            with self._lock:
                self._count_patch(-1)
            raise e
        self._thread_patches(1)
        for o, cv in pairs:
            r = _L.patch_set(h, o.opt, ctypes.byref(cv.c))
            if r < 0:
                e = _error(r, o.name)
                self._pop(owner)
                raise e

    def _pop(self, owner):
        """Close owner's innermost frame of this thread, wherever it is:
        patches may end out of order, each taking away only its own."""
        r = _L.patch_exit(self._handle(), owner)
        if r < 0:
            raise _error(r, f"segment '{self.name}': this patch is not open in this thread")
        self._thread_patches(-1)
        with self._lock:
            self._count_patch(-1)

    # -- waiting and history ---------------------------------------------

    def wait(self, after: Optional[int] = None, timeout: Optional[float] = None) -> Optional[int]:
        """Block until the generation is greater than ``after`` (default: the
        current one), or ``timeout`` seconds pass (None: forever). Returns the
        new generation, or None on timeout. A futex on the segment: commits
        wake every waiter; signals (KeyboardInterrupt) are served. Raises
        RetiredError once the segment was removed (see reattach()); a
        replaced one is followed, and the wait goes on there."""
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

    def changes(self, from_gen: int, to_gen: Optional[int] = None,
                values: bool = False) -> Union[List[str], Dict[str, Tuple[Any, Any]], None]:
        """The full names of the options that changed between two generations,
        or None when the library no longer knows (commits were missed).
        With values: a dict name -> (value at from_gen, value at to_gen) of
        the options whose values differ, rebuilt from the history (None when
        it can no longer rebuild from_gen)."""
        if to_gen is None:
            to_gen = self.generation
        if values:
            try:
                a, b = self.values_at(from_gen), self.values_at(to_gen)
            except NotFoundError:
                return None
            return {k: (a[k], b[k]) for k in a if a[k] != b[k] or type(a[k]) is not type(b[k])}
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

    def commit_info(self, gen: int) -> Optional[Dict[str, Any]]:
        """Who committed a recent generation: a dict (generation, time,
        pid, uid, changed names, nchanged), or None if no longer logged."""
        c = _L.Commit()
        r = _L.commit_info(self._handle(), gen, ctypes.byref(c))
        if r == -2:
            return None
        if r < 0:
            raise _error(r, self.name)
        return {"generation": c.generation, "time": c.time_ns / 1e9, "pid": c.pid,
                "uid": c.uid, "nchanged": c.nchanged, "cluster_rev": c.cluster_rev,
                "who": c.who.decode("utf-8", "replace"),
                "changed": [self._byindex[c.ids[i]].name for i in range(c.nids)
                            if c.ids[i] < len(self._byindex)]}

    # -- history ------------------------------------------------------------

    def _entry(self, gen):
        """The history entry of gen as a dict, or None if not in the history."""
        p = ctypes.POINTER(_L.HistoryEntry)()
        r = _L.history_get(self._handle(), gen, ctypes.byref(p))
        if r == -errno.ENOENT:
            return None
        if r < 0:
            raise _error(r, self.name)
        try:
            e = p.contents
            changes = None
            if e.values_kept:
                changes = []
                for k in range(e.nchanges):
                    c = e.changes[k]
                    changes.append({
                        "name": self._byindex[c.opt].name,
                        "layer": _L.SOURCE_NAMES[c.layer],
                        "old_set": bool(c.old_set), "old": _decode(c.old_value) if c.old_set else None,
                        "new_set": bool(c.new_set), "new": _decode(c.new_value) if c.new_set else None})
            who = e.who.decode("utf-8", "replace")
            process = e.process.decode("utf-8", "replace")
            return {"generation": e.generation, "time": e.time_ns / 1e9, "time_ns": e.time_ns,
                    "pid": e.pid, "uid": e.uid, "user": e.user.decode("utf-8", "replace") or None,
                    "process": process, "who": who, "origin": who or process,
                    "cluster_rev": e.cluster_rev, "nchanges": e.nchanges,
                    "values_kept": bool(e.values_kept), "changes": changes}
        finally:
            _L.history_free(p)

    def history(self, n: Optional[int] = None,
                options: Union[str, Iterable[str], None] = None) -> List[Dict[str, Any]]:
        """The segment's history, newest first: one dict per commit
        (generation, time, time_ns, pid, uid, user, process, origin, who,
        cluster_rev, nchanges, values_kept, and changes: a list of
        {name, layer, old_set, old, new_set, new}, None when the commit's
        values were too big to keep). ``n``: at most that many entries;
        ``options``: full names (an alias stands for its target), only the
        commits that changed one of them."""
        finals = None
        if options is not None:
            if isinstance(options, str):
                options = [options]
            finals = {self._byindex[self._lookup(name).final].name for name in options}
        oldest = ctypes.c_uint64()
        cur = _L.history_range(self._handle(), ctypes.byref(oldest), None)
        if not cur:  # out of memory: no answer, not an empty history
            raise _error(-errno.ENOMEM, self.name)
        out: List[Dict[str, Any]] = []
        g = cur
        while g >= max(oldest.value, 1) and (n is None or len(out) < n):
            e = self._entry(g)
            if e is None:
                break
            if finals is None or any(c["name"] in finals for c in e["changes"] or ()):
                out.append(e)
            g -= 1
        return out

    def history_range(self) -> Tuple[int, int, int]:
        """(oldest, rebuildable, current): the oldest generation the history
        holds, the oldest whose values values_at() can rebuild, the current one."""
        oldest, reb = ctypes.c_uint64(), ctypes.c_uint64()
        cur = _L.history_range(self._handle(), ctypes.byref(oldest), ctypes.byref(reb))
        if not cur:  # out of memory
            raise _error(-errno.ENOMEM, self.name)
        return oldest.value, reb.value, cur

    def values_at(self, gen: int) -> Dict[str, Any]:
        """Every option's value (full name -> value) as of generation gen,
        rebuilt from the history. NotFoundError, naming the oldest generation
        that can be rebuilt, when gen is too old (or not committed yet)."""
        snap = ctypes.c_void_p()
        r = _L.snapshot_at(self._handle(), gen, ctypes.byref(snap))
        if r < 0:
            raise _error(r, self.name)
        try:
            out = {}
            for o in self._byindex:
                v = _L.Value()
                r = _L.snapshot_get(snap, o.opt, ctypes.byref(v))
                if r < 0:
                    raise _error(r, o.name)
                out[o.name] = _decode(v)
            return out
        finally:
            _L.snapshot_release(snap)

    def rollback(self, gen: int, knob: bool = False, who: Optional[str] = None) -> int:
        """One commit restoring the user layer (and with knob the knob layer)
        to what it held at generation gen. Returns the generation published
        (the current one when nothing differed)."""
        g = ctypes.c_uint64()
        r = _L.rollback(self._wh(), gen, _L.ROLLBACK_KNOB if knob else 0,
                        who.encode("utf-8") if who is not None else None, ctypes.byref(g),
                        None)
        if r < 0:
            raise _error(r, self.name)
        return g.value

    # -- dump, load, codegen ---------------------------------------------

    def dump(self, all: bool = False) -> str:
        """The portable JSON text that ``shmctl dump`` prints."""
        p = ctypes.c_void_p()
        r = _L.dump(self._wh(), _L.DUMP_ALL if all else 0, ctypes.byref(p))
        if r < 0:
            raise _error(r, self.name)
        return _L.take_string(p)

    def load(self, data: Union[str, bytes, Mapping[str, Any]]) -> int:
        """Load a dump (text, bytes or dict) or a {full name: value} dict as
        one commit; unknown names warn. Returns the generation."""
        return self.module("").load_config(data)

    def codegen(self, format: str = "python") -> str:
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

    def unlink(self) -> None:
        """Remove the segment (see shmcfg.unlink()): this Segment, as every
        process attached to it, keeps its last values and is retired."""
        unlink(self.name)

    @property
    def retired(self) -> bool:
        """Whether the segment was removed or replaced since it was attached
        (``shmctl rm``, ``shmctl create --force``, unlink()): reads keep
        answering its last values, wait() raises RetiredError, reattach()
        moves to the segment now of that name. One fstat(2)."""
        return bool(_L.retired(self._handle()))

    def reattach(self) -> Segment:
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
            self._set_flag(old_state, _STALE)
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
        for hook in list(self._reattach_hooks):
            hook()
        return self

    def close(self) -> None:
        """Detach. Modules of this segment then raise Error. Call it when no
        other thread of the process reads through this segment."""
        h = self._h
        if h is None:
            return
        with self._lock:
            self._set_flag(self._state, _CLOSED)
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

    def __enter__(self) -> Segment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __reduce__(self):
        return (_attach_pickled, (self.name, self.readonly, self._owner, self._prefault))

    def __repr__(self) -> str:
        try:
            state = "closed" if self._h is None else f"generation {self.generation}"
        except Error as e:
            state = f"generation unknown: {e.strerror}"
        return f"<shmcfg.Segment '{self.name}' {len(self._byindex)} options, {state}>"


class Transaction:
    """Changes committed as one generation (``Segment.transaction()``).

    ``t[name] = value``, ``t.set(name, value)``, ``t.update(mapping)``,
    ``del t[name]`` / ``t.reset(name)`` (clear the layer), then ``commit()``.
    Names are full names or unique suffixes (``Segment.get``). Types are
    checked as they are given; the library
    checks ranges and choices at commit, where one bad value fails all.
    """

    def __init__(self, seg: Segment, layer: str = "user",
                 origin: Optional[Tuple[int, Optional[str]]] = None) -> None:
        if layer not in ("user", "knob", "cluster"):
            raise ValueError(f"layer must be 'user', 'knob' or 'cluster', not {layer!r}")
        self._seg = seg
        self._layer = {"user": _L.SRC_USER, "knob": _L.SRC_KNOB, "cluster": _L.SRC_CLUSTER}[layer]
        self._origin = origin
        self._changes: List[Any] = []
        self._done = False

    def set(self, name: str, value: Any) -> Transaction:
        o = self._seg._lookup(name)
        warn_deprecated(o)
        self._changes.append((o, _convert(o, value, o.name)))
        return self

    __setitem__ = set

    def update(self, values: Mapping[str, Any]) -> Transaction:
        for k, v in dict(values).items():
            self.set(k, v)
        return self

    def reset(self, name: str) -> Transaction:
        self._changes.append((self._seg._lookup(name), None))
        return self

    __delitem__ = reset

    def commit(self) -> int:
        """Publish; returns the generation (the current one if nothing changed)."""
        if self._done:
            raise RuntimeError("transaction already committed or aborted")
        self._done = True
        return self._seg._commit(self._changes, self._layer, self._origin)

    def abort(self) -> None:
        self._done = True
        self._changes = []

    def __enter__(self) -> Transaction:
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        if exc_type is None and not self._done:
            self.commit()
        else:
            self.abort()


# ---------------------------------------------------------------------------
# Entry points
# ---------------------------------------------------------------------------


def attach(name: str, readonly: bool = False, fast_reads: Optional[bool] = None, *,
           owner: Union[str, int, None] = None, prefault: bool = False) -> Segment:
    """Attach an existing segment. Raises NotFoundError (a FileNotFoundError)
    when there is none, PermissionDeniedError, OwnerError (owned by another
    user than you or root, or than ``owner``), or Error (SHMCFG_E_MAGIC,
    SHMCFG_E_VERSION, SHMCFG_E_CORRUPT...).

    ``owner``: the user (a name or a uid) that must own the segment. Without
    it only segments of the caller's user or root are trusted: anyone may
    create an object under a name another user expects.

    ``prefault``: do at attach what each option's first use would do (map
    the segment's pages, validate every option: SHMCFG_ATTACH_PREFAULT),
    for a long-lived process whose reads and commits must not wait on first
    use; the library's attach takes time in proportion to the options (~30 ms
    more at 100,000), a spoiled option fails it (Error, errname
    SHMCFG_E_CORRUPT), and a library older than 0.14 refuses the flag
    (InvalidArgumentError).
    """
    uid = _owner_uid(owner)
    h = _L.c_void_p()
    r = _L.attach_with(_segname(name), _attach_opts(readonly, uid, prefault=prefault), ctypes.byref(h))
    if r < 0:
        e = _error(r, f"segment '{name}'")
        if r in (-errno.EACCES, -errno.EPERM):
            # as shmctl says it: the access that was refused
            e.strerror = (f"segment '{name}': permission denied (read access)" if readonly else
                          f"segment '{name}': permission denied (write access; readonly=True to read)")
        raise e
    seg = _wrap(h.value, name, fast_reads, uid)
    seg._prefault = bool(prefault)
    return seg


def _attach_pickled(name, readonly, owner, prefault=False):
    return attach(name, readonly, owner=owner, prefault=prefault)


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


def _attach_opts(readonly, uid, expect_schema_hash=None, prefault=False):
    o = _L.AttachOpts()
    o.flags = ((_L.ATTACH_RDONLY if readonly else 0) | (_L.ATTACH_OWNER if uid is not None else 0) |
               (_L.ATTACH_PREFAULT if prefault else 0))
    o.owner = uid if uid is not None else 0
    o.expect_schema_hash = expect_schema_hash
    return ctypes.byref(o)


def create(name: str, schema: Optional[StrPath] = None, *, force: bool = False,
           keep: bool = False, exist_ok: bool = False,
           no_env: bool = False, env: Optional[Mapping[str, str]] = None,
           schema_text: Union[str, bytes, None] = None, slots: int = 0, readers: int = 0,
           heap_bytes: int = 0, mode: int = 0, fast_reads: Optional[bool] = None,
           history: int = 0) -> Segment:
    """Create a segment and attach it.

    ``schema``: None for the embedded default (torch.compiler.config and the
    torch._dynamo.config options its aliases point at), the path of a YAML
    schema file, or the name of a shipped one, a str with no "/" and no "."
    ("torch": torch.yaml in $SHMCFG_SCHEMA_PATH's directories, then the
    installed ones; shmcfg_schema_load()); ``schema_text``: a schema as
    YAML text. ``force``
    replaces a segment of that name (else ExistsError): its processes follow
    the new one; with ``keep``, one of the same schema keeps its layers
    (but the env layers) and history. ``exist_ok``: a segment of that name
    and schema is attached instead (create-or-attach, for the ranks of a
    job; another schema raises). ``env``: a mapping
    to fill the environment layers from instead of os.environ; ``no_env``
    leaves them empty. ``slots``, ``readers``, ``heap_bytes``, ``mode``,
    ``history`` (commits the history keeps): see shmcfg_create_opts (0: the
    defaults).
    """
    sch = ctypes.c_void_p()
    if schema is not None and schema_text is not None:
        raise TypeError("give schema or schema_text, not both")
    if schema is not None:
        if isinstance(schema, os.PathLike) and os.sep not in os.fspath(schema):
            schema = os.path.join(os.curdir, schema)  # a path object is a file
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
    opts.history = history
    opts.mode = mode
    opts.flags = ((_L.CREATE_FORCE if force else 0) | (_L.CREATE_NO_ENV if no_env else 0) |
                  (_L.CREATE_KEEP if keep else 0) | (_L.CREATE_EXIST_OK if exist_ok else 0))
    envp = None
    if env is not None:
        items = [f"{k}={v}".encode() for k, v in env.items()]
        envp = (ctypes.c_char_p * (len(items) + 1))(*items, None)
        opts.envp = ctypes.cast(envp, ctypes.c_void_p)
    h = _L.c_void_p()
    try:
        r = _L.create(_segname(name), sch, ctypes.byref(opts), ctypes.byref(h))
        if r < 0:
            raise _error(r, f"segment '{name}'")
    finally:
        _L.schema_free(sch)
    del envp
    return _wrap(h.value, name, fast_reads)


def resize(name: str, *, heap_bytes: int = 0, history: int = 0, readers: int = 0,
           slots: int = 0) -> None:
    """Give a segment other sizes (0 keeps one): a new incarnation with the
    same values, layers and history takes its place, and every process
    attached to it, this one's Segments too, follows it by itself."""
    opts = _L.CreateOpts()
    opts.heap_bytes, opts.history, opts.readers, opts.slots = heap_bytes, history, readers, slots
    h = _L.c_void_p()
    r = _L.resize(_segname(name), ctypes.byref(opts), ctypes.byref(h))
    if r < 0:
        raise _error(r, f"segment '{name}'")
    _L.close(h)


def unlink(name: str, missing_ok: bool = False) -> None:
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
