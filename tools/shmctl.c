/*
 * shmctl: inspect and control shmcfg segments.
 *
 * This file: main, the subcommand table, usage and help, error lines,
 * attaching a segment, colour. See shmctl.h for the others and shmctl.1 for
 * the user's documentation.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shmctl.h"

const struct command *cur_cmd;
bool use_color;
bool have_owner;
uid_t owner_uid;

static const struct command commands[] = {
	{"create", cmd_create,
	 "create NAME [--schema FILE] [--slots K] [--size BYTES] [--readers N]\n"
	 "       [--history N] [--mode OCTAL] [--group GROUP] [--no-env]\n"
	 "       [--force [--fresh]|--exist-ok]\n"
	 "       [--conf] [--load FILE]... [--load-dir DIR]... [--quiet]",
	 "create a segment (the embedded default schema unless --schema)",
	 "  -s, --schema FILE   schema file (YAML, format 1); default: the embedded\n"
	 "                      torch.compiler.config schema\n"
	 "  -k, --slots K       snapshot slots, 2-255 (default 8)\n"
	 "      --size BYTES    value heap: the layers set, all versions (K, M, G)\n"
	 "      --readers N     reader table entries (default 1024)\n"
	 "      --history N     commits the history keeps, 8-1048576 (default 1000)\n"
	 "  -m, --mode OCTAL    permission bits (default 0600)\n"
	 "  -g, --group GROUP   group of the object (name or number)\n"
	 "      --no-env        leave the environment layers empty\n"
	 "  -f, --force         replace a segment of that name: of the same schema, it\n"
	 "                      keeps its values, layers and history; its processes\n"
	 "                      follow the new one by themselves\n"
	 "      --fresh         with --force: keep nothing of it (defaults, this\n"
	 "                      environment's layers, a history of its own)\n"
	 "  -e, --exist-ok      keep a segment of that name and schema (its other\n"
	 "                      settings too) and load the files into it\n"
	 "  -c, --conf          the segment's configuration directory, $SHMCFG_CONF_DIR\n"
	 "                      or /etc/shmcfg: NAME.yaml as the schema (unless\n"
	 "                      --schema), NAME.d as a --load-dir (each if it exists)\n"
	 "  -l, --load FILE     load a dump, as shmctl load (- reads standard input)\n"
	 "      --load-dir DIR  load DIR's *.json files in the order of their names\n"
	 "  -q, --quiet         print nothing on success\n"
	 "The creating process's environment fills the env_default and env_force layers;\n"
	 "each variable applied is printed: VAR=value -> option (layer).\n"
	 "The files load strictly, in order (--conf's first), as one commit: a later\n"
	 "file's value of an option overrides an earlier one's. If one fails, a segment\n"
	 "created here is removed, an existing one is left unchanged.\n", false},
	{"resize", cmd_resize, "resize NAME [--size BYTES] [--history N] [--readers N] [--slots K] [--quiet]",
	 "give a segment other sizes; it keeps everything else",
	 "      --size BYTES    value heap (K, M, G)\n"
	 "      --history N     commits the history keeps, 8-1048576\n"
	 "      --readers N     reader table entries, 1-65536\n"
	 "  -k, --slots K       snapshot slots, 2-255\n"
	 "  -q, --quiet         print nothing on success\n"
	 "A new incarnation of the segment, with the same schema, values, layers,\n"
	 "history, mode and group, takes its place; every process attached to it\n"
	 "follows it by itself. A size not given stays as it is.\n", true},
	{"rm", cmd_rm, "rm [--force] NAME...", "remove segments",
	 "  -f, --force   ignore segments that do not exist\n"
	 "Attached processes keep the old segment (their last values) and learn it was\n"
	 "removed; a warning on stderr names them.\n", false},
	{"ls", cmd_ls, "ls [--json]", "list the segments of this host",
	 "      --json    print a JSON array\n"
	 "Lists /dev/shm/shmcfg.* with size, generation, options and attached processes\n"
	 "(those that have it mapped; N+ when processes of other users may be hidden).\n"
	 "A segment that cannot be read is listed with its error; an entry that is not\n"
	 "a segment (a FIFO, socket, directory, sparse object, another user's object)\n"
	 "with the reason.\n", true},
	{"show", cmd_show, "show NAME [PATTERN] [--non-default] [-v] [--generation G] [--json]",
	 "show options: name, value, type, source, default",
	 "  PATTERN              a glob (fnmatch) on the full name or a dotted suffix\n"
	 "                       of it, or else a substring of the name\n"
	 "  -n, --non-default    only options that do not hold their default\n"
	 "  -v, --verbose        print each option's doc under it\n"
	 "  -G, --generation G   the values as of generation G (shmctl log)\n"
	 "      --json           print a JSON array of objects\n", true},
	{"get", cmd_get, "get NAME OPTION [--generation G] [--json|--raw]", "print one option's value",
	 "  -G, --generation G   the value as of generation G (shmctl log)\n"
	 "      --json           print the value as JSON (strings quoted)\n"
	 "  -r, --raw            print a string exactly as it is\n"
	 "Null prints as null. A string prints as it is, unless set would not read\n"
	 "it back as itself (none or null in any case, or a leading double quote):\n"
	 "then it prints as a JSON string (\"None\").\n", true},
	{"describe", cmd_describe, "describe NAME OPTION [--json]",
	 "print every attribute of an option and its doc",
	 "      --json    print a JSON object\n", true},
	{"set", cmd_set, "set NAME OPTION=VALUE... [--knob] [--quiet] [--json]",
	 "set options, all in one commit",
	 "      --knob    write the knob layer (options that declare a knob) instead\n"
	 "                of the user layer\n"
	 "  -q, --quiet   print nothing on success\n"
	 "      --json    print {generation, changes: [{name, layer, old, new}]}\n"
	 "VALUE is parsed by the option's type: bool true/false/1/0; int; float;\n"
	 "none or null for a nullable option (refused, unquoted, for a string that\n"
	 "cannot be null); list and set as a JSON array or comma-separated text; a\n"
	 "value in double quotes is a JSON string literal ('opt=\"None\"' is the text).\n"
	 "Prints each change, then the generation.\n", true},
	{"reset", cmd_reset,
	 "reset NAME OPTION... [--knob] [--quiet] [--json]\n       reset NAME --all [--knob] [--quiet] [--json]",
	 "clear the user (or knob) layer of options",
	 "  -a, --all     every option\n"
	 "      --knob    clear the knob layer instead of the user layer\n"
	 "  -q, --quiet   print nothing on success\n"
	 "      --json    print {generation, changes}, as set does\n", true},
	{"stat", cmd_stat, "stat NAME [--commits N] [--json | --format text|json]\n       stat [NAME...] --format prometheus",
	 "show the segment's header, attached processes, slots, readers and last commits",
	 "  -c, --commits N   how many recent commits to list (default 10)\n"
	 "      --json        print a JSON object (--format json)\n"
	 "      --format FMT  text (the default), json, or prometheus: metrics of the\n"
	 "                    NAMEs, or of every segment without one, in Prometheus'\n"
	 "                    text format (node_exporter's textfile collector reads it)\n", true},
	{"watch", cmd_watch, "watch NAME [OPTION...] [--count N] [--timeout DURATION] [--json] [--quiet]",
	 "print one line per commit",
	 "  OPTION                  only commits that touch these options (and only\n"
	 "                          their changes)\n"
	 "  -c, --count N           stop after N commits shown (exit 0)\n"
	 "  -t, --timeout DURATION  stop after that long: 500ms, 5s, 2m, 1h or seconds\n"
	 "                          (exit 1 if --count was given and not reached, else 0)\n"
	 "      --json              print one JSON object per commit\n"
	 "  -q, --quiet             do not say on stderr when watching starts\n", true},
	{"dump", cmd_dump, "dump NAME [--all]", "print the configuration as JSON",
	 "  -a, --all     also save-ignored and private options\n", true},
	{"load", cmd_load, "load NAME FILE|- [--partial] [--quiet]", "load a JSON dump as one commit",
	 "  -p, --partial apply what fits: skip (with a warning each) unknown or\n"
	 "                ambiguous names and refused values; load another schema's dump\n"
	 "  -q, --quiet   print nothing on success\n"
	 "FILE holds a dump (its \"values\") or a plain {name: value} object; - reads\n"
	 "standard input. Names resolve as in set. Without --partial a dump of another\n"
	 "schema, or any unknown name (all are listed), fails the load: nothing changes.\n", true},
	{"save", cmd_save, "save NAME FILE|- [--quiet]", "write the user layer to a file that load reads back",
	 "  -q, --quiet   print nothing on success\n"
	 "Writes what set and load wrote (the user layer) as a dump without a schema\n"
	 "hash; - writes standard output. FILE is replaced at once (a temporary file,\n"
	 "then a rename), and only if it is a regular file.\n", true},
	{"diff", cmd_diff, "diff NAME [--format python|shell|json] [--json]\n       shmctl diff NAME G1 [G2] [--json]",
	 "print the non-default settings as code, or what changed between generations",
	 "  -f, --format FMT   python (default: as codegen_config()), shell (shmctl set\n"
	 "                     commands) or json\n"
	 "      --json         the same as --format json; with G1, a JSON object\n"
	 "With G1: every option whose value or layers differ between generation G1 and\n"
	 "G2 (default: the current one), each layer that moved under it.\n", true},
	{"log", cmd_log, "log NAME [OPTION...] [-n N] [--json]",
	 "the segment's history: who changed what, newest first",
	 "  OPTION               only commits that changed these options (names as set)\n"
	 "  -n, --max-count N    at most N commits\n"
	 "      --json           print a JSON array: every field of each commit\n"
	 "Each commit: generation, time, user, process and pid, origin, and each layer\n"
	 "it changed (old -> new). The segment keeps the last N commits (create\n"
	 "--history N).\n", true},
	{"rollback", cmd_rollback, "rollback NAME G [--knob] [--quiet]",
	 "restore the user layer as it was at generation G, in one commit",
	 "      --knob    restore the knob layer too\n"
	 "  -q, --quiet   print nothing on success\n"
	 "Prints the changes the new commit made. G must still be rebuildable from\n"
	 "the history (shmctl log; exit 1 names the oldest one otherwise).\n", true},
	{"schema", cmd_schema, "schema NAME", "print the segment's schema as a schema file",
	 "Writes YAML (format 1) that create --schema reads back to the same schema\n"
	 "hash: the segment's options, types, defaults, bounds, choices, variables,\n"
	 "knobs, aliases, implications and docs.\n", true},
	{"hash", cmd_hash, "hash NAME [--json]", "print the config hash",
	 "      --json    print {\"generation\": N, \"config_hash\": \"hex\"}\n", true},
	{"check", cmd_check, "check NAME [--json]",
	 "verify header, bounds, checksums and the reader table",
	 "      --json    print {\"ok\": bool, \"problems\": [...], \"notes\": [...]}\n"
	 "Exit status 0 if the segment is sound, 1 with the problems listed.\n", true},
	{"gc", cmd_gc, "gc [NAME] [--orphans] [--json]",
	 "reclaim the reader entries of dead processes; remove orphaned lock objects",
	 "      --orphans remove only the lock objects whose segment is gone (of NAME,\n"
	 "                or of every name): what a segment removed with rm(1) or\n"
	 "                unlink(2) leaves; gc with no NAME does the same\n"
	 "      --json    print {\"name\", \"reclaimed\": [{\"index\", \"pid\"}...],\n"
	 "                \"orphans\": [{\"name\", \"path\", \"uid\"}...]}\n"
	 "With NAME: its dead readers' entries, then its orphaned lock objects.\n", true},
	{"cluster", cmd_cluster,
	 "cluster set NAME OPTION=VALUE... [--knob] [--reason TEXT] [--wait[=all|DURATION]]\n"
	 "       cluster reset NAME OPTION... [--knob] [--reason TEXT] [--wait[=all|DURATION]]\n"
	 "       cluster show|log|status NAME [--json]\n"
	 "       cluster diff NAME SEQ1 [SEQ2] [--json]\n"
	 "       cluster forget NAME HOST... [--force]\n"
	 "       cluster rollback NAME SEQ [--force] [--reason TEXT] [--wait[=all|DURATION]]",
	 "the cluster layer kept in etcd: set, reset, show, log, diff, rollback, status",
	 "Each subcommand takes --endpoints URL[,URL] and --cluster NAME (defaults:\n"
	 "$SHMCFG_ETCD_ENDPOINTS and $SHMCFG_CLUSTER, else /etc/shmcfg/cluster.conf).\n"
	 "None needs segment NAME on this host: set and reset then check values\n"
	 "against the schema the agents keep in etcd, or --schema FILE.\n"
	 "'shmctl cluster SUBCOMMAND --help' for each.\n"
	 "  set       set cluster values: one audited etcd transaction\n"
	 "  reset     delete cluster values: one audited etcd transaction\n"
	 "  show      print what etcd holds: every opt/ and knob/ key\n"
	 "  log       print the audit records: who changed what, when and why\n"
	 "  diff      print the values that differ between two audit records\n"
	 "  rollback  apply an audit record's before values as a new audited change\n"
	 "  status    print every expected host's revision, hash, overrides, errors\n"
	 "  forget    take hosts out of the roster of expected hosts\n",
	 false},
	{"header", cmd_header,
	 "header [NAME | --schema FILE] [--prefix P] [--strip PREFIX] [--only GLOB]...\n"
	 "       [-o FILE]",
	 "print a C header of inline accessors for a schema",
	 "  NAME                a segment: its schema\n"
	 "  -s, --schema FILE   a schema file (YAML, format 1); without NAME or --schema,\n"
	 "                      the embedded default schema\n"
	 "  -p, --prefix P      prefix of every name the header defines (default cfg)\n"
	 "      --strip PREFIX  leave PREFIX. out of the options' C names\n"
	 "      --only GLOB     only the options whose full name matches GLOB (fnmatch;\n"
	 "                      repeatable; each must match one)\n"
	 "  -o, --output FILE   write FILE (replaced only on success) instead of stdout\n"
	 "The header holds the schema hash, P_attach() (which refuses a segment of\n"
	 "another schema), a handle per option, an inline accessor P_NAME() per bool, int\n"
	 "and float option, and P_read(), which reads them all from one generation.\n"
	 "Names: dots become underscores (torch.x.y -> P_torch_x_y).\n", true},
};

#define NCOMMANDS (sizeof commands / sizeof commands[0])

/* Every message is one line: control characters (from a name or a value
 * someone else chose) are shown as \xNN, never sent to the terminal. */
