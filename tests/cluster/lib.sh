# SPDX-License-Identifier: MIT
# Helpers of the cluster tests (POSIX sh), sourced by tests/cluster/*.sh on
# top of the shmctl tests' TAP helpers (tests/cli/lib.sh: ok, not_ok, run,
# jcheck, seg, t_done...).
#
# Each test starts its own etcd (etcd_start): a fresh data directory under
# the test's temporary directory, unix sockets only (no port to collide with
# a parallel test), stopped by pid at exit. Where etcd or etcdctl is missing
# the test is skipped ("1..0 # SKIP", exit 0 for the TAP driver), except when
# SHMCFG_REQUIRE_ETCD=1 (.ci/run sets it): CI installed etcd, so its absence
# there is a failure.
#
# Agents: agent_start NAME ARGS... runs $SHMCFG_SYNC (the built
# tools/shmcfg-sync; valgrind or the like may be put in front) in the
# background with its stderr in $T_TMP/NAME.log; agent_stop NAME sends
# SIGTERM and waits for its exit status.

. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/cli/lib.sh"

# (as shmctl, tests/cli/lib.sh: the program the libtool wrapper runs)
if [ -z "${SHMCFG_SYNC:-}" ] && [ -x "$top_builddir/tools/.libs/shmcfg-sync" ] && [ -d "$top_builddir/lib/.libs" ]; then
	SHMCFG_SYNC=$top_builddir/tools/.libs/shmcfg-sync
fi
: "${SHMCFG_SYNC:=$top_builddir/tools/shmcfg-sync}"
ETCD=${ETCD:-etcd}
ETCDCTL=${ETCDCTL:-etcdctl}

if ! command -v "$ETCD" >/dev/null 2>&1 || ! command -v "$ETCDCTL" >/dev/null 2>&1; then
	if [ "${SHMCFG_REQUIRE_ETCD:-0}" = 1 ]; then
		echo "not ok 1 - etcd and etcdctl are needed (SHMCFG_REQUIRE_ETCD=1; Debian: etcd-server etcd-client)"
		echo "1..1"
		exit 1
	fi
	echo "1..0 # SKIP etcd and etcdctl are needed (Debian: etcd-server etcd-client)"
	exit 0
fi

ETCD_DIR=""
ETCD_PID=""
ETCD_EP=""     # the endpoint as shmcfg-sync and shmctl take it: unix:PATH
ETCDCTL_EP=""  # the same for etcdctl: unix://PATH
T_AGENTS=""

# Stop what the test started (agents first, then etcd), then the shmctl
# tests' cleanup (segments, $T_TMP).
c_cleanup() {
	for _a in $T_AGENTS; do
		eval "_p=\${AGENT_PID_$_a:-}"
		[ -n "$_p" ] && kill -CONT "$_p" 2>/dev/null && kill "$_p" 2>/dev/null
	done
	if [ -n "$ETCD_PID" ]; then
		kill -CONT "$ETCD_PID" 2>/dev/null
		kill "$ETCD_PID" 2>/dev/null
		wait "$ETCD_PID" 2>/dev/null
	fi
	t_cleanup
}
trap c_cleanup EXIT

# until_true TIMEOUT_S CMD...: run CMD every $STEP seconds (default 0.02)
# until it succeeds; 1 if it did not within TIMEOUT_S seconds of wall time.
until_true() {
	_ut_end=$(( $(date +%s%N) + $(awk "BEGIN { printf \"%d\", $1 * 1000 }") * 1000000 ))
	shift
	while ! "$@" >/dev/null 2>&1; do
		[ "$(date +%s%N)" -ge "$_ut_end" ] && return 1
		sleep "${STEP:-0.02}"
	done
	return 0
}

ectl() {
	ETCDCTL_API=3 "$ETCDCTL" --endpoints "$ETCDCTL_EP" --dial-timeout=2s --command-timeout=3s "$@"
}

etcd_healthy() {
	ectl get /health-probe >/dev/null 2>&1
}

