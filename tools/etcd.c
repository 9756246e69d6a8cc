/* SPDX-License-Identifier: MIT */
/*
 * The etcd v3 JSON-gateway client (tools/etcd.h): libcurl for HTTP (one easy
 * handle per client, so its connection is reused; one more per watch),
 * jansson for the JSON. Everything etcd sends is untrusted input: every
 * field is checked for its type, base64 is decoded strictly, and a bad
 * answer is ETCD_E_PROTO with a message, never a crash.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <jansson.h>

#include "etcd.h"

struct endpoint {
	char *text; /* as given, for messages */
	char *url;  /* the base URL: http://HOST:PORT, or http://localhost for a socket */
	char *unix_path;
};

struct etcd {
	char *endpoints;
	struct endpoint *ep;
	size_t nep, cur; /* cur: the endpoint that last answered */
	bool pinned;     /* requests go to cur only */
	int timeout_ms;
	int64_t deadline; /* etcd_now_ms(); 0: none */
	const volatile sig_atomic_t *cancel;
	bool too_big;    /* the last request's answer was over ANSWER_MAX or JSON_COST_MAX */
	CURL *curl;
	char err[512];
};

/* The most an answer (or one watch message) may take: 10x etcd's limit of
 * a request (1.5 MiB by default; a value is at most that, 2 MiB as base64,
 * and the watch asks for responses over it in fragments), and above the
 * 10 MiB etcd suggests as its highest. A range page over it is asked again
 * with half the keys, down to one. Lower than it used to be (64 MiB):
 * jansson spends up to ~80x an answer's bytes on it ({"x":[{},{},...]}). */
#define ANSWER_MAX ((size_t)16 << 20)

/* ... and the most jansson may spend on one, as json_cost() estimates it:
 * ~9x the bytes of the costliest answer etcd sends (a watch message of
 * delete events) of 14 MiB, 1M empty objects of 3 MiB. */
#define JSON_COST_MAX ((size_t)128 << 20)

struct buf {
	char *p;
	size_t len, cap;
	bool too_big; /* ANSWER_MAX reached: the transfer was failed */
};

/* Keys a page of a range asks for: halved while an answer is over
 * ANSWER_MAX (values of up to etcd's request limit, 1.5 MiB by default). */
#define RANGE_PAGE 1000
/* The most keys a range may hold: 4x the most options a segment has
 * (2^22); a range holds a key per option or knob. */
#define RANGE_KEYS_MAX (16 << 20)
/* ... and the most bytes of keys and values: an eighth of etcd's default
 * backend quota (2 GiB), far more than a prefix of options and knobs holds;
 * a server that pages without end reaches it long before the memory runs
 * out. */
#define RANGE_BYTES_MAX ((size_t)256 << 20)

/* The most a fragmented watch response may gather (its events' keys and
 * values, and events): each fragment is under ANSWER_MAX, but a server
 * that sends fragments without the last one would otherwise grow it for
 * ever. etcd fragments a response over its request limit (1.5 MiB by
 * default); a backlog of big revisions takes a few tens of them. */
#define FRAGMENTED_BYTES_MAX ((size_t)64 << 20)
#define FRAGMENTED_EVENTS_MAX ((size_t)1 << 20)

