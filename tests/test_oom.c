/* SPDX-License-Identifier: MIT */
/*
 * Resource exhaustion (issue 11): every operation of the library, with its
 * Nth allocation, mmap, ftruncate or fallocate failing, for N = 1, 2, ...
 * until the operation makes fewer than N such calls and succeeds
 * (tests/faultsim.h; the model is SQLite's FAULTSIM loops and libuv's OOM
 * tests). Each operation is swept twice: transient (only the Nth call
 * fails) and persistent (the Nth and every later one fail).
 *
 * After each injected failure the operation must have
 *   - returned the injected error (-ENOMEM, or -ENOSPC from fallocate):
 *     never crashed, never 0 with a broken result, never another error that
 *     would blame the segment or the input;
 *   - left one clear line of detail;
 *   - left the segment sound: shmcfg_check(deep) finds 0 problems, and a
 *     failed commit or load changed neither its generation nor its config
 *     hash;
 *   - left none of its allocations outstanding, no descriptor and no
 *     mapping open, and (a failed create) nothing in /dev/shm, neither the
 *     segment nor its lock object.
 * An operation that succeeds in spite of a failure (a fallback) must give
 * the same result as an undisturbed one.
 *
 * Besides the operations of issue 11 (create, attach, commit, snapshot,
 * load, dump, codegen, patches, schema files) the sweep covers the deep
 * check and shmcfg_changes' slot comparison, which had the same kind of bug,
 * and (issue 12) the first use of every option and a first commit on a
 * handle that has used none: the schema is copied and validated then; and
 * the calls of 0.4: the history (shmcfg_history_range, _get, _free),
 * shmcfg_snapshot_at, shmcfg_rollback, shmcfg_resolve and shmcfg_short_name;
 * and of 0.7, the schema file writer (shmcfg_schema_write_yaml) and a
 * segment's schema declared again (shmcfg_schema_of); and the cluster apply
 * (shmcfg_cluster_apply_*), whose failed allocation must fail the apply,
 * never become a key's verdict.
 *
 * Not covered: libyaml allocates with malloc(3) directly, so
 * shmcfg_schema_load_text's parse itself cannot be failed (what the library
 * does with the parsed document can). jansson's allocations go through the
 * seam (json_set_alloc_funcs), its parser as one call that fails whole
 * (lib/internal.h says why).
 */
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <sys/stat.h>

#include "common.h"
#include "faultsim.h"

/* ------------------------------------------------------------------ */
/* Resources of the process                                           */
/* ------------------------------------------------------------------ */

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	assert_non_null(d);
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n - 1; /* the directory's own descriptor */
}

/* Mappings of shmcfg objects. */
static int count_maps(void)
{
	FILE *f = fopen("/proc/self/maps", "re");
	assert_non_null(f);
	char line[4096];
	int n = 0;
	while (fgets(line, sizeof line, f))
		n += strstr(line, "/dev/shm/shmcfg") != NULL;
	fclose(f);
	return n;
}

static bool shm_exists(const char *prefix, const char *name)
{
	char path[300];
	struct stat st;
	snprintf(path, sizeof path, "/dev/shm/%s%s", prefix, name);
	return lstat(path, &st) == 0;
}

/* ------------------------------------------------------------------ */
/* Operations                                                         */
/* ------------------------------------------------------------------ */

struct ctx {
	char name[64];
	shmcfg *h;           /* the segment the operation works on, if any */
	shmcfg *made;        /* a handle the operation makes (create, attach) */
	shmcfg_schema *schema;
	char *text;          /* input prepared by the setup (a dump) */
	char *out;           /* output of the operation */
	char *expect;        /* what an undisturbed run outputs */
	const char *bad;     /* a wrong result seen by the operation */
	char detail[600];    /* the failure's detail, kept across a clean-up call */
	int count;           /* a count returned by the operation */
	int expect_count;    /* ... by an undisturbed run */
	uint64_t from, to;   /* generations compared */
	shmcfg_snapshot *snap; /* a snapshot the setup holds */
	char got[1024];      /* what the operation found, as text */
	char want[1024];     /* ... and what an undisturbed run finds */
};

struct op {
	const char *name;
	void (*setup)(struct ctx *c);          /* not armed */
	int (*run)(struct ctx *c);             /* armed */
	void (*verify)(struct ctx *c);         /* not armed: after a success */
	bool keeps_config;                     /* a failure changes no generation or hash */
	bool creates;                          /* a failure leaves nothing in /dev/shm */
	bool no_alloc;                         /* allocates nothing: the sweep checks that */
};

static const char *const env_custom[] = {"T_ENVD1=7", "T_ENVF=1", "UNRELATED=x", NULL};
static const char *const env_default[] = {"TORCH_COMPILE_JOB_ID=job-7", "TORCHDYNAMO_VERBOSE=1", NULL};

/* Free a result of the library as any application does, with free(3): the
 * seam's table must be told (shmcfg__faultsim_forget). */
static void app_free(void *p)
{
	shmcfg__faultsim_forget(p);
	free(p);
}

static shmcfg_opt opt(const shmcfg *h, const char *name)
{
	shmcfg_opt o;
	assert_int_equal(shmcfg_lookup(h, name, &o), 0);
	return o;
}

/* The value of an option as text (not armed). */
static char *text_of(const shmcfg *h, const char *name)
{
	shmcfg_value v;
	char *t;
	assert_int_equal(shmcfg_get(h, opt(h, name), &v), 0);
	assert_int_equal(shmcfg_value_format(&v, &t), 0);
	shmcfg_value_clear(&v);
	return t;
}

static void expect_text(const shmcfg *h, const char *name, const char *want)
{
	char *t = text_of(h, name);
	if (strcmp(t, want))
		fail_msg("%s is %s, not %s", name, t, want);
	app_free(t);
}

static void expect_sound(const shmcfg *h)
{
	assert_int_equal(shmcfg_check(h, true, NULL, NULL), 0);
}

static shmcfg *make_segment(const char *name)
{
	shmcfg_create_opts o = {.flags = SHMCFG_CREATE_FORCE | SHMCFG_CREATE_NO_ENV};
	return test_create(name, &o);
}

/* A commit of the changes below, with strings, lists and a set; the values
 * differ with `k`, so that two of them make two configurations. */
