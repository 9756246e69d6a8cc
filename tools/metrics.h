/* SPDX-License-Identifier: MIT */
/*
 * Segments' state as Prometheus metrics (the text exposition format 0.0.4,
 * which node_exporter's textfile collector reads too): written by
 * `shmctl stat --format prometheus` and by shmcfg-sync's --metrics-file,
 * from the same code. Every sample carries a segment="NAME" label.
 */
#ifndef SHMCFG_METRICS_H
#define SHMCFG_METRICS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "shmcfg.h"

/* A running agent rewrites its sync record every second (shmcfg-sync's
 * tick): one that stopped moving for this long belongs to an agent that
 * hangs (shmctl stat calls it stale). */
#define SYNC_STALE_NS (10 * 1000000000ull)

/* Whether the agent of a sync record runs: its claim on the segment (held
 * while it runs, shmcfg_sync_claim), or, for those who cannot open the lock
 * object to tell, its pid (in the agent's pid namespace: a process
 * elsewhere may not see it). */
bool sync_agent_alive(const shmcfg *h, const shmcfg_sync_info *s);
/* Whether the record stopped moving (at CLOCK_REALTIME now_ns). */
bool sync_stale(const shmcfg_sync_info *s, uint64_t now_ns);
/* In sync: the agent runs, answers (its record moves), and says so. */
bool sync_in_sync(bool alive, bool stale, const shmcfg_sync_info *s);

/* The agent's own counters, for the segments it syncs (shmcfg-sync). */
struct agent_metrics {
	bool etcd_up;            /* the member it watches answers */
	uint64_t out_of_sync_ns; /* CLOCK_REALTIME since when etcd does not answer; 0 */
	uint64_t start_ns;       /* CLOCK_REALTIME of its start */
	uint64_t etcd_errors;    /* etcd errors (a failed load or watch, a member silent) */
	uint64_t loads;          /* loads of the whole prefix: the first, then each reload */
	uint64_t watch_rev;      /* the newest revision of the prefix it received */
	/* of this segment: */
	uint64_t applied;        /* revisions committed */
	uint64_t apply_errors;   /* commits that failed (each try) */
};

/* One segment's metrics. */
struct seg_metrics {
	const char *name;
	bool up;                 /* read: what follows is filled */
	uint64_t now_ns;         /* CLOCK_REALTIME when read */
	shmcfg_info info;
	uint32_t waiters;
	uint32_t readers_used;   /* reader entries in use now */
	uint64_t history_oldest; /* the oldest generation the history has */
	uint64_t cluster_rev;
	bool have_sync;          /* an agent recorded itself: sync, alive, stale */
	shmcfg_sync_info sync;
	bool alive, stale;
	const struct agent_metrics *agent; /* the agent's file: its own counters */
};

/* Reads a segment's metrics (m->name is name; m->up false and the library's
 * error returned if it cannot be read). */
int metrics_read(shmcfg *h, const char *name, struct seg_metrics *m);
/* Writes the metrics of n segments, family by family (the format wants
 * each family's samples together). Returns what ferror says. */
int metrics_write(FILE *f, const struct seg_metrics *m, size_t n);

#endif
