/* SPDX-License-Identifier: MIT */
/*
 * fuzz_etcd: what etcd's JSON gateway answers never crashes the client
 * (tools/etcd.c) or the agent (tools/shmcfg-sync.c, tools/sync-apply.c and
 * the library's cluster apply step, lib/ops/cluster_apply.c),
 * and a bad answer is an error with a message, never a success.
 *
 * The input is an answer of the gateway as it arrives on the wire: a JSON
 * body, or the lines of a watch stream. The client and the agent are
 * compiled into this file (#include of tools/etcd.c and tools/shmcfg-sync.c,
 * whose parsers are static) over a fake libcurl (below): no socket is
 * opened; every request is answered with the input, or fails when the fake
 * server's budget of answers is spent. The same bytes go
 *  - to every request of the client (etcd_get/etcd_range with its paging,
 *    etcd_txn, put, delete, compact, the member status, the lease grant and
 *    keepalive): 0 with bounded outputs whose keys and values are
 *    NUL-terminated, or an ETCD_E_* error with a message and its outputs
 *    freed; an answer that is not a JSON object, or carries "error", is
 *    never a success; nor is an HTTP status other than 200 (etcd_put under
 *    several statuses);
 *  - to a watch as its stream, delivered whole and again in small chunks:
 *    the same responses either way, each of bounded events, and the stream
 *    ends in an error (the fake server closes it);
 *  - to the agent: load() (a paged load of opt/, knob/ and head, applied
 *    to a segment of the fuzz schema with local values that hide some
 *    cluster values), then the watch's responses through events(), as
 *    run() does. After each step the segment passes its deep check, each
 *    opt/ and knob/ key the mirror holds is applied or recorded as rejected,
 *    the status key's text is a JSON object of bounded size, and every
 *    line the agent logged is printable ASCII (sync.h: bytes from etcd are
 *    made printable for logs and JSON).
 *
 * FUZZ_VERBOSE=1 prints the agent's log.
 *
 * Built from tests/fuzz/Makefile.inc with the agent's other sources
 * (FUZZ_SOURCES_fuzz_etcd) and without libcurl.
 */
#include "config.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdarg.h>

#include "fuzz.h"

/* ------------------------------------------------------------------ */
/* A fake libcurl: every function tools/etcd.c calls, no network       */
/* ------------------------------------------------------------------ */

struct fake_easy {
	curl_write_callback write;
	void *wdata;
	char *post; /* CURLOPT_COPYPOSTFIELDS */
	char *url;
	long status;
};

struct fake_multi {
	struct fake_easy *easy;
	size_t sent;    /* bytes of the stream delivered */
	bool done, reported;
	CURLcode result;
	CURLMsg msg;
};

/* The server: its answer to every request, while the budget lasts. */
static struct {
	const char *body;
	size_t len;
	long status;
	int budget;    /* answers left; then every request fails to connect */
	size_t chunk;  /* bytes per write callback (and per curl_multi_perform) */
	int nrequests; /* requests seen */
	bool ranges;   /* a range is answered with the input's keys in it only */
} srv;

static void serve(const uint8_t *data, size_t size, long status, int budget, size_t chunk)
{
	srv.body = (const char *)data;
	srv.len = size;
	srv.status = status;
	srv.budget = budget;
	srv.chunk = chunk ? chunk : 1;
	srv.nrequests = 0;
	srv.ranges = false;
}

CURLcode curl_global_init(long flags)
{
	(void)flags;
	return CURLE_OK;
}

CURL *curl_easy_init(void)
{
	return calloc(1, sizeof(struct fake_easy));
}

void curl_easy_reset(CURL *c)
{
	struct fake_easy *e = c;
	free(e->post);
	free(e->url);
	memset(e, 0, sizeof *e);
}

void curl_easy_cleanup(CURL *c)
{
	if (c)
		curl_easy_reset(c);
	free(c);
}

CURLcode(curl_easy_setopt)(CURL *c, CURLoption opt, ...)
{
	struct fake_easy *e = c;
	va_list ap;
	va_start(ap, opt);
	switch (opt) {
	case CURLOPT_WRITEFUNCTION:
		e->write = va_arg(ap, curl_write_callback);
		break;
	case CURLOPT_WRITEDATA:
		e->wdata = va_arg(ap, void *);
		break;
	case CURLOPT_COPYPOSTFIELDS: {
		const char *p = va_arg(ap, const char *);
		free(e->post);
		e->post = p ? strdup(p) : NULL;
		FUZZ_ASSERT(!p || e->post, "strdup");
		break;
	}
	case CURLOPT_URL: {
		const char *p = va_arg(ap, const char *);
		free(e->url);
		e->url = p ? strdup(p) : NULL;
		FUZZ_ASSERT(!p || e->url, "strdup");
		break;
	}
	default: /* the socket, timeouts, headers: nothing to fake */
		break;
	}
	va_end(ap);
	return CURLE_OK;
}

