/* SPDX-License-Identifier: MIT */
/* The core API in one process: reads, transactions, validation, layers,
 * aliases, implications, snapshots, the commit log, hashes and waiting. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <fcntl.h>

#include "common.h"

#include <signal.h>
#include <sys/resource.h>

struct fx {
	const char *name;
	shmcfg *h;
};

static int setup(void **state)
{
	static struct fx f;
	static char name[64];
	snprintf(name, sizeof name, "%s", test_name("core"));
	f.name = name;
	f.h = test_create(f.name, NULL);
	*state = &f;
	return f.h ? 0 : -1;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	shmcfg_close(f->h);
	shmcfg_unlink(f->name);
	return 0;
}

static void value_text(const shmcfg *h, shmcfg_opt o, char *buf, size_t len, shmcfg_source *src)
{
	shmcfg_snapshot *s;
	shmcfg_value v;
	assert_int_equal(shmcfg_snapshot_acquire((shmcfg *)h, &s), 0);
	assert_int_equal(shmcfg_snapshot_get(s, o, &v), 0);
	char *t;
	assert_int_equal(shmcfg_value_format(&v, &t), 0);
	snprintf(buf, len, "%s", t);
	free(t);
	if (src)
		*src = v.source;
	shmcfg_snapshot_release(s);
}

#define assert_value(h, o, text, source)                                  \
	do {                                                              \
		char _b[256];                                             \
		shmcfg_source _s;                                         \
		value_text(h, o, _b, sizeof _b, &_s);                     \
		assert_string_equal(_b, text);                            \
		assert_string_equal(shmcfg_source_name(_s), shmcfg_source_name(source)); \
	} while (0)

static void test_defaults(void **state)
{
	struct fx *f = *state;
	assert_int_equal(shmcfg_count(f->h), T_COUNT);
	for (int i = 0; i < T_COUNT; i++) {
		shmcfg_opt o;
		assert_int_equal(shmcfg_lookup(f->h, test_opts[i].name, &o), 0);
		assert_int_equal(o, i);
	}
	assert_int_equal(shmcfg_generation(f->h), 1);
	assert_int_equal(get_i(f->h, T_A), 0);
	bool b = true;
	assert_int_equal(shmcfg_get_bool(f->h, T_FLAG, &b), 0);
	assert_false(b);
	double d = 0;
	assert_int_equal(shmcfg_get_float(f->h, T_RATIO, &d), 0);
	assert_true(d == 0.5);
	int64_t x = 42;
	assert_int_equal(shmcfg_get_int(f->h, T_OPT_INT, &x), SHMCFG_NULL);
	assert_int_equal(x, 42); /* untouched */
	assert_value(f->h, T_MODE, "\"fast\"", SHMCFG_SRC_DEFAULT);
	assert_value(f->h, T_ITEMS, "[\"x\",\"y\"]", SHMCFG_SRC_DEFAULT);
	assert_value(f->h, T_ALIAS2, "0", SHMCFG_SRC_ALIAS);
	assert_value(f->h, T_ENV_D, "1", SHMCFG_SRC_DEFAULT);

	shmcfg_optinfo in;
	assert_int_equal(shmcfg_opt_info(f->h, T_ALIAS2, &in), 0);
	assert_int_equal(in.alias, T_ALIAS_A);
	assert_int_equal(in.alias_final, T_A);
	assert_int_equal(shmcfg_opt_info(f->h, T_ENV_D, &in), 0);
	assert_int_equal(in.n_env_default, 2);
	assert_string_equal(in.env_default, "T_ENVD1");
	assert_string_equal(in.env_default + strlen(in.env_default) + 1, "T_ENVD2");
	assert_int_equal(shmcfg_opt_info(f->h, T_KNOBBED, &in), 0);
	assert_string_equal(in.knob, "team/flag:knobbed");
	assert_int_equal(shmcfg_opt_info(f->h, T_RATIO, &in), 0);
	assert_true(in.has_min && in.has_max && in.max.u.f == 1.0);
	assert_int_equal(shmcfg_opt_info(f->h, T_DEBUG, &in), 0);
	assert_int_equal(in.n_implies, 2);
	shmcfg_opt tgt;
	shmcfg_value iv;
	assert_int_equal(shmcfg_opt_implies(f->h, T_DEBUG, 1, &tgt, &iv), 0);
	assert_int_equal(tgt, T_MODE);
	assert_int_equal(iv.u.str.len, 4);
	assert_int_equal(shmcfg_opt_implies(f->h, T_DEBUG, 2, &tgt, &iv), -ERANGE);
}

static void test_lookup_errors(void **state)
{
	struct fx *f = *state;
	shmcfg_opt o;
	assert_int_equal(shmcfg_lookup(f->h, "t.nope", &o), SHMCFG_E_NOOPT);
	assert_non_null(strstr(shmcfg_errdetail(), "t.nope"));
	assert_int_equal(shmcfg_lookup(f->h, "t", &o), SHMCFG_E_NOOPT);
	/* a suffix: full names only, and the detail says where suffixes go */
	assert_int_equal(shmcfg_lookup(f->h, "flag", &o), SHMCFG_E_NOOPT);
	assert_non_null(strstr(shmcfg_errdetail(), "shmcfg_resolve() also takes a unique suffix"));
	assert_int_equal(shmcfg_resolve(f->h, "flag", &o), 0);
	assert_int_equal(o, T_FLAG);
	int64_t v;
	assert_int_equal(shmcfg_get_int(f->h, T_FLAG, &v), SHMCFG_E_TYPE);
	assert_non_null(strstr(shmcfg_errdetail(), "t.flag"));
	assert_int_equal(shmcfg_get_int(f->h, T_COUNT + 5, &v), SHMCFG_E_NOOPT);
	assert_int_equal(shmcfg_opt_info(f->h, T_COUNT, &(shmcfg_optinfo){0}), SHMCFG_E_NOOPT);
}

/* Every rejected value is refused with its detail, and the segment stays as
 * it was: the first refusal poisons the transaction. */
