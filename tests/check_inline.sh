#!/bin/sh
# The inline getters compile to a straight line with no call, no locked
# instruction, no fence and no syscall; their slow path is cold and out of
# line. The header also compiles as C++. Prints TAP.
set -u
: "${top_srcdir:=.}" "${top_builddir:=.}" "${CC:=cc}" "${CXX:=c++}"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
echo "1..6"
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
# the header is valid C++
if printf '#include "shmcfg.h"\nint main() { shmcfg *h = 0; int64_t v; return shmcfg_get_int(h, 0, &v) > 99; }\n' > "$tmp/t.cpp" &&
	$CXX -std=c++11 -Wall -Wextra -I"$top_builddir/include" -c "$tmp/t.cpp" -o "$tmp/t.o"; then
	ok "shmcfg.h compiles as C++"
else
	notok "shmcfg.h compiles as C++"
fi
# (what the library exports: tests/check_exports.sh)
exit $fails
