/*
 * What attach checks before it trusts a segment: the header against the
 * object's real size (every region inside it, in order, within caps), and
 * the schema region (every descriptor, string reference, index entry and the
 * implication order). Everything is checked on the private copies.
 */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/* Everything in the header checked against the object's real size. */
int shmcfg__header_check(const struct seg_header *hd, uint64_t real_size, const char *name)
{
	if (hd->magic != SEG_MAGIC)
		return shmcfg__err(SHMCFG_E_MAGIC, "%s: not a shmcfg segment (magic %016llx)", name,
				   (unsigned long long)hd->magic);
	if (hd->layout_version != SEG_LAYOUT_VERSION)
		return shmcfg__err(SHMCFG_E_VERSION,
				   "%s: segment layout version %u, this library reads version %u", name,
				   hd->layout_version, SEG_LAYOUT_VERSION);
	if (hd->header_size != sizeof *hd)
		return shmcfg__err(SHMCFG_E_CORRUPT, "%s: header size %u, expected %zu", name,
				   hd->header_size, sizeof *hd);
	if (hd->total_size != real_size)
		return shmcfg__err(SHMCFG_E_CORRUPT,
				   "%s: header says %llu bytes but the object has %llu (truncated?)",
				   name, (unsigned long long)hd->total_size,
				   (unsigned long long)real_size);
	uint64_t n = hd->nopts, sz = real_size, slots_bytes, tmp;
	if (n == 0 || n > SEG_MAX_OPTS || hd->nslots < 2 || hd->nslots > SEG_MAX_SLOTS ||
	    hd->nreaders == 0 || hd->nreaders > SEG_MAX_READERS)
		return shmcfg__err(SHMCFG_E_CORRUPT, "%s: bad counts (options %u, slots %u, readers %u)",
				   name, hd->nopts, hd->nslots, hd->nreaders);
	/* regions in order, each inside the object, none overlapping */
	if (hd->ring_size < SEG_MIN_RING || hd->ring_size > SEG_MAX_RING ||
	    (hd->ring_size & (hd->ring_size - 1)))
		return shmcfg__err(SHMCFG_E_CORRUPT, "%s: bad commit ring size %u", name, hd->ring_size);
	if (hd->schema_off != SEG_HEADER_BYTES || hd->schema_size > sz ||
	    hd->schema_off > sz - hd->schema_size ||
	    hd->log_off < hd->schema_off + hd->schema_size ||
	    hd->log_off > sz - SEG_LOG_ENTRIES * sizeof(struct log_ent) ||
	    hd->ring_off < hd->log_off + SEG_LOG_ENTRIES * sizeof(struct log_ent) || hd->ring_off % 64 ||
	    hd->ring_off > sz - (uint64_t)hd->ring_size * 4 ||
	    hd->readers_off < hd->ring_off + (uint64_t)hd->ring_size * 4 ||
	    hd->readers_off % 64 || hd->readers_off > sz - (uint64_t)hd->nreaders * 64 ||
	    hd->slots_off < hd->readers_off + (uint64_t)hd->nreaders * 64 || hd->slots_off % 64 ||
	    hd->slot_size % 64 ||
	    __builtin_mul_overflow(hd->slot_size, (uint64_t)hd->nslots, &slots_bytes) ||
	    hd->slots_off > sz || slots_bytes > sz - hd->slots_off || hd->log_off % 8 ||
	    hd->heap_off < hd->slots_off + slots_bytes || hd->heap_off % 64 || hd->heap_off > sz ||
	    hd->heap_size > sz - hd->heap_off)
		return shmcfg__err(SHMCFG_E_CORRUPT, "%s: a region lies outside the object", name);
	/* slot layout: header, cells, layer references */
	if (hd->cells_off != SLOT_CELLS_OFF ||
	    hd->lrefs_off != hd->cells_off + n * sizeof(struct shmcfg__cell) ||
	    __builtin_add_overflow(hd->lrefs_off, n * sizeof(uint32_t), &tmp) || tmp > hd->slot_size ||
	    hd->heap_size > SEG_MAX_HEAP_BYTES || hd->heap_size < 1024 ||
	    hd->schema_size > SEG_MAX_SCHEMA_BYTES)
		return shmcfg__err(SHMCFG_E_CORRUPT, "%s: bad slot layout", name);
	return 0;
}

