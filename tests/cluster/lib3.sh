# SPDX-License-Identifier: MIT
# A real 3-member etcd cluster for the cluster tests (POSIX sh), sourced by
# tests/cluster/members.sh, history.sh and partition.sh on top of
# tests/cluster/lib.sh (sourced here if it was not: the TAP helpers, agents,
# wait_get, wait_stat, wait_log, the etcd skip rule and SHMCFG_REQUIRE_ETCD).
#
# The members m1, m2, m3 run in one working directory, $ETCD3_DIR, each with
# its own data directory ($ETCD3_DIR/mI.data) and log ($ETCD3_DIR/mI.log).
# By default they speak over unix sockets only, named relative to that
# common directory (client mI.sock:1, peer mI-peer.sock:1), as lib.sh's
# etcd_start does for one member: a name relative to the one directory
# means the same file to every member, so the peers find each other, and no
# port can collide with a parallel test. tests/cluster/netns.sh instead runs
# them in a network namespace on TCP (ETCD3_NETNS, ETCD3_NET: set by
# netns_up), with a unix client socket each for the test itself.
#
# Endpoints, in the spelling of shmcfg-sync and shmctl (unix:PATH,
# http://HOST:PORT) unless said:
#   ETCD3_EP       every member, as the agents reach them (comma-separated)
#   ETCDCTL3_EP    every member, for etcdctl (unix://PATH), from this shell
#   ETCD_EP        (lib.sh's) every member, as this shell reaches them
#   ETCDCTL_EP     (lib.sh's) the members that are up, for etcdctl: lib.sh's
#                  ectl, eput, audited_put, etcd_revision work unchanged and
#                  never wait on a stopped or killed member
#   member_ep I    member I as the agents reach it
#   live_eps       the members that are up, as this shell reaches them
#
# Members (I: 1..3); each helper fails the test ("not ok", the plan, exit 1)
# when the member does not come back:
#   etcd3_start [ETCD ARGS...]  the three members, fresh; returns once each
#                  is healthy and one is the leader (bound 30 s)
#   member_stop I  SIGSTOP: its sockets still accept, nothing answers
#   member_cont I  SIGCONT, then until it is healthy again (bound 30 s)
#   member_kill I  SIGKILL (the process reaped, its sockets removed)
#   member_restart I  SIGKILL, then started on the same data directory,
#                  until healthy (bound 30 s)
#   member_wipe I  SIGKILL, etcdctl member remove, its data deleted, member
#                  add, started with --initial-cluster-state existing, until
#                  healthy and caught up with the store's revision at the add
#   member_healthy I  0 when it answers a linearizable read (has a leader)
#   member_leader  prints the index of the member that is leader now, as the
#                  members that are up say (1 when none of them is)
#   wait_leader [NOT]  until a member that is up (and is not NOT) is leader;
#                  prints its index (bound 30 s, else 1)
#   member_follower  prints a member that is up and not the leader
#   ectl3 ARGS     etcdctl against the members that are up (5 s timeouts)
#   cluster_set SEG OPT=V...  shmctl cluster set through the members that
#                  are up, retried (bound 30 s) while it fails (no leader
#                  yet); REV and SEQ of the write it reports
#
# At exit (a failure, a signal) every agent gets SIGTERM and every member
# SIGCONT then SIGKILL, and is reaped, before $T_TMP is removed.

if ! type c_cleanup >/dev/null 2>&1; then
	. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/cluster/lib.sh"
fi

ETCD3_DIR=""
ETCD3_EP=""
ETCDCTL3_EP=""
ETCD3_CLUSTER=""
: "${ETCD3_NETNS:=}"  # netns.sh: the namespace the members run in
: "${ETCD3_NET:=}"    # netns.sh: their TCP addresses are $ETCD3_NET.I
M_PID_1="" M_PID_2="" M_PID_3=""
M_STATE_1=down M_STATE_2=down M_STATE_3=down

