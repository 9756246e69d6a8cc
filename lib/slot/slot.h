/* SPDX-License-Identifier: MIT */
/*
 * A slot's contents, the core of a commit (doc/design.md, "A commit"): the value heap's chunks
 * (heap.c), building a slot's effective values from what changed
 * (resolve.c) and the sums of the config hash and the checksum (hash.c).
 * Used by commits (publish.c), patched views (patch.c), snapshots and the
 * check; lib/layout.h holds the layout they share.
 */
#ifndef SHMCFG_SLOT_H
#define SHMCFG_SLOT_H

#include "internal.h"

/*
 * A chunk of the value heap: the layers of one option that are set (their
 * cells, lowest layer first, then the bytes of their strings), immutable once
 * a published slot refers to it, and freed when the last slot referring to it
 * is rewritten (refs counts slots). A free chunk keeps the free list's link
 * where its first cell was. Offsets are multiples of 16 from the heap's
 * start; a slot's reference is offset / 16.
 */
#define CHUNK_MAGIC 0x6bu
struct chunk {
	uint32_t tag;            /* CHUNK_MAGIC << 24 | size class << 8 | mask of the layers set */
	uint32_t refs;           /* slots whose reference names this chunk */
	struct shmcfg__cell l[]; /* one per layer set */
};
#define CHUNK_HDR_BYTES sizeof(struct chunk)
#define CHUNK_CLASS(tag) (((tag) >> 8) & 0xff)
#define CHUNK_MASK(tag) ((tag) & 0xff)
#define LREF_SHIFT 4

/*
 * Layer references that name no chunk: the option's one set layer holds a
 * value that fits the cell (null, bool, int, float), and the option's cell
 * in the same slot is that value, with that layer's source (doc/design.md,
 * "Slots"). Only an option that is no alias and that nothing implies has
 * one: its cell is always its highest layer. The second says the cluster
 * agent wrote the layer (META_BY_CLUSTER), which the cell does not keep.
 * Offsets 16 and 32 lie below the heap's first chunk: no chunk has them.
 */
#define LREF_IN_CELL 1u
#define LREF_IN_CELL_BY_CLUSTER 2u
static inline bool lref_in_cell(uint32_t lref)
{
	return lref - LREF_IN_CELL <= LREF_IN_CELL_BY_CLUSTER - LREF_IN_CELL;
}
static inline bool lref_names_chunk(uint32_t lref)
{
	return lref > LREF_IN_CELL_BY_CLUSTER;
}
/* Whether option d (validated) may have one: it is no alias, and nothing
 * implies it (implications come first among its dependents, then aliases). */
static inline bool cell_may_hold_layer(const shmcfg *h, const struct opt_desc *d)
{
	return d->alias == SHMCFG_NO_OPT && (d->rdep_n == 0 || (h->rdeps[d->rdep_first] & RDEP_ALIAS));
}

/* heap.c: the value heap's chunks */
int shmcfg__chunk_read(const char *heap, uint64_t size, uint32_t lref, const struct shmcfg__cell *cell,
		       struct shmcfg__cell lay[NLAYERS]);
extern const struct shmcfg__cell shmcfg__no_layers[NLAYERS]; /* every layer unset, as chunk_read gives it */
int shmcfg__heap_alloc(shmcfg *h, uint64_t bytes, const char *for_opt, uint64_t *off);
/* What a chunk of that many bytes takes in the heap (its size class; the heap's cap if none holds it) */
uint64_t shmcfg__heap_chunk_bytes(uint64_t bytes);
int shmcfg__heap_ref(shmcfg *h, uint32_t lref);
void shmcfg__heap_unref(shmcfg *h, uint32_t lref);
uint64_t shmcfg__slot_base(const shmcfg *h, uint32_t s, uint64_t stamp, uint64_t cur_g);
int shmcfg__heap_sweep(shmcfg *h, uint64_t cur);
int shmcfg__heap_verify(shmcfg *h);
void shmcfg__heap_init(struct seg_header *hd);

/* idset.c: sets of option ids */
struct idset {              /* option ids, each once, in the order added */
	uint32_t *ids, *tab;     /* small_ids and no table (a scan) until outgrown */
	size_t n, tcap;
	uint32_t small_ids[8];
};
int shmcfg__ids_reserve(struct idset *s, size_t n);
/* Add id: true if it was not a member (false, and *err set, if the set
 * could not grow) */
bool shmcfg__ids_add(struct idset *s, uint32_t id, int *err);
void shmcfg__ids_free(struct idset *s);

