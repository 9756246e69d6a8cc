/* SPDX-License-Identifier: MIT */
/* Shared by the C tests: unique segment names and a schema exercising
 * every type and attribute. */
#ifndef SHMCFG_TEST_COMMON_H
#define SHMCFG_TEST_COMMON_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "shmcfg.h"

/* A segment name unique to this process and tag. */
static inline const char *test_name(const char *tag)
{
	static char buf[8][64];
	static int k;
	char *b = buf[k++ % 8];
	snprintf(b, 64, "test-%s-%d", tag, (int)getpid());
	return b;
}

#include "test_schema.h"

static inline shmcfg_schema *test_schema(void)
{
	shmcfg_schema *s;
	assert_int_equal(shmcfg_schema_new(&s), 0);
	for (int i = 0; i < T_COUNT; i++)
		assert_int_equal(shmcfg_schema_add(s, &test_opts[i]), 0);
	return s;
}

/* Create a segment of the test schema; env is a NULL-terminated environment. */
static inline shmcfg *test_create(const char *name, const shmcfg_create_opts *o)
{
	shmcfg_schema *s = test_schema();
	shmcfg_create_opts opts = o ? *o : (shmcfg_create_opts){0};
	opts.flags |= SHMCFG_CREATE_FORCE;
	if (!opts.envp)
		opts.flags |= SHMCFG_CREATE_NO_ENV;
	shmcfg *h = NULL;
	int r = shmcfg_create(name, s, &opts, &h);
	if (r)
		fail_msg("create %s: %s: %s", name, shmcfg_strerror(r), shmcfg_errdetail());
	shmcfg_schema_free(s);
	return h;
}

/* Create a segment of schema s; envp NULL: the env layers left empty. */
static inline shmcfg *create_from(const char *name, shmcfg_schema *s, char **envp)
{
	shmcfg *h = NULL;
	shmcfg_create_opts o = {.flags = SHMCFG_CREATE_FORCE | (envp ? 0 : SHMCFG_CREATE_NO_ENV), .envp = envp};
	int r = shmcfg_create(name, s, &o, &h);
	if (r)
		fail_msg("create %s: %s", name, shmcfg_errdetail());
	return h;
}

/* This process's mappings of segment name's objects (/proc/self/maps), a
 * replaced one's ("(deleted)") too; -1 if the file cannot be read. */
static inline int maps_of(const char *name)
{
	char want[300], line[4096];
	int len = snprintf(want, sizeof want, "/dev/shm/shmcfg.%s", name);
	FILE *f = fopen("/proc/self/maps", "re");
	if (!f)
		return -1;
	int n = 0;
	while (fgets(line, sizeof line, f)) {
		char *p = strstr(line, want);
		n += p && (p[len] == '\n' || !strcmp(p + len, " (deleted)\n"));
	}
	fclose(f);
	return n;
}

/* The handle of the option of that name; the test fails without one. */
static inline shmcfg_opt opt_named(const shmcfg *h, const char *name)
{
	shmcfg_opt o;
	if (shmcfg_lookup(h, name, &o))
		fail_msg("lookup %s: %s", name, shmcfg_errdetail());
	return o;
}

static inline int64_t get_i(const shmcfg *h, shmcfg_opt o)
{
	int64_t v = -999;
	assert_int_equal(shmcfg_get_int(h, o, &v), 0);
	return v;
}

static inline int set_and_commit(shmcfg *h, shmcfg_opt o, const char *text, uint64_t *gen)
{
	shmcfg_txn *t;
	int r = shmcfg_txn_begin(h, &t);
	if (r)
		return r;
	r = shmcfg_txn_set_text(t, o, text);
	if (r) {
		shmcfg_txn_abort(t);
		return r;
	}
	return shmcfg_txn_commit(t, gen);
}

/* One transaction setting a string or an int option, committed. */
static inline int commit_str(shmcfg *h, shmcfg_opt o, const char *s, uint64_t *gen)
{
	shmcfg_txn *t;
	int r = shmcfg_txn_begin(h, &t);
	if (r)
		return r;
	if ((r = shmcfg_txn_set_str(t, o, s))) {
		shmcfg_txn_abort(t);
		return r;
	}
	return shmcfg_txn_commit(t, gen);
}

static inline int commit_int(shmcfg *h, shmcfg_opt o, int64_t v, uint64_t *gen)
{
	shmcfg_txn *t;
	int r = shmcfg_txn_begin(h, &t);
	if (r)
		return r;
	if ((r = shmcfg_txn_set_int(t, o, v))) {
		shmcfg_txn_abort(t);
		return r;
	}
	return shmcfg_txn_commit(t, gen);
}

/* Commit one layer's value, as text (NULL: reset it). */
static inline int commit_layer(shmcfg *h, shmcfg_source layer, shmcfg_opt o, const char *text, uint64_t *gen)
{
	shmcfg_txn *t;
	int r = shmcfg_txn_begin(h, &t);
	if (r)
		return r;
	if ((r = shmcfg_txn_layer(t, layer)) || (r = text ? shmcfg_txn_set_text(t, o, text) : shmcfg_txn_reset(t, o))) {
		shmcfg_txn_abort(t);
		return r;
	}
	return shmcfg_txn_commit(t, gen);
}

#endif
