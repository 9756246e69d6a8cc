/* SPDX-License-Identifier: MIT */
/* Library calls from several threads at once: building schemas, creating
 * segments, and one handle's views shared by threads (also run under
 * TSan). */
#define _GNU_SOURCE /* pthread_timedjoin_np */
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

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

/*
 * One handle's views shared by threads while commits go on (the pin words
 * of lib/read/reclaim.c): every snapshot shows one generation (a = -b, as
 * each commit writes them) and goes on showing it while held, however many
 * views are rewritten meanwhile; a snapshot may be released by another
 * thread than the one that took it (handed over through a mailbox); a
 * snapshot is never older than a generation read before it was acquired.
 */
#define SV_READERS 3
#define SV_COMMITS 400
#define SV_ACQUIRES 4000

struct shared_views {
	shmcfg *h;
	atomic_int done; /* the committer finished */
	_Atomic(shmcfg_snapshot *) mailbox;
	atomic_long handed; /* snapshots released by another thread */
	const char *err;
	char detail[160];
};

/* a = -b in s, and the same as the first read (0 when there is none yet):
 * false and the reason in sv->detail otherwise */
static bool sv_check(struct shared_views *sv, const shmcfg_snapshot *s, int64_t *first)
{
	int64_t a = 1, b = 1;
	if (shmcfg_snapshot_get_int(s, T_A, &a) || shmcfg_snapshot_get_int(s, T_B, &b) || a != -b ||
	    (first && *first != INT64_MIN && *first != a)) {
		snprintf(sv->detail, sizeof sv->detail, "generation %" PRIu64 ": a = %" PRId64 ", b = %" PRId64
			 ", first read a = %" PRId64, shmcfg_snapshot_generation(s), a, b, first ? *first : 0);
		return false;
	}
	if (first)
		*first = a;
	return true;
}

static void *sv_reader(void *arg)
{
	struct shared_views *sv = arg;
	for (int i = 0; i < SV_ACQUIRES && !sv->err; i++) {
		uint64_t before = shmcfg_generation(sv->h);
		shmcfg_snapshot *s;
		if (shmcfg_snapshot_acquire(sv->h, &s)) {
			sv->err = "acquire";
			break;
		}
		int64_t first = INT64_MIN;
		if (shmcfg_snapshot_generation(s) < before) {
			snprintf(sv->detail, sizeof sv->detail, "generation %" PRIu64 " after %" PRIu64 " was read",
				 shmcfg_snapshot_generation(s), before);
			sv->err = "a snapshot older than the generation read before it";
		} else if (!sv_check(sv, s, &first))
			sv->err = "a snapshot mixing generations";
		sched_yield(); /* commits and other threads' views go on */
		if (!sv->err && !sv_check(sv, s, &first))
			sv->err = "a held snapshot that changed";
		if (i % 3 == 0) /* hand it over: another thread checks and releases it */
			s = atomic_exchange(&sv->mailbox, s);
		if (s) {
			if (!sv->err && !sv_check(sv, s, NULL))
				sv->err = "a handed-over snapshot that changed";
			if (i % 3 == 0)
				atomic_fetch_add(&sv->handed, 1);
			shmcfg_snapshot_release(s);
		}
	}
	return NULL;
}

static void *sv_committer(void *arg)
{
	struct shared_views *sv = arg;
	for (int64_t n = 1; n <= SV_COMMITS && !sv->err; n++) {
		shmcfg_txn *t;
		if (shmcfg_txn_begin(sv->h, &t) || shmcfg_txn_set_int(t, T_A, n) || shmcfg_txn_set_int(t, T_B, -n) ||
		    shmcfg_txn_commit(t, NULL)) {
			snprintf(sv->detail, sizeof sv->detail, "%s", shmcfg_errdetail());
			sv->err = "commit";
			break;
		}
	}
	atomic_store(&sv->done, 1);
	return NULL;
}

