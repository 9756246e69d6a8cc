#!/bin/sh
# SPDX-License-Identifier: MIT
# shmctl(1) against the command table (tools/shmctl.c): the SYNOPSIS shows
# every command and subcommand, and the flags of each as its --help lists
# them, and no other (tests/cli/mancheck.py compares). A flag added to the
# table but not to tools/shmctl.1, or the other way round, fails here.
. "$(dirname "$0")/lib.sh"

MANPAGE=$top_srcdir/tools/shmctl.1
run "$PYTHON" "$top_srcdir/tests/cli/mancheck.py" "$MANPAGE" $SHMCTL
pass "the SYNOPSIS of shmctl(1) names the table's commands and flags, and no others" \
	test "$RC" = 0 -a -z "$OUT" -a -z "$ERR"

# the check itself: a flag missing from the page, and one the table lacks
sed 's/^\.RB \[ \\-\\-orphans \]$//' "$MANPAGE" >"$T_TMP/no-orphans.1"
run "$PYTHON" "$top_srcdir/tests/cli/mancheck.py" "$T_TMP/no-orphans.1" $SHMCTL
pass "(a flag of the table the SYNOPSIS lacks is found)" \
	test "$RC" = 0 -a "$OUT" = "gc: flag --orphans of the table is not in its SYNOPSIS"
sed 's/^\.RB \[ \\-\\-orphans \]$/.RB [ \\-\\-orphans ] [ \\-\\-frob ]/' "$MANPAGE" >"$T_TMP/frob.1"
run "$PYTHON" "$top_srcdir/tests/cli/mancheck.py" "$T_TMP/frob.1" $SHMCTL
pass "(a flag the table does not have is found)" \
	test "$RC" = 0 -a "$OUT" = "gc: SYNOPSIS names --frob, which the table does not have"

# the pages installed say the version configure was given, in the footer
version=$($SHMCTL --version | sed 's/.* //')
for m in shmctl.1 shmcfg-sync.1 shmcfg-import.1 shmcfg.3; do
	pass "man/$m: the footer says shmcfg $version" \
		grep -q "^\.TH .* \"shmcfg $version\" " "$top_builddir/man/$m"
done
t_done
