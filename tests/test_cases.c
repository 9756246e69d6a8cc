/* SPDX-License-Identifier: MIT */
/*
 * The library's data-driven cases (tests/cases/README): each directory of
 * tests/cases/value and tests/cases/schema-error is one test, run here.
 *
 *   value/NAME/input          the type ("int", "str?" for a nullable str) on
 *                             the first line, the text to parse after it
 *   value/NAME/expected       shmcfg_value_format() of the parsed value, or
 *                             "ERRNAME: detail" when the parse fails
 *   schema-error/NAME/schema.yaml   a schema file the library must refuse
 *   schema-error/NAME/expected      "ERRNAME: detail", the detail as
 *                             shmcfg_schema_load_text() labelled "schema.yaml"
 *                             gives it
 *
 * The one final newline of input and expected is not part of them (editors
 * add one); a schema.yaml is loaded as it is. The
 * cases are found under $top_srcdir/tests/cases (make check sets
 * top_srcdir), in name order; a kind with no case is a failure.
 */
#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>

#include "common.h"

struct tcase {
	char dir[1024]; /* the case's directory */
	char name[300]; /* KIND/NAME, the test's name */
	const char *kind;
};

/* A whole file (with chomp, its one final newline dropped); NULL if it
 * cannot be read. */
static char *slurp(const char *dir, const char *file, bool chomp, size_t *len)
{
	char path[1100];
	snprintf(path, sizeof path, "%s/%s", dir, file);
	FILE *f = fopen(path, "re");
	if (!f)
		return NULL;
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap);
	assert_non_null(buf);
	size_t got;
	while ((got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
		n += got;
		if (n + 1 == cap) {
			buf = realloc(buf, cap *= 2);
			assert_non_null(buf);
		}
	}
	fclose(f);
	if (chomp && n && buf[n - 1] == '\n')
		n--;
	buf[n] = 0;
	if (len)
		*len = n;
	return buf;
}

static char *must_slurp(const struct tcase *c, const char *file, bool chomp, size_t *len)
{
	char *t = slurp(c->dir, file, chomp, len);
	if (!t)
		fail_msg("%s: cannot read %s: %s", c->name, file, strerror(errno));
	return t;
}

static void expect_result(const struct tcase *c, const char *got)
{
	char *want = must_slurp(c, "expected", true, NULL);
	if (strcmp(got, want))
		fail_msg("%s:\n  expected: %s\n  got:      %s", c->name, want, got);
	free(want);
}

/* "ERRNAME: detail" of a failed call. */
static char *error_text(int r)
{
	const char *name = shmcfg_errname(r), *detail = shmcfg_errdetail();
	size_t n = strlen(name) + 2 + strlen(detail) + 1;
	char *t = malloc(n);
	assert_non_null(t);
	snprintf(t, n, "%s: %s", name, detail);
	return t;
}

static const struct {
	const char *name;
	shmcfg_type type;
} types[] = {
	{"bool", SHMCFG_BOOL}, {"int", SHMCFG_INT}, {"float", SHMCFG_FLOAT},
	{"str", SHMCFG_STR},   {"list", SHMCFG_LIST}, {"set", SHMCFG_SET},
};

/* value/NAME: parse the text as the type, format what it parsed to */
static void run_value(void **state)
{
	const struct tcase *c = *state;
	char *input = must_slurp(c, "input", true, NULL);
	char *text = strchr(input, '\n');
	text = text ? (*text = 0, text + 1) : input + strlen(input);
	size_t tl = strlen(input);
	bool nullable = tl && input[tl - 1] == '?';
	if (nullable)
		input[--tl] = 0;
	size_t t = 0;
	while (t < sizeof types / sizeof *types && strcmp(types[t].name, input))
		t++;
	if (t == sizeof types / sizeof *types)
		fail_msg("%s: input: the first line is no type: '%s'", c->name, input);
	shmcfg_value v;
	char *got;
	int r = shmcfg_value_parse(types[t].type, nullable, text, &v);
	if (r) {
		got = error_text(r);
	} else {
		assert_int_equal(shmcfg_value_format(&v, &got), 0);
		shmcfg_value_clear(&v);
	}
	expect_result(c, got);
	free(got);
	free(input);
}

/* schema-error/NAME: the schema is refused, with that detail */
static void run_schema_error(void **state)
{
	const struct tcase *c = *state;
	size_t len;
	char *yaml = must_slurp(c, "schema.yaml", false, &len);
	shmcfg_schema *s = NULL;
	int r = shmcfg_schema_load_text(yaml, len, "schema.yaml", &s);
	if (!r) {
		shmcfg_schema_free(s);
		fail_msg("%s: the schema loaded", c->name);
	}
	assert_null(s);
	char *got = error_text(r);
	expect_result(c, got);
	free(got);
	free(yaml);
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct tcase *)a)->name, ((const struct tcase *)b)->name);
}

/* The cases of one kind, appended to *cases (n of them). */
static void find_cases(const char *root, const char *kind, struct tcase **cases, size_t *n)
{
	char path[700];
	snprintf(path, sizeof path, "%s/%s", root, kind);
	DIR *d = opendir(path);
	if (!d) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		exit(1);
	}
	size_t first = *n;
	struct dirent *de;
	while ((de = readdir(d))) {
		struct stat st;
		char dir[1024];
		snprintf(dir, sizeof dir, "%s/%s", path, de->d_name);
		if (de->d_name[0] == '.' || stat(dir, &st) || !S_ISDIR(st.st_mode))
			continue;
		*cases = realloc(*cases, (*n + 1) * sizeof **cases);
		assert_non_null(*cases);
		struct tcase *c = &(*cases)[(*n)++];
		snprintf(c->dir, sizeof c->dir, "%s", dir);
		snprintf(c->name, sizeof c->name, "%s/%s", kind, de->d_name);
		c->kind = kind;
	}
	closedir(d);
	if (*n == first) {
		fprintf(stderr, "%s: no cases\n", path);
		exit(1);
	}
	qsort(*cases + first, *n - first, sizeof **cases, by_name);
}

int main(void)
{
	const char *src = getenv("top_srcdir");
	char root[500];
	snprintf(root, sizeof root, "%s/tests/cases", src && *src ? src : ".");
	struct tcase *cases = NULL;
	size_t n = 0;
	find_cases(root, "value", &cases, &n);
	find_cases(root, "schema-error", &cases, &n);
	struct CMUnitTest *tests = calloc(n, sizeof *tests);
	assert_non_null(tests);
	for (size_t i = 0; i < n; i++) {
		tests[i].name = cases[i].name;
		tests[i].test_func = strcmp(cases[i].kind, "value") ? run_schema_error : run_value;
		tests[i].initial_state = &cases[i];
	}
	int r = _cmocka_run_group_tests("cases", tests, n, NULL, NULL);
	free(tests);
	free(cases);
	return r;
}
