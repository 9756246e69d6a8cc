"""The canonical encoding of values (lib/hash.c, doc/design.md "The config
hash", version 1), the one Python implementation of it (private to the
package).
"""

import math
import struct

from . import _lib as _L


# canonical encoding of a value, as lib/hash.c (doc/design.md, version 1)
_u32 = struct.Struct("<I").pack
_i64 = struct.Struct("<q").pack
_f64 = struct.Struct("<d").pack
_NAN_BITS = struct.pack("<Q", 0x7FF8000000000000)


def _canon(kind, v):
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