static int set_err(struct etcd *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The message, one line of printable ASCII: it quotes what a server sent
 * (error texts, endpoint names), which goes to logs and terminals; any
 * other byte is written \xNN. */
static int set_err(struct etcd *e, int code, const char *fmt, ...)
{
	char raw[sizeof e->err];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(raw, sizeof raw, fmt, ap);
	va_end(ap);
	size_t o = 0;
	for (const unsigned char *p = (const unsigned char *)raw; *p && o + 5 <= sizeof e->err; p++)
		if (*p >= 0x20 && *p < 0x7f)
			e->err[o++] = (char)*p;
		else
			o += (size_t)snprintf(e->err + o, 5, "\\x%02x", *p);
	e->err[o] = 0;
	return code;
}

const char *etcd_errmsg(const struct etcd *e)
{
	return e ? e->err : "no etcd client";
}

const char *etcd_endpoints(const struct etcd *e)
{
	return e->endpoints;
}

size_t etcd_nendpoints(const struct etcd *e)
{
	return e->nep;
}

const char *etcd_endpoint(const struct etcd *e, size_t i)
{
	return i < e->nep ? e->ep[i].text : "?";
}

size_t etcd_current(const struct etcd *e)
{
	return e->cur;
}

void etcd_pin(struct etcd *e, size_t i)
{
	e->pinned = i < e->nep;
	if (i < e->nep)
		e->cur = i;
}

void etcd_set_timeout(struct etcd *e, int timeout_ms)
{
	e->timeout_ms = timeout_ms > 0 ? timeout_ms : 5000;
}

int64_t etcd_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void etcd_set_deadline(struct etcd *e, int64_t deadline_ms)
{
	e->deadline = deadline_ms;
}

void etcd_set_cancel(struct etcd *e, const volatile sig_atomic_t *flag)
{
	e->cancel = flag;
}

/* ---- base64 (RFC 4648, with padding), as the gateway encodes bytes ---- */

static const char b64chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static char *b64_encode(const char *in, size_t len)
{
	const unsigned char *s = (const unsigned char *)in;
	char *out = malloc((len + 2) / 3 * 4 + 1), *o = out;
	if (!out)
		return NULL;
	for (size_t i = 0; i < len; i += 3) {
		uint32_t v = (uint32_t)s[i] << 16;
		if (i + 1 < len)
			v |= (uint32_t)s[i + 1] << 8;
		if (i + 2 < len)
			v |= s[i + 2];
		*o++ = b64chars[v >> 18 & 63];
		*o++ = b64chars[v >> 12 & 63];
		*o++ = i + 1 < len ? b64chars[v >> 6 & 63] : '=';
		*o++ = i + 2 < len ? b64chars[v & 63] : '=';
	}
	*o = 0;
	return out;
}

static int b64_val(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

/* Strict: length a multiple of 4, padding only at the end. Returns 0, -1
 * (not base64), -2 (ENOMEM); *ret is NUL-terminated after *ret_len bytes. */
static int b64_decode(const char *in, size_t len, char **ret, size_t *ret_len)
{
	if (len % 4)
		return -1;
	char *out = malloc(len / 4 * 3 + 1);
	size_t n = 0;
	if (!out)
		return -2;
	for (size_t i = 0; i < len; i += 4) {
		int v[4];
		size_t pad = 0;
		for (int k = 0; k < 4; k++) {
			unsigned char c = (unsigned char)in[i + k];
			if (c == '=' && i + 4 == len && k >= 2) {
				v[k] = 0;
				pad++;
			} else if (pad || (v[k] = b64_val(c)) < 0) {
				free(out);
				return -1;
			}
		}
		uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
		out[n++] = (char)(w >> 16);
		if (pad < 2)
			out[n++] = (char)(w >> 8 & 255);
		if (pad < 1)
			out[n++] = (char)(w & 255);
	}
	out[n] = 0;
	*ret = out;
	*ret_len = n;
	return 0;
}

/* ---- JSON fields ---- */

/* A number as the gateway writes it: int64 and uint64 as a JSON string (a
 * JSON integer taken too), zero values left out (0). */
static bool get_num(json_t *o, const char *name, bool is_signed, uint64_t *ret)
{
	json_t *v = json_object_get(o, name);
	*ret = 0;
	if (!v)
		return true;
	if (json_is_integer(v)) {
		*ret = (uint64_t)json_integer_value(v);
		return is_signed || json_integer_value(v) >= 0;
	}
	if (!json_is_string(v))
		return false;
	const char *s = json_string_value(v);
	char *end;
	errno = 0;
	*ret = is_signed ? (uint64_t)strtoll(s, &end, 10) : strtoull(s, &end, 10);
	return !errno && end != s && !*end && (is_signed || *s != '-');
}

static bool get_i64(json_t *o, const char *name, int64_t *ret)
{
	uint64_t x;
	bool ok = get_num(o, name, true, &x);
	*ret = ok ? (int64_t)x : 0;
	return ok;
}

/* Member IDs use all 64 bits. */
static bool get_u64(json_t *o, const char *name, uint64_t *ret)
{
	bool ok = get_num(o, name, false, ret);
	if (!ok)
		*ret = 0;
	return ok;
}

static bool get_bool(json_t *o, const char *name)
{
	return json_is_true(json_object_get(o, name));
}

/* A base64 field (absent: empty). */
static int get_bytes(json_t *o, const char *name, char **ret, size_t *len)
{
	json_t *v = json_object_get(o, name);
	if (!v) {
		*ret = strdup("");
		*len = 0;
		return *ret ? 0 : -2;
	}
	if (!json_is_string(v))
		return -1;
	return b64_decode(json_string_value(v), json_string_length(v), ret, len);
}

static void kv_free(struct etcd_kv *kv)
{
	free(kv->key);
	free(kv->value);
	memset(kv, 0, sizeof *kv);
}

static int parse_kv(struct etcd *e, json_t *o, struct etcd_kv *kv)
{
	memset(kv, 0, sizeof *kv);
	if (!json_is_object(o))
		return set_err(e, ETCD_E_PROTO, "etcd %s: a key-value that is not an object", e->ep[e->cur].text);
	int r = get_bytes(o, "key", &kv->key, &kv->key_len);
	if (!r)
		r = get_bytes(o, "value", &kv->value, &kv->value_len);
	if (r == -2) {
		kv_free(kv);
		return set_err(e, ETCD_E_NOMEM, "out of memory");
	}
	if (r || !get_i64(o, "create_revision", &kv->create_rev) || !get_i64(o, "mod_revision", &kv->mod_rev) ||
	    !get_i64(o, "version", &kv->version) || !get_i64(o, "lease", &kv->lease)) {
		kv_free(kv);
		return set_err(e, ETCD_E_PROTO, "etcd %s: a key-value with a bad field", e->ep[e->cur].text);
	}
	return 0;
}

static void put_bytes(json_t *o, const char *name, const char *p, size_t len)
{
	char *b = b64_encode(p, len);
	json_object_set_new(o, name, b ? json_string(b) : json_null());
	free(b);
}

/* ---- open, close ---- */

static int parse_endpoint(struct etcd *e, const char *text, struct endpoint *ep)
{
	memset(ep, 0, sizeof *ep);
	ep->text = strdup(text);
	for (const unsigned char *c = (const unsigned char *)text; *c; c++)
		if (*c <= ' ' || *c == 0x7f)
			return set_err(e, ETCD_E_ARG, "etcd endpoint '%s': a space or control character in it", text);
	if (!strncmp(text, "http://", 7) && text[7]) {
		size_t n = strlen(text);
		while (n > 7 && text[n - 1] == '/')
			n--;
		ep->url = strndup(text, n);
	} else if (!strncmp(text, "unix:", 5)) {
		/* unix:PATH, or etcd's own spelling unix://PATH */
		const char *path = text + 5;
		if (!strncmp(path, "//", 2))
			path += 2;
		if (!*path)
			return set_err(e, ETCD_E_ARG, "etcd endpoint '%s': no socket path after unix:", text);
		ep->unix_path = strdup(path);
		ep->url = strdup("http://localhost");
	} else {
		return set_err(e, ETCD_E_ARG, "etcd endpoint '%s': not http://HOST:PORT or unix:PATH", text);
	}
	if (!ep->text || !ep->url || (!strncmp(text, "unix:", 5) && !ep->unix_path))
		return set_err(e, ETCD_E_NOMEM, "out of memory");
	return 0;
}

static void curl_init_once(void)
{
	static bool done;
	if (!done) {
		curl_global_init(CURL_GLOBAL_DEFAULT);
		done = true;
	}
}

int etcd_open(const char *endpoints, int timeout_ms, struct etcd **ret)
{
	static struct etcd nomem = {.err = "out of memory"};
	struct etcd *e = calloc(1, sizeof *e);
	*ret = NULL;
	if (!e) {
		*ret = &nomem; /* only for etcd_errmsg(); etcd_close() knows it */
		return ETCD_E_NOMEM;
	}
	*ret = e;
	e->timeout_ms = timeout_ms > 0 ? timeout_ms : 5000;
	e->endpoints = strdup(endpoints ? endpoints : "");
	if (!e->endpoints)
		return set_err(e, ETCD_E_NOMEM, "out of memory");
	if (!*e->endpoints)
		return set_err(e, ETCD_E_ARG, "no etcd endpoints given");
	size_t n = 1;
	for (const char *p = e->endpoints; *p; p++)
		n += *p == ',';
	e->ep = calloc(n, sizeof *e->ep);
	if (!e->ep)
		return set_err(e, ETCD_E_NOMEM, "out of memory");
	char *save, *copy = strdup(e->endpoints);
	if (!copy)
		return set_err(e, ETCD_E_NOMEM, "out of memory");
	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		int r = parse_endpoint(e, t, &e->ep[e->nep++]);
		if (r) {
			free(copy);
			return r;
		}
	}
	free(copy);
	if (!e->nep)
		return set_err(e, ETCD_E_ARG, "etcd endpoints '%s': none given", endpoints);
	curl_init_once();
	if (!(e->curl = curl_easy_init()))
		return set_err(e, ETCD_E_NOMEM, "curl_easy_init failed");
	return 0;
}

void etcd_close(struct etcd *e)
{
	if (!e || !e->endpoints) /* NULL, or the static ENOMEM client */
		return;
	for (size_t i = 0; i < e->nep; i++) {
		free(e->ep[i].text);
		free(e->ep[i].url);
		free(e->ep[i].unix_path);
	}
	free(e->ep);
	if (e->curl)
		curl_easy_cleanup(e->curl);
	free(e->endpoints);
	free(e);
}

/* ---- one request ---- */

static size_t on_data(char *p, size_t size, size_t n, void *ud)
{
	struct buf *b = ud;
	size_t len = size * n;
	if (len > ANSWER_MAX - b->len) {
		b->too_big = true;
		return 0; /* curl fails the transfer with CURLE_WRITE_ERROR */
	}
	if (b->len + len + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < b->len + len + 1)
			cap *= 2;
		char *q = realloc(b->p, cap);
		if (!q)
			return 0; /* curl fails the transfer with CURLE_WRITE_ERROR */
		b->p = q;
		b->cap = cap;
	}
	memcpy(b->p + b->len, p, len);
	b->len += len;
	b->p[b->len] = 0;
	return len;
}

