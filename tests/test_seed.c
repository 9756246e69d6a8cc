/* SPDX-License-Identifier: MIT */
/* The seed's rules (PyTorch's torch/utils/_config_module.py) where a custom
 * schema showed shmcfg drifting: a dump keeps stored values under an active
 * implication, so a dump and load round trip is exact; cycles are named
 * whole; the errors a schema file meets when it is built name FILE:LINE;
 * reads by handle never warn of a deprecated option, a lookup does. */
#include "common.h"

#include <stdbool.h>

static shmcfg_schema *load_text(const char *y, const char *label)
{
	shmcfg_schema *s = NULL;
	int r = shmcfg_schema_load_text(y, strlen(y), label, &s);
	if (r)
		fail_msg("load %s: %s", label, shmcfg_errdetail());
	return s;
}

static void set_text(shmcfg *h, const char *name, const char *text)
{
	int r = set_and_commit(h, opt_named(h, name), text, NULL);
	if (r)
		fail_msg("set %s=%s: %s", name, text, shmcfg_errdetail());
}

/* ------------------------------------------------------------------ */
/* Dumps keep stored values                                           */
/* ------------------------------------------------------------------ */

/* m.fast implies a level and a mode; m.mode has an env_default layer. */
static const char *const implying_schema =
	"format: 1\n"
	"options:\n"
	"  m.fast:\n"
	"    type: bool\n"
	"    default: false\n"
	"    implies: {m.level: 5, m.mode: \"quick\", m.tags: [\"fast\"]}\n"
	"  m.level:\n"
	"    type: int\n"
	"    default: 1\n"
	"    min: 0\n"
	"    max: 10\n"
	"  m.mode:\n"
	"    type: str\n"
	"    default: \"normal\"\n"
	"    env_default: [SEED_TEST_MODE]\n"
	"  m.tags:\n"
	"    type: list\n"
	"    default: []\n"
	"  m.other:\n"
	"    type: int\n"
	"    default: 2\n"
	"  m.level_alias:\n"
	"    type: int\n"
	"    alias: m.level\n";

/* Every option of a and b holds the same value. */
static void assert_same_values(shmcfg *a, shmcfg *b)
{
	uint32_t n = shmcfg_count(a);
	assert_int_equal(n, shmcfg_count(b));
	for (shmcfg_opt i = 0; i < n; i++) {
		shmcfg_value va, vb;
		assert_int_equal(shmcfg_get(a, i, &va), 0);
		assert_int_equal(shmcfg_get(b, i, &vb), 0);
		if (!shmcfg_value_equal(&va, &vb)) {
			char *ta = NULL, *tb = NULL;
			assert_int_equal(shmcfg_value_format(&va, &ta), 0);
			assert_int_equal(shmcfg_value_format(&vb, &tb), 0);
			shmcfg_optinfo oi;
			assert_int_equal(shmcfg_opt_info(a, i, &oi), 0);
			fail_msg("%s: %s in the original, %s in the copy", oi.name, ta, tb);
		}
		shmcfg_value_clear(&va);
		shmcfg_value_clear(&vb);
	}
}

