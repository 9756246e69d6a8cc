/* SPDX-License-Identifier: MIT */
/*
 * The segment's layout in one place: the region arithmetic that lays out a
 * new segment (shmcfg__layout) beside the check every attach makes of a
 * header against the object's real size (shmcfg__header_check), so that
 * they cannot drift apart. A region added to struct seg_header (lib/layout.h)
 * gets its place in the first and its bounds in the second, and a
 * SEG_LAYOUT_VERSION bump; tests/test_layout.c checks that every layout the
 * first makes passes the second.
 */
#include "internal.h"
#include "slot.h"
#include "history.h"

#include <errno.h>

static uint64_t align64(uint64_t x)
{
	return (x + 63) & ~63ull;
}

/*
 * The layout of a segment of n options whose schema region takes
 * schema_size bytes, from the checked sizes of o. The value heap holds the
 * layers that are set, not names or docs: unless o gives its size, 16 KiB,
 * 32 bytes per option (a chunk of one scalar layer each), and room for
 * every string, list and set option's layers in each slot's version and
 * one more (value_bytes: shmcfg__schema_value_bytes).
 */
int shmcfg__layout(uint32_t n, uint64_t schema_size, uint64_t value_bytes, const shmcfg_create_opts *o,
		   struct seg_header *lay)
{
	uint64_t heap = o->heap_bytes ? o->heap_bytes : align64(16384 + (uint64_t)n * 32 + (o->slots + 1ull) * value_bytes);
	if (heap > SEG_MAX_HEAP_BYTES)
		return shmcfg__err(-EINVAL, "value heap of %llu bytes is out of range (1 KiB to 4 GiB)",
				   (unsigned long long)heap);
	/* the ring lists a slot's lag of changes: a quarter of the options
	 * covers commits of up to an eighth of them each */
	uint32_t ring = SEG_MIN_RING;
	while (ring < n / 4 && ring < SEG_MAX_RING)
		ring *= 2;
	*lay = (struct seg_header){
		.magic = SEG_MAGIC,
		.layout_version = SEG_LAYOUT_VERSION,
		.header_size = sizeof(struct seg_header),
		.nopts = n,
		.schema_off = SEG_SCHEMA_OFF(n), /* after the accessors' copy */
		.schema_size = schema_size,
		.nreaders = o->readers,
		.nslots = o->slots,
		.cells_off = SLOT_CELLS_OFF,
	};
	lay->log_off = align64(lay->schema_off + lay->schema_size);
	lay->ring_off = align64(lay->log_off + SEG_LOG_ENTRIES * sizeof(struct log_ent));
	lay->ring_size = ring;
	/* the history: its index, then its records' ring (history.c) */
	lay->hist_n = o->history;
	lay->hist_off = align64(lay->ring_off + (uint64_t)ring * 4);
	lay->hist_ring_off = lay->hist_off + (uint64_t)o->history * sizeof(struct hist_ent);
	lay->hist_ring_size = (uint64_t)o->history * HIST_BYTES_PER_ENTRY;
	if (lay->hist_ring_size < HIST_MIN_RING)
		lay->hist_ring_size = HIST_MIN_RING;
	lay->readers_off = align64(lay->hist_ring_off + lay->hist_ring_size);
	lay->slots_off = align64(lay->readers_off + (uint64_t)o->readers * sizeof(struct reader_ent));
	lay->lrefs_off = lay->cells_off + (uint64_t)n * sizeof(struct shmcfg__cell);
	lay->slot_size = align64(lay->lrefs_off + (uint64_t)n * sizeof(uint32_t));
	lay->heap_off = lay->slots_off + lay->slot_size * o->slots;
	lay->heap_size = heap;
	lay->total_size = align64(lay->heap_off + heap);
	shmcfg__heap_init(lay);
	return 0;
}

