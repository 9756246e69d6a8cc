/* SPDX-License-Identifier: MIT */
/*
 * shmctl: the commands that change segments: create, rm, set, reset, load,
 * gc; and save, which writes the user layer to a file that create --load
 * reads back. set, reset and load (of any number of files) are one
 * transaction each: one commit, one generation, or nothing.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kmap.h"
#include "shmctl.h"

/* ------------------------------------------------------------------ */
/* The files a load reads: load, create --load, --load-dir, --conf    */
/* ------------------------------------------------------------------ */

/* A file to load: its name in messages and its text. */
struct source {
	char *label;
	char *text;
	size_t len;
};

struct sources {
	struct source *v;
	size_t n, cap;
};

static void sources_free(struct sources *s)
{
	for (size_t i = 0; i < s->n; i++) {
		free(s->v[i].label);
		free(s->v[i].text);
	}
	free(s->v);
	*s = (struct sources){0};
}

/*
 * Read FILE ("-": standard input) onto the list. A file found in a
 * directory (@p listed) must be a regular file (a symbolic link to one is
 * followed): a directory or device planted there is refused, not read. 0,
 * or EXIT_FAIL with the error printed.
 */
static int add_file(struct sources *s, const char *path, bool listed)
{
	const char *label = strcmp(path, "-") ? path : "<stdin>";
	struct stat st;
	if (listed && stat(path, &st))
		return fail("%s: %s", path, strerror(errno));
	if (listed && !S_ISREG(st.st_mode))
		return fail("%s: not a regular file (%s)", path, S_ISDIR(st.st_mode) ? "a directory" : "a device, FIFO or socket");
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 4;
		struct source *v = realloc(s->v, cap * sizeof *v);
		if (!v)
			return fail("out of memory");
		s->v = v;
		s->cap = cap;
	}
	struct source *src = &s->v[s->n];
	int r = read_file(path, &src->text, &src->len);
	if (r)
		return fail("%s: %s", label, read_file_error(r));
	if (!(src->label = strdup(label))) {
		free(src->text);
		return fail("out of memory");
	}
	s->n++;
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * A configuration directory, as sysctl.d: its files whose name ends in
 * .json and does not begin with a dot (an editor's backups and temporary
 * files, save's own, are left alone), in byte order of their names, so
 * that a later one overrides an earlier one. A directory that does not
 * exist adds nothing when @p missing_ok. 0, or EXIT_FAIL (printed).
 */
static int add_dir(struct sources *s, const char *dir, bool missing_ok)
{
	DIR *d = opendir(dir);
	if (!d && errno == ENOENT && missing_ok)
		return 0;
	if (!d)
		return fail("%s: %s", dir, strerror(errno));
	char **names = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;
	struct dirent *e;
	while (!rc && (e = readdir(d))) {
		size_t len = strlen(e->d_name);
		if (e->d_name[0] == '.' || len <= 5 || strcmp(e->d_name + len - 5, ".json"))
			continue;
		if (n == cap) {
			char **nn = realloc(names, (cap = cap ? 2 * cap : 16) * sizeof *nn);
			if (!nn) {
				rc = fail("out of memory");
				break;
			}
			names = nn;
		}
		if (!(names[n] = strdup(e->d_name)))
			rc = fail("out of memory");
		else
			n++;
	}
	closedir(d);
	if (n)
		qsort(names, n, sizeof *names, by_name);
	size_t dl = strlen(dir);
	for (size_t i = 0; !rc && i < n; i++) {
		char *path;
		if (asprintf(&path, "%.*s/%s", (int)(dl > 1 && dir[dl - 1] == '/' ? dl - 1 : dl), dir, names[i]) < 0)
			rc = fail("out of memory");
		else {
			rc = add_file(s, path, true);
			free(path);
		}
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return rc;
}

static int load_sources(shmcfg *h, struct sources *s, bool partial, const char *outcome, uint64_t *gen,
			bool *published, size_t *skipped);

/* ------------------------------------------------------------------ */
/* create, rm                                                         */
/* ------------------------------------------------------------------ */

/* The environment variables the creation applied, one line each, so that a
 * variable in the operator's shell is no surprise. A value that is not
 * plain printable text is shown in double quotes, with \" \\ and \xNN. */
static void print_env_applied(shmcfg *h)
{
	shmcfg_env_use u;
	for (size_t i = 0; shmcfg_env_applied(h, i, &u) == 0; i++) {
		bool plain = *u.value != 0;
		for (const char *p = u.value; *p; p++)
			plain &= *p > ' ' && *p < 0x7f && *p != '"' && *p != '\\';
		printf("environment: %s=%s", u.var, plain ? u.value : "\"");
		for (const unsigned char *p = (const unsigned char *)u.value; !plain && *p; p++)
			printf(*p == '"' || *p == '\\' ? "\\%c" : *p >= ' ' && *p < 0x7f ? "%c" : "\\x%02x", *p);
		printf("%s -> %s (%s)\n", plain ? "" : "\"", opt_name(h, u.opt), shmcfg_source_name(u.layer));
	}
}

/*
 * A replacement takes the env layers from this environment (as any
 * creation): print_env_applied() names the variables it applied; this names
 * the env layers it emptied: a variable of the old creator's environment
 * unset here, or any with --no-env. They are in the commit this process made right after the
 * replacement's own (which changes nothing): among the last few, as
 * others may have committed since.
 */
static void print_env_emptied(shmcfg *h, bool no_env)
{
	uint64_t cur = shmcfg_generation(h);
	for (uint64_t g = cur > 8 ? cur - 7 : 1; g <= cur; g++) {
		shmcfg_history_entry *e;
		if (shmcfg_history_get(h, g, &e))
			continue;
		bool env_only = e->pid == getpid() && e->values_kept;
		for (uint32_t i = 0; env_only && i < e->nchanges; i++)
			env_only = e->changes[i].layer == SHMCFG_SRC_ENV_DEFAULT ||
				   e->changes[i].layer == SHMCFG_SRC_ENV_FORCE;
		for (uint32_t i = 0; env_only && i < e->nchanges; i++) {
			const shmcfg_layer_change *c = &e->changes[i];
			if (!c->old_set || c->new_set)
				continue;
			char *old = value_text(&c->old_value);
			printf("environment: %s [%s]: %s -> unset (%s)\n", opt_name(h, c->opt),
			       shmcfg_source_name(c->layer), old ? old : "?",
			       no_env ? "--no-env" : "no variable of it is set here");
			free(old);
		}
		shmcfg_history_free(e);
	}
}

/* --conf: $SHMCFG_CONF_DIR, else /etc/shmcfg (as the sync unit's env file) */
static const char *conf_dir(void)
{
	const char *d = secure_getenv("SHMCFG_CONF_DIR");
	return d && *d ? d : "/etc/shmcfg";
}

/*
 * create --exist-ok found segment NAME: keep it if its schema is @p
 * schema's (NULL: the default). The schema's hash is a segment's: read
 * from a private one (as header does). 0 and *h attached read-write, or
 * EXIT_FAIL (printed).
 */
static int keep_existing(const char *seg, const shmcfg_schema *schema, const char *schema_label, shmcfg **h)
{
	shmcfg *p;
	int r = private_segment(schema, &p);
	if (r)
		return fail_lib(r, schema_label);
	uint8_t want[16], have[16];
	shmcfg_schema_hash(p, want);
	shmcfg_close(p);
	if (open_segment(seg, false, h))
		return EXIT_FAIL;
	shmcfg_schema_hash(*h, have);
	if (!memcmp(want, have, sizeof want))
		return 0;
	char w[33], hv[33];
	hex16(want, w);
	hex16(have, hv);
	*h = shmcfg_close(*h);
	return fail("segment '%s' exists with schema %s, not %s (%s): kept (create --force replaces it: its "
		    "processes learn it)", seg, hv, w, schema_label);
}

/* The sizes create and resize take: --slots, --size, --readers, --history. */
static int size_opt(int c, const char *arg, shmcfg_create_opts *o)
{
	uint64_t u;
	switch (c) {
	case 'k':
		if (!parse_u64(arg, &u) || u < 2 || u > 255)
			return usage_error("--slots takes a number 2-255, not '%s'", arg);
		o->slots = (uint32_t)u;
		break;
	case 'S':
		/* the library's bounds of a value heap, as a usage error here */
		if (!parse_size(arg, &u) || u < 1024 || u > (4ull << 30))
			return usage_error("--size takes a byte count from 1K to 4G (suffixes K, M, G), not '%s'", arg);
		o->heap_bytes = u;
		break;
	case 'R':
		if (!parse_u64(arg, &u) || u == 0 || u > 65536)
			return usage_error("--readers takes a number 1-65536, not '%s'", arg);
		o->readers = (uint32_t)u;
		break;
	case 'H':
		if (!parse_u64(arg, &u) || u < 8 || u > 1048576)
			return usage_error("--history takes a number of commits 8-1048576, not '%s'", arg);
		o->history = (uint32_t)u;
		break;
	}
	return 0;
}

/* create without --force found the name taken: by a segment, or by
 * something else (a FIFO, a directory: as ls says) */
static int exists_error(const char *seg)
{
	char path[512];
	struct stat st;
	snprintf(path, sizeof path, "%s/%s%s", SHM_DIR, SHM_PREFIX, seg);
	if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode))
		return fail("'%s' exists and is not a segment: %s is %s (remove it, or use --force)", seg, path,
			    file_kind(st.st_mode));
	/* a file planted or spoiled under the name: say what attach says of it */
	shmcfg *h = NULL;
	int r = shmcfg_attach(seg, SHMCFG_ATTACH_RDONLY, NULL, &h);
	shmcfg_close(h);
	if (r == SHMCFG_E_MAGIC || r == SHMCFG_E_CORRUPT || r == SHMCFG_E_VERSION)
		return fail("'%s' exists and is not a segment this library can read: %s (remove it with shmctl rm, "
			    "or use --force)",
			    seg, shmcfg_errdetail());
	return fail("segment '%s' exists (remove it with shmctl rm, or use --force)", seg);
}

