/* SPDX-License-Identifier: MIT */
/*
 * shmcfg benchmark, --callgrind (make bench-callgrind): instructions per read
 * of the read loops of bench_read.c, and per call of a lookup and of commits,
 * counted under valgrind --tool=callgrind in a child (--callgrind-child).
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define HAVE_CALLGRIND_H 1
#endif
#endif

#include "bench.h"

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
#define NCG (ncands + NCG_EXTRA)

static struct cg_item cg_item_at(int i)
{
	if (i < ncands)
		return (struct cg_item){cands[i].key, cands[i].label, cands[i].loop, CG_N, cands[i].group};
	return cg_extra[i - ncands];
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
int callgrind_child(void)
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

int run_callgrind(const char *self)
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
	double (*ir)[2] = calloc((size_t)NCG, sizeof *ir);
	if (!ir)
		die("out of memory");
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
		if (i < ncands)
			cands[i].ir = per;
		if (it.group)
			printf("   -- %s\n", it.group);
		if (i < ncands)
			printf("   %-52s %14.1f %8.1fx\n", it.label, per, per / base);
		else
			printf("   %-52s %14.0f\n", it.label, per);
	}
	free(ir);
	printf("\n   Each read figure includes the loop around it: increment, compare, branch and\n"
	       "   the add of the value read (the plain load's 4 = those + its one load).\n"
	       "   Instruction counts ignore what instructions cost: a fence or a locked\n"
	       "   read-modify-write (urcu-mb, pthread_rwlock) counts as one.\n");
	return 0;
#endif
}
