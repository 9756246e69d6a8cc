#!/bin/sh
# SPDX-License-Identifier: MIT
# Trust: --owner on the commands that attach, a segment of another user
# (refused unless its owner is named), and ls of entries of /dev/shm that are
# named like segments but are not (a FIFO, a socket, a directory, a sparse
# object): listed with the reason, never waited on.
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/cli/lib.sh"

seg O owned
seg F fifo
seg S sock
seg D dir
seg Z sparse
seg A seg
# the objects that are not segments: rm cannot remove a directory
trap 'rmdir "/dev/shm/shmcfg.$D" 2>/dev/null; rm -f "/dev/shm/shmcfg.$F" "/dev/shm/shmcfg.$S"; t_cleanup' EXIT

# --- --owner ----------------------------------------------------------------------
run shmctl create -q "$O"
run shmctl set -q "$O" recompile_limit=12
t_out "--owner with the caller's own user" 12 shmctl get "$O" recompile_limit --owner "$(id -un)"
t_out "--owner before the segment name, as a uid" 12 shmctl get --owner "$(id -u)" "$O" recompile_limit
t_errmatch "--owner naming another user: refused, naming both" 1 \
	"^shmctl: $O: segment is owned by uid $(id -u) .*, not by the expected owner 65534" \
	shmctl get "$O" recompile_limit --owner 65534
t_errmatch "--owner with an unknown user" 1 "^shmctl: no such user 'no-such-user-x' " \
	shmctl show "$O" --owner no-such-user-x
run shmctl create "$O" --owner 0
pass "--owner on create without --force: usage error" pyeval \
	'a[0] == "2" and a[1].startswith("shmctl: create: --owner is for --force: it names the owner of the segment replaced\n")' \
	"$RC" "$(cat "$T_TMP/err")"
t_errmatch "--owner before a command that attaches nothing: usage error, nothing removed" 2 \
	"^shmctl: rm: --owner names whom to trust when attaching a segment; rm attaches none" \
	shmctl --owner 65534 rm "$O"
t_out "(the segment is still there)" 12 shmctl get "$O" recompile_limit
run shmctl stat "$O" --help
pass "--help of a command that attaches lists --owner" pyeval '"--owner USER" in a[0]' "$OUT"

if [ "$(id -u)" = 0 ]; then
	# a segment (and its lock object) of another user, as a squatter plants it
	chown 65534 "/dev/shm/shmcfg.$O" /dev/shm/shmcfg-lock."$O".*
	t_errmatch "another user's segment: refused, naming its owner and --owner" 1 \
		"^shmctl: $O: segment is owned by uid 65534.*not by you or root.*--owner" \
		shmctl get "$O" recompile_limit
	t_errmatch "(a write command too)" 1 "^shmctl: $O: segment is owned by uid 65534" \
		shmctl set "$O" recompile_limit=13
	t_out "--owner names it: get" 12 shmctl get "$O" recompile_limit --owner 65534
	run shmctl set -q "$O" recompile_limit=13 --owner 65534
	pass "--owner names it: set (read-write)" test "$RC" = 0
	t_out "(the value)" 13 shmctl get "$O" recompile_limit --owner 65534
	t_json "stat --json --owner" 'j["generation"] == 3' shmctl stat "$O" --json --owner 65534
	t_json "check --json --owner" 'j["ok"] is True' shmctl check "$O" --json --owner 65534
	t_errmatch "check without --owner: refused, not a problem of the segment" 1 \
		"^shmctl: $O: segment is owned by uid 65534" shmctl check "$O"
	t_json "ls --json: another user's segment is untrusted, with the reason" "
[(s['kind'], s['generation'], 'owned by uid 65534' in s['error']) for s in j if s['name'] == '$O'] == [('untrusted', None, True)]" \
		shmctl ls --json
	t_json "ls --json --owner: then it is read" "
[(s['kind'], s['generation'], s['error']) for s in j if s['name'] == '$O'] == [('segment', 3, None)]" \
		shmctl ls --json --owner 65534
	run shmctl ls
	pass "ls (human): the reason under the row" pyeval '