static void test_validation(void **state)
{
	struct fx *f = *state;
	uint64_t g0 = shmcfg_generation(f->h);
	uint8_t h0[16], h1[16];
	shmcfg_config_hash(f->h, h0);
	shmcfg_txn *t;
	assert_int_equal(shmcfg_txn_begin(f->h, &t), 0);
	struct {
		shmcfg_opt o;
		const char *text;
		int err;
		const char *detail;
	} bad[] = {
		{T_RATIO, "1.5", SHMCFG_E_RANGE, "above the maximum"},
		{T_RATIO, "-0.1", SHMCFG_E_RANGE, "below the minimum"},
		{T_RATIO, "nan", SHMCFG_E_RANGE, "NaN"},
		{T_MODE, "medium", SHMCFG_E_CHOICE, "not one of"},
		{T_A, "none", SHMCFG_E_PARSE, "t.a"},
		{T_A, "12x", SHMCFG_E_PARSE, "12x"},
		{T_A, "99999999999999999999", SHMCFG_E_PARSE, "overflows"},
		{T_FLAG, "maybe", SHMCFG_E_PARSE, "maybe"},
		{T_OPT_INT, "101", SHMCFG_E_RANGE, "t.opt_int"},
		{T_C, "\"bad \\u0000 nul\"", SHMCFG_E_PARSE, "NUL"},
		{T_C, "\xff\xfe", SHMCFG_E_PARSE, "UTF-8"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		int r = shmcfg_txn_set_text(t, bad[i].o, bad[i].text);
		if (r != bad[i].err)
			fail_msg("%s=%s gave %s (%s), expected %s", test_opts[bad[i].o].name, bad[i].text,
				 shmcfg_errname(r), shmcfg_errdetail(), shmcfg_errname(bad[i].err));
		if (!strstr(shmcfg_errdetail(), bad[i].detail))
			fail_msg("detail '%s' lacks '%s'", shmcfg_errdetail(), bad[i].detail);
	}
	/* wrong type through the typed API */
	assert_int_equal(shmcfg_txn_set_str(t, T_A, "5"), SHMCFG_E_TYPE);
	assert_int_equal(shmcfg_txn_set(t, T_A, &(shmcfg_value){.type = SHMCFG_INT, .is_null = true}),
			 SHMCFG_E_NULLVAL);
	assert_int_equal(shmcfg_txn_set_int(t, T_COUNT, 1), SHMCFG_E_NOOPT);
	/* the knob layer exists only for options that declare a knob */
	assert_int_equal(shmcfg_txn_layer(t, SHMCFG_SRC_KNOB), 0);
	assert_int_equal(shmcfg_txn_set_bool(t, T_FLAG, true), SHMCFG_E_LAYER);
	assert_int_equal(shmcfg_txn_layer(t, SHMCFG_SRC_ENV_FORCE), -EINVAL);
	/* the commit publishes nothing and returns the first refusal */
	assert_int_equal(shmcfg_txn_commit(t, NULL), SHMCFG_E_RANGE);
	assert_non_null(strstr(shmcfg_errdetail(), "above the maximum"));
	assert_int_equal(shmcfg_generation(f->h), g0);
	shmcfg_config_hash(f->h, h1);
	assert_memory_equal(h0, h1, 16);
	assert_int_equal(get_i(f->h, T_A), 0);
}

static void test_commit_and_noop(void **state)
{
	struct fx *f = *state;
	uint64_t g0 = shmcfg_generation(f->h), g;
	shmcfg_txn *t;
	assert_int_equal(shmcfg_txn_begin(f->h, &t), 0);
	assert_int_equal(shmcfg_txn_set_int(t, T_A, 7), 0);
	assert_int_equal(shmcfg_txn_set_int(t, T_B, -7), 0);
	assert_int_equal(shmcfg_txn_set_str(t, T_C, "7"), 0);
	assert_int_equal(shmcfg_txn_set_int(t, T_RATIO, 1), 0); /* int into float */
	assert_int_equal(shmcfg_txn_set_text(t, T_TAGS, "b,a,b"), 0);
	assert_int_equal(shmcfg_txn_commit(t, &g), 0);
	assert_int_equal(g, g0 + 1); /* many changes, one generation */
	assert_int_equal(shmcfg_generation(f->h), g);
	assert_int_equal(get_i(f->h, T_A), 7);
	assert_int_equal(get_i(f->h, T_B), -7);
	assert_value(f->h, T_C, "\"7\"", SHMCFG_SRC_USER);
	assert_value(f->h, T_RATIO, "1.0", SHMCFG_SRC_USER);
	assert_value(f->h, T_TAGS, "[\"a\",\"b\"]", SHMCFG_SRC_USER);
	/* the same values again: nothing changes, nothing is published */
	assert_int_equal(set_and_commit(f->h, T_A, "7", &g), 0);
	assert_int_equal(g, g0 + 1);
	assert_int_equal(shmcfg_generation(f->h), g0 + 1);
	/* the last change of an option in a transaction wins */
	assert_int_equal(shmcfg_txn_begin(f->h, &t), 0);
	assert_int_equal(shmcfg_txn_set_int(t, T_A, 1), 0);
	assert_int_equal(shmcfg_txn_set_int(t, T_A, 2), 0);
	assert_int_equal(shmcfg_txn_commit(t, &g), 0);
	assert_int_equal(get_i(f->h, T_A), 2);
	/* reset returns to the default, from the default layer */
	assert_int_equal(shmcfg_txn_begin(f->h, &t), 0);
	assert_int_equal(shmcfg_txn_reset(t, T_A), 0);
	assert_int_equal(shmcfg_txn_commit(t, &g), 0);
	assert_value(f->h, T_A, "0", SHMCFG_SRC_DEFAULT);
	/* resetting an unset layer changes nothing */
	assert_int_equal(shmcfg_txn_begin(f->h, &t), 0);
	assert_int_equal(shmcfg_txn_reset(t, T_A), 0);
	assert_int_equal(shmcfg_txn_commit(t, NULL), 0);
	/* setting the default value explicitly does change the layers */
	assert_int_equal(set_and_commit(f->h, T_A, "0", &g), 0);
	assert_value(f->h, T_A, "0", SHMCFG_SRC_USER);
}

/* A commit that changes nothing is no error to `if (r) fail()`: 0, the
 * generation unchanged, and shmcfg_txn_commit_ex() says nothing was
 * published; no positive result reads as an errno (1 was EPERM). */
static void test_noop_commit_is_no_error(void **state)
{
	struct fx *f = *state;
	uint64_t g0, g = 0;
	assert_int_equal(set_and_commit(f->h, T_B, "41", &g0), 0);
	shmcfg_txn *t;
	bool published = true;
	assert_int_equal(shmcfg_txn_begin(f->h, &t), 0);
	assert_int_equal(shmcfg_txn_set_int(t, T_B, 41), 0);
	assert_int_equal(shmcfg_txn_commit_ex(t, &g, &published), 0);
	assert_false(published);
	assert_int_equal(g, g0);
	assert_int_equal(shmcfg_generation(f->h), g0);
	/* an empty transaction, through the plain call */
	assert_int_equal(shmcfg_txn_begin(f->h, &t), 0);
	g = 0;
	assert_int_equal(shmcfg_txn_commit(t, &g), 0);
	assert_int_equal(g, g0);
	/* a real change: published, the next generation */
	assert_int_equal(shmcfg_txn_begin(f->h, &t), 0);
	assert_int_equal(shmcfg_txn_set_int(t, T_B, 42), 0);
	assert_int_equal(shmcfg_txn_commit_ex(t, &g, &published), 0);
	assert_true(published);
	assert_int_equal(g, g0 + 1);
	/* a refused transaction: the error, and not published */
	published = true;
	assert_int_equal(shmcfg_txn_begin(f->h, &t), 0);
	assert_int_equal(shmcfg_txn_set_text(t, T_RATIO, "7"), SHMCFG_E_RANGE);
	assert_int_equal(shmcfg_txn_commit_ex(t, NULL, &published), SHMCFG_E_RANGE);
	assert_false(published);
	/* positive values are results, not errnos */
	for (int r = 1; r < 200; r++) {
		assert_null(strstr(shmcfg_errname(r), "EPERM"));
		assert_null(strstr(shmcfg_strerror(r), "not permitted"));
		assert_non_null(strstr(shmcfg_strerror(r), "not an error"));
	}
	assert_string_equal(shmcfg_errname(SHMCFG_NULL), "SHMCFG_NULL");
	assert_string_equal(shmcfg_errname(2), "OK");
	assert_string_equal(shmcfg_errname(-EPERM), "EPERM"); /* errors keep their names */
	assert_string_equal(shmcfg_errname(-ENOENT), "ENOENT");
}

static void count_warn(const char *msg, void *ud)
{
	(void)msg;
	(*(int *)ud)++;
}

/* shmcfg_load_ex(): strict refuses another schema's dump and unknown names
 * (all listed) and changes nothing; partial applies what fits and warns of
 * the rest; a load that changes nothing is 0, not published. */
static void test_load_modes(void **state)
{
	(void)state;
	const char *name = test_name("load");
	shmcfg *h = test_create(name, NULL);
	uint64_t g0 = shmcfg_generation(h), g = 0;
	bool published = true;
	int warned = 0;
	const char *unknown = "{\"t.a\": 5, \"t.nope\": 1, \"t.zz\": 2}";
	assert_int_equal(shmcfg_load_ex(h, unknown, strlen(unknown), SHMCFG_LOAD_STRICT, count_warn, &warned, &g,
					&published),
			 SHMCFG_E_NOOPT);
	assert_string_equal(shmcfg_errdetail(), "2 unknown options: 't.nope' (did you mean t.mode?), 't.zz'");
	/* a name holding the quote, or a backslash, lists one way */
	const char *quoted = "{\"q', 'r\\\\\": 1}";
	assert_int_equal(shmcfg_load_ex(h, quoted, strlen(quoted), SHMCFG_LOAD_STRICT, count_warn, &warned, &g,
					&published),
			 SHMCFG_E_NOOPT);
	assert_non_null(strstr(shmcfg_errdetail(), "1 unknown option: 'q\\x27, \\x27r\\x5c'"));
	assert_false(published);
	assert_int_equal(warned, 0);
	assert_int_equal(shmcfg_generation(h), g0);
	/* partial: the known name is applied, each unknown one warned of */
	assert_int_equal(shmcfg_load_ex(h, unknown, strlen(unknown), SHMCFG_LOAD_PARTIAL, count_warn, &warned,
					&g, &published),
			 0);
	assert_true(published);
	assert_int_equal(g, g0 + 1);
	assert_int_equal(warned, 2);
	assert_int_equal(get_i(h, T_A), 5);
	/* again: nothing changes, 0 and not published */
	assert_int_equal(shmcfg_load_ex(h, unknown, strlen(unknown), SHMCFG_LOAD_PARTIAL, NULL, NULL, &g,
					&published),
			 0);
	assert_false(published);
	assert_int_equal(g, g0 + 1);
	assert_int_equal(shmcfg_load(h, "{\"t.a\": 5}", 10, NULL, NULL, NULL), 0);
	/* a refused value: fatal unless partial */
	const char *bad = "{\"t.a\": 6, \"t.ratio\": 7, \"t.c\": null}";
	assert_int_equal(shmcfg_load_ex(h, bad, strlen(bad), 0, NULL, NULL, NULL, NULL), SHMCFG_E_RANGE);
	assert_int_equal(get_i(h, T_A), 5);
	warned = 0;
	assert_int_equal(shmcfg_load_ex(h, bad, strlen(bad), SHMCFG_LOAD_PARTIAL, count_warn, &warned, NULL,
					&published),
			 0);
	assert_true(published);
	assert_int_equal(warned, 2);
	assert_int_equal(get_i(h, T_A), 6);
	/* a dump of another schema */
	char *dump;
	assert_int_equal(shmcfg_dump(h, 0, &dump), 0);
	char *hash = strstr(dump, "\"schema_hash\": \"");
	assert_non_null(hash);
	hash += strlen("\"schema_hash\": \"");
	/* its own schema: fine (the first load writes every value into the
	 * user layer; the second changes nothing) */
	assert_int_equal(shmcfg_load_ex(h, dump, strlen(dump), SHMCFG_LOAD_STRICT, NULL, NULL, NULL, &published), 0);
	assert_true(published);
	assert_int_equal(shmcfg_load_ex(h, dump, strlen(dump), SHMCFG_LOAD_STRICT, NULL, NULL, NULL, &published), 0);
	assert_false(published);
	hash[0] = hash[0] == '0' ? '1' : '0';
	g0 = shmcfg_generation(h);
	assert_int_equal(shmcfg_load_ex(h, dump, strlen(dump), SHMCFG_LOAD_STRICT, NULL, NULL, NULL, NULL),
			 SHMCFG_E_SCHEMA);
	assert_non_null(strstr(shmcfg_errdetail(), "schema hash"));
	warned = 0;
	assert_int_equal(shmcfg_load_ex(h, dump, strlen(dump), SHMCFG_LOAD_PARTIAL, count_warn, &warned, NULL,
					NULL),
			 0);
	assert_int_equal(warned, 1);
	assert_int_equal(shmcfg_generation(h), g0);
	free(dump);
	/* many unknown names: a bounded list */
	char big[8192] = "{";
	for (int i = 0; i < 200; i++)
		snprintf(big + strlen(big), sizeof big - strlen(big), "%s\"t.unknown_%03d\": 1", i ? ", " : "", i);
	strcat(big, "}");
	assert_int_equal(shmcfg_load_ex(h, big, strlen(big), SHMCFG_LOAD_STRICT, NULL, NULL, NULL, NULL),
			 SHMCFG_E_NOOPT);
	assert_true(strncmp(shmcfg_errdetail(), "200 unknown options: 't.unknown_000', ", 38) == 0);
	assert_non_null(strstr(shmcfg_errdetail(), " more)"));
	assert_true(strlen(shmcfg_errdetail()) < 500);
	assert_int_equal(shmcfg_load_ex(h, "{}", 2, SHMCFG_LOAD_STRICT | SHMCFG_LOAD_PARTIAL, NULL, NULL, NULL,
					NULL),
			 -EINVAL);
	assert_int_equal(shmcfg_generation(h), g0);
	shmcfg_close(h);
	assert_int_equal(shmcfg_unlink(name), 0);
}

/* An unquoted none/null for a string option that cannot be null is
 * refused (it used to become the text "None"); quoted, it is the text; a
 * nullable option takes it as null. */
static void test_unquoted_none(void **state)
{
	struct fx *f = *state;
	const char *words[] = {"None", "none", "null", "NULL"};
	for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
		shmcfg_txn *t;
		assert_int_equal(shmcfg_txn_begin(f->h, &t), 0);
		assert_int_equal(shmcfg_txn_set_text(t, T_C, words[i]), SHMCFG_E_NULLVAL);
		assert_non_null(strstr(shmcfg_errdetail(), "t.c"));
		assert_non_null(strstr(shmcfg_errdetail(), "quote"));
		shmcfg_txn_abort(t);
		shmcfg_value v;
		assert_int_equal(shmcfg_value_parse_opt(f->h, T_C, words[i], &v), SHMCFG_E_NULLVAL);
	}
	assert_int_equal(set_and_commit(f->h, T_C, "\"None\"", NULL), 0);
	assert_value(f->h, T_C, "\"None\"", SHMCFG_SRC_USER);
	assert_int_equal(set_and_commit(f->h, T_C, "Nonesuch", NULL), 0);
	assert_value(f->h, T_C, "\"Nonesuch\"", SHMCFG_SRC_USER);
	assert_int_equal(set_and_commit(f->h, T_OPT_INT, "None", NULL), 0);
	assert_value(f->h, T_OPT_INT, "null", SHMCFG_SRC_USER);
	/* shmcfg_value_parse() knows no option: schema texts keep their syntax */
	shmcfg_value v;
	assert_int_equal(shmcfg_value_parse(SHMCFG_STR, false, "None", &v), 0);
	shmcfg_value_clear(&v);
	assert_int_equal(set_and_commit(f->h, T_C, "0", NULL), 0);
}

