#!/bin/sh
# SPDX-License-Identifier: MIT
# make check leaves /dev/shm as it found it (tests/Makefile.inc):
#   shm-leftovers.sh before FILE   the names in /dev/shm, into FILE
#   shm-leftovers.sh after FILE    fail naming each object that is there now
#                                  and was not in FILE
# Another make check on this host at the same time shares /dev/shm: run one
# at a time, or each in its own (unshare --mount, a tmpfs on /dev/shm), or
# turn the check off with SHM_LEFTOVERS=no.
set -u
[ -d /dev/shm ] || exit 0
[ "${SHM_LEFTOVERS:-yes}" = no ] && exit 0
case $1 in
before)
	ls -A /dev/shm | LC_ALL=C sort >"$2"
	;;
after)
	[ -f "$2" ] || exit 0
	ls -A /dev/shm | LC_ALL=C sort >"$2.now"
	left=$(LC_ALL=C comm -13 "$2" "$2.now")
	rm -f "$2.now"
	if [ -n "$left" ]; then
		echo "make check left these in /dev/shm (they were not there before it ran):"
		printf '%s\n' "$left" | sed 's|^|  /dev/shm/|'
		echo "(another process on this host may have made them while the tests ran: run the tests"
		echo "in a /dev/shm of their own, unshare --mount and a tmpfs, or SHM_LEFTOVERS=no to skip this)"
		exit 1
	fi
	;;
esac
