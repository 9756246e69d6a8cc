/* SPDX-License-Identifier: MIT */
/*
 * The control of the resource seam (lib/internal.h, lib/base/fault.c): fail the
 * Nth allocation, mmap, ftruncate or fallocate of the library, and count
 * what is still allocated. Only the test copy of the library,
 * lib/libshmcfg-test.la (built with SHMCFG_WITH_FAULTS), defines these; the
 * installed library has neither the functions nor the seam.
 *
 * A sweep, as SQLite's FAULTSIM loops and libuv's OOM tests: for N = 1, 2,
 * ... arm the seam with N, run the operation, disarm; the first N for which
 * nothing was injected (shmcfg__faultsim_failures() == 0) is the run that
 * made fewer than N calls, and it must succeed.
 */
#ifndef SHMCFG_TEST_FAULTSIM_H
#define SHMCFG_TEST_FAULTSIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SHMCFG_FAULTSIM_API __attribute__((visibility("default")))

/* The kinds of calls the seam counts and fails. */
enum {
	SHMCFG_FAULTSIM_ALLOC = 1u,     /* malloc, calloc, realloc, strdup, strndup, asprintf,
					 * jansson's (its parser: one call, lib/internal.h) */
	SHMCFG_FAULTSIM_MMAP = 2u,      /* mmap(2), madvise(2) (the schema's private copy) */
	SHMCFG_FAULTSIM_FTRUNCATE = 4u, /* ftruncate(2) */
	SHMCFG_FAULTSIM_FALLOCATE = 8u, /* posix_fallocate(3) */
	SHMCFG_FAULTSIM_ALL = 15u,
};

/*
 * Arm the seam: from now, count the calls of the kinds in @p kinds; the
 * @p nth of them fails, and with @p persistent every later one too.
 * nth = 0 disarms (calls of every kind then succeed, and counting stops).
 * Arming resets the counters below. The first call also starts the table of
 * live allocations (and routes jansson's allocations through the seam).
 */
SHMCFG_FAULTSIM_API void shmcfg__faultsim(unsigned kinds, unsigned long nth, bool persistent);
/* Schemas up to this many bytes are copied whole at attach (lib/schema/
 * validate.c); 0: every schema page by page at first use, as a big one. */
extern SHMCFG_FAULTSIM_API size_t shmcfg__schema_eager_bytes;
/* Schemas over this many bytes get a validated copy per user (lib/schema/
 * vcopy.c); SIZE_MAX: none, 0: every schema. */
extern SHMCFG_FAULTSIM_API size_t shmcfg__vcopy_min_bytes;
/* Calls of the armed kinds since the seam was armed. */
SHMCFG_FAULTSIM_API unsigned long shmcfg__faultsim_calls(void);
/* Failures injected since the seam was armed. */
SHMCFG_FAULTSIM_API unsigned long shmcfg__faultsim_failures(void);
/* The application freed p (the library's result: a dump, a formatted
 * value) with free(3): forget it, as shmcfg__free() would have. */
SHMCFG_FAULTSIM_API void shmcfg__faultsim_forget(const void *p);
/* The serial number the next allocation will get: a mark to count from. */
SHMCFG_FAULTSIM_API uint64_t shmcfg__faultsim_mark(void);
/*
 * Allocations made through the seam since @p mark and not freed through it;
 * @p fn (may be NULL) is called with each one's address, size and serial.
 */
SHMCFG_FAULTSIM_API size_t shmcfg__faultsim_outstanding(uint64_t mark,
							 void (*fn)(const void *p, size_t size, uint64_t serial,
								    void *ud),
							 void *ud);

#endif
