/* SPDX-License-Identifier: MIT */
/*
 * Attach in a fresh process (issue 12): `make bench-attach`.
 *
 * For 10, 1,000, 10,000 and 100,000 int options (the schema of the growth
 * section: groupNNN.option_NNNNNN), a segment is created, then this program
 * is exec'd again as a child that times, on a process that has never
 * touched the segment:
 *   attach            shmcfg_attach, read-write
 *   first lookup+get  the first lookup and copying read of one option
 *                     (its part of the schema copied and validated)
 *   first commit      a one-change commit right after (the commit of the
 *                     present kind uses every option: all are validated)
 *   scan              shmcfg_opt_info of every option on a second handle
 *                     attached in the same process (every option copied
 *                     and validated by first use)
 * and the minor page faults of the attach. Medians of R children (default
 * 11; the first argument). Not a test: nothing here is asserted.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "shmcfg.h"

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static void opt_name(char *b, size_t l, unsigned i)
{
	snprintf(b, l, "group%03u.option_%06u", i / 1000, i);
}

#define CHECK(x)                                                                                  \
	do {                                                                                      \
		int r_ = (x);                                                                     \
		if (r_ < 0 || r_ > 1) {                                                           \
			fprintf(stderr, "%s: %s: %s\n", #x, shmcfg_errname(r_), shmcfg_errdetail()); \
			exit(2);                                                                  \
		}                                                                                 \
	} while (0)

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static int child(const char *seg, unsigned n)
{
	struct rusage ru0, ru1;
	getrusage(RUSAGE_SELF, &ru0);
	double t0 = now();
	shmcfg *h;
	CHECK(shmcfg_attach(seg, 0, NULL, &h));
	double t1 = now();
	getrusage(RUSAGE_SELF, &ru1);
	char nm[64];
	opt_name(nm, sizeof nm, n / 2);
	shmcfg_opt o;
	CHECK(shmcfg_lookup(h, nm, &o));
	shmcfg_value v;
	CHECK(shmcfg_get(h, o, &v));
	shmcfg_value_clear(&v);
	double t2 = now();
	shmcfg_txn *t;
	CHECK(shmcfg_txn_begin(h, &t));
	CHECK(shmcfg_txn_set_int(t, o, 12345 + getpid()));
	CHECK(shmcfg_txn_commit(t, NULL));
	double t3 = now();
	shmcfg *h2;
	CHECK(shmcfg_attach(seg, 0, NULL, &h2));
	double t4 = now();
	for (unsigned i = 0; i < n; i++) {
		shmcfg_optinfo info;
		CHECK(shmcfg_opt_info(h2, i, &info));
	}
	double t5 = now();
	shmcfg_close(h2);
	shmcfg_close(h);
	printf("%.0f %.0f %.0f %.0f %ld\n", t1 - t0, t2 - t1, t3 - t2, t5 - t4, ru1.ru_minflt - ru0.ru_minflt);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "child"))
		return child(argv[2], (unsigned)atoi(argv[3]));
	static const unsigned sizes[] = {10, 1000, 10000, 100000};
	int reps = argc > 1 ? atoi(argv[1]) : 11;
	if (reps < 1 || reps > 64)
		reps = 11;
	printf("attach in a fresh process, medians of %d children\n", reps);
	printf("%8s %12s %17s %13s %13s %7s\n", "options", "attach", "first lookup+get", "first commit",
	       "scan", "faults");
	for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
		unsigned n = sizes[k];
		shmcfg_schema *s;
		CHECK(shmcfg_schema_new(&s));
		for (unsigned i = 0; i < n; i++) {
			char name[64], def[24];
			opt_name(name, sizeof name, i);
			snprintf(def, sizeof def, "%u", i);
			shmcfg_optdef d = {.name = name, .type = SHMCFG_INT, .def = def};
			CHECK(shmcfg_schema_add(s, &d));
		}
		char seg[64];
		snprintf(seg, sizeof seg, "bench-attach-%d-%u", (int)getpid(), n);
		shmcfg *h;
		shmcfg_create_opts co = {.flags = SHMCFG_CREATE_FORCE | SHMCFG_CREATE_NO_ENV};
		CHECK(shmcfg_create(seg, s, &co, &h));
		shmcfg_schema_free(s);
		double col[5][64];
		for (int r = 0; r < reps; r++) {
			int fd[2];
			if (pipe(fd))
				return 2;
			fflush(NULL);
			pid_t p = fork();
			if (p == 0) {
				dup2(fd[1], 1);
				char ns[16];
				snprintf(ns, sizeof ns, "%u", n);
				execl("/proc/self/exe", argv[0], "child", seg, ns, (char *)NULL);
				_exit(127);
			}
			close(fd[1]);
			char buf[256] = "";
			ssize_t got = read(fd[0], buf, sizeof buf - 1);
			close(fd[0]);
			int st;
			waitpid(p, &st, 0);
			if (got <= 0 || !WIFEXITED(st) || WEXITSTATUS(st) ||
			    sscanf(buf, "%lf %lf %lf %lf %lf", &col[0][r], &col[1][r], &col[2][r], &col[3][r],
				   &col[4][r]) != 5) {
				fprintf(stderr, "bench-attach: a child failed\n");
				shmcfg_close(h);
				(void)shmcfg_unlink(seg);
				return 2;
			}
		}
		for (int c = 0; c < 5; c++)
			qsort(col[c], (size_t)reps, sizeof(double), cmp);
		printf("%8u %9.1f us %14.1f us %10.1f us %10.1f us %7.0f\n", n, col[0][reps / 2] / 1e3,
		       col[1][reps / 2] / 1e3, col[2][reps / 2] / 1e3, col[3][reps / 2] / 1e3, col[4][reps / 2]);
		shmcfg_close(h);
		(void)shmcfg_unlink(seg);
	}
	return 0;
}
