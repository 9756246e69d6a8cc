/* SPDX-License-Identifier: MIT */
/* Bad input through every door of the API, and hostile segments.
 *
 * Every bad value is refused with its own error code and a detail naming the
 * option, through the transaction API (shmcfg_txn_set with hand-built
 * values, shmcfg_txn_set_text), shmcfg_load and thread patches; and none
 * changes the configuration (generation and config hash as before, the
 * other changes of the same load not applied):
 *   wrong types, out-of-range and overflowing numbers, NaN and infinities
 *   where a range forbids them (and accepted where none does), over-long
 *   names and strings (> 1 MiB), embedded NUL, invalid UTF-8 in strings and
 *   list items, unknown options, nulls that are not allowed, and a full
 *   value heap.
 *
 * Hostile segments (the library's own structures, written through
 * lib/internal.h as a misbehaving process would): a reader never crashes or
 * hangs, and a commit never builds on a corrupt generation.
 *
 * Some tests check a property that a library bug once broke: their comments
 * name the entry of doc/reliability.md ("Errors found", E1 to E11) that
 * describes the bug and its fix.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include "common.h"
#include "internal.h"
#include "slot.h"

static char seg[64];
static shmcfg *h;

static int setup(void **state)
{
	(void)state;
	snprintf(seg, sizeof seg, "%s", test_name("badinput"));
	h = test_create(seg, &(shmcfg_create_opts){.heap_bytes = 4096});
	shmcfg_set_commit_timeout(h, 500);
	shmcfg_set_heap_growth(h, false); /* a full heap must fail, changing nothing */
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	/* a failed test may leave a patch frame of h in this thread */
	while (shmcfg_patch_pop(h) == 0)
		;
	h = shmcfg_close(h);
	(void)shmcfg_unlink(seg);
	char other[80];
	snprintf(other, sizeof other, "%s-free", seg);
	(void)shmcfg_unlink(other);
	snprintf(other, sizeof other, "%s-idle", seg);
	(void)shmcfg_unlink(other);
	return 0;
}

/* The configuration as it stands: generation and config hash. */
struct state {
	uint64_t gen;
	uint8_t hash[16];
	int64_t a;
};

static struct state now(void)
{
	struct state s;
	s.gen = shmcfg_config_hash(h, s.hash);
	s.a = get_i(h, T_A);
	return s;
}

static void assert_unchanged(const struct state *before, const char *what)
{
	struct state after = now();
	if (after.gen != before->gen || memcmp(after.hash, before->hash, 16) || after.a != before->a)
		fail_msg("%s changed the configuration: generation %" PRIu64 " -> %" PRIu64, what,
			 before->gen, after.gen);
}

static void assert_detail_names(const char *what, const char *needle)
{
	if (!strstr(shmcfg_errdetail(), needle))
		fail_msg("%s: the detail does not name '%s': %s", what, needle, shmcfg_errdetail());
}

/*
 * A hand-built value for option opt must be refused by shmcfg_txn_set with
 * `code` (detail naming the option), by shmcfg_patch_set the same way, and
 * must change nothing (the refusal poisons the transaction: test_api.c).
 */
static void refuse_value(shmcfg_opt opt, const shmcfg_value *v, int code, const char *what)
{
	const char *name = test_opts[opt].name;
	struct state before = now();
	shmcfg_txn *t;
	assert_int_equal(shmcfg_txn_begin(h, &t), 0);
	assert_int_equal(shmcfg_txn_set_int(t, T_A, before.a + 1), 0);
	int r = shmcfg_txn_set(t, opt, v);
	if (r != code)
		fail_msg("%s for %s: txn_set gave %d (%s), expected %s", what, name, r,
			 shmcfg_errname(r), shmcfg_errname(code));
	assert_detail_names(what, name);
	shmcfg_txn_abort(t);
	assert_unchanged(&before, what);
	/* the same through a patch: refused, and the thread's reads unaffected */
	assert_int_equal(shmcfg_patch_push(h), 0);
	r = shmcfg_patch_set(h, opt, v);
	if (r != code)
		fail_msg("%s for %s: patch_set gave %d (%s), expected %s", what, name, r,
			 shmcfg_errname(r), shmcfg_errname(code));
	assert_int_equal(get_i(h, T_A), before.a);
	assert_int_equal(shmcfg_patch_pop(h), 0);
}

/* Text for option opt refused by txn_set_text and by a load (with a good
 * change of t.a in the same load, which must not be applied either). */
static void refuse_text(shmcfg_opt opt, const char *text, const char *json, int code)
{
	const char *name = test_opts[opt].name;
	struct state before = now();
	if (text) {
		shmcfg_txn *t;
		assert_int_equal(shmcfg_txn_begin(h, &t), 0);
		int r = shmcfg_txn_set_text(t, opt, text);
		if (r != code)
			fail_msg("set_text %s='%.60s': %d (%s), expected %s", name, text, r,
				 shmcfg_errname(r), shmcfg_errname(code));
		assert_detail_names(text, name);
		/* the refusal poisons the transaction: the commit repeats it */
		assert_int_equal(shmcfg_txn_commit(t, NULL), code);
		assert_detail_names(text, name);
		assert_unchanged(&before, text);
	}
	if (json) {
		char doc[512];
		/* a good change of another option first: it must not be applied */
		snprintf(doc, sizeof doc, "{\"%s\": %" PRId64 ", \"%s\": %s}", opt == T_A ? "t.alias_a" : "t.a",
			 before.a + 1, name, json);
		int r = shmcfg_load(h, doc, strlen(doc), NULL, NULL, NULL);
		if (r != code)
			fail_msg("load %s: %d (%s), expected %s", doc, r, shmcfg_errname(r),
				 shmcfg_errname(code));
		/* JSON that jansson refuses is named by line and column */
		if (!strstr(shmcfg_errdetail(), "JSON line"))
			assert_detail_names(doc, name);
		assert_unchanged(&before, doc);
	}
}

/* ------------------------------------------------------------------ */
/* Types                                                              */
/* ------------------------------------------------------------------ */

static void test_wrong_types(void **state)
{
	(void)state;
	shmcfg_value v = {.type = SHMCFG_BOOL, .u.b = true};
	refuse_value(T_A, &v, SHMCFG_E_TYPE, "bool for an int");
	v = (shmcfg_value){.type = SHMCFG_FLOAT, .u.f = 1.0};
	refuse_value(T_A, &v, SHMCFG_E_TYPE, "float for an int");
	v = (shmcfg_value){.type = SHMCFG_STR, .u.str = {"5", 1}};
	refuse_value(T_A, &v, SHMCFG_E_TYPE, "str for an int");
	v = (shmcfg_value){.type = SHMCFG_STR, .u.str = {"x", 1}};
	refuse_value(T_ITEMS, &v, SHMCFG_E_TYPE, "str for a list");
	v = (shmcfg_value){.type = SHMCFG_LIST, .u.list = {"x", 1, 2}};
	refuse_value(T_C, &v, SHMCFG_E_TYPE, "list for a str");
	v = (shmcfg_value){.type = SHMCFG_SET, .u.list = {"x", 1, 2}};
	refuse_value(T_ITEMS, &v, SHMCFG_E_TYPE, "set for a list");
	v = (shmcfg_value){.type = (shmcfg_type)0};
	refuse_value(T_A, &v, SHMCFG_E_TYPE, "type 0");
	v = (shmcfg_value){.type = (shmcfg_type)99, .u.i = 1};
	refuse_value(T_A, &v, SHMCFG_E_TYPE, "type 99");
	refuse_text(T_A, "true", NULL, SHMCFG_E_PARSE);
	refuse_text(T_A, NULL, "true", SHMCFG_E_TYPE);
	refuse_text(T_A, "1.5", NULL, SHMCFG_E_PARSE);
	refuse_text(T_A, NULL, "1.5", SHMCFG_E_TYPE);
	refuse_text(T_A, NULL, "\"5\"", SHMCFG_E_TYPE);
	refuse_text(T_FLAG, "yes", NULL, SHMCFG_E_PARSE);
	refuse_text(T_FLAG, NULL, "1", SHMCFG_E_TYPE);
	refuse_text(T_FLAG, NULL, "\"true\"", SHMCFG_E_TYPE);
	refuse_text(T_ITEMS, "[1, 2]", NULL, SHMCFG_E_PARSE);
	refuse_text(T_ITEMS, NULL, "[1, 2]", SHMCFG_E_TYPE);
	refuse_text(T_ITEMS, NULL, "\"a,b\"", SHMCFG_E_TYPE);
	/* an int for a float option is the one conversion allowed */
	shmcfg_txn *t;
	assert_int_equal(shmcfg_txn_begin(h, &t), 0);
	assert_int_equal(shmcfg_txn_set_int(t, T_RATIO, 1), 0);
	assert_int_equal(shmcfg_txn_commit(t, NULL), 0);
	shmcfg_value r;
	assert_int_equal(shmcfg_get(h, T_RATIO, &r), 0);
	assert_int_equal(r.type, SHMCFG_FLOAT);
	assert_true(r.u.f == 1.0);
}

/* ------------------------------------------------------------------ */
/* Numbers                                                            */
/* ------------------------------------------------------------------ */

static void test_numbers_out_of_range(void **state)
{
	(void)state;
	/* overflow of int64 */
	refuse_text(T_A, "9223372036854775808", NULL, SHMCFG_E_PARSE);
	refuse_text(T_A, "-9223372036854775809", NULL, SHMCFG_E_PARSE);
	refuse_text(T_A, "0x10000000000000000", NULL, SHMCFG_E_PARSE);
	refuse_text(T_A, NULL, "9223372036854775808", SHMCFG_E_PARSE);
	refuse_text(T_A, NULL, "1e400", SHMCFG_E_PARSE);
	/* not integers */
	refuse_text(T_A, "", NULL, SHMCFG_E_PARSE);
	refuse_text(T_A, " 5", NULL, SHMCFG_E_PARSE);
	refuse_text(T_A, "5 ", NULL, SHMCFG_E_PARSE);
	refuse_text(T_A, "007", NULL, SHMCFG_E_PARSE);
	refuse_text(T_A, "0x", NULL, SHMCFG_E_PARSE);
	refuse_text(T_A, "12abc", NULL, SHMCFG_E_PARSE);
	/* ranges: t.opt_int is -5..100 */
	refuse_text(T_OPT_INT, "-6", "-6", SHMCFG_E_RANGE);
	refuse_text(T_OPT_INT, "101", "101", SHMCFG_E_RANGE);
	refuse_text(T_OPT_INT, "-9223372036854775808", "-9223372036854775808", SHMCFG_E_RANGE);
	shmcfg_value v = {.type = SHMCFG_INT, .u.i = INT64_MAX};
	refuse_value(T_OPT_INT, &v, SHMCFG_E_RANGE, "INT64_MAX");
	/* floats: overflow, and t.ratio's range 0..1 */
	refuse_text(T_RATIO, "1e999", NULL, SHMCFG_E_PARSE);
	refuse_text(T_RATIO, "1.0000001", "1.0000001", SHMCFG_E_RANGE);
	refuse_text(T_RATIO, "-0.5", "-0.5", SHMCFG_E_RANGE);
	v = (shmcfg_value){.type = SHMCFG_INT, .u.i = 2};
	refuse_value(T_RATIO, &v, SHMCFG_E_RANGE, "an int beyond a float's range");
	/* the bounds themselves are in range */
	shmcfg_txn *t;
	assert_int_equal(shmcfg_txn_begin(h, &t), 0);
	assert_int_equal(shmcfg_txn_set_text(t, T_OPT_INT, "-5"), 0);
	assert_int_equal(shmcfg_txn_set_text(t, T_RATIO, "0"), 0);
	assert_int_equal(shmcfg_txn_commit(t, NULL), 0);
	assert_int_equal(get_i(h, T_OPT_INT), -5);
}