static void test_alias(void **state)
{
	struct fx *f = *state;
	/* writes through an alias chain land on the final target */
	assert_int_equal(set_and_commit(f->h, T_ALIAS2, "31", NULL), 0);
	assert_value(f->h, T_A, "31", SHMCFG_SRC_USER);
	assert_value(f->h, T_ALIAS_A, "31", SHMCFG_SRC_ALIAS);
	assert_int_equal(get_i(f->h, T_ALIAS2), 31);
	shmcfg_snapshot *s;
	shmcfg_value v;
	assert_int_equal(shmcfg_snapshot_acquire(f->h, &s), 0);
	assert_int_equal(shmcfg_snapshot_layer(s, T_A, SHMCFG_SRC_USER, &v), 0);
	assert_int_equal(v.u.i, 31);
	assert_int_equal(shmcfg_snapshot_layer(s, T_ALIAS2, SHMCFG_SRC_USER, &v), 1); /* aliases store nothing */
	shmcfg_snapshot_release(s);
}

static void test_implications(void **state)
{
	struct fx *f = *state;
	assert_int_equal(set_and_commit(f->h, T_FLAG, "false", NULL), 0);
	assert_int_equal(set_and_commit(f->h, T_DEBUG, "true", NULL), 0);
	/* implied beats user */
	assert_value(f->h, T_FLAG, "true", SHMCFG_SRC_IMPLIED);
	assert_value(f->h, T_MODE, "\"slow\"", SHMCFG_SRC_IMPLIED);
	/* two active implications that disagree: nothing is published */
	uint64_t g0 = shmcfg_generation(f->h);
	int r = set_and_commit(f->h, T_SAFE, "true", NULL);
	assert_int_equal(r, SHMCFG_E_CONFLICT);
	assert_non_null(strstr(shmcfg_errdetail(), "t.debug"));
	assert_non_null(strstr(shmcfg_errdetail(), "t.safe"));
	assert_non_null(strstr(shmcfg_errdetail(), "t.mode"));
	assert_int_equal(shmcfg_generation(f->h), g0);
	assert_value(f->h, T_SAFE, "false", SHMCFG_SRC_DEFAULT);
	/* turning the implier off gives the user value back */
	assert_int_equal(set_and_commit(f->h, T_DEBUG, "false", NULL), 0);
	assert_value(f->h, T_FLAG, "false", SHMCFG_SRC_USER);
	assert_value(f->h, T_MODE, "\"fast\"", SHMCFG_SRC_DEFAULT);
	/* agreeing implications are fine */
	shmcfg_txn *t;
	assert_int_equal(shmcfg_txn_begin(f->h, &t), 0);
	assert_int_equal(shmcfg_txn_set_bool(t, T_SAFE, true), 0);
	assert_int_equal(shmcfg_txn_commit(t, NULL), 0);
	assert_value(f->h, T_MODE, "\"fast\"", SHMCFG_SRC_IMPLIED);
}

