/* SPDX-License-Identifier: MIT */
/*
 * Reclamation: when may a writer reuse a slot, and when may a process reuse
 * one of its pins. Both sides of the pin protocol are here, with the
 * argument (doc/design.md, "Snapshots and pins"; the labels (F)-(H) name its
 * steps). A reader entry has SEG_PINS pin words, each a generation's tag and
 * the count of snapshots of it the owner holds (layout.h); the handle has
 * one view per pin (h->views):
 *
 *   reader (snapshot acquire)               writer (choose_slot)
 *     word[k] += 1, old tag == g ?      (G)   store stamp = BUSY | g   (F)  seq_cst
 *     load stamp == g ? use : undo      (G)   load hwm, each word      (F)  seq_cst
 *     ... release: word[k] -= 1         (H)   count > 0 and tag == g ? restore, next slot
 *
 * In the single total order of the seq_cst operations either the writer's
 * load of the word comes after the reader's increment and sees a count with
 * the tag (it leaves the slot), or the reader's stamp load comes after the
 * busy mark and sees it (it undoes its increment and takes a newer view). So
 * a slot whose stamp a counted reader saw equal to its generation is never
 * rewritten while in use. The busy mark keeps the old generation, so a
 * writer that dies between (F)'s store and its loads leaves the next
 * writer's pin check intact. A pin whose count is 0 blocks nobody: an idle
 * process keeps its last views without holding writers back.
 *
 * Inside the process the same words make views safe to reuse, without RCU:
 * view k is rewritten (make_view, under view_lock) only after a compare-
 * and-swap took its word from count 0 to tag 0, and published by adding the
 * new tag (release); a reader counts itself on the word before it reads the
 * view, and uses it only if the increment's old value carried the tag it
 * expected. Any thread may release; a release that ends a closing handle's
 * last snapshot ends the close (shmcfg__view_close).
 */
#include "internal.h"
#include "seqlock.h"
#include "slot.h"
#include "tpin.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define self_pid shmcfg__self_pid

#define CLAIM_RETRY_NS 1000000000ull /* a full reader table is tried again after 1 s */

static void close_step(shmcfg *h);

/* The handle the calling thread found no pin for (shmcfg__tls_pin is
 * shmcfg__none_tp): its snapshots count on the process's pins, without a
 * new try at each; another handle tries. */
static __thread const shmcfg *none_of __attribute__((tls_model("initial-exec")));

/*
 * Whether a process now holds a snapshot of generation gen. Each word is
 * loaded seq_cst after readers_hwm (seq_cst), after the writer's seq_cst busy
 * mark: see the argument above and shmcfg__choose_slot() below.
 */
static inline bool held(uint64_t w, uint64_t gen)
{
	return PIN_COUNT(w) && PIN_TAG(w) == GEN_TAG(gen);
}

/*
 * A thread entry (tpin.c) pins its word's generation whatever its count,
 * unless `trust`: this writer revoked every thread pin of an older
 * generation and ran the membarrier since (shmcfg__tpin_revoke); then a
 * revoked one pins it only while it holds a snapshot. Its mark word makes
 * the scan's skip below fail for every thread entry.
 */
static bool thread_pins(const struct reader_ent *e, uint64_t w, uint64_t gen, bool trust)
{
	return PIN_TAG(w) == GEN_TAG(gen) &&
	       (!trust || !(__atomic_load_n(&e->pins[TP_REVOKED], __ATOMIC_SEQ_CST) & TP_BY_WRITER) ||
		tp_held(w, __atomic_load_n(&e->pins[TP_FOREIGN], __ATOMIC_SEQ_CST)));
}