static void test_dump_keeps_stored_values(void **state)
{
	(void)state;
	shmcfg_schema *s = load_text(implying_schema, "imp.yaml");
	char *env[] = {"SEED_TEST_MODE=env", NULL};
	shmcfg *a = create_from(test_name("orig"), s, env);
	shmcfg *b = create_from(test_name("copy"), s, NULL);
	shmcfg_schema_free(s);
	set_text(a, "m.level", "3"); /* stored 3, then hidden by the implication */
	set_text(a, "m.fast", "true");
	assert_int_equal(get_i(a, opt_named(a, "m.level")), 5);
	/* the stored value by handle: an alias reads its target's */
	shmcfg_value sv;
	assert_int_equal(shmcfg_get_stored(a, opt_named(a, "m.level_alias"), &sv), 0);
	assert_true(sv.type == SHMCFG_INT && sv.u.i == 3 && sv.source == SHMCFG_SRC_USER);
	assert_int_equal(shmcfg_get_stored(a, opt_named(a, "m.mode"), &sv), 0);
	assert_true(sv.type == SHMCFG_STR && !strcmp(sv.u.str.ptr, "env") && sv.source == SHMCFG_SRC_ENV_DEFAULT);
	shmcfg_value_clear(&sv);
	assert_int_equal(shmcfg_get_stored(a, opt_named(a, "m.other"), &sv), 0);
	assert_true(sv.u.i == 2 && sv.source == SHMCFG_SRC_DEFAULT);
	assert_int_equal(shmcfg_get_stored(a, 99, &sv), SHMCFG_E_NOOPT);

	char *dump = NULL;
	assert_int_equal(shmcfg_dump(a, 0, &dump), 0);
	/* the stored values: the user layer's 3, the env layer's "env", the
	 * default []; the implier's own value; no alias */
	assert_non_null(strstr(dump, "\"m.level\": 3"));
	assert_non_null(strstr(dump, "\"m.mode\": \"env\""));
	assert_non_null(strstr(dump, "\"m.tags\": []"));
	assert_non_null(strstr(dump, "\"m.fast\": true"));
	assert_null(strstr(dump, "m.level_alias"));
	assert_int_equal(shmcfg_load(b, dump, strlen(dump), NULL, NULL, NULL), 0);
	free(dump);
	assert_same_values(a, b); /* the implication holds in both */

	/* turned off in both: each option shows what was stored */
	set_text(a, "m.fast", "false");
	set_text(b, "m.fast", "false");
	assert_int_equal(get_i(b, opt_named(b, "m.level")), 3);
	assert_same_values(a, b);

	/* and the copy dumps what the original dumps */
	char *da = NULL, *db = NULL;
	assert_int_equal(shmcfg_dump(a, SHMCFG_DUMP_ALL, &da), 0);
	assert_int_equal(shmcfg_dump(b, SHMCFG_DUMP_ALL, &db), 0);
	const char *va = strstr(da, "\"values\""), *vb = strstr(db, "\"values\"");
	assert_non_null(va);
	assert_non_null(vb);
	assert_string_equal(va, vb);
	free(da);
	free(db);
	shmcfg_close(a);
	shmcfg_close(b);
	shmcfg_unlink(test_name("orig"));
	shmcfg_unlink(test_name("copy"));
}

/* The seed's codegen_config() writes the same stored values (under an
 * implication, and under a thread's patch too). */
static void test_codegen_keeps_stored_values(void **state)
{
	(void)state;
	shmcfg_schema *s = load_text(implying_schema, "imp.yaml");
	shmcfg *h = create_from(test_name("gen"), s, NULL);
	shmcfg_schema_free(s);
	set_text(h, "m.level", "3");
	set_text(h, "m.fast", "true");
	char *py = NULL;
	assert_int_equal(shmcfg_codegen(h, SHMCFG_CODEGEN_PYTHON, &py), 0);
	assert_string_equal(py, "m.fast = True\nm.level = 3\n");
	free(py);
	/* a patch is the thread's user value: stored, and hidden alike */
	assert_int_equal(shmcfg_patch_push(h), 0);
	shmcfg_value seven = {.type = SHMCFG_INT, .u.i = 7};
	assert_int_equal(shmcfg_patch_set(h, opt_named(h, "m.level"), &seven), 0);
	assert_int_equal(get_i(h, opt_named(h, "m.level")), 5);
	shmcfg_value sv;
	assert_int_equal(shmcfg_get_stored(h, opt_named(h, "m.level"), &sv), 0);
	assert_true(sv.u.i == 7 && sv.source == SHMCFG_SRC_PATCH);
	assert_int_equal(shmcfg_codegen(h, SHMCFG_CODEGEN_PYTHON, &py), 0);
	assert_string_equal(py, "m.fast = True\nm.level = 7\n");
	free(py);
	assert_int_equal(shmcfg_patch_pop(h), 0);
	shmcfg_close(h);
	shmcfg_unlink(test_name("gen"));
}

/* ------------------------------------------------------------------ */
/* Cycles, and the place of errors found when a schema is built       */
/* ------------------------------------------------------------------ */

/* shmcfg_create() of the schema s (freed): its error, the detail kept. */
static int create_error(shmcfg_schema *s)
{
	shmcfg *h = NULL;
	int r = shmcfg_create(test_name("bad"), s,
			      &(shmcfg_create_opts){.flags = SHMCFG_CREATE_FORCE | SHMCFG_CREATE_NO_ENV}, &h);
	shmcfg_schema_free(s);
	if (h) {
		shmcfg_close(h);
		shmcfg_unlink(test_name("bad"));
	}
	return r;
}

static int create_error_defs(const shmcfg_optdef *d, size_t n)
{
	shmcfg_schema *s;
	assert_int_equal(shmcfg_schema_new(&s), 0);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(shmcfg_schema_add(s, &d[i]), 0);
	return create_error(s);
}

