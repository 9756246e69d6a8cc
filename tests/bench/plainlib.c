/* SPDX-License-Identifier: MIT */
/*
 * The floor for any non-inline getter: an exported function of a -fPIC
 * shared library that only loads a global. Every getter that is not inline
 * in the caller costs at least this call (PLT, GOT, call, return).
 */
#include "bench.h"

static int64_t plain_value = 42;

int64_t plain_get(void)
{
	return plain_value;
}

void plain_set(int64_t v)
{
	plain_value = v;
}
