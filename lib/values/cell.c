/* SPDX-License-Identifier: MIT */
/*
 * Cells: a value as the segment stores it (16 bytes, strings and lists in a
 * heap), encoded by writers and decoded, bounds-checked, by every reader.
 */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/*
 * Decode a cell whose strings live in heap[0, heap_size). Everything is
 * checked: a cell of a hostile segment gives SHMCFG_E_CORRUPT, never a read
 * out of bounds, and *ret is left as it was.
 *
 * *ret is written once, in place, each case whole: a value built in a local
 * (zeroed with 16-byte stores, filled with 4- and 8-byte ones) and then
 * copied is read back with 16-byte loads that the CPU cannot forward from
 * the narrower stores, a stall of its own for each (this is on a commit's
 * path three times, and on a snapshot's get).
 */
int shmcfg__value_from_cell(const struct shmcfg__cell *c, const char *heap, uint64_t heap_size,
			    shmcfg_value *ret)
{
	uint64_t meta = c->meta, val = c->val;
	shmcfg_type type = META_TYPE(meta);
	shmcfg_source src = META_SRC(meta);
	if (type < SHMCFG_BOOL || type > SHMCFG_SET)
		return shmcfg__err(SHMCFG_E_CORRUPT, "cell has unknown type %u", META_TYPE(meta));
	if (meta & META_NULL) {
		*ret = (shmcfg_value){.type = type, .is_null = true, .source = src};
		return 0;
	}
	switch (type) {
	case SHMCFG_BOOL:
		*ret = (shmcfg_value){.type = type, .source = src, .u.b = val != 0};
		return 0;
	case SHMCFG_INT:
		*ret = (shmcfg_value){.type = type, .source = src, .u.i = (int64_t)val};
		return 0;
	case SHMCFG_FLOAT: {
		double f;
		memcpy(&f, &val, sizeof f);
		*ret = (shmcfg_value){.type = type, .source = src, .u.f = f};
		return 0;
	}
	default:
		break;
	}
	uint64_t off = CELL_OFF(val), len = META_LEN(meta);
	/* strings end in NUL inside the heap; lists are `count` NUL-ended items */
	if (off > heap_size || len >= heap_size - off || heap[off + len] != 0)
		return shmcfg__err(SHMCFG_E_CORRUPT, "string cell out of bounds");
	if (type == SHMCFG_STR) {
		*ret = (shmcfg_value){.type = type, .source = src, .u.str = {heap + off, len}};
		return 0;
	}
	uint64_t count = 0;
	for (uint64_t i = 0; i < len; i++)
		count += heap[off + i] == 0;
	if (count != CELL_COUNT(val) || (len && heap[off + len - 1] != 0))
		return shmcfg__err(SHMCFG_E_CORRUPT, "list cell is malformed");
	*ret = (shmcfg_value){.type = type, .source = src, .u.list = {heap + off, count, len}};
	return 0;
}

/*
 * Encode a value as a cell whose string bytes are appended to heap at
 * *used (each string or list followed by a NUL), never past cap.
 * Returns 0, or -ENOSPC with *used unchanged.
 */
int shmcfg__cell_encode(const shmcfg_value *v, uint64_t flags, char *heap, uint64_t cap,
			uint64_t *used, struct shmcfg__cell *out)
{
	if (v->is_null || v->type < SHMCFG_STR || v->type > SHMCFG_SET) {
		*out = shmcfg__scalar_cell(v, flags);
		return 0;
	}
	struct shmcfg__cell c = {.meta = (uint64_t)v->type | flags};
	const char *bytes;
	uint64_t len, count = 0;
	if (v->type == SHMCFG_STR) {
		bytes = v->u.str.ptr;
		len = v->u.str.len;
	} else {
		bytes = v->u.list.items;
		len = v->u.list.bytes;
		count = v->u.list.count;
	}
	if (bytes) {
		if (*used > cap || len + 1 > cap - *used)
			return -ENOSPC;
		memcpy(heap + *used, bytes, len);
		heap[*used + len] = 0;
		c.val = *used | count << 32;
		c.meta |= len << 32;
		*used += len + 1;
	}
	*out = c;
	return 0;
}

/* A list or set value's items agree with its count and byte length (a value
 * built by hand may not). */
bool shmcfg__list_ok(const shmcfg_value *v)
{
	if (v->is_null || (v->type != SHMCFG_LIST && v->type != SHMCFG_SET))
		return true;
	size_t bytes = v->u.list.bytes, nul = 0;
	if (bytes == 0)
		return v->u.list.count == 0;
	if (!v->u.list.items || v->u.list.items[bytes - 1] != 0)
		return false;
	for (size_t i = 0; i < bytes; i++)
		nul += v->u.list.items[i] == 0;
	return nul == v->u.list.count;
}

/* Decode a slot's cell: its strings are in the value heap heap[0, size), or
 * (META_SCHEMA: a default or an implied value) in the schema's strings. */
int shmcfg__cell_value(const shmcfg *h, const struct shmcfg__cell *c, const char *heap, uint64_t size,
		       shmcfg_value *ret)
{
	if (c->meta & META_SCHEMA)
		return shmcfg__value_from_cell(c, h->strings, h->strings_size, ret);
	return shmcfg__value_from_cell(c, heap, size, ret);
}

/* Whether two cells hold the same value from the same source, compared
 * raw: scalars by their bits, strings and lists by their bytes (each in its
 * own heap, ha[0, sa) and hb[0, sb)). */
bool shmcfg__cells_equal(const shmcfg *h, const struct shmcfg__cell *a, const char *ha, uint64_t sa,
			 const struct shmcfg__cell *b, const char *hb, uint64_t sb)
{
	if ((a->meta & 0x1fff) != (b->meta & 0x1fff))
		return false; /* type, null, source, set */
	if ((a->meta & META_NULL) || META_TYPE(a->meta) < SHMCFG_STR)
		return (a->meta & META_NULL) || a->val == b->val;
	shmcfg_value va, vb;
	if (shmcfg__cell_value(h, a, ha, sa, &va) || shmcfg__cell_value(h, b, hb, sb, &vb))
		return false;
	return shmcfg_value_equal(&va, &vb);
}