static void test_nan_and_infinities(void **state)
{
	(void)state;
	/* where a range is declared, NaN and infinities beyond it are refused */
	shmcfg_value v = {.type = SHMCFG_FLOAT, .u.f = NAN};
	refuse_value(T_RATIO, &v, SHMCFG_E_RANGE, "NaN");
	v.u.f = -NAN;
	refuse_value(T_RATIO, &v, SHMCFG_E_RANGE, "-NaN");
	v.u.f = INFINITY;
	refuse_value(T_RATIO, &v, SHMCFG_E_RANGE, "inf");
	v.u.f = -INFINITY;
	refuse_value(T_RATIO, &v, SHMCFG_E_RANGE, "-inf");
	refuse_text(T_RATIO, "nan", "\"nan\"", SHMCFG_E_RANGE);
	refuse_text(T_RATIO, "inf", "\"inf\"", SHMCFG_E_RANGE);
	refuse_text(T_RATIO, "-inf", "\"-inf\"", SHMCFG_E_RANGE);
	refuse_text(T_RATIO, NULL, "\"NaN\"", SHMCFG_E_TYPE); /* dumps write "nan" only */
	/* where none is, they are values like any other */
	shmcfg_schema *s;
	assert_int_equal(shmcfg_schema_new(&s), 0);
	shmcfg_optdef free_f = {.name = "f.free", .type = SHMCFG_FLOAT};
	assert_int_equal(shmcfg_schema_add(s, &free_f), 0);
	char name[80];
	snprintf(name, sizeof name, "%s-free", seg);
	shmcfg *f = NULL;
	assert_int_equal(shmcfg_create(name, s, &(shmcfg_create_opts){.flags = SHMCFG_CREATE_FORCE | SHMCFG_CREATE_NO_ENV}, &f), 0);
	shmcfg_schema_free(s);
	const double vals[] = {NAN, INFINITY, -INFINITY, -0.0, 5e-324};
	for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
		shmcfg_txn *t;
		assert_int_equal(shmcfg_txn_begin(f, &t), 0);
		assert_int_equal(shmcfg_txn_set_float(t, 0, vals[i]), 0);
		assert_int_equal(shmcfg_txn_commit(t, NULL), 0);
		double got = 0;
		assert_int_equal(shmcfg_get_float(f, 0, &got), 0);
		assert_memory_equal(&got, &vals[i], sizeof got);
	}
	/* and they round-trip through a dump */
	char *dump = NULL;
	assert_int_equal(shmcfg_dump(f, 0, &dump), 0);
	assert_non_null(strstr(dump, "e-324"));
	free(dump);
	shmcfg_close(f);
	(void)shmcfg_unlink(name);
}

/* ------------------------------------------------------------------ */
/* Strings, names and lists                                           */
/* ------------------------------------------------------------------ */

static void test_overlong_strings_and_names(void **state)
{
	(void)state;
	size_t big = SEG_MAX_VALUE_BYTES + 1;
	char *s = malloc(big + 1);
	assert_non_null(s);
	memset(s, 'x', big);
	s[big] = 0;
	shmcfg_value v = {.type = SHMCFG_STR, .u.str = {s, big}};
	refuse_value(T_C, &v, SHMCFG_E_RANGE, "a string of 1 MiB + 1");
	refuse_text(T_C, s, NULL, SHMCFG_E_RANGE);
	/* a list of 1 MiB + 1 bytes */
	for (size_t i = 1; i < big; i += 2)
		s[i] = 0;
	s[big - 1] = 0;
	v = (shmcfg_value){.type = SHMCFG_LIST, .u.list = {s, big / 2, big}};
	refuse_value(T_ITEMS, &v, SHMCFG_E_RANGE, "a list of 1 MiB + 1");
	/* exactly 1 MiB: allowed by the limit, not by this segment's heap (4 KiB):
	 * the commit fails with SHMCFG_E_FULL and publishes nothing */
	memset(s, 'y', big);
	s[big - 1] = 0;
	struct state before = now();
	shmcfg_txn *t;
	assert_int_equal(shmcfg_txn_begin(h, &t), 0);
	assert_int_equal(shmcfg_txn_set_int(t, T_A, 77), 0);
	assert_int_equal(shmcfg_txn_set_str(t, T_C, s), 0);
	int r = shmcfg_txn_commit(t, NULL);
	assert_int_equal(r, SHMCFG_E_FULL);
	assert_detail_names("full heap", "t.c");
	assert_detail_names("full heap", "is full");
	assert_unchanged(&before, "a commit that overflows the heap");
	r = shmcfg_load(h, "{\"t.a\": 78, \"t.items\": [\"", 0, NULL, NULL, NULL); /* len 0 */
	assert_int_equal(r, SHMCFG_E_PARSE);
	assert_unchanged(&before, "an empty load");
	free(s);
	/* names: over-long and absurd lookups are refused with NOOPT, quickly */
	char *name = malloc(2u << 20);
	assert_non_null(name);
	memset(name, 'a', (2u << 20) - 1);
	name[(2u << 20) - 1] = 0;
	shmcfg_opt o;
	assert_int_equal(shmcfg_lookup(h, name, &o), SHMCFG_E_NOOPT);
	assert_true(strlen(shmcfg_errdetail()) < 1024); /* the detail is bounded */
	assert_int_equal(shmcfg_lookup(h, "", &o), SHMCFG_E_NOOPT);
	assert_int_equal(shmcfg_lookup(h, "t.a.", &o), SHMCFG_E_NOOPT);
	assert_int_equal(shmcfg_lookup(h, "T.A", &o), SHMCFG_E_NOOPT);
	/* an over-long option name in a schema: refused, saying why */
	shmcfg_schema *sc;
	assert_int_equal(shmcfg_schema_new(&sc), 0);
	name[300] = 0;
	shmcfg_optdef d = {.name = name, .type = SHMCFG_INT};
	assert_int_equal(shmcfg_schema_add(sc, &d), SHMCFG_E_SCHEMADEF);
	assert_detail_names("over-long option name", "is invalid");
	/* more environment variables than a descriptor counts (16 bits):
	 * refused, naming the option; 65,535 are taken */
	for (unsigned count = 65536; count >= 65535; count--) {
		char *list = malloc((size_t)count * 8 + 3), *p = list;
		assert_non_null(list);
		*p++ = '[';
		for (unsigned k = 0; k < count; k++)
			p += sprintf(p, "%s\"V%u\"", k ? "," : "", k % 10);
		strcpy(p, "]");
		shmcfg_optdef e = {.name = count > 65535 ? "many.env" : "enough.env", .type = SHMCFG_INT,
				   .def = "1", .env_default = list};
		int added = shmcfg_schema_add(sc, &e);
		free(list);
		if (count > 65535) {
			assert_int_equal(added, SHMCFG_E_SCHEMADEF);
			assert_detail_names("too many env_default names", "many.env: more than 65535 environment");
		} else {
			assert_int_equal(added, 0);
		}
	}
	shmcfg_schema_free(sc);
	free(name);
}

static void count_warning(const char *msg, void *ud)
{
	(void)msg;
	++*(int *)ud;
}

static void test_unknown_options(void **state)
{
	(void)state;
	struct state before = now();
	shmcfg_txn *t;
	assert_int_equal(shmcfg_txn_begin(h, &t), 0);
	shmcfg_opt bad[] = {T_COUNT, T_COUNT + 1000, SHMCFG_NO_OPT};
	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(shmcfg_txn_set_int(t, bad[i], 1), SHMCFG_E_NOOPT);
		assert_int_equal(shmcfg_txn_set_text(t, bad[i], "1"), SHMCFG_E_NOOPT);
		assert_int_equal(shmcfg_txn_reset(t, bad[i]), SHMCFG_E_NOOPT);
		int64_t v;
		assert_int_equal(shmcfg_get_int(h, bad[i], &v), SHMCFG_E_NOOPT);
		shmcfg_value val;
		assert_int_equal(shmcfg_get(h, bad[i], &val), SHMCFG_E_NOOPT);
		shmcfg_optinfo info;
		assert_int_equal(shmcfg_opt_info(h, bad[i], &info), SHMCFG_E_NOOPT);
	}
	assert_int_equal(shmcfg_txn_commit(t, NULL), SHMCFG_E_NOOPT); /* the first refusal */
	/* a load skips unknown keys (reported), and fails nothing for them */
	int warned = 0;
	const char *doc = "{\"t.nope\": 1, \"\": 2, \"t.a.b\": 3, \"t.a\": 5}";
	assert_int_equal(shmcfg_load(h, doc, strlen(doc), count_warning, &warned, NULL), 0);
	assert_int_equal(warned, 3);
	assert_int_equal(get_i(h, T_A), 5);
	(void)before;
}

