/* SPDX-License-Identifier: MIT */
/*
 * The cluster's key layout in etcd (doc/cluster.md, "What etcd holds"),
 * declared once for shmctl's cluster commands and shmcfg-sync. Every key
 * of cluster NAME lives under the prefix P = CK_ROOT "NAME/"; a relative
 * key ("rel") is what follows P. The value folders are the library's
 * (shmcfg.h: shmcfg_cluster_apply_key() reads them).
 */
#ifndef SHMCFG_CLUSTER_KEYS_H
#define SHMCFG_CLUSTER_KEYS_H

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shmcfg.h"

#define CK_ROOT "/shmcfg/v1/"
#define CK_OPT SHMCFG_CLUSTER_KEY_OPT   /* opt/<option>: its value as JSON */
#define CK_KNOB SHMCFG_CLUSTER_KEY_KNOB /* knob/<knob>: a knob's value as JSON */
#define CK_HEAD "head"                  /* {"seq", "time_ns", "who"}: the newest audit record */
#define CK_AUDIT "audit/"               /* audit/<seq, 20 digits>: who changed what */
#define CK_STATUS "status/"             /* status/<host>/<segment>: each agent's state, leased */
#define CK_ROSTER "roster/"             /* roster/<host>/<segment>: the hosts expected */
#define CK_SCHEMA "schema/"             /* schema/<schema hash>: a segment's schema file */

/* The agent watches [P CK_WATCH_FROM, P CK_WATCH_END): audit/ < head <
 * knob/ < opt/ sort in that order, and roster/, schema/ and status/ (the
 * other hosts' writes) after it. CK_WATCH_END is just past opt/ ('0'
 * follows '/'). */
#define CK_WATCH_FROM CK_AUDIT
#define CK_WATCH_END "opt0"

/* What follows folder dir in rel (a key of it), or NULL if rel is not in it. */
static inline const char *ck_in(const char *rel, const char *dir)
{
	size_t n = strlen(dir);
	return strncmp(rel, dir, n) ? NULL : rel + n;
}

/* The prefix of a cluster into buf: 0, or -1 if it does not fit. */
static inline int ck_prefix(char *buf, size_t size, const char *cluster)
{
	int n = snprintf(buf, size, CK_ROOT "%s/", cluster);
	return n < 0 || (size_t)n >= size ? -1 : 0;
}

/* The key prefix + dir [+ name [+ "/" + name2]] (prefix "": relative),
 * malloc'd; NULL if out of memory. */
static inline char *ck_key(const char *prefix, const char *dir, const char *name, const char *name2)
{
	char *k;
	if (asprintf(&k, "%s%s%s%s%s", prefix, dir, name ? name : "", name2 ? "/" : "", name2 ? name2 : "") < 0)
		return NULL;
	return k;
}

/* The relative key of audit record seq into buf (at least CK_AUDIT_SIZE). */
#define CK_AUDIT_SIZE (sizeof CK_AUDIT + 20)
static inline void ck_audit(char *buf, size_t size, uint64_t seq)
{
	snprintf(buf, size, CK_AUDIT "%020" PRIu64, seq);
}

/* The value of CK_SCHEMA <schema hash>, as `shmctl schema` prints it: the
 * segment's schema file (the library's writer), malloc'd. 0, or a library
 * error / -ENOMEM. */
static inline int ck_schema_text(const shmcfg *h, char **text)
{
	uint8_t hash[16];
	char comment[400], *c = comment;
	shmcfg_schema_hash(h, hash);
	c += snprintf(c, 300, "Written by shmctl from segment \"%.255s\", schema hash ", shmcfg_name(h));
	for (int i = 0; i < 16; i++)
		c += snprintf(c, 3, "%02x", hash[i]);
	strcpy(c, ".");
	shmcfg_schema *s = NULL; /* shmcfg_schema_of sets it only on success */
	int r = shmcfg_schema_of(h, &s);
	if (!r)
		r = shmcfg_schema_write_yaml(s, comment, text);
	shmcfg_schema_free(s);
	return r;
}

#endif
