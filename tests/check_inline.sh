#!/bin/sh
# SPDX-License-Identifier: MIT
# The inline getters, and the accessors and batched read that shmctl header
# generates, compile to a straight line with no call, no locked instruction,
# no fence and no syscall; their slow paths are cold and out of line. The
# header also compiles as C++. Prints TAP.
set -u
: "${top_srcdir:=.}" "${top_builddir:=.}" "${CC:=cc}" "${CXX:=c++}"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
echo "1..14"
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); echo "not ok $n - $1"; fails=1; }
fails=0

if ! $CC -O2 -std=gnu11 -I"$top_builddir/include" -I"$top_srcdir/include" \
	-c "$top_srcdir/tests/inline_read.c" -o "$tmp/r.o"; then
	notok "tests/inline_read.c compiles"; exit 1
fi
objdump -d --no-show-raw-insn "$tmp/r.o" > "$tmp/dis" || { notok "objdump"; exit 1; }
# the body of one function, without its .cold part
body() { awk -v f="<$1>:" '$2 == f { on = 1; next } /^[0-9a-f]+ </ { on = 0 } on' "$tmp/dis"; }
# an xchg is locked only with a memory operand: `xchg %ax,%ax` is a 2-byte
# nop that aligns a loop
for f in read_int read_bool read_float read_generation; do
	body "$f" > "$tmp/$f"
	if [ ! -s "$tmp/$f" ]; then
		notok "$f: found in the disassembly"
	elif grep -Eq '(call|lock|xchg.*\(|syscall|mfence|cmpxchg)' "$tmp/$f"; then
		notok "$f: no call, lock, fence or syscall in the straight line"
		sed 's/^/# /' "$tmp/$f"
	elif ! grep -Eq 'mov.*\(%' "$tmp/$f"; then
		notok "$f: loads from memory"
	else
		ok "$f: a straight line of loads, no call, lock, fence or syscall"
	fi
done
# the slow path is still reachable, from the cold part
if grep -A40 '<read_int.cold>:' "$tmp/dis" | grep -q 'call'; then
	ok "read_int.cold calls the slow path"
else
	notok "read_int.cold calls the slow path"
fi
# generated accessors: a header from tests/header_schema.yaml, by this tree's
# shmctl; a non-nullable int, bool and float, a nullable int, the batched read
gen="$tmp/gen"
mkdir "$gen"
if ! "$top_builddir/tools/shmctl" header --prefix hdr --strip app \
	--schema "$top_srcdir/tests/header_schema.yaml" -o "$gen/hdr.h"; then
	notok "shmctl header writes the accessors"; exit 1
fi
cat > "$gen/gen_read.c" <<'EOF'
#include "hdr.h"
int64_t gen_int(const shmcfg *h);
int64_t gen_int(const shmcfg *h) { return hdr_a(h); }
bool gen_bool(const shmcfg *h);
bool gen_bool(const shmcfg *h) { return hdr_odd(h); }
double gen_float(const shmcfg *h);
double gen_float(const shmcfg *h) { return hdr_ratio(h); }
int64_t gen_nullable(const shmcfg *h);
int64_t gen_nullable(const shmcfg *h)
{
	int64_t v;
	return hdr_limit(h, &v) == 0 ? v : -1;
}
int gen_batch(const shmcfg *h, struct hdr_values *v);
int gen_batch(const shmcfg *h, struct hdr_values *v) { return hdr_read(h, v); }
EOF
if ! $CC -O2 -std=gnu11 -I"$top_builddir/include" -I"$top_srcdir/include" -I"$gen" \
	-c "$gen/gen_read.c" -o "$gen/g.o"; then
	notok "the generated accessors compile"; exit 1
fi
objdump -dr --no-show-raw-insn "$gen/g.o" > "$tmp/gdis" || { notok "objdump"; exit 1; }
gbody() { awk -v f="<$1>:" '$2 == f { on = 1; next } /^[0-9a-f]+ </ { on = 0 } on' "$tmp/gdis"; }
# The straight line is the function from its entry to its first ret: the
# spin loop's retry and the slow path come after it (GCC leaves the call of
# a nullable accessor's cold helper there rather than in a .cold part), and
# every call after it goes to a cold helper in .text.unlikely.
for f in gen_int gen_bool gen_float gen_nullable gen_batch; do
	gbody "$f" > "$tmp/$f.all"
	awk '/^[[:space:]]*[0-9a-f]*: R_/ { next } { print } /\tret/ { exit }' "$tmp/$f.all" > "$tmp/$f"
	if [ ! -s "$tmp/$f" ]; then
		notok "generated $f: found in the disassembly"
	elif grep -Eq '(call|lock|xchg.*\(|syscall|mfence|cmpxchg)' "$tmp/$f"; then
		notok "generated $f: no call, lock, fence or syscall in the straight line"
		sed 's/^/# /' "$tmp/$f"
	elif ! grep -Eq 'mov.*\(%' "$tmp/$f"; then
		notok "generated $f: loads from memory"
	elif grep -A1 'call' "$tmp/$f.all" | grep -E 'R_X86_64' | grep -vq '\.text\.unlikely'; then
		notok "generated $f: calls only cold helpers"
		sed 's/^/# /' "$tmp/$f.all"
	else
		ok "generated $f: a straight line of loads, no call, lock, fence or syscall"
	fi
