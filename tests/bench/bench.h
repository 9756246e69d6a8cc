/* SPDX-License-Identifier: MIT */
/*
 * Declarations shared by the benchmark's files (bench_*.c, one concern each:
 * see bench_main.c) and its helpers: the -fPIC shared library (plainlib.c,
 * rcu_*.c built with BENCH_SO) and the liburcu read sides built into the
 * executable (rcu_*.c without BENCH_SO).
 */
#ifndef SHMCFG_BENCH_H
#define SHMCFG_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "shmcfg.h"

/* A compiler barrier: every value the loop reads must be loaded again. */
#define BENCH_BARRIER() __asm__ __volatile__("" ::: "memory")

#if defined(__GNUC__)
#define BENCH_EXPORT __attribute__((visibility("default")))
#else
#define BENCH_EXPORT
#endif

/* plainlib.c, in libbenchso.so: the floor of any non-inline getter. */
BENCH_EXPORT int64_t plain_get(void);
BENCH_EXPORT void plain_set(int64_t v);

/*
 * liburcu read sides (rcu_flavour.h): a read-side section around one pointer
 * load and one load through it. In the executable (inline with _LGPL_SOURCE,
 * except bpcall which calls liburcu-bp's exported functions, as libshmcfg
 * does) each flavour has a loop; in libbenchso.so each has an exported getter
 * that the executable calls once per read.
 */
#define BENCH_RCU_DECL(fl)                                                  \
	void bench_rcu_##fl##_setup(void);                                   \
	int64_t bench_rcu_##fl##_get(void);                                  \
	uint64_t bench_rcu_##fl##_loop(long n);                              \
	BENCH_EXPORT void bench_rcu_##fl##_setup_so(void);                   \
	BENCH_EXPORT int64_t bench_rcu_##fl##_get_so(void);
BENCH_RCU_DECL(bp)
BENCH_RCU_DECL(bpcall)
BENCH_RCU_DECL(memb)
BENCH_RCU_DECL(mb)
#undef BENCH_RCU_DECL

/* liburcu: whether the read sides run with sys_membarrier (a compiler
 * barrier) or with full fences */
extern int urcu_bp_has_sys_membarrier;
extern int urcu_memb_has_sys_membarrier;

/* ------------------------------------------------------------------ */
/* bench_main.c: settings (the command line), the targets, main()     */
/* ------------------------------------------------------------------ */

enum {
	SEC_HOT = 1 << 0,
	SEC_SCALE = 1 << 1,
	SEC_COMMIT = 1 << 2,
	SEC_GROWTH = 1 << 3,
	SEC_ALL = 0xf,
};

struct bench_settings {
	int repeats;        /* hot-read rounds */
	double repeat_ms;   /* target time of one loop of one candidate */
	double proc_s;      /* duration of each multi-process phase */
	int vis_commits;    /* commits timed for visibility */
	unsigned sections;
	bool quick;
};
extern struct bench_settings opt;

/*
 * HOOK for bench_read.c (issue 12's two read targets; defined in
 * bench_main.c): section 1 sets these when it measures them, each a ratio paired per round (median over the
 * rounds, and its min..max), and the targets section prints them. While
 * .measured is false, the targets fall back to the candidates: "accessor"
 * over "lean_c" (the ratio of their paired medians) for the first, and
 * "batch8" over "plain8" (keys of cands[], if present) for the second; with
 * neither, the target shows n/a.
 */
struct read_target {
	bool measured;
	double med, min, max;
	const char *how; /* what was divided by what, printed with the figure */
};
extern struct read_target target_accessor_vs_seqlock; /* limit 1.5 */
extern struct read_target target_batch8_vs_plain8;    /* limit 6 */

/* ------------------------------------------------------------------ */
/* bench_util.c: timing, output, statistics, segments, processes      */
/* ------------------------------------------------------------------ */

extern volatile uint64_t sink; /* every loop's result ends here */
extern int failures;           /* broken reads: exit status */
extern pid_t main_pid;

/* CLOCK_MONOTONIC in ns; inline, as timed code calls it (a commit's time,
 * and its instruction count under callgrind, include two of these) */
