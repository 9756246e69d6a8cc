#!/bin/sh
# SPDX-License-Identifier: MIT
# shmcfg-sync --metrics-file (issue 23, item 8): a PATH that cannot be one
# refused at startup (exit 2, one line); the file, node_exporter's textfile
# format (tests/cli/promcheck.py), mode 0644, rewritten every second with
# every segment's metrics and the agent's: in sync, the revision applied,
# no lag; an etcd that stops answering shows; removed when the agent stops;
# --once leaves it.
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/cluster/lib.sh"

PROMCHECK=$top_srcdir/tests/cli/promcheck.py
etcd_start
new_seg S one
new_seg S2 two
eput opt/app.limit 42
D=$T_TMP/textfile
mkdir "$D"
F=$D/shmcfg.prom
HOST='node"7\x'

# ---- refused at startup
t_err "a PATH in no directory: exit 2, one line" 2 \
	"shmcfg-sync: --metrics-file: directory $T_TMP/nodir does not exist" \
	"$SHMCFG_SYNC" --endpoints "$ETCD_EP" --cluster "$CLUSTER" --metrics-file "$T_TMP/nodir/x.prom" "$S"
t_err "a PATH that is a directory: exit 2, one line" 2 \
	"shmcfg-sync: --metrics-file: $D exists and is not a regular file" \
	"$SHMCFG_SYNC" --endpoints "$ETCD_EP" --cluster "$CLUSTER" --metrics-file "$D" "$S"
# a mistyped flag: the closest one named; a flag's argument missing or given
# where none is taken: said as the flag was typed
for c in "--endpionts=x@unknown option '--endpionts=x'; did you mean '--endpoints'?" \
	"--cluster@option '--cluster' needs an argument" "--once=3@option '--once' takes no value" \
	"--zzzzzz@unknown option '--zzzzzz'" "-x@option '-x' is unknown"; do
	run "$SHMCFG_SYNC" "${c%%@*}"
	pass "shmcfg-sync ${c%%@*}: exit 2, the reason first" test "$RC" = 2 -a \
		"$(head -1 "$T_TMP/err")" = "shmcfg-sync: ${c#*@}"
done
run "$SHMCFG_SYNC" --endpoints "$ETCD_EP" --cluster "$CLUSTER" --host "$(printf 'h\351')" "$S"
pass "a host name that is not UTF-8: exit 2, the reason first" test "$RC" = 2 -a \
	"$(head -1 "$T_TMP/err")" = "shmcfg-sync: bad host name: 1 to 63 bytes of UTF-8, no '/', space or control character"
mkfifo "$D/fifo.prom"
t_err "a PATH that is a FIFO: exit 2, one line" 2 \
	"shmcfg-sync: --metrics-file: $D/fifo.prom exists and is not a regular file" \
	"$SHMCFG_SYNC" --endpoints "$ETCD_EP" --cluster "$CLUSTER" --metrics-file "$D/fifo.prom" "$S"
rm -f "$D/fifo.prom"

# prom_holds CHECK: the file is in the format, and CHECK holds over m
# (samples: m[NAME][SEGMENT]) and lab (each sample's labels)
prom_holds() {
	"$PYTHON" "$PROMCHECK" "$F" >"$T_TMP/m.json" 2>/dev/null && jcheck "$T_TMP/m.json" \
		"m = j['samples']; lab = j['labels']
($1)" >/dev/null
}
# wait_prom SECONDS CHECK
wait_prom() {
	until_true "$1" prom_holds "$2"
}

sync_start a "$S" "$S2" --host "$HOST" --metrics-file "$F"
pass "the agent applies" wait_get 10 "$S" app.limit 42
pass "the file: in sync, both segments, the revision applied" wait_prom 10 "
m['shmcfg_sync_in_sync'] == {'$S': 1, '$S2': 1} and m['shmcfg_agent_etcd_up'] == {'$S': 1, '$S2': 1} and
m['shmcfg_sync_applied_revision']['$S'] == $REV and m['shmcfg_agent_lag_revisions']['$S'] == 0 and
m['shmcfg_agent_watch_revision']['$S'] == $REV"
run "$PYTHON" "$PROMCHECK" "$F" --parser
if [ "$RC" = 3 ] && [ "${SHMCFG_REQUIRE_PROMETHEUS_CLIENT:-0}" != 1 ]; then
	skip "prometheus_client's parser reads it (prometheus_client is not installed)"
