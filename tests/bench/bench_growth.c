/* SPDX-License-Identifier: MIT */
/*
 * shmcfg benchmark, section 4: growth. Schemas of 10, 1,000, 10,000, 100,000
 * and (if the machine has the room) 1,000,000 int options, and at each size:
 *  - the object's size (shmcfg_stat) and its bytes per option;
 *  - attach in a fresh process (fork + exec of this program, which has not
 *    touched the segment), its first lookup + read, and its first
 *    GROWTH_FIRST_COMMITS one-change commits (page-fault bound so far);
 *  - lookup by name, random names (and the limit of one, a dependent load of
 *    a random cache line);
 *  - one-change commits of this process after a warm-up, each paired with
 *    LMDB's one-key write transaction at the same number of keys;
 *  - the schema build and shmcfg_create.
 * Repetitions fall at the large sizes to bound the run time; the table's
 * last row says how many were made. --tsv FILE writes the rows as TSV,
 * which doc/plot-growth.gp draws (make bench-plot).
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

/* ------------------------------------------------------------------ */
/* 4. Growth                                                          */
/* ------------------------------------------------------------------ */

struct growth growth[NGROWTH] = {{.n = 10}, {.n = 1000}, {.n = 10000}, {.n = 100000}, {.n = 1000000}};
const char *g_tsv_path;
uint32_t g_growth_max = 1000000;

const struct growth *growth_at(uint32_t n)
{
	for (int i = 0; i < NGROWTH; i++)
		if (growth[i].n == n && growth[i].run)
			return &growth[i];
	return NULL;
}

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
	return *s;
}

__attribute__((noinline)) uint64_t lookup_loop(shmcfg *h, char **names, const uint32_t *idx, long m)
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

/*
 * Repetitions at n options: the most and the fewest of each kind, and the
 * time after which no more than the fewest are made, set per size to bound
 * the run. The largest size gets the fewest: its prefaulting fresh process
 * attaches in ~35 ms (100,000 options: ~3.5 ms), its commits cost ~1 us.
 * At 100,000 options 21 fresh processes of each kind and up to 201 pairs
 * (at least 21, the first pairs after create too): with 5 processes (35
 * commits) and 21 pairs, runs of one tree put its fresh processes' first
 * commits at 1.50-2.65x the steady state, with 21 and 201 at 1.50-1.77x
 * (doc/benchmarks.md, session 42). At 1,000,000, 7 and up to 51 (3 and 7
 * when a commit there took milliseconds).
 */
struct reps {
	int pairs_max, pairs_min;  /* commit + LMDB write pairs */
	int procs_max, procs_min;  /* fresh processes */
	double budget_ns;          /* for each of the two */
	int lookup_rounds;
	long lookups;              /* per round */
};

static struct reps reps_for(uint32_t n)
{
	if (opt.quick) {
		if (n <= 10000)
			return (struct reps){31, 11, 3, 3, 0.1e9, 3, 100000};
		if (n <= 100000)
			return (struct reps){7, 5, 2, 2, 0.2e9, 3, 100000};
		return (struct reps){3, 3, 1, 1, 0.5e9, 1, 100000};
	}
	if (n <= 1000)
		return (struct reps){201, 21, 11, 5, 1e9, 5, 1000000};
	if (n <= 10000)
		return (struct reps){101, 21, 7, 5, 1e9, 5, 1000000};
	if (n <= 100000)
		return (struct reps){201, 21, 21, 7, 1.5e9, 5, 1000000};
	return (struct reps){51, 7, 7, 3, 3e9, 3, 1000000};
}

/* ------------------------------------------------------------------ */
/* The fresh process                                                  */
/* ------------------------------------------------------------------ */

/* A fresh process's arguments after its mode: NAME-or-DIR N SEED VALUE FD */
struct child_args {
	const char *where;
	uint32_t n;
	uint64_t rs;
	int64_t value;
	int fd;
};

static struct child_args child_args(const char *mode, int argc, char **argv)
{
	if (argc != 5)
		die("%s NAME N SEED VALUE FD", mode);
	struct child_args a = {argv[0], (uint32_t)strtoul(argv[1], NULL, 10), strtoull(argv[2], NULL, 10) | 1,
			       strtoll(argv[3], NULL, 10), atoi(argv[4])};
	if (!a.n)
		die("%s: no options", mode);
	return a;
}

