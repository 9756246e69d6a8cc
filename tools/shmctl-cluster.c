/* SPDX-License-Identifier: MIT */
/*
 * shmctl cluster: the cluster layer kept in etcd (issue 13, doc/cluster.md).
 * These commands talk to etcd only: a change is one etcd transaction, and
 * the segment itself is written by its agent (shmcfg-sync) like every other
 * host's; the segment is read for its schema (validation before anything is
 * sent) and, for --wait, the cluster revision it has applied. Endpoints and
 * cluster come from flags, the environment or a root-owned file
 * (cluster-conf.h), never from the segment, which any process that may
 * write it can rewrite: the agent's record there is only compared.
 *
 * etcd's transient errors (leader changes, timeouts, no endpoint answering)
 * are retried with full-jitter backoff until a deadline (--timeout); a
 * transaction whose answer was lost is looked for before it is sent again.
 *
 * The keys: tools/cluster-keys.h (their layout), doc/cluster.md ("What
 * etcd holds": their values). Every writer compares the head's
 * mod_revision; an audit record's missing before/after means absent.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "shmctl-cluster.h"

#define ETCD_MAX_TXN_OPS 128 /* etcd's default --max-txn-ops */
#define TXN_ATTEMPTS 100     /* compare failures before a write gives up */
#define HEAP_WARN_MAX 32 /* warning lines of cluster set about small heaps */

/* ------------------------------------------------------------------ */
/* A change: one audited etcd transaction                             */
/* ------------------------------------------------------------------ */

struct kchange {
	char *rel;   /* "opt/NAME" or "knob/NAME" */
	char *after; /* JSON text to put; NULL: delete the key */
	/* read at each attempt */
	int64_t mod_rev; /* 0: absent */
	char *cur;       /* its bytes (NUL-terminated), NULL if absent */
	size_t cur_len;
	bool active;     /* it changes something: in the transaction */
	uint64_t need;   /* about the bytes it takes in a host's value heap */
};

struct plan {
	struct kchange *ch;
	size_t n;
	const char *reason;
	uint64_t rollback_of; /* 0: none */
	/* after each read of the current values: refuse (printed, EXIT_FAIL) */
	int (*check)(const struct cl *c, const struct plan *p, void *ud);
	void *ud;
	/* once, before the first transaction is sent (the active changes known) */
	void (*before_send)(const struct cl *c, const struct plan *p, void *ud);
	void *send_ud;
};

static void free_plan(struct plan *p)
{
	for (size_t i = 0; p->ch && i < p->n; i++) {
		free(p->ch[i].rel);
		free(p->ch[i].after);
		free(p->ch[i].cur);
	}
	free(p->ch);
}

/* Add a change; a later one of the same key replaces it (etcd refuses a
 * transaction that names a key twice). after is taken over. */
static int plan_add(struct plan *p, const char *rel, char *after)
{
	for (size_t i = 0; i < p->n; i++)
		if (!strcmp(p->ch[i].rel, rel)) {
			free(p->ch[i].after);
			p->ch[i].after = after;
			return 0;
		}
	struct kchange *nc = realloc(p->ch, (p->n + 1) * sizeof *nc);
	char *r = strdup(rel);
	if (!nc || !r) {
		free(r);
		free(after);
		if (nc)
			p->ch = nc;
		return fail("out of memory");
	}
	p->ch = nc;
	p->ch[p->n++] = (struct kchange){.rel = r, .after = after};
	return 0;
}

/* Whether the key's current bytes already are what the change leaves. */
static bool is_noop(const struct kchange *k)
{
	if (!k->after)
		return !k->cur;
	if (!k->cur)
		return false;
	json_t *a = parse_bytes(k->after, strlen(k->after), NULL), *b = parse_bytes(k->cur, k->cur_len, NULL);
	bool same = a && b && json_equal(a, b);
	json_decref(a);
	json_decref(b);
	return same;
}

struct who {
	char user[64], host[256], who[330];
	uid_t uid;
};

static void who_am_i(struct who *w)
{
	w->uid = geteuid();
	user_name(w->uid, w->user, sizeof w->user);
	if (gethostname(w->host, sizeof w->host) < 0)
		snprintf(w->host, sizeof w->host, "?");
	w->host[sizeof w->host - 1] = 0;
	snprintf(w->who, sizeof w->who, "%s@%s", w->user, w->host);
}