CURLcode(curl_easy_getinfo)(CURL *c, CURLINFO info, ...)
{
	struct fake_easy *e = c;
	va_list ap;
	va_start(ap, info);
	if (info == CURLINFO_RESPONSE_CODE)
		*va_arg(ap, long *) = e->status;
	va_end(ap);
	return CURLE_OK;
}

/* What the client sends is a JSON object (its requests are built with
 * jansson: this checks the harness's plumbing as much as the client). */
static void check_request(const struct fake_easy *e)
{
	FUZZ_ASSERT(e->post && e->write, "a request without a body or a write callback");
	json_t *j = json_loads(e->post, 0, NULL);
	FUZZ_ASSERT(json_is_object(j), "the client sent %s", e->post);
	json_decref(j);
}

/* Up to chunk bytes of the answer body[0..len) from *off to the write
 * callback: 0, or the callback refused them (curl then fails the
 * transfer). */
static int deliver(struct fake_easy *e, const char *body, size_t len, size_t *off)
{
	size_t n = len - *off < srv.chunk ? len - *off : srv.chunk;
	if (!n)
		return 0;
	/* curl hands over a buffer of its own: a copy, so that a read past n is
	 * ASan's to see */
	char *p = malloc(n);
	FUZZ_ASSERT(p, "malloc");
	memcpy(p, body + *off, n);
	size_t w = e->write(p, 1, n, e->wdata);
	free(p);
	*off += n;
	return w == n ? 0 : -1;
}

static int b64_decode(const char *in, size_t len, char **ret, size_t *ret_len); /* tools/etcd.c's */

static int bytes_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
	int c = memcmp(a, b, alen < blen ? alen : blen);
	return c ? c : (alen > blen) - (alen < blen);
}

/* A base64 string field, decoded (NULL: absent or not base64). */
static char *b64_field(json_t *o, const char *name, size_t *len)
{
	json_t *v = json_object_get(o, name);
	char *out;
	if (!json_is_string(v) || b64_decode(json_string_value(v), json_string_length(v), &out, len))
		return NULL;
	return out;
}

/*
 * The input as the answer to the range a request asks for, as etcd would
 * give it: its key-values outside [key, range_end) left out (those whose key
 * is no base64 kept: the client's to refuse), the rest as it is, re-encoded;
 * NULL (the input as it is) if the input has no array of key-values. The
 * agent's load asks three ranges of one store (opt/, knob/, head): without
 * this, no input could answer all three with its keys in order.
 */
static char *range_answer(const struct fake_easy *e, size_t *len)
{
	json_t *rq = json_loads(e->post, 0, NULL), *ans = json_loadb(srv.body, srv.len, 0, NULL);
	json_t *kvs = json_object_get(ans, "kvs");
	size_t flen = 0, tlen = 0;
	char *from = b64_field(rq, "key", &flen), *to = b64_field(rq, "range_end", &tlen), *out = NULL;
	FUZZ_ASSERT(from && (to || !json_object_get(rq, "range_end")), "a range request: %s", e->post);
	if (json_is_array(kvs)) {
		json_t *in = json_array(), *kv;
		size_t i;
		json_array_foreach(kvs, i, kv) {
			size_t klen;
			char *key = b64_field(kv, "key", &klen);
			bool all = to && tlen == 1 && !to[0]; /* etcd's "\0": every key from `from` on */
			if (!key || (bytes_cmp(key, klen, from, flen) >= 0 &&
				     (to ? all || bytes_cmp(key, klen, to, tlen) < 0 : !bytes_cmp(key, klen, from, flen))))
				json_array_append(in, kv);
			free(key);
		}
		json_object_set_new(ans, "kvs", in);
		out = json_dumps(ans, JSON_COMPACT);
		FUZZ_ASSERT(out, "json_dumps");
		*len = strlen(out);
	}
	free(from);
	free(to);
	json_decref(rq);
	json_decref(ans);
	return out;
}

CURLcode curl_easy_perform(CURL *c)
{
	struct fake_easy *e = c;
	check_request(e);
	srv.nrequests++;
	if (srv.budget <= 0)
		return CURLE_COULDNT_CONNECT;
	srv.budget--;
	e->status = srv.status;
	size_t len = srv.len;
	char *range = srv.ranges && e->url && strstr(e->url, "/v3/kv/range") ? range_answer(e, &len) : NULL;
	CURLcode r = CURLE_OK;
	for (size_t off = 0; !r && off < len;)
		if (deliver(e, range ? range : srv.body, len, &off))
			r = CURLE_WRITE_ERROR;
	free(range);
	return r;
}

