/* Value parsing, formatting, equality and canonical sets. */
#include <errno.h>
#include <math.h>

#include "common.h"

static void parse_ok(shmcfg_type t, bool nullable, const char *text, const char *json)
{
	shmcfg_value v;
	int r = shmcfg_value_parse(t, nullable, text, &v);
	if (r)
		fail_msg("parse %s '%s': %s", shmcfg_type_name(t), text, shmcfg_errdetail());
	char *out;
	assert_int_equal(shmcfg_value_format(&v, &out), 0);
	assert_string_equal(out, json);
	free(out);
	shmcfg_value_clear(&v);
}

static void parse_bad(shmcfg_type t, bool nullable, const char *text)
{
	shmcfg_value v;
	int r = shmcfg_value_parse(t, nullable, text, &v);
	if (r != SHMCFG_E_PARSE)
		fail_msg("parse %s '%s' gave %d, expected a parse error", shmcfg_type_name(t), text, r);
	/* the detail names the value */
	assert_non_null(strstr(shmcfg_errdetail(), "is not a valid"));
}

static void test_bool(void **state)
{
	(void)state;
	parse_ok(SHMCFG_BOOL, false, "1", "true");
	parse_ok(SHMCFG_BOOL, false, "0", "false");
	parse_ok(SHMCFG_BOOL, false, "TRUE", "true");
	parse_ok(SHMCFG_BOOL, false, "False", "false");
	parse_ok(SHMCFG_BOOL, true, "none", "null");
	parse_bad(SHMCFG_BOOL, false, "yes");
	parse_bad(SHMCFG_BOOL, false, "");
	parse_bad(SHMCFG_BOOL, false, " 1");
	parse_bad(SHMCFG_BOOL, false, "none"); /* not nullable */
}

static void test_int(void **state)
{
	(void)state;
	parse_ok(SHMCFG_INT, false, "8", "8");
	parse_ok(SHMCFG_INT, false, "-9223372036854775808", "-9223372036854775808");
	parse_ok(SHMCFG_INT, false, "0x10", "16");
	parse_ok(SHMCFG_INT, false, "0", "0");
	parse_bad(SHMCFG_INT, false, "9223372036854775808"); /* overflow */
	parse_bad(SHMCFG_INT, false, "1.5");
	parse_bad(SHMCFG_INT, false, "");
	parse_bad(SHMCFG_INT, false, "010"); /* no silent octal */
	parse_bad(SHMCFG_INT, false, "12abc");
	parse_bad(SHMCFG_INT, false, " 3");
}

static void test_float(void **state)
{
	(void)state;
	parse_ok(SHMCFG_FLOAT, false, "1.5", "1.5");
	parse_ok(SHMCFG_FLOAT, false, "2", "2.0");
	parse_ok(SHMCFG_FLOAT, false, "nan", "nan");
	parse_ok(SHMCFG_FLOAT, false, "-inf", "-inf");
	parse_bad(SHMCFG_FLOAT, false, "1e999");
	parse_bad(SHMCFG_FLOAT, false, "x");
	parse_bad(SHMCFG_FLOAT, false, "");
}

static void test_str(void **state)
{
	(void)state;
	parse_ok(SHMCFG_STR, false, "hello world", "\"hello world\"");
	parse_ok(SHMCFG_STR, false, "1", "\"1\""); /* a string keeps "1" */
	parse_ok(SHMCFG_STR, true, "none", "null");
	parse_ok(SHMCFG_STR, true, "\"none\"", "\"none\""); /* quoted: the text none */
	parse_ok(SHMCFG_STR, false, "\"a\\tb\"", "\"a\\tb\"");
	parse_ok(SHMCFG_STR, false, "", "\"\"");
	parse_bad(SHMCFG_STR, false, "\"unterminated");
}

static void test_lists(void **state)
{
	(void)state;
	parse_ok(SHMCFG_LIST, false, "b, a ,b", "[\"b\",\"a\",\"b\"]");
	parse_ok(SHMCFG_SET, false, "b, a ,b", "[\"a\",\"b\"]");
	parse_ok(SHMCFG_SET, false, "[\"z\",\"y\",\"z\"]", "[\"y\",\"z\"]");
	parse_ok(SHMCFG_LIST, false, "", "[]");
	parse_ok(SHMCFG_LIST, false, "[]", "[]");
	parse_bad(SHMCFG_LIST, false, "[1,2]");
	parse_bad(SHMCFG_LIST, false, "[\"a\"");
	parse_bad(SHMCFG_LIST, false, "[\"a\\u0000b\"]"); /* embedded NUL */

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
		cmocka_unit_test(test_bool),  cmocka_unit_test(test_int),   cmocka_unit_test(test_float),
		cmocka_unit_test(test_str),   cmocka_unit_test(test_lists), cmocka_unit_test(test_equal),
		cmocka_unit_test(test_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
