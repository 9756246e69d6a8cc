#!/bin/sh
# SPDX-License-Identifier: MIT
# examples/trainer.py --cluster --demo against a real etcd: three simulated
# hosts with their agents, six ranks; a `shmctl cluster set` reaches the
# hosts milliseconds apart, and every rank switches to it at the same step
# (doc/cluster.md, "Switching together at a step boundary").
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/cluster/lib.sh"

if [ -n "${SHMCFG_SANITIZERS:-}" ]; then
	# as tests/test_trainer_demo.py: python cannot load an ASan-built library
	echo "1..0 # SKIP libshmcfg is built with sanitizers"
	exit 0
fi

etcd_start
NAME=trainer-$$
# the library of this build (the example finds the source tree's package;
# in a VPATH build the library is elsewhere)
run env SHMCTL="$SHMCTL" SHMCFG_SYNC="$SHMCFG_SYNC" SHMCFG_LIBRARY="$top_builddir/lib/.libs/libshmcfg.so.3" "$PYTHON" "$top_srcdir/examples/trainer.py" \
	--cluster --demo --endpoints "$ETCD_EP" --hosts 3 --workers 6 --step-ms 20 --segment "$NAME"
pass "the demo exits 0" test "$RC" = 0
pass "every rank switched at the same step" \
	grep -Eq "^launcher: all 6 ranks on 3 hosts switched to cluster revision [0-9]+ at the same step, [0-9]+$" "$T_TMP/out"
N=$(grep -c "switching, recompile_limit=16" "$T_TMP/out")
pass "six ranks report the new value (got $N)" test "$N" = 6
STEPS=$(sed -n 's/^rank [0-9]*: step \([0-9]*\): every rank has cluster revision [1-9][0-9]*: .*/\1/p' "$T_TMP/out" | sort -u | wc -l)
pass "... all at one step" test "$STEPS" = 1
pass "the segments are gone afterwards" sh -c "! ls /dev/shm/shmcfg.$NAME-h* 2>/dev/null"

# A rank killed with SIGKILL (issue 23, item 6): without --demo the job runs
# until interrupted; the launcher sees the death at once (it waits on the
# ranks' sentinels), stops the others and exits 1 within 5 s, naming the rank.
NAME=trainer-$$-kill
rm -f "$T_TMP/rc"
(env SHMCFG_SYNC="$SHMCFG_SYNC" SHMCFG_LIBRARY="$top_builddir/lib/.libs/libshmcfg.so.3" "$PYTHON" "$top_srcdir/examples/trainer.py" \
	--cluster --endpoints "$ETCD_EP" --hosts 3 --workers 6 --step-ms 20 --segment "$NAME" \
	>"$T_TMP/kout" 2>"$T_TMP/kerr"; echo $? >"$T_TMP/rc") &
if until_true 60 sh -c "test \$(grep -c 'switching, recompile_limit=' '$T_TMP/kout') = 6"; then
	ok "the six ranks run"
	PIDS=$(sed -n 's/^launcher: rank pids //p' "$T_TMP/kout")
	VICTIM=$(echo "$PIDS" | cut -d' ' -f5)   # rank 4
	LAUNCHER=$(ps -o ppid= -p "$VICTIM" | tr -d ' ')
	T0=$(date +%s%N)
	kill -KILL "$VICTIM"
	if ! until_true 60 test -s "$T_TMP/rc"; then
		kill -KILL $LAUNCHER $PIDS 2>/dev/null  # it hangs: end it and its ranks
		echo hung >"$T_TMP/rc"
	fi
	MS=$(( ($(date +%s%N) - T0) / 1000000 ))
	echo "# the launcher exited $MS ms after the SIGKILL of rank 4"
	pass "... rank 4 killed: the launcher exits 1 (got $(cat "$T_TMP/rc"))" test "$(cat "$T_TMP/rc")" = 1
	pass "... within 5 s (took $MS ms)" test "$MS" -lt 5000
	pass "... it names the rank, its pid and the signal" \
		grep -qx "launcher: rank 4 (pid $VICTIM) was killed by SIGKILL; stopping the other ranks" "$T_TMP/kerr"
	pass "... no traceback" sh -c "! grep -q Traceback '$T_TMP/kerr'"
	LEFT=""
	for P in $PIDS; do
		if [ -e /proc/$P ] && ! grep -q '^State:.*Z' /proc/$P/status 2>/dev/null; then LEFT="$LEFT $P"; fi
	done
	pass "... no rank left (left:$LEFT)" test -z "$LEFT"
	pass "... the segments are gone" sh -c "! ls /dev/shm/shmcfg.$NAME-h* 2>/dev/null"
else
	not_ok "the six ranks run"
	diag "$(cat "$T_TMP/kout" "$T_TMP/kerr")"
fi
t_done
