#!/bin/sh
# SPDX-License-Identifier: MIT
# shmctl cluster against a real etcd (tests/cluster/lib.sh starts one on
# unix sockets): set is one etcd transaction (one revision) with its audit
# record and head; a refused value writes nothing; the errors are set's;
# reset; show and log (text and JSON); rollback, its refusal when a value
# moved and --force; concurrent writers lose nothing; bad endpoints, missing
# settings, the configuration file (flags > environment > file, a file
# others may write refused), too large a transaction (ours and the server's
# limit), garbage bytes in etcd, text in it that a terminal would act on
# (shown escaped); status of hosts (8000 of them); warnings of
# values that hosts' value heaps have no room for; --wait; a segment whose
# agent follows another cluster. What etcd holds is read with etcdctl and
# parsed with python3.
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/cluster/lib.sh"

seg S clu

# A schema: the typed options of the error tests, and 130 ints for the
# transaction size limits and the concurrent writers.
{
	cat <<'EOF'
format: 1
options:
  app.fast:
    type: bool
    default: false
    knob: "app/fast"
  app.level:
    type: int
    default: 1
    min: 0
    max: 10
  app.lvl:
    type: int
    alias: app.level
  app.mode:
    type: str
    default: "auto"
    choices: ["auto", "on", "off"]
  app.tags:
    type: list
    default: ["x"]
  other.fast:
    type: bool
    default: false
EOF
	int_options many 1 130
} >"$T_TMP/schema.yaml"
run shmctl create --schema "$T_TMP/schema.yaml" --quiet "$S"
[ "$RC" = 0 ] || { not_ok "create the segment"; diag_run; t_done; }

# etcd's own limit lowered below ours: 100 keys pass shmctl's check (102
# operations <= 128) and meet the server's (--max-txn-ops 101)
etcd_start --max-txn-ops 101
P=/shmcfg/v1/c1/
unset SHMCFG_ETCD_ENDPOINTS SHMCFG_CLUSTER
# no configuration file unless a test writes one (not this host's /etc)
CONF=$T_TMP/cluster.conf
export SHMCFG_CLUSTER_CONF="$CONF"

# edump: every key under $P into $T_TMP/edump.json as
# {"rev": store revision, "keys": {KEY-without-P: {"value", "mod", "create"}}}
edump() {
	ectl get --prefix "$P" -w json >"$T_TMP/ej" 2>"$T_TMP/ej.err" || return 1
	"$PYTHON" - "$P" "$T_TMP/ej" >"$T_TMP/edump.json" <<'EOF'
import base64, json, sys
p, f = sys.argv[1], sys.argv[2]
j = json.load(open(f))
out = {"rev": int(j["header"]["revision"]), "keys": {}}
for kv in j.get("kvs", []):
    k = base64.b64decode(kv["key"]).decode("utf-8", "replace")
    out["keys"][k[len(p):]] = {"value": base64.b64decode(kv.get("value", "")).decode("utf-8", "replace"),
                               "mod": int(kv["mod_revision"]), "create": int(kv["create_revision"])}
print(json.dumps(out))
EOF
}
# echeck DESC EXPR: EXPR over j = edump's object (and jv(k): the value of
# key k parsed as JSON, None if absent)
echeck() {
	if edump && jcheck "$T_TMP/edump.json" "
def jv(k):
    return json.loads(j['keys'][k]['value']) if k in j['keys'] else None
$2"; then ok "$1"; else not_ok "$1"; diag_run; fi
}
erev() { etcd_revision; }

# --- where etcd is ------------------------------------------------------------
t_errmatch "no endpoints: one line naming the flag, the variable and the file" 1 \
	"no etcd endpoints: give --endpoints URL\[,URL\], set SHMCFG_ETCD_ENDPOINTS, or write 'endpoints = URL\[,URL\]' in $CONF \(there is no such file\)" \
	shmctl cluster show "$S" --cluster c1
t_errmatch "no cluster: one line naming the flag, the variable and the file" 1 \
	"no cluster name: give --cluster NAME, set SHMCFG_CLUSTER, or write 'cluster = NAME' in $CONF" \
	shmctl cluster show "$S" --endpoints "$ETCD_EP"
t_errmatch "a cluster name that is not one key element, and where it came from" 1 "cluster name 'a/b' \(from --cluster\)" \
	shmctl cluster show "$S" --endpoints "$ETCD_EP" --cluster a/b
# every cluster command's JSON carries the name: a byte that is no UTF-8
# (here a Latin-1 e-acute) is refused, shown as \xNN
t_errmatch "a cluster name that is not UTF-8: refused, shown escaped" 1 "cluster name 'c\\\\xe9' \(from --cluster\): 1 to 63 bytes of UTF-8" \
	shmctl cluster show "$S" --endpoints "$ETCD_EP" --cluster "$(printf 'c\351')" --json
