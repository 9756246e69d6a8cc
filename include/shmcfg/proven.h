/* SPDX-License-Identifier: MIT */
/*
 * The reads proven at attach, for the accessors that `shmctl header`
 * generates, and their out-of-line slow paths.
 * Included by <shmcfg.h>: do not include it, nor use what it declares,
 * directly; it is not the API, and changes with SHMCFG_VIEW_ABI and
 * SHMCFG_GEN_ABI.
 */
#ifndef SHMCFG_PROVEN_H
#define SHMCFG_PROVEN_H
#ifndef SHMCFG_H
#error "include <shmcfg.h>, not <shmcfg/proven.h>"
#endif

/*
 * Reads proven at attach (the accessors that `shmctl header` generates; not
 * for direct use). A generated header's handles are compile-time constants
 * and its attach helper passes the header's schema hash to
 * shmcfg_attach_with(): a handle attached so holds exactly the schema the
 * header was generated from, which proves each constant handle in range and
 * its type and nullability. These reads therefore skip shmcfg__read_cell's
 * handle-range and type checks, and for an option that is not nullable the
 * null bit (the cell's `meta` is not loaded at all). They keep the thread's
 * patch flag (a patched thread must see its patches: slow path) and the
 * slot table of the view. On a handle of another schema they read wrong
 * cells, or past the slots: use them only as a generated header does.
 * SHMCFG_GEN_ABI versions what a generated header uses of this section.
 */
#define SHMCFG_GEN_ABI 2 /* 2: accessors from shmcfg/options.h's macros */

/* A float's bits as the double. */
static inline double shmcfg__f64(uint64_t bits)
{
	double d;
	__builtin_memcpy(&d, &bits, sizeof d);
	return d;
}

/* The slots' seqlock of a proven read (below), when the accessors' copy
 * does not validate: out of line and cold, so that the straight line
 * computes nothing for it. Static, not inline (GCC refuses noinline on an
 * inline function): one copy per program file that uses it. */
static __attribute__((noinline, cold, unused)) bool shmcfg__read_proven_slots(const shmcfg *h, shmcfg_opt opt,
									     uint64_t *bits)
{
	const struct shmcfg_view *v = (const struct shmcfg_view *)h;
	for (int spin = 0; spin < SHMCFG__SPIN; spin++) {
		uint64_t cur;
		const char *slot = shmcfg__seq_begin(v, &cur);
		uint64_t val = shmcfg__seq_val(slot, opt);
		if (__builtin_expect(shmcfg__seq_end(slot, cur), 1)) {
			*bits = val;
			return true;
		}
	}
	return false;
}

/*
 * A non-nullable option: true with the value in *bits, false: slow path.
 * First the accessors' copy, a value word an option kept by every commit,
 * in blocks of a seqlock word and seven options' words (lib/read/seqlock.h,
 * seq_publish_copy(): its stores and their pairing), at SHMCFG__COPY_AT from the handle:
 *   (R1) acquire load of the block's seqlock: pairs with the writer's (W3)
 *   (R2) relaxed load of the option's word; acquire fence: pairs with the
 *        release fence after the writer's (W1)
 *   (R3) the seqlock again: unchanged and even, the word is the value of
 *        the generation whose (W3) R1 saw (or of one that did not change it).
 * Odd (a commit writing it, a writer that died inside, a segment frozen by
 * its replacer) or changed: the slots' seqlock below, which follows.
 */
static inline bool shmcfg__read_proven(const shmcfg *h, shmcfg_opt opt, uint64_t *bits)
{
	const struct shmcfg_view *v = (const struct shmcfg_view *)h;
	if (__builtin_expect(shmcfg__tls_patched != 0, 0))
		return false;
	/* the block at a constant distance from the handle, no load: one
	 * cache line of one incarnation, its pages mapped after the handle's
	 * and replaced whole when the handle follows a replacement. A view sent
	 * to the slow path (a follow into another schema, a successor it cannot
	 * open: lib/read/follow.c) keeps the replaced incarnation's copy, which
	 * its replacer's freeze left odd */
	const uint64_t *blk = (const uint64_t *)((const char *)v + SHMCFG__COPY_AT) +
			      (opt / SHMCFG__COPY_PER_BLOCK) * 8;
	uint64_t q = __atomic_load_n(&blk[0], __ATOMIC_ACQUIRE); /* (R1) */
	uint64_t word = __atomic_load_n(&blk[1 + opt % SHMCFG__COPY_PER_BLOCK], __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_ACQUIRE); /* (R2) */
	/* one test for "unchanged and even" */
	if (__builtin_expect(((__atomic_load_n(&blk[0], __ATOMIC_RELAXED) ^ q) | (q & 1)) == 0, 1)) { /* (R3) */
		*bits = word;
		return true;
	}
	return shmcfg__read_proven_slots(h, opt, bits);
}

