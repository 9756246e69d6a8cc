/* SPDX-License-Identifier: MIT */
/*
 * Reclamation: when may a writer reuse a slot, and when may a process stop
 * protecting one. Both sides of the pin protocol are here, with the argument
 * (doc/design.md, "Snapshots and pins"; the labels (F)-(H) name its steps):
 *
 *   reader (snapshot acquire)               writer (choose_slot)
 *     store pins[k] = g                 (G)   store stamp = BUSY | g   (F)  seq_cst
 *     active += 1                       (G)   load hwm, active, pins   (F)  seq_cst
 *     load stamp == g ? use : retry     (G)   a live pin of g ? restore, next slot
 *     ... release: active -= 1          (H)   (release: our reads of the slot
 *     grace period, then pins[k] = 0    (H)    happen before a writer sees us idle)
 *
 * In the single total order of the seq_cst operations either the writer's
 * load of `active` comes after the reader's increment (and then, loaded
 * after it, sees the pin stored before it), or the reader's stamp load comes
 * after the busy mark and sees it. So a slot whose stamp an active reader
 * saw equal to its generation is never rewritten while in use. The busy mark
 * keeps the old generation, so a writer that dies between (F)'s store and its
 * load leaves the next writer's pin check intact. Pins count only while
 * their process holds snapshots (`active`): an idle process blocks nobody.
 *
 * Inside the process the view is an RCU-protected pointer (liburcu's
 * bulletproof flavour, which needs no thread registration); a replaced view
 * is unpinned only after a grace period, by a reclaimer thread of our own
 * rather than call_rcu (call_rcu's worker does not survive fork(), and its
 * fork hooks are documented to hang with callbacks that call free()). Ours
 * is keyed by pid: a child starts its own when it needs one.
 */
#include "internal.h"
#include "seqlock.h"
#include "slot.h"

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
static unsigned rq_in_gp;    /* grace periods in progress (reclaimer, retire()) */
static bool rcu_unusable;    /* forked mid-grace-period: no RCU views (fork handlers) */
#define self_pid shmcfg__self_pid

#define CLAIM_RETRY_NS 1000000000ull /* a full reader table is tried again after 1 s */

/*
 * Whether a process that holds snapshots now pins generation gen. An
 * entry's pins count only while its `active` is not 0: an idle process
 * keeps its last view pinned without blocking writers. `active` is loaded
 * before the pins, both seq_cst; with the reader's pin store, then its
 * seq_cst increment of `active`, then its stamp load (shmcfg_snapshot_acquire()),
 * and the writer's seq_cst busy mark before this call, see
 * shmcfg__choose_slot() below for the argument.
 */
bool shmcfg__gen_pinned(const shmcfg *h, uint64_t gen)
{
	if (gen == 0)
		return false;
	uint32_t hwm = shmcfg__readers_hwm(h);
	for (uint32_t i = 0; i < hwm; i++) {
		const struct reader_ent *e = reader_at(h, i);
		if (__atomic_load_n(&e->active, __ATOMIC_SEQ_CST) == 0)
			continue;
		for (unsigned k = 0; k < SEG_PINS; k++)
			if (__atomic_load_n(&e->pins[k], __ATOMIC_SEQ_CST) == gen)
				return true;
	}
	return false;
}

/*
 * Mark slot s busy for rewriting, if no reader holding snapshots pins the
 * generation it held (`stamp`, as loaded): the writer's side of the pin
 * protocol below. False (the stamp put back) if one does.
 */
bool shmcfg__claim_slot(shmcfg *h, uint32_t s, uint64_t stamp)
{
	struct slot_hdr *sl = slot_at(h, s);
	seq_write_begin(&sl->gen, SLOT_BUSY | STAMP_GEN(stamp)); /* (F), (C) */
	shmcfg__fault("commit.busy");
	if (!shmcfg__gen_pinned(h, STAMP_GEN(stamp)))
		return true;
	seq_write_end(&sl->gen, stamp); /* put back: nothing was rewritten */
	return false;
}

