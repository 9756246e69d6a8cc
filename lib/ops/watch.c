/* SPDX-License-Identifier: MIT */
/*
 * Waiting for commits and asking what they changed: the futex wait (bounded,
 * so that a stolen wake-up costs little), the commit log and the comparison
 * of two generations.
 */
#include "internal.h"
#include "seqlock.h"
#include "replace.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/*
 * The waiter counts itself in `waiters`, then loads the futex word, then
 * `current`; a commit stores `current` (release), bumps the word, then
 * loads `waiters` and calls FUTEX_WAKE only if it is not 0 (seq_cst;
 * publish.c, wake()). So either the commit sees the waiter counted and
 * wakes it, or the waiter reads the bumped word (and so sees the new
 * generation, stored before the bump), or FUTEX_WAIT returns at once on
 * the changed word: no wakeup is lost to a commit (doc/design.md,
 * "Waiting"). A handle that cannot count itself (a read-only one whose
 * process may not write the object) relies on commits that always wake
 * such a segment (wake_always), else polls.
 *
 * Anyone who can map the segment can also issue futex operations on the
 * word (FUTEX_CMP_REQUEUE moves our waiters to a futex nobody wakes): so no
 * single FUTEX_WAIT lasts longer than WAIT_SLICE_MS, after which the
 * generation and the retired state are checked again.
 */
#define WAIT_SLICE_MS 100
#define UNCOUNTED_SLICE_NS 2000000ull /* a waiter that no commit wakes polls */

static int wait_counted(const shmcfg *h, uint64_t after, uint64_t deadline, bool counted, uint64_t *gen_ret);

/*
 * A read-only handle's count of waiters: the header's, through a writable
 * mapping of the header page made for this wait only, if the process may
 * open the object for writing now (through /proc/self/fd: the same inode,
 * whatever its name has become). Never kept: a process that attached
 * read-only while it could write (root, the owner) and then dropped its
 * privileges must not keep write access to the segment's header (`current`,
 * the writer state) in a mapping it never asked for. NULL if it cannot.
 */
static uint32_t *count_map(const shmcfg *h, void **map)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/self/fd/%d", h->fd);
	int fd = open(path, O_RDWR | O_CLOEXEC | O_NONBLOCK); /* the magic link: no O_NOFOLLOW */
	struct stat st, st0;
	*map = NULL;
	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) == 0 && fstat(h->fd, &st0) == 0 && st.st_ino == st0.st_ino && st.st_dev == st0.st_dev) {
		void *p = shmcfg__mmap(NULL, SEG_HEADER_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (p != MAP_FAILED)
			*map = p;
	}
	close(fd);
	return *map ? &((struct seg_header *)*map)->waiters : NULL;
}

static int wait_one(const shmcfg *h, uint64_t after, int timeout_ms, uint64_t deadline, uint64_t *gen_ret);

int shmcfg_wait(const shmcfg *h, uint64_t after, int timeout_ms, uint64_t *gen_ret)
{
	SHMCFG_API_ENTRY;
	assert_return(h, -EINVAL);
	uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : now_ns(CLOCK_MONOTONIC) + (uint64_t)timeout_ms * 1000000ull;
	for (;;) {
		const shmcfg *live = h;
		SHMCFG_FOLLOW(live); /* replaced by another schema: says so */
		int r = wait_one(live, after, timeout_ms, deadline, gen_ret);
		/* replaced while we waited: wait on its successor (generations go
		 * on across incarnations, so `after` still means what it meant) */
		if (r != SHMCFG_E_RETIRED || shmcfg__live(h) == live)
			return r;
		shmcfg__clear_err();
	}
}

static int wait_one(const shmcfg *h, uint64_t after, int timeout_ms, uint64_t deadline, uint64_t *gen_ret)
{
	/* A wait that will not sleep (passed already, or no time) counts nowhere. */
	if (cur_gen(__atomic_load_n(&h->hdr->current, __ATOMIC_ACQUIRE)) > after || timeout_ms == 0)
		return wait_counted(h, after, deadline, false, gen_ret);
	/* Counted before the loads below (seq_cst), so that a commit either sees
	 * us counted and wakes, or published before we load (publish.c, wake()).
	 * A handle that cannot count itself relies on commits that wake always,
	 * or else waits in short slices. */
	void *map = NULL;
	uint32_t *waiters = h->waiters ? h->waiters : h->rdonly ? count_map(h, &map) : NULL;
	if (waiters)
		__atomic_fetch_add(waiters, 1, __ATOMIC_SEQ_CST);
	int r = wait_counted(h, after, deadline, waiters != NULL, gen_ret);
	if (waiters)
		__atomic_fetch_sub(waiters, 1, __ATOMIC_RELEASE);
	if (map)
		munmap(map, SEG_HEADER_BYTES);
	return r;
}

