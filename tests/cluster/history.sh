#!/bin/sh
# SPDX-License-Identifier: MIT
# A history check (tests/cluster/history_check.py) on a real 3-member etcd
# (tests/cluster/lib3.sh): three writers (shmctl cluster set, each write a
# value of its own) and four simulated hosts (an agent and a segment each,
# sampled continually) while members are stopped and continued, killed and
# restarted, the leader among them, never a majority at once. Then etcd's
# whole event history of the prefix is read back and checked: every
# acknowledged write in it exactly once, at its revision; every host sample
# etcd's state at the sample's revision; every host's final state etcd's;
# no value never written ever seen; one commit per revision on every host.
# (The checker is not named history.py: with TEST_EXTENSIONS .py .sh,
# automake would make tests/cluster/history.log of either.)
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/cluster/lib3.sh"

etcd3_start
new_seg W w # the writers' (no agent): cluster set checks values against it
N=4
SEGS=""
i=1
while [ $i -le $N ]; do
	seg "S$i" "h$i"
	eval "_s=\$S$i"
	# a history long enough for every commit of the run
	$SHMCTL create -q --no-env --history 20000 --schema "$top_srcdir/tests/cluster/schema.yaml" "$_s" ||
		{ not_ok "cannot create segment $_s"; t_done; }
	SEGS="$SEGS${SEGS:+,}$_s"
	i=$((i + 1))
done
agent_start h1 --endpoints "$(member_ep 1),$(member_ep 2),$(member_ep 3)" --cluster "$CLUSTER" --host h1 "$S1"
agent_start h2 --endpoints "$(member_ep 2),$(member_ep 3),$(member_ep 1)" --cluster "$CLUSTER" --host h2 "$S2"
agent_start h3 --endpoints "$(member_ep 3),$(member_ep 1),$(member_ep 2)" --cluster "$CLUSTER" --host h3 "$S3"
agent_start h4 --endpoints "$(member_ep 1),$(member_ep 3),$(member_ep 2)" --cluster "$CLUSTER" --host h4 "$S4"
watching() {
	for _a in h1 h2 h3 h4; do wait_log 20 "$_a" "watching from revision" || return 1; done
}
# (no agents: every later check would wait out its bound)
if watching; then ok "four agents watching"; else not_ok "four agents watching"; for a in h1 h2 h3 h4; do diag_log "$a"; done; t_done; fi

HD=$T_TMP/hist
mkdir "$HD"
set_eps() { live_eps >"$HD/eps.tmp" && mv "$HD/eps.tmp" "$HD/eps"; }
set_eps
export SHMCTL
T0=$(date +%s)
"$PYTHON" "$top_srcdir/tests/cluster/history_check.py" run --dir "$HD" --cluster "$CLUSTER" --writer-seg "$W" \
	--segments "$SEGS" --writers 3 --all-endpoints "$ETCD_EP" --max-seconds 150 2>"$HD/run.err" &
RUN=$!
# (stopped with the agents if the test ends early)
AGENT_PID_histrun=$RUN
T_AGENTS="$T_AGENTS histrun"
if until_true 20 test -f "$HD/started"; then ok "writers and samplers started"; else
	not_ok "writers and samplers started"; sed 's/^/#   /' "$HD/run.err"; t_done
fi

acked() { cat "$HD/acked" 2>/dev/null || echo 0; }
_held() { [ "$(acked)" -ge "$1" ] && [ "$(date +%s%N)" -ge "$2" ]; }
# hold S K: until K more writes were acknowledged and at least S seconds
# went by (bound 40 s): a fault lasts that long, longer than an agent's
# liveness bound, while the writers go on
hold() {
	_m=$(( $(acked) + $2 ))
	_t=$(( $(date +%s%N) + $1 * 1000000000 ))
	until_true 40 _held "$_m" "$_t" || { not_ok "$2 more writes acknowledged (at $(acked), waiting for $_m)"; return 1; }
}
# fault S DESC CMD...: CMD holds, then S seconds and 8 writes through the fault
fault() {
	_fs=$1 _d=$2
	shift 2
	"$@" && hold "$_fs" 8 && ok "$_d"
}

hold 0 10
F=$(member_follower)
member_stop "$F"
set_eps
fault 4 "follower m$F SIGSTOPped for 4 s: writes go on" true
member_cont "$F"
set_eps
fault 1 "... SIGCONTinued" true

L=$(member_leader)
member_kill "$L"
set_eps
NL=$(wait_leader "$L")
fault 3 "leader m$L SIGKILLed, m$NL elected: writes go on (3 s)" test -n "$NL"
member_restart "$L"
set_eps
fault 1 "... restarted" true

L=$(member_leader)
member_stop "$L"
set_eps
NL=$(wait_leader "$L")
fault 4 "leader m$L SIGSTOPped, m$NL elected: writes go on (4 s)" test -n "$NL"
member_cont "$L"
set_eps
fault 1 "... SIGCONTinued" true

F=$(member_follower)
member_kill "$F"
set_eps
fault 3 "follower m$F SIGKILLed: writes go on (3 s)" true
member_restart "$F"
set_eps
fault 1 "... restarted" true

touch "$HD/stop"
wait "$RUN"
RC=$?
AGENT_PID_histrun=
pass "writers and samplers stopped (exit 0)" test "$RC" = 0
[ -s "$HD/run.err" ] && sed 's/^/#   /' "$HD/run.err"
diag "faults and writes took $(( $(date +%s) - T0 )) s"

# the check: history_check.py prints unnumbered TAP
SOCKS="$ETCD3_DIR/m1.sock:1,$ETCD3_DIR/m2.sock:1,$ETCD3_DIR/m3.sock:1"
"$PYTHON" "$top_srcdir/tests/cluster/history_check.py" check --dir "$HD" --cluster "$CLUSTER" --segments "$SEGS" \
	--sockets "$SOCKS" >"$HD/check.out" 2>"$HD/check.err"
RC=$?
while IFS= read -r line; do
	case $line in
	"ok - "*) ok "${line#ok - }" ;;
	"not ok - "*) not_ok "${line#not ok - }" ;;
	*) echo "$line" ;;
	esac
done <"$HD/check.out"
pass "history_check.py check ran (exit 0)" test "$RC" = 0
[ "$RC" = 0 ] || sed 's/^/#   /' "$HD/check.err" | tail -20
if [ "$T_FAILED" != 0 ]; then
	for a in h1 h2 h3 h4; do diag_log "$a"; done
	grep -v '"rc": 0' "$HD/writes.jsonl" | head -10 | sed 's/^/#   failed write: /'
fi
t_done
