/* SPDX-License-Identifier: MIT */
/*
 * Commits resolve only what changed (lib/slot/resolve.c) and bring the slot they
 * take up to date from the commit log's ring (lib/commit/publish.c). Here an oracle
 * checks every published generation: a private copy of it is resolved again
 * from scratch, every option, by the code that builds generation 1; every
 * effective cell must equal the published one, and the config hash and
 * checksum sums must equal sums computed from scratch (shmcfg_check). The
 * commits are random: changes to every layer, resets, implications that
 * chain and conflict, aliases, strings and lists, snapshots held across
 * commits (so that the slot a commit takes lags by a varying number of
 * generations), a heap small enough to fill (so that commits recycle older
 * slots and sometimes fail), and transactions large enough to overflow the
 * ring (so that a slot is copied whole).
 */
#include "internal.h"
#include "slot.h"
#include "seqlock.h"

#include <inttypes.h>
#include <pthread.h>
#include <sys/stat.h>

#include "common.h"

/* options with implications that chain (a -> b -> c), two impliers of one
 * target (conflicts), an alias chain, and strings and lists */
static const shmcfg_optdef inc_opts[] = {
	{.name = "i.a", .type = SHMCFG_BOOL, .doc = "a", .implies = "i.b=true;i.s=\"from a\""},
	{.name = "i.b", .type = SHMCFG_BOOL, .doc = "b", .implies = "i.n=7"},
	{.name = "i.c", .type = SHMCFG_BOOL, .doc = "c", .implies = "i.n=9;i.l=[\"c\"]"},
	{.name = "i.n", .type = SHMCFG_INT, .doc = "n", .knob = "k/n"},
	{.name = "i.s", .type = SHMCFG_STR, .doc = "s", .def = "\"default\""},
	{.name = "i.l", .type = SHMCFG_LIST, .doc = "l", .def = "[\"x\",\"y\"]"},
	{.name = "i.t", .type = SHMCFG_SET, .flags = SHMCFG_F_NULLABLE, .doc = "t"},
	{.name = "i.f", .type = SHMCFG_FLOAT, .doc = "f"},
	{.name = "i.alias1", .type = SHMCFG_INT, .doc = "alias", .alias = "i.n"},
	{.name = "i.alias2", .type = SHMCFG_INT, .doc = "alias of alias", .alias = "i.alias1"},
	{.name = "i.salias", .type = SHMCFG_STR, .doc = "alias", .alias = "i.s"},
	{.name = "i.ign", .type = SHMCFG_INT, .flags = SHMCFG_F_HASH_IGNORED, .doc = "ignored"},
};
#define NINC (sizeof inc_opts / sizeof inc_opts[0])
#define FILLER 1500 /* plain ints after the options above: a transaction of most of them overflows the ring */

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static shmcfg *create_inc(const char *name, uint32_t slots, uint64_t heap, bool filler)
{
	shmcfg_schema *s;
	assert_int_equal(shmcfg_schema_new(&s), 0);
	for (size_t i = 0; i < NINC; i++)
		if (shmcfg_schema_add(s, &inc_opts[i]))
			fail_msg("%s: %s", inc_opts[i].name, shmcfg_errdetail());
	for (int i = 0; filler && i < FILLER; i++) {
		char n[32];
		snprintf(n, sizeof n, "f.x%04d", i);
		assert_int_equal(shmcfg_schema_add(s, &(shmcfg_optdef){.name = n, .type = SHMCFG_INT, .doc = "f"}), 0);
	}
	shmcfg *h = NULL;
	shmcfg_create_opts o = {.flags = SHMCFG_CREATE_FORCE | SHMCFG_CREATE_NO_ENV, .slots = slots,
				.heap_bytes = heap};
	if (shmcfg_create(name, s, &o, &h))
		fail_msg("create: %s", shmcfg_errdetail());
	shmcfg_schema_free(s);
	return h;
}

