/* SPDX-License-Identifier: MIT */
/* The seed's semantics: schema files, precedence of every layer for every
 * type, patches, is_default, save/load, codegen, the config hash and
 * deprecation warnings. */
#include <errno.h>
#include <math.h>
#include <pthread.h>

#include "common.h"

/* golden config hashes of the embedded default (encoding v2; the default one
 * computed again, when it was set, by an encoder written in Python apart from
 * lib/ with libxxhash, which agreed) */
#define GOLDEN_DEFAULT "24b6dc0466eef313cc0423a1f26bff8b"
#define GOLDEN_TAGGED "5a7cf0858a03d083026d301469daa855"

static const char *srcdir(void)
{
	const char *s = getenv("srcdir");
	return s ? s : ".";
}

static char *text_of(const shmcfg *h, shmcfg_opt o, shmcfg_source *src)
{
	shmcfg_value v;
	assert_int_equal(shmcfg_get(h, o, &v), 0);
	char *t;
	assert_int_equal(shmcfg_value_format(&v, &t), 0);
	if (src)
		*src = v.source;
	shmcfg_value_clear(&v);
	return t;
}

static shmcfg_opt opt(const shmcfg *h, const char *name)
{
	return opt_named(h, name);
}

/* The schema file made by the importer from the seed is the embedded default. */
static void test_yaml_is_default(void **state)
{
	(void)state;
	char path[512];
	snprintf(path, sizeof path, "%s/schemas/torch_compiler.yaml", srcdir());
	shmcfg_schema *y, *d;
	int r = shmcfg_schema_load(path, &y);
	if (r)
		fail_msg("%s", shmcfg_errdetail());
	assert_int_equal(shmcfg_schema_default(&d), 0);
	assert_int_equal(shmcfg_schema_count(y), shmcfg_schema_count(d));
	shmcfg *a = create_from(test_name("yaml"), y, NULL), *b = create_from(test_name("dflt"), d, NULL);
	uint8_t ha[16], hb[16];
	shmcfg_schema_hash(a, ha);
	shmcfg_schema_hash(b, hb);
	assert_memory_equal(ha, hb, 16);
	/* the defaults doc/design.md lists */
	int64_t i;
	bool bl;
	assert_int_equal(shmcfg_get_int(a, opt(a, "torch._dynamo.config.recompile_limit"), &i), 0);
	assert_int_equal(i, 8);
	assert_int_equal(shmcfg_get_int(a, opt(a, "torch.compiler.config.accumulated_recompile_limit"), &i), 0);
	assert_int_equal(i, 256);
	assert_int_equal(shmcfg_get_bool(a, opt(a, "torch.compiler.config.dynamic_shapes"), &bl), 0);
	assert_true(bl);
	assert_int_equal(shmcfg_get_bool(a, opt(a, "torch._dynamo.config.skip_tensor_guards_with_matching_dict_tags"), &bl), 0);
	assert_true(bl);
	shmcfg_optinfo in;
	assert_int_equal(shmcfg_opt_info(a, opt(a, "torch._dynamo.config.recompile_limit"), &in), 0);
	assert_true(in.flags & SHMCFG_F_HASH_IGNORED);
	assert_int_equal(shmcfg_opt_info(a, opt(a, "torch.compiler.config.force_disable_caches"), &in), 0);
	assert_string_equal(in.knob, "pytorch/remote_cache:force_disable_caches");
	assert_int_equal(in.n_env_force, 2);
	assert_non_null(strstr(in.doc, "Force disables all caching"));
	assert_int_equal(shmcfg_opt_info(a, opt(a, "torch.compiler.config.reorderable_logging_functions"), &in), 0);
	assert_int_equal(in.type, SHMCFG_SET);
	shmcfg_close(a);
	shmcfg_close(b);
	shmcfg_unlink(test_name("yaml"));
	shmcfg_unlink(test_name("dflt"));
	shmcfg_schema_free(y);
	shmcfg_schema_free(d);
}

/* (Schema files the library refuses, each with its detail: the cases of
 * tests/cases/schema-error, run by tests/test_cases.c.) */
static void test_yaml_errors(void **state)
{
	(void)state;
	shmcfg_schema *s;
	assert_int_equal(shmcfg_schema_load("/nonexistent/schema.yaml", &s), -ENOENT);
	assert_non_null(strstr(shmcfg_errdetail(), "/nonexistent/schema.yaml"));
	/* a quoted default is a string even if it reads like null */
	const char *ok = "format: 1\noptions:\n  a.s:\n    type: str\n    nullable: true\n    default: \"none\"\n"
			 "  a.n:\n    type: str\n    nullable: true\n    default: null\n"
			 "  a.f:\n    type: bool\n    implies: {a.s: \"x\"}\n";
	assert_int_equal(shmcfg_schema_load_text(ok, strlen(ok), "ok.yaml", &s), 0);
	shmcfg *h = create_from(test_name("q"), s, NULL);
	char *t = text_of(h, 0, NULL);
	assert_string_equal(t, "\"none\"");
	free(t);
	t = text_of(h, 1, NULL);
	assert_string_equal(t, "null");
	free(t);
	assert_int_equal(set_and_commit(h, 2, "true", NULL), 0);
	t = text_of(h, 0, NULL);
	assert_string_equal(t, "\"x\"");
	free(t);
	shmcfg_close(h);
	shmcfg_unlink(test_name("q"));
	shmcfg_schema_free(s);
}

/*
 * Precedence, table-driven: for each type, every combination of the layers
 * knob, env_default, user, env_force and implied (32 combinations; knob only
 * where the type can declare one) must give the value of the highest set
 * layer, and report that layer as the source.
 */
