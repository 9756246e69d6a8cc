/* SPDX-License-Identifier: MIT */
/* Library calls that touch no shared handle, from several threads at once:
 * building schemas and creating segments (also run under TSan). */
#include <errno.h>
#include <pthread.h>

#include "common.h"

#define THREADS 4
#define CREATES 50
#define BIG_OPTS 300 /* a schema large enough for its name sort to take a while */

/* What a segment of one schema must look like, from a creation made while no
 * other thread ran: the schema hash covers the name order, the config hash
 * depends on it. */
struct expect {
	const shmcfg_schema *schema; /* NULL: the embedded default */
	uint32_t nopts;
	uint8_t schema_hash[16], config_hash[16];
	char first_name[96], last_name[96];
};

/* Options named so that declaration order is far from name order, and each
 * thread's names differ from the others' (a sort that compares another
 * thread's names orders these wrongly, or reads past their end). */
static shmcfg_schema *big_schema(int tag, uint32_t nopts)
{
	shmcfg_schema *s;
	assert_int_equal(shmcfg_schema_new(&s), 0);
	for (uint32_t i = 0; i < nopts; i++) {
		char name[64], def[32];
		snprintf(name, sizeof name, "g%d.o%05u", tag, (i * 7919u) % 100000u);
		snprintf(def, sizeof def, "%u", i);
		shmcfg_optdef d = {.name = name, .type = SHMCFG_INT, .def = def};
		assert_int_equal(shmcfg_schema_add(s, &d), 0);
	}
	return s;
}

static const char *segname(int thread, int i)
{
	static __thread char buf[64];
	snprintf(buf, sizeof buf, "test-conc-%d-%d-%d", (int)getpid(), thread, i);
	return buf;
}

static const shmcfg_create_opts copts = {.flags = SHMCFG_CREATE_FORCE | SHMCFG_CREATE_NO_ENV,
					 .slots = 2, .readers = 8};

/* Create, compare with e, close and unlink; a text naming the first
 * difference, or NULL. Runs on any thread: no cmocka assertions here. */
static const char *create_and_check(const char *name, const struct expect *e, char *why, size_t len)
{
	shmcfg *h = NULL;
	int r = shmcfg_create(name, e->schema, &copts, &h);
	if (r) {
		snprintf(why, len, "create %s: %s: %s", name, shmcfg_errname(r), shmcfg_errdetail());
		return why;
	}
	uint8_t sh[16], ch[16];
	shmcfg_opt o;
	shmcfg_schema_hash(h, sh);
	shmcfg_config_hash(h, ch);
	const char *bad = NULL;
	if (shmcfg_count(h) != e->nopts)
		bad = "option count";
	else if (memcmp(sh, e->schema_hash, 16))
		bad = "schema hash";
	else if (memcmp(ch, e->config_hash, 16))
		bad = "config hash";
	else if (shmcfg_generation(h) != 1)
		bad = "generation";
	else if (shmcfg_lookup(h, e->first_name, &o) || o != 0 ||
		 shmcfg_lookup(h, e->last_name, &o) || o != e->nopts - 1)
		bad = "lookup";
	else if ((r = shmcfg_check(h, true, NULL, NULL)))
		bad = "deep check";
	if (bad)
		snprintf(why, len, "%s: %s differs from a lone creation", name, bad);
	shmcfg_close(h);
	shmcfg_unlink(name);
	return bad ? why : NULL;
}

static void expect_of(const shmcfg_schema *schema, struct expect *e)
{
	const char *name = segname(99, 0);
	shmcfg *h;
	int r = shmcfg_create(name, schema, &copts, &h);
	if (r)
		fail_msg("create %s: %s", name, shmcfg_errdetail());
	e->schema = schema;
	e->nopts = shmcfg_count(h);
	shmcfg_schema_hash(h, e->schema_hash);
	shmcfg_config_hash(h, e->config_hash);
	shmcfg_optinfo oi;
	assert_int_equal(shmcfg_opt_info(h, 0, &oi), 0);
	snprintf(e->first_name, sizeof e->first_name, "%s", oi.name);
	assert_int_equal(shmcfg_opt_info(h, e->nopts - 1, &oi), 0);
	snprintf(e->last_name, sizeof e->last_name, "%s", oi.name);
	shmcfg_close(h);
	shmcfg_unlink(name);
}

struct worker {
	int id;
	const struct expect *kinds; /* 3: the default, a shared schema, this thread's */
	shmcfg_schema *own;         /* this thread's schema, built on the thread */
	int done;
	char why[256];
	const char *err;
};

