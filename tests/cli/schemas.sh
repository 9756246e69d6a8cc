#!/bin/sh
# SPDX-License-Identifier: MIT
# Named schemas: --schema NAME (no '/' and no '.') is NAME.yaml in the
# directories of $SHMCFG_SCHEMA_PATH, then the installed schema directory
# (shmcfg_schema_load(), lib/schema/schemafile.c); the shipped schemas/torch.yaml
# loads; a name found nowhere is one line listing where it was looked for;
# the Python binding's create(schema=NAME) resolves the same way. shmctl
# schema writes a segment's schema back as a file of the same schema hash
# (what each cluster agent keeps in etcd, for hosts without the segment).
. "$(dirname "$0")/lib.sh"

mkdir "$T_TMP/none" "$T_TMP/d1" "$T_TMP/d2" "$T_TMP/here"
printf 'format: 1\noptions:\n  m.val:\n    type: int\n    default: %s\n' 1 >"$T_TMP/d1/m.yaml"
printf 'format: 1\noptions:\n  m.val:\n    type: int\n    default: %s\n' 2 >"$T_TMP/d2/m.yaml"
cp "$T_TMP/d2/m.yaml" "$T_TMP/here/plain"

# --- the shipped torch schema, by name ---------------------------------------
seg T torch
n_torch=$("$PYTHON" -c '
import re, sys
print(len(re.findall(r"^  \S+:$", open(sys.argv[1]).read(), re.M)))' "$top_srcdir/schemas/torch.yaml")
SHMCFG_SCHEMA_PATH=$top_srcdir/schemas
export SHMCFG_SCHEMA_PATH
t_rc "create --schema torch (SHMCFG_SCHEMA_PATH=schemas)" 0 shmctl create -q --no-env --schema torch "$T"
t_json "its $n_torch options are those of schemas/torch.yaml" "
len(j) == $n_torch and {'torch._inductor.config.triton.cudagraphs',
  'torch._dynamo.config.recompile_limit', 'torch.compiler.config.job_id',
  'torch._functorch.config.donated_buffer',
  'torch.fx.experimental._config.use_duck_shape'} <= {o['name'] for o in j}" shmctl show --json "$T"
t_out "a computed default taken from the import: layout_optimization" true \
	shmctl get "$T" torch._inductor.config.layout_optimization
shmctl rm "$T"

# --- the search order ----------------------------------------------------------
seg M order
SHMCFG_SCHEMA_PATH="$T_TMP/none::$T_TMP/d1:$T_TMP/d2"
t_rc "create --schema m: the first directory that has m.yaml" 0 shmctl create -q --no-env --schema m "$M"
t_out "from d1 (empty entries and a directory without it are passed over)" 1 shmctl get "$M" m.val
SHMCFG_SCHEMA_PATH="$T_TMP/d2:$T_TMP/d1"
t_rc "the other order" 0 shmctl create -q --no-env --force --schema m "$M"
t_out "from d2" 2 shmctl get "$M" m.val
run shmctl header --schema m
pass "header --schema m reads it too" grep -q 'm\.val' "$T_TMP/out"

# --- names found nowhere -------------------------------------------------------
SHMCFG_SCHEMA_PATH="$T_TMP/none:$T_TMP/d1"
t_errmatch "an unknown name: one line naming every directory tried" 1 \
	"^shmctl: no schema named 'nosuch': no nosuch\.yaml in $T_TMP/none, $T_TMP/d1, /.*/schemas\$" \
	shmctl create -q --no-env --schema nosuch "$M"
t_errmatch "header --schema: the same" 1 "^shmctl: no schema named 'nosuch': no nosuch\.yaml in $T_TMP/none, " \
	shmctl header --schema nosuch
unset SHMCFG_SCHEMA_PATH
t_errmatch "without SHMCFG_SCHEMA_PATH: the installed directory only" 1 \
	"^shmctl: no schema named 'nosuch': no nosuch\.yaml in /[^,]*/schemas \(SHMCFG_SCHEMA_PATH adds directories\)\$" \
	shmctl create -q --no-env --schema nosuch "$M"
cd "$T_TMP/here" || exit 99
t_errmatch "a file of that name here: the error says to give ./NAME" 1 \
	"no schema named 'plain': .* \(the file here: give \./plain\)\$" \
	shmctl create -q --no-env --schema plain "$M"
t_rc "./plain is the file" 0 shmctl create -q --no-env --force --schema ./plain "$M"
t_out "its value" 2 shmctl get "$M" m.val
t_errmatch "a path (with a dot) is never looked up" 1 "^shmctl: plain\.yml: No such file or directory\$" \
	shmctl create -q --no-env --schema plain.yml "$M"
cd "$top_builddir" || exit 99

# --- the Python binding ----------------------------------------------------------
if [ -n "${SHMCFG_SANITIZERS:-}" ]; then
	skip "python: libshmcfg is built with sanitizers (ctypes cannot load it)"
else
	seg P python
	run env SHMCFG_SCHEMA_PATH="$T_TMP/d1" PYTHONPATH="$top_srcdir/python" \
		SHMCFG_LIBRARY="$top_builddir/lib/.libs/libshmcfg.so.3" "$PYTHON" -c '
import os, pathlib, sys, shmcfg
seg, here = sys.argv[1], sys.argv[2]
s = shmcfg.create(seg, schema="m", no_env=True, force=True)
assert s.get("m.val") == 1, s.get("m.val")
s.close()
try:
    shmcfg.create(seg, schema="nosuch", no_env=True, force=True)
except FileNotFoundError as e:
    assert "no schema named \x27nosuch\x27: no nosuch.yaml in " in str(e), str(e)
else:
    raise AssertionError("nosuch was found")
os.chdir(here)
s = shmcfg.create(seg, schema=pathlib.Path("plain"), no_env=True, force=True)
assert s.get("m.val") == 2, "a path object is a file"
s.close()
shmcfg.unlink(seg)
print("ok")' "$P" "$T_TMP/here"
	if [ "$RC" = 0 ] && [ "$OUT" = ok ]; then
		ok "python: create(schema=\"m\"), an unknown name's error, a Path is a file"
	else
		not_ok "python: create(schema=\"m\"), an unknown name's error, a Path is a file"
		diag_run
	fi
fi

# --- shmctl schema: the segment's schema, written back --------------------------
shash() {
	shmctl stat --json "$1" | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["schema_hash"])'
}
seg R1 rt1
seg R2 rt2
for s in default "$top_srcdir/schemas/torch.yaml" "$top_srcdir/tests/cli/all-attributes.yaml"; do
	shmctl rm "$R1" >/dev/null 2>&1
	shmctl rm "$R2" >/dev/null 2>&1
	if [ "$s" = default ]; then shmctl create "$R1" >/dev/null; else shmctl create "$R1" --schema "$s" >/dev/null; fi
	run shmctl schema "$R1"
	printf '%s\n' "$OUT" >"$T_TMP/back.yaml"
	shmctl create "$R2" --schema "$T_TMP/back.yaml" >/dev/null 2>"$T_TMP/err"
	pass "schema of a segment of schema $(basename "$s"): exit 0, loads back to the same schema hash" \
		test "$RC" = 0 -a -n "$(shash "$R1")" -a "$(shash "$R1" 2>/dev/null)" = "$(shash "$R2" 2>/dev/null)"