static void test_precedence_table(void **state)
{
	(void)state;
	struct {
		shmcfg_type type;
		/* by source: default, knob, env_default, cluster, user, env_force, implied */
		const char *vals[7];
		bool knob;
	} types[] = {
		{SHMCFG_BOOL, {"false", "true", "false", "true", "false", "true", "false"}, true},
		{SHMCFG_INT, {"0", "1", "2", "3", "4", "5", "6"}, true},
		{SHMCFG_FLOAT, {"0.5", "1.5", "2.5", "3.5", "4.5", "5.5", "6.5"}, false},
		{SHMCFG_STR, {"\"d\"", "x", "\"ed\"", "\"c\"", "\"u\"", "\"ef\"", "\"i\""}, false},
		{SHMCFG_LIST, {"[\"d\"]", "x", "[\"ed\"]", "[\"c\"]", "[\"u\"]", "[\"ef\"]", "[\"i\"]"}, false},
		{SHMCFG_SET, {"[\"d\"]", "x", "[\"ed\"]", "[\"c\"]", "[\"u\"]", "[\"ef\"]", "[\"b\",\"i\"]"}, false},
	};
	int checked = 0;
	for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
		char implies[64];
		snprintf(implies, sizeof implies, "p.x=%s", types[t].vals[SHMCFG_SRC_IMPLIED]);
		/* env values: JSON text is not how the environment spells a value */
		char envd[32], envf[32];
		const char *ed = types[t].vals[SHMCFG_SRC_ENV_DEFAULT], *ef = types[t].vals[SHMCFG_SRC_ENV_FORCE];
		if (types[t].type == SHMCFG_STR) {
			ed = "ed";
			ef = "ef";
		} else if (types[t].type >= SHMCFG_LIST) {
			ed = "ed";
			ef = "ef";
		}
		snprintf(envd, sizeof envd, "P_ED=%s", ed);
		snprintf(envf, sizeof envf, "P_EF=%s", ef);
		for (unsigned mask = 0; mask < 64; mask++) {
			bool knob = mask & 1, env_d = mask & 2, cluster = mask & 4, user = mask & 8, env_f = mask & 16,
			     impl = mask & 32;
			if (knob && !types[t].knob)
				continue;
			shmcfg_optdef defs[2] = {
				{.name = "p.x", .type = types[t].type, .def = types[t].vals[0],
				 .knob = types[t].knob ? "k" : NULL, .env_default = "P_ED", .env_force = "P_EF"},
				{.name = "p.on", .type = SHMCFG_BOOL, .implies = implies},
			};
			shmcfg_schema *s;
			assert_int_equal(shmcfg_schema_new(&s), 0);
			for (int i = 0; i < 2; i++)
				if (shmcfg_schema_add(s, &defs[i]))
					fail_msg("%s", shmcfg_errdetail());
			char *env[3] = {NULL, NULL, NULL};
			int ne = 0;
			if (env_d)
				env[ne++] = envd;
			if (env_f)
				env[ne++] = envf;
			shmcfg *h = create_from(test_name("prec"), s, env);
			shmcfg_schema_free(s);
			shmcfg_txn *tx;
			assert_int_equal(shmcfg_txn_begin(h, &tx), 0);
			if (user)
				assert_int_equal(shmcfg_txn_set_text(tx, 0, types[t].vals[SHMCFG_SRC_USER]), 0);
			if (impl)
				assert_int_equal(shmcfg_txn_set_bool(tx, 1, true), 0);
			assert_true(shmcfg_txn_commit(tx, NULL) >= 0);
			if (knob) {
				assert_int_equal(shmcfg_txn_begin(h, &tx), 0);
				assert_int_equal(shmcfg_txn_layer(tx, SHMCFG_SRC_KNOB), 0);
				assert_int_equal(shmcfg_txn_set_text(tx, 0, types[t].vals[SHMCFG_SRC_KNOB]), 0);
				assert_int_equal(shmcfg_txn_commit(tx, NULL), 0);
			}
			if (cluster) { /* as shmcfg-sync writes it: its own layer, with an origin */
				assert_int_equal(shmcfg_txn_begin(h, &tx), 0);
				assert_int_equal(shmcfg_txn_layer(tx, SHMCFG_SRC_CLUSTER), 0);
				assert_int_equal(shmcfg_txn_origin(tx, 7, "op@host"), 0);
				assert_int_equal(shmcfg_txn_set_text(tx, 0, types[t].vals[SHMCFG_SRC_CLUSTER]), 0);
				assert_int_equal(shmcfg_txn_commit(tx, NULL), 0);
				assert_int_equal(shmcfg_cluster_revision(h), 7);
			}
			shmcfg_source want = impl    ? SHMCFG_SRC_IMPLIED
					     : env_f   ? SHMCFG_SRC_ENV_FORCE
					     : user    ? SHMCFG_SRC_USER
					     : cluster ? SHMCFG_SRC_CLUSTER
					     : env_d   ? SHMCFG_SRC_ENV_DEFAULT
					     : knob    ? SHMCFG_SRC_KNOB
						       : SHMCFG_SRC_DEFAULT;
			shmcfg_value expect;
			const char *wtext = types[t].vals[want];
			bool from_env = want == SHMCFG_SRC_ENV_DEFAULT || want == SHMCFG_SRC_ENV_FORCE;
			if (from_env && types[t].type >= SHMCFG_STR)
				wtext = want == SHMCFG_SRC_ENV_DEFAULT ? "\"ed\"" : "\"ef\"";
			if (from_env && types[t].type >= SHMCFG_LIST)
				wtext = want == SHMCFG_SRC_ENV_DEFAULT ? "[\"ed\"]" : "[\"ef\"]";
			assert_int_equal(shmcfg_value_parse(types[t].type, false, wtext, &expect), 0);
			shmcfg_value got;
			assert_int_equal(shmcfg_get(h, 0, &got), 0);
			if (!shmcfg_value_equal(&got, &expect) || got.source != want) {
				char *gt = NULL;
				(void)!shmcfg_value_format(&got, &gt);
				fail_msg("%s mask %u: got %s from %s, want %s from %s", shmcfg_type_name(types[t].type),
					 mask, gt, shmcfg_source_name(got.source), wtext, shmcfg_source_name(want));
			}
			shmcfg_value_clear(&got);
			shmcfg_value_clear(&expect);
			shmcfg_close(h);
			checked++;
		}
	}
	shmcfg_unlink(test_name("prec"));
	assert_int_equal(checked, 2 * 64 + 4 * 32);
}

/* Environment edge cases for floats: NaN and infinities are values (as
 * Python's float() reads them) unless a range excludes them; overflow and
 * blanks are errors naming the variable. */
