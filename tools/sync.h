/* SPDX-License-Identifier: MIT */
/*
 * shmcfg-sync's parts (tools/shmcfg-sync.c has the agent's design):
 *   sync-apply.c  the mirror of the prefix's keys, and their application to
 *                 a segment (all of it, a load, or one revision's keys)
 *                 through the library's shmcfg_cluster_apply_*; the
 *                 segment's rejections and overrides
 *   sync-probe.c  the helper threads: the liveness probe of the member the
 *                 watch is on, and the lease and status keys
 *   shmcfg-sync.c the main loop: load, watch, fail-over, the sync record
 */
#ifndef SHMCFG_SYNC_H
#define SHMCFG_SYNC_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "etcd.h"
#include "kmap.h"
#include "shmcfg.h"

enum {
	STATUS_REJECTED_MAX = 32, /* rejections listed in a status key (all are counted) */
	STATUS_VALUE_MAX = 256,   /* bytes of an override's value shown there (a status
				   * key must stay far below etcd's request limit) */
	SCHEMA_KEPT_MAX = 1 << 20, /* a schema text bigger than this is not kept in etcd
				    * (etcd refuses requests over 1.5 MiB by default) */
};

void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
uint64_t now_ns(clockid_t c);
/* bytes from etcd made printable ASCII (\xHH for the rest), for logs and JSON */
void printable(const char *in, char *out, size_t size);

/* ---- the mirror: the prefix's opt/, knob/ and head keys ---- */

struct mentry {
	struct kent k;  /* k.key: relative to the prefix ("opt/NAME", "knob/NAME", "head") */
	char *value;
	size_t value_len;
	int64_t mod_rev;
};

struct mirror {
	struct kmap map;
	/* opt/ and knob/ keys with a NUL byte, escaped (nul_key() of
	 * shmcfg-sync.c; values NULL): they name nothing, and every segment
	 * rejects them */
	struct kmap bad;
};

struct mentry *mirror_get(const struct mirror *m, const char *key);
/* Takes value (malloc()ed) over, also on -ENOMEM; copies the key. */
int mirror_put(struct mirror *m, const char *key, char *value, size_t len, int64_t mod_rev);
void mirror_delete(struct mirror *m, const char *key);
void mirror_clear(struct mirror *m);
/* A key of m->bad (copied): 0 or -ENOMEM; its deletion. */
int mirror_bad_put(struct mirror *m, const char *key);
void mirror_bad_delete(struct mirror *m, const char *key);

/* A key changed by a revision. */
struct kchange {
	const char *key; /* relative; the mirror holds its new value unless deleted */
	bool deleted;
};

/* ---- a segment the agent keeps ---- */

/* A key this host refuses, and why. */
struct reject {
	struct kent k;
	char *why;
};

/* The options that declare a knob, by knob name (for the overrides: the
 * library's apply step finds them itself). */
struct knob_opts {
	struct kent k;
	shmcfg_opt *opts;
	size_t n;
};

struct seg {
	const char *name;
	shmcfg *h;
	char *status_key;
	struct kmap knobs;     /* struct knob_opts */
	struct kmap rejects;   /* struct reject, in the order they arose */
	struct kmap *prev_rejects; /* during a load: the rejections before it */
	uint64_t applied_rev;
	uint64_t generation;
	char hash[33];
	uint64_t heap_bytes, heap_used;
	char error[256];       /* the last apply's error, "" if none */
	uint64_t failing_since; /* CLOCK_REALTIME of the first failed apply in a row; 0: none */
	bool need_full;        /* a commit failed: its keys are not in; the next apply is a whole one */
	bool rebase;           /* etcd was replaced: the next load's revision may be below the segment's */
	bool status_dirty;     /* the status key needs a put */
	bool status_urgent;    /* ... at once: whether it is in sync changed */
	bool claimed;          /* this agent holds the segment's claim (shmcfg_sync_claim) */
	struct kmap overrides; /* struct override: cluster values a local layer hides, by option */
	uint64_t ov_gen;       /* the generation at which every cluster key was last looked at */
	char schema_hash[33];  /* the segment's, hex: its schema is kept in etcd under it */
	uint64_t napplied;     /* revisions committed (--metrics-file) */
	uint64_t nfailed;      /* commits that failed, each try (--metrics-file) */
};

