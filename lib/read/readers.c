/* SPDX-License-Identifier: MIT */
/*
 * The reader table and the locks.
 *
 * Liveness does not rest on pids: entry i belongs to whoever holds the OFD
 * write lock on byte LOCK_ENTRY_BYTE(i) of the segment's lock object (which
 * only users who may write the segment can open: segment.c). An entry is
 * claimed by a handle's first pinned snapshot or first commit (the writer
 * lock names its owner by its entry: wlock.c), not at attach: plain readers
 * need none, a handle that finds the table full copies its snapshots instead
 * (reclaim.c) and holds byte 0 for its commits. The kernel drops an OFD
 * lock when the last descriptor of its open file description closes, which
 * happens when the owner exits or is killed, in whatever pid namespace it
 * lives. So a claim is a non-blocking lock attempt: if it succeeds the entry
 * is free or its owner is dead, and its old pins can be cleared. The pid and
 * start time are only recorded for display.
 *
 * The writer lock (wlock.c) names its owner by the owner's entry, whose OFD
 * lock tells whether it lives, for the same reason: the kernel drops it when
 * a writer dies, across pid namespaces, where a robust mutex would need
 * EOWNERDEAD handling and misreads tids from other namespaces. A claim frees
 * a writer lock that the entry's dead previous owner held.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static int ofd_op(int fd, int cmd, short type, off_t byte, struct flock *out)
{
	struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = byte, .l_len = 1};
	int r = fcntl(fd, cmd, &fl);
	if (out)
		*out = fl;
	return r < 0 ? -errno : 0;
}

/* Take an OFD lock; timeout_ms 0 tries once, -1 waits forever.
 * Returns 0, -EAGAIN (held elsewhere past the timeout) or another -errno. */
int shmcfg__ofd_lock(int fd, off_t byte, bool write, int timeout_ms)
{
	short type = write ? F_WRLCK : F_RDLCK;
	if (timeout_ms < 0) {
		int r;
		while ((r = ofd_op(fd, F_OFD_SETLKW, type, byte, NULL)) == -EINTR)
			;
		return r;
	}
	uint64_t deadline = now_ns(CLOCK_MONOTONIC) + (uint64_t)timeout_ms * 1000000ull;
	useconds_t nap = 50;
	for (;;) {
		int r = ofd_op(fd, F_OFD_SETLK, type, byte, NULL);
		if (r != -EAGAIN && r != -EACCES)
			return r;
		if (now_ns(CLOCK_MONOTONIC) >= deadline)
			return -EAGAIN;
		usleep(nap);
		if (nap < 5000)
			nap *= 2;
	}
}

void shmcfg__ofd_unlock(int fd, off_t byte)
{
	(void)ofd_op(fd, F_OFD_SETLK, F_UNLCK, byte, NULL);
}

/* Whether another open file description holds a lock on byte: 1, 0, -errno. */
int shmcfg__ofd_held(int fd, off_t byte)
{
	struct flock fl;
	int r = ofd_op(fd, F_OFD_GETLK, F_WRLCK, byte, &fl);
	return r < 0 ? r : fl.l_type != F_UNLCK;
}

/*
 * The high-water mark of claimed entries: scans (the writer's pin check,
 * reaping, listing) stop there, so a big table costs only what was used.
 * A claimer raises it (seq_cst) before it stores any pin; a writer loads it
 * (seq_cst) after its busy mark: if the writer misses the raise, the raise,
 * and so the claimer's later stamp load, comes after the busy mark in the
 * total order, and the claimer sees the mark (Dekker, reclaim.c).
 */
uint32_t shmcfg__readers_hwm(const shmcfg *h)
{
	uint32_t n = __atomic_load_n(&h->hdr->readers_hwm, __ATOMIC_SEQ_CST);
	return n < h->lay.nreaders ? n : h->lay.nreaders; /* hostile values stay in the table */
}



static void entry_clear(struct reader_ent *e)
{
	__atomic_store_n(&e->kind, ENTRY_PROCESS, __ATOMIC_RELAXED);
	for (unsigned k = 0; k < SEG_PINS; k++)
		__atomic_store_n(&e->pins[k], 0, __ATOMIC_RELEASE);
	e->pid = 0;
	e->start_time = 0;
	e->attach_ns = 0;
}

