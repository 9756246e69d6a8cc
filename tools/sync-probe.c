/* SPDX-License-Identifier: MIT */
/*
 * The two helper threads of shmcfg-sync (tools/sync.h), each on an etcd
 * client of its own, so that the main loop never waits for an answer other
 * than its watch's:
 *
 *  - the liveness probe asks the member the watch is on, and that member
 *    only (pinned), for its status every PROBE_EVERY_MS: a member that does
 *    not answer (stopped, cut off from this host) or that knows no leader
 *    (cut off from the quorum) leaves last_ok behind, and the main loop
 *    moves the watch when it is LIVENESS_MS old (issue 22, problem 1). The
 *    member answers the status itself: an election elsewhere does not hold
 *    it up, as it holds up a lease keepalive, which the leader answers.
 *  - the lease thread keeps the status keys' lease alive every second and
 *    puts the status texts the main loop hands it with each keepalive (a
 *    change of whether the host is in sync at once), through any member
 *    (the watch's first). A write stalled by an election stalls this thread
 *    only (problem 2). A text that says a revision was applied, or that
 *    whether the host is in sync changed, goes at once (cluster set
 *    --wait=all and cluster status read them); the rest with the next
 *    keepalive. A put in flight coalesces the texts that arrive meanwhile.
 *    With the first lease, and each new one (etcd lost it), the thread
 *    also puts this host's roster entries and the segments' schemas, each
 *    only if etcd has no key of that name (issue 23, item 3).
 *
 * Both share struct probe's fields under its mutex; each waits on the
 * condition variable for its next round, a new member or a status text.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sync.h"

enum {
	PROBE_EVERY_MS = 1000,   /* the member's status, once a second */
	KEEPALIVE_MS = 1000,     /* the lease, every second */
	REQUEST_MS = 3000,       /* a member that has not answered in 3 s is not answering */
	LEASE_TTL_S = 10,        /* the status keys outlive a missed keepalive or two */
	STOP_DELETE_MS = 1000,   /* a stopping agent's status keys: deleted, if etcd answers soon */
	ROSTER_EVERY_MS = 30000, /* the roster entries (not the schemas), put again if absent */
};

static void deadline_in(struct timespec *t, uint64_t ms)
{
	clock_gettime(CLOCK_MONOTONIC, t);
	t->tv_sec += (time_t)(ms / 1000);
	t->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (t->tv_nsec >= 1000000000L) {
		t->tv_sec++;
		t->tv_nsec -= 1000000000L;
	}
}

static uint64_t ms_until(uint64_t when_ns)
{
	uint64_t now = now_ns(CLOCK_MONOTONIC);
	return when_ns > now ? (when_ns - now) / 1000000 + 1 : 0;
}

/* ---- the liveness probe ---- */