run shmctl cluster show "$S" --endpoints "unix:$T_TMP/nope.sock" --cluster c1 --timeout 1
pass "an unreachable endpoint: retried until --timeout, then one line naming it, how long and how often" \
	test "$RC" = 1 -a "$(wc -l <"$T_TMP/err")" = 1 -a -n "$(grep -E "cluster 'c1': gave up after retrying for 1\.[0-9] s \([0-9]+ tries\): .*unix:$T_TMP/nope\.sock" "$T_TMP/err")"
t_errmatch "an unreachable http endpoint is named" 1 "127\.0\.0\.1:9" \
	shmctl cluster set "$S" level=3 --endpoints "http://127.0.0.1:9" --cluster c1 --timeout 300ms
t_err "--timeout abc: one line naming the flag and the text" 2 \
	"shmctl: cluster show: --timeout: bad duration 'abc' (give 500ms, 5s, 2m, 1h or seconds)" \
	shmctl cluster show "$S" --timeout abc
t_errmatch "endpoint text that is not a URL" 1 "ftp://x" \
	shmctl cluster show "$S" --endpoints "ftp://x" --cluster c1
t_usage "cluster without a subcommand" shmctl cluster
t_err "an unknown subcommand: one line" 2 \
	"shmctl: cluster: unknown subcommand 'frob' (set, reset, show, log, diff, rollback, status, forget)" shmctl cluster frob "$S"
t_err "a mistyped subcommand: did you mean" 2 "shmctl: cluster: unknown subcommand 'stauts'; did you mean 'status'?" \
	shmctl cluster stauts "$S"
t_usage "cluster set without OPTION=VALUE" shmctl cluster set "$S"
t_usage "cluster set with a bare word" shmctl cluster set "$S" level
t_err "--wait=abc: one line naming the flag and the text" 2 \
	"shmctl: cluster set: --wait: bad duration 'abc' (give 500ms, 5s, 2m, 1h or seconds)" \
	shmctl cluster set "$S" level=3 --wait=abc
run shmctl cluster set --help
pass "cluster set --help" test "$RC" = 0 -a -n "$(echo "$OUT" | grep -- '--reason')"
run shmctl cluster --help
pass "cluster --help lists the subcommands" test "$RC" = 0 -a -n "$(echo "$OUT" | grep -- 'rollback')"

# --- the configuration file: flags > environment > file ---------------------------
printf '# the operators of c1\n\n  endpoints = %s\ncluster=c1\n' "$ETCD_EP" >"$CONF"
chmod 644 "$CONF"
t_json "the configuration file gives endpoints and cluster" 'j["cluster"] == "c1"' shmctl cluster show "$S" --json
t_json "--cluster beats the file" 'j["cluster"] == "c2"' shmctl cluster show "$S" --json --cluster c2
t_json "SHMCFG_CLUSTER beats the file" 'j["cluster"] == "c3"' env SHMCFG_CLUSTER=c3 $SHMCTL cluster show "$S" --json
printf 'endpoints = x\ncluster = a b\n' >"$T_TMP/c2.conf"
t_errmatch "a bad cluster name from the file names its line" 1 "cluster name 'a b' \(from $T_TMP/c2.conf:2\)" \
	env SHMCFG_CLUSTER_CONF="$T_TMP/c2.conf" $SHMCTL cluster show "$S"
chmod 664 "$CONF"
t_errmatch "a file its group may write: refused, one line naming it and why" 1 \
	"configuration file $CONF is writable by its group \(mode 0664\): refused" shmctl cluster show "$S"
chmod 646 "$CONF"
t_errmatch "a file others may write: refused" 1 "configuration file $CONF is writable by others" shmctl cluster show "$S"
chmod 644 "$CONF"
t_json "... flags that leave nothing to the file do not read it" 'j["cluster"] == "c1"' \
	env SHMCFG_CLUSTER_CONF="$T_TMP" $SHMCTL cluster show "$S" --json --endpoints "$ETCD_EP" --cluster c1
t_errmatch "a directory: refused" 1 "configuration file $T_TMP is not a regular file: refused" \
	env SHMCFG_CLUSTER_CONF="$T_TMP" $SHMCTL cluster show "$S"
if [ "$(id -u)" = 0 ]; then
	chown 65534 "$CONF"
	t_errmatch "a file of another user: refused" 1 \
		"configuration file $CONF is owned by uid 65534, neither root nor you \(uid 0\): refused" shmctl cluster show "$S"
	chown 0 "$CONF"
else
	skip "a file of another user: refused (needs root to give it away)"
