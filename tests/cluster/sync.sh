#!/bin/sh
# SPDX-License-Identifier: MIT
# shmcfg-sync against a real etcd: the initial load, one etcd transaction as
# one commit tagged with its revision and who, a deleted key resetting the
# layer, a local user override kept, values this host rejects and bytes
# that are not JSON (or hold a NUL byte) reported (the rest applied, the
# agent alive), knob/ keys feeding the knob layer, --once, bad arguments,
# and exit 0 on SIGTERM.
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/cluster/lib.sh"

etcd_start
new_seg S one

# describe --json of an option: its value, source and layers
desc() { $SHMCTL describe "$S" "$1" --json >"$T_TMP/d.json" 2>/dev/null; }
holds() { desc "$1" && jcheck "$T_TMP/d.json" "$2" >/dev/null; }

# ---- arguments
t_rc "no segment: usage error" 2 "$SHMCFG_SYNC" --endpoints "$ETCD_EP" --cluster x
pass "... names what is missing" grep -q "no SEGMENT given" "$T_TMP/err"
run env -u SHMCFG_ETCD_ENDPOINTS "$SHMCFG_SYNC" --cluster x "$S"
pass "no endpoints: exit 2, one line naming them" sh -c "[ $RC = 2 ] && grep -q 'no etcd endpoints' '$T_TMP/err'"
t_rc "a bad endpoint: exit 2" 2 "$SHMCFG_SYNC" --endpoints ftp://x --cluster x "$S"
pass "... named" grep -q "etcd endpoint 'ftp://x'" "$T_TMP/err"
t_rc "a missing segment: exit 1" 1 "$SHMCFG_SYNC" --endpoints "$ETCD_EP" --cluster x --once cli-$$-nosuch
pass "... named" grep -q "segment 'cli-$$-nosuch'" "$T_TMP/err"

# ---- initial load, by --once first (environment fallbacks for both)
eput opt/app.limit 42
eput opt/app.mode '"safe"'
run env SHMCFG_ETCD_ENDPOINTS="$ETCD_EP" SHMCFG_CLUSTER="$CLUSTER" "$SHMCFG_SYNC" --once "$S"
pass "--once: exit 0" test "$RC" = 0
pass "--once: the values are in the cluster layer" holds app.limit "j['value'] == 42 and j['source'] == 'cluster'"
t_json "--once: one commit, tagged with revision $REV" \
	"j['cluster_revision'] == $REV and j['commits'][0]['cluster_revision'] == $REV and j['generation'] == 2" \
	$SHMCTL stat "$S" --json
run "$SHMCFG_SYNC" --endpoints "$ETCD_EP" --cluster "$CLUSTER" --once "$S"
t_json "--once again: nothing new, no commit" "j['generation'] == 2" $SHMCTL stat "$S" --json

# ---- the agent
sync_start a "$S" --host hostA
# (from the store's revision at its load + 1: at least $REV + 1; a run here
# once saw the store one past the last put, which no step of this test wrote)
pass "agent: watching" wait_log 10 a "watching from revision [0-9]+ on"
pass "... past the last put" sh -c "[ \$(sed -n 's/.*watching from revision \([0-9]*\) on.*/\1/p' '$T_TMP/a.log' | head -1) -ge $((REV + 1)) ]"
GEN=$(commit_field "$S" generation)

audited_put "alice@hostA" opt/app.limit=7 opt/app.ratio=0.25
pass "a txn of two values: applied" wait_stat 10 "$S" "j['cluster_revision'] == $REV"
t_json "... as exactly one generation, tagged with its revision and who" \
	"j['generation'] == $GEN + 1 and j['commits'][0]['cluster_revision'] == $REV and j['commits'][0]['who'] == 'alice@hostA' and j['commits'][0]['nchanged'] == 2" \
	$SHMCTL stat "$S" --json
