/* SPDX-License-Identifier: MIT */
/*
 * Segments' state as Prometheus metrics (tools/metrics.h): one table of
 * families, read by shmctl stat --format prometheus and by shmcfg-sync's
 * --metrics-file alike.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <time.h>

#include "metrics.h"

bool sync_agent_alive(const shmcfg *h, const shmcfg_sync_info *s)
{
	int claimed = shmcfg_sync_claimed(h);
	if (claimed >= 0)
		return claimed == 1;
	return s->pid > 0 && (kill(s->pid, 0) == 0 || errno == EPERM);
}

bool sync_stale(const shmcfg_sync_info *s, uint64_t now_ns)
{
	return now_ns > s->updated_ns && now_ns - s->updated_ns > SYNC_STALE_NS;
}

bool sync_in_sync(bool alive, bool stale, const shmcfg_sync_info *s)
{
	return alive && !stale && !s->out_of_sync_ns;
}

static void count_reader(const shmcfg_reader *r, void *ud)
{
	(void)r;
	(*(uint32_t *)ud)++;
}

int metrics_read(shmcfg *h, const char *name, struct seg_metrics *m)
{
	struct timespec ts;
	const struct agent_metrics *agent = m->agent;
	memset(m, 0, sizeof *m);
	m->name = name;
	m->agent = agent;
	int r = shmcfg_stat(h, &m->info);
	if (r)
		return r;
	clock_gettime(CLOCK_REALTIME, &ts);
	m->now_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	m->waiters = shmcfg_waiters(h);
	shmcfg_readers(h, count_reader, &m->readers_used);
	if (!shmcfg_history_range(h, &m->history_oldest, NULL))
		return -ENOMEM; /* the one way it fails on a handle */
	m->cluster_rev = shmcfg_cluster_revision(h);
	m->have_sync = shmcfg_sync_get(h, &m->sync) == 0;
	if (m->have_sync) {
		m->alive = sync_agent_alive(h, &m->sync);
		m->stale = sync_stale(&m->sync, m->now_ns);
	}
	m->up = true;
	return 0;
}

/* ---- the families ---- */

enum scope {
	ANY,   /* every segment named, read or not */
	READ,  /* a segment read */
	SYNC,  /* ... that an agent recorded itself in */
	LOCK,  /* ... whose writer lock this process can see (shmcfg_info.writer) */
	AGENT, /* ... in the agent's own file */
};

struct family {
	const char *name, *type;
	enum scope scope;
	bool seconds; /* printed with milliseconds; the rest are integers */
	double (*get)(const struct seg_metrics *m);
	const char *help;
};

static double secs_since(uint64_t now, uint64_t then)
{
	return then && now > then ? (double)(now - then) / 1e9 : 0;
}

static double f_up(const struct seg_metrics *m) { return m->up; }
static double f_gen(const struct seg_metrics *m) { return (double)m->info.generation; }
/* generation 1 is the creation; each commit adds one */
static double f_commits(const struct seg_metrics *m)
{
	return m->info.generation ? (double)(m->info.generation - 1) : 0;
}
static double f_created(const struct seg_metrics *m) { return (double)m->info.create_time_ns / 1e9; }
static double f_opts(const struct seg_metrics *m) { return m->info.nopts; }
static double f_size(const struct seg_metrics *m) { return (double)m->info.size; }
static double f_heap(const struct seg_metrics *m) { return (double)m->info.heap_bytes; }
static double f_heap_used(const struct seg_metrics *m) { return (double)m->info.heap_used; }
static double f_waiters(const struct seg_metrics *m) { return m->waiters; }
static double f_readers(const struct seg_metrics *m) { return m->readers_used; }
static double f_readers_max(const struct seg_metrics *m) { return m->info.nreaders; }
static double f_readers_hwm(const struct seg_metrics *m) { return m->info.readers_hwm; }
static double f_fallbacks(const struct seg_metrics *m) { return (double)m->info.copy_fallbacks; }
static double f_wlock_held(const struct seg_metrics *m) { return m->info.writer == SHMCFG_WRITER_HELD; }
/* the lock's holder died, or a dead writer's commit is half built */
static double f_wlock_dead(const struct seg_metrics *m)
{
	return m->info.writer == SHMCFG_WRITER_DEAD || (m->info.writer == SHMCFG_WRITER_FREE && m->info.building);
}
static double f_history(const struct seg_metrics *m)
{
	uint64_t g = m->info.generation, o = m->history_oldest;
	return o && o <= g ? (double)(g - o + 1) : 0;
}
static double f_cluster_rev(const struct seg_metrics *m) { return (double)m->cluster_rev; }
static double f_sync_info(const struct seg_metrics *m) { (void)m; return 1; }
static double f_agent_up(const struct seg_metrics *m) { return m->alive; }
static double f_in_sync(const struct seg_metrics *m) { return sync_in_sync(m->alive, m->stale, &m->sync); }
static double f_applied(const struct seg_metrics *m) { return (double)m->sync.applied_rev; }
static double f_age(const struct seg_metrics *m) { return secs_since(m->now_ns, m->sync.updated_ns); }
static double f_oos(const struct seg_metrics *m) { return secs_since(m->now_ns, m->sync.out_of_sync_ns); }
static double f_rejected(const struct seg_metrics *m) { return m->sync.nrejected; }
static double f_etcd_up(const struct seg_metrics *m) { return m->agent->etcd_up; }
static double f_agent_oos(const struct seg_metrics *m) { return secs_since(m->now_ns, m->agent->out_of_sync_ns); }
static double f_start(const struct seg_metrics *m) { return (double)m->agent->start_ns / 1e9; }
static double f_etcd_errors(const struct seg_metrics *m) { return (double)m->agent->etcd_errors; }
static double f_loads(const struct seg_metrics *m) { return (double)m->agent->loads; }
static double f_watch_rev(const struct seg_metrics *m) { return (double)m->agent->watch_rev; }
static double f_rev_applied(const struct seg_metrics *m) { return (double)m->agent->applied; }
static double f_apply_errors(const struct seg_metrics *m) { return (double)m->agent->apply_errors; }
/* received but not in the segment: its commits fail (after a replaced
 * etcd the segment may be ahead for a moment: 0) */
