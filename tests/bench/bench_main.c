/* SPDX-License-Identifier: MIT */
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
 *  5. the targets of issues 12 and 5, each measured value against its limit.
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
#include <math.h>
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

/* Filled by section 1 (bench_read.c) when it measures them: see bench.h. */
struct read_target target_accessor_vs_seqlock, target_batch8_vs_plain8;

static const char *t_time(char *b, size_t l, double x)
{
	return fmt_time(b, l, x);
}

static const char *t_ratio(char *b, size_t l, double x)
{
	snprintf(b, l, x < 10 ? "%.2fx" : x < 100 ? "%.1fx" : "%.0fx", x);
	return b;
}

static const char *t_bytes(char *b, size_t l, double x)
{
	return fmt_bytes(b, l, x);
}

static const char *t_pct(char *b, size_t l, double x)
{
	snprintf(b, l, "%.0f%%", 100 * x);
	return b;
}

enum { AT_MOST, AT_LEAST };

/*
 * One target: what, the measured value (why_na non-NULL: not measured, and
 * why), the limit (at most or at least), the verdict with the distance, and
 * an optional note on the next line.
 */
static void trow(const char *what, const char *why_na, double val, int cmp, double lim,
		 const char *(*f)(char *, size_t, double), const char *note, ...)
	__attribute__((format(printf, 7, 8)));
static void trow(const char *what, const char *why_na, double val, int cmp, double lim,
		 const char *(*f)(char *, size_t, double), const char *note, ...)
{
	char v[32] = "-", l[40], verdict[80];
	char lb[32];
	f(lb, sizeof lb, lim);
	snprintf(l, sizeof l, "%s%s", cmp == AT_MOST ? "<= " : ">= ", lb);
	if (why_na || isnan(val)) {
		snprintf(verdict, sizeof verdict, "n/a: %s", why_na ? why_na : "not measured");
	} else {
		f(v, sizeof v, val);
		bool met = cmp == AT_MOST ? val <= lim : val >= lim;
		double by = cmp == AT_MOST ? val / lim : lim / val;
		if (met)
			snprintf(verdict, sizeof verdict, "met");
		else
			snprintf(verdict, sizeof verdict, "MISSED, %s %s", t_ratio((char[24]){0}, 24, by),
				 cmp == AT_MOST ? "over" : "short");
	}
	printf("   %-56s %11s %13s   %s\n", what, v, l, verdict);
	if (note && !why_na && !isnan(val)) {
		va_list ap;
		va_start(ap, note);
		printf("      ");
		vprintf(note, ap);
		printf("\n");
		va_end(ap);
	}
}

/* A target a later issue replaced: the measured value, its old limit and
 * what replaced it, no verdict. */
static void xrow(const char *what, const char *why_na, double val, const char *was,
		 const char *(*f)(char *, size_t, double), const char *now)
{
	char v[32] = "-";
	if (!why_na && !isnan(val))
		f(v, sizeof v, val);
	printf("   %-56s %11s %13s   %s\n", what, v, was, why_na ? why_na : now);
}

static struct cand *cand_if(const char *key)
{
	for (int i = 0; i < ncands; i++)
		if (!strcmp(cands[i].key, key))
			return &cands[i];
	return NULL;
}

static const char *growth_na(uint32_t n)
{
	if (!(opt.sections & SEC_GROWTH))
		return "growth section not run";
	for (int i = 0; i < NGROWTH; i++)
		if (growth[i].n == n && !growth[i].run)
			return growth[i].skip[0] ? growth[i].skip : "size not measured";
	return NULL;
}