static void test_shared_views(void **state)
{
	(void)state;
	const char *name = test_name("sharedviews");
	struct shared_views sv = {.h = test_create(name, NULL)};
	pthread_t c, r[SV_READERS];
	assert_int_equal(pthread_create(&c, NULL, sv_committer, &sv), 0);
	for (int k = 0; k < SV_READERS; k++)
		assert_int_equal(pthread_create(&r[k], NULL, sv_reader, &sv), 0);
	for (int k = 0; k < SV_READERS; k++)
		assert_int_equal(pthread_join(r[k], NULL), 0);
	assert_int_equal(pthread_join(c, NULL), 0);
	shmcfg_snapshot *left = atomic_exchange(&sv.mailbox, NULL);
	if (left && !sv.err && !sv_check(&sv, left, NULL))
		sv.err = "the last handed-over snapshot";
	shmcfg_snapshot_release(left);
	if (sv.err)
		fail_msg("%s: %s", sv.err, sv.detail);
	assert_true(atomic_load(&sv.handed) > 0); /* some were released by another thread */
	/* every snapshot released: a commit finds a free slot at once */
	shmcfg_set_commit_timeout(sv.h, 0);
	assert_int_equal(commit_int(sv.h, T_A, 5, NULL), 0);
	shmcfg_close(sv.h);
	shmcfg_unlink(name);
}

/*
 * A close while another thread holds a snapshot returns at once; the
 * snapshot stays readable, and its release (in that thread) ends the close:
 * the handle's reader entry is freed then, not before.
 */
struct close_other {
	shmcfg *h;
	atomic_int stage; /* 1: snapshot held; 2: closed */
	int64_t a;
	int err;
};

static void *co_holder(void *arg)
{
	struct close_other *co = arg;
	shmcfg_snapshot *s;
	if ((co->err = shmcfg_snapshot_acquire(co->h, &s))) {
		atomic_store(&co->stage, 1);
		return NULL;
	}
	atomic_store(&co->stage, 1);
	while (atomic_load(&co->stage) < 2)
		sched_yield();
	co->err = shmcfg_snapshot_get_int(s, T_A, &co->a);
	shmcfg_snapshot_release(s); /* the close ends here */
	return NULL;
}

static void count_entry(const shmcfg_reader *r, void *ud)
{
	(void)r;
	++*(int *)ud;
}

static int entries(const shmcfg *h)
{
	int n = 0;
	return shmcfg_readers(h, count_entry, &n) < 0 ? -1 : n;
}

static void test_close_while_other_thread_holds(void **state)
{
	(void)state;
	const char *name = test_name("closeother");
	shmcfg *w = test_create(name, NULL);
	assert_int_equal(commit_int(w, T_A, 42, NULL), 0);
	shmcfg *h = NULL;
	assert_int_equal(shmcfg_attach(name, 0, NULL, &h), 0);
	int before = entries(w);
	struct close_other co = {.h = h};
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, co_holder, &co), 0);
	while (atomic_load(&co.stage) < 1)
		sched_yield();
	assert_int_equal(co.err, 0);
	assert_int_equal(entries(w), before + 1); /* the holder's entry */
	shmcfg_close(h); /* returns: the snapshot is another thread's */
	assert_int_equal(entries(w), before + 1);
	atomic_store(&co.stage, 2);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(co.err, 0);
	assert_int_equal(co.a, 42);
	assert_int_equal(entries(w), before); /* released: the close ended */
	shmcfg_close(w);
	shmcfg_unlink(name);
}

/*
 * Threads looking up every option of a freshly attached handle at once, in
 * different orders: each option is validated on its first use (opt_ok,
 * lib/schema/validate.c) and each index slot's word of the lookup's cache
 * filled (h->lk, lib/schema/options.c) while the others read them; every
 * name must give its own option (and TSan sees no race).
 */
#define LOOKUP_OPTS 2000
struct looker {
	shmcfg *h;
	char (*names)[64];
	int id;
	uint32_t bad, done;
};