static void vmsg(const char *prefix, const char *fmt, va_list ap)
{
	char *text = NULL;
	if (vasprintf(&text, fmt, ap) < 0)
		text = NULL;
	fflush(stdout);
	fputs("shmctl: ", stderr);
	if (prefix)
		fputs(prefix, stderr);
	for (const unsigned char *p = (const unsigned char *)(text ? text : "out of memory"); *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			fprintf(stderr, "\\x%02x", *p);
		else
			fputc(*p, stderr);
	fputc('\n', stderr);
	free(text);
}

void err_msg(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vmsg(NULL, fmt, ap);
	va_end(ap);
}

int fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vmsg(NULL, fmt, ap);
	va_end(ap);
	return EXIT_FAIL;
}

void warn_msg(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vmsg("warning: ", fmt, ap);
	va_end(ap);
}

int fail_lib(int r, const char *what)
{
	const char *detail = shmcfg_errdetail();
	if (!detail || !*detail)
		detail = shmcfg_strerror(r);
	if (!what || !*what)
		err_msg("%s", detail);
	else if (strstr(detail, what))
		err_msg("%s", detail);
	else
		err_msg("%s: %s", what, detail);
	return EXIT_FAIL;
}

/* Edits, and swaps of neighbours ("shw", "sohw"), between two short words;
 * SIZE_MAX past 64 bytes. Three rows of the optimal string alignment table. */