static void run_targets(void)
{
	printf("\n5. Targets (a benchmark: reported here, never asserted; \"over\"/\"short\": by how\n"
	       "   much the measured value misses its limit)\n\n");
	printf("   %-56s %11s %13s   %s\n", "issue 12", "measured", "limit", "verdict");
	const struct growth *g1k = growth_at(1000), *g100k = growth_at(100000), *g10 = growth_at(10);
	trow("one-change commit, 1,000 options (median)", growth_na(1000), g1k ? g1k->commit.med : NAN,
	     AT_MOST, 10e3, t_time, NULL);
	trow("one-change commit, 100,000 options (median)", growth_na(100000),
	     g100k ? g100k->commit.med : NAN, AT_MOST, 20e3, t_time, NULL);
	trow("  first 7 commits of a fresh process, 100,000 options", growth_na(100000),
	     g100k ? g100k->commit_first.med : NAN, AT_MOST, 20e3, t_time,
	     "(\"the first commits of a process are not page-fault bound\": the same limit;"
	     " their max %s)",
	     g100k ? T(g100k->commit_first.max) : "-");
	for (int i = 0; i < NGROWTH; i++) {
		char what[80];
		snprintf(what, sizeof what, "commit / LMDB one-key write txn, %s keys (paired)",
			 COUNT(growth[i].n));
		const struct growth *g = &growth[i];
		if (!g->run && (opt.sections & SEC_GROWTH) && growth[i].n > 100000)
			continue; /* an optional size: its skip is printed in section 4 */
		trow(what, growth_na(g->n), g->run ? g->ratio.med : NAN, AT_MOST, 1.0, t_ratio,
		     g->run ? "(commit %s, LMDB write %s: medians; the ratio is the median over %d pairs)"
			    : NULL,
		     T(g->commit.med), T(g->lmdb.med), g->npairs);
	}
	trow("attach in a fresh process, 100,000 options (median)", growth_na(100000),
	     g100k ? g100k->attach.med : NAN, AT_MOST, 5e6, t_time,
	     g100k ? "(its first lookup + read after the attach: %s)" : NULL,
	     g100k ? T(g100k->first_lookup.med) : "");
	trow("memory per option, 100,000 options", growth_na(100000), g100k ? g100k->bytes / 1e5 : NAN,
	     AT_MOST, 400, t_bytes, NULL);
	trow("memory of a 10-option segment, default create options", growth_na(10),
	     g10 ? g10->bytes : NAN, AT_MOST, 256 * 1024, t_bytes, NULL);

	bool hot = opt.sections & SEC_HOT;
	struct read_target *ta = &target_accessor_vs_seqlock;
	if (ta->measured) {
		trow("generated accessor / hand seqlock", NULL, ta->med, AT_MOST, 1.5, t_ratio,
		     "(%s; min..max %.2f..%.2f)", ta->how ? ta->how : "paired", ta->min, ta->max);
	} else {
		struct cand *acc = cand_if("accessor"), *lc = cand_if("lean_c"), *sq = cand_if("seqlock");
		bool have = hot && acc && lc;
		trow("generated accessor / hand seqlock (lean_c)", have ? NULL : "hot-read section not run",
		     have ? acc->rt.med / lc->rt.med : NAN, AT_MOST, 1.5, t_ratio,
		     have ? "(ratio of their paired medians to the plain load, %.2fx / %.2fx; the seqlock"
			    " in shared memory %.2fx)"
			  : NULL,
		     have ? acc->rt.med : 0, have ? lc->rt.med : 0, have && sq ? sq->rt.med : NAN);
	}
	struct read_target *tb = &target_batch8_vs_plain8;
	if (tb->measured) {
		trow("batched read of 8 options / eight plain loads", NULL, tb->med, AT_MOST, 6.0, t_ratio,
		     "(%s; min..max %.2f..%.2f)", tb->how ? tb->how : "paired", tb->min, tb->max);
	} else {
		struct cand *b8 = cand_if("batch8"), *p8 = cand_if("plain8");
		bool have = hot && b8 && p8;
		trow("batched read of 8 options / eight plain loads",
		     have ? NULL : !hot ? "hot-read section not run" : "no batched-read row in section 1 yet",
		     have ? b8->rt.med / p8->rt.med : NAN, AT_MOST, 6.0, t_ratio,
		     have ? "(ratio of their paired medians to the plain load)" : NULL);
	}

	printf("\n   %-56s %11s %13s   %s\n", "earlier targets (issue 5)", "measured", "limit", "verdict");
	const char *no_hot = hot ? NULL : "hot-read section not run";
	double inl = hot ? cand("inline")->rt.med : NAN;
	bool sc = opt.sections & SEC_SCALE;
	trow("2-thread read scaling, relative to the plain load's", sc ? NULL : "scaling section not run",
	     sc ? scale_rel[2] : NAN, AT_LEAST, 0.9, t_pct,
	     sc ? "(%.2fx vs %.2fx; accessor %.0f%%)" : NULL, scale_ratio[2], scale_ratio[0],
	     100 * scale_rel[3]);
	bool cm = opt.sections & SEC_COMMIT;
	trow("waiter in another process woken, median",
	     cm ? NULL : "commit section not run", cm ? vis_res[1].wake.med : NAN, AT_MOST, 100e3, t_time,
	     cm ? "(from the commit call; p99 %s alone; median %s, p99 %s beside a spinning poller)" : NULL,
	     T(vis_res[1].wake.p99), T(vis_res[2].wake.med), T(vis_res[2].wake.p99));

	/* issue 5's other read targets, which issue 26 replaced with limits
	 * against the peers and the floor (section 6): shown, not judged */
	printf("\n   %-56s %11s %13s   %s\n", "replaced by issue 26 (its rows in section 6)", "measured",
	       "was", "now");
	xrow("inline by-handle read / plain load", no_hot, inl, "<= 1.50x", t_ratio,
	     "accessor <= 1.25x a minimal seqlock; snapshot <= 10x a plain load");
	xrow("pthread_rwlock read / inline read", no_hot, hot ? cand("rwlock")->rt.med / inl : NAN, ">= 10.0x",
	     t_ratio, "the reads' limits above");
	xrow("LMDB get in an open read txn / inline read", no_hot, hot ? cand("lmdb_get")->rt.med / inl : NAN,
	     ">= 100x", t_ratio, "the reads' limits above");
	xrow("lookup by name, 100,000 options (median)", growth_na(100000), g100k ? g100k->lookup.med : NAN,
	     "<= 50.0 ns", t_time, "<= 1.5x one random load within 16 MiB");
}

