/* Races inside one process:
 *
 *  - a thread that reclaims dead reader entries (shmcfg_gc, or a commit
 *    that finds no free slot) while another thread of the same handle
 *    claims the handle's entry: OFD locks belong to the open file
 *    description, which the threads share, so the reclaimer's lock attempt
 *    succeeds on the entry being claimed;
 *  - threads committing through one handle and through two handles of the
 *    same segment, with readers checking every generation whole.
 *
 * Real shared memory, real threads. */

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "internal.h" /* slot cells, reader entries */

#include "common.h"
#include "proc.h"

/* ------------------------------------------------------------------ */
/* 1. Reclaiming entries while a thread of the same handle claims one    */
/* ------------------------------------------------------------------ */

struct gc_loop {
	shmcfg *h;
	atomic_bool stop;
	unsigned long rounds;
};

static void *gc_thread(void *p)
{
	struct gc_loop *g = p;
	while (!atomic_load(&g->stop)) {
		(void)shmcfg_gc(g->h, NULL, NULL);
		g->rounds++;
	}
	return NULL;
}

struct entry_seen {
	uint32_t index;
	int found;
	bool alive;
};

static void see_entry(const shmcfg_reader *r, void *ud)
{
	struct entry_seen *e = ud;
	if (r->index == e->index) {
		e->found++;
		e->alive = r->alive;
	}
}

/*
 * A handle's first snapshot claims its reader entry (a non-blocking OFD
 * lock on the entry's byte of the lock object); shmcfg_gc() in another
 * thread of the same handle reaps entries it can lock. The claim must
 * survive: after the snapshot, another handle (another open file
 * description, as another process would have) must see the entry alive,
 * or its owner's pins protect nothing (any process may then reap or claim
 * the entry and clear them, and writers rewrite the slot in use).
 */
static void test_gc_while_first_snapshot_claims_entry(void **state)
{
	(void)state;
	const char *name = new_name("race-claim");
	shmcfg *h = keep(test_create(name, NULL));
	/* an entry below the high-water mark, unused: the claim's first choice */
	shmcfg *h0 = NULL;
	assert_int_equal(shmcfg_attach(name, 0, NULL, &h0), 0);
	assert_int_equal(snapshot_once(h0), 0);
	shmcfg_close(h0);
	uint64_t deadline = mono_ms() + 3000;
	int rounds = 0, lost = 0;
	unsigned long gcs = 0;
	while (mono_ms() < deadline && rounds < 400 && !lost) {
		shmcfg *c = NULL;
		assert_int_equal(shmcfg_attach(name, 0, NULL, &c), 0);
		struct gc_loop g = {.h = c};
		pthread_t t;
		assert_int_equal(pthread_create(&t, NULL, gc_thread, &g), 0);
		while (g.rounds == 0) /* the reclaimer is at work before we claim */
			sched_yield();
		shmcfg_snapshot *s;
		int r = shmcfg_snapshot_acquire(c, &s);
		atomic_store(&g.stop, true);
		pthread_join(t, NULL);
		gcs += g.rounds;
		assert_int_equal(r, 0);
		struct entry_seen e = {.index = (uint32_t)c->reader};
		if (c->reader >= 0) {
			assert_true(shmcfg_readers(h, see_entry, &e) >= 0);
			lost = e.found != 1 || !e.alive;
		}
		shmcfg_snapshot_release(s);
		shmcfg_close(c);
		rounds++;
	}
	if (lost)
		fail_msg("after %d rounds (%lu gc passes): a thread's shmcfg_gc() reaped the entry that another "
			 "thread of the same handle was claiming: the entry's lock is gone while its owner pins "
			 "a snapshot (other processes see it dead)", rounds, gcs);
	fprintf(stderr, "# %d claims raced %lu gc passes of the same handle, no entry lost\n", rounds, gcs);
	drop(h);
}

/* ------------------------------------------------------------------ */
/* 2. Threads committing through one handle and through two handles     */
/* ------------------------------------------------------------------ */

struct committer {
	shmcfg *h;
	int id, n;
	int fails;
	int err;
};

static void *committer_thread(void *p)
{
	struct committer *c = p;
	for (int k = 0; k < c->n; k++) {
		int64_t v = (int64_t)c->id * 100000 + k + 1;
		int r = commit_n(c->h, v, NULL);
		if (r) {
			c->fails++;
			c->err = r;
		}
	}
	return NULL;
}

struct checker {
	shmcfg *h;
	atomic_bool stop;
	unsigned long snaps, torn;
};

static void *checker_thread(void *p)
{
	struct checker *c = p;
	while (!atomic_load(&c->stop)) {
		shmcfg_snapshot *s;
		if (shmcfg_snapshot_acquire(c->h, &s))
			continue;
		c->torn += snapshot_n(s) < 0;
		shmcfg_snapshot_release(s);
		c->snaps++;
	}
	return NULL;
}

/*
 * Four threads commit (two through one handle, two more through a second
 * handle of the same segment in the same process: OFD locks of different
 * open file descriptions exclude each other), two threads take snapshots
 * of each handle. Every commit is published exactly once, generations are
 * counted, every snapshot is whole, and the heap's counts agree with the
 * slots at the end.
 */
static void test_threads_commit_through_one_and_two_handles(void **state)
{
	(void)state;
	const char *name = new_name("race-threads");
	shmcfg *h1 = keep(test_create(name, &(shmcfg_create_opts){.slots = 3}));
	shmcfg *h2 = NULL;
	assert_int_equal(shmcfg_attach(name, 0, NULL, &h2), 0);
	keep(h2);
	shmcfg_set_commit_timeout(h1, 20000);
	shmcfg_set_commit_timeout(h2, 20000);
	enum { PER = 150 };
	struct committer cs[4] = {{h1, 1, PER, 0, 0}, {h1, 2, PER, 0, 0}, {h2, 3, PER, 0, 0}, {h2, 4, PER, 0, 0}};
	struct checker ck[2] = {{.h = h1}, {.h = h2}};
	pthread_t tc[4], tk[2];
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&tk[i], NULL, checker_thread, &ck[i]), 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&tc[i], NULL, committer_thread, &cs[i]), 0);
	for (int i = 0; i < 4; i++)
		pthread_join(tc[i], NULL);
	for (int i = 0; i < 2; i++) {
		atomic_store(&ck[i].stop, true);
		pthread_join(tk[i], NULL);
	}
	for (int i = 0; i < 4; i++)
		if (cs[i].fails)
			fail_msg("committer %d: %d commits failed (last: %s)", i, cs[i].fails, shmcfg_errname(cs[i].err));
	assert_int_equal(shmcfg_generation(h1), 1 + 4 * PER);
	for (int i = 0; i < 2; i++)
		if (ck[i].torn)
			fail_msg("%lu of %lu snapshots were torn", ck[i].torn, ck[i].snaps);
	assert_int_equal(shmcfg__heap_verify(h1), 0);
	assert_int_equal(shmcfg_check(h2, true, print_problem, NULL), 0);
	drop(h2);
	drop(h1);
}

int main(void)
{
	if (getenv("TEST_FILTER"))
		cmocka_set_test_filter(getenv("TEST_FILTER"));
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_gc_while_first_snapshot_claims_entry, teardown),
		cmocka_unit_test_teardown(test_threads_commit_through_one_and_two_handles, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