int cmd_create(int argc, char **argv)
{
	shmcfg_create_opts o = {0};
	const char *schema_path = NULL;
	bool quiet = false, conf = false, exist_ok = false, fresh = false;
	/* --load and --load-dir in the order given: c is 'l' or 'D' */
	struct {
		int c;
		const char *path;
	} loads[argc];
	size_t nloads = 0;
	uint64_t u;
	int c, ec = 0;
	while ((c = next_opt(argc, argv, &ec)) != -1) {
		switch (c) {
		case -2:
			return ec;
		case 's':
			schema_path = optarg;
			break;
		case 'k':
		case 'S':
		case 'R':
		case 'H':
			if ((ec = size_opt(c, optarg, &o)))
				return ec;
			break;
		case 'm': {
			char *end;
			errno = 0;
			unsigned long m = strtoul(optarg, &end, 8);
			if (errno || *end || !*optarg || *optarg == '-' || m == 0 || m > 0777)
				return usage_error("--mode takes octal permission bits 1-0777, not '%s'", optarg);
			o.mode = (mode_t)m;
			break;
		}
		case 'g': {
			struct group *gr = getgrnam(optarg);
			if (gr)
				o.gid = gr->gr_gid;
			else if (parse_u64(optarg, &u) && u < (gid_t)-1)
				o.gid = (gid_t)u;
			else
				return fail("no such group '%s'", optarg);
			break;
		}
		case 'E':
			o.flags |= SHMCFG_CREATE_NO_ENV;
			break;
		case 'f':
			o.flags |= SHMCFG_CREATE_FORCE;
			break;
		case 'F':
			fresh = true;
			break;
		case 'l':
		case 'D':
			loads[nloads].c = c;
			loads[nloads++].path = optarg;
			break;
		case 'c':
			conf = true;
			break;
		case 'e':
			exist_ok = true;
			break;
		case 'q':
			quiet = true;
			break;
		}
	}
	const char *pos[1];
	if (take_positionals(argc, argv, pos, 1, &ec))
		return ec;
	if (exist_ok && o.flags & SHMCFG_CREATE_FORCE)
		return usage_error("--exist-ok keeps a segment, --force replaces it: not both");
	if (fresh && !(o.flags & SHMCFG_CREATE_FORCE))
		return usage_error("--fresh is for --force: what a replaced segment held is kept unless it is given");
	/* whom to trust in the segment --force replaces (another user's) */
	if (have_owner && !(o.flags & SHMCFG_CREATE_FORCE))
		return usage_error("--owner is for --force: it names the owner of the segment replaced");
	if (have_owner)
		o.flags |= SHMCFG_CREATE_OWNER, o.owner = owner_uid;
	/* a segment replaced keeps its layers and history when its schema is
	 * the same; its processes follow the new one */
	if ((o.flags & SHMCFG_CREATE_FORCE) && !fresh)
		o.flags |= SHMCFG_CREATE_KEEP;
	const char *seg = pos[0];
	/* everything is read before the segment is made: a missing or
	 * malformed file changes nothing */
	struct sources src = {0};
	char *conf_schema = NULL, *conf_d = NULL;
	int rc = EXIT_OK, r;
	if (conf && (asprintf(&conf_schema, "%s/%s.yaml", conf_dir(), seg) < 0 ||
		     asprintf(&conf_d, "%s/%s.d", conf_dir(), seg) < 0))
		rc = fail("out of memory");
	if (!rc && conf && !schema_path && access(conf_schema, F_OK) == 0)
		schema_path = conf_schema;
	if (!rc && conf)
		rc = add_dir(&src, conf_d, true);
	/* a --conf that finds nothing is most likely the wrong directory or name */
	if (!rc && conf && !quiet && schema_path != conf_schema && access(conf_d, F_OK) != 0) {
		if (schema_path)
			warn_msg("--conf: %s does not exist: nothing loaded from it", conf_d);
		else
			warn_msg("--conf: neither %s nor %s exists: the default schema, nothing loaded", conf_schema,
				 conf_d);
	}
	for (size_t i = 0; !rc && i < nloads; i++)
		rc = loads[i].c == 'l' ? add_file(&src, loads[i].path, false) : add_dir(&src, loads[i].path, false);
	shmcfg_schema *schema = NULL;
	/* the detail names the file, or the directories a named schema was
	 * looked for in */
	if (!rc && schema_path && (r = shmcfg_schema_load(schema_path, &schema)))
		rc = fail_lib(r, schema_path);
	shmcfg *h = NULL;
	bool created = false;
	if (!rc) {
		/* --force: the library retires and removes the old segment (or
		 * says why it cannot: another user's object); name who is
		 * attached first */
		if (o.flags & SHMCFG_CREATE_FORCE)
			warn_attached(seg, "replaced");
		r = shmcfg_create(seg, schema, &o, &h);
		const char *det = shmcfg_errdetail();
		created = r == 0;
		if (r == -EEXIST && exist_ok)
			rc = keep_existing(seg, schema, schema_path ? schema_path : "the default schema", &h);
		else if (r == -EEXIST)
			rc = exists_error(seg);
		else if (r == -EACCES && !(det && strstr(det, "cannot remove")))
			rc = fail("segment '%s': permission denied", seg);
		else if (schema_path && (r == SHMCFG_E_SCHEMADEF || r == SHMCFG_E_CYCLE))
			rc = fail_lib(r, schema_path); /* "FILE:LINE: ...", as a parse error */
		else if (r)
			rc = fail_lib(r, seg);
	}
	shmcfg_schema_free(schema);
	/* the files, as one commit; a segment made here that they cannot be
	 * loaded into is removed: create --load makes it loaded, or not */
	char *outcome = NULL;
	if (!rc && src.n && asprintf(&outcome, created ? "segment '%s' not created" : "nothing loaded into '%s'", seg) < 0)
		rc = fail("out of memory");
	uint64_t gen = 0;
	bool published = false;
	size_t skipped;
	if (!rc && src.n)
		rc = load_sources(h, &src, false, outcome, &gen, &published, &skipped);
	if (!rc && !quiet && created) {
		shmcfg_info *info = malloc(sizeof *info);
		if (info && shmcfg_stat(h, info) == 0) {
			char size[32];
			human_size(info->size, size, sizeof size);
			/* a replacement's generations go on from the old segment's */
			bool replaced = (o.flags & SHMCFG_CREATE_FORCE) && info->generation > 1;
			printf("%s segment '%s': %u options, %u slots, %s, generation %llu\n",
			       replaced ? "replaced" : "created", seg, info->nopts, info->nslots, size,
			       (unsigned long long)info->generation);
		}
		print_env_applied(h);
		if (info && (o.flags & SHMCFG_CREATE_KEEP) && info->generation > 1)
			print_env_emptied(h, o.flags & SHMCFG_CREATE_NO_ENV);
		free(info);
	} else if (!rc && !quiet)
		printf("segment '%s' exists, of that schema: kept\n", seg);
	if (!rc && !quiet && src.n)
		printf("loaded %zu file%s into '%s'%s (generation %llu)\n", src.n, src.n == 1 ? "" : "s", seg,
		       published ? "" : ": nothing changed", (unsigned long long)gen);
	shmcfg_close(h);
	if (rc && created)
		(void)shmcfg_unlink(seg);
	free(outcome);
	free(conf_schema);
	free(conf_d);
	sources_free(&src);
	return rc;
}