else
	pass "... prometheus_client's parser reads the same samples" test "$RC" = 0
fi
pass "... mode 0644" test "$(stat -c %a "$F")" = 644
pass "... the agent's counters and the sync record's" prom_holds "
m['shmcfg_agent_loads_total']['$S'] == 1 and m['shmcfg_agent_revisions_applied_total']['$S'] >= 1 and
m['shmcfg_agent_apply_errors_total']['$S'] == 0 and
m['shmcfg_sync_agent_up']['$S'] == 1 and m['shmcfg_sync_out_of_sync_seconds']['$S'] == 0 and
m['shmcfg_sync_rejected_keys']['$S'] == 0 and 0 <= m['shmcfg_sync_record_age_seconds']['$S'] < 10 and
m['shmcfg_agent_out_of_sync_seconds']['$S'] == 0 and m['shmcfg_segment_up']['$S'] == 1 and
m['shmcfg_generation']['$S'] >= 2 and m['shmcfg_cluster_revision']['$S'] == $REV"
pass "... the cluster and the host as labels (the backslash doubled, then escaped)" prom_holds "
sorted((l['segment'], l['cluster'], l['host']) for l in lab['shmcfg_sync_info']) ==
sorted([('$S', '$CLUSTER', 'node\"7\\\\\\\\x'), ('$S2', '$CLUSTER', 'node\"7\\\\\\\\x')])"
pass "... its temporary files are hidden: no other file the collector reads" test "$(ls "$D")" = shmcfg.prom
G=$(commit_field "$S" generation)

# ---- rewritten: a revision shows within a second or so
N=$("$PYTHON" -c "import json; print(int(json.load(open('$T_TMP/m.json'))['samples']['shmcfg_agent_revisions_applied_total']['$S']))")
eput opt/app.limit 43
pass "a revision: the file follows" wait_prom 10 "
m['shmcfg_sync_applied_revision']['$S'] == $REV and m['shmcfg_generation']['$S'] == $G + 1 and
m['shmcfg_commits_total']['$S'] == $G and m['shmcfg_agent_revisions_applied_total']['$S'] == $N + 1"
pass "... and says what shmctl stat says" prom_holds "
m['shmcfg_generation']['$S'] == $(commit_field "$S" generation) and
m['shmcfg_heap_used_bytes']['$S'] == $($SHMCTL stat "$S" --json | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["heap_used"])')"

# ---- etcd stops answering: out of sync, in the file too
etcd_pause
pass "etcd silent: the file says out of sync, with errors" wait_prom 20 "
m['shmcfg_agent_etcd_up']['$S'] == 0 and m['shmcfg_sync_in_sync']['$S'] == 0 and
m['shmcfg_sync_out_of_sync_seconds']['$S'] > 0 and m['shmcfg_agent_out_of_sync_seconds']['$S'] > 0 and
m['shmcfg_agent_etcd_errors_total']['$S'] >= 1"
etcd_resume
pass "etcd back: in sync again" wait_prom 20 "
m['shmcfg_agent_etcd_up']['$S'] == 1 and m['shmcfg_sync_in_sync'] == {'$S': 1, '$S2': 1}"

# ---- stopped: no metrics of a state gone
agent_stop a
pass "stopped: exit 0, the file removed" test "$RC" = 0 -a ! -e "$F"

# ---- --once: written once, and left
t_rc "--once --metrics-file: exit 0" 0 \
	"$SHMCFG_SYNC" --endpoints "$ETCD_EP" --cluster "$CLUSTER" --once --metrics-file "$F" "$S"
pass "... the file left, in the format, of that run" prom_holds "
m['shmcfg_agent_loads_total'] == {'$S': 1} and m['shmcfg_sync_applied_revision']['$S'] == $REV"
if [ "$T_FAILED" != 0 ]; then diag_log a; cat "$F" 2>/dev/null | sed 's/^/#   /' | head -40; fi
t_done