/* A transfer stops once the cancel flag is set (libcurl calls this at
 * least once a second, and whenever data moves; a signal also wakes its
 * poll). */
static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
	(void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
	const volatile sig_atomic_t *cancel = ud;
	return *cancel != 0;
}

static void setup(CURL *c, const struct endpoint *ep, const char *path, const char *body, struct buf *out,
		  struct curl_slist *hdr)
{
	char url[1024];
	snprintf(url, sizeof url, "%s%s", ep->url, path);
	curl_easy_reset(c);
	curl_easy_setopt(c, CURLOPT_URL, url);
	if (ep->unix_path)
		curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, ep->unix_path);
	curl_easy_setopt(c, CURLOPT_POST, 1L);
	curl_easy_setopt(c, CURLOPT_COPYPOSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TCP_NODELAY, 1L);
}

/* etcd's answers that say "not now" rather than "no": the gRPC codes
 * Unavailable and DeadlineExceeded (HTTP 503, 504 through the gateway) and
 * the texts of etcdserver's transient errors (rpctypes), for a gateway that
 * maps them otherwise. */
static bool transient_text(const char *msg)
{
	static const char *const texts[] = {
		"etcdserver: leader changed", "etcdserver: no leader", "etcdserver: request timed out",
		"etcdserver: too many requests", "etcdserver: server stopped", "etcdserver: not capable",
		"etcdserver: unhealthy cluster", "etcdserver: request timed out, possibly due to",
		"etcdserver: request timed out, waiting for the applied index",
	};
	for (size_t i = 0; i < sizeof texts / sizeof *texts; i++)
		if (strstr(msg, texts[i]))
			return true;
	return false;
}

/* etcd's error text: {"error": "...", "message": "...", "code": N}. */
static int server_error(struct etcd *e, const char *ep, const char *path, long status, json_t *j)
{
	const char *msg = NULL;
	json_t *m = json_object_get(j, "message");
	if (!json_is_string(m))
		m = json_object_get(j, "error");
	if (json_is_string(m))
		msg = json_string_value(m);
	else if (json_is_object(m) && json_is_string(json_object_get(m, "message")))
		msg = json_string_value(json_object_get(m, "message")); /* a stream's {"error": {...}} */
	int code = ETCD_E_SERVER;
	if (msg && strstr(msg, "required revision has been compacted"))
		code = ETCD_E_COMPACTED;
	else if (msg && strstr(msg, "too many operations in txn request"))
		code = ETCD_E_TOO_MANY_OPS;
	else if (status == 503 || status == 504 || status == 429 || (msg && transient_text(msg)))
		code = ETCD_E_UNAVAILABLE;
	if (status)
		return set_err(e, code, "etcd %s: %s: HTTP %ld: %s", ep, path, status, msg ? msg : "(no message)");
	return set_err(e, code, "etcd %s: %s: %s", ep, path, msg ? msg : "(no message)");
}

/* Roughly what jansson spends on the values of a JSON text of n bytes (its
 * strings aside, which take their length): an object with its hash table
 * ~240 bytes, an array ~130, a member ~60, a value ~40 (6M empty objects
 * took 1.4 GB). Counted outside strings, without parsing. */
