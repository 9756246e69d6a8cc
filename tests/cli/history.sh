#!/bin/sh
# SPDX-License-Identifier: MIT
# The segment's history through the real shmctl: log (text, --json, option
# filters, -n), show and get --generation, diff G1 [G2], rollback (--knob),
# create --history, and their errors (a generation too old or not yet
# committed, a bad generation, an unknown option).
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/cli/lib.sh"

seg H hist
seg W wrap
CMP=torch.compiler.config
RL=torch._dynamo.config.recompile_limit

run shmctl create -q --no-env "$H"
pass "create: exit 0" test "$RC" = 0
run shmctl set -q "$H" recompile_limit=5                    # generation 2
run shmctl set -q "$H" job_id=abc                            # 3
run shmctl set -q "$H" --knob force_disable_caches=true     # 4
run shmctl set -q "$H" recompile_limit=7 'job_id=x "y"'     # 5
run shmctl reset -q "$H" job_id                              # 6

# --- log ---------------------------------------------------------------------
run shmctl log "$H"
pass "log: newest first, every generation, each change old -> new" pyeval '
out = a[0].splitlines(); heads = [l for l in out if l.startswith("generation ")]
([h.split()[1] for h in heads] == ["6", "5", "4", "3", "2", "1"] and
 "    '"$CMP"'.job_id: \"x \\\"y\\\"\" -> unset" in out and
 "    '"$RL"': 5 -> 7" in out and
 "    '"$CMP"'.force_disable_caches [knob]: unset -> true" in out and
 out[-1] == "    no layer changed" and all(" shmctl[" in h for h in heads))' "$OUT"
t_json "log --json: every field of each commit" '
import os
([r["generation"] for r in j] == [6, 5, 4, 3, 2, 1] and
all(set(r) >= {"generation", "time", "time_ns", "pid", "uid", "user", "process", "origin", "who",
               "cluster_revision", "nchanges", "values_kept", "changes"} for r in j) and
all(r["process"] == "shmctl" and r["origin"] == "shmctl" and r["uid"] == os.getuid() for r in j) and
sorted(j[1]["changes"], key=lambda c: c["name"]) == [
  {"name": "'"$RL"'", "layer": "user", "old_set": True, "old": 5, "new_set": True, "new": 7},
  {"name": "'"$CMP"'.job_id", "layer": "user", "old_set": True, "old": "abc", "new_set": True, "new": "x \"y\""}] and
j[0]["changes"] == [{"name": "'"$CMP"'.job_id", "layer": "user", "old_set": True, "old": "x \"y\"",
                     "new_set": False, "new": None}] and
j[2]["changes"][0]["layer"] == "knob" and j[5]["changes"] == [] and j[5]["nchanges"] == 0)' \
	shmctl log "$H" --json
t_json "log OPTION: only the commits that touched it (short name, as set)" '
[r["generation"] for r in j] == [6, 5, 3]' shmctl log "$H" job_id --json
t_json "log OPTION OPTION -n 2: either option, the newest two" '
[r["generation"] for r in j] == [6, 5]' shmctl log "$H" job_id recompile_limit -n 2 --json
t_json "log through an alias: its target's commits" '
[r["generation"] for r in j] == [5, 2]' shmctl log "$H" "$CMP.recompile_limit" --json
run shmctl log "$H" -n 1
pass "log -n 1: one commit" pyeval '
sum(l.startswith("generation ") for l in a[0].splitlines()) == 1' "$OUT"
t_errmatch "log: an unknown option" 1 "no_such_option" shmctl log "$H" no_such_option
t_usage "log -n 0" shmctl log "$H" -n 0
t_usage "log: no NAME" shmctl log

# --- show / get --generation -----------------------------------------------
t_out "get --generation 2" 5 shmctl get "$H" recompile_limit --generation 2
t_out "get --generation 1: the default" 8 shmctl get "$H" recompile_limit --generation 1
t_out "get --generation 5 --json: a string" '"x \"y\""' shmctl get "$H" job_id --generation 5 --json
t_out "get without --generation: the current value" 7 shmctl get "$H" recompile_limit
t_json "show --generation 3 --json: the values and sources then" '
v = {o["name"]: (o["value"], o["source"], o["is_default"]) for o in j}
(v["'"$RL"'"] == (5, "user", False) and v["'"$CMP"'.job_id"] == ("abc", "user", False) and
 v["'"$CMP"'.force_disable_caches"] == (False, "default", True))' shmctl show "$H" --generation 3 --json
