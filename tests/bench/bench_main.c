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
 *  3. commits of 1, 10 and 100 changed options, paired with LMDB's write
 *     transaction of as many keys; visibility latency of a commit to a
 *     polling reader and to a blocked waiter in other processes;
 *  4. growth with 10, 1,000, 10,000, 100,000 and 1,000,000 options (the last
 *     if it fits): one-change commit (and a fresh process's first ones) next
 *     to LMDB's one-key write txn at as many keys, attach in a fresh
 *     process, lookup by name, segment bytes per option; --tsv writes them
 *     for doc/plot-growth.gp;
 *  5. the targets, met or missed.
 *
 * Files, one concern each (bench.h declares what they share):
 *  bench_main.c      settings (the command line), the machine, 5. targets, main
 *  bench_util.c      timing, output, statistics, segments, child processes
 *  bench_read.c      the things read, their read loops, 1. hot reads
 *  bench_scale.c     2. scaling
 *  bench_commit.c    schemas of N options, timed commits, 3. commits, visibility
 *  bench_growth.c    4. growth
 *  bench_callgrind.c --callgrind
 *  plainlib.c, rcu_*.c (rcu_flavour.h): the exported getter and the liburcu
 *                    read sides, in the executable and in libbenchso.so
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
#include <limits.h>
#include <lmdb.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

struct bench_settings opt = {11, 20.0, 0.3, 200, SEC_ALL, false};

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
	static const struct growth none;
	const struct growth *g1k = growth_at(1000) ? growth_at(1000) : &none;
	const struct growth *g100k = growth_at(100000) ? growth_at(100000) : &none;
	bool gr = (opt.sections & SEC_GROWTH) && g1k->run && g100k->run;
	target(gr, g100k->lookup.med < 50, "lookup by name under 50 ns at 100,000 options",
	       "%s (one random load within 16 MiB: %s)", T(g100k->lookup.med), T(g_miss_ns[2]));
	target(gr, g1k->commit.med < 20e3, "one-change commit under 20 us at 1,000 options", "%s",
	       T(g1k->commit.med));
	bool cm = opt.sections & SEC_COMMIT;
	target(cm, vis_res[1].wake.med < 100e3, "a waiter in another process woken within 100 us",
	       "median %s, p99 %s from the commit call (alone); median %s, p99 %s beside a spinning poller",
	       T(vis_res[1].wake.med), T(vis_res[1].wake.p99), T(vis_res[2].wake.med), T(vis_res[2].wake.p99));
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
		   "             [--tsv FILE] [--growth-max N]\n"
		   "       bench --callgrind\n"
		   "  --quick        fewer repeats and shorter phases (a smoke run, not for the record)\n"
		   "  --repeats R    hot-read rounds (default 11)\n"
		   "  --ms T         target milliseconds per timed loop (default 20)\n"
		   "  --only LIST    run only these sections (the targets of the others show n/a)\n"
		   "  --tsv FILE     write the growth section's rows to FILE as TSV (make bench:\n"
		   "                 tests/bench/growth.tsv; make bench-plot draws it)\n"
		   "  --growth-max N the largest schema of the growth section (default 1000000,\n"
		   "                 which runs only if /dev/shm and memory have room for it)\n"
		   "  --callgrind    instructions per read under valgrind --tool=callgrind\n"
		   "                 (valgrind from $BENCH_VALGRIND, else from PATH)\n");
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
		} else if (!strcmp(argv[i], "--tsv") && i + 1 < argc) {
			g_tsv_path = argv[++i];
		} else if (!strcmp(argv[i], "--growth-max") && i + 1 < argc) {
			char *e;
			unsigned long m = strtoul(argv[++i], &e, 10);
			if (*e || m < 10 || m > 1000000)
				die("--growth-max: 10..1000000");
			g_growth_max = (uint32_t)m;
		} else if (!strcmp(argv[i], "--attach-child")) {
			return attach_child(argc - i - 1, argv + i + 1);
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
