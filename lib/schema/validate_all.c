/* SPDX-License-Identifier: MIT */
/*
 * The schema validated whole: once, the first time a full scan needs it
 * (every option validated; the ranks an implication order that puts
 * impliers before their targets), and
 * everything, with every problem reported, for shmcfg_check. On the
 * private copy of validate.c, which the whole region is pinned into first.
 */
#include "internal.h"
#include "schema.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/* ------------------------------------------------------------------ */
/* The whole schema                                                   */
/* ------------------------------------------------------------------ */

/* Whether the whole-schema check `what` was made; after it, the release
 * store (pairs with the acquire load) publishes what it checked. */
static bool whole_done(const shmcfg *h, int what)
{
	return __atomic_load_n(&h->whole_ok[what], __ATOMIC_ACQUIRE);
}

static void whole_mark(const shmcfg *h, int what)
{
	__atomic_store_n(&h->whole_ok[what], 1, __ATOMIC_RELEASE);
}

int shmcfg__schema_all(const shmcfg *h)
{
	if (whole_done(h, WHOLE_ALL))
		return 0;
	/* a full scan reads every page: copy them in one call */
	int r = shmcfg__schema_pin(h, 0, h->lay.schema_size);
	/* bounded by the handle's budget of validation (validate.c, E70):
	 * past it, opt_use fails, saying why */
	for (uint32_t i = 0; !r && i < h->lay.nopts; i++)
		r = shmcfg__opt_use(h, i);
	if (!r)
		whole_mark(h, WHOLE_ALL);
	return r;
}

/* A segment just created by h (replace.c) from the schema region @p built
 * (hashed @p hash): a big schema validated whole and this uid's copy of it
 * made (vcopy.c), for the attaches to come. The library's own schema is
 * expected to validate. */
void shmcfg__schema_created(const shmcfg *h, const void *built, const uint8_t hash[16])
{
	if (!shmcfg__vcopy_wanted(h))
		return;
	if (shmcfg__schema_all(h) == 0)
		shmcfg__vcopy_make(h, built, hash);
	else
		shmcfg__log(SHMCFG_LOG_WARNING, "%s: no validated copy of the new segment's schema: %s", h->name,
			    shmcfg_errdetail());
	shmcfg__clear_err();
}

/*
 * The implication order, from the options' ranks (every option validated):
 * topo[rank] = id, each rank once, and every implier ranked before its
 * targets. 0, or 1 with msg saying why.
 */
static int rank_order(const shmcfg *h, uint32_t *topo, char *msg, size_t mlen)
{
	uint32_t n = h->lay.nopts;
	memset(topo, 0xff, (size_t)n * sizeof *topo);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t r = h->desc[i].rank; /* < n: shmcfg__opt_check */
		if (topo[r] != UINT32_MAX) {
			snprintf(msg, mlen, "schema: implication order: rank %u given twice", r);
			return 1;
		}
		topo[r] = i;
	}
	for (uint32_t i = 0; i < n; i++) {
		const struct opt_desc *d = &h->desc[i];
		for (uint32_t k = 0; k < d->implies_n; k++)
			if (h->desc[h->implies[d->implies_first + k].target].rank <= d->rank) {
				char name[96];
				shmcfg__opt_label(h, i, name);
				snprintf(msg, mlen, "%s: implication order is broken", name);
				return 1;
			}
	}
	return 0;
}

/*
 * Every option's dependents, which a commit follows when the option's cell
 * moves (resolve.c; first use checks only their bounds): each entry one of
 * the implications that target the option or an alias whose final target
 * it is, implications first, none twice; and every implication of an
 * option that is no alias, and every alias, listed under its target (one
 * left out would be ignored by commits). Every option validated. 0, 1 (msg
 * says why) or -ENOMEM.
 */
static int dependents_check(const shmcfg *h, char *msg, size_t mlen)
{
	uint32_t n = h->lay.nopts;
	unsigned char *seen = shmcfg__calloc((size_t)n + h->sch->nimplies + 1, 1); /* aliases, implications */
	if (!seen)
		return shmcfg__nomem();
	char name[96];
	int r = 0;
	for (uint32_t i = 0; !r && i < n; i++) {
		const struct opt_desc *d = &h->desc[i];
		bool aliases = false;
		for (uint32_t j = d->rdep_first; !r && j < d->rdep_first + d->rdep_n; j++) {
			uint32_t e = h->rdeps[j], a = e & ~RDEP_ALIAS;
			unsigned char *once = (e & RDEP_ALIAS) ? &seen[a] : &seen[n + e];
			bool ok = (e & RDEP_ALIAS) ? h->desc[a].alias_final == i : !aliases && h->implies[e].target == i;
			aliases = aliases || (e & RDEP_ALIAS);
			if (!ok || *once) {
				shmcfg__opt_label(h, i, name);
				snprintf(msg, mlen, "%s: dependent %u is not one of its implications or aliases, "
					 "repeats one, or comes after an alias", name, j - d->rdep_first);
				r = 1;
			}
			*once = 1;
		}
	}
	for (uint32_t i = 0; !r && i < n; i++) {
		const struct opt_desc *d = &h->desc[i];
		uint32_t missing = UINT32_MAX;
		if (d->alias != SHMCFG_NO_OPT && !seen[i])
			missing = d->alias_final;
		for (uint32_t k = d->implies_first; d->alias == SHMCFG_NO_OPT && k < d->implies_first + d->implies_n; k++)
			if (!seen[n + k])
				missing = h->implies[k].target;
		if (missing != UINT32_MAX) {
			shmcfg__opt_label(h, i, name);
			snprintf(msg, mlen, "%s: missing from the dependents of option %u", name, missing);
			r = 1;
		}
	}
	shmcfg__free(seen);
	return r;
}



