/* SPDX-License-Identifier: MIT */
/*
 * Segments replaced and followed: creation's parts (segment.c), the
 * replacement (replace.c) and following it (follow.c). Included by
 * internal.h.
 */
#ifndef SHMCFG_REPLACE_H
#define SHMCFG_REPLACE_H

/* seg_header.retired: removed (its name unlinked; writers may still commit),
 * or replaced by a new incarnation (replace.c): frozen for good, `current`
 * naming FROZEN_SLOT (seqlock.h), so that inline readers take the slow path,
 * which follows the successor. */
#define RETIRED_REMOVED 1u
#define RETIRED_REPLACED 2u

/* segment.c: creation, its parts (replace.c makes segments too) */
int shmcfg__create_opts_check(shmcfg_create_opts *o);
int shmcfg__create_object(const char *name, const char *path, struct seg_header *lay, const void *schema_bytes,
			  mode_t mode, gid_t gid, int (*first)(shmcfg *h, void *ctx), void *ctx, shmcfg **ret);

/* replace.c: a segment of that name replaced by the one laid out (1: there
 * is none this library can replace: the caller removes and creates) */
int shmcfg__replace(const char *name, const char *path, struct seg_header *lay, const void *schema_bytes,
		    const shmcfg_create_opts *o, char *const *envp, shmcfg **ret);

/* follow.c: h's options in n's schema, by name, where the type is the same
 * and null no new value (else SHMCFG_NO_OPT); NULL on ENOMEM */
uint32_t *shmcfg__opt_map(const shmcfg *h, const shmcfg *n);
/* follow.c: map a segment's first pages, its accessors' copy among them,
 * at the handle's constant distance (SHMCFG__COPY_AT): 0 or -errno */
int shmcfg__copy_map(shmcfg *h, int fd, uint32_t nopts);
/* follow.c: with SHMCFG_ATTACH_PREFAULT, map a lazily mapped segment's
 * pages up to its heap's carved chunks */
void shmcfg__map_populate(shmcfg *h);
/* follow.c: the handle of the incarnation that serves h now */
shmcfg *shmcfg__live_slow(const shmcfg *h);
/* h itself, unless its segment was replaced: two relaxed loads while it was not */
static inline shmcfg *shmcfg__live(const shmcfg *h)
{
	if (__builtin_expect(!__atomic_load_n(&h->next, __ATOMIC_RELAXED) &&
				     __atomic_load_n(&h->hdr->retired, __ATOMIC_RELAXED) != RETIRED_REPLACED, 1))
		return (shmcfg *)h;
	return shmcfg__live_slow(h);
}
/* 0, or the error of a replaced handle that cannot follow (another schema) */
int shmcfg__stale(const shmcfg *h);
/* a commit whose segment was replaced: to the successor (0), or an error
 * (SHMCFG_E_RETIRED: none to follow; SHMCFG_E_SCHEMA: another schema) */
int shmcfg__follow_txn(shmcfg_txn *t);
/* whether the object h attached is the one at its name now */
bool shmcfg__at_name(const shmcfg *h);
/* Every entry point that reads or writes a segment's values works on the
 * live handle; one whose segment was replaced by one it cannot follow
 * fails, never returning the frozen values. */
#define SHMCFG_FOLLOW(h)                                                                          \
	do {                                                                                      \
		(h) = shmcfg__live(h);                                                            \
		if (__builtin_expect(__atomic_load_n(&(h)->follow_err, __ATOMIC_RELAXED) != 0, 0)) { \
			int fr_ = shmcfg__stale(h);                                               \
			if (fr_)                                                                  \
				return fr_;                                                       \
		}                                                                                 \
	} while (0)

/* opt, an option of h's schema, as the live handle's: h becomes the live
 * handle, opt its option; an option its schema lacks fails (follow.c) */
int shmcfg__map_opt(const shmcfg *from, const shmcfg *to, shmcfg_opt *opt);
/* opt, an option of the live handle's schema, as h0's (the inverse):
 * false, and SHMCFG_NO_OPT, if h0's schema has no option that maps to it */
bool shmcfg__unmap_opt(const shmcfg *h0, const shmcfg *live, shmcfg_opt *opt);
/* a history entry of the live handle as h0's: the changes of options h0's
 * schema lacks are left out */
void shmcfg__unmap_changes(const shmcfg *h0, const shmcfg *live, shmcfg_history_entry *e);
/* the same for a snapshot or a transaction acquired or begun on a handle
 * whose live one has another schema (origin: that handle; NULL: none) */
static inline int shmcfg__map_origin(const shmcfg *origin, const shmcfg *h, shmcfg_opt *opt)
{
	return __builtin_expect(origin == NULL, 1) ? 0 : shmcfg__map_opt(origin, h, opt);
}
#define SHMCFG_FOLLOW_OPT(h, opt)                                                                 \
	do {                                                                                      \
		const shmcfg *h0_ = (h);                                                          \
		SHMCFG_FOLLOW(h);                                                                 \
		if (__builtin_expect(h0_ != (h), 0)) {                                            \
			int mr_ = shmcfg__map_opt(h0_, (h), &(opt));                              \
			if (mr_)                                                                  \
				return mr_;                                                       \
		}                                                                                 \
	} while (0)

#endif