static void test_embedded_nul_and_utf8(void **state)
{
	(void)state;
	shmcfg_value v = {.type = SHMCFG_STR, .u.str = {"ab\0cd", 5}};
	refuse_value(T_C, &v, SHMCFG_E_PARSE, "a NUL inside a string");
	refuse_text(T_C, NULL, "\"ab\\u0000cd\"", SHMCFG_E_PARSE);
	refuse_text(T_ITEMS, NULL, "[\"ab\\u0000cd\"]", SHMCFG_E_TYPE);
	refuse_text(T_ITEMS, "[\"ab\\u0000cd\"]", NULL, SHMCFG_E_PARSE);
	static const char *const bad_utf8[] = {
		"\xff", "\xc3", "\xc3\x28", "\xc0\x80", "\xe0\x80\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80",
		"ok\x80",
	};
	for (size_t i = 0; i < sizeof bad_utf8 / sizeof bad_utf8[0]; i++) {
		const char *b = bad_utf8[i];
		v = (shmcfg_value){.type = SHMCFG_STR, .u.str = {b, strlen(b)}};
		refuse_value(T_C, &v, SHMCFG_E_PARSE, "invalid UTF-8 in a string");
		refuse_text(T_C, b, NULL, SHMCFG_E_PARSE);
		const char *items[] = {"fine", b};
		assert_int_equal(shmcfg_value_list(SHMCFG_LIST, items, 2, &v), 0);
		refuse_value(T_ITEMS, &v, SHMCFG_E_PARSE, "invalid UTF-8 in a list item");
		shmcfg_value_clear(&v);
		assert_int_equal(shmcfg_value_list(SHMCFG_SET, items, 2, &v), 0);
		refuse_value(T_TAGS, &v, SHMCFG_E_PARSE, "invalid UTF-8 in a set item");
		shmcfg_value_clear(&v);
	}
	/* valid UTF-8 of every length is accepted */
	shmcfg_txn *t;
	assert_int_equal(shmcfg_txn_begin(h, &t), 0);
	assert_int_equal(shmcfg_txn_set_str(t, T_C, "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"), 0);
	assert_int_equal(shmcfg_txn_commit(t, NULL), 0);
}

/* A NUL byte in a value's JSON text (a cluster value from etcd): jansson
 * stops there, so "12\0" read as 12 while "12\0junk" did not. */
static void test_value_from_json_nul(void **state)
{
	(void)state;
	static const struct {
		shmcfg_opt opt;
		const char *text;
		size_t len, at;
	} bad[] = {
		{T_A, "12\0", 3, 2},        {T_A, "12\0junk", 7, 2},      {T_A, "\0" "12", 3, 0},
		{T_C, "\"ab\"\0", 5, 4}, {T_ITEMS, "[\"a\"]\0", 6, 5}, {T_A, "12 \0", 4, 3},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		shmcfg_value v = {0};
		int r = shmcfg_value_from_json(h, bad[i].opt, bad[i].text, bad[i].len, &v);
		if (r != SHMCFG_E_PARSE)
			fail_msg("value %zu: %d (%s), expected SHMCFG_E_PARSE", i, r, shmcfg_errname(r));
		char want[40];
		snprintf(want, sizeof want, "NUL byte at offset %zu", bad[i].at);
		if (!strstr(shmcfg_errdetail(), want))
			fail_msg("value %zu: detail '%s' does not say '%s'", i, shmcfg_errdetail(), want);
		shmcfg_value_clear(&v);
	}
	/* the same text without the NUL is fine */
	shmcfg_value v = {0};
	assert_int_equal(shmcfg_value_from_json(h, T_A, "12\0", 2, &v), 0);
	assert_int_equal(v.u.i, 12);
	shmcfg_value_clear(&v);
}

static void test_nulls_and_choices(void **state)
{
	(void)state;
	shmcfg_value v = {.type = SHMCFG_INT, .is_null = true};
	refuse_value(T_A, &v, SHMCFG_E_NULLVAL, "null for a non-nullable int");
	refuse_text(T_A, "null", NULL, SHMCFG_E_PARSE);
	refuse_text(T_A, NULL, "null", SHMCFG_E_NULLVAL);
	refuse_text(T_MODE, "medium", "\"medium\"", SHMCFG_E_CHOICE);
	refuse_text(T_MODE, "\"FAST\"", "\"FAST\"", SHMCFG_E_CHOICE);
	/* a nullable option takes null */
	shmcfg_txn *t;
	assert_int_equal(shmcfg_txn_begin(h, &t), 0);
	assert_int_equal(shmcfg_txn_set_text(t, T_OPT_INT, "null"), 0);
	assert_int_equal(shmcfg_txn_commit(t, NULL), 0);
	int64_t x;
	assert_int_equal(shmcfg_get_int(h, T_OPT_INT, &x), SHMCFG_NULL);
}

static void test_malformed_json(void **state)
{
	(void)state;
	struct state before = now();
	static const char *const docs[] = {
		"", "{", "{\"t.a\": }", "[1, 2]", "\"t.a\"", "{\"t.a\": 1,}", "{\"t.a\": 1} trailing",
		"{\"t.a\": 1, \"t.a\": 2}", "{\"t.a\": 01}", "\xff\xfe{}", "null",
	};
	for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++) {
		int r = shmcfg_load(h, docs[i], strlen(docs[i]), NULL, NULL, NULL);
		if (r != SHMCFG_E_PARSE)
			fail_msg("load '%s': %d (%s), expected SHMCFG_E_PARSE", docs[i], r, shmcfg_errname(r));
		assert_true(shmcfg_errdetail()[0] != 0);
		assert_unchanged(&before, docs[i]);
	}
	/* a NUL inside the text: the length is what counts */
	int r = shmcfg_load(h, "{\"t.a\": 1}\0garbage", 18, NULL, NULL, NULL);
	assert_int_equal(r, SHMCFG_E_PARSE);
	assert_unchanged(&before, "a NUL in the JSON text");
}

/* ------------------------------------------------------------------ */
/* A full heap                                                        */
/* ------------------------------------------------------------------ */

static void test_full_heap(void **state)
{
	(void)state;
	/* fill the heap with values that fit one by one but not together */
	char *s = malloc(1500);
	assert_non_null(s);
	memset(s, 'z', 1499);
	s[1499] = 0;
	shmcfg_txn *t;
	assert_int_equal(shmcfg_txn_begin(h, &t), 0);
	assert_int_equal(shmcfg_txn_set_str(t, T_C, s), 0);
	assert_int_equal(shmcfg_txn_commit(t, NULL), 0);
	struct state before = now();
	char list[3000];
	for (int i = 0; i < 1500; i++)
		list[2 * i] = 'q', list[2 * i + 1] = 0;
	shmcfg_value v = {.type = SHMCFG_LIST, .u.list = {list, 1500, 3000}};
	assert_int_equal(shmcfg_txn_begin(h, &t), 0);
	assert_int_equal(shmcfg_txn_set_int(t, T_A, 9), 0);
	assert_int_equal(shmcfg_txn_set(t, T_ITEMS, &v), 0);
	int r = shmcfg_txn_commit(t, NULL);
	assert_int_equal(r, SHMCFG_E_FULL);
	assert_detail_names("full heap", "value heap of 4096 bytes is full");
	assert_unchanged(&before, "a commit that fills the heap");
	/* through a load too */
	char doc[8000];
	int k = snprintf(doc, sizeof doc, "{\"t.a\": 9, \"t.mode\": \"slow\", \"t.items\": [");
	for (int i = 0; i < 1200; i++)
		k += snprintf(doc + k, sizeof doc - (size_t)k, "%s\"qq\"", i ? "," : "");
	snprintf(doc + k, sizeof doc - (size_t)k, "]}");
	r = shmcfg_load(h, doc, strlen(doc), NULL, NULL, NULL);
	assert_int_equal(r, SHMCFG_E_FULL);
	assert_unchanged(&before, "a load that fills the heap");
	/* the segment is fine: a commit that fits goes through */
	assert_int_equal(shmcfg_txn_begin(h, &t), 0);
	assert_int_equal(shmcfg_txn_set_int(t, T_A, 9), 0);
	assert_int_equal(shmcfg_txn_commit(t, NULL), 0);
	assert_int_equal(get_i(h, T_A), 9);
	assert_int_equal(shmcfg_check(h, true, NULL, NULL), 0);
	free(s);
}

/* ------------------------------------------------------------------ */
/* Hostile segments                                                   */
/* ------------------------------------------------------------------ */

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Run fn in a child; its exit status, or 128 + the signal that killed it. */
static int in_child(int (*fn)(void), int timeout_ms)
{
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		/* not cmocka's handlers: a crash must end the child */
		int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
		for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
			signal(sigs[i], SIG_DFL);
		_exit(fn());
	}
	uint64_t deadline = mono_ms() + (uint64_t)timeout_ms;
	int st;
	for (;;) {
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid)
			break;
		if (mono_ms() > deadline) {
			kill(pid, SIGKILL);
			(void)waitpid(pid, &st, 0);
			fail_msg("the child hung for %d ms", timeout_ms);
		}
		usleep(1000);
	}
	return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
}

/* Rewrite the schema region's hash after changing it, as a misbehaving
 * process can (the hash detects accidents, it is not a signature). */
static void rehash_schema(void)
{
	XXH128_canonical_t c;
	XXH128_canonicalFromHash(&c, XXH3_128bits(h->base + h->lay.schema_off, h->lay.schema_size));
	memcpy(h->hdr->schema_hash, c.digest, 16);
}

static struct opt_desc *shared_desc(shmcfg_opt opt)
{
	char *schema = h->base + h->lay.schema_off;
	const struct schema_hdr *sh = (const struct schema_hdr *)schema;
	return (struct opt_desc *)(schema + sh->desc_off) + opt;
}

/* The option whose descriptor the hostile tests spoil. */
static shmcfg_opt spoiled;

/*
 * In a child: both kinds of attach succeed (attach reads no option), and
 * every first use of the spoiled option, through each door, fails with
 * SHMCFG_E_CORRUPT and one line of detail; another option still works,
 * and so does a commit of it (a commit uses only what it changes).
 */
static int use_expect_corrupt(void)
{
	for (int pass = 0; pass < 2; pass++) {
		shmcfg *x = NULL;
		int r = shmcfg_attach(seg, pass ? SHMCFG_ATTACH_RDONLY : 0, NULL, &x);
		if (r) {
			fprintf(stderr, "# child: attach of a hostile segment: %d (%s)\n", r, shmcfg_errname(r));
			return 1;
		}
		shmcfg_optinfo info;
		shmcfg_value v;
		shmcfg_opt o;
		shmcfg_snapshot *s = NULL;
		int rs[5] = {
			shmcfg_opt_info(x, spoiled, &info),
			shmcfg_get(x, spoiled, &v),
			shmcfg_lookup(x, test_opts[spoiled].name, &o),
			shmcfg_is_default(x, spoiled),
			shmcfg_snapshot_acquire(x, &s),
		};
		if (s) {
			rs[4] = shmcfg_snapshot_get(s, spoiled, &v);
			shmcfg_snapshot_release(s);
		}
		for (int k = 0; k < 5; k++)
			if (rs[k] != SHMCFG_E_CORRUPT) {
				fprintf(stderr, "# child: use %d of the spoiled option: %d (%s)\n", k, rs[k],
					shmcfg_errname(rs[k]));
				return 2;
			}
		if (!shmcfg_errdetail()[0] || strchr(shmcfg_errdetail(), '\n'))
			return 3;
		shmcfg_opt other = spoiled == T_B ? T_C : T_B;
		if (shmcfg_opt_info(x, other, &info) || shmcfg_get(x, other, &v))
			return 4;
		shmcfg_value_clear(&v);
		/* a commit of another option works: it touches only what it changes */
		int cr = pass ? 0 : set_and_commit(x, other, other == T_B ? "3" : "\"x\"", NULL);
		if (cr < 0 || cr > 1) {
			fprintf(stderr, "# child: commit of %s: %s (%s)\n", test_opts[other].name, shmcfg_errname(cr),
				shmcfg_errdetail());
			return 5;
		}
		if (shmcfg_check(x, false, NULL, NULL) <= 0)
			return 6;
		shmcfg_close(x);
	}
	return 0;
}

