/* SPDX-License-Identifier: MIT */
/* Processes that die: readers killed with -9 while they pin a generation,
 * readers stopped while they pin one, writers killed at every point of a
 * commit, creators killed at every point of a creation, and reader tables
 * full of dead entries. Everything is real: shared memory, fork(), SIGKILL
 * (SHMCFG_FAULT makes the library raise SIGKILL at a named point).
 *
 * Children never use cmocka: they report failure through their exit status
 * (and a "# child ..." line on stderr), and the parent asserts on it. The
 * parent reads through read-only handles (copying snapshots) and takes no
 * snapshot of a read-write handle: see test_multiproc.c,
 * test_fork_after_parent_snapshots, for the library bug that would make its
 * children hang. */

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>

#include "internal.h"
#include "slot.h" /* shmcfg__heap_verify */

#include "common.h"
#include "proc.h"

/* ------------------------------------------------------------------ */
/* Children, pipes and cleanup                                        */
/* ------------------------------------------------------------------ */

















/* A pair of pipes between the parent and one child. */
struct chan {
	int up[2];   /* child -> parent */
	int down[2]; /* parent -> child */
};

static void chan_open(struct chan *c)
{
	assert_int_equal(pipe(c->up), 0);
	assert_int_equal(pipe(c->down), 0);
}

/* In the parent after the fork: keep up[0] and down[1]. */
static void chan_parent(struct chan *c)
{
	close(c->up[1]);
	close(c->down[0]);
	c->up[1] = c->down[0] = -1;
}

static void chan_close(struct chan *c)
{
	for (int i = 0; i < 2; i++) {
		if (c->up[i] >= 0)
			close(c->up[i]);
		if (c->down[i] >= 0)
			close(c->down[i]);
	}
}

static void send_cmd(struct chan *c, char m)
{
	assert_int_equal(write_full(c->down[1], &m, 1), 0);
}

static char recv_msg(struct chan *c)
{
	char m = 0;
	if (read_full(c->up[0], &m, 1, CHILD_TIMEOUT_MS))
		fail_msg("no message from the child (it died or hung)");
	return m;
}


/* ------------------------------------------------------------------ */
/* Values: a = n, b = -n, c = str(n), committed together              */


/* Parent-side: the current generation and its n through a read-only
 * handle, asserting that the generation is whole. */
/* What a generated accessor of an int option reads: the accessors' copy,
 * else the slots, else the slow path (include/shmcfg/proven.h). */
static int64_t accessor_int(const shmcfg *h, shmcfg_opt o)
{
	uint64_t bits;
	return shmcfg__read_proven(h, o, &bits) ? (int64_t)bits : shmcfg__proven_slow_int(h, o, INT64_MIN);
}

static int64_t current_n(shmcfg *ro, uint64_t *gen)
{
	assert_true(shmcfg_readonly(ro));
	shmcfg_snapshot *s;
	assert_int_equal(shmcfg_snapshot_acquire(ro, &s), 0);
	uint64_t g = shmcfg_snapshot_generation(s);
	int64_t n = snapshot_n(s);
	shmcfg_snapshot_release(s);
	if (n < 0)
		fail_msg("generation %" PRIu64 " is not whole (code %" PRId64 ")", g, n);
	int64_t inl = -1;
	assert_int_equal(shmcfg_get_int(ro, T_A, &inl), 0);
	assert_int_equal(inl, n);
	assert_int_equal(accessor_int(ro, T_A), n);
	if (gen)
		*gen = g;
	return n;
}

/* ------------------------------------------------------------------ */
/* Reader table inspection                                            */
/* ------------------------------------------------------------------ */

struct entry_of {
	pid_t pid;
	int found;
	bool alive;
	bool pins_gen;  /* one of its pins is `gen` */
	uint64_t gen;
};

static void find_entry(const shmcfg_reader *r, void *ud)
{
	struct entry_of *e = ud;
	if (r->pid != e->pid)
		return;
	e->found++;
	e->alive = r->alive;
	for (int k = 0; k < 4; k++)
		if (r->pins[k] == e->gen)
			e->pins_gen = true;
}

static struct entry_of entry_of(shmcfg *h, pid_t pid, uint64_t gen)
{
	struct entry_of e = {.pid = pid, .gen = gen};
	(void)shmcfg_readers(h, find_entry, &e);
	return e;
}

