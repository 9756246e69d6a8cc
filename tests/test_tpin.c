/* SPDX-License-Identifier: MIT */
/* The threads' sticky pins (lib/read/tpin.c): a snapshot counted on the
 * calling thread's entry of the reader table with plain stores, the pin
 * left on its generation after the release, a writer that revokes idle
 * pins with membarrier(2) when it needs their slots and never takes a slot
 * a pin holds a snapshot of; other threads' releases, nesting, a close
 * with snapshots held, a thread's exit, fork(), dead readers and writers.
 *
 * Everything is real: shared memory, threads, fork(), SIGKILL, the test
 * copy's fault points. The snapshots are taken through shmcfg.h's inline
 * acquire and release, as programs take them (this file includes the
 * library's internals, which see the library's calls). Children report
 * through their exit status. */

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>

#include "internal.h"
#include "tpin.h"

#include "common.h"
#include "proc.h"

#define ACQ(h, s) shmcfg__snapshot_acquire_inline((h), (s))
#define REL(s) shmcfg__snapshot_release_inline(s)
#define SHORT_TIMEOUT_MS 300 /* commit timeout where a commit is expected to fail */

static struct tpin *pin_of(shmcfg_snapshot *s)
{
	return (struct tpin *)((struct shmcfg_snapshot_view *)s)->tp;
}
static uint64_t word(shmcfg_snapshot *s, int k)
{
	return __atomic_load_n(&pin_of(s)->pub.w[k], __ATOMIC_SEQ_CST);
}
static uint64_t held_of(const uint64_t *w)
{
	return tp_held(__atomic_load_n(&w[TP_WORD], __ATOMIC_SEQ_CST), __atomic_load_n(&w[TP_FOREIGN], __ATOMIC_SEQ_CST));
}
static unsigned thread_entries(const shmcfg *h)
{
	unsigned n = 0;
	for (uint32_t i = 0; i < shmcfg__readers_hwm(h); i++)
		n += __atomic_load_n(&reader_at(h, i)->kind, __ATOMIC_RELAXED) == ENTRY_THREAD;
	return n;
}

static void count_alive(const shmcfg_reader *r, void *ud)
{
	*(int *)ud += r->alive;
}

/* A snapshot counts on a thread entry, not the process's; its release
 * leaves the pin on the generation (sticky), and the same pin serves the
 * next. */
static void test_counts_on_a_thread_entry(void **state)
{
	(void)state;
	const char *name = new_name("tp-count");
	shmcfg *h = keep(test_create(name, NULL));
	uint64_t gen;
	assert_int_equal(commit_n(h, 5, &gen), 0);
	shmcfg_snapshot *s, *again;
	int alive = 0;
	assert_int_equal(ACQ(h, &s), 0);
	assert_non_null(pin_of(s));
	assert_int_equal(((struct shmcfg_snapshot *)s)->pin, -1); /* no pin of the process's entry */
	assert_int_equal(thread_entries(h), 1);
	/* the process's (its commit's, for the writer lock) and the thread's:
	 * alive, though the process's own lock tests find no conflict */
	assert_int_equal(shmcfg_readers(h, count_alive, &alive), 2);
	assert_int_equal(alive, 2);
	assert_int_equal(snapshot_n(s), 5);
	assert_int_equal(PIN_TAG(word(s, TP_WORD)), GEN_TAG(gen));
	assert_int_equal(held_of(pin_of(s)->pub.w), 1);
	const uint64_t *w = pin_of(s)->pub.w;
	assert_null(REL(s));
	assert_int_equal(held_of(w), 0);
	assert_int_equal(PIN_TAG(__atomic_load_n(&w[TP_WORD], __ATOMIC_SEQ_CST)), GEN_TAG(gen)); /* sticky */
	/* the same pin, inline, and nested: one view counted twice */
	assert_int_equal(ACQ(h, &s), 0);
	assert_int_equal(ACQ(h, &again), 0);
	assert_ptr_equal(again, s);
	assert_int_equal(held_of(w), 2);
	assert_null(REL(again));
	assert_int_equal(held_of(w), 1);
	assert_null(REL(s));
	assert_int_equal(held_of(w), 0);
	assert_int_equal(thread_entries(h), 1);
	drop(h);
}

/* A snapshot held across a commit keeps its generation; the next one is of
 * the new generation, from the process's pins while the thread's holds the
 * old one, and from the thread's own pin again once it holds nothing. */