# The URLs of member I, as etcd takes them (relative unix socket names:
# etcd's working directory is $ETCD3_DIR).
_m3_peer_url() {
	if [ -n "$ETCD3_NETNS" ]; then echo "http://$ETCD3_NET.$1:2380"; else echo "unix://m$1-peer.sock:1"; fi
}
_m3_client_url() {
	if [ -n "$ETCD3_NETNS" ]; then echo "http://$ETCD3_NET.$1:2379"; else echo "unix://m$1.sock:1"; fi
}
_m3_listen_client() {
	if [ -n "$ETCD3_NETNS" ]; then echo "http://$ETCD3_NET.$1:2379,unix://m$1.sock:1"; else echo "unix://m$1.sock:1"; fi
}
# member I from this shell: for etcdctl, and for shmctl
_m3_ctl_ep() { echo "unix://$ETCD3_DIR/m$1.sock:1"; }
_m3_tool_ep() { echo "unix:$ETCD3_DIR/m$1.sock:1"; }

member_ep() {
	if [ -n "$ETCD3_NETNS" ]; then echo "http://$ETCD3_NET.$1:2379"; else _m3_tool_ep "$1"; fi
}

# The members that are up (not stopped, not killed), each as "I".
_m3_up() {
	for _i in 1 2 3; do
		eval "[ \"\$M_STATE_$_i\" = up ]" && echo "$_i"
	done
}
live_eps() {
	_le=""
	for _i in $(_m3_up); do _le="$_le${_le:+,}$(_m3_tool_ep "$_i")"; done
	echo "$_le"
}
# ETCDCTL_EP: the members that are up (never empty: etcdctl needs one)
_m3_update_eps() {
	ETCDCTL_EP=""
	for _i in $(_m3_up); do ETCDCTL_EP="$ETCDCTL_EP${ETCDCTL_EP:+,}$(_m3_ctl_ep "$_i")"; done
	[ -n "$ETCDCTL_EP" ] || ETCDCTL_EP=$ETCDCTL3_EP
}

ectl3() {
	ETCDCTL_API=3 "$ETCDCTL" --endpoints "$ETCDCTL_EP" --dial-timeout=2s --command-timeout=5s "$@"
}

# etcdctl against member I alone, short timeouts
_m3_ctl1() {
	_c1=$1
	shift
	ETCDCTL_API=3 "$ETCDCTL" --endpoints "$(_m3_ctl_ep "$_c1")" --dial-timeout=1s --command-timeout=2s "$@"
}

member_healthy() {
	_m3_ctl1 "$1" endpoint health >/dev/null 2>&1
}

# _m3_run I STATE: start member I (new or existing cluster state) in the
# background on its data directory.
_m3_run() {
	rm -f "$ETCD3_DIR/m$1.sock:1" "$ETCD3_DIR/m$1-peer.sock:1"
	if [ -n "$ETCD3_NETNS" ]; then _m3_wrap="ip netns exec $ETCD3_NETNS"; else _m3_wrap=""; fi
	(cd "$ETCD3_DIR" && exec $_m3_wrap "$ETCD" --name "m$1" --data-dir "$ETCD3_DIR/m$1.data" \
		--listen-client-urls "$(_m3_listen_client "$1")" --advertise-client-urls "$(_m3_client_url "$1")" \
		--listen-peer-urls "$(_m3_peer_url "$1")" --initial-advertise-peer-urls "$(_m3_peer_url "$1")" \
		--initial-cluster "$ETCD3_CLUSTER" --initial-cluster-token "shmcfg-$$" \
		--initial-cluster-state "$2" $ETCD3_ARGS) >>"$ETCD3_DIR/m$1.log" 2>&1 &
	eval "M_PID_$1=\$!"
	eval "M_STATE_$1=up"
	_m3_update_eps
}

# _m3_fail WHAT: not ok, the members' logs as diagnostics, exit.
_m3_fail() {
	not_ok "$1"
	for _i in 1 2 3; do
		echo "#   m$_i.log (state $(eval "echo \$M_STATE_$_i")):"
		tail -15 "$ETCD3_DIR/m$_i.log" 2>/dev/null | sed 's/^/#     /'
	done
	t_done
}

# _m3_wait_healthy I: until member I is healthy (bound 30 s)
_m3_wait_healthy() {
	STEP=0.1 until_true 30 member_healthy "$1" || _m3_fail "etcd member m$1 did not become healthy in 30 s"
}