/* The oracle: the current generation, resolved again from its layers. */
static void check_current(shmcfg *h, uint64_t step)
{
	size_t bytes = h->lay.slot_size + h->lay.heap_size;
	char *copy = malloc(bytes), *again = malloc(bytes);
	assert_non_null(copy);
	assert_non_null(again);
	uint64_t cur, top;
	int tries = 0;
	do
		cur = seq_current(h);
	while (!shmcfg__seq_copy(h, cur, copy, copy + h->lay.slot_size, &top) && !shmcfg__seq_retry(h, cur, &tries));
	memcpy(again, copy, bytes);
	/* every cell forgotten but the layers held in cells (slot.h,
	 * lref_in_cell), which only an option that nothing implies and that is
	 * no alias may have: its cell is its one layer */
	for (uint32_t i = 0; i < h->lay.nopts; i++) {
		const struct opt_desc *d = opt_d(h, i);
		if (!lref_in_cell(slot_lrefs(h, again)[i]))
			slot_cells(h, again)[i] = (struct shmcfg__cell){0, 0};
		else if (!cell_may_hold_layer(h, d))
			fail_msg("step %" PRIu64 ": %s holds its layer in its cell, but %s", step, sstr(h, d->name),
				 d->alias != SHMCFG_NO_OPT ? "is an alias" : "an option implies it");
	}
	struct build b = {.h = h, .cells = slot_cells(h, again), .lrefs = slot_lrefs(h, again),
			  .heap = again + h->lay.slot_size, .heap_size = top};
	int r = shmcfg__resolve_all(&b);
	if (r)
		fail_msg("step %" PRIu64 ": generation %" PRIu64 " does not resolve from scratch: %s", step,
			 cur_gen(cur), shmcfg_errdetail());
	shmcfg__build_free(&b);
	for (uint32_t i = 0; i < h->lay.nopts; i++)
		if (!shmcfg__cells_equal(h, slot_cells(h, copy) + i, copy + h->lay.slot_size, top,
					 slot_cells(h, again) + i, again + h->lay.slot_size, top))
			fail_msg("step %" PRIu64 ": generation %" PRIu64 ": %s is %016" PRIx64 "/%016" PRIx64
				 ", resolved from scratch %016" PRIx64 "/%016" PRIx64,
				 step, cur_gen(cur), sstr(h, opt_d(h, i)->name), slot_cells(h, copy)[i].val,
				 slot_cells(h, copy)[i].meta, slot_cells(h, again)[i].val, slot_cells(h, again)[i].meta);
	free(copy);
	free(again);
	/* every slot holding a generation: its sums equal sums from scratch */
	if (shmcfg_check(h, true, NULL, NULL))
		fail_msg("step %" PRIu64 ": check: %s", step, shmcfg_errdetail());
}

static const char *const strs[] = {"\"\"", "\"a\"", "\"from a\"", "\"a longer string, past one class\""};
static const char *const lists[] = {"[]", "[\"c\"]", "[\"x\",\"y\"]", "[\"p\",\"q\",\"r\",\"s\",\"t\"]"};

/*
 * The test's own model of every option's layers: the text of each layer's
 * value (NULL: unset), from the changes of the transactions that committed.
 * It checks what commits write into the layers (the oracle above resolves
 * from the layers the commits wrote, so it cannot).
 */
struct model {
	uint32_t n;
	char **text;               /* n * NLAYERS */
	struct pending {           /* the changes of the transaction in progress */
		shmcfg_opt o;
		enum layer l;
		char *text;
	} *p;
	size_t np, cap;
};

static void model_note(struct model *m, shmcfg_opt o, enum layer l, const shmcfg_value *v)
{
	char *text = NULL;
	if (v)
		assert_int_equal(shmcfg_value_format(v, &text), 0);
	if (m->np == m->cap) {
		m->cap = m->cap ? 2 * m->cap : 64;
		m->p = realloc(m->p, m->cap * sizeof *m->p);
		assert_non_null(m->p);
	}
	m->p[m->np++] = (struct pending){o, l, text};
}

/* The transaction committed (apply) or not: forget its changes either way. */
static void model_end(struct model *m, bool apply)
{
	for (size_t k = 0; k < m->np; k++) {
		char **slot = &m->text[(size_t)m->p[k].o * NLAYERS + m->p[k].l];
		if (apply) {
			free(*slot);
			*slot = m->p[k].text;
		} else {
			free(m->p[k].text);
		}
	}
	m->np = 0;
}

