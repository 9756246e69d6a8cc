/* SPDX-License-Identifier: MIT */
/* Several real processes on one real segment: forked readers and writers,
 * each with its own handle. Checks that readers in other processes see whole
 * generations that never go backwards, that read-only processes take copying
 * snapshots and cannot write, that a read started after a commit returned
 * sees it, and that shmcfg_wait() wakes across processes (and that a no-op
 * commit wakes nobody).
 *
 * Children never use cmocka: they report failure through their exit status
 * (and a "# child ..." line on stderr), and the parent asserts on it. */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>

#include "common.h"
#include "proc.h"

/* White-box: the futex word of the header, to see that a no-op commit does
 * not wake anybody (a woken waiter that goes back to sleep is invisible to
 * the shmcfg_wait() API). */
#include "internal.h"

/* ------------------------------------------------------------------ */
/* Children, pipes and cleanup                                        */
/* ------------------------------------------------------------------ */














/* The state letter of /proc/<pid>/stat ('S' sleeping, 'R' running, ...). */
static char proc_state(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return '?';
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	char *p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : '?';
}

/* Best effort, not an assertion: give a child that announced it is about to
 * block a chance to actually be asleep, so that what follows exercises the
 * wake-up path rather than the early return. */
static void wait_asleep(pid_t pid)
{
	uint64_t deadline = mono_ms() + 2000;
	while (proc_state(pid) != 'S' && mono_ms() < deadline)
		usleep(1000);
	usleep(20000);
}


/* ------------------------------------------------------------------ */
/* The invariant: a = n, b = -n, c = str(n), generation = n + 1       */
/* ------------------------------------------------------------------ */

/* Read a, b, c of one snapshot. 0, or a non-zero code for the child to exit with. */
static int snap_abc(const shmcfg_snapshot *s, int64_t *a, int64_t *b, char *c, size_t clen)
{
	shmcfg_value v;
	if (shmcfg_snapshot_get(s, T_A, &v) || v.type != SHMCFG_INT || v.is_null)
		return 20;
	*a = v.u.i;
	if (shmcfg_snapshot_get(s, T_B, &v) || v.type != SHMCFG_INT || v.is_null)
		return 21;
	*b = v.u.i;
	if (shmcfg_snapshot_get(s, T_C, &v) || v.type != SHMCFG_STR || v.is_null ||
	    v.u.str.len >= clen)
		return 22;
	memcpy(c, v.u.str.ptr, v.u.str.len);
	c[v.u.str.len] = 0;
	return 0;
}

#define GEN_ANY INT64_MIN

/* Check one snapshot: whole (a, b, c agree) and, unless gen_minus_n is
 * GEN_ANY, generation = n + gen_minus_n (a test whose every commit sets a new
 * n from generation 1 with n = 0 has gen_minus_n = 1). Returns 0 or an exit
 * code; *n_ret and *gen_ret are what it showed. */
static int check_snapshot(shmcfg *h, int64_t gen_minus_n, int64_t *n_ret, uint64_t *gen_ret)
{
	shmcfg_snapshot *s;
	int r = shmcfg_snapshot_acquire(h, &s);
	CHECK(r == 0, 30, "snapshot_acquire: %s", shmcfg_strerror(r));
	uint64_t gen = shmcfg_snapshot_generation(s);
	int64_t a = 0, b = 0;
	char c[32], want[32];
	r = snap_abc(s, &a, &b, c, sizeof c);
	shmcfg_snapshot_release(s);
	CHECK(r == 0, r, "snapshot_get failed");
	snprintf(want, sizeof want, "%" PRId64, a);
	CHECK(b == -a, 31, "torn snapshot of generation %" PRIu64 ": a=%" PRId64 " b=%" PRId64, gen, a, b);
	CHECK(strcmp(c, want) == 0, 32, "torn snapshot of generation %" PRIu64 ": a=%" PRId64 " c=%s",
	      gen, a, c);
	CHECK(gen_minus_n == GEN_ANY || (int64_t)gen == a + gen_minus_n, 33,
	      "generation %" PRIu64 " shows n=%" PRId64, gen, a);
	*n_ret = a;
	*gen_ret = gen;
	return 0;
}


/*
 * Parent-side: the current snapshot's n, asserting the invariant, read
 * through a read-only handle (copying snapshots).
 * test_fork_after_parent_snapshots covers forking after read-write snapshots.
 */
static int64_t parent_check(shmcfg *ro, int64_t gen_minus_n, uint64_t *gen)
{
	int64_t n = -1;
	uint64_t g = 0;
	assert_true(shmcfg_readonly(ro));
	int r = check_snapshot(ro, gen_minus_n, &n, &g);
	if (r)
		fail_msg("snapshot invariant failed in the parent (code %d)", r);
	if (gen)
		*gen = g;
	return n;
}

/* Shared (MAP_SHARED | MAP_ANONYMOUS) between the parent and its children. */
struct board {
	_Atomic int ready;   /* children that attached and are about to loop */
	_Atomic int done;    /* set by the parent once every commit returned */
	int64_t final_n;     /* what the last read after `done` must show */
	long snapshots[8];   /* per reader: snapshots checked */
	long generations[8]; /* per reader: distinct generations seen */
	long inline_reads[8];
};

