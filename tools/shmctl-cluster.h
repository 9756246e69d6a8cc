/* SPDX-License-Identifier: MIT */
/*
 * shmctl cluster (doc/cluster.md), in three files that depend one way:
 * tools/shmctl-cluster.c, the writes (set, reset, rollback: one audited
 * transaction each) and --wait; tools/shmctl-cluster-view.c, what is read
 * (show, log, diff, status, forget); both call tools/shmctl-cluster-util.c,
 * what they share: the arguments, the connection to etcd and its retries,
 * keys and bytes as text, the roster of expected hosts and --wait=all.
 */
#ifndef SHMCFG_SHMCTL_CLUSTER_H
#define SHMCFG_SHMCTL_CLUSTER_H
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "cluster-conf.h"
#include "cluster-keys.h"
#include "etcd.h"
#include "shmctl.h"

/* Every option of every subcommand; each takes those of its entry of the
 * command table (tools/shmctl.c). */
struct args {
	const char *endpoints, *cluster, *reason, *schema;
	bool json, force, knob, wait, wait_all;
	double wait_s, timeout_s;
};


/* An open cluster: this host's segment, if it has one, the etcd client,
 * the prefix, and the retrying of transient errors. */
struct cl {
	const char *seg;
	shmcfg *h;              /* the segment NAME here (read-only); NULL if this host has none */
	shmcfg *sh;             /* the schema values are checked against: h, or a private segment
				 * of --schema FILE or of the schema kept in etcd (cl_schema) */
	struct etcd *e;
	const char *cluster;
	char prefix[128];
	struct cluster_conf conf;
	double start, deadline; /* CLOCK_MONOTONIC s: retries end at the deadline */
	int ntransient;         /* transient errors so far */
	char last_err[600];     /* the last one's message */
};

/* Parse the options of the running subcommand (next_opt); the positionals
 * are argv[optind..]. 0, or -1 with *ec. */
int parse_args(int argc, char **argv, struct args *a, int *ec);
/* Opens the client; the segment NAME if this host has it. 0 or EXIT_FAIL (printed). */
int cl_open(const struct args *a, const char *seg, bool write, struct cl *c);
/* c->sh: the schema to check values against (see struct cl). 0 or EXIT_FAIL;
 * not needed: 0 with c->sh NULL where etcd keeps none. */
int cl_schema(struct cl *c, const struct args *a, bool needed);
void cl_close(struct cl *c);
double mono_now(void);
/* Before an etcd request: its timeout, and the deadline of all it does. */
void req_timeout(struct cl *c);
/* After a transient error: a jittered wait and true, or false past the deadline. */
bool backoff(struct cl *c);
uint64_t now_ns(void);
int fail_etcd_note(const struct cl *c, int r, const char *note);
int fail_etcd(const struct cl *c, int r);
/* etcd_get, retrying transient errors until the deadline. 0 or the error. */
int get_retry(struct cl *c, const char *key, bool prefix, int64_t rev, struct etcd_kvs *kvs);
/* P + rel (malloc'd); a key of a range under P, without P. */
char *key_of(const struct cl *c, const char *rel);
const char *rel_of(const struct cl *c, const struct etcd_kv *kv);
/* ... its bytes: a key may hold a NUL (term_escaped() shows it as \x00) */
size_t rel_len(const struct cl *c, const struct etcd_kv *kv);
/* Every key under P + rel. 0 or EXIT_FAIL (printed). */
int range(struct cl *c, const char *rel, struct etcd_kvs *kvs);
/* Bytes from etcd: as JSON. (As text: term_escaped(), termsafe.h.) */
json_t *parse_bytes(const char *p, size_t n, json_error_t *err);
char *json_text(const json_t *j);
json_int_t jint(const json_t *o, const char *k, json_int_t dflt);
char *jstr(const json_t *o, const char *k);
/* An audit record's number (cluster rollback, diff): 0, or EXIT_FAIL (printed). */
int seq_arg(const char *text, uint64_t *seq);
/* "opt/x" -> "x", "knob/k" -> "knob k" */
const char *label(const char *rel, char *buf, size_t len);

/* The roster (P roster/HOST/SEGMENT) as a JSON object "HOST/SEGMENT": true. */
json_t *roster_of(const struct cl *c, const struct etcd_kvs *ro);
/* --wait=all: until every host of the roster has applied revision rev
 * (none of keys[0..nkeys) rejected), or names those that have not. */
int wait_all(struct cl *c, int64_t rev, double secs, const char *const *keys, size_t nkeys);

#endif
