/* SPDX-License-Identifier: MIT */
/*
 * The writer lock: a word in the lock object's page (struct lock_file,
 * `writer`), which only read-write handles can map (objects.c): a reader,
 * or anyone without write access, cannot touch it. Free, it is taken by one
 * compare-and-swap, no system call; taken, it is waited for on a futex.
 *
 * The word names its owner by a byte of the lock object on which the owner
 * holds an OFD lock for as long as it holds the word: its reader entry's
 * byte LOCK_ENTRY_BYTE(i) (held from the handle's claim to its close; the
 * word is i + 1), or, for a handle that could not claim an entry (every one
 * held by a live process), LOCK_WRITER_BYTE (WLOCK_BY_OFD), taken before the
 * word and dropped after it. The kernel drops an OFD lock when its owner
 * dies, in whatever pid namespace it lives, so:
 *
 *  - an owner is dead if a waiter can take its byte itself (non-blocking);
 *    while the waiter holds that byte, nobody else can become the owner the
 *    word names, so its compare-and-swap from the dead owner's word to its
 *    own cannot meet a new owner with the same word (no ABA);
 *  - a process that claims entry i holds byte i's lock: a word naming i is
 *    the entry's dead previous owner's, and the claim frees it
 *    (wlock_entry_taken), or waiters would find the byte held, by
 *    the new owner, for as long as it lives (readers.c, try_claim);
 *  - a waiter that holds LOCK_WRITER_BYTE itself and finds WLOCK_BY_OFD
 *    knows that owner gone: only the holder of that byte sets it.
 *
 * A dead owner never published its half-built slot, and left `wip` set: the
 * next writer sweeps (publish.c). A stopped owner keeps the lock: waiters
 * give up after the commit timeout (SHMCFG_E_LOCKED).
 *
 * Memory ordering: the acquire compare-and-swap that takes the word pairs
 * with the release exchange that drops it, so the writer state (`wip`, the
 * heap's counts and free lists, the ring head) one writer leaves is what the
 * next one reads. A word taken from a dead owner follows an OFD lock taken
 * after the kernel dropped the dead one's (the kernel's lock is a full
 * barrier, and the dead process stores nothing more). A waiter sets
 * WLOCK_WAITERS (compare-and-swap) before it sleeps on the word's value with
 * that bit: the owner's exchange to 0 comes either before it (the CAS
 * fails, the waiter looks again) or after, and then returns the bit and the
 * owner wakes the waiters. The futex sleeps at most WLOCK_SLICE_NS, because
 * a dead owner wakes nobody.
 */
#include "internal.h"

#include <errno.h>
#include <stddef.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define WLOCK_SPINS 100               /* looks at the word before the first sleep */
#define WLOCK_SLICE_NS 10000000ull   /* the longest sleep: a dead owner wakes nobody */

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/*
 * The word w names an owner: if it is gone, the word is ours (1). 0 if it
 * lives (or cannot be judged right now), a negative error if its byte cannot
 * be tried. `mine` carries the waiters' bit of w on: they still wait.
 */