static int commit_changes(shmcfg *h, int k)
{
	shmcfg_txn *t;
	int r = shmcfg_txn_begin(h, &t);
	if (r)
		return r;
	char c[32], items[128];
	snprintf(c, sizeof c, "value %d", k);
	/* more items than jansson's first array holds (8): making its JSON grows it */
	snprintf(items, sizeof items, "[\"p%d\", \"q\", \"r\", \"s\", \"t\", \"u\", \"v\", \"w\", \"x\", \"y\"]", k);
	const char *tags[] = {"z", k % 2 ? "y" : "w", "z", "a"};
	shmcfg_value set;
	/* a refused change poisons the transaction: go on, the commit fails */
	int first = shmcfg_txn_set_int(t, T_A, 40 + k);
	int s = shmcfg_txn_set_str(t, T_C, c);
	first = first ? first : s;
	s = shmcfg_txn_set_text(t, T_ITEMS, items);
	first = first ? first : s;
	s = shmcfg_value_list(SHMCFG_SET, tags, 4, &set);
	if (!s) {
		s = shmcfg_txn_set(t, T_TAGS, &set);
		shmcfg_value_clear(&set);
		first = first ? first : s;
	} else {
		first = first ? first : s;
		shmcfg_txn_abort(t);
		return s;
	}
	s = shmcfg_txn_set_text(t, T_MODE, k % 2 ? "slow" : "fast");
	first = first ? first : s;
	s = shmcfg_txn_set_float(t, T_RATIO, 0.125 * (k % 8));
	first = first ? first : s;
	s = shmcfg_txn_set_text(t, T_OPT_INT, k % 2 ? "none" : "5");
	first = first ? first : s;
	r = shmcfg_txn_commit(t, NULL);
	if (first && !r)
		fail_msg("a transaction with a refused change (%s) committed", shmcfg_errname(first));
	return r;
}

static void expect_changes(const shmcfg *h, int k)
{
	char want[64];
	snprintf(want, sizeof want, "%d", 40 + k);
	expect_text(h, "t.a", want);
	snprintf(want, sizeof want, "\"value %d\"", k);
	expect_text(h, "t.c", want);
	snprintf(want, sizeof want, "[\"p%d\",\"q\",\"r\",\"s\",\"t\",\"u\",\"v\",\"w\",\"x\",\"y\"]", k);
	expect_text(h, "t.items", want);
	expect_text(h, "t.tags", k % 2 ? "[\"a\",\"y\",\"z\"]" : "[\"a\",\"w\",\"z\"]");
	expect_text(h, "t.mode", k % 2 ? "\"slow\"" : "\"fast\"");
	expect_text(h, "t.opt_int", k % 2 ? "null" : "5");
}

/* shmcfg_create, the embedded default schema */
static int run_create_default(struct ctx *c)
{
	shmcfg_create_opts o = {.envp = (char *const *)env_default};
	return shmcfg_create(c->name, NULL, &o, &c->made);
}

static void verify_create_default(struct ctx *c)
{
	expect_sound(c->made);
	shmcfg_schema *s;
	assert_int_equal(shmcfg_schema_default(&s), 0);
	assert_int_equal(shmcfg_count(c->made), shmcfg_schema_count(s));
	shmcfg_schema_free(s);
	expect_text(c->made, "torch.compiler.config.job_id", "\"job-7\"");
}

/* shmcfg_create, a small schema of every type and attribute (common.h) */
static void setup_create_custom(struct ctx *c)
{
	c->schema = test_schema();
}

static int run_create_custom(struct ctx *c)
{
	shmcfg_create_opts o = {.envp = (char *const *)env_custom, .slots = 3};
	return shmcfg_create(c->name, c->schema, &o, &c->made);
}

static void verify_create_custom(struct ctx *c)
{
	expect_sound(c->made);
	expect_text(c->made, "t.env_d", "7");
	expect_text(c->made, "t.env_f", "true");
	expect_text(c->made, "t.items", "[\"x\",\"y\"]");
}

/* shmcfg_attach, read-write and read-only */
static void setup_segment(struct ctx *c)
{
	c->h = make_segment(c->name);
	assert_int_equal(commit_changes(c->h, 1), 0);
}

static int run_attach_rw(struct ctx *c)
{
	return shmcfg_attach(c->name, 0, NULL, &c->made);
}

static int run_attach_ro(struct ctx *c)
{
	return shmcfg_attach(c->name, SHMCFG_ATTACH_RDONLY, NULL, &c->made);
}

static void verify_attach(struct ctx *c)
{
	expect_sound(c->made);
	expect_changes(c->made, 1);
}

/* a transaction of several changes, strings and lists among them */
static int run_commit(struct ctx *c)
{
	return commit_changes(c->h, 2);
}

static void verify_commit(struct ctx *c)
{
	expect_changes(c->h, 2);
}

/* A commit of MANY_CHANGES int options in reverse order: it sorts them, and
 * its id sets, its changes and its history's cells outgrow their inline
 * storage (ids_reserve, ids_grow; txn_slot's realloc and index past
 * TXN_INLINE, 128, lib/internal.h; hist_room) */
#define MANY_OPTS 150
#define MANY_CHANGES 140

static void setup_many(struct ctx *c)
{
	shmcfg_schema *s;
	assert_int_equal(shmcfg_schema_new(&s), 0);
	for (int i = 0; i < MANY_OPTS; i++) {
		char n[16];
		snprintf(n, sizeof n, "m.x%02d", i);
		shmcfg_optdef d = {.name = n, .type = SHMCFG_INT, .doc = "m"};
		assert_int_equal(shmcfg_schema_add(s, &d), 0);
	}
	shmcfg_create_opts o = {.flags = SHMCFG_CREATE_FORCE | SHMCFG_CREATE_NO_ENV};
	assert_int_equal(shmcfg_create(c->name, s, &o, &c->h), 0);
	shmcfg_schema_free(s);
}

static int run_commit_many(struct ctx *c)
{
	shmcfg_txn *t;
	int r = shmcfg_txn_begin(c->h, &t);
	if (r)
		return r;
	for (int i = 0; i < MANY_CHANGES && !r; i++)
		r = shmcfg_txn_set_int(t, (shmcfg_opt)(MANY_OPTS - 1 - i), 100 + i);
	if (r) {
		shmcfg_txn_abort(t);
		return r;
	}
	return shmcfg_txn_commit(t, NULL);
}

static void verify_commit_many(struct ctx *c)
{
	expect_sound(c->h);
	for (int i = 0; i < MANY_CHANGES; i++)
		assert_int_equal(get_i(c->h, (shmcfg_opt)(MANY_OPTS - 1 - i)), 100 + i);
}

/* shmcfg_cluster_apply_begin, _key, _commit: a failed allocation fails the
 * apply whole (-ENOMEM), never a key's verdict, and publishes nothing */