int cmd_rm(int argc, char **argv)
{
	bool force = false;
	int c, ec = 0;
	while ((c = next_opt(argc, argv, &ec)) != -1) {
		if (c == -2)
			return ec;
		if (c == 'f')
			force = true;
	}
	if (optind >= argc)
		return usage_error("missing segment NAME");
	int rc = EXIT_OK;
	for (int i = optind; i < argc; i++) {
		warn_attached(argv[i], "removed");
		int r = shmcfg_unlink(argv[i]);
		if (r == -ENOENT && force)
			continue;
		if (r == -ENOENT)
			rc = fail("no such segment '%s'", argv[i]);
		else if (r == -EACCES || r == -EPERM)
			rc = fail("segment '%s': permission denied", argv[i]);
		else if (r)
			rc = fail_lib(r, argv[i]);
	}
	return rc;
}

/* ------------------------------------------------------------------ */
/* set, reset                                                         */
/* ------------------------------------------------------------------ */

struct change {
	shmcfg_opt opt;   /* as named */
	shmcfg_opt final; /* end of its alias chain: what is written */
	const char *value;
	char *old;        /* effective value before, as text */
	json_t *layer_old; /* the written layer's value before (NULL: not set), for --json */
};

/* The values before the change: effective, as text, for "old -> new", and
 * the written layer's, for --json. */
static int values_before(shmcfg *h, struct change *ch, size_t n, shmcfg_source layer)
{
	shmcfg_snapshot *snap;
	int r = shmcfg_snapshot_acquire(h, &snap);
	if (r)
		return fail_lib(r, shmcfg_name(h));
	for (size_t i = 0; i < n; i++) {
		shmcfg_value v;
		if (shmcfg_snapshot_get(snap, ch[i].final, &v) == 0)
			ch[i].old = value_text(&v);
		if (shmcfg_snapshot_layer(snap, ch[i].final, layer, &v) == 0)
			ch[i].layer_old = value_json(&v);
	}
	shmcfg_snapshot_release(snap);
	return 0;
}

/* "TORCH_A or TORCH_B" */
static void var_names(const char *list, size_t n, char *out, size_t len)
{
	size_t used = 0;
	out[0] = 0;
	for (size_t i = 0; list && i < n && used < len; i++, list += strlen(list) + 1) {
		int w = snprintf(out + used, len - used, "%s%s", i ? " or " : "", list);
		if (w > 0)
			used += (size_t)w;
	}
}

/*
 * After the commit: a value that a higher layer overrides is stored all the
 * same; say which layer wins, and why.
 */
static void warn_overridden(shmcfg *h, shmcfg_snapshot *snap, shmcfg_opt f, shmcfg_source written)
{
	shmcfg_value v;
	if (shmcfg_snapshot_get(snap, f, &v) || v.source <= written || v.source == SHMCFG_SRC_ALIAS)
		return;
	shmcfg_optinfo fi;
	if (shmcfg_opt_info(h, f, &fi))
		return;
	char why[1024] = "";
	char *val = value_text(&v);
	if (v.source == SHMCFG_SRC_ENV_FORCE || v.source == SHMCFG_SRC_ENV_DEFAULT) {
		char vars[600];
		bool force = v.source == SHMCFG_SRC_ENV_FORCE;
		size_t nv = force ? fi.n_env_force : fi.n_env_default;
		var_names(force ? fi.env_force : fi.env_default, nv, vars, sizeof vars);
		if (nv == 1)
			snprintf(why, sizeof why, " (%s=%s)", vars, val ? val : "?");
		else
			snprintf(why, sizeof why, " (%s from %s)", val ? val : "?", vars);
	} else if (v.source == SHMCFG_SRC_CLUSTER) {
		snprintf(why, sizeof why, " (%s, set cluster-wide: shmctl cluster show)", val ? val : "?");
	} else if (v.source == SHMCFG_SRC_IMPLIED) {
		size_t used = 0;
		for (uint32_t i = 0; i < shmcfg_count(h); i++) {
			shmcfg_optinfo ii;
			if (shmcfg_opt_info(h, i, &ii))
				continue;
			for (size_t k = 0; k < ii.n_implies; k++) {
				shmcfg_opt tgt;
				shmcfg_value iv, cur;
				if (shmcfg_opt_implies(h, i, k, &tgt, &iv) || tgt != f ||
				    shmcfg_snapshot_get(snap, i, &cur) || cur.is_null || cur.type != SHMCFG_BOOL ||
				    !cur.u.b)
					continue;
				if (used < sizeof why) {
					int w = snprintf(why + used, sizeof why - used, "%s%s=true",
							 used ? ", " : " (implied by ", ii.name);
					if (w > 0)
						used += (size_t)w;
				}
			}
		}
		if (used && used + 1 < sizeof why)
			strcat(why, ")");
	} else if (val)
		snprintf(why, sizeof why, " (%s)", val);
	warn_msg("%s: value stored in the %s layer, but the %s layer wins%s", fi.name,
		 shmcfg_source_name(written), shmcfg_source_name(v.source), why);
	free(val);
}

