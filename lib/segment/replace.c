/* SPDX-License-Identifier: MIT */
/*
 * Replacing a segment (shmcfg_create with SHMCFG_CREATE_FORCE, shmcfg_resize)
 * and following one that was replaced (doc/design.md, "Replacement").
 *
 * The replacer
 *   1. attaches the old segment read-write and takes its writer lock: no
 *      commit lands on it from here on (one that waited for the lock finds
 *      it replaced, publish.c, and goes to the successor);
 *   2. builds the new incarnation under a temporary name. Its first
 *      generation is one past the old one's last (g0 + 1): generations go
 *      on, so that no stamp of one incarnation equals a stamp of the other
 *      (below: why readers need that). With SHMCFG_CREATE_KEEP (or for a
 *      resize) it holds every layer of every option (each with its
 *      META_BY_CLUSTER mark), the old history, cluster revision and agent
 *      record; otherwise its env layers;
 *   3. freezes the old segment: `retired` = RETIRED_REPLACED, then its
 *      `current` names generation g0 + 1 in FROZEN_SLOT, a slot no segment
 *      has (seqlock.h). Every inline read of it then fails its stamp check
 *      (the slot that index names holds g0 at most) and takes the slow path,
 *      which follows; a cache keyed by the word (the Python binding's) sees
 *      it change; the slow paths of a handle not yet moved on still read
 *      its last generation (seq_current finds it);
 *   4. renames the new object over the name (atomic: an attacher opens the
 *      old segment or the new one, never nothing), wakes the old one's
 *      waiters, removes its lock object and unlocks.
 * A replacer that dies before 3 leaves the old segment as it was; between 3
 * and 4, a frozen segment that readers still read and writers cannot write
 * (SHMCFG_E_RETIRED, "cannot be attached"): `shmctl create --force` again
 * replaces it. Either way a temporary object may be left behind.
 *
 * Following is follow.c's. An inline read during the move of a handle's
 * view from the old incarnation to the new one (pointer by pointer) may
 * meet the old `current` with a new slot, or the reverse; it validates
 * only when the slot's stamp equals the generation `current` gave. Old
 * stamps are at most g0, new ones at least g0 + 1 (or 0, unstamped); the
 * frozen word names g0 + 1, which only the new incarnation's first slot can
 * hold, with that generation's values. So a read returns one generation's
 * value of one incarnation, or retries.
 */
#include "internal.h"
#include "slot.h"
#include "history.h"
#include "seqlock.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

extern char **environ;

/* ---- the replacer ---- */

struct keep_first {
	shmcfg *old;        /* locked */
	bool keep;          /* its layers, history, cluster revision, agent record */
	bool env_anew;      /* ... but the env layers of envp, as for any creation */
	char *const *envp;  /* the environment's layers (NULL: none) */
	const char *who;    /* the first generation's history record */
};

/* Every layer of every option of the old segment's current generation into
 * t, each with its META_BY_CLUSTER mark. */
static int copy_layers(shmcfg_txn *t, shmcfg *old, uint64_t *cluster_rev)
{
	shmcfg_snapshot *s;
	int r = shmcfg_snapshot_acquire(old, &s);
	if (r)
		return r;
	*cluster_rev = shmcfg_snapshot_cluster_revision(s);
	for (uint32_t i = 0; !r && i < old->lay.nopts; i++) {
		if ((r = shmcfg__opt_use(old, i)))
			break;
		if (opt_d(old, i)->alias_final != i)
			continue; /* an alias keeps no layers of its own */
		struct shmcfg__cell lay[NLAYERS];
		if ((r = shmcfg__chunk_read(s->heap, s->heap_size, slot_lrefs(old, s->slot)[i], slot_cells(old, s->slot) + i, lay)))
			break;
		for (enum layer l = 0; !r && l < NLAYERS; l++) {
			if (!(lay[l].meta & META_SET))
				continue;
			shmcfg_value v;
			if ((r = shmcfg__value_from_cell(&lay[l], s->heap, s->heap_size, &v)) ||
			    (r = shmcfg__txn_set_layer(t, i, l, &v)))
				break;
			struct change *c = &t->ch[t->n - 1]; /* appended: each (option, layer) once */
			c->by_cluster = (lay[l].meta & META_BY_CLUSTER) != 0;
		}
	}
	shmcfg_snapshot_release(s);
	return r;
}