static void cluster_verdict(void *ud, const char *key, const char *reason)
{
	struct ctx *c = ud;
	if (reason && !c->bad)
		c->bad = "a key was refused";
	(void)key;
}

static int run_cluster_apply(struct ctx *c)
{
	static const char *const kv[][2] = {{"opt/t.a", "77"},
					    {"opt/t.c", "\"from etcd\""},
					    {"opt/t.items", "[\"e\", \"f\"]"},
					    {"knob/nobody", "1"},
					    {"head", "{}"}};
	shmcfg_cluster_apply *a;
	int r = shmcfg_cluster_apply_begin(c->h, SHMCFG_CLUSTER_APPLY_ALL, &a);
	for (size_t i = 0; !r && i < sizeof kv / sizeof kv[0]; i++)
		if ((r = shmcfg_cluster_apply_key(a, kv[i][0], kv[i][1], strlen(kv[i][1]))))
			shmcfg_cluster_apply_abort(a);
	shmcfg_cluster_apply_result res;
	return r ? r : shmcfg_cluster_apply_commit(a, 5, "oom", cluster_verdict, c, &res);
}

static void verify_cluster_apply(struct ctx *c)
{
	if (c->bad)
		fail_msg("cluster apply: %s", c->bad);
	assert_int_equal(shmcfg_cluster_revision(c->h), 5);
	shmcfg_snapshot *s;
	shmcfg_value v;
	assert_int_equal(shmcfg_snapshot_acquire(c->h, &s), 0);
	assert_int_equal(shmcfg_snapshot_layer(s, opt(c->h, "t.a"), SHMCFG_SRC_CLUSTER, &v), 0);
	assert_int_equal(v.u.i, 77);
	assert_int_equal(shmcfg_snapshot_layer(s, opt(c->h, "t.items"), SHMCFG_SRC_CLUSTER, &v), 0);
	assert_int_equal(v.u.list.count, 2);
	shmcfg_value_clear(&v);
	shmcfg_snapshot_release(s);
}

/* shmcfg_snapshot_acquire, get, release: the snapshot must replace the
 * handle's view (a commit came after its last one) */
static void setup_snapshot(struct ctx *c)
{
	setup_segment(c);
	shmcfg_snapshot *s;
	assert_int_equal(shmcfg_snapshot_acquire(c->h, &s), 0);
	shmcfg_snapshot_release(s);
	assert_int_equal(commit_changes(c->h, 2), 0);
}

static void setup_snapshot_ro(struct ctx *c)
{
	setup_segment(c);
	assert_int_equal(shmcfg_attach(c->name, SHMCFG_ATTACH_RDONLY, NULL, &c->made), 0);
}

static int snapshot_of(struct ctx *c, shmcfg *h, int k)
{
	shmcfg_snapshot *s;
	int r = shmcfg_snapshot_acquire(h, &s);
	if (r)
		return r;
	shmcfg_value v;
	char want[32];
	snprintf(want, sizeof want, "value %d", k);
	if ((r = shmcfg_snapshot_get(s, T_C, &v)) == 0 &&
	    (v.u.str.len != strlen(want) || memcmp(v.u.str.ptr, want, v.u.str.len)))
		c->bad = "t.c read from the snapshot";
	snprintf(want, sizeof want, "p%d", k);
	if (!r && (r = shmcfg_snapshot_get(s, T_ITEMS, &v)) == 0 &&
	    (v.u.list.count != 10 || strcmp(shmcfg_list_next(&v, NULL), want)))
		c->bad = "t.items read from the snapshot";
	if (!r && (r = shmcfg_snapshot_get(s, T_A, &v)) == 0 && v.u.i != 40 + k)
		c->bad = "t.a read from the snapshot";
	shmcfg_snapshot_release(s);
	return r;
}

static int run_snapshot(struct ctx *c)
{
	return snapshot_of(c, c->h, 2);
}

static int run_snapshot_ro(struct ctx *c)
{
	return snapshot_of(c, c->made, 1);
}

static void verify_snapshot(struct ctx *c)
{
	if (c->bad)
		fail_msg("wrong value: %s", c->bad);
}

/* shmcfg_load of a dump (of configuration 1, over configuration 2) */
static void setup_load(struct ctx *c)
{
	setup_segment(c);
	assert_int_equal(shmcfg_dump(c->h, 0, &c->text), 0);
	assert_int_equal(commit_changes(c->h, 2), 0);
}

static int run_load(struct ctx *c)
{
	return shmcfg_load(c->h, c->text, strlen(c->text), NULL, NULL, NULL);
}

static void verify_load(struct ctx *c)
{
	expect_changes(c->h, 1);
}

/* shmcfg_dump and shmcfg_codegen: the text of an undisturbed run */
static void setup_dump(struct ctx *c)
{
	setup_segment(c);
	assert_int_equal(shmcfg_dump(c->h, 0, &c->expect), 0);
}

static int run_dump(struct ctx *c)
{
	return shmcfg_dump(c->h, 0, &c->out);
}

/* codegen runs on a handle of its own: its first snapshot makes the view */
static void setup_codegen(struct ctx *c, shmcfg_codegen_format f)
{
	setup_segment(c);
	assert_int_equal(shmcfg_codegen(c->h, f, &c->expect), 0);
	assert_int_equal(shmcfg_attach(c->name, 0, NULL, &c->made), 0);
}

static void setup_codegen_python(struct ctx *c)
{
	setup_codegen(c, SHMCFG_CODEGEN_PYTHON);
}

static void setup_codegen_shell(struct ctx *c)
{
	setup_codegen(c, SHMCFG_CODEGEN_SHELL);
}

static void setup_codegen_json(struct ctx *c)
{
	setup_codegen(c, SHMCFG_CODEGEN_JSON);
}

static int run_codegen_python(struct ctx *c)
{
	return shmcfg_codegen(c->made, SHMCFG_CODEGEN_PYTHON, &c->out);
}

static int run_codegen_shell(struct ctx *c)
{
	return shmcfg_codegen(c->made, SHMCFG_CODEGEN_SHELL, &c->out);
}

static int run_codegen_json(struct ctx *c)
{
	return shmcfg_codegen(c->made, SHMCFG_CODEGEN_JSON, &c->out);
}

static void verify_text(struct ctx *c)
{
	assert_non_null(c->out);
	assert_string_equal(c->out, c->expect);
}

/* shmcfg_patch_push, set, a patched read, pop; a caller that pushed pops
 * whatever failed */
