/* SPDX-License-Identifier: MIT */
/* Recovery from dead and failing writers, as the value heap (layout 3) makes
 * it: what the next writer's sweep (`wip`) may and may not free, what a
 * slot left behind by a dead writer looks like to shmcfg_check(), and what
 * a commit that runs out of memory half-way leaves in the slot it undoes.
 *
 * Everything is real: shared memory, fork(), SIGKILL at the fault points of
 * the test copy of the library (SHMCFG_FAULT), and its resource seam
 * (tests/faultsim.h) for the failing allocations. Children never use
 * cmocka: they report through their exit status. */

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>

#include "internal.h"
#include "slot.h" /* the slot, reader entry and heap internals */

#include "common.h"
#include "faultsim.h"
#include "proc.h"

static int commit_reset(shmcfg *h, shmcfg_opt opt)
{
	shmcfg_txn *t;
	int r = shmcfg_txn_begin(h, &t);
	if (r)
		return r;
	if ((r = shmcfg_txn_reset(t, opt))) {
		shmcfg_txn_abort(t);
		return r;
	}
	return shmcfg_txn_commit(t, NULL);
}

static char *str_of(shmcfg_snapshot *s, shmcfg_opt opt)
{
	shmcfg_value v;
	int r = shmcfg_snapshot_get(s, opt, &v);
	if (r)
		return strdup(shmcfg_errname(r));
	return strndup(v.u.str.ptr, v.u.str.len);
}

struct writer_arg {
	const char *name;
	const char *faults; /* SHMCFG_FAULT */
	const char *c;      /* the value of t.c it commits */
};

static int fault_writer_main(void *p)
{
	struct writer_arg *a = p;
	shmcfg *h = NULL;
	int r = shmcfg_attach(a->name, 0, NULL, &h);
	CHECK(r == 0, 2, "attach: %s", shmcfg_strerror(r));
	setenv("SHMCFG_FAULT", a->faults, 1);
	r = commit_str(h, T_C, a->c, NULL);
	CHECK(false, 10, "commit returned %d (%s): the fault points %s never fired", r, shmcfg_strerror(r),
	      a->faults);
}

/* ------------------------------------------------------------------ */
/* 1. The sweep after a writer died inside its busy-mark window         */
/* ------------------------------------------------------------------ */

#define LONG1 "generation two: a string of a hundred bytes, so that its chunk has a size class of its own......"
#define LONG2 "generation five: another hundred bytes, in a chunk of the very same class as gen two's string..."
_Static_assert(sizeof LONG1 == sizeof LONG2, "same size class");

/*
 * A writer that dies between its busy mark and its pin re-check leaves the
 * slot marked busy with its old generation, because a reader may have
 * validated that generation just before the mark (design.md, "A commit",
 * step 3; test_trust: test_writer_death_after_busy_mark_spares_snapshot).
 * Such a reader keeps reading the slot's cells *and its chunks*. The next
 * writer's sweep must not treat that slot as holding nothing: if it drops
 * its references, the chunks only it used go to the free lists (their
 * first cell becomes a free-list link at once) and the next commit writes
 * other values into them, under the reader's feet.
 *
 * Slots: 0 = generation 1, pinned by a live snapshot of another handle;
 * 1 (A) = generation 2 with t.c = LONG1 in a chunk of its own; 2 =
 * generation 3; 3 unstamped. The writer W of generation 4 takes A (the
 * most recent free slot: the reader P is idle then), stops; P becomes
 * active on generation 2 (it validated A's stamp just before W's mark); W
 * marks A busy and dies. Generation 4 again (t.c = LONG2, a chunk of
 * LONG1's class), by the next writer, must leave P's generation 2 alone.
 */