_Static_assert(SEG_PINS == 4, "shmcfg__gen_pinned loads an entry's four words");
bool shmcfg__gen_pinned(const shmcfg *h, uint64_t gen, bool trust)
{
	if (gen == 0)
		return false;
	uint32_t hwm = shmcfg__readers_hwm(h);
	for (uint32_t i = 0; i < hwm; i++) {
		const struct reader_ent *e = reader_at(h, i);
		const uint64_t *p = e->pins;
		uint64_t w0 = __atomic_load_n(&p[0], __ATOMIC_SEQ_CST), w1 = __atomic_load_n(&p[1], __ATOMIC_SEQ_CST),
			 w2 = __atomic_load_n(&p[2], __ATOMIC_SEQ_CST), w3 = __atomic_load_n(&p[3], __ATOMIC_SEQ_CST); /* (F) */
		if (__builtin_expect(!PIN_COUNT(w0 | w1 | w2 | w3), 1))
			continue; /* the usual case: an entry that holds no snapshot */
		if (__atomic_load_n(&e->kind, __ATOMIC_RELAXED) == ENTRY_THREAD) {
			if (thread_pins(e, w0, gen, trust))
				return true;
		} else if (held(w0, gen) || held(w1, gen) || held(w2, gen) || held(w3, gen))
			return true;
	}
	return false;
}

/*
 * Mark slot s busy for rewriting, if no reader holding snapshots pins the
 * generation it held (`stamp`, as loaded): the writer's side of the pin
 * protocol below. False (the stamp put back) if one does.
 */
bool shmcfg__claim_slot(shmcfg *h, uint32_t s, uint64_t stamp, bool trust)
{
	struct slot_hdr *sl = slot_at(h, s);
	seq_write_begin(&sl->gen, SLOT_BUSY | STAMP_GEN(stamp)); /* (F), (C) */
	shmcfg__fault("commit.busy");
	if (!shmcfg__gen_pinned(h, STAMP_GEN(stamp), trust))
		return true;
	seq_write_end(&sl->gen, stamp); /* put back: nothing was rewritten */
	return false;
}

/*
 * Pick the most recent slot (the one holding the latest generation, so that
 * sync_slot copies the least) that is neither current nor pinned by a
 * process holding snapshots, and mark it busy. Commits then take turns on
 * two slots while nobody pins; a reader that loaded `current` before a
 * commit and still reads its slot after the next one retries (seqlock).
 * The busy mark and the pin check are shmcfg__claim_slot(): (F) above, the
 * writer's half of the Dekker pair whose reader half is count_on() (G). If
 * a word counting a snapshot of the slot's old generation shows up after
 * the busy mark, that reader may have seen the old stamp and be using the
 * slot: the stamp is put back and another slot tried. Otherwise any reader
 * that counts itself on the slot later sees the busy mark and takes a
 * newer view.
 *
 * The busy mark keeps the old generation under SLOT_BUSY: no reader
 * validates against it, but if this writer dies before it restores the
 * stamp, the next writer's pin check still compares the pins with the old
 * generation, and a reader that saw the old stamp keeps its slot.
 *
 * With no free slot, reap dead readers, revoke the threads' idle pins
 * (tpin.c), then wait a bounded time for pins to go. A slot stamped beyond the current generation was left by a writer
 * that died before publishing it: it is free (taken last, as one whose
 * content is unknown: copied whole), and the sweep that follows that death
 * unstamps it (heap.c), so that no two slots ever carry one generation.
 */
