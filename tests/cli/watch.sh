#!/bin/sh
# SPDX-License-Identifier: MIT
# watch (lines, JSON, --count, --timeout, missed commits, a segment removed
# while watched), attached processes and the reader table in stat and ls, gc
# of dead readers, and check of sound and damaged segments.
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/cli/lib.sh"

# a child that takes a snapshot (and so holds a reader entry), then waits
HOLDER=$top_builddir/tests/cli/snapshot-holder

seg W watched
seg C corrupt
seg F full
DYN=torch._dynamo.config
CMP=torch.compiler.config

run shmctl create -q "$W"
pass "create" test "$RC" = 0

# wait_stat CHECK: until stat --json of $W satisfies CHECK, at most 10 s.
wait_stat() {
	_n=0
	while [ $_n -lt 200 ]; do
		shmctl stat "$W" --json >"$T_TMP/st.json" 2>/dev/null &&
			jcheck "$T_TMP/st.json" "$1" >/dev/null &&
			return 0
		sleep 0.05
		_n=$((_n + 1))
	done
	return 1
}
# The attached processes of a segment are whoever maps it, and a `shmctl ls`
# of a test running alongside maps every segment for an instant: checks of
# the exact set try again for up to 5 s.
# pass_soon DESC CMD...: ok once CMD succeeds.
pass_soon() {
	_ds=$1
	shift
	_k=0
	until "$@" >/dev/null 2>&1; do
		_k=$((_k + 1))
		if [ $_k -ge 50 ]; then
			not_ok "$_ds"
			"$@"
			diag_run
			return
		fi
		sleep 0.1
	done
	ok "$_ds"
}
# json_is EXPR CMD...: CMD exits 0 and prints JSON for which EXPR holds.
json_is() {
	_e=$1
	shift
	run "$@"
	[ "$RC" = 0 ] && jcheck "$T_TMP/out" "$_e"
}
# wait_attached PID: until stat lists PID as attached (it maps the segment).
wait_attached() {
	wait_stat "$1 in j['attached']"
}
# wait_reader PID: until stat lists PID as a live reader.
wait_reader() {
	wait_stat "any(r['pid'] == $1 and r['alive'] for r in j['readers'])"
}

# wait_watching FILE: until watch said on stderr (in FILE) that it watches.
wait_watching() {
	wait_for "$1" "^shmctl: watching '$W' from generation [0-9]*$"
}

# wait_lines FILE N: until FILE has N lines, at most 10 s.
wait_lines() {
	_n=0
	while [ $_n -lt 200 ]; do
		[ "$(wc -l <"$1")" -ge "$2" ] && return 0
		sleep 0.05
		_n=$((_n + 1))
	done
	return 1
}

# --- watch: human lines ---------------------------------------------------------
$SHMCTL watch "$W" --count 2 --timeout 20 >"$T_TMP/w1" 2>"$T_TMP/w1.err" &
WPID=$!
pass "watch says on stderr that it watches" wait_watching "$T_TMP/w1.err"
t_json "stat: the watcher (read-only) is not in the reader table" "j['readers'] == []" shmctl stat "$W" --json
# one commit at a time: a watcher that has not read the first commit when the
# second comes reports it as missed (see below), which a busy machine makes
# likely; wait for its line first
run shmctl set -q "$W" recompile_limit=16
wait_lines "$T_TMP/w1" 1
run shmctl set -q "$W" job_id=abc verbose=true
wait $WPID
WRC=$?
pass "watch --count 2: exit 0 after two commits" test "$WRC" = 0
pass "watch: one line per commit: generation, committer (as log names it), old -> new" pyeval '
import re
l = open(a[0]).read().splitlines()
who = r"(?:\S+ \(uid %s\)|uid %s)  shmctl\[\d+\]" % (a[1], a[1])  # user (uid U)  process[pid]
(len(l) == 2 and
 re.fullmatch(r"generation 2  \d{4}-\d\d-\d\d \d\d:\d\d:\d\d  %s: torch\._dynamo\.config\.recompile_limit: 8 -> 16" % who, l[0]) is not None and
 re.fullmatch(r"generation 3  .*  %s: torch\.compiler\.config\.job_id: null -> \"abc\", torch\._dynamo\.config\.verbose: false -> true" % who, l[1]) is not None)' \
	"$T_TMP/w1" "$(id -u)"
