/* SPDX-License-Identifier: MIT */
/*
 * The values as of an older generation (a private snapshot: the current
 * generation's layers with the later commits undone, history.c, and
 * resolved by resolve.c), and rollback: one commit that restores the user
 * (and knob) layer of such a generation.
 */
#include "internal.h"
#include "slot.h"
#include "history.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int snapshot_at(shmcfg *h, uint64_t gen, shmcfg_snapshot **ret);

int shmcfg_snapshot_at(shmcfg *h, uint64_t gen, shmcfg_snapshot **ret)
{
	SHMCFG_API_ENTRY;
	assert_return(h && ret, -EINVAL);
	const shmcfg *h0 = h;
	SHMCFG_FOLLOW(h);
	int r = snapshot_at(h, gen, ret);
	if (!r && h != h0 && h->root_map) /* a copy: the caller's options are mapped to its schema */
		snap_mapped(*ret, (shmcfg *)h0);
	return r;
}

static int snapshot_at(shmcfg *h, uint64_t gen, shmcfg_snapshot **ret)
{
	shmcfg_snapshot *cur;
	if (gen == 0)
		return shmcfg__err(-ENOENT, "%s: there is no generation 0", h->name);
	int r = shmcfg__copy_snapshot(h, &cur);
	if (r)
		return r;
	if (gen > cur->gen) {
		r = shmcfg__err(-ENOENT, "%s: generation %llu is not committed yet (current: %llu)", h->name,
				(unsigned long long)gen, (unsigned long long)cur->gen);
		shmcfg_snapshot_release(cur);
		return r;
	}
	if (gen == cur->gen) {
		*ret = cur;
		return 0;
	}
	struct change *ch = NULL;
	size_t n = 0;
	uint64_t extra = 0, cluster_rev = ((const struct slot_hdr *)cur->slot)->cluster_rev;
	if ((r = shmcfg__hist_undo(h, cur->gen, gen, &ch, &n, &extra, &cluster_rev))) {
		shmcfg_snapshot_release(cur);
		return r;
	}
	/* room for every undone option's new chunk: no larger than its
	 * current one (within the copied heap) and the value it gets back */
	uint64_t top = cur->heap_size, cap = top * 2 + extra + 64;
	struct shmcfg_snapshot *s = shmcfg__malloc(sizeof *s + h->lay.slot_size + cap);
	if (!s) {
		shmcfg__hist_undo_free(ch, n);
		shmcfg_snapshot_release(cur);
		return shmcfg__nomem();
	}
	char *slot = (char *)(s + 1), *heap = slot + h->lay.slot_size;
	memcpy(slot, cur->slot, h->lay.slot_size);
	memcpy(heap, cur->heap, top);
	shmcfg_snapshot_release(cur);
	struct slot_hdr *sh = (struct slot_hdr *)slot;
	struct build b;
	shmcfg__build_init(&b, h, slot_cells(h, slot), slot_lrefs(h, slot), heap, cap);
	b.priv_top = (top + 15) & ~15ull;
	b.track = true;
	memcpy(b.hash_sum, sh->hash_sum, sizeof b.hash_sum);
	b.checksum = sh->checksum;
	r = shmcfg__apply_changes(&b, ch, n);
	if (!r)
		r = shmcfg__resolve(&b);
	if (!r) {
		memcpy(sh->hash_sum, b.hash_sum, sizeof sh->hash_sum);
		sh->checksum = b.checksum;
		sh->gen = sh->base = gen;
		sh->cluster_rev = cluster_rev;
		*s = snap_of(h, gen, slot, heap, cap, true, -1);
		copy_held(h);
		*ret = s;
	} else {
		shmcfg__free(s);
	}
	shmcfg__build_free(&b);
	shmcfg__hist_undo_free(ch, n);
	return r;
}

int shmcfg_rollback(shmcfg *h, uint64_t gen, unsigned flags, const char *who, uint64_t *gen_ret,
		    bool *published)
{
	SHMCFG_API_ENTRY;
	assert_return(h && !(flags & ~SHMCFG_ROLLBACK_KNOB), -EINVAL);
	SHMCFG_FOLLOW(h);
	if (h->rdonly)
		return shmcfg__err(SHMCFG_E_READONLY, "%s: attached read-only, cannot write", h->name);
	shmcfg_snapshot *at = NULL;
	shmcfg_txn *t = NULL;
	int r = shmcfg_snapshot_at(h, gen, &at);
	if (!r)
		r = shmcfg_txn_begin(h, &t);
	if (!r && who)
		r = shmcfg_txn_origin(t, 0, who);
	shmcfg_source layers[2] = {SHMCFG_SRC_USER, SHMCFG_SRC_KNOB};
	for (int li = 0; !r && li < ((flags & SHMCFG_ROLLBACK_KNOB) ? 2 : 1); li++) {
		if ((r = shmcfg_txn_layer(t, layers[li])))
			break;
		for (uint32_t i = 0; !r && i < h->lay.nopts; i++) {
			if ((r = shmcfg__opt_use(h, i)))
				break;
			const struct opt_desc *d = opt_d(h, i);
			if (d->alias != SHMCFG_NO_OPT || (layers[li] == SHMCFG_SRC_KNOB && !(d->flags & DESC_F_HAS_KNOB)))
				continue; /* layers live on final targets; knobs where declared */
			/* every option, not only those that differ now: a commit
			 * between here and ours must not survive the rollback (the
			 * commit leaves out what is already so) */
			shmcfg_value v;
			int lr = shmcfg_snapshot_layer(at, i, layers[li], &v);
			r = lr < 0 ? lr : lr == 0 ? shmcfg_txn_set(t, i, &v) : shmcfg_txn_reset(t, i);
		}
	}
	shmcfg_snapshot_release(at);
	shmcfg__fault("rollback.built");
	if (published)
		*published = false;
	if (r) {
		shmcfg_txn_abort(t);
		return r;
	}
	return shmcfg_txn_commit_ex(t, gen_ret, published);
}
