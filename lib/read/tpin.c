/* SPDX-License-Identifier: MIT */
/*
 * Sticky thread pins: what a snapshot costs when nothing changed is two
 * plain stores and a few loads, no locked instruction.
 *
 * A thread that takes snapshots of a read-write handle owns a thread entry
 * of the reader table (layout.h, TP_*): a pin word that only it writes,
 * with plain stores, and that it leaves on its generation after the last
 * release (sticky). Its fast path (tpin.h) is: count + 1, the revocation
 * word loaded, use the view; release, count - 1. A commit moves the thread
 * once, by a re-pin (reclaim.c: tpin_repin), which is the process pins'
 * Dekker: an exchange, then the slot's stamp.
 *
 * The writer's side (reclaim.c, shmcfg__gen_pinned): an entry whose word
 * carries a generation's tag pins its slot, whatever its count, until the
 * writer revokes it: only when idle pins hold every slot it could take
 * does a writer store the revocation words and run
 * membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) (shmcfg__tpin_revoke), which
 * runs a full fence on every thread of the processes registered for it
 * (every process that owns a thread entry registered before its claim).
 * After it, the writer trusts the counts it reads: a thread whose count is
 * not visible by then loads its revocation word after the fence, sees it,
 * and backs off. So a thread pin costs the writer nothing while slots are
 * free, and ~µs when it must take one back. The protocol, with an owner
 * whose plain stores go through a store buffer, a thread it hands
 * snapshots to and a writer over three slots, is model-checked in
 * tests/model/tpin.pml.
 *
 * Any thread may release a snapshot: another thread than the owner adds to
 * TP_FOREIGN (atomically); the entry holds its count minus that. A close
 * (shmcfg__tpin_close) sets each pin's `closing`, runs the membarrier and
 * takes the step of every pin that holds nothing; a release that then
 * finds `closing` takes its pin's step when it holds nothing more (a token
 * decides who, once). The pins themselves are never freed: a release that
 * stored its count may find `closing` after the close it let end has
 * unmapped the segment, so it touches nothing but its pin then; a closed
 * handle's pins go to a free list.
 *
 * A thread that exits leaves its pins unpinned (tag 0) if they hold
 * nothing and to any other thread of the process otherwise (owner NULL):
 * the next thread that needs a pin on that handle adopts one. The entries
 * go back to the table when the handle closes. Processes are reaped as
 * before: a thread entry is held by its process's OFD lock.
 */
#include "internal.h"
#include "tpin.h"

#include <errno.h>
#include <linux/membarrier.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#define self ((const void *)&shmcfg__tls_pin) /* names the calling thread (base/error.c defines it) */
#define TP_STATE ((uintptr_t)(SHMCFG__TP_BUSY | SHMCFG__TP_LIB))

/* the process's pins: in use (of open handles), and free; the membarrier
 * registration (0 not tried, 1 registered, -1 unavailable) */
static pthread_mutex_t tp_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tpin *tp_used, *tp_free;
static int mb_state;
static pthread_key_t tp_key;
static pthread_once_t tp_key_once = PTHREAD_ONCE_INIT;

/* Where a free pin's words point: a release that comes late reads here. */
static uint64_t no_words[4];

static int membarrier(int cmd)
{
	return (int)syscall(__NR_membarrier, cmd, 0, 0);
}

/* A thread exits: its pins that hold nothing pin nothing more; all of them
 * go to whichever thread of the process needs one next. */
static void thread_exit(void *unused)
{
	(void)unused;
	pthread_mutex_lock(&tp_lock);
	for (struct tpin *tp = tp_used; tp; tp = tp->next) {
		if (__atomic_load_n(&tp->owner, __ATOMIC_RELAXED) != self)
			continue;
		uint64_t w = __atomic_load_n(&tp->pub.w[TP_WORD], __ATOMIC_RELAXED);
		if (!tp_held(w, __atomic_load_n(&tp->pub.w[TP_FOREIGN], __ATOMIC_ACQUIRE))) {
			/* release: as a release's store (shmcfg/read.h) */
			__atomic_store_n(&tp->pub.w[TP_WORD], w & PIN_COUNT_MASK, __ATOMIC_RELEASE); /* tag 0 */
			tp->pub.cur_ptr = NULL;
		}
		__atomic_store_n(&tp->owner, NULL, __ATOMIC_RELAXED); /* tp_lock orders the rest */
	}
	for (struct tpin *tp = tp_free; tp; tp = tp->next)
		if (tp->owner == self)
			tp->owner = NULL;
	/* a later key destructor's snapshot adopts a pin as any thread does */
	shmcfg__tls_pin = shmcfg__no_tp;
	pthread_mutex_unlock(&tp_lock);
}

