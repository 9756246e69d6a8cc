/* SPDX-License-Identifier: MIT */
/*
 * Building a slot: a transaction's layer changes become new chunks (heap.c),
 * then the effective values of the changed options and of their dependents
 * (the targets of their implications, their aliases) are resolved again, in
 * implication order, with the precedence implied > env_force > user >
 * env_default > knob > default. Only what changes is touched, and the slot's
 * config hash sum and checksum follow term by term (hash.c). Used by commits
 * (publish.c) on a slot of the segment, and by a patched thread's private
 * view (patch.c) on a copy.
 */
#include "internal.h"
#include "slot.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- the slot's cells and references, with the sums kept up to date ---- */

/*
 * Option i is about to change. Its first change in a tracked build takes
 * its old terms out of the sums (before anything of it is written or its
 * old chunk let go); shmcfg__resolve() adds the terms it ends with. So an
 * option costs two terms however often the build rewrites it.
 */
static int changed(struct build *b, uint32_t i)
{
	int r = 0;
	bool first = shmcfg__ids_add(&b->changed, i, &r);
	return first && b->track ? shmcfg__add_terms(b, i, (uint64_t)-1, NULL) : r;
}

/* Point option i at chunk lref: counted in the segment's heap. */
static int move_lref(struct build *b, uint32_t i, uint32_t lref)
{
	uint32_t old = b->lrefs[i];
	if (b->shared && old != lref) {
		int r = shmcfg__heap_ref(b->h, lref);
		if (r)
			return r;
		shmcfg__heap_unref(b->h, old);
	}
	b->lrefs[i] = lref;
	return 0;
}

/*
 * ... as a change of the build: option i joins `changed` before anything is
 * written. A failed commit copies back exactly the options in `changed`
 * (publish.c, undo), so an option written but left out (the set could not
 * grow) would stay in the undone slot, and the next commit that takes it
 * would publish the failed commit's value.
 */
static int set_lref(struct build *b, uint32_t i, uint32_t lref)
{
	if (b->lrefs[i] == lref)
		return 0;
	int r = changed(b, i);
	return r ? r : move_lref(b, i, lref);
}

/* A cell copied as its two words, in 8-byte loads and stores. The cells a
 * build copies were mostly just written a word at a time (chunk_read,
 * hold_in_cell): a 16-byte load of two 8-byte stores cannot be forwarded
 * from them and waits for both to retire (a store-forwarding stall: keep_hist
 * spent 6% of a 100-change commit's time there). The empty asm keeps the
 * compiler from merging the two words into one vector load again. */
static inline void cell_copy_words(struct shmcfg__cell *d, const struct shmcfg__cell *s)
{
	uint64_t v = s->val, m = s->meta;
	__asm__("" : "+r"(v), "+r"(m));
	d->val = v;
	d->meta = m;
}

static int set_cell(struct build *b, uint32_t i, const struct shmcfg__cell *c, bool *moved)
{
	*moved = b->cells[i].val != c->val || b->cells[i].meta != c->meta;
	if (!*moved)
		return 0;
	int r = changed(b, i); /* before the write: see set_lref() */
	if (r)
		return r;
	cell_copy_words(&b->cells[i], c);
	return 0;
}

/* Option i's value as the other slot holds it: for bringing a slot up to
 * date (untracked: the caller copies the sums too), or back (undo). Not a
 * change of the build: it joins no set (what a sync copies is no commit's
 * change, and an undo copies back the members of `changed`). */
int shmcfg__copy_opt(struct build *b, uint32_t i, const void *from)
{
	const struct shmcfg__cell *c = slot_cells(b->h, from) + i;
	b->cells[i] = (struct shmcfg__cell){__atomic_load_n(&c->val, __ATOMIC_RELAXED),
					    __atomic_load_n(&c->meta, __ATOMIC_RELAXED)};
	return move_lref(b, i, __atomic_load_n(slot_lrefs(b->h, from) + i, __ATOMIC_RELAXED));
}

/* ---- layers ---- */