static double f_lag(const struct seg_metrics *m)
{
	return m->agent->watch_rev > m->cluster_rev ? (double)(m->agent->watch_rev - m->cluster_rev) : 0;
}

static const struct family families[] = {
	{"shmcfg_segment_up", "gauge", ANY, false, f_up,
	 "Whether the segment could be read (0: its other metrics are missing)."},
	{"shmcfg_generation", "gauge", READ, false, f_gen,
	 "The segment's current generation (1 at its creation, one more per commit)."},
	{"shmcfg_commits_total", "counter", READ, false, f_commits,
	 "Commits since the segment was created (its generation - 1)."},
	{"shmcfg_created_time_seconds", "gauge", READ, true, f_created,
	 "When the segment was created (a new time: it was replaced), seconds since the epoch."},
	{"shmcfg_options", "gauge", READ, false, f_opts,
	 "Options of the segment's schema."},
	{"shmcfg_size_bytes", "gauge", READ, false, f_size,
	 "Size of the shared memory object."},
	{"shmcfg_heap_size_bytes", "gauge", READ, false, f_heap,
	 "Size of the value heap."},
	{"shmcfg_heap_used_bytes", "gauge", READ, false, f_heap_used,
	 "Bytes of the value heap in use (by every generation in a slot)."},
	{"shmcfg_waiters", "gauge", READ, false, f_waiters,
	 "Handles waiting for a commit (shmcfg_wait) now."},
	{"shmcfg_reader_entries", "gauge", READ, false, f_readers,
	 "Entries of the reader table in use (processes that committed or took snapshots, and their threads that took them)."},
	{"shmcfg_reader_entries_capacity", "gauge", READ, false, f_readers_max,
	 "Entries of the reader table."},
	{"shmcfg_reader_entries_high_water", "gauge", READ, false, f_readers_hwm,
	 "Entries of the reader table ever claimed."},
	{"shmcfg_reader_copy_fallbacks_total", "counter", READ, false, f_fallbacks,
	 "Processes that found the reader table full and copy their snapshots."},
	{"shmcfg_writer_lock_held", "gauge", LOCK, false, f_wlock_held,
	 "Whether a live process holds the writer lock (a commit in progress, or a writer stopped in one)."},
	{"shmcfg_writer_lock_dead", "gauge", LOCK, false, f_wlock_dead,
	 "Whether a dead writer holds the writer lock or left a commit half built (the next commit repairs it)."},
	{"shmcfg_history_entries", "gauge", READ, false, f_history,
	 "Generations the segment's history holds (shmctl log)."},
	{"shmcfg_cluster_revision", "gauge", READ, false, f_cluster_rev,
	 "The etcd revision the current generation carries (0: none was ever applied)."},
	{"shmcfg_sync_info", "gauge", SYNC, false, f_sync_info,
	 "The cluster and host the segment's sync agent recorded (always 1)."},
	{"shmcfg_sync_agent_up", "gauge", SYNC, false, f_agent_up,
	 "Whether the segment's sync agent (shmcfg-sync) runs."},
	{"shmcfg_sync_in_sync", "gauge", SYNC, false, f_in_sync,
	 "Whether the segment is in sync with etcd: its agent runs, its record moves, and it says so."},
	{"shmcfg_sync_applied_revision", "gauge", SYNC, false, f_applied,
	 "The etcd revision the agent last applied, as its record says."},
	{"shmcfg_sync_record_age_seconds", "gauge", SYNC, true, f_age,
	 "Seconds since the agent last rewrote its record (every second while it runs; stale past 10)."},
	{"shmcfg_sync_out_of_sync_seconds", "gauge", SYNC, true, f_oos,
	 "Seconds the segment has been out of sync, as the agent's record says (0: in sync)."},
	{"shmcfg_sync_rejected_keys", "gauge", SYNC, false, f_rejected,
	 "Cluster keys this host cannot take (its schema, its value heap)."},
	{"shmcfg_agent_etcd_up", "gauge", AGENT, false, f_etcd_up,
	 "Whether the agent's etcd member answers (the agent's, for each segment it syncs)."},
	{"shmcfg_agent_out_of_sync_seconds", "gauge", AGENT, true, f_agent_oos,
	 "Seconds the agent has had no etcd member answering (0: it has one)."},
	{"shmcfg_agent_start_time_seconds", "gauge", AGENT, true, f_start,
	 "When the agent started, seconds since the epoch."},
	{"shmcfg_agent_etcd_errors_total", "counter", AGENT, false, f_etcd_errors,
	 "etcd errors the agent met: failed loads and watches, silent members."},
	{"shmcfg_agent_loads_total", "counter", AGENT, false, f_loads,
	 "Loads of the whole prefix: the first, then each reload (compaction, etcd replaced)."},
	{"shmcfg_agent_watch_revision", "gauge", AGENT, false, f_watch_rev,
	 "The newest revision of the cluster's keys the agent received."},
	{"shmcfg_agent_revisions_applied_total", "counter", AGENT, false, f_rev_applied,
	 "Revisions the agent committed to the segment."},
	{"shmcfg_agent_apply_errors_total", "counter", AGENT, false, f_apply_errors,
	 "Commits of the agent to the segment that failed (each try)."},
	{"shmcfg_agent_lag_revisions", "gauge", AGENT, false, f_lag,
	 "Revisions the agent received but the segment does not carry yet (its commits fail)."},
};

