/* SPDX-License-Identifier: MIT */
/*
 * A small client of etcd v3's JSON gateway (the grpc-gateway etcd 3.4 serves
 * itself on its client URLs: POST /v3/kv/range, /v3/kv/txn, /v3/lease/...,
 * and the streamed /v3/watch), over libcurl, with jansson for the JSON.
 * Keys and values are bytes (the gateway base64-encodes them; this module
 * hides that). Shared by shmctl's `cluster` commands and shmcfg-sync.
 *
 * Endpoints: a comma-separated list of `http://HOST:PORT` or `unix:PATH`
 * (etcd's unix-socket listener, e.g. --listen-client-urls unix://NAME:1 makes
 * the socket file `NAME:1` in etcd's working directory). A request goes to
 * the endpoint that last answered and falls over to the next on a transport
 * error or a transient answer (ETCD_E_UNAVAILABLE: no leader, leader
 * changed, a server-side timeout), unless the client is pinned to one
 * endpoint (etcd_pin: shmcfg-sync checks the member its watch is on).
 *
 * Every function returns 0 or a negative error (ETCD_E_*), and leaves a
 * one-line message for etcd_errmsg() naming what failed (the endpoint, the
 * request, etcd's own error text).
 */
#ifndef SHMCFG_ETCD_H
#define SHMCFG_ETCD_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
	ETCD_E_UNREACHABLE = -1001, /* no endpoint answered (connect, timeout) */
	ETCD_E_PROTO = -1002,       /* an answer that is not what the gateway sends */
	ETCD_E_SERVER = -1003,      /* etcd answered with an error (message says which) */
	ETCD_E_COMPACTED = -1004,   /* the revision asked for was compacted */
	ETCD_E_TOO_MANY_OPS = -1005, /* a txn over etcd's --max-txn-ops */
	ETCD_E_ARG = -1006,         /* bad endpoint text or argument */
	ETCD_E_NOMEM = -1007,
	ETCD_E_UNAVAILABLE = -1008, /* etcd answered, but cannot serve now (no leader, leader
				     * changed, timed out, overloaded): a later try may succeed */
	ETCD_E_CANCELED = -1009,    /* the cancel flag was set (etcd_set_cancel) */
};

/* Whether an error may go away by itself (a retry, another endpoint): the
 * transport's and etcd's transient answers. A write that failed so may
 * still have been applied: a writer that retries checks. */
static inline bool etcd_transient(int r)
{
	return r == ETCD_E_UNREACHABLE || r == ETCD_E_UNAVAILABLE;
}

struct etcd; /* a client; not shared between threads */

/* A key-value pair as etcd returns it. */
struct etcd_kv {
	char *key;       /* NUL-terminated after key_len bytes */
	size_t key_len;
	char *value;     /* NUL-terminated after value_len bytes */
	size_t value_len;
	int64_t create_rev, mod_rev, version, lease;
};

struct etcd_kvs {
	struct etcd_kv *kv;
	size_t n;
	int64_t revision; /* the store's revision the answer was read at */
};

int etcd_open(const char *endpoints, int timeout_ms, struct etcd **ret);
void etcd_close(struct etcd *e);
/* The last error's one-line message (never NULL). */
const char *etcd_errmsg(const struct etcd *e);
/* The endpoint list as given (for messages and for recording it). */
const char *etcd_endpoints(const struct etcd *e);
/* How many endpoints; the text of one; the one that last answered. */
size_t etcd_nendpoints(const struct etcd *e);
const char *etcd_endpoint(const struct etcd *e, size_t i);
size_t etcd_current(const struct etcd *e);
/* Send every request to endpoint i only, with no fail-over (i < n), or to
 * all of them again (i == SIZE_MAX); i also becomes the current one. */
void etcd_pin(struct etcd *e, size_t i);
/* The time one request may take (connect included), in ms. */
void etcd_set_timeout(struct etcd *e, int timeout_ms);
/* CLOCK_MONOTONIC in ms, the clock of etcd_set_deadline(). */
int64_t etcd_now_ms(void);
/* A time (etcd_now_ms()) by which whatever the client does must end: a
 * request, and a range with all its pages, fails past it with
 * ETCD_E_UNREACHABLE (transient, as a request timing out); 0: none, each
 * request is bounded by the timeout alone. */
void etcd_set_deadline(struct etcd *e, int64_t deadline_ms);
/* A flag (a signal handler's) that stops a request or range in progress
 * once it is nonzero: it fails with ETCD_E_CANCELED. NULL: none. */