done
pass "... every attribute written (alias, implies, choices, bounds, variables, knob, flags)" pyeval '
t = a[0]
all(k in t for k in ("alias: a.level", "implies: {a.level: 3", "choices:", "min: -.inf", "env_force:",
                     "knob: \"flag_knob\"", "hash_ignored: true", "private: true", "deprecated:"))' "$OUT"
# --json: each option with describe --json's keys, but those of the values
run shmctl schema "$R1" --json
printf '%s\n' "$OUT" >"$T_TMP/schema.json"
for o in a.flag a.level a.ratio a.choice a.name a.tags a.items a.old a.older; do
	shmctl describe --json "$R1" "$o" >"$T_TMP/d-$o.json" 2>/dev/null
done
pass "schema --json: the segment, its schema hash, each option as describe --json has it (no values)" pyeval '
s = json.load(open(a[1]))
values = ("value", "source", "is_default", "generation", "layers")
d = {n: json.load(open("%s/d-%s.json" % (a[4], n))) for n in
     "a.flag a.level a.ratio a.choice a.name a.tags a.items a.old a.older".split()}
(a[0] == "0" and s["name"] == a[2] and s["schema_hash"] == a[3] and
 sorted(o["name"] for o in s["options"]) == sorted(d) and
 all(o == {k: v for k, v in d[o["name"]].items() if k not in values} for o in s["options"]))' \
	"$RC" "$T_TMP/schema.json" "$R1" "$(shash "$R1")" "$T_TMP"
t_errmatch "schema of no segment: one line" 1 "no such segment" shmctl schema "cli-$$-none"
t_usage "schema without NAME: usage" shmctl schema

t_done