/* The audit record of the active changes, as JSON text. */
static char *audit_record(const struct plan *p, uint64_t seq, uint64_t t, const struct who *w)
{
	json_t *changes = json_array();
	for (size_t i = 0; i < p->n; i++) {
		const struct kchange *k = &p->ch[i];
		if (!k->active)
			continue;
		json_t *o = json_pack("{s:s}", "key", k->rel);
		if (k->cur) {
			json_t *b = parse_bytes(k->cur, k->cur_len, NULL);
			if (b)
				json_object_set_new(o, "before", b);
			else { /* garbage someone else wrote: kept as text, for the record */
				char *raw = term_escaped(k->cur, k->cur_len);
				json_object_set_new(o, "before_raw", json_string(raw ? raw : "?"));
				free(raw);
			}
		}
		if (k->after)
			json_object_set_new(o, "after", parse_bytes(k->after, strlen(k->after), NULL));
		json_array_append_new(changes, o);
	}
	json_t *rec = json_pack("{s:I, s:I, s:s, s:I, s:s, s:s, s:s?, s:o}", "seq", (json_int_t)seq, "time_ns",
				(json_int_t)t, "user", w->user, "uid", (json_int_t)w->uid, "host", w->host, "who",
				w->who, "reason", p->reason, "changes", changes);
	if (!rec)
		return NULL;
	if (p->rollback_of)
		json_object_set_new(rec, "rollback_of", json_integer((json_int_t)p->rollback_of));
	char *text = json_dumps(rec, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
	json_decref(rec);
	return text;
}

/* The head's sequence number: 0 if absent; -1 (printed) if not ours. */
static int64_t head_seq(const struct cl *c, const struct etcd_kvs *kvs)
{
	if (kvs->n == 0)
		return 0;
	json_error_t err;
	json_t *j = parse_bytes(kvs->kv[0].value, kvs->kv[0].value_len, &err);
	json_int_t s = j ? jint(j, "seq", -1) : -1;
	json_decref(j);
	if (s < 0) {
		fail("cluster '%s': key %s" CK_HEAD " is not {\"seq\": N, ...}; fix or delete it", c->cluster, c->prefix);
		return -1;
	}
	return s;
}

/* Sleep up to cap ms, at random (full jitter): writers that collided do not
 * collide again in step. */
static void jitter(int attempt)
{
	long cap = 2L << (attempt < 7 ? attempt : 7); /* 2 ms .. 256 ms */
	long ms = random() % (cap + 1);
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/*
 * A transaction sent that did not report success: a transient error (its
 * answer was lost: it may have been applied) or a failed compare (etcd.c
 * may have sent it to a second endpoint after a transient answer of the
 * first, which may have applied it). What was read for it, to report it
 * if its audit record turns up.
 */
struct sent {
	uint64_t seq;
	char *rec;    /* the audit record's bytes it put (with its time_ns and who) */
	bool unknown; /* a transient error: it may apply while the head stays */
	struct snap {
		char *cur;
		size_t cur_len;
		bool active;
	} *s; /* per change of the plan */
};

static void sent_drop(struct sent *v, size_t *n, size_t i, size_t nch)
{
	for (size_t k = 0; v[i].s && k < nch; k++)
		free(v[i].s[k].cur);
	free(v[i].s);
	free(v[i].rec);
	v[i] = v[--*n];
}

/* Keep an attempt (rec is taken over; the changes' current bytes too). */
static int sent_push(struct sent **v, size_t *n, struct plan *p, uint64_t seq, char *rec, bool unknown)
{
	struct sent *nv = realloc(*v, (*n + 1) * sizeof *nv);
	struct snap *s = calloc(p->n ? p->n : 1, sizeof *s);
	if (nv)
		*v = nv;
	if (!nv || !s) {
		free(s);
		free(rec);
		return fail("out of memory");
	}
	for (size_t i = 0; i < p->n; i++) {
		s[i] = (struct snap){p->ch[i].cur, p->ch[i].cur_len, p->ch[i].active};
		p->ch[i].cur = NULL;
	}
	(*v)[(*n)++] = (struct sent){seq, rec, unknown, s};
	return 0;
}

/*
 * Read the head and every key, drop the changes that change nothing, and
 * write the rest with the audit record and the new head in one transaction
 * that holds only if none of them moved since the read; else again.
 * Transient errors are retried until the deadline; a transaction sent
 * before counts as done once its own audit record (the same bytes: seq,
 * time_ns, who) is found, and is never sent twice (its compare on the head
 * fails once anything was written).
 * *rev: the transaction's revision (or, when nothing changed, the newest of
 * the keys'); *seq: the audit record's (0 when nothing changed).
 */
static int commit_plan(struct cl *c, struct plan *p, int64_t *rev, uint64_t *seq)
{
	if (p->n + 2 > ETCD_MAX_TXN_OPS)
		return fail("cluster '%s': %zu keys make a transaction of %zu operations; etcd allows %d "
			    "(at most %d keys at once)",
			    c->cluster, p->n, p->n + 2, ETCD_MAX_TXN_OPS, ETCD_MAX_TXN_OPS - 2);
	struct who w;
	who_am_i(&w);
	char *head_key = key_of(c, CK_HEAD);
	char **keys = calloc(p->n ? p->n : 1, sizeof *keys);
	struct etcd_cmp *cmps = calloc(p->n + 2, sizeof *cmps); /* the head, the audit key, each key */
	struct etcd_op *ops = calloc(p->n + 2, sizeof *ops);
	struct sent *sent = NULL;
	size_t nsent = 0;
	int rc = head_key && keys && cmps && ops ? EXIT_OK : fail("out of memory");
	for (size_t i = 0; rc == EXIT_OK && i < p->n; i++)
		if (!(keys[i] = key_of(c, p->ch[i].rel)))
			rc = fail("out of memory");
	char note[160] = ""; /* on failure: a transaction that may have been applied */
	bool done = false, warned = false, contended = false;
	for (int ncontended = 0; rc == EXIT_OK && !done;) {
		if (contended && ncontended == TXN_ATTEMPTS) {
			rc = fail("cluster '%s': gave up after %d attempts: other writers kept changing the same keys",
				  c->cluster, TXN_ATTEMPTS);
			break;
		}
		if (contended)
			jitter(ncontended);
		contended = false;
		struct etcd_kvs kvs;
		int r = get_retry(c, head_key, false, 0, &kvs);
		if (r) {
			rc = fail_etcd_note(c, r, note);
			break;
		}
		int64_t at = kvs.revision, head_rev = kvs.n ? kvs.kv[0].mod_rev : 0;
		int64_t hs = head_seq(c, &kvs);
		etcd_kvs_free(&kvs);
		if (hs < 0) {
			rc = EXIT_FAIL;
			break;
		}
		/* an attempt the head has passed either wrote its record or never
		 * will (its compare on the head cannot hold again) */
		for (size_t i = 0; rc == EXIT_OK && !done && i < nsent;) {
			if (sent[i].seq > (uint64_t)hs && sent[i].unknown) {
				i++;
				continue;
			}
			if (sent[i].seq <= (uint64_t)hs) {
				char rel[40], *ak;
				ck_audit(rel, sizeof rel, sent[i].seq);
				if (!(ak = key_of(c, rel))) {
					rc = fail("out of memory");
					break;
				}
				r = get_retry(c, ak, false, 0, &kvs);
				free(ak);
				if (r) {
					rc = fail_etcd_note(c, r, note);
					break;
				}
				if (kvs.n && kvs.kv[0].value_len == strlen(sent[i].rec) &&
				    !memcmp(kvs.kv[0].value, sent[i].rec, kvs.kv[0].value_len)) {
					/* it was applied: report it as it was read for */
					for (size_t k = 0; k < p->n; k++) {
						free(p->ch[k].cur);
						p->ch[k].cur = sent[i].s[k].cur;
						p->ch[k].cur_len = sent[i].s[k].cur_len;
						p->ch[k].active = sent[i].s[k].active;
						sent[i].s[k].cur = NULL;
					}
					*rev = kvs.kv[0].mod_rev;
					*seq = sent[i].seq;
					done = true;
				}
				etcd_kvs_free(&kvs);
				if (done)
					break;
			}
			sent_drop(sent, &nsent, i, p->n);
		}
		if (rc != EXIT_OK || done)
			break;
		if (!nsent)
			note[0] = 0;
		/* every key at the head's revision: the "before" values are one state */
		bool retry = false;
		int64_t newest = 0;
		for (size_t i = 0; rc == EXIT_OK && !retry && i < p->n; i++) {
			struct kchange *k = &p->ch[i];
			free(k->cur);
			k->cur = NULL;
			if ((r = get_retry(c, keys[i], false, at, &kvs)) == ETCD_E_COMPACTED) {
				retry = true;
				break;
			}
			if (r) {
				rc = fail_etcd_note(c, r, note);
				break;
			}
			k->mod_rev = kvs.n ? kvs.kv[0].mod_rev : 0;
			if (kvs.n && !(k->cur = malloc(kvs.kv[0].value_len + 1)))
				rc = fail("out of memory");
			else if (kvs.n) {
				memcpy(k->cur, kvs.kv[0].value, kvs.kv[0].value_len);
				k->cur[kvs.kv[0].value_len] = 0;
				k->cur_len = kvs.kv[0].value_len;
			}
			if (k->mod_rev > newest)
				newest = k->mod_rev;
			etcd_kvs_free(&kvs);
		}
		if (rc != EXIT_OK)
			break;
		if (retry) {
			contended = true;
			ncontended++;
			continue;
		}
		if (p->check && (rc = p->check(c, p, p->ud)))
			break;
		size_t nact = 0, nc = 0, no = 0;
		for (size_t i = 0; i < p->n; i++)
			nact += (p->ch[i].active = !is_noop(&p->ch[i]));
		if (nact == 0) {
			*rev = newest;
			*seq = 0;
			done = true;
			break;
		}
		if (p->before_send && !warned)
			p->before_send(c, p, p->send_ud);
		warned = true;
		uint64_t t = now_ns();
		char *rec = audit_record(p, (uint64_t)hs + 1, t, &w);
		char *head = NULL, *audit_key = NULL, rel[40];
		ck_audit(rel, sizeof rel, (uint64_t)hs + 1);
		json_t *hj = json_pack("{s:I, s:I, s:s}", "seq", (json_int_t)hs + 1, "time_ns", (json_int_t)t, "who",
				       w.who);
		if (hj)
			head = json_dumps(hj, JSON_COMPACT | JSON_PRESERVE_ORDER);
		json_decref(hj);
		audit_key = key_of(c, rel);
		if (!rec || !head || !audit_key)
			rc = fail("out of memory");
		/* a head set back by hand would make this record overwrite one
		 * that exists: refuse. Read at the head's revision (a record a
		 * racing writer added since is no sign of it); the compare below
		 * keeps a racing writer from overwriting one. */
		bool compacted = false;
		if (rc == EXIT_OK && !(r = get_retry(c, audit_key, false, at, &kvs))) {
			if (kvs.n)
				rc = fail("cluster '%s': audit record %llu exists, but the head (%s" CK_HEAD ") names %lld as the "
					  "newest: the head was set back; set its seq to the newest record's",
					  c->cluster, (unsigned long long)hs + 1, c->prefix, (long long)hs);
			etcd_kvs_free(&kvs);
		} else if (rc == EXIT_OK && r == ETCD_E_COMPACTED) {
			compacted = true; /* read again */
		} else if (rc == EXIT_OK) {
			rc = fail_etcd_note(c, r, note);
		}
		if (rc == EXIT_OK && compacted) {
			free(rec);
			free(head);
			free(audit_key);
			contended = true;
			ncontended++;
			continue;
		}
		if (rc == EXIT_OK) {
			cmps[nc++] = (struct etcd_cmp){head_key, head_rev};
			cmps[nc++] = (struct etcd_cmp){audit_key, 0};
			for (size_t i = 0; i < p->n; i++) {
				struct kchange *k = &p->ch[i];
				if (!k->active)
					continue;
				cmps[nc++] = (struct etcd_cmp){keys[i], k->mod_rev};
				ops[no++] = k->after ? (struct etcd_op){ETCD_OP_PUT, keys[i], k->after, strlen(k->after), 0}
						     : (struct etcd_op){ETCD_OP_DELETE, keys[i], NULL, 0, 0};
			}
			ops[no++] = (struct etcd_op){ETCD_OP_PUT, audit_key, rec, strlen(rec), 0};
			ops[no++] = (struct etcd_op){ETCD_OP_PUT, head_key, head, strlen(head), 0};
			bool ok = false;
			req_timeout(c);
			r = etcd_txn(c->e, cmps, nc, ops, no, &ok, rev);
			if (r == ETCD_E_TOO_MANY_OPS)
				rc = fail("cluster '%s': a transaction of %zu operations is more than this etcd allows "
					  "(its --max-txn-ops): change fewer keys at once",
					  c->cluster, no);
			else if (etcd_transient(r)) {
				/* its answer is lost: looked for after the backoff */
				snprintf(note, sizeof note,
					 "; a transaction sent meanwhile may have been applied as audit record %llu "
					 "(shmctl cluster log)",
					 (unsigned long long)hs + 1);
				rc = sent_push(&sent, &nsent, p, (uint64_t)hs + 1, rec, true);
				rec = NULL;
				if (rc == EXIT_OK && !backoff(c))
					rc = fail_etcd_note(c, r, note);
			} else if (r)
				rc = fail_etcd(c, r);
			else if (ok) {
				*seq = (uint64_t)hs + 1;
				done = true;
			} else {
				rc = sent_push(&sent, &nsent, p, (uint64_t)hs + 1, rec, false);
				rec = NULL;
				contended = true;
				ncontended++;
			}
		}
		free(rec);
		free(head);
		free(audit_key);
	}
	while (nsent)
		sent_drop(sent, &nsent, nsent - 1, p->n);
	free(sent);
	for (size_t i = 0; keys && i < p->n; i++)
		free(keys[i]);
	free(keys);
	free(cmps);
	free(ops);
	free(head_key);
	return rc;
}

/* This host's status key (its agent's record names the host) says rev:
 * cluster status shows the change the moment --wait returns. */
static int wait_status(struct cl *c, int64_t rev, double end)
{
	if (c->deadline < end) /* etcd's transient errors are retried as long as the wait lasts */
		c->deadline = end;
	shmcfg_sync_info si;
	char *key = NULL;
	if (shmcfg_sync_get(c->h, &si) || !*si.host)
		return 0; /* no agent recorded itself: no status key to wait for */
	si.host[sizeof si.host - 1] = 0;
	if (!(key = ck_key(c->prefix, CK_STATUS, si.host, c->seg)))
		return fail("out of memory");
	int rc = EXIT_OK;
	for (unsigned round = 0;; round++) {
		struct etcd_kvs kvs = {0};
		int r = get_retry(c, key, false, 0, &kvs);
		json_t *j = !r && kvs.n ? parse_bytes(kvs.kv[0].value, kvs.kv[0].value_len, NULL) : NULL;
		json_int_t have = jint(j, "revision", -1);
		json_decref(j);
		if (kvs.kv)
			etcd_kvs_free(&kvs);
		if (r) {
			rc = fail_etcd(c, r);
			break;
		}
		if (have >= rev)
			break;
		if (mono_now() >= end) {
			rc = fail("segment '%s' applied cluster revision %lld, but its status key in etcd does not say so "
				  "yet (its agent cannot put it?)",
				  c->seg, (long long)rev);
			break;
		}
		struct timespec ts = {0, (round < 4 ? 10000000L << round : 160000000L)};
		nanosleep(&ts, NULL);
	}
	free(key);
	return rc;
}

/* Wait until the segment applied cluster revision rev (its agent commits
 * it like on every host), then until its status key says so. */
static int wait_applied(struct cl *c, int64_t rev, double secs)
{
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		uint64_t gen = shmcfg_generation(c->h);
		uint64_t have = shmcfg_cluster_revision(c->h);
		if ((int64_t)have >= rev)
			return wait_status(c, rev, mono_now() + secs - (mono_now() - ((double)t0.tv_sec + (double)t0.tv_nsec / 1e9)));
		struct timespec t;
		clock_gettime(CLOCK_MONOTONIC, &t);
		double left = secs - ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9);
		if (left <= 0)
			return fail("segment '%s' did not apply cluster revision %lld within %g s (it has %llu; is "
				    "shmcfg-sync running for it?)",
				    c->seg, (long long)rev, secs, (unsigned long long)have);
		int ms = left > 1.0 ? 1000 : (int)ceil(left * 1000);
		int r = shmcfg_wait(c->h, gen, ms, NULL);
		if (r && r != -ETIMEDOUT && r != -EINTR)
			return fail_lib(r, c->seg);
	}
}