pass "watch: nothing else on stderr" test "$(cat "$T_TMP/w1.err")" = "shmctl: watching '$W' from generation 1"

# --- watch --json, and a source-only change -------------------------------------------
$SHMCTL watch "$W" --json --count 2 --timeout 20 >"$T_TMP/w2" 2>"$T_TMP/w2.err" &
WPID=$!
wait_watching "$T_TMP/w2.err"
run shmctl set -q "$W" "$CMP.recompile_limit=17"
wait_lines "$T_TMP/w2" 1
run shmctl set -q "$W" --knob force_disable_caches=false
wait $WPID
pass "watch --json: exit 0" test $? = 0
pass "watch --json: one JSON object per commit" pyeval '
l = [json.loads(x) for x in open(a[0]).read().splitlines()]
(len(l) == 2 and [o["generation"] for o in l] == [4, 5] and all(o["missed"] == 0 for o in l) and
 all(o["uid"] == int(a[1]) and o["pid"] > 0 and o["time"].endswith("Z") for o in l) and
 l[0]["changes"] == [{"name": "torch._dynamo.config.recompile_limit", "old": 16, "new": 17,
                      "old_source": "user", "new_source": "user"}] and
 l[1]["changes"] == [{"name": "torch.compiler.config.force_disable_caches", "old": False, "new": False,
                      "old_source": "default", "new_source": "knob"}])' "$T_TMP/w2" "$(id -u)"

# --- missed commits --------------------------------------------------------------
$SHMCTL watch "$W" --count 4 --timeout 20 >"$T_TMP/w3" 2>"$T_TMP/w3.err" &
WPID=$!
wait_watching "$T_TMP/w3.err"
kill -STOP $WPID
run shmctl set -q "$W" recompile_limit=1
run shmctl set -q "$W" recompile_limit=2
run shmctl set -q "$W" recompile_limit=3
kill -CONT $WPID
wait_lines "$T_TMP/w3" 2
run shmctl set -q "$W" recompile_limit=4
wait $WPID
pass "watch: exit 0 when the count is reached across missed commits" test $? = 0
pass "watch: says it missed commits, then the net change" pyeval '
l = open(a[0]).read().splitlines()
(len(l) == 3 and l[0] == "missed 2 commits (generations 6..7)" and
 l[1].startswith("generation 8  ") and l[1].endswith(": torch._dynamo.config.recompile_limit: 17 -> 3") and
 l[2].startswith("generation 9  ") and l[2].endswith(": torch._dynamo.config.recompile_limit: 3 -> 4"))' "$T_TMP/w3"

# --- --timeout --------------------------------------------------------------------
t_out "watch --timeout without --count: exit 0, nothing printed" "" shmctl watch "$W" --timeout 0.3 --quiet
pass "watch --quiet: nothing on stderr" test -z "$ERR"
run shmctl watch "$W" --timeout 0.3 --count 1
pass "watch --timeout with --count not reached: exit 1, its last line saying so" test "$RC" = 1 -a \
	"$(tail -1 "$T_TMP/err")" = "shmctl: 0 of the 1 commits seen before the watch ended"
pass "(and nothing printed)" test -z "$OUT"
$SHMCTL watch "$W" >"$T_TMP/w4" 2>"$T_TMP/w4.err" &
WPID=$!
wait_watching "$T_TMP/w4.err"
kill -TERM $WPID
wait $WPID
pass "watch without --count ends on SIGTERM with exit 0" test $? = 0

