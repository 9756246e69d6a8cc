#!/bin/sh
# SPDX-License-Identifier: MIT
# Persistence (issue 23, item 4): create --load, --load-dir and --conf (a
# configuration directory applied in name order, as sysctl.d), --exist-ok,
# and save, whose file create --load reads back. A create whose load fails
# leaves no segment; bad input is one line naming the file.
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/cli/lib.sh"

seg P persist
seg Q copy
seg C conf
DYN=torch._dynamo.config
CMP=torch.compiler.config
unset TORCH_COMPILE_JOB_ID TORCH_COMPILE_STICKY_PGO_KEY TORCHINDUCTOR_FORCE_DISABLE_CACHES \
	TORCH_COMPILE_FORCE_DISABLE_CACHES TORCHDYNAMO_VERBOSE SHMCFG_CONF_DIR 2>/dev/null

gen() {
	shmctl stat --json "$1" | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["generation"])'
}
# absent NAME: neither the segment nor any lock object of it is in /dev/shm
absent() {
	! ls -A /dev/shm 2>/dev/null | grep -Eq "^shmcfg(-lock)?\.$1(\.|\$)"
}

# --- create --load: one commit, files in order --------------------------------
echo '{"recompile_limit": 16, "accumulated_recompile_limit": 100}' >"$T_TMP/a.json"
printf '{"format": "shmcfg-dump/1", "values": {"%s.recompile_limit": 32}}' "$DYN" >"$T_TMP/b.json"
run shmctl create "$P" --load "$T_TMP/a.json" --load "$T_TMP/b.json"
pass "create --load A --load B: exit 0, the creation and the load, one line each" pyeval '
l = a[0].splitlines()
len(l) == 2 and l[0].startswith("created segment ") and l[1] == "loaded 2 files into %r (generation 2)" % a[1]' \
	"$OUT" "$P"
t_out "... a later file overrides an earlier one" 32 shmctl get "$P" recompile_limit
t_out "... an option only the earlier file names is kept" 100 shmctl get "$P" accumulated_recompile_limit
t_out "... both files are one commit: generation 2" 2 gen "$P"
run shmctl show "$P" "$DYN.recompile_limit" --json
pass "... in the user layer" jcheck "$T_TMP/out" 'j[0]["source"] == "user"'

t_errmatch "create over an existing segment: refused as before" 1 "segment '$P' exists" \
	shmctl create "$P" --load "$T_TMP/a.json"
t_out "(the segment is untouched)" 2 gen "$P"
t_usage "create --exist-ok --force: a usage error" shmctl create "$P" --exist-ok --force

# --- create --load that fails: no segment, one line naming the file ---------------
printf '{"recompile_limit": ' >"$T_TMP/trunc.json"
t_errmatch "create --load of malformed JSON: one line naming the file and the place" 1 \
	"^shmctl: $T_TMP/trunc.json: JSON line 1 .*; segment '$Q' not created\$" \
	shmctl create "$Q" --load "$T_TMP/a.json" --load "$T_TMP/trunc.json"
pass "... no segment and no lock object left" absent "$Q"
echo '{"recompile_limit": "many"}' >"$T_TMP/type.json"
t_errmatch "create --load of a value of the wrong type: the file, the option and the value" 1 \
	"^shmctl: $T_TMP/type.json: $DYN\.recompile_limit: .*many.*; segment '$Q' not created\$" \
	shmctl create "$Q" --load "$T_TMP/type.json"
pass "... no segment left" absent "$Q"
echo '{"no.such.option": 1}' >"$T_TMP/unknown.json"
t_errmatch "create --load of an unknown option: named, strict" 1 \
	"^shmctl: $T_TMP/unknown.json: 1 unknown option: 'no\.such\.option'; segment '$Q' not created\$" \
	shmctl create "$Q" --load "$T_TMP/unknown.json"
pass "... no segment left" absent "$Q"
t_err "create --load of a file that does not exist: nothing created" 1 \
	"shmctl: $T_TMP/none.json: No such file or directory" shmctl create "$Q" --load "$T_TMP/none.json"
pass "... no segment left" absent "$Q"
mkdir "$T_TMP/adir"
t_errmatch "create --load of a directory: refused" 1 "^shmctl: $T_TMP/adir: Is a directory\$" \
	shmctl create "$Q" --load "$T_TMP/adir"
pass "... no segment left" absent "$Q"
t_errmatch "create --load-dir of a directory that does not exist: refused" 1 \
	"^shmctl: $T_TMP/nodir: No such file or directory\$" shmctl create "$Q" --load-dir "$T_TMP/nodir"
pass "... no segment left" absent "$Q"

