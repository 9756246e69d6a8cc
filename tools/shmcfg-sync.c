/* SPDX-License-Identifier: MIT */
/*
 * shmcfg-sync: keeps this host's segments in step with a cluster's etcd
 * prefix (issues 13 and 22; doc/cluster.md has the key layout and the
 * promises).
 *
 *   shmcfg-sync [--endpoints URL[,URL]] [--cluster NAME] [--host NAME] [--once] SEGMENT...
 *
 * A mirror of the prefix's opt/, knob/ and head keys is loaded by paged
 * range reads at one revision R, then kept by a watch of [P"audit/",
 * P"opt0") from R+1 (cluster-keys.h: the other hosts' status writes stay
 * out of it). Every etcd revision seen becomes
 * exactly one commit of each segment, tagged with the revision and the
 * "who" of the audit record written in it (sync-apply.c: a load applies the
 * whole mirror, a revision only its own keys).
 *
 * One member at a time. The watch and the liveness probe (sync-probe.c: a
 * thread of its own asks the member for its status) use the same member,
 * `member`: a member that hangs behind a live watch, or knows no leader,
 * fails its probe. When
 * the probe has had no answer for LIVENESS_MS, or the watch breaks, the
 * agent moves to the next endpoint at once and resumes the watch from its
 * revision + 1 (no reload: every member has the revisions, unless they
 * were compacted); once it has tried every endpoint in a row it backs off
 * with full jitter. Meanwhile the segment keeps its values and its sync
 * record, its status key and `shmctl stat` say since when and why it is
 * out of sync; it is in sync again when a member confirms a new watch.
 *
 * Threads: this loop applies what the watch delivers and never waits for
 * an etcd answer other than the watch's own; the probe and the lease
 * thread (keepalives, status puts: a stalled write blocks it only) share
 * struct probe with it, under its mutex.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cluster-conf.h"
#include "cluster-keys.h"
#include "metrics.h"
#include "sync.h"
#include "distance.h"
#include "termsafe.h"

enum {
	LIVENESS_MS = 4000,   /* the member's silence that moves the agent (noticed in < 5 s: the
			       * probe asks every second, and waits 3 s at most) */
	SUSPECT_MS = 2000,    /* ... that makes it say it is out of sync meanwhile (a probe missed) */
	TICK_MS = 1000,       /* the sync records' heartbeat; a failed commit tried again */
	WATCH_WAIT_MS = 200,  /* the loop looks at the probe this often */
	REQUEST_MS = 3000,    /* a load's request */
	BACKOFF_BASE_MS = 100,
	BACKOFF_CAP_MS = 2000,
	TAKE_OVER_MS = 10000, /* --take-over: the agent it stops has this long to let go */
	SUMMARY_MS = 60000,   /* errors while out of sync: one line this often */
};

static const char *prog = "shmcfg-sync";
static volatile sig_atomic_t stopping;
static int wake_pipe[2] = {-1, -1};

/* Under systemd, journald stamps each line itself (JOURNAL_STREAM names
 * the stream stderr is, systemd.exec(5)): elsewhere the agent does. */
