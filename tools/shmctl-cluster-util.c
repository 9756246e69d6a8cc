/* SPDX-License-Identifier: MIT */
/*
 * What the shmctl cluster commands share (tools/shmctl-cluster.h): their
 * arguments, the connection to etcd with its retries and deadline, keys
 * and bytes as text, and the roster of hosts with --wait=all. The writing
 * commands (shmctl-cluster.c) and the reading ones (shmctl-cluster-view.c)
 * call into this file, never into each other.
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

#define ETCD_TIMEOUT_MS 5000
#define WAIT_DEFAULT_S 10.0
#define TIMEOUT_DEFAULT_S 10.0 /* retrying etcd's transient errors */
#define BACKOFF_MIN_MS 50
#define BACKOFF_MAX_MS 1000

/* ------------------------------------------------------------------ */
/* Arguments, connection                                              */
/* ------------------------------------------------------------------ */

/* Parse the options; the positionals are argv[optind..]. 0, or -1 with *ec. */
int parse_args(int argc, char **argv, struct args *a, int *ec)
{
	*a = (struct args){.wait_s = WAIT_DEFAULT_S, .timeout_s = TIMEOUT_DEFAULT_S};
	int c;
	while ((c = next_opt(argc, argv, ec)) != -1) {
		switch (c) {
		case -2:
			return -1;
		case 'E':
			a->endpoints = optarg;
			break;
		case 'C':
			a->cluster = optarg;
			break;
		case 'T':
			if ((*ec = duration_arg("--timeout", optarg, &a->timeout_s)))
				return -1;
			break;
		case 'r':
			a->reason = optarg;
			break;
		case 'w': /* --wait[=DURATION], --wait=all[:DURATION] */
			a->wait = true;
			if (optarg && !strncmp(optarg, "all", 3) && (!optarg[3] || optarg[3] == ':')) {
				a->wait_all = true;
				optarg = optarg[3] ? optarg + 4 : NULL;
			}
			if (optarg && (*ec = duration_arg("--wait", optarg, &a->wait_s)))
				return -1;
			break;
		case 'S':
			a->schema = optarg;
			break;
		case 'f':
			a->force = true;
			break;
		case 'J':
			a->json = true;
			break;
		case 'K':
			a->knob = true;
			break;
		}
	}
	if (optind >= argc) {
		*ec = usage_error("missing segment NAME");
		return -1;
	}
	/* kept in etcd's audit record, JSON: UTF-8 (shown escaped, termsafe.h) */
	if (a->reason && !term_utf8(a->reason, strlen(a->reason))) {
		*ec = usage_error("--reason takes UTF-8 text: it has a byte that is not UTF-8");
		return -1;
	}
	return 0;
}

void cl_close(struct cl *c)
{
	if (c->e)
		etcd_close(c->e);
	if (c->sh && c->sh != c->h)
		shmcfg_close(c->sh);
	if (c->h)
		shmcfg_close(c->h);
	cluster_conf_free(&c->conf);
}

double mono_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/*
 * Attach the segment read-only (an operator may have no more) if this host
 * has it (a bastion host has none: the cluster commands work without), resolve the
 * endpoints and cluster (flags, environment, configuration file) and open
 * the client. A segment whose agent follows another cluster is refused to
 * a write (its schema is not that cluster's, --wait would never end) and
 * warned about otherwise. 0 or EXIT_FAIL (printed).
 */