/* ------------------------------------------------------------------ */
/* 1. Readers that die or stop while they pin a generation            */
/* ------------------------------------------------------------------ */

struct pin_arg {
	const char *name;
	struct chan *c;
};

/*
 * Pin the current generation (1) with a snapshot and report 'p'; then obey
 * the parent: 'r' releases that snapshot, takes one of the newer generation
 * (whose view takes a pin that holds nothing: the old view's, whose tag goes) and
 * releases it too, reporting 'R'; 'q' closes and exits 0.
 */
static int pin_main(void *p)
{
	struct pin_arg *a = p;
	shmcfg *h = NULL;
	int r = shmcfg_attach(a->name, 0, NULL, &h);
	CHECK(r == 0, 2, "attach: %s", shmcfg_strerror(r));
	shmcfg_snapshot *s;
	r = shmcfg_snapshot_acquire(h, &s);
	CHECK(r == 0, 3, "snapshot_acquire: %s", shmcfg_strerror(r));
	CHECK(shmcfg_snapshot_generation(s) == 1, 4, "generation %" PRIu64, shmcfg_snapshot_generation(s));
	CHECK(snapshot_n(s) == 0, 5, "n=%" PRId64, snapshot_n(s));
	char m = 'p';
	CHECK(write_full(a->c->up[1], &m, 1) == 0, 6, "pipe");
	for (;;) {
		CHECK(read_full(a->c->down[0], &m, 1, CHILD_TIMEOUT_MS) == 0, 7, "no command");
		if (m == 'r') {
			/* the old snapshot is intact: its slot was pinned */
			CHECK(shmcfg_snapshot_generation(s) == 1 && snapshot_n(s) == 0, 8,
			      "pinned snapshot changed: generation %" PRIu64 " n=%" PRId64,
			      shmcfg_snapshot_generation(s), snapshot_n(s));
			shmcfg_snapshot_release(s);
			r = shmcfg_snapshot_acquire(h, &s);
			CHECK(r == 0, 9, "snapshot_acquire: %s", shmcfg_strerror(r));
			uint64_t g = shmcfg_snapshot_generation(s);
			int64_t n = snapshot_n(s);
			shmcfg_snapshot_release(s);
			CHECK(g == 2 && n == 1, 10, "generation %" PRIu64 " n=%" PRId64, g, n);
			m = 'R';
			CHECK(write_full(a->c->up[1], &m, 1) == 0, 11, "pipe");
		} else if (m == 'q') {
			shmcfg_close(h);
			return 0;
		} else {
			CHECK(false, 12, "unknown command %c", m);
		}
	}
}

/* Two slots, the child pins generation 1 in slot 0, the parent commits
 * generation 2 into slot 1: the next commit needs slot 0. */
static pid_t start_pinning_child(const char *name, shmcfg *h, struct chan *c, struct pin_arg *a)
{
	chan_open(c);
	*a = (struct pin_arg){name, c};
	pid_t pid = spawn(pin_main, a);
	chan_parent(c);
	assert_int_equal(recv_msg(c), 'p');
	struct entry_of e = entry_of(h, pid, 1);
	assert_int_equal(e.found, 1);
	assert_true(e.alive);
	assert_true(e.pins_gen);
	uint64_t gen = 0;
	assert_int_equal(commit_n(h, 1, &gen), 0);
	assert_int_equal(gen, 2);
	return pid;
}

