#!/bin/sh
# SPDX-License-Identifier: MIT
# The cluster-wide view (issue 23, item 3): every agent puts its host in the
# cluster's roster (P roster/HOST/SEGMENT) and its segment's schema in etcd
# (P schema/HASH); cluster status lists every expected host, and marks those
# missing (an agent stopped: its status key goes with it), out of sync, and
# overriding a cluster value locally (hash-ignored options too); cluster set
# --wait=all returns once every expected host applied the change, with the
# status already saying so, or names the hosts that did not or rejected it;
# cluster forget takes a host out of the roster; and status, log, show, diff
# and set work on a host without the segment (the schema from etcd, or
# --schema FILE).
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/cluster/lib.sh"

# the cluster tests' schema, and an option the config hash ignores
{
	cat "$top_srcdir/tests/cluster/schema.yaml"
	printf '  app.label:\n    type: str\n    default: ""\n    hash_ignored: true\n'
} >"$T_TMP/view.yaml"
view_seg() {
	seg "$1" "$2"
	eval "_s=\$$1"
	$SHMCTL create -q --no-env --schema "$T_TMP/view.yaml" "$_s" || { echo "not ok - cannot create $_s"; exit 1; }
}
etcd_start
view_seg A a
view_seg B b
view_seg C c
seg NONE nosuch # never created: a host without the segment
sync_start a "$A" --host hostA
sync_start b "$B" --host hostB
sync_start c "$C" --host hostC
for h in A B C; do
	eval "_s=\$$h"
	pass "agent on host$h: in sync" wait_stat 15 "$_s" "j['sync']['in_sync']"
done

# status --json into $T_TMP/st.json, hosts by name
status_json() {
	$SHMCTL cluster status "$NONE" --endpoints "$ETCD_EP" --cluster "$CLUSTER" --json >"$T_TMP/st.json" 2>"$T_TMP/st.err"
}
# st_holds PYEXPR: status --json satisfies it (h: {host: record})
st_holds() {
	status_json && "$PYTHON" -c '
import json, sys
j = json.load(open(sys.argv[1]))
h = {r.get("host"): r for r in j["hosts"]}
sys.exit(0 if eval(sys.argv[2]) else 1)' "$T_TMP/st.json" "$1"
}
wait_st() {
	until_true "$1" st_holds "$2"
}
cl() {
	$SHMCTL cluster "$@" --endpoints "$ETCD_EP" --cluster "$CLUSTER"
}

# ---- the roster and the schema in etcd
pass "each agent put its host in the roster" until_true 10 sh -c \
	"[ \"\$($ETCDCTL --endpoints $ETCDCTL_EP get --prefix --keys-only ${P}roster/ | grep -c .)\" = 3 ]"
ectl get --prefix "${P}roster/hostA/" --print-value-only >"$T_TMP/ro.json"
t_json "... its entry names host and segment" "j['host'] == 'hostA' and j['segment'] == '$A' and j['registered_ns'] > 0" \
	cat "$T_TMP/ro.json"
HASH=$($SHMCTL stat "$A" --json | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["schema_hash"])')
pass "... and the segment's schema under its hash" until_true 10 sh -c \
	"$ETCDCTL --endpoints $ETCDCTL_EP get ${P}schema/$HASH --print-value-only | grep -q 'app.label'"
ectl get "${P}schema/$HASH" --print-value-only >"$T_TMP/kept.yaml"
seg K kept
$SHMCTL create -q --no-env --schema "$T_TMP/kept.yaml" "$K"
t_json "... which loads back to the same schema hash" "j['schema_hash'] == '$HASH'" $SHMCTL stat "$K" --json
pass "status: the three hosts, in the roster, with their schema hash" wait_st 10 \
	"len(h) == 3 and all(r['in_roster'] and not r['missing'] and r['schema_hash'] == '$HASH' for r in h.values())"

# ---- --wait=all: every host applied it, and the status says so at return
run cl set "$A" app.limit=7 --wait=all
pass "set --wait=all: exit 0, all 3 hosts applied it" pyeval \
	'a[0] == "0" and "all 3 hosts applied revision" in a[1]' "$RC" "$OUT"
pass "... the status is consistent the moment it returns" st_holds \
	"all(r['revision'] >= j['newest_revision'] and not r['behind'] for r in h.values())"
for h in A B C; do
	eval "_s=\$$h"
	t_out "... host$h has the value" 7 $SHMCTL get "$_s" app.limit
