/* SPDX-License-Identifier: MIT */
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
 * the process. shmcfg_value_record() gives one option's bytes, from the
 * same encoder (put_record()).
 */
#include "internal.h"
#include "slot.h"

#include <errno.h>
#include <stdlib.h>

#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#define XXH_INLINE_ALL /* the digest of a commit's one short record, without a call through the PLT */
#include <xxhash.h>

#define HASH_PREFIX "shmcfg config hash v2\n"

/*
 * Where an option's record goes: into a digest (st), or into buf (the bytes
 * past len only counted). n counts the record's bytes either way.
 */
struct rec_out {
	XXH3_state_t *st;
	unsigned char *buf;
	size_t len, n;
};

/* inline: the fixed-size fields then cost a store each, not a memcpy call */
static inline __attribute__((always_inline)) void put(struct rec_out *o, const void *p, size_t n)
{
	if (o->st)
		XXH3_128bits_update(o->st, p, n);
	else if (o->buf && o->n <= o->len && n <= o->len - o->n)
		memcpy(o->buf + o->n, p, n);
	o->n += n;
}

static inline __attribute__((always_inline)) void put_u32(struct rec_out *o, uint32_t x)
{
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
	x = __builtin_bswap32(x);
#endif
	put(o, &x, 4); /* little-endian */
}

static inline __attribute__((always_inline)) void put_u64(struct rec_out *o, uint64_t x)
{
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
	x = __builtin_bswap64(x);
#endif
	put(o, &x, 8); /* little-endian */
}

/* A float's bits as its record holds them: every NaN alike. */
static inline uint64_t float_bits(uint64_t bits)
{
	bool nan = (bits & 0x7ff0000000000000ull) == 0x7ff0000000000000ull && (bits & 0x000fffffffffffffull);
	return nan ? 0x7ff8000000000000ull : bits;
}

/*
 * The one encoder of an option's record (encoding version 2), for the
 * digests of a slot and for shmcfg_value_record(). A list is walked within
 * its bytes whatever they say now (a snapshot's items may be in shared
 * memory that changes under us): at most count items. Inlined: where the
 * output is known to be a buffer (a commit's digest), put()'s other cases
 * fold away.
 */
static inline __attribute__((always_inline)) void put_record(struct rec_out *o, const char *name,
							     uint32_t name_len, const shmcfg_value *v)
{
	put_u32(o, name_len);
	put(o, name, name_len);
	unsigned char tn[2] = {(unsigned char)v->type, v->is_null};
	put(o, tn, 2);
	if (v->is_null)
		return;
	switch (v->type) {
	case SHMCFG_BOOL: {
		unsigned char b = v->u.b != 0;
		put(o, &b, 1);
		break;
	}
	case SHMCFG_INT:
		put_u64(o, (uint64_t)v->u.i);
		break;
	case SHMCFG_FLOAT: {
		uint64_t bits;
		memcpy(&bits, &v->u.f, sizeof bits);
		put_u64(o, float_bits(bits));
		break;
	}
	case SHMCFG_STR:
		put_u32(o, (uint32_t)v->u.str.len);
		put(o, v->u.str.ptr, v->u.str.len);
		break;
	default: { /* list, set: count, then each item's length and bytes */
		put_u32(o, (uint32_t)v->u.list.count);
		const char *end = v->u.list.items + v->u.list.bytes;
		uint32_t left = (uint32_t)v->u.list.count;
		for (const char *it = NULL; left && (it = shmcfg_list_next(v, it)); left--) {
			uint32_t l = (uint32_t)strnlen(it, (size_t)(end - it));
			put_u32(o, l);
			put(o, it, l);
		}
	}
	}
}

/* Why v cannot be encoded as a record by shmcfg_value_record(), or NULL. */
static const char *record_value_error(const shmcfg_value *v)
{
	if (v->type < SHMCFG_BOOL || v->type > SHMCFG_SET)
		return "unknown type";
	if (v->is_null || v->type == SHMCFG_BOOL || v->type == SHMCFG_INT ||
	    v->type == SHMCFG_FLOAT)
		return NULL;
	if (v->type == SHMCFG_STR) {
		if (v->u.str.len && !v->u.str.ptr)
			return "a string at NULL";
		if (v->u.str.len > UINT32_MAX)
			return "a string of more than 4 GiB";
		if (memchr(v->u.str.ptr, 0, v->u.str.len)) /* as every setter refuses */
			return "a string with a NUL byte";
		return shmcfg__utf8_valid(v->u.str.ptr, v->u.str.len) ? NULL : "a string not UTF-8";
	}
	if ((v->u.list.count || v->u.list.bytes) && !v->u.list.items)
		return "list items at NULL";
	if (v->u.list.count > UINT32_MAX)
		return "a list of more than 2^32 items";
	const char *end = v->u.list.items + v->u.list.bytes, *prev = NULL;
	size_t n = 0;
	for (const char *it = v->u.list.items; it && it < end; n++) {
		size_t l = strnlen(it, (size_t)(end - it));
		if (it + l == end)
			return "a list item without its NUL";
		if (l > UINT32_MAX)
			return "a list item of more than 4 GiB";
		if (!shmcfg__utf8_valid(it, l))
			return "a list item not UTF-8";
		if (v->type == SHMCFG_SET && prev && strcmp(prev, it) >= 0)
			return "a set not sorted bytewise without duplicates (as shmcfg_value_list() "
			       "builds one)";
		prev = it;
		it += l + 1;
	}
	return n == v->u.list.count ? NULL : "a list whose count is not its items'";
}

