/* SPDX-License-Identifier: MIT */
/* A commit's record in the history (doc/design.md, "The history"): who
 * made it and each layer it changed, old and new value, written into the
 * history's byte ring and its index entry under the writer lock. The
 * record's format and the memory ordering that readers rely on (hist-C,
 * hist-H1, hist-D) are described at the top of history.c, which reads them.
 */
#include "internal.h"
#include "slot.h"
#include "history.h"
#include "seqlock.h"

#include <string.h>

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
		return shmcfg__scalar_bits_equal(META_TYPE(a->meta), a->val, b->val);
	shmcfg_value x, y;
	return shmcfg__value_from_cell(a, ha, sa, &x) == 0 && shmcfg__value_from_cell(b, hb, sb, &y) == 0 &&
	       shmcfg_value_equal(&x, &y);
}

/* The bytes of a change of plain values at most: id, layer, type, and two
 * values of a tag and 8 bytes */
enum { PLAIN_MAX = 4 + 1 + 1 + 9 + 9 };

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

/*
 * The history entry of `gen`, under the writer lock before `gen` is
 * published. A writer that dies in here leaves the entry's stamp 0 (readers
 * skip it) and the generation unpublished: the next writer commits `gen`
 * again and rewrites the entry.
 */
int shmcfg__hist_write(shmcfg *h, uint64_t gen, uint64_t time_ns, const struct change *ch, size_t n,
		       const struct build *b, uint64_t cluster_rev, const shmcfg_txn *origin)
{
	shmcfg__handle_identity(h); /* the handle's process commits (a forked child cannot) */
	const char *who = origin ? origin->who : "";
	struct wbuf w = {.h = h, .buf = h->hist_buf, .cap = h->hist_cap};
	size_t wlen = strnlen(who, SHMCFG_WHO_MAX - 1);
	/* room for the record's plain changes at once: one allocation (of the
	 * handle's buffer, kept), not one doubling after another, each of
	 * which a failure of the next would leave grown. Counted over the
	 * changes whose cells differ (those put_changes may record): a
	 * rollback or a load queues every option and changes few */
	size_t plain = 2 + h->self_user_len + wlen;
	for (size_t k = 0; k < n; k++)
		if (b->hist[k][0].val != b->hist[k][1].val || b->hist[k][0].meta != b->hist[k][1].meta)
			plain += PLAIN_MAX;
	if (plain > w.cap && !grow(&w, plain))
		return w.err;
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