static size_t word_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	if (la > 64 || lb > 64)
		return SIZE_MAX;
	size_t rows[3][65], *pp = rows[0], *p = rows[1], *c = rows[2];
	for (size_t j = 0; j <= lb; j++)
		p[j] = j;
	for (size_t i = 1; i <= la; i++) {
		c[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t best = p[j - 1] + (a[i - 1] != b[j - 1]);
			if (p[j] + 1 < best)
				best = p[j] + 1;
			if (c[j - 1] + 1 < best)
				best = c[j - 1] + 1;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && pp[j - 2] + 1 < best)
				best = pp[j - 2] + 1;
			c[j] = best;
		}
		size_t *t = pp;
		pp = p;
		p = c;
		c = t;
	}
	return p[lb];
}

const char *closest_word(const char *typed, const char *const *words, size_t n)
{
	size_t tl = strlen(typed), limit = tl < 4 ? 1 : tl < 9 ? 2 : 3, best = SIZE_MAX;
	const char *pick = NULL;
	for (size_t i = 0; i < n; i++) {
		size_t d = word_distance(typed, words[i]);
		/* a word the text begins (an abbreviation) is close too */
		if (d > limit && tl >= 2 && !strncmp(words[i], typed, tl))
			d = limit;
		if (d <= limit && d < best) {
			best = d;
			pick = words[i];
		}
	}
	return pick;
}