/* Commit the plan, print what changed, and --wait. */
static int run_plan(struct cl *c, const struct args *a, struct plan *p)
{
	int64_t rev = 0;
	uint64_t seq = 0;
	int rc = commit_plan(c, p, &rev, &seq);
	if (rc)
		return rc;
	for (size_t i = 0; i < p->n; i++) {
		const struct kchange *k = &p->ch[i];
		char buf[300];
		const char *name = label(k->rel, buf, sizeof buf);
		char *before = k->cur ? term_escaped(k->cur, k->cur_len) : NULL;
		if (!k->active)
			printf("%s: %s (unchanged)\n", name, before ? before : "unset");
		else
			printf("%s: %s -> %s%s%s\n", name, before ? before : "unset", color(C_BOLD),
			       k->after ? k->after : "unset", color(C_RESET));
		free(before);
	}
	if (seq)
		printf("cluster '%s': audit record %llu, revision %lld\n", c->cluster, (unsigned long long)seq,
		       (long long)rev);
	else
		printf("cluster '%s': nothing changed\n", c->cluster);
	if (a->wait && rev > 0 && a->wait_all) {
		const char **keys = calloc(p->n ? p->n : 1, sizeof *keys);
		if (!keys)
			return fail("out of memory");
		for (size_t i = 0; i < p->n; i++)
			keys[i] = p->ch[i].rel;
		rc = wait_all(c, rev, a->wait_s, keys, p->n);
		free(keys);
		return rc;
	}
	if (a->wait && rev > 0)
		return wait_applied(c, rev, a->wait_s);
	return EXIT_OK;
}

