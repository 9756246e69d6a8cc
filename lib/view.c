/*
 * Reads beyond the inline getters: the slow path, copying reads, the config
 * hash, and snapshots.
 *
 * Snapshots of a read-write handle are the process's pinned view of one
 * generation. Inside the process the view is an RCU-protected pointer
 * (liburcu's bulletproof flavour, which needs no thread registration from the
 * application); a replaced view is unpinned only after a grace period, so no
 * thread can still be reading its slot. Across processes the generation is
 * pinned in our reader-table entry, so that no writer reuses its slot (the
 * protocol is below, at pin_current()).
 *
 * Grace periods are waited for by a reclaimer thread of our own rather than
 * liburcu's call_rcu: call_rcu's worker does not survive fork(), and its
 * fork hooks are documented to hang with callbacks that call free(). Ours is
 * keyed by pid: a child simply starts its own when it needs one.
 */
#include "internal.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <urcu-bp.h>

/*
 * ThreadSanitizer does not see urcu's grace periods (they are made of
 * membarrier and polling). Model them: every read-side section ends with a
 * release on rcu_tsan, every grace period ends with an acquire on it, so
 * TSan sees that the reclaimer's free() follows the readers' last uses.
 */
#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
static char rcu_tsan;
#define read_unlock()                    \
	do {                             \
		__tsan_release(&rcu_tsan); \
		urcu_bp_read_unlock();   \
	} while (0)
#define grace_period()                   \
	do {                             \
		urcu_bp_synchronize_rcu(); \
		__tsan_acquire(&rcu_tsan); \
	} while (0)
#else
#define read_unlock() urcu_bp_read_unlock()
#define grace_period() urcu_bp_synchronize_rcu()
#endif

__thread int shmcfg__tls_patched __attribute__((tls_model("initial-exec")));

struct pview {
	struct shmcfg_snapshot snap; /* first: a pview is handed out as the snapshot */
	struct pview *next;          /* in the reclaimer's queue */
};

/* The reclaimer: retired views wait here for a grace period. */
static pthread_mutex_t rq_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t rq_cond = PTHREAD_COND_INITIALIZER; /* queue grew */
static pthread_cond_t rq_done = PTHREAD_COND_INITIALIZER; /* a batch was reclaimed */
static struct pview *rq_head;
static pid_t rq_pid;          /* process whose thread serves the queue */
static pthread_t rq_thread;
static unsigned rq_users;     /* handles that retired a view: the thread ends with the last */
static bool rq_stop;
pid_t shmcfg__self_pid;       /* this process: set at load and in the fork child */
#define self_pid shmcfg__self_pid

#define SLOW_TRIES 10000

static uint64_t now_mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
#define CLAIM_RETRY_NS 1000000000ull /* a full reader table is tried again after 1 s */

/*
 * A validated read of the slot named by `cur` failed its stamp check: retry
 * (0) or give up (SHMCFG_E_CORRUPT). A writer never rewrites the current
 * slot, so a failure is legitimate only if `current` moved meanwhile. The
 * acquire fence after the failed stamp load pairs with the release (or
 * seq_cst) store of whatever stamp we saw: a writer published its new
 * `current` before it marked our slot busy, so we then see `current` moved.
 * If it did not, the slot never held the generation `current` names: a
 * hostile or corrupt segment, reported at once instead of after
 * SLOW_TRIES yields.
 */
int shmcfg__seq_retry(const shmcfg *h, uint64_t cur, int *tries)
{
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	if (__atomic_load_n(&h->hdr->current, __ATOMIC_ACQUIRE) == cur)
		return shmcfg__err(SHMCFG_E_CORRUPT, "%s: slot %u does not hold generation %llu that `current` names",
				   h->name, cur_slot(cur), (unsigned long long)cur_gen(cur));
	if (++*tries >= SLOW_TRIES)
		return shmcfg__err(SHMCFG_E_CORRUPT, "%s: no stable generation after %d tries", h->name,
				   SLOW_TRIES);
	if (*tries > 3)
		sched_yield();
	return 0;
}