/*
 * Pick the most recent slot (the one holding the latest generation, so that
 * sync_slot copies the least) that is neither current nor pinned by a
 * process holding snapshots, and mark it busy. Commits then take turns on
 * two slots while nobody pins; a reader that loaded `current` before a
 * commit and still reads its slot after the next one retries (seqlock). Dekker with the reader
 * (shmcfg_snapshot_acquire(), below):
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
 * that died before publishing it: it is free (taken last, as one whose
 * content is unknown: copied whole), and the sweep that follows that death
 * unstamps it (heap.c), so that no two slots ever carry one generation.
 */
int shmcfg__choose_slot(shmcfg *h, uint32_t cur_s, uint64_t cur_g, uint32_t *ret, uint64_t *old_stamp)
{
	uint64_t deadline = 0; /* set when no slot is free: a commit that finds one reads no clock */
	bool reaped = false;
	/* The slot current before cur_s, if this handle made cur_s current
	 * (h->slot_hint) and nobody committed since: stamped cur_g - 1, one
	 * generation to replay. The scan below would choose it too, unless a
	 * failed commit left a slot unstamped and already holding cur_g
	 * (undo(), recycle() in publish.c): that handle's own hint is cleared
	 * then, but another handle's passes it over once, replaying one
	 * generation more than it had to. Checked like any other slot (stamp,
	 * base, pins, then the busy mark), so any hint is safe, a fresh
	 * handle's 0 too; it only spares reading the other headers. */
	uint32_t hint = h->slot_hint;
	if (hint < h->lay.nslots && hint != cur_s && cur_g > 1) {
		uint64_t stamp = __atomic_load_n(&slot_at(h, hint)->gen, __ATOMIC_ACQUIRE);
		if (stamp == cur_g - 1 && shmcfg__slot_base(h, hint, stamp, cur_g) == stamp &&
		    !shmcfg__gen_pinned(h, stamp)) {
			shmcfg__fault("commit.chosen"); /* as below: chosen, not yet marked */
			if (shmcfg__claim_slot(h, hint, stamp)) {
				*ret = hint;
				*old_stamp = stamp;
				return 0;
			}
		}
	}
	for (;;) {
		uint32_t best = UINT32_MAX;
		uint64_t best_stamp = 0, best_key = 0;
		for (uint32_t s = 0; s < h->lay.nslots; s++) {
			if (s == cur_s)
				continue;
			uint64_t stamp = __atomic_load_n(&slot_at(h, s)->gen, __ATOMIC_ACQUIRE);
			uint64_t g = STAMP_GEN(stamp);
			/* the fewer generations behind, the less to copy (sync_slot);
			 * of two as recent, the one a reader used last: its pages
			 * are the warm ones */
			uint64_t key = shmcfg__slot_base(h, s, stamp, cur_g) * 2 + (g != 0) + 1;
			if (key > best_key && !shmcfg__gen_pinned(h, g))
				best = s, best_stamp = stamp, best_key = key;
		}
		if (best != UINT32_MAX) {
			shmcfg__fault("commit.chosen");
			if (shmcfg__claim_slot(h, best, best_stamp)) {
				*ret = best;
				*old_stamp = best_stamp;
				return 0;
			}
			continue;
		}
		if (!reaped) {
			reaped = true;
			if (shmcfg__reap(h, NULL, NULL) > 0)
				continue;
		}
		uint64_t now = now_ns(CLOCK_MONOTONIC);
		if (!deadline)
			deadline = commit_deadline(h, now);
		if (now >= deadline) {
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

static void unpin_free(struct pview *pv)
{
	shmcfg *h = pv->snap.h;
	/* (H) release: our reads of the slot happen before a writer sees it free */
	__atomic_store_n(&reader_at(h, (uint32_t)h->reader)->pins[pv->snap.pin], 0,
			 __ATOMIC_RELEASE);
	h->retired--;
	shmcfg__free(pv);
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
		rq_in_gp++; /* under rq_lock: shmcfg__reclaim_prepare_fork() sees it */
		pthread_mutex_unlock(&rq_lock);
		/* every read-side section that could see these views has ended */
		grace_period();
		pthread_mutex_lock(&rq_lock);
		rq_in_gp--;
		while (batch) { /* ours alone: rq_lock may be let go on the way */
			struct pview *next = batch->next;
			shmcfg *h = batch->snap.h;
			unpin_free(batch);
			void (*destroy)(shmcfg *) = h->close_deferred;
			if (destroy && h->retired == 0) {
				/* its last view: end the close it deferred (a last
				 * user leaves us idle; the next close that joins ends
				 * us). No lock of ours across the handle's own. */
				if (h->uses_reclaimer)
					rq_users--;
				pthread_mutex_unlock(&rq_lock);
				destroy(h);
				pthread_mutex_lock(&rq_lock);
			}
			batch = next;
		}
		pthread_cond_broadcast(&rq_done);
	}
	pthread_mutex_unlock(&rq_lock);
	return NULL;
}

/* Queue a replaced view for unpinning after a grace period. Without a
 * reclaimer thread, wait for the grace period here: so the caller must not
 * hold h->view_lock, which a reader inside its read-side section may be
 * waiting for (its snapshot_acquire's slow path) while we wait for it. */
static void retire(shmcfg *h, struct pview *pv)
{
	pthread_mutex_lock(&rq_lock);
	h->retired++;
	if (!h->uses_reclaimer) {
		h->uses_reclaimer = true;
		rq_users++;
	}
	if (rq_pid != getpid() && shmcfg__pthread_create(&rq_thread, NULL, reclaimer, NULL) == 0)
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
	pthread_mutex_lock(&rq_lock);
	if (urcu_bp_read_ongoing()) {
		h->retired--;
		pthread_mutex_unlock(&rq_lock);
		return;
	}
	rq_in_gp++;
	pthread_mutex_unlock(&rq_lock);
	grace_period();
	pthread_mutex_lock(&rq_lock);
	rq_in_gp--;
	unpin_free(pv);
	pthread_mutex_unlock(&rq_lock);
}

/*
 * seq_read's read for pin_current: pin the generation, then check the slot's
 * stamp. The protocol is Dekker's:
 *   reader: store pin = g (seq_cst); load stamp of slot s (seq_cst)
 *   writer: store stamp of s = busy mark (seq_cst); load every pin (seq_cst)
 * In the single total order of seq_cst operations one of the two stores comes
 * first, so either the reader sees stamp != g (it unpins and retries) or the
 * writer sees pin == g (it restores the stamp and picks another slot). This
 * check only saves a round: the writer skips entries whose `active` is 0, so
 * what protects the slot is shmcfg_snapshot_acquire's increment and stamp
 * re-check after it (tests/model: the model verifies without this check).
 */
struct pin_arg {
	uint64_t *pin; /* a free pin of our entry */
	const struct slot_hdr *sl;
	uint64_t gen;
};

static int pin_read(const shmcfg *h, const struct slot_hdr *sl, uint64_t cur, void *arg)
{
	struct pin_arg *a = arg;
	__atomic_store_n(a->pin, cur_gen(cur), __ATOMIC_SEQ_CST); /* (G) */
	if (__atomic_load_n(&sl->gen, __ATOMIC_SEQ_CST) != cur_gen(cur)) {
		__atomic_store_n(a->pin, 0, __ATOMIC_RELEASE);
		return SEQ_AGAIN;
	}
	a->sl = sl;
	a->gen = cur_gen(cur);
	return 0;
}

/* Pin the current generation in our reader entry (pin_read) and make it
 * pv's view: 0, -EAGAIN if every pin awaits a grace period, or the
 * seqlock's verdict. */
static int pin_current(shmcfg *h, struct pview *pv)
{
	struct reader_ent *e = reader_at(h, (uint32_t)h->reader);
	int pin = -1;
	for (unsigned k = 0; k < SEG_PINS && pin < 0; k++)
		if (__atomic_load_n(&e->pins[k], __ATOMIC_RELAXED) == 0)
			pin = (int)k;
	if (pin < 0)
		return -EAGAIN; /* every pin awaits a grace period */
	struct pin_arg a = {&e->pins[pin], NULL, 0};
	int r = seq_read(h, pin_read, &a);
	if (!r)
		pv->snap = snap_of(h, a.gen, (const char *)a.sl, seg_heap(h), h->lay.heap_size, false, pin);
	return r;
}

/*
 * The process's first pinned snapshot (or commit: wlock.c) claims its
 * reader entry. When every
 * entry is held by a live process, snapshots copy the slot instead (as on a
 * read-only handle); the claim is tried again after CLAIM_RETRY_NS, and the
 * segment counts processes that fell back (shmctl stat). Returns the entry,
 * or -1 to copy.
 */
int shmcfg__claim_entry(shmcfg *h)
{
	pthread_mutex_lock(&h->view_lock);
	if (h->reader < 0 && now_ns(CLOCK_MONOTONIC) >= h->claim_after_ns && shmcfg__reader_claim(h) < 0) {
		h->claim_after_ns = now_ns(CLOCK_MONOTONIC) + CLAIM_RETRY_NS;
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
	const shmcfg *h0 = h;
	SHMCFG_FOLLOW(h);
	if (__builtin_expect(h != h0 && h->root_map, 0)) {
		/* followed into another schema: a copy of its own, whose calls
		 * map the caller's options (the pinned views are shared) */
		int r = shmcfg__copy_snapshot(h, ret);
		if (!r)
			snap_mapped(*ret, h0);
		return r;
	}
	if (h->rdonly)
		return shmcfg__copy_snapshot(h, ret);
	/* a child must not use the parent's view or its reader entry (the
	 * parent's grace periods cannot see the child); self_pid is kept by
	 * the fork handler, so this costs no syscall */
	if (h->pid != self_pid)
		return shmcfg__err(SHMCFG_E_FORKED, "%s: snapshot in a child of the attaching process: attach again",
				   h->name);
	/* a child forked mid-grace-period cannot wait for one: it copies */
	if (rcu_unusable)
		return shmcfg__copy_snapshot(h, ret);
	/* acquire: pairs with the release store of the claim (readers.c) */
	int reader = __atomic_load_n(&h->reader, __ATOMIC_ACQUIRE);
	if (reader < 0 && (reader = shmcfg__claim_entry(h)) < 0)
		return shmcfg__copy_snapshot(h, ret);
	struct reader_ent *e = reader_at(h, (uint32_t)reader);
	for (int round = 0; round < SEQ_MAX_TRIES; round++) {
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
			__atomic_fetch_add(&e->active, 1, __ATOMIC_SEQ_CST); /* (G) */
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
			struct pview *nv = shmcfg__malloc(sizeof *nv);
			int r = nv ? pin_current(h, nv) : shmcfg__nomem();
			if (r) {
				pthread_mutex_unlock(&h->view_lock);
				shmcfg__free(nv);
				return r == -EAGAIN ? shmcfg__copy_snapshot(h, ret) : r;
			}
			__atomic_store_n(&h->pview, nv, __ATOMIC_RELEASE);
		} else
			old = NULL; /* another thread replaced it meanwhile */
		pthread_mutex_unlock(&h->view_lock);
		if (old)
			retire(h, old); /* not under view_lock: see retire() */
	}
	return shmcfg__copy_snapshot(h, ret);
}

shmcfg_snapshot *shmcfg_snapshot_release(shmcfg_snapshot *snap)
{
	SHMCFG_API_KEEP;
	if (!snap)
		return NULL;
	if (snap->is_copy) {
		shmcfg__free(snap);
		return NULL;
	}
	if (snap->h->pid != self_pid) {
		/* a snapshot inherited across fork(): the reader entry and its
		 * count are the parent's; only our read-side section is ours */
		read_unlock();
		return NULL;
	}
	/* release: our reads of the slot happen before a writer sees us idle */
	__atomic_fetch_sub(&reader_at(snap->h, (uint32_t)snap->h->reader)->active, 1, __ATOMIC_RELEASE); /* (H) */
	read_unlock();
	return NULL;
}

/*
 * Drop the view at detach and wait until every retired view of this handle
 * is unpinned: the reclaimer reads the mapping we are about to unmap. In a
 * child using an inherited handle the views and pins are the parent's:
 * leave them alone. True if the caller may destroy the handle now.
 *
 * A thread that still holds a snapshot (of this handle or of another) is
 * inside a read-side section, which the grace period the retired views wait
 * for must see end: waiting here would wait for itself, for ever (a program
 * that closes before it releases, a test whose assertion failed with a
 * snapshot held). Then the close is deferred: the reclaimer destroys the
 * handle once its views are unpinned, after the snapshots are released,
 * which until then stay readable: it calls destroy(h) then. False: the
 * caller must not touch h.
 */
bool shmcfg__view_close(shmcfg *h, void (*destroy)(shmcfg *h))
{
	if (getpid() != h->pid)
		return true;
	pthread_mutex_lock(&h->view_lock);
	struct pview *pv = h->pview;
	__atomic_store_n(&h->pview, NULL, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&h->view_lock);
	if (pv)
		retire(h, pv); /* not under view_lock: see retire() */
	pthread_mutex_lock(&rq_lock);
	/* without a reclaimer thread (it could not be started) retire() left
	 * the view pinned and uncounted, and a snapshot of it may be the one
	 * held: nobody can end that close, so the handle is left allocated */
	if (urcu_bp_read_ongoing() && (h->retired || (h->uses_reclaimer && rq_pid != getpid()))) {
		h->close_deferred = destroy;
		pthread_mutex_unlock(&rq_lock);
		return false;
	}
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
	return true;
}

/*
 * fork(). The reclaimer's queue lock and condition variables must not be
 * copied mid-use into the child (the parent's reclaimer waits on rq_cond,
 * and a child would inherit a waiter that does not exist): hold the lock
 * across fork and give the child fresh ones and an empty queue; the child
 * starts its own reclaimer when it needs one (rq_pid).
 *
 * urcu-bp's registry wants its own fork hooks (its README), but they take
 * the grace-period lock, which a grace period in progress holds until every
 * reader of the process has left its section: fork() would wait for other
 * threads' snapshots (for ever, if one of them waits for the forking thread),
 * and the forking thread's own snapshot would deadlock it. So the hooks run
 * only when no grace period is in progress (rq_in_gp, counted under rq_lock,
 * which we hold: none can start until we let go) and the forking thread holds
 * no snapshot. Otherwise the child inherits urcu's state mid-use and must not
 * wait for a grace period: it never pins (rcu_unusable: its snapshots copy),
 * so it never retires a view.
 */
static bool urcu_hooks;
void shmcfg__reclaim_prepare_fork(void)
{
	pthread_mutex_lock(&rq_lock);
	urcu_hooks = !rq_in_gp && !urcu_bp_read_ongoing();
	if (urcu_hooks)
		urcu_bp_before_fork();
}

void shmcfg__reclaim_after_fork_parent(void)
{
	if (urcu_hooks)
		urcu_bp_after_fork_parent();
	pthread_mutex_unlock(&rq_lock);
}

void shmcfg__reclaim_after_fork_child(void)
{
	if (urcu_hooks)
		urcu_bp_after_fork_child();
	else
		rcu_unusable = true;
	/* the forking thread, the child's only one, holds it (prepare):
	 * unlocked, not re-initialised, so that ThreadSanitizer sees it free */
	pthread_mutex_unlock(&rq_lock);
	pthread_cond_init(&rq_cond, NULL);
	pthread_cond_init(&rq_done, NULL);
	rq_head = NULL; /* the parent's views: not ours to unpin */
	rq_pid = 0;
	rq_users = 0;
	rq_stop = false;
	rq_in_gp = 0;
}