# --- a directory: *.json in byte order of the names, as sysctl.d ----------------------
D=$T_TMP/dir.d
mkdir "$D"
echo '{"recompile_limit": 10, "accumulated_recompile_limit": 10}' >"$D/10-base.json"
echo '{"recompile_limit": 20}' >"$D/20-site.json"
echo '{"accumulated_recompile_limit": 90}' >"$D/9-late.json" # "9" sorts after "2"
echo '{"recompile_limit": 666}' >"$D/20-site.json~"
echo '{"recompile_limit": 666}' >"$D/.20-site.json.swp"
echo '{"recompile_limit": 666}' >"$D/.hidden.json"
echo '{"recompile_limit": 666}' >"$D/30-old.json.bak"
echo 'not JSON at all' >"$D/README"
run shmctl create "$Q" --load-dir "$D"
pass "create --load-dir: exit 0, three files loaded" \
	test "$RC" = 0 -a "$(echo "$OUT" | tail -n 1)" = "loaded 3 files into '$Q' (generation 2)"
t_out "... later names override earlier ones" 20 shmctl get "$Q" recompile_limit
t_out "... in byte order of the names (9-late after 20-site)" 90 shmctl get "$Q" accumulated_recompile_limit
shmctl rm "$Q"
mkdir "$D/50-planted.json"
t_errmatch "a directory named *.json in the directory: refused, named, nothing created" 1 \
	"^shmctl: $D/50-planted.json: not a regular file \(a directory\)\$" shmctl create "$Q" --load-dir "$D"
pass "... no segment left" absent "$Q"
rmdir "$D/50-planted.json"
ln -s "$T_TMP/a.json" "$D/40-link.json"
run shmctl create "$Q" --load-dir "$D"
pass "a symbolic link to a regular file is followed" test "$RC" = 0
t_out "... (its value, the last name)" 16 shmctl get "$Q" recompile_limit
shmctl rm "$Q"
rm "$D/40-link.json"
echo '{"recompile_limit": 1.5}' >"$D/60-bad.json"
t_errmatch "a bad file in the directory: named, nothing created" 1 \
	"^shmctl: $D/60-bad.json: .*recompile_limit.*; segment '$Q' not created\$" shmctl create "$Q" --load-dir "$D"
pass "... no segment left" absent "$Q"
rm "$D/60-bad.json"

# --- --conf: $SHMCFG_CONF_DIR/NAME.yaml and NAME.d ---------------------------
E=$T_TMP/etc
mkdir "$E"
run env SHMCFG_CONF_DIR="$E" $SHMCTL create "$C" --conf
pass "create --conf without NAME.yaml or NAME.d: the default schema, nothing loaded" \
	test "$RC" = 0 -a "$(echo "$OUT" | wc -l)" = 1
pass "... and a warning naming both files it looked for" test "$ERR" = \
	"shmctl: warning: --conf: neither $E/$C.yaml nor $E/$C.d exists: the default schema, nothing loaded"
t_out "... generation 1" 1 gen "$C"
shmctl rm "$C"
printf 'format: 1\noptions:\n  app.level:\n    type: int\n    default: 1\n  app.name:\n    type: str\n    default: x\n' \
	>"$E/$C.yaml"
mkdir "$E/$C.d"
echo '{"level": 5, "app.name": "first"}' >"$E/$C.d/10-a.json"
echo '{"app.name": "second"}' >"$E/$C.d/20-b.json"
run env SHMCFG_CONF_DIR="$E" $SHMCTL create "$C" --conf
pass "create --conf: exit 0" test "$RC" = 0
run shmctl show "$C" --json
pass "... NAME.yaml is the schema (app.level, app.name)" jcheck "$T_TMP/out" \
	'sorted(o["name"] for o in j) == ["app.level", "app.name"]'
t_out "... NAME.d loaded, in order" "second" shmctl get "$C" name
t_out "... (and the first file's other option)" 5 shmctl get "$C" level
echo '{"app.name": "third"}' >"$E/$C.d/30-c.json"
echo '{"app.level": 7}' >"$T_TMP/cmdline.json"
shmctl set "$C" level=6 >/dev/null
G=$(gen "$C")
run env SHMCFG_CONF_DIR="$E" $SHMCTL create "$C" --conf --exist-ok --load "$T_TMP/cmdline.json"
pass "create --conf --exist-ok on the segment: kept, the files loaded" pyeval '
a[0].splitlines() == ["segment %r exists, of that schema: kept" % a[1], "loaded 4 files into %r (generation %d)" % (a[1], int(a[2]) + 1)]' \
	"$OUT" "$C" "$G"
t_out "... NAME.d applied again" third shmctl get "$C" name
t_out "... --load after --conf's files" 7 shmctl get "$C" level
run env SHMCFG_CONF_DIR="$E" $SHMCTL create "$C" --conf --exist-ok --quiet
pass "--exist-ok again with the same files: nothing changed, quiet" test "$RC" = 0 -a -z "$OUT" -a -z "$ERR"
shmctl set "$C" level=8 >/dev/null
G=$(gen "$C")
echo '{"app.level": "high"}' >"$E/$C.d/40-bad.json"
t_errmatch "--exist-ok with a bad file: named, nothing loaded" 1 \
	"^shmctl: $E/$C.d/40-bad.json: .*app\.level.*; nothing loaded into '$C'\$" \
	env SHMCFG_CONF_DIR="$E" $SHMCTL create "$C" --conf --exist-ok
