/* SPDX-License-Identifier: MIT */
/*
 * One liburcu flavour's read side, as a reader of a configuration would use
 * it: a read-side section around rcu_dereference() of a global pointer and
 * one load through it. Included by rcu_bp.c, rcu_bp_call.c, rcu_memb.c and
 * rcu_mb.c, which first include the flavour's header and define
 *   RCU_LOCK(), RCU_UNLOCK(), RCU_DEREF(p), RCU_REGISTER(), RCU_NAME(x).
 *
 * Built into the executable the read side is inline (with _LGPL_SOURCE) and
 * its thread-local state is reached by the initial-exec TLS model; built
 * into libbenchso.so (BENCH_SO) it sits behind an exported getter, where a
 * -fPIC object reaches liburcu's TLS through __tls_get_addr.
 */
#include <stdlib.h>

#include "bench.h"

#ifdef BENCH_SO
#define RFN(x) RCU_NAME(x##_so)
#else
#define RFN(x) RCU_NAME(x)
#endif

static int64_t *rcu_ptr;

#ifdef BENCH_SO
BENCH_EXPORT void RFN(setup)(void);
BENCH_EXPORT int64_t RFN(get)(void);
#endif

/* Publish the value to read. The executable's setup also registers the
 * calling thread where the flavour needs it (memb, mb; bp registers itself on
 * first use): call it first, once per thread. */
void RFN(setup)(void)
{
	static int64_t value = 42;
#ifndef BENCH_SO
	RCU_REGISTER();
#endif
	rcu_set_pointer(&rcu_ptr, &value);
}

static inline int64_t rcu_read_one(void)
{
	RCU_LOCK();
	int64_t *p = RCU_DEREF(rcu_ptr);
	int64_t v = *p;
	RCU_UNLOCK();
	return v;
}

int64_t RFN(get)(void)
{
	return rcu_read_one();
}

#ifndef BENCH_SO
__attribute__((noinline)) uint64_t RFN(loop)(long n)
{
	uint64_t acc = 0;
	for (long i = 0; i < n; i++) {
		BENCH_BARRIER();
		acc += (uint64_t)rcu_read_one();
	}
	return acc;
}
#endif