/*
 * The history of a segment being replaced (replace.c) into the new one h,
 * being created: the records of the newest generations up to g0, as many
 * as h's index and ring hold beside the record of g0 + 1 (their bytes are
 * options' ids and values: the same schema reads them alike). Stops at the
 * first whose bytes are gone: older ones could not be rebuilt anyway.
 */
static int hist_copy(shmcfg *h, const shmcfg *old, uint64_t g0)
{
	uint64_t room = h->lay.hist_ring_size / 2, used = 0;
	uint64_t n = 0, max = h->lay.hist_n - 1;
	struct copied {
		struct hist_ent e;
		char *rec;
	} *c = shmcfg__calloc(max ? max : 1, sizeof *c);
	if (!c)
		return shmcfg__nomem();
	for (uint64_t g = g0; g >= 1 && n < max; g--) {
		uint32_t len;
		int r = shmcfg__hist_entry(old, g, &c[n].e, &c[n].rec, &len);
		if (r == -ENOMEM) {
			while (n--)
				shmcfg__free(c[n].rec);
			shmcfg__free(c);
			return r;
		}
		if (r || !c[n].rec || used + len > room) {
			shmcfg__free(c[n].rec);
			break;
		}
		used += len;
		n++;
	}
	struct seg_header *hd = h->hdr;
	while (n--) { /* oldest first: the ring's positions grow with generations */
		struct hist_ent *e = hist_at(h, c[n].e.gen);
		uint64_t bytes = c[n].e.len & ~HIST_NO_VALUES;
		*e = c[n].e;
		e->pos = hd->hist_head;
		shmcfg__hist_ring_write(h, e->pos, c[n].rec, bytes);
		hd->hist_head += bytes;
		shmcfg__free(c[n].rec);
	}
	shmcfg__free(c);
	return 0;
}

/*
 * The creator's environment's layers in place of those a replacement kept
 * (create --force keeps the other layers; the env layers are the
 * creator's, as for any creation): one commit that resets the env layers
 * set and sets those of envp, recorded in the history; none when they are
 * the same.
 */
static int env_anew(shmcfg *h, char *const *envp)
{
	shmcfg_txn *t = shmcfg__txn_new(h);
	shmcfg_snapshot *s = NULL;
	if (!t)
		return shmcfg__nomem();
	/* the history's origin: why the env layers moved */
	snprintf(t->who, sizeof t->who, "%s", "environment of the replacement");
	int r = shmcfg_snapshot_acquire(h, &s);
	for (uint32_t i = 0; !r && i < h->lay.nopts; i++) {
		struct shmcfg__cell lay[NLAYERS];
		if (opt_d(h, i)->alias_final != i ||
		    (r = shmcfg__chunk_read(s->heap, s->heap_size, slot_lrefs(h, s->slot)[i], slot_cells(h, s->slot) + i, lay)))
			continue;
		enum layer env[2] = {LAYER_ENV_DEFAULT, LAYER_ENV_FORCE};
		for (int k = 0; !r && k < 2; k++)
			if (lay[env[k]].meta & META_SET) {
				t->layer = env[k];
				r = shmcfg_txn_reset(t, i);
			}
	}
	if (s)
		shmcfg_snapshot_release(s);
	if (!r)
		r = shmcfg__env_changes(t, envp); /* a set replaces a reset of the same layer */
	if (!r)
		r = shmcfg__commit(t, NULL, NULL);
	shmcfg_txn_abort(t);
	return r;
}

static int first_from(shmcfg *h, void *ctx)
{
	const struct keep_first *k = ctx;
	shmcfg *old = k->old;
	uint64_t cluster_rev = 0;
	shmcfg_txn *t = shmcfg__txn_new(h);
	if (!t)
		return shmcfg__nomem();
	snprintf(t->who, sizeof t->who, "%s", k->who);
	int r = k->keep ? copy_layers(t, old, &cluster_rev) : shmcfg__env_changes(t, k->envp);
	if (!r && k->keep)
		r = hist_copy(h, old, cur_gen(seq_current(old))); /* its last (a frozen one's too) */
	/* the same values: a generation that changes nothing (its record
	 * says who replaced the segment); or a fresh one's env layers */
	if (!r)
		r = shmcfg__commit_first(t, h->lay.first_gen, cluster_rev, !k->keep);
	shmcfg_txn_abort(t);
	shmcfg_sync_info si;
	if (!r && k->keep && shmcfg_sync_get(old, &si) == 0)
		r = shmcfg_sync_set(h, &si);
	if (!r && k->keep && k->env_anew)
		r = env_anew(h, k->envp);
	return r;
}

