/* SPDX-License-Identifier: MIT */
/*
 * The slot seqlock: the one place where a reader validates what it read of a
 * slot (or of a commit record) and a writer makes its rewrite detectable.
 * doc/design.md ("Reads") gives the argument; the labels (A)-(E) are its
 * names, so each pairing is found by grep. The library's other seqlocks
 * prefix theirs: (hist-B)-(hist-D) and (hist-H1) for a history entry
 * (history.c), (sync-S1) and (sync-S2) for the cluster agent's record
 * (cluster.c); the pin protocol is (F)-(H) (reclaim.c).
 *
 * A stamp word says which generation the protected bytes hold: 0 when empty,
 * the generation when valid, SLOT_BUSY | old generation while a writer
 * rewrites them (the busy mark keeps the old generation for the writer's pin
 * check: lib/read/reclaim.c).
 *
 * Reader                                    Writer
 *   cur = load_acquire(current)      (A)      store stamp = busy mark      (seq_cst)
 *   copy the bytes (relaxed)                  fence_release                (C)
 *   fence_acquire                    (B)      rewrite the bytes
 *   load_relaxed(stamp) == gen ?              store_release(stamp = gen)   (D)
 *                                             store_seq_cst(current = gen) (E)
 *
 * (A) pairs with (E): a reader that sees generation g in `current` sees every
 * store that built g's slot. (B) pairs with (C): if the copy observed any store
 * made after (C), the fences synchronise and the stamp load sees the busy mark
 * or a later generation, never g. Generations only grow, so a stamp equal to g
 * proves the bytes were g's throughout.
 *
 * The reader's loop is written once, seq_read below: (A), the caller's copy
 * and check ((B), or the pin's seq_cst check: reclaim.c), and on a failed
 * check the library's rule (shmcfg__seq_retry). Every read of the current
 * slot in the library uses it: the slow reads (read.c), the copies of the
 * current generation (shmcfg__seq_copy_current) and the pin (reclaim.c).
 * A copy of a slot named otherwise (shmcfg__seq_copy in watch.c, inspect.c)
 * has nothing to retry: a failed check means that generation is gone.
 *
 * The public inline getter (include/shmcfg.h.in, shmcfg__read_cell) keeps its
 * own copy of the reader's side, since it is compiled into programs; tests
 * check that the two give the same verdict (tests/test_layout.c).
 */
#ifndef SHMCFG_SEQLOCK_H
#define SHMCFG_SEQLOCK_H

#include "internal.h"

#include <limits.h>

/* A replaced segment's `current` names the successor's first generation
 * in slot FROZEN_SLOT, which no segment has (SEG_MAX_SLOTS is 255): its
 * inline readers and the caches keyed by the word (the Python binding's)
 * see a change and take the slow path, which follows (replace.c). */
#define FROZEN_SLOT 0xffu
uint64_t shmcfg__frozen_current(const shmcfg *h, uint64_t cur);
void shmcfg__thaw(shmcfg *h);

/* (A): the generation and slot to read: of a frozen segment, its last. */
static inline uint64_t seq_current(const shmcfg *h)
{
	uint64_t cur = __atomic_load_n(&h->hdr->current, __ATOMIC_ACQUIRE);
	if (__builtin_expect(cur_slot(cur) == FROZEN_SLOT, 0))
		cur = shmcfg__frozen_current(h, cur);
	return cur;
}

/* (A), and the slot that `current` names; NULL with *err SHMCFG_E_CORRUPT
 * if it names none (a hostile segment: the inline read's table of slot
 * addresses maps such an index to slot 0 instead). */
static inline const struct slot_hdr *seq_slot(const shmcfg *h, uint64_t *cur, int *err)
{
	*cur = seq_current(h);
	if (__builtin_expect(cur_slot(*cur) < h->lay.nslots, 1))
		return slot_at(h, cur_slot(*cur));
	*err = shmcfg__err(SHMCFG_E_CORRUPT, "%s: current names slot %u of %u", h->name, cur_slot(*cur),
			   h->lay.nslots);
	return NULL;
}

/* (B): whether the bytes read since the stamp was expected to be `gen` are
 * that generation's. */
static inline bool seq_valid(const uint64_t *stamp, uint64_t gen)
{
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	return __atomic_load_n(stamp, __ATOMIC_RELAXED) == gen;
}