static void test_dead_pinned_reader_is_reclaimed(void **state)
{
	const char *name = new_name("crash-deadpin");
	shmcfg *h = keep(test_create(name, &(shmcfg_create_opts){.slots = 2}));
	shmcfg *ro = attach_ro(name);
	/* short: reclaiming the dead entry must not need waiting */
	shmcfg_set_commit_timeout(h, 200);
	struct chan c;
	struct pin_arg a;
	pid_t pid = start_pinning_child(name, h, &c, &a);
	assert_int_equal(kill(pid, SIGKILL), 0);
	assert_child_killed(pid);
	/* before any reclamation: the entry is still there, dead, pinning 1 */
	struct entry_of e = entry_of(h, pid, 1);
	assert_int_equal(e.found, 1);
	assert_false(e.alive);
	assert_true(e.pins_gen);
	/* a read-only handle tells dead from alive too */
	e = entry_of(ro, pid, 1);
	assert_int_equal(e.found, 1);
	assert_false(e.alive);
	/* this commit needs the slot the dead child pinned */
	uint64_t gen = 0;
	int r = commit_n(h, 2, &gen);
	if (r)
		fail_msg("commit after the pinning reader died: %s: %s", shmcfg_strerror(r),
			 shmcfg_errdetail());
	assert_int_equal(gen, 3);
	assert_int_equal(entry_of(h, pid, 1).found, 0);
	assert_int_equal(current_n(ro, &gen), 2);
	assert_int_equal(gen, 3);
	assert_int_equal(shmcfg_check(h, true, print_problem, NULL), 0);
	chan_close(&c);
	drop(ro);
	drop(h);
}

/* A stopped reader keeps its pin: the commit fails with SHMCFG_E_BUSY naming it. */
static pid_t stopped_reader_blocks_commit(const char *name, shmcfg *h, shmcfg *ro, struct chan *c,
					  struct pin_arg *a)
{
	pid_t pid = start_pinning_child(name, h, c, a);
	stop_child(pid);
	shmcfg_set_commit_timeout(h, 200);
	uint64_t gen = 0;
	int r = commit_n(h, 2, &gen);
	assert_int_equal(r, SHMCFG_E_BUSY);
	char who[32];
	snprintf(who, sizeof who, "pid %d (", (int)pid);
	if (!strstr(shmcfg_errdetail(), who))
		fail_msg("busy detail does not name %s: %s", who, shmcfg_errdetail());
	/* stopped is alive: nothing was reclaimed, nothing published */
	struct entry_of e = entry_of(h, pid, 1);
	assert_int_equal(e.found, 1);
	assert_true(e.alive);
	assert_true(e.pins_gen);
	assert_int_equal(current_n(ro, &gen), 1);
	assert_int_equal(gen, 2);
	/* a commit that changes nothing needs no slot: it returns (0) at once
	 * even with every spare slot pinned */
	{
		gen = 0;
		r = commit_n(h, 1, &gen); /* the values generation 2 already holds */
		if (r != 0)
			fail_msg("no-op commit with every spare slot pinned: %d (%s): %s", r,
				 shmcfg_errname(r), shmcfg_errdetail());
		assert_int_equal(gen, 2);
	}
	return pid;
}

static void test_stopped_reader_busy_then_release(void **state)
{
	const char *name = new_name("crash-stop-rel");
	shmcfg *h = keep(test_create(name, &(shmcfg_create_opts){.slots = 2}));
	shmcfg *ro = attach_ro(name);
	struct chan c;
	struct pin_arg a;
	pid_t pid = stopped_reader_blocks_commit(name, h, ro, &c, &a);
	assert_int_equal(kill(pid, SIGCONT), 0);
	send_cmd(&c, 'r');
	assert_int_equal(recv_msg(&c), 'R');
	/* the child's count on its old view is gone: a commit waiting
	 * (boundedly) for the slot gets it */
	shmcfg_set_commit_timeout(h, 10000);
	uint64_t gen = 0;
	int r = commit_n(h, 2, &gen);
	if (r)
		fail_msg("commit after the reader moved on: %s: %s", shmcfg_strerror(r), shmcfg_errdetail());
	assert_int_equal(gen, 3);
	assert_int_equal(current_n(ro, &gen), 2);
	assert_int_equal(gen, 3);
	/* the child is alive and kept its entry, now pinning generation 2 */
	struct entry_of e = entry_of(h, pid, 2);
	assert_int_equal(e.found, 1);
	assert_true(e.alive);
	assert_true(e.pins_gen);
	/* its old view's pin was reused for the new one (an idle process's
	 * pins block no commit anyway, so the commit above did not wait) */
	uint64_t deadline = mono_ms() + CHILD_TIMEOUT_MS;
	while (entry_of(h, pid, 1).pins_gen && mono_ms() < deadline)
		usleep(1000);
	assert_false(entry_of(h, pid, 1).pins_gen);
	send_cmd(&c, 'q');
	assert_child_ok(pid);
	assert_int_equal(entry_of(h, pid, 2).found, 0); /* it released its entry on close */
	chan_close(&c);
	drop(ro);
	drop(h);
}