/* ------------------------------------------------------------------ */
/* 6. Against the best peer and the floor (issue 26)                  */
/* ------------------------------------------------------------------ */

/*
 * One figure: shmcfg's value, the best peer's (NULL peer: none), the ratio
 * to it, the ratio to the floor, and the limit the issue sets on one of the
 * two (on_floor: the floor's; lim 0: none, for context).
 */
static void prow(const char *what, double v, const char *peer, double pv, double x_peer, double x_floor,
		 bool on_floor, double lim)
{
	char xp[16] = "-", xf[16] = "-", tg[24] = "", ahead[8] = "-", verdict[32] = "";
	if (peer) {
		t_ratio(xp, sizeof xp, x_peer);
		snprintf(ahead, sizeof ahead, "%s", x_peer < 1 ? "yes" : "no");
	}
	if (!isnan(x_floor))
		t_ratio(xf, sizeof xf, x_floor);
	if (lim > 0) {
		double x = on_floor ? x_floor : x_peer;
		snprintf(tg, sizeof tg, "%s <= %gx", on_floor ? "floor" : "peer", lim);
		if (isnan(x))
			snprintf(verdict, sizeof verdict, "n/a");
		else if (x <= lim)
			snprintf(verdict, sizeof verdict, "met");
		else
			snprintf(verdict, sizeof verdict, "MISSED, %.2fx over", x / lim);
	}
	printf("   %-44s %9s  %-27s %9s %7s %-6s %8s  %-12s %s\n", what, T(v), peer ? peer : "-",
	       peer ? T(pv) : "-", xp, ahead, xf, tg, verdict);
}