static int run_patch(struct ctx *c)
{
	shmcfg *h = c->h;
	int r = shmcfg_patch_push(h);
	if (r)
		return r;
	shmcfg_value v = {.type = SHMCFG_STR, .u.str = {"patched", 7}};
	r = shmcfg_patch_set(h, T_C, &v);
	if (!r)
		r = shmcfg_patch_set_text(h, T_ITEMS, "[\"u\", \"v\"]");
	if (!r)
		r = shmcfg_patch_set_text(h, T_DEBUG, "true"); /* implies t.flag and t.mode */
	if (!r && (r = shmcfg_get(h, T_C, &v)) == 0) {
		if (v.u.str.len != 7 || memcmp(v.u.str.ptr, "patched", 7))
			c->bad = "t.c read under the patch";
		shmcfg_value_clear(&v);
	}
	if (!r && (r = shmcfg_get(h, T_MODE, &v)) == 0) {
		if (v.u.str.len != 4 || memcmp(v.u.str.ptr, "slow", 4))
			c->bad = "t.mode (implied) read under the patch";
		shmcfg_value_clear(&v);
	}
	if (!r && (r = shmcfg_get(h, T_ITEMS, &v)) == 0) {
		if (v.u.list.count != 2 || strcmp(shmcfg_list_next(&v, NULL), "u"))
			c->bad = "t.items read under the patch";
		shmcfg_value_clear(&v);
	}
	if (r) /* the pop, a call of its own, clears the detail */
		snprintf(c->detail, sizeof c->detail, "%s", shmcfg_errdetail());
	int p = shmcfg_patch_pop(h);
	return r ? r : p;
}

static void setup_patch(struct ctx *c)
{
	setup_segment(c);
	assert_int_equal(commit_changes(c->h, 2), 0); /* t.mode "fast": t.debug's implication shows */
}

static void verify_patch(struct ctx *c)
{
	verify_snapshot(c);
	expect_changes(c->h, 2); /* the patches are gone */
}

/* shmcfg_check, deep: running out of memory is not a problem of the
 * segment */
static int run_check(struct ctx *c)
{
	return shmcfg_check(c->h, true, NULL, NULL);
}

static void verify_check(struct ctx *c)
{
	(void)c;
}

/* The first use of every option on a handle that has used none: attach
 * copies no part of the schema, so each lookup, description and read
 * copies and validates what it uses (madvise, lib/schema/validate.c), and the
 * dump every option. */
static void setup_first_use(struct ctx *c)
{
	setup_segment(c);
	assert_int_equal(shmcfg_dump(c->h, 0, &c->expect), 0);
	assert_int_equal(shmcfg_attach(c->name, SHMCFG_ATTACH_RDONLY, NULL, &c->made), 0);
}

static int run_first_use(struct ctx *c)
{
	for (shmcfg_opt i = 0; i < T_COUNT; i++) {
		shmcfg_opt o;
		shmcfg_optinfo info;
		shmcfg_value v;
		int r = shmcfg_lookup(c->made, test_opts[i].name, &o);
		if (!r && o != i)
			c->bad = "a lookup found another option";
		if (!r)
			r = shmcfg_opt_info(c->made, i, &info);
		if (!r && strcmp(info.name, test_opts[i].name))
			c->bad = "a description has another name";
		if (!r && (r = shmcfg_get(c->made, i, &v)) == 0)
			shmcfg_value_clear(&v);
		if (r)
			return r;
	}
	return shmcfg_dump(c->made, 0, &c->out);
}

static void verify_first_use(struct ctx *c)
{
	verify_snapshot(c); /* c->bad */
	assert_non_null(c->out);
	assert_string_equal(c->out, c->expect);
}

/* A commit on a handle that has used no option: it validates every one
 * and the orders (lib/schema/validate_all.c) */
static void setup_first_commit(struct ctx *c)
{
	setup_segment(c);
	assert_int_equal(shmcfg_attach(c->name, 0, NULL, &c->made), 0);
}

static int run_first_commit(struct ctx *c)
{
	return commit_changes(c->made, 2);
}

static void verify_first_commit(struct ctx *c)
{
	expect_changes(c->made, 2);
}

/* shmcfg_changes between generations whose commit records the log no
 * longer has (it keeps 64): the slots are compared instead, the first
 * generation's kept in its slot by a snapshot */
static void setup_changes(struct ctx *c)
{
	shmcfg_create_opts o = {.flags = SHMCFG_CREATE_FORCE | SHMCFG_CREATE_NO_ENV};
	c->h = test_create(c->name, &o);
	c->from = shmcfg_generation(c->h);
	assert_int_equal(shmcfg_snapshot_acquire(c->h, &c->snap), 0);
	for (int k = 1; k <= 66; k++)
		assert_int_equal(commit_changes(c->h, k), 0);
	c->to = shmcfg_generation(c->h);
	bool changed[T_COUNT];
	c->expect_count = shmcfg_changes(c->h, c->from, c->to, changed);
	assert_true(c->expect_count > 0);
}

static int run_changes(struct ctx *c)
{
	bool changed[T_COUNT];
	int r = shmcfg_changes(c->h, c->from, c->to, changed);
	if (r < 0)
		return r;
	c->count = r;
	return 0;
}

static void verify_changes(struct ctx *c)
{
	assert_int_equal(c->count, c->expect_count);
}

/* shmcfg_schema_load_text of a small schema */
static const char yaml_schema[] =
	"format: 1\n"
	"options:\n"
	"  net.port: {type: int, default: 8080, min: 1, max: 65535, doc: \"the port\"}\n"
	"  net.host: {type: str, default: \"localhost\", env_default: [NET_HOST, HOST]}\n"
	"  net.mode: {type: str, default: fast, choices: [fast, slow, \"odd one\"]}\n"
	"  net.ratio: {type: float, default: .inf, choices: [.inf, 1.5]}\n"
	"  net.paths: {type: list, default: [/a, /b]}\n"
	"  net.tags: {type: set, default: [x, y], nullable: true}\n"
	"  net.debug:\n"
	"    type: bool\n"
	"    knob: net/debug\n"
	"    implies: {net.mode: slow, net.port: 9090}\n"
	"  net.old_port: {type: int, alias: net.port, deprecated: use net.port}\n";

static int run_schema_load(struct ctx *c)
{
	return shmcfg_schema_load_text(yaml_schema, sizeof yaml_schema - 1, "oom.yaml", &c->schema);
}

static void verify_schema_load(struct ctx *c)
{
	assert_non_null(c->schema);
	assert_int_equal(shmcfg_schema_count(c->schema), 8);
}

