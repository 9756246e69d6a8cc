/*
 * shmcfg benchmark, section 3: commits of 1, 10 and 100 changed options of a
 * schema of 1,000, and the visibility latency of a commit to a polling reader
 * and to a blocked waiter in other processes. Also the schemas of N int
 * options and the timed commit that the growth and callgrind sections use.
 */
#include "config.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

void run_commits(void)
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