int shmcfg__choose_slot(shmcfg *h, uint32_t cur_s, uint64_t cur_g, uint32_t *ret, uint64_t *old_stamp)
{
	uint64_t deadline = 0; /* set when no slot is free: a commit that finds one reads no clock */
	bool reaped = false, revoked = false, trust = false;
	/* The slot current before cur_s, if this handle made cur_s current
	 * (h->slot_hint) and nobody committed since: stamped cur_g - 1, one
	 * generation to replay. The scan below would choose it too, unless a
	 * failed commit left a slot unstamped and already holding cur_g
	 * (undo(), recycle() in publish.c): that handle's own hint is cleared
	 * then, but another handle's passes it over once, replaying one
	 * generation more than it had to. Checked like any other slot (stamp,
	 * base, pins, then the busy mark), so any hint is safe, a fresh
	 * handle's 0 too; it only spares reading the other headers. */
	uint32_t hint = h->slot_hint;
	if (hint < h->lay.nslots && hint != cur_s && cur_g > 1) {
		uint64_t stamp = __atomic_load_n(&slot_at(h, hint)->gen, __ATOMIC_ACQUIRE);
		if (stamp == cur_g - 1 && shmcfg__slot_base(h, hint, stamp, cur_g) == stamp &&
		    !shmcfg__gen_pinned(h, stamp, false)) {
			shmcfg__fault("commit.chosen"); /* as below: chosen, not yet marked */
			if (shmcfg__claim_slot(h, hint, stamp, false)) {
				*ret = hint;
				*old_stamp = stamp;
				return 0;
			}
		}
	}
	for (;;) {
		uint32_t best = UINT32_MAX;
		uint64_t best_stamp = 0, best_key = 0;
		for (uint32_t s = 0; s < h->lay.nslots; s++) {
			if (s == cur_s)
				continue;
			uint64_t stamp = __atomic_load_n(&slot_at(h, s)->gen, __ATOMIC_ACQUIRE);
			uint64_t g = STAMP_GEN(stamp);
			/* the fewer generations behind, the less to copy (sync_slot);
			 * of two as recent, the one a reader used last: its pages
			 * are the warm ones */
			uint64_t key = shmcfg__slot_base(h, s, stamp, cur_g) * 2 + (g != 0) + 1;
			if (key > best_key && !shmcfg__gen_pinned(h, g, trust))
				best = s, best_stamp = stamp, best_key = key;
		}
		if (best != UINT32_MAX) {
			shmcfg__fault("commit.chosen");
			if (shmcfg__claim_slot(h, best, best_stamp, trust)) {
				*ret = best;
				*old_stamp = best_stamp;
				return 0;
			}
			continue;
		}
		if (!reaped) {
			reaped = true;
			if (shmcfg__reap(h, NULL, NULL) > 0)
				continue;
		}
		if (!revoked) {
			revoked = true;
			if ((trust = shmcfg__tpin_revoke(h, cur_g, trust)))
				continue; /* scan again, the counts trusted */
		}
		uint64_t now = now_ns(CLOCK_MONOTONIC);
		if (!deadline)
			deadline = commit_deadline(h, now);
		if (now >= deadline) {
			char who[256];
			shmcfg__pin_holders(h, who, sizeof who);
			return shmcfg__err(SHMCFG_E_BUSY,
					   "%s: every free slot is pinned by a live reader for %d ms: %s",
					   h->name, h->commit_timeout_ms, who);
		}
		usleep(1000);
		reaped = revoked = false;
	}
}


/*
 * The process's first pinned snapshot (or commit: wlock.c) claims its
 * reader entry. When every
 * entry is held by a live process, snapshots copy the slot instead (as on a
 * read-only handle); the claim is tried again after CLAIM_RETRY_NS, and the
 * segment counts processes that fell back (shmctl stat). Returns the entry,
 * or -1 to copy.
 */
int shmcfg__claim_entry(shmcfg *h)
{
	pthread_mutex_lock(&h->view_lock);
	if (h->reader < 0 && now_ns(CLOCK_MONOTONIC) >= h->claim_after_ns && shmcfg__reader_claim(h) < 0) {
		h->claim_after_ns = now_ns(CLOCK_MONOTONIC) + CLAIM_RETRY_NS;
		if (!h->counted_fallback) {
			h->counted_fallback = true;
			__atomic_fetch_add(&h->hdr->copy_fallbacks, 1, __ATOMIC_RELAXED);
		}
		shmcfg__clear_err(); /* copying is a success, not an error */
	}
	int reader = h->reader;
	pthread_mutex_unlock(&h->view_lock);
	return reader;
}

