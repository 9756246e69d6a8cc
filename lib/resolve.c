/*
 * Building a slot's values: the layers (the old slot's, with a transaction's
 * changes), then every option's effective value in implication order, with
 * the precedence implied > env_force > user > env_default > knob > default
 * and aliases showing their final target. Used by commits (publish.c) and by
 * a patched thread's private view (patch.c).
 */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

static int heap_full(struct build *b, shmcfg_opt opt, uint64_t need)
{
	return shmcfg__err(SHMCFG_E_FULL,
			   "%s: string heap of %llu bytes per slot is full (%llu used, %llu more needed for %s)",
			   b->h->name, (unsigned long long)b->cap,
			   (unsigned long long)b->used, (unsigned long long)need,
			   sstr(b->h, opt_d(b->h, opt)->name));
}

/* Encode v into a cell whose strings go into the new slot's heap. */
static int put_cell(struct build *b, shmcfg_opt opt, const shmcfg_value *v, uint64_t flags,
		    struct shmcfg__cell *out)
{
	if (shmcfg__cell_encode(v, flags, b->heap, b->cap, &b->used, out))
		return heap_full(b, opt, v->type == SHMCFG_STR ? v->u.str.len + 1 : v->u.list.bytes + 1);
	return 0;
}

/* Copy a set cell of the old slot as it is, its bytes into the new heap.
 * The old slot may have been scribbled on: its offsets are checked. */
static int copy_cell(struct build *b, shmcfg_opt opt, const struct shmcfg__cell *c,
		     const char *old_heap, struct shmcfg__cell *out)
{
	/* one read of the shared cell; only the copy is checked and used */
	struct shmcfg__cell cc = {__atomic_load_n(&c->val, __ATOMIC_RELAXED),
				  __atomic_load_n(&c->meta, __ATOMIC_RELAXED)};
	if (META_TYPE(cc.meta) != opt_d(b->h, opt)->type)
		return shmcfg__err(SHMCFG_E_CORRUPT, "%s: the current slot's layer of %s has type %u, not %s",
				   b->h->name, sstr(b->h, opt_d(b->h, opt)->name), META_TYPE(cc.meta),
				   shmcfg_type_name(opt_d(b->h, opt)->type));
	*out = cc;
	if ((cc.meta & META_NULL) || META_TYPE(cc.meta) < SHMCFG_STR)
		return 0;
	shmcfg_value v;
	if (shmcfg__value_from_cell(&cc, old_heap, b->h->lay.heap_size, &v))
		return shmcfg__err(SHMCFG_E_CORRUPT, "%s: the current slot's cell of %s is malformed",
				   b->h->name, sstr(b->h, opt_d(b->h, opt)->name));
	uint64_t len = META_LEN(cc.meta);
	if (len + 1 > b->cap - b->used)
		return heap_full(b, opt, len + 1);
	memcpy(b->heap + b->used, old_heap + CELL_OFF(cc.val), len);
	b->heap[b->used + len] = 0; /* ours, whatever the shared byte says now */
	out->val = b->used | (cc.val & ~0xffffffffull); /* keep the count */
	b->used += len + 1;
	return 0;
}

/* Write the layers of every option: the old ones as they are, with the
 * transaction's changes (sorted by option and layer) applied. */
int shmcfg__build_layers(struct build *b, const struct change *ch, size_t nch)
{
	shmcfg *h = b->h;
	const struct shmcfg__cell *old = b->old_slot ? slot_layers(h, b->old_slot) : NULL;
	const char *old_heap = b->old_slot ? slot_heap(h, b->old_slot) : NULL;
	size_t k = 0;
	int ar = shmcfg__schema_all(h); /* every option is used below */
	if (ar)
		return ar;
	for (uint32_t i = 0; i < h->lay.nopts; i++) {
		for (enum layer l = 0; l < NLAYERS; l++) {
			size_t idx = (size_t)i * NLAYERS + l;
			struct shmcfg__cell *out = &b->layers[idx];
			int r = 0;
			if (k < nch && ch[k].opt == i && ch[k].layer == l) {
				if (ch[k].reset)
					*out = (struct shmcfg__cell){.meta = opt_d(h, i)->type | META_NULL};
				else
					r = put_cell(b, i, &ch[k].v, META_SET | (uint64_t)source_of((enum layer)l) << META_SRC_SHIFT, out);
				k++;
			} else if (old && (old[idx].meta & META_SET))
				r = copy_cell(b, i, &old[idx], old_heap, out);
			else /* unset: null, so that it decodes without a heap */
				*out = (struct shmcfg__cell){.meta = opt_d(h, i)->type | META_NULL};
			if (r)
				return r;
		}
	}
	return 0;
}

