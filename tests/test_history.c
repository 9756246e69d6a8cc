/* SPDX-License-Identifier: MIT */
/*
 * The history (lib/commit/history.c): every commit of the last N kept in the
 * segment with its committer and each layer change's old and new value;
 * the values as of an older generation (compared with real snapshots taken
 * then); rollback as one commit; a writer killed in the middle of a record;
 * a reader of another uid; random bytes written over the history.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <pwd.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "common.h"
#include "proc.h"
#include "internal.h"
#include "history.h" /* the history's place in the segment, for the scribbler */

/* This process's name as the kernel has it (valgrind, say, changes it). */
static const char *self_comm(void)
{
	static char comm[16];
	FILE *f = fopen("/proc/self/comm", "r");
	assert_non_null(f);
	assert_non_null(fgets(comm, sizeof comm, f));
	fclose(f);
	comm[strcspn(comm, "\n")] = 0;
	return comm;
}

static shmcfg *create_hist(const char *name, uint32_t history, mode_t mode)
{
	return keep(test_create(name, &(shmcfg_create_opts){.history = history, .mode = mode}));
}

static shmcfg_history_entry *entry(const shmcfg *h, uint64_t gen)
{
	shmcfg_history_entry *e = NULL;
	int r = shmcfg_history_get(h, gen, &e);
	if (r)
		fail_msg("history of generation %" PRIu64 ": %s: %s", gen, shmcfg_strerror(r), shmcfg_errdetail());
	return e;
}

/* The change of option o on layer l in e, or NULL. */
static const shmcfg_layer_change *change_of(const shmcfg_history_entry *e, shmcfg_opt o, shmcfg_source l)
{
	for (uint32_t k = 0; k < e->nchanges; k++)
		if (e->changes[k].opt == o && e->changes[k].layer == l)
			return &e->changes[k];
	return NULL;
}

static char *json_of(const shmcfg_value *v)
{
	char *s = NULL;
	assert_int_equal(shmcfg_value_json(v, &s), 0);
	return s;
}

static void assert_value_text(const shmcfg_value *v, const char *want)
{
	char *s = json_of(v);
	if (strcmp(s, want))
		fail_msg("value %s, expected %s", s, want);
	free(s);
}

/* ------------------------------------------------------------------ */

/* More than 1,000 commits with their values, and who made them. */
static void test_thousand_commits_kept(void **state)
{
	(void)state;
	const char *name = new_name("hist-many");
	shmcfg *h = create_hist(name, 0, 0);
	uint64_t gen = 0;
	for (int i = 1; i <= 1100; i++) {
		char text[32];
		snprintf(text, sizeof text, "%d", i);
		assert_int_equal(set_and_commit(h, T_A, text, &gen), 0);
		if (i % 10 == 0)
			assert_int_equal(commit_str(h, T_C, text, &gen), 0);
	}
	uint64_t cur = shmcfg_generation(h), oldest = 0, reb = 0;
	assert_int_equal(gen, cur);
	assert_int_equal(shmcfg_history_range(h, &oldest, &reb), cur);
	assert_int_equal(oldest, cur - 999); /* the default: the last 1,000 */
	assert_int_equal(reb, cur - 1000);
	struct passwd *pw = getpwuid(getuid());
	for (uint64_t g = cur; g >= oldest; g--) {
		shmcfg_history_entry *e = entry(h, g);
		assert_int_equal(e->generation, g);
		assert_true(e->values_kept);
		assert_int_equal(e->nchanges, 1);
		assert_int_equal(e->pid, getpid());
		assert_int_equal(e->uid, getuid());
		assert_string_equal(e->process, self_comm());
		assert_string_equal(e->user, pw ? pw->pw_name : "");
		assert_string_equal(e->who, "");
		assert_true(e->time_ns > 0);
		const shmcfg_layer_change *c = &e->changes[0];
		assert_int_equal(c->layer, SHMCFG_SRC_USER);
		assert_true(c->new_set);
		if (c->opt == T_A) {
			assert_int_equal(c->new_value.type, SHMCFG_INT);
			/* generation 2 + k holds a = k + 1 + k / 10 commits of c before it */
			assert_true(c->old_set == (c->new_value.u.i > 1));
			if (c->old_set)
				assert_int_equal(c->old_value.u.i, c->new_value.u.i - 1);
		} else {
			assert_int_equal(c->opt, T_C);
			assert_int_equal(c->new_value.type, SHMCFG_STR);
			assert_int_equal(atoi(c->new_value.u.str.ptr) % 10, 0);
		}
		shmcfg_history_free(e);
	}
	shmcfg_history_entry *e = NULL;
	assert_int_equal(shmcfg_history_get(h, oldest - 1, &e), -ENOENT);
	assert_int_equal(shmcfg_history_get(h, cur + 1, &e), -ENOENT);
	assert_null(e);
	drop(h);
}

/* A small history wraps: the last N entries, and the values before the oldest. */
static void test_wraparound(void **state)
{
	(void)state;
	const char *name = new_name("hist-wrap");
	shmcfg *h = create_hist(name, 8, 0);
	uint64_t gen = 0;
	for (int i = 1; i <= 50; i++)
		assert_int_equal(commit_n(h, i, &gen), 0);
	uint64_t oldest, reb;
	assert_int_equal(shmcfg_history_range(h, &oldest, &reb), gen);
	assert_int_equal(oldest, gen - 7);
	assert_int_equal(reb, gen - 8);
	shmcfg_snapshot *s = NULL;
	assert_int_equal(shmcfg_snapshot_at(h, reb, &s), 0);
	shmcfg_value v;
	assert_int_equal(shmcfg_snapshot_get(s, T_A, &v), 0);
	assert_int_equal(v.u.i, 50 - 8);
	assert_int_equal(shmcfg_snapshot_get(s, T_C, &v), 0);
	assert_int_equal(v.u.str.len, 2);
	assert_memory_equal(v.u.str.ptr, "42", 2);
	assert_int_equal(shmcfg_snapshot_generation(s), reb);
	shmcfg_snapshot_release(s);
	s = NULL;
	assert_int_equal(shmcfg_snapshot_at(h, reb - 1, &s), -ENOENT);
	char want[128];
	snprintf(want, sizeof want, "the oldest the history can rebuild is %" PRIu64, reb);
	if (!strstr(shmcfg_errdetail(), want))
		fail_msg("detail '%s' does not name %" PRIu64, shmcfg_errdetail(), reb);
	assert_int_equal(shmcfg_snapshot_at(h, gen + 1, &s), -ENOENT);
	assert_int_equal(shmcfg_snapshot_at(h, 0, &s), -ENOENT);
	assert_null(s);
	shmcfg_history_entry *e;
	assert_int_equal(shmcfg_history_get(h, oldest - 1, &e), -ENOENT);
	assert_int_equal(shmcfg_history_range(NULL, NULL, NULL), 0);
	drop(h);
}