static bool in_scope(const struct seg_metrics *m, enum scope s)
{
	switch (s) {
	case ANY: return true;
	case READ: return m->up;
	case SYNC: return m->up && m->have_sync;
	case LOCK: return m->up && m->info.writer != SHMCFG_WRITER_UNKNOWN;
	case AGENT: return m->up && m->agent;
	}
	return false;
}

/*
 * A label value, printable ASCII whatever the name holds (a stranger's
 * object in /dev/shm has any bytes; a segment's name is [A-Za-z0-9._-]): the
 * label's text is the name with a backslash doubled and any other byte as
 * \xNN, so two names never share a label and no byte breaks a parser (one
 * that is no UTF-8 made a scrape of the whole host fail) or a terminal;
 * then the format's escapes (backslash, double quote).
 */
static void label(FILE *f, const char *name, const char *value, bool first)
{
	fprintf(f, "%s%s=\"", first ? "" : ",", name);
	for (const unsigned char *p = (const unsigned char *)value; *p; p++) {
		if (*p == '\\')
			fputs("\\\\\\\\", f);
		else if (*p == '"')
			fputs("\\\"", f);
		else if (*p < 0x20 || *p >= 0x7f)
			fprintf(f, "\\\\x%02x", *p);
		else
			putc(*p, f);
	}
	putc('"', f);
}

int metrics_write(FILE *f, const struct seg_metrics *m, size_t n)
{
	for (size_t k = 0; k < sizeof families / sizeof *families; k++) {
		const struct family *fam = &families[k];
		bool any = false;
		for (size_t i = 0; i < n && !any; i++)
			any = in_scope(&m[i], fam->scope);
		if (!any)
			continue; /* no HELP for a family without samples */
		fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", fam->name, fam->help, fam->name, fam->type);
		for (size_t i = 0; i < n; i++) {
			if (!in_scope(&m[i], fam->scope))
				continue;
			fprintf(f, "%s{", fam->name);
			label(f, "segment", m[i].name, true);
			if (fam->get == f_sync_info) {
				label(f, "cluster", m[i].sync.cluster, false);
				label(f, "host", m[i].sync.host, false);
			}
			fprintf(f, fam->seconds ? "} %.3f\n" : "} %.0f\n", fam->get(&m[i]));
		}
	}
	return ferror(f);
}
