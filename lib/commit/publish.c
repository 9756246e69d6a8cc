/* SPDX-License-Identifier: MIT */
/*
 * Commits. A commit never modifies a published slot. Under the writer lock
 * (an OFD lock on the lock object) it picks a free slot (reclaim.c) and
 * marks it busy; brings it up to date with the current generation by
 * copying only the options that changed since the generation it holds (the
 * commit log lists them, in the ring); writes the transaction's layers as
 * new chunks (heap.c) and resolves the changed options and their dependents
 * (resolve.c), keeping the config hash and checksum sums term by term; then
 * stamps the slot with the new generation and publishes it with one store of
 * `current` (seqlock.h, (C) to (E)). So a commit costs what it changes, and
 * readers see whole generations. A writer that dies before that store has
 * published nothing; it leaves `wip` set, and the next writer rebuilds the
 * heap's counts (shmcfg__heap_sweep) and copies any half-written slot whole.
 */
#include "internal.h"
#include "slot.h"
#include "history.h"
#include "seqlock.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Whether the layers t writes are the cluster's (META_BY_CLUSTER). */
static bool by_cluster(const shmcfg_txn *t)
{
	return t->cluster_rev != 0 || t->cluster_keep;
}

/* Whether any change differs from what its layer holds in the current slot;
 * the layers it read last are b's seen ones (the build reads them again). */
