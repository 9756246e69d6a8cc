/* SPDX-License-Identifier: MIT */
/* Option names as people type them (shmcfg_resolve, shmcfg_short_name): a
 * unique suffix, ambiguity listing the candidates, did-you-mean by edit
 * distance, an exact name winning over a suffix, aliases as one option, and
 * hostile names. shmcfg_lookup stays exact. */
#include <errno.h>

#include "common.h"
#include "internal.h"
#include "schema.h" /* shmcfg__name_hash */

enum {
	N_A_LEVEL, N_B_LEVEL, N_CACHE, N_RECOMPILE, N_OLD_RECOMPILE, N_CFG_DEBUG, N_SUB_CFG_DEBUG,
	N_DEPR, N_DEPR_ALIAS, N_MANY /* first of the many */
};
#define NMANY 40

static const shmcfg_optdef names_opts[] = {
	{.name = "a.level", .type = SHMCFG_INT},
	{.name = "b.level", .type = SHMCFG_INT},
	{.name = "dynamo.cache_size_limit", .type = SHMCFG_INT, .def = "8"},
	{.name = "dynamo.recompile_limit", .type = SHMCFG_INT, .def = "8"},
	{.name = "old.recompile_limit", .type = SHMCFG_INT, .alias = "dynamo.recompile_limit"},
	{.name = "cfg.debug", .type = SHMCFG_BOOL},
	{.name = "sub.cfg.debug", .type = SHMCFG_BOOL},
	{.name = "x.legacy_knob", .type = SHMCFG_BOOL, .deprecated = "use nothing"},
	{.name = "y.older_knob", .type = SHMCFG_BOOL, .alias = "x.legacy_knob"},
};

struct fx {
	char name[64];
	shmcfg *h;
};

static int warnings;
static void count_log(int level, const char *msg, void *ud)
{
	(void)ud;
	if (level == SHMCFG_LOG_WARNING && strstr(msg, "x.legacy_knob is deprecated"))
		warnings++;
}

static int setup(void **state)
{
	static struct fx f;
	static char many[NMANY][64];
	snprintf(f.name, sizeof f.name, "%s", test_name("names"));
	shmcfg_schema *s;
	assert_int_equal(shmcfg_schema_new(&s), 0);
	for (size_t i = 0; i < sizeof names_opts / sizeof names_opts[0]; i++)
		assert_int_equal(shmcfg_schema_add(s, &names_opts[i]), 0);
	/* many options ending in the same long part: an ambiguity whose list
	 * cannot fit a detail */
	for (int i = 0; i < NMANY; i++) {
		snprintf(many[i], sizeof many[i], "group_number_%02d.a_rather_long_shared_name", i);
		shmcfg_optdef d = {.name = many[i], .type = SHMCFG_INT};
		assert_int_equal(shmcfg_schema_add(s, &d), 0);
	}
	shmcfg_create_opts o = {.flags = SHMCFG_CREATE_FORCE | SHMCFG_CREATE_NO_ENV};
	int r = shmcfg_create(f.name, s, &o, &f.h);
	shmcfg_schema_free(s);
	if (r)
		fail_msg("create: %s", shmcfg_errdetail());
	shmcfg_set_log(count_log, NULL);
	*state = &f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	shmcfg_set_log(NULL, NULL);
	shmcfg_close(f->h);
	shmcfg_unlink(f->name);
	return 0;
}

/* resolve must give option want, with an empty detail */
static void resolves(const shmcfg *h, const char *text, shmcfg_opt want)
{
	shmcfg_opt o = SHMCFG_NO_OPT;
	int r = shmcfg_resolve(h, text, &o);
	if (r)
		fail_msg("resolve '%s': %s: %s", text, shmcfg_errname(r), shmcfg_errdetail());
	assert_int_equal(o, want);
	assert_string_equal(shmcfg_errdetail(), "");
}

/* resolve must fail with SHMCFG_E_NOOPT and this detail, leaving *ret alone */
static void refused(const shmcfg *h, const char *text, const char *detail)
{
	shmcfg_opt o = 12345;
	assert_int_equal(shmcfg_resolve(h, text, &o), SHMCFG_E_NOOPT);
	assert_int_equal(o, 12345);
	assert_string_equal(shmcfg_errdetail(), detail);
}