/*
 * Found by fuzz_segment, fixed in 4a2869b: an environment-variable list
 * reference with a count but length 0 at offset 0 made the schema
 * validation read strings[UINT32_MAX] (list_ok(): r.off + r.len - 1 wrapped
 * in 32 bits): every process that attached died of SIGSEGV. The option is
 * refused with SHMCFG_E_CORRUPT on first use (issue 12: attach validates
 * no option); checked in a child, which a crash cannot take the test runner
 * down with.
 */
static void test_hostile_env_list_rejected(void **state)
{
	(void)state;
	assert_int_equal(h->strings[0], 0); /* offset 0 holds an empty string */
	struct opt_desc *d = shared_desc(T_A), saved = *d;
	for (int which = 0; which < 2; which++) {
		*d = saved;
		if (which == 0)
			d->n_env_default = 1, d->env_default.off = 0, d->env_default.len = 0;
		else
			d->n_env_force = 1, d->env_force.off = 0, d->env_force.len = 0;
		rehash_schema();
		spoiled = T_A;
		int st = in_child(use_expect_corrupt, 10000);
		if (st >= 128)
			fail_msg("attach of a segment whose %s list is {off 0, len 0, count 1}: killed by signal %d",
				 which ? "env_force" : "env_default", st - 128);
		assert_int_equal(st, 0);
	}
}

/* Other corrupt descriptors: each is refused cleanly on first use. */
static void test_hostile_descriptors(void **state)
{
	(void)state;
	struct opt_desc *d = shared_desc(T_ITEMS), saved = *d;
	const struct opt_desc pokes[] = {
		{.alias = 1000},
		{.alias_final = 1000},
		{.type = 77},
		{.implies_first = 0xfffffff0u, .implies_n = 0x20},
		{.name = {0xffffff00u, 5}},
		{.doc = {0, 0xffffffffu}},
		{.env_force = {1, 0}, .n_env_force = 1},
		{.env_force = {1, 3}, .n_env_force = 7},
	};
	for (size_t i = 0; i < sizeof pokes / sizeof pokes[0]; i++) {
		*d = saved;
		const struct opt_desc *p = &pokes[i];
		if (p->alias)
			d->alias = p->alias;
		if (p->alias_final)
			d->alias_final = p->alias_final;
		if (p->type)
			d->type = p->type;
		if (p->implies_n)
			d->implies_first = p->implies_first, d->implies_n = p->implies_n;
		if (p->name.off)
			d->name = p->name;
		if (p->doc.len)
			d->doc = p->doc;
		if (p->n_env_force)
			d->env_force = p->env_force, d->n_env_force = p->n_env_force;
		rehash_schema();
		spoiled = T_ITEMS;
		int st = in_child(use_expect_corrupt, 10000);
		if (st)
			fail_msg("hostile descriptor %zu: child status %d", i, st);
	}
	*d = saved;
	rehash_schema();
}

/*
 * A writer's bytes in the schema's strings that shmcfg_schema_add() never
 * takes. A name with a byte names may not have (0xff) is refused cleanly on
 * first use, and shmcfg_check() names the option ('t?a') in printable
 * ASCII (the tools' JSON takes only UTF-8: `shmctl check` dropped the
 * problem and said "sound"). A doc that is no UTF-8 is no damage (a library
 * before 0.11 took one): the option works, the check finds nothing.
 */
static void report_problem(const char *problem, void *ud)
{
	int *bad = ud;
	fprintf(stderr, "# problem: %s\n", problem);
	for (const unsigned char *p = (const unsigned char *)problem; *p; p++)
		if (*p < 0x20 || *p >= 0x7f)
			bad[0]++;
	bad[1] += strstr(problem, "name 't?a' has a character names may not have") != NULL;
}

/* The check of a fresh handle: one problem, naming 't?a', in ASCII. */
static int check_bad_name(void)
{
	shmcfg *x = NULL;
	int bad[2] = {0, 0};
	if (shmcfg_attach(seg, SHMCFG_ATTACH_RDONLY, NULL, &x) || shmcfg_check(x, false, report_problem, bad) != 1 ||
	    bad[0] || bad[1] != 1)
		return 1;
	shmcfg_close(x);
	return 0;
}

static int use_latin1_doc(void)
{
	shmcfg *x = NULL;
	shmcfg_optinfo info;
	if (shmcfg_attach(seg, SHMCFG_ATTACH_RDONLY, NULL, &x) || shmcfg_opt_info(x, T_A, &info) ||
	    (unsigned char)info.doc[1] != 0xff || get_i(x, T_A) != 0 || shmcfg_check(x, true, NULL, NULL) != 0)
		return 1;
	shmcfg_close(x);
	return 0;
}

/* The output of `shmctl ARGS` (at most len - 1 bytes), and its status. */
static int shmctl_out(const char *args, char *out, size_t len)
{
	const char *b = getenv("top_builddir");
	char cmd[512];
	snprintf(cmd, sizeof cmd, "timeout -s KILL 20 %s/tools/shmctl %s", b ? b : ".", args);
	FILE *f = popen(cmd, "r");
	size_t n = f ? fread(out, 1, len - 1, f) : 0;
	out[n] = 0;
	return f ? pclose(f) : -1;
}

/* shmctl describe --json of that option keeps its doc, as \xNN (jansson
 * takes only UTF-8: the field went missing). 0 if so. */
static int describe_keeps_doc(void)
{
	char args[256], out[8192];
	snprintf(args, sizeof args, "describe %s t.a --json", seg);
	int st = shmctl_out(args, out, sizeof out);
	if (st != 0 || !strstr(out, "\"doc\": \"a\\\\xff= n\"")) {
		fprintf(stderr, "# shmctl describe: status %d:\n%s\n", st, out);
		return 1;
	}
	return 0;
}

static void test_hostile_schema_text(void **state)
{
	(void)state;
	char *schema = h->base + h->lay.schema_off;
	const struct schema_hdr *sh = (const struct schema_hdr *)schema;
	struct opt_desc *d = shared_desc(T_A);
	char *strings = schema + sh->strings_off;
	for (int which = 0; which < 2; which++) {
		struct sref r = which ? d->doc : d->name;
		assert_true(r.len > 1);
		char saved = strings[r.off + 1];
		strings[r.off + 1] = (char)0xff;
		rehash_schema();
		spoiled = T_A;
		int st = in_child(which ? use_latin1_doc : use_expect_corrupt, 10000);
		int checked = which ? describe_keeps_doc() : in_child(check_bad_name, 10000);
		strings[r.off + 1] = saved;
		rehash_schema();
		if (st || checked)
			fail_msg("a %s with byte 0xff: child status %d, check's %d", which ? "doc" : "name", st, checked);
	}
	assert_int_equal(shmcfg_check(h, false, NULL, NULL), 0);
}

/*
 * A string value whose bytes are no UTF-8: only a writer that writes the
 * segment's cells and heap can store one (a transaction refuses it), and it
 * has no JSON form. shmctl get shows it escaped, get --json keeps it (as
 * \xNN), where both said "out of memory" (helper-56).
 */
static void test_value_not_utf8_shown_escaped(void **state)
{
	(void)state;
	shmcfg_txn *t;
	assert_int_equal(shmcfg_txn_begin(h, &t), 0);
	assert_int_equal(shmcfg_txn_set_str(t, T_C, "abcd"), 0);
	assert_true(shmcfg_txn_commit(t, NULL) >= 0);
	uint64_t cur = __atomic_load_n(&h->hdr->current, __ATOMIC_ACQUIRE);
	const struct shmcfg__cell *c = slot_cells(h, slot_at(h, cur_slot(cur))) + T_C;
	assert_int_equal(META_LEN(c->meta), 4);
	char *bytes = seg_heap(h) + CELL_OFF(c->val);
	assert_memory_equal(bytes, "abcd", 4);
	bytes[1] = (char)0xff;
	char args[256], out[4096];
	snprintf(args, sizeof args, "get %s t.c", seg);
	int st = shmctl_out(args, out, sizeof out);
	bool text_ok = st == 0 && !strcmp(out, "\"a\\\\xffcd\"\n");
	snprintf(args, sizeof args, "get %s t.c --json", seg);
	int stj = shmctl_out(args, out + 1024, sizeof out - 1024);
	bool json_ok = stj == 0 && strstr(out + 1024, "\"a\\\\xffcd\"");
	bytes[1] = 'b';
	if (!text_ok || !json_ok)
		fail_msg("shmctl get: status %d, '%.200s'; --json: status %d, '%.200s'", st, out, stj, out + 1024);
}

/*
 * shmcfg_schema_of() of a segment whose env list item or choice is no UTF-8
 * (a library before 0.11 took one; a writer's scribble): refused, the
 * message naming the option (it said "a list item that is not valid
 * UTF-8", of no option), so `shmctl schema` and the cluster agent say which.
 */
static int schema_of_names_option(void)
{
	shmcfg *x = NULL;
	shmcfg_schema *sc = NULL;
	if (shmcfg_attach(seg, SHMCFG_ATTACH_RDONLY, NULL, &x))
		return 1;
	int r = shmcfg_schema_of(x, &sc);
	const char *want = spoiled == T_ENV_D ? "t.env_d: " : "t.mode: ";
	if (r != SHMCFG_E_SCHEMADEF || strncmp(shmcfg_errdetail(), want, strlen(want))) {
		fprintf(stderr, "# schema_of: %d, '%s'\n", r, shmcfg_errdetail());
		return 2;
	}
	shmcfg_close(x);
	return 0;
}

