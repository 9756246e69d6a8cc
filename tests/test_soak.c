/* SPDX-License-Identifier: MIT */
/* The soak: many processes reading, committing, attaching and detaching at
 * random while a supervisor kills some of them (SIGKILL, often in the middle
 * of a commit or while they hold snapshots), stalls others (SIGSTOP for a
 * while), and starts new ones; invariants are checked throughout and at the
 * end.
 *
 *   SHMCFG_SOAK_PROCS    worker processes (default 6; `make soak`: 16)
 *   SHMCFG_SOAK_SECONDS  duration (default 5; `make soak`: 60)
 *   SHMCFG_SOAK_SEED     random seed (default: time and pid; printed)
 *
 * Every commit writes one transaction: a = n, b = -n, c = str(n), with a
 * fresh random n. Invariants:
 *  - every snapshot shows a whole generation (b = -a, c = str(a)), and a
 *    snapshot held for a while (up to 30 ms, across other commits) still
 *    shows what it showed at first: its slot was not rewritten;
 *  - the generation seen by a process never goes backwards, and a commit's
 *    generation is above every generation its process saw before;
 *  - inline reads of a, b and c never fail; a thread's patch is what the
 *    thread reads;
 *  - commits fail only with SHMCFG_E_BUSY or SHMCFG_E_LOCKED (bounded waits
 *    behind stalled processes), never otherwise;
 *  - at the end: shmcfg_check(deep) finds nothing; the generation is 1 + the
 *    successful commits, give or take the commits of workers killed between
 *    their publication and their count (counted: a worker flags itself
 *    "in a commit" around it); the final values are whole; after gc no
 *    entry of the reader table is dead, and only the supervisor's is used.
 * The operation counts are printed as TAP comments (doc/reliability.md).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>

#include "common.h"

#define MAX_PROCS 64
#define HOLD_MAX_US 30000

enum op {
	OP_INLINE, OP_SNAPSHOT, OP_HOLD, OP_COMMIT, OP_REATTACH, OP_WAIT, OP_PATCH, OP_INSPECT,
	OP_COUNT
};
static const char *const op_names[OP_COUNT] = {"inline reads", "snapshots", "held snapshots",
					       "commit attempts", "detach+attach", "waits",
					       "patched reads", "inspections"};

/* Shared between the supervisor and the workers (an anonymous shared mapping). */
struct shared {
	volatile int stop;
	uint64_t ops[OP_COUNT];
	uint64_t op_us[OP_COUNT], op_max_us[OP_COUNT]; /* time spent, longest */
	uint64_t commits_ok, commits_busy, commits_locked;
	uint64_t violations;
	char first_violation[512];
	struct {
		volatile int in_commit; /* between the call and the count */
		volatile pid_t pid;
	} w[MAX_PROCS];
};

static struct shared *sh;
static const char *seg;

static uint64_t mono_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static unsigned env_uint(const char *name, unsigned def, unsigned max)
{
	const char *v = getenv(name);
	if (!v || !*v)
		return def;
	unsigned long x = strtoul(v, NULL, 10);
	return x == 0 ? def : x > max ? max : (unsigned)x;
}

/* ------------------------------------------------------------------ */
/* Workers                                                            */
/* ------------------------------------------------------------------ */

static void violation(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void violation(const char *fmt, ...)
{
	if (__atomic_fetch_add(&sh->violations, 1, __ATOMIC_SEQ_CST) == 0) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(sh->first_violation, sizeof sh->first_violation, fmt, ap);
		va_end(ap);
	}
	fprintf(stderr, "# soak violation in %d: ", (int)getpid());
	va_list ap;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " [%s]\n", shmcfg_errdetail());
}

struct worker {
	int slot;
	unsigned seed;
	shmcfg *h;
	uint64_t seen; /* highest generation seen */
};

static unsigned rnd(struct worker *w, unsigned n)
{
	return (unsigned)rand_r(&w->seed) % n;
}