static void test_full_and_suffix(void **state)
{
	struct fx *f = *state;
	resolves(f->h, "dynamo.cache_size_limit", N_CACHE);
	resolves(f->h, "cache_size_limit", N_CACHE);
	resolves(f->h, "a.level", N_A_LEVEL);
	/* a suffix must start after a dot: "e_size_limit" is no part */
	char want[200];
	snprintf(want, sizeof want, "no option 'e_size_limit' in segment '%s'; did you mean cache_size_limit?",
		 f->name);
	refused(f->h, "e_size_limit", want);
	/* lookup stays exact */
	shmcfg_opt o;
	assert_int_equal(shmcfg_lookup(f->h, "cache_size_limit", &o), SHMCFG_E_NOOPT);
	assert_int_equal(shmcfg_lookup(f->h, "dynamo.cache_size_limit", &o), 0);
	assert_int_equal(o, N_CACHE);
}

static void test_ambiguous(void **state)
{
	struct fx *f = *state;
	refused(f->h, "level", "'level' is ambiguous: a.level, b.level");
	/* every candidate cannot fit: cut, with the count */
	shmcfg_opt o;
	assert_int_equal(shmcfg_resolve(f->h, "a_rather_long_shared_name", &o), SHMCFG_E_NOOPT);
	const char *d = shmcfg_errdetail();
	assert_true(strncmp(d, "'a_rather_long_shared_name' is ambiguous: group_number_00.", 58) == 0);
	assert_non_null(strstr(d, ", ... (40 options)"));
	assert_true(strlen(d) < 500);
}

static void test_exact_wins(void **state)
{
	struct fx *f = *state;
	/* sub.cfg.debug ends in ".cfg.debug", but cfg.debug is a full name */
	resolves(f->h, "cfg.debug", N_CFG_DEBUG);
	resolves(f->h, "sub.cfg.debug", N_SUB_CFG_DEBUG);
	refused(f->h, "debug", "'debug' is ambiguous: cfg.debug, sub.cfg.debug");
}

static void test_aliases(void **state)
{
	struct fx *f = *state;
	/* an alias and its target share the suffix: one option, the target */
	resolves(f->h, "recompile_limit", N_RECOMPILE);
	/* the alias's full name is the alias itself */
	resolves(f->h, "old.recompile_limit", N_OLD_RECOMPILE);
}

static void test_did_you_mean(void **state)
{
	struct fx *f = *state;
	char want[300];
	snprintf(want, sizeof want, "no option 'cache_size_limt' in segment '%s'; did you mean cache_size_limit?",
		 f->name);
	refused(f->h, "cache_size_limt", want);
	/* an alias and its target are suggested once, as the target */
	snprintf(want, sizeof want, "no option 'recompile_limti' in segment '%s'; did you mean recompile_limit?",
		 f->name);
	refused(f->h, "recompile_limti", want);
	/* two at the same distance: both, as names that resolve (not "level") */
	shmcfg_opt o;
	assert_int_equal(shmcfg_resolve(f->h, "levle", &o), SHMCFG_E_NOOPT);
	snprintf(want, sizeof want, "no option 'levle' in segment '%s'; did you mean ", f->name);
	const char *d = shmcfg_errdetail();
	assert_true(strncmp(d, want, strlen(want)) == 0);
	assert_non_null(strstr(d, "a.level"));
	assert_non_null(strstr(d, "b.level"));
	/* a dotted text is compared with full names */
	snprintf(want, sizeof want, "no option 'dynamo.cache_size' in segment '%s'; did you mean cache_size_limit?",
		 f->name);
	refused(f->h, "dynamo.cache_size", want);
	/* nothing close: no suggestion */
	snprintf(want, sizeof want, "no option 'zzzzzz' in segment '%s'", f->name);
	refused(f->h, "zzzzzz", want);
}

