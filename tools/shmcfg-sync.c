/*
 * shmcfg-sync: keeps this host's segments in step with a cluster's etcd
 * prefix (issue 13; doc/cluster.md has the key layout).
 *
 *   shmcfg-sync [--endpoints URL[,URL]] [--cluster NAME] [--host NAME] [--once] SEGMENT...
 *
 * A mirror of the prefix's opt/, knob/ and head keys is loaded by one range
 * read at revision R, then kept by a watch of [P"audit/", P"opt0") from R+1
 * (audit/ < head < knob/ < opt/ < status/: the other hosts' status writes
 * stay out of it). Every etcd revision seen becomes exactly one commit of
 * each segment, tagged with the revision and the "who" of the audit record
 * written in it. Load, reload (after a compaction) and events all end in
 * the same function, apply(): the segment's cluster layer and the knob
 * layers the cluster feeds are computed from the whole mirror and only the
 * difference is committed.
 *
 * Liveness does not depend on etcd's settings: the lease of the status keys
 * is kept alive every second on the client's own connection (the watch has
 * another), and an answer missing for LIVENESS_MS means a partition. The
 * agent then closes the watch and reconnects with full-jitter backoff,
 * resuming from the last revision + 1; the segment keeps its values
 * meanwhile and its sync record says since when it is out of sync.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "etcd.h"
#include "shmcfg.h"

enum {
	LIVENESS_MS = 3000,   /* no answer within this: partitioned */
	KEEPALIVE_MS = 1000,  /* a keepalive every second: a silent partition shows in < 5 s */
	LEASE_TTL_S = 10,     /* the status keys outlive a missed keepalive or two */
	BACKOFF_BASE_MS = 100,
	BACKOFF_CAP_MS = 2000,
	STATUS_REJECTED_MAX = 32, /* rejections listed in a status key (all are counted) */
};

