/* SPDX-License-Identifier: MIT */
/*
 * Reads beyond the inline getters: the slow path behind them, copying reads,
 * the config hash, and the copy of a whole generation that read-only
 * handles (and processes without a reader entry) use as a snapshot.
 */
#include "internal.h"
#include "seqlock.h"
#include "slot.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int type_error(const shmcfg *h, shmcfg_opt opt, shmcfg_type want)
{
	return shmcfg__err(SHMCFG_E_TYPE, "%s: option is %s, read as %s", sstr(h, opt_d(h, opt)->name),
			   shmcfg_type_name(opt_d(h, opt)->type), shmcfg_type_name(want) ?: "?");
}

struct cell_arg {
	shmcfg_opt opt;
	shmcfg_type type;
	uint64_t *bits;
};

/* seq_read's read for shmcfg__get_slow: one cell, then (B), then its type. */
static int cell_read(const shmcfg *h, const struct slot_hdr *sl, uint64_t cur, void *arg)
{
	const struct cell_arg *a = arg;
	const struct shmcfg__cell *c = slot_cells(h, sl) + a->opt;
	uint64_t val = __atomic_load_n(&c->val, __ATOMIC_RELAXED);
	uint64_t meta = __atomic_load_n(&c->meta, __ATOMIC_RELAXED);
	if (!seq_valid(&sl->gen, cur_gen(cur))) /* (B) */
		return SEQ_AGAIN;
	if (META_TYPE(meta) != (unsigned)a->type)
		return shmcfg__err(SHMCFG_E_CORRUPT, "%s: cell of %s has type %u", h->name,
				   sstr(h, opt_d(h, a->opt)->name), META_TYPE(meta));
	*a->bits = val;
	return (meta & META_NULL) ? SHMCFG_NULL : 0;
}

int shmcfg__get_slow(const shmcfg *h, shmcfg_opt opt, shmcfg_type type, uint64_t *bits)
{
	assert_return(h && bits, -EINVAL);
	int ur = shmcfg__opt_use(h, opt); /* the handle in range, the option validated */
	if (ur)
		return ur;
	if (opt_d(h, opt)->type != (uint32_t)type)
		return type_error(h, opt, type);
	struct shmcfg__cell pc;
	const char *pheap;
	uint64_t psize;
	int perr;
	if (shmcfg__tls_patched && shmcfg__patched_cell(h, opt, &pc, &pheap, &psize, &perr)) {
		if (perr)
			return perr;
		if (META_TYPE(pc.meta) != (unsigned)type)
			return shmcfg__err(SHMCFG_E_CORRUPT, "%s: patched cell of %s has type %u", h->name,
					   sstr(h, opt_d(h, opt)->name), META_TYPE(pc.meta));
		*bits = pc.val;
		return (pc.meta & META_NULL) ? SHMCFG_NULL : 0;
	}
	SHMCFG_FOLLOW_OPT(h, opt); /* after the thread's patches: they belong to the handle it patched */
	return seq_read(h, cell_read, &(struct cell_arg){opt, type, bits});
}

int shmcfg__proven_slow_at(const shmcfg *h, shmcfg_opt opt, shmcfg_type type, uint64_t *bits)
{
	return shmcfg__get_slow(h, opt, type, bits);
}

int shmcfg__proven_slow(const shmcfg *h, shmcfg_opt opt, shmcfg_type type, uint64_t *bits)
{
	return shmcfg__get_slow(h, opt, type, bits);
}

/* The slow path of the inline snapshot getters: every check that the fast
 * path left out, and what a null value or the wrong type is. */
int shmcfg__snapshot_get_slow(const shmcfg_snapshot *snap, shmcfg_opt opt, shmcfg_type type, uint64_t *bits)
{
	assert_return(snap && bits, -EINVAL);
	const shmcfg *h = snap->h;
	int r = shmcfg__map_origin(snap->origin, h, &opt); /* another schema: follow.c */
	if (!r)
		r = shmcfg__opt_use(h, opt);
	if (r)
		return r;
	if (opt_d(h, opt)->type != (uint32_t)type)
		return type_error(h, opt, type);
	const struct shmcfg__cell *c = slot_cells(h, snap->slot) + opt;
	uint64_t val = __atomic_load_n(&c->val, __ATOMIC_RELAXED);
	uint64_t meta = __atomic_load_n(&c->meta, __ATOMIC_RELAXED);
	if (META_TYPE(meta) != (unsigned)type)
		return shmcfg__err(SHMCFG_E_CORRUPT, "%s: cell of %s has type %u", h->name,
				   sstr(h, opt_d(h, opt)->name), META_TYPE(meta));
	*bits = val;
	return (meta & META_NULL) ? SHMCFG_NULL : 0;
}

/*
 * The slow path of a generated batched read (shmctl header, prefix_read()):
 * n cells of one generation. A patched thread reads its overlay, a private
 * copy of one generation with its patches resolved in. Otherwise the
 * seqlock of the inline read over n cells: (A), every cell, then (B) once;
 * a failed validation follows the library's rule (seq_read). The handles
 * and types are checked here, although the header's schema hash proved
 * them: this path is cold.
 */
