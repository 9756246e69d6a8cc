#!/bin/sh
# SPDX-License-Identifier: MIT
# The operator's habits (issue 14): a mistyped command or flag suggests the
# closest (exit 2, one line); global flags before or after the command;
# durations (500ms, 5s, 2m, 1h, seconds) wherever a time is taken; watch NAME
# OPTION... shows only the commits that touch those options; the bash
# completion completes values (bools, choices, none); names resolve as the
# library does (shmcfg_resolve).
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/cli/lib.sh"

seg S habits
seg E envforced
COMPLETION=$top_srcdir/tools/shmctl.bash-completion

# a small schema with choices and a nullable string, and 30 options more
# than one commit record lists (SHMCFG_LOG_IDS = 20)
{
	cat <<'EOF'
format: 1
options:
  app.fast:
    type: bool
    default: false
  app.level:
    type: int
    default: 1
  app.lvl:
    type: int
    alias: app.level
  app.mode:
    type: str
    default: "auto"
    choices: ["auto", "on", "off"]
  app.label:
    type: str
    nullable: true
  app.count:
    type: int
    default: 4
  app.forced:
    type: int
    default: 0
    env_force: HABITS_FORCED
EOF
	int_options big 0 29
} >"$T_TMP/schema.yaml"
run shmctl create -q --schema "$T_TMP/schema.yaml" "$S"
pass "create" test "$RC" = 0

# --- did you mean: commands and flags, one line, exit 2 ------------------------------
t_err "an unknown command suggests the closest" 2 "shmctl: unknown command 'shw'; did you mean 'show'?" shmctl shw "$S"
t_err "... swapped letters too" 2 "shmctl: unknown command 'sohw'; did you mean 'show'?" shmctl sohw "$S"
t_err "... and after help" 2 "shmctl: unknown command 'stta'; did you mean 'stat'?" shmctl help stta
t_err "an unknown command with nothing close: no help dump" 2 \
	"shmctl: unknown command 'frobnicate' (see 'shmctl --help')" shmctl frobnicate
t_err "an unknown flag of a command suggests its closest flag" 2 \
	"shmctl: show: unknown option '--jsno'; did you mean '--json'?" shmctl show "$S" --jsno
t_err "... with a value given to it" 2 \
	"shmctl: watch: unknown option '--timout=5s'; did you mean '--timeout'?" shmctl watch "$S" --timout=5s
t_err "an unknown global flag suggests the closest global flag" 2 \
	"shmctl: unknown option '--colr'; did you mean '--color'?" shmctl --colr show "$S"
t_err "an unknown flag with nothing close" 2 \
	"shmctl: stat: unknown option '--frobnicate' (see 'shmctl stat --help')" shmctl stat "$S" --frobnicate
t_err "a flag given a value it takes none" 2 "shmctl: hash: option '--json' takes no value" shmctl hash "$S" --json=yes
t_err "cluster: a mistyped subcommand" 2 "shmctl: cluster: unknown subcommand 'stauts'; did you mean 'status'?" \
	shmctl cluster stauts "$S"