static void test_nested_across_a_commit(void **state)
{
	(void)state;
	const char *name = new_name("tp-nest");
	shmcfg *h = keep(test_create(name, NULL));
	assert_int_equal(commit_n(h, 1, NULL), 0);
	shmcfg_snapshot *old, *cur;
	assert_int_equal(ACQ(h, &old), 0);
	assert_int_equal(commit_n(h, 2, NULL), 0);
	assert_int_equal(ACQ(h, &cur), 0);
	assert_int_equal(snapshot_n(old), 1);
	assert_int_equal(snapshot_n(cur), 2);
	assert_null(((struct shmcfg_snapshot_view *)cur)->tp); /* the process's pin */
	assert_null(REL(cur));
	assert_null(REL(old));
	assert_int_equal(ACQ(h, &cur), 0);
	assert_non_null(pin_of(cur)); /* re-pinned */
	assert_int_equal(snapshot_n(cur), 2);
	assert_null(REL(cur));
	drop(h);
}

/* ------------------------------------------------------------------ */
/* A reader in another process and the writer                          */
/* ------------------------------------------------------------------ */

struct reader_arg {
	const char *name;
	int up, down; /* to the parent, from it */
	bool hold;    /* hold the snapshot while the parent commits */
	int64_t first, then; /* the n it reads first, and after the parent's go */
};

/* Pin (holding or not), say 'p' with its entry's index, wait for 'g', then
 * check the held snapshot and take a new one. */
static int reader_main(void *p)
{
	struct reader_arg *a = p;
	shmcfg *h = NULL;
	CHECK(shmcfg_attach(a->name, 0, NULL, &h) == 0, 2, "attach");
	shmcfg_snapshot *s;
	CHECK(ACQ(h, &s) == 0 && pin_of(s), 3, "a thread pin");
	CHECK(snapshot_n(s) == a->first, 4, "first read %" PRId64, snapshot_n(s));
	uint32_t entry = pin_of(s)->entry;
	if (!a->hold)
		REL(s);
	CHECK(write_full(a->up, &entry, sizeof entry) == 0, 5, "pipe");
	char m;
	CHECK(read_full(a->down, &m, 1, CHILD_TIMEOUT_MS) == 0 && m == 'g', 6, "no go");
	if (a->hold) {
		CHECK(snapshot_n(s) == a->first, 7, "the held snapshot changed: %" PRId64, snapshot_n(s));
		REL(s);
	}
	CHECK(ACQ(h, &s) == 0 && pin_of(s), 8, "a thread pin again");
	CHECK(snapshot_n(s) == a->then, 9, "then read %" PRId64 " not %" PRId64, snapshot_n(s), a->then);
	CHECK(__atomic_load_n(&pin_of(s)->pub.w[TP_REVOKED], __ATOMIC_SEQ_CST) == 0, 10, "revocation cleared");
	REL(s);
	shmcfg_close(h);
	return 0;
}

static pid_t start_reader(struct reader_arg *a, int fds[4], uint32_t *entry)
{
	assert_int_equal(pipe(fds), 0);
	assert_int_equal(pipe(fds + 2), 0);
	a->up = fds[1];
	a->down = fds[2];
	pid_t pid = spawn(reader_main, a);
	close(fds[1]);
	close(fds[2]);
	if (read_full(fds[0], entry, sizeof *entry, CHILD_TIMEOUT_MS))
		fail_msg("the reader did not pin");
	return pid;
}

static void go(int fds[4])
{
	char m = 'g';
	assert_int_equal(write_full(fds[3], &m, 1), 0);
	close(fds[0]);
	close(fds[3]);
}

/* A segment of two slots at n = 1, whose commits fail fast where a pin
 * holds the slot they need: every second commit needs the slot a reader
 * of the generation before pins. */
static shmcfg *two_slots(const char *tag, const char **name)
{
	*name = new_name(tag);
	shmcfg *h = keep(test_create(*name, &(shmcfg_create_opts){.slots = 2}));
	shmcfg_set_commit_timeout(h, SHORT_TIMEOUT_MS);
	assert_int_equal(commit_n(h, 1, NULL), 0);
	return h;
}

/* Two slots: the writer's second commit needs the slot an idle pin of
 * another process holds on to. It revokes the pin, and the reader's next
 * snapshot re-pins to the new generation. */