/* The etcd key of an option (its alias chain's end) or of its knob. */
static int option_key(const struct cl *c, shmcfg_opt final, bool knob, const char *full, const char *value,
		      char *buf, size_t len)
{
	shmcfg_optinfo fi;
	int r = shmcfg_opt_info(c->sh, final, &fi);
	if (r)
		return fail_lib(r, full);
	if (knob && !fi.knob)
		return fail_set(SHMCFG_E_LAYER, full, value ? value : "");
	snprintf(buf, len, "%s%s", knob ? CK_KNOB : CK_OPT, knob ? fi.knob : fi.name);
	return 0;
}

/* ------------------------------------------------------------------ */
/* set, reset, rollback                                               */
/* ------------------------------------------------------------------ */

/* About the bytes a value takes in a host's value heap: its chunk (header,
 * layer cells, rounding) and its strings (a list's items back to back,
 * each with its NUL: include/shmcfg.h). */
static uint64_t heap_need(const shmcfg_value *v)
{
	uint64_t n = 64;
	if (v->is_null)
		return n;
	if (v->type == SHMCFG_STR)
		n += v->u.str.len + 1;
	else if (v->type == SHMCFG_LIST || v->type == SHMCFG_SET)
		n += v->u.list.bytes + v->u.list.count;
	return n;
}

