#!/bin/sh
# SPDX-License-Identifier: MIT
# Orphaned lock objects from the command line: shmctl rm (--force) of a
# damaged segment takes its lock object too; a segment removed by hand leaves
# one, which ls lists and gc removes (gc with no NAME, gc --orphans [NAME],
# gc NAME); a live segment's lock object is never touched. A big schema's
# validated copy goes with shmctl rm, and with gc once its segment is gone.
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/cli/lib.sh"

seg A damaged
seg B byhand
seg C live
locks() { ls /dev/shm | grep -c "^shmcfg-lock\.$1\.[0-9a-f]\{32\}\$"; }

# --- a damaged segment: rm removes its lock object too -------------------------------
run shmctl create -q "$A"
printf 'garbage!' | dd of="/dev/shm/shmcfg.$A" conv=notrunc 2>/dev/null
t_rc "the damaged segment cannot be read" 1 shmctl stat "$A"
run shmctl rm "$A"
pass "rm of a damaged segment: exit 0" test "$RC" = 0
pass "... and its lock object is gone" test "$(locks "$A")" = 0
run shmctl create -q "$A"
: >"/dev/shm/shmcfg.$A.tmp" && mv "/dev/shm/shmcfg.$A.tmp" "/dev/shm/shmcfg.$A" # an empty object under the name
run shmctl rm --force "$A"
pass "rm --force of an emptied segment: its lock object is gone" test "$RC" = 0 -a "$(locks "$A")" = 0
run shmctl create -q "$A"
truncate -s 100 "/dev/shm/shmcfg.$A"
run shmctl create -q --force "$A"
pass "create --force over a truncated segment: one lock object, the new one's" test "$RC" = 0 -a "$(locks "$A")" = 1
run shmctl rm "$A"

# --- removed by hand: listed, then removed --------------------------------------------
run shmctl create -q "$B"
run shmctl create -q "$C"
rm "/dev/shm/shmcfg.$B"
t_json "ls --json: the orphaned lock object, with its path" "
o = [x for x in j if x['name'] == '$B']
(len(o) == 1 and o[0]['kind'] == 'orphaned lock object' and o[0]['path'].startswith('/dev/shm/shmcfg-lock.$B.') and
 not any(x['name'] == '$C' and x['kind'] != 'segment' for x in j))" shmctl ls --json
run shmctl ls
pass "ls: a row and a note naming it" pyeval '
import re
any(re.fullmatch(r"    orphaned lock object /dev/shm/shmcfg-lock\.%s\.[0-9a-f]{32}: its segment is gone \(shmctl gc removes it\)" % a[1], l) for l in a[0].splitlines())' "$(cat "$T_TMP/out")" "$B"
t_out "gc --orphans of the live segment: nothing" "no orphaned lock objects of '$C'" shmctl gc --orphans "$C"
run shmctl gc --orphans "$B"
pass "gc --orphans NAME: removes it, one line" pyeval '
import re
re.fullmatch(r"removed orphaned lock object /dev/shm/shmcfg-lock\.%s\.[0-9a-f]{32} \(its segment .%s. is gone\)" % (a[1], a[1]), a[0]) is not None' "$(cat "$T_TMP/out")" "$B"
pass "... gone from /dev/shm" test "$(locks "$B")" = 0
pass "... and the live one's stays" test "$(locks "$C")" = 1
# gc with no NAME removes every orphan of the host: in a /dev/shm of its own
# (a mount namespace), not to race the tests alongside that look at theirs
if unshare --mount true 2>/dev/null; then
	unshare --mount sh -c 'mount -t tmpfs -o mode=1777 tmpfs /dev/shm &&
		"$1" create -q x && rm /dev/shm/shmcfg.x && "$1" create -q y &&
		"$1" gc --json >"$2/gc.json" && ls /dev/shm >"$2/ls"' sh "$SHMCTL" "$T_TMP" >"$T_TMP/ns.out" 2>&1
	pass "gc with no NAME: every orphan (--json), and nothing else" pyeval '
import json
j = json.load(open(a[0] + "/gc.json"))
left = sorted(l.rsplit(".", 1)[0] if l.startswith("shmcfg-lock.") else l for l in open(a[0] + "/ls").read().split())
(len(j["orphans"]) == 1 and j["orphans"][0]["name"] == "x" and j["orphans"][0]["path"].startswith("/dev/shm/shmcfg-lock.x.") and
 left == ["shmcfg-lock.y", "shmcfg.y"])' "$T_TMP"
else
	skip "gc with no NAME: needs a mount namespace of its own (unshare --mount: root)"