static inline double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}
__attribute__((noreturn, format(printf, 1, 2))) void die(const char *fmt, ...);

#define CHECK(call)                                                                        \
	do {                                                                               \
		int r_ = (call);                                                           \
		if (r_ < 0)                                                                \
			die("%s:%d: %s: %s (%s)", __FILE__, __LINE__, #call, shmcfg_strerror(r_), \
			    shmcfg_errdetail());                                           \
	} while (0)

void fail(const char *what);

/* Durations, rates, sizes and ranges as text, in a buffer of the call's */
const char *fmt_time(char *buf, size_t len, double ns);
const char *fmt_rate(char *buf, size_t len, double per_s);
const char *fmt_bytes(char *buf, size_t len, double b);
const char *fmt_spread(char *buf, size_t len, double lo, double hi);
const char *fmt_count(char *buf, size_t len, uint64_t n);
#define T(ns) fmt_time((char[24]){0}, 24, (ns))
#define RATE(x) fmt_rate((char[24]){0}, 24, (x))
#define BYTES(x) fmt_bytes((char[24]){0}, 24, (x))
#define SPREAD(lo, hi) fmt_spread((char[32]){0}, 32, (lo), (hi))
#define COUNT(n) fmt_count((char[32]){0}, 32, (n))

/* Order statistics of a sample (sorted in place). */
struct stats {
	double med, min, max, q1, q3, p90, p99;
	int n;
};
struct stats stats_of(double *v, int n);

void seg_name(char *buf, size_t len, const char *what);
void unlink_segments(void);
/* A fresh directory under /dev/shm (else $TMPDIR, else /tmp), removed with
 * its files at exit (by unlink_segments) or by rm_tmpdir(). */
void make_tmpdir(char *buf, size_t len, const char *what);
void rm_tmpdir(const char *dir);
/* Free bytes of the file system holding @p path; MemAvailable in bytes (-1: unknown) */
double fs_free_bytes(const char *path);
double mem_available_bytes(void);
/* The running executable (for fork + exec of a fresh process) */
const char *self_exe(void);
void on_signal(int sig);
void *shared_alloc(size_t len);
void wait_child(pid_t pid);
void sleep_ns(double ns);

/* ------------------------------------------------------------------ */
/* bench_read.c: the things read, the read loops, 1. hot reads        */
/* ------------------------------------------------------------------ */

#define VALUE 42 /* what every hot read reads */

extern int64_t g_plain;
extern shmcfg *g_h;        /* the hot-read segment */
extern shmcfg_opt g_opt_x; /* bench.x, from shmcfg_lookup() */
extern char g_hot_name[64];

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
extern struct cand cands[];
extern const int ncands;
struct cand *cand(const char *key);
/* Median over the rounds of candidate a's paired ratio over b's (section 1) */
struct stats ratio_of(const char *a, const char *b);

void hot_setup_all(void);
void teardown_competitors(void);
void run_hot(void);

/* ------------------------------------------------------------------ */
/* bench_scale.c: 2. scaling (threads, processes)                     */
/* ------------------------------------------------------------------ */

/* per read of scale_keys[] (0 the plain load, 2 inline, 3 the accessor):
 * 2-thread rate / 1-thread rate, and that ratio / the plain load's, medians */
extern double scale_ratio[], scale_rel[];
void run_scaling(void);

/* ------------------------------------------------------------------ */
/* bench_commit.c: schemas of N options, 3. commits and visibility    */
/* ------------------------------------------------------------------ */

void opt_name(char *buf, size_t len, uint32_t i);
shmcfg_schema *schema_of(uint32_t n);
double timed_commit(shmcfg *h, uint32_t k, int64_t value);
/* One transaction setting option @p o to @p value; returns its time. */
double timed_commit_at(shmcfg *h, shmcfg_opt o, int64_t value);

/*
 * The LMDB write peer (issue 12): an environment in a fresh directory under
 * /dev/shm (make_tmpdir), opened with MDB_WRITEMAP | MDB_NOSYNC, pre-filled
 * with n keys named as the options of schema_of(n) (opt_name), each an
 * 8-byte value. lmdb_peer_write times one write transaction (begin, k puts,
 * commit) of keys [k0, k0 + k), as timed_commit times shmcfg's.
 */