static void test_sweep_keeps_chunks_of_busy_slot_in_use(void **state)
{
	(void)state;
	const char *name = new_name("rec-sweepbusy");
	setenv("SHMCFG_THREAD_PINS", "0", 1); /* the process's pins; test_tpin.c has the threads' */
	shmcfg *h = keep(test_create(name, &(shmcfg_create_opts){.slots = 4}));
	shmcfg_set_commit_timeout(h, 500);
	/* Q: another handle (its own reader entry) holds generation 1 */
	shmcfg *q = NULL;
	assert_int_equal(shmcfg_attach(name, 0, NULL, &q), 0);
	keep(q);
	shmcfg_snapshot *sq;
	assert_int_equal(shmcfg_snapshot_acquire(q, &sq), 0);
	assert_int_equal(shmcfg_snapshot_generation(sq), 1);
	assert_int_equal(cur_slot(h->hdr->current), 0);
	uint64_t gen = 0;
	assert_int_equal(commit_str(h, T_C, LONG1, &gen), 0);
	assert_int_equal(gen, 2);
	uint32_t A = cur_slot(h->hdr->current);
	/* P: a snapshot of generation 2 in slot A, through h */
	shmcfg_snapshot *sp;
	assert_int_equal(shmcfg_snapshot_acquire(h, &sp), 0);
	assert_int_equal(shmcfg_snapshot_generation(sp), 2);
	assert_true(h->reader >= 0);
	struct reader_ent *e = reader_at(h, (uint32_t)h->reader);
	char *before = str_of(sp, T_C);
	assert_string_equal(before, LONG1);
	free(before);
	/* P idle for a while (as if released): writers may take A */
	uint64_t *pin = &e->pins[((struct shmcfg_snapshot *)sp)->pin];
	__atomic_fetch_sub(pin, 1, __ATOMIC_SEQ_CST);
	assert_int_equal(commit_str(h, T_C, "three", &gen), 0);
	assert_int_equal(gen, 3);
	assert_int_not_equal(cur_slot(h->hdr->current), A);
	/* W chooses A (slot 0 is pinned, A holds the latest generation after
	 * the current one) */
	struct writer_arg wa = {name, "commit.chosen:1:stop,commit.busy", "w"};
	pid_t w = spawn(fault_writer_main, &wa);
	int st = wait_stopped(w, 10000);
	if (!WIFSTOPPED(st)) {
		char t[64];
		status_text(st, t, sizeof t);
		fail_msg("the writer did not stop at commit.chosen: it %s", t);
	}
	/* P is active again on generation 2: it validated A's stamp before
	 * W's busy mark, so W's pin check (had it run) would have spared A */
	__atomic_fetch_add(pin, 1, __ATOMIC_SEQ_CST);
	assert_int_equal(kill(w, SIGCONT), 0);
	assert_child_killed(w);
	assert_true(__atomic_load_n(&slot_at(h, A)->gen, __ATOMIC_ACQUIRE) == (SLOT_BUSY | 2));
	/* the next writer sweeps, takes another slot and writes LONG2 */
	int r = commit_str(h, T_C, LONG2, &gen);
	if (r)
		fail_msg("commit after the writer's death: %s: %s", shmcfg_strerror(r), shmcfg_errdetail());
	assert_int_equal(gen, 4);
	assert_int_not_equal(cur_slot(h->hdr->current), A);
	/* P's generation 2 is as it was: value and layer */
	char *now = str_of(sp, T_C);
	shmcfg_value lay;
	int lr = shmcfg_snapshot_layer(sp, T_C, SHMCFG_SRC_USER, &lay);
	char *layer = lr == 0 ? strndup(lay.u.str.ptr, lay.u.str.len) : strdup(lr > 0 ? "(not set)" : shmcfg_errname(lr));
	bool torn = strcmp(now, LONG1) || strcmp(layer, LONG1);
	/* P done, Q done (before any failure: a handle closes only without
	 * snapshots held) */
	shmcfg_snapshot_release(sp);
	shmcfg_snapshot_release(sq);
	if (torn)
		fail_msg("a snapshot of generation 2 in use while a writer died in its busy-mark window "
			 "changed after the next commit:\n#  value \"%s\"\n#  user layer \"%s\"\n#  (was \"%s\")",
			 now, layer, LONG1);
	free(now);
	free(layer);
	assert_int_equal(shmcfg__heap_verify(h), 0);
	/* everything is free again and sound */
	for (int k = 0; k < 12; k++)
		assert_int_equal(commit_str(h, T_C, k % 2 ? LONG2 : LONG1, NULL), 0);
	assert_int_equal(shmcfg__heap_verify(h), 0);
	assert_int_equal(shmcfg_check(h, true, print_problem, NULL), 0);
	drop(q);
	drop(h);
}

/* ------------------------------------------------------------------ */
/* 2. The slot a writer stamped but did not publish                    */
/* ------------------------------------------------------------------ */

/*
 * A writer killed after stamping its slot with generation g + 1 and before
 * publishing it leaves a slot stamped beyond the current generation. The
 * next writer's sweep drops that slot's references (it holds nothing
 * published). If the next commit changes nothing, nobody takes the slot,
 * and it must not look like a damaged generation to the deep check (a
 * false alarm: "recreate the segment"). Nor may it pass for the generation
 * g + 1 that a later commit publishes in another slot.
 */