/*
 * seq_read's read for make_view: the current generation and its slot, the
 * stamp checked (the fast path checks it again, after counting itself).
 */
struct cur_arg {
	const struct slot_hdr *sl;
	uint64_t gen, cur;
};

static int cur_read(const shmcfg *h, const struct slot_hdr *sl, uint64_t cur, void *arg)
{
	(void)h;
	struct cur_arg *a = arg;
	if (__atomic_load_n(&sl->gen, __ATOMIC_ACQUIRE) != cur_gen(cur))
		return SEQ_AGAIN;
	a->sl = sl;
	a->gen = cur_gen(cur);
	a->cur = cur;
	return 0;
}

/*
 * Under view_lock: make a view of the current generation in a pin of our
 * entry that holds no snapshot, and make it the newest (h->cur_pin). Its
 * pin in *pin, its generation in *gen: 0, -EAGAIN if every pin is held, or
 * the seqlock's verdict.
 */
static int make_view(shmcfg *h, int *pin, uint64_t *gen)
{
	struct cur_arg a = {NULL, 0, 0};
	int r = seq_read(h, cur_read, &a);
	if (r)
		return r;
	int k0 = __atomic_load_n(&h->cur_pin, __ATOMIC_RELAXED);
	/* another thread made it; its word's tag is checked too: one that
	 * another process overwrote must not send every acquire back here */
	if (k0 >= 0 && h->views[k0].gen == a.gen &&
	    PIN_TAG(__atomic_load_n(&h->pins[k0], __ATOMIC_RELAXED)) == GEN_TAG(a.gen)) {
		*pin = k0, *gen = a.gen;
		return 0;
	}
	for (unsigned k = 0; k < SEG_PINS; k++) {
		uint64_t w = __atomic_load_n(&h->pins[k], __ATOMIC_RELAXED);
		/* take the word from count 0 to tag 0: no reader counted on it
		 * can match a tag now, and none holds the view we rewrite */
		if (PIN_COUNT(w) || !__atomic_compare_exchange_n(&h->pins[k], &w, 0, false, __ATOMIC_ACQUIRE,
								 __ATOMIC_RELAXED))
			continue;
		h->views[k] = snap_of(h, a.gen, (const char *)a.sl, seg_heap(h), h->lay.heap_size, false, (int)k);
		/* (G) the tag, seq_cst (a release for the view's fields): a reader
		 * whose increment reads it from here reads the view we wrote */
		__atomic_fetch_add(&h->pins[k], GEN_TAG(a.gen) << PIN_TAG_SHIFT, __ATOMIC_SEQ_CST);
		/* release: pairs with the fast path's acquire load */
		__atomic_store_n(&h->cur_pin, (int)k, __ATOMIC_RELEASE);
		*pin = (int)k, *gen = a.gen;
		return 0;
	}
	return -EAGAIN;
}

/*
 * (G) Count ourselves on pin k's word, then check that it carries the tag
 * of the generation wanted (view k holds it, and cannot be rewritten while
 * we count) and that the slot still holds it (Dekker with choose_slot():
 * the writer loads the word after its busy mark, we load the stamp after
 * our increment, both seq_cst). 1: counted, the view is ours until
 * release; 0: a view of another generation, or its slot reused while this
 * process held no snapshot of it: the count undone; -1: undone, and the
 * count nears its limit (copy instead). No generation is 0: want 0 (a
 * handle whose view is poisoned, follow.c) must not match a word that
 * make_view has just set to tag 0.
 */
