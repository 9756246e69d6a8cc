#!/bin/sh
# SPDX-License-Identifier: MIT
# shmctl header: the C header of accessors for a schema. Its output is the
# same from a schema file and from a segment of that schema, depends on
# nothing but the schema and the arguments, compiles as C and C++ without
# warnings, and is checked in as tests/bench/bench_schema.h for the bench's
# schema. Errors: no such segment or file, a --only that matches nothing,
# two options with one C name, usage errors. (tests/test_header.c runs the
# generated code against real segments; tests/check_inline.sh disassembles
# it.)
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/cli/lib.sh"

seg S fromfile
seg N nosuch
SCHEMA="$top_srcdir/tests/header_schema.yaml"
BENCH_SCHEMA="$top_srcdir/tests/bench/bench_schema.yaml"
: "${CC:=cc}" "${CXX:=c++}"

# the text without its second banner line, which names the source
strip_source() { sed '3d' "$1"; }

# --- from a file, from a segment ------------------------------------------------------
t_rc "header --schema FILE" 0 shmctl header --prefix hdr --strip app --schema "$SCHEMA"
cp "$T_TMP/out" "$T_TMP/file.h"
pass "(names the file in its banner)" grep -q 'from the schema file header_schema.yaml; do not edit' "$T_TMP/file.h"
run shmctl header --prefix hdr --strip app --schema "$SCHEMA"
pass "the same text on a second run" cmp -s "$T_TMP/out" "$T_TMP/file.h"

# a segment of the same schema, made with other sizes: the schema hash, and
# so the header, do not depend on them
shmctl create -q "$S" --schema "$SCHEMA" --slots 3 --readers 16 --size 1M
t_rc "header NAME" 0 shmctl header "$S" --prefix hdr --strip app
cp "$T_TMP/out" "$T_TMP/seg.h"
pass "(names the segment in its banner)" grep -q "from segment $S; do not edit" "$T_TMP/seg.h"
strip_source "$T_TMP/file.h" >"$T_TMP/file.body"
strip_source "$T_TMP/seg.h" >"$T_TMP/seg.body"
if cmp -s "$T_TMP/file.body" "$T_TMP/seg.body"; then
	ok "a segment's header is its schema file's"
else
	not_ok "a segment's header is its schema file's"
	diff "$T_TMP/file.body" "$T_TMP/seg.body" | head -20 | sed 's/^/#   /'
fi
H=$(sed -n 's/^ \* Schema hash \([0-9a-f]*\)\.$/\1/p' "$T_TMP/seg.h")
run shmctl stat "$S" --json
pass "the schema hash is the segment's" jcheck "$T_TMP/out" "j['schema_hash'] == '$H'"

t_rc "-o FILE" 0 shmctl header --prefix hdr --strip app --schema "$SCHEMA" -o "$T_TMP/o.h"
pass "(-o writes what stdout gets, and nothing on stdout)" sh -c "cmp -s '$T_TMP/o.h' '$T_TMP/file.h' && test ! -s '$T_TMP/out'"
t_errmatch "-o into a missing directory fails" 1 "^shmctl: $T_TMP/none/o.h: No such file or directory" \
	shmctl header --schema "$SCHEMA" -o "$T_TMP/none/o.h"
echo keep >"$T_TMP/keep.h"
mkfifo "$T_TMP/o.fifo"
ln -s "$T_TMP/o.h" "$T_TMP/o.link"
t_errmatch "-o onto a FIFO: refused, not opened, left a FIFO" 1 "^shmctl: $T_TMP/o.fifo: not a regular file \(a device, FIFO or socket\); not replaced\$" \
	timeout 20 $SHMCTL header --schema "$SCHEMA" -o "$T_TMP/o.fifo"
pass "(still a FIFO)" test -p "$T_TMP/o.fifo"
t_errmatch "-o onto a symbolic link: refused, left a link" 1 "^shmctl: $T_TMP/o.link: not a regular file \(a symbolic link\); not replaced\$" \
	shmctl header --schema "$SCHEMA" -o "$T_TMP/o.link"
pass "(still a link)" test -L "$T_TMP/o.link"
t_rc "a failed run leaves -o's file as it was" 1 shmctl header --schema "$T_TMP/missing.yaml" -o "$T_TMP/keep.h"
pass "(unchanged)" test "$(cat "$T_TMP/keep.h")" = keep