etcd3_start() {
	ETCD3_DIR=$(mktemp -d "$T_TMP/e3.XXXXXX") || exit 99
	ETCD3_ARGS="$*"
	ETCD3_CLUSTER="m1=$(_m3_peer_url 1),m2=$(_m3_peer_url 2),m3=$(_m3_peer_url 3)"
	ETCD3_EP="$(member_ep 1),$(member_ep 2),$(member_ep 3)"
	ETCDCTL3_EP="$(_m3_ctl_ep 1),$(_m3_ctl_ep 2),$(_m3_ctl_ep 3)"
	ETCD_EP="$(_m3_tool_ep 1),$(_m3_tool_ep 2),$(_m3_tool_ep 3)"
	for _i in 1 2 3; do _m3_run "$_i" new; done
	for _i in 1 2 3; do _m3_wait_healthy "$_i"; done
	wait_leader >/dev/null || _m3_fail "etcd: no leader in 30 s"
}

member_stop() {
	eval "kill -STOP \"\$M_PID_$1\"" || _m3_fail "member_stop $1: no such process"
	eval "M_STATE_$1=stopped"
	_m3_update_eps
}

member_cont() {
	eval "kill -CONT \"\$M_PID_$1\"" || _m3_fail "member_cont $1: no such process"
	eval "M_STATE_$1=up"
	_m3_update_eps
	_m3_wait_healthy "$1"
}

member_kill() {
	eval "_mk=\$M_PID_$1"
	if [ -n "$_mk" ]; then
		kill -CONT "$_mk" 2>/dev/null
		kill -KILL "$_mk" 2>/dev/null
		wait "$_mk" 2>/dev/null
	fi
	eval "M_PID_$1="
	eval "M_STATE_$1=down"
	_m3_update_eps
	rm -f "$ETCD3_DIR/m$1.sock:1" "$ETCD3_DIR/m$1-peer.sock:1"
}

member_restart() {
	member_kill "$1"
	_m3_run "$1" new # (the data directory exists: etcd ignores the state)
	_m3_wait_healthy "$1"
}

member_wipe() {
	member_kill "$1"
	until_true 30 _m3_removed "$1" || _m3_fail "member_wipe $1: member remove failed"
	rm -rf "$ETCD3_DIR/m$1.data"
	until_true 30 _m3_added "$1" || _m3_fail "member_wipe $1: member add failed"
	# the revision it must reach
	_mw_rev=$(ectl3 get /health-probe -w json | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["header"]["revision"])')
	_m3_run "$1" existing
	_m3_wait_healthy "$1"
	STEP=0.1 until_true 30 _m3_caught_up "$1" "$_mw_rev" || _m3_fail "member_wipe $1: m$1 did not catch up to revision $_mw_rev"
}

# _m3_member_id I: member I's id in the member list, in hex as member remove
# takes it ("" when it is not listed; 1 when the list cannot be read)
_m3_member_id() {
	ectl3 member list -w json >"$T_TMP/members.json" 2>/dev/null || return 1
	"$PYTHON" -c '
import json, sys
for m in json.load(open(sys.argv[3]))["members"]:
    if m.get("name") == sys.argv[1] or sys.argv[2] in m.get("peerURLs", []):
        print("%x" % m["ID"])' "m$1" "$(_m3_peer_url "$1")" "$T_TMP/members.json"
}
# (each retried until it holds: an attempt that timed out may have been applied)
_m3_removed() {
	_mr_id=$(_m3_member_id "$1") || return 1
	[ -z "$_mr_id" ] && return 0
	ectl3 member remove "$_mr_id" >/dev/null 2>&1
	return 1
}
_m3_added() {
	_ma_id=$(_m3_member_id "$1") || return 1
	[ -n "$_ma_id" ] && return 0
	ectl3 member add "m$1" --peer-urls="$(_m3_peer_url "$1")" >/dev/null 2>&1
	return 1
}

# _m3_caught_up I REV: member I's own store is at REV or later
_m3_caught_up() {
	_m3_ctl1 "$1" endpoint status -w json 2>/dev/null | "$PYTHON" -c '
import json, sys
d = json.load(sys.stdin)
sys.exit(0 if d and int(d[0]["Status"]["header"]["revision"]) >= int(sys.argv[1]) else 1)' "$2"
}