/*
 * Copy the slot named by `cur` (cells, layers, used heap) to dst and check
 * that it held that generation throughout (the seqlock of shmcfg.h's inline
 * read, done over a range). False if the slot was rewritten meanwhile.
 */
bool shmcfg__seq_copy(const shmcfg *h, uint64_t cur, void *dst)
{
	uint32_t s = cur_slot(cur);
	if (s >= h->lay.nslots)
		return false;
	const struct slot_hdr *sl = slot_at(h, s);
	if (__atomic_load_n(&sl->gen, __ATOMIC_ACQUIRE) != cur_gen(cur))
		return false;
	uint64_t used = __atomic_load_n(&sl->heap_used, __ATOMIC_RELAXED);
	if (used > h->lay.heap_size)
		used = h->lay.heap_size;
	memcpy(dst, sl, h->lay.heap_off + used);
	((struct slot_hdr *)dst)->heap_used = used;
	/* pairs with the writer's release fence after it zeroes the stamp */
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	return __atomic_load_n(&sl->gen, __ATOMIC_RELAXED) == cur_gen(cur);
}

static int type_error(const shmcfg *h, shmcfg_opt opt, shmcfg_type want)
{
	return shmcfg__err(SHMCFG_E_TYPE, "%s: option is %s, read as %s", sstr(h, h->desc[opt].name),
			   shmcfg_type_name(h->desc[opt].type), shmcfg_type_name(want) ?: "?");
}

int shmcfg__get_slow(const shmcfg *h, shmcfg_opt opt, shmcfg_type type, uint64_t *bits)
{
	if (opt >= h->view.nopts)
		return shmcfg__err(SHMCFG_E_NOOPT, "option handle %u out of range (%u options)", opt,
				   h->view.nopts);
	if (h->desc[opt].type != (uint32_t)type)
		return type_error(h, opt, type);
	struct shmcfg__cell pc;
	const char *pheap;
	uint64_t psize;
	int perr;
	if (shmcfg__tls_patched && shmcfg__patched_cell(h, opt, &pc, &pheap, &psize, &perr)) {
		if (perr)
			return perr;
		if (META_TYPE(pc.meta) != (unsigned)type)
			return shmcfg__err(SHMCFG_E_CORRUPT, "%s: patched cell of %s has type %u", h->name,
					   sstr(h, h->desc[opt].name), META_TYPE(pc.meta));
		*bits = pc.val;
		return (pc.meta & META_NULL) ? SHMCFG_NULL : 0;
	}
	for (int tries = 0;;) {
		uint64_t cur = __atomic_load_n(&h->hdr->current, __ATOMIC_ACQUIRE);
		uint32_t s = cur_slot(cur);
		if (s >= h->lay.nslots)
			return shmcfg__err(SHMCFG_E_CORRUPT, "%s: current names slot %u of %u", h->name,
					   s, h->lay.nslots);
		const struct slot_hdr *sl = slot_at(h, s);
		const struct shmcfg__cell *c = slot_cells(h, sl) + opt;
		uint64_t val = __atomic_load_n(&c->val, __ATOMIC_RELAXED);
		uint64_t meta = __atomic_load_n(&c->meta, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&sl->gen, __ATOMIC_RELAXED) != cur_gen(cur)) {
			int r = shmcfg__seq_retry(h, cur, &tries);
			if (r)
				return r;
			continue;
		}
		if (META_TYPE(meta) != (unsigned)type)
			return shmcfg__err(SHMCFG_E_CORRUPT, "%s: cell of %s has type %u", h->name,
					   sstr(h, h->desc[opt].name), META_TYPE(meta));
		*bits = val;
		return (meta & META_NULL) ? SHMCFG_NULL : 0;
	}
}

