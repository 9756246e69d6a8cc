/* SPDX-License-Identifier: MIT */
/*
 * shmcfg benchmark, section 2: scaling. Reads/s of 1 and 2 threads running
 * the same read loop (bench_read.c), and of 2 reader processes with and
 * without a third that commits every millisecond.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "bench_schema.h"

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
double scale_ratio[NSCALE]; /* 2-thread rate / 1-thread rate, medians */
double scale_rel[NSCALE];   /* that ratio / the plain load's, medians */
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
		if (shmcfg_txn_begin(h, &t) || shmcfg_txn_set_int(t, bench_x_opt, VALUE + (i & 1 ? 0 : 1)) ||
		    shmcfg_txn_commit(t, NULL) < 0)
			_exit(1);
		double d = now_ns() - t0;
		g_pres->commits++;
		g_pres->commit_ns += d;
		g_pres->commit_max = fmax(g_pres->commit_max, d);
	}
	/* leave bench.x as the hot reads expect it */
	shmcfg_txn *t;
	if (shmcfg_txn_begin(h, &t) || shmcfg_txn_set_int(t, bench_x_opt, VALUE) || shmcfg_txn_commit(t, NULL) < 0)
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
		if (fn == cand("inline")->loop && (g_pres->acc[i] < VALUE * g_pres->n[i] ||
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

void run_scaling(void)
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
			proc_phase(cand(ph < 2 ? "plain" : "inline")->loop, ph >= 2, ph & 1, out);
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