static struct board *board_new(void)
{
	struct board *b = mmap(NULL, sizeof *b, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(b != MAP_FAILED);
	memset(b, 0, sizeof *b);
	return b;
}


static void board_wait_ready(struct board *b, int n)
{
	uint64_t deadline = mono_ms() + CHILD_TIMEOUT_MS;
	while (atomic_load(&b->ready) < n) {
		if (mono_ms() > deadline)
			fail_msg("only %d of %d children became ready", atomic_load(&b->ready), n);
		usleep(1000);
	}
}

struct reader_arg {
	const char *name;
	struct board *board;
	int idx;
	bool rdonly;
	int64_t gen_minus_n;
};

/* What a generated accessor of an int option reads: the accessors' copy,
 * else the slots, else the slow path (include/shmcfg/proven.h). */
static int64_t accessor_int(const shmcfg *h, shmcfg_opt o)
{
	uint64_t bits;
	return shmcfg__read_proven(h, o, &bits) ? (int64_t)bits : shmcfg__proven_slow_int(h, o, INT64_MIN);
}

/*
 * A reader process: until the writer is done, take snapshots and check each
 * is whole and that neither generations nor values go backwards, with inline
 * reads of a in between, by the slots' seqlock and by the accessors' copy in
 * turn (which must not go backwards either, nor behind the snapshots, nor
 * behind each other: seqlock.h, seq_publish_copy()). After `done`, one more
 * snapshot must show the final n, and the accessor too.
 */
static int reader_main(void *p)
{
	struct reader_arg *ra = p;
	struct board *bd = ra->board;
	shmcfg *h = NULL;
	int r = shmcfg_attach(ra->name, ra->rdonly ? SHMCFG_ATTACH_RDONLY : 0, NULL, &h);
	CHECK(r == 0, 2, "attach: %s", shmcfg_strerror(r));
	CHECK(shmcfg_readonly(h) == ra->rdonly, 3, "readonly flag");
	if (ra->rdonly) {
		shmcfg_txn *t = NULL;
		r = shmcfg_txn_begin(h, &t);
		CHECK(r == SHMCFG_E_READONLY, 4, "txn_begin on a read-only handle returned %d", r);
		CHECK(t == NULL, 5, "txn_begin failed but returned a transaction");
		r = shmcfg_gc(h, NULL, NULL);
		CHECK(r == SHMCFG_E_READONLY, 6, "gc on a read-only handle returned %d", r);
	}
	atomic_fetch_add(&bd->ready, 1);
	int64_t max_n = -1;   /* newest n any read in this thread has shown */
	uint64_t last_gen = 0;
	long snaps = 0, gens = 0, inl = 0;
	uint64_t deadline = mono_ms() + CHILD_TIMEOUT_MS;
	for (;;) {
		bool done = atomic_load(&bd->done);
		int64_t n;
		uint64_t gen;
		if ((r = check_snapshot(h, ra->gen_minus_n, &n, &gen)))
			return r;
		CHECK(gen >= last_gen, 40, "snapshot generation went back from %" PRIu64 " to %" PRIu64,
		      last_gen, gen);
		CHECK(n >= max_n, 41, "snapshot shows n=%" PRId64 " after a read of n=%" PRId64, n, max_n);
		snaps++;
		gens += gen != last_gen;
		last_gen = gen;
		max_n = n;
		for (int k = 0; k < 4; k++) {
			int64_t a = -1;
			r = shmcfg_get_int(h, T_A, &a);
			CHECK(r == 0, 42, "get_int: %s", shmcfg_strerror(r));
			CHECK(a >= max_n, 43, "inline read of a=%" PRId64 " after a read of n=%" PRId64, a,
			      max_n);
			max_n = a;
			a = accessor_int(h, T_A);
			CHECK(a >= max_n, 46, "accessor read of a=%" PRId64 " after a read of n=%" PRId64, a,
			      max_n);
			max_n = a;
			inl += 2;
		}
		if (done) {
			/* this read started after every commit had returned */
			CHECK(n == bd->final_n, 44, "after the writer finished, a snapshot shows n=%" PRId64
			      " not %" PRId64, n, bd->final_n);
			CHECK(accessor_int(h, T_A) == bd->final_n, 47, "after the writer finished, the accessor "
			      "reads a=%" PRId64, accessor_int(h, T_A));
			break;
		}
		CHECK(mono_ms() < deadline, 45, "the writer never finished");
	}
	bd->snapshots[ra->idx] = snaps;
	bd->generations[ra->idx] = gens;
	bd->inline_reads[ra->idx] = inl;
	shmcfg_close(h);
	return 0;
}

struct writer_arg {
	const char *name;
	struct board *board;
	int readers;  /* wait until this many readers are ready */
	int64_t from, to;
};

/* A writer process: commits n = from..to, each a, b, c in one transaction;
 * each commit must make exactly the next generation. */
static int writer_main(void *p)
{
	struct writer_arg *wa = p;
	shmcfg *h = NULL;
	int r = shmcfg_attach(wa->name, 0, NULL, &h);
	CHECK(r == 0, 2, "attach: %s", shmcfg_strerror(r));
	uint64_t deadline = mono_ms() + CHILD_TIMEOUT_MS;
	while (atomic_load(&wa->board->ready) < wa->readers) {
		CHECK(mono_ms() < deadline, 3, "readers never became ready");
		usleep(1000);
	}
	uint64_t prev = shmcfg_generation(h);
	for (int64_t n = wa->from; n <= wa->to; n++) {
		uint64_t gen = 0;
		r = commit_n(h, n, &gen);
		CHECK(r == 0, 10, "commit of n=%" PRId64 ": %s", n, shmcfg_strerror(r));
		CHECK(gen == prev + 1, 11, "commit of n=%" PRId64 " made generation %" PRIu64 " after %" PRIu64,
		      n, gen, prev);
		prev = gen;
	}
	shmcfg_close(h);
	return 0;
}

/* ------------------------------------------------------------------ */
/* 1. Whole generations across processes                              */
/* ------------------------------------------------------------------ */

#define NREADERS 3
#define NCOMMITS 3000

static void test_consistency_across_processes(void **state)
{
	const char *name = new_name("mp-cons");
	shmcfg *h = keep(test_create(name, NULL));
	shmcfg *ro = attach_ro(name);
	assert_int_equal(parent_check(ro, 1, NULL), 0); /* generation 1 shows n = 0 */
	struct board *bd = board_new();
	bd->final_n = NCOMMITS;
	struct reader_arg ra[NREADERS];
	pid_t readers[NREADERS];
	for (int i = 0; i < NREADERS; i++) {
		ra[i] = (struct reader_arg){name, bd, i, false, 1};
		readers[i] = spawn(reader_main, &ra[i]);
	}
	struct writer_arg wa = {name, bd, NREADERS, 1, NCOMMITS};
	pid_t writer = spawn(writer_main, &wa);
	assert_child_ok(writer);
	/* every commit has returned: from now on a read must show the last one */
	atomic_store(&bd->done, 1);
	for (int i = 0; i < NREADERS; i++)
		assert_child_ok(readers[i]);
	for (int i = 0; i < NREADERS; i++) {
		fprintf(stderr, "# reader %d: %ld snapshots checked, %ld generations seen, %ld inline reads\n",
			i, bd->snapshots[i], bd->generations[i], bd->inline_reads[i]);
		assert_true(bd->snapshots[i] > 0);
		assert_true(bd->inline_reads[i] > 0);
	}
	uint64_t gen;
	assert_int_equal(parent_check(ro, 1, &gen), NCOMMITS);
	assert_int_equal(gen, NCOMMITS + 1);
	assert_int_equal(shmcfg_check(h, true, NULL, NULL), 0);
	munmap(bd, sizeof *bd);
	drop(ro);
	drop(h);
}

/* ------------------------------------------------------------------ */
/* 2. Read-only processes                                             */
/* ------------------------------------------------------------------ */

struct found {
	pid_t pid;
	int n;
};

static void count_pid(const shmcfg_reader *r, void *ud)
{
	struct found *f = ud;
	if (r->pid == f->pid)
		f->n++;
}

/* Read-only processes check the invariant on their copying snapshots while
 * the parent commits, cannot write, and take no reader entry. Three of them
 * on two cores: they get preempted in the middle of copies, which is when a
 * copy that is not validated against a rewrite of its slot shows. */
static void test_readonly_process_consistency(void **state)
{
	const char *name = new_name("mp-ro");
	/* two slots: each commit rewrites the slot that was current before */
	shmcfg *h = keep(test_create(name, &(shmcfg_create_opts){.slots = 2, .mode = 0640}));
	struct board *bd = board_new();
	enum { N = 20000 };
	bd->final_n = N;
	struct reader_arg ra[NREADERS];
	pid_t pid[NREADERS];
	for (int i = 0; i < NREADERS; i++) {
		ra[i] = (struct reader_arg){name, bd, i, true, 1};
		pid[i] = spawn(reader_main, &ra[i]);
	}
	board_wait_ready(bd, NREADERS);
	/* attached, yet not in the reader table: they cannot take an entry */
	for (int i = 0; i < NREADERS; i++) {
		struct found f = {pid[i], 0};
		(void)shmcfg_readers(h, count_pid, &f);
		assert_int_equal(f.n, 0);
	}
	uint64_t prev = shmcfg_generation(h);
	for (int64_t n = 1; n <= N; n++) {
		uint64_t gen;
		assert_int_equal(commit_n(h, n, &gen), 0);
		assert_int_equal(gen, prev + 1);
		prev = gen;
	}
	atomic_store(&bd->done, 1);
	for (int i = 0; i < NREADERS; i++)
		assert_child_ok(pid[i]);
	for (int i = 0; i < NREADERS; i++) {
		fprintf(stderr, "# read-only reader %d: %ld snapshots checked, %ld generations seen\n", i,
			bd->snapshots[i], bd->generations[i]);
		assert_true(bd->snapshots[i] > 0);
	}
	munmap(bd, sizeof *bd);
	drop(h);
}

struct rocopy_arg {
	const char *name;
	int to_parent, from_parent;
	int64_t n0;     /* the value when the snapshot is taken */
	int commits;    /* the parent commits n0+1 .. n0+commits meanwhile */
};

/* Take a snapshot, let the parent commit more often than there are slots,
 * then read the snapshot again: a copy still shows its generation. */
static int rocopy_main(void *p)
{
	struct rocopy_arg *a = p;
	shmcfg *h = NULL;
	int r = shmcfg_attach(a->name, SHMCFG_ATTACH_RDONLY, NULL, &h);
	CHECK(r == 0, 2, "attach: %s", shmcfg_strerror(r));
	shmcfg_snapshot *s;
	r = shmcfg_snapshot_acquire(h, &s);
	CHECK(r == 0, 3, "snapshot_acquire: %s", shmcfg_strerror(r));
	uint64_t g0 = shmcfg_snapshot_generation(s);
	int64_t x, y;
	char c[32];
	CHECK(snap_abc(s, &x, &y, c, sizeof c) == 0 && x == a->n0, 4, "a=%" PRId64, x);
	char m = 's';
	CHECK(write_full(a->to_parent, &m, 1) == 0, 5, "pipe");
	CHECK(read_full(a->from_parent, &m, 1, CHILD_TIMEOUT_MS) == 0 && m == 'c', 6, "pipe");
	/* every slot has been rewritten since: the snapshot must be a copy */
	char want[32];
	snprintf(want, sizeof want, "%" PRId64, a->n0);
	CHECK(shmcfg_snapshot_generation(s) == g0, 7, "generation changed");
	CHECK(snap_abc(s, &x, &y, c, sizeof c) == 0, 8, "snapshot_get");
	CHECK(x == a->n0 && y == -a->n0 && strcmp(c, want) == 0, 9,
	      "snapshot of generation %" PRIu64 " now shows a=%" PRId64 " b=%" PRId64 " c=%s", g0, x, y, c);
	shmcfg_snapshot_release(s);
	int64_t n;
	uint64_t gen;
	if ((r = check_snapshot(h, GEN_ANY, &n, &gen)))
		return r;
	CHECK(n == a->n0 + a->commits && gen == g0 + (uint64_t)a->commits, 10,
	      "new snapshot: n=%" PRId64 " generation %" PRIu64, n, gen);
	int64_t v = -1;
	CHECK(shmcfg_get_int(h, T_A, &v) == 0 && v == n, 11, "inline a=%" PRId64, v);
	shmcfg_close(h);
	return 0;
}

static void test_readonly_snapshot_is_a_copy(void **state)
{
	const char *name = new_name("mp-rocopy");
	/* two slots: a pinned snapshot would block the second commit */
	shmcfg *h = keep(test_create(name, &(shmcfg_create_opts){.slots = 2, .mode = 0640}));
	shmcfg_set_commit_timeout(h, 200);
	assert_int_equal(commit_n(h, 7, NULL), 0);
	int up[2], down[2];
	assert_int_equal(pipe(up), 0);
	assert_int_equal(pipe(down), 0);
	struct rocopy_arg a = {name, up[1], down[0], 7, 5};
	pid_t pid = spawn(rocopy_main, &a);
	close(up[1]);
	close(down[0]);
	char m;
	assert_int_equal(read_full(up[0], &m, 1, CHILD_TIMEOUT_MS), 0);
	assert_int_equal(m, 's');
	for (int64_t n = 8; n <= 7 + a.commits; n++) {
		int r = commit_n(h, n, NULL);
		if (r)
			fail_msg("commit %" PRId64 " while a read-only snapshot is held: %s: %s", n,
				 shmcfg_strerror(r), shmcfg_errdetail());
	}
	m = 'c';
	assert_int_equal(write_full(down[1], &m, 1), 0);
	assert_child_ok(pid);
	close(up[0]);
	close(down[1]);
	drop(h);
}

/* ------------------------------------------------------------------ */
/* 3. A read after a commit returned sees it                          */
/* ------------------------------------------------------------------ */

struct vis_msg {
	uint64_t gen;
	int64_t n;
};

struct vis_arg {
	const char *name;
	int to_parent, from_parent;
	int rounds;
};

static int visibility_main(void *p)
{
	struct vis_arg *a = p;
	shmcfg *rw = NULL, *ro = NULL;
	int r = shmcfg_attach(a->name, 0, NULL, &rw);
	CHECK(r == 0, 2, "attach: %s", shmcfg_strerror(r));
	r = shmcfg_attach(a->name, SHMCFG_ATTACH_RDONLY, NULL, &ro);
	CHECK(r == 0, 3, "attach read-only: %s", shmcfg_strerror(r));
	char m = 'r';
	CHECK(write_full(a->to_parent, &m, 1) == 0, 4, "pipe");
	for (int i = 0; i < a->rounds; i++) {
		struct vis_msg msg;
		CHECK(read_full(a->from_parent, &msg, sizeof msg, CHILD_TIMEOUT_MS) == 0, 5, "pipe");
		/* the commit of msg.gen has returned: every read now starts after it */
		shmcfg *hs[2] = {rw, ro};
		for (int k = 0; k < 2; k++) {
			uint64_t g = shmcfg_generation(hs[k]);
			CHECK(g >= msg.gen, 10 + k, "generation %" PRIu64 " after commit of %" PRIu64, g, msg.gen);
			int64_t v = -1;
			CHECK(shmcfg_get_int(hs[k], T_A, &v) == 0 && v == msg.n, 12 + k,
			      "inline a=%" PRId64 " after commit of %" PRId64, v, msg.n);
			int64_t n;
			if ((r = check_snapshot(hs[k], 1, &n, &g)))
				return r;
			CHECK(g >= msg.gen && n == msg.n, 14 + k,
			      "snapshot generation %" PRIu64 " n=%" PRId64 " after commit of %" PRIu64 " n=%" PRId64,
			      g, n, msg.gen, msg.n);
			shmcfg_value v2;
			CHECK(shmcfg_get(hs[k], T_B, &v2) == 0 && v2.u.i == -msg.n, 16 + k, "shmcfg_get b");
			shmcfg_value_clear(&v2);
		}
		CHECK(write_full(a->to_parent, &m, 1) == 0, 6, "pipe");
	}
	shmcfg_close(ro);
	shmcfg_close(rw);
	return 0;
}

static void test_read_after_commit_sees_it(void **state)
{
	const char *name = new_name("mp-vis");
	shmcfg *h = keep(test_create(name, NULL));
	int up[2], down[2];
	assert_int_equal(pipe(up), 0);
	assert_int_equal(pipe(down), 0);
	struct vis_arg a = {name, up[1], down[0], 300};
	pid_t pid = spawn(visibility_main, &a);
	close(up[1]);
	close(down[0]);
	char m;
	assert_int_equal(read_full(up[0], &m, 1, CHILD_TIMEOUT_MS), 0);
	for (int i = 1; i <= a.rounds; i++) {
		struct vis_msg msg = {0, i};
		assert_int_equal(commit_n(h, i, &msg.gen), 0);
		assert_int_equal(write_full(down[1], &msg, sizeof msg), 0);
		if (read_full(up[0], &m, 1, CHILD_TIMEOUT_MS))
			break; /* the child failed: its status says why */
	}
	assert_child_ok(pid);
	close(up[0]);
	close(down[1]);
	drop(h);
}

/* ------------------------------------------------------------------ */
/* 4. shmcfg_wait() across processes                                  */
/* ------------------------------------------------------------------ */

struct wait_arg {
	const char *name;
	int to_parent;
	bool rdonly;
	int timeout_ms;
	int expect;        /* 0: woken by a commit; -ETIMEDOUT: no commit comes */
	int64_t expect_a;  /* a after the wake */
};

static int waiter_main(void *p)
{
	struct wait_arg *a = p;
	shmcfg *h = NULL;
	int r = shmcfg_attach(a->name, a->rdonly ? SHMCFG_ATTACH_RDONLY : 0, NULL, &h);
	CHECK(r == 0, 2, "attach: %s", shmcfg_strerror(r));
	uint64_t g = shmcfg_generation(h);
	CHECK(write_full(a->to_parent, &g, sizeof g) == 0, 3, "pipe");
	uint64_t seen = 0;
	r = shmcfg_wait(h, g, a->timeout_ms, &seen);
	CHECK(r == a->expect, 4, "shmcfg_wait returned %d (%s), expected %d", r, shmcfg_strerror(r),
	      a->expect);
	if (a->expect == 0) {
		CHECK(seen > g, 5, "woke with generation %" PRIu64 ", waited for > %" PRIu64, seen, g);
		CHECK(seen == g + 1, 6, "one commit, but generation %" PRIu64 " after %" PRIu64, seen, g);
		int64_t v = -1;
		CHECK(shmcfg_get_int(h, T_A, &v) == 0 && v == a->expect_a, 7, "a=%" PRId64 " after wake", v);
		CHECK(shmcfg_generation(h) >= seen, 8, "generation went back");
	} else {
		CHECK(seen == g, 9, "timed out but reports generation %" PRIu64 " (was %" PRIu64 ")", seen, g);
		CHECK(shmcfg_generation(h) == g, 10, "generation moved to %" PRIu64, shmcfg_generation(h));
	}
	shmcfg_close(h);
	return 0;
}

static void test_wait_across_processes(void **state)
{
	const char *name = new_name("mp-wait");
	shmcfg *h = keep(test_create(name, NULL));
	int up[2];
	assert_int_equal(pipe(up), 0);
	/* read-write and read-only waiters, with a timeout and without one: a
	 * commit that forgot to wake would leave the latter asleep for ever (the
	 * former would return -ETIMEDOUT at their timeout; CHILD_TIMEOUT_MS, as
	 * the parent's commit may come seconds later on a busy machine) */
	enum { W = 4 };
	struct wait_arg a[W];
	pid_t pid[W];
	for (int i = 0; i < W; i++) {
		a[i] = (struct wait_arg){name, up[1], i % 2 == 1, i < 2 ? CHILD_TIMEOUT_MS : -1, 0, 4242};
		pid[i] = spawn(waiter_main, &a[i]);
	}
	close(up[1]);
	uint64_t g0 = shmcfg_generation(h);
	for (int i = 0; i < W; i++) {
		uint64_t g;
		assert_int_equal(read_full(up[0], &g, sizeof g, CHILD_TIMEOUT_MS), 0);
		assert_int_equal(g, g0);
	}
	for (int i = 0; i < W; i++)
		wait_asleep(pid[i]);
	uint64_t gen;
	assert_int_equal(set_and_commit(h, T_A, "4242", &gen), 0);
	assert_int_equal(gen, g0 + 1);
	/* one commit wakes every waiter, read-write and read-only alike */
	for (int i = 0; i < W; i++)
		assert_child_ok(pid[i]);
	close(up[0]);
	drop(h);
}

static void test_wait_timeout_and_past_generation(void **state)
{
	const char *name = new_name("mp-wait-to");
	shmcfg *h = keep(test_create(name, NULL));
	assert_int_equal(set_and_commit(h, T_A, "3", NULL), 0);
	uint64_t cur = shmcfg_generation(h), seen = 0;
	assert_int_equal(shmcfg_wait(h, cur, 50, &seen), -ETIMEDOUT);
	assert_int_equal(seen, cur);
	/* a generation already passed returns at once */
	seen = 0;
	assert_int_equal(shmcfg_wait(h, cur - 1, 50, &seen), 0);
	assert_int_equal(seen, cur);
	assert_int_equal(shmcfg_wait(h, 0, 0, &seen), 0);
	assert_int_equal(seen, cur);
	/* and in another process, with nobody committing */
	int up[2];
	assert_int_equal(pipe(up), 0);
	struct wait_arg a = {name, up[1], false, 50, -ETIMEDOUT, 0};
	pid_t pid = spawn(waiter_main, &a);
	close(up[1]);
	assert_child_ok(pid);
	close(up[0]);
	drop(h);
}

/* ------------------------------------------------------------------ */
/* 5. A commit that changes nothing publishes nothing, wakes nobody   */
/* ------------------------------------------------------------------ */

static uint32_t futex_word(const shmcfg *h)
{
	return __atomic_load_n(&((const struct shmcfg *)h)->hdr->futex, __ATOMIC_SEQ_CST);
}

static void test_noop_commit_wakes_nobody(void **state)
{
	const char *name = new_name("mp-noop");
	shmcfg *h = keep(test_create(name, NULL));
	assert_int_equal(commit_n(h, 5, NULL), 0);
	uint64_t g = shmcfg_generation(h);
	uint32_t fw = futex_word(h);
	int up[2];
	assert_int_equal(pipe(up), 0);
	struct wait_arg a = {name, up[1], false, 300, -ETIMEDOUT, 0};
	pid_t pid = spawn(waiter_main, &a);
	close(up[1]);
	uint64_t cg;
	assert_int_equal(read_full(up[0], &cg, sizeof cg, CHILD_TIMEOUT_MS), 0);
	assert_int_equal(cg, g);
	wait_asleep(pid);
	/* the same values again, in the user layer that already holds them */
	uint64_t gen = 0;
	assert_int_equal(commit_n(h, 5, &gen), 0); /* a no-op is no error */
	assert_int_equal(gen, g);
	gen = 0;
	assert_int_equal(set_and_commit(h, T_A, "5", &gen), 0);
	assert_int_equal(gen, g);
	/* resetting a layer that is not set, and an empty transaction */
	shmcfg_txn *t;
	bool published = true;
	assert_int_equal(shmcfg_txn_begin(h, &t), 0);
	assert_int_equal(shmcfg_txn_reset(t, T_FLAG), 0);
	assert_int_equal(shmcfg_txn_commit_ex(t, &gen, &published), 0);
	assert_false(published);
	assert_int_equal(shmcfg_txn_begin(h, &t), 0);
	assert_int_equal(shmcfg_txn_commit(t, &gen), 0);
	assert_int_equal(gen, g);
	/* published nothing, logged nothing, woke nobody */
	assert_int_equal(shmcfg_generation(h), g);
	shmcfg_commit c;
	assert_int_equal(shmcfg_commit_info(h, g + 1, &c), -ENOENT);
	assert_int_equal(futex_word(h), fw);
	shmcfg *ro = attach_ro(name);
	assert_int_equal(parent_check(ro, GEN_ANY, NULL), 5);
	/* the waiter timed out */
	assert_child_ok(pid);
	close(up[0]);
	/* and the next real commit is the very next generation */
	assert_int_equal(commit_n(h, 6, &gen), 0);
	assert_int_equal(gen, g + 1);
	assert_int_not_equal(futex_word(h), fw);
	assert_int_equal(parent_check(ro, GEN_ANY, NULL), 6);
	drop(ro);
	drop(h);
}

/* ------------------------------------------------------------------ */
/* 6. fork() after the parent took snapshots                          */
/* ------------------------------------------------------------------ */

/* A child of a process whose read-write handle has replaced views attaches
 * its own handle and takes snapshots of several generations. */
static int forksnap_main(void *p)
{
	const char *name = p;
	shmcfg *h = NULL;
	int r = shmcfg_attach(name, 0, NULL, &h);
	CHECK(r == 0, 2, "attach: %s", shmcfg_strerror(r));
	for (int64_t n = 100; n < 104; n++) {
		int64_t got;
		uint64_t gen;
		if ((r = check_snapshot(h, GEN_ANY, &got, &gen)))
			return r;
		CHECK(got == (n == 100 ? 2 : n - 1), 3, "snapshot shows n=%" PRId64, got);
		r = commit_n(h, n, NULL);
		CHECK(r == 0, 4, "commit: %s", shmcfg_strerror(r));
	}
	shmcfg_close(h);
	return 0;
}

static void test_fork_after_parent_snapshots(void **state)
{
	/*
	 * A child of a process that took snapshots of two generations takes
	 * snapshots of several generations itself, through its own handle
	 * (layout 9: the reclaimer's lock and condition variables had to be
	 * fresh in the child, else its second view replacement hung).
	 */
	const char *name = new_name("mp-forksnap");
	shmcfg *h = keep(test_create(name, NULL));
	for (int64_t n = 1; n <= 2; n++) {
		assert_int_equal(commit_n(h, n, NULL), 0);
		/* a snapshot of each generation: two views */
		shmcfg_snapshot *s;
		assert_int_equal(shmcfg_snapshot_acquire(h, &s), 0);
		assert_int_equal(shmcfg_snapshot_generation(s), (uint64_t)n + 1);
		shmcfg_snapshot_release(s);
	}
	pid_t pid = spawn(forksnap_main, (void *)name);
	int st = reap(pid); /* a hang is for ever: CHILD_TIMEOUT_MS tells it */
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	drop(h);
}

static int inherited_main(void *p)
{
	shmcfg *h = p;
	shmcfg_snapshot *s = NULL;
	int r = shmcfg_snapshot_acquire(h, &s);
	CHECK(r == SHMCFG_E_FORKED, 2, "snapshot through the parent's handle gave %d", r);
	int64_t v = -1;
	CHECK(shmcfg_get_int(h, T_A, &v) == 0 && v == 7, 3, "inline read through the parent's handle");
	shmcfg_txn *t;
	CHECK(shmcfg_txn_begin(h, &t) == 0, 4, "txn_begin");
	CHECK(shmcfg_txn_set_int(t, T_A, 8) == 0, 5, "set");
	CHECK(shmcfg_txn_commit(t, NULL) == SHMCFG_E_FORKED, 6, "commit through the parent's handle");
	return 0;
}

/* A child may read through an inherited handle, but not take snapshots or
 * commit with it, even while the parent's view is current (no syscall on
 * that path to notice the fork: the library keeps its own pid). */
static void test_inherited_handle(void **state)
{
	(void)state;
	const char *name = new_name("mp-inherit");
	shmcfg *h = keep(test_create(name, NULL));
	assert_int_equal(commit_n(h, 7, NULL), 0);
	shmcfg_snapshot *s;
	assert_int_equal(shmcfg_snapshot_acquire(h, &s), 0); /* the parent's view is current */
	shmcfg_snapshot_release(s);
	pid_t pid = spawn(inherited_main, h);
	assert_child_ok(pid);
	drop(h);
}

static void count_mine(const shmcfg_reader *r, void *ud)
{
	if (r->pid == getpid())
		++*(int *)ud;
}

static int entries_of_mine(const shmcfg *h)
{
	int n = 0;
	return shmcfg_readers(h, count_mine, &n) < 0 ? -1 : n;
}

static int close_held_main(void *p)
{
	const char *name = p;
	shmcfg *h = NULL, *other = NULL;
	CHECK(shmcfg_attach(name, 0, NULL, &h) == 0, 2, "attach");
	CHECK(shmcfg_attach(name, SHMCFG_ATTACH_RDONLY, NULL, &other) == 0, 3, "attach read-only");
	shmcfg_snapshot *s;
	CHECK(shmcfg_snapshot_acquire(h, &s) == 0, 4, "snapshot");
	CHECK(entries_of_mine(other) == 1, 5, "the snapshot's reader entry");
	/* the close is left to the release (layout 9: it waited for a grace
	 * period that this thread's held snapshot blocked, for ever) */
	shmcfg_close(h);
	shmcfg_value v = {0};
	CHECK(shmcfg_snapshot_get(s, T_A, &v) == 0 && v.u.i == 7, 6, "the snapshot after the close: %" PRId64, v.u.i);
	CHECK(entries_of_mine(other) == 1, 7, "the entry stays while the snapshot is held");
	shmcfg_snapshot_release(s);
	/* then the deferred close ends: the entry is freed */
	uint64_t deadline = mono_ms() + CHILD_TIMEOUT_MS / 2;
	while (entries_of_mine(other) != 0)
		CHECK(mono_ms() < deadline, 8, "the entry was never freed");
	/* a snapshot never released (a failed assertion): the close returns */
	CHECK(shmcfg_attach(name, 0, NULL, &h) == 0, 9, "attach again");
	CHECK(shmcfg_snapshot_acquire(h, &s) == 0, 10, "snapshot again");
	shmcfg_close(h);
	shmcfg_close(other);
	return 0;
}

static int64_t int_of(const shmcfg_snapshot *s)
{
	shmcfg_value v = {0};
	return shmcfg_snapshot_get(s, T_A, &v) == 0 ? v.u.i : -1;
}

/* Copied snapshots held at the close: of a read-only handle, and of a
 * read-write one whose four pins each hold a generation. */
static int close_copies_main(void *p)
{
	const char *name = p;
	shmcfg *h = NULL, *other = NULL;
	shmcfg_snapshot *held[SEG_PINS], *c;
	int inherited = maps_of(name); /* the parent's, across fork() */
	setenv("SHMCFG_THREAD_PINS", "0", 1); /* SEG_PINS generations: the process's pins */
	CHECK(shmcfg_attach(name, SHMCFG_ATTACH_RDONLY, NULL, &h) == 0, 2, "attach read-only");
	CHECK(shmcfg_snapshot_acquire(h, &c) == 0 && ((struct shmcfg_snapshot *)c)->is_copy, 3, "a copy");
	CHECK(maps_of(name) > inherited, 4, "mapped");
	shmcfg_close(h);
	CHECK(maps_of(name) > inherited, 5, "the close waits for the copy's release");
	CHECK(int_of(c) == 7, 6, "the copy after the close");
	shmcfg_snapshot_release(c);
	CHECK(maps_of(name) == inherited, 7, "the close ended at the release");

	CHECK(shmcfg_attach(name, 0, NULL, &h) == 0, 8, "attach");
	CHECK(shmcfg_attach(name, SHMCFG_ATTACH_RDONLY, NULL, &other) == 0, 9, "attach read-only");
	for (int k = 0; k < (int)SEG_PINS; k++) {
		CHECK(commit_n(h, 100 + k, NULL) == 0, 10, "commit");
		CHECK(shmcfg_snapshot_acquire(h, &held[k]) == 0 && !((struct shmcfg_snapshot *)held[k])->is_copy, 11,
		      "pinned snapshot %d", k);
	}
	CHECK(commit_n(h, 200, NULL) == 0, 12, "commit");
	CHECK(shmcfg_snapshot_acquire(h, &c) == 0 && ((struct shmcfg_snapshot *)c)->is_copy, 13,
	      "a copy: every pin holds an older generation");
	shmcfg_close(h);
	for (int k = 0; k < (int)SEG_PINS; k++) {
		CHECK(int_of(held[k]) == 100 + k, 14, "pinned snapshot %d after the close", k);
		shmcfg_snapshot_release(held[k]);
	}
	CHECK(entries_of_mine(other) == 1, 15, "the close waits for the copy's release");
	CHECK(int_of(c) == 200, 16, "the copy after the close");
	shmcfg_snapshot_release(c);
	CHECK(entries_of_mine(other) == 0, 17, "the close ended at the release");
	shmcfg_close(other);
	return 0;
}

/* Copies held at the close read the handle's schema: the close waits for
 * them as for pinned snapshots (with the copies uncounted, the last pinned
 * release ended the close and the copy read freed memory). */
static void test_close_with_copies_held(void **state)
{
	(void)state;
	const char *name = new_name("mp-closecopy");
	shmcfg *h = keep(test_create(name, NULL));
	assert_int_equal(commit_n(h, 7, NULL), 0);
	pid_t pid = spawn(close_copies_main, (void *)name);
	assert_child_ok(pid);
	drop(h);
}

/* Closing a handle while this thread holds a snapshot neither hangs nor
 * frees what the snapshot reads: the close ends once it is released (a test
 * whose assertion fails with a snapshot held fails instead of hanging). */
static void test_close_with_snapshot_held(void **state)
{
	(void)state;
	const char *name = new_name("mp-closeheld");
	shmcfg *h = keep(test_create(name, NULL));
	assert_int_equal(commit_n(h, 7, NULL), 0);
	pid_t pid = spawn(close_held_main, (void *)name);
	assert_child_ok(pid); /* a hang is for ever: CHILD_TIMEOUT_MS tells it */
	drop(h);
}

int main(void)
{
	unsetenv("SHMCFG_FAULT");
	if (getenv("TEST_FILTER")) /* e.g. TEST_FILTER='*wait*' */
		cmocka_set_test_filter(getenv("TEST_FILTER"));
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_consistency_across_processes, teardown),
		cmocka_unit_test_teardown(test_readonly_process_consistency, teardown),
		cmocka_unit_test_teardown(test_readonly_snapshot_is_a_copy, teardown),
		cmocka_unit_test_teardown(test_read_after_commit_sees_it, teardown),
		cmocka_unit_test_teardown(test_wait_across_processes, teardown),
		cmocka_unit_test_teardown(test_wait_timeout_and_past_generation, teardown),
		cmocka_unit_test_teardown(test_noop_commit_wakes_nobody, teardown),
#if !defined(__SANITIZE_THREAD__)
		/* ThreadSanitizer cannot follow a child that starts a thread
		 * after a fork of a multithreaded process ("starting new threads
		 * after multi-threaded fork is not supported"; with
		 * die_after_fork=0, "dup thread with used id"): the plain and
		 * ASan builds run it. Left out, not skipped: cmocka's skip()
		 * prints "not ok # SKIP", a failure to automake's TAP driver. */
		cmocka_unit_test_teardown(test_fork_after_parent_snapshots, teardown),
#endif
		cmocka_unit_test_teardown(test_inherited_handle, teardown),
		cmocka_unit_test_teardown(test_close_with_snapshot_held, teardown),
		cmocka_unit_test_teardown(test_close_with_copies_held, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