# no private segment is left behind: its name carries shmctl's pid
run sh -c 'echo $$ >"$1/pid"; exec $2 header --schema "$3" >/dev/null' sh "$T_TMP" "$SHMCTL" "$SCHEMA"
P=$(cat "$T_TMP/pid")
pass "no private segment left in /dev/shm" sh -c "test \$(ls /dev/shm | grep -c '^shmcfg.shmctl-header-$P-') = 0"

# --- the embedded default -------------------------------------------------------------
t_rc "header with neither NAME nor --schema: the embedded default" 0 shmctl header --prefix tc
pass "(says so)" grep -q 'from the embedded default schema; do not edit' "$T_TMP/out"
pass "(an accessor per bool and int option, none for str and set)" pyeval '
import re
acc = set(re.findall(r"^static inline \w+ (tc_\w+)\(const shmcfg \*h", a[0], re.M))
("tc_torch__dynamo_config_recompile_limit" in acc and "tc_torch_compiler_config_force_disable_caches" in acc and
 not any("job_id" in x or "reorderable" in x for x in acc))' "$OUT"

# --- what goes in ---------------------------------------------------------------------
t_rc "--only GLOB (repeated)" 0 shmctl header --prefix b --strip bench --only 'bench.x' --only 'bench.filler.a1*' \
	--schema "$BENCH_SCHEMA"
pass "(handles of the matched options only; struct fields of the scalars)" pyeval '
import re
h = re.findall(r"^\t(b_\w+)_opt = (\d+),", a[0], re.M)
f = re.findall(r"^\t(?:int64_t|bool|double) (\w+); /\*", a[0], re.M)
(h == [("b_x", "0"), ("b_filler_a10", "10"), ("b_filler_a11", "11"), ("b_filler_a12", "12"), ("b_filler_a13", "13"),
       ("b_filler_a14", "14"), ("b_filler_a15", "15")] and
 f == ["x", "filler_a10", "filler_a11", "filler_a14", "filler_a15"])' "$OUT"
t_errmatch "--only that matches nothing" 1 "^shmctl: --only 'bench.y\*' matches no option of the schema file bench_schema.yaml$" \
	shmctl header --only 'bench.x' --only 'bench.y*' --schema "$BENCH_SCHEMA"

cat >"$T_TMP/clash.yaml" <<'EOF'
format: 1
options:
  x.a_b:
    type: int
  x_a.b:
    type: bool
EOF
t_errmatch "two options with one C name: refused, naming both" 1 \
	"^shmctl: x.a_b and x_a.b would both define p_x_a_b(_opt)?: leave one out with --only" \
	shmctl header --prefix p --schema "$T_TMP/clash.yaml"
t_rc "(--only leaves one out)" 0 shmctl header --prefix p --schema "$T_TMP/clash.yaml" --only x.a_b
cat >"$T_TMP/field.yaml" <<'EOF'
format: 1
options:
  a.b:
    type: int
    nullable: true
  a.b_null:
    type: bool
  c.generation:
    type: float
EOF
t_errmatch "an option's field and another's null flag: refused" 1 \
	"^shmctl: a.b and a.b_null would both be field b_null of struct p_values" \
	shmctl header --prefix p --strip a --schema "$T_TMP/field.yaml" --only 'a.*'
t_errmatch "a field named generation: refused" 1 \
	"^shmctl: the header and c.generation would both be field generation of struct p_values" \
	shmctl header --prefix p --strip c --schema "$T_TMP/field.yaml" --only 'c.*'

# --- it compiles: C11 and C++11, every warning an error ------------------------------
INC="-I$top_builddir/include -I$top_srcdir/include -I$T_TMP"
shmctl header --prefix hdr --strip app --schema "$SCHEMA" -o "$T_TMP/hdr.h"
shmctl header --prefix tc -o "$T_TMP/tc.h"
cp "$top_srcdir/tests/bench/bench_schema.h" "$T_TMP/bench_schema.h"
cat >"$T_TMP/use.c" <<'EOF'
#include "hdr.h"
#include "tc.h"
#include "bench_schema.h"
int use(const shmcfg *h);
int use(const shmcfg *h)
{
	struct hdr_values v;
	struct tc_values t;
	struct bench_values b;
	int64_t lim = 0;
	return hdr_read(h, &v) + tc_read(h, &t) + bench_read(h, &b) + (int)hdr_a(h) + hdr_limit(h, &lim) +
	       (int)bench_x(h) + hdr_check(h) + (int)tc_torch__dynamo_config_recompile_limit(h);
}
EOF
run $CC -std=c11 -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Werror $INC \
	-c "$T_TMP/use.c" -o "$T_TMP/use.o"