/* Two active implications give one option different values. */
static int conflict(struct build *b, uint32_t target, uint32_t k1, uint32_t implier2, uint32_t k2)
{
	shmcfg *h = b->h;
	char *v1 = NULL, *v2 = NULL;
	shmcfg_value a, c;
	(void)shmcfg__value_from_cell(&h->implies[k1].value, h->strings, h->strings_size, &a);
	(void)shmcfg__value_from_cell(&h->implies[k2].value, h->strings, h->strings_size, &c);
	if (shmcfg_value_format(&a, &v1) == 0 && shmcfg_value_format(&c, &v2) == 0)
		shmcfg__err(SHMCFG_E_CONFLICT, "%s: %s implies %s but %s implies %s",
			    sstr(h, opt_d(h, target)->name), sstr(h, opt_d(h, b->implier[target])->name), v1,
			    sstr(h, opt_d(h, implier2)->name), v2);
	shmcfg__free(v1);
	shmcfg__free(v2);
	return SHMCFG_E_CONFLICT;
}

/*
 * The effective value of every option, in topological order so that an
 * implier is resolved before its targets: implied > env_force > user >
 * env_default > knob > default; an alias shows its final target's value.
 */
int shmcfg__resolve(struct build *b)
{
	shmcfg *h = b->h;
	uint32_t n = h->lay.nopts;
	const uint32_t *topo;
	int tr = shmcfg__schema_topo(h, &topo);
	if (tr)
		return tr;
	memset(b->implied_by, 0, n * sizeof *b->implied_by);
	for (uint32_t t = 0; t < n; t++) {
		uint32_t i = topo[t];
		const struct opt_desc *d = opt_d(h, i);
		struct shmcfg__cell *out = &b->cells[i];
		if (d->alias != SHMCFG_NO_OPT)
			continue;
		int r = 0;
		if (b->implied_by[i]) {
			shmcfg_value v;
			(void)shmcfg__value_from_cell(&h->implies[b->implied_by[i] - 1].value, h->strings,
						      h->strings_size, &v);
			r = put_cell(b, i, &v, (uint64_t)SHMCFG_SRC_IMPLIED << META_SRC_SHIFT, out);
		} else {
			int l = LAYER_ENV_FORCE; /* the highest stored layer that is set */
			while (l >= 0 && !(b->layers[(size_t)i * NLAYERS + l].meta & META_SET))
				l--;
			if (l >= 0) {
				/* share the layer's heap bytes: same value, another source */
				*out = b->layers[(size_t)i * NLAYERS + l];
				out->meta &= ~META_SET;
			} else if ((d->def.meta & META_NULL) || d->type < SHMCFG_STR) {
				*out = d->def; /* a scalar default: its cell as it is */
			} else {
				shmcfg_value v;
				(void)shmcfg__value_from_cell(&d->def, h->strings, h->strings_size, &v);
				r = put_cell(b, i, &v, (uint64_t)SHMCFG_SRC_DEFAULT << META_SRC_SHIFT, out);
			}
		}
		if (r)
			return r;
		if (d->implies_n && !(out->meta & META_NULL) && out->val) {
			for (uint32_t k = d->implies_first; k < d->implies_first + d->implies_n; k++) {
				uint32_t tgt = h->implies[k].target;
				if (b->implied_by[tgt]) {
					shmcfg_value a, c;
					(void)shmcfg__value_from_cell(&h->implies[k].value, h->strings,
								      h->strings_size, &a);
					(void)shmcfg__value_from_cell(&h->implies[b->implied_by[tgt] - 1].value,
								      h->strings, h->strings_size, &c);
					if (!shmcfg_value_equal(&a, &c))
						return conflict(b, tgt, b->implied_by[tgt] - 1, i, k);
					continue;
				}
				b->implied_by[tgt] = k + 1;
				b->implier[tgt] = i;
			}
		}
	}
	for (uint32_t i = 0; i < n; i++) {
		const struct opt_desc *d = opt_d(h, i);
		if (d->alias == SHMCFG_NO_OPT)
			continue;
		b->cells[i] = b->cells[d->alias_final];
		b->cells[i].meta = (b->cells[i].meta & ~(7ull << META_SRC_SHIFT)) |
				   (uint64_t)SHMCFG_SRC_ALIAS << META_SRC_SHIFT;
	}
	return 0;
}

