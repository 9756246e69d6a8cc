/* SPDX-License-Identifier: MIT */
/*
 * shmcfg benchmark, section 3: commits of 1, 10 and 100 changed options of a
 * schema of 1,000, each paired with LMDB's write transaction of as many keys
 * in an environment of 1,000 keys, and the visibility latency of a commit to
 * a polling reader and to a blocked waiter in other processes. Also the
 * schemas of N int options, the timed commit and the LMDB write peer that
 * the growth and callgrind sections use.
 */
#include "config.h"

#include <errno.h>
#include <lmdb.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bench.h"

/* ------------------------------------------------------------------ */
/* Schemas of N options (growth, commits)                             */
/* ------------------------------------------------------------------ */

void opt_name(char *buf, size_t len, uint32_t i)
{
	snprintf(buf, len, "group%03u.option_%06u", i / 1000, i);
}

shmcfg_schema *schema_of(uint32_t n)
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
double timed_commit(shmcfg *h, uint32_t k, int64_t value)
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

/* One transaction setting option @p o to @p value; returns its time. */
double timed_commit_at(shmcfg *h, shmcfg_opt o, int64_t value)
{
	double t0 = now_ns();
	shmcfg_txn *t;
	CHECK(shmcfg_txn_begin(h, &t));
	CHECK(shmcfg_txn_set_int(t, o, value));
	uint64_t gen;
	int r = shmcfg_txn_commit(t, &gen);
	double d = now_ns() - t0;
	CHECK(r);
	if (r == 1)
		fail("a commit that changes a value published nothing");
	return d;
}

/* ------------------------------------------------------------------ */
/* The LMDB write peer                                                */
/* ------------------------------------------------------------------ */

#define LMDB_CHECK(call, p)                                                                \
	do {                                                                               \
		int r_ = (call);                                                           \
		if (r_)                                                                    \
			die("%s:%d: %s: %s (LMDB environment in %s)", __FILE__, __LINE__, #call, \
			    mdb_strerror(r_), (p)->dir);                                   \
	} while (0)

/* ~50 bytes a key once filled (22-byte names, 8-byte values, node and page
 * headers); room for the copies of pages that write txns make. With
 * MDB_WRITEMAP the file is truncated to this size: sparse. */
static size_t lmdb_map_bytes(uint32_t n)
{
	return ((size_t)n * 256 + ((size_t)16 << 20)) & ~(((size_t)1 << 20) - 1);
}

void lmdb_peer_open(struct lmdb_peer *p, uint32_t n)
{
	memset(p, 0, sizeof *p);
	p->n = n;
	make_tmpdir(p->dir, sizeof p->dir, "lmdb");
	double t0 = now_ns();
	MDB_env *env;
	LMDB_CHECK(mdb_env_create(&env), p);
	p->env = env;
	size_t map = lmdb_map_bytes(n);
	LMDB_CHECK(mdb_env_set_mapsize(env, map), p);
	LMDB_CHECK(mdb_env_open(env, p->dir, MDB_WRITEMAP | MDB_NOSYNC, 0600), p);
	MDB_txn *txn;
	MDB_dbi dbi;
	LMDB_CHECK(mdb_txn_begin(env, NULL, 0, &txn), p);
	LMDB_CHECK(mdb_dbi_open(txn, NULL, 0, &dbi), p);
	char name[64];
	for (uint32_t i = 0; i < n; i++) {
		opt_name(name, sizeof name, i); /* in increasing order: append */
		int64_t v = i;
		MDB_val k = {strlen(name), name}, d = {sizeof v, &v};
		LMDB_CHECK(mdb_put(txn, dbi, &k, &d, MDB_APPEND), p);
	}
	LMDB_CHECK(mdb_txn_commit(txn), p);
	p->dbi = dbi;
	p->fill_ns = now_ns() - t0;
	MDB_envinfo ei;
	MDB_stat st;
	LMDB_CHECK(mdb_env_info(env, &ei), p);
	LMDB_CHECK(mdb_env_stat(env, &st), p);
	p->bytes = (double)(ei.me_last_pgno + 1) * st.ms_psize;
	if (st.ms_entries != n)
		fail("the LMDB peer does not hold the keys it was filled with");
}