static inline __attribute__((always_inline)) int count_on(shmcfg *h, int k, uint64_t want)
{
	uint64_t old = __atomic_fetch_add(&h->pins[k], 1, __ATOMIC_SEQ_CST);
	if (__builtin_expect(PIN_TAG(old) == GEN_TAG(want) && want && PIN_COUNT(old) < PIN_COUNT_LIMIT, 1) &&
	    __builtin_expect(__atomic_load_n(&((const struct slot_hdr *)h->views[k].slot)->gen, __ATOMIC_SEQ_CST) ==
				     want, 1) &&
	    /* a fork under way: Dekker with fork.c's prepare, which loads the
	     * words after it sets the flag (undone here: acquire_slow waits) */
	    __builtin_expect(!__atomic_load_n(&shmcfg__forking, __ATOMIC_SEQ_CST), 1))
		return 1;
	__atomic_fetch_sub(&h->pins[k], 1, __ATOMIC_RELEASE);
	return PIN_COUNT(old) >= PIN_COUNT_LIMIT ? -1 : 0;
}

/*
 * The calling thread's pin moves to the current generation (tpin.c): it
 * holds no snapshot (else -1: the process's pins take this one), then the
 * Dekker of count_on(), with an exchange of the word for its increment. 1:
 * counted on a view of the current generation; 0: its slot was reused
 * meanwhile, or a fork is under way (the pin now pins nothing: tag 0).
 * The revocation is cleared after the stamp check: a writer that revoked
 * the old tag either sees the new one counted, or we see its busy mark.
 */
static int tpin_repin(shmcfg *h, struct tpin *tp)
{
	struct shmcfg__tpin *p = &tp->pub;
	uint64_t w = __atomic_load_n(&p->w[TP_WORD], __ATOMIC_RELAXED);
	/* acquire: another thread's release of our view happens before we rewrite it */
	uint64_t f = __atomic_load_n(&p->w[TP_FOREIGN], __ATOMIC_ACQUIRE);
	if (tp_held(w, f))
		return -1;
	struct cur_arg a = {NULL, 0, 0};
	if (seq_read(h, cur_read, &a))
		return -1; /* the process's path says why */
	uint64_t idle = tp_word(GEN_TAG(a.gen) << PIN_TAG_SHIFT, w);
	shmcfg__fault("snapshot.repin");
	__atomic_exchange_n(&p->w[TP_WORD], tp_word(idle, w + 1), __ATOMIC_SEQ_CST); /* (G) */
	shmcfg__fault("snapshot.repinned");
	if (__atomic_load_n(&a.sl->gen, __ATOMIC_SEQ_CST) != a.gen ||
	    __atomic_load_n(&shmcfg__forking, __ATOMIC_SEQ_CST)) {
		__atomic_store_n(&p->w[TP_WORD], w & PIN_COUNT_MASK, __ATOMIC_RELEASE); /* tag 0: pins nothing */
		p->cur_ptr = NULL;
		return 0;
	}
	tp->view = snap_of(h, a.gen, (const char *)a.sl, seg_heap(h), h->lay.heap_size, false, -1);
	tp->view.view.tp = p;
	p->cur_ptr = __atomic_load_n(&h->view.current, __ATOMIC_RELAXED);
	p->cur = a.cur;
	shmcfg__tpin_set(tp, idle, f);
	/* after the stamp check (tests/model/tpin.pml); a fork's bit stays until its end */
	__atomic_fetch_and(&p->w[TP_REVOKED], ~(uint64_t)TP_BY_WRITER, __ATOMIC_SEQ_CST);
	return 1;
}

/* A release by the owner (shmcfg/read.h) found its handle closing. */
void shmcfg__tpin_closed(struct shmcfg__tpin *pub)
{
	shmcfg *h = pub ? shmcfg__tpin_closing((struct tpin *)pub) : NULL;
	if (h)
		close_step(h);
}

/*
 * Everything but the fast path: another schema's handle, read-only handles,
 * a child, the first snapshot (the entry's claim), a view of a newer
 * generation (make_view), and the rounds while commits keep coming.
 */