/* Option ids by name (qsort_r): the names of validated descriptors */
static int name_cmp(const void *a, const void *b, void *arg)
{
	const shmcfg *h = arg;
	struct sref x = h->desc[*(const uint32_t *)a].name, y = h->desc[*(const uint32_t *)b].name;
	int c = memcmp(sstr(h, x), sstr(h, y), x.len < y.len ? x.len : y.len);
	return c ? c : (x.len > y.len) - (x.len < y.len);
}

/* ids[0..n) := every option's id, sorted by name: 0, or 1 with msg naming
 * two options of one name (a lookup stops at the first). */
static int sort_names(const shmcfg *h, uint32_t *ids, char *msg, size_t mlen)
{
	uint32_t n = h->lay.nopts;
	for (uint32_t i = 0; i < n; i++)
		ids[i] = i;
	qsort_r(ids, n, sizeof *ids, name_cmp, (void *)h);
	for (uint32_t k = 1; k < n; k++)
		if (name_cmp(&ids[k - 1], &ids[k], (void *)h) == 0) {
			char name[96];
			shmcfg__opt_label(h, ids[k], name);
			snprintf(msg, mlen, "%s: two options have this name (%u and %u)", name, ids[k - 1], ids[k]);
			return 1;
		}
	return 0;
}

/*
 * An array of every option's id made once from the validated schema
 * (make: 0, or 1 with why) and kept, or the reason it could not be made,
 * kept too (struct ids_once): a writer's schema that fails it (a spoiled
 * option, two options of one name, a rank twice) fails every later use at
 * no cost, as a lookup past LOOKUP_PROBES_MAX may ask for it each time.
 */

