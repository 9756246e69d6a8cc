/* SPDX-License-Identifier: MIT */
/*
 * shmctl: the read commands about a segment as a whole: stat, hash, check,
 * dump, diff, and watch. Each attaches read-only.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "metrics.h"
#include "shmctl.h"

/* ------------------------------------------------------------------ */
/* stat                                                               */
/* ------------------------------------------------------------------ */

static size_t pins_of(const struct reader_list *rl, uint64_t gen)
{
	size_t n = 0;
	for (size_t i = 0; gen && i < rl->n; i++)
		for (int k = 0; k < 4; k++)
			n += rl->r[i].pins[k] == gen;
	return n;
}

/* The options a commit changed, aliases left out (they follow their target). */
static char *changed_names(shmcfg *h, const shmcfg_commit *c)
{
	if (c->generation == 1)
		return strdup("(segment created)");
	size_t len = 48;
	for (uint32_t k = 0; k < c->nids; k++)
		len += strlen(opt_name(h, c->ids[k])) + 2;
	char *s = malloc(len);
	if (!s)
		return NULL;
	s[0] = 0;
	for (uint32_t k = 0; k < c->nids; k++) {
		shmcfg_optinfo oi;
		if (shmcfg_opt_info(h, c->ids[k], &oi) || oi.alias != SHMCFG_NO_OPT)
			continue;
		if (*s)
			strcat(s, ", ");
		strcat(s, oi.name);
	}
	if (c->nchanged > c->nids)
		sprintf(s + strlen(s), "%s(%u more)", *s ? " " : "", c->nchanged - c->nids);
	else if (!*s)
		strcpy(s, "-");
	return s;
}

static uint64_t realtime_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The agent's record: any writer may set its texts (shmcfg_sync_set). */
static json_t *sync_json(const shmcfg *h, const shmcfg_sync_info *s)
{
	json_t *o = json_object();
	char ts[48];
	json_object_set_new(o, "endpoints", json_foreign(s->endpoints));
	json_object_set_new(o, "cluster", json_foreign(s->cluster));
	json_object_set_new(o, "host", json_foreign(s->host));
	json_object_set_new(o, "pid", json_integer(s->pid));
	json_object_set_new(o, "agent_alive", json_boolean(sync_agent_alive(h, s)));
	json_object_set_new(o, "applied_revision", json_integer((json_int_t)s->applied_rev));
	time_utc(s->updated_ns, ts, sizeof ts);
	json_object_set_new(o, "updated", json_string(ts));
	json_object_set_new(o, "updated_ns", json_integer((json_int_t)s->updated_ns));
	bool alive = sync_agent_alive(h, s), stale = sync_stale(s, realtime_ns());
	json_object_set_new(o, "stale", json_boolean(stale));
	json_object_set_new(o, "in_sync", json_boolean(sync_in_sync(alive, stale, s)));
	if (s->out_of_sync_ns) {
		time_utc(s->out_of_sync_ns, ts, sizeof ts);
		json_object_set_new(o, "out_of_sync_since", json_string(ts));
	} else {
		json_object_set_new(o, "out_of_sync_since", json_null());
	}
	json_object_set_new(o, "rejected", json_integer(s->nrejected));
	json_object_set_new(o, "error", json_foreign(s->error));
	return o;
}

/* The cluster revision a generation carries, as log --json says: its
 * history entry's (the commit record has only the revision a cluster commit
 * applied, 0 for the others); null once the history no longer holds it. */
static json_t *carried_revision(const shmcfg_history_entry *he)
{
	return he ? json_integer((json_int_t)he->cluster_rev) : json_null();
}

static void print_sync(const shmcfg *h, const shmcfg_sync_info *s, uint64_t cluster_rev)
{
	char line[1400], ts[40];
	if (!s) {
		if (cluster_rev) {
			snprintf(line, sizeof line, "revision %llu (no agent has recorded itself)",
				 (unsigned long long)cluster_rev);
			kv("cluster", line, NULL);
		}
		return;
	}
	bool alive = sync_agent_alive(h, s);
	snprintf(line, sizeof line, "%.63s, revision %llu, host %.63s, etcd %.255s", s->cluster[0] ? s->cluster : "?",
		 (unsigned long long)cluster_rev, s->host[0] ? s->host : "?", s->endpoints[0] ? s->endpoints : "?");
	kv("cluster", line, NULL);
	if (!alive) {
		time_local(s->updated_ns, ts, sizeof ts);
		snprintf(line, sizeof line, "not running (pid %d, last seen %s)", s->pid, ts);
		kv("sync agent", line, C_RED);
	} else if (sync_stale(s, realtime_ns())) {
		time_local(s->updated_ns, ts, sizeof ts);
		snprintf(line, sizeof line, "pid %d, NOT RESPONDING: its record has not moved since %s", s->pid, ts);
		kv("sync agent", line, C_RED);
	} else if (s->out_of_sync_ns) {
		time_local(s->out_of_sync_ns, ts, sizeof ts);
		snprintf(line, sizeof line, "pid %d, OUT OF SYNC since %s: %s", s->pid, ts,
			 s->error[0] ? s->error : "etcd unreachable");
		kv("sync agent", line, C_RED);
	} else {
		snprintf(line, sizeof line, "pid %d, in sync", s->pid);
		kv("sync agent", line, C_GREEN);
	}
	if (s->nrejected || (alive && !s->out_of_sync_ns && s->error[0])) {
		snprintf(line, sizeof line, "%u cluster key%s this host cannot take (its schema, its value heap)%s%s",
			 s->nrejected, s->nrejected == 1 ? "" : "s", s->error[0] ? ": " : "", s->error);
		kv("rejected", line, C_YELLOW);
	}
}

