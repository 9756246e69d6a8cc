#!/bin/sh
# SPDX-License-Identifier: MIT
# shmcfg-sync through network partitions (tests/cluster/netns.sh: root,
# ip, nft; else a skip): etcd's three members on TCP in one network
# namespace, two hosts in their own, each with its own /dev/shm, a segment
# of the same name and an agent listing all three members.
#
#   (i)  host 1 cut from the member its agent watches on (packets dropped,
#        nothing refused): it resumes the watch on another member, without
#        a reload, and applies the writes made after the cut;
#   (ii) host 1 cut from every member: its segment says it is out of sync
#        (the promise: within 5 s; the bound here 15 s), keeps its values,
#        while host 2 goes on converging; healed, host 1 is in sync again
#        and converged, resuming from its revision (no reload), one commit
#        per revision missed.
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/cluster/netns.sh"

netns_up 2
etcd3_start

not() { ! "$@"; }
ms() { echo $(( $(date +%s%N) / 1000000 )); }
write() {
	cluster_set "$W" "$@" || { not_ok "write $*"; diag_run; }
}
reaches_all() { host_reaches "$1" 1 && host_reaches "$1" 2 && host_reaches "$1" 3; }

both_reach() { reaches_all 1 && reaches_all 2; }
pass "hosts 1 and 2 reach every member" both_reach

new_seg W w # (this shell's: shmctl cluster set checks values against it)
SEG=cli-$$-part # on each host's own /dev/shm
host_seg 1 "$SEG"
host_seg 2 "$SEG"
own_shm() { on_host 1 test -e "/dev/shm/shmcfg.$SEG" && on_host 2 test -e "/dev/shm/shmcfg.$SEG" && [ ! -e "/dev/shm/shmcfg.$SEG" ]; }
pass "two segments of one name, one on each host's own /dev/shm" own_shm
host_agent_start 1 a1 --endpoints "$ETCD3_EP" --cluster "$CLUSTER" --host h1 "$SEG"
host_agent_start 2 a2 --endpoints "$(member_ep 2),$(member_ep 3),$(member_ep 1)" --cluster "$CLUSTER" --host h2 "$SEG"
watching() { wait_log 20 a1 "watching from revision" && wait_log 20 a2 "watching from revision"; }
# (no agents: every later check would wait out its bound)
if watching; then ok "agents watching"; else not_ok "agents watching"; diag_log a1; diag_log a2; t_done; fi

write app.limit=11
pass "a write: host 1 applies it" with_host 1 wait_get 20 "$SEG" app.limit 11
pass "... host 2 too" with_host 2 wait_get 20 "$SEG" app.limit 11

# ---- (i) cut from the member it watches on
EP=$(sed -n 's/.*watching from revision [0-9]* on \([^ ]*\).*/\1/p' "$T_TMP/a1.log" | tail -1)
I=""
for i in 1 2 3; do [ "$EP" = "$(member_ep $i)" ] && I=$i; done
pass "(i) the agent's log names the member it watches on" test -n "$I"
# (else: the first that answers, the first listed)
[ -n "$I" ] || I=1
OTHERS=""
for i in 1 2 3; do [ $i != "$I" ] && OTHERS="$OTHERS $i"; done
cut_host_member 1 "$I"
T0=$(ms)
write app.limit=12
REV12=$REV
pass "(i) host 1 cut from m$I: it applies the write made after the cut (bound 20 s)" \
	with_host 1 wait_get 20 "$SEG" app.limit 12