fi
cp "$CONF" "$CONF.good"
printf 'cluster = c1\nendpoints %s\n' "$ETCD_EP" >"$CONF"
t_errmatch "a line without '=': FILE:LINE" 1 "$CONF:2: not 'KEY = VALUE' \(keys: endpoints, cluster\)" shmctl cluster show "$S"
printf 'cluster = c1\n\nendpoint = %s\n' "$ETCD_EP" >"$CONF"
t_errmatch "an unknown key: FILE:LINE" 1 "$CONF:3: unknown key 'endpoint' \(keys: endpoints, cluster\)" shmctl cluster show "$S"
printf 'cluster = c1\ncluster = c2\n' >"$CONF"
t_errmatch "a key given twice: FILE:LINE" 1 "$CONF:2: cluster given twice \(first on line 1\)" shmctl cluster show "$S"
printf 'cluster =\n' >"$CONF"
t_errmatch "a key without a value: FILE:LINE" 1 "$CONF:1: cluster has no value" shmctl cluster show "$S"
mv "$CONF.good" "$CONF"

export SHMCFG_ETCD_ENDPOINTS="$ETCD_EP" SHMCFG_CLUSTER=c1
rm -f "$CONF"
run shmctl cluster show "$S"
pass "the environment gives endpoints and cluster" test "$RC" = 0

# --- set -------------------------------------------------------------------------
r0=$(erev)
run shmctl cluster set "$S" level=3 mode=on 'tags=a,b' --reason "first change"
pass "cluster set: exit 0" test "$RC" = 0
echeck "set: one transaction (one revision): values, audit record 1 and head" "
r = $r0 + 1
(j['rev'] == r and jv('opt/app.level') == 3 and jv('opt/app.mode') == 'on' and jv('opt/app.tags') == ['a', 'b'] and
all(j['keys'][k]['mod'] == r for k in ('opt/app.level', 'opt/app.mode', 'opt/app.tags', 'head',
                                        'audit/00000000000000000001')) and
jv('head')['seq'] == 1)"
echeck "set: the audit record: who, reason, each key's after (no before: absent)" "
a = jv('audit/00000000000000000001')
(a['seq'] == 1 and a['reason'] == 'first change' and a['who'] == a['user'] + '@' + a['host'] and
a['uid'] == $(id -u) and a['time_ns'] > 0 and 'rollback_of' not in a and
sorted((c['key'], 'before' in c, c['after']) for c in a['changes']) ==
  [('opt/app.level', False, 3), ('opt/app.mode', False, 'on'), ('opt/app.tags', False, ['a', 'b'])])"
pass "set: says what changed and the record" pyeval \
	'"app.level: unset -> 3" in a[0] and "audit record 1, revision" in a[0]' "$OUT"
pass "set never writes the local segment" test "$(shmctl get "$S" level)" = 1

r1=$(erev)
run shmctl cluster set "$S" lvl=4
echeck "an alias writes its final target's key" "
(j['rev'] == $r1 + 1 and jv('opt/app.level') == 4 and 'opt/app.lvl' not in j['keys'] and
jv('audit/00000000000000000002')['changes'] == [{'key': 'opt/app.level', 'before': 3, 'after': 4}] and
jv('audit/00000000000000000002')['reason'] is None)"

r2=$(erev)
run shmctl cluster set "$S" level=4
pass "a set that changes nothing writes nothing" test "$RC" = 0 -a "$(erev)" = "$r2"
pass "... and says so" pyeval '"app.level: 4 (unchanged)" in a[0] and "nothing changed" in a[0]' "$OUT"

# --- refused values: set's own messages, nothing written --------------------------
r3=$(erev)
for bad in app.level=11 app.level=x 'tags=["a",1]' app.mode=maybe levle=3 app.level=none fast=true; do
	run shmctl set "$S" "$bad"
	want=$ERR
	t_err "cluster set $bad: set's error line" 1 "$want" shmctl cluster set "$S" app.fast=true "$bad"
done
t_errmatch "an unknown option suggests like set" 1 "no option 'levle' in segment '$S'; did you mean" \
	shmctl cluster set "$S" levle=3
t_err "an ambiguous suffix, as set says it" 1 "shmctl: 'fast' is ambiguous: app.fast, other.fast" \
	shmctl cluster set "$S" fast=true
pass "refused values wrote nothing to etcd" test "$(erev)" = "$r3"
t_errmatch "--knob on an option without a knob: set's message" 1 \
	"app\.mode=on: the option declares no knob \(--knob\)" shmctl cluster set --knob "$S" app.mode=on

# --- knob, reset -------------------------------------------------------------------
run shmctl cluster set --knob "$S" app.fast=true
echeck "--knob writes knob/<the option's knob>" "jv('knob/app/fast') is True and 'opt/app.fast' not in j['keys']"
r4=$(erev)
run shmctl cluster reset "$S" lvl app.mode --reason "back to defaults"
echeck "reset: one transaction deletes the keys; the record has before, no after" "
a = jv('audit/00000000000000000004')
(j['rev'] == $r4 + 1 and 'opt/app.level' not in j['keys'] and 'opt/app.mode' not in j['keys'] and
'opt/app.tags' in j['keys'] and a['reason'] == 'back to defaults' and
sorted((c['key'], c['before'], 'after' in c) for c in a['changes']) ==
  [('opt/app.level', 4, False), ('opt/app.mode', 'on', False)])"