l = a[0].splitlines()
i = [k for k, x in enumerate(l) if x.split()[0] == a[1]][0]
l[i + 1].strip().startswith("untrusted: segment is owned by uid 65534")' "$OUT" "$O"

	# root replacing or resizing another user's segment: what it holds is
	# kept only when its owner is named; never thrown away unasked
	t_errmatch "create --force of another user's segment: refused, naming --owner and --fresh" 1 \
		"^shmctl: $O: segment is owned by uid 65534 .*not replaced .*--owner.*--fresh" \
		shmctl create "$O" --force
	t_json "(nothing changed: its owner, value and generation)" 'j["generation"] == 3' \
		shmctl stat "$O" --json --owner 65534
	t_out "(the value)" 13 shmctl get "$O" recompile_limit --owner 65534
	t_errmatch "resize of another user's segment: refused" 1 "^shmctl: $O: segment is owned by uid 65534" \
		shmctl resize "$O" --history 64
	run shmctl resize "$O" --history 64 --owner 65534
	pass "resize --owner: resized, generations go on" pyeval \
		'a[0].startswith("resized segment") and a[0].rstrip().endswith("generation 4")' "$OUT"
	t_out "(the value kept, and its owner)" "13 65534 65534" sh -c "$SHMCTL get $O recompile_limit --owner 65534 |
		xargs echo \$(stat -c %u /dev/shm/shmcfg.$O /dev/shm/shmcfg-lock.$O.*) | awk '{print \$3, \$1, \$2}'"
	# writable by a group that uid 65533 is in: attached, not trusted
	chgrp 65532 "/dev/shm/shmcfg.$O" /dev/shm/shmcfg-lock."$O".*
	chmod 0660 "/dev/shm/shmcfg.$O" /dev/shm/shmcfg-lock."$O".*
	t_errmatch "another non-root user's create --force: only its owner or root" 1 \
		"^shmctl: $O: only its owner \(uid 65534.*\) or root may replace it" \
		setpriv --reuid 65533 --regid 65533 --groups 65532 $SHMCTL create "$O" --force
	chmod 0600 "/dev/shm/shmcfg.$O" /dev/shm/shmcfg-lock."$O".*
	t_errmatch "(unreadable to them: it cannot be removed, naming the owner)" 1 \
		"^shmctl: $O: cannot remove /dev/shm/shmcfg.$O: it belongs to uid 65534" \
		setpriv --reuid 65533 --regid 65533 --clear-groups $SHMCTL create "$O" --force
	t_errmatch "create --force naming another owner: refused, naming both; nothing changed" 1 \
		"^shmctl: $O: segment is owned by uid 65534 .*not by the expected owner 65533" \
		shmctl create "$O" --force --fresh --owner 65533
	t_out "(the value kept)" 13 shmctl get "$O" recompile_limit --owner 65534
	run shmctl create "$O" --force --owner 65534 --mode 0644
	pass "create --force --owner: replaced, generations go on" pyeval \
		'a[0].startswith("replaced segment") and a[0].rstrip().endswith("generation 5")' "$OUT"
	t_out "(the value kept, in root's segment now)" "13 0" sh -c \
		"$SHMCTL get $O recompile_limit | xargs echo \$(stat -c %u /dev/shm/shmcfg.$O) | awk '{print \$2, \$1}'"
	chown 65534 "/dev/shm/shmcfg.$O" /dev/shm/shmcfg-lock."$O".*
	run shmctl create "$O" --force --fresh
	pass "create --force --fresh: created anew with the defaults" pyeval \
		'a[0].startswith("created segment") and a[0].rstrip().endswith("generation 1")' "$OUT"
	t_out "(the default)" 8 shmctl get "$O" recompile_limit
else
	for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22; do
		skip "another user's segment: needs root (chown)"
	done
fi

# --- entries that are not segments --------------------------------------------------
# a file planted under the name: create says what it is, and leaves it
seg G garbage
printf 'garbage!' >"/dev/shm/shmcfg.$G"
t_errmatch "create over a planted file: not a segment, what attach says of it" 1 \
	"^shmctl: '$G' exists and is not a segment this library can read: $G: object has 8 bytes, less than a header" \
	shmctl create "$G"
pass "(the file is left as it was)" test "$(cat "/dev/shm/shmcfg.$G")" = "garbage!"
run shmctl rm "$G"
pass "(rm removes it)" test "$RC" = 0 -a ! -e "/dev/shm/shmcfg.$G"
mkfifo "/dev/shm/shmcfg.$F"
"$PYTHON" -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "/dev/shm/shmcfg.$S"
mkdir "/dev/shm/shmcfg.$D"
run shmctl create -q "$A"
# a copy of a real segment with holes: a valid header, pages not allocated
cp --sparse=always "/dev/shm/shmcfg.$A" "/dev/shm/shmcfg.$Z"
sparse_ok=$(stat -c '%b %B %s' "/dev/shm/shmcfg.$Z" | awk '{print ($1 * $2 < $3) ? 1 : 0}')
t0=$(date +%s)
run timeout 20 $SHMCTL ls --json
t1=$(date +%s)
# "at once": a FIFO opened without O_NONBLOCK would hang ls until timeout
# kills it; 15 s leaves room for a busy machine and for the segments of tests
# running alongside that are still being created (ls waits up to 1 s for each)
pass "ls with a FIFO, a socket and a directory among the segments: exit 0 at once" \
	test "$RC" = 0 -a $((t1 - t0)) -le 15
