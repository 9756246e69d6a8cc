/* SPDX-License-Identifier: MIT */
/* Races inside one process and against a scribbling writer:
 *
 *  - a thread that reclaims dead reader entries (shmcfg_gc, or a commit
 *    that finds no free slot) while another thread of the same handle
 *    claims the handle's entry: OFD locks belong to the open file
 *    description, which the threads share, so the reclaimer's lock attempt
 *    succeeds on the entry being claimed;
 *  - a process of the writers' group that rewrites the bytes of a list
 *    while others read it (shmcfg_get copies what it checked), or after a
 *    pinned snapshot handed them out (they are formatted in place);
 *  - threads committing through one handle and through two handles of the
 *    same segment, with readers checking every generation whole.
 *
 * Real shared memory, real processes (fork) and threads. */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "internal.h"
#include "slot.h" /* slot cells, reader entries */

#include "common.h"
#include "proc.h"

/* ------------------------------------------------------------------ */
/* 1. Reclaiming entries while a thread of the same handle claims one    */
/* ------------------------------------------------------------------ */

struct gc_loop {
	shmcfg *h;
	atomic_bool stop;
	atomic_ulong rounds;
};

static void *gc_thread(void *p)
{
	struct gc_loop *g = p;
	while (!atomic_load(&g->stop)) {
		(void)shmcfg_gc(g->h, NULL, NULL);
		atomic_fetch_add(&g->rounds, 1);
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
		while (atomic_load(&g.rounds) == 0) /* the reclaimer is at work before we claim */
			sched_yield();
		shmcfg_snapshot *s;
		int r = shmcfg_snapshot_acquire(c, &s);
		atomic_store(&g.stop, true);
		pthread_join(t, NULL);
		gcs += atomic_load(&g.rounds);
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
/* 2. A list read while a writer scribbles on its bytes                */
/* ------------------------------------------------------------------ */

struct scribble {
	const char *name;
	uint64_t at; /* offset in the object of the byte to toggle */
};

/* A member of the writers' group: maps the object read-write and toggles one
 * byte between NUL and 'x' until killed. */
static int scribbler_main(void *p)
{
	struct scribble *a = p;
	char path[256];
	snprintf(path, sizeof path, "/dev/shm/shmcfg.%s", a->name);
	int fd = open(path, O_RDWR);
	CHECK(fd >= 0, 2, "open %s: %s", path, strerror(errno));
	struct stat st;
	CHECK(fstat(fd, &st) == 0, 3, "fstat");
	volatile char *m = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(m != MAP_FAILED, 4, "mmap");
	for (unsigned long k = 0;; k++)
		m[a->at] = (k & 1) ? 'x' : 0;
}

static bool list_well_formed(const shmcfg_value *v)
{
	size_t nul = 0;
	for (size_t i = 0; i < v->u.list.bytes; i++)
		nul += v->u.list.items[i] == 0;
	return nul == v->u.list.count && (v->u.list.bytes == 0 || v->u.list.items[v->u.list.bytes - 1] == 0);
}

/*
 * shmcfg_get() of a list decodes the cell in the segment (every item
 * NUL-ended, as many as the cell counts), then copies the bytes. A writer
 * that rewrites them in between must not get a malformed list past it: the
 * caller would walk the last item past the end of its copy (strlen), or
 * find fewer items than the count says. A scribble may give an error
 * (SHMCFG_E_CORRUPT), never a list that breaks its own rules.
 */
static void test_list_read_while_scribbled(void **state)
{
	(void)state;
	const char *name = new_name("race-list");
	shmcfg *h = keep(test_create(name, NULL));
	shmcfg_txn *t;
	assert_int_equal(shmcfg_txn_begin(h, &t), 0);
	/* a short item, then a long one: the list's decoding counts the NULs of
	 * all its bytes between its check of the first item's NUL and its copy */
	char items[4200];
	snprintf(items, sizeof items, "[\"a\", \"%04000d\"]", 7);
	assert_int_equal(shmcfg_txn_set_text(t, T_ITEMS, items), 0);
	assert_int_equal(shmcfg_txn_commit(t, NULL), 0);
	uint64_t cur = __atomic_load_n(&h->hdr->current, __ATOMIC_ACQUIRE);
	const struct shmcfg__cell *c = slot_cells(h, slot_at(h, cur_slot(cur))) + T_ITEMS;
	assert_false(c->meta & META_SCHEMA);
	/* the NUL that ends the first item */
	struct scribble a = {name, h->lay.heap_off + CELL_OFF(c->val) + 1};
	pid_t w = spawn(scribbler_main, &a);
	uint64_t deadline = mono_ms() + 400;
	unsigned long reads = 0, ok = 0, refused = 0, malformed = 0;
	while (mono_ms() < deadline) {
		for (int k = 0; k < 1000; k++, reads++) {
			shmcfg_value v;
			int r = shmcfg_get(h, T_ITEMS, &v);
			if (r == SHMCFG_E_CORRUPT) {
				refused++;
				continue;
			}
			assert_int_equal(r, 0);
			ok++;
			malformed += !list_well_formed(&v);
			shmcfg_value_clear(&v);
		}
	}
	kill(w, SIGKILL);
	assert_child_killed(w);
	fprintf(stderr, "# %lu reads under a scribbler: %lu values, %lu refused, %lu malformed\n", reads, ok, refused,
		malformed);
	if (malformed)
		fail_msg("shmcfg_get returned %lu malformed lists (count or last NUL disagree with the bytes) of %lu "
			 "while a writer rewrote the NUL of its first item", malformed, ok);
	drop(h);
}

struct fill {
	const char *name;
	uint64_t from, to; /* bytes of the object to overwrite with 'x' */
};

/* A member of the writers' group: overwrites a range of the object. */
static int filler_main(void *p)
{
	struct fill *a = p;
	char path[256];
	snprintf(path, sizeof path, "/dev/shm/shmcfg.%s", a->name);
	int fd = open(path, O_RDWR);
	CHECK(fd >= 0, 2, "open %s: %s", path, strerror(errno));
	char *m = mmap(NULL, (size_t)a->to, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(m != MAP_FAILED, 4, "mmap");
	memset(m + a->from, 'x', (size_t)(a->to - a->from));
	return 0;
}

/*
 * A pinned snapshot's values point into the segment (no copy), where a
 * writer may rewrite the bytes after they were checked. The library's own
 * formatting of such a list (shmcfg_value_format and the JSON of dumps and
 * shmctl; codegen's Python likewise) must stay within the value's bytes: with
 * the last item's NUL and everything after it overwritten, an item read
 * with strlen() runs through the rest of the heap (and off the end of the
 * mapping if nothing follows it).
 */
static void test_snapshot_list_formatted_after_scribble(void **state)
{
	(void)state;
	const char *name = new_name("race-fmt");
	shmcfg *h = keep(test_create(name, NULL));
	shmcfg_txn *t;
	assert_int_equal(shmcfg_txn_begin(h, &t), 0);
	assert_int_equal(shmcfg_txn_set_text(t, T_ITEMS, "[\"alpha\", \"beta\"]"), 0);
	assert_int_equal(shmcfg_txn_commit(t, NULL), 0);
	shmcfg_snapshot *s;
	assert_int_equal(shmcfg_snapshot_acquire(h, &s), 0);
	shmcfg_value v;
	assert_int_equal(shmcfg_snapshot_get(s, T_ITEMS, &v), 0);
	assert_int_equal(v.u.list.count, 2);
	/* the writer overwrites from the last item's NUL to the heap's end */
	uint64_t cur = __atomic_load_n(&h->hdr->current, __ATOMIC_ACQUIRE);
	const struct shmcfg__cell *c = slot_cells(h, slot_at(h, cur_slot(cur))) + T_ITEMS;
	struct fill a = {name, h->lay.heap_off + CELL_OFF(c->val) + META_LEN(c->meta) - 1,
			 h->lay.heap_off + h->lay.heap_size};
	assert_true(v.u.list.items == h->base + h->lay.heap_off + CELL_OFF(c->val));
	assert_child_ok(spawn(filler_main, &a));
	char *txt = NULL;
	int r = shmcfg_value_format(&v, &txt);
	shmcfg_snapshot_release(s);
	assert_int_equal(r, 0);
	size_t len = strlen(txt);
	if (len > 32)
		fail_msg("a list of %zu bytes formatted as %zu characters after a writer removed its last NUL: "
			 "the formatting read past the value (\"%.40s...\")", v.u.list.bytes, len, txt);
	free(txt);
	drop(h);
}

/* ------------------------------------------------------------------ */
/* 3. Threads committing through one handle and through two handles     */
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
		cmocka_unit_test_teardown(test_list_read_while_scribbled, teardown),
		cmocka_unit_test_teardown(test_snapshot_list_formatted_after_scribble, teardown),
		cmocka_unit_test_teardown(test_threads_commit_through_one_and_two_handles, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
