/* SPDX-License-Identifier: MIT */
/* The string-keyed map of tools/kmap.h: chained buckets, doubled at a load
 * of 1. The keys come from etcd, where any writer chooses them: the hash is
 * XXH3 with a seed drawn at random per process, so that nobody can make
 * keys that share a bucket (a flood of them would make every find linear). */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <xxhash.h>

#include "kmap.h"

static uint64_t hash_of(const char *s)
{
	static uint64_t seed;
	if (!seed && getrandom(&seed, sizeof seed, GRND_NONBLOCK) != sizeof seed)
		seed = (uint64_t)clock() * 0x9e3779b97f4a7c15ull ^ (uint64_t)time(NULL); /* no entropy yet: still per run */
	seed |= 1;
	return XXH3_64bits_withSeed(s, strlen(s), seed);
}

struct kent *kmap_find(const struct kmap *m, const char *key)
{
	if (!m->cap)
		return NULL;
	uint64_t h = hash_of(key);
	for (struct kent *e = m->tab[h & (m->cap - 1)]; e; e = e->chain)
		if (e->hash == h && !strcmp(e->key, key))
			return e;
	return NULL;
}

static int grow(struct kmap *m)
{
	size_t cap = m->cap ? m->cap * 2 : 64;
	struct kent **tab = calloc(cap, sizeof *tab);
	if (!tab)
		return -ENOMEM;
	for (struct kent *e = m->first; e; e = e->next) {
		e->chain = tab[e->hash & (cap - 1)];
		tab[e->hash & (cap - 1)] = e;
	}
	free(m->tab);
	m->tab = tab;
	m->cap = cap;
	return 0;
}

int kmap_insert(struct kmap *m, struct kent *e)
{
	if (m->n >= m->cap && grow(m))
		return -ENOMEM;
	e->hash = hash_of(e->key);
	struct kent **b = &m->tab[e->hash & (m->cap - 1)];
	e->chain = *b;
	*b = e;
	e->prev = m->last;
	e->next = NULL;
	if (m->last)
		m->last->next = e;
	else
		m->first = e;
	m->last = e;
	m->n++;
	return 0;
}

void kmap_remove(struct kmap *m, struct kent *e)
{
	struct kent **p = &m->tab[e->hash & (m->cap - 1)];
	while (*p != e)
		p = &(*p)->chain;
	*p = e->chain;
	if (e->prev)
		e->prev->next = e->next;
	else
		m->first = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		m->last = e->prev;
	m->n--;
}

void kmap_free(struct kmap *m)
{
	free(m->tab);
	memset(m, 0, sizeof *m);
}