const char *curl_easy_strerror(CURLcode c)
{
	return c == CURLE_COULDNT_CONNECT ? "Couldn't connect to server (fake)" : "fake curl error";
}

struct curl_slist *curl_slist_append(struct curl_slist *list, const char *s)
{
	struct curl_slist *n = calloc(1, sizeof *n);
	if (!n || !(n->data = strdup(s))) {
		free(n);
		return NULL;
	}
	if (!list)
		return n;
	struct curl_slist *t = list;
	while (t->next)
		t = t->next;
	t->next = n;
	return list;
}

void curl_slist_free_all(struct curl_slist *list)
{
	while (list) {
		struct curl_slist *next = list->next;
		free(list->data);
		free(list);
		list = next;
	}
}

CURLM *curl_multi_init(void)
{
	return calloc(1, sizeof(struct fake_multi));
}

CURLMcode curl_multi_add_handle(CURLM *mh, CURL *c)
{
	struct fake_multi *m = (struct fake_multi *)mh;
	FUZZ_ASSERT(!m->easy, "a second handle on a watch's multi handle");
	m->easy = c;
	check_request(m->easy);
	m->easy->status = srv.status;
	return CURLM_OK;
}

CURLMcode curl_multi_remove_handle(CURLM *mh, CURL *c)
{
	struct fake_multi *m = (struct fake_multi *)mh;
	FUZZ_ASSERT(m->easy == c, "removing a handle that was not added");
	m->easy = NULL;
	return CURLM_OK;
}

CURLMcode curl_multi_cleanup(CURLM *mh)
{
	free(mh);
	return CURLM_OK;
}

/* One chunk of the stream per call; the transfer ends after the last. */
CURLMcode curl_multi_perform(CURLM *mh, int *running)
{
	struct fake_multi *m = (struct fake_multi *)mh;
	FUZZ_ASSERT(m->easy, "perform without a handle");
	if (!m->done && deliver(m->easy, srv.body, srv.len, &m->sent)) {
		m->done = true;
		m->result = CURLE_WRITE_ERROR;
	}
	if (!m->done && m->sent == srv.len) {
		m->done = true;
		m->result = CURLE_OK;
	}
	*running = !m->done;
	return CURLM_OK;
}

CURLMsg *curl_multi_info_read(CURLM *mh, int *left)
{
	struct fake_multi *m = (struct fake_multi *)mh;
	*left = 0;
	if (!m->done || m->reported)
		return NULL;
	m->reported = true;
	m->msg.msg = CURLMSG_DONE;
	m->msg.easy_handle = m->easy;
	m->msg.data.result = m->result;
	return &m->msg;
}

CURLMcode curl_multi_poll(CURLM *mh, struct curl_waitfd extra[], unsigned n, int timeout_ms, int *nfds)
{
	(void)mh;
	(void)timeout_ms;
	for (unsigned i = 0; i < n; i++)
		extra[i].revents = 0;
	if (nfds)
		*nfds = 0;
	return CURLM_OK; /* more data is always there at once */
}

const char *curl_multi_strerror(CURLMcode c)
{
	(void)c;
	return "fake curl multi error";
}

/* ------------------------------------------------------------------ */
/* The client and the agent, whose parsers are static                  */
/* ------------------------------------------------------------------ */

#include "../../tools/etcd.c"

#define main shmcfg_sync_main
int shmcfg_sync_main(int argc, char **argv);
#include "../../tools/shmcfg-sync.c"
#undef main

/* ------------------------------------------------------------------ */

#define ENDPOINTS "http://etcd-a.invalid:2379,unix:/nonexistent/etcd.sock"
#define PREFIX "/shmcfg/v1/fz/"
/* pages the fake server answers a range with: a range whose answer always
 * says "more" ends when they are spent */
#define PAGES 4

static char seg_name[64];
static size_t in_size;

/* Chunks that cut lines and base64 in various places: 7 to 67 bytes. */
static size_t small_chunk(size_t size)
{
	return 7 + size % 61;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	snprintf(seg_name, sizeof seg_name, "fuzz-etcd-%d", (int)getpid());
	shmcfg_set_log(NULL, NULL);
	fuzz_clean_stale();
	return 0;
}

