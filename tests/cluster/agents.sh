#!/bin/sh
# SPDX-License-Identifier: MIT
# One agent per segment (issue 23): a second shmcfg-sync on a synced
# segment, or --once beside a running agent, is refused (exit 3) with the
# running agent's pid, cluster and endpoints, and changes nothing (a
# mistyped --cluster used to wipe the host's cluster values); an agent
# killed with SIGKILL frees the segment at once; --take-over stops the
# running agent and takes its place; stat names the live agent.
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/cluster/lib.sh"

etcd_start
new_seg S one
eput opt/app.limit 42

sync_start a "$S" --host hostA
pass "the agent: in sync, applied" wait_get 10 "$S" app.limit 42
pass "... stat names it" wait_stat 10 "$S" "j['sync']['in_sync'] and j['sync']['pid'] == $AGENT_PID_a"
G=$(commit_field "$S" generation)

# ---- a second agent, of a mistyped cluster: refused, nothing changed
t_rc "a second agent: exit 3" 3 "$SHMCFG_SYNC" --endpoints "$ETCD_EP" --cluster "${CLUSTER}typo" "$S"
pass "... one line naming the running agent's pid, cluster and endpoints" grep -q \
	"$S: already synced by shmcfg-sync pid $AGENT_PID_a (cluster '$CLUSTER', endpoints $ETCD_EP); stop it first, or --take-over" \
	"$T_TMP/err"
pass "... the cluster values stay" test "$(get "$S" app.limit)" = 42
t_rc "--once beside the agent: exit 3" 3 "$SHMCFG_SYNC" --endpoints "$ETCD_EP" --cluster "${CLUSTER}typo" --once "$S"
t_json "... no commit, the record still the running agent's" \
	"j['generation'] == $G and j['sync']['pid'] == $AGENT_PID_a and j['sync']['cluster'] == '$CLUSTER' and j['sync']['in_sync']" \
	$SHMCTL stat "$S" --json
pass "the running agent lives on" agent_alive a

# ---- killed: the segment is free at once, stat says so
kill -9 "$AGENT_PID_a"
wait "$AGENT_PID_a" 2>/dev/null
AGENT_PID_a=
t_json "killed: stat says no agent runs (its claim ended with it)" \
	"not j['sync']['agent_alive'] and not j['sync']['in_sync']" $SHMCTL stat "$S" --json
sync_start b "$S" --host hostA
pass "a new agent starts on it" wait_stat 10 "$S" "j['sync']['in_sync'] and j['sync']['pid'] == $AGENT_PID_b"

# ---- --take-over: the running agent stops (exit 0), the new one syncs
eput opt/app.limit 43
sync_start c "$S" --host hostA --take-over
pass "--take-over: the running agent stops" until_true 15 sh -c "! kill -0 $AGENT_PID_b 2>/dev/null"
pass "... and says why" wait_log 5 c "taking over from shmcfg-sync pid $AGENT_PID_b"
pass "... the new one in sync, named by stat" wait_stat 10 "$S" "j['sync']['in_sync'] and j['sync']['pid'] == $AGENT_PID_c"
pass "... it applies" wait_get 10 "$S" app.limit 43
agent_stop b
pass "... the old one exited 0" test "$RC" = 0
agent_stop c
pass "stopped: exit 0" test "$RC" = 0
if [ "$T_FAILED" != 0 ]; then diag_log a; diag_log b; diag_log c; fi
t_done
