/* SPDX-License-Identifier: MIT */
/*
 * shmctl cluster show, log, diff and status, the roster of the hosts a
 * cluster expects (forget) and --wait=all: what is read from etcd
 * (tools/shmctl-cluster.h). None of them needs this host's segment.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shmctl-cluster.h"

/* ------------------------------------------------------------------ */
/* diff: the values after one audit record and after another (or now)  */
/* ------------------------------------------------------------------ */

/* The opt/ and knob/ keys as they were at the revision of audit record
 * seq (0: now): a JSON object rel -> bytes. NULL (printed) on failure. */
static json_t *values_at(struct cl *c, uint64_t seq, int64_t *rev)
{
	int64_t at = 0;
	int r;
	struct etcd_kvs kvs = {0};
	if (seq) {
		char rel[40], *key;
		ck_audit(rel, sizeof rel, seq);
		if (!(key = key_of(c, rel))) {
			fail("out of memory");
			return NULL;
		}
		r = get_retry(c, key, false, 0, &kvs);
		free(key);
		if (r) {
			fail_etcd(c, r);
			return NULL;
		}
		at = kvs.n ? kvs.kv[0].mod_rev : 0;
		etcd_kvs_free(&kvs);
		if (!at) {
			fail("cluster '%s' has no audit record %llu", c->cluster, (unsigned long long)seq);
			return NULL;
		}
	}
	json_t *o = json_object();
	for (int g = 0; o && g < 2; g++) {
		char *key = key_of(c, g ? CK_KNOB : CK_OPT);
		r = key ? get_retry(c, key, true, at, &kvs) : ETCD_E_NOMEM;
		free(key);
		if (r == ETCD_E_COMPACTED) {
			fail("cluster '%s': revision %lld (audit record %llu) was compacted: cluster log shows that "
			     "record's own changes",
			     c->cluster, (long long)at, (unsigned long long)seq);
		} else if (r) {
			fail_etcd(c, r);
		} else {
			for (size_t i = 0; i < kvs.n; i++) {
				/* escaped: a key with a NUL is not another's */
				char *k = term_escaped(rel_of(c, &kvs.kv[i]), rel_len(c, &kvs.kv[i]));
				if (k)
					json_object_set_new_nocheck(o, k, json_stringn_nocheck(kvs.kv[i].value,
											      kvs.kv[i].value_len));
				free(k);
			}
			*rev = at ? at : kvs.revision;
			etcd_kvs_free(&kvs);
			continue;
		}
		json_decref(o);
		return NULL;
	}
	return o;
}

/* A value's bytes for people and for --json: its JSON, or term_escaped() text. */
static json_t *bytes_json(const json_t *bytes, char **text)
{
	const char *p = json_string_value(bytes);
	*text = NULL;
	if (!p)
		return NULL;
	size_t n = json_string_length(bytes);
	*text = term_escaped(p, n);
	json_t *j = parse_bytes(p, n, NULL);
	return j ? j : json_string(*text ? *text : "");
}