static bool is_etcd_error(int r)
{
	return r == ETCD_E_UNREACHABLE || r == ETCD_E_PROTO || r == ETCD_E_SERVER || r == ETCD_E_COMPACTED ||
	       r == ETCD_E_TOO_MANY_OPS || r == ETCD_E_ARG || r == ETCD_E_NOMEM || r == ETCD_E_UNAVAILABLE ||
	       r == ETCD_E_CANCELED;
}

/* r is 0 or an error with a message: one line of printable ASCII (etcd.h;
 * it quotes etcd's error text, which shmcfg-sync logs). */
static void check_result(struct etcd *e, int r, const char *what)
{
	FUZZ_ASSERT(r == 0 || is_etcd_error(r), "%s returned %d", what, r);
	if (!r)
		return;
	const char *m = etcd_errmsg(e);
	FUZZ_ASSERT(m[0], "%s failed (%d) without a message", what, r);
	for (const unsigned char *p = (const unsigned char *)m; *p; p++)
		FUZZ_ASSERT(*p >= 0x20 && *p < 0x7f, "%s: the message holds byte 0x%02x: %s", what, *p, m);
}

/* Bytes that came base64-encoded in an answer of in_size bytes. */
static void check_bytes(const char *p, size_t len, const char *what)
{
	FUZZ_ASSERT(p, "%s: NULL", what);
	FUZZ_ASSERT(len <= in_size, "%s: %zu bytes from an answer of %zu", what, len, in_size);
	FUZZ_ASSERT(p[len] == 0, "%s: not NUL-terminated after its %zu bytes", what, len);
}

static void check_kv(const struct etcd_kv *kv)
{
	check_bytes(kv->key, kv->key_len, "key");
	check_bytes(kv->value, kv->value_len, "value");
}

/* What the answer is, as request() sees it: not a JSON object; an object
 * with "error"; or an object. */
enum shape { NOT_OBJECT, ERROR_OBJECT, OBJECT };

static enum shape shape_of(const uint8_t *data, size_t size)
{
	json_t *j = json_loadb((const char *)data, size, 0, NULL);
	enum shape s = !json_is_object(j) ? NOT_OBJECT : json_object_get(j, "error") ? ERROR_OBJECT : OBJECT;
	json_decref(j);
	return s;
}

/* The answer's shape decides what may come of a request: a success only
 * from an object without "error". */
static void check_shape(struct etcd *e, int r, enum shape s, const char *what)
{
	check_result(e, r, what);
	if (s == NOT_OBJECT)
		FUZZ_ASSERT(r == ETCD_E_PROTO || r == ETCD_E_UNREACHABLE || r == ETCD_E_NOMEM,
			    "%s of an answer that is no JSON object: %d (%s)", what, r, etcd_errmsg(e));
	if (s == ERROR_OBJECT)
		FUZZ_ASSERT(r == ETCD_E_SERVER || r == ETCD_E_COMPACTED || r == ETCD_E_TOO_MANY_OPS ||
				    r == ETCD_E_UNAVAILABLE || r == ETCD_E_UNREACHABLE || r == ETCD_E_NOMEM,
			    "%s of an answer with \"error\": %d (%s)", what, r, etcd_errmsg(e));
}

/*
 * The fake server answers every page of a range with the same answer: a
 * second page of the same keys (all before the key it asked from) is no
 * answer etcd gives, and must be refused before the budget of pages runs
 * out (before c9fc780 etcd_range() paged such an answer for ever). A range
 * that succeeds holds its keys in etcd's order, from the key asked.
 */
static void check_range(struct etcd *e, int r, enum shape s, const struct etcd_kvs *kvs, const char *what,
			const char *from)
{
	check_shape(e, r, s, what);
	FUZZ_ASSERT(!(r == ETCD_E_UNREACHABLE && srv.nrequests > PAGES), "%s: asked for %d pages of one answer (%s)",
		    what, srv.nrequests, etcd_errmsg(e));
	if (r) {
		FUZZ_ASSERT(!kvs->n && !kvs->kv && !kvs->revision, "%s failed and left its result", what);
		return;
	}
	for (size_t i = 0; i < kvs->n; i++) {
		const struct etcd_kv *k = &kvs->kv[i];
		const char *p = i ? kvs->kv[i - 1].key : from;
		size_t plen = i ? kvs->kv[i - 1].key_len : strlen(from);
		int c = memcmp(k->key, p, k->key_len < plen ? k->key_len : plen);
		c = c ? c : (k->key_len > plen) - (k->key_len < plen);
		FUZZ_ASSERT(i ? c > 0 : c >= 0, "%s: key %zu is not in order", what, i);
	}
	/* at most one key-value per two bytes of each page */
	FUZZ_ASSERT(kvs->n <= (size_t)PAGES * (in_size / 2 + 1), "%s: %zu key-values from %d pages of %zu bytes",
		    what, kvs->n, PAGES, in_size);
	for (size_t i = 0; i < kvs->n; i++)
		check_kv(&kvs->kv[i]);
}