/* Strings, lists, sets, null, the knob layer and resets, old and new per layer. */
static void test_layers_and_types(void **state)
{
	(void)state;
	const char *name = new_name("hist-types");
	shmcfg *h = create_hist(name, 0, 0);
	uint64_t g[8];
	assert_int_equal(commit_layer(h, SHMCFG_SRC_USER, T_ITEMS, "[\"p\",\"q\",\"é\"]", &g[0]), 0);
	assert_int_equal(commit_layer(h, SHMCFG_SRC_USER, T_TAGS, "b,a", &g[1]), 0);
	assert_int_equal(commit_layer(h, SHMCFG_SRC_USER, T_OPT_INT, "none", &g[2]), 0);
	assert_int_equal(commit_layer(h, SHMCFG_SRC_USER, T_OPT_INT, "7", &g[3]), 0);
	assert_int_equal(commit_layer(h, SHMCFG_SRC_KNOB, T_KNOBBED, "true", &g[4]), 0);
	assert_int_equal(commit_layer(h, SHMCFG_SRC_USER, T_ITEMS, NULL, &g[5]), 0);
	assert_int_equal(commit_layer(h, SHMCFG_SRC_USER, T_ALIAS2, "9", &g[6]), 0);
	assert_int_equal(commit_layer(h, SHMCFG_SRC_USER, T_C, "with \"quotes\"\nand a newline", &g[7]), 0);

	shmcfg_history_entry *e = entry(h, g[0]);
	const shmcfg_layer_change *c = change_of(e, T_ITEMS, SHMCFG_SRC_USER);
	assert_non_null(c);
	assert_false(c->old_set);
	assert_true(c->new_set);
	assert_value_text(&c->new_value, "[\"p\",\"q\",\"é\"]");
	assert_int_equal(c->new_value.source, SHMCFG_SRC_USER);
	shmcfg_history_free(e);
	e = entry(h, g[1]);
	assert_value_text(&change_of(e, T_TAGS, SHMCFG_SRC_USER)->new_value, "[\"a\",\"b\"]");
	shmcfg_history_free(e);
	e = entry(h, g[2]);
	c = change_of(e, T_OPT_INT, SHMCFG_SRC_USER);
	assert_true(c->new_set && c->new_value.is_null && !c->old_set);
	shmcfg_history_free(e);
	e = entry(h, g[3]);
	c = change_of(e, T_OPT_INT, SHMCFG_SRC_USER);
	assert_true(c->old_set && c->old_value.is_null && c->new_set);
	assert_int_equal(c->new_value.u.i, 7);
	shmcfg_history_free(e);
	e = entry(h, g[4]);
	c = change_of(e, T_KNOBBED, SHMCFG_SRC_KNOB);
	assert_non_null(c);
	assert_true(c->new_set && c->new_value.u.b && !c->old_set);
	assert_null(change_of(e, T_KNOBBED, SHMCFG_SRC_USER));
	shmcfg_history_free(e);
	e = entry(h, g[5]);
	c = change_of(e, T_ITEMS, SHMCFG_SRC_USER);
	assert_true(c->old_set && !c->new_set);
	assert_value_text(&c->old_value, "[\"p\",\"q\",\"é\"]");
	shmcfg_history_free(e);
	e = entry(h, g[6]); /* an alias writes its final target */
	assert_int_equal(e->nchanges, 1);
	assert_non_null(change_of(e, T_A, SHMCFG_SRC_USER));
	shmcfg_history_free(e);
	e = entry(h, g[7]);
	assert_value_text(&change_of(e, T_C, SHMCFG_SRC_USER)->new_value, "\"with \\\"quotes\\\"\\nand a newline\"");
	shmcfg_history_free(e);
	/* generation 1 holds the environment's layers (none here) */
	e = entry(h, 1);
	assert_int_equal(e->nchanges, 0);
	assert_true(e->values_kept);
	shmcfg_history_free(e);
	/* a cluster commit's origin */
	shmcfg_txn *t;
	uint64_t gc;
	assert_int_equal(shmcfg_txn_begin(h, &t), 0);
	assert_int_equal(shmcfg_txn_layer(t, SHMCFG_SRC_CLUSTER), 0);
	assert_int_equal(shmcfg_txn_origin(t, 77, "alice@h1"), 0);
	assert_int_equal(shmcfg_txn_set_int(t, T_B, 3), 0);
	assert_int_equal(shmcfg_txn_commit(t, &gc), 0);
	e = entry(h, gc);
	assert_string_equal(e->who, "alice@h1");
	assert_int_equal(e->cluster_rev, 77);
	assert_non_null(change_of(e, T_B, SHMCFG_SRC_CLUSTER));
	shmcfg_history_free(e);
	shmcfg_history_free(NULL);
	drop(h);
}

/* A commit too big for the ring keeps its metadata only; the generations
 * before it can no longer be rebuilt, the ones after it can. */
/*
 * A transaction's changes, made in no order, are applied and recorded by
 * option and layer (the commit sorts them: by insertion up to 16, by radix
 * beyond), and the commit log's ids too.
 */
