/* SPDX-License-Identifier: MIT */
/*
 * The cluster agent's record in the segment (shmcfg_sync_set/get): where
 * shmcfg-sync gets its values from and how far it is, for shmctl and for
 * every process. The applied cluster revision itself lives in each slot's
 * header (publish.c, read.c), so that it belongs to a generation.
 *
 * The record is a seqlock of its own (struct seg_header's sync_seq): the
 * writer, holding the writer lock, makes the sequence odd, rewrites the
 * record, makes it even again; a reader copies the record between two equal
 * even loads of the sequence. Both sides copy word by word with relaxed
 * atomics, so the race on the words is no data race.
 *   writer: seq = odd (relaxed); fence release (sync-S1); words; seq = even
 *           (release, sync-S2)
 *   reader: s1 = seq (acquire, pairs with sync-S2); words; seq_valid: fence
 *           acquire (pairs with sync-S1), s2 = seq (relaxed); valid if
 *           s1 == s2 and even
 * A writer that dies mid-record leaves the sequence odd: readers report no
 * stable record until the next writer (under the lock) writes a whole one.
 */
#include "internal.h"
#include "seqlock.h"

#include <errno.h>
#include <sched.h>
#include <string.h>

#define SYNC_WORDS (sizeof(struct sync_rec) / sizeof(uint64_t))
_Static_assert(sizeof(struct sync_rec) % sizeof(uint64_t) == 0, "the record is copied in words");

/* A field of the caller's record into ours: read within the field, which
 * need not end in a NUL (truncated to ours, as the header says). */
static void copy_str(char *dst, size_t n, const char *src, size_t src_size)
{
	snprintf(dst, n, "%.*s", (int)strnlen(src, src_size), src);
}

static int sync_set(shmcfg *h, const shmcfg_sync_info *info)
{
	assert_return_as("shmcfg_sync_set", h && info, -EINVAL);
	SHMCFG_FOLLOW(h);
	if (h->rdonly)
		return shmcfg__err(SHMCFG_E_READONLY, "%s: attached read-only, cannot write", h->name);
	union {
		struct sync_rec r;
		uint64_t w[SYNC_WORDS];
	} u;
	memset(&u, 0, sizeof u);
	copy_str(u.r.endpoints, sizeof u.r.endpoints, info->endpoints, sizeof info->endpoints);
	copy_str(u.r.cluster, sizeof u.r.cluster, info->cluster, sizeof info->cluster);
	copy_str(u.r.host, sizeof u.r.host, info->host, sizeof info->host);
	copy_str(u.r.error, sizeof u.r.error, info->error, sizeof info->error);
	u.r.pid = info->pid;
	u.r.nrejected = info->nrejected;
	u.r.updated_ns = info->updated_ns;
	u.r.applied_rev = info->applied_rev;
	u.r.out_of_sync_ns = info->out_of_sync_ns;
	int r = shmcfg__lock_writer(h);
	if (r)
		return r;
	struct seg_header *hd = h->hdr;
	uint64_t seq = __atomic_load_n(&hd->sync_seq, __ATOMIC_RELAXED);
	__atomic_store_n(&hd->sync_seq, seq | 1, __ATOMIC_RELAXED); /* odd (even after a death: stays odd) */
	__atomic_thread_fence(__ATOMIC_RELEASE);                      /* (sync-S1) */
	uint64_t *dst = (uint64_t *)&hd->sync;
	for (size_t i = 0; i < SYNC_WORDS; i++)
		__atomic_store_n(&dst[i], u.w[i], __ATOMIC_RELAXED);
	__atomic_store_n(&hd->sync_seq, (seq | 1) + 1, __ATOMIC_RELEASE); /* (sync-S2) */
	shmcfg__unlock_writer(h);
	return 0;
}