run shmctl show "$H" --generation 4 --non-default
pass "show --generation 4 --non-default: what was set then" pyeval '
names = sorted(l.split()[0] for l in a[0].splitlines()[1:])
names == ["'"$RL"'", "'"$CMP"'.job_id", "torch.compiler.config.recompile_limit"]' "$OUT"
t_errmatch "get --generation beyond the current one: exit 1" 1 \
	"generation 99 is not committed yet \\(current: 6\\)" shmctl get "$H" recompile_limit --generation 99
t_usage "get --generation 0: a usage error" shmctl get "$H" recompile_limit --generation 0
t_usage "get --generation abc: a usage error" shmctl get "$H" recompile_limit --generation abc
t_usage "show --generation -1: a usage error" shmctl show "$H" --generation -1
t_errmatch "get --generation of an unknown option" 1 "no_such_option" \
	shmctl get "$H" no_such_option --generation 2
t_json "describe --generation 2 --json: the value, layers and generation then" '
(j["generation"] == 2 and j["value"] == 5 and j["source"] == "user" and not j["is_default"] and
 j["layers"]["user"] == {"value": 5})' shmctl describe "$H" recompile_limit --generation 2 --json
t_json "describe --generation 1 --json: the default then" '
j["generation"] == 1 and j["value"] == 8 and j["is_default"] and j["layers"]["user"] is None' \
	shmctl describe "$H" recompile_limit -G 1 --json
run shmctl describe "$H" recompile_limit --generation 2
pass "describe --generation 2: the value then, not the current 7" pyeval '
any(l.split() == ["value", "5"] for l in a[0].splitlines())' "$OUT"
t_errmatch "describe --generation beyond the current one: exit 1" 1 \
	"generation 99 is not committed yet \\(current: 6\\)" shmctl describe "$H" recompile_limit --generation 99

# --- diff G1 [G2] -------------------------------------------------------------
run shmctl diff "$H" 2 3
t_out "diff G1 G2: the option, its values and the layer that moved" \
"$CMP.job_id: null (default) -> \"abc\" (user)
    user layer: unset -> \"abc\"" shmctl diff "$H" 2 3
t_json "diff G1 --json: against the current generation" '
j["from"] == 3 and j["to"] == 6 and
{c["name"]: (c["old"], c["new"]) for c in j["changes"]} == {
  "'"$RL"'": (5, 7), "'"$CMP"'.job_id": ("abc", None), "'"$CMP"'.force_disable_caches": (False, True)} and
[l["layer"] for c in j["changes"] if c["name"] == "'"$CMP"'.force_disable_caches" for l in c["layers"]] == ["knob"]' \
	shmctl diff "$H" 3 --json
t_json "diff G1 G2 --json: each layer that moved, with log's fields (unset: _set false, null)" '
{c["name"]: c["layers"] for c in j["changes"]} == {
  "'"$CMP"'.job_id": [{"layer": "user", "old_set": True, "old": "abc", "new_set": False, "new": None}],
  "'"$CMP"'.force_disable_caches": [{"layer": "knob", "old_set": False, "old": None, "new_set": True, "new": True}],
  "'"$RL"'": [{"layer": "user", "old_set": True, "old": 5, "new_set": True, "new": 7}]} and
{c["name"]: (c["old_source"], c["new_source"]) for c in j["changes"]} == {
  "'"$CMP"'.job_id": ("user", "default"), "'"$CMP"'.force_disable_caches": ("default", "knob"),
  "'"$RL"'": ("user", "user")}' \
	shmctl diff "$H" 3 6 --json
t_out "diff G G: no differences" "no differences between generations 4 and 4" shmctl diff "$H" 4 4
run shmctl diff "$H" --format shell
pass "diff NAME (against the defaults) still works" test "$RC" = 0 -a -n "$OUT"
t_usage "diff: a bad generation" shmctl diff "$H" two
t_usage "diff: too many arguments" shmctl diff "$H" 1 2 3
run shmctl diff "$H" "$(printf '1\033[31m')"
pass "diff: a bad generation with control bytes is shown escaped, one line" \
	test "$RC" = 2 -a "$(printf '%s\n' "$ERR" | head -1)" = "shmctl: diff: bad generation '1\x1b[31m' (a number from 1)"