/*
 * Freeze the old segment (3. above), under its writer lock: `retired`
 * first, then `current` names the successor's first generation in
 * FROZEN_SLOT (seqlock.h). Release, then seq_cst (a release too): a reader
 * that sees the word sees `retired`, and finds the last generation.
 * Thawed (a rename that failed): as it was.
 */
static void freeze(shmcfg *old, uint64_t *saved, bool on)
{
	struct seg_header *hd = old->hdr;
	if (on) {
		*saved = __atomic_load_n(&hd->current, __ATOMIC_ACQUIRE);
		/* the accessors leave their copy for the slots' path, which
		 * follows: every block odd (the next commit here, if any,
		 * rewrites them), before `current` (seq_cst) */
		hd->copy_dirty = 1;
		for (uint32_t o = 0; o < old->lay.nopts; o += SHMCFG__COPY_PER_BLOCK)
			copy_odd(copy_block(old, o));
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		__atomic_store_n(&hd->retired, RETIRED_REPLACED, __ATOMIC_RELEASE);
		__atomic_store_n(&hd->current, (cur_gen(*saved) + 1) << SHMCFG__SLOT_BITS | FROZEN_SLOT,
				 __ATOMIC_SEQ_CST);
	} else {
		__atomic_store_n(&hd->current, *saved, __ATOMIC_SEQ_CST);
		__atomic_store_n(&hd->retired, 0, __ATOMIC_RELEASE);
	}
}

/* A replacement by someone who is neither the segment's owner nor root. */
static int not_owner(const char *name, uid_t owner)
{
	char who[300];
	shmcfg__user_text(owner, who, sizeof who);
	return shmcfg__err(-EPERM, "%s: only its owner (uid %s) or root may replace it", name, who);
}

/* The old segment, attached read-write and locked, or 1: none that can be
 * replaced (no segment, or one this library cannot attach: removed and
 * created anew by the caller), or an error that must stop the replacement. */
static int open_old_once(const char *name, const shmcfg_create_opts *o, shmcfg **ret, int *why);

/* The segment to replace, attached and write-locked: 0, an error, or 1 when
 * there is none this library attaches (*why: the attach's error, its
 * detail cleared). o->owner, with SHMCFG_CREATE_OWNER, is the owner to
 * trust; with SHMCFG_CREATE_KEEP, a segment of an owner not trusted is an
 * error, not one to remove. */
static int open_old(const char *name, const shmcfg_create_opts *o, shmcfg **ret, int *why)
{
	for (int tries = 0;; tries++) {
		int r = open_old_once(name, o, ret, why);
		/* another replacer was first: replace what it put there */
		if (r != -EAGAIN || tries == 8)
			return r == -EAGAIN ? shmcfg__err(SHMCFG_E_LOCKED, "%s: replaced by others again and again", name) : r;
	}
}

static int open_old_once(const char *name, const shmcfg_create_opts *o, shmcfg **ret, int *why)
{
	shmcfg *old;
	shmcfg_attach_opts ao = {.flags = o->flags & SHMCFG_CREATE_OWNER ? SHMCFG_ATTACH_OWNER : 0, .owner = o->owner};
	int r = shmcfg_attach_with(name, &ao, &old);
	*why = r;
	/* another user's, whose owner was not named: its layers are not ours
	 * to keep (a name squatted by a stranger would hand them to us), and
	 * removing it instead would throw away what its owner set. Only its
	 * owner or root may replace it at all. The detail names the owner. */
	if (r == SHMCFG_E_OWNER && (o->flags & SHMCFG_CREATE_OWNER))
		return r; /* not the owner named: attach's detail says whose it is; nothing changes */
	struct stat st;
	char path[PATH_BYTES], who[300];
	if (r == SHMCFG_E_OWNER && (geteuid() != 0 || (o->flags & SHMCFG_CREATE_KEEP)) &&
	    shmcfg__name_check(name, path) == 0 && lstat(path, &st) == 0) {
		if (geteuid() != 0)
			return not_owner(name, st.st_uid);
		shmcfg__user_text(st.st_uid, who, sizeof who);
		return shmcfg__err(SHMCFG_E_OWNER,
				   "%s: segment is owned by uid %s, not by you or root: not replaced (name its owner "
				   "to keep what it holds: --owner; or replace it with the defaults: --fresh)",
				   name, who);
	}
	/* nothing there, or nothing this library attaches (damaged, another
	 * layout, a symlink or FIFO planted, another user's replaced without
	 * keeping: remove_segment removes it or says why not); a failure of
	 * our own stops here */
	if (r && r != -ENOMEM && r != -EMFILE && r != -ENFILE && r != -EINTR) {
		shmcfg__clear_err();
		return 1;
	}
	if (r)
		return r;
	/* only its owner (or root) may put another object under the name: in
	 * /dev/shm, sticky, the rename would fail, after the work */
	uid_t me = geteuid();
	if (me != 0 && old->owner != me)
		r = not_owner(name, old->owner);
	if (r || (r = shmcfg__lock_writer(old))) {
		shmcfg_close(old);
		return r;
	}
	/* under the lock: replaced meanwhile (its successor at the name), or
	 * frozen by a replacer that died before its rename (still at the name:
	 * replaced again, from its last generation) */
	if (__atomic_load_n(&old->hdr->retired, __ATOMIC_ACQUIRE) && !shmcfg__at_name(old)) {
		shmcfg__unlock_writer(old);
		shmcfg_close(old);
		return -EAGAIN;
	}
	*ret = old;
	return 0;
}