static int layers_of(const struct build *b, uint32_t i, struct shmcfg__cell lay[NLAYERS])
{
	if (b->seen && b->lrefs[i] == b->seen_lref && lref_names_chunk(b->seen_lref)) {
		memcpy(lay, b->seen, NLAYERS * sizeof *lay);
		return 0;
	}
	int r = shmcfg__chunk_read(b->heap, b->heap_size, b->lrefs[i], &b->cells[i], lay);
	if (r)
		shmcfg__err(r, "%s: %s: %s", b->h->name, sstr(b->h, opt_d(b->h, i)->name), shmcfg_errdetail());
	return r;
}


/* The history's cells of opt's changes ch[0, n), so that the history reads
 * no chunk again: each one's layer before the build (old) and after it (now). */
static void keep_hist(struct build *b, const struct change *ch, size_t n, const struct shmcfg__cell old[NLAYERS],
		      const struct shmcfg__cell now[NLAYERS])
{
	if (!b->hist)
		return;
	hist_cells *hc = b->hist + (ch - b->hist_ch);
	for (size_t i = 0; i < n; i++) {
		cell_copy_words(&hc[i][0], &old[ch[i].layer]);
		cell_copy_words(&hc[i][1], &now[ch[i].layer]);
	}
}

/* keep_hist() with the layers after the build all unset but layer l, which
 * is now_l: without making that array (a copy of shmcfg__no_layers) first. */
static void keep_hist_one(struct build *b, const struct change *ch, size_t n, const struct shmcfg__cell old[NLAYERS],
			  enum layer l, const struct shmcfg__cell *now_l)
{
	if (!b->hist)
		return;
	hist_cells *hc = b->hist + (ch - b->hist_ch);
	for (size_t i = 0; i < n; i++) {
		cell_copy_words(&hc[i][0], &old[ch[i].layer]);
		cell_copy_words(&hc[i][1], ch[i].layer == l ? now_l : &shmcfg__no_layers[ch[i].layer]);
	}
}

static uint64_t value_bytes(const shmcfg_value *v)
{
	if (v->is_null || v->type < SHMCFG_STR)
		return 0;
	return (v->type == SHMCFG_STR ? v->u.str.len : v->u.list.bytes) + 1;
}

static int settle(struct build *b, uint32_t i, const struct opt_desc *d, const struct shmcfg__cell *c);

/* Option opt's layers are chunk lref (0: none) now: it is queued for
 * resolution. */
static int seed(struct build *b, uint32_t opt, uint32_t lref)
{
	int r = 0;
	shmcfg__ids_add(&b->seeds, opt, &r);
	return r ? r : set_lref(b, opt, lref);
}

static int malformed(const struct build *b, const struct opt_desc *d)
{
	return shmcfg__err(SHMCFG_E_CORRUPT, "%s: the current layer cell of %s is malformed", b->h->name,
			   sstr(b->h, d->name));
}

/* Whether option opt may hold its one layer in its cell (slot.h,
 * lref_in_cell): nothing but its layers decides its cell. */
static int cell_holds_layer(const struct build *b, uint32_t opt, const struct opt_desc *d, bool *yes)
{
	int r = shmcfg__opt_use(b->h, opt);
	*yes = !r && cell_may_hold_layer(b->h, d);
	return r;
}

/* Option opt, changed by ch[0, n), has one layer l set to v (a value that
 * fits the cell), owned by the cluster agent if own: held in the cell, and
 * the cell written at once (nothing else decides it). */
static int hold_in_cell(struct build *b, uint32_t opt, const struct opt_desc *d, const struct change *ch, size_t n,
			const struct shmcfg__cell old[NLAYERS], enum layer l, const shmcfg_value *v, uint64_t own)
{
	struct shmcfg__cell c = shmcfg__scalar_cell(v, (uint64_t)source_of(l) << META_SRC_SHIFT);
	keep_hist_one(b, ch, n, old, l, &(struct shmcfg__cell){c.val, c.meta | META_SET | own});
	/* the reference first (the old terms out, with the old cell), then the
	 * cell; a writer that dies between them leaves a busy slot that the
	 * next writer copies whole (publish.c) */
	int r = set_lref(b, opt, own ? LREF_IN_CELL_BY_CLUSTER : LREF_IN_CELL);
	if (b->shared)
		shmcfg__fault("commit.in_cell");
	return r ? r : settle(b, opt, d, &c);
}

