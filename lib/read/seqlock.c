/* SPDX-License-Identifier: MIT */
/*
 * The out-of-line half of the slot seqlock (seqlock.h): copying a whole slot
 * under it, and the rule for a failed validation.
 */
#include "internal.h"
#include "seqlock.h"

#include <sched.h>

/*
 * The copy below races with a writer by design (the stamp check discards a
 * torn copy), and the race is the protocol. ThreadSanitizer would report it,
 * and a suppression cannot always match it: when the reader's history has
 * been recycled its stack is lost ("failed to restore the stack"). So a TSan
 * build tells the runtime to ignore this thread's accesses for the copy (the
 * dynamic annotations every TSan runtime exports), and nothing is suppressed.
 */
#if defined(__SANITIZE_THREAD__)
void AnnotateIgnoreReadsBegin(const char *file, int line);
void AnnotateIgnoreReadsEnd(const char *file, int line);
#define RACY_COPY_BEGIN() AnnotateIgnoreReadsBegin(__FILE__, __LINE__)
#define RACY_COPY_END() AnnotateIgnoreReadsEnd(__FILE__, __LINE__)
#else
#define RACY_COPY_BEGIN() ((void)0)
#define RACY_COPY_END() ((void)0)
#endif

/*
 * A validated read of the slot named by `cur` failed its stamp check: retry
 * (0) or give up (SHMCFG_E_CORRUPT). A writer never rewrites the current
 * slot, so a failure is legitimate only if `current` moved meanwhile. The
 * acquire fence after the failed stamp load pairs with the release (or
 * seq_cst) store of whatever stamp we saw: a writer published its new
 * `current` before it marked our slot busy, so we then see `current` moved.
 * If it did not, the slot never held the generation `current` names: a
 * hostile or corrupt segment, reported at once instead of after
 * SEQ_MAX_TRIES yields.
 */
int shmcfg__seq_retry(const shmcfg *h, uint64_t cur, int *tries)
{
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	if (seq_current(h) == cur)
		return shmcfg__err(SHMCFG_E_CORRUPT, "%s: slot %u does not hold generation %llu that `current` names",
				   h->name, cur_slot(cur), (unsigned long long)cur_gen(cur));
	if (++*tries >= SEQ_MAX_TRIES)
		return shmcfg__err(SHMCFG_E_CORRUPT, "%s: no stable generation after %d tries", h->name,
				   SEQ_MAX_TRIES);
	if (*tries > 3)
		sched_yield();
	return 0;
}

/*
 * Copy the slot named by `cur` (its cells and layer references) to dst, and
 * the value heap's carved part to heap (room for heap_size bytes; *top says
 * how much was copied), and check that the slot held that generation
 * throughout (the seqlock of shmcfg.h's inline read, done over a range). The
 * slot's chunks were carved before it was published, so below the top read
 * after (A); a chunk is reused only after the slot that referred to it was
 * marked busy, which the stamp check sees. False if the slot was rewritten
 * meanwhile.
 */
bool shmcfg__seq_copy(const shmcfg *h, uint64_t cur, void *dst, char *heap, uint64_t *top)
{
	uint32_t s = cur_slot(cur);
	if (s >= h->lay.nslots)
		return false;
	const struct slot_hdr *sl = slot_at(h, s);
	if (__atomic_load_n(&sl->gen, __ATOMIC_ACQUIRE) != cur_gen(cur))
		return false;
	uint64_t used = __atomic_load_n(&h->hdr->heap_top, __ATOMIC_RELAXED);
	if (used > h->lay.heap_size)
		used = h->lay.heap_size;
	RACY_COPY_BEGIN();
	memcpy(dst, sl, h->lay.slot_size);
	memcpy(heap, seg_heap(h), used);
	RACY_COPY_END();
	*top = used;
	return seq_valid(&sl->gen, cur_gen(cur)); /* (B) */
}

struct copy_arg {
	void *dst;
	char *heap;
	uint64_t *top, *gen;
};

static int copy_read(const shmcfg *h, const struct slot_hdr *sl, uint64_t cur, void *arg)
{
	struct copy_arg *a = arg;
	if (!shmcfg__seq_copy(h, cur, a->dst, a->heap, a->top))
		return SEQ_AGAIN;
	*a->gen = cur_gen(cur);
	return 0;
}

/* Copy the current generation as shmcfg__seq_copy does, with its generation
 * in *gen: 0, or the seqlock's verdict if it never held still. */
int shmcfg__seq_copy_current(const shmcfg *h, void *dst, char *heap, uint64_t *top, uint64_t *gen)
{
	return seq_read(h, copy_read, &(struct copy_arg){dst, heap, top, gen});
}

/*
 * The last generation of a replaced segment, whose `current` says FROZEN_SLOT
 * (seqlock.h): the newest the slots hold (frozen: no writer touches them
 * again; a replacer that died and another that froze it again each named
 * one more, so it is below the word's, not just before it). Anything else
 * (a hostile `current`) is returned as it is, for seq_slot to refuse.
 */
uint64_t shmcfg__frozen_current(const shmcfg *h, uint64_t cur)
{
	/* acquire: pairs with the release store in replace.c's freeze() */
	if (!__atomic_load_n(&h->hdr->retired, __ATOMIC_ACQUIRE)) /* thawed since (or a hostile word) */
		return __atomic_load_n(&h->hdr->current, __ATOMIC_ACQUIRE);
	uint64_t best = 0, last = cur;
	for (uint32_t s = 0; s < h->lay.nslots; s++) {
		uint64_t st = __atomic_load_n(&slot_at(h, s)->gen, __ATOMIC_ACQUIRE);
		if (!(st & SLOT_BUSY) && st > best && st < cur_gen(cur)) {
			best = st;
			last = st << SHMCFG__SLOT_BITS | s;
		}
	}
	return last;
}

/*
 * A segment frozen by a replacer that died between its freeze and its
 * rename (the caller holds the writer lock, which a live replacer holds
 * past its rename, and found the segment still at its name): as it was.
 * `current` first, then `retired`: a reader that saw the frozen word finds
 * `retired` 0 and loads `current` again (shmcfg__frozen_current).
 */
void shmcfg__thaw(shmcfg *h)
{
	uint64_t cur = __atomic_load_n(&h->hdr->current, __ATOMIC_ACQUIRE);
	uint64_t last = cur_slot(cur) == FROZEN_SLOT ? shmcfg__frozen_current(h, cur) : cur;
	if (cur_slot(last) != FROZEN_SLOT)
		__atomic_store_n(&h->hdr->current, last, __ATOMIC_SEQ_CST);
	__atomic_store_n(&h->hdr->retired, 0, __ATOMIC_RELEASE);
}
