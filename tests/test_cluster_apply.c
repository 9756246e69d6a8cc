/* SPDX-License-Identifier: MIT */
/*
 * The cluster apply step (shmcfg_cluster_apply_*, lib/ops/cluster_apply.c) on
 * real shared memory, without etcd: the keys shmcfg-sync would have read,
 * applied as a load (SHMCFG_CLUSTER_APPLY_ALL) or as one revision; what is
 * refused and why; the knob ownership rule; the revision tag; and that the
 * same keys again commit nothing.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "common.h"
#include "faultsim.h"

enum { A_LIMIT, A_NOTE, A_MODE, A_PCT, A_FLAG, A_ALIAS, A_K1, A_K2, A_K1N, A_COUNT };

static const shmcfg_optdef app_opts[A_COUNT] = {
	{.name = "app.limit", .type = SHMCFG_INT, .def = "10"},
	{.name = "app.note", .type = SHMCFG_STR, .def = "\"\""},
	{.name = "app.mode", .type = SHMCFG_STR, .def = "\"fast\"", .choices = "[\"fast\",\"slow\"]"},
	{.name = "app.pct", .type = SHMCFG_INT, .def = "0", .min = "0", .max = "100"},
	{.name = "app.flag", .type = SHMCFG_BOOL, .def = "false"},
	{.name = "app.alias", .type = SHMCFG_INT, .alias = "app.limit"},
	{.name = "app.k1", .type = SHMCFG_BOOL, .def = "false", .knob = "team/k1"},
	{.name = "app.k2", .type = SHMCFG_BOOL, .def = "false", .knob = "team/k2"},
	{.name = "app.k1n", .type = SHMCFG_INT, .def = "0", .knob = "team/k1"}, /* the same knob, another type */
};

struct kv {
	const char *key, *value; /* value NULL: deleted */
};

/* What the verdict callback heard. */
struct verdicts {
	int n;
	char key[32][128];
	char why[32][600];
	bool refused[32];
};

static void on_verdict(void *userdata, const char *key, const char *reason)
{
	struct verdicts *v = userdata;
	assert_true(v->n < 32);
	snprintf(v->key[v->n], sizeof v->key[v->n], "%s", key);
	snprintf(v->why[v->n], sizeof v->why[v->n], "%s", reason ? reason : "");
	v->refused[v->n++] = reason != NULL;
}

/* The reason the key was refused for, "" if taken; fails if it was not told. */
static const char *verdict_of(const struct verdicts *v, const char *key)
{
	for (int i = 0; i < v->n; i++)
		if (!strcmp(v->key[i], key))
			return v->why[i];
	fail_msg("no verdict on %s", key);
	return NULL;
}

static shmcfg *app_segment(const char *tag, uint64_t heap_bytes)
{
	shmcfg_schema *s;
	assert_int_equal(shmcfg_schema_new(&s), 0);
	for (int i = 0; i < A_COUNT; i++)
		assert_int_equal(shmcfg_schema_add(s, &app_opts[i]), 0);
	shmcfg_create_opts o = {.flags = SHMCFG_CREATE_FORCE | SHMCFG_CREATE_NO_ENV, .heap_bytes = heap_bytes};
	shmcfg *h = NULL;
	int r = shmcfg_create(test_name(tag), s, &o, &h);
	if (r)
		fail_msg("create: %s", shmcfg_errdetail());
	shmcfg_schema_free(s);
	shmcfg_set_commit_timeout(h, 10000);
	return h;
}

static int apply(shmcfg *h, unsigned flags, uint64_t rev, const char *who, const struct kv *kvs, struct verdicts *v,
		 shmcfg_cluster_apply_result *res)
{
	shmcfg_cluster_apply *a;
	memset(v, 0, sizeof *v);
	*res = (shmcfg_cluster_apply_result){0};
	int r = shmcfg_cluster_apply_begin(h, flags, &a);
	if (r)
		return r;
	for (; kvs && kvs->key; kvs++)
		if ((r = shmcfg_cluster_apply_key(a, kvs->key, kvs->value, kvs->value ? strlen(kvs->value) : 0))) {
			shmcfg_cluster_apply_abort(a);
			return r;
		}
	return shmcfg_cluster_apply_commit(a, rev, who, on_verdict, v, res);
}

/* The option's layer: its value as JSON, or NULL (not set). */
static char *layer_json(shmcfg *h, shmcfg_opt o, shmcfg_source layer)
{
	shmcfg_snapshot *s;
	shmcfg_value v;
	char *json = NULL;
	assert_int_equal(shmcfg_snapshot_acquire(h, &s), 0);
	int r = shmcfg_snapshot_layer(s, o, layer, &v);
	assert_true(r == 0 || r == 1);
	if (r == 0) {
		assert_int_equal(shmcfg_value_json(&v, &json), 0);
		shmcfg_value_clear(&v);
	}
	shmcfg_snapshot_release(s);
	return json;
}