r5=$(erev)
run shmctl cluster reset "$S" app.mode
pass "a reset of an absent key writes nothing" test "$RC" = 0 -a "$(erev)" = "$r5"
run shmctl cluster reset --knob "$S" app.fast
echeck "reset --knob deletes the knob key" "'knob/app/fast' not in j['keys']"

# --- show, log -------------------------------------------------------------------------
run shmctl cluster set "$S" app.level=7 app.mode=off
t_json "show --json: every key, its value and revision" '
r = {k["key"]: (k["value"], k["mod_revision"] > 0) for k in j["keys"]}
(j["cluster"] == "c1" and r == {"opt/app.level": (7, True), "opt/app.mode": ("off", True), "opt/app.tags": (["a", "b"], True)}
and all("error" not in k for k in j["keys"]))' shmctl cluster show "$S" --json
t_json "--json before the command: the subcommand's --json" 'j["cluster"] == "c1" and len(j["keys"]) == 3' \
	shmctl --json cluster show "$S"
run shmctl cluster show "$S"
pass "show: a table of keys, values and revisions" pyeval '
l = a[0].splitlines()
(l[0].split() == ["KEY", "VALUE", "REVISION"] and any(r.split()[:2] == ["opt/app.level", "7"] for r in l))' "$OUT"
t_json "log --json: the records in order, with revision, who and changes" '
r = j["records"]
([x["seq"] for x in r] == list(range(1, len(r) + 1)) and len(r) == 6 and
all(x["revision"] > 0 and "@" in x["who"] for x in r) and r[0]["reason"] == "first change" and
r[5]["changes"][0]["key"] == "opt/app.level")' shmctl cluster log "$S" --json
run shmctl cluster log "$S"
pass "log: a table with the changes under each record" pyeval '
l = a[0].splitlines()
(l[0].split() == ["SEQ", "REVISION", "TIME", "WHO", "REASON"] and
any("app.level: unset -> 3" in x for x in l) and any("first change" in x for x in l))' "$OUT"

# --- rollback -------------------------------------------------------------------------
# records: 7 sets mode=on (was off), 8 sets level=9; rollback 8 restores 7
run shmctl cluster set "$S" app.mode=on
run shmctl cluster set "$S" app.level=9
r6=$(erev)
run shmctl cluster rollback "$S" 8 --reason undo
echeck "rollback: the record's before values, as a new audited change" "
a = jv('audit/00000000000000000009')
(j['rev'] == $r6 + 1 and jv('opt/app.level') == 7 and a['rollback_of'] == 8 and a['reason'] == 'undo' and
a['changes'] == [{'key': 'opt/app.level', 'before': 9, 'after': 7}])"
r7=$(erev)
t_errmatch "rollback refuses when a value moved since, naming it" 1 \
	"app\.level moved since audit record 8: it is 7, the record left it 9 \(--force" \
	shmctl cluster rollback "$S" 8
pass "... and writes nothing" test "$(erev)" = "$r7"
run shmctl cluster rollback "$S" 1 --force
echeck "rollback --force: keys absent before are deleted" "
a = jv('audit/00000000000000000010')
('opt/app.level' not in j['keys'] and 'opt/app.mode' not in j['keys'] and 'opt/app.tags' not in j['keys'] and
a['rollback_of'] == 1 and all('after' not in c for c in a['changes']))"
t_errmatch "rollback of a SEQ that is not a number" 1 "'x1' is not an audit record's number" \
	shmctl cluster rollback "$S" x1
t_errmatch "rollback of a SEQ with no record" 1 "no audit record 999" shmctl cluster rollback "$S" 999
t_usage "rollback without SEQ" shmctl cluster rollback "$S"

# --- concurrent writers -----------------------------------------------------------
n0=$(ectl get "${P}head" --print-value-only | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["seq"])')
writer() { # OPTION: 20 sets of it, one per value
	i=1
	while [ $i -le 20 ]; do
		$SHMCTL cluster set "$S" "$1=$i" >/dev/null 2>>"$T_TMP/w.$1.err" || echo "$i" >>"$T_TMP/w.$1.fail"
		i=$((i + 1))
	done
}
writer many.o001 &
w1=$!
writer many.o002 &
w2=$!
wait $w1
wait $w2
pass "concurrent sets from two shells all succeed" test ! -e "$T_TMP/w.many.o001.fail" -a ! -e "$T_TMP/w.many.o002.fail"
t_json "... and all land: 40 more records, contiguous, each value's before exact" "
r = [x for x in j['records'] if x['seq'] > $n0]
def chain(k):
    c = [ch for x in r for ch in x['changes'] if ch['key'] == k]
    return [ch['after'] for ch in c] == list(range(1, 21)) and [ch.get('before') for ch in c] == [None] + list(range(1, 20))
([x['seq'] for x in r] == list(range($n0 + 1, $n0 + 41)) and chain('opt/many.o001') and chain('opt/many.o002'))" \
	shmctl cluster log "$S" --json
