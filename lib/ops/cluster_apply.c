/* SPDX-License-Identifier: MIT */
/*
 * The cluster apply step (shmcfg_cluster_apply_*): a cluster's keys, read
 * from etcd by the caller (shmcfg-sync), diffed against the segment's
 * cluster layer and the knob layers, and committed as one generation tagged
 * with the etcd revision. Two ways in:
 *   a whole load (SHMCFG_CLUSTER_APPLY_ALL): the keys are all the cluster
 *     holds; an option without an opt/ key loses its cluster value, and a
 *     knob without a knob/ key loses the knob values the cluster wrote
 *     (O(options + keys));
 *   one revision: only the keys it changed (a NULL value: deleted); the work
 *     is in proportion to them, plus one pass over the options when a knob
 *     key is among them (the options that declare it).
 * Only layers that differ from what the segment holds are written.
 *
 * What this host cannot take is left out and the rest applied; the caller
 * hears of every opt/ and knob/ key, taken or refused with its reason: an
 * unknown option, an alias, bytes that are not JSON, a value of the wrong
 * type or out of range, and a value the value heap has no room for (the
 * commit says SHMCFG_E_FULL: the biggest new values go, until the rest fits
 * the heap's free room, and the commit is tried again, so one oversized
 * value never holds back the others: drop_for_room). Each reason is one
 * printable line. Running out of memory is no verdict: the apply fails.
 *
 * The plan is made against a snapshot, released before the commit: what it
 * read may move before the writer lock is taken. So the revision is
 * compared with the segment's (an older one is refused, -ESTALE, unless
 * SHMCFG_CLUSTER_APPLY_REBASE) and the knob resets checked for ownership
 * under the lock, in the commit (lib/commit/publish.c, cluster_checks).
 *
 * Knob ownership: the knob layer is shared with local writers (shmctl set
 * --knob). Every commit here carries an origin (shmcfg_txn_origin), so the
 * cells it writes are marked as the cluster's; a deleted or absent knob key
 * resets only the knob values so marked
 * (shmcfg_snapshot_layer_by_cluster, and again under the lock), and a local
 * one stays.
 *
 * Written on the public calls only (nested: they clear no detail, so each
 * reason is taken from a detail cleared before the call that gave it).
 */
#include "internal.h"
#include "slot.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OPT_DIR SHMCFG_CLUSTER_KEY_OPT
#define KNOB_DIR SHMCFG_CLUSTER_KEY_KNOB
#define OPT_DIR_LEN (sizeof OPT_DIR - 1)
#define KNOB_DIR_LEN (sizeof KNOB_DIR - 1)
#define WHY_MAX 512
/* The longest key and value taken (shmcfg_cluster_apply_key): a value's JSON
 * is at most its biggest string's bytes each written as \uXXXX, plus quotes,
 * commas and brackets (a list's); a key is a folder and a name. Checked
 * first, so that no size below overflows (len + 1). */
#define KEY_MAX 4096
#define JSON_MAX (6 * (size_t)SEG_MAX_VALUE_BYTES + 4096)

enum kind { K_OTHER, K_OPT, K_KNOB };

/* A key given. */
struct ckey {
	char *key;
	char *value;  /* NULL: deleted */
	size_t len;
	uint64_t hash;
	enum kind kind;
	char *why;    /* refused: why (owned); NULL: taken */
};

/* A layer to write. */
struct item {
	shmcfg_opt opt;
	shmcfg_source layer;
	bool reset;
	shmcfg_value v;   /* owned */
	size_t key;       /* the key that asked for it: an index into keys */
	size_t bytes;     /* what the value takes in the heap: its chunk's size class, at least */
	bool dropped;     /* refused at commit */
};

struct shmcfg_cluster_apply {
	shmcfg *h;
	unsigned flags;
	struct ckey *keys;
	size_t n, cap;
	uint32_t *index;  /* open addressing over keys by hash: UINT32_MAX empty */
	size_t index_cap; /* a power of two, at least twice n; or 0 */
	size_t nknobs;    /* knob/ keys among them */
	/* during the commit */
	shmcfg_snapshot *snap;
	struct item *it;
	size_t nit, itcap;
};

static uint64_t key_hash(const char *s, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
	return h;
}