static void assert_layer(shmcfg *h, shmcfg_opt o, shmcfg_source layer, const char *want)
{
	char *have = layer_json(h, o, layer);
	if (!want && have)
		fail_msg("%s: layer %s is %s, want unset", app_opts[o].name, shmcfg_source_name(layer), have);
	if (want && (!have || strcmp(have, want)))
		fail_msg("%s: layer %s is %s, want %s", app_opts[o].name, shmcfg_source_name(layer),
			 have ? have : "unset", want);
	free(have);
}

static int by_cluster(shmcfg *h, shmcfg_opt o, shmcfg_source layer)
{
	shmcfg_snapshot *s;
	assert_int_equal(shmcfg_snapshot_acquire(h, &s), 0);
	int r = shmcfg_snapshot_layer_by_cluster(s, o, layer);
	shmcfg_snapshot_release(s);
	return r;
}

/* A local knob value (shmctl set --knob): no origin. */
static void local_knob(shmcfg *h, shmcfg_opt o, const char *text)
{
	shmcfg_txn *t;
	assert_int_equal(shmcfg_txn_begin(h, &t), 0);
	assert_int_equal(shmcfg_txn_layer(t, SHMCFG_SRC_KNOB), 0);
	assert_int_equal(shmcfg_txn_set_text(t, o, text), 0);
	assert_int_equal(shmcfg_txn_commit(t, NULL), 0);
}

static int teardown(void **state)
{
	shmcfg_close(*state);
	shmcfg_unlink(test_name("capply"));
	return 0;
}

static int setup(void **state)
{
	*state = app_segment("capply", 0);
	return 0;
}

/* A segment whose value heap is small (and never grown by the apply). */
static int setup_heap(void **state)
{
	*state = app_segment("capply-heap", 16384);
	return 0;
}

static int teardown_heap(void **state)
{
	shmcfg_close(*state);
	shmcfg_unlink(test_name("capply-heap"));
	return 0;
}

/* A load: one generation, tagged, every key told; a second load without a
 * key resets what that key set. */
static void test_load(void **state)
{
	shmcfg *h = *state;
	struct verdicts v;
	shmcfg_cluster_apply_result res;
	uint64_t g0 = shmcfg_generation(h);
	const struct kv keys[] = {{"head", "{\"seq\": 1}"},
				  {"audit/00000000000000000001", "{}"},
				  {"opt/app.limit", "20"},
				  {"opt/app.note", "\"hi\""},
				  {"knob/team/k1", "true"},
				  {"knob/team/nobody", "1"},
				  {NULL, NULL}};
	assert_int_equal(apply(h, SHMCFG_CLUSTER_APPLY_ALL, 5, "", keys, &v, &res), 0);
	assert_true(res.published);
	assert_int_equal(res.generation, g0 + 1);
	assert_int_equal(shmcfg_generation(h), g0 + 1);
	assert_int_equal(res.revision, 5);
	assert_int_equal(shmcfg_cluster_revision(h), 5);
	assert_int_equal(res.nchanged, 3); /* limit, note, k1 (k1n: "true" is no int) */
	assert_int_equal(res.nrefused, 1);
	assert_layer(h, A_LIMIT, SHMCFG_SRC_CLUSTER, "20");
	assert_layer(h, A_NOTE, SHMCFG_SRC_CLUSTER, "\"hi\"");
	assert_layer(h, A_K1, SHMCFG_SRC_KNOB, "true");
	assert_int_equal(by_cluster(h, A_K1, SHMCFG_SRC_KNOB), 1);
	assert_int_equal(get_i(h, A_LIMIT), 20);
	/* only the value keys are told of: head and audit/ are not */
	assert_int_equal(v.n, 4);
	assert_string_equal(verdict_of(&v, "opt/app.limit"), "");
	assert_string_equal(verdict_of(&v, "opt/app.note"), "");
	assert_string_equal(verdict_of(&v, "knob/team/nobody"), "");
	assert_non_null(strstr(verdict_of(&v, "knob/team/k1"), "app.k1n")); /* not an int */

	/* a load without opt/app.note: its cluster value goes */
	const struct kv keys2[] = {{"opt/app.limit", "20"}, {"knob/team/k1", "true"}, {NULL, NULL}};
	assert_int_equal(apply(h, SHMCFG_CLUSTER_APPLY_ALL, 6, "", keys2, &v, &res), 0);
	assert_true(res.published);
	assert_int_equal(res.nchanged, 1);
	assert_layer(h, A_NOTE, SHMCFG_SRC_CLUSTER, NULL);
	assert_layer(h, A_LIMIT, SHMCFG_SRC_CLUSTER, "20");
}

/* One revision: only its keys; tagged with its revision and who; a deleted
 * key resets its option's cluster layer. */