/*
 * stat --format prometheus: the metrics of the segments named, or of every
 * segment of the host (all), in one exposition (tools/metrics.c). A segment
 * that cannot be read has shmcfg_segment_up 0: named, that is a failure
 * (exit 1); found in /dev/shm, a warning (one scrape covers the rest).
 */
static const char *writer_state_name(uint32_t st)
{
	switch (st) {
	case SHMCFG_WRITER_FREE: return "free";
	case SHMCFG_WRITER_HELD: return "held";
	case SHMCFG_WRITER_DEAD: return "dead";
	default: return "unknown";
	}
}

/* The writer lock's line of stat: who holds it, and a commit left half
 * built; its color (NULL: nothing to look at). */
static const char *writer_line(const shmcfg_info *info, char *line, size_t len)
{
	char who[96];
	if (info->writer_entry == UINT32_MAX)
		snprintf(who, sizeof who, "%s", info->writer == SHMCFG_WRITER_HELD
						  ? "a process without a reader entry (the table was full)"
						  : "an owner without a reader entry (the table was full, or a scribbled word)");
	else if (info->writer_pid)
		snprintf(who, sizeof who, "pid %d (reader entry %u)", (int)info->writer_pid, info->writer_entry);
	else
		snprintf(who, sizeof who, "reader entry %u (its process reclaimed)", info->writer_entry);
	char gen[96] = "";
	if (info->building)
		snprintf(gen, sizeof gen, "generation %llu", (unsigned long long)info->building);
	switch (info->writer) {
	case SHMCFG_WRITER_FREE:
		if (!info->building) {
			snprintf(line, len, "free");
			return NULL;
		}
		snprintf(line, len, "free; a writer died building %s: the next commit repairs it", gen);
		return C_YELLOW;
	case SHMCFG_WRITER_HELD:
		snprintf(line, len, "held by %s%s%s", who, *gen ? ", building " : "", gen);
		return NULL;
	case SHMCFG_WRITER_DEAD:
		snprintf(line, len, "held by %s, which is dead%s%s: the next commit takes it over", who,
			 *gen ? ", building " : "", gen);
		return C_YELLOW;
	default:
		snprintf(line, len, "unknown (its lock object is for writers only)%s%s", *gen ? "; a commit is building " : "",
			 gen);
		return NULL;
	}
}

static int stat_metrics(char **names, size_t n, bool all)
{
	struct seg_metrics *m = calloc(n ? n : 1, sizeof *m);
	if (!m)
		return fail("out of memory");
	int rc = EXIT_OK;
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		char path[512];
		struct stat st;
		shmcfg *h;
		snprintf(path, sizeof path, "/dev/shm/shmcfg.%s", names[i]);
		/* found there: what is no segment of ours is left out, as ls notes it */
		if (all && (lstat(path, &st) || !S_ISREG(st.st_mode)))
			continue;
		int r = attach_segment(names[i], true, &h);
		if (all && (r == -ENOENT || r == SHMCFG_E_MAGIC || r == SHMCFG_E_OWNER))
			continue;
		if (!r) {
			r = metrics_read(h, names[i], &m[k]);
			shmcfg_close(h);
			if (r)
				rc = fail_lib(r, names[i]);
		} else if (all) {
			const char *det = shmcfg_errdetail();
			warn_msg("segment '%s' cannot be read: %s", names[i], *det ? det : shmcfg_strerror(r));
		} else {
			rc = attach_error(r, names[i], true, shmcfg_errdetail());
		}
		m[k++].name = names[i]; /* up or not */
	}
	if (metrics_write(stdout, m, k) || fflush(stdout))
		rc = fail("writing the metrics: %s", strerror(errno));
	free(m);
	return rc;
}