/* The key of that name (len bytes), or NULL. */
static struct ckey *find(const struct shmcfg_cluster_apply *a, const char *key, size_t len)
{
	if (!a->index_cap)
		return NULL;
	uint64_t h = key_hash(key, len);
	for (size_t i = h & (a->index_cap - 1);; i = (i + 1) & (a->index_cap - 1)) {
		uint32_t k = a->index[i];
		if (k == UINT32_MAX)
			return NULL;
		struct ckey *c = &a->keys[k];
		if (c->hash == h && !strncmp(c->key, key, len) && !c->key[len])
			return c;
	}
}

static int index_grow(struct shmcfg_cluster_apply *a)
{
	size_t cap = a->index_cap ? a->index_cap * 2 : 64;
	uint32_t *ix = shmcfg__malloc(cap * sizeof *ix);
	if (!ix)
		return shmcfg__nomem();
	memset(ix, 0xff, cap * sizeof *ix);
	for (size_t k = 0; k < a->n; k++) {
		size_t i = a->keys[k].hash & (cap - 1);
		while (ix[i] != UINT32_MAX)
			i = (i + 1) & (cap - 1);
		ix[i] = (uint32_t)k;
	}
	shmcfg__free(a->index);
	a->index = ix;
	a->index_cap = cap;
	return 0;
}

int shmcfg_cluster_apply_begin(shmcfg *h, unsigned flags, shmcfg_cluster_apply **ret)
{
	SHMCFG_API_ENTRY;
	assert_return(h && ret, -EINVAL);
	*ret = NULL;
	if (flags & ~(unsigned)(SHMCFG_CLUSTER_APPLY_ALL | SHMCFG_CLUSTER_APPLY_REBASE))
		return shmcfg__err(-EINVAL, "shmcfg_cluster_apply_begin: unknown flags %#x",
				   flags & ~(unsigned)(SHMCFG_CLUSTER_APPLY_ALL | SHMCFG_CLUSTER_APPLY_REBASE));
	if (shmcfg_readonly(h))
		return shmcfg__err(SHMCFG_E_READONLY, "%s: attached read-only, cannot apply the cluster's keys",
				   shmcfg_name(h));
	struct shmcfg_cluster_apply *a = shmcfg__calloc(1, sizeof *a);
	if (!a)
		return shmcfg__nomem();
	a->h = h;
	a->flags = flags;
	*ret = a;
	return 0;
}

int shmcfg_cluster_apply_key(shmcfg_cluster_apply *a, const char *key, const char *value, size_t len)
{
	SHMCFG_API_ENTRY;
	assert_return(a && key, -EINVAL);
	enum kind kind = !strncmp(key, OPT_DIR, OPT_DIR_LEN)   ? K_OPT
			 : !strncmp(key, KNOB_DIR, KNOB_DIR_LEN) ? K_KNOB
								 : K_OTHER;
	if (kind == K_OTHER)
		return 0; /* head, audit/...: no value of this host's */
	size_t klen = strnlen(key, KEY_MAX + 1);
	bool dup = klen <= KEY_MAX && find(a, key, klen);
	char shown[208]; /* the key in a detail (only then): one printable line */
	if (dup || klen > KEY_MAX || (value && len > JSON_MAX))
		shmcfg__line_text(key, shown, klen > KEY_MAX ? 72 : sizeof shown);
	if (klen > KEY_MAX)
		return shmcfg__err(-EINVAL, "a cluster key of more than %d bytes: '%s'", KEY_MAX, shown);
	if (value && len > JSON_MAX)
		return shmcfg__err(-EINVAL,
				   "the value of the cluster key '%s' has %zu bytes, more than the %zu any "
				   "value's JSON takes",
				   shown, len, JSON_MAX);
	if (dup)
		return shmcfg__err(-EEXIST, "the cluster key '%s' was given twice", shown);
	if (a->n >= UINT32_MAX - 1)
		return shmcfg__err(-E2BIG, "more than %u cluster keys", (unsigned)UINT32_MAX - 2);
	if (2 * (a->n + 1) > a->index_cap && index_grow(a))
		return -ENOMEM;
	if (a->n == a->cap) {
		size_t cap = a->cap ? 2 * a->cap : 16;
		struct ckey *k = shmcfg__realloc(a->keys, cap * sizeof *k);
		if (!k)
			return shmcfg__nomem();
		a->keys = k;
		a->cap = cap;
	}
	struct ckey c = {.key = shmcfg__strdup(key), .len = len, .hash = key_hash(key, klen), .kind = kind};
	if (value && (c.value = shmcfg__malloc(len + 1))) {
		memcpy(c.value, value, len);
		c.value[len] = 0;
	}
	if (!c.key || (value && !c.value)) {
		shmcfg__free(c.key);
		shmcfg__free(c.value);
		return shmcfg__nomem();
	}
	a->keys[a->n] = c;
	size_t i = c.hash & (a->index_cap - 1);
	while (a->index[i] != UINT32_MAX)
		i = (i + 1) & (a->index_cap - 1);
	a->index[i] = (uint32_t)a->n++;
	a->nknobs += kind == K_KNOB;
	return 0;
}