static void test_schema_of_names_the_option(void **state)
{
	(void)state;
	char *schema = h->base + h->lay.schema_off;
	const struct schema_hdr *sh = (const struct schema_hdr *)schema;
	char *strings = schema + sh->strings_off;
	for (int which = 0; which < 2; which++) {
		const struct opt_desc *d = shared_desc(which ? T_MODE : T_ENV_D);
		char *p = which ? strings + CELL_OFF(d->choices.val) : strings + d->env_default.off;
		assert_true(which ? *p == 'f' : *p == 'T'); /* "fast", "T_ENVD1" */
		char saved = *p;
		*p = (char)0xff;
		rehash_schema();
		spoiled = which ? T_MODE : T_ENV_D;
		int st = in_child(schema_of_names_option, 10000);
		*p = saved;
		rehash_schema();
		if (st)
			fail_msg("%s: child status %d", which ? "choices" : "env_default", st);
	}
}

/* shmcfg_schema_add() takes only UTF-8 texts: each field, one message. */
static void test_schema_add_refuses_texts_not_utf8(void **state)
{
	(void)state;
	shmcfg_schema *sc;
	assert_int_equal(shmcfg_schema_new(&sc), 0);
	static const char *const fields[] = {"doc", "knob", "deprecated", "default", "choices", "env_default",
					     "env_force"};
	for (size_t k = 0; k < sizeof fields / sizeof fields[0]; k++) {
		shmcfg_optdef d = {.name = "u.s", .type = SHMCFG_STR};
		const char *bad = "x\xff";
		switch (k) {
		case 0: d.doc = bad; break;
		case 1: d.type = SHMCFG_BOOL, d.knob = bad; break;
		case 2: d.deprecated = bad; break;
		case 3: d.def = bad; break;
		case 4: d.choices = "[\"x\xff\"]"; break;
		case 5: d.env_default = "[\"V\xff\"]"; break;
		case 6: d.env_force = "[\"V\xff\"]"; break;
		}
		assert_int_equal(shmcfg_schema_add(sc, &d), SHMCFG_E_SCHEMADEF);
		char want[64];
		snprintf(want, sizeof want, "u.s: %s is not valid UTF-8", fields[k]);
		assert_string_equal(shmcfg_errdetail(), want);
	}
	shmcfg_optdef ok = {.name = "u.s", .type = SHMCFG_STR, .doc = "caf\xc3\xa9"};
	assert_int_equal(shmcfg_schema_add(sc, &ok), 0);
	shmcfg_schema_free(sc);
}

/* A hostile `current` whose slot never holds its generation: reads give up
 * with SHMCFG_E_CORRUPT, in bounded time. */
static int read_unstable(void)
{
	shmcfg *x = NULL;
	int r = shmcfg_attach(seg, SHMCFG_ATTACH_RDONLY, NULL, &x);
	if (r)
		return 2;
	uint64_t t0 = mono_ms();
	int64_t v;
	shmcfg_value val;
	shmcfg_snapshot *s = (shmcfg_snapshot *)&v; /* not NULL: a failed acquire makes it so (0.15) */
	if (shmcfg_get_int(x, T_A, &v) != SHMCFG_E_CORRUPT || shmcfg_get(x, T_C, &val) != SHMCFG_E_CORRUPT ||
	    shmcfg_snapshot_acquire(x, &s) != SHMCFG_E_CORRUPT || s != NULL)
		return 3;
	fprintf(stderr, "# three reads of an unstable segment gave up after %llu ms\n",
		(unsigned long long)(mono_ms() - t0));
	shmcfg_close(x);
	return 0;
}

static void test_hostile_current_does_not_hang(void **state)
{
	(void)state;
	uint64_t cur = __atomic_load_n(&h->hdr->current, __ATOMIC_ACQUIRE);
	/* a generation no slot holds */
	__atomic_store_n(&h->hdr->current, cur + (1000ull << SHMCFG__SLOT_BITS), __ATOMIC_SEQ_CST);
	assert_int_equal(in_child(read_unstable, 20000), 0);
	/* a slot index beyond the table: the inline read reads slot 0 (design:
	 * at worst a value slot 0 validly holds, here generation 1's t.a = 0),
	 * the other reads refuse it */
	__atomic_store_n(&h->hdr->current, (cur & ~0xffull) | 0xff, __ATOMIC_SEQ_CST);
	int64_t v = -1;
	int r = shmcfg_get_int(h, T_A, &v);
	assert_true(r == SHMCFG_E_CORRUPT || (r == 0 && v == 0));
	shmcfg_value val;
	assert_int_equal(shmcfg_get(h, T_A, &val), SHMCFG_E_CORRUPT);
	shmcfg_txn *t;
	assert_int_equal(shmcfg_txn_begin(h, &t), 0);
	assert_int_equal(shmcfg_txn_set_int(t, T_A, 1), 0);
	assert_int_equal(shmcfg_txn_commit(t, NULL), SHMCFG_E_CORRUPT);
	__atomic_store_n(&h->hdr->current, cur, __ATOMIC_SEQ_CST);
	assert_int_equal(get_i(h, T_A), 0);
}

/*
 * A commit does not carry a corrupt layer cell of the current slot into the
 * new generation: with t.a's user layer holding a bool, an unrelated commit
 * (of t.b) fails with SHMCFG_E_CORRUPT and publishes nothing, or publishes a
 * generation in which every option reads. (E5, found by fuzz_segment: the
 * cell was copied unchecked, became t.a's value with a valid checksum, and
 * t.a could no longer be read.)
 */
static void keep_problem(const char *problem, void *ud)
{
	snprintf(ud, 512, "%s", problem);
}

static void test_commit_never_publishes_corrupt_layers(void **state)
{
	(void)state;
	shmcfg_txn *t0;
	assert_int_equal(shmcfg_txn_begin(h, &t0), 0);
	/* two layers: one alone would be held in the cell, with no chunk */
	assert_int_equal(shmcfg_txn_layer(t0, SHMCFG_SRC_CLUSTER), 0);
	assert_int_equal(shmcfg_txn_set_int(t0, T_A, 0), 0);
	assert_int_equal(shmcfg_txn_layer(t0, SHMCFG_SRC_USER), 0);
	assert_int_equal(shmcfg_txn_set_int(t0, T_A, 0), 0);
	assert_true(shmcfg_txn_commit(t0, NULL) >= 0);
	uint64_t cur = __atomic_load_n(&h->hdr->current, __ATOMIC_ACQUIRE);
	char *slot = (char *)slot_at(h, cur_slot(cur));
	uint32_t lref = slot_lrefs(h, slot)[T_A];
	assert_true(lref_names_chunk(lref));
	struct chunk *k = (struct chunk *)(seg_heap(h) + ((uint64_t)lref << LREF_SHIFT));
	assert_int_equal(CHUNK_MASK(k->tag), 1u << LAYER_CLUSTER | 1u << LAYER_USER);
	struct shmcfg__cell *user = &k->l[1]; /* the cluster layer's cell comes first */
	user->val = 1;
	user->meta = SHMCFG_BOOL | META_SET | ((uint64_t)SHMCFG_SRC_USER << META_SRC_SHIFT);
	assert_int_equal(get_i(h, T_A), 0); /* the effective value is intact */
	shmcfg_txn *t;
	assert_int_equal(shmcfg_txn_begin(h, &t), 0);
	assert_int_equal(shmcfg_txn_set_int(t, T_B, 5), 0);
	uint64_t gen = 0;
	int r = shmcfg_txn_commit(t, &gen);
	if (r == SHMCFG_E_CORRUPT) {
		assert_int_equal(shmcfg_generation(h), cur_gen(cur));
		return;
	}
	assert_int_equal(r, 0);
	for (shmcfg_opt o = 0; o < T_COUNT; o++) {
		shmcfg_value v;
		r = shmcfg_get(h, o, &v);
		if (r)
			fail_msg("a commit of t.b published generation %" PRIu64 " in which %s reads %s: %s",
				 gen, test_opts[o].name, shmcfg_errname(r), shmcfg_errdetail());
		shmcfg_value_clear(&v);
	}
	/* the scribbled chunk is shared by the new generation (a commit copies
	 * only what it changes): the deep check reports it */
	char problem[512] = "";
	assert_true(shmcfg_check(h, true, keep_problem, problem) > 0);
	if (!strstr(problem, "t.a"))
		fail_msg("the check reports '%s', not t.a", problem);
}

/* A scribbler says an implied option (t.flag, implied by t.debug) holds its
 * layer in its cell (slot.h, lref_in_cell: only an option that nothing
 * implies may). A commit that activates the implication must not publish a
 * generation whose implied cell then reads as t.flag's user layer of source
 * "implied" (every read of its layers, and every later commit of t.debug or
 * t.flag, failing); the deep check names t.flag. */
static void test_in_cell_reference_of_an_implied_option(void **state)
{
	(void)state;
	assert_int_equal(set_and_commit(h, T_FLAG, "true", NULL), 0);
	uint64_t cur = __atomic_load_n(&h->hdr->current, __ATOMIC_ACQUIRE);
	for (uint32_t s = 0; s < h->lay.nslots; s++) {
		slot_lrefs(h, slot_at(h, s))[T_FLAG] = LREF_IN_CELL;
		/* the cell a held user layer would have: the check must not need the checksum */
		slot_cells(h, slot_at(h, s))[T_FLAG] = (struct shmcfg__cell){1, SHMCFG_BOOL | (uint64_t)SHMCFG_SRC_USER << META_SRC_SHIFT};
	}
	char problem[512] = "";
	assert_true(shmcfg_check(h, true, keep_problem, problem) > 0);
	if (!strstr(problem, "t.flag"))
		fail_msg("the check reports '%s', not t.flag", problem);
	int r = set_and_commit(h, T_DEBUG, "true", NULL);
	if (r == 0) {
		shmcfg_snapshot *snap;
		shmcfg_value v;
		assert_int_equal(shmcfg_snapshot_acquire(h, &snap), 0);
		r = shmcfg_snapshot_layer(snap, T_FLAG, SHMCFG_SRC_USER, &v);
		shmcfg_snapshot_release(snap);
		fail_msg("the commit of t.debug published generation %" PRIu64 ", whose t.flag layers read %s",
			 shmcfg_generation(h), r < 0 ? shmcfg_errdetail() : "well");
	}
	assert_int_equal(r, SHMCFG_E_CORRUPT);
	assert_int_equal(shmcfg_generation(h), cur_gen(cur));
	/* writing t.flag repairs it: a chunk again */
	assert_int_equal(set_and_commit(h, T_FLAG, "false", NULL), 0);
	assert_int_equal(set_and_commit(h, T_DEBUG, "true", NULL), 0);
}