struct cells_arg {
	size_t n;
	const shmcfg_opt *opts;
	const shmcfg_type *types;
	uint64_t *bits;
	bool *nulls;
	uint64_t *gen_ret;
};

/* seq_read's read for read_n: every cell, then (B) once, then their types. */
static int cells_read(const shmcfg *h, const struct slot_hdr *sl, uint64_t cur, void *arg)
{
	const struct cells_arg *a = arg;
	const struct shmcfg__cell *c = slot_cells(h, sl);
	size_t bad = a->n;
	for (size_t i = 0; i < a->n; i++) {
		uint64_t meta = __atomic_load_n(&c[a->opts[i]].meta, __ATOMIC_RELAXED);
		a->bits[i] = __atomic_load_n(&c[a->opts[i]].val, __ATOMIC_RELAXED);
		a->nulls[i] = (meta & META_NULL) != 0;
		if (META_TYPE(meta) != (unsigned)a->types[i] && bad == a->n)
			bad = i;
	}
	if (!seq_valid(&sl->gen, cur_gen(cur))) /* (B) */
		return SEQ_AGAIN;
	if (bad < a->n)
		return shmcfg__err(SHMCFG_E_CORRUPT, "%s: cell of %s has the wrong type", h->name,
				   sstr(h, opt_d(h, a->opts[bad])->name));
	*a->gen_ret = cur_gen(cur);
	return 0;
}

/* The seqlock read of n options of one generation (get_slow_n). */
static int read_n(const shmcfg *h, size_t n, const shmcfg_opt *opts, const shmcfg_type *types, uint64_t *bits,
		  bool *nulls, uint64_t *gen_ret)
{
	return seq_read(h, cells_read, &(struct cells_arg){n, opts, types, bits, nulls, gen_ret});
}

int shmcfg__get_slow_n(const shmcfg *h, size_t n, const shmcfg_opt *opts, const shmcfg_type *types,
		       uint64_t *bits, bool *nulls, uint64_t *gen_ret)
{
	assert_return(h && gen_ret && (!n || (opts && types && bits && nulls)), -EINVAL);
	for (size_t i = 0; i < n; i++) {
		/* as shmcfg__get_slow: a handle out of range or a spoiled option
		 * says so (opt_d alone would give a spoiled option's inert
		 * descriptor, type 0: a type error naming nothing) */
		int ur = shmcfg__opt_use(h, opts[i]);
		if (ur)
			return ur;
		if (opt_d(h, opts[i])->type != (uint32_t)types[i])
			return type_error(h, opts[i], types[i]);
	}
	const char *pslot;
	uint64_t pgen;
	int perr;
	if (shmcfg__tls_patched && shmcfg__patched_slot(h, &pslot, &pgen, &perr)) {
		if (perr)
			return perr;
		const struct shmcfg__cell *pc = slot_cells(h, pslot);
		for (size_t i = 0; i < n; i++)
			if (META_TYPE(pc[opts[i]].meta) != (unsigned)types[i])
				return shmcfg__err(SHMCFG_E_CORRUPT, "%s: patched cell of %s has type %u",
						   h->name, sstr(h, opt_d(h, opts[i])->name),
						   META_TYPE(pc[opts[i]].meta));
		for (size_t i = 0; i < n; i++) {
			bits[i] = pc[opts[i]].val;
			nulls[i] = (pc[opts[i]].meta & META_NULL) != 0;
		}
		*gen_ret = pgen;
		return 0;
	}
	const shmcfg *h0 = h;
	SHMCFG_FOLLOW(h); /* after the thread's patches: they belong to the handle it patched */
	if (__builtin_expect(h == h0 || !h->root_map, 1))
		return read_n(h, n, opts, types, bits, nulls, gen_ret);
	/* followed into another schema: the options as the live handle's (follow.c) */
	shmcfg_opt *mopts = shmcfg__malloc((n + 1) * sizeof *mopts);
	if (!mopts)
		return shmcfg__nomem();
	int r = 0;
	for (size_t i = 0; !r && i < n; i++) {
		mopts[i] = opts[i];
		r = shmcfg__map_opt(h0, h, &mopts[i]);
	}
	if (!r)
		r = read_n(h, n, mopts, types, bits, nulls, gen_ret);
	shmcfg__free(mopts);
	return r;
}

struct value_arg {
	shmcfg_opt opt;
	shmcfg_value *ret;
};

/* seq_read's read for shmcfg_get: the cell's value copied out, then (B),
 * then its type. A copy that (B) refuses is cleared before the retry. */