static void attach(struct worker *w)
{
	bool rdonly = rnd(w, 5) == 0;
	int r = shmcfg_attach(seg, rdonly ? SHMCFG_ATTACH_RDONLY : 0, NULL, &w->h);
	if (r) {
		violation("attach (%s): %s", rdonly ? "read-only" : "read-write", shmcfg_strerror(r));
		_exit(3);
	}
	shmcfg_set_commit_timeout(w->h, 1000);
}

static void saw(struct worker *w, uint64_t gen, const char *what)
{
	if (gen < w->seen)
		violation("%s: generation %" PRIu64 " after %" PRIu64, what, gen, w->seen);
	else
		w->seen = gen;
}

/* a, b, c of a snapshot, checked whole; returns a. */
static int64_t snapshot_n(struct worker *w, shmcfg_snapshot *s)
{
	shmcfg_value a, b, c;
	int r;
	if ((r = shmcfg_snapshot_get(s, T_A, &a)) || (r = shmcfg_snapshot_get(s, T_B, &b)) ||
	    (r = shmcfg_snapshot_get(s, T_C, &c))) {
		violation("snapshot_get: %s", shmcfg_strerror(r));
		return 0;
	}
	char want[32];
	snprintf(want, sizeof want, "%" PRId64, a.u.i);
	if (b.u.i != -a.u.i || c.u.str.len != strlen(want) || memcmp(c.u.str.ptr, want, c.u.str.len))
		violation("torn generation %" PRIu64 ": a=%" PRId64 " b=%" PRId64 " c=%.*s",
			  shmcfg_snapshot_generation(s), a.u.i, b.u.i, (int)c.u.str.len, c.u.str.ptr);
	(void)w;
	return a.u.i;
}

static void op_snapshot(struct worker *w, bool hold)
{
	shmcfg_snapshot *s;
	int r = shmcfg_snapshot_acquire(w->h, &s);
	if (r) {
		violation("snapshot_acquire: %s", shmcfg_strerror(r));
		return;
	}
	uint64_t gen = shmcfg_snapshot_generation(s);
	saw(w, gen, "snapshot");
	int64_t n = snapshot_n(w, s);
	if (hold) {
		usleep(rnd(w, HOLD_MAX_US));
		/* the pinned (or copied) generation did not change under us */
		int64_t again = snapshot_n(w, s);
		if (again != n || shmcfg_snapshot_generation(s) != gen)
			violation("held snapshot of generation %" PRIu64 " changed: %" PRId64 " -> %" PRId64,
				  gen, n, again);
	}
	shmcfg_snapshot_release(s);
}

static void op_inline(struct worker *w)
{
	for (int i = 0; i < 64; i++) {
		uint64_t g = shmcfg_generation(w->h);
		saw(w, g, "inline generation");
		int64_t a, b;
		int r;
		if ((r = shmcfg_get_int(w->h, T_A, &a)) || (r = shmcfg_get_int(w->h, T_B, &b))) {
			violation("inline read: %s", shmcfg_strerror(r));
			return;
		}
		/* a and b may belong to two generations: nothing to compare */
	}
	shmcfg_value c;
	int r = shmcfg_get(w->h, T_C, &c);
	if (r)
		violation("get: %s", shmcfg_strerror(r));
	else
		shmcfg_value_clear(&c);
}

