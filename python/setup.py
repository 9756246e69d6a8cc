# SPDX-License-Identifier: MIT
"""Builds the shmcfg binding for pip (pyproject.toml): pip install ./python

The package is pure Python (ctypes over libshmcfg) plus its C read,
shmcfg._fast (_fast.c), compiled here against the installed libshmcfg that
pkg-config finds (`pkg-config --cflags --libs shmcfg`: set PKG_CONFIG_PATH
for a library under another prefix). The build fails when pkg-config or the
library is missing, or the library is older than this source tree;
SHMCFG_PYTHON_EXT=0 builds the pure binding without the C read (and
without asking pkg-config). As `make install` does, the build records the
library's directory in shmcfg/_paths.py, where the package loads it from.

The version is the source tree's (configure.ac, one directory up).
"""

import os
import re
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
PC = "shmcfg"


def fail(msg):
    sys.exit(f"shmcfg setup.py: {msg}")


def source_version():
    path = os.path.join(HERE, os.pardir, "configure.ac")
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        fail(f"{path}: {e.strerror}: build from a shmcfg source tree (the version is its configure.ac's)")
    parts = [re.search(r"m4_define\(\[shmcfg_%s\], \[(\d+)\]\)" % p, text)
             for p in ("major", "minor", "patch")]
    if not all(parts):
        fail(f"{path}: no shmcfg_major/minor/patch definitions")
    return ".".join(m.group(1) for m in parts)


def pkg_config(*args):
    if shutil.which("pkg-config") is None:
        fail("pkg-config not found: install it (Debian: pkg-config), or set SHMCFG_PYTHON_EXT=0 "
             "for the binding without its C read")
    r = subprocess.run(["pkg-config", *args, PC], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True)
    if r.returncode != 0:
        why = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "failed"
        fail(f"pkg-config {' '.join(args)} {PC}: {why} (install libshmcfg first: make install, "
             "or Debian's libshmcfg-dev; PKG_CONFIG_PATH names another prefix's lib/pkgconfig)")
    return r.stdout.split()


VERSION = source_version()
WITH_EXT = os.environ.get("SHMCFG_PYTHON_EXT", "") != "0"
if WITH_EXT and sys.version_info < (3, 10):
    print("shmcfg setup.py: warning: the C read needs Python 3.10 or later: "
          "building the binding without it", file=sys.stderr)
    WITH_EXT = False

ext_modules = []
LIBDIR = None
if WITH_EXT:
    found = pkg_config("--modversion")[0]
    if tuple(map(int, re.findall(r"\d+", found)[:3])) < tuple(map(int, VERSION.split("."))):
        fail(f"pkg-config finds libshmcfg {found}, older than this source tree ({VERSION}): "
             "install this tree's library first (make install)")
    LIBDIR = pkg_config("--variable=libdir")[0]
    flags = pkg_config("--cflags", "--libs")
    ext_modules.append(Extension(
        "shmcfg._fast", ["shmcfg/_fast.c"],
        include_dirs=[f[2:] for f in flags if f.startswith("-I")],
        library_dirs=[f[2:] for f in flags if f.startswith("-L")],
        libraries=[f[2:] for f in flags if f.startswith("-l")],
        # as python/Makefile.inc builds it; no RUNPATH: the package loads
        # the library (from _paths.LIBDIR) before the module
        extra_compile_args=["-std=gnu11", "-fvisibility=hidden"]))
else:
    print("shmcfg setup.py: warning: SHMCFG_PYTHON_EXT=0: building the binding without its C read "
          "(attribute reads through ctypes)", file=sys.stderr)


class BuildPy(build_py):
    """Writes shmcfg/_paths.py (the libdir of the library built against), as
    make install does; without the C read, none (the dynamic loader finds
    the library)."""

    def run(self):
        super().run()
        out = os.path.join(self.build_lib, "shmcfg", "_paths.py")
        if LIBDIR is None:
            # the _paths.py that make writes in an in-place build names its configured libdir
            if os.path.exists(out):
                os.unlink(out)
            return
        with open(out, "w") as f:
            f.write(f"# Written by setup.py: the libshmcfg the package was built against.\n"
                    f"LIBDIR = {LIBDIR!r}\n")


setup(version=VERSION, ext_modules=ext_modules, cmdclass={"build_py": BuildPy})
