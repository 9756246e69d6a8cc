/* SPDX-License-Identifier: MIT */
/*
 * Test-only fault injection, compiled only into the test copy of the library
 * (SHMCFG_WITH_FAULTS): never in the installed library or tools. Two kinds:
 * crash points (shmcfg__fault, SHMCFG_FAULT) and the resource seam (the
 * shmcfg__malloc ... shmcfg__posix_fallocate wrappers of lib/internal.h,
 * controlled through tests/faultsim.h).
 */
#include "internal.h"

#include <stdlib.h>

#ifdef SHMCFG_WITH_FAULTS
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include <jansson.h>

#include "faultsim.h" /* tests/: the control's declarations */

/*
 * Test-only crash points. SHMCFG_FAULT is a comma-separated list of
 * point[:n][:stop|:fork]: the n-th pass (default 1) of the thread through
 * shmcfg__fault(point) raises SIGKILL (the process dies exactly there, as
 * kill -9 would), or SIGSTOP with ":stop" (a test then acts while the
 * process stands there, and sends SIGCONT), or with ":fork" forks a child
 * that waits for SIGKILL (what it inherited stays open) and goes on once
 * the child is past fork() (its atfork handlers done: what a test sees
 * next does not depend on when the child is scheduled).
 */
void shmcfg__fault(const char *point)
{
	static __thread unsigned passes[16];
	const char *f = getenv("SHMCFG_FAULT");
	size_t n = strlen(point);
	for (unsigned item = 0; f && *f && item < 16; item++) {
		const char *end = strchr(f, ',');
		size_t len = end ? (size_t)(end - f) : strlen(f);
		if (len >= n && strncmp(f, point, n) == 0 && (len == n || f[n] == ':')) {
			const char *opt = f + n;
			int want = 1;
			if (*opt == ':' && opt[1] >= '0' && opt[1] <= '9')
				want = atoi(++opt);
			bool stop = memmem(f, len, ":stop", 5) != NULL, forks = memmem(f, len, ":fork", 5) != NULL;
			int ready[2];
			if (++passes[item] == (unsigned)want && forks && pipe2(ready, O_CLOEXEC) == 0) {
				char c = 0;
				if (fork() == 0) {
					(void)!write(ready[1], &c, 1);
					for (;;)
						pause();
				}
				close(ready[1]);
				(void)!read(ready[0], &c, 1);
				close(ready[0]);
			} else if (passes[item] == (unsigned)want) {
				raise(stop ? SIGSTOP : SIGKILL);
			}
		}
		f = end ? end + 1 : f + len;
	}
}

/*
 * The resource seam. While armed, every call of an armed kind is counted,
 * from every thread; the nth fails (and, persistent, every later one).
 * Once a test has used the control, every allocation is entered in a table
 * of live blocks (address, size, serial number) and every shmcfg__free()
 * removes it: what a failed call left allocated is what it entered after a
 * mark and did not remove. Blocks freed with plain free(3) by the
 * application (a dump's text) simply stay in the table, and are replaced
 * when their address is reused.
 */
static pthread_mutex_t fs_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic unsigned fs_kinds;
static _Atomic unsigned long fs_nth, fs_calls, fs_failures;
static _Atomic bool fs_persistent, fs_tracking;

struct fs_block {
	uintptr_t p; /* 0: free entry */
	size_t size;
	uint64_t serial;
};
static struct fs_block *fs_table; /* open addressing, linear probing */
static size_t fs_cap, fs_count;
static uint64_t fs_serial;

static __thread unsigned fs_quiet; /* inside a call that counts as one (json_loads) */

static bool fs_fail(unsigned kind)
{
	if (!(atomic_load_explicit(&fs_kinds, memory_order_relaxed) & kind) || fs_quiet)
		return false;
	unsigned long c = atomic_fetch_add(&fs_calls, 1) + 1, nth = atomic_load(&fs_nth);
	if (c == nth || (c > nth && atomic_load(&fs_persistent))) {
		atomic_fetch_add(&fs_failures, 1);
		return true;
	}
	return false;
}

static size_t fs_home(uintptr_t p)
{
	return (size_t)(((uint64_t)p >> 4) * 0x9e3779b97f4a7c15ull >> 20) & (fs_cap - 1);
}

/* Caller holds fs_lock. */
static void fs_insert(uintptr_t p, size_t size, uint64_t serial)
{
	size_t i = fs_home(p);
	while (fs_table[i].p && fs_table[i].p != p)
		i = (i + 1) & (fs_cap - 1);
	if (!fs_table[i].p)
		fs_count++;
	fs_table[i] = (struct fs_block){p, size, serial};
}