fi
# a big schema's validated copy (doc/design.md): shmctl rm takes it; a segment
# removed by hand leaves it, which ls lists and gc (no NAME) removes. In a
# /dev/shm of its own, as above.
if unshare --mount true 2>/dev/null; then
	python3 -c '
print("format: 1\noptions:")
for i in range(15000):
    print("  big.o%05d:\n    type: int\n    default: %d" % (i, i))' >"$T_TMP/big.yaml"
	unshare --mount sh -c 'mount -t tmpfs -o mode=1777 tmpfs /dev/shm &&
		"$1" create -q --schema "$2/big.yaml" big && ls /dev/shm >"$2/made" &&
		"$1" rm big && ls /dev/shm >"$2/removed" &&
		"$1" create -q --schema "$2/big.yaml" big && rm /dev/shm/shmcfg.big &&
		"$1" ls >"$2/ls.txt" && "$1" gc >"$2/gc.txt" && ls /dev/shm >"$2/after"' sh "$SHMCTL" "$T_TMP" \
		>"$T_TMP/ns.out" 2>&1
	pass "a big schema: its copy made with the segment, removed by rm; removed by hand: ls lists it, gc removes it" pyeval '
import re
d = a[0]
made, removed, after = (open(d + "/" + f).read().split() for f in ("made", "removed", "after"))
copy = [f for f in made if f.startswith("shmcfg-schema.")]
ls, gc = open(d + "/ls.txt").read(), open(d + "/gc.txt").read()
(len(copy) == 1 and re.fullmatch(r"shmcfg-schema\.[0-9a-f]{32}\.%d" % int(a[1]), copy[0]) is not None and
 not any(f.startswith("shmcfg-schema.") for f in removed) and
 ("orphaned schema copy /dev/shm/" + copy[0] + ": no segment has its schema") in ls and
 re.search(r"removed orphaned schema copy /dev/shm/%s \(no segment has its schema [0-9a-f]{32}\)" % re.escape(copy[0]), gc)
 is not None and after == [])' "$T_TMP" "$(id -u)"
else
	skip "a big schema's copy and gc: needs a mount namespace of its own (unshare --mount: root)"
fi
run shmctl create -q "$B"
rm "/dev/shm/shmcfg.$B"
run shmctl create -q "$B" # the name again: a new incarnation, the old lock object orphaned
t_json "gc NAME: its readers, then the old incarnation's lock object" "
j['name'] == '$B' and j['reclaimed'] == [] and len(j['orphans']) == 1" shmctl gc "$B" --json
pass "... the new incarnation's stays, and works" test "$(locks "$B")" = 1
t_rc "... (a set)" 0 shmctl set -q "$B" recompile_limit=9
t_usage "gc: two names" shmctl gc "$B" "$C"

# --- unfinished replacements with planted names (a copy of a segment whose
# creator is gone, as a replacer killed before its rename leaves): gc shows
# the names escaped, and its JSON keeps the row of one that is no UTF-8. In a
# /dev/shm of our own: gc without NAME takes every orphan it may.
if [ "$(id -u)" = 0 ] && unshare --mount true 2>/dev/null; then
	cat >"$T_TMP/planted.sh" <<'EOF'
set -e
mount -t tmpfs tmpfs /dev/shm
$SHMCTL create -q src
cp /dev/shm/shmcfg.src "/dev/shm/shmcfg-new.zz$(printf '\351')x.ABC123"
cp /dev/shm/shmcfg.src "/dev/shm/shmcfg-new.yy$(printf '\033')[2J.ABC123"
$SHMCTL gc --orphans >"$1/gc.txt"
cp /dev/shm/shmcfg.src "/dev/shm/shmcfg-new.zz$(printf '\351')x.ABC123"
$SHMCTL gc --orphans --json
EOF
	t_json "gc --json: a planted name that is no UTF-8 keeps its row, as \\xNN" '
j["orphans"] == [{"name": "zz\\xe9x", "path": "/dev/shm/shmcfg-new.zz\\xe9x.ABC123", "uid": 0}]' \
		unshare --mount --propagation private env SHMCTL="$SHMCTL" sh "$T_TMP/planted.sh" "$T_TMP"
	pass "gc: the planted names escaped" pyeval '"yy\\x1b[2J" in a[0] and "zz\\xe9x" in a[0]' "$(cat "$T_TMP/gc.txt")"
	pass "... safe on a terminal" termsafe "$T_TMP/gc.txt"
else
	skip "gc of planted unfinished replacements: needs root (a private /dev/shm)"
	skip "gc: the planted names escaped: needs root"
	skip "... safe on a terminal: needs root"
fi

t_done
