#!/bin/sh
# SPDX-License-Identifier: MIT
# shmcfg-sync through etcd's outages: a restart (the agent resumes from its
# revision without a reload), a silent partition (etcd SIGSTOPped: out of
# sync reported within 5 s, the segment keeps its values, converges after
# SIGCONT) and a compaction of revisions the agent has not seen (a full
# reload that converges).
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/cluster/lib.sh"

etcd_start
new_seg S out

eput opt/app.limit 11
sync_start a "$S" --host h1
pass "agent: loaded and watching" wait_log 10 a "watching from revision"
pass "... the value" wait_get 10 "$S" app.limit 11

# ---- restart: resume, no reload
etcd_restart
eput opt/app.limit 12
pass "etcd restarted: the agent resumes without a reload" wait_log 15 a "resumed watching from revision"
pass "... and applies the change made after the restart" wait_stat 15 "$S" "j['cluster_revision'] == $REV"
pass "... loaded once only" test "$(grep -c 'loaded ' "$T_TMP/a.log")" = 1

# ---- silent partition
etcd_pause
T0=$(date +%s%N)
# the agent notices within LIVENESS_MS after a missed keepalive (< 5 s, the
# promise; make bench-sync's figure); the test allows 15 s, as polling with
# shmctl and python on a loaded machine adds seconds (5.6 s seen at load 14)
pass "etcd SIGSTOPped: out of sync reported (promised within 5 s)" wait_stat 15 "$S" "not j['sync']['in_sync']"
T1=$(date +%s%N)
diag "detected after $(( (T1 - T0) / 1000000 )) ms"
pass "... the agent names the failure" wait_log 1 a "error: etcd"
pass "... the segment keeps its values" wait_get 1 "$S" app.limit 12
pass "... the agent is alive" agent_alive a
etcd_resume
eput opt/app.limit 13
pass "SIGCONT: back in sync" wait_stat 15 "$S" "j['sync']['in_sync'] and j['cluster_revision'] == $REV"
pass "... the value converged" wait_get 1 "$S" app.limit 13
pass "... without a reload" test "$(grep -c 'loaded ' "$T_TMP/a.log")" = 1

# ---- compaction while the agent is stopped (SIGSTOP): its watch broke
# with etcd's restart, and the revision it resumes from is compacted
kill -STOP "$AGENT_PID_a"
etcd_restart
eput opt/app.limit 14
eput opt/app.mode '"safe"'
MODE_REV=$(etcd_revision)
edel opt/app.limit
ectl compact "$REV" >/dev/null
kill -CONT "$AGENT_PID_a"
pass "compacted while stopped: the agent reloads" wait_log 15 a "compacted; reloading"
pass "... a full load" wait_log 5 a "loaded 1 key of"
# a load is tagged with its newest key's revision (doc/cluster.md): the
# delete, made without the head key as etcdctl makes it, leaves no revision
pass "... converges, at the newest key's revision" \
	wait_stat 10 "$S" "j['cluster_revision'] == $MODE_REV and j['sync']['in_sync']"
pass "... the deleted key's layer reset" wait_get 1 "$S" app.limit 10
pass "... the new key applied" wait_get 1 "$S" app.mode '"safe"'

# ---- etcd replaced: its data wiped, started again empty (the same
# cluster id: same name, token and peers). The agent must see the store's
# revision go back, load again and follow the new revisions (before: it
# resumed from its old revision and applied nothing, in sync)
OLD=$(commit_field "$S" cluster_revision)
etcd_stop
rm -rf "$ETCD_DIR/data"
etcd_run
eput opt/app.limit 7
pass "etcd wiped and started again: the agent notices" wait_log 20 a "revision went back"
pass "... applies the new store's values" wait_get 15 "$S" app.limit 7
pass "... the key the old store had is gone" wait_get 5 "$S" app.mode '"fast"'
pass "... and carries the new store's revision ($REV; it had $OLD)" wait_stat 10 "$S" \
	"j['cluster_revision'] == $REV and j['sync']['in_sync']"

# ---- an agent that hangs (SIGSTOP) cannot say so: its record stops
# moving (it rewrites it every second), and shmctl stat calls it stale
kill -STOP "$AGENT_PID_a"
pass "a stopped agent: stat no longer says in sync" wait_stat 20 "$S" \
	"not j['sync']['in_sync'] and j['sync']['stale'] and j['sync']['agent_alive']"
run shmctl stat "$S"
pass "... stat says it does not respond" sh -c "echo \"\$1\" | grep -q 'NOT RESPONDING'" sh "$OUT"
kill -CONT "$AGENT_PID_a"
pass "... continued: in sync again" wait_stat 10 "$S" "j['sync']['in_sync'] and not j['sync']['stale']"

# ---- the segment replaced under the agent (shmctl create --force, as a
# restarted job does): the agent follows the new one, applies the cluster
# values to it and records itself there; removed, it says so, and follows
# the next one of that name
eput opt/app.limit 8
pass "before the replacement: applied" wait_get 10 "$S" app.limit 8
$SHMCTL create -q --force --no-env --schema "$top_srcdir/tests/cluster/schema.yaml" "$S" 2>/dev/null
pass "segment replaced: the agent follows the new one" wait_log 10 a "the segment was replaced: following the new one"
pass "... the cluster value in the new segment" wait_get 10 "$S" app.limit 8
pass "... its record there, in sync at the revision" wait_stat 10 "$S" \
	"j['sync']['in_sync'] and j['cluster_revision'] == $REV and j['sync']['pid'] == $AGENT_PID_a"
$SHMCTL rm -f "$S"
eput opt/app.limit 9
$SHMCTL create -q --no-env --schema "$top_srcdir/tests/cluster/schema.yaml" "$S"
pass "removed, then created again: followed, the later value applied" wait_get 10 "$S" app.limit 9

# ---- etcd down for a while (refused at once: the agent retries several
# times a second): one error line, then a summary per period (here 2 s:
# SHMCFG_SYNC_LOG_SUMMARY_S), every line stamped with the time
new_seg L log
SHMCFG_SYNC_LOG_SUMMARY_S=2 sync_start l "$L" --host h1
pass "a second agent, summing up each 2 s: watching" wait_log 10 l "watching from revision"
etcd_stop
pass "etcd down: out of sync" wait_log 15 l "out of sync since"
pass "... a summary after 2 s, counting the errors not shown" \
	wait_log 15 l "still out of sync, for [0-9]+ s: [0-9]+ more errors? in the last minute, the last: "
N=$(grep -c "error: " "$T_TMP/l.log")
pass "... one error line so far, not one per retry ($N)" test "$N" = 1
etcd_run
pass "etcd back: in sync again, the errors since the summary counted" wait_log 20 l "in sync again \(out of sync for"
pass "every line starts with its UTC time (ms)" sh -c \
	"! grep -Evq '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z shmcfg-sync: ' '$T_TMP/l.log'"
agent_stop l

# ---- a new agent on a synced segment: loads, commits nothing
agent_stop a
pass "agent stopped: exit 0" test "$RC" = 0
G=$(commit_field "$S" generation)
sync_start b "$S" --host h1
pass "a new agent: loads" wait_log 10 b "watching from revision"
t_json "... and commits nothing (nothing new)" "j['generation'] == $G" $SHMCTL stat "$S" --json
if [ "$T_FAILED" != 0 ]; then diag_log a; diag_log b; cat "$T_TMP/stat.json" | head -80 | sed "s/^/#  /"; fi
t_done
