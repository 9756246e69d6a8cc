#!/bin/sh
# SPDX-License-Identifier: MIT
# shmcfg-sync against what a cluster writer can put under the prefix
# (issue 22): a value too big for this host's value heap (left out, the
# rest applied, rejected in the status, never wedging later revisions),
# knob keys deleted while the agent was down (reset when it returns; a
# local knob value stays), and a thousand rejected keys (each logged
# once). tests/cluster/bulk.sh has the big loads.
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/cluster/lib.sh"

GW="$PYTHON $top_srcdir/tests/cluster/gw.py"
etcd_start
SOCK=$ETCD_DIR/client.sock:1

# ---- 3: a value too big for the heap
seg S big
$SHMCTL create -q --no-env --size 48K --schema "$top_srcdir/tests/cluster/schema.yaml" "$S" || exit 99
sync_start a "$S" --host h1
pass "agent: watching" wait_log 10 a "watching from revision"
"$PYTHON" -c 'import json; print(json.dumps("x" * 60000))' >"$T_TMP/big.json"
audited_put "op" opt/app.limit=31
$GW "$SOCK" put-file "${P}opt/app.note" "$T_TMP/big.json" >/dev/null
eput opt/app.limit 32
pass "a 60 kB string on a 48 kB heap: the next value still applies" wait_get 15 "$S" app.limit 32
pass "... at its revision" wait_stat 10 "$S" "j['cluster_revision'] == $REV"
t_json "... the big one is rejected, named, the host in sync" \
	"j['sync']['in_sync'] and j['sync']['rejected'] == 1 and j['sync']['error'] == ''" $SHMCTL stat "$S" --json
# (the status key follows with the agent's next keepalive)
status_says() {
	ectl get "${P}status/h1/$S" --print-value-only >"$T_TMP/st.json" && jcheck "$T_TMP/st.json" "$1" >/dev/null
}
pass "... its status key says why" until_true 10 status_says \
	"j['in_sync'] and j['nrejected'] == 1 and j['rejected'][0]['key'] == 'opt/app.note' and 'does not fit' in j['rejected'][0]['error'] and j['heap_bytes'] > 0"
pass "... the option keeps its value" test "$(get "$S" app.note)" = '""'
"$PYTHON" -c 'import json; print(json.dumps(["h%d" % i for i in range(120000)]))' >"$T_TMP/list.json"
$GW "$SOCK" put-file "${P}opt/app.hosts" "$T_TMP/list.json" >/dev/null
audited_put "op" opt/app.limit=33 opt/app.mode='"safe"'
pass "a list of 120,000 items too: later changes apply" wait_get 15 "$S" app.mode '"safe"'
t_json "... both rejected" "j['sync']['rejected'] == 2 and j['sync']['in_sync']" $SHMCTL stat "$S" --json
edel opt/app.note
edel opt/app.hosts
eput opt/app.note '"small"'
pass "deleted and replaced by a small value: applied" wait_get 15 "$S" app.note '"small"'
t_json "... no rejection left" "j['sync']['rejected'] == 0" $SHMCTL stat "$S" --json
pass "... each rejection logged once" test "$(grep -c 'rejected opt/app.note' "$T_TMP/a.log")" = 1
agent_stop a

