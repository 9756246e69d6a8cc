#!/bin/sh
# The library's exported symbols are exactly lib/libshmcfg.exports, each in
# the version node of lib/libshmcfg.sym that lists it, and every symbol
# include/shmcfg.h.in declares SHMCFG_EXPORT is among them. Prints TAP.
#
# Adding an exported function: declare it SHMCFG_EXPORT in
# include/shmcfg.h.in, add its name to lib/libshmcfg.exports (sorted, C
# locale) and to lib/libshmcfg.sym, in the node of the release under way.
set -u
: "${top_srcdir:=.}" "${top_builddir:=.}"
LC_ALL=C
export LC_ALL
so="$top_builddir/lib/.libs/libshmcfg.so"
list="$top_srcdir/lib/libshmcfg.exports"
sym="$top_srcdir/lib/libshmcfg.sym"
header="$top_srcdir/include/shmcfg.h.in"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
echo "1..4"
n=0
fails=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); echo "not ok $n - $1"; fails=1; }
# "# " before each line of a file, for the TAP log
say() { sed 's/^/#   /' "$1"; }
words() { tr '\n' ' ' < "$1" | sed 's/ $//'; }

if [ ! -r "$so" ] || ! nm -D --defined-only "$so" > "$tmp/nm"; then
	notok "nm -D --defined-only $so"
	exit 1
fi
# name@@VERSION of every defined function and object (the version node
# definitions are absolute symbols, type A: left out)
awk '$2 ~ /^[TDBRVWiu]$/ { print $3 }' "$tmp/nm" | sort -u > "$tmp/versioned"
sed 's/@.*//' "$tmp/versioned" | sort -u > "$tmp/exported"
grep -v '^[[:space:]]*$' "$list" > "$tmp/list"

# 1. the list is sorted and has each symbol once
if sort -uc "$tmp/list" 2> /dev/null; then
	ok "lib/libshmcfg.exports: sorted (C locale), one symbol per line ($(wc -l < "$tmp/list") symbols)"
else
	notok "lib/libshmcfg.exports: sorted (C locale), one symbol per line"
	sort "$tmp/list" | uniq -d > "$tmp/dups"
	[ -s "$tmp/dups" ] && echo "# listed twice: $(words "$tmp/dups")"
	echo "# sort it: LC_ALL=C sort -u -o lib/libshmcfg.exports lib/libshmcfg.exports"
fi

# 2. the library exports the list, no more, no less
sort -u "$tmp/list" > "$tmp/want"
comm -13 "$tmp/want" "$tmp/exported" > "$tmp/extra"
comm -23 "$tmp/want" "$tmp/exported" > "$tmp/missing"
if [ ! -s "$tmp/extra" ] && [ ! -s "$tmp/missing" ]; then
	ok "exported symbols = lib/libshmcfg.exports ($(wc -l < "$tmp/exported"))"
else
	msg="exported symbols differ from lib/libshmcfg.exports:"
	[ -s "$tmp/extra" ] && msg="$msg exported but not listed: $(words "$tmp/extra");"
	[ -s "$tmp/missing" ] && msg="$msg listed but not exported: $(words "$tmp/missing");"
	notok "${msg%;}"
	if [ -s "$tmp/extra" ]; then
		echo "# exported by $so but not in lib/libshmcfg.exports:"
		say "$tmp/extra"
		echo "#   a new API symbol: add it to lib/libshmcfg.exports (sorted) and to the"
		echo "#   node of the release under way in lib/libshmcfg.sym; anything else must"
		echo "#   not be exported (static, or without SHMCFG_EXPORT)"
	fi
	if [ -s "$tmp/missing" ]; then
		echo "# in lib/libshmcfg.exports but not exported by $so:"
		say "$tmp/missing"
		echo "#   a symbol missing from lib/libshmcfg.sym is local: add it to the node of"
		echo "#   the release under way; a symbol removed from the API: remove it from"
		echo "#   lib/libshmcfg.exports (a released one may not be removed: see"
		echo "#   lib/libshmcfg.sym)"
	fi
fi

# 3. every symbol is in the version node of lib/libshmcfg.sym that lists it:
# "name@@NODE" from the script (its global: lines, comments left out)
sed 's,/\*.*\*/,,g' "$sym" | awk '
	/\/\*/ { incomment = 1 }
	incomment { if (/\*\//) incomment = 0; next }
	/^[[:space:]]*[A-Za-z_][A-Za-z0-9_.]*[[:space:]]*\{/ { node = $1; sub(/\{.*/, "", node); scope = "global"; next }
	/^[[:space:]]*global:/ { scope = "global"; next }
	/^[[:space:]]*local:/ { scope = "local"; next }
	/^[[:space:]]*\}/ { node = ""; next }
	node != "" && scope == "global" {
		for (i = 1; i <= NF; i++) {
			s = $i; gsub(/;/, "", s)
			if (s != "") print s "@@" node
		}
	}' | sort -u > "$tmp/nodes"
comm -13 "$tmp/nodes" "$tmp/versioned" > "$tmp/badver"
if [ ! -s "$tmp/badver" ]; then
	ok "each exported symbol has the version of its node in lib/libshmcfg.sym"
else
	notok "symbols whose version is not the lib/libshmcfg.sym node that lists them: $(words "$tmp/badver")"
	echo "# library name@@version, then what lib/libshmcfg.sym says:"
	while read -r v; do
		s=${v%%@*}
		in=$(grep "^$s@@" "$tmp/nodes" | sed 's/.*@@//')
		echo "#   $v: ${in:-not listed in lib/libshmcfg.sym (matched by a wildcard?)}"
	done < "$tmp/badver"
fi

# 4. the header's SHMCFG_EXPORT declarations are exactly the list: the name
# right before the first '(' or ';' after SHMCFG_EXPORT (functions, and
# variables such as shmcfg__tls_patched, before their __attribute__); the
# #define lines name none
grep -o 'SHMCFG_EXPORT[^;(]*' "$header" | sed 's/[[:space:]]*__attribute__$//' |
	grep -o 'shmcfg_[A-Za-z0-9_]*$' | sort -u > "$tmp/declared"
comm -23 "$tmp/declared" "$tmp/want" > "$tmp/undeclared_missing"
comm -13 "$tmp/declared" "$tmp/want" > "$tmp/unlisted_decl"
if [ ! -s "$tmp/undeclared_missing" ] && [ ! -s "$tmp/unlisted_decl" ]; then
	ok "include/shmcfg.h.in declares SHMCFG_EXPORT exactly the listed symbols ($(wc -l < "$tmp/declared"))"
else
	msg="include/shmcfg.h.in and lib/libshmcfg.exports differ:"
	[ -s "$tmp/undeclared_missing" ] && msg="$msg declared SHMCFG_EXPORT but not listed: $(words "$tmp/undeclared_missing");"
	[ -s "$tmp/unlisted_decl" ] && msg="$msg listed but not declared SHMCFG_EXPORT: $(words "$tmp/unlisted_decl");"
	notok "${msg%;}"
	[ -s "$tmp/undeclared_missing" ] &&
		echo "# add each to lib/libshmcfg.exports (sorted) and to the node of the release under way in lib/libshmcfg.sym"
	[ -s "$tmp/unlisted_decl" ] &&
		echo "# declare each SHMCFG_EXPORT in include/shmcfg.h.in, or remove it from lib/libshmcfg.exports"
fi
exit $fails