diag "after $(( $(ms) - T0 )) ms"
pass "... it cannot reach m$I" not host_reaches 1 "$I"
reaches_others() { for _i in $OTHERS; do host_reaches 1 "$_i" || return 1; done; }
pass "... it reaches the others" reaches_others
pass "... host 2 still reaches m$I" host_reaches 2 "$I"
_resumed_on_other() {
	for _i in $OTHERS; do
		grep 'resumed watching from revision' "$T_TMP/a1.log" | grep -Fq "on $(member_ep "$_i") (no reload)" && return 0
	done
	return 1
}
pass "... it resumed watching on another member, without a reload" _resumed_on_other
pass "... loaded once only" test "$(grep -c 'loaded ' "$T_TMP/a1.log")" = 1
pass "... host 2 applies it" with_host 2 wait_get 20 "$SEG" app.limit 12
heal_host 1
pass "healed: host 1 reaches m$I again" host_reaches 1 "$I"
pass "... host 1 in sync at the write's revision" with_host 1 wait_stat 20 "$SEG" "j['cluster_revision'] == $REV12 and j['sync']['in_sync']"
[ "$T_FAILED" = 0 ] || diag_log a1

# ---- (ii) cut from every member
F2=$T_FAILED
with_host 1 stat_json "$SEG"
R1=$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["cluster_revision"])' "$T_TMP/stat.json")
NRES=$(grep -c 'resumed watching' "$T_TMP/a1.log")
cut_host_all 1
T0=$(ms)
pass "(ii) host 1 cut from every member: out of sync (the promise: 5 s; the bound 15 s)" \
	with_host 1 wait_stat 15 "$SEG" "not j['sync']['in_sync']"
diag "detected after $(( $(ms) - T0 )) ms"
reaches_none() { for _i in 1 2 3; do not host_reaches 1 "$_i" || return 1; done; }
pass "... it reaches no member" reaches_none
write app.limit=13
REVS=$REV
pass "... host 2 converges on a write" with_host 2 wait_stat 20 "$SEG" "j['cluster_revision'] == $REV and j['sync']['in_sync']"
write app.limit=14 app.mode=safe
REVS="$REVS $REV"
REV14=$REV
pass "... and on another" with_host 2 wait_stat 20 "$SEG" "j['cluster_revision'] == $REV and j['sync']['in_sync']"
has14() { with_host "$1" wait_get 5 "$SEG" app.limit 14 && with_host "$1" wait_get 5 "$SEG" app.mode '"safe"'; }
pass "... with its values" has14 2
pass "... host 1 keeps its values" with_host 1 wait_get 1 "$SEG" app.limit 12
pass "... at its revision, still out of sync" with_host 1 wait_stat 1 "$SEG" "j['cluster_revision'] == $R1 and not j['sync']['in_sync']"
pass "... its agent alive" agent_alive a1

heal_host 1
T0=$(ms)
pass "healed: host 1 in sync, at the newest write's revision" \
	with_host 1 wait_stat 20 "$SEG" "j['cluster_revision'] == $REV14 and j['sync']['in_sync']"
diag "after $(( $(ms) - T0 )) ms"
pass "... converged" has14 1
pass "... without a reload" test "$(grep -c 'loaded ' "$T_TMP/a1.log")" = 1
pass "... resumed from its revision + 1 ($((R1 + 1)))" \
	sh -c "grep 'resumed watching' '$T_TMP/a1.log' | tail -n +$((NRES + 1)) | grep -q 'from revision $((R1 + 1))[^0-9]'"
# each revision missed: exactly one commit on host 1
one_commit() {
	with_host 1 shmctl log "$SEG" --json >"$T_TMP/log.json" &&
		"$PYTHON" - "$T_TMP/log.json" $REVS <<'PY'
import collections, json, sys
log = json.load(open(sys.argv[1]))
n = collections.Counter(c["cluster_revision"] for c in log if c["cluster_revision"])
bad = ["revision %s: %d commits" % (r, n[int(r)]) for r in sys.argv[2:] if n[int(r)] != 1]
bad += ["revision %d: %d commits" % (r, k) for r, k in n.items() if k > 1]
for b in bad:
    print("#   " + b)
sys.exit(1 if bad else 0)
PY
}
pass "... one commit per revision it missed" one_commit
pass "agents alive" sh -c "kill -0 $AGENT_PID_a1 && kill -0 $AGENT_PID_a2"
[ "$T_FAILED" = "$F2" ] || { diag_log a1; diag_log a2; }
t_done
