#!/bin/sh
# SPDX-License-Identifier: MIT
# shmctl cluster against etcd's transient errors (issue 22): a proxy in front
# of the test's etcd (tests/cluster/fakeetcd.py inject) answers requests
# with HTTP 503 "etcdserver: leader changed", as etcd does during an
# election. Writes and reads retry with backoff and succeed; a transaction
# etcd applied but whose answer was lost is found by its audit record, not
# applied twice, and reported with its revision (also when the client fell
# over to a second endpoint whose compare then failed); errors without end
# fail after --timeout with one line; nothing is written twice.
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/cluster/lib.sh"

etcd_start
new_seg S one
unset SHMCFG_ETCD_ENDPOINTS SHMCFG_CLUSTER

PROXY_PID=""
# proxy_start PATH N HOW: the first N requests to PATH answered 503 (HOW:
# 503 instead of etcd's answer, lost after etcd's); one line per request to
# PATH in $T_TMP/proxy.log (503, lost, ok)
proxy_start() {
	rm -f "$T_TMP/proxy.sock"
	: >"$T_TMP/proxy.log"
	"$PYTHON" "$top_srcdir/tests/cluster/fakeetcd.py" "$T_TMP/proxy.sock" inject "$ETCD_DIR/client.sock:1" \
		"$1" "$2" "$3" "$T_TMP/proxy.log" &
	PROXY_PID=$!
	until_true 5 test -S "$T_TMP/proxy.sock" || { not_ok "the proxy did not start"; t_done; }
}
proxy_stop() {
	[ -n "$PROXY_PID" ] && kill "$PROXY_PID" 2>/dev/null && wait "$PROXY_PID" 2>/dev/null
	PROXY_PID=""
}
trap 'proxy_stop; c_cleanup' EXIT

C="--endpoints unix:$T_TMP/proxy.sock --cluster $CLUSTER"
# requests to the proxy's PATH that got ANSWER (503, lost, ok)
nreq() { grep -c "^$1\$" "$T_TMP/proxy.log"; }
nrecords() { ectl get --prefix "${P}audit/" --keys-only | grep -c .; }
head_rev() {
	ectl get "${P}head" -w json |
		"$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["kvs"][0]["mod_revision"])'
}
value() { ectl get "${P}opt/$1" --print-value-only; }
# out_is LINE...: stdout of the last run is exactly these lines
out_is() {
	_want=$(printf '%s\n' "$@")
	[ "$OUT" = "$_want" ] || { diag "expected stdout:" "$_want"; return 1; }
}

# ---- 503 before etcd saw the transaction: sent again
proxy_start /v3/kv/txn 3 503
run $SHMCTL cluster set "$S" app.limit=42 $C
pass "three 503s (leader changed) on the transaction: the set retries and succeeds" test "$RC" = 0 -a -z "$ERR"
pass "... sent four times, applied once" test "$(nreq 503)" = 3 -a "$(nreq ok)" = 1
pass "... one audit record" test "$(nrecords)" = 1 -a "$(value app.limit)" = 42
pass "... the output names its revision" out_is "app.limit: unset -> 42" \
	"cluster '$CLUSTER': audit record 1, revision $(head_rev)"
proxy_stop

# ---- etcd applied it, the answer was lost: found, not sent again
proxy_start /v3/kv/txn 1 lost
run $SHMCTL cluster set "$S" app.limit=43 --reason lost $C
pass "the answer lost (503 after etcd applied it): exit 0" test "$RC" = 0 -a -z "$ERR"
pass "... sent once: its audit record was found" test "$(nreq lost)" = 1 -a "$(nreq ok)" = 0
pass "... one audit record more" test "$(nrecords)" = 2 -a "$(value app.limit)" = 43
pass "... reported as applied: the change and the revision of its transaction" out_is "app.limit: 42 -> 43" \
	"cluster '$CLUSTER': audit record 2, revision $(head_rev)"
t_json "... the record is the one it wrote" \
	"r = j['records']; len(r) == 2 and r[1]['reason'] == 'lost' and r[1]['revision'] == $(head_rev)" \
	$SHMCTL cluster log "$S" --json --endpoints "$ETCD_EP" --cluster "$CLUSTER"
proxy_stop

# a rollback whose answer is lost: not refused as "moved since" by its own write
proxy_start /v3/kv/txn 1 lost
run $SHMCTL cluster rollback "$S" 2 $C
pass "a rollback whose answer was lost: exit 0" test "$RC" = 0 -a -z "$ERR"
pass "... applied once, reported as applied" out_is "app.limit: 43 -> 42" \
	"cluster '$CLUSTER': audit record 3, revision $(head_rev)"
pass "... three records, the value back" test "$(nrecords)" = 3 -a "$(value app.limit)" = 42 -a "$(nreq lost)" = 1
proxy_stop

# ---- two endpoints: the first applies and answers 503, etcd.c sends the
# transaction to the second, whose compare fails: still reported as applied
proxy_start /v3/kv/txn 1 lost
run $SHMCTL cluster set "$S" app.limit=44 --endpoints "unix:$T_TMP/proxy.sock,$ETCD_EP" --cluster "$CLUSTER"
pass "a lost answer, then a failed compare on the next endpoint: exit 0" test "$RC" = 0 -a -z "$ERR"
pass "... reported as applied, with its revision" out_is "app.limit: 42 -> 44" \
	"cluster '$CLUSTER': audit record 4, revision $(head_rev)"
pass "... one record more" test "$(nrecords)" = 4 -a "$(value app.limit)" = 44
proxy_stop

# ---- reads retry too
proxy_start /v3/kv/range 3 503
t_json "show: three 503s on its reads, retried" \
	'[(k["key"], k["value"]) for k in j["keys"]] == [("opt/app.limit", 44)]' $SHMCTL cluster show "$S" --json $C
pass "... the reads were sent again" test "$(nreq 503)" = 3
proxy_stop

# ---- errors without end: one line once --timeout has passed, nothing written
proxy_start /v3/kv/txn -1 503
t0=$(date +%s%N)
run $SHMCTL cluster set "$S" app.limit=45 $C --timeout 2s
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
pass "503s without end: exit 1 after --timeout 2s (took $ms ms)" test "$RC" = 1 -a "$ms" -ge 2000 -a "$ms" -lt 9000
pass "... one line: how long it retried, how often, the last error, the unknown outcome" test \
	"$(wc -l <"$T_TMP/err")" = 1 -a -n "$(grep -E "^shmctl: cluster '$CLUSTER': gave up after retrying for 2\.[0-9] s \([0-9]+ tries\): etcd unix:$T_TMP/proxy\.sock: /v3/kv/txn: HTTP 503: etcdserver: leader changed; a transaction sent meanwhile may have been applied as audit record 5 \(shmctl cluster log\)$" "$T_TMP/err")"
tries=$(nreq 503)
pass "... with backoff: $tries tries in 2 s" test "$tries" -ge 3 -a "$tries" -le 60
pass "... nothing written" test "$(nrecords)" = 4 -a "$(value app.limit)" = 44
proxy_stop

proxy_start /v3/kv/range -1 503
run $SHMCTL cluster log "$S" $C --timeout 500ms
pass "a read that never gets an answer: exit 1, one line" test "$RC" = 1 -a "$(wc -l <"$T_TMP/err")" = 1 -a \
	-n "$(grep -E "gave up after retrying for [0-9]+\.[0-9] s \([0-9]+ tries\): .*/v3/kv/range: HTTP 503: etcdserver: leader changed$" "$T_TMP/err")"
proxy_stop

t_done