static void op_commit(struct worker *w)
{
	if (shmcfg_readonly(w->h)) {
		op_inline(w);
		return;
	}
	int64_t n = (int64_t)(((uint64_t)rand_r(&w->seed) << 31 | (uint64_t)rand_r(&w->seed)) >> 2);
	char text[32];
	snprintf(text, sizeof text, "%" PRId64, n);
	shmcfg_txn *t;
	int r = shmcfg_txn_begin(w->h, &t);
	if (r) {
		violation("txn_begin: %s", shmcfg_strerror(r));
		return;
	}
	if ((r = shmcfg_txn_set_int(t, T_A, n)) || (r = shmcfg_txn_set_int(t, T_B, -n)) ||
	    (r = shmcfg_txn_set_str(t, T_C, text))) {
		violation("txn_set: %s", shmcfg_strerror(r));
		shmcfg_txn_abort(t);
		return;
	}
	uint64_t gen = 0, before = w->seen;
	sh->w[w->slot].in_commit = 1;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	bool published = false;
	r = shmcfg_txn_commit_ex(t, &gen, &published);
	if (r == 0 && published)
		__atomic_fetch_add(&sh->commits_ok, 1, __ATOMIC_SEQ_CST);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	sh->w[w->slot].in_commit = 0;
	if (r == 0 && published) {
		if (gen <= before)
			violation("commit published generation %" PRIu64 ", not above %" PRIu64, gen, before);
		saw(w, gen, "commit");
	} else if (r == SHMCFG_E_BUSY) {
		__atomic_fetch_add(&sh->commits_busy, 1, __ATOMIC_RELAXED);
	} else if (r == SHMCFG_E_LOCKED) {
		__atomic_fetch_add(&sh->commits_locked, 1, __ATOMIC_RELAXED);
	} else if (r != 0) { /* 0 unpublished: a random n equal to the current one */
		violation("commit: %s", shmcfg_strerror(r));
	}
}

static void op_wait(struct worker *w)
{
	uint64_t g = shmcfg_generation(w->h), got = 0;
	int r = shmcfg_wait(w->h, g, (int)rnd(w, 10), &got);
	if (r && r != -ETIMEDOUT && r != -EINTR)
		violation("wait: %s", shmcfg_strerror(r));
	if (r == 0 && got <= g)
		violation("wait returned generation %" PRIu64 " after %" PRIu64, got, g);
}

static void op_patch(struct worker *w)
{
	int r = shmcfg_patch_push(w->h);
	if (r) {
		violation("patch_push: %s", shmcfg_strerror(r));
		return;
	}
	int64_t want = (int64_t)rnd(w, 1000000), got = -1;
	if ((r = shmcfg_patch_set(w->h, T_A, &(shmcfg_value){.type = SHMCFG_INT, .u.i = want})))
		violation("patch_set: %s", shmcfg_strerror(r));
	else if ((r = shmcfg_get_int(w->h, T_A, &got)) || got != want)
		violation("patched read: %d, %" PRId64 " (want %" PRId64 ")", r, got, want);
	int64_t alias = -1;
	if ((r = shmcfg_get_int(w->h, T_ALIAS2, &alias)) || alias != want)
		violation("patched read through an alias: %d, %" PRId64 " (want %" PRId64 ")", r, alias, want);
	if ((r = shmcfg_patch_pop(w->h)))
		violation("patch_pop: %s", shmcfg_strerror(r));
}

static void op_inspect(struct worker *w)
{
	switch (rnd(w, 4)) {
	case 0: {
		int bad = shmcfg_check(w->h, rnd(w, 2), NULL, NULL);
		if (bad)
			violation("check found %d problems", bad);
		break;
	}
	case 1:
		if (!shmcfg_readonly(w->h)) {
			int r = shmcfg_gc(w->h, NULL, NULL);
			if (r < 0)
				violation("gc: %s", shmcfg_strerror(r));
		}
		break;
	case 2: {
		char *d = NULL;
		int r = shmcfg_dump(w->h, 0, &d);
		if (r)
			violation("dump: %s", shmcfg_strerror(r));
		free(d);
		break;
	}
	default: {
		shmcfg_commit c;
		uint64_t g = shmcfg_generation(w->h);
		int r = shmcfg_commit_info(w->h, g, &c);
		/* the record of a generation we see is there, unless 64 newer
		 * commits pushed it out of the log meanwhile */
		if (r && r != -ENOENT)
			violation("commit_info: %s", shmcfg_strerror(r));
		if (r == 0 && c.generation != g)
			violation("commit_info(%" PRIu64 ") gives %" PRIu64, g, c.generation);
	}
	}
}

