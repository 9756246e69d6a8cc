# SPDX-License-Identifier: MIT
"""The canonical encoding of option values, as the library writes it
(private to the package).

lib/slot/hash.c (doc/design.md, "The config hash", encoding version 2) digests,
with XXH3-128, one record of each option that is neither an alias nor
hash-ignored::

    u32le name length, name bytes, u8 type (1 bool .. 6 set), u8 null (0/1),
    and if not null:
    bool: u8 0/1 | int: i64le | float: IEEE-754 bits as u64le, every NaN
    as 0x7ff8000000000000 | str: u32le length + bytes |
    list, set: u32le count, then per item u32le length + bytes

sums the digests' low and high 64-bit halves modulo 2**64, and digests
``"shmcfg config hash v2\\n"`` + u64le low sum + u64le high sum
(config_final()). The records come from the library's one encoder,
shmcfg_value_record() (record()): ConfigModule.get_hash() digests, with
BLAKE2b-128, the records of a module's own options by relative name, after
a header of its own (module_encoding()). tests/test_python.py digests
config_records() of a segment with XXH3-128 and compares the result with the
segment's config hash, on every type.
"""

import ctypes
import errno
import struct

from . import _lib as _L
from .errors import _error
from .values import _convert

CONFIG_HEADER = b"shmcfg config hash v2\n"  # lib/slot/hash.c HASH_PREFIX
MODULE_HEADER = b"shmcfg module hash v1\n"  # get_hash(), then the module's name

_u32 = struct.Struct("<I").pack


def hashed(o):
    """Whether an option (an _Opt) is hashed: not an alias, not hash-ignored."""
    return o.alias is None and not o.flags & _L.F_HASH_IGNORED


class _Kind:
    """What _convert() needs of an option: its type, and null allowed."""
    __slots__ = ("kind", "nullable")

    def __init__(self, kind):
        self.kind, self.nullable = kind, True


def record(name, kind, v):
    """One option's record (shmcfg_value_record()): option ``name`` of type
    ``kind`` holding ``v`` (a Python value as the binding reads it; None for
    null)."""
    if "\0" in name:  # ctypes would pass the name up to it: another option's record
        raise ValueError(f"option name {name!r} holds a NUL character")
    cv = _convert(_Kind(kind), v, name)
    b = name.encode("utf-8")
    need = ctypes.c_size_t()
    buf = ctypes.create_string_buffer(64)
    r = _L.value_record(b, ctypes.byref(cv.c), buf, len(buf), ctypes.byref(need))
    if r == -errno.ENOSPC:
        buf = ctypes.create_string_buffer(need.value)
        r = _L.value_record(b, ctypes.byref(cv.c), buf, len(buf), ctypes.byref(need))
    if r < 0:
        raise _error(r, name)
    return buf.raw[:need.value]


def records(items):
    """The option records of (name, kind, value) triples, in bytewise order
    of the name."""
    return b"".join(record(n, k, v) for n, k, v in
                    sorted(items, key=lambda r: r[0].encode("utf-8")))


def config_records(items):
    """What lib/slot/hash.c digests one by one for a segment whose hashed options
    (hashed()) are the (full name, kind, value) triples ``items``."""
    return [record(n, k, v) for n, k, v in items]


def config_final(low_sum, high_sum):
    """What lib/slot/hash.c digests last: the header and the sums of the
    records' digests (each half modulo 2**64)."""
    return CONFIG_HEADER + struct.pack("<QQ", low_sum % 2**64, high_sum % 2**64)


def module_encoding(module, items):
    """What get_hash() digests for module ``module`` whose hashed options
    are the (relative name, kind, value) triples ``items``."""
    b = module.encode("utf-8")
    return MODULE_HEADER + _u32(len(b)) + b + records(items)