/*
 * The usual change, without the general path's work per layer: one change
 * c setting layer l of option opt, whose layers old are held in its cell
 * or unset, to a value that fits the cell. 1: not that case.
 */
static int apply_one(struct build *b, uint32_t opt, const struct opt_desc *d, const struct change *c,
		     const struct shmcfg__cell old[NLAYERS])
{
	enum layer l = c->layer;
	uint32_t lref = b->lrefs[opt];
	if (b->patch || c->reset || lref_names_chunk(lref) || value_bytes(&c->v) ||
	    (lref && !(old[l].meta & META_SET))) /* its one layer is another */
		return 1;
	uint64_t own = b->by_cluster || c->by_cluster ? META_BY_CLUSTER : 0;
	if (lref) { /* layer l, with its source: decoded from the cell */
		if (META_TYPE(old[l].meta) != d->type)
			return malformed(b, d);
		/* the same value (a null's bits are 0), from the same owner:
		 * nothing changes */
		struct shmcfg__cell now = shmcfg__scalar_cell(&c->v, (uint64_t)source_of(l) << META_SRC_SHIFT | own);
		if ((old[l].meta & ~META_SET) == now.meta &&
		    shmcfg__scalar_bits_equal(META_TYPE(now.meta), old[l].val, now.val)) {
			keep_hist(b, c, 1, old, old);
			return 0;
		}
	}
	bool yes;
	int r = cell_holds_layer(b, opt, d, &yes);
	return r ? r : yes ? hold_in_cell(b, opt, d, c, 1, old, l, &c->v, own) : 1;
}

/*
 * Option opt's layers, changed by ch[0, n) (all of opt, sorted by layer):
 * a new chunk (none if no layer is set), and opt is queued for resolution;
 * or, for one layer set to a value that fits the cell, of an option whose
 * cell nothing but its layers decides, no chunk (slot.h, lref_in_cell) and
 * the cell written at once. Changes that leave every layer as it was change
 * nothing.
 */