static void key_make(void)
{
	if (pthread_key_create(&tp_key, thread_exit))
		tp_key = (pthread_key_t)-1;
}

/* Under tp_lock: whether threads may pin (SHMCFG_THREAD_PINS=0 says no:
 * a seccomp profile without membarrier, a test of the process's pins),
 * the process registered for the writers' membarrier once. */
static bool registered(void)
{
	const char *e = getenv("SHMCFG_THREAD_PINS");
	if (e && e[0] == '0')
		return false;
	if (!mb_state)
		mb_state = membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) ? -1 : 1;
	return mb_state > 0;
}

/* A new pin on entry i of h, owned by the calling thread (under tp_lock). */
static struct tpin *tp_new(shmcfg *h, uint32_t i)
{
	/* a free pin last owned by this thread or by one that exited: a live
	 * thread's shmcfg__tls_pin may still point at its last one (read.h) */
	struct tpin **p = &tp_free, *tp;
	while (*p && (*p)->owner && (*p)->owner != self)
		p = &(*p)->next;
	if ((tp = *p))
		*p = tp->next;
	else if (!(tp = malloc(sizeof *tp))) /* not the seam's: kept for the process's life */
		return NULL;
	*tp = (struct tpin){.pub = {.w = reader_at(h, i)->pins}, .owner = self, .h = h, .entry = i, .next = tp_used};
	tp_used = tp;
	return tp;
}

/*
 * The calling thread's pin on h: one it owns, one a thread that exited
 * left, or a new entry claimed (reclaim.c caches it in shmcfg__tls_pin). NULL: none (the
 * process is not registered for membarrier, SHMCFG_THREAD_PINS=0, the
 * handle has 64 already, the table is full): the process's pins then.
 */
struct tpin *shmcfg__tpin_of(shmcfg *h)
{
	pthread_once(&tp_key_once, key_make);
	if (h->lock_fd < 0 || tp_key == (pthread_key_t)-1)
		return NULL;
	struct tpin *tp = NULL, *orphan = NULL;
	/* entry_lock around all: a reaper (under it) must find an entry ours
	 * from the moment it is claimed, and claims of h are one at a time */
	pthread_mutex_lock(&h->entry_lock);
	pthread_mutex_lock(&tp_lock);
	bool ok = registered();
	for (struct tpin *p = tp_used; ok && p && !tp; p = p->next)
		if (p->h == h) {
			const void *o = __atomic_load_n(&p->owner, __ATOMIC_RELAXED);
			if (o == self)
				tp = p;
			else if (!o && !orphan)
				orphan = p;
		}
	if (!tp && orphan)
		__atomic_store_n(&(tp = orphan)->owner, self, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&tp_lock);
	int i;
	if (ok && !tp && (i = shmcfg__thread_entry_claim(h)) >= 0) {
		pthread_mutex_lock(&tp_lock);
		tp = tp_new(h, (uint32_t)i);
		pthread_mutex_unlock(&tp_lock);
		if (!tp)
			shmcfg__thread_entry_release(h, (uint32_t)i);
	}
	pthread_mutex_unlock(&h->entry_lock);
	shmcfg__clear_err(); /* a full table is no error: the process's pins */
	if (tp)
		pthread_setspecific(tp_key, self); /* thread_exit runs at its exit */
	return tp;
}

/*
 * The writer (under the writer lock, choose_slot) found every slot it could
 * take pinned: revoke every thread pin of an older generation than cur_g,
 * then fence every registered reader. Whether the counts it reads from now
 * on are trustworthy (shmcfg__gen_pinned's `trust`), given whether they
 * were (`trusted`, an earlier round of this choice): the fence runs on the
 * first round, and again only if this round revoked a pin anew (a commit
 * that waits does not fence the host every millisecond). A writer that died
 * between its stores and its fence left revocations whose fence nobody ran:
 * this one's first round runs its own after them.
 */
