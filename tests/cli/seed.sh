#!/bin/sh
# SPDX-License-Identifier: MIT
# The seed's rules with custom schemas, through the real shmctl: a dump keeps
# stored values, so dump | load is exact under an active implication; get of
# a deprecated option warns; cycles are named whole and every error of a
# schema file names FILE:LINE, those found when it is built too; show --json
# and describe --json agree on an alias's fields.
. "$(dirname "$0")/lib.sh"

# --- dump | load under an active implication ---------------------------------
cat >"$T_TMP/imp.yaml" <<'EOF'
format: 1
options:
  m.fast:
    type: bool
    default: false
    implies: {m.level: 5, m.mode: "quick"}
  m.level:
    type: int
    default: 1
    max: 10
  m.mode:
    type: str
    default: "normal"
  m.other:
    type: int
    default: 2
  m.level_alias:
    type: int
    alias: m.level
EOF
seg A orig
seg B copy
seg I implied
shmctl create -q --no-env --schema "$T_TMP/imp.yaml" "$A"
shmctl create -q --no-env --schema "$T_TMP/imp.yaml" "$B"
shmctl create -q --no-env --schema "$T_TMP/imp.yaml" "$I"
# set names what an implication it turns on or off changed (aliases are
# their target's line), as watch does
t_out "set: the option set, then what it implied" 'm.fast: false -> true
m.level: 1 -> 5 (implied)
m.mode: "normal" -> "quick" (implied)
generation 2' shmctl set "$I" m.fast=true
t_out "... and what it stopped implying" 'm.fast: true -> false
m.level: 5 -> 1 (implied)
m.mode: "quick" -> "normal" (implied)
generation 3' shmctl set "$I" m.fast=false
t_out "... nothing implied: the option alone" 'm.level: 1 -> 2
generation 4' shmctl set "$I" m.level=2
t_json "set --json: what it implied, as changes of layer implied" '
j["changes"] == [{"name": "m.fast", "layer": "user", "old": False, "new": True},
                 {"name": "m.level", "layer": "implied", "new": 5},
                 {"name": "m.mode", "layer": "implied", "new": "quick"}]' shmctl set --json "$I" m.fast=true
t_out "reset --all counts what it stopped implying among the values changed" 'm.fast: true -> false
m.level: 5 -> 1
m.mode: "quick" -> "normal" (implied)
user layer cleared: 2 options, 3 values changed (generation 6)' shmctl reset "$I" --all
# an implication that gives an option the value it already had changes no
# value: neither the text nor --json names it
seg J same
shmctl create -q --no-env --schema "$T_TMP/imp.yaml" "$J"
shmctl set -q "$J" m.level=5
t_json "set --json: an option implied to the value it had is no implied change" '
j["changes"] == [{"name": "m.fast", "layer": "user", "new": True},
                 {"name": "m.mode", "layer": "implied", "new": "quick"}]' shmctl set --json "$J" m.fast=true
t_json "... nor when the implication stops and the value stays" '
j["changes"] == [{"name": "m.fast", "layer": "user", "old": True, "new": False},
                 {"name": "m.mode", "layer": "implied", "old": "quick"}]' shmctl set --json "$J" m.fast=false
t_out "... as the text says" 'm.fast: false -> true
m.mode: "normal" -> "quick" (implied)
generation 5' shmctl set "$J" m.fast=true
t_json "reset --json: the same" '
j["changes"] == [{"name": "m.fast", "layer": "user", "old": True},
                 {"name": "m.mode", "layer": "implied", "old": "quick"}]' shmctl reset --json "$J" m.fast
# a commit of more options than its log record lists (SHMCFG_LOG_IDS, 20):
# what it implied is found all the same
"$PYTHON" -c '
print("format: 1\noptions:\n  a.flag:\n    type: bool\n    default: false\n    implies: {z.target: 9}")
for i in range(25):
    print("  m.o%02d:\n    type: int\n    default: 0" % i)