static void test_stopped_reader_busy_then_killed(void **state)
{
	const char *name = new_name("crash-stop-kill");
	shmcfg *h = keep(test_create(name, &(shmcfg_create_opts){.slots = 2}));
	shmcfg *ro = attach_ro(name);
	struct chan c;
	struct pin_arg a;
	pid_t pid = stopped_reader_blocks_commit(name, h, ro, &c, &a);
	assert_int_equal(kill(pid, SIGKILL), 0); /* a stopped process dies of SIGKILL too */
	assert_child_killed(pid);
	uint64_t gen = 0;
	int r = commit_n(h, 2, &gen);
	if (r)
		fail_msg("commit after the stopped reader was killed: %s: %s", shmcfg_strerror(r),
			 shmcfg_errdetail());
	assert_int_equal(gen, 3);
	assert_int_equal(current_n(ro, &gen), 2);
	assert_int_equal(gen, 3);
	assert_int_equal(entry_of(h, pid, 1).found, 0);
	chan_close(&c);
	drop(ro);
	drop(h);
}

/* ------------------------------------------------------------------ */
/* 2. A writer killed at each point of a commit                       */
/* ------------------------------------------------------------------ */

struct fault_arg {
	const char *name;
	const char *point;
};

static int fault_writer_main(void *p)
{
	struct fault_arg *a = p;
	shmcfg *h = NULL;
	int r = shmcfg_attach(a->name, 0, NULL, &h);
	CHECK(r == 0, 2, "attach: %s", shmcfg_strerror(r));
	setenv("SHMCFG_FAULT", a->point, 1);
	r = commit_n(h, 12345, NULL);
	CHECK(false, 10, "commit returned %d (%s): the fault point %s never fired", r,
	      shmcfg_strerror(r), a->point);
}

static void count_reaped(const shmcfg_reader *r, void *ud)
{
	struct entry_of *e = ud;
	if (r->pid == e->pid)
		e->found++;
}

