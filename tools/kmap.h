/* SPDX-License-Identifier: MIT */
/*
 * A map of NUL-terminated string keys to entries the caller embeds struct
 * kent in (first member), with O(1) find, insert and remove, and the
 * entries in insertion order for iteration. shmcfg-sync keeps etcd's keys
 * in it (tens of thousands of keys under a prefix must cost each revision
 * only its own keys: issue 22).
 */
#ifndef SHMCFG_KMAP_H
#define SHMCFG_KMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kent {
	char *key;               /* owned by the entry's owner; kmap never frees it */
	uint64_t hash;
	struct kent *chain;      /* the bucket's next */
	struct kent *prev, *next; /* insertion order */
};

struct kmap {
	struct kent **tab;
	size_t cap, n; /* cap: a power of two, or 0 */
	struct kent *first, *last;
};

struct kent *kmap_find(const struct kmap *m, const char *key);
/* Adds e (its key set, not in the map yet): 0, or -ENOMEM. */
int kmap_insert(struct kmap *m, struct kent *e);
void kmap_remove(struct kmap *m, struct kent *e);
/* Frees the table (not the entries: the caller walks them first). */
void kmap_free(struct kmap *m);

#define kmap_each(m, e) for (struct kent *e = (m)->first; e; e = e->next)

#endif
