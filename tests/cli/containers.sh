#!/bin/sh
# SPDX-License-Identifier: MIT
# Containers, as namespaces on this machine (doc/deployment.md): a process
# whose /dev/shm is its own (a container's private tmpfs: a mount and IPC
# namespace with a tmpfs of 64 MiB on /dev/shm) does not see the host's
# segment and is told why, not a bare "no such segment"; one that shares the
# host's /dev/shm (--ipc=host, a volume, an emptyDir of medium Memory shared
# by the pod's containers) reads and writes it; a segment bigger than a
# private /dev/shm fails at creation, naming the bytes. Needs root (unshare);
# skipped without.
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/cli/lib.sh"

if ! unshare --mount --ipc true 2>/dev/null; then
	echo "1..0 # SKIP needs unshare --mount --ipc (root)"
	exit 0
fi
seg S host
run shmctl create -q --no-env "$S"
run shmctl set -q "$S" recompile_limit=21

# in_private CMD...: CMD in a mount and IPC namespace of its own with a
# private 64 MiB tmpfs on /dev/shm (Docker's default /dev/shm)
in_private() {
	unshare --mount --ipc --fork sh -c 'mount -t tmpfs -o size=64m,mode=1777 tmpfs /dev/shm && exec "$@"' sh "$@"
}
# in_shared CMD...: CMD in namespaces of its own that keep the host's /dev/shm
# (docker run --ipc=host, or -v /dev/shm:/dev/shm)
in_shared() {
	unshare --mount --ipc --fork "$@"
}

run in_private $SHMCTL get "$S" recompile_limit
pass "a private /dev/shm: exit 1, the segment is not there" test "$RC" = 1
# (another namespace than init's, where /proc/1 may be read; else, in a
# container such as this test's machine may be, the size gives it away)
pass "... the error says why: another /dev/shm than the host's, of 64 MiB" pyeval '
import re
re.fullmatch(r"shmctl: no such segment %s in this process.s /dev/shm \(64 MiB\): it runs in (another mount or IPC namespace than init|a container), whose /dev/shm is its own; share the host.s \(doc/deployment\.md\)" % re.escape(repr(a[1])), a[0].strip()) is not None' "$ERR" "$S"
run shmctl get cli-$$-never-made recompile_limit
pass "on the host, a missing segment is just missing" test "$ERR" = "shmctl: no such segment 'cli-$$-never-made'"

run in_shared $SHMCTL get "$S" recompile_limit
pass "the host's /dev/shm shared: the value" test "$RC" = 0 -a "$OUT" = 21
run in_shared $SHMCTL set -q "$S" recompile_limit=22
t_out "... a write from there is the host's" 22 shmctl get "$S" recompile_limit

run in_private $SHMCTL create --no-env --size 100M big
pass "a segment bigger than a private 64 MiB /dev/shm: refused at creation, naming the bytes" pyeval '
a[1] == "1" and "cannot allocate" in a[0] and "in /dev/shm" in a[0] and len(a[0].splitlines()) == 1' "$ERR" "$RC"
t_done
