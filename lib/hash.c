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

static int put(struct hashbuf *b, const void *p, size_t n)
{
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < b->len + n)
			cap *= 2;
		char *np = realloc(b->p, cap);
		if (!np)
			return -ENOMEM;
		b->p = np;
		b->cap = cap;
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
	return 0;
}

static int put_u32(struct hashbuf *b, uint32_t x)
{
	unsigned char le[4] = {(unsigned char)x, (unsigned char)(x >> 8), (unsigned char)(x >> 16),
			       (unsigned char)(x >> 24)};
	return put(b, le, 4);
}

static int put_u64(struct hashbuf *b, uint64_t x)
{
	unsigned char le[8];
	for (int i = 0; i < 8; i++)
		le[i] = (unsigned char)(x >> (8 * i));
	return put(b, le, 8);
}

int shmcfg__config_hash(const shmcfg *h, const void *slot, uint8_t out[16], struct hashbuf *b)
{
	const struct shmcfg__cell *cells = slot_cells(h, slot);
	const char *heap = slot_heap(h, slot);
	int r;
	b->len = 0;
	if ((r = put(b, HASH_PREFIX, sizeof HASH_PREFIX - 1)))
		return r;
	for (uint32_t k = 0; k < h->lay.nopts; k++) {
		uint32_t i = h->order[k];
		const struct opt_desc *d = &h->desc[i];
		if (d->alias != SHMCFG_NO_OPT || (d->flags & SHMCFG_F_HASH_IGNORED))
			continue;
		shmcfg_value v;
		if ((r = shmcfg__value_from_cell(&cells[i], heap, h->lay.heap_size, &v)))
			return r;
		unsigned char tn[2] = {(unsigned char)v.type, v.is_null};
		if ((r = put_u32(b, d->name.len)) || (r = put(b, sstr(h, d->name), d->name.len)) ||
		    (r = put(b, tn, 2)))
			return r;
		if (v.is_null)
			continue;
		switch (v.type) {
		case SHMCFG_BOOL:
			r = put(b, &(unsigned char){v.u.b}, 1);
			break;
		case SHMCFG_INT:
			r = put_u64(b, (uint64_t)v.u.i);
			break;
		case SHMCFG_FLOAT: {
			uint64_t bits;
			memcpy(&bits, &v.u.f, 8);
			if (v.u.f != v.u.f)
				bits = 0x7ff8000000000000ull;
			r = put_u64(b, bits);
			break;
		}
		case SHMCFG_STR:
			if (!(r = put_u32(b, (uint32_t)v.u.str.len)))
				r = put(b, v.u.str.ptr, v.u.str.len);
			break;
		case SHMCFG_LIST:
		case SHMCFG_SET:
			r = put_u32(b, (uint32_t)v.u.list.count);
			for (const char *it = NULL; !r && (it = shmcfg_list_next(&v, it));) {
				uint32_t l = (uint32_t)strlen(it);
				if (!(r = put_u32(b, l)))
					r = put(b, it, l);
			}
			break;
		}
		if (r)
			return r;
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