echeck "... the head is the last record" "jv('head')['seq'] == $n0 + 40 and jv('opt/many.o001') == 20 and jv('opt/many.o002') == 20"

# --- transaction size -----------------------------------------------------------------
args=""
i=1
while [ $i -le 127 ]; do
	args="$args many.o$(printf %03d $i)=5"
	i=$((i + 1))
done
r8=$(erev)
# shellcheck disable=SC2086
t_errmatch "127 keys: over etcd's default limit, refused before sending" 1 \
	"127 keys make a transaction of 129 operations; etcd allows 128 \(at most 126 keys at once\)" \
	shmctl cluster set "$S" $args
args=""
i=1
while [ $i -le 100 ]; do
	args="$args many.o$(printf %03d $i)=6"
	i=$((i + 1))
done
# shellcheck disable=SC2086
t_errmatch "100 keys: over this etcd's --max-txn-ops (101): its refusal in one line" 1 \
	"transaction of 102 operations is more than this etcd allows" shmctl cluster set "$S" $args
pass "neither wrote anything" test "$(erev)" = "$r8"

# --- garbage in etcd -----------------------------------------------------------------------
ectl put "${P}opt/app.level" "$(printf '\377\033[31m{garbage')" >/dev/null
ectl put "${P}opt/no.such" '5' >/dev/null
ectl put "${P}opt/app.mode" '"maybe"' >/dev/null
run shmctl cluster show "$S"
pass "show: garbage bytes shown escaped, marked, no crash" pyeval '
"\\xff\\x1b[31m{garbage" in a[0] and "not valid JSON" in a[0] and "\033" not in a[0] and
"no such option" in a[0]' "$OUT"
t_json "show --json: garbage as raw text with its error; values this host refuses, with why" '
k = {x["key"]: x for x in j["keys"]}
("value" not in k["opt/app.level"] and k["opt/app.level"]["raw"].startswith("\\xff\\x1b") and
"not valid JSON" in k["opt/app.level"]["error"] and "no such option" in k["opt/no.such"]["error"] and
k["opt/app.mode"]["value"] == "maybe" and "maybe" in k["opt/app.mode"]["error"])' shmctl cluster show "$S" --json
run shmctl cluster set "$S" app.level=2
echeck "set over garbage: works, the record keeps the garbage as before_raw" "
a = jv('audit/%020d' % jv('head')['seq'])
(jv('opt/app.level') == 2 and a['changes'][0]['before_raw'].startswith('\\\\xff'))"
ectl put "${P}audit/00000000000000099999" '{not json' >/dev/null
ectl put "${P}audit/00000000000000099998" '[1,2]' >/dev/null
run shmctl cluster log "$S"
pass "log: a record that is not JSON is listed as such, no crash" test "$RC" = 0 -a -n "$(echo "$OUT" | grep 'not valid JSON')"
t_json "log --json: the bad records with their error and raw bytes" '
b = {x["key"]: x for x in j["records"] if "error" in x}
(sorted(b) == ["00000000000000099998", "00000000000000099999"] and b["00000000000000099999"]["raw"] == "{not json")' \
	shmctl cluster log "$S" --json
t_errmatch "rollback of a record that is not JSON: one line" 1 "audit record 99999 is not valid JSON" \
	shmctl cluster rollback "$S" 99999
t_errmatch "rollback of a record without changes: one line" 1 "audit record 99998 has no \"changes\" array" \
	shmctl cluster rollback "$S" 99998
ectl put "${P}head" 'junk' >/dev/null
t_errmatch "a head that is not ours: one line, nothing written" 1 "key ${P}head is not" \
	shmctl cluster set "$S" app.level=3
ectl del --prefix "${P}audit/0000000000000009999" >/dev/null
ectl put "${P}head" "{\"seq\": $((n0 + 41))}" >/dev/null