/*
 * Before a set is sent: a warning for each host (its status key's
 * heap_bytes and heap_used; keys without them are left out) whose value
 * heap has no room for a value being set. The host will reject the value
 * and keep the rest; the write goes ahead: the others take it.
 */
static void heap_warn(const struct cl *c, const struct plan *p, void *ud)
{
	const struct etcd_kvs *st = ud;
	size_t nwarn = 0, more = 0;
	for (size_t i = 0; i < st->n; i++) {
		json_t *r = parse_bytes(st->kv[i].value, st->kv[i].value_len, NULL);
		json_int_t total = jint(r, "heap_bytes", -1), used = jint(r, "heap_used", -1);
		char *host = NULL, *segn = NULL;
		for (size_t k = 0; json_is_object(r) && total >= 0 && used >= 0 && k < p->n; k++) {
			const struct kchange *ch = &p->ch[k];
			uint64_t room = used < total ? (uint64_t)(total - used) : 0;
			if (!ch->active || !ch->after || ch->need <= room)
				continue;
			if (nwarn == HEAP_WARN_MAX) {
				more++;
				continue;
			}
			if (!host) { /* status/<host>/<segment>, when the record does not say */
				const char *rel = rel_of(c, &st->kv[i]) + strlen(CK_STATUS);
				const char *slash = strchr(rel, '/');
				host = jstr(r, "host");
				segn = jstr(r, "segment");
				if (!host)
					host = term_escaped(rel, slash ? (size_t)(slash - rel) : strlen(rel));
				if (!segn)
					segn = term_escaped(slash ? slash + 1 : "?", strlen(slash ? slash + 1 : "?"));
			}
			char buf[300];
			warn_msg("host %s segment %s: %s needs about %llu bytes, its value heap has %llu free of %llu; that "
				 "host will reject it",
				 host ? host : "?", segn ? segn : "?", label(ch->rel, buf, sizeof buf),
				 (unsigned long long)ch->need, (unsigned long long)room, (unsigned long long)total);
			nwarn++;
		}
		free(host);
		free(segn);
		json_decref(r);
	}
	if (more)
		warn_msg("... and %zu more values that hosts have no room for in their value heap", more);
}