static void print_synopsis(FILE *f, const struct command *c)
{
	fprintf(f, "usage: shmctl %s\n", c->synopsis);
}

int usage_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char prefix[64]; /* the text may quote an argument: escaped as every message */
	snprintf(prefix, sizeof prefix, "%s%s", cur_cmd ? cur_cmd->name : "", cur_cmd ? ": " : "");
	vmsg(prefix, fmt, ap);
	va_end(ap);
	if (cur_cmd) {
		print_synopsis(stderr, cur_cmd);
		fprintf(stderr, "Try 'shmctl %s --help' for more information.\n", cur_cmd->name);
	} else
		fprintf(stderr, "Try 'shmctl --help' for more information.\n");
	return EXIT_USAGE;
}

int usage_line(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *text = NULL;
	if (vasprintf(&text, fmt, ap) < 0)
		text = NULL;
	va_end(ap);
	err_msg("%s%s%s", cur_cmd ? cur_cmd->name : "", cur_cmd ? ": " : "", text ? text : "out of memory");
	free(text);
	return EXIT_USAGE;
}

int print_help(void)
{
	const struct command *c = cur_cmd;
	print_synopsis(stdout, c);
	printf("\n%c%s.\n\n", c->summary[0] - ('a' <= c->summary[0] && c->summary[0] <= 'z' ? 32 : 0),
	       c->summary + 1);
	printf("  -h, --help    print this help\n");
	if (c->help && *c->help)
		printf("%s", c->help);
	if (c->attaches)
		printf("      --owner USER  trust the segment only if USER (a name or uid) owns it;\n"
		       "                    without it, only segments of yours or root's\n");
	printf("\nExit status: 0 success, 1 failure, 2 usage error. See shmctl(1).\n");
	return EXIT_OK;
}