static __attribute__((noinline)) int acquire_slow(shmcfg *h, shmcfg_snapshot **ret)
{
	SHMCFG_API_ENTRY;
	if (ret)
		*ret = NULL; /* on failure (the inline acquire's callers see it so) */
	assert_return_as("shmcfg_snapshot_acquire", h && ret, -EINVAL);
	const shmcfg *h0 = h;
	SHMCFG_FOLLOW(h);
	if (__builtin_expect(h != h0 && h->root_map, 0)) {
		/* followed into another schema: a copy of its own, whose calls
		 * map the caller's options (the pinned views are shared) */
		int r = shmcfg__copy_snapshot(h, ret);
		if (!r)
			snap_mapped(*ret, (shmcfg *)h0);
		return r;
	}
	if (h->rdonly)
		return shmcfg__copy_snapshot(h, ret);
	/* a child must not use the parent's views or its reader entry;
	 * self_pid is kept by the fork handler, so this costs no syscall */
	if (h->pid != self_pid)
		return shmcfg__err(SHMCFG_E_FORKED, "%s: snapshot in a child of the attaching process: attach again",
				   h->name);
	/* the thread's own pin, cached for the inline path (shmcfg.h); none:
	 * the process's pins, until an error or a snapshot of another handle */
	struct tpin *tp = shmcfg__tpin_of(h);
	if (!tp) {
		shmcfg__tls_pin = shmcfg__none_tp;
		none_of = h0;
	} else if ((shmcfg__tls_pin & ~(uintptr_t)3) != (uintptr_t)tp)
		shmcfg__tpin_cache(tp);
	for (int round = 0; tp && round < SEQ_MAX_TRIES; round++) {
		while (__atomic_load_n(&shmcfg__forking, __ATOMIC_ACQUIRE))
			sched_yield(); /* another thread forks: a snapshot of after it */
		int c = shmcfg__tpin_more(tp, h);
		if (c == 0)
			c = tpin_repin(h, tp);
		if (c > 0) {
			shmcfg__tpin_cache(tp);
			*ret = &tp->view;
			return 0;
		}
		if (c < 0)
			break;
	}
	/* acquire: pairs with the release store of the claim (readers.c) */
	int reader = __atomic_load_n(&h->reader, __ATOMIC_ACQUIRE);
	if (reader < 0 && (reader = shmcfg__claim_entry(h)) < 0)
		return shmcfg__copy_snapshot(h, ret);
	/* the view to take: the newest, of the current generation; after a
	 * round that made one, that one even if a newer commit came meanwhile
	 * (it is at least as new as the call) */
	int k = __atomic_load_n(&h->cur_pin, __ATOMIC_ACQUIRE);
	uint64_t want = shmcfg_generation(h);
	for (int round = 0; round < SEQ_MAX_TRIES; round++) {
		while (__atomic_load_n(&shmcfg__forking, __ATOMIC_ACQUIRE))
			sched_yield(); /* another thread forks: a snapshot of after it */
		int c = k >= 0 ? count_on(h, k, want) : 0;
		if (c > 0) {
			*ret = &h->views[k];
			return 0;
		}
		if (c < 0)
			return shmcfg__copy_snapshot(h, ret);
		pthread_mutex_lock(&h->view_lock);
		int r = make_view(h, &k, &want);
		pthread_mutex_unlock(&h->view_lock);
		if (r)
			return r == -EAGAIN ? shmcfg__copy_snapshot(h, ret) : r;
	}
	return shmcfg__copy_snapshot(h, ret);
}

/* The fast path: the thread's pin (tpin.h), or else the newest view of
 * the process's pins, of a live handle of this process. */