/* Everything in the header checked against the object's real size. */
int shmcfg__header_check(const struct seg_header *hd, uint64_t real_size, const char *name)
{
	if (hd->magic != SEG_MAGIC)
		return shmcfg__err(SHMCFG_E_MAGIC, "%s: not a shmcfg segment (magic %016llx)", name,
				   (unsigned long long)hd->magic);
	if (hd->layout_version != SEG_LAYOUT_VERSION)
		return shmcfg__err(SHMCFG_E_VERSION,
				   "%s: segment layout version %u, this library reads version %u", name,
				   hd->layout_version, SEG_LAYOUT_VERSION);
	if (hd->header_size != sizeof *hd)
		return shmcfg__err(SHMCFG_E_CORRUPT, "%s: header size %u, expected %zu", name,
				   hd->header_size, sizeof *hd);
	if (hd->total_size != real_size)
		return shmcfg__err(SHMCFG_E_CORRUPT,
				   "%s: header says %llu bytes but the object has %llu (truncated?)",
				   name, (unsigned long long)hd->total_size,
				   (unsigned long long)real_size);
	uint64_t n = hd->nopts, sz = real_size, slots_bytes, tmp;
	if (n == 0 || n > SEG_MAX_OPTS || hd->nslots < 2 || hd->nslots > SEG_MAX_SLOTS ||
	    hd->nreaders == 0 || hd->nreaders > SEG_MAX_READERS)
		return shmcfg__err(SHMCFG_E_CORRUPT, "%s: bad counts (options %u, slots %u, readers %u)",
				   name, hd->nopts, hd->nslots, hd->nreaders);
	/* regions in order, each inside the object, none overlapping */
	if (hd->ring_size < SEG_MIN_RING || hd->ring_size > SEG_MAX_RING ||
	    (hd->ring_size & (hd->ring_size - 1)))
		return shmcfg__err(SHMCFG_E_CORRUPT, "%s: bad commit ring size %u", name, hd->ring_size);
	if (hd->schema_off != SEG_SCHEMA_OFF(n) || hd->schema_size > sz ||
	    hd->schema_off > sz - hd->schema_size ||
	    hd->log_off < hd->schema_off + hd->schema_size ||
	    hd->log_off > sz - SEG_LOG_ENTRIES * sizeof(struct log_ent) ||
	    hd->ring_off < hd->log_off + SEG_LOG_ENTRIES * sizeof(struct log_ent) || hd->ring_off % 64 ||
	    hd->ring_off > sz - (uint64_t)hd->ring_size * 4 ||
	    hd->hist_n < SEG_MIN_HISTORY || hd->hist_n > SEG_MAX_HISTORY ||
	    hd->hist_ring_size < HIST_MIN_RING || hd->hist_ring_size > (uint64_t)SEG_MAX_HISTORY * HIST_BYTES_PER_ENTRY ||
	    hd->hist_off < hd->ring_off + (uint64_t)hd->ring_size * 4 || hd->hist_off % 64 ||
	    hd->hist_off > sz - (uint64_t)hd->hist_n * sizeof(struct hist_ent) ||
	    hd->hist_ring_off < hd->hist_off + (uint64_t)hd->hist_n * sizeof(struct hist_ent) ||
	    hd->hist_ring_off > sz - hd->hist_ring_size ||
	    hd->readers_off < hd->hist_ring_off + hd->hist_ring_size ||
	    hd->readers_off % 64 || hd->readers_off > sz - (uint64_t)hd->nreaders * 64 ||
	    hd->slots_off < hd->readers_off + (uint64_t)hd->nreaders * 64 || hd->slots_off % 64 ||
	    hd->slot_size % 64 ||
	    __builtin_mul_overflow(hd->slot_size, (uint64_t)hd->nslots, &slots_bytes) ||
	    hd->slots_off > sz || slots_bytes > sz - hd->slots_off || hd->log_off % 8 ||
	    hd->heap_off < hd->slots_off + slots_bytes || hd->heap_off % 64 || hd->heap_off > sz ||
	    hd->heap_size > sz - hd->heap_off)
		return shmcfg__err(SHMCFG_E_CORRUPT, "%s: a region lies outside the object", name);
	/* slot layout: header, cells, layer references */
	if (hd->cells_off != SLOT_CELLS_OFF ||
	    hd->lrefs_off != hd->cells_off + n * sizeof(struct shmcfg__cell) ||
	    __builtin_add_overflow(hd->lrefs_off, n * sizeof(uint32_t), &tmp) || tmp > hd->slot_size ||
	    hd->heap_size > SEG_MAX_HEAP_BYTES || hd->heap_size < 1024 ||
	    hd->schema_size > SEG_MAX_SCHEMA_BYTES)
		return shmcfg__err(SHMCFG_E_CORRUPT, "%s: bad slot layout", name);
	return 0;
}