static bool sref_ok(const shmcfg *h, struct sref r)
{
	return r.off < h->strings_size && r.len < h->strings_size - r.off &&
	       h->strings[r.off + r.len] == 0 && memchr(h->strings + r.off, 0, r.len) == NULL;
}

static bool list_ok(const shmcfg *h, struct sref r, uint32_t count)
{
	if (count == 0 || r.len == 0)
		return count == 0 && r.len == 0;
	if (r.off >= h->strings_size || r.len >= h->strings_size - r.off ||
	    h->strings[r.off + r.len] != 0 || h->strings[r.off + r.len - 1] != 0)
		return false;
	uint32_t c = 0;
	for (uint32_t i = 0; i < r.len; i++)
		c += h->strings[r.off + i] == 0;
	return c == count;
}

static bool cell_ok(const shmcfg *h, const struct shmcfg__cell *c, shmcfg_type type)
{
	shmcfg_value v;
	return META_TYPE(c->meta) == (unsigned)type &&
	       shmcfg__value_from_cell(c, h->strings, h->strings_size, &v) == 0;
}

/* Report a problem; the first one is kept for the error detail. */
#define PROBLEM(...)                                              \
	do {                                                      \
		snprintf(msg, 256, __VA_ARGS__);                  \
		if (fn)                                           \
			fn(msg, ud);                              \
		if (!bad++)                                       \
			memcpy(first, msg, 256);                  \
	} while (0)

