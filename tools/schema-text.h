/* SPDX-License-Identifier: MIT */
/* A segment's schema as a schema file (tools/schema-text.c). */
#ifndef SHMCFG_SCHEMA_TEXT_H
#define SHMCFG_SCHEMA_TEXT_H
#include <shmcfg.h>

/* The schema file (YAML, format 1, malloc()ed) that loads back to the
 * segment's schema hash. 0, or a library error / -ENOMEM. */
int schema_text(const shmcfg *h, char **ret);
#endif