done
# the accessor of a non-nullable option reads the accessors' copy on its
# straight line at its constant distance from the handle, no pointer loaded
# first: app.a's block (handle 0: block 0) at SHMCFG__COPY_AT (0x11000), its
# seqlock twice and its word at 0x11008; never a cell's meta word (type and
# null are proven; a slot's cell 0 is at 0x40, its meta at 0x48) nor the
# view's `copy` (0x828, after the table of 256 slot addresses)
if grep -Eq '0x48\(%|0x828\(%' "$tmp/gen_int" || [ "$(grep -Ec 'mov +0x11000\(%rdi\)' "$tmp/gen_int")" != 2 ] ||
	[ "$(grep -Ec 'mov +0x11008\(%rdi\)' "$tmp/gen_int")" != 1 ]; then
	notok "generated gen_int: loads its block's seqlock, word and seqlock at the handle's SHMCFG__COPY_AT, no pointer, no meta word"
	sed 's/^/# /' "$tmp/gen_int"
else
	ok "generated gen_int: loads its block's seqlock, word and seqlock at the handle's SHMCFG__COPY_AT, no pointer, no meta word"
fi
# the slow paths are out of line, in .text.unlikely, and call the library
cold=$(awk '/^Disassembly of section .text.unlikely/ { on = 1 } /^Disassembly of section / && !/unlikely/ { on = 0 } on' "$tmp/gdis")
if printf '%s\n' "$cold" | grep -Eq 'R_X86_64_PLT32[[:space:]]+shmcfg__proven_slow_at-' &&
	printf '%s\n' "$cold" | grep -Eq 'R_X86_64_PLT32[[:space:]]+shmcfg__get_slow_n-' &&
	gbody gen_int | grep -q 'R_X86_64_PC32[[:space:]]*\.text\.unlikely' &&
	gbody gen_nullable | grep -q 'R_X86_64_PC32[[:space:]]*\.text\.unlikely'; then
	ok "the accessors and the batched read reach their slow paths in .text.unlikely"
elif ! grep -q 'R_X86_64' "$tmp/gdis"; then
	ok "the accessors and the batched read reach their slow paths # SKIP not x86-64"
else
	notok "the accessors and the batched read reach their slow paths in .text.unlikely"
	sed 's/^/# /' "$tmp/gdis" | head -80
fi
# the header is valid C++
if printf '#include "shmcfg.h"\nint main() { shmcfg *h = 0; int64_t v; return shmcfg_get_int(h, 0, &v) > 99; }\n' > "$tmp/t.cpp" &&
	$CXX -std=c++11 -Wall -Wextra -I"$top_builddir/include" -I"$top_srcdir/include" -c "$tmp/t.cpp" -o "$tmp/t.o"; then
	ok "shmcfg.h compiles as C++"
else
	notok "shmcfg.h compiles as C++"
fi
# the macros a program expands declare no name its own globals would shadow
cat > "$tmp/shadow.c" <<'EOF_C'
#include "shmcfg.h"
int h, ret, bits, r, v, def;
#define APP_OPTIONS(X) \
	X(app_n, "app.n", INT, .def = "4") \
	X(app_on, "app.on", BOOL) \
	X(app_s, "app.s", STR)
SHMCFG_DEFINE_OPTIONS(app, APP_OPTIONS)
int use(const shmcfg *p);
int use(const shmcfg *p) { return (int)app_n(p) + app_on(p) + app_verify(p); }
EOF_C
if $CC -std=gnu11 -Wall -Wextra -Wshadow -Werror -I"$top_builddir/include" -I"$top_srcdir/include" \
	-c "$tmp/shadow.c" -o "$tmp/shadow.o" 2> "$tmp/shadow.err"; then
	ok "SHMCFG_DEFINE_OPTIONS shadows no global of the program (-Wshadow)"
else
	notok "SHMCFG_DEFINE_OPTIONS shadows no global of the program (-Wshadow)"
	sed 's/^/# /' "$tmp/shadow.err" | head -20
fi
# (what the library exports: tests/check_exports.sh)
exit $fails