static void test_many_changes_recorded_in_order(void **state)
{
	(void)state;
	const char *name = new_name("hist-order");
	enum { N = 300 };
	shmcfg_schema *sc;
	assert_int_equal(shmcfg_schema_new(&sc), 0);
	for (unsigned i = 0; i < N; i++) {
		char nm[32], knob[32];
		snprintf(nm, sizeof nm, "ord.o%03u", i);
		snprintf(knob, sizeof knob, "ord_knob_%03u", i);
		shmcfg_optdef d = {.name = nm, .type = SHMCFG_INT, .def = "0", .knob = i % 5 ? NULL : knob};
		assert_int_equal(shmcfg_schema_add(sc, &d), 0);
	}
	shmcfg *h = keep(create_from(name, sc, NULL));
	shmcfg_schema_free(sc);
	for (unsigned n = 2; n <= N; n = n < 16 ? n + 14 : n * 3) { /* 2, 16, 48, 144 */
		shmcfg_txn *t;
		assert_int_equal(shmcfg_txn_begin(h, &t), 0);
		/* every third option from the top down, the knob of every
		 * fifth among them after its user value */
		unsigned made = 0;
		for (unsigned k = 0; k < n; k++) {
			shmcfg_opt o = (shmcfg_opt)((N - 1 - 3 * k) % N);
			assert_int_equal(shmcfg_txn_layer(t, SHMCFG_SRC_USER), 0);
			assert_int_equal(shmcfg_txn_set_int(t, o, 1000 + o + n), 0);
			made++;
			if (o % 5 == 0) {
				assert_int_equal(shmcfg_txn_layer(t, SHMCFG_SRC_KNOB), 0);
				assert_int_equal(shmcfg_txn_set_int(t, o, 2000 + o + n), 0);
				made++;
			}
		}
		uint64_t gen;
		assert_int_equal(shmcfg_txn_commit(t, &gen), 0);
		shmcfg_history_entry *e = entry(h, gen);
		assert_true(e->values_kept);
		assert_int_equal(e->nchanges, made);
		for (uint32_t k = 0; k < e->nchanges; k++) {
			const shmcfg_layer_change *c = &e->changes[k];
			if (k > 0) {
				const shmcfg_layer_change *p = &e->changes[k - 1];
				if (!(p->opt < c->opt || (p->opt == c->opt && p->layer < c->layer)))
					fail_msg("%u changes: change %u (option %u, layer %d) recorded after option %u, "
						 "layer %d", n, k, c->opt, c->layer, p->opt, p->layer);
			}
			int64_t want = (c->layer == SHMCFG_SRC_KNOB ? 2000 : 1000) + c->opt + n;
			assert_int_equal(c->new_value.u.i, want);
		}
		shmcfg_history_free(e);
		shmcfg_commit ci;
		assert_int_equal(shmcfg_commit_info(h, gen, &ci), 0);
		for (uint32_t k = 1; k < ci.nids; k++)
			if (ci.ids[k - 1] >= ci.ids[k])
				fail_msg("%u changes: the commit log's ids %u and %u out of order", n, ci.ids[k - 1],
					 ci.ids[k]);
	}
	drop(h);
}

static void test_huge_commit(void **state)
{
	(void)state;
	const char *name = new_name("hist-huge");
	shmcfg *h = create_hist(name, 16, 0); /* a ring of 4 KiB */
	uint64_t g1, g2, g3;
	assert_int_equal(set_and_commit(h, T_A, "1", &g1), 0);
	char *big = malloc(3001);
	memset(big, 'x', 3000);
	big[3000] = 0;
	assert_int_equal(commit_str(h, T_C, big, &g2), 0);
	assert_int_equal(set_and_commit(h, T_A, "2", &g3), 0);
	shmcfg_history_entry *e = entry(h, g2);
	assert_false(e->values_kept);
	assert_null(e->changes);
	assert_int_equal(e->nchanges, 1);
	assert_string_equal(e->process, self_comm());
	shmcfg_history_free(e);
	uint64_t oldest, reb;
	shmcfg_history_range(h, &oldest, &reb);
	assert_int_equal(oldest, 1);
	assert_int_equal(reb, g2);
	shmcfg_snapshot *s = NULL;
	assert_int_equal(shmcfg_snapshot_at(h, g2, &s), 0);
	shmcfg_value v;
	assert_int_equal(shmcfg_snapshot_get(s, T_C, &v), 0);
	assert_int_equal(v.u.str.len, 3000);
	assert_int_equal(shmcfg_snapshot_get(s, T_A, &v), 0);
	assert_int_equal(v.u.i, 1);
	shmcfg_snapshot_release(s);
	s = NULL;
	assert_int_equal(shmcfg_snapshot_at(h, g1, &s), -ENOENT);
	assert_null(s);
	free(big);
	drop(h);
}

/* Records larger than the index's share of the ring: the ring wraps before
 * the index does. An entry whose record was overwritten keeps its metadata
 * and says its values are gone; it never decodes another record's bytes. */
static void test_ring_wraps_first(void **state)
{
	(void)state;
	const char *name = new_name("hist-ringwrap");
	shmcfg *h = create_hist(name, 16, 0); /* 16 entries, a ring of 4 KiB */
	char text[701]; /* a record (old and new value) of some 1.4 KiB */
	uint64_t gen = 0, first = 0;
	for (int i = 0; i < 10; i++) {
		memset(text, 'a' + i, 700);
		text[700] = 0;
		assert_int_equal(commit_str(h, T_C, text, &gen), 0);
		if (!first)
			first = gen;
	}
	int kept = 0, lost = 0;
	for (uint64_t g = gen; g >= first; g--) {
		shmcfg_history_entry *e = entry(h, g);
		assert_int_equal(e->nchanges, 1);
		assert_string_equal(e->process, self_comm());
		if (e->values_kept) {
			kept++;
			const shmcfg_layer_change *c = change_of(e, T_C, SHMCFG_SRC_USER);
			assert_non_null(c);
			assert_int_equal(c->new_value.u.str.len, 700);
			/* the record of this generation, not another's */
			assert_int_equal(c->new_value.u.str.ptr[0], 'a' + (int)(g - first));
			assert_int_equal(c->new_value.u.str.ptr[699], 'a' + (int)(g - first));
		} else {
			lost++;
			assert_null(e->changes);
			assert_string_equal(e->user, ""); /* it travelled with the record */
		}
		shmcfg_history_free(e);
	}
	assert_true(kept >= 2 && lost >= 5);
	uint64_t oldest, reb;
	shmcfg_history_range(h, &oldest, &reb);
	assert_true(reb > first && reb < gen);
	shmcfg_snapshot *s = NULL;
	assert_int_equal(shmcfg_snapshot_at(h, reb, &s), 0);
	shmcfg_snapshot_release(s);
	s = NULL;
	assert_int_equal(shmcfg_snapshot_at(h, reb - 1, &s), -ENOENT);
	drop(h);
}

/* ------------------------------------------------------------------ */

/* What a real snapshot showed of a generation: every option's value and
 * stored layers as JSON, and the config hash. */
#define NSTEPS 80
struct seen {
	uint64_t gen;
	uint8_t hash[16];
	char *text[T_COUNT][6];
};

static char *layer_text(const shmcfg_snapshot *s, shmcfg_opt o, int l)
{
	shmcfg_value v;
	int r = l == 5 ? shmcfg_snapshot_get(s, o, &v) : shmcfg_snapshot_layer(s, o, SHMCFG_SRC_KNOB + l, &v);
	if (r == 1)
		return strdup("unset");
	assert_int_equal(r, 0);
	char *j = json_of(&v), *out;
	assert_true(asprintf(&out, "%s/%d", j, v.source) > 0);
	free(j);
	return out;
}

