#!/bin/sh
# SPDX-License-Identifier: MIT
# shmctl stat --format prometheus (issue 23, item 8): the text exposition
# format, read strictly (tests/cli/promcheck.py) and by prometheus_client's
# parser; its values against stat --json and the commits made; several
# segments, every segment of the host without a NAME; the waiters and the
# reader table; label values escaped; errors.
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/cli/lib.sh"

PROMCHECK=$top_srcdir/tests/cli/promcheck.py
HOLDER=$top_builddir/tests/cli/snapshot-holder
seg A alpha
seg B beta

# metrics FILE: promcheck's JSON of FILE in $T_TMP/m.json (0), or its
# complaints (1)
metrics() {
	"$PYTHON" "$PROMCHECK" "$1" >"$T_TMP/m.json"
}
# t_metrics DESC CHECK CMD...: exit 0, stdout in the format, CHECK holds
# over m (samples: m[NAME][SEGMENT]), types, lab (each sample's labels)
t_metrics() {
	_d=$1 _c=$2
	shift 2
	run "$@"
	if [ "$RC" = 0 ] && metrics "$T_TMP/out" && jcheck "$T_TMP/m.json" \
		"m = j['samples']; types = j['types']; lab = j['labels']
($_c)"; then
		ok "$_d"
	else
		not_ok "$_d"
		cat "$T_TMP/m.json"
		diag_run
	fi
}

shmctl create -q --no-env "$A" && shmctl create -q --no-env "$B" || { not_ok "create"; t_done; }
shmctl set -q "$A" recompile_limit=16
shmctl set -q "$A" recompile_limit=17
shmctl set -q "$A" torch._dynamo.config.accumulated_recompile_limit=9 job_id=run-7 # a string: a chunk in the heap

# ---- one segment: the format, and what stat --json says
run shmctl stat "$A" --json
cp "$T_TMP/out" "$T_TMP/stat.json"
t_metrics "stat NAME --format prometheus: the format, every family of a segment" "
set(types) == {'shmcfg_segment_up', 'shmcfg_generation', 'shmcfg_commits_total', 'shmcfg_created_time_seconds',
               'shmcfg_options', 'shmcfg_size_bytes', 'shmcfg_heap_size_bytes', 'shmcfg_heap_used_bytes',
               'shmcfg_waiters', 'shmcfg_reader_entries', 'shmcfg_reader_entries_capacity',
               'shmcfg_reader_entries_high_water', 'shmcfg_reader_copy_fallbacks_total',
               'shmcfg_history_entries', 'shmcfg_cluster_revision', 'shmcfg_writer_lock_held',
               'shmcfg_writer_lock_dead'} and
types['shmcfg_commits_total'] == 'counter' and types['shmcfg_generation'] == 'gauge' and
all(list(s) == ['$A'] for s in m.values())" \
	shmctl stat "$A" --format prometheus
cp "$T_TMP/out" "$T_TMP/a.prom"
run "$PYTHON" "$PROMCHECK" "$T_TMP/a.prom" --parser
if [ "$RC" = 3 ] && [ "${SHMCFG_REQUIRE_PROMETHEUS_CLIENT:-0}" != 1 ]; then
	skip "prometheus_client's parser reads it (prometheus_client is not installed)"
else
	pass "prometheus_client's parser reads the same samples" test "$RC" = 0
fi
pass "... the values are stat --json's, 3 commits after the creation" jcheck "$T_TMP/stat.json" "
m = json.load(open('$T_TMP/m.json'))['samples']
v = lambda n: m[n]['$A']
(v('shmcfg_segment_up') == 1 and
v('shmcfg_generation') == j['generation'] == 4 and v('shmcfg_commits_total') == 3 and
v('shmcfg_options') == j['options'] and v('shmcfg_size_bytes') == j['size'] and
v('shmcfg_heap_size_bytes') == j['heap_bytes'] and v('shmcfg_heap_used_bytes') == j['heap_used'] > 0 and
v('shmcfg_reader_entries') == len(j['readers']) and v('shmcfg_reader_entries_capacity') == j['reader_entries'] and
v('shmcfg_reader_entries_high_water') == j['readers_hwm'] and
v('shmcfg_reader_copy_fallbacks_total') == j['copy_fallbacks'] and
v('shmcfg_history_entries') == 4 and v('shmcfg_cluster_revision') == j['cluster_revision'] == 0 and
abs(v('shmcfg_created_time_seconds') - j['created']['time_ns'] / 1e9) < 0.001 and
v('shmcfg_waiters') == 0 and j['writer_lock']['state'] == 'free' and
v('shmcfg_writer_lock_held') == 0 and v('shmcfg_writer_lock_dead') == 0)"
pass "... no sync metrics without an agent's record" pyeval \
	'not any(n.startswith("shmcfg_sync_") or n.startswith("shmcfg_agent_") for n in json.load(open(a[0]))["types"])' \
	"$T_TMP/m.json"
t_metrics "a commit: the counter and the generation move on" \
	"m['shmcfg_commits_total']['$A'] == 4 and m['shmcfg_generation']['$A'] == 5" \
	sh -c "$SHMCTL set -q '$A' recompile_limit=18 && $SHMCTL stat '$A' --format prometheus"

