/*
 * shmcfg-sync's mirror of the prefix and its application to a segment
 * (tools/sync.h). Two ways in, one way out:
 *   apply_all()      a load: every option's cluster layer, and every knob
 *                    layer the cluster feeds or fed, from the whole mirror
 *                    (O(options + keys));
 *   apply_revision() one revision: only the options its keys name (work in
 *                    proportion to what changed, however many keys lie
 *                    under the prefix);
 * both build a plan of layer changes (only those that differ from what the
 * segment holds) and commit it as one generation, tagged with the revision.
 *
 * What this host cannot take is left out and the rest applied, with the key
 * and the reason in the segment's rejections (its status key lists them):
 * an unknown option, an alias, bytes that are not JSON, a value of the
 * wrong type or out of range, and a value the value heap has no room for
 * (the commit says SHMCFG_E_FULL: the biggest new value goes, and the
 * commit is tried again). A rejected key keeps the option's previous
 * cluster value, and is tried again when it changes, or at the next load.
 *
 * Which knob values are the cluster's is in the segment itself
 * (shmcfg_snapshot_layer_by_cluster): an agent that restarts resets the
 * knob layers whose key was deleted while it was down, and leaves those a
 * local `shmctl set --knob` wrote.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schema-text.h"
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

/* The options of each knob name, found once: a knob/ key then costs the
 * options that declare it. */
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

/* ---- plans ---- */

struct item {
	shmcfg_opt opt;
	shmcfg_source layer;
	bool reset;
	shmcfg_value v;    /* owned */
	char *key;         /* the key that asked for it */
	size_t bytes;      /* what the value takes in the heap, about */
	bool dropped;      /* refused at commit */
};

struct plan {
	struct item *it;
	size_t n, cap;
	shmcfg_snapshot *snap; /* what the segment holds: changes are against it */
};

static void plan_free(struct plan *p)
{
	for (size_t i = 0; i < p->n; i++) {
		shmcfg_value_clear(&p->it[i].v);
		free(p->it[i].key);
	}
	free(p->it);
	shmcfg_snapshot_release(p->snap);
	memset(p, 0, sizeof *p);
}

static size_t value_bytes(const shmcfg_value *v)
{
	if (v->is_null)
		return 8;
	if (v->type == SHMCFG_STR)
		return v->u.str.len + 1;
	if (v->type == SHMCFG_LIST || v->type == SHMCFG_SET)
		return v->u.list.bytes + 8;
	return 8;
}

/* Sets (v non-NULL, taken over) or resets the option's layer, if that
 * differs from what the segment holds. 0 or an error. */
static int plan_add(struct plan *p, shmcfg_opt opt, shmcfg_source layer, shmcfg_value *v, const char *key)
{
	shmcfg_value cur;
	int r = shmcfg_snapshot_layer(p->snap, opt, layer, &cur);
	if (r < 0)
		goto out;
	bool set = r == 0;
	r = 0;
	if (v ? set && shmcfg_value_equal(&cur, v) : !set)
		goto out;
	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 16;
		struct item *it = realloc(p->it, cap * sizeof *it);
		if (!it) {
			r = -ENOMEM;
			goto out;
		}
		p->it = it;
		p->cap = cap;
	}
	char *k = strdup(key);
	if (!k) {
		r = -ENOMEM;
		goto out;
	}
	struct item *it = &p->it[p->n++];
	*it = (struct item){.opt = opt, .layer = layer, .reset = !v, .key = k};
	if (v) {
		it->v = *v;
		it->bytes = value_bytes(v);
		memset(v, 0, sizeof *v);
	}
	return 0;
out:
	if (v)
		shmcfg_value_clear(v);
	return r;
}

/*
 * The value a key gives an option, parsed and checked against this schema:
 * 0 and *v, or 1 (refused: the reason in *why).
 */
static int key_value(shmcfg *h, shmcfg_opt opt, const struct mentry *en, shmcfg_value *v, char *why, size_t len)
{
	int r = shmcfg_value_from_json(h, opt, en->value, en->value_len, v);
	if (!r && (r = shmcfg_value_check(h, opt, v)))
		shmcfg_value_clear(v);
	if (r)
		snprintf(why, len, "%s", lib_err(r));
	return r ? 1 : 0;
}

/* The plan for one option's cluster layer from its opt/ key (absent: reset). */
static int plan_cluster(struct seg *s, struct plan *p, const struct mirror *m, shmcfg_opt o, const char *key)
{
	const struct mentry *en = mirror_get(m, key);
	if (!en) {
		accept_key(s, key);
		return plan_add(p, o, SHMCFG_SRC_CLUSTER, NULL, key);
	}
	shmcfg_value v;
	char why[512];
	if (key_value(s->h, o, en, &v, why, sizeof why)) {
		reject(s, key, "%s", why); /* the previous cluster value stays */
		return 0;
	}
	accept_key(s, key);
	return plan_add(p, o, SHMCFG_SRC_CLUSTER, &v, en->k.key);
}