/* The reason of a key whose own reason could not be copied: refused even so
 * (a NULL reason would say taken). */
static char nomem_why[] = "refused (its reason was lost: out of memory)";

static void items_free(struct shmcfg_cluster_apply *a)
{
	for (size_t i = 0; i < a->nit; i++)
		shmcfg_value_clear(&a->it[i].v);
	shmcfg__free(a->it);
	a->it = NULL;
	a->nit = a->itcap = 0;
}

shmcfg_cluster_apply *shmcfg_cluster_apply_abort(shmcfg_cluster_apply *a)
{
	SHMCFG_API_KEEP;
	if (!a)
		return NULL;
	for (size_t i = 0; i < a->n; i++) {
		shmcfg__free(a->keys[i].key);
		shmcfg__free(a->keys[i].value);
		if (a->keys[i].why != nomem_why)
			free(a->keys[i].why);
	}
	shmcfg__free(a->keys);
	shmcfg__free(a->index);
	items_free(a);
	shmcfg_snapshot_release(a->snap);
	shmcfg__free(a);
	return NULL;
}

/* The reason of a failed nested call: its detail, else its code's name. */
static void why_of(int r, char *why)
{
	const char *d = shmcfg_errdetail();
	snprintf(why, WHY_MAX, "%s", *d ? d : shmcfg_strerror(r));
	shmcfg__clear_err();
}

/* Key k is refused for why (the last reason given wins). SIZE_MAX: the
 * reset of a layer no key names (a whole load's). */
static void refuse(struct shmcfg_cluster_apply *a, size_t k, const char *why)
{
	if (k == SIZE_MAX)
		return;
	/* one printable line: a reason may quote the key's bytes (an option's
	 * name, a value not taken), which may hold anything */
	char line[WHY_MAX];
	shmcfg__line_text(why, line, sizeof line);
	char *w = strdup(line);
	if (!w) { /* out of memory: refused all the same, its reason lost */
		if (!a->keys[k].why)
			a->keys[k].why = nomem_why;
		return;
	}
	if (a->keys[k].why != nomem_why)
		free(a->keys[k].why);
	a->keys[k].why = w;
}

static size_t value_bytes(const shmcfg_value *v)
{
	if (v->is_null)
		return 8;
	if (v->type == SHMCFG_STR)
		return v->u.str.len + 1;
	if (v->type == SHMCFG_LIST || v->type == SHMCFG_SET)
		return v->u.list.bytes + 8;
	return 8;
}

/* Sets (v non-NULL, taken over) or resets the option's layer for key k, if
 * that differs from what the segment holds. 0 or an error. */
static int plan_add(struct shmcfg_cluster_apply *a, shmcfg_opt opt, shmcfg_source layer, shmcfg_value *v, size_t k)
{
	shmcfg_value cur;
	int r = shmcfg_snapshot_layer(a->snap, opt, layer, &cur);
	if (r < 0)
		goto out;
	bool set = r == 0;
	r = 0;
	if (v ? set && shmcfg_value_equal(&cur, v) : !set)
		goto out;
	if (a->nit == a->itcap) {
		size_t cap = a->itcap ? a->itcap * 2 : 16;
		struct item *it = shmcfg__realloc(a->it, cap * sizeof *it);
		if (!it) {
			r = shmcfg__nomem();
			goto out;
		}
		a->it = it;
		a->itcap = cap;
	}
	struct item *it = &a->it[a->nit++];
	*it = (struct item){.opt = opt, .layer = layer, .reset = !v, .key = k};
	if (v) {
		it->v = *v;
		/* its chunk (at least), as the heap sizes it */
		it->bytes = shmcfg__heap_chunk_bytes(CHUNK_HDR_BYTES + sizeof(struct shmcfg__cell) +
						     value_bytes(v));
		memset(v, 0, sizeof *v);
	}
	return 0;
out:
	if (v)
		shmcfg_value_clear(v);
	return r;
}