# --- status --------------------------------------------------------------------------------
run shmctl cluster status "$S"
pass "status with no host reporting" test "$RC" = 0 -a -n "$(echo "$OUT" | grep 'no host reports')"
newest=$(erev)
now=$(date +%s)000000000
h=0123456789abcdef0123456789abcdef
ectl put "${P}status/h1/s" "{\"host\":\"h1\",\"segment\":\"s\",\"pid\":1,\"revision\":$newest,\"generation\":5,\"config_hash\":\"$h\",\"error\":\"\",\"rejected\":[],\"time_ns\":$now,\"out_of_sync_since_ns\":0}" >/dev/null
ectl put "${P}status/h2/s" "{\"host\":\"h2\",\"segment\":\"s\",\"pid\":2,\"revision\":$newest,\"generation\":6,\"config_hash\":\"$h\",\"error\":\"\",\"rejected\":[{\"key\":\"opt/app.mode\",\"error\":\"not a choice\"}],\"time_ns\":$now,\"out_of_sync_since_ns\":0}" >/dev/null
ectl put "${P}status/h3/s" "{\"host\":\"h3\",\"segment\":\"s\",\"pid\":3,\"revision\":1,\"generation\":2,\"config_hash\":\"ffffffffffffffffffffffffffffffff\",\"error\":\"etcd unreachable\",\"rejected\":[],\"time_ns\":$now,\"out_of_sync_since_ns\":$now}" >/dev/null
ectl put "${P}status/h4/s" "$(printf '\001garbage')" >/dev/null
t_json "status --json: every host; the one behind and the one whose hash differs flagged" '
h = {x["key"]: x for x in j["hosts"]}
(sorted(h) == ["h1/s", "h2/s", "h3/s", "h4/s"] and j["majority_config_hash"] == "0123456789abcdef0123456789abcdef" and
[h[k]["hash_differs"] for k in ("h1/s", "h2/s", "h3/s")] == [False, False, True] and
[h[k]["behind"] for k in ("h1/s", "h2/s", "h3/s")] == [False, False, True] and
h["h3/s"]["error"] == "etcd unreachable" and h["h1/s"]["generation"] == 5 and h["h1/s"]["age_s"] >= 0 and
"not valid JSON" in h["h4/s"]["error"])' shmctl cluster status "$S" --json
run shmctl cluster status "$S"
pass "status: a table, flags, and the summary line" pyeval '
l = a[0].splitlines()
(l[0].split()[:3] == ["HOST", "SEGMENT", "REVISION"] and any("(behind)" in x and x.startswith("h3") for x in l) and
any("(differs)" in x and x.startswith("h3") for x in l) and any("rejects opt/app.mode: not a choice" in x for x in l) and
"4 hosts" in l[-1] and "1 behind" in l[-1] and "1 with a config hash other than the majority" in l[-1])' "$OUT"
# anyone who can write the prefix may claim a revision etcd has not reached:
# it is flagged, and does not make every honest host "behind"
ectl put "${P}status/h5/s" "{\"host\":\"h5\",\"segment\":\"s\",\"revision\":999999999999,\"generation\":1,\"config_hash\":\"$h\",\"error\":\"\",\"time_ns\":$now}" >/dev/null
t_json "status --json: a revision beyond etcd's is flagged and not the newest" '
h = {x["key"]: x for x in j["hosts"]}
(h["h5/s"]["beyond_etcd"] and not h["h1/s"]["beyond_etcd"] and not h["h1/s"]["behind"] and
 j["newest_revision"] < 999999999999)' shmctl cluster status "$S" --json
run shmctl cluster status "$S"
pass "status: a revision beyond etcd's, marked and counted" pyeval '
l = a[0].splitlines()
(any("(beyond etcd)" in x and x.startswith("h5") for x in l) and "1 behind" in l[-1] and
 "1 reporting a revision beyond etcd" in l[-1])' "$OUT"
ectl del --prefix "${P}status/" >/dev/null

# --- what anyone who writes the prefix chose: safe on a terminal ---------------------------
# C1 controls (U+009B is CSI), line separators and bytes that are no UTF-8, in
# a value that is not JSON, a reason, a host's status record
ectl put "${P}opt/app.level" "$(printf '\302\233[2J\342\200\250{x')" >/dev/null
ectl put "${P}opt/app.mode" "$(printf 'a\233[2J')" >/dev/null
run shmctl cluster show "$S"
pass "show: a raw value's C1 control and separator, and a stray byte, as \\xNN" pyeval '
"\\xc2\\x9b[2J\\xe2\\x80\\xa8{x" in a[0] and "a\\x9b[2J" in a[0]' "$OUT"
pass "... safe on a terminal" termsafe "$T_TMP/out"
hseq=$(ectl get "${P}head" --print-value-only | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["seq"])')
run shmctl cluster diff "$S" "$hseq"
pass "diff: the raw value safe on a terminal" test "$RC" = 0 -a -n "$OUT"
pass "..." termsafe "$T_TMP/out"
hseq0=$(ectl get "${P}head" --print-value-only)
run shmctl cluster set "$S" app.level=4 --reason "$(printf 'mise \340 jour')"
pass "--reason with a byte that is not UTF-8: a usage error (the audit record is JSON)" \
	test "$RC" = 2 -a -z "$OUT" -a "$(head -1 "$T_TMP/err")" = "shmctl: cluster set: --reason takes UTF-8 text: it has a byte that is not UTF-8"