/* Whether two cells hold the same value from the same source, compared
 * raw: scalars by their bits, strings and lists by their bytes. */
bool shmcfg__cells_equal(const shmcfg *h, const struct shmcfg__cell *a, const char *ha,
			const struct shmcfg__cell *b, const char *hb)
{
	if ((a->meta & 0x1fff) != (b->meta & 0x1fff))
		return false; /* type, null, source, set */
	if ((a->meta & META_NULL) || META_TYPE(a->meta) < SHMCFG_STR)
		return (a->meta & META_NULL) || a->val == b->val;
	uint64_t len = META_LEN(a->meta), oa = CELL_OFF(a->val), ob = CELL_OFF(b->val);
	uint64_t cap = h->lay.heap_size;
	if (len != META_LEN(b->meta) || CELL_COUNT(a->val) != CELL_COUNT(b->val) || oa > cap ||
	    len >= cap - oa || ob > cap || len >= cap - ob)
		return false;
	return memcmp(ha + oa, hb + ob, len) == 0;
}

/*
 * A thread's patched view (patch.c): `copy` is a private copy of a slot
 * whose heap may hold heap_cap bytes; the patches replace its user layer,
 * with source "patch". With resolve_all every effective value is resolved
 * again, implications included, by the same code as a commit; without, the
 * patched options' effective cells simply take the patch values (the
 * fallback when the patched view cannot be resolved).
 */
int shmcfg__resolve_patched(shmcfg *h, char *copy, uint64_t heap_cap, const shmcfg_opt *opts,
			    const shmcfg_value *vals, size_t n, bool resolve_all)
{
	struct build b = {.h = h, .slot = copy, .cap = heap_cap};
	b.cells = slot_cells(h, copy);
	b.layers = slot_layers(h, copy);
	b.heap = slot_heap(h, copy);
	b.used = ((struct slot_hdr *)copy)->heap_used;
	b.implied_by = shmcfg__malloc(h->lay.nopts * sizeof(uint32_t));
	b.implier = shmcfg__malloc(h->lay.nopts * sizeof(uint32_t));
	int r = b.implied_by && b.implier ? 0 : shmcfg__nomem();
	uint64_t src = (uint64_t)SHMCFG_SRC_PATCH << META_SRC_SHIFT;
	for (size_t k = 0; !r && k < n; k++)
		r = put_cell(&b, opts[k], &vals[k], META_SET | src,
			     resolve_all ? &b.layers[(size_t)opts[k] * NLAYERS + LAYER_USER]
					 : &b.cells[opts[k]]);
	if (!r && resolve_all)
		r = shmcfg__resolve(&b);
	if (!r && !resolve_all) /* the aliases of patched options follow them */
		for (uint32_t i = 0; i < h->lay.nopts; i++)
			if (opt_d(h, i)->alias != SHMCFG_NO_OPT) {
				b.cells[i] = b.cells[opt_d(h, i)->alias_final];
				b.cells[i].meta = (b.cells[i].meta & ~(7ull << META_SRC_SHIFT)) |
						  (uint64_t)SHMCFG_SRC_ALIAS << META_SRC_SHIFT;
			}
	for (size_t k = 0; !r && !resolve_all && k < n; k++)
		b.cells[opts[k]].meta &= ~META_SET;
	shmcfg__free(b.implied_by);
	shmcfg__free(b.implier);
	return r;
}