# ---- several segments: each family once, a sample per segment
t_metrics "stat A B --format prometheus: each family once, with both segments" "
all(set(s) == {'$A', '$B'} for s in m.values()) and
m['shmcfg_generation'] == {'$A': 5, '$B': 1} and m['shmcfg_commits_total']['$B'] == 0" \
	shmctl stat "$A" "$B" --format prometheus
t_metrics "stat --format prometheus without NAME: every segment of the host" "
{'$A', '$B'} <= set(m['shmcfg_generation']) and m['shmcfg_generation']['$A'] == 5" \
	shmctl stat --format prometheus
run shmctl ls --json
pass "... the segments shmctl ls lists" pyeval '
ls = {s["name"] for s in json.load(open(a[0])) if s["kind"] == "segment" and s["error"] is None}
{a[2], a[3]} <= ls and {a[2], a[3]} <= set(json.load(open(a[1]))["samples"]["shmcfg_segment_up"])' \
	"$T_TMP/out" "$T_TMP/m.json" "$A" "$B"

# ---- waiters and readers, while processes wait and read
$SHMCTL watch "$A" >"$T_TMP/w" 2>&1 &
WPID=$!
"$HOLDER" "$A" >"$T_TMP/holder" 2>&1 &
HPID=$!
wait_idle $WPID || diag "watch did not wait"
wait_for "$T_TMP/holder" '^ready ' || diag "snapshot-holder: $(cat "$T_TMP/holder")"
t_metrics "a watch waits, a process holds a reader entry: waiters 1, one entry in use" "
m['shmcfg_waiters']['$A'] == 1 and m['shmcfg_reader_entries']['$A'] == 1 and
m['shmcfg_reader_entries_high_water']['$A'] >= 1 and m['shmcfg_waiters']['$B'] == 0" \
	shmctl stat "$A" "$B" --format prometheus
kill -TERM $WPID
wait $WPID
kill $HPID
wait $HPID 2>/dev/null
t_metrics "... the watch gone: waiters 0" "m['shmcfg_waiters']['$A'] == 0" \
	shmctl stat "$A" --format prometheus

# ---- formats and errors
t_json "--format json is --json" "j['name'] == '$A' and j['generation'] == 5" \
	shmctl stat "$A" --format json
run shmctl stat "$A" --format text
pass "--format text is the default" sh -c "[ $RC = 0 ] && grep -q '^ *generation *5' '$T_TMP/out'"
t_usage "--format yaml: a usage error" shmctl stat "$A" --format yaml
t_usage "--json with --format prometheus: a usage error" shmctl stat "$A" --json --format prometheus
t_usage "several NAMEs without --format prometheus: a usage error" shmctl stat "$A" "$B"
run shmctl stat "$A" "nosuch-$$" 'q"b\c' --format prometheus
if [ "$RC" = 1 ] && [ "$(wc -l <"$T_TMP/err")" = 2 ] && grep -q "^shmctl: no such segment 'nosuch-$$'$" "$T_TMP/err" &&
	metrics "$T_TMP/out" && jcheck "$T_TMP/m.json" "
m = j['samples']
(m['shmcfg_segment_up'] == {'$A': 1, 'nosuch-$$': 0, 'q\"b\\\\\\\\c': 0} and set(m['shmcfg_generation']) == {'$A'})"; then
	ok "NAMEs that cannot be read: exit 1, a line each, segment_up 0 (label values escaped), the rest exported"
else
	not_ok "NAMEs that cannot be read: exit 1, a line each, segment_up 0 (label values escaped), the rest exported"
	cat "$T_TMP/m.json" 2>/dev/null
	diag_run
fi
pass "... the label escaped in the text: the backslash doubled (then escaped), the double quote escaped" \
	grep -qF 'shmcfg_segment_up{segment="q\"b\\\\c"} 0' "$T_TMP/out"
# a stranger's object whose name holds an escape sequence, a carriage return
# and a byte that is no UTF-8: printable ASCII labels, a strict parse of the
# whole host's metrics (one such name broke it), the segments exported
BADN="shmcfg.$A-$(printf '\033[31mX\r')" BADB="shmcfg.$A-$(printf '\377')y"
: >"/dev/shm/$BADN" && : >"/dev/shm/$BADB"
run shmctl stat --format prometheus
if metrics "$T_TMP/out" && jcheck "$T_TMP/m.json" "
up = j['samples']['shmcfg_segment_up']
(up['$A'] == 1 and up['$B'] == 1 and up['$A-\\\\x1b[31mX\\\\x0d'] == 0 and up['$A-\\\\xffy'] == 0)" &&
	! LC_ALL=C grep -q '[^ -~]' "$T_TMP/out"; then
	ok "a stranger's object with control bytes and no UTF-8 in its name: escaped labels, every segment exported"
else
	not_ok "a stranger's object with control bytes and no UTF-8 in its name: escaped labels, every segment exported"
	cat "$T_TMP/m.json" 2>/dev/null
	diag_run
fi
rm -f "/dev/shm/$BADN" "/dev/shm/$BADB"

t_done