static void fuzz_requests(const uint8_t *data, size_t size)
{
	enum shape s = shape_of(data, size);
	struct etcd *e;
	int r = etcd_open(ENDPOINTS, 1000, &e);
	FUZZ_ASSERT(r == 0, "etcd_open: %s", etcd_errmsg(e));
	/* answers of one write each, then of several */
	for (size_t chunk = size ? size : 1, k = 0; k < 2; k++, chunk = small_chunk(size)) {
		struct etcd_kvs kvs;
		serve(data, size, 200, PAGES, chunk);
		r = etcd_get(e, PREFIX "opt/", true, 0, &kvs);
		check_range(e, r, s, &kvs, "etcd_get of a prefix", PREFIX "opt/");
		etcd_kvs_free(&kvs);
		serve(data, size, 200, PAGES, chunk);
		r = etcd_get(e, PREFIX "head", false, 7, &kvs);
		check_range(e, r, s, &kvs, "etcd_get of a key", PREFIX "head");
		etcd_kvs_free(&kvs);
		if (k)
			break; /* the rest read one object as range does */
		serve(data, size, 200, 2, chunk);
		bool ok = false;
		int64_t rev = -1;
		struct etcd_cmp cmp = {PREFIX "head", 5};
		struct etcd_op ops[2] = {{ETCD_OP_PUT, PREFIX "opt/t.a", "5", 1, 0}, {ETCD_OP_DELETE, PREFIX "opt/t.b", NULL, 0, 0}};
		r = etcd_txn(e, &cmp, 1, ops, 2, &ok, &rev);
		check_shape(e, r, s, "etcd_txn");
		serve(data, size, 200, 2, chunk);
		r = etcd_put(e, PREFIX "status/h/s", "{}", 2, 0, &rev);
		check_shape(e, r, s, "etcd_put");
		serve(data, size, 200, 2, chunk);
		r = etcd_delete(e, PREFIX, true, &rev);
		check_shape(e, r, s, "etcd_delete");
		serve(data, size, 200, 2, chunk);
		r = etcd_compact(e, 3);
		check_shape(e, r, s, "etcd_compact");
		uint64_t leader = 1;
		serve(data, size, 200, 2, chunk);
		r = etcd_member_status(e, &leader);
		check_shape(e, r, s, "etcd_member_status");
		int64_t id = -1, ttl = -1;
		serve(data, size, 200, 2, chunk);
		r = etcd_lease_grant(e, 10, &id);
		check_shape(e, r, s, "etcd_lease_grant");
		if (!r)
			FUZZ_ASSERT(id != 0, "a lease grant without an ID");
		serve(data, size, 200, 2, chunk);
		r = etcd_lease_keepalive(e, 42, &ttl);
		check_shape(e, r, s, "etcd_lease_keepalive");
	}
	/* an HTTP error is an error, whatever the body */
	static const long statuses[] = {400, 404, 413, 429, 500, 503, 504};
	for (size_t i = 0; i < sizeof statuses / sizeof *statuses; i++) {
		int64_t rev;
		serve(data, size, statuses[i], 2, size ? size : 1);
		r = etcd_put(e, PREFIX "k", "v", 1, 0, &rev);
		check_result(e, r, "etcd_put");
		FUZZ_ASSERT(r != 0, "etcd_put succeeded with HTTP %ld", statuses[i]);
		if (statuses[i] >= 503)
			FUZZ_ASSERT(r == ETCD_E_UNAVAILABLE || r == ETCD_E_COMPACTED || r == ETCD_E_TOO_MANY_OPS ||
					    r == ETCD_E_UNREACHABLE,
				    "HTTP %ld: %d (%s)", statuses[i], r, etcd_errmsg(e));
	}
	etcd_close(e);
}

/* ---- the watch ---- */

/* The responses of one stream, and how it ended. */
struct stream {
	struct etcd_watch_resp *resp;
	size_t n;
	int end; /* the error that ended it */
};

static void stream_free(struct stream *st)
{
	for (size_t i = 0; i < st->n; i++)
		etcd_watch_resp_free(&st->resp[i]);
	free(st->resp);
	memset(st, 0, sizeof *st);
}