/* Write a fresh process's figures on fd: "first second commit..." (ns). */
static void child_report(int fd, double first, double second, const double c[GROWTH_FIRST_COMMITS])
{
	char line[64 * (GROWTH_FIRST_COMMITS + 2)];
	int len = snprintf(line, sizeof line, "%.0f %.0f", first, second);
	for (int i = 0; i < GROWTH_FIRST_COMMITS; i++)
		len += snprintf(line + len, sizeof line - (size_t)len, " %.0f", c[i]);
	len += snprintf(line + len, sizeof line - (size_t)len, "\n");
	if (write(fd, line, (size_t)len) != len)
		die("fresh process: write: %s", strerror(errno));
}

/*
 * bench --attach-child NAME N SEED VALUE FD: attach the segment NAME of N
 * options (--prefault-child: with SHMCFG_ATTACH_PREFAULT, as a long-lived
 * writer would), look one random option up by name and read it, then make
 * GROWTH_FIRST_COMMITS one-change commits of random options (values from
 * VALUE on); write "attach lookup commit..." (ns) on FD. Run by fork + exec
 * (fresh_process), so nothing of the segment or the library was touched
 * before the attach.
 */
int attach_child(int argc, char **argv, unsigned flags)
{
	struct child_args a = child_args(flags ? "--prefault-child" : "--attach-child", argc, argv);
	const char *name = a.where;
	uint32_t n = a.n;
	uint64_t rs = a.rs;
	int64_t value = a.value;

	double t0 = now_ns();
	shmcfg *h;
	int r = shmcfg_attach(name, flags, NULL, &h);
	double attach = now_ns() - t0;
	if (r)
		die("fresh process: shmcfg_attach(%s): %s (%s)", name, shmcfg_strerror(r), shmcfg_errdetail());

	char oname[64];
	uint32_t want = (uint32_t)(xorshift(&rs) % n);
	opt_name(oname, sizeof oname, want);
	t0 = now_ns();
	shmcfg_opt o;
	int64_t v = 0;
	r = shmcfg_lookup(h, oname, &o);
	if (r == 0)
		r = shmcfg_get_int(h, o, &v);
	double lookup = now_ns() - t0;
	sink += (uint64_t)v;
	if (r != 0 || o != want)
		die("fresh process: lookup + read of %s: %d, handle %u", oname, r, o);

	double c[GROWTH_FIRST_COMMITS];
	for (int i = 0; i < GROWTH_FIRST_COMMITS; i++)
		c[i] = timed_commit_at(h, (shmcfg_opt)(xorshift(&rs) % n), value + i);
	shmcfg_close(h);
	child_report(a.fd, attach, lookup, c);
	return 0;
}

/*
 * bench --lmdb-child DIR N SEED VALUE FD: the peer's fresh process. Open the
 * LMDB environment in DIR (N keys, filled by the bench), then make
 * GROWTH_FIRST_COMMITS one-key write transactions of random keys, as
 * attach_child makes its commits; write "open 0 commit..." (ns) on FD.
 */
int lmdb_child(int argc, char **argv)
{
	struct child_args a = child_args("--lmdb-child", argc, argv);
	double t0 = now_ns();
	struct lmdb_peer lp;
	lmdb_peer_reopen(&lp, a.where, a.n);
	double open = now_ns() - t0;
	double c[GROWTH_FIRST_COMMITS];
	for (int i = 0; i < GROWTH_FIRST_COMMITS; i++)
		c[i] = lmdb_peer_write(&lp, (uint32_t)(xorshift(&a.rs) % a.n), 1, a.value + i);
	lmdb_peer_close(&lp);
	child_report(a.fd, open, 0, c);
	return 0;
}

/* Run one fresh process of @p mode ("--attach-child" on the segment @p
 * name, "--lmdb-child" on the LMDB directory @p name); its figures in out[]
 * (attach or open, lookup, the commits). */