/* --color=WHEN (auto, always, never): 0, or -1 for another WHEN. */
static int set_color(const char *when)
{
	if (!strcmp(when, "always"))
		use_color = true;
	else if (!strcmp(when, "never"))
		use_color = false;
	else if (!strcmp(when, "auto")) {
		const char *term = getenv("TERM");
		use_color = isatty(STDOUT_FILENO) && !getenv("NO_COLOR") && !(term && !strcmp(term, "dumb"));
	} else
		return -1;
	return 0;
}

static int bad_color(const char *when)
{
	err_msg("--color takes auto, always or never, not '%s'", when);
	return EXIT_USAGE;
}

/* --owner USER: a user name or a uid. */
static int parse_owner(const char *arg, int *exit_code)
{
	struct passwd *pw = *arg ? getpwnam(arg) : NULL;
	uint64_t u;
	if (pw)
		owner_uid = pw->pw_uid;
	else if (parse_u64(arg, &u) && u < (uid_t)-1)
		owner_uid = (uid_t)u;
	else {
		*exit_code = fail("no such user '%s' (--owner takes a user name or a uid)", arg);
		return -2;
	}
	have_owner = true;
	return 0;
}

/* The global flags a command also takes after its name, parsed here. */
enum { OPT_COLOR = 0x10c0 };