# The leader, as the members that are up see it: the one whose own id is
# the leader it reports.
member_leader() {
	ETCDCTL_API=3 "$ETCDCTL" --endpoints "$ETCDCTL_EP" --dial-timeout=1s --command-timeout=2s \
		endpoint status -w json 2>/dev/null | "$PYTHON" -c '
import json, re, sys
try:
    d = json.load(sys.stdin)
except ValueError:
    sys.exit(1)
for e in d:
    s = e["Status"]
    if s["header"]["member_id"] == s["leader"]:
        print(re.search(r"m([0-9])\.sock", e["Endpoint"]).group(1))
        sys.exit(0)
sys.exit(1)'
}

_m3_leader_not() {
	_ln=$(member_leader) && [ "$_ln" != "${1:-0}" ]
}
wait_leader() {
	STEP=0.1 until_true 30 _m3_leader_not "${1:-0}" || return 1
	member_leader
}

member_follower() {
	_mf_l=$(member_leader) || return 1
	for _i in $(_m3_up); do
		[ "$_i" != "$_mf_l" ] && { echo "$_i"; return 0; }
	done
	return 1
}

# cluster_set SEG OPT=V...: REV, SEQ of the write; 1 if no attempt in 30 s
# succeeded (its last output in $T_TMP/out, $T_TMP/err). An attempt that
# failed may still have been committed: a retry then writes again.
cluster_set() {
	_cs_seg=$1
	shift
	_cs_end=$(( $(date +%s) + 30 ))
	while :; do
		run $SHMCTL cluster set "$_cs_seg" "$@" --endpoints "$(live_eps)" --cluster "$CLUSTER"
		if [ "$RC" = 0 ]; then
			SEQ=$(sed -n "s/^cluster '.*': audit record \([0-9]*\), revision \([0-9]*\)\$/\1/p" "$T_TMP/out")
			REV=$(sed -n "s/^cluster '.*': audit record \([0-9]*\), revision \([0-9]*\)\$/\2/p" "$T_TMP/out")
			if [ -n "$REV" ]; then
				# (a later pass's diagnostics would show this write as its output)
				: >"$T_TMP/out"
				: >"$T_TMP/err"
				return 0
			fi
		fi
		[ "$(date +%s)" -ge "$_cs_end" ] && return 1
		sleep 0.2
	done
}

# Every member: SIGCONT, SIGKILL, reaped.
m3_kill_all() {
	for _i in 1 2 3; do
		eval "_mk=\$M_PID_$_i"
		[ -n "$_mk" ] && kill -CONT "$_mk" 2>/dev/null && kill -KILL "$_mk" 2>/dev/null
	done
	for _i in 1 2 3; do
		eval "_mk=\$M_PID_$_i"
		[ -n "$_mk" ] && wait "$_mk" 2>/dev/null
		eval "M_PID_$_i="
	done
}

# Every agent: SIGCONT, SIGTERM, reaped (SIGKILL after 5 s).
agents_stop_all() {
	_as=""
	for _a in $T_AGENTS; do
		eval "_p=\${AGENT_PID_$_a:-}"
		[ -n "$_p" ] || continue
		kill -CONT "$_p" 2>/dev/null
		kill "$_p" 2>/dev/null && _as="$_as $_p"
	done
	[ -n "$_as" ] || return 0
	_n=0
	while [ $_n -lt 100 ]; do
		_left=""
		for _p in $_as; do kill -0 "$_p" 2>/dev/null && _left="$_left $_p"; done
		[ -z "$_left" ] && break
		sleep 0.05
		_n=$((_n + 1))
	done
	for _p in $_as; do kill -KILL "$_p" 2>/dev/null; wait "$_p" 2>/dev/null; done
	for _a in $T_AGENTS; do eval "AGENT_PID_$_a="; done
}

c3_cleanup() {
	agents_stop_all
	m3_kill_all
	c_cleanup
}
trap c3_cleanup EXIT
trap 'exit 130' INT TERM HUP
