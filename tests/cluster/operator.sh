#!/bin/sh
# SPDX-License-Identifier: MIT
# Three simulated hosts driven only through `shmctl cluster` and shmcfg-sync
# (issue 13's "done means"): they converge on every change, keep a local
# override, survive an etcd restart, a silent partition (etcd SIGSTOPped)
# and a compaction missed by a stopped agent, and show who changed what
# (status and log configured by a file, SHMCFG_CLUSTER_CONF).
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/cluster/lib.sh"

etcd_start
new_seg H1 h1
new_seg H2 h2
new_seg H3 h3
HOSTS="1 2 3"
seg_of() { eval "echo \$H$1"; }
for k in $HOSTS; do sync_start "h$k" "$(seg_of "$k")" --host "h$k"; done
C="--endpoints $ETCD_EP --cluster $CLUSTER"
# status and log find etcd and the cluster in a configuration file, as on
# an operator's machine (never in the segment's agent record)
printf '# the operators of this test\nendpoints = %s\ncluster = %s\n' "$ETCD_EP" "$CLUSTER" >"$T_TMP/cluster.conf"
chmod 600 "$T_TMP/cluster.conf"
export SHMCFG_CLUSTER_CONF="$T_TMP/cluster.conf"
unset SHMCFG_ETCD_ENDPOINTS SHMCFG_CLUSTER

# every host has OPT = JSON, with that source
all_have() {
	for _k in $HOSTS; do
		wait_get 10 "$(seg_of "$_k")" "$1" "$2" || return 1
	done
}
# the applied revision of every host (stat --json: cluster_revision) is REV
all_at() {
	for _k in $HOSTS; do
		wait_stat 10 "$(seg_of "$_k")" "j['cluster_revision'] == $1" || return 1
	done
}
# the store's revision of the newest audit record's head
head_rev() {
	ectl get "${P}head" -w json |
		"$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["kvs"][0]["mod_revision"])'
}
diag_agents() { for _k in $HOSTS; do diag_log "h$_k"; done; }
# wait_status SECONDS CHECK: until `cluster status --json` satisfies CHECK.
# The agents write their status key on their own beat (up to a second after
# a commit), so the status lags the segments a little.
wait_status() {
	_wst_chk=$2
	until_true "$1" _status_holds
}
_status_holds() {
	$SHMCTL cluster status "$H1" --json >"$T_TMP/status.json" 2>/dev/null &&
		jcheck "$T_TMP/status.json" "$_wst_chk" >/dev/null
}

# ---- converge
for k in $HOSTS; do wait_log 10 "h$k" "watching from revision" || { not_ok "agent h$k started"; diag_log "h$k"; }; done
run $SHMCTL cluster set "$H1" app.limit=42 app.mode=safe --reason "first change" $C --wait=10
pass "cluster set --wait: exit 0" test "$RC" = 0
pass "three hosts converge on app.limit" all_have app.limit 42
pass "... and app.mode" all_have app.mode '"safe"'
R1=$(head_rev)
pass "... all at the set's revision $R1, in one commit each" all_at "$R1"
for k in $HOSTS; do
	t_json "h$k: the commit names the revision and who" \
		"c = j['commits'][0]; c['cluster_revision'] == $R1 and c['who'].startswith('$(id -un)@') and c['nchanged'] == 2" \
		$SHMCTL stat "$(seg_of "$k")" --json
done
wait_status 10 "len(j['hosts']) == 3 and not any(h['behind'] for h in j['hosts'])"
t_json "cluster status: three hosts, none behind, one config hash" \
	"len(j['hosts']) == 3 and not any(h['behind'] or h['hash_differs'] for h in j['hosts']) and len({h['config_hash'] for h in j['hosts']}) == 1" \
	$SHMCTL cluster status "$H1" --json

# ---- a local override stays local
$SHMCTL set -q "$H2" app.limit=7
run $SHMCTL cluster set "$H3" app.limit=50 --reason "second" $C --wait=10
pass "cluster set: exit 0" test "$RC" = 0
pass "h1 takes the new cluster value" wait_get 10 "$H1" app.limit 50
pass "h3 too" wait_get 10 "$H3" app.limit 50
R2=$(head_rev)
pass "... every host applied revision $R2, h2 too" all_at "$R2"
t_json "h2 keeps its own override (user beats cluster)" \
	"j['value'] == 7 and j['source'] == 'user'" $SHMCTL describe "$H2" app.limit --json
