#!/bin/sh
# SPDX-License-Identifier: MIT
# Permissions: a user who may only read a segment (mode 0644, another user)
# uses every read command, and every write command fails with exit 1 and a
# permission error. As root the other user is nobody (setpriv); as another
# user the segment is made read-only for its owner (chmod 0444).
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/cli/lib.sh"

seg R readable
seg P private

run shmctl create -q --mode 0644 "$R"
pass "create --mode 0644" test "$RC" = 0 -a "$(stat -c %a "/dev/shm/shmcfg.$R")" = 644
run shmctl set -q "$R" recompile_limit=16 job_id=j1
run shmctl create -q "$P" # mode 0600
if [ "$(id -u)" = 0 ]; then
	if ! command -v setpriv >/dev/null 2>&1; then
		skip "setpriv (util-linux) is needed to run as another user"
		t_done
	fi
	# the other user must reach the binary: a build tree under a 0700
	# directory would hide it
	if ! setpriv --reuid=65534 --regid=65534 --clear-groups $SHMCTL --version >/dev/null 2>&1; then
		skip "nobody cannot run $SHMCTL (build tree not readable by others)"
		t_done
	fi
	as_reader() { setpriv --reuid=65534 --regid=65534 --clear-groups $SHMCTL "$@"; }
	HOW="as nobody"
else
	as_reader() { $SHMCTL "$@"; }
	HOW="read-only for its owner"
	chmod 0444 "/dev/shm/shmcfg.$R"
	chmod 0000 "/dev/shm/shmcfg.$P"
fi

# --- reads work -----------------------------------------------------------------
t_out "get ($HOW)" 16 as_reader get "$R" recompile_limit
t_json "show --json ($HOW)" '
{o["name"]: (o["value"], o["source"]) for o in j}["torch._dynamo.config.recompile_limit"] == (16, "user")' \
	as_reader show "$R" --json
t_json "describe --json ($HOW)" 'j["value"] == "j1"' as_reader describe "$R" job_id --json
t_json "stat --json ($HOW): the reader is not in the table" 'j["generation"] == 2 and j["readers"] == []' \
	as_reader stat "$R" --json
t_out "hash ($HOW)" "$(shmctl hash "$R")" as_reader hash "$R"
t_json "dump ($HOW)" 'j["values"]["torch.compiler.config.job_id"] == "j1"' as_reader dump "$R"
run as_reader diff "$R"
pass "diff ($HOW)" pyeval '"torch._dynamo.config.recompile_limit = 16" in a[0].splitlines()' "$OUT"
run as_reader diff "$R" --format json
pass "diff --format json ($HOW)" jcheck "$T_TMP/out" \
	'j == {"torch._dynamo.config.recompile_limit": 16, "torch.compiler.config.job_id": "j1"}'
t_json "check --json ($HOW)" 'j["ok"] is True and j["problems"] == []' as_reader check "$R" --json
t_rc "watch --timeout ($HOW): attaches read-only" 0 as_reader watch "$R" --timeout 0.2
t_json "ls --json ($HOW): the readable segment without error" '
[(s["generation"], s["error"]) for s in j if s["name"] == "'"$R"'"] == [(2, None)]' as_reader ls --json

# --- writes fail ----------------------------------------------------------------
t_err "set ($HOW)" 1 "shmctl: segment '$R': permission denied (write access)" \
	as_reader set "$R" recompile_limit=1
t_err "set --knob ($HOW)" 1 "shmctl: segment '$R': permission denied (write access)" \
	as_reader set --knob "$R" force_disable_caches=true
t_err "reset ($HOW)" 1 "shmctl: segment '$R': permission denied (write access)" \
	as_reader reset "$R" recompile_limit
t_err "reset --all ($HOW)" 1 "shmctl: segment '$R': permission denied (write access)" \
	as_reader reset "$R" --all
echo '{"torch._dynamo.config.recompile_limit": 1}' >"$T_TMP/load.json"
chmod 0644 "$T_TMP/load.json"
chmod 0755 "$T_TMP"
t_err "load ($HOW)" 1 "shmctl: segment '$R': permission denied (write access)" \
	as_reader load "$R" "$T_TMP/load.json"
t_err "gc ($HOW)" 1 "shmctl: segment '$R': permission denied (write access)" as_reader gc "$R"
if [ "$(id -u)" = 0 ]; then
	t_err "rm ($HOW)" 1 "shmctl: segment '$R': permission denied" as_reader rm "$R"
	t_err "create --force over it ($HOW): the library's reason" 1 \
		"shmctl: $R: cannot remove /dev/shm/shmcfg.$R: it belongs to uid 0 (root)" \
		as_reader create --force "$R"
else
	skip "rm by another user: needs root"
	skip "create --force by another user: needs root"
fi
t_out "nothing changed" 16 shmctl get "$R" recompile_limit
pass "the segment is still there" test -e "/dev/shm/shmcfg.$R"

# --- a segment the user may not read at all -----------------------------------------
t_err "get of an unreadable segment" 1 "shmctl: segment '$P': permission denied (read access)" \
	as_reader get "$P" recompile_limit
t_err "show of an unreadable segment" 1 "shmctl: segment '$P': permission denied (read access)" \
	as_reader show "$P"
t_err "check of an unreadable segment" 1 "shmctl: segment '$P': permission denied (read access)" \
	as_reader check "$P"
t_json "ls lists an unreadable segment with its error" '
[(s["generation"], s["error"]) for s in j if s["name"] == "'"$P"'"] == [(None, "permission denied")]' \
	as_reader ls --json
run as_reader ls
pass "ls (human): the error under the row" pyeval '
l = a[0].splitlines()
i = [k for k, x in enumerate(l) if x.split()[0] == a[1]][0]
l[i + 1].strip() == "error: permission denied"' "$OUT" "$P"
[ "$(id -u)" = 0 ] || chmod 0600 "/dev/shm/shmcfg.$P" "/dev/shm/shmcfg.$R"
t_done