static void fs_track(void *p, size_t size)
{
	if (!p || !atomic_load_explicit(&fs_tracking, memory_order_relaxed))
		return;
	pthread_mutex_lock(&fs_lock);
	if ((fs_count + 1) * 2 > fs_cap) {
		size_t old_cap = fs_cap, cap = fs_cap ? fs_cap * 2 : 4096;
		struct fs_block *old = fs_table, *t = calloc(cap, sizeof *t);
		if (t) {
			fs_table = t;
			fs_cap = cap;
			fs_count = 0;
			for (size_t i = 0; i < old_cap; i++)
				if (old[i].p)
					fs_insert(old[i].p, old[i].size, old[i].serial);
			free(old);
		}
	}
	if ((fs_count + 1) * 2 <= fs_cap) /* else untracked: the table could not grow */
		fs_insert((uintptr_t)p, size, fs_serial++);
	pthread_mutex_unlock(&fs_lock);
}

/* Remove p from the table; its entry goes to *was (if p was there). */
static bool fs_untrack(uintptr_t p, struct fs_block *was)
{
	if (!p || !atomic_load_explicit(&fs_tracking, memory_order_relaxed))
		return false;
	pthread_mutex_lock(&fs_lock);
	size_t i = fs_cap ? fs_home(p) : 0;
	while (fs_cap && fs_table[i].p && fs_table[i].p != p)
		i = (i + 1) & (fs_cap - 1);
	bool found = fs_cap && fs_table[i].p;
	if (found) {
		if (was)
			*was = fs_table[i];
		/* backward-shift deletion: no tombstones */
		fs_table[i].p = 0;
		fs_count--;
		for (size_t j = (i + 1) & (fs_cap - 1); fs_table[j].p; j = (j + 1) & (fs_cap - 1)) {
			size_t home = fs_home(fs_table[j].p);
			/* move j into the hole at i unless its home lies in (i, j] */
			if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
				fs_table[i] = fs_table[j];
				fs_table[j].p = 0;
				i = j;
			}
		}
	}
	pthread_mutex_unlock(&fs_lock);
	return found;
}

void *shmcfg__malloc(size_t n)
{
	if (fs_fail(SHMCFG_FAULTSIM_ALLOC)) {
		errno = ENOMEM;
		return NULL;
	}
	void *p = malloc(n);
	fs_track(p, n);
	return p;
}

bool shmcfg__faultsim_adopt(void *p, size_t n)
{
	if (fs_fail(SHMCFG_FAULTSIM_ALLOC))
		return false;
	fs_track(p, n);
	return true;
}

void *shmcfg__calloc(size_t n, size_t size)
{
	if (fs_fail(SHMCFG_FAULTSIM_ALLOC)) {
		errno = ENOMEM;
		return NULL;
	}
	void *p = shmcfg__calloc_fast(n, size);
	fs_track(p, n * size);
	return p;
}

void *shmcfg__realloc(void *p, size_t n)
{
	if (fs_fail(SHMCFG_FAULTSIM_ALLOC)) {
		errno = ENOMEM;
		return NULL; /* p stays as it was, as with realloc */
	}
	/* out of the table first: once reallocated, p is not even a key */
	struct fs_block was;
	bool had = fs_untrack((uintptr_t)p, &was);
	void *q = realloc(p, n);
	if (q) {
		fs_track(q, n);
	} else if (had) {
		pthread_mutex_lock(&fs_lock);
		fs_insert(was.p, was.size, was.serial);
		pthread_mutex_unlock(&fs_lock);
	}
	return q;
}

char *shmcfg__strdup(const char *s)
{
	if (fs_fail(SHMCFG_FAULTSIM_ALLOC)) {
		errno = ENOMEM;
		return NULL;
	}
	char *p = strdup(s);
	fs_track(p, p ? strlen(p) + 1 : 0);
	return p;
}

char *shmcfg__strndup(const char *s, size_t n)
{
	if (fs_fail(SHMCFG_FAULTSIM_ALLOC)) {
		errno = ENOMEM;
		return NULL;
	}
	char *p = strndup(s, n);
	fs_track(p, p ? strlen(p) + 1 : 0);
	return p;
}

int shmcfg__asprintf(char **ret, const char *fmt, ...)
{
	if (fs_fail(SHMCFG_FAULTSIM_ALLOC)) {
		*ret = NULL;
		errno = ENOMEM;
		return -1;
	}
	va_list ap;
	va_start(ap, fmt);
	int n = vasprintf(ret, fmt, ap);
	va_end(ap);
	if (n < 0)
		*ret = NULL;
	else
		fs_track(*ret, (size_t)n + 1);
	return n;
}

void shmcfg__free(void *p)
{
	fs_untrack((uintptr_t)p, NULL);
	free(p);
}

