/*
 * The config hash and the slot checksum, both kept as sums over the options
 * so that a commit updates them for the options it changes (subtract the old
 * term, add the new) instead of reading the whole slot.
 *
 * Config hash, canonical encoding version 2 (doc/design.md): each option
 * that is neither an alias nor hash-ignored has a digest, XXH3-128 of
 *   u32le name length, name bytes, u8 type, u8 null flag, and if not null:
 *   bool u8 0/1 | int i64le | float IEEE-754 bits u64le (every NaN as
 *   0x7ff8000000000000) | str u32le length + bytes |
 *   list, set u32le count, then per item u32le length + bytes
 * (version 1's bytes for one option). The digests' low and high 64-bit
 * halves are summed modulo 2^64, and the hash is XXH3-128 of
 *   "shmcfg config hash v2\n", u64le low sum, u64le high sum
 * written big-endian (XXH128_canonical_t). A sum does not depend on the
 * order of its terms: the hash depends on neither the declaration order nor
 * the process.
 */
#include "internal.h"
#include "slot.h"

#include <errno.h>
#include <stdlib.h>

#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>

#define HASH_PREFIX "shmcfg config hash v2\n"

static void upd_u32(XXH3_state_t *st, uint32_t x)
{
	unsigned char le[4] = {(unsigned char)x, (unsigned char)(x >> 8), (unsigned char)(x >> 16),
			       (unsigned char)(x >> 24)};
	XXH3_128bits_update(st, le, 4);
}

static void upd_u64(XXH3_state_t *st, uint64_t x)
{
	unsigned char le[8];
	for (int i = 0; i < 8; i++)
		le[i] = (unsigned char)(x >> (8 * i));
	XXH3_128bits_update(st, le, 8);
}

/*
 * Option i's term of the config hash sum, for its effective cell c (strings
 * in heap[0, heap_size) or the schema's strings): zero for aliases and
 * hash-ignored options. A cell that does not decode is an error.
 */
int shmcfg__opt_digest(const shmcfg *h, uint32_t i, const struct shmcfg__cell *c, const char *heap,
		       uint64_t heap_size, uint64_t out[2])
{
	const struct opt_desc *d = opt_d(h, i);
	out[0] = out[1] = 0;
	if (d->alias != SHMCFG_NO_OPT || (d->flags & SHMCFG_F_HASH_IGNORED))
		return 0;
	unsigned type = META_TYPE(c->meta);
	bool null = c->meta & META_NULL;
	XXH3_state_t st;
	XXH3_128bits_reset(&st);
	upd_u32(&st, d->name.len);
	XXH3_128bits_update(&st, sstr(h, d->name), d->name.len);
	unsigned char tn[2] = {(unsigned char)type, null};
	XXH3_128bits_update(&st, tn, 2);
	if (null) {
	} else if (type == SHMCFG_BOOL) {
		unsigned char v = c->val != 0;
		XXH3_128bits_update(&st, &v, 1);
	} else if (type == SHMCFG_INT || type == SHMCFG_FLOAT) {
		uint64_t bits = c->val;
		if (type == SHMCFG_FLOAT && (bits & 0x7ff0000000000000ull) == 0x7ff0000000000000ull &&
		    (bits & 0x000fffffffffffffull))
			bits = 0x7ff8000000000000ull; /* every NaN alike */
		upd_u64(&st, bits);
	} else {
		shmcfg_value v;
		int r = shmcfg__cell_value(h, c, heap, heap_size, &v);
		if (r)
			return r;
		if (v.type == SHMCFG_STR) {
			upd_u32(&st, (uint32_t)v.u.str.len);
			XXH3_128bits_update(&st, v.u.str.ptr, v.u.str.len);
		} else {
			/* count, then each item's length and bytes, bounded by
			 * the value's length whatever the bytes say now */
			upd_u32(&st, (uint32_t)v.u.list.count);
			const char *end = v.u.list.items + v.u.list.bytes;
			uint32_t left = (uint32_t)v.u.list.count;
			for (const char *it = NULL; left && (it = shmcfg_list_next(&v, it)); left--) {
				uint32_t l = (uint32_t)strnlen(it, (size_t)(end - it));
				upd_u32(&st, l);
				XXH3_128bits_update(&st, it, l);
			}
		}
	}
	XXH128_hash_t hh = XXH3_128bits_digest(&st);
	out[0] = hh.low64;
	out[1] = hh.high64;
	return 0;
}

/* The config hash of a digest sum. */
void shmcfg__hash_final(const uint64_t sum[2], uint8_t out[16])
{
	unsigned char buf[sizeof HASH_PREFIX - 1 + 16];
	memcpy(buf, HASH_PREFIX, sizeof HASH_PREFIX - 1);
	for (int k = 0; k < 2; k++)
		for (int i = 0; i < 8; i++)
			buf[sizeof HASH_PREFIX - 1 + 8 * k + i] = (unsigned char)(sum[k] >> (8 * i));
	XXH128_canonical_t canon;
	XXH128_canonicalFromHash(&canon, XXH3_128bits(buf, sizeof buf));
	memcpy(out, canon.digest, 16);
}

/* Option i's term of the slot checksum: its cell and layer reference. */
uint64_t shmcfg__cell_mix(uint32_t i, const struct shmcfg__cell *c, uint32_t lref)
{
	uint64_t w[3] = {c->val, c->meta, lref};
	return XXH3_64bits_withSeed(w, sizeof w, i);
}

/*
 * Both sums of a whole slot (or a copy of one), from scratch: what a commit
 * keeps up to date term by term. For generation 1 and for shmcfg_check.
 */
int shmcfg__slot_sums(const shmcfg *h, const void *slot, const char *heap, uint64_t heap_size,
		      uint64_t hash_sum[2], uint64_t *checksum)
{
	const struct shmcfg__cell *cells = slot_cells(h, slot);
	const uint32_t *lrefs = slot_lrefs(h, slot);
	hash_sum[0] = hash_sum[1] = *checksum = 0;
	for (uint32_t i = 0; i < h->lay.nopts; i++) {
		struct shmcfg__cell c = cells[i];
		uint64_t d[2];
		int r = shmcfg__opt_digest(h, i, &c, heap, heap_size, d);
		if (r)
			return r;
		hash_sum[0] += d[0];
		hash_sum[1] += d[1];
		*checksum += shmcfg__cell_mix(i, &c, lrefs[i]);
	}
	return 0;
}