/*
 * The command's long options, with the global ones added: --color (and
 * --colour) for every command, --owner when the command attaches. Built
 * once per table (the commands call next_opt() with the same one each time).
 */
static const struct option *with_common(const struct option *longopts)
{
	static const struct option *for_opts;
	static struct option *merged;
	if (for_opts == longopts && merged)
		return merged;
	size_t n = 0;
	while (longopts[n].name)
		n++;
	struct option *m = calloc(n + 4, sizeof *m);
	if (!m)
		return longopts;
	memcpy(m, longopts, n * sizeof *m);
	m[n++] = (struct option){"color", optional_argument, NULL, OPT_COLOR};
	m[n++] = (struct option){"colour", optional_argument, NULL, OPT_COLOR};
	if (cur_cmd && cur_cmd->attaches)
		m[n++] = (struct option){"owner", required_argument, NULL, 'O'};
	free(merged);
	merged = m;
	for_opts = longopts;
	return merged;
}

/* An unknown or ambiguous option of the running command: one line, with
 * the closest long option when one is close. */
static int unknown_option(const struct option *lo, const char *arg, int optchar)
{
	if (optchar)
		return usage_line("unknown option '-%c' (see 'shmctl %s --help')", optchar, cur_cmd->name);
	char typed[80];
	snprintf(typed, sizeof typed, "%s", arg + strspn(arg, "-"));
	typed[strcspn(typed, "=")] = 0;
	const char *names[64];
	size_t n = 0, nprefix = 0;
	for (; lo[n].name && n < 64; n++) {
		names[n] = lo[n].name;
		nprefix += *typed && !strncmp(lo[n].name, typed, strlen(typed));
	}
	for (size_t i = 0; i < n; i++)
		if (!strcmp(names[i], typed) && strchr(arg, '='))
			return usage_line("option '--%s' takes no value", typed);
	if (nprefix > 1)
		return usage_line("option '--%s' is ambiguous (see 'shmctl %s --help')", typed, cur_cmd->name);
	const char *near = closest_word(typed, names, n);
	if (near)
		return usage_line("unknown option '%s'; did you mean '--%s'?", arg, near);
	return usage_line("unknown option '%s' (see 'shmctl %s --help')", arg, cur_cmd->name);
}

int next_opt(int argc, char **argv, const char *shortopts, const struct option *longopts,
	     int *exit_code)
{
	const struct option *lo = with_common(longopts);
	for (;;) {
		int longidx = -1;
		opterr = 0;
		int c = getopt_long(argc, argv, shortopts, lo, &longidx);
		switch (c) {
		case 'h':
			*exit_code = print_help();
			return -2;
		case '?':
			/* glibc: optopt is the val of a long option given a value it
			 * does not take, the character of an unknown short one */
			*exit_code = unknown_option(lo, argv[optind - 1],
						    strncmp(argv[optind - 1], "--", 2) && optopt < 0x100 ? optopt : 0);
			return -2;
		case OPT_COLOR:
			if (set_color(optarg ? optarg : "always")) {
				*exit_code = bad_color(optarg);
				return -2;
			}
			continue;
		case ':':
			if (optopt && (optopt < 0x100))
				*exit_code = usage_error("option '-%c' needs an argument", optopt);
			else
				*exit_code = usage_error("option '%s' needs an argument", argv[optind - 1]);
			return -2;
		case 'O':
			if (lo != longopts && longidx >= 0 && !strcmp(lo[longidx].name, "owner")) {
				if (parse_owner(optarg, exit_code))
					return -2;
				continue;
			}
			return c;
		default:
			return c;
		}
	}
}

