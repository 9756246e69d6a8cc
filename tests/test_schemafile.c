/* SPDX-License-Identifier: MIT */
/*
 * The schema file writer, shmcfg_schema_write_yaml(), and shmcfg_schema_of():
 * what it writes loads back (shmcfg_schema_load_text) to the same schema
 * hash and is written again the same, over every type and attribute and
 * strings that YAML would misread (quotes, line breaks, controls, YAML's
 * words, leading blanks, non-ASCII); its spellings (those shmcfg-import's
 * checked-in files were written in); partial schemas; the header comment.
 */
#include <errno.h>
#include <stdint.h>

#include "common.h"

/* The schema hash of a segment of s (made and removed here). */
static void hash_of(const shmcfg_schema *s, uint8_t out[16])
{
	const char *name = test_name("sf");
	shmcfg_create_opts o = {.flags = SHMCFG_CREATE_FORCE | SHMCFG_CREATE_NO_ENV};
	shmcfg *h;
	int r = shmcfg_create(name, s, &o, &h);
	if (r)
		fail_msg("create: %s: %s", shmcfg_errname(r), shmcfg_errdetail());
	shmcfg_schema_hash(h, out);
	shmcfg_close(h);
	assert_int_equal(shmcfg_unlink(name), 0);
}

static char *write_yaml(const shmcfg_schema *s, const char *comment)
{
	char *text = NULL;
	int r = shmcfg_schema_write_yaml(s, comment, &text);
	if (r)
		fail_msg("write: %s: %s", shmcfg_errname(r), shmcfg_errdetail());
	return text;
}

static shmcfg_schema *load(const char *text)
{
	shmcfg_schema *s = NULL;
	int r = shmcfg_schema_load_text(text, strlen(text), "written.yaml", &s);
	if (r)
		fail_msg("load: %s: %s\n%s", shmcfg_errname(r), shmcfg_errdetail(), text);
	return s;
}

/* s written, read back and written again: the same text, the same hash
 * (sound is false for a partial schema: no segment of it). Returns the
 * text (free()). */
static char *round_trip(const shmcfg_schema *s, bool sound)
{
	char *text = write_yaml(s, "a comment");
	shmcfg_schema *back = load(text);
	assert_int_equal(shmcfg_schema_count(back), shmcfg_schema_count(s));
	char *again = write_yaml(back, "a comment");
	assert_string_equal(again, text);
	if (sound) {
		uint8_t h1[16], h2[16];
		hash_of(s, h1);
		hash_of(back, h2);
		assert_memory_equal(h1, h2, 16);
	}
	free(again);
	shmcfg_schema_free(back);
	return text;
}

static shmcfg_schema *declare(const shmcfg_optdef *defs, size_t n)
{
	shmcfg_schema *s;
	assert_int_equal(shmcfg_schema_new(&s), 0);
	for (size_t i = 0; i < n; i++) {
		int r = shmcfg_schema_add(s, &defs[i]);
		if (r)
			fail_msg("%s: %s: %s", defs[i].name, shmcfg_errname(r), shmcfg_errdetail());
	}
	return s;
}

/* whether text holds line (a whole line) */
static bool has_line(const char *text, const char *line)
{
	size_t n = strlen(line);
	for (const char *p = text; (p = strstr(p, line)); p++)
		if ((p == text || p[-1] == '\n') && p[n] == '\n')
			return true;
	return false;
}

#define assert_line(text, line)                                                     \
	do {                                                                        \
		if (!has_line(text, line))                                          \
			fail_msg("no line \"%s\" in:\n%s", line, text);             \
	} while (0)

/* The test schema of every other test: every type and attribute. */
static void test_test_schema(void **state)
{
	(void)state;
	shmcfg_schema *s = test_schema();
	char *text = round_trip(s, true);
	assert_line(text, "  t.alias2:");
	assert_line(text, "    alias: t.alias_a");
	assert_line(text, "    implies: {t.flag: true, t.mode: \"slow\"}");
	assert_line(text, "    env_default: [T_ENVD1, T_ENVD2]");
	assert_line(text, "    knob: \"team/flag:knobbed\"");
	assert_line(text, "    choices: [\"fast\", \"slow\"]");
	assert_line(text, "    min: -5");
	assert_line(text, "    nullable: true");
	free(text);
	shmcfg_schema_free(s);
}

/* Strings YAML would misread, every place a string goes. */
static const char hostile[] = "\"q\" \\ 'a' \n\t\r \x01 \x7f \xc2\x85 \xe2\x80\xa8 \xef\xbb\xbf \xc3\xa9 \xe2\x98\x83 "
			      "\xf0\x9d\x84\x9e # no comment: - [x] {y} &a *b !t |>% @`";