int cl_diff(int argc, char **argv)
{
	struct args a;
	int ec = 0;
	if (parse_args(argc, argv, &a, &ec))
		return ec;
	if (optind + 1 >= argc)
		return usage_error("missing SEQ (an audit record's number: shmctl cluster log)");
	if (argc - optind > 3)
		return usage_error("unexpected argument '%s'", argv[optind + 3]);
	uint64_t seq[2] = {0, 0};
	for (int k = 0; k < 2 && optind + 1 + k < argc; k++)
		if (seq_arg(argv[optind + 1 + k], &seq[k]))
			return EXIT_FAIL;
	struct cl c;
	int rc = cl_open(&a, argv[optind], false, &c);
	int64_t rev[2] = {0, 0};
	json_t *from = rc ? NULL : values_at(&c, seq[0], &rev[0]);
	json_t *to = from ? values_at(&c, seq[1], &rev[1]) : NULL;
	if (!to) {
		json_decref(from);
		cl_close(&c);
		return EXIT_FAIL;
	}
	json_t *keys = json_deep_copy(from), *changes = json_array();
	json_object_update(keys, to);
	const char *k;
	json_t *unused;
	size_t n = 0;
	json_object_foreach(keys, k, unused)
	{
		json_t *b = json_object_get(from, k), *af = json_object_get(to, k);
		if (b && af && json_equal(b, af))
			continue;
		char *bt, *at, buf[300];
		json_t *bj = bytes_json(b, &bt), *aj = bytes_json(af, &at);
		char *kp = term_escaped(k, strlen(k));
		if (!a.json)
			printf("%s: %s -> %s%s%s\n", kp ? label(kp, buf, sizeof buf) : "?", bt ? bt : "unset",
			       color(C_BOLD), at ? at : "unset", color(C_RESET));
		json_t *ch = json_pack("{s:s}", "key", kp ? kp : "?");
		if (bj)
			json_object_set_new(ch, "before", bj);
		if (aj)
			json_object_set_new(ch, "after", aj);
		json_array_append_new(changes, ch);
		free(bt);
		free(at);
		free(kp);
		n++;
		(void)unused;
	}
	if (a.json)
		rc = json_print(json_pack("{s:s, s:{s:I, s:I}, s:{s:o?, s:I}, s:o}", "cluster", c.cluster, "from", "seq",
					  (json_int_t)seq[0], "revision", (json_int_t)rev[0], "to", "seq",
					  seq[1] ? json_integer((json_int_t)seq[1]) : NULL, "revision",
					  (json_int_t)rev[1], "changes", changes),
				false);
	else {
		json_decref(changes);
		if (!n)
			printf("cluster '%s': no value differs\n", c.cluster);
	}
	json_decref(keys);
	json_decref(from);
	json_decref(to);
	cl_close(&c);
	return rc;
}

/* forget's refusal of a host the roster lists for no segment NAME: the
 * segments it lists the host for, if any (a host's agent registers it
 * under the segment it serves, which may be named otherwise here): whole
 * names, as many as a line holds, and how many more. */
static int not_in_roster(struct cl *c, const char *host)
{
	char *hk = ck_key(c->prefix, CK_ROSTER, host, ""), segs[400] = "";
	struct etcd_kvs kvs = {0};
	size_t used = 0, shown = 0, hl = hk ? strlen(hk) : 0;
	if (hk && get_retry(c, hk, true, 0, &kvs) == 0)
		for (size_t i = 0; i < kvs.n; i++) {
			char *seg = term_escaped(kvs.kv[i].key + hl, kvs.kv[i].key_len > hl ? kvs.kv[i].key_len - hl : 0);
			int w = seg ? snprintf(segs + used, sizeof segs - used, "%s'%s'", i ? ", " : "", seg) : -1;
			free(seg);
			if (w < 0 || used + (size_t)w >= sizeof segs - 1) {
				segs[used] = 0; /* whole names only */
				break;
			}
			used += (size_t)w;
			shown++;
		}
	size_t n = kvs.n;
	if (kvs.kv)
		etcd_kvs_free(&kvs);
	free(hk);
	if (!n)
		return fail("cluster '%s' does not expect host '%s' for any segment (not in its roster)", c->cluster, host);
	char more[40] = "";
	if (shown < n)
		snprintf(more, sizeof more, "%s(and %zu more)", shown ? " " : "", n - shown);
	return fail("cluster '%s' does not expect host '%s' for segment '%s': its roster lists it for segment%s %s%s",
		    c->cluster, host, c->seg, n == 1 ? "" : "s", segs, more);
}

/* forget NAME HOST...: out of the roster (the host is not expected any
 * more). A host whose agent reports a status is refused unless --force:
 * its agent puts it back within 30 s anyway. */