static void test_knob(void **state)
{
	struct fx *f = *state;
	shmcfg_txn *t;
	assert_int_equal(shmcfg_txn_begin(f->h, &t), 0);
	assert_int_equal(shmcfg_txn_layer(t, SHMCFG_SRC_KNOB), 0);
	assert_int_equal(shmcfg_txn_set_bool(t, T_KNOBBED, true), 0);
	assert_int_equal(shmcfg_txn_commit(t, NULL), 0);
	assert_value(f->h, T_KNOBBED, "true", SHMCFG_SRC_KNOB);
	/* user beats knob */
	assert_int_equal(set_and_commit(f->h, T_KNOBBED, "false", NULL), 0);
	assert_value(f->h, T_KNOBBED, "false", SHMCFG_SRC_USER);
	assert_int_equal(shmcfg_txn_begin(f->h, &t), 0);
	assert_int_equal(shmcfg_txn_reset(t, T_KNOBBED), 0);
	assert_int_equal(shmcfg_txn_commit(t, NULL), 0);
	assert_value(f->h, T_KNOBBED, "true", SHMCFG_SRC_KNOB);
}

static void test_env_layers(void **state)
{
	(void)state;
	const char *name = test_name("env");
	char *env[] = {"T_ENVD2=7", "T_ENVF=1", "OTHER=x", NULL};
	shmcfg *h = test_create(name, &(shmcfg_create_opts){.envp = env});
	assert_value(h, T_ENV_D, "7", SHMCFG_SRC_ENV_DEFAULT);
	assert_value(h, T_ENV_F, "true", SHMCFG_SRC_ENV_FORCE);
	/* user beats env_default; env_force beats user */
	assert_int_equal(set_and_commit(h, T_ENV_D, "3", NULL), 0);
	assert_int_equal(set_and_commit(h, T_ENV_F, "false", NULL), 0);
	assert_value(h, T_ENV_D, "3", SHMCFG_SRC_USER);
	assert_value(h, T_ENV_F, "true", SHMCFG_SRC_ENV_FORCE);
	shmcfg_close(h);

	/* the first set variable of the list wins */
	char *env2[] = {"T_ENVD2=9", "T_ENVD1=8", "T_ENVF=true", NULL};
	h = test_create(name, &(shmcfg_create_opts){.envp = env2});
	assert_value(h, T_ENV_D, "8", SHMCFG_SRC_ENV_DEFAULT);
	assert_value(h, T_ENV_F, "true", SHMCFG_SRC_ENV_FORCE);
	/* the creator learns which variables it applied: the winners only */
	shmcfg_env_use u;
	assert_int_equal(shmcfg_env_applied(h, 0, &u), 0);
	assert_string_equal(u.var, "T_ENVD1");
	assert_string_equal(u.value, "8");
	assert_int_equal(u.opt, T_ENV_D);
	assert_int_equal(u.layer, SHMCFG_SRC_ENV_DEFAULT);
	assert_int_equal(shmcfg_env_applied(h, 1, &u), 0);
	assert_string_equal(u.var, "T_ENVF");
	assert_string_equal(u.value, "true");
	assert_int_equal(u.opt, T_ENV_F);
	assert_int_equal(u.layer, SHMCFG_SRC_ENV_FORCE);
	assert_int_equal(shmcfg_env_applied(h, 2, &u), -ENOENT);
	/* an attached handle knows none */
	shmcfg *att;
	assert_int_equal(shmcfg_attach(name, 0, NULL, &att), 0);
	assert_int_equal(shmcfg_env_applied(att, 0, &u), -ENOENT);
	shmcfg_close(att);
	shmcfg_close(h);
	/* nothing applied: none */
	h = test_create(name, &(shmcfg_create_opts){.envp = (char *[]){"OTHER=1", NULL}});
	assert_int_equal(shmcfg_env_applied(h, 0, &u), -ENOENT);
	shmcfg_close(h);
	assert_int_equal(shmcfg_unlink(name), 0);

	/* a bad value fails the creation, names the variable and leaves nothing */
	const char *bad[] = {"T_ENVD1=abc", "T_ENVD1=", "T_ENVD1= 1", "T_ENVF=yes", "T_ENVD1=99999999999999999999"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		char *e[] = {(char *)bad[i], NULL};
		shmcfg_schema *s = test_schema();
		shmcfg *h2 = NULL;
		int r = shmcfg_create(name, s, &(shmcfg_create_opts){.envp = e}, &h2);
		shmcfg_schema_free(s);
		if (r != SHMCFG_E_ENV)
			fail_msg("%s gave %s", bad[i], shmcfg_errname(r));
		char var[16];
		snprintf(var, sizeof var, "%.*s", (int)(strchr(bad[i], '=') - bad[i]), bad[i]);
		assert_non_null(strstr(shmcfg_errdetail(), var));
		assert_int_equal(shmcfg_attach(name, 0, NULL, &h2), -ENOENT);
	}
}

