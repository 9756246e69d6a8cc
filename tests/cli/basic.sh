#!/bin/sh
# SPDX-License-Identifier: MIT
# shmctl on the embedded default schema: create, show, get, describe, set,
# reset, hash, stat, dump, load, diff, ls, rm; the JSON contract; the
# environment layers, the knob layer, aliases and suffixes.
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/cli/lib.sh"

seg D demo
seg E envd
DYN=torch._dynamo.config
CMP=torch.compiler.config

# --- create ------------------------------------------------------------
# no env layers from the test's own environment
unset TORCH_COMPILE_JOB_ID TORCH_COMPILE_STICKY_PGO_KEY TORCHINDUCTOR_FORCE_DISABLE_CACHES \
	TORCH_COMPILE_FORCE_DISABLE_CACHES TORCHDYNAMO_VERBOSE 2>/dev/null
run shmctl create "$D"
if [ "$RC" = 0 ] && echo "$OUT" | grep -Eq "^created segment '$D': 38 options, 8 slots, .*, generation 1$"; then
	ok "create: exit 0 and a one-line summary"
else
	not_ok "create: exit 0 and a one-line summary"; diag_run
fi
pass "the object exists in /dev/shm with mode 0600" \
	test "$(stat -c %a "/dev/shm/shmcfg.$D")" = 600
t_errmatch "create of an existing segment fails" 1 "segment '$D' exists" shmctl create "$D"
t_rc "create --force replaces it" 0 shmctl create --force --quiet "$D"
pass "create --quiet prints nothing" test -z "$OUT"
t_json "... its generations go on: the replacement is generation 2" 'j["generation"] == 2' shmctl stat "$D" --json

# --- show --------------------------------------------------------------
run shmctl show "$D"
pass "show: exit 0, header and 38 rows" test "$RC" = 0 -a "$(echo "$OUT" | wc -l)" = 39
pass "show: header columns" test "$(echo "$OUT" | head -1 | tr -s ' ')" = "NAME VALUE TYPE SOURCE DEFAULT"
pass "show: a row (name value type source default)" test \
	"$(echo "$OUT" | awk -v n="$DYN.recompile_limit" '$1 == n { print $2, $3, $4, $5 }')" = "8 int default 8"
pass "show: an alias row" test \
	"$(echo "$OUT" | awk -v n="$CMP.recompile_limit" '$1 == n { print $2, $3, $4, $5 }')" = "8 int alias 8"
pass "show: a nullable string" test \
	"$(echo "$OUT" | awk -v n="$CMP.job_id" '$1 == n { print $2, $3, $4, $5 }')" = "null str? default null"
pass "show: columns are aligned" pyeval '
l = a[0].splitlines()
all(r[l[0].index(c) - 2:l[0].index(c)] == "  " and r[l[0].index(c)] != " "
    for c in ("VALUE", "TYPE", "SOURCE", "DEFAULT") for r in l[1:])' "$OUT"
pass "show: no colour in a pipe" pyeval '"\x1b" not in a[0]' "$OUT"
run shmctl --color=always show "$D" recompile_limit
pass "show --color=always: colour" pyeval '"\x1b[" in a[0]' "$OUT"

t_json "show --json: an array of every option with the contract's keys" '
isinstance(j, list) and len(j) == 38 and
all({"name", "type", "value", "default", "source", "doc"} <= set(o) for o in j) and
all(o["source"] in ("default", "knob", "env_default", "user", "env_force", "implied", "alias") for o in j) and
all(o["type"] in ("bool", "int", "float", "str", "list", "set") for o in j)' \
	shmctl show "$D" --json
t_json "show --json: values and defaults are JSON values" '
{o["name"]: (o["value"], o["default"], o["type"], o["source"]) for o in j}["torch._dynamo.config.recompile_limit"] == (8, 8, "int", "default") and
{o["name"]: o["value"] for o in j}["torch.compiler.config.job_id"] is None and
{o["name"]: o["value"] for o in j}["torch._dynamo.config.reorderable_logging_functions"] == [] and
{o["name"]: o["value"] for o in j}["torch._dynamo.config.dynamic_shapes"] is True and
{o["name"]: o["source"] for o in j}["torch.compiler.config.dynamic_shapes"] == "alias" and
{o["name"]: o["value"] for o in j}["torch.compiler.config.cache_key_tag"] == ""' \
	shmctl show "$D" --json