int cl_set(int argc, char **argv)
{
	struct args a;
	int ec = 0;
	if (parse_args(argc, argv, &a, &ec))
		return ec;
	if (optind + 1 >= argc)
		return usage_error("missing OPTION=VALUE");
	if ((ec = check_assignments(argc, argv, optind + 1)))
		return ec;
	struct cl c;
	struct plan p = {.reason = a.reason};
	int rc = cl_open(&a, argv[optind], true, &c);
	if (rc == EXIT_OK)
		rc = cl_schema(&c, &a, true);
	/* every value checked against this segment's schema before etcd hears
	 * of any: a bad one writes nothing */
	for (int i = optind + 1; rc == EXIT_OK && i < argc; i++) {
		const char *eq = strchr(argv[i], '='), *value = eq + 1;
		char *name = strndup(argv[i], (size_t)(eq - argv[i]));
		shmcfg_opt opt, final;
		if (!name) {
			rc = fail("out of memory");
			break;
		}
		rc = resolve_final(c.sh, name, &opt, &final);
		free(name);
		if (rc)
			break;
		const char *full = opt_name(c.sh, opt);
		shmcfg_value v = {0};
		char *json = NULL, rel[300];
		int r = shmcfg_value_parse_opt(c.sh, opt, value, &v);
		if (!r)
			r = shmcfg_value_check(c.sh, opt, &v);
		if (!r)
			r = shmcfg_value_json(&v, &json);
		uint64_t need = heap_need(&v);
		shmcfg_value_clear(&v);
		if (r)
			rc = fail_set(r, full, value);
		else if (!(rc = option_key(&c, final, a.knob, full, value, rel, sizeof rel)))
			rc = plan_add(&p, rel, json);
		else
			free(json);
		for (size_t k = 0; rc == EXIT_OK && k < p.n; k++)
			if (!strcmp(p.ch[k].rel, rel))
				p.ch[k].need = need;
	}
	/* the hosts' heaps, for the warnings before the write; a role that may
	 * not read them does not stop the write */
	struct etcd_kvs st = {0};
	char *sk = rc == EXIT_OK ? key_of(&c, CK_STATUS) : NULL;
	if (rc == EXIT_OK && !sk)
		rc = fail("out of memory");
	int r = sk ? get_retry(&c, sk, true, 0, &st) : 0;
	if (r == ETCD_E_NOMEM || etcd_transient(r))
		rc = fail_etcd(&c, r);
	else if (r)
		warn_msg("cluster '%s': no check of the hosts' value heaps: %s", c.cluster, etcd_errmsg(c.e));
	free(sk);
	p.before_send = heap_warn;
	p.send_ud = &st;
	if (rc == EXIT_OK)
		rc = run_plan(&c, &a, &p);
	if (st.kv)
		etcd_kvs_free(&st);
	free_plan(&p);
	cl_close(&c);
	return rc;
}