static bool log_stamped(void)
{
	static int stamped = -1;
	if (stamped < 0) {
		const char *js = getenv("JOURNAL_STREAM");
		unsigned long long dev, ino;
		struct stat st;
		stamped = !(js && sscanf(js, "%llu:%llu", &dev, &ino) == 2 && fstat(2, &st) == 0 &&
			    (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino);
	}
	return stamped;
}

void logf_(const char *fmt, ...)
{
	char line[2048], stamp[40] = "";
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	if (log_stamped()) {
		struct timespec ts;
		struct tm tm;
		clock_gettime(CLOCK_REALTIME, &ts);
		gmtime_r(&ts.tv_sec, &tm);
		size_t n = strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
		snprintf(stamp + n, sizeof stamp - n, ".%03ldZ ", ts.tv_nsec / 1000000);
	}
	fprintf(stderr, "%s%s: %s\n", stamp, prog, line);
}

uint64_t now_ns(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void printable(const char *in, char *out, size_t size)
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

struct agent {
	struct etcd *e;       /* loads and the watch */
	struct probe probe;
	const char *cluster, *host;
	char *prefix;         /* /shmcfg/v1/CLUSTER/ */
	size_t prefix_len;
	struct seg *segs;
	size_t nsegs;
	struct mirror m;
	int64_t rev;          /* the mirror holds the store's state at this revision */
	int64_t tag;          /* the revision a commit of the whole mirror carries: its newest write */
	size_t member;        /* the endpoint of the watch and the probe */
	char **status_keys;   /* the segments', for the probe */
	uint64_t out_of_sync; /* CLOCK_REALTIME since when it is not in sync; 0: in sync */
	char error[256];      /* the agent's last etcd error, "" when in sync */
	/* errors while out of sync: the first logged, the rest counted and
	 * summed up once a minute (an outage must not flood the log) */
	unsigned unlogged;
	uint64_t summary_ns;  /* CLOCK_MONOTONIC of the last line about them */
	uint64_t summary_ms;  /* how often: SHMCFG_SYNC_LOG_SUMMARY_S, default SUMMARY_MS */
	/* --metrics-file */
	const char *metrics_path;
	uint64_t start_ns;    /* CLOCK_REALTIME */
	uint64_t etcd_errors, loads;
	char metrics_err[300]; /* the last failure to write it, said once */
};

/* The state of a segment as its sync record and status key say it: out of
 * sync while the agent is, or while its commits fail. */
static uint64_t seg_out_of_sync(const struct agent *a, const struct seg *s)
{
	if (a->out_of_sync && s->failing_since)
		return a->out_of_sync < s->failing_since ? a->out_of_sync : s->failing_since;
	return a->out_of_sync ? a->out_of_sync : s->failing_since;
}

static const char *seg_errtext(const struct agent *a, const struct seg *s)
{
	return *s->error ? s->error : a->error;
}

static void record_sync(struct agent *a, struct seg *s)
{
	if (!s->claimed)
		return; /* the record is the claiming agent's */
	shmcfg_sync_info si;
	memset(&si, 0, sizeof si);
	snprintf(si.endpoints, sizeof si.endpoints, "%s", etcd_endpoints(a->e));
	snprintf(si.cluster, sizeof si.cluster, "%s", a->cluster);
	snprintf(si.host, sizeof si.host, "%s", a->host);
	si.pid = (int32_t)getpid();
	si.updated_ns = now_ns(CLOCK_REALTIME);
	si.applied_rev = s->applied_rev;
	si.out_of_sync_ns = seg_out_of_sync(a, s);
	si.nrejected = (uint32_t)s->rejects.n;
	snprintf(si.error, sizeof si.error, "%s", seg_errtext(a, s));
	int r = shmcfg_sync_set(s->h, &si);
	if (r)
		logf_("%s: error: recording the sync state: %s", s->name,
		      *shmcfg_errdetail() ? shmcfg_errdetail() : shmcfg_strerror(r));
}

/* The status key's value. The rejections listed are capped: every cluster
 * writer can add keys this schema rejects, and a status over etcd's request
 * limit would fail every put. */
static char *status_json(struct agent *a, struct seg *s)
{
	json_t *rej = json_array();
	size_t n = 0;
	kmap_each(&s->rejects, k)
	{
		if (n++ == STATUS_REJECTED_MAX)
			break;
		char key[600];
		printable(k->key, key, sizeof key);
		json_array_append_new(rej, json_pack("{s:s, s:s}", "key", key, "error", ((struct reject *)k)->why));
	}
	json_t *ov = json_array();
	n = 0;
	kmap_each(&s->overrides, k)
	{
		if (n++ == STATUS_REJECTED_MAX)
			break;
		const struct override *x = (const struct override *)k;
		size_t len = strlen(x->value);
		json_t *v = len <= STATUS_VALUE_MAX ? json_loads(x->value, JSON_DECODE_ANY, NULL) : NULL;
		if (!v) { /* its beginning, as text, and its size */
			char cut[STATUS_VALUE_MAX + 1];
			size_t c = len < STATUS_VALUE_MAX ? len : STATUS_VALUE_MAX;
			while (c < len && c > 0 && ((unsigned char)x->value[c] & 0xC0) == 0x80)
				c--; /* not within a UTF-8 character */
			memcpy(cut, x->value, c);
			cut[c] = 0;
			v = json_sprintf("%s... (%zu bytes)", cut, len);
		}
		json_array_append_new(ov, json_pack("{s:s, s:s, s:o}", "option", x->k.key, "layer",
						    shmcfg_source_name(x->layer), "value", v ? v : json_null()));
	}
	uint64_t oos = seg_out_of_sync(a, s);
	json_t *j = json_pack("{s:s, s:s, s:i, s:I, s:I, s:s, s:b, s:s, s:s, s:o, s:I, s:I, s:I, s:I, s:I}", "host",
			      a->host, "segment", s->name, "pid", (int)getpid(), "revision", (json_int_t)s->applied_rev,
			      "generation", (json_int_t)s->generation, "config_hash", s->hash, "in_sync", oos == 0,
			      "endpoint", etcd_endpoint(a->e, a->member), "error", seg_errtext(a, s), "rejected", rej,
			      "nrejected", (json_int_t)s->rejects.n, "heap_bytes", (json_int_t)s->heap_bytes, "heap_used",
			      (json_int_t)s->heap_used, "time_ns", (json_int_t)now_ns(CLOCK_REALTIME),
			      "out_of_sync_since_ns", (json_int_t)oos);
	json_object_set_new(j, "schema_hash", json_string(s->schema_hash));
	json_object_set_new(j, "overrides", ov);
	json_object_set_new(j, "noverrides", json_integer((json_int_t)s->overrides.n));
	char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	return text;
}

/* What changed goes out: the sync record of every segment whose state
 * changed (all: every one, and at once), and its status text to the lease
 * thread. */
static void publish(struct agent *a, bool all)
{
	for (size_t i = 0; i < a->nsegs; i++) {
		struct seg *s = &a->segs[i];
		char *schema = NULL, *key = NULL;
		/* a segment replaced by one of another schema: that one is kept too */
		if (a->probe.nthreads == 2 && !seg_schema(s, &schema) && schema && strlen(schema) > SCHEMA_KEPT_MAX) {
			logf_("%s: its schema (%zu bytes) is too big to keep in etcd: cluster commands on hosts without "
			      "the segment need --schema FILE",
			      s->name, strlen(schema));
			free(schema);
		} else if (schema && (key = ck_key(a->prefix, CK_SCHEMA, s->schema_hash, NULL))) {
			probe_schema(&a->probe, i, key, schema);
		} else {
			free(schema);
		}
		if (!all && !s->status_dirty)
			continue;
		record_sync(a, s);
		char *text = status_json(a, s);
		if (text && a->probe.nthreads == 2)
			probe_status(&a->probe, i, text, all || s->status_urgent);
		else
			free(text);
		s->status_dirty = s->status_urgent = false;
	}
}

/* The agent's etcd state changed: every segment's record and status. */
static void set_agent_state(struct agent *a, uint64_t out_of_sync, const char *msg)
{
	bool changed = strcmp(a->error, msg) || a->out_of_sync != out_of_sync;
	snprintf(a->error, sizeof a->error, "%s", msg);
	a->out_of_sync = out_of_sync;
	publish(a, changed);
}

/* Lost the member (why): out of sync since it last answered. Said once
 * (the state changed), then once a minute while it lasts. */
static void went_offline(struct agent *a, const char *why, uint64_t silent_ms)
{
	char msg[sizeof a->error];
	printable(why, msg, sizeof msg);
	uint64_t since = a->out_of_sync, now = now_ns(CLOCK_MONOTONIC);
	a->etcd_errors++;
	if (!since) {
		logf_("error: %s", msg);
		since = now_ns(CLOCK_REALTIME) - silent_ms * 1000000ull;
		logf_("out of sync since %.3f s ago", (double)silent_ms / 1e3);
		a->unlogged = 0;
		a->summary_ns = now;
	} else if (++a->unlogged, now - a->summary_ns >= a->summary_ms * 1000000ull) {
		logf_("still out of sync, for %.0f s: %u more error%s in the last minute, the last: %s",
		      (double)(now_ns(CLOCK_REALTIME) - since) / 1e9, a->unlogged, a->unlogged == 1 ? "" : "s", msg);
		a->unlogged = 0;
		a->summary_ns = now;
	}
	set_agent_state(a, since, msg);
}

/* The member answers again: in sync. */
static void back_in_sync(struct agent *a)
{
	if (a->out_of_sync) {
		char more[64] = "";
		if (a->unlogged)
			snprintf(more, sizeof more, "; %u error%s since the last line", a->unlogged, a->unlogged == 1 ? "" : "s");
		logf_("in sync again (out of sync for %.3f s%s)", (double)(now_ns(CLOCK_REALTIME) - a->out_of_sync) / 1e9,
		      more);
	}
	a->unlogged = 0;
	set_agent_state(a, 0, "");
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
	return ck_in(rel, CK_OPT) || ck_in(rel, CK_KNOB) || !strcmp(rel, CK_HEAD);
}

/* A key of ours, relative to the prefix; NULL if not (a NUL in it names
 * nothing of ours). */
static const char *rel_key(const struct agent *a, const struct etcd_kv *kv)
{
	if (kv->key_len < a->prefix_len || strlen(kv->key) != kv->key_len || strncmp(kv->key, a->prefix, a->prefix_len))
		return NULL;
	return kv->key + a->prefix_len;
}

/* A key under the prefix whose opt/ or knob/ name holds a NUL byte (a
 * name is text: it names nothing, but is rejected like any key that names
 * nothing here, not dropped unseen): its relative key escaped, every byte
 * that is not printable ASCII, and the backslash, as \xNN (two keys, two
 * texts), malloc'd; NULL if not such a key, or on ENOMEM (logged). */
static char *nul_key(const struct agent *a, const struct etcd_kv *kv)
{
	if (strlen(kv->key) == kv->key_len || kv->key_len < a->prefix_len ||
	    memcmp(kv->key, a->prefix, a->prefix_len))
		return NULL;
	const unsigned char *rel = (const unsigned char *)kv->key + a->prefix_len;
	size_t n = kv->key_len - a->prefix_len;
	if (!(n > strlen(CK_OPT) && !memcmp(rel, CK_OPT, strlen(CK_OPT))) &&
	    !(n > strlen(CK_KNOB) && !memcmp(rel, CK_KNOB, strlen(CK_KNOB))))
		return NULL;
	char *out = malloc(4 * n + 1), *o = out;
	if (!out) {
		logf_("error: out of memory");
		return NULL;
	}
	for (size_t i = 0; i < n; i++)
		if (rel[i] >= 0x20 && rel[i] < 0x7f && rel[i] != '\\')
			*o++ = (char)rel[i];
		else
			o += sprintf(o, "\\x%02x", rel[i]);
	*o = 0;
	return out;
}

/* Loads the mirror at one revision: opt/ at the newest, then knob/ and head
 * at the same revision (paged: no answer-size cap stops a load), and
 * applies it to every segment. */
static int load(struct agent *a)
{
	static const char *const parts[] = {CK_OPT, CK_KNOB, CK_HEAD};
	struct mirror m = {0};
	int64_t rev = 0, newest = 0;
	char key[512];
	int r = 0;
	etcd_pin(a->e, SIZE_MAX); /* any member will do; the watch goes where the load got its answer */
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
			const char *rel = rel_key(a, kv);
			if (!rel) {
				char *bad = nul_key(a, kv);
				if (bad)
					r = mirror_bad_put(&m, bad);
				free(bad);
				continue;
			}
			r = mirror_put(&m, rel, kv->value, kv->value_len, kv->mod_rev); /* takes the value */
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
	a->member = etcd_current(a->e);
	a->loads++;
	logf_("loaded %zu key%s of %s at revision %" PRId64, m.map.n, m.map.n == 1 ? "" : "s", a->prefix, rev);
	/* tagged with the revision of the newest write in the mirror, not the
	 * store's (which other hosts' status writes move): hosts that loaded
	 * the same keys at different moments then report the same revision */
	/* after etcd was replaced the segments go back to its revisions, even
	 * with nothing under the prefix (no revision 0 can be carried) */
	a->tag = newest ? newest : a->segs[0].rebase ? rev : 0;
	for (size_t i = 0; i < a->nsegs; i++)
		/* a commit if anything differs, or if a write the segment has not
		 * seen is in the mirror (its revision must show) */
		if (seg_follow(&a->segs[i]) >= 0)
			apply_all(&a->segs[i], &a->m, a->tag, a->rev);
	publish(a, false);
	return 0;
}

/* Applies one watch response: the events of each revision to the mirror,
 * then one commit per revision for every segment, of the keys it changed. */
static void events(struct agent *a, struct etcd_watch_resp *wr)
{
	struct kchange *ch = calloc(wr->n + 1, sizeof *ch);
	if (!ch) {
		logf_("error: out of memory");
		return;
	}
	for (size_t i = 0; i < wr->n;) {
		int64_t rev = wr->ev[i].kv.mod_rev;
		char who[SHMCFG_WHO_MAX] = "";
		size_t j = i, n = 0;
		for (; j < wr->n && wr->ev[j].kv.mod_rev == rev; j++) {
			struct etcd_kv *kv = &wr->ev[j].kv;
			const char *rel = rel_key(a, kv);
			char *bad = rev > a->rev && !rel ? nul_key(a, kv) : NULL;
			if (bad) {
				bool deleted = wr->ev[j].type == ETCD_EV_DELETE;
				if (deleted)
					mirror_bad_delete(&a->m, bad);
				else if (mirror_bad_put(&a->m, bad))
					logf_("error: revision %" PRId64 ": out of memory", rev);
				for (size_t k = 0; k < a->nsegs; k++)
					seg_bad_key(&a->segs[k], bad, deleted);
				free(bad);
			}
			if (rev <= a->rev || !rel)
				continue; /* already applied (a resumed watch), or not ours */
			if (ck_in(rel, CK_AUDIT) && wr->ev[j].type == ETCD_EV_PUT)
				audit_who(kv->value, kv->value_len, who, sizeof who);
			if (!mirrored(rel))
				continue;
			bool deleted = wr->ev[j].type == ETCD_EV_DELETE;
			if (deleted) {
				mirror_delete(&a->m, rel);
			} else {
				int pr = mirror_put(&a->m, rel, kv->value, kv->value_len, kv->mod_rev);
				kv->value = NULL; /* mirror_put took it (and freed it on failure) */
				if (pr) {
					logf_("error: revision %" PRId64 ": out of memory", rev);
					deleted = true; /* the key is not in the mirror */
					mirror_delete(&a->m, rel);
				}
			}
			ch[n++] = (struct kchange){rel, deleted};
		}
		if (rev > a->rev) {
			a->rev = a->tag = rev;
			for (size_t k = 0; k < a->nsegs; k++) {
				struct seg *s = &a->segs[k];
				if (seg_follow(s) < 0)
					continue;
				if (s->need_full) /* a commit failed before, or a new segment: all of it */
					apply_all(s, &a->m, rev, rev);
				else
					apply_revision(s, &a->m, ch, n, rev, who);
			}
			publish(a, false);
		}
		i = j;
	}
	free(ch);
}

/*
 * The member's store is behind the revision the agent has: a member still
 * catching up, or etcd replaced (its data wiped, a snapshot restored). A
 * linearizable read through it tells: it answers at the cluster's newest
 * revision. Gone back: the whole prefix is loaded again, and the segments
 * may then carry a revision below theirs (rebase).
 */
static bool store_went_back(struct agent *a)
{
	struct etcd_kvs kvs;
	char key[512];
	snprintf(key, sizeof key, "%s" CK_HEAD, a->prefix);
	etcd_pin(a->e, a->member);
	if (etcd_get(a->e, key, false, 0, &kvs))
		return false; /* no answer: the probe will tell */
	int64_t now = kvs.revision;
	etcd_kvs_free(&kvs);
	if (now >= a->rev)
		return false;
	logf_("etcd's revision went back from %" PRId64 " to %" PRId64 " (etcd replaced, or restored from a "
	      "snapshot): loading everything again", a->rev, now);
	for (size_t i = 0; i < a->nsegs; i++)
		a->segs[i].rebase = true;
	return true;
}

/*
 * --metrics-file: every segment's metrics and the agent's (tools/metrics.c)
 * in node_exporter's textfile format, written to a temporary file in the
 * same directory and renamed over PATH: a scrape reads a whole file, the
 * old or the new. A failure is logged once, until it changes.
 */
static void write_metrics(struct agent *a)
{
	if (!a->metrics_path)
		return;
	struct agent_metrics *am = calloc(a->nsegs, sizeof *am);
	struct seg_metrics *m = calloc(a->nsegs, sizeof *m);
	char *dir = strdup(a->metrics_path), *base = strdup(a->metrics_path);
	char tmp[PATH_MAX], err[sizeof a->metrics_err] = "";
	FILE *f = NULL;
	int fd = -1;
	if (!am || !m || !dir || !base) {
		snprintf(err, sizeof err, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < a->nsegs; i++) {
		struct seg *s = &a->segs[i];
		am[i] = (struct agent_metrics){
			.etcd_up = !a->out_of_sync, .out_of_sync_ns = a->out_of_sync, .start_ns = a->start_ns,
			.etcd_errors = a->etcd_errors, .loads = a->loads, .watch_rev = (uint64_t)a->tag,
			.applied = s->napplied, .apply_errors = s->nfailed,
		};
		m[i].agent = &am[i];
		/* a segment gone (and none of its name to follow yet) is down */
		if (shmcfg_retired(s->h) || metrics_read(s->h, s->name, &m[i]))
			m[i] = (struct seg_metrics){.name = s->name};
	}
	/* a dot file without .prom at its end: the textfile collector skips it */
	snprintf(tmp, sizeof tmp, "%s/.%s.XXXXXX", dirname(dir), basename(base));
	if ((fd = mkstemp(tmp)) < 0 || fchmod(fd, 0644) || !(f = fdopen(fd, "w"))) {
		snprintf(err, sizeof err, "creating a file in its directory: %s", strerror(errno));
	} else {
		int bad = metrics_write(f, m, a->nsegs);
		if (fclose(f) || bad)
			snprintf(err, sizeof err, "writing: %s", strerror(errno ? errno : EIO));
		else if (rename(tmp, a->metrics_path))
			snprintf(err, sizeof err, "renaming the new file over it: %s", strerror(errno));
		fd = -1; /* fclose closed it */
	}
	if (*err && strcmp(tmp + strlen(tmp) - 6, "XXXXXX"))
		unlink(tmp); /* made, not renamed */
out:
	if (fd >= 0)
		close(fd);
	if (strcmp(err, a->metrics_err)) {
		if (*err)
			logf_("error: --metrics-file %s: %s", a->metrics_path, err);
		else
			logf_("--metrics-file %s: written again", a->metrics_path);
		snprintf(a->metrics_err, sizeof a->metrics_err, "%s", err);
	}
	free(dir);
	free(base);
	free(am);
	free(m);
}

/* Every second: a segment replaced followed, the sync records rewritten
 * (their time says the agent lives: shmctl stat calls a record that stopped
 * moving stale), and the segments whose last commit failed tried again,
 * whole. */
static void tick(struct agent *a)
{
	for (size_t i = 0; i < a->nsegs; i++) {
		struct seg *s = &a->segs[i];
		if (seg_follow(s) < 0) {
			s->status_dirty = true;
			continue; /* no segment to write: its status key says why */
		}
		if (s->need_full)
			apply_all(s, &a->m, a->tag, a->rev);
		/* a local commit (shmctl set) may hide a cluster value, or uncover one */
		seg_refresh(s);
		if (s->generation != s->ov_gen)
			seg_overrides(s, &a->m, NULL, 0);
		if (!s->status_dirty)
			record_sync(a, s); /* the heartbeat (publish() writes the others) */
	}
	publish(a, false);
}

static int run(struct agent *a)
{
	char lo[512], hi[512];
	snprintf(lo, sizeof lo, "%s" CK_WATCH_FROM, a->prefix);
	snprintf(hi, sizeof hi, "%s" CK_WATCH_END, a->prefix);
	struct etcd_watch *w = NULL;
	bool need_load = true, created = false, resumed = false;
	uint64_t next_tick = 0, next_metrics = 0;
	unsigned failures = 0; /* in a row: a round over every endpoint backs off */
	size_t nep = etcd_nendpoints(a->e);

	while (!stopping) {
		/* here, not in tick(): also while no watch reaches etcd */
		if (now_ns(CLOCK_MONOTONIC) >= next_metrics) {
			next_metrics = now_ns(CLOCK_MONOTONIC) + TICK_MS * 1000000ull;
			write_metrics(a);
		}
		if (!w) {
			if (failures >= nep) {
				/* full jitter: a uniform wait in [0, min(cap, base * 2^n)) */
				unsigned exp = failures - nep < 10 ? failures - nep : 10;
				uint32_t lim = BACKOFF_BASE_MS << exp;
				nap((int)(rnd() % (lim < BACKOFF_CAP_MS ? lim : BACKOFF_CAP_MS)));
				if (stopping)
					break;
			}
			etcd_pin(a->e, a->member);
			int r = need_load ? load(a) : 0;
			if (!r) {
				etcd_pin(a->e, a->member);
				r = etcd_watch_open(a->e, lo, hi, a->rev + 1, &w);
			}
			if (r == ETCD_E_CANCELED)
				break; /* stopping */
			if (r) {
				failures++;
				went_offline(a, etcd_errmsg(a->e), 0);
				a->member = (a->member + 1) % nep;
				continue;
			}
			probe_member(&a->probe, a->member);
			resumed = !need_load;
			need_load = false;
			created = false;
		}
		struct etcd_watch_resp wr;
		int r = etcd_watch_next(w, WATCH_WAIT_MS, wake_pipe[0], &wr);
		if (r == 1) {
			if (wr.created && !created && wr.revision < a->rev && store_went_back(a)) {
				etcd_watch_resp_free(&wr);
				etcd_watch_close(w);
				w = NULL;
				need_load = true;
				continue;
			}
			if (wr.created && !created) {
				/* the member confirmed the watch: said only now */
				logf_("%s from revision %" PRId64 " on %s%s", resumed ? "resumed watching" : "watching",
				      a->rev + 1, etcd_endpoint(a->e, a->member), resumed ? " (no reload)" : "");
				created = true;
				failures = 0;
				back_in_sync(a);
			}
			events(a, &wr);
			etcd_watch_resp_free(&wr);
		} else if (r == ETCD_E_COMPACTED) {
			logf_("error: %s; reloading", etcd_errmsg(a->e));
			etcd_watch_close(w);
			w = NULL;
			need_load = true;
			continue;
		} else if (r < 0) {
			char perr[512];
			etcd_watch_close(w);
			w = NULL;
			failures++;
			went_offline(a, etcd_errmsg(a->e), probe_silence_ms(&a->probe, NULL, perr, sizeof perr));
			a->member = (a->member + 1) % nep;
			continue;
		}
		if (stopping)
			break;
		if (now_ns(CLOCK_MONOTONIC) >= next_tick) {
			next_tick = now_ns(CLOCK_MONOTONIC) + TICK_MS * 1000000ull;
			tick(a);
		}
		char err[512], why[700];
		uint64_t unanswered, silent = probe_silence_ms(&a->probe, &unanswered, err, sizeof err);
		if (unanswered >= SUSPECT_MS && silent < LIVENESS_MS && !a->out_of_sync) {
			/* a member silent for a while (not one that waits for an
			 * election): out of sync as far as anyone can tell, said
			 * while deciding */
			snprintf(why, sizeof why, "etcd %s: no answer for %.1f s%s%s", etcd_endpoint(a->e, a->member),
				 (double)unanswered / 1e3, *err ? ": " : "", err);
			went_offline(a, why, unanswered);
		} else if (unanswered < SUSPECT_MS && silent < SUSPECT_MS && a->out_of_sync && created) {
			back_in_sync(a);
		}
		if (silent >= LIVENESS_MS) {
			snprintf(why, sizeof why, "etcd %s: no answer for %.1f s%s%s", etcd_endpoint(a->e, a->member),
				 (double)silent / 1e3, *err ? ": " : "", err);
			etcd_watch_close(w);
			w = NULL;
			failures++;
			went_offline(a, why, silent);
			a->member = (a->member + 1) % nep;
		}
	}
	etcd_watch_close(w);
	return 0;
}

/* Whether pid runs shmcfg-sync (libtool's wrapper runs it as lt-shmcfg-sync). */
static bool is_agent(pid_t pid)
{
	char path[64], comm[32] = "";
	snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	bool ok = fgets(comm, sizeof comm, f) != NULL;
	fclose(f);
	comm[strcspn(comm, "\n")] = 0;
	return ok && (!strcmp(comm, "shmcfg-sync") || !strcmp(comm, "lt-shmcfg-sync"));
}

/* One agent per segment (shmcfg_sync_claim). --take-over asks the agent that
 * holds the claim to stop (SIGTERM; only to a process that runs
 * shmcfg-sync: the pid comes from the segment's record, which any writer
 * can write) and waits for its claim to end. */
static int claim(struct seg *s, bool take_over)
{
	int r = shmcfg_sync_claim(s->h, 0);
	if (r != -EBUSY || !take_over)
		goto done;
	shmcfg_sync_info si;
	if (shmcfg_sync_get(s->h, &si) == 0 && si.pid > 0 && si.pid != getpid() && is_agent(si.pid)) {
		logf_("%s: taking over from shmcfg-sync pid %d (cluster '%.63s')", s->name, (int)si.pid, si.cluster);
		kill(si.pid, SIGTERM);
	}
	r = shmcfg_sync_claim(s->h, TAKE_OVER_MS);
done:
	s->claimed = r == 0;
	return r;
}

/* A segment that followed another cluster: its cluster layer becomes this
 * one's (a mistyped --cluster would reset it: say so, once). */
static void warn_other_cluster(struct seg *s, const char *cluster)
{
	shmcfg_sync_info si;
	if (shmcfg_sync_get(s->h, &si) || !*si.cluster || !strcmp(si.cluster, cluster))
		return;
	char was[sizeof si.cluster * 4];
	printable(si.cluster, was, sizeof was);
	logf_("%s: warning: the segment followed cluster '%s' (its record); it now follows '%s', whose values "
	      "replace its cluster layer",
	      s->name, was, cluster);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: %s [--endpoints URL[,URL]] [--cluster NAME] [--host NAME] [--once]\n"
		   "       [--take-over] [--metrics-file PATH] SEGMENT...\n"
		   "Keeps the cluster layer of each SEGMENT in step with etcd (see doc/cluster.md).\n"
		   "  --endpoints URL,...  etcd endpoints, http://HOST:PORT or unix:PATH\n"
		   "                       (default: $SHMCFG_ETCD_ENDPOINTS, else " CLUSTER_CONF_PATH ")\n"
		   "  --cluster NAME       the cluster's name: keys under " CK_ROOT "NAME/\n"
		   "                       (default: $SHMCFG_CLUSTER, else " CLUSTER_CONF_PATH ")\n"
		   "  --host NAME          this host's name in the status keys (default: the hostname)\n"
		   "  --once               apply the current state as one commit and exit\n"
		   "  --take-over          stop the agent that syncs a SEGMENT now and take its place\n"
		   "  --metrics-file PATH  write metrics there every second (node_exporter's textfile\n"
		   "                       format: PATH ends in .prom), rewritten by a rename\n"
		   "  -h, --help           print this help\n"
		   "Runs in the foreground, one line per applied revision and per error on\n"
		   "stderr. One agent per segment: a SEGMENT another agent syncs is refused.\n"
		   "Exit status: 0 on SIGTERM/SIGINT (or --once done), 1 failure, 2 usage\n"
		   "error, 3 another agent syncs a SEGMENT. See shmcfg-sync(1).\n",
		prog);
}

/* --metrics-file PATH: its directory exists and may be written, and PATH,
 * if it exists, is a regular file (rename() would replace anything else);
 * "" if so, else why not. */
static void check_metrics_path(const char *path, char *why, size_t len)
{
	char *copy = strdup(path);
	const char *dir = copy ? dirname(copy) : ".";
	struct stat st;
	*why = 0;
	if (stat(dir, &st) || !S_ISDIR(st.st_mode))
		snprintf(why, len, "directory %s does not exist", dir);
	else if (access(dir, W_OK | X_OK))
		snprintf(why, len, "directory %s is not writable: %s", dir, strerror(errno));
	else if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode))
		snprintf(why, len, "%s exists and is not a regular file", path);
	else if (!*path || path[strlen(path) - 1] == '/')
		snprintf(why, len, "'%s' names no file", path);
	free(copy);
}

