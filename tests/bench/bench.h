/*
 * Declarations shared by the benchmark (bench.c) and its helpers: the -fPIC
 * shared library (plainlib.c, rcu_*.c built with BENCH_SO) and the liburcu
 * read sides built into the executable (rcu_*.c without BENCH_SO).
 */
#ifndef SHMCFG_BENCH_H
#define SHMCFG_BENCH_H

#include <stdint.h>

/* A compiler barrier: every value the loop reads must be loaded again. */
#define BENCH_BARRIER() __asm__ __volatile__("" ::: "memory")

#if defined(__GNUC__)
#define BENCH_EXPORT __attribute__((visibility("default")))
#else
#define BENCH_EXPORT
#endif

/* plainlib.c, in libbenchso.so: the floor of any non-inline getter. */
BENCH_EXPORT int64_t plain_get(void);
BENCH_EXPORT void plain_set(int64_t v);

/*
 * liburcu read sides (rcu_flavour.h): a read-side section around one pointer
 * load and one load through it. In the executable (inline with _LGPL_SOURCE,
 * except bpcall which calls liburcu-bp's exported functions, as libshmcfg
 * does) each flavour has a loop; in libbenchso.so each has an exported getter
 * that the executable calls once per read.
 */
#define BENCH_RCU_DECL(fl)                                                  \
	void bench_rcu_##fl##_setup(void);                                   \
	int64_t bench_rcu_##fl##_get(void);                                  \
	uint64_t bench_rcu_##fl##_loop(long n);                              \
	BENCH_EXPORT void bench_rcu_##fl##_setup_so(void);                   \
	BENCH_EXPORT int64_t bench_rcu_##fl##_get_so(void);
BENCH_RCU_DECL(bp)
BENCH_RCU_DECL(bpcall)
BENCH_RCU_DECL(memb)
BENCH_RCU_DECL(mb)
#undef BENCH_RCU_DECL

#endif
