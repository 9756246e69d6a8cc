/* SPDX-License-Identifier: MIT */
/*
 * What a snapshot gives: its generation, config hash, values and layers.
 * Taking and releasing one is the pin protocol: reclaim.c.
 */
#include "internal.h"
#include "slot.h"

#include <errno.h>
#include <string.h>

/* A NULL snapshot (or out): 0, zeroes, and the error detail; no generation is 0. */
uint64_t shmcfg_snapshot_generation(const shmcfg_snapshot *snap)
{
	SHMCFG_API_KEEP;
	if (!snap)
		return (void)shmcfg__err(-EINVAL, "%s: invalid argument (snap)", __func__), 0;
	return snap->gen;
}

void shmcfg_snapshot_hash(const shmcfg_snapshot *snap, uint8_t out[16])
{
	SHMCFG_API_KEEP;
	if (snap && out)
		shmcfg__hash_final(((const struct slot_hdr *)snap->slot)->hash_sum, out);
	else if (out)
		memset(out, 0, 16);
	if (!snap || !out)
		shmcfg__err(-EINVAL, "%s: invalid argument (snap && out)", __func__);
}

uint64_t shmcfg_snapshot_cluster_revision(const shmcfg_snapshot *snap)
{
	SHMCFG_API_KEEP;
	if (!snap)
		return (void)shmcfg__err(-EINVAL, "%s: invalid argument (snap)", __func__), 0;
	return ((const struct slot_hdr *)snap->slot)->cluster_rev;
}

int shmcfg_snapshot_get(const shmcfg_snapshot *snap, shmcfg_opt opt, shmcfg_value *ret)
{
	SHMCFG_API_ENTRY;
	assert_return(snap && ret, -EINVAL);
	const shmcfg *h = snap->h;
	int mr = shmcfg__map_origin(snap->origin, h, &opt); /* another schema: follow.c */
	if (mr)
		return mr;
	int ur = shmcfg__opt_use(h, opt);
	if (ur)
		return ur;
	int r = shmcfg__cell_value(h, slot_cells(h, snap->slot) + opt, snap->heap, snap->heap_size, ret);
	if (!r && ret->type != opt_d(h, opt)->type)
		r = shmcfg__err(SHMCFG_E_CORRUPT, "%s: cell of %s has the wrong type", h->name,
				sstr(h, opt_d(h, opt)->name));
	return r;
}

int shmcfg_snapshot_layer_by_cluster(const shmcfg_snapshot *snap, shmcfg_opt opt, shmcfg_source layer)
{
	SHMCFG_API_ENTRY;
	assert_return(snap, -EINVAL);
	const shmcfg *h = snap->h;
	int mr = shmcfg__map_origin(snap->origin, h, &opt); /* another schema: follow.c */
	if (mr)
		return mr;
	int r = shmcfg__opt_use(h, opt);
	if (r)
		return r;
	if (!source_is_stored(layer))
		return shmcfg__err(SHMCFG_E_LAYER, "layer %s is not stored", shmcfg_source_name(layer));
	struct shmcfg__cell lay[NLAYERS];
	if ((r = shmcfg__chunk_read(snap->heap, snap->heap_size, slot_lrefs(h, snap->slot)[opt],
				      slot_cells(h, snap->slot) + opt, lay)))
		return r;
	uint64_t m = lay[layer_of(layer)].meta;
	return (m & META_SET) && (m & META_BY_CLUSTER) ? 1 : 0;
}

int shmcfg_snapshot_layer(const shmcfg_snapshot *snap, shmcfg_opt opt, shmcfg_source layer,
			  shmcfg_value *ret)
{
	SHMCFG_API_ENTRY;
	assert_return(snap && ret, -EINVAL);
	const shmcfg *h = snap->h;
	int mr = shmcfg__map_origin(snap->origin, h, &opt); /* another schema: follow.c */
	if (mr)
		return mr;
	int ur = shmcfg__opt_use(h, opt);
	if (ur)
		return ur;
	if (layer == SHMCFG_SRC_DEFAULT) {
		int r = shmcfg__value_from_cell(&opt_d(h, opt)->def, h->strings, h->strings_size, ret);
		ret->source = SHMCFG_SRC_DEFAULT;
		return r;
	}
	if (!source_is_stored(layer))
		return shmcfg__err(SHMCFG_E_LAYER, "layer %s is not stored", shmcfg_source_name(layer));
	struct shmcfg__cell lay[NLAYERS];
	int r = shmcfg__chunk_read(snap->heap, snap->heap_size, slot_lrefs(h, snap->slot)[opt],
				      slot_cells(h, snap->slot) + opt, lay);
	if (r)
		return r;
	if (!(lay[layer_of(layer)].meta & META_SET))
		return 1;
	struct shmcfg__cell c = lay[layer_of(layer)];
	r = shmcfg__value_from_cell(&c, snap->heap, snap->heap_size, ret);
	if (!r && ret->type != opt_d(h, opt)->type)
		r = shmcfg__err(SHMCFG_E_CORRUPT, "%s: layer cell of %s has the wrong type", h->name,
				sstr(h, opt_d(h, opt)->name));
	return r;
}