/*
 * set and reset write through a read-write handle and read through a
 * read-only one: a read-only handle's snapshots are private copies, so the
 * command leaves no pinned view behind (and no reclaimer thread).
 */
static int open_pair(const char *seg, shmcfg **rw, shmcfg **ro)
{
	if (open_segment(seg, false, rw))
		return EXIT_FAIL;
	if (open_segment(seg, true, ro)) {
		*rw = shmcfg_close(*rw);
		return EXIT_FAIL;
	}
	return 0;
}

/* --json of set and reset: the generation and each option whose written
 * layer changed, with the layer's value before and after (absent: not set). */
static json_t *changes_json(shmcfg *h, shmcfg_snapshot *snap, uint64_t gen, struct change *ch, size_t n,
			    shmcfg_source written)
{
	json_t *arr = json_array();
	for (size_t i = 0; arr && i < n; i++) {
		bool dup = false;
		for (size_t k = i + 1; k < n; k++)
			dup |= ch[k].final == ch[i].final;
		shmcfg_value v;
		json_t *now = shmcfg_snapshot_layer(snap, ch[i].final, written, &v) == 0 ? value_json(&v) : NULL;
		if (dup || (!now && !ch[i].layer_old) || (now && ch[i].layer_old && json_equal(now, ch[i].layer_old))) {
			json_decref(now);
			continue;
		}
		json_t *o = json_pack("{s:s, s:s}", "name", opt_name(h, ch[i].final), "layer",
				      shmcfg_source_name(written));
		if (o && ch[i].layer_old)
			json_object_set(o, "old", ch[i].layer_old);
		if (o && now)
			json_object_set(o, "new", now);
		json_decref(now);
		json_array_append_new(arr, o);
	}
	return json_pack("{s:I, s:o}", "generation", (json_int_t)gen, "changes", arr);
}

/*
 * fn for each option the commit of gen changed that was not written (ch):
 * the targets of an implication turned on or off (aliases left out: they
 * are their target's line), with the generation before it, rebuilt; fn
 * says whether it reported the option. The log's options are looked at,
 * or every option when it lists only some; the generation before is
 * rebuilt only if there is one (most commits imply nothing). The number
 * reported; none if the log or the generation before is gone.
 */
typedef bool implied_fn(shmcfg *h, shmcfg_opt o, shmcfg_snapshot *before, shmcfg_snapshot *now, void *ud);
static size_t each_implied(shmcfg *h, shmcfg *ro, shmcfg_snapshot *now, uint64_t gen, const struct change *ch,
			   size_t n, implied_fn *fn, void *ud)
{
	shmcfg_commit ci;
	if (gen < 2 || shmcfg_commit_info(ro, gen, &ci))
		return 0;
	bool all = ci.nids < ci.nchanged;
	uint32_t cands = all ? shmcfg_count(h) : ci.nids;
	shmcfg_snapshot *before = NULL;
	size_t reported = 0;
	for (uint32_t k = 0; k < cands; k++) {
		shmcfg_opt o = all ? k : ci.ids[k];
		shmcfg_optinfo oi;
		bool written = false;
		for (size_t i = 0; i < n && !written; i++)
			written = ch[i].final == o;
		if (written || shmcfg_opt_info(h, o, &oi) || oi.alias_final != o)
			continue;
		if (!before && shmcfg_snapshot_at(ro, gen - 1, &before))
			return reported;
		reported += fn(h, o, before, now, ud);
	}
	shmcfg_snapshot_release(before);
	return reported;
}

/* Whether o's value (as a read gets it) differs in now from before, as
 * text in *was and *is (to free): the one test of an implied change, so
 * that the text and --json name the same options */
static bool value_moved(shmcfg_snapshot *before, shmcfg_snapshot *now, shmcfg_opt o, char **was, char **is)
{
	shmcfg_value a, b;
	*was = shmcfg_snapshot_get(before, o, &a) == 0 ? value_text(&a) : NULL;
	*is = shmcfg_snapshot_get(now, o, &b) == 0 ? value_text(&b) : NULL;
	return *was && *is && strcmp(*was, *is);
}

/* "name: old -> new (implied)": the value it has now, and had */
static bool print_implied(shmcfg *h, shmcfg_opt o, shmcfg_snapshot *before, shmcfg_snapshot *now, void *unused)
{
	(void)unused;
	char *was, *is;
	bool moved = value_moved(before, now, o, &was, &is);
	if (moved)
		printf("%s: %s -> %s%s%s (implied)\n", opt_name(h, o), was, color(C_BOLD), is, color(C_RESET));
	free(was);
	free(is);
	return moved;
}

/* The value an implication gives o in snap (JSON), NULL if none does. */
static json_t *implied_value(shmcfg_snapshot *snap, shmcfg_opt o)
{
	shmcfg_value v;
	return shmcfg_snapshot_get(snap, o, &v) == 0 && v.source == SHMCFG_SRC_IMPLIED ? value_json(&v) : NULL;
}

/* --json: {"name", "layer": "implied", "old", "new"} of an option whose
 * value changed as an implication gave or took one (old or new absent: no
 * implication gave it one); one implied to the value it had is no change,
 * as in the text */
static bool json_implied(shmcfg *h, shmcfg_opt o, shmcfg_snapshot *before, shmcfg_snapshot *now, void *arr)
{
	char *was_text, *is_text;
	bool moved = value_moved(before, now, o, &was_text, &is_text);
	free(was_text);
	free(is_text);
	json_t *was = moved ? implied_value(before, o) : NULL, *is = moved ? implied_value(now, o) : NULL;
	json_t *c = moved ? json_pack("{s:s, s:s}", "name", opt_name(h, o), "layer", "implied") : NULL;
	if (c && was)
		json_object_set(c, "old", was);
	if (c && is)
		json_object_set(c, "new", is);
	if (c)
		json_array_append_new(arr, c);
	json_decref(was);
	json_decref(is);
	return moved;
}