static void test_unpublished_slot_of_dead_writer(void **state)
{
	(void)state;
	const char *name = new_name("rec-stamped");
	shmcfg *h = keep(test_create(name, &(shmcfg_create_opts){.slots = 4}));
	uint64_t gen = 0;
	assert_int_equal(commit_str(h, T_C, "two", &gen), 0);
	assert_int_equal(gen, 2);
	struct writer_arg wa = {name, "commit.stamped", "dead writer's value"};
	pid_t w = spawn(fault_writer_main, &wa);
	assert_child_killed(w);
	uint32_t stale = UINT32_MAX;
	for (uint32_t s = 0; s < h->lay.nslots; s++)
		if (__atomic_load_n(&slot_at(h, s)->gen, __ATOMIC_ACQUIRE) == 3)
			stale = s;
	assert_true(stale != UINT32_MAX);
	/* a commit that changes nothing: the sweep runs, nothing is published */
	assert_int_equal(commit_str(h, T_C, "two", &gen), 0);
	assert_int_equal(gen, 2);
	assert_int_equal(shmcfg__heap_verify(h), 0);
	int bad = shmcfg_check(h, true, print_problem, NULL);
	if (bad)
		fail_msg("deep check after a writer died between stamping and publishing, and a commit that "
			 "changed nothing: %d problem(s) (slot %u, stamped 3, never published)", bad, stale);
	/* generation 3 is published; it is the only slot that claims it */
	shmcfg_snapshot *ro_snap;
	shmcfg *ro = attach_ro(name);
	assert_int_equal(commit_int(h, T_A, 3, &gen), 0);
	assert_int_equal(gen, 3);
	int holders = 0;
	for (uint32_t s = 0; s < h->lay.nslots; s++)
		holders += STAMP_GEN(__atomic_load_n(&slot_at(h, s)->gen, __ATOMIC_ACQUIRE)) == 3;
	assert_int_equal(holders, 1);
	bool changed[T_COUNT];
	assert_int_equal(shmcfg_changes(h, 2, 3, changed), 3); /* t.a and its two aliases */
	assert_true(changed[T_A] && !changed[T_C]);
	assert_int_equal(shmcfg_snapshot_acquire(ro, &ro_snap), 0);
	char *c = str_of(ro_snap, T_C);
	assert_string_equal(c, "two");
	free(c);
	shmcfg_snapshot_release(ro_snap);
	assert_int_equal(shmcfg_check(h, true, print_problem, NULL), 0);
	assert_int_equal(shmcfg__heap_verify(h), 0);
	drop(ro);
	drop(h);
}

/* ------------------------------------------------------------------ */
/* 3. A commit that runs out of memory half-way                        */
/* ------------------------------------------------------------------ */

/* Nine options (more than a change set holds before it grows), and the
 * aliases of t.a follow: every allocation of the commit is reached. */
static int commit_many(shmcfg *h, int k)
{
	shmcfg_txn *t;
	int r = shmcfg_txn_begin(h, &t);
	if (r)
		return r;
	char c[32], items[64], txt[16];
	snprintf(c, sizeof c, "value %d", k);
	snprintf(items, sizeof items, "[\"p%d\", \"q\"]", k);
	snprintf(txt, sizeof txt, "%d", k % 90);
	const char *tags[] = {"z", k % 2 ? "y" : "w"};
	shmcfg_value set;
	if ((r = shmcfg_value_list(SHMCFG_SET, tags, 2, &set))) {
		shmcfg_txn_abort(t);
		return r;
	}
	if ((r = shmcfg_txn_set_int(t, T_A, 40 + k)) || (r = shmcfg_txn_set_int(t, T_B, -40 - k)) ||
	    (r = shmcfg_txn_set_str(t, T_C, c)) || (r = shmcfg_txn_set_text(t, T_FLAG, k % 2 ? "true" : "false")) ||
	    (r = shmcfg_txn_set_float(t, T_RATIO, 0.125 * (k % 8))) ||
	    (r = shmcfg_txn_set_text(t, T_MODE, k % 2 ? "slow" : "fast")) ||
	    (r = shmcfg_txn_set_text(t, T_ITEMS, items)) || (r = shmcfg_txn_set(t, T_TAGS, &set)) ||
	    (r = shmcfg_txn_set_text(t, T_OPT_INT, txt))) {
		shmcfg_value_clear(&set);
		shmcfg_txn_abort(t);
		return r;
	}
	shmcfg_value_clear(&set);
	return shmcfg_txn_commit(t, NULL);
}

