/* SPDX-License-Identifier: MIT */
/* urcu-memb (sys_membarrier; readers must register), read side inline. */
#define _LGPL_SOURCE
#include <urcu/urcu-memb.h>

#define RCU_LOCK() urcu_memb_read_lock()
#define RCU_UNLOCK() urcu_memb_read_unlock()
#define RCU_DEREF(p) rcu_dereference(p)
#define RCU_REGISTER() urcu_memb_register_thread()
#define RCU_NAME(x) bench_rcu_memb_##x
#include "rcu_flavour.h"