static void see(const shmcfg_snapshot *s, struct seen *w)
{
	w->gen = shmcfg_snapshot_generation(s);
	shmcfg_snapshot_hash(s, w->hash);
	for (int o = 0; o < T_COUNT; o++)
		for (int l = 0; l < 6; l++)
			w->text[o][l] = layer_text(s, o, l);
}

static void seen_free(struct seen *w)
{
	for (int o = 0; o < T_COUNT; o++)
		for (int l = 0; l < 6; l++)
			free(w->text[o][l]);
}

/* One random change of a random option and layer. */
static int random_commit(shmcfg *h, unsigned *seed, uint64_t *gen)
{
	static const struct {
		shmcfg_opt o;
		const char *vals[4];
	} pick[] = {
		{T_A, {"1", "2", "-3", NULL}},
		{T_C, {"x", "", "longer text é", NULL}},
		{T_FLAG, {"true", "false", NULL, NULL}},
		{T_RATIO, {"0.25", "1", NULL, NULL}},
		{T_MODE, {"slow", "fast", NULL, NULL}},
		{T_ITEMS, {"a,b", "[]", NULL, NULL}},
		{T_TAGS, {"z,y", "q", NULL, NULL}},
		{T_OPT_INT, {"none", "5", NULL, NULL}},
		{T_DEBUG, {"true", "false", NULL, NULL}},
		{T_SAFE, {"true", NULL, NULL, NULL}},
		{T_KNOBBED, {"true", "false", NULL, NULL}},
		{T_ALIAS_A, {"11", NULL, NULL, NULL}},
	};
	int k = rand_r(seed) % (int)(sizeof pick / sizeof pick[0]);
	int nv = 0;
	while (nv < 4 && pick[k].vals[nv])
		nv++;
	int c = rand_r(seed) % (nv + 1); /* nv: a reset */
	shmcfg_source layer = pick[k].o == T_KNOBBED && rand_r(seed) % 2 ? SHMCFG_SRC_KNOB : SHMCFG_SRC_USER;
	int r = commit_layer(h, layer, pick[k].o, c < nv ? pick[k].vals[c] : NULL, gen);
	if (r && r != 1 && r != SHMCFG_E_CONFLICT)
		fprintf(stderr, "# random commit: %s: %s\n", shmcfg_strerror(r), shmcfg_errdetail());
	/* an unchanged layer publishes nothing; debug and safe refuse each other */
	return r == 1 || r == SHMCFG_E_CONFLICT ? 0 : r;
}

/* Rebuilt generations equal what a snapshot showed when they were current:
 * every option's value, its layers, and the config hash. */
static void test_values_at_generation(void **state)
{
	(void)state;
	const char *name = new_name("hist-at");
	shmcfg *h = create_hist(name, 0, 0);
	shmcfg *ro = attach_ro(name);
	static struct seen seen[NSTEPS + 1];
	unsigned seed = 12345;
	int n = 0;
	for (int i = 0; i <= NSTEPS; i++) {
		uint64_t gen;
		if (i)
			assert_int_equal(random_commit(h, &seed, &gen), 0);
		shmcfg_snapshot *s;
		assert_int_equal(shmcfg_snapshot_acquire(h, &s), 0);
		if (n == 0 || seen[n - 1].gen != shmcfg_snapshot_generation(s))
			see(s, &seen[n++]);
		shmcfg_snapshot_release(s);
	}
	assert_true(n > NSTEPS / 2);
	for (int k = 0; k < n; k++)
		for (int hk = 0; hk < 2; hk++) { /* the writer's handle and a read-only one */
			shmcfg_snapshot *s = NULL;
			int r = shmcfg_snapshot_at(hk ? ro : h, seen[k].gen, &s);
			if (r)
				fail_msg("snapshot at %" PRIu64 ": %s", seen[k].gen, shmcfg_errdetail());
			struct seen now;
			see(s, &now);
			assert_int_equal(now.gen, seen[k].gen);
			for (int o = 0; o < T_COUNT; o++)
				for (int l = 0; l < 6; l++)
					if (strcmp(now.text[o][l], seen[k].text[o][l]))
						fail_msg("generation %" PRIu64 ", option %d, layer %d: rebuilt %s, was %s",
							 seen[k].gen, o, l, now.text[o][l], seen[k].text[o][l]);
			assert_memory_equal(now.hash, seen[k].hash, 16);
			seen_free(&now);
			shmcfg_snapshot_release(s);
		}
	for (int k = 0; k < n; k++)
		seen_free(&seen[k]);
	drop(ro);
	drop(h);
}

/* Rollback: one commit; the user layer (and with the flag the knob layer)
 * exactly as at G; the other layers untouched. */
