/* SPDX-License-Identifier: MIT */
/*
 * The history's place in the segment (doc/design.md, "The history"): an
 * index of hist_n entries, one per commit (entry g % hist_n holds generation
 * g), then a byte ring of their records. lib/commit/history.c reads and writes it.
 */
#ifndef SHMCFG_HISTORY_H
#define SHMCFG_HISTORY_H

#include "internal.h"

#define SEG_DEFAULT_HISTORY 1000u /* commits the history keeps */
#define SEG_MIN_HISTORY 8u
#define SEG_MAX_HISTORY (1u << 20)
#define HIST_BYTES_PER_ENTRY 64u /* of the byte ring, per entry (at least HIST_MIN_RING) */
#define HIST_MIN_RING 4096u

/*
 * One commit of the history (history.c): a seqlock of its own (stamp 0
 * while written), and its record in the history's byte ring at position
 * `pos` (positions grow forever: the byte is pos % hist_ring_size).
 */
struct hist_ent {
	uint64_t gen;            /* stamp: the generation, 0 while written */
	uint64_t time_ns;        /* CLOCK_REALTIME */
	uint64_t pos;            /* the record: ring position ... */
	uint64_t cluster_rev;    /* the cluster revision the generation carries */
	uint32_t len;            /* ... and bytes | HIST_NO_VALUES */
	uint32_t nchanges;       /* layer changes of the commit */
	int32_t pid;
	uint32_t uid;
	char comm[16];           /* the committer's /proc/self/comm */
};
#define HIST_NO_VALUES (1u << 31) /* the record holds who, not the changes: too big */
_Static_assert(sizeof(struct hist_ent) == 64, "history entries are one cache line");

static inline struct hist_ent *hist_at(const shmcfg *h, uint64_t gen)
{
	return (struct hist_ent *)(h->base + h->lay.hist_off) + gen % h->lay.hist_n;
}
/* history_write.c: a commit's record in the history, made at time_ns (realtime);
 * the changes ch[0, n) that build `b` applied, with the cells it kept of
 * each (b->hist) */
struct build;
int shmcfg__hist_write(shmcfg *h, uint64_t gen, uint64_t time_ns, const struct change *ch, size_t n,
		       const struct build *b, uint64_t cluster_rev, const shmcfg_txn *origin);
/* history_write.c: bytes into the ring at pos, wrapping */
void shmcfg__hist_ring_write(shmcfg *h, uint64_t pos, const char *src, uint64_t len);
/* history.c: generation gen's entry and its record (malloc'd; NULL when its
 * bytes are gone): 0, -ENOENT, -ENOMEM */
int shmcfg__hist_entry(const shmcfg *h, uint64_t gen, struct hist_ent *e, char **rec, uint32_t *rec_len);
/* history.c: the layer changes that take generation `from` back to `to`
 * (< from), sorted, each value owned; their bytes and `to`'s cluster revision */
int shmcfg__hist_undo(const shmcfg *h, uint64_t from, uint64_t to, struct change **ret, size_t *nret,
		      uint64_t *bytes, uint64_t *cluster_rev);
void shmcfg__hist_undo_free(struct change *ch, size_t n);

#endif
