/* SPDX-License-Identifier: MIT */
/* The writer lock (lib/commit/wlock.c): a word of the lock object, taken
 * without a system call when free; its owner's death told by the OFD lock of
 * the owner's reader entry (or, for a writer without one, of byte 0).
 * Everything is real: processes, SIGKILL and SIGSTOP at the library's fault
 * points, a seccomp filter that kills a process on the system calls a lock
 * would make. Children report through their exit status. */

#include <errno.h>
#include <inttypes.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include "internal.h"
#include "slot.h" /* shmcfg__heap_verify */

#include "common.h"
#include "proc.h"

#define LONG_TIMEOUT_MS 10000 /* where a commit must succeed: only a wedged lock waits this long */
#define SHORT_TIMEOUT_MS 300  /* where a commit must fail with SHMCFG_E_LOCKED */

struct fault_arg {
	const char *name;
	const char *point;
};

/* Attach, then commit with SHMCFG_FAULT set: killed (or stopped) there. */
static int fault_writer_main(void *p)
{
	struct fault_arg *a = p;
	shmcfg *h = NULL;
	int r = shmcfg_attach(a->name, 0, NULL, &h);
	CHECK(r == 0, 2, "attach: %s", shmcfg_strerror(r));
	shmcfg_set_commit_timeout(h, LONG_TIMEOUT_MS);
	setenv("SHMCFG_FAULT", a->point, 1);
	r = commit_n(h, 12345, NULL);
	/* a stopped writer that was let go finishes its commit */
	CHECK(strstr(a->point, ":stop") && r == 0, 10, "commit returned %d (%s: %s) at fault point %s", r,
	      shmcfg_strerror(r), shmcfg_errdetail(), a->point);
	return 0;
}

/* Attach and commit once (n = 777), with a long timeout. */
static int writer_main(void *p)
{
	shmcfg *h = NULL;
	int r = shmcfg_attach(p, 0, NULL, &h);
	CHECK(r == 0, 2, "attach: %s", shmcfg_strerror(r));
	shmcfg_set_commit_timeout(h, LONG_TIMEOUT_MS);
	r = commit_n(h, 777, NULL);
	CHECK(r == 0, 3, "commit: %s: %s", shmcfg_strerror(r), shmcfg_errdetail());
	shmcfg_close(h);
	return 0;
}

static void commit_ok(shmcfg *h, int64_t n, const char *after)
{
	shmcfg_set_commit_timeout(h, LONG_TIMEOUT_MS);
	int r = commit_n(h, n, NULL);
	if (r)
		fail_msg("commit after %s: %s: %s", after, shmcfg_strerror(r), shmcfg_errdetail());
	assert_int_equal(get_i(h, T_A), n);
	assert_int_equal(shmcfg_check(h, true, print_problem, NULL), 0);
	if (shmcfg__heap_verify(h))
		fail_msg("after %s: %s", after, shmcfg_errdetail());
}

static void kill_writer_at(const char *name, const char *point)
{
	struct fault_arg a = {name, point};
	assert_child_killed(spawn(fault_writer_main, &a));
}

/* Whether shmcfg_stat of h shows the writer lock so: its state, its
 * holder's pid (and then a reader entry), the generation a commit left
 * half built; what it shows otherwise printed. */
static bool writer_shows(shmcfg *h, uint32_t state, pid_t pid, uint64_t building)
{
	shmcfg_info info;
	if (shmcfg_stat(h, &info) != 0)
		return false;
	bool ok = info.writer == state && info.writer_pid == pid && info.building == building &&
		  (pid ? info.writer_entry < info.nreaders : info.writer_entry == UINT32_MAX);
	if (!ok)
		print_message("# stat: writer %u, pid %d, entry %u, building %" PRIu64 "; expected %u, %d, %" PRIu64 "\n",
			      info.writer, (int)info.writer_pid, info.writer_entry, info.building, state, (int)pid,
			      building);
	return ok;
}

static void count_pid(const shmcfg_reader *r, void *ud)
{
	pid_t *p = ud;
	if (r->pid == p[0])
		p[1]++;
}

/* ------------------------------------------------------------------ */