# etcd_start [EXTRA ETCD ARGS...]: a new etcd in a new directory; sets
# ETCD_DIR, ETCD_PID, ETCD_EP, ETCDCTL_EP. Fails the test if it does not
# become healthy within 20 s.
etcd_start() {
	ETCD_DIR=$(mktemp -d "$T_TMP/etcd.XXXXXX") || exit 99
	ETCD_EP="unix:$ETCD_DIR/client.sock:1"
	ETCDCTL_EP="unix://$ETCD_DIR/client.sock:1"
	ETCD_ARGS="$*"
	etcd_run
}

# (re)start etcd on ETCD_DIR's data, in the background, and wait for health
etcd_run() {
	# the socket names are relative to etcd's working directory
	(cd "$ETCD_DIR" && exec "$ETCD" --name n1 --data-dir "$ETCD_DIR/data" \
		--listen-client-urls unix://client.sock:1 --advertise-client-urls unix://client.sock:1 \
		--listen-peer-urls unix://peer.sock:1 --initial-advertise-peer-urls unix://peer.sock:1 \
		--initial-cluster n1=unix://peer.sock:1 $ETCD_ARGS) >>"$ETCD_DIR/etcd.log" 2>&1 &
	ETCD_PID=$!
	# etcdctl costs a Go start-up per call: poll every 0.1 s
	if ! STEP=0.1 until_true 20 etcd_healthy; then
		STEP=
		echo "not ok - etcd did not become healthy in 20 s"
		sed 's/^/#   /' "$ETCD_DIR/etcd.log" | tail -20
		exit 1
	fi
	STEP=
}

etcd_stop() {
	[ -n "$ETCD_PID" ] || return 0
	kill -CONT "$ETCD_PID" 2>/dev/null
	kill "$ETCD_PID" 2>/dev/null
	wait "$ETCD_PID" 2>/dev/null
	ETCD_PID=""
	# a socket left behind would make the next listen fail
	rm -f "$ETCD_DIR/client.sock:1" "$ETCD_DIR/peer.sock:1"
}

# etcd_restart: stop, then start on the same data directory.
etcd_restart() {
	etcd_stop
	etcd_run
}

# A silent partition: the process is there, its sockets accept, nothing answers.
etcd_pause() { kill -STOP "$ETCD_PID"; }
etcd_resume() { kill -CONT "$ETCD_PID"; }

# The current revision of the store.
etcd_revision() {
	ectl get / -w json | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["header"]["revision"])'
}

# agent_start NAME ARGS...: shmcfg-sync ARGS in the background, stderr to
# $T_TMP/NAME.log; AGENT_PID_NAME is its pid.
agent_start() {
	_n=$1
	shift
	$SHMCFG_SYNC "$@" 2>>"$T_TMP/$_n.log" >/dev/null &
	eval "AGENT_PID_$_n=\$!"
	T_AGENTS="$T_AGENTS $_n"
}

# agent_stop NAME: SIGTERM, then its exit status in RC.
agent_stop() {
	eval "_p=\${AGENT_PID_$1:-}"
	[ -n "$_p" ] || { RC=255; return; }
	kill "$_p" 2>/dev/null
	wait "$_p"
	RC=$?
	eval "AGENT_PID_$1="
}

# agent_alive NAME
agent_alive() {
	eval "_p=\${AGENT_PID_$1:-}"
	[ -n "$_p" ] && kill -0 "$_p" 2>/dev/null
}

# diag_log NAME: the agent's log as diagnostics.
diag_log() {
	echo "#   $1.log:"
	sed 's/^/#     /' "$T_TMP/$1.log" 2>/dev/null | tail -30
}

# stat_json SEG: shmctl stat SEG --json into $T_TMP/stat.json.
stat_json() {
	$SHMCTL stat "$1" --json >"$T_TMP/stat.json" 2>/dev/null
}