bool shmcfg__tpin_revoke(shmcfg *h, uint64_t cur_g, bool trusted)
{
	unsigned n = 0, fresh = 0;
	uint32_t hwm = shmcfg__readers_hwm(h);
	for (uint32_t i = 0; i < hwm; i++) {
		struct reader_ent *e = reader_at(h, i);
		if (__atomic_load_n(&e->kind, __ATOMIC_RELAXED) != ENTRY_THREAD)
			continue;
		uint64_t tag = PIN_TAG(__atomic_load_n(&e->pins[TP_WORD], __ATOMIC_RELAXED));
		if (tag && tag != GEN_TAG(cur_g)) {
			n++;
			fresh += !(__atomic_fetch_or(&e->pins[TP_REVOKED], TP_BY_WRITER, __ATOMIC_SEQ_CST) & TP_BY_WRITER);
		}
	}
	shmcfg__fault("commit.revoked");
	if (!n || (trusted && !fresh))
		return trusted;
	if (membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) == 0)
		return true;
	if (!h->warned_membarrier) {
		h->warned_membarrier = true;
		shmcfg__log(SHMCFG_LOG_WARNING, "%s: membarrier(2) failed (%s): idle thread pins of readers keep their "
						"slots from this writer's commits", h->name, strerror(errno));
	}
	return false;
}

/*
 * The owner's pin takes one more snapshot of the generation it pins (the
 * inline path takes only the first): its count + 1, then the revocation
 * loaded, as shmcfg__tpin_count. One holding nothing (other threads
 * released what it held) gets new idle and busy words for the inline
 * paths. 1: counted; 0: not of the current generation, or revoked (a
 * re-pin); -1: it holds PIN_COUNT_LIMIT (the process's pins).
 */
int shmcfg__tpin_more(struct tpin *tp, const shmcfg *h)
{
	struct shmcfg__tpin *p = &tp->pub;
	const uint64_t *cp = __atomic_load_n(&h->view.current, __ATOMIC_RELAXED);
	if (cp != p->cur_ptr || __atomic_load_n(cp, __ATOMIC_RELAXED) != p->cur)
		return 0;
	uint64_t w = __atomic_load_n(&p->w[TP_WORD], __ATOMIC_RELAXED);
	/* acquire: the releases counted there read the view before */
	uint64_t f = __atomic_load_n(&p->w[TP_FOREIGN], __ATOMIC_ACQUIRE), held = tp_held(w, f);
	if (held >= PIN_COUNT_LIMIT)
		return -1;
	if (!held)
		shmcfg__tpin_set(tp, w, f);
	__atomic_store_n(&p->w[TP_WORD], tp_word(w, w + 1), __ATOMIC_RELAXED);
	__atomic_signal_fence(__ATOMIC_SEQ_CST); /* as shmcfg__tpin_count */
	if (__atomic_load_n(&p->w[TP_REVOKED], __ATOMIC_RELAXED)) {
		__atomic_store_n(&p->w[TP_WORD], w, __ATOMIC_RELAXED);
		return 0;
	}
	return 1;
}

/* The owner caches its pin for the inline paths (shmcfg__tls_pin), with the
 * state they start from: holding nothing, the one snapshot the inline
 * acquire would have counted, or anything else (the library's). */
void shmcfg__tpin_cache(struct tpin *tp)
{
	const struct shmcfg__tpin *p = &tp->pub;
	uint64_t w = __atomic_load_n(&p->w[TP_WORD], __ATOMIC_RELAXED);
	bool same = __atomic_load_n(&p->w[TP_FOREIGN], __ATOMIC_RELAXED) == p->foreign;
	shmcfg__tls_pin = (uintptr_t)tp | (same && w == p->idle ? 0 : same && w == p->busy ? SHMCFG__TP_BUSY : SHMCFG__TP_LIB);
}

/* The inline paths' words for a pin whose word is w, holding nothing
 * with f releases by other threads (the owner, the count its own). */
void shmcfg__tpin_set(struct tpin *tp, uint64_t w, uint64_t f)
{
	tp->pub.idle = w;
	tp->pub.busy = tp_word(w, w + 1);
	tp->pub.foreign = f;
}

/*
 * A release the inline path does not take: by another thread than the
 * owner (an atomic add to TP_FOREIGN), of a nested snapshot or after
 * another thread's release (the owner's count - 1), or of a pin that holds
 * nothing (released twice: logged, nothing changed). The handle whose
 * close step is the caller's, as shmcfg__tpin_closing.
 */