/* Shared by set and reset: commit the transaction, report, warn. */
static int finish(shmcfg *h, shmcfg *ro, shmcfg_txn *t, struct change *ch, size_t n, bool quiet,
		  bool json, bool knob, bool report_unchanged)
{
	uint64_t gen;
	bool published;
	int r = shmcfg_txn_commit_ex(t, &gen, &published);
	if (r)
		return fail_lib(r, shmcfg_name(h));
	bool nothing = !published;
	shmcfg_snapshot *snap;
	/* the generation this commit made, not a later one of another writer
	 * (whose changes would read as this commit's) */
	if (!(published && shmcfg_snapshot_at(ro, gen, &snap) == 0) && (r = shmcfg_snapshot_acquire(ro, &snap)))
		return fail_lib(r, shmcfg_name(h));
	shmcfg_source written = knob ? SHMCFG_SRC_KNOB : SHMCFG_SRC_USER;
	for (size_t i = 0; i < n; i++) {
		if (!ch[i].value)
			continue; /* a reset */
		bool dup = false;
		for (size_t k = i + 1; k < n; k++)
			dup |= ch[k].final == ch[i].final && ch[k].value;
		if (!dup)
			warn_overridden(h, snap, ch[i].final, written);
	}
	int rc = EXIT_OK;
	if (json)
	{
		json_t *j = changes_json(h, snap, gen, ch, n, written);
		if (j && !nothing)
			each_implied(h, ro, snap, gen, ch, n, json_implied, json_object_get(j, "changes"));
		rc = json_print(j, false);
	}
	else if (!quiet) {
		size_t moved = 0; /* options whose value changed */
		for (size_t i = 0; i < n; i++) {
			shmcfg_value v;
			char *now = NULL;
			bool dup = false;
			for (size_t k = i + 1; k < n; k++)
				dup |= ch[k].final == ch[i].final;
			if (dup)
				continue;
			if (shmcfg_snapshot_get(snap, ch[i].final, &v) == 0)
				now = value_text(&v);
			bool same = ch[i].old && now && !strcmp(ch[i].old, now);
			if (same && report_unchanged)
				printf("%s: %s (unchanged)\n", opt_name(h, ch[i].final), now);
			else if (!same)
				printf("%s: %s -> %s%s%s\n", opt_name(h, ch[i].final), ch[i].old ? ch[i].old : "?",
				       color(C_BOLD), now ? now : "?", color(C_RESET));
			moved += !same;
			free(now);
		}
		if (!nothing)
			moved += each_implied(h, ro, snap, gen, ch, n, print_implied, NULL);
		if (report_unchanged) /* set, reset OPTION: the generation, as etcdctl's revision */
			printf("generation %llu%s\n", (unsigned long long)gen, nothing ? " (nothing changed)" : "");
		else if (nothing)
			printf("nothing changed (generation %llu)\n", (unsigned long long)gen);
		else
			printf("%s layer cleared: %zu option%s, %zu value%s changed (generation %llu)\n",
			       knob ? "knob" : "user", n, n == 1 ? "" : "s", moved, moved == 1 ? "" : "s",
			       (unsigned long long)gen);
	}
	shmcfg_snapshot_release(snap);
	return rc;
}

static void free_changes(struct change *ch, size_t n)
{
	for (size_t i = 0; ch && i < n; i++) {
		free(ch[i].old);
		json_decref(ch[i].layer_old);
	}
	free(ch);
}

int cmd_set(int argc, char **argv)
{
	bool knob = false, quiet = false, json = false;
	int c, ec = 0;
	while ((c = next_opt(argc, argv, &ec)) != -1) {
		if (c == -2)
			return ec;
		if (c == 'K')
			knob = true;
		if (c == 'q')
			quiet = true;
		if (c == 'J')
			json = true;
	}
	if (optind >= argc)
		return usage_error("missing segment NAME");
	if (optind + 1 >= argc)
		return usage_error("missing OPTION=VALUE");
	if ((ec = check_assignments(argc, argv, optind + 1)))
		return ec;
	const char *seg = argv[optind];
	shmcfg *h, *ro;
	if (open_pair(seg, &h, &ro))
		return EXIT_FAIL;
	size_t n = (size_t)(argc - optind - 1);
	struct change *ch = calloc(n, sizeof *ch);
	char **names = calloc(n, sizeof *names);
	int rc = ch && names ? EXIT_OK : fail("out of memory");
	for (size_t i = 0; rc == EXIT_OK && i < n; i++) {
		char *arg = argv[optind + 1 + (int)i], *eq = strchr(arg, '=');
		names[i] = strndup(arg, (size_t)(eq - arg));
		ch[i].value = eq + 1;
		if (!names[i])
			rc = fail("out of memory");
		else
			rc = resolve_final(h, names[i], &ch[i].opt, &ch[i].final);
		/* one value per option: a second (by name, suffix or alias) is
		 * a mistake, not a later one that wins */
		for (size_t k = 0; rc == EXIT_OK && k < i; k++)
			if (ch[k].final == ch[i].final)
				rc = usage_error("%s is given twice (%s and %s): one value per option",
						 opt_name(h, ch[i].final), names[k], names[i]);
	}
	shmcfg_txn *t = NULL;
	int r;
	if (rc == EXIT_OK)
		rc = values_before(ro, ch, n, knob ? SHMCFG_SRC_KNOB : SHMCFG_SRC_USER);
	if (rc == EXIT_OK && (r = shmcfg_txn_begin(h, &t)))
		rc = fail_lib(r, seg);
	if (rc == EXIT_OK && knob && (r = shmcfg_txn_layer(t, SHMCFG_SRC_KNOB)))
		rc = fail_lib(r, seg);
	for (size_t i = 0; rc == EXIT_OK && i < n; i++) {
		/* named first: a library call after the set would clear its detail */
		const char *full = opt_name(h, ch[i].opt);
		if ((r = shmcfg_txn_set_text(t, ch[i].opt, ch[i].value)))
			rc = fail_set(r, full, ch[i].value);
	}
	if (rc == EXIT_OK)
		rc = finish(h, ro, t, ch, n, quiet, json, knob, true);
	else
		shmcfg_txn_abort(t);
	for (size_t i = 0; names && i < n; i++)
		free(names[i]);
	free(names);
	free_changes(ch, n);
	shmcfg_close(ro);
	shmcfg_close(h);
	return rc;
}