/*
 * A commit record whose ring entry names no option (a writer scribbled on
 * the change ring) is not followed: the slot a commit takes is copied whole
 * from the current one, as for a record that is gone (doc/design.md, "A
 * commit", step 4), and the commit works. (Found in review: the ids were
 * checked only while being copied, and the commit failed with
 * SHMCFG_E_CORRUPT, "commit log names option".)
 */
static void test_hostile_change_ring_is_not_followed(void **state)
{
	(void)state;
	assert_int_equal(set_and_commit(h, T_A, "1", NULL), 0);
	const struct log_ent *e = log_at(h, shmcfg_generation(h));
	assert_true(e->ring_n >= 1 && e->ring_n != RING_OVERFLOW); /* t.a and its aliases */
	uint32_t *ring = (uint32_t *)(h->base + h->lay.ring_off);
	ring[e->ring_start & (h->lay.ring_size - 1)] = 0xfffffu;
	/* the next slot holds generation 1: it must catch up on that record */
	int r = set_and_commit(h, T_B, "5", NULL);
	if (r)
		fail_msg("a commit after the ring was scribbled: %s (%s)", shmcfg_errname(r), shmcfg_errdetail());
	assert_int_equal(get_i(h, T_A), 1);
	assert_int_equal(get_i(h, T_B), 5);
	char problem[512] = "";
	if (shmcfg_check(h, true, keep_problem, problem))
		fail_msg("check: %s", problem);
}

/*
 * A read-write process that took one snapshot and released it, then idles,
 * blocks no commit: with two slots, two commits in a row succeed while it
 * idles. (E2, found by the soak: such a process kept that generation pinned
 * for as long as it lived, so K-1 idle processes made every commit fail with
 * SHMCFG_E_BUSY after its timeout, although nobody held a snapshot.)
 */
static void test_idle_readers_do_not_block_commits(void **state)
{
	(void)state;
	char name[80];
	snprintf(name, sizeof name, "%s-idle", seg);
	shmcfg *w = test_create(name, &(shmcfg_create_opts){.slots = 2});
	shmcfg_set_commit_timeout(w, 300);
	int up[2];
	assert_int_equal(pipe(up), 0);
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		shmcfg *c = NULL;
		if (shmcfg_attach(name, 0, NULL, &c))
			_exit(2);
		shmcfg_snapshot *snap;
		if (shmcfg_snapshot_acquire(c, &snap))
			_exit(3);
		shmcfg_snapshot_release(snap); /* released at once */
		if (write(up[1], "x", 1) != 1)
			_exit(4);
		for (;;)
			pause(); /* idle: alive, not stopped, holding no snapshot */
	}
	close(up[1]);
	char m;
	assert_int_equal(read(up[0], &m, 1), 1);
	close(up[0]);
	int r1 = set_and_commit(w, T_A, "1", NULL);
	int r2 = set_and_commit(w, T_A, "2", NULL);
	char detail[256];
	snprintf(detail, sizeof detail, "%s", shmcfg_errdetail());
	kill(pid, SIGKILL);
	(void)waitpid(pid, NULL, 0);
	shmcfg_close(w);
	(void)shmcfg_unlink(name);
	assert_int_equal(r1, 0);
	if (r2)
		fail_msg("second commit with an idle reader that released its snapshot: %s: %s",
			 shmcfg_errname(r2), detail);
}

/* ------------------------------------------------------------------ */
/* Patches that cannot be resolved                                    */
/* ------------------------------------------------------------------ */

/*
 * A thread patch with a value too big for the segment's heap is refused
 * with SHMCFG_E_FULL (the frame stays as it was), or the thread's reads
 * succeed. (E3, found by fuzz_load: the patch was accepted, then every read
 * of the thread failed with SHMCFG_E_FULL, an error the getters do not
 * document, even of options it did not patch.)
 */
static void test_oversized_patch_keeps_reads_working(void **state)
{
	(void)state;
	size_t len = 6000; /* the heap is 4 KiB */
	char *big = malloc(len + 1);
	assert_non_null(big);
	memset(big, 'p', len);
	big[len] = 0;
	assert_int_equal(shmcfg_patch_push(h), 0);
	int r = shmcfg_patch_set_text(h, T_C, big);
	if (r == 0) {
		int64_t a = -1;
		r = shmcfg_get_int(h, T_A, &a);
		if (r)
			fail_msg("after a patch of t.c (%zu bytes) that was accepted, reading t.a gives %s: %s",
				 len, shmcfg_errname(r), shmcfg_errdetail());
		assert_int_equal(a, 0);
		shmcfg_value v;
		assert_int_equal(shmcfg_get(h, T_C, &v), 0);
		assert_int_equal(v.u.str.len, len);
		shmcfg_value_clear(&v);
	} else {
		assert_int_equal(r, SHMCFG_E_FULL);
		assert_int_equal(get_i(h, T_A), 0);
	}
	assert_int_equal(shmcfg_patch_pop(h), 0);
	free(big);
}

/*
 * Patches whose implications conflict (t.debug implies t.mode=slow, t.safe
 * implies t.mode=fast) never make the thread's reads fail: the second
 * patch_set fails with SHMCFG_E_CONFLICT (frame unchanged), or the reads
 * succeed. A transaction with the same changes fails at its commit and
 * changes nothing. And a patch that was fine when made (t.debug=true) keeps
 * the thread's reads working when another writer later commits
 * t.safe=true. (E4, found by fuzz_load: both made every read of the thread
 * fail with SHMCFG_E_CONFLICT, even of t.a, which neither touches.)
 */
static void test_conflicting_patches_keep_reads_working(void **state)
{
	(void)state;
	assert_int_equal(shmcfg_patch_push(h), 0);
	assert_int_equal(shmcfg_patch_set_text(h, T_DEBUG, "true"), 0);
	int r = shmcfg_patch_set_text(h, T_SAFE, "true");
	if (r == 0) {
		int64_t a = -1;
		r = shmcfg_get_int(h, T_A, &a);
		if (r)
			fail_msg("after conflicting patches that were accepted, reading t.a gives %s: %s",
				 shmcfg_errname(r), shmcfg_errdetail());
	} else {
		assert_int_equal(r, SHMCFG_E_CONFLICT);
		assert_int_equal(get_i(h, T_A), 0);
		bool dbg = false;
		assert_int_equal(shmcfg_get_bool(h, T_DEBUG, &dbg), 0);
		assert_true(dbg); /* the first patch stays */
	}
	assert_int_equal(shmcfg_patch_pop(h), 0);
	/* the transaction path, for comparison: refused at commit, nothing changes */
	struct state before = now();
	shmcfg_txn *t;
	assert_int_equal(shmcfg_txn_begin(h, &t), 0);
	assert_int_equal(shmcfg_txn_set_text(t, T_DEBUG, "true"), 0);
	assert_int_equal(shmcfg_txn_set_text(t, T_SAFE, "true"), 0);
	assert_int_equal(shmcfg_txn_commit(t, NULL), SHMCFG_E_CONFLICT);
	assert_detail_names("conflict", "t.debug");
	assert_detail_names("conflict", "t.safe");
	assert_unchanged(&before, "a conflicting commit");
	/* a patch valid when made, and a later commit (any process's) that
	 * conflicts with it: the patched thread's reads must not all fail */
	assert_int_equal(shmcfg_patch_push(h), 0);
	assert_int_equal(shmcfg_patch_set_text(h, T_DEBUG, "true"), 0);
	assert_int_equal(get_i(h, T_A), 0);
	shmcfg *other = NULL;
	assert_int_equal(shmcfg_attach(seg, 0, NULL, &other), 0);
	r = set_and_commit(other, T_SAFE, "true", NULL);
	shmcfg_close(other);
	assert_int_equal(r, 0);
	int64_t a = -1;
	r = shmcfg_get_int(h, T_A, &a);
	assert_int_equal(shmcfg_patch_pop(h), 0);
	if (r)
		fail_msg("after another writer committed t.safe=true, a thread that patched t.debug=true "
			 "reads t.a as %s: %s", shmcfg_errname(r), shmcfg_errdetail());
}

/*
 * A list value built by hand whose count disagrees with its bytes (count 3,
 * two items), or whose last item lacks its NUL, is refused by shmcfg_txn_set
 * and shmcfg_patch_set (-EINVAL or SHMCFG_E_PARSE), as any other bad value.
 * (E10: they were accepted; the commit then failed with SHMCFG_E_CORRUPT,
 * blaming the segment for the caller's value, and a patch made the thread's
 * reads fail.)
 */
static void test_malformed_list_values_refused(void **state)
{
	(void)state;
	const shmcfg_value bad[] = {
		{.type = SHMCFG_LIST, .u.list = {"a\0b\0", 3, 4}},
		{.type = SHMCFG_LIST, .u.list = {"ab", 1, 2}},
		{.type = SHMCFG_SET, .u.list = {"a\0b\0", 5, 4}},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		shmcfg_opt opt = bad[i].type == SHMCFG_SET ? T_TAGS : T_ITEMS;
		struct state before = now();
		shmcfg_txn *t;
		assert_int_equal(shmcfg_txn_begin(h, &t), 0);
		int r = shmcfg_txn_set(t, opt, &bad[i]);
		shmcfg_txn_abort(t);
		if (r == 0 || r == SHMCFG_E_CORRUPT)
			fail_msg("malformed list value %zu: txn_set gave %d (%s)", i, r, shmcfg_errname(r));
		assert_unchanged(&before, "a malformed list");
		assert_int_equal(shmcfg_patch_push(h), 0);
		r = shmcfg_patch_set(h, opt, &bad[i]);
		if (r == 0)
			r = shmcfg_get_int(h, T_A, &(int64_t){0});
		assert_int_equal(shmcfg_patch_pop(h), 0);
		if (r == 0 || r == SHMCFG_E_CORRUPT)
			fail_msg("malformed list value %zu: patch_set gave %d (%s)", i, r, shmcfg_errname(r));
	}
}

/*
 * Float infinities and NaN written `.inf`, `-.inf`, `.nan` in a schema file,
 * as doc/schema-format.md says (and tools/shmcfg-import writes them), load.
 * (E8: the reader passed them to shmcfg_value_parse, which does not read
 * them: "value '.nan' is not a valid float".)
 */