static void test_writer_killed_at(void **state)
{
	const char *point = *state;
	const bool published = strcmp(point, "commit.published") == 0;
	/* killed inside the accessors' copy's write (publish.c, W1..W3) */
	const bool copy_open = published || strcmp(point, "commit.copy") == 0;
	const char *name = new_name("crash-writer");
	shmcfg *h = keep(test_create(name, NULL));
	shmcfg *ro = attach_ro(name);
	uint64_t gen = 0;
	assert_int_equal(commit_n(h, 1, &gen), 0);
	assert_int_equal(gen, 2);
	struct fault_arg a = {name, point};
	pid_t pid = spawn(fault_writer_main, &a);
	assert_child_killed(pid);
	/* the segment is sound; the accessors' copy left dirty, T_A's block
	 * odd, by a death inside its write (the accessors read the slots) */
	assert_int_equal(shmcfg_check(h, true, print_problem, NULL), 0);
	assert_int_equal(shmcfg_check(ro, true, print_problem, NULL), 0);
	assert_int_equal(h->hdr->copy_dirty, copy_open);
	assert_int_equal(__atomic_load_n(copy_block(h, T_A), __ATOMIC_ACQUIRE) & 1, copy_open);
	/* before the publication nothing changed; after it, all of it did */
	int64_t n = current_n(ro, &gen);
	if (published) {
		assert_int_equal(gen, 3);
		assert_int_equal(n, 12345);
	} else {
		assert_int_equal(gen, 2);
		assert_int_equal(n, 1);
		assert_int_equal(shmcfg_generation(h), 2);
		/* the commit log does not know generation 3 either: the dead
		 * writer's record of it was never published */
		{
			shmcfg_commit ci3;
			int r3 = shmcfg_commit_info(h, 3, &ci3);
			if (r3 != -ENOENT)
				fail_msg("commit_info(3) after a death at %s: %d (pid %d), but generation 3 "
					 "was never published", point, r3, (int)ci3.pid);
		}
	}
	int64_t inl = -1;
	assert_int_equal(shmcfg_get_int(h, T_A, &inl), 0);
	assert_int_equal(inl, n);
	/* the dead writer's reader entry (its writer lock's owner) is reaped;
	 * its lock still names it */
	struct entry_of e = {.pid = pid};
	assert_int_equal(shmcfg_gc(h, count_reaped, &e), 1);
	assert_int_equal(e.found, 1);
	/* the owner's entry is free: a commit takes the lock at once (else
	 * SHMCFG_E_LOCKED after the timeout) */
	shmcfg_set_commit_timeout(h, 1000);
	uint64_t g2 = 0;
	int r = commit_n(h, 777, &g2);
	if (r)
		fail_msg("commit after a writer died at %s: %s: %s", point, shmcfg_strerror(r),
			 shmcfg_errdetail());
	assert_int_equal(g2, gen + 1);
	assert_int_equal(current_n(ro, &gen), 777);
	assert_int_equal(gen, g2);
	/* the next commit rewrote the copy whole: every block even (check
	 * compares each with the current slot, option by option) */
	assert_int_equal(h->hdr->copy_dirty, 0);
	for (uint32_t o = 0; o < T_COUNT; o += SHMCFG__COPY_PER_BLOCK)
		assert_int_equal(__atomic_load_n(copy_block(h, o), __ATOMIC_ACQUIRE) & 1, 0);
	shmcfg_commit ci;
	assert_int_equal(shmcfg_commit_info(h, g2, &ci), 0);
	assert_int_equal(ci.pid, getpid());
	assert_int_equal(shmcfg_check(h, true, print_problem, NULL), 0);
	/* and a fresh process sees it: attach and read anew */
	shmcfg *h2 = NULL;
	assert_int_equal(shmcfg_attach(name, SHMCFG_ATTACH_RDONLY, NULL, &h2), 0);
	assert_int_equal(current_n(keep(h2), &gen), 777);
	drop(h2);
	/* the value heap's counts agree with the slots: the chunk a writer
	 * carved before it died is free again, nothing leaks over commits */
	if (shmcfg__heap_verify(h))
		fail_msg("after a writer died at %s: %s", point, shmcfg_errdetail());
	uint64_t live = h->hdr->heap_live;
	for (int k = 0; k < 40; k++)
		assert_int_equal(commit_n(h, 1000 + k % 2, NULL), 0);
	assert_int_equal(shmcfg__heap_verify(h), 0);
	assert_true(h->hdr->heap_live <= live + 1024);
	drop(ro);
	drop(h);
}

/* ------------------------------------------------------------------ */
/* 3. A creator killed at each point of a creation                    */
/* ------------------------------------------------------------------ */

struct create_arg {
	const char *name;
	const char *point;
	const shmcfg_schema *schema;
};

static int fault_creator_main(void *p)
{
	struct create_arg *a = p;
	setenv("SHMCFG_FAULT", a->point, 1);
	shmcfg *h = NULL;
	shmcfg_create_opts o = {.flags = SHMCFG_CREATE_FORCE | SHMCFG_CREATE_NO_ENV};
	int r = shmcfg_create(a->name, a->schema, &o, &h);
	CHECK(false, 10, "create returned %d (%s): the fault point %s never fired", r,
	      shmcfg_strerror(r), a->point);
}

