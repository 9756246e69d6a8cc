/*
 * Transactions and commits.
 *
 * A commit never modifies a published slot. Under the writer lock it picks a
 * free slot (not current, not pinned), marks it busy (stamp 0), writes the
 * new layers, resolves every option's effective value (the precedence of
 * DESIGN.md), computes the config hash and the checksum, stamps the slot with
 * the new generation and publishes it with one store of `current`. Readers
 * therefore see whole generations. A writer that dies anywhere before that
 * store has published nothing; the next writer simply starts over.
 */
#include "internal.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

struct change {
	shmcfg_opt opt;   /* final alias target */
	int layer;        /* 0 knob, 1 env_default, 2 user, 3 env_force */
	bool reset;
	shmcfg_value v;   /* owned */
};

struct shmcfg_txn {
	shmcfg *h;
	int layer;
	struct change *ch;
	size_t n, cap;
	int err;            /* the first refused change: the commit fails with it */
	char *err_detail;   /* ... and its detail */
};

/* A refused change poisons its transaction, which then commits nothing (all
 * or nothing, as the README promises): keep the first refusal for
 * shmcfg_txn_commit(). Returns r. */
static int txn_refuse(shmcfg_txn *t, int r)
{
	if (r && t && !t->err) {
		t->err = r;
		t->err_detail = strdup(shmcfg_errdetail());
	}
	return r;
}

/* assert_return for the calls that change a transaction: poisons it too */
#define txn_assert_return(t, expr)                                                          \
	do {                                                                                \
		if (__builtin_expect(!(expr), 0))                                           \
			return txn_refuse((t), shmcfg__err(-EINVAL, "%s: invalid argument (%s)", \
							   __func__, #expr));               \
	} while (0)

int shmcfg_txn_begin(shmcfg *h, shmcfg_txn **ret)
{
	SHMCFG_API_ENTRY;
	assert_return(h && ret, -EINVAL);
	if (h->rdonly)
		return shmcfg__err(SHMCFG_E_READONLY, "%s: attached read-only, cannot write", h->name);
	shmcfg_txn *t = calloc(1, sizeof *t);
	if (!t)
		return -ENOMEM;
	t->h = h;
	t->layer = SHMCFG_SRC_USER - 1;
	*ret = t;
	return 0;
}

void shmcfg_txn_abort(shmcfg_txn *t)
{
	SHMCFG_API_KEEP;
	if (!t)
		return;
	for (size_t i = 0; i < t->n; i++)
		shmcfg_value_clear(&t->ch[i].v);
	free(t->ch);
	free(t->err_detail);
	free(t);
}

int shmcfg_txn_layer(shmcfg_txn *t, shmcfg_source layer)
{
	SHMCFG_API_ENTRY;
	txn_assert_return(t, t);
	if (layer != SHMCFG_SRC_USER && layer != SHMCFG_SRC_KNOB) /* the sets would go elsewhere */
		return txn_refuse(t, shmcfg__err(-EINVAL, "transactions write the user or the knob layer, not %s",
						 shmcfg_source_name(layer)));
	t->layer = layer - 1;
	return 0;
}

/* Record a change; any earlier change of the same option and layer goes. */
static int txn_put(shmcfg_txn *t, shmcfg_opt opt, int layer, bool reset, shmcfg_value *v)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->ch[i].opt == opt && t->ch[i].layer == layer) {
			shmcfg_value_clear(&t->ch[i].v);
			t->ch[i].reset = reset;
			t->ch[i].v = *v;
			return 0;
		}
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 8;
		struct change *ch = realloc(t->ch, cap * sizeof *ch);
		if (!ch)
			return -ENOMEM;
		t->ch = ch;
		t->cap = cap;
	}
	t->ch[t->n++] = (struct change){opt, layer, reset, *v};
	return 0;
}

static int target_of(shmcfg_txn *t, shmcfg_opt opt, int layer, shmcfg_opt *final)
{
	shmcfg *h = t->h;
	if (opt >= h->lay.nopts)
		return shmcfg__err(SHMCFG_E_NOOPT, "option handle %u out of range", opt);
	shmcfg__warn_deprecated(h, opt);
	*final = h->desc[opt].alias_final;
	const struct opt_desc *d = &h->desc[*final];
	if (layer == SHMCFG_SRC_KNOB - 1 && !(d->flags & DESC_F_HAS_KNOB))
		return shmcfg__err(SHMCFG_E_LAYER, "%s: option declares no knob", sstr(h, d->name));
	return 0;
}