int cmd_stat(int argc, char **argv)
{
	bool json = false, prom = false;
	uint64_t ncommits = 10;
	int c, ec = 0;
	while ((c = next_opt(argc, argv, &ec)) != -1) {
		if (c == -2)
			return ec;
		if (c == 'J')
			json = true;
		if (c == 'f') {
			if (strcmp(optarg, "text") && strcmp(optarg, "json") && strcmp(optarg, "prometheus"))
				return usage_error("--format takes text, json or prometheus, not '%s'", optarg);
			prom = !strcmp(optarg, "prometheus");
			json |= !strcmp(optarg, "json");
		}
		if (c == 'c' && (!parse_u64(optarg, &ncommits) || ncommits > 1000))
			return usage_error("--commits takes a number 0-1000, not '%s'", optarg);
	}
	if (prom && json)
		return usage_error("--json and --format prometheus: choose one");
	if (prom && optind >= argc) {
		/* every segment of the host: one scrape covers them all */
		char **names;
		size_t n;
		if (list_segments(&names, &n))
			return EXIT_FAIL;
		int rc = stat_metrics(names, n, true);
		for (size_t i = 0; i < n; i++)
			free(names[i]);
		free(names);
		return rc;
	}
	if (prom)
		return stat_metrics(argv + optind, (size_t)(argc - optind), false);
	if (optind >= argc)
		return usage_error("missing segment NAME");
	if (argc - optind > 1)
		return usage_error("unexpected argument '%s' (several segments: --format prometheus)", argv[optind + 1]);
	const char *seg = argv[optind];
	shmcfg *h;
	if (open_segment(seg, true, &h))
		return EXIT_FAIL;
	shmcfg_info *info = malloc(sizeof *info);
	int r = info ? shmcfg_stat(h, info) : -ENOMEM;
	if (r) {
		free(info);
		shmcfg_close(h);
		return fail_lib(r, seg);
	}
	struct reader_list rl = {0};
	shmcfg_readers(h, collect_reader, &rl);
	/* the processes that map it (this one left out): every attached one,
	 * also those that never took a snapshot and so hold no entry */
	pid_t apids[256];
	bool exact = false;
	int natt = attached_processes(seg, apids, 256, &exact);
	size_t nshown = natt > 0 ? (natt < 256 ? (size_t)natt : 256) : 0;
	char sh[33], ch[33], ctime_s[40], cutc[48];
	hex16(info->schema_hash, sh);
	hex16(info->config_hash, ch);
	time_local(info->create_time_ns, ctime_s, sizeof ctime_s);
	time_utc(info->create_time_ns, cutc, sizeof cutc);
	/* the slot holding the current generation */
	int cur_slot = -1;
	for (uint32_t s = 0; s < info->nslots && s < 256; s++)
		if (info->slot_gen[s] == info->generation)
			cur_slot = (int)s;
	/* recent commits, newest first */
	shmcfg_commit *commits = calloc(ncommits ? ncommits : 1, sizeof *commits);
	size_t nc = 0;
	for (uint64_t g = info->generation; commits && g >= 1 && nc < ncommits; g--)
		if (shmcfg_commit_info(h, g, &commits[nc]) == 0)
			nc++;
		else
			break;

	uint64_t cluster_rev = shmcfg_cluster_revision(h);
	shmcfg_sync_info sync;
	bool have_sync = shmcfg_sync_get(h, &sync) == 0;

	int rc = EXIT_OK;
	if (json) {
		json_t *o = json_object();
		json_object_set_new(o, "name", json_string(seg));
		json_object_set_new(o, "layout_version", json_integer(info->layout_version));
		json_object_set_new(o, "generation", json_integer((json_int_t)info->generation));
		json_object_set_new(o, "schema_hash", json_string(sh));
		json_object_set_new(o, "config_hash", json_string(ch));
		json_object_set_new(o, "size", json_integer((json_int_t)info->size));
		json_object_set_new(o, "options", json_integer(info->nopts));
		json_object_set_new(o, "heap_bytes", json_integer((json_int_t)info->heap_bytes));
		json_object_set_new(o, "heap_used", json_integer((json_int_t)info->heap_used));
		json_object_set_new(o, "reader_entries", json_integer(info->nreaders));
		json_object_set_new(o, "readers_hwm", json_integer(info->readers_hwm));
		json_object_set_new(o, "copy_fallbacks", json_integer((json_int_t)info->copy_fallbacks));
		json_object_set_new(o, "retired", json_boolean(info->retired));
		json_t *wr = json_object();
		json_object_set_new(wr, "state", json_string(writer_state_name(info->writer)));
		json_object_set_new(wr, "pid", info->writer_pid ? json_integer(info->writer_pid) : json_null());
		json_object_set_new(wr, "entry",
				    info->writer_entry != UINT32_MAX ? json_integer(info->writer_entry) : json_null());
		json_object_set_new(wr, "building", info->building ? json_integer((json_int_t)info->building) : json_null());
		json_object_set_new(o, "writer_lock", wr);
		json_t *att = json_array();
		for (size_t i = 0; i < nshown; i++)
			json_array_append_new(att, json_integer(apids[i]));
		json_object_set_new(o, "attached", att);
		json_object_set_new(o, "attached_count", natt >= 0 ? json_integer(natt) : json_null());
		json_object_set_new(o, "attached_exact", json_boolean(natt >= 0 && exact));
		json_t *cr = json_object();
		json_object_set_new(cr, "time", json_string(cutc));
		json_object_set_new(cr, "time_ns", json_integer((json_int_t)info->create_time_ns));
		json_object_set_new(cr, "uid", json_integer(info->create_uid));
		json_object_set_new(cr, "pid", json_integer(info->create_pid));
		json_object_set_new(o, "created", cr);
		json_t *slots = json_array();
		for (uint32_t s = 0; s < info->nslots && s < 256; s++) {
			json_t *e = json_object();
			json_object_set_new(e, "slot", json_integer(s));
			json_object_set_new(e, "generation", json_integer((json_int_t)info->slot_gen[s]));
			json_object_set_new(e, "pins", json_integer((json_int_t)pins_of(&rl, info->slot_gen[s])));
			json_object_set_new(e, "current", json_boolean((int)s == cur_slot));
			json_array_append_new(slots, e);
		}
		json_object_set_new(o, "slots", slots);
		json_t *readers = json_array();
		for (size_t i = 0; i < rl.n; i++) {
			json_t *e = json_object(), *pins = json_array();
			for (int k = 0; k < 4; k++)
				if (rl.r[i].pins[k])
					json_array_append_new(pins, json_integer((json_int_t)rl.r[i].pins[k]));
			json_object_set_new(e, "index", json_integer(rl.r[i].index));
			json_object_set_new(e, "pid", json_integer(rl.r[i].pid));
			json_object_set_new(e, "alive", json_boolean(rl.r[i].alive));
			json_object_set_new(e, "start_time", json_integer((json_int_t)rl.r[i].start_time));
			json_object_set_new(e, "pins", pins);
			json_array_append_new(readers, e);
		}
		json_object_set_new(o, "readers", readers);
		json_t *cj = json_array();
		for (size_t i = 0; i < nc; i++) {
			json_t *e = json_object(), *names = json_array();
			char ts[48];
			time_utc(commits[i].time_ns, ts, sizeof ts);
			for (uint32_t k = 0; k < commits[i].nids; k++)
				json_array_append_new(names, json_string(opt_name(h, commits[i].ids[k])));
			json_object_set_new(e, "generation", json_integer((json_int_t)commits[i].generation));
			json_object_set_new(e, "time", json_string(ts));
			json_object_set_new(e, "time_ns", json_integer((json_int_t)commits[i].time_ns));
			json_object_set_new(e, "pid", json_integer(commits[i].pid));
			json_object_set_new(e, "uid", json_integer(commits[i].uid));
			json_object_set_new(e, "nchanged", json_integer(commits[i].nchanged));
			json_object_set_new(e, "changed", names);
			shmcfg_history_entry *he = NULL;
			if (shmcfg_history_get(h, commits[i].generation, &he))
				he = NULL;
			json_object_set_new(e, "cluster_revision", carried_revision(he));
			shmcfg_history_free(he);
			json_object_set_new(e, "who", json_string(commits[i].who));
			json_array_append_new(cj, e);
		}
		json_object_set_new(o, "commits", cj);
		json_object_set_new(o, "cluster_revision", json_integer((json_int_t)cluster_rev));
		json_object_set_new(o, "sync", have_sync ? sync_json(h, &sync) : json_null());
		rc = json_print(o, false);
	} else {
		char size[32], heap[32], used[32], line[640];
		human_size(info->size, size, sizeof size);
		human_size(info->heap_bytes, heap, sizeof heap);
		human_size(info->heap_used, used, sizeof used);
		printf("%s%s%s\n", color(C_BOLD), seg, color(C_RESET));
		snprintf(line, sizeof line, "%u", info->layout_version);
		kv("layout", line, NULL);
		snprintf(line, sizeof line, "%llu", (unsigned long long)info->generation);
		kv("generation", line, NULL);
		kv("schema hash", sh, NULL);
		kv("config hash", ch, NULL);
		snprintf(line, sizeof line, "%s (%llu bytes)", size, (unsigned long long)info->size);
		kv("size", line, NULL);
		snprintf(line, sizeof line, "%u", info->nopts);
		kv("options", line, NULL);
		snprintf(line, sizeof line, "%s of %s in use (layer values)", used, heap);
		kv("heap", line, NULL);
		char who[64];
		snprintf(line, sizeof line, "%s by %s (uid %u), pid %d", ctime_s,
			 user_name(info->create_uid, who, sizeof who), info->create_uid, info->create_pid);
		kv("created", line, NULL);
		if (info->retired)
			kv("retired", "yes: removed or replaced since attached", C_YELLOW);
		char plist[512];
		if (natt < 0)
			snprintf(line, sizeof line, "?");
		else if (natt == 0)
			snprintf(line, sizeof line, "%s", exact ? "none" : "none seen (other users' processes are hidden: run as root)");
		else {
			pid_list(apids, nshown, plist, 200);
			snprintf(line, sizeof line, "%s%d process%s: %s%s%s", exact ? "" : "at least ", natt,
				 natt == 1 ? "" : "es", plist, (size_t)natt > nshown ? ", ..." : "",
				 exact ? "" : " (other users' processes are hidden: run as root)");
		}
		kv("attached", line, NULL);
		snprintf(line, sizeof line, "%u of %u entries ever claimed%s", info->readers_hwm, info->nreaders,
			 info->readers_hwm >= info->nreaders ? " (full)" : "");
		kv("reader table", line, info->readers_hwm >= info->nreaders ? C_YELLOW : NULL);
		snprintf(line, sizeof line, "%llu process%s found the reader table full and %s snapshots",
			 (unsigned long long)info->copy_fallbacks, info->copy_fallbacks == 1 ? "" : "es",
			 info->copy_fallbacks == 1 ? "copies its" : "copy their");
		kv("copy fallback", line, info->copy_fallbacks ? C_YELLOW : NULL);
		const char *wcolor = writer_line(info, line, sizeof line);
		kv("writer lock", line, wcolor);
		print_sync(h, have_sync ? &sync : NULL, cluster_rev);

		printf("\n%sslots%s (%u)\n", color(C_BOLD), color(C_RESET), info->nslots);
		static const char *const sh_[] = {"SLOT", "GENERATION", "PINS", "STATE"};
		struct table *t = table_new(4, sh_);
		for (uint32_t s = 0; s < info->nslots && s < 256; s++) {
			char a[16], b[32], p[16];
			snprintf(a, sizeof a, "%u", s);
			snprintf(b, sizeof b, "%llu", (unsigned long long)info->slot_gen[s]);
			snprintf(p, sizeof p, "%zu", pins_of(&rl, info->slot_gen[s]));
			const char *state = (int)s == cur_slot ? "current" : info->slot_gen[s] ? "old" : "free";
			const char *cells[] = {a, info->slot_gen[s] ? b : "-", p, state};
			table_row(t, cells);
			if ((int)s == cur_slot)
				table_color(t, 3, C_GREEN);
		}
		table_print(t);

		printf("\n%sreaders%s (%zu of %u entries used: processes that committed or took snapshots, and their threads that took them)\n", color(C_BOLD),
		       color(C_RESET), rl.n, info->nreaders);
		if (rl.n) {
			static const char *const rh[] = {"ENTRY", "PID", "ALIVE", "PINS"};
			t = table_new(4, rh);
			for (size_t i = 0; i < rl.n; i++) {
				char a[16], b[16], p[96] = "";
				size_t pl = 0;
				snprintf(a, sizeof a, "%u", rl.r[i].index);
				snprintf(b, sizeof b, "%d", rl.r[i].pid);
				for (int k = 0; k < 4; k++)
					if (rl.r[i].pins[k] && pl < sizeof p)
						pl += (size_t)snprintf(p + pl, sizeof p - pl, "%s%llu", pl ? " " : "",
								       (unsigned long long)rl.r[i].pins[k]);
				const char *cells[] = {a, b, rl.r[i].alive ? "yes" : "no", pl ? p : "-"};
				table_row(t, cells);
				table_color(t, 2, rl.r[i].alive ? C_GREEN : C_RED);
			}
			table_print(t);
		}

		printf("\n%scommits%s (last %zu)\n", color(C_BOLD), color(C_RESET), nc);
		if (nc) {
			static const char *const chd[] = {"GENERATION", "TIME", "PID", "UID", "CLUSTER", "CHANGED"};
			t = table_new(6, chd);
			table_shrink(t, 5, 20);
			for (size_t i = 0; i < nc; i++) {
				char g[32], ts[40], p[16], u[16], cl[32 + SHMCFG_WHO_MAX] = "-";
				snprintf(g, sizeof g, "%llu", (unsigned long long)commits[i].generation);
				time_local(commits[i].time_ns, ts, sizeof ts);
				snprintf(p, sizeof p, "%d", commits[i].pid);
				snprintf(u, sizeof u, "%u", commits[i].uid);
				if (commits[i].cluster_rev)
					snprintf(cl, sizeof cl, "rev %llu%s%s", (unsigned long long)commits[i].cluster_rev,
						 commits[i].who[0] ? " " : "", commits[i].who);
				char *names = changed_names(h, &commits[i]);
				const char *cells[] = {g, ts, p, u, cl, names ? names : "?"};
				table_row(t, cells);
				free(names);
			}
			table_print(t);
		}
	}
	free(commits);
	free(rl.r);
	free(info);
	shmcfg_close(h);
	return rc;
}