pass "the headers compile as C11 without a warning" test "$RC" = 0
[ "$RC" = 0 ] || diag_run
if command -v "$CXX" >/dev/null 2>&1; then
	run $CXX -x c++ -std=c++11 -Wall -Wextra -Werror $INC -c "$T_TMP/use.c" -o "$T_TMP/usexx.o"
	pass "... and as C++11" test "$RC" = 0
	[ "$RC" = 0 ] || diag_run
else
	skip "no C++ compiler ($CXX)"
fi

# --- the bench's header is the generator's ---------------------------------------------
# (regenerate: the command below, run in the source tree)
run shmctl header --prefix bench --strip bench \
	--only bench.x --only bench.enabled --only bench.ratio --only 'bench.filler.a0[4-8]' \
	--schema "$BENCH_SCHEMA"
if [ "$RC" = 0 ] && cmp -s "$T_TMP/out" "$top_srcdir/tests/bench/bench_schema.h"; then
	ok "tests/bench/bench_schema.h is shmctl header's output for tests/bench/bench_schema.yaml"
else
	not_ok "tests/bench/bench_schema.h is shmctl header's output for tests/bench/bench_schema.yaml"
	diag "regenerate it in the source tree: tools/shmctl header --prefix bench --strip bench \\" \
		"  --only bench.x --only bench.enabled --only bench.ratio --only 'bench.filler.a0[4-8]' \\" \
		"  --schema tests/bench/bench_schema.yaml -o tests/bench/bench_schema.h"
	diff "$top_srcdir/tests/bench/bench_schema.h" "$T_TMP/out" | head -20 | sed 's/^/#   /'
fi

# --- a schema's text in the comments ------------------------------------------------------
# docs and defaults with what a terminal would act on (C1, a line separator,
# escapes), comment ends, and UTF-8 long enough to be cut and wrapped: blanks
# for the first, no comment ended early, no character cut in two
ACC=$("$PYTHON" -c 'print("\u00e9" * 200)')
cat >"$T_TMP/hostile.yaml" <<EOF
format: 1
options:
  h.a:
    type: int
    default: 2
    doc: "one\x9b[31m two\u2028three */ four\e]0;t\a five"
  h.b:
    type: int
    default: 1
    doc: "$ACC"
EOF
run shmctl header --prefix hh --schema "$T_TMP/hostile.yaml"
pass "header of a schema with hostile docs: exit 0" test "$RC" = 0
cp "$T_TMP/out" "$T_TMP/hh.h"
pass "... its text is safe on a terminal (and valid UTF-8; tabs indent its code)" termsafe "$T_TMP/hh.h" tabs
pass "... the controls blanked, the comment ends broken" pyeval '
"one [31m two three * / four ]0;t  five" in a[0] and "\n * " + "\u00e9" * 36 + "\n" in a[0]' "$(cat "$T_TMP/hh.h")"
printf '#include "hh.h"\nint use_hh(const shmcfg *h);\nint use_hh(const shmcfg *h) { return (int)hh_h_b(h); }\n' >"$T_TMP/use_hh.c"
run $CC -std=c11 -Wall -Wextra -Wpedantic -Werror $INC -c "$T_TMP/use_hh.c" -o "$T_TMP/use_hh.o"
pass "... and compiles as C11 without a warning" test "$RC" = 0

# --- errors ------------------------------------------------------------------------------
t_err "no such segment" 1 "shmctl: no such segment '$N'" shmctl header "$N"
t_errmatch "no such schema file" 1 "^shmctl: $T_TMP/missing.yaml: No such file or directory" \
	shmctl header --schema "$T_TMP/missing.yaml"
printf 'format: 1\noptions:\n  a.b:\n    type: nope\n' >"$T_TMP/bad.yaml"
t_errmatch "a bad schema file: the library's reason, with the line" 1 "^shmctl: .*bad.yaml:4: " \
	shmctl header --schema "$T_TMP/bad.yaml"
t_usage "NAME and --schema" shmctl header "$S" --schema "$SCHEMA"
t_usage "two NAMEs" shmctl header "$S" "$S"
t_usage "--prefix that is not an identifier" shmctl header --prefix 9x
t_usage "--prefix without a value" shmctl header --prefix
t_errmatch "an unknown flag" 2 "^shmctl: header: unknown option '--json'" shmctl header --json
t_done