pass "ls --json: each listed as not a segment, with the reason" jcheck "$T_TMP/out" "
e = {s['name']: s for s in j}
([(e[n]['kind'], e[n]['generation'], e[n]['error']) for n in ('$F', '$S', '$D')] ==
 [('not a segment', None, '/dev/shm/shmcfg.$F is a FIFO'),
  ('not a segment', None, '/dev/shm/shmcfg.$S is a socket'),
  ('not a segment', None, '/dev/shm/shmcfg.$D is a directory')] and
 e['$A']['kind'] == 'segment' and e['$A']['error'] is None)"
if [ "$sparse_ok" = 1 ]; then
	pass "ls --json: a sparse object is not a segment" jcheck "$T_TMP/out" "
[(s['kind'], s['error'].startswith('object is sparse (')) for s in j if s['name'] == '$Z'] == [('not a segment', True)]"
	t_errmatch "get of a sparse object: refused by the library" 1 "^shmctl: $Z: object is sparse" \
		timeout 10 $SHMCTL get "$Z" recompile_limit
else
	skip "cp --sparse=always made no holes here"
	skip "cp --sparse=always made no holes here"
fi
# a hole only (truncate): no header at all, refused at once, not waited on as a
# segment being created (creation allocates every page before the size is set)
ZH="cli-$$-hole"
truncate -s 1M "/dev/shm/shmcfg.$ZH"
if [ "$(stat -c '%b' "/dev/shm/shmcfg.$ZH")" = 0 ]; then
	t_errmatch "get of an object that is all hole: 'sparse', not 'never initialised'" 1 \
		"^shmctl: $ZH: object is sparse \(0 of 1048576 bytes allocated\): not a segment\$" \
		timeout 10 $SHMCTL get "$ZH" recompile_limit
else
	skip "truncate made no hole here"
fi
rm -f "/dev/shm/shmcfg.$ZH"
run timeout 20 $SHMCTL ls
pass "ls (human): 'not a segment: ...' under each row" pyeval '
l = a[0].splitlines()
def note(n):
    i = [k for k, x in enumerate(l) if x.split()[0] == n][0]
    return l[i + 1].strip()
(note(a[1]) == "not a segment: /dev/shm/shmcfg.%s is a FIFO" % a[1] and
 note(a[2]) == "not a segment: /dev/shm/shmcfg.%s is a socket" % a[2] and
 note(a[3]) == "not a segment: /dev/shm/shmcfg.%s is a directory" % a[3])' "$OUT" "$F" "$S" "$D"
t_errmatch "get of a FIFO: refused at once as not a segment" 1 "^shmctl: $F: /dev/shm/shmcfg.$F is a FIFO, not a segment$" \
	timeout 10 $SHMCTL get "$F" recompile_limit
t_errmatch "set of a socket: refused at once as not a segment" 1 "is a socket, not a segment$" \
	timeout 10 $SHMCTL set "$S" recompile_limit=3
t_errmatch "stat of a directory: refused at once as not a segment" 1 "is a directory, not a segment$" \
	timeout 10 $SHMCTL stat "$D"

# --- rm and create --force name the attached processes ------------------------------
# no_warning: exit 0, and no warning but one naming processes already gone (a
# `shmctl ls` of a test running alongside maps every segment for an instant)
no_warning() {
	[ "$RC" = 0 ] && pyeval '
import os, re, time
m = re.fullmatch(r"shmctl: warning: \S+ is attached by pids? ([0-9, ]+): .*", a[0])
gone = lambda: not any(os.path.exists("/proc/" + p) for p in m.group(1).split(", "))
end = time.monotonic() + 10  # the passing ls ends within a moment, even on a loaded machine
while m and not gone() and time.monotonic() < end:
    time.sleep(0.05)
a[0] == "" or (m is not None and gone())' "$ERR"
}
run shmctl rm "$A"
pass "rm of a segment nobody has attached: no warning" no_warning
run shmctl create -q "$A"
run shmctl create -q --force "$A"
pass "create --force of a segment nobody has attached: no warning" no_warning
$SHMCTL watch "$A" --timeout 20 >/dev/null 2>"$T_TMP/w1.err" &
W1=$!
$SHMCTL watch "$A" --timeout 20 >/dev/null 2>"$T_TMP/w2.err" &
W2=$!
wait_for() { # FILE: until watch says it watches, at most 10 s
	_n=0
	while [ $_n -lt 200 ] && ! grep -q "^shmctl: watching" "$1" 2>/dev/null; do
		sleep 0.05
		_n=$((_n + 1))
	done
}
wait_for "$T_TMP/w1.err"
wait_for "$T_TMP/w2.err"
run shmctl rm "$A"
pass "rm of an attached segment: removed all the same, a warning naming the pids" pyeval '
import re
m = re.fullmatch(r"shmctl: warning: %s is attached by pids ([0-9, ]+): they keep the old segment and learn it was removed \(SHMCFG_E_RETIRED\)" % re.escape(a[4]), a[1])
pids = m.group(1).split(", ") if m else []
# in ascending order; a `shmctl ls` alongside may be named too
(a[0] == "0" and {a[2], a[3]} <= set(pids) and pids == sorted(pids, key=int))' \
	"$RC" "$ERR" "$W1" "$W2" "$A"