static const shmcfg_optdef hostile_defs[] = {
	/* YAML 1.1's words as names, and as values of a str */
	{.name = "yes", .type = SHMCFG_STR, .def = "\"yes\"", .doc = "null"},
	{.name = "null", .type = SHMCFG_STR, .def = "\"null\"", .choices = "[\"null\",\"~\",\".nan\",\"yes\"]"},
	{.name = "On.off", .type = SHMCFG_STR, .def = "\".nan\"", .doc = "  leading blanks"},
	{.name = "n", .type = SHMCFG_STR, .flags = SHMCFG_F_NULLABLE, .def = "none", .doc = "trailing blank "},
	{.name = "a.s", .type = SHMCFG_STR, .def = "\"  leading\"",
	 .deprecated = "use \"b\"\nsoon", .doc = "one\n\n  indented\nlast \xc3\xa9 \xe2\x98\x83"},
	{.name = "a.t", .type = SHMCFG_STR, .def = "\"\"", .doc = "a tab\there"},
	{.name = "a.l", .type = SHMCFG_LIST, .def = "[\"- x\",\"\",\"a, b\",\"null\",\"\\u00e9\"]",
	 .env_default = "[\"yes\",\"A B\",\"X\"]", .env_force = "[\"null\"]", .doc = "ends in a line break\n"},
	{.name = "a.set", .type = SHMCFG_SET, .flags = SHMCFG_F_NULLABLE | SHMCFG_F_PRIVATE,
	 .def = "[\"z\",\"~\",\"a\"]", .doc = "\nstarts with a line break"},
	{.name = "a.f", .type = SHMCFG_FLOAT, .def = "1e-05", .min = "-inf", .max = "1e300",
	 .choices = "[\"1e-05\",\"0.1\",\"100\",\"1e16\",\"inf\"]", .flags = SHMCFG_F_SAVE_IGNORED},
	{.name = "a.nan", .type = SHMCFG_FLOAT, .def = "nan", .flags = SHMCFG_F_HASH_IGNORED},
	{.name = "a.f0", .type = SHMCFG_FLOAT, .def = "-0.0"},
	{.name = "a.fmax", .type = SHMCFG_FLOAT, .def = "1.7976931348623157e308"},
	{.name = "a.fmin", .type = SHMCFG_FLOAT, .def = "5e-324"},
	{.name = "a.fbig", .type = SHMCFG_FLOAT, .def = "123456789012345680"},
	{.name = "a.f4", .type = SHMCFG_FLOAT, .def = "0.0001", .flags = SHMCFG_F_NULLABLE},
	{.name = "a.i", .type = SHMCFG_INT, .def = "-9223372036854775808", .min = "-9223372036854775808",
	 .max = "9223372036854775807", .choices = "[\"-9223372036854775808\",\"0\",\"7\"]"},
	{.name = "a.k", .type = SHMCFG_INT, .knob = "a: b # c", .env_default = "K1"},
	{.name = "a.none", .type = SHMCFG_INT}, /* no default: none written */
	/* an alias keeps flags and a deprecation, which only C declares */
	{.name = "a.old", .type = SHMCFG_STR, .alias = "a.s", .flags = SHMCFG_F_HASH_IGNORED,
	 .deprecated = "old", .doc = "Old name."},
	{.name = "a.old_set", .type = SHMCFG_SET, .flags = SHMCFG_F_NULLABLE, .alias = "a.set"},
	/* implied values of every type, by an alias too, and odd spacing; a ';'
	 * inside a string does not end the item */
	{.name = "a.on", .type = SHMCFG_BOOL, .def = "true",
	 .implies = " a.old = \"x;y\" ;; a.f=0.1;a.nan=nan; a.set=none;a.l=[\"p;\",\"q\\\";\"];a.i=7;yes=\"\";a.f4=none"},
};