# --- attached processes, dead readers: ls, stat, check, gc ------------------------
# blocked_load TAG: a load waiting for its input (a pipe that stays open)
# is attached read-write; its pid in $!, the writer's in $T_TMP/writer.TAG
blocked_load() {
	sh -c 'echo $$ >"$1"; exec sleep 60' sh "$T_TMP/writer.$1" 2>/dev/null |
		$SHMCTL load "$W" - >/dev/null 2>&1 &
}
# end_writers: stop the sleeping writers of the blocked loads (also at exit)
end_writers() {
	for f in "$T_TMP"/writer.*; do
		[ -s "$f" ] && kill "$(cat "$f")" 2>/dev/null
		rm -f "$f"
	done
	return 0
}
# holder TAG: a process that took a snapshot, in the background (pid in $!)
holder() {
	"$HOLDER" "$W" >"$T_TMP/holder.$1" 2>&1 &
}
trap 'end_writers; t_cleanup' EXIT
blocked_load 1
D1=$!
blocked_load 2
D2=$!
pass "a load waiting on a pipe is attached" wait_attached $D1
wait_attached $D2
pass_soon "ls counts the attached processes" json_is \
	"[(s['attached'], s['attached_exact'], sorted(s['pids'])) for s in j if s['name'] == '$W'] == [(2, True, sorted([$D1, $D2]))]" \
	shmctl ls --json
pass_soon "stat --json lists the attached processes" json_is "
sorted(j['attached']) == sorted([$D1, $D2]) and j['attached_count'] == 2 and j['attached_exact'] is True" \
	shmctl stat "$W" --json
# (the shmctl set above held an entry for its commits, released at its close)
t_json "stat --json: writers that took no snapshot and made no commit hold no reader entry" \
	"j['readers'] == [] and j['readers_hwm'] == 1 and j['copy_fallbacks'] == 0 and j['retired'] is False" \
	shmctl stat "$W" --json
human_attached() {
	run shmctl stat "$W"
	pyeval '
[x.split(None, 1)[1] for x in a[0].splitlines() if x.split()[:1] == ["attached"]] == ["2 processes: %s" % ", ".join(sorted(a[1:], key=int))]' \
		"$OUT" "$D1" "$D2"
}
pass_soon "stat (human): the attached processes" human_attached
holder 1
S1=$!
holder 2
S2=$!
pass "a process that took a snapshot is in the reader table" wait_reader $S1
wait_reader $S2
pass_soon "ls: the readers are attached too; readers counts their live entries" json_is "
[(s['attached'], s['readers']) for s in j if s['name'] == '$W'] == [(4, 2)]" shmctl ls --json
t_json "stat --json: both alive in the reader table" "
sorted(r['pid'] for r in j['readers'] if r['alive']) == sorted([$S1, $S2]) and j['readers_hwm'] == 2" \
	shmctl stat "$W" --json
kill -KILL $D1 $D2 $S1 $S2
end_writers # before wait: a shell may wait for the whole pipeline
wait $D1 2>/dev/null
wait $D2 2>/dev/null
wait $S1 2>/dev/null
wait $S2 2>/dev/null
t_json "stat --json: the killed readers are listed as not alive" "
sorted(r['pid'] for r in j['readers'] if not r['alive']) == sorted([$S1, $S2]) and
all(isinstance(r['pins'], list) for r in j['readers'])" shmctl stat "$W" --json
pass_soon "stat --json: the killed processes are no longer attached" json_is "j['attached'] == []" \
	shmctl stat "$W" --json
run shmctl stat "$W"
pass "stat (human): the reader table" pyeval '
t = a[0]
("ENTRY  PID" in t and any(x.split()[1:3] == [a[1], "no"] for x in t.splitlines() if x[:1].isdigit()))' "$OUT" "$S1"
t_json "check --json: dead readers are notes, not problems" "
j['ok'] is True and j['problems'] == [] and len(j['notes']) == 2 and all('shmctl gc' in n for n in j['notes'])" \
	shmctl check "$W" --json
t_json "gc --json reclaims both" "sorted(r['pid'] for r in j['reclaimed']) == sorted([$S1, $S2])" \
	shmctl gc "$W" --json
t_json "stat --json: the table is empty again" "j['readers'] == []" shmctl stat "$W" --json
t_out "gc again: nothing to reclaim" "$W: nothing to reclaim" shmctl gc "$W"
holder 3
S1=$!
wait_reader $S1
kill -KILL $S1
wait $S1 2>/dev/null
t_out "gc (human) says what it reclaimed" "reclaimed reader entry 0 (pid $S1)
$W: reclaimed 1 reader entry of dead processes" shmctl gc "$W"