static void test_revision(void **state)
{
	shmcfg *h = *state;
	struct verdicts v;
	shmcfg_cluster_apply_result res;
	const struct kv load[] = {{"opt/app.limit", "20"}, {"opt/app.note", "\"hi\""}, {NULL, NULL}};
	assert_int_equal(apply(h, SHMCFG_CLUSTER_APPLY_ALL, 5, "", load, &v, &res), 0);

	const struct kv rev7[] = {{"opt/app.limit", "30"}, {NULL, NULL}};
	assert_int_equal(apply(h, 0, 7, "alice@hostA", rev7, &v, &res), 0);
	assert_true(res.published);
	assert_int_equal(res.nchanged, 1);
	assert_int_equal(get_i(h, A_LIMIT), 30);
	assert_layer(h, A_NOTE, SHMCFG_SRC_CLUSTER, "\"hi\""); /* not in the revision: stays */
	shmcfg_commit c;
	assert_int_equal(shmcfg_commit_info(h, res.generation, &c), 0);
	assert_int_equal(c.cluster_rev, 7);
	assert_string_equal(c.who, "alice@hostA");
	assert_int_equal(shmcfg_cluster_revision(h), 7);

	const struct kv rev8[] = {{"opt/app.limit", NULL}, {NULL, NULL}};
	assert_int_equal(apply(h, 0, 8, NULL, rev8, &v, &res), 0);
	assert_true(res.published);
	assert_int_equal(res.nchanged, 1);
	assert_layer(h, A_LIMIT, SHMCFG_SRC_CLUSTER, NULL);
	assert_int_equal(get_i(h, A_LIMIT), 10);
	assert_string_equal(verdict_of(&v, "opt/app.limit"), "");
	assert_layer(h, A_NOTE, SHMCFG_SRC_CLUSTER, "\"hi\"");
	assert_int_equal(shmcfg_cluster_revision(h), 8);
}

/* The knob layer is shared: the cluster's knob values go with their key,
 * a local one stays, in a load and in a revision. */
static void test_knob_ownership(void **state)
{
	shmcfg *h = *state;
	struct verdicts v;
	shmcfg_cluster_apply_result res;
	local_knob(h, A_K2, "true");
	assert_int_equal(by_cluster(h, A_K2, SHMCFG_SRC_KNOB), 0);
	const struct kv load[] = {{"knob/team/k1", "true"}, {NULL, NULL}};
	assert_int_equal(apply(h, SHMCFG_CLUSTER_APPLY_ALL, 3, "", load, &v, &res), 0);
	assert_layer(h, A_K1, SHMCFG_SRC_KNOB, "true");
	assert_layer(h, A_K2, SHMCFG_SRC_KNOB, "true"); /* no knob/team/k2: the local value stays */
	assert_int_equal(by_cluster(h, A_K1, SHMCFG_SRC_KNOB), 1);

	/* knob/team/k1 deleted: the cluster's value goes */
	const struct kv del1[] = {{"knob/team/k1", NULL}, {NULL, NULL}};
	assert_int_equal(apply(h, 0, 4, "", del1, &v, &res), 0);
	assert_layer(h, A_K1, SHMCFG_SRC_KNOB, NULL);
	/* knob/team/k2 deleted: the local value stays */
	const struct kv del2[] = {{"knob/team/k2", NULL}, {NULL, NULL}};
	assert_int_equal(apply(h, 0, 5, "", del2, &v, &res), 0);
	assert_true(res.published);
	assert_int_equal(res.nchanged, 0);
	assert_layer(h, A_K2, SHMCFG_SRC_KNOB, "true");

	/* the cluster takes k2 over with a key; a load without it resets it */
	const struct kv put2[] = {{"knob/team/k2", "false"}, {NULL, NULL}};
	assert_int_equal(apply(h, 0, 6, "", put2, &v, &res), 0);
	assert_layer(h, A_K2, SHMCFG_SRC_KNOB, "false");
	assert_int_equal(by_cluster(h, A_K2, SHMCFG_SRC_KNOB), 1);
	assert_int_equal(apply(h, SHMCFG_CLUSTER_APPLY_ALL, 7, "", NULL, &v, &res), 0);
	assert_layer(h, A_K2, SHMCFG_SRC_KNOB, NULL);
	/* and a local knob value of a knob with a key is replaced by the key's */
	local_knob(h, A_K1, "false");
	const struct kv put1[] = {{"knob/team/k1", "true"}, {NULL, NULL}};
	assert_int_equal(apply(h, SHMCFG_CLUSTER_APPLY_ALL, 8, "", put1, &v, &res), 0);
	assert_layer(h, A_K1, SHMCFG_SRC_KNOB, "true");
	assert_int_equal(by_cluster(h, A_K1, SHMCFG_SRC_KNOB), 1);
}

/* What this host cannot take is refused with its reason, and keeps the
 * previous value; the rest goes in. */
