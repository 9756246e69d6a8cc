/* SPDX-License-Identifier: MIT */
/*
 * The value heap: chunks that hold one option's layer cells and the bytes of
 * their strings. A slot refers to an option's chunk by offset / 16 (its
 * "layer reference"; 0 = no layer set; slot.h: 1 and 2, a lone scalar
 * layer held in the option's cell), so a commit that changes k options
 * writes at most k chunks, whatever the size of the configuration.
 *
 * A chunk is immutable while any slot refers to it; `refs` counts those
 * slots and the chunk is freed when the last one is rewritten. Readers never
 * look at `refs` or the free lists: a reader of slot S reads S's chunks, and
 * S's chunks are freed (and reused) only after a writer marked S busy, which
 * the reader's stamp check sees (seqlock.h, (B) pairs with (C)). A pinned
 * slot is never rewritten, so its chunks live as long as the pin.
 *
 * Everything here runs under the writer lock. The reference counts and free
 * lists are the only writer state that spans commits; a writer that dies
 * while changing them leaves `wip` set, and the next writer rebuilds both
 * from the slots (shmcfg__heap_sweep), the way a file system checks itself
 * after an unclean unmount. Every offset read from the segment is checked
 * before use: a damaged heap gives SHMCFG_E_CORRUPT, never a stray write.
 */
#include "internal.h"
#include "slot.h"
#include "seqlock.h"

#include <errno.h>
#include <stdlib.h>

/* Chunk sizes: 16-byte steps up to 256, then steps of 1.5x and 2x. The
 * smallest holds one scalar layer. */
static uint64_t class_bytes(unsigned c)
{
	if (c < 15)
		return 32 + 16 * c;
	c -= 15;
	uint64_t p = 256ull << (c / 2);
	return c % 2 ? 2 * p : p + p / 2;
}
_Static_assert(CHUNK_HDR_BYTES == 8, "a chunk's header is 8 bytes");

/* The free list's link of a free chunk. */
static uint64_t *next_of(struct chunk *k)
{
	return (uint64_t *)(k + 1);
}

static unsigned class_for(uint64_t bytes)
{
	for (unsigned c = 0; c < HEAP_CLASSES; c++)
		if (class_bytes(c) >= bytes)
			return c;
	return HEAP_CLASSES;
}

uint64_t shmcfg__heap_chunk_bytes(uint64_t bytes)
{
	unsigned c = class_for(bytes);
	return c == HEAP_CLASSES ? SEG_MAX_HEAP_BYTES : class_bytes(c);
}

/* The chunk at off, if off names one: inside [HEAP_FIRST, top), aligned,
 * with a plausible tag. */
#define HEAP_FIRST 64u
static struct chunk *chunk_at(char *heap, uint64_t top, uint64_t off)
{
	if (off < HEAP_FIRST || off % 16 || off > top || top - off < CHUNK_HDR_BYTES)
		return NULL;
	struct chunk *c = (struct chunk *)(heap + off);
	uint32_t tag = __atomic_load_n(&c->tag, __ATOMIC_RELAXED);
	if (tag >> 24 != CHUNK_MAGIC || CHUNK_CLASS(tag) >= HEAP_CLASSES || class_bytes(CHUNK_CLASS(tag)) > top - off)
		return NULL;
	return c;
}

/*
 * The layers of a layer reference, for a reader of a slot (or a copy) whose
 * heap is heap[0, size) and whose cell of the option is `cell`: every
 * layer's cell, the unset ones null and not META_SET (all of them for
 * reference 0); an error for a reference that does not name a chunk, or a
 * cell that cannot be a layer held in it. The cells' strings are checked
 * when decoded, like every cell's.
 */
const struct shmcfg__cell shmcfg__no_layers[NLAYERS] = {
	{.meta = META_NULL}, {.meta = META_NULL}, {.meta = META_NULL}, {.meta = META_NULL}, {.meta = META_NULL}};
_Static_assert(NLAYERS == 5, "one unset cell per layer");

