#!/bin/sh
# shmctl's error paths: no such segment (every command), a bad value of each
# type, ranges and choices, ambiguous and unknown option names, malformed
# JSON to load, bad schema files, usage errors. Each error is one line on
# stderr naming what failed, with exit status 1 (2 for usage errors), and a
# failed command changes nothing.
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/cli/lib.sh"

seg S typed
seg N nosuch
seg D default

cat >"$T_TMP/schema.yaml" <<'EOF'
# shmcfg schema (format 1): one option of each type, and the attributes
# that checks need
format: 1
options:
  app.fast:
    type: bool
    default: false
    knob: "app/fast"
    implies: {app.level: 3}
    doc: |-
      Go fast.
  app.level:
    type: int
    default: 1
    min: 0
    max: 10
    knob: "app/level"
    doc: |-
      How hard to try.
  app.ratio:
    type: float
    default: 0.5
    min: 0.0
  app.scale:
    type: float
    default: 1.0
  app.mode:
    type: str
    default: "auto"
    choices: ["auto", "on", "off"]
  app.tags:
    type: list
    default: ["x"]
  app.names:
    type: set
    default: ["b", "a"]
  app.label:
    type: str
    nullable: true
    default: null
  app.count:
    type: int
    nullable: true
    default: 4
  other.level:
    type: int
    default: 2
  app.lvl:
    type: int
    alias: app.level
  app.old:
    type: int
    default: 0
    deprecated: "use app.level"
EOF

# --- create with a schema -------------------------------------------------------
run shmctl create --schema "$T_TMP/schema.yaml" --slots 3 --size 64K --readers 5 "$S"
pass "create --schema --slots --size --readers" test "$RC" = 0
t_json "the segment has the schema's options and the sizes asked for" '
j["options"] == 12 and len(j["slots"]) == 3 and j["heap_bytes"] == 65536 and j["reader_entries"] == 5' \
	shmctl stat "$S" --json
t_json "every type, with its default" '
{o["name"]: (o["type"], o["value"]) for o in j} == {
 "app.fast": ("bool", False), "app.level": ("int", 1), "app.ratio": ("float", 0.5), "app.scale": ("float", 1.0),
 "app.mode": ("str", "auto"),
 "app.tags": ("list", ["x"]), "app.names": ("set", ["a", "b"]), "app.label": ("str", None), "app.count": ("int", 4),
 "other.level": ("int", 2), "app.lvl": ("int", 1), "app.old": ("int", 0)}' shmctl show "$S" --json
t_out "get --json: a float" 0.5 shmctl get "$S" ratio --json
t_out "get --json: a list" '["x"]' shmctl get "$S" tags --json
t_out "get: a string, raw" auto shmctl get "$S" mode

# --- a bad value of each type ----------------------------------------------------
t_errmatch "bool: not a bool" 1 "app\.fast.*'maybe'.*bool" shmctl set "$S" fast=maybe
t_errmatch "int: not a number" 1 "app\.level.*'12x'.*int" shmctl set "$S" app.level=12x
t_errmatch "int: above the maximum" 1 "app\.level.*11" shmctl set "$S" app.level=11
t_errmatch "int: below the minimum" 1 "app\.level.*-1" shmctl set "$S" app.level=-1
t_errmatch "int: out of 64 bits" 1 "app\.level.*99999999999999999999" shmctl set "$S" app.level=99999999999999999999
t_errmatch "int: null for an option that is not nullable" 1 "app\.level.*none" shmctl set "$S" app.level=none
t_errmatch "float: not a number" 1 "app\.ratio.*'abc'.*float" shmctl set "$S" ratio=abc
t_errmatch "float: below the minimum" 1 "app\.ratio.*-0\.5" shmctl set "$S" ratio=-0.5
t_errmatch "str: not one of the choices" 1 "app\.mode.*maybe" shmctl set "$S" mode=maybe
t_errmatch "str: a bad JSON string literal" 1 "app\.label.*\"abc" shmctl set "$S" 'label="abc'
t_errmatch "list: a JSON array with a number" 1 "app\.tags.*\[\"a\",1\]" shmctl set "$S" 'tags=["a",1]'
t_errmatch "list: malformed JSON array" 1 "app\.tags.*\[\"a\"" shmctl set "$S" 'tags=["a"'
t_errmatch "set: a JSON array with a null" 1 "app\.names.*\[\"a\",null\]" shmctl set "$S" 'names=["a",null]'
t_errmatch "a bad value among good ones names the bad one" 1 "app\.ratio.*'x'" \
	shmctl set "$S" app.level=5 ratio=x mode=on