static void test_idle_pin_revoked(void **state)
{
	(void)state;
	const char *name;
	shmcfg *h = two_slots("tp-revoke", &name);
	struct reader_arg a = {.name = name, .first = 1, .then = 3};
	int fds[4];
	uint32_t entry;
	pid_t pid = start_reader(&a, fds, &entry);
	const uint64_t *w = reader_at(h, entry)->pins;
	assert_int_equal(__atomic_load_n(&reader_at(h, entry)->kind, __ATOMIC_RELAXED), ENTRY_THREAD);
	assert_int_equal(held_of(w), 0);
	assert_int_equal(commit_n(h, 2, NULL), 0); /* the free slot */
	assert_int_equal(__atomic_load_n(&w[TP_REVOKED], __ATOMIC_SEQ_CST), 0);
	int r = commit_n(h, 3, NULL); /* the pinned one */
	if (r)
		fail_msg("commit over an idle pin: %s: %s", shmcfg_strerror(r), shmcfg_errdetail());
	assert_true(__atomic_load_n(&w[TP_REVOKED], __ATOMIC_SEQ_CST) & TP_BY_WRITER);
	go(fds);
	assert_child_ok(pid);
	drop(h);
}

/* A pin that holds a snapshot is never taken: the commit that needs its
 * slot fails (busy, naming the reader), the snapshot reads what it read,
 * and once it is released the commit goes through. */
static void test_held_pin_kept(void **state)
{
	(void)state;
	const char *name;
	shmcfg *h = two_slots("tp-held", &name);
	struct reader_arg a = {.name = name, .hold = true, .first = 1, .then = 2};
	int fds[4];
	uint32_t entry;
	pid_t pid = start_reader(&a, fds, &entry);
	assert_int_equal(held_of(reader_at(h, entry)->pins), 1);
	assert_int_equal(commit_n(h, 2, NULL), 0);
	assert_int_equal(commit_n(h, 3, NULL), SHMCFG_E_BUSY);
	char pidtext[32];
	snprintf(pidtext, sizeof pidtext, "pid %d", (int)pid);
	assert_non_null(strstr(shmcfg_errdetail(), pidtext));
	go(fds);
	assert_child_ok(pid);
	assert_int_equal(commit_n(h, 3, NULL), 0);
	drop(h);
}

/* A reader killed holding a snapshot on its thread pin: the writer reaps
 * its entries and takes the slot. */
static void test_reader_killed_holding(void **state)
{
	(void)state;
	const char *name;
	shmcfg *h = two_slots("tp-killed", &name);
	struct reader_arg a = {.name = name, .hold = true, .first = 1, .then = 2};
	int fds[4];
	uint32_t entry;
	pid_t pid = start_reader(&a, fds, &entry);
	assert_int_equal(kill(pid, SIGKILL), 0);
	assert_child_killed(pid);
	close(fds[0]);
	close(fds[3]);
	assert_int_equal(commit_n(h, 2, NULL), 0);
	int r = commit_n(h, 3, NULL);
	if (r)
		fail_msg("commit after the reader's death: %s: %s", shmcfg_strerror(r), shmcfg_errdetail());
	assert_int_equal(thread_entries(h), 0); /* reaped */
	drop(h);
}

struct killed_arg {
	const char *name;
	const char *point;
};

/* Take snapshots across a commit of its own until the fault point kills it. */
static int repin_killed_main(void *p)
{
	struct killed_arg *a = p;
	shmcfg *h = NULL;
	CHECK(shmcfg_attach(a->name, 0, NULL, &h) == 0, 2, "attach");
	shmcfg_snapshot *s;
	CHECK(ACQ(h, &s) == 0, 3, "a first snapshot");
	REL(s);
	CHECK(commit_n(h, 2, NULL) == 0, 4, "commit");
	setenv("SHMCFG_FAULT", a->point, 1);
	if (ACQ(h, &s) == 0) /* a new generation: the re-pin */
		REL(s);
	return 5;
}

/* A reader killed in its re-pin, before and after its exchange: the
 * writer reaps its entry and commits on both slots. */