/* Every layer of every option in the current generation, against the model. */
static void model_check(struct model *m, shmcfg *h, uint64_t step)
{
	shmcfg_snapshot *s;
	assert_int_equal(shmcfg_snapshot_acquire(h, &s), 0);
	for (uint32_t o = 0; o < m->n; o++) {
		if (opt_d(h, o)->alias != SHMCFG_NO_OPT)
			continue;
		for (enum layer l = 0; l < NLAYERS; l++) {
			shmcfg_value v;
			int r = shmcfg_snapshot_layer(s, o, source_of(l), &v);
			char *got = NULL;
			if (r == 0)
				assert_int_equal(shmcfg_value_format(&v, &got), 0);
			else if (r != 1)
				fail_msg("step %" PRIu64 ": layer %d of %s: %s", step, l, sstr(h, opt_d(h, o)->name),
					 shmcfg_errname(r));
			const char *want = m->text[(size_t)o * NLAYERS + l];
			if ((want == NULL) != (got == NULL) || (want && strcmp(want, got)))
				fail_msg("step %" PRIu64 ": layer %d of %s holds %s, the commits wrote %s", step, l,
					 sstr(h, opt_d(h, o)->name), got ? got : "nothing", want ? want : "nothing");
			free(got);
		}
	}
	shmcfg_snapshot_release(s);
}

/* One random change of option o in a random layer. */
static void random_change(shmcfg_txn *t, shmcfg_opt o, struct model *m)
{
	const shmcfg *h = t->h;
	enum layer l = (enum layer)(rnd() % NLAYERS);
	if (l == LAYER_KNOB && !(opt_d(h, o)->flags & DESC_F_HAS_KNOB))
		l = LAYER_USER;
	if (rnd() % 4 == 0) {
		t->layer = l;
		assert_int_equal(shmcfg_txn_reset(t, o), 0);
		t->layer = LAYER_USER;
		model_note(m, o, l, NULL);
		return;
	}
	char text[64];
	switch (opt_d(h, o)->type) {
	case SHMCFG_BOOL:
		snprintf(text, sizeof text, "%s", rnd() % 2 ? "true" : "false");
		break;
	case SHMCFG_INT:
		snprintf(text, sizeof text, "%d", (int)(rnd() % 5));
		break;
	case SHMCFG_FLOAT:
		snprintf(text, sizeof text, "%d.5", (int)(rnd() % 3));
		break;
	case SHMCFG_STR:
		snprintf(text, sizeof text, "%s", strs[rnd() % 4]);
		break;
	default:
		snprintf(text, sizeof text, "%s", rnd() % 5 ? lists[rnd() % 4] : "null");
		break;
	}
	shmcfg_value v;
	if (shmcfg__parse_for(h, o, text, &v))
		return; /* null where not allowed: no change */
	if (shmcfg__txn_set_layer(t, o, l, &v) == 0) /* refused (out of range): left out */
		model_note(m, o, l, &v);
	shmcfg_value_clear(&v);
}

static void run(shmcfg *h, int steps, bool filler)
{
	shmcfg_snapshot *held[3] = {0};
	int conflicts = 0, full = 0, published = 0, overflows = 0;
	struct model m = {.n = h->lay.nopts, .text = calloc((size_t)h->lay.nopts * NLAYERS, sizeof(char *))};
	assert_non_null(m.text);
	for (int step = 0; step < steps; step++) {
		/* hold or release snapshots (at most slots - 2, so that a commit
		 * finds a slot): the slots a commit may take vary */
		int k = (int)(rnd() % (h->lay.nslots - 2 < 3 ? h->lay.nslots - 2 : 3));
		if (held[k]) {
			shmcfg_snapshot_release(held[k]);
			held[k] = NULL;
		} else if (rnd() % 3 == 0) {
			assert_int_equal(shmcfg_snapshot_acquire(h, &held[k]), 0);
		}
		shmcfg_txn *t;
		assert_int_equal(shmcfg_txn_begin(h, &t), 0);
		int nch = 1 + (int)(rnd() % 4);
		for (int c = 0; c < nch; c++) {
			shmcfg_opt o = (shmcfg_opt)(rnd() % NINC);
			if (opt_d(h, o)->alias == SHMCFG_NO_OPT)
				random_change(t, o, &m);
		}
		if (filler && rnd() % 40 == 0) /* past half the ring: the log cannot list it */
			for (uint32_t i = NINC; i < h->lay.nopts; i++) {
				shmcfg_value v = {.type = SHMCFG_INT, .u.i = step}; /* every one changes */
				assert_int_equal(shmcfg__txn_set_layer(t, i, LAYER_USER, &v), 0);
				model_note(&m, i, LAYER_USER, &v);
			}
		uint64_t before = shmcfg_generation(h);
		int r = shmcfg_txn_commit(t, NULL);
		if (r == SHMCFG_E_CONFLICT || r == SHMCFG_E_FULL) {
			conflicts += r == SHMCFG_E_CONFLICT;
			full += r == SHMCFG_E_FULL;
			assert_int_equal(shmcfg_generation(h), before);
			model_end(&m, false);
		} else if (r < 0) {
			fail_msg("step %d: %s: %s", step, shmcfg_errname(r), shmcfg_errdetail());
		} else {
			published += r == 0;
			overflows += r == 0 && log_at(h, shmcfg_generation(h))->ring_n == RING_OVERFLOW;
			model_end(&m, true);
		}
		check_current(h, (uint64_t)step);
		model_check(&m, h, (uint64_t)step);
	}
	for (size_t k = 0; k < (size_t)m.n * NLAYERS; k++)
		free(m.text[k]);
	free(m.text);
	free(m.p);
	for (int k = 0; k < 3; k++)
		shmcfg_snapshot_release(held[k]);
	print_message("# %d commits published (%d too large for the ring), %d conflicts, %d full heaps\n",
		      published, overflows, conflicts, full);
	assert_true(published > steps / 3); /* the test tests commits */
	assert_true(!filler || overflows > 0); /* ... and slots copied whole */
}