# --- global flags before or after the command -----------------------------------------
ESC=$(printf '\033')
run shmctl show "$S" app.level --color=always
pass "--color=always after the command colours" test "$RC" = 0 -a -n "$(printf '%s' "$OUT" | grep "$ESC\[")"
run shmctl --color=always show "$S" app.level
pass "--color=always before it, as ever" test "$RC" = 0 -a -n "$(printf '%s' "$OUT" | grep "$ESC\[")"
run shmctl --color=always show "$S" app.level --color=never
pass "the last --color wins" test "$RC" = 0 -a -z "$(printf '%s' "$OUT" | grep "$ESC")"
t_err "--color after the command: a bad value" 2 "shmctl: --color takes auto, always or never, not 'sometimes'" \
	shmctl get "$S" app.level --color=sometimes
t_out "--json before the command is the command's --json" '"auto"' shmctl --json get "$S" app.mode
t_json "... for a command printing an object" 'j["generation"] == 1 and len(j["config_hash"]) == 32' \
	shmctl --json hash "$S"
t_out "--owner before the command (the segment's owner)" 1 shmctl --owner "$(id -u)" get "$S" app.level
t_errmatch "--owner before the command: a bad user" 1 "^shmctl: no such user 'no-such-user-x'" \
	shmctl --owner no-such-user-x get "$S" app.level

# --- durations ----------------------------------------------------------------------
# watch --timeout with nothing committed: exit 0 once the time is up
for d in 300ms 0.3s 0.005m 0.0001h 0.3 .3; do
	run shmctl watch -q "$S" --timeout "$d"
	pass "watch --timeout $d: exit 0, nothing printed" test "$RC" = 0 -a -z "$OUT" -a -z "$ERR"
done
START=$(date +%s%N)
run shmctl watch -q "$S" --timeout 1500ms
END=$(date +%s%N)
pass "--timeout 1500ms lasts 1.5 s (not 1500 s, not 0)" \
	test "$RC" = 0 -a $(((END - START) / 1000000)) -ge 1400 -a $(((END - START) / 1000000)) -lt 30000
for d in abc 5x 5S -1 "1.5 s" "" 1e9 inf nan 0x10 5ms5 2d; do
	t_err "watch --timeout '$d': refused naming the flag and the text" 2 \
		"shmctl: watch: --timeout: bad duration '$d' (give 500ms, 5s, 2m, 1h or seconds)" \
		shmctl watch "$S" --timeout "$d"
done
t_err "cluster --wait=: the same parser" 2 \
	"shmctl: cluster set: --wait: bad duration '3sec' (give 500ms, 5s, 2m, 1h or seconds)" \
	shmctl cluster set "$S" app.level=2 --wait=3sec --endpoints http://127.0.0.1:9

# --- watch NAME OPTION... -------------------------------------------------------------
GEN0=$(shmctl stat "$S" --json | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["generation"])')
$SHMCTL watch "$S" level big.o029 --count 2 --timeout 30 --json >"$T_TMP/w1" 2>"$T_TMP/w1.err" &
WPID=$!
pass "watch NAME OPTION...: says it watches" wait_for "$T_TMP/w1.err" "^shmctl: watching '$S' from generation $GEN0\$"
# each commit after the watcher printed (or skipped) the one before: a
# watcher woken once for several commits judges them together
run shmctl set -q "$S" app.mode=on
wait_idle "$WPID" || not_ok "the watcher read the commit"
run shmctl set -q "$S" app.count=5 app.mode=off
wait_idle "$WPID" || not_ok "the watcher read the commit"
run shmctl set -q "$S" app.lvl=7 app.mode=auto # through the alias
wait_for "$T_TMP/w1" '"generation"'
# 25 options: the record lists 20 of them; none is watched
ARGS=$(i=0; while [ $i -lt 25 ]; do printf 'big.o%03d=1 ' $i; i=$((i + 1)); done)
# shellcheck disable=SC2086
run shmctl set -q "$S" $ARGS
wait_idle "$WPID" || not_ok "the watcher read the commit"
# 30 options, the watched one last: a record that lists 20 of 30
ARGS=$(i=0; while [ $i -lt 30 ]; do printf 'big.o%03d=2 ' $i; i=$((i + 1)); done)
# shellcheck disable=SC2086
run shmctl set -q "$S" $ARGS
wait $WPID
WRC=$?
pass "watch --count 2: exit 0 after the two commits that touch the options" test "$WRC" = 0
pass "only those two are shown, with only the watched options' changes" pyeval '
import json
l = [json.loads(x) for x in open(a[0]).read().splitlines()]
g = int(a[1])
(len(l) == 2 and l[0]["generation"] == g + 3 and l[1]["generation"] == g + 5 and
 [(c["name"], c["old"], c["new"]) for c in l[0]["changes"]] == [("app.level", 1, 7)] and
 [(c["name"], c["old"], c["new"]) for c in l[1]["changes"]] == [("big.o029", 0, 2)])' "$T_TMP/w1" "$GEN0"
run shmctl log "$S" --json
pass "watch --json names the committer's user and process as log --json does" pyeval '
import json
w = json.loads(open(a[0]).read().splitlines()[0])
e = [x for x in json.loads(a[1]) if x["generation"] == w["generation"]][0]
w["process"] and (w["user"], w["process"], w["pid"], w["uid"]) == (e["user"], e["process"], e["pid"], e["uid"])' \
	"$T_TMP/w1" "$OUT"

# a commit that changes a watched option's layer and not its value (a user
# value under env_force): the commit record says it touched the option
HABITS_FORCED=9 $SHMCTL create -q --schema "$T_TMP/schema.yaml" "$E"
$SHMCTL watch "$E" forced --count 1 --timeout 30 >"$T_TMP/w2" 2>"$T_TMP/w2.err" &
WPID=$!
wait_for "$T_TMP/w2.err" "^shmctl: watching"
run shmctl set -q "$E" app.level=3
wait_idle "$WPID" || not_ok "the watcher read the commit"
run shmctl set -q "$E" app.forced=5
wait $WPID
WRC=$?
pass "a layer-only change of the watched option is shown (\"no value changed\")" pyeval '
import re
l = open(a[0]).read().splitlines()
len(l) == 1 and re.fullmatch(r"generation 3  .*: no value changed", l[0]) is not None' "$T_TMP/w2"
pass "(exit 0)" test "$WRC" = 0
run shmctl log "$E"
pass "watch names the committer as log does (user, uid, process[pid])" pyeval '
w = open(a[0]).read().splitlines()[0]
h = [x for x in a[1].splitlines() if x.startswith("generation 3 ")][0]
"(uid " in h and w.startswith(h + ": ")' "$T_TMP/w2" "$OUT"

t_err "watch: an unknown option, suggested" 1 \
	"shmctl: no option 'levle' in segment '$S'; did you mean level?" shmctl watch "$S" levle --timeout 1
t_err "watch: a name that is only a middle part" 1 "shmctl: no option 'app' in segment '$S'" \
	shmctl watch "$S" app --timeout 1

# --- bash completion of values ----------------------------------------------------------
if ! command -v bash >/dev/null 2>&1; then
	skip "bash is needed for the completion tests"
else
	# complete LINE: COMPREPLY (one a line, sorted) of the completion
	# function for LINE (the cursor at its end), with the words split as
	# bash splits them (COMP_WORDBREAKS has "=" and ":").
	complete_line() {
		SHMCTL_BIN=$SHMCTL bash -c '
			. "$1"
			shmctl() { $SHMCTL_BIN "$@"; }
			COMP_LINE=$2
			COMP_POINT=${#COMP_LINE}
			read -ra COMP_WORDS <<<"${COMP_LINE//=/ = }"
			[[ $COMP_LINE == *[[:space:]=] ]] && COMP_WORDS+=("")
			COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
			_shmctl shmctl "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
			printf "%s\n" "${COMPREPLY[@]}" | sort' sh "$COMPLETION" "$1"
	}
	# t_complete DESC LINE EXPECTED: the completions of LINE, space-separated
	t_complete() {
		_got=$(complete_line "$2" 2>"$T_TMP/cerr" | tr '\n' ' ' | sed 's/ $//')
		if [ "$_got" = "$3" ] && [ ! -s "$T_TMP/cerr" ]; then
			ok "$1"
		else
			not_ok "$1"
			diag "line: $2" "expected: $3" "got: $_got"
			sed 's/^/#   stderr: /' "$T_TMP/cerr"
		fi
	}
	# the completion runs `shmctl` by the first word of the line
	mkdir -p "$T_TMP/bin"
	printf '#!/bin/sh\nexec %s "$@"\n' "$SHMCTL" >"$T_TMP/bin/shmctl"
	chmod +x "$T_TMP/bin/shmctl"
	PATH=$T_TMP/bin:$PATH
	export PATH

	t_complete "set: a bool's values" "shmctl set $S fast=" "false true"
	t_complete "set: a bool, capitalised once a capital is typed" "shmctl set $S fast=T" "True"
	t_complete "set: a bool, a lowercase start" "shmctl set $S app.fast=f" "false"
	t_complete "set: the choices of a choice option" "shmctl set $S mode=" "auto off on"
	t_complete "set: choices, filtered by what is typed" "shmctl set $S app.mode=o" "off on"
	t_complete "set: none for a nullable option" "shmctl set $S label=" "none"
	t_complete "set: nothing to offer for a plain int" "shmctl set $S count=" ""
	t_complete "set: through an alias, the target's values (none here)" "shmctl set $S lvl=" ""
	t_complete "set: an unknown option offers nothing, says nothing" "shmctl set $S nosuch=" ""
	t_complete "set: a second assignment" "shmctl set $S fast=true mode=a" "auto"
	t_complete "cluster set: the values too" "shmctl cluster set $S mode=of" "off"
	t_complete "set with global flags first" "shmctl --color=never --owner $(id -un) set $S mode=au" "auto"
	t_complete "a mistyped-command start completes commands" "shmctl wa" "watch"
	t_complete "watch NAME: option names" "shmctl watch $S app.mo" "app.mode"
	t_complete "global flags" "shmctl --j" "--json"
	# flags and their arguments: from the command table (shmctl __complete)
	t_complete "a command's flags" "shmctl create x --lo" "--load --load-dir"
	t_complete "a flag's argument: its words" "shmctl stat $S --format p" "prometheus"
	t_complete "... by its short name" "shmctl diff $S -f " "json python shell"
	t_complete "a flag's argument that is free text: nothing" "shmctl watch $S --count " ""
	t_complete "a flag's argument skipped when counting positionals" "shmctl get --generation 2 $S app.mo" "app.mode"
	t_complete "... by its short name" "shmctl show -G 2 $S app.mo" "app.mode"
	t_complete "a flag without an argument is not skipped" "shmctl reset --knob $S app.mo" "app.mode"
	t_complete "a hidden flag is not offered" "shmctl show $S --na" ""
	t_complete "--owner of a command that attaches" "shmctl hash $S --ow" "--owner"
	t_complete "(not of one that does not)" "shmctl rm --ow" ""
	t_complete "schema: --json" "shmctl schema $S --j" "--json"
	t_complete "cluster: its subcommands" "shmctl cluster s" "set show status"
	t_complete "cluster SUB: its flags" "shmctl cluster set $S --wa" "--wait --wait=all"
	t_complete "cluster SUB: the connection flags" "shmctl cluster log $S --end" "--endpoints"
	t_complete "cluster rollback: no option names after NAME" "shmctl cluster rollback $S " ""
	t_complete "help: the commands" "shmctl help st" "stat"
	t_complete "header --schema: no segment after it" "shmctl header --schema x " ""
	t_complete "load: a file after NAME" "shmctl load $S $T_TMP/bi" "$T_TMP/bin"
	# /dev/shm is anyone's to write: a file name there is neither run
	# (compgen -W would expand it) nor put on the command line unless it
	# is a segment name
	_evil1="/dev/shm/shmcfg.${S}evil\$(echo\${IFS}PWNED>&2)"
	_evil2="/dev/shm/shmcfg.${S}evil;id"
	: >"$_evil1"
	: >"$_evil2"
	: >"/dev/shm/shmcfg.${S}evil-ok"
	t_complete "hostile names in /dev/shm: not run, not offered" "shmctl get ${S}ev" "${S}evil-ok"
	rm -f "$_evil1" "$_evil2" "/dev/shm/shmcfg.${S}evil-ok"
	# every command's flags as the completion offers them are those its
	# --help lists (both made from the table), --color and --help added
	_bad=""
	for c in $(shmctl __complete commands); do
		[ "$c" = help ] && continue
		subs=$(shmctl __complete commands "$c")
		for sub in ${subs:-""}; do
			_help=$(shmctl $c $sub --help | grep -o -- '^ *\(-., \)\?--[a-z=-]*' | sed 's/.*--/--/' | sort -u | tr '\n' ' ')
			_comp=$(complete_line "shmctl $c $sub $S --" | grep -v -- '^--colou\?r$' | sort -u | tr '\n' ' ')
			[ "$_help" = "$_comp" ] || _bad="$_bad [$c $sub: help: $_help completion: $_comp]"
		done
	done
	pass "every command: the completion offers the flags its --help lists" test -z "$_bad"
	[ -z "$_bad" ] || diag "$_bad"
	t_out "__complete flags: a flag, its argument and words" "--format words python shell json" \
		sh -c "$SHMCTL __complete flags diff | grep -- '^--format'"
	t_out "__complete args: the positionals" "segment assign..." shmctl __complete args cluster set
	t_rc "__complete of an unknown command: exit 2" 2 shmctl __complete flags frob
	pass "(and silently)" test -z "$OUT" -a -z "$ERR"
	# the helper the completion asks, directly
	t_out "__complete values: choices and none" "$(printf 'auto\non\noff')" shmctl __complete values "$S" mode
	t_rc "__complete values: an unknown option, exit 1" 1 shmctl __complete values "$S" nosuch
	pass "(and silently)" test -z "$OUT" -a -z "$ERR"
fi

t_done
