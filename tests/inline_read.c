/* SPDX-License-Identifier: MIT */
/* Compiled at -O2 and disassembled by tests/check_inline.sh: the inline
 * getters' straight line must hold no call, no locked instruction and no
 * syscall (the slow path is cold and lives in a .cold part). */
#include "shmcfg.h"

int64_t read_int(const shmcfg *h);
int64_t read_int(const shmcfg *h)
{
	int64_t v = 0;
	(void)!shmcfg_get_int(h, 3, &v);
	return v;
}

int read_bool(const shmcfg *h);
int read_bool(const shmcfg *h)
{
	bool b = false;
	(void)!shmcfg_get_bool(h, 1, &b);
	return b;
}

double read_float(const shmcfg *h);
double read_float(const shmcfg *h)
{
	double d = 0;
	(void)!shmcfg_get_float(h, 2, &d);
	return d;
}

uint64_t read_generation(const shmcfg *h);
uint64_t read_generation(const shmcfg *h)
{
	return shmcfg_generation(h);
}