static int apply_opt(struct build *b, uint32_t opt, const struct change *ch, size_t n)
{
	shmcfg *h = b->h;
	const struct opt_desc *d = opt_d(h, opt);
	struct shmcfg__cell old[NLAYERS];
	int r = layers_of(b, opt, old);
	if (r || (n == 1 && (r = apply_one(b, opt, d, ch, old)) != 1))
		return r;
	r = 0;
	/* the layers set or changed: most options have one */
	const struct change *by_layer[NLAYERS];
	unsigned changing = 0, live = 0;
	for (size_t k = 0; k < n; k++) {
		by_layer[ch[k].layer] = &ch[k];
		changing |= 1u << ch[k].layer;
	}
	for (enum layer l = 0; l < NLAYERS; l++)
		live |= old[l].meta & META_SET ? 1u << l : 0;
	live |= changing;
	/* what each layer will hold, and the bytes of the chunk */
	shmcfg_value val[NLAYERS];
	uint64_t src[NLAYERS], own[NLAYERS]; /* the cell's source and META_BY_CLUSTER bits */
	unsigned mask = 0, nset = 0;
	uint64_t bytes = CHUNK_HDR_BYTES;
	bool same = true;
	for (unsigned m = live; m; m &= m - 1) {
		enum layer l = (enum layer)__builtin_ctz(m);
		const struct change *c = changing >> l & 1 ? by_layer[l] : NULL;
		bool had = old[l].meta & META_SET;
		if (had && (META_TYPE(old[l].meta) != d->type ||
			    shmcfg__value_from_cell(&old[l], b->heap, b->heap_size, &val[l])))
			return malformed(b, d);
		src[l] = had ? META_SRC(old[l].meta) : 0;
		own[l] = had ? old[l].meta & META_BY_CLUSTER : 0;
		if (c) {
			uint64_t s = b->patch ? SHMCFG_SRC_PATCH : source_of(l);
			uint64_t o = b->by_cluster || c->by_cluster ? META_BY_CLUSTER : 0;
			same = same && had == !c->reset &&
			       (!had || (s == src[l] && o == own[l] && shmcfg_value_equal(&val[l], &c->v)));
			if (c->reset) {
				had = false;
			} else {
				had = true;
				val[l] = c->v;
				src[l] = s;
				own[l] = o;
			}
		}
		if (!had)
			continue;
		mask |= 1u << l;
		nset++;
		bytes += sizeof(struct shmcfg__cell) + value_bytes(&val[l]);
	}
	if (same) {
		keep_hist(b, ch, n, old, old);
		return 0;
	}
	if (!mask) {
		keep_hist(b, ch, n, old, shmcfg__no_layers);
		return seed(b, opt, 0);
	}
	enum layer top = (enum layer)(31 - __builtin_clz(mask));
	if (nset == 1 && src[top] == source_of(top) && value_bytes(&val[top]) == 0) {
		bool yes;
		if ((r = cell_holds_layer(b, opt, d, &yes)))
			return r;
		if (yes)
			return hold_in_cell(b, opt, d, ch, n, old, top, &val[top], own[top]);
	}
	struct shmcfg__cell now[NLAYERS];
	memcpy(now, shmcfg__no_layers, sizeof now);
	uint64_t off;
	if (b->shared) {
		r = shmcfg__heap_alloc(h, bytes, sstr(h, d->name), &off);
		shmcfg__fault("commit.chunk");
	} else if (b->priv_top + bytes > b->heap_size) {
		r = shmcfg__err(SHMCFG_E_FULL, "%s: no room for the patch of %s", h->name, sstr(h, d->name));
	} else {
		off = b->priv_top;
		b->priv_top += (bytes + 15) & ~15ull;
		((struct chunk *)(b->heap + off))->tag = CHUNK_MAGIC << 24;
	}
	if (r)
		return r;
	struct chunk *k = (struct chunk *)(b->heap + off);
	uint64_t used = off + CHUNK_HDR_BYTES + nset * sizeof(struct shmcfg__cell);
	for (enum layer l = 0, j = 0; l < NLAYERS; l++)
		if (mask >> l & 1) { /* sized above: cannot fail */
			(void)shmcfg__cell_encode(&val[l], src[l] << META_SRC_SHIFT | own[l], b->heap, b->heap_size,
						  &used, &k->l[j]);
			now[l] = (struct shmcfg__cell){k->l[j].val, k->l[j].meta | META_SET};
			j++;
		}
	k->tag |= mask;
	keep_hist(b, ch, n, old, now);
	uint32_t lref = (uint32_t)(off >> LREF_SHIFT);
	if ((r = seed(b, opt, lref)) && b->shared && b->lrefs[opt] != lref && shmcfg__heap_ref(h, lref) == 0)
		shmcfg__heap_unref(h, lref); /* nobody refers to the new chunk: free it, or it leaks */
	return r;
}

/* Apply a transaction's changes (sorted by option and layer) to the slot's
 * layers; the options they touch are queued for resolution. */
int shmcfg__apply_changes(struct build *b, const struct change *ch, size_t n)
{
	int r;
	if ((r = shmcfg__ids_reserve(&b->changed, n)) || (r = shmcfg__ids_reserve(&b->seeds, n)) || (r = shmcfg__ids_reserve(&b->queued, n)))
		return r;
	b->hist_ch = ch;
	for (size_t k = 0; k < n;) {
		size_t e = k;
		while (e < n && ch[e].opt == ch[k].opt)
			e++;
		if ((r = apply_opt(b, ch[k].opt, ch + k, e - k)))
			return r;
		k = e;
	}
	return 0;
}

/* ---- resolution ---- */

/* Two active implications give one option different values. */
static int conflict(const shmcfg *h, uint32_t target, uint32_t k1, uint32_t k2)
{
	char *v1 = NULL, *v2 = NULL;
	shmcfg_value a, c;
	(void)shmcfg__value_from_cell(&h->implies[k1].value, h->strings, h->strings_size, &a);
	(void)shmcfg__value_from_cell(&h->implies[k2].value, h->strings, h->strings_size, &c);
	if (shmcfg_value_format(&a, &v1) == 0 && shmcfg_value_format(&c, &v2) == 0)
		shmcfg__err(SHMCFG_E_CONFLICT, "%s: %s implies %s but %s implies %s",
			    sstr(h, opt_d(h, target)->name), sstr(h, opt_d(h, h->implies[k1].implier)->name), v1,
			    sstr(h, opt_d(h, h->implies[k2].implier)->name), v2);
	shmcfg__free(v1);
	shmcfg__free(v2);
	return SHMCFG_E_CONFLICT;
}