int attach_error(int r, const char *name, bool rdonly, const char *detail)
{
	if (r == -ENOENT) { /* the library's hint: another /dev/shm than the host's */
		const char *elsewhere = detail ? strstr(detail, " in this process's /dev/shm") : NULL;
		return fail("no such segment '%s'%s", name, elsewhere ? elsewhere : "");
	}
	if (r == -EACCES || r == -EPERM)
		return fail("segment '%s': permission denied (%s access)", name,
			    rdonly ? "read" : "write");
	if (detail && *detail)
		return strstr(detail, name) ? fail("%s", detail) : fail("%s: %s", name, detail);
	return fail("%s: %s", name, shmcfg_strerror(r));
}

int attach_segment(const char *name, bool rdonly, shmcfg **ret)
{
	shmcfg_attach_opts o = {
		.flags = (rdonly ? SHMCFG_ATTACH_RDONLY : 0) | (have_owner ? SHMCFG_ATTACH_OWNER : 0),
		.owner = owner_uid,
	};
	return shmcfg_attach_with(name, &o, ret);
}

int open_segment(const char *name, bool rdonly, shmcfg **ret)
{
	int r = attach_segment(name, rdonly, ret);
	if (r == 0)
		return 0;
	return attach_error(r, name, rdonly, shmcfg_errdetail());
}

const char *color(const char *code)
{
	static char buf[8][16];
	static int next;
	if (!use_color)
		return "";
	char *b = buf[next++ % 8];
	snprintf(b, sizeof buf[0], "\033[%sm", code);
	return b;
}

static void main_usage(FILE *f)
{
	fprintf(f, "usage: shmctl [--color[=auto|always|never]] [--json] [--owner USER] COMMAND [ARGS...]\n"
		   "       shmctl COMMAND --help\n"
		   "       shmctl --version\n\n"
		   "Inspect and control shmcfg segments (configuration in shared memory).\n\n"
		   "Commands:\n");
	for (size_t i = 0; i < NCOMMANDS; i++)
		fprintf(f, "  %-9s %s\n", commands[i].name, commands[i].summary);
	fprintf(f, "\nNAME is a segment's name; OPTION a full dotted option name or a unique\n"
		   "suffix of it after a dot. Read commands take --json. --color, --json and\n"
		   "--owner go before or after COMMAND. A DURATION is 500ms, 5s, 2m, 1h or plain\n"
		   "seconds. See shmctl(1).\n");
}

static void log_cb(int level, const char *msg, void *ud)
{
	(void)ud;
	if (level <= SHMCFG_LOG_WARNING)
		warn_msg("%s", msg);
}

/* Global flags before the command: --color[=WHEN], --json (passed to the
 * command), --owner USER, --help, --version. Each is taken after the command
 * too (next_opt). */
static const char *const global_flags[] = {"color", "colour", "json", "owner", "help", "version"};

static const struct command *find_command(const char *name)
{
	for (size_t k = 0; k < NCOMMANDS; k++)
		if (!strcmp(commands[k].name, name))
			return &commands[k];
	return NULL;
}

/* An unknown command: one line, with the closest command when one is close. */
static int unknown_command(const char *name)
{
	const char *names[NCOMMANDS + 1];
	for (size_t k = 0; k < NCOMMANDS; k++)
		names[k] = commands[k].name;
	names[NCOMMANDS] = "help";
	const char *near = closest_word(name, names, NCOMMANDS + 1);
	if (near)
		err_msg("unknown command '%s'; did you mean '%s'?", name, near);
	else
		err_msg("unknown command '%s' (see 'shmctl --help')", name);
	return EXIT_USAGE;
}