/* The value key k gives an option, parsed and checked against this schema:
 * 0 and *v, 1 (refused: the reason in why), or -ENOMEM (no verdict on the
 * key: the apply fails). */
static int key_value(struct shmcfg_cluster_apply *a, shmcfg_opt opt, size_t k, shmcfg_value *v, char *why)
{
	const struct ckey *c = &a->keys[k];
	int r = shmcfg_value_from_json(a->h, opt, c->value, c->len, v);
	if (!r && (r = shmcfg_value_check(a->h, opt, v)))
		shmcfg_value_clear(v);
	if (r == -ENOMEM)
		return r;
	if (r)
		why_of(r, why);
	return r ? 1 : 0;
}

/* An opt/ key: the option's cluster layer (deleted: reset). */
static int plan_opt(struct shmcfg_cluster_apply *a, size_t k, bool *has)
{
	struct ckey *c = &a->keys[k];
	const char *name = c->key + OPT_DIR_LEN;
	char why[WHY_MAX];
	shmcfg_opt o;
	shmcfg_optinfo oi;
	int r = shmcfg_lookup(a->h, name, &o);
	shmcfg__clear_err();
	if (r == SHMCFG_E_NOOPT) {
		if (c->value)
			snprintf(why, sizeof why, "unknown option '%.400s'", name), refuse(a, k, why);
		return 0;
	}
	if (r || (r = shmcfg_opt_info(a->h, o, &oi)))
		return r;
	if (oi.alias != SHMCFG_NO_OPT) {
		if (c->value)
			snprintf(why, sizeof why, "'%.400s' is an alias; the key must name its option", name),
				refuse(a, k, why);
		return 0;
	}
	if (has)
		has[o] = true;
	if (!c->value)
		return plan_add(a, o, SHMCFG_SRC_CLUSTER, NULL, k);
	shmcfg_value v;
	if ((r = key_value(a, o, k, &v, why))) {
		if (r > 0)
			refuse(a, k, why); /* the previous cluster value stays */
		return r < 0 ? r : 0;
	}
	return plan_add(a, o, SHMCFG_SRC_CLUSTER, &v, k);
}

/* Option o's knob layer from the knob/ key of its knob (kc NULL: none, in a
 * whole load): set where the value fits, reset where the value was the
 * cluster's; a local value stays. */
static int plan_knob(struct shmcfg_cluster_apply *a, shmcfg_opt o, const struct ckey *kc)
{
	size_t k = kc ? (size_t)(kc - a->keys) : SIZE_MAX;
	if (!kc || !kc->value) {
		int r = shmcfg_snapshot_layer_by_cluster(a->snap, o, SHMCFG_SRC_KNOB);
		return r == 1 ? plan_add(a, o, SHMCFG_SRC_KNOB, NULL, k) : r;
	}
	shmcfg_value v;
	char why[WHY_MAX];
	int r = key_value(a, o, k, &v, why);
	if (r) {
		if (r > 0)
			refuse(a, k, why);
		return r < 0 ? r : 0;
	}
	return plan_add(a, o, SHMCFG_SRC_KNOB, &v, k);
}

/* The plan: the layers to write, against the segment as a snapshot holds it. */
static int plan(struct shmcfg_cluster_apply *a)
{
	bool all = a->flags & SHMCFG_CLUSTER_APPLY_ALL;
	uint32_t n = shmcfg_count(a->h);
	bool *has = all ? shmcfg__calloc(n ? n : 1, sizeof *has) : NULL;
	int r = all && !has ? shmcfg__nomem() : shmcfg_snapshot_acquire(a->h, &a->snap);
	for (size_t k = 0; !r && k < a->n; k++)
		if (a->keys[k].kind == K_OPT)
			r = plan_opt(a, k, has);
	/* options without a key: their cluster value goes */
	for (shmcfg_opt o = 0; all && !r && o < n; o++) {
		shmcfg_optinfo oi;
		if (!has[o] && !(r = shmcfg_opt_info(a->h, o, &oi)) && oi.alias == SHMCFG_NO_OPT)
			r = plan_add(a, o, SHMCFG_SRC_CLUSTER, NULL, SIZE_MAX);
	}
	shmcfg__free(has);
	/* knobs: by option, each option's knob key looked up */
	char *key = NULL;
	size_t cap = 0;
	for (shmcfg_opt o = 0; (all || a->nknobs) && !r && o < n; o++) {
		shmcfg_optinfo oi;
		if ((r = shmcfg_opt_info(a->h, o, &oi)) || !oi.knob || oi.alias != SHMCFG_NO_OPT)
			continue;
		size_t len = KNOB_DIR_LEN + strlen(oi.knob);
		if (len >= cap) {
			char *k = shmcfg__realloc(key, len + 1);
			if (!k) {
				r = shmcfg__nomem();
				break;
			}
			key = k;
			cap = len + 1;
		}
		memcpy(key, KNOB_DIR, KNOB_DIR_LEN);
		memcpy(key + KNOB_DIR_LEN, oi.knob, len - KNOB_DIR_LEN + 1);
		const struct ckey *kc = find(a, key, len);
		if (kc || all)
			r = plan_knob(a, o, kc);
	}
	shmcfg__free(key);
	return r;
}