static void test_cycles_named_whole(void **state)
{
	(void)state;
	/* x -> z -> y -> x, declared x, y, z, and w implied by x (not on it) */
	const shmcfg_optdef imp[] = {
		{.name = "w", .type = SHMCFG_BOOL},
		{.name = "y", .type = SHMCFG_BOOL, .implies = "x=true"},
		{.name = "x", .type = SHMCFG_BOOL, .implies = "w=true;z=true"},
		{.name = "z", .type = SHMCFG_BOOL, .implies = "y=true"},
	};
	assert_int_equal(create_error_defs(imp, 4), SHMCFG_E_CYCLE);
	assert_string_equal(shmcfg_errdetail(), "config implication cycle: y -> x -> z -> y");
	const shmcfg_optdef self[] = {{.name = "s", .type = SHMCFG_BOOL, .implies = "s=false"}};
	assert_int_equal(create_error_defs(self, 1), SHMCFG_E_CYCLE);
	assert_string_equal(shmcfg_errdetail(), "config implication cycle: s -> s");
	/* an option downstream of the cycle is not on it */
	const shmcfg_optdef down[] = {
		{.name = "d", .type = SHMCFG_BOOL},
		{.name = "p", .type = SHMCFG_BOOL, .implies = "d=true;q=true"},
		{.name = "q", .type = SHMCFG_BOOL, .implies = "p=true"},
	};
	assert_int_equal(create_error_defs(down, 3), SHMCFG_E_CYCLE);
	assert_string_equal(shmcfg_errdetail(), "config implication cycle: p -> q -> p");

	/* aliases: b leads into the cycle a1 -> a2 -> a3 -> a1 */
	const shmcfg_optdef al[] = {
		{.name = "b", .type = SHMCFG_INT, .alias = "a2"},
		{.name = "a3", .type = SHMCFG_INT, .alias = "a1"},
		{.name = "a1", .type = SHMCFG_INT, .alias = "a2"},
		{.name = "a2", .type = SHMCFG_INT, .alias = "a3"},
	};
	assert_int_equal(create_error_defs(al, 4), SHMCFG_E_CYCLE);
	assert_string_equal(shmcfg_errdetail(), "config alias cycle: a3 -> a1 -> a2 -> a3");
	const shmcfg_optdef selfa[] = {{.name = "o", .type = SHMCFG_INT}, {.name = "s", .type = SHMCFG_INT, .alias = "s"}};
	assert_int_equal(create_error_defs(selfa, 2), SHMCFG_E_CYCLE);
	assert_string_equal(shmcfg_errdetail(), "config alias cycle: s -> s");
}

/* A cycle too long for the detail names its first members and the count. */
static void test_long_cycle(void **state)
{
	(void)state;
	enum { N = 200 };
	shmcfg_schema *s;
	assert_int_equal(shmcfg_schema_new(&s), 0);
	char names[N][48], implies[N][64];
	for (int i = 0; i < N; i++) {
		snprintf(names[i], sizeof names[i], "a.rather.long.option.name_%03d", i);
		snprintf(implies[i], sizeof implies[i], "a.rather.long.option.name_%03d=true", (i + 1) % N);
		shmcfg_optdef d = {.name = names[i], .type = SHMCFG_BOOL, .implies = implies[i]};
		assert_int_equal(shmcfg_schema_add(s, &d), 0);
	}
	assert_int_equal(create_error(s), SHMCFG_E_CYCLE);
	const char *d = shmcfg_errdetail();
	const char *head = "config implication cycle: a.rather.long.option.name_000 -> "
			   "a.rather.long.option.name_001 -> ";
	assert_true(strncmp(d, head, strlen(head)) == 0);
	const char *more = strstr(d, " -> ... (");
	assert_non_null(more);
	assert_non_null(strstr(more, " more) -> a.rather.long.option.name_000"));
	assert_string_equal(d + strlen(d) - strlen("name_000"), "name_000");
}