int cl_reset(int argc, char **argv)
{
	struct args a;
	int ec = 0;
	if (parse_args(argc, argv, &a, &ec))
		return ec;
	if (optind + 1 >= argc)
		return usage_error("missing OPTION");
	struct cl c;
	struct plan p = {.reason = a.reason};
	int rc = cl_open(&a, argv[optind], true, &c);
	if (rc == EXIT_OK)
		rc = cl_schema(&c, &a, true);
	for (int i = optind + 1; rc == EXIT_OK && i < argc; i++) {
		shmcfg_opt opt, final;
		char rel[300];
		if (!(rc = resolve_final(c.sh, argv[i], &opt, &final)) &&
		    !(rc = option_key(&c, final, a.knob, opt_name(c.sh, opt), NULL, rel, sizeof rel)))
			rc = plan_add(&p, rel, NULL);
	}
	if (rc == EXIT_OK)
		rc = run_plan(&c, &a, &p);
	free_plan(&p);
	cl_close(&c);
	return rc;
}

/* rollback: a value moved since the record (it is not the record's
 * "after") is not rolled back unless --force. */
struct rollback {
	uint64_t seq;
	json_t *changes;
	bool force;
};

static int rollback_check(const struct cl *c, const struct plan *p, void *ud)
{
	const struct rollback *rb = ud;
	if (rb->force)
		return 0;
	for (size_t i = 0; i < p->n; i++) {
		const struct kchange *k = &p->ch[i];
		json_t *after = json_object_get(json_array_get(rb->changes, i), "after");
		json_t *cur = k->cur ? parse_bytes(k->cur, k->cur_len, NULL) : NULL;
		bool same = after ? cur && json_equal(cur, after) : !k->cur;
		json_decref(cur);
		if (same)
			continue;
		char buf[300], *now = k->cur ? term_escaped(k->cur, k->cur_len) : NULL, *then = after ? json_text(after) : NULL;
		fail("%s moved since audit record %llu: it is %s, the record left it %s (--force rolls back anyway)",
		     label(k->rel, buf, sizeof buf), (unsigned long long)rb->seq, now ? now : "unset",
		     then ? then : "unset");
		(void)c;
		free(now);
		free(then);
		return EXIT_FAIL;
	}
	return 0;
}