int cl_open(const struct args *a, const char *seg, bool write, struct cl *c)
{
	*c = (struct cl){.seg = seg};
	int r = attach_segment(seg, true, &c->h);
	if (r == -EACCES && !a->schema)
		warn_msg("segment '%s' is here, but you may not read it: the schema kept in etcd is used", seg);
	else if (r && r != -ENOENT && r != -EACCES)
		return attach_error(r, seg, true, shmcfg_errdetail());
	if (r)
		c->h = NULL;
	char err[2200];
	if (cluster_conf(a->endpoints, a->cluster, &c->conf, err, sizeof err))
		return fail("%s", err);
	c->cluster = c->conf.cluster;
	shmcfg_sync_info sync;
	if (write && a->wait && !a->wait_all && !c->h)
		return fail("--wait waits for this host's segment '%s', which is not here: --wait=all waits for every "
			    "host the cluster expects",
			    seg);
	if (c->h && shmcfg_sync_get(c->h, &sync) == 0 && *sync.cluster) {
		sync.cluster[sizeof sync.cluster - 1] = 0;
		if (strcmp(sync.cluster, c->cluster)) {
			/* anyone who may write the segment wrote these bytes */
			char *shown = term_escaped(sync.cluster, strlen(sync.cluster));
			if (write) {
				int rc = fail("segment '%s' follows cluster '%s' (its shmcfg-sync record), but the cluster "
					      "configured is '%s' (from %s): nothing written",
					      seg, shown ? shown : "?", c->cluster, c->conf.cluster_from);
				free(shown);
				return rc;
			}
			warn_msg("segment '%s' follows cluster '%s' (its shmcfg-sync record), not the cluster configured, "
				 "'%s' (from %s): its schema and revision are another cluster's",
				 seg, shown ? shown : "?", c->cluster, c->conf.cluster_from);
			free(shown);
		}
	}
	ck_prefix(c->prefix, sizeof c->prefix, c->cluster);
	c->start = mono_now();
	c->deadline = c->start + a->timeout_s;
	srandom((unsigned)((uint64_t)time(NULL) ^ (uint64_t)getpid() << 16 ^ (uint64_t)(c->start * 1e9)));
	/* a client even on failure: its message says which endpoint is bad */
	if (etcd_open(c->conf.endpoints, ETCD_TIMEOUT_MS, &c->e))
		return fail("%s", etcd_errmsg(c->e));
	return 0;
}

/* The schema hash most status keys report (malloc'd), else that of the
 * newest schema key, else NULL. */
static char *etcd_schema_hash(struct cl *c, int *rc)
{
	struct etcd_kvs st = {0};
	char *best = NULL;
	if ((*rc = range(c, CK_STATUS, &st)))
		return NULL;
	json_t *counts = json_object();
	size_t best_n = 0;
	for (size_t i = 0; counts && i < st.n; i++) {
		json_t *j = parse_bytes(st.kv[i].value, st.kv[i].value_len, NULL);
		const char *h = json_string_value(json_object_get(j, "schema_hash"));
		if (h && *h && strlen(h) == 32 && strspn(h, "0123456789abcdef") == 32) {
			size_t n = (size_t)jint(counts, h, 0) + 1;
			json_object_set_new(counts, h, json_integer((json_int_t)n));
			if (n > best_n) {
				best_n = n;
				free(best);
				best = strdup(h);
			}
		}
		json_decref(j);
	}
	json_decref(counts);
	etcd_kvs_free(&st);
	if (best || (*rc = range(c, CK_SCHEMA, &st)))
		return best;
	int64_t newest = 0;
	for (size_t i = 0; i < st.n; i++)
		if (st.kv[i].mod_rev > newest) {
			newest = st.kv[i].mod_rev;
			free(best);
			best = strdup(rel_of(c, &st.kv[i]) + strlen(CK_SCHEMA));
		}
	etcd_kvs_free(&st);
	return best;
}

/* c->sh := a private segment of schema s (taken). 0 or EXIT_FAIL. */
static int private_schema(struct cl *c, const struct args *a, shmcfg_schema *s)
{
	int r = private_segment(s, &c->sh);
	shmcfg_schema_free(s);
	if (r) {
		c->sh = NULL;
		return fail_lib(r, a->schema ? a->schema : "the schema kept in etcd");
	}
	return 0;
}

int cl_schema(struct cl *c, const struct args *a, bool needed)
{
	if (c->sh)
		return 0;
	if (!a->schema && c->h) {
		c->sh = c->h;
		return 0;
	}
	shmcfg_schema *s = NULL;
	int r, rc = 0;
	if (a->schema) {
		if ((r = shmcfg_schema_load(a->schema, &s)))
			return fail("%s", *shmcfg_errdetail() ? shmcfg_errdetail() : shmcfg_strerror(r));
	} else {
		char *hash = etcd_schema_hash(c, &rc), *rel = NULL, *key = NULL;
		if (rc)
			return rc;
		if (!hash && !needed)
			return 0;
		if (!hash)
			return fail("cluster '%s': this host has no segment '%s' and etcd keeps no schema (no agent has "
				    "registered one): give --schema FILE",
				    c->cluster, c->seg);
		struct etcd_kvs kvs = {0};
		if (!(rel = ck_key("", CK_SCHEMA, hash, NULL)) || !(key = key_of(c, rel)))
			rc = fail("out of memory");
		else if ((r = get_retry(c, key, false, 0, &kvs)))
			rc = fail_etcd(c, r);
		else if (!kvs.n)
			rc = fail("cluster '%s': no key %s: the schema a host reports is not kept in etcd", c->cluster,
				  key);
		else if ((r = shmcfg_schema_load_text(kvs.kv[0].value, kvs.kv[0].value_len, key, &s)))
			rc = fail("%s (delete the key: an agent puts it again when it starts; or give --schema FILE)",
				  *shmcfg_errdetail() ? shmcfg_errdetail() : shmcfg_strerror(r));
		if (kvs.kv)
			etcd_kvs_free(&kvs);
		if (!rc && (rc = private_schema(c, a, s)) == EXIT_OK) {
			/* anyone who may write the prefix may have written that key */
			uint8_t h[16];
			char hex[33];
			shmcfg_schema_hash(c->sh, h);
			hex16(h, hex);
			if (strcmp(hex, hash))
				rc = fail("cluster '%s': %s holds a schema of hash %s, not %s: not trusted (delete the key: "
					  "an agent puts it again when it starts; or give --schema FILE)",
					  c->cluster, key, hex, hash);
		}
		free(hash);
		free(rel);
		free(key);
		return rc;
	}
	return private_schema(c, a, s);
}