int cl_forget(int argc, char **argv)
{
	struct args a;
	int ec = 0;
	if (parse_args(argc, argv, &a, &ec))
		return ec;
	if (optind + 1 >= argc)
		return usage_error("missing HOST (as cluster status names it)");
	struct cl c;
	int rc = cl_open(&a, argv[optind], false, &c);
	for (int i = optind + 1; rc == EXIT_OK && i < argc; i++) {
		const char *host = argv[i];
		char *rk = NULL, *sk = NULL;
		struct etcd_kvs kvs = {0};
		int r = 0;
		if (!*host || strchr(host, '/'))
			rc = fail("'%s' is not a host name (cluster status lists them)", host);
		else if (!(rk = ck_key(c.prefix, CK_ROSTER, host, c.seg)) ||
			 !(sk = ck_key(c.prefix, CK_STATUS, host, c.seg)))
			rc = fail("out of memory");
		else if ((r = get_retry(&c, rk, false, 0, &kvs)))
			rc = fail_etcd(&c, r);
		else if (!kvs.n)
			rc = not_in_roster(&c, host);
		if (kvs.kv)
			etcd_kvs_free(&kvs);
		if (rc == EXIT_OK && !a.force) {
			if ((r = get_retry(&c, sk, false, 0, &kvs)))
				rc = fail_etcd(&c, r);
			else if (kvs.n)
				rc = fail("host '%s' reports a status for segment '%s': its agent runs (stop it first, or "
					  "--force; it puts the host back within 30 s)",
					  host, c.seg);
			if (kvs.kv)
				etcd_kvs_free(&kvs);
		}
		for (;;) {
			if (rc != EXIT_OK)
				break;
			req_timeout(&c);
			r = etcd_delete(c.e, rk, false, NULL);
			if (!r) {
				printf("cluster '%s': host '%s' (segment '%s') is not expected any more\n", c.cluster, host, c.seg);
				break;
			}
			if (!etcd_transient(r) || !backoff(&c))
				rc = fail_etcd(&c, r);
		}
		free(rk);
		free(sk);
	}
	cl_close(&c);
	return rc;
}

/* ------------------------------------------------------------------ */
/* show, log, status                                                  */
/* ------------------------------------------------------------------ */

/*
 * What this host makes of a value under opt/: NULL if it takes it, else
 * why not (malloc'd): not JSON, no such option, or the schema's refusal.
 */
static char *judge(const struct cl *c, const char *rel, const struct etcd_kv *kv)
{
	json_error_t err;
	json_t *j = parse_bytes(kv->value, kv->value_len, &err);
	char *why = NULL;
	if (!j) {
		if (asprintf(&why, "not valid JSON (%s)", err.text) < 0)
			why = NULL;
		return why;
	}
	json_decref(j);
	if (strlen(rel) != rel_len(c, kv))
		return strdup("a NUL byte in the key: it names no option or knob");
	const char *name = ck_in(rel, CK_OPT);
	if (!name || !c->sh)
		return NULL; /* a knob: the agent knows the knob names; or no schema to judge by */
	shmcfg_opt opt;
	if (shmcfg_lookup(c->sh, name, &opt)) {
		if (asprintf(&why, "no such option in segment '%s'", c->seg) < 0)
			why = NULL;
		return why;
	}
	shmcfg_value v = {0};
	int r = shmcfg_value_from_json(c->sh, opt, kv->value, kv->value_len, &v);
	if (!r)
		r = shmcfg_value_check(c->sh, opt, &v);
	shmcfg_value_clear(&v);
	if (r) {
		const char *d = shmcfg_errdetail();
		why = term_escaped(d && *d ? d : shmcfg_strerror(r), strlen(d && *d ? d : shmcfg_strerror(r)));
	}
	return why;
}