int shmcfg_value_record(const char *name, const shmcfg_value *v, void *buf, size_t len,
			size_t *needed)
{
	SHMCFG_API_ENTRY;
	if (needed)
		*needed = 0;
	if (!name || !*name)
		return shmcfg__err(-EINVAL, "shmcfg_value_record: no option name");
	size_t name_len = strlen(name);
	if (name_len > UINT32_MAX || !shmcfg__utf8_valid(name, name_len))
		return shmcfg__err(-EINVAL, "shmcfg_value_record: the name is not UTF-8");
	if (!v)
		return shmcfg__err(-EINVAL, "shmcfg_value_record: %s: no value", name);
	if (!buf && len)
		return shmcfg__err(-EINVAL, "shmcfg_value_record: %s: no buffer for %zu bytes",
				   name, len);
	const char *why = record_value_error(v);
	if (why)
		return shmcfg__err(-EINVAL, "shmcfg_value_record: %s: %s", name, why);
	struct rec_out count = {0};
	put_record(&count, name, (uint32_t)name_len, v);
	if (needed)
		*needed = count.n;
	if (count.n > len)
		return shmcfg__err(-ENOSPC, "shmcfg_value_record: %s: the record is %zu bytes, the "
					    "buffer %zu", name, count.n, len);
	struct rec_out out = {.buf = buf, .len = len};
	put_record(&out, name, (uint32_t)name_len, v);
	return 0;
}

/*
 * The record of a cell that holds its value (null, bool, int, float), written
 * from its bits into buf[0, len) as put_record() writes the decoded value
 * (test_python's TestCanonicalEncoding checks the hash of every kind of
 * value against shmcfg_value_record()'s records): its length, or 0 for any other cell or a name too
 * long for buf.
 */
static size_t scalar_record(unsigned char *buf, size_t len, const char *name, uint32_t name_len,
			    const struct shmcfg__cell *c)
{
	uint64_t meta = c->meta, bits = c->val;
	unsigned type = META_TYPE(meta);
	bool null = meta & META_NULL;
	if (type < SHMCFG_BOOL || type > (null ? SHMCFG_SET : SHMCFG_FLOAT) || name_len > len - 16)
		return 0;
	/* put_record()'s bytes, stored directly: the length was checked once
	 * above (the record is at most name_len + 16), where put() checks each
	 * field (half of this function's ~78 instructions) */
	uint32_t nl = name_len;
	uint64_t x = type == SHMCFG_FLOAT ? float_bits(bits) : bits;
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
	nl = __builtin_bswap32(nl);
	x = __builtin_bswap64(x);
#endif
	memcpy(buf, &nl, 4);
	memcpy(buf + 4, name, name_len);
	unsigned char *p = buf + 4 + name_len;
	p[0] = (unsigned char)type;
	p[1] = null;
	if (null)
		return 6 + (size_t)name_len;
	if (type == SHMCFG_BOOL) {
		p[2] = bits != 0;
		return 7 + (size_t)name_len;
	}
	memcpy(p + 2, &x, 8);
	return 14 + (size_t)name_len;
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
	/* most records fit a small buffer: one call of the one-shot hash (the
	 * same digest as the streaming one's, without its state's set-up) */
	unsigned char buf[256];
	XXH128_hash_t hh;
	size_t n = scalar_record(buf, sizeof buf, sstr(h, d->name), d->name.len, c);
	if (n) { /* a commit's usual case: no value to decode */
		hh = XXH3_128bits(buf, n);
		out[0] = hh.low64;
		out[1] = hh.high64;
		return 0;
	}
	shmcfg_value v;
	int r = shmcfg__cell_value(h, c, heap, heap_size, &v);
	if (r)
		return r;
	struct rec_out o = {.buf = buf, .len = sizeof buf};
	put_record(&o, sstr(h, d->name), d->name.len, &v);
	if (o.n <= sizeof buf) {
		hh = XXH3_128bits(buf, o.n);
	} else {
		XXH3_state_t st;
		XXH3_128bits_reset(&st);
		o = (struct rec_out){.st = &st};
		put_record(&o, sstr(h, d->name), d->name.len, &v);
		hh = XXH3_128bits_digest(&st);
	}
	out[0] = hh.low64;
	out[1] = hh.high64;
	return 0;
}