int shmcfg_get(const shmcfg *h, shmcfg_opt opt, shmcfg_value *ret)
{
	SHMCFG_API_ENTRY;
	assert_return(h && ret, -EINVAL);
	if (opt >= h->view.nopts)
		return shmcfg__err(SHMCFG_E_NOOPT, "option handle %u out of range", opt);
	struct shmcfg__cell pc;
	const char *pheap;
	uint64_t psize;
	int perr;
	if (shmcfg__tls_patched && shmcfg__patched_cell(h, opt, &pc, &pheap, &psize, &perr)) {
		shmcfg_value v;
		if (!perr)
			perr = shmcfg__value_from_cell(&pc, pheap, psize, &v);
		return perr ? perr : shmcfg__value_copy(&v, ret);
	}
	for (int tries = 0;;) {
		uint64_t cur = __atomic_load_n(&h->hdr->current, __ATOMIC_ACQUIRE);
		uint32_t s = cur_slot(cur);
		if (s >= h->lay.nslots)
			return shmcfg__err(SHMCFG_E_CORRUPT, "%s: current names slot %u", h->name, s);
		const struct slot_hdr *sl = slot_at(h, s);
		struct shmcfg__cell c = {
			__atomic_load_n(&slot_cells(h, sl)[opt].val, __ATOMIC_RELAXED),
			__atomic_load_n(&slot_cells(h, sl)[opt].meta, __ATOMIC_RELAXED),
		};
		shmcfg_value v;
		int r = shmcfg__value_from_cell(&c, slot_heap(h, sl), h->lay.heap_size, &v);
		if (!r)
			r = shmcfg__value_copy(&v, ret);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&sl->gen, __ATOMIC_RELAXED) != cur_gen(cur)) {
			if (!r)
				shmcfg_value_clear(ret);
			if ((r = shmcfg__seq_retry(h, cur, &tries)))
				return r;
			continue;
		}
		if (!r && ret->type != h->desc[opt].type) {
			shmcfg_value_clear(ret);
			r = shmcfg__err(SHMCFG_E_CORRUPT, "%s: cell of %s has the wrong type", h->name,
					sstr(h, h->desc[opt].name));
		}
		return r;
	}
}

uint64_t shmcfg_config_hash(const shmcfg *h, uint8_t out[16])
{
	SHMCFG_API_ENTRY;
	for (int tries = 0;;) {
		uint64_t cur = __atomic_load_n(&h->hdr->current, __ATOMIC_ACQUIRE);
		if (cur_slot(cur) >= h->lay.nslots)
			break;
		const struct slot_hdr *sl = slot_at(h, cur_slot(cur));
		uint64_t w[2] = {
			__atomic_load_n((const uint64_t *)sl->config_hash, __ATOMIC_RELAXED),
			__atomic_load_n((const uint64_t *)sl->config_hash + 1, __ATOMIC_RELAXED),
		};
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&sl->gen, __ATOMIC_RELAXED) == cur_gen(cur)) {
			memcpy(out, w, 16);
			return cur_gen(cur);
		}
		if (shmcfg__seq_retry(h, cur, &tries))
			break;
	}
	memset(out, 0, 16);
	return 0;
}

/* ------------------------------------------------------------------ */
/* Snapshots                                                          */
/* ------------------------------------------------------------------ */

static int copy_snapshot(shmcfg *h, shmcfg_snapshot **ret)
{
	struct shmcfg_snapshot *s = malloc(sizeof *s + h->lay.slot_size);
	if (!s)
		return -ENOMEM;
	char *copy = (char *)(s + 1);
	for (int tries = 0;;) {
		uint64_t cur = __atomic_load_n(&h->hdr->current, __ATOMIC_ACQUIRE);
		if (cur_slot(cur) >= h->lay.nslots) {
			free(s);
			return shmcfg__err(SHMCFG_E_CORRUPT, "%s: current names slot %u", h->name, cur_slot(cur));
		}
		if (shmcfg__seq_copy(h, cur, copy)) {
			*s = (struct shmcfg_snapshot){h, cur_gen(cur), copy, true, -1};
			*ret = s;
			return 0;
		}
		int r = shmcfg__seq_retry(h, cur, &tries);
		if (r) {
			free(s);
			return r;
		}
	}
}