static void test_env_floats(void **state)
{
	(void)state;
	const char *y = "format: 1\noptions:\n"
			"  f.free:\n    type: float\n    env_default: [F_FREE]\n"
			"  f.ranged:\n    type: float\n    min: 0\n    max: 1\n    env_default: [F_RANGED]\n";
	struct {
		const char *var;
		int err;
		const char *value; /* of f.free, when created */
	} cases[] = {
		{"F_FREE=nan", 0, "nan"},   {"F_FREE=-inf", 0, "-inf"}, {"F_FREE=1e-3", 0, "0.001"},
		{"F_FREE=1e999", SHMCFG_E_ENV, NULL}, {"F_FREE= 1", SHMCFG_E_ENV, NULL},
		{"F_FREE=", SHMCFG_E_ENV, NULL},    {"F_RANGED=nan", SHMCFG_E_ENV, NULL},
		{"F_RANGED=inf", SHMCFG_E_ENV, NULL}, {"F_RANGED=0.5", 0, "0.5"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		shmcfg_schema *s;
		assert_int_equal(shmcfg_schema_load_text(y, strlen(y), "f.yaml", &s), 0);
		char *env[] = {(char *)cases[i].var, NULL};
		shmcfg *h = NULL;
		int r = shmcfg_create(test_name("envf"), s, &(shmcfg_create_opts){.flags = SHMCFG_CREATE_FORCE, .envp = env}, &h);
		shmcfg_schema_free(s);
		if (r != cases[i].err)
			fail_msg("%s: %s (%s)", cases[i].var, shmcfg_errname(r), shmcfg_errdetail());
		if (r) {
			char var[16];
			snprintf(var, sizeof var, "%.*s", (int)(strchr(cases[i].var, '=') - cases[i].var), cases[i].var);
			assert_non_null(strstr(shmcfg_errdetail(), var));
			continue;
		}
		char *t = text_of(h, !strncmp(cases[i].var, "F_FREE", 6) ? 0 : 1, NULL);
		assert_string_equal(t, cases[i].value);
		free(t);
		shmcfg_close(h);
		shmcfg_unlink(test_name("envf"));
	}
}

/* ------------------------------------------------------------------ */

struct pfx {
	const char *name;
	shmcfg *h;
};

static void test_patches(void **state)
{
	(void)state;
	const char *name = test_name("patch");
	char *env[] = {"T_ENVF=1", NULL};
	shmcfg *h = test_create(name, &(shmcfg_create_opts){.envp = env});
	assert_int_equal(set_and_commit(h, T_A, "10", NULL), 0);
	assert_int_equal(shmcfg_patch_push(h), 0);
	assert_int_equal(shmcfg_patch_set_text(h, T_ALIAS2, "20"), 0); /* alias patches its target */
	assert_int_equal(shmcfg_patch_set_text(h, T_DEBUG, "true"), 0);
	assert_int_equal(shmcfg_patch_set_text(h, T_ENV_F, "false"), 0);
	assert_int_equal(shmcfg_patch_set_text(h, T_RATIO, "7"), SHMCFG_E_RANGE); /* checked */
	assert_int_equal(get_i(h, T_A), 20); /* the inline getter honours patches */
	assert_int_equal(get_i(h, T_ALIAS_A), 20);
	shmcfg_source src;
	char *t = text_of(h, T_A, &src);
	assert_string_equal(t, "20");
	assert_int_equal(src, SHMCFG_SRC_PATCH);
	free(t);
	/* implications are resolved again for the patched thread */
	bool b;
	assert_int_equal(shmcfg_get_bool(h, T_FLAG, &b), 0);
	assert_true(b);
	t = text_of(h, T_MODE, &src);
	assert_string_equal(t, "\"slow\"");
	assert_int_equal(src, SHMCFG_SRC_IMPLIED);
	free(t);
	/* env_force still wins */
	assert_int_equal(shmcfg_get_bool(h, T_ENV_F, &b), 0);
	assert_true(b);
	assert_int_equal(shmcfg_is_default(h, T_A), 0);
	/* nested frames; the inner one wins, popping restores */
	assert_int_equal(shmcfg_patch_push(h), 0);
	assert_int_equal(shmcfg_patch_set_text(h, T_A, "30"), 0);
	assert_int_equal(get_i(h, T_A), 30);
	/* a commit meanwhile is seen for the options the thread did not patch */
	assert_int_equal(set_and_commit(h, T_B, "5", NULL), 0);
	assert_int_equal(get_i(h, T_B), 5);
	assert_int_equal(shmcfg_patch_pop(h), 0);
	assert_int_equal(get_i(h, T_A), 20);
	assert_int_equal(shmcfg_patch_pop(h), 0);
	assert_int_equal(get_i(h, T_A), 10);
	assert_int_equal(shmcfg_get_bool(h, T_FLAG, &b), 0);
	assert_false(b);
	assert_int_equal(shmcfg_patch_pop(h), -ENOENT);
	assert_int_equal(shmcfg_patch_set_text(h, T_A, "1"), -ENOENT);
	/* a refused patch of an option the frame did not hold leaves no trace */
	assert_int_equal(shmcfg_patch_push(h), 0);
	assert_int_equal(shmcfg_patch_set_text(h, T_DEBUG, "true"), 0);
	assert_int_equal(shmcfg_patch_set_text(h, T_SAFE, "true"), SHMCFG_E_CONFLICT);
	shmcfg_value sv2;
	assert_int_equal(shmcfg_get(h, T_SAFE, &sv2), 0);
	assert_false(sv2.u.b);
	assert_int_not_equal(sv2.source, SHMCFG_SRC_PATCH);
	shmcfg_value_clear(&sv2);
	bool sb = true;
	assert_int_equal(shmcfg_get_bool(h, T_SAFE, &sb), 0);
	assert_false(sb);
	assert_int_equal(shmcfg_patch_pop(h), 0);
	/* frames left open at close go with the handle */
	shmcfg *h2 = NULL;
	assert_int_equal(shmcfg_attach(name, 0, NULL, &h2), 0);
	assert_int_equal(shmcfg_patch_push(h2), 0);
	assert_int_equal(shmcfg_patch_set_text(h2, T_A, "77"), 0);
	assert_int_equal(get_i(h2, T_A), 77);
	shmcfg_close(h2);
	assert_int_equal(shmcfg__tls_patched, 0);
	assert_int_equal(get_i(h, T_A), 10);
	/* the segment never saw a patch */
	shmcfg_snapshot *snap = NULL;
	shmcfg_value sv;
	assert_int_equal(shmcfg_snapshot_acquire(h, &snap), 0);
	assert_int_equal(shmcfg_snapshot_get(snap, T_A, &sv), 0);
	assert_int_equal(sv.u.i, 10);
	assert_int_equal(sv.source, SHMCFG_SRC_USER);
	shmcfg_snapshot_release(snap);
	shmcfg_close(h);
	shmcfg_unlink(name);
}

struct tharg {
	shmcfg *h;
	int64_t seen;
	pthread_barrier_t *bar;
};

static void *other_thread(void *p)
{
	struct tharg *a = p;
	pthread_barrier_wait(a->bar); /* main thread has patched */
	a->seen = -1;
	(void)!shmcfg_get_int(a->h, T_A, &a->seen);
	pthread_barrier_wait(a->bar);
	return NULL;
}

/* One thread's patch is invisible to another; a new thread sees the shared
 * values, never bare defaults. */
static void test_patch_threads(void **state)
{
	(void)state;
	const char *name = test_name("pth");
	shmcfg *h = test_create(name, NULL);
	assert_int_equal(set_and_commit(h, T_A, "10", NULL), 0);
	pthread_barrier_t bar;
	pthread_barrier_init(&bar, NULL, 2);
	struct tharg a = {h, 0, &bar};
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, other_thread, &a), 0);
	assert_int_equal(shmcfg_patch_push(h), 0);
	assert_int_equal(shmcfg_patch_set_text(h, T_A, "99"), 0);
	pthread_barrier_wait(&bar);
	pthread_barrier_wait(&bar);
	pthread_join(th, NULL);
	assert_int_equal(a.seen, 10);
	assert_int_equal(get_i(h, T_A), 99);
	assert_int_equal(shmcfg_patch_pop(h), 0);
	pthread_barrier_destroy(&bar);

	/* the closure patcher: checked once, applied and restored many times */
	shmcfg_patcher *p;
	assert_int_equal(shmcfg_patcher_new(h, &p), 0);
	assert_int_equal(shmcfg_patcher_set(p, T_A, &(shmcfg_value){.type = SHMCFG_INT, .u.i = 42}), 0);
	assert_int_equal(shmcfg_patcher_set(p, T_RATIO, &(shmcfg_value){.type = SHMCFG_FLOAT, .u.f = 2}),
			 SHMCFG_E_RANGE);
	for (int i = 0; i < 100; i++) {
		assert_int_equal(shmcfg_patcher_apply(p), 0);
		assert_int_equal(get_i(h, T_A), 42);
		assert_int_equal(shmcfg_patcher_restore(p), 0);
		assert_int_equal(get_i(h, T_A), 10);
	}
	assert_int_equal(shmcfg_patcher_restore(p), -ENOENT);
	shmcfg_patcher_free(p);
	shmcfg_close(h);
	shmcfg_unlink(name);
}

