#!/bin/sh
# SPDX-License-Identifier: MIT
# lib/libshmcfg.sym is the one list of the library's exported symbols: the
# library exports exactly its names, each in the version node that lists it;
# include/shmcfg.h.in declares SHMCFG_EXPORT exactly those; the Debian
# symbols file has a line for each node; and every file that names the
# soname or the library package names the one configure derives from the
# libtool version. Prints TAP.
#
# Adding an exported function: declare it SHMCFG_EXPORT in
# include/shmcfg.h.in and add its name to lib/libshmcfg.sym, in the node of
# the release under way (a new node also gets a line in
# debian/libshmcfg$SOVERSION.symbols).
set -u
: "${top_srcdir:=.}" "${top_builddir:=.}"
LC_ALL=C
export LC_ALL
so="$top_builddir/lib/.libs/libshmcfg.so"
sym="$top_srcdir/lib/libshmcfg.sym"
list="$sym"
# the soname's number, as configure derived it from the libtool version
soversion=$(sed -n 's/^SHMCFG_SOVERSION = //p' "$top_builddir/Makefile")
header="$top_srcdir/include/shmcfg.h.in"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
echo "1..5"
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
# name@@NODE of every name in the global: part of a node of the script
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
sed 's/@@.*//' "$tmp/nodes" > "$tmp/list"

# 1. each symbol is in one node
sort "$tmp/list" | uniq -d > "$tmp/dups"
if [ -s "$tmp/list" ] && [ ! -s "$tmp/dups" ]; then
	ok "lib/libshmcfg.sym: each symbol in one node ($(wc -l < "$tmp/list") symbols)"
else
	notok "lib/libshmcfg.sym: each symbol in one node"
	[ -s "$tmp/dups" ] && echo "# in two nodes: $(words "$tmp/dups")"
fi

# 2. the library exports the list, no more, no less
sort -u "$tmp/list" > "$tmp/want"
comm -13 "$tmp/want" "$tmp/exported" > "$tmp/extra"
comm -23 "$tmp/want" "$tmp/exported" > "$tmp/missing"
if [ ! -s "$tmp/extra" ] && [ ! -s "$tmp/missing" ]; then
	ok "exported symbols = lib/libshmcfg.sym ($(wc -l < "$tmp/exported"))"
else
	msg="exported symbols differ from lib/libshmcfg.sym:"
	[ -s "$tmp/extra" ] && msg="$msg exported but not listed: $(words "$tmp/extra");"
	[ -s "$tmp/missing" ] && msg="$msg listed but not exported: $(words "$tmp/missing");"
	notok "${msg%;}"
	if [ -s "$tmp/extra" ]; then
		echo "# exported by $so but not in lib/libshmcfg.sym:"
		say "$tmp/extra"
		echo "#   a new API symbol: add it to lib/libshmcfg.sym (sorted) and to the"
		echo "#   node of the release under way in lib/libshmcfg.sym; anything else must"
		echo "#   not be exported (static, or without SHMCFG_EXPORT)"
	fi
	if [ -s "$tmp/missing" ]; then
		echo "# in lib/libshmcfg.sym but not exported by $so:"
		say "$tmp/missing"
		echo "#   a symbol missing from lib/libshmcfg.sym is local: add it to the node of"
		echo "#   the release under way; a symbol removed from the API: remove it from"
		echo "#   lib/libshmcfg.sym (a released one may not be removed: see"
		echo "#   lib/libshmcfg.sym)"
	fi
fi

# 3. every symbol is in the version node of lib/libshmcfg.sym that lists it
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
cat "$header" "$top_srcdir"/include/shmcfg/*.h | grep -o 'SHMCFG_EXPORT[^;(]*' | sed 's/[[:space:]]*__attribute__$//' |
	grep -o 'shmcfg_[A-Za-z0-9_]*$' | sort -u > "$tmp/declared"
comm -23 "$tmp/declared" "$tmp/want" > "$tmp/undeclared_missing"
comm -13 "$tmp/declared" "$tmp/want" > "$tmp/unlisted_decl"
if [ ! -s "$tmp/undeclared_missing" ] && [ ! -s "$tmp/unlisted_decl" ]; then
	ok "include/shmcfg.h.in declares SHMCFG_EXPORT exactly the listed symbols ($(wc -l < "$tmp/declared"))"
else
	msg="include/shmcfg.h.in and lib/libshmcfg.sym differ:"
	[ -s "$tmp/undeclared_missing" ] && msg="$msg declared SHMCFG_EXPORT but not listed: $(words "$tmp/undeclared_missing");"
	[ -s "$tmp/unlisted_decl" ] && msg="$msg listed but not declared SHMCFG_EXPORT: $(words "$tmp/unlisted_decl");"
	notok "${msg%;}"
	[ -s "$tmp/undeclared_missing" ] &&
		echo "# add each to lib/libshmcfg.sym (sorted) and to the node of the release under way in lib/libshmcfg.sym"
	[ -s "$tmp/unlisted_decl" ] &&
		echo "# declare each SHMCFG_EXPORT in include/shmcfg.h.in, or remove it from lib/libshmcfg.sym"
fi
# 5. the Debian symbols file: the package of this soname, a line per node;
# and no file of the tree names another soname or library package
deb="$top_srcdir/debian/libshmcfg$soversion.symbols"
sed -n 's/^\(SHMCFG_[0-9.]*\) {.*/\1/p; s/^\(SHMCFG_[0-9.]*\)[[:space:]]*{[[:space:]]*$/\1/p' "$sym" | sort -u > "$tmp/nodenames"
if [ ! -d "$top_srcdir/debian" ]; then
	ok "the Debian symbols file # SKIP no debian/ here (a release tarball: make dist leaves it out)"
elif [ -z "$soversion" ] || [ ! -r "$deb" ]; then
	notok "debian/libshmcfg$soversion.symbols for the soname libshmcfg.so.$soversion (SHMCFG_SOVERSION in Makefile)"
else
	grep -o '(symver)SHMCFG_[0-9.]*' "$deb" | sed 's/(symver)//' | sort -u > "$tmp/debnodes"
	(cd "$top_srcdir" && git ls-files 2> /dev/null || find . -type f | sed 's,^\./,,') |
		grep -v '^debian/changelog$' > "$tmp/files"
	(cd "$top_srcdir" && while read -r f; do [ -f "$f" ] && grep -HoE 'libshmcfg(\.so\.|)[0-9]+\b' "$f"; done < "$tmp/files") |
		grep -vE ":libshmcfg(\.so\.)?$soversion\$" | sort -u > "$tmp/othersonames"
	if cmp -s "$tmp/nodenames" "$tmp/debnodes" && [ ! -s "$tmp/othersonames" ]; then
		ok "debian/libshmcfg$soversion.symbols has each node of lib/libshmcfg.sym; the tree names the soname .so.$soversion only"
	else
		notok "the soname .so.$soversion and its nodes, everywhere"
		comm -23 "$tmp/nodenames" "$tmp/debnodes" | sed 's/^/#   node missing from the Debian symbols file: /'
		comm -13 "$tmp/nodenames" "$tmp/debnodes" | sed 's/^/#   Debian symbols file names a node the script lacks: /'
		sed 's/^/#   another soname: /' "$tmp/othersonames"
	fi
fi
exit $fails