static void test_rejections(void **state)
{
	shmcfg *h = *state;
	struct verdicts v;
	shmcfg_cluster_apply_result res;
	const struct kv before[] = {{"opt/app.limit", "20"}, {"opt/app.pct", "50"}, {NULL, NULL}};
	assert_int_equal(apply(h, SHMCFG_CLUSTER_APPLY_ALL, 9, "", before, &v, &res), 0);
	const struct kv keys[] = {{"opt/app.nosuch", "1"},   {"opt/app.alias", "5"},   {"opt/app.limit", "{bad"},
				  {"opt/app.note", "5"},     {"opt/app.pct", "500"},   {"opt/app.mode", "\"turbo\""},
				  {"opt/app.flag", "true"},  {"knob/team/k2", "\"no\""}, {NULL, NULL}};
	assert_int_equal(apply(h, SHMCFG_CLUSTER_APPLY_ALL, 10, "", keys, &v, &res), 0);
	assert_true(res.published);
	assert_int_equal(res.revision, 10);
	assert_int_equal(res.nrefused, 7);
	assert_int_equal(v.n, 8);
	assert_string_equal(verdict_of(&v, "opt/app.nosuch"), "unknown option 'app.nosuch'");
	assert_string_equal(verdict_of(&v, "opt/app.alias"), "'app.alias' is an alias; the key must name its option");
	assert_non_null(strstr(verdict_of(&v, "opt/app.limit"), "JSON"));
	assert_non_null(strstr(verdict_of(&v, "opt/app.note"), "app.note"));
	assert_non_null(strstr(verdict_of(&v, "opt/app.pct"), "500"));
	assert_non_null(strstr(verdict_of(&v, "opt/app.mode"), "turbo"));
	assert_non_null(strstr(verdict_of(&v, "knob/team/k2"), "app.k2"));
	assert_string_equal(verdict_of(&v, "opt/app.flag"), "");
	for (int i = 0; i < v.n; i++)
		assert_null(strchr(v.why[i], '\n'));
	/* refused: the previous cluster values stay (none for note, mode) */
	assert_layer(h, A_LIMIT, SHMCFG_SRC_CLUSTER, "20");
	assert_layer(h, A_PCT, SHMCFG_SRC_CLUSTER, "50");
	assert_layer(h, A_NOTE, SHMCFG_SRC_CLUSTER, NULL);
	assert_layer(h, A_MODE, SHMCFG_SRC_CLUSTER, NULL);
	assert_layer(h, A_K2, SHMCFG_SRC_KNOB, NULL);
	assert_layer(h, A_FLAG, SHMCFG_SRC_CLUSTER, "true");

	/* a revision deleting a key that named nothing: taken, nothing done */
	const struct kv del[] = {{"opt/app.nosuch", NULL}, {"opt/app.alias", NULL}, {NULL, NULL}};
	assert_int_equal(apply(h, 0, 11, "", del, &v, &res), 0);
	assert_int_equal(res.nrefused, 0);
	assert_string_equal(verdict_of(&v, "opt/app.nosuch"), "");
	assert_string_equal(verdict_of(&v, "opt/app.alias"), "");
	assert_int_equal(res.nchanged, 0);
}

/* A value the heap has no room for: the biggest is dropped and refused,
 * the commit tried again with the rest; the heap is not grown. */
static void test_heap_full(void **state)
{
	shmcfg *h = *state;
	struct verdicts v;
	shmcfg_cluster_apply_result res;
	size_t big = 100000;
	char *note = malloc(big + 3);
	assert_non_null(note);
	note[0] = '"';
	memset(note + 1, 'x', big);
	strcpy(note + 1 + big, "\"");
	char *mid = malloc(4000 + 3);
	assert_non_null(mid);
	mid[0] = '"';
	memset(mid + 1, 'y', 4000);
	strcpy(mid + 1 + 4000, "\"");
	const struct kv keys[] = {{"opt/app.note", note}, {"opt/app.mode", "\"slow\""}, {"opt/app.limit", "42"},
				  {NULL, NULL}};
	assert_int_equal(apply(h, 0, 3, "bob", keys, &v, &res), 0);
	assert_true(res.published);
	assert_int_equal(res.revision, 3);
	assert_int_equal(res.nrefused, 1);
	assert_non_null(strstr(verdict_of(&v, "opt/app.note"), "does not fit this host's value heap"));
	assert_string_equal(verdict_of(&v, "opt/app.limit"), "");
	assert_layer(h, A_LIMIT, SHMCFG_SRC_CLUSTER, "42");
	assert_layer(h, A_MODE, SHMCFG_SRC_CLUSTER, "\"slow\"");
	assert_layer(h, A_NOTE, SHMCFG_SRC_CLUSTER, NULL);
	shmcfg_info si;
	assert_int_equal(shmcfg_stat(h, &si), 0);
	assert_int_equal(si.heap_bytes, 16384);
	/* a value that fits goes in at the next revision */
	const struct kv fits[] = {{"opt/app.note", mid}, {NULL, NULL}};
	assert_int_equal(apply(h, 0, 4, "", fits, &v, &res), 0);
	assert_int_equal(res.nrefused, 0);
	assert_int_equal(res.nchanged, 1);
	free(note);
	free(mid);
}

/* The same keys again commit nothing; a new revision that changes nothing
 * still commits, so that its revision shows. */