/*
 * Frames closed by their owner: patches that end out of order each take
 * away their own changes only; a stray close changes nothing; a patcher's
 * restore finds its frame under another's.
 */
static void test_patch_owners(void **state)
{
	(void)state;
	const char *name = test_name("pown");
	shmcfg *h = test_create(name, NULL);
	assert_int_equal(set_and_commit(h, T_A, "10", NULL), 0);
	int a, b, c; /* the owners: any addresses */
	bool dbg;
	assert_int_equal(shmcfg_patch_enter(h, &a), 0);
	assert_int_equal(shmcfg_patch_set_text(h, T_A, "1"), 0);
	assert_int_equal(shmcfg_patch_enter(h, &b), 0);
	assert_int_equal(shmcfg_patch_set_text(h, T_DEBUG, "true"), 0);
	assert_int_equal(shmcfg_patch_exit(h, &c), -ENOENT); /* never entered: nothing closes */
	assert_int_equal(shmcfg_patch_pop(h), -ENOENT);      /* the innermost is b's */
	assert_int_equal(get_i(h, T_A), 1);
	assert_int_equal(shmcfg_patch_exit(h, &a), 0); /* out of order: b's stays */
	assert_int_equal(get_i(h, T_A), 10);
	assert_int_equal(shmcfg_get_bool(h, T_DEBUG, &dbg), 0);
	assert_true(dbg);
	assert_int_equal(shmcfg_patch_exit(h, &a), -ENOENT);
	/* one owner entered twice (a re-entered context manager): its innermost first */
	assert_int_equal(shmcfg_patch_enter(h, &a), 0);
	assert_int_equal(shmcfg_patch_set_text(h, T_A, "2"), 0);
	assert_int_equal(shmcfg_patch_enter(h, &a), 0);
	assert_int_equal(shmcfg_patch_set_text(h, T_A, "3"), 0);
	assert_int_equal(shmcfg_patch_exit(h, &a), 0);
	assert_int_equal(get_i(h, T_A), 2);
	assert_int_equal(shmcfg_patch_exit(h, &a), 0);
	/* a patcher applied under b's frame and restored over another frame */
	shmcfg_patcher *p;
	assert_int_equal(shmcfg_patcher_new(h, &p), 0);
	assert_int_equal(shmcfg_patcher_set(p, T_A, &(shmcfg_value){.type = SHMCFG_INT, .u.i = 42}), 0);
	assert_int_equal(shmcfg_patcher_apply(p), 0);
	assert_int_equal(shmcfg_patch_enter(h, &c), 0);
	assert_int_equal(shmcfg_patch_set_text(h, T_DEBUG, "false"), 0);
	assert_int_equal(get_i(h, T_A), 42);
	assert_int_equal(shmcfg_patcher_restore(p), 0);
	assert_int_equal(get_i(h, T_A), 10);
	assert_int_equal(shmcfg_get_bool(h, T_DEBUG, &dbg), 0);
	assert_false(dbg); /* c's */
	assert_int_equal(shmcfg_patch_exit(h, &c), 0);
	assert_int_equal(shmcfg_patch_exit(h, &b), 0);
	assert_int_equal(shmcfg__tls_patched, 0);
	assert_int_equal(shmcfg_get_bool(h, T_DEBUG, &dbg), 0);
	assert_false(dbg); /* the shared value */
	assert_int_equal(shmcfg_patch_enter(h, NULL), -EINVAL);
	assert_int_equal(shmcfg_patch_exit(h, NULL), -EINVAL);
	shmcfg_patcher_free(p);
	shmcfg_close(h);
	shmcfg_unlink(name);
}

struct left_open {
	const char *name;
	shmcfg *h;                    /* attached and patched by the thread, closed by main */
	pthread_barrier_t bar;
	int64_t seen;                 /* T_A through a later handle at h's address */
	int tries;                    /* attaches until one had h's address */
};

static void *leave_frame_open(void *p)
{
	struct left_open *lo = p;
	if (shmcfg_attach(lo->name, 0, NULL, &lo->h) || shmcfg_patch_push(lo->h) ||
	    shmcfg_patch_set_text(lo->h, T_A, "77"))
		lo->h = NULL;
	void *at = lo->h;
	pthread_barrier_wait(&lo->bar); /* main closes lo->h, our frame still open */
	pthread_barrier_wait(&lo->bar);
	/* a later handle at the closed one's address (mmap gives the gap back) */
	shmcfg *hs[16] = {0};
	for (lo->tries = 1; lo->tries <= 16; lo->tries++) {
		if (shmcfg_attach(lo->name, 0, NULL, &hs[lo->tries - 1]))
			break;
		if ((void *)hs[lo->tries - 1] == at) {
			lo->seen = get_i(hs[lo->tries - 1], T_A);
			break;
		}
	}
	for (int i = 0; i < 16; i++)
		shmcfg_close(hs[i]);
	return NULL;
}

/* A frame a thread left open on a handle another thread closed patches no
 * later handle that gets the closed one's address. */
static void test_patch_frame_of_closed_handle(void **state)
{
	(void)state;
	struct left_open lo = {.name = test_name("pclo"), .seen = -1};
	shmcfg *h = test_create(lo.name, NULL);
	assert_int_equal(set_and_commit(h, T_A, "10", NULL), 0);
	pthread_barrier_init(&lo.bar, NULL, 2);
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, leave_frame_open, &lo), 0);
	pthread_barrier_wait(&lo.bar);
	assert_non_null(lo.h);
	shmcfg_close(lo.h);
	pthread_barrier_wait(&lo.bar);
	pthread_join(th, NULL);
	pthread_barrier_destroy(&lo.bar);
	assert_in_range(lo.tries, 1, 16); /* the address came back */
	assert_int_equal(lo.seen, 10);
	shmcfg_close(h);
	shmcfg_unlink(lo.name);
}

/* A patcher outliving its handle reads nothing of it: applied after the
 * close, its frame patches no later handle at that address, and its
 * restore still finds it. */
static void test_patcher_outlives_its_handle(void **state)
{
	(void)state;
	const char *name = test_name("pout");
	shmcfg *h = test_create(name, NULL);
	assert_int_equal(set_and_commit(h, T_A, "10", NULL), 0);
	shmcfg *h1;
	shmcfg_patcher *p;
	assert_int_equal(shmcfg_attach(name, 0, NULL, &h1), 0);
	assert_int_equal(shmcfg_patcher_new(h1, &p), 0);
	assert_int_equal(shmcfg_patcher_set(p, T_A, &(shmcfg_value){.type = SHMCFG_INT, .u.i = 42}), 0);
	void *at = h1;
	shmcfg_close(h1);
	assert_int_equal(shmcfg_patcher_apply(p), 0);
	shmcfg *hs[16] = {0};
	int tries;
	int64_t seen = -1;
	for (tries = 1; tries <= 16; tries++) {
		assert_int_equal(shmcfg_attach(name, 0, NULL, &hs[tries - 1]), 0);
		if ((void *)hs[tries - 1] == at) {
			seen = get_i(hs[tries - 1], T_A);
			break;
		}
	}
	assert_in_range(tries, 1, 16); /* the address came back */
	assert_int_equal(seen, 10);
	assert_int_equal(shmcfg_patcher_restore(p), 0);
	assert_int_equal(shmcfg_patcher_restore(p), -ENOENT);
	assert_int_equal(shmcfg__tls_patched, 0);
	for (int i = 0; i < 16; i++)
		shmcfg_close(hs[i]);
	shmcfg_patcher_free(p);
	shmcfg_close(h);
	shmcfg_unlink(name);
}