static int try_schema(const shmcfg_optdef *defs, size_t n)
{
	shmcfg_schema *s;
	assert_int_equal(shmcfg_schema_new(&s), 0);
	int r = 0;
	for (size_t i = 0; !r && i < n; i++)
		r = shmcfg_schema_add(s, &defs[i]);
	shmcfg *h = NULL;
	if (!r)
		r = shmcfg_create(test_name("schema"), s,
				  &(shmcfg_create_opts){.flags = SHMCFG_CREATE_FORCE | SHMCFG_CREATE_NO_ENV}, &h);
	shmcfg_schema_free(s);
	if (h) {
		shmcfg_close(h);
		shmcfg_unlink(test_name("schema"));
	}
	return r;
}

static void test_schema_errors(void **state)
{
	(void)state;
	struct {
		shmcfg_optdef d[3];
		int err;
		const char *detail;
	} cases[] = {
		{{{.name = "x.a", .type = SHMCFG_INT, .alias = "x.b"}, {.name = "x.b", .type = SHMCFG_INT, .alias = "x.a"}},
		 SHMCFG_E_CYCLE, "alias cycle"},
		{{{.name = "x.a", .type = SHMCFG_BOOL, .implies = "x.b=true"}, {.name = "x.b", .type = SHMCFG_BOOL, .implies = "x.a=true"}},
		 SHMCFG_E_CYCLE, "implication cycle"},
		{{{.name = "x.a", .type = SHMCFG_INT, .alias = "x.zz"}}, SHMCFG_E_SCHEMADEF, "x.zz"},
		{{{.name = "x.a", .type = SHMCFG_BOOL, .alias = "x.b"}, {.name = "x.b", .type = SHMCFG_INT}},
		 SHMCFG_E_SCHEMADEF, "type"},
		{{{.name = "x.a", .type = SHMCFG_BOOL, .implies = "x.b=nope"}, {.name = "x.b", .type = SHMCFG_INT}},
		 SHMCFG_E_SCHEMADEF, "nope"},
		{{{.name = "x.a", .type = SHMCFG_INT, .implies = "x.b=1"}}, SHMCFG_E_SCHEMADEF, "bool"},
		{{{.name = "x.a", .type = SHMCFG_INT}, {.name = "x.a", .type = SHMCFG_INT}}, -EEXIST, "twice"},
		{{{.name = "x..a", .type = SHMCFG_INT}}, SHMCFG_E_SCHEMADEF, "invalid"},
		{{{.name = "1x", .type = SHMCFG_INT}}, SHMCFG_E_SCHEMADEF, "invalid"},
		{{{.name = "x.a", .type = SHMCFG_INT, .def = "5", .max = "3"}}, SHMCFG_E_SCHEMADEF, "maximum"},
		{{{.name = "x.a", .type = SHMCFG_STR, .knob = "k"}}, SHMCFG_E_SCHEMADEF, "knob"},
		{{{.name = "x.a", .type = SHMCFG_STR, .def = "\"c\"", .choices = "a,b"}}, SHMCFG_E_SCHEMADEF, "not one of"},
		{{{.name = "x.a", .type = 9}}, SHMCFG_E_SCHEMADEF, "type"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		size_t n = 0;
		while (n < 3 && cases[i].d[n].name)
			n++;
		int r = try_schema(cases[i].d, n);
		if (r != cases[i].err || !strstr(shmcfg_errdetail(), cases[i].detail))
			fail_msg("case %zu: %s (%s), expected %s with '%s'", i, shmcfg_errname(r),
				 shmcfg_errdetail(), shmcfg_errname(cases[i].err), cases[i].detail);
	}
	assert_int_equal(try_schema(NULL, 0), SHMCFG_E_SCHEMADEF); /* no options */
}

static void test_snapshots(void **state)
{
	struct fx *f = *state;
	assert_int_equal(set_and_commit(f->h, T_C, "before", NULL), 0);
	shmcfg_snapshot *s1, *s2, *s3;
	assert_int_equal(shmcfg_snapshot_acquire(f->h, &s1), 0);
	uint64_t g1 = shmcfg_snapshot_generation(s1);
	shmcfg_value v;
	assert_int_equal(shmcfg_snapshot_get(s1, T_C, &v), 0);
	const char *zero_copy = v.u.str.ptr;
	/* commits go on; the snapshot keeps its generation, strings stay put */
	for (int i = 0; i < 20; i++) {
		char text[32];
		snprintf(text, sizeof text, "after-%d", i);
		assert_int_equal(set_and_commit(f->h, T_C, text, NULL), 0);
		/* a nested snapshot sees the newest generation */
		assert_int_equal(shmcfg_snapshot_acquire(f->h, &s2), 0);
		assert_int_equal(shmcfg_snapshot_generation(s2), shmcfg_generation(f->h));
		shmcfg_snapshot_release(s2);
	}
	assert_string_equal(zero_copy, "before");
	assert_int_equal(shmcfg_snapshot_get(s1, T_C, &v), 0);
	assert_string_equal(v.u.str.ptr, "before");
	assert_int_equal(shmcfg_snapshot_generation(s1), g1);
	assert_int_equal(shmcfg_snapshot_acquire(f->h, &s3), 0);
	assert_true(shmcfg_snapshot_generation(s3) > g1);
	assert_int_equal(shmcfg_snapshot_get(s3, T_C, &v), 0);
	assert_string_equal(v.u.str.ptr, "after-19");
	assert_int_equal(shmcfg_snapshot_layer(s3, T_C, SHMCFG_SRC_DEFAULT, &v), 0);
	assert_string_equal(v.u.str.ptr, "0");
	assert_int_equal(shmcfg_snapshot_layer(s3, T_C, SHMCFG_SRC_ENV_FORCE, &v), 1);
	assert_int_equal(shmcfg_snapshot_layer(s3, T_C, SHMCFG_SRC_IMPLIED, &v), SHMCFG_E_LAYER);
	assert_int_equal(shmcfg_snapshot_get(s3, T_COUNT, &v), SHMCFG_E_NOOPT);
	shmcfg_snapshot_release(s3);
	shmcfg_snapshot_release(s1);
	/* copying read of any type */
	assert_int_equal(shmcfg_get(f->h, T_ITEMS, &v), 0);
	assert_int_equal(v.u.list.count, 2);
	shmcfg_value_clear(&v);
}

/* The typed inline getters of a snapshot: its generation's values, whatever
 * commits come after; null, the wrong type, a bad option or argument say so
 * as shmcfg_get_int() does; a read-only handle's copy and an older
 * generation's snapshot read alike. */
static void test_snapshot_typed(void **state)
{
	struct fx *f = *state;
	shmcfg_txn *t;
	uint64_t g0;
	assert_int_equal(shmcfg_txn_begin(f->h, &t), 0);
	assert_int_equal(shmcfg_txn_set_int(t, T_A, 7), 0);
	assert_int_equal(shmcfg_txn_set_bool(t, T_FLAG, true), 0);
	assert_int_equal(shmcfg_txn_set_float(t, T_RATIO, 0.25), 0);
	assert_int_equal(shmcfg_txn_reset(t, T_OPT_INT), 0);
	assert_int_equal(shmcfg_txn_commit(t, &g0), 0);
	shmcfg_snapshot *s, *s2;
	assert_int_equal(shmcfg_snapshot_acquire(f->h, &s), 0);
	for (int round = 0; round < 2; round++) {
		int64_t i = 0;
		bool b = false;
		double d = 0;
		assert_int_equal(shmcfg_snapshot_get_int(s, T_A, &i), 0);
		assert_int_equal(i, 7);
		assert_int_equal(shmcfg_snapshot_get_int(s, T_ALIAS2, &i), 0); /* an alias's cell */
		assert_int_equal(i, 7);
		assert_int_equal(shmcfg_snapshot_get_bool(s, T_FLAG, &b), 0);
		assert_true(b);
		assert_int_equal(shmcfg_snapshot_get_float(s, T_RATIO, &d), 0);
		assert_true(d == 0.25);
		i = 99;
		assert_int_equal(shmcfg_snapshot_get_int(s, T_OPT_INT, &i), SHMCFG_NULL);
		assert_int_equal(i, 99); /* untouched */
		assert_int_equal(shmcfg_snapshot_get_int(s, T_C, &i), SHMCFG_E_TYPE);
		assert_non_null(strstr(shmcfg_errdetail(), "t.c: option is str, read as int"));
		assert_int_equal(shmcfg_snapshot_get_bool(s, T_A, &b), SHMCFG_E_TYPE);
		assert_int_equal(shmcfg_snapshot_get_int(s, T_COUNT, &i), SHMCFG_E_NOOPT);
		assert_int_equal(shmcfg_snapshot_get_int(s, T_A, NULL), -EINVAL);
		assert_int_equal(shmcfg_snapshot_get_int(NULL, T_A, &i), -EINVAL);
		/* the snapshot keeps its generation: commits after it change nothing */
		assert_int_equal(commit_int(f->h, T_A, 8 + round, NULL), 0);
	}
	assert_int_equal(shmcfg_snapshot_acquire(f->h, &s2), 0);
	int64_t now = 0;
	assert_int_equal(shmcfg_snapshot_get_int(s2, T_A, &now), 0);
	assert_int_equal(now, 9);
	shmcfg_snapshot_release(s2);
	shmcfg_snapshot_release(s);
	/* a read-only handle's snapshot is a private copy */
	shmcfg *ro;
	assert_int_equal(shmcfg_attach(f->name, SHMCFG_ATTACH_RDONLY, NULL, &ro), 0);
	assert_int_equal(shmcfg_snapshot_acquire(ro, &s), 0);
	assert_int_equal(shmcfg_snapshot_get_int(s, T_A, &now), 0);
	assert_int_equal(now, 9);
	shmcfg_snapshot_release(s);
	shmcfg_close(ro);
	/* an older generation, rebuilt from the history */
	assert_int_equal(shmcfg_snapshot_at(f->h, g0, &s), 0);
	assert_int_equal(shmcfg_snapshot_get_int(s, T_A, &now), 0);
	assert_int_equal(now, 7);
	shmcfg_snapshot_release(s);
}

static void *thread_reader(void *arg)
{
	shmcfg *h = arg;
	for (int i = 0; i < 2000; i++) {
		shmcfg_snapshot *s;
		shmcfg_value a, b;
		if (shmcfg_snapshot_acquire(h, &s))
			return (void *)1;
		if (shmcfg_snapshot_get(s, T_A, &a) || shmcfg_snapshot_get(s, T_B, &b) || a.u.i != -b.u.i) {
			shmcfg_snapshot_release(s);
			return (void *)2;
		}
		shmcfg_snapshot_release(s);
	}
	return NULL;
}

/* Snapshots from several threads of one process while this thread commits:
 * the in-process RCU view and its reclamation (also run under TSan). */
static void test_threads(void **state)
{
	struct fx *f = *state;
	pthread_t th[3];
	shmcfg_txn *t0;
	assert_int_equal(shmcfg_txn_begin(f->h, &t0), 0);
	assert_int_equal(shmcfg_txn_set_int(t0, T_A, 0), 0);
	assert_int_equal(shmcfg_txn_set_int(t0, T_B, 0), 0);
	assert_true(shmcfg_txn_commit(t0, NULL) >= 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(pthread_create(&th[i], NULL, thread_reader, f->h), 0);
	for (int n = 1; n <= 300; n++) {
		shmcfg_txn *t;
		assert_int_equal(shmcfg_txn_begin(f->h, &t), 0);
		assert_int_equal(shmcfg_txn_set_int(t, T_A, n), 0);
		assert_int_equal(shmcfg_txn_set_int(t, T_B, -n), 0);
		assert_int_equal(shmcfg_txn_commit(t, NULL), 0);
	}
	for (int i = 0; i < 3; i++) {
		void *ret;
		assert_int_equal(pthread_join(th[i], &ret), 0);
		assert_null(ret);
	}
}

struct committer {
	shmcfg *h;
	int published; /* commits that published: each made one generation */
	int err;
};

static void *thread_committer(void *arg)
{
	struct committer *c = arg;
	for (int i = 0; i < 3000 && !c->err; i++) {
		shmcfg_txn *t;
		if ((c->err = shmcfg_txn_begin(c->h, &t)))
			break;
		if ((c->err = shmcfg_txn_set_int(t, T_A, i * 2 + (c == NULL)))) {
			shmcfg_txn_abort(t);
			break;
		}
		bool published = false; /* the other thread may have set the same value: a no-op */
		int r = shmcfg_txn_commit_ex(t, NULL, &published);
		if (r < 0)
			c->err = r;
		c->published += published;
	}
	return NULL;
}

/* Two threads committing through one handle: every commit that returns 0
 * makes exactly one generation (the OFD lock alone let both in at once,
 * and generations were lost or doubled). */
static void test_threads_commit(void **state)
{
	(void)state;
	const char *name = test_name("tcommit");
	shmcfg *h = test_create(name, &(shmcfg_create_opts){.slots = 3});
	uint64_t g0 = shmcfg_generation(h);
	pthread_t th[2];
	struct committer c[2] = {{h, 0, 0}, {h, 0, 0}};
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&th[i], NULL, thread_committer, &c[i]), 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
	assert_int_equal(c[0].err, 0);
	assert_int_equal(c[1].err, 0);
	assert_true(c[0].published + c[1].published > 3000);
	assert_int_equal(shmcfg_generation(h) - g0, (uint64_t)(c[0].published + c[1].published));
	assert_int_equal(shmcfg_check(h, true, NULL, NULL), 0);
	shmcfg_close(h);
	shmcfg_unlink(name);
}

static void test_log_and_changes(void **state)
{
	struct fx *f = *state;
	uint64_t g1, g2;
	int r0 = set_and_commit(f->h, T_B, "100", &g1);
	if (r0)
		fail_msg("%s: %s", shmcfg_errname(r0), shmcfg_errdetail());
	shmcfg_txn *t;
	assert_int_equal(shmcfg_txn_begin(f->h, &t), 0);
	assert_int_equal(shmcfg_txn_set_int(t, T_A, 55), 0);
	assert_int_equal(shmcfg_txn_set_bool(t, T_DEBUG, true), 0);
	assert_int_equal(shmcfg_txn_reset(t, T_SAFE), 0); /* else mode would conflict */
	assert_int_equal(shmcfg_txn_commit(t, &g2), 0);
	shmcfg_commit c;
	assert_int_equal(shmcfg_commit_info(f->h, g2, &c), 0);
	assert_int_equal(c.generation, g2);
	assert_int_equal(c.pid, getpid());
	assert_int_equal(c.uid, getuid());
	/* a, its two aliases, debug and its targets flag and mode */
	bool seen[T_COUNT] = {0};
	for (uint32_t i = 0; i < c.nids; i++)
		seen[c.ids[i]] = true;
	assert_true(seen[T_A] && seen[T_ALIAS_A] && seen[T_ALIAS2] && seen[T_DEBUG] && seen[T_SAFE]);
	assert_false(seen[T_B] || seen[T_C]);
	assert_int_equal(c.nchanged, c.nids);
	bool changed[T_COUNT];
	int n = shmcfg_changes(f->h, g1 - 1, g2, changed);
	assert_true(n > 0);
	assert_true(changed[T_B] && changed[T_A]);
	assert_false(changed[T_C]);
	assert_int_equal(shmcfg_commit_info(f->h, g2 + 1, &c), -ENOENT);
	assert_int_equal(shmcfg_changes(f->h, g2, g1, changed), -EINVAL);
	assert_int_equal(set_and_commit(f->h, T_DEBUG, "false", NULL), 0);
}

static void test_hash(void **state)
{
	struct fx *f = *state;
	uint8_t h0[16], h1[16], h2[16];
	shmcfg_config_hash(f->h, h0);
	/* a hash-ignored option does not move the hash */
	assert_int_equal(set_and_commit(f->h, T_TAGS, "zz", NULL), 0);
	shmcfg_config_hash(f->h, h1);
	assert_memory_equal(h0, h1, 16);
	/* any other does; and back again gives the same hash */
	int64_t a = get_i(f->h, T_A);
	char text[32];
	snprintf(text, sizeof text, "%lld", (long long)a + 1);
	assert_int_equal(set_and_commit(f->h, T_A, text, NULL), 0);
	shmcfg_config_hash(f->h, h2);
	assert_memory_not_equal(h0, h2, 16);
	snprintf(text, sizeof text, "%lld", (long long)a);
	assert_int_equal(set_and_commit(f->h, T_A, text, NULL), 0);
	shmcfg_config_hash(f->h, h2);
	assert_memory_equal(h0, h2, 16);

	/* the same configuration declared in another order hashes the same */
	shmcfg_schema *s1, *s2;
	assert_int_equal(shmcfg_schema_new(&s1), 0);
	assert_int_equal(shmcfg_schema_new(&s2), 0);
	shmcfg_optdef x = {.name = "o.x", .type = SHMCFG_INT, .def = "3"};
	shmcfg_optdef y = {.name = "o.y", .type = SHMCFG_STR, .def = "\"hi\""};
	assert_int_equal(shmcfg_schema_add(s1, &x), 0);
	assert_int_equal(shmcfg_schema_add(s1, &y), 0);
	assert_int_equal(shmcfg_schema_add(s2, &y), 0);
	assert_int_equal(shmcfg_schema_add(s2, &x), 0);
	shmcfg *a1, *a2;
	shmcfg_create_opts o = {.flags = SHMCFG_CREATE_FORCE | SHMCFG_CREATE_NO_ENV};
	assert_int_equal(shmcfg_create(test_name("h1"), s1, &o, &a1), 0);
	assert_int_equal(shmcfg_create(test_name("h2"), s2, &o, &a2), 0);
	uint8_t sh1[16], sh2[16];
	shmcfg_schema_hash(a1, sh1);
	shmcfg_schema_hash(a2, sh2);
	assert_memory_not_equal(sh1, sh2, 16); /* handles differ: schemas differ */
	shmcfg_config_hash(a1, h1);
	shmcfg_config_hash(a2, h2);
	assert_memory_equal(h1, h2, 16);
	/* the hash covers values: printed (encoding v2), not compared; the
	 * golden values are test_semantics.c's */
	char hex[33];
	for (int i = 0; i < 16; i++)
		snprintf(hex + 2 * i, 3, "%02x", h1[i]);
	print_message("# config hash of {o.x: 3, o.y: \"hi\"}: %s\n", hex);
	shmcfg_close(a1);
	shmcfg_close(a2);
	shmcfg_unlink(test_name("h1"));
	shmcfg_unlink(test_name("h2"));
	shmcfg_schema_free(s1);
	shmcfg_schema_free(s2);
}

static void test_wait(void **state)
{
	struct fx *f = *state;
	uint64_t g = shmcfg_generation(f->h), seen = 0;
	assert_int_equal(shmcfg_wait(f->h, g, 30, &seen), -ETIMEDOUT);
	assert_int_equal(seen, g);
	assert_int_equal(shmcfg_wait(f->h, g - 1, 1000, &seen), 0);
	assert_int_equal(seen, g);
}

static void print_problem(const char *p, void *ud)
{
	(void)ud;
	print_message("# problem: %s\n", p);
}

static void test_readonly_and_heap(void **state)
{
	struct fx *f = *state;
	shmcfg *ro;
	assert_int_equal(shmcfg_attach(f->name, SHMCFG_ATTACH_RDONLY, NULL, &ro), 0);
	assert_true(shmcfg_readonly(ro));
	assert_int_equal(get_i(ro, T_A), get_i(f->h, T_A));
	shmcfg_txn *t;
	assert_int_equal(shmcfg_txn_begin(ro, &t), SHMCFG_E_READONLY);
	assert_int_equal(shmcfg_gc(ro, NULL, NULL), SHMCFG_E_READONLY);
	shmcfg_snapshot *s;
	assert_int_equal(shmcfg_snapshot_acquire(ro, &s), 0);
	assert_int_equal(shmcfg_snapshot_generation(s), shmcfg_generation(f->h));
	shmcfg_snapshot_release(s);
	shmcfg_close(ro);

	/* told not to grow, a full heap rejects the commit and changes nothing */
	const char *name = test_name("heap");
	shmcfg *h = test_create(name, &(shmcfg_create_opts){.heap_bytes = 1024});
	shmcfg_set_heap_growth(h, false);
	char big[2000];
	memset(big, 'x', sizeof big - 1);
	big[sizeof big - 1] = 0;
	uint64_t g = shmcfg_generation(h);
	assert_int_equal(set_and_commit(h, T_C, big, NULL), SHMCFG_E_FULL);
	assert_non_null(strstr(shmcfg_errdetail(), "t.c"));
	assert_int_equal(shmcfg_generation(h), g);
	assert_value(h, T_C, "\"0\"", SHMCFG_SRC_DEFAULT);
	assert_int_equal(set_and_commit(h, T_C, "fits", NULL), 0);
	assert_int_equal(shmcfg_check(h, true, print_problem, NULL), 0);
	/* a cluster revision's commit never grows it */
	shmcfg_set_heap_growth(h, true);
	shmcfg_txn *ct;
	assert_int_equal(shmcfg_txn_begin(h, &ct), 0);
	assert_int_equal(shmcfg_txn_layer(ct, SHMCFG_SRC_CLUSTER), 0);
	assert_int_equal(shmcfg_txn_origin(ct, 7, "agent"), 0);
	assert_int_equal(shmcfg_txn_set_str(ct, T_C, big), 0);
	assert_int_equal(shmcfg_txn_commit(ct, NULL), SHMCFG_E_FULL);
	assert_false(shmcfg_retired(h));
	/* by default it grows: a new incarnation, followed */
	assert_int_equal(set_and_commit(h, T_C, big, NULL), 0);
	assert_true(shmcfg_retired(h));
	assert_int_equal(shmcfg_check(h, true, print_problem, NULL), 0);
	shmcfg_close(h);
	shmcfg_unlink(name);
}

static void test_create_errors(void **state)
{
	struct fx *f = *state;
	shmcfg_schema *s = test_schema();
	shmcfg *h = NULL;
	const char *bad_names[] = {"", ".hidden", "a/b", "sp ace", "dollar$"};
	for (size_t i = 0; i < sizeof bad_names / sizeof bad_names[0]; i++) {
		assert_int_equal(shmcfg_create(bad_names[i], s, NULL, &h), -EINVAL);
		assert_int_equal(shmcfg_attach(bad_names[i], 0, NULL, &h), -EINVAL);
	}
	char longname[260];
	memset(longname, 'n', sizeof longname - 1);
	longname[sizeof longname - 1] = 0;
	assert_int_equal(shmcfg_create(longname, s, NULL, &h), -EINVAL);
	/* O_EXCL: an existing segment is not replaced without FORCE */
	assert_int_equal(shmcfg_create(f->name, s, NULL, &h), -EEXIST);
	assert_int_equal(get_i(f->h, T_A), get_i(f->h, T_A));
	assert_int_equal(shmcfg_create("x", s, &(shmcfg_create_opts){.slots = 1}, &h), -EINVAL);
	assert_int_equal(shmcfg_create("x", s, &(shmcfg_create_opts){.mode = 01777}, &h), -EINVAL);
	/* a segment that does not fit fails at creation, not later: here a
	 * file size limit stands in for a full /dev/shm */
	struct rlimit rl_old, rl;
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &rl_old), 0);
	rl = (struct rlimit){1 << 20, rl_old.rlim_max};
	void (*old_xfsz)(int) = signal(SIGXFSZ, SIG_IGN);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &rl), 0);
	int r = shmcfg_create(test_name("huge"), s,
			      &(shmcfg_create_opts){.heap_bytes = 64 << 20, .flags = SHMCFG_CREATE_NO_ENV}, &h);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &rl_old), 0);
	signal(SIGXFSZ, old_xfsz);
	assert_true(r == -ENOSPC || r == -EFBIG);
	assert_non_null(strstr(shmcfg_errdetail(), "/dev/shm"));
	assert_int_equal(shmcfg_attach(test_name("huge"), 0, NULL, &h), -ENOENT);
	/* the mode is exact, whatever the umask */
	mode_t old = umask(077);
	h = test_create(test_name("mode"), &(shmcfg_create_opts){.mode = 0640});
	umask(old);
	char path[128];
	snprintf(path, sizeof path, "/dev/shm/shmcfg.%s", test_name("mode"));
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0640);
	shmcfg_close(h);
	assert_int_equal(shmcfg_unlink(test_name("mode")), 0);
	assert_int_equal(shmcfg_unlink(test_name("mode")), -ENOENT);
	shmcfg_schema_free(s);
}