# --- rollback ---------------------------------------------------------------
run shmctl rollback "$H" 3
pass "rollback 3: one commit, its changes printed like set" test "$RC" = 0 -a "$OUT" = \
"$CMP.job_id: unset -> \"abc\"
$RL: 7 -> 5
rolled back to generation 3 (generation 7)"
t_out "rollback: the user layer as at 3" 5 shmctl get "$H" recompile_limit
t_out "rollback: the knob layer kept without --knob" true shmctl get "$H" force_disable_caches
t_json "rollback: one commit, its origin in the log" '
j[0]["generation"] == 7 and j[0]["who"] == "shmctl rollback to generation 3" and len(j[0]["changes"]) == 2' \
	shmctl log "$H" -n 1 --json
t_out "rollback again: nothing to do, exit 0" \
	"nothing changed: the user layer is already as at generation 3 (generation 7)" shmctl rollback "$H" 3
run shmctl rollback "$H" 3 --knob
pass "rollback --knob: the knob layer too" test "$RC" = 0 -a "$OUT" = \
"$CMP.force_disable_caches [knob]: true -> unset
rolled back to generation 3 (generation 8)"
t_out "rollback --knob: the knob value gone" false shmctl get "$H" force_disable_caches
t_errmatch "rollback to a generation not committed" 1 "generation 50 is not committed yet" shmctl rollback "$H" 50
t_usage "rollback: a bad generation" shmctl rollback "$H" x
t_usage "rollback: no generation" shmctl rollback "$H"
t_json "the failed rollbacks committed nothing" '[r["generation"] for r in j] == [8]' shmctl log "$H" -n 1 --json

# --- a small history: too old ----------------------------------------------------
run shmctl create -q --no-env --history 8 "$W"
pass "create --history 8" test "$RC" = 0
i=1
while [ $i -le 20 ]; do
	shmctl set -q "$W" recompile_limit=$i
	i=$((i + 1))
done
t_json "log of a small history: the last 8 commits" '
[r["generation"] for r in j] == list(range(21, 13, -1))' shmctl log "$W" --json
t_out "get --generation of the oldest rebuildable one" 12 shmctl get "$W" recompile_limit --generation 13
t_errmatch "get --generation too old: exit 1 naming the oldest kept" 1 \
	"generation 12 is too old: the oldest the history can rebuild is 13" \
	shmctl get "$W" recompile_limit --generation 12
t_errmatch "show --generation too old" 1 "the oldest the history can rebuild is 13" shmctl show "$W" --generation 2
t_errmatch "rollback too old" 1 "the oldest the history can rebuild is 13" shmctl rollback "$W" 5
t_errmatch "diff from a generation too old" 1 "the oldest the history can rebuild is 13" shmctl diff "$W" 3 20
t_usage "create --history 7: too small" shmctl create -q --history 7 "$W"

# --- help and completion know the verbs -----------------------------------------
run shmctl --help
pass "--help lists log and rollback" pyeval '
import re
any(re.match(r"\s+log\s", l) for l in a[0].splitlines()) and any(re.match(r"\s+rollback\s", l) for l in a[0].splitlines())' "$OUT"
if command -v bash >/dev/null 2>&1; then
	# the completions bash offers for a command line (the commands, flags and
	# option names come from shmctl __complete: shmctl is on PATH, as when a
	# user types it)
	complete_words() {
		PATH="$top_builddir/tools:$PATH" bash -c \
			'. "$1"; COMP_LINE=$2; COMP_POINT=${#2}; _shmctl; printf "%s\n" "${COMPREPLY[@]}"' \
			sh "$top_srcdir/tools/shmctl.bash-completion" "$1"
	}
	pass "completion: log and rollback among the commands" pyeval '
set(a[0].split()) >= {"log", "rollback"}' "$(complete_words "shmctl ")"
	pass "completion: log's and rollback's flags, --generation and --history" pyeval '
a[0].split() == ["--max-count"] and "--knob" in a[1].split() and "--generation" in a[2].split() and
"--history" in a[3].split()' "$(complete_words "shmctl log $H --max")" "$(complete_words "shmctl rollback $H 2 --")" \
		"$(complete_words "shmctl get $H recompile_limit --")" "$(complete_words "shmctl create x --")"
	pass "completion: log completes option names" pyeval '
"recompile_limit" in a[0].split()' "$(complete_words "shmctl log $H recompile_l")"
else
	skip "bash is needed to test the completion"