static size_t json_cost(const char *p, size_t n)
{
	size_t cost = 0;
	bool in_str = false;
	for (size_t i = 0; i < n; i++) {
		char c = p[i];
		if (in_str) {
			if (c == '\\')
				i++;
			else if (c == '"')
				in_str = false;
			continue;
		}
		switch (c) {
		case '"': in_str = true; break;
		case '{': cost += 240; break;
		case '[': cost += 130; break;
		case ':': cost += 60; break;
		case ',': cost += 40; break;
		}
	}
	return cost;
}

/* Parses an answer (or a watch message) of etcd's as JSON: NULL and an
 * error set (ETCD_E_PROTO; ETCD_E_NOMEM if jansson ran out of memory) if
 * it is not JSON or would cost more than JSON_COST_MAX (*costly then). */
static json_t *parse_answer(struct etcd *e, const char *ep, const char *what, const char *p, size_t n, bool *costly,
			    int *r)
{
	json_error_t je;
	size_t cost = json_cost(p, n);
	*costly = cost > JSON_COST_MAX;
	if (*costly) {
		*r = set_err(e, ETCD_E_PROTO, "etcd %s: %s: an answer of %zu bytes with too many JSON values (~%zu MiB "
			     "to parse, over %zu MiB)", ep, what, n, cost >> 20, JSON_COST_MAX >> 20);
		return NULL;
	}
	json_t *j = json_loadb(p, n, 0, &je);
	if (!j) {
		if (json_error_code(&je) == json_error_out_of_memory)
			*r = set_err(e, ETCD_E_NOMEM, "etcd %s: %s: out of memory parsing an answer of %zu bytes", ep,
				     what, n);
		else
			*r = set_err(e, ETCD_E_PROTO, "etcd %s: %s: an answer that is not JSON: %s", ep, what, je.text);
	}
	return j;
}

/* POST body to path; *ret the answer's JSON object. Falls over to the next
 * endpoint on a transport error or a transient answer, trying each once
 * (the pinned one only, if pinned); the message is the last endpoint's. */
static int request(struct etcd *e, const char *path, json_t *body, json_t **ret)
{
	*ret = NULL;
	e->err[0] = 0;
	e->too_big = false;
	char *text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	if (!text)
		return set_err(e, ETCD_E_NOMEM, "out of memory");
	struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
	struct buf out = {0};
	int r = ETCD_E_UNREACHABLE;
	size_t tries = e->pinned ? 1 : e->nep;
	for (size_t k = 0; k < tries; k++) {
		size_t i = (e->cur + k) % e->nep;
		if (e->cancel && *e->cancel) {
			r = set_err(e, ETCD_E_CANCELED, "etcd %s: %s: canceled", e->ep[i].text, path);
			break;
		}
		long ms = e->timeout_ms;
		if (e->deadline) {
			int64_t left = e->deadline - etcd_now_ms();
			if (left <= 0) {
				r = set_err(e, ETCD_E_UNREACHABLE, "etcd %s: %s: out of time (the deadline passed)",
					    e->ep[i].text, path);
				break;
			}
			if (left < ms)
				ms = (long)left;
		}
		out.len = 0;
		setup(e->curl, &e->ep[i], path, text, &out, hdr);
		curl_easy_setopt(e->curl, CURLOPT_TIMEOUT_MS, ms);
		curl_easy_setopt(e->curl, CURLOPT_CONNECTTIMEOUT_MS, ms);
		if (e->cancel) {
			curl_easy_setopt(e->curl, CURLOPT_NOPROGRESS, 0L);
			curl_easy_setopt(e->curl, CURLOPT_XFERINFOFUNCTION, on_progress);
			curl_easy_setopt(e->curl, CURLOPT_XFERINFODATA, (void *)e->cancel);
		}
		CURLcode c = curl_easy_perform(e->curl);
		if (c == CURLE_ABORTED_BY_CALLBACK) {
			r = set_err(e, ETCD_E_CANCELED, "etcd %s: %s: canceled", e->ep[i].text, path);
			break;
		}
		if (c == CURLE_WRITE_ERROR && out.too_big) {
			e->too_big = true;
			r = set_err(e, ETCD_E_PROTO, "etcd %s: %s: an answer over %zu MiB", e->ep[i].text, path,
				    ANSWER_MAX >> 20);
			break;
		}
		if (c == CURLE_OPERATION_TIMEDOUT && e->deadline && etcd_now_ms() >= e->deadline) {
			/* cut short by the caller's deadline, not by this endpoint's
			 * own timeout: said as the check before the request says it */
			r = set_err(e, ETCD_E_UNREACHABLE, "etcd %s: %s: out of time (the deadline passed)",
				    e->ep[i].text, path);
			break;
		}
		if (c == CURLE_URL_MALFORMAT || c == CURLE_UNSUPPORTED_PROTOCOL) {
			/* the endpoint's text, not the network: no retry helps */
			r = set_err(e, ETCD_E_ARG, "etcd %s: %s", e->ep[i].text, curl_easy_strerror(c));
			break;
		}
		if (c != CURLE_OK) {
			r = set_err(e, c == CURLE_WRITE_ERROR ? ETCD_E_NOMEM : ETCD_E_UNREACHABLE, "etcd %s: %s: %s",
				    e->ep[i].text, path, curl_easy_strerror(c));
			continue;
		}
		e->cur = i;
		long status = 0;
		curl_easy_getinfo(e->curl, CURLINFO_RESPONSE_CODE, &status);
		bool costly = false;
		int pr = 0;
		json_t *j = out.p ? parse_answer(e, e->ep[i].text, path, out.p, out.len, &costly, &pr) : NULL;
		if (costly || pr == ETCD_E_NOMEM) {
			e->too_big = costly; /* a range asks for fewer keys */
			r = pr;
			break;
		}
		if (!json_is_object(j)) {
			json_decref(j);
			r = set_err(e, status == 503 || status == 504 ? ETCD_E_UNAVAILABLE : ETCD_E_PROTO,
				    "etcd %s: %s: HTTP %ld, an answer that is not a JSON object", e->ep[i].text, path, status);
		} else if (status != 200 || json_object_get(j, "error")) {
			r = server_error(e, e->ep[i].text, path, status, j);
			json_decref(j);
		} else {
			*ret = j;
			r = 0;
		}
		if (r != ETCD_E_UNAVAILABLE)
			break;
	}
	curl_slist_free_all(hdr);
	free(out.p);
	free(text);
	return r;
}