/* ------------------------------------------------------------------ */
/* hash, check, dump, diff                                            */
/* ------------------------------------------------------------------ */

int cmd_hash(int argc, char **argv)
{
	bool json = false;
	const char *pos[1];
	int ec = 0;
	if (simple_args(argc, argv, &json, pos, 1, &ec))
		return ec;
	shmcfg *h;
	if (open_segment(pos[0], true, &h))
		return EXIT_FAIL;
	uint8_t hash[16];
	char hex[33];
	uint64_t gen = shmcfg_config_hash(h, hash);
	hex16(hash, hex);
	shmcfg_close(h);
	if (json)
		return json_print(json_pack("{s:I, s:s}", "generation", (json_int_t)gen, "config_hash", hex), false);
	puts(hex);
	return EXIT_OK;
}

static void add_problem(const char *problem, void *ud)
{
	json_array_append_new(json_object_get(ud, "problems"), json_foreign(problem));
}

/*
 * The check itself: {"attach_error": code or 0, "detail": text,
 * "generation": N or null, "problems": [...], "notes": [...]}. A segment
 * that does not attach because it is damaged is a problem; a missing one,
 * one we may not read, or another user's (not named by --owner), is an
 * attach_error.
 */
static json_t *check_segment(const char *name)
{
	json_t *o = json_pack("{s:i, s:s, s:n, s:[], s:[]}", "attach_error", 0, "detail", "",
			      "generation", "problems", "notes");
	if (!o)
		return NULL;
	shmcfg *h = NULL;
	int r = attach_segment(name, true, &h);
	/* not attached for a reason that says nothing of its soundness */
	if (r == -ENOENT || r == -EACCES || r == -EPERM || r == -EINVAL || r == -ENOMEM || r == SHMCFG_E_OWNER) {
		json_object_set_new(o, "attach_error", json_integer(r));
		json_object_set_new(o, "detail", json_string(shmcfg_errdetail()));
		return o;
	}
	if (r) {
		const char *d = shmcfg_errdetail();
		add_problem(d && *d ? d : shmcfg_strerror(r), o);
		return o;
	}
	int bad = shmcfg_check(h, true, add_problem, o);
	/* the check could not run (out of memory), or a problem's text could
	 * not be kept: say so, never "sound" */
	if (bad < 0 || json_array_size(json_object_get(o, "problems")) < (size_t)bad) {
		json_object_set_new(o, "attach_error", json_integer(bad < 0 ? bad : -ENOMEM));
		json_object_set_new(o, "detail", json_string(shmcfg_errdetail()));
		shmcfg_close(h);
		return o;
	}
	struct reader_list rl = {0};
	shmcfg_readers(h, collect_reader, &rl);
	shmcfg_info *info = malloc(sizeof *info);
	if (info && shmcfg_stat(h, info) == 0) {
		json_object_set_new(o, "generation", json_integer((json_int_t)info->generation));
		for (size_t i = 0; i < rl.n; i++) {
			char msg[200];
			if (rl.r[i].index >= info->nreaders) {
				snprintf(msg, sizeof msg, "reader entry %u is beyond the table (%u entries)",
					 rl.r[i].index, info->nreaders);
				add_problem(msg, o);
			}
			if (!rl.r[i].alive) {
				snprintf(msg, sizeof msg, "reader entry %u: process %d is gone (shmctl gc reclaims it)",
					 rl.r[i].index, rl.r[i].pid);
				json_array_append_new(json_object_get(o, "notes"), json_string(msg));
			}
			/* a live reader pins only generations that exist */
			for (int k = 0; rl.r[i].alive && k < 4; k++) {
				uint64_t g = rl.r[i].pins[k];
				if (g > info->generation) {
					snprintf(msg, sizeof msg,
						 "reader entry %u (pid %d) pins generation %llu, beyond the current %llu",
						 rl.r[i].index, rl.r[i].pid, (unsigned long long)g,
						 (unsigned long long)info->generation);
					add_problem(msg, o);
				}
			}
		}
		/* a dead writer's lock or half-built commit: the next commit's */
		char line[256], msg[300];
		if (writer_line(info, line, sizeof line)) {
			snprintf(msg, sizeof msg, "writer lock: %s", line);
			json_array_append_new(json_object_get(o, "notes"), json_string(msg));
		}
	}
	free(info);
	free(rl.r);
	shmcfg_close(h);
	return o;
}

