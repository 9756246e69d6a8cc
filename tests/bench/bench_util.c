/* SPDX-License-Identifier: MIT */
/*
 * shmcfg benchmark: the helpers of every section (bench.h): time, failing,
 * numbers as text, order statistics, the segments to unlink at exit, shared
 * memory and children of fork().
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

/* ------------------------------------------------------------------ */
/* Output, statistics, segments, processes                            */
/* ------------------------------------------------------------------ */

volatile uint64_t sink;
static char seg_names[16][64]; /* segments to unlink at exit */
static int nseg_names;
int failures;

void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "bench: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(2);
}

void fail(const char *what)
{
	fprintf(stderr, "bench: BROKEN: %s\n", what);
	failures++;
}

/* Format a duration in ns with a unit that keeps 3 significant digits. */
const char *fmt_time(char *buf, size_t len, double ns)
{
	if (ns < 10)
		snprintf(buf, len, "%.2f ns", ns);
	else if (ns < 1000)
		snprintf(buf, len, "%.1f ns", ns);
	else if (ns < 1e6)
		snprintf(buf, len, "%.2f us", ns / 1e3);
	else if (ns < 1e9)
		snprintf(buf, len, "%.2f ms", ns / 1e6);
	else
		snprintf(buf, len, "%.2f s", ns / 1e9);
	return buf;
}

const char *fmt_rate(char *buf, size_t len, double per_s)
{
	if (per_s >= 1e9)
		snprintf(buf, len, "%.2f G/s", per_s / 1e9);
	else if (per_s >= 1e6)
		snprintf(buf, len, "%.1f M/s", per_s / 1e6);
	else if (per_s >= 1e3)
		snprintf(buf, len, "%.1f k/s", per_s / 1e3);
	else
		snprintf(buf, len, "%.0f /s", per_s);
	return buf;
}

const char *fmt_bytes(char *buf, size_t len, double b)
{
	if (b >= 1 << 30)
		snprintf(buf, len, "%.2f GiB", b / (1 << 30));
	else if (b >= 1 << 20)
		snprintf(buf, len, "%.1f MiB", b / (1 << 20));
	else if (b >= 1 << 10)
		snprintf(buf, len, "%.1f KiB", b / (1 << 10));
	else
		snprintf(buf, len, "%.0f B", b);
	return buf;
}

/* A count with thousands separators: 1,692,056,384 */
const char *fmt_count(char *buf, size_t len, uint64_t n)
{
	char d[32], out[48];
	int nd = snprintf(d, sizeof d, "%llu", (unsigned long long)n), o = 0;
	for (int i = 0; i < nd; i++) {
		if (i && (nd - i) % 3 == 0)
			out[o++] = ',';
		out[o++] = d[i];
	}
	out[o] = 0;
	snprintf(buf, len, "%s", out);
	return buf;
}

const char *fmt_spread(char *buf, size_t len, double lo, double hi)
{
	snprintf(buf, len, "%.0f..%.0f", lo, hi);
	return buf;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double quantile(const double *sorted, int n, double q)
{
	if (n <= 0)
		return NAN;
	double pos = q * (n - 1);
	int i = (int)pos;
	if (i >= n - 1)
		return sorted[n - 1];
	return sorted[i] + (pos - i) * (sorted[i + 1] - sorted[i]);
}

/* Order statistics of a sample (sorted in place). */
struct stats stats_of(double *v, int n)
{
	struct stats s = {NAN, NAN, NAN, NAN, NAN, NAN, NAN, n};
	if (n <= 0)
		return s;
	qsort(v, (size_t)n, sizeof *v, cmp_double);
	s.med = quantile(v, n, 0.5);
	s.min = v[0];
	s.max = v[n - 1];
	s.q1 = quantile(v, n, 0.25);
	s.q3 = quantile(v, n, 0.75);
	s.p90 = quantile(v, n, 0.90);
	s.p99 = quantile(v, n, 0.99);
	return s;
}

void seg_name(char *buf, size_t len, const char *what)
{
	snprintf(buf, len, "bench-%s-%ld", what, (long)getpid());
	if (nseg_names < (int)(sizeof seg_names / sizeof seg_names[0]))
		snprintf(seg_names[nseg_names++], sizeof seg_names[0], "%s", buf);
}

pid_t main_pid;

static char tmp_dirs[16][128]; /* directories to remove at exit */
static int ntmp_dirs;

void unlink_segments(void)
{
	if (getpid() != main_pid)
		return;
	for (int i = 0; i < nseg_names; i++)
		(void)shmcfg_unlink(seg_names[i]);
	nseg_names = 0;
	for (int i = 0; i < ntmp_dirs; i++)
		if (tmp_dirs[i][0])
			rm_tmpdir(tmp_dirs[i]);
	ntmp_dirs = 0;
}

void make_tmpdir(char *buf, size_t len, const char *what)
{
	const char *base = "/dev/shm";
	if (access(base, W_OK | X_OK) != 0) {
		base = getenv("TMPDIR");
		if (!base || !*base)
			base = "/tmp";
	}
	snprintf(buf, len, "%s/shmcfg-bench-%s-XXXXXX", base, what);
	if (!mkdtemp(buf))
		die("mkdtemp %s: %s", buf, strerror(errno));
	if (ntmp_dirs < (int)(sizeof tmp_dirs / sizeof tmp_dirs[0]))
		snprintf(tmp_dirs[ntmp_dirs++], sizeof tmp_dirs[0], "%s", buf);
}

/* Remove a directory of make_tmpdir() and the files in it (no subdirectories). */
void rm_tmpdir(const char *dir)
{
	DIR *d = opendir(dir);
	if (d) {
		struct dirent *e;
		while ((e = readdir(d))) {
			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			char p[PATH_MAX];
			snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
			unlink(p);
		}
		closedir(d);
	}
	rmdir(dir);
	for (int i = 0; i < ntmp_dirs; i++)
		if (!strcmp(tmp_dirs[i], dir))
			tmp_dirs[i][0] = 0;
}

double fs_free_bytes(const char *path)
{
	struct statvfs v;
	if (statvfs(path, &v) != 0)
		return -1;
	return (double)v.f_bavail * (double)v.f_frsize;
}

double mem_available_bytes(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	if (!f)
		return -1;
	char line[256];
	double kb = -1;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "MemAvailable: %lf kB", &kb) == 1)
			break;
	fclose(f);
	return kb < 0 ? -1 : kb * 1024;
}

const char *self_exe(void)
{
	static char self[PATH_MAX];
	if (!self[0]) {
		ssize_t l = readlink("/proc/self/exe", self, sizeof self - 1);
		if (l <= 0)
			die("readlink /proc/self/exe: %s", strerror(errno));
		self[l] = 0;
	}
	return self;
}

void on_signal(int sig)
{
	(void)sig;
	exit(3); /* runs unlink_segments() */
}

/* A shared anonymous mapping that children of fork() write into. */
void *shared_alloc(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		die("mmap: %s", strerror(errno));
	memset(p, 0, len);
	return p;
}

void wait_child(pid_t pid)
{
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fail("a child process of the benchmark failed");
}

void sleep_ns(double ns)
{
	struct timespec ts = {(time_t)(ns / 1e9), (long)fmod(ns, 1e9)};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}