static int sync_get(const shmcfg *h, shmcfg_sync_info *ret)
{
	assert_return_as("shmcfg_sync_get", h && ret, -EINVAL);
	SHMCFG_FOLLOW(h);
	const struct seg_header *hd = h->hdr;
	union {
		struct sync_rec r;
		uint64_t w[SYNC_WORDS];
	} u;
	for (int tries = 0;; tries++) {
		uint64_t s1 = __atomic_load_n(&hd->sync_seq, __ATOMIC_ACQUIRE); /* pairs with (sync-S2) */
		if (s1 == 0)
			return -ENOENT;
		const uint64_t *src = (const uint64_t *)&hd->sync;
		for (size_t i = 0; i < SYNC_WORDS; i++)
			u.w[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
		if (!(s1 & 1) && seq_valid(&hd->sync_seq, s1)) /* fence: pairs with (sync-S1) */
			break;
		if (tries >= SYNC_MAX_TRIES) /* a writer died mid-record, or writes without end */
			return shmcfg__err(-EAGAIN, "%s: the cluster agent's record is being rewritten", h->name);
		if (tries > SYNC_SPIN_TRIES)
			sched_yield();
	}
	memset(ret, 0, sizeof *ret);
	/* the segment's bytes: terminate every string where its field ends */
#define TAKE(f) (memcpy(ret->f, u.r.f, sizeof ret->f), ret->f[sizeof ret->f - 1] = 0)
	_Static_assert(sizeof ret->endpoints == sizeof u.r.endpoints && sizeof ret->cluster == sizeof u.r.cluster &&
			       sizeof ret->host == sizeof u.r.host && sizeof ret->error == sizeof u.r.error,
		       "the record's strings are the info's");
	TAKE(endpoints);
	TAKE(cluster);
	TAKE(host);
	TAKE(error);
#undef TAKE
	ret->pid = u.r.pid;
	ret->nrejected = u.r.nrejected;
	ret->updated_ns = u.r.updated_ns;
	ret->applied_rev = u.r.applied_rev;
	ret->out_of_sync_ns = u.r.out_of_sync_ns;
	return 0;
}

/*
 * One agent per segment. The claim is an OFD write lock on LOCK_AGENT_BYTE
 * of the segment's lock object: it ends when the handle closes or its
 * process dies (kill -9 included), so a stale claim cannot outlive its
 * agent, and a record whose pid lived on in another process (pid reuse)
 * cannot pass for a live agent. Only writers can open the lock object
 * read-write, so only they can claim; anyone who can open it can test it.
 */
int shmcfg_sync_claim(shmcfg *h, int timeout_ms)
{
	SHMCFG_API_ENTRY;
	assert_return(h && timeout_ms >= 0, -EINVAL);
	SHMCFG_FOLLOW(h);
	if (h->rdonly || h->lock_fd < 0)
		return shmcfg__err(SHMCFG_E_READONLY, "%s: attached read-only, cannot claim it for an agent", h->name);
	if (h->agent_claim)
		return 0;
	int r = shmcfg__ofd_lock(h->lock_fd, LOCK_AGENT_BYTE, true, timeout_ms);
	if (r == -EAGAIN) {
		shmcfg_sync_info si;
		if (shmcfg_sync_get(h, &si) == 0 && si.pid > 0)
			return shmcfg__err(-EBUSY, "%s: already synced by shmcfg-sync pid %d (cluster '%.63s', endpoints %.255s)",
					   h->name, (int)si.pid, si.cluster, si.endpoints);
		return shmcfg__err(-EBUSY, "%s: already claimed by another cluster agent", h->name);
	}
	if (r)
		return shmcfg__err(r, "%s: cannot claim it for an agent: %s", h->name, strerror(-r));
	h->agent_claim = true;
	return 0;
}

int shmcfg_sync_claimed(const shmcfg *h)
{
	SHMCFG_API_ENTRY;
	assert_return(h, -EINVAL);
	SHMCFG_FOLLOW(h);
	if (h->agent_claim)
		return 1;
	if (h->lock_fd < 0)
		return shmcfg__err(-EACCES, "%s: no access to its lock object: cannot tell whether an agent runs", h->name);
	int r = shmcfg__ofd_held(h->lock_fd, LOCK_AGENT_BYTE);
	return r < 0 ? shmcfg__err(r, "%s: cannot test the agent's claim: %s", h->name, strerror(-r)) : r;
}

/* The caller's struct at its size (lib/base/sized.c); the names of releases
 * before 0.7, whose struct was this one. */
int shmcfg_sync_set_sized(shmcfg *h, const shmcfg_sync_info *info, size_t info_size)
{
	SHMCFG_API_ENTRY;
	shmcfg_sync_info full;
	int r = info ? shmcfg__sized_in(&full, sizeof full, info, info_size, sizeof full, "shmcfg_sync_info") : 0;
	return r ? r : sync_set(h, info ? &full : NULL);
}

int (shmcfg_sync_set)(shmcfg *h, const shmcfg_sync_info *info)
{
	SHMCFG_API_ENTRY;
	return shmcfg_sync_set_sized(h, info, sizeof *info);
}

int shmcfg_sync_get_sized(const shmcfg *h, shmcfg_sync_info *ret, size_t ret_size)
{
	SHMCFG_API_ENTRY;
	shmcfg_sync_info full;
	int r = ret ? shmcfg__sized_out(ret_size, sizeof full, "shmcfg_sync_info") : 0;
	if (!r && !(r = sync_get(h, ret ? &full : NULL)))
		shmcfg__sized_copy(ret, ret_size, &full, sizeof full);
	return r;
}

int (shmcfg_sync_get)(const shmcfg *h, shmcfg_sync_info *ret)
{
	SHMCFG_API_ENTRY;
	return shmcfg_sync_get_sized(h, ret, sizeof *ret);
}