/* Every option's value and layers, as text (but skip's). */
static char *state_of(shmcfg *h, shmcfg_opt skip)
{
	shmcfg_snapshot *s;
	assert_int_equal(shmcfg_snapshot_acquire(h, &s), 0);
	size_t cap = 16384, len = 0;
	char *out = malloc(cap);
	assert_non_null(out);
	out[0] = 0;
	for (shmcfg_opt i = 0; i < T_COUNT; i++) {
		if (i == skip)
			continue;
		shmcfg_source src[] = {SHMCFG_SRC_DEFAULT, SHMCFG_SRC_KNOB, SHMCFG_SRC_ENV_DEFAULT, SHMCFG_SRC_USER,
				       SHMCFG_SRC_ENV_FORCE};
		shmcfg_value v;
		char *txt = NULL;
		assert_int_equal(shmcfg_snapshot_get(s, i, &v), 0);
		assert_int_equal(shmcfg_value_format(&v, &txt), 0);
		len += (size_t)snprintf(out + len, cap - len, "%u=%s(%s)", i, txt, shmcfg_source_name(v.source));
		free(txt);
		for (size_t l = 0; l < sizeof src / sizeof src[0]; l++) {
			int r = shmcfg_snapshot_layer(s, i, src[l], &v);
			if (r == 0) {
				assert_int_equal(shmcfg_value_format(&v, &txt), 0);
				len += (size_t)snprintf(out + len, cap - len, " %s:%s", shmcfg_source_name(src[l]), txt);
				free(txt);
			} else if (r < 0 && r != SHMCFG_E_LAYER) {
				len += (size_t)snprintf(out + len, cap - len, " %s:%s", shmcfg_source_name(src[l]),
							shmcfg_errname(r));
			}
		}
		len += (size_t)snprintf(out + len, cap - len, "\n");
		assert_true(len < cap);
	}
	shmcfg_snapshot_release(s);
	return out;
}

/*
 * For N = 1, 2, ...: the Nth allocation of a commit of nine options fails.
 * The commit fails (-ENOMEM) and undoes what it wrote into its slot, which
 * stays unstamped and is the first one the next commit takes. That next
 * commit (of another option) must publish exactly the configuration before
 * the failure plus its own change: nothing of the failed commit may come
 * back through the slot it undid.
 */
static void test_commit_out_of_memory_leaves_nothing_behind(void **state)
{
	(void)state;
	const char *name = new_name("rec-oom");
	shmcfg *h = keep(test_create(name, &(shmcfg_create_opts){.slots = 3}));
	assert_int_equal(commit_many(h, 1), 0);
	int injected = 0;
	for (unsigned long n = 1; n < 500; n++) {
		char *want = state_of(h, T_ENV_D), *want0 = state_of(h, T_COUNT);
		shmcfg__faultsim(SHMCFG_FAULTSIM_ALLOC, n, false);
		int r = commit_many(h, 2 * (int)n); /* even: every option differs from k = 1 */
		unsigned long failures = shmcfg__faultsim_failures();
		shmcfg__faultsim(SHMCFG_FAULTSIM_ALLOC, 0, false);
		if (!failures) { /* the commit made fewer than n allocations: done */
			assert_int_equal(r, 0);
			free(want);
			free(want0);
			break;
		}
		if (r == 0) { /* a fallback succeeded: nothing to undo */
			free(want);
			free(want0);
			continue;
		}
		injected++;
		assert_int_equal(r, -ENOMEM);
		/* the next commit takes the slot the failed one undid */
		assert_int_equal(commit_int(h, T_ENV_D, (int64_t)n, NULL), 0);
		char *got = state_of(h, T_ENV_D);
		if (strcmp(want, got) != 0)
			fail_msg("allocation %lu of a commit failed; the next commit published more than its "
				 "own change:\n# before:\n%s# after:\n%s", n, want, got);
		/* and back: t.env_d's user layer goes */
		assert_int_equal(commit_reset(h, T_ENV_D), 0);
		char *back = state_of(h, T_COUNT);
		if (strcmp(want0, back) != 0)
			fail_msg("allocation %lu of a commit failed; two commits later the configuration "
				 "differs:\n# before:\n%s# after:\n%s", n, want0, back);
		if (shmcfg_check(h, true, print_problem, NULL) || shmcfg__heap_verify(h))
			fail_msg("allocation %lu of a commit failed: the segment no longer checks out (%s)", n,
				 shmcfg_errdetail());
		free(want);
		free(want0);
		free(got);
		free(back);
	}
	assert_true(injected > 0);
	drop(h);
}

