#!/bin/sh
# SPDX-License-Identifier: MIT
# The fault points (SHMCFG_FAULT, lib/base/fault.c) exist only in the test copy of
# the library that the test programs link: the installed library and shmctl
# ignore SHMCFG_FAULT and carry none of it.
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/cli/lib.sh"

seg F faults
DYN=torch._dynamo.config
SO="$top_builddir/lib/.libs/libshmcfg.so"
POINTS='SHMCFG_FAULT|commit\.(locked|chosen|busy|slot|written|stamped|published)|create\.(opened|allocated|schema)|reap\.(locked|cleared)|claim\.locked'

run shmctl create -q "$F"
pass "create" test "$RC" = 0

# A library with fault points raises SIGKILL there (exit 137).
export SHMCFG_FAULT=commit.locked
run shmctl set -q "$F" "$DYN.recompile_limit=17"
unset SHMCFG_FAULT
pass "set with SHMCFG_FAULT=commit.locked: exit 0" test "$RC" = 0
t_out "the value is set" "17" shmctl get "$F" "$DYN.recompile_limit"
for p in commit.chosen commit.busy commit.slot commit.synced commit.in_cell commit.chunk commit.written commit.stamped commit.published; do
	export SHMCFG_FAULT="$p:1"
	run shmctl set -q "$F" "$DYN.recompile_limit=18"
	unset SHMCFG_FAULT
	pass "set with SHMCFG_FAULT=$p:1: exit 0" test "$RC" = 0
done
export SHMCFG_FAULT=create.opened
run shmctl create -q --force "$F"
unset SHMCFG_FAULT
pass "create with SHMCFG_FAULT=create.opened: exit 0" test "$RC" = 0

if [ ! -f "$SO" ]; then
	skip "no $SO (a static build?)"
	skip "no $SO"
elif ! command -v nm >/dev/null 2>&1 || ! command -v strings >/dev/null 2>&1; then
	skip "nm or strings not found (binutils)"
	skip "nm or strings not found (binutils)"
else
	run sh -c 'nm -D "$1" && nm "$1"' nm "$SO" # dynamic and static symbols
	if [ "$RC" = 0 ] && ! grep -q 'shmcfg__fault' "$T_TMP/out"; then
		ok "libshmcfg.so has no shmcfg__fault symbol"
	else
		not_ok "libshmcfg.so has no shmcfg__fault symbol"
		diag "nm exit status $RC" "$(grep 'shmcfg__fault' "$T_TMP/out")"
	fi
	run strings -a "$SO"
	if [ "$RC" = 0 ] && ! grep -Eq "$POINTS" "$T_TMP/out"; then
		ok "libshmcfg.so holds no SHMCFG_FAULT text and no fault point name"
	else
		not_ok "libshmcfg.so holds no SHMCFG_FAULT text and no fault point name"
		diag "$(grep -E "$POINTS" "$T_TMP/out")"
	fi
fi
t_done