static void check_resp(const struct etcd_watch_resp *wr)
{
	FUZZ_ASSERT(wr->n <= in_size / 2 + 1, "%zu events from %zu bytes", wr->n, in_size);
	FUZZ_ASSERT(wr->n == 0 || wr->ev, "events without an array");
	for (size_t i = 0; i < wr->n; i++) {
		FUZZ_ASSERT(wr->ev[i].type == ETCD_EV_PUT || wr->ev[i].type == ETCD_EV_DELETE, "event type %d",
			    wr->ev[i].type);
		check_kv(&wr->ev[i].kv);
	}
}

/* The next response of w: 1 (one in *wr) or the error that ends the
 * stream. The fake server always has more data at once, and closes the
 * stream after the input: the stream ends, in a bounded number of calls. */
static int next_resp(struct etcd_watch *w, struct etcd *e, size_t *calls, struct etcd_watch_resp *wr)
{
	for (;;) {
		int r = etcd_watch_next(w, 10000, -1, wr);
		FUZZ_ASSERT(++*calls <= srv.len + 4, "the stream does not end: %zu calls for %zu bytes", *calls, srv.len);
		if (r == 0) {
			FUZZ_ASSERT(!wr->n && !wr->ev, "no response, but events");
			continue; /* a timeout: cannot happen, as data is always there; or a fragment */
		}
		if (r == 1) {
			check_resp(wr);
			return 1;
		}
		check_result(e, r, "etcd_watch_next");
		FUZZ_ASSERT(r < 0, "etcd_watch_next returned %d", r);
		FUZZ_ASSERT(!wr->n && !wr->ev, "a failed etcd_watch_next left events");
		return r;
	}
}

static struct etcd_watch *open_watch(struct etcd *e)
{
	struct etcd_watch *w;
	int r = etcd_watch_open(e, PREFIX "audit/", PREFIX "opt0", 6, &w);
	FUZZ_ASSERT(r == 0, "etcd_watch_open: %s", etcd_errmsg(e));
	return w;
}

static struct stream watch_stream(const uint8_t *data, size_t size, size_t chunk)
{
	struct stream st = {0};
	struct etcd *e;
	int r = etcd_open(ENDPOINTS, 1000, &e);
	FUZZ_ASSERT(r == 0, "etcd_open: %s", etcd_errmsg(e));
	serve(data, size, 200, 0, chunk);
	struct etcd_watch *w = open_watch(e);
	size_t calls = 0, cap = 0;
	for (;;) {
		struct etcd_watch_resp wr;
		r = next_resp(w, e, &calls, &wr);
		if (r != 1)
			break;
		if (st.n == cap) {
			cap = cap ? 2 * cap : 8;
			st.resp = realloc(st.resp, cap * sizeof *st.resp);
			FUZZ_ASSERT(st.resp, "realloc");
		}
		st.resp[st.n++] = wr;
	}
	st.end = r;
	etcd_watch_close(w);
	etcd_close(e);
	return st;
}

static bool same_kv(const struct etcd_kv *a, const struct etcd_kv *b)
{
	return a->key_len == b->key_len && !memcmp(a->key, b->key, a->key_len) && a->value_len == b->value_len &&
	       !memcmp(a->value, b->value, a->value_len) && a->create_rev == b->create_rev &&
	       a->mod_rev == b->mod_rev && a->version == b->version && a->lease == b->lease;
}

static void same_resp(const struct etcd_watch_resp *a, const struct etcd_watch_resp *b, size_t i)
{
	FUZZ_ASSERT(a->n == b->n && a->revision == b->revision && a->created == b->created,
		    "response %zu differs with the chunking: %zu/%zu events, revision %lld/%lld", i, a->n, b->n,
		    (long long)a->revision, (long long)b->revision);
	for (size_t k = 0; k < a->n; k++)
		FUZZ_ASSERT(a->ev[k].type == b->ev[k].type && same_kv(&a->ev[k].kv, &b->ev[k].kv),
			    "event %zu of response %zu differs with the chunking", k, i);
}

/* ---- the agent ---- */

/* The agent's log, captured: stderr is a memory stream meanwhile. */
static FILE *real_stderr;
static char *log_text;
static size_t log_len;

static void log_begin(void)
{
	real_stderr = stderr;
	FILE *f = open_memstream(&log_text, &log_len);
	FUZZ_ASSERT(f, "open_memstream");
	stderr = f;
}

static void log_end(const char *step)
{
	fclose(stderr);
	stderr = real_stderr;
	if (getenv("FUZZ_VERBOSE")) /* the agent's log, to see what an input does */
		fprintf(stderr, "[%s]\n%s", step, log_text);
	for (size_t i = 0; i < log_len; i++) {
		unsigned char c = (unsigned char)log_text[i];
		FUZZ_ASSERT(c == '\n' || (c >= 0x20 && c < 0x7f),
			    "%s: the agent logged byte 0x%02x at %zu of:\n%s", step, c, i, log_text);
	}
	free(log_text);
	log_text = NULL;
	log_len = 0;
}