int cl_show(int argc, char **argv)
{
	struct args a;
	int ec = 0;
	if (parse_args(argc, argv, &a, &ec))
		return ec;
	if (argc - optind > 1)
		return usage_error("unexpected argument '%s'", argv[optind + 1]);
	struct cl c;
	int rc = cl_open(&a, argv[optind], false, &c);
	if (rc == EXIT_OK)
		rc = cl_schema(&c, &a, false);
	struct etcd_kvs kvs[2] = {0};
	if (rc == EXIT_OK)
		rc = range(&c, CK_OPT, &kvs[0]);
	if (rc == EXIT_OK)
		rc = range(&c, CK_KNOB, &kvs[1]);
	if (rc == EXIT_OK) {
		static const char *const hdr[] = {"KEY", "VALUE", "REVISION"};
		struct table *t = a.json ? NULL : table_new(3, hdr);
		json_t *arr = json_array();
		for (int g = 0; g < 2; g++)
			for (size_t i = 0; i < kvs[g].n; i++) {
				const struct etcd_kv *kv = &kvs[g].kv[i];
				const char *rel = rel_of(&c, kv);
				char *name = term_escaped(rel, rel_len(&c, kv)), *val = term_escaped(kv->value, kv->value_len);
				char *why = judge(&c, rel, kv), rev[24];
				snprintf(rev, sizeof rev, "%lld", (long long)kv->mod_rev);
				if (t) {
					table_row(t, (const char *const[]){name, val, rev});
					if (why) {
						table_color(t, 1, C_RED);
						table_note(t, why);
					}
				} else {
					json_t *o = json_pack("{s:s, s:I, s:I, s:I}", "key", name, "mod_revision",
							      (json_int_t)kv->mod_rev, "create_revision",
							      (json_int_t)kv->create_rev, "version", (json_int_t)kv->version);
					json_t *v = parse_bytes(kv->value, kv->value_len, NULL);
					json_object_set_new(o, v ? "value" : "raw", v ? v : json_string(val));
					if (why)
						json_object_set_new(o, "error", json_string(why));
					json_array_append_new(arr, o);
				}
				free(name);
				free(val);
				free(why);
			}
		if (t) {
			if (!table_rows(t)) { /* the message, not an empty table's header */
				printf("cluster '%s' holds no values\n", c.cluster);
				table_free(t);
			} else
				table_print(t);
			json_decref(arr);
		} else
			rc = json_print(json_pack("{s:s, s:I, s:o}", "cluster", c.cluster, "revision",
						  (json_int_t)kvs[0].revision, "keys", arr),
					false);
	}
	for (int g = 0; g < 2; g++)
		if (kvs[g].kv)
			etcd_kvs_free(&kvs[g]);
	cl_close(&c);
	return rc;
}

/* "x: 1 -> 2; y: unset -> 3" of a record's changes (malloc'd; NULL on
 * ENOMEM). Appended to one stream: a record may hold many changes. */
static char *changes_text(const json_t *changes)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	if (!f)
		return NULL;
	for (size_t i = 0; i < json_array_size(changes); i++) {
		json_t *ch = json_array_get(changes, i);
		json_t *b = json_object_get(ch, "before"), *af = json_object_get(ch, "after");
		char *k = jstr(ch, "key"), buf[300];
		char *bt = b ? json_text(b) : jstr(ch, "before_raw"), *at = af ? json_text(af) : NULL;
		fprintf(f, "%s%s: %s -> %s", i ? "; " : "", k ? label(k, buf, sizeof buf) : "?", bt ? bt : "unset",
			at ? at : "unset");
		free(k);
		free(bt);
		free(at);
	}
	if (fclose(f)) {
		free(out);
		return NULL;
	}
	return out;
}

