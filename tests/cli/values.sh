#!/bin/sh
# SPDX-License-Identifier: MIT
# Loads and values that say what they did: strict and partial loads, null
# versus the text "None", set's generation and --json, the environment
# variables create applied (issue 14).
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/cli/lib.sh"

seg D vals
seg O other
seg A ambig
DYN=torch._dynamo.config
CMP=torch.compiler.config
unset TORCH_COMPILE_JOB_ID TORCH_COMPILE_STICKY_PGO_KEY TORCHINDUCTOR_FORCE_DISABLE_CACHES \
	TORCH_COMPILE_FORCE_DISABLE_CACHES TORCHDYNAMO_VERBOSE 2>/dev/null

gen() {
	shmctl stat --json "$1" | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["generation"])'
}

# --- create reports the environment variables it applied ----------------
run env TORCH_COMPILE_JOB_ID=run-9 TORCHDYNAMO_VERBOSE=1 $SHMCTL create "$D"
pass "create: the variables applied, one line each, name -> option (layer)" pyeval '
l = a[0].splitlines()
(len(l) == 3 and l[0].startswith("created segment ") and
 l[1] == "environment: TORCH_COMPILE_JOB_ID=run-9 -> torch.compiler.config.job_id (env_default)" and
 l[2] == "environment: TORCHDYNAMO_VERBOSE=1 -> torch._dynamo.config.verbose (env_default)")' "$OUT"
t_out "create: the variable is in effect" run-9 shmctl get "$D" job_id
run env TORCH_COMPILE_JOB_ID="a b" $SHMCTL create --force "$D"
pass "create: a value with a blank is quoted" pyeval \
	'a[0].splitlines()[1] == "environment: TORCH_COMPILE_JOB_ID=\"a b\" -> torch.compiler.config.job_id (env_default)"' \
	"$OUT"
run env TORCH_COMPILE_JOB_ID=x $SHMCTL create --force --quiet "$D"
pass "create --quiet: nothing, variables or not" test "$RC" = 0 -a -z "$OUT"
run shmctl create --force "$D"
pass "create --force without the variable: the summary line and the env layer it emptied" pyeval '
l = a[0].splitlines()
len(l) == 2 and l[0].startswith("replaced segment ") and l[1] == (
    "environment: torch.compiler.config.job_id [env_default]: \"x\" -> unset (no variable of it is set here)")' "$OUT"
run shmctl create --force "$D"
pass "create without variables: only the summary line" \
	test "$RC" = 0 -a "$(echo "$OUT" | wc -l)" = 1 -a -z "$(echo "$OUT" | grep environment)"
run env TORCH_COMPILE_JOB_ID=x $SHMCTL create --force "$D"
run env TORCH_COMPILE_JOB_ID=x $SHMCTL create --force --no-env "$D"
pass "create --no-env: nothing applied; the env layer it emptied, as --no-env's" pyeval '
l = a[0].splitlines()
len(l) == 2 and l[1] == "environment: torch.compiler.config.job_id [env_default]: \"x\" -> unset (--no-env)"' "$OUT"

# --- set prints the generation; --json ------------------------------------
run shmctl set "$D" recompile_limit=16 job_id=abc
pass "set: the changes, then the new generation" pyeval '
l = a[0].splitlines()
l == [a[1] + ".recompile_limit: 8 -> 16", a[2] + ".job_id: null -> \"abc\"", "generation " + a[3]]' \
	"$OUT" "$DYN" "$CMP" "$(gen "$D")"