static void test_random_commits(void **state)
{
	(void)state;
	shmcfg *h = create_inc(test_name("inc"), 6, 0, false);
	run(h, 3000, false);
	shmcfg_close(h);
	shmcfg_unlink(test_name("inc"));
}

/* A heap that fills: commits recycle older slots, or fail and change nothing. */
static void test_small_heap(void **state)
{
	(void)state;
	shmcfg *h = create_inc(test_name("incheap"), 8, 1280, false);
	/* a full heap fails the commit here: growing it (the default) replaces
	 * the segment, whose new generation a commit that then conflicts would
	 * leave behind (the growth has its tests: test_replace.c) */
	shmcfg_set_heap_growth(h, false);
	run(h, 2000, false);
	shmcfg_close(h);
	shmcfg_unlink(test_name("incheap"));
}

/* Transactions that overflow the ring: slots are copied whole. */
static void test_ring_overflow(void **state)
{
	(void)state;
	shmcfg *h = create_inc(test_name("incring"), 8, 1 << 20, true);
	run(h, 400, true);
	shmcfg_close(h);
	shmcfg_unlink(test_name("incring"));
}

/*
 * A transaction of many changes (past the linear search, lib/commit/txn.c's index):
 * a later change of an option and layer replaces the earlier one, whatever
 * the order, across the index's growth; the user and knob layers of one
 * option stay two changes.
 */
static void test_large_txn_last_change_wins(void **state)
{
	(void)state;
	const char *name = test_name("inclarge");
	shmcfg *h = create_inc(name, 8, 1 << 22, true);
	shmcfg_opt n = opt_named(h, "i.n");
	shmcfg_txn *t;
	assert_int_equal(shmcfg_txn_begin(h, &t), 0);
	for (int round = 0; round < 3; round++)
		for (uint32_t i = NINC; i < NINC + FILLER; i++)
			assert_int_equal(shmcfg_txn_set_int(t, i, (int64_t)i * 10 + round), 0);
	for (uint32_t i = NINC; i < NINC + FILLER; i += 7)
		assert_int_equal(shmcfg_txn_reset(t, i), 0); /* every 7th: back to its default */
	assert_int_equal(shmcfg_txn_set_int(t, n, 5), 0);
	assert_int_equal(shmcfg_txn_layer(t, SHMCFG_SRC_KNOB), 0);
	assert_int_equal(shmcfg_txn_set_int(t, n, 6), 0);
	assert_int_equal(shmcfg_txn_layer(t, SHMCFG_SRC_USER), 0);
	assert_int_equal(shmcfg_txn_set_int(t, NINC, 1), 0);
	assert_int_equal(t->n, FILLER + 2); /* one change per option and layer */
	uint64_t gen;
	assert_int_equal(shmcfg_txn_commit(t, &gen), 0);
	assert_int_equal(get_i(h, NINC), 1);
	shmcfg_snapshot *snap;
	assert_int_equal(shmcfg_snapshot_acquire(h, &snap), 0);
	int bad = 0; /* counted, not asserted, while the snapshot is held */
	shmcfg_value v;
	for (uint32_t i = NINC + 1; i < NINC + FILLER; i++) {
		int r = shmcfg_snapshot_layer(snap, i, SHMCFG_SRC_USER, &v);
		bool kept = (i - NINC) % 7;
		bad += kept ? r != 0 || v.u.i != (int64_t)i * 10 + 2 : r != 1;
	}
	bad += shmcfg_snapshot_layer(snap, n, SHMCFG_SRC_USER, &v) != 0 || v.u.i != 5;
	bad += shmcfg_snapshot_layer(snap, n, SHMCFG_SRC_KNOB, &v) != 0 || v.u.i != 6;
	shmcfg_snapshot_release(snap);
	assert_int_equal(bad, 0);
	shmcfg_close(h);
	shmcfg_unlink(name);
}