/*
 * check reads a segment that may be damaged in ways the library does not
 * survive: it runs in a child process, and a crash is one more problem.
 */
static json_t *check_isolated(const char *name)
{
	int fds[2];
	if (pipe(fds) < 0)
		return check_segment(name);
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		close(fds[0]);
		close(fds[1]);
		return check_segment(name);
	}
	if (pid == 0) {
		close(fds[0]);
		json_t *o = check_segment(name);
		int r = o ? json_dumpfd(o, fds[1], JSON_COMPACT) : -1;
		json_decref(o);
		close(fds[1]);
		_exit(r ? 1 : 0);
	}
	close(fds[1]);
	json_error_t e;
	json_t *o = json_loadfd(fds[0], JSON_DISABLE_EOF_CHECK, &e);
	close(fds[0]);
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (o && WIFEXITED(status) && WEXITSTATUS(status) == 0 && json_is_object(o))
		return o;
	json_decref(o);
	char msg[200];
	if (WIFSIGNALED(status))
		snprintf(msg, sizeof msg, "reading the segment crashed (signal %d, %s)", WTERMSIG(status),
			 strsignal(WTERMSIG(status)));
	else
		snprintf(msg, sizeof msg, "reading the segment failed (exit status %d)",
			 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	return json_pack("{s:i, s:s, s:n, s:[s], s:[]}", "attach_error", 0, "detail", "", "generation",
			 "problems", msg, "notes");
}

