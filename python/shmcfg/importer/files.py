# SPDX-License-Identifier: MIT
"""Input files, read whole and bounded: a Python source or a schema file is
a regular file of at most SOURCE_MAX or SCHEMA_FILE_MAX bytes."""

import os
import stat

SOURCE_MAX = 16 << 20  # bytes of a Python source: torch's config modules are < 100 KiB
SCHEMA_FILE_MAX = 64 << 20  # bytes of a schema file: the library's SCHEMA_FILE_MAX


def read_regular(path, limit, what):
    """The bytes of the regular file `path`, at most `limit` of them; raise
    OSError, or ValueError saying why the file is refused. Opened
    non-blocking and checked before reading, as the library opens a schema
    file: a FIFO would block for ever, /dev/zero would fill the memory."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError("is %s, not %s" % (
                "a directory" if stat.S_ISDIR(st.st_mode) else
                "a FIFO" if stat.S_ISFIFO(st.st_mode) else "a device or socket", what))
        if st.st_size > limit:
            raise ValueError("%d bytes: %s is at most %d MiB" % (st.st_size, what, limit >> 20))
        chunks, n = [], 0
        while n <= limit:  # one byte more than the cap: a file that grew is refused
            b = os.read(fd, min(limit + 1 - n, 1 << 20))
            if not b:
                break
            chunks.append(b)
            n += len(b)
        if n > limit:
            raise ValueError("grew past %d MiB while it was read" % (limit >> 20))
        return b"".join(chunks)
    finally:
        os.close(fd)

