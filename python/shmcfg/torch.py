"""torch's own config modules served by a segment.

    import shmcfg, shmcfg.torch
    seg = shmcfg.attach("job42")
    shmcfg.torch.install(seg)      # before or after `import torch`
    import torch
    torch._dynamo.config.recompile_limit   # the segment's value

``install(seg)`` bridges ``torch.compiler.config`` and
``torch._dynamo.config``: a module torch already imported is bridged at
once; one not imported yet is bridged as soon as torch's own module code
has run (an import hook: a meta path finder that wraps the module's
loader). Bridging keeps the module object torch and every importer hold and
gives it a class that serves the options the segment declares under the
module's name from the segment (reads, assignments, ``del``, patches,
mock.patch, in-place changes of lists and sets: as a module of
``seg.module(name)``), and leaves every other option and attribute of the
module to torch's own config module class, which is its base class. Methods
over all options (patch, get_hash, save_config, load_config...) split the
names between the two.

Only top-level option names are served (the seed's modules have no nested
namespaces). See python/README.md, "torch reading the segment", for the
torch versions and import orders supported.
"""

import contextlib
import hashlib
import importlib.abc
import pickle
import sys
import threading
import types

from . import _lib as _L
from .config import (ContextDecorator, _is_hidden, _mock_restores_after_delete, hide,
                     parse_config, patch_changes, unhide)
from .errors import Error

MODULES = ("torch.compiler.config", "torch._dynamo.config")
# Options left to torch by default: in PyTorch they hold callables, which a
# segment cannot (it holds their names as strings).
EXCLUDE = ("torch.compiler.config.reorderable_logging_functions",
           "torch._dynamo.config.reorderable_logging_functions")

_lock = threading.RLock()
_pending = {}  # module name -> (Segment, exclude) to bridge it with once imported


def install(seg, modules=MODULES, exclude=EXCLUDE):
    """Serve torch's config modules ``modules`` from segment ``seg``: bridge
    those already imported now, the others when torch imports them. The
    options named in ``exclude`` (full names) stay torch's. Returns the
    names bridged now. Raises UnknownOptionError when the segment has no
    option under one of the names, TypeError when an imported module is not
    a torch config module (install_config_module()), Error when one is
    bridged to another segment already."""
    modules = list(modules)
    exclude = frozenset(exclude)
    for name in modules:
        seg.module(name)
    now = []
    with _lock:
        for name in modules:
            mod = sys.modules.get(name)
            spec = getattr(mod, "__spec__", None)
            if mod is not None and not getattr(spec, "_initializing", False):
                bridge(mod, seg, exclude)
                now.append(name)
            else:
                _pending[name] = (seg, exclude)
        if _pending and _finder not in sys.meta_path:
            sys.meta_path.insert(0, _finder)
    return now


def bridge(mod, seg, exclude=()):
    """Give torch config module ``mod`` (already executed) the class that
    serves its options declared in ``seg`` from the segment, but those
    named (full names) in ``exclude``."""
    d = mod.__dict__
    name = mod.__name__
    if isinstance(mod, TorchBridge):
        if d["_shmcfg_module"].__dict__["_shmcfg_seg"] is not seg:
            raise Error(f"{name} is served by segment "
                        f"'{d['_shmcfg_module'].__dict__['_shmcfg_seg'].name}' already")
        return
    torch_config = d.get("_config")
    if not isinstance(mod, types.ModuleType) or not isinstance(torch_config, dict):
        raise TypeError(f"{name} is not a torch config module (install_config_module())")
    shm = seg.module(name)
    props = vars(type(shm))
    served = {rel for rel in shm.__dict__["_shmcfg_opts"]
              if isinstance(props.get(rel), _L.OPTION_ATTRS) and f"{name}.{rel}" not in exclude}
    ns = {rel: props[rel] for rel in served}
    cls = type(f"ShmcfgBridge[{name}]", (TorchBridge, type(mod)), ns)
    d["_shmcfg_module"] = shm
    d["_shmcfg_served"] = frozenset(served)
    # torch's own methods (its _get_dict: hash, copies, save) see its
    # remaining options only; the segment's answer for these
    d["_shmcfg_torch_entries"] = {k: torch_config.pop(k) for k in served if k in torch_config}
    types.ModuleType.__setattr__(mod, "__class__", cls)  # past torch's __setattr__


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
            how = _pending.pop(name, None)
            if how is not None:
                bridge(sys.modules.get(name, module), *how)

    def __getattr__(self, attr):  # get_source (inspect), get_filename...
        return getattr(self._loader, attr)


_finder = _Finder()


class _Both(ContextDecorator):
    """The patch of names split between the segment and torch."""

    def __init__(self, *patches):
        self._patches = patches
        self._stacks = threading.local()

    def __enter__(self):
        stack = contextlib.ExitStack()
        for p in self._patches:
            stack.enter_context(p)
        self._stacks.__dict__.setdefault("s", []).append(stack)

    def __exit__(self, exc_type, exc, tb):
        return self._stacks.s.pop().__exit__(exc_type, exc, tb)