static void run_peers(void)
{
	printf("\n6. Against the best peer and the floor (issue 26): the audit's figures from this\n"
	       "   run. \"x peer\": shmcfg over the peer a user would pick instead (commits: the\n"
	       "   median over the pairs; reads: the median over the rounds of the paired ratios);\n"
	       "   \"x floor\": over the physical floor (reads: a plain load, eight for 8 reads, one\n"
	       "   random load for a lookup; commits: a process-shared mutex + memcpy of one value,\n"
	       "   section 3); \"target\": the issue's limit, on the column it names.\n\n");
	printf("   %-44s %9s  %-27s %9s %7s %-6s %8s  %-12s %s\n", "figure", "shmcfg", "best peer", "peer",
	       "x peer", "ahead?", "x floor", "target", "verdict");
	bool cm = opt.sections & SEC_COMMIT, gr = opt.sections & SEC_GROWTH, hot = opt.sections & SEC_HOT;
	double fl = cm ? commit_floor_ns : NAN;
	/* the steady state's pairs (the target's), then those right after
	 * create, before the warm-up (section 4) */
	for (int early = 0; gr && early < 2; early++)
		for (int i = 0; i < NGROWTH; i++) {
			const struct growth *g = &growth[i];
			if (!g->run)
				continue;
			char what[64];
			snprintf(what, sizeof what, early ? "  ... its first pairs after create, %s" : "one-change commit, %s options",
				 COUNT(g->n));
			const struct stats *c = early ? &g->commit_early : &g->commit;
			prow(what, c->med, "LMDB one-key write txn", (early ? g->lmdb_early : g->lmdb).med,
			     (early ? g->ratio_early : g->ratio).med, c->med / fl, false, early ? 0 : 1.0);
		}
	static const uint32_t ks[3] = {1, 10, 100};
	for (int j = 1; cm && j < 3; j++) {
		char what[64], peer[40];
		snprintf(what, sizeof what, "%u-change commit, 1,000 options", ks[j]);
		snprintf(peer, sizeof peer, "LMDB %u-key write txn", ks[j]);
		prow(what, commit_st[j].med, peer, commit_lmdb[j].med, commit_ratio[j].med, commit_st[j].med / fl,
		     false, ks[j] == 100 ? 1.0 : 0);
	}
	static const uint32_t firsts[3] = {1000, 10000, 100000};
	for (int i = 0; gr && i < 3; i++) {
		const struct growth *g = growth_at(firsts[i]);
		if (!g)
			continue;
		char what[64];
		snprintf(what, sizeof what, "first 7 commits of a fresh process, %s", COUNT(g->n));
		/* the peer: fresh LMDB processes' first 7 write txns; in the
		 * floor's column, each one's first 7 over its own steady state
		 * (the one-change rows above): the limit is on shmcfg's */
		double mine = g->commit_first.med / g->commit.med, peer = g->lmdb_first.med / g->lmdb.med;
		double vs = g->commit_first.med / g->lmdb_first.med;
		printf("   %-44s %9s  %-27s %9s %6.2fx %-6s %8s  %-12s %s\n", what, T(g->commit_first.med),
		       "LMDB's, a fresh process", T(g->lmdb_first.med), vs, vs <= 1 ? "yes" : "no",
		       t_ratio((char[16]){0}, 16, mine), "steady <= 2x", mine <= 2 ? "met" : "MISSED");
		double pf = g->commit_first_prefault.med / g->commit.med;
		char att[48];
		snprintf(att, sizeof att, "(its attach: %s)", T(g->attach_prefault.med));
		printf("   %-44s %9s  %-27s %9s %6.2fx %-6s %8s  %-12s %s %s\n", "  ... attached with SHMCFG_ATTACH_PREFAULT",
		       T(g->commit_first_prefault.med), "LMDB's, a fresh process", T(g->lmdb_first.med),
		       g->commit_first_prefault.med / g->lmdb_first.med,
		       g->commit_first_prefault.med <= g->lmdb_first.med ? "yes" : "no",
		       t_ratio((char[16]){0}, 16, pf), "steady <= 2x", pf <= 2 ? "met" : "MISSED", att);
		printf("   %-44s %9s  %-27s %9s %7s %-6s %8s  %-12s %s\n", "  ... LMDB's, over its own steady state",
		       T(g->lmdb_first.med), "(LMDB's steady state)", T(g->lmdb.med), "-", "-",
		       t_ratio((char[16]){0}, 16, peer), "(reference)", peer <= 2 ? "within 2x" : "over 2x");
	}
	if (hot) {
		struct cand *acc = cand("accessor"), *inl = cand("inline"), *sq = cand("seqlock"),
			    *sn = cand("snapshot"), *bp = cand("rcu_bp"), *s8 = cand("snap8"), *p8 = cand("plain8");
		prow("generated accessor", acc->st.med, "minimal seqlock (seqlock)", sq->st.med,
		     ratio_of("accessor", "seqlock").med, acc->rt.med, false, 1.25);
		prow("shmcfg_get_int inline, handle from lookup", inl->st.med, "minimal seqlock (seqlock)", sq->st.med,
		     ratio_of("inline", "seqlock").med, inl->rt.med, false, 0);
		prow("snapshot acquire + get_int + release", sn->st.med, "urcu-bp read section, inline", bp->st.med,
		     ratio_of("snapshot", "rcu_bp").med, sn->rt.med, true, 10);
		prow("snapshot acquire + 8 typed gets + release", s8->st.med, NULL, p8->st.med, NAN,
		     ratio_of("snap8", "plain8").med, true, 15);
	}
	const struct growth *g100k = growth_at(100000);
	if (g100k)
		prow("lookup by name, 100,000 options", g100k->lookup.med, NULL, NAN, NAN,
		     g100k->lookup.med / g_miss_ns[2], true, 1.5);
	printf("   The Python figures (patch(), a read under a patch, the torch bridge) follow\n"
	       "   from make bench-python and bench-torch, in the same make bench.\n");
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
			return attach_child(argc - i - 1, argv + i + 1, 0);
		} else if (!strcmp(argv[i], "--prefault-child")) {
			return attach_child(argc - i - 1, argv + i + 1, SHMCFG_ATTACH_PREFAULT);
		} else if (!strcmp(argv[i], "--lmdb-child")) {
			return lmdb_child(argc - i - 1, argv + i + 1);
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
	run_peers();
	teardown_competitors();
	shmcfg_close(g_h);
	unlink_segments();
	printf("\nbench: done in %.1f s%s\n", (now_ns() - t0) / 1e9,
	       failures ? "; SOME READS WERE BROKEN (see stderr)" : "");
	return failures ? 1 : 0;
}
