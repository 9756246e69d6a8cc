/* SPDX-License-Identifier: MIT */
/* The history (doc/design.md, "The history"): every commit of the last N,
 * with who made it and each layer it changed, old and new value, and the
 * changes that undo the commits after a generation (history_at.c rebuilds
 * its values and rolls back).
 *
 * Layout: an index of N struct hist_ent (entry g % N holds generation g), a
 * seqlock each, and a byte ring holding each entry's record. Ring positions
 * grow forever (hist_head in the writer state); a record's bytes are at
 * pos % size, wrapping. A record is: u8 ulen, user name; u8 wlen, who; then,
 * unless the entry says HIST_NO_VALUES, per layer change: u32 option, u8
 * layer, u8 type, old value, new value; where a value is u8 state (0 unset,
 * 1 null, 2 set) and, when set, 8 bytes (bool, int, float) or u32 length +
 * bytes (str) or u32 count + u32 bytes + the NUL-ended items (list, set).
 *
 * Memory ordering. The writer (under the writer lock) stores the entry's
 * stamp 0, a release fence (seq_entry_begin, hist-C); moves hist_head past
 * the record's end, a release fence (hist-H1); writes the record's bytes;
 * fills the entry; stores the stamp = gen with release (hist-D). A reader
 * loads the stamp with acquire (pairs with hist-D), copies the entry and
 * the record, an acquire fence (hist-B, seq_valid), loads the stamp and
 * hist_head. If a byte it copied came from a later record's write, that
 * write followed hist-H1 of a writer whose head store the reader's head
 * load must then see (fence to fence), so a head of at most pos + size
 * proves that no byte of [pos, pos + len) was rewritten after the record
 * was; a stamp still equal to gen proves the entry's fields were that
 * generation's. Everything copied is then checked
 * as untrusted bytes: a writer may scribble anything here.
 */
#include "internal.h"
#include "slot.h"
#include "history.h"
#include "seqlock.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- writing a record ---- */

/* The record being written into the handle's buffer (buf, cap: h's). */
struct wbuf {
	shmcfg *h;
	char *buf;
	size_t n, cap;
	int err; /* the record is given up: put() writes nothing more */
};

/* The record buffer grown to hold n more bytes: false (w->err set) if not. */
static bool grow(struct wbuf *w, size_t n)
{
	shmcfg *h = w->h;
	size_t cap = h->hist_cap ? h->hist_cap : 256;
	while (cap < w->n + n)
		cap *= 2;
	char *b = shmcfg__realloc(h->hist_buf, cap);
	if (!b) {
		w->err = shmcfg__nomem();
		return false;
	}
	w->buf = h->hist_buf = b;
	w->cap = h->hist_cap = cap;
	return true;
}

/* inline: the fixed-size fields then cost a store each, not a memcpy call */
static inline __attribute__((always_inline)) void put(struct wbuf *w, const void *p, size_t n)
{
	/* after an error buf may be NULL: not even 0 bytes are copied there */
	if (w->err || (w->n + n > w->cap && !grow(w, n)))
		return;
	memcpy(w->buf + w->n, p, n);
	w->n += n;
}

static inline void put_u8(struct wbuf *w, uint8_t v)
{
	put(w, &v, 1);
}
static inline void put_u32(struct wbuf *w, uint32_t v)
{
	put(w, &v, 4);
}

/* A set cell of a scalar type, not null: its value is its val bits. */
static bool scalar_cell(const struct shmcfg__cell *c)
{
	unsigned t = META_TYPE(c->meta);
	return t >= SHMCFG_BOOL && t <= SHMCFG_FLOAT && !(c->meta & META_NULL);
}

/* Whether a layer cell's record value is its bits or nothing: unset, or a
 * scalar (plain_value() writes it). */
static bool plain_cell(const struct shmcfg__cell *c)
{
	return !(c->meta & META_SET) || scalar_cell(c);
}

/* A plain cell's record value at p (what the decode in put_value() would
 * write, without it): its length, at most 9. */
static size_t plain_value(char *p, const struct shmcfg__cell *c)
{
	if (!(c->meta & META_SET)) {
		p[0] = 0;
		return 1;
	}
	p[0] = 2;
	memcpy(p + 1, &c->val, 8);
	return 9;
}