class TorchBridge(types.ModuleType):
    """The first base of a bridged torch config module's class: the names
    the segment declares (``_shmcfg_served``) go to the segment's module
    (``_shmcfg_module``), every other one to torch's class."""

    def _shmcfg_split(self, changes):
        served = self.__dict__["_shmcfg_served"]
        ours = {k: v for k, v in changes.items() if k in served}
        return ours, {k: v for k, v in changes.items() if k not in served}

    def __getattr__(self, name):
        d = self.__dict__
        if name in d.get("_shmcfg_served", ()):
            if _is_hidden(self, name):
                raise AttributeError(f"{self.__name__}.{name} does not exist")
            shm = d["_shmcfg_module"].__dict__
            return shm["_shmcfg_seg"]._read_with_policies(shm["_shmcfg_opts"][name])
        return super().__getattr__(name)

    def __setattr__(self, name, value):
        if name in self.__dict__.get("_shmcfg_served", ()):
            setattr(self.__dict__["_shmcfg_module"], name, value)
            unhide(self, name)
        else:
            super().__setattr__(name, value)

    def __delattr__(self, name):
        d = self.__dict__
        if name not in d.get("_shmcfg_served", ()):
            super().__delattr__(name)
        elif _mock_restores_after_delete():
            hide(self, name)  # mock sets the original back: one commit
        else:
            shm = d["_shmcfg_module"].__dict__
            shm["_shmcfg_seg"]._commit([(shm["_shmcfg_opts"][name], None)])

    def __dir__(self):
        return sorted(set(super().__dir__()) | self.__dict__["_shmcfg_served"])

    def patch(self, arg1=None, arg2=None, **kwargs):
        ours, theirs = self._shmcfg_split(patch_changes(arg1, arg2, kwargs))
        shm = self.__dict__["_shmcfg_module"]
        if not theirs:
            return shm.patch(ours)
        if not ours:
            return super().patch(theirs)
        return _Both(shm.patch(ours), super().patch(theirs))

    def _make_closure_patcher(self, **changes):
        ours, theirs = self._shmcfg_split(changes)
        a = self.__dict__["_shmcfg_module"]._make_closure_patcher(**ours) if ours else None
        b = super()._make_closure_patcher(**theirs) if theirs else None

        def change():
            ra = a() if a else None
            try:
                rb = b() if b else None
            except BaseException:
                if ra:
                    ra()
                raise

            def revert():
                try:
                    if rb:
                        rb()
                finally:
                    if ra:
                        ra()
            return revert
        return change

    def get_type(self, config_name):
        if config_name in self.__dict__["_shmcfg_served"]:
            return self.__dict__["_shmcfg_module"].get_type(config_name)
        return super().get_type(config_name)

    def _is_default(self, name):
        if name in self.__dict__["_shmcfg_served"]:
            return self.__dict__["_shmcfg_module"]._is_default(name)
        return super()._is_default(name)

    def get_hash(self):
        """BLAKE2b-128 of torch's hash of its options and the segment
        module's get_hash()."""
        return hashlib.blake2b(super().get_hash() + self.__dict__["_shmcfg_module"].get_hash(),
                               digest_size=16).digest()

    def get_config_copy(self):
        return {**super().get_config_copy(), **self.__dict__["_shmcfg_module"].get_config_copy()}

    def _shmcfg_save_ignore(self):
        try:
            return list(super().__getattr__("_save_config_ignore") or ())
        except (AttributeError, KeyError):
            return []

    def get_serializable_config_copy(self):
        return {**super().get_serializable_config_copy(),
                **self.__dict__["_shmcfg_module"]._serializable(self._shmcfg_save_ignore())}

    def save_config(self):
        return pickle.dumps(self.get_serializable_config_copy(), protocol=2)

    def save_config_portable(self, *, ignore_private_configs=True, readonly_values=False):
        try:
            prefixes = list(super().__getattr__("_cache_config_ignore_prefix") or ())
        except (AttributeError, KeyError):
            prefixes = []
        return {**super().save_config_portable(ignore_private_configs=ignore_private_configs),
                **self.__dict__["_shmcfg_module"]._portable(ignore_private_configs, prefixes)}

    def load_config(self, maybe_pickled_config):
        """As a shmcfg module's load_config() (one commit of the segment's
        names; a pickle is unpickled with builtin containers only), torch's
        own names through torch's load_config()."""
        config = parse_config(maybe_pickled_config)
        torch_names = self.__dict__["_config"]
        theirs = {k: v for k, v in config.items() if k in torch_names}
        ours = {k: v for k, v in config.items() if k not in torch_names}
        gen = self.__dict__["_shmcfg_module"].load_config(ours)
        if theirs:
            super().load_config(theirs)
        return gen

    def codegen_config(self):
        return "\n".join(filter(None, (super().codegen_config(),
                                       self.__dict__["_shmcfg_module"].codegen_config())))