static bool entry_used(const shmcfg *h, uint32_t i);

/* Whether entry i is this handle's, whose byte its own lock attempt would
 * take as a dead one's (the threads share the open file description):
 * its process entry, or one of its threads' (under entry_lock). */
static bool entry_ours(const shmcfg *h, uint32_t i)
{
	for (unsigned k = 0; k < h->n_tp_entry; k++)
		if (h->tp_entry[k] == i)
			return true;
	return (int)i == h->reader;
}

/* Whether entry i is held by a live process (someone else's OFD lock, or
 * ours: our own lock test finds no conflict). Without the lock object
 * (read-only handles) nobody can tell: alive. */
bool shmcfg__entry_alive(const shmcfg *h, uint32_t i)
{
	pthread_mutex_lock((pthread_mutex_t *)&h->entry_lock);
	bool ours = entry_ours(h, i);
	pthread_mutex_unlock((pthread_mutex_t *)&h->entry_lock);
	/* cannot tell: assume alive, never reap wrongly */
	return ours || h->lock_fd < 0 || shmcfg__ofd_held(h->lock_fd, LOCK_ENTRY_BYTE(i)) != 0;
}

/* Wake the writers that sleep on the writer lock's word (wlock.c). */
void shmcfg__wlock_wake(shmcfg *h)
{
	syscall(SYS_futex, &h->lock_map->writer, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/*
 * We just took entry i's byte (a claim): its previous owner is gone, and a
 * writer lock it held with it (the word names i + 1: wlock.c) is free now;
 * its waiters could never tell, as they find the byte held, by us.
 */
static void wlock_entry_taken(shmcfg *h, uint32_t i)
{
	if (!h->lock_map)
		return;
	uint32_t w = __atomic_load_n(&h->lock_map->writer, __ATOMIC_RELAXED);
	/* release: hands on the dead owner's state as wlock.c's drop does */
	if (WLOCK_OWNER(w) == i + 1 &&
	    __atomic_compare_exchange_n(&h->lock_map->writer, &w, 0, false, __ATOMIC_RELEASE, __ATOMIC_RELAXED) &&
	    (w & WLOCK_WAITERS))
		shmcfg__wlock_wake(h);
}

/* Try to take entry i, as a process's (the handle's pins) or a thread's
 * (tpin.c): 1 if ours now, 0 if held by a live process. */
static int try_claim(shmcfg *h, uint32_t i, uint32_t kind)
{
	int r = shmcfg__ofd_lock(h->lock_fd, LOCK_ENTRY_BYTE(i), true, 0);
	if (r == -EAGAIN)
		return 0;
	if (r < 0)
		return shmcfg__err(r, "%s: cannot lock reader entry %u: %s", h->name, i, strerror(-r));
	/* ours now: whatever it held belonged to a dead owner */
	struct reader_ent *e = reader_at(h, i);
	wlock_entry_taken(h, i);
	shmcfg__fault("claim.locked");
	entry_clear(e);
	e->pid = (int32_t)getpid();
	e->start_time = shmcfg__proc_start_time(getpid());
	e->attach_ns = now_ns(CLOCK_REALTIME);
	if (kind == ENTRY_THREAD) {
		/* before the raise below: a writer that sees the entry sees it as a thread's */
		__atomic_store_n(&e->pins[TP_MARK], 1, __ATOMIC_RELAXED);
		__atomic_store_n(&e->kind, ENTRY_THREAD, __ATOMIC_RELAXED);
	}
	uint32_t hwm = __atomic_load_n(&h->hdr->readers_hwm, __ATOMIC_SEQ_CST);
	while (hwm <= i && !__atomic_compare_exchange_n(&h->hdr->readers_hwm, &hwm, i + 1, false,
							__ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
		;
	if (kind == ENTRY_THREAD)
		return 1;
	h->pins = e->pins; /* read by snapshots only after a view is published (reclaim.c) */
	/* release: pairs with the acquire load in shmcfg_snapshot_acquire() */
	__atomic_store_n(&h->reader, (int)i, __ATOMIC_RELEASE);
	return 1;
}

/*
 * Claim an entry (reclaim.c, first snapshot; tpin.c, a thread's first):
 * unused entries below the high-water mark first, then those of dead
 * owners, then new ones above the mark. Its index, or SHMCFG_E_READERS when
 * every entry is held by a live process.
 */
static int reader_claim(shmcfg *h, uint32_t kind)
{
	uint32_t hwm = shmcfg__readers_hwm(h);
	for (int pass = 0; pass < 2; pass++)
		for (uint32_t i = 0; i < hwm; i++) {
			if (entry_used(h, i) != (pass == 1) || entry_ours(h, i))
				continue;
			int r = try_claim(h, i, kind);
			if (r)
				return r < 0 ? r : (int)i;
		}
	for (uint32_t i = hwm; i < h->lay.nreaders; i++) {
		int r = try_claim(h, i, kind);
		if (r)
			return r < 0 ? r : (int)i;
	}
	return shmcfg__err(SHMCFG_E_READERS, "%s: all %u reader entries are held by live processes",
			   h->name, h->lay.nreaders);
}

/*
 * The threads of a handle share its lock object's open file description,
 * and so its OFD locks: a lock attempt on an entry that another thread of
 * the handle is claiming succeeds, as on a dead one. entry_lock keeps claims
 * and reaping of one handle apart, or a reaper would clear the entry being
 * claimed and unlock it under its new owner (whose pins then protect
 * nothing: any other process may reap or claim the entry).
 */
int shmcfg__reader_claim(shmcfg *h)
{
	if (h->lock_fd < 0)
		return shmcfg__err(SHMCFG_E_READERS, "%s: no lock object: no reader entry", h->name);
	pthread_mutex_lock(&h->entry_lock);
	int r = reader_claim(h, ENTRY_PROCESS);
	pthread_mutex_unlock(&h->entry_lock);
	return r < 0 ? r : 0;
}

/* A thread's entry (tpin.c, under entry_lock): its index, or < 0. */
int shmcfg__thread_entry_claim(shmcfg *h)
{
	if (h->lock_fd < 0 || h->n_tp_entry == sizeof h->tp_entry / sizeof h->tp_entry[0])
		return SHMCFG_E_READERS;
	int i = reader_claim(h, ENTRY_THREAD);
	if (i >= 0)
		h->tp_entry[h->n_tp_entry++] = (uint32_t)i;
	return i;
}

/* Give back a thread's entry (tpin.c, under entry_lock). */
void shmcfg__thread_entry_release(shmcfg *h, uint32_t i)
{
	for (unsigned k = 0; k < h->n_tp_entry; k++)
		if (h->tp_entry[k] == i)
			h->tp_entry[k] = h->tp_entry[--h->n_tp_entry];
	entry_clear(reader_at(h, i));
	if (h->lock_fd >= 0)
		shmcfg__ofd_unlock(h->lock_fd, LOCK_ENTRY_BYTE(i));
}

void shmcfg__reader_release(shmcfg *h)
{
	if (h->reader < 0)
		return;
	pthread_mutex_lock(&h->entry_lock);
	entry_clear(reader_at(h, (uint32_t)h->reader));
	if (h->lock_fd >= 0)
		shmcfg__ofd_unlock(h->lock_fd, LOCK_ENTRY_BYTE((uint32_t)h->reader));
	h->reader = -1;
	pthread_mutex_unlock(&h->entry_lock);
}

static void fill_reader(const shmcfg *h, uint32_t i, shmcfg_reader *r)
{
	const struct reader_ent *e = reader_at(h, i);
	memset(r, 0, sizeof *r);
	r->index = i;
	r->pid = e->pid;
	r->start_time = e->start_time;
	bool thread = __atomic_load_n(&e->kind, __ATOMIC_RELAXED) == ENTRY_THREAD;
	for (unsigned k = 0; k < (thread ? 1 : SEG_PINS); k++)
		r->pins[k] = PIN_TAG(__atomic_load_n(&e->pins[k], __ATOMIC_ACQUIRE));
}

static bool entry_used(const shmcfg *h, uint32_t i)
{
	const struct reader_ent *e = reader_at(h, i);
	if (e->pid)
		return true;
	for (unsigned k = 0; k < SEG_PINS; k++)
		if (__atomic_load_n(&e->pins[k], __ATOMIC_RELAXED))
			return true;
	return false;
}

int shmcfg__reap(shmcfg *h, void (*fn)(const shmcfg_reader *, void *), void *ud)
{
	int n = 0;
	if (h->lock_fd < 0)
		return 0;
	uint32_t hwm = shmcfg__readers_hwm(h);
	for (uint32_t i = 0; i < hwm; i++) {
		/* our own entry (or one being claimed by another thread of this
		 * handle: entry_lock) would lock as a dead one does */
		pthread_mutex_lock(&h->entry_lock);
		if (entry_ours(h, i) || !entry_used(h, i) ||
		    shmcfg__ofd_lock(h->lock_fd, LOCK_ENTRY_BYTE(i), true, 0) < 0) {
			pthread_mutex_unlock(&h->entry_lock);
			continue; /* alive (or being claimed right now) */
		}
		shmcfg_reader r;
		fill_reader(h, i, &r);
		shmcfg__fault("reap.locked");
		entry_clear(reader_at(h, i));
		shmcfg__fault("reap.cleared");
		shmcfg__ofd_unlock(h->lock_fd, LOCK_ENTRY_BYTE(i));
		pthread_mutex_unlock(&h->entry_lock);
		if (fn)
			fn(&r, ud);
		n++;
	}
	return n;
}

int shmcfg_gc(shmcfg *h, void (*fn)(const shmcfg_reader *r, void *userdata), void *userdata)
{
	SHMCFG_API_ENTRY;
	assert_return(h, -EINVAL);
	SHMCFG_FOLLOW(h);
	if (h->rdonly)
		return shmcfg__err(SHMCFG_E_READONLY, "%s: gc needs write access", h->name);
	return shmcfg__reap(h, fn, userdata);
}

int shmcfg_readers(const shmcfg *h, void (*fn)(const shmcfg_reader *r, void *userdata),
		   void *userdata)
{
	SHMCFG_API_ENTRY;
	assert_return(h, -EINVAL);
	SHMCFG_FOLLOW(h);
	int n = 0;
	uint32_t hwm = shmcfg__readers_hwm(h);
	for (uint32_t i = 0; i < hwm; i++) {
		if (!entry_used(h, i))
			continue;
		shmcfg_reader r;
		fill_reader(h, i, &r);
		/* a read-only handle has no lock object, and shmcfg__entry_alive() says
		 * "alive" for what it cannot tell (right for reaping, which it
		 * cannot do): a report to it asks the process table instead */
		r.alive = h->lock_fd >= 0 ? shmcfg__entry_alive(h, i)
					  : r.start_time && shmcfg__proc_start_time(r.pid) == r.start_time;
		if (fn)
			fn(&r, userdata);
		n++;
	}
	return n;
}

/* "pid 123 (gens 5 6), pid 456 (gen 7)": who holds snapshots, for the busy error. */
void shmcfg__pin_holders(const shmcfg *h, char *buf, size_t len)
{
	size_t used = 0;
	buf[0] = 0;
	uint32_t hwm = shmcfg__readers_hwm(h);
	for (uint32_t i = 0; i < hwm && used + 1 < len; i++) {
		const struct reader_ent *e = reader_at(h, i);
		char gens[96] = "";
		size_t gl = 0;
		bool thread = __atomic_load_n(&e->kind, __ATOMIC_RELAXED) == ENTRY_THREAD;
		for (unsigned k = 0; k < (thread ? 1 : SEG_PINS); k++) {
			uint64_t w = __atomic_load_n(&e->pins[k], __ATOMIC_RELAXED);
			uint64_t g = PIN_TAG(w);
			uint64_t n = thread ? tp_held(w, __atomic_load_n(&e->pins[TP_FOREIGN], __ATOMIC_RELAXED))
					    : PIN_COUNT(w);
			if (n && g && gl < sizeof gens) /* a pin held by no snapshot blocks nobody */
				gl += (size_t)snprintf(gens + gl, sizeof gens - gl, " %llu",
						       (unsigned long long)g);
		}
		if (!gl)
			continue;
		int w = snprintf(buf + used, len - used, "%spid %d (gen%s)", used ? ", " : "",
				 (int)e->pid, gens);
		if (w > 0)
			used += (size_t)w;
	}
	if (!used)
		snprintf(buf, len, "no process (slots are being rewritten)");
}