struct waiter {
	shmcfg *h;
	uint64_t after;
	int r;
};

static void *wait_thread(void *p)
{
	struct waiter *w = p;
	w->r = shmcfg_wait(w->h, w->after, 10000, NULL);
	return NULL;
}

/* How many count themselves in the header, waiting for a commit of h. */
static uint32_t waiting(const shmcfg *h)
{
	return __atomic_load_n(&h->hdr->waiters, __ATOMIC_SEQ_CST);
}

/*
 * Commits wake only when someone waits: waiters count themselves, read-write
 * handles in the header, read-only handles through a writable mapping of the
 * header page made for the wait; a segment that a class of users may read without writing
 * wakes on every commit, since those users could not count themselves.
 */
static void test_waiters_count_themselves(void **state)
{
	(void)state;
	const char *name = test_name("waiters");
	shmcfg *h = create_inc(name, 8, 0, false), *ro = NULL;
	assert_false(h->wake_always); /* created 0600 by default: every reader can write */
	assert_int_equal(shmcfg_attach(name, SHMCFG_ATTACH_RDONLY, NULL, &ro), 0);
	assert_null(ro->waiters); /* it counts through a mapping of its own, during its waits only */
	for (int k = 0; k < 2; k++) {
		shmcfg *w = k ? ro : h;
		assert_int_equal(waiting(h), 0);
		struct waiter a = {w, shmcfg_generation(h), -1};
		pthread_t th;
		assert_int_equal(pthread_create(&th, NULL, wait_thread, &a), 0);
		while (waiting(h) == 0)
			usleep(1000);
		shmcfg_txn *t;
		assert_int_equal(shmcfg_txn_begin(h, &t), 0);
		assert_int_equal(shmcfg_txn_set_int(t, 3, 40 + k), 0); /* i.n */
		assert_int_equal(shmcfg_txn_commit(t, NULL), 0);
		assert_int_equal(pthread_join(th, NULL), 0);
		assert_int_equal(a.r, 0);
		assert_int_equal(waiting(h), 0);
	}
	shmcfg_close(ro);
	shmcfg_close(h);
	shmcfg_unlink(name);
	/* mode 0644: others may read, not write */
	shmcfg_schema *s;
	assert_int_equal(shmcfg_schema_new(&s), 0);
	assert_int_equal(shmcfg_schema_add(s, &inc_opts[3]), 0);
	assert_int_equal(shmcfg_create(name, s, &(shmcfg_create_opts){.flags = SHMCFG_CREATE_FORCE, .mode = 0644}, &h), 0);
	shmcfg_schema_free(s);
	assert_true(h->wake_always);
	shmcfg_close(h);
	shmcfg_unlink(name);
}

/*
 * The slot a commit takes is the one choose_slot()'s scan picks (the most
 * recent free one), also where its fast path (the handle's hint: the slot
 * its last commit left behind) is tried first. A failed commit undoes its
 * slot to the current generation, unstamped: the best slot for the next
 * commit, which the scan (force_scan: the hint cleared) finds; the hint
 * must not pass it over. Returns the slot the next commit took.
 */