static void check_printable(const char *s, const char *what)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		FUZZ_ASSERT(*p >= 0x20 && *p < 0x7f, "%s holds byte 0x%02x: %s", what, *p, s);
}

/* The layer holds the value of the mirror's JSON text. */
static bool layer_is(shmcfg_snapshot *sn, shmcfg *h, shmcfg_opt o, shmcfg_source layer, const struct mentry *en)
{
	shmcfg_value want, have;
	if (shmcfg_value_from_json(h, o, en->value, en->value_len, &want))
		return false;
	bool same = shmcfg_snapshot_layer(sn, o, layer, &have) == 0 && shmcfg_value_equal(&have, &want);
	shmcfg_value_clear(&want);
	return same;
}

static bool rejected(const struct seg *s, const char *key)
{
	return kmap_find(&s->rejects, key) != NULL;
}

static void check_agent(struct agent *a, struct seg *s, const char *step)
{
	FUZZ_ASSERT(shmcfg_check(s->h, true, NULL, NULL) == 0, "%s: the segment fails its deep check", step);
	/* the status key's text: an object, far under etcd's request limit */
	char *text = status_json(a, s);
	FUZZ_ASSERT(text, "%s: no status text", step);
	FUZZ_ASSERT(strlen(text) <= 256 * 1024, "%s: a status of %zu bytes", step, strlen(text));
	json_t *j = json_loads(text, 0, NULL);
	FUZZ_ASSERT(json_is_object(j), "%s: the status is not a JSON object: %.300s", step, text);
	json_decref(j);
	free(text);
	check_printable(s->error, "the segment's error");
	shmcfg_commit ci;
	if (shmcfg_commit_info(s->h, shmcfg_generation(s->h), &ci) == 0) {
		FUZZ_ASSERT(strnlen(ci.who, sizeof ci.who) < sizeof ci.who, "%s: who not terminated", step);
		check_printable(ci.who, "a commit's who");
	}
	for (struct kent *k = s->rejects.first; k; k = k->next)
		check_printable(((struct reject *)k)->why, "a rejection");
	/* what the mirror holds is in the segment, or rejected; unless the
	 * last commit failed (the segment says why, and is out of sync) */
	if (s->need_full || *s->error)
		return;
	shmcfg_snapshot *sn;
	FUZZ_ASSERT(shmcfg_snapshot_acquire(s->h, &sn) == 0, "snapshot");
	char key[600];
	for (shmcfg_opt o = 0; o < shmcfg_count(s->h); o++) {
		shmcfg_optinfo oi;
		FUZZ_ASSERT(shmcfg_opt_info(s->h, o, &oi) == 0, "opt_info");
		if (oi.alias != SHMCFG_NO_OPT)
			continue;
		snprintf(key, sizeof key, "opt/%s", oi.name);
		const struct mentry *en = mirror_get(&a->m, key);
		shmcfg_value v;
		if (en)
			FUZZ_ASSERT(rejected(s, key) || layer_is(sn, s->h, o, SHMCFG_SRC_CLUSTER, en),
				    "%s: %s: the cluster layer is not the key's value %.*s, and the key is not rejected",
				    step, key, (int)(en->value_len < 200 ? en->value_len : 200), en->value);
		else
			FUZZ_ASSERT(shmcfg_snapshot_layer(sn, o, SHMCFG_SRC_CLUSTER, &v) == 1,
				    "%s: %s: no key, but the cluster layer is set", step, key);
		if (!oi.knob)
			continue;
		snprintf(key, sizeof key, "knob/%s", oi.knob);
		en = mirror_get(&a->m, key);
		if (en)
			FUZZ_ASSERT(rejected(s, key) || layer_is(sn, s->h, o, SHMCFG_SRC_KNOB, en),
				    "%s: %s: the knob layer is not the key's value, and the key is not rejected", step, key);
		else
			FUZZ_ASSERT(shmcfg_snapshot_layer_by_cluster(sn, o, SHMCFG_SRC_KNOB) != 1,
				    "%s: %s: no key, but the cluster's knob value stays", step, key);
	}
	shmcfg_snapshot_release(sn);
	if (a->tag > 0)
		FUZZ_ASSERT(shmcfg_cluster_revision(s->h) >= (uint64_t)a->tag,
			    "%s: the segment carries revision %llu, the agent applied %lld", step,
			    (unsigned long long)shmcfg_cluster_revision(s->h), (long long)a->tag);
}

/* A segment of the fuzz schema with local values over some cluster ones
 * (the status lists them as overrides). */
