/* SPDX-License-Identifier: MIT */
/*
 * The schema builder's private types, shared by schema.c (declaring options)
 * and schema_build.c (laying them out in a segment).
 */
#ifndef SHMCFG_SCHEMA_H
#define SHMCFG_SCHEMA_H

#include "internal.h"

/* One declared option, parsed. */
struct sopt {
	char *name, *doc, *knob, *deprecated, *alias, *implies;
	shmcfg_type type;
	unsigned flags;
	shmcfg_value def, min, max, choices, env_default, env_force;
	bool has_def; /* a default was declared: the writer of schema files writes it */
	uint32_t line; /* of its declaration in the schema file, 0 if none */
};

struct shmcfg_schema {
	struct sopt *opts;
	uint32_t n, cap;
	uint32_t *byname; /* open-addressing hash of names -> id + 1 (0 = empty) */
	uint32_t byname_size;
	char *file; /* the schema file read (its label), or NULL: see sopt.line */
};

uint64_t shmcfg__name_hash(const char *s, size_t len);
int shmcfg__schema_find(const shmcfg_schema *s, const char *name);
char *shmcfg__implies_item(char **rest);

#endif