static int take_from_dead(shmcfg *h, uint32_t w, uint32_t mine, bool by_ofd)
{
	uint32_t *word = &h->lock_map->writer;
	uint32_t owner = WLOCK_OWNER(w);
	mine |= w & WLOCK_WAITERS;
	off_t byte;
	if (owner == WLOCK_BY_OFD) {
		if (by_ofd) /* we hold its byte: its setter released it, or died */
			return __atomic_compare_exchange_n(word, &w, mine, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
		byte = LOCK_WRITER_BYTE;
	} else if (owner == 0 || owner > h->lay.nreaders || (int)owner - 1 == h->reader) {
		/* names no entry (a scribble), or ours while this handle, whose
		 * commits commit_lock serialises, holds no lock */
		return __atomic_compare_exchange_n(word, &w, mine, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
	} else {
		byte = LOCK_ENTRY_BYTE(owner - 1);
	}
	/* our threads share our OFD locks: an entry another thread of ours is
	 * claiming would lock as a dead one does (readers.c) */
	pthread_mutex_lock(&h->entry_lock);
	int r = shmcfg__ofd_lock(h->lock_fd, byte, true, 0);
	bool taken = false;
	if (r == 0) {
		shmcfg__fault("wlock.owner_dead");
		taken = __atomic_compare_exchange_n(word, &w, mine, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
		shmcfg__ofd_unlock(h->lock_fd, byte);
	}
	pthread_mutex_unlock(&h->entry_lock);
	return r == -EAGAIN ? 0 : r < 0 ? r : taken;
}

/* Take the word as `mine` before the deadline (0: commit_timeout_ms from
 * the first wait, so that an uncontended take reads no clock): 0, -EAGAIN
 * or -errno. */
static int wlock_take(shmcfg *h, uint32_t mine, bool by_ofd, uint64_t deadline)
{
	uint32_t *word = &h->lock_map->writer;
	uint32_t waited = 0; /* once we slept, others may sleep too: keep the bit */
	for (unsigned look = 0;; look++) {
		uint32_t w = 0;
		/* acquire: pairs with the release exchange in wlock_drop() */
		if (__atomic_compare_exchange_n(word, &w, mine | waited, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			return 0;
		if (w == 0)
			continue;
		if (look < WLOCK_SPINS) {
			cpu_relax();
			continue;
		}
		int r = take_from_dead(h, w, mine, by_ofd);
		if (r)
			return r < 0 ? r : 0;
		uint64_t now = now_ns(CLOCK_MONOTONIC);
		if (!deadline)
			deadline = commit_deadline(h, now);
		if (now >= deadline)
			return -EAGAIN;
		if (!(w & WLOCK_WAITERS) &&
		    !__atomic_compare_exchange_n(word, &w, w | WLOCK_WAITERS, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
			continue;
		uint64_t left = deadline - now < WLOCK_SLICE_NS ? deadline - now : WLOCK_SLICE_NS;
		struct timespec ts = {.tv_sec = (time_t)(left / 1000000000ull), .tv_nsec = (long)(left % 1000000000ull)};
		syscall(SYS_futex, word, FUTEX_WAIT, w | WLOCK_WAITERS, &ts, NULL, 0);
		waited = WLOCK_WAITERS;
	}
}

static void wlock_drop(shmcfg *h, uint32_t mine)
{
	/* release: pairs with the acquire compare-and-swap in wlock_take() */
	uint32_t w = __atomic_exchange_n(&h->lock_map->writer, 0, __ATOMIC_RELEASE);
	if (WLOCK_OWNER(w) != mine)
		shmcfg__log(SHMCFG_LOG_ERROR, "%s: the writer lock was taken from this process (it named owner %u)", h->name,
			    (unsigned)WLOCK_OWNER(w));
	if (w & WLOCK_WAITERS)
		shmcfg__wlock_wake(h);
}

/*
 * The writer lock, for a commit (and a replacement, cluster.c's revision
 * checks). The threads of a handle take commit_lock first: the word names
 * the handle, not the thread. A handle that has no reader entry claims one
 * (reclaim.c, as a first snapshot does); if the table is full it holds
 * LOCK_WRITER_BYTE while it waits for and holds the word.
 */
int shmcfg__lock_writer(shmcfg *h)
{
	/* a forked child has the parent's mapping, entry and (maybe locked)
	 * commit_lock: it would take the word as its parent, or wait forever.
	 * Every path that writes (commit, sync record, replacement) comes here. */
	if (shmcfg__self_pid != h->pid)
		return shmcfg__err(SHMCFG_E_FORKED, "%s: write in a child of the attaching process: attach again",
				   h->name);
	pthread_mutex_lock(&h->commit_lock);
	if (!h->lock_map) {
		pthread_mutex_unlock(&h->commit_lock);
		return shmcfg__err(SHMCFG_E_CORRUPT, "%s: no lock object mapped: cannot take the writer lock",
				   h->name);
	}
	if (__atomic_load_n(&h->reader, __ATOMIC_ACQUIRE) < 0)
		shmcfg__claim_entry(h);
	int reader = __atomic_load_n(&h->reader, __ATOMIC_ACQUIRE);
	bool by_ofd = reader < 0;
	uint32_t mine = by_ofd ? WLOCK_BY_OFD : (uint32_t)reader + 1;
	/* with the OFD byte, one timeout for both waits */
	uint64_t deadline = by_ofd ? commit_deadline(h, now_ns(CLOCK_MONOTONIC)) : 0;
	int r = by_ofd ? shmcfg__ofd_lock(h->lock_fd, LOCK_WRITER_BYTE, true, h->commit_timeout_ms) : 0;
	if (!r) {
		r = wlock_take(h, mine, by_ofd, deadline);
		if (r && by_ofd)
			shmcfg__ofd_unlock(h->lock_fd, LOCK_WRITER_BYTE);
	}
	if (r == -EAGAIN) {
		/* name the holder: the word's reader entry and its pid (for
		 * display: a stopped process, or one of another pid namespace) */
		uint32_t owner = WLOCK_OWNER(__atomic_load_n(&h->lock_map->writer, __ATOMIC_RELAXED));
		char who[96] = "";
		if (owner && owner != WLOCK_BY_OFD && owner <= h->lay.nreaders)
			snprintf(who, sizeof who, " (pid %d, reader entry %u)",
				 (int)__atomic_load_n(&reader_at(h, owner - 1)->pid, __ATOMIC_RELAXED), owner - 1);
		else if (owner == WLOCK_BY_OFD)
			snprintf(who, sizeof who, " (a process without a reader entry)");
		r = shmcfg__err(SHMCFG_E_LOCKED, "%s: another writer%s held the lock for %d ms", h->name, who,
				h->commit_timeout_ms);
	}
	else if (r)
		r = shmcfg__err(r, "%s: writer lock: %s", h->name, strerror(-r));
	if (r) {
		pthread_mutex_unlock(&h->commit_lock);
		return r;
	}
	h->wlock_mine = mine;
	return 0;
}

/* The lock word: through the mapping, or (a read-only handle) read from
 * the lock object it opened to test readers' locks; false: neither. */
static bool wlock_word(const shmcfg *h, uint32_t *w)
{
	if (h->lock_map) {
		/* acquire: pairs with the release exchange of wlock_drop(), as
		 * the wip load after it (see shmcfg__wlock_state) */
		*w = __atomic_load_n(&h->lock_map->writer, __ATOMIC_ACQUIRE);
		return true;
	}
	return h->lock_fd >= 0 && pread(h->lock_fd, w, sizeof *w, offsetof(struct lock_file, writer)) == (ssize_t)sizeof *w;
}

/* Whether the owner a word names lives, as a waiter judges it
 * (take_from_dead), without taking a byte: a word naming no entry is a
 * dead one's (a scribble); the table-full fallback's byte, if this handle
 * has no entry and one of its threads is in a commit, may be our own lock,
 * which our own test cannot see. */
static bool owner_alive(const shmcfg *h, uint32_t owner)
{
	if (owner == WLOCK_BY_OFD) {
		if (h->lock_map && __atomic_load_n(&h->reader, __ATOMIC_ACQUIRE) < 0) {
			pthread_mutex_t *m = (pthread_mutex_t *)&h->commit_lock;
			if (pthread_mutex_trylock(m) != 0)
				return true; /* a commit of ours: maybe ours, alive either way */
			pthread_mutex_unlock(m);
		}
		return shmcfg__ofd_held(h->lock_fd, LOCK_WRITER_BYTE) != 0;
	}
	return owner <= h->lay.nreaders && shmcfg__entry_alive(h, owner - 1);
}

/*
 * The writer lock as shmcfg_stat() shows it: free, held by a live owner
 * (its reader entry's recorded pid), or by a dead one (the next commit
 * takes it over), and `wip`, the generation a commit is building. Read
 * twice, word and wip, around the owner's test, until both reads agree: a
 * commit between them (taking or dropping the word, setting or clearing
 * wip) would pair one commit's word with another's wip, or a writer that
 * dropped the word and exited with a dead owner (a look never takes a
 * byte, so it cannot delay a writer). The table-full writers share one
 * word, so a handover between two of them (one drops the byte, the other
 * takes it) reads as that word with its byte free: a dead such owner is
 * confirmed three more times, 1 ms apart (a live waiter takes the byte
 * within microseconds of the drop that wakes it). A word that keeps moving
 * is live writers': the last owner seen holds it (none seen: free, and
 * nothing building). A handle that cannot
 * read the word (a user who may only read the segment) cannot tell.
 */
void shmcfg__wlock_state(const shmcfg *h, shmcfg_info *ret)
{
	ret->writer = SHMCFG_WRITER_UNKNOWN;
	ret->writer_pid = 0;
	ret->writer_entry = UINT32_MAX;
	ret->building = __atomic_load_n(&h->hdr->wip, __ATOMIC_RELAXED);
	uint32_t seen = 0; /* the last owner a sample saw */
	int32_t seen_pid = 0;
	for (int tries = 0, confirmed = 0; tries < 16; tries++) {
		uint32_t w, w2;
		if (!wlock_word(h, &w))
			return;
		uint64_t wip = __atomic_load_n(&h->hdr->wip, __ATOMIC_RELAXED);
		uint32_t owner = WLOCK_OWNER(w);
		bool alive = owner && owner_alive(h, owner);
		bool entry = owner && owner != WLOCK_BY_OFD && owner <= h->lay.nreaders;
		int32_t pid = entry ? __atomic_load_n(&reader_at(h, owner - 1)->pid, __ATOMIC_RELAXED) : 0;
		if (!wlock_word(h, &w2))
			return;
		ret->building = __atomic_load_n(&h->hdr->wip, __ATOMIC_RELAXED);
		if (owner)
			seen = owner, seen_pid = pid;
		if (w2 != w || ret->building != wip)
			continue;
		if (!alive && owner == WLOCK_BY_OFD && confirmed < 3) {
			confirmed++;
			tries--; /* the confirmations are not tries */
			nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
			continue;
		}
		ret->writer = !owner ? SHMCFG_WRITER_FREE : alive ? SHMCFG_WRITER_HELD : SHMCFG_WRITER_DEAD;
		ret->writer_entry = entry ? owner - 1 : UINT32_MAX;
		ret->writer_pid = pid;
		return;
	}
	/* no two reads agreed: writers took and dropped the word between
	 * them. The wip last read was one of theirs, in passing: a free word
	 * shows no half-built commit (only a dead writer leaves one; a
	 * fresh-debian run saw "free, building" 15 times in 40,000 looks) */
	ret->writer = seen ? SHMCFG_WRITER_HELD : SHMCFG_WRITER_FREE;
	if (!seen)
		ret->building = 0;
	bool entry = seen && seen != WLOCK_BY_OFD && seen <= h->lay.nreaders;
	ret->writer_entry = entry ? seen - 1 : UINT32_MAX;
	ret->writer_pid = entry ? seen_pid : 0;
}

void shmcfg__unlock_writer(shmcfg *h)
{
	wlock_drop(h, h->wlock_mine);
	if (h->wlock_mine == WLOCK_BY_OFD)
		shmcfg__ofd_unlock(h->lock_fd, LOCK_WRITER_BYTE);
	pthread_mutex_unlock(&h->commit_lock);
}
