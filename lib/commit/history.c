/* SPDX-License-Identifier: MIT */
/* The history (doc/design.md, "The history"): every commit of the last N,
 * with who made it and each layer it changed, old and new value, and the
 * changes that undo the commits after a generation (history_at.c rebuilds
 * its values and rolls back). Records are written by history_write.c.
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

static void ring_read(const shmcfg *h, uint64_t pos, char *dst, uint64_t len)
{
	const char *ring = h->base + h->lay.hist_ring_off;
	uint64_t size = h->lay.hist_ring_size, at = pos % size, first = len < size - at ? len : size - at;
	memcpy(dst, ring + at, first);
	memcpy(dst + first, ring, len - first);
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

