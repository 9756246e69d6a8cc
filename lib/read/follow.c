/* SPDX-License-Identifier: MIT */
/*
 * Following a segment that was replaced (lib/segment/replace.c says how a
 * replacement is made and why readers may mix its incarnations safely).
 *
 * At its next call, a handle whose segment is RETIRED_REPLACED attaches the
 * segment now of its name, with the same schema hash, and keeps it as its
 * successor: h->next, set once (release) and read with acquire; the old
 * mapping stays until shmcfg_close(), as other threads may still be inside
 * it. Every entry point works on the live handle (SHMCFG_FOLLOW). The
 * user's handle's view, what the inline getters read, is then pointed at
 * the successor's, pointer by pointer (relaxed: any mix of the two fails
 * the stamp check).
 *
 * A successor of another schema (of the same lineage: a create --force) is
 * followed too, unless the handle was attached for one schema hash
 * (shmcfg_attach_opts.expect_schema_hash, a generated header's attach): the
 * program's option handles are indices into its own schema, which the
 * handle keeps, so each successor of another schema than the program's
 * handle (its root) has root_map: each of the root's options to its option
 * of that name, where the type is the same and null is no new value (NO_OPT
 * elsewhere); every entry point that takes an option maps it
 * (SHMCFG_FOLLOW_OPT), and an option the successor lacks fails with
 * SHMCFG_E_SCHEMA naming it, never with the frozen value. The inline view
 * then names the successor's current word but slots of its own whose stamp
 * no generation has: every inline read takes the slow path, which maps.
 */
#include "internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define FOLLOW_RETRY_NS (5 * 1000000ull) /* a failed follow is tried again after 5 ms */

/* n's option for h's option o by its name, or NO_OPT: an option maps to the
 * end of n's alias chain (n renamed it: the old name an alias), an alias of
 * h to n's option of its name, else where its own target maps. */
static shmcfg_opt map_one(const shmcfg *h, const shmcfg *n, shmcfg_opt o, const uint32_t *m)
{
	shmcfg_opt j;
	const struct opt_desc *a = opt_d(h, o);
	if (shmcfg__lookup(n, sstr(h, a->name), &j))
		return a->alias != SHMCFG_NO_OPT ? m[a->alias_final] : SHMCFG_NO_OPT;
	if (a->alias == SHMCFG_NO_OPT)
		j = opt_d(n, j)->alias_final;
	const struct opt_desc *b = opt_d(n, j);
	bool same = a->type == b->type && (!(b->flags & SHMCFG_F_NULLABLE) || (a->flags & SHMCFG_F_NULLABLE));
	return same ? j : SHMCFG_NO_OPT;
}

uint32_t *shmcfg__opt_map(const shmcfg *h, const shmcfg *n)
{
	uint32_t *m = shmcfg__malloc((h->lay.nopts + 1) * sizeof *m);
	/* the options, then the aliases (which may fall back on their targets') */
	for (int aliases = 0; m && aliases < 2; aliases++)
		for (uint32_t o = 0; o < h->lay.nopts; o++) {
			if (shmcfg__opt_use(h, o)) {
				m[o] = SHMCFG_NO_OPT;
				continue;
			}
			if ((opt_d(h, o)->alias != SHMCFG_NO_OPT) == aliases)
				m[o] = map_one(h, n, o, m);
		}
	shmcfg__clear_err();
	return m;
}

/* Attach the segment now of h's name as h's successor (one thread at a
 * time; a failure is tried again FOLLOW_RETRY_NS later). The attach is
 * segment.c's (h->attach_next): below it in the library's layers, this
 * file reaches it through the handle. */
static shmcfg *follow(shmcfg *h)
{
	uint64_t now = now_ns(CLOCK_MONOTONIC);
	if (now < __atomic_load_n(&h->follow_after_ns, __ATOMIC_RELAXED))
		return NULL;
	pthread_mutex_lock(&h->view_lock);
	shmcfg *n = h->next;
	if (!n && now >= h->follow_after_ns) {
		int r = h->attach_next(h, &n); /* sets n->root, and n->root_map for another schema */
		if (!r) {
			n->commit_timeout_ms = h->commit_timeout_ms;
			n->no_growth = h->no_growth;
			__atomic_store_n(&h->follow_err, 0, __ATOMIC_RELAXED);
			/* release: pairs with the acquire load in shmcfg__live_slow:
			 * who sees the successor sees it whole */
			__atomic_store_n(&h->next, n, __ATOMIC_RELEASE);
		} else {
			__atomic_store_n(&h->follow_after_ns, now + FOLLOW_RETRY_NS, __ATOMIC_RELAXED);
			/* the name once, in shmcfg__stale(): a name may be 200 bytes */
			const char *why = shmcfg_errdetail();
			size_t nl = strlen(h->name);
			if (strncmp(why, h->name, nl) == 0 && strncmp(why + nl, ": ", 2) == 0)
				why += nl + 2;
			snprintf(h->follow_detail, sizeof h->follow_detail, "%s", why);
			__atomic_store_n(&h->follow_err, r, __ATOMIC_RELAXED);
			shmcfg__clear_err(); /* said by shmcfg__stale(), for the reads that must fail */
			n = NULL;
		}
	}
	pthread_mutex_unlock(&h->view_lock);
	return n;
}