/* shmcfg_schema_write_yaml of that schema */
static void setup_schema_write(struct ctx *c)
{
	assert_int_equal(run_schema_load(c), 0);
	assert_int_equal(shmcfg_schema_write_yaml(c->schema, "oom\nsweep", &c->expect), 0);
}

static int run_schema_write(struct ctx *c)
{
	return shmcfg_schema_write_yaml(c->schema, "oom\nsweep", &c->out);
}

/* shmcfg_schema_of a segment of the test schema: what it gives is written
 * (unarmed) as an undisturbed run's is */
static void setup_schema_of(struct ctx *c)
{
	setup_segment(c);
	shmcfg_schema *s;
	assert_int_equal(shmcfg_schema_of(c->h, &s), 0);
	assert_int_equal(shmcfg_schema_write_yaml(s, NULL, &c->expect), 0);
	shmcfg_schema_free(s);
}

static int run_schema_of(struct ctx *c)
{
	return shmcfg_schema_of(c->h, &c->schema);
}

static void verify_schema_of(struct ctx *c)
{
	assert_non_null(c->schema);
	assert_int_equal(shmcfg_schema_write_yaml(c->schema, NULL, &c->out), 0);
	assert_string_equal(c->out, c->expect);
	app_free(c->out);
	c->out = NULL;
}

/* ------------------------------------------------------------------ */
/* The calls of 0.4: history, snapshot_at, rollback, names            */
/* ------------------------------------------------------------------ */

/* Append to c->got (a result as text, compared with an undisturbed run's). */
static void got(struct ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void got(struct ctx *c, const char *fmt, ...)
{
	size_t n = strlen(c->got);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->got + n, sizeof c->got - n, fmt, ap);
	va_end(ap);
}

/* Configuration 1 at generation 2, configuration 2 at generation 3 (the
 * history's entries of both commits; c->from = 2). */
static void setup_history(struct ctx *c)
{
	setup_segment(c);
	c->from = shmcfg_generation(c->h);
	assert_int_equal(commit_changes(c->h, 2), 0);
}

/* What shmctl log reads: shmcfg_history_range, then shmcfg_history_get of
 * every entry it names, newest first. The range has no error code: a
 * failed allocation makes it return 0 (a shorter history would be a wrong
 * answer), its detail saying why. */
static int history_of(struct ctx *c, const shmcfg *h)
{
	uint64_t oldest, rebuildable;
	uint64_t cur = shmcfg_history_range(h, &oldest, &rebuildable);
	if (!cur)
		return strcmp(shmcfg_errdetail(), "out of memory") ? SHMCFG_E_CORRUPT : -ENOMEM;
	got(c, "generations %llu to %llu, rebuildable from %llu;", (unsigned long long)oldest,
	    (unsigned long long)cur, (unsigned long long)rebuildable);
	for (uint64_t g = cur; g >= oldest && g > 0; g--) {
		shmcfg_history_entry *e;
		int r = shmcfg_history_get(h, g, &e);
		if (r)
			return r;
		got(c, " %llu: %u changes, %s, who '%s'", (unsigned long long)e->generation, e->nchanges,
		    e->values_kept ? "values" : "no values", e->who);
		for (uint32_t k = 0; e->values_kept && k < e->nchanges; k++) {
			char *t = NULL;
			if (e->changes[k].new_set && (r = shmcfg_value_format(&e->changes[k].new_value, &t)) != 0) {
				shmcfg_history_free(e);
				return r;
			}
			got(c, " %u/%d=%s", e->changes[k].opt, e->changes[k].layer, t ? t : "unset");
			app_free(t);
		}
		shmcfg_history_free(e);
	}
	return 0;
}

static void setup_history_get(struct ctx *c)
{
	setup_history(c);
	uint64_t oldest, rebuildable;
	assert_int_equal(shmcfg_history_range(c->h, &oldest, &rebuildable), shmcfg_generation(c->h));
	assert_int_equal(oldest, 1);
	assert_int_equal(rebuildable, 1);
	assert_int_equal(history_of(c, c->h), 0);
	memcpy(c->want, c->got, sizeof c->want);
	c->got[0] = 0;
}

static int run_history_get(struct ctx *c)
{
	return history_of(c, c->h);
}

static void verify_got(struct ctx *c)
{
	verify_snapshot(c); /* c->bad */
	assert_string_equal(c->got, c->want);
}

/* shmcfg_snapshot_at of generation 2 (configuration 1), rebuilt by undoing
 * generation 3, read as snapshot_of reads a current one */
static int snapshot_at_of(struct ctx *c, shmcfg *h, uint64_t gen, int k)
{
	shmcfg_snapshot *s;
	int r = shmcfg_snapshot_at(h, gen, &s);
	if (r)
		return r;
	if (shmcfg_snapshot_generation(s) != gen)
		c->bad = "the generation of the snapshot";
	shmcfg_value v;
	char want[32];
	snprintf(want, sizeof want, "value %d", k);
	if ((r = shmcfg_snapshot_get(s, T_C, &v)) == 0 &&
	    (v.u.str.len != strlen(want) || memcmp(v.u.str.ptr, want, v.u.str.len)))
		c->bad = "t.c read from the rebuilt snapshot";
	snprintf(want, sizeof want, "p%d", k);
	if (!r && (r = shmcfg_snapshot_get(s, T_ITEMS, &v)) == 0 &&
	    (v.u.list.count != 10 || strcmp(shmcfg_list_next(&v, NULL), want)))
		c->bad = "t.items read from the rebuilt snapshot";
	if (!r && (r = shmcfg_snapshot_get(s, T_A, &v)) == 0 && v.u.i != 40 + k)
		c->bad = "t.a read from the rebuilt snapshot";
	shmcfg_snapshot_release(s);
	return r;
}

static int run_snapshot_at(struct ctx *c)
{
	return snapshot_at_of(c, c->h, c->from, 1);
}

/* ... on a read-only handle that has read nothing yet */
static void setup_snapshot_at_ro(struct ctx *c)
{
	setup_history(c);
	assert_int_equal(shmcfg_attach(c->name, SHMCFG_ATTACH_RDONLY, NULL, &c->made), 0);
}

static int run_snapshot_at_ro(struct ctx *c)
{
	return snapshot_at_of(c, c->made, c->from, 1);
}

/* shmcfg_rollback to generation 2: one commit that restores configuration
 * 1's user layer */
static int run_rollback(struct ctx *c)
{
	bool published = false;
	int r = shmcfg_rollback(c->h, c->from, 0, "oom test", &c->to, &published);
	if (!r && !published)
		c->bad = "the rollback published nothing";
	return r;
}