/* ---- kv ---- */

/* Adds the kvs of an answer to *ret; *more: etcd has more in the range. */
static int parse_kvs(struct etcd *e, json_t *j, struct etcd_kvs *ret, bool *more)
{
	json_t *kvs = json_object_get(j, "kvs");
	*more = get_bool(j, "more");
	if (!get_i64(json_object_get(j, "header"), "revision", &ret->revision))
		return set_err(e, ETCD_E_PROTO, "etcd %s: a header with a bad revision", e->ep[e->cur].text);
	if (!kvs)
		return 0;
	if (!json_is_array(kvs))
		return set_err(e, ETCD_E_PROTO, "etcd %s: \"kvs\" is not an array", e->ep[e->cur].text);
	struct etcd_kv *kv = realloc(ret->kv, (ret->n + json_array_size(kvs) + 1) * sizeof *kv);
	if (!kv)
		return set_err(e, ETCD_E_NOMEM, "out of memory");
	ret->kv = kv;
	for (size_t i = 0; i < json_array_size(kvs); i++) {
		int r = parse_kv(e, json_array_get(kvs, i), &ret->kv[ret->n]);
		if (r)
			return r;
		ret->n++;
	}
	return 0;
}

char *etcd_prefix_end(const char *prefix)
{
	size_t n = strlen(prefix);
	char *end = strdup(prefix);
	if (!end)
		return NULL;
	while (n > 0 && (unsigned char)end[n - 1] == 0xff)
		n--;
	if (!n) {
		/* every key: etcd's "\0" range end; stored as "" + NUL, see etcd_range */
		end[0] = 0;
		return end;
	}
	end[n - 1] = (char)((unsigned char)end[n - 1] + 1);
	end[n] = 0;
	return end;
}

/* Byte order of keys, as etcd sorts them. */
static int key_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
	int c = memcmp(a, b, alen < blen ? alen : blen);
	return c ? c : (alen > blen) - (alen < blen);
}

/*
 * In pages of at most `limit` keys, all at the revision of the first (the
 * whole range is one state), each starting just past the last key of the
 * one before (its bytes and a NUL); a page whose answer is over ANSWER_MAX
 * is asked again with half the keys. A page whose keys are not in order
 * from where it was asked, or a range of more than RANGE_KEYS_MAX keys or
 * RANGE_BYTES_MAX bytes, is refused: an answer that never advances would
 * page for ever. The client's deadline and cancel flag bound all the pages
 * (request() checks them before each).
 */
int etcd_range(struct etcd *e, const char *key, const char *range_end, int64_t rev, struct etcd_kvs *ret)
{
	memset(ret, 0, sizeof *ret);
	char *from = strdup(key);
	size_t from_len = strlen(key);
	int64_t limit = range_end ? RANGE_PAGE : 0;
	size_t bytes = 0;
	int r = from ? 0 : set_err(e, ETCD_E_NOMEM, "out of memory");
	for (bool more = true; !r && more;) {
		json_t *b = json_object();
		put_bytes(b, "key", from, from_len);
		if (range_end)
			put_bytes(b, "range_end", range_end, *range_end ? strlen(range_end) : 1);
		if (rev)
			json_object_set_new(b, "revision", json_integer(rev));
		if (limit)
			json_object_set_new(b, "limit", json_integer(limit));
		json_t *j;
		r = request(e, "/v3/kv/range", b, &j);
		if (r && e->too_big && limit > 1) {
			limit /= 2;
			r = 0;
			continue;
		}
		if (r)
			break;
		size_t before = ret->n;
		int64_t first = ret->revision;
		r = parse_kvs(e, j, ret, &more);
		json_decref(j);
		if (before || first) /* the revision of the answer is the first page's */
			ret->revision = first;
		if (!rev)
			rev = ret->revision;
		for (size_t i = before; !r && i < ret->n; i++) {
			const struct etcd_kv *k = &ret->kv[i], *prev = i > before ? k - 1 : NULL;
			bytes += k->key_len + k->value_len;
			if (prev ? key_cmp(k->key, k->key_len, prev->key, prev->key_len) <= 0
				 : key_cmp(k->key, k->key_len, from, from_len) < 0)
				r = set_err(e, ETCD_E_PROTO, "etcd %s: a range page whose keys are not in order",
					    e->ep[e->cur].text);
		}
		if (!r && ret->n > RANGE_KEYS_MAX)
			r = set_err(e, ETCD_E_PROTO, "etcd %s: a range of more than %d keys",
				    e->ep[e->cur].text, RANGE_KEYS_MAX);
		if (!r && bytes > RANGE_BYTES_MAX)
			r = set_err(e, ETCD_E_PROTO, "etcd %s: a range of more than %zu MiB of keys and values",
				    e->ep[e->cur].text, RANGE_BYTES_MAX >> 20);
		if (r || !more)
			break;
		if (ret->n == before) {
			r = set_err(e, ETCD_E_PROTO, "etcd %s: a range page with more to come and no key", e->ep[e->cur].text);
			break;
		}
		/* the next page: past the last key */
		const struct etcd_kv *last = &ret->kv[ret->n - 1];
		char *next = malloc(last->key_len + 2);
		if (!next) {
			r = set_err(e, ETCD_E_NOMEM, "out of memory");
			break;
		}
		memcpy(next, last->key, last->key_len);
		next[last->key_len] = 0;
		next[last->key_len + 1] = 0;
		free(from);
		from = next;
		from_len = last->key_len + 1;
	}
	free(from);
	if (r)
		etcd_kvs_free(ret);
	return r;
}