int cmd_check(int argc, char **argv)
{
	bool json = false;
	const char *pos[1];
	int ec = 0;
	if (simple_args(argc, argv, &json, pos, 1, &ec))
		return ec;
	json_t *o = check_isolated(pos[0]);
	if (!o)
		return fail("out of memory");
	int r = (int)json_integer_value(json_object_get(o, "attach_error"));
	if (r) {
		/* the detail lives in o: print before it is freed */
		int rc = attach_error(r, pos[0], true, json_string_value(json_object_get(o, "detail")));
		json_decref(o);
		return rc;
	}
	json_t *problems = json_object_get(o, "problems"), *notes = json_object_get(o, "notes");
	size_t nprob = json_array_size(problems);
	json_int_t gen = json_integer_value(json_object_get(o, "generation"));
	int rc = nprob ? EXIT_FAIL : EXIT_OK;
	if (json) {
		json_t *out = json_pack("{s:s, s:b, s:O, s:O, s:O}", "name", pos[0], "ok", nprob == 0,
					"generation", json_object_get(o, "generation"), "problems", problems,
					"notes", notes);
		json_print(out, false);
	} else {
		for (size_t i = 0; i < nprob; i++)
			printf("%sproblem:%s %s\n", color(C_RED), color(C_RESET),
			       json_string_value(json_array_get(problems, i)));
		for (size_t i = 0; i < json_array_size(notes); i++)
			printf("note: %s\n", json_string_value(json_array_get(notes, i)));
		if (nprob == 0)
			printf("%s: %ssound%s (generation %lld)\n", pos[0], color(C_GREEN), color(C_RESET),
			       (long long)gen);
		else
			printf("%s: %zu problem%s\n", pos[0], nprob, nprob == 1 ? "" : "s");
	}
	json_decref(o);
	return rc;
}

int cmd_dump(int argc, char **argv)
{
	unsigned flags = 0;
	int c, ec = 0;
	while ((c = next_opt(argc, argv, &ec)) != -1) {
		if (c == -2)
			return ec;
		if (c == 'a')
			flags |= SHMCFG_DUMP_ALL;
	}
	if (optind >= argc)
		return usage_error("missing segment NAME");
	if (argc - optind > 1)
		return usage_error("unexpected argument '%s'", argv[optind + 1]);
	shmcfg *h;
	if (open_segment(argv[optind], true, &h))
		return EXIT_FAIL;
	char *text = NULL;
	int r = shmcfg_dump(h, flags, &text);
	shmcfg_close(h);
	if (r)
		return fail_lib(r, argv[optind]);
	if (!(text = json_for_terminal(text))) /* a dump is JSON: its strings' C1 controls as \u escapes */
		return fail("out of memory");
	size_t l = strlen(text);
	fputs(text, stdout);
	if (!l || text[l - 1] != '\n')
		putchar('\n');
	free(text);
	return EXIT_OK;
}

/* ------------------------------------------------------------------ */
/* watch                                                              */
/* ------------------------------------------------------------------ */

static volatile sig_atomic_t stop_signal;
#define WATCH_SLICE_MS 200 /* how late watch may notice SIGINT or SIGTERM */