static void test_yaml_float_specials_load(void **state)
{
	(void)state;
	static const struct {
		const char *attr;
		double want;
	} cases[] = {{"default: .nan", NAN}, {"default: .inf", INFINITY}, {"default: -.inf", -INFINITY},
		     {"max: .inf", INFINITY}, {"min: -.inf", -INFINITY}};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char text[256];
		snprintf(text, sizeof text, "format: 1\noptions:\n  a.r:\n    type: float\n    %s\n",
			 cases[i].attr);
		shmcfg_schema *s = NULL;
		int r = shmcfg_schema_load_text(text, strlen(text), "specials", &s);
		if (r)
			fail_msg("schema with '%s': %s: %s", cases[i].attr, shmcfg_errname(r), shmcfg_errdetail());
		shmcfg_schema_free(s);
	}
}

/*
 * The schema format sets no limit on an option's implications: a bool option
 * with a default and 15, or 40, implications loads. (E7, found by
 * fuzz_schema: lib/schema/schemafile.c kept at most 16 texts per option, so 15
 * failed with -ENOMEM and no detail, 16 or more with "bad implies entry".)
 */
static void test_many_implications_load(void **state)
{
	(void)state;
	for (int n = 15; n <= 40; n += 25) {
		char text[4096];
		int k = snprintf(text, sizeof text,
				 "format: 1\noptions:\n  a:\n    type: bool\n    default: false\n    implies: {");
		for (int i = 0; i < n; i++)
			k += snprintf(text + k, sizeof text - (size_t)k, "%st%d: true", i ? ", " : "", i);
		k += snprintf(text + k, sizeof text - (size_t)k, "}\n");
		for (int i = 0; i < n; i++)
			k += snprintf(text + k, sizeof text - (size_t)k, "  t%d:\n    type: bool\n", i);
		shmcfg_schema *s = NULL;
		int r = shmcfg_schema_load_text(text, (size_t)k, "implications", &s);
		if (r)
			fail_msg("a schema with an option of %d implications: %d (%s): '%s'", n, r,
				 shmcfg_errname(r), shmcfg_errdetail());
		assert_int_equal(shmcfg_schema_count(s), (uint32_t)n + 1);
		shmcfg_schema_free(s);
	}
}

/*
 * An option declared without a default (a str with choices a, b, an int with
 * min 5, ...) is refused by shmcfg_schema_add (SHMCFG_E_SCHEMADEF), or gets
 * a default that respects its range and choices: the segment's own dump
 * loads back. (E6, found by fuzz_schema: it got false / 0 / "" / []
 * unchecked, a value the segment refuses as input.)
 */
static void test_implicit_defaults_respect_range_and_choices(void **state)
{
	(void)state;
	const shmcfg_optdef defs[] = {
		{.name = "p.q", .type = SHMCFG_STR, .choices = "a,b"},
		{.name = "p.n", .type = SHMCFG_INT, .min = "5", .max = "9"},
		{.name = "p.f", .type = SHMCFG_FLOAT, .min = "1"},
		{.name = "p.c", .type = SHMCFG_INT, .choices = "1,2"},
	};
	char name[80];
	snprintf(name, sizeof name, "%s-free", seg);
	for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++) {
		shmcfg_schema *s;
		assert_int_equal(shmcfg_schema_new(&s), 0);
		int r = shmcfg_schema_add(s, &defs[i]);
		if (r) {
			assert_int_equal(r, SHMCFG_E_SCHEMADEF);
			shmcfg_schema_free(s);
			continue;
		}
		shmcfg *x = NULL;
		assert_int_equal(shmcfg_create(name, s, &(shmcfg_create_opts){.flags = SHMCFG_CREATE_FORCE | SHMCFG_CREATE_NO_ENV}, &x), 0);
		shmcfg_schema_free(s);
		char *dump = NULL;
		assert_int_equal(shmcfg_dump(x, 0, &dump), 0);
		r = shmcfg_load(x, dump, strlen(dump), NULL, NULL, NULL);
		char detail[256];
		snprintf(detail, sizeof detail, "%s", shmcfg_errdetail());
		shmcfg_close(x);
		(void)shmcfg_unlink(name);
		if (r != 0)
			fail_msg("%s declared without a default: its own dump does not load: %s: %s",
				 defs[i].name, shmcfg_errname(r), detail);
		free(dump);
	}
}

/*
 * shmcfg_create refuses an implication whose value fails its target's checks
 * (SHMCFG_E_SCHEMADEF) without leaking the parsed value: checked under
 * --enable-sanitizers, where LeakSanitizer fails the program at exit. (E9,
 * found by fuzz_schema under LeakSanitizer: shmcfg__schema_build did not
 * clear the value on that path.)
 */
static void test_bad_implication_refused_without_leak(void **state)
{
	(void)state;
	shmcfg_schema *s;
	assert_int_equal(shmcfg_schema_new(&s), 0);
	const shmcfg_optdef defs[] = {
		{.name = "a.mode", .type = SHMCFG_STR, .def = "\"fast\"", .choices = "fast,slow"},
		{.name = "a.flag", .type = SHMCFG_BOOL, .implies = "a.mode=medium"},
	};
	for (size_t i = 0; i < 2; i++)
		assert_int_equal(shmcfg_schema_add(s, &defs[i]), 0);
	char name[80];
	snprintf(name, sizeof name, "%s-free", seg);
	shmcfg *x = NULL;
	int r = shmcfg_create(name, s, &(shmcfg_create_opts){.flags = SHMCFG_CREATE_FORCE | SHMCFG_CREATE_NO_ENV}, &x);
	assert_int_equal(r, SHMCFG_E_SCHEMADEF);
	assert_null(x);
	shmcfg_schema_free(s);
}

/*
 * A float option's min or max of NaN is refused by shmcfg_schema_add
 * (SHMCFG_E_SCHEMADEF): every comparison with NaN is false, so such a bound
 * would check nothing. (E11: it was accepted.)
 */
static void test_nan_bounds_refused(void **state)
{
	(void)state;
	shmcfg_schema *s;
	assert_int_equal(shmcfg_schema_new(&s), 0);
	shmcfg_optdef d = {.name = "a.r", .type = SHMCFG_FLOAT, .def = "0.5", .min = "nan"};
	assert_int_equal(shmcfg_schema_add(s, &d), SHMCFG_E_SCHEMADEF);
	d.min = NULL;
	d.max = "nan";
	assert_int_equal(shmcfg_schema_add(s, &d), SHMCFG_E_SCHEMADEF);
	shmcfg_schema_free(s);
}

/*
 * A schema file with a YAML alias is refused (SHMCFG_E_SCHEMADEF, the
 * alias's file:line), whatever the alias names: libyaml resolves an alias
 * to the node it names, and each alias of a 100,000-byte string in
 * `choices` made its text again (E41: 180 KB took 22 s and 3 GB; an aliased
 * option of 20,000 choices built a 384 MiB segment): the cases
 * tests/cases/schema-error/yaml-alias-*. An anchor alone is harmless and
 * still loads.
 */
static void test_schema_aliases_refused(void **state)
{
	(void)state;
	const char *anchor = "format: 1\noptions:\n  a.s: {type: str, default: &S xx}\n";
	shmcfg_schema *s = NULL;
	assert_int_equal(shmcfg_schema_load_text(anchor, strlen(anchor), "anchor.yaml", &s), 0);
	shmcfg_schema_free(s);
}

/* A generated option list, for its inline schema builder (below). */
#define TB_OPTIONS(X) X(tb_n, "tb.n", INT, .def = "4")
SHMCFG_DEFINE_OPTIONS(tb, TB_OPTIONS)

#define CHILD_CHECK(cond, ...)                                                \
	do {                                                                  \
		if (!(cond)) {                                                \
			fprintf(stderr, __VA_ARGS__);                         \
			fprintf(stderr, " (detail: %s)\n", shmcfg_errdetail()); \
			return 1;                                             \
		}                                                             \
	} while (0)

/* In a child (a crash fails the test): values whose bytes are at NULL. */
static int null_pointer_values(void)
{
	const shmcfg_value str = {.type = SHMCFG_STR, .u.str = {NULL, 5}};
	const shmcfg_value list = {.type = SHMCFG_LIST, .u.list = {NULL, 3, 6}};
	const shmcfg_value set = {.type = SHMCFG_SET, .u.list = {NULL, 3, 0}};
	const struct {
		shmcfg_opt opt;
		const shmcfg_value *v;
	} cases[] = {{T_C, &str}, {T_ITEMS, &list}, {T_TAGS, &set}};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		shmcfg_opt opt = cases[i].opt;
		const shmcfg_value *v = cases[i].v;
		const char *name = test_opts[opt].name;
		int r = shmcfg_value_check(h, opt, v);
		CHILD_CHECK(r == -EINVAL || r == SHMCFG_E_PARSE, "value_check %zu: %d", i, r);
		CHILD_CHECK(strstr(shmcfg_errdetail(), name), "value_check %zu: detail", i);
		shmcfg_txn *t;
		CHILD_CHECK(shmcfg_txn_begin(h, &t) == 0, "txn_begin");
		r = shmcfg_txn_set(t, opt, v);
		shmcfg_txn_abort(t);
		CHILD_CHECK(r == -EINVAL || r == SHMCFG_E_PARSE, "txn_set %zu: %d", i, r);
		CHILD_CHECK(shmcfg_patch_push(h) == 0, "patch_push");
		r = shmcfg_patch_set(h, opt, v);
		CHILD_CHECK(shmcfg_patch_pop(h) == 0, "patch_pop");
		CHILD_CHECK(r == -EINVAL || r == SHMCFG_E_PARSE, "patch_set %zu: %d", i, r);
		shmcfg_patcher *p;
		CHILD_CHECK(shmcfg_patcher_new(h, &p) == 0, "patcher_new");
		r = shmcfg_patcher_set(p, opt, v);
		shmcfg_patcher_free(p);
		CHILD_CHECK(r == -EINVAL || r == SHMCFG_E_PARSE, "patcher_set %zu: %d", i, r);
		shmcfg_value copy = *v;
		CHILD_CHECK(!shmcfg_value_equal(v, &copy), "value_equal %zu: bytes at NULL are a value", i);
	}
	/* no bytes at NULL is the empty value, equal to itself */
	const shmcfg_value empty = {.type = SHMCFG_STR, .u.str = {NULL, 0}};
	CHILD_CHECK(shmcfg_value_equal(&empty, &empty), "the empty string at NULL");
	const char *names[] = {test_opts[0].name, NULL};
	const shmcfg_type types[] = {test_opts[0].type, test_opts[1].type};
	int r = shmcfg_verify_handles(h, names, types, 2);
	CHILD_CHECK(r == -EINVAL && strstr(shmcfg_errdetail(), "names[1]"), "verify_handles: %d", r);
	CHILD_CHECK(tb_schema(NULL) == -EINVAL, "the generated schema builder of NULL");
	shmcfg_schema *s;
	CHILD_CHECK(shmcfg_schema_new(&s) == 0, "schema_new");
	r = shmcfg_schema_add(s, &(shmcfg_optdef){.type = SHMCFG_INT});
	shmcfg_schema_free(s);
	CHILD_CHECK(r == SHMCFG_E_SCHEMADEF, "schema_add of a NULL name: %d", r);
	return 0;
}

