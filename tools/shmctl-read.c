/* SPDX-License-Identifier: MIT */
/*
 * shmctl: the read commands about options: ls, show, get, describe,
 * schema. Each attaches read-only, so a user who may only read a segment
 * can use them.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cluster-keys.h"
#include "shmctl.h"

#define PROBE_TIMEOUT_MS 10000
/* an option without doc, as show -v and describe say it: one word for both */
#define NO_DOC "(none)"

/* ------------------------------------------------------------------ */
/* ls                                                                 */
/* ------------------------------------------------------------------ */

/* What an entry of /dev/shm named like a segment is. */
enum kind {
	KIND_SEGMENT,     /* a segment (maybe one that cannot be read: err) */
	KIND_NOT_SEGMENT, /* not a regular file, sparse, or bad magic */
	KIND_UNTRUSTED,   /* owned by another user than the caller, root or --owner */
};
static const char *const kind_name[] = {"segment", "not a segment", "untrusted"};

/* What ls learns of one segment. Plain data: it crosses a pipe. */
struct probe {
	bool ok, attached_exact;
	int kind;
	char err[400];
	uint64_t generation, created_ns;
	uint32_t nopts, readers, nattached, npids;
	int32_t pids[64];
};

/* The library's detail without "NAME: " (the row shows it) and without a
 * trailing ", not a segment" (the note says it). */
static void reason_of(int r, const char *name, char *buf, size_t len)
{
	const char *det = shmcfg_errdetail();
	size_t nl = strlen(name);
	if (r == -EACCES)
		snprintf(buf, len, "permission denied");
	else if (det && *det)
		snprintf(buf, len, "%s", !strncmp(det, name, nl) && det[nl] == ':' && det[nl + 1] ? det + nl + 2 : det);
	else
		snprintf(buf, len, "%s", shmcfg_strerror(r));
	size_t bl = strlen(buf), tl = strlen(", not a segment");
	if (bl > tl && !strcmp(buf + bl - tl, ", not a segment"))
		buf[bl - tl] = 0;
}

static void probe_segment(const char *name, struct probe *p)
{
	memset(p, 0, sizeof *p);
	shmcfg *h = NULL;
	int r = attach_segment(name, true, &h);
	if (r) {
		/* read the detail before any other library call */
		reason_of(r, name, p->err, sizeof p->err);
		p->kind = r == SHMCFG_E_MAGIC ? KIND_NOT_SEGMENT : r == SHMCFG_E_OWNER ? KIND_UNTRUSTED : KIND_SEGMENT;
		return;
	}
	shmcfg_info *info = malloc(sizeof *info);
	if (!info || (r = shmcfg_stat(h, info))) {
		reason_of(r ? r : -ENOMEM, name, p->err, sizeof p->err);
		free(info);
		shmcfg_close(h);
		return;
	}
	struct reader_list rl = {0};
	p->ok = true;
	p->generation = info->generation;
	p->nopts = info->nopts;
	p->created_ns = info->create_time_ns;
	shmcfg_readers(h, collect_reader, &rl);
	for (size_t k = 0; k < rl.n; k++)
		p->readers += rl.r[k].alive;
	free(rl.r);
	/* the processes that map it, this probe left out */
	pid_t pids[64];
	bool exact = false;
	int n = attached_processes(name, pids, 64, &exact);
	if (n >= 0) {
		p->nattached = (uint32_t)n;
		p->npids = n < 64 ? (uint32_t)n : 64;
		for (uint32_t k = 0; k < p->npids; k++)
			p->pids[k] = pids[k];
		p->attached_exact = exact;
	}
	free(info);
	shmcfg_close(h);
}

/*
 * ls reads every segment of the host, also ones that nobody named and that
 * may be damaged in ways the library does not survive: each is read in a
 * child process, so that one bad segment costs its own row, not the listing.
 */
struct probe_set {
	char **names;
	struct probe *probes;
	size_t n;
};

static void probe_set_free(struct probe_set *ps)
{
	for (size_t i = 0; i < ps->n; i++)
		free(ps->names[i]);
	free(ps->names);
	free(ps->probes);
}