t_json "a failed set changes nothing" '
j["generation"] == 1 and len(j["commits"]) == 1' shmctl stat "$S" --json
t_out "(the good values were not applied)" 1 shmctl get "$S" app.level

# --- good values of each type ------------------------------------------------------
run shmctl set -q "$S" app.level=0x7 ratio=1e-3 mode=on 'tags=["b","a","b"]' names=z,y,z label='"null"' count=null
pass "good values of every type in one commit" test "$RC" = 0 -a -z "$ERR"
t_json "values parsed by type" '
{o["name"]: o["value"] for o in j} == {
 "app.fast": False, "app.level": 7, "app.ratio": 0.001, "app.scale": 1.0, "app.mode": "on",
 "app.tags": ["b", "a", "b"], "app.names": ["y", "z"], "app.label": "null", "app.count": None, "other.level": 2,
 "app.lvl": 7, "app.old": 0}' \
	shmctl show "$S" --json
run shmctl set "$S" fast=TRUE
pass "set a bool that implies another option" test "$RC" = 0 -a "$OUT" = "app.fast: false -> true
generation 3" -a -z "$ERR"
t_out "get: a float prints as the shortest text that reads back" 0.001 shmctl get "$S" ratio
run shmctl set -q "$S" ratio=0.1
t_out "get: 0.1 (not 0.10000000000000001)" 0.1 shmctl get "$S" ratio
t_out "get --json: 0.1" 0.1 shmctl get "$S" ratio --json
run shmctl set "$S" ratio=2
pass "set: a float from an int prints as a float" pyeval 'a[0].splitlines()[0] == "app.ratio: 0.1 -> 2.0"' "$OUT"
t_json "the implied layer wins over the user value" '
[(o["value"], o["source"]) for o in j if o["name"] == "app.level"] == [(3, "implied")]' shmctl show "$S" --json
run shmctl set "$S" app.level=5
pass "set under an implication: exit 0, a warning naming the implying option" test "$RC" = 0 -a \
	"$ERR" = "shmctl: warning: app.level: value stored in the user layer, but the implied layer wins (implied by app.fast=true)"
run shmctl set "$S" app.old=1
pass "set of a deprecated option: the library's warning" test "$RC" = 0 -a \
	"$ERR" = "shmctl: warning: app.old is deprecated: use app.level"
t_errmatch "float: nan is not within a minimum" 1 "app\.ratio.*nan" shmctl set "$S" ratio=nan
run shmctl set -q "$S" scale=nan
t_out "get --json of nan: a string, as a dump writes it" '"nan"' shmctl get "$S" scale --json
t_out "get of nan" nan shmctl get "$S" scale
run shmctl set -q "$S" scale=-inf
t_out "get --json of -inf" '"-inf"' shmctl get "$S" scale --json

# --- option names ------------------------------------------------------------
t_err "an ambiguous suffix lists the candidates" 1 \
	"shmctl: 'level' is ambiguous: app.level, other.level" shmctl get "$S" level
t_err "... also for set" 1 "shmctl: 'level' is ambiguous: app.level, other.level" shmctl set "$S" level=2
t_out "an alias and its target are one candidate" 3 shmctl get "$S" lvl
t_errmatch "an unknown name suggests the closest" 1 \
	"^shmctl: no option 'levle' in segment '$S'; did you mean (app\.level|other\.level), (app\.level|other\.level)\?$" \
	shmctl get "$S" levle
t_err "an unknown name with nothing close" 1 "shmctl: no option 'zzzzzz' in segment '$S'" shmctl describe "$S" zzzzzz
t_err "a name that is only a middle part" 1 "shmctl: no option 'app' in segment '$S'" shmctl get "$S" app
t_usage "an empty option name" shmctl set "$S" =3
run shmctl create -q "$D"
t_err "the default schema: a typo suggests the option" 1 \
	"shmctl: no option 'recompile_limt' in segment '$D'; did you mean recompile_limit?" shmctl get "$D" recompile_limt
t_errmatch "the default schema: an ambiguous suffix" 1 \
	"^shmctl: 'config.verbose' is|^shmctl: no option" shmctl get "$D" nosuch.verbose

# --- no such segment: every command -------------------------------------------------
for c in show get describe stat watch dump diff hash check gc; do
	case $c in
		get | describe) t_err "$c: no such segment" 1 "shmctl: no such segment '$N'" shmctl "$c" "$N" x ;;
		*) t_err "$c: no such segment" 1 "shmctl: no such segment '$N'" shmctl "$c" "$N" ;;
	esac