static void unpin_free(struct pview *pv)
{
	shmcfg *h = pv->snap.h;
	/* release: our reads of the slot happen before a writer sees it free */
	__atomic_store_n(&reader_at(h, (uint32_t)h->reader)->pins[pv->snap.pin], 0,
			 __ATOMIC_RELEASE);
	h->retired--;
	free(pv);
}

static void *reclaimer(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&rq_lock);
	for (;;) {
		while (!rq_head && !rq_stop)
			pthread_cond_wait(&rq_cond, &rq_lock);
		if (!rq_head) { /* stopped, and nothing left to reclaim */
			rq_stop = false;
			rq_pid = 0; /* the next retire starts a new reclaimer */
			break;
		}
		struct pview *batch = rq_head;
		rq_head = NULL;
		pthread_mutex_unlock(&rq_lock);
		/* every read-side section that could see these views has ended */
		grace_period();
		pthread_mutex_lock(&rq_lock);
		while (batch) {
			struct pview *next = batch->next;
			unpin_free(batch);
			batch = next;
		}
		pthread_cond_broadcast(&rq_done);
	}
	pthread_mutex_unlock(&rq_lock);
	return NULL;
}

/* Queue a replaced view for unpinning after a grace period. Caller holds
 * h->view_lock. Without a reclaimer thread, wait for the grace period here. */
static void retire(shmcfg *h, struct pview *pv)
{
	pthread_mutex_lock(&rq_lock);
	h->retired++;
	if (!h->uses_reclaimer) {
		h->uses_reclaimer = true;
		rq_users++;
	}
	if (rq_pid != getpid() && pthread_create(&rq_thread, NULL, reclaimer, NULL) == 0)
		rq_pid = getpid();
	if (rq_pid == getpid()) {
		pv->next = rq_head;
		rq_head = pv;
		pthread_cond_signal(&rq_cond);
		pthread_mutex_unlock(&rq_lock);
		return;
	}
	pthread_mutex_unlock(&rq_lock);
	/* no reclaimer thread: wait for the grace period here, unless this
	 * thread is inside a read-side section (a nested snapshot), which would
	 * wait for itself; then the view and its pin stay until detach */
	if (urcu_bp_read_ongoing()) {
		pthread_mutex_lock(&rq_lock);
		h->retired--;
		pthread_mutex_unlock(&rq_lock);
		return;
	}
	grace_period();
	pthread_mutex_lock(&rq_lock);
	unpin_free(pv);
	pthread_mutex_unlock(&rq_lock);
}

/*
 * Pin the current generation in our reader entry. The protocol is Dekker's:
 *   reader: store pin = g (seq_cst); load stamp of slot s (seq_cst)
 *   writer: store stamp of s = 0 (seq_cst); load every pin (seq_cst)
 * In the single total order of seq_cst operations one of the two stores comes
 * first, so either the reader sees stamp != g (it unpins and retries) or the
 * writer sees pin == g (it restores the stamp and picks another slot). Never
 * both miss: a slot whose stamp a pinning reader saw equal to g is not
 * rewritten while the pin stands.
 */