pass "(the segment is gone)" test ! -e "/dev/shm/shmcfg.$A"
wait $W1
R1=$?
wait $W2
pass "(both watchers learnt it: exit 1)" test "$R1" = 1 -a $? = 1

# Names someone else chose never reach the terminal raw: escape sequences and
# newlines (which would forge rows) are shown as \xNN, every error one line.
ESC=$(printf '\033')
NL=$(printf 'a\nb')
t_errmatch "a name with a newline and an escape: one line, shown as \\xNN" 1 '\\x0a.*\\x1b' \
	shmctl show "$NL${ESC}[31m"
H1="/dev/shm/shmcfg.cli-$$-esc${ESC}]0;title$(printf '\a')"
H2="/dev/shm/shmcfg.cli-$$-nl
cli-$$-FAKE  1.0 MiB 99 38 0 root 0600"
: >"$H1"
: >"$H2"
# U+009B (CSI to many terminals) and U+2028, valid UTF-8
H3="/dev/shm/shmcfg.cli-$$-c1$(printf '\302\233')2J$(printf '\342\200\250')x"
: >"$H3"
run shmctl ls
pass "ls: no escape character and no forged row from planted names" pyeval '
lines = a[0].splitlines()
"\x1b" not in a[0] and "\x07" not in a[0] and not any(l.startswith("cli-%s-FAKE" % a[1]) for l in lines)' "$OUT" "$$"
pass "ls: no C1 control or line separator from a planted name, in its row or its note" pyeval '
"\x9b" not in a[0] and "\u2028" not in a[0] and "cli-%s-c1?2J?x" % a[1] in a[0]' "$OUT" "$$"
# a byte that is no UTF-8 (0x9b alone is CSI to an 8-bit terminal)
H4="/dev/shm/shmcfg.cli-$$-lone$(printf '\233')2J"
: >"$H4"
run shmctl ls
pass "ls: a planted name's byte that is no UTF-8 prints as '?'" pyeval '"cli-%s-lone?2J" % a[1] in a[0]' "$OUT" "$$"
pass "ls: its output is safe on a terminal" termsafe "$T_TMP/out"
# jansson takes only UTF-8: the row kept its name (and its error), as \xNN
t_json "ls --json: a planted name that is no UTF-8 keeps its row's name, as \\xNN" '
[s["error"] is not None for s in j if s.get("name") == "cli-'"$$"'-lone\\x9b2J"] == [True] and
all(isinstance(s.get("name"), str) and "error" in s for s in j)' shmctl ls --json
rm -f "$H1" "$H2" "$H3" "$H4"

# A schema's messages are its writer's text: describe and the warnings show
# them without escape sequences, C1 controls, line separators or bytes that
# are no UTF-8 (as \xNN); the doc's own line breaks stay, indented.
cat >"$T_TMP/hostile.yaml" <<'EOF'
format: 1
options:
  m.old:
    type: int
    default: 3
    deprecated: "use \x9b31m m.new\u2028x\e[2J"
    knob: "k\x9bnob\e[1m"
    doc: "first line\e]0;title\a\nsecond\u2028line\x9b2J\rthird"