done
t_err "set: no such segment" 1 "shmctl: no such segment '$N'" shmctl set "$N" x=1
t_err "reset: no such segment" 1 "shmctl: no such segment '$N'" shmctl reset "$N" x
echo '{}' >"$T_TMP/empty.json"
t_err "load: no such segment" 1 "shmctl: no such segment '$N'" shmctl load "$N" "$T_TMP/empty.json"
t_err "rm: no such segment" 1 "shmctl: no such segment '$N'" shmctl rm "$N"
t_errmatch "a bad segment name" 1 "character '/' is not allowed" shmctl get 'a/b' x
t_errmatch "a segment name starting with a dot" 1 "not starting with '.'" shmctl show .hidden

# --- load: malformed JSON, bad values ------------------------------------------------
GEN=$(shmctl stat --json "$S" | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["generation"])')
printf '{"app.level": ' >"$T_TMP/bad1.json"
t_errmatch "load: malformed JSON names the file and the place" 1 "^shmctl: $T_TMP/bad1.json: .*line 1" \
	shmctl load "$S" "$T_TMP/bad1.json"
printf '[1, 2]' >"$T_TMP/bad2.json"
t_errmatch "load: a JSON array" 1 "^shmctl: $T_TMP/bad2.json: " shmctl load "$S" "$T_TMP/bad2.json"
printf '{"app.mode": "off", "app.level": "high"}' >"$T_TMP/bad3.json"
t_errmatch "load: a value of the wrong type names the option and value" 1 "app\.level.*high" \
	shmctl load "$S" "$T_TMP/bad3.json"
printf '{"app.mode": "off", "app.level": 42}' >"$T_TMP/bad4.json"
t_errmatch "load: a value out of range" 1 "app\.level.*42" shmctl load "$S" "$T_TMP/bad4.json"
printf '{"app.mode": "off", "app.count": null, "app.level": null}' >"$T_TMP/bad5.json"
t_errmatch "load: null for an option that is not nullable" 1 "app\.level" shmctl load "$S" "$T_TMP/bad5.json"
printf '' >"$T_TMP/bad6.json"
t_errmatch "load: an empty file" 1 "^shmctl: $T_TMP/bad6.json: " shmctl load "$S" "$T_TMP/bad6.json"
t_errmatch "load: a file that does not exist" 1 "^shmctl: $T_TMP/none.json: No such file or directory$" \
	shmctl load "$S" "$T_TMP/none.json"
t_json "a failed load changes nothing" "j['generation'] == $GEN" shmctl stat "$S" --json
t_out "(app.mode kept)" on shmctl get "$S" mode

# --- create: bad schemas, bad arguments -----------------------------------------------
seg B badschema
printf 'format: 1\noptions:\n  a.b:\n    type: integer\n' >"$T_TMP/bad.yaml"
t_errmatch "create --schema: an invalid schema names the file and line" 1 "bad\.yaml:[0-9]+" \
	shmctl create --schema "$T_TMP/bad.yaml" "$B"
t_errmatch "create --schema: a missing file" 1 "nonexistent\.yaml" shmctl create --schema "$T_TMP/nonexistent.yaml" "$B"
pass "(no segment was created)" test ! -e "/dev/shm/shmcfg.$B"
t_errmatch "create --group: no such group" 1 "no such group 'no-such-group-x'" \
	shmctl create --group no-such-group-x "$B"
t_errmatch "create: a bad segment name" 1 "character ' ' is not allowed" shmctl create "a b"