static void test_creator_killed_at(void **state)
{
	const char *point = *state;
	const char *name = new_name("crash-create");
	shmcfg_schema *schema = test_schema();
	struct create_arg a = {name, point, schema};
	pid_t pid = spawn(fault_creator_main, &a);
	assert_child_killed(pid);
	/*
	 * The object exists (shm_open with O_EXCL came first) but `ready` is
	 * stored last, so after the creator's death at any of these points an
	 * attach waits about a second for it and then fails with
	 * SHMCFG_E_NOTREADY: never -ENOENT, never a crash. After
	 * "create.opened" the object even has size 0.
	 */
	shmcfg *h = NULL;
	int r = shmcfg_attach(name, 0, NULL, &h);
	assert_int_equal(r, SHMCFG_E_NOTREADY);
	assert_null(h);
	if (strcmp(point, "create.opened") == 0 || strcmp(point, "create.gen1") == 0) {
		/* read-only attachers wait the same way (the two ends of it) */
		r = shmcfg_attach(name, SHMCFG_ATTACH_RDONLY, NULL, &h);
		assert_int_equal(r, SHMCFG_E_NOTREADY);
		assert_null(h);
	}
	/* the leftover is not silently reused */
	shmcfg_create_opts o = {.flags = SHMCFG_CREATE_NO_ENV};
	assert_int_equal(shmcfg_create(name, schema, &o, &h), -EEXIST);
	assert_null(h);
	/* forcing replaces it with a sound segment */
	o.flags |= SHMCFG_CREATE_FORCE;
	r = shmcfg_create(name, schema, &o, &h);
	if (r)
		fail_msg("create --force after a creator died at %s: %s: %s", point, shmcfg_strerror(r),
			 shmcfg_errdetail());
	keep(h);
	shmcfg_schema_free(schema);
	/* the dead creator's lock object went with its segment: one is left, the new one's */
	assert_int_equal(locks_of(name), 1);
	assert_int_equal(shmcfg_generation(h), 1);
	assert_int_equal(shmcfg_check(h, true, print_problem, NULL), 0);
	shmcfg *ro = attach_ro(name);
	uint64_t gen;
	assert_int_equal(current_n(ro, &gen), 0);
	assert_int_equal(gen, 1);
	assert_int_equal(commit_n(h, 5, &gen), 0);
	assert_int_equal(gen, 2);
	assert_int_equal(current_n(ro, NULL), 5);
	drop(ro);
	drop(h);
}

/* ------------------------------------------------------------------ */
/* 4. A reader table full of dead entries                             */
/* ------------------------------------------------------------------ */

struct idle_arg {
	const char *name;
	int to_parent;
};

/* Attach (taking an entry), pin generation 1, report, then wait to be killed. */
static int idle_reader_main(void *p)
{
	struct idle_arg *a = p;
	shmcfg *h = NULL;
	int r = shmcfg_attach(a->name, 0, NULL, &h);
	CHECK(r == 0, 2, "attach: %s", shmcfg_strerror(r));
	shmcfg_snapshot *s;
	r = shmcfg_snapshot_acquire(h, &s);
	CHECK(r == 0, 3, "snapshot_acquire: %s", shmcfg_strerror(r));
	char m = 'a';
	CHECK(write_full(a->to_parent, &m, 1) == 0, 4, "pipe");
	uint64_t deadline = mono_ms() + CHILD_TIMEOUT_MS;
	while (mono_ms() < deadline)
		usleep(10000);
	return 5; /* never killed */
}

struct table {
	int used, alive, pinned;
	int by_pid[4];
	pid_t pids[4];
};

static void tally(const shmcfg_reader *r, void *ud)
{
	struct table *t = ud;
	t->used++;
	t->alive += r->alive;
	for (int k = 0; k < 4; k++)
		if (r->pins[k]) {
			t->pinned++;
			break;
		}
	for (int i = 0; i < 4; i++)
		if (r->pid == t->pids[i])
			t->by_pid[i]++;
}

static struct table table_of(shmcfg *h, const pid_t pids[4])
{
	struct table t = {0};
	memcpy(t.pids, pids, sizeof t.pids);
	int n = shmcfg_readers(h, tally, &t);
	assert_int_equal(n, t.used);
	return t;
}