int shmcfg__chunk_read(const char *heap, uint64_t size, uint32_t lref, const struct shmcfg__cell *cell,
		       struct shmcfg__cell lay[NLAYERS])
{
	/* a copy of a constant: a few vector stores, not a loop */
	memcpy(lay, shmcfg__no_layers, sizeof shmcfg__no_layers);
	if (lref == 0)
		return 0;
	if (lref_in_cell(lref)) {
		uint64_t meta = __atomic_load_n(&cell->meta, __ATOMIC_RELAXED);
		shmcfg_source s = META_SRC(meta);
		if (s < SHMCFG_SRC_KNOB || s > SHMCFG_SRC_ENV_FORCE || (meta & (META_SET | META_SCHEMA | META_BY_CLUSTER)) ||
		    (!(meta & META_NULL) && META_TYPE(meta) >= SHMCFG_STR))
			return shmcfg__err(SHMCFG_E_CORRUPT, "a layer held in the cell has a cell of source %d, type %u",
					   (int)s, META_TYPE(meta));
		uint64_t own = lref == LREF_IN_CELL_BY_CLUSTER ? META_BY_CLUSTER : 0;
		lay[layer_of(s)] = (struct shmcfg__cell){__atomic_load_n(&cell->val, __ATOMIC_RELAXED), meta | META_SET | own};
		return 0;
	}
	uint64_t off = (uint64_t)lref << LREF_SHIFT;
	if (off < HEAP_FIRST || off > size || size - off < CHUNK_HDR_BYTES)
		return shmcfg__err(SHMCFG_E_CORRUPT, "layer reference %u lies outside the value heap", lref);
	const struct chunk *k = (const struct chunk *)(heap + off);
	/* one read of the tag: it says how many cells follow */
	uint32_t mask = CHUNK_MASK(__atomic_load_n(&k->tag, __ATOMIC_RELAXED)) & ((1u << NLAYERS) - 1);
	uint64_t room = (size - off - CHUNK_HDR_BYTES) / sizeof(struct shmcfg__cell); /* cells that fit */
	/* a cell for each bit of the mask, in layer order */
	for (unsigned j = 0; mask; mask &= mask - 1, j++) {
		if (j >= room)
			return shmcfg__err(SHMCFG_E_CORRUPT, "layer reference %u lies outside the value heap", lref);
		unsigned l = (unsigned)__builtin_ctz(mask);
		lay[l].val = __atomic_load_n(&k->l[j].val, __ATOMIC_RELAXED);
		lay[l].meta = __atomic_load_n(&k->l[j].meta, __ATOMIC_RELAXED) | META_SET;
	}
	return 0;
}

/* The heap's top as the header says, never past the heap: a scribbled top
 * must not let a writer past the mapping. */
static uint64_t top_of(const shmcfg *h)
{
	uint64_t top = h->hdr->heap_top;
	return top < h->lay.heap_size ? top : h->lay.heap_size;
}

static int heap_damaged(const shmcfg *h, const char *what, uint64_t off)
{
	return shmcfg__err(SHMCFG_E_CORRUPT, "%s: value heap damaged (%s at offset %llu): "
			   "recreate the segment (shmctl create --force)", h->name, what,
			   (unsigned long long)off);
}

/*
 * A chunk of at least `bytes` bytes (header and cells included), with no
 * references yet: its offset in *off. From the free list of its class, else
 * carved from the untouched end, else from a larger class's free list.
 */
int shmcfg__heap_alloc(shmcfg *h, uint64_t bytes, const char *for_opt, uint64_t *off)
{
	struct seg_header *hd = h->hdr;
	char *heap = seg_heap(h);
	uint64_t top = top_of(h), size = h->lay.heap_size;
	unsigned c = class_for(bytes);
	if (c == HEAP_CLASSES)
		return shmcfg__err(SHMCFG_E_FULL, "%s: %s: %llu bytes of layer values do not fit one chunk",
				   h->name, for_opt, (unsigned long long)bytes);
	uint64_t o = 0;
	unsigned got = c;
	if (hd->heap_free[c])
		o = hd->heap_free[c];
	else if (top <= size && class_bytes(c) <= size - top) {
		o = top;
		struct chunk *k = (struct chunk *)(heap + o);
		k->tag = CHUNK_MAGIC << 24 | c << 8;
		k->refs = 0;
		/* the tag before the top: a writer that dies here leaves a
		 * chunk that the sweep can walk over */
		/* relaxed: copy-readers load the top (seqlock.c) and validate
		 * what they copied by the stamp, not by this store */
		__atomic_store_n(&hd->heap_top, top + class_bytes(c), __ATOMIC_RELAXED);
		top = hd->heap_top;
	} else
		for (got = c + 1; got < HEAP_CLASSES && !hd->heap_free[got]; got++)
			;
	if (!o && got < HEAP_CLASSES)
		o = hd->heap_free[got];
	if (!o)
		return shmcfg__err(SHMCFG_E_FULL,
				   "%s: value heap of %llu bytes is full (%llu in use) storing %s: "
				   "create the segment with a larger heap (shmctl create --size)",
				   h->name, (unsigned long long)size, (unsigned long long)hd->heap_live,
				   for_opt);
	struct chunk *k = chunk_at(heap, top, o);
	if (!k || CHUNK_CLASS(k->tag) != got || k->refs != 0)
		return heap_damaged(h, "free list", o);
	if (o == hd->heap_free[got])
		hd->heap_free[got] = *next_of(k);
	k->tag = CHUNK_MAGIC << 24 | got << 8; /* no layer yet: the caller writes them */
	hd->heap_live += class_bytes(got);
	*off = o;
	return 0;
}