t_out "... the segment is as it was: its generation" "$G" gen "$C"
t_out "... and its value" 8 shmctl get "$C" level
pass "... and still there" test -e "/dev/shm/shmcfg.$C"
rm "$E/$C.d/40-bad.json"
t_errmatch "--exist-ok with another schema: refused, the segment kept" 1 \
	"^shmctl: segment '$C' exists with schema [0-9a-f]{32}, not [0-9a-f]{32} \(the default schema\): kept" \
	shmctl create "$C" --exist-ok
t_out "... (its value)" 8 shmctl get "$C" level

# --- save: the user layer, read back by create --load ----------------------------
shmctl rm "$P"
run env TORCH_COMPILE_JOB_ID=from-env $SHMCTL create "$P" --quiet
shmctl set "$P" recompile_limit=12 cache_key_tag='a "quoted" tag' verbose=true >/dev/null
run shmctl save "$P" "$T_TMP/saved.json"
pass "save: exit 0, one line" pyeval 'a[0].startswith("saved 3 options of %r (user layer, generation " % a[1]) and a[0].endswith(a[2])' \
	"$OUT" "$P" "$T_TMP/saved.json"
pass "save: a dump of the user layer only (not the environment's job_id), no schema hash" jcheck \
	"$T_TMP/saved.json" '
v = j["values"]
(j["format"] == "shmcfg-dump/1" and j["layer"] == "user" and "schema_hash" not in j and
 v == {"'$DYN'.recompile_limit": 12, "'$CMP'.cache_key_tag": "a \"quoted\" tag", "'$DYN'.verbose": True})'
run shmctl create "$Q" --load "$T_TMP/saved.json"
pass "create --load of the saved file: exit 0" test "$RC" = 0
shmctl save "$Q" "$T_TMP/again.json" >/dev/null
pass "round trip: the copy saves the same values" pyeval '
import json
json.load(open(a[0]))["values"] == json.load(open(a[1]))["values"]' "$T_TMP/saved.json" "$T_TMP/again.json"
t_out "... (a value)" 'a "quoted" tag' shmctl get "$Q" cache_key_tag
run shmctl load "$Q" "$T_TMP/saved.json"
pass "shmctl load reads it too: nothing changed" test "$RC" = 0 -a "$OUT" = "$T_TMP/saved.json: nothing changed (generation 2)"
run shmctl save "$P" -
pass "save -: the dump on stdout" jcheck "$T_TMP/out" 'j["values"]["'$DYN'.recompile_limit"] == 12'

# replacing: atomic, the old mode kept, only a regular file
mkdir "$T_TMP/sv"
echo old >"$T_TMP/sv/keep.json"
chmod 640 "$T_TMP/sv/keep.json"
run shmctl save "$P" "$T_TMP/sv/keep.json" --quiet
pass "save over a file: replaced, quiet" test "$RC" = 0 -a -z "$OUT" -a "$(head -c 1 "$T_TMP/sv/keep.json")" = "{"
pass "... its mode kept" test "$(stat -c %a "$T_TMP/sv/keep.json")" = 640
pass "... no temporary file left beside it" test "$(ls -A "$T_TMP/sv")" = keep.json
mkdir "$T_TMP/sv/dir.json"
t_err "save over a directory: refused" 1 "shmctl: $T_TMP/sv/dir.json: not a regular file (a directory); not replaced" \
	shmctl save "$P" "$T_TMP/sv/dir.json"
ln -s keep.json "$T_TMP/sv/link.json"
t_err "save over a symbolic link: refused" 1 \
	"shmctl: $T_TMP/sv/link.json: not a regular file (a symbolic link); not replaced" shmctl save "$P" "$T_TMP/sv/link.json"
mkfifo "$T_TMP/sv/fifo.json"
t_errmatch "save over a FIFO: refused, not opened" 1 "fifo.json: not a regular file" shmctl save "$P" "$T_TMP/sv/fifo.json"
pass "... nothing else written in the directory" test "$(ls -A "$T_TMP/sv" | tr '\n' ' ')" = "dir.json fifo.json keep.json link.json "
t_errmatch "save into a directory that does not exist" 1 "nodir/x.json: " shmctl save "$P" "$T_TMP/nodir/x.json"
t_err "save of a segment that does not exist" 1 "shmctl: no such segment 'cli-$$-none'" \
	shmctl save "cli-$$-none" "$T_TMP/x.json"
pass "... writes no file" test ! -e "$T_TMP/x.json"
t_usage "save without FILE: a usage error" shmctl save "$P"

t_done