int etcd_get(struct etcd *e, const char *key, bool prefix, int64_t rev, struct etcd_kvs *ret)
{
	if (!prefix)
		return etcd_range(e, key, NULL, rev, ret);
	char *end = etcd_prefix_end(key);
	if (!end) {
		memset(ret, 0, sizeof *ret);
		return set_err(e, ETCD_E_NOMEM, "out of memory");
	}
	int r = etcd_range(e, key, end, rev, ret);
	free(end);
	return r;
}

void etcd_kvs_free(struct etcd_kvs *kvs)
{
	if (!kvs)
		return;
	for (size_t i = 0; i < kvs->n; i++)
		kv_free(&kvs->kv[i]);
	free(kvs->kv);
	memset(kvs, 0, sizeof *kvs);
}

static int header_revision(struct etcd *e, json_t *j, int64_t *rev)
{
	int64_t x;
	if (!get_i64(json_object_get(j, "header"), "revision", &x))
		return set_err(e, ETCD_E_PROTO, "etcd %s: a header with a bad revision", e->ep[e->cur].text);
	if (rev)
		*rev = x;
	return 0;
}

int etcd_txn(struct etcd *e, const struct etcd_cmp *cmps, size_t ncmps, const struct etcd_op *ops, size_t nops,
	     bool *succeeded, int64_t *revision)
{
	json_t *b = json_object(), *cmp = json_array(), *succ = json_array();
	for (size_t i = 0; i < ncmps; i++) {
		json_t *c = json_object();
		put_bytes(c, "key", cmps[i].key, strlen(cmps[i].key));
		json_object_set_new(c, "target", json_string("MOD"));
		json_object_set_new(c, "result", json_string("EQUAL"));
		json_object_set_new(c, "mod_revision", json_integer(cmps[i].mod_rev));
		json_array_append_new(cmp, c);
	}
	for (size_t i = 0; i < nops; i++) {
		json_t *rq = json_object(), *op = json_object();
		put_bytes(rq, "key", ops[i].key, strlen(ops[i].key));
		if (ops[i].kind == ETCD_OP_PUT) {
			put_bytes(rq, "value", ops[i].value ? ops[i].value : "", ops[i].value ? ops[i].value_len : 0);
			if (ops[i].lease)
				json_object_set_new(rq, "lease", json_integer(ops[i].lease));
			json_object_set_new(op, "request_put", rq);
		} else {
			json_object_set_new(op, "request_delete_range", rq);
		}
		json_array_append_new(succ, op);
	}
	json_object_set_new(b, "compare", cmp);
	json_object_set_new(b, "success", succ);
	json_t *j;
	int r = request(e, "/v3/kv/txn", b, &j);
	if (r)
		return r;
	if (succeeded)
		*succeeded = get_bool(j, "succeeded");
	r = header_revision(e, j, revision);
	json_decref(j);
	return r;
}

int etcd_put(struct etcd *e, const char *key, const char *value, size_t value_len, int64_t lease, int64_t *revision)
{
	json_t *b = json_object();
	put_bytes(b, "key", key, strlen(key));
	put_bytes(b, "value", value, value_len);
	if (lease)
		json_object_set_new(b, "lease", json_integer(lease));
	json_t *j;
	int r = request(e, "/v3/kv/put", b, &j);
	if (r)
		return r;
	r = header_revision(e, j, revision);
	json_decref(j);
	return r;
}

int etcd_delete(struct etcd *e, const char *key, bool prefix, int64_t *revision)
{
	json_t *b = json_object();
	put_bytes(b, "key", key, strlen(key));
	if (prefix) {
		char *end = etcd_prefix_end(key);
		if (!end) {
			json_decref(b);
			return set_err(e, ETCD_E_NOMEM, "out of memory");
		}
		put_bytes(b, "range_end", end, *end ? strlen(end) : 1);
		free(end);
	}
	json_t *j;
	int r = request(e, "/v3/kv/deleterange", b, &j);
	if (r)
		return r;
	r = header_revision(e, j, revision);
	json_decref(j);
	return r;
}

int etcd_compact(struct etcd *e, int64_t rev)
{
	json_t *j;
	int r = request(e, "/v3/kv/compaction", json_pack("{s:I, s:b}", "revision", (json_int_t)rev, "physical", 1), &j);
	json_decref(j);
	return r;
}

int etcd_member_status(struct etcd *e, uint64_t *leader)
{
	json_t *j;
	int r = request(e, "/v3/maintenance/status", json_object(), &j);
	if (r)
		return r;
	if (!get_u64(j, "leader", leader))
		r = set_err(e, ETCD_E_PROTO, "etcd %s: status: an answer with a bad leader", e->ep[e->cur].text);
	json_decref(j);
	return r;
}

int etcd_lease_grant(struct etcd *e, int ttl_s, int64_t *id)
{
	json_t *j;
	int r = request(e, "/v3/lease/grant", json_pack("{s:i}", "TTL", ttl_s), &j);
	if (r)
		return r;
	if (!get_i64(j, "ID", id) || !*id)
		r = set_err(e, ETCD_E_PROTO, "etcd %s: lease grant: an answer without a lease ID", e->ep[e->cur].text);
	json_decref(j);
	return r;
}

int etcd_lease_keepalive(struct etcd *e, int64_t id, int64_t *ttl)
{
	json_t *j;
	/* a stream in gRPC; one request, one {"result": {...}} through the gateway */
	int r = request(e, "/v3/lease/keepalive", json_pack("{s:I}", "ID", (json_int_t)id), &j);
	if (r)
		return r;
	json_t *res = json_object_get(j, "result");
	if (!json_is_object(res) || !get_i64(res, "TTL", ttl))
		r = set_err(e, ETCD_E_PROTO, "etcd %s: lease keepalive: an answer without a result", e->ep[e->cur].text);
	json_decref(j);
	return r;
}

