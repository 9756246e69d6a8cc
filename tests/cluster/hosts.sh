#!/bin/sh
# SPDX-License-Identifier: MIT
# Eight simulated hosts (a segment and an agent each, --host h1..h8) on one
# etcd: every one converges on each change, with one commit per revision;
# a local override on one host stays there only; every host's status key
# reports the same revision and config hash.
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/cluster/lib.sh"

N=8
etcd_start
i=1
while [ $i -le $N ]; do
	new_seg "S$i" "h$i"
	eval "sync_start a$i \"\$S$i\" --host h$i"
	i=$((i + 1))
done
# every agent loaded before the txn: one that loads after it applies the
# state it finds as its load, not as the txn's tagged commit (a loaded
# machine starts the last agents late)
i=1
while [ $i -le $N ]; do
	wait_log 20 "a$i" "watching from revision" || { not_ok "agent h$i started"; diag_log "a$i"; }
	i=$((i + 1))
done

# all_at REV: every segment's cluster revision is REV
all_at() {
	_k=1
	while [ $_k -le $N ]; do
		eval "_s=\$S$_k"
		stat_json "$_s" && jcheck "$T_TMP/stat.json" "j['cluster_revision'] == $1" >/dev/null || return 1
		_k=$((_k + 1))
	done
}
# all_get OPT JSON [EXCEPT]: every segment but EXCEPT reads JSON
all_get() {
	_k=1
	while [ $_k -le $N ]; do
		eval "_s=\$S$_k"
		if [ "$_k" != "${3:-0}" ] && [ "$(get "$_s" "$1")" != "$2" ]; then
			return 1
		fi
		_k=$((_k + 1))
	done
}

audited_put "op@admin" opt/app.limit=33 opt/app.mode='"safe"'
pass "$N hosts: one txn applied everywhere" until_true 20 all_at "$REV"
pass "... the values everywhere" all_get app.limit 33
i=1 bad=""
while [ $i -le $N ]; do
	eval "_s=\$S$i"
	stat_json "$_s"
	jcheck "$T_TMP/stat.json" "j['commits'][0]['cluster_revision'] == $REV and j['commits'][0]['who'] == 'op@admin' and j['commits'][1]['cluster_revision'] != $REV" >/dev/null || bad="$bad h$i"
	i=$((i + 1))
done
pass "... as one commit on each host, tagged with who${bad:+ (not on$bad)}" test -z "$bad"

$SHMCTL set -q "$S3" app.limit=5
audited_put "op@admin" opt/app.limit=44
pass "a local override on h3: the others converge" until_true 20 all_get app.limit 44 3
pass "... h3 keeps its own value" test "$(get "$S3" app.limit)" = 5
pass "... and carries the revision" until_true 10 all_at "$REV"

# ten quick revisions: every host ends on the last, values converged
k=0
while [ $k -lt 10 ]; do
	eput opt/app.ratio "0.$k"
	k=$((k + 1))
done
pass "ten quick revisions: all hosts on the last one" until_true 20 all_at "$REV"
pass "... with its value" all_get app.ratio 0.9

# every status key: the same revision; the same config hash but on h3
status_ok() {
	ectl get --prefix "${P}status/" --print-value-only >"$T_TMP/all.txt" &&
		"$PYTHON" - "$T_TMP/all.txt" "$REV" "$N" "$S3" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
rev, n = int(sys.argv[2]), int(sys.argv[3])
hashes = {r["config_hash"] for r in rows if r["segment"] != sys.argv[4]}
sys.exit(0 if len(rows) == n and all(r["revision"] == rev and r["error"] == "" for r in rows) and len(hashes) == 1 else 1)
PY
}
pass "status keys: $N hosts at one revision, one config hash (h3 aside)" until_true 10 status_ok
t_done