pass "... nothing written" test "$(ectl get "${P}head" --print-value-only)" = "$hseq0"
run shmctl cluster set "$S" app.level=4 --reason "$(printf 'why\302\233[2J\342\200\251')"
pass "set over it" test "$RC" = 0
pass "... its old -> new line safe on a terminal" termsafe "$T_TMP/out"
run shmctl cluster log "$S"
pass "log" test "$RC" = 0
pass "... the reason safe on a terminal" termsafe "$T_TMP/out"
ectl put "${P}status/h$(printf '\302\233')5/s" "{\"host\":\"h\\u009b5\",\"segment\":\"s\",\"pid\":5,\"revision\":1,\"generation\":2,\"config_hash\":\"a\\u2028b\",\"error\":\"e\\u009b]0;x\\u0007\",\"rejected\":[{\"key\":\"opt/app.mode\",\"error\":\"r\\u2028x\"}],\"time_ns\":$now,\"out_of_sync_since_ns\":0}" >/dev/null
ectl put "${P}status/h6/s" "$(printf '\233garbage\302\205')" >/dev/null
run shmctl cluster status "$S"
pass "status" test "$RC" = 0
pass "... the hosts' names, hashes, errors and rejects safe on a terminal" termsafe "$T_TMP/out"
t_json "status --json: the host's own strings, decoded as they were; the keys as show prints them" '
h = {x["key"]: x for x in j["hosts"]}
(h["h\\xc2\\x9b5/s"]["host"] == "h\x9b5" and h["h\\xc2\\x9b5/s"]["error"] == "e\x9b]0;x\x07" and
h["h\\xc2\\x9b5/s"]["config_hash"] == "a\u2028b" and h["h\\xc2\\x9b5/s"]["rejected"][0]["error"] == "r\u2028x" and
h["h6/s"]["raw"] == "\\x9bgarbage\\xc2\\x85" and "not valid JSON" in h["h6/s"]["error"])' \
	shmctl cluster status "$S" --json
pass "... safe on a terminal" termsafe "$T_TMP/out"
ectl del --prefix "${P}status/" >/dev/null
ectl put "${P}opt/app.level" '2' >/dev/null
ectl del "${P}opt/app.mode" >/dev/null
ectl put "${P}audit/00000000000000099997" '{"seq": 99997, "changes": [{"key": "x\u009b[2J\u2028"}]}' >/dev/null
t_errmatch "rollback of a record naming a key of its own: the key as \\xNN, one line" 1 \
	"audit record 99997: change 1 names key 'x\\\\xc2\\\\x9b\[2J\\\\xe2\\\\x80\\\\xa8' outside opt/" \
	shmctl cluster rollback "$S" 99997
pass "... safe on a terminal" termsafe "$T_TMP/err"
ectl del "${P}audit/00000000000000099997" >/dev/null

# 8000 hosts (80 transactions of 100 keys: this etcd's --max-txn-ops is 101),
# three of them with another config hash: the majority by a hash map
"$PYTHON" - "$P" "$newest" "$now" "$T_TMP" <<'PY'
import json, sys
p, rev, now, tmp = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
for b in range(80):
    with open("%s/t%d.in" % (tmp, b), "w") as f:
        f.write("\n")
        for i in range(b * 100, b * 100 + 100):
            h = "b" * 32 if i < 3 else "a" * 32
            st = {"host": "h%04d" % i, "segment": "s", "pid": i + 1, "revision": rev, "generation": 2,
                  "config_hash": h, "error": "", "rejected": [], "time_ns": now, "out_of_sync_since_ns": 0}
            f.write("put %sstatus/h%04d/s %s\n" % (p, i, json.dumps(json.dumps(st))))
        f.write("\n\n")
PY
b=0
while [ $b -lt 80 ]; do
	ectl txn <"$T_TMP/t$b.in" >/dev/null || not_ok "etcdctl txn $b"
	b=$((b + 1))
done
t0=$(date +%s%N)
t_json "status --json of 8000 hosts: all listed, the majority's hash, the three others flagged" '
(len(j["hosts"]) == 8000 and j["majority_config_hash"] == "a" * 32 and
sorted(h["host"] for h in j["hosts"] if h["hash_differs"]) == ["h0000", "h0001", "h0002"])' \
	shmctl cluster status "$S" --json
t1=$(date +%s%N)
echo "# cluster status --json of 8000 hosts: $(( (t1 - t0) / 1000000 )) ms"
run shmctl cluster status "$S"
pass "status of 8000 hosts: the summary line" pyeval '
a[0].startswith("8000 hosts") and "3 with a config hash other than the majority" in a[0]' "$(tail -1 "$T_TMP/out")"
ectl del --prefix "${P}status/" >/dev/null

# --- value heaps the hosts report -------------------------------------------------------
ectl put "${P}status/hA/s" '{"host":"hA","segment":"s","revision":1,"heap_bytes":4096,"heap_used":3000}' >/dev/null
ectl put "${P}status/hB/s" '{"host":"hB","segment":"s","revision":1,"heap_bytes":1048576,"heap_used":0}' >/dev/null
ectl put "${P}status/hC/s" '{"host":"hC","segment":"s","revision":1}' >/dev/null
long=$("$PYTHON" -c 'print("t" * 2000)')
run shmctl cluster set "$S" "tags=$long" app.level=1
pass "a value a host's heap has no room for: one warning naming the host, the need and the room" test \
	"$RC" = 0 -a "$ERR" = "shmctl: warning: host hA segment s: app.tags needs about 2066 bytes, its value heap has 1096 free of 4096; that host will reject it"