int main(int argc, char **argv)
{
	const char *when = "auto";
	bool json = false;
	int i = 1;
	for (; i < argc && argv[i][0] == '-'; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			main_usage(stdout);
			return EXIT_OK;
		} else if (!strcmp(a, "-V") || !strcmp(a, "--version")) {
			printf("shmctl (shmcfg) %s\n", shmcfg_version(NULL, NULL, NULL));
			return EXIT_OK;
		} else if (!strncmp(a, "--color=", 8) || !strncmp(a, "--colour=", 9)) {
			when = strchr(a, '=') + 1;
		} else if (!strcmp(a, "--color") || !strcmp(a, "--colour")) {
			when = "always";
		} else if (!strcmp(a, "--json")) {
			json = true;
		} else if (!strncmp(a, "--owner=", 8) || !strcmp(a, "--owner")) {
			const char *user = a[7] == '=' ? a + 8 : i + 1 < argc ? argv[++i] : NULL;
			int ec = EXIT_USAGE;
			if (!user) {
				err_msg("option '--owner' needs an argument");
				return EXIT_USAGE;
			}
			if (parse_owner(user, &ec))
				return ec;
		} else if (!strcmp(a, "--")) {
			i++;
			break;
		} else {
			char typed[80];
			snprintf(typed, sizeof typed, "%s", a + strspn(a, "-"));
			typed[strcspn(typed, "=")] = 0;
			const char *near = closest_word(typed, global_flags,
							sizeof global_flags / sizeof global_flags[0]);
			if (near)
				err_msg("unknown option '%s'; did you mean '--%s'?", a, near);
			else
				err_msg("unknown option '%s' (see 'shmctl --help')", a);
			return EXIT_USAGE;
		}
	}
	if (set_color(when))
		return bad_color(when);
	if (i >= argc) {
		fprintf(stderr, "shmctl: no command given\n");
		main_usage(stderr);
		return EXIT_USAGE;
	}
	const char *name = argv[i];
	if (!strcmp(name, "help")) {
		if (i + 1 >= argc) {
			main_usage(stdout);
			return EXIT_OK;
		}
		if (!(cur_cmd = find_command(argv[i + 1])))
			return unknown_command(argv[i + 1]);
		return print_help();
	}
	if (!strcmp(name, "__complete")) /* hidden: the bash completion's helper */
		return cmd_complete(argc - i, argv + i);
	if (!(cur_cmd = find_command(name)))
		return unknown_command(name);
	shmcfg_set_log(log_cb, NULL);
	/* the subcommand parses argv[i..]: argv[0] of its getopt is its name;
	 * a --json given before the command is its first flag (after the
	 * subcommand of cluster) */
	int sub_argc = argc - i;
	char **sub_argv = argv + i;
	if (json) {
		int at = cur_cmd->run == cmd_cluster && sub_argc > 1 ? 2 : 1;
		sub_argv = calloc((size_t)sub_argc + 2, sizeof *sub_argv);
		if (!sub_argv)
			return fail("out of memory");
		memcpy(sub_argv, argv + i, (size_t)at * sizeof *sub_argv);
		sub_argv[at] = (char *)"--json";
		memcpy(sub_argv + at + 1, argv + i + at, (size_t)(sub_argc - at) * sizeof *sub_argv);
		sub_argc++;
	}
	optind = 1;
	int r = cur_cmd->run(sub_argc, sub_argv);
	if (sub_argv != argv + i)
		free(sub_argv);
	if (fflush(stdout) == EOF || ferror(stdout)) {
		if (errno != EPIPE)
			fprintf(stderr, "shmctl: write error: %s\n", strerror(errno));
		return EXIT_FAIL;
	}
	return r;
}
