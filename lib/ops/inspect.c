/* SPDX-License-Identifier: MIT */
/*
 * Looking at a segment: its facts (shmcfg_stat) and the consistency check,
 * shallow (the header against the object and the attach-time copy, the
 * schema region against its hash, the whole schema validated) and deep
 * (every published slot's checksum and cells).
 */
#include "internal.h"

#include <stddef.h>
#include "slot.h"
#include "seqlock.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <xxhash.h>

const char *shmcfg_name(const shmcfg *h)
{
	SHMCFG_API_KEEP;
	return h ? h->name : NULL;
}

uint32_t shmcfg_count(const shmcfg *h)
{
	SHMCFG_API_KEEP;
	return h ? h->lay.nopts : 0;
}

bool shmcfg_readonly(const shmcfg *h)
{
	SHMCFG_API_KEEP;
	return h && h->rdonly;
}

void shmcfg_schema_hash(const shmcfg *h, uint8_t out[16])
{
	SHMCFG_API_KEEP;
	if (h && out)
		memcpy(out, h->lay.schema_hash, 16);
	else if (out) /* no handle: zeroes, which no schema hashes to by chance */
		memset(out, 0, 16);
	if (!h || !out)
		shmcfg__err(-EINVAL, "%s: invalid argument (h && out)", __func__);
}

static int stat_full(const shmcfg *h, shmcfg_info *ret)
{
	assert_return_as("shmcfg_stat", h && ret, -EINVAL);
	SHMCFG_FOLLOW(h);
	memset(ret, 0, sizeof *ret);
	ret->layout_version = h->lay.layout_version;
	ret->size = h->size;
	ret->nopts = h->lay.nopts;
	ret->nslots = h->lay.nslots;
	ret->nreaders = h->lay.nreaders;
	ret->heap_bytes = h->lay.heap_size;
	memcpy(ret->schema_hash, h->lay.schema_hash, 16);
	ret->create_time_ns = h->lay.create_time_ns;
	ret->create_uid = h->lay.create_uid;
	ret->create_pid = h->lay.create_pid;
	for (uint32_t s = 0; s < h->lay.nslots; s++)
		ret->slot_gen[s] = STAMP_GEN(__atomic_load_n(&slot_at(h, s)->gen, __ATOMIC_ACQUIRE));
	ret->retired = shmcfg_retired(h);
	ret->readers_hwm = shmcfg__readers_hwm(h);
	ret->copy_fallbacks = __atomic_load_n(&h->hdr->copy_fallbacks, __ATOMIC_RELAXED);
	ret->heap_used = __atomic_load_n(&h->hdr->heap_live, __ATOMIC_RELAXED);
	shmcfg__wlock_state(h, ret);
	/* the generation and its hash, read together under the slot's seqlock */
	ret->generation = shmcfg_config_hash(h, ret->config_hash);
	return 0;
}

uint32_t shmcfg_waiters(const shmcfg *h)
{
	SHMCFG_API_KEEP;
	return h ? __atomic_load_n(&shmcfg__live(h)->hdr->waiters, __ATOMIC_RELAXED) : 0;
}

/* Option i's cell and layers in a copy of a slot decode, with its type. */
static bool slot_opt_decodes(const shmcfg *h, const char *slot, const char *heap, uint64_t top, uint32_t i)
{
	shmcfg_value v;
	struct shmcfg__cell lay[NLAYERS];
	const struct opt_desc *d = opt_d(h, i);
	uint32_t type = d->type;
	/* only an option that is no alias and that nothing implies may hold
	 * its one layer in its cell (slot.h, lref_in_cell) */
	if (lref_in_cell(slot_lrefs(h, slot)[i]) && !cell_may_hold_layer(h, d))
		return false;
	if (shmcfg__cell_value(h, slot_cells(h, slot) + i, heap, top, &v) || v.type != type ||
	    shmcfg__chunk_read(heap, top, slot_lrefs(h, slot)[i], slot_cells(h, slot) + i, lay))
		return false;
	for (enum layer l = 0; l < NLAYERS; l++)
		if ((lay[l].meta & META_SET) && (shmcfg__value_from_cell(&lay[l], heap, top, &v) || v.type != type))
			return false;
	return true;
}

/*
 * The consistency check. Shallow: the header against the object's real size
 * and the attach-time copy, the schema region (as the object holds it now)
 * against its hash, and the whole schema validated as this handle uses it
 * (its private copy: attach validates each option on first use only, this
 * validates them all). Deep: also every published slot, copied under its
 * seqlock, its checksum, and every cell's bounds.
 */