static struct shmcfg__cell with_source(struct shmcfg__cell c, shmcfg_source src)
{
	c.meta = (c.meta & ~(15ull << META_SRC_SHIFT | META_SET | META_BY_CLUSTER)) | (uint64_t)src << META_SRC_SHIFT;
	return c;
}

/* A value of the schema (a default or an implied value) as a slot's cell. */
static struct shmcfg__cell schema_cell(struct shmcfg__cell c, shmcfg_source src)
{
	c = with_source(c, src);
	if (!(c.meta & META_NULL) && META_TYPE(c.meta) >= SHMCFG_STR)
		c.meta |= META_SCHEMA;
	return c;
}

/*
 * Option i's effective value, from the cells of its impliers (resolved
 * before it: they rank lower) and its layers. The first active implication
 * in the order a full resolution meets them wins; another active one with a
 * different value is a conflict.
 */
static int effective(const struct build *b, uint32_t i, struct shmcfg__cell *out)
{
	const shmcfg *h = b->h;
	const struct opt_desc *d = opt_d(h, i);
	uint32_t k1 = UINT32_MAX;
	for (uint32_t j = d->rdep_first; j < d->rdep_first + d->rdep_n; j++) {
		uint32_t k = h->rdeps[j];
		if (k & RDEP_ALIAS)
			break; /* implications come first */
		/* the entry is its implier's: validated with it, if it is in its run */
		uint32_t p = h->implies[k].implier;
		int r = shmcfg__opt_use(h, p);
		if (r)
			return r;
		if (k < opt_d(h, p)->implies_first || k - opt_d(h, p)->implies_first >= opt_d(h, p)->implies_n ||
		    h->implies[k].target != i)
			return shmcfg__err(SHMCFG_E_CORRUPT, "%s: a dependent of %s is not its implication",
					   h->name, sstr(h, d->name));
		const struct shmcfg__cell *pc = &b->cells[p];
		if ((pc->meta & META_NULL) || !pc->val)
			continue;
		if (k1 == UINT32_MAX) {
			k1 = k;
			continue;
		}
		shmcfg_value a, c;
		(void)shmcfg__value_from_cell(&h->implies[k1].value, h->strings, h->strings_size, &a);
		(void)shmcfg__value_from_cell(&h->implies[k].value, h->strings, h->strings_size, &c);
		if (!shmcfg_value_equal(&a, &c))
			return conflict(h, i, k1, k);
	}
	/* an option that an implication targets never holds its layer in its
	 * cell (slot.h): a reference that says so is a scribble, and writing
	 * an implied cell under it would publish a generation whose layers no
	 * longer read */
	if (lref_in_cell(b->lrefs[i]) && !cell_may_hold_layer(h, d))
		return shmcfg__err(SHMCFG_E_CORRUPT, "%s: %s is implied but holds its layer in its cell", h->name,
				   sstr(h, d->name));
	if (k1 != UINT32_MAX) {
		*out = schema_cell(h->implies[k1].value, SHMCFG_SRC_IMPLIED);
		return 0;
	}
	struct shmcfg__cell lay[NLAYERS];
	int r = layers_of(b, i, lay);
	if (r)
		return r;
	for (int l = LAYER_ENV_FORCE; l >= 0; l--)
		if (lay[l].meta & META_SET) { /* the highest stored layer that is set */
			*out = with_source(lay[l], META_SRC(lay[l].meta));
			return 0;
		}
	*out = schema_cell(d->def, SHMCFG_SRC_DEFAULT);
	return 0;
}

