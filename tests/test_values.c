/* SPDX-License-Identifier: MIT */
/* Values: canonical sets, equality, error names (parsing and formatting:
 * the cases of tests/cases/value). */
#include <errno.h>
#include <math.h>

#include "common.h"

/* Parsing and formatting, case by case: tests/cases/value (tests/test_cases.c). */

/* A set from items: canonical (sorted, no duplicates); not for other types. */
static void test_value_list(void **state)
{
	(void)state;
	const char *items[] = {"q", "p", "q"};
	shmcfg_value v;
	assert_int_equal(shmcfg_value_list(SHMCFG_SET, items, 3, &v), 0);
	assert_int_equal(v.u.list.count, 2);
	assert_string_equal(shmcfg_list_next(&v, NULL), "p");
	assert_string_equal(shmcfg_list_next(&v, shmcfg_list_next(&v, NULL)), "q");
	assert_null(shmcfg_list_next(&v, v.u.list.items + 2));
	shmcfg_value_clear(&v);
	assert_int_equal(shmcfg_value_list(SHMCFG_INT, items, 3, &v), -EINVAL);
}

static void test_equal(void **state)
{
	(void)state;
	shmcfg_value a = {.type = SHMCFG_FLOAT, .u.f = NAN}, b = a;
	assert_true(shmcfg_value_equal(&a, &b)); /* bitwise: NaN equals itself */
	b.u.f = 1.0;
	assert_false(shmcfg_value_equal(&a, &b));
	shmcfg_value n1 = {.type = SHMCFG_INT, .is_null = true}, n2 = n1;
	n2.u.i = 5; /* payload of a null does not matter */
	assert_true(shmcfg_value_equal(&n1, &n2));
}

static void test_errors(void **state)
{
	(void)state;
	assert_string_equal(shmcfg_errname(SHMCFG_E_BUSY), "SHMCFG_E_BUSY");
	assert_string_equal(shmcfg_errname(-ENOENT), "ENOENT");
	assert_non_null(strstr(shmcfg_strerror(SHMCFG_E_VERSION), "layout version"));
	assert_non_null(strstr(shmcfg_strerror(-ENOENT), "No such file"));
	int maj = -1;
	assert_string_equal(shmcfg_version(&maj, NULL, NULL), SHMCFG_VERSION_STRING);
	assert_int_equal(maj, SHMCFG_VERSION_MAJOR);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_value_list),
		cmocka_unit_test(test_equal),
		cmocka_unit_test(test_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