static void test_idempotent(void **state)
{
	shmcfg *h = *state;
	struct verdicts v;
	shmcfg_cluster_apply_result res;
	const struct kv keys[] = {{"opt/app.limit", "20"}, {"knob/team/k1", "true"}, {NULL, NULL}};
	assert_int_equal(apply(h, SHMCFG_CLUSTER_APPLY_ALL, 5, "", keys, &v, &res), 0);
	uint64_t g = shmcfg_generation(h);
	assert_int_equal(apply(h, SHMCFG_CLUSTER_APPLY_ALL, 5, "", keys, &v, &res), 0);
	assert_false(res.published);
	assert_int_equal(res.nchanged, 0);
	assert_int_equal(res.generation, g);
	assert_int_equal(shmcfg_generation(h), g);
	assert_int_equal(apply(h, 0, 5, "", keys, &v, &res), 0);
	assert_false(res.published);
	assert_int_equal(shmcfg_generation(h), g);
	/* a revision with no change: one generation, tagged */
	assert_int_equal(apply(h, 0, 6, "carol", keys, &v, &res), 0);
	assert_true(res.published);
	assert_int_equal(res.nchanged, 0);
	assert_int_equal(shmcfg_generation(h), g + 1);
	assert_int_equal(shmcfg_cluster_revision(h), 6);
}

/* The revision tag: an older revision does not take the segment back,
 * unless etcd was replaced (REBASE); 0 keeps the segment's. */
static void test_revision_tag(void **state)
{
	shmcfg *h = *state;
	struct verdicts v;
	shmcfg_cluster_apply_result res;
	const struct kv k20[] = {{"opt/app.limit", "20"}, {NULL, NULL}};
	const struct kv k21[] = {{"opt/app.limit", "21"}, {NULL, NULL}};
	const struct kv k22[] = {{"opt/app.limit", "22"}, {NULL, NULL}};
	assert_int_equal(apply(h, 0, 50, "", k20, &v, &res), 0);
	assert_int_equal(shmcfg_cluster_revision(h), 50);
	/* an older revision is refused whole: its keys are not written */
	uint64_t g = shmcfg_generation(h);
	assert_int_equal(apply(h, 0, 40, "", k21, &v, &res), -ESTALE);
	assert_non_null(strstr(shmcfg_errdetail(), "cluster revision 40 is older than the revision 50"));
	assert_int_equal(res.revision, 50);
	assert_false(res.published);
	assert_int_equal(shmcfg_generation(h), g);
	assert_int_equal(shmcfg_cluster_revision(h), 50);
	assert_int_equal(get_i(h, A_LIMIT), 20);
	/* 0: the segment's revision, whatever it is when the commit is made */
	assert_int_equal(apply(h, 0, 0, "", k21, &v, &res), 0);
	assert_int_equal(res.revision, 50);
	assert_int_equal(get_i(h, A_LIMIT), 21);
	assert_int_equal(by_cluster(h, A_LIMIT, SHMCFG_SRC_CLUSTER), 1);
	assert_int_equal(shmcfg_cluster_revision(h), 50);
	assert_int_equal(apply(h, SHMCFG_CLUSTER_APPLY_REBASE, 3, "", k22, &v, &res), 0);
	assert_true(res.published);
	assert_int_equal(res.revision, 3);
	assert_int_equal(shmcfg_cluster_revision(h), 3);
}

/* Bad calls: one clear error each, and nothing changes. */
static void test_bad_calls(void **state)
{
	shmcfg *h = *state;
	shmcfg_cluster_apply *a;
	uint64_t g = shmcfg_generation(h);
	assert_int_equal(shmcfg_cluster_apply_begin(h, 0x80, &a), -EINVAL);
	assert_non_null(strstr(shmcfg_errdetail(), "unknown flags 0x80"));
	assert_int_equal(shmcfg_cluster_apply_begin(h, 0, &a), 0);
	assert_int_equal(shmcfg_cluster_apply_key(a, "opt/app.limit", "1", 1), 0);
	assert_int_equal(shmcfg_cluster_apply_key(a, "opt/app.limit", "2", 1), -EEXIST);
	assert_non_null(strstr(shmcfg_errdetail(), "'opt/app.limit' was given twice"));
	shmcfg_cluster_apply_abort(a);
	assert_int_equal(shmcfg_generation(h), g);
	shmcfg_cluster_apply_abort(NULL);

	shmcfg *ro;
	assert_int_equal(shmcfg_attach(test_name("capply"), SHMCFG_ATTACH_RDONLY, NULL, &ro), 0);
	assert_int_equal(shmcfg_cluster_apply_begin(ro, 0, &a), SHMCFG_E_READONLY);
	assert_non_null(strstr(shmcfg_errdetail(), "read-only"));
	shmcfg_close(ro);

	/* a result of a newer caller's header, longer: what this library does
	 * not know is zeroed; one shorter than this soname's: refused */
	struct {
		shmcfg_cluster_apply_result r;
		unsigned char later[8];
	} big;
	memset(&big, 0x5a, sizeof big);
	assert_int_equal(shmcfg_cluster_apply_begin(h, 0, &a), 0);
	assert_int_equal(shmcfg_cluster_apply_key(a, "opt/app.limit", "1", 1), 0);
	assert_int_equal(shmcfg_cluster_apply_commit_sized(a, 9, NULL, NULL, NULL, &big.r, sizeof big), 0);
	assert_int_equal(big.r.generation, g + 1);
	assert_int_equal(big.r.revision, 9);
	for (size_t i = 0; i < sizeof big.later; i++)
		assert_int_equal(big.later[i], 0);
	shmcfg_cluster_apply_result r2;
	assert_int_equal(shmcfg_cluster_apply_begin(h, 0, &a), 0);
	assert_int_equal(shmcfg_cluster_apply_commit_sized(a, 10, NULL, NULL, NULL, &r2, 8), -EINVAL);
	assert_non_null(strstr(shmcfg_errdetail(), "shmcfg_cluster_apply_result"));
	assert_int_equal(shmcfg_cluster_revision(h), 9); /* nothing committed */
}