echeck "... and it is written all the same" "jv('opt/app.tags') == ['t' * 2000] and jv('opt/app.level') == 1"
run shmctl cluster set "$S" "tags=$long"
pass "... a set that changes nothing warns of nothing" test "$RC" = 0 -a -z "$ERR"
ectl del --prefix "${P}status/" >/dev/null

# --- --wait ----------------------------------------------------------------------------------
run shmctl cluster set "$S" app.level=4 --wait=300ms
pass "--wait with no agent: exit 1 after the timeout, one line saying which revision" \
	test "$RC" = 1 -a "$(wc -l <"$T_TMP/err")" = 1 -a -n "$(grep "did not apply cluster revision" "$T_TMP/err")"

if [ -x "$SHMCFG_SYNC" ]; then
	agent_start a1 --host h1 "$S"
	run shmctl cluster set "$S" app.level=5 --wait
	pass "--wait: returns once the local agent applied the revision" \
		test "$RC" = 0 -a "$(shmctl get "$S" app.level)" = 5
	# the agent puts its status on its next keepalive (every second)
	h1_current() {
		$SHMCTL cluster status "$S" --json >"$T_TMP/st.json" 2>/dev/null &&
			jcheck "$T_TMP/st.json" 'any(h.get("host") == "h1" and not h["behind"] for h in j["hosts"])' >/dev/null
	}
	STEP=0.1 until_true 10 h1_current
	t_json "status: the real agent's entry, current" '
len(j["hosts"]) == 1 and j["hosts"][0]["host"] == "h1" and not j["hosts"][0]["behind"]' shmctl cluster status "$S" --json
	unset SHMCFG_ETCD_ENDPOINTS SHMCFG_CLUSTER
	# the agent's record (c1 and the endpoints) is anyone's who may write
	# the segment: never where etcd is
	t_errmatch "on a synced host the agent's record does not give endpoints and cluster" 1 \
		"no etcd endpoints: give --endpoints" shmctl cluster show "$S"
	printf 'endpoints = %s\ncluster = c9\n' "$ETCD_EP" >"$CONF"
	want="segment '$S' follows cluster 'c1' \(its shmcfg-sync record\), but the cluster configured is 'c9' \(from $CONF:2\): nothing written"
	t_errmatch "set to a cluster other than the segment's agent's: refused, both named" 1 "$want" \
		shmctl cluster set "$S" app.level=6
	t_errmatch "... with --wait too" 1 "$want" shmctl cluster set "$S" app.level=6 --wait=1
	t_errmatch "... reset too" 1 "$want" shmctl cluster reset "$S" app.level
	t_errmatch "... rollback too" 1 "$want" shmctl cluster rollback "$S" 1
	t_errmatch "... from --cluster, named so" 1 "but the cluster configured is 'c8' \(from --cluster\)" \
		shmctl cluster set "$S" app.level=6 --cluster c8
	pass "... nothing written under either cluster" sh -c \
		"[ -z \"\$(ETCDCTL_API=3 $ETCDCTL --endpoints '$ETCDCTL_EP' get --prefix /shmcfg/v1/c9/ --keys-only)\" ] && [ -z \"\$(ETCDCTL_API=3 $ETCDCTL --endpoints '$ETCDCTL_EP' get --prefix /shmcfg/v1/c8/ --keys-only)\" ]"
	pass "... and c1 still holds 5" test "$(ectl get "${P}opt/app.level" --print-value-only)" = 5
	for sub in show log status; do
		run shmctl cluster $sub "$S"
		pass "cluster $sub: one warning naming both clusters, then c9's answer" test "$RC" = 0 -a \
			"$ERR" = "shmctl: warning: segment '$S' follows cluster 'c1' (its shmcfg-sync record), not the cluster configured, 'c9' (from $CONF:2): its schema and revision are another cluster's" \
			-a -n "$(echo "$OUT" | grep "c9")"
	done
	rm -f "$CONF"
	agent_stop a1
else
	skip "--wait with an agent: tools/shmcfg-sync is not built"
	skip "status of a real agent: tools/shmcfg-sync is not built"
	for k in 1 2 3 4 5 6 7 8 9 10 11; do skip "the agent's record: tools/shmcfg-sync is not built"; done
fi

# a head set back by hand (etcdctl): the next write must not overwrite the
# audit record that exists under the sequence number after it
A1=$(ectl get "${P}audit/00000000000000000001" --print-value-only)
ectl put "${P}head" '{"seq": 0}' >/dev/null
t_errmatch "a head set back by hand: set refuses to overwrite audit record 1" 1 \
	"audit record 1 exists, but the head .* names 0 as the newest" \
	shmctl cluster set "$S" app.level=7 --endpoints "$ETCD_EP" --cluster c1
pass "... which is unchanged" test -n "$A1" -a "$(ectl get "${P}audit/00000000000000000001" --print-value-only)" = "$A1"

t_done