/* One write transaction putting keys [k0, k0 + k) (mod n, k <= 128) to
 * @p value; the keys are formatted before the clock starts, as shmcfg's
 * handles are known before its transaction. */
double lmdb_peer_write(struct lmdb_peer *p, uint32_t k0, uint32_t k, int64_t value)
{
	static char names[128][32];
	MDB_val keys[128];
	if (k > 128)
		die("lmdb_peer_write: %u keys, at most 128", k);
	for (uint32_t i = 0; i < k; i++) {
		opt_name(names[i], sizeof names[i], (k0 + i) % p->n);
		keys[i] = (MDB_val){strlen(names[i]), names[i]};
	}
	double t0 = now_ns();
	MDB_txn *txn;
	LMDB_CHECK(mdb_txn_begin(p->env, NULL, 0, &txn), p);
	for (uint32_t i = 0; i < k; i++) {
		MDB_val d = {sizeof value, &value};
		LMDB_CHECK(mdb_put(txn, p->dbi, &keys[i], &d, 0), p);
	}
	LMDB_CHECK(mdb_txn_commit(txn), p);
	return now_ns() - t0;
}

/* Open the environment another process filled in @p dir (n keys), as a
 * fresh process of the growth section does; closing it leaves the files. */
void lmdb_peer_reopen(struct lmdb_peer *p, const char *dir, uint32_t n)
{
	memset(p, 0, sizeof *p);
	p->n = n;
	p->borrowed = true;
	snprintf(p->dir, sizeof p->dir, "%s", dir);
	MDB_env *env;
	LMDB_CHECK(mdb_env_create(&env), p);
	p->env = env;
	LMDB_CHECK(mdb_env_set_mapsize(env, lmdb_map_bytes(n)), p);
	LMDB_CHECK(mdb_env_open(env, p->dir, MDB_WRITEMAP | MDB_NOSYNC, 0600), p);
	MDB_txn *txn;
	MDB_dbi dbi;
	LMDB_CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn), p);
	LMDB_CHECK(mdb_dbi_open(txn, NULL, 0, &dbi), p);
	mdb_txn_abort(txn);
	p->dbi = dbi;
}

void lmdb_peer_close(struct lmdb_peer *p)
{
	if (p->env) {
		mdb_env_close(p->env);
		p->env = NULL;
		if (!p->borrowed)
			rm_tmpdir(p->dir);
	}
}

/* ------------------------------------------------------------------ */
/* 3. Commits and visibility                                          */
/* ------------------------------------------------------------------ */

struct stats commit_st[3], commit_lmdb[3], commit_ratio[3];
static double commit_rate[3];
double commit_floor_ns;

struct vis {
	_Atomic int ready, stop;
	uint64_t base;           /* generation before the first timed commit */
	double call[1024], ret[1024], poll[1024], wake[1024];
};
static struct vis *g_vis;

struct vis_result vis_res[3];

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

/*
 * What no commit can beat (issue 26): the writer serialised by a
 * process-shared mutex in shared memory and one value copied in. The median
 * over the rounds of ns per lock + memcpy + unlock.
 */
static double commit_floor(void)
{
	struct floor_shm {
		pthread_mutex_t m;
		int64_t value;
	} *f = shared_alloc(sizeof *f);
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutex_init(&f->m, &a);
	pthread_mutexattr_destroy(&a);
	long n = opt.quick ? 20000 : 200000;
	double *r = calloc((size_t)opt.repeats, sizeof(double));
	if (!r)
		die("out of memory");
	for (int k = 0; k < opt.repeats; k++) {
		double t0 = now_ns();
		for (long i = 0; i < n; i++) {
			int64_t v = i;
			pthread_mutex_lock(&f->m);
			memcpy(&f->value, &v, sizeof v);
			BENCH_BARRIER();
			pthread_mutex_unlock(&f->m);
		}
		r[k] = (now_ns() - t0) / (double)n;
	}
	double med = stats_of(r, opt.repeats).med;
	free(r);
	pthread_mutex_destroy(&f->m);
	munmap(f, sizeof *f);
	return med;
}

/*
 * Commits of k = 1, 10 and 100 changed options at 1,000 options, each paired
 * with LMDB's write transaction of the same k keys at 1,000 keys: the two run
 * back to back, in alternating order, and each pair gives a ratio, so that
 * the machine's speed of the moment divides out (as the hot reads' paired
 * ratios). Before the timed pairs, a warm-up of as many commits (and LMDB
 * writes) as the segment has slots: a process's first commits into each slot
 * fault its pages in (the growth section reports those apart).
 */