/* Whether getopt's refusal (optopt) is of the long option in word w. */
static bool long_refused(const struct option *lo, const char *w, int optopt_)
{
	if (strncmp(w, "--", 2))
		return false;
	if (!optopt_) /* unknown */
		return true;
	size_t len = strcspn(w + 2, "=");
	for (; lo->name; lo++)
		if (strlen(lo->name) == len && !strncmp(lo->name, w + 2, len))
			return lo->val == optopt_;
	return false;
}

/* A long option getopt refused: unknown (with the closest one, if one is
 * close), or one that needs an argument. */
static void unknown_option(const struct option *lo, const char *arg)
{
	char typed[80];
	snprintf(typed, sizeof typed, "%s", arg + strspn(arg, "-"));
	typed[strcspn(typed, "=")] = 0;
	const char *names[16];
	size_t n = 0;
	for (; lo[n].name && n < 16; n++) {
		if (!strcmp(lo[n].name, typed)) {
			fprintf(stderr, "%s: option '--%s' %s\n", prog, typed,
				lo[n].has_arg == required_argument ? "needs an argument" : "takes no value");
			return;
		}
		names[n] = lo[n].name;
	}
	const char *near = closest_word(typed, names, n);
	if (near)
		fprintf(stderr, "%s: unknown option '%s'; did you mean '--%s'?\n", prog, arg, near);
	else
		fprintf(stderr, "%s: unknown option '%s'\n", prog, arg);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"endpoints", required_argument, NULL, 'e'}, {"cluster", required_argument, NULL, 'c'},
		{"host", required_argument, NULL, 'H'},      {"once", no_argument, NULL, '1'},
		{"take-over", no_argument, NULL, 'T'},       {"help", no_argument, NULL, 'h'},
		{"metrics-file", required_argument, NULL, 'M'},
		{NULL, 0, NULL, 0},
	};
	const char *endpoints = NULL, *cluster = NULL, *host = NULL, *metrics = NULL;
	bool once = false, take_over = false;
	char **roster = NULL; /* this host's roster keys, then their values */
	int c;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'e': endpoints = optarg; break;
		case 'c': cluster = optarg; break;
		case 'H': host = optarg; break;
		case '1': once = true; break;
		case 'T': take_over = true; break;
		case 'M': metrics = optarg; break;
		case 'h': usage(stdout); return 0;
		default:
			/* the word getopt refused: the last one it took, unless a
			 * short option inside a cluster (-x1) was */
			if (long_refused(longopts, argv[optind - 1], optopt))
				unknown_option(longopts, argv[optind - 1]);
			else
				fprintf(stderr, "%s: option '-%c' %s\n", prog, optopt,
					strchr("ecHM", optopt) ? "needs an argument" : "is unknown");
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
	char conf_err[1200], metrics_err[PATH_MAX + 100] = "";
	if (metrics)
		check_metrics_path(metrics, metrics_err, sizeof metrics_err);
	struct cluster_conf conf = {0};
	int cr = 0;
	if (optind >= argc)
		bad = "no SEGMENT given";
	else if ((cr = cluster_conf(endpoints, cluster, &conf, conf_err, sizeof conf_err)))
		bad = conf_err;
	else if (!key_element_ok(host))
		bad = "bad host name: 1 to 63 bytes of UTF-8, no '/', space or control character";
	if (!bad && *metrics_err) {
		char shown[sizeof metrics_err];
		printable(metrics_err, shown, sizeof shown);
		fprintf(stderr, "%s: --metrics-file: %s\n", prog, shown);
		cluster_conf_free(&conf);
		return 2;
	}
	if (bad) {
		char shown[sizeof conf_err];
		printable(bad, shown, sizeof shown); /* the environment's bytes: one line */
		fprintf(stderr, "%s: %s\n", prog, shown);
		if (!cr) /* the configuration's own messages are one line */
			usage(stderr);
		cluster_conf_free(&conf);
		return 2;
	}
	endpoints = conf.endpoints;
	cluster = conf.cluster;

	struct agent a;
	memset(&a, 0, sizeof a);
	a.cluster = cluster;
	a.host = host;
	a.summary_ms = SUMMARY_MS;
	a.metrics_path = metrics;
	a.start_ns = now_ns(CLOCK_REALTIME);
	if (metrics && (strlen(metrics) < 5 || strcmp(metrics + strlen(metrics) - 5, ".prom")))
		logf_("warning: --metrics-file %s: node_exporter's textfile collector reads only files named *.prom",
		      metrics);
	const char *sum = getenv("SHMCFG_SYNC_LOG_SUMMARY_S");
	if (sum && *sum) {
		char *end;
		unsigned long v = strtoul(sum, &end, 10);
		if (*end || v < 1 || v > 86400) {
			fprintf(stderr, "%s: SHMCFG_SYNC_LOG_SUMMARY_S: '%.40s' is not a number of seconds (1 to 86400)\n", prog, sum);
			cluster_conf_free(&conf);
			return 2;
		}
		a.summary_ms = v * 1000;
	}
	if (asprintf(&a.prefix, CK_ROOT "%s/", cluster) < 0) {
		cluster_conf_free(&conf);
		return 1;
	}
	a.prefix_len = strlen(a.prefix);
	int r = etcd_open(endpoints, REQUEST_MS, &a.e);
	/* SIGTERM stops a load in progress too (a range's pages, a request) */
	if (!r)
		etcd_set_cancel(a.e, &stopping);
	if (r) {
		logf_("error: %s", etcd_errmsg(a.e));
		etcd_close(a.e);
		free(a.prefix);
		cluster_conf_free(&conf);
		return r == ETCD_E_ARG ? 2 : 1;
	}
	a.nsegs = (size_t)(argc - optind);
	a.segs = calloc(a.nsegs, sizeof *a.segs);
	int status = 0;
	for (size_t i = 0; a.segs && i < a.nsegs; i++) {
		struct seg *s = &a.segs[i];
		s->name = argv[optind + (int)i];
		/* a long-lived writer: the segment's pages mapped and every option validated
		 * now (it reads every option's knob below anyway), so a cluster
		 * change's commit never waits on first use; a successor it
		 * follows to is attached so too */
		if ((r = shmcfg_attach(s->name, SHMCFG_ATTACH_PREFAULT, NULL, &s->h))) {
			logf_("error: segment '%s': %s", s->name,
			      *shmcfg_errdetail() ? shmcfg_errdetail() : shmcfg_strerror(r));
			status = 1;
			continue;
		}
		if ((r = claim(s, take_over))) {
			logf_("error: %s%s", *shmcfg_errdetail() ? shmcfg_errdetail() : shmcfg_strerror(r),
			      r == -EBUSY ? "; stop it first, or --take-over" : "");
			status = r == -EBUSY ? 3 : 1;
			continue;
		}
		warn_other_cluster(s, cluster);
		if ((r = seg_index_knobs(s))) {
			logf_("error: segment '%s': reading its schema: %s", s->name, shmcfg_strerror(r));
			status = 1;
		} else if (!(s->status_key = ck_key(a.prefix, CK_STATUS, host, s->name))) {
			status = 1;
		} else {
			seg_refresh(s);
		}
	}
	if (!a.segs)
		status = 1;
	if (status)
		goto out;
	char **keys = calloc(a.nsegs, sizeof *keys);
	for (size_t i = 0; keys && i < a.nsegs; i++)
		keys[i] = a.segs[i].status_key;
	a.status_keys = keys;
	/* this host in the roster: expected from now on, until cluster forget */
	roster = calloc(2 * a.nsegs, sizeof *roster);
	bool roster_ok = roster != NULL;
	for (size_t i = 0; roster && i < a.nsegs; i++) {
		json_t *j = json_pack("{s:s, s:s, s:I}", "host", host, "segment", a.segs[i].name, "registered_ns",
				      (json_int_t)now_ns(CLOCK_REALTIME));
		roster[a.nsegs + i] = j ? json_dumps(j, JSON_COMPACT) : NULL;
		json_decref(j);
		roster[i] = ck_key(a.prefix, CK_ROSTER, host, a.segs[i].name);
		roster_ok &= roster[i] && roster[a.nsegs + i];
	}

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
		write_metrics(&a); /* once, and left: what this run did */
	} else if (!keys || !roster_ok || (r = probe_start(&a.probe, endpoints, keys, roster, roster + a.nsegs, a.nsegs))) {
		logf_("error: starting the probe: %s",
		      r == ETCD_E_NOMEM || r == -ENOMEM || !keys || !roster_ok ? "out of memory" : strerror(-r));
		status = 1;
	} else {
		publish(&a, true); /* the segments' state as found, before the first load */
		status = run(&a);
		logf_("stopping");
		/* a stopped agent exports nothing: no metrics of a state gone */
		if (metrics && unlink(metrics) && errno != ENOENT)
			logf_("error: --metrics-file %s: %s", metrics, strerror(errno));
	}
out:
	probe_stop(&a.probe);
	for (size_t i = 0; roster && i < 2 * a.nsegs; i++)
		free(roster[i]);
	free(roster);
	for (size_t i = 0; a.segs && i < a.nsegs; i++)
		seg_free(&a.segs[i]);
	free(a.segs);
	free(a.status_keys);
	mirror_clear(&a.m);
	free(a.prefix);
	etcd_close(a.e);
	if (wake_pipe[0] >= 0) {
		close(wake_pipe[0]);
		close(wake_pipe[1]);
	}
	cluster_conf_free(&conf);
	return status;
}
