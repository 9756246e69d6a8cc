#!/bin/sh
# SPDX-License-Identifier: MIT
# The ABI: the built library against the ABI of each release under this
# soname, as abidw recorded it (abi/libshmcfg-VERSION.abi, one per release:
# `make abi-dump` writes the current one). abidiff must find nothing but
# added functions (and the changes abi/suppressions lists, each with its
# reason): no function or variable removed or changed, no struct
# changed in size or layout (a public struct grows only through its *_sized
# call: include/shmcfg.h.in, "Structs that grow"). Prints TAP.
# Needs abidiff (abigail-tools): skipped without it, unless
# SHMCFG_REQUIRE_ABIGAIL=1 (CI).
set -u
: "${top_srcdir:=.}" "${top_builddir:=.}"
so="$top_builddir/lib/.libs/libshmcfg.so"
if ! command -v abidiff > /dev/null 2>&1; then
	if [ "${SHMCFG_REQUIRE_ABIGAIL:-0}" = 1 ]; then
		echo "1..1"
		echo "not ok 1 - abidiff (abigail-tools) is missing, and SHMCFG_REQUIRE_ABIGAIL=1"
		exit 1
	fi
	echo "1..0 # SKIP abidiff (abigail-tools) not installed"
	exit 0
fi
set -- "$top_srcdir"/abi/libshmcfg-*.abi
if [ ! -r "$1" ]; then
	echo "1..1"
	echo "not ok 1 - no ABI dump in $top_srcdir/abi"
	exit 1
fi
echo "1..$#"
n=0
fails=0
for dump in "$@"; do
	n=$((n + 1))
	rel=${dump##*/libshmcfg-}
	rel=${rel%.abi}
	out=$(abidiff --no-added-syms --suppressions "$top_srcdir/abi/suppressions" \
		--headers-dir2 "$top_builddir/include" "$dump" "$so" 2>&1)
	rc=$?
	if [ $rc -eq 0 ]; then
		echo "ok $n - the library keeps the ABI of $rel"
	else
		echo "not ok $n - the library breaks the ABI of $rel (abidiff exit $rc)"
		printf '%s\n' "$out" | sed 's/^/#   /'
		fails=1
	fi
done
exit $fails