static void *push_pop_thread(void *p)
{
	struct tharg *a = p;
	/* the thread's number after a change of its frames (seen: a word) */
	if (shmcfg_patch_push(a->h) == 0) {
		a->seen = (int64_t)shmcfg__tls_patch_id;
		(void)shmcfg_patch_pop(a->h);
	}
	return NULL;
}

/* shmcfg__tls_patch_id: a new number at each change of the thread's frames
 * (what the Python extension caches a patched thread's reads under), never
 * one another thread had. */
static void test_patch_id(void **state)
{
	(void)state;
	const char *name = test_name("pid");
	shmcfg *h = test_create(name, NULL);
	uint64_t seen[16];
	int n = 0;
	seen[n++] = shmcfg__tls_patch_id;
	assert_int_equal(shmcfg_patch_push(h), 0);
	seen[n++] = shmcfg__tls_patch_id;
	assert_int_equal(shmcfg_patch_set_text(h, T_A, "30"), 0);
	seen[n++] = shmcfg__tls_patch_id;
	assert_int_equal(shmcfg_patch_set_text(h, T_DEBUG, "true"), 0);
	seen[n++] = shmcfg__tls_patch_id;
	assert_int_equal(shmcfg_patch_set_text(h, T_SAFE, "true"), SHMCFG_E_CONFLICT);
	seen[n++] = shmcfg__tls_patch_id; /* refused: the frame is as before, its number not */
	assert_int_equal(shmcfg_patch_pop(h), 0);
	seen[n++] = shmcfg__tls_patch_id;
	shmcfg_patcher *p;
	assert_int_equal(shmcfg_patcher_new(h, &p), 0);
	assert_int_equal(shmcfg_patcher_set(p, T_A, &(shmcfg_value){.type = SHMCFG_INT, .u.i = 42}), 0);
	assert_int_equal(shmcfg__tls_patch_id, seen[n - 1]); /* a patcher made: no frame yet */
	assert_int_equal(shmcfg_patcher_apply(p), 0);
	seen[n++] = shmcfg__tls_patch_id;
	assert_int_equal(shmcfg_patcher_restore(p), 0);
	seen[n++] = shmcfg__tls_patch_id;
	shmcfg_patcher_free(p);
	assert_int_equal(shmcfg_patch_push(h), 0);
	seen[n++] = shmcfg__tls_patch_id;
	struct tharg a = {h, 0, NULL};
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, push_pop_thread, &a), 0);
	pthread_join(th, NULL);
	seen[n++] = (uint64_t)a.seen;
	shmcfg_close(h); /* the frame left open goes with the handle */
	seen[n++] = shmcfg__tls_patch_id;
	assert_int_equal(shmcfg__tls_patched, 0);
	for (int i = 1; i < n; i++) {
		assert_true(seen[i] != 0);
		for (int j = 0; j < i; j++)
			assert_true(seen[i] != seen[j]);
	}
	shmcfg_unlink(name);
}

/* ------------------------------------------------------------------ */

static void count_warning(const char *m, void *ud)
{
	(void)m;
	++*(int *)ud;
}

static void test_is_default_dump_load(void **state)
{
	(void)state;
	const char *n1 = test_name("dump1"), *n2 = test_name("dump2");
	/* the seed's rule: an env value other than the default is not default;
	 * one equal to the default is */
	char *env5[] = {"T_ENVD1=5", NULL};
	shmcfg *e5 = test_create(n1, &(shmcfg_create_opts){.envp = env5});
	assert_int_equal(shmcfg_is_default(e5, T_ENV_D), 0);
	shmcfg_close(e5);
	char *env[] = {"T_ENVD1=1", NULL};
	shmcfg *a = test_create(n1, &(shmcfg_create_opts){.envp = env});
	assert_int_equal(shmcfg_is_default(a, T_ENV_D), 1);
	assert_int_equal(shmcfg_is_default(a, T_B), 1);
	/* a user value is not default even when equal to it, except for
	 * mutable types (list, set) */
	assert_int_equal(set_and_commit(a, T_B, "0", NULL), 0);
	assert_int_equal(shmcfg_is_default(a, T_B), 0);
	assert_int_equal(set_and_commit(a, T_ITEMS, "x,y", NULL), 0);
	assert_int_equal(shmcfg_is_default(a, T_ITEMS), 1);
	assert_int_equal(set_and_commit(a, T_ITEMS, "y", NULL), 0);
	assert_int_equal(shmcfg_is_default(a, T_ITEMS), 0);
	shmcfg_txn *rt;
	assert_int_equal(shmcfg_txn_begin(a, &rt), 0);
	assert_int_equal(shmcfg_txn_reset(rt, T_B), 0);
	assert_int_equal(shmcfg_txn_reset(rt, T_ITEMS), 0);
	assert_int_equal(shmcfg_txn_commit(rt, NULL), 0);
	assert_int_equal(shmcfg_is_default(a, T_ALIAS2), 1);
	assert_int_equal(set_and_commit(a, T_ALIAS2, "5", NULL), 0);
	assert_int_equal(shmcfg_is_default(a, T_ALIAS2), 0);
	assert_int_equal(shmcfg_is_default(a, T_COUNT), SHMCFG_E_NOOPT);
	shmcfg_txn *t;
	assert_int_equal(shmcfg_txn_begin(a, &t), 0);
	assert_int_equal(shmcfg_txn_set_text(t, T_C, "h\"é\\llo"), 0);
	assert_int_equal(shmcfg_txn_set_text(t, T_RATIO, "0.1"), 0);
	assert_int_equal(shmcfg_txn_set_text(t, T_ITEMS, "[\"q\",\"p\"]"), 0);
	assert_int_equal(shmcfg_txn_set_text(t, T_OPT_INT, "-3"), 0);
	assert_int_equal(shmcfg_txn_commit(t, NULL), 0);
	char *dump;
	assert_int_equal(shmcfg_dump(a, 0, &dump), 0);
	assert_non_null(strstr(dump, "\"format\": \"shmcfg-dump/1\""));
	assert_null(strstr(dump, "t.alias_a")); /* aliases are not saved */

	/* load into a second segment: one commit, same configuration hash */
	shmcfg *b = test_create(n2, &(shmcfg_create_opts){.envp = env});
	uint64_t g0 = shmcfg_generation(b), g;
	assert_int_equal(shmcfg_load(b, dump, strlen(dump), NULL, NULL, &g), 0);
	assert_int_equal(g, g0 + 1);
	uint8_t ha[16], hb[16];
	shmcfg_config_hash(a, ha);
	shmcfg_config_hash(b, hb);
	assert_memory_equal(ha, hb, 16);
	/* loading it again changes nothing (and is no error) */
	assert_int_equal(shmcfg_load(b, dump, strlen(dump), NULL, NULL, &g), 0);
	assert_int_equal(g, g0 + 1);
	free(dump);

	/* a plain object; unknown keys are warned about, not fatal */
	int warned = 0;
	const char *plain = "{\"t.a\": 77, \"t.nope\": 1, \"t.ratio\": 1}";
	assert_int_equal(shmcfg_load(b, plain, strlen(plain), count_warning, &warned, NULL), 0);
	assert_int_equal(warned, 1);
	assert_int_equal(get_i(b, T_A), 77);
	/* one bad value: nothing is loaded */
	uint64_t before = shmcfg_generation(b);
	const char *bad[] = {"{\"t.a\": 1, \"t.b\": \"x\"}", "{\"t.a\": 2, \"t.ratio\": 9}", "{\"t.a\": null}",
			     "{\"t.a\": 3,", "[1]", "{\"t.items\": [1]}", "{\"t.a\": 1.5}"};
	int errs[] = {SHMCFG_E_TYPE, SHMCFG_E_RANGE, SHMCFG_E_NULLVAL, SHMCFG_E_PARSE, SHMCFG_E_PARSE,
		      SHMCFG_E_TYPE, SHMCFG_E_TYPE};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		int r = shmcfg_load(b, bad[i], strlen(bad[i]), NULL, NULL, NULL);
		if (r != errs[i])
			fail_msg("%s: %s (%s)", bad[i], shmcfg_errname(r), shmcfg_errdetail());
	}
	assert_int_equal(shmcfg_generation(b), before);
	assert_int_equal(get_i(b, T_A), 77);
	shmcfg_close(a);
	shmcfg_close(b);
	shmcfg_unlink(n1);
	shmcfg_unlink(n2);
}