int seg_index_knobs(struct seg *s);
/* A segment removed or replaced (shmctl create --force): the agent attaches
 * the one now of that name, claims it, and applies the whole mirror to it
 * (need_full). 0 (not replaced), 1 (followed), or an error (recorded in
 * s->error: out of sync until a segment of that name can be attached and
 * claimed). */
int seg_follow(struct seg *s);
void seg_free(struct seg *s);
/* Applies the whole mirror (a load, or a reload): every option's cluster
 * layer and every knob layer the cluster feeds or fed, as one commit (also
 * when nothing changes, if rev is new to the segment: its revision shows).
 * at: the revision the mirror was read at (a segment carrying one up to it
 * is tagged with its own: the library refuses an older one). */
void apply_all(struct seg *s, const struct mirror *m, int64_t rev, int64_t at);
/* Applies the keys one revision changed, as one commit (always: one
 * revision, one commit). Not after a failed commit (need_full): the caller
 * applies it all then. */
void apply_revision(struct seg *s, const struct mirror *m, const struct kchange *ch, size_t n, int64_t rev,
		    const char *who);
/* A key of the mirror's bad ones put (rejected: its reason says why) or
 * deleted (its rejection goes). */
void seg_bad_key(struct seg *s, const char *key, bool deleted);
/* The segment's applied revision, generation, hash and heap, re-read. */
void seg_refresh(struct seg *s);

/* A cluster value (an option's cluster layer, or a knob layer the cluster
 * wrote) that a local layer above it hides: the status key names each, so
 * that cluster status shows the host differs even where the config hash
 * cannot (hash-ignored options). */
struct override {
	struct kent k;        /* the option's name */
	shmcfg_source layer;  /* the layer that wins */
	char *value;          /* the value it gives, as JSON */
};
/* Looks again at the options the keys ch[0..n) feed (ch NULL: every key of
 * the mirror, and ov_gen set); status_dirty if what is overridden changed. */
void seg_overrides(struct seg *s, const struct mirror *m, const struct kchange *ch, size_t n);
/* The segment's schema hash into s->schema_hash; *text its schema file when
 * the hash is new (malloc()ed), else NULL. 0 or an error. */
int seg_schema(struct seg *s, char **text);

/* ---- the helper threads (sync-probe.c) ---- */

struct probe {
	pthread_t liveness, leaser;
	int nthreads;            /* started */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	/* under mu: */
	bool stop;
	size_t member;           /* the endpoint the watch is on */
	uint64_t last_ok;        /* CLOCK_MONOTONIC of its last answer with a leader */
	uint64_t last_answer;    /* ... of its last answer (an election leaves it none for a while) */
	char err[512];           /* why the last probe failed, "" if it answered */
	char **status;           /* per segment: a status text to put, or NULL */
	bool urgent;             /* one of them is to be put at once */
	char **schema_key, **schema_text; /* per segment: its schema, to keep in etcd */
	bool reg_due;            /* the roster entries and schemas are to be put if absent */
	size_t nsegs;
	/* the main loop's, read-only here: */
	char **roster_key, **roster_val; /* per segment: this host in the cluster's roster */
	/* each thread's own: */
	struct etcd *le;         /* the liveness probe's, pinned to member */
	struct etcd *se;         /* the lease thread's */
	char **status_key;
	int64_t lease;
};

int probe_start(struct probe *p, const char *endpoints, char **status_keys, char **roster_keys, char **roster_vals,
		size_t nsegs);
void probe_stop(struct probe *p);
/* Probe member i from now on (the watch moved there): its grace starts now. */
void probe_member(struct probe *p, size_t i);
/* Hands a status text (malloc()ed) over for a put: at once (urgent), or
 * with the next keepalive (a burst of revisions makes one put a second). */
void probe_status(struct probe *p, size_t seg, char *text, bool urgent);
/* Hands a segment's schema (key and text, malloc()ed) over: put at once if
 * etcd has no key of that name (schemas are kept by hash). */
void probe_schema(struct probe *p, size_t seg, char *key, char *text);
/* How long ago (ms) the member last answered with a leader (and, in
 * *unanswered_ms, answered at all), and the failure if any. */
uint64_t probe_silence_ms(struct probe *p, uint64_t *unanswered_ms, char *err, size_t errlen);

#endif