G=$(gen "$D")
run shmctl set "$D" recompile_limit=16
pass "set of the same value: the generation, unchanged" test "$RC" = 0 -a "$OUT" = "$DYN.recompile_limit: 16 (unchanged)
generation $G (nothing changed)"
run shmctl set "$D" --json recompile_limit=20 job_id=None cache_key_tag=t verbose=false
pass "set --json: exit 0, nothing on stderr" test "$RC" = 0 -a -z "$ERR"
pass "set --json: the generation and each layer's old and new value" jcheck "$T_TMP/out" '
c = {x["name"]: x for x in j["changes"]}
(j["generation"] == '"$((G + 1))"' and len(j["changes"]) == 4 and
 c["torch._dynamo.config.recompile_limit"] == {"name": "torch._dynamo.config.recompile_limit", "layer": "user",
   "old": 16, "new": 20} and
 c["torch.compiler.config.job_id"] == {"name": "torch.compiler.config.job_id", "layer": "user", "old": "abc",
   "new": None} and
 c["torch.compiler.config.cache_key_tag"] == {"name": "torch.compiler.config.cache_key_tag", "layer": "user",
   "new": "t"} and
 "old" not in c["torch._dynamo.config.verbose"] and c["torch._dynamo.config.verbose"]["new"] is False)'
t_json "set --json: the generation is the segment's" "j['generation'] == $((G + 1))" shmctl stat "$D" --json
t_json "set --json of nothing new: the current generation, no changes" \
	"j == {'generation': $((G + 1)), 'changes': []}" shmctl set "$D" --json recompile_limit=20
t_json "set --knob --json: the knob layer" '
j["changes"] == [{"name": "torch.compiler.config.force_disable_caches", "layer": "knob", "new": True}]' \
	shmctl set "$D" --knob --json force_disable_caches=true
t_json "reset --json: old, and no new (the layer is cleared)" '
j["changes"] == [{"name": "torch._dynamo.config.recompile_limit", "layer": "user", "old": 20}]' \
	shmctl reset "$D" --json recompile_limit
run shmctl reset -q --knob "$D" --all

# --- null versus text -----------------------------------------------------
run shmctl set -q "$D" job_id=None
t_out "get: null prints null" null shmctl get "$D" job_id
t_out "get --json: null" null shmctl get "$D" job_id --json
run shmctl set -q "$D" 'job_id="None"'
t_out "get: the text None prints quoted" '"None"' shmctl get "$D" job_id
t_out "get --raw: the text as it is" None shmctl get "$D" job_id --raw
t_out "get --json: a JSON string" '"None"' shmctl get "$D" job_id --json
run shmctl set -q "$D" 'job_id="null"'
t_out "get: the text null prints quoted (never as null)" '"null"' shmctl get "$D" job_id
run shmctl set -q "$D" 'job_id="\"q\""'
t_out "get: a text starting with a double quote prints quoted" '"\"q\""' shmctl get "$D" job_id
t_out "get --raw: as it is" '"q"' shmctl get "$D" job_id --raw
run shmctl set -q "$D" job_id=plain
t_out "get: other text prints as it is" plain shmctl get "$D" job_id
run shmctl set -q "$D" "job_id=$(shmctl get "$D" job_id)"
t_out "get's output set again reads back the same" plain shmctl get "$D" job_id --raw
for text in None null '"q"'; do
	run shmctl set -q "$D" "job_id=\"$(printf '%s' "$text" | sed 's/"/\\"/g')\""
	run shmctl set -q "$D" "job_id=$(shmctl get "$D" job_id)"
	t_out "get's quoted output of $text reads back as the text" "$text" shmctl get "$D" job_id --raw
done
t_usage "get --raw --json: a usage error" shmctl get "$D" job_id --raw --json
run shmctl set -q "$D" job_id=None 'cache_key_tag="None"'
run shmctl show "$D"
pass "show: null is null, the text is quoted" pyeval '
r = {l.split()[0]: l.split()[1] for l in a[0].splitlines()[1:]}
r["torch.compiler.config.job_id"] == "null" and r["torch.compiler.config.cache_key_tag"] == "\"None\""' "$OUT"
run shmctl diff "$D"
pass "diff: the text is a Python string, not None" pyeval \
	'"torch.compiler.config.cache_key_tag = '"'None'"'" in a[0].splitlines()' "$OUT"

