# SPDX-License-Identifier: MIT
# Test hosts in network namespaces (POSIX sh), sourced by
# tests/cluster/partition.sh after tests/cluster/lib3.sh (sourced here if it
# was not). Root only, with ip (iproute2), nft (nftables), unshare and
# nsenter (util-linux): elsewhere the test reports a skip ("1..0 # SKIP",
# exit 0), except when SHMCFG_REQUIRE_NETNS=1 (.ci/run sets it): then their
# absence is a failure.
#
# Topology (netns_up N), every name unique to this test run ($$), every
# address only inside the namespaces it creates, no default route anywhere:
#
#   shmcfgE$$         etcd's namespace: the three members (lib3.sh's
#                     etcd3_start, after netns_up) on TCP, 10.77.0.I:2379
#                     (client) and :2380 (peer), addresses on its lo; plus a
#                     unix client socket each for this shell
#                     ($ETCD3_DIR/mI.sock:1: ectl, live_eps, cluster_set)
#   shmcfgH$$_K       host K (1..N): one veth pair to shmcfgE$$, eth0
#                     10.77.K.2/24 here, hK 10.77.K.1/24 there, a route to
#                     10.77.0.0/24 through it; an nft table "inet shmcfg"
#                     whose input and output chains the cuts fill
#
# Each host also has its own mount namespace with its own tmpfs on /dev/shm
# (so every host may have a segment of the same name), held by one process
# per host (a sleep, NETNS_HOLDER_K its pid) that every command of the host
# joins (nsenter -n -m).
#
#   netns_up N         create it all (fails the test if it cannot)
#   on_host K CMD...   CMD (a program, not a shell function) in host K,
#                      with LD_LIBRARY_PATH set to this build's library
#   with_host K CMD... CMD (a shell function too: wait_get, wait_stat,
#                      stat_json, get...) with $SHMCTL running in host K
#   host_seg K SEG     create segment SEG of tests/cluster/schema.yaml in K
#   host_agent_start K NAME ARGS...  $SHMCFG_SYNC ARGS in host K in the
#                      background, stderr to $T_TMP/NAME.log; lib.sh's
#                      agent_stop, agent_alive, diag_log, wait_log take NAME
#   host_reaches K I   0 when host K can open a TCP connection to member I
#                      (bound 2 s)
#   cut_host_member K I  drop every packet between host K and member I (in
#                      both directions, silently: nothing is refused)
#   cut_host_all K     drop every packet between host K and every member
#   heal_host K        remove the cuts of host K
#
# At exit (a failure, a signal): the agents, the members, the holders, the
# nft tables, the veths and the namespaces, in that order, are removed.

if ! type etcd3_start >/dev/null 2>&1; then
	. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/cluster/lib3.sh"
fi

_nn_skip() {
	if [ "${SHMCFG_REQUIRE_NETNS:-0}" = 1 ]; then
		echo "not ok 1 - $1 (SHMCFG_REQUIRE_NETNS=1)"
		echo "1..1"
		exit 1
	fi
	echo "1..0 # SKIP $1"
	exit 0
}
[ "$(id -u)" = 0 ] || _nn_skip "network namespaces need root"
for _c in ip nft unshare nsenter; do
	command -v "$_c" >/dev/null 2>&1 || _nn_skip "$_c is needed (Debian: iproute2, nftables, util-linux)"
done
# can this machine make them? (a container without CAP_SYS_ADMIN cannot)
_nn_probe() {
	ip netns add "shmcfgP$$" 2>/dev/null || return 1
	ip netns exec "shmcfgP$$" nft add table inet probe 2>/dev/null &&
		ip netns exec "shmcfgP$$" unshare --mount --propagation private \
			sh -c 'mount -t tmpfs tmpfs /dev/shm' 2>/dev/null
	_r=$?
	ip netns del "shmcfgP$$"
	return $_r
}
_nn_probe || _nn_skip "cannot create a network namespace with nftables and a private tmpfs here"

NETNS_E=shmcfgE$$
NETNS_NET=10.77
NETNS_N=0
NETNS_MADE=""   # the namespaces made, for the cleanup
NETNS_LDPATH=$top_builddir/lib/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
NETNS_SHMCTL=$SHMCTL # (with_host changes SHMCTL for a while)

_nn_fail() {
	not_ok "netns_up: $1"
	[ -s "$T_TMP/netns.err" ] && sed 's/^/#   /' "$T_TMP/netns.err"
	t_done
}

# _nn_ip ARGS: ip, its errors kept for _nn_fail
_nn_ip() {
	ip "$@" 2>>"$T_TMP/netns.err"
}