static void test_codegen(void **state)
{
	(void)state;
	shmcfg *h = NULL;
	assert_int_equal(shmcfg_create(test_name("cg"), NULL,
				       &(shmcfg_create_opts){.flags = SHMCFG_CREATE_FORCE | SHMCFG_CREATE_NO_ENV}, &h), 0);
	char *out;
	assert_int_equal(shmcfg_codegen(h, SHMCFG_CODEGEN_PYTHON, &out), 0);
	assert_string_equal(out, ""); /* everything is default */
	free(out);
	shmcfg_txn *t;
	assert_int_equal(shmcfg_txn_begin(h, &t), 0);
	assert_int_equal(shmcfg_txn_set_text(t, opt(h, "torch.compiler.config.recompile_limit"), "16"), 0);
	assert_int_equal(shmcfg_txn_set_text(t, opt(h, "torch._dynamo.config.reorderable_logging_functions"), "b.f,a.g"), 0);
	assert_int_equal(shmcfg_txn_set_text(t, opt(h, "torch.compiler.config.job_id"), "it's"), 0);
	assert_int_equal(shmcfg_txn_set_text(t, opt(h, "torch._dynamo.config.verbose"), "true"), 0);
	assert_int_equal(shmcfg_txn_commit(t, NULL), 0);
	assert_int_equal(shmcfg_codegen(h, SHMCFG_CODEGEN_PYTHON, &out), 0);
	assert_string_equal(out, "torch.compiler.config.job_id = \"it's\"\n"
				 "torch._dynamo.config.recompile_limit = 16\n"
				 "torch._dynamo.config.verbose = True\n"
				 "torch._dynamo.config.reorderable_logging_functions = {'a.g', 'b.f'}\n");
	free(out);
	assert_int_equal(shmcfg_codegen(h, SHMCFG_CODEGEN_SHELL, &out), 0);
	assert_non_null(strstr(out, "shmctl set "));
	assert_non_null(strstr(out, "'torch.compiler.config.job_id=\"it'\\''s\"'"));
	free(out);
	assert_int_equal(shmcfg_codegen(h, SHMCFG_CODEGEN_JSON, &out), 0);
	assert_non_null(strstr(out, "\"torch._dynamo.config.recompile_limit\": 16"));
	free(out);
	assert_int_equal(shmcfg_codegen(h, 9, &out), -EINVAL);
	shmcfg_close(h);
	shmcfg_unlink(test_name("cg"));
}

/*
 * Golden config hashes, encoding v2 (doc/design.md). They change only if the
 * encoding changes, which must bump its version.
 */
static void test_golden_hash(void **state)
{
	(void)state;
	shmcfg *h = NULL;
	assert_int_equal(shmcfg_create(test_name("gold"), NULL,
				       &(shmcfg_create_opts){.flags = SHMCFG_CREATE_FORCE | SHMCFG_CREATE_NO_ENV}, &h), 0);
	uint8_t hash[16];
	char hex[33];
	shmcfg_config_hash(h, hash);
	for (int i = 0; i < 16; i++)
		snprintf(hex + 2 * i, 3, "%02x", hash[i]);
	assert_string_equal(hex, GOLDEN_DEFAULT);
	/* hash-ignored options leave it alone */
	assert_int_equal(set_and_commit(h, opt(h, "torch._dynamo.config.recompile_limit"), "99", NULL), 0);
	shmcfg_config_hash(h, hash);
	for (int i = 0; i < 16; i++)
		snprintf(hex + 2 * i, 3, "%02x", hash[i]);
	assert_string_equal(hex, GOLDEN_DEFAULT);
	assert_int_equal(set_and_commit(h, opt(h, "torch.compiler.config.cache_key_tag"), "v2", NULL), 0);
	shmcfg_config_hash(h, hash);
	for (int i = 0; i < 16; i++)
		snprintf(hex + 2 * i, 3, "%02x", hash[i]);
	assert_string_equal(hex, GOLDEN_TAGGED);
	shmcfg_close(h);
	shmcfg_unlink(test_name("gold"));
}

/* The bytes of one option's record (the config hash's canonical encoding,
 * doc/design.md), as the design spells them, and the call's checks. */
static void expect_record(const char *name, const shmcfg_value *v, const void *want, size_t n)
{
	unsigned char buf[128];
	size_t needed = 0;
	assert_int_equal(shmcfg_value_record(name, v, buf, sizeof buf, &needed), 0);
	assert_int_equal(needed, n);
	assert_memory_equal(buf, want, n);
}