static int wait_counted(const shmcfg *h, uint64_t after, uint64_t deadline, bool counted, uint64_t *gen_ret)
{
	uint64_t slice_ns = counted || __atomic_load_n(&h->wake_always, __ATOMIC_RELAXED)
				    ? WAIT_SLICE_MS * 1000000ull : UNCOUNTED_SLICE_NS;
	for (;;) {
		uint32_t f = __atomic_load_n(&h->hdr->futex, __ATOMIC_SEQ_CST);
		uint64_t g = cur_gen(__atomic_load_n(&h->hdr->current, __ATOMIC_SEQ_CST));
		if (gen_ret)
			*gen_ret = g;
		if (g > after)
			return 0;
		if (shmcfg_retired(h)) /* a replaced one whose successor could be followed was */
			return shmcfg__err(SHMCFG_E_RETIRED,
					   __atomic_load_n(&h->hdr->retired, __ATOMIC_ACQUIRE) == RETIRED_REPLACED
						   ? "%s: segment was replaced, and its successor cannot be followed yet; "
						     "attach again"
						   : "%s: segment was removed; attach again",
					   h->name);
		uint64_t now = now_ns(CLOCK_MONOTONIC);
		if (now >= deadline)
			return -ETIMEDOUT;
		uint64_t left = deadline - now;
		if (left > slice_ns)
			left = slice_ns;
		struct timespec ts = {(time_t)(left / 1000000000ull), (long)(left % 1000000000ull)};
		/* a shared futex: no FUTEX_PRIVATE_FLAG, the word is in shared memory */
		long r = syscall(SYS_futex, &h->hdr->futex, FUTEX_WAIT, f, &ts, NULL, 0);
		if (r < 0 && errno == EINTR)
			return -EINTR;
	}
}

static int commit_info(const shmcfg *h, uint64_t gen, shmcfg_commit *ret)
{
	assert_return_as("shmcfg_commit_info", h && ret, -EINVAL);
	const shmcfg *h0 = h;
	SHMCFG_FOLLOW(h);
	bool mapped = h != h0 && h->root_map; /* ids of the caller's schema (follow.c) */
	/* a record beyond the current generation belongs to a writer that died
	 * before publishing */
	if (gen == 0 || gen > shmcfg_generation(h))
		return -ENOENT;
	const struct log_ent *e = log_at(h, gen);
	for (int i = 0; i < 100; i++) {
		if (__atomic_load_n(&e->gen, __ATOMIC_ACQUIRE) != gen)
			return -ENOENT;
		struct log_ent copy;
		memcpy(&copy, e, sizeof copy);
		if (!seq_valid(&e->gen, gen)) /* (B), over the record */
			continue;
		ret->generation = gen;
		ret->time_ns = copy.time_ns;
		ret->pid = copy.pid;
		ret->uid = copy.uid;
		ret->nchanged = copy.nchanged;
		ret->cluster_rev = copy.cluster_rev;
		memcpy(ret->who, copy.who, sizeof ret->who);
		ret->who[sizeof ret->who - 1] = 0; /* the segment's bytes: anyone with write access wrote them */
		shmcfg__printable(ret->who);
		ret->nids = 0;
		for (uint32_t k = 0; k < copy.nids && k < SHMCFG_LOG_IDS; k++) {
			shmcfg_opt id = copy.ids[k];
			/* one the caller's schema lacks is left out: nids < nchanged */
			if (id < h->lay.nopts && (!mapped || shmcfg__unmap_opt(h0, h, &id)))
				ret->ids[ret->nids++] = id;
		}
		return 0;
	}
	return -ENOENT;
}

/* shmcfg_changes on a handle followed into another schema: the live
 * one's, as options of the caller's schema (changed[] has its count); an
 * option the live schema lacks counts as changed. */
