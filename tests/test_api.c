/* SPDX-License-Identifier: MIT */
/* Contracts that span calls: the error detail belongs to the last call, and a
 * transaction commits all of its changes or none. */
#include <errno.h>
#include <math.h>

#include "common.h"

struct fx {
	char name[64];
	shmcfg *h;
};

static int setup(void **state)
{
	static struct fx f;
	snprintf(f.name, sizeof f.name, "%s", test_name("api"));
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

/* ------------------------------------------------------------------ */
/* The error detail                                                   */
/* ------------------------------------------------------------------ */

#define MARK "stale.marker.option"

/* Calls that left the marker behind, for one report at the end. */
static char leaked[4096];

/* A failed call whose detail names MARK. */
static void make_stale(const shmcfg *h)
{
	shmcfg_opt o;
	assert_int_equal(shmcfg_lookup(h, MARK, &o), SHMCFG_E_NOOPT);
	assert_non_null(strstr(shmcfg_errdetail(), MARK));
}

static void check_fresh(const char *what)
{
	if (strstr(shmcfg_errdetail(), MARK)) {
		size_t l = strlen(leaked);
		snprintf(leaked + l, sizeof leaked - l, "\n  %s", what);
	}
}

/* CALL must return WANT, and must not leave the earlier call's detail.
 * Failures are collected, not raised: the test must not jump out while it
 * holds a snapshot. */
#define FRESH(h, want, call)                                                    \
	do {                                                                    \
		make_stale(h);                                                  \
		int r_ = (call);                                                \
		if (r_ != (want)) {                                             \
			size_t l_ = strlen(leaked);                             \
			snprintf(leaked + l_, sizeof leaked - l_,               \
				 "\n  %s returned %d (%s), not %d", #call, r_,  \
				 shmcfg_errname(r_), (int)(want));              \
		}                                                               \
		check_fresh(#call);                                             \
	} while (0)
/* The same for a call without a status. */
#define FRESH_V(h, call)                                                        \
	do {                                                                    \
		make_stale(h);                                                  \
		(void)(call);                                                   \
		check_fresh(#call);                                             \
	} while (0)

static void count_reader(const shmcfg_reader *r, void *ud)
{
	(void)r;
	++*(int *)ud;
}

static void ignore_problem(const char *p, void *ud)
{
	(void)p;
	(void)ud;
}

/* Every public call that can fail clears the detail at entry: after a failed
 * lookup, a call that succeeds (or fails with no detail of its own) must not
 * show the lookup's text. Before, most calls left it, so that a later -ENOMEM
 * or a success carried a detail about an unrelated option. */
static void test_errdetail_cleared(void **state)
{
	struct fx *f = *state;
	shmcfg *h = f->h;
	leaked[0] = 0;
	shmcfg_value v = {0}, w = {0};
	char *text = NULL;
	uint8_t hash[16];
	shmcfg_opt o;
	uint64_t gen = 0;

	/* values and names */
	FRESH(h, 0, shmcfg_value_parse(SHMCFG_INT, false, "7", &v));
	FRESH(h, 0, shmcfg_value_format(&v, &text));
	free(text);
	const char *items[] = {"b", "a"};
	FRESH(h, 0, shmcfg_value_list(SHMCFG_SET, items, 2, &w));
	shmcfg_value_clear(&w);

	/* schemas */
	shmcfg_schema *s = NULL, *d = NULL, *y = NULL;
	FRESH(h, 0, shmcfg_schema_new(&s));
	FRESH(h, 0, shmcfg_schema_add(s, &test_opts[T_A]));
	FRESH(h, 0, shmcfg_schema_default(&d));
	const char *yaml = "format: 1\noptions:\n  y.a:\n    type: int\n    default: 1\n";
	FRESH(h, 0, shmcfg_schema_load_text(yaml, strlen(yaml), "mem", &y));
	shmcfg_schema *none = NULL;
	FRESH(h, -ENOENT, shmcfg_schema_load("/nonexistent/schema.yaml", &none));
	FRESH(h, 0, shmcfg_schema_write_yaml(y, "a comment", &text));
	free(text);
	shmcfg_schema *of = NULL;
	FRESH(h, 0, shmcfg_schema_of(h, &of));
	shmcfg_schema_free(of);

	/* segments */
	const char *other = test_name("api2");
	shmcfg *h2 = NULL, *ro = NULL;
	FRESH(h, 0, shmcfg_create(other, s, &(shmcfg_create_opts){.flags = SHMCFG_CREATE_FORCE}, &h2));
	FRESH(h, 0, shmcfg_attach(f->name, SHMCFG_ATTACH_RDONLY, NULL, &ro));

	/* options and reads */
	FRESH(h, 0, shmcfg_lookup(h, "t.a", &o));
	shmcfg_optinfo oi;
	FRESH(h, 0, shmcfg_opt_info(h, T_MODE, &oi));
	shmcfg_opt target;
	FRESH(h, 0, shmcfg_opt_implies(h, T_DEBUG, 0, &target, &w));
	FRESH(h, 0, shmcfg_get(h, T_C, &w));
	shmcfg_value_clear(&w);
	FRESH_V(h, shmcfg_config_hash(h, hash));
	const char *names[] = {"t.a", "t.b"};
	const shmcfg_type types[] = {SHMCFG_INT, SHMCFG_INT};
	FRESH(h, 0, shmcfg_verify_handles(h, names, types, 2));

	/* snapshots */
	shmcfg_snapshot *snap = NULL;
	FRESH(h, 0, shmcfg_snapshot_acquire(h, &snap));
	FRESH(h, 0, shmcfg_snapshot_get(snap, T_MODE, &w));
	FRESH(h, 0, shmcfg_snapshot_layer(snap, T_A, SHMCFG_SRC_DEFAULT, &w));
	shmcfg_snapshot_release(snap);

	/* transactions */
	shmcfg_txn *t = NULL;
	FRESH(h, 0, shmcfg_txn_begin(h, &t));
	FRESH(h, 0, shmcfg_txn_layer(t, SHMCFG_SRC_USER));
	FRESH(h, 0, shmcfg_txn_set(t, T_A, &v));
	FRESH(h, 0, shmcfg_txn_set_text(t, T_B, "-7"));
	FRESH(h, 0, shmcfg_txn_set_bool(t, T_FLAG, true));
	FRESH(h, 0, shmcfg_txn_set_int(t, T_OPT_INT, 3));
	FRESH(h, 0, shmcfg_txn_set_float(t, T_RATIO, 0.25));
	FRESH(h, 0, shmcfg_txn_set_str(t, T_C, "seven"));
	FRESH(h, 0, shmcfg_txn_reset(t, T_ITEMS));
	FRESH(h, 0, shmcfg_txn_commit(t, &gen));
	FRESH(h, 0, shmcfg_wait(h, gen - 1, 0, NULL));
	shmcfg_commit c;
	FRESH(h, 0, shmcfg_commit_info(h, gen, &c));
	bool changed[T_COUNT];
	FRESH(h, 1, shmcfg_changes(h, gen - 1, gen, changed) >= 7);

	/* dump, load, codegen */
	FRESH(h, 0, shmcfg_is_default(h, T_A));
	FRESH(h, 0, shmcfg_dump(h, 0, &text));
	FRESH(h, 1, shmcfg_load(h, text, strlen(text), NULL, NULL, NULL) >= 0);
	free(text);
	FRESH(h, 0, shmcfg_codegen(h, SHMCFG_CODEGEN_JSON, &text));
	free(text);

	/* patches */
	FRESH(h, 0, shmcfg_patch_push(h));
	FRESH(h, 0, shmcfg_patch_set(h, T_A, &v));
	FRESH(h, 0, shmcfg_patch_set_text(h, T_B, "1"));
	FRESH(h, 0, shmcfg_patch_pop(h));
	shmcfg_patcher *p = NULL;
	FRESH(h, 0, shmcfg_patcher_new(h, &p));
	FRESH(h, 0, shmcfg_patcher_set(p, T_A, &v));
	FRESH(h, 0, shmcfg_patcher_apply(p));
	FRESH(h, 0, shmcfg_patcher_restore(p));
	shmcfg_patcher_free(p);

	/* inspection */
	shmcfg_info info;
	int nr = 0;
	FRESH(h, 0, shmcfg_stat(h, &info));
	FRESH(h, 1, shmcfg_readers(h, count_reader, &nr) >= 1);
	FRESH(h, 0, shmcfg_gc(h, NULL, NULL));
	FRESH(h, 0, shmcfg_check(h, true, ignore_problem, NULL));

	/* failures that carry no detail of their own */
	FRESH(h, -ENOENT, shmcfg_commit_info(h, gen + 100, &c));
	FRESH(h, -ETIMEDOUT, shmcfg_wait(h, gen + 100, 0, NULL));
	FRESH(h, -ERANGE, shmcfg_opt_implies(h, T_DEBUG, 99, &target, &w));
	FRESH(h, -ENOENT, shmcfg_patch_pop(h));
	assert_int_equal(shmcfg_snapshot_acquire(h, &snap), 0);
	FRESH(h, 1, shmcfg_snapshot_layer(snap, T_KNOBBED, SHMCFG_SRC_KNOB, &w)); /* not set */
	shmcfg_snapshot_release(snap);

	shmcfg_close(ro);
	shmcfg_close(h2);
	FRESH(h, 0, shmcfg_unlink(other));
	shmcfg_schema_free(s);
	shmcfg_schema_free(d);
	shmcfg_schema_free(y);
	shmcfg_value_clear(&v);
	if (leaked[0])
		fail_msg("calls that failed, or left the detail of an earlier failed call:%s", leaked);
}

static void ignore_log(int level, const char *msg, void *ud)
{
	(void)level;
	(void)msg;
	(void)ud;
}

/* The calls that cannot fail keep the detail, as free() keeps errno: a caller
 * may clean up, and name things, between a failure and its report. */
static void test_errdetail_kept_by_infallible(void **state)
{
	struct fx *f = *state;
	shmcfg *h = f->h;
	shmcfg_txn *t;
	shmcfg_snapshot *snap;
	shmcfg_schema *s;
	shmcfg_patcher *p;
	shmcfg *ro;
	shmcfg_value v;
	assert_int_equal(shmcfg_txn_begin(h, &t), 0);
	assert_int_equal(shmcfg_snapshot_acquire(h, &snap), 0);
	assert_int_equal(shmcfg_schema_new(&s), 0);
	assert_int_equal(shmcfg_patcher_new(h, &p), 0);
	assert_int_equal(shmcfg_attach(f->name, SHMCFG_ATTACH_RDONLY, NULL, &ro), 0);
	assert_int_equal(shmcfg_value_parse(SHMCFG_STR, false, "\"x\"", &v), 0);
	shmcfg_value w;
	assert_int_equal(shmcfg_value_parse(SHMCFG_LIST, false, "[\"a\"]", &w), 0);
	uint8_t hash[16];
	make_stale(h);
	/* accessors */
	assert_true(shmcfg_value_equal(&v, &v));
	assert_string_equal(shmcfg_list_next(&w, NULL), "a");
	assert_string_equal(shmcfg_type_name(SHMCFG_INT), "int");
	assert_string_equal(shmcfg_source_name(SHMCFG_SRC_USER), "user");
	assert_int_equal(shmcfg_schema_count(s), 0);
	assert_string_equal(shmcfg_name(h), f->name);
	assert_int_equal(shmcfg_count(h), T_COUNT);
	assert_true(shmcfg_readonly(ro));
	shmcfg_schema_hash(h, hash);
	assert_true(shmcfg_snapshot_generation(snap) >= 1);
	shmcfg_snapshot_hash(snap, hash);
	shmcfg_set_commit_timeout(h, 2000);
	shmcfg_set_log(ignore_log, NULL);
	shmcfg_set_log(NULL, NULL);
	assert_non_null(strstr(shmcfg_errdetail(), MARK));
	/* releasers */
	shmcfg_value_clear(&w);
	shmcfg_txn_abort(t);
	shmcfg_snapshot_release(snap);
	shmcfg_schema_free(s);
	shmcfg_patcher_free(p);
	shmcfg_value_clear(&v);
	shmcfg_closep(&ro);
	assert_non_null(strstr(shmcfg_errdetail(), MARK));
}

/* ------------------------------------------------------------------ */
/* Transactions: all or nothing                                       */
/* ------------------------------------------------------------------ */

/* One refused set, after and before good ones. */
struct refusal {
	const char *what;
	int want;
	int (*set)(shmcfg_txn *t);
};

static int refuse_type(shmcfg_txn *t) { return shmcfg_txn_set_bool(t, T_A, true); }
static int refuse_range(shmcfg_txn *t) { return shmcfg_txn_set_float(t, T_RATIO, 2.0); }
static int refuse_choice(shmcfg_txn *t) { return shmcfg_txn_set_str(t, T_MODE, "medium"); }
static int refuse_handle(shmcfg_txn *t) { return shmcfg_txn_set_int(t, 9999, 1); }
static int refuse_reset_handle(shmcfg_txn *t) { return shmcfg_txn_reset(t, 9999); }
static int refuse_null(shmcfg_txn *t)
{
	return shmcfg_txn_set(t, T_A, &(shmcfg_value){.type = SHMCFG_INT, .is_null = true});
}
static int refuse_parse(shmcfg_txn *t) { return shmcfg_txn_set_text(t, T_A, "twelve"); }
static int refuse_text_handle(shmcfg_txn *t) { return shmcfg_txn_set_text(t, 9999, "1"); }
static int refuse_knob(shmcfg_txn *t)
{
	int r = shmcfg_txn_layer(t, SHMCFG_SRC_KNOB);
	if (!r)
		r = shmcfg_txn_set_int(t, T_A, 1); /* t.a declares no knob */
	return r;
}
static int refuse_layer(shmcfg_txn *t) { return shmcfg_txn_layer(t, SHMCFG_SRC_ENV_FORCE); }

static const struct refusal refusals[] = {
	{"wrong type", SHMCFG_E_TYPE, refuse_type},
	{"out of range", SHMCFG_E_RANGE, refuse_range},
	{"not a choice", SHMCFG_E_CHOICE, refuse_choice},
	{"unknown handle", SHMCFG_E_NOOPT, refuse_handle},
	{"reset of an unknown handle", SHMCFG_E_NOOPT, refuse_reset_handle},
	{"null not allowed", SHMCFG_E_NULLVAL, refuse_null},
	{"parse error", SHMCFG_E_PARSE, refuse_parse},
	{"set_text of an unknown handle", SHMCFG_E_NOOPT, refuse_text_handle},
	{"no knob", SHMCFG_E_LAYER, refuse_knob},
	{"a layer transactions do not write", -EINVAL, refuse_layer},
};

/* A transaction with good sets and one refused: the refused set returns its
 * error, the commit returns it again with its detail and publishes nothing.
 * Before, the refused change was dropped and the rest committed. */
static void test_txn_all_or_nothing(void **state)
{
	struct fx *f = *state;
	shmcfg *h = f->h;
	for (size_t i = 0; i < sizeof refusals / sizeof refusals[0]; i++) {
		const struct refusal *rf = &refusals[i];
		uint64_t g0 = shmcfg_generation(h);
		uint8_t h0[16], h1[16];
		shmcfg_config_hash(h, h0);
		int64_t a0 = get_i(h, T_A);
		bool k0 = true, k1 = true;
		assert_int_equal(shmcfg_get_bool(h, T_KNOBBED, &k0), 0);
		shmcfg_txn *t;
		assert_int_equal(shmcfg_txn_begin(h, &t), 0);
		assert_int_equal(shmcfg_txn_set_int(t, T_A, a0 + 1000), 0);
		int r = rf->set(t);
		if (r != rf->want)
			fail_msg("%s: the set returned %s, not %s", rf->what, shmcfg_errname(r),
				 shmcfg_errname(rf->want));
		char detail[512];
		snprintf(detail, sizeof detail, "%s", shmcfg_errdetail());
		assert_true(detail[0] != 0);
		/* later good sets do not heal it (t.knobbed: good in either layer) */
		assert_int_equal(shmcfg_txn_set_bool(t, T_KNOBBED, !k0), 0);
		uint64_t gen = 12345;
		r = shmcfg_txn_commit(t, &gen);
		if (r != rf->want)
			fail_msg("%s: the commit returned %s, not the set's %s", rf->what, shmcfg_errname(r),
				 shmcfg_errname(rf->want));
		assert_string_equal(shmcfg_errdetail(), detail);
		assert_int_equal(gen, 12345); /* untouched */
		assert_int_equal(shmcfg_generation(h), g0);
		shmcfg_config_hash(h, h1);
		assert_memory_equal(h0, h1, 16);
		assert_int_equal(get_i(h, T_A), a0);
		assert_int_equal(shmcfg_get_bool(h, T_KNOBBED, &k1), 0);
		assert_true(k0 == k1);
	}
}

/*
 * The typed scalar setters take a short path for most options
 * (txn.c, txn_set_scalar): they must do exactly what shmcfg_txn_set() of
 * the same value does. Every option of the test schema and three more
 * (deprecated, a minimum only, a maximum only), on the user and the knob layer, with bools, ints in and out of a
 * range, and floats: the same result, detail and committed configuration.
 */
enum scalar_kind { SK_BOOL, SK_INT, SK_FLOAT };
static int typed_set(shmcfg_txn *t, shmcfg_opt o, enum scalar_kind k, double x)
{
	return k == SK_BOOL ? shmcfg_txn_set_bool(t, o, x != 0)
	       : k == SK_INT ? shmcfg_txn_set_int(t, o, (int64_t)x)
			     : shmcfg_txn_set_float(t, o, x);
}
static int generic_set(shmcfg_txn *t, shmcfg_opt o, enum scalar_kind k, double x)
{
	shmcfg_value v = k == SK_BOOL  ? (shmcfg_value){.type = SHMCFG_BOOL, .u.b = x != 0}
			 : k == SK_INT ? (shmcfg_value){.type = SHMCFG_INT, .u.i = (int64_t)x}
				       : (shmcfg_value){.type = SHMCFG_FLOAT, .u.f = x};
	return shmcfg_txn_set(t, o, &v);
}

/* the two segments below, removed even if the test failed half way */
static int scalar_teardown(void **state)
{
	(void)state;
	shmcfg_unlink(test_name("scalar1"));
	shmcfg_unlink(test_name("scalar2"));
	return 0;
}

static void test_scalar_setters_as_generic(void **state)
{
	(void)state;
	shmcfg_schema *s = test_schema();
	/* and one deprecated, one with a minimum only, one with a maximum only */
	shmcfg_optdef more[] = {{.name = "t.old", .type = SHMCFG_INT, .def = "3", .deprecated = "use t.a"},
				{.name = "t.lo", .type = SHMCFG_INT, .def = "0", .min = "0"},
				{.name = "t.hi", .type = SHMCFG_FLOAT, .def = "0", .max = "1"}};
	for (size_t i = 0; i < sizeof more / sizeof more[0]; i++)
		assert_int_equal(shmcfg_schema_add(s, &more[i]), 0);
	const char *n1 = test_name("scalar1"), *n2 = test_name("scalar2");
	shmcfg *h1 = create_from(n1, s, NULL), *h2 = create_from(n2, s, NULL);
	shmcfg_schema_free(s);
	static const struct {
		enum scalar_kind k;
		double x;
	} vals[] = {{SK_BOOL, 1}, {SK_INT, 7}, {SK_INT, 200}, {SK_INT, -6}, {SK_FLOAT, 0.25}, {SK_FLOAT, 2.0}};
	static const shmcfg_source layers[] = {SHMCFG_SRC_USER, SHMCFG_SRC_KNOB};
	int refused = 0, taken = 0;
	for (shmcfg_opt o = 0; o < T_COUNT + 3; o++)
		for (size_t v = 0; v < sizeof vals / sizeof vals[0]; v++)
			for (size_t l = 0; l < 2; l++) {
				shmcfg_txn *t1, *t2;
				assert_int_equal(shmcfg_txn_begin(h1, &t1), 0);
				assert_int_equal(shmcfg_txn_begin(h2, &t2), 0);
				assert_int_equal(shmcfg_txn_layer(t1, layers[l]), 0);
				assert_int_equal(shmcfg_txn_layer(t2, layers[l]), 0);
				int r1 = typed_set(t1, o, vals[v].k, vals[v].x);
				char d1[512];
				snprintf(d1, sizeof d1, "%s", shmcfg_errdetail());
				int r2 = generic_set(t2, o, vals[v].k, vals[v].x);
				if (r1 != r2 || strcmp(d1, shmcfg_errdetail()) != 0)
					fail_msg("option %u, value %zu, layer %zu: typed %d '%s', generic %d '%s'", o, v, l, r1,
						 d1, r2, shmcfg_errdetail());
				r1 = shmcfg_txn_commit(t1, NULL);
				r2 = shmcfg_txn_commit(t2, NULL);
				assert_int_equal(r1, r2);
				refused += r1 < 0;
				taken += r1 >= 0;
			}
	/* both kinds happened, and the two segments hold the same */
	assert_true(refused > 0 && taken > 0);
	uint8_t c1[16], c2[16];
	assert_int_equal(shmcfg_config_hash(h1, c1), shmcfg_config_hash(h2, c2));
	assert_memory_equal(c1, c2, 16);
	char *j1 = NULL, *j2 = NULL;
	assert_int_equal(shmcfg_dump(h1, SHMCFG_DUMP_ALL, &j1), 0);
	assert_int_equal(shmcfg_dump(h2, SHMCFG_DUMP_ALL, &j2), 0);
	assert_string_equal(j1, j2);
	free(j1);
	free(j2);
	shmcfg_close(h1);
	shmcfg_close(h2);
	shmcfg_unlink(n1);
	shmcfg_unlink(n2);
}

/* Of several refused sets, the commit reports the first. */
static void test_txn_first_error(void **state)
{
	struct fx *f = *state;
	shmcfg *h = f->h;
	uint64_t g0 = shmcfg_generation(h);
	shmcfg_txn *t;
	assert_int_equal(shmcfg_txn_begin(h, &t), 0);
	assert_int_equal(shmcfg_txn_set_float(t, T_RATIO, -1.0), SHMCFG_E_RANGE);
	char first[512];
	snprintf(first, sizeof first, "%s", shmcfg_errdetail());
	assert_non_null(strstr(first, "t.ratio"));
	assert_int_equal(shmcfg_txn_set_text(t, T_A, "x"), SHMCFG_E_PARSE);
	assert_int_equal(shmcfg_txn_set_str(t, T_MODE, "medium"), SHMCFG_E_CHOICE);
	assert_int_equal(shmcfg_txn_set_int(t, T_B, 5), 0);
	assert_int_equal(shmcfg_txn_commit(t, NULL), SHMCFG_E_RANGE);
	assert_string_equal(shmcfg_errdetail(), first);
	assert_int_equal(shmcfg_generation(h), g0);
}

/* A load with one bad value fails whole; unknown keys are still skipped with
 * a warning and do not refuse the load. */
static void warn_count(const char *msg, void *ud)
{
	(void)msg;
	++*(int *)ud;
}

static void test_load_all_or_nothing(void **state)
{
	struct fx *f = *state;
	shmcfg *h = f->h;
	uint64_t g0 = shmcfg_generation(h);
	int64_t a0 = get_i(h, T_A);
	const char *bad = "{\"t.a\": 4242, \"t.ratio\": 7.5}";
	int warned = 0;
	assert_int_equal(shmcfg_load(h, bad, strlen(bad), warn_count, &warned, NULL), SHMCFG_E_RANGE);
	assert_non_null(strstr(shmcfg_errdetail(), "t.ratio"));
	assert_int_equal(shmcfg_generation(h), g0);
	assert_int_equal(get_i(h, T_A), a0);
	const char *unknown = "{\"t.a\": 4243, \"no.such\": 1}";
	uint64_t gen;
	assert_int_equal(shmcfg_load(h, unknown, strlen(unknown), warn_count, &warned, &gen), 0);
	assert_int_equal(warned, 1);
	assert_int_equal(gen, g0 + 1);
	assert_int_equal(get_i(h, T_A), 4243);
}

/* Several loads in one transaction: one commit, a later load's value wins;
 * a refused load poisons the transaction, which then publishes nothing. */
static void test_txn_load(void **state)
{
	struct fx *f = *state;
	shmcfg *h = f->h;
	uint64_t g0 = shmcfg_generation(h), gen;
	const char *first = "{\"t.a\": 1, \"t.b\": 2}", *second = "{\"t.a\": 3}";
	shmcfg_txn *t;
	assert_int_equal(shmcfg_txn_begin(h, &t), 0);
	assert_int_equal(shmcfg_txn_load(t, first, strlen(first), SHMCFG_LOAD_STRICT, NULL, NULL), 0);
	assert_int_equal(shmcfg_txn_load(t, second, strlen(second), SHMCFG_LOAD_STRICT, NULL, NULL), 0);
	assert_int_equal(shmcfg_generation(h), g0);
	assert_int_equal(shmcfg_txn_commit(t, &gen), 0);
	assert_int_equal(gen, g0 + 1);
	assert_int_equal(get_i(h, T_A), 3);
	assert_int_equal(get_i(h, T_B), 2);
	const char *bad = "{\"t.ratio\": 7.5}";
	assert_int_equal(shmcfg_txn_begin(h, &t), 0);
	assert_int_equal(shmcfg_txn_load(t, second, strlen(second), 0, NULL, NULL), 0);
	assert_int_equal(shmcfg_txn_load(t, bad, strlen(bad), 0, NULL, NULL), SHMCFG_E_RANGE);
	assert_int_equal(shmcfg_txn_commit(t, NULL), SHMCFG_E_RANGE);
	assert_non_null(strstr(shmcfg_errdetail(), "t.ratio"));
	assert_int_equal(shmcfg_generation(h), g0 + 1);
	assert_int_equal(shmcfg_txn_begin(h, &t), 0);
	assert_int_equal(shmcfg_txn_load(t, "{", 1, 0, NULL, NULL), SHMCFG_E_PARSE);
	assert_int_equal(shmcfg_txn_commit(t, NULL), SHMCFG_E_PARSE);
	assert_int_equal(shmcfg_generation(h), g0 + 1);
}

/* ------------------------------------------------------------------ */
/* Structs that grow (include/shmcfg.h.in)                            */
/* ------------------------------------------------------------------ */

/* A caller built against a newer header: its structs are longer. */
struct newer_info { shmcfg_info info; uint64_t later[4]; };
struct newer_create { shmcfg_create_opts o; uint64_t later[2]; };

static void test_sized_structs(void **state)
{
	struct fx *f = *state;
	shmcfg_info ref;
	assert_int_equal(shmcfg_stat(f->h, &ref), 0);

	/* filled: the fields both know, the newer caller's extra bytes zeroed */
	struct newer_info n;
	memset(&n, 0xa5, sizeof n);
	assert_int_equal(shmcfg_stat_sized(f->h, &n.info, sizeof n), 0);
	assert_int_equal(n.info.generation, ref.generation);
	assert_memory_equal(n.info.schema_hash, ref.schema_hash, 16);
	for (int i = 0; i < 4; i++)
		assert_int_equal(n.later[i], 0);
	/* the functions of the macros' names, for programs built before 0.7:
	 * their struct is the base one, filled and no byte past it */
	shmcfg_info old;
	size_t base = offsetof(shmcfg_info, writer); /* up to 0.14 */
	memset(&old, 0xa5, sizeof old);
	assert_int_equal((shmcfg_stat)(f->h, &old), 0);
	assert_int_equal(old.generation, ref.generation);
	assert_memory_equal(old.config_hash, ref.config_hash, 16);
	assert_int_equal(old.copy_fallbacks, ref.copy_fallbacks);
	for (size_t i = base; i < sizeof old; i++)
		assert_int_equal(((unsigned char *)&old)[i], 0xa5);
	/* a caller built against 0.14's header: its struct, its fields */
	memset(&old, 0xa5, sizeof old);
	assert_int_equal(shmcfg_stat_sized(f->h, &old, base), 0);
	assert_int_equal(old.generation, ref.generation);
	for (size_t i = base; i < sizeof old; i++)
		assert_int_equal(((unsigned char *)&old)[i], 0xa5);
	assert_int_equal(ref.writer, SHMCFG_WRITER_FREE);
	shmcfg_commit c1, c2;
	assert_int_equal(shmcfg_commit_info(f->h, ref.generation, &c1), 0);
	assert_int_equal((shmcfg_commit_info)(f->h, ref.generation, &c2), 0);
	assert_int_equal(c1.generation, c2.generation);
	assert_int_equal(c1.pid, c2.pid);

	/* shorter than any release under this soname: refused, untouched */
	memset(&old, 0xa5, sizeof old);
	assert_int_equal(shmcfg_stat_sized(f->h, &old, base - 8), -EINVAL);
	assert_non_null(strstr(shmcfg_errdetail(), "shmcfg_info"));
	assert_int_equal(old.generation, 0xa5a5a5a5a5a5a5a5ull);
	shmcfg_sync_info si;
	assert_int_equal(shmcfg_sync_get_sized(f->h, &si, 16), -EINVAL);
	/* a size no struct has (a count, SIZE_MAX, garbage): refused before
	 * any byte past the struct is read or zeroed */
	assert_int_equal(shmcfg_stat_sized(f->h, &old, SIZE_MAX), -EINVAL);
	assert_non_null(strstr(shmcfg_errdetail(), "more than any struct"));
	assert_int_equal(old.generation, 0xa5a5a5a5a5a5a5a5ull);
	shmcfg_attach_opts ao = {0};
	shmcfg *hx = NULL;
	assert_int_equal(shmcfg_attach_with_sized(f->name, &ao, &hx, 1u << 20), -EINVAL);
	assert_null(hx);
	/* the detail names the public call, not a helper behind it */
	assert_int_equal(shmcfg_stat_sized(NULL, &old, sizeof old), -EINVAL);
	assert_non_null(strstr(shmcfg_errdetail(), "shmcfg_stat: invalid argument"));

	/* read: a newer caller's fields this library lacks must be zero */
	char name[64];
	snprintf(name, sizeof name, "%s", test_name("apisized"));
	shmcfg_schema *s = test_schema();
	struct newer_create nc = {.o = {.flags = SHMCFG_CREATE_NO_ENV}};
	nc.later[1] = 1;
	shmcfg *h = NULL;
	assert_int_equal(shmcfg_create_sized(name, s, &nc.o, &h, sizeof nc), -E2BIG);
	assert_non_null(strstr(shmcfg_errdetail(), "shmcfg_create_opts: byte"));
	assert_null(h);
	assert_int_equal(shmcfg_attach(name, 0, NULL, &h), -ENOENT); /* nothing was created */
	struct { shmcfg_attach_opts o; uint32_t later; } na = {.later = 7};
	assert_int_equal(shmcfg_attach_with_sized(f->name, &na.o, &h, sizeof na), -E2BIG);
	assert_null(h);
	nc.later[1] = 0;
	nc.o.slots = 3;
	assert_int_equal(shmcfg_create_sized(name, s, &nc.o, &h, sizeof nc), 0);
	assert_int_equal(shmcfg_stat(h, &ref), 0);
	assert_int_equal(ref.nslots, 3); /* the fields both know were read */
	na.later = 0;
	shmcfg *h2 = NULL;
	assert_int_equal(shmcfg_attach_with_sized(name, &na.o, &h2, sizeof na), 0);
	shmcfg_close(h2);
	shmcfg_close(h);
	shmcfg_unlink(name);
	shmcfg_schema_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_errdetail_cleared, setup, teardown),
		cmocka_unit_test_setup_teardown(test_errdetail_kept_by_infallible, setup, teardown),
		cmocka_unit_test_setup_teardown(test_txn_all_or_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_txn_first_error, setup, teardown),
		cmocka_unit_test_teardown(test_scalar_setters_as_generic, scalar_teardown),
		cmocka_unit_test_setup_teardown(test_load_all_or_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_txn_load, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sized_structs, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