static void probe_isolated(struct probe_set *ps, size_t i)
{
	const char *name = ps->names[i];
	struct probe *p = &ps->probes[i];
	int fds[2];
	if (pipe(fds) < 0) {
		probe_segment(name, p);
		return;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		close(fds[0]);
		close(fds[1]);
		probe_segment(name, p);
		return;
	}
	if (pid == 0) {
		close(fds[0]);
		probe_segment(name, p);
		const char *b = (const char *)p;
		size_t left = sizeof *p;
		while (left) {
			ssize_t w = write(fds[1], b, left);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				_exit(1);
			b += w;
			left -= (size_t)w;
		}
		probe_set_free(ps); /* what the parent owns: for leak checkers */
		_exit(0);
	}
	close(fds[1]);
	/* bounded: the library's own waits are (an unfinished creation: 1 s),
	 * and a probe that hangs all the same costs its row, not the listing */
	size_t got = 0;
	bool timed_out = false;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (got < sizeof *p) {
		clock_gettime(CLOCK_MONOTONIC, &t1);
		long left = PROBE_TIMEOUT_MS - ((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000);
		struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
		int pr = left > 0 ? poll(&pfd, 1, (int)left) : 0;
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr == 0) {
			timed_out = true;
			kill(pid, SIGKILL);
			break;
		}
		ssize_t k = read(fds[0], (char *)p + got, sizeof *p - got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	close(fds[0]);
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (timed_out) {
		memset(p, 0, sizeof *p);
		snprintf(p->err, sizeof p->err, "reading it did not finish within %d s", PROBE_TIMEOUT_MS / 1000);
		return;
	}
	if (got == sizeof *p && WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return;
	memset(p, 0, sizeof *p);
	if (WIFSIGNALED(status))
		snprintf(p->err, sizeof p->err, "reading it crashed (signal %d, %s): the segment is damaged",
			 WTERMSIG(status), strsignal(WTERMSIG(status)));
	else
		snprintf(p->err, sizeof p->err, "reading it failed (exit status %d): the segment is damaged",
			 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

struct orphan_rows {
	struct table *t;
	json_t *arr;
};

static void orphan_row(const shmcfg_orphan *o, void *ud)
{
	struct orphan_rows *rows = ud;
	char note[600], owner[64];
	/* or the new segment a replacement killed before its rename left */
	bool unfinished = strstr(o->path, "/shmcfg-new.") != NULL, copy = strstr(o->path, "/shmcfg-schema.") != NULL;
	const char *kind = unfinished ? "unfinished replacement" : copy ? "orphaned schema copy" : "orphaned lock object";
	snprintf(note, sizeof note, "%s %s: %s (shmctl gc removes it)", kind, o->path,
		 unfinished ? "its replacer is gone" : copy ? "no segment has its schema" : "its segment is gone");
	if (rows->arr) {
		/* the fields of every entry, null where a segment would have a
		 * value (as for one that cannot be read), and its path */
		json_t *j = json_pack("{s:o?, s:s, s:o?, s:n, s:i, s:n, s:n, s:n, s:n, s:n, s:[], s:n, s:n, s:o?}",
				      "name", json_foreign(o->name), "kind", kind, "path", json_foreign(o->path),
				      "size", "uid", (int)o->uid, "mode", "generation", "options", "attached",
				      "attached_exact", "pids", "readers", "created_ns", "error", json_foreign(note));
		if (j)
			json_array_append_new(rows->arr, j);
		return;
	}
	user_name(o->uid, owner, sizeof owner);
	const char *cells[] = {o->name, "-", "-", "-", "-", owner, "-", "-"};
	table_row(rows->t, cells);
	table_note(rows->t, note);
	table_color(rows->t, 0, C_YELLOW);
}

int cmd_ls(int argc, char **argv)
{
	bool json = false;
	int ec = 0;
	if (simple_args(argc, argv, &json, NULL, 0, &ec))
		return ec;
	char **names = NULL;
	size_t n = 0;
	if (list_segments(&names, &n))
		return EXIT_FAIL;

	static const char *const hdr[] = {"NAME", "SIZE", "GENERATION", "OPTIONS", "ATTACHED", "OWNER", "MODE", "CREATED"};
	/* every segment first, before any output is built */
	struct probe_set ps = {names, calloc(n ? n : 1, sizeof *ps.probes), n};
	struct stat *sts = calloc(n ? n : 1, sizeof *sts);
	bool *have_st = calloc(n ? n : 1, sizeof *have_st);
	if (!ps.probes || !sts || !have_st) {
		probe_set_free(&ps);
		free(sts);
		free(have_st);
		return fail("out of memory");
	}
	for (size_t i = 0; i < n; i++) {
		char path[512];
		struct probe *p = &ps.probes[i];
		snprintf(path, sizeof path, "%s/%s%s", SHM_DIR, SHM_PREFIX, names[i]);
		/* lstat: a symbolic link is shown as itself, never followed */
		have_st[i] = lstat(path, &sts[i]) == 0;
		const struct stat *st = &sts[i];
		/* what is not a segment at a glance is not opened at all */
		if (have_st[i] && !S_ISREG(st->st_mode)) {
			p->kind = KIND_NOT_SEGMENT;
			snprintf(p->err, sizeof p->err, "%.300s is %s", path, file_kind(st->st_mode));
		} else if (have_st[i] && (uint64_t)st->st_blocks * 512 < (uint64_t)st->st_size) {
			/* shmcfg_create allocates every page before it writes anything */
			p->kind = KIND_NOT_SEGMENT;
			snprintf(p->err, sizeof p->err, "object is sparse (%llu of %llu bytes allocated)",
				 (unsigned long long)st->st_blocks * 512, (unsigned long long)st->st_size);
		} else
			probe_isolated(&ps, i);
	}
	struct table *t = json ? NULL : table_new(8, hdr);
	json_t *arr = json ? json_array() : NULL;
	for (size_t i = 0; i < n; i++) {
		const struct probe *p = &ps.probes[i];
		const struct stat *st = &sts[i];
		char size[32] = "-", gen[32] = "-", nopts[16] = "-", att[16] = "-",
		     owner[64] = "-", mode[16] = "-", created[40] = "-";
		if (have_st[i]) {
			human_size((uint64_t)st->st_size, size, sizeof size);
			user_name(st->st_uid, owner, sizeof owner);
			snprintf(mode, sizeof mode, "%04o", (unsigned)(st->st_mode & 07777));
		}
		if (p->ok) {
			snprintf(gen, sizeof gen, "%llu", (unsigned long long)p->generation);
			snprintf(nopts, sizeof nopts, "%u", p->nopts);
			snprintf(att, sizeof att, "%u%s", p->nattached, p->attached_exact ? "" : "+");
			time_local(p->created_ns, created, sizeof created);
		}
		if (json) {
			json_t *o = json_object();
			json_object_set_new(o, "name", json_foreign(names[i]));
			json_object_set_new(o, "kind", json_string(kind_name[p->kind]));
			json_object_set_new(o, "size", have_st[i] ? json_integer(st->st_size) : json_null());
			json_object_set_new(o, "uid", have_st[i] ? json_integer(st->st_uid) : json_null());
			json_object_set_new(o, "mode", have_st[i] ? json_string(mode) : json_null());
			if (p->ok) {
				json_t *pids = json_array();
				for (uint32_t k = 0; k < p->npids; k++)
					json_array_append_new(pids, json_integer(p->pids[k]));
				json_object_set_new(o, "generation", json_integer((json_int_t)p->generation));
				json_object_set_new(o, "options", json_integer(p->nopts));
				json_object_set_new(o, "attached", json_integer(p->nattached));
				json_object_set_new(o, "attached_exact", json_boolean(p->attached_exact));
				json_object_set_new(o, "pids", pids);
				json_object_set_new(o, "readers", json_integer(p->readers));
				json_object_set_new(o, "created_ns", json_integer((json_int_t)p->created_ns));
				json_object_set_new(o, "error", json_null());
			} else {
				json_object_set_new(o, "generation", json_null());
				json_object_set_new(o, "options", json_null());
				json_object_set_new(o, "attached", json_null());
				json_object_set_new(o, "attached_exact", json_null());
				json_object_set_new(o, "pids", json_array());
				json_object_set_new(o, "readers", json_null());
				json_object_set_new(o, "created_ns", json_null());
				json_object_set_new(o, "error", json_foreign(p->err));
			}
			json_array_append_new(arr, o);
		} else {
			const char *cells[] = {names[i], size, gen, nopts, att, owner, mode, created};
			table_row(t, cells);
			if (!p->ok) {
				char note[440];
				snprintf(note, sizeof note, "%s: %s",
					 p->kind == KIND_SEGMENT ? "error" : kind_name[p->kind], p->err);
				table_note(t, note);
				table_color(t, 0, p->kind == KIND_SEGMENT ? C_RED : C_YELLOW);
			}
		}
	}
	probe_set_free(&ps);
	free(sts);
	free(have_st);
	/* the lock objects whose segment is gone: shmctl gc removes them */
	struct orphan_rows rows = {t, arr};
	if (shmcfg_orphans(NULL, 0, orphan_row, &rows) < 0)
		warn_msg("cannot look for orphaned lock objects: %s", shmcfg_errdetail());
	if (json)
		return json_print(arr, false);
	table_print(t);
	return EXIT_OK;
}

/* ------------------------------------------------------------------ */
/* show                                                               */
/* ------------------------------------------------------------------ */

struct named {
	const char *name;
	shmcfg_opt opt;
};

static int cmp_named(const void *a, const void *b)
{
	return strcmp(((const struct named *)a)->name, ((const struct named *)b)->name);
}

static bool has_glob(const char *p)
{
	return strpbrk(p, "*?[") != NULL;
}

/* PATTERN: a glob on the full name or on a dotted suffix of it; or a substring. */
static bool pattern_match(const char *pat, const char *name)
{
	if (!has_glob(pat))
		return strstr(name, pat) != NULL;
	if (fnmatch(pat, name, 0) == 0)
		return true;
	for (const char *p = name; (p = strchr(p, '.')); p++)
		if (fnmatch(pat, p + 1, 0) == 0)
			return true;
	return false;
}

/* An alias's fields of show --json and describe --json: "alias", the final
 * target (where every read and write goes), and "alias_of", the option it
 * names (its direct target); both null for an option that is no alias. */
static void alias_json(shmcfg *h, const shmcfg_optinfo *oi, json_t *o)
{
	bool is = oi->alias != SHMCFG_NO_OPT;
	json_object_set_new(o, "alias", is ? json_string(opt_name(h, oi->alias_final)) : json_null());
	json_object_set_new(o, "alias_of", is ? json_string(opt_name(h, oi->alias)) : json_null());
}

/* The option's default as shown: the final target's. */
static void final_info(shmcfg *h, const shmcfg_optinfo *oi, shmcfg_optinfo *fi)
{
	if (oi->alias_final == SHMCFG_NO_OPT || shmcfg_opt_info(h, oi->alias_final, fi))
		*fi = *oi;
}

/* Take a snapshot and, for it, every option's is_default: retried until the
 * generation did not move meanwhile, so both belong to one generation. */
static int snapshot_with_defaults(shmcfg *h, uint64_t at, shmcfg_snapshot **snap, bool *isdef)
{
	uint32_t n = shmcfg_count(h);
	if (at) { /* an older generation: rebuilt, and judged on its own */
		int r = shmcfg_snapshot_at(h, at, snap);
		if (r)
			return fail_lib(r, shmcfg_name(h));
		for (uint32_t i = 0; i < n; i++)
			isdef[i] = shmcfg_snapshot_is_default(*snap, i) == 1;
		return 0;
	}
	for (int round = 0;; round++) {
		int r = shmcfg_snapshot_acquire(h, snap);
		if (r)
			return fail_lib(r, shmcfg_name(h));
		uint64_t gen = shmcfg_snapshot_generation(*snap);
		for (uint32_t i = 0; i < n; i++) {
			r = shmcfg_is_default(h, i);
			isdef[i] = r == 1;
		}
		if (shmcfg_generation(h) == gen || round >= 20)
			return 0;
		shmcfg_snapshot_release(*snap);
	}
}

int cmd_show(int argc, char **argv)
{
	bool nondef = false, verbose = false, json = false, names_only = false;
	uint64_t gen = 0;
	int c, ec = 0;
	while ((c = next_opt(argc, argv, &ec)) != -1) {
		switch (c) {
		case -2:
			return ec;
		case 'G':
			if (parse_generation(optarg, &gen, &ec))
				return ec;
			break;
		case 'n':
			nondef = true;
			break;
		case 'v':
			verbose = true;
			break;
		case 'J':
			json = true;
			break;
		case 'N':
			names_only = true;
			break;
		}
	}
	if (optind >= argc)
		return usage_error("missing segment NAME");
	if (argc - optind > 2)
		return usage_error("unexpected argument '%s'", argv[optind + 2]);
	const char *seg = argv[optind];
	const char *pat = argc - optind > 1 ? argv[optind + 1] : NULL;
	shmcfg *h;
	if (open_segment(seg, true, &h))
		return EXIT_FAIL;
	uint32_t n = shmcfg_count(h);

	if (names_only) {
		/* every full name, then the short unique names */
		for (uint32_t i = 0; i < n; i++)
			puts(opt_name(h, i));
		/* last parts that name one option (after aliases), each once:
		 * sorted by last part, a run of equal ones must share a final */
		struct named *lp = calloc(n ? n : 1, sizeof *lp);
		for (uint32_t i = 0; lp && i < n; i++) {
			const char *full = opt_name(h, i), *dot = strrchr(full, '.');
			lp[i] = (struct named){dot ? dot + 1 : full, i};
		}
		if (lp)
			qsort(lp, n, sizeof *lp, cmp_named);
		for (uint32_t i = 0, j; lp && i < n; i = j) {
			bool one = true;
			shmcfg_optinfo a, b;
			if (shmcfg_opt_info(h, lp[i].opt, &a))
				a.alias_final = lp[i].opt;
			for (j = i + 1; j < n && !strcmp(lp[j].name, lp[i].name); j++)
				if (shmcfg_opt_info(h, lp[j].opt, &b) || b.alias_final != a.alias_final)
					one = false;
			if (one && strcmp(lp[i].name, opt_name(h, lp[i].opt)))
				puts(lp[i].name);
		}
		free(lp);
		shmcfg_close(h);
		return EXIT_OK;
	}

	struct named *order = calloc(n ? n : 1, sizeof *order);
	bool *isdef = calloc(n ? n : 1, sizeof *isdef);
	if (!order || !isdef) {
		free(order);
		free(isdef);
		shmcfg_close(h);
		return fail("out of memory");
	}
	for (uint32_t i = 0; i < n; i++)
		order[i] = (struct named){opt_name(h, i), i};
	qsort(order, n, sizeof *order, cmp_named);

	shmcfg_snapshot *snap;
	if (snapshot_with_defaults(h, gen, &snap, isdef)) {
		free(order);
		free(isdef);
		shmcfg_close(h);
		return EXIT_FAIL;
	}
	static const char *const hdr[] = {"NAME", "VALUE", "TYPE", "SOURCE", "DEFAULT"};
	struct table *t = json ? NULL : table_new(5, hdr);
	table_shrink(t, 1, 12);
	table_shrink(t, 4, 12);
	json_t *arr = json ? json_array() : NULL;
	size_t matched = 0;
	int rc = EXIT_OK;
	for (uint32_t k = 0; k < n; k++) {
		shmcfg_opt i = order[k].opt;
		shmcfg_optinfo oi, fi;
		if (shmcfg_opt_info(h, i, &oi))
			continue;
		if (pat && !pattern_match(pat, oi.name))
			continue;
		matched++;
		if (nondef && isdef[i])
			continue;
		final_info(h, &oi, &fi);
		shmcfg_value v;
		int r = shmcfg_snapshot_get(snap, i, &v);
		if (r) {
			rc = fail_lib(r, oi.name);
			break;
		}
		char tbuf[16];
		if (json) {
			json_t *o = json_object();
			json_object_set_new(o, "name", json_string(oi.name));
			json_object_set_new(o, "type", json_string(shmcfg_type_name(fi.type)));
			json_object_set_new(o, "nullable", json_boolean(fi.flags & SHMCFG_F_NULLABLE));
			json_object_set_new(o, "value", value_json(&v));
			json_object_set_new(o, "default", value_json(&fi.def));
			json_object_set_new(o, "source", json_string(shmcfg_source_name(v.source)));
			json_object_set_new(o, "is_default", json_boolean(isdef[i]));
			alias_json(h, &oi, o);
			json_object_set_new(o, "hash_ignored", json_boolean(fi.flags & SHMCFG_F_HASH_IGNORED));
			json_object_set_new(o, "deprecated",
					    oi.deprecated ? json_foreign(oi.deprecated) : json_null());
			json_object_set_new(o, "doc", json_foreign(oi.doc ? oi.doc : ""));
			json_array_append_new(arr, o);
		} else {
			char *val = value_text(&v), *def = value_text(&fi.def);
			const char *cells[] = {oi.name, val ? val : "?",
					       type_label(fi.type, fi.flags & SHMCFG_F_NULLABLE, tbuf, sizeof tbuf),
					       shmcfg_source_name(v.source), def ? def : "?"};
			table_row(t, cells);
			if (!isdef[i])
				table_color(t, 1, C_BOLD);
			table_color(t, 3, source_color(v.source));
			if (verbose) {
				char *note = NULL;
				const char *doc = oi.doc && *oi.doc ? oi.doc : NO_DOC;
				if (oi.alias != SHMCFG_NO_OPT) {
					if (asprintf(&note, "alias of %s\n%s", opt_name(h, oi.alias_final), doc) < 0)
						note = NULL;
				}
				table_note_lines(t, note ? note : doc);
				free(note);
			}
			free(val);
			free(def);
		}
	}
	shmcfg_snapshot_release(snap);
	if (rc == EXIT_OK && pat && matched == 0)
		rc = fail("no option matches '%s' in segment '%s'", pat, seg);
	if (json) {
		if (rc == EXIT_OK)
			rc = json_print(arr, false);
		else
			json_decref(arr);
	} else if (rc == EXIT_OK)
		table_print(t);
	else
		table_free(t); /* nothing printed on failure */
	free(order);
	free(isdef);
	shmcfg_close(h);
	return rc;
}

/* ------------------------------------------------------------------ */
/* get, describe                                                      */
/* ------------------------------------------------------------------ */

/* Option opt's value in snap as get prints it (malloc'd), or NULL with the
 * error printed. One line each when several (one_line): a string with a
 * line break prints as a JSON string, as set reads it back. */
static char *get_text(shmcfg *h, shmcfg_snapshot *snap, shmcfg_opt opt, bool json, bool raw, bool one_line)
{
	/* named first: a library call after the read would clear its detail */
	const char *full = opt_name(h, opt);
	shmcfg_value v;
	int r = shmcfg_snapshot_get(snap, opt, &v);
	if (r) {
		fail_lib(r, full);
		return NULL;
	}
	/* a deprecated option warns on stderr, as a set does: reads by handle
	 * never warn, the library's lookup of the name does */
	shmcfg_opt same;
	int lr = shmcfg_lookup(h, full, &same);
	(void)lr; /* found before: only its warning matters */
	char *text;
	if (json && !v.is_null && v.type == SHMCFG_FLOAT && !isfinite(v.u.f)) {
		json_t *j = value_json(&v); /* "nan", as a dump writes it */
		text = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
		json_decref(j);
	} else if (!json && !raw && one_line && !v.is_null && v.type == SHMCFG_STR &&
		   memchr(v.u.str.ptr, '\n', v.u.str.len)) {
		text = value_text(&v);
	} else {
		text = json ? value_text(&v) : raw ? value_raw(&v) : value_plain(&v);
	}
	if (!text)
		fail("out of memory");
	return text;
}

int cmd_get(int argc, char **argv)
{
	bool json = false, raw = false;
	uint64_t gen = 0;
	int c, ec = 0;
	while ((c = next_opt(argc, argv, &ec)) != -1) {
		if (c == -2)
			return ec;
		if (c == 'J')
			json = true;
		if (c == 'r')
			raw = true;
		if (c == 'G' && parse_generation(optarg, &gen, &ec))
			return ec;
	}
	if (json && raw)
		return usage_error("--json and --raw exclude each other");
	if (optind >= argc)
		return usage_error("missing segment NAME");
	if (optind + 1 >= argc)
		return usage_error("missing OPTION");
	const char *seg = argv[optind];
	int n = argc - optind - 1;
	if (raw && n > 1)
		return usage_error("--raw prints one option (a string's line breaks would split the lines)");
	shmcfg *h;
	if (open_segment(seg, true, &h))
		return EXIT_FAIL;
	shmcfg_opt *opts = calloc((size_t)n, sizeof *opts);
	char **texts = calloc((size_t)n, sizeof *texts);
	shmcfg_snapshot *snap = NULL;
	int rc = opts && texts ? 0 : fail("out of memory"), r;
	/* every name resolved, then every value read from one generation, then
	 * printed: an error prints no value */
	for (int i = 0; rc == 0 && i < n; i++)
		rc = resolve_option(h, argv[optind + 1 + i], &opts[i]);
	if (rc == 0 && (r = snapshot_of(h, gen, &snap)))
		rc = fail_lib(r, seg);
	for (int i = 0; rc == 0 && i < n; i++)
		if (!(texts[i] = get_text(h, snap, opts[i], json, raw, n > 1)))
			rc = EXIT_FAIL;
	for (int i = 0; rc == 0 && i < n; i++)
		puts(texts[i]);
	for (int i = 0; texts && i < n; i++)
		free(texts[i]);
	free(texts);
	free(opts);
	shmcfg_snapshot_release(snap);
	shmcfg_close(h);
	return rc;
}

/* NUL-separated list of n names as a JSON array / ", "-joined text. */
static json_t *names_json(const char *list, size_t n)
{
	json_t *a = json_array();
	for (size_t i = 0; list && i < n; i++, list += strlen(list) + 1)
		json_array_append_new(a, json_foreign(list));
	return a;
}

static char *names_text(const char *list, size_t n)
{
	size_t len = 1;
	const char *p = list;
	for (size_t i = 0; p && i < n; i++, p += strlen(p) + 1)
		len += strlen(p) + 2;
	char *out = malloc(len);
	if (!out)
		return NULL;
	out[0] = 0;
	p = list;
	for (size_t i = 0; p && i < n; i++, p += strlen(p) + 1) {
		if (i)
			strcat(out, ", ");
		strcat(out, p);
	}
	return out;
}

/* An implication's {"option", "value"}: the implier and what it sets, or the target */
static json_t *implication_json(const char *name, const shmcfg_value *v)
{
	json_t *e = json_object();
	json_object_set_new(e, "option", json_string(name));
	json_object_set_new(e, "value", value_json(v));
	return e;
}

/*
 * Every option's "aliases" (the options whose chain of aliases passes it:
 * its alias, an alias of one of its aliases...) and "implied_by" (the
 * implications that target it), in one pass over the schema: al[i] and
 * ib[i], arrays for the caller to json_decref and free (relations_free).
 * 0 or -ENOMEM. describe takes one option's, schema --json every one's.
 */
struct relations {
	uint32_t n;
	json_t **al, **ib;
};

static void relations_free(struct relations *rel)
{
	for (uint32_t i = 0; i < rel->n; i++) {
		json_decref(rel->al ? rel->al[i] : NULL);
		json_decref(rel->ib ? rel->ib[i] : NULL);
	}
	free(rel->al);
	free(rel->ib);
}

static int relations_of(shmcfg *h, struct relations *rel)
{
	uint32_t n = shmcfg_count(h);
	*rel = (struct relations){n, calloc(n ? n : 1, sizeof *rel->al), calloc(n ? n : 1, sizeof *rel->ib)};
	int r = rel->al && rel->ib ? 0 : -ENOMEM;
	for (uint32_t i = 0; !r && i < n; i++)
		if (!(rel->al[i] = json_array()) || !(rel->ib[i] = json_array()))
			r = -ENOMEM;
	for (uint32_t i = 0; !r && i < n; i++) {
		shmcfg_optinfo ii, ai;
		if (shmcfg_opt_info(h, i, &ii))
			continue;
		ai = ii; /* each option its chain passes: a chain is at most as long as the schema */
		for (uint32_t steps = 0; steps < n && ai.alias < n; steps++) {
			if (ai.alias != i)
				json_array_append_new(rel->al[ai.alias], json_string(ii.name));
			if (shmcfg_opt_info(h, ai.alias, &ai))
				break;
		}
		for (size_t k = 0; k < ii.n_implies; k++) {
			shmcfg_opt tgt;
			shmcfg_value iv;
			if (!shmcfg_opt_implies(h, i, k, &tgt, &iv) && tgt < n)
				json_array_append_new(rel->ib[tgt], implication_json(ii.name, &iv));
		}
	}
	if (r)
		relations_free(rel);
	return r;
}

/* option_attrs_json's aliases and implied_by of option i (final target fin), new references */
static json_t *aliases_of(const struct relations *rel, uint32_t i)
{
	return i < rel->n ? json_incref(rel->al[i]) : json_array();
}
static json_t *implied_by_of(const struct relations *rel, uint32_t fin)
{
	return fin < rel->n ? json_incref(rel->ib[fin]) : json_array();
}

/*
 * An option's attributes of describe --json that its schema gives (those of
 * its final target for an alias, but its own name, doc and deprecation),
 * after "layers": flags, variables, knob, alias fields, aliases, bounds,
 * choices, implications, deprecation, doc. aliases and implied_by (taken)
 * are the caller's: schema --json finds every option's in one pass.
 */
static void option_attrs_json(shmcfg *h, const shmcfg_optinfo *oi, const shmcfg_optinfo *fi, json_t *aliases,
			      json_t *implied_by, json_t *o)
{
	json_t *jflags = json_array();
	static const struct {
		unsigned bit;
		const char *name;
	} flagnames[] = {
		{SHMCFG_F_NULLABLE, "nullable"},         {SHMCFG_F_HASH_IGNORED, "hash_ignored"},
		{SHMCFG_F_SAVE_IGNORED, "save_ignored"}, {SHMCFG_F_DEPRECATED, "deprecated"},
		{SHMCFG_F_PRIVATE, "private"},
	};
	for (size_t k = 0; k < sizeof flagnames / sizeof flagnames[0]; k++)
		if ((fi->flags | oi->flags) & flagnames[k].bit)
			json_array_append_new(jflags, json_string(flagnames[k].name));
	json_object_set_new(o, "flags", jflags);
	json_object_set_new(o, "env_default", names_json(fi->env_default, fi->n_env_default));
	json_object_set_new(o, "env_force", names_json(fi->env_force, fi->n_env_force));
	json_object_set_new(o, "knob", fi->knob ? json_foreign(fi->knob) : json_null());
	alias_json(h, oi, o);
	/* an earlier name of "alias" (when describe's "alias" was alias_of): kept for scripts */
	json_object_set(o, "alias_final", json_object_get(o, "alias"));
	json_object_set_new(o, "aliases", aliases);
	json_object_set_new(o, "min", fi->has_min ? value_json(&fi->min) : json_null());
	json_object_set_new(o, "max", fi->has_max ? value_json(&fi->max) : json_null());
	json_t *choices = json_array();
	for (const char *it = NULL; (it = shmcfg_list_next(&fi->choices, it));)
		json_array_append_new(choices, json_foreign(it));
	json_object_set_new(o, "choices", choices);
	json_t *implies = json_array();
	for (size_t k = 0; k < fi->n_implies; k++) {
		shmcfg_opt tgt;
		shmcfg_value iv;
		if (!shmcfg_opt_implies(h, oi->alias_final, k, &tgt, &iv))
			json_array_append_new(implies, implication_json(opt_name(h, tgt), &iv));
	}
	json_object_set_new(o, "implies", implies);
	json_object_set_new(o, "implied_by", implied_by);
	json_object_set_new(o, "deprecated", fi->deprecated ? json_foreign(fi->deprecated)
				: oi->deprecated ? json_foreign(oi->deprecated) : json_null());
	json_object_set_new(o, "doc", json_foreign(oi->doc ? oi->doc : ""));
}

/* The options of schema --json: each with describe --json's keys but those
 * of the values (value, source, is_default, generation, layers). 0, or a
 * library code / -ENOMEM. */
static int schema_options_json(shmcfg *h, json_t **ret)
{
	struct relations rel;
	int r = relations_of(h, &rel);
	if (r)
		return r;
	json_t *arr = json_array();
	r = arr ? 0 : -ENOMEM;
	for (uint32_t i = 0; !r && i < rel.n; i++) {
		shmcfg_optinfo oi, fi;
		json_t *o = json_object();
		if (!o || json_array_append_new(arr, o)) {
			r = -ENOMEM;
			break;
		}
		if ((r = shmcfg_opt_info(h, i, &oi)))
			break;
		final_info(h, &oi, &fi);
		/* describe's keys in describe's order, those of the values left out */
		json_object_set_new(o, "name", json_string(oi.name));
		json_object_set_new(o, "type", json_string(shmcfg_type_name(fi.type)));
		json_object_set_new(o, "nullable", json_boolean(fi.flags & SHMCFG_F_NULLABLE));
		json_object_set_new(o, "default", value_json(&fi.def));
		option_attrs_json(h, &oi, &fi, aliases_of(&rel, i), implied_by_of(&rel, oi.alias_final), o);
	}
	relations_free(&rel);
	if (r)
		json_decref(arr);
	else
		*ret = arr;
	return r;
}

int cmd_describe(int argc, char **argv)
{
	bool json = false;
	const char *pos[2];
	uint64_t gen;
	int ec = 0;
	if (generation_args(argc, argv, &json, &gen, pos, 2, &ec))
		return ec;
	shmcfg *h;
	if (open_segment(pos[0], true, &h))
		return EXIT_FAIL;
	shmcfg_opt opt;
	if (resolve_option(h, pos[1], &opt)) {
		shmcfg_close(h);
		return EXIT_FAIL;
	}
	shmcfg_optinfo oi, fi;
	shmcfg_snapshot *snap;
	int r;
	if ((r = shmcfg_opt_info(h, opt, &oi))) {
		shmcfg_close(h);
		return fail_lib(r, pos[1]);
	}
	/* the values, layers and is_default of one generation: -G's, as get reads it */
	if ((r = snapshot_of(h, gen, &snap))) {
		shmcfg_close(h);
		return fail_lib(r, pos[0]);
	}
	final_info(h, &oi, &fi);
	shmcfg_opt fin = oi.alias_final;
	shmcfg_value v;
	if ((r = shmcfg_snapshot_get(snap, opt, &v))) {
		shmcfg_snapshot_release(snap);
		shmcfg_close(h);
		return fail_lib(r, oi.name);
	}
	int isdef = shmcfg_snapshot_is_default(snap, opt);
	static const shmcfg_source layers[] = {SHMCFG_SRC_DEFAULT, SHMCFG_SRC_KNOB,    SHMCFG_SRC_ENV_DEFAULT,
					       SHMCFG_SRC_CLUSTER, SHMCFG_SRC_USER, SHMCFG_SRC_ENV_FORCE};
	json_t *o = json_object();
	json_t *jl = json_object();
	char tbuf[16];
	json_object_set_new(o, "name", json_string(oi.name));
	json_object_set_new(o, "type", json_string(shmcfg_type_name(fi.type)));
	json_object_set_new(o, "nullable", json_boolean(fi.flags & SHMCFG_F_NULLABLE));
	json_object_set_new(o, "value", value_json(&v));
	json_object_set_new(o, "source", json_string(shmcfg_source_name(v.source)));
	json_object_set_new(o, "default", value_json(&fi.def));
	json_object_set_new(o, "is_default", json_boolean(isdef == 1));
	json_object_set_new(o, "generation", json_integer((json_int_t)shmcfg_snapshot_generation(snap)));
	/* the layers of the final target: set ones with their value */
	char layer_text[2048] = "";
	size_t lt = 0;
	for (size_t k = 0; k < sizeof layers / sizeof layers[0]; k++) {
		shmcfg_value lv;
		r = shmcfg_snapshot_layer(snap, fin, layers[k], &lv);
		if (r < 0)
			continue; /* the option has no such layer */
		const char *ln = shmcfg_source_name(layers[k]);
		if (r == 1) {
			json_object_set_new(jl, ln, json_null());
			continue;
		}
		json_t *lj = json_object();
		json_object_set_new(lj, "value", value_json(&lv));
		json_object_set(jl, ln, lj);
		json_decref(lj);
		char *tv = value_text(&lv);
		if (lt < sizeof layer_text)
			lt += (size_t)snprintf(layer_text + lt, sizeof layer_text - lt, "%s%s=%s",
					       lt ? "  " : "", ln, tv ? tv : "?");
		free(tv);
	}
	json_object_set_new(o, "layers", jl);
	struct relations rel;
	if ((r = relations_of(h, &rel))) {
		json_decref(o);
		shmcfg_snapshot_release(snap);
		shmcfg_close(h);
		return fail_lib(r, pos[1]);
	}
	option_attrs_json(h, &oi, &fi, aliases_of(&rel, opt), implied_by_of(&rel, fin), o);
	relations_free(&rel);
	shmcfg_snapshot_release(snap);

	if (json) {
		shmcfg_close(h);
		return json_print(o, false);
	}
	/* human form: from the JSON object, so both always agree */
	printf("%s%s%s\n", color(C_BOLD), oi.name, color(C_RESET));
	char *vt = value_text(&v), *dt = value_text(&fi.def);
	kv("type", type_label(fi.type, fi.flags & SHMCFG_F_NULLABLE, tbuf, sizeof tbuf), NULL);
	kv("value", vt ? vt : "?", isdef == 1 ? NULL : C_BOLD);
	kv("source", shmcfg_source_name(v.source), source_color(v.source));
	kv("default", dt ? dt : "?", NULL);
	free(vt);
	free(dt);
	kv("layers", *layer_text ? layer_text : "-", NULL);
	char flag_text[128] = "";
	for (size_t k = 0; k < json_array_size(json_object_get(o, "flags")); k++) {
		const char *f = json_string_value(json_array_get(json_object_get(o, "flags"), k));
		if (f && strlen(flag_text) + strlen(f) + 3 < sizeof flag_text) {
			if (*flag_text)
				strcat(flag_text, ", ");
			strcat(flag_text, f);
		}
	}
	if (*flag_text)
		kv("flags", flag_text, NULL);
	if (oi.alias != SHMCFG_NO_OPT) {
		char via[600];
		snprintf(via, sizeof via, oi.alias == fin ? "%s" : "%s (through %s)", opt_name(h, fin),
			 opt_name(h, oi.alias));
		kv("alias of", via, C_BLUE);
	}
	char *aliases_txt = NULL;
	size_t na = json_array_size(json_object_get(o, "aliases"));
	if (na) {
		json_t *a = json_object_get(o, "aliases");
		size_t len = 1;
		for (size_t k = 0; k < na; k++)
			len += strlen(json_string_value(json_array_get(a, k))) + 2;
		aliases_txt = calloc(1, len);
		for (size_t k = 0; aliases_txt && k < na; k++) {
			if (k)
				strcat(aliases_txt, ", ");
			strcat(aliases_txt, json_string_value(json_array_get(a, k)));
		}
		if (aliases_txt)
			kv("aliases", aliases_txt, NULL);
		free(aliases_txt);
	}
	if (fi.n_env_default) {
		char *s = names_text(fi.env_default, fi.n_env_default);
		kv("env_default", s ? s : "?", NULL);
		free(s);
	}
	if (fi.n_env_force) {
		char *s = names_text(fi.env_force, fi.n_env_force);
		kv("env_force", s ? s : "?", NULL);
		free(s);
	}
	if (fi.knob)
		kv("knob", fi.knob, NULL);
	if (fi.has_min) {
		char *s = value_text(&fi.min);
		kv("min", s ? s : "?", NULL);
		free(s);
	}
	if (fi.has_max) {
		char *s = value_text(&fi.max);
		kv("max", s ? s : "?", NULL);
		free(s);
	}
	if (fi.choices.u.list.count && !fi.choices.is_null) {
		char *s = value_text(&fi.choices);
		kv("choices", s ? s : "?", NULL);
		free(s);
	}
	for (int which = 0; which < 2; which++) {
		json_t *a = json_object_get(o, which ? "implied_by" : "implies");
		for (size_t k = 0; k < json_array_size(a); k++) {
			json_t *e = json_array_get(a, k);
			char *val = json_for_terminal(
				json_dumps(json_object_get(e, "value"), JSON_ENCODE_ANY | JSON_COMPACT));
			char *line; /* whole: a cut could end inside an escape */
			if (asprintf(&line, which ? "%s (while true: %s)" : "%s=%s", /* the implier, and what it sets */
				     json_string_value(json_object_get(e, "option")), val ? val : "?") < 0)
				line = NULL;
			kv(k ? "" : which ? "implied by" : "implies", line ? line : "?", NULL);
			free(line);
			free(val);
		}
	}
	json_t *dep = json_object_get(o, "deprecated");
	if (json_is_string(dep))
		kv("deprecated", json_string_value(dep), C_RED);
	printf("  %sdoc%s\n", color(C_BOLD), color(C_RESET));
	const char *doc = oi.doc && *oi.doc ? oi.doc : NO_DOC;
	while (*doc) { /* the doc's own line breaks, each line indented and escaped as kv's */
		size_t l = strcspn(doc, "\n");
		char *line = term_escaped(doc, l);
		printf("    %s\n", line ? line : "?");
		free(line);
		doc += l + (doc[l] ? 1 : 0);
	}
	json_decref(o);
	shmcfg_close(h);
	return EXIT_OK;
}

/* ------------------------------------------------------------------ */
/* schema                                                             */
/* ------------------------------------------------------------------ */

/* schema --json: {"name", "schema_hash", "options": [...]}, each option as
 * describe --json has it without the values (what the schema file says,
 * in the keys scripts already read) */
static int schema_json(shmcfg *h)
{
	uint8_t hash[16];
	char hex[33];
	shmcfg_schema_hash(h, hash);
	hex16(hash, hex);
	json_t *opts;
	int r = schema_options_json(h, &opts);
	if (r)
		return fail_lib(r, shmcfg_name(h));
	return json_print(json_pack("{s:s, s:s, s:o}", "name", shmcfg_name(h), "schema_hash", hex, "options", opts),
			  false);
}

int cmd_schema(int argc, char **argv)
{
	const char *pos[1];
	bool json = false;
	int ec = 0;
	if (simple_args(argc, argv, &json, pos, 1, &ec))
		return ec;
	shmcfg *h;
	if (open_segment(pos[0], true, &h))
		return EXIT_FAIL;
	if (json) {
		int rc = schema_json(h);
		shmcfg_close(h);
		return rc;
	}
	char *text = NULL;
	int r = ck_schema_text(h, &text);
	shmcfg_close(h);
	if (r)
		return fail_lib(r, pos[0]);
	fputs(text, stdout);
	free(text);
	return EXIT_OK;
}

/* ------------------------------------------------------------------ */
/* __complete (hidden, for the bash completion)                       */
/* ------------------------------------------------------------------ */

/*
 * shmctl __complete values NAME OPTION: the values worth offering after
 * "OPTION=" in `set`, one a line: true and false for a bool, the choices of
 * an option that has them, none for a nullable one. Nothing for the others
 * (and nothing, exit 1, for a name that does not resolve: a completion
 * prints no errors). One attach: fast enough for each TAB.
 */
int complete_values(const char *seg, const char *option)
{
	shmcfg *h;
	shmcfg_opt opt;
	shmcfg_optinfo oi, fi;
	if (attach_segment(seg, true, &h))
		return EXIT_FAIL;
	int rc = EXIT_FAIL;
	if (shmcfg_resolve(h, option, &opt) || shmcfg_opt_info(h, opt, &oi) ||
	    shmcfg_opt_info(h, oi.alias_final, &fi))
		goto out;
	if (fi.type == SHMCFG_BOOL)
		printf("true\nfalse\n");
	if (!fi.choices.is_null)
		for (const char *it = NULL; (it = shmcfg_list_next(&fi.choices, it));)
			printf("%s\n", it);
	if (fi.flags & SHMCFG_F_NULLABLE)
		printf("none\n");
	rc = EXIT_OK;
out:
	shmcfg_close(h);
	return rc;
}