static void test_short_name(void **state)
{
	struct fx *f = *state;
	assert_string_equal(shmcfg_short_name(f->h, N_CACHE), "cache_size_limit");
	assert_string_equal(shmcfg_short_name(f->h, N_A_LEVEL), "a.level");
	assert_string_equal(shmcfg_short_name(f->h, N_OLD_RECOMPILE), "recompile_limit");
	assert_string_equal(shmcfg_short_name(f->h, N_SUB_CFG_DEBUG), "sub.cfg.debug");
	assert_string_equal(shmcfg_short_name(f->h, N_CFG_DEBUG), "cfg.debug");
	/* each short name resolves back to its option (or its alias's target) */
	for (shmcfg_opt i = 0; i < shmcfg_count(f->h); i++) {
		shmcfg_opt o;
		shmcfg_optinfo a, b;
		assert_int_equal(shmcfg_resolve(f->h, shmcfg_short_name(f->h, i), &o), 0);
		assert_int_equal(shmcfg_opt_info(f->h, i, &a), 0);
		assert_int_equal(shmcfg_opt_info(f->h, o, &b), 0);
		assert_int_equal(a.alias_final, b.alias_final);
	}
	assert_null(shmcfg_short_name(f->h, shmcfg_count(f->h)));
	assert_int_equal(shmcfg_resolve(f->h, "a.level", &(shmcfg_opt){0}), 0);
	assert_null(shmcfg_short_name(f->h, SHMCFG_NO_OPT));
	assert_string_not_equal(shmcfg_errdetail(), "");
}

static void test_deprecated_warns(void **state)
{
	struct fx *f = *state;
	warnings = 0;
	resolves(f->h, "legacy_knob", N_DEPR);
	assert_int_equal(warnings, 1);
}

/*
 * A deprecated option, or an alias whose chain holds one, is never served
 * from the lookup's cache: the library's own lookups (shmcfg__lookup, as
 * a handle following a replaced segment makes them) warn of nothing and
 * fill nothing, so the caller's first shmcfg_lookup still warns, once per
 * handle.
 */
static void test_internal_lookup_leaves_the_warning(void **state)
{
	struct fx *f = *state;
	shmcfg *h;
	shmcfg_opt o;
	assert_int_equal(shmcfg_attach(f->name, SHMCFG_ATTACH_RDONLY, NULL, &h), 0); /* nothing warned yet */
	warnings = 0;
	for (int k = 0; k < 2; k++) {
		assert_int_equal(shmcfg__lookup(h, "x.legacy_knob", &o), 0);
		assert_int_equal(o, N_DEPR);
		assert_int_equal(shmcfg__lookup(h, "y.older_knob", &o), 0);
		assert_int_equal(o, N_DEPR_ALIAS);
	}
	assert_int_equal(warnings, 0);
	assert_int_equal(shmcfg_lookup(h, "y.older_knob", &o), 0); /* its chain's deprecated option */
	assert_int_equal(o, N_DEPR_ALIAS);
	assert_int_equal(warnings, 1);
	assert_int_equal(shmcfg_lookup(h, "x.legacy_knob", &o), 0);
	assert_int_equal(o, N_DEPR);
	assert_int_equal(warnings, 1); /* once per handle */
	shmcfg_close(h);
}

static void test_hostile(void **state)
{
	struct fx *f = *state;
	shmcfg_opt o = 7;
	refused(f->h, "", "empty option name");
	assert_int_equal(shmcfg_resolve(f->h, NULL, &o), -EINVAL);
	assert_int_equal(shmcfg_resolve(NULL, "a.level", &o), -EINVAL);
	assert_int_equal(shmcfg_resolve(f->h, "a.level", NULL), -EINVAL);

	/* 64 KiB: refused, the detail cut and still naming the segment */
	size_t big = 64 * 1024;
	char *s = malloc(big + 1);
	assert_non_null(s);
	memset(s, 'l', big);
	s[big] = 0;
	assert_int_equal(shmcfg_resolve(f->h, s, &o), SHMCFG_E_NOOPT);
	const char *d = shmcfg_errdetail();
	assert_true(strlen(d) < 300);
	assert_non_null(strstr(d, "...' in segment '"));
	assert_non_null(strstr(d, f->name));
	/* ... also one of dotted parts, and a huge suffix of a real name */
	for (size_t i = 1; i < big; i += 2)
		s[i] = '.';
	assert_int_equal(shmcfg_resolve(f->h, s, &o), SHMCFG_E_NOOPT);
	memset(s, 'x', big);
	strcpy(s + big - strlen(".a.level"), ".a.level");
	assert_int_equal(shmcfg_resolve(f->h, s, &o), SHMCFG_E_NOOPT);
	free(s);

	/* not UTF-8, control characters, a lone dot */
	assert_int_equal(shmcfg_resolve(f->h, "\xff\xfe", &o), SHMCFG_E_NOOPT);
	assert_int_equal(shmcfg_resolve(f->h, "lev\xc3l", &o), SHMCFG_E_NOOPT);
	assert_int_equal(shmcfg_resolve(f->h, "a.level\n", &o), SHMCFG_E_NOOPT);
	assert_int_equal(shmcfg_resolve(f->h, ".", &o), SHMCFG_E_NOOPT);
	assert_int_equal(shmcfg_resolve(f->h, ".level", &o), SHMCFG_E_NOOPT);
	assert_int_equal(shmcfg_resolve(f->h, "level.", &o), SHMCFG_E_NOOPT);
	assert_int_equal(o, 7);
}

