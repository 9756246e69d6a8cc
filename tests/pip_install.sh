#!/bin/sh
# SPDX-License-Identifier: MIT
# pip installs the Python binding from the source tree (python/pyproject.toml,
# python/setup.py), with its C read built against the installed libshmcfg
# that pkg-config finds: this build's library is installed into a temporary
# DESTDIR (found through PKG_CONFIG_PATH and PKG_CONFIG_SYSROOT_DIR), pip
# builds the wheel from a copy of python/ with nothing downloaded
# (--no-index --no-build-isolation: this python3's setuptools), and the
# wheel goes into a fresh virtual environment (no system site-packages),
# whose python3 reads a segment made by the built shmctl through the
# installed library and the wheel's C read. Also: without the library,
# the build fails saying so; SHMCFG_PYTHON_EXT=0 builds the pure binding.
#
# Skips where python3 has no venv, setuptools or pip module, except in CI
# (SHMCFG_REQUIRE_PIP=1), where that is a failure. (regtest tier: it runs
# make install and builds a wheel.)

: "${top_srcdir:=$(cd "$(dirname "$0")/.." && pwd)}"
. "$top_srcdir/tests/cli/lib.sh"

if [ -n "${SHMCFG_SANITIZERS:-}" ]; then
	echo "1..0 # SKIP libshmcfg is built with sanitizers: an uninstrumented python cannot load it"
	exit 0
fi
for m in venv setuptools pip; do
	"$PYTHON" -c "import $m" 2>/dev/null && continue
	if [ "${SHMCFG_REQUIRE_PIP:-0}" = 1 ]; then
		echo "not ok 1 - $PYTHON has no $m module (Debian: python3-venv, python3-setuptools, python3-pip)"
		echo "1..1"
		exit 1
	fi
	echo "1..0 # SKIP $PYTHON has no $m module (Debian: python3-venv, python3-setuptools, python3-pip)"
	exit 0
done

MAKE=${MAKE:-make}
unset MAKEFLAGS MFLAGS MAKELEVEL  # a make of its own, not a part of make check's
# nothing from an index, no cache, no question to one about pip's version
PIP_NO_INDEX=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
export PIP_NO_INDEX PIP_NO_CACHE_DIR PIP_DISABLE_PIP_VERSION_CHECK
unset SHMCFG_LIBRARY SHMCFG_PYTHON_EXT PYTHONPATH

D=$T_TMP/destdir
run $MAKE -C "$top_builddir" install DESTDIR="$D"
if [ "$RC" = 0 ]; then ok "make install DESTDIR=..."; else not_ok "make install DESTDIR=..."; diag_run; t_done; fi
pc=$(find "$D" -name shmcfg.pc)
libdir=${pc%/pkgconfig/shmcfg.pc}

