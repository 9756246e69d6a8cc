/* SPDX-License-Identifier: MIT */
/* The fixture of the generated NULL-argument test (tests/gen-null-calls.py
 * writes the calls, tests/null_calls.c runs them). */
#ifndef SHMCFG_TEST_NULL_CALLS_H
#define SHMCFG_TEST_NULL_CALLS_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "shmcfg.h"

/* What a call may work on, valid; set up in each child before its call. */
struct null_fixture {
	const char *name;        /* the test's segment */
	const char *absent;      /* a name no segment has (create, unlink, orphans) */
	const char *schema_path; /* a schema file */
	shmcfg *h;               /* the segment, read-write */
	shmcfg_snapshot *snap;
	shmcfg_txn *txn;
	shmcfg_patcher *pat;
	shmcfg_history_entry *hist;
	shmcfg_schema *schema;
	shmcfg_cluster_apply *capply; /* with a key of each kind */
	shmcfg_value val;        /* an int, for option `opt` */
	shmcfg_opt opt;          /* an int option; and a bool and a float one */
	shmcfg_opt opt_bool, opt_float;
	void *out;               /* room for any out-parameter, zeroed */
};
extern struct null_fixture fx;

/* One call: 0 if it did what the rule says, 2 if it returned no error
 * where it had to. */
struct null_call {
	const char *fn, *what;
	int must_fail;
	int (*call)(void);
};
extern const struct null_call null_calls[];

#endif