t_json "show --json: docs" '
"frame runs eagerly" in {o["name"]: o["doc"] for o in j}["torch._dynamo.config.recompile_limit"]' \
	shmctl show --json "$D"
t_json "show PATTERN (glob on a suffix)" \
	'sorted(o["name"] for o in j) == ["torch._dynamo.config.recompile_limit", "torch.compiler.config.recompile_limit"]' \
	shmctl show "$D" 'recompile*' --json
t_json "show PATTERN (glob on the full name)" \
	'len(j) == 15 and all(o["name"].startswith("torch._dynamo.") for o in j)' \
	shmctl show "$D" 'torch._dynamo.*' --json
t_json "show PATTERN (substring)" '[o["name"] for o in j] == ["torch.compiler.config.job_id"]' \
	shmctl show "$D" job_id --json
t_errmatch "show PATTERN that matches nothing" 1 "no option matches 'zzz'" shmctl show "$D" zzz
t_json "show --non-default on a fresh segment: nothing" 'j == []' shmctl show "$D" --non-default --json
run shmctl show "$D" -v job_id
pass "show -v prints the doc under the row" pyeval \
	'a[0].splitlines()[1].startswith("torch.compiler.config.job_id") and "    Semantically, this should be an identifier" in a[0]' "$OUT"
run shmctl show "$D" -v compiler.config.accumulated_recompile_limit
pass "show -v of an alias: the alias on a line, then its doc" pyeval '
l = a[0].splitlines()
(l[1].startswith("torch.compiler.config.accumulated_recompile_limit ") and
 l[2] == "    alias of torch._dynamo.config.accumulated_recompile_limit" and l[3].startswith("    Global limit"))' "$OUT"
run shmctl show "$D" -v pgo_extra_read_key
pass "show -v of an option without doc: (none), as describe says" pyeval \
	'a[0].splitlines()[2] == "    (none)" and a[1].splitlines()[-2:] == ["  doc", "    (none)"]' \
	"$OUT" "$(shmctl describe "$D" pgo_extra_read_key)"

# --- get ---------------------------------------------------------------
t_out "get: an int" 8 shmctl get "$D" recompile_limit
t_out "get: a bool" true shmctl get "$D" dynamic_shapes
t_out "get: null" null shmctl get "$D" job_id
t_out "get: an empty set" "[]" shmctl get "$D" reorderable_logging_functions
t_out "get: the full name" 8 shmctl get "$D" "$DYN.recompile_limit"
t_out "get: the alias's full name" 8 shmctl get "$D" "$CMP.recompile_limit"
t_out "get: a dotted suffix" 8 shmctl get "$D" config.recompile_limit
t_out "get --json: an empty string" '""' shmctl get "$D" cache_key_tag --json
t_out "get (human): an empty string prints empty" "" shmctl get "$D" cache_key_tag