/* A zeroed slot of h's size whose stamp no generation has (under view_lock). */
static char *poison_slot(shmcfg *h)
{
	if (!h->poison_slot && (h->poison_slot = shmcfg__calloc(1, h->lay.slot_size)))
		*(uint64_t *)h->poison_slot = UINT64_MAX;
	return h->poison_slot;
}

/*
 * Map the segment behind @p fd, of @p nopts options, at the handle's copy
 * (under MAP_FIXED: the pages there are replaced whole, a reader's load
 * sees the old page or the new one), into the room the handle was made
 * with: at attach, a reservation; at a follow (view_switch), the replaced
 * incarnation's pages. Never past or short of that room.
 */
int shmcfg__copy_map(shmcfg *h, int fd, uint32_t nopts)
{
	size_t len = copy_map_bytes(nopts);
	if (len != h->map_bytes - HANDLE_BYTES)
		return -EINVAL;
	/* mapped now (page tables only) when small, or asked for */
	bool eager = len <= SEG_EAGER_BYTES || (h->opts.flags & SHMCFG_ATTACH_PREFAULT);
	if (shmcfg__mmap((char *)h + HANDLE_BYTES, len, PROT_READ, MAP_SHARED | MAP_FIXED | (eager ? MAP_POPULATE : 0),
			 fd, 0) == MAP_FAILED)
		return -errno;
	return 0;
}

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22 /* Linux 5.14 */
#endif

/*
 * SHMCFG_ATTACH_PREFAULT (or a writer's attach with the schema's validated
 * copy: segment.c) on a segment mapped lazily: its pages mapped now,
 * up to the end of the heap's carved chunks (heap_top: the heap is the last
 * region, and its room never carved is only address space until a commit
 * carves it; a writer's heap_top past the heap counts as the heap's end).
 * MADV_POPULATE_READ maps the object's pages, writable where the mapping is
 * (a shared mapping's read fault maps them so), and warm_walks() walks them
 * once (handle.h), or the madvise fails with EFAULT on an
 * object a writer shrank since attach checked its size: then nothing more
 * is done, and the reads fail as any read of such an object may. Before
 * Linux 5.14 (EINVAL), a load of a byte of each page does it (raising
 * SIGBUS on such an object, as a read would).
 */
void shmcfg__map_populate(shmcfg *h)
{
	uint64_t top = __atomic_load_n(&h->hdr->heap_top, __ATOMIC_RELAXED);
	uint64_t end = h->lay.heap_off + (top < h->lay.heap_size ? top : h->lay.heap_size);
	size_t ps = (size_t)sysconf(_SC_PAGESIZE);
	size_t len = (size_t)(end < h->size ? end : h->size);
	len = (len + ps - 1) / ps * ps;
	if (len > h->size)
		len = h->size;
	/* but the schema region's whole pages: it is read through the private
	 * or validated copy (validate.c, vcopy.c), never here */
	size_t s0 = (size_t)(h->lay.schema_off + ps - 1) / ps * ps,
	       s1 = (size_t)(h->lay.schema_off + h->lay.schema_size) / ps * ps;
	if (s1 > len)
		s1 = len;
	if (s0 > s1)
		s0 = s1;
	const size_t part[2][2] = {{0, s0}, {s1, len}};
	for (int k = 0; k < 2; k++) {
		size_t a = part[k][0], b = part[k][1];
		if (a >= b)
			continue;
		if (shmcfg__madvise(h->base + a, b - a, MADV_POPULATE_READ) == 0) {
			warm_walks(h->base + a, b - a);
			continue;
		}
		if (errno != EINVAL)
			return;
		for (size_t o = a; o < b; o += ps)
			(void)*(volatile const char *)(h->base + o);
	}
}

/* The live incarnation's accessors' copy over the replaced one's at the
 * handle. One whose options are not the handle's is not mapped: the frozen
 * copy stays, odd, and the accessors read the slots (attach_next already
 * refuses a successor whose header claims the schema's hash for other
 * options, a writer's forgery: this keeps the mapping within the handle's
 * room whatever the caller). A failed mmap may have taken the old pages with it: the first
 * incarnation's, frozen odd too, are mapped there again (the same file's
 * pages in the same place need no new memory: the last resort is not
 * expected to fail, and is said if it does). */