void *shmcfg__mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	if (fs_fail(SHMCFG_FAULTSIM_MMAP)) {
		errno = ENOMEM;
		return MAP_FAILED;
	}
	return mmap(addr, len, prot, flags, fd, off);
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

int shmcfg__madvise(void *addr, size_t len, int advice)
{
	/* SHMCFG_NO_POPULATE_WRITE set: as a kernel before Linux 5.14, which
	 * does not know the advice (lib/schema/validate.c then takes its fallback) */
	if (advice == MADV_POPULATE_WRITE && getenv("SHMCFG_NO_POPULATE_WRITE")) {
		errno = EINVAL;
		return -1;
	}
	if (fs_fail(SHMCFG_FAULTSIM_MMAP)) {
		errno = ENOMEM;
		return -1;
	}
	return madvise(addr, len, advice);
}

int shmcfg__ftruncate(int fd, off_t len)
{
	if (fs_fail(SHMCFG_FAULTSIM_FTRUNCATE)) {
		errno = ENOSPC;
		return -1;
	}
	return ftruncate(fd, len);
}

int shmcfg__posix_fallocate(int fd, off_t off, off_t len)
{
	if (fs_fail(SHMCFG_FAULTSIM_FALLOCATE))
		return ENOSPC; /* posix_fallocate returns the error, errno untouched */
	return posix_fallocate(fd, off, len);
}

/* jansson's parser: one call of the seam, that fails whole as jansson
 * reports running out of memory (lib/internal.h says why). */
static json_t *fs_json_oom(json_error_t *e)
{
	if (e) {
		memset(e, 0, sizeof *e);
		e->line = e->column = -1;
		snprintf(e->text, sizeof e->text, "out of memory");
		/* where json_error_code() reads the code */
		e->text[JSON_ERROR_TEXT_LENGTH - 1] = (char)json_error_out_of_memory;
	}
	return NULL;
}

json_t *shmcfg__json_loads(const char *text, size_t flags, json_error_t *e)
{
	if (fs_fail(SHMCFG_FAULTSIM_ALLOC))
		return fs_json_oom(e);
	fs_quiet++;
	json_t *j = json_loads(text, flags, e);
	fs_quiet--;
	return j;
}

json_t *shmcfg__json_loadb(const char *buf, size_t len, size_t flags, json_error_t *e)
{
	if (fs_fail(SHMCFG_FAULTSIM_ALLOC))
		return fs_json_oom(e);
	fs_quiet++;
	json_t *j = json_loadb(buf, len, flags, e);
	fs_quiet--;
	return j;
}

/* jansson's allocations (json_set_alloc_funcs) go through the seam too: a
 * json_t leaked on an error path is then an outstanding allocation. */
static void *fs_json_malloc(size_t n)
{
	return shmcfg__malloc(n);
}

static void fs_json_free(void *p)
{
	shmcfg__free(p);
}

void shmcfg__faultsim(unsigned kinds, unsigned long nth, bool persistent)
{
	pthread_mutex_lock(&fs_lock);
	if (!atomic_load(&fs_tracking)) {
		json_set_alloc_funcs(fs_json_malloc, fs_json_free);
		atomic_store(&fs_tracking, true);
	}
	atomic_store(&fs_kinds, 0u); /* no call counts while the rest changes */
	atomic_store(&fs_calls, 0ul);
	atomic_store(&fs_failures, 0ul);
	atomic_store(&fs_nth, nth);
	atomic_store(&fs_persistent, persistent);
	atomic_store(&fs_kinds, nth ? kinds : 0u);
	pthread_mutex_unlock(&fs_lock);
}

unsigned long shmcfg__faultsim_calls(void)
{
	return atomic_load(&fs_calls);
}

unsigned long shmcfg__faultsim_failures(void)
{
	return atomic_load(&fs_failures);
}

void shmcfg__faultsim_forget(const void *p)
{
	fs_untrack((uintptr_t)p, NULL);
}

uint64_t shmcfg__faultsim_mark(void)
{
	pthread_mutex_lock(&fs_lock);
	uint64_t m = fs_serial;
	pthread_mutex_unlock(&fs_lock);
	return m;
}

size_t shmcfg__faultsim_outstanding(uint64_t mark, void (*fn)(const void *p, size_t size, uint64_t serial, void *ud),
				    void *ud)
{
	size_t n = 0;
	pthread_mutex_lock(&fs_lock);
	for (size_t i = 0; i < fs_cap; i++)
		if (fs_table[i].p && fs_table[i].serial >= mark) {
			n++;
			if (fn)
				fn((const void *)fs_table[i].p, fs_table[i].size, fs_table[i].serial, ud);
		}
	pthread_mutex_unlock(&fs_lock);
	return n;
}
#endif
