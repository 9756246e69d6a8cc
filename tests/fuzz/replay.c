/* SPDX-License-Identifier: MIT */
/*
 * Corpus replay: feeds every file of a fuzz target's committed corpus to its
 * LLVMFuzzerTestOneInput() once, so that `make check` runs the corpus with
 * the plain compiler (and under ASan+UBSan in the sanitizer build), without
 * clang. Prints TAP: one line per input.
 *
 * Usage: replay_TARGET [FILE|DIR]...   (default: $srcdir/tests/fuzz/corpus/TARGET)
 * A crash of the target is a crash of this program: the TAP driver reports
 * the test as failed, and the last "# input" line on stderr names the input.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "fuzz.h"

#ifndef FUZZ_TARGET
#error "FUZZ_TARGET must name the target"
#endif

struct list {
	char **p;
	size_t n, cap;
};

static void add(struct list *l, const char *path)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 64;
		l->p = realloc(l->p, l->cap * sizeof *l->p);
		if (!l->p)
			abort();
	}
	l->p[l->n] = strdup(path);
	if (!l->p[l->n])
		abort();
	l->n++;
}

static int cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int collect(struct list *l, const char *path)
{
	struct stat st;
	if (stat(path, &st) < 0) {
		printf("Bail out! %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		add(l, path);
		return 0;
	}
	DIR *d = opendir(path);
	if (!d) {
		printf("Bail out! %s: %s\n", path, strerror(errno));
		return -1;
	}
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char sub[4096];
		snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
		if (stat(sub, &st) == 0 && S_ISREG(st.st_mode))
			add(l, sub);
	}
	closedir(d);
	return 0;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	struct list l = {0};
	if (argc > 1) {
		for (int i = 1; i < argc; i++)
			if (collect(&l, argv[i]))
				return 1;
	} else {
		const char *src = getenv("srcdir");
		char dir[4096];
		snprintf(dir, sizeof dir, "%s/tests/fuzz/corpus/%s", src ? src : ".", FUZZ_TARGET);
		if (collect(&l, dir))
			return 1;
	}
	if (l.n == 0) {
		printf("Bail out! the corpus of %s is empty\n", FUZZ_TARGET);
		return 1;
	}
	qsort(l.p, l.n, sizeof *l.p, cmp);
	LLVMFuzzerInitialize(&argc, &argv);
	printf("1..%zu\n", l.n);
	fflush(stdout);
	double t0 = now_s(), slowest = 0;
	const char *slowest_name = "";
	size_t bytes = 0;
	for (size_t i = 0; i < l.n; i++) {
		FILE *f = fopen(l.p[i], "rb");
		if (!f) {
			printf("not ok %zu - %s: %s\n", i + 1, l.p[i], strerror(errno));
			continue;
		}
		fseek(f, 0, SEEK_END);
		long len = ftell(f);
		fseek(f, 0, SEEK_SET);
		uint8_t *buf = malloc(len > 0 ? (size_t)len : 1);
		if (!buf || (len > 0 && fread(buf, 1, (size_t)len, f) != (size_t)len)) {
			printf("not ok %zu - %s: cannot read\n", i + 1, l.p[i]);
			fclose(f);
			free(buf);
			continue;
		}
		fclose(f);
		fprintf(stderr, "# input %s (%ld bytes)\n", l.p[i], len);
		double t = now_s();
		LLVMFuzzerTestOneInput(buf, (size_t)len);
		t = now_s() - t;
		if (t > slowest) {
			slowest = t;
			slowest_name = l.p[i];
		}
		bytes += (size_t)len;
		free(buf);
		const char *base = strrchr(l.p[i], '/');
		printf("ok %zu - %s %s\n", i + 1, FUZZ_TARGET, base ? base + 1 : l.p[i]);
		fflush(stdout);
	}
	printf("# %s: %zu inputs, %zu bytes, %.2f s (slowest %.3f s: %s)\n", FUZZ_TARGET, l.n, bytes,
	       now_s() - t0, slowest, slowest_name);
	for (size_t i = 0; i < l.n; i++)
		free(l.p[i]);
	free(l.p);
	return 0;
}