static int changes_mapped(const shmcfg *h0, const shmcfg *h, uint64_t from, uint64_t to, bool *changed)
{
	bool *live = shmcfg__calloc(h->lay.nopts + 1, sizeof *live);
	if (!live)
		return shmcfg__nomem();
	int r = shmcfg_changes(h, from, to, live);
	for (shmcfg_opt i = 0; r >= 0 && i < h0->lay.nopts; i++) {
		shmcfg_opt j = i;
		changed[i] = shmcfg__map_opt(h0, h, &j) ? true : live[j];
	}
	shmcfg__free(live);
	shmcfg__clear_err();
	if (r < 0)
		return r;
	r = 0;
	for (shmcfg_opt i = 0; i < h0->lay.nopts; i++)
		r += changed[i];
	return r;
}

int shmcfg_changes(const shmcfg *h, uint64_t from, uint64_t to, bool *changed)
{
	SHMCFG_API_ENTRY;
	assert_return(h && changed && from < to, -EINVAL);
	const shmcfg *h0 = h;
	SHMCFG_FOLLOW(h);
	if (__builtin_expect(h != h0 && h->root_map, 0))
		return changes_mapped(h0, h, from, to, changed);
	memset(changed, 0, h->lay.nopts * sizeof *changed);
	/* every commit in between must still be in the log with its full list */
	for (uint64_t g = from + 1; g <= to; g++) {
		shmcfg_commit c;
		if (shmcfg_commit_info(h, g, &c) || c.nids < c.nchanged)
			goto compare;
		for (uint32_t k = 0; k < c.nids; k++)
			changed[c.ids[k]] = true;
	}
	goto count;
compare : {
	/* fall back to comparing the two generations, if both are still in slots */
	bool got_from = false, got_to = false;
	uint64_t bytes = h->lay.slot_size + h->lay.heap_size, ta, tb;
	char *ca = shmcfg__malloc(bytes), *cb = shmcfg__malloc(bytes);
	int r = -ENOENT;
	if (!ca || !cb) { /* the generations may well be known: we cannot look */
		shmcfg__free(ca);
		shmcfg__free(cb);
		return shmcfg__nomem();
	}
	for (uint32_t s = 0; s < h->lay.nslots; s++) {
		uint64_t g = __atomic_load_n(&slot_at(h, s)->gen, __ATOMIC_ACQUIRE);
		if (g == from && shmcfg__seq_copy(h, g << SHMCFG__SLOT_BITS | s, ca, ca + h->lay.slot_size, &ta))
			got_from = true;
		if (g == to && shmcfg__seq_copy(h, g << SHMCFG__SLOT_BITS | s, cb, cb + h->lay.slot_size, &tb))
			got_to = true;
	}
	if (got_from && got_to) {
		for (uint32_t i = 0; i < h->lay.nopts; i++)
			changed[i] = !shmcfg__cells_equal(h, slot_cells(h, ca) + i, ca + h->lay.slot_size, ta,
							  slot_cells(h, cb) + i, cb + h->lay.slot_size, tb);
		r = 0;
	}
	shmcfg__free(ca);
	shmcfg__free(cb);
	if (r)
		return shmcfg__err(r, "%s: generations %llu..%llu are no longer known", h->name,
				   (unsigned long long)from, (unsigned long long)to);
}
count : {
	int n = 0;
	for (uint32_t i = 0; i < h->lay.nopts; i++)
		n += changed[i];
	return n;
}
}

/* The caller's struct at its size (lib/base/sized.c); the name of releases
 * before 0.7, whose struct was this one. */
int shmcfg_commit_info_sized(const shmcfg *h, uint64_t gen, shmcfg_commit *ret, size_t ret_size)
{
	SHMCFG_API_ENTRY;
	shmcfg_commit full;
	int r = ret ? shmcfg__sized_out(ret_size, sizeof full, "shmcfg_commit") : 0;
	if (!r && !(r = commit_info(h, gen, ret ? &full : NULL)))
		shmcfg__sized_copy(ret, ret_size, &full, sizeof full);
	return r;
}

int (shmcfg_commit_info)(const shmcfg *h, uint64_t gen, shmcfg_commit *ret)
{
	SHMCFG_API_ENTRY;
	return shmcfg_commit_info_sized(h, gen, ret, sizeof *ret);
}
