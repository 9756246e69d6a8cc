/*
 * The benchmark's own schema and its typed accessors, in the form a schema
 * code generator should emit (hand-written here; no such generator exists
 * yet, see doc/benchmarks.md "Generated accessors"):
 *
 *  - one compile-time handle per option (its index in declaration order,
 *    which is what shmcfg handles are);
 *  - one static inline accessor per option that calls the inline typed
 *    getter with the constant handle and returns the schema default if the
 *    read fails, so a hot path has nothing to check;
 *  - a check, run once after attach, that every constant handle still names
 *    the option of that name and type (a real generator would also embed the
 *    16-byte schema hash and pass it to shmcfg_attach()).
 */
#ifndef SHMCFG_BENCH_SCHEMA_H
#define SHMCFG_BENCH_SCHEMA_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "shmcfg.h"

#define BENCH_OPT_X 0       /* bench.x: int, default 7 */
#define BENCH_OPT_ENABLED 1 /* bench.enabled: bool, default false */
#define BENCH_OPT_RATIO 2   /* bench.ratio: float, default 0.25 */
#define BENCH_OPT_LABEL 3   /* bench.label: str, default "bench" */
#define BENCH_NOPTS 16

static const shmcfg_optdef bench_schema_defs[BENCH_NOPTS] = {
	{.name = "bench.x", .type = SHMCFG_INT, .def = "7", .doc = "the option the hot reads read"},
	{.name = "bench.enabled", .type = SHMCFG_BOOL, .def = "false", .doc = "a feature flag"},
	{.name = "bench.ratio", .type = SHMCFG_FLOAT, .def = "0.25", .doc = "a float option"},
	{.name = "bench.label", .type = SHMCFG_STR, .def = "bench", .doc = "a string option"},
	{.name = "bench.filler.a04", .type = SHMCFG_INT, .def = "4"},
	{.name = "bench.filler.a05", .type = SHMCFG_INT, .def = "5"},
	{.name = "bench.filler.a06", .type = SHMCFG_INT, .def = "6"},
	{.name = "bench.filler.a07", .type = SHMCFG_INT, .def = "7"},
	{.name = "bench.filler.a08", .type = SHMCFG_BOOL, .def = "true"},
	{.name = "bench.filler.a09", .type = SHMCFG_BOOL, .def = "false"},
	{.name = "bench.filler.a10", .type = SHMCFG_FLOAT, .def = "1.5"},
	{.name = "bench.filler.a11", .type = SHMCFG_FLOAT, .def = "2.5"},
	{.name = "bench.filler.a12", .type = SHMCFG_STR, .def = "twelve"},
	{.name = "bench.filler.a13", .type = SHMCFG_STR, .def = "thirteen"},
	{.name = "bench.filler.a14", .type = SHMCFG_INT, .def = "14"},
	{.name = "bench.filler.a15", .type = SHMCFG_INT, .def = "15"},
};

static inline int64_t bench_x(const shmcfg *h)
{
	int64_t v;
	return shmcfg_get_int(h, BENCH_OPT_X, &v) == 0 ? v : INT64_C(7);
}

static inline bool bench_enabled(const shmcfg *h)
{
	bool v;
	return shmcfg_get_bool(h, BENCH_OPT_ENABLED, &v) == 0 ? v : false;
}

static inline double bench_ratio(const shmcfg *h)
{
	double v;
	return shmcfg_get_float(h, BENCH_OPT_RATIO, &v) == 0 ? v : 0.25;
}

/* 0 if every compile-time handle names its option with its type in @p h. */
static inline int bench_schema_check(const shmcfg *h)
{
	for (shmcfg_opt i = 0; i < BENCH_NOPTS; i++) {
		shmcfg_opt o;
		shmcfg_optinfo info;
		int r = shmcfg_lookup(h, bench_schema_defs[i].name, &o);
		if (r)
			return r;
		if (o != i)
			return SHMCFG_E_SCHEMA;
		if ((r = shmcfg_opt_info(h, o, &info)))
			return r;
		if (info.type != bench_schema_defs[i].type)
			return SHMCFG_E_TYPE;
	}
	return shmcfg_count(h) == BENCH_NOPTS ? 0 : SHMCFG_E_SCHEMA;
}

#endif