static int schema_check(shmcfg *h, void (*fn)(const char *, void *), void *ud, char *msg, char *first)
{
	int bad = 0;
	const struct schema_hdr *sh = h->sch;
	uint64_t size = h->lay.schema_size, n = sh->nopts;
	if (n != h->lay.nopts || n == 0 || n > SEG_MAX_OPTS) {
		PROBLEM("schema: option count %llu disagrees with the header (%u)",
			(unsigned long long)n, h->lay.nopts);
		return bad;
	}
	if (sh->index_size < 2 * n || (sh->index_size & (sh->index_size - 1)))
		PROBLEM("schema: index size %u is invalid", sh->index_size);
	struct {
		uint64_t off, bytes;
		const char *what;
	} regions[] = {
		{sh->desc_off, n * sizeof(struct opt_desc), "descriptors"},
		{sh->implies_off, (uint64_t)sh->nimplies * sizeof(struct implies_ent), "implications"},
		{sh->index_off, (uint64_t)sh->index_size * 4, "index"},
		{sh->order_off, n * 4, "order"},
		{sh->topo_off, n * 4, "topological order"},
		{sh->rdeps_off, (uint64_t)sh->nrdeps * 4, "dependents"},
		{sh->strings_off, sh->strings_size, "strings"},
	};
	for (size_t i = 0; i < sizeof regions / sizeof regions[0]; i++)
		if (regions[i].off < sizeof *sh || regions[i].off > size ||
		    regions[i].bytes > size - regions[i].off || (regions[i].off & 3))
			PROBLEM("schema: %s region out of bounds", regions[i].what);
	if (sh->strings_size == 0)
		PROBLEM("schema: empty strings region");
	if (bad)
		return bad;
	const char *base = (const char *)sh;
	h->desc = (const struct opt_desc *)(base + sh->desc_off);
	h->implies = (const struct implies_ent *)(base + sh->implies_off);
	h->index = (const uint32_t *)(base + sh->index_off);
	h->order = (const uint32_t *)(base + sh->order_off);
	h->topo = (const uint32_t *)(base + sh->topo_off);
	h->rdeps = (const uint32_t *)(base + sh->rdeps_off);
	h->strings = base + sh->strings_off;
	h->strings_size = sh->strings_size;
	if (h->strings[h->strings_size - 1] != 0)
		PROBLEM("schema: strings region does not end in NUL");
	if (bad)
		return bad;
	for (uint32_t i = 0; i < n; i++) {
		const struct opt_desc *d = opt_d(h, i);
		if (!sref_ok(h, d->name) || !sref_ok(h, d->doc) || !sref_ok(h, d->knob) ||
		    !sref_ok(h, d->deprecated)) {
			PROBLEM("schema: option %u has a bad string reference", i);
			continue;
		}
		const char *name = sstr(h, d->name);
		if (!shmcfg_type_name(d->type))
			PROBLEM("%s: unknown type %u", name, d->type);
		else if (!cell_ok(h, &d->def, d->type) || !cell_ok(h, &d->choices, SHMCFG_LIST) ||
			 ((d->flags & DESC_F_HAS_MIN) && !cell_ok(h, &d->min, d->type)) ||
			 ((d->flags & DESC_F_HAS_MAX) && !cell_ok(h, &d->max, d->type)))
			PROBLEM("%s: bad default, range or choices", name);
		if (!list_ok(h, d->env_default, d->n_env_default) ||
		    !list_ok(h, d->env_force, d->n_env_force))
			PROBLEM("%s: bad environment variable list", name);
		if ((d->alias != SHMCFG_NO_OPT && d->alias >= n) || d->alias_final >= n ||
		    opt_d(h, d->alias_final)->alias != SHMCFG_NO_OPT ||
		    opt_d(h, d->alias_final)->type != d->type)
			PROBLEM("%s: bad alias", name);
		if (d->implies_first > sh->nimplies || d->implies_n > sh->nimplies - d->implies_first)
			PROBLEM("%s: implications out of bounds", name);
		if (d->rank >= n || d->rdep_first > sh->nrdeps || d->rdep_n > sh->nrdeps - d->rdep_first)
			PROBLEM("%s: rank or dependents out of bounds", name);
		if (h->order[i] >= n || h->topo[i] >= n)
			PROBLEM("schema: order entry %u out of range", i);
	}
	for (uint32_t k = 0; k < sh->nimplies; k++)
		if (h->implies[k].target >= n || h->implies[k].implier >= n ||
		    !cell_ok(h, &h->implies[k].value, opt_d(h, h->implies[k].target)->type))
			PROBLEM("schema: implication %u is invalid", k);
	for (uint32_t k = 0; k < sh->index_size; k++)
		if (h->index[k] != UINT32_MAX && h->index[k] >= n)
			PROBLEM("schema: index entry %u out of range", k);
	if (bad)
		return bad;
	/* topo must be a permutation that puts each implier before its targets,
	 * else a commit could resolve a target before its implier */
	uint32_t *pos = shmcfg__malloc(n * sizeof *pos);
	if (!pos) /* not a problem of the schema */
		return shmcfg__nomem();
	memset(pos, 0xff, n * sizeof *pos);
	for (uint32_t i = 0; i < n; i++) {
		if (pos[h->topo[i]] != UINT32_MAX)
			PROBLEM("schema: topological order repeats option %u", h->topo[i]);
		pos[h->topo[i]] = i;
	}
	for (uint32_t i = 0; !bad && i < n; i++) {
		const struct opt_desc *d = opt_d(h, i);
		if (d->rank != pos[i])
			PROBLEM("%s: rank disagrees with the topological order", sstr(h, d->name));
		for (uint32_t k = 0; k < d->implies_n; k++)
			if (pos[h->implies[d->implies_first + k].target] <= pos[i] ||
			    h->implies[d->implies_first + k].implier != i)
				PROBLEM("%s: implication order is broken", sstr(h, d->name));
		/* each dependent depends on this option: an implication of it, or an alias of it */
		for (uint32_t j = d->rdep_first; j < d->rdep_first + d->rdep_n; j++) {
			uint32_t e = h->rdeps[j], a = e & ~RDEP_ALIAS;
			if ((e & RDEP_ALIAS) ? a >= n || opt_d(h, a)->alias_final != i || a == i
					     : e >= sh->nimplies || h->implies[e].target != i)
				PROBLEM("%s: bad dependent %u", sstr(h, d->name), e);
		}
	}
	shmcfg__free(pos);
	return bad;
}

/*
 * Check the schema copy (h->sch ...) completely: every later use trusts it.
 * Returns the number of problems; each is reported through fn, and the first
 * becomes the error detail (the checks overwrite the detail as they go).
 * -ENOMEM if it could not check: no verdict on the segment.
 */
int shmcfg__schema_validate(shmcfg *h, bool deep, void (*fn)(const char *, void *), void *ud)
{
	(void)deep; /* the schema is small and read once: always checked whole */
	char msg[256], first[256] = "";
	int bad = schema_check(h, fn, ud, msg, first);
	if (bad < 0) /* out of memory: not a verdict */
		return bad;
	if (bad)
		shmcfg__err(SHMCFG_E_CORRUPT, "%s: %s", h->name, first);
	return bad;
}
#undef PROBLEM