int shmcfg__txn_set_layer(shmcfg_txn *t, shmcfg_opt opt, int layer, const shmcfg_value *v)
{
	shmcfg_opt f;
	int r = target_of(t, opt, layer, &f);
	if (r)
		return r;
	shmcfg_value c;
	if ((r = shmcfg__value_check(t->h, f, v)))
		return r;
	if (!shmcfg__list_ok(v))
		return shmcfg__err(SHMCFG_E_PARSE, "%s: malformed list value (count %zu, %zu bytes)",
				   sstr(t->h, t->h->desc[f].name), v->u.list.count, v->u.list.bytes);
	if ((r = shmcfg__value_copy(v, &c)))
		return r;
	if (!c.is_null && c.type == SHMCFG_INT && t->h->desc[f].type == SHMCFG_FLOAT) {
		c.type = SHMCFG_FLOAT;
		c.u.f = (double)v->u.i;
	}
	if (!c.is_null && c.type == SHMCFG_SET && (r = shmcfg__canon_set(&c))) {
		shmcfg_value_clear(&c);
		return r;
	}
	c.type = t->h->desc[f].type;
	if ((r = txn_put(t, f, layer, false, &c)))
		shmcfg_value_clear(&c);
	return r;
}

int shmcfg_txn_set(shmcfg_txn *t, shmcfg_opt opt, const shmcfg_value *v)
{
	SHMCFG_API_ENTRY;
	txn_assert_return(t, t && v);
	return txn_refuse(t, shmcfg__txn_set_layer(t, opt, t->layer, v));
}

int shmcfg_txn_set_text(shmcfg_txn *t, shmcfg_opt opt, const char *text)
{
	SHMCFG_API_ENTRY;
	txn_assert_return(t, t && text);
	if (opt >= t->h->lay.nopts)
		return txn_refuse(t, shmcfg__err(SHMCFG_E_NOOPT, "option handle %u out of range", opt));
	const struct opt_desc *d = &t->h->desc[t->h->desc[opt].alias_final];
	shmcfg_value v;
	int r = shmcfg_value_parse(d->type, d->flags & SHMCFG_F_NULLABLE, text, &v);
	if (r == SHMCFG_E_PARSE) {
		char why[400];
		snprintf(why, sizeof why, "%s", shmcfg_errdetail());
		r = shmcfg__err(r, "%s: %s", sstr(t->h, t->h->desc[opt].name), why);
	}
	if (r)
		return txn_refuse(t, r);
	r = shmcfg_txn_set(t, opt, &v); /* poisons t itself */
	shmcfg_value_clear(&v);
	return r;
}

int shmcfg_txn_set_bool(shmcfg_txn *t, shmcfg_opt opt, bool v)
{
	SHMCFG_API_ENTRY;
	return shmcfg_txn_set(t, opt, &(shmcfg_value){.type = SHMCFG_BOOL, .u.b = v});
}

int shmcfg_txn_set_int(shmcfg_txn *t, shmcfg_opt opt, int64_t v)
{
	SHMCFG_API_ENTRY;
	return shmcfg_txn_set(t, opt, &(shmcfg_value){.type = SHMCFG_INT, .u.i = v});
}

int shmcfg_txn_set_float(shmcfg_txn *t, shmcfg_opt opt, double v)
{
	SHMCFG_API_ENTRY;
	return shmcfg_txn_set(t, opt, &(shmcfg_value){.type = SHMCFG_FLOAT, .u.f = v});
}

int shmcfg_txn_set_str(shmcfg_txn *t, shmcfg_opt opt, const char *v)
{
	SHMCFG_API_ENTRY;
	txn_assert_return(t, v);
	return shmcfg_txn_set(t, opt,
			      &(shmcfg_value){.type = SHMCFG_STR, .u.str = {v, strlen(v)}});
}

int shmcfg_txn_reset(shmcfg_txn *t, shmcfg_opt opt)
{
	SHMCFG_API_ENTRY;
	txn_assert_return(t, t);
	shmcfg_opt f;
	int r = target_of(t, opt, t->layer, &f);
	if (r)
		return txn_refuse(t, r);
	shmcfg_value none = {.type = t->h->desc[f].type, .is_null = true};
	return txn_refuse(t, txn_put(t, f, t->layer, true, &none));
}