static void test_value_record(void **state)
{
	(void)state;
	/* "ab": u32le 2, "ab", then type and null flag */
#define REC(...) ((const unsigned char[]){2, 0, 0, 0, 'a', 'b', __VA_ARGS__})
	shmcfg_value v = {.type = SHMCFG_BOOL, .u.b = true};
	expect_record("ab", &v, REC(1, 0, 1), 9);
	v = (shmcfg_value){.type = SHMCFG_INT, .u.i = -2};
	expect_record("ab", &v, REC(2, 0, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff), 16);
	v = (shmcfg_value){.type = SHMCFG_FLOAT, .u.f = 1.5};
	expect_record("ab", &v, REC(3, 0, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f), 16);
	uint64_t nan_bits = 0xfff0000000000001ull; /* negative, signalling, a payload */
	memcpy(&v.u.f, &nan_bits, sizeof v.u.f);
	expect_record("ab", &v, REC(3, 0, 0, 0, 0, 0, 0, 0, 0xf8, 0x7f), 16);
	v = (shmcfg_value){.type = SHMCFG_STR, .u.str = {"h\xc3\xa9", 3}};
	expect_record("ab", &v, REC(4, 0, 3, 0, 0, 0, 'h', 0xc3, 0xa9), 15);
	v = (shmcfg_value){.type = SHMCFG_LIST, .is_null = true};
	expect_record("ab", &v, REC(5, 1), 8);
	const char *items[] = {"y", "", "x"};
	assert_int_equal(shmcfg_value_list(SHMCFG_SET, items, 3, &v), 0);
	expect_record("ab", &v, REC(6, 0, 3, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 'x', 1, 0, 0, 0, 'y'), 26);
	shmcfg_value_clear(&v);
	assert_int_equal(shmcfg_value_list(SHMCFG_LIST, items, 3, &v), 0);
	expect_record("ab", &v, REC(5, 0, 3, 0, 0, 0, 1, 0, 0, 0, 'y', 0, 0, 0, 0, 1, 0, 0, 0, 'x'), 26);

	/* too small: -ENOSPC, the length needed, nothing written */
	unsigned char small[25];
	memset(small, 0xaa, sizeof small);
	size_t needed = 0;
	assert_int_equal(shmcfg_value_record("ab", &v, small, sizeof small, &needed), -ENOSPC);
	assert_int_equal(needed, 26);
	for (size_t i = 0; i < sizeof small; i++)
		assert_int_equal(small[i], 0xaa);
	assert_int_equal(shmcfg_value_record("ab", &v, NULL, 0, &needed), -ENOSPC);
	assert_int_equal(needed, 26);
	shmcfg_value_clear(&v);

	/* what is not a record: -EINVAL with a detail naming it */
	struct {
		const char *name;
		shmcfg_value v;
		const char *detail;
	} bad[] = {
		{"", {.type = SHMCFG_INT}, "no option name"},
		{"a\xff", {.type = SHMCFG_INT}, "not UTF-8"},
		{"ab", {.type = 9}, "ab: unknown type"},
		{"ab", {.type = SHMCFG_STR, .u.str = {NULL, 2}}, "ab: a string at NULL"},
		{"ab", {.type = SHMCFG_STR, .u.str = {"\xc3", 1}}, "ab: a string not UTF-8"},
		{"ab", {.type = SHMCFG_STR, .u.str = {"a\0b", 3}}, "ab: a string with a NUL byte"},
		{"ab", {.type = SHMCFG_SET, .u.list = {"b\0a", 2, 4}}, "ab: a set not sorted"},
		{"ab", {.type = SHMCFG_SET, .u.list = {"a\0a", 2, 4}}, "ab: a set not sorted"},
		{"ab", {.type = SHMCFG_LIST, .u.list = {"a\0b", 3, 4}}, "ab: a list whose count"},
		{"ab", {.type = SHMCFG_LIST, .u.list = {"ab", 1, 2}}, "ab: a list item without its NUL"},
		{"ab", {.type = SHMCFG_LIST, .u.list = {NULL, 1, 2}}, "ab: list items at NULL"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		unsigned char buf[64];
		needed = 99;
		assert_int_equal(shmcfg_value_record(bad[i].name, &bad[i].v, buf, sizeof buf, &needed), -EINVAL);
		assert_int_equal(needed, 0);
		assert_non_null(strstr(shmcfg_errdetail(), bad[i].detail));
	}
	v = (shmcfg_value){.type = SHMCFG_INT};
	assert_int_equal(shmcfg_value_record(NULL, &v, NULL, 0, NULL), -EINVAL);
	assert_int_equal(shmcfg_value_record("ab", NULL, NULL, 0, NULL), -EINVAL);
	assert_int_equal(shmcfg_value_record("ab", &v, NULL, 16, NULL), -EINVAL);
	assert_non_null(strstr(shmcfg_errdetail(), "no buffer for 16 bytes"));
#undef REC
}

static int warnings;
static char last_warning[256];
static void log_cb(int level, const char *msg, void *ud)
{
	(void)ud;
	if (level == SHMCFG_LOG_WARNING) {
		warnings++;
		snprintf(last_warning, sizeof last_warning, "%s", msg);
	}
}

static void test_deprecated(void **state)
{
	(void)state;
	const char *y = "format: 1\noptions:\n  old.x:\n    type: int\n    deprecated: \"use new.x\"\n  new.x:\n    type: int\n";
	shmcfg_schema *s;
	assert_int_equal(shmcfg_schema_load_text(y, strlen(y), "d.yaml", &s), 0);
	shmcfg *h = create_from(test_name("depr"), s, NULL);
	shmcfg_schema_free(s);
	shmcfg_set_log(log_cb, NULL);
	shmcfg_opt o = opt(h, "old.x");
	assert_int_equal(warnings, 1);
	assert_string_equal(last_warning, "old.x is deprecated: use new.x");
	(void)opt(h, "old.x");
	assert_int_equal(set_and_commit(h, o, "3", NULL), 0);
	assert_int_equal(warnings, 1); /* once per process */
	(void)opt(h, "new.x");
	assert_int_equal(warnings, 1);
	shmcfg_set_log(NULL, NULL);
	shmcfg_close(h);
	shmcfg_unlink(test_name("depr"));
}

/* A schema declared in C with the X-macro, and its typed accessors. */
#define APP_OPTIONS(X)                                                        \
	X(app_threads, "app.threads", INT, .def = "4", .min = "1")            \
	X(app_verbose, "app.verbose", BOOL, .doc = "chatty logs")             \
	X(app_ratio, "app.ratio", FLOAT, .def = "0.25")                       \
	X(app_name, "app.name", STR, .def = "\"demo\"")                      \
	X(app_tags, "app.tags", SET)
SHMCFG_DEFINE_OPTIONS(app, APP_OPTIONS)

static void test_typed_accessors(void **state)
{
	(void)state;
	assert_int_equal(app_nopts, 5);
	assert_int_equal(app_name_opt, 3); /* a compile-time constant */
	shmcfg_schema *s;
	assert_int_equal(app_schema(&s), 0);
	shmcfg *h = create_from(test_name("acc"), s, NULL);
	shmcfg_schema_free(s);
	assert_int_equal(app_verify(h), 0);
	assert_int_equal(app_threads(h), 4);
	assert_false(app_verbose(h));
	assert_true(app_ratio(h) == 0.25);
	shmcfg_value v;
	assert_int_equal(app_name(h, &v), 0);
	assert_string_equal(v.u.str.ptr, "demo");
	shmcfg_value_clear(&v);
	assert_int_equal(set_and_commit(h, app_threads_opt, "12", NULL), 0);
	assert_int_equal(app_threads(h), 12);
	int64_t t = 0;
	assert_int_equal(app_threads_get(h, &t), 0);
	assert_int_equal(t, 12);
	assert_int_equal(set_and_commit(h, app_threads_opt, "0", NULL), SHMCFG_E_RANGE);
	/* a segment of another schema is refused by verify */
	shmcfg *other = test_create(test_name("acc2"), NULL);
	assert_int_equal(app_verify(other), SHMCFG_E_SCHEMA);
	assert_non_null(strstr(shmcfg_errdetail(), "app.threads"));
	shmcfg_close(other);
	shmcfg_unlink(test_name("acc2"));
	shmcfg_close(h);
	shmcfg_unlink(test_name("acc"));
}

static void count_warn(const char *msg, void *ud)
{
	(void)msg;
	++*(int *)ud;
}

/*
 * A partial load skips what the set refuses without spoiling the rest: into
 * a knob transaction, an option that declares no knob is skipped (it used to
 * poison the transaction, whose commit then failed whole); a strict load's
 * detail lists the values refused after the first, in order.
 */
static void test_partial_load_into_knob_layer(void **state)
{
	(void)state;
	const char *name = test_name("kload");
	shmcfg *h = test_create(name, NULL);
	shmcfg_txn *t;
	assert_int_equal(shmcfg_txn_begin(h, &t), 0);
	assert_int_equal(shmcfg_txn_layer(t, SHMCFG_SRC_KNOB), 0);
	const char *json = "{\"t.a\": 3, \"t.knobbed\": true}";
	int warned = 0;
	assert_int_equal(shmcfg_txn_load(t, json, strlen(json), SHMCFG_LOAD_PARTIAL, count_warn, &warned), 0);
	assert_int_equal(warned, 1); /* t.a: no knob; skipped */
	uint64_t gen = 0;
	int r = shmcfg_txn_commit(t, &gen);
	if (r)
		fail_msg("commit after a partial load: %s: %s", shmcfg_errname(r), shmcfg_errdetail());
	bool b = false;
	assert_int_equal(shmcfg_get_bool(h, T_KNOBBED, &b), 0);
	assert_true(b); /* its knob layer's value */
	/* strict (not partial): refused, every refused value named in order */
	const char *bad = "{\"t.a\": \"x\", \"t.b\": \"y\", \"t.c\": 5, \"t.flag\": 2}";
	assert_int_equal(shmcfg_load(h, bad, strlen(bad), NULL, NULL, NULL), SHMCFG_E_TYPE);
	assert_non_null(strstr(shmcfg_errdetail(), "; 3 more values refused: t.b, t.c, t.flag"));
	assert_int_equal(shmcfg_generation(h), gen);
	/* the values after the first are refused as their sets would be: here
	 * for the layer, which a value's own check does not see */
	assert_int_equal(shmcfg_txn_begin(h, &t), 0);
	assert_int_equal(shmcfg_txn_layer(t, SHMCFG_SRC_KNOB), 0);
	const char *noknob = "{\"t.a\": 3, \"t.b\": 4, \"t.knobbed\": true}";
	assert_int_equal(shmcfg_txn_load(t, noknob, strlen(noknob), 0, NULL, NULL), SHMCFG_E_LAYER);
	if (!strstr(shmcfg_errdetail(), "t.a: option declares no knob; 1 more value refused: t.b"))
		fail_msg("detail: %s", shmcfg_errdetail());
	shmcfg_txn_abort(t);
	shmcfg_close(h);
	shmcfg_unlink(name);
}

/*
 * The seed's _is_default() by layer: a cluster value counts as a user
 * value does (set: not default; a list or set equal to the default: still
 * default), the knob layer as torch's justknobs do (not at all).
 */
static void test_is_default_by_layer(void **state)
{
	(void)state;
	const char *name = test_name("isdef");
	shmcfg *h = test_create(name, NULL);
	assert_int_equal(shmcfg_is_default(h, T_A), 1);
	assert_int_equal(commit_layer(h, SHMCFG_SRC_CLUSTER, T_A, "0", NULL), 0); /* equal to the default */
	assert_int_equal(shmcfg_is_default(h, T_A), 0);
	assert_int_equal(commit_layer(h, SHMCFG_SRC_CLUSTER, T_A, "12", NULL), 0);
	assert_int_equal(shmcfg_is_default(h, T_A), 0);
	char *code = NULL;
	assert_int_equal(shmcfg_codegen(h, SHMCFG_CODEGEN_JSON, &code), 0);
	if (!strstr(code, "\"t.a\": 12"))
		fail_msg("codegen leaves out the cluster's value: %s", code);
	free(code);
	assert_int_equal(commit_layer(h, SHMCFG_SRC_CLUSTER, T_A, NULL, NULL), 0);
	assert_int_equal(shmcfg_is_default(h, T_A), 1);
	assert_int_equal(commit_layer(h, SHMCFG_SRC_CLUSTER, T_ITEMS, "[\"x\",\"y\"]", NULL), 0);
	assert_int_equal(shmcfg_is_default(h, T_ITEMS), 1);
	assert_int_equal(commit_layer(h, SHMCFG_SRC_CLUSTER, T_ITEMS, "[\"z\"]", NULL), 0);
	assert_int_equal(shmcfg_is_default(h, T_ITEMS), 0);
	assert_int_equal(commit_layer(h, SHMCFG_SRC_KNOB, T_KNOBBED, "true", NULL), 0);
	assert_int_equal(shmcfg_is_default(h, T_KNOBBED), 1);
	shmcfg_close(h);
	shmcfg_unlink(name);
	/* a list whose default is None is immutable to torch: any value set,
	 * None too, makes it non-default */
	shmcfg_schema *sc;
	assert_int_equal(shmcfg_schema_new(&sc), 0);
	shmcfg_optdef d = {.name = "n.l", .type = SHMCFG_LIST, .flags = SHMCFG_F_NULLABLE};
	assert_int_equal(shmcfg_schema_add(sc, &d), 0);
	h = create_from(name, sc, NULL);
	shmcfg_schema_free(sc);
	shmcfg_opt l = opt_named(h, "n.l");
	assert_int_equal(shmcfg_is_default(h, l), 1);
	assert_int_equal(commit_layer(h, SHMCFG_SRC_USER, l, "None", NULL), 0);
	assert_int_equal(shmcfg_is_default(h, l), 0);
	shmcfg_close(h);
	shmcfg_unlink(name);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_yaml_is_default), cmocka_unit_test(test_yaml_errors),
		cmocka_unit_test(test_is_default_by_layer), cmocka_unit_test(test_partial_load_into_knob_layer),
		cmocka_unit_test(test_precedence_table), cmocka_unit_test(test_patches),
		cmocka_unit_test(test_patch_threads), cmocka_unit_test(test_patch_id),
		cmocka_unit_test(test_patch_owners), cmocka_unit_test(test_patch_frame_of_closed_handle),
		cmocka_unit_test(test_patcher_outlives_its_handle),
		cmocka_unit_test(test_is_default_dump_load),
		cmocka_unit_test(test_codegen), cmocka_unit_test(test_golden_hash),
		cmocka_unit_test(test_value_record),
		cmocka_unit_test(test_deprecated), cmocka_unit_test(test_typed_accessors),
		cmocka_unit_test(test_env_floats),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