# --- an unquoted none for a string that cannot be null ------------------
G=$(gen "$D")
for word in None none null NULL; do
	t_err "set of a non-nullable string to unquoted $word: refused with the quoting hint" 1 \
		"shmctl: $CMP.cache_key_tag=$word: the option is not nullable; to store the text $word, quote it: '$CMP.cache_key_tag=\"$word\"'" \
		shmctl set "$D" "cache_key_tag=$word"
done
t_out "(the refused set changed nothing)" '"None"' shmctl get "$D" cache_key_tag
pass "(and published nothing)" test "$(gen "$D")" = "$G"
t_errmatch "a refusal among other changes: nothing applied" 1 "cache_key_tag=none: the option is not nullable" \
	shmctl set "$D" recompile_limit=3 cache_key_tag=none
t_out "(recompile_limit untouched)" 8 shmctl get "$D" recompile_limit
run shmctl set -q "$D" 'cache_key_tag="none"'
t_out "the quoted word is the text" none shmctl get "$D" cache_key_tag --raw
run shmctl set -q "$D" cache_key_tag=Nonesense
t_out "a word that only starts like none is text" Nonesense shmctl get "$D" cache_key_tag
run shmctl set -q "$D" job_id=x
run shmctl set -q "$D" job_id=none
t_out "a nullable string: unquoted none is null" null shmctl get "$D" job_id --json

# --- load: strict by default ---------------------------------------------
run shmctl reset -q "$D" --all
run shmctl set -q "$D" recompile_limit=11 job_id=kept
shmctl dump "$D" >"$T_TMP/before.json"
cat >"$T_TMP/unknown.json" <<'EOF'
{"torch._dynamo.config.recompile_limit": 12, "no.such.option": 1, "verbose": true, "nope": 2}
EOF
t_err "load: unknown names refused, all listed on one line" 1 \
	"shmctl: $T_TMP/unknown.json: 2 unknown options: 'no.such.option', 'nope'; nothing loaded (load --partial loads what fits)" \
	shmctl load "$D" "$T_TMP/unknown.json"
shmctl dump "$D" >"$T_TMP/after.json"
pass "load refused: nothing changed (the dump is the same)" cmp -s "$T_TMP/before.json" "$T_TMP/after.json"
printf '{"torch._dynamo.config.recompile_limt": 12, "recompile_limt": 13, "zzqqxx": 1}\n' >"$T_TMP/typo.json"
t_err "load: a name close to an option's: did you mean its full name" 1 \
	"shmctl: $T_TMP/typo.json: 3 unknown options: 'torch._dynamo.config.recompile_limt' (did you mean torch._dynamo.config.recompile_limit?), 'recompile_limt' (did you mean torch._dynamo.config.recompile_limit?), 'zzqqxx'; nothing loaded (load --partial loads what fits)" \
	shmctl load "$D" "$T_TMP/typo.json"
run shmctl load --partial "$D" "$T_TMP/typo.json"
pass "load --partial: the same in each warning, every skipped name counted" pyeval '
a[0].splitlines() == ["shmctl: warning: %s: unknown option %s skipped" % (a[2], n) for n in (
 "'"'"'torch._dynamo.config.recompile_limt'"'"' (did you mean torch._dynamo.config.recompile_limit?)",
 "'"'"'recompile_limt'"'"' (did you mean torch._dynamo.config.recompile_limit?)", "'"'"'zzqqxx'"'"'")] and
a[1].endswith("(3 skipped)")' "$ERR" "$OUT" "$T_TMP/typo.json"
printf '{"torch.compiler.config.recompile_limt": 1}\n' >"$T_TMP/aliastypo.json"
t_err "load: a typo of an alias's name: did you mean the alias" 1 \
	"shmctl: $T_TMP/aliastypo.json: 1 unknown option: 'torch.compiler.config.recompile_limt' (did you mean torch.compiler.config.recompile_limit?); nothing loaded (load --partial loads what fits)" \
	shmctl load "$D" "$T_TMP/aliastypo.json"