static void verify_rollback(struct ctx *c)
{
	verify_snapshot(c); /* c->bad */
	assert_int_equal(c->to, shmcfg_generation(c->h));
	expect_changes(c->h, 1);
}

/* shmcfg_resolve of full names, suffixes, aliases, and of unknown names
 * (their "did you mean" detail), then shmcfg_short_name of every option: on
 * a handle that has used none, so the schema is copied and validated too. */
static const char *const resolve_names[] = {"t.a", "opt_int", "alias2", "t.alias_a", "items", "mdoe", "t.nosuch", "", "tags"};

static int names_of(struct ctx *c, const shmcfg *h)
{
	for (size_t i = 0; i < sizeof resolve_names / sizeof *resolve_names; i++) {
		shmcfg_opt o;
		int r = shmcfg_resolve(h, resolve_names[i], &o);
		if (r == SHMCFG_E_NOOPT)
			got(c, "'%s': %s; ", resolve_names[i], shmcfg_errdetail());
		else if (r)
			return r;
		else
			got(c, "'%s': %u; ", resolve_names[i], o);
	}
	for (shmcfg_opt i = 0; i < T_COUNT; i++) {
		const char *s = shmcfg_short_name(h, i);
		if (!s) /* the call has no error code: its detail says which */
			return strcmp(shmcfg_errdetail(), "out of memory") ? SHMCFG_E_CORRUPT : -ENOMEM;
		got(c, "%s ", s);
	}
	return 0;
}

static void setup_names(struct ctx *c)
{
	setup_segment(c);
	assert_int_equal(names_of(c, c->h), 0);
	memcpy(c->want, c->got, sizeof c->want);
	c->got[0] = 0;
	assert_int_equal(shmcfg_attach(c->name, SHMCFG_ATTACH_RDONLY, NULL, &c->made), 0);
}

static int run_names(struct ctx *c)
{
	return names_of(c, c->made);
}

/* ------------------------------------------------------------------ */
/* The sweep                                                          */
/* ------------------------------------------------------------------ */

static void ctx_free(struct ctx *c)
{
	shmcfg_snapshot_release(c->snap);
	shmcfg_close(c->made);
	shmcfg_close(c->h);
	shmcfg_schema_free(c->schema);
	app_free(c->text);
	app_free(c->out);
	app_free(c->expect);
	shmcfg_unlink(c->name);
}

static void show_block(const void *p, size_t size, uint64_t serial, void *ud)
{
	(void)ud;
	printf("#   outstanding: %p, %zu bytes, allocation #%llu\n", p, size, (unsigned long long)serial);
}

struct tally {
	unsigned long points;   /* values of N that injected a failure */
	unsigned long survived; /* ... of which the operation succeeded anyway */
	unsigned long calls;    /* calls of an undisturbed run */
};

