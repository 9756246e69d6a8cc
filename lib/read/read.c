/* SPDX-License-Identifier: MIT */
/*
 * Reads beyond the inline getters: the slow path behind them, copying reads,
 * the config hash, and the copy of a whole generation that read-only
 * handles (and processes without a reader entry) use as a snapshot.
 */
#include "internal.h"
#include "seqlock.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int type_error(const shmcfg *h, shmcfg_opt opt, shmcfg_type want)
{
	return shmcfg__err(SHMCFG_E_TYPE, "%s: option is %s, read as %s", sstr(h, opt_d(h, opt)->name),
			   shmcfg_type_name(opt_d(h, opt)->type), shmcfg_type_name(want) ?: "?");
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
	for (int tries = 0;;) {
		uint64_t cur;
		int r = 0;
		const struct slot_hdr *sl = seq_slot(h, &cur, &r); /* (A) */
		if (!sl)
			return r;
		const struct shmcfg__cell *c = slot_cells(h, sl) + opt;
		uint64_t val = __atomic_load_n(&c->val, __ATOMIC_RELAXED);
		uint64_t meta = __atomic_load_n(&c->meta, __ATOMIC_RELAXED);
		if (!seq_valid(&sl->gen, cur_gen(cur))) { /* (B) */
			if ((r = shmcfg__seq_retry(h, cur, &tries)))
				return r;
			continue;
		}
		if (META_TYPE(meta) != (unsigned)type)
			return shmcfg__err(SHMCFG_E_CORRUPT, "%s: cell of %s has type %u", h->name,
					   sstr(h, opt_d(h, opt)->name), META_TYPE(meta));
		*bits = val;
		return (meta & META_NULL) ? SHMCFG_NULL : 0;
	}
}

/*
 * The slow path of a generated batched read (shmctl header, prefix_read()):
 * n cells of one generation. A patched thread reads its overlay, a private
 * copy of one generation with its patches resolved in. Otherwise the
 * seqlock of the inline read over n cells: (A), every cell, then (B) once;
 * a failed validation follows the library's rule (shmcfg__seq_retry). The
 * handles and types are checked here, although the header's schema hash
 * proved them: this path is cold.
 */
/* The seqlock read of n options of one generation (get_slow_n). */
static int read_n(const shmcfg *h, size_t n, const shmcfg_opt *opts, const shmcfg_type *types, uint64_t *bits,
		  bool *nulls, uint64_t *gen_ret)
{
	for (int tries = 0;;) {
		uint64_t cur;
		int r = 0;
		const struct slot_hdr *sl = seq_slot(h, &cur, &r); /* (A) */
		if (!sl)
			return r;
		const struct shmcfg__cell *c = slot_cells(h, sl);
		size_t bad = n;
		for (size_t i = 0; i < n; i++) {
			uint64_t meta = __atomic_load_n(&c[opts[i]].meta, __ATOMIC_RELAXED);
			bits[i] = __atomic_load_n(&c[opts[i]].val, __ATOMIC_RELAXED);
			nulls[i] = (meta & META_NULL) != 0;
			if (META_TYPE(meta) != (unsigned)types[i] && bad == n)
				bad = i;
		}
		if (!seq_valid(&sl->gen, cur_gen(cur))) { /* (B) */
			if ((r = shmcfg__seq_retry(h, cur, &tries)))
				return r;
			continue;
		}
		if (bad < n)
			return shmcfg__err(SHMCFG_E_CORRUPT, "%s: cell of %s has the wrong type", h->name,
					   sstr(h, opt_d(h, opts[bad])->name));
		*gen_ret = cur_gen(cur);
		return 0;
	}
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
	for (int tries = 0;;) {
		uint64_t cur;
		int r = 0;
		const struct slot_hdr *sl = seq_slot(h, &cur, &r); /* (A) */
		if (!sl)
			return r;
		struct shmcfg__cell c = {
			__atomic_load_n(&slot_cells(h, sl)[opt].val, __ATOMIC_RELAXED),
			__atomic_load_n(&slot_cells(h, sl)[opt].meta, __ATOMIC_RELAXED),
		};
		shmcfg_value v;
		r = shmcfg__cell_value(h, &c, seg_heap(h), h->lay.heap_size, &v);
		if (!r)
			r = shmcfg__value_copy(&v, ret);
		/* the bytes were checked in the segment, then copied: a writer that
		 * rewrote them in between (a scribble: the stamp stays) must not get
		 * a list past us whose count or last NUL disagree with its bytes */
		if (!r && !shmcfg__list_ok(ret)) {
			shmcfg_value_clear(ret);
			r = shmcfg__err(SHMCFG_E_CORRUPT, "%s: list cell of %s changed while read", h->name,
					sstr(h, opt_d(h, opt)->name));
		}
		if (!seq_valid(&sl->gen, cur_gen(cur))) { /* (B) */
			if (!r)
				shmcfg_value_clear(ret);
			if ((r = shmcfg__seq_retry(h, cur, &tries)))
				return r;
			continue;
		}
		if (!r && ret->type != opt_d(h, opt)->type) {
			shmcfg_value_clear(ret);
			r = shmcfg__err(SHMCFG_E_CORRUPT, "%s: cell of %s has the wrong type", h->name,
					sstr(h, opt_d(h, opt)->name));
		}
		return r;
	}
}

/* n words of the current slot's header from byte off, read together under
 * the slot's seqlock: the generation they belong to, 0 if none is stable. */
static uint64_t slot_hdr_words(const shmcfg *h, size_t off, uint64_t *w, int n)
{
	for (int tries = 0;;) {
		uint64_t cur = seq_current(h) /* (A) */;
		if (cur_slot(cur) >= h->lay.nslots)
			break;
		const uint64_t *p = (const uint64_t *)((const char *)slot_at(h, cur_slot(cur)) + off);
		for (int i = 0; i < n; i++)
			w[i] = __atomic_load_n(p + i, __ATOMIC_RELAXED);
		if (seq_valid(&slot_at(h, cur_slot(cur))->gen, cur_gen(cur))) /* (B) */
			return cur_gen(cur);
		if (shmcfg__seq_retry(h, cur, &tries))
			break;
	}
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
	uint64_t w[2];
	uint64_t gen = slot_hdr_words(h, offsetof(struct slot_hdr, config_hash), w, 2);
	memcpy(out, w, 16);
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
	*s = (struct shmcfg_snapshot){h, NULL, gen, copy, heap, top, true, -1};
	*ret = s;
	return 0;
}