static void fresh_process(const char *mode, const char *name, uint32_t n, uint64_t seed, int64_t value,
			  double out[GROWTH_FIRST_COMMITS + 2])
{
	int fds[2];
	if (pipe(fds))
		die("pipe: %s", strerror(errno));
	char ns[16], ss[24], vs[24], fs[16];
	snprintf(ns, sizeof ns, "%u", n);
	snprintf(ss, sizeof ss, "%llu", (unsigned long long)seed);
	snprintf(vs, sizeof vs, "%lld", (long long)value);
	snprintf(fs, sizeof fs, "%d", fds[1]);
	const char *self = self_exe();
	fflush(stdout);
	fflush(stderr);
	pid_t p = fork();
	if (p < 0)
		die("fork: %s", strerror(errno));
	if (p == 0) {
		close(fds[0]);
		execl(self, self, mode, name, ns, ss, vs, fs, (char *)NULL);
		fprintf(stderr, "bench: exec %s: %s\n", self, strerror(errno));
		_exit(127);
	}
	close(fds[1]);
	char buf[1024];
	size_t got = 0;
	for (;;) {
		ssize_t r = read(fds[0], buf + got, sizeof buf - 1 - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	buf[got] = 0;
	close(fds[0]);
	wait_child(p);
	char *q = buf;
	for (int i = 0; i < GROWTH_FIRST_COMMITS + 2; i++) {
		char *e;
		out[i] = strtod(q, &e);
		if (e == q) {
			fail("a fresh process of the growth section reported nothing");
			out[i] = NAN;
		}
		q = e;
	}
}

/* ------------------------------------------------------------------ */
/* One size                                                           */
/* ------------------------------------------------------------------ */

struct pairs {
	int n;
	struct stats commit, lmdb, ratio; /* ratio: per pair, commit / LMDB write */
};

/*
 * Up to max_n (at least min_n, then while within budget_ns) pairs of a
 * one-change commit and an LMDB one-key write of the same random option and
 * key (from *rs), in turn first.
 */
static struct pairs time_pairs(shmcfg *h, struct lmdb_peer *lp, uint32_t n, int max_n, int min_n, double budget_ns,
			       uint64_t *rs, int64_t *value)
{
	double *v = calloc((size_t)max_n, sizeof(double));
	double *l = calloc((size_t)max_n, sizeof(double));
	double *q = calloc((size_t)max_n, sizeof(double));
	if (!v || !l || !q)
		die("out of memory");
	int i = 0;
	double t0 = now_ns();
	while (i < max_n && (i < min_n || now_ns() - t0 < budget_ns)) {
		uint32_t o = (uint32_t)(xorshift(rs) % n);
		if (i & 1) {
			l[i] = lmdb_peer_write(lp, o, 1, *value);
			v[i] = timed_commit_at(h, o, *value);
		} else {
			v[i] = timed_commit_at(h, o, *value);
			l[i] = lmdb_peer_write(lp, o, 1, *value);
		}
		++*value;
		q[i] = v[i] / l[i];
		i++;
	}
	struct pairs p = {i, stats_of(v, i), stats_of(l, i), stats_of(q, i)};
	free(v);
	free(l);
	free(q);
	return p;
}

static void growth_one(struct growth *g)
{
	struct reps rp = reps_for(g->n);
	double t0 = now_ns();
	shmcfg_schema *s = schema_of(g->n);
	g->build_ns = now_ns() - t0;
	char name[64];
	seg_name(name, sizeof name, "growth");
	shmcfg_create_opts co = {.flags = SHMCFG_CREATE_FORCE | SHMCFG_CREATE_NO_ENV};
	shmcfg *h;
	t0 = now_ns();
	int r = shmcfg_create(name, s, &co, &h);
	g->create_ns = now_ns() - t0;
	shmcfg_schema_free(s);
	if (r == -ENOSPC || r == -ENOMEM) {
		snprintf(g->skip, sizeof g->skip, "shmcfg_create: %s (%s)", shmcfg_strerror(r), shmcfg_errdetail());
		return;
	}
	CHECK(r);
	shmcfg_info info;
	CHECK(shmcfg_stat(h, &info));
	g->bytes = (double)info.size;

	struct lmdb_peer lp;
	lmdb_peer_open(&lp, g->n);
	g->lmdb_fill_ns = lp.fill_ns;
	g->lmdb_bytes = lp.bytes;

	/* fresh processes: attach, first lookup, first commits; of each kind
	 * (0: the default attach, 1: SHMCFG_ATTACH_PREFAULT, 2: LMDB) */
	static const char *const kinds[3] = {"--attach-child", "--prefault-child", "--lmdb-child"};
	double *att[2], *fl = calloc((size_t)rp.procs_max, sizeof(double)), *fc[3];
	int nfc[3] = {0, 0, 0};
	for (int k = 0; k < 3; k++)
		if (!(fc[k] = calloc((size_t)rp.procs_max * GROWTH_FIRST_COMMITS, sizeof(double))) ||
		    (k < 2 && !(att[k] = calloc((size_t)rp.procs_max, sizeof(double)))))
			die("out of memory");
	if (!fl)
		die("out of memory");
	int np = 0;
	int64_t value = 1000000;
	t0 = now_ns();
	/* one process of each kind (the same random keys), in each of the six
	 * orders in turn: each kind after each other as often (one after the
	 * LMDB process finds the caches its environment left: a rotation alone
	 * put the default attach there twice in three rounds, ~20% slower) */
	static const int orders[6][3] = {{0, 1, 2}, {1, 2, 0}, {2, 0, 1}, {0, 2, 1}, {2, 1, 0}, {1, 0, 2}};
	while (np < rp.procs_max && (np < rp.procs_min || now_ns() - t0 < rp.budget_ns)) {
		uint64_t seed = 0x9e3779b97f4a7c15ull + (uint64_t)np * 7919;
		for (int j = 0; j < 3; j++) {
			int k = orders[np % 6][j];
			double out[GROWTH_FIRST_COMMITS + 2];
			fresh_process(kinds[k], k == 2 ? lp.dir : name, g->n, seed, value, out);
			if (k < 2)
				att[k][np] = out[0];
			if (k == 0)
				fl[np] = out[1];
			for (int i = 0; i < GROWTH_FIRST_COMMITS; i++)
				if (!isnan(out[2 + i]))
					fc[k][nfc[k]++] = out[2 + i];
		}
		value += GROWTH_FIRST_COMMITS;
		np++;
	}
	g->nprocs = np;
	g->attach = stats_of(att[0], np);
	g->attach_prefault = stats_of(att[1], np);
	g->first_lookup = stats_of(fl, np);
	g->commit_first = stats_of(fc[0], nfc[0]);
	g->commit_first_prefault = stats_of(fc[1], nfc[1]);
	g->lmdb_first = stats_of(fc[2], nfc[2]);
	for (int k = 0; k < 3; k++) {
		free(fc[k]);
		if (k < 2)
			free(att[k]);
	}
	free(fl);

	/* lookup by name, random names: every option's name, shuffled */
	char **names = malloc(g->n * sizeof(char *));
	if (!names)
		die("out of memory");
	for (uint32_t i = 0; i < g->n; i++) {
		char b[64];
		opt_name(b, sizeof b, i);
		if (!(names[i] = strdup(b)))
			die("out of memory");
	}
	long m = rp.lookups;
	uint32_t *idx = malloc((size_t)m * sizeof(uint32_t));
	if (!idx)
		die("out of memory");
	uint64_t rs = 0x9e3779b97f4a7c15ull;
	for (long j = 0; j < m; j++)
		idx[j] = (uint32_t)(xorshift(&rs) % g->n);
	double lk[16], tc[16];
	for (int k = 0; k < rp.lookup_rounds; k++) {
		t0 = now_ns();
		sink += lookup_loop(h, names, idx, m);
		lk[k] = (now_ns() - t0) / (double)m;
		t0 = now_ns();
		sink += touch_loop(names, idx, m);
		tc[k] = (now_ns() - t0) / (double)m;
	}
	g->lookup = stats_of(lk, rp.lookup_rounds);
	g->touch = stats_of(tc, rp.lookup_rounds);
	g->nlookup_rounds = rp.lookup_rounds;
	g->nlookups = m;
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

	/* one-change commits paired with LMDB one-key writes, after a warm-up
	 * of one commit per slot (a process's first commits fault its pages:
	 * the fresh processes above measured those): first the pairs of a
	 * segment just created, then, after GROWTH_WARM more pairs, those of
	 * its steady state */
	for (uint32_t w = 0; w < info.nslots; w++) {
		timed_commit_at(h, w % g->n, value);
		lmdb_peer_write(&lp, w % g->n, 1, value++);
	}
	rs = 0x2545f4914f6cdd1dull;
	struct pairs early = time_pairs(h, &lp, g->n, g->n <= 10000 ? 101 : rp.pairs_min, rp.pairs_min,
					rp.budget_ns, &rs, &value);
	g->npairs_early = early.n;
	g->commit_early = early.commit;
	g->lmdb_early = early.lmdb;
	g->ratio_early = early.ratio;
	t0 = now_ns();
	for (g->nwarm = 0; g->nwarm < GROWTH_WARM && now_ns() - t0 < rp.budget_ns; g->nwarm++) {
		uint32_t o = (uint32_t)(xorshift(&rs) % g->n);
		timed_commit_at(h, o, value);
		lmdb_peer_write(&lp, o, 1, value++);
	}
	struct pairs steady = time_pairs(h, &lp, g->n, rp.pairs_max, rp.pairs_min, rp.budget_ns, &rs, &value);
	g->npairs = steady.n;
	g->commit = steady.commit;
	g->lmdb = steady.lmdb;
	g->ratio = steady.ratio;
	lmdb_peer_close(&lp);
	shmcfg_close(h);
	(void)shmcfg_unlink(name);
	g->run = true;
}

/*
 * Whether @p g fits: the segment and the LMDB file in /dev/shm and in
 * memory (tmpfs pages are memory), plus this process's and a fresh
 * process's private copies (at most a segment's worth) and the names,
 * extrapolated per option from the largest size measured. Fills g->skip and
 * returns false if not.
 */
static bool growth_fits(struct growth *g)
{
	if (g->n > g_growth_max) {
		snprintf(g->skip, sizeof g->skip, "above --growth-max %u", g_growth_max);
		return false;
	}
	const struct growth *m = NULL;
	for (int i = 0; i < NGROWTH; i++)
		if (growth[i].run && growth[i].n < g->n)
			m = &growth[i];
	if (!m || g->n <= 100000)
		return true;
	double k = (double)g->n / m->n;
	double seg = m->bytes * k, lmdb = m->lmdb_bytes * k * 1.5;
	double need_shm = 1.1 * (seg + lmdb);
	double need_mem = need_shm + seg + (double)g->n * 96 + (512.0 * (1 << 20));
	double shm = fs_free_bytes("/dev/shm"), mem = mem_available_bytes();
	char a[24], b[24], c[24], d[24];
	fmt_bytes(a, sizeof a, need_shm);
	fmt_bytes(b, sizeof b, shm);
	fmt_bytes(c, sizeof c, need_mem);
	fmt_bytes(d, sizeof d, mem);
	if (shm < 0 || mem < 0) {
		snprintf(g->skip, sizeof g->skip, "could not read the free space of /dev/shm or MemAvailable");
		return false;
	}
	if (shm < need_shm || mem < need_mem) {
		snprintf(g->skip, sizeof g->skip,
			 "needs ~%s of /dev/shm (%s free) and ~%s of memory (%s available), "
			 "extrapolated from %s options",
			 a, b, c, d, COUNT(m->n));
		return false;
	}
	printf("   %s options need ~%s of /dev/shm (%s free) and ~%s of memory\n"
	       "   (%s available), extrapolated from %s options: measured.\n",
	       COUNT(g->n), a, b, c, d, COUNT(m->n));
	return true;
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

static const char *fmt_ratio(char *buf, size_t len, double x)
{
	snprintf(buf, len, x < 10 ? "%.2fx" : "%.1fx", x);
	return buf;
}

static const char *fmt_int(char *buf, size_t len, long x)
{
	snprintf(buf, len, "%ld", x);
	return buf;
}

static const char *fmt_reps(char *buf, size_t len, int rounds, long per)
{
	if (per % 1000000 == 0)
		snprintf(buf, len, "%d x %ldM", rounds, per / 1000000);
	else if (per % 1000 == 0)
		snprintf(buf, len, "%d x %ldk", rounds, per / 1000);
	else
		snprintf(buf, len, "%d x %ld", rounds, per);
	return buf;
}

double g_miss_ns[3];

/* The growth rows as TSV: one row per size measured, "# " comments (the
 * run, the sizes skipped and why) that gnuplot ignores. */
static void write_tsv(const char *path)
{
	FILE *f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "bench: --tsv %s: %s\n", path, strerror(errno));
		failures++;
		return;
	}
	time_t now = time(NULL);
	char date[64], load[64] = "?";
	strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&now));
	FILE *la = fopen("/proc/loadavg", "r");
	if (la) {
		if (fscanf(la, "%63s", load) != 1)
			snprintf(load, sizeof load, "?");
		fclose(la);
	}
	fprintf(f, "# shmcfg growth (tests/bench/bench, section 4): times in ns, sizes in bytes\n");
	fprintf(f, "# title: shmcfg %s, %s, %ld CPUs, load %s%s\n", shmcfg_version(NULL, NULL, NULL), date,
		sysconf(_SC_NPROCESSORS_ONLN), load, opt.quick ? ", --quick (not for the record)" : "");
	fprintf(f, "# commit: median of this process's one-change commits after the warm-up pairs"
		   " (warm_pairs); commit_first: its first %d commits of a fresh process, pooled;"
		   " commit_over_lmdb: median of the paired ratios; early_*: the pairs right after"
		   " create, before the warm-up\n",
		GROWTH_FIRST_COMMITS);
	for (int i = 0; i < NGROWTH; i++)
		if (!growth[i].run)
			fprintf(f, "# skipped %u: %s\n", growth[i].n, growth[i].skip);
	static const char *cols[] = {
		"options", "bytes", "bytes_per_option", "commit_ns", "commit_min_ns", "commit_max_ns",
		"commit_first_ns", "commit_first_max_ns", "lmdb_write_ns", "commit_over_lmdb",
		"attach_ns", "attach_min_ns", "attach_max_ns", "first_lookup_ns", "lookup_ns",
		"lookup_fetch_ns", "build_ns", "create_ns", "lmdb_fill_ns", "lmdb_bytes", "pairs", "procs",
		"lookup_rounds", "early_commit_ns", "early_lmdb_write_ns", "early_commit_over_lmdb",
		"early_pairs", "warm_pairs", "lmdb_first_ns", "commit_first_prefault_ns", "attach_prefault_ns",
	};
	for (size_t c = 0; c < sizeof cols / sizeof cols[0]; c++)
		fprintf(f, "%s%s", c ? "\t" : "", cols[c]);
	fprintf(f, "\n");
	for (int i = 0; i < NGROWTH; i++) {
		const struct growth *g = &growth[i];
		if (!g->run)
			continue;
		fprintf(f,
			"%u\t%.0f\t%.1f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.3f\t%.0f\t%.0f\t%.0f\t%.0f"
			"\t%.2f\t%.2f\t%.0f\t%.0f\t%.0f\t%.0f\t%d\t%d\t%d\t%.0f\t%.0f\t%.3f\t%d\t%d\t%.0f\t%.0f\t%.0f\n",
			g->n, g->bytes, g->bytes / g->n, g->commit.med, g->commit.min, g->commit.max,
			g->commit_first.med, g->commit_first.max, g->lmdb.med, g->ratio.med, g->attach.med,
			g->attach.min, g->attach.max, g->first_lookup.med, g->lookup.med, g->touch.med,
			g->build_ns, g->create_ns, g->lmdb_fill_ns, g->lmdb_bytes, g->npairs, g->nprocs,
			g->nlookup_rounds, g->commit_early.med, g->lmdb_early.med, g->ratio_early.med,
			g->npairs_early, g->nwarm, g->lmdb_first.med, g->commit_first_prefault.med,
			g->attach_prefault.med);
	}
	if (fclose(f)) {
		fprintf(stderr, "bench: --tsv %s: %s\n", path, strerror(errno));
		failures++;
		return;
	}
	printf("\n   growth rows written to %s (make bench-plot draws them)\n", path);
}