static void test_reader_killed_repinning(void **state)
{
	(void)state;
	static const char *const points[] = {"snapshot.repin", "snapshot.repinned"};
	for (unsigned k = 0; k < 2; k++) {
		const char *name;
		shmcfg *h = two_slots(k ? "tp-repin2" : "tp-repin1", &name);
		struct killed_arg a = {name, points[k]};
		pid_t pid = spawn(repin_killed_main, &a);
		assert_child_killed(pid);
		for (int64_t n = 3; n < 6; n++) {
			int r = commit_n(h, n, NULL);
			if (r)
				fail_msg("commit %" PRId64 " after a reader's death at %s: %s: %s", n, points[k],
					 shmcfg_strerror(r), shmcfg_errdetail());
		}
		assert_int_equal(thread_entries(h), 0);
		assert_int_equal(shmcfg_check(h, true, print_problem, NULL), 0);
		drop(h);
	}
}

static int fault_writer_main(void *p)
{
	const char *name = p;
	shmcfg *h = NULL;
	CHECK(shmcfg_attach(name, 0, NULL, &h) == 0, 2, "attach");
	CHECK(commit_n(h, 2, NULL) == 0, 3, "the free slot's commit");
	setenv("SHMCFG_FAULT", "commit.revoked", 1);
	(void)commit_n(h, 3, NULL);
	return 4; /* it should have died after its revocations, before its membarrier */
}

/* A writer killed after it stored its revocations, before its membarrier:
 * the next writer runs its own before it trusts a count, and the reader
 * re-pins to what it commits. */
static void test_writer_killed_revoking(void **state)
{
	(void)state;
	const char *name;
	shmcfg *h = two_slots("tp-wkill", &name);
	struct reader_arg a = {.name = name, .first = 1, .then = 4};
	int fds[4];
	uint32_t entry;
	pid_t pid = start_reader(&a, fds, &entry);
	pid_t w = spawn(fault_writer_main, (void *)name);
	assert_child_killed(w);
	assert_true(__atomic_load_n(&reader_at(h, entry)->pins[TP_REVOKED], __ATOMIC_SEQ_CST) & TP_BY_WRITER);
	int r = commit_n(h, 4, NULL);
	if (r)
		fail_msg("commit after the revoking writer's death: %s: %s", shmcfg_strerror(r), shmcfg_errdetail());
	go(fds);
	assert_child_ok(pid);
	drop(h);
}

/* ------------------------------------------------------------------ */
/* Threads                                                             */
/* ------------------------------------------------------------------ */

struct handoff {
	shmcfg *h;
	shmcfg_snapshot *s;
	int64_t n;
};

/* Read x->s's value and release it, on another thread than the pin's owner
 * (after the main thread closed the handle, too: the snapshot still reads). */
static void *release_it(void *p)
{
	struct handoff *x = p;
	x->n = snapshot_n(x->s);
	REL(x->s);
	return NULL;
}

/* Another thread releases a snapshot of the pin: it counts apart (the
 * owner's word keeps one writer), the pin holds nothing after it, and the
 * owner's next snapshot re-pins as usual. A release of the same snapshot
 * again is refused and logged, the counts as they were. */
static void test_release_by_another_thread(void **state)
{
	(void)state;
	const char *name = new_name("tp-foreign");
	shmcfg *h = keep(test_create(name, NULL));
	assert_int_equal(commit_n(h, 7, NULL), 0);
	struct handoff x = {h, NULL, 0};
	assert_int_equal(ACQ(h, &x.s), 0);
	const uint64_t *w = pin_of(x.s)->pub.w;
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, release_it, &x), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(x.n, 7);
	assert_int_equal(__atomic_load_n(&w[TP_FOREIGN], __ATOMIC_SEQ_CST), 1);
	assert_int_equal(held_of(w), 0);
	uint64_t before = __atomic_load_n(&w[TP_WORD], __ATOMIC_SEQ_CST);
	assert_null(REL(x.s)); /* released twice */
	assert_int_equal(__atomic_load_n(&w[TP_WORD], __ATOMIC_SEQ_CST), before);
	assert_int_equal(held_of(w), 0);
	assert_int_equal(commit_n(h, 8, NULL), 0);
	shmcfg_snapshot *s;
	assert_int_equal(ACQ(h, &s), 0);
	assert_ptr_equal(pin_of(s)->pub.w, w);
	assert_int_equal(snapshot_n(s), 8);
	assert_int_equal(held_of(w), 1);
	assert_null(REL(s));
	assert_int_equal(held_of(w), 0);
	drop(h);
}

static void *pin_and_exit(void *p)
{
	struct handoff *x = p;
	shmcfg_snapshot *s;
	if (ACQ(x->h, &s) == 0) {
		x->n = snapshot_n(s);
		x->s = s;
		REL(s);
	}
	return NULL;
}