int cl_log(int argc, char **argv)
{
	struct args a;
	int ec = 0;
	if (parse_args(argc, argv, &a, &ec))
		return ec;
	if (argc - optind > 1)
		return usage_error("unexpected argument '%s'", argv[optind + 1]);
	struct cl c;
	int rc = cl_open(&a, argv[optind], false, &c);
	struct etcd_kvs kvs = {0};
	if (rc == EXIT_OK)
		rc = range(&c, CK_AUDIT, &kvs);
	if (rc == EXIT_OK) {
		static const char *const hdr[] = {"SEQ", "REVISION", "TIME", "WHO", "REASON"};
		struct table *t = a.json ? NULL : table_new(5, hdr);
		table_shrink(t, 4, 10);
		json_t *arr = json_array();
		for (size_t i = 0; i < kvs.n; i++) {
			const struct etcd_kv *kv = &kvs.kv[i];
			const char *rel = rel_of(&c, kv) + strlen(CK_AUDIT);
			json_error_t err;
			json_t *rec = parse_bytes(kv->value, kv->value_len, &err);
			char *why = NULL, rev[24], seq[24], when[48] = "-";
			if (!rec || !json_is_object(rec)) {
				if (asprintf(&why, rec ? "not a JSON object" : "not valid JSON (%s)", err.text) < 0)
					why = NULL;
				json_decref(rec);
				rec = NULL;
			}
			/* the key's number when the record does not say */
			char *keyseq = term_escaped(rel, strlen(rel));
			json_int_t s = rec ? jint(rec, "seq", -1) : -1;
			if (s >= 0)
				snprintf(seq, sizeof seq, "%lld", (long long)s);
			else
				snprintf(seq, sizeof seq, "%s", keyseq ? keyseq + strspn(keyseq, "0") : "?");
			snprintf(rev, sizeof rev, "%lld", (long long)kv->mod_rev);
			json_int_t tn = rec ? jint(rec, "time_ns", 0) : 0;
			if (tn > 0)
				time_local((uint64_t)tn, when, sizeof when);
			if (t) {
				char *who = rec ? jstr(rec, "who") : NULL, *reason = rec ? jstr(rec, "reason") : NULL;
				table_row(t, (const char *const[]){seq, rev, when, who ? who : "-", reason ? reason : ""});
				char *ct = rec ? changes_text(json_object_get(rec, "changes")) : NULL;
				long long rb = rec ? jint(rec, "rollback_of", 0) : 0;
				char *note = NULL;
				if (why) {
					table_color(t, 0, C_RED);
					note = strdup(why);
				} else if (rb) {
					if (asprintf(&note, "rollback of %lld: %s", rb, ct ? ct : "") < 0)
						note = NULL;
				} else
					note = ct ? strdup(ct) : NULL;
				table_note(t, note);
				free(note);
				free(ct);
				free(who);
				free(reason);
			} else {
				json_t *o = rec ? json_deep_copy(rec) : json_object();
				json_object_set_new(o, "key", json_string(keyseq ? keyseq : "?"));
				json_object_set_new(o, "revision", json_integer((json_int_t)kv->mod_rev));
				if (why) {
					char *raw = term_escaped(kv->value, kv->value_len);
					json_object_set_new(o, "raw", json_string(raw ? raw : ""));
					json_object_set_new(o, "error", json_string(why));
					free(raw);
				}
				json_array_append_new(arr, o);
			}
			json_decref(rec);
			free(keyseq);
			free(why);
		}
		if (t) {
			if (!table_rows(t)) { /* the message, not an empty table's header */
				printf("cluster '%s' has no audit records\n", c.cluster);
				table_free(t);
			} else
				table_print(t);
			json_decref(arr);
		} else
			rc = json_print(json_pack("{s:s, s:o}", "cluster", c.cluster, "records", arr), false);
	}
	if (kvs.kv)
		etcd_kvs_free(&kvs);
	cl_close(&c);
	return rc;
}

/* "3.2s", "5m10s", "2h5m", "3d4h" */
static void age_text(double s, char *buf, size_t len)
{
	if (s < 0)
		s = 0;
	if (s < 60)
		snprintf(buf, len, "%.1fs", s);
	else if (s < 3600)
		snprintf(buf, len, "%dm%02ds", (int)s / 60, (int)s % 60);
	else if (s < 86400)
		snprintf(buf, len, "%dh%02dm", (int)s / 3600, (int)s % 3600 / 60);
	else
		snprintf(buf, len, "%lldd%02dh", (long long)(s / 86400), (int)((long long)s % 86400 / 3600));
}

