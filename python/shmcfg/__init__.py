# SPDX-License-Identifier: MIT
"""shmcfg: a program's configuration in POSIX shared memory, for Python.

A ctypes binding of libshmcfg (standard library only). A *segment* holds a
typed option table that every process of the host sees; a namespace of it
(``torch._dynamo.config``) behaves like a PyTorch config module::

    import shmcfg
    seg = shmcfg.attach("job42")               # or shmcfg.create("job42")
    config = seg.module("torch._dynamo.config")
    config.recompile_limit                     # 8: a read of shared memory
    config.recompile_limit = 16                # one commit, seen by every process
    with config.patch(recompile_limit=4):      # this thread only
        ...
    seg.generation, seg.config_hash            # what `shmctl hash` prints
    seg.wait(after=seg.generation, timeout=1)  # block until the next commit

A segment removed or replaced (``shmctl rm``, ``shmctl create --force``,
``shmcfg.unlink``) is *retired*: reads keep answering its last values,
``seg.retired`` is True and ``seg.wait()`` raises RetiredError;
``seg.reattach()`` moves the Segment (and its modules) to the segment now
of that name.

Differences from PyTorch's ``torch.utils._config_module``:

- An assignment commits to the segment at once (every process sees it). An
  assignment made inside ``patch()`` commits too (the seed keeps it in the
  thread and drops it when the patch ends): the patching thread keeps reading
  its patched value until the patch ends, then reads the committed one.
- Patches are per OS thread (the seed's are per ``contextvars`` context: in
  one thread, asyncio tasks share them here).
- ``del m.x`` clears the option's user layer (one commit) and leaves it
  readable; only unittest.mock's patch exit gets the seed's hide flag, so
  its restore is one commit of the original value.
- A list or set read is a CommittingList/CommittingSet copy whose in-place
  changes commit (every process sees them).
- ``save_config()`` is the seed's pickle; ``load_config()`` takes it (its
  unpickler allows builtin containers only), a dict, or the JSON of
  ``seg.dump()``, as one commit.
- Values are typed by the schema: bool options take bool only, int options int
  (not bool), float options int or float, str options str, list and set
  options a list, tuple, set or frozenset of str; None only where the option
  is nullable (``Optional[...]``). Others raise TypeError before anything is
  sent; range and choice violations raise ValueError with the library's text.
- ``get_hash()`` is a BLAKE2b-128 digest of this module's options in the
  library's canonical encoding (doc/design.md), not an MD5 of a repr; it
  reflects the calling thread's patches, as in the seed. ``seg.config_hash``
  is the segment-wide XXH3-128 hash that ``shmctl hash`` prints.

Reads: an attribute read checks one word of the segment header (the
current generation and slot, read directly from shared memory) and returns
the value it cached for that generation; the first read after a commit asks
the library. A published generation never changes, so a cached value is
exact. While any thread of the process has a patch open on the segment,
every read asks the library (which applies the calling thread's patches).
Lists and sets are returned as fresh copies.
``shmcfg.torch.install(seg)`` makes torch's own config modules read the
segment (python/README.md). ``SHMCFG_PYTHON_FAST=0`` (or
``fast_reads=False``) makes every read ask the library. The optional C
extension ``shmcfg._fast`` does these reads without a Python frame (about 4x
faster; ``fast_extension`` is its path, or None); the ctypes getters, its
fallback, give the same results (``SHMCFG_PYTHON_EXT=0`` leaves it out).

Library loading: see ``shmcfg._lib`` (``$SHMCFG_LIBRARY``, the build tree,
the installed ``libdir``, the dynamic loader).

Modules (private; everything public is re-exported here): ``_lib`` the
ctypes declarations, ``errors`` the exceptions and the error-code mapping,
``values`` options and value conversion to and from the C struct, ``canon``
the canonical encoding of values (the config hash's, from the library),
``segment`` attach(), create(), unlink(), Segment and Transaction, ``config``
the config modules, ``schema`` schemas as Python values (Schema,
SchemaOption) and the schema file writer (schema_yaml(), the library's). The package
``shmcfg.importer`` is the shmcfg-import command (``python3 -m
shmcfg.importer``).
"""

from typing import Optional

from . import _lib as _L
from .config import ConfigModule, ContextDecorator, SubConfigProxy
from .errors import (ConfigLoadError, Error, ExistsError, InvalidArgumentError, NotFoundError,
                     OptionTypeError, OptionValueError, OwnerError, PatchArgumentError,
                     PermissionDeniedError, RetiredError, UnknownOptionError)
from .mutable import CommittingList, CommittingSet
from .schema import Schema, SchemaOption, schema_yaml
from .segment import Current, Segment, Snapshot, Transaction, attach, create, resize, unlink
from .values import OptionInfo

__all__ = [
    "attach", "create", "resize", "unlink", "Segment", "Snapshot", "ConfigModule", "SubConfigProxy",
    "Transaction", "Error", "NotFoundError", "ExistsError", "PermissionDeniedError",
    "OwnerError", "RetiredError",
    "InvalidArgumentError", "UnknownOptionError", "OptionTypeError", "OptionValueError",
    "ConfigLoadError", "PatchArgumentError", "CommittingList", "CommittingSet",
    "library_version", "library_path", "fast_extension", "Current", "OptionInfo",
    "ContextDecorator", "Schema", "SchemaOption", "schema_yaml",
]

_ver = _L.version(None, None, None)
library_version: str = _ver.decode() if _ver else "?"
library_path: str = _L.path
# the path of shmcfg._fast (attribute reads in C), or None: reads through ctypes
fast_extension: Optional[str] = _L.fast_info if _L.fast is not None else None
__version__ = library_version

# The public classes and functions keep the name they had before the package
# was split: tracebacks, reprs and pickles say shmcfg.NotFoundError, not
# shmcfg.errors.NotFoundError.
for _o in (ConfigModule, ContextDecorator, SubConfigProxy, ConfigLoadError, PatchArgumentError,
           CommittingList, CommittingSet, Error, ExistsError,
           InvalidArgumentError, NotFoundError, OptionTypeError, OptionValueError, OwnerError,
           PermissionDeniedError, RetiredError, UnknownOptionError, Current, Segment, Snapshot,
           Transaction, attach, create, unlink, OptionInfo, Schema, SchemaOption, schema_yaml):
    _o.__module__ = __name__
del _o