/*
 * shmcfg_lookup compares a probed option's name whole (its fast path reads
 * the slot's cached name, not the descriptor): a name whose hash lands on an
 * option's home slot, so that its lookup compares with that option, is not
 * that option when it is a prefix or an extension of its name. Candidates
 * are made until each kind has landed there at least once.
 */
static void test_lookup_compares_whole_names(void **state)
{
	struct fx *f = *state;
	shmcfg *h = f->h;
	uint32_t mask = h->sch->index_size - 1;
	shmcfg_info info;
	assert_int_equal(shmcfg_stat(h, &info), 0);
	int prefixes = 0, extensions = 0;
	for (shmcfg_opt i = 0; i < info.nopts; i++) {
		shmcfg_optinfo oi;
		assert_int_equal(shmcfg_opt_info(h, i, &oi), 0);
		shmcfg_opt o;
		assert_int_equal(shmcfg_lookup(h, oi.name, &o), 0); /* validated: the fast path next */
		assert_int_equal(o, i);
		size_t len = strlen(oi.name);
		uint64_t home = shmcfg__name_hash(oi.name, len) & mask;
		char cand[128];
		for (size_t k = 1; k < len; k++) { /* every proper prefix */
			snprintf(cand, sizeof cand, "%.*s", (int)k, oi.name);
			if ((shmcfg__name_hash(cand, k) & mask) != home)
				continue;
			prefixes++;
			if (shmcfg_lookup(h, cand, &o) == 0)
				assert_int_not_equal(o, i);
		}
		for (unsigned k = 0; k < 4 * (mask + 1); k++) { /* extensions */
			int n = snprintf(cand, sizeof cand, "%s%u", oi.name, k);
			if ((shmcfg__name_hash(cand, (size_t)n) & mask) != home)
				continue;
			extensions++;
			assert_int_equal(shmcfg_lookup(h, cand, &o), SHMCFG_E_NOOPT);
		}
	}
	/* not vacuous: both kinds were compared with the option they come from */
	assert_true(prefixes > 0);
	assert_true(extensions > 0);
	/* every name again, now from the lookup's cache (h->lk), with the
	 * cached slots of other options on the way */
	for (shmcfg_opt i = 0; i < info.nopts; i++) {
		shmcfg_optinfo oi;
		shmcfg_opt o;
		assert_int_equal(shmcfg_opt_info(h, i, &oi), 0);
		assert_int_equal(shmcfg_lookup(h, oi.name, &o), 0);
		assert_int_equal(o, i);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_deprecated_warns), /* first: once per handle */
		cmocka_unit_test(test_full_and_suffix),
		cmocka_unit_test(test_ambiguous),
		cmocka_unit_test(test_exact_wins),
		cmocka_unit_test(test_aliases),
		cmocka_unit_test(test_did_you_mean),
		cmocka_unit_test(test_short_name),
		cmocka_unit_test(test_hostile),
		cmocka_unit_test(test_lookup_compares_whole_names),
		cmocka_unit_test(test_internal_lookup_leaves_the_warning),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