int cl_status(int argc, char **argv)
{
	struct args a;
	int ec = 0;
	if (parse_args(argc, argv, &a, &ec))
		return ec;
	if (argc - optind > 1)
		return usage_error("unexpected argument '%s'", argv[optind + 1]);
	struct cl c;
	int rc = cl_open(&a, argv[optind], false, &c);
	struct etcd_kvs st = {0}, ro = {0}, vals[3] = {{0}};
	if (rc == EXIT_OK)
		rc = range(&c, CK_ROSTER, &ro);
	if (rc == EXIT_OK)
		rc = range(&c, CK_STATUS, &st);
	/* the newest change: a host that applied less is behind */
	for (int g = 0; rc == EXIT_OK && g < 3; g++)
		rc = range(&c, g == 0 ? CK_OPT : g == 1 ? CK_KNOB : CK_HEAD, &vals[g]);
	if (rc != EXIT_OK)
		goto out;
	int64_t newest = 0;
	for (int g = 0; g < 3; g++)
		for (size_t i = 0; i < vals[g].n; i++)
			if (vals[g].kv[i].mod_rev > newest)
				newest = vals[g].kv[i].mod_rev;
	/* an agent applies every revision of its watch (deletes too, which
	 * leave no key behind): one that some host applied is newer still */
	json_t **recs = calloc(st.n ? st.n : 1, sizeof *recs);
	if (!recs) {
		rc = fail("out of memory");
		goto out;
	}
	/* the hash most hosts have */
	const char *major = NULL;
	size_t major_n = 0, nhashes = 0;
	for (size_t i = 0; i < st.n; i++) {
		recs[i] = parse_bytes(st.kv[i].value, st.kv[i].value_len, NULL);
		if (!json_is_object(recs[i])) {
			json_decref(recs[i]);
			recs[i] = NULL;
		} else if (jint(recs[i], "revision", 0) > newest && jint(recs[i], "revision", 0) <= st.revision)
			newest = jint(recs[i], "revision", 0); /* one beyond the store's is no agent's: below */
	}
	/* hosts per hash (a hash map: thousands of hosts), then the first of
	 * the most frequent in key order */
	json_t *counts = json_object();
	if (!counts) {
		free(recs);
		rc = fail("out of memory");
		goto out;
	}
	for (size_t i = 0; i < st.n; i++) {
		const char *h = json_string_value(json_object_get(recs[i], "config_hash"));
		if (h)
			json_object_set_new(counts, h, json_integer(jint(counts, h, 0) + 1));
	}
	for (size_t i = 0; i < st.n; i++) {
		const char *h = json_string_value(json_object_get(recs[i], "config_hash"));
		size_t n = h ? (size_t)jint(counts, h, 0) : 0;
		if (n > major_n) {
			major = h;
			major_n = n;
		}
	}
	nhashes = json_object_size(counts);
	json_decref(counts);
	bool disagree = nhashes > 1;
	uint64_t now = now_ns();
	static const char *const hdr[] = {"HOST", "SEGMENT", "REVISION", "GENERATION", "CONFIG HASH", "AGE", "ERROR"};
	struct table *t = a.json ? NULL : table_new(7, hdr);
	table_shrink(t, 6, 12);
	json_t *arr = json_array();
	size_t nbehind = 0, ndiffer = 0, nbad = 0, noos = 0, nover = 0, nunlisted = 0, nbeyond = 0;
	json_t *roster = roster_of(&c, &ro); /* "HOST/SEGMENT": still to be seen (true) */
	for (size_t i = 0; i < st.n; i++) {
		json_t *r = recs[i];
		const char *rel = rel_of(&c, &st.kv[i]) + strlen(CK_STATUS);
		char *where = term_escaped(rel, strlen(rel));
		char *host = r ? jstr(r, "host") : NULL, *segn = r ? jstr(r, "segment") : NULL;
		char *hash = r ? jstr(r, "config_hash") : NULL, *err = r ? jstr(r, "error") : NULL;
		json_int_t rev = r ? jint(r, "revision", -1) : -1, gen = r ? jint(r, "generation", -1) : -1;
		json_int_t tn = r ? jint(r, "time_ns", 0) : 0, oos = r ? jint(r, "out_of_sync_since_ns", 0) : 0;
		bool differs = disagree && hash && strcmp(json_string_value(json_object_get(r, "config_hash")), major);
		bool behind = r && rev < newest;
		/* an agent reports a revision it applied, read before it wrote this
		 * status: one beyond the store's when statuses were read is made up */
		bool beyond = r && rev > st.revision;
		double age = tn > 0 ? ((double)now - (double)tn) / 1e9 : -1;
		nbehind += behind;
		ndiffer += differs;
		nbad += !r;
		nbeyond += beyond;
		/* expected: the agent registered; a key not in the roster is an old agent's */
		bool listed = json_object_get(roster, rel) != NULL;
		json_object_del(roster, rel);
		nunlisted += !listed;
		bool oos_now = r && !json_is_true(json_object_get(r, "in_sync"));
		noos += oos_now;
		json_t *ovs = json_object_get(r, "overrides");
		json_int_t nov = r ? jint(r, "noverrides", (json_int_t)json_array_size(ovs)) : 0;
		nover += nov > 0;
		if (t) {
			char revs[40] = "?", gens[24] = "?", ages[32] = "?", notes[600] = "";
			if (rev >= 0)
				snprintf(revs, sizeof revs, "%lld%s", (long long)rev,
					 behind ? " (behind)" : beyond ? " (beyond etcd)" : "");
			if (gen >= 0)
				snprintf(gens, sizeof gens, "%lld", (long long)gen);
			if (age >= 0)
				age_text(age, ages, sizeof ages);
			char *slash = where ? strchr(where, '/') : NULL;
			if (slash && !host)
				*slash = 0;
			char hashs[64]; /* an agent's hash is 32 hex digits; another's text is cut */
			snprintf(hashs, sizeof hashs, "%.40s%s", hash ? hash : "?", differs ? " (differs)" : "");
			table_row(t, (const char *const[]){host ? host : where, segn ? segn : slash ? slash + 1 : "?", revs,
							  gens, hashs, ages, err && *err ? err : r ? "" : "status not valid JSON"});
			if (behind)
				table_color(t, 2, C_YELLOW);
			if (beyond)
				table_color(t, 2, C_RED);
			if (differs)
				table_color(t, 4, C_RED);
			if ((err && *err) || !r)
				table_color(t, 6, C_RED);
			json_t *rej = json_object_get(r, "rejected");
			size_t used = 0;
			for (size_t k = 0; k < json_array_size(rej) && used < sizeof notes; k++) {
				char *rk = jstr(json_array_get(rej, k), "key"), *re = jstr(json_array_get(rej, k), "error");
				int w = snprintf(notes + used, sizeof notes - used, "%s%s: %s", used ? "; " : "rejects ",
						 rk ? rk : "?", re ? re : "?");
				if (w > 0)
					used += (size_t)w;
				free(rk);
				free(re);
			}
			for (size_t k = 0; k < json_array_size(ovs) && used < sizeof notes; k++) {
				json_t *x = json_array_get(ovs, k);
				char *on = jstr(x, "option"), *ol = jstr(x, "layer");
				char *ov = json_object_get(x, "value") ? json_text(json_object_get(x, "value")) : NULL;
				int w = snprintf(notes + used, sizeof notes - used, "%s%s (%s): %s", used ? "; " : "overrides ",
						 on ? on : "?", ol ? ol : "?", ov ? ov : "?");
				if (w > 0)
					used += (size_t)w;
				free(on);
				free(ol);
				free(ov);
			}
			if (nov > (json_int_t)json_array_size(ovs) && used < sizeof notes)
				used += (size_t)snprintf(notes + used, sizeof notes - used, " and %lld more",
							 (long long)(nov - (json_int_t)json_array_size(ovs)));
			if (!listed && used < sizeof notes)
				used += (size_t)snprintf(notes + used, sizeof notes - used, "%snot in the roster",
							 used ? "; " : "");
			if (oos > 0 && used < sizeof notes) {
				char since[48];
				time_local((uint64_t)oos, since, sizeof since);
				snprintf(notes + used, sizeof notes - used, "%sout of sync since %s", used ? "; " : "", since);
			}
			if (*notes)
				table_note(t, notes);
		} else {
			json_t *o = r ? json_deep_copy(r) : json_object();
			json_object_set_new(o, "key", json_string(where ? where : "?"));
			if (!r) {
				char *raw = term_escaped(st.kv[i].value, st.kv[i].value_len);
				json_object_set_new(o, "raw", json_string(raw ? raw : ""));
				json_object_set_new(o, "error", json_string("status not valid JSON"));
				free(raw);
			}
			if (age >= 0)
				json_object_set_new(o, "age_s", json_real(age));
			json_object_set_new(o, "behind", json_boolean(behind));
			json_object_set_new(o, "beyond_etcd", json_boolean(beyond));
			json_object_set_new(o, "hash_differs", json_boolean(differs));
			json_object_set_new(o, "missing", json_false());
			json_object_set_new(o, "in_roster", json_boolean(listed));
			json_array_append_new(arr, o);
		}
		free(where);
		free(host);
		free(segn);
		free(hash);
		free(err);
	}
	/* the roster's hosts that report nothing: stopped, or cut off from etcd */
	size_t nmissing = json_object_size(roster);
	const char *hs;
	json_t *hv;
	json_object_foreach(roster, hs, hv)
	{
		const char *slash = strchr(hs, '/');
		char *host = term_escaped(hs, slash ? (size_t)(slash - hs) : strlen(hs));
		char *segn = slash ? term_escaped(slash + 1, strlen(slash + 1)) : NULL;
		if (t) {
			table_row(t, (const char *const[]){host ? host : "?", segn ? segn : "?", "-", "-", "-", "-",
							  "MISSING: no status (its agent is stopped, or cannot reach etcd)"});
			table_color(t, 6, C_RED);
		} else {
			json_array_append_new(arr, json_pack("{s:s?, s:s?, s:b, s:b, s:b}", "host", host, "segment", segn,
							     "missing", 1, "in_roster", 1, "in_sync", 0));
		}
		free(host);
		free(segn);
		(void)hv;
	}
	json_decref(roster);
	if (t) {
		if (!table_rows(t)) { /* the message, not an empty table's header */
			printf("cluster '%s': no host reports a status\n", c.cluster);
			table_free(t);
		} else
			table_print(t);
		if (st.n + nmissing) {
			printf("%zu host%s, newest revision %lld", st.n + nmissing, st.n + nmissing == 1 ? "" : "s",
			       (long long)newest);
			if (nmissing)
				printf(", %zu missing", nmissing);
			if (noos)
				printf(", %zu out of sync", noos);
			if (nbehind)
				printf(", %zu behind", nbehind);
			if (ndiffer)
				printf(", %zu with a config hash other than the majority's", ndiffer);
			if (nbad)
				printf(", %zu unreadable", nbad);
			if (nbeyond)
				printf(", %zu reporting a revision beyond etcd's (%lld)", nbeyond, (long long)st.revision);
			if (nover)
				printf(", %zu overriding cluster values locally", nover);
			if (nunlisted)
				printf(", %zu not in the roster", nunlisted);
			printf("\n");
		}
		json_decref(arr);
	} else
		rc = json_print(json_pack("{s:s, s:I, s:s?, s:o}", "cluster", c.cluster, "newest_revision",
					  (json_int_t)newest, "majority_config_hash", major, "hosts",
					  arr),
				false);
	for (size_t i = 0; i < st.n; i++)
		json_decref(recs[i]);
	free(recs);
out:
	if (st.kv)
		etcd_kvs_free(&st);
	if (ro.kv)
		etcd_kvs_free(&ro);
	for (int g = 0; g < 3; g++)
		if (vals[g].kv)
			etcd_kvs_free(&vals[g]);
	cl_close(&c);
	return rc;
}