static void test_rollback(void **state)
{
	(void)state;
	const char *name = new_name("hist-rb");
	shmcfg *h = create_hist(name, 0, 0);
	uint64_t gen;
	bool published = false;
	assert_int_equal(set_and_commit(h, T_A, "5", &gen), 0);
	assert_int_equal(commit_layer(h, SHMCFG_SRC_KNOB, T_KNOBBED, "true", &gen), 0);
	assert_int_equal(commit_layer(h, SHMCFG_SRC_USER, T_ITEMS, "k,l", &gen), 0);
	uint64_t G = gen;
	shmcfg_snapshot *then;
	assert_int_equal(shmcfg_snapshot_acquire(h, &then), 0);
	struct seen at_g;
	see(then, &at_g);
	shmcfg_snapshot_release(then);
	unsigned seed = 99;
	for (int i = 0; i < 40; i++)
		assert_int_equal(random_commit(h, &seed, &gen), 0);
	int kr = commit_layer(h, SHMCFG_SRC_KNOB, T_KNOBBED, "false", &gen);
	assert_true(kr == 0 || kr == 1); /* the random commits may have set it so */
	assert_int_equal(commit_layer(h, SHMCFG_SRC_CLUSTER, T_B, "8", &gen), 0);
	uint64_t before = shmcfg_generation(h), rb;
	/* without --knob: the user layer as at G, one commit */
	assert_int_equal(shmcfg_rollback(h, G, 0, "rollback test", &rb, &published), 0);
	assert_true(published);
	assert_int_equal(rb, before + 1);
	assert_int_equal(shmcfg_generation(h), rb);
	shmcfg_snapshot *s;
	assert_int_equal(shmcfg_snapshot_acquire(h, &s), 0);
	struct seen now;
	see(s, &now);
	shmcfg_snapshot_release(s);
	for (int o = 0; o < T_COUNT; o++) {
		if (strcmp(now.text[o][SHMCFG_SRC_USER - SHMCFG_SRC_KNOB], at_g.text[o][SHMCFG_SRC_USER - SHMCFG_SRC_KNOB]))
			fail_msg("option %d: user layer %s after the rollback, %s at G", o,
				 now.text[o][SHMCFG_SRC_USER - SHMCFG_SRC_KNOB], at_g.text[o][SHMCFG_SRC_USER - SHMCFG_SRC_KNOB]);
	}
	char want[32];
	snprintf(want, sizeof want, "false/%d", SHMCFG_SRC_KNOB); /* the knob stays */
	assert_string_equal(now.text[T_KNOBBED][0], want);
	snprintf(want, sizeof want, "8/%d", SHMCFG_SRC_CLUSTER); /* so does the cluster's */
	assert_string_equal(now.text[T_B][SHMCFG_SRC_CLUSTER - SHMCFG_SRC_KNOB], want);
	seen_free(&now);
	shmcfg_history_entry *e = entry(h, rb);
	assert_string_equal(e->who, "rollback test");
	shmcfg_history_free(e);
	/* again: nothing to restore */
	assert_int_equal(shmcfg_rollback(h, G, 0, NULL, &gen, &published), 0);
	assert_false(published);
	assert_int_equal(gen, rb);
	/* with the knob layer */
	assert_int_equal(shmcfg_rollback(h, G, SHMCFG_ROLLBACK_KNOB, NULL, &gen, &published), 0);
	assert_true(published);
	assert_int_equal(gen, rb + 1);
	assert_int_equal(shmcfg_snapshot_acquire(h, &s), 0);
	see(s, &now);
	shmcfg_snapshot_release(s);
	for (int o = 0; o < T_COUNT; o++)
		for (int l = 0; l < 5; l += 3) /* knob (0) and user (3) */
			if (strcmp(now.text[o][l], at_g.text[o][l]))
				fail_msg("option %d layer %d: %s after the rollback, %s at G", o, l, now.text[o][l],
					 at_g.text[o][l]);
	seen_free(&now);
	seen_free(&at_g);
	/* errors: too old, not yet, read-only, bad flags */
	assert_int_equal(shmcfg_rollback(h, gen + 5, 0, NULL, &gen, NULL), -ENOENT);
	assert_int_equal(shmcfg_rollback(h, 0, 0, NULL, &gen, NULL), -ENOENT);
	assert_int_equal(shmcfg_rollback(h, 2, 1u << 7, NULL, &gen, NULL), -EINVAL);
	shmcfg *ro = attach_ro(name);
	assert_int_equal(shmcfg_rollback(ro, 2, 0, NULL, &gen, NULL), SHMCFG_E_READONLY);
	drop(ro);
	drop(h);
}

struct rollback_arg {
	const char *name;
	uint64_t gen;
};

static int stopped_rollback_main(void *p)
{
	struct rollback_arg *a = p;
	shmcfg *h = NULL;
	int r = shmcfg_attach(a->name, 0, NULL, &h);
	CHECK(r == 0, 2, "attach: %s", shmcfg_strerror(r));
	setenv("SHMCFG_FAULT", "rollback.built:stop", 1);
	bool published = false;
	r = shmcfg_rollback(h, a->gen, 0, NULL, NULL, &published);
	CHECK(r == 0 && published, 3, "rollback: %d %s", r, shmcfg_errdetail());
	shmcfg_close(h);
	return 0;
}

/* A commit that lands while a rollback is built (after it read the current
 * values, before its commit) does not survive it: the result is G's user
 * layer exactly. */
static void test_rollback_races_commit(void **state)
{
	(void)state;
	const char *name = new_name("hist-rb-race");
	shmcfg *h = create_hist(name, 0, 0);
	uint64_t gen;
	assert_int_equal(set_and_commit(h, T_A, "5", &gen), 0);
	struct rollback_arg a = {name, gen};
	assert_int_equal(set_and_commit(h, T_A, "6", &gen), 0);
	pid_t pid = spawn(stopped_rollback_main, &a);
	assert_child_stops(pid, "rollback.built");
	/* T_B's user layer was unset at G and still is as the rollback looked */
	assert_int_equal(set_and_commit(h, T_B, "9", &gen), 0);
	assert_int_equal(kill(pid, SIGCONT), 0);
	assert_child_ok(pid);
	shmcfg_snapshot *s;
	shmcfg_value v;
	assert_int_equal(shmcfg_snapshot_acquire(h, &s), 0);
	int ra = shmcfg_snapshot_layer(s, T_A, SHMCFG_SRC_USER, &v);
	int64_t a_now = v.u.i;
	int rb = shmcfg_snapshot_layer(s, T_B, SHMCFG_SRC_USER, &v);
	shmcfg_snapshot_release(s); /* before asserting: a failure must not leave it held */
	assert_int_equal(ra, 0);
	assert_int_equal(a_now, 5);
	assert_int_equal(rb, 1); /* the commit made meanwhile is undone too */
	drop(h);
}

/* ------------------------------------------------------------------ */

struct fault_arg {
	const char *name, *point;
};

static int killed_writer_main(void *p)
{
	struct fault_arg *a = p;
	shmcfg *h = NULL;
	int r = shmcfg_attach(a->name, 0, NULL, &h);
	CHECK(r == 0, 2, "attach: %s", shmcfg_strerror(r));
	setenv("SHMCFG_FAULT", a->point, 1);
	r = commit_n(h, 777, NULL);
	CHECK(false, 10, "commit returned %d: the fault point %s never fired", r, a->point);
}

/* A writer killed in the middle of writing a record (and just after it
 * marked the entry) leaves a history that reads: the older entries whole,
 * the dead generation absent, and the next commit's entry sound. */
