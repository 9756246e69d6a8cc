#!/bin/sh
# SPDX-License-Identifier: MIT
# shmcfg-sync against what a hostile cluster writer or server can send: a
# prefix full of keys this host rejects (the status key must stay under
# etcd's request limit, or the agent never syncs again), audit records whose
# who holds escape sequences or is cut mid-character, and a watch stream
# that never ends its message (tests/cluster/fakeetcd.py; the agent's memory
# must stay bounded), and range pages that never advance.
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/cluster/lib.sh"

# fake_start SOCK MODE: tests/cluster/fakeetcd.py on $T_TMP/SOCK (its
# requests in $T_TMP/SOCK.req), pid in FAKE_PID; fake_stop.
fake_start() {
	FAKE_LOG="$T_TMP/$1.req" "$PYTHON" "$top_srcdir/tests/cluster/fakeetcd.py" "$T_TMP/$1" "$2" &
	FAKE_PID=$!
	until_true 5 test -S "$T_TMP/$1"
}
fake_stop() {
	kill "$FAKE_PID" 2>/dev/null
	wait "$FAKE_PID" 2>/dev/null
}

# gone PID: it ran and ended (a zombie counts: not yet waited for)
gone() {
	! kill -0 "$1" 2>/dev/null || grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null
}

# agent_stop_within SECS NAME: SIGTERM; its exit status in RC if it ends
# within SECS seconds, else it is killed and RC is "running"
agent_stop_within() {
	eval "_p=\${AGENT_PID_$2:-}"
	kill "$_p" 2>/dev/null
	if until_true "$1" gone "$_p"; then
		wait "$_p"
		RC=$?
	else
		kill -9 "$_p" 2>/dev/null
		wait "$_p" 2>/dev/null
		RC=running
	fi
	eval "AGENT_PID_$2="
}

# rss PID: its resident memory in kB
rss() {
	awk '/^VmRSS/ { print $2 }' "/proc/$1/status"
}

etcd_start
# the memory bounds: ASan's shadow memory and quarantine (the sanitizer
# tier) take several times what the code does, and want the address space
RSS_MAX=300000
ULIMIT_V="ulimit -v 800000;"
if [ -n "${SHMCFG_SANITIZERS:-}" ]; then RSS_MAX=1200000; ULIMIT_V=; fi
new_seg S one

# ---- 2000 keys of unknown options with long names: ~2 MB of rejections
sync_start a "$S" --host hostA
pass "agent: watching" wait_log 10 a "watching from revision"
LONG=$("$PYTHON" -c 'print("x" * 480)')
for b in 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15; do
	"$PYTHON" - "$P" "$LONG" "$b" >"$T_TMP/t.in" <<'PY'
import sys
p, long, b = sys.argv[1:]
print()
for i in range(125):
    print("put %sopt/zz%s.%s.%d 1" % (p, long, b, i))
print()
print()
PY
	ectl txn <"$T_TMP/t.in" >/dev/null || not_ok "etcdctl txn $b"
done
pass "2000 rejected keys: the agent reports them" wait_log 20 a "rejected opt/zz"
sleep 3 # a few keepalives, each of which put the status key
eput opt/app.limit 43
pass "... and still applies the next value" wait_get 15 "$S" app.limit 43
pass "... its status key is within etcd's limit (no 'request is too large')" \
	sh -c "! grep -q 'request is too large' '$T_TMP/a.log'"
ectl get "$P"status/hostA/"$S" --print-value-only >"$T_TMP/st.json"
t_json "... and lists the first 32 rejections, counting all" \
	"len(j['rejected']) == 32 and j['nrejected'] == 2000" cat "$T_TMP/st.json"
pass "... the agent alive" agent_alive a

# ---- a who of escape sequences and a newline, and one cut mid-character
audited_put "$(printf 'evil\033]0;title\007\nFAKE ROW')" opt/app.limit=44
pass "who with control characters: applied" wait_get 15 "$S" app.limit 44
t_json "... its who as printable ASCII in the commit" \
	"j['commits'][0]['who'] == 'evil\\\\x1b]0;title\\\\x07\\\\x0aFAKE ROW'" $SHMCTL stat "$S" --json
audited_put "$("$PYTHON" -c 'print("\u00e9" * 40)')" opt/app.limit=45
pass "who of 80 bytes of UTF-8: applied" wait_get 15 "$S" app.limit 45
t_json "... its who cut to printable ASCII, not lost" \
	"j['commits'][0]['who'].startswith('\\\\xc3\\\\xa9') and j['commits'][0]['who'].isascii()" $SHMCTL stat "$S" --json
agent_stop a

# ---- a watch message without end
"$PYTHON" "$top_srcdir/tests/cluster/fakeetcd.py" "$T_TMP/fake.sock" nonl &
FAKE_PID=$!
until_true 5 test -S "$T_TMP/fake.sock"
agent_start b --endpoints "unix:$T_TMP/fake.sock" --cluster c --host h "$S"
pass "endless watch message: refused at the limit" wait_log 30 b "watch: a message over 16 MiB"
eval "_p=\$AGENT_PID_b"
RSS=$(awk '/^VmRSS/ { print $2 }' "/proc/$_p/status")
pass "... the agent's memory stays bounded (RSS ${RSS} kB < $((RSS_MAX / 1000)) MB)" test "${RSS:-0}" -lt "$RSS_MAX"
agent_stop b
pass "... and it stops on SIGTERM, exit 0" test "$RC" = 0
kill "$FAKE_PID" 2>/dev/null
wait "$FAKE_PID" 2>/dev/null

