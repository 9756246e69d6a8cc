/* SPDX-License-Identifier: MIT */
/*
 * Where the cluster tools (shmctl cluster, shmcfg-sync) find etcd and the
 * cluster's name (issue 22): each of the two from its flag, else the
 * environment ($SHMCFG_ETCD_ENDPOINTS, $SHMCFG_CLUSTER), else the
 * configuration file /etc/shmcfg/cluster.conf ($SHMCFG_CLUSTER_CONF names
 * another, for tests and users without root):
 *
 *   # comments and blank lines
 *   endpoints = http://10.0.0.1:2379,http://10.0.0.2:2379
 *   cluster = trainers
 *
 * Never from a segment: a segment's agent record can be rewritten by any
 * process that may write the segment. The file is trusted only if it is a
 * regular file owned by root or by the caller and not writable by group or
 * others; it is read only when a flag or the environment leaves something
 * open.
 */
#ifndef SHMCFG_CLUSTER_CONF_H
#define SHMCFG_CLUSTER_CONF_H

#include <stdbool.h>
#include <stddef.h>

#define CLUSTER_CONF_PATH "/etc/shmcfg/cluster.conf"

enum {
	CLUSTER_CONF_MISSING = 1, /* endpoints or cluster given nowhere (usage) */
	CLUSTER_CONF_BAD = -1,    /* a file refused, a bad line, a bad cluster name */
};

struct cluster_conf {
	char *endpoints, *cluster; /* malloc'd */
	/* where each came from, for messages: "--endpoints", "SHMCFG_CLUSTER",
	 * "/etc/shmcfg/cluster.conf:3" */
	char endpoints_from[1040], cluster_from[1040];
	char file[1024]; /* the file it reads (or would have) */
};

/* A cluster's or a host's name, one element of the key prefix: 1-63 bytes
 * (the agent record's fields) of UTF-8 (every cluster command's JSON and
 * the agent's roster carry it), no '/', space or control character. */
bool key_element_ok(const char *s);

/*
 * Resolve both. flag_* NULL: not given. 0 with both set; else
 * CLUSTER_CONF_MISSING or CLUSTER_CONF_BAD with one line in err (no program
 * name, no newline) naming what was wrong, and *ret holding nothing to
 * free. The cluster name is checked (key_element_ok()), naming where it
 * came from.
 */
int cluster_conf(const char *flag_endpoints, const char *flag_cluster, struct cluster_conf *ret, char *err,
		 size_t errlen);
void cluster_conf_free(struct cluster_conf *c);

#endif
