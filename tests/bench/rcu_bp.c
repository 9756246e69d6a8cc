/* SPDX-License-Identifier: MIT */
/* urcu-bp (the flavour libshmcfg uses for snapshots), read side inline. */
#define _LGPL_SOURCE
#include <urcu/urcu-bp.h>

#define RCU_LOCK() urcu_bp_read_lock()
#define RCU_UNLOCK() urcu_bp_read_unlock()
#define RCU_DEREF(p) rcu_dereference(p)
#define RCU_REGISTER() ((void)0)
#define RCU_NAME(x) bench_rcu_bp_##x
#include "rcu_flavour.h"
