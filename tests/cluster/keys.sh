#!/bin/sh
# SPDX-License-Identifier: MIT
# The cluster's key layout is declared once (issue 25): tools/cluster-keys.h
# (and, for the value folders, include/shmcfg.h.in). No other source of
# shmctl or shmcfg-sync spells a key of the layout as a string literal; a
# comment may name them. Needs no etcd. Prints TAP.
set -u
: "${top_srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}"
cd "$top_srcdir" || exit 99
echo "1..2"
# a literal that is a key, a folder of keys, the prefix or the watch's end
pat='"(/shmcfg/v1|(opt|knob|audit|status|roster|schema)/|head"|opt0")'
hits=$(grep -nE "$pat" tools/*.c tools/*.h | grep -v '^tools/cluster-keys\.h:' |
	while IFS= read -r line; do
		# the line's code, without its comments
		code=$(printf '%s\n' "$line" | cut -d: -f3- | sed -E 's#/\*.*\*/##g; s#^[[:space:]]*(/\*|\*).*##')
		if printf '%s\n' "$code" | grep -qE "$pat"; then printf '%s\n' "$line"; fi
	done)
if [ -z "$hits" ]; then
	echo "ok 1 - no key of the cluster's layout spelled outside tools/cluster-keys.h"
else
	echo "not ok 1 - keys of the cluster's layout spelled outside tools/cluster-keys.h:"
	echo "$hits" | sed 's/^/#   /'
fi
# and cluster-keys.h names every folder doc/cluster.md's table lists
missing=
for k in opt/ knob/ head audit/ status/ roster/ schema/; do
	grep -q "\"$k\"" tools/cluster-keys.h include/shmcfg.h.in || missing="$missing $k"
done
if [ -z "$missing" ]; then
	echo "ok 2 - tools/cluster-keys.h (or the public header) declares every folder"
else
	echo "not ok 2 - not declared:$missing"
fi
[ -z "$hits" ] && [ -z "$missing" ]