static void test_dead_reader_entries_reclaimed_by_snapshots(void **state)
{
	enum { R = 4 };
	const char *name = new_name("crash-readers");
	/* two slots: the dead children's pins of generation 1 would block the
	 * second commit below if they were not cleared */
	shmcfg *h = test_create(name, &(shmcfg_create_opts){.readers = R, .slots = 2});
	/* the creator's handle holds an entry: give it back, and watch through a
	 * read-only handle, which takes none */
	shmcfg_close(h);
	shmcfg *ro = attach_ro(name);
	int up[2];
	assert_int_equal(pipe(up), 0);
	struct idle_arg a = {name, up[1]};
	pid_t pids[R];
	for (int i = 0; i < R; i++)
		pids[i] = spawn(idle_reader_main, &a);
	close(up[1]);
	for (int i = 0; i < R; i++) {
		char m;
		if (read_full(up[0], &m, 1, CHILD_TIMEOUT_MS))
			fail_msg("only %d of %d readers attached", i, R);
	}
	close(up[0]);
	struct table t = table_of(ro, pids);
	assert_int_equal(t.used, R);
	assert_int_equal(t.alive, R);
	assert_int_equal(t.pinned, R);
	for (int i = 0; i < R; i++)
		assert_int_equal(t.by_pid[i], 1);
	/* every entry is held by a live process: an attach still works (it
	 * takes no entry), and its snapshots copy instead of pinning */
	shmcfg *extra = NULL;
	assert_int_equal(shmcfg_attach(name, 0, NULL, &extra), 0);
	assert_int_equal(snapshot_once(extra), 0);
	shmcfg_info st;
	assert_int_equal(shmcfg_stat(ro, &st), 0);
	assert_int_equal(st.copy_fallbacks, 1);
	assert_int_equal(st.readers_hwm, R);
	shmcfg_close(extra);
	for (int i = 0; i < R; i++) {
		assert_int_equal(kill(pids[i], SIGKILL), 0);
		assert_child_killed(pids[i]);
	}
	t = table_of(ro, pids);
	assert_int_equal(t.used, R);
	assert_int_equal(t.alive, 0);
	/* first snapshots reclaim the dead entries, one each */
	shmcfg *mine[R];
	for (int i = 0; i < R; i++) {
		mine[i] = NULL;
		int r = shmcfg_attach(name, 0, NULL, &mine[i]);
		if (!r)
			r = snapshot_once(mine[i]);
		if (r)
			fail_msg("snapshot %d of %d over dead entries: %s: %s", i + 1, R, shmcfg_strerror(r),
				 shmcfg_errdetail());
		keep(mine[i]);
	}
	pid_t me[4] = {getpid(), 0, 0, 0};
	t = table_of(ro, me);
	assert_int_equal(t.used, R);
	assert_int_equal(t.alive, R);
	/* the dead pins went with their entries; each holds the pin of its own
	 * released snapshot, which blocks nobody (the commits below) */
	assert_int_equal(t.pinned, R);
	assert_int_equal(t.by_pid[0], R);
	/* now every entry is held by a live handle: another one copies */
	assert_int_equal(shmcfg_attach(name, 0, NULL, &extra), 0);
	assert_int_equal(snapshot_once(extra), 0);
	assert_int_equal(shmcfg_readers(ro, NULL, NULL), R);
	shmcfg_close(extra);
	/* no stale pin blocks the slots: two commits need both of them */
	shmcfg_set_commit_timeout(mine[0], 200);
	uint64_t gen = 0;
	assert_int_equal(commit_n(mine[0], 1, &gen), 0);
	assert_int_equal(commit_n(mine[0], 2, &gen), 0);
	assert_int_equal(gen, 3);
	assert_int_equal(current_n(ro, NULL), 2);
	/* closing one hands its entry to the next snapshot */
	drop(mine[R - 1]);
	assert_int_equal(shmcfg_attach(name, 0, NULL, &extra), 0);
	assert_int_equal(snapshot_once(keep(extra)), 0);
	t = table_of(ro, me);
	assert_int_equal(t.by_pid[0], R);
	while (nhandles > 0)
		drop(handles[nhandles - 1]);
}

/* ------------------------------------------------------------------ */
/* 3b. A reaper or an attacher killed inside reclamation               */
/* ------------------------------------------------------------------ */

static int fault_reaper_main(void *p)
{
	struct fault_arg *a = p;
	if (!strcmp(a->point, "claim.locked")) {
		/* the first snapshot claims an entry, and dies inside the claim */
		shmcfg *h = NULL;
		int r = shmcfg_attach(a->name, 0, NULL, &h);
		CHECK(r == 0, 2, "attach: %s", shmcfg_strerror(r));
		setenv("SHMCFG_FAULT", a->point, 1);
		shmcfg_snapshot *s;
		r = shmcfg_snapshot_acquire(h, &s);
		CHECK(false, 10, "snapshot returned %d: the fault point never fired", r);
	}
	shmcfg *h = NULL;
	int r = shmcfg_attach(a->name, 0, NULL, &h);
	CHECK(r == 0, 2, "attach: %s", shmcfg_strerror(r));
	setenv("SHMCFG_FAULT", a->point, 1);
	r = shmcfg_gc(h, NULL, NULL);
	CHECK(false, 10, "gc returned %d: the fault point %s never fired", r, a->point);
}