wait_status 10 "[h['host'] for h in j['hosts'] if h['hash_differs']] == ['h2']"
t_json "cluster status flags h2's config hash" \
	"[h['host'] for h in j['hosts'] if h['hash_differs']] == ['h2']" $SHMCTL cluster status "$H1" --json
$SHMCTL reset -q "$H2" app.limit
pass "h2's reset uncovers the cluster's value" wait_get 5 "$H2" app.limit 50

# ---- etcd restarts: the agents resume their watch, no reload
etcd_restart
run $SHMCTL cluster set "$H1" app.ratio=0.25 --reason "after restart" $C --wait=15
pass "after an etcd restart: cluster set works" test "$RC" = 0
pass "... and all three hosts converge" all_have app.ratio 0.25
for k in $HOSTS; do
	pass "h$k resumed its watch without a reload" wait_log 10 "h$k" "resumed watching from revision"
done

# ---- a silent partition: etcd stopped, its sockets still accept
etcd_pause
for k in $HOSTS; do
	pass "h$k: out of sync within 5 s of the partition (stat)" \
		wait_stat 8 "$(seg_of "$k")" "j['sync'] is not None and not j['sync']['in_sync']"
done
t_json "the segment keeps its values meanwhile" "j['value'] == 0.25 and j['source'] == 'cluster'" \
	$SHMCTL describe "$H3" app.ratio --json
etcd_resume
run $SHMCTL cluster set "$H2" app.limit=60 --reason "after the partition" $C --wait=15
pass "after SIGCONT: cluster set works" test "$RC" = 0
pass "... all three hosts converge" all_have app.limit 60
for k in $HOSTS; do
	pass "h$k back in sync" wait_stat 10 "$(seg_of "$k")" "j['sync']['in_sync'] and j['sync']['error'] == ''"
done

# ---- a compaction that a disconnected agent missed: it reloads
eval "P3=\$AGENT_PID_h3"
kill -STOP "$P3"
etcd_restart # its connections go; it will find out when it runs again
$SHMCTL cluster set "$H1" app.limit=70 --reason "while h3 slept" $C >/dev/null
$SHMCTL cluster reset "$H1" app.mode --reason "while h3 slept" $C >/dev/null
ectl compact "$(etcd_revision)" >/dev/null
kill -CONT "$P3"
pass "the other hosts converge meanwhile" wait_get 10 "$H2" app.limit 70
pass "h3 wakes, finds its revision compacted, reloads" wait_log 15 h3 "compacted"
pass "... and converges: app.limit" wait_get 10 "$H3" app.limit 70
pass "... and app.mode, reset (the delete seen through the reload)" wait_get 10 "$H3" app.mode '"fast"'
R3=$(head_rev)
pass "all at revision $R3" all_at "$R3"

# ---- who changed what
t_json "cluster log: every change with who and reason" \
	"[r['reason'] for r in j['records']] == ['first change', 'second', 'after restart', 'after the partition', 'while h3 slept', 'while h3 slept'] and all(r['who'] for r in j['records'])" \
	$SHMCTL cluster log "$H1" --json
SEQ=$($SHMCTL cluster log "$H1" --json | "$PYTHON" -c 'import json,sys; print([r for r in json.load(sys.stdin)["records"] if r["reason"] == "after the partition"][0]["seq"])')
run $SHMCTL cluster rollback "$H1" "$SEQ" $C
pass "rollback of 'after the partition' is refused: app.limit moved since" test "$RC" = 1
run $SHMCTL cluster rollback "$H1" "$SEQ" --force --reason "undo" $C --wait=10
pass "... forced: exit 0" test "$RC" = 0
pass "... every host goes back to 50" all_have app.limit 50

for k in $HOSTS; do
	pass "agent h$k still alive" agent_alive "h$k"
	agent_stop "h$k"
	pass "agent h$k exits 0 on SIGTERM" test "$RC" = 0
done
[ "$T_FAILED" = 0 ] || diag_agents
t_done