int shmcfg_snapshot_acquire(shmcfg *h, shmcfg_snapshot **ret)
{
	SHMCFG_API_FAST(h && ret && h->pid == self_pid && shmcfg__live(h) == h &&
			!__atomic_load_n(&h->follow_err, __ATOMIC_RELAXED)) {
		if (__builtin_expect(shmcfg__tpin_acquire(h, ret), 1))
			return 0; /* counted until release */
		if (shmcfg__tls_pin != shmcfg__none_tp || h != none_of)
			return acquire_slow(h, ret);
		/* acquire: pairs with make_view's release store (h->pins is
		 * set, at the claim, before any view is made) */
		int k = __atomic_load_n(&h->cur_pin, __ATOMIC_ACQUIRE);
		if (__builtin_expect(k < 0, 0))
			return acquire_slow(h, ret); /* none yet */
		shmcfg__fault("snapshot.count");
		if (__builtin_expect(count_on(h, k, shmcfg_generation(h)) > 0, 1)) {
			*ret = &h->views[k];
			return 0; /* counted until release */
		}
	}
	return acquire_slow(h, ret);
}

/* A closing handle's pin, or its copies, went to 0: one of the close's
 * steps (view_close). The caller made its decrement acquire first (an
 * acquire load of the word after it: it reads the close's fetch_or or an
 * RMW of its release sequence, so close_pending and close_deferred, set
 * before it, are visible; a load, not a fence, which TSan follows). */
static void close_step(shmcfg *h)
{
	/* acq_rel: the last step sees every other's reads of the handle done */
	if (__atomic_sub_fetch(&h->close_pending, 1, __ATOMIC_ACQ_REL) == 0)
		h->close_deferred(h);
}

/* A copy released: copy_held()'s count, with the same steps as a pin's. */
static void copy_done(shmcfg *h)
{
	/* release: our reads of the handle happen before the close's last step */
	unsigned old = __atomic_fetch_sub(&h->copies, 1, __ATOMIC_RELEASE);
	if (__builtin_expect(old == (COPIES_CLOSED | 1), 0)) {
		(void)__atomic_load_n(&h->copies, __ATOMIC_ACQUIRE); /* see close_step() */
		close_step(h);
	}
}

/*
 * A release from pin k of a closing handle, or that found its count 0. A
 * count of 0 under a held snapshot is a double release or another
 * process's write to our entry: the decrement is undone, not wrapped into
 * the tag, and logged (a releaser keeps the thread's error detail). A
 * closing handle's pin that went to 0 is one of the close's steps.
 */
static __attribute__((noinline)) void release_last(shmcfg *h, int k, uint64_t old)
{
	SHMCFG_API_KEEP;
	if (!PIN_COUNT(old)) {
		__atomic_fetch_add(&h->pins[k], 1, __ATOMIC_RELAXED);
		shmcfg__log(SHMCFG_LOG_WARNING,
			    "%s: snapshot release: pin %d counted no snapshot (released twice, or another "
			    "process wrote this process's reader entry)", h->name, k);
		return;
	}
	if (PIN_COUNT(old) == 1) {
		(void)__atomic_load_n(&h->pins[k], __ATOMIC_ACQUIRE); /* see close_step() */
		close_step(h);
	}
}

/* The rest: NULL, a copy, a snapshot inherited across fork() (the count is
 * the parent's). */
static __attribute__((noinline)) shmcfg_snapshot *release_slow(shmcfg_snapshot *snap)
{
	SHMCFG_API_KEEP;
	if (snap && snap->is_copy) {
		shmcfg *h = snap->h, *origin = (shmcfg *)snap->origin;
		shmcfg__free(snap);
		copy_done(h);
		if (origin)
			copy_done(origin);
	}
	return NULL;
}

shmcfg_snapshot *shmcfg_snapshot_release(shmcfg_snapshot *snap)
{
	SHMCFG_API_FAST_KEEP(snap && !snap->is_copy && snap->h->pid == self_pid) {
		struct shmcfg__tpin *tp = snap->view.tp;
		if (tp) {
			shmcfg *step;
			/* the calling thread's own pin, inline; else tpin.c */
			if (__builtin_expect(!shmcfg__tpin_release(snap), 0) &&
			    (step = shmcfg__tpin_release_slow((struct tpin *)tp)))
				close_step(step); /* a closing handle's, the step ours */
			return NULL;
		}
		shmcfg *h = snap->h;
		/* (H) release: our reads of the slot happen before a writer sees
		 * the count drop, and before make_view's compare-and-swap
		 * reuses the view */
		uint64_t old = __atomic_fetch_sub(&h->pins[snap->pin], 1, __ATOMIC_RELEASE);
		/* one compare: the count was 0 (not ours) or the handle is closing */
		if (__builtin_expect((uint32_t)(old & (PIN_CLOSED | PIN_COUNT_MASK)) - 1u >= PIN_COUNT_MASK, 0))
			release_last(h, snap->pin, old);
		return NULL;
	}
	return release_slow(snap);
}