/*
 * A dead reader pins the slot the next commit needs; another process dies
 * while reclaiming its entry (or while claiming an entry). The segment stays
 * sound, and the next commit reclaims what is left and succeeds.
 */
static void test_reaper_killed_at(void **state)
{
	const char *point = *state;
	const char *name = new_name("reapkill");
	shmcfg *h = keep(test_create(name, &(shmcfg_create_opts){.slots = 2}));
	shmcfg_set_commit_timeout(h, 500);
	/* hold entry 1 while the reader takes entry 2, then free it: the
	 * reaper's own claim takes entry 1 and must reap entry 2 */
	shmcfg *spacer = NULL;
	assert_int_equal(shmcfg_attach(name, 0, NULL, &spacer), 0);
	assert_int_equal(snapshot_once(spacer), 0);
	struct chan c;
	struct pin_arg pa;
	pid_t reader = start_pinning_child(name, h, &c, &pa);
	kill(reader, SIGKILL);
	assert_child_killed(reader);
	chan_close(&c);
	shmcfg_close(spacer);
	struct fault_arg fa = {name, point};
	pid_t reaper = spawn(fault_reaper_main, &fa);
	assert_child_killed(reaper);
	assert_int_equal(shmcfg_check(h, true, print_problem, NULL), 0);
	/* generation 2 is still current, whole */
	shmcfg *ro = attach_ro(name);
	uint64_t gen = 0;
	assert_int_equal(current_n(ro, &gen), 1);
	assert_int_equal(gen, 2);
	/* the commit needs the dead reader's slot: reclaimed, then used */
	int r = commit_n(h, 2, &gen);
	if (r)
		fail_msg("commit after a reaper died at %s: %s: %s", point, shmcfg_errname(r), shmcfg_errdetail());
	assert_int_equal(gen, 3);
	assert_int_equal(current_n(ro, NULL), 2);
	/* nothing of the dead processes is left alive in the table */
	(void)shmcfg_gc(h, NULL, NULL);
	assert_int_equal(entry_of(h, reader, 0).found, 0);
	assert_int_equal(entry_of(h, reaper, 0).found, 0);
	drop(ro);
	drop(h);
}

/* ------------------------------------------------------------------ */

#define AT(fn, point) {#fn "(" point ")", fn, NULL, teardown, (void *)(point)}

int main(void)
{
	unsetenv("SHMCFG_FAULT");
	if (getenv("TEST_FILTER")) /* e.g. TEST_FILTER='*stopped*' */
		cmocka_set_test_filter(getenv("TEST_FILTER"));
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_dead_pinned_reader_is_reclaimed, teardown),
		cmocka_unit_test_teardown(test_stopped_reader_busy_then_release, teardown),
		cmocka_unit_test_teardown(test_stopped_reader_busy_then_killed, teardown),
		cmocka_unit_test_teardown(test_dead_reader_entries_reclaimed_by_snapshots, teardown),
		/* the fault points: the test copy of the library has them */
		AT(test_writer_killed_at, "commit.locked"),
		AT(test_writer_killed_at, "commit.chosen"),
		AT(test_writer_killed_at, "commit.busy"),
		AT(test_writer_killed_at, "commit.slot"),
		AT(test_writer_killed_at, "commit.synced"),
		AT(test_writer_killed_at, "commit.in_cell"),
		AT(test_writer_killed_at, "commit.chunk"),
		AT(test_writer_killed_at, "commit.written"),
		AT(test_writer_killed_at, "commit.stamped"),
		AT(test_writer_killed_at, "commit.copy"),
		AT(test_writer_killed_at, "commit.published"),
		AT(test_creator_killed_at, "create.opened"),
		AT(test_creator_killed_at, "create.allocated"),
		AT(test_creator_killed_at, "create.locked"),
		AT(test_creator_killed_at, "create.schema"),
		AT(test_creator_killed_at, "create.gen1"),
		AT(test_reaper_killed_at, "reap.locked"),
		AT(test_reaper_killed_at, "reap.cleared"),
		AT(test_reaper_killed_at, "claim.locked"),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