/* ------------------------------------------------------------------ */
/* 4. A reader that stops before it counts itself on its view          */
/* ------------------------------------------------------------------ */

static int commit_ab(shmcfg *h, int64_t n, uint64_t *gen)
{
	shmcfg_txn *t;
	int r = shmcfg_txn_begin(h, &t);
	if (r)
		return r;
	if ((r = shmcfg_txn_set_int(t, T_A, n)) || (r = shmcfg_txn_set_int(t, T_B, -n))) {
		shmcfg_txn_abort(t);
		return r;
	}
	return shmcfg_txn_commit(t, gen);
}

/* Takes a snapshot of generation 2 (a = 1), releases it, then stops in its
 * next acquire just before it counts itself on that view (snapshot.count);
 * resumed after the writer reused the view's slot, it must not hand out
 * the view: generation g shows a = g - 1 = -b. */
static int paused_reader_main(void *p)
{
	shmcfg *h = NULL;
	int r = shmcfg_attach(p, 0, NULL, &h);
	CHECK(r == 0, 2, "attach: %s", shmcfg_strerror(r));
	shmcfg_snapshot *s;
	CHECK(shmcfg_snapshot_acquire(h, &s) == 0 && shmcfg_snapshot_generation(s) == 2, 3, "first snapshot");
	shmcfg_snapshot_release(s);
	setenv("SHMCFG_FAULT", "snapshot.count:1:stop", 1);
	r = shmcfg_snapshot_acquire(h, &s);
	unsetenv("SHMCFG_FAULT");
	CHECK(r == 0, 4, "second snapshot: %s", shmcfg_strerror(r));
	int64_t a = 0, b = 0;
	uint64_t g = shmcfg_snapshot_generation(s);
	CHECK(shmcfg_snapshot_get_int(s, T_A, &a) == 0 && shmcfg_snapshot_get_int(s, T_B, &b) == 0, 5, "reads");
	CHECK(a == (int64_t)g - 1 && b == -a, 6,
	      "a snapshot of generation %" PRIu64 " shows a = %" PRId64 ", b = %" PRId64 ": its slot was reused", g, a,
	      b);
	CHECK(g == 4, 7, "the second snapshot is of generation %" PRIu64 ", not the current 4", g);
	shmcfg_snapshot_release(s);
	shmcfg_close(h);
	return 0;
}

/*
 * Two slots: generation 2 in X. The reader R's view of it is idle (no
 * snapshot held), so writers may reuse X; R stops in its next acquire,
 * having read that generation 2 is current, before its increment. Two
 * commits then put generation 3 in the other slot and generation 4 in X.
 * Resumed, R's increment finds its view's tag (2) the generation it wants;
 * its stamp check, after the increment, must see X rewritten and take a
 * new view (lib/read/reclaim.c, (G)).
 */
static void test_reader_stopped_before_count(void **state)
{
	(void)state;
	const char *name = new_name("rec-count");
	shmcfg *h = keep(test_create(name, &(shmcfg_create_opts){.slots = 2}));
	uint64_t gen = 0;
	assert_int_equal(commit_ab(h, 1, &gen), 0);
	assert_int_equal(gen, 2);
	uint32_t X = cur_slot(h->hdr->current);
	pid_t r = spawn(paused_reader_main, (void *)name);
	assert_child_stops(r, "snapshot.count");
	assert_int_equal(commit_ab(h, 2, &gen), 0);
	assert_int_equal(commit_ab(h, 3, &gen), 0);
	assert_int_equal(gen, 4);
	assert_int_equal(cur_slot(h->hdr->current), X); /* the view's slot, rewritten */
	assert_int_equal(kill(r, SIGCONT), 0);
	assert_child_ok(r);
	drop(h);
}

int main(void)
{
	unsetenv("SHMCFG_FAULT");
	if (getenv("TEST_FILTER"))
		cmocka_set_test_filter(getenv("TEST_FILTER"));
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_sweep_keeps_chunks_of_busy_slot_in_use, teardown),
		cmocka_unit_test_teardown(test_unpublished_slot_of_dead_writer, teardown),
		cmocka_unit_test_teardown(test_commit_out_of_memory_leaves_nothing_behind, teardown),
		cmocka_unit_test_teardown(test_reader_stopped_before_count, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
