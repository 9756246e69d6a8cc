#!/bin/sh
# SPDX-License-Identifier: MIT
# The boot unit, tools/shmcfg@.service (issue 23, item 4): systemd-analyze
# verify accepts it, and its commands, taken from the built unit with %i
# filled in and run by hand in an empty environment against a configuration
# directory of the test's own ($SHMCFG_CONF_DIR), create the segment with
# its schema and files, and, run again (a restart, a reload), keep it and
# apply the files to it.
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/cli/lib.sh"

UNIT=$top_builddir/tools/shmcfg@.service
if [ ! -f "$UNIT" ]; then
	echo "not ok 1 - $UNIT is built (make builds it)"
	echo "1..1"
	exit 1
fi
seg N unit

# --- what the unit says ------------------------------------------------------
# key=value lines of the [Service] section
service() {
	sed -n '/^\[Service\]/,/^\[/{/^'"$1"'=/s/^[^=]*=//p}' "$UNIT"
}
pass "Type=oneshot, RemainAfterExit=yes: started once, active while the segment is" \
	test "$(service Type)" = oneshot -a "$(service RemainAfterExit)" = yes
pass "no ExecStop: stopping leaves the segment to its processes" test -z "$(service ExecStop)"
START=$(service ExecStart)
pass "ExecStart creates the instance's segment with --conf, keeping one of that schema" \
	test "${START#*/shmctl }" = "create %i --conf --exist-ok"
pass "ExecReload applies the configuration again, as ExecStart" test "$(service ExecReload)" = "$START"

if command -v systemd-analyze >/dev/null 2>&1; then
	# the unit as installed names $(bindir)/shmctl, not installed here:
	# verify a copy that names the built one (verify checks that it runs)
	mkdir "$T_TMP/units"
	sed "s|^\(Exec[A-Za-z]*=\)[^ ]*/shmctl |\1$(cd "$top_builddir" && pwd)/tools/shmctl |" "$UNIT" \
		>"$T_TMP/units/shmcfg@.service"
	run sh -c "cd '$T_TMP/units' && systemd-analyze verify --man=no ./shmcfg@$N.service"
	pass "systemd-analyze verify: exit 0, nothing said of the unit" \
		test "$RC" = 0 -a -z "$(grep shmcfg "$T_TMP/err")"
	# and verify can fail: a unit whose command does not exist
	sed 's|^ExecStart=[^ ]*|ExecStart=/nonexistent/shmctl|' "$T_TMP/units/shmcfg@.service" >"$T_TMP/units/bad@.service"
	run sh -c "cd '$T_TMP/units' && systemd-analyze verify --man=no ./bad@$N.service"
	pass "(systemd-analyze verify refuses a unit whose command does not exist)" test "$RC" != 0
else
	skip "systemd-analyze verify: systemd-analyze is not installed (Debian: systemd)"
	skip "(systemd-analyze verify refuses a unit whose command does not exist)"
fi

# --- its commands, by hand ---------------------------------------------------------
E=$T_TMP/etc
mkdir -p "$E/$N.d"
SCHEMA='format: 1\noptions:\n  app.level:\n    type: int\n    default: 1\n  app.name:\n    type: str\n    default: x\n'
printf "$SCHEMA" >"$E/$N.yaml"
echo '{"app.level": 2, "app.name": "boot"}' >"$E/$N.d/10-base.json"
echo '{"app.level": 3}' >"$E/$N.d/20-site.json"
# COMMAND of the unit: %i filled in, its shmctl the built one, an empty
# environment but the conf dir (and the library path of the build)
unit_cmd() {
	_c=$(service "$1" | sed "s|%i|$N|g")
	run env -i PATH=/usr/bin:/bin ${LD_LIBRARY_PATH:+LD_LIBRARY_PATH=$LD_LIBRARY_PATH} SHMCFG_CONF_DIR="$E" \
		$SHMCTL ${_c#*/shmctl }
}
unit_cmd ExecStart
pass "ExecStart by hand: exit 0" test "$RC" = 0
pass "... the segment exists" test -f "/dev/shm/shmcfg.$N"
run shmctl show "$N" --json
pass "... of the schema NAME.yaml, the files of NAME.d loaded in order, in the user layer" jcheck "$T_TMP/out" '
v = {o["name"]: (o["value"], o["source"]) for o in j}
v == {"app.level": (3, "user"), "app.name": ("boot", "user")}'
t_out "... as one commit: generation 2" 2 sh -c "$SHMCTL stat --json $N | $PYTHON -c 'import json,sys; print(json.load(sys.stdin)[\"generation\"])'"

# a process attached across the restart: the segment must not be replaced
"$top_builddir/tests/cli/snapshot-holder" "$N" >"$T_TMP/holder.out" 2>&1 &
HOLDER=$!
wait_for "$T_TMP/holder.out" '^ready ' || diag "snapshot-holder: $(cat "$T_TMP/holder.out")"
rm "$E/$N.d/10-base.json"
shmctl set "$N" app.name=by-hand >/dev/null
echo '{"app.level": 4}' >"$E/$N.d/20-site.json"
unit_cmd ExecStart
pass "ExecStart again (a restart): exit 0, the segment kept" \
	test "$RC" = 0 -a "$(echo "$OUT" | head -n 1)" = "segment '$N' exists, of that schema: kept"
t_out "... the files applied again" 4 shmctl get "$N" app.level
t_out "... a value set by hand that no file names is kept" by-hand shmctl get "$N" app.name
run shmctl stat "$N" --json
pass "... the attached process is still attached to it" jcheck "$T_TMP/out" \
	"$HOLDER in j['attached'] and not j['retired']"
echo '{"app.level": 5}' >"$E/$N.d/30-more.json"
unit_cmd ExecReload
pass "ExecReload: exit 0" test "$RC" = 0
t_out "... a new file applied" 5 shmctl get "$N" app.level
kill "$HOLDER" 2>/dev/null
wait "$HOLDER" 2>/dev/null

printf 'format: 1\noptions:\n  app.level:\n    type: int\n    default: 9\n' >"$E/$N.yaml"
unit_cmd ExecStart
pass "ExecStart after NAME.yaml changed: the unit fails, one line" \
	test "$RC" = 1 -a "$(wc -l <"$T_TMP/err")" = 1
t_out "... the segment is kept as it was" 5 shmctl get "$N" app.level
shmctl rm "$N"
printf "$SCHEMA" >"$E/$N.yaml"
echo '{"app.level": "x"}' >"$E/$N.d/40-bad.json"
unit_cmd ExecStart
pass "ExecStart with a bad file: the unit fails naming it" test "$RC" = 1 -a -n "$(grep -F "$N.d/40-bad.json" "$T_TMP/err")"
pass "... and leaves no segment" test ! -e "/dev/shm/shmcfg.$N"

t_done