static void *looker(void *arg)
{
	struct looker *l = arg;
	pthread_barrier_wait(&start);
	for (uint32_t k = 0; k < LOOKUP_OPTS; k++) {
		/* thread 0 walks up, 1 down, the others with strides */
		uint32_t i = l->id == 0 ? k : l->id == 1 ? LOOKUP_OPTS - 1 - k : (k * (2u * l->id + 1)) % LOOKUP_OPTS;
		shmcfg_opt o = SHMCFG_NO_OPT;
		if (shmcfg_lookup(l->h, l->names[i], &o) || o != i)
			l->bad++;
		l->done++;
	}
	return NULL;
}

static void test_concurrent_first_lookups(void **state)
{
	(void)state;
	const char *name = test_name("lookups");
	shmcfg_schema *s = big_schema(9, LOOKUP_OPTS);
	shmcfg *maker;
	assert_int_equal(shmcfg_create(name, s, &copts, &maker), 0);
	shmcfg_schema_free(s);
	static char names[LOOKUP_OPTS][64];
	for (shmcfg_opt i = 0; i < LOOKUP_OPTS; i++) {
		shmcfg_optinfo oi;
		assert_int_equal(shmcfg_opt_info(maker, i, &oi), 0);
		snprintf(names[i], sizeof names[i], "%s", oi.name);
	}
	shmcfg *h; /* a handle of its own: nothing of it validated yet */
	assert_int_equal(shmcfg_attach(name, SHMCFG_ATTACH_RDONLY, NULL, &h), 0);
	pthread_t th[THREADS];
	struct looker l[THREADS];
	assert_int_equal(pthread_barrier_init(&start, NULL, THREADS), 0);
	for (int k = 0; k < THREADS; k++) {
		l[k] = (struct looker){.h = h, .names = names, .id = k};
		assert_int_equal(pthread_create(&th[k], NULL, looker, &l[k]), 0);
	}
	for (int k = 0; k < THREADS; k++)
		assert_int_equal(pthread_join(th[k], NULL), 0);
	pthread_barrier_destroy(&start);
	for (int k = 0; k < THREADS; k++) {
		assert_int_equal(l[k].done, LOOKUP_OPTS);
		assert_int_equal(l[k].bad, 0);
	}
	shmcfg_close(h);
	shmcfg_close(maker);
	shmcfg_unlink(name);
}

/* A thread that commits once and exits. */
static void *commit_once(void *arg)
{
	shmcfg *h = arg;
	shmcfg_txn *t;
	if (shmcfg_txn_begin(h, &t) || shmcfg_txn_set_int(t, T_A, 7) || shmcfg_txn_commit(t, NULL) < 0)
		return (void *)1;
	return NULL;
}

/*
 * A thread keeps its last transaction for its next one (lib/commit/txn.c):
 * one that exits frees it. 200 threads that commit once and exit, after one
 * that warmed the handle up: the heap in use grows by less than one
 * transaction per thread (each is 400-odd bytes; without the key's
 * destructor it grows by all of them).
 */
static void test_exited_threads_keep_no_transaction(void **state)
{
	(void)state;
	const char *name = test_name("spare");
	shmcfg *h = test_create(name, NULL);
	pthread_t th;
	void *ret;
	assert_int_equal(pthread_create(&th, NULL, commit_once, h), 0);
	assert_int_equal(pthread_join(th, &ret), 0);
	assert_null(ret);
	size_t before = mallinfo2().uordblks;
	for (int k = 0; k < 200; k++) {
		assert_int_equal(pthread_create(&th, NULL, commit_once, h), 0);
		assert_int_equal(pthread_join(th, &ret), 0);
		assert_null(ret);
	}
	size_t after = mallinfo2().uordblks;
	if (after > before && after - before >= 200 * 100)
		fail_msg("the heap in use grew by %zu bytes over 200 threads that each committed once", after - before);
	shmcfg_close(h);
	shmcfg_unlink(name);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_concurrent_creates),
		cmocka_unit_test(test_concurrent_schema_loads),
		cmocka_unit_test(test_shared_views),
		cmocka_unit_test(test_close_while_other_thread_holds),
		cmocka_unit_test(test_concurrent_first_lookups),
		cmocka_unit_test(test_exited_threads_keep_no_transaction),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
