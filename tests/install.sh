#!/bin/sh
# SPDX-License-Identifier: MIT
# make install puts everything the README points to in place, and what it
# installed works from there: `make install DESTDIR=TMP` of this build tree,
# then each file is checked, and the installed shmctl, shmcfg-import and
# Python package run against the installed libshmcfg (LD_LIBRARY_PATH and
# PYTHONPATH into TMP; the build tree is never on those paths).
# (regtest tier: it runs make, and relinks the programs.)

. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/cli/lib.sh"

D=$T_TMP/destdir
MAKE=${MAKE:-make}
# a make of its own, not a part of the make check that runs this test
unset MAKEFLAGS MFLAGS MAKELEVEL
# the configured directories, as make install expands them
mkvar() {
	$MAKE -s -C "$top_builddir" --no-print-directory -f Makefile -f - print-var V="$1" <<'MK'
print-var:
	@echo '$($(V))'
MK
}
prefix=$(mkvar prefix) bindir=$(mkvar bindir) libdir=$(mkvar libdir)
mandir=$(mkvar mandir) docdir=$(mkvar docdir) includedir=$(mkvar includedir)
pkgpythondir=$(mkvar pkgpythondir) pythondir=$(mkvar pythondir)
bashcompletiondir=$(mkvar bashcompletiondir) unitdir=$(mkvar systemdsystemunitdir)
pkgconfigdir=$(mkvar pkgconfigdir)

run $MAKE -C "$top_builddir" install DESTDIR="$D"
if [ "$RC" = 0 ]; then ok "make install DESTDIR=..."; else not_ok "make install DESTDIR=..."; diag_run; t_done; fi

for f in "$bindir/shmctl" "$bindir/shmcfg-import" "$bindir/shmcfg-sync" \
	"$libdir/libshmcfg.so.3" "$libdir/libshmcfg.so" "$includedir/shmcfg.h" "$includedir/shmcfg/read.h" \
	"$pkgconfigdir/shmcfg.pc" \
	"$mandir/man1/shmctl.1" "$mandir/man1/shmcfg-import.1" "$mandir/man1/shmcfg-sync.1" \
	"$mandir/man3/shmcfg.3" \
	"$docdir/README.md" "$docdir/design.md" "$docdir/schema-format.md" "$docdir/cluster.md" \
	"$docdir/reliability.md" "$docdir/benchmarks.md" \
	"$docdir/examples/README.md" "$docdir/examples/trainer.py" \
	"$bashcompletiondir/shmctl" "$unitdir/shmcfg-sync@.service" \
	"$pkgpythondir/__init__.py" "$pkgpythondir/_lib.py" "$pkgpythondir/_paths.py" \
	"$pkgpythondir/py.typed"; do
	if [ -f "$D$f" ]; then ok "installed $f"; else not_ok "installed $f"; fi
done
# every module of the source package is installed (a new one not listed in
# python/Makefile.inc would be missing)
for m in "$top_srcdir"/python/shmcfg/*.py; do
	b=${m##*/}
	if [ -f "$D$pkgpythondir/$b" ]; then ok "installed python module $b"; else not_ok "installed python module $b"; fi
done
for x in shmctl shmcfg-import shmcfg-sync; do
	if [ -x "$D$bindir/$x" ]; then ok "$x is executable"; else not_ok "$x is executable"; fi
done

# From here on, only what was installed.
LD_LIBRARY_PATH=$D$libdir PYTHONPATH=$D$pythondir
export LD_LIBRARY_PATH PYTHONPATH
unset SHMCFG_LIBRARY
cd "$T_TMP" || exit 99
name=install-$$
T_SEGS="$name"
SHMCTL=$D$bindir/shmctl
run sh -c "ldd '$SHMCTL' | grep libshmcfg"
case $OUT in
*"$D$libdir/libshmcfg.so.3"*) ok "the installed shmctl links the installed library" ;;
*) not_ok "the installed shmctl links the installed library"; diag_run ;;
esac
t_rc "installed shmctl create" 0 "$SHMCTL" create "$name" --force --no-env
t_out "installed shmctl get" 8 "$SHMCTL" get "$name" recompile_limit
t_rc "installed shmctl set" 0 "$SHMCTL" set "$name" recompile_limit=16

# The Python package and shmcfg-import load the library through ctypes, which
# an uninstrumented python cannot do with a sanitizer build (as test_python.py
# says); the plain build runs them.
if [ -n "${SHMCFG_SANITIZERS:-}" ]; then
	skip "the installed python package and shmcfg-import: libshmcfg is built with sanitizers"
else
# The package imports from DESTDIR and maps the library installed there.
run "$PYTHON" -c '
import os, sys, shmcfg
from shmcfg import _lib
assert os.path.realpath(shmcfg.__file__).startswith(os.path.realpath(sys.argv[1])), shmcfg.__file__
maps = [l.split()[-1] for l in open("/proc/self/maps") if "libshmcfg" in l]
assert maps and all(p.startswith(os.path.realpath(sys.argv[1])) for p in maps), maps
print(shmcfg.attach(sys.argv[2]).module("torch._dynamo.config").recompile_limit)
' "$D" "$name"
if [ "$RC" = 0 ] && [ "$OUT" = 16 ]; then
	ok "installed python package reads the segment through the installed library"
else
	not_ok "installed python package reads the segment through the installed library"; diag_run
fi

# the C read, when built: installed, and the one the installed package uses
if [ -f "$top_builddir/python/shmcfg/_fast.la" ]; then
	run env -u SHMCFG_PYTHON_EXT "$PYTHON" -c '
import os, sys, shmcfg
assert shmcfg.fast_extension and os.path.realpath(shmcfg.fast_extension).startswith(
    os.path.realpath(sys.argv[1])), shmcfg.fast_extension
print(shmcfg.attach(sys.argv[2]).module("torch._dynamo.config").recompile_limit)
' "$D" "$name"
	if [ "$RC" = 0 ] && [ "$OUT" = 16 ]; then
		ok "installed python package reads through its installed C read"
	else
		not_ok "installed python package reads through its installed C read"; diag_run
	fi
fi

cat >"$T_TMP/config.py" <<'PY'
retries: int = 3
verbose = False
PY
run "$D$bindir/shmcfg-import" --module app.config "$T_TMP/config.py" -o "$T_TMP/app.yaml"
if [ "$RC" = 0 ]; then ok "installed shmcfg-import"; else not_ok "installed shmcfg-import"; diag_run; fi
t_rc "installed shmctl create --schema (the imported file)" 0 "$SHMCTL" create "$name" --force --no-env --schema "$T_TMP/app.yaml"
t_out "read back an imported option" 3 "$SHMCTL" get "$name" app.config.retries

fi

# man 3 shmcfg finds the C API page (where man is installed)
if command -v man >/dev/null 2>&1; then
	run env MANPATH="$D$mandir" man -w 3 shmcfg
	case $OUT in
	"$D$mandir/man3/shmcfg.3"*) ok "man 3 shmcfg" ;;
	*) not_ok "man 3 shmcfg"; diag_run ;;
	esac
else
	skip "man is not installed"
fi
t_done