static void on_signal(int sig)
{
	stop_signal = sig;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Every option's value (as JSON text) and source in a snapshot. */
static int read_state(shmcfg *h, char **text, shmcfg_source *src, uint64_t *gen)
{
	shmcfg_snapshot *snap;
	int r = shmcfg_snapshot_acquire(h, &snap);
	if (r)
		return r;
	*gen = shmcfg_snapshot_generation(snap);
	for (uint32_t i = 0; i < shmcfg_count(h); i++) {
		shmcfg_value v;
		free(text[i]);
		text[i] = NULL;
		if ((r = shmcfg_snapshot_get(snap, i, &v)))
			break;
		text[i] = value_text(&v);
		src[i] = v.source;
		if (!text[i]) {
			r = -ENOMEM;
			break;
		}
	}
	shmcfg_snapshot_release(snap);
	return r;
}

/* The new state becomes the old one (the old buffers are reused). */
static void advance(char **text, char **now, shmcfg_source *src, const shmcfg_source *nsrc, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		char *tmp = text[i];
		text[i] = now[i];
		now[i] = tmp;
		src[i] = nsrc[i];
	}
}

static json_t *text_json(const char *text)
{
	json_t *j = text ? json_loads(text, JSON_DECODE_ANY, NULL) : NULL;
	return j ? j : json_string(text ? text : "?"); /* nan, inf */
}

/*
 * Whether the commits after generation @p last up to @p gen touch one of
 * the watched options (each given with its alias's final target): the
 * library's answer (shmcfg_changes: the commit records when they list every
 * option they changed, else the two generations compared), and in any case
 * a change of value or source between the two snapshots watch read.
 */
static bool touches(shmcfg *h, const shmcfg_opt *watched, size_t nwatched, uint64_t last,
		    uint64_t gen, char **text, char **now, const shmcfg_source *src,
		    const shmcfg_source *nsrc, bool *changed)
{
	bool known = shmcfg_changes(h, last, gen, changed) >= 0;
	for (size_t k = 0; k < nwatched; k++) {
		shmcfg_opt i = watched[k];
		if ((known && changed[i]) || strcmp(text[i], now[i]) || src[i] != nsrc[i])
			return true;
	}
	return false;
}

/* Whether option i is listed: every option, or one watched. */
static bool listed(const shmcfg_opt *watched, size_t nwatched, shmcfg_opt i)
{
	if (!nwatched)
		return true;
	for (size_t k = 0; k < nwatched; k++)
		if (watched[k] == i)
			return true;
	return false;
}

