#!/bin/sh
# SPDX-License-Identifier: MIT
# shmctl's error paths that need more than a command line: what a segment
# holds after good values and warnings, files that are no schema or dump.
# The errors of one command line each (a bad value of each type, option
# names, no such segment, malformed JSON to load, bad schema files, usage
# errors) are the cases of tests/cases/cli-error (tests/cases/cli-error.sh).
# Each error is one line on stderr naming what failed, with exit status 1
# (2 for usage errors), and a failed command changes nothing.
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/cli/lib.sh"

seg S typed
seg B badschema

# one option of each type, and the attributes that checks need (the
# schema of the cases' $S too)
cp "$top_srcdir/tests/cases/cli-error/segment.yaml" "$T_TMP/schema.yaml"

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

# --- a number outside its choices: the value and choices as numbers
seg N numchoice
printf 'format: 1\noptions:\n  n.k:\n    type: int\n    default: 1\n    choices: [1, 2]\n' >"$T_TMP/num.yaml"
shmctl create -q --no-env --schema "$T_TMP/num.yaml" "$N"
t_err "set of an int outside its choices: both as numbers" 1 "shmctl: n.k: value 3 is not one of [1, 2]" \
	shmctl set "$N" n.k=3

# --- a failed set changes nothing; good values of each type
run shmctl set "$S" app.level=5 ratio=x mode=on
t_json "a failed set changes nothing" '
j["generation"] == 1 and len(j["commits"]) == 1' shmctl stat "$S" --json
t_out "(the good values were not applied)" 1 shmctl get "$S" app.level
run shmctl set -q "$S" app.level=0x7 ratio=1e-3 mode=on 'tags=["b","a","b"]' names=z,y,z label='"null"' count=null
pass "good values of every type in one commit" test "$RC" = 0 -a -z "$ERR"
t_json "values parsed by type" '
{o["name"]: o["value"] for o in j} == {
 "app.fast": False, "app.level": 7, "app.ratio": 0.001, "app.scale": 1.0, "app.mode": "on",
 "app.tags": ["b", "a", "b"], "app.names": ["y", "z"], "app.label": "null", "app.count": None, "other.level": 2,
 "app.lvl": 7, "app.old": 0}' \
	shmctl show "$S" --json
run shmctl set "$S" fast=TRUE
pass "set a bool that implies another option: the option, what it implied" test "$RC" = 0 -a "$OUT" = "app.fast: false -> true
app.level: 7 -> 3 (implied)
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
run shmctl set -q "$S" scale=nan
t_out "get --json of nan: a string, as a dump writes it" '"nan"' shmctl get "$S" scale --json
t_out "get of nan" nan shmctl get "$S" scale
run shmctl set -q "$S" scale=-inf
t_out "get --json of -inf" '"-inf"' shmctl get "$S" scale --json

# --- option names ------------------------------------------------------------
t_out "an alias and its target are one candidate" 3 shmctl get "$S" lvl

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