static int ids_once(const shmcfg *h, struct ids_once **slot, int (*make)(const shmcfg *, uint32_t *, char *, size_t),
		    const uint32_t **ret)
{
	struct ids_once *t = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
	if (!t) {
		int r = shmcfg__schema_all(h);
		if (r && r != SHMCFG_E_CORRUPT)
			return r; /* out of memory, say: not the schema's verdict */
		uint32_t n = h->lay.nopts;
		if (!(t = shmcfg__malloc(sizeof *t + (r ? 0 : (size_t)n * sizeof t->ids[0]))))
			return shmcfg__nomem();
		t->why[0] = 0;
		char msg[256];
		if (r)
			snprintf(t->why, sizeof t->why, "%s", shmcfg_errdetail());
		else if (make(h, t->ids, msg, sizeof msg))
			snprintf(t->why, sizeof t->why, "%s: %s", h->name, msg);
		/* acq_rel: publishes the array (or the reason) to the acquire
		 * load above; a thread that lost the race uses the winner's */
		struct ids_once *none = NULL;
		if (!__atomic_compare_exchange_n(slot, &none, t, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
			shmcfg__free(t);
			t = none;
		}
	}
	if (t->why[0])
		return shmcfg__err(SHMCFG_E_CORRUPT, "%s", t->why);
	*ret = t->ids;
	return 0;
}

/* The ids in implication order, impliers first (generation 1 resolves in
 * it), made from the ranks. */
int shmcfg__schema_topo(const shmcfg *h, const uint32_t **topo)
{
	return ids_once(h, &((shmcfg *)h)->topo, rank_order, topo);
}

/* The ids sorted by name, for the lookups the name index would make long
 * (options.c); two options of one name are refused, as the check does. */
int shmcfg__schema_by_name(const shmcfg *h, const uint32_t **by_name)
{
	return ids_once(h, &((shmcfg *)h)->by_name, sort_names, by_name);
}


/*
 * Every option found by its name (a lookup that misses one says "no such
 * option", which no check of an entry would catch), in O(the index + n log
 * n) whatever a writer put in it, every option validated, every entry in
 * range, scratch n ids: no two options of one name (a lookup stops at the
 * first), and each option in one entry (as the builder puts it), reached
 * from its name's home slot without an empty entry between (the run of full
 * entries that ends at it is longer than its distance from the home).
 * 0, 1 (msg says why) or a negative error.
 */
static int index_check(const shmcfg *h, uint32_t *scratch, char *msg, size_t mlen)
{
	uint32_t n = h->lay.nopts, size = h->sch->index_size, mask = size - 1;
	const uint32_t *ix = h->index_raw;
	char name[96];
	if (sort_names(h, scratch, msg, mlen))
		return 1;
	/* scratch[i]: the entry that holds option i, UINT32_MAX if none */
	memset(scratch, 0xff, (size_t)n * sizeof *scratch);
	uint32_t empty = UINT32_MAX;
	for (uint32_t k = 0; k < size; k++) {
		uint32_t id = ix[k];
		if (id == UINT32_MAX) {
			empty = k;
			continue;
		}
		if (scratch[id] != UINT32_MAX) {
			shmcfg__opt_label(h, id, name);
			snprintf(msg, mlen, "%s: in the name index twice (entries %u and %u)", name, scratch[id], k);
			return 1;
		}
		scratch[id] = k;
	}
	/* n < size entries are full (the index is at least twice n): one is
	 * empty; run[k], the full entries ending at k, is made walking from it */
	uint32_t *run = shmcfg__calloc(size, sizeof *run);
	if (!run)
		return shmcfg__nomem();
	for (uint32_t step = 1, len = 0; step <= size; step++) {
		uint32_t k = (empty + step) & mask;
		len = ix[k] == UINT32_MAX ? 0 : len + 1;
		run[k] = len;
	}
	int r = 0;
	for (uint32_t i = 0; i < n && !r; i++) {
		const struct opt_desc *d = &h->desc[i];
		uint32_t k = scratch[i], home = (uint32_t)shmcfg__name_hash(sstr(h, d->name), d->name.len) & mask;
		if (k == UINT32_MAX || ((k - home) & mask) >= run[k]) {
			shmcfg__opt_label(h, i, name);
			snprintf(msg, mlen, "%s: not found by its name in the index", name);
			r = 1;
		}
	}
	shmcfg__free(run);
	return r;
}

/* Report a problem; the first one is kept for the error detail. */
#define PROBLEM(...)                                              \
	do {                                                      \
		snprintf(pm, sizeof pm, __VA_ARGS__);             \
		if (fn)                                           \
			fn(pm, ud);                               \
		if (!bad++)                                       \
			memcpy(first, pm, sizeof first);          \
	} while (0)

/*
 * The whole schema, for shmcfg_check: every option, every implication
 * (reachable or not), every index entry (and every option found by its
 * name), the implication order of the ranks, and every option's dependents.
 * The whole region is
 * copied first. Returns the number of problems, each reported through fn,
 * the first as the error detail; a negative error if the check could not be
 * made (no verdict on the segment).
 */
int shmcfg__schema_validate(const shmcfg *h, void (*fn)(const char *, void *), void *ud)
{
	char msg[256], pm[256], first[256] = "";
	int bad = 0, r;
	uint32_t n = h->lay.nopts;
	const struct schema_hdr *sh = h->sch;
	if ((r = shmcfg__schema_pin(h, 0, h->lay.schema_size))) {
		if (r != SHMCFG_E_CORRUPT)
			return r;
		PROBLEM("%s", shmcfg_errdetail());
		return bad;
	}
	/* each check bounded, and all of them by the schema's size */
	shmcfg__scan_start();
	for (uint32_t i = 0; i < n && !shmcfg__scan_over(h); i++) {
		if ((r = shmcfg__opt_check(h, i, msg, sizeof msg)) < 0)
			return r;
		if (r) {
			PROBLEM("%s", msg);
		}
	}
	for (uint32_t k = 0; k < sh->nimplies && !shmcfg__scan_over(h); k++) {
		uint32_t t = h->implies[k].target;
		if (t >= n || (r = shmcfg__cell_check(h, &h->implies[k].value, h->desc[t].type)) > 0)
			PROBLEM("schema: implication %u is invalid", k);
		else if (r < 0)
			return r;
	}
	if (shmcfg__scan_over(h))
		PROBLEM("%s", SHMCFG__SCAN_OVER);
	for (uint32_t k = 0; k < sh->index_size; k++)
		if (h->index_raw[k] != UINT32_MAX && h->index_raw[k] >= n)
			PROBLEM("schema: index entry %u out of range", k);
	if (bad)
		goto out;
	uint32_t *pos = shmcfg__malloc((size_t)(n ? n : 1) * sizeof *pos);
	if (!pos)
		return shmcfg__nomem();
	if ((r = index_check(h, pos, msg, sizeof msg)) < 0) {
		shmcfg__free(pos);
		return r;
	}
	if (r)
		PROBLEM("%s", msg);
	if (rank_order(h, pos, msg, sizeof msg))
		PROBLEM("%s", msg);
	shmcfg__free(pos);
	if ((r = dependents_check(h, msg, sizeof msg)) < 0)
		return r;
	if (r)
		PROBLEM("%s", msg);
out:
	if (bad)
		shmcfg__err(SHMCFG_E_CORRUPT, "%s: %s", h->name, first);
	return bad;
}
#undef PROBLEM