static void test_schema_file_errors_name_the_line(void **state)
{
	(void)state;
	static const struct {
		const char *yaml, *detail;
		int err;
	} cases[] = {
		{"format: 1\noptions:\n  m.a:\n    type: int\n  m.b:\n    type: int\n    alias: m.zz\n",
		 "bad.yaml:5: m.b: alias target m.zz is not declared", SHMCFG_E_SCHEMADEF},
		{"format: 1\noptions:\n  m.a:\n    type: int\n  m.b:\n    type: str\n    doc: |-\n      text\n"
		 "    alias: m.a\n",
		 "bad.yaml:5: m.b: alias of m.a must have its type int", SHMCFG_E_SCHEMADEF},
		{"format: 1\noptions:\n  m.a:\n    type: int\n  m.on:\n    type: bool\n    implies: {m.zz: 1}\n",
		 "bad.yaml:5: m.on: implies unknown option m.zz", SHMCFG_E_SCHEMADEF},
		{"format: 1\noptions:\n  m.a:\n    type: int\n    max: 10\n  m.on:\n    type: bool\n"
		 "    implies:\n      m.a: 11\n",
		 "bad.yaml:6: m.on: implies m.a: m.a: value 11 is above the maximum 10", SHMCFG_E_SCHEMADEF},
		{"format: 1\noptions:\n  m.a:\n    type: int\n  m.y:\n    type: bool\n    implies: {m.x: true}\n"
		 "  m.x:\n    type: bool\n    implies: {m.y: true}\n",
		 "bad.yaml:5: config implication cycle: m.y -> m.x -> m.y", SHMCFG_E_CYCLE},
		{"format: 1\noptions:\n  m.a:\n    type: int\n  m.p:\n    type: int\n    alias: m.q\n"
		 "  m.q:\n    type: int\n    alias: m.p\n",
		 "bad.yaml:5: config alias cycle: m.p -> m.q -> m.p", SHMCFG_E_CYCLE},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		int r = create_error(load_text(cases[i].yaml, "bad.yaml"));
		if (r != cases[i].err || strcmp(shmcfg_errdetail(), cases[i].detail))
			fail_msg("case %zu: %s '%s', expected %s '%s'", i, shmcfg_errname(r), shmcfg_errdetail(),
				 shmcfg_errname(cases[i].err), cases[i].detail);
	}
	/* an option added after the file has no line: its errors have no place */
	shmcfg_schema *s = load_text(cases[0].yaml, "bad.yaml");
	shmcfg_schema_free(s);
	s = load_text("format: 1\noptions:\n  m.a:\n    type: int\n", "ok.yaml");
	shmcfg_optdef d = {.name = "m.c", .type = SHMCFG_INT, .alias = "m.nope"};
	assert_int_equal(shmcfg_schema_add(s, &d), 0);
	assert_int_equal(create_error(s), SHMCFG_E_SCHEMADEF);
	assert_string_equal(shmcfg_errdetail(), "m.c: alias target m.nope is not declared");
}

/* ------------------------------------------------------------------ */
/* Deprecated options: a lookup warns (through an alias too), reads    */
/* by handle never do                                                  */
/* ------------------------------------------------------------------ */

static int warnings;
static char warned[4][256];
static void log_cb(int level, const char *msg, void *ud)
{
	(void)ud;
	if (level == SHMCFG_LOG_WARNING && warnings < 4)
		snprintf(warned[warnings++], sizeof warned[0], "%s", msg);
}

static void test_deprecated_reads(void **state)
{
	(void)state;
	shmcfg_schema *s = load_text("format: 1\noptions:\n"
				     "  m.old:\n    type: int\n    default: 3\n    deprecated: \"use m.new\"\n"
				     "  m.new:\n    type: int\n    default: 4\n"
				     "  m.via:\n    type: int\n    alias: m.old\n",
				     "dep.yaml");
	shmcfg *h = create_from(test_name("dep"), s, NULL);
	shmcfg_schema_free(s);
	shmcfg_opt o = 0, via = 2;
	shmcfg_set_log(log_cb, NULL);
	/* reads by handle: the inline getter, a copy, a snapshot */
	assert_int_equal(get_i(h, o), 3);
	assert_int_equal(get_i(h, via), 3);
	shmcfg_value v;
	assert_int_equal(shmcfg_get(h, o, &v), 0);
	shmcfg_value_clear(&v);
	shmcfg_snapshot *snap;
	assert_int_equal(shmcfg_snapshot_acquire(h, &snap), 0);
	assert_int_equal(shmcfg_snapshot_get(snap, via, &v), 0);
	shmcfg_snapshot_release(snap);
	assert_int_equal(warnings, 0);
	/* a lookup of the alias warns of its deprecated target, once */
	assert_int_equal(opt_named(h, "m.via"), via);
	assert_int_equal(warnings, 1);
	assert_string_equal(warned[0], "m.old is deprecated: use m.new");
	assert_int_equal(opt_named(h, "m.old"), o);
	assert_int_equal(set_and_commit(h, via, "5", NULL), 0);
	assert_int_equal(warnings, 1);
	shmcfg_set_log(NULL, NULL);
	shmcfg_close(h);
	shmcfg_unlink(test_name("dep"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dump_keeps_stored_values),
		cmocka_unit_test(test_codegen_keeps_stored_values),
		cmocka_unit_test(test_cycles_named_whole),
		cmocka_unit_test(test_long_cycle),
		cmocka_unit_test(test_schema_file_errors_name_the_line),
		cmocka_unit_test(test_deprecated_reads),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
