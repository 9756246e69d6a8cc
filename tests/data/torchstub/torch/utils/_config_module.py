"""The stand-in's config module mechanism: the interface of torch's
(install_config_module, Config, the module methods shmcfg's bridge calls),
written for shmcfg's tests. Values live in this process (per module entry),
``del`` sets an entry's hide flag as torch's does, patches restore the
prior value on exit."""

import contextlib
import copy
import hashlib
import importlib
import pickle
import types
import warnings

_UNSET = object()


class Config:
    def __init__(self, default=_UNSET, alias=None, deprecated=False, deprecation_message=None):
        self.default = default
        self.alias = alias
        self.deprecated = deprecated
        self.deprecation_message = deprecation_message


class _Entry:
    def __init__(self, c):
        self.default = c.default
        self.alias = c.alias
        self.deprecated = c.deprecated
        self.message = c.deprecation_message
        self.warned = False
        self.value = _UNSET
        self.hide = False


def install_config_module(module):
    entries = {}
    for key, value in list(vars(module).items()):
        if key.startswith("__") or isinstance(value, (types.ModuleType, types.FunctionType,
                                                      type)):
            continue
        if not isinstance(value, Config):
            value = Config(default=value)
        entries[key] = _Entry(value)
        delattr(module, key)
    module._config = entries
    module.__class__ = ConfigModule


class ConfigModule(types.ModuleType):
    def _warn(self, name, e):
        if e.deprecated and not e.warned:
            e.warned = True
            msg = f"{self.__name__}.{name} is deprecated"
            if e.message:
                msg += f" and {e.message}"
            warnings.warn(msg + ". It will be removed in a future version of PyTorch.",
                          FutureWarning, stacklevel=3)

    def _alias(self, e):
        mod, _, attr = e.alias.rpartition(".")
        return importlib.import_module(mod), attr

    def __getattr__(self, name):
        e = self.__dict__["_config"].get(name)
        if e is None or e.hide:
            raise AttributeError(f"{self.__name__}.{name} does not exist")
        self._warn(name, e)
        if e.alias:
            return getattr(*self._alias(e))
        if e.value is not _UNSET:
            return e.value
        if isinstance(e.default, (list, set, dict)):
            e.value = copy.deepcopy(e.default)
            return e.value
        return e.default

    def __setattr__(self, name, value):
        e = self._config.get(name)
        if e is None:
            raise AttributeError(f"{self.__name__}.{name} does not exist")
        self._warn(name, e)
        if e.alias:
            setattr(*self._alias(e), value)
        else:
            e.value = value
            e.hide = False

    def __delattr__(self, name):
        e = self._config[name]
        e.value = _UNSET
        e.hide = True

    def _get_dict(self, ignored=(), prefixes=(), skip_default=False):
        out = {}
        for k, e in self._config.items():
            if e.alias or k in ignored or k.startswith(tuple(prefixes)):
                continue
            if skip_default and e.value is _UNSET:
                continue
            out[k] = copy.deepcopy(e.default if e.value is _UNSET else e.value)
        return out

    def get_type(self, name):
        return type(self._config[name].default)

    def _is_default(self, name):
        return self._config[name].value is _UNSET

    def patch(self, arg1=None, arg2=None, **kwargs):
        changes = {arg1: arg2} if arg2 is not None else (arg1 or kwargs)
        config = self

        class Patch(contextlib.ContextDecorator):
            def __init__(self):
                self.prior = []

            def __enter__(self):
                self.prior.append({k: getattr(config, k) for k in changes})
                for k, v in changes.items():
                    setattr(config, k, v)

            def __exit__(self, *exc):
                for k, v in self.prior.pop().items():
                    setattr(config, k, v)
        return Patch()

    def _make_closure_patcher(self, **changes):
        def change():
            prior = {k: getattr(self, k) for k in changes}
            for k, v in changes.items():
                setattr(self, k, v)

            def revert():
                for k, v in prior.items():
                    setattr(self, k, v)
            return revert
        return change

    def get_hash(self):
        return hashlib.md5(repr(sorted(self._get_dict().items())).encode()).digest()

    def get_config_copy(self):
        return self._get_dict()

    def get_serializable_config_copy(self):
        return self._get_dict(ignored=getattr(self, "_save_config_ignore", []))

    def save_config(self):
        return pickle.dumps(self.get_serializable_config_copy(), protocol=2)

    def save_config_portable(self, *, ignore_private_configs=True, readonly_values=False):
        return self._get_dict(prefixes=["_"] if ignore_private_configs else [])

    def load_config(self, maybe_pickled_config):
        config = maybe_pickled_config
        if not isinstance(config, dict):
            config = pickle.loads(config)
        for k, v in config.items():
            if k in self._config:
                setattr(self, k, v)
            else:
                warnings.warn(f"key {k} with value {v} is not understood by this config")

    def codegen_config(self):
        return "\n".join(f"{self.__name__}.{k} = {v!r}"
                         for k, v in self._get_dict(skip_default=True).items())
