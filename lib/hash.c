/*
 * The config hash and the slot checksum.
 *
 * Config hash, canonical encoding version 1 (doc/design.md): the bytes
 *   "shmcfg config hash v1\n"
 * then, for each option in bytewise order of its name, skipping aliases and
 * hash-ignored options:
 *   u32le name length, name bytes, u8 type, u8 null flag, and if not null:
 *   bool u8 0/1 | int i64le | float IEEE-754 bits u64le (every NaN as
 *   0x7ff8000000000000) | str u32le length + bytes |
 *   list, set u32le count, then per item u32le length + bytes
 * digested with XXH3-128, written big-endian (XXH128_canonical_t).
 * It depends on neither the declaration order nor the process.
 */
#include "internal.h"

#include <errno.h>
#include <stdlib.h>

#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>

#define HASH_PREFIX "shmcfg config hash v1\n"

/* Make room for n more bytes. */
static int reserve(struct hashbuf *b, size_t n)
{
	if (b->len + n <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 4096;
	while (cap < b->len + n)
		cap *= 2;
	char *np = shmcfg__realloc(b->p, cap);
	if (!np)
		return shmcfg__nomem();
	b->p = np;
	b->cap = cap;
	return 0;
}

/* Writers into reserved room. */
static inline void put(struct hashbuf *b, const void *p, size_t n)
{
	memcpy(b->p + b->len, p, n);
	b->len += n;
}

static inline void put_u32(struct hashbuf *b, uint32_t x)
{
	unsigned char le[4] = {(unsigned char)x, (unsigned char)(x >> 8), (unsigned char)(x >> 16),
			       (unsigned char)(x >> 24)};
	put(b, le, 4);
}

static inline void put_u64(struct hashbuf *b, uint64_t x)
{
	unsigned char le[8];
	for (int i = 0; i < 8; i++)
		le[i] = (unsigned char)(x >> (8 * i));
	put(b, le, 8);
}

int shmcfg__config_hash(const shmcfg *h, const void *slot, uint8_t out[16], struct hashbuf *b)
{
	const struct shmcfg__cell *cells = slot_cells(h, slot);
	const char *heap = slot_heap(h, slot);
	const uint32_t *order;
	int r = shmcfg__schema_order(h, &order);
	if (r)
		return r;
	b->len = 0;
	if ((r = reserve(b, sizeof HASH_PREFIX)))
		return r;
	put(b, HASH_PREFIX, sizeof HASH_PREFIX - 1);
	for (uint32_t k = 0; k < h->lay.nopts; k++) {
		uint32_t i = order[k];
		const struct opt_desc *d = opt_d(h, i);
		if (d->alias != SHMCFG_NO_OPT || (d->flags & SHMCFG_F_HASH_IGNORED))
			continue;
		const struct shmcfg__cell *c = &cells[i];
		unsigned type = META_TYPE(c->meta);
		bool null = c->meta & META_NULL;
		/* name, type, null flag and a scalar: reserved together */
		if ((r = reserve(b, 4 + d->name.len + 2 + 8)))
			return r;
		put_u32(b, d->name.len);
		put(b, sstr(h, d->name), d->name.len);
		unsigned char tn[2] = {(unsigned char)type, null};
		put(b, tn, 2);
		if (null)
			continue;
		if (type == SHMCFG_BOOL) {
			unsigned char v = c->val != 0;
			put(b, &v, 1);
			continue;
		}
		if (type == SHMCFG_INT || type == SHMCFG_FLOAT) {
			uint64_t bits = c->val;
			if (type == SHMCFG_FLOAT && (bits & 0x7ff0000000000000ull) == 0x7ff0000000000000ull &&
			    (bits & 0x000fffffffffffffull))
				bits = 0x7ff8000000000000ull; /* every NaN alike */
			put_u64(b, bits);
			continue;
		}
		shmcfg_value v;
		if ((r = shmcfg__value_from_cell(c, heap, h->lay.heap_size, &v)))
			return r;
		if (v.type == SHMCFG_STR) {
			if ((r = reserve(b, 4 + v.u.str.len)))
				return r;
			put_u32(b, (uint32_t)v.u.str.len);
			put(b, v.u.str.ptr, v.u.str.len);
			continue;
		}
		/* list, set: count, then each item's length and bytes */
		if ((r = reserve(b, 4 + 4 * v.u.list.count + v.u.list.bytes)))
			return r;
		/* the items are re-read from the slot: bound every length by what
		 * was reserved, whatever the bytes say now */
		put_u32(b, (uint32_t)v.u.list.count);
		const char *end = v.u.list.items + v.u.list.bytes;
		uint32_t left = (uint32_t)v.u.list.count;
		for (const char *it = NULL; left && (it = shmcfg_list_next(&v, it)); left--) {
			uint32_t l = (uint32_t)strnlen(it, (size_t)(end - it));
			put_u32(b, l);
			put(b, it, l);
		}
	}
	XXH128_canonical_t canon;
	XXH128_canonicalFromHash(&canon, XXH3_128bits(b->p, b->len));
	memcpy(out, canon.digest, 16);
	return 0;
}

/* XXH3-64 of the cells, the layers and the used part of the heap. */
uint64_t shmcfg__slot_checksum(const shmcfg *h, const void *slot)
{
	const struct slot_hdr *sl = slot;
	XXH3_state_t st;
	XXH3_64bits_reset(&st);
	XXH3_64bits_update(&st, (const char *)slot + h->lay.cells_off,
			   h->lay.heap_off - h->lay.cells_off);
	uint64_t used = sl->heap_used <= h->lay.heap_size ? sl->heap_used : h->lay.heap_size;
	XXH3_64bits_update(&st, slot_heap(h, slot), used);
	return XXH3_64bits_digest(&st);
}