pass "... both values" sh -c "[ \"\$($SHMCTL get $S app.limit)\" = 7 ] && [ \"\$($SHMCTL get $S app.ratio)\" = 0.25 ]"
pass "... the agent logged it" grep -q "applied revision $REV (generation $((GEN + 1)), 2 changes, by alice@hostA)" "$T_TMP/a.log"

edel opt/app.limit
pass "delete: applied" wait_stat 10 "$S" "j['cluster_revision'] == $REV"
pass "... the cluster layer is reset (the default shows)" holds app.limit "j['value'] == 10 and j['source'] == 'default'"

# a local user override wins over the cluster and stays
$SHMCTL set -q "$S" app.ratio=0.75
eput opt/app.ratio 0.125
pass "local override: the cluster value applied" wait_stat 10 "$S" "j['cluster_revision'] == $REV"
pass "... under the user's value, which stays" \
	holds app.ratio "j['value'] == 0.75 and j['source'] == 'user' and j['layers']['cluster']['value'] == 0.125"
$SHMCTL reset -q "$S" app.ratio
pass "... reset locally: the cluster value shows" holds app.ratio "j['value'] == 0.125 and j['source'] == 'cluster'"

# values this host rejects: the rest of the txn applied, each reported
audited_put "bob@hostB" opt/app.limit=1000 opt/app.mode='"fast"' opt/app.nosuch=1 opt/app.ratio='"x"'
pass "rejected values: the revision is applied" wait_stat 10 "$S" "j['cluster_revision'] == $REV"
pass "... the valid value of it too" holds app.mode "j['value'] == 'fast' and j['source'] == 'cluster'"
pass "... the out-of-range one keeps the previous cluster value (none: default)" holds app.limit "j['value'] == 10"
pass "... the ill-typed one keeps its previous cluster value" holds app.ratio "j['value'] == 0.125"
pass "... the agent is alive" agent_alive a
ectl get "${P}status/hostA/$S" --print-value-only >"$T_TMP/status.json"
STATUS_CHECK="sorted(r['key'] for r in j['rejected']) == ['opt/app.limit', 'opt/app.nosuch', 'opt/app.ratio'] and all(r['error'] for r in j['rejected'])"
pass "... reported in the status key" until_true 10 sh -c \
	"ETCDCTL_API=3 $ETCDCTL --endpoints '$ETCDCTL_EP' get '${P}status/hostA/$S' --print-value-only >'$T_TMP/status.json' && \"$PYTHON\" '$T_TMP/check.py' json \"$STATUS_CHECK\" '$T_TMP/status.json'"
pass "... with the option named" grep -q "unknown option 'app.nosuch'" "$T_TMP/status.json"
pass "... and in the segment's sync record" wait_stat 5 "$S" "j['sync']['rejected'] == 3 and j['sync']['host'] == 'hostA'"
pass "... and logged" grep -q "rejected opt/app.limit" "$T_TMP/a.log"

# bytes that are not JSON (nor UTF-8)
printf '\377\001{' >"$T_TMP/garbage"
eput_file opt/app.mode "$T_TMP/garbage"
pass "garbage bytes: the revision is applied" wait_stat 10 "$S" "j['cluster_revision'] == $REV"
pass "... reported" until_true 10 sh -c \
	"ETCDCTL_API=3 $ETCDCTL --endpoints '$ETCDCTL_EP' get '${P}status/hostA/$S' --print-value-only | grep -q '\"opt/app.mode\"'"
pass "... the previous cluster value stays" holds app.mode "j['value'] == 'fast' and j['source'] == 'cluster'"
pass "... the agent is alive" agent_alive a
# a NUL byte after a valid value: jansson stops reading at it, so "12\0"
# was taken as 12 (while "12\0junk" was not)
printf '12\000' >"$T_TMP/nul"
eput_file opt/app.limit "$T_TMP/nul"
pass "a value with a NUL byte: the revision is applied" wait_stat 10 "$S" "j['cluster_revision'] == $REV"
pass "... the value is rejected, not read as 12" holds app.limit "j['value'] == 10 and j['source'] == 'default'"
NUL_CHECK="[r['error'] for r in j['rejected'] if r['key'] == 'opt/app.limit'][0].endswith('holds a NUL byte at offset 2')"
pass "... reported in the status key, naming the NUL byte" until_true 10 sh -c \
	"ETCDCTL_API=3 $ETCDCTL --endpoints '$ETCDCTL_EP' get '${P}status/hostA/$S' --print-value-only >'$T_TMP/status.json' && \"$PYTHON\" '$T_TMP/check.py' json \"$NUL_CHECK\" '$T_TMP/status.json'"
