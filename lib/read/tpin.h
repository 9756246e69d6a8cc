/* SPDX-License-Identifier: MIT */
/*
 * A thread's sticky pin, as the library keeps it (tpin.c has the
 * argument; its fast paths are inline in shmcfg/read.h).
 */
#ifndef SHMCFG_TPIN_H
#define SHMCFG_TPIN_H

#include "internal.h"

#include <stddef.h>

/* a count that nears PIN_COUNT_MASK: the snapshot copies instead (the
 * margin covers other threads' increments in flight) */
#define PIN_COUNT_LIMIT (PIN_COUNT_MASK / 2)

/* the revocation word's bits: a writer's, a fork's (tpin.c) */
#define TP_BY_WRITER 1u
#define TP_BY_FORK 2u

/* One thread's pin on one handle: a thread entry of the reader table. */
struct tpin {
	struct shmcfg__tpin pub; /* first: what the inline paths read (shmcfg/read.h) */
	/* the owner's view of its entry's generation (SHMCFG__TPIN_SNAP),
	 * rewritten by the owner only while it holds no snapshot (reclaim.c) */
	struct shmcfg_snapshot view;
	const void *owner;       /* the owner thread's &shmcfg__tls_pin (atomic); NULL: it exited */
	shmcfg *h;
	uint32_t entry;
	unsigned close_token; /* 1: a close waits for this pin's release; 3: a releaser checks; 2: taken */
	struct tpin *next;    /* the process's pins in use, or free (tpin.c: tp_lock) */
};

_Static_assert(offsetof(struct tpin, view) == sizeof(struct shmcfg__tpin), "SHMCFG__TPIN_SNAP finds the view");

/* A pin word's tag part, and the word with count n */
static inline uint64_t tp_word(uint64_t w, uint64_t n)
{
	return (w & ~(uint64_t)0xffff) | (n & PIN_COUNT_MASK);
}

/* tpin.c */
struct tpin *shmcfg__tpin_of(shmcfg *h);
int shmcfg__tpin_more(struct tpin *tp, const shmcfg *h);
void shmcfg__tpin_cache(struct tpin *tp);
void shmcfg__tpin_set(struct tpin *tp, uint64_t word, uint64_t foreign);
shmcfg *shmcfg__tpin_release_slow(struct tpin *tp);
shmcfg *shmcfg__tpin_closing(struct tpin *tp);

#endif