static void test_hostile(void **state)
{
	(void)state;
	size_t n = sizeof hostile_defs / sizeof hostile_defs[0];
	shmcfg_schema *s = declare(hostile_defs, n);
	/* the hostile string in each place a string goes */
	char def[512], list[600];
	char *t;
	shmcfg_value v = {.type = SHMCFG_STR, .u.str = {hostile, sizeof hostile - 1}};
	assert_int_equal(shmcfg_value_json(&v, &t), 0);
	snprintf(def, sizeof def, "%s", t);
	snprintf(list, sizeof list, "[%s,%s]", t, t);
	free(t);
	shmcfg_optdef h[] = {
		{.name = "h.s", .type = SHMCFG_STR, .def = def, .deprecated = hostile, .doc = hostile},
		{.name = "h.c", .type = SHMCFG_STR, .def = def, .choices = list},
		{.name = "h.k", .type = SHMCFG_INT, .knob = hostile},
		{.name = "h.l", .type = SHMCFG_LIST, .def = list, .env_default = list, .env_force = list},
		{.name = "h.on", .type = SHMCFG_BOOL, .implies = "h.s=\"\\\"q\\\" \\\\ \\n\\t\\r \\u0001 \\u007f \\u0085\""},
	};
	for (size_t i = 0; i < sizeof h / sizeof h[0]; i++) {
		int r = shmcfg_schema_add(s, &h[i]);
		if (r)
			fail_msg("%s: %s: %s", h[i].name, shmcfg_errname(r), shmcfg_errdetail());
	}
	char *text = round_trip(s, true);
	/* names: plain unless YAML would misread them */
	assert_line(text, "  \"yes\":");
	assert_line(text, "  \"null\":");
	assert_line(text, "  On.off:");
	assert_line(text, "  \"n\":");
	assert_line(text, "    env_default: [\"yes\", \"A B\", X]");
	assert_line(text, "    env_force: [\"null\"]");
	assert_line(text, "    default: \"yes\"");
	assert_line(text, "    default: \".nan\"");
	assert_non_null(strstr(text, "    doc: |-\n      null\n"));
	/* floats: the shortest exact text, as Python's repr(), with a '.' */
	assert_line(text, "    default: 1.0e-05");
	assert_line(text, "    choices: [1.0e-05, 0.1, 100.0, 1.0e+16, .inf]");
	assert_line(text, "    min: -.inf");
	assert_line(text, "    max: 1.0e+300");
	assert_line(text, "    default: .nan");
	assert_line(text, "    default: -0.0");
	assert_line(text, "    default: 1.7976931348623157e+308");
	assert_line(text, "    default: 5.0e-324");
	assert_line(text, "    default: 1.2345678901234568e+17");
	assert_line(text, "    default: 0.0001");
	assert_line(text, "    default: -9223372036854775808");
	/* a default only where one was declared */
	assert_non_null(strstr(text, "  a.none:\n    type: int\n  a.old:\n"));
	/* docs: literal blocks where exact, else double-quoted */
	assert_line(text, "    doc: |-");
	assert_non_null(strstr(text, "    doc: |-\n      one\n\n        indented\n      last \xc3\xa9 \xe2\x98\x83\n"));
	assert_line(text, "    doc: \"  leading blanks\"");
	assert_line(text, "    doc: \"trailing blank \"");
	assert_line(text, "    doc: \"a tab\\there\"");
	assert_line(text, "    doc: \"ends in a line break\\n\"");
	assert_line(text, "    doc: \"\\nstarts with a line break\"");
	/* strings: YAML's escapes, UTF-8 as it is */
	assert_line(text, "    knob: \"\\\"q\\\" \\\\ 'a' \\n\\t\\r \\x01 \\x7f \\x85 \\u2028 \\ufeff \xc3\xa9 \xe2\x98\x83 "
			  "\xf0\x9d\x84\x9e # no comment: - [x] {y} &a *b !t |>% @`\"");
	/* the alias's flags and deprecation; implies as declared */
	assert_non_null(strstr(text, "  a.old:\n    type: str\n    alias: a.s\n    deprecated: \"old\"\n"
				     "    hash_ignored: true\n    doc: |-\n      Old name.\n"));
	assert_line(text, "    implies: {a.old: \"x;y\", a.f: 0.1, a.nan: .nan, a.set: null, a.l: [\"p;\", \"q\\\";\"], "
			  "a.i: 7, \"yes\": \"\", a.f4: null}");
	free(text);
	shmcfg_schema_free(s);
}

/* shmcfg_schema_of: a segment's schema declared again, the same hash;
 * written, it loads back to that hash too (what shmctl schema does). */