/*
 * The digests of options ids[0, n) (n <= DIGEST_BATCH), each for its cell
 * cells[id], as shmcfg__opt_digest() gives them, in two passes: every
 * record is written before any is hashed. A record is written in stores
 * of 1 to 16 bytes that the hash then reads back in 8-byte loads across
 * them; a load cannot be forwarded from two stores, so right after the
 * writes each such load waits for the stores to retire (15% of a
 * 100-change commit's time). A pass later they have.
 */
int shmcfg__opt_digests(const shmcfg *h, const uint32_t *ids, size_t n, const struct shmcfg__cell *cells,
			const char *heap, uint64_t heap_size, uint64_t out[][2])
{
	unsigned char buf[DIGEST_BATCH][128];
	size_t len[DIGEST_BATCH];
	for (size_t k = 0; k < n; k++) {
		const struct opt_desc *d = opt_d(h, ids[k]);
		bool none = d->alias != SHMCFG_NO_OPT || (d->flags & SHMCFG_F_HASH_IGNORED);
		len[k] = none ? SIZE_MAX : scalar_record(buf[k], sizeof buf[k], sstr(h, d->name), d->name.len, cells + ids[k]);
	}
	for (size_t k = 0; k < n; k++) {
		if (len[k] == SIZE_MAX) {
			out[k][0] = out[k][1] = 0;
		} else if (len[k]) {
			XXH128_hash_t hh = XXH3_128bits(buf[k], len[k]);
			out[k][0] = hh.low64;
			out[k][1] = hh.high64;
		} else { /* not a scalar, or a long name */
			int r = shmcfg__opt_digest(h, ids[k], cells + ids[k], heap, heap_size, out[k]);
			if (r)
				return r;
		}
	}
	return 0;
}

#define TERMS_CACHED (sizeof ((shmcfg *)0)->terms / sizeof ((shmcfg *)0)->terms[0])

/*
 * Option i's terms of the sums for its cell and reference as the
 * slot holds them now, subtracted (sign -1) or added (+1).
 *
 * A commit on the segment's heap (under the writer lock, and the handle's
 * commit_lock) keeps the terms it adds in h->terms: the next commit of the
 * option takes the same cell's terms out (its old cell is this one's new),
 * then without hashing. Only for a value held in the cell (null, bool, int,
 * float), whose terms depend on nothing but the key: a heap value's bytes
 * at one offset change when its chunk is freed and the offset reused.
 */
int shmcfg__add_terms(struct build *b, uint32_t i, uint64_t sign, const uint64_t digest[2])
{
	const struct shmcfg__cell *c = &b->cells[i];
	uint32_t lref = b->lrefs[i];
	bool keep = b->shared && ((c->meta & META_NULL) || META_TYPE(c->meta) < SHMCFG_STR);
	struct opt_terms *t = &b->h->terms[i % TERMS_CACHED], now;
	if (!keep || t->opt1 != i + 1 || t->val != c->val || t->meta != c->meta || t->lref != lref) {
		/* written where they stay, field by field: a copy of a struct
		 * just written in 4- and 8-byte stores, with 16-byte loads,
		 * stalled on store forwarding (a fifth of this function's time) */
		if (!keep)
			t = &now;
		t->opt1 = 0; /* not kept until whole */
		if (digest) {
			t->d[0] = digest[0], t->d[1] = digest[1];
		} else {
			int r = shmcfg__opt_digest(b->h, i, c, b->heap, b->heap_size, t->d);
			if (r)
				return r;
		}
		t->mix = shmcfg__cell_mix(i, c, lref);
		t->val = c->val, t->meta = c->meta, t->lref = lref, t->opt1 = i + 1;
	}
	b->hash_sum[0] += sign * t->d[0];
	b->hash_sum[1] += sign * t->d[1];
	b->checksum += sign * t->mix;
	return 0;
}

/* The terms of options ids[0, n) as a build ends them, added; their
 * digests made a batch at a time (shmcfg__opt_digests). */
int shmcfg__add_new_terms(struct build *b, const uint32_t *ids, size_t n)
{
	int r = 0;
	for (size_t k = 0; !r && k < n; k += DIGEST_BATCH) {
		size_t m = n - k < DIGEST_BATCH ? n - k : DIGEST_BATCH;
		uint64_t d[DIGEST_BATCH][2];
		r = shmcfg__opt_digests(b->h, ids + k, m, b->cells, b->heap, b->heap_size, d);
		for (size_t j = 0; !r && j < m; j++)
			r = shmcfg__add_terms(b, ids[k + j], 1, d[j]);
	}
	return r;
}



/* The config hash of a digest sum. */
void shmcfg__hash_final(const uint64_t sum[2], uint8_t out[16])
{
	unsigned char buf[sizeof HASH_PREFIX - 1 + 16];
	memcpy(buf, HASH_PREFIX, sizeof HASH_PREFIX - 1);
	for (int k = 0; k < 2; k++) {
		uint64_t le = sum[k];
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
		le = __builtin_bswap64(le);
#endif
		memcpy(buf + sizeof HASH_PREFIX - 1 + 8 * k, &le, 8); /* little-endian, as encoding 2 says */
	}
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