/* One more slot refers to lref (nothing to count if it names no chunk). */
int shmcfg__heap_ref(shmcfg *h, uint32_t lref)
{
	if (!lref_names_chunk(lref))
		return 0;
	uint64_t off = (uint64_t)lref << LREF_SHIFT;
	struct chunk *k = chunk_at(seg_heap(h), top_of(h), off);
	if (!k || k->refs >= h->lay.nslots)
		return heap_damaged(h, "layer reference", off);
	k->refs++;
	return 0;
}

/* One slot fewer refers to lref (checked by shmcfg__heap_ref when it was
 * taken): free the chunk with the last one. */
void shmcfg__heap_unref(shmcfg *h, uint32_t lref)
{
	if (!lref_names_chunk(lref))
		return;
	struct seg_header *hd = h->hdr;
	uint64_t off = (uint64_t)lref << LREF_SHIFT;
	struct chunk *k = chunk_at(seg_heap(h), top_of(h), off);
	if (!k || k->refs == 0)
		return; /* damaged: the next sweep will find it */
	if (--k->refs)
		return;
	unsigned c = CHUNK_CLASS(k->tag);
	*next_of(k) = hd->heap_free[c];
	hd->heap_free[c] = off;
	hd->heap_live -= hd->heap_live >= class_bytes(c) ? class_bytes(c) : hd->heap_live;
}

/*
 * Whether slot s holds whole, published content: the generation it holds
 * (its `base`), or 0 if it holds none (empty, half-written by a writer that
 * died, or stamped with a generation that was never published).
 */
uint64_t shmcfg__slot_base(const shmcfg *h, uint32_t s, uint64_t stamp, uint64_t cur_g)
{
	uint64_t base = slot_at(h, s)->base;
	if ((stamp & SLOT_BUSY) || base == 0 || base > cur_g)
		return 0;
	return stamp == base || stamp == 0 ? base : 0;
}

/*
 * Rebuild the reference counts, the free lists and heap_live from the slots,
 * after a writer died mid-commit (`wip` set). Walks the heap chunk by chunk:
 * O(heap + slots x options), once per dead writer.
 *
 * Every reference of every slot is counted, whether or not the slot holds a
 * whole generation: that is what commits keep (set_lref counts each slot's
 * references whatever it holds), and it is the only safe choice for a slot
 * marked busy by a writer that died before its pin check: a reader that
 * validated the slot's generation just before the mark may be reading it,
 * its cells and its chunks (reclaim.c; design.md "A commit", step 3), so
 * none of them may be freed or reused until a writer takes the slot
 * properly. A slot that holds no whole generation keeps its references but
 * loses its `base` (its next writer copies it whole), and one stamped beyond
 * the current generation (its writer died between stamp and publication)
 * loses that stamp: nobody can hold an unpublished generation, and neither
 * shmcfg_check() nor a later commit of that generation number may take it
 * for one. Only a reference that names no chunk (a scribble) is dropped,
 * after a busy mark: the slot's generation is then damaged anyway.
 */
int shmcfg__heap_sweep(shmcfg *h, uint64_t cur)
{
	struct seg_header *hd = h->hdr;
	char *heap = seg_heap(h);
	uint64_t top = hd->heap_top, live = 0;
	uint32_t n = h->lay.nopts;
	if (top > h->lay.heap_size || top < HEAP_FIRST)
		return heap_damaged(h, "top", top);
	uint8_t *start = shmcfg__calloc((top >> LREF_SHIFT) / 8 + 1, 1); /* chunk starts */
	if (!start)
		return shmcfg__nomem();
	int r = 0;
	for (uint64_t o = HEAP_FIRST; o < top;) {
		struct chunk *k = chunk_at(heap, top, o);
		if (!k) {
			r = heap_damaged(h, "chunk", o);
			goto out;
		}
		k->refs = 0;
		start[(o >> LREF_SHIFT) / 8] |= 1u << ((o >> LREF_SHIFT) % 8);
		o += class_bytes(CHUNK_CLASS(k->tag));
	}
	for (uint32_t s = 0; s < h->lay.nslots; s++) {
		struct slot_hdr *sl = slot_at(h, s);
		uint32_t *lr = slot_lrefs(h, sl);
		uint64_t stamp = __atomic_load_n(&sl->gen, __ATOMIC_ACQUIRE);
		bool whole = shmcfg__slot_base(h, s, stamp, cur_gen(cur)) != 0, marked = false;
		for (uint32_t i = 0; i < n; i++) {
			uint64_t o = (uint64_t)lr[i] << LREF_SHIFT;
			if (!lref_names_chunk(lr[i]) || (o < top && (start[(o >> LREF_SHIFT) / 8] >> ((o >> LREF_SHIFT) % 8) & 1)))
				continue;
			if (s == cur_slot(cur)) {
				r = heap_damaged(h, "a layer reference of the current slot", s);
				goto out;
			}
			if (!marked && !(stamp & SLOT_BUSY)) /* (C): no reader validates it from now */
				seq_write_begin(&sl->gen, SLOT_BUSY | STAMP_GEN(stamp));
			marked = true;
			whole = false;
			lr[i] = 0;
		}
		if (!whole) {
			sl->base = 0; /* copied whole when next taken */
			if (!marked && !(stamp & SLOT_BUSY) && STAMP_GEN(stamp) > cur_gen(cur))
				seq_write_end(&sl->gen, 0); /* never published: nobody holds it */
		}
		for (uint32_t i = 0; i < n; i++)
			if (lref_names_chunk(lr[i]))
				((struct chunk *)(heap + ((uint64_t)lr[i] << LREF_SHIFT)))->refs++;
	}
	memset(hd->heap_free, 0, sizeof hd->heap_free);
	for (uint64_t o = HEAP_FIRST; o < top;) {
		struct chunk *k = (struct chunk *)(heap + o);
		unsigned c = CHUNK_CLASS(k->tag);
		if (k->refs) {
			live += class_bytes(c);
		} else {
			*next_of(k) = hd->heap_free[c];
			hd->heap_free[c] = o;
		}
		o += class_bytes(c);
	}
	hd->heap_live = live;
out:
	shmcfg__free(start);
	return r;
}

