# SPDX-License-Identifier: MIT
# Helpers of the shmctl shell tests (POSIX sh), sourced by tests/cli/*.sh.
#
# Each test prints TAP: "ok N - what", "not ok N - what" with the command's
# output as "#" diagnostics, and the plan "1..N" at the end. JSON output is
# checked by parsing it with python3, never by grep.
#
# The binary: $top_builddir/tools/shmctl, or rather the program that libtool
# wrapper runs (tools/.libs/shmctl with the library of this build on
# LD_LIBRARY_PATH, as the wrapper sets it): the wrapper costs a shell and a
# few seds per call, about 30 ms, most of these tests' time. SHMCTL may name
# another command, e.g. to run every call under valgrind:
#   SHMCTL="valgrind -q --leak-check=full --error-exitcode=99 tools/.libs/shmctl"

: "${top_srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${top_builddir:=$top_srcdir}"
if [ -z "${SHMCTL:-}" ] && [ -x "$top_builddir/tools/.libs/shmctl" ] && [ -d "$top_builddir/lib/.libs" ]; then
	SHMCTL=$top_builddir/tools/.libs/shmctl
	LD_LIBRARY_PATH=$top_builddir/lib/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	export LD_LIBRARY_PATH
fi
: "${SHMCTL:=$top_builddir/tools/shmctl}"
PYTHON=${PYTHON3:-python3}

T_NUM=0
T_FAILED=0
T_TMP=$(mktemp -d "${TMPDIR:-/tmp}/shmctl-test.XXXXXX") || exit 99
T_SEGS=""

if ! command -v "$PYTHON" >/dev/null 2>&1; then
	echo "1..0 # SKIP python3 is needed to check JSON output"
	exit 0
fi
# The interpreter itself, not a wrapper that finds it (a pyenv shim costs a
# shell and 0.2 s of CPU a call): the checks below run it dozens of times.
PYTHON=$("$PYTHON" -c 'import sys; print(sys.executable)' 2>/dev/null) || PYTHON=${PYTHON3:-python3}

# Segments created by the test, removed at exit: seg VAR SUFFIX sets VAR to
# a unique name.
seg() {
	eval "$1=cli-\$\$-$2"
	eval "T_SEGS=\"\$T_SEGS \$$1\""
}

t_cleanup() {
	for s in $T_SEGS; do
		$SHMCTL rm -f "$s" >/dev/null 2>&1
	done
	rm -rf "$T_TMP"
}
trap t_cleanup EXIT
trap 'exit 130' INT TERM HUP # a hangup (make's job killed) cleans up too

shmctl() {
	$SHMCTL "$@"
}

# run CMD...: OUT, ERR (text), RC; also $T_TMP/out, $T_TMP/err.
run() {
	"$@" >"$T_TMP/out" 2>"$T_TMP/err"
	RC=$?
	OUT=$(cat "$T_TMP/out")
	ERR=$(cat "$T_TMP/err")
}

ok() {
	T_NUM=$((T_NUM + 1))
	echo "ok $T_NUM - $*"
}

not_ok() {
	T_NUM=$((T_NUM + 1))
	T_FAILED=1
	echo "not ok $T_NUM - $*"
}

skip() {
	T_NUM=$((T_NUM + 1))
	echo "ok $T_NUM # SKIP $*"
}

diag() {
	printf '%s\n' "$@" | sed 's/^/#   /'
}

# The last run, as diagnostics.
diag_run() {
	echo "#   exit status: $RC"
	[ -s "$T_TMP/out" ] && { echo "#   stdout:"; sed 's/^/#     /' "$T_TMP/out" | head -40; }
	[ -s "$T_TMP/err" ] && { echo "#   stderr:"; sed 's/^/#     /' "$T_TMP/err" | head -20; }
	return 0
}

# wait_for FILE ERE: until a line of FILE matches ERE, at most 10 s.
wait_for() {
	_n=0
	while [ $_n -lt 200 ]; do
		grep -Eq -- "$2" "$1" 2>/dev/null && return 0
		sleep 0.05
		_n=$((_n + 1))
	done
	return 1
}

# wait_idle PID: until process PID sleeps in a futex wait, at most 10 s.
# For shmctl watch after a commit has returned, that means it has read that
# commit: the commit's wake made it runnable, and its wait sleeps only once
# the generation it last read is the current one (a filtered watch prints
# nothing for a commit it skips: this is how a test knows it went by).
wait_idle() {
	_n=0
	while [ $_n -lt 200 ]; do
		[ "$(cut -d' ' -f3 "/proc/$1/stat" 2>/dev/null)" = S ] &&
			grep -q futex "/proc/$1/wchan" 2>/dev/null && return 0
		sleep 0.05
		_n=$((_n + 1))
	done
	return 1
}

# int_options PREFIX FIRST LAST: int options PREFIX.oFIRST..PREFIX.oLAST
# (3 digits, default 0) of a schema file's "options:" mapping, on stdout.
int_options() {
	_i=$2
	while [ $_i -le "$3" ]; do
		printf '  %s.o%03d:\n    type: int\n    default: 0\n' "$1" $_i
		_i=$((_i + 1))
	done
}

# pass DESC CONDITION-COMMAND...: ok if the command succeeds.
pass() {
	_d=$1
	shift
	if "$@"; then ok "$_d"; else not_ok "$_d"; diag_run; fi
}