/* Build the new incarnation at a temporary name, then put it in the old
 * one's place. */
static int replace_with(shmcfg *old, const char *name, const char *path, struct seg_header *lay,
			const void *schema_bytes, mode_t mode, gid_t gid, bool keep_owner, struct keep_first *k,
			shmcfg **ret)
{
	char tmp[PATH_BYTES + 40];
	uint64_t rnd = 0;
	if (getrandom(&rnd, sizeof rnd, GRND_NONBLOCK) != (ssize_t)sizeof rnd)
		rnd = now_ns(CLOCK_MONOTONIC) ^ (uint64_t)getpid() << 40;
	snprintf(tmp, sizeof tmp, SHM_DIR "/" TEMP_PREFIX "%s.%016llx", name, (unsigned long long)rnd);
	shmcfg *h;
	/* the old one's lineage; generations go on (a segment frozen by a
	 * replacer that died names one past its last already: past that) */
	memcpy(lay->lineage, old->lay.lineage, 16);
	lay->first_gen = cur_gen(__atomic_load_n(&old->hdr->current, __ATOMIC_ACQUIRE)) + 1;
	int r = shmcfg__create_object(name, tmp, lay, schema_bytes, mode, gid, first_from, k, &h);
	if (r)
		return r;
	/* root resizing another user's segment: it stays theirs (its lock
	 * object too, or its writers could not commit), and the processes that
	 * trust exactly that owner follow it */
	if (keep_owner && old->owner != geteuid()) {
		if (fchown(h->fd, old->owner, (gid_t)-1) < 0 || fchown(h->lock_fd, old->owner, (gid_t)-1) < 0) {
			r = shmcfg__err(-errno, "%s: cannot give the new segment to its owner: %s", name, strerror(errno));
			shmcfg_close(h);
			unlink(tmp);
			shmcfg__lock_remove(name, lay->instance);
			return r;
		}
		h->owner = old->owner;
	}
	uint64_t saved;
	freeze(old, &saved, true);
	shmcfg__fault("replace.frozen");
	if (rename(tmp, path) < 0) {
		r = shmcfg__err(-errno, "%s: cannot put the new segment in place of the old one: %s", name,
				strerror(errno));
		freeze(old, &saved, false);
		shmcfg_close(h);
		unlink(tmp);
		shmcfg__lock_remove(name, lay->instance);
		return r;
	}
	shmcfg__built(h); /* in place: no scan may take its objects now */
	shmcfg__fault("replace.renamed");
	/* the old one's waiters wake, see it retired, and follow */
	__atomic_fetch_add(&old->hdr->futex, 1, __ATOMIC_SEQ_CST);
	syscall(SYS_futex, &old->hdr->futex, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
	shmcfg__lock_remove(name, old->lay.instance);
	*ret = h;
	return 0;
}

int shmcfg__replace(const char *name, const char *path, struct seg_header *lay, const void *schema_bytes,
		    const shmcfg_create_opts *o, char *const *envp, shmcfg **ret)
{
	shmcfg *old = NULL;
	int why;
	int r = open_old(name, o, &old, &why);
	if (r)
		return r;
	struct keep_first k = {
		.old = old,
		.keep = (o->flags & SHMCFG_CREATE_KEEP) && !memcmp(old->lay.schema_hash, lay->schema_hash, 16),
		.env_anew = true,
		.envp = envp,
		.who = "segment replaced",
	};
	r = replace_with(old, name, path, lay, schema_bytes, o->mode, o->gid, false, &k, ret);
	if (!r && memcmp(old->lay.schema_hash, lay->schema_hash, 16))
		shmcfg__vcopy_remove(old->lay.schema_hash); /* if no other segment has it */
	shmcfg__unlock_writer(old);
	shmcfg_close(old);
	return r;
}

static int resize(const char *name, const shmcfg_create_opts *opts, shmcfg **ret)
{
	assert_return_as("shmcfg_resize", ret, -EINVAL);
	char path[PATH_BYTES];
	int r = shmcfg__name_check(name, path);
	if (r)
		return r;
	shmcfg_create_opts o = opts ? *opts : (shmcfg_create_opts){0};
	if ((o.flags & ~(unsigned)SHMCFG_CREATE_OWNER) || o.mode || o.gid || o.envp)
		return shmcfg__err(-EINVAL, "%s: a resize takes sizes only (slots, readers, heap_bytes, history), "
					    "and the owner to trust", name);
	/* what it holds is kept: another user's is resized only if named */
	o.flags |= SHMCFG_CREATE_KEEP;
	shmcfg *old = NULL;
	int why;
	if ((r = open_old(name, &o, &old, &why)) == 1) {
		if (why == -ENOENT)
			return shmcfg__err(-ENOENT, "%s: no segment of that name to resize", name);
		/* there is one, that we may not or cannot attach: say why */
		shmcfg *h = NULL;
		if ((r = shmcfg_attach(name, 0, NULL, &h)) == 0) {
			shmcfg_close(h); /* attached now: it was being replaced */
			r = shmcfg__err(-EAGAIN, "%s: replaced while we looked: try again", name);
		}
		return r;
	}
	if (r)
		return r;
	struct stat st;
	/* what is not given stays as it is; the schema region is copied from
	 * our validated private copy of it, not from the shared object */
	if (!o.slots)
		o.slots = old->lay.nslots;
	if (!o.readers)
		o.readers = old->lay.nreaders;
	if (!o.history)
		o.history = old->lay.hist_n;
	if (!o.heap_bytes)
		o.heap_bytes = old->lay.heap_size;
	if ((r = shmcfg__create_opts_check(&o)) == 0 && fstat(old->fd, &st) < 0)
		r = shmcfg__err(-errno, "%s: fstat: %s", name, strerror(errno));
	int bad = r ? 0 : shmcfg__schema_validate(old, NULL, NULL);
	if (!r && bad)
		r = bad < 0 ? bad : shmcfg__err(SHMCFG_E_CORRUPT, "%s: its schema does not check out (shmctl check)", name);
	if (!r) {
		struct seg_header lay;
		(void)shmcfg__layout(old->lay.nopts, old->lay.schema_size, 0, &o, &lay); /* the heap's size given */
		memcpy(lay.schema_hash, old->lay.schema_hash, 16);
		struct keep_first k = {.old = old, .keep = true, .who = "segment resized"};
		r = replace_with(old, name, path, &lay, schema_region(old), st.st_mode & 0777, st.st_gid,
				 true, &k, ret);
	}
	shmcfg__unlock_writer(old);
	shmcfg_close(old);
	return r;
}

/* ---- creation ---- */

/* The first generation of a new segment: generation 1, its env layers. */
struct env_first {
	char *const *envp; /* NULL: none */
};

static int first_env(shmcfg *h, void *ctx)
{
	const struct env_first *e = ctx;
	shmcfg_txn *t = shmcfg__txn_new(h);
	if (!t)
		return shmcfg__nomem();
	int r = shmcfg__env_changes(t, e->envp);
	if (!r)
		r = shmcfg__commit_first(t, h->lay.first_gen, 0, true);
	shmcfg_txn_abort(t);
	return r;
}

static int create(const char *name, const shmcfg_schema *schema, const shmcfg_create_opts *opts, shmcfg **ret)
{
	shmcfg__fork_init();
	assert_return_as("shmcfg_create", ret, -EINVAL);
	char path[PATH_BYTES];
	int r = shmcfg__name_check(name, path);
	if (r)
		return r;
	shmcfg_create_opts o = opts ? *opts : (shmcfg_create_opts){0};
	if (o.flags & ~(unsigned)(SHMCFG_CREATE_FORCE | SHMCFG_CREATE_NO_ENV | SHMCFG_CREATE_KEEP |
				  SHMCFG_CREATE_EXIST_OK | SHMCFG_CREATE_OWNER))
		return shmcfg__err(-EINVAL, "create flags %#x: unknown bits", o.flags);
	if ((o.flags & SHMCFG_CREATE_OWNER) && !(o.flags & SHMCFG_CREATE_FORCE))
		return shmcfg__err(-EINVAL, "SHMCFG_CREATE_OWNER names the owner of the segment replaced: it needs SHMCFG_CREATE_FORCE");
	if ((o.flags & SHMCFG_CREATE_EXIST_OK) && (o.flags & SHMCFG_CREATE_FORCE))
		return shmcfg__err(-EINVAL, "SHMCFG_CREATE_EXIST_OK keeps a segment, SHMCFG_CREATE_FORCE replaces it: not both");
	if ((o.flags & SHMCFG_CREATE_KEEP) && !(o.flags & SHMCFG_CREATE_FORCE))
		return shmcfg__err(-EINVAL, "SHMCFG_CREATE_KEEP keeps what a replaced segment held: it needs SHMCFG_CREATE_FORCE");
	if ((r = shmcfg__create_opts_check(&o)))
		return r;
	shmcfg_schema *own = NULL;
	if (!schema) {
		r = shmcfg__default_schema(&own);
		if (r)
			return r;
		schema = own;
	}
	struct built_schema *b = NULL;
	r = shmcfg__schema_build(schema, &b);
	if (r) {
		shmcfg_schema_free(own);
		return r;
	}
	struct seg_header lay;
	if ((r = shmcfg__layout(shmcfg__schema_nopts(b), shmcfg__schema_bytes(b), shmcfg__schema_value_bytes(b), &o,
				&lay)))
		goto out;
	void *schema_bytes = shmcfg__malloc(lay.schema_size);
	if (!schema_bytes) {
		r = shmcfg__nomem();
		goto out;
	}
	shmcfg__schema_write(b, schema_bytes, lay.schema_hash);
	struct env_first env = {o.flags & SHMCFG_CREATE_NO_ENV ? NULL : o.envp ? o.envp : environ};
	/* --force: a segment of that name is replaced (replace.c): its
	 * processes follow the new one; what cannot be attached is removed */
	r = 1;
	if (o.flags & SHMCFG_CREATE_FORCE)
		r = shmcfg__replace(name, path, &lay, schema_bytes, &o, env.envp, ret);
	bool made = r == 0; /* not attached: its schema's validated copy made below */
	if (r == 1 && (!(o.flags & SHMCFG_CREATE_FORCE) || !(r = shmcfg__remove_segment(name, path, true))) &&
	    !(r = shmcfg__create_object(name, path, &lay, schema_bytes, o.mode, o.gid, first_env, &env, ret)))
		shmcfg__built(*ret), made = true; /* ready, at its name */
	/* create-or-attach: the first rank creates, the others attach what it
	 * made (its `ready` waited for), of this schema; one removed meanwhile
	 * is created again */
	for (int tries = 0; r == -EEXIST && (o.flags & SHMCFG_CREATE_EXIST_OK) && tries < 8; tries++) {
		shmcfg__clear_err();
		r = shmcfg_attach_with(name, &(shmcfg_attach_opts){.expect_schema_hash = lay.schema_hash}, ret);
		if (!r) /* checked once: it follows replacements as the creator's handle does */
			(*ret)->opts.expect_schema_hash = NULL;
		if (r == -ENOENT) {
			shmcfg__clear_err();
			if (!(r = shmcfg__create_object(name, path, &lay, schema_bytes, o.mode, o.gid, first_env, &env,
							ret)))
				shmcfg__built(*ret), made = true;
		}
	}
	if (!r && made)
		shmcfg__schema_created(*ret, schema_bytes, lay.schema_hash);
	shmcfg__free(schema_bytes);
out:
	shmcfg__schema_built_free(b);
	shmcfg_schema_free(own);
	return r;
}

/* ---- commits that follow and grow ---- */

/*
 * The value heap is full (SHMCFG_E_FULL from the commit, whose detail says
 * what did not fit): the segment grows in a new incarnation, a resize to
 * twice its heap (up to the cap), where this process may replace it (its
 * owner, or root); the commit then follows it. Otherwise the error names the
 * resize to run.
 */
static int grow(shmcfg_txn *t, int full)
{
	shmcfg *h = t->h;
	char why[300];
	snprintf(why, sizeof why, "%s", shmcfg_errdetail());
	uint64_t want = h->lay.heap_size * 2;
	if (want > SEG_MAX_HEAP_BYTES)
		want = SEG_MAX_HEAP_BYTES;
	if (__atomic_load_n(&h->hdr->retired, __ATOMIC_ACQUIRE))
		return 0; /* replaced meanwhile (another process grew it): the commit follows */
	shmcfg *n = NULL;
	int r = want > h->lay.heap_size ? shmcfg_resize(h->name, &(shmcfg_create_opts){.heap_bytes = want}, &n) : full;
	if (!r) {
		shmcfg_close(n); /* t's handle follows it by itself */
		shmcfg__clear_err();
		return 0;
	}
	return shmcfg__err(full, "%s; the segment cannot grow here (%s): run `shmctl resize %s --size %llu`", why,
			   r == full ? "its heap is at the cap" : *shmcfg_errdetail() ? shmcfg_errdetail() : shmcfg_strerror(r),
			   h->name, (unsigned long long)want);
}

int shmcfg_txn_commit(shmcfg_txn *t, uint64_t *gen_ret)
{
	SHMCFG_API_ENTRY;
	return shmcfg_txn_commit_ex(t, gen_ret, NULL);
}

int shmcfg_txn_commit_ex(shmcfg_txn *t, uint64_t *gen_ret, bool *published)
{
	SHMCFG_API_ENTRY;
	if (published)
		*published = false;
	assert_return(t, -EINVAL);
	if (t->err) { /* a change was refused: publish none, and say which */
		int r = t->err_detail ? shmcfg__err(t->err, "%s", t->err_detail)
				      : shmcfg__err(t->err, "a change was refused: %s", shmcfg_strerror(t->err));
		shmcfg_txn_abort(t);
		return r;
	}
	int r;
	for (int grown = 0;;) {
		r = shmcfg__commit(t, gen_ret, published);
		/* the segment replaced meanwhile: the commit goes to its successor */
		if (r == SHMCFG_E_RETIRED && !(r = shmcfg__follow_txn(t)))
			continue;
		/* a full heap grows, unless told not to or a cluster revision's */
		if (r != SHMCFG_E_FULL || t->h->no_growth || t->cluster_rev || t->cluster_keep || grown++ == 3 ||
		    (r = grow(t, r)))
			break;
	}
	if (r == SHMCFG_E_RETIRED && !*shmcfg_errdetail())
		shmcfg__err(r, "%s: the segment was replaced, and its successor cannot be attached", t->h->name);
	shmcfg_txn_abort(t);
	return r;
}

/* The public entry points: the caller's opts at its size (lib/base/sized.c),
 * and the names of releases before 0.7, whose struct was this one. */
int shmcfg_resize_sized(const char *name, const shmcfg_create_opts *opts, shmcfg **ret, size_t opts_size)
{
	SHMCFG_API_ENTRY;
	shmcfg_create_opts o;
	int r = opts ? shmcfg__sized_in(&o, sizeof o, opts, opts_size, sizeof o, "shmcfg_create_opts") : 0;
	return r ? r : resize(name, opts ? &o : NULL, ret);
}

int (shmcfg_resize)(const char *name, const shmcfg_create_opts *opts, shmcfg **ret)
{
	SHMCFG_API_ENTRY;
	return shmcfg_resize_sized(name, opts, ret, sizeof *opts);
}

int shmcfg_create_sized(const char *name, const shmcfg_schema *schema, const shmcfg_create_opts *opts,
			shmcfg **ret, size_t opts_size)
{
	SHMCFG_API_ENTRY;
	shmcfg_create_opts o;
	int r = opts ? shmcfg__sized_in(&o, sizeof o, opts, opts_size, sizeof o, "shmcfg_create_opts") : 0;
	return r ? r : create(name, schema, opts ? &o : NULL, ret);
}

int (shmcfg_create)(const char *name, const shmcfg_schema *schema, const shmcfg_create_opts *opts, shmcfg **ret)
{
	SHMCFG_API_ENTRY;
	return shmcfg_create_sized(name, schema, opts, ret, sizeof *opts);
}