/* Whether the process holds pinned snapshots of h now (its entry's
 * counts): fork.c asks, before a fork, for the child's close. Seq_cst
 * loads: fork.c's Dekker with count_on(). */
bool shmcfg__pins_held(const shmcfg *h)
{
	if (h->pid != self_pid || h->rdonly)
		return false; /* an inherited handle's pins are the parent's */
	if (shmcfg__tpin_held(h))
		return true;
	/* acquire: pairs with the release store of the claim (readers.c), which
	 * another thread's first snapshot may make as this process forks: its
	 * h->pins, stored before, is then the entry's */
	if (__atomic_load_n(&h->reader, __ATOMIC_ACQUIRE) < 0 || !h->pins)
		return false;
	for (unsigned k = 0; k < SEG_PINS; k++)
		if (PIN_COUNT(__atomic_load_n(&h->pins[k], __ATOMIC_SEQ_CST)))
			return true;
	return false;
}

/*
 * Close: the views are in the handle, and copies read its schema, so a
 * snapshot still held (by any thread: a program that closes before it
 * releases, a test whose assertion failed with a snapshot held) defers the
 * end of the close to the release of the last one. Each pin word is marked
 * PIN_CLOSED and the copies' count COPIES_CLOSED; close_pending counts the
 * steps left: one per pin and one for the copies, each taken here if it
 * holds nothing and otherwise by the release that takes its count to 0
 * (which sees the mark), plus this call's own. Whoever takes the last step
 * runs destroy(h). True if that is this call: the caller destroys the
 * handle now; false: it must not touch h. In a child of the attaching
 * process the pins are the parent's: only the child's own copies count,
 * and a handle the parent held snapshots of when it forked is not freed at
 * all (forked_holding: segment.c's handle_destroy keeps its memory). A
 * close the parent began before the fork can end in the child only by the
 * release of its last copy, which the pins' steps were taken before (the
 * child never takes one): nothing pinned is left to read it then.
 */
bool shmcfg__view_close(shmcfg *h, void (*destroy)(shmcfg *h))
{
	bool owner = getpid() == h->pid;
	if (!owner && h->forked_holding)
		return true;
	bool pins = owner && h->reader >= 0 && !h->rdonly;
	pthread_mutex_lock(&h->view_lock); /* a child's was reset at fork (fork.c) */
	h->close_deferred = destroy;
	/* before any mark: a release that sees one may take a step */
	__atomic_store_n(&h->close_pending, SEG_PINS + 2, __ATOMIC_RELAXED);
	unsigned steps = 1;
	if (owner && !h->rdonly)
		steps += shmcfg__tpin_close(h); /* a step per thread pin; the rest at their last release */
	/* acq_rel: a release that sees the mark sees close_pending set */
	if (!(__atomic_fetch_or(&h->copies, COPIES_CLOSED, __ATOMIC_ACQ_REL) & ~COPIES_CLOSED))
		steps++;
	for (unsigned k = 0; k < SEG_PINS; k++)
		if (!pins || !PIN_COUNT(__atomic_fetch_or(&h->pins[k], PIN_CLOSED, __ATOMIC_ACQ_REL)))
			steps++;
	pthread_mutex_unlock(&h->view_lock);
	return __atomic_sub_fetch(&h->close_pending, steps, __ATOMIC_ACQ_REL) == 0;
}