# ---- a range whose pages never advance (the same key, "more" every time)
"$PYTHON" "$top_srcdir/tests/cluster/fakeetcd.py" "$T_TMP/fake2.sock" samepage &
FAKE_PID=$!
until_true 5 test -S "$T_TMP/fake2.sock"
run timeout 60 $SHMCTL cluster status "$S" --endpoints "unix:$T_TMP/fake2.sock" --cluster c
pass "range pages that never advance: refused, one line (exit $RC)" \
	sh -c "[ $RC = 1 ] && grep -q 'a range page whose keys are not in order' '$T_TMP/err' && [ \$(wc -l <'$T_TMP/err') = 1 ]"
[ "$T_FAILED" = 0 ] || diag_run
kill "$FAKE_PID" 2>/dev/null
wait "$FAKE_PID" 2>/dev/null

# ---- a watch response in fragments that never ends (no last fragment)
fake_start frag.sock fragments
agent_start c --endpoints "unix:$T_TMP/frag.sock" --cluster c --host h "$S"
pass "endless fragments: refused at the limit" wait_log 30 c "watch: a fragmented response of more than"
eval "_p=\$AGENT_PID_c"
RSS=$(rss "$_p")
pass "... the agent's memory stays bounded (RSS ${RSS} kB < $((RSS_MAX / 1000)) MB)" test "${RSS:-0}" -lt "$RSS_MAX"
agent_stop_within 5 c
pass "... and it stops on SIGTERM, exit 0 ($RC)" test "$RC" = 0
fake_stop

# ---- range pages that advance but never end
fake_start forever.sock rangeforever
agent_start d --endpoints "unix:$T_TMP/forever.sock" --cluster c --host h "$S"
pass "a range without end: the agent's load pages it" \
	until_true 10 sh -c "[ \$(grep -c '^/v3/kv/range ' '$T_TMP/forever.sock.req') -ge 3 ]"
agent_stop_within 3 d
pass "... SIGTERM stops the load: the agent ends within 3 s, exit 0 ($RC)" test "$RC" = 0
T0=$(date +%s)
run timeout 30 $SHMCTL cluster show "$S" --endpoints "unix:$T_TMP/forever.sock" --cluster c --timeout 2s
T1=$(date +%s)
pass "... shmctl --timeout 2s bounds all its pages: exit 1 after $((T1 - T0)) s, one line" \
	sh -c "[ $RC = 1 ] && [ $((T1 - T0)) -le 6 ] && grep -q 'out of time' '$T_TMP/err' && [ \$(wc -l <'$T_TMP/err') = 1 ]"
[ "$T_FAILED" = 0 ] || diag_run
fake_stop

# ---- an answer of 12 MB that jansson would make ~1 GB of
fake_start objs.sock emptyobjs
run sh -c "$ULIMIT_V exec timeout 30 $SHMCTL cluster show '$S' --endpoints 'unix:$T_TMP/objs.sock' --cluster c"
pass "4M empty objects in an answer: refused before parsing, in 800 MB of address space (exit $RC)" \
	sh -c "[ $RC = 1 ] && grep -q 'with too many JSON values' '$T_TMP/err' && [ \$(wc -l <'$T_TMP/err') = 1 ]"
[ "$T_FAILED" = 0 ] || diag_run
fake_stop

# ---- a key with a NUL byte: shown escaped, and rejected by the agent
fake_start nul.sock nulkey
t_json "cluster show: a key with a NUL byte shown escaped, apart from the key it starts with, and judged" \
	"[k['key'] for k in j['keys']] == ['opt/app.limit', 'opt/app.limit\\\\x00x'] and 'NUL' in j['keys'][1]['error'] and 'error' not in j['keys'][0]" \
	$SHMCTL cluster show "$S" --endpoints "unix:$T_TMP/nul.sock" --cluster c --json
agent_start e --endpoints "unix:$T_TMP/nul.sock" --cluster c --host h "$S"
pass "agent: the key with a NUL byte is rejected, saying why" \
	wait_log 15 e 'rejected opt/app\.limit\\x00x: a NUL byte in the key'
pass "... the other one applied" wait_get 15 "$S" app.limit 43
pass "... its status lists the rejection" until_true 15 "$PYTHON" -c '
import base64, json, sys
st = None
for line in open(sys.argv[1]):
    path, _, body = line.partition(" ")
    if path == "/v3/kv/put":
        b = json.loads(body)
        if base64.b64decode(b["key"]).startswith(b"/shmcfg/v1/c/status/h/"):
            st = json.loads(base64.b64decode(b["value"]))
assert st["nrejected"] == 1 and st["rejected"][0]["key"] == "opt/app.limit\\x00x", st
assert "NUL" in st["rejected"][0]["error"], st
' "$T_TMP/nul.sock.req"
agent_stop_within 5 e
pass "... and it stops on SIGTERM, exit 0 ($RC)" test "$RC" = 0
fake_stop

if [ "$T_FAILED" != 0 ]; then diag_log a; diag_log b; diag_log c; diag_log d; diag_log e; fi
t_done