EOF
seg M hostile
run shmctl create -q --schema "$T_TMP/hostile.yaml" "$M"
run shmctl describe "$M" m.old
pass "describe: the schema's doc, knob and deprecation message are safe on a terminal" termsafe "$T_TMP/out"
pass "... escaped as \\xNN, the doc's line breaks kept and indented" pyeval '
"  knob          k\\xc2\\x9bnob\\x1b[1m\n" in a[0] and
"\n    first line\\x1b]0;title\\x07\n    second\\xe2\\x80\\xa8line\\xc2\\x9b2J\\x0dthird" in a[0]' "$OUT"
pass "... its warning on stderr too" termsafe "$T_TMP/err"
run shmctl show -v "$M" m.old
pass "show -v: the doc as describe shows it, under the row" pyeval '
a[0].splitlines()[2:] == ["    first line\\x1b]0;title\\x07", "    second\\xe2\\x80\\xa8line\\xc2\\x9b2J\\x0dthird"]' "$OUT"
pass "... safe on a terminal" termsafe "$T_TMP/out"
run shmctl get "$M" m.old
pass "get of the deprecated option: the warning is one line, escaped" test "$RC" = 0 -a "$OUT" = 3 -a \
	"$ERR" = 'shmctl: warning: m.old is deprecated: use \xc2\x9b31m m.new\xe2\x80\xa8x\x1b[2J'
C1NAME="cli-$$-c1$(printf '\302\233')x$(printf '\342\200\251')y$(printf '\233')"
t_errmatch "an error quoting a name: its C1 control, separator and stray byte as \\xNN" 1 \
	'c1\\xc2\\x9bx\\xe2\\x80\\xa9y\\x9b' shmctl get "$C1NAME" m.old
pass "... safe on a terminal" termsafe "$T_TMP/err"

# The sync record: any writer of the segment sets it (shmcfg_sync_set), and
# stat shows its cluster, host, endpoints and error.
if [ -n "${SHMCFG_SANITIZERS:-}" ]; then
	skip "sync record: libshmcfg is built with sanitizers (ctypes cannot load it)"
else
	seg Y sync
	run shmctl create -q "$Y"
	run "$PYTHON" -c '
import ctypes, sys
lib = ctypes.CDLL(sys.argv[2])
class SyncInfo(ctypes.Structure):  # shmcfg_sync_info
    _fields_ = [("endpoints", ctypes.c_char * 256), ("cluster", ctypes.c_char * 64),
                ("host", ctypes.c_char * 64), ("pid", ctypes.c_int32), ("updated_ns", ctypes.c_uint64),
                ("applied_rev", ctypes.c_uint64), ("out_of_sync_ns", ctypes.c_uint64),
                ("nrejected", ctypes.c_uint32), ("error", ctypes.c_char * 256)]
h = ctypes.c_void_p()
assert lib.shmcfg_attach(sys.argv[1].encode(), 0, None, ctypes.byref(h)) == 0
info = SyncInfo(b"http://e\x1b[2J:2379", b"c\xc2\x9bl", b"h\x9b\nFAKE row", 1, 0, 7, 1, 2,
                b"down\x1b]0;t\x07\xe2\x80\xa8x")
assert lib.shmcfg_sync_set_sized(h, ctypes.byref(info), ctypes.c_size_t(ctypes.sizeof(info))) == 0
' "$Y" "$top_builddir/lib/.libs/libshmcfg.so.3"
	pass "(a sync record set through the library)" test "$RC" = 0
	run shmctl stat "$Y"
	pass "stat: the sync record's cluster, host, endpoints and error are safe on a terminal" termsafe "$T_TMP/out"
	pass "... shown as \\xNN, on their lines" pyeval '
"c\\xc2\\x9bl, revision " in a[0] and "host h\\x9b\\x0aFAKE row, etcd http://e\\x1b[2J:2379\n" in a[0] and
": down\\x1b]0;t\\x07\\xe2\\x80\\xa8x\n" in a[0]' "$OUT"
	t_json "stat --json: the record's host, no UTF-8, kept as \\xNN; the others as they are" '
s = j["sync"]
s["host"] == "h\\x9b\\x0aFAKE row" and s["cluster"] == "c\x9bl" and s["endpoints"] == "http://e\x1b[2J:2379"' \
		shmctl stat "$Y" --json
fi

# A directory planted under a segment's name: rm removes it (rmdir) where the
# caller may, and create --force then creates the segment.
D="cli-$$-dir"
mkdir "/dev/shm/shmcfg.$D"
t_errmatch "create without --force over a planted directory: says what is there" 1 \
	"^shmctl: '$D' exists and is not a segment: /dev/shm/shmcfg.$D is a directory \(remove it, or use --force\)\$" \
	shmctl create -q "$D"
run shmctl create -q --force "$D"
pass "create --force over a planted (empty) directory: created" test "$RC" = 0 -a -f "/dev/shm/shmcfg.$D"
run shmctl rm "$D"
t_done
