/* SPDX-License-Identifier: MIT */
/*
 * shmcfg benchmark, section 1: the things read (the hot-read segment and the
 * competitors: a plain global, a seqlock and a pthread_rwlock in shared
 * memory, getenv, LMDB, liburcu), their read loops, and the hot read cost of
 * each (the candidates, cands[]: the scaling and callgrind sections run the
 * same loops).
 *
 * The hot-read segment has the schema of tests/bench/bench_schema.yaml;
 * bench_schema.h is `shmctl header`'s output for it (tests/cli/header.sh
 * checks that it is): the generated accessors and the batched read of 8
 * options measured here are the ones users get.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <lmdb.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bench.h"
#include "bench_schema.h"

/* ------------------------------------------------------------------ */
/* The things read                                                    */
/* ------------------------------------------------------------------ */

/* the limit: a plain global. Not static, and written at run time: a
 * constant the compiler could see would be folded out of the loop. */
int64_t g_plain;
int64_t g_plain8[8]; /* eight plain loads: the limit of a read of 8 options */
shmcfg *g_h;
shmcfg_opt g_opt_x;
static shmcfg_opt g_opt_enabled, g_opt_ratio; /* handles from shmcfg_lookup() */
char g_hot_name[64];

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
LOOP(loop_shm_inline_const, {
	int64_t v;
	if (shmcfg_get_int(g_h, bench_x_opt, &v) == 0)
		acc += (uint64_t)v;
})

/* Reads of 8 options per iteration: bench.x, .enabled, .ratio (its bits)
 * and filler.a04-a08, the fields of struct bench_values. */
static inline uint64_t f64_bits(double d)
{
	uint64_t b;
	memcpy(&b, &d, 8);
	return b;
}

/* the eight values summed in one expression, as the loops below do: the
 * compiler adds them as a tree, not as a chain of eight adds into acc */
LOOP(loop_plain8, {
	acc += (uint64_t)g_plain8[0] + (uint64_t)g_plain8[1] + (uint64_t)g_plain8[2] + (uint64_t)g_plain8[3] +
	       (uint64_t)g_plain8[4] + (uint64_t)g_plain8[5] + (uint64_t)g_plain8[6] + (uint64_t)g_plain8[7];
})
LOOP(loop_batch8, {
	struct bench_values v;
	if (bench_read(g_h, &v) == 0)
		acc += (uint64_t)v.x + v.enabled + f64_bits(v.ratio) + (uint64_t)v.filler_a04 +
		       (uint64_t)v.filler_a05 + (uint64_t)v.filler_a06 + (uint64_t)v.filler_a07 + v.filler_a08;
})
LOOP(loop_acc8, {
	acc += (uint64_t)bench_x(g_h) + bench_enabled(g_h) + f64_bits(bench_ratio(g_h)) +
	       (uint64_t)bench_filler_a04(g_h) + (uint64_t)bench_filler_a05(g_h) +
	       (uint64_t)bench_filler_a06(g_h) + (uint64_t)bench_filler_a07(g_h) + bench_filler_a08(g_h);
})
static const shmcfg_opt opts8[8] = {bench_x_opt, bench_enabled_opt, bench_ratio_opt, bench_filler_a04_opt,
				    bench_filler_a05_opt, bench_filler_a06_opt, bench_filler_a07_opt,
				    bench_filler_a08_opt};
/* a value's bits as the loops above sum them */
static uint64_t value_bits(const shmcfg_value *v)
{
	return v->type == SHMCFG_BOOL ? v->u.b : v->type == SHMCFG_FLOAT ? f64_bits(v->u.f) : (uint64_t)v->u.i;
}
/* the 8 with the snapshot's typed inline getters (opts8: int, bool, float,
 * four ints, bool), as a program that knows its options' types reads them */