/* A thread that exits leaves its pin unpinned (it holds nothing), and the
 * next thread adopts it rather than claiming another entry. */
static void test_thread_exit(void **state)
{
	(void)state;
	const char *name = new_name("tp-exit");
	shmcfg *h = keep(test_create(name, NULL));
	assert_int_equal(commit_n(h, 3, NULL), 0);
	struct handoff x = {h, NULL, 0};
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, pin_and_exit, &x), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(x.n, 3);
	assert_int_equal(thread_entries(h), 1);
	const uint64_t *w = pin_of(x.s)->pub.w;
	assert_int_equal(PIN_TAG(__atomic_load_n(&w[TP_WORD], __ATOMIC_SEQ_CST)), 0); /* pins nothing */
	struct handoff y = {h, NULL, 0};
	assert_int_equal(pthread_create(&t, NULL, pin_and_exit, &y), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(y.n, 3);
	assert_ptr_equal(pin_of(y.s)->pub.w, w); /* adopted */
	assert_int_equal(thread_entries(h), 1);
	drop(h);
}

/* A close with a snapshot held on a thread pin ends at its release (here
 * by another thread, after the close), not before: the mapping stays
 * until then. */
static void test_close_waits_for_the_release(void **state)
{
	(void)state;
	const char *name = new_name("tp-close");
	int before = maps_of(name);
	shmcfg *h = test_create(name, NULL); /* closed here, not by the teardown */
	assert_int_equal(commit_n(h, 9, NULL), 0);
	struct handoff x = {h, NULL, 0};
	assert_int_equal(ACQ(h, &x.s), 0);
	assert_non_null(pin_of(x.s));
	shmcfg_close(h);
	assert_true(maps_of(name) > before);
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, release_it, &x), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(x.n, 9);
	assert_int_equal(maps_of(name), before);
	/* and one released by its own thread after the close */
	assert_int_equal(shmcfg_attach(name, 0, NULL, &h), 0);
	assert_int_equal(ACQ(h, &x.s), 0);
	shmcfg_close(h);
	assert_true(maps_of(name) > before);
	assert_int_equal(snapshot_n(x.s), 9);
	assert_null(REL(x.s));
	assert_int_equal(maps_of(name), before);
}

struct fork_arg {
	struct handoff *x;
	const char *name;
	uint64_t *w;  /* the parent's thread entry */
	int up, down; /* to the parent, from it */
};

static int grandchild(void *p)
{
	(void)p;
	return 0;
}

/* The inherited snapshot reads and its release leaves the parent's count;
 * a snapshot of the parent's handle is refused; and once the child takes
 * snapshots of a handle of its own (it registers for membarrier) and forks
 * in turn, its fork handlers leave the parent's entry alone (the parent
 * set its revocation word to a fork's mark, which an AND of the child's
 * would clear). */
static int child_releases(void *p)
{
	struct fork_arg *a = p;
	uint64_t before = __atomic_load_n(&a->w[TP_WORD], __ATOMIC_SEQ_CST);
	CHECK(snapshot_n(a->x->s) == 4, 2, "the inherited snapshot reads");
	REL(a->x->s); /* the parent's count: left alone */
	CHECK(__atomic_load_n(&a->w[TP_WORD], __ATOMIC_SEQ_CST) == before, 3, "the parent's word");
	shmcfg_snapshot *s;
	CHECK(ACQ(a->x->h, &s) == SHMCFG_E_FORKED, 4, "a snapshot of the parent's handle");
	shmcfg *own = NULL;
	CHECK(shmcfg_attach(a->name, 0, NULL, &own) == 0, 5, "attach");
	CHECK(ACQ(own, &s) == 0 && pin_of(s), 6, "a thread pin of its own");
	REL(s);
	char m = 'r';
	CHECK(write_full(a->up, &m, 1) == 0, 7, "pipe");
	CHECK(read_full(a->down, &m, 1, CHILD_TIMEOUT_MS) == 0 && m == 'g', 8, "no go");
	pid_t g = fork();
	if (g == 0)
		_exit(grandchild(NULL));
	CHECK(g > 0 && reap_within(g, CHILD_TIMEOUT_MS) == 0, 9, "the grandchild");
	CHECK(__atomic_load_n(&a->w[TP_REVOKED], __ATOMIC_SEQ_CST) == TP_BY_FORK, 10, "the parent's revocation word: %llu",
	      (unsigned long long)__atomic_load_n(&a->w[TP_REVOKED], __ATOMIC_SEQ_CST));
	shmcfg_close(own);
	return 0;
}