/* Lengths that no value or key has are refused before any size is computed
 * from them (len + 1 wrapped to 0: malloc(0), then a copy past it). */
static void test_lengths(void **state)
{
	shmcfg *h = *state;
	shmcfg_cluster_apply *a;
	assert_int_equal(shmcfg_cluster_apply_begin(h, 0, &a), 0);
	assert_int_equal(shmcfg_cluster_apply_key(a, "opt/app.note", "\"x\"", SIZE_MAX), -EINVAL);
	assert_non_null(strstr(shmcfg_errdetail(), "opt/app.note"));
	assert_null(strchr(shmcfg_errdetail(), '\n'));
	assert_int_equal(shmcfg_cluster_apply_key(a, "opt/app.note", "\"x\"", SIZE_MAX / 2), -EINVAL);
	size_t kl = 10000;
	char *key = malloc(kl + 1);
	assert_non_null(key);
	memcpy(key, "opt/", 4);
	memset(key + 4, 'k', kl - 4);
	key[kl] = 0;
	assert_int_equal(shmcfg_cluster_apply_key(a, key, "1", 1), -EINVAL);
	assert_non_null(strstr(shmcfg_errdetail(), "more than"));
	free(key);
	/* the apply is still good: a key of a normal length goes in */
	assert_int_equal(shmcfg_cluster_apply_key(a, "opt/app.limit", "7", 1), 0);
	shmcfg_cluster_apply_result res;
	assert_int_equal(shmcfg_cluster_apply_commit(a, 2, NULL, NULL, NULL, &res), 0);
	assert_int_equal(get_i(h, A_LIMIT), 7);
}

/* Two appliers interleaved: A begun (revision 20) before B (revision 30)
 * commits, A committing last: A is refused, and neither the value nor the
 * revision goes back. */
static void test_stale_interleaved(void **state)
{
	shmcfg *h = *state;
	shmcfg_cluster_apply *a, *b;
	shmcfg_cluster_apply_result res;
	assert_int_equal(shmcfg_cluster_apply_begin(h, 0, &a), 0);
	assert_int_equal(shmcfg_cluster_apply_key(a, "opt/app.limit", "20", 2), 0);
	assert_int_equal(shmcfg_cluster_apply_begin(h, 0, &b), 0);
	assert_int_equal(shmcfg_cluster_apply_key(b, "opt/app.limit", "30", 2), 0);
	assert_int_equal(shmcfg_cluster_apply_commit(b, 30, "B", NULL, NULL, &res), 0);
	assert_int_equal(shmcfg_cluster_apply_commit(a, 20, "A", NULL, NULL, &res), -ESTALE);
	assert_int_equal(shmcfg_cluster_revision(h), 30);
	assert_int_equal(get_i(h, A_LIMIT), 30);
	/* etcd replaced: with REBASE an older revision is taken */
	assert_int_equal(shmcfg_cluster_apply_begin(h, SHMCFG_CLUSTER_APPLY_REBASE, &a), 0);
	assert_int_equal(shmcfg_cluster_apply_key(a, "opt/app.limit", "20", 2), 0);
	assert_int_equal(shmcfg_cluster_apply_commit(a, 20, "A", NULL, NULL, &res), 0);
	assert_int_equal(shmcfg_cluster_revision(h), 20);
	assert_int_equal(get_i(h, A_LIMIT), 20);
}

/*
 * A child applies the keys at rev, stopped (SHMCFG_FAULT ...:stop) between
 * its plan and its commit; then fn runs here, and the child goes on.
 * Returns the child's result (its exit status: the negated error code's
 * low byte, 0 for success).
 */
static int apply_stopped(const char *name, unsigned flags, uint64_t rev, const struct kv *kvs,
			 void (*fn)(void *), void *ud)
{
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		setenv("SHMCFG_FAULT", "cluster_apply.planned:stop", 1);
		shmcfg *h;
		shmcfg_cluster_apply *a;
		shmcfg_cluster_apply_result res;
		if (shmcfg_attach(name, 0, NULL, &h) || shmcfg_cluster_apply_begin(h, flags, &a))
			_exit(99);
		for (; kvs->key; kvs++)
			if (shmcfg_cluster_apply_key(a, kvs->key, kvs->value,
						     kvs->value ? strlen(kvs->value) : 0))
				_exit(98);
		int r = shmcfg_cluster_apply_commit(a, rev, "child", NULL, NULL, &res);
		_exit(r == -ESTALE ? 1 : r ? 2 : 0);
	}
	int st;
	assert_int_equal(waitpid(pid, &st, WUNTRACED), pid);
	assert_true(WIFSTOPPED(st));
	fn(ud);
	kill(pid, SIGCONT);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	return WEXITSTATUS(st);
}

