# SPDX-License-Identifier: MIT
"""The exceptions of the shmcfg package and the mapping of libshmcfg's
error codes to them (private to the package; ``shmcfg`` re-exports the
exception types).

``_error(code)`` is the one place a negative library code becomes an
exception: call it right after the failing call, in the same thread (the
detail text is thread-local).
"""

import difflib
import pickle

from . import _lib as _L


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

    def __str__(self) -> str:
        # the library's message alone: it names what failed and why (an
        # OSError's "[Errno 13] " prefix says nothing more)
        return self.strerror if self.strerror else super().__str__()


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
    ``get_type`` raises). The message names the module and the option,
    and the closest option of the module when one is close."""

    _near = None  # (module, name, names): the hint, made when the text is asked for

    def __str__(self):
        text = BaseException.__str__(self)
        if self._near:  # not at raise: hasattr() and getattr(m, x, default) probe often
            module, name, names = self._near
            self._near = None
            near = difflib.get_close_matches(name, list(names), n=1, cutoff=0.75)
            if near:
                text += f"; did you mean {module + '.' if module else ''}{near[0]}?"
                self.args = (text,)
                self.detail = text
        return text


class OptionTypeError(_OptionErrorMixin, TypeError):
    """A value of the wrong type for an option, or None for one that is not
    nullable."""


class OptionValueError(_OptionErrorMixin, ValueError):
    """A value the option refuses: out of range, not one of its choices, a
    NUL byte, conflicting implications, a bad environment variable."""


class ConfigLoadError(_OptionErrorMixin, ValueError, pickle.UnpicklingError):
    """load_config() could not read its input: not a pickled dict of
    values (PyTorch's save_config()), not the JSON of a dump, or a pickle
    naming a global other than a builtin container. A ValueError, and a
    pickle.UnpicklingError as PyTorch's load_config() raises."""


class PatchArgumentError(TypeError, AssertionError):
    """patch() called with a bad combination of arguments: a TypeError,
    and an AssertionError as PyTorch's patch() raises."""


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
del _n


def _error(code, what=None, cls=None):
    """The exception for a negative library code. Call it right after the
    failing call, in the same thread: the detail text is thread-local."""
    d = _L.errdetail()
    detail = d.decode("utf-8", "replace") if d else ""
    n = _L.errname(code)
    t = _L.strerror(code)
    text = t.decode("utf-8", "replace") if t else f"error {code}"
    if detail:  # names the segment, option, value and reason, as shmctl prints it
        # (the code's generic text, "No such file or directory" for a
        # generation too old, said less and misled: errname and the class say it)
        msg = detail
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


def _unknown(module, name, seg, names=()):
    """An unknown option: with the closest of ``names`` (the module's
    options) when one is close, as the library's resolution says it."""
    full = f"{module}.{name}" if module else name
    e = _opt_error(UnknownOptionError, "NOOPT", f"{full} does not exist (segment '{seg}')")
    if names and isinstance(name, str):
        e._near = (module, name, names)
    return e