fi

# stat --json's commits: the cluster revision each generation carries, as
# log --json says (a local commit after a cluster commit carries its
# revision; the commit record holds only what a cluster commit applied),
# and null for a generation the history (8 commits) no longer holds
seg C carried
run shmctl create -q --history 8 "$C"
if [ -n "${SHMCFG_SANITIZERS:-}" ]; then
	skip "cluster_revision: libshmcfg is built with sanitizers (ctypes cannot load it)"
else
	for i in 1 2 3 4 5 6 7 8 9 10; do shmctl set -q "$C" "$RL=$i"; done
	run env PYTHONPATH="$top_srcdir/python" SHMCFG_LIBRARY="$top_builddir/lib/.libs/libshmcfg.so.3" "$PYTHON" -c '
import sys, shmcfg
seg = shmcfg.attach(sys.argv[1])
with seg.transaction(layer="cluster", origin=(17, "alice\u2028@h1")) as t:
    t[sys.argv[2]] = 21
' "$C" "$RL"
	pass "(a cluster commit through the binding)" test "$RC" = 0
	shmctl set -q "$C" "$RL=5"
	t_json "stat --json: each commit's cluster_revision as log --json's; null once the history lost it" '
c = {x["generation"]: x for x in j["commits"]}
(sorted(c) == list(range(1, 14)) and all("cluster_rev" not in x for x in c.values()) and
c[13]["cluster_revision"] == c[12]["cluster_revision"] == 17 and c[11]["cluster_revision"] == 0 and
c[6]["cluster_revision"] == 0 and [c[g]["cluster_revision"] for g in (1, 2, 3, 4, 5)] == [None] * 5)' \
		shmctl stat "$C" --json --commits 13
	t_json "... as log --json gives it" '[(r["generation"], r["cluster_revision"]) for r in j[:3]] == [(13, 17), (12, 17), (11, 0)]' \
		shmctl log "$C" --json
	run shmctl log "$C" -n 3
	pass "log: an origin with a line separator (the library lets it through) as \\xNN" pyeval '
"  origin: alice\\xe2\\x80\\xa8@h1  cluster revision 17" in a[0]' "$OUT"
	pass "... safe on a terminal" termsafe "$T_TMP/out"
fi

# a commit too big for the history's ring keeps no values: log OPTION still
# finds it (by the commit log's list of its options, while it has one; once
# not, it is shown, as it may have changed the option), and log names them
seg V values
run shmctl create -q --no-env "$V"
shmctl set -q "$V" "$RL=9"
shmctl set -q "$V" "job_id=$("$PYTHON" -c 'print("B" * 60000)')" "$RL=10"
BIG=$(shmctl stat "$V" --json | "$PYTHON" -c 'import json, sys; print(json.load(sys.stdin)["generation"])')
t_json "log OPTION: the commit whose values were not kept, under each option it changed" \
	"[r['generation'] for r in j if not r['values_kept']] == [$BIG]" shmctl log "$V" job_id --json
t_json "... the other option too" "$BIG in [r['generation'] for r in j] and 2 in [r['generation'] for r in j]" \
	shmctl log "$V" "$RL" --json
t_json "... not under an option it did not change" "[r['generation'] for r in j] == []" shmctl log "$V" verbose --json
t_json "log --json: the names of the options it changed" "
e = [r for r in j if r['generation'] == $BIG][0]
e['changes'] is None and set(e['changed']) >= {'$CMP.job_id', '$RL'}" shmctl log "$V" --json
run shmctl log "$V" -n 1
pass "log: ... in the text too" pyeval '
"(values not kept: too big for the history); options changed: " in a[0] and "'"$CMP"'.job_id" in a[0]' "$OUT"
i=0
while [ $i -lt 70 ]; do shmctl set -q "$V" "verbose=$([ $((i % 2)) = 0 ] && echo true || echo false)"; i=$((i + 1)); done
t_json "log OPTION once the commit log forgot it: shown, as it may have changed the option" "
e = [r for r in j if not r['values_kept']]
[r['generation'] for r in e] == [$BIG] and e[0]['changed'] is None" shmctl log "$V" "$RL" --json
run shmctl log "$V" "$RL"
pass "... its text says the options are no longer known" pyeval '
"(values not kept: too big for the history; which options: no longer known)" in a[0]' "$OUT"
t_done