static void copy_follow(shmcfg *h, const shmcfg *live)
{
	int r = live->lay.nopts == h->lay.nopts ? shmcfg__copy_map(h, live->fd, live->lay.nopts) : -EINVAL;
	if (!r)
		return;
	shmcfg__log(SHMCFG_LOG_WARNING, "%s: the successor's accessors' copy is not mapped (%s): accessors read the slots",
		    h->name, r == -EINVAL ? "its options are not the handle's" : strerror(-r));
	if (r != -EINVAL && (r = shmcfg__copy_map(h, h->fd, h->lay.nopts)))
		shmcfg__log(SHMCFG_LOG_ERROR, "%s: the frozen accessors' copy could not be mapped again: %s", h->name,
			    strerror(-r));
}

/* Point the user's handle's view (the inline getters') at the live one's:
 * its slots and its accessors' copy (copy_follow), or, where the chain
 * maps options (mapped), slots that send every inline read to the slow
 * path, and the copy left as it was: the replaced incarnation's, which its
 * replacer's freeze made odd (the accessors then read the slots). */
static void view_switch(shmcfg *h, const shmcfg *live, bool mapped)
{
	if (__atomic_load_n(&h->view.current, __ATOMIC_RELAXED) == live->view.current)
		return;
	pthread_mutex_lock(&h->view_lock);
	char *poison = mapped ? poison_slot(h) : NULL;
	if (!mapped || poison) { /* else its reads still map, by their slow path */
		for (unsigned s = 0; s < 256; s++)
			__atomic_store_n(&h->view.slot[s], mapped ? poison : live->view.slot[s], __ATOMIC_RELAXED);
		if (!mapped)
			copy_follow(h, live);
		__atomic_store_n(&h->view.current, live->view.current, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&h->view_lock);
}

/*
 * A successor that cannot be followed (another schema, no access): the
 * user's handle's view names generation 0 and, for every slot index, a
 * zeroed slot of its own whose stamp no generation has. Its inline reads
 * then fail their stamp check and take the slow path, which says why, and
 * shmcfg_generation() says 0, so that nothing cached by generation (the
 * Python binding's reads) outlives the replacement. The accessors' copy
 * stays the replaced incarnation's, odd since its freeze: the accessors
 * read the slots too. A later follow points the view at the successor as
 * usual.
 */
static void view_poison(shmcfg *h)
{
	if (__atomic_load_n(&h->view.current, __ATOMIC_RELAXED) == &h->poison_cur)
		return;
	pthread_mutex_lock(&h->view_lock);
	if (poison_slot(h)) { /* else its reads still fail, by their slow path */
		for (unsigned s = 0; s < 256; s++)
			__atomic_store_n(&h->view.slot[s], h->poison_slot, __ATOMIC_RELAXED);
		__atomic_store_n(&h->view.current, &h->poison_cur, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&h->view_lock);
}

/* Whether a follow failed for good (not: the successor not in place yet,
 * or the name removed since, when the frozen values are the last). */
static bool follow_failed(int e)
{
	/* out of descriptors or memory: no verdict on the successor */
	return e != 0 && e != -EAGAIN && e != -ENOENT && e != -EMFILE && e != -ENFILE && e != -ENOMEM;
}

shmcfg *shmcfg__live_slow(const shmcfg *h0)
{
	shmcfg *h = (shmcfg *)h0;
	for (;;) {
		shmcfg *n = __atomic_load_n(&h->next, __ATOMIC_ACQUIRE);
		if (!n && (__atomic_load_n(&h->hdr->retired, __ATOMIC_ACQUIRE) != RETIRED_REPLACED || !(n = follow(h))))
			break;
		h = n;
	}
	if (follow_failed(__atomic_load_n(&h->follow_err, __ATOMIC_RELAXED)))
		view_poison((shmcfg *)h0);
	else if (h != h0)
		view_switch((shmcfg *)h0, h, h->root_map != NULL);
	return h;
}

/* A successor's root_map is written before the handle is stored as its
 * predecessor's next with release (follow()); the caller found `to` through
 * next loaded with acquire: the map read is whole. It maps the program's
 * schema to the live one's directly, whatever schemas came between. */
int shmcfg__map_opt(const shmcfg *from, const shmcfg *to, shmcfg_opt *opt)
{
	int r = shmcfg__opt_use(from, *opt); /* in range of the handle the program holds */
	if (r || from == to || !to->root_map)
		return r;
	shmcfg_opt m = to->root_map[*opt];
	if (m == SHMCFG_NO_OPT)
		return shmcfg__err(SHMCFG_E_SCHEMA,
				   "%s: the segment was replaced by one of another schema, without option %s (of its "
				   "type): attach again (shmcfg_reattach)",
				   from->name, sstr(from, opt_d(from, *opt)->name));
	*opt = m;
	return 0;
}

bool shmcfg__unmap_opt(const shmcfg *h0, const shmcfg *live, shmcfg_opt *opt)
{
	shmcfg_opt i = SHMCFG_NO_OPT;
	if (!live->root_map)
		return true;
	/* by its name first, else whichever of h0's options maps to it (a rename) */
	if (!shmcfg__opt_use(live, *opt) && !shmcfg__lookup(h0, sstr(live, opt_d(live, *opt)->name), &i) &&
	    live->root_map[i] != *opt)
		i = SHMCFG_NO_OPT;
	for (shmcfg_opt k = 0; i == SHMCFG_NO_OPT && k < h0->lay.nopts; k++)
		if (live->root_map[k] == *opt && opt_d(h0, k)->alias == SHMCFG_NO_OPT)
			i = k;
	shmcfg__clear_err();
	*opt = i;
	return i != SHMCFG_NO_OPT;
}

void shmcfg__unmap_changes(const shmcfg *h0, const shmcfg *live, shmcfg_history_entry *e)
{
	uint32_t kept = 0;
	for (uint32_t k = 0; k < e->nchanges; k++) {
		shmcfg_layer_change *c = &e->changes[k];
		if (shmcfg__unmap_opt(h0, live, &c->opt)) {
			e->changes[kept++] = *c;
			continue;
		}
		shmcfg_value_clear(&c->old_value);
		shmcfg_value_clear(&c->new_value);
	}
	e->nchanges = kept;
}

int shmcfg__stale(const shmcfg *h)
{
	int e = __atomic_load_n(&h->follow_err, __ATOMIC_RELAXED);
	if (!follow_failed(e))
		return 0;
	if (e == SHMCFG_E_SCHEMA)
		return shmcfg__err(e, "%s: the segment was replaced by one of another schema: attach again (shmcfg_reattach)",
				   h->name);
	/* the error and the attach's own detail (why the successor was refused)
	 * of one failure: both read under the lock a retry writes them under */
	char more[sizeof h->follow_detail];
	pthread_mutex_lock(&((shmcfg *)h)->view_lock);
	e = __atomic_load_n(&h->follow_err, __ATOMIC_RELAXED);
	memcpy(more, h->follow_detail, sizeof more);
	pthread_mutex_unlock(&((shmcfg *)h)->view_lock);
	if (!follow_failed(e))
		return 0;
	if (!*more || strcmp(more, shmcfg_strerror(e)) == 0) /* said once, and only if it says more */
		return shmcfg__err(e, "%s: the segment was replaced, and its successor cannot be attached: %s", h->name,
				   shmcfg_strerror(e));
	return shmcfg__err(e, "%s: the segment was replaced, and its successor cannot be attached: %s (%s)", h->name,
			   shmcfg_strerror(e), more);
}

int shmcfg__follow_txn(shmcfg_txn *t)
{
	/* between the freeze and the rename (replace.c) the successor is not in
	 * place yet: wait for it, within the commit's bound */
	uint64_t deadline = commit_deadline(t->h, now_ns(CLOCK_MONOTONIC));
	for (;;) {
		shmcfg *n = shmcfg__live(t->h);
		if (n != t->h) {
			/* its changes name options of its schema: not another's */
			if (memcmp(n->lay.schema_hash, t->h->lay.schema_hash, 16))
				return shmcfg__err(SHMCFG_E_SCHEMA,
						   "%s: the segment was replaced by one of another schema during the "
						   "transaction: begin it again",
						   t->h->name);
			t->h = n; /* the same schema: its option handles and values hold */
			shmcfg__clear_err();
			return 0;
		}
		if (__atomic_load_n(&n->follow_err, __ATOMIC_RELAXED) != -EAGAIN ||
		    now_ns(CLOCK_MONOTONIC) >= deadline) {
			(void)shmcfg__stale(n);
			return SHMCFG_E_RETIRED;
		}
		usleep(2000);
	}
}

bool shmcfg__at_name(const shmcfg *h)
{
	char path[PATH_BYTES];
	struct stat a, b;
	snprintf(path, sizeof path, SHM_DIR SEG_PREFIX "%s", h->name); /* checked at attach */
	return stat(path, &a) == 0 && fstat(h->fd, &b) == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev;
}