/* ---- watch ---- */

struct etcd_watch {
	struct etcd *e; /* for messages */
	const char *ep; /* the endpoint's text */
	bool fragmented; /* the last response was a fragment: the next ones add to it */
	struct etcd_watch_resp part; /* ... the events so far */
	size_t part_bytes;           /* ... their keys' and values' bytes */
	CURLM *multi;
	CURL *curl;
	struct curl_slist *hdr;
	struct buf in;
	size_t used; /* bytes of in already parsed */
	bool done;   /* the transfer ended */
	CURLcode result;
};

int etcd_watch_open(struct etcd *e, const char *key, const char *range_end, int64_t start_rev,
		    struct etcd_watch **ret)
{
	*ret = NULL;
	struct etcd_watch *w = calloc(1, sizeof *w);
	if (!w)
		return set_err(e, ETCD_E_NOMEM, "out of memory");
	w->e = e;
	w->ep = e->ep[e->cur].text;
	json_t *cr = json_object();
	put_bytes(cr, "key", key, strlen(key));
	if (range_end)
		put_bytes(cr, "range_end", range_end, *range_end ? strlen(range_end) : 1);
	if (start_rev)
		json_object_set_new(cr, "start_revision", json_integer(start_rev));
	/* a response over etcd's request limit comes in fragments (a backlog of
	 * big revisions), each under it; watch_message() joins them */
	json_object_set_new(cr, "fragment", json_true());
	json_t *b = json_pack("{s:o}", "create_request", cr);
	char *text = json_dumps(b, JSON_COMPACT);
	json_decref(b);
	w->hdr = curl_slist_append(NULL, "Content-Type: application/json");
	/* gRPC metadata through the gateway: etcd cancels the watch when its
	 * member loses the leader (a member cut off from the quorum would
	 * otherwise keep the stream open and silent) */
	if (w->hdr)
		w->hdr = curl_slist_append(w->hdr, "Grpc-Metadata-hasleader: true");
	w->multi = curl_multi_init();
	w->curl = curl_easy_init();
	if (!text || !w->hdr || !w->multi || !w->curl) {
		free(text);
		etcd_watch_close(w);
		return set_err(e, ETCD_E_NOMEM, "out of memory");
	}
	setup(w->curl, &e->ep[e->cur], "/v3/watch", text, &w->in, w->hdr);
	free(text);
	/* no overall timeout: the stream lasts; the caller checks liveness */
	curl_easy_setopt(w->curl, CURLOPT_CONNECTTIMEOUT_MS, (long)e->timeout_ms);
	curl_multi_add_handle(w->multi, w->curl);
	*ret = w;
	return 0;
}

void etcd_watch_close(struct etcd_watch *w)
{
	if (!w)
		return;
	if (w->multi && w->curl)
		curl_multi_remove_handle(w->multi, w->curl);
	if (w->curl)
		curl_easy_cleanup(w->curl);
	if (w->multi)
		curl_multi_cleanup(w->multi);
	curl_slist_free_all(w->hdr);
	free(w->in.p);
	etcd_watch_resp_free(&w->part);
	free(w);
}

void etcd_watch_resp_free(struct etcd_watch_resp *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n; i++)
		kv_free(&r->ev[i].kv);
	free(r->ev);
	memset(r, 0, sizeof *r);
}

/* A fragment of a response (more: more follow): its events are added to
 * w->part; the last one completes it into *ret. 1 (*ret complete), 0 (wait
 * for more), or an error. */
static int join_fragment(struct etcd_watch *w, struct etcd_watch_resp *ret, bool more)
{
	struct etcd_watch_resp *p = &w->part;
	size_t bytes = 0;
	for (size_t i = 0; i < ret->n; i++)
		bytes += ret->ev[i].kv.key_len + ret->ev[i].kv.value_len;
	if (p->n + ret->n > FRAGMENTED_EVENTS_MAX || w->part_bytes + bytes > FRAGMENTED_BYTES_MAX) {
		etcd_watch_resp_free(p);
		w->part_bytes = 0;
		w->fragmented = false;
		return set_err(w->e, ETCD_E_PROTO,
			       "etcd %s: watch: a fragmented response of more than %zu events or %zu MiB", w->ep,
			       FRAGMENTED_EVENTS_MAX, FRAGMENTED_BYTES_MAX >> 20);
	}
	struct etcd_event *ev = realloc(p->ev, (p->n + ret->n + 1) * sizeof *ev);
	if (!ev)
		return set_err(w->e, ETCD_E_NOMEM, "out of memory");
	p->ev = ev;
	memcpy(p->ev + p->n, ret->ev, ret->n * sizeof *ev);
	p->n += ret->n;
	w->part_bytes += bytes;
	p->revision = ret->revision;
	p->created |= ret->created;
	free(ret->ev); /* the kvs now belong to p */
	w->fragmented = more;
	if (more)
		return 0;
	*ret = *p;
	memset(p, 0, sizeof *p);
	w->part_bytes = 0;
	return 1;
}

/* One message of the stream: {"result": WatchResponse} or {"error": ...}.
 * Returns 1 (a response), 0 (nothing for the caller), or an error. */