printf '{"": 1, "torch._dynamo": 2}\n' >"$T_TMP/odd.json"
t_err "load: the empty name shows; a part of many names gets no did-you-mean" 1 \
	"shmctl: $T_TMP/odd.json: 2 unknown options: '', 'torch._dynamo'; nothing loaded (load --partial loads what fits)" \
	shmctl load "$D" "$T_TMP/odd.json"
printf '{"a, b": 1, "c": 2}\n' >"$T_TMP/comma.json"
t_err "load: each unknown name quoted, so a name holding ', ' reads as one" 1 \
	"shmctl: $T_TMP/comma.json: 2 unknown options: 'a, b', 'c'; nothing loaded (load --partial loads what fits)" \
	shmctl load "$D" "$T_TMP/comma.json"
LONG=a.$("$PYTHON" -c 'print("b" * 250)')
seg L long
printf 'format: 1\noptions:\n  %s:\n    type: str\n    default: "x"\n    choices: ["x", %s]\n' "$LONG" \
	"$("$PYTHON" -c 'print(", ".join("\"choice_%04d\"" % i for i in range(40)))')" >"$T_TMP/long.yaml"
shmctl create -q --no-env --schema "$T_TMP/long.yaml" "$L"
printf '{"%sc": "x"}\n' "$LONG" >"$T_TMP/longtypo.json"
run shmctl load "$L" "$T_TMP/longtypo.json"
pass "load: a did-you-mean of a 252-byte name is whole" pyeval '
a[0] == "1" and a[1].endswith("(did you mean %s?); nothing loaded (load --partial loads what fits)" % a[2])' \
	"$RC" "$ERR" "$LONG"
printf '{"%s": "%s", "%sc": "x"}\n' "$LONG" "$("$PYTHON" -c 'print("z" * 100)')" "$LONG" >"$T_TMP/longbad.json"
run shmctl load --partial "$L" "$T_TMP/longbad.json"
pass "load --partial: a refusal of a long detail (over 512 bytes) counts as skipped too" pyeval '
a[0] == "0" and a[1].endswith("(2 skipped)") and len(a[2].splitlines()) == 2' "$RC" "$OUT" "$ERR"
"$PYTHON" -c '
import json
print(json.dumps({"opt%d.x" % i: i for i in range(300)}))' >"$T_TMP/many.json"
t_errmatch "load: many unknown names, a bounded list on one line" 1 \
	"many.json: 300 unknown options: 'opt0.x', 'opt1.x',.*\(and [0-9]+ more\); nothing loaded" \
	shmctl load "$D" "$T_TMP/many.json"
pass "(the line stays short)" test "$(wc -c <"$T_TMP/err")" -lt 600
printf '{"evil\\u001b[31m\\nname": 1}\n' >"$T_TMP/evil.json"
t_errmatch "load: an unknown name with control bytes: escaped, still one line" 1 \
	"1 unknown option: 'evil\\\\x1b\\[31m\\\\x0aname'; nothing loaded" shmctl load "$D" "$T_TMP/evil.json"

cat >"$T_TMP/other.yaml" <<'EOF'
format: 1
options:
  torch._dynamo.config.recompile_limit:
    type: int
    default: 8
  a.x:
    type: int
  b.x:
    type: int
EOF
run shmctl create -q "$O" --schema "$T_TMP/other.yaml"
run shmctl set -q "$O" recompile_limit=30
shmctl dump "$O" >"$T_TMP/otherdump.json"
t_errmatch "load: a dump of another schema is refused, naming both hashes" 1 \
	"otherdump.json: the dump's schema hash [0-9a-f]{32} is not the segment's [0-9a-f]{32}; nothing loaded" \
	shmctl load "$D" "$T_TMP/otherdump.json"
shmctl dump "$D" >"$T_TMP/after.json"
pass "(nothing changed)" cmp -s "$T_TMP/before.json" "$T_TMP/after.json"