static int pin_current(shmcfg *h, struct pview *pv)
{
	struct reader_ent *e = reader_at(h, (uint32_t)h->reader);
	int pin = -1;
	for (unsigned k = 0; k < SEG_PINS && pin < 0; k++)
		if (__atomic_load_n(&e->pins[k], __ATOMIC_RELAXED) == 0)
			pin = (int)k;
	if (pin < 0)
		return -EAGAIN; /* every pin awaits a grace period */
	for (int tries = 0;;) {
		uint64_t cur = __atomic_load_n(&h->hdr->current, __ATOMIC_ACQUIRE);
		uint32_t s = cur_slot(cur);
		if (s >= h->lay.nslots)
			return shmcfg__err(SHMCFG_E_CORRUPT, "%s: current names slot %u", h->name, s);
		const struct slot_hdr *sl = slot_at(h, s);
		__atomic_store_n(&e->pins[pin], cur_gen(cur), __ATOMIC_SEQ_CST);
		if (__atomic_load_n(&sl->gen, __ATOMIC_SEQ_CST) == cur_gen(cur)) {
			pv->snap = (struct shmcfg_snapshot){h, cur_gen(cur), (const char *)sl, false, pin};
			return 0;
		}
		__atomic_store_n(&e->pins[pin], 0, __ATOMIC_RELEASE);
		int r = shmcfg__seq_retry(h, cur, &tries);
		if (r)
			return r;
	}
}

/*
 * The process's first pinned snapshot claims its reader entry. When every
 * entry is held by a live process, snapshots copy the slot instead (as on a
 * read-only handle); the claim is tried again after CLAIM_RETRY_NS, and the
 * segment counts processes that fell back (shmctl stat). Returns the entry,
 * or -1 to copy.
 */
static int claim_entry(shmcfg *h)
{
	pthread_mutex_lock(&h->view_lock);
	if (h->reader < 0 && now_mono_ns() >= h->claim_after_ns && shmcfg__reader_claim(h) < 0) {
		h->claim_after_ns = now_mono_ns() + CLAIM_RETRY_NS;
		if (!h->counted_fallback) {
			h->counted_fallback = true;
			__atomic_fetch_add(&h->hdr->copy_fallbacks, 1, __ATOMIC_RELAXED);
		}
		shmcfg__clear_err(); /* copying is a success, not an error */
	}
	int reader = h->reader;
	pthread_mutex_unlock(&h->view_lock);
	return reader;
}

int shmcfg_snapshot_acquire(shmcfg *h, shmcfg_snapshot **ret)
{
	SHMCFG_API_ENTRY;
	assert_return(h && ret, -EINVAL);
	if (h->rdonly)
		return copy_snapshot(h, ret);
	/* a child must not use the parent's view or its reader entry (the
	 * parent's grace periods cannot see the child); self_pid is kept by
	 * the fork handler, so this costs no syscall */
	if (h->pid != self_pid)
		return shmcfg__err(SHMCFG_E_FORKED, "%s: snapshot in a child of the attaching process: attach again",
				   h->name);
	/* acquire: pairs with the release store of the claim (readers.c) */
	int reader = __atomic_load_n(&h->reader, __ATOMIC_ACQUIRE);
	if (reader < 0 && (reader = claim_entry(h)) < 0)
		return copy_snapshot(h, ret);
	struct reader_ent *e = reader_at(h, (uint32_t)reader);
	for (int round = 0; round < SLOW_TRIES; round++) {
		urcu_bp_read_lock();
		/* acquire pairs with the release store below: a view's fields are
		 * written before it is published (what rcu_dereference and
		 * rcu_assign_pointer do, in C11 terms that ThreadSanitizer reads) */
		struct pview *pv = __atomic_load_n(&h->pview, __ATOMIC_ACQUIRE);
		uint64_t gen = shmcfg_generation(h);
		/* after one replacement, take the view we made even if a newer
		 * commit came meanwhile: it is at least as new as the call */
		if (pv && (pv->snap.gen == gen || round > 0)) {
			/*
			 * Announce the use, then check that the slot still holds the
			 * view's generation. Dekker with choose_slot(): the seq_cst
			 * increment here and the writer's seq_cst busy mark of the
			 * slot; the writer loads `active` after its mark, we load the
			 * stamp after our increment, so either it sees us active (and
			 * leaves the slot) or we see its mark (and replace the view).
			 */
			__atomic_fetch_add(&e->active, 1, __ATOMIC_SEQ_CST);
			if (__atomic_load_n(&((const struct slot_hdr *)pv->snap.slot)->gen, __ATOMIC_SEQ_CST) ==
			    pv->snap.gen) {
				*ret = &pv->snap;
				return 0; /* the read-side section lasts until release */
			}
			/* a writer reused the slot while this process held no
			 * snapshot: the view is dead; replace it below */
			__atomic_fetch_sub(&e->active, 1, __ATOMIC_RELEASE);
		}
		read_unlock();
		pthread_mutex_lock(&h->view_lock);
		struct pview *old = h->pview;
		if (!old || old->snap.gen != shmcfg_generation(h) ||
		    __atomic_load_n(&((const struct slot_hdr *)old->snap.slot)->gen, __ATOMIC_ACQUIRE) != old->snap.gen) {
			struct pview *nv = malloc(sizeof *nv);
			int r = nv ? pin_current(h, nv) : -ENOMEM;
			if (r) {
				pthread_mutex_unlock(&h->view_lock);
				free(nv);
				return r == -EAGAIN ? copy_snapshot(h, ret) : r;
			}
			__atomic_store_n(&h->pview, nv, __ATOMIC_RELEASE);
			if (old)
				retire(h, old);
		}
		pthread_mutex_unlock(&h->view_lock);
	}
	return copy_snapshot(h, ret);
}