shmcfg *shmcfg__tpin_release_slow(struct tpin *tp)
{
	uint64_t *w = tp->pub.w;
	uint64_t word = __atomic_load_n(&w[TP_WORD], __ATOMIC_ACQUIRE);
	if (!tp_held(word, __atomic_load_n(&w[TP_FOREIGN], __ATOMIC_ACQUIRE))) {
		shmcfg__log(SHMCFG_LOG_WARNING, "%s: snapshot release: thread pin on entry %u counted no snapshot "
						"(released twice, or another process wrote this process's reader entry)",
			    tp->h->name, tp->entry);
		return NULL;
	}
	if (__atomic_load_n(&tp->owner, __ATOMIC_RELAXED) == self) {
		/* release: as the inline release's store */
		__atomic_store_n(&w[TP_WORD], tp_word(word, word - 1), __ATOMIC_RELEASE);
		if ((shmcfg__tls_pin & ~TP_STATE) == (uintptr_t)tp)
			shmcfg__tpin_cache(tp);
		__atomic_thread_fence(__ATOMIC_SEQ_CST); /* the close's flag after it: Dekker with tpin_close */
	} else
		/* seq_cst: our reads of the view happen before the owner's
		 * re-pin, which loads this (acquire), and the close's Dekker */
		__atomic_fetch_add(&w[TP_FOREIGN], 1, __ATOMIC_SEQ_CST);
	return __atomic_load_n(&tp->pub.closing, __ATOMIC_SEQ_CST) ? shmcfg__tpin_closing(tp) : NULL;
}

/*
 * A release found its pin's handle closing: take the pin's close step if
 * it now holds nothing and nobody took it. The token goes 1 -> 3 first, so
 * that the close (which takes 1 -> 2) cannot end while we read the
 * entry; a release that finds another checking waits for it (they are a
 * few loads apart), so that the last of two concurrent releases is not
 * left out. The handle, if the step is the caller's (reclaim.c's
 * close_step), else NULL.
 */
shmcfg *shmcfg__tpin_closing(struct tpin *tp)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST); /* our count's store before the loads below */
	for (;;) {
		unsigned one = 1;
		if (__atomic_compare_exchange_n(&tp->close_token, &one, 3, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			break;
		if (one != 3)
			return NULL; /* taken (2), or no close waits for it any more (0) */
		sched_yield();
	}
	bool last = !tp_held(__atomic_load_n(&tp->pub.w[TP_WORD], __ATOMIC_SEQ_CST),
			     __atomic_load_n(&tp->pub.w[TP_FOREIGN], __ATOMIC_SEQ_CST));
	shmcfg *h = tp->h;
	__atomic_store_n(&tp->close_token, last ? 2 : 1, __ATOMIC_RELEASE);
	return last ? h : NULL;
}

/*
 * Close (reclaim.c, view_close, whose own step keeps close_pending above 0
 * meanwhile): a step more for each of h's pins, counted and marked under
 * one hold of tp_lock; then the owners fenced (membarrier: Dekker with the
 * release's store and its load of `closing`, shmcfg/read.h), and the step
 * of each pin that holds nothing taken. How many steps this took; a pin
 * that holds a snapshot gives its step at its last release.
 */
unsigned shmcfg__tpin_close(shmcfg *h)
{
	unsigned steps = 0, n = 0;
	pthread_mutex_lock(&tp_lock);
	for (struct tpin *tp = tp_used; tp; tp = tp->next)
		n += tp->h == h;
	if (!n) {
		pthread_mutex_unlock(&tp_lock);
		return 0;
	}
	__atomic_add_fetch(&h->close_pending, n, __ATOMIC_RELAXED); /* before any mark: see view_close */
	for (struct tpin *tp = tp_used; tp; tp = tp->next)
		if (tp->h == h) {
			__atomic_store_n(&tp->close_token, 1, __ATOMIC_RELAXED);
			__atomic_store_n(&tp->pub.closing, 1, __ATOMIC_SEQ_CST);
		}
	if (membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED))
		/* registered, yet refused: wait for no release then; the
		 * handle stays until the process ends */
		shmcfg__log(SHMCFG_LOG_WARNING, "%s: close: membarrier failed: the handle is not freed", h->name);
	else
		for (struct tpin *tp = tp_used; tp; tp = tp->next) {
			unsigned one = 1;
			if (tp->h == h &&
			    !tp_held(__atomic_load_n(&tp->pub.w[TP_WORD], __ATOMIC_SEQ_CST),
				     __atomic_load_n(&tp->pub.w[TP_FOREIGN], __ATOMIC_SEQ_CST)) &&
			    __atomic_compare_exchange_n(&tp->close_token, &one, 2, false, __ATOMIC_ACQ_REL,
							__ATOMIC_RELAXED))
				steps++;
		}
	pthread_mutex_unlock(&tp_lock);
	return steps;
}