# ---- 6: knob keys deleted while the agent is down
new_seg K knob
sync_start k "$K" --host h2
pass "knobs: agent watching" wait_log 10 k "watching from revision"
eput knob/app/n 7
eput knob/app/flag true
pass "knob/app/n applied" wait_get 10 "$K" app.n 7
pass "knob/app/flag applied" wait_get 10 "$K" app.flag true
$SHMCTL set -q --knob "$K" app.flag=false
agent_stop k
edel knob/app/n
edel knob/app/flag
sync_start k2 "$K" --host h2
pass "restarted agent: loaded" wait_log 10 k2 "watching from revision"
pass "... the knob deleted meanwhile is reset" wait_get 10 "$K" app.n 1
t_json "... to its default" "j['source'] == 'default'" $SHMCTL describe "$K" app.n --json
pass "... a local knob value stays" test "$(get "$K" app.flag)" = false
t_json "... as a knob value" "j['source'] == 'knob'" $SHMCTL describe "$K" app.flag --json
# a knob key's value put back by a load over a local one is the cluster's
# again: its key deleted later resets it
agent_stop k2
eput knob/app/n 5
$SHMCTL set -q --knob "$K" app.n=7
sync_start k3 "$K" --host h2
pass "a knob key over a local value: the load puts it back" wait_get 10 "$K" app.n 5
edel knob/app/n
pass "... and its key deleted then resets it" wait_get 10 "$K" app.n 1
agent_stop k3

# ---- a commit that fails: another process holds the writer lock past the
# agent's commit timeout; the revision must not be lost, and the host says
# it is out of sync until it is in
sync_start l "$K" --host h2
pass "lock: agent watching" wait_log 10 l "watching from revision"
"$PYTHON" - "$K" "$T_TMP/release" >"$T_TMP/holder.out" 2>&1 <<'PY' &
import fcntl, glob, mmap, os, struct, sys, time
f = open(glob.glob("/dev/shm/shmcfg-lock.%s.*" % sys.argv[1])[0], "r+b")
# a live owner of the writer lock (lib/commit/wlock.c): the byte of reader
# entry 1000 locked (POSIX and OFD locks conflict), the word at offset 64
# of the lock object (struct lock_file) naming that entry (+ 1)
fcntl.lockf(f, fcntl.LOCK_EX, 1, 1 + 1000)
m = mmap.mmap(f.fileno(), 4096)
m[64:68] = struct.pack("<I", 1001)
print("locked", flush=True)
while not os.path.exists(sys.argv[2]):
    time.sleep(0.02)
m[64:68] = struct.pack("<I", 0)
PY
HOLDER=$!
until_true 10 grep -q locked "$T_TMP/holder.out"
eput opt/app.limit 55
# (the agent cannot write its record either: shmctl stat finds it stale)
pass "a commit that cannot take the lock: the host is shown out of sync" \
	wait_stat 30 "$K" "not j['sync']['in_sync']"
status_k() {
	ectl get "${P}status/h2/$K" --print-value-only >"$T_TMP/stk.json" && jcheck "$T_TMP/stk.json" "$1" >/dev/null
}
pass "... its status key says why" until_true 15 status_k "not j['in_sync'] and 'lock' in j['error']"
eput opt/app.mode '"safe"'
touch "$T_TMP/release"
wait $HOLDER
pass "the lock released: both revisions' values applied" wait_get 15 "$K" app.limit 55
pass "... the later one too" wait_get 5 "$K" app.mode '"safe"'
pass "... at the last revision, in sync" wait_stat 10 "$K" "j['sync']['in_sync'] and j['cluster_revision'] == $REV"
agent_stop l

# ---- 4: junk keys. Each rejection logged once, one key a revision:
# (before: every rejection again at every revision, N^2/2 lines)
new_seg J junk
sync_start j "$J" --host h3
pass "junk: agent watching" wait_log 10 j "watching from revision"
$GW "$SOCK" put-each "${P}opt/zz.each." 1000 1 >/dev/null
eput opt/app.limit 41
pass "1000 unknown keys, one a revision: applied after them" wait_get 30 "$J" app.limit 41
N=$(grep -c 'rejected opt/zz' "$T_TMP/j.log")
pass "... 1000 rejections logged, once each ($N lines)" test "$N" = 1000
t_json "... all counted" "j['sync']['rejected'] == 1000" $SHMCTL stat "$J" --json
agent_stop j

if [ "$T_FAILED" != 0 ]; then for n in a k k2 k3 l j; do diag_log $n; done; fi
t_done