int cmd_reset(int argc, char **argv)
{
	bool all = false, knob = false, quiet = false, json = false;
	int c, ec = 0;
	while ((c = next_opt(argc, argv, &ec)) != -1) {
		if (c == -2)
			return ec;
		if (c == 'a')
			all = true;
		if (c == 'K')
			knob = true;
		if (c == 'q')
			quiet = true;
		if (c == 'J')
			json = true;
	}
	if (optind >= argc)
		return usage_error("missing segment NAME");
	if (all && optind + 1 < argc)
		return usage_error("--all takes no OPTION");
	if (!all && optind + 1 >= argc)
		return usage_error("missing OPTION (or --all)");
	const char *seg = argv[optind];
	shmcfg *h, *ro;
	if (open_pair(seg, &h, &ro))
		return EXIT_FAIL;
	uint32_t nopts = shmcfg_count(h);
	size_t n = 0;
	struct change *ch = calloc(all ? (nopts ? nopts : 1) : (size_t)(argc - optind - 1), sizeof *ch);
	int rc = ch ? EXIT_OK : fail("out of memory");
	if (rc == EXIT_OK && all) {
		/* every option that holds its own value (aliases forward), and
		 * for the knob layer only those that declare a knob */
		shmcfg_snapshot *snap;
		int r = shmcfg_snapshot_acquire(ro, &snap);
		if (r)
			rc = fail_lib(r, seg);
		for (uint32_t i = 0; rc == EXIT_OK && i < nopts; i++) {
			shmcfg_optinfo oi;
			shmcfg_value v;
			if (shmcfg_opt_info(h, i, &oi) || oi.alias != SHMCFG_NO_OPT || (knob && !oi.knob))
				continue;
			/* only the layers that are set: no deprecation warning for
			 * options nobody touched */
			if (shmcfg_snapshot_layer(snap, i, knob ? SHMCFG_SRC_KNOB : SHMCFG_SRC_USER, &v) != 0)
				continue;
			ch[n++] = (struct change){.opt = i, .final = i};
		}
		if (rc == EXIT_OK)
			shmcfg_snapshot_release(snap);
	} else if (rc == EXIT_OK) {
		for (int i = optind + 1; rc == EXIT_OK && i < argc; i++) {
			if ((rc = resolve_final(h, argv[i], &ch[n].opt, &ch[n].final)))
				break;
			n++;
		}
	}
	shmcfg_txn *t = NULL;
	int r;
	if (rc == EXIT_OK)
		rc = values_before(ro, ch, n, knob ? SHMCFG_SRC_KNOB : SHMCFG_SRC_USER);
	if (rc == EXIT_OK && (r = shmcfg_txn_begin(h, &t)))
		rc = fail_lib(r, seg);
	if (rc == EXIT_OK && knob && (r = shmcfg_txn_layer(t, SHMCFG_SRC_KNOB)))
		rc = fail_lib(r, seg);
	for (size_t i = 0; rc == EXIT_OK && i < n; i++) {
		const char *full = opt_name(h, ch[i].opt); /* before the reset: see cmd_set */
		if ((r = shmcfg_txn_reset(t, ch[i].opt))) {
			if (r == SHMCFG_E_LAYER)
				rc = fail("%s: the option declares no knob (--knob)", full);
			else
				rc = fail_lib(r, full);
		}
	}
	if (rc == EXIT_OK)
		rc = finish(h, ro, t, ch, n, quiet, json, knob, !all);
	else
		shmcfg_txn_abort(t);
	free_changes(ch, n);
	shmcfg_close(ro);
	shmcfg_close(h);
	return rc;
}

/* ------------------------------------------------------------------ */
/* load                                                               */
/* ------------------------------------------------------------------ */

struct load_report {
	const char *label;
	size_t skipped;
};

static void load_warn(const char *msg, void *ud)
{
	struct load_report *lr = ud;
	size_t n = strlen(msg);
	/* the library ends the report of each value it skips so */
	if (n >= 7 && !strcmp(msg + n - 7, "skipped"))
		lr->skipped++;
	warn_msg("%s: %s", lr->label, msg);
}

/* The options' names by their last part (after the last dot), made at a
 * load's first name that is no full name: whether a key is what some
 * option's name ends in after a dot, in O(1) and the few names of that
 * last part. Only such a key goes to shmcfg_resolve(), whose "did you
 * mean" for an unknown name costs an edit distance to every option (a
 * file of 100,000 unknown keys took 47 s). */
struct last_parts {
	struct kmap map;
	struct lp_ent {
		struct kent k;      /* first member: the last part */
		uint32_t first;     /* the first option of this last part */
	} *ents;
	uint32_t *next;             /* the next option of the same last part */
	bool made, failed;
};

static bool is_suffix(const char *name, const char *key)
{
	size_t nl = strlen(name), kl = strlen(key);
	return nl == kl ? !strcmp(name, key) : nl > kl && name[nl - kl - 1] == '.' && !strcmp(name + nl - kl, key);
}

static bool may_be_suffix(shmcfg *h, struct last_parts *lp, const char *key)
{
	uint32_t n = shmcfg_count(h);
	if (!lp->made) {
		lp->made = true;
		lp->ents = calloc(n ? n : 1, sizeof *lp->ents);
		lp->next = calloc(n ? n : 1, sizeof *lp->next);
		lp->failed = !lp->ents || !lp->next;
		for (uint32_t i = n; !lp->failed && i-- > 0;) { /* chained in option order */
			const char *name = opt_name(h, i), *dot = strrchr(name, '.');
			struct lp_ent *e = (struct lp_ent *)kmap_find(&lp->map, dot ? dot + 1 : name);
			if (e) {
				lp->next[i] = e->first;
				e->first = i;
				continue;
			}
			lp->ents[i].k.key = (char *)(dot ? dot + 1 : name);
			lp->ents[i].first = i;
			lp->next[i] = UINT32_MAX;
			lp->failed = kmap_insert(&lp->map, &lp->ents[i].k) != 0;
		}
	}
	if (lp->failed)
		return true; /* out of memory: the library judges */
	const char *dot = strrchr(key, '.');
	const struct lp_ent *e = (const struct lp_ent *)kmap_find(&lp->map, dot ? dot + 1 : key);
	for (uint32_t i = e ? e->first : UINT32_MAX; i != UINT32_MAX; i = lp->next[i])
		if (is_suffix(opt_name(h, i), key))
			return true;
	return false;
}

/*
 * A load names options as `set` does (a unique suffix names its option):
 * the keys of the values object become full names, which the library's
 * load takes. An unknown name stays, for the load to refuse or skip; an
 * ambiguous one, or two names of one option, fail a strict load and are
 * skipped by a partial one. Text that is no JSON object is left to the
 * library to refuse. 0 (*text replaced when rewritten) or EXIT_FAIL.
 */