static int txn_changes(struct build *b, const char *cur_sl, const struct change *ch, size_t n, uint64_t own,
		       struct shmcfg__cell lay[NLAYERS], bool *any)
{
	shmcfg *h = b->h;
	*any = false;
	for (size_t k = 0; k < n && !*any; k++) {
		uint32_t lref = slot_lrefs(h, cur_sl)[ch[k].opt];
		int r = shmcfg__chunk_read(seg_heap(h), h->lay.heap_size, lref, slot_cells(h, cur_sl) + ch[k].opt, lay);
		if (r)
			return r;
		b->seen = lay;
		b->seen_lref = lref;
		bool had = lay[ch[k].layer].meta & META_SET;
		shmcfg_value old;
		/* the same value written by the agent instead of a local tool (or
		 * back) changes who owns it (META_BY_CLUSTER) */
		*any = had != !ch[k].reset ||
		       (had && ((lay[ch[k].layer].meta & META_BY_CLUSTER) != own ||
				shmcfg__value_from_cell(&lay[ch[k].layer], seg_heap(h), h->lay.heap_size, &old) ||
				!shmcfg_value_equal(&old, &ch[k].v)));
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

static int cmp_id(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x > y) - (x < y);
}

/* Sorting is skipped when the order is already right: a transaction's
 * changes made in the schema's order (a loader's, a binding's sync), and
 * the ids of a commit that changed no dependent, are. */
static bool changes_sorted(const struct change *ch, size_t n)
{
	for (size_t k = 1; k < n; k++)
		if (cmp_change(&ch[k - 1], &ch[k]) > 0)
			return false;
	return true;
}

static bool ids_sorted(const uint32_t *ids, size_t n)
{
	for (size_t k = 1; k < n; k++)
		if (ids[k - 1] > ids[k])
			return false;
	return true;
}

/*
 * Sort n 64-bit keys: LSD radix, a byte at a time, skipping the bytes that
 * every key shares (an option id's high ones); tmp holds n keys. qsort's
 * comparison calls and element copies were 15% of a 100-change commit.
 */
static void radix_sort(uint64_t *keys, uint64_t *tmp, size_t n)
{
	uint64_t diff = 0;
	for (size_t i = 1; i < n; i++)
		diff |= keys[i] ^ keys[0];
	uint64_t *a = keys, *b = tmp;
	for (unsigned sh = 0; sh < 64; sh += 8) {
		if (!((diff >> sh) & 0xff))
			continue;
		size_t pos[256] = {0};
		for (size_t i = 0; i < n; i++)
			pos[(a[i] >> sh) & 0xff]++;
		for (size_t d = 0, sum = 0; d < 256; d++) {
			size_t c = pos[d];
			pos[d] = sum;
			sum += c;
		}
		for (size_t i = 0; i < n; i++)
			b[pos[(a[i] >> sh) & 0xff]++] = a[i];
		uint64_t *t = a;
		a = b, b = t;
	}
	if (a != keys)
		memcpy(keys, a, n * sizeof *keys);
}

#define SORT_SMALL 16 /* up to this many: by insertion */

/* Ids: a few (an option and its aliases or implied targets) by insertion,
 * qsort's ~180 instructions for two were 4% of a one-change commit; more
 * by radix (qsort if its keys cannot be allocated). */
static void sort_ids(uint32_t *ids, size_t n)
{
	uint64_t *keys = n > SORT_SMALL ? shmcfg__malloc(2 * n * sizeof *keys) : NULL;
	if (keys) {
		for (size_t k = 0; k < n; k++)
			keys[k] = ids[k];
		radix_sort(keys, keys + n, n);
		for (size_t k = 0; k < n; k++)
			ids[k] = (uint32_t)keys[k];
		shmcfg__free(keys);
	} else if (n > SORT_SMALL) {
		qsort(ids, n, sizeof *ids, cmp_id);
	}
	for (size_t k = 1; n <= SORT_SMALL && k < n; k++) {
		uint32_t v = ids[k];
		size_t j = k;
		for (; j > 0 && ids[j - 1] > v; j--)
			ids[j] = ids[j - 1];
		ids[j] = v;
	}
}

/* A transaction's changes in cmp_change's order (option, then layer), the
 * same way: by radix over keys that carry each change's index. */
#define SORT_IDX_BITS 28
static void sort_changes(struct change *ch, size_t n)
{
	uint64_t *keys = n > SORT_SMALL && n < (1u << SORT_IDX_BITS) ? shmcfg__malloc(2 * n * sizeof *keys) : NULL;
	struct change *out = keys ? shmcfg__malloc(n * sizeof *out) : NULL;
	if (out) {
		_Static_assert(NLAYERS <= 16, "a layer fits the key's 4 bits above the index");
		for (size_t k = 0; k < n; k++)
			keys[k] = (uint64_t)ch[k].opt << 32 | (uint64_t)ch[k].layer << SORT_IDX_BITS | k;
		radix_sort(keys, keys + n, n);
		for (size_t k = 0; k < n; k++)
			out[k] = ch[keys[k] & ((1u << SORT_IDX_BITS) - 1)];
		memcpy(ch, out, n * sizeof *ch);
	} else if (n > SORT_SMALL) {
		qsort(ch, n, sizeof *ch, cmp_change);
	}
	shmcfg__free(keys);
	shmcfg__free(out);
	for (size_t k = 1; n <= SORT_SMALL && k < n; k++) {
		struct change v = ch[k];
		size_t j = k;
		for (; j > 0 && cmp_change(&ch[j - 1], &v) > 0; j--)
			ch[j] = ch[j - 1];
		ch[j] = v;
	}
}

/*
 * The commit record of `gen`, and its changed ids in the ring. The ring's
 * head moves before the ids are written, so a writer that dies meanwhile
 * can only have overwritten ids that no published record still claims.
 */
static void write_log(shmcfg *h, uint64_t gen, uint64_t time_ns, uint32_t *ids, size_t n, const shmcfg_txn *origin)
{
	struct log_ent *e = log_at(h, gen);
	if (n > 1 && !ids_sorted(ids, n)) /* a commit of only an origin has no ids (and ids may be NULL) */
		sort_ids(ids, n);
	/* a seqlock as a slot's, but pinned by no reader: stamp 0, (C), fields, (D) */
	seq_entry_begin(&e->gen);
	e->time_ns = time_ns;
	e->pid = (int32_t)shmcfg__self_pid;
	e->uid = h->uid;
	e->nchanged = (uint32_t)n;
	e->cluster_rev = origin ? origin->cluster_rev : 0;
	static const char no_who[sizeof e->who];
	memcpy(e->who, origin ? origin->who : no_who, sizeof e->who); /* a constant size: no string op */
	e->nids = 0;
	for (size_t k = 0; k < n && e->nids < SHMCFG_LOG_IDS; k++)
		e->ids[e->nids++] = ids[k];
	e->ring_start = h->hdr->ring_head;
	if (n > h->lay.ring_size / 2) {
		e->ring_n = RING_OVERFLOW;
	} else {
		e->ring_n = (uint32_t)n;
		/* an atomic store (relaxed): shmcfg__prefetch_commit() reads the
		 * head without the lock, only for a hint */
		__atomic_store_n(&h->hdr->ring_head, e->ring_start + n, __ATOMIC_RELAXED);
		for (size_t k = 0; k < n; k++)
			*ring_at(h, e->ring_start + k) = ids[k];
	}
	seq_write_end(&e->gen, gen);
}

/*
 * Bring slot b (holding generation `base`, or nothing if 0) to the current
 * generation's content: the options the log says changed after `base`, or
 * every option when the log no longer tells (too old, too many changes, a
 * record that does not check out).
 */
static int sync_slot(struct build *b, struct slot_hdr *sl, const struct slot_hdr *cur_sl, uint64_t base,
		     uint64_t cur_g)
{
	shmcfg *h = b->h;
	uint32_t n = h->lay.nopts;
	bool whole = base == 0 || cur_g - base >= SEG_LOG_ENTRIES;
	uint64_t head = h->hdr->ring_head;
	for (uint64_t g = base + 1; !whole && g <= cur_g; g++) {
		const struct log_ent *e = log_at(h, g);
		whole = e->gen != g || e->ring_n == RING_OVERFLOW || e->ring_start > head ||
			e->ring_n > head - e->ring_start || head - e->ring_start > h->lay.ring_size;
		/* a record that names no option is not followed either */
		for (uint64_t p = e->ring_start; !whole && p < e->ring_start + e->ring_n; p++)
			whole = *ring_at(h, p) >= n;
	}
	int r = 0;
	if (whole) {
		for (uint32_t i = 0; !r && i < n; i++)
			r = shmcfg__copy_opt(b, i, cur_sl);
	} else {
		for (uint64_t g = base + 1; !r && g <= cur_g; g++) {
			const struct log_ent *e = log_at(h, g);
			for (uint64_t p = e->ring_start; !r && p < e->ring_start + e->ring_n; p++) {
				uint32_t i = *ring_at(h, p);
				r = i < n ? shmcfg__copy_opt(b, i, cur_sl)
					  : shmcfg__err(SHMCFG_E_CORRUPT, "%s: commit log names option %u", h->name, i);
			}
		}
	}
	if (r)
		return r;
	memcpy(sl->hash_sum, cur_sl->hash_sum, sizeof sl->hash_sum);
	sl->checksum = cur_sl->checksum;
	return 0;
}

/* Whether a segment of this mode has readers that cannot count themselves
 * as waiters (a class that may read but not write: segment.c,
 * waiters_setup): then every commit wakes. */
bool shmcfg__mode_wakes(unsigned m)
{
	return ((m & S_IRUSR) && !(m & S_IWUSR)) || ((m & S_IRGRP) && !(m & S_IWGRP)) ||
	       ((m & S_IROTH) && !(m & S_IWOTH));
}

/* Wake waiters, if any: pairs with shmcfg_wait (watch.c). */
static void wake(shmcfg *h)
{
	/* The mode decides whether readers may be unable to count themselves;
	 * it was read at attach, and a chmod since (0600 to 0640, say) lets in
	 * readers that no commit would wake: their waits would last a whole
	 * slice (100 ms) each. Read it again, at most once a second (the coarse
	 * clock: a few ns, where the fine one costs a tenth of a small commit). */
	uint64_t now = now_ns(CLOCK_MONOTONIC_COARSE);
	struct stat st;
	if (now - h->mode_ns >= 1000000000ull && fstat(h->fd, &st) == 0) {
		h->mode_ns = now;
		__atomic_store_n(&h->wake_always, shmcfg__mode_wakes(st.st_mode), __ATOMIC_RELAXED);
	}
	/* seq_cst: either we see the waiter counted, or the waiter's load of
	 * the word (after it counted itself) sees our bump */
	__atomic_fetch_add(&h->hdr->futex, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&h->hdr->waiters, __ATOMIC_SEQ_CST) || __atomic_load_n(&h->wake_always, __ATOMIC_RELAXED))
		syscall(SYS_futex, &h->hdr->futex, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* Room for the history's cells of t's changes (b->hist): the transaction's
 * own, or allocated for more (hist_free). */
static int hist_room(struct build *b, shmcfg_txn *t)
{
	b->hist = t->n <= TXN_INLINE ? t->small_hist : shmcfg__malloc(t->n * sizeof *b->hist);
	return b->hist ? 0 : shmcfg__nomem();
}

static void hist_free(struct build *b, shmcfg_txn *t)
{
	if (b->hist != t->small_hist)
		shmcfg__free(b->hist);
	b->hist = NULL;
}

/*
 * The first generation of a new segment, in slot 0: every option resolved;
 * the other slots are filled with it too, so that no commit copies a slot
 * whole. It is 1, or for the incarnation that replaces a segment one more
 * than that segment's last (replace.c: generations go on, so that no stamp
 * of one incarnation equals one of the other). The history records the
 * transaction's changes, or none (record false: a replacement that keeps
 * every layer changes nothing).
 */
int shmcfg__commit_first(shmcfg_txn *t, uint64_t gen, uint64_t cluster_rev, bool record)
{
	shmcfg *h = t->h;
	if (t->n > 1 && !changes_sorted(t->ch, t->n))
		sort_changes(t->ch, t->n);
	struct slot_hdr *sl = slot_at(h, 0);
	struct build b;
	shmcfg__build_init(&b, h, slot_cells(h, sl), slot_lrefs(h, sl), seg_heap(h), h->lay.heap_size);
	b.shared = true;
	int r = hist_room(&b, t);
	if (!r)
		r = shmcfg__apply_changes(&b, t->ch, t->n);
	if (!r)
		r = shmcfg__resolve_all(&b);
	if (!r)
		r = shmcfg__slot_sums(h, sl, seg_heap(h), h->lay.heap_size, sl->hash_sum, &sl->checksum);
	if (r)
		goto out;
	sl->base = gen;
	sl->cluster_rev = cluster_rev;
	uint64_t time_ns = now_ns(CLOCK_REALTIME);
	if ((r = shmcfg__hist_write(h, gen, time_ns, record ? t->ch : NULL, record ? t->n : 0, &b, cluster_rev, t)))
		goto out;
	write_log(h, gen, time_ns, b.changed.ids, record ? b.changed.n : 0, t);
	for (uint32_t s = 1; !r && s < h->lay.nslots; s++) {
		struct slot_hdr *o = slot_at(h, s);
		struct build c;
		shmcfg__build_init(&c, h, slot_cells(h, o), slot_lrefs(h, o), seg_heap(h), h->lay.heap_size);
		c.shared = true;
		r = sync_slot(&c, o, sl, 0, gen);
		o->base = gen; /* stamp 0: no reader takes it; a writer knows what it holds */
		shmcfg__build_free(&c);
	}
	if (!r) {
		seq_write_end(&sl->gen, gen); /* (D) */
		seq_publish_copy(h, gen, 0, NULL, 0, true); /* (E), and the whole accessors' copy */
	}
out:
	hist_free(&b, t);
	shmcfg__build_free(&b);
	return r;
}

/*
 * Undo a failed commit's changes to slot b: the options it touched are
 * copied back from the current slot, and the slot holds the current
 * generation's content again (unstamped: no reader takes it).
 */
static int undo(struct build *b, struct slot_hdr *sl, const struct slot_hdr *cur_sl, uint64_t cur_g)
{
	int r = 0;
	b->track = false;
	/* copying back adds no member to `changed` (shmcfg__copy_opt) */
	for (size_t k = 0; !r && k < b->changed.n; k++)
		r = shmcfg__copy_opt(b, b->changed.ids[k], cur_sl);
	shmcfg__ids_free(&b->changed);
	if (r)
		return r;
	memcpy(sl->hash_sum, cur_sl->hash_sum, sizeof sl->hash_sum);
	sl->checksum = cur_sl->checksum;
	sl->base = cur_g;
	seq_write_end(&sl->gen, 0);
	/* this slot is the next commit's best: let the scan find it */
	__atomic_store_n(&b->h->slot_hint, UINT32_MAX, __ATOMIC_RELAXED);
	return 0;
}

/* The transaction's changes into slot b (holding the current generation's
 * content), with the sums kept term by term. */
static int build_txn(struct build *b, shmcfg_txn *t, struct slot_hdr *sl)
{
	b->track = true;
	b->by_cluster = by_cluster(t);
	memcpy(b->hash_sum, sl->hash_sum, sizeof b->hash_sum);
	b->checksum = sl->checksum;
	shmcfg__ids_free(&b->seeds);
	shmcfg__ids_free(&b->queued); /* a second try starts afresh */
	b->nq = 0;
	int r = shmcfg__apply_changes(b, t->ch, t->n);
	return r ? r : shmcfg__resolve(b);
}

/*
 * Bring every other slot that no reader pins (but the current one and the
 * one being built) to the current generation's content, unstamped: their
 * older generations' chunks are freed. For a commit that found the heap
 * full; older generations are then no longer there to be compared.
 */
static void recycle(shmcfg *h, uint32_t cur_s, uint32_t s_new, const struct slot_hdr *cur_sl, uint64_t cur_g)
{
	/* the slots brought up to date are better than any hint */
	__atomic_store_n(&h->slot_hint, UINT32_MAX, __ATOMIC_RELAXED);
	for (uint32_t s = 0; s < h->lay.nslots; s++) {
		struct slot_hdr *sl = slot_at(h, s);
		uint64_t stamp = __atomic_load_n(&sl->gen, __ATOMIC_ACQUIRE);
		uint64_t base = shmcfg__slot_base(h, s, stamp, cur_g);
		if (s == cur_s || s == s_new || (stamp & SLOT_BUSY) || base == cur_g || !shmcfg__claim_slot(h, s, stamp, false))
			continue;
		struct build c;
		shmcfg__build_init(&c, h, slot_cells(h, sl), slot_lrefs(h, sl), seg_heap(h), h->lay.heap_size);
		c.shared = true;
		if (sync_slot(&c, sl, cur_sl, base, cur_g) == 0) {
			sl->base = cur_g;
			seq_write_end(&sl->gen, 0); /* holds no published generation of its own */
		} else {
			sl->base = 0; /* left busy: copied whole when next taken */
		}
		shmcfg__build_free(&c);
	}
}

/*
 * Under the writer lock, against the current slot: a cluster revision older
 * than the segment's is refused (-ESTALE), unless the apply rebases; a
 * revision kept is the segment's now; and a knob reset planned because the
 * cluster had written the value goes if a local writer set it since (the
 * plan's snapshot was released before the lock was taken).
 */
static int cluster_checks(shmcfg *h, shmcfg_txn *t, const char *cur_sl)
{
	uint64_t have = ((const struct slot_hdr *)cur_sl)->cluster_rev;
	if (t->cluster_keep)
		t->cluster_rev = have;
	if (t->cluster_no_older && t->cluster_rev < have)
		return shmcfg__err(-ESTALE,
				   "%s: cluster revision %llu is older than the revision %llu the segment "
				   "has: not applied",
				   h->name, (unsigned long long)t->cluster_rev, (unsigned long long)have);
	size_t n = 0;
	for (size_t k = 0; k < t->n; k++) {
		struct change *c = &t->ch[k];
		if (c->if_cluster) {
			struct shmcfg__cell lay[NLAYERS];
			int r = shmcfg__chunk_read(seg_heap(h), h->lay.heap_size, slot_lrefs(h, cur_sl)[c->opt],
						   slot_cells(h, cur_sl) + c->opt, lay);
			if (r)
				return r;
			uint64_t m = lay[c->layer].meta;
			/* not the cluster's (now): it stays */
			if (!(m & META_SET) || !(m & META_BY_CLUSTER)) {
				shmcfg_value_clear(&c->v);
				continue;
			}
		}
		/* copied only to close a gap: a copy of each change onto itself,
		 * in 16-byte loads of what the transaction's sets had just
		 * written in smaller stores, waited on store forwarding */
		if (n != k)
			t->ch[n] = *c;
		n++;
	}
	t->n = n;
	return 0;
}

/*
 * The commit proper. SHMCFG_E_RETIRED (no detail): the segment was replaced
 * (replace.c) while we waited for its lock; the caller follows it.
 */
int shmcfg__commit(shmcfg_txn *t, uint64_t *gen_ret, bool *published)
{
	shmcfg *h = t->h;
	int r;
	if (!t->commit_asked)
		shmcfg__prefetch_commit(h);
	if (t->n > 1 && !changes_sorted(t->ch, t->n))
		sort_changes(t->ch, t->n);
	struct build b;
	shmcfg__build_init(&b, h, NULL, NULL, seg_heap(h), h->lay.heap_size);
	b.shared = true;
	if ((r = hist_room(&b, t)))
		return r;
	if ((r = shmcfg__lock_writer(h))) { /* SHMCFG_E_FORKED in a forked child */
		hist_free(&b, t);
		return r;
	}
	shmcfg__fault("commit.locked");
	struct seg_header *hd = h->hdr;
	/* acquire: pairs with the release store in shmcfg__retire_replaced();
	 * a replaced segment is frozen (its readers rely on it) */
	if (__atomic_load_n(&hd->retired, __ATOMIC_ACQUIRE) == RETIRED_REPLACED) {
		if (!shmcfg__at_name(h)) {
			r = SHMCFG_E_RETIRED;
			goto out;
		}
		/* ours, and still at its name: its replacer died before its
		 * rename (a live one holds this lock past it) */
		shmcfg__thaw(h);
	}
	uint64_t cur = __atomic_load_n(&hd->current, __ATOMIC_ACQUIRE);
	uint32_t cur_s = cur_slot(cur), s = 0;
	uint64_t cur_g = cur_gen(cur), gen = cur_g + 1, old_stamp = 0;
	/* under the lock the current slot cannot change; check it anyway */
	if (cur_s >= h->lay.nslots || __atomic_load_n(&slot_at(h, cur_s)->gen, __ATOMIC_ACQUIRE) != cur_g) {
		r = shmcfg__err(SHMCFG_E_CORRUPT, "%s: current slot %u does not hold generation %llu", h->name,
				cur_s, (unsigned long long)cur_g);
		goto out;
	}
	const struct slot_hdr *cur_sl = slot_at(h, cur_s);
	/* a writer died mid-commit: its counts and free lists are suspect */
	if (hd->wip && (r = shmcfg__heap_sweep(h, cur)))
		goto out;
	__atomic_store_n(&hd->wip, 0, __ATOMIC_RELAXED);
	/* the cluster apply's checks (cluster_apply.c), here because only under
	 * the lock does the segment hold still: what a plan read before may
	 * have moved since */
	if ((r = cluster_checks(h, t, (const char *)cur_sl)))
		goto out;
	/* a transaction that changes no layer publishes nothing, and must not
	 * take (or wait for) a slot to find that out; one that brings a new
	 * cluster revision publishes it even so (an agent's waiters see it) */
	bool any;
	uint64_t own = by_cluster(t) ? META_BY_CLUSTER : 0;
	struct shmcfg__cell seen[NLAYERS];
	if ((r = txn_changes(&b, (const char *)cur_sl, t->ch, t->n, own, seen, &any)))
		goto out;
	uint64_t cluster_rev = t->cluster_rev ? t->cluster_rev : cur_sl->cluster_rev;
	if (!any && cluster_rev == cur_sl->cluster_rev) {
		r = 0;
		if (published)
			*published = false;
		if (gen_ret)
			*gen_ret = cur_g;
		goto out;
	}
	__atomic_store_n(&hd->wip, gen, __ATOMIC_RELAXED);
	if ((r = shmcfg__choose_slot(h, cur_s, cur_g, &s, &old_stamp))) {
		__atomic_store_n(&hd->wip, 0, __ATOMIC_RELAXED); /* nothing was touched */
		goto out;
	}
	shmcfg__fault("commit.slot");
	struct slot_hdr *sl = slot_at(h, s);
	b.cells = slot_cells(h, sl);
	b.lrefs = slot_lrefs(h, sl);
	/* the busy mark of choose_slot() came with (C): every store below is
	 * ordered after it for a reader's (B) */
	uint64_t base = shmcfg__slot_base(h, s, old_stamp, cur_g);
	if ((r = sync_slot(&b, sl, cur_sl, base, cur_g)))
		goto out;
	shmcfg__fault("commit.synced");
	r = build_txn(&b, t, sl);
	if (r == SHMCFG_E_FULL) {
		/* the heap may be full of older generations' layers: bring the
		 * other free slots up to date, which frees them, and try again */
		if ((r = undo(&b, sl, cur_sl, cur_g)))
			goto out;
		recycle(h, cur_s, s, cur_sl, cur_g);
		shmcfg__claim_slot(h, s, 0, false); /* busy again: nobody pins generation 0 */
		r = build_txn(&b, t, sl);
	}
	/* the history's record, before the slot: it fails only for memory,
	 * and then the commit fails whole; it and the log have one time */
	uint64_t time_ns = now_ns(CLOCK_REALTIME);
	if (!r)
		r = shmcfg__hist_write(h, gen, time_ns, t->ch, t->n, &b, cluster_rev, t);
	if (r) {
		if (undo(&b, sl, cur_sl, cur_g) == 0)
			__atomic_store_n(&hd->wip, 0, __ATOMIC_RELAXED); /* else the next writer sweeps */
		goto out;
	}
	memcpy(sl->hash_sum, b.hash_sum, sizeof sl->hash_sum);
	sl->checksum = b.checksum;
	sl->cluster_rev = cluster_rev;
	shmcfg__fault("commit.written");
	write_log(h, gen, time_ns, b.changed.ids, b.changed.n, t);
	sl->base = gen;
	/* pairs with the readers' stamp check: everything above is visible to a
	 * reader that sees this stamp */
	seq_write_end(&sl->gen, gen); /* (D) */
	shmcfg__fault("commit.stamped");
	/* the publication: pairs with the acquire load of `current` in every
	 * read (seqlock.h: why release is enough for shmcfg_wait() too), inside
	 * the accessors' copy's write */
	seq_publish_copy(h, gen, s, b.changed.ids, b.changed.n, false); /* (E) */
	__atomic_store_n(&hd->wip, 0, __ATOMIC_RELAXED);
	/* holds gen - 1: the next commit's slot (choose_slot); atomic for
	 * txn.c's prefetch_change(), which reads it without commit_lock */
	__atomic_store_n(&h->slot_hint, cur_s, __ATOMIC_RELAXED);
	wake(h);
	if (gen_ret)
		*gen_ret = gen;
	if (published)
		*published = true;
	r = 0;
out:
	shmcfg__unlock_writer(h);
	hist_free(&b, t);
	shmcfg__build_free(&b);
	return r;
}
