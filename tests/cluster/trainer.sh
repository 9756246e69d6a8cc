#!/bin/sh
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
t_done
