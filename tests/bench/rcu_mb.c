/* SPDX-License-Identifier: MIT */
/* urcu-mb (full memory barriers; readers must register), read side inline. */
#define _LGPL_SOURCE
#include <urcu/urcu-mb.h>

#define RCU_LOCK() urcu_mb_read_lock()
#define RCU_UNLOCK() urcu_mb_read_unlock()
#define RCU_DEREF(p) rcu_dereference(p)
#define RCU_REGISTER() urcu_mb_register_thread()
#define RCU_NAME(x) bench_rcu_mb_##x
#include "rcu_flavour.h"