/* The plan for the knob layers of a knob's options from its knob/ key: set
 * where the value fits, reset (absent) where the value was the cluster's. */
static int plan_knob(struct seg *s, struct plan *p, const struct mirror *m, const struct knob_opts *ko,
		     const char *key)
{
	const struct mentry *en = mirror_get(m, key);
	char why[512] = "";
	for (size_t i = 0; i < ko->n; i++) {
		shmcfg_opt o = ko->opts[i];
		int r;
		if (!en) {
			/* a knob value a local tool wrote (shmctl set --knob) stays */
			r = shmcfg_snapshot_layer_by_cluster(p->snap, o, SHMCFG_SRC_KNOB);
			if (r == 1)
				r = plan_add(p, o, SHMCFG_SRC_KNOB, NULL, key);
		} else {
			shmcfg_value v;
			r = key_value(s->h, o, en, &v, why, sizeof why) ? 0 : plan_add(p, o, SHMCFG_SRC_KNOB, &v, en->k.key);
		}
		if (r < 0)
			return r;
	}
	if (*why)
		reject(s, key, "%s", why);
	else
		accept_key(s, key);
	return 0;
}

/* What a key names that no canonical option of this schema is. */
static void plan_unknown(struct seg *s, const char *key, bool deleted)
{
	shmcfg_opt o;
	shmcfg_optinfo oi;
	const char *name = key + 4;
	if (deleted)
		accept_key(s, key);
	else if (shmcfg_lookup(s->h, name, &o))
		reject(s, key, "unknown option '%s'", name);
	else if (!shmcfg_opt_info(s->h, o, &oi) && oi.alias != SHMCFG_NO_OPT)
		reject(s, key, "'%s' is an alias; the key must name its option", name);
}

void seg_bad_key(struct seg *s, const char *key, bool deleted)
{
	if (deleted)
		accept_key(s, key);
	else
		reject(s, key, "a NUL byte in the key (shown as \\x00): it names no option or knob");
}