static shmcfg *agent_segment(void)
{
	shmcfg_schema *sc = fuzz_schema_new();
	shmcfg_create_opts o = {.slots = 4, .readers = 2, .heap_bytes = 4096,
				.flags = SHMCFG_CREATE_FORCE | SHMCFG_CREATE_NO_ENV};
	shmcfg *h;
	int r = shmcfg_create(seg_name, sc, &o, &h);
	FUZZ_ASSERT(r == 0, "create: %s", shmcfg_strerror(r));
	shmcfg_schema_free(sc);
	shmcfg_set_commit_timeout(h, 1000);
	shmcfg_txn *t;
	FUZZ_ASSERT(shmcfg_txn_begin(h, &t) == 0, "txn_begin");
	FUZZ_ASSERT(shmcfg_txn_set_text(t, T_C, "local") == 0, "set t.c");
	FUZZ_ASSERT(shmcfg_txn_set_text(t, T_TAGS, "a,b") == 0, "set t.tags");
	FUZZ_ASSERT(shmcfg_txn_commit(t, NULL) == 0, "commit");
	return h;
}

static void fuzz_agent(const uint8_t *data, size_t size, const struct stream *whole)
{
	struct agent a;
	memset(&a, 0, sizeof a);
	a.cluster = "fz";
	a.host = "fuzzhost";
	a.prefix = (char *)PREFIX;
	a.prefix_len = strlen(PREFIX);
	a.summary_ms = SUMMARY_MS;
	int r = etcd_open(ENDPOINTS, 1000, &a.e);
	FUZZ_ASSERT(r == 0, "etcd_open: %s", etcd_errmsg(a.e));
	struct seg s;
	memset(&s, 0, sizeof s);
	s.name = seg_name;
	s.h = agent_segment();
	FUZZ_ASSERT(seg_index_knobs(&s) == 0, "seg_index_knobs");
	a.segs = &s;
	a.nsegs = 1;

	/* the load: three paged ranges, each answered with the input's keys
	 * in it */
	serve(data, size, 200, 3 * PAGES, size ? size : 1);
	srv.ranges = true;
	log_begin();
	seg_refresh(&s);
	r = load(&a);
	if (r)
		went_offline(&a, etcd_errmsg(a.e), 0);
	log_end("load");
	check_result(a.e, r, "load");
	check_agent(&a, &s, "load");

	/* the watch, as run() follows it, in small chunks; its responses as
	 * those of the stream read whole. (run() watches only after a load
	 * that succeeded: here the watch follows a failed one too, from the
	 * state it left, an empty mirror at revision 0, as the load of an
	 * empty prefix would leave it; the same bytes are rarely both a range
	 * answer and a watch stream.) */
	serve(data, size, 200, PAGES, small_chunk(size));
	struct etcd_watch *w = open_watch(a.e);
	size_t calls = 0, i = 0;
	bool created = false;
	for (;; i++) {
		struct etcd_watch_resp wr;
		r = next_resp(w, a.e, &calls, &wr);
		if (r != 1)
			break;
		FUZZ_ASSERT(i < whole->n, "more responses in chunks than whole");
		same_resp(&whole->resp[i], &wr, i);
		log_begin();
		/* (run() asks whether the store went back when a new watch is
		 * confirmed below the mirror's revision, and reloads if so) */
		if (wr.created && !created && wr.revision < a.rev && store_went_back(&a)) {
			log_end("store_went_back");
			etcd_watch_resp_free(&wr);
			r = 0;
			break;
		}
		if (wr.created && !created) {
			created = true;
			back_in_sync(&a);
		}
		events(&a, &wr);
		log_end("events");
		etcd_watch_resp_free(&wr);
		check_agent(&a, &s, "events");
	}
	if (r) {
		FUZZ_ASSERT(i == whole->n && r == whole->end, "the stream in chunks ended after %zu responses (%d), "
			    "whole after %zu (%d)", i, r, whole->n, whole->end);
		log_begin();
		went_offline(&a, etcd_errmsg(a.e), 0);
		log_end("went_offline");
		check_agent(&a, &s, "went_offline");
	}
	etcd_watch_close(w);
	mirror_clear(&a.m);
	seg_free(&s);
	(void)shmcfg_unlink(seg_name);
	etcd_close(a.e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!seg_name[0])
		LLVMFuzzerInitialize(NULL, NULL);
	if (size > (1u << 20))
		return 0;
	in_size = size;
	fuzz_requests(data, size);
	struct stream whole = watch_stream(data, size, size ? size : 1);
	fuzz_agent(data, size, &whole);
	stream_free(&whole);
	return 0;
}
