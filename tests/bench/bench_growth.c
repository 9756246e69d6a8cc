/*
 * shmcfg benchmark, section 4: growth. Schemas of 10, 1,000 and 100,000 int
 * options: lookup by name (and the limit of one, a dependent load of a random
 * cache line), one-change commits, attach, segment bytes, schema build and
 * create.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bench.h"

/* ------------------------------------------------------------------ */
/* 4. Growth                                                          */
/* ------------------------------------------------------------------ */

struct growth growth[3] = {{.n = 10}, {.n = 1000}, {.n = 100000}};

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

double g_miss_ns[3];

void run_growth(void)
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