static int watch_message(struct etcd_watch *w, const char *line, size_t len, struct etcd_watch_resp *ret)
{
	struct etcd *e = w->e;
	bool costly;
	int r = 0;
	json_t *j = parse_answer(e, w->ep, "watch", line, len, &costly, &r);
	if (!j)
		goto out;
	if (!json_is_object(j)) {
		r = set_err(e, ETCD_E_PROTO, "etcd %s: watch: a message that is not a JSON object", w->ep);
		goto out;
	}
	if (json_object_get(j, "error")) {
		r = server_error(e, w->ep, "watch", 0, json_object_get(j, "error"));
		goto out;
	}
	json_t *res = json_object_get(j, "result");
	if (!json_is_object(res)) {
		r = set_err(e, ETCD_E_PROTO, "etcd %s: watch: a message without a result", w->ep);
		goto out;
	}
	int64_t compact;
	if (!get_i64(res, "compact_revision", &compact) || !get_i64(json_object_get(res, "header"), "revision", &ret->revision)) {
		r = set_err(e, ETCD_E_PROTO, "etcd %s: watch: a response with a bad revision", w->ep);
		goto out;
	}
	if (get_bool(res, "canceled")) {
		json_t *reason = json_object_get(res, "cancel_reason");
		if (compact)
			r = set_err(e, ETCD_E_COMPACTED, "etcd %s: watch canceled: revisions up to %" PRId64 " were compacted",
				    w->ep, compact);
		else
			r = set_err(e, ETCD_E_SERVER, "etcd %s: watch canceled: %s", w->ep,
				    json_is_string(reason) ? json_string_value(reason) : "(no reason)");
		goto out;
	}
	ret->created = get_bool(res, "created");
	json_t *evs = json_object_get(res, "events");
	if (evs && !json_is_array(evs)) {
		r = set_err(e, ETCD_E_PROTO, "etcd %s: watch: \"events\" is not an array", w->ep);
		goto out;
	}
	size_t n = json_array_size(evs);
	ret->ev = calloc(n + 1, sizeof *ret->ev);
	if (!ret->ev) {
		r = set_err(e, ETCD_E_NOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		json_t *ev = json_array_get(evs, i), *type = json_object_get(ev, "type");
		struct etcd_event *d = &ret->ev[i];
		if (!json_is_object(ev) || (type && !json_is_string(type))) {
			r = set_err(e, ETCD_E_PROTO, "etcd %s: watch: a bad event", w->ep);
			goto out;
		}
		/* PUT is the enum's zero, which the gateway leaves out */
		d->type = type && !strcmp(json_string_value(type), "DELETE") ? ETCD_EV_DELETE : ETCD_EV_PUT;
		if ((r = parse_kv(e, json_object_get(ev, "kv"), &d->kv)))
			goto out;
		ret->n++;
	}
	r = 1;
	if (get_bool(res, "fragment") || w->fragmented) {
		r = join_fragment(w, ret, get_bool(res, "fragment"));
		if (r == 0)
			memset(ret, 0, sizeof *ret); /* taken into w->part */
	}
out:
	json_decref(j);
	if (r != 1)
		etcd_watch_resp_free(ret);
	return r;
}

int etcd_watch_next(struct etcd_watch *w, int timeout_ms, int wake_fd, struct etcd_watch_resp *ret)
{
	struct etcd *e = w->e;
	int64_t deadline = etcd_now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
	memset(ret, 0, sizeof *ret);
	for (;;) {
		/* a whole line already received? (the gateway ends each message with \n) */
		while (w->used < w->in.len) {
			char *start = w->in.p + w->used, *nl = memchr(start, '\n', w->in.len - w->used);
			if (!nl)
				break;
			w->used = (size_t)(nl - w->in.p) + 1;
			if (nl == start || (nl == start + 1 && *start == '\r'))
				continue;
			int r = watch_message(w, start, (size_t)(nl - start), ret);
			if (r)
				return r;
		}
		/* keep the buffer small: drop what was parsed */
		if (w->used) {
			memmove(w->in.p, w->in.p + w->used, w->in.len - w->used);
			w->in.len -= w->used;
			w->used = 0;
		}
		if (w->done && w->in.too_big)
			return set_err(e, ETCD_E_PROTO, "etcd %s: watch: a message over %zu MiB", w->ep,
				       ANSWER_MAX >> 20);
		if (w->done) {
			long status = 0;
			curl_easy_getinfo(w->curl, CURLINFO_RESPONSE_CODE, &status);
			if (w->result == CURLE_OK && status != 200 && w->in.len) {
				bool costly;
				int r = 0;
				json_t *j = parse_answer(e, w->ep, "watch", w->in.p, w->in.len, &costly, &r);
				if (costly || r == ETCD_E_NOMEM)
					return r;
				r = j ? server_error(e, w->ep, "watch", status, j)
					  : set_err(e, ETCD_E_PROTO, "etcd %s: watch: HTTP %ld", w->ep, status);
				json_decref(j);
				return r;
			}
			return set_err(e, ETCD_E_UNREACHABLE, "etcd %s: watch: the stream ended: %s", w->ep,
				       w->result == CURLE_OK ? (status == 200 ? "closed by the server" : "no answer")
							     : curl_easy_strerror(w->result));
		}
		int running = 0;
		CURLMcode mc = curl_multi_perform(w->multi, &running);
		if (mc != CURLM_OK)
			return set_err(e, ETCD_E_UNREACHABLE, "etcd %s: watch: %s", w->ep, curl_multi_strerror(mc));
		CURLMsg *m;
		int left;
		while ((m = curl_multi_info_read(w->multi, &left)))
			if (m->msg == CURLMSG_DONE) {
				w->done = true;
				w->result = m->data.result;
			}
		if (w->done || memchr(w->in.p ? w->in.p : "", '\n', w->in.len))
			continue;
		int64_t left_ms = deadline - etcd_now_ms();
		if (left_ms <= 0)
			return 0;
		struct curl_waitfd extra = {.fd = wake_fd, .events = CURL_WAIT_POLLIN};
		int nfds = 0;
		mc = curl_multi_poll(w->multi, wake_fd >= 0 ? &extra : NULL, wake_fd >= 0 ? 1 : 0, (int)left_ms, &nfds);
		if (mc != CURLM_OK)
			return set_err(e, ETCD_E_UNREACHABLE, "etcd %s: watch: %s", w->ep, curl_multi_strerror(mc));
		if (wake_fd >= 0 && (extra.revents & CURL_WAIT_POLLIN))
			return 0;
	}
}
