/*
 * shmcfg benchmark: the helpers of every section (bench.h): time, failing,
 * numbers as text, order statistics, the segments to unlink at exit, shared
 * memory and children of fork().
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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
	if (b >= 1 << 20)
		snprintf(buf, len, "%.1f MiB", b / (1 << 20));
	else if (b >= 1 << 10)
		snprintf(buf, len, "%.1f KiB", b / (1 << 10));
	else
		snprintf(buf, len, "%.0f B", b);
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

void unlink_segments(void)
{
	if (getpid() != main_pid)
		return;
	for (int i = 0; i < nseg_names; i++)
		(void)shmcfg_unlink(seg_names[i]);
	nseg_names = 0;
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