static void commit_b30(void *ud)
{
	shmcfg_cluster_apply *b;
	shmcfg_cluster_apply_result res;
	assert_int_equal(shmcfg_cluster_apply_begin(ud, 0, &b), 0);
	assert_int_equal(shmcfg_cluster_apply_key(b, "opt/app.limit", "30", 2), 0);
	assert_int_equal(shmcfg_cluster_apply_commit(b, 30, "B", NULL, NULL, &res), 0);
}

/* The same, A stopped after its plan (it read the segment at revision 10):
 * the revision is compared under the writer lock, not before. */
static void test_stale_race(void **state)
{
	shmcfg *h = *state;
	struct verdicts v;
	shmcfg_cluster_apply_result res;
	const struct kv k10[] = {{"opt/app.limit", "10"}, {NULL, NULL}};
	assert_int_equal(apply(h, 0, 10, "", k10, &v, &res), 0);
	const struct kv k20[] = {{"opt/app.limit", "20"}, {NULL, NULL}};
	assert_int_equal(apply_stopped(test_name("capply"), 0, 20, k20, commit_b30, h), 1); /* -ESTALE */
	assert_int_equal(shmcfg_cluster_revision(h), 30);
	assert_int_equal(get_i(h, A_LIMIT), 30);
}

static void set_k2_local(void *ud)
{
	local_knob(ud, A_K2, "true");
}

/* A knob reset planned (the cluster's value, its key deleted), and a local
 * `shmctl set --knob` made before the commit: the local value stays. */
static void test_knob_race(void **state)
{
	shmcfg *h = *state;
	struct verdicts v;
	shmcfg_cluster_apply_result res;
	const struct kv put2[] = {{"knob/team/k2", "false"}, {NULL, NULL}};
	assert_int_equal(apply(h, 0, 5, "", put2, &v, &res), 0);
	assert_int_equal(by_cluster(h, A_K2, SHMCFG_SRC_KNOB), 1);
	const struct kv del2[] = {{"knob/team/k2", NULL}, {NULL, NULL}};
	assert_int_equal(apply_stopped(test_name("capply"), 0, 6, del2, set_k2_local, h), 0);
	assert_layer(h, A_K2, SHMCFG_SRC_KNOB, "true");
	assert_int_equal(by_cluster(h, A_K2, SHMCFG_SRC_KNOB), 0);
	assert_int_equal(shmcfg_cluster_revision(h), 6);
}

/* Many values, none of which fits with the others: refused in a number of
 * tries that does not grow with them (it was one try per value, each
 * building the whole transaction again: quadratic). Counted in the
 * library's allocations. */
static void test_heap_full_linear(void **state)
{
	shmcfg *h = *state;
	enum { N = 40 };
	shmcfg_schema *s;
	assert_int_equal(shmcfg_schema_new(&s), 0);
	char names[N][32];
	for (int i = 0; i < N; i++) {
		snprintf(names[i], sizeof names[i], "big.s%02d", i);
		assert_int_equal(shmcfg_schema_add(s, &(shmcfg_optdef){.name = names[i], .type = SHMCFG_STR,
								      .def = "\"\""}),
				 0);
	}
	shmcfg_create_opts o = {.flags = SHMCFG_CREATE_FORCE | SHMCFG_CREATE_NO_ENV, .heap_bytes = 65536};
	shmcfg *b;
	assert_int_equal(shmcfg_create(test_name("capply-lin"), s, &o, &b), 0);
	shmcfg_schema_free(s);
	(void)h;
	size_t vl = 6000;
	char *val = malloc(vl + 3);
	assert_non_null(val);
	val[0] = '"';
	memset(val + 1, 'z', vl);
	strcpy(val + 1 + vl, "\"");
	shmcfg_cluster_apply *a;
	assert_int_equal(shmcfg_cluster_apply_begin(b, 0, &a), 0);
	char key[64];
	for (int i = 0; i < N; i++) {
		snprintf(key, sizeof key, "opt/big.s%02d", i);
		assert_int_equal(shmcfg_cluster_apply_key(a, key, val, vl + 2), 0);
	}
	shmcfg_cluster_apply_result res;
	shmcfg__faultsim(SHMCFG_FAULTSIM_ALLOC, ULONG_MAX, false); /* count only */
	assert_int_equal(shmcfg_cluster_apply_commit(a, 2, NULL, NULL, NULL, &res), 0);
	unsigned long calls = shmcfg__faultsim_calls();
	shmcfg__faultsim(0, 0, false);
	assert_true(res.published);
	assert_true(res.nrefused > 0 && res.nrefused < N);
	assert_int_equal(res.nchanged, N - res.nrefused);
	/* one build of the transaction makes about 2 allocations a value */
	if (calls > 20 * N)
		fail_msg("%lu allocations for %d values: a try per value", calls, N);
	free(val);
	shmcfg_close(b);
	shmcfg_unlink(test_name("capply-lin"));
}