static void test_writer_killed_mid_record(void **state)
{
	(void)state;
	static const char *const points[] = {"history.begun", "history.record"};
	for (int p = 0; p < 2; p++) {
		const char *name = new_name(p ? "hist-kill2" : "hist-kill1");
		shmcfg *h = create_hist(name, 8, 0);
		uint64_t gen;
		for (int i = 1; i <= 12; i++)
			assert_int_equal(commit_n(h, i, &gen), 0);
		struct fault_arg a = {name, points[p]};
		pid_t pid = spawn(killed_writer_main, &a);
		int st = reap(pid);
		assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
		assert_int_equal(shmcfg_generation(h), gen);
		shmcfg_history_entry *e;
		assert_int_equal(shmcfg_history_get(h, gen + 1, &e), -ENOENT);
		uint64_t oldest, reb;
		shmcfg_history_range(h, &oldest, &reb);
		/* the dead writer marked the entry of gen + 1, which held gen - 7 */
		assert_int_equal(oldest, gen - 6);
		for (uint64_t g = gen; g >= oldest; g--) {
			e = entry(h, g);
			assert_true(e->values_kept);
			shmcfg_history_free(e);
		}
		shmcfg_snapshot *s;
		assert_int_equal(shmcfg_snapshot_at(h, reb, &s), 0);
		shmcfg_value v;
		assert_int_equal(shmcfg_snapshot_get(s, T_A, &v), 0);
		assert_int_equal(v.u.i, (int64_t)(12 - (gen - reb)));
		shmcfg_snapshot_release(s);
		/* the next writer commits the same generation and its entry is sound */
		uint64_t g2;
		assert_int_equal(commit_n(h, 13, &g2), 0);
		assert_int_equal(g2, gen + 1);
		e = entry(h, g2);
		assert_true(e->values_kept);
		const shmcfg_layer_change *c = change_of(e, T_A, SHMCFG_SRC_USER);
		assert_int_equal(c->old_value.u.i, 12);
		assert_int_equal(c->new_value.u.i, 13);
		shmcfg_history_free(e);
		assert_int_equal(shmcfg_snapshot_at(h, gen, &s), 0);
		assert_int_equal(shmcfg_snapshot_get(s, T_A, &v), 0);
		assert_int_equal(v.u.i, 12);
		shmcfg_snapshot_release(s);
		assert_int_equal(shmcfg_check(h, true, NULL, NULL), 0);
		drop(h);
	}
}

static int renamed_child_main(void *p)
{
	const char *name = p;
	CHECK(prctl(PR_SET_NAME, "hist-child", 0, 0, 0) == 0, 2, "prctl");
	shmcfg *h = NULL;
	int r = shmcfg_attach(name, 0, NULL, &h);
	CHECK(r == 0, 3, "attach: %s", shmcfg_strerror(r));
	r = commit_n(h, 4242, NULL);
	CHECK(r == 0, 4, "commit: %s", shmcfg_strerror(r));
	shmcfg_close(h);
	return 0;
}

/* The process name is cached per process: a forked child that renamed
 * itself records its own name and pid, not its parent's. */