#define SWEEP_FAIL(fmt, ...)                                                                  \
	fail_msg("%s (%s, N = %lu): " fmt, op->name, persistent ? "persistent" : "transient", n, \
		 ##__VA_ARGS__)

static void sweep(const struct op *op, bool persistent, struct tally *t)
{
	for (unsigned long n = 1;; n++) {
		if (n > 100000)
			SWEEP_FAIL("the operation never ran out of calls to fail");
		struct ctx c = {0};
		snprintf(c.name, sizeof c.name, "%s", test_name("oom"));
		int fds = count_fds(), maps = count_maps();
		if (op->setup)
			op->setup(&c);
		uint8_t hash0[16] = {0}, hash1[16];
		uint64_t gen0 = c.h ? shmcfg_config_hash(c.h, hash0) : 0;
		uint64_t mark = shmcfg__faultsim_mark();

		shmcfg__faultsim(SHMCFG_FAULTSIM_ALL, n, persistent);
		int r = op->run(&c);
		unsigned long failures = shmcfg__faultsim_failures(), calls = shmcfg__faultsim_calls();
		shmcfg__faultsim(0, 0, false);

		char detail[600];
		snprintf(detail, sizeof detail, "%s", c.detail[0] ? c.detail : shmcfg_errdetail());
		if (!failures) { /* fewer than n calls: the undisturbed run */
			if (r)
				SWEEP_FAIL("failed undisturbed: %s: %s", shmcfg_errname(r), detail);
			op->verify(&c);
			t->calls = calls;
		} else if (!r) { /* a fallback: the result must be whole */
			t->points++;
			t->survived++;
			op->verify(&c);
		} else {
			t->points++;
			if (r > 0)
				SWEEP_FAIL("returned %d, a count, not the injected error (%s)", r, detail);
			if (r != -ENOMEM && r != -ENOSPC)
				SWEEP_FAIL("returned %s (%s), not the injected error", shmcfg_errname(r), detail);
			if (!detail[0] || strchr(detail, '\n'))
				SWEEP_FAIL("detail is not one line: \"%s\"", detail);
			if (op->run == run_create_default || op->run == run_create_custom ||
			    op->run == run_attach_rw || op->run == run_attach_ro)
				if (c.made)
					SWEEP_FAIL("a failed call returned a handle");
			if ((op->run == run_schema_load || op->run == run_schema_of) && c.schema)
				SWEEP_FAIL("a failed call returned a schema");
			if (c.out)
				SWEEP_FAIL("a failed call returned text");
			if (op->creates && (shm_exists("shmcfg.", c.name) || shm_exists("shmcfg-lock.", c.name)))
				SWEEP_FAIL("a failed create left %s in /dev/shm",
					   shm_exists("shmcfg.", c.name) ? "its segment" : "its lock object");
			if (c.h) {
				int bad = shmcfg_check(c.h, true, NULL, NULL);
				if (bad)
					SWEEP_FAIL("the segment has %d problems after the failure", bad);
				uint64_t gen1 = shmcfg_config_hash(c.h, hash1);
				if (op->keeps_config && (gen1 != gen0 || memcmp(hash0, hash1, 16)))
					SWEEP_FAIL("the configuration changed: generation %llu -> %llu",
						   (unsigned long long)gen0, (unsigned long long)gen1);
			}
			size_t left = shmcfg__faultsim_outstanding(mark, NULL, NULL);
			if (left) {
				shmcfg__faultsim_outstanding(mark, show_block, NULL);
				SWEEP_FAIL("%zu allocations of the failed call are outstanding (%s)", left, detail);
			}
		}
		ctx_free(&c);
		/* whatever happened, nothing stays once every handle is closed */
		size_t left = shmcfg__faultsim_outstanding(mark, show_block, NULL);
		if (left)
			SWEEP_FAIL("%zu allocations outstanding after close", left);
		if (count_fds() != fds)
			SWEEP_FAIL("%d descriptors open, %d before", count_fds(), fds);
		if (count_maps() != maps)
			SWEEP_FAIL("%d shmcfg mappings, %d before", count_maps(), maps);
		if (shm_exists("shmcfg.", c.name) || shm_exists("shmcfg-lock.", c.name))
			SWEEP_FAIL("objects left in /dev/shm");
		if (!failures)
			return;
	}
}

static unsigned long total_points;

static void run_op(const struct op *op)
{
	struct tally tr = {0}, pe = {0};
	sweep(op, false, &tr);
	sweep(op, true, &pe);
	/* the same calls fail first in both modes: as many points each */
	assert_int_equal(tr.points, pe.points);
	if (op->no_alloc && tr.calls)
		fail_msg("%s: %lu allocating calls, none expected", op->name, tr.calls);
	assert_true(op->no_alloc || tr.calls > 0);
	total_points += tr.points + pe.points;
	printf("# %-22s %4lu calls; transient %4lu failures, %lu survived; persistent %4lu, %lu survived\n",
	       op->name, tr.calls, tr.points, tr.survived, pe.points, pe.survived);
}

static const struct op ops[] = {
	{.name = "create (default)", .run = run_create_default, .verify = verify_create_default, .creates = true},
	{.name = "create (custom)", .setup = setup_create_custom, .run = run_create_custom, .verify = verify_create_custom, .creates = true},
	{.name = "attach (read-write)", .setup = setup_segment, .run = run_attach_rw, .verify = verify_attach, .keeps_config = true},
	{.name = "attach (read-only)", .setup = setup_segment, .run = run_attach_ro, .verify = verify_attach, .keeps_config = true},
	{.name = "commit", .setup = setup_segment, .run = run_commit, .verify = verify_commit, .keeps_config = true},
	/* a pinned snapshot of a new generation: the view is the handle's */
	{.name = "snapshot", .setup = setup_snapshot, .run = run_snapshot, .verify = verify_snapshot, .keeps_config = true, .no_alloc = true},
	{.name = "snapshot (read-only)", .setup = setup_snapshot_ro, .run = run_snapshot_ro, .verify = verify_snapshot, .keeps_config = true},
	{.name = "load", .setup = setup_load, .run = run_load, .verify = verify_load, .keeps_config = true},
	{.name = "dump", .setup = setup_dump, .run = run_dump, .verify = verify_text, .keeps_config = true},
	{.name = "codegen (python)", .setup = setup_codegen_python, .run = run_codegen_python, .verify = verify_text, .keeps_config = true},
	{.name = "codegen (shell)", .setup = setup_codegen_shell, .run = run_codegen_shell, .verify = verify_text, .keeps_config = true},
	{.name = "codegen (json)", .setup = setup_codegen_json, .run = run_codegen_json, .verify = verify_text, .keeps_config = true},
	{.name = "patch", .setup = setup_patch, .run = run_patch, .verify = verify_patch, .keeps_config = true},
	{.name = "check (deep)", .setup = setup_segment, .run = run_check, .verify = verify_check, .keeps_config = true},
	{.name = "changes", .setup = setup_changes, .run = run_changes, .verify = verify_changes, .keeps_config = true},
	{.name = "schema_load_text", .run = run_schema_load, .verify = verify_schema_load},
	{.name = "first use", .setup = setup_first_use, .run = run_first_use, .verify = verify_first_use, .keeps_config = true},
	{.name = "first commit", .setup = setup_first_commit, .run = run_first_commit, .verify = verify_first_commit, .keeps_config = true},
	{.name = "history_range, _get", .setup = setup_history_get, .run = run_history_get, .verify = verify_got, .keeps_config = true},
	{.name = "snapshot_at", .setup = setup_history, .run = run_snapshot_at, .verify = verify_snapshot, .keeps_config = true},
	{.name = "snapshot_at (read-only)", .setup = setup_snapshot_at_ro, .run = run_snapshot_at_ro, .verify = verify_snapshot, .keeps_config = true},
	{.name = "rollback", .setup = setup_history, .run = run_rollback, .verify = verify_rollback, .keeps_config = true},
	{.name = "resolve, short_name", .setup = setup_names, .run = run_names, .verify = verify_got, .keeps_config = true},
	{.name = "schema_write_yaml", .setup = setup_schema_write, .run = run_schema_write, .verify = verify_text},
	{.name = "schema_of", .setup = setup_schema_of, .run = run_schema_of, .verify = verify_schema_of, .keeps_config = true},
	{.name = "cluster apply", .setup = setup_segment, .run = run_cluster_apply, .verify = verify_cluster_apply, .keeps_config = true},
	{.name = "commit (20 changes)", .setup = setup_many, .run = run_commit_many, .verify = verify_commit_many, .keeps_config = true},
};

#define OP_TEST(fn, i)                   \
	static void fn(void **state)     \
	{                                \
		(void)state;             \
		run_op(&ops[i]);         \
	}
OP_TEST(test_create_default, 0)
OP_TEST(test_create_custom, 1)
OP_TEST(test_attach_rw, 2)
OP_TEST(test_attach_ro, 3)
OP_TEST(test_commit, 4)
OP_TEST(test_snapshot, 5)
OP_TEST(test_snapshot_ro, 6)
OP_TEST(test_load, 7)
OP_TEST(test_dump, 8)
OP_TEST(test_codegen_python, 9)
OP_TEST(test_codegen_shell, 10)
OP_TEST(test_codegen_json, 11)
OP_TEST(test_patch, 12)
OP_TEST(test_schema_load_text, 15)
OP_TEST(test_check, 13)
OP_TEST(test_changes, 14)
OP_TEST(test_first_use, 16)
OP_TEST(test_first_commit, 17)
OP_TEST(test_history_get, 18)
OP_TEST(test_snapshot_at, 19)
OP_TEST(test_snapshot_at_ro, 20)
OP_TEST(test_rollback, 21)
OP_TEST(test_names, 22)
OP_TEST(test_schema_write, 23)
OP_TEST(test_schema_of, 24)
OP_TEST(test_cluster_apply, 25)
OP_TEST(test_commit_many, 26)

/* The seam itself: the Nth call fails, transient or persistent, and the
 * table counts what is allocated and freed. */
static void test_seam(void **state)
{
	(void)state;
	uint64_t mark = shmcfg__faultsim_mark();
	shmcfg_value v;
	shmcfg__faultsim(SHMCFG_FAULTSIM_ALLOC, 1, false);
	assert_int_equal(shmcfg_value_parse(SHMCFG_STR, false, "abc", &v), -ENOMEM);
	assert_int_equal(shmcfg_value_parse(SHMCFG_STR, false, "abc", &v), 0);
	assert_int_equal(shmcfg__faultsim_calls(), 2);
	assert_int_equal(shmcfg__faultsim_failures(), 1);
	assert_int_equal(shmcfg__faultsim_outstanding(mark, NULL, NULL), 1);
	shmcfg_value_clear(&v);
	assert_int_equal(shmcfg__faultsim_outstanding(mark, NULL, NULL), 0);
	shmcfg__faultsim(SHMCFG_FAULTSIM_ALLOC, 1, true);
	assert_int_equal(shmcfg_value_parse(SHMCFG_STR, false, "abc", &v), -ENOMEM);
	assert_int_equal(shmcfg_value_parse(SHMCFG_STR, false, "abc", &v), -ENOMEM);
	assert_int_equal(shmcfg__faultsim_failures(), 2);
	/* another kind: allocations pass */
	shmcfg__faultsim(SHMCFG_FAULTSIM_MMAP, 1, true);
	assert_int_equal(shmcfg_value_parse(SHMCFG_STR, false, "abc", &v), 0);
	assert_int_equal(shmcfg__faultsim_calls(), 0);
	shmcfg_value_clear(&v);
	shmcfg__faultsim(0, 0, false);
	assert_int_equal(shmcfg__faultsim_outstanding(mark, NULL, NULL), 0);
}

/* After a test that failed half-way: disarm, remove what it left. */
static int teardown(void **state)
{
	(void)state;
	shmcfg__faultsim(0, 0, false);
	shmcfg_unlink(test_name("oom"));
	return 0;
}

/* Each kind on its own, on a creation: what the caller is told, and that
 * nothing is left. The library has no ftruncate(2) call today: its count
 * stays 0. Mmap counts the segment's mapping, the schema's private one and
 * the madvise(2) calls that copy the schema's pages (validate.c). */
static void test_kinds(void **state)
{
	(void)state;
	static const struct {
		unsigned kind;
		const char *name;
		int err;
		const char *says;
	} kinds[] = {
		{SHMCFG_FAULTSIM_ALLOC, "allocation", -ENOMEM, "out of memory"},
		{SHMCFG_FAULTSIM_MMAP, "mmap", -ENOMEM, "mmap: "},
		{SHMCFG_FAULTSIM_FALLOCATE, "fallocate", -ENOSPC, "cannot allocate"},
	};
	const char *name = test_name("oom");
	shmcfg_schema *s = test_schema();
	shmcfg_create_opts o = {.flags = SHMCFG_CREATE_NO_ENV};
	for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
		shmcfg *h = NULL;
		uint64_t mark = shmcfg__faultsim_mark();
		shmcfg__faultsim(kinds[k].kind, 1, true);
		int r = shmcfg_create(name, s, &o, &h);
		shmcfg__faultsim(0, 0, false);
		if (r != kinds[k].err || !strstr(shmcfg_errdetail(), kinds[k].says))
			fail_msg("%s: %s (%s)", kinds[k].name, shmcfg_errname(r), shmcfg_errdetail());
		assert_null(h);
		assert_false(shm_exists("shmcfg.", name) || shm_exists("shmcfg-lock.", name));
		assert_int_equal(shmcfg__faultsim_outstanding(mark, show_block, NULL), 0);
		printf("# create, %s failing: %s (\"%s\")\n", kinds[k].name, shmcfg_errname(r), shmcfg_errdetail());
	}
	/* and undisturbed, the calls of each kind */
	shmcfg *h = NULL;
	unsigned long n[4];
	for (int k = 0; k < 4; k++) {
		shmcfg__faultsim(1u << k, ~0ul, false); /* counts, fails none */
		assert_int_equal(shmcfg_create(name, s, &o, &h), 0);
		n[k] = shmcfg__faultsim_calls();
		shmcfg__faultsim(0, 0, false);
		h = shmcfg_close(h);
		assert_int_equal(shmcfg_unlink(name), 0);
	}
	printf("# create: %lu allocations, %lu mmap, %lu ftruncate, %lu fallocate\n", n[0], n[1], n[2], n[3]);
	assert_true(n[0] > 0 && n[1] >= 3 && n[2] == 0 && n[3] == 1);
	shmcfg_schema_free(s);
}