static void seg_error(struct seg *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
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

/* The plan as one transaction: 0 or the error of the step that failed
 * (*bad: the item refused, if one was). */
static int txn_of(struct seg *s, struct plan *p, uint64_t origin, const char *who, shmcfg_txn **ret,
		  size_t *bad, size_t *nset)
{
	shmcfg_txn *t;
	int r = shmcfg_txn_begin(s->h, &t);
	*ret = NULL;
	*bad = SIZE_MAX;
	*nset = 0;
	if (r)
		return r;
	/* every commit of the agent carries an origin, a new revision or the
	 * one the segment has: the layer cells it writes are then the
	 * cluster's (META_BY_CLUSTER), also in a load's commit */
	if (origin && (r = shmcfg_txn_origin(t, origin, who))) {
		shmcfg_txn_abort(t);
		return r;
	}
	for (size_t i = 0; i < p->n; i++) {
		struct item *it = &p->it[i];
		if (it->dropped)
			continue;
		if (!(r = shmcfg_txn_layer(t, it->layer)))
			r = it->reset ? shmcfg_txn_reset(t, it->opt) : shmcfg_txn_set(t, it->opt, &it->v);
		if (r) {
			*bad = i;
			shmcfg_txn_abort(t);
			return r;
		}
		(*nset)++;
	}
	*ret = t;
	return 0;
}

/*
 * Commits the plan, tagged with rev (if new to the segment) and who. What
 * the segment refuses is dropped, its key rejected, and the rest committed:
 * a value refused by the transaction (it names the item), or, for a full
 * value heap, the biggest value being set. force: commit the revision even
 * if no layer changes.
 */
static void commit_plan(struct seg *s, struct plan *p, int64_t rev, const char *who, bool force)
{
	uint64_t have = shmcfg_cluster_revision(s->h);
	/* a new revision; or, after etcd was replaced (s->rebase), any */
	bool newer = rev > 0 && ((uint64_t)rev > have || (s->rebase && (uint64_t)rev != have));
	uint64_t origin = newer ? (uint64_t)rev : have;
	shmcfg_snapshot_release(p->snap);
	p->snap = NULL;
	for (;;) {
		shmcfg_txn *t;
		size_t bad, nset;
		int r = txn_of(s, p, origin, who, &t, &bad, &nset);
		if (r && bad != SIZE_MAX) {
			p->it[bad].dropped = true;
			reject(s, p->it[bad].key, "%s", lib_err(r));
			continue;
		}
		if (r) {
			seg_error(s, "revision %" PRId64 ": %s", rev, lib_err(r));
			s->need_full = true;
			return;
		}
		if (!nset && !(force && newer)) {
			shmcfg_txn_abort(t);
			seg_error(s, "%s", "");
			return;
		}
		uint64_t gen = 0;
		r = shmcfg_txn_commit(t, &gen);
		if (r == SHMCFG_E_FULL) {
			char detail[512];
			snprintf(detail, sizeof detail, "%s", lib_err(r));
			struct item *big = NULL;
			for (size_t i = 0; i < p->n; i++)
				if (!p->it[i].dropped && !p->it[i].reset && (!big || p->it[i].bytes > big->bytes))
					big = &p->it[i];
			if (big) {
				shmcfg_info si;
				if (shmcfg_stat(s->h, &si))
					memset(&si, 0, sizeof si);
				big->dropped = true;
				reject(s, big->key,
				       "does not fit this host's value heap (about %zu bytes; the heap has %" PRIu64
				       " of %" PRIu64 " bytes in use)",
				       big->bytes, si.heap_used, si.heap_bytes);
				continue;
			}
		}
		if (r) {
			/* its keys are not applied: the whole mirror goes in next, and
			 * the segment is out of sync until it did */
			seg_error(s, "revision %" PRId64 ": committing: %s", rev, lib_err(r));
			s->need_full = true;
			return;
		}
		s->napplied++;
		logf_("%s: applied revision %" PRIu64 " (generation %" PRIu64 ", %zu change%s%s%s)", s->name, origin, gen,
		      nset, nset == 1 ? "" : "s", who && *who ? ", by " : "", who && *who ? who : "");
		seg_error(s, "%s", "");
		return;
	}
}

static int plan_begin(struct seg *s, struct plan *p)
{
	memset(p, 0, sizeof *p);
	return shmcfg_snapshot_acquire(s->h, &p->snap);
}

void apply_all(struct seg *s, const struct mirror *m, int64_t rev, bool force)
{
	struct plan p;
	char key[1100];
	int r = plan_begin(s, &p);
	/* the rejections are found anew: those of keys gone or now taken go */
	struct kmap old = s->rejects;
	memset(&s->rejects, 0, sizeof s->rejects);
	s->prev_rejects = &old;
	for (shmcfg_opt o = 0; !r && o < shmcfg_count(s->h); o++) {
		shmcfg_optinfo oi;
		if ((r = shmcfg_opt_info(s->h, o, &oi)) || oi.alias != SHMCFG_NO_OPT)
			continue;
		snprintf(key, sizeof key, "opt/%s", oi.name);
		r = plan_cluster(s, &p, m, o, key);
	}
	kmap_each(&s->knobs, k)
	{
		snprintf(key, sizeof key, "knob/%s", k->key);
		if (!r)
			r = plan_knob(s, &p, m, (const struct knob_opts *)k, key);
	}
	kmap_each(&m->map, k)
	if (!r && !strncmp(k->key, "opt/", 4))
		plan_unknown(s, k->key, false);
	kmap_each(&m->bad, k)
	seg_bad_key(s, k->key, false);
	if (r) {
		seg_error(s, "revision %" PRId64 ": reading the segment: %s", rev, lib_err(r));
		s->need_full = true;
	} else {
		s->need_full = false;
		commit_plan(s, &p, rev, "", force); /* sets it again if it fails */
		if (!s->need_full)
			s->rebase = false;
	}
	s->prev_rejects = NULL;
	s->status_dirty |= old.n != s->rejects.n;
	for (struct kent *k = old.first, *next; k; k = next) {
		next = k->next;
		reject_free((struct reject *)k);
	}
	kmap_free(&old);
	plan_free(&p);
	seg_refresh(s);
	seg_overrides(s, m, NULL, 0);
}

void apply_revision(struct seg *s, const struct mirror *m, const struct kchange *ch, size_t n, int64_t rev,
		    const char *who)
{
	struct plan p;
	int r = plan_begin(s, &p);
	for (size_t i = 0; !r && i < n; i++) {
		const char *key = ch[i].key;
		if (!strncmp(key, "opt/", 4)) {
			shmcfg_opt o;
			shmcfg_optinfo oi;
			if (shmcfg_lookup(s->h, key + 4, &o) || shmcfg_opt_info(s->h, o, &oi) || oi.alias != SHMCFG_NO_OPT)
				plan_unknown(s, key, ch[i].deleted);
			else
				r = plan_cluster(s, &p, m, o, key);
		} else if (!strncmp(key, "knob/", 5)) {
			const struct knob_opts *ko = (const struct knob_opts *)kmap_find(&s->knobs, key + 5);
			if (ko)
				r = plan_knob(s, &p, m, ko, key);
		}
	}
	if (r) {
		seg_error(s, "revision %" PRId64 ": reading the segment: %s", rev, lib_err(r));
		s->need_full = true;
	} else {
		commit_plan(s, &p, rev, who, true);
	}
	plan_free(&p);
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
	if (!strncmp(key, "opt/", 4)) {
		if (!shmcfg_lookup(s->h, key + 4, &o))
			ov_eval(s, sn, o);
	} else if (!strncmp(key, "knob/", 5)) {
		const struct knob_opts *ko = (const struct knob_opts *)kmap_find(&s->knobs, key + 5);
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
	int r = schema_text(s->h, text);
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