/*
 * Whether the reference counts, free lists and heap_live agree with the
 * slots (for tests, with no writer at work): 0, or SHMCFG_E_CORRUPT with a
 * detail saying what disagrees.
 */
int shmcfg__heap_verify(shmcfg *h)
{
	struct seg_header *hd = h->hdr;
	char *heap = seg_heap(h);
	uint64_t top = top_of(h), live = 0, cur = __atomic_load_n(&hd->current, __ATOMIC_ACQUIRE);
	uint32_t *refs = shmcfg__calloc((top >> LREF_SHIFT) + 1, sizeof *refs);
	if (!refs)
		return shmcfg__nomem();
	int r = 0;
	for (uint32_t s = 0; s < h->lay.nslots; s++) {
		struct slot_hdr *sl = slot_at(h, s);
		uint64_t stamp = __atomic_load_n(&sl->gen, __ATOMIC_ACQUIRE);
		bool whole = shmcfg__slot_base(h, s, stamp, cur_gen(cur)) != 0;
		for (uint32_t i = 0; i < h->lay.nopts; i++) {
			uint32_t lr = slot_lrefs(h, sl)[i];
			if (lref_names_chunk(lr) && ((uint64_t)lr << LREF_SHIFT) < top)
				refs[lr]++;
			else if (lref_names_chunk(lr) && whole)
				r = shmcfg__err(SHMCFG_E_CORRUPT, "slot %u: reference %u beyond the top", s, lr);
		}
	}
	for (uint64_t o = HEAP_FIRST; !r && o < top;) {
		struct chunk *k = chunk_at(heap, top, o);
		if (!k) {
			r = shmcfg__err(SHMCFG_E_CORRUPT, "no chunk at %llu", (unsigned long long)o);
			break;
		}
		if (k->refs != refs[o >> LREF_SHIFT])
			r = shmcfg__err(SHMCFG_E_CORRUPT, "chunk at %llu counts %u references, the slots hold %u",
					(unsigned long long)o, k->refs, refs[o >> LREF_SHIFT]);
		live += k->refs ? class_bytes(CHUNK_CLASS(k->tag)) : 0;
		o += class_bytes(CHUNK_CLASS(k->tag));
	}
	if (!r && live != hd->heap_live)
		r = shmcfg__err(SHMCFG_E_CORRUPT, "heap_live %llu, the chunks in use hold %llu",
				(unsigned long long)hd->heap_live, (unsigned long long)live);
	for (unsigned c = 0; !r && c < HEAP_CLASSES; c++) { /* every free chunk is free, of its class */
		uint64_t o = hd->heap_free[c], steps = 0;
		while (!r && o) {
			struct chunk *k = chunk_at(heap, top, o);
			if (!k || k->refs || CHUNK_CLASS(k->tag) != c || ++steps > (top >> LREF_SHIFT))
				r = shmcfg__err(SHMCFG_E_CORRUPT, "free list %u is broken at %llu", c,
						(unsigned long long)o);
			else
				o = *next_of(k);
		}
	}
	shmcfg__free(refs);
	return r;
}

/* A fresh heap: nothing carved, nothing free. */
void shmcfg__heap_init(struct seg_header *hd)
{
	hd->heap_top = HEAP_FIRST;
	hd->heap_live = 0;
	memset(hd->heap_free, 0, sizeof hd->heap_free);
}