void run_growth(void)
{
	printf("\n4. Growth (int options named groupNNN.option_NNNNNN; default create options)\n\n");
	for (int i = 0; i < NGROWTH; i++)
		if (growth_fits(&growth[i]))
			growth_one(&growth[i]);
	static const size_t mib[3] = {1, 4, 16};
	for (int i = 0; i < 3; i++)
		g_miss_ns[i] = miss_latency_ns(mib[i]);
	printf("   The limit of a lookup, one dependent load of a random cache line (best of 3):\n"
	       "   %s within 1 MiB, %s within 4 MiB, %s within 16 MiB\n\n",
	       T(g_miss_ns[0]), T(g_miss_ns[1]), T(g_miss_ns[2]));
	const struct growth *run[NGROWTH];
	int nr = 0;
	for (int i = 0; i < NGROWTH; i++)
		if (growth[i].run)
			run[nr++] = &growth[i];
	printf("   %-40s", "options");
	for (int k = 0; k < nr; k++)
		printf(" %13s", COUNT(run[k]->n));
	printf("\n");
#define GROW_ROW(label, ...)                                                                    \
	do {                                                                                    \
		printf("   %-40s", label);                                                      \
		for (int k_ = 0; k_ < nr; k_++) {                                               \
			const struct growth *g = run[k_];                                       \
			char c_[32];                                                            \
			snprintf(c_, sizeof c_, "%s", (__VA_ARGS__));                           \
			printf(" %13s", c_);                                                    \
		}                                                                               \
		printf("\n");                                                                   \
	} while (0)
#define RATIO(x) fmt_ratio((char[24]){0}, 24, (x))
	GROW_ROW("one-change commit, median", T(g->commit.med));
	GROW_ROW("  max", T(g->commit.max));
	GROW_ROW("  first 7 of a fresh process, median", T(g->commit_first.med));
	GROW_ROW("  first 7 of a fresh process, max", T(g->commit_first.max));
	GROW_ROW("  ... attached with SHMCFG_ATTACH_PREFAULT", T(g->commit_first_prefault.med));
	GROW_ROW("LMDB's first 7 of a fresh process, median", T(g->lmdb_first.med));
	GROW_ROW("LMDB one-key write, same keys, median", T(g->lmdb.med));
	GROW_ROW("commit x LMDB write (paired), median", RATIO(g->ratio.med));
	GROW_ROW("  min", RATIO(g->ratio.min));
	GROW_ROW("  max", RATIO(g->ratio.max));
	GROW_ROW("  ... the first pairs after create", RATIO(g->ratio_early.med));
	GROW_ROW("  ... those first pairs", fmt_int((char[24]){0}, 24, g->npairs_early));
	GROW_ROW("  ... warm-up pairs between", fmt_int((char[24]){0}, 24, g->nwarm));
	GROW_ROW("attach in a fresh process, median", T(g->attach.med));
	GROW_ROW("  min", T(g->attach.min));
	GROW_ROW("  max", T(g->attach.max));
	GROW_ROW("  with SHMCFG_ATTACH_PREFAULT, median", T(g->attach_prefault.med));
	GROW_ROW("  then its first lookup + read, median", T(g->first_lookup.med));
	GROW_ROW("lookup by name, random names, median", T(g->lookup.med));
	GROW_ROW("  of which fetching the name", T(g->touch.med));
	GROW_ROW("  lookup min..max (ns)", SPREAD(g->lookup.min, g->lookup.max));
	GROW_ROW("segment size, bytes", COUNT((uint64_t)g->bytes));
	GROW_ROW("  in binary units", BYTES(g->bytes));
	GROW_ROW("segment bytes per option", BYTES(g->bytes / g->n));
	GROW_ROW("LMDB file in use, bytes per key", BYTES(g->lmdb_bytes / g->n));
	GROW_ROW("schema build (shmcfg_schema_add)", T(g->build_ns));
	GROW_ROW("shmcfg_create", T(g->create_ns));
	GROW_ROW("LMDB fill (one txn, MDB_APPEND)", T(g->lmdb_fill_ns));
	GROW_ROW("repetitions: commit pairs", fmt_int((char[24]){0}, 24, g->npairs));
	GROW_ROW("  fresh processes", fmt_int((char[24]){0}, 24, g->nprocs));
	GROW_ROW("  lookup rounds x lookups", fmt_reps((char[32]){0}, 32, g->nlookup_rounds, g->nlookups));
#undef RATIO
#undef GROW_ROW
	for (int i = 0; i < NGROWTH; i++)
		if (!growth[i].run)
			printf("   %s options: skipped: %s\n", COUNT(growth[i].n), growth[i].skip);
	printf("   Repetitions fall with the size to bound the run time (the last rows). The\n"
	       "   commits of this process follow a warm-up of one commit per slot, then the first\n"
	       "   pairs after create (at most 101), then up to %s more pairs untimed (within the\n"
	       "   time budget): the steady state's pairs follow; a pair is a commit and an LMDB\n"
	       "   write of the same random option and key, in turn first.\n", COUNT(GROWTH_WARM));
	if (g_tsv_path)
		write_tsv(g_tsv_path);
}