print("  z.target:\n    type: int\n    default: 1")' >"$T_TMP/many.yaml"  # z.target past the 20 ids
seg W wide
shmctl create -q --no-env --schema "$T_TMP/many.yaml" "$W"
run shmctl set "$W" a.flag=true $(for i in $(seq 0 24); do printf 'm.o%02d=1 ' "$i"; done)
pass "set of 26 options: what it implied is named too" pyeval '
a[1] == "0" and "z.target: 1 -> 9 (implied)" in a[0].splitlines()' "$OUT" "$RC"
shmctl set -q "$A" m.level=3 m.fast=true 2>/dev/null
t_out "the implication holds: level is 5" 5 shmctl get "$A" m.level
t_json "dump: the stored values (3, the default mode), not the implied ones" '
j["values"] == {"m.fast": True, "m.level": 3, "m.mode": "normal", "m.other": 2}' shmctl dump "$A"
shmctl dump "$A" >"$T_TMP/a.json"
t_rc "load the dump into a second segment" 0 shmctl load "$B" "$T_TMP/a.json"
shmctl show --json "$A" >"$T_TMP/a-on.json"
shmctl show --json "$B" >"$T_TMP/b-on.json"
pass "with the implier on, every option agrees" pyeval '
v = lambda f: {o["name"]: o["value"] for o in json.load(open(f))}
v(a[0]) == v(a[1]) and v(a[0])["m.level"] == 5 and v(a[0])["m.mode"] == "quick"' \
	"$T_TMP/a-on.json" "$T_TMP/b-on.json"
shmctl set -q "$A" m.fast=false
shmctl set -q "$B" m.fast=false
shmctl show --json "$A" >"$T_TMP/a-off.json"
shmctl show --json "$B" >"$T_TMP/b-off.json"
pass "turned off in both, every option still agrees: the stored 3 and normal" pyeval '
v = lambda f: {o["name"]: o["value"] for o in json.load(open(f))}
(v(a[0]) == v(a[1]) and v(a[1])["m.level"] == 3 and v(a[1])["m.level_alias"] == 3 and
 v(a[1])["m.mode"] == "normal")' "$T_TMP/a-off.json" "$T_TMP/b-off.json"
shmctl set -q "$A" m.fast=true
t_out "diff (codegen) writes the stored value too" "m.fast = True
m.level = 3" shmctl diff "$A"

# --- get of a deprecated option warns --------------------------------------------
cat >"$T_TMP/dep.yaml" <<'EOF'
format: 1
options:
  m.old:
    type: int
    default: 3
    deprecated: "use m.new"
  m.new:
    type: int
    default: 4
  m.via:
    type: int
    alias: m.old
EOF
seg D dep
shmctl create -q --schema "$T_TMP/dep.yaml" "$D"
run shmctl get "$D" m.old
pass "get of a deprecated option: the value, and the warning on stderr" \
	test "$RC" = 0 -a "$OUT" = 3 -a "$ERR" = "shmctl: warning: m.old is deprecated: use m.new"
run shmctl get --json "$D" old
pass "get --json by a suffix: the same warning" \
	test "$RC" = 0 -a "$OUT" = 3 -a "$ERR" = "shmctl: warning: m.old is deprecated: use m.new"
run shmctl get "$D" m.via
pass "get of an alias of a deprecated option: its target's warning" \
	test "$RC" = 0 -a "$OUT" = 3 -a "$ERR" = "shmctl: warning: m.old is deprecated: use m.new"
run shmctl get "$D" m.new
pass "get of an option that is not deprecated: no warning" test "$RC" = 0 -a "$OUT" = 4 -a -z "$ERR"
run shmctl show "$D"
pass "show: no warning (it reads every option)" test "$RC" = 0 -a -z "$ERR"