# wait_stat SECONDS SEG CHECK: until stat --json of SEG satisfies CHECK.
wait_stat() {
	_ws_seg=$2 _ws_chk=$3
	until_true "$1" _stat_holds
}
_stat_holds() {
	stat_json "$_ws_seg" && jcheck "$T_TMP/stat.json" "$_ws_chk" >/dev/null
}

# get SEG OPT: the option's value as JSON.
get() {
	$SHMCTL get "$1" "$2" --json
}

# wait_get SECONDS SEG OPT JSON: until the option's value is JSON (compared
# as text as shmctl get --json prints it).
wait_get() {
	_wg_seg=$2 _wg_opt=$3 _wg_want=$4
	until_true "$1" _get_is
}
_get_is() {
	[ "$(get "$_wg_seg" "$_wg_opt" 2>/dev/null)" = "$_wg_want" ]
}

# wait_log SECONDS NAME ERE: until the agent's log has a line matching ERE.
wait_log() {
	_wl_f=$T_TMP/$2.log _wl_re=$3
	until_true "$1" grep -Eq -- "$_wl_re" "$_wl_f"
}

# The cluster of this test and its key prefix; new_seg VAR SUFFIX creates a
# segment of tests/cluster/schema.yaml (no environment layers).
CLUSTER=c$$
P=/shmcfg/v1/$CLUSTER/
new_seg() {
	seg "$1" "$2"
	eval "_s=\$$1"
	$SHMCTL create -q --no-env --schema "$top_srcdir/tests/cluster/schema.yaml" "$_s" ||
		{ echo "not ok - cannot create segment $_s"; exit 1; }
}

# sync NAME SEGMENT... [ARGS]: an agent of this cluster on this etcd.
sync_start() {
	_n=$1
	shift
	agent_start "$_n" --endpoints "$ETCD_EP" --cluster "$CLUSTER" "$@"
}

# The newest commit of SEG (stat --json's commits[0]) as "FIELD" values:
# commit_field SEG FIELD
commit_field() {
	stat_json "$1" && "$PYTHON" -c 'import json,sys; c=json.load(open(sys.argv[1]))["commits"]; print(c[0][sys.argv[2]] if c else "")' "$T_TMP/stat.json" "$2"
}

# audited_put WHO KEY=JSON...: one etcd txn writing the values, an audit
# record naming WHO and the head, as shmctl cluster set does. (etcdctl txn
# reads each value as a Go string literal: JSON-quoted, it arrives as is.)
audited_put() {
	"$PYTHON" - "$P" "$@" >"$T_TMP/txn.in" <<'PY'
import json, sys, time
p, who, kvs = sys.argv[1], sys.argv[2], sys.argv[3:]
seq = time.time_ns()
print()  # no compares
for kv in kvs:
    k, v = kv.split("=", 1)
    print("put %s%s %s" % (p, k, json.dumps(v)))
audit = {"seq": seq, "who": who, "time_ns": seq, "changes": []}
print("put %saudit/%020d %s" % (p, seq, json.dumps(json.dumps(audit))))
print("put %shead %s" % (p, json.dumps(json.dumps({"seq": seq}))))
print()  # the end of the success ops
print()  # no failure ops
PY
	ectl txn -w json <"$T_TMP/txn.in" >"$T_TMP/w.json" && set_rev
}

# The revision of the last write (etcdctl -w json in $T_TMP/w.json) in REV:
# the agent's status puts move the store's revision on, so tests compare
# with the revision of their own write.
set_rev() {
	REV=$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["header"]["revision"])' "$T_TMP/w.json")
}

# eput KEY JSON: a plain put of one key (no audit record); REV its revision.
eput() {
	ectl put -w json -- "$P$1" "$2" >"$T_TMP/w.json" && set_rev
}
# eput_file KEY FILE: the bytes of FILE as the value.
eput_file() {
	ectl put -w json -- "$P$1" <"$2" >"$T_TMP/w.json" && set_rev
}
# edel KEY: delete one key; REV its revision.
edel() {
	ectl del -w json -- "$P$1" >"$T_TMP/w.json" && set_rev
}
