/* SPDX-License-Identifier: MIT */
/* The test schema: every type and attribute. Shared by the cmocka tests
 * (common.h) and the fuzz targets (fuzz.h, which build without cmocka). */
#ifndef SHMCFG_TEST_SCHEMA_H
#define SHMCFG_TEST_SCHEMA_H

#include "shmcfg.h"

/* Options of the test schema, in declaration order (= handles). */
enum {
	T_A, T_B, T_C, T_FLAG, T_RATIO, T_MODE, T_ITEMS, T_TAGS, T_OPT_INT, T_KNOBBED,
	T_ALIAS_A, T_ALIAS2, T_DEBUG, T_SAFE, T_ENV_D, T_ENV_F, T_COUNT
};

static const shmcfg_optdef test_opts[T_COUNT] = {
	{.name = "t.a", .type = SHMCFG_INT, .def = "0", .doc = "a = n"},
	{.name = "t.b", .type = SHMCFG_INT, .def = "0", .doc = "b = -n"},
	{.name = "t.c", .type = SHMCFG_STR, .def = "\"0\"", .doc = "c = str(n)"},
	{.name = "t.flag", .type = SHMCFG_BOOL, .def = "false"},
	{.name = "t.ratio", .type = SHMCFG_FLOAT, .def = "0.5", .min = "0", .max = "1"},
	{.name = "t.mode", .type = SHMCFG_STR, .def = "\"fast\"", .choices = "[\"fast\",\"slow\"]"},
	{.name = "t.items", .type = SHMCFG_LIST, .def = "[\"x\",\"y\"]"},
	{.name = "t.tags", .type = SHMCFG_SET, .def = "[]", .flags = SHMCFG_F_HASH_IGNORED},
	{.name = "t.opt_int", .type = SHMCFG_INT, .flags = SHMCFG_F_NULLABLE, .min = "-5", .max = "100"},
	{.name = "t.knobbed", .type = SHMCFG_BOOL, .knob = "team/flag:knobbed"},
	{.name = "t.alias_a", .type = SHMCFG_INT, .alias = "t.a"},
	{.name = "t.alias2", .type = SHMCFG_INT, .alias = "t.alias_a"},
	{.name = "t.debug", .type = SHMCFG_BOOL, .implies = "t.flag=true; t.mode=slow"},
	{.name = "t.safe", .type = SHMCFG_BOOL, .implies = "t.mode=fast"},
	{.name = "t.env_d", .type = SHMCFG_INT, .def = "1", .env_default = "[\"T_ENVD1\",\"T_ENVD2\"]"},
	{.name = "t.env_f", .type = SHMCFG_BOOL, .env_force = "T_ENVF"},
};

#endif