# --- cycles and FILE:LINE of the errors found when a schema is built --------------
seg X bad
# t_schema DESC FILE EXPECTED-DETAIL YAML: create --schema and header --schema
# refuse FILE (holding YAML) with "shmctl: FILE:DETAIL", and nothing is created
t_schema() {
	printf '%s\n' "$4" >"$T_TMP/$2"
	t_err "create --schema: $1" 1 "shmctl: $T_TMP/$2:$3" shmctl create --schema "$T_TMP/$2" "$X"
	t_rc "(nothing was created)" 1 shmctl stat "$X"
	t_err "header --schema: $1" 1 "shmctl: $T_TMP/$2:$3" shmctl header --schema "$T_TMP/$2"
}
t_schema "an implication cycle, named whole" cyc.yaml "3: config implication cycle: x -> z -> y -> x" \
'format: 1
options:
  x:
    type: bool
    implies: {z: true}
  y:
    type: bool
    implies: {x: true}
  z:
    type: bool
    implies: {y: true}'
t_schema "an alias cycle, named whole" acyc.yaml "6: config alias cycle: a1 -> a2 -> a3 -> a1" \
'format: 1
options:
  lead:
    type: int
    alias: a1
  a1:
    type: int
    alias: a2
  a2:
    type: int
    alias: a3
  a3:
    type: int
    alias: a1'
t_schema "an alias target not declared" undecl.yaml "5: m.b: alias target m.zz is not declared" \
'format: 1
options:
  m.a: {type: int}
  # m.b names an option that is not there
  m.b:
    type: int
    alias: m.zz'
t_schema "an implication target not declared" impl.yaml "4: m.on: implies unknown option m.zz" \
'format: 1
options:
  m.a: {type: int}
  m.on:
    type: bool
    doc: |-
      Turns things on.
    implies: {m.zz: 1}'
t_schema "an alias of another type" atype.yaml "6: m.b: alias of m.a must have its type int" \
'format: 1
options:
  m.a:
    type: int
    default: 1
  m.b:
    type: str
    alias: m.a'
t_schema "an implied value out of range" range.yaml "7: m.on: implies m.a: m.a: value 11 is above the maximum 10" \
'format: 1
options:
  m.a:
    type: int
    max: 10
  m.b: {type: int}
  m.on:
    type: bool
    implies:
      m.b: 1
      m.a: 11'

# --- show --json and describe --json of aliases ------------------------------------
cat >"$T_TMP/al.yaml" <<'EOF'
format: 1
options:
  m.target:
    type: int
    default: 7
  m.mid:
    type: int
    alias: m.target
  m.outer:
    type: int
    alias: m.mid
EOF
seg L alias
shmctl create -q --schema "$T_TMP/al.yaml" "$L"
shmctl show --json "$L" >"$T_TMP/show.json"
for o in m.target m.mid m.outer; do
	shmctl describe --json "$L" "$o" >"$T_TMP/d-$o.json"
done
pass "describe --json and show --json agree: alias (final target), alias_of (direct)" pyeval '
show = {o["name"]: o for o in json.load(open(a[0]))}
d = {n: json.load(open(a[1] + n + ".json")) for n in ("m.target", "m.mid", "m.outer")}
(all(d[n][k] == show[n][k] for n in d for k in ("alias", "alias_of")) and
 (d["m.outer"]["alias"], d["m.outer"]["alias_of"]) == ("m.target", "m.mid") and
 (d["m.mid"]["alias"], d["m.mid"]["alias_of"]) == ("m.target", "m.target") and
 (d["m.target"]["alias"], d["m.target"]["alias_of"]) == (None, None) and
 d["m.outer"]["alias_final"] == "m.target")' "$T_TMP/show.json" "$T_TMP/d-"
pass "describe --json: aliases are the options aliasing this one, never itself" pyeval '
d = {n: json.load(open(a[0] + n + ".json")) for n in ("m.target", "m.mid", "m.outer")}
(d["m.target"]["aliases"] == ["m.mid", "m.outer"] and d["m.mid"]["aliases"] == ["m.outer"] and
 d["m.outer"]["aliases"] == [])' "$T_TMP/d-"
run shmctl describe "$L" m.outer
pass "describe: alias of the final target, through the direct one" pyeval '
"alias of      m.target (through m.mid)" in a[0]' "$OUT"

t_done
