/*
 * The liveness probe of shmcfg-sync (tools/sync.h): a thread of its own, on
 * a client of its own pinned to the member the watch is on, so that
 *  - a member that hangs behind a live watch (stopped, cut off from this
 *    host, or from the quorum) is noticed: the keepalive goes to that
 *    member, never to another one that would answer for it (issue 22);
 *  - the main loop never waits for etcd to answer a keepalive or a status
 *    put: a stopped leader, whose election stalls every keepalive for a
 *    second or two, stalls no revision that the watch delivers.
 * The status keys live under a lease (LEASE_TTL_S) that the probe keeps
 * alive every PROBE_EVERY_MS, and puts when the main loop hands new text.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sync.h"

enum {
	PROBE_EVERY_MS = 1000,   /* a keepalive a second */
	PROBE_TIMEOUT_MS = 3000, /* a member that has not answered in 3 s is not answering */
	LEASE_TTL_S = 10,        /* the status keys outlive a missed keepalive or two */
	STATUS_EVERY_MS = 50,    /* a burst of revisions makes a put each 50 ms, not one a revision */
};

/* Puts the status texts handed over (all: every segment's last one, after
 * a new lease). */
static int put_status(struct probe *p, bool all, char **last)
{
	for (size_t i = 0; i < p->nsegs; i++) {
		pthread_mutex_lock(&p->mu);
		char *text = p->status[i];
		p->status[i] = NULL;
		pthread_mutex_unlock(&p->mu);
		if (text) {
			free(last[i]);
			last[i] = text;
		} else if (!all || !last[i]) {
			continue;
		}
		int r = etcd_put(p->e, p->status_key[i], last[i], strlen(last[i]), p->lease, NULL);
		if (r) {
			/* again on the next round */
			pthread_mutex_lock(&p->mu);
			if (!p->status[i]) {
				p->status[i] = last[i];
				last[i] = NULL;
			}
			pthread_mutex_unlock(&p->mu);
			return r;
		}
	}
	return 0;
}

static void deadline_in(struct timespec *t, int ms)
{
	clock_gettime(CLOCK_MONOTONIC, t);
	t->tv_sec += ms / 1000;
	t->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (t->tv_nsec >= 1000000000L) {
		t->tv_sec++;
		t->tv_nsec -= 1000000000L;
	}
}

/* Every PROBE_EVERY_MS a keepalive (or a new lease), and the status texts
 * as they are handed over; any answer of the member counts as its life. */
static void *probe_main(void *arg)
{
	struct probe *p = arg;
	char **last = calloc(p->nsegs, sizeof *last); /* the texts put last: put again under a new lease */
	uint64_t next_keepalive = 0, next_put = 0;
	pthread_mutex_lock(&p->mu);
	while (!p->stop) {
		size_t member = p->member;
		bool pending = false;
		for (size_t i = 0; i < p->nsegs && !pending; i++)
			pending = p->status[i] != NULL;
		uint64_t now = now_ns(CLOCK_MONOTONIC);
		bool keep = now >= next_keepalive;
		if (!keep && (!pending || now < next_put)) {
			uint64_t wake = pending && next_put < next_keepalive ? next_put : next_keepalive;
			struct timespec until;
			deadline_in(&until, (int)((wake - now) / 1000000) + 1);
			pthread_cond_timedwait(&p->cv, &p->mu, &until);
			continue;
		}
		next_put = now + STATUS_EVERY_MS * 1000000ull;
		pthread_mutex_unlock(&p->mu);
		etcd_pin(p->e, member);
		int r = 0;
		bool all = false;
		if (keep) {
			next_keepalive = now + PROBE_EVERY_MS * 1000000ull;
			int64_t ttl = 0;
			r = p->lease ? etcd_lease_keepalive(p->e, p->lease, &ttl) : 0;
			if (!r && ttl <= 0) {
				r = etcd_lease_grant(p->e, LEASE_TTL_S, &p->lease);
				all = true;
			}
		}
		if (!r)
			r = last ? put_status(p, all, last) : ETCD_E_NOMEM;
		pthread_mutex_lock(&p->mu);
		if (member == p->member) { /* a result about the member still probed */
			if (!r) {
				p->last_ok = now_ns(CLOCK_MONOTONIC);
				p->err[0] = 0;
			} else {
				snprintf(p->err, sizeof p->err, "%s", etcd_errmsg(p->e));
				if (!keep) /* a failed put: not again before the next keepalive */
					next_keepalive = now_ns(CLOCK_MONOTONIC);
			}
		}
		if (r && !p->stop && member == p->member) {
			/* the member failed: wait for the next round (or a new member) */
			struct timespec until;
			uint64_t t = now_ns(CLOCK_MONOTONIC);
			deadline_in(&until, next_keepalive > t ? (int)((next_keepalive - t) / 1000000) + 1 : PROBE_EVERY_MS);
			pthread_cond_timedwait(&p->cv, &p->mu, &until);
			next_keepalive = 0;
		}
	}
	pthread_mutex_unlock(&p->mu);
	for (size_t i = 0; last && i < p->nsegs; i++)
		free(last[i]);
	free(last);
	return NULL;
}

int probe_start(struct probe *p, const char *endpoints, char **status_keys, size_t nsegs)
{
	pthread_condattr_t ca;
	memset(p, 0, sizeof *p);
	p->nsegs = nsegs;
	p->status_key = status_keys;
	p->last_ok = now_ns(CLOCK_MONOTONIC);
	if (!(p->status = calloc(nsegs, sizeof *p->status)))
		return -ENOMEM;
	int r = etcd_open(endpoints, PROBE_TIMEOUT_MS, &p->e);
	if (r)
		return r;
	pthread_mutex_init(&p->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->cv, &ca);
	pthread_condattr_destroy(&ca);
	if ((r = pthread_create(&p->thread, NULL, probe_main, p))) {
		pthread_cond_destroy(&p->cv);
		pthread_mutex_destroy(&p->mu);
		return -r;
	}
	return 0;
}

void probe_stop(struct probe *p)
{
	if (!p->e)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = true;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
	pthread_join(p->thread, NULL);
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->mu);
	for (size_t i = 0; i < p->nsegs; i++)
		free(p->status[i]);
	free(p->status);
	etcd_close(p->e);
	p->e = NULL;
}

void probe_member(struct probe *p, size_t i)
{
	pthread_mutex_lock(&p->mu);
	p->member = i;
	p->last_ok = now_ns(CLOCK_MONOTONIC);
	p->err[0] = 0;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

void probe_status(struct probe *p, size_t seg, char *text)
{
	pthread_mutex_lock(&p->mu);
	free(p->status[seg]);
	p->status[seg] = text;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

uint64_t probe_silence_ms(struct probe *p, char *err, size_t errlen)
{
	pthread_mutex_lock(&p->mu);
	uint64_t now = now_ns(CLOCK_MONOTONIC), ms = now > p->last_ok ? (now - p->last_ok) / 1000000 : 0;
	snprintf(err, errlen, "%s", p->err);
	pthread_mutex_unlock(&p->mu);
	return ms;
}