static pthread_barrier_t start;

static void *creator(void *arg)
{
	struct worker *w = arg;
	/* build the thread's own schema concurrently with the others' creations */
	struct expect own = w->kinds[2];
	own.schema = w->own;
	pthread_barrier_wait(&start);
	for (int i = 0; i < CREATES && !w->err; i++) {
		const struct expect *e = i % 3 == 2 ? &own : &w->kinds[i % 3];
		w->err = create_and_check(segname(w->id, i), e, w->why, sizeof w->why);
		w->done += !w->err;
	}
	return NULL;
}

/* Threads creating segments at once, with the default schema, one schema
 * object they share, and a schema each: every segment must be exactly what a
 * lone creation makes. (The schema builder sorted names through a global
 * comparison context: concurrent creations crashed or mis-sorted.) */
static void test_concurrent_creates(void **state)
{
	(void)state;
	shmcfg_schema *shared = big_schema(0, BIG_OPTS);
	shmcfg_schema *own[THREADS];
	struct expect kinds[THREADS][3];
	struct expect def, sh;
	expect_of(NULL, &def);
	expect_of(shared, &sh);
	for (int k = 0; k < THREADS; k++) {
		own[k] = big_schema(k + 1, BIG_OPTS - 40 * k);
		kinds[k][0] = def;
		kinds[k][1] = sh;
		expect_of(own[k], &kinds[k][2]);
	}
	pthread_t th[THREADS];
	struct worker w[THREADS];
	assert_int_equal(pthread_barrier_init(&start, NULL, THREADS), 0);
	for (int k = 0; k < THREADS; k++) {
		w[k] = (struct worker){.id = k, .kinds = kinds[k], .own = own[k]};
		assert_int_equal(pthread_create(&th[k], NULL, creator, &w[k]), 0);
	}
	for (int k = 0; k < THREADS; k++)
		assert_int_equal(pthread_join(th[k], NULL), 0);
	pthread_barrier_destroy(&start);
	for (int k = 0; k < THREADS; k++) {
		if (w[k].err)
			fail_msg("thread %d: %s", k, w[k].err);
		assert_int_equal(w[k].done, CREATES);
		shmcfg_schema_free(own[k]);
	}
	shmcfg_schema_free(shared);
}

struct builder {
	int id;
	const char *err;
	char why[256];
};

/* Schemas built and freed on every thread at once, from YAML text and the
 * embedded default: nothing of one may leak into another. */
static void *schema_builder(void *arg)
{
	struct builder *b = arg;
	pthread_barrier_wait(&start);
	for (int i = 0; i < CREATES && !b->err; i++) {
		char text[256];
		snprintf(text, sizeof text,
			 "format: 1\noptions:\n  t%d.z:\n    type: int\n    default: %d\n"
			 "  t%d.a:\n    type: str\n    default: \"v%d\"\n",
			 b->id, i, b->id, i);
		shmcfg_schema *s = NULL, *d = NULL;
		int r = shmcfg_schema_load_text(text, strlen(text), "mem", &s);
		if (r || shmcfg_schema_count(s) != 2) {
			snprintf(b->why, sizeof b->why, "load_text: %s: %s", shmcfg_errname(r),
				 shmcfg_errdetail());
			b->err = b->why;
		}
		r = shmcfg_schema_default(&d);
		if (!b->err && r) {
			snprintf(b->why, sizeof b->why, "schema_default: %s", shmcfg_errdetail());
			b->err = b->why;
		}
		shmcfg_schema_free(s);
		shmcfg_schema_free(d);
	}
	return NULL;
}

static void test_concurrent_schema_loads(void **state)
{
	(void)state;
	pthread_t th[THREADS];
	struct builder b[THREADS];
	assert_int_equal(pthread_barrier_init(&start, NULL, THREADS), 0);
	for (int k = 0; k < THREADS; k++) {
		b[k] = (struct builder){.id = k};
		assert_int_equal(pthread_create(&th[k], NULL, schema_builder, &b[k]), 0);
	}
	for (int k = 0; k < THREADS; k++)
		assert_int_equal(pthread_join(th[k], NULL), 0);
	pthread_barrier_destroy(&start);
	for (int k = 0; k < THREADS; k++)
		if (b[k].err)
			fail_msg("thread %d: %s", k, b[k].err);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_concurrent_creates),
		cmocka_unit_test(test_concurrent_schema_loads),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
