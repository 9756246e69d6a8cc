#!/bin/sh
# SPDX-License-Identifier: MIT
# shmcfg-sync under a prefix full of keys (issue 22; the slow tier): with
# 40,000 junk keys a revision costs what it costs with none and a load is
# linear (CPU time measured side by side: ratios, not times), and more than
# 64 MiB under opt/ (one range answer over the client's cap) still loads,
# in pages.
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/cluster/lib.sh"

GW="$PYTHON $top_srcdir/tests/cluster/gw.py"
etcd_start
SOCK=$ETCD_DIR/client.sock:1

# cpu_ms PID: the process's CPU time so far (user + system), in ms
cpu_ms() {
	awk -v hz="$(getconf CLK_TCK)" '{ print int(($14 + $15) * 1000 / hz) }' "/proc/$1/stat"
}

$GW "$SOCK" put-batch "${P}opt/zz.each." 1000 1 >/dev/null
# a revision's cost: an agent on 40,000 junk keys against one on none
# (CPU time, measured side by side: a ratio, not a time)
$GW "$SOCK" put-batch "${P}opt/zz.batch." 39000 1 >/dev/null
CLEAN=/shmcfg/v1/${CLUSTER}x/
new_seg J2 junk2
new_seg C clean
sync_start j2 "$J2" --host h4
agent_start c --endpoints "$ETCD_EP" --cluster "${CLUSTER}x" --host h5 "$C"
pass "40,000 junk keys: the agent loads them" wait_log 180 j2 "loaded 40[0-9]* keys"
pass "... a clean agent beside it" wait_log 60 c "watching from revision"
eval "PJ=\$AGENT_PID_j2 PC=\$AGENT_PID_c"
J0=$(cpu_ms "$PJ") C0=$(cpu_ms "$PC")
for p in "$P" "$CLEAN"; do
	$GW "$SOCK" put-each "${p}opt/app.ratio" 300 0.25 >/dev/null
	ectl put -- "${p}opt/app.limit" 42 >/dev/null
done
pass "300 revisions: the junk agent applied them" wait_get 180 "$J2" app.limit 42
pass "... the clean one too" wait_get 180 "$C" app.limit 42
J1=$(cpu_ms "$PJ") C1=$(cpu_ms "$PC")
diag "CPU for 300 revisions: $((J1 - J0)) ms with 40,000 junk keys, $((C1 - C0)) ms with none"
# before: 166x at 20,000 keys; the same work now, within noise
pass "... costing no more than with none (within 4x + 100 ms)" \
	test $((J1 - J0)) -le $(( 4 * (C1 - C0) + 100 ))
agent_stop j2
agent_stop c

# a load's cost: 40,000 keys against 10,000 (linear: at most 4x; it was
# quadratic, 16x: 60,000 keys took 18 s against 0.04 s with none)
new_seg L load
once_cpu() {
	"$PYTHON" -c 'import resource, subprocess, sys
rc = subprocess.run(sys.argv[1:], stderr=subprocess.DEVNULL).returncode
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(int((r.ru_utime + r.ru_stime) * 1000) if rc == 0 else -1)' \
		$SHMCFG_SYNC --once --endpoints "$ETCD_EP" --cluster "$CLUSTER" --host h6 "$L"
}
L40=$(once_cpu)
ectl del --prefix "${P}opt/zz.batch." >/dev/null
$GW "$SOCK" put-batch "${P}opt/zz.small." 9000 1 >/dev/null
L10=$(once_cpu)
diag "CPU of a load: $L40 ms for 40,000 keys, $L10 ms for 10,000"
pass "a load of 40,000 keys: done" test "$L40" -ge 0
pass "... costing at most 8x a load of 10,000 (linear)" test "$L10" -ge 0 -a "$L40" -le $((8 * L10 + 100))
ectl del --prefix "${P}opt/zz." >/dev/null

# ---- 5: more than 64 MiB under opt/: 70 values of 1 MB
head -c 1000000 /dev/zero | tr '\0' 'y' | sed 's/^/"/; s/$/"/' >"$T_TMP/mb.json"
k=0
while [ $k -lt 70 ]; do
	$GW "$SOCK" put-file "${P}opt/zz.mb.$k" "$T_TMP/mb.json" >/dev/null || not_ok "put $k"
	k=$((k + 1))
done
new_seg M mb
sync_start m "$M" --host h7
pass "70 MB under opt/: a (re)starting agent loads" wait_log 180 m "watching from revision"
pass "... every key" grep -q "loaded [0-9]* keys" "$T_TMP/m.log"
eput opt/app.limit 43
pass "... and applies the next change" wait_get 20 "$M" app.limit 43
agent_stop m

if [ "$T_FAILED" != 0 ]; then for n in j2 c m; do diag_log $n; done; fi
t_done