void run_commits(void)
{
	printf("\n3. Commits (a schema of 1,000 int options; one transaction = begin, k sets,\n"
	       "   commit; latency median and p99, commits/s = transactions / total time), each\n"
	       "   paired with LMDB's write transaction of the same k keys (1,000 8-byte values,\n"
	       "   MDB_WRITEMAP | MDB_NOSYNC): \"x LMDB\" is the median over the pairs of\n"
	       "   shmcfg's time over LMDB's, and its min..max\n\n");
	char name[64];
	seg_name(name, sizeof name, "commit");
	shmcfg_schema *s = schema_of(1000);
	shmcfg_create_opts co = {.flags = SHMCFG_CREATE_FORCE | SHMCFG_CREATE_NO_ENV};
	shmcfg *h;
	CHECK(shmcfg_create(name, s, &co, &h));
	shmcfg_schema_free(s);
	struct lmdb_peer lp;
	lmdb_peer_open(&lp, 1000);
	shmcfg_info info;
	CHECK(shmcfg_stat(h, &info));
	static const uint32_t ks[3] = {1, 10, 100};
	printf("   %-16s %10s %10s %10s %10s %11s %10s %8s %12s\n", "changed options", "median", "p99", "max",
	       "commits/s", "LMDB median", "LMDB p99", "x LMDB", "min..max");
	int64_t value = 1000000;
	for (uint32_t w = 0; w < info.nslots; w++) { /* warm-up */
		timed_commit(h, 1, value);
		lmdb_peer_write(&lp, 0, 1, value++);
	}
	for (int j = 0; j < 3; j++) {
		int m = opt.quick ? 50 : 400;
		double *v = calloc((size_t)m, sizeof(double));
		double *l = calloc((size_t)m, sizeof(double));
		double *q = calloc((size_t)m, sizeof(double));
		if (!v || !l || !q)
			die("out of memory");
		double total = 0, both = 0;
		int i;
		for (i = 0; i < m && both < (opt.quick ? 0.15e9 : 0.8e9); i++) {
			if (i & 1) {
				l[i] = lmdb_peer_write(&lp, 0, ks[j], value);
				v[i] = timed_commit(h, ks[j], value);
			} else {
				v[i] = timed_commit(h, ks[j], value);
				l[i] = lmdb_peer_write(&lp, 0, ks[j], value);
			}
			value++;
			q[i] = v[i] / l[i];
			total += v[i];
			both += v[i] + l[i];
		}
		commit_rate[j] = i / (total / 1e9);
		commit_st[j] = stats_of(v, i);
		commit_lmdb[j] = stats_of(l, i);
		commit_ratio[j] = stats_of(q, i);
		char label[40], rs[40];
		snprintf(label, sizeof label, "%u", ks[j]);
		snprintf(rs, sizeof rs, "%.*f..%.*f", commit_ratio[j].min < 10 ? 2 : 0, commit_ratio[j].min,
			 commit_ratio[j].max < 10 ? 2 : commit_ratio[j].max < 100 ? 1 : 0, commit_ratio[j].max);
		printf("   %-16s %10s %10s %10s %10s %11s %10s %7.2fx %12s\n", label, T(commit_st[j].med),
		       T(commit_st[j].p99), T(commit_st[j].max), RATE(commit_rate[j]), T(commit_lmdb[j].med),
		       T(commit_lmdb[j].p99), commit_ratio[j].med, rs);
		free(v);
		free(l);
		free(q);
	}
	printf("   Before the timed pairs, %u warm-up commits and LMDB writes (one per slot).\n"
	       "   The LMDB environment is in %.*s.\n",
	       info.nslots, (int)(strrchr(lp.dir, '/') - lp.dir), lp.dir);
	commit_floor_ns = commit_floor();
	printf("   The floor of a commit (issue 26): a process-shared pthread mutex in shared\n"
	       "   memory, locked, one 8-byte value copied in, unlocked: %s (median of %d rounds).\n",
	       T(commit_floor_ns), opt.repeats);
	lmdb_peer_close(&lp);
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