int shmcfg_check(const shmcfg *h, bool deep, void (*fn)(const char *problem, void *ud), void *ud)
{
	SHMCFG_API_ENTRY;
	assert_return(h, -EINVAL);
	SHMCFG_FOLLOW(h);
	int bad = 0;
	char msg[320];
#define PROBLEM(...)                                    \
	do {                                            \
		snprintf(msg, sizeof msg, __VA_ARGS__); \
		if (fn)                                 \
			fn(msg, ud);                    \
		bad++;                                  \
	} while (0)
	struct stat st;
	struct seg_header now;
	memcpy(&now, h->hdr, sizeof now);
	if (fstat(h->fd, &st) < 0)
		PROBLEM("fstat: %s", strerror(errno));
	else if (shmcfg__header_check(&now, (uint64_t)st.st_size, h->name))
		PROBLEM("%s", shmcfg_errdetail());
	else if (memcmp(&now, &h->lay, offsetof(struct seg_header, current)) != 0)
		PROBLEM("header changed since attach");
	if (now.ready != SEG_READY)
		PROBLEM("segment is not marked initialised");
	/* only an object as large as at attach can be read through the mapping */
	if (!bad) {
		XXH128_canonical_t canon;
		XXH128_canonicalFromHash(&canon, XXH3_128bits(h->base + h->lay.schema_off, h->lay.schema_size));
		if (memcmp(canon.digest, h->lay.schema_hash, 16) != 0)
			PROBLEM("schema region was modified (hash mismatch)");
	}
	int sb = shmcfg__schema_validate(h, fn, ud);
	if (sb < 0) /* no verdict on the schema: not a problem of the segment */
		return sb;
	bad += sb;
	uint64_t cur = seq_current(h); /* of a frozen segment, its last */
	if (cur_slot(cur) >= h->lay.nslots || cur_gen(cur) == 0)
		PROBLEM("current (%llx) names slot %u of %u", (unsigned long long)cur, cur_slot(cur),
			h->lay.nslots);
	if (!deep || bad)
		return bad;
	char *copy = shmcfg__malloc(h->lay.slot_size + h->lay.heap_size);
	if (!copy) /* no verdict on the slots: not a problem of the segment */
		return shmcfg__nomem();
	char *heap = copy + h->lay.slot_size;
	for (uint32_t s = 0; s < h->lay.nslots; s++) {
		uint64_t gen = __atomic_load_n(&slot_at(h, s)->gen, __ATOMIC_ACQUIRE), top;
		if (gen == 0 || (gen & SLOT_BUSY))
			continue; /* empty, or being written */
		if (!shmcfg__seq_copy(h, (gen << SHMCFG__SLOT_BITS) | s, copy, heap, &top))
			continue; /* rewritten while we looked: not a problem */
		const struct slot_hdr *sl = (const struct slot_hdr *)copy;
		uint32_t i = 0;
		while (i < h->lay.nopts && slot_opt_decodes(h, copy, heap, top, i))
			i++;
		if (i < h->lay.nopts) {
			PROBLEM("slot %u (generation %llu): option %s has a bad cell or layer", s,
				(unsigned long long)gen, sstr(h, opt_d(h, i)->name));
			continue;
		}
		uint64_t sum[2], checksum;
		if (shmcfg__slot_sums(h, copy, heap, top, sum, &checksum) || checksum != sl->checksum) {
			PROBLEM("slot %u (generation %llu): checksum mismatch", s, (unsigned long long)gen);
			continue;
		}
		if (memcmp(sum, sl->hash_sum, sizeof sum))
			PROBLEM("slot %u (generation %llu): config hash does not match its values", s,
				(unsigned long long)gen);
	}
	/* the accessors' copy (seqlock.h, seq_publish_copy()): a block whose
	 * seqlock is even holds the current generation's words. Odd (a writer
	 * died inside its publication, a frozen segment) is no problem: the
	 * accessors read the slots, and the next commit rewrites it. A commit
	 * while we look moves the seqlock or `current`: no verdict. */
	uint64_t top;
	cur = __atomic_load_n(&h->hdr->current, __ATOMIC_ACQUIRE);
	if (cur_slot(cur) < h->lay.nslots && shmcfg__seq_copy(h, cur, copy, heap, &top)) {
		const struct shmcfg__cell *cells = slot_cells(h, copy);
		for (uint32_t o = 0; o < h->lay.nopts; o += SHMCFG__COPY_PER_BLOCK) {
			const uint64_t *blk = copy_block(h, o);
			uint64_t q = __atomic_load_n(blk, __ATOMIC_ACQUIRE);
			uint32_t i = o, end = o + SHMCFG__COPY_PER_BLOCK < h->lay.nopts ? o + SHMCFG__COPY_PER_BLOCK
										    : h->lay.nopts;
			while (i < end && __atomic_load_n(&blk[COPY_WORD(i)], __ATOMIC_RELAXED) == cells[i].val)
				i++;
			__atomic_thread_fence(__ATOMIC_ACQUIRE);
			if (i < end && !(q & 1) && __atomic_load_n(blk, __ATOMIC_RELAXED) == q &&
			    __atomic_load_n(&h->hdr->current, __ATOMIC_RELAXED) == cur) {
				PROBLEM("the accessors' copy of option %s is not generation %llu's value",
					sstr(h, opt_d(h, i)->name), (unsigned long long)cur_gen(cur));
				break;
			}
		}
	}
	shmcfg__free(copy);
	return bad;
#undef PROBLEM
}

/* shmcfg_info as releases up to 0.14 declared it: the shortest a caller
 * under this soname passes (0.15 added the writer lock's fields) */
#define INFO_BASE_BYTES offsetof(shmcfg_info, writer)

/* The caller's struct at its size (lib/base/sized.c); the name of releases
 * before 0.7, whose struct was the base one. */
int shmcfg_stat_sized(const shmcfg *h, shmcfg_info *ret, size_t ret_size)
{
	SHMCFG_API_ENTRY;
	shmcfg_info full;
	int r = ret ? shmcfg__sized_out(ret_size, INFO_BASE_BYTES, "shmcfg_info") : 0;
	if (!r && !(r = stat_full(h, ret ? &full : NULL)))
		shmcfg__sized_copy(ret, ret_size, &full, sizeof full);
	return r;
}

int (shmcfg_stat)(const shmcfg *h, shmcfg_info *ret)
{
	SHMCFG_API_ENTRY;
	return shmcfg_stat_sized(h, ret, INFO_BASE_BYTES);
}
