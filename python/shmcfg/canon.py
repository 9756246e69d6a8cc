"""The canonical encoding of option values: the one Python implementation of
it (private to the package).

lib/hash.c (doc/design.md, "The config hash", encoding version 2) digests,
with XXH3-128, each option that is neither an alias nor hash-ignored::

    u32le name length, name bytes, u8 type (1 bool .. 6 set), u8 null (0/1),
    and if not null:
    bool: u8 0/1 | int: i64le | float: IEEE-754 bits as u64le, every NaN
    as 0x7ff8000000000000 | str: u32le length + bytes |
    list, set: u32le count, then per item u32le length + bytes

(config_records()), sums the digests' low and high 64-bit halves modulo
2**64, and digests ``"shmcfg config hash v2\\n"`` + u64le low sum + u64le
high sum (config_final()). ConfigModule.get_hash() digests, with BLAKE2b-128, the
same option records of a module's own options by relative name, after a
header of its own (module_encoding()). The library exposes only the digest
of a whole segment, so the binding encodes; tests/test_python.py proves this
encoder equal to lib/hash.c's by digesting config_encoding() of a segment
with XXH3-128 and comparing it with the segment's config hash, on every
type.
"""

import math
import struct

from . import _lib as _L

CONFIG_HEADER = b"shmcfg config hash v2\n"  # lib/hash.c HASH_PREFIX
MODULE_HEADER = b"shmcfg module hash v1\n"  # get_hash(), then the module's name

_u32 = struct.Struct("<I").pack
_i64 = struct.Struct("<q").pack
_f64 = struct.Struct("<d").pack
_NAN_BITS = struct.pack("<Q", 0x7FF8000000000000)


def hashed(o):
    """Whether an option (an _Opt) is hashed: not an alias, not hash-ignored."""
    return o.alias is None and not o.flags & _L.F_HASH_IGNORED


def value(kind, v):
    """The encoding of a value of an option of type ``kind`` (a Python value
    as the binding reads it; None for null): type, null flag and value."""
    if v is None:
        return bytes((kind, 1))
    out = [bytes((kind, 0))]
    if kind == _L.BOOL:
        out.append(b"\1" if v else b"\0")
    elif kind == _L.INT:
        out.append(_i64(v))
    elif kind == _L.FLOAT:
        out.append(_NAN_BITS if math.isnan(v) else _f64(v))
    elif kind == _L.STR:
        b = v.encode("utf-8")
        out += (_u32(len(b)), b)
    else:
        items = [s.encode("utf-8") for s in v]
        if kind == _L.SET:
            items.sort()
        out.append(_u32(len(items)))
        for b in items:
            out += (_u32(len(b)), b)
    return b"".join(out)


def record(name, kind, v):
    """One option's record: u32le name length, name bytes, then value()."""
    b = name.encode("utf-8")
    return _u32(len(b)) + b + value(kind, v)


def records(items):
    """The option records of (name, kind, value) triples, in bytewise order
    of the name."""
    return b"".join(record(n, k, v) for n, k, v in
                    sorted(items, key=lambda r: r[0].encode("utf-8")))


def config_records(items):
    """What lib/hash.c digests one by one for a segment whose hashed options
    (hashed()) are the (full name, kind, value) triples ``items``."""
    return [record(n, k, v) for n, k, v in items]


def config_final(low_sum, high_sum):
    """What lib/hash.c digests last: the header and the sums of the
    records' digests (each half modulo 2**64)."""
    return CONFIG_HEADER + struct.pack("<QQ", low_sum % 2**64, high_sum % 2**64)


def module_encoding(module, items):
    """What get_hash() digests for module ``module`` whose hashed options
    are the (relative name, kind, value) triples ``items``."""
    b = module.encode("utf-8")
    return MODULE_HEADER + _u32(len(b)) + b + records(items)