/* fork(): the child's release of a snapshot its parent's thread holds
 * leaves the parent's count alone, it takes none on the handle, and its
 * own forks do not touch the parent's entry. */
static void test_fork(void **state)
{
	(void)state;
	const char *name = new_name("tp-fork");
	shmcfg *h = keep(test_create(name, NULL));
	assert_int_equal(commit_n(h, 4, NULL), 0);
	struct handoff x = {h, NULL, 0};
	assert_int_equal(ACQ(h, &x.s), 0);
	int up[2], down[2];
	assert_int_equal(pipe(up), 0);
	assert_int_equal(pipe(down), 0);
	struct fork_arg a = {&x, name, pin_of(x.s)->pub.w, up[1], down[0]};
	pid_t pid = spawn(child_releases, &a);
	close(up[1]);
	close(down[0]);
	char m = 0;
	assert_int_equal(read_full(up[0], &m, 1, CHILD_TIMEOUT_MS), 0);
	assert_int_equal(__atomic_load_n(&a.w[TP_REVOKED], __ATOMIC_SEQ_CST), 0); /* the spawn's fork mark, cleared */
	__atomic_store_n(&a.w[TP_REVOKED], TP_BY_FORK, __ATOMIC_SEQ_CST);
	m = 'g';
	assert_int_equal(write_full(down[1], &m, 1), 0);
	assert_child_ok(pid);
	__atomic_store_n(&a.w[TP_REVOKED], 0, __ATOMIC_SEQ_CST);
	close(up[0]);
	close(down[1]);
	assert_int_equal(held_of(a.w), 1);
	assert_null(REL(x.s));
	assert_int_equal(held_of(a.w), 0);
	drop(h);
}

/* SHMCFG_THREAD_PINS=0: the process's pins, as before thread pins. */
static void test_thread_pins_off(void **state)
{
	(void)state;
	const char *name = new_name("tp-off");
	setenv("SHMCFG_THREAD_PINS", "0", 1);
	shmcfg *h = keep(test_create(name, NULL));
	shmcfg_snapshot *s;
	assert_int_equal(ACQ(h, &s), 0);
	assert_null(((struct shmcfg_snapshot_view *)s)->tp);
	assert_true(h->reader >= 0);
	assert_int_equal(thread_entries(h), 0);
	assert_null(REL(s));
	unsetenv("SHMCFG_THREAD_PINS");
	/* the thread keeps to the process's pins on that handle, not on another */
	assert_int_equal(ACQ(h, &s), 0);
	assert_null(((struct shmcfg_snapshot_view *)s)->tp);
	assert_null(REL(s));
	shmcfg *other = NULL;
	assert_int_equal(shmcfg_attach(name, 0, NULL, &other), 0);
	keep(other);
	assert_int_equal(ACQ(other, &s), 0);
	assert_non_null(((struct shmcfg_snapshot_view *)s)->tp);
	assert_null(REL(s));
	drop(other);
	drop(h);
}

/* ------------------------------------------------------------------ */
/* Under load                                                          */
/* ------------------------------------------------------------------ */

struct mill {
	shmcfg *h;
	int *stop;
	shmcfg_snapshot **mailbox; /* a snapshot handed to the other reader */
	long reads, torn, backwards;
};

/* Read until told to stop: every snapshot whole (a = n, b = -n, c = n),
 * never older than the last; every 8th nested, every 16th handed to the
 * other reader to release. */