# --- a full reader table: the next process copies its snapshots ---------------------
run shmctl create -q --readers 1 "$F"
"$HOLDER" "$F" >"$T_TMP/full.1" 2>&1 &
F1=$!
"$HOLDER" "$F" >"$T_TMP/full.2" 2>&1 &
F2=$!
_n=0
while [ $_n -lt 200 ] && ! { grep -q '^ready' "$T_TMP/full.1" && grep -q '^ready' "$T_TMP/full.2"; }; do
	sleep 0.05
	_n=$((_n + 1))
done
pass_soon "stat --json: one entry, claimed; the other process copies (counted)" json_is "
(len(j['readers']) == 1 and j['readers'][0]['pid'] in ($F1, $F2) and j['readers_hwm'] == 1 and
 j['copy_fallbacks'] == 1 and sorted(j['attached']) == sorted([$F1, $F2]))" shmctl stat "$F" --json
run shmctl stat "$F"
pass "stat (human): the table's high-water mark and the copy fallbacks" pyeval '
kv = {x[:15].strip(): x[15:].strip() for x in a[0].splitlines() if x.startswith("  ")}
(kv.get("reader table") == "1 of 1 entries ever claimed (full)" and
 kv.get("copy fallback") == "1 process found the reader table full and copies its snapshots")' "$OUT"
kill $F1 $F2
wait $F1 2>/dev/null
wait $F2 2>/dev/null

# --- check -----------------------------------------------------------------------
t_out "check of a sound segment" "$W: sound (generation 9)" shmctl check "$W"
# the header as lib/layout.h lays it out (layout versions 1 to 13): slots_off
# at byte 72, slot_size at 80, cells_off at 88, nslots at 68
corrupt_cells() {
	"$PYTHON" - "/dev/shm/shmcfg.$1" <<'EOF'
import struct, sys
with open(sys.argv[1], "r+b") as f:
    h = f.read(96)
    version, = struct.unpack_from("<I", h, 8)
    if version not in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13):
        sys.exit(2)
    nslots, = struct.unpack_from("<I", h, 68)
    slots_off, slot_size, cells_off = struct.unpack_from("<QQQ", h, 72)
    for s in range(nslots):
        off = slots_off + s * slot_size + cells_off
        f.seek(off)
        b = bytearray(f.read(8))
        b[0] ^= 0x55
        f.seek(off)
        f.write(bytes(b))
EOF
}
run shmctl create -q "$C"
run shmctl set -q "$C" recompile_limit=5
corrupt_cells "$C"
case $? in
	0)
		run shmctl check "$C"
		pass "check of damaged cells: exit 1, the problems listed" pyeval '
l = a[0].splitlines()
(a[1] == "1" and l[-1].startswith(a[2] + ": ") and l[-1].endswith("problems") and
 any(x.startswith("problem: slot ") and "checksum" in x for x in l))' "$OUT" "$RC" "$C"
		t_json "check --json of damaged cells" '
j["ok"] is False and len(j["problems"]) >= 2 and any("checksum" in p for p in j["problems"])' \
			sh -c "$SHMCTL check $C --json; exit 0" ;;
	*)
		# a new layout: this test must learn where its cells are
		not_ok "check of damaged cells: corrupt_cells knows layouts 1 to 13 only"
		not_ok "check --json of damaged cells: corrupt_cells knows layouts 1 to 13 only" ;;
esac
run shmctl create -q --force "$C"
printf 'XXXXXXXX' | dd of="/dev/shm/shmcfg.$C" bs=1 seek=0 conv=notrunc 2>/dev/null
run shmctl check "$C"
pass "check of a segment with a bad magic: exit 1, one problem" pyeval '
l = a[0].splitlines()
(a[1] == "1" and len(l) == 2 and l[0].startswith("problem: ") and "not a shmcfg segment" in l[0] and
 l[1] == a[2] + ": 1 problem")' "$OUT" "$RC" "$C"
