/* SPDX-License-Identifier: MIT */
/*
 * shmcfg-sync's mirror of the prefix and its application to a segment
 * (tools/sync.h). Two ways in, one way out:
 *   apply_all()      a load: the whole mirror (every option's cluster layer,
 *                    and every knob layer the cluster feeds or fed);
 *   apply_revision() one revision: only the keys it changed (work in
 *                    proportion to what changed, however many keys lie
 *                    under the prefix);
 * both hand the keys to the library's cluster apply step
 * (shmcfg_cluster_apply_*, lib/ops/cluster_apply.c), which diffs them against
 * the segment and commits the difference as one generation, tagged with
 * the revision, and says which keys this host refuses and why. Here the
 * refusals become the segment's rejections (its status key lists them,
 * each logged once per change of its key), a failed commit the segment's
 * error (out of sync; the whole mirror goes in next), and what a local
 * layer hides its overrides.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster-keys.h"
#include "sync.h"

/* ---- the mirror ---- */

struct mentry *mirror_get(const struct mirror *m, const char *key)
{
	return (struct mentry *)kmap_find(&m->map, key);
}

int mirror_put(struct mirror *m, const char *key, char *value, size_t len, int64_t mod_rev)
{
	struct mentry *e = mirror_get(m, key);
	if (e) {
		free(e->value);
	} else {
		if (!(e = calloc(1, sizeof *e)) || !(e->k.key = strdup(key)) || kmap_insert(&m->map, &e->k)) {
			if (e)
				free(e->k.key);
			free(e);
			free(value);
			return -ENOMEM;
		}
	}
	e->value = value;
	e->value_len = len;
	e->mod_rev = mod_rev;
	return 0;
}

static void mentry_free(struct mentry *e)
{
	free(e->k.key);
	free(e->value);
	free(e);
}

void mirror_delete(struct mirror *m, const char *key)
{
	struct mentry *e = mirror_get(m, key);
	if (e) {
		kmap_remove(&m->map, &e->k);
		mentry_free(e);
	}
}

void mirror_clear(struct mirror *m)
{
	for (struct kent *k = m->map.first, *next; k; k = next) {
		next = k->next;
		mentry_free((struct mentry *)k);
	}
	kmap_free(&m->map);
	for (struct kent *k = m->bad.first, *next; k; k = next) {
		next = k->next;
		mentry_free((struct mentry *)k);
	}
	kmap_free(&m->bad);
}

int mirror_bad_put(struct mirror *m, const char *key)
{
	if (kmap_find(&m->bad, key))
		return 0;
	struct mentry *e = calloc(1, sizeof *e);
	if (!e || !(e->k.key = strdup(key)) || kmap_insert(&m->bad, &e->k)) {
		if (e)
			free(e->k.key);
		free(e);
		return -ENOMEM;
	}
	return 0;
}

void mirror_bad_delete(struct mirror *m, const char *key)
{
	struct mentry *e = (struct mentry *)kmap_find(&m->bad, key);
	if (e) {
		kmap_remove(&m->bad, &e->k);
		mentry_free(e);
	}
}