static void *liveness_main(void *arg)
{
	struct probe *p = arg;
	pthread_mutex_lock(&p->mu);
	while (!p->stop) {
		size_t member = p->member;
		pthread_mutex_unlock(&p->mu);
		etcd_pin(p->le, member);
		uint64_t leader = 0;
		int r = etcd_member_status(p->le, &leader);
		pthread_mutex_lock(&p->mu);
		if (member == p->member) { /* an answer about the member still watched */
			if (!r)
				p->last_answer = now_ns(CLOCK_MONOTONIC);
			if (!r && leader) {
				p->last_ok = p->last_answer;
				p->err[0] = 0;
			} else if (!r) {
				snprintf(p->err, sizeof p->err, "etcd %s: the member knows no leader", etcd_endpoint(p->le, member));
			} else {
				snprintf(p->err, sizeof p->err, "%s", etcd_errmsg(p->le));
			}
		}
		if (!p->stop && member == p->member) {
			struct timespec until;
			deadline_in(&until, PROBE_EVERY_MS);
			pthread_cond_timedwait(&p->cv, &p->mu, &until);
		}
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

/* ---- the lease and the status keys ---- */

/* Puts the status texts handed over (all: every segment's last one, under
 * a new lease). 0, or the error of the first put that failed (that text
 * waits for the next round). */
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
		int r = etcd_put(p->se, p->status_key[i], last[i], strlen(last[i]), p->lease, NULL);
		if (r) {
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

/* Key := value unless the key exists: one transaction. */
static int put_absent(struct etcd *e, const char *key, const char *value)
{
	struct etcd_cmp c = {.key = key, .mod_rev = 0};
	struct etcd_op op = {.kind = ETCD_OP_PUT, .key = key, .value = value, .value_len = strlen(value)};
	bool done;
	return etcd_txn(e, &c, 1, &op, 1, &done, NULL);
}

/* Each segment's roster entry and (with_schema) schema: 0 or the first
 * error (one segment's failure keeps no other out; all go again with the
 * next round). */
static int put_registration(struct probe *p, bool with_schema)
{
	int first = 0;
	for (size_t i = 0; i < p->nsegs; i++) {
		int r = put_absent(p->se, p->roster_key[i], p->roster_val[i]);
		char *key = NULL, *text = NULL;
		pthread_mutex_lock(&p->mu);
		if (with_schema && p->schema_key[i] &&
		    (!(key = strdup(p->schema_key[i])) || !(text = strdup(p->schema_text[i]))))
			r = r ? r : ETCD_E_NOMEM;
		pthread_mutex_unlock(&p->mu);
		if (!r && key)
			r = put_absent(p->se, key, text);
		free(key);
		free(text);
		first = first ? first : r;
	}
	return first;
}

static void *lease_main(void *arg)
{
	struct probe *p = arg;
	char **last = calloc(p->nsegs, sizeof *last); /* the texts put last: again under a new lease */
	uint64_t next_keepalive = 0;
	size_t member = SIZE_MAX;
	bool reg_failed = false; /* tried again with the next keepalive */
	uint64_t next_roster = 0; /* again now and then: cluster forget of a live host is undone */
	char said[512] = "";      /* the failure logged last: said once per change */
	char failing[512] = "";   /* the last round's failure, and how many rounds in a row */
	unsigned nfailing = 0;
	pthread_mutex_lock(&p->mu);
	while (!p->stop) {
		uint64_t now = now_ns(CLOCK_MONOTONIC);
		bool keep = now >= next_keepalive, put = p->urgent || p->reg_due;
		if (!keep && !put) {
			struct timespec until;
			deadline_in(&until, ms_until(next_keepalive));
			pthread_cond_timedwait(&p->cv, &p->mu, &until);
			continue;
		}
		p->urgent = false;
		if (member != p->member) { /* start at the watch's member; any other will do */
			member = p->member;
			etcd_pin(p->se, member);
			etcd_pin(p->se, SIZE_MAX);
		}
		pthread_mutex_unlock(&p->mu);
		/* the texts pending go with each keepalive, and at once when urgent */
		int r = 0;
		bool all = false;
		if (keep) {
			next_keepalive = now + KEEPALIVE_MS * 1000000ull;
			int64_t ttl = 0;
			r = p->lease ? etcd_lease_keepalive(p->se, p->lease, &ttl) : 0;
			if (!r && ttl <= 0) {
				r = etcd_lease_grant(p->se, LEASE_TTL_S, &p->lease);
				all = true;
			}
		}
		if (!r)
			r = last ? put_status(p, all, last) : ETCD_E_NOMEM;
		pthread_mutex_lock(&p->mu);
		bool schemas = p->reg_due || all || (keep && reg_failed);
		bool reg = schemas || (keep && now >= next_roster);
		p->reg_due = false;
		pthread_mutex_unlock(&p->mu);
		if (reg) { /* also when the status put failed: a status too big must not keep the host out */
			int rr = put_registration(p, schemas);
			reg_failed = rr != 0;
			if (!rr)
				next_roster = now + ROSTER_EVERY_MS * 1000000ull;
			r = r ? r : rr;
		}
		/* a put that fails for good (etcd's request limit, a role that may
		 * not write) must show in the log: the same answer three rounds in a
		 * row. A member that is down or stopping shows there already, through
		 * the probe, and is left to it. */
		const char *msg = r && !etcd_transient(r) ? etcd_errmsg(p->se) : "";
		if (!*msg || strcmp(msg, failing))
			nfailing = 0;
		snprintf(failing, sizeof failing, "%s", msg);
		nfailing += *msg != 0;
		if (strcmp(msg, said) && ((*msg && nfailing == 3) || !r)) {
			if (r)
				logf_("error: putting the status keys and roster entries: %s", msg);
			else
				logf_("status keys and roster entries put again");
			snprintf(said, sizeof said, "%s", msg);
		}
		pthread_mutex_lock(&p->mu);
		if (r) /* what was not put waits for the next keepalive */
			p->urgent = false;
	}
	pthread_mutex_unlock(&p->mu);
	for (size_t i = 0; last && i < p->nsegs; i++)
		free(last[i]);
	free(last);
	return NULL;
}

/* ---- the main loop's side ---- */

int probe_start(struct probe *p, const char *endpoints, char **status_keys, char **roster_keys, char **roster_vals,
		size_t nsegs)
{
	pthread_condattr_t ca;
	memset(p, 0, sizeof *p);
	p->nsegs = nsegs;
	p->status_key = status_keys;
	p->roster_key = roster_keys;
	p->roster_val = roster_vals;
	p->last_ok = p->last_answer = now_ns(CLOCK_MONOTONIC);
	if (!(p->status = calloc(nsegs, sizeof *p->status)) || !(p->schema_key = calloc(nsegs, sizeof(char *))) ||
	    !(p->schema_text = calloc(nsegs, sizeof(char *))))
		return -ENOMEM;
	int r = etcd_open(endpoints, REQUEST_MS, &p->le);
	if (!r)
		r = etcd_open(endpoints, REQUEST_MS, &p->se);
	if (r)
		return r;
	pthread_mutex_init(&p->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->cv, &ca);
	pthread_condattr_destroy(&ca);
	if ((r = pthread_create(&p->liveness, NULL, liveness_main, p)))
		return -r;
	p->nthreads = 1;
	if ((r = pthread_create(&p->leaser, NULL, lease_main, p)))
		return -r;
	p->nthreads = 2;
	return 0;
}

void probe_stop(struct probe *p)
{
	if (p->nthreads) {
		pthread_mutex_lock(&p->mu);
		p->stop = true;
		pthread_cond_broadcast(&p->cv);
		pthread_mutex_unlock(&p->mu);
		pthread_join(p->liveness, NULL);
		if (p->nthreads > 1) {
			pthread_join(p->leaser, NULL);
			/* a host whose agent stopped is missing at once, not when
			 * its lease runs out (the roster keeps it expected) */
			etcd_set_timeout(p->se, STOP_DELETE_MS);
			for (size_t i = 0; i < p->nsegs; i++)
				if (etcd_delete(p->se, p->status_key[i], false, NULL))
					break;
		}
		pthread_cond_destroy(&p->cv);
		pthread_mutex_destroy(&p->mu);
		p->nthreads = 0;
	}
	for (size_t i = 0; p->status && i < p->nsegs; i++) {
		free(p->status[i]);
		if (p->schema_key)
			free(p->schema_key[i]);
		if (p->schema_text)
			free(p->schema_text[i]);
	}
	free(p->status);
	free(p->schema_key);
	free(p->schema_text);
	p->status = p->schema_key = p->schema_text = NULL;
	etcd_close(p->le);
	etcd_close(p->se);
	p->le = p->se = NULL;
}

void probe_member(struct probe *p, size_t i)
{
	pthread_mutex_lock(&p->mu);
	p->member = i;
	p->last_ok = p->last_answer = now_ns(CLOCK_MONOTONIC); /* its grace starts now */
	p->err[0] = 0;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

void probe_schema(struct probe *p, size_t seg, char *key, char *text)
{
	pthread_mutex_lock(&p->mu);
	free(p->schema_key[seg]);
	free(p->schema_text[seg]);
	p->schema_key[seg] = key;
	p->schema_text[seg] = text;
	p->reg_due = true;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

void probe_status(struct probe *p, size_t seg, char *text, bool urgent)
{
	pthread_mutex_lock(&p->mu);
	free(p->status[seg]);
	p->status[seg] = text;
	if (urgent) {
		p->urgent = true;
		pthread_cond_broadcast(&p->cv);
	}
	pthread_mutex_unlock(&p->mu);
}

uint64_t probe_silence_ms(struct probe *p, uint64_t *unanswered_ms, char *err, size_t errlen)
{
	pthread_mutex_lock(&p->mu);
	uint64_t now = now_ns(CLOCK_MONOTONIC);
	uint64_t ms = now > p->last_ok ? (now - p->last_ok) / 1000000 : 0;
	if (unanswered_ms)
		*unanswered_ms = now > p->last_answer ? (now - p->last_answer) / 1000000 : 0;
	snprintf(err, errlen, "%s", p->err);
	pthread_mutex_unlock(&p->mu);
	return ms;
}