pass "... the agent is alive" agent_alive a
# garbage in the audit record and the head: nobody named, nothing breaks
eput head 'not json'
eput_file audit/00000000000000000001 "$T_TMP/garbage"
eput opt/app.mode '"safe"'
pass "garbage audit record and head: later revisions apply" wait_stat 10 "$S" "j['cluster_revision'] == $REV"
pass "... the agent is alive" agent_alive a

# knob/ keys feed the knob layer of the options with that knob
audited_put "carol@hostC" knob/app/flag=true knob/app/n=5
pass "knobs: applied" wait_stat 10 "$S" "j['cluster_revision'] == $REV"
pass "... app.flag from its knob" holds app.flag "j['value'] is True and j['source'] == 'knob'"
pass "... app.n from its knob" holds app.n "j['value'] == 5 and j['source'] == 'knob'"
eput opt/app.n 9
pass "... a cluster value beats the knob" until_true 10 holds app.n "j['value'] == 9 and j['source'] == 'cluster'"
edel knob/app/flag
pass "... a deleted knob key resets the knob layer" until_true 10 holds app.flag "j['value'] is False and j['source'] == 'default'"

# a revision that changes no value is still one commit (its revision shows)
G0=$(commit_field "$S" generation)
eput opt/app.n 9
pass "a put of the same value: its revision applied" wait_stat 10 "$S" "j['cluster_revision'] == $REV and j['generation'] == $G0 + 1"

# the status key and the sync record
pass "status key: revision, generation, config hash, host, segment" until_true 10 sh -c \
	"ETCDCTL_API=3 $ETCDCTL --endpoints '$ETCDCTL_EP' get '${P}status/hostA/$S' --print-value-only >'$T_TMP/st2.json' && \"$PYTHON\" '$T_TMP/check.py' json \"j['revision'] == $REV and j['host'] == 'hostA' and j['segment'] == '$S' and len(j['config_hash']) == 32 and j['out_of_sync_since_ns'] == 0\" '$T_TMP/st2.json'"
pass "sync record: in sync, endpoints and cluster" wait_stat 5 "$S" \
	"j['sync']['in_sync'] and j['sync']['cluster'] == '$CLUSTER' and j['sync']['endpoints'] == '$ETCD_EP' and j['sync']['applied_revision'] == $REV"

agent_stop a
pass "SIGTERM: exit 0" test "$RC" = 0

# endpoints and cluster from a configuration file (doc/cluster.md)
printf '# the cluster of this host\nendpoints = %s\ncluster = %s\n' "$ETCD_EP" "$CLUSTER" >"$T_TMP/sync.conf"
chmod 600 "$T_TMP/sync.conf"
eput opt/app.limit 77
SHMCFG_CLUSTER_CONF=$T_TMP/sync.conf $SHMCFG_SYNC --once --host hostA "$S" 2>"$T_TMP/once.err"
pass "--once, etcd and cluster from the configuration file: applied" test "$(get "$S" app.limit)" = 77
chmod 620 "$T_TMP/sync.conf"
SHMCFG_CLUSTER_CONF=$T_TMP/sync.conf $SHMCFG_SYNC --once --host hostA "$S" 2>"$T_TMP/once.err"
pass "... a group-writable file: refused, exit 2" test $? = 2
pass "... in one line naming it" sh -c "test \$(wc -l <'$T_TMP/once.err') = 1 && grep -q 'sync.conf' '$T_TMP/once.err'"
# a cluster name with a newline in it (from the environment): refused in
# one line, the byte shown as \x0a
SHMCFG_CLUSTER="$(printf 'ab\ncd: a fake second line')" $SHMCFG_SYNC --once --endpoints "$ETCD_EP" "$S" 2>"$T_TMP/once.err"
pass "a cluster name with a newline: refused, exit 2, in one line" sh -c "test \$? = 0; test \$(wc -l <'$T_TMP/once.err') = 1 && grep -q 'x0a' '$T_TMP/once.err'"