static void *mill_main(void *p)
{
	struct mill *m = p;
	int64_t last = 0;
	for (long i = 0; !__atomic_load_n(m->stop, __ATOMIC_ACQUIRE); i++) {
		shmcfg_snapshot *s, *n2;
		if (ACQ(m->h, &s)) {
			m->torn++;
			continue;
		}
		int64_t v = snapshot_n(s);
		m->torn += v < 0;
		m->backwards += v < last;
		last = v > last ? v : last;
		if (i % 8 == 0 && ACQ(m->h, &n2) == 0) {
			int64_t v2 = snapshot_n(n2);
			m->torn += v2 < 0;
			m->backwards += v2 < v;
			REL(n2);
		}
		shmcfg_snapshot *give = i % 16 == 0 ? s : NULL, *got;
		if (give && !__atomic_compare_exchange_n(m->mailbox, &(shmcfg_snapshot *){NULL}, give, false,
							 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			give = NULL;
		if (!give)
			REL(s);
		if ((got = __atomic_exchange_n(m->mailbox, NULL, __ATOMIC_ACQ_REL)))
			REL(got);
		m->reads++;
	}
	return NULL;
}

static int mill_child(void *p)
{
	const char *name = p;
	shmcfg *h = NULL;
	CHECK(shmcfg_attach(name, 0, NULL, &h) == 0, 2, "attach");
	int64_t last = 0;
	for (uint64_t until = mono_ms() + 300; mono_ms() < until;) {
		shmcfg_snapshot *s;
		CHECK(ACQ(h, &s) == 0, 3, "snapshot");
		int64_t v = snapshot_n(s);
		CHECK(v >= last, 4, "torn or backwards: %" PRId64 " after %" PRId64, v, last);
		last = v;
		REL(s);
	}
	shmcfg_close(h);
	return 0;
}

/* Two slots, two reader threads of this process and a reader process,
 * each pinning, nesting and handing snapshots over, against a writer
 * whose every commit needs a slot some reader pins: every commit goes
 * through (revoking idle pins), no snapshot is ever torn or older than
 * one taken before it. */
static void test_readers_against_the_writer(void **state)
{
	(void)state;
	const char *name = new_name("tp-mill");
	shmcfg *h = keep(test_create(name, &(shmcfg_create_opts){.slots = 2}));
	assert_int_equal(commit_n(h, 1, NULL), 0);
	int stop = 0;
	shmcfg_snapshot *box = NULL;
	struct mill m[2] = {{h, &stop, &box, 0, 0, 0}, {h, &stop, &box, 0, 0, 0}};
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&t[i], NULL, mill_main, &m[i]), 0);
	pid_t child = spawn(mill_child, (void *)name);
	/* a reader holds its snapshots for a few instructions: the wait for
	 * one is long only on a machine that does not run it (a loaded one,
	 * valgrind's scheduler) */
	shmcfg_set_commit_timeout(h, CHILD_TIMEOUT_MS);
	int64_t n = 2;
	int r = 0;
	char why[512] = "";
	for (uint64_t until = mono_ms() + 400; !r && (mono_ms() < until || n < 200); n++)
		if ((r = commit_n(h, n, NULL)))
			snprintf(why, sizeof why, "commit %" PRId64 ": %s: %s", n, shmcfg_strerror(r), shmcfg_errdetail());
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	if (r)
		fail_msg("%s", why);
	shmcfg_snapshot *left = __atomic_exchange_n(&box, NULL, __ATOMIC_ACQ_REL);
	if (left)
		REL(left);
	assert_child_ok(child);
	for (int i = 0; i < 2; i++) {
		assert_true(m[i].reads > 0);
		assert_int_equal(m[i].torn, 0);
		assert_int_equal(m[i].backwards, 0);
	}
	drop(h);
}

int main(void)
{
	unsetenv("SHMCFG_FAULT");
	unsetenv("SHMCFG_THREAD_PINS");
	if (getenv("TEST_FILTER"))
		cmocka_set_test_filter(getenv("TEST_FILTER"));
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_counts_on_a_thread_entry, teardown),
		cmocka_unit_test_teardown(test_nested_across_a_commit, teardown),
		cmocka_unit_test_teardown(test_idle_pin_revoked, teardown),
		cmocka_unit_test_teardown(test_held_pin_kept, teardown),
		cmocka_unit_test_teardown(test_reader_killed_holding, teardown),
		cmocka_unit_test_teardown(test_writer_killed_revoking, teardown),
		cmocka_unit_test_teardown(test_reader_killed_repinning, teardown),
		cmocka_unit_test_teardown(test_release_by_another_thread, teardown),
		cmocka_unit_test_teardown(test_thread_exit, teardown),
		cmocka_unit_test_teardown(test_close_waits_for_the_release, teardown),
#if !defined(__SANITIZE_THREAD__)
		cmocka_unit_test_teardown(test_fork, teardown),
#endif
		cmocka_unit_test_teardown(test_readers_against_the_writer, teardown),
		/* last: the main thread keeps to the process's pins after it */
		cmocka_unit_test_teardown(test_thread_pins_off, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