/* resolve.c: building a slot's layers and effective values */
/* A change's layer cell before and after the build, as the history records it */
typedef struct shmcfg__cell hist_cells[2];
struct build {
	shmcfg *h;
	struct shmcfg__cell *cells;  /* the slot being built: its cells ... */
	uint32_t *lrefs;             /* ... and layer references */
	char *heap;                  /* the chunks: the segment's heap, or a private copy */
	uint64_t heap_size;
	bool shared;                 /* the segment's heap: chunks allocated and counted (heap.c) */
	bool patch;                  /* layer values written have source "patch" */
	bool by_cluster;             /* layer values written are the cluster agent's (META_BY_CLUSTER) */
	uint64_t priv_top;           /* private heap: where the next chunk goes */
	bool track;                  /* hash_sum and checksum up to date when shmcfg__resolve() returns 0 */
	uint64_t hash_sum[2], checksum;
	/* NULL, or where apply_changes() leaves each change's old and new layer
	 * cell (by its index in the changes it is given) for the history */
	hist_cells *hist;
	const struct change *hist_ch; /* those changes */
	/* NULL, or the layers of chunk seen_lref, read already (a chunk never
	 * changes while a slot refers to it) */
	const struct shmcfg__cell *seen;
	uint32_t seen_lref;
	/* from here on, shmcfg__build_init() sets the heads only: the small
	 * arrays are storage, read only below the counts */
	struct idset changed;        /* options whose cell or reference changed */
	struct idset seeds;          /* options whose layers changed: to resolve */
	struct idset queued;         /* options ever queued for resolution: each once */
	uint32_t *q;                 /* those not resolved yet: a min-heap by rank */
	size_t nq, qcap;
	uint32_t small_q[16];        /* q's first storage (a struct build is never copied) */
};

/*
 * An empty build of the slot (cells, lrefs) over heap: every field zero but
 * these. Not `= {...}`: that zeroes the 400 bytes whole, the small arrays
 * included, with a `rep stos` that cost a 10-option commit ~3% of its time.
 */
static inline void shmcfg__build_init(struct build *b, shmcfg *h, struct shmcfg__cell *cells, uint32_t *lrefs,
				      char *heap, uint64_t heap_size)
{
	memset(b, 0, offsetof(struct build, changed));
	b->h = h, b->cells = cells, b->lrefs = lrefs, b->heap = heap, b->heap_size = heap_size;
	struct idset *sets[] = {&b->changed, &b->seeds, &b->queued};
	for (size_t k = 0; k < 3; k++) {
		sets[k]->ids = sets[k]->tab = NULL;
		sets[k]->n = sets[k]->tcap = 0;
	}
	b->q = NULL;
	b->nq = b->qcap = 0;
}
int shmcfg__copy_opt(struct build *b, uint32_t i, const void *from);
int shmcfg__apply_changes(struct build *b, const struct change *ch, size_t n);
int shmcfg__resolve(struct build *b);
int shmcfg__resolve_all(struct build *b);
void shmcfg__build_free(struct build *b);
int shmcfg__resolve_patched(shmcfg *h, char *copy, char *heap, uint64_t top, uint64_t heap_size,
			    const shmcfg_opt *opts, const shmcfg_value *vals, size_t n, bool dependents);

/* hash.c: the config hash and the slot checksum, as sums over options */
int shmcfg__opt_digest(const shmcfg *h, uint32_t i, const struct shmcfg__cell *c, const char *heap,
		       uint64_t heap_size, uint64_t out[2]);
#define DIGEST_BATCH 16
int shmcfg__opt_digests(const shmcfg *h, const uint32_t *ids, size_t n, const struct shmcfg__cell *cells,
			const char *heap, uint64_t heap_size, uint64_t out[][2]);
/* a build's sums: option i's terms subtracted (sign -1) or added (+1), with
 * its digest when the caller has it (NULL: made here) */
int shmcfg__add_terms(struct build *b, uint32_t i, uint64_t sign, const uint64_t digest[2]);
int shmcfg__add_new_terms(struct build *b, const uint32_t *ids, size_t n);
void shmcfg__hash_final(const uint64_t sum[2], uint8_t out[16]);
uint64_t shmcfg__cell_mix(uint32_t i, const struct shmcfg__cell *c, uint32_t lref);
int shmcfg__slot_sums(const shmcfg *h, const void *slot, const char *heap, uint64_t heap_size,
		      uint64_t hash_sum[2], uint64_t *checksum);

#endif