done
run cl set "$A" app.limit=8 --wait
pass "set --wait (this host): exit 0" test "$RC" = 0
eval "_rev=\$(echo \"\$OUT\" | sed -n 's/.*revision \([0-9]*\)\$/\1/p')"
pass "... this host's status key says so at return" st_holds "h['hostA']['revision'] >= $_rev"

# ---- local overrides: named with option, layer and value
$SHMCTL set -q "$B" app.limit=99
cl set "$A" app.label=blue --wait=all >/dev/null
$SHMCTL set -q "$C" app.label=red
pass "status: an override of a cluster value is named (option, layer, value)" wait_st 10 \
	"{'option': 'app.limit', 'layer': 'user', 'value': 99} in h['hostB']['overrides'] and h['hostB']['noverrides'] == 1"
pass "... a hash-ignored one too (the hashes agree)" wait_st 10 \
	"{'option': 'app.label', 'layer': 'user', 'value': 'red'} in h['hostC']['overrides'] and h['hostA']['config_hash'] == h['hostC']['config_hash'] and h['hostA']['noverrides'] == 0"
run cl set "$A" app.limit=98 --wait=all
pass "--wait=all: a host that overrides the value is named (exit 0: it applied it)" pyeval '
a[0] == "0" and "host hostB/" in a[1] and "applied it, but overrides app.limit locally (user: 99)" in a[1]' "$RC" "$ERR"
run cl status "$NONE"
pass "... the table names them, and counts the hosts" pyeval '
"overrides app.limit (user): 99" in a[0] and "overrides app.label (user): \"red\"" in a[0] and
"2 overriding cluster values locally" in a[0]' "$OUT"
$SHMCTL reset -q "$C" app.label
pass "... a reset override is gone from the status" wait_st 10 "h['hostC']['noverrides'] == 0"
cl set "$A" app.note=short --wait=all >/dev/null
$SHMCTL set -q "$B" app.note="$("$PYTHON" -c 'print("x" * 5000)')"
pass "... a long value: its beginning and its size (a status key stays small)" wait_st 10 \
	"any(o['option'] == 'app.note' and o['value'] == chr(34) + 'x' * 255 + '... (5002 bytes)' for o in h['hostB']['overrides'])"

# ---- a host that rejects the change: --wait=all says which and why
seg D other
$SHMCTL create -q --no-env "$D" # the default schema: no app.limit
sync_start d "$D" --host hostD
pass "a fourth host, of another schema, in the roster" wait_st 15 "'hostD' in h and h['hostD']['in_roster']"
run cl set "$A" app.limit=9 --wait=all:10s
pass "--wait=all with a host that rejects the value: exit 1, the host and why named" pyeval '
a[0] == "1" and "all 4 hosts applied revision" in a[1] and "1 rejected a value of this change" in a[1] and
"host hostD/" in a[2] and "rejected app.limit: unknown option" in a[2]' "$RC" "$OUT" "$ERR"

# ---- a host stopped: missing at once; --wait=all names it
agent_stop d
pass "an agent stopped (SIGTERM): exit 0" test "$RC" = 0
pass "... its host is missing from the status at once (in the roster, no status key)" st_holds \
	"h['hostD']['missing'] and h['hostD']['in_roster'] and not h['hostD']['in_sync']"
run cl status "$NONE"
pass "... the table says MISSING, and counts it" pyeval '"MISSING" in a[0] and "1 missing" in a[0]' "$OUT"
run cl set "$A" app.limit=11 --wait=all:1s
pass "--wait=all with a host down: exit 1 after the timeout, naming it" pyeval '
a[0] == "1" and "1 of 4 hosts did not apply revision" in a[1] and "hostD/" in a[1] and "no status" in a[1]' \
	"$RC" "$ERR"
pass "... the others applied it" test "$($SHMCTL get "$A" app.limit)" = 11

# ---- forget
t_errmatch "forget a host whose agent runs: refused" 1 "its agent runs" cl forget "$A" hostA
t_errmatch "forget a host not in the roster: refused" 1 \
	"does not expect host 'nohost' for any segment \\(not in its roster\\)" cl forget "$D" nohost
t_errmatch "forget a host under another segment's name: refused, naming the segment it is listed for" 1 \
	"does not expect host 'hostD' for segment '$A': its roster lists it for segment '$D'\$" cl forget "$A" hostD
LONGSEG=$("$PYTHON" -c 'print("s" * 100)')
for i in 1 2 3 4 5; do eput "roster/hostX/$LONGSEG$i" '{"host": "hostX"}'; done
t_errmatch "... listed for 5 long names: whole names, as many as fit, and how many more" 1 \
	"lists it for segments '${LONGSEG}1', '${LONGSEG}2', '${LONGSEG}3' \\(and 2 more\\)\$" cl forget "$A" hostX