static void test_child_names_itself(void **state)
{
	(void)state;
	const char *name = new_name("hist-fork");
	shmcfg *h = create_hist(name, 0, 0);
	uint64_t gen;
	assert_int_equal(commit_n(h, 1, &gen), 0); /* the parent's name is cached now */
	pid_t pid = spawn(renamed_child_main, (void *)name);
	int st = reap(pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	shmcfg_history_entry *e = entry(h, gen + 1);
	assert_string_equal(e->process, "hist-child");
	assert_int_equal(e->pid, pid);
	shmcfg_history_free(e);
	e = entry(h, gen);
	assert_string_equal(e->process, self_comm());
	shmcfg_history_free(e);
	drop(h);
}

/* A local writer chooses its process name and its origin's who: a C1
 * control (U+009B, CSI), an escape, bytes that are no UTF-8 */
#define HOSTILE_COMM "\xc2\x9b" "2J\x1b]0\xff"
#define HOSTILE_WHO "a\xc2\x9b" "31m\x07\xe9z \xc3\xa9"

static int hostile_child_main(void *p)
{
	const char *name = p;
	CHECK(prctl(PR_SET_NAME, HOSTILE_COMM, 0, 0, 0) == 0, 2, "prctl");
	shmcfg *h = NULL;
	int r = shmcfg_attach(name, 0, NULL, &h);
	CHECK(r == 0, 3, "attach: %s", shmcfg_strerror(r));
	shmcfg_txn *t = NULL;
	if (!(r = shmcfg_txn_begin(h, &t)) && !(r = shmcfg_txn_origin(t, 0, HOSTILE_WHO)) &&
	    !(r = shmcfg_txn_set_int(t, T_A, 99)))
		r = shmcfg_txn_commit(t, NULL);
	else
		shmcfg_txn_abort(t);
	CHECK(r == 0, 4, "commit: %s", shmcfg_strerror(r));
	shmcfg_close(h);
	return 0;
}

/* What the history and the commit log give back of names a writer chose is
 * printable UTF-8: each C0 or C1 control, DEL and byte of no character is
 * '?', a valid character stays (a tool prints them to a terminal). */
static void test_committer_names_printable(void **state)
{
	(void)state;
	const char *name = new_name("hist-names");
	shmcfg *h = create_hist(name, 0, 0);
	uint64_t gen = shmcfg_generation(h);
	int st = reap(spawn(hostile_child_main, (void *)name));
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	shmcfg_history_entry *e = entry(h, gen + 1);
	assert_string_equal(e->process, "??2J?]0?");
	assert_string_equal(e->who, "a??31m??z \xc3\xa9");
	shmcfg_history_free(e);
	shmcfg_commit ci;
	assert_int_equal(shmcfg_commit_info(h, gen + 1, &ci), 0);
	assert_string_equal(ci.who, "a??31m??z \xc3\xa9");
	drop(h);
}

/* Commit i: a = i and c = a string whose letter and length follow from i. */
static void text_of(int i, char *buf)
{
	int len = 100 + i % 700;
	memset(buf, 'a' + i % 26, (size_t)len);
	buf[len] = 0;
}

static int racing_writer_main(void *p)
{
	const char *name = p;
	shmcfg *h = NULL;
	int r = shmcfg_attach(name, 0, NULL, &h);
	CHECK(r == 0, 2, "attach: %s", shmcfg_strerror(r));
	char text[1024];
	for (int i = 1; i <= 3000; i++) {
		shmcfg_txn *t;
		text_of(i, text);
		r = shmcfg_txn_begin(h, &t);
		if (!r && !(r = shmcfg_txn_set_int(t, T_A, i)) && !(r = shmcfg_txn_set_str(t, T_C, text)))
			r = shmcfg_txn_commit(t, NULL);
		else
			shmcfg_txn_abort(t);
		CHECK(r == 0, 3, "commit %d: %s", i, shmcfg_strerror(r));
	}
	shmcfg_close(h);
	return 0;
}

/* A reader in another process, while a writer commits as fast as it can
 * into a small history whose ring wraps every few commits: every entry it
 * decodes is whole and its own (the seqlock and the ring position check),
 * or says its values are gone; never a mix. */
static void test_reader_races_writer(void **state)
{
	(void)state;
	const char *name = new_name("hist-race");
	/* a ring of 4 KiB (a record is up to 1.6 KiB), a heap for strings of every length */
	shmcfg *h = keep(test_create(name, &(shmcfg_create_opts){.history = 16, .heap_bytes = 1u << 20}));
	shmcfg *ro = attach_ro(name);
	pid_t pid = spawn(racing_writer_main, (void *)name);
	long whole = 0, gone = 0;
	char want[1024];
	for (;;) {
		uint64_t cur = shmcfg_generation(ro);
		for (uint64_t g = cur; g + 16 > cur && g > 1; g--) {
			shmcfg_history_entry *e = NULL;
			int r = shmcfg_history_get(ro, g, &e);
			if (r == -ENOENT)
				continue; /* overwritten meanwhile */
			if (r)
				fail_msg("generation %" PRIu64 ": %s: %s", g, shmcfg_strerror(r), shmcfg_errdetail());
			assert_int_equal(e->generation, g);
			if (!e->values_kept) {
				gone++;
			} else {
				whole++;
				const shmcfg_layer_change *a = change_of(e, T_A, SHMCFG_SRC_USER);
				const shmcfg_layer_change *c = change_of(e, T_C, SHMCFG_SRC_USER);
				assert_non_null(a);
				assert_non_null(c);
				int i = (int)a->new_value.u.i;
				assert_int_equal((uint64_t)i + 1, g); /* commit i is generation i + 1 */
				assert_true(a->old_set == (i > 1));
				if (i > 1)
					assert_int_equal(a->old_value.u.i, i - 1);
				text_of(i, want);
				assert_int_equal(c->new_value.u.str.len, strlen(want));
				assert_memory_equal(c->new_value.u.str.ptr, want, strlen(want));
				if (i > 1) {
					text_of(i - 1, want);
					assert_int_equal(c->old_value.u.str.len, strlen(want));
					assert_memory_equal(c->old_value.u.str.ptr, want, strlen(want));
				}
			}
			shmcfg_history_free(e);
		}
		int st;
		pid_t w = waitpid(pid, &st, WNOHANG);
		if (w == pid) {
			untrack(pid);
			assert_true(WIFEXITED(st));
			assert_int_equal(WEXITSTATUS(st), 0);
			break;
		}
	}
	assert_int_equal(shmcfg_generation(ro), 3001);
	printf("# entries read during the commits: %ld whole, %ld without values\n", whole, gone);
	assert_true(whole > 0);
	drop(ro);
	drop(h);
}

/* Become uid/gid with no supplementary groups; 0 or an errno. */
static int drop_to(uid_t uid, gid_t gid)
{
	if (setgroups(0, NULL) < 0 || setgid(gid) < 0 || setuid(uid) < 0)
		return errno;
	return geteuid() == uid ? 0 : EPERM;
}

static int other_uid_main(void *p)
{
	const char *name = p;
	CHECK(drop_to(65534, 65534) == 0, 2, "cannot become nobody");
	shmcfg *h = NULL;
	int r = shmcfg_attach_with(name, &(shmcfg_attach_opts){.flags = SHMCFG_ATTACH_RDONLY | SHMCFG_ATTACH_OWNER, .owner = 0}, &h);
	CHECK(r == 0, 3, "attach as nobody: %s", shmcfg_strerror(r));
	uint64_t cur = shmcfg_generation(h), oldest, reb;
	shmcfg_history_range(h, &oldest, &reb);
	CHECK(oldest == 1 && reb == 1, 4, "range %" PRIu64 " %" PRIu64, oldest, reb);
	shmcfg_history_entry *e = NULL;
	r = shmcfg_history_get(h, cur, &e);
	CHECK(r == 0 && e->values_kept && e->nchanges == 1 && e->uid == 0 && !strcmp(e->user, "root"), 5,
	      "entry of %" PRIu64 ": %d", cur, r);
	CHECK(e->changes[0].opt == T_C && !strcmp(e->changes[0].new_value.u.str.ptr, "3"), 6, "the change");
	shmcfg_history_free(e);
	shmcfg_snapshot *s = NULL;
	r = shmcfg_snapshot_at(h, 2, &s);
	CHECK(r == 0, 7, "snapshot at 2: %s", shmcfg_strerror(r));
	shmcfg_value v;
	r = shmcfg_snapshot_get(s, T_A, &v);
	CHECK(r == 0 && v.u.i == 1, 8, "a at 2");
	shmcfg_snapshot_release(s);
	r = shmcfg_rollback(h, 2, 0, NULL, NULL, NULL);
	CHECK(r == SHMCFG_E_READONLY, 9, "rollback as a reader: %d", r);
	shmcfg_close(h);
	return 0;
}

/* A reader of another uid with a read-only mapping reads the history. */
static void test_other_uid_reader(void **state)
{
	(void)state;
	const char *name = new_name("hist-uid");
	shmcfg *h = create_hist(name, 0, 0644);
	uint64_t gen;
	assert_int_equal(set_and_commit(h, T_A, "1", &gen), 0);
	assert_int_equal(set_and_commit(h, T_A, "2", &gen), 0);
	assert_int_equal(commit_str(h, T_C, "3", &gen), 0);
	pid_t pid = spawn(other_uid_main, (void *)name);
	int st = reap(pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	drop(h);
}

/* The segment's object mapped writable, as a hostile writer has it, and its header. */
static char *map_segment(const char *name, struct seg_header *hd)
{
	char path[300];
	snprintf(path, sizeof path, "/dev/shm/shmcfg.%s", name);
	int fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, hd, sizeof *hd, 0), (ssize_t)sizeof *hd);
	char *map = mmap(NULL, hd->total_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	assert_true(map != MAP_FAILED);
	return map;
}

/* Random bytes over the history (its index, its ring, its head): readers
 * never crash, and a writer still commits. */
static void test_scribbled_history(void **state)
{
	(void)state;
	const char *name = new_name("hist-scribble");
	shmcfg *h = create_hist(name, 32, 0);
	uint64_t gen;
	unsigned seed = 4242;
	for (int i = 0; i < 60; i++)
		assert_int_equal(random_commit(h, &seed, &gen), 0);
	struct seg_header hd;
	char *map = map_segment(name, &hd);
	uint64_t start = hd.hist_off, len = hd.hist_ring_off + hd.hist_ring_size - hd.hist_off;
	shmcfg *ro = attach_ro(name);
	int decoded = 0, refused = 0;
	for (int round = 0; round < 300; round++) {
		/* a few bytes, a whole entry's fields, or a run of the ring */
		int kind = rand_r(&seed) % 4;
		if (kind == 0) {
			for (int k = 0; k < 16; k++)
				map[start + (uint64_t)rand_r(&seed) % len] = (char)rand_r(&seed);
		} else if (kind == 1) {
			struct hist_ent *e = (struct hist_ent *)(map + start) + rand_r(&seed) % hd.hist_n;
			uint64_t keep_gen = e->gen;
			for (size_t k = 8; k < sizeof *e; k++)
				((char *)e)[k] = (char)rand_r(&seed);
			if (rand_r(&seed) % 2)
				e->len = (uint32_t)rand_r(&seed) % 64;
			e->gen = keep_gen;
		} else if (kind == 2) {
			uint64_t at = hd.hist_ring_off + (uint64_t)rand_r(&seed) % hd.hist_ring_size;
			for (uint64_t k = 0; k < 64 && at + k < hd.hist_ring_off + hd.hist_ring_size; k++)
				map[at + k] = (char)rand_r(&seed);
		} else {
			((struct seg_header *)map)->hist_head = (uint64_t)rand_r(&seed) << (rand_r(&seed) % 40);
		}
		uint64_t cur = shmcfg_generation(ro);
		for (uint64_t g = cur + 1; g + 40 > cur && g > 0; g--) {
			shmcfg_history_entry *e = NULL;
			int r = shmcfg_history_get(ro, g, &e);
			assert_true(r == 0 || r == -ENOENT || r == SHMCFG_E_CORRUPT);
			if (r == 0) {
				for (uint32_t k = 0; e->values_kept && k < e->nchanges; k++) {
					assert_true(e->changes[k].opt < T_COUNT);
					char *j = json_of(&e->changes[k].new_value);
					free(j);
				}
				decoded++;
			} else {
				refused++;
			}
			shmcfg_history_free(e);
		}
		shmcfg_snapshot *s = NULL;
		uint64_t oldest, reb;
		shmcfg_history_range(ro, &oldest, &reb);
		int r = shmcfg_snapshot_at(ro, reb, &s);
		assert_true(r == 0 || r == -ENOENT || r == SHMCFG_E_CORRUPT || r == SHMCFG_E_FULL);
		shmcfg_snapshot_release(s);
		if (round % 10 == 0)
			assert_int_equal(random_commit(h, &seed, &gen), 0);
	}
	assert_true(decoded > 0 && refused > 0);
	munmap(map, hd.total_size);
	drop(ro);
	drop(h);
}

/* A scribbled index whose every entry claims one large record that decodes
 * (all at the same ring position): a walk over the history copies at most
 * twice the ring, not half of it per entry, and stops as at overwritten
 * records. */
static void test_scribbled_large_records(void **state)
{
	(void)state;
	const char *name = new_name("hist-large");
	shmcfg *h = create_hist(name, 64, 0);
	uint64_t gen;
	for (int i = 1; i <= 100; i++)
		assert_int_equal(commit_n(h, i, &gen), 0);
	struct seg_header hd;
	char *map = map_segment(name, &hd);
	/* one record of half the ring: no user, no who, T_C's user layer from
	 * unset to a string of the rest */
	uint32_t len = (uint32_t)hd.hist_ring_size / 2, slen = len - 14, opt = T_C;
	char *rec = calloc(1, len);
	assert_non_null(rec);
	memcpy(rec + 2, &opt, 4);
	rec[6] = (char)layer_of(SHMCFG_SRC_USER);
	rec[7] = SHMCFG_STR;
	rec[8] = 0;
	rec[9] = 2;
	memcpy(rec + 10, &slen, 4);
	memset(rec + 14, 'x', slen);
	uint64_t head = ((struct seg_header *)map)->hist_head, pos = head - len;
	for (uint32_t k = 0; k < len; k++)
		map[hd.hist_ring_off + (pos + k) % hd.hist_ring_size] = rec[k];
	free(rec);
	for (uint64_t g = gen; g > gen - hd.hist_n; g--) {
		struct hist_ent *e = (struct hist_ent *)(map + hd.hist_off) + g % hd.hist_n;
		e->pos = pos;
		e->len = len;
		e->nchanges = 1;
	}
	shmcfg *ro = attach_ro(name);
	shmcfg_history_entry *e = entry(ro, gen - 50); /* each one decodes */
	assert_int_equal(e->nchanges, 1);
	shmcfg_history_free(e);
	uint64_t oldest = 0, reb = 0;
	shmcfg_history_range(ro, &oldest, &reb);
	if (oldest + 8 <= gen)
		fail_msg("the walk went down to %" PRIu64 " (current %" PRIu64 ")", oldest, gen);
	shmcfg_snapshot *s = NULL;
	assert_int_equal(shmcfg_snapshot_at(ro, gen - 40, &s), -ENOENT);
	munmap(map, hd.total_size);
	drop(ro);
	drop(h);
}

int main(void)
{
	unsetenv("SHMCFG_FAULT");
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_thousand_commits_kept, teardown),
		cmocka_unit_test_teardown(test_wraparound, teardown),
		cmocka_unit_test_teardown(test_layers_and_types, teardown),
		cmocka_unit_test_teardown(test_huge_commit, teardown),
		cmocka_unit_test_teardown(test_committer_names_printable, teardown),
		cmocka_unit_test_teardown(test_many_changes_recorded_in_order, teardown),
		cmocka_unit_test_teardown(test_ring_wraps_first, teardown),
		cmocka_unit_test_teardown(test_values_at_generation, teardown),
		cmocka_unit_test_teardown(test_rollback, teardown),
		cmocka_unit_test_teardown(test_rollback_races_commit, teardown),
		cmocka_unit_test_teardown(test_writer_killed_mid_record, teardown),
		cmocka_unit_test_teardown(test_reader_races_writer, teardown),
		cmocka_unit_test_teardown(test_child_names_itself, teardown),
		cmocka_unit_test_teardown(test_scribbled_history, teardown),
		cmocka_unit_test_teardown(test_scribbled_large_records, teardown),
		cmocka_unit_test_teardown(test_other_uid_reader, teardown),
	};
	/* the other uid needs root to become nobody: as another user it is left out */
	size_t n = sizeof tests / sizeof tests[0] - (getuid() != 0);
	return _cmocka_run_group_tests("tests", tests, n, NULL, NULL);
}