/* The plan as one transaction: 0 or the error of the step that failed
 * (*bad: the item refused, if one was). */
static int txn_of(struct shmcfg_cluster_apply *a, uint64_t rev, const char *who, shmcfg_txn **ret,
		  size_t *bad, uint32_t *nset)
{
	shmcfg_txn *t;
	int r = shmcfg_txn_begin(a->h, &t);
	*ret = NULL;
	*bad = SIZE_MAX;
	*nset = 0;
	if (r)
		return r;
	/* every commit carries an origin, the revision given or (0) the one
	 * the segment has when it commits: the layer cells it writes are then
	 * the cluster's. The revision is compared with the segment's under the
	 * writer lock (publish.c, cluster_checks): read here, it could move
	 * before the commit, and a slower applier take the segment back. */
	if ((r = shmcfg_txn_origin(t, rev, who))) {
		shmcfg_txn_abort(t);
		return r;
	}
	t->cluster_keep = rev == 0;
	t->cluster_no_older = rev && !(a->flags & SHMCFG_CLUSTER_APPLY_REBASE);
	for (size_t i = 0; i < a->nit; i++) {
		struct item *it = &a->it[i];
		if (it->dropped)
			continue;
		if (!(r = shmcfg_txn_layer(t, it->layer)))
			/* a knob reset planned because the cluster wrote the value:
			 * made only if it still is the cluster's when committed (a
			 * local `shmctl set --knob` since the plan stays) */
			r = !it->reset			    ? shmcfg_txn_set(t, it->opt, &it->v)
			    : it->layer == SHMCFG_SRC_KNOB ? shmcfg__txn_reset_if_cluster(t, it->opt)
							   : shmcfg_txn_reset(t, it->opt);
		if (r) {
			*bad = i;
			shmcfg_txn_abort(t);
			return r;
		}
		(*nset)++;
	}
	*ret = t;
	return 0;
}

static int cmp_bytes_desc(const void *x, const void *y)
{
	const struct item *a = *(struct item *const *)x, *b = *(struct item *const *)y;
	return (a->bytes < b->bytes) - (a->bytes > b->bytes);
}

/*
 * The value heap is full: drop the biggest values being set, refused, until
 * what is left fits the room the heap has (its free bytes after the failed
 * commit, which recycled what it could; each value's chunk counted at its
 * size class), and at least one; from the fourth try on, also at least an
 * eighth of the bytes left, so that the number of
 * tries is logarithmic whatever the estimate's error. Dropping one value a
 * try and building the whole transaction again was quadratic (122 values of
 * 1 MB: 7 s). *order (the set items, biggest first) is made at the first
 * call. 0, or SHMCFG_E_FULL (nothing left to drop), -ENOMEM.
 */