/* A layer cell as a record's value. */
static void put_value(struct wbuf *w, const struct shmcfg__cell *c, const char *heap, uint64_t heap_size)
{
	shmcfg_value v;
	if (plain_cell(c)) {
		if (!w->err && (w->n + 9 <= w->cap || grow(w, 9)))
			w->n += plain_value(w->buf + w->n, c);
		return;
	}
	int r = shmcfg__value_from_cell(c, heap, heap_size, &v);
	if (r) {
		w->err = r;
		return;
	}
	put_u8(w, v.is_null ? 1 : 2);
	if (v.is_null)
		return;
	switch (v.type) {
	case SHMCFG_BOOL:
	case SHMCFG_INT:
	case SHMCFG_FLOAT:
		put(w, &c->val, 8);
		break;
	case SHMCFG_STR:
		put_u32(w, (uint32_t)v.u.str.len);
		put(w, v.u.str.ptr, v.u.str.len);
		break;
	default:
		put_u32(w, (uint32_t)v.u.list.count);
		put_u32(w, (uint32_t)v.u.list.bytes);
		put(w, v.u.list.items, v.u.list.bytes);
	}
}

static bool cells_same(const struct shmcfg__cell *a, const char *ha, uint64_t sa, const struct shmcfg__cell *b,
		       const char *hb, uint64_t sb)
{
	bool as = a->meta & META_SET, bs = b->meta & META_SET;
	if (as != bs)
		return false;
	if (!as)
		return true;
	if (scalar_cell(a) && scalar_cell(b) && META_TYPE(a->meta) == META_TYPE(b->meta)) /* as value_equal */
		return META_TYPE(a->meta) == SHMCFG_BOOL ? (a->val != 0) == (b->val != 0) : a->val == b->val;
	shmcfg_value x, y;
	return shmcfg__value_from_cell(a, ha, sa, &x) == 0 && shmcfg__value_from_cell(b, hb, sb, &y) == 0 &&
	       shmcfg_value_equal(&x, &y);
}

/* The changes (ch: sorted by option and layer) as the build made them: each
 * one's layer cell before and after, which the build kept (b->hist). Both
 * cells' chunks are in the segment's heap, the old one still held by the
 * current slot. */
static uint32_t put_changes(struct wbuf *w, const struct change *ch, size_t n, const struct build *b)
{
	shmcfg *h = w->h;
	uint32_t count = 0;
	for (size_t k = 0; k < n && !w->err; k++) {
		const struct shmcfg__cell *was = &b->hist[k][0], *now = &b->hist[k][1];
		uint32_t i = ch[k].opt;
		if (cells_same(was, b->heap, b->heap_size, now, b->heap, b->heap_size))
			continue;
		count++;
		enum { PLAIN_MAX = 4 + 1 + 1 + 9 + 9 };
		if (plain_cell(was) && plain_cell(now) && (w->n + PLAIN_MAX <= w->cap || grow(w, PLAIN_MAX))) {
			/* the usual change, written at once: what the puts below write */
			char *p = w->buf + w->n;
			memcpy(p, &i, 4);
			p[4] = (char)ch[k].layer;
			p[5] = (char)opt_d(h, i)->type;
			size_t m = 6 + plain_value(p + 6, was);
			w->n += m + plain_value(p + m, now);
			continue;
		}
		put_u32(w, i);
		put_u8(w, (uint8_t)ch[k].layer);
		put_u8(w, (uint8_t)opt_d(h, i)->type);
		put_value(w, was, b->heap, b->heap_size);
		put_value(w, now, b->heap, b->heap_size);
	}
	return count;
}

/* Copy bytes into the ring at position pos, wrapping. */
void shmcfg__hist_ring_write(shmcfg *h, uint64_t pos, const char *src, uint64_t len)
{
	char *ring = h->base + h->lay.hist_ring_off;
	uint64_t size = h->lay.hist_ring_size, at = pos % size, first = len < size - at ? len : size - at;
	memcpy(ring + at, src, first);
	memcpy(ring, src + first, len - first);
}

static void ring_read(const shmcfg *h, uint64_t pos, char *dst, uint64_t len)
{
	const char *ring = h->base + h->lay.hist_ring_off;
	uint64_t size = h->lay.hist_ring_size, at = pos % size, first = len < size - at ? len : size - at;
	memcpy(dst, ring + at, first);
	memcpy(dst + first, ring, len - first);
}

/*
 * The history entry of `gen`, under the writer lock before `gen` is
 * published. A writer that dies in here leaves the entry's stamp 0 (readers
 * skip it) and the generation unpublished: the next writer commits `gen`
 * again and rewrites the entry.
 */