/* Min-heap of option ids by rank: options come out in implication order. */
static int q_push(struct build *b, uint32_t id)
{
	int r = 0;
	if (!shmcfg__ids_add(&b->queued, id, &r))
		return r;
	if (!b->q) {
		b->q = b->small_q;
		b->qcap = sizeof b->small_q / sizeof b->small_q[0];
	}
	if (b->nq == b->qcap) {
		size_t cap = 2 * b->qcap;
		bool small = b->q == b->small_q;
		uint32_t *q = shmcfg__realloc(small ? NULL : b->q, cap * sizeof *q);
		if (!q)
			return shmcfg__nomem();
		if (small)
			memcpy(q, b->small_q, b->nq * sizeof *q);
		b->q = q;
		b->qcap = cap;
	}
	const shmcfg *h = b->h;
	size_t k = b->nq++;
	for (; k && opt_d(h, b->q[(k - 1) / 2])->rank > opt_d(h, id)->rank; k = (k - 1) / 2)
		b->q[k] = b->q[(k - 1) / 2];
	b->q[k] = id;
	return 0;
}

static uint32_t q_pop(struct build *b)
{
	const shmcfg *h = b->h;
	uint32_t top = b->q[0], last = b->q[--b->nq];
	size_t k = 0;
	for (;;) {
		size_t c = 2 * k + 1;
		if (c >= b->nq)
			break;
		if (c + 1 < b->nq && opt_d(h, b->q[c + 1])->rank < opt_d(h, b->q[c])->rank)
			c++;
		if (opt_d(h, b->q[c])->rank >= opt_d(h, last)->rank)
			break;
		b->q[k] = b->q[c];
		k = c;
	}
	if (b->nq)
		b->q[k] = last;
	return top;
}

/* Alias a of option i takes i's cell c, with source "alias". */
static int follow(struct build *b, uint32_t a, uint32_t i, const struct shmcfg__cell *c)
{
	const shmcfg *h = b->h;
	bool moved;
	int r = shmcfg__opt_use(h, a);
	if (!r && opt_d(h, a)->alias_final != i)
		r = shmcfg__err(SHMCFG_E_CORRUPT, "%s: a dependent of %s is not its alias", h->name,
				sstr(h, opt_d(h, i)->name));
	struct shmcfg__cell ac = with_source(*c, SHMCFG_SRC_ALIAS);
	return r ? r : set_cell(b, a, &ac, &moved);
}

/* Option i's cell is c now; when it moved, its aliases follow and the
 * targets of its implications are queued. */
static int settle(struct build *b, uint32_t i, const struct opt_desc *d, const struct shmcfg__cell *c)
{
	const shmcfg *h = b->h;
	bool moved;
	int r = set_cell(b, i, c, &moved);
	if (r || !moved)
		return r;
	for (uint32_t j = d->rdep_first; !r && j < d->rdep_first + d->rdep_n; j++)
		if (h->rdeps[j] & RDEP_ALIAS)
			r = follow(b, h->rdeps[j] & ~RDEP_ALIAS, i, c);
	for (uint32_t k = d->implies_first; !r && k < d->implies_first + d->implies_n; k++)
		r = q_push(b, h->implies[k].target);
	return r;
}

/* Resolve option i again. */
static int resolve_one(struct build *b, uint32_t i)
{
	const shmcfg *h = b->h;
	int r = shmcfg__opt_use(h, i); /* validated, with its dependents' runs (validate.c) */
	if (r)
		return r;
	const struct opt_desc *d = opt_d(h, i);
	if (d->alias != SHMCFG_NO_OPT)
		return 0; /* follows its final target */
	struct shmcfg__cell c;
	r = effective(b, i, &c);
	return r ? r : settle(b, i, d, &c);
}

/* Whether option i (validated) depends on no other option's value: nothing
 * implies it (implications come first among its dependents, then aliases). */
static bool implied_by_none(const shmcfg *h, uint32_t i)
{
	const struct opt_desc *d = opt_d(h, i);
	return d->rdep_n == 0 || (h->rdeps[d->rdep_first] & RDEP_ALIAS);
}

/*
 * Resolve the seeded options (shmcfg__apply_changes) and what depends on
 * them. A seed that nothing implies is resolved at once: its value reads no
 * other cell, and nothing queues it again (only implications queue an
 * option). The others, and the targets of the implications of any of them,
 * go through the queue in implication order.
 */