static int worker_main(int slot, unsigned seed)
{
	/* not cmocka's handlers: a crash must end the child */
	int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
	for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
		signal(sigs[i], SIG_DFL);
	struct worker w = {.slot = slot, .seed = seed};
	attach(&w);
	/* weights of the operations, out of 100 */
	static const unsigned weight[OP_COUNT] = {30, 18, 7, 22, 6, 5, 6, 6};
	while (!sh->stop) {
		unsigned x = rnd(&w, 100), op = 0;
		while (op < OP_COUNT - 1 && x >= weight[op])
			x -= weight[op++];
		uint64_t t0 = mono_us();
		switch (op) {
		case OP_INLINE:
			op_inline(&w);
			break;
		case OP_SNAPSHOT:
			op_snapshot(&w, false);
			break;
		case OP_HOLD:
			op_snapshot(&w, true);
			break;
		case OP_COMMIT:
			op_commit(&w);
			break;
		case OP_REATTACH:
			w.h = shmcfg_close(w.h);
			attach(&w); /* generations still never go backwards */
			break;
		case OP_WAIT:
			op_wait(&w);
			break;
		case OP_PATCH:
			op_patch(&w);
			break;
		default:
			op_inspect(&w);
		}
		uint64_t dt = mono_us() - t0, max = __atomic_load_n(&sh->op_max_us[op], __ATOMIC_RELAXED);
		while (dt > max && !__atomic_compare_exchange_n(&sh->op_max_us[op], &max, dt, false,
								__ATOMIC_RELAXED, __ATOMIC_RELAXED))
			;
		__atomic_fetch_add(&sh->op_us[op], dt, __ATOMIC_RELAXED);
		__atomic_fetch_add(&sh->ops[op], 1, __ATOMIC_RELAXED);
	}
	shmcfg_close(w.h);
	return 0;
}

/* ------------------------------------------------------------------ */
/* The supervisor                                                     */
/* ------------------------------------------------------------------ */

static pid_t start_worker(int slot, unsigned seed)
{
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(worker_main(slot, seed));
	sh->w[slot].pid = pid;
	sh->w[slot].in_commit = 0;
	return pid;
}

struct table {
	int used, dead, alive;
};

static void tally(const shmcfg_reader *r, void *ud)
{
	struct table *t = ud;
	t->used++;
	if (r->alive)
		t->alive++;
	else
		t->dead++;
}