/* A request's time limit: etcd.c's, or less near the deadline (at least a
 * second: the last try gets a fair chance); and the deadline, or that last
 * second, bounds all of it: a range's pages, however many a server sends. */
void req_timeout(struct cl *c)
{
	double left = c->deadline - mono_now();
	int ms = left >= ETCD_TIMEOUT_MS / 1000.0 ? ETCD_TIMEOUT_MS : left > 1.0 ? (int)(left * 1000) : 1000;
	etcd_set_timeout(c->e, ms);
	etcd_set_deadline(c->e, etcd_now_ms() + (left > 1.0 ? (int64_t)(left * 1000) : 1000));
}

/*
 * After a transient error: wait a full-jitter backoff (50 ms doubling to
 * 1 s, at most what is left) and return true to try again, or false once
 * the deadline has passed.
 */
bool backoff(struct cl *c)
{
	snprintf(c->last_err, sizeof c->last_err, "%s", etcd_errmsg(c->e));
	int k = c->ntransient++;
	double left = c->deadline - mono_now();
	if (left <= 0)
		return false;
	long cap = (long)BACKOFF_MIN_MS << (k < 6 ? k : 6);
	if (cap > BACKOFF_MAX_MS)
		cap = BACKOFF_MAX_MS;
	long ms = random() % (cap + 1);
	if (ms > (long)(left * 1000))
		ms = (long)(left * 1000);
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
	return true;
}

/* A failed etcd request: one line, etcd.c's message (it names the endpoint
 * and the request); after retries, for how long and the last error; and
 * the note (text after it, or ""). */
int fail_etcd_note(const struct cl *c, int r, const char *note)
{
	if (r == ETCD_E_NOMEM)
		return fail("out of memory");
	/* the message names the endpoint tried last: name them all */
	bool all = r == ETCD_E_UNREACHABLE && strchr(etcd_endpoints(c->e), ',');
	if (etcd_transient(r) && c->ntransient > 1)
		return fail("cluster '%s': gave up after retrying for %.1f s (%d tries): %s%s%s%s%s", c->cluster,
			    mono_now() - c->start, c->ntransient, all ? "no etcd endpoint answered (" : "",
			    all ? etcd_endpoints(c->e) : "", all ? "): " : "", c->last_err, note);
	if (all)
		return fail("cluster '%s': no etcd endpoint answered (%s): %s%s", c->cluster, etcd_endpoints(c->e),
			    etcd_errmsg(c->e), note);
	return fail("cluster '%s': %s%s", c->cluster, etcd_errmsg(c->e), note);
}

int fail_etcd(const struct cl *c, int r)
{
	return fail_etcd_note(c, r, "");
}

/* etcd_get, retrying transient errors until the deadline. 0 or the error
 * (for fail_etcd). */
int get_retry(struct cl *c, const char *key, bool prefix, int64_t rev, struct etcd_kvs *kvs)
{
	for (;;) {
		req_timeout(c);
		int r = etcd_get(c->e, key, prefix, rev, kvs);
		if (!etcd_transient(r) || !backoff(c))
			return r;
	}
}

/* P + rel, malloc'd. */
char *key_of(const struct cl *c, const char *rel)
{
	char *k;
	return asprintf(&k, "%s%s", c->prefix, rel) < 0 ? NULL : k;
}

/* A key of a range under P, without P. */
const char *rel_of(const struct cl *c, const struct etcd_kv *kv)
{
	size_t n = strlen(c->prefix);
	return kv->key_len >= n ? kv->key + n : kv->key;
}

size_t rel_len(const struct cl *c, const struct etcd_kv *kv)
{
	return kv->key_len - (size_t)(rel_of(c, kv) - kv->key);
}