# --- set ---------------------------------------------------------------
run shmctl set "$D" recompile_limit=16 job_id=abc 'reorderable_logging_functions=b,a,b' verbose=1
pass "set: exit 0, old -> new per option" test "$RC" = 0 -a "$OUT" = "$DYN.recompile_limit: 8 -> 16
$CMP.job_id: null -> \"abc\"
$DYN.reorderable_logging_functions: [] -> [\"a\",\"b\"]
$DYN.verbose: false -> true
generation 3"
pass "set: nothing on stderr" test -z "$ERR"
t_json "set: one commit for four options (generation 3)" 'j["generation"] == 3' shmctl stat "$D" --json
t_out "get after set: int" 16 shmctl get "$D" recompile_limit
t_out "get after set: the alias follows" 16 shmctl get "$D" "$CMP.recompile_limit"
t_out "get after set: a string, raw" abc shmctl get "$D" job_id
t_out "get --json after set: a string, quoted" '"abc"' shmctl get "$D" job_id --json
t_out "get --json after set: a set, sorted and unique" '["a","b"]' shmctl get --json "$D" reorderable_logging_functions
t_out "get --json: a bool" true shmctl get --json "$D" verbose
t_out "get of several options: one line each, in the order given" "16
abc
[\"a\",\"b\"]
true" shmctl get "$D" recompile_limit job_id reorderable_logging_functions verbose
t_out "... of the generation given" "8
null
false" shmctl get "$D" recompile_limit job_id verbose --json --generation 2
run shmctl set -q "$D" 'cache_key_tag="two\nlines"'
t_out "... a string with a line break as a JSON string, one line" "abc
\"two\\nlines\"" shmctl get "$D" job_id cache_key_tag
t_out "... which one option prints as it is" "two
lines" shmctl get "$D" cache_key_tag
t_err "... an unknown one: no value printed" 1 "shmctl: no option 'nosuch' in segment '$D'" \
	shmctl get "$D" job_id nosuch
t_err "... --raw: one option" 2 "shmctl: get: --raw prints one option (a string's line breaks would split the lines)
usage: shmctl get NAME OPTION... [--generation G] [--json|--raw]
Try 'shmctl get --help' for more information." shmctl get "$D" job_id verbose --raw
run shmctl reset -q "$D" cache_key_tag
run shmctl set "$D" 'job_id="none"'
t_out "set: a double-quoted value is a JSON string literal" '"none"' shmctl get "$D" job_id --json
run shmctl set "$D" job_id=None
t_out "set: none is null for a nullable option" null shmctl get "$D" job_id --json
run shmctl set "$D" 'job_id="\u001b]0;title\u0007x\ry"'
t_out "get: a string a terminal would act on prints as JSON, escaped" '"\u001B]0;title\u0007x\ry"' shmctl get "$D" job_id
pass "... and --raw prints its bytes" sh -c "$SHMCTL get '$D' job_id --raw | od -An -c | grep -q '033'"
# C1 controls (U+009B is CSI) and line separators, which jansson writes raw
run shmctl set "$D" 'job_id="\u009b31mred\u2028x"'
t_out "get: a C1 control or a line separator prints as JSON, escaped" '"\u009B31mred\u2028x"' shmctl get "$D" job_id
t_out "... with --json too" '"\u009B31mred\u2028x"' shmctl get "$D" job_id --json
t_json "... and show --json reads back the same string" \
	'[o["value"] for o in j if o["name"].endswith(".job_id")] == ["\x9b31mred\u2028x"]' shmctl show "$D" --json
pass "... which has no C1 byte sequence or separator in it" \
	sh -c "! $SHMCTL show '$D' --json | od -An -tx1 | tr -d '\n' | grep -Eq ' c2 9b| e2 80 a8'"
# bidirectional controls and invisible spaces ("Trojan Source": a line that
# reads as another; names that look alike) are escaped too
run shmctl set "$D" 'job_id="admin\u202e\u2066txt.exe\u200b"'
t_out "get: a bidirectional override, isolate or zero-width space prints as JSON, escaped" \
	'"admin\u202E\u2066txt.exe\u200B"' shmctl get "$D" job_id
run shmctl get "$D" "$(printf 'job_id\342\200\256x')"
pass "... an unknown option's name with one, in the error: escaped" eval 'test "$RC" = 1 &&
	termsafe "$T_TMP/err" && grep -qF "job_id\\xe2\\x80\\xaex" "$T_TMP/err"'
run shmctl set "$D" 'job_id="\u009b31m\u2028\u007f\u00e9\u4e2d"'
run shmctl dump "$D"
pass "dump: a C1 control, a line separator and DEL as \\u escapes: safe on a terminal" termsafe "$T_TMP/out"
t_json "... and the same string read back, the accent and the CJK as they are" \
	'j["values"]["torch.compiler.config.job_id"] == "\x9b31m\u2028\x7f\u00e9\u4e2d"' shmctl dump "$D"
pass "diff (Python): the string as Python's repr() writes it" pyeval '
"torch.compiler.config.job_id = %r" % "\x9b31m\u2028\x7f\u00e9\u4e2d" in a[0].splitlines()' "$($SHMCTL diff "$D")"
for f in json shell; do
	run shmctl diff "$D" --format "$f"
	pass "diff --format $f: safe on a terminal" termsafe "$T_TMP/out"
done
pass "... the shell form's JSON value escaped" pyeval '
"job_id=\"\\u009B31m\\u2028\\u007F\u00e9\u4e2d\"'"'"'" in a[0]' "$OUT"
run shmctl set "$D" 'job_id="a\u007fb"'
t_out "get: DEL prints as JSON, escaped (jansson writes it raw)" '"a\u007Fb"' shmctl get "$D" job_id
t_out "... with --json too" '"a\u007Fb"' shmctl get "$D" job_id --json
run shmctl set "$D" 'job_id="a\u2029b"'
t_out "get of several: a paragraph separator keeps one line each" '"a\u2029b"
16' shmctl get "$D" job_id recompile_limit
pass "... and --raw prints its bytes" sh -c "$SHMCTL get '$D' job_id --raw | od -An -tx1 | grep -q 'e2 80 a9'"
run shmctl set "$D" 'cache_key_tag="none"'
t_out "set: a quoted none is text for a non-nullable string" '"none"' shmctl get "$D" cache_key_tag --json
run shmctl set "$D" 'reorderable_logging_functions=["x.y","a b"]'
t_out "set: a list as a JSON array" '["a b","x.y"]' shmctl get "$D" reorderable_logging_functions --json
run shmctl set "$D" 'reorderable_logging_functions='
t_out "set: empty text is the empty set" '[]' shmctl get "$D" reorderable_logging_functions --json
run shmctl reset -q "$D" reorderable_logging_functions
run shmctl set "$D" "$CMP.recompile_limit=12"
t_out "set through an alias writes its target" 12 shmctl get "$D" "$DYN.recompile_limit"
run shmctl set "$D" recompile_limit=12
GEN=$(shmctl hash "$D" --json | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["generation"])')
pass "set of an unchanged value says so and publishes nothing" \
	test "$RC" = 0 -a "$OUT" = "$DYN.recompile_limit: 12 (unchanged)
generation $GEN (nothing changed)"
run shmctl set -q "$D" recompile_limit=12
pass "set --quiet prints nothing" test "$RC" = 0 -a -z "$OUT"
t_json "an unchanged set makes no generation" "j['generation'] == $GEN" shmctl hash "$D" --json

t_json "show --non-default: the options set" '
sorted(o["name"] for o in j) == ["torch._dynamo.config.recompile_limit",
  "torch._dynamo.config.verbose", "torch.compiler.config.cache_key_tag", "torch.compiler.config.job_id",
  "torch.compiler.config.recompile_limit", "torch.compiler.config.verbose"] and
all(o["source"] in ("user", "alias") for o in j)' \
	shmctl show "$D" --non-default --json

# --- describe ----------------------------------------------------------
run shmctl describe "$D" recompile_limit
pass "describe: name, type, value, source, default, layers, flags, aliases, doc" pyeval '
l = a[0].splitlines()
d = dict((x.split(None, 1) + [""])[:2] for x in l[1:] if x.startswith("  ") and not x.startswith("    "))
(l[0] == "torch._dynamo.config.recompile_limit" and d["type"] == "int" and d["value"] == "12" and d["source"] == "user"
and d["default"] == "8" and d["layers"] == "default=8  user=12" and d["flags"] == "hash_ignored"
and d["aliases"] == "torch.compiler.config.recompile_limit" and "    Maximum number of cache entries" in a[0])' "$OUT"
t_json "describe --json" '
j["name"] == "torch._dynamo.config.recompile_limit" and j["type"] == "int" and j["value"] == 12 and
j["default"] == 8 and j["source"] == "user" and j["layers"]["user"] == {"value": 12} and
j["layers"]["env_force"] is None and j["flags"] == ["hash_ignored"] and
j["aliases"] == ["torch.compiler.config.recompile_limit"] and j["alias"] is None and "eagerly" in j["doc"]' \
	shmctl describe "$D" recompile_limit --json
t_json "describe --json of an alias" '
j["name"] == "torch.compiler.config.recompile_limit" and j["source"] == "alias" and
j["alias"] == "torch._dynamo.config.recompile_limit" and j["value"] == 12' \
	shmctl describe "$D" "$CMP.recompile_limit" --json
t_json "describe --json: environment variables and knob" '
j["env_force"] == ["TORCHINDUCTOR_FORCE_DISABLE_CACHES", "TORCH_COMPILE_FORCE_DISABLE_CACHES"] and
j["knob"] == "pytorch/remote_cache:force_disable_caches" and j["env_default"] == []' \
	shmctl describe --json "$D" force_disable_caches

# --- hash, stat ----------------------------------------------------------
run shmctl hash "$D"
H1=$OUT
pass "hash: 32 lowercase hex digits alone on the line" pyeval \
	'len(a[0]) == 32 and all(c in "0123456789abcdef" for c in a[0])' "$H1"
t_json "stat --json: the contract's keys" '
{"generation", "layout_version", "schema_hash", "config_hash", "slots", "readers"} <= set(j) and
j["layout_version"] == 13 and j["config_hash"] == "'"$H1"'" and len(j["schema_hash"]) == 32 and
isinstance(j["slots"], list) and len(j["slots"]) == 8 and
sum(s["current"] for s in j["slots"]) == 1 and
[s["generation"] for s in j["slots"] if s["current"]] == [j["generation"]] and
isinstance(j["readers"], list) and all({"pid", "alive"} <= set(r) for r in j["readers"]) and
j["options"] == 38 and j["commits"][0]["generation"] == j["generation"] and
j["commits"][-1]["generation"] >= 1 and j["created"]["uid"] == '"$(id -u)"' and
[c["generation"] for c in j["commits"]] == sorted([c["generation"] for c in j["commits"]], reverse=True)' \
	shmctl stat "$D" --json
run shmctl set -q "$D" recompile_limit=13
t_out "hash: a hash-ignored option leaves it alone" "$H1" shmctl hash "$D"
run shmctl set -q "$D" job_id=other
run shmctl hash "$D"
pass "hash: another option changes it" test "$RC" = 0 -a "$OUT" != "$H1"
H2=$OUT
t_json "stat --json: the last commit names its option and committer" '
j["commits"][0]["changed"] == ["torch.compiler.config.job_id"] and j["commits"][0]["uid"] == '"$(id -u)"' and
j["commits"][0]["pid"] > 0' \
	shmctl stat --json "$D"
run shmctl stat "$D"
pass "stat (human): header facts, slots, readers, commits" pyeval '
t = a[0]
("  generation    %s" % a[1] in t and "  config hash   %s" % a[2] in t and
"\nslots (8)\nSLOT  GENERATION  PINS  STATE\n" in t and "\nreaders (" in t and "\ncommits (last " in t and
"torch.compiler.config.job_id" in t)' "$OUT" \
	"$(shmctl hash --json "$D" | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["generation"])')" "$H2"
t_json "stat --commits 2" 'len(j["commits"]) == 2' shmctl stat "$D" --commits 2 --json
t_json "stat --json: the writer lock, free between commits" '
j["writer_lock"] == {"state": "free", "pid": None, "entry": None, "building": None}' shmctl stat "$D" --json
run shmctl stat "$D"
pass "stat (human): the writer lock's line" pyeval '"\n  writer lock   free\n" in a[0]' "$OUT"

# --- diff (codegen) --------------------------------------------------------
run shmctl diff "$D"
pass "diff: the python form, as codegen_config()" pyeval '
d = {}
for line in a[0].splitlines():
    k, v = line.split(" = ", 1); d[k] = ast.literal_eval(v)
(d == {"torch._dynamo.config.recompile_limit": 13, "torch.compiler.config.job_id": "other",
      "torch._dynamo.config.verbose": True, "torch.compiler.config.cache_key_tag": "none"}
and "torch._dynamo.config.recompile_limit = 13" in a[0].splitlines()
and "torch._dynamo.config.verbose = True" in a[0].splitlines())' "$OUT"
run shmctl set -q "$D" 'reorderable_logging_functions=b,a'
run shmctl diff "$D" --format python
pass "diff: a set prints as a set literal" pyeval '
[ast.literal_eval(l.split(" = ", 1)[1]) for l in a[0].splitlines()
 if l.startswith("torch._dynamo.config.reorderable_logging_functions = {")] == [{"a", "b"}]' "$OUT"
t_json "diff --format json" '
j == {"torch._dynamo.config.recompile_limit": 13, "torch.compiler.config.job_id": "other",
      "torch._dynamo.config.verbose": True, "torch.compiler.config.cache_key_tag": "none",
      "torch._dynamo.config.reorderable_logging_functions": ["a", "b"]}' \
	shmctl diff "$D" --format json
t_json "diff --json is --format json" 'len(j) == 5' shmctl diff --json "$D"
run shmctl diff "$D" --format shell
printf '%s\n' "$OUT" >"$T_TMP/replay.sh"
pass "diff --format shell: shmctl set lines" pyeval \
	'all(l.startswith("shmctl set %s " % a[1]) for l in a[0].splitlines()) and len(a[0].splitlines()) == 5' "$OUT" "$D"
run shmctl hash "$D"
H3=$OUT

# --- dump, load --------------------------------------------------------
shmctl dump "$D" >"$T_TMP/dump.json"
pass "dump: exit 0" test $? = 0
pass "dump: the shmcfg-dump/1 object, aliases left out" jcheck "$T_TMP/dump.json" '
j["format"] == "shmcfg-dump/1" and j["config_hash"] == "'"$H3"'" and len(j["schema_hash"]) == 32 and
j["values"]["torch._dynamo.config.recompile_limit"] == 13 and j["values"]["torch.compiler.config.job_id"] == "other" and
j["values"]["torch._dynamo.config.reorderable_logging_functions"] == ["a", "b"] and
"torch.compiler.config.recompile_limit" not in j["values"] and len(j["values"]) == 23'
run shmctl reset "$D" --all
pass "reset --all: prints the changes and a summary" pyeval '
l = a[0].splitlines()
("torch._dynamo.config.recompile_limit: 13 -> 8" in l and
 l[-1].startswith("user layer cleared: 5 options, 5 values changed (generation "))' "$OUT"
t_json "reset --all: every option at its default" 'j == []' shmctl show "$D" --non-default --json
shmctl set -q "$D" recompile_limit=8 accumulated_recompile_limit=5
run shmctl reset "$D" --all
pass "reset --all of a layer holding a default value: the option changed, counted apart" test "$OUT" = \
	"torch._dynamo.config.accumulated_recompile_limit: 5 -> 256
user layer cleared: 2 options, 1 value changed (generation 24)"
t_rc "load a dump: exit 0" 0 shmctl load "$D" "$T_TMP/dump.json"
pass "load says which generation it made" pyeval 'a[0].startswith(a[1] + ": loaded into ")' "$OUT" "$T_TMP/dump.json"
t_out "load restores the configuration (same hash)" "$H3" shmctl hash "$D"
t_json "load writes the user layer" '
{o["name"]: o["source"] for o in j}["torch._dynamo.config.recompile_limit"] == "user"' shmctl show "$D" --json
run shmctl load "$D" "$T_TMP/dump.json"
pass "load of the same again: nothing changed" pyeval 'a[0].endswith("nothing changed (generation %s)" % a[1])' \
	"$OUT" "$(shmctl stat --json "$D" | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["generation"])')"
printf '{"torch._dynamo.config.recompile_limit": 21, "torch.compiler.config.job_id": null, "no.such.option": 1}\n' |
	{ run shmctl load --partial "$D" -; echo "$RC" >"$T_TMP/rc"; cp "$T_TMP/err" "$T_TMP/lerr"; }
pass "load --partial - (a plain object on stdin): exit 0" test "$(cat "$T_TMP/rc")" = 0
pass "load --partial: an unknown key is a warning naming it" \
	test "$(cat "$T_TMP/lerr")" = "shmctl: warning: <stdin>: unknown option 'no.such.option' skipped"
t_out "load: values applied" 21 shmctl get "$D" recompile_limit
t_out "load: null applied" null shmctl get "$D" job_id
run shmctl reset -q "$D" --all
SHMCTL_BIN=$SHMCTL
sed "s|^shmctl |$SHMCTL_BIN |" "$T_TMP/replay.sh" >"$T_TMP/replay2.sh"
run sh "$T_TMP/replay2.sh"
t_out "diff --format shell replays to the same configuration" "$H3" shmctl hash "$D"

# --- reset -------------------------------------------------------------
run shmctl set -q "$D" recompile_limit=30 verbose=true
run shmctl reset "$D" recompile_limit
pass "reset OPTION: old -> new" pyeval 'a[0].splitlines()[0] == a[1] + ".recompile_limit: 30 -> 8"' "$OUT" "$DYN"
t_json "reset OPTION: back to the default source, others kept" '
{o["name"]: o["source"] for o in j}["torch._dynamo.config.recompile_limit"] == "default" and
{o["name"]: o["source"] for o in j}["torch._dynamo.config.verbose"] == "user"' shmctl show "$D" --json
run shmctl reset "$D" "$CMP.verbose"
t_out "reset through an alias clears its target" false shmctl get "$D" verbose

# --- knob layer ----------------------------------------------------------
run shmctl set "$D" --knob force_disable_caches=true
pass "set --knob: exit 0" test "$RC" = 0 -a -z "$ERR"
t_json "set --knob: source knob" '
[(o["value"], o["source"]) for o in j if o["name"] == "torch.compiler.config.force_disable_caches"] == [(True, "knob")]' \
	shmctl show "$D" force_disable_caches --json
run shmctl set "$D" force_disable_caches=false
t_json "user beats knob" '
[(o["value"], o["source"]) for o in j if o["name"] == "torch.compiler.config.force_disable_caches"] == [(False, "user")]' \
	shmctl show "$D" force_disable_caches --json
run shmctl set --knob "$D" force_disable_caches=true
pass "set --knob under a user value: stored, with a warning" test "$RC" = 0 -a \
	"$ERR" = "shmctl: warning: $CMP.force_disable_caches: value stored in the knob layer, but the user layer wins (false)"
t_json "the knob layer holds the value" 'j["layers"]["knob"] == {"value": True} and j["value"] is False' \
	shmctl describe "$D" force_disable_caches --json
run shmctl reset "$D" --knob --all
t_json "reset --knob --all clears the knob layer only" 'j["layers"]["knob"] is None and j["layers"]["user"] == {"value": False}' \
	shmctl describe "$D" force_disable_caches --json
t_errmatch "set --knob on an option without a knob" 1 \
	"^shmctl: torch._dynamo.config.recompile_limit=3: the option declares no knob" \
	shmctl set --knob "$D" recompile_limit=3

# --- the environment layers --------------------------------------------------
run env TORCH_COMPILE_JOB_ID=job42 TORCHINDUCTOR_FORCE_DISABLE_CACHES=1 TORCHDYNAMO_VERBOSE=true \
	$SHMCTL create -q "$E"
pass "create with environment variables" test "$RC" = 0
t_json "env_default and env_force layers from the creator's environment" '
{o["name"]: (o["value"], o["source"]) for o in j}["torch.compiler.config.job_id"] == ("job42", "env_default") and
{o["name"]: (o["value"], o["source"]) for o in j}["torch.compiler.config.force_disable_caches"] == (True, "env_force") and
{o["name"]: (o["value"], o["source"]) for o in j}["torch._dynamo.config.verbose"] == (True, "env_default")' \
	shmctl show "$E" --json
run shmctl set "$E" force_disable_caches=false job_id=mine
pass "set under env_force: exit 0, a warning naming the layer and variables" test "$RC" = 0 -a \
	"$ERR" = "shmctl: warning: $CMP.force_disable_caches: value stored in the user layer, but the env_force layer wins (true from TORCHINDUCTOR_FORCE_DISABLE_CACHES or TORCH_COMPILE_FORCE_DISABLE_CACHES)"
t_out "env_force still wins" true shmctl get "$E" force_disable_caches
t_out "user beats env_default" mine shmctl get "$E" job_id
t_json "the user value is stored under env_force" 'j["layers"]["user"] == {"value": False} and j["source"] == "env_force"' \
	shmctl describe "$E" force_disable_caches --json
run env TORCH_COMPILE_JOB_ID=other $SHMCTL create -q --force "$E"
t_json "create --force keeps the user layer, takes this environment's layers" \
	'j["layers"]["user"] == {"value": "mine"} and j["layers"]["env_default"] == {"value": "other"}' \
	shmctl describe "$E" job_id --json
run env -u TORCH_COMPILE_JOB_ID -u TORCH_COMPILE_STICKY_PGO_KEY $SHMCTL create --force "$E"
pass "create --force where the variable is unset: says which env layer it emptied" eval 'test "$RC" = 0 &&
	printf "%s\n" "$OUT" | grep -qxF "environment: torch.compiler.config.job_id [env_default]: \"other\" -> unset (no variable of it is set here)"'
t_json "... and the history says why" '
[r["origin"] for r in j[:2]] == ["environment of the replacement", "segment replaced"] and
j[0]["changes"] == [{"name": "torch.compiler.config.job_id", "layer": "env_default", "old_set": True, "old": "other",
                     "new_set": False, "new": None}]' shmctl log "$E" -n 2 --json
run shmctl create -q --force --no-env "$E"
t_json "create --force --no-env: the env layers reset, the user layer kept" \
	'j["layers"]["env_default"] is None and j["layers"]["user"] == {"value": "mine"}' shmctl describe "$E" job_id --json
run shmctl create -q --force --fresh --no-env "$E"
t_out "create --force --fresh --no-env: nothing kept, the environment ignored" null env TORCH_COMPILE_JOB_ID=x $SHMCTL get "$E" job_id
run env TORCHDYNAMO_VERBOSE=maybe $SHMCTL create --force "$E"
pass "create with a bad environment value fails naming the variable" eval 'test "$RC" = 1 -a -z "$OUT" &&
	pyeval "a[0].startswith(\"shmctl: \") and \"TORCHDYNAMO_VERBOSE\" in a[0] and \"maybe\" in a[0] and len(a[0].splitlines()) == 1" "$ERR"'

# --- ls, rm ------------------------------------------------------------------
t_json "ls --json lists the segment" '
[(s["generation"] > 1, s["options"], s["error"], s["readers"], s["mode"]) for s in j if s["name"] == "'"$D"'"] == [(True, 38, None, 0, "0600")] and
all({"name", "size", "generation", "readers", "error"} <= set(s) for s in j)' shmctl ls --json
run shmctl ls
pass "ls (human): a row for the segment" pyeval '
l = [x.split() for x in a[0].splitlines()]
l[0][:5] == ["NAME", "SIZE", "GENERATION", "OPTIONS", "ATTACHED"] and [r[4] for r in l if r[0] == a[1]] == ["38"]' "$OUT" "$D"
t_rc "rm" 0 shmctl rm "$D"
pass "rm removes the object" test ! -e "/dev/shm/shmcfg.$D"
t_err "rm of a missing segment fails" 1 "shmctl: no such segment '$D'" shmctl rm "$D"
t_rc "rm -f of a missing segment succeeds" 0 shmctl rm -f "$D"

# --- version and help ---------------------------------------------------------
run shmctl --version
pass "--version" pyeval 'a[0].startswith("shmctl (shmcfg) ") and len(a[0].splitlines()) == 1' "$OUT"
for c in create rm ls show get describe set reset stat watch dump load diff hash check gc header; do
	run shmctl "$c" --help
	pass "$c --help: usage on stdout, exit 0" pyeval \
		'a[1] == "0" and a[0].startswith("usage: shmctl " + a[2]) and "--help" in a[0] and a[3] == ""' \
		"$OUT" "$RC" "$c" "$ERR"
done
run shmctl help set
pass "help CMD is CMD --help" test "$RC" = 0 -a "$OUT" = "$(shmctl set --help)"
run shmctl --help
pass "--help lists every command" pyeval '
all(("\n  %s " % c) in a[0] for c in "create rm ls show get describe set reset stat watch dump load diff hash check gc header".split())' "$OUT"
t_done
