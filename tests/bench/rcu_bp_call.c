/* SPDX-License-Identifier: MIT */
/* urcu-bp through liburcu-bp's exported functions (no _LGPL_SOURCE): what
 * libshmcfg's snapshot path does (lib/read/reclaim.c). */
#include <urcu/urcu-bp.h>

#define RCU_LOCK() urcu_bp_read_lock()
#define RCU_UNLOCK() urcu_bp_read_unlock()
#define RCU_DEREF(p) urcu_bp_dereference(p)
#define RCU_REGISTER() ((void)0)
#define RCU_NAME(x) bench_rcu_bpcall_##x
#include "rcu_flavour.h"
