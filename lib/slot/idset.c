/* SPDX-License-Identifier: MIT */
/*
 * A set of option ids that remembers its members' order: a commit's changed
 * options, its seeds and what it queued (resolve.c). A few members (most
 * commits) are scanned in the set itself; more go to an open-addressing
 * table beside the ordered array.
 */
#include "internal.h"
#include "slot.h"

static void ids_insert(uint32_t *tab, size_t tcap, uint32_t id)
{
	for (size_t j = id * 2654435761u & (tcap - 1);; j = (j + 1) & (tcap - 1))
		if (!tab[j]) {
			tab[j] = id + 1;
			return;
		}
}

#define IDS_SMALL (sizeof ((struct idset *)0)->small_ids / sizeof ((struct idset *)0)->small_ids[0])
#define IDS_FIRST_TCAP (4 * IDS_SMALL) /* the first table: room for twice the inline members */

/* Move the set to a table of tcap entries (a power of two, at least twice
 * its members): 0 or -ENOMEM (the set unchanged). */
static int ids_grow(struct idset *s, size_t tcap)
{
	uint32_t *tab = shmcfg__calloc(tcap, sizeof *tab);
	uint32_t *ids = tab ? shmcfg__malloc(tcap / 2 * sizeof *ids) : NULL;
	if (!ids) {
		shmcfg__free(tab);
		return shmcfg__nomem();
	}
	size_t n = s->n;
	if (n)
		memcpy(ids, s->ids, n * sizeof *ids);
	shmcfg__ids_free(s);
	s->n = n;
	s->ids = ids;
	s->tab = tab;
	s->tcap = tcap;
	for (size_t k = 0; k < n; k++)
		ids_insert(tab, tcap, ids[k]);
	return 0;
}

/* Room for n members without growing again (a commit knows how many
 * options it changes): 0 or -ENOMEM. */
int shmcfg__ids_reserve(struct idset *s, size_t n)
{
	if (n <= IDS_SMALL)
		return 0;
	size_t tcap = IDS_FIRST_TCAP;
	while (tcap < 2 * (n + 1))
		tcap *= 2;
	return tcap > s->tcap ? ids_grow(s, tcap) : 0;
}

bool shmcfg__ids_add(struct idset *s, uint32_t id, int *err)
{
	if (!s->tab) { /* a few members (most commits): a scan, no table */
		if (!s->ids)
			s->ids = s->small_ids;
		for (size_t k = 0; k < s->n; k++)
			if (s->ids[k] == id)
				return false;
		if (s->n < IDS_SMALL) {
			s->ids[s->n++] = id;
			return true;
		}
	} else {
		for (size_t j = id * 2654435761u & (s->tcap - 1);; j = (j + 1) & (s->tcap - 1)) {
			if (s->tab[j] == id + 1)
				return false;
			if (!s->tab[j])
				break;
		}
	}
	if (2 * (s->n + 1) > s->tcap && (*err = ids_grow(s, s->tcap ? 2 * s->tcap : IDS_FIRST_TCAP)))
		return false;
	ids_insert(s->tab, s->tcap, id);
	s->ids[s->n++] = id;
	return true;
}

/* Forget the members (keeping nothing allocated). */
void shmcfg__ids_free(struct idset *s)
{
	if (s->tab) { /* else ids is small_ids, or NULL */
		shmcfg__free(s->ids);
		shmcfg__free(s->tab);
	}
	s->ids = s->tab = NULL;
	s->n = s->tcap = 0;
}
