/*
 * shmcfg benchmark: `make bench` runs it and prints one table, measured in
 * one run on one machine; `make bench-callgrind` (tests/bench/bench
 * --callgrind) counts instructions per read of the hot paths under callgrind.
 * doc/benchmarks.md records a run and explains every figure.
 *
 * Sections:
 *  1. hot read cost: ns per read (median of R interleaved rounds, spread)
 *     and the ratio to a plain load of a global timed around each loop;
 *  2. scaling: reads/s with 1 and 2 threads; 2 reader processes with and
 *     without a third that commits every millisecond;
 *  3. commits of 1, 10 and 100 changed options; visibility latency of a
 *     commit to a polling reader and to a blocked waiter in other processes;
 *  4. growth with 10, 1,000 and 100,000 options: lookup by name, commit,
 *     attach, segment bytes per option;
 *  5. the targets, met or missed.
 *
 * Method: every read loop is a noinline function that runs n reads, each
 * preceded by a compiler barrier (asm volatile with a "memory" clobber), so
 * every read loads everything it needs again, the plain load included (it is
 * not hoisted: see doc/benchmarks.md for the disassembly). Timing is
 * CLOCK_MONOTONIC around the whole loop. Rounds interleave the candidates,
 * and each candidate's ratio to the plain load is paired: taken against
 * plain loads timed right before and after it, so that a noisy neighbour
 * slows both sides of a ratio alike (run_hot()).
 *
 * --callgrind runs the read loops (and a lookup and commits) under
 * valgrind --tool=callgrind and prints instructions per read, a figure that
 * a noisy machine does not move.
 *
 * A benchmark, not a test: it prints, and asserts nothing about timing. It
 * exits non-zero only if something fails to work (a read returns the wrong
 * value, a segment cannot be created).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <lmdb.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define HAVE_CALLGRIND_H 1
#endif
#endif

#include "shmcfg.h"

#include "bench.h"
#include "bench_schema.h"

/* liburcu: whether the read sides run with sys_membarrier (a compiler
 * barrier) or with full fences */
extern int urcu_bp_has_sys_membarrier;
extern int urcu_memb_has_sys_membarrier;

/* ------------------------------------------------------------------ */
/* Settings, output, helpers                                          */
/* ------------------------------------------------------------------ */

enum {
	SEC_HOT = 1 << 0,
	SEC_SCALE = 1 << 1,
	SEC_COMMIT = 1 << 2,
	SEC_GROWTH = 1 << 3,
	SEC_ALL = 0xf,
};

static struct {
	int repeats;        /* hot-read rounds */
	double repeat_ms;   /* target time of one loop of one candidate */
	double proc_s;      /* duration of each multi-process phase */
	int vis_commits;    /* commits timed for visibility */
	unsigned sections;
	bool quick;
} opt = {11, 20.0, 0.3, 200, SEC_ALL, false};

static volatile uint64_t sink; /* every loop's result ends here */
static char seg_names[16][64]; /* segments to unlink at exit */
static int nseg_names;
static int failures;           /* broken reads: exit status */

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

__attribute__((noreturn, format(printf, 1, 2))) static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "bench: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(2);
}

#define CHECK(call)                                                                        \
	do {                                                                               \
		int r_ = (call);                                                           \
		if (r_ < 0)                                                                \
			die("%s:%d: %s: %s (%s)", __FILE__, __LINE__, #call, shmcfg_strerror(r_), \
			    shmcfg_errdetail());                                           \
	} while (0)

static void fail(const char *what)
{
	fprintf(stderr, "bench: BROKEN: %s\n", what);
	failures++;
}

/* Format a duration in ns with a unit that keeps 3 significant digits. */
static const char *fmt_time(char *buf, size_t len, double ns)
{
	if (ns < 10)
		snprintf(buf, len, "%.2f ns", ns);
	else if (ns < 1000)
		snprintf(buf, len, "%.1f ns", ns);
	else if (ns < 1e6)
		snprintf(buf, len, "%.2f us", ns / 1e3);
	else if (ns < 1e9)
		snprintf(buf, len, "%.2f ms", ns / 1e6);
	else
		snprintf(buf, len, "%.2f s", ns / 1e9);
	return buf;
}
#define T(ns) fmt_time((char[24]){0}, 24, (ns))

static const char *fmt_rate(char *buf, size_t len, double per_s)
{
	if (per_s >= 1e9)
		snprintf(buf, len, "%.2f G/s", per_s / 1e9);
	else if (per_s >= 1e6)
		snprintf(buf, len, "%.1f M/s", per_s / 1e6);
	else if (per_s >= 1e3)
		snprintf(buf, len, "%.1f k/s", per_s / 1e3);
	else
		snprintf(buf, len, "%.0f /s", per_s);
	return buf;
}
#define RATE(x) fmt_rate((char[24]){0}, 24, (x))

static const char *fmt_bytes(char *buf, size_t len, double b)
{
	if (b >= 1 << 20)
		snprintf(buf, len, "%.1f MiB", b / (1 << 20));
	else if (b >= 1 << 10)
		snprintf(buf, len, "%.1f KiB", b / (1 << 10));
	else
		snprintf(buf, len, "%.0f B", b);
	return buf;
}
#define BYTES(x) fmt_bytes((char[24]){0}, 24, (x))

static const char *fmt_spread(char *buf, size_t len, double lo, double hi)
{
	snprintf(buf, len, "%.0f..%.0f", lo, hi);
	return buf;
}
#define SPREAD(lo, hi) fmt_spread((char[32]){0}, 32, (lo), (hi))

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Order statistics of a sample (sorted in place). */
struct stats {
	double med, min, max, q1, q3, p90, p99;
	int n;
};

static double quantile(const double *sorted, int n, double q)
{
	if (n <= 0)
		return NAN;
	double pos = q * (n - 1);
	int i = (int)pos;
	if (i >= n - 1)
		return sorted[n - 1];
	return sorted[i] + (pos - i) * (sorted[i + 1] - sorted[i]);
}

static struct stats stats_of(double *v, int n)
{
	struct stats s = {NAN, NAN, NAN, NAN, NAN, NAN, NAN, n};
	if (n <= 0)
		return s;
	qsort(v, (size_t)n, sizeof *v, cmp_double);
	s.med = quantile(v, n, 0.5);
	s.min = v[0];
	s.max = v[n - 1];
	s.q1 = quantile(v, n, 0.25);
	s.q3 = quantile(v, n, 0.75);
	s.p90 = quantile(v, n, 0.90);
	s.p99 = quantile(v, n, 0.99);
	return s;
}

static void seg_name(char *buf, size_t len, const char *what)
{
	snprintf(buf, len, "bench-%s-%ld", what, (long)getpid());
	if (nseg_names < (int)(sizeof seg_names / sizeof seg_names[0]))
		snprintf(seg_names[nseg_names++], sizeof seg_names[0], "%s", buf);
}

static pid_t main_pid;

static void unlink_segments(void)
{
	if (getpid() != main_pid)
		return;
	for (int i = 0; i < nseg_names; i++)
		(void)shmcfg_unlink(seg_names[i]);
	nseg_names = 0;
}

static void on_signal(int sig)
{
	(void)sig;
	exit(3); /* runs unlink_segments() */
}

/* A shared anonymous mapping that children of fork() write into. */
static void *shared_alloc(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		die("mmap: %s", strerror(errno));
	memset(p, 0, len);
	return p;
}

static void wait_child(pid_t pid)
{
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fail("a child process of the benchmark failed");
}