static int load_full_names(shmcfg *h, struct load_report *lr, bool partial, char **text, size_t *len)
{
	json_t *root = json_loadb(*text, *len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, NULL), *values = root;
	if (json_is_object(json_object_get(root, "values")) &&
	    (json_object_get(root, "format") || json_object_size(root) == 1))
		values = json_object_get(root, "values"); /* a dump, as shmcfg_load() tells it */
	if (!json_is_object(values)) {
		json_decref(root);
		return 0;
	}
	json_t *full = json_object();
	const char *key;
	struct last_parts lp = {0};
	json_t *j;
	int rc = full ? EXIT_OK : fail("out of memory");
	json_object_foreach(rc ? NULL : values, key, j) {
		shmcfg_opt opt;
		const char *name = key;
		int found = shmcfg_lookup(h, key, &opt) == 0 ? 1
			    : may_be_suffix(h, &lp, key) ? find_option(h, key, &opt)
							 : 0;
		if (found == 1)
			name = opt_name(h, opt);
		if (found == -1 && !partial) {
			/* the detail says which options it could be */
			rc = fail_lib(shmcfg_resolve(h, key, &opt), lr->label);
			break;
		}
		if (found == -1) {
			warn_msg("%s: option name '%s' is ambiguous; skipped", lr->label, key);
			lr->skipped++;
			continue;
		}
		if (json_object_get(full, name)) {
			if (!partial) {
				rc = fail("%s: two names of option %s; nothing loaded", lr->label, name);
				break;
			}
			warn_msg("%s: %s: named twice; skipped", lr->label, key);
			lr->skipped++;
			continue;
		}
		if (found == -ENOMEM || json_object_set(full, name, j))
			rc = fail("out of memory");
	}
	char *out = NULL;
	if (!rc && values != root)
		json_object_set(root, "values", full);
	if (!rc && !(out = json_dumps(values != root ? root : full,
				      JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17))))
		rc = fail("out of memory");
	if (out) {
		free(*text);
		*text = out;
		*len = strlen(out);
	}
	kmap_free(&lp.map);
	free(lp.ents);
	free(lp.next);
	json_decref(full);
	json_decref(root);
	return rc;
}

/*
 * Load the sources into the segment as one commit: each file in turn
 * (shmcfg_txn_load), so that a later file's value of an option overrides an
 * earlier one's, and an error names its file. @p outcome ends the line of
 * an error (NULL: load's own words). EXIT_OK, or EXIT_FAIL (printed:
 * nothing changed).
 */
static int load_sources(shmcfg *h, struct sources *s, bool partial, const char *outcome, uint64_t *gen,
			bool *published, size_t *skipped)
{
	shmcfg_txn *t;
	int r = shmcfg_txn_begin(h, &t);
	if (r)
		return fail_lib(r, shmcfg_name(h));
	*skipped = 0;
	for (size_t i = 0; i < s->n; i++) {
		struct source *src = &s->v[i];
		struct load_report lr = {src->label, 0};
		int rc = load_full_names(h, &lr, partial, &src->text, &src->len);
		if (!rc && (r = shmcfg_txn_load(t, src->text, src->len,
						partial ? SHMCFG_LOAD_PARTIAL : SHMCFG_LOAD_STRICT, load_warn, &lr))) {
			if (outcome)
				rc = fail("%s: %s; %s", lr.label, shmcfg_errdetail(), outcome);
			else if (r == SHMCFG_E_NOOPT || r == SHMCFG_E_SCHEMA)
				rc = fail("%s: %s; nothing loaded (load --partial loads what fits)", lr.label,
					  shmcfg_errdetail());
			else
				rc = fail_lib(r, lr.label);
		}
		*skipped += lr.skipped;
		if (rc) {
			shmcfg_txn_abort(t);
			return rc;
		}
	}
	/* a commit's refusal (a conflict of implications, a full heap) is
	 * the whole load's */
	const char *what = s->n == 1 ? s->v[0].label : shmcfg_name(h);
	if ((r = shmcfg_txn_commit_ex(t, gen, published)) && outcome)
		return fail("%s: %s; %s", what, shmcfg_errdetail(), outcome);
	return r ? fail_lib(r, what) : EXIT_OK;
}

int cmd_load(int argc, char **argv)
{
	bool quiet = false, partial = false;
	int c, ec = 0;
	while ((c = next_opt(argc, argv, &ec)) != -1) {
		if (c == -2)
			return ec;
		if (c == 'q')
			quiet = true;
		if (c == 'p')
			partial = true;
	}
	if (optind >= argc)
		return usage_error("missing segment NAME");
	if (optind + 1 >= argc)
		return usage_error("missing FILE (or - for standard input)");
	if (argc - optind > 2)
		return usage_error("unexpected argument '%s'", argv[optind + 2]);
	const char *seg = argv[optind], *path = argv[optind + 1];
	/* attached before the input is read: a load from a pipe is listed as
	 * an attached process while it waits */
	shmcfg *h;
	if (open_segment(seg, false, &h))
		return EXIT_FAIL;
	struct sources s = {0};
	uint64_t gen = 0;
	bool published = false;
	size_t skipped = 0;
	int rc = add_file(&s, path, false);
	if (!rc)
		rc = load_sources(h, &s, partial, NULL, &gen, &published, &skipped);
	shmcfg_close(h);
	if (!rc && !quiet) {
		if (!published)
			printf("%s: nothing changed (generation %llu)", s.v[0].label, (unsigned long long)gen);
		else
			printf("%s: loaded into '%s', generation %llu", s.v[0].label, seg, (unsigned long long)gen);
		if (skipped)
			printf(" (%zu skipped)", skipped);
		printf("\n");
	}
	sources_free(&s);
	return rc;
}

/* ------------------------------------------------------------------ */
/* save                                                               */
/* ------------------------------------------------------------------ */

/*
 * The user layer (what set and load wrote) as a dump that load and create
 * --load read back. It names no schema hash: the file is configuration an
 * operator keeps, and loads into a segment of a later schema as long as its
 * options are there with their types (a strict load names any that is
 * not). Every option set is saved, save-ignored and private ones too: the
 * operator set them.
 */
int cmd_save(int argc, char **argv)
{
	bool quiet = false;
	int c, ec = 0;
	while ((c = next_opt(argc, argv, &ec)) != -1) {
		if (c == -2)
			return ec;
		if (c == 'q')
			quiet = true;
	}
	if (optind >= argc)
		return usage_error("missing segment NAME");
	if (optind + 1 >= argc)
		return usage_error("missing FILE (or - for standard output)");
	if (argc - optind > 2)
		return usage_error("unexpected argument '%s'", argv[optind + 2]);
	const char *seg = argv[optind], *path = argv[optind + 1];
	shmcfg *h;
	if (open_segment(seg, true, &h))
		return EXIT_FAIL;
	shmcfg_snapshot *snap;
	int r = shmcfg_snapshot_acquire(h, &snap);
	if (r) {
		shmcfg_close(h);
		return fail_lib(r, seg);
	}
	json_t *values = json_object();
	int rc = values ? EXIT_OK : fail("out of memory");
	for (uint32_t i = 0; !rc && i < shmcfg_count(h); i++) {
		shmcfg_optinfo oi;
		shmcfg_value v;
		if ((r = shmcfg_opt_info(h, i, &oi)))
			rc = fail_lib(r, seg);
		else if (oi.alias == SHMCFG_NO_OPT && shmcfg_snapshot_layer(snap, i, SHMCFG_SRC_USER, &v) == 0 &&
			 json_object_set_new(values, oi.name, value_json(&v)))
			rc = fail("out of memory");
	}
	uint64_t gen = shmcfg_snapshot_generation(snap);
	shmcfg_snapshot_release(snap);
	shmcfg_close(h);
	size_t n = json_object_size(values);
	json_t *root = rc ? NULL : json_pack("{s:s, s:s, s:I, s:o}", "format", "shmcfg-dump/1", "layer", "user",
					      "generation", (json_int_t)gen, "values", values);
	if (rc)
		json_decref(values);
	char *text = root ? json_for_terminal(json_dumps(
				    root, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17)))
			  : NULL;
	json_decref(root);
	char *line = NULL;
	if (!rc && (!text || asprintf(&line, "%s\n", text) < 0))
		rc = fail("out of memory");
	free(text);
	if (!rc && !strcmp(path, "-"))
		fputs(line, stdout);
	else if (!rc)
		rc = write_file(path, line, strlen(line));
	free(line);
	if (!rc && !quiet && strcmp(path, "-"))
		printf("saved %zu option%s of '%s' (user layer, generation %llu) to %s\n", n, n == 1 ? "" : "s", seg,
		       (unsigned long long)gen, path);
	return rc;
}