static void seg_error(struct seg *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static const char *lib_err(int r);

/* ---- a segment's knobs and rejections ---- */

/* The options of each knob name, found once: the overrides a knob/ key
 * may hide (seg_overrides) then cost the options that declare it. */
int seg_index_knobs(struct seg *s)
{
	for (shmcfg_opt o = 0; o < shmcfg_count(s->h); o++) {
		shmcfg_optinfo oi;
		int r = shmcfg_opt_info(s->h, o, &oi);
		if (r)
			return r;
		if (!oi.knob || oi.alias != SHMCFG_NO_OPT)
			continue;
		struct knob_opts *ko = (struct knob_opts *)kmap_find(&s->knobs, oi.knob);
		if (!ko) {
			if (!(ko = calloc(1, sizeof *ko)) || !(ko->k.key = strdup(oi.knob)) || kmap_insert(&s->knobs, &ko->k)) {
				if (ko)
					free(ko->k.key);
				free(ko);
				return -ENOMEM;
			}
		}
		shmcfg_opt *p = realloc(ko->opts, (ko->n + 1) * sizeof *p);
		if (!p)
			return -ENOMEM;
		ko->opts = p;
		ko->opts[ko->n++] = o;
	}
	return 0;
}

static void reject_free(struct reject *x)
{
	free(x->k.key);
	free(x->why);
	free(x);
}

static void knobs_clear(struct seg *s)
{
	for (struct kent *k = s->knobs.first, *next; k; k = next) {
		next = k->next;
		free(k->key);
		free(((struct knob_opts *)k)->opts);
		free(k);
	}
	kmap_free(&s->knobs);
}

int seg_follow(struct seg *s)
{
	int r, followed = 0;
	if (shmcfg_retired(s->h)) {
		if ((r = shmcfg_reattach(&s->h))) {
			seg_error(s, "the segment was removed or replaced, and the one of that name cannot be attached: %s",
				  lib_err(r));
			return r;
		}
		s->claimed = false; /* the claim was the old segment's */
		/* another schema, perhaps: its knobs anew; its generations anew */
		knobs_clear(s);
		if ((r = seg_index_knobs(s))) {
			seg_error(s, "the new segment's schema: %s", shmcfg_strerror(r));
			return r;
		}
		logf_("%s: the segment was replaced: following the new one", s->name);
		s->generation = 0;
		s->hash[0] = 0;
		s->need_full = true;
		followed = 1;
	}
	/* one agent per segment: never write one that another agent syncs */
	if (!s->claimed) {
		if ((r = shmcfg_sync_claim(s->h, 0))) {
			seg_error(s, "%s", lib_err(r));
			return r;
		}
		s->claimed = true;
	}
	return followed;
}

static void override_free(struct override *x)
{
	free(x->k.key);
	free(x->value);
	free(x);
}

static void overrides_clear(struct seg *s)
{
	for (struct kent *k = s->overrides.first, *next; k; k = next) {
		next = k->next;
		override_free((struct override *)k);
	}
	kmap_free(&s->overrides);
	memset(&s->overrides, 0, sizeof s->overrides);
}

void seg_free(struct seg *s)
{
	knobs_clear(s);
	overrides_clear(s);
	for (struct kent *k = s->rejects.first, *next; k; k = next) {
		next = k->next;
		reject_free((struct reject *)k);
	}
	kmap_free(&s->rejects);
	shmcfg_close(s->h);
	free(s->status_key);
}

/* The key is refused for why: logged and put in the status when it is new
 * or its reason changed (once per change of the key, not per revision). */
static void reject(struct seg *s, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void reject(struct seg *s, const char *key, const char *fmt, ...)
{
	char raw[512], why[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(raw, sizeof raw, fmt, ap);
	va_end(ap);
	printable(raw, why, sizeof why);
	struct reject *x = (struct reject *)kmap_find(&s->rejects, key);
	if (x && !strcmp(x->why, why))
		return;
	/* a load finds every rejection anew: those it had are not news */
	const struct reject *had = s->prev_rejects ? (const struct reject *)kmap_find(s->prev_rejects, key) : NULL;
	bool news = !had || strcmp(had->why, why);
	char *w = strdup(why);
	if (!w)
		return;
	if (x) {
		free(x->why);
		x->why = w;
	} else if (!(x = calloc(1, sizeof *x)) || !(x->k.key = strdup(key)) || kmap_insert(&s->rejects, &x->k)) {
		if (x)
			free(x->k.key);
		free(x);
		free(w);
		return;
	} else {
		x->why = w;
	}
	if (news) {
		char pkey[600];
		printable(key, pkey, sizeof pkey);
		logf_("%s: rejected %s: %s", s->name, pkey, why);
		s->status_dirty = true;
	}
}

static void accept_key(struct seg *s, const char *key)
{
	struct reject *x = (struct reject *)kmap_find(&s->rejects, key);
	if (!x)
		return;
	kmap_remove(&s->rejects, &x->k);
	reject_free(x);
	s->status_dirty = true;
}

/* The error text of a failed library call, with its detail. */
static const char *lib_err(int r)
{
	const char *d = shmcfg_errdetail();
	return *d ? d : shmcfg_strerror(r);
}

/* ---- applying the mirror: the library's cluster apply step ---- */

void seg_bad_key(struct seg *s, const char *key, bool deleted)
{
	if (deleted)
		accept_key(s, key);
	else
		reject(s, key, "a NUL byte in the key (shown as \\x00): it names no option or knob");
}

static void seg_error(struct seg *s, const char *fmt, ...)
{
	char raw[sizeof s->error], msg[sizeof s->error];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(raw, sizeof raw, fmt, ap);
	va_end(ap);
	printable(raw, msg, sizeof msg);
	bool changed = strcmp(msg, s->error) != 0;
	if (changed) {
		snprintf(s->error, sizeof s->error, "%s", msg);
		s->status_dirty = s->status_urgent = true; /* in sync or not: shown at once */
	}
	if (*msg) {
		s->nfailed++;
		if (changed) /* once, not at every retry */
			logf_("%s: error: %s", s->name, msg);
		if (!s->failing_since)
			s->failing_since = now_ns(CLOCK_REALTIME);
	} else {
		s->failing_since = 0;
	}
}

/* The library's word on a key: the segment's rejections follow it. */
static void verdict(void *userdata, const char *key, const char *reason)
{
	struct seg *s = userdata;
	if (reason)
		reject(s, key, "%s", reason);
	else
		accept_key(s, key);
}

/*
 * One commit of the keys (ch NULL: the whole mirror; else the n keys a
 * revision changed), tagged with rev and who: shmcfg_cluster_apply_*
 * diffs them against the segment, leaves out what this host refuses and
 * tells which (verdict()). A failed commit leaves its keys out: the whole
 * mirror goes in next (need_full), and the segment is out of sync until
 * it did.
 */
static void apply(struct seg *s, const struct mirror *m, const struct kchange *ch, size_t n, int64_t rev,
		  const char *who)
{
	unsigned flags = (ch ? 0 : SHMCFG_CLUSTER_APPLY_ALL) | (s->rebase ? SHMCFG_CLUSTER_APPLY_REBASE : 0);
	shmcfg_cluster_apply *ap;
	int r = shmcfg_cluster_apply_begin(s->h, flags, &ap);
	if (!ch) {
		kmap_each(&m->map, k)
		{
			const struct mentry *en = (const struct mentry *)k;
			if (!r)
				r = shmcfg_cluster_apply_key(ap, k->key, en->value, en->value_len);
		}
	}
	for (size_t i = 0; ch && !r && i < n; i++) {
		const struct mentry *en = ch[i].deleted ? NULL : mirror_get(m, ch[i].key);
		r = shmcfg_cluster_apply_key(ap, ch[i].key, en ? en->value : NULL, en ? en->value_len : 0);
	}
	if (r) {
		shmcfg_cluster_apply_abort(ap);
		seg_error(s, "revision %" PRId64 ": %s", rev, lib_err(r));
		s->need_full = true;
		return;
	}
	shmcfg_cluster_apply_result res;
	r = shmcfg_cluster_apply_commit(ap, rev > 0 ? (uint64_t)rev : 0, who, verdict, s, &res);
	if (r) {
		seg_error(s, "revision %" PRId64 ": %s", rev, lib_err(r));
		s->need_full = true;
		return;
	}
	s->need_full = false;
	if (res.published) {
		s->napplied++;
		logf_("%s: applied revision %" PRIu64 " (generation %" PRIu64 ", %" PRIu32 " change%s%s%s)", s->name,
		      res.revision, res.generation, res.nchanged, res.nchanged == 1 ? "" : "s", who && *who ? ", by " : "",
		      who && *who ? who : "");
	}
	seg_error(s, "%s", "");
}

void apply_all(struct seg *s, const struct mirror *m, int64_t rev, int64_t at)
{
	/* the tag (the mirror's newest write) may be below the revision the
	 * segment carries: that of a delete, applied from the watch. The
	 * mirror, read at `at`, holds what that revision left: tagged with it
	 * (the library refuses a revision below the segment's, -ESTALE) */
	uint64_t have = shmcfg_cluster_revision(s->h);
	if (!s->rebase && have > (uint64_t)(rev > 0 ? rev : 0) && at > 0 && have <= (uint64_t)at)
		rev = (int64_t)have;
	/* above even the store's revision: etcd was replaced while no agent
	 * watched (one agent a segment: shmcfg-sync refuses a second), and its
	 * revisions become the segment's */
	if (!s->rebase && at > 0 && have > (uint64_t)at) {
		logf_("%s: the segment carries revision %" PRIu64 ", above etcd's %" PRId64
		      " (etcd replaced): taking etcd's revisions", s->name, have, at);
		s->rebase = true;
	}
	/* the rejections are found anew: those of keys gone or now taken go */
	struct kmap old = s->rejects;
	memset(&s->rejects, 0, sizeof s->rejects);
	s->prev_rejects = &old;
	apply(s, m, NULL, 0, rev, "");
	kmap_each(&m->bad, k) seg_bad_key(s, k->key, false);
	if (!s->need_full)
		s->rebase = false;
	s->prev_rejects = NULL;
	s->status_dirty |= old.n != s->rejects.n;
	for (struct kent *k = old.first, *next; k; k = next) {
		next = k->next;
		reject_free((struct reject *)k);
	}
	kmap_free(&old);
	seg_refresh(s);
	seg_overrides(s, m, NULL, 0);
}

void apply_revision(struct seg *s, const struct mirror *m, const struct kchange *ch, size_t n, int64_t rev,
		    const char *who)
{
	apply(s, m, ch, n, rev, who);
	seg_refresh(s);
	seg_overrides(s, m, ch, n);
}

/* ---- what this host overrides ---- */

/* Option o: fed by the cluster (its cluster layer set, else its knob layer
 * written by the agent) and won by a local layer above that? Recorded in
 * s->overrides, or dropped from them. */
static void ov_eval(struct seg *s, shmcfg_snapshot *sn, shmcfg_opt o)
{
	shmcfg_optinfo oi;
	if (shmcfg_opt_info(s->h, o, &oi) || oi.alias != SHMCFG_NO_OPT)
		return;
	shmcfg_value v = {0};
	int fed = shmcfg_snapshot_layer(sn, o, SHMCFG_SRC_CLUSTER, &v) == 0			? SHMCFG_SRC_CLUSTER
		  : shmcfg_snapshot_layer_by_cluster(sn, o, SHMCFG_SRC_KNOB) == 1 ? SHMCFG_SRC_KNOB
										    : -1;
	shmcfg_value_clear(&v);
	char *json = NULL;
	shmcfg_source layer = SHMCFG_SRC_DEFAULT;
	/* a knob value under the cluster's own option value is not local */
	if (fed >= 0 && !shmcfg_snapshot_get(sn, o, &v) && (int)v.source > fed && v.source != SHMCFG_SRC_CLUSTER &&
	    shmcfg_value_json(&v, &json) == 0)
		layer = v.source;
	shmcfg_value_clear(&v);
	struct override *x = (struct override *)kmap_find(&s->overrides, oi.name);
	if (!json) {
		if (x) {
			kmap_remove(&s->overrides, &x->k);
			override_free(x);
			s->status_dirty = true;
		}
		return;
	}
	if (x && x->layer == layer && !strcmp(x->value, json)) {
		free(json);
		return;
	}
	if (!x) {
		if (!(x = calloc(1, sizeof *x)) || !(x->k.key = strdup(oi.name)) || kmap_insert(&s->overrides, &x->k)) {
			if (x)
				free(x->k.key);
			free(x);
			free(json);
			return; /* out of memory: left out of the status */
		}
	}
	free(x->value);
	x->value = json;
	x->layer = layer;
	s->status_dirty = true;
}

/* The options a key feeds: opt/NAME's, or every option of knob/NAME. */
static void ov_key(struct seg *s, shmcfg_snapshot *sn, const char *key)
{
	shmcfg_opt o;
	const char *name;
	if ((name = ck_in(key, CK_OPT))) {
		if (!shmcfg_lookup(s->h, name, &o))
			ov_eval(s, sn, o);
	} else if ((name = ck_in(key, CK_KNOB))) {
		const struct knob_opts *ko = (const struct knob_opts *)kmap_find(&s->knobs, name);
		for (size_t i = 0; ko && i < ko->n; i++)
			ov_eval(s, sn, ko->opts[i]);
	}
}

void seg_overrides(struct seg *s, const struct mirror *m, const struct kchange *ch, size_t n)
{
	shmcfg_snapshot *sn;
	if (shmcfg_snapshot_acquire(s->h, &sn))
		return;
	if (ch) {
		for (size_t i = 0; i < n; i++)
			ov_key(s, sn, ch[i].key);
	} else {
		/* options no key feeds any more are dropped: start over */
		s->status_dirty |= s->overrides.n > 0;
		overrides_clear(s);
		kmap_each(&m->map, k) ov_key(s, sn, k->key);
		s->ov_gen = shmcfg_snapshot_generation(sn);
	}
	shmcfg_snapshot_release(sn);
}

int seg_schema(struct seg *s, char **text)
{
	uint8_t h[16];
	char hex[33];
	*text = NULL;
	shmcfg_schema_hash(s->h, h);
	for (int i = 0; i < 16; i++)
		snprintf(hex + 2 * i, 3, "%02x", h[i]);
	if (!strcmp(hex, s->schema_hash))
		return 0;
	int r = ck_schema_text(s->h, text);
	if (!r)
		memcpy(s->schema_hash, hex, sizeof hex);
	return r;
}

void seg_refresh(struct seg *s)
{
	shmcfg_snapshot *sn;
	uint64_t gen = s->generation;
	if (!shmcfg_snapshot_acquire(s->h, &sn)) {
		uint8_t hh[16];
		char hash[33];
		shmcfg_snapshot_hash(sn, hh);
		for (int i = 0; i < 16; i++)
			snprintf(hash + 2 * i, 3, "%02x", hh[i]);
		gen = shmcfg_snapshot_generation(sn);
		shmcfg_snapshot_release(sn);
		if (strcmp(hash, s->hash)) {
			memcpy(s->hash, hash, sizeof hash);
			s->status_dirty = true;
		}
	}
	shmcfg_info si;
	if (!shmcfg_stat(s->h, &si) && (si.heap_bytes != s->heap_bytes || si.heap_used != s->heap_used)) {
		s->heap_bytes = si.heap_bytes;
		s->heap_used = si.heap_used;
		s->status_dirty = true;
	}
	if (s->applied_rev != shmcfg_cluster_revision(s->h) || s->generation != gen) {
		/* a revision applied goes out at once: cluster set --wait=all
		 * reads the status keys (a wave of small puts, one per host) */
		s->status_urgent |= s->applied_rev != shmcfg_cluster_revision(s->h);
		s->applied_rev = shmcfg_cluster_revision(s->h);
		s->generation = gen;
		s->status_dirty = true;
	}
}