void shmcfg_set_commit_timeout(shmcfg *h, int timeout_ms)
{
	SHMCFG_API_KEEP;
	if (h)
		h->commit_timeout_ms = timeout_ms < 0 ? 0 : timeout_ms;
}

/* ------------------------------------------------------------------ */
/* Building a slot                                                    */
/* ------------------------------------------------------------------ */

struct build {
	shmcfg *h;
	char *slot;                  /* target slot */
	struct shmcfg__cell *cells, *layers;
	char *heap;
	uint64_t used, cap;             /* heap bytes used, and available */
	const char *old_slot;        /* current slot, NULL for generation 1 */
	uint32_t *implied_by;        /* per option: implies entry + 1, 0 = none */
	uint32_t *implier;           /* per option: the implying option */
};

static int heap_full(struct build *b, shmcfg_opt opt, uint64_t need)
{
	return shmcfg__err(SHMCFG_E_FULL,
			   "%s: string heap of %llu bytes per slot is full (%llu used, %llu more needed for %s)",
			   b->h->name, (unsigned long long)b->cap,
			   (unsigned long long)b->used, (unsigned long long)need,
			   sstr(b->h, b->h->desc[opt].name));
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
	if (META_TYPE(cc.meta) != b->h->desc[opt].type)
		return shmcfg__err(SHMCFG_E_CORRUPT, "%s: the current slot's layer of %s has type %u, not %s",
				   b->h->name, sstr(b->h, b->h->desc[opt].name), META_TYPE(cc.meta),
				   shmcfg_type_name(b->h->desc[opt].type));
	*out = cc;
	if ((cc.meta & META_NULL) || META_TYPE(cc.meta) < SHMCFG_STR)
		return 0;
	shmcfg_value v;
	if (shmcfg__value_from_cell(&cc, old_heap, b->h->lay.heap_size, &v))
		return shmcfg__err(SHMCFG_E_CORRUPT, "%s: the current slot's cell of %s is malformed",
				   b->h->name, sstr(b->h, b->h->desc[opt].name));
	uint64_t len = META_LEN(cc.meta);
	if (len + 1 > b->cap - b->used)
		return heap_full(b, opt, len + 1);
	memcpy(b->heap + b->used, old_heap + CELL_OFF(cc.val), len);
	b->heap[b->used + len] = 0; /* ours, whatever the shared byte says now */
	out->val = b->used | (cc.val & ~0xffffffffull); /* keep the count */
	b->used += len + 1;
	return 0;
}

/* Whether any change differs from what its layer holds in the old slot. */
static bool txn_changes(const shmcfg *h, const char *old_slot, const struct change *ch, size_t n)
{
	for (size_t k = 0; k < n; k++) {
		const struct shmcfg__cell *c = slot_layers(h, old_slot) + (size_t)ch[k].opt * NLAYERS + ch[k].layer;
		bool had = c->meta & META_SET;
		shmcfg_value old;
		if (had != !ch[k].reset)
			return true;
		if (had && (shmcfg__value_from_cell(c, slot_heap(h, old_slot), h->lay.heap_size, &old) ||
			    !shmcfg_value_equal(&old, &ch[k].v)))
			return true;
	}
	return false;
}

/* Write the layers of every option: the old ones as they are, with the
 * transaction's changes (sorted by option and layer) applied. */