int shmcfg__resolve(struct build *b)
{
	int r = 0;
	for (size_t k = 0; !r && k < b->seeds.n; k++) {
		uint32_t i = b->seeds.ids[k];
		if (!(r = shmcfg__opt_use(b->h, i))) /* its dependents' run too (validate.c) */
			r = implied_by_none(b->h, i) ? resolve_one(b, i) : q_push(b, i);
	}
	while (!r && b->nq)
		r = resolve_one(b, q_pop(b));
	/* the changed options' new terms (their old ones went at changed()) */
	return r || !b->track ? r : shmcfg__add_new_terms(b, b->changed.ids, b->changed.n);
}

/* Resolve every option, in implication order (generation 1). */
int shmcfg__resolve_all(struct build *b)
{
	const uint32_t *topo;
	int r = shmcfg__schema_all(b->h); /* every option is used */
	if (!r)
		r = shmcfg__schema_topo(b->h, &topo);
	for (uint32_t t = 0; !r && t < b->h->lay.nopts; t++)
		r = resolve_one(b, topo[t]);
	return r;
}

void shmcfg__build_free(struct build *b)
{
	shmcfg__ids_free(&b->changed);
	shmcfg__ids_free(&b->seeds);
	shmcfg__ids_free(&b->queued);
	if (b->q != b->small_q)
		shmcfg__free(b->q);
	b->q = NULL;
	b->nq = b->qcap = 0;
}

/*
 * A thread's patched view (patch.c): `copy` is a private copy of a slot, and
 * heap[0, heap_size) a private copy of the value heap with room after `top`
 * for the patches. The patches replace the user layer with source "patch".
 * With `dependents` the patched options and their dependents are resolved
 * again, implications included, by the same code as a commit; without, the
 * patched options' effective cells (and their aliases') simply take the
 * patch values (the fallback when the patched view cannot be resolved).
 */
int shmcfg__resolve_patched(shmcfg *h, char *copy, char *heap, uint64_t top, uint64_t heap_size,
			    const shmcfg_opt *opts, const shmcfg_value *vals, size_t n, bool dependents)
{
	struct build b;
	shmcfg__build_init(&b, h, slot_cells(h, copy), slot_lrefs(h, copy), heap, heap_size);
	b.priv_top = (top + 15) & ~15ull;
	b.patch = true;
	struct change *ch = shmcfg__calloc(n ? n : 1, sizeof *ch);
	int r = ch ? 0 : shmcfg__nomem();
	for (size_t k = 0; !r && k < n; k++)
		ch[k] = (struct change){.opt = opts[k], .layer = LAYER_USER, .v = vals[k]};
	/* one change per option (patch.c merges frames), in option order */
	for (size_t k = 1; !r && k < n; k++)
		for (size_t j = k; j > 0 && ch[j - 1].opt > ch[j].opt; j--) {
			struct change t = ch[j];
			ch[j] = ch[j - 1];
			ch[j - 1] = t;
		}
	if (!r)
		r = shmcfg__apply_changes(&b, ch, n);
	if (!r && dependents)
		r = shmcfg__resolve(&b);
	for (size_t k = 0; !r && !dependents && k < n; k++) {
		/* the patch value as it is, and the aliases of patched options follow it */
		struct shmcfg__cell lay[NLAYERS];
		bool moved;
		if (!(r = shmcfg__chunk_read(heap, heap_size, b.lrefs[opts[k]], &b.cells[opts[k]], lay)) && (lay[LAYER_USER].meta & META_SET)) {
			struct shmcfg__cell c = with_source(lay[LAYER_USER], SHMCFG_SRC_PATCH);
			r = set_cell(&b, opts[k], &c, &moved);
			const struct opt_desc *d = opt_d(h, opts[k]);
			for (uint32_t j = d->rdep_first; !r && j < d->rdep_first + d->rdep_n; j++)
				if (h->rdeps[j] & RDEP_ALIAS)
					r = follow(&b, h->rdeps[j] & ~RDEP_ALIAS, opts[k], &c);
		}
	}
	shmcfg__free(ch);
	shmcfg__build_free(&b);
	return r;
}