static const char *prog = "shmcfg-sync";
static volatile sig_atomic_t stopping;
static int wake_pipe[2] = {-1, -1};

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char *fmt, ...)
{
	char line[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s: %s\n", prog, line);
}

static uint64_t now_ns(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void on_signal(int sig)
{
	(void)sig;
	stopping = 1;
	int e = errno;
	if (write(wake_pipe[1], "", 1) < 0) {
		/* full pipe: a wake-up is already pending */
	}
	errno = e;
}

/* ---- the mirror: the prefix's keys, sorted by key ---- */

struct entry {
	char *key; /* relative to the prefix: "opt/NAME", "knob/NAME", "head" */
	char *value;
	size_t value_len;
	int64_t mod_rev;
};

struct mirror {
	struct entry *e;
	size_t n, cap;
};

static int entry_cmp(const void *k, const void *e)
{
	return strcmp(k, ((const struct entry *)e)->key);
}

static struct entry *mirror_find(const struct mirror *m, const char *key)
{
	return m->n ? bsearch(key, m->e, m->n, sizeof *m->e, entry_cmp) : NULL;
}

static void entry_free(struct entry *e)
{
	free(e->key);
	free(e->value);
}

static void mirror_clear(struct mirror *m)
{
	for (size_t i = 0; i < m->n; i++)
		entry_free(&m->e[i]);
	free(m->e);
	memset(m, 0, sizeof *m);
}

static void mirror_delete(struct mirror *m, const char *key)
{
	struct entry *e = mirror_find(m, key);
	if (!e)
		return;
	entry_free(e);
	size_t i = (size_t)(e - m->e);
	memmove(e, e + 1, (m->n - i - 1) * sizeof *e);
	m->n--;
}

/* Takes the key and value (malloc()ed) over; -ENOMEM frees them. */
static int mirror_put(struct mirror *m, char *key, char *value, size_t len, int64_t mod_rev)
{
	struct entry *e = mirror_find(m, key);
	if (e) {
		free(key);
		free(e->value);
		e->value = value;
		e->value_len = len;
		e->mod_rev = mod_rev;
		return 0;
	}
	if (m->n == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 64;
		struct entry *p = realloc(m->e, cap * sizeof *p);
		if (!p) {
			free(key);
			free(value);
			return -ENOMEM;
		}
		m->e = p;
		m->cap = cap;
	}
	size_t i = 0;
	while (i < m->n && strcmp(m->e[i].key, key) < 0)
		i++;
	memmove(&m->e[i + 1], &m->e[i], (m->n - i) * sizeof *m->e);
	m->e[i] = (struct entry){key, value, len, mod_rev};
	m->n++;
	return 0;
}

/* ---- the agent ---- */

struct seg {
	const char *name;
	shmcfg *h;
	char *status_key;
	uint64_t applied_rev;
	uint64_t generation;
	char hash[33];
	json_t *rejected;  /* [{"key", "error"}] of the last apply */
	char error[256];   /* the last error, "" if none */
	char **knobs;      /* knob names whose layer this agent set (a knob/ key seen) */
	size_t nknobs;
	bool status_dirty; /* the status key needs a put */
};

struct agent {
	struct etcd *e;
	const char *cluster, *host;
	char *prefix; /* /shmcfg/v1/CLUSTER/ */
	size_t prefix_len;
	struct seg *segs;
	size_t nsegs;
	struct mirror m;
	int64_t rev;          /* the mirror holds the store's state at this revision */
	int64_t lease;        /* of the status keys; 0: none yet */
	uint64_t out_of_sync; /* CLOCK_REALTIME since when etcd is unreachable; 0: in sync */
	uint64_t last_ok_ns;  /* CLOCK_REALTIME of the last answer from etcd */
	char error[256];      /* the agent's last etcd error */
};

/* Text that may hold bytes from etcd (a library detail quotes the value),
 * made printable ASCII (\xHH for the rest) for logs and JSON, which needs
 * UTF-8. */
static void printable(const char *in, char *out, size_t size)
{
	size_t o = 0;
	for (const unsigned char *p = (const unsigned char *)in; *p && o + 5 < size; p++) {
		if (*p >= 0x20 && *p < 0x7f)
			out[o++] = (char)*p;
		else
			o += (size_t)snprintf(out + o, size - o, "\\x%02x", *p);
	}
	out[o] = 0;
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
	if (strcmp(msg, s->error)) {
		snprintf(s->error, sizeof s->error, "%s", msg);
		s->status_dirty = true;
	}
	if (*msg)
		logf_("%s: error: %s", s->name, msg);
}

static void record_sync(struct agent *a, struct seg *s)
{
	shmcfg_sync_info si;
	memset(&si, 0, sizeof si);
	snprintf(si.endpoints, sizeof si.endpoints, "%s", etcd_endpoints(a->e));
	snprintf(si.cluster, sizeof si.cluster, "%s", a->cluster);
	snprintf(si.host, sizeof si.host, "%s", a->host);
	si.pid = (int32_t)getpid();
	si.updated_ns = now_ns(CLOCK_REALTIME);
	si.applied_rev = s->applied_rev;
	si.out_of_sync_ns = a->out_of_sync;
	si.nrejected = (uint32_t)json_array_size(s->rejected);
	snprintf(si.error, sizeof si.error, "%s", *s->error ? s->error : a->error);
	int r = shmcfg_sync_set(s->h, &si);
	if (r)
		logf_("%s: error: recording the sync state: %s", s->name,
		      *shmcfg_errdetail() ? shmcfg_errdetail() : shmcfg_strerror(r));
}

/* What the segment carries (whatever the last apply did): its applied
 * revision, generation and config hash, for the status key and the sync
 * record. */
static void refresh(struct agent *a, struct seg *s)
{
	shmcfg_snapshot *sn;
	uint64_t gen = s->generation;
	if (!shmcfg_snapshot_acquire(s->h, &sn)) {
		uint8_t hh[16];
		shmcfg_snapshot_hash(sn, hh);
		for (int i = 0; i < 16; i++)
			snprintf(s->hash + 2 * i, 3, "%02x", hh[i]);
		gen = shmcfg_snapshot_generation(sn);
		shmcfg_snapshot_release(sn);
	}
	if (s->applied_rev != shmcfg_cluster_revision(s->h) || s->generation != gen) {
		s->applied_rev = shmcfg_cluster_revision(s->h);
		s->generation = gen;
		s->status_dirty = true;
	}
	record_sync(a, s);
}

static void reject(json_t *rej, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void reject(json_t *rej, const char *key, const char *fmt, ...)
{
	char msg[512], pmsg[1024], pkey[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	printable(msg, pmsg, sizeof pmsg);
	printable(key, pkey, sizeof pkey);
	json_array_append_new(rej, json_pack("{s:s, s:s}", "key", pkey, "error", pmsg));
}

static bool knob_managed(const struct seg *s, const char *knob)
{
	for (size_t i = 0; i < s->nknobs; i++)
		if (!strcmp(s->knobs[i], knob))
			return true;
	return false;
}

static void knobs_set(struct seg *s, char **knobs, size_t n)
{
	for (size_t i = 0; i < s->nknobs; i++)
		free(s->knobs[i]);
	free(s->knobs);
	s->knobs = knobs;
	s->nknobs = n;
}

/* The error text of a failed library call, with its detail. */
static const char *lib_err(int r)
{
	const char *d = shmcfg_errdetail();
	return *d ? d : shmcfg_strerror(r);
}

/*
 * The value a mirror key gives an option, parsed and checked against this
 * schema: 0 and *v, or 1 (the key is rejected; the reason is in rej).
 */
static int key_value(shmcfg *h, shmcfg_opt opt, const struct entry *en, json_t *rej, shmcfg_value *v)
{
	int r = shmcfg_value_from_json(h, opt, en->value, en->value_len, v);
	if (!r && (r = shmcfg_value_check(h, opt, v)))
		shmcfg_value_clear(v);
	if (r) {
		reject(rej, en->key, "%s", lib_err(r));
		return 1;
	}
	return 0;
}

/* Sets (v non-NULL) or resets the option's layer in t if it differs from
 * what the snapshot holds; counts the changes. */
static int layer_to(shmcfg_txn *t, shmcfg_snapshot *snap, shmcfg_opt opt, shmcfg_source layer,
		    const shmcfg_value *v, unsigned *nchanges)
{
	shmcfg_value cur;
	int r = shmcfg_snapshot_layer(snap, opt, layer, &cur);
	if (r < 0)
		return r;
	bool set = r == 0;
	if (v ? set && shmcfg_value_equal(&cur, v) : !set)
		return 0;
	if ((r = shmcfg_txn_layer(t, layer)))
		return r;
	r = v ? shmcfg_txn_set(t, opt, v) : shmcfg_txn_reset(t, opt);
	if (!r)
		(*nchanges)++;
	return r;
}

/*
 * The one path of load, reload and events: computes this segment's cluster
 * layer and the knob layers the cluster feeds from the whole mirror, and
 * commits the difference, tagged with rev and who. A revision the segment
 * has already applied commits nothing; force commits the revision even if
 * no layer changes (one etcd revision, one commit).
 */
static void apply(struct agent *a, struct seg *s, int64_t rev, const char *who, bool force)
{
	shmcfg *h = s->h;
	json_t *rej = json_array();
	shmcfg_txn *t = NULL;
	shmcfg_snapshot *snap = NULL;
	unsigned nchanges = 0;
	char **knobs = NULL;
	size_t nknobs = 0;
	char key[1024];
	const char *what = "";
	int r;

	if ((r = shmcfg_txn_begin(h, &t))) {
		what = "beginning a transaction";
		goto fail;
	}
	if ((r = shmcfg_snapshot_acquire(h, &snap))) {
		what = "reading the segment";
		goto fail;
	}
	knobs = calloc(a->m.n + 1, sizeof *knobs);
	if (!knobs) {
		r = -ENOMEM;
		what = "the knob list";
		goto fail;
	}
	/* Options: each canonical option's cluster value, and the knob layer of
	 * those whose knob has a key. */
	for (shmcfg_opt o = 0; o < shmcfg_count(h); o++) {
		shmcfg_optinfo oi;
		if ((r = shmcfg_opt_info(h, o, &oi))) {
			what = "reading the schema";
			goto fail;
		}
		if (oi.alias != SHMCFG_NO_OPT)
			continue;
		snprintf(key, sizeof key, "opt/%s", oi.name);
		const struct entry *en = mirror_find(&a->m, key);
		shmcfg_value v = {0};
		if (!en)
			r = layer_to(t, snap, o, SHMCFG_SRC_CLUSTER, NULL, &nchanges);
		else if (key_value(h, o, en, rej, &v))
			r = 0; /* rejected: the previous cluster value stays */
		else {
			r = layer_to(t, snap, o, SHMCFG_SRC_CLUSTER, &v, &nchanges);
			shmcfg_value_clear(&v);
		}
		if (r) {
			what = oi.name;
			goto fail;
		}
		if (!oi.knob)
			continue;
		snprintf(key, sizeof key, "knob/%s", oi.knob);
		en = mirror_find(&a->m, key);
		if (!en) {
			/* a knob the cluster never fed stays whoever set it (shmctl set --knob) */
			if (knob_managed(s, oi.knob))
				r = layer_to(t, snap, o, SHMCFG_SRC_KNOB, NULL, &nchanges);
		} else {
			bool listed = false;
			for (size_t i = 0; i < nknobs && !listed; i++)
				listed = !strcmp(knobs[i], oi.knob);
			if (!listed && !(knobs[nknobs++] = strdup(oi.knob))) {
				r = -ENOMEM;
				what = "the knob list";
				goto fail;
			}
			if (!key_value(h, o, en, rej, &v)) {
				r = layer_to(t, snap, o, SHMCFG_SRC_KNOB, &v, &nchanges);
				shmcfg_value_clear(&v);
			}
		}
		if (r) {
			what = oi.name;
			goto fail;
		}
	}
	/* Keys that name no canonical option of this schema. */
	for (size_t i = 0; i < a->m.n; i++) {
		const char *k = a->m.e[i].key;
		if (strncmp(k, "opt/", 4))
			continue;
		shmcfg_opt o;
		shmcfg_optinfo oi;
		if (shmcfg_lookup(h, k + 4, &o))
			reject(rej, k, "unknown option '%s'", k + 4);
		else if (!shmcfg_opt_info(h, o, &oi) && oi.alias != SHMCFG_NO_OPT)
			reject(rej, k, "'%s' is an alias; the key must name its option", k + 4);
	}
	shmcfg_snapshot_release(snap);
	snap = NULL;

	bool newer = (uint64_t)rev > shmcfg_cluster_revision(h);
	if (newer && (r = shmcfg_txn_origin(t, (uint64_t)rev, who))) {
		what = "tagging the commit";
		goto fail;
	}
	uint64_t gen = 0;
	if (nchanges || (force && newer)) {
		r = shmcfg_txn_commit(t, &gen);
		t = NULL;
		if (r) {
			what = "committing";
			goto fail;
		}
		logf_("%s: applied revision %" PRId64 " (generation %" PRIu64 ", %u change%s%s%s)", s->name, rev, gen,
		      nchanges, nchanges == 1 ? "" : "s", who && *who ? ", by " : "", who && *who ? who : "");
	} else {
		shmcfg_txn_abort(t);
		t = NULL;
	}
	knobs_set(s, knobs, nknobs);
	knobs = NULL;
	/* a rejection is logged once, when the set of them changes */
	if (!json_equal(rej, s->rejected)) {
		for (size_t i = 0; i < json_array_size(rej); i++) {
			json_t *x = json_array_get(rej, i);
			logf_("%s: rejected %s: %s", s->name, json_string_value(json_object_get(x, "key")),
			      json_string_value(json_object_get(x, "error")));
		}
		s->status_dirty = true;
	}
	json_decref(s->rejected);
	s->rejected = rej;
	rej = NULL;
	if (*s->error)
		seg_error(s, "%s", "");
	goto done;
fail:
	seg_error(s, "revision %" PRId64 ": %s: %s", rev, what, lib_err(r));
done:
	if (knobs) {
		for (size_t i = 0; i < nknobs; i++)
			free(knobs[i]);
		free(knobs);
	}
	shmcfg_snapshot_release(snap);
	shmcfg_txn_abort(t);
	json_decref(rej);
	refresh(a, s);
}

/* The "who" of the audit record a revision wrote, "" if none or not JSON;
 * printable ASCII (any etcd writer chose it, and it is shown on terminals
 * and in JSON: cut to SHMCFG_WHO_MAX, UTF-8 could end mid-character). */
static void audit_who(const char *value, size_t len, char *who, size_t size)
{
	json_t *j = json_loadb(value, len, 0, NULL);
	json_t *w = json_object_get(j, "who");
	if (json_is_string(w) && !*who)
		printable(json_string_value(w), who, size);
	json_decref(j);
}

/* Keys of the range the agent mirrors: the rest of the watched range (the
 * audit records, keys of no meaning) only names who made a revision. */
static bool mirrored(const char *rel)
{
	return !strncmp(rel, "opt/", 4) || !strncmp(rel, "knob/", 5) || !strcmp(rel, "head");
}

/* Loads the mirror at one revision: opt/ at the newest, then knob/ and head
 * at the same revision, and applies it to every segment. */
static int load(struct agent *a)
{
	static const char *const parts[] = {"opt/", "knob/", "head"};
	struct mirror m = {0};
	int64_t rev = 0, newest = 0;
	char key[512];
	int r = 0;
	for (size_t p = 0; p < 3 && !r; p++) {
		struct etcd_kvs kvs;
		snprintf(key, sizeof key, "%s%s", a->prefix, parts[p]);
		r = etcd_get(a->e, key, p < 2, rev, &kvs);
		if (r)
			break;
		if (!rev)
			rev = kvs.revision;
		for (size_t i = 0; i < kvs.n && !r; i++) {
			struct etcd_kv *kv = &kvs.kv[i];
			if (kv->key_len < a->prefix_len || strlen(kv->key) != kv->key_len)
				continue; /* a key with a NUL in it names nothing of ours */
			char *k = strdup(kv->key + a->prefix_len);
			if (!k) {
				r = -ENOMEM;
				break;
			}
			r = mirror_put(&m, k, kv->value, kv->value_len, kv->mod_rev); /* takes the value */
			kv->value = NULL;
			if (kv->mod_rev > newest)
				newest = kv->mod_rev;
		}
		etcd_kvs_free(&kvs);
	}
	if (r == -ENOMEM) {
		logf_("error: loading %s: out of memory", a->prefix);
		mirror_clear(&m);
		return ETCD_E_NOMEM;
	}
	if (r) {
		mirror_clear(&m);
		return r;
	}
	mirror_clear(&a->m);
	a->m = m;
	a->rev = rev;
	logf_("loaded %zu keys of %s at revision %" PRId64, m.n, a->prefix, rev);
	/* tagged with the revision of the newest write in the mirror, not the
	 * store's (which other hosts' status writes move): hosts that loaded
	 * the same keys at different moments then report the same revision */
	for (size_t i = 0; i < a->nsegs; i++)
		/* a commit if anything differs, or if a write the segment has not
		 * seen is in the mirror (its revision must show) */
		apply(a, &a->segs[i], newest, "", (uint64_t)newest > shmcfg_cluster_revision(a->segs[i].h));
	return 0;
}

/* Applies one watch response: the events of each revision, then one commit
 * per revision for every segment. */
static void events(struct agent *a, struct etcd_watch_resp *wr)
{
	size_t i = 0;
	while (i < wr->n) {
		int64_t rev = wr->ev[i].kv.mod_rev;
		char who[SHMCFG_WHO_MAX] = "";
		size_t j = i;
		for (; j < wr->n && wr->ev[j].kv.mod_rev == rev; j++) {
			struct etcd_kv *kv = &wr->ev[j].kv;
			if (rev <= a->rev || kv->key_len < a->prefix_len || strlen(kv->key) != kv->key_len ||
			    strncmp(kv->key, a->prefix, a->prefix_len))
				continue; /* already applied (a resumed watch), or not ours */
			const char *rel = kv->key + a->prefix_len;
			if (!strncmp(rel, "audit/", 6) && wr->ev[j].type == ETCD_EV_PUT)
				audit_who(kv->value, kv->value_len, who, sizeof who);
			if (!mirrored(rel))
				continue;
			if (wr->ev[j].type == ETCD_EV_DELETE) {
				mirror_delete(&a->m, rel);
				continue;
			}
			char *k = strdup(rel);
			int r = k ? mirror_put(&a->m, k, kv->value, kv->value_len, kv->mod_rev) : -ENOMEM;
			if (k)
				kv->value = NULL; /* mirror_put took it */
			if (r)
				logf_("error: revision %" PRId64 ": %s: out of memory", rev, rel);
		}
		if (rev > a->rev) {
			a->rev = rev;
			for (size_t k = 0; k < a->nsegs; k++)
				apply(a, &a->segs[k], rev, who, true);
		}
		i = j;
	}
}

/* The status key's value. The rejections listed are capped: every cluster
 * writer can add keys this schema rejects, and a status over etcd's request
 * limit would fail every keepalive (the agent would never sync again). */
static char *status_json(struct agent *a, struct seg *s)
{
	size_t nrej = json_array_size(s->rejected);
	json_t *rej = json_array();
	for (size_t i = 0; i < nrej && i < STATUS_REJECTED_MAX; i++)
		json_array_append(rej, json_array_get(s->rejected, i));
	json_t *j = json_pack("{s:s, s:s, s:i, s:I, s:I, s:s, s:s, s:o, s:I, s:I, s:I}", "host", a->host, "segment", s->name,
			      "pid", (int)getpid(), "revision", (json_int_t)s->applied_rev, "generation",
			      (json_int_t)s->generation, "config_hash", s->hash, "error",
			      *s->error ? s->error : a->error, "rejected", rej, "nrejected", (json_int_t)nrej,
			      "time_ns", (json_int_t)now_ns(CLOCK_REALTIME), "out_of_sync_since_ns",
			      (json_int_t)a->out_of_sync);
	char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	return text;
}

/* Puts the status keys that changed (all: every one). */
static int put_status(struct agent *a, bool all)
{
	for (size_t i = 0; i < a->nsegs; i++) {
		struct seg *s = &a->segs[i];
		if (!all && !s->status_dirty)
			continue;
		char *text = status_json(a, s);
		if (!text)
			return ETCD_E_NOMEM;
		int r = etcd_put(a->e, s->status_key, text, strlen(text), a->lease, NULL);
		free(text);
		if (r)
			return r;
		s->status_dirty = false;
	}
	return 0;
}

/* The lease of the status keys: kept alive, or a new one (and every status
 * key put again) when it expired. Also the liveness check. */
static int keepalive(struct agent *a)
{
	int64_t ttl = 0;
	int r = a->lease ? etcd_lease_keepalive(a->e, a->lease, &ttl) : 0;
	if (r)
		return r;
	if (ttl > 0)
		return put_status(a, false);
	if ((r = etcd_lease_grant(a->e, LEASE_TTL_S, &a->lease)))
		return r;
	return put_status(a, true);
}

/* The agent's etcd error (shown by segments with no error of their own),
 * and every segment's sync record rewritten: out_of_sync may have changed
 * even when the message did not. */
static void set_agent_error(struct agent *a, const char *msg)
{
	bool changed = strcmp(a->error, msg) != 0;
	snprintf(a->error, sizeof a->error, "%s", msg);
	for (size_t i = 0; i < a->nsegs; i++) {
		a->segs[i].status_dirty |= changed;
		record_sync(a, &a->segs[i]);
	}
}

static void went_offline(struct agent *a, const char *why)
{
	logf_("error: %s", why);
	if (!a->out_of_sync) {
		/* out of sync since the last answer */
		a->out_of_sync = a->last_ok_ns ? a->last_ok_ns : now_ns(CLOCK_REALTIME);
		logf_("out of sync since %.3f s ago", (double)(now_ns(CLOCK_REALTIME) - a->out_of_sync) / 1e9);
	}
	set_agent_error(a, why); /* records every segment's sync state */
}

/* Sleeps ms, or until a signal. */
static void nap(int ms)
{
	struct pollfd p = {.fd = wake_pipe[0], .events = POLLIN};
	if (!stopping)
		poll(&p, 1, ms);
}

static uint64_t rnd_state;
static uint32_t rnd(void)
{
	/* xorshift: the jitter needs no quality, only no sync between agents */
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return (uint32_t)(rnd_state >> 32);
}

static int run(struct agent *a)
{
	char lo[512], hi[512];
	snprintf(lo, sizeof lo, "%saudit/", a->prefix);
	snprintf(hi, sizeof hi, "%sopt0", a->prefix); /* just past opt/ */
	struct etcd_watch *w = NULL;
	bool need_load = true;
	unsigned attempt = 0;
	uint64_t next_keepalive = 0;

	while (!stopping) {
		if (!w) {
			if (attempt) {
				/* full jitter: a uniform wait in [0, min(cap, base * 2^n)) */
				unsigned exp = attempt < 10 ? attempt : 10;
				uint32_t lim = BACKOFF_BASE_MS << exp;
				if (lim > BACKOFF_CAP_MS)
					lim = BACKOFF_CAP_MS;
				nap((int)(rnd() % lim));
				if (stopping)
					break;
			}
			/* the load first: the status keys then say what it applied */
			int r = need_load ? load(a) : 0;
			if (!r)
				r = keepalive(a);
			if (!r)
				r = etcd_watch_open(a->e, lo, hi, a->rev + 1, &w);
			if (r) {
				attempt++;
				went_offline(a, etcd_errmsg(a->e));
				continue;
			}
			a->last_ok_ns = now_ns(CLOCK_REALTIME);
			if (need_load)
				logf_("watching from revision %" PRId64, a->rev + 1);
			else
				logf_("resumed watching from revision %" PRId64 " (no reload)", a->rev + 1);
			need_load = false;
			attempt = 0;
			next_keepalive = now_ns(CLOCK_MONOTONIC) + KEEPALIVE_MS * 1000000ull;
			if (a->out_of_sync) {
				logf_("in sync again (out of sync for %.3f s)",
				      (double)(now_ns(CLOCK_REALTIME) - a->out_of_sync) / 1e9);
				a->out_of_sync = 0;
			}
			set_agent_error(a, ""); /* and out_of_sync 0 in every record */
		}
		uint64_t now = now_ns(CLOCK_MONOTONIC);
		int wait_ms = next_keepalive > now ? (int)((next_keepalive - now) / 1000000) + 1 : 0;
		struct etcd_watch_resp wr;
		int r = etcd_watch_next(w, wait_ms, wake_pipe[0], &wr);
		if (r == 1) {
			events(a, &wr);
			etcd_watch_resp_free(&wr);
		} else if (r == ETCD_E_COMPACTED) {
			logf_("error: %s; reloading", etcd_errmsg(a->e));
			etcd_watch_close(w);
			w = NULL;
			need_load = true;
			continue;
		} else if (r < 0) {
			etcd_watch_close(w);
			w = NULL;
			attempt++;
			went_offline(a, etcd_errmsg(a->e));
			continue;
		}
		if (stopping)
			break;
		if (now_ns(CLOCK_MONOTONIC) >= next_keepalive) {
			next_keepalive = now_ns(CLOCK_MONOTONIC) + KEEPALIVE_MS * 1000000ull;
			if ((r = keepalive(a))) {
				etcd_watch_close(w);
				w = NULL;
				attempt++;
				went_offline(a, etcd_errmsg(a->e));
				continue;
			}
			a->last_ok_ns = now_ns(CLOCK_REALTIME);
		}
	}
	etcd_watch_close(w);
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: %s [--endpoints URL[,URL]] [--cluster NAME] [--host NAME] [--once] SEGMENT...\n"
		   "Keeps the cluster layer of each SEGMENT in step with etcd (see doc/cluster.md).\n"
		   "  --endpoints URL,...  etcd endpoints, http://HOST:PORT or unix:PATH\n"
		   "                       (default: $SHMCFG_ETCD_ENDPOINTS)\n"
		   "  --cluster NAME       the cluster's name: keys under /shmcfg/v1/NAME/\n"
		   "                       (default: $SHMCFG_CLUSTER)\n"
		   "  --host NAME          this host's name in the status keys (default: the hostname)\n"
		   "  --once               apply the current state as one commit and exit\n"
		   "  -h, --help           print this help\n"
		   "Runs in the foreground, one line per applied revision and per error on\n"
		   "stderr. Exit status: 0 on SIGTERM/SIGINT (or --once done), 1 failure,\n"
		   "2 usage error. See shmcfg-sync(1).\n",
		prog);
}

static bool valid_name(const char *s)
{
	if (!*s || strlen(s) > 63)
		return false;
	for (; *s; s++)
		if (*s == '/' || (unsigned char)*s <= ' ' || *s == 0x7f)
			return false;
	return true;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"endpoints", required_argument, NULL, 'e'}, {"cluster", required_argument, NULL, 'c'},
		{"host", required_argument, NULL, 'H'},      {"once", no_argument, NULL, '1'},
		{"help", no_argument, NULL, 'h'},            {NULL, 0, NULL, 0},
	};
	const char *endpoints = getenv("SHMCFG_ETCD_ENDPOINTS"), *cluster = getenv("SHMCFG_CLUSTER"), *host = NULL;
	bool once = false;
	int c;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'e': endpoints = optarg; break;
		case 'c': cluster = optarg; break;
		case 'H': host = optarg; break;
		case '1': once = true; break;
		case 'h': usage(stdout); return 0;
		default:
			if (optopt)
				fprintf(stderr, "%s: option '-%c' %s\n", prog, optopt,
					strchr("ecH", optopt) ? "needs an argument" : "is unknown");
			else
				fprintf(stderr, "%s: option '%s' is unknown or needs an argument\n", prog, argv[optind - 1]);
			usage(stderr);
			return 2;
		}
	}
	char hostname[256];
	if (!host) {
		if (gethostname(hostname, sizeof hostname))
			snprintf(hostname, sizeof hostname, "unknown");
		hostname[sizeof hostname - 1] = 0;
		host = hostname;
	}
	const char *bad = NULL;
	if (optind >= argc)
		bad = "no SEGMENT given";
	else if (!endpoints || !*endpoints)
		bad = "no etcd endpoints: give --endpoints or set SHMCFG_ETCD_ENDPOINTS";
	else if (!cluster || !*cluster)
		bad = "no cluster: give --cluster or set SHMCFG_CLUSTER";
	else if (!valid_name(cluster))
		bad = "bad cluster name: 1 to 63 bytes, no '/', space or control character";
	else if (!valid_name(host))
		bad = "bad host name: 1 to 63 bytes, no '/', space or control character";
	if (bad) {
		fprintf(stderr, "%s: %s\n", prog, bad);
		usage(stderr);
		return 2;
	}

	struct agent a;
	memset(&a, 0, sizeof a);
	a.cluster = cluster;
	a.host = host;
	if (asprintf(&a.prefix, "/shmcfg/v1/%s/", cluster) < 0)
		return 1;
	a.prefix_len = strlen(a.prefix);
	int r = etcd_open(endpoints, LIVENESS_MS, &a.e);
	if (r) {
		logf_("error: %s", etcd_errmsg(a.e));
		etcd_close(a.e);
		free(a.prefix);
		return r == ETCD_E_ARG ? 2 : 1;
	}
	a.nsegs = (size_t)(argc - optind);
	a.segs = calloc(a.nsegs, sizeof *a.segs);
	int status = 0;
	for (size_t i = 0; a.segs && i < a.nsegs; i++) {
		struct seg *s = &a.segs[i];
		s->name = argv[optind + (int)i];
		s->rejected = json_array();
		if ((r = shmcfg_attach(s->name, 0, NULL, &s->h))) {
			logf_("error: segment '%s': %s", s->name, lib_err(r));
			status = 1;
		} else if (asprintf(&s->status_key, "%sstatus/%s/%s", a.prefix, host, s->name) < 0) {
			s->status_key = NULL;
			status = 1;
		} else {
			refresh(&a, s);
		}
	}
	if (!a.segs)
		status = 1;
	if (status)
		goto out;

	rnd_state = now_ns(CLOCK_MONOTONIC) ^ ((uint64_t)getpid() << 32) ^ 0x9e3779b97f4a7c15ull;
	if (pipe2(wake_pipe, O_CLOEXEC | O_NONBLOCK)) {
		logf_("error: pipe: %s", strerror(errno));
		status = 1;
		goto out;
	}
	struct sigaction sa = {.sa_handler = on_signal};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (once) {
		if ((r = load(&a))) {
			logf_("error: %s", etcd_errmsg(a.e));
			status = 1;
		}
		for (size_t i = 0; i < a.nsegs; i++)
			if (*a.segs[i].error)
				status = 1;
	} else {
		status = run(&a);
		logf_("stopping");
	}
out:
	for (size_t i = 0; a.segs && i < a.nsegs; i++) {
		struct seg *s = &a.segs[i];
		shmcfg_close(s->h);
		free(s->status_key);
		json_decref(s->rejected);
		knobs_set(s, NULL, 0);
	}
	free(a.segs);
	mirror_clear(&a.m);
	free(a.prefix);
	etcd_close(a.e);
	if (wake_pipe[0] >= 0) {
		close(wake_pipe[0]);
		close(wake_pipe[1]);
	}
	return status;
}