t_errmatch "get on a segment with a bad magic: one error line" 1 "not a shmcfg segment" shmctl get "$C" job_id
t_json "ls lists the damaged segment with its error" "
[s['error'] is not None and 'not a shmcfg segment' in s['error'] for s in j if s['name'] == '$C'] == [True]" \
	shmctl ls --json
run shmctl create -q --force "$C"
truncate -s 8192 "/dev/shm/shmcfg.$C"
run shmctl check "$C" --json
pass "check of a truncated segment: exit 1, one problem naming it" eval 'test "$RC" = 1 && jcheck "$T_TMP/out" "
j[\"ok\"] is False and len(j[\"problems\"]) == 1 and \"truncated\" in j[\"problems\"][0]"'
t_errmatch "show on a truncated segment: one error line" 1 "truncated" shmctl show "$C"
# --- a segment removed or replaced while watched ---------------------------------
# watch_retired HOW CMD...: watch in the background, CMD retires the segment:
# watch must exit 1 soon (its waits notice within a 100 ms slice; 10 s is
# for a busy machine), saying so in one line
watch_retired() {
	_how=$1
	shift
	$SHMCTL watch "$W" >"$T_TMP/wr" 2>"$T_TMP/wr.err" &
	_wpid=$!
	wait_watching "$T_TMP/wr.err"
	"$@" >/dev/null 2>"$T_TMP/wr.cmd.err"
	_n=0
	while kill -0 $_wpid 2>/dev/null && [ $_n -lt 200 ]; do
		sleep 0.05
		_n=$((_n + 1))
	done
	if kill -0 $_wpid 2>/dev/null; then
		kill $_wpid
		wait $_wpid
		not_ok "watch: exit 1 within 10 s when the segment is $_how (still watching)"
		return
	fi
	wait $_wpid
	_wrc=$?
	pass "watch: exit 1 within 10 s when the segment is $_how" pyeval '
e = open(a[1]).read().splitlines()
(a[0] == "1" and open(a[2]).read() == "" and len(e) == 2 and
 e[1] == "shmctl: %s: segment was removed; attach again" % a[3])' \
		"$_wrc" "$T_TMP/wr.err" "$T_TMP/wr" "$W"
	# (a `shmctl ls` alongside may be named too)
	pass "(the command that $_how it warned naming the watcher)" pyeval '
import re
e = open(a[0]).read().splitlines()
m = [re.fullmatch(r"shmctl: warning: %s is attached by pids? ([0-9, ]+): (it keeps|they keep) the old segment and learns? it was %s \(SHMCFG_E_RETIRED\)" % (re.escape(a[1]), a[3]), x) for x in e]
len(e) == 1 and m[0] is not None and a[2] in m[0].group(1).split(", ")' \
		"$T_TMP/wr.cmd.err" "$W" "$_wpid" "$_how"
}
watch_retired removed shmctl rm "$W"
run shmctl create -q "$W"
# --- replaced (create --force): the watcher follows the new segment by itself
# and prints the next commit to it
$SHMCTL watch "$W" recompile_limit >"$T_TMP/wf" 2>"$T_TMP/wf.err" &
WPID=$!
wait_watching "$T_TMP/wf.err"
run shmctl create -q --force "$W"
pass "create --force: names the watcher, which follows the new segment" pyeval '
import re
m = re.fullmatch(r"shmctl: %s is attached by pids? ([0-9, ]+): (it follows|they follow) the new segment by (itself|themselves) if (it|they) can open it \(else (its|their) reads fail, saying so\)" % re.escape(a[1]), a[0].strip())
m is not None and a[2] in m.group(1).split(", ")' "$ERR" "$W" "$WPID"
run shmctl set -q "$W" recompile_limit=33
pass "the watcher prints the commit to the new segment" wait_lines "$T_TMP/wf" 1
pass "... that commit" grep -q "recompile_limit: 8 -> 33" "$T_TMP/wf"
pass "... and watches on" kill -0 "$WPID"
kill "$WPID"
wait "$WPID"
pass "... nothing else on stderr" test "$(cat "$T_TMP/wf.err")" = "shmctl: watching '$W' from generation 1"
t_done