static uint32_t slot_after_failed_commit(bool force_scan)
{
	static const shmcfg_optdef opts[] = {
		{.name = "h.a", .type = SHMCFG_BOOL, .doc = "a", .implies = "h.n=7"},
		{.name = "h.c", .type = SHMCFG_BOOL, .doc = "c", .implies = "h.n=9"},
		{.name = "h.n", .type = SHMCFG_INT, .doc = "n"},
		{.name = "h.x", .type = SHMCFG_INT, .doc = "x"},
	};
	shmcfg_schema *s;
	assert_int_equal(shmcfg_schema_new(&s), 0);
	for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
		assert_int_equal(shmcfg_schema_add(s, &opts[i]), 0);
	const char *name = test_name("hint");
	shmcfg *h = NULL;
	shmcfg_create_opts o = {.flags = SHMCFG_CREATE_FORCE | SHMCFG_CREATE_NO_ENV, .slots = 4};
	assert_int_equal(shmcfg_create(name, s, &o, &h), 0);
	shmcfg_schema_free(s);
	shmcfg_opt a = opt_named(h, "h.a"), c = opt_named(h, "h.c"), x = opt_named(h, "h.x");
	shmcfg_snapshot *snap;
	assert_int_equal(shmcfg_snapshot_acquire(h, &snap), 0); /* pins generation 1 */
	assert_int_equal(commit_int(h, x, 1, NULL), 0);          /* generation 2 */
	/* two implications setting h.n to different values: refused after
	 * the slot was chosen and written, so undone */
	shmcfg_txn *t;
	assert_int_equal(shmcfg_txn_begin(h, &t), 0);
	assert_int_equal(shmcfg_txn_set_text(t, a, "true"), 0);
	assert_int_equal(shmcfg_txn_set_text(t, c, "true"), 0);
	assert_int_equal(shmcfg_txn_commit(t, NULL), SHMCFG_E_CONFLICT);
	shmcfg_snapshot_release(snap);
	if (force_scan)
		h->slot_hint = UINT32_MAX;
	assert_int_equal(commit_int(h, x, 2, NULL), 0); /* generation 3 */
	uint32_t chosen = cur_slot(__atomic_load_n(&h->hdr->current, __ATOMIC_ACQUIRE));
	assert_int_equal(shmcfg_check(h, true, NULL, NULL), 0);
	assert_int_equal(get_i(h, x), 2);
	shmcfg_close(h);
	shmcfg_unlink(name);
	return chosen;
}

static void test_slot_hint_matches_scan(void **state)
{
	(void)state;
	uint32_t scan = slot_after_failed_commit(true);
	assert_int_equal(slot_after_failed_commit(false), scan);
}

/* Option o's cell and layer reference in the current slot. */
static struct shmcfg__cell cell_now(shmcfg *h, shmcfg_opt o, uint32_t *lref)
{
	const struct slot_hdr *sl = slot_at(h, cur_slot(seq_current(h)));
	*lref = slot_lrefs(h, sl)[o];
	return slot_cells(h, sl)[o];
}

/*
 * A commit keeps the sums' terms of the options it wrote (lib/slot/resolve.c,
 * add_terms) for the handle's next commit of them, keyed by the option's
 * cell and layer reference. A string's cell names heap bytes, which another
 * handle's commits can free and reuse for another string of the same size:
 * the same key, another value. Handle a writes "x", handle b writes "y"
 * and, until the allocator gives the freed chunk back, "z": then a's next
 * commit of the option must take "z"'s terms out, not "x"'s (the sums
 * then differ from sums from scratch: shmcfg_check).
 */
static void test_terms_of_a_reused_chunk(void **state)
{
	(void)state;
	const char *name = test_name("increuse");
	shmcfg *a = create_inc(name, 2, 1 << 16, false), *b;
	assert_int_equal(shmcfg_attach(name, 0, NULL, &b), 0);
	shmcfg_opt s = opt_named(a, "i.s"), n = opt_named(a, "i.n");
	uint64_t g;
	uint32_t lref_x, lref_z = 0;
	assert_int_equal(commit_str(a, s, "x", &g), 0);
	struct shmcfg__cell x = cell_now(a, s, &lref_x), z = {0};
	bool reused = false;
	for (int k = 0; k < 50 && !reused; k++) {
		char v[2] = {(char)('a' + k % 26), 0};
		assert_int_equal(commit_str(b, s, v, &g), 0);
		z = cell_now(b, s, &lref_z);
		reused = z.val == x.val && z.meta == x.meta && lref_z == lref_x;
		/* two commits of another option: no slot refers to the chunk
		 * any more, which frees it */
		assert_int_equal(set_and_commit(b, n, "1", &g), 0);
		assert_int_equal(set_and_commit(b, n, "2", &g), 0);
	}
	if (!reused)
		fail_msg("the heap never gave %s's first chunk back: the case is not made", name);
	assert_int_equal(commit_str(a, s, "w", &g), 0);
	if (shmcfg_check(a, true, NULL, NULL))
		fail_msg("check: %s", shmcfg_errdetail());
	shmcfg_close(b);
	shmcfg_close(a);
	shmcfg_unlink(name);
}