int cmd_watch(int argc, char **argv)
{
	bool json = false, have_count = false, have_timeout = false, quiet = false;
	uint64_t count = 0;
	double timeout = 0;
	int c, ec = 0;
	while ((c = next_opt(argc, argv, &ec)) != -1) {
		switch (c) {
		case -2:
			return ec;
		case 'J':
			json = true;
			break;
		case 'q':
			quiet = true;
			break;
		case 'c':
			if (!parse_u64(optarg, &count) || count == 0)
				return usage_error("--count takes a positive number, not '%s'", optarg);
			have_count = true;
			break;
		case 't':
			if (duration_arg("--timeout", optarg, &timeout))
				return EXIT_USAGE;
			have_timeout = true;
			break;
		}
	}
	if (optind >= argc)
		return usage_error("missing segment NAME");
	const char *seg = argv[optind];
	shmcfg *h;
	int r;
	if (open_segment(seg, true, &h))
		return EXIT_FAIL;
	uint32_t n = shmcfg_count(h);
	char **text = calloc(n ? n : 1, sizeof *text), **now = calloc(n ? n : 1, sizeof *now);
	shmcfg_source *src = calloc(n ? n : 1, sizeof *src), *nsrc = calloc(n ? n : 1, sizeof *nsrc);
	bool *is_alias = calloc(n ? n : 1, sizeof *is_alias), *changed = calloc(n ? n : 1, sizeof *changed);
	/* OPTION...: the final targets of the options named (what commits write) */
	size_t nwatched = (size_t)(argc - optind - 1);
	shmcfg_opt *watched = calloc(nwatched ? nwatched : 1, sizeof *watched);
	uint64_t last = 0, seen = 0;
	int rc = EXIT_OK;
	if (!text || !now || !src || !nsrc || !is_alias || !changed || !watched)
		rc = fail("out of memory");
	for (size_t k = 0; rc == EXIT_OK && k < nwatched; k++) {
		shmcfg_opt o;
		shmcfg_optinfo oi;
		if ((rc = resolve_option(h, argv[optind + 1 + k], &o)))
			break;
		watched[k] = shmcfg_opt_info(h, o, &oi) == 0 ? oi.alias_final : o;
	}
	for (uint32_t i = 0; rc == EXIT_OK && i < n; i++) {
		shmcfg_optinfo oi;
		is_alias[i] = shmcfg_opt_info(h, i, &oi) == 0 && oi.alias != SHMCFG_NO_OPT;
	}
	if (rc == EXIT_OK && (r = read_state(h, text, src, &last)))
		rc = fail_lib(r, seg);

	/* before the line below: a script that signals once it has seen it
	 * must not kill us by the default action */
	struct sigaction sa = {.sa_handler = on_signal}; /* no SA_RESTART: the wait returns */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	/* on stderr, so that stdout has the commits only; a script can wait
	 * for this line before it commits */
	if (rc == EXIT_OK && !quiet) {
		fprintf(stderr, "shmctl: watching '%s' from generation %llu\n", seg, (unsigned long long)last);
		fflush(stderr);
	}
	uint64_t deadline = have_timeout ? mono_ns() + (uint64_t)(timeout * 1e9) : 0;
	bool done = false;
	while (rc == EXIT_OK && !done && !stop_signal) {
		/* at most WATCH_SLICE_MS per wait: a signal that comes after the
		 * check of stop_signal above but before the wait sleeps does not
		 * interrupt it, and shmcfg_wait() returns only on a commit, a
		 * retirement, EINTR or its timeout */
		int ms = WATCH_SLICE_MS;
		if (have_timeout) {
			uint64_t t = mono_ns();
			if (t >= deadline)
				break;
			uint64_t left = (deadline - t + 999999) / 1000000;
			if (left < (uint64_t)ms)
				ms = (int)left;
		}
		uint64_t g;
		r = shmcfg_wait(h, last, ms, &g);
		if (r == -ETIMEDOUT || r == -EINTR)
			continue; /* the loop checks the deadline and signals */
		if (r) {
			rc = fail_lib(r, seg);
			break;
		}
		uint64_t gen;
		if ((r = read_state(h, now, nsrc, &gen))) {
			rc = fail_lib(r, seg);
			break;
		}
		if (nwatched && !touches(h, watched, nwatched, last, gen, text, now, src, nsrc, changed)) {
			advance(text, now, src, nsrc, n);
			last = gen;
			continue;
		}
		uint64_t missed = gen - last - 1;
		shmcfg_commit ci;
		bool have_ci = shmcfg_commit_info(h, gen, &ci) == 0;
		/* the user and process names are the history's (as log prints
		 * them), while it still has the generation */
		shmcfg_history_entry *he = NULL;
		if (have_ci && shmcfg_history_get(h, gen, &he) != 0)
			he = NULL;
		char when[48] = "?", who[320] = "unknown committer";
		if (have_ci) {
			time_local(ci.time_ns, when, sizeof when);
			/* who, user and process: printable UTF-8 (the library's);
			 * the cluster revision the generation carries, as log says,
			 * none once the history lost it (carried_revision) */
			committer_text(he ? he->user : "", ci.uid, he ? he->process : "", ci.pid, ci.who,
				       he ? he->cluster_rev : 0, who, sizeof who);
		}
		if (json) {
			json_t *o = json_object(), *changes = json_array();
			json_object_set_new(o, "generation", json_integer((json_int_t)gen));
			json_object_set_new(o, "missed", json_integer((json_int_t)missed));
			if (have_ci) {
				char ts[48];
				time_utc(ci.time_ns, ts, sizeof ts);
				json_object_set_new(o, "time", json_string(ts));
				json_object_set_new(o, "time_ns", json_integer((json_int_t)ci.time_ns));
				json_object_set_new(o, "pid", json_integer(ci.pid));
				json_object_set_new(o, "uid", json_integer(ci.uid));
				json_object_set_new(o, "user", he && he->user[0] ? json_string(he->user) : json_null());
				json_object_set_new(o, "process", he ? json_string(he->process) : json_null());
				json_object_set_new(o, "who", json_string(ci.who));
				json_object_set_new(o, "cluster_revision", carried_revision(he));
			} else {
				json_object_set_new(o, "time", json_null());
				json_object_set_new(o, "pid", json_null());
				json_object_set_new(o, "uid", json_null());
				json_object_set_new(o, "user", json_null());
				json_object_set_new(o, "process", json_null());
				json_object_set_new(o, "who", json_null());
				json_object_set_new(o, "cluster_revision", json_null());
			}
			for (uint32_t i = 0; i < n; i++) {
				if (is_alias[i] || (!strcmp(text[i], now[i]) && src[i] == nsrc[i]) ||
				    !listed(watched, nwatched, i))
					continue;
				json_t *e = json_object();
				json_object_set_new(e, "name", json_string(opt_name(h, i)));
				json_object_set_new(e, "old", text_json(text[i]));
				json_object_set_new(e, "new", text_json(now[i]));
				json_object_set_new(e, "old_source", json_string(shmcfg_source_name(src[i])));
				json_object_set_new(e, "new_source", json_string(shmcfg_source_name(nsrc[i])));
				json_array_append_new(changes, e);
			}
			json_object_set_new(o, "changes", changes);
			json_print(o, true);
		} else {
			if (missed)
				printf("%smissed %llu commit%s%s (generations %llu..%llu)\n", color(C_YELLOW),
				       (unsigned long long)missed, missed == 1 ? "" : "s", color(C_RESET),
				       (unsigned long long)last + 1, (unsigned long long)gen - 1);
			printf("%sgeneration %llu%s  %s  %s:", color(C_BOLD), (unsigned long long)gen,
			       color(C_RESET), when, who);
			int k = 0;
			for (uint32_t i = 0; i < n; i++) {
				if (is_alias[i] || (!strcmp(text[i], now[i]) && src[i] == nsrc[i]) ||
				    !listed(watched, nwatched, i))
					continue;
				printf("%s %s: ", k++ ? "," : "", opt_name(h, i));
				if (strcmp(text[i], now[i]))
					printf("%s -> %s%s%s", text[i], color(C_BOLD), now[i], color(C_RESET));
				else
					printf("%s (%s -> %s)", now[i], shmcfg_source_name(src[i]),
					       shmcfg_source_name(nsrc[i]));
			}
			if (!k)
				printf(" no value changed");
			putchar('\n');
		}
		shmcfg_history_free(he);
		fflush(stdout);
		seen += nwatched ? 1 : gen - last; /* filtered: the commits shown */
		last = gen;
		advance(text, now, src, nsrc, n);
		if (have_count && seen >= count)
			done = true;
	}
	if (rc == EXIT_OK && have_count && !done) /* the timeout (or a signal) came first */
		rc = fail("%llu of the %llu commits seen before the watch ended", (unsigned long long)seen,
			  (unsigned long long)count);
	for (uint32_t i = 0; i < n; i++) {
		if (text)
			free(text[i]);
		if (now)
			free(now[i]);
	}
	free(text);
	free(now);
	free(src);
	free(nsrc);
	free(is_alias);
	free(changed);
	free(watched);
	shmcfg_close(h);
	return rc;
}