/*
 * The uncontended lock takes no system call: a process that committed once
 * (its reader entry claimed) commits again under a seccomp filter that kills
 * it on fcntl(2) (an OFD lock) or futex(2) (a wait or a wake).
 */
static int no_syscall_main(void *p)
{
	shmcfg *h = NULL;
	int r = shmcfg_attach(p, 0, NULL, &h);
	CHECK(r == 0, 2, "attach: %s", shmcfg_strerror(r));
	r = commit_n(h, 1, NULL);
	CHECK(r == 0, 3, "first commit: %s", shmcfg_strerror(r));
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_fcntl, 2, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_futex, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
	};
	struct sock_fprog prog = {.len = sizeof f / sizeof f[0], .filter = f};
	CHECK(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0, 4, "no_new_privs: %s", strerror(errno));
	CHECK(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0, 5, "seccomp: %s", strerror(errno));
	for (int64_t n = 2; n <= 4; n++) {
		r = commit_n(h, n, NULL);
		CHECK(r == 0, 6, "commit: %s", shmcfg_strerror(r));
	}
	return 0;
}

static void test_uncontended_commit_takes_no_lock_syscall(void **state)
{
	(void)state;
	const char *name = new_name("wlock-nosys");
	shmcfg *h = keep(test_create(name, NULL));
	int st = reap(spawn(no_syscall_main, (void *)name));
	if (WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS)
		fail_msg("an uncontended commit called fcntl(2) or futex(2)");
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		char t[64];
		status_text(st, t, sizeof t);
		fail_msg("child %s", t);
	}
	assert_int_equal(get_i(h, T_A), 4);
	drop(h);
}

/*
 * Three writer processes commit at once, two of them without a reader entry
 * (the table has two, one of them ours: they hold byte 0 instead). Nobody times out, every
 * commit is a generation of its own, and the segment checks out: two
 * writers in one commit would tear a slot or the heap's counts.
 */
#define CONTENDERS 3
#define CONTENDED_COMMITS 150

struct board {
	int with_entry, without_entry;
	int started; /* contenders past their first commit */
};

static int contender_main(void *p)
{
	void **a = p;
	const char *name = a[0];
	struct board *bd = a[1];
	int64_t base = (int64_t)(intptr_t)a[2];
	shmcfg *h = NULL;
	int r = shmcfg_attach(name, 0, NULL, &h);
	CHECK(r == 0, 2, "attach: %s", shmcfg_strerror(r));
	shmcfg_set_commit_timeout(h, LONG_TIMEOUT_MS);
	for (int64_t k = 1; k <= CONTENDED_COMMITS; k++) {
		r = commit_n(h, base + k, NULL);
		CHECK(r == 0, 3, "commit %" PRId64 ": %s: %s", k, shmcfg_strerror(r), shmcfg_errdetail());
		if (k == 1) { /* all claim (or fail to) before anyone is done */
			__atomic_fetch_add(&bd->started, 1, __ATOMIC_SEQ_CST);
			uint64_t deadline = mono_ms() + CHILD_TIMEOUT_MS;
			while (__atomic_load_n(&bd->started, __ATOMIC_SEQ_CST) < CONTENDERS)
				CHECK(mono_ms() < deadline, 4, "the other contenders never started");
		}
	}
	__atomic_fetch_add(h->reader >= 0 ? &bd->with_entry : &bd->without_entry, 1, __ATOMIC_SEQ_CST);
	shmcfg_close(h);
	return 0;
}