static int value_read(const shmcfg *h, const struct slot_hdr *sl, uint64_t cur, void *arg)
{
	const struct value_arg *a = arg;
	struct shmcfg__cell c = {
		__atomic_load_n(&slot_cells(h, sl)[a->opt].val, __ATOMIC_RELAXED),
		__atomic_load_n(&slot_cells(h, sl)[a->opt].meta, __ATOMIC_RELAXED),
	};
	shmcfg_value v;
	int r = shmcfg__cell_value(h, &c, seg_heap(h), h->lay.heap_size, &v);
	if (!r)
		r = shmcfg__value_copy(&v, a->ret);
	/* the bytes were checked in the segment, then copied: a writer that
	 * rewrote them in between (a scribble: the stamp stays) must not get
	 * a list past us whose count or last NUL disagree with its bytes */
	if (!r && !shmcfg__list_ok(a->ret)) {
		shmcfg_value_clear(a->ret);
		r = shmcfg__err(SHMCFG_E_CORRUPT, "%s: list cell of %s changed while read", h->name,
				sstr(h, opt_d(h, a->opt)->name));
	}
	if (!seq_valid(&sl->gen, cur_gen(cur))) { /* (B) */
		if (!r)
			shmcfg_value_clear(a->ret);
		return SEQ_AGAIN;
	}
	if (!r && a->ret->type != opt_d(h, a->opt)->type) {
		shmcfg_value_clear(a->ret);
		r = shmcfg__err(SHMCFG_E_CORRUPT, "%s: cell of %s has the wrong type", h->name,
				sstr(h, opt_d(h, a->opt)->name));
	}
	return r;
}

int shmcfg_get(const shmcfg *h, shmcfg_opt opt, shmcfg_value *ret)
{
	SHMCFG_API_ENTRY;
	assert_return(h && ret, -EINVAL);
	int ur = shmcfg__opt_use(h, opt);
	if (ur)
		return ur;
	struct shmcfg__cell pc;
	const char *pheap;
	uint64_t psize;
	int perr;
	if (shmcfg__tls_patched && shmcfg__patched_cell(h, opt, &pc, &pheap, &psize, &perr)) {
		shmcfg_value v;
		if (!perr)
			perr = shmcfg__cell_value(h, &pc, pheap, psize, &v);
		return perr ? perr : shmcfg__value_copy(&v, ret);
	}
	SHMCFG_FOLLOW_OPT(h, opt); /* after the thread's patches: they belong to the handle it patched */
	return seq_read(h, value_read, &(struct value_arg){opt, ret});
}

struct hdr_arg {
	size_t off;
	uint64_t *w;
	int n;
	uint64_t gen;
};

/* seq_read's read for slot_hdr_words: the words, then (B). */
static int hdr_read(const shmcfg *h, const struct slot_hdr *sl, uint64_t cur, void *arg)
{
	struct hdr_arg *a = arg;
	const uint64_t *p = (const uint64_t *)((const char *)sl + a->off);
	for (int i = 0; i < a->n; i++)
		a->w[i] = __atomic_load_n(p + i, __ATOMIC_RELAXED);
	if (!seq_valid(&sl->gen, cur_gen(cur))) /* (B) */
		return SEQ_AGAIN;
	a->gen = cur_gen(cur);
	return 0;
}

/* n words of the current slot's header from byte off, read together under
 * the slot's seqlock: the generation they belong to, 0 if none is stable
 * (the error detail says why). */
static uint64_t slot_hdr_words(const shmcfg *h, size_t off, uint64_t *w, int n)
{
	struct hdr_arg a = {off, w, n, 0};
	if (!seq_read(h, hdr_read, &a))
		return a.gen;
	memset(w, 0, (size_t)n * sizeof *w);
	return 0;
}

uint64_t shmcfg_config_hash(const shmcfg *h, uint8_t out[16])
{
	SHMCFG_API_ENTRY;
	if (!h || !out) { /* no generation is 0: the error, as the getters of values say it */
		if (out)
			memset(out, 0, 16);
		return (void)shmcfg__err(-EINVAL, "%s: invalid argument (h && out)", __func__), 0;
	}
	h = shmcfg__live(h);
	uint64_t sum[2];
	uint64_t gen = slot_hdr_words(h, offsetof(struct slot_hdr, hash_sum), sum, 2);
	if (gen)
		shmcfg__hash_final(sum, out); /* not the commit's work: most commits are never asked */
	else
		memset(out, 0, 16);
	return gen;
}

uint64_t shmcfg_cluster_revision(const shmcfg *h)
{
	SHMCFG_API_ENTRY;
	if (!h)
		return (void)shmcfg__err(-EINVAL, "%s: invalid argument (h)", __func__), 0;
	h = shmcfg__live(h);
	uint64_t rev;
	slot_hdr_words(h, offsetof(struct slot_hdr, cluster_rev), &rev, 1);
	return rev;
}

int shmcfg__copy_snapshot(shmcfg *h, shmcfg_snapshot **ret)
{
	struct shmcfg_snapshot *s = shmcfg__malloc(sizeof *s + h->lay.slot_size + h->lay.heap_size);
	if (!s)
		return shmcfg__nomem();
	char *copy = (char *)(s + 1), *heap = copy + h->lay.slot_size;
	uint64_t gen, top;
	int r = shmcfg__seq_copy_current(h, copy, heap, &top, &gen);
	if (r) {
		shmcfg__free(s);
		return r;
	}
	*s = snap_of(h, gen, copy, heap, top, true, -1);
	copy_held(h);
	*ret = s;
	return 0;
}