static void sleep_ns(double ns)
{
	struct timespec ts = {(time_t)(ns / 1e9), (long)fmod(ns, 1e9)};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* ------------------------------------------------------------------ */
/* The things read                                                    */
/* ------------------------------------------------------------------ */

#define VALUE 42 /* what every hot read reads */

/* the limit: a plain global. Not static, and written at run time: a
 * constant the compiler could see would be folded out of the loop. */
int64_t g_plain;
static shmcfg *g_h;               /* the hot-read segment */
static shmcfg_opt g_opt_x, g_opt_enabled, g_opt_ratio; /* handles from shmcfg_lookup() */
static char g_hot_name[64];

/* The competitors' shared memory: a process-shared rwlock and a seqlock. */
struct shm_area {
	_Alignas(64) uint64_t seq;
	int64_t seq_value;
	_Alignas(64) pthread_rwlock_t rw;
	_Alignas(64) int64_t rw_value;
};
static struct shm_area *g_area;

static MDB_env *g_env;
static MDB_dbi g_dbi;
static char g_lmdb_dir[64];
static int g_environ_count;

static inline int64_t seq_read(const struct shm_area *a)
{
	for (;;) {
		uint64_t s1 = __atomic_load_n(&a->seq, __ATOMIC_ACQUIRE);
		int64_t v = __atomic_load_n(&a->seq_value, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		uint64_t s2 = __atomic_load_n(&a->seq, __ATOMIC_RELAXED);
		if (__builtin_expect(s1 == s2 && !(s1 & 1), 1))
			return v;
	}
}

/* ------------------------------------------------------------------ */
/* Read loops: n reads, a compiler barrier before each                */
/* ------------------------------------------------------------------ */

#define LOOP(fn, ...)                                                    \
	static __attribute__((noinline)) uint64_t fn(long n)             \
	{                                                                \
		uint64_t acc = 0;                                        \
		for (long i = 0; i < n; i++) {                           \
			BENCH_BARRIER();                                 \
			__VA_ARGS__;                                     \
		}                                                        \
		return acc;                                              \
	}

LOOP(loop_plain, acc += (uint64_t)g_plain)
LOOP(loop_plainlib, acc += (uint64_t)plain_get())
LOOP(loop_shm_int, {
	int64_t v;
	if (shmcfg_get_int(g_h, g_opt_x, &v) == 0)
		acc += (uint64_t)v;
})
LOOP(loop_shm_accessor, acc += (uint64_t)bench_x(g_h))
LOOP(loop_shm_bool, {
	bool v;
	if (shmcfg_get_bool(g_h, g_opt_enabled, &v) == 0)
		acc += v;
})
LOOP(loop_shm_float, {
	double v;
	if (shmcfg_get_float(g_h, g_opt_ratio, &v) == 0) {
		uint64_t b;
		memcpy(&b, &v, 8);
		acc += b;
	}
})
LOOP(loop_shm_generation, acc += shmcfg_generation(g_h))
LOOP(loop_shm_slow, {
	uint64_t b;
	if (shmcfg__get_slow(g_h, g_opt_x, SHMCFG_INT, &b) == 0)
		acc += b;
})
LOOP(loop_shm_get, {
	shmcfg_value v;
	if (shmcfg_get(g_h, g_opt_x, &v) == 0)
		acc += (uint64_t)v.u.i;
})
LOOP(loop_shm_byname, {
	shmcfg_opt o;
	int64_t v;
	if (shmcfg_lookup(g_h, "bench.x", &o) == 0 && shmcfg_get_int(g_h, o, &v) == 0)
		acc += (uint64_t)v;
})
LOOP(loop_shm_snapshot, {
	shmcfg_snapshot *s;
	if (shmcfg_snapshot_acquire(g_h, &s) == 0) {
		shmcfg_value v;
		if (shmcfg_snapshot_get(s, g_opt_x, &v) == 0)
			acc += (uint64_t)v.u.i;
		shmcfg_snapshot_release(s);
	}
})
LOOP(loop_shm_hash, {
	uint8_t out[16];
	acc += shmcfg_config_hash(g_h, out) != 0;
})
LOOP(loop_seqlock, acc += (uint64_t)seq_read(g_area))
LOOP(loop_rwlock, {
	pthread_rwlock_rdlock(&g_area->rw);
	acc += (uint64_t)g_area->rw_value;
	pthread_rwlock_unlock(&g_area->rw);
})
LOOP(loop_getenv, {
	const char *s = getenv("SHMCFG_BENCH_VALUE");
	acc += s ? (uint64_t)strtol(s, NULL, 10) : 0;
})
LOOP(loop_rcu_bp_so, acc += (uint64_t)bench_rcu_bp_get_so())
LOOP(loop_rcu_memb_so, acc += (uint64_t)bench_rcu_memb_get_so())
LOOP(loop_rcu_mb_so, acc += (uint64_t)bench_rcu_mb_get_so())

/*
 * Experiments (not library API): the validated read of shmcfg.h on the same
 * segment and layout, with fewer per-read checks, to show what each costs.
 *  lean_a: no handle-range, type or null check per read: a generated
 *          accessor whose handle and type were proven once, at attach, by the
 *          schema hash, does not need them. Keeps the patch flag and the
 *          slot-index bound.
 *  lean_c: lean_a without the thread-local patch flag and with the cell
 *          offset a constant: the bare seqlock over this slot layout.
 */
static uint32_t g_cells_off_const; /* v->cells_off, checked to be 64 */

static inline int lean_a(const shmcfg *h, shmcfg_opt o, uint64_t *bits)
{
	const struct shmcfg_view *v = (const struct shmcfg_view *)h;
	if (__builtin_expect(shmcfg__tls_patched != 0, 0))
		return shmcfg__get_slow(h, o, SHMCFG_INT, bits);
	for (int spin = 0; spin < SHMCFG__SPIN; spin++) {
		uint64_t cur = __atomic_load_n(v->current, __ATOMIC_ACQUIRE);
		uint32_t s = (uint32_t)(cur & 0xff);
		if (__builtin_expect(s >= v->nslots, 0))
			break;
		const char *slot = v->slots + s * v->slot_size;
		const struct shmcfg__cell *c = (const struct shmcfg__cell *)(slot + v->cells_off) + o;
		uint64_t val = __atomic_load_n(&c->val, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n((const uint64_t *)slot, __ATOMIC_RELAXED) == cur >> 8) {
			*bits = val;
			return 0;
		}
	}
	return shmcfg__get_slow(h, o, SHMCFG_INT, bits);
}

static inline uint64_t lean_c(const shmcfg *h, shmcfg_opt o)
{
	const struct shmcfg_view *v = (const struct shmcfg_view *)h;
	for (;;) {
		uint64_t cur = __atomic_load_n(v->current, __ATOMIC_ACQUIRE);
		const char *slot = v->slots + (cur & 0xff) * v->slot_size;
		const struct shmcfg__cell *c = (const struct shmcfg__cell *)(slot + 64) + o;
		uint64_t val = __atomic_load_n(&c->val, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__builtin_expect(__atomic_load_n((const uint64_t *)slot, __ATOMIC_RELAXED) == cur >> 8, 1))
			return val;
	}
}

LOOP(loop_lean_a, {
	uint64_t b;
	acc += lean_a(g_h, BENCH_OPT_X, &b) == 0 ? b : 7;
})
LOOP(loop_lean_c, acc += lean_c(g_h, BENCH_OPT_X))

static inline int64_t lmdb_get(MDB_txn *txn)
{
	MDB_val k = {1, (void *)"x"}, d;
	int64_t v = 0;
	if (mdb_get(txn, g_dbi, &k, &d) == 0 && d.mv_size == sizeof v)
		memcpy(&v, d.mv_data, sizeof v);
	return v;
}

/* LMDB: one get in a read transaction that stays open (begun and ended
 * outside the loop, so each thread has its own). */
static __attribute__((noinline)) uint64_t loop_lmdb_get(long n)
{
	MDB_txn *txn;
	if (mdb_txn_begin(g_env, NULL, MDB_RDONLY, &txn))
		return 0;
	uint64_t acc = 0;
	for (long i = 0; i < n; i++) {
		BENCH_BARRIER();
		acc += (uint64_t)lmdb_get(txn);
	}
	mdb_txn_abort(txn);
	return acc;
}

/* LMDB: renew + get + reset, the cheap way to take a fresh read txn. */
static __attribute__((noinline)) uint64_t loop_lmdb_renew(long n)
{
	MDB_txn *txn;
	if (mdb_txn_begin(g_env, NULL, MDB_RDONLY, &txn))
		return 0;
	mdb_txn_reset(txn);
	uint64_t acc = 0;
	for (long i = 0; i < n; i++) {
		BENCH_BARRIER();
		if (mdb_txn_renew(txn) == 0) {
			acc += (uint64_t)lmdb_get(txn);
			mdb_txn_reset(txn);
		}
	}
	mdb_txn_abort(txn);
	return acc;
}

/* LMDB: begin + get + abort. */
LOOP(loop_lmdb_txn, {
	MDB_txn *txn;
	if (mdb_txn_begin(g_env, NULL, MDB_RDONLY, &txn) == 0) {
		acc += (uint64_t)lmdb_get(txn);
		mdb_txn_abort(txn);
	}
})

/* ------------------------------------------------------------------ */
/* Setup of the hot-read subjects                                     */
/* ------------------------------------------------------------------ */

static void setup_hot_segment(void)
{
	shmcfg_schema *s;
	CHECK(shmcfg_schema_new(&s));
	for (int i = 0; i < BENCH_NOPTS; i++)
		CHECK(shmcfg_schema_add(s, &bench_schema_defs[i]));
	seg_name(g_hot_name, sizeof g_hot_name, "hot");
	shmcfg_create_opts co = {.flags = SHMCFG_CREATE_FORCE | SHMCFG_CREATE_NO_ENV};
	CHECK(shmcfg_create(g_hot_name, s, &co, &g_h));
	shmcfg_schema_free(s);
	CHECK(bench_schema_check(g_h));
	CHECK(shmcfg_lookup(g_h, "bench.x", &g_opt_x));
	CHECK(shmcfg_lookup(g_h, "bench.enabled", &g_opt_enabled));
	CHECK(shmcfg_lookup(g_h, "bench.ratio", &g_opt_ratio));
	shmcfg_txn *t;
	CHECK(shmcfg_txn_begin(g_h, &t));
	CHECK(shmcfg_txn_set_int(t, g_opt_x, VALUE));
	CHECK(shmcfg_txn_set_bool(t, g_opt_enabled, true));
	CHECK(shmcfg_txn_set_float(t, g_opt_ratio, 0.5));
	CHECK(shmcfg_txn_commit(t, NULL));
}

static void setup_competitors(void)
{
	/* rwlock and seqlock in a POSIX shared-memory object, as users would */
	char name[64];
	snprintf(name, sizeof name, "/shmcfg-bench-area-%ld", (long)getpid());
	int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd < 0)
		die("shm_open %s: %s", name, strerror(errno));
	shm_unlink(name);
	if (ftruncate(fd, sizeof(struct shm_area)))
		die("ftruncate: %s", strerror(errno));
	g_area = mmap(NULL, sizeof(struct shm_area), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (g_area == MAP_FAILED)
		die("mmap: %s", strerror(errno));
	close(fd);
	g_area->seq = 2;
	g_area->seq_value = VALUE;
	pthread_rwlockattr_t ra;
	pthread_rwlockattr_init(&ra);
	pthread_rwlockattr_setpshared(&ra, PTHREAD_PROCESS_SHARED);
	if (pthread_rwlock_init(&g_area->rw, &ra))
		die("pthread_rwlock_init failed");
	pthread_rwlockattr_destroy(&ra);
	g_area->rw_value = VALUE;

	/* getenv: the variable is appended after the inherited environment */
	if (setenv("SHMCFG_BENCH_VALUE", "42", 1))
		die("setenv: %s", strerror(errno));
	extern char **environ;
	for (char **e = environ; *e; e++)
		g_environ_count++;

	/* LMDB: one key in a fresh environment */
	snprintf(g_lmdb_dir, sizeof g_lmdb_dir, "/tmp/shmcfg-bench-lmdb-XXXXXX");
	if (!mkdtemp(g_lmdb_dir))
		die("mkdtemp: %s", strerror(errno));
	MDB_txn *txn;
	int64_t v = VALUE;
	MDB_val k = {1, (void *)"x"}, d = {sizeof v, &v};
	if (mdb_env_create(&g_env) || mdb_env_set_mapsize(g_env, 1 << 20) ||
	    mdb_env_open(g_env, g_lmdb_dir, MDB_NOSYNC, 0600) || mdb_txn_begin(g_env, NULL, 0, &txn) ||
	    mdb_dbi_open(txn, NULL, 0, &g_dbi) || mdb_put(txn, g_dbi, &k, &d, 0) || mdb_txn_commit(txn))
		die("LMDB setup failed in %s", g_lmdb_dir);

	/* liburcu: publish the pointers, register this thread (memb, mb) */
	bench_rcu_bp_setup();
	bench_rcu_bpcall_setup();
	bench_rcu_memb_setup();
	bench_rcu_mb_setup();
	bench_rcu_bp_setup_so();
	bench_rcu_memb_setup_so();
	bench_rcu_mb_setup_so();
}

static void teardown_competitors(void)
{
	if (g_env) {
		mdb_env_close(g_env);
		g_env = NULL;
		char p[128];
		snprintf(p, sizeof p, "%s/data.mdb", g_lmdb_dir);
		unlink(p);
		snprintf(p, sizeof p, "%s/lock.mdb", g_lmdb_dir);
		unlink(p);
		rmdir(g_lmdb_dir);
	}
}

/* ------------------------------------------------------------------ */
/* 1. Hot reads                                                       */
/* ------------------------------------------------------------------ */

struct cand {
	const char *key;   /* short id (callgrind, scaling) */
	const char *label;
	uint64_t (*loop)(long n);
	uint64_t expect;   /* value per read, 0: do not check */
	const char *group; /* a heading printed before the first of a group */
	long n;            /* reads per timed loop */
	double *samples;   /* ns per read, one per round */
	double *ratios;    /* per round: ns per read / the bracketing plain loads' */
	struct stats st, rt;
	double ir;         /* callgrind instructions per read */
};

static uint64_t float_bits_half(void)
{
	double h = 0.5;
	uint64_t b;
	memcpy(&b, &h, 8);
	return b;
}

#define C(k, l, f, e, g) {.key = (k), .label = (l), .loop = (f), .expect = (e), .group = (g)}
static struct cand cands[] = {
	C("plain", "plain load of a global (the limit)", loop_plain, VALUE, "limits"),
	C("plainlib", "exported getter in a -fPIC .so (non-inline floor)", loop_plainlib, VALUE, NULL),
	C("inline", "shmcfg_get_int inline, handle from lookup", loop_shm_int, VALUE, "shmcfg"),
	C("accessor", "generated accessor, compile-time handle", loop_shm_accessor, VALUE, NULL),
	C("inline_bool", "shmcfg_get_bool inline", loop_shm_bool, 1, NULL),
	C("inline_float", "shmcfg_get_float inline", loop_shm_float, 0 /* set at run time */, NULL),
	C("generation", "shmcfg_generation inline", loop_shm_generation, 0, NULL),
	C("get_slow", "shmcfg__get_slow (exported slow path)", loop_shm_slow, VALUE, NULL),
	C("get", "shmcfg_get (exported, copies a value)", loop_shm_get, VALUE, NULL),
	C("byname", "by name: shmcfg_lookup + shmcfg_get_int", loop_shm_byname, VALUE, NULL),
	C("snapshot", "snapshot acquire + get + release", loop_shm_snapshot, VALUE, NULL),
	C("hash", "config hash: shmcfg_config_hash", loop_shm_hash, 1, NULL),
	C("lean_a", "accessor without per-read range/type/null checks", loop_lean_a, VALUE,
	  "experiments on the same segment (not API): what the checks cost"),
	C("lean_c", "... and without the patch flag: bare slot seqlock", loop_lean_c, VALUE, NULL),
	C("seqlock", "seqlock in shared memory", loop_seqlock, VALUE, "what users would otherwise pick"),
	C("rwlock", "pthread_rwlock (process-shared) in shm", loop_rwlock, VALUE, NULL),
	C("getenv", "getenv + strtol", loop_getenv, VALUE, NULL),
	C("lmdb_get", "LMDB mdb_get in an open read txn", loop_lmdb_get, VALUE, NULL),
	C("lmdb_renew", "LMDB txn_renew + get + txn_reset", loop_lmdb_renew, VALUE, NULL),
	C("lmdb_txn", "LMDB txn_begin + get + txn_abort", loop_lmdb_txn, VALUE, NULL),
	C("rcu_bp", "urcu-bp, inline in the executable", bench_rcu_bp_loop, VALUE,
	  "liburcu read side + pointer load, by flavour"),
	C("rcu_bp_call", "urcu-bp, liburcu-bp calls (as libshmcfg)", bench_rcu_bpcall_loop, VALUE, NULL),
	C("rcu_bp_so", "urcu-bp, inline in an exported .so getter", loop_rcu_bp_so, VALUE, NULL),
	C("rcu_memb", "urcu-memb, inline in the executable", bench_rcu_memb_loop, VALUE, NULL),
	C("rcu_memb_so", "urcu-memb, inline in an exported .so getter", loop_rcu_memb_so, VALUE, NULL),
	C("rcu_mb", "urcu-mb, inline in the executable", bench_rcu_mb_loop, VALUE, NULL),
	C("rcu_mb_so", "urcu-mb, inline in an exported .so getter", loop_rcu_mb_so, VALUE, NULL),
};
#define NCANDS ((int)(sizeof cands / sizeof cands[0]))

static struct cand *cand(const char *key)
{
	for (int i = 0; i < NCANDS; i++)
		if (!strcmp(cands[i].key, key))
			return &cands[i];
	die("no candidate %s", key);
}

static double time_loop(struct cand *c, long n)
{
	double t0 = now_ns();
	uint64_t acc = c->loop(n);
	double t = now_ns() - t0;
	sink += acc;
	if (c->expect && acc != c->expect * (uint64_t)n) {
		char buf[160];
		snprintf(buf, sizeof buf, "%s: %ld reads summed to %" PRIu64 ", expected %" PRIu64, c->key,
			 n, acc, c->expect * (uint64_t)n);
		fail(buf);
		c->expect = 0; /* report once */
	}
	return t;
}

/* n such that one loop takes about ms milliseconds */
static long calibrate(struct cand *c, double ms)
{
	long n = 256;
	double t;
	for (;;) {
		t = time_loop(c, n);
		if (t > 2e6 || n > (1L << 40))
			break;
		n *= 4;
	}
	/* one preempted loop must not set the size: the best of three */
	for (int k = 0; k < 2; k++)
		t = fmin(t, time_loop(c, n));
	double want = (double)n * ms * 1e6 / t;
	long r = want < 64 ? 64 : (long)want;
	/* round to 1, 2 or 5 times a power of ten */
	long p = 1;
	while (p * 10 <= r)
		p *= 10;
	return r >= 5 * p ? 5 * p : r >= 2 * p ? 2 * p : p;
}

static void hot_setup_all(void)
{
	g_plain = VALUE;
	plain_set(VALUE);
	setup_hot_segment();
	setup_competitors();
	cand("inline_float")->expect = float_bits_half();
	g_cells_off_const = ((const struct shmcfg_view *)g_h)->cells_off;
	if (g_cells_off_const != 64)
		die("the lean_c experiment assumes cells at offset 64 of a slot, not %u", g_cells_off_const);
	cand("generation")->expect = shmcfg_generation(g_h);
}

/*
 * Each round runs every candidate once, in order, each between two short
 * loops of the plain load; the candidate's ratio in that round is its time
 * per read over the mean of the two bracketing plain loads. On a shared
 * machine whose speed changes from one 10 ms to the next (another busy
 * guest on the sibling hyperthread, frequency) a paired ratio keeps what a
 * ratio of medians loses: the noise is common to both sides of the pair.
 */
static void run_hot(void)
{
	printf("\n1. Hot read cost: ns per read, median of %d interleaved rounds, min..max and IQR\n"
	       "   (as %% of the median) over the rounds. \"x plain\": median over the rounds of\n"
	       "   the ratio to the plain load timed just before and after, and its min..max.\n",
	       opt.repeats);
	struct cand *pl = cand("plain");
	for (int i = 0; i < NCANDS; i++) {
		cands[i].loop(1000); /* warm up: first-use registrations, page faults */
		cands[i].n = calibrate(&cands[i], opt.repeat_ms);
		cands[i].samples = calloc((size_t)opt.repeats, sizeof(double));
		cands[i].ratios = calloc((size_t)opt.repeats, sizeof(double));
	}
	long npl = pl->n / 4; /* the brackets: a quarter of a candidate's loop */
	for (int r = 0; r < opt.repeats; r++) {
		double prev = time_loop(pl, npl) / (double)npl;
		for (int i = 0; i < NCANDS; i++) {
			struct cand *c = &cands[i];
			double t = time_loop(c, c->n) / (double)c->n;
			double next = time_loop(pl, npl) / (double)npl;
			c->samples[r] = t;
			c->ratios[r] = t / ((prev + next) / 2);
			prev = next;
		}
	}
	for (int i = 0; i < NCANDS; i++) {
		cands[i].st = stats_of(cands[i].samples, opt.repeats);
		cands[i].rt = stats_of(cands[i].ratios, opt.repeats);
	}
	printf("\n   %-51s %8s %13s %5s %8s %13s %10s\n", "read", "ns/read", "min..max", "IQR", "x plain",
	       "min..max", "reads/loop");
	for (int i = 0; i < NCANDS; i++) {
		struct cand *c = &cands[i];
		if (c->group)
			printf("   -- %s\n", c->group);
		char sp[48], rsp[48];
		snprintf(sp, sizeof sp, "%.2f..%.2f", c->st.min, c->st.max);
		snprintf(rsp, sizeof rsp, "%.1f..%.1f", c->rt.min, c->rt.max);
		printf("   %-51s %8.2f %13s %4.0f%% %7.1fx %13s %10ld\n", c->label, c->st.med, sp,
		       100 * (c->st.q3 - c->st.q1) / c->st.med, c->rt.med, rsp, c->n);
	}
	printf("   urcu read sides: sys_membarrier %s (bp), %s (memb); getenv: %d variables in the\n"
	       "   environment, the one read last\n",
	       urcu_bp_has_sys_membarrier ? "on" : "off", urcu_memb_has_sys_membarrier ? "on" : "off",
	       g_environ_count);
}

/* ------------------------------------------------------------------ */
/* 2. Scaling                                                         */
/* ------------------------------------------------------------------ */

struct thr {
	uint64_t (*fn)(long);
	long n;
	pthread_barrier_t *bar;
	double t0, t1;
	uint64_t acc;
};

static void *thr_main(void *arg)
{
	struct thr *t = arg;
	pthread_barrier_wait(t->bar);
	t->t0 = now_ns();
	t->acc = t->fn(t->n);
	t->t1 = now_ns();
	return NULL;
}

/* reads/s of k threads running fn(n) each, from the first start to the last end */
static double threads_rate(uint64_t (*fn)(long), int k, long n)
{
	pthread_t tid[2];
	struct thr t[2];
	pthread_barrier_t bar;
	pthread_barrier_init(&bar, NULL, (unsigned)k);
	for (int i = 0; i < k; i++) {
		t[i] = (struct thr){fn, n, &bar, 0, 0, 0};
		if (pthread_create(&tid[i], NULL, thr_main, &t[i]))
			die("pthread_create failed");
	}
	double t0 = INFINITY, t1 = 0;
	for (int i = 0; i < k; i++) {
		pthread_join(tid[i], NULL);
		t0 = fmin(t0, t[i].t0);
		t1 = fmax(t1, t[i].t1);
		sink += t[i].acc;
	}
	pthread_barrier_destroy(&bar);
	return (double)k * (double)n / ((t1 - t0) / 1e9);
}

static const char *scale_keys[] = {"plain", "plainlib", "inline", "accessor", "snapshot", "seqlock",
				   "rwlock", "lmdb_get"};
#define NSCALE ((int)(sizeof scale_keys / sizeof scale_keys[0]))
static double scale_ratio[NSCALE]; /* 2-thread rate / 1-thread rate, medians */
static double scale_rel[NSCALE];   /* that ratio / the plain load's, medians */
static double scale_rate[NSCALE][2];

/* Process scaling results, filled by the children. */
struct proc_res {
	double rate[2];   /* reads/s of each reader */
	double cpu_rate[2]; /* reads per second of the reader's own CPU time */
	uint64_t acc[2], n[2];
	long commits;     /* by the writer */
	double commit_ns; /* its total commit time */
	double commit_max;
	_Atomic int go, stop, ready;
};
static struct proc_res *g_pres;

/* A reader process: attach, then read for opt.proc_s seconds. */
static void reader_child(int idx, uint64_t (*fn)(long), bool attach)
{
	if (attach) {
		shmcfg *h;
		if (shmcfg_attach(g_hot_name, 0, NULL, &h))
			_exit(1);
		g_h = h;
	}
	atomic_fetch_add(&g_pres->ready, 1);
	while (!atomic_load(&g_pres->go))
		usleep(100);
	const long chunk = 1 << 15;
	uint64_t acc = 0, n = 0;
	struct timespec c0, c1;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
	double t0 = now_ns(), t;
	do {
		acc += fn(chunk);
		n += chunk;
		t = now_ns();
	} while (t - t0 < opt.proc_s * 1e9);
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
	double cpu = (double)(c1.tv_sec - c0.tv_sec) * 1e9 + (double)(c1.tv_nsec - c0.tv_nsec);
	g_pres->rate[idx] = (double)n / ((t - t0) / 1e9);
	g_pres->cpu_rate[idx] = (double)n / (cpu / 1e9);
	g_pres->acc[idx] = acc;
	g_pres->n[idx] = n;
	_exit(0);
}

/* The writer process: one commit every millisecond, bench.x 42 <-> 43. */
static void writer_child(void)
{
	shmcfg *h;
	if (shmcfg_attach(g_hot_name, 0, NULL, &h))
		_exit(1);
	atomic_fetch_add(&g_pres->ready, 1);
	while (!atomic_load(&g_pres->go))
		usleep(100);
	struct timespec next;
	clock_gettime(CLOCK_MONOTONIC, &next);
	for (long i = 0; !atomic_load(&g_pres->stop); i++) {
		next.tv_nsec += 1000000;
		if (next.tv_nsec >= 1000000000) {
			next.tv_nsec -= 1000000000;
			next.tv_sec++;
		}
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR)
			;
		double t0 = now_ns();
		shmcfg_txn *t;
		if (shmcfg_txn_begin(h, &t) || shmcfg_txn_set_int(t, BENCH_OPT_X, VALUE + (i & 1 ? 0 : 1)) ||
		    shmcfg_txn_commit(t, NULL) < 0)
			_exit(1);
		double d = now_ns() - t0;
		g_pres->commits++;
		g_pres->commit_ns += d;
		g_pres->commit_max = fmax(g_pres->commit_max, d);
	}
	/* leave bench.x as the hot reads expect it */
	shmcfg_txn *t;
	if (shmcfg_txn_begin(h, &t) || shmcfg_txn_set_int(t, BENCH_OPT_X, VALUE) || shmcfg_txn_commit(t, NULL) < 0)
		_exit(1);
	shmcfg_close(h);
	_exit(0);
}

/* One phase: 2 reader processes running fn, with or without the writer. */
static void proc_phase(uint64_t (*fn)(long), bool attach, bool writer, double out[4])
{
	memset(g_pres, 0, sizeof *g_pres);
	pid_t pids[3] = {0, 0, 0};
	int np = 0;
	fflush(stdout);
	for (int i = 0; i < 2; i++) {
		pid_t p = fork();
		if (p < 0)
			die("fork: %s", strerror(errno));
		if (p == 0)
			reader_child(i, fn, attach);
		pids[np++] = p;
	}
	if (writer) {
		pid_t p = fork();
		if (p < 0)
			die("fork: %s", strerror(errno));
		if (p == 0)
			writer_child();
		pids[np++] = p;
	}
	while (atomic_load(&g_pres->ready) < np)
		usleep(200);
	atomic_store(&g_pres->go, 1);
	wait_child(pids[0]);
	wait_child(pids[1]);
	atomic_store(&g_pres->stop, 1);
	if (writer)
		wait_child(pids[2]);
	for (int i = 0; i < 2; i++) {
		/* every read succeeded and saw 42 or 43 */
		if (fn == loop_shm_int && (g_pres->acc[i] < VALUE * g_pres->n[i] ||
					   g_pres->acc[i] > (VALUE + 1) * g_pres->n[i]))
			fail("a reader process read a wrong value while the writer committed");
	}
	out[0] = g_pres->rate[0];
	out[1] = g_pres->rate[1];
	out[2] = g_pres->commits ? g_pres->commit_ns / (double)g_pres->commits : 0;
	out[3] = (g_pres->cpu_rate[0] + g_pres->cpu_rate[1]) / 2;
}

static double proc_rates[4][3], proc_rel[4], proc_cpu[4];
static long proc_commits;
static double proc_commit_max;

static void run_scaling(void)
{
	int reps = opt.quick ? 3 : 11;
	printf("\n2. Scaling\n\n   Threads: reads/s of the whole process with 1 and 2 threads (median of %d),\n"
	       "   each thread running its own read loop of ~%.0f ms; %ld CPUs online\n\n",
	       reps, opt.repeat_ms * 3, sysconf(_SC_NPROCESSORS_ONLN));
	long n[NSCALE];
	double rate[NSCALE][2][32];
	for (int i = 0; i < NSCALE; i++) {
		struct cand *c = cand(scale_keys[i]);
		double ns = c->st.med > 0 ? c->st.med : 10;
		n[i] = (long)(opt.repeat_ms * 3 * 1e6 / ns);
	}
	for (int r = 0; r < reps; r++)
		for (int i = 0; i < NSCALE; i++)
			for (int k = 1; k <= 2; k++)
				rate[i][k - 1][r] = threads_rate(cand(scale_keys[i])->loop, k, n[i]);
	printf("   %-52s %12s %12s %9s %11s\n", "read", "1 thread", "2 threads", "scaling", "vs plain's");
	double plain_ratio[32];
	for (int r = 0; r < reps; r++)
		plain_ratio[r] = rate[0][1][r] / rate[0][0][r];
	for (int i = 0; i < NSCALE; i++) {
		double ratio[32], rel[32];
		for (int r = 0; r < reps; r++) {
			ratio[r] = rate[i][1][r] / rate[i][0][r];
			rel[r] = ratio[r] / plain_ratio[r];
		}
		scale_rate[i][0] = stats_of(rate[i][0], reps).med;
		scale_rate[i][1] = stats_of(rate[i][1], reps).med;
		scale_ratio[i] = stats_of(ratio, reps).med;
		scale_rel[i] = stats_of(rel, reps).med;
		printf("   %-52s %12s %12s %8.2fx %10.0f%%\n", cand(scale_keys[i])->label, RATE(scale_rate[i][0]),
		       RATE(scale_rate[i][1]), scale_ratio[i], 100 * scale_rel[i]);
	}
	printf("   scaling: median over the rounds of the 2-thread rate over the 1-thread rate\n"
	       "   measured right before it; vs plain's: median over the rounds of that ratio over\n"
	       "   the plain load's ratio in the same round\n");

	g_pres = shared_alloc(sizeof *g_pres);
	int preps = opt.quick ? 1 : 5;
	printf("\n   Processes: 2 reader processes reading for %.1f s; the writer is a third process\n"
	       "   committing bench.x (42 <-> 43) every 1 ms. %d rounds of the 4 phases, medians.\n"
	       "   Wall rates count the time a reader was off CPU (other load, the writer);\n"
	       "   \"per CPU-s\" divides by the reader's own CPU time: the cost of a read while\n"
	       "   it runs. \"vs none\": median over the rounds of the per-CPU-s rate over the same\n"
	       "   round's without the writer.\n\n",
	       opt.proc_s, preps);
	double per[4][2][8], sum[4][8], cpu[4][8], rel[4][8];
	long commits = 0;
	double commit_ns = 0, commit_max = 0;
	for (int r = 0; r < preps; r++)
		for (int ph = 0; ph < 4; ph++) {
			double out[4];
			proc_phase(ph < 2 ? loop_plain : loop_shm_int, ph >= 2, ph & 1, out);
			per[ph][0][r] = out[0];
			per[ph][1][r] = out[1];
			sum[ph][r] = out[0] + out[1];
			cpu[ph][r] = out[3];
			rel[ph][r] = cpu[ph][r] / cpu[ph & ~1][r];
			if (ph & 1) {
				commits += g_pres->commits;
				commit_ns += g_pres->commit_ns;
				commit_max = fmax(commit_max, g_pres->commit_max);
			}
		}
	static const char *what[4] = {"plain load, no writer", "plain load, writer committing",
				      "shmcfg_get_int inline, no writer",
				      "shmcfg_get_int inline, writer committing"};
	printf("   %-44s %11s %11s %11s %11s %8s\n", "reader processes", "reader 1", "reader 2", "both",
	       "per CPU-s", "vs none");
	for (int ph = 0; ph < 4; ph++) {
		proc_rates[ph][0] = stats_of(per[ph][0], preps).med;
		proc_rates[ph][1] = stats_of(per[ph][1], preps).med;
		proc_rates[ph][2] = stats_of(sum[ph], preps).med;
		proc_cpu[ph] = stats_of(cpu[ph], preps).med;
		proc_rel[ph] = stats_of(rel[ph], preps).med;
		printf("   %-44s %11s %11s %11s %11s %7.0f%%\n", what[ph], RATE(proc_rates[ph][0]),
		       RATE(proc_rates[ph][1]), RATE(proc_rates[ph][2]), RATE(proc_cpu[ph]), 100 * proc_rel[ph]);
	}
	proc_commits = commits;
	proc_commit_max = commit_max;
	printf("   writer: %ld commits in %d phases (%.0f/s), mean %s, max %s per commit\n", commits, 2 * preps,
	       (double)commits / (2 * preps * opt.proc_s), T(commits ? commit_ns / (double)commits : 0),
	       T(commit_max));
}

/* ------------------------------------------------------------------ */
/* Schemas of N options (growth, commits)                             */
/* ------------------------------------------------------------------ */

static void opt_name(char *buf, size_t len, uint32_t i)
{
	snprintf(buf, len, "group%03u.option_%06u", i / 1000, i);
}

static shmcfg_schema *schema_of(uint32_t n)
{
	shmcfg_schema *s;
	CHECK(shmcfg_schema_new(&s));
	char name[64], def[24];
	for (uint32_t i = 0; i < n; i++) {
		opt_name(name, sizeof name, i);
		snprintf(def, sizeof def, "%u", i);
		shmcfg_optdef d = {.name = name, .type = SHMCFG_INT, .def = def};
		CHECK(shmcfg_schema_add(s, &d));
	}
	return s;
}

/* One transaction changing options [0, k) to new values; returns its time. */
static double timed_commit(shmcfg *h, uint32_t k, int64_t value)
{
	double t0 = now_ns();
	shmcfg_txn *t;
	CHECK(shmcfg_txn_begin(h, &t));
	for (uint32_t i = 0; i < k; i++)
		CHECK(shmcfg_txn_set_int(t, i, value));
	uint64_t gen;
	int r = shmcfg_txn_commit(t, &gen);
	double d = now_ns() - t0;
	CHECK(r);
	if (r == 1)
		fail("a commit that changes values published nothing");
	return d;
}

/* ------------------------------------------------------------------ */
/* 3. Commits and visibility                                          */
/* ------------------------------------------------------------------ */

static struct stats commit_st[3];
static double commit_rate[3];

struct vis {
	_Atomic int ready, stop;
	uint64_t base;           /* generation before the first timed commit */
	double call[1024], ret[1024], poll[1024], wake[1024];
};
static struct vis *g_vis;

struct vis_result {
	struct stats poll, poll_ret, wake, wake_ret, commit;
	int missed_poll, missed_wake;
};
/* poller alone, waiter alone, both at once */
static struct vis_result vis_res[3];

static void poller_child(void)
{
	shmcfg *h;
	if (shmcfg_attach(g_hot_name, 0, NULL, &h))
		_exit(1);
	uint64_t last = shmcfg_generation(h);
	atomic_fetch_add(&g_vis->ready, 1);
	while (!atomic_load_explicit(&g_vis->stop, memory_order_relaxed)) {
		uint64_t g = shmcfg_generation(h);
		if (g != last) {
			double t = now_ns();
			if (g > g_vis->base && g - g_vis->base < 1024)
				g_vis->poll[g - g_vis->base] = t;
			last = g;
		}
	}
	_exit(0);
}

static void waiter_child(void)
{
	shmcfg *h;
	if (shmcfg_attach(g_hot_name, 0, NULL, &h))
		_exit(1);
	uint64_t last = shmcfg_generation(h);
	atomic_fetch_add(&g_vis->ready, 1);
	while (!atomic_load(&g_vis->stop)) {
		uint64_t g;
		int r = shmcfg_wait(h, last, 100, &g);
		if (r == 0) {
			double t = now_ns();
			if (g > g_vis->base && g - g_vis->base < 1024)
				g_vis->wake[g - g_vis->base] = t;
			last = g;
		} else if (r != -ETIMEDOUT && r != -EINTR) {
			_exit(1);
		}
	}
	_exit(0);
}

/* Commit opt.vis_commits times, ~2 ms apart, with a poller and/or a waiter
 * in other processes; latencies from the start of shmcfg_txn_commit(). */
static void vis_run(bool poller, bool waiter, struct vis_result *res)
{
	int nc = opt.vis_commits > 1000 ? 1000 : opt.vis_commits;
	memset(g_vis, 0, sizeof *g_vis);
	g_vis->base = shmcfg_generation(g_h);
	pid_t pids[2];
	int np = 0;
	fflush(stdout);
	if (poller) {
		if ((pids[np] = fork()) == 0)
			poller_child();
		np++;
	}
	if (waiter) {
		if ((pids[np] = fork()) == 0)
			waiter_child();
		np++;
	}
	while (atomic_load(&g_vis->ready) < np)
		usleep(200);
	sleep_ns(5e6);
	unsigned seed = 12345;
	for (int i = 0; i < nc; i++) {
		sleep_ns(1.5e6 + (double)(rand_r(&seed) % 1000) * 1e3); /* 1.5-2.5 ms apart */
		shmcfg_txn *t;
		CHECK(shmcfg_txn_begin(g_h, &t));
		CHECK(shmcfg_txn_set_int(t, g_opt_x, VALUE + 1 + (i & 1)));
		uint64_t gen;
		double t0 = now_ns();
		int r = shmcfg_txn_commit(t, &gen);
		double t1 = now_ns();
		CHECK(r);
		if (gen > g_vis->base && gen - g_vis->base < 1024) {
			g_vis->call[gen - g_vis->base] = t0;
			g_vis->ret[gen - g_vis->base] = t1;
		}
	}
	sleep_ns(5e6);
	atomic_store(&g_vis->stop, 1);
	for (int i = 0; i < np; i++)
		wait_child(pids[i]);
	/* restore the value the hot reads expect */
	shmcfg_txn *t;
	CHECK(shmcfg_txn_begin(g_h, &t));
	CHECK(shmcfg_txn_set_int(t, g_opt_x, VALUE));
	CHECK(shmcfg_txn_commit(t, NULL));

	static double pl[1024], pr[1024], wl[1024], wr[1024], cd[1024];
	int npl = 0, nwl = 0, ncd = 0;
	memset(res, 0, sizeof *res);
	for (int g = 1; g < 1024; g++) {
		if (!g_vis->call[g])
			continue;
		cd[ncd++] = g_vis->ret[g] - g_vis->call[g];
		if (poller) {
			if (g_vis->poll[g]) {
				pr[npl] = g_vis->poll[g] - g_vis->ret[g];
				pl[npl++] = g_vis->poll[g] - g_vis->call[g];
			} else
				res->missed_poll++;
		}
		if (waiter) {
			if (g_vis->wake[g]) {
				wr[nwl] = g_vis->wake[g] - g_vis->ret[g];
				wl[nwl++] = g_vis->wake[g] - g_vis->call[g];
			} else
				res->missed_wake++;
		}
	}
	res->commit = stats_of(cd, ncd);
	res->poll = stats_of(pl, npl);
	res->poll_ret = stats_of(pr, npl);
	res->wake = stats_of(wl, nwl);
	res->wake_ret = stats_of(wr, nwl);
}

static void vis_row(const char *what, const struct stats *st, const struct stats *ret, int missed)
{
	printf("   %-40s %10s %10s %10s %10s %12s", what, T(st->med), T(st->p90), T(st->p99), T(st->max),
	       T(ret->med));
	if (missed)
		printf("  (%d missed)", missed);
	printf("\n");
}

static void run_commits(void)
{
	printf("\n3. Commits (a schema of 1,000 int options; one transaction = begin, k sets,\n"
	       "   commit; latency median and p99, commits/s = transactions / total time)\n\n");
	char name[64];
	seg_name(name, sizeof name, "commit");
	shmcfg_schema *s = schema_of(1000);
	shmcfg_create_opts co = {.flags = SHMCFG_CREATE_FORCE | SHMCFG_CREATE_NO_ENV};
	shmcfg *h;
	CHECK(shmcfg_create(name, s, &co, &h));
	shmcfg_schema_free(s);
	static const uint32_t ks[3] = {1, 10, 100};
	printf("   %-30s %12s %12s %12s %12s\n", "changed options", "median", "p99", "max", "commits/s");
	int64_t value = 1000000;
	for (int j = 0; j < 3; j++) {
		int m = opt.quick ? 50 : 400;
		double *v = calloc((size_t)m, sizeof(double));
		double total = 0;
		int i;
		for (i = 0; i < m && total < (opt.quick ? 0.1e9 : 0.5e9); i++)
			total += v[i] = timed_commit(h, ks[j], value++);
		commit_rate[j] = i / (total / 1e9);
		commit_st[j] = stats_of(v, i);
		char label[40];
		snprintf(label, sizeof label, "%u", ks[j]);
		printf("   %-30s %12s %12s %12s %12s\n", label, T(commit_st[j].med), T(commit_st[j].p99),
		       T(commit_st[j].max), RATE(commit_rate[j]));
		free(v);
	}
	shmcfg_close(h);
	(void)shmcfg_unlink(name);

	g_vis = shared_alloc(sizeof *g_vis);
	vis_run(true, false, &vis_res[0]);
	vis_run(false, true, &vis_res[1]);
	vis_run(true, true, &vis_res[2]);
	printf("\n   Visibility: %d commits of the hot segment (16 options), 1.5-2.5 ms apart, seen\n"
	       "   from other processes. Latency from the start of shmcfg_txn_commit(); \"after\n"
	       "   return\" is the median from the commit's return (negative: seen before it).\n"
	       "   \"missed\": a generation the observer did not see on its own (it was off CPU\n"
	       "   over two commits). The commit itself took %s (median), %s (p99).\n\n",
	       opt.vis_commits, T(vis_res[1].commit.med), T(vis_res[1].commit.p99));
	printf("   %-40s %10s %10s %10s %10s %12s\n", "observer", "median", "p90", "p99", "max",
	       "after return");
	vis_row("polling reader (shmcfg_generation), alone", &vis_res[0].poll, &vis_res[0].poll_ret,
		vis_res[0].missed_poll);
	vis_row("waiter in shmcfg_wait, alone", &vis_res[1].wake, &vis_res[1].wake_ret, vis_res[1].missed_wake);
	vis_row("polling reader, waiter running too", &vis_res[2].poll, &vis_res[2].poll_ret,
		vis_res[2].missed_poll);
	vis_row("waiter, spinning poller running too", &vis_res[2].wake, &vis_res[2].wake_ret,
		vis_res[2].missed_wake);
}

/* ------------------------------------------------------------------ */
/* 4. Growth                                                          */
/* ------------------------------------------------------------------ */

struct growth {
	uint32_t n;
	double build_ns, create_ns;
	struct stats attach, lookup, touch, commit;
	double bytes;
};
static struct growth growth[3] = {{.n = 10}, {.n = 1000}, {.n = 100000}};

static __attribute__((noinline)) uint64_t lookup_loop(shmcfg *h, char **names, const uint32_t *idx,
						       long m)
{
	uint64_t acc = 0;
	for (long j = 0; j < m; j++) {
		shmcfg_opt o;
		if (shmcfg_lookup(h, names[idx[j]], &o) == 0)
			acc += o;
	}
	return acc;
}

/* The part of a lookup loop that is the caller's: fetch a random name and
 * read it (the same walk as lookup_loop, strlen instead of the lookup). */
static __attribute__((noinline)) uint64_t touch_loop(char **names, const uint32_t *idx, long m)
{
	uint64_t acc = 0;
	for (long j = 0; j < m; j++) {
		BENCH_BARRIER();
		acc += strlen(names[idx[j]]);
	}
	return acc;
}

static void growth_one(struct growth *g)
{
	double t0 = now_ns();
	shmcfg_schema *s = schema_of(g->n);
	g->build_ns = now_ns() - t0;
	char name[64];
	seg_name(name, sizeof name, "growth");
	shmcfg_create_opts co = {.flags = SHMCFG_CREATE_FORCE | SHMCFG_CREATE_NO_ENV};
	shmcfg *h;
	t0 = now_ns();
	CHECK(shmcfg_create(name, s, &co, &h));
	g->create_ns = now_ns() - t0;
	shmcfg_schema_free(s);

	char path[128];
	struct stat stt;
	snprintf(path, sizeof path, "/dev/shm/shmcfg.%s", name);
	if (stat(path, &stt) == 0)
		g->bytes = (double)stt.st_size;
	else {
		shmcfg_info info;
		CHECK(shmcfg_stat(h, &info));
		g->bytes = (double)info.size;
	}

	/* attach (a second handle in this process; each is a full attach) */
	int na = g->n >= 100000 ? (opt.quick ? 3 : 7) : (opt.quick ? 5 : 21);
	double *v = calloc(1000, sizeof(double));
	for (int i = 0; i < na; i++) {
		shmcfg *h2;
		t0 = now_ns();
		CHECK(shmcfg_attach(name, 0, NULL, &h2));
		v[i] = now_ns() - t0;
		shmcfg_close(h2);
	}
	g->attach = stats_of(v, na);

	/* lookup by name, random names: every option's name, shuffled */
	char **names = malloc(g->n * sizeof(char *));
	for (uint32_t i = 0; i < g->n; i++) {
		char b[64];
		opt_name(b, sizeof b, i);
		names[i] = strdup(b);
	}
	long m = opt.quick ? 100000 : 1000000;
	uint32_t *idx = malloc((size_t)m * sizeof(uint32_t));
	uint64_t rs = 0x9e3779b97f4a7c15ull;
	for (long j = 0; j < m; j++) {
		rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
		idx[j] = (uint32_t)(rs % g->n);
	}
	int reps = opt.quick ? 3 : 5;
	double lk[16], tc[16];
	for (int r = 0; r < reps; r++) {
		t0 = now_ns();
		sink += lookup_loop(h, names, idx, m);
		lk[r] = (now_ns() - t0) / (double)m;
		t0 = now_ns();
		sink += touch_loop(names, idx, m);
		tc[r] = (now_ns() - t0) / (double)m;
	}
	g->lookup = stats_of(lk, reps);
	g->touch = stats_of(tc, reps);
	/* check: every lookup found its option */
	{
		shmcfg_opt o;
		for (uint32_t i = 0; i < g->n; i += (g->n / 97) + 1)
			if (shmcfg_lookup(h, names[i], &o) || o != i)
				fail("shmcfg_lookup returned the wrong handle");
	}
	for (uint32_t i = 0; i < g->n; i++)
		free(names[i]);
	free(names);
	free(idx);

	/* one-change commits */
	int nc = g->n >= 100000 ? (opt.quick ? 3 : 11) : (opt.quick ? 50 : 201);
	for (int i = 0; i < nc; i++)
		v[i] = timed_commit(h, 1, 1000000 + i);
	g->commit = stats_of(v, nc);
	free(v);
	shmcfg_close(h);
	(void)shmcfg_unlink(name);
}

/*
 * The limit of a lookup: one load of a cache line it has to fetch. A chase
 * through a random cyclic permutation of the lines of @p mib MiB, each load
 * depending on the last: its latency at that footprint (cache and TLB).
 */
static double miss_latency_ns(size_t mib)
{
	const size_t lines = (mib << 20) / 64;
	uint64_t *mem = aligned_alloc(64, lines * 64);
	uint32_t *perm = malloc(lines * sizeof(uint32_t));
	if (!mem || !perm)
		die("out of memory");
	for (size_t i = 0; i < lines; i++)
		perm[i] = (uint32_t)i;
	uint64_t rs = 0x2545f4914f6cdd1dull;
	for (size_t i = lines - 1; i > 0; i--) { /* Fisher-Yates */
		rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
		size_t j = rs % (i + 1);
		uint32_t t = perm[i];
		perm[i] = perm[j];
		perm[j] = t;
	}
	for (size_t i = 0; i < lines; i++) /* one cycle through every line */
		mem[(size_t)perm[i] * 8] = (uint64_t)perm[(i + 1) % lines] * 8;
	free(perm);
	double best = INFINITY;
	long steps = opt.quick ? 100000 : 500000;
	for (int r = 0; r < 3; r++) {
		uint64_t p = 0;
		double t0 = now_ns();
		for (long k = 0; k < steps; k++)
			p = mem[p];
		double t = (now_ns() - t0) / (double)steps;
		sink += p;
		best = fmin(best, t);
	}
	free(mem);
	return best;
}

static double g_miss_ns[3]; /* 1, 4 and 16 MiB */

static void run_growth(void)
{
	printf("\n4. Growth (int options named groupNNN.option_NNNNNN; default create options)\n\n");
	for (int i = 0; i < 3; i++)
		growth_one(&growth[i]);
	static const size_t mib[3] = {1, 4, 16};
	for (int i = 0; i < 3; i++)
		g_miss_ns[i] = miss_latency_ns(mib[i]);
	printf("   The limit of a lookup, one dependent load of a random cache line (best of 3):\n"
	       "   %s within 1 MiB, %s within 4 MiB, %s within 16 MiB (the descriptors of\n"
	       "   100,000 options take 14 MB, their name index 1 MiB)\n\n",
	       T(g_miss_ns[0]), T(g_miss_ns[1]), T(g_miss_ns[2]));
	printf("   %-36s %14s %14s %14s\n", "options", "10", "1,000", "100,000");
#define GROW_ROW(label, ...)                                                                    \
	do {                                                                                    \
		char c_[3][32];                                                                 \
		for (int k_ = 0; k_ < 3; k_++) {                                                \
			const struct growth *g = &growth[k_];                                   \
			snprintf(c_[k_], sizeof c_[k_], "%s", (__VA_ARGS__));                   \
		}                                                                               \
		printf("   %-36s %14s %14s %14s\n", label, c_[0], c_[1], c_[2]);                \
	} while (0)
	GROW_ROW("lookup by name, random names", T(g->lookup.med));
	GROW_ROW("  of which fetching the name", T(g->touch.med));
	GROW_ROW("  lookup min..max (ns)", SPREAD(g->lookup.min, g->lookup.max));
	GROW_ROW("one-change commit, median", T(g->commit.med));
	GROW_ROW("one-change commit, max", T(g->commit.max));
	GROW_ROW("one-change commits/s", RATE(1e9 / g->commit.med));
	GROW_ROW("attach, median", T(g->attach.med));
	GROW_ROW("segment size", BYTES(g->bytes));
	GROW_ROW("segment bytes per option", BYTES(g->bytes / g->n));
	GROW_ROW("schema build (shmcfg_schema_add)", T(g->build_ns));
	GROW_ROW("shmcfg_create", T(g->create_ns));
#undef GROW_ROW
}

/* ------------------------------------------------------------------ */
/* 5. Targets                                                         */
/* ------------------------------------------------------------------ */

static void target(bool known, bool met, const char *what, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void target(bool known, bool met, const char *what, const char *fmt, ...)
{
	printf("   [%s] %s: ", !known ? "  n/a " : met ? "  met " : "MISSED", what);
	if (known) {
		va_list ap;
		va_start(ap, fmt);
		vprintf(fmt, ap);
		va_end(ap);
	} else {
		printf("(section not run)");
	}
	printf("\n");
}

static void run_targets(void)
{
	printf("\n5. Targets of the issue (a benchmark: these are reported, never asserted)\n\n");
	bool hot = opt.sections & SEC_HOT;
	/* paired ratios to the plain load (see run_hot) */
	double inl = cand("inline")->rt.med, acc = cand("accessor")->rt.med;
	double seq = cand("seqlock")->rt.med, rw = cand("rwlock")->rt.med, lm = cand("lmdb_get")->rt.med;
	target(hot, inl <= 1.5, "inline by-handle read within 1.5x of the plain load",
	       "%.2fx (accessor %.2fx; the seqlock floor %.2fx here)", inl, acc, seq);
	target(hot, rw / inl >= 10, "at least 10x cheaper than the pthread_rwlock read", "%.1fx cheaper",
	       rw / inl);
	target(hot, lm / inl >= 100, "at least 100x cheaper than an LMDB get",
	       "%.0fx cheaper (than mdb_get in an open txn; %.0fx than txn_begin + get + abort)", lm / inl,
	       cand("lmdb_txn")->rt.med / inl);
	bool sc = opt.sections & SEC_SCALE;
	target(sc, scale_rel[2] >= 0.9, "2-thread read scaling at least 90% of the plain load's",
	       "%.0f%% (%.2fx vs %.2fx; accessor %.0f%%)", 100 * scale_rel[2], scale_ratio[2], scale_ratio[0],
	       100 * scale_rel[3]);
	bool gr = opt.sections & SEC_GROWTH;
	target(gr, growth[2].lookup.med < 50, "lookup by name under 50 ns at 100,000 options",
	       "%s (one random load within 16 MiB: %s)", T(growth[2].lookup.med), T(g_miss_ns[2]));
	target(gr, growth[1].commit.med < 20e3, "one-change commit under 20 us at 1,000 options", "%s",
	       T(growth[1].commit.med));
	bool cm = opt.sections & SEC_COMMIT;
	target(cm, vis_res[1].wake.med < 100e3, "a waiter in another process woken within 100 us",
	       "median %s, p99 %s from the commit call (alone); median %s, p99 %s beside a spinning poller",
	       T(vis_res[1].wake.med), T(vis_res[1].wake.p99), T(vis_res[2].wake.med), T(vis_res[2].wake.p99));
}

/* ------------------------------------------------------------------ */
/* Callgrind: instructions per read                                   */
/* ------------------------------------------------------------------ */

#define CG_N 20000L

/* Beyond the hot reads: lookups and commits, whose instruction counts are as
 * stable as the reads' while their times on a shared machine are not. */
static shmcfg *g_cg_seg[2];   /* 10 and 1,000 options */
static char **g_cg_names;     /* the 1,000 names */
static uint32_t *g_cg_idx;    /* random indices into them */
static int64_t g_cg_value = 1000000;

static uint64_t cg_lookup1000(long n)
{
	return lookup_loop(g_cg_seg[1], g_cg_names, g_cg_idx, n);
}

static uint64_t cg_commit(shmcfg *h, long n)
{
	for (long i = 0; i < n; i++)
		sink += (uint64_t)timed_commit(h, 1, g_cg_value++);
	return 0;
}

static uint64_t cg_commit10(long n)
{
	return cg_commit(g_cg_seg[0], n);
}

static uint64_t cg_commit1000(long n)
{
	return cg_commit(g_cg_seg[1], n);
}

struct cg_item {
	const char *key, *label;
	uint64_t (*loop)(long n);
	long n;
	const char *group;
};

static const struct cg_item cg_extra[] = {
	{"lookup1000", "shmcfg_lookup, 1,000 options, random names", cg_lookup1000, CG_N,
	 "lookups and commits (instructions per call)"},
	{"commit10", "one-change transaction, 10 options", cg_commit10, 20, NULL},
	{"commit1000", "one-change transaction, 1,000 options", cg_commit1000, 20, NULL},
};
#define NCG_EXTRA ((int)(sizeof cg_extra / sizeof cg_extra[0]))
#define NCG (NCANDS + NCG_EXTRA)

static struct cg_item cg_item_at(int i)
{
	if (i < NCANDS)
		return (struct cg_item){cands[i].key, cands[i].label, cands[i].loop, CG_N, cands[i].group};
	return cg_extra[i - NCANDS];
}

static void cg_setup_extra(void)
{
	static const uint32_t sizes[2] = {10, 1000};
	for (int k = 0; k < 2; k++) {
		char name[64];
		seg_name(name, sizeof name, k ? "cg1000" : "cg10");
		shmcfg_schema *s = schema_of(sizes[k]);
		shmcfg_create_opts co = {.flags = SHMCFG_CREATE_FORCE | SHMCFG_CREATE_NO_ENV};
		CHECK(shmcfg_create(name, s, &co, &g_cg_seg[k]));
		shmcfg_schema_free(s);
	}
	g_cg_names = malloc(1000 * sizeof(char *));
	for (uint32_t i = 0; i < 1000; i++) {
		char b[64];
		opt_name(b, sizeof b, i);
		g_cg_names[i] = strdup(b);
	}
	g_cg_idx = malloc(2 * CG_N * sizeof(uint32_t));
	uint64_t rs = 0x9e3779b97f4a7c15ull;
	for (long j = 0; j < 2 * CG_N; j++) {
		rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
		g_cg_idx[j] = (uint32_t)(rs % 1000);
	}
}

/* In the child under valgrind: each loop with N and 2N iterations between a
 * zeroing and a dump of callgrind's counters. */
static int callgrind_child(void)
{
#ifdef HAVE_CALLGRIND_H
	hot_setup_all();
	cg_setup_extra();
	for (int i = 0; i < NCG; i++) {
		struct cg_item it = cg_item_at(i);
		sink += it.loop(it.n / 10 + 1); /* warm up */
		for (long n = it.n; n <= 2 * it.n; n += it.n) {
			char label[64];
			snprintf(label, sizeof label, "bench:%s:%ld", it.key, n);
			CALLGRIND_ZERO_STATS;
			sink += it.loop(n);
			CALLGRIND_DUMP_STATS_AT(label);
		}
	}
	printf("   (under valgrind: urcu sys_membarrier %s (bp), %s (memb))\n",
	       urcu_bp_has_sys_membarrier ? "on" : "off", urcu_memb_has_sys_membarrier ? "on" : "off");
	for (int k = 0; k < 2; k++)
		shmcfg_close(g_cg_seg[k]);
	return 0;
#else
	return 1;
#endif
}

static int run_callgrind(const char *self)
{
#ifndef HAVE_CALLGRIND_H
	(void)self;
	fprintf(stderr, "bench: built without <valgrind/callgrind.h>: no callgrind mode\n");
	return 1;
#else
	const char *vg = getenv("BENCH_VALGRIND");
	if (!vg || !*vg)
		vg = "valgrind";
	char dir[] = "/tmp/shmcfg-bench-cg-XXXXXX";
	if (!mkdtemp(dir))
		die("mkdtemp: %s", strerror(errno));
	char outarg[128];
	snprintf(outarg, sizeof outarg, "--callgrind-out-file=%s/cg.out", dir);
	printf("shmcfg bench-callgrind: instructions per read under valgrind --tool=callgrind,\n"
	       "(Ir(2N) - Ir(N)) / N with N = %ld reads (N = 20 commits), so that the set-up cancels\n",
	       CG_N);
	fflush(stdout);
	pid_t p = fork();
	if (p < 0)
		die("fork: %s", strerror(errno));
	if (p == 0) {
		execlp(vg, vg, "-q", "--tool=callgrind", outarg, "--dump-instr=no", "--compress-strings=no",
		       self, "--callgrind-child", (char *)NULL);
		fprintf(stderr, "bench: cannot run %s: %s\n", vg, strerror(errno));
		_exit(127);
	}
	int st;
	while (waitpid(p, &st, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		die("valgrind failed (status %d)", st);
	/* the dumps: "desc: Trigger: Client Request: bench:KEY:N", then
	 * "summary: IR" or "totals: IR" */
	static double ir[NCG][2];
	for (int i = 0; i < NCG; i++)
		ir[i][0] = ir[i][1] = NAN;
	for (int k = 1; k < 1000; k++) {
		char path[160];
		snprintf(path, sizeof path, "%s/cg.out.%d", dir, k);
		FILE *f = fopen(path, "r");
		if (!f)
			break;
		char line[512], key[64] = "";
		long n = 0;
		double total = NAN;
		while (fgets(line, sizeof line, f)) {
			char *b = strstr(line, "Client Request: bench:");
			if (b && !strncmp(line, "desc:", 5)) {
				b += strlen("Client Request: bench:");
				char *colon = strrchr(b, ':');
				if (colon) {
					snprintf(key, sizeof key, "%.*s", (int)(colon - b), b);
					n = atol(colon + 1);
				}
			} else if (!strncmp(line, "summary:", 8) || !strncmp(line, "totals:", 7)) {
				total = atof(strchr(line, ':') + 1);
			}
		}
		fclose(f);
		unlink(path);
		for (int i = 0; i < NCG; i++) {
			struct cg_item it = cg_item_at(i);
			if (!strcmp(it.key, key))
				ir[i][n == it.n ? 0 : 1] = total;
		}
	}
	char path[160];
	snprintf(path, sizeof path, "%s/cg.out", dir);
	unlink(path);
	rmdir(dir);
	double base = (ir[0][1] - ir[0][0]) / (double)CG_N;
	printf("\n   %-52s %14s %9s\n", "read", "instr/read", "x plain");
	for (int i = 0; i < NCG; i++) {
		struct cg_item it = cg_item_at(i);
		double per = (ir[i][1] - ir[i][0]) / (double)it.n;
		if (i < NCANDS)
			cands[i].ir = per;
		if (it.group)
			printf("   -- %s\n", it.group);
		if (i < NCANDS)
			printf("   %-52s %14.1f %8.1fx\n", it.label, per, per / base);
		else
			printf("   %-52s %14.0f\n", it.label, per);
	}
	printf("\n   Each read figure includes the loop around it: increment, compare, branch and\n"
	       "   the add of the value read (the plain load's 4 = those + its one load).\n"
	       "   Instruction counts ignore what instructions cost: a fence or a locked\n"
	       "   read-modify-write (urcu-mb, pthread_rwlock) counts as one.\n");
	return 0;
#endif
}

/* ------------------------------------------------------------------ */
/* Main                                                               */
/* ------------------------------------------------------------------ */

static void print_machine(void)
{
	char model[256] = "?";
	FILE *f = fopen("/proc/cpuinfo", "r");
	if (f) {
		char line[512];
		while (fgets(line, sizeof line, f))
			if (!strncmp(line, "model name", 10)) {
				char *p = strchr(line, ':');
				if (p) {
					p += 2;
					p[strcspn(p, "\n")] = 0;
					snprintf(model, sizeof model, "%s", p);
				}
				break;
			}
		fclose(f);
	}
	char load[64] = "?";
	f = fopen("/proc/loadavg", "r");
	if (f) {
		if (fgets(load, sizeof load, f))
			load[strcspn(load, "\n")] = 0;
		fclose(f);
	}
	struct utsname u;
	uname(&u);
	time_t now = time(NULL);
	char date[64];
	strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&now));
	int maj, min, pat;
	mdb_version(&maj, &min, &pat);
	printf("shmcfg %s benchmark, %s\n", shmcfg_version(NULL, NULL, NULL), date);
	printf("machine: %s, %ld CPUs online; kernel %s %s; gcc %s; LMDB %d.%d.%d\n", model,
	       sysconf(_SC_NPROCESSORS_ONLN), u.sysname, u.release, __VERSION__, maj, min, pat);
	printf("load average at start: %s\n", load);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: bench [--quick] [--repeats R] [--ms T] [--only hot,scale,commit,growth]\n"
		   "       bench --callgrind\n"
		   "  --quick      fewer repeats and shorter phases (a smoke run, not for the record)\n"
		   "  --repeats R  hot-read rounds (default 11)\n"
		   "  --ms T       target milliseconds per timed loop (default 20)\n"
		   "  --only LIST  run only these sections (the targets of the others show n/a)\n"
		   "  --callgrind  instructions per read under valgrind --tool=callgrind\n"
		   "               (valgrind from $BENCH_VALGRIND, else from PATH)\n");
}

int main(int argc, char **argv)
{
	main_pid = getpid();
	bool cg = false;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--quick")) {
			opt.quick = true;
			opt.repeats = 5;
			opt.repeat_ms = 5;
			opt.proc_s = 0.2;
			opt.vis_commits = 50;
		} else if (!strcmp(argv[i], "--repeats") && i + 1 < argc) {
			opt.repeats = atoi(argv[++i]);
			if (opt.repeats < 1 || opt.repeats > 1000)
				die("--repeats: 1..1000");
		} else if (!strcmp(argv[i], "--ms") && i + 1 < argc) {
			opt.repeat_ms = atof(argv[++i]);
			if (!(opt.repeat_ms > 0))
				die("--ms: a positive number");
		} else if (!strcmp(argv[i], "--only") && i + 1 < argc) {
			const char *l = argv[++i];
			opt.sections = 0;
			if (strstr(l, "hot"))
				opt.sections |= SEC_HOT;
			if (strstr(l, "scale"))
				opt.sections |= SEC_SCALE | SEC_HOT; /* scaling sizes its loops by the hot reads */
			if (strstr(l, "commit"))
				opt.sections |= SEC_COMMIT;
			if (strstr(l, "growth"))
				opt.sections |= SEC_GROWTH;
		} else if (!strcmp(argv[i], "--callgrind")) {
			cg = true;
		} else if (!strcmp(argv[i], "--callgrind-child")) {
			atexit(unlink_segments);
			int r = callgrind_child();
			teardown_competitors();
			return r;
		} else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return 0;
		} else {
			usage(stderr);
			return 2;
		}
	}
	atexit(unlink_segments);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (cg) {
		char self[PATH_MAX];
		ssize_t l = readlink("/proc/self/exe", self, sizeof self - 1);
		if (l <= 0)
			die("readlink /proc/self/exe: %s", strerror(errno));
		self[l] = 0;
		return run_callgrind(self);
	}
	print_machine();
	printf("settings: %d repeats of ~%.0f ms per hot-read loop%s\n", opt.repeats, opt.repeat_ms,
	       opt.quick ? " (--quick: not for the record)" : "");
	double t0 = now_ns();
	hot_setup_all();
	if (opt.sections & SEC_HOT)
		run_hot();
	if (opt.sections & SEC_SCALE)
		run_scaling();
	if (opt.sections & SEC_COMMIT)
		run_commits();
	if (opt.sections & SEC_GROWTH)
		run_growth();
	run_targets();
	teardown_competitors();
	shmcfg_close(g_h);
	unlink_segments();
	printf("\nbench: done in %.1f s%s\n", (now_ns() - t0) / 1e9,
	       failures ? "; SOME READS WERE BROKEN (see stderr)" : "");
	return failures ? 1 : 0;
}