# an endpoint with a space in it (a comment after the value, say): refused
# at once in one line, not retried as if etcd were down
$SHMCFG_SYNC --once --endpoints "$ETCD_EP # the local one" --cluster "$CLUSTER" "$S" 2>"$T_TMP/once.err"
pass "an endpoint with a space: refused, exit 2" test $? = 2
pass "... in one line naming it" sh -c "test \$(wc -l <'$T_TMP/once.err') = 1 && grep -q 'a space or control character' '$T_TMP/once.err'"
S0=$(date +%s)
$SHMCTL cluster show "$S" --endpoints "$ETCD_EP # the local one" --cluster "$CLUSTER" 2>"$T_TMP/show.err" >/dev/null
pass "... by shmctl cluster too, exit 1, without retrying" test $? = 1 -a "$(grep -c 'a space or control character' "$T_TMP/show.err")" = 1 -a $(( $(date +%s) - S0 )) -lt 5

# the agent attaches with SHMCFG_ATTACH_PREFAULT: a segment past the size
# the library maps lazily (8 MiB: 30,000 options) is mapped in it, but for
# the heap's room not yet carved and the schema region (read through the
# private or validated copy, never there)
"$PYTHON" -c 'print("format: 1\noptions:"); [print(f"  big.o{i}: {{type: int, default: {i}}}") for i in range(30000)]' >"$T_TMP/big.yaml"
seg B big
$SHMCTL create -q --no-env --schema "$T_TMP/big.yaml" "$B"
sync_start b --host hostB "$B"
pass "an agent on a segment of 30,000 options: watching" wait_log 60 b "watching from revision"
eval "PB=\$AGENT_PID_b"
# rss_of PID NAME: Size and Rss (kB) of the largest mapping of
# /dev/shm/shmcfg.NAME (the segment's; the accessors' copy maps its start)
rss_of() {
	awk -v f="/dev/shm/shmcfg.$2" '/^[0-9a-f]+-[0-9a-f]+ / { m = $NF == f; next }
		m && /^Size:/ { s = $2 } m && /^Rss:/ && s > bs { bs = s; br = $2 } END { print bs + 0, br + 0 }' "/proc/$1/smaps"
}
SR=$(rss_of "$PB" "$B")
diag "the agent's mapping of the segment (Size, Rss in kB): $SR"
# all of it but the heap's room not yet carved (the heap is the last region;
# its ends within pages: 8 kB)
HEAP_KB=$($SHMCTL stat "$B" --json | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["heap_bytes"] // 1024 + 8)')
# the schema region's whole pages, from the header (layout 13: schema_off and
# schema_size, two little-endian 64-bit words at byte 32)
SCHEMA_KB=$("$PYTHON" -c 'import struct, sys
off, size = struct.unpack_from("<QQ", open(sys.argv[1], "rb").read(48), 32)
print(((off + size) // 4096 - (off + 4095) // 4096) * 4)' "/dev/shm/shmcfg.$B")
pass "... its mapping of the segment is resident, but for the heap's room and the schema's" sh -c "set -- $SR; test \"\$1\" -gt 8192 -a \"\$2\" -ge \$((\$1 - $HEAP_KB - $SCHEMA_KB)) -a $SCHEMA_KB -gt 1024"
agent_stop b
pass "... SIGTERM: exit 0" test "$RC" = 0
if [ "$T_FAILED" != 0 ]; then diag_log a; diag_log b; cat "$T_TMP/once.err"; fi
t_done