# --- load --partial ---------------------------------------------------------
G=$(gen "$D")
run shmctl load --partial "$D" "$T_TMP/unknown.json"
pass "load --partial: exit 0, loaded, the skipped counted" \
	test "$RC" = 0 -a "$OUT" = "$T_TMP/unknown.json: loaded into '$D', generation $((G + 1)) (2 skipped)"
pass "load --partial: a warning per name skipped" pyeval '
a[0].splitlines() == ["shmctl: warning: %s: unknown option %r skipped" % (a[1], n) for n in ("no.such.option", "nope")]' \
	"$ERR" "$T_TMP/unknown.json"
t_out "load --partial: the known values applied (a short name too)" "12 true" \
	sh -c "echo \$($SHMCTL get $D recompile_limit) \$($SHMCTL get $D verbose)"
run shmctl load --partial "$D" "$T_TMP/otherdump.json"
pass "load --partial of another schema's dump: warns, loads what fits" \
	test "$RC" = 0 -a "$(echo "$ERR" | grep -c 'schema hash')" = 1
t_out "(its recompile_limit applied)" 30 shmctl get "$D" recompile_limit
printf '{"recompile_limit": 1000000000000, "job_id": 5, "verbose": false}\n' >"$T_TMP/bad.json"
t_errmatch "load: a bad value fails a strict load" 1 "job_id|recompile_limit" shmctl load "$D" "$T_TMP/bad.json"
run shmctl load --partial "$D" "$T_TMP/bad.json"
pass "load --partial: bad values skipped with a warning, the rest applied" \
	test "$RC" = 0 -a "$(echo "$ERR" | grep -c 'skipped$')" = 1 -a "$(shmctl get "$D" verbose)" = false
t_errmatch "load --partial --bogus: one line, exit 2" 2 "^shmctl: load: unknown option '--bogus'" shmctl load --partial --bogus "$D" "$T_TMP/bad.json"

# --- load: short names, no change -------------------------------------------
printf '{"recompile_limit": 14, "config.job_id": "short"}\n' >"$T_TMP/short.json"
t_rc "load: short names resolve as in set" 0 shmctl load "$D" "$T_TMP/short.json"
t_out "(both applied)" "14 short" sh -c "echo \$($SHMCTL get $D recompile_limit) \$($SHMCTL get $D job_id)"
G=$(gen "$D")
run shmctl load "$D" "$T_TMP/short.json"
pass "load of nothing that differs: exit 0, says nothing changed" \
	test "$RC" = 0 -a "$OUT" = "$T_TMP/short.json: nothing changed (generation $G)"
pass "(no generation made)" test "$(gen "$D")" = "$G"
shmctl dump "$D" >"$T_TMP/self.json"
run shmctl load "$D" "$T_TMP/self.json"
G=$(gen "$D")
run shmctl load "$D" "$T_TMP/self.json"
pass "load of its own dump again: nothing changed" \
	test "$RC" = 0 -a "$OUT" = "$T_TMP/self.json: nothing changed (generation $G)"
printf '{"recompile_limit": 1, "torch._dynamo.config.recompile_limit": 2}\n' >"$T_TMP/twice.json"
t_errmatch "load: two names of one option are refused" 1 "two names of option torch._dynamo.config.recompile_limit" \
	shmctl load "$D" "$T_TMP/twice.json"

run shmctl create -q "$A" --schema "$T_TMP/other.yaml"
printf '{"x": 1, "recompile_limit": 9}\n' >"$T_TMP/ambig.json"
t_errmatch "load: an ambiguous short name is refused, naming the candidates" 1 "'x' is ambiguous: a.x, b.x" \
	shmctl load "$A" "$T_TMP/ambig.json"
t_out "(nothing loaded)" 8 shmctl get "$A" recompile_limit
run shmctl load --partial "$A" "$T_TMP/ambig.json"
pass "load --partial: an ambiguous name is skipped with a warning" \
	test "$RC" = 0 -a "$ERR" = "shmctl: warning: $T_TMP/ambig.json: option name 'x' is ambiguous; skipped"
t_out "(the rest loaded)" 9 shmctl get "$A" recompile_limit

t_done
