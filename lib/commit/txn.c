/* SPDX-License-Identifier: MIT */
/*
 * Transactions: the changes a commit will publish. Every change is checked
 * as it is recorded (options.c prepares the value); a refused change poisons
 * the transaction, which then commits nothing. publish.c commits them.
 */
#include "internal.h"
#include "history.h"

#include <errno.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* A refused change poisons its transaction, which then commits nothing (all
 * or nothing, as the README promises): keep the first refusal for
 * shmcfg_txn_commit(). Returns r. */
int shmcfg__txn_refuse(shmcfg_txn *t, int r)
{
	if (r && t && !t->err) {
		t->err = r;
		t->err_detail = shmcfg__strdup(shmcfg_errdetail());
	}
	return r;
}

/* assert_return for the calls that change a transaction: poisons it too */
#define txn_assert_return(t, expr)                                                              \
	do {                                                                                    \
		if (__builtin_expect(!(expr), 0))                                               \
			return shmcfg__txn_refuse((t), shmcfg__err(-EINVAL, "%s: invalid argument (%s)", \
								   __func__, #expr));                  \
	} while (0)

/*
 * The calling thread's last freed transaction, kept for its next one: its
 * malloc and free were ~4% of a one-change commit. Per thread, not per
 * handle: a transaction may outlive its handle (a binding's, collected after
 * its segment), and nothing but its thread touches the spare. A thread that
 * exits frees its spare (the key's destructor) and keeps none after that (a
 * later key destructor's transaction is freed: glibc may run no further
 * round); the main thread's stays reachable from its TLS until the process
 * exits, and a forked child keeps only its own thread's. The library is
 * linked -z nodelete: a dlclose would leave the destructor unmapped. The
 * test copy's seam sees a kept spare as no allocation and its reuse as one
 * (shmcfg__seam_adopt: it may fail, and it counts until freed). An ASan
 * build keeps none, so that its quarantine still finds a transaction used
 * after its commit or abort.
 */
enum spare_state { SPARE_NEW, SPARE_KEYED, SPARE_OFF };
/* initial-exec, as the library's other thread variables: no __tls_get_addr */
static __thread shmcfg_txn *spare_txn __attribute__((tls_model("initial-exec")));
static __thread unsigned char spare_state __attribute__((tls_model("initial-exec")));
static pthread_key_t spare_key;
static bool spare_key_ok;
static pthread_once_t spare_once = PTHREAD_ONCE_INIT;

static void spare_free(void *unused)
{
	(void)unused;
	free(spare_txn);
	spare_txn = NULL;
	spare_state = SPARE_OFF;
}

static void spare_key_make(void)
{
	spare_key_ok = pthread_key_create(&spare_key, spare_free) == 0;
}

/* t, emptied, as the thread's spare; or freed */
static void txn_release(shmcfg_txn *t)
{
#ifndef __SANITIZE_ADDRESS__
	if (spare_state == SPARE_NEW) {
		pthread_once(&spare_once, spare_key_make);
		/* a non-NULL value: the destructor runs at the thread's exit */
		spare_state = spare_key_ok && pthread_setspecific(spare_key, &spare_txn) == 0 ? SPARE_KEYED : SPARE_OFF;
	}
	if (!spare_txn && spare_state == SPARE_KEYED) {
		shmcfg__seam_forget(t);
		spare_txn = t;
		return;
	}
#endif
	shmcfg__free(t);
}

/* The thread's spare, taken (NULL: none, or the test copy's seam failed
 * its reuse, as it fails an allocation) */
static shmcfg_txn *spare_take(void)
{
	shmcfg_txn *t = spare_txn;
	if (!t || !shmcfg__seam_adopt(t, sizeof *t))
		return NULL;
	spare_txn = NULL;
	return t;
}

/* An empty transaction on h (layer: the knob's, 0), its changes in small_ch
 * until they outgrow it; NULL when out of memory. */
shmcfg_txn *shmcfg__txn_new(shmcfg *h)
{
	/* not calloc: small_ch needs no zeroing. Two memsets of at most 80
	 * bytes each, not one: gcc makes a longer one a `rep stos`, whose
	 * start-up was half of shmcfg_txn_begin's time */
	shmcfg_txn *t = spare_txn ? spare_take() : shmcfg__malloc(sizeof *t);
	if (!t)
		return NULL;
	t->h = h;
	t->ch = t->small_ch;
	t->cap = TXN_INLINE;
	memset(&t->origin, 0, offsetof(shmcfg_txn, who) - offsetof(shmcfg_txn, origin));
	memset(t->who, 0, sizeof t->who);
	return t;
}

int shmcfg_txn_begin(shmcfg *h, shmcfg_txn **ret)
{
	SHMCFG_API_ENTRY;
	assert_return(h && ret, -EINVAL);
	const shmcfg *h0 = h;
	SHMCFG_FOLLOW(h);
	if (h->rdonly)
		return shmcfg__err(SHMCFG_E_READONLY, "%s: attached read-only, cannot write", h->name);
	shmcfg_txn *t = shmcfg__txn_new(h);
	if (!t)
		return shmcfg__nomem();
	t->origin = h != h0 && h->root_map ? h0 : NULL; /* followed into another schema: map (follow.c) */
	t->layer = LAYER_USER;
	*ret = t;
	return 0;
}

shmcfg_txn *shmcfg_txn_abort(shmcfg_txn *t)
{
	SHMCFG_API_KEEP;
	if (!t || t == spare_txn) /* spare: aborted twice, a caller's bug that must not free twice */
		return NULL;
	/* only what was allocated is freed: a commit of a few scalars ends here
	 * with nothing but t itself */
	for (size_t i = 0; i < t->n; i++)
		if (t->ch[i].v.owned)
			shmcfg__free(t->ch[i].v.owned);
	if (t->ch != t->small_ch)
		shmcfg__free(t->ch);
	if (t->idx)
		shmcfg__free(t->idx);
	if (t->err_detail)
		shmcfg__free(t->err_detail);
	txn_release(t);
	return NULL;
}

int shmcfg_txn_layer(shmcfg_txn *t, shmcfg_source layer)
{
	SHMCFG_API_ENTRY;
	txn_assert_return(t, t);
	/* the environment's layers come from the environment only */
	if (layer != SHMCFG_SRC_USER && layer != SHMCFG_SRC_KNOB && layer != SHMCFG_SRC_CLUSTER)
		return shmcfg__txn_refuse(t, shmcfg__err(-EINVAL,
						 "transactions write the user, cluster or knob layer, not %s",
						 shmcfg_source_name(layer)));
	t->layer = layer_of(layer);
	return 0;
}

int shmcfg_txn_origin(shmcfg_txn *t, uint64_t cluster_rev, const char *who)
{
	SHMCFG_API_ENTRY;
	txn_assert_return(t, t);
	t->cluster_rev = cluster_rev;
	snprintf(t->who, sizeof t->who, "%s", who ? who : "");
	/* cut at a character, not inside one: if the last character's lead
	 * byte says it is longer than what is left of it, drop it */
	size_t n = strlen(t->who), k = n;
	while (k > 0 && ((unsigned char)t->who[k - 1] & 0xc0) == 0x80)
		k--;
	if (k > 0) {
		unsigned char lead = (unsigned char)t->who[k - 1];
		size_t want = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
		if (n - (k - 1) < want)
			t->who[k - 1] = 0;
	}
	return 0;
}

/*
 * Which change holds (opt, layer): a linear search while the transaction is
 * small, then an open-addressing index (a load or a rollback queues every
 * option: a search per change would make them quadratic). The slot of the
 * index where (opt, layer) is or would go; *at: the change, or SIZE_MAX.
 */
#define TXN_LINEAR 16
static size_t idx_slot(const shmcfg_txn *t, shmcfg_opt opt, enum layer layer, size_t *at)
{
	uint64_t key = ((uint64_t)opt << 3 | (uint64_t)layer) * 0x9e3779b97f4a7c15ull;
	size_t p = (size_t)(key >> 32) & (t->idx_cap - 1);
	for (;; p = (p + 1) & (t->idx_cap - 1)) { /* idx_cap >= 2 n: a free slot exists */
		uint32_t c = t->idx[p];
		*at = c ? c - 1 : SIZE_MAX;
		if (!c || (t->ch[c - 1].opt == opt && t->ch[c - 1].layer == layer))
			return p;
	}
}

static size_t txn_find(const shmcfg_txn *t, shmcfg_opt opt, enum layer layer)
{
	size_t at = SIZE_MAX;
	if (t->idx)
		idx_slot(t, opt, layer, &at);
	else
		for (size_t i = 0; i < t->n && at == SIZE_MAX; i++)
			if (t->ch[i].opt == opt && t->ch[i].layer == layer)
				at = i;
	return at;
}

/* Index changes 0..n-1 (n+1 fit without growing again soon). */
static int idx_build(shmcfg_txn *t, size_t n)
{
	/* room for the changes a transaction holds inline at once (half
	 * full at TXN_INLINE): one build up to there, where 16, 32 and 64
	 * changes each built it again */
	size_t cap = 2 * TXN_INLINE;
	while (cap < 4 * n)
		cap *= 2;
	uint32_t *idx = shmcfg__calloc(cap, sizeof *idx);
	if (!idx)
		return shmcfg__nomem();
	shmcfg__free(t->idx);
	t->idx = idx;
	t->idx_cap = cap;
	for (size_t i = 0, at; i < n; i++)
		t->idx[idx_slot(t, t->ch[i].opt, t->ch[i].layer, &at)] = (uint32_t)i + 1;
	return 0;
}

/* The change of opt's layer, for the caller to fill: the earlier one, its
 * value freed, or a new one; NULL if the transaction could not grow. */
static struct change *txn_slot(shmcfg_txn *t, shmcfg_opt opt, enum layer layer)
{
	/* one probe of an index with room: the slot where the change is, or
	 * goes; else a search, and the index (re)built only to add */
	bool room = t->n < TXN_LINEAR || (t->idx && 2 * (t->n + 1) <= t->idx_cap);
	size_t i = SIZE_MAX, p = room && t->idx ? idx_slot(t, opt, layer, &i) : 0;
	if (!room || !t->idx)
		i = txn_find(t, opt, layer);
	if (i != SIZE_MAX) {
		shmcfg_value_clear(&t->ch[i].v);
		t->ch[i].if_cluster = false;
		return &t->ch[i];
	}
	if (t->n == t->cap) {
		size_t cap = t->cap * 2;
		bool small = t->ch == t->small_ch;
		struct change *ch = shmcfg__realloc(small ? NULL : t->ch, cap * sizeof *ch);
		if (!ch) {
			shmcfg__nomem();
			return NULL;
		}
		if (small)
			memcpy(ch, t->small_ch, t->n * sizeof *ch);
		t->ch = ch;
		t->cap = cap;
	}
	if (!room) {
		if (idx_build(t, t->n))
			return NULL;
		p = idx_slot(t, opt, layer, &i);
	}
	if (t->idx)
		t->idx[p] = (uint32_t)t->n + 1;
	struct change *c = &t->ch[t->n++];
	c->opt = opt;
	c->layer = layer;
	c->by_cluster = c->if_cluster = false;
	return c;
}

/* Record a change; any earlier change of the same option and layer goes. */
static int txn_put(shmcfg_txn *t, shmcfg_opt opt, enum layer layer, bool reset, shmcfg_value *v)
{
	struct change *c = txn_slot(t, opt, layer);
	if (!c)
		return -ENOMEM; /* said */
	c->reset = reset;
	c->v = *v;
	return 0;
}

/*
 * Ask the memory for the lines every commit writes: the next generation's
 * log entry (all its lines) and history index entry, where its changed ids
 * go in the ring, and the first history bytes. The rings cycle, and another
 * process's commits may have written them last: each is a miss otherwise.
 * Called with a transaction's first change (prefetch_change: the changed
 * options' lines come with it), else by its commit before it takes the
 * lock (publish.c: a transaction of resets, a replacement's). Only hints.
 */
void shmcfg__prefetch_commit(const shmcfg *h)
{
	uint64_t g = cur_gen(__atomic_load_n(&h->hdr->current, __ATOMIC_RELAXED)) + 1;
	const char *log = (const char *)log_at(h, g);
	for (size_t k = 0; k < sizeof(struct log_ent); k += 64)
		__builtin_prefetch(log + k, 1);
	__builtin_prefetch(hist_at(h, g), 1);
	__builtin_prefetch(ring_at(h, __atomic_load_n(&h->hdr->ring_head, __ATOMIC_RELAXED)), 1);
	uint64_t rec = __atomic_load_n(&h->hdr->hist_head, __ATOMIC_RELAXED);
	const char *ring = h->base + h->lay.hist_ring_off;
	__builtin_prefetch(ring + rec % h->lay.hist_ring_size, 1);
	__builtin_prefetch(ring + (rec + 64) % h->lay.hist_ring_size, 1);
}

/*
 * Ask the memory for the lines a commit of option o touches first
 * (publish.c): o's descriptor (the set and the commit read it),
 * the current slot's cell and reference (the no-op check reads them), the
 * same in the slot its handle's last commit left behind (the likely choice,
 * written), and o's block of the accessors' copy (written last: its W1
 * loads the block's seqlock); with a transaction's first change, the lines
 * every commit writes (shmcfg__prefetch_commit). Asked as a transaction
 * takes its first changes, they come while the rest of the transaction and
 * the commit's start run, together rather than each in its turn: at
 * 100,000 options each is a miss, and in a fresh process each one's page
 * is a cold translation too (doc/benchmarks.md). Only hints: a prefetch
 * never faults (a descriptor not yet validated is at most fetched, never
 * read; one not mapped, not even that), reads nothing the commit trusts,
 * and the commit checks everything again under the lock.
 */
static void prefetch_change(shmcfg_txn *t, uint32_t o)
{
	const shmcfg *h = t->h;
	uint64_t cur = __atomic_load_n(&h->hdr->current, __ATOMIC_RELAXED);
	uint32_t cs = cur_slot(cur), hs = __atomic_load_n(&h->slot_hint, __ATOMIC_RELAXED);
	if (cs >= h->lay.nslots || o >= h->lay.nopts)
		return;
	if (!t->commit_asked) {
		shmcfg__prefetch_commit(h);
		t->commit_asked = true;
	}
	/* 152 bytes on an 8-byte boundary: three lines, or four */
	const char *d = (const char *)&h->desc[o];
	for (size_t k = 0; k < sizeof(struct opt_desc); k += 64)
		__builtin_prefetch(d + k);
	__builtin_prefetch(d + sizeof(struct opt_desc) - 1);
	const void *c = slot_at(h, cs);
	__builtin_prefetch(slot_cells(h, c) + o);
	__builtin_prefetch(slot_lrefs(h, c) + o);
	__builtin_prefetch(copy_block(h, o), 1);
	if (hs < h->lay.nslots) {
		const void *w = slot_at(h, hs);
		__builtin_prefetch(slot_cells(h, w) + o, 1);
		__builtin_prefetch(slot_lrefs(h, w) + o, 1);
	}
}

/* The option a change writes (an alias's final target), on a layer it has. */
static int target_of(shmcfg_txn *t, shmcfg_opt opt, enum layer layer, shmcfg_opt *final)
{
	int r = shmcfg__target_of(t->h, opt, final);
	const struct opt_desc *d = r ? NULL : opt_d(t->h, *final);
	if (!r && layer == LAYER_KNOB && !(d->flags & DESC_F_HAS_KNOB))
		r = shmcfg__err(SHMCFG_E_LAYER, "%s: option declares no knob", sstr(t->h, d->name));
	return r;
}

int shmcfg__txn_set_layer(shmcfg_txn *t, shmcfg_opt opt, enum layer layer, const shmcfg_value *v)
{
	shmcfg_opt f;
	shmcfg_value c;
	int r = target_of(t, opt, layer, &f);
	if (r)
		return r;
	if (t->n < TXN_SMALL)
		prefetch_change(t, f);
	if ((r = shmcfg__prepare_value(t->h, f, v, &c)))
		return r;
	if ((r = txn_put(t, f, layer, false, &c)))
		shmcfg_value_clear(&c);
	return r;
}

/* shmcfg_txn_set() inside another public call */
static int txn_set(shmcfg_txn *t, shmcfg_opt opt, const shmcfg_value *v)
{
	txn_assert_return(t, t && v);
	int r = shmcfg__map_origin(t->origin, t->h, &opt);
	return shmcfg__txn_refuse(t, r ? r : shmcfg__txn_set_layer(t, opt, t->layer, v));
}

int shmcfg_txn_set(shmcfg_txn *t, shmcfg_opt opt, const shmcfg_value *v)
{
	SHMCFG_API_ENTRY;
	return txn_set(t, opt, v);
}

/* *v := a bool (i), int (i) or float (f) of that type, written in place */
static inline __attribute__((always_inline)) void scalar_value(shmcfg_value *v, shmcfg_type type, int64_t i,
								double f)
{
	*v = (shmcfg_value){.type = type};
	if (type == SHMCFG_FLOAT)
		v->u.f = f;
	else if (type == SHMCFG_BOOL)
		v->u.b = i != 0;
	else
		v->u.i = i;
}

/*
 * A bool, int or float set (most sets), straight into the change when the
 * option takes the value as it is: validated and its own target (no alias,
 * not deprecated: OPT_PLAIN), of the value's type, no range or choices, and
 * a layer it has. That is what shmcfg__txn_set_layer() makes of it
 * (shmcfg__prepare_value's first case), less its layers of calls: a fifth
 * of a 100-change commit's instructions. Anything else takes that path,
 * whose checks say what is wrong.
 */
static inline __attribute__((always_inline)) int txn_set_scalar(shmcfg_txn *t, shmcfg_opt opt, shmcfg_type type,
								  int64_t i, double f)
{
	const shmcfg *h = t ? t->h : NULL;
	bool in_range = __builtin_expect(h && !t->origin && opt < h->lay.nopts, 1);
	if (in_range && t->n < TXN_SMALL)
		prefetch_change(t, opt); /* before the descriptor's first read */
	/* acquire: as in opt_d() */
	if (in_range && (__atomic_load_n(&h->opt_ok[opt], __ATOMIC_ACQUIRE) & OPT_PLAIN)) {
		const struct opt_desc *d = &h->desc[opt];
		if (d->type == type && !(d->flags & (DESC_F_HAS_MIN | DESC_F_HAS_MAX)) && !META_LEN(d->choices.meta) &&
		    (t->layer != LAYER_KNOB || (d->flags & DESC_F_HAS_KNOB))) {
			/* the commit's digest reads the name: ask now (validated) */
			__builtin_prefetch(sstr(h, d->name));
			struct change *c = txn_slot(t, opt, t->layer);
			if (!c)
				return shmcfg__txn_refuse(t, -ENOMEM);
			/* written where it stays: a value made on the stack and
			 * copied in (16-byte loads of its 4- and 8-byte stores)
			 * waited on store forwarding, most of a set's time */
			c->reset = false;
			scalar_value(&c->v, type, i, f);
			return 0;
		}
	}
	shmcfg_value v;
	scalar_value(&v, type, i, f);
	return txn_set(t, opt, &v);
}

int shmcfg_txn_set_text(shmcfg_txn *t, shmcfg_opt opt, const char *text)
{
	SHMCFG_API_ENTRY;
	txn_assert_return(t, t && text);
	shmcfg_value v;
	int r = shmcfg__map_origin(t->origin, t->h, &opt);
	if (!r)
		r = shmcfg__parse_for(t->h, opt, text, &v);
	if (r)
		return shmcfg__txn_refuse(t, r);
	r = shmcfg__txn_refuse(t, shmcfg__txn_set_layer(t, opt, t->layer, &v));
	shmcfg_value_clear(&v);
	return r;
}

int shmcfg_txn_set_bool(shmcfg_txn *t, shmcfg_opt opt, bool v)
{
	SHMCFG_API_ENTRY;
	return txn_set_scalar(t, opt, SHMCFG_BOOL, v, 0);
}

int shmcfg_txn_set_int(shmcfg_txn *t, shmcfg_opt opt, int64_t v)
{
	SHMCFG_API_ENTRY;
	return txn_set_scalar(t, opt, SHMCFG_INT, v, 0);
}

int shmcfg_txn_set_float(shmcfg_txn *t, shmcfg_opt opt, double v)
{
	SHMCFG_API_ENTRY;
	return txn_set_scalar(t, opt, SHMCFG_FLOAT, 0, v);
}

int shmcfg_txn_set_str(shmcfg_txn *t, shmcfg_opt opt, const char *v)
{
	SHMCFG_API_ENTRY;
	txn_assert_return(t, v);
	return txn_set(t, opt, &(shmcfg_value){.type = SHMCFG_STR, .u.str = {v, strlen(v)}});
}

int shmcfg_txn_reset(shmcfg_txn *t, shmcfg_opt opt)
{
	SHMCFG_API_ENTRY;
	txn_assert_return(t, t);
	shmcfg_opt f;
	int r = shmcfg__map_origin(t->origin, t->h, &opt);
	if (!r)
		r = target_of(t, opt, t->layer, &f);
	if (r)
		return shmcfg__txn_refuse(t, r);
	shmcfg_value none = {.type = opt_d(t->h, f)->type, .is_null = true};
	return shmcfg__txn_refuse(t, txn_put(t, f, t->layer, true, &none));
}

int shmcfg__txn_reset_if_cluster(shmcfg_txn *t, shmcfg_opt opt)
{
	int r = shmcfg_txn_reset(t, opt);
	size_t i = r ? SIZE_MAX : txn_find(t, opt, t->layer);
	if (i != SIZE_MAX)
		t->ch[i].if_cluster = true;
	return r;
}

void shmcfg_set_commit_timeout(shmcfg *h, int timeout_ms)
{
	SHMCFG_API_KEEP;
	if (h)
		h->commit_timeout_ms = timeout_ms < 0 ? 0 : timeout_ms;
}

void shmcfg_set_heap_growth(shmcfg *h, bool on)
{
	SHMCFG_API_KEEP;
	if (h)
		h->no_growth = !on;
}