# --- usage errors: exit 2 -----------------------------------------------------
t_usage "no command" shmctl
t_err "an unknown command: one line" 2 "shmctl: unknown command 'frobnicate' (see 'shmctl --help')" shmctl frobnicate
t_err "an unknown global flag: one line" 2 "shmctl: unknown option '--frob' (see 'shmctl --help')" shmctl --frob show x
t_err "--color with a bad value" 2 "shmctl: --color takes auto, always or never, not 'sometimes'" shmctl --color=sometimes ls
t_usage "show: no NAME" shmctl show
t_usage "show: too many arguments" shmctl show "$S" a b
t_err "show: an unknown flag" 2 "shmctl: show: unknown option '--frob' (see 'shmctl show --help')" shmctl show "$S" --frob
t_usage "get: no OPTION" shmctl get "$S"
t_usage "get: too many arguments" shmctl get "$S" a b
t_usage "describe: no OPTION" shmctl describe "$S"
t_usage "set: no OPTION=VALUE" shmctl set "$S"
t_usage "set: OPTION without =VALUE" shmctl set "$S" app.level
t_errmatch "set: an unknown flag" 2 "^shmctl: set: unknown option '--frob'" shmctl set "$S" --frob a=1
t_usage "reset: no OPTION" shmctl reset "$S"
t_usage "reset: OPTION and --all" shmctl reset "$S" app.level --all
t_usage "create: no NAME" shmctl create
t_usage "create: --slots 1" shmctl create "$B" --slots 1
t_usage "create: --slots x" shmctl create "$B" --slots x
t_usage "create: --size abc" shmctl create "$B" --size abc
t_usage "create: --mode 999" shmctl create "$B" --mode 999
t_usage "create: --mode without a value" shmctl create "$B" --mode
t_usage "rm: no NAME" shmctl rm
t_usage "ls: an argument" shmctl ls extra
t_usage "stat: --commits x" shmctl stat "$S" --commits x
t_usage "watch: --count 0" shmctl watch "$S" --count 0
t_err "watch: --timeout abc" 2 "shmctl: watch: --timeout: bad duration 'abc' (give 500ms, 5s, 2m, 1h or seconds)" shmctl watch "$S" --timeout abc
t_errmatch "watch: --timeout -1" 2 "^shmctl: watch: --timeout: bad duration '-1'" shmctl watch "$S" --timeout -1
t_usage "dump: no NAME" shmctl dump
t_usage "load: no FILE" shmctl load "$S"
t_usage "diff: --format xml" shmctl diff "$S" --format xml
t_usage "hash: too many arguments" shmctl hash "$S" x
t_usage "check: no NAME" shmctl check
t_err "gc: an unknown flag" 2 "shmctl: gc: unknown option '-x' (see 'shmctl gc --help')" shmctl gc "$S" -x
pass "(no segment was created by the usage errors)" test ! -e "/dev/shm/shmcfg.$B"

# ---- files that are no schema or dump: refused at once, one line each
# (issue 24: --schema /dev/zero grew to 2 GB, --schema FIFO blocked forever)
mkfifo "$T_TMP/fifo"
truncate -s 100M "$T_TMP/huge.yaml"
t_errmatch "create --schema /dev/zero: refused, not read" 1 "/dev/zero: is a device or socket, not a schema file" \
	timeout 20 $SHMCTL create "$B" --schema /dev/zero
t_errmatch "create --schema FIFO: refused, no wait for a writer" 1 "fifo: is a FIFO, not a schema file" \
	timeout 20 $SHMCTL create "$B" --schema "$T_TMP/fifo"
t_errmatch "create --schema DIR: refused" 1 ": is a directory, not a schema file" \
	timeout 20 $SHMCTL create "$B" --schema "$T_TMP"
t_errmatch "create --schema of 100 MB: refused by its size, unread" 1 "104857600 bytes: a schema file is at most 64 MiB" \
	timeout 20 $SHMCTL create "$B" --schema "$T_TMP/huge.yaml"
pass "(none of them created the segment)" test ! -e "/dev/shm/shmcfg.$B"
t_errmatch "load FIFO: refused, no wait for a writer" 1 "fifo: not a regular file" timeout 20 $SHMCTL load "$S" "$T_TMP/fifo"
t_errmatch "load /dev/zero: refused" 1 "/dev/zero: not a regular file" timeout 20 $SHMCTL load "$S" /dev/zero
# a /proc file says 0 bytes and has more: no "grew while it was read"
t_errmatch "create --schema /proc/self/status: not a file of known size" 1 \
	"/proc/self/status: not a file of known size" timeout 20 $SHMCTL create "$B" --schema /proc/self/status
# a file over the limit is refused by its size, unread: within 128 MiB of
# address space (it read 256 MiB first, in a buffer grown to 512 MiB)
truncate -s 10G "$T_TMP/huge.json"
case "${SHMCFG_SANITIZERS:-}$SHMCTL" in
*-fsanitize* | *valgrind*)
	t_errmatch "load of a 10 GB file: refused by its size" 1 "huge.json: over 256 MiB: not a configuration" \
		timeout 20 $SHMCTL load "$S" "$T_TMP/huge.json" ;;
*)
	t_errmatch "load of a 10 GB file: refused by its size, unread (128 MiB of address space)" 1 \
		"huge.json: over 256 MiB: not a configuration" \
		timeout 20 sh -c 'ulimit -v 131072 && exec "$@"' sh $SHMCTL load "$S" "$T_TMP/huge.json" ;;
esac
rm -f "$T_TMP/huge.json"
t_done