# The source tree's binding as a release tarball or a checkout has it (not
# this build's products: python/shmcfg/.libs, _paths.py)
S=$T_TMP/src
mkdir -p "$S/python/shmcfg/importer" && cp "$top_srcdir/configure.ac" "$S/" &&
	cp "$top_srcdir/python/pyproject.toml" "$top_srcdir/python/setup.py" \
		"$top_srcdir/python/README.md" "$S/python/" &&
	cp "$top_srcdir"/python/shmcfg/*.py "$top_srcdir/python/shmcfg/_fast.c" \
		"$top_srcdir/python/shmcfg/py.typed" "$S/python/shmcfg/" &&
	cp "$top_srcdir"/python/shmcfg/importer/*.py "$S/python/shmcfg/importer/" &&
	rm -f "$S/python/shmcfg/_paths.py" || exit 99

# pip wheel DIR [ENV...]: build the wheel of $S/python into DIR
wheel() {
	_w=$1
	shift
	rm -rf "$S/python/build" "$S/python/shmcfg.egg-info"  # pip builds in the tree
	run env "$@" "$PYTHON" -m pip wheel --no-build-isolation --no-deps -w "$_w" "$S/python"
}
# the names in a wheel, one a line
wheel_files() {
	"$PYTHON" -c 'import sys, zipfile; print("\n".join(zipfile.ZipFile(sys.argv[1]).namelist()))' "$1"
}

wheel "$T_TMP/wheel" PKG_CONFIG_PATH="$libdir/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$D"
whl=$(ls "$T_TMP"/wheel/shmcfg-*.whl 2>/dev/null)
if [ "$RC" = 0 ] && [ -n "$whl" ]; then ok "pip wheel python/ (pkg-config finds the installed library)"
else not_ok "pip wheel python/ (pkg-config finds the installed library)"; diag_run; t_done; fi
files=$(wheel_files "$whl")
for f in 'shmcfg/_fast\.cpython-[^/]*\.so' 'shmcfg/py\.typed' 'shmcfg/_paths\.py' 'shmcfg/segment\.py' \
	'shmcfg/importer/__main__\.py'; do
	if printf '%s\n' "$files" | grep -qx "$f"; then ok "the wheel holds $f"
	else not_ok "the wheel holds $f"; diag "$files"; fi
done
if printf '%s\n' "$files" | grep -q '\.c$'; then not_ok "the wheel holds no C source"; diag "$files"
else ok "the wheel holds no C source"; fi

V=$T_TMP/venv
run "$PYTHON" -m venv "$V"
if [ "$RC" = 0 ]; then ok "python3 -m venv"; else not_ok "python3 -m venv"; diag_run; t_done; fi
run "$V/bin/python" -m pip install --no-deps "$whl"
if [ "$RC" = 0 ]; then ok "pip install the wheel in the venv"; else not_ok "pip install the wheel in the venv"; diag_run; fi

seg name pip
t_rc "shmctl create" 0 shmctl create "$name" --force --no-env
t_rc "shmctl set" 0 shmctl set "$name" recompile_limit=16
# From here on the venv alone: no build tree, no LD_LIBRARY_PATH
cd "$T_TMP" || exit 99
run env -u LD_LIBRARY_PATH "$V/bin/python" -c '
import os, sys
import shmcfg
from shmcfg import _lib
venv, lib = (os.path.realpath(p) for p in sys.argv[1:3])
def under(p, d):
    return os.path.realpath(p).startswith(d + os.sep)
assert under(shmcfg.__file__, venv), shmcfg.__file__
assert os.path.realpath(shmcfg.library_path) == lib, shmcfg.library_path
assert shmcfg.fast_extension and under(shmcfg.fast_extension, venv), _lib.fast_info
m = shmcfg.attach(sys.argv[3]).module("torch._dynamo.config")
assert isinstance(type(m).__dict__["recompile_limit"], _lib.fast.Getter)
print(m.recompile_limit)
' "$V" "$libdir/libshmcfg.so.3" "$name"
if [ "$RC" = 0 ] && [ "$OUT" = 16 ]; then
	ok "the venv's shmcfg reads the segment through the installed library and its C read"
else
	not_ok "the venv's shmcfg reads the segment through the installed library and its C read"; diag_run
fi
# the importer, as a module of the venv's package
printf 'retries: int = 3\n' >"$T_TMP/app_config.py"
run env -u LD_LIBRARY_PATH "$V/bin/python" -m shmcfg.importer --module app.config "$T_TMP/app_config.py" --format json
case $RC$OUT in
0*'"name": "app.config.retries"'*) ok "python -m shmcfg.importer in the venv" ;;
*) not_ok "python -m shmcfg.importer in the venv"; diag_run ;;
esac
run "$V/bin/python" -c 'import os, shmcfg; print(os.path.isfile(os.path.join(os.path.dirname(shmcfg.__file__), "py.typed")))'
t_name="py.typed installed (PEP 561)"
if [ "$OUT" = True ]; then ok "$t_name"; else not_ok "$t_name"; diag_run; fi

# No libshmcfg for pkg-config: the build stops, saying what is missing
wheel "$T_TMP/nowheel" PKG_CONFIG_PATH= PKG_CONFIG_LIBDIR="$T_TMP/none"
case $RC$OUT$ERR in
[1-9]*"shmcfg setup.py: pkg-config --modversion shmcfg: "*"install libshmcfg first"*)
	ok "without the library, the build fails naming it" ;;
*) not_ok "without the library, the build fails naming it"; diag_run ;;
esac

# SHMCFG_PYTHON_EXT=0: the pure binding, pkg-config not asked
wheel "$T_TMP/pure" SHMCFG_PYTHON_EXT=0 PKG_CONFIG_LIBDIR="$T_TMP/none"
pure=$(ls "$T_TMP"/pure/shmcfg-*-py3-none-any.whl 2>/dev/null)
if [ "$RC" = 0 ] && [ -n "$pure" ] && ! wheel_files "$pure" | grep -q '_fast\|_paths'; then
	ok "SHMCFG_PYTHON_EXT=0 builds the pure binding (no C read)"
else
	not_ok "SHMCFG_PYTHON_EXT=0 builds the pure binding (no C read)"; diag_run
fi
t_done