void etcd_set_cancel(struct etcd *e, const volatile sig_atomic_t *flag);

/* One key (prefix false), or every key that starts with key (prefix true),
 * at revision rev (0: the newest). Ranges are read in pages at one
 * revision, so that no answer-size cap stops a large one; a range of more
 * than 16M keys or 256 MiB of keys and values is refused (ETCD_E_PROTO). */
int etcd_get(struct etcd *e, const char *key, bool prefix, int64_t rev, struct etcd_kvs *ret);
/* Every key in [key, range_end) at revision rev (0: the newest). */
int etcd_range(struct etcd *e, const char *key, const char *range_end, int64_t rev, struct etcd_kvs *ret);
void etcd_kvs_free(struct etcd_kvs *kvs);
/* The end of a prefix's range (the prefix with its last byte that is not
 * 0xff incremented), malloc()ed; NULL on ENOMEM. */
char *etcd_prefix_end(const char *prefix);

/* A transaction: if every compare holds, every op runs, atomically. */
struct etcd_cmp {
	const char *key;
	int64_t mod_rev; /* compare: the key's mod_revision equals this (0: absent) */
};
struct etcd_op {
	enum { ETCD_OP_PUT, ETCD_OP_DELETE } kind;
	const char *key;
	const char *value; /* PUT */
	size_t value_len;
	int64_t lease;     /* PUT: 0 none */
};
int etcd_txn(struct etcd *e, const struct etcd_cmp *cmps, size_t ncmps, const struct etcd_op *ops, size_t nops,
	     bool *succeeded, int64_t *revision);

int etcd_put(struct etcd *e, const char *key, const char *value, size_t value_len, int64_t lease, int64_t *revision);
int etcd_delete(struct etcd *e, const char *key, bool prefix, int64_t *revision);
int etcd_compact(struct etcd *e, int64_t rev);

/* The member's own view (answered without the leader): *leader is the
 * leader's member ID, 0 while it knows none. */
int etcd_member_status(struct etcd *e, uint64_t *leader);

int etcd_lease_grant(struct etcd *e, int ttl_s, int64_t *id);
/* One keepalive; *ttl 0 if the lease has expired (grant a new one). */
int etcd_lease_keepalive(struct etcd *e, int64_t id, int64_t *ttl);

/*
 * A watch of [key, range_end) from revision start_rev on its own connection
 * (the streamed POST /v3/watch), read without blocking the caller longer
 * than it asks: etcd_watch_next() waits at most timeout_ms for the next
 * response. No liveness check of its own: a stream that goes quiet is
 * indistinguishable from a store nobody writes, so the caller checks the
 * server on another connection (shmcfg-sync: the lease keepalive).
 */
struct etcd_watch;

enum { ETCD_EV_PUT = 0, ETCD_EV_DELETE = 1 };
struct etcd_event {
	int type;          /* ETCD_EV_PUT, ETCD_EV_DELETE */
	struct etcd_kv kv; /* a delete: key and mod_rev (the deletion's revision) only */
};
/* One watch response: events in revision order; those of one revision are
 * never split across responses (etcd sends a revision's events together). */
struct etcd_watch_resp {
	struct etcd_event *ev;
	size_t n;
	int64_t revision; /* the header's: the store's revision when sent */
	bool created;     /* the response that confirms the watch */
};

/* Opens the stream; the first response (created) arrives through
 * etcd_watch_next(). Uses the endpoint of e that last answered. */
int etcd_watch_open(struct etcd *e, const char *key, const char *range_end, int64_t start_rev,
		    struct etcd_watch **ret);
/*
 * Waits at most timeout_ms for one response. Returns 1 (a response in *ret,
 * for etcd_watch_resp_free()), 0 (none in time, or wake_fd became readable;
 * -1: no wake_fd), ETCD_E_COMPACTED (start_rev was compacted: reload),
 * ETCD_E_UNREACHABLE (the stream ended or broke), ETCD_E_SERVER,
 * ETCD_E_PROTO. Messages go to etcd_errmsg() of the client it was opened on.
 */
int etcd_watch_next(struct etcd_watch *w, int timeout_ms, int wake_fd, struct etcd_watch_resp *ret);
void etcd_watch_resp_free(struct etcd_watch_resp *r);
void etcd_watch_close(struct etcd_watch *w);

#endif