static void test_check_and_stat(void **state)
{
	struct fx *f = *state;
	assert_int_equal(shmcfg_check(f->h, true, print_problem, NULL), 0);
	shmcfg_info st;
	assert_int_equal(shmcfg_stat(f->h, &st), 0);
	assert_int_equal(st.generation, shmcfg_generation(f->h));
	assert_int_equal(st.nopts, T_COUNT);
	assert_int_equal(st.layout_version, 13);
	int held = 0;
	for (uint32_t s = 0; s < st.nslots; s++)
		held += st.slot_gen[s] == st.generation;
	assert_int_equal(held, 1);
	/* the reader entry is claimed by the first pinned snapshot, not at attach */
	assert_false(st.retired);
	uint32_t hwm = st.readers_hwm;
	int before = shmcfg_readers(f->h, NULL, NULL);
	shmcfg_snapshot *snap;
	assert_int_equal(shmcfg_snapshot_acquire(f->h, &snap), 0);
	shmcfg_snapshot_release(snap);
	assert_int_equal(shmcfg_readers(f->h, NULL, NULL), before > 0 ? before : 1);
	assert_int_equal(shmcfg_stat(f->h, &st), 0);
	assert_true(st.readers_hwm >= 1 && st.readers_hwm >= hwm);
	assert_int_equal(st.copy_fallbacks, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),       cmocka_unit_test(test_lookup_errors),
		cmocka_unit_test(test_validation),     cmocka_unit_test(test_commit_and_noop),
		cmocka_unit_test(test_noop_commit_is_no_error),
		cmocka_unit_test(test_load_modes),
		cmocka_unit_test(test_unquoted_none),
		cmocka_unit_test(test_alias),          cmocka_unit_test(test_implications),
		cmocka_unit_test(test_knob),           cmocka_unit_test(test_env_layers),
		cmocka_unit_test(test_schema_errors),  cmocka_unit_test(test_snapshots), cmocka_unit_test(test_snapshot_typed),
		cmocka_unit_test(test_threads),        cmocka_unit_test(test_threads_commit),
		cmocka_unit_test(test_log_and_changes),
		cmocka_unit_test(test_hash),           cmocka_unit_test(test_wait),
		cmocka_unit_test(test_readonly_and_heap), cmocka_unit_test(test_create_errors),
		cmocka_unit_test(test_check_and_stat),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
