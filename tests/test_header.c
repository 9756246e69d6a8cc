/* SPDX-License-Identifier: MIT */
/* Generated accessors (shmctl header, issue 12), compiled from the headers
 * that the build writes with tools/shmctl (tests/Makefile.inc):
 * tests/gen/tc.h for the embedded default schema, tests/gen/hdr.h for
 * tests/header_schema.yaml. Checked against real segments: every accessor
 * and every field of the batched read says what shmcfg_get() says, before
 * and after commits; the attach helper refuses a segment of another schema;
 * a patched thread reads its patches through both; and a batched read in
 * another process than the writer's never mixes two generations.
 *
 * Compiled with -DHEADER_TEST_SEPARATE_READS, the consistency test's
 * readers read each option with its own accessor instead of hdr_read(): the
 * test then fails (it did, by hand, when this file was written).
 *
 * Children never use cmocka: they report through shared memory and their
 * exit status (proc.h). */
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>

#include "common.h"
#include "proc.h"

#include "gen/hdr.h"
#include "gen/tc.h"

/* ------------------------------------------------------------------ */
/* An accessor's answer and a field of the batched read, as values     */
/* ------------------------------------------------------------------ */

#define VAL_BOOL(x) ((shmcfg_value){.type = SHMCFG_BOOL, .u.b = (x)})
#define VAL_INT(x) ((shmcfg_value){.type = SHMCFG_INT, .u.i = (x)})
#define VAL_FLOAT(x) ((shmcfg_value){.type = SHMCFG_FLOAT, .u.f = (x)})
#define CT_BOOL bool
#define CT_INT int64_t
#define CT_FLOAT double