/* Option o's layer l in the current generation, as text ("-" if unset). */
static void layer_text(shmcfg *h, shmcfg_opt o, shmcfg_source l, char *buf, size_t len)
{
	shmcfg_snapshot *snap;
	shmcfg_value v = {0};
	char *text = NULL;
	assert_int_equal(shmcfg_snapshot_acquire(h, &snap), 0);
	int r = shmcfg_snapshot_layer(snap, o, l, &v); /* 1: unset */
	if (r == 0)
		assert_int_equal(shmcfg_value_format(&v, &text), 0);
	else if (r != 1)
		fail_msg("layer %s of option %u: %s", shmcfg_source_name(l), o, shmcfg_errdetail());
	snprintf(buf, len, "%s", r == 0 ? text : "-");
	free(text);
	shmcfg_snapshot_release(snap);
}

/* o's lref kind in the current generation, its layers and its value with
 * source: in_cell 1 (LREF_IN_CELL), 2 (LREF_IN_CELL_BY_CLUSTER), 0 (a
 * chunk) or -1 (no layer). */
static void expect_layers(shmcfg *h, shmcfg_opt o, int in_cell, const char *user, const char *cluster,
			  const char *value, shmcfg_source src)
{
	uint32_t lref;
	(void)cell_now(h, o, &lref);
	int kind = lref_in_cell(lref) ? (int)lref : lref ? 0 : -1;
	char u[64], c[64];
	layer_text(h, o, SHMCFG_SRC_USER, u, sizeof u);
	layer_text(h, o, SHMCFG_SRC_CLUSTER, c, sizeof c);
	shmcfg_value v;
	char *text = NULL;
	assert_int_equal(shmcfg_get(h, o, &v), 0);
	assert_int_equal(shmcfg_value_format(&v, &text), 0);
	shmcfg_source got = v.source;
	if (kind != in_cell || strcmp(u, user) || strcmp(c, cluster) || strcmp(text, value) || got != src)
		fail_msg("option %u: reference kind %d, user %s, cluster %s, value %s from %s; expected %d, %s, %s, "
			 "%s from %s", o, kind, u, c, text, shmcfg_source_name(got), in_cell, user, cluster, value,
			 shmcfg_source_name(src));
	free(text);
	shmcfg_value_clear(&v);
	check_current(h, 0);
	if (shmcfg__heap_verify(h) || shmcfg_check(h, true, NULL, NULL))
		fail_msg("heap or check: %s", shmcfg_errdetail());
}

/*
 * A layer held in the cell (lib/slot/slot.h, lref_in_cell): one layer set to
 * a value that fits the cell, of an option that nothing implies and that is
 * no alias, takes no chunk, and becomes a chunk again when a second layer is
 * set; an implied option, and a string, always have a chunk. The layers,
 * the value, its source and the history read the same either way.
 */