static void test_soak(void **state)
{
	(void)state;
	unsigned procs = env_uint("SHMCFG_SOAK_PROCS", 6, MAX_PROCS);
	unsigned seconds = env_uint("SHMCFG_SOAK_SECONDS", 5, 24 * 3600);
	unsigned seed = env_uint("SHMCFG_SOAK_SEED", (unsigned)time(NULL) ^ (unsigned)getpid() << 8, UINT32_MAX);
	printf("# soak: %u processes, %u s, seed %u (SHMCFG_SOAK_SEED to repeat)\n", procs, seconds, seed);
	fflush(stdout);
	sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(sh != MAP_FAILED);
	memset(sh, 0, sizeof *sh);
	seg = test_name("soak");
	/* Few slots on purpose: idle processes' pins must not block commits
	 * (doc/reliability.md, E2). SHMCFG_SOAK_SLOTS sets it. */
	unsigned slots = env_uint("SHMCFG_SOAK_SLOTS", 4, 255);
	printf("# soak: %u slots\n", slots);
	shmcfg *h = test_create(seg, &(shmcfg_create_opts){.slots = slots, .readers = 2 * procs + 8});
	shmcfg *ro = NULL;
	assert_int_equal(shmcfg_attach(seg, SHMCFG_ATTACH_RDONLY, NULL, &ro), 0);
	/* the supervisor never takes a read-write snapshot: it forks all along */
	for (unsigned i = 0; i < procs; i++)
		start_worker((int)i, seed + i + 1);
	uint64_t kills = 0, kills_mid_commit = 0, stalls = 0, restarts = 0, checks = 0;
	uint64_t start = mono_us(), end = start + (uint64_t)seconds * 1000000;
	unsigned srand_state = seed;
	while (mono_us() < end && sh->violations == 0) {
		usleep(20000 + (unsigned)rand_r(&srand_state) % 80000);
		int slot = rand_r(&srand_state) % (int)procs;
		pid_t pid = sh->w[slot].pid;
		/* a worker that ended by itself has failed */
		int st;
		for (unsigned i = 0; i < procs; i++) {
			pid_t p = waitpid(sh->w[i].pid, &st, WNOHANG);
			if (p == sh->w[i].pid)
				fail_msg("worker %d ended by itself (status %#x): %s", (int)p, st,
					 sh->first_violation);
		}
		if (rand_r(&srand_state) % 4 == 0) {
			/* a stall: stopped for up to 300 ms, then continued */
			kill(pid, SIGSTOP);
			usleep(1000 + (unsigned)rand_r(&srand_state) % 300000);
			kill(pid, SIGCONT);
			stalls++;
		} else {
			kill(pid, SIGKILL);
			pid_t p;
			while ((p = waitpid(pid, &st, 0)) < 0 && errno == EINTR)
				;
			assert_int_equal(p, pid);
			if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL)
				fail_msg("worker %d ended with status %#x before its kill: %s", (int)pid, st,
					 sh->first_violation);
			kills++;
			kills_mid_commit += sh->w[slot].in_commit != 0;
			start_worker(slot, (unsigned)rand_r(&srand_state));
			restarts++;
		}
		/* the supervisor's own look, through its read-only handle */
		shmcfg_snapshot *s;
		assert_int_equal(shmcfg_snapshot_acquire(ro, &s), 0);
		shmcfg_value a, b;
		assert_int_equal(shmcfg_snapshot_get(s, T_A, &a), 0);
		assert_int_equal(shmcfg_snapshot_get(s, T_B, &b), 0);
		assert_int_equal(b.u.i, -a.u.i);
		shmcfg_snapshot_release(s);
		checks++;
	}
	sh->stop = 1;
	for (unsigned i = 0; i < procs; i++) {
		pid_t pid = sh->w[i].pid;
		kill(pid, SIGCONT);
		int st = 0;
		uint64_t deadline = mono_us() + 20000000;
		pid_t p;
		while ((p = waitpid(pid, &st, WNOHANG)) == 0 && mono_us() < deadline)
			usleep(1000);
		if (p != pid) {
			kill(pid, SIGKILL);
			(void)waitpid(pid, &st, 0);
			fail_msg("worker %d did not stop within 20 s (hung?)", (int)pid);
		}
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			fail_msg("worker %d ended with status %#x: %s", (int)pid, st, sh->first_violation);
	}
	if (sh->violations)
		fail_msg("%" PRIu64 " invariant violations; the first: %s", sh->violations,
			 sh->first_violation);

	/* the end state */
	struct table t = {0};
	(void)shmcfg_readers(h, tally, &t);
	int reaped = shmcfg_gc(h, NULL, NULL);
	assert_true(reaped >= 0);
	struct table after = {0};
	(void)shmcfg_readers(h, tally, &after);
	assert_int_equal(after.dead, 0);
	/* at most the supervisor's own entry is left (entries are claimed by
	 * snapshots), and it is alive */
	assert_true(after.used <= 1);
	assert_int_equal(after.alive, after.used);
	assert_int_equal(shmcfg_check(h, true, NULL, NULL), 0);
	uint64_t gen = shmcfg_generation(h);
	uint64_t counted = sh->commits_ok;
	printf("# soak: generation %" PRIu64 ", commits counted %" PRIu64 ", kills mid-commit %" PRIu64 "\n",
	       gen, counted, kills_mid_commit);
	if (gen - 1 < counted || gen - 1 > counted + kills_mid_commit)
		fail_msg("generation %" PRIu64 " after %" PRIu64 " counted commits and %" PRIu64
			 " workers killed mid-commit",
			 gen, counted, kills_mid_commit);
	shmcfg_snapshot *s;
	assert_int_equal(shmcfg_snapshot_acquire(ro, &s), 0);
	assert_int_equal(shmcfg_snapshot_generation(s), gen);
	shmcfg_value a, b, c;
	assert_int_equal(shmcfg_snapshot_get(s, T_A, &a), 0);
	assert_int_equal(shmcfg_snapshot_get(s, T_B, &b), 0);
	assert_int_equal(shmcfg_snapshot_get(s, T_C, &c), 0);
	assert_int_equal(b.u.i, -a.u.i);
	char want[32];
	snprintf(want, sizeof want, "%" PRId64, a.u.i);
	assert_int_equal(c.u.str.len, strlen(want));
	assert_memory_equal(c.u.str.ptr, want, c.u.str.len);
	shmcfg_snapshot_release(s);
	shmcfg_commit ci;
	assert_int_equal(shmcfg_commit_info(ro, gen, &ci), 0);
	/* a commit still works */
	shmcfg_set_commit_timeout(h, 2000);
	assert_int_equal(set_and_commit(h, T_A, "1", NULL), 0);

	uint64_t total = 0;
	for (int i = 0; i < OP_COUNT; i++)
		total += sh->ops[i];
	printf("# soak: %" PRIu64 " operations in %.1f s by %u processes (%" PRIu64 " started):",
	       total, (double)(mono_us() - start) / 1e6, procs, procs + restarts);
	for (int i = 0; i < OP_COUNT; i++)
		printf("%s %" PRIu64 " %s", i ? "," : "", sh->ops[i], op_names[i]);
	printf("\n# soak: mean/longest time per operation (ms):");
	for (int i = 0; i < OP_COUNT; i++)
		printf("%s %s %.3f/%.1f", i ? "," : "", op_names[i],
		       sh->ops[i] ? (double)sh->op_us[i] / (double)sh->ops[i] / 1000.0 : 0.0,
		       (double)sh->op_max_us[i] / 1000.0);
	printf("\n# soak: %" PRIu64 " commits published and counted, %" PRIu64 " busy, %" PRIu64
	       " locked; %" PRIu64 " kills (%" PRIu64 " mid-commit), %" PRIu64 " stalls, %" PRIu64
	       " supervisor checks; reader entries at the end: %d used, %d dead before gc, %d reaped\n",
	       counted, sh->commits_busy, sh->commits_locked, kills, kills_mid_commit, stalls, checks,
	       t.used, t.dead, reaped);
	fflush(stdout);
	shmcfg_close(ro);
	shmcfg_close(h);
	(void)shmcfg_unlink(seg);
	for (unsigned i = 0; i < procs; i++)
		sh->w[i].pid = 0;
}

/* After a failed assertion: no worker outlives the test. */
static int teardown(void **state)
{
	(void)state;
	if (!sh || sh == MAP_FAILED)
		return 0;
	sh->stop = 1;
	for (int i = 0; i < MAX_PROCS; i++)
		if (sh->w[i].pid > 0 && kill(sh->w[i].pid, SIGKILL) == 0)
			(void)waitpid(sh->w[i].pid, NULL, 0);
	if (seg)
		(void)shmcfg_unlink(seg);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_soak, teardown),
	};
	return cmocka_run_group_tests_name("test_soak", tests, NULL, NULL);
}