static int summary(void **state)
{
	(void)state;
	printf("# %lu injected failures in all\n", total_points);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_seam, teardown),
		cmocka_unit_test_teardown(test_kinds, teardown),
		cmocka_unit_test_teardown(test_create_default, teardown),
		cmocka_unit_test_teardown(test_create_custom, teardown),
		cmocka_unit_test_teardown(test_attach_rw, teardown),
		cmocka_unit_test_teardown(test_attach_ro, teardown),
		cmocka_unit_test_teardown(test_commit, teardown),
		cmocka_unit_test_teardown(test_snapshot, teardown),
		cmocka_unit_test_teardown(test_snapshot_ro, teardown),
		cmocka_unit_test_teardown(test_load, teardown),
		cmocka_unit_test_teardown(test_first_use, teardown),
		cmocka_unit_test_teardown(test_first_commit, teardown),
		cmocka_unit_test_teardown(test_dump, teardown),
		cmocka_unit_test_teardown(test_codegen_python, teardown),
		cmocka_unit_test_teardown(test_codegen_shell, teardown),
		cmocka_unit_test_teardown(test_codegen_json, teardown),
		cmocka_unit_test_teardown(test_patch, teardown),
		cmocka_unit_test_teardown(test_check, teardown),
		cmocka_unit_test_teardown(test_changes, teardown),
		cmocka_unit_test_teardown(test_schema_load_text, teardown),
		cmocka_unit_test_teardown(test_history_get, teardown),
		cmocka_unit_test_teardown(test_snapshot_at, teardown),
		cmocka_unit_test_teardown(test_snapshot_at_ro, teardown),
		cmocka_unit_test_teardown(test_rollback, teardown),
		cmocka_unit_test_teardown(test_names, teardown),
		cmocka_unit_test_teardown(test_schema_write, teardown),
		cmocka_unit_test_teardown(test_schema_of, teardown),
		cmocka_unit_test_teardown(test_cluster_apply, teardown),
		cmocka_unit_test_teardown(test_commit_many, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, summary);
}