void shmcfg_snapshot_release(shmcfg_snapshot *snap)
{
	SHMCFG_API_KEEP;
	if (!snap)
		return;
	if (snap->is_copy) {
		free(snap);
		return;
	}
	if (snap->h->pid != self_pid) {
		/* a snapshot inherited across fork(): the reader entry and its
		 * count are the parent's; only our read-side section is ours */
		read_unlock();
		return;
	}
	/* release: our reads of the slot happen before a writer sees us idle */
	__atomic_fetch_sub(&reader_at(snap->h, (uint32_t)snap->h->reader)->active, 1, __ATOMIC_RELEASE);
	read_unlock();
}

uint64_t shmcfg_snapshot_generation(const shmcfg_snapshot *snap)
{
	SHMCFG_API_KEEP;
	return snap->gen;
}

void shmcfg_snapshot_hash(const shmcfg_snapshot *snap, uint8_t out[16])
{
	SHMCFG_API_KEEP;
	memcpy(out, ((const struct slot_hdr *)snap->slot)->config_hash, 16);
}

int shmcfg_snapshot_get(const shmcfg_snapshot *snap, shmcfg_opt opt, shmcfg_value *ret)
{
	SHMCFG_API_ENTRY;
	assert_return(snap && ret, -EINVAL);
	const shmcfg *h = snap->h;
	if (opt >= h->lay.nopts)
		return shmcfg__err(SHMCFG_E_NOOPT, "option handle %u out of range", opt);
	int r = shmcfg__value_from_cell(slot_cells(h, snap->slot) + opt, slot_heap(h, snap->slot),
					h->lay.heap_size, ret);
	if (!r && ret->type != h->desc[opt].type)
		r = shmcfg__err(SHMCFG_E_CORRUPT, "%s: cell of %s has the wrong type", h->name,
				sstr(h, h->desc[opt].name));
	return r;
}