static int drop_for_room(struct shmcfg_cluster_apply *a, struct item ***order, size_t *nord, size_t *pos,
			 int tries)
{
	if (!*order) {
		size_t n = 0;
		for (size_t i = 0; i < a->nit; i++)
			n += !a->it[i].dropped && !a->it[i].reset;
		*order = shmcfg__malloc((n ? n : 1) * sizeof **order);
		if (!*order)
			return shmcfg__nomem();
		for (size_t i = 0; i < a->nit; i++)
			if (!a->it[i].dropped && !a->it[i].reset)
				(*order)[(*nord)++] = &a->it[i];
		qsort(*order, *nord, sizeof **order, cmp_bytes_desc);
	}
	while (*pos < *nord && (*order)[*pos]->dropped) /* refused since by the transaction */
		(*pos)++;
	if (*pos == *nord)
		return SHMCFG_E_FULL;
	shmcfg_info si;
	if (shmcfg_stat(a->h, &si))
		memset(&si, 0, sizeof si);
	uint64_t room = si.heap_bytes > si.heap_used ? si.heap_bytes - si.heap_used : 0, left = 0;
	for (size_t i = *pos; i < *nord; i++)
		left += (*order)[i]->dropped ? 0 : (*order)[i]->bytes;
	uint64_t goal = tries >= 3 && left / 8 * 7 < room ? left / 8 * 7 : room;
	char why[WHY_MAX];
	do {
		struct item *big = (*order)[(*pos)++];
		if (big->dropped)
			continue;
		big->dropped = true;
		left -= big->bytes;
		snprintf(why, sizeof why,
			 "does not fit this host's value heap (about %zu bytes; the heap has %" PRIu64
			 " of %" PRIu64 " bytes in use)",
			 big->bytes, si.heap_used, si.heap_bytes);
		refuse(a, big->key, why);
	} while (*pos < *nord && left > goal);
	return 0;
}

/* Commits the plan. What the segment refuses is dropped, its key refused,
 * and the rest committed: a value refused by the transaction (it names the
 * item), or, for a full value heap, the biggest values being set. */
static int commit(struct shmcfg_cluster_apply *a, uint64_t rev, const char *who, shmcfg_cluster_apply_result *res)
{
	char why[WHY_MAX];
	struct item **order = NULL;
	size_t nord = 0, pos = 0;
	int r;
	res->revision = shmcfg_cluster_revision(a->h);
	shmcfg_snapshot_release(a->snap);
	a->snap = NULL;
	for (int tries = 0;; tries++) {
		shmcfg_txn *t;
		size_t bad;
		uint32_t nset;
		shmcfg__clear_err();
		r = txn_of(a, rev, who, &t, &bad, &nset);
		/* a value the transaction refuses is this key's verdict; running
		 * out of memory is no verdict on a key: the commit fails whole */
		if (r && r != -ENOMEM && bad != SIZE_MAX) {
			a->it[bad].dropped = true;
			why_of(r, why);
			refuse(a, a->it[bad].key, why);
			continue;
		}
		if (r)
			break;
		/* a commit also when nothing is to be written: the revision is
		 * compared under the lock, and a new one published */
		r = shmcfg_txn_commit_ex(t, &res->generation, &res->published);
		if (r == SHMCFG_E_FULL) {
			int d = drop_for_room(a, &order, &nord, &pos, tries);
			if (!d)
				continue;
			if (d != SHMCFG_E_FULL)
				r = d;
		}
		if (r) {
			why_of(r, why);
			r = shmcfg__err(r, "committing: %s", why);
			break;
		}
		res->revision = shmcfg_cluster_revision(a->h);
		res->nchanged = res->published ? nset : 0;
		break;
	}
	shmcfg__free(order);
	return r;
}

int shmcfg_cluster_apply_commit_sized(shmcfg_cluster_apply *a, uint64_t revision, const char *who,
				      shmcfg_cluster_verdict_fn verdict, void *userdata,
				      shmcfg_cluster_apply_result *res, size_t res_size)
{
	SHMCFG_API_ENTRY;
	assert_return(a, -EINVAL);
	shmcfg_cluster_apply_result out = {0};
	int r = res ? shmcfg__sized_out(res_size, sizeof out, "shmcfg_cluster_apply_result") : 0;
	if (r) {
		shmcfg_cluster_apply_abort(a);
		return r;
	}
	r = plan(a);
	bool planned = !r;
	if (r) {
		char why[WHY_MAX];
		why_of(r, why);
		r = shmcfg__err(r, "%s: reading the segment: %s", shmcfg_name(a->h), why);
	} else {
		shmcfg__fault("cluster_apply.planned"); /* tests: between the plan and the commit */
		r = commit(a, revision, who, &out);
	}
	/* every opt/ and knob/ key's verdict, also when the commit failed
	 * (what was refused stays refused); none if no plan was made */
	for (size_t k = 0; planned && verdict && k < a->n; k++)
		verdict(userdata, a->keys[k].key, a->keys[k].why);
	for (size_t k = 0; k < a->n; k++)
		out.nrefused += a->keys[k].why != NULL;
	if (res)
		shmcfg__sized_copy(res, res_size, &out, sizeof out);
	shmcfg_cluster_apply_abort(a);
	if (!r)
		shmcfg__clear_err();
	return r;
}