/* Writer: mark the bytes busy, then (C) order the mark before the rewrite.
 * seq_cst: the mark is also one side of the pin protocol (reclaim.c). */
static inline void seq_write_begin(uint64_t *stamp, uint64_t busy)
{
	__atomic_store_n(stamp, busy, __ATOMIC_SEQ_CST);
	__atomic_thread_fence(__ATOMIC_RELEASE);
}

/* Writer of a record that no reader pins (a commit record, a history
 * entry): the mark needs no store-load order, only (C) before the rewrite,
 * which the release fence gives (Boehm's seqlock writer; on x86 a plain
 * store, where seq_cst costs a locked exchange). */
static inline void seq_entry_begin(uint64_t *stamp)
{
	__atomic_store_n(stamp, 0, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
}

/* Writer: (D) everything written is visible to a reader that sees `gen`. */
static inline void seq_write_end(uint64_t *stamp, uint64_t gen)
{
	__atomic_store_n(stamp, gen, __ATOMIC_RELEASE);
}

/*
 * (E): publish a generation; release, paired with every read's acquire load
 * of `current`. It needs no seq_cst (a locked exchange on x86): a waiter
 * (watch.c) that reads the futex word from the commit's seq_cst bump after
 * it synchronises with that bump, and so sees this store, which precedes it;
 * one that reads the word from before the bump is woken by it, or finds the
 * word changed in FUTEX_WAIT. The bump and the writer lock's release, both
 * locked instructions, drain it before the commit returns.
 */
static inline void seq_publish(shmcfg *h, uint64_t gen, uint32_t slot)
{
	__atomic_store_n(&h->hdr->current, gen << SHMCFG__SLOT_BITS | slot, __ATOMIC_RELEASE);
}

/*
 * The accessors' copy (layout.h), brought to generation gen of slot `slot`
 * around its publication (E), each block under its own seqlock:
 *   (W1) the blocks of the options the commit changed (ids[0, n)), or every
 *        block when `whole` or copy_dirty was found set (a writer died
 *        between W1 and W3, or a replacer froze the segment), odd (relaxed),
 *        then a release fence: each word store below is ordered after its
 *        block's W1 for an accessor's acquire fence
 *   (W2) those options' words, from the slot's cells
 *   (E)  `current`, release: seq_publish()
 *   (W3) those blocks even again, past their old values (release): pairs
 *        with an accessor's acquire load of its block's seqlock, which then
 *        sees (W2)
 * An accessor (include/shmcfg/proven.h) takes a word only when its block's
 * seqlock is even and the same before and after it (an acquire fence
 * between, paired with W1's): the word of a generation whose W3 it saw, or
 * of one that did not change it. (E) inside (W1)..(W3) keeps a thread's
 * reads of an option from going backwards across the two paths: a slot read
 * that saw generation g (an acquire of `current`, paired with E) is followed
 * by an accessor read that finds the block odd (W1 came before E) or at W3
 * of g or later; an accessor read of g (it saw W3, after E) by a slot read of
 * g or later. A block's W1 and W3 may come twice (two of its options
 * changed): odd stays odd, and each W3 leaves it even, growing.
 */
static inline void copy_odd(uint64_t *blk)
{
	__atomic_store_n(blk, __atomic_load_n(blk, __ATOMIC_RELAXED) | 1, __ATOMIC_RELAXED);
}

static inline void copy_even(uint64_t *blk)
{
	__atomic_store_n(blk, (__atomic_load_n(blk, __ATOMIC_RELAXED) | 1) + 1, __ATOMIC_RELEASE);
}

static inline void copy_word(const shmcfg *h, const struct shmcfg__cell *cells, uint32_t o)
{
	__atomic_store_n(copy_block(h, o) + COPY_WORD(o), __atomic_load_n(&cells[o].val, __ATOMIC_RELAXED),
			 __ATOMIC_RELAXED);
}

static inline void seq_publish_copy(shmcfg *h, uint64_t gen, uint32_t slot, const uint32_t *ids, size_t n,
				    bool whole)
{
	struct seg_header *hd = h->hdr;
	const struct shmcfg__cell *cells = slot_cells(h, slot_at(h, slot));
	uint32_t nopts = h->lay.nopts;
	whole = whole || hd->copy_dirty;
	hd->copy_dirty = 1; /* a death from here on: the next commit rewrites it whole */
	if (whole) {
		for (uint32_t o = 0; o < nopts; o += SHMCFG__COPY_PER_BLOCK) /* (W1) */
			copy_odd(copy_block(h, o));
		__atomic_thread_fence(__ATOMIC_RELEASE);
		for (uint32_t o = 0; o < nopts; o++) /* (W2) */
			copy_word(h, cells, o);
	} else {
		/* each block's W1, the fence, then its word: a block's own W1
		 * precedes its words, which is all its readers' R2 needs */
		for (size_t k = 0; k < n; k++) { /* ids < nopts: the build's */
			copy_odd(copy_block(h, ids[k])); /* (W1) */
			__atomic_thread_fence(__ATOMIC_RELEASE);
			copy_word(h, cells, ids[k]); /* (W2) */
		}
	}
	shmcfg__fault("commit.copy");
	seq_publish(h, gen, slot); /* (E) */
	shmcfg__fault("commit.published");
	if (whole)
		for (uint32_t o = 0; o < nopts; o += SHMCFG__COPY_PER_BLOCK) /* (W3) */
			copy_even(copy_block(h, o));
	else
		for (size_t k = 0; k < n; k++)
			copy_even(copy_block(h, ids[k]));
	hd->copy_dirty = 0;
}

/*
 * The retry bounds of the library's seqlocks, in one place: a reader that
 * never sees a stable copy gives up rather than spin for ever (a writer may
 * have died mid-rewrite, or a hostile one rewrites without end).
 *   SEQ_MAX_TRIES   a slot (A)-(E), while `current` keeps moving; the
 *                   reader yields between tries (shmcfg__seq_retry)
 *   HIST_MAX_TRIES  a history entry (hist-B)-(hist-D): -ENOENT after it,
 *                   as if the entry were gone (history.c)
 *   SYNC_MAX_TRIES  the cluster agent's record (sync-S1)-(sync-S2),
 *                   yielding after SYNC_SPIN_TRIES (cluster.c)
 * The inline getters' bound, SHMCFG__SPIN, is public (include/shmcfg/read.h):
 * past it they take the slow path, which counts SEQ_MAX_TRIES again.
 */
#define SEQ_MAX_TRIES 10000
#define HIST_MAX_TRIES 100
#define SYNC_MAX_TRIES 1000
#define SYNC_SPIN_TRIES 3

/* A validation failed: retry (0) or give up (SHMCFG_E_CORRUPT): seqlock.c. */
int shmcfg__seq_retry(const shmcfg *h, uint64_t cur, int *tries);
/* Copy the slot named by `cur` and the value heap under the seqlock. */
bool shmcfg__seq_copy(const shmcfg *h, uint64_t cur, void *dst, char *heap, uint64_t *top);
/* shmcfg__seq_copy of the current generation, through seq_read. */
int shmcfg__seq_copy_current(const shmcfg *h, void *dst, char *heap, uint64_t *top, uint64_t *gen);

/* A read's verdict that the slot changed under it (its check failed) and that
 * it undid what it did: seq_read retries. No errno, no SHMCFG_E_ code and no
 * result (0, SHMCFG_NULL) is INT_MIN. */
#define SEQ_AGAIN INT_MIN

/* Copy what a reader wants of slot sl, which `cur` names, and check it: its
 * result, or SEQ_AGAIN. */
typedef int (*seq_read_fn)(const shmcfg *h, const struct slot_hdr *sl, uint64_t cur, void *arg);

/*
 * The reader's side of the slot seqlock: (A), then read(), again while it
 * says SEQ_AGAIN and the library's rule allows (shmcfg__seq_retry). Returns
 * read()'s result, or the error of (A) (seq_slot) or of the rule. Inlined
 * with its constant read(), which the compiler then inlines too: no indirect
 * call. always_inline: the getters' slow path is cold, and gcc inlines
 * nothing into a cold function of its own accord.
 */
static inline __attribute__((always_inline)) int seq_read(const shmcfg *h, seq_read_fn read, void *arg)
{
	for (int tries = 0;;) {
		uint64_t cur;
		int r = 0;
		const struct slot_hdr *sl = seq_slot(h, &cur, &r); /* (A) */
		if (!sl)
			return r;
		if ((r = read(h, sl, cur, arg)) != SEQ_AGAIN)
			return r;
		if ((r = shmcfg__seq_retry(h, cur, &tries)))
			return r;
	}
}

#endif