int shmcfg_snapshot_layer(const shmcfg_snapshot *snap, shmcfg_opt opt, shmcfg_source layer,
			  shmcfg_value *ret)
{
	SHMCFG_API_ENTRY;
	assert_return(snap && ret, -EINVAL);
	const shmcfg *h = snap->h;
	if (opt >= h->lay.nopts)
		return shmcfg__err(SHMCFG_E_NOOPT, "option handle %u out of range", opt);
	if (layer == SHMCFG_SRC_DEFAULT) {
		int r = shmcfg__value_from_cell(&h->desc[opt].def, h->strings, h->strings_size, ret);
		ret->source = SHMCFG_SRC_DEFAULT;
		return r;
	}
	if (layer < SHMCFG_SRC_KNOB || layer > SHMCFG_SRC_ENV_FORCE)
		return shmcfg__err(SHMCFG_E_LAYER, "layer %s is not stored", shmcfg_source_name(layer));
	const struct shmcfg__cell *c = slot_layers(h, snap->slot) + (size_t)opt * NLAYERS + (layer - 1);
	if (!(c->meta & META_SET))
		return 1;
	int r = shmcfg__value_from_cell(c, slot_heap(h, snap->slot), h->lay.heap_size, ret);
	if (!r && ret->type != h->desc[opt].type)
		r = shmcfg__err(SHMCFG_E_CORRUPT, "%s: layer cell of %s has the wrong type", h->name,
				sstr(h, h->desc[opt].name));
	return r;
}

/* Drop the view at detach and wait until every retired view of this handle
 * is unpinned: the reclaimer reads the mapping we are about to unmap. In a
 * child using an inherited handle the views and pins are the parent's:
 * leave them alone. */
void shmcfg__view_close(shmcfg *h)
{
	if (getpid() != h->pid)
		return;
	pthread_mutex_lock(&h->view_lock);
	struct pview *pv = h->pview;
	__atomic_store_n(&h->pview, NULL, __ATOMIC_RELEASE);
	if (pv)
		retire(h, pv);
	pthread_mutex_unlock(&h->view_lock);
	pthread_mutex_lock(&rq_lock);
	while (h->retired)
		pthread_cond_wait(&rq_done, &rq_lock);
	/* no handle needs the reclaimer any more: end it */
	bool last = h->uses_reclaimer && --rq_users == 0 && rq_pid == getpid();
	pthread_t t = rq_thread;
	if (last) {
		rq_stop = true;
		pthread_cond_signal(&rq_cond);
	}
	pthread_mutex_unlock(&rq_lock);
	if (last)
		pthread_join(t, NULL);
}

/*
 * fork(). The reclaimer's queue lock and condition variables must not be
 * copied mid-use into the child (the parent's reclaimer waits on rq_cond,
 * and a child would inherit a waiter that does not exist): hold the lock
 * across fork and give the child fresh ones and an empty queue; the child
 * starts its own reclaimer when it needs one (rq_pid).
 *
 * urcu-bp's registry wants its own fork hooks (its README), but they take
 * the grace-period lock: if the forking thread holds a snapshot while our
 * reclaimer waits for a grace period, they would deadlock. So they are
 * called only when the forking thread is outside any read-side section.
 */
static bool urcu_hooks;

/* Lock order: urcu's grace-period lock before rq_lock, never the other way
 * (the reclaimer holds the grace-period lock while it waits for readers, and
 * a reader may be waiting for rq_lock in retire()). */
static void before_fork(void)
{
	urcu_hooks = !urcu_bp_read_ongoing();
	if (urcu_hooks)
		urcu_bp_before_fork();
	pthread_mutex_lock(&rq_lock);
}

static void after_fork_parent(void)
{
	pthread_mutex_unlock(&rq_lock);
	if (urcu_hooks)
		urcu_bp_after_fork_parent();
}

static void after_fork_child(void)
{
	self_pid = getpid();
	if (urcu_hooks)
		urcu_bp_after_fork_child();
	pthread_mutex_init(&rq_lock, NULL);
	pthread_cond_init(&rq_cond, NULL);
	pthread_cond_init(&rq_done, NULL);
	rq_head = NULL; /* the parent's views: not ours to unpin */
	rq_pid = 0;
	rq_users = 0;
	rq_stop = false;
}

__attribute__((constructor)) static void register_atfork(void)
{
	self_pid = getpid();
	pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}