/* Reasons are one printable line, whatever bytes the key or its value
 * holds (control bytes, invalid UTF-8). */
static void test_reason_printable(void **state)
{
	shmcfg *h = *state;
	struct verdicts v;
	shmcfg_cluster_apply_result res;
	const struct kv keys[] = {{"opt/app.x\nb\x1b[31m\x07\xff", "1"},
				  {"opt/app.mode", "\"tu\\nrbo\\u001b\\u0007\""},
				  {"opt/app.note", "\"a\xff\xfe\""},
				  {"opt/app.limit", "\"\xc3\xa9\\n\""},
				  {NULL, NULL}};
	assert_int_equal(apply(h, 0, 3, "", keys, &v, &res), 0);
	assert_int_equal(res.nrefused, 4);
	for (int i = 0; i < v.n; i++) {
		assert_true(v.refused[i]);
		for (const unsigned char *p = (const unsigned char *)v.why[i]; *p; p++)
			if (*p < 0x20 || *p == 0x7f)
				fail_msg("%s: byte %#x in its reason '%s'", v.key[i], *p, v.why[i]);
		/* valid UTF-8 */
		shmcfg_value sv = {.type = SHMCFG_STR, .u.str = {v.why[i], strlen(v.why[i])}};
		char *json = NULL;
		if (shmcfg_value_json(&sv, &json))
			fail_msg("%s: its reason is not UTF-8: %s", v.key[i], shmcfg_errdetail());
		free(json);
	}
	assert_non_null(strstr(verdict_of(&v, "opt/app.x\nb\x1b[31m\x07\xff"), "\\x0a"));
}

/* An allocation that fails in the commit fails the commit (-ENOMEM): it is
 * no verdict on a key, and no revision is published without its value. */
static void test_nomem(void **state)
{
	shmcfg *h = *state;
	const struct kv keys[] = {{"opt/app.limit", "33"},
				  {"opt/app.note", "\"hello\""},
				  {"knob/team/k2", "true"},
				  {NULL, NULL}};
	for (unsigned long n = 1;; n++) {
		shmcfg_cluster_apply *a;
		struct verdicts v = {0};
		shmcfg_cluster_apply_result res;
		uint64_t rev = shmcfg_cluster_revision(h);
		assert_int_equal(shmcfg_cluster_apply_begin(h, 0, &a), 0);
		for (const struct kv *k = keys; k->key; k++)
			assert_int_equal(shmcfg_cluster_apply_key(a, k->key, k->value, strlen(k->value)), 0);
		shmcfg__faultsim(SHMCFG_FAULTSIM_ALLOC, n, false);
		int r = shmcfg_cluster_apply_commit(a, rev + 1, NULL, on_verdict, &v, &res);
		unsigned long failures = shmcfg__faultsim_failures();
		shmcfg__faultsim(0, 0, false);
		if (r) {
			assert_int_equal(r, -ENOMEM);
			assert_int_equal(shmcfg_cluster_revision(h), rev);
			continue;
		}
		/* taken whole: every key, or (the reason lost) refused but not
		 * published without it */
		for (int i = 0; i < v.n; i++)
			if (v.refused[i])
				fail_msg("allocation %lu: %s refused for '%s'", n, v.key[i], v.why[i]);
		assert_int_equal(res.nrefused, 0);
		assert_int_equal(get_i(h, A_LIMIT), 33);
		if (!failures)
			break;
		/* undo for the next round */
		const struct kv undo[] = {{"opt/app.limit", NULL},
					  {"opt/app.note", NULL},
					  {"knob/team/k2", NULL},
					  {NULL, NULL}};
		assert_int_equal(apply(h, 0, rev + 2, "", undo, &v, &res), 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_load, setup, teardown),
		cmocka_unit_test_setup_teardown(test_revision, setup, teardown),
		cmocka_unit_test_setup_teardown(test_knob_ownership, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rejections, setup, teardown),
		cmocka_unit_test_setup_teardown(test_heap_full, setup_heap, teardown_heap),
		cmocka_unit_test_setup_teardown(test_idempotent, setup, teardown),
		cmocka_unit_test_setup_teardown(test_revision_tag, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_calls, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lengths, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stale_interleaved, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stale_race, setup, teardown),
		cmocka_unit_test_setup_teardown(test_knob_race, setup, teardown),
		cmocka_unit_test_setup_teardown(test_heap_full_linear, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reason_printable, setup, teardown),
		cmocka_unit_test_setup_teardown(test_nomem, setup, teardown),
	};
	if (getenv("TEST_FILTER"))
		cmocka_set_test_filter(getenv("TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