/* Every key under P + rel. 0 or EXIT_FAIL (printed). */
int range(struct cl *c, const char *rel, struct etcd_kvs *kvs)
{
	char *k = key_of(c, rel);
	if (!k)
		return fail("out of memory");
	int r = get_retry(c, k, true, 0, kvs);
	free(k);
	return r ? fail_etcd(c, r) : 0;
}

/* ------------------------------------------------------------------ */
/* Bytes from etcd                                                    */
/* ------------------------------------------------------------------ */

/* Anyone with access to etcd writes its keys and values: shown as
 * term_escaped() text (termsafe.h), valid UTF-8 without unsafe characters,
 * for terminals and for JSON alike. */

/* Parse a value's bytes as JSON (any JSON value); NULL if they are not, with
 * the reason in err. */
json_t *parse_bytes(const char *p, size_t n, json_error_t *err)
{
	return json_loadb(p, n, JSON_DECODE_ANY | JSON_ALLOW_NUL, err);
}

/* Compact JSON text of a jansson value (for tables and messages). */
char *json_text(const json_t *j)
{
	char *t = json_for_terminal(json_dumps(j, JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(17)));
	return t ? t : strdup("?");
}

/* An integer field of an object, or dflt. */
json_int_t jint(const json_t *o, const char *k, json_int_t dflt)
{
	json_t *v = json_object_get(o, k);
	return json_is_integer(v) ? json_integer_value(v) : dflt;
}

/* A string field of an object as term_escaped() text (malloc'd), or NULL. */
char *jstr(const json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);
	return json_is_string(v) ? term_escaped(json_string_value(v), json_string_length(v)) : NULL;
}

uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------------ */
/* Names and numbers of changes                                      */
/* ------------------------------------------------------------------ */

/* "opt/x" -> "x", "knob/k" -> "knob k": how changes are named to people. */
const char *label(const char *rel, char *buf, size_t len)
{
	if (ck_in(rel, CK_OPT))
		return ck_in(rel, CK_OPT);
	snprintf(buf, len, "%s", rel);
	char *s = strchr(buf, '/');
	if (s)
		*s = ' ';
	return buf;
}

int seq_arg(const char *text, uint64_t *seq)
{
	if (parse_u64(text, seq) && *seq)
		return 0;
	return fail("'%s' is not an audit record's number (1, 2, ...: see shmctl cluster log)", text);
}

/* ------------------------------------------------------------------ */
/* The roster: the hosts a cluster expects, and --wait=all            */
/* ------------------------------------------------------------------ */

#define WAIT_LIST_MAX 10 /* hosts named in a --wait=all timeout */

/* ------------------------------------------------------------------ */
/* The roster: the hosts a cluster expects                            */
/* ------------------------------------------------------------------ */

/* P roster/<host>/<segment> keys: each agent puts its own (if absent) at
 * its start and with each new lease; only cluster forget deletes one. As a
 * JSON object "HOST/SEGMENT": true (the keys' bytes, unchecked). */
json_t *roster_of(const struct cl *c, const struct etcd_kvs *ro)
{
	json_t *o = json_object();
	for (size_t i = 0; o && i < ro->n; i++)
		json_object_set_new_nocheck(o, rel_of(c, &ro->kv[i]) + strlen(CK_ROSTER), json_true());
	return o;
}

/* How far the roster's hosts are: those that have not applied rev (no
 * status, or an older revision) appended to lag (up to WAIT_LIST_MAX named),
 * the rejections of keys printed when warn. The number not there yet. */