/* the accessor P_id of a non-nullable (0) or nullable (1) option */
#define ACC_0(P, id, TY, h, out) ((out) = VAL_##TY(P##_##id(h)))
#define ACC_1(P, id, TY, h, out)                                              \
	do {                                                                  \
		CT_##TY x_ = 0;                                               \
		int r_ = P##_##id(h, &x_);                                    \
		if (r_ != 0 && r_ != SHMCFG_NULL)                             \
			fail_msg("%s_%s: %s", #P, #id, shmcfg_errname(r_));   \
		(out) = VAL_##TY(x_);                                         \
		(out).is_null = r_ == SHMCFG_NULL;                            \
	} while (0)
/* the field of a struct P_values */
#define FIELD_0(vals, field, TY, out) ((out) = VAL_##TY((vals).field))
#define FIELD_1(vals, field, TY, out)                                         \
	do {                                                                  \
		(out) = VAL_##TY((vals).field);                               \
		(out).is_null = (vals).field##_null;                          \
	} while (0)

static char *text_of(const shmcfg_value *v)
{
	char *t = NULL;
	assert_int_equal(shmcfg_value_format(v, &t), 0);
	return t;
}

/* got (what @p how says of option @p opt) is what shmcfg_get() says */
static void expect_get(const shmcfg *h, shmcfg_opt opt, const char *name, const shmcfg_value *got,
		       const char *how)
{
	shmcfg_value want;
	assert_int_equal(shmcfg_get(h, opt, &want), 0);
	if (!shmcfg_value_equal(got, &want)) {
		char *a = text_of(got), *b = text_of(&want);
		fail_msg("%s: %s gives %s, shmcfg_get %s", name, how, a, b);
	}
	shmcfg_value_clear(&want);
}

/* The handle is the option's, the accessor and the batched read's field
 * say what shmcfg_get() says. */
#define CHECK_OPT(P, h, vals, id, field, nm, TY, nl)                          \
	do {                                                                  \
		shmcfg_opt o_;                                                \
		assert_int_equal(shmcfg_lookup(h, nm, &o_), 0);               \
		assert_int_equal(o_, P##_##id##_opt);                         \
		shmcfg_value a_, f_;                                          \
		ACC_##nl(P, id, TY, h, a_);                                   \
		expect_get(h, o_, nm, &a_, #P "_" #id "()");                  \
		FIELD_##nl(vals, field, TY, f_);                              \
		expect_get(h, o_, nm, &f_, #P "_read()." #field);             \
	} while (0)

static void check_tc(const shmcfg *h)
{
	struct tc_values vals;
	assert_int_equal(tc_read(h, &vals), 0);
	assert_int_equal(vals.generation, shmcfg_generation(h));
#define X(id, field, nm, TY, nl) CHECK_OPT(tc, h, vals, id, field, nm, TY, nl);
	TC_ACCESSORS(X)
#undef X
}

static void check_hdr(const shmcfg *h)
{
	struct hdr_values vals;
	assert_int_equal(hdr_read(h, &vals), 0);
	assert_int_equal(vals.generation, shmcfg_generation(h));
#define X(id, field, nm, TY, nl) CHECK_OPT(hdr, h, vals, id, field, nm, TY, nl);
	HDR_ACCESSORS(X)
#undef X
}

static const char *schema_file(void)
{
	static char path[4096];
	const char *src = getenv("top_srcdir");
	snprintf(path, sizeof path, "%s/tests/header_schema.yaml", src ? src : ".");
	return path;
}

static shmcfg *create_hdr(const char *name)
{
	shmcfg_schema *s = NULL;
	int r = shmcfg_schema_load(schema_file(), &s);
	if (r)
		fail_msg("%s: %s", schema_file(), shmcfg_errdetail());
	shmcfg *h = NULL;
	shmcfg_create_opts o = {.flags = SHMCFG_CREATE_FORCE | SHMCFG_CREATE_NO_ENV};
	r = shmcfg_create(name, s, &o, &h);
	shmcfg_schema_free(s);
	if (r)
		fail_msg("create %s: %s", name, shmcfg_errdetail());
	shmcfg_close(h);
	h = NULL;
	if ((r = hdr_attach(name, 0, &h)))
		fail_msg("hdr_attach %s: %s", name, shmcfg_errdetail());
	return keep(h);
}

static void commit_texts(shmcfg *h, const char *const *kv, size_t n)
{
	shmcfg_txn *t;
	assert_int_equal(shmcfg_txn_begin(h, &t), 0);
	for (size_t i = 0; i < n; i += 2) {
		shmcfg_opt o;
		assert_int_equal(shmcfg_lookup(h, kv[i], &o), 0);
		if (shmcfg_txn_set_text(t, o, kv[i + 1]))
			fail_msg("set %s=%s: %s", kv[i], kv[i + 1], shmcfg_errdetail());
	}
	int r = shmcfg_txn_commit(t, NULL);
	if (r < 0)
		fail_msg("commit: %s", shmcfg_errdetail());
}

/* ------------------------------------------------------------------ */
/* The embedded default schema                                        */
/* ------------------------------------------------------------------ */

static void test_default_schema(void **state)
{
	(void)state;
	const char *name = new_name("hdrdef");
	shmcfg *c = NULL;
	shmcfg_create_opts co = {.flags = SHMCFG_CREATE_FORCE | SHMCFG_CREATE_NO_ENV};
	assert_int_equal(shmcfg_create(name, NULL, &co, &c), 0);
	keep(c);
	shmcfg *h = NULL;
	if (tc_attach(name, SHMCFG_ATTACH_RDONLY, &h))
		fail_msg("tc_attach: %s", shmcfg_errdetail());
	keep(h);
	assert_int_equal(tc_check(h), 0);
	assert_int_equal(tc_nopts, shmcfg_count(h));
	check_tc(h);

	/* every bool flipped, every int moved, in one commit by another handle
	 * (aliases follow their targets) */
	shmcfg_txn *t;
	assert_int_equal(shmcfg_txn_begin(c, &t), 0);
	int changed = 0;
	for (shmcfg_opt i = 0; i < shmcfg_count(c); i++) {
		shmcfg_optinfo info;
		shmcfg_value v;
		assert_int_equal(shmcfg_opt_info(c, i, &info), 0);
		if (info.alias != SHMCFG_NO_OPT || shmcfg_get(c, i, &v))
			continue;
		if (v.type == SHMCFG_BOOL && !v.is_null) {
			assert_int_equal(shmcfg_txn_set_bool(t, i, !v.u.b), 0);
			changed++;
		} else if (v.type == SHMCFG_INT && !v.is_null) {
			assert_int_equal(shmcfg_txn_set_int(t, i, v.u.i + 17), 0);
			changed++;
		}
		shmcfg_value_clear(&v);
	}
	assert_true(changed > 10);
	uint64_t gen;
	assert_int_equal(shmcfg_txn_commit(t, &gen), 0);
	assert_int_equal(shmcfg_generation(h), gen);
	check_tc(h);
	assert_int_equal(tc__dynamo_config_recompile_limit(h), 8 + 17);
	assert_int_equal(tc_compiler_config_recompile_limit(h), 8 + 17); /* its alias */
	drop(h);
	drop(c);
}

/* ------------------------------------------------------------------ */
/* A custom schema: nullable options, aliases, implications, defaults  */
/* ------------------------------------------------------------------ */

static void test_custom_schema(void **state)
{
	(void)state;
	const char *name = new_name("hdrcus");
	shmcfg *h = create_hdr(name);
	assert_int_equal(hdr_nopts, shmcfg_count(h));
	check_hdr(h);

	/* generation 1, no environment: every field is the schema default the
	 * header wrote (INT64_MIN, inf, -0.1, a null, a nullable true) */
	struct hdr_values v;
	assert_int_equal(hdr_read(h, &v), 0);
	assert_int_equal(v.generation, 1);
#define X(id, field, nm, TY, nl)                                                                   \
	do {                                                                                       \
		shmcfg_value a_, d_;                                                               \
		FIELD_##nl(v, field, TY, a_);                                                      \
		FIELD_##nl(hdr_defaults, field, TY, d_);                                           \
		if (!shmcfg_value_equal(&a_, &d_))                                                 \
			fail_msg("%s: read %s, hdr_defaults %s", nm, text_of(&a_), text_of(&d_)); \
	} while (0);
	HDR_ACCESSORS(X)
#undef X
	assert_true(v.limit_null && !v.maybe_on_null && v.maybe_on && !v.scale_null && v.scale == 1.5);
	assert_true(v.other_big == INT64_MIN && isinf(v.other_inf) && v.other_tenth == -0.1);
	assert_int_equal(hdr_new(h), 3);
	assert_int_equal(v.new_, 3);

	static const char *const c1[] = {"app.a", "5", "app.limit", "7", "app.maybe_on", "null",
					 "app.scale", "none", "app.half", "-2.25", "other.big", "12"};
	commit_texts(h, c1, sizeof c1 / sizeof c1[0]);
	check_hdr(h);
	assert_int_equal(hdr_alias_a(h), 5);
	int64_t lim = 0;
	assert_int_equal(hdr_limit(h, &lim), 0);
	assert_int_equal(lim, 7);
	bool on = false;
	assert_int_equal(hdr_maybe_on(h, &on), SHMCFG_NULL);
	double sc = 0;
	assert_int_equal(hdr_scale(h, &sc), SHMCFG_NULL);

	/* an implication: debug makes ratio 1.0 and limit 42 */
	static const char *const c2[] = {"app.debug", "true"};
	commit_texts(h, c2, 2);
	check_hdr(h);
	assert_true(hdr_ratio(h) == 1.0);
	assert_int_equal(hdr_limit(h, &lim), 0);
	assert_int_equal(lim, 42);
	assert_int_equal(hdr_read(h, &v), 0);
	assert_true(v.debug && v.ratio == 1.0 && !v.limit_null && v.limit == 42 && v.alias_a == 5);
	drop(h);
}

/* ------------------------------------------------------------------ */
/* Another schema is refused                                           */
/* ------------------------------------------------------------------ */

static void test_attach_refuses_other_schema(void **state)
{
	(void)state;
	const char *name = new_name("hdroth");
	shmcfg *c = NULL;
	shmcfg_create_opts co = {.flags = SHMCFG_CREATE_FORCE | SHMCFG_CREATE_NO_ENV};
	assert_int_equal(shmcfg_create(name, NULL, &co, &c), 0);
	keep(c);
	shmcfg *h = NULL;
	assert_int_equal(hdr_attach(name, 0, &h), SHMCFG_E_SCHEMA);
	assert_null(h);
	/* the detail names the segment, its schema hash and the header's */
	const char *d = shmcfg_errdetail();
	if (!strstr(d, name) || !strstr(d, TC_SCHEMA_HASH) || !strstr(d, HDR_SCHEMA_HASH) ||
	    !strstr(d, "expected"))
		fail_msg("detail '%s' does not name the segment and both hashes", d);
	shmcfg_attach_opts ro = {.flags = SHMCFG_ATTACH_RDONLY, .expect_schema_hash = tc_schema_hash};
	assert_int_equal(hdr_attach_with(name, &ro, &h), SHMCFG_E_SCHEMA);
	assert_null(h);
	assert_int_equal(hdr_attach_with(name, NULL, &h), SHMCFG_E_SCHEMA);
	assert_null(h);
	/* the right header's helpers accept it, with the caller's options */
	assert_int_equal(tc_attach_with(name, &(shmcfg_attach_opts){.flags = SHMCFG_ATTACH_RDONLY}, &h), 0);
	assert_true(shmcfg_readonly(h));
	/* a handle attached without the hash: only the check tells */
	assert_int_equal(tc_check(c), 0);
	assert_int_equal(hdr_check(c), SHMCFG_E_SCHEMA);
	assert_int_equal(tc_check(h), 0);
	shmcfg_close(h);
	/* a missing segment is the library's error, untouched */
	assert_int_equal(hdr_attach(test_name("hdrmissing"), 0, &h), -ENOENT);
	drop(c);
}

/* ------------------------------------------------------------------ */
/* Patches                                                            */
/* ------------------------------------------------------------------ */

struct other_thread {
	const shmcfg *h;
	struct hdr_values v;
	int64_t a;
	int r;
};

static void *read_unpatched(void *arg)
{
	struct other_thread *o = arg;
	o->a = hdr_a(o->h);
	o->r = hdr_read(o->h, &o->v);
	return NULL;
}

static void test_patched_thread(void **state)
{
	(void)state;
	const char *name = new_name("hdrpatch");
	shmcfg *h = create_hdr(name);
	static const char *const c1[] = {"app.a", "1", "app.b", "2"};
	commit_texts(h, c1, 4);

	assert_int_equal(shmcfg_patch_push(h), 0);
	assert_int_equal(shmcfg_patch_set_text(h, hdr_a_opt, "77"), 0);
	assert_int_equal(shmcfg_patch_set_text(h, hdr_limit_opt, "9"), 0);
	assert_int_equal(shmcfg_patch_set_text(h, hdr_debug_opt, "true"), 0);
	/* accessors: the patch, its alias, what it implies; the rest shared */
	assert_int_equal(hdr_a(h), 77);
	assert_int_equal(hdr_alias_a(h), 77);
	assert_int_equal(hdr_b(h), 2);
	assert_true(hdr_debug(h) && hdr_ratio(h) == 1.0);
	int64_t lim = 0;
	assert_int_equal(hdr_limit(h, &lim), 0);
	assert_int_equal(lim, 42); /* implied beats the patch, as the user layer */
	struct hdr_values v;
	assert_int_equal(hdr_read(h, &v), 0);
	assert_true(v.a == 77 && v.alias_a == 77 && v.b == 2 && v.debug && v.ratio == 1.0);
	assert_true(!v.limit_null && v.limit == 42);
	assert_int_equal(v.generation, shmcfg_generation(h));
	check_hdr(h); /* shmcfg_get honours patches too */

	/* another thread has no patch */
	struct other_thread o = {.h = h};
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, read_unpatched, &o), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(o.a, 1);
	assert_int_equal(o.r, 0);
	assert_true(o.v.a == 1 && !o.v.debug && o.v.ratio == 0.5 && o.v.limit_null);

	/* a commit meanwhile: the patched thread sees it under its patch */
	static const char *const c2[] = {"app.b", "3", "app.a", "4"};
	commit_texts(h, c2, 4);
	assert_int_equal(hdr_b(h), 3);
	assert_int_equal(hdr_a(h), 77);
	assert_int_equal(hdr_read(h, &v), 0);
	assert_true(v.a == 77 && v.b == 3);
	assert_int_equal(v.generation, shmcfg_generation(h));

	assert_int_equal(shmcfg_patch_pop(h), 0);
	assert_int_equal(hdr_a(h), 4);
	assert_int_equal(hdr_read(h, &v), 0);
	assert_true(v.a == 4 && !v.debug && v.limit_null);
	drop(h);
}

/* ------------------------------------------------------------------ */
/* Consistency across processes                                        */
/* ------------------------------------------------------------------ */

/* The writer keeps, in every commit: b = c = a, half = a / 2, odd = a & 1. */
#define READERS 2
#define WANT_CHANGES 3000 /* generations each reader sees change */
#define MIN_CHANGES 200   /* fewer: the test did not test */
#define READ_MS 15000     /* a reader's time bound */

struct shared {
	atomic_int stop;          /* readers done: the writer stops */
	atomic_int ready;         /* readers attached */
	atomic_llong commits;
	struct {
		long long reads, changes, bad, slow;
		long long a, b, c, gen; /* the first bad read */
		double half;
		int odd;
	} r[READERS];
};

static struct shared *sh;
static const char *cons_name;

static int writer(void *arg)
{
	(void)arg;
	shmcfg *h = NULL;
	CHECK(hdr_attach(cons_name, 0, &h) == 0, 2, "attach");
	uint64_t deadline = mono_ms() + READ_MS + 5000;
	while (atomic_load(&sh->ready) < READERS && mono_ms() < deadline)
		usleep(100);
	for (int64_t i = 1; !atomic_load(&sh->stop) && mono_ms() < deadline; i++) {
		shmcfg_txn *t;
		CHECK(shmcfg_txn_begin(h, &t) == 0, 3, "begin");
		CHECK(shmcfg_txn_set_int(t, hdr_a_opt, i) == 0 && shmcfg_txn_set_int(t, hdr_b_opt, i) == 0 &&
			      shmcfg_txn_set_int(t, hdr_c_opt, i) == 0 &&
			      shmcfg_txn_set_float(t, hdr_half_opt, (double)i / 2) == 0 &&
			      shmcfg_txn_set_bool(t, hdr_odd_opt, i & 1) == 0,
		      4, "set %" PRId64, i);
		CHECK(shmcfg_txn_commit(t, NULL) == 0, 5, "commit %" PRId64, i);
		atomic_fetch_add(&sh->commits, 1);
	}
	shmcfg_close(h);
	return 0;
}

/* Reader k: batched reads until it saw WANT_CHANGES generations; reader 1
 * has a patch (of an option outside the invariant), so every one of its
 * reads takes the batched slow path. */
static int reader(void *arg)
{
	int k = (int)(intptr_t)arg;
	shmcfg *h = NULL;
	CHECK(hdr_attach(cons_name, SHMCFG_ATTACH_RDONLY, &h) == 0, 2, "attach");
	if (k == 1) {
		CHECK(shmcfg_patch_push(h) == 0, 3, "patch");
		CHECK(shmcfg_patch_set_text(h, hdr_ratio_opt, "0.25") == 0, 3, "patch");
	}
	atomic_fetch_add(&sh->ready, 1);
	uint64_t deadline = mono_ms() + READ_MS, last = 0;
	long long reads = 0, changes = 0, bad = 0;
	while (changes < WANT_CHANGES && ((reads & 1023) || mono_ms() < deadline)) {
		struct hdr_values v;
#ifdef HEADER_TEST_SEPARATE_READS
		v.a = hdr_a(h);
		v.b = hdr_b(h);
		v.c = hdr_c(h);
		v.half = hdr_half(h);
		v.odd = hdr_odd(h);
		v.ratio = hdr_ratio(h);
		v.generation = shmcfg_generation(h);
		int r = 0;
#else
		int r = hdr_read(h, &v);
#endif
		CHECK(r == 0, 4, "hdr_read: %s", shmcfg_errname(r));
		reads++;
		bool ok = v.b == v.a && v.c == v.a && v.half == (double)v.a / 2 && v.odd == (v.a & 1) &&
			  v.ratio == (k == 1 ? 0.25 : 0.5) && v.generation >= last;
		if (!ok && bad++ == 0) {
			sh->r[k].a = v.a;
			sh->r[k].b = v.b;
			sh->r[k].c = v.c;
			sh->r[k].half = v.half;
			sh->r[k].odd = v.odd;
			sh->r[k].gen = (long long)v.generation;
		}
		if (v.generation != last) {
			changes += last != 0;
			last = v.generation;
		}
	}
	sh->r[k].reads = reads;
	sh->r[k].changes = changes;
	sh->r[k].bad = bad;
	shmcfg_close(h);
	return 0;
}

static void test_batched_read_is_consistent(void **state)
{
	(void)state;
	cons_name = new_name("hdrcons");
	drop(create_hdr(cons_name));
	sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(sh != MAP_FAILED);
	memset(sh, 0, sizeof *sh);
	pid_t w = spawn(writer, NULL);
	pid_t r[READERS];
	for (int k = 0; k < READERS; k++)
		r[k] = spawn(reader, (void *)(intptr_t)k);
	int st[READERS];
	for (int k = 0; k < READERS; k++)
		st[k] = reap_within(r[k], READ_MS + 10000);
	atomic_store(&sh->stop, 1);
	int wst = reap(w);
	assert_true(WIFEXITED(wst) && WEXITSTATUS(wst) == 0);
	for (int k = 0; k < READERS; k++) {
		print_message("# reader %d%s: %lld reads, %lld generation changes seen, %lld bad; %lld "
			      "commits\n",
			      k, k == 1 ? " (patched: slow path)" : "", sh->r[k].reads, sh->r[k].changes,
			      sh->r[k].bad, (long long)atomic_load(&sh->commits));
		assert_true(WIFEXITED(st[k]) && WEXITSTATUS(st[k]) == 0);
		if (sh->r[k].bad)
			fail_msg("reader %d: %lld of %lld reads mixed generations, the first: a=%lld b=%lld "
				 "c=%lld half=%g odd=%d generation %lld",
				 k, sh->r[k].bad, sh->r[k].reads, sh->r[k].a, sh->r[k].b, sh->r[k].c,
				 sh->r[k].half, sh->r[k].odd, sh->r[k].gen);
		if (sh->r[k].changes < MIN_CHANGES)
			fail_msg("reader %d saw only %lld generations change: the writer and the reader "
				 "did not overlap enough to test anything",
				 k, sh->r[k].changes);
	}
	munmap(sh, sizeof *sh);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_batched_read_is_consistent, teardown),
		cmocka_unit_test_teardown(test_default_schema, teardown),
		cmocka_unit_test_teardown(test_custom_schema, teardown),
		cmocka_unit_test_teardown(test_attach_refuses_other_schema, teardown),
		cmocka_unit_test_teardown(test_patched_thread, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