/* Whether a pin of h holds a snapshot now (fork.c's prepare, which holds
 * tp_lock: shmcfg__tpin_fork_prepare). */
bool shmcfg__tpin_held(const shmcfg *h)
{
	bool held = false;
	for (struct tpin *tp = tp_used; tp && !held; tp = tp->next)
		held = tp->h == h && tp_held(__atomic_load_n(&tp->pub.w[TP_WORD], __ATOMIC_SEQ_CST),
					     __atomic_load_n(&tp->pub.w[TP_FOREIGN], __ATOMIC_SEQ_CST));
	return held;
}

/*
 * The end of h: its pins to the free list, their entries back to the table
 * (a forked child's are its parent's: only forgotten). Under entry_lock,
 * then tp_lock, as shmcfg__tpin_of. A release that comes late (tpin.h)
 * finds `closing` 0 or its token not 1, and the words it may read in
 * no_words.
 */
void shmcfg__tpin_destroy(shmcfg *h)
{
	bool owner = h->pid == getpid();
	pthread_mutex_lock(&h->entry_lock);
	pthread_mutex_lock(&tp_lock);
	for (struct tpin **p = &tp_used; *p;) {
		struct tpin *tp = *p;
		if (tp->h != h) {
			p = &tp->next;
			continue;
		}
		*p = tp->next;
		if (owner)
			shmcfg__thread_entry_release(h, tp->entry);
		__atomic_store_n(&tp->close_token, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&tp->pub.closing, 0, __ATOMIC_RELAXED);
		tp->pub.w = no_words;
		tp->pub.cur_ptr = NULL;
		tp->h = NULL;
		tp->next = tp_free; /* its owner stays: tp_new */
		tp_free = tp;
	}
	pthread_mutex_unlock(&tp_lock);
	pthread_mutex_unlock(&h->entry_lock);
}

/*
 * fork.c's prepare, after it set shmcfg__forking: the pins' list is held
 * across fork(), each pin of the process is revoked (TP_BY_FORK) and the
 * threads fenced, so that the counts prepare reads next are theirs, or
 * they see the revocation (shmcfg__tpin_count) and wait for the fork's end
 * in the library (reclaim.c), as the process's pins wait on the flag.
 */
void shmcfg__tpin_fork_prepare(void)
{
	pthread_mutex_lock(&tp_lock);
	if (mb_state <= 0 || !tp_used)
		return;
	for (struct tpin *tp = tp_used; tp; tp = tp->next)
		__atomic_fetch_or(&tp->pub.w[TP_REVOKED], TP_BY_FORK, __ATOMIC_SEQ_CST);
	(void)membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED);
}

/* The parent: the fork's revocations end. */
void shmcfg__tpin_fork_parent(void)
{
	for (struct tpin *tp = tp_used; tp; tp = tp->next)
		__atomic_fetch_and(&tp->pub.w[TP_REVOKED], ~(uint64_t)TP_BY_FORK, __ATOMIC_SEQ_CST);
	pthread_mutex_unlock(&tp_lock);
}

/* The child: the pins are the parent's (the entries are its too): no
 * thread of the child owns one, and a release of an inherited snapshot
 * goes to the library, which leaves it; the registration is the
 * parent's: a child registers anew. */
void shmcfg__tpin_fork_child(void)
{
	for (struct tpin *tp = tp_used; tp; tp = tp->next) {
		tp->owner = NULL;
		tp->pub.cur_ptr = NULL;
		tp->pub.w = no_words; /* the entry may be another process's by the child's next fork */
	}
	shmcfg__tls_pin = shmcfg__no_tp;
	mb_state = 0;
	pthread_mutex_unlock(&tp_lock);
}