LOOP(loop_snap8, {
	shmcfg_snapshot *s;
	if (shmcfg_snapshot_acquire(g_h, &s) == 0) {
		int64_t iv;
		bool b;
		double d;
		if (shmcfg_snapshot_get_int(s, opts8[0], &iv) == 0)
			acc += (uint64_t)iv;
		if (shmcfg_snapshot_get_bool(s, opts8[1], &b) == 0)
			acc += b;
		if (shmcfg_snapshot_get_float(s, opts8[2], &d) == 0)
			acc += f64_bits(d);
		for (int k = 3; k < 7; k++)
			if (shmcfg_snapshot_get_int(s, opts8[k], &iv) == 0)
				acc += (uint64_t)iv;
		if (shmcfg_snapshot_get_bool(s, opts8[7], &b) == 0)
			acc += b;
		shmcfg_snapshot_release(s);
	}
})
/* ... with the generic get (any type, a shmcfg_value) */
LOOP(loop_snap8_any, {
	shmcfg_snapshot *s;
	if (shmcfg_snapshot_acquire(g_h, &s) == 0) {
		for (int k = 0; k < 8; k++) {
			shmcfg_value v;
			if (shmcfg_snapshot_get(s, opts8[k], &v) == 0)
				acc += value_bits(&v);
		}
		shmcfg_snapshot_release(s);
	}
})
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
		int64_t v;
		if (shmcfg_snapshot_get_int(s, g_opt_x, &v) == 0)
			acc += (uint64_t)v;
		shmcfg_snapshot_release(s);
	}
})
LOOP(loop_shm_snapshot_any, {
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

/* nonull: shmcfg_get_int as it was before the NULL rule (issue 24): the
 * read of shmcfg.h without its `!h` test. */
static inline int nonull_int(const shmcfg *h, shmcfg_opt o, int64_t *ret)
{
	const struct shmcfg_view *v = (const struct shmcfg_view *)h;
	if (__builtin_expect(shmcfg__tls_patched != 0 || o >= v->nopts, 0))
		return shmcfg__get_slow(h, o, SHMCFG_INT, (uint64_t *)ret);
	for (int spin = 0; spin < SHMCFG__SPIN; spin++) {
		uint64_t cur;
		const char *slot = shmcfg__seq_begin(v, &cur);
		uint64_t val = shmcfg__seq_val(slot, o);
		uint64_t meta = shmcfg__seq_meta(slot, o);
		if (!shmcfg__seq_end(slot, cur))
			continue;
		if (__builtin_expect((meta & 0x1ff) != (uint64_t)SHMCFG_INT, 0))
			break;
		*ret = (int64_t)val;
		return 0;
	}
	return shmcfg__get_slow(h, o, SHMCFG_INT, (uint64_t *)ret);
}

LOOP(loop_nonull, {
	int64_t v;
	if (nonull_int(g_h, g_opt_x, &v) == 0)
		acc += (uint64_t)v;
})
LOOP(loop_lean_a, {
	uint64_t b;
	acc += lean_a(g_h, bench_x_opt, &b) == 0 ? b : 7;
})
LOOP(loop_lean_c, acc += lean_c(g_h, bench_x_opt))

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
	CHECK(shmcfg_schema_load(BENCH_SCHEMA_FILE, &s));
	seg_name(g_hot_name, sizeof g_hot_name, "hot");
	shmcfg_create_opts co = {.flags = SHMCFG_CREATE_FORCE | SHMCFG_CREATE_NO_ENV};
	CHECK(shmcfg_create(g_hot_name, s, &co, &g_h));
	shmcfg_schema_free(s);
	/* the generated accessors' handles are proven by the schema hash */
	if (bench_check(g_h))
		die("%s has another schema than bench_schema.h (%s): regenerate the header "
		    "(tests/cli/header.sh says how)", BENCH_SCHEMA_FILE, BENCH_SCHEMA_HASH);
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

void teardown_competitors(void)
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

static uint64_t float_bits_half(void)
{
	double h = 0.5;
	uint64_t b;
	memcpy(&b, &h, 8);
	return b;
}

#define C(k, l, f, e, g) {.key = (k), .label = (l), .loop = (f), .expect = (e), .group = (g)}
struct cand cands[] = {
	C("plain", "plain load of a global (the limit)", loop_plain, VALUE, "limits"),
	C("plainlib", "exported getter in a -fPIC .so (non-inline floor)", loop_plainlib, VALUE, NULL),
	C("inline", "shmcfg_get_int inline, handle from lookup", loop_shm_int, VALUE, "shmcfg"),
	C("inline_const", "shmcfg_get_int inline, compile-time handle", loop_shm_inline_const, VALUE, NULL),
	C("accessor", "generated accessor (shmctl header)", loop_shm_accessor, VALUE, NULL),
	C("inline_bool", "shmcfg_get_bool inline", loop_shm_bool, 1, NULL),
	C("inline_float", "shmcfg_get_float inline", loop_shm_float, 0 /* set at run time */, NULL),
	C("generation", "shmcfg_generation inline", loop_shm_generation, 0, NULL),
	C("get_slow", "shmcfg__get_slow (exported slow path)", loop_shm_slow, VALUE, NULL),
	C("get", "shmcfg_get (exported, copies a value)", loop_shm_get, VALUE, NULL),
	C("byname", "by name: shmcfg_lookup + shmcfg_get_int", loop_shm_byname, VALUE, NULL),
	C("snapshot", "snapshot acquire + get_int + release", loop_shm_snapshot, VALUE, NULL),
	C("snapshot_any", "snapshot acquire + shmcfg_snapshot_get + release", loop_shm_snapshot_any, VALUE, NULL),
	C("hash", "config hash: shmcfg_config_hash", loop_shm_hash, 1, NULL),
	C("plain8", "eight plain loads (the limit of 8 reads)", loop_plain8, 0 /* set at run time */,
	  "8 options per iteration: each figure is for all 8 reads"),
	C("batch8", "generated batched read, one stamp check", loop_batch8, 0, NULL),
	C("acc8", "8 generated accessor reads", loop_acc8, 0, NULL),
	C("snap8", "snapshot acquire + 8 typed gets + release", loop_snap8, 0, NULL),
	C("snap8_any", "snapshot acquire + 8 shmcfg_snapshot_get + release", loop_snap8_any, 0, NULL),
	C("nonull", "shmcfg_get_int inline without its NULL-handle test", loop_nonull, VALUE,
	  "experiments on the same segment (not API): what the checks cost"),
	C("lean_a", "accessor without per-read range/type/null checks", loop_lean_a, VALUE, NULL),
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
const int ncands = NCANDS;

struct cand *cand(const char *key)
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

void hot_setup_all(void)
{
	g_plain = VALUE;
	plain_set(VALUE);
	setup_hot_segment();
	setup_competitors();
	cand("inline_float")->expect = float_bits_half();
	uint64_t sum8 = 0;
	for (int k = 0; k < 8; k++) {
		shmcfg_value v;
		CHECK(shmcfg_get(g_h, opts8[k], &v));
		sum8 += value_bits(&v);
		g_plain8[k] = VALUE;
	}
	cand("plain8")->expect = 8 * VALUE;
	cand("batch8")->expect = cand("acc8")->expect = cand("snap8")->expect = cand("snap8_any")->expect = sum8;
	g_cells_off_const = ((const struct shmcfg_view *)g_h)->cells_off;
	if (g_cells_off_const != 64)
		die("the lean_c experiment assumes cells at offset 64 of a slot, not %u", g_cells_off_const);
	cand("generation")->expect = shmcfg_generation(g_h);
}

/* Median over the rounds of candidate a's paired ratio over b's: both
 * timed in the same round, each against its own bracketing plain loads. */
struct stats ratio_of(const char *a, const char *b)
{
	double *r = calloc((size_t)opt.repeats, sizeof(double));
	if (!r)
		die("out of memory");
	for (int i = 0; i < opt.repeats; i++)
		r[i] = cand(a)->ratios[i] / cand(b)->ratios[i];
	struct stats st = stats_of(r, opt.repeats);
	free(r);
	return st;
}

/* One line of the read targets: a ratio, its spread, met or not (limit 0:
 * no target, for context). */
static void target_line(const char *what, struct stats st, double limit)
{
	char sp[48];
	snprintf(sp, sizeof sp, "%.2f..%.2f", st.min, st.max);
	printf("   %-60s %6.2fx %12s  %s\n", what, st.med, sp,
	       limit <= 0 ? "" : st.med <= limit ? "met" : "MISSED");
}

/* The read targets of issue 12, from this section's rounds. */
static void hot_read_targets(void)
{
	printf("\n   Read targets (issue 12): medians over the rounds of the ratio of two paired\n"
	       "   ratios, min..max\n");
	target_line("generated accessor / bare slot seqlock (lean_c), <= 1.5x", ratio_of("accessor", "lean_c"), 1.5);
	/* Performance II: against the minimal seqlock a user would write (the
	 * seqlock row: load stamp, load value, fence, re-load stamp) */
	target_line("generated accessor / minimal seqlock (seqlock), <= 1.25x", ratio_of("accessor", "seqlock"), 1.25);
	target_line("batched read of 8 / eight plain loads, <= 6x", ratio_of("batch8", "plain8"), 6);
	target_line("generated accessor / plain load", cand("accessor")->rt, 0);
	target_line("shmcfg_get_int, compile-time handle / generated accessor", ratio_of("inline_const", "accessor"), 0);
	target_line("8 accessor reads (8 generations) / eight plain loads", ratio_of("acc8", "plain8"), 0);
	target_line("snapshot of 8 / eight plain loads", ratio_of("snap8", "plain8"), 0);
	target_line("8 accessor reads / the batched read", ratio_of("acc8", "batch8"), 0);
}

/*
 * Each round runs every candidate once, in order, each between two short
 * loops of the plain load; the candidate's ratio in that round is its time
 * per read over the mean of the two bracketing plain loads. On a shared
 * machine whose speed changes from one 10 ms to the next (another busy
 * guest on the sibling hyperthread, frequency) a paired ratio keeps what a
 * ratio of medians loses: the noise is common to both sides of the pair.
 */
void run_hot(void)
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
	hot_read_targets();
}