/* ------------------------------------------------------------------ */
/* gc                                                                 */
/* ------------------------------------------------------------------ */

static void gc_cb(const shmcfg_reader *r, void *ud)
{
	json_t *arr = ud;
	json_t *o = json_object();
	json_object_set_new(o, "index", json_integer(r->index));
	json_object_set_new(o, "pid", json_integer(r->pid));
	json_t *pins = json_array();
	for (int k = 0; k < 4; k++)
		if (r->pins[k])
			json_array_append_new(pins, json_integer((json_int_t)r->pins[k]));
	json_object_set_new(o, "pins", pins);
	json_array_append_new(arr, o);
}

/* One orphaned lock object removed by gc: a line, or a JSON row. */
struct gc_orphans {
	json_t *arr;
	bool json;
	int rc;
};

static void gc_orphan(const shmcfg_orphan *o, void *ud)
{
	struct gc_orphans *g = ud;
	/* or the new segment a replacement killed before its rename left */
	const char *what = strstr(o->path, "/shmcfg-new.")	  ? "unfinished replacement"
			   : strstr(o->path, "/shmcfg-schema.") ? "orphaned schema copy"
								: "orphaned lock object";
	/* names planted in /dev/shm: shown escaped (termsafe.h), in JSON as
	 * they are when they are UTF-8 */
	char *path = term_escaped(o->path, strlen(o->path)), *name = term_escaped(o->name, strlen(o->name));
	if (!o->removed)
		g->rc = fail("cannot remove %s %s: %s", what, path ? path : "?", strerror(-o->error));
	else {
		json_array_append_new(g->arr, json_pack("{s:o?, s:o?, s:i}", "name", json_foreign(o->name), "path",
							json_foreign(o->path), "uid", (int)o->uid));
		if (!g->json && strstr(what, "schema"))
			printf("removed %s %s (no segment has its schema %s)\n", what, path ? path : "?",
			       name ? name : "?");
		else if (!g->json)
			printf("removed %s %s (%s '%s' is gone)\n", what, path ? path : "?",
			       what[0] == 'u' ? "the replacer of" : "its segment", name ? name : "?");
	}
	free(path);
	free(name);
}

int cmd_gc(int argc, char **argv)
{
	bool json = false, orphans_only = false;
	int c, ec = 0;
	while ((c = next_opt(argc, argv, &ec)) != -1) {
		if (c == -2)
			return ec;
		if (c == 'J')
			json = true;
		if (c == 'O')
			orphans_only = true;
	}
	if (argc - optind > 1)
		return usage_error("unexpected argument '%s'", argv[optind + 1]);
	const char *seg = optind < argc ? argv[optind] : NULL;
	/* with no NAME (or --orphans): the orphaned lock objects only */
	orphans_only = orphans_only || !seg;
	json_t *arr = json_array();
	if (!orphans_only) {
		/* read-write: a reclaim takes the entry's lock (a writer needs
		 * no entry of its own: it claims none) */
		shmcfg *h;
		if (open_segment(seg, false, &h)) {
			json_decref(arr);
			return EXIT_FAIL;
		}
		int r = shmcfg_gc(h, gc_cb, arr);
		shmcfg_close(h);
		if (r < 0) {
			json_decref(arr);
			return fail_lib(r, seg);
		}
	}
	for (size_t i = 0; !json && i < json_array_size(arr); i++) {
		json_t *o = json_array_get(arr, i);
		printf("reclaimed reader entry %lld (pid %lld)\n",
		       (long long)json_integer_value(json_object_get(o, "index")),
		       (long long)json_integer_value(json_object_get(o, "pid")));
	}
	size_t n = json_array_size(arr);
	if (!json && !orphans_only && n)
		printf("%s: reclaimed %zu reader entr%s of dead processes\n", seg, n, n == 1 ? "y" : "ies");
	else if (!json && !orphans_only)
		printf("%s: nothing to reclaim\n", seg);
	/* and the lock objects of that name (or of every name) whose segment is gone */
	struct gc_orphans g = {json_array(), json, EXIT_OK};
	int r = shmcfg_orphans(seg, SHMCFG_ORPHANS_REMOVE, gc_orphan, &g);
	if (r < 0) {
		json_decref(arr);
		json_decref(g.arr);
		return fail_lib(r, seg ? seg : "orphaned lock objects");
	}
	if (!json && orphans_only && r == 0)
		printf("no orphaned lock objects%s%s%s\n", seg ? " of '" : " or schema copies", seg ? seg : "", seg ? "'" : "");
	if (json) {
		json_t *out = json_pack("{s:o}", "orphans", g.arr);
		if (!orphans_only) {
			json_object_set_new(out, "name", json_string(seg));
			json_object_set_new(out, "reclaimed", arr);
		} else
			json_decref(arr);
		int jr = json_print(out, false);
		return g.rc != EXIT_OK ? g.rc : jr;
	}
	json_decref(arr);
	json_decref(g.arr);
	return g.rc;
}

/* ------------------------------------------------------------------ */
/* resize                                                             */
/* ------------------------------------------------------------------ */

int cmd_resize(int argc, char **argv)
{
	shmcfg_create_opts o = {0};
	bool quiet = false;
	int c, ec = 0;
	while ((c = next_opt(argc, argv, &ec)) != -1) {
		if (c == -2)
			return ec;
		if (c == 'q')
			quiet = true;
		else if ((ec = size_opt(c, optarg, &o)))
			return ec;
	}
	const char *pos[1];
	if (take_positionals(argc, argv, pos, 1, &ec))
		return ec;
	if (!o.slots && !o.heap_bytes && !o.readers && !o.history)
		return usage_error("nothing to change: give --size, --history, --readers or --slots");
	if (have_owner)
		o.flags |= SHMCFG_CREATE_OWNER, o.owner = owner_uid;
	shmcfg *h = NULL;
	int r = shmcfg_resize(pos[0], &o, &h);
	if (r)
		return attach_error(r, pos[0], false, shmcfg_errdetail());
	shmcfg_info *info = malloc(sizeof *info);
	if (!quiet && info && shmcfg_stat(h, info) == 0) {
		char size[32], heap[32];
		human_size(info->size, size, sizeof size);
		human_size(info->heap_bytes, heap, sizeof heap);
		printf("resized segment '%s': %u slots, %u readers, heap %s, %s in all, generation %llu\n",
		       pos[0], info->nslots, info->nreaders, heap, size,
		       (unsigned long long)info->generation);
	}
	free(info);
	shmcfg_close(h);
	return EXIT_OK;
}