int shmcfg__hist_write(shmcfg *h, uint64_t gen, uint64_t time_ns, const struct change *ch, size_t n,
		       const struct build *b, uint64_t cluster_rev, const shmcfg_txn *origin)
{
	if (!h->self_known) { /* the handle's process commits (a forked child cannot) */
		shmcfg__self_identity(h->uid, h->self_user, h->self_comm);
		h->self_user_len = (uint8_t)strlen(h->self_user);
		h->self_known = true;
	}
	const char *who = origin ? origin->who : "";
	struct wbuf w = {.h = h, .buf = h->hist_buf, .cap = h->hist_cap};
	size_t wlen = strnlen(who, SHMCFG_WHO_MAX - 1);
	put_u8(&w, h->self_user_len);
	put(&w, h->self_user, h->self_user_len);
	put_u8(&w, (uint8_t)wlen);
	put(&w, who, wlen);
	size_t head_len = w.n;
	uint32_t count = put_changes(&w, ch, n, b);
	if (w.err)
		return w.err;
	uint32_t len = (uint32_t)w.n;
	if (w.n > h->lay.hist_ring_size / 2) /* too big: who, and no values */
		len = (uint32_t)head_len | HIST_NO_VALUES;
	struct hist_ent *e = hist_at(h, gen);
	struct seg_header *hd = h->hdr;
	seq_entry_begin(&e->gen); /* (hist-C) */
	shmcfg__fault("history.begun");
	uint64_t pos = hd->hist_head, bytes = len & ~HIST_NO_VALUES;
	/* (hist-H1): the head moves before a byte is written (see the top) */
	__atomic_store_n(&hd->hist_head, pos + bytes, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	shmcfg__hist_ring_write(h, pos, h->hist_buf, bytes);
	shmcfg__fault("history.record");
	e->time_ns = time_ns;
	e->pos = pos;
	e->len = len;
	e->nchanges = count;
	e->cluster_rev = cluster_rev;
	e->pid = (int32_t)shmcfg__self_pid;
	e->uid = h->uid;
	memcpy(e->comm, h->self_comm, sizeof e->comm);
	seq_write_end(&e->gen, gen); /* (hist-D) */
	return 0;
}

/* ---- reading ---- */

/* The entry of `gen` and its record (NULL when its bytes were overwritten
 * or it keeps no values), copied under the seqlock (history.h). */
int shmcfg__hist_entry(const shmcfg *h, uint64_t gen, struct hist_ent *e, char **rec, uint32_t *rec_len)
{
	*rec = NULL;
	*rec_len = 0;
	if (gen == 0 || gen > shmcfg_generation(h)) /* beyond: a writer died before publishing it */
		return -ENOENT;
	const struct hist_ent *se = hist_at(h, gen);
	uint64_t size = h->lay.hist_ring_size;
	for (int tries = 0; tries < HIST_MAX_TRIES; tries++) {
		if (__atomic_load_n(&se->gen, __ATOMIC_ACQUIRE) != gen)
			return -ENOENT;
		memcpy(e, se, sizeof *e);
		uint32_t len = e->len & ~HIST_NO_VALUES;
		char *buf = NULL;
		if (len <= size / 2) {
			if (!(buf = shmcfg__malloc(len ? len : 1)))
				return shmcfg__nomem();
			ring_read(h, e->pos, buf, len);
		}
		if (!seq_valid(&se->gen, gen)) { /* (hist-B) */
			shmcfg__free(buf);
			continue;
		}
		uint64_t head = __atomic_load_n(&h->hdr->hist_head, __ATOMIC_RELAXED);
		if (buf && (e->pos > head || len > head - e->pos || head - e->pos > size)) {
			shmcfg__free(buf); /* rewritten since (or a scribbled position) */
			buf = NULL;
		}
		*rec = buf;
		*rec_len = buf ? len : 0;
		return 0;
	}
	return -ENOENT;
}

struct rbuf {
	const char *p;
	size_t left;
};

static bool get(struct rbuf *r, void *dst, size_t n)
{
	if (r->left < n)
		return false;
	memcpy(dst, r->p, n);
	r->p += n;
	r->left -= n;
	return true;
}

static bool get_u8(struct rbuf *r, uint8_t *v)
{
	return get(r, v, 1);
}
static bool get_u32(struct rbuf *r, uint32_t *v)
{
	return get(r, v, 4);
}

/* A value of type t from the record: 0, 1 (bad bytes), -ENOMEM. */
static int get_value(struct rbuf *r, shmcfg_type t, shmcfg_source src, bool *set, shmcfg_value *v)
{
	uint8_t state;
	*v = (shmcfg_value){.type = t, .is_null = true, .source = src};
	if (!get_u8(r, &state) || state > 2)
		return 1;
	*set = state != 0;
	if (!*set) {
		v->type = SHMCFG_BOOL;
		v->source = SHMCFG_SRC_DEFAULT;
		return 0;
	}
	if (state == 1)
		return 0;
	v->is_null = false;
	uint32_t len, count = 0;
	uint64_t raw;
	switch (t) {
	case SHMCFG_BOOL:
	case SHMCFG_INT:
	case SHMCFG_FLOAT:
		if (!get(r, &raw, 8))
			return 1;
		if (t == SHMCFG_BOOL)
			v->u.b = raw != 0;
		else if (t == SHMCFG_INT)
			v->u.i = (int64_t)raw;
		else
			memcpy(&v->u.f, &raw, 8);
		return 0;
	case SHMCFG_STR:
		if (!get_u32(r, &len) || len > r->left || len > SEG_MAX_VALUE_BYTES ||
		    memchr(r->p, 0, len) || !shmcfg__utf8_valid(r->p, len))
			return 1;
		break;
	default:
		if (!get_u32(r, &count) || !get_u32(r, &len) || len > r->left || len > SEG_MAX_VALUE_BYTES ||
		    (len && r->p[len - 1] != 0) || !shmcfg__utf8_valid(r->p, len))
			return 1;
		uint32_t nul = 0;
		for (uint32_t k = 0; k < len; k++)
			nul += r->p[k] == 0;
		if (nul != count)
			return 1;
	}
	char *own = shmcfg__malloc(len + 1);
	if (!own)
		return shmcfg__nomem();
	memcpy(own, r->p, len);
	own[len] = 0;
	r->p += len;
	r->left -= len;
	v->owned = own;
	if (t == SHMCFG_STR)
		v->u.str = (typeof(v->u.str)){own, len};
	else
		v->u.list = (typeof(v->u.list)){own, count, len};
	return 0;
}

shmcfg_history_entry *shmcfg_history_free(shmcfg_history_entry *e)
{
	SHMCFG_API_KEEP;
	if (!e)
		return NULL;
	for (uint32_t k = 0; e->changes && k < e->nchanges; k++) {
		shmcfg_value_clear(&e->changes[k].old_value);
		shmcfg_value_clear(&e->changes[k].new_value);
	}
	shmcfg__free(e->changes);
	shmcfg__free(e);
	return NULL;
}

/* A record's bytes decoded into e (whose metadata is set): 0, or
 * SHMCFG_E_CORRUPT naming the generation, -ENOMEM. */
static int decode(const shmcfg *h, const char *rec, uint32_t len, bool values, shmcfg_history_entry *e)
{
	struct rbuf r = {rec, len};
	uint8_t n;
	if (!get_u8(&r, &n) || n >= SHMCFG_USER_MAX || !get(&r, e->user, n))
		goto bad;
	if (!get_u8(&r, &n) || n >= SHMCFG_WHO_MAX || !get(&r, e->who, n))
		goto bad;
	if (!values)
		return r.left ? shmcfg__err(SHMCFG_E_CORRUPT, "%s: history of generation %llu: bytes after its origin",
					    h->name, (unsigned long long)e->generation)
			      : 0;
	/* at least 8 bytes a change: a scribbled count cannot make us allocate much */
	if (e->nchanges > r.left / 8)
		goto bad;
	e->changes = shmcfg__calloc(e->nchanges ? e->nchanges : 1, sizeof *e->changes);
	if (!e->changes)
		return shmcfg__nomem();
	for (uint32_t k = 0; k < e->nchanges; k++) {
		shmcfg_layer_change *c = &e->changes[k];
		c->old_value = c->new_value = (shmcfg_value){.type = SHMCFG_BOOL, .is_null = true};
	}
	for (uint32_t k = 0; k < e->nchanges; k++) {
		shmcfg_layer_change *c = &e->changes[k];
		uint32_t opt;
		uint8_t layer, type;
		if (!get_u32(&r, &opt) || !get_u8(&r, &layer) || !get_u8(&r, &type) || layer >= NLAYERS ||
		    opt >= h->lay.nopts)
			goto bad;
		int ur = shmcfg__opt_use(h, opt);
		if (ur)
			return ur;
		if (type != opt_d(h, opt)->type)
			goto bad;
		c->opt = opt;
		c->layer = source_of(layer);
		int vr = get_value(&r, type, c->layer, &c->old_set, &c->old_value);
		if (!vr)
			vr = get_value(&r, type, c->layer, &c->new_set, &c->new_value);
		if (vr < 0)
			return vr;
		if (vr)
			goto bad;
	}
	if (!r.left)
		return 0;
bad:
	return shmcfg__err(SHMCFG_E_CORRUPT, "%s: the history record of generation %llu is malformed", h->name,
			   (unsigned long long)e->generation);
}

/* Walks over generations count the record bytes copied: kept records never
 * overlap in the ring, so over twice its size (room for commits meanwhile) is
 * a scribbled index: the walk stops there, as at overwritten records. */
#define HIST_WALK_BUDGET(h) (2 * (h)->lay.hist_ring_size)

static int history_get(const shmcfg *h, uint64_t gen, shmcfg_history_entry **ret, uint64_t *spent)
{
	struct hist_ent se;
	char *rec;
	uint32_t len;
	int r = shmcfg__hist_entry(h, gen, &se, &rec, &len);
	if (spent)
		*spent += len;
	if (r)
		return r == -ENOENT ? shmcfg__err(r, "%s: generation %llu is not in the history", h->name,
						  (unsigned long long)gen)
				    : r;
	shmcfg_history_entry *e = shmcfg__calloc(1, sizeof *e);
	if (!e) {
		shmcfg__free(rec);
		return shmcfg__nomem();
	}
	e->generation = gen;
	e->time_ns = se.time_ns;
	e->pid = se.pid;
	e->uid = se.uid;
	e->cluster_rev = se.cluster_rev;
	e->nchanges = se.nchanges;
	memcpy(e->process, se.comm, sizeof e->process - 1);
	e->values_kept = rec && !(se.len & HIST_NO_VALUES);
	if (rec) {
		r = decode(h, rec, len, e->values_kept, e);
		shmcfg__free(rec);
		if (r) {
			shmcfg_history_free(e);
			return r;
		}
	}
	/* the segment's bytes (any local writer names its process): printable
	 * UTF-8 only */
	shmcfg__printable(e->process);
	shmcfg__printable(e->user);
	shmcfg__printable(e->who);
	*ret = e;
	return 0;
}

int shmcfg_history_get(const shmcfg *h, uint64_t gen, shmcfg_history_entry **ret)
{
	SHMCFG_API_ENTRY;
	assert_return(h && ret, -EINVAL);
	const shmcfg *h0 = h;
	SHMCFG_FOLLOW(h);
	int r = history_get(h, gen, ret, NULL);
	if (!r && h != h0 && h->root_map) /* another schema: the caller's options (follow.c) */
		shmcfg__unmap_changes(h0, h, *ret);
	return r;
}

/* Whether generation g's commit can be undone (*ok: its values are kept):
 * 0 when its entry is there, -ENOENT when it is not (overwritten, or past
 * the walk's budget: see HIST_WALK_BUDGET), -ENOMEM. */
static int undoable(const shmcfg *h, uint64_t g, bool *ok, uint64_t *spent)
{
	shmcfg_history_entry *e;
	*ok = false;
	int r = history_get(h, g, &e, spent);
	if (r == -ENOMEM)
		return r;
	if (r)
		return -ENOENT; /* a record that does not decode is no entry either */
	if (*spent > HIST_WALK_BUDGET(h)) {
		shmcfg_history_free(e);
		return -ENOENT;
	}
	*ok = e->values_kept;
	shmcfg_history_free(e);
	return 0;
}

uint64_t shmcfg_history_range(const shmcfg *h, uint64_t *oldest, uint64_t *rebuildable)
{
	SHMCFG_API_ENTRY;
	if (oldest)
		*oldest = 0;
	if (rebuildable)
		*rebuildable = 0;
	if (!h)
		return (void)shmcfg__err(-EINVAL, "%s: invalid argument (h)", __func__), 0;
	h = shmcfg__live(h);
	uint64_t cur = shmcfg_generation(h), old = cur, reb = cur;
	uint64_t stop = cur > h->lay.hist_n ? cur - h->lay.hist_n : 0;
	bool all = true; /* every commit from cur down to g can be undone */
	uint64_t spent = 0;
	for (uint64_t g = cur; g > stop && g >= 1; g--) {
		bool ok;
		int r = undoable(h, g, &ok, &spent);
		if (r == -ENOMEM) /* not a shorter history: no answer */
			return 0;
		if (r)
			break;
		old = g;
		if (all && ok && g > 1) /* generation 1 has no generation before it */
			reb = g - 1;
		else
			all = false;
	}
	if (oldest)
		*oldest = old;
	if (rebuildable)
		*rebuildable = reb;
	shmcfg__clear_err();
	return cur;
}

static int cmp_undo(const void *a, const void *b)
{
	const struct change *x = a, *y = b;
	if (x->opt != y->opt)
		return x->opt < y->opt ? -1 : 1;
	return x->layer - y->layer;
}

void shmcfg__hist_undo_free(struct change *ch, size_t n)
{
	for (size_t k = 0; k < n; k++)
		shmcfg_value_clear(&ch[k].v);
	shmcfg__free(ch);
}

/*
 * The layer changes that take generation `from` back to `to` (< from): per
 * option and layer, the old value of the first commit after `to` that
 * changed it; their value bytes in *bytes. -ENOENT names the oldest
 * generation that can be rebuilt.
 */
int shmcfg__hist_undo(const shmcfg *h, uint64_t from, uint64_t to, struct change **ret, size_t *nret,
			uint64_t *bytes, uint64_t *cluster_rev)
{
	struct change *ch = NULL;
	size_t n = 0, cap = 0;
	int r = 0;
	uint64_t spent = 0;
	*bytes = 0;
	/* newest first: an older commit's old value replaces a newer one's */
	for (uint64_t g = from; g > to && !r; g--) {
		shmcfg_history_entry *e;
		if ((r = history_get(h, g, &e, &spent)))
			break;
		if (!e->values_kept || spent > HIST_WALK_BUDGET(h)) {
			shmcfg_history_free(e);
			r = -ENOENT;
			break;
		}
		for (uint32_t k = 0; k < e->nchanges && !r; k++) {
			shmcfg_layer_change *c = &e->changes[k];
			enum layer l = layer_of(c->layer);
			size_t j = 0;
			while (j < n && !(ch[j].opt == c->opt && ch[j].layer == l))
				j++;
			if (j == n) {
				if (n == cap) {
					size_t nc = cap ? cap * 2 : 16;
					struct change *m = shmcfg__realloc(ch, nc * sizeof *m);
					if (!m) {
						r = shmcfg__nomem();
						break;
					}
					ch = m;
					cap = nc;
				}
				ch[n++] = (struct change){.opt = c->opt, .layer = l, .v = {.is_null = true}};
			}
			shmcfg_value_clear(&ch[j].v);
			ch[j].reset = !c->old_set;
			ch[j].v = c->old_value; /* moved: the entry no longer owns it */
			if (!c->old_set)
				ch[j].v = (shmcfg_value){.type = opt_d(h, c->opt)->type, .is_null = true};
			c->old_value = (shmcfg_value){.type = SHMCFG_BOOL, .is_null = true};
		}
		shmcfg_history_free(e);
	}
	if (!r) {
		/* the cluster revision of `to` itself */
		shmcfg_history_entry *e;
		if (shmcfg_history_get(h, to, &e) == 0) {
			*cluster_rev = e->cluster_rev;
			shmcfg_history_free(e);
		}
	}
	if (r == -ENOENT) {
		uint64_t reb;
		if (!shmcfg_history_range(h, NULL, &reb))
			r = -ENOMEM; /* its detail stands */
		else
			r = shmcfg__err(-ENOENT, "%s: generation %llu is too old: the oldest the history can rebuild is %llu",
					h->name, (unsigned long long)to, (unsigned long long)reb);
	}
	if (r) {
		shmcfg__hist_undo_free(ch, n);
		return r;
	}
	if (n)
		qsort(ch, n, sizeof *ch, cmp_undo);
	for (size_t k = 0; k < n; k++)
		*bytes += CHUNK_HDR_BYTES + (NLAYERS + 1) * sizeof(struct shmcfg__cell) + 16 +
			  (ch[k].v.is_null ? 0
			   : ch[k].v.type == SHMCFG_STR ? ch[k].v.u.str.len
			   : ch[k].v.type >= SHMCFG_LIST ? ch[k].v.u.list.bytes : 0);
	*ret = ch;
	*nret = n;
	return 0;
}