/*
 * NULL pointers inside a hand-built argument are errors, not crashes: a
 * string or list value whose bytes are at NULL is refused by every door
 * that takes a value (-EINVAL, the detail naming the option) and is equal
 * to nothing; shmcfg_verify_handles refuses a NULL name; the inline schema
 * builder of SHMCFG_DEFINE_OPTIONS takes a NULL ret as every function does.
 * (E42: each of them crashed with SIGSEGV.)
 */
static void test_null_pointers_in_arguments_refused(void **state)
{
	(void)state;
	struct state before = now();
	int st = in_child(null_pointer_values, 10000);
	if (st)
		fail_msg("the child %s %d (its stderr says which check)", st > 128 ? "died of signal" : "failed check",
			 st > 128 ? st - 128 : st);
	assert_unchanged(&before, "values at NULL");
}

/* In a child: a record of no NULs, ending where readable memory ends. */
static int unterminated_sync_record(void)
{
	long page = sysconf(_SC_PAGESIZE);
	char *m = mmap(NULL, (size_t)page * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHILD_CHECK(m != MAP_FAILED && mprotect(m + page, (size_t)page, PROT_NONE) == 0, "mmap");
	shmcfg_sync_info *in = (shmcfg_sync_info *)(m + page - sizeof *in);
	memset(in, 'A', sizeof *in);
	in->pid = 1;
	shmcfg *own; /* a child's own handle: the parent's writer lock is not its */
	CHILD_CHECK(shmcfg_attach(seg, 0, NULL, &own) == 0, "attach");
	int r = shmcfg_sync_set(own, in);
	CHILD_CHECK(r == 0, "sync_set: %d", r);
	shmcfg_sync_info out;
	CHILD_CHECK(shmcfg_sync_get(own, &out) == 0, "sync_get");
	shmcfg_close(own);
	CHILD_CHECK(strlen(out.endpoints) == sizeof out.endpoints - 1 && strlen(out.error) == sizeof out.error - 1 &&
			    strspn(out.host, "A") == sizeof out.host - 1,
		    "the fields were not truncated to theirs: %zu %zu", strlen(out.endpoints), strlen(out.error));
	return 0;
}

/*
 * shmcfg_sync_set reads each string field of the caller's record within
 * the field: one without a NUL is truncated, never read past (E43: snprintf
 * "%s" ran on through the next fields and past the record; here into a
 * page that cannot be read).
 */
static void test_sync_record_fields_without_nul(void **state)
{
	(void)state;
	int st = in_child(unterminated_sync_record, 10000);
	if (st)
		fail_msg("the child %s %d", st > 128 ? "died of signal" : "failed check", st > 128 ? st - 128 : st);
}

/*
 * shmcfg_value_json and shmcfg_value_format of something that is not a
 * value (invalid UTF-8 in a string or an item, bytes at NULL, an unknown
 * type) return -EINVAL with a detail saying what. (E44: every one was
 * -ENOMEM, "out of memory"; the values at NULL crashed.)
 */
static void test_value_json_of_bad_values(void **state)
{
	(void)state;
	const struct {
		shmcfg_value v;
		const char *why;
	} bad[] = {
		{{.type = SHMCFG_STR, .u.str = {"\xff\xfe", 2}}, "not valid UTF-8"},
		{{.type = SHMCFG_LIST, .u.list = {"ok\0\xc3\0", 2, 5}}, "not valid UTF-8"},
		{{.type = SHMCFG_STR, .u.str = {NULL, 5}}, "at NULL"},
		{{.type = SHMCFG_SET, .u.list = {NULL, 3, 6}}, "at NULL"},
		{{.type = (shmcfg_type)42}, "unknown type 42"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		for (int fmt = 0; fmt < 2; fmt++) {
			char *text = NULL;
			int r = fmt ? shmcfg_value_format(&bad[i].v, &text) : shmcfg_value_json(&bad[i].v, &text);
			if (r != -EINVAL)
				fail_msg("value %zu: %s gave %d (%s: %s)", i, fmt ? "value_format" : "value_json", r,
					 shmcfg_errname(r), shmcfg_errdetail());
			assert_null(text);
			assert_detail_names("a bad value", bad[i].why);
		}
	}
	/* a good value still is one */
	const shmcfg_value ok = {.type = SHMCFG_LIST, .u.list = {"a\0\xc3\xa9\0", 2, 5}};
	char *text = NULL;
	assert_int_equal(shmcfg_value_json(&ok, &text), 0);
	assert_string_equal(text, "[\"a\",\"\xc3\xa9\"]");
	free(text);
}

/* JSON text: prefix, then n times item, then suffix (malloc()ed). */
static char *repeated(const char *prefix, const char *item, size_t n, const char *suffix, size_t *len)
{
	size_t pl = strlen(prefix), il = strlen(item), sl = strlen(suffix);
	char *t = malloc(pl + il * n + sl + 1);
	assert_non_null(t);
	memcpy(t, prefix, pl);
	for (size_t i = 0; i < n; i++)
		memcpy(t + pl + i * il, item, il);
	memcpy(t + pl + il * n, suffix, sl + 1);
	*len = pl + il * n + sl;
	return t;
}

/*
 * JSON text is refused before jansson parses it when it holds more values
 * than its use can (SHMCFG_E_PARSE, "more than N values"): a value, at most
 * one per byte of the largest value; a load, a few per option and the items
 * of two such values. (E45: an 18 MB load of 6 million empty objects took
 * 1.44 GB in jansson before it was found to be no configuration.)
 */
static void test_json_too_many_values_refused(void **state)
{
	(void)state;
	struct state before = now();
	size_t len;
	char *text = repeated("{\"t.items\": [", "{},", 3u << 20, "{}]}", &len);
	int r = shmcfg_load(h, text, len, NULL, NULL, NULL);
	if (r != SHMCFG_E_PARSE)
		fail_msg("a load of 3 Mi objects: %d (%s: %s)", r, shmcfg_errname(r), shmcfg_errdetail());
	assert_detail_names("a load of 3 Mi objects", "values: refused before parsing");
	free(text);
	assert_unchanged(&before, "a load of 3 Mi objects");
	text = repeated("[", "\"\",", SEG_MAX_VALUE_BYTES + 8, "\"\"]", &len);
	shmcfg_value v;
	r = shmcfg_value_from_json(h, T_ITEMS, text, len, &v);
	if (r != SHMCFG_E_PARSE)
		fail_msg("value_from_json of a list of 1 Mi items: %d (%s: %s)", r, shmcfg_errname(r),
			 shmcfg_errdetail());
	assert_detail_names("value_from_json", "values: refused before parsing");
	shmcfg_txn *t;
	assert_int_equal(shmcfg_txn_begin(h, &t), 0);
	r = shmcfg_txn_set_text(t, T_ITEMS, text);
	shmcfg_txn_abort(t);
	if (r != SHMCFG_E_PARSE)
		fail_msg("txn_set_text of a list of 1 Mi items: %d (%s)", r, shmcfg_errname(r));
	assert_detail_names("txn_set_text", "values: refused before parsing");
	free(text);
	/* commas and brackets inside strings are no values */
	text = repeated("{\"t.c\": \"", "[,:{", 4096, "\\\"\"}", &len);
	r = shmcfg_value_from_json(h, T_C, text + 8, len - 9, &v);
	if (r)
		fail_msg("a string of brackets: %d (%s)", r, shmcfg_errdetail());
	assert_int_equal(v.u.str.len, 4 * 4096 + 1);
	shmcfg_value_clear(&v);
	free(text);
}

/* ------------------------------------------------------------------ */

int main(void)
{
	if (getenv("TEST_FILTER"))
		cmocka_set_test_filter(getenv("TEST_FILTER"));
	shmcfg_set_log(NULL, NULL);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_wrong_types, setup, teardown),
		cmocka_unit_test_setup_teardown(test_numbers_out_of_range, setup, teardown),
		cmocka_unit_test_setup_teardown(test_nan_and_infinities, setup, teardown),
		cmocka_unit_test_setup_teardown(test_overlong_strings_and_names, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unknown_options, setup, teardown),
		cmocka_unit_test_setup_teardown(test_embedded_nul_and_utf8, setup, teardown),
		cmocka_unit_test_setup_teardown(test_value_from_json_nul, setup, teardown),
		cmocka_unit_test_setup_teardown(test_nulls_and_choices, setup, teardown),
		cmocka_unit_test_setup_teardown(test_malformed_json, setup, teardown),
		cmocka_unit_test_setup_teardown(test_full_heap, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hostile_descriptors, setup, teardown),
	cmocka_unit_test_setup_teardown(test_hostile_schema_text, setup, teardown),
	cmocka_unit_test_setup_teardown(test_schema_add_refuses_texts_not_utf8, setup, teardown),
	cmocka_unit_test_setup_teardown(test_value_not_utf8_shown_escaped, setup, teardown),
	cmocka_unit_test_setup_teardown(test_schema_of_names_the_option, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hostile_current_does_not_hang, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hostile_env_list_rejected, setup, teardown),
		cmocka_unit_test_setup_teardown(test_commit_never_publishes_corrupt_layers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_in_cell_reference_of_an_implied_option, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hostile_change_ring_is_not_followed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_oversized_patch_keeps_reads_working, setup, teardown),
		cmocka_unit_test_setup_teardown(test_conflicting_patches_keep_reads_working, setup, teardown),
		cmocka_unit_test_setup_teardown(test_malformed_list_values_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_yaml_float_specials_load, setup, teardown),
		cmocka_unit_test_setup_teardown(test_nan_bounds_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_many_implications_load, setup, teardown),
		cmocka_unit_test_setup_teardown(test_idle_readers_do_not_block_commits, setup, teardown),
		cmocka_unit_test_setup_teardown(test_implicit_defaults_respect_range_and_choices, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_implication_refused_without_leak, setup, teardown),
		cmocka_unit_test_setup_teardown(test_schema_aliases_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_null_pointers_in_arguments_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sync_record_fields_without_nul, setup, teardown),
		cmocka_unit_test_setup_teardown(test_value_json_of_bad_values, setup, teardown),
		cmocka_unit_test_setup_teardown(test_json_too_many_values_refused, setup, teardown),
	};
	return cmocka_run_group_tests_name("test_badinput", tests, NULL, NULL);
}