# t_rc DESC RC CMD...: exit status is RC.
t_rc() {
	_d=$1 _want=$2
	shift 2
	run "$@"
	if [ "$RC" = "$_want" ]; then ok "$_d"; else not_ok "$_d (want exit $_want)"; diag_run; fi
}

# t_out DESC EXPECTED CMD...: exit 0 and stdout exactly EXPECTED.
t_out() {
	_d=$1 _want=$2
	shift 2
	run "$@"
	if [ "$RC" = 0 ] && [ "$OUT" = "$_want" ]; then
		ok "$_d"
	else
		not_ok "$_d"
		diag "expected stdout:" "$_want"
		diag_run
	fi
}

# t_err DESC RC EXPECTED-STDERR CMD...: exit RC, stdout empty, stderr exactly
# EXPECTED (one line, unless EXPECTED has several).
t_err() {
	_d=$1 _want=$2 _msg=$3
	shift 3
	run "$@"
	if [ "$RC" = "$_want" ] && [ -z "$OUT" ] && [ "$ERR" = "$_msg" ]; then
		ok "$_d"
	else
		not_ok "$_d (want exit $_want)"
		diag "expected stderr:" "$_msg"
		diag_run
	fi
}

# t_errmatch DESC RC ERE CMD...: exit RC, nothing on stdout, exactly one line
# on stderr, starting with "shmctl: " and matching the extended regex ERE.
t_errmatch() {
	_d=$1 _want=$2 _re=$3
	shift 3
	run "$@"
	_lines=$(wc -l <"$T_TMP/err")
	if [ "$RC" = "$_want" ] && [ -z "$OUT" ] && [ "$_lines" -eq 1 ] &&
		grep -Eq "^shmctl: " "$T_TMP/err" && grep -Eq -- "$_re" "$T_TMP/err"; then
		ok "$_d"
	else
		not_ok "$_d (want exit $_want, one line matching /$_re/)"
		diag_run
	fi
}

# t_usage DESC CMD...: a usage error: exit 2, nothing on stdout, a message
# and the usage on stderr.
t_usage() {
	_d=$1
	shift
	run "$@"
	if [ "$RC" = 2 ] && [ -z "$OUT" ] && grep -q '^shmctl: ' "$T_TMP/err" && grep -qi 'usage' "$T_TMP/err"; then
		ok "$_d"
	else
		not_ok "$_d (want exit 2 and a usage message)"
		diag_run
	fi
}

# A check is Python source: statements, then an expression that must be
# true (a multi-line expression may go without parentheses when it is all).
cat >"$T_TMP/check.py" <<'EOF'
import ast, json, sys, textwrap

def check(src, env):
    src = textwrap.dedent(src).strip()
    try:
        tree = ast.parse(src)
    except SyntaxError:
        tree = ast.parse("(" + src + ")")
    last = tree.body.pop()
    if not isinstance(last, ast.Expr):
        raise SyntaxError("a check must end in an expression")
    exec(compile(tree, "<check>", "exec"), env)
    return eval(compile(ast.Expression(last.value), "<check>", "eval"), env)

mode, src = sys.argv[1], sys.argv[2]
env = {"json": json, "ast": ast}
if mode == "json":
    try:
        with open(sys.argv[3]) as f:
            env["j"] = json.load(f)
    except Exception as e:
        print("#   not JSON: %s" % e)
        sys.exit(1)
else:
    env["a"] = sys.argv[3:]
try:
    good = check(src, env)
except Exception as e:
    print("#   check raised %r" % e)
    good = False
if not good:
    print("#   check failed:")
    for line in textwrap.dedent(src).strip().splitlines():
        print("#     " + line)
    if mode == "json":
        print("#   JSON: %s" % json.dumps(env.get("j"))[:800])
    sys.exit(1)
EOF

# jcheck FILE CHECK: python3 parses FILE as JSON into j; CHECK must hold.
# (-S: a check needs the standard library only, and site's imports cost
# more than the check)
jcheck() {
	"$PYTHON" -S "$T_TMP/check.py" json "$2" "$1"
}

# termsafe FILE [tabs]: FILE's bytes are safe on a terminal (tools/termsafe.h):
# valid UTF-8 without C0 controls (but newlines, and tabs if asked), DEL, C1
# controls (U+009B is CSI), U+2028 or U+2029, bidirectional controls and
# invisible spaces (tools/termsafe.h).
termsafe() {
	"$PYTHON" -S -c '
import re, sys
try:
    t = open(sys.argv[1], "rb").read().decode("utf-8")
except UnicodeDecodeError as e:
    sys.exit("#   not UTF-8: %s" % e)
if sys.argv[2:] == ["tabs"]:
    t = t.replace("\t", " ")
bad = re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u061c\u200b\u200e\u200f\u202a-\u202e\u2060\u2066-\u2069\ufeff]", t)
sys.exit("#   unsafe character %r at %d" % (bad.group(), bad.start()) if bad else 0)' "$@"
}

# t_json DESC EXPR CMD...: exit 0 and stdout is JSON for which EXPR holds.
t_json() {
	_d=$1 _expr=$2
	shift 2
	run "$@"
	if [ "$RC" = 0 ] && jcheck "$T_TMP/out" "$_expr"; then
		ok "$_d"
	else
		not_ok "$_d"
		diag_run
	fi
}

# pyeval CHECK ARGS...: a check over a = [ARGS...].
pyeval() {
	_e=$1
	shift
	"$PYTHON" -S "$T_TMP/check.py" args "$_e" "$@"
}

t_done() {
	echo "1..$T_NUM"
	exit "$T_FAILED"
}