for i in 1 2 3 4 5; do edel "roster/hostX/$LONGSEG$i"; done
run cl forget "$D" hostD
pass "forget the stopped host: exit 0, said" pyeval 'a[0] == "0" and "is not expected any more" in a[1]' "$RC" "$OUT"
pass "... gone from the status" st_holds "'hostD' not in h and len(h) == 3"
run cl set "$A" app.limit=12 --wait=all
pass "... --wait=all no longer waits for it" pyeval 'a[0] == "0" and "all 3 hosts" in a[1]' "$RC" "$OUT"

# ---- a host without the segment: the schema kept in etcd, or --schema
run cl set "$NONE" app.limit=13 --wait=all
pass "set without a local segment: checked against etcd's schema, applied everywhere" pyeval \
	'a[0] == "0" and "all 3 hosts applied" in a[1]' "$RC" "$OUT"
t_out "... host A has it" 13 $SHMCTL get "$A" app.limit
t_errmatch "... a value that schema refuses: nothing written" 1 "app.limit" cl set "$NONE" app.limit=1000
t_errmatch "... an unknown option too" 1 "app.nope" cl set "$NONE" app.nope=1
t_errmatch "... --wait (this host) without the segment: refused, naming --wait=all" 1 "--wait=all" \
	cl set "$NONE" app.limit=14 --wait
t_out "... (nothing was written)" 13 $SHMCTL get "$A" app.limit
run cl set "$NONE" app.mode=safe --schema "$T_TMP/view.yaml" --wait=all
pass "set --schema FILE: exit 0" test "$RC" = 0
t_errmatch "... --schema refuses what it does not declare" 1 "app.label" \
	cl set "$NONE" app.label=x --schema "$top_srcdir/tests/cluster/schema.yaml"
run cl reset "$NONE" app.mode --wait=all
pass "reset without a local segment: exit 0" test "$RC" = 0
run cl log "$NONE" --json
pass "log without a local segment: every audit record" jcheck "$T_TMP/out" 'len(j["records"]) >= 8'
SEQ1=$("$PYTHON" -c 'import json,sys; r=json.load(open(sys.argv[1]))["records"]; print(r[0]["seq"])' "$T_TMP/out")
REV1=$("$PYTHON" -c 'import json,sys; r=json.load(open(sys.argv[1]))["records"]; print(r[0]["revision"])' "$T_TMP/out")
ectl put "${P}opt/app.ratio" '"not a float"' >/dev/null
run cl show "$NONE" --json
pass "show without a local segment: judged by etcd's schema" jcheck "$T_TMP/out" '
k = {x["key"]: x for x in j["keys"]}
k["opt/app.limit"]["value"] == 13 and "error" in k["opt/app.ratio"] and "error" not in k["opt/app.limit"]'
run cl diff "$NONE" "$SEQ1"
pass "diff SEQ: each value that moved since that record" pyeval '
a[0] == "0" and "app.limit: 7 -> 13" in a[1] and "app.label: unset -> \"blue\"" in a[1] and "app.mode" not in a[1]' \
	"$RC" "$OUT"
run cl diff "$NONE" "$SEQ1" $((SEQ1 + 1)) --json
pass "diff SEQ1 SEQ2 --json: the change between them" jcheck "$T_TMP/out" '
j["changes"] == [{"key": "opt/app.limit", "before": 7, "after": 8}] and j["from"]["seq"] < j["to"]["seq"] and
j["from"]["revision"] == '"$REV1"' and j["from"]["revision"] < j["to"]["revision"]'
t_errmatch "diff of no such record: one line" 1 "has no audit record 999999" cl diff "$NONE" 999999
ectl get "${P}schema/$HASH" --print-value-only >"$T_TMP/saved.yaml"
ectl put "${P}schema/$HASH" "$(cat "$top_srcdir/tests/cluster/schema.yaml")" >/dev/null
t_errmatch "a schema key whose text is another schema: not trusted, nothing written" 1 \
	"holds a schema of hash [0-9a-f]*, not $HASH: not trusted" cl set "$NONE" app.limit=5
ectl put "${P}schema/$HASH" "$(cat "$T_TMP/saved.yaml")" >/dev/null
t_out "... (nothing was written)" 13 $SHMCTL get "$A" app.limit
run cl status "$NONE"
pass "status without a local segment: exit 0, the 3 hosts" pyeval 'a[0] == "0" and "3 hosts" in a[1]' "$RC" "$OUT"

if [ "$T_FAILED" != 0 ]; then diag_log a; diag_log b; diag_log c; diag_log d; fi
t_done