/* A key an audit record may name: opt/ or knob/ and a name (knob names
 * may hold slashes: "pytorch/compiler:x"). */
static bool rel_ok(const char *s)
{
	const char *n = ck_in(s, CK_OPT) ? ck_in(s, CK_OPT) : ck_in(s, CK_KNOB);
	return n && *n;
}

int cl_rollback(int argc, char **argv)
{
	struct args a;
	int ec = 0;
	if (parse_args(argc, argv, &a, &ec))
		return ec;
	if (optind + 1 >= argc)
		return usage_error("missing SEQ (an audit record's number: shmctl cluster log)");
	if (argc - optind > 2)
		return usage_error("unexpected argument '%s'", argv[optind + 2]);
	uint64_t seq;
	if (seq_arg(argv[optind + 1], &seq))
		return EXIT_FAIL;
	struct cl c;
	struct plan p = {.reason = a.reason, .rollback_of = seq};
	struct rollback rb = {.seq = seq, .force = a.force};
	int rc = cl_open(&a, argv[optind], true, &c);
	char rel[40], *key = NULL;
	ck_audit(rel, sizeof rel, seq);
	if (rc == EXIT_OK && !(key = key_of(&c, rel)))
		rc = fail("out of memory");
	struct etcd_kvs kvs = {0};
	json_t *rec = NULL;
	int r;
	if (rc == EXIT_OK && (r = get_retry(&c, key, false, 0, &kvs)))
		rc = fail_etcd(&c, r);
	else if (rc == EXIT_OK && kvs.n == 0)
		rc = fail("cluster '%s' has no audit record %llu", c.cluster, (unsigned long long)seq);
	json_error_t err;
	if (rc == EXIT_OK && !(rec = parse_bytes(kvs.kv[0].value, kvs.kv[0].value_len, &err)))
		rc = fail("cluster '%s': audit record %llu is not valid JSON (%s)", c.cluster, (unsigned long long)seq,
			  err.text);
	if (rc == EXIT_OK && !json_is_array(rb.changes = json_object_get(rec, "changes")))
		rc = fail("cluster '%s': audit record %llu has no \"changes\" array", c.cluster, (unsigned long long)seq);
	/* the plan lists the record's keys in its order (rollback_check pairs
	 * them by index); a record that names a key twice is not ours */
	for (size_t i = 0; rc == EXIT_OK && i < json_array_size(rb.changes); i++) {
		json_t *ch = json_array_get(rb.changes, i), *before = json_object_get(ch, "before");
		const char *k = json_string_value(json_object_get(ch, "key"));
		if (!k || !rel_ok(k) || json_object_get(ch, "before_raw")) {
			char *pk = k ? term_escaped(k, strlen(k)) : NULL;
			rc = fail("cluster '%s': audit record %llu: change %zu %s%s%s", c.cluster,
				  (unsigned long long)seq, i + 1, pk ? "names key '" : "names no key",
				  pk ? pk : "", !pk ? "" : !rel_ok(k) ? "' outside opt/ and knob/" : "' whose before was not JSON");
			free(pk);
			break;
		}
		size_t before_n = p.n;
		char *bt = before ? json_dumps(before, JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(17)) : NULL;
		if (before && !bt)
			rc = fail("out of memory");
		else if (!(rc = plan_add(&p, k, bt)) && p.n == before_n)
			rc = fail("cluster '%s': audit record %llu names key '%s' twice", c.cluster,
				  (unsigned long long)seq, k);
	}
	if (rc == EXIT_OK && p.n == 0)
		rc = fail("cluster '%s': audit record %llu changed nothing", c.cluster, (unsigned long long)seq);
	p.check = rollback_check;
	p.ud = &rb;
	if (rc == EXIT_OK)
		rc = run_plan(&c, &a, &p);
	json_decref(rec);
	if (kvs.kv)
		etcd_kvs_free(&kvs);
	free(key);
	free_plan(&p);
	cl_close(&c);
	return rc;
}