static void test_contended_writers(void **state)
{
	(void)state;
	const char *name = new_name("wlock-cont");
	shmcfg *h = keep(test_create(name, &(shmcfg_create_opts){.readers = 2}));
	commit_ok(h, 1, "creation"); /* we hold one entry: one is left for three */
	struct board *bd = mmap(NULL, sizeof *bd, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(bd != MAP_FAILED);
	void *args[CONTENDERS][3];
	pid_t pids[CONTENDERS];
	for (int w = 0; w < CONTENDERS; w++) {
		args[w][0] = (void *)name;
		args[w][1] = bd;
		args[w][2] = (void *)(intptr_t)((w + 1) * 100000);
		pids[w] = spawn(contender_main, args[w]);
	}
	for (int w = 0; w < CONTENDERS; w++)
		assert_child_ok(pids[w]);
	assert_int_equal(shmcfg_generation(h), 2 + CONTENDERS * CONTENDED_COMMITS);
	/* one claimed the entry left, two went without */
	assert_int_equal(bd->with_entry, 1);
	assert_int_equal(bd->without_entry, CONTENDERS - 1);
	int64_t last = get_i(h, T_A) % 100000;
	assert_int_equal(last, CONTENDED_COMMITS);
	assert_int_equal(shmcfg_check(h, true, print_problem, NULL), 0);
	assert_int_equal(shmcfg__heap_verify(h), 0);
	munmap(bd, sizeof *bd);
	drop(h);
}

/* A writer killed holding the lock (its entry names it): the next commit
 * finds the entry's OFD lock free and takes the word; gc then finds the
 * dead writer's entry. */
static void test_owner_killed_holding_lock(void **state)
{
	(void)state;
	const char *name = new_name("wlock-dead");
	shmcfg *h = keep(test_create(name, NULL));
	/* our entry first: the writer's claim takes another, which our next
	 * commit does not claim in turn (a claim frees a lock: below) */
	commit_ok(h, 1, "creation");
	struct fault_arg a = {name, "commit.locked"};
	pid_t pid = spawn(fault_writer_main, &a);
	assert_child_killed(pid);
	assert_int_not_equal(h->lock_map->writer, 0); /* it died holding the word */
	commit_ok(h, 2, "a writer died holding the lock");
	pid_t found[2] = {pid, 0};
	assert_int_equal(shmcfg_gc(h, count_pid, found), 1);
	assert_int_equal(found[1], 1);
	drop(h);
}

/* The same, while a child it forked lives on: the child's copy of the
 * process must not keep the dead writer's entry (and so the lock) alive. */
struct fork_arg {
	const char *name;
	int up; /* the grandchild's pid goes up this pipe */
};

static int fork_then_die_main(void *p)
{
	struct fork_arg *a = p;
	shmcfg *h = NULL;
	int r = shmcfg_attach(a->name, 0, NULL, &h);
	CHECK(r == 0, 2, "attach: %s", shmcfg_strerror(r));
	r = commit_n(h, 5, NULL); /* the entry is claimed */
	CHECK(r == 0, 3, "commit: %s", shmcfg_strerror(r));
	pid_t c = fork();
	CHECK(c >= 0, 4, "fork: %s", strerror(errno));
	if (c == 0) {
		for (;;)
			pause();
	}
	int32_t c32 = (int32_t)c;
	CHECK(write_full(a->up, &c32, sizeof c32) == 0, 5, "pipe");
	setenv("SHMCFG_FAULT", "commit.locked", 1);
	r = commit_n(h, 6, NULL);
	CHECK(false, 10, "commit returned %d: the fault point never fired", r);
}

static void test_owner_killed_with_forked_child(void **state)
{
	(void)state;
	const char *name = new_name("wlock-fork");
	shmcfg *h = keep(test_create(name, NULL));
	int up[2];
	assert_int_equal(pipe(up), 0);
	struct fork_arg a = {name, up[1]};
	pid_t pid = spawn(fork_then_die_main, &a);
	close(up[1]);
	int32_t grandchild = 0;
	assert_int_equal(read_full(up[0], &grandchild, sizeof grandchild, CHILD_TIMEOUT_MS), 0);
	close(up[0]);
	assert_true(grandchild > 0 && nkids < MAX_KIDS);
	kids[nkids++] = grandchild; /* killed by the teardown */
	assert_child_killed(pid);
	assert_int_equal(kill(grandchild, 0), 0);
	commit_ok(h, 7, "a writer died holding the lock, its forked child alive");
	drop(h);
}

/* A writer killed while it takes the lock of a dead owner (holding the dead
 * owner's entry byte, before its compare-and-swap): the next one still can.
 * The taker claims its entry before the owner dies (else its claim would
 * take the dead owner's entry, which frees the lock by another path). */
struct chan_arg {
	const char *name;
	int up, down;
};

static int claim_then_commit_main(void *p)
{
	struct chan_arg *a = p;
	shmcfg *h = NULL;
	int r = shmcfg_attach(a->name, 0, NULL, &h);
	CHECK(r == 0, 2, "attach: %s", shmcfg_strerror(r));
	r = snapshot_once(h);
	CHECK(r == 0 && h->reader >= 0, 3, "snapshot: %s", shmcfg_strerror(r));
	char m = 'r';
	CHECK(write_full(a->up, &m, 1) == 0, 4, "pipe");
	CHECK(read_full(a->down, &m, 1, CHILD_TIMEOUT_MS) == 0 && m == 'g', 5, "no go");
	setenv("SHMCFG_FAULT", "wlock.owner_dead", 1);
	r = commit_n(h, 6, NULL);
	CHECK(false, 10, "commit returned %d (%s): it never met the dead owner", r, shmcfg_strerror(r));
}

static void test_killed_while_taking_from_dead(void **state)
{
	(void)state;
	const char *name = new_name("wlock-steal");
	shmcfg *h = keep(test_create(name, NULL));
	int up[2], down[2];
	assert_int_equal(pipe(up), 0);
	assert_int_equal(pipe(down), 0);
	struct chan_arg a = {name, up[1], down[0]};
	pid_t taker = spawn(claim_then_commit_main, &a);
	close(up[1]);
	close(down[0]);
	char m = 0;
	assert_int_equal(read_full(up[0], &m, 1, CHILD_TIMEOUT_MS), 0);
	assert_int_equal(m, 'r');
	kill_writer_at(name, "commit.locked");
	assert_int_equal(h->lock_map->writer, 2); /* entry 1's owner, dead */
	m = 'g';
	assert_int_equal(write_full(down[1], &m, 1), 0);
	assert_child_killed(taker);
	close(up[0]);
	close(down[1]);
	assert_int_equal(h->lock_map->writer & ~WLOCK_WAITERS, 2); /* it died before its CAS */
	commit_ok(h, 3, "a writer died while it took a dead writer's lock");
	drop(h);
}

/*
 * Writers without a reader entry (a table of one, held by the parent): a
 * fallback writer killed holding the lock is seen dead by a writer with an
 * entry (byte 0 free) and by another fallback writer (which holds byte 0).
 */
static void test_fallback_owner_killed(void **state)
{
	(void)state;
	const char *name = new_name("wlock-fallback");
	shmcfg *h = keep(test_create(name, &(shmcfg_create_opts){.readers = 1}));
	commit_ok(h, 1, "creation"); /* the parent holds the only entry */
	assert_true(h->reader == 0);
	kill_writer_at(name, "commit.locked");
	assert_int_equal(h->lock_map->writer & ~WLOCK_WAITERS, WLOCK_BY_OFD);
	/* dead to stat, whoever looks: this handle, a read-only one (which
	 * has no entry either), a new read-write one not yet in the table */
	shmcfg *ro = NULL, *rw = NULL;
	assert_int_equal(shmcfg_attach(name, SHMCFG_ATTACH_RDONLY, NULL, &ro), 0);
	assert_int_equal(shmcfg_attach(name, 0, NULL, &rw), 0);
	assert_true(writer_shows(h, SHMCFG_WRITER_DEAD, 0, 0));
	assert_true(writer_shows(ro, SHMCFG_WRITER_DEAD, 0, 0));
	assert_true(writer_shows(rw, SHMCFG_WRITER_DEAD, 0, 0));
	/* a scribbled word naming no entry: dead too (a commit takes it over) */
	uint32_t w = h->lock_map->writer;
	h->lock_map->writer = 0x7ffffff0u;
	assert_true(writer_shows(ro, SHMCFG_WRITER_DEAD, 0, 0));
	h->lock_map->writer = w;
	commit_ok(h, 2, "a writer without an entry died holding the lock");
	assert_true(writer_shows(ro, SHMCFG_WRITER_FREE, 0, 0));
	shmcfg_close(rw);
	shmcfg_close(ro);
	kill_writer_at(name, "commit.locked");
	assert_child_ok(spawn(writer_main, (void *)name));
	assert_int_equal(get_i(h, T_A), 777);
	assert_int_equal(h->lock_map->writer, 0);
	drop(h);
}

/*
 * The dead owner's entry is claimed by a new process before anyone commits:
 * the claim frees the lock (else waiters, finding the entry's byte held by
 * the new owner, would wait for ever). The committer then has no entry (the
 * table has one) and holds byte 0.
 */
static int claim_main(void *p)
{
	void **a = p;
	shmcfg *h = NULL;
	int r = shmcfg_attach(a[0], 0, NULL, &h);
	CHECK(r == 0, 2, "attach: %s", shmcfg_strerror(r));
	r = snapshot_once(h);
	CHECK(r == 0 && h->reader == 0, 3, "snapshot: %s (entry %d)", shmcfg_strerror(r), h->reader);
	char m = 'c';
	CHECK(write_full(*(int *)a[1], &m, 1) == 0, 4, "pipe");
	for (;;)
		pause();
}

static void test_dead_owner_entry_claimed(void **state)
{
	(void)state;
	const char *name = new_name("wlock-claim");
	shmcfg *h = keep(test_create(name, &(shmcfg_create_opts){.readers = 1}));
	kill_writer_at(name, "commit.locked");
	assert_int_equal(h->lock_map->writer, 1); /* entry 0's owner */
	int up[2];
	assert_int_equal(pipe(up), 0);
	void *args[2] = {(void *)name, &up[1]};
	pid_t claimer = spawn(claim_main, args);
	close(up[1]);
	char m = 0;
	if (read_full(up[0], &m, 1, CHILD_TIMEOUT_MS))
		fail_msg("the claimer did not report");
	close(up[0]);
	assert_int_equal(m, 'c');
	assert_int_equal(h->lock_map->writer, 0);
	commit_ok(h, 4, "the dead writer's entry was claimed by a live process");
	assert_true(h->reader < 0);
	kill(claimer, SIGKILL);
	assert_child_killed(claimer);
	drop(h);
}

/* A stopped owner keeps the lock: others fail with SHMCFG_E_LOCKED after
 * their timeout and change nothing; let go, it finishes; killed while
 * stopped, its lock is taken. */
static void test_stopped_owner(void **state)
{
	(void)state;
	const char *name = new_name("wlock-stop");
	shmcfg *h = keep(test_create(name, NULL));
	struct fault_arg a = {name, "commit.locked:stop"};
	pid_t pid = spawn(fault_writer_main, &a);
	assert_child_stops(pid, a.point);
	shmcfg_set_commit_timeout(h, SHORT_TIMEOUT_MS);
	int r = commit_n(h, 9, NULL);
	char want[96];
	snprintf(want, sizeof want, "another writer (pid %d, reader entry ", (int)pid);
	bool named = strstr(shmcfg_errdetail(), want) && strstr(shmcfg_errdetail(), ") held the lock for 300 ms");
	/* stat shows the holder, to this handle and to a read-only one */
	shmcfg *ro = NULL;
	bool shown = writer_shows(h, SHMCFG_WRITER_HELD, pid, 0) &&
		     shmcfg_attach(name, SHMCFG_ATTACH_RDONLY, NULL, &ro) == 0 &&
		     writer_shows(ro, SHMCFG_WRITER_HELD, pid, 0);
	if (!named || !shown)
		kill(pid, SIGKILL); /* a stopped child would hang the run */
	assert_int_equal(r, SHMCFG_E_LOCKED);
	assert_true(named); /* the holder named: its pid, a stopped process's */
	assert_true(shown);
	assert_int_equal(shmcfg_generation(h), 1);
	assert_int_equal(kill(pid, SIGCONT), 0);
	assert_child_ok(pid);
	assert_int_equal(get_i(h, T_A), 12345);
	assert_int_equal(h->lock_map->writer, 0);
	assert_true(writer_shows(ro, SHMCFG_WRITER_FREE, 0, 0));
	pid = spawn(fault_writer_main, &a);
	assert_child_stops(pid, a.point);
	assert_int_equal(commit_n(h, 9, NULL), SHMCFG_E_LOCKED);
	assert_int_equal(kill(pid, SIGKILL), 0);
	assert_child_killed(pid);
	assert_true(writer_shows(ro, SHMCFG_WRITER_DEAD, pid, 0));
	commit_ok(h, 10, "a stopped writer was killed holding the lock");
	assert_true(writer_shows(ro, SHMCFG_WRITER_FREE, 0, 0));
	shmcfg_close(ro);
	drop(h);
}

/* Looks of stat beside live writers, and the wrong ones: a dead holder,
 * an unknown lock, a half-built commit with the lock free, or a holder
 * named otherwise than the writers are (by their reader entries, or, with
 * the table full, without one). The first wrong look is printed. */
struct looks {
	long n, held, wrong;
};
static void look(const shmcfg *h, struct looks *l, bool entries)
{
	shmcfg_info x;
	assert_int_equal(shmcfg_stat(h, &x), 0);
	l->n++;
	l->held += x.writer == SHMCFG_WRITER_HELD;
	bool named = x.writer_entry != UINT32_MAX;
	if (x.writer == SHMCFG_WRITER_DEAD || x.writer == SHMCFG_WRITER_UNKNOWN ||
	    (x.writer == SHMCFG_WRITER_FREE && x.building) || (x.writer == SHMCFG_WRITER_HELD && named != entries) ||
	    (!entries && named)) {
		if (!l->wrong++)
			print_message("# stat: writer %u, pid %d, entry %u, building %" PRIu64 "\n", x.writer,
				      (int)x.writer_pid, x.writer_entry, x.building);
	}
}

static void looks_right(const struct looks *l)
{
	print_message("# %ld looks, %ld saw the lock held, %ld wrong\n", l->n, l->held, l->wrong);
	assert_int_equal(l->wrong, 0);
}

/* Commit n times (the lock taken and dropped, wip set and cleared). */
static int busy_writer_main(void *p)
{
	shmcfg *h = NULL;
	int r = shmcfg_attach(p, 0, NULL, &h);
	CHECK(r == 0, 2, "attach: %s", shmcfg_strerror(r));
	for (int i = 0; i < 20000; i++)
		CHECK(commit_n(h, i, NULL) == 0, 3, "commit %d: %s", i, shmcfg_errdetail());
	shmcfg_close(h);
	return 0;
}

/* Stat beside a writer that commits all the time, and beside writers that
 * commit once and exit: never a dead holder, never a half-built commit
 * with the lock free (a word of one moment with the wip of another), and a
 * holder named by its entry, even when the word keeps moving. */
static void test_stat_beside_live_writers(void **state)
{
	(void)state;
	const char *name = new_name("wlock-busy");
	shmcfg *h = keep(test_create(name, NULL));
	shmcfg *ro = NULL;
	assert_int_equal(shmcfg_attach(name, SHMCFG_ATTACH_RDONLY, NULL, &ro), 0);
	pid_t busy = spawn(busy_writer_main, (void *)name);
	struct looks l = {0};
	for (int k = 0; k < 40; k++) {
		pid_t once = spawn(writer_main, (void *)name);
		for (int i = 0; i < 500; i++) {
			look(h, &l, true);
			look(ro, &l, true);
		}
		assert_child_ok(once);
	}
	assert_child_ok(busy);
	looks_right(&l);
	shmcfg_close(ro);
	drop(h);
}

/* The same beside two writers without reader entries (the table is full:
 * they share the fallback's word, and hand its byte over to each other):
 * never a dead holder; a busy word is named held, never by an entry. */
static void test_stat_beside_tablefull_writers(void **state)
{
	(void)state;
	const char *name = new_name("wlock-busyfb");
	shmcfg *h = keep(test_create(name, &(shmcfg_create_opts){.readers = 1}));
	commit_ok(h, 1, "creation"); /* the parent holds the only entry */
	shmcfg *ro = NULL;
	assert_int_equal(shmcfg_attach(name, SHMCFG_ATTACH_RDONLY, NULL, &ro), 0);
	pid_t w[2] = {spawn(busy_writer_main, (void *)name), spawn(busy_writer_main, (void *)name)};
	struct looks l = {0};
	/* as long as both commit (a handover is ~1 in 2,000 looks) */
	for (int live = 2; live;) {
		for (int k = 0; k < 2; k++) {
			int st;
			if (w[k] && waitpid(w[k], &st, WNOHANG) == w[k]) {
				assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
				w[k] = 0;
				live--;
			}
		}
		for (int i = 0; i < 64; i++)
			look(i % 8 ? ro : h, &l, false);
	}
	looks_right(&l);
	shmcfg_close(ro);
	drop(h);
}

/* A writer killed half way through its commit: stat shows it dead
 * holding the lock, with the generation it was building; the next commit
 * takes the lock over and repairs. */
static void test_stat_shows_dead_writer(void **state)
{
	(void)state;
	const char *name = new_name("wlock-stat");
	shmcfg *h = keep(test_create(name, NULL));
	assert_true(writer_shows(h, SHMCFG_WRITER_FREE, 0, 0));
	struct fault_arg a = {name, "commit.slot"};
	pid_t pid = spawn(fault_writer_main, &a);
	assert_child_killed(pid);
	assert_true(writer_shows(h, SHMCFG_WRITER_DEAD, pid, shmcfg_generation(h) + 1));
	commit_ok(h, 3, "a writer died in its commit");
	assert_true(writer_shows(h, SHMCFG_WRITER_FREE, 0, 0));
	drop(h);
}

/* A forked child of a writer that owns an entry (its parent's commit
 * claimed it) cannot take the lock as its parent: shmcfg_sync_set, which
 * takes the lock without the commit's own fork check, is refused, the word
 * stays free, and the parent and another writer still commit. */
static int sync_in_child_main(void *p)
{
	shmcfg *h = p;
	shmcfg_sync_info info = {.pid = getpid()};
	snprintf(info.host, sizeof info.host, "forked");
	int r = shmcfg_sync_set(h, &info);
	CHECK(r == SHMCFG_E_FORKED, 2, "sync_set in a forked child: %s", shmcfg_errname(r));
	CHECK(h->lock_map->writer == 0, 3, "the child left the word %#x", h->lock_map->writer);
	return 0;
}

static void test_forked_child_cannot_take_lock(void **state)
{
	(void)state;
	const char *name = new_name("wlock-child");
	shmcfg *h = keep(test_create(name, NULL));
	commit_ok(h, 3, "the parent's first commit (claims its entry)");
	assert_true(h->reader >= 0);
	pid_t pid = spawn(sync_in_child_main, h);
	assert_child_ok(pid);
	assert_int_equal(h->lock_map->writer, 0);
	commit_ok(h, 4, "the parent after its child's attempt");
	shmcfg *other = NULL;
	assert_int_equal(shmcfg_attach(name, 0, NULL, &other), 0);
	keep(other);
	commit_ok(other, 5, "another writer after it");
	drop(other);
	drop(h);
}

int main(void)
{
	unsetenv("SHMCFG_FAULT");
	/* a snapshot claims the process's entry here (the writer lock names it) */
	setenv("SHMCFG_THREAD_PINS", "0", 1);
	if (getenv("TEST_FILTER"))
		cmocka_set_test_filter(getenv("TEST_FILTER"));
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_uncontended_commit_takes_no_lock_syscall, teardown),
		cmocka_unit_test_teardown(test_contended_writers, teardown),
		cmocka_unit_test_teardown(test_owner_killed_holding_lock, teardown),
		cmocka_unit_test_teardown(test_stat_shows_dead_writer, teardown),
		cmocka_unit_test_teardown(test_stat_beside_live_writers, teardown),
		cmocka_unit_test_teardown(test_stat_beside_tablefull_writers, teardown),
		cmocka_unit_test_teardown(test_owner_killed_with_forked_child, teardown),
		cmocka_unit_test_teardown(test_killed_while_taking_from_dead, teardown),
		cmocka_unit_test_teardown(test_fallback_owner_killed, teardown),
		cmocka_unit_test_teardown(test_dead_owner_entry_claimed, teardown),
		cmocka_unit_test_teardown(test_stopped_owner, teardown),
		cmocka_unit_test_teardown(test_forked_child_cannot_take_lock, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
