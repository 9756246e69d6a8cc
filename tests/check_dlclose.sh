#!/bin/sh
# SPDX-License-Identifier: MIT
# A program that dlopens libshmcfg, commits from a thread, closes and
# dlcloses it while the thread lives, then lets the thread exit: the
# thread's exit runs the destructors of the library's pthread keys (its
# spare transaction, lib/commit/txn.c), which must still be mapped (the
# library is linked -z nodelete). Prints TAP.
set -u
: "${top_srcdir:=.}" "${top_builddir:=.}" "${CC:=cc}"
lib="$top_builddir/lib/.libs/libshmcfg.so.3"
echo "1..1"
if [ ! -e "$lib" ]; then
	echo "ok 1 # SKIP no shared library ($lib)"
	exit 0
fi
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/t.c" <<'PROG'
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
#include "shmcfg.h"

#define SYM(f) __typeof__(f) *p_##f = (__typeof__(f) *)dlsym(lib, #f)
static int done[2], go[2]; /* thread -> main, main -> thread */

static void *committer(void *arg)
{
	int (**fn)(void) = arg;
	char c;
	if (fn[0]() != 0) /* a commit: its transaction stays as the thread's spare */
		return (void *)1;
	if (write(done[1], "c", 1) != 1 || read(go[0], &c, 1) != 1) /* wait for the dlclose */
		return (void *)1;
	return NULL; /* the exit runs the key's destructor */
}

static void *lib;
static shmcfg *h;
static int commit_one(void)
{
	SYM(shmcfg_txn_begin); SYM(shmcfg_txn_set_int); SYM(shmcfg_txn_commit);
	shmcfg_txn *t;
	if (p_shmcfg_txn_begin(h, &t) || p_shmcfg_txn_set_int(t, 0, 7) || p_shmcfg_txn_commit(t, NULL) < 0)
		return 1;
	return 0;
}

int main(int argc, char **argv)
{
	if (!(lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL))) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		return 2;
	}
	SYM(shmcfg_schema_new); SYM(shmcfg_schema_add); SYM(shmcfg_schema_free);
	SYM(shmcfg_create); SYM(shmcfg_close); SYM(shmcfg_unlink);
	shmcfg_schema *s;
	shmcfg_optdef d = {.name = "a", .type = SHMCFG_INT, .def = "1"};
	shmcfg_create_opts co = {.flags = SHMCFG_CREATE_FORCE | SHMCFG_CREATE_NO_ENV};
	if (p_shmcfg_schema_new(&s) || p_shmcfg_schema_add(s, &d) || p_shmcfg_create(argv[2], s, &co, &h))
		return 3;
	p_shmcfg_schema_free(s);
	int (*fn[1])(void) = {commit_one};
	pthread_t th;
	char c;
	if (pipe(done) || pipe(go) || pthread_create(&th, NULL, committer, fn) || read(done[0], &c, 1) != 1)
		return 4;
	p_shmcfg_close(h);
	p_shmcfg_unlink(argv[2]);
	if (dlclose(lib))
		return 5;
	void *r;
	if (write(go[1], "x", 1) != 1 || pthread_join(th, &r) || r)
		return 6;
	return 0;
}
PROG
# -O2: shmcfg.h's unused static slow paths, which name the library's symbols, go;
# a sanitizer build of the library loads into a program built with its runtime
if ! $CC -O2 -std=gnu11 ${SHMCFG_SANITIZERS:-} -I"$top_builddir/include" -I"$top_srcdir/include" "$tmp/t.c" -o "$tmp/t" -ldl -pthread; then
	echo "not ok 1 - the dlclose program does not build"
	exit 1
fi
name="dlclose-$$"
timeout 120 "$tmp/t" "$lib" "$name" 2>"$tmp/err" # a failed commit would leave main waiting
rc=$?
rm -f "/dev/shm/shmcfg.$name" /dev/shm/shmcfg-lock."$name".* 2>/dev/null
if [ "$rc" = 0 ]; then
	echo "ok 1 - a thread that committed exits after the library's dlclose"
else
	echo "not ok 1 - a thread that committed exits after the library's dlclose: exit $rc ($(cat "$tmp/err"))"
	exit 1
fi