static size_t laggards(const struct cl *c, const struct etcd_kvs *ro, const struct etcd_kvs *st, int64_t rev,
		       const char *const *keys, size_t nkeys, FILE *lag, size_t *nrejected, bool warn)
{
	json_t *status = json_object();
	size_t n = 0;
	for (size_t i = 0; status && i < st->n; i++) {
		json_t *j = parse_bytes(st->kv[i].value, st->kv[i].value_len, NULL);
		if (json_is_object(j))
			json_object_set_new_nocheck(status, rel_of(c, &st->kv[i]) + strlen(CK_STATUS), j);
		else
			json_decref(j);
	}
	*nrejected = 0;
	for (size_t i = 0; i < ro->n; i++) {
		const char *hs = rel_of(c, &ro->kv[i]) + strlen(CK_ROSTER);
		json_t *s = json_object_get(status, hs);
		json_int_t have = s ? jint(s, "revision", -1) : -1;
		if (have >= rev) {
			json_t *ovs = json_object_get(s, "overrides");
			for (size_t k = 0; warn && k < json_array_size(ovs); k++)
				for (size_t m = 0; m < nkeys; m++) {
					json_t *x = json_array_get(ovs, k);
					const char *on = json_string_value(json_object_get(x, "option"));
					if (!on || !ck_in(keys[m], CK_OPT) || strcmp(on, ck_in(keys[m], CK_OPT)))
						continue;
					char *who = term_escaped(hs, strlen(hs)), *layer = jstr(x, "layer");
					char *val = json_object_get(x, "value") ? json_text(json_object_get(x, "value")) : NULL;
					warn_msg("host %s applied it, but overrides %s locally (%s: %s)", who ? who : "?", on,
						 layer ? layer : "?", val ? val : "?");
					free(who);
					free(layer);
					free(val);
				}
			json_t *rej = json_object_get(s, "rejected");
			for (size_t k = 0; k < json_array_size(rej); k++)
				for (size_t m = 0; m < nkeys; m++) {
					const char *rk = json_string_value(json_object_get(json_array_get(rej, k), "key"));
					if (!rk || strcmp(rk, keys[m]))
						continue;
					(*nrejected)++;
					if (warn) {
						char *who = term_escaped(hs, strlen(hs)), *why = jstr(json_array_get(rej, k), "error"), buf[300];
						err_msg("host %s rejected %s: %s", who ? who : "?", label(keys[m], buf, sizeof buf),
							why ? why : "?");
						free(who);
						free(why);
					}
				}
			continue;
		}
		if (n++ < WAIT_LIST_MAX) {
			char *who = term_escaped(hs, strlen(hs));
			if (have >= 0)
				fprintf(lag, "%s%s (at revision %lld)", n > 1 ? ", " : "", who ? who : "?", (long long)have);
			else
				fprintf(lag, "%s%s (no status: its agent is stopped, or cannot reach etcd)", n > 1 ? ", " : "",
					who ? who : "?");
			free(who);
		}
	}
	if (n > WAIT_LIST_MAX)
		fprintf(lag, " and %zu more", n - WAIT_LIST_MAX);
	json_decref(status);
	return n;
}

int wait_all(struct cl *c, int64_t rev, double secs, const char *const *keys, size_t nkeys)
{
	double end = mono_now() + secs;
	if (c->deadline < end) /* etcd's transient errors are retried as long as the wait lasts */
		c->deadline = end;
	for (unsigned round = 0;; round++) {
		struct etcd_kvs ro = {0}, st = {0};
		int rc = range(c, CK_ROSTER, &ro);
		if (!rc)
			rc = range(c, CK_STATUS, &st);
		char *lag = NULL;
		size_t laglen = 0, nrej = 0, nlag = 0;
		FILE *f = rc ? NULL : open_memstream(&lag, &laglen);
		if (!rc && !f)
			rc = fail("out of memory");
		double now = mono_now();
		bool last = now >= end;
		if (f) {
			nlag = laggards(c, &ro, &st, rev, keys, nkeys, f, &nrej, false);
			fclose(f);
			if (!nlag) /* again, to say which host rejected what */
				laggards(c, &ro, &st, rev, keys, nkeys, stdout, &nrej, true);
		}
		size_t nexp = ro.n;
		if (ro.kv)
			etcd_kvs_free(&ro);
		if (st.kv)
			etcd_kvs_free(&st);
		if (!rc && !nexp) {
			warn_msg("cluster '%s' expects no host (no agent has put itself in its roster): nothing to wait for",
				 c->cluster);
		} else if (!rc && !nlag) {
			printf("cluster '%s': all %zu host%s applied revision %lld", c->cluster, nexp, nexp == 1 ? "" : "s",
			       (long long)rev);
			if (nrej)
				printf("; %zu rejected a value of this change (above)", nrej);
			printf("\n");
			rc = nrej ? EXIT_FAIL : EXIT_OK;
		} else if (!rc && last) {
			rc = fail("cluster '%s': %zu of %zu hosts did not apply revision %lld within %g s: %s", c->cluster,
				  nlag, nexp, (long long)rev, secs, lag ? lag : "");
		} else if (!rc) {
			free(lag);
			/* 20 ms, doubling to 250 ms: a wave of status puts arrives within milliseconds */
			double nap = 0.02 * (double)(1u << (round < 4 ? round : 4));
			if (nap > 0.25)
				nap = 0.25;
			if (nap > end - now)
				nap = end - now;
			struct timespec ts = {(time_t)nap, (long)((nap - (double)(time_t)nap) * 1e9)};
			nanosleep(&ts, NULL);
			continue;
		}
		free(lag);
		return rc;
	}
}