netns_up() {
	NETNS_N=$1
	: >"$T_TMP/netns.err"
	_nn_ip netns add "$NETNS_E" || _nn_fail "ip netns add $NETNS_E"
	NETNS_MADE="$NETNS_E"
	_nn_ip -n "$NETNS_E" link set lo up || _nn_fail "lo up in $NETNS_E"
	for _i in 1 2 3; do
		_nn_ip -n "$NETNS_E" addr add "$NETNS_NET.0.$_i/32" dev lo || _nn_fail "member address $_i"
	done
	_k=1
	while [ $_k -le "$NETNS_N" ]; do
		_h=shmcfgH$$_$_k
		_nn_ip netns add "$_h" || _nn_fail "ip netns add $_h"
		NETNS_MADE="$NETNS_MADE $_h"
		_nn_ip -n "$_h" link set lo up &&
			_nn_ip -n "$NETNS_E" link add "h$_k" type veth peer name eth0 netns "$_h" &&
			_nn_ip -n "$NETNS_E" addr add "$NETNS_NET.$_k.1/24" dev "h$_k" &&
			_nn_ip -n "$NETNS_E" link set "h$_k" up &&
			_nn_ip -n "$_h" addr add "$NETNS_NET.$_k.2/24" dev eth0 &&
			_nn_ip -n "$_h" link set eth0 up &&
			_nn_ip -n "$_h" route add "$NETNS_NET.0.0/24" via "$NETNS_NET.$_k.1" ||
			_nn_fail "host $_k's link"
		ip netns exec "$_h" nft -f - 2>>"$T_TMP/netns.err" <<-EOF || _nn_fail "host $_k's nft table"
		table inet shmcfg {
			chain in { type filter hook input priority 0; policy accept; }
			chain out { type filter hook output priority 0; policy accept; }
		}
		EOF
		# the holder: its own mount namespace and /dev/shm
		ip netns exec "$_h" unshare --mount --propagation private \
			sh -c 'mount -t tmpfs -o mode=1777 tmpfs /dev/shm && exec sleep 1000000' 2>>"$T_TMP/netns.err" &
		eval "NETNS_HOLDER_$_k=\$!"
		_k=$((_k + 1))
	done
	_k=1
	while [ $_k -le "$NETNS_N" ]; do
		until_true 10 _nn_held "$_k" || _nn_fail "host $_k's holder did not start"
		_k=$((_k + 1))
	done
	# etcd3_start runs the members in $NETNS_E
	ETCD3_NETNS=$NETNS_E
	ETCD3_NET=$NETNS_NET.0
}

# the holder sleeps: its tmpfs is mounted
_nn_held() {
	eval "_p=\$NETNS_HOLDER_$1"
	[ "$(cat "/proc/$_p/comm" 2>/dev/null)" = sleep ]
}

on_host() {
	eval "_oh=\${NETNS_HOLDER_$1:-}"
	shift
	[ -n "$_oh" ] || return 127
	nsenter -t "$_oh" -n -m -- env LD_LIBRARY_PATH="$NETNS_LDPATH" "$@"
}

with_host() {
	eval "_wh=\${NETNS_HOLDER_$1:-}"
	shift
	[ -n "$_wh" ] || return 127
	SHMCTL="nsenter -t $_wh -n -m -- env LD_LIBRARY_PATH=$NETNS_LDPATH $NETNS_SHMCTL"
	"$@"
	_wh_rc=$?
	SHMCTL=$NETNS_SHMCTL
	return $_wh_rc
}

host_seg() {
	on_host "$1" $SHMCTL create -q --no-env --schema "$top_srcdir/tests/cluster/schema.yaml" "$2" ||
		{ not_ok "cannot create segment $2 on host $1"; t_done; }
}

host_agent_start() {
	eval "_ha=\${NETNS_HOLDER_$1:-}"
	_hn=$2
	shift 2
	# exec: $! is the agent itself (nsenter and env exec it)
	(exec nsenter -t "$_ha" -n -m -- env LD_LIBRARY_PATH="$NETNS_LDPATH" $SHMCFG_SYNC "$@") \
		2>>"$T_TMP/$_hn.log" >/dev/null &
	eval "AGENT_PID_$_hn=\$!"
	T_AGENTS="$T_AGENTS $_hn"
}

host_reaches() {
	on_host "$1" "$PYTHON" -c 'import socket, sys; socket.create_connection((sys.argv[1], 2379), 2).close()' \
		"$NETNS_NET.0.$2" 2>/dev/null
}

_nn_nft() {
	_nk=$1
	shift
	ip netns exec "shmcfgH$$_$_nk" nft "$@"
}

cut_host_member() {
	_nn_nft "$1" add rule inet shmcfg out ip daddr "$NETNS_NET.0.$2" drop &&
		_nn_nft "$1" add rule inet shmcfg in ip saddr "$NETNS_NET.0.$2" drop
}

cut_host_all() {
	_nn_nft "$1" add rule inet shmcfg out ip daddr "$NETNS_NET.0.0/24" drop &&
		_nn_nft "$1" add rule inet shmcfg in ip saddr "$NETNS_NET.0.0/24" drop
}

heal_host() {
	_nn_nft "$1" flush chain inet shmcfg out && _nn_nft "$1" flush chain inet shmcfg in
}

netns_down() {
	_k=1
	while [ $_k -le "$NETNS_N" ]; do
		eval "_p=\${NETNS_HOLDER_$_k:-}"
		[ -n "$_p" ] && kill -KILL "$_p" 2>/dev/null && wait "$_p" 2>/dev/null
		eval "NETNS_HOLDER_$_k="
		_k=$((_k + 1))
	done
	for _ns in $NETNS_MADE; do
		case $_ns in
		shmcfgH*)
			ip netns exec "$_ns" nft delete table inet shmcfg 2>/dev/null
			ip -n "$_ns" link del eth0 2>/dev/null # (and its peer)
			;;
		esac
		ip netns del "$_ns" 2>/dev/null
	done
	NETNS_MADE=""
}

n_cleanup() {
	# (a signal may have come in the middle of a with_host: the segments of
	# this shell are removed with its own shmctl)
	SHMCTL=$NETNS_SHMCTL
	agents_stop_all
	m3_kill_all
	netns_down
	c_cleanup
}
trap n_cleanup EXIT