static void test_layer_held_in_cell(void **state)
{
	(void)state;
	const char *name = test_name("inccell");
	shmcfg *h = create_inc(name, 4, 1 << 16, false);
	shmcfg_opt f = opt_named(h, "i.f"), n = opt_named(h, "i.n"), s = opt_named(h, "i.s"),
		   b = opt_named(h, "i.b"), t = opt_named(h, "i.t");
	uint64_t g;
	uint64_t heap0 = h->hdr->heap_live;
	assert_int_equal(set_and_commit(h, f, "1.5", &g), 0);
	expect_layers(h, f, 1, "1.5", "-", "1.5", SHMCFG_SRC_USER);
	assert_int_equal(h->hdr->heap_live, heap0); /* no chunk */
	assert_int_equal(commit_layer(h, SHMCFG_SRC_CLUSTER, f, "2.5", &g), 0);
	expect_layers(h, f, 0, "1.5", "2.5", "1.5", SHMCFG_SRC_USER);
	assert_int_equal(commit_layer(h, SHMCFG_SRC_USER, f, NULL, &g), 0);
	expect_layers(h, f, 1, "-", "2.5", "2.5", SHMCFG_SRC_CLUSTER);
	assert_int_equal(commit_layer(h, SHMCFG_SRC_CLUSTER, f, NULL, &g), 0);
	expect_layers(h, f, -1, "-", "-", "0.0", SHMCFG_SRC_DEFAULT);
	/* the cluster agent's layer (a commit with a cluster revision) keeps
	 * its owner; a local write of the same value takes it over */
	for (int agent = 1; agent >= 0; agent--) {
		shmcfg_txn *tx;
		assert_int_equal(shmcfg_txn_begin(h, &tx), 0);
		assert_int_equal(shmcfg_txn_origin(tx, agent ? 10 : 0, agent ? "agent" : NULL), 0);
		assert_int_equal(shmcfg_txn_layer(tx, SHMCFG_SRC_CLUSTER), 0);
		assert_int_equal(shmcfg_txn_set_text(tx, f, "6.5"), 0);
		assert_int_equal(shmcfg_txn_commit(tx, &g), 0);
		expect_layers(h, f, agent ? 2 : 1, "-", "6.5", "6.5", SHMCFG_SRC_CLUSTER);
		shmcfg_snapshot *snap;
		assert_int_equal(shmcfg_snapshot_acquire(h, &snap), 0);
		assert_int_equal(shmcfg_snapshot_layer_by_cluster(snap, f, SHMCFG_SRC_CLUSTER), agent);
		shmcfg_snapshot_release(snap);
	}
	assert_int_equal(commit_layer(h, SHMCFG_SRC_CLUSTER, f, NULL, &g), 0);
	/* null fits the cell too */
	assert_int_equal(set_and_commit(h, t, "null", &g), 0);
	expect_layers(h, t, 1, "null", "-", "null", SHMCFG_SRC_USER);
	/* implied by i.a (i.b) or i.b and i.c (i.n), or a string: chunks */
	assert_int_equal(set_and_commit(h, n, "3", &g), 0);
	expect_layers(h, n, 0, "3", "-", "3", SHMCFG_SRC_USER);
	assert_int_equal(set_and_commit(h, b, "true", &g), 0);
	expect_layers(h, n, 0, "3", "-", "7", SHMCFG_SRC_IMPLIED);
	expect_layers(h, b, 0, "true", "-", "true", SHMCFG_SRC_USER);
	assert_int_equal(set_and_commit(h, b, "false", &g), 0);
	expect_layers(h, n, 0, "3", "-", "3", SHMCFG_SRC_USER);
	assert_int_equal(commit_str(h, s, "x", &g), 0);
	expect_layers(h, s, 0, "\"x\"", "-", "\"x\"", SHMCFG_SRC_USER);
	/* the history's record of an in-cell change, and a generation rebuilt
	 * from it: old and new layer */
	uint64_t g4;
	assert_int_equal(set_and_commit(h, f, "4.0", &g4), 0);
	assert_int_equal(set_and_commit(h, f, "5.0", &g), 0);
	shmcfg_history_entry *e;
	assert_int_equal(shmcfg_history_get(h, g, &e), 0);
	char *old = NULL, *now = NULL;
	assert_int_equal(e->nchanges, 1);
	assert_int_equal(shmcfg_value_format(&e->changes[0].old_value, &old), 0);
	assert_int_equal(shmcfg_value_format(&e->changes[0].new_value, &now), 0);
	if (!e->changes[0].old_set || !e->changes[0].new_set || strcmp(old, "4.0") || strcmp(now, "5.0"))
		fail_msg("the history records %s -> %s, not 4.0 -> 5.0", old, now);
	free(old);
	free(now);
	shmcfg_history_free(e);
	shmcfg_snapshot *at;
	double x = 0;
	assert_int_equal(shmcfg_snapshot_at(h, g4, &at), 0);
	assert_int_equal(shmcfg_snapshot_get_float(at, f, &x), 0);
	assert_true(x == 4.0);
	shmcfg_snapshot_release(at);
	shmcfg_close(h);
	shmcfg_unlink(name);
}

int main(int argc, char **argv)
{
	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_random_commits),
		cmocka_unit_test(test_small_heap),
		cmocka_unit_test(test_ring_overflow),
		cmocka_unit_test(test_large_txn_last_change_wins),
		cmocka_unit_test(test_waiters_count_themselves),
		cmocka_unit_test(test_slot_hint_matches_scan),
		cmocka_unit_test(test_terms_of_a_reused_chunk),
		cmocka_unit_test(test_layer_held_in_cell),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