static void test_schema_of(void **state)
{
	(void)state;
	shmcfg_schema *s = declare(hostile_defs, sizeof hostile_defs / sizeof hostile_defs[0]);
	const char *name = test_name("sfof");
	shmcfg_create_opts o = {.flags = SHMCFG_CREATE_FORCE | SHMCFG_CREATE_NO_ENV};
	shmcfg *h;
	assert_int_equal(shmcfg_create(name, s, &o, &h), 0);
	uint8_t want[16], got[16];
	shmcfg_schema_hash(h, want);
	shmcfg_schema *of;
	assert_int_equal(shmcfg_schema_of(h, &of), 0);
	assert_int_equal(shmcfg_schema_count(of), shmcfg_count(h));
	hash_of(of, got);
	assert_memory_equal(got, want, 16);
	char *text = round_trip(of, true);
	/* every option that is not an alias has its default written */
	assert_line(text, "    default: 0");
	free(text);
	shmcfg_schema_free(of);
	/* a.on is true by default: its implied strings, ';' and all */
	shmcfg_opt o_s, o_l;
	shmcfg_value v;
	assert_int_equal(shmcfg_lookup(h, "a.s", &o_s), 0);
	assert_int_equal(shmcfg_get(h, o_s, &v), 0);
	assert_int_equal(v.source, SHMCFG_SRC_IMPLIED);
	assert_string_equal(v.u.str.ptr, "x;y");
	shmcfg_value_clear(&v);
	assert_int_equal(shmcfg_lookup(h, "a.l", &o_l), 0);
	assert_int_equal(shmcfg_get(h, o_l, &v), 0);
	assert_int_equal(v.u.list.count, 2);
	assert_string_equal(v.u.list.items, "p;");
	assert_string_equal(v.u.list.items + 3, "q\";");
	shmcfg_value_clear(&v);
	/* the embedded default, and the test schema */
	shmcfg_close(h);
	assert_int_equal(shmcfg_create(name, NULL, &o, &h), 0);
	shmcfg_schema_hash(h, want);
	assert_int_equal(shmcfg_schema_of(h, &of), 0);
	text = write_yaml(of, NULL);
	shmcfg_schema *back = load(text);
	hash_of(back, got);
	assert_memory_equal(got, want, 16);
	free(text);
	shmcfg_schema_free(back);
	shmcfg_schema_free(of);
	shmcfg_close(h);
	assert_int_equal(shmcfg_unlink(name), 0);
	shmcfg_schema_free(s);
}

/* A partial schema (shmcfg-import's, to merge): written as declared, its
 * references to options it lacks kept. */
static void test_partial(void **state)
{
	(void)state;
	static const shmcfg_optdef defs[] = {
		{.name = "a.s", .type = SHMCFG_STR, .flags = SHMCFG_F_NULLABLE, .alias = "other.s"},
		{.name = "a.imp", .type = SHMCFG_BOOL, .def = "false",
		 .implies = "x.f=2.5;x.s=\"q\";x.b=true;x.l=[\"a\",\"b\"];x.n=none;a.t=3;x.odd=a, b;x.nul=null"},
		{.name = "a.t", .type = SHMCFG_INT, .def = "1"},
	};
	shmcfg_schema *s = declare(defs, 3);
	char *text = round_trip(s, false);
	assert_line(text, "    alias: other.s");
	assert_line(text, "    implies: {x.f: 2.5, x.s: \"q\", x.b: true, x.l: [\"a\", \"b\"], x.n: null, a.t: 3, "
			  "x.odd: \"a, b\", x.nul: \"null\"}");
	free(text);
	/* an implies item without '=': no file can say it */
	static const shmcfg_optdef bad = {.name = "a.bad", .type = SHMCFG_BOOL, .implies = "a.t"};
	assert_int_equal(shmcfg_schema_add(s, &bad), 0);
	char *out = NULL;
	assert_int_equal(shmcfg_schema_write_yaml(s, NULL, &out), SHMCFG_E_SCHEMADEF);
	assert_null(out);
	assert_non_null(strstr(shmcfg_errdetail(), "lacks '='"));
	shmcfg_schema_free(s);
}

/* The header comment; an empty schema. */
static void test_comment_and_empty(void **state)
{
	(void)state;
	shmcfg_schema *s;
	assert_int_equal(shmcfg_schema_new(&s), 0);
	char *text = write_yaml(s, NULL);
	assert_string_equal(text, "# shmcfg schema (format 1)\nformat: 1\noptions: {}\n");
	free(text);
	text = write_yaml(s, "one\n\nthree \xc3\xa9\twith a tab");
	assert_string_equal(text, "# shmcfg schema (format 1)\n# one\n#\n# three \xc3\xa9\twith a tab\n"
				  "format: 1\noptions: {}\n");
	shmcfg_schema *back = load(text);
	assert_int_equal(shmcfg_schema_count(back), 0);
	shmcfg_schema_free(back);
	free(text);
	/* a comment that could end its line early, or is not text */
	const char *bad[] = {"a\rformat: 2", "a\xe2\x80\xa8" "b", "a\xc2\x85" "b", "\x01", "\xff", "a\x7f"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		text = NULL;
		assert_int_equal(shmcfg_schema_write_yaml(s, bad[i], &text), -EINVAL);
		assert_null(text);
	}
	shmcfg_schema_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_test_schema),
		cmocka_unit_test(test_hostile),
		cmocka_unit_test(test_schema_of),
		cmocka_unit_test(test_partial),
		cmocka_unit_test(test_comment_and_empty),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
