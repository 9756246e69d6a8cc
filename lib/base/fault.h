/* SPDX-License-Identifier: MIT */
/*
 * The test-only crash points and the resource seam (fault.c), included by
 * lib/internal.h: every file of lib/ allocates through these names.
 */
#ifndef SHMCFG_FAULT_H
#define SHMCFG_FAULT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

/* fault.c: test-only crash points (SHMCFG_FAULT=point[:n][:stop],...),
 * compiled only into the test copy lib/libshmcfg-test.la (Makefile.am) */
#ifdef SHMCFG_WITH_FAULTS
void shmcfg__fault(const char *point);
#else
#define shmcfg__fault(point) ((void)0)
#endif

/*
 * fault.c: the resource seam. Every heap allocation and every mmap(2),
 * madvise(2) (MADV_POPULATE_WRITE: it allocates the private copy's pages),
 * ftruncate(2) and posix_fallocate(3) of lib/ goes
 * through these names, and
 * every free(3) of what they (or jansson) allocated goes through
 * shmcfg__free(). In the installed library they are the plain functions, at
 * no cost. In the test copy (SHMCFG_WITH_FAULTS) they count their calls, can
 * be told to fail the Nth one (transient: only that one; persistent: that
 * one and every later one) and keep a table of live allocations, so that a
 * test can tell whether a failed call left anything allocated: the control
 * is tests/faultsim.h, the sweep tests/test_oom.c (doc/reliability.md,
 * "Resource exhaustion"). An injected failure looks like the real one:
 * NULL, MAP_FAILED or -1 with errno ENOMEM (ENOSPC for ftruncate; madvise
 * fails as the kind MMAP), ENOSPC
 * returned by posix_fallocate. Each call site must handle it: an error with
 * a detail (shmcfg__nomem() for the heap), nothing leaked, nothing half-made.
 * jansson allocates through the seam too (json_set_alloc_funcs), but its
 * parser counts as one call that fails whole (json_error_out_of_memory):
 * jansson 2.14's lexer drops a byte when its buffer cannot grow and reports
 * a failed allocation as a syntax error, which no caller can tell apart.
 */
/*
 * calloc for the library's small blocks: glibc's calloc never takes a block
 * from the thread cache (it runs _int_malloc, ~400 instructions: a commit's
 * transaction paid them), so up to 1 KiB it is malloc + memset. Larger
 * blocks keep calloc, which need not zero the fresh pages of an mmap.
 */
static inline void *shmcfg__calloc_fast(size_t n, size_t size)
{
	size_t bytes;
	if (__builtin_mul_overflow(n, size, &bytes) || bytes > 1024)
		return calloc(n, size); /* its own overflow check fails with ENOMEM */
	void *p = malloc(bytes ? bytes : 1);
	/* hide p's origin, or gcc folds the malloc + memset back into calloc */
	__asm__("" : "+r"(p));
	return p ? memset(p, 0, bytes) : NULL;
}

#ifdef SHMCFG_WITH_FAULTS
void *shmcfg__malloc(size_t n);
void *shmcfg__calloc(size_t n, size_t size);
void *shmcfg__realloc(void *p, size_t n);
char *shmcfg__strdup(const char *s);
char *shmcfg__strndup(const char *s, size_t n);
int shmcfg__asprintf(char **ret, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void shmcfg__free(void *p);
/* Memory the library keeps for reuse (a thread's spare transaction) is no
 * allocation while kept: the seam forgets it, and takes it up again when
 * it is reused as an allocation that may fail (false: treat as ENOMEM). */
void shmcfg__faultsim_forget(const void *p);
bool shmcfg__faultsim_adopt(void *p, size_t n);
#define shmcfg__seam_forget(p) shmcfg__faultsim_forget(p)
#define shmcfg__seam_adopt(p, n) shmcfg__faultsim_adopt(p, n)
void *shmcfg__mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
int shmcfg__madvise(void *addr, size_t len, int advice);
int shmcfg__ftruncate(int fd, off_t len);
int shmcfg__posix_fallocate(int fd, off_t off, off_t len);
struct json_t;
struct json_error_t;
struct json_t *shmcfg__json_loads(const char *text, size_t flags, struct json_error_t *e);
struct json_t *shmcfg__json_loadb(const char *buf, size_t len, size_t flags, struct json_error_t *e);
#else
#define shmcfg__malloc(n) malloc(n)
#define shmcfg__calloc(n, size) shmcfg__calloc_fast(n, size)
#define shmcfg__realloc(p, n) realloc(p, n)
#define shmcfg__strdup(s) strdup(s)
#define shmcfg__strndup(s, n) strndup(s, n)
#define shmcfg__asprintf asprintf
#define shmcfg__free(p) free(p)
#define shmcfg__seam_forget(p) ((void)(p))
#define shmcfg__seam_adopt(p, n) ((void)(p), (void)(n), true)
#define shmcfg__mmap(addr, len, prot, flags, fd, off) mmap(addr, len, prot, flags, fd, off)
#define shmcfg__madvise(addr, len, advice) madvise(addr, len, advice)
#define shmcfg__ftruncate(fd, len) ftruncate(fd, len)
#define shmcfg__posix_fallocate(fd, off, len) posix_fallocate(fd, off, len)
#define shmcfg__json_loads(text, flags, e) json_loads(text, flags, e)
#define shmcfg__json_loadb(buf, len, flags, e) json_loadb(buf, len, flags, e)
#endif

#endif