struct lmdb_peer {
	void *env; /* MDB_env */
	unsigned dbi;
	uint32_t n;
	double fill_ns; /* creating the environment and putting the n keys */
	double bytes;   /* pages in use after the fill, times the page size */
	bool borrowed;  /* opened by lmdb_peer_reopen: its directory is not ours */
	char dir[128];
};
void lmdb_peer_open(struct lmdb_peer *p, uint32_t n);
void lmdb_peer_reopen(struct lmdb_peer *p, const char *dir, uint32_t n);
double lmdb_peer_write(struct lmdb_peer *p, uint32_t k0, uint32_t k, int64_t value);
void lmdb_peer_close(struct lmdb_peer *p);

struct vis_result {
	struct stats poll, poll_ret, wake, wake_ret, commit;
	int missed_poll, missed_wake;
};
/* poller alone, waiter alone, both at once */
extern struct vis_result vis_res[3];
/* k = 1, 10, 100 changes at 1,000 options: shmcfg, LMDB, per-pair ratio */
extern struct stats commit_st[3], commit_lmdb[3], commit_ratio[3];
extern double commit_floor_ns; /* process-shared mutex + memcpy of one value */
void run_commits(void);

/* ------------------------------------------------------------------ */
/* bench_growth.c: 4. growth (10 to 1,000,000 options)                */
/* ------------------------------------------------------------------ */

#define GROWTH_FIRST_COMMITS 7 /* commits of a fresh process reported apart */
/* untimed pairs between the first pairs after create and the steady state's
 * (within the size's time budget): at 1,000 options a commit kept getting
 * cheaper for ~400 commits after create (doc/benchmarks.md, session 26) */
#define GROWTH_WARM 2000
#define NGROWTH 5              /* 10, 1,000, 10,000, 100,000, 1,000,000 options */

struct growth {
	uint32_t n;
	double build_ns, create_ns;
	/* attach: in a fresh process (fork + exec); commit: one-change
	 * commits of this process after a warm-up, paired with lmdb */
	struct stats attach, lookup, touch, commit;
	double bytes; /* the object's size (shmcfg_stat) */
	bool run;     /* measured; if not, skip says why */
	char skip[256];
	struct stats commit_first; /* the first GROWTH_FIRST_COMMITS of fresh processes, pooled */
	struct stats commit_first_prefault; /* ... attached with SHMCFG_ATTACH_PREFAULT */
	struct stats attach_prefault;       /* their attach */
	struct stats lmdb_first;   /* ... of fresh LMDB processes (one-key write txns), pooled */
	struct stats first_lookup; /* a fresh process's first lookup + read, after attach */
	struct stats lmdb;         /* LMDB one-key write txn, same number of keys */
	struct stats ratio;        /* per pair: shmcfg commit / LMDB write */
	struct stats commit_early, lmdb_early, ratio_early; /* the pairs right after create */
	double lmdb_fill_ns, lmdb_bytes;
	int npairs, npairs_early, nwarm, nprocs, nlookup_rounds;
	long nlookups;
};
extern struct growth growth[NGROWTH];
/* the row of @p n options, if it was measured, else NULL */
const struct growth *growth_at(uint32_t n);
extern double g_miss_ns[3]; /* 1, 4 and 16 MiB */
extern const char *g_tsv_path;   /* --tsv FILE: the growth rows as TSV */
extern uint32_t g_growth_max;    /* --growth-max N: largest schema measured */
__attribute__((noinline)) uint64_t lookup_loop(shmcfg *h, char **names, const uint32_t *idx,
					       long m);
void run_growth(void);
/* --attach-child (flags 0), --prefault-child (SHMCFG_ATTACH_PREFAULT),
 * --lmdb-child: the fresh processes of the growth section */
int attach_child(int argc, char **argv, unsigned flags);
int lmdb_child(int argc, char **argv);

/* ------------------------------------------------------------------ */
/* bench_callgrind.c: instructions per read (--callgrind)             */
/* ------------------------------------------------------------------ */

int callgrind_child(void);
int run_callgrind(const char *self);

#endif