static int build_layers(struct build *b, const struct change *ch, size_t nch)
{
	shmcfg *h = b->h;
	const struct shmcfg__cell *old = b->old_slot ? slot_layers(h, b->old_slot) : NULL;
	const char *old_heap = b->old_slot ? slot_heap(h, b->old_slot) : NULL;
	size_t k = 0;
	for (uint32_t i = 0; i < h->lay.nopts; i++) {
		for (int l = 0; l < NLAYERS; l++) {
			size_t idx = (size_t)i * NLAYERS + l;
			struct shmcfg__cell *out = &b->layers[idx];
			int r = 0;
			if (k < nch && ch[k].opt == i && ch[k].layer == l) {
				if (ch[k].reset)
					*out = (struct shmcfg__cell){.meta = h->desc[i].type | META_NULL};
				else
					r = put_cell(b, i, &ch[k].v, META_SET | (uint64_t)(l + 1) << META_SRC_SHIFT, out);
				k++;
			} else if (old && (old[idx].meta & META_SET))
				r = copy_cell(b, i, &old[idx], old_heap, out);
			else /* unset: null, so that it decodes without a heap */
				*out = (struct shmcfg__cell){.meta = h->desc[i].type | META_NULL};
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
			    sstr(h, h->desc[target].name), sstr(h, h->desc[b->implier[target]].name), v1,
			    sstr(h, h->desc[implier2].name), v2);
	free(v1);
	free(v2);
	return SHMCFG_E_CONFLICT;
}

/*
 * The effective value of every option, in topological order so that an
 * implier is resolved before its targets: implied > env_force > user >
 * env_default > knob > default; an alias shows its final target's value.
 */
static int resolve(struct build *b)
{
	shmcfg *h = b->h;
	uint32_t n = h->lay.nopts;
	memset(b->implied_by, 0, n * sizeof *b->implied_by);
	for (uint32_t t = 0; t < n; t++) {
		uint32_t i = h->topo[t];
		const struct opt_desc *d = &h->desc[i];
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
			int l = NLAYERS - 1;
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
		const struct opt_desc *d = &h->desc[i];
		if (d->alias == SHMCFG_NO_OPT)
			continue;
		b->cells[i] = b->cells[d->alias_final];
		b->cells[i].meta = (b->cells[i].meta & ~(7ull << META_SRC_SHIFT)) |
				   (uint64_t)SHMCFG_SRC_ALIAS << META_SRC_SHIFT;
	}
	return 0;
}

static int cmp_change(const void *a, const void *b)
{
	const struct change *x = a, *y = b;
	if (x->opt != y->opt)
		return x->opt < y->opt ? -1 : 1;
	return x->layer - y->layer;
}

/* ------------------------------------------------------------------ */
/* Slots and publication                                              */
/* ------------------------------------------------------------------ */

static uint64_t now_ns(clockid_t clk)
{
	struct timespec ts;
	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * Pick the least recently used slot that is neither current nor pinned by a
 * process holding snapshots, and mark it busy. Dekker with the reader
 * (view.c, shmcfg_snapshot_acquire()):
 *   writer: store stamp = BUSY|old (seq_cst); load each entry's active, then its pins
 *   reader: store pin = g; increment active (seq_cst); load stamp (seq_cst)
 * If an active entry pinning the slot's old generation shows up after the
 * busy mark, that reader may have seen the old stamp and be using the slot:
 * put the stamp back and try another slot. Otherwise any reader that starts
 * to use the slot later sees the busy mark and replaces its view. (active
 * is loaded before the pins: seeing a reader's increment means seeing the
 * pin it stored before it.)
 *
 * The busy mark keeps the old generation under SLOT_BUSY: no reader
 * validates against it, but if this writer dies before it restores the
 * stamp, the next writer's pin check still compares the pins with the old
 * generation, and a reader that saw the old stamp keeps its slot.
 *
 * With no free slot, reap dead readers, then wait a bounded time for pins
 * to go. A slot stamped beyond the current generation was left by a writer
 * that died before publishing it: it is free, and taken first so that no
 * two slots ever carry one generation.
 */
static int choose_slot(shmcfg *h, uint32_t cur_s, uint64_t cur_g, uint32_t *ret)
{
	uint64_t deadline = now_ns(CLOCK_MONOTONIC) + (uint64_t)h->commit_timeout_ms * 1000000ull;
	bool reaped = false;
	for (;;) {
		uint32_t best = UINT32_MAX;
		uint64_t best_stamp = 0, best_age = UINT64_MAX;
		for (uint32_t s = 0; s < h->lay.nslots; s++) {
			if (s == cur_s)
				continue;
			uint64_t stamp = __atomic_load_n(&slot_at(h, s)->gen, __ATOMIC_ACQUIRE);
			uint64_t g = STAMP_GEN(stamp);
			uint64_t age = g > cur_g ? 0 : g;
			if (age < best_age && !shmcfg__gen_pinned(h, g))
				best = s, best_stamp = stamp, best_age = age;
		}
		if (best != UINT32_MAX) {
			struct slot_hdr *sl = slot_at(h, best);
			shmcfg__fault("commit.chosen");
			__atomic_store_n(&sl->gen, SLOT_BUSY | STAMP_GEN(best_stamp), __ATOMIC_SEQ_CST);
			shmcfg__fault("commit.busy");
			if (!shmcfg__gen_pinned(h, STAMP_GEN(best_stamp))) {
				*ret = best;
				return 0;
			}
			__atomic_store_n(&sl->gen, best_stamp, __ATOMIC_RELEASE);
			continue;
		}
		if (!reaped) {
			reaped = true;
			if (shmcfg__reap(h, NULL, NULL) > 0)
				continue;
		}
		if (now_ns(CLOCK_MONOTONIC) >= deadline) {
			char who[256];
			shmcfg__pin_holders(h, who, sizeof who);
			return shmcfg__err(SHMCFG_E_BUSY,
					   "%s: every free slot is pinned by a live reader for %d ms: %s",
					   h->name, h->commit_timeout_ms, who);
		}
		usleep(1000);
		reaped = false;
	}
}

static void write_log(shmcfg *h, uint64_t gen, const bool *changed_opt, uint32_t nchanged)
{
	struct log_ent *e = log_at(h, gen);
	/* the same seqlock as a slot: stamp 0, fields, release fence, stamp */
	__atomic_store_n(&e->gen, 0, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	e->time_ns = now_ns(CLOCK_REALTIME);
	e->pid = (int32_t)getpid();
	e->uid = getuid();
	e->nchanged = nchanged;
	e->nids = 0;
	for (uint32_t i = 0; i < h->lay.nopts && e->nids < SHMCFG_LOG_IDS; i++)
		if (changed_opt[i])
			e->ids[e->nids++] = i;
	__atomic_store_n(&e->gen, gen, __ATOMIC_RELEASE);
}

/* Whether two cells hold the same value from the same source, compared
 * raw: scalars by their bits, strings and lists by their bytes. */
static bool cells_equal(const shmcfg *h, const struct shmcfg__cell *a, const char *ha,
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
 * The commit proper. With first, this is generation 1 of a new segment: no
 * old slot, no lock (nobody can attach before `ready`).
 */
static int commit(shmcfg_txn *t, bool first, uint64_t *gen_ret)
{
	shmcfg *h = t->h;
	uint32_t n = h->lay.nopts;
	int r;
	if (getpid() != h->pid)
		return shmcfg__err(SHMCFG_E_FORKED, "%s: commit in a child of the attaching process: attach again",
				   h->name);
	if (t->n)
		qsort(t->ch, t->n, sizeof *t->ch, cmp_change);
	struct build b = {.h = h};
	b.implied_by = malloc(n * sizeof(uint32_t));
	b.implier = malloc(n * sizeof(uint32_t));
	bool *changed_opt = calloc(n, sizeof(bool));
	struct hashbuf hb = {0};
	if (!b.implied_by || !b.implier || !changed_opt) {
		r = -ENOMEM;
		goto out_free;
	}
	if (!first) {
		/* OFD locks belong to the open file description, which all threads
		 * of a handle share: they exclude other processes and handles, and
		 * this mutex excludes the handle's other threads */
		pthread_mutex_lock(&h->commit_lock);
		r = shmcfg__ofd_lock(h->lock_fd, LOCK_WRITER_BYTE, true, h->commit_timeout_ms);
		if (r == -EAGAIN)
			r = shmcfg__err(SHMCFG_E_LOCKED, "%s: another writer held the lock for %d ms",
					h->name, h->commit_timeout_ms);
		else if (r)
			r = shmcfg__err(r, "%s: writer lock: %s", h->name, strerror(-r));
		if (r) {
			pthread_mutex_unlock(&h->commit_lock);
			goto out_free;
		}
	}
	shmcfg__fault("commit.locked");
	uint64_t cur = __atomic_load_n(&h->hdr->current, __ATOMIC_ACQUIRE);
	uint32_t cur_s = first ? UINT32_MAX : cur_slot(cur);
	uint64_t gen = first ? 1 : cur_gen(cur) + 1;
	if (!first) {
		/* under the lock the current slot cannot change; check it anyway */
		if (cur_s >= h->lay.nslots ||
		    __atomic_load_n(&slot_at(h, cur_s)->gen, __ATOMIC_ACQUIRE) != cur_gen(cur)) {
			r = shmcfg__err(SHMCFG_E_CORRUPT, "%s: current slot %u does not hold generation %llu",
					h->name, cur_s, (unsigned long long)cur_gen(cur));
			goto out_unlock;
		}
		b.old_slot = (const char *)slot_at(h, cur_s);
	}
	/* a transaction that changes no layer publishes nothing, and must not
	 * take (or wait for) a slot to find that out */
	if (!first && !txn_changes(h, b.old_slot, t->ch, t->n)) {
		r = 1;
		if (gen_ret)
			*gen_ret = cur_gen(cur);
		goto out_unlock;
	}
	uint32_t s = 0;
	if (!first && (r = choose_slot(h, cur_s, cur_gen(cur), &s)))
		goto out_unlock;
	shmcfg__fault("commit.slot");
	b.slot = (char *)slot_at(h, s);
	b.cells = slot_cells(h, b.slot);
	b.layers = slot_layers(h, b.slot);
	b.heap = slot_heap(h, b.slot);
	b.cap = h->lay.heap_size;
	/* pairs with the readers' acquire fence: the busy mark stored by
	 * choose_slot() is ordered before every store that rewrites the slot */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	if ((r = build_layers(&b, t->ch, t->n)) || (r = resolve(&b)))
		goto out_unlock;
	/* what changed, for the commit log: the effective value of any option,
	 * or a layer of an option the transaction touched (the others' layers
	 * were copied as they were) */
	uint32_t nchanged = 0;
	size_t k = 0;
	for (uint32_t i = 0; i < n; i++) {
		bool ch = first || !cells_equal(h, &b.cells[i], b.heap, slot_cells(h, b.old_slot) + i,
						slot_heap(h, b.old_slot));
		for (; k < t->n && t->ch[k].opt == i; k++)
			ch = ch || !cells_equal(h, &b.layers[(size_t)i * NLAYERS + t->ch[k].layer], b.heap,
						slot_layers(h, b.old_slot) + (size_t)i * NLAYERS + t->ch[k].layer,
						slot_heap(h, b.old_slot));
		changed_opt[i] = ch;
		nchanged += ch;
	}
	struct slot_hdr *sl = (struct slot_hdr *)b.slot;
	sl->heap_used = b.used;
	uint8_t hash[16];
	if ((r = shmcfg__config_hash(h, b.slot, hash, &hb)))
		goto out_unlock;
	memcpy(sl->config_hash, hash, 16);
	sl->checksum = shmcfg__slot_checksum(h, b.slot);
	shmcfg__fault("commit.written");
	write_log(h, gen, changed_opt, nchanged);
	/* pairs with the readers' stamp check: everything above is visible to a
	 * reader that sees this stamp */
	__atomic_store_n(&sl->gen, gen, __ATOMIC_RELEASE);
	shmcfg__fault("commit.stamped");
	/* the publication: pairs with the acquire load of `current` in every
	 * read; seq_cst also orders it before the futex bump for shmcfg_wait() */
	__atomic_store_n(&h->hdr->current, gen << SHMCFG__SLOT_BITS | s, __ATOMIC_SEQ_CST);
	shmcfg__fault("commit.published");
	__atomic_fetch_add(&h->hdr->futex, 1, __ATOMIC_SEQ_CST);
	syscall(SYS_futex, &h->hdr->futex, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
	if (gen_ret)
		*gen_ret = gen;
	r = 0;
out_unlock:
	if (!first) {
		shmcfg__ofd_unlock(h->lock_fd, LOCK_WRITER_BYTE);
		pthread_mutex_unlock(&h->commit_lock);
	}
out_free:
	free(b.implied_by);
	free(b.implier);
	free(changed_opt);
	free(hb.p);
	return r;
}

int shmcfg_txn_commit(shmcfg_txn *t, uint64_t *gen_ret)
{
	SHMCFG_API_ENTRY;
	assert_return(t, -EINVAL);
	if (t->err) { /* a change was refused: publish none, and say which */
		int r = shmcfg__err(t->err, "%s", t->err_detail ? t->err_detail : "");
		shmcfg_txn_abort(t);
		return r;
	}
	int r = commit(t, false, gen_ret);
	shmcfg_txn_abort(t);
	return r;
}

/*
 * Generation 1 of a new segment: the env layers from envp (DESIGN.md: the
 * first set variable of each list wins). A bad value fails the creation with
 * an error naming the variable.
 */
int shmcfg__commit_env(shmcfg *h, char *const *envp, bool use_env)
{
	shmcfg_txn *t = calloc(1, sizeof *t);
	if (!t)
		return -ENOMEM;
	t->h = h;
	int r = 0;
	for (uint32_t i = 0; use_env && envp && !r && i < h->lay.nopts; i++) {
		const struct opt_desc *d = &h->desc[i];
		struct {
			struct sref list;
			uint32_t n;
			int layer;
		} lists[2] = {{d->env_default, d->n_env_default, SHMCFG_SRC_ENV_DEFAULT - 1},
			      {d->env_force, d->n_env_force, SHMCFG_SRC_ENV_FORCE - 1}};
		for (int k = 0; k < 2 && !r; k++) {
			const char *var = sstr(h, lists[k].list);
			for (uint32_t j = 0; j < lists[k].n; j++, var += strlen(var) + 1) {
				const char *text = NULL;
				size_t vl = strlen(var);
				for (char *const *e = envp; *e; e++)
					if (!strncmp(*e, var, vl) && (*e)[vl] == '=') {
						text = *e + vl + 1;
						break;
					}
				if (!text)
					continue;
				shmcfg_value v;
				r = shmcfg__parse_env(d->type, var, text, &v);
				if (!r) {
					r = shmcfg__txn_set_layer(t, i, lists[k].layer, &v);
					if (r) {
						char why[400];
						snprintf(why, sizeof why, "%s", shmcfg_errdetail());
						r = shmcfg__err(SHMCFG_E_ENV, "environment variable %s: %s", var, why);
					}
					shmcfg_value_clear(&v);
				}
				break;
			}
		}
	}
	if (!r)
		r = commit(t, true, NULL);
	shmcfg_txn_abort(t);
	return r;
}

/* ------------------------------------------------------------------ */
/* Waiting and history                                                */
/* ------------------------------------------------------------------ */

/*
 * The waiter loads the futex word before it checks the generation; a commit
 * stores `current` before it bumps the word (both seq_cst). So a waiter that
 * saw the old generation saw the old futex value too, and FUTEX_WAIT returns
 * at once if the bump came in between: no wakeup is lost to a commit.
 *
 * Anyone who can map the segment can also issue futex operations on the
 * word (FUTEX_CMP_REQUEUE moves our waiters to a futex nobody wakes): so no
 * single FUTEX_WAIT lasts longer than WAIT_SLICE_MS, after which the
 * generation and the retired state are checked again.
 */
#define WAIT_SLICE_MS 100

int shmcfg_wait(const shmcfg *h, uint64_t after, int timeout_ms, uint64_t *gen_ret)
{
	SHMCFG_API_ENTRY;
	assert_return(h, -EINVAL);
	uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : now_ns(CLOCK_MONOTONIC) + (uint64_t)timeout_ms * 1000000ull;
	for (;;) {
		uint32_t f = __atomic_load_n(&h->hdr->futex, __ATOMIC_SEQ_CST);
		uint64_t g = cur_gen(__atomic_load_n(&h->hdr->current, __ATOMIC_SEQ_CST));
		if (gen_ret)
			*gen_ret = g;
		if (g > after)
			return 0;
		if (shmcfg_retired(h))
			return shmcfg__err(SHMCFG_E_RETIRED, "%s: segment was removed or replaced; attach again",
					   h->name);
		uint64_t now = now_ns(CLOCK_MONOTONIC);
		if (now >= deadline)
			return -ETIMEDOUT;
		uint64_t left = deadline - now, slice = WAIT_SLICE_MS * 1000000ull;
		if (left > slice)
			left = slice;
		struct timespec ts = {(time_t)(left / 1000000000ull), (long)(left % 1000000000ull)};
		/* a shared futex: no FUTEX_PRIVATE_FLAG, the word is in shared memory */
		long r = syscall(SYS_futex, &h->hdr->futex, FUTEX_WAIT, f, &ts, NULL, 0);
		if (r < 0 && errno == EINTR)
			return -EINTR;
	}
}

int shmcfg_commit_info(const shmcfg *h, uint64_t gen, shmcfg_commit *ret)
{
	SHMCFG_API_ENTRY;
	assert_return(h && ret, -EINVAL);
	/* a record beyond the current generation belongs to a writer that died
	 * before publishing */
	if (gen == 0 || gen > shmcfg_generation(h))
		return -ENOENT;
	const struct log_ent *e = log_at(h, gen);
	for (int i = 0; i < 100; i++) {
		if (__atomic_load_n(&e->gen, __ATOMIC_ACQUIRE) != gen)
			return -ENOENT;
		struct log_ent copy;
		memcpy(&copy, e, sizeof copy);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&e->gen, __ATOMIC_RELAXED) != gen)
			continue;
		ret->generation = gen;
		ret->time_ns = copy.time_ns;
		ret->pid = copy.pid;
		ret->uid = copy.uid;
		ret->nchanged = copy.nchanged;
		ret->nids = 0;
		for (uint32_t k = 0; k < copy.nids && k < SHMCFG_LOG_IDS; k++)
			if (copy.ids[k] < h->lay.nopts)
				ret->ids[ret->nids++] = copy.ids[k];
		return 0;
	}
	return -ENOENT;
}

int shmcfg_changes(const shmcfg *h, uint64_t from, uint64_t to, bool *changed)
{
	SHMCFG_API_ENTRY;
	assert_return(h && changed && from < to, -EINVAL);
	memset(changed, 0, h->lay.nopts * sizeof *changed);
	/* every commit in between must still be in the log with its full list */
	for (uint64_t g = from + 1; g <= to; g++) {
		shmcfg_commit c;
		if (shmcfg_commit_info(h, g, &c) || c.nids < c.nchanged)
			goto compare;
		for (uint32_t k = 0; k < c.nids; k++)
			changed[c.ids[k]] = true;
	}
	goto count;
compare : {
	/* fall back to comparing the two generations, if both are still in slots */
	bool got_from = false, got_to = false;
	char *ca = malloc(h->lay.slot_size), *cb = malloc(h->lay.slot_size);
	int r = -ENOENT;
	for (uint32_t s = 0; ca && cb && s < h->lay.nslots; s++) {
		uint64_t g = __atomic_load_n(&slot_at(h, s)->gen, __ATOMIC_ACQUIRE);
		if (g == from && shmcfg__seq_copy(h, g << SHMCFG__SLOT_BITS | s, ca))
			got_from = true;
		if (g == to && shmcfg__seq_copy(h, g << SHMCFG__SLOT_BITS | s, cb))
			got_to = true;
	}
	if (got_from && got_to) {
		for (uint32_t i = 0; i < h->lay.nopts; i++)
			changed[i] = !cells_equal(h, slot_cells(h, ca) + i, slot_heap(h, ca),
						  slot_cells(h, cb) + i, slot_heap(h, cb));
		r = 0;
	}
	free(ca);
	free(cb);
	if (r)
		return shmcfg__err(r, "%s: generations %llu..%llu are no longer known", h->name,
				   (unsigned long long)from, (unsigned long long)to);
}
count : {
	int n = 0;
	for (uint32_t i = 0; i < h->lay.nopts; i++)
		n += changed[i];
	return n;
}
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
	b.implied_by = malloc(h->lay.nopts * sizeof(uint32_t));
	b.implier = malloc(h->lay.nopts * sizeof(uint32_t));
	int r = b.implied_by && b.implier ? 0 : -ENOMEM;
	uint64_t src = (uint64_t)SHMCFG_SRC_PATCH << META_SRC_SHIFT;
	for (size_t k = 0; !r && k < n; k++)
		r = put_cell(&b, opts[k], &vals[k], META_SET | src,
			     resolve_all ? &b.layers[(size_t)opts[k] * NLAYERS + SHMCFG_SRC_USER - 1]
					 : &b.cells[opts[k]]);
	if (!r && resolve_all)
		r = resolve(&b);
	if (!r && !resolve_all) /* the aliases of patched options follow them */
		for (uint32_t i = 0; i < h->lay.nopts; i++)
			if (h->desc[i].alias != SHMCFG_NO_OPT) {
				b.cells[i] = b.cells[h->desc[i].alias_final];
				b.cells[i].meta = (b.cells[i].meta & ~(7ull << META_SRC_SHIFT)) |
						  (uint64_t)SHMCFG_SRC_ALIAS << META_SRC_SHIFT;
			}
	for (size_t k = 0; !r && !resolve_all && k < n; k++)
		b.cells[opts[k]].meta &= ~META_SET;
	free(b.implied_by);
	free(b.implier);
	return r;
}