/* A nullable option: 0 with the value in *bits, SHMCFG_NULL, or -1: slow path. */
static inline int shmcfg__read_proven_nullable(const shmcfg *h, shmcfg_opt opt, uint64_t *bits)
{
	const struct shmcfg_view *v = (const struct shmcfg_view *)h;
	if (__builtin_expect(shmcfg__tls_patched != 0, 0))
		return -1;
	for (int spin = 0; spin < SHMCFG__SPIN; spin++) {
		uint64_t cur;
		const char *slot = shmcfg__seq_begin(v, &cur);
		uint64_t val = shmcfg__seq_val(slot, opt);
		uint64_t meta = shmcfg__seq_meta(slot, opt);
		if (__builtin_expect(shmcfg__seq_end(slot, cur), 1)) {
			*bits = val;
			return (meta >> 8) & 1 ? SHMCFG_NULL : 0;
		}
	}
	return -1;
}

/** Do not use directly: the slow path of the proven reads, shmcfg__get_slow()
 * under a name of node SHMCFG_0.12, so that a program whose accessors read
 * the accessors' copy at SHMCFG__COPY_AT from the handle does not load with
 * a library older than that mapping (0.11's accessors, which loaded the
 * view's `copy`, called shmcfg__proven_slow, which stays). */
SHMCFG_EXPORT int shmcfg__proven_slow_at(const shmcfg *h, shmcfg_opt opt, shmcfg_type type,
					 uint64_t *bits) __attribute__((cold));
/** Do not use: the same under the name 0.11's accessors call (node
 * SHMCFG_0.11); they load the view's `copy`, which names the same copy. */
SHMCFG_EXPORT int shmcfg__proven_slow(const shmcfg *h, shmcfg_opt opt, shmcfg_type type,
				      uint64_t *bits) __attribute__((cold));

/* The slow path of the proven reads of non-nullable options, out of line
 * and returning the value (so that the hot path keeps it in a register):
 * the option's value, or @p def if the read fails (a corrupt segment; a
 * patched thread out of memory). Static, not inline (GCC refuses noinline
 * on an inline function): one copy per program file that uses it. */
static __attribute__((noinline, cold, unused)) int64_t
shmcfg__proven_slow_int(const shmcfg *h, shmcfg_opt opt, int64_t def)
{
	uint64_t bits;
	return shmcfg__proven_slow_at(h, opt, SHMCFG_INT, &bits) == 0 ? (int64_t)bits : def;
}

static __attribute__((noinline, cold, unused)) bool
shmcfg__proven_slow_bool(const shmcfg *h, shmcfg_opt opt, bool def)
{
	uint64_t bits;
	return shmcfg__proven_slow_at(h, opt, SHMCFG_BOOL, &bits) == 0 ? bits != 0 : def;
}

static __attribute__((noinline, cold, unused)) double
shmcfg__proven_slow_float(const shmcfg *h, shmcfg_opt opt, double def)
{
	uint64_t bits;
	return shmcfg__proven_slow_at(h, opt, SHMCFG_FLOAT, &bits) == 0 ? shmcfg__f64(bits) : def;
}

/* The slow path of the proven reads of nullable options: 0 (*ret set),
 * SHMCFG_NULL or an error, as shmcfg_get_int(). */
static __attribute__((noinline, cold, unused)) int
shmcfg__proven_slow_int_n(const shmcfg *h, shmcfg_opt opt, int64_t *ret)
{
	uint64_t bits;
	int r = shmcfg__proven_slow_at(h, opt, SHMCFG_INT, &bits);
	if (r == 0)
		*ret = (int64_t)bits;
	return r;
}

static __attribute__((noinline, cold, unused)) int
shmcfg__proven_slow_bool_n(const shmcfg *h, shmcfg_opt opt, bool *ret)
{
	uint64_t bits;
	int r = shmcfg__proven_slow_at(h, opt, SHMCFG_BOOL, &bits);
	if (r == 0)
		*ret = bits != 0;
	return r;
}

static __attribute__((noinline, cold, unused)) int
shmcfg__proven_slow_float_n(const shmcfg *h, shmcfg_opt opt, double *ret)
{
	uint64_t bits;
	int r = shmcfg__proven_slow_at(h, opt, SHMCFG_FLOAT, &bits);
	if (r == 0)
		*ret = shmcfg__f64(bits);
	return r;
}

/**
 * Do not use directly: the slow path of a generated batched read
 * (prefix_read()): the cells of @p n options from one generation, with the
 * thread's patches. bits[i] is option opts[i]'s value bits, nulls[i] whether
 * it is null; *gen the generation they belong to. On error, bits and nulls
 * hold nothing of meaning.
 * @return 0, SHMCFG_E_NOOPT, SHMCFG_E_TYPE (a handle or type of @p opts /
 *         @p types that the schema does not have), SHMCFG_E_CORRUPT (an
 *         option spoiled in the segment, or a cell), -ENOMEM (the private
 *         copy of the schema, or a patched thread's overlay).
 */
SHMCFG_EXPORT int shmcfg__get_slow_n(const shmcfg *h, size_t n, const shmcfg_opt *opts,
				     const shmcfg_type *types, uint64_t *bits, bool *nulls,
				     uint64_t *gen) __attribute__((cold));

#endif /* SHMCFG_PROVEN_H */
