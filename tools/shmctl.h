/* SPDX-License-Identifier: MIT */
/*
 * shmctl: inspect and control shmcfg segments. Declarations shared by the
 * files of tools/shmctl*.c, which depend in one direction:
 *
 *   shmctl.c          main and the command table (every command, its flags
 *                     and help: the parser, --help and the completion's
 *                     words come from it)
 *     -> the commands  (none calls another's file)
 *        shmctl-read.c    ls, show, get, describe, schema (and the completion's
 *                         values)
 *        shmctl-stat.c    stat, hash, check, dump, watch
 *        shmctl-write.c   create, resize, rm, set, reset, load, save, gc
 *        shmctl-history.c log, rollback, diff
 *        shmctl-header.c  header (a C header of accessors for a schema)
 *        shmctl-cluster.c, shmctl-cluster-view.c  cluster SUBCOMMAND (etcd),
 *                         writes and reads, both over shmctl-cluster-util.c
 *     -> shmctl-util.c     what they share: messages, the option parser and
 *                          --help (driven by the running command's table
 *                          entry), attaching, option names, values as text,
 *                          tables
 *
 * Exit status: 0 success, 1 failure, 2 usage error.
 */
#ifndef SHMCTL_H
#define SHMCTL_H

#include <getopt.h> /* next_opt() sets optarg and optind */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <jansson.h>

#include "shmcfg.h"
#include "distance.h" /* closest_word() */
#include "termsafe.h"

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

/* ---- the command table (shmctl.c; doc/design.md "Adding a shmctl command") */

/* struct flag.flags */
#define F_SHORT 0x1  /* -KEY is taken too (KEY a letter) */
#define F_OPTARG 0x2 /* the argument is optional: --flag[=ARG] */
#define F_NOHELP 0x4 /* parsed and completed, not in --help (--color) */
#define F_HIDDEN 0x8 /* parsed only: neither in --help nor completed (helpers) */
#define F_DOC 0x10   /* a line of --help (and a word of the completion) only,
		      * parsed as the flag it spells (--wait=all) */
#define F_ARG 0x20   /* a positional argument's line of --help ("  PATTERN") */

/* One flag of a command (or one line of its --help). */
struct flag {
	int key;              /* what next_opt() returns for it */
	const char *name;     /* long name without "--" (F_ARG: the argument) */
	const char *metavar;  /* its argument ("FILE"; "[=WHEN]" with F_OPTARG); NULL: none */
	unsigned flags;       /* F_* */
	const char *complete; /* the completion of its argument: "@file", "@dir",
			       * "@user", "@group", or words ("python shell json");
			       * NULL: nothing to offer */
	const char *help;     /* its --help text; a \n starts an indented line */
};

/* One command, or one subcommand of a command that has them (cluster). */
struct command {
	const char *name;     /* as typed ("cluster set" for a subcommand) */
	int (*run)(int argc, char **argv); /* NULL for a command of subcommands */
	const char *synopsis; /* the lines after "usage: shmctl " (several separated by \n) */
	const char *summary;  /* one line for the command list */
	const struct flag *flags[3]; /* its flags and lines of --help, each list {0}-terminated */
	const char *notes;    /* --help text after the flags */
	bool attaches;        /* attaches a segment: takes --owner */
	/* the positional arguments, for the completion: words of "segment",
	 * "new" (a name not yet used), "option", "assign" (OPTION=VALUE),
	 * "file", "-" (anything); a last word ending in "..." repeats;
	 * "segment|schema": a segment unless -s/--schema is given */
	const char *args;
	const struct command *subs; /* its subcommands (cluster), NULL-name-terminated */
};

/* The command table and its number of entries (shmctl.c). */
extern const struct command shmctl_commands[];
extern const size_t shmctl_ncommands;

extern const struct command *cur_cmd; /* the running (sub)command */
extern bool use_color;               /* colour on stdout */

/* ---- shmctl-util.c ----------------------------------------------------- */

/* Print "shmctl: ...\n" to stderr. */
void err_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* As err_msg(), then return EXIT_FAIL. */
int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "shmctl: warning: ...\n" on stderr. */
void warn_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/*
 * A failed library call: print one line naming @p what and the library's
 * detail (or the text of the code when there is none) and return EXIT_FAIL.
 * When the detail already names @p what, it is printed alone.
 */
int fail_lib(int r, const char *what);
/* Replace (or make) the regular file path with len bytes of text, whole or
 * not at all (a temporary file beside it, fsync, rename); anything but a
 * regular file (a symbolic link, a device, a FIFO) is refused, untouched.
 * 0, or EXIT_FAIL (printed). */
int write_file(const char *path, const char *text, size_t len);
/* A usage error of the running subcommand: message, synopsis, EXIT_USAGE. */
int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A usage error in one line ("shmctl: CMD: ..."), without the synopsis:
 * an unknown flag, a bad duration. EXIT_USAGE. */
int usage_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Calls fn for each flag of @p c: --help, --color, its own, --owner if it
 * attaches; the lines of --help only (F_ARG, F_DOC) too. Stops at, and
 * returns, a nonzero return of fn. */
int command_flags(const struct command *c, int (*fn)(const struct flag *f, void *ud), void *ud);
/* Print @p c's --help to stdout (generated from its table entry); EXIT_OK. */
int print_help(const struct command *c);
/* --color=WHEN (auto, always, never): 0, or the usage error (EXIT_USAGE). */
int set_color(const char *when);
/* --owner USER (a name or a uid): 0, or the error (EXIT_FAIL). */
int parse_owner(const char *user);

/*
 * The option parser of every command: getopt_long over the running
 * command's flags (cur_cmd->flags) and the ones every command takes
 * (--help, --color, and --owner when it attaches, which it handles).
 * Returns a flag's key (optarg its argument), -1 at the end (the
 * positionals are argv[optind..]), or -2 after it printed the help (exit 0)
 * or a usage error (*exit_code set).
 */
int next_opt(int argc, char **argv, int *exit_code);

/*
 * --owner USER of the commands that attach (parsed by next_opt()): the uid
 * that must own the segments they attach. Without it the library trusts
 * segments owned by the caller or root only.
 */
extern bool have_owner;
const char *file_kind(mode_t mode); /* "a FIFO", "a directory", ... */
extern uid_t owner_uid;
/* shmcfg_attach_with() with SHMCFG_ATTACH_RDONLY or not and --owner. */
int attach_segment(const char *name, bool rdonly, shmcfg **ret);
/* Attach a segment: read-only or read-write; prints the error. 0 or EXIT_FAIL. */
int open_segment(const char *name, bool rdonly, shmcfg **ret);
/* Print the error of a failed attach (code r, the library's detail); EXIT_FAIL. */
int attach_error(int r, const char *name, bool rdonly, const char *detail);
/* A private segment of @p schema (NULL: the embedded default), already
 * unlinked: only this process has it. What the library says of a schema
 * that is in no segment (its hash, its options) is read through one. */
int private_segment(const shmcfg_schema *schema, shmcfg **ret);
/* The names of /dev/shm's entries named like segments (shmcfg.NAME), sorted:
 * ls and stat --format prometheus list them. Each and the array are the
 * caller's to free. EXIT_OK or EXIT_FAIL (said). */
int list_segments(char ***names, size_t *n);
#define SHM_DIR "/dev/shm"
#define SHM_PREFIX "shmcfg."

/* ANSI colour of a span: empty when colour is off. */
const char *color(const char *code);
#define C_RESET "0"
#define C_BOLD "1"
#define C_DIM "2"
#define C_RED "31"
#define C_GREEN "32"
#define C_YELLOW "33"
#define C_BLUE "34"
#define C_MAGENTA "35"
#define C_CYAN "36"

/* strtoull/strtoll with full-string and range checks. */
bool parse_u64(const char *s, uint64_t *ret);
bool parse_size(const char *s, uint64_t *ret); /* with K/M/G (KiB, MiB, GiB) suffixes */
/* A duration in seconds: 500ms, 5s, 2m, 1h or plain (fractional) seconds,
 * at most 1e7 s. */
bool parse_duration(const char *s, double *ret);
/* parse_duration() of the value of @p flag ("--timeout"): 0, or the usage
 * error (one line naming the flag and the text) and EXIT_USAGE. */
int duration_arg(const char *flag, const char *text, double *ret);

/* Lowercase hex of 16 bytes. */
void hex16(const uint8_t in[16], char out[33]);
/* "1.2 MiB" */
void human_size(uint64_t bytes, char *buf, size_t len);
/* "2024-05-01 12:00:00" (local) and "2024-05-01T12:00:00.123Z" (UTC). */
void time_local(uint64_t ns, char *buf, size_t len);
void time_utc(uint64_t ns, char *buf, size_t len);
/* Who made a commit, as log and watch print it: "user (uid U)  process[pid]"
 * ("uid U" and "pid P" when the name is unknown, ""), then "  origin: who"
 * and "  cluster revision N" when it has them. */
void committer_text(const char *user, uint32_t uid, const char *process, int32_t pid, const char *who,
		    uint64_t cluster_rev, char *buf, size_t len);

/* Resolve OPTION (full name or unique suffix: shmcfg_resolve). Prints the
 * library's error (ambiguous, unknown with suggestions). 0 or EXIT_FAIL. */
int resolve_option(shmcfg *h, const char *text, shmcfg_opt *ret);
/* resolve_option() without a word: 1 and *ret, 0 (no such option), -1
 * (ambiguous), -ENOMEM. */
int find_option(shmcfg *h, const char *text, shmcfg_opt *ret);
/* The option's name and the final target's descriptor. */
const char *opt_name(shmcfg *h, shmcfg_opt opt);

/* A value as shmcfg_value_format() writes it (JSON; nan, inf as words),
 * safe for a terminal (json_for_terminal), malloc'd; NULL on ENOMEM. */
char *value_text(const shmcfg_value *v);
/* JSON text (malloc'd, taken) with the characters unsafe on a terminal
 * (termsafe.h: DEL, C1 controls, line separators) as \u escapes, which JSON
 * reads back as the same strings; NULL if text is NULL or on ENOMEM. */
char *json_for_terminal(char *text);
/* A JSON string of text others chose, \xNN for bytes that are no UTF-8. */
json_t *json_foreign(const char *s);
/* As value_text() but strings raw (`get --raw`). */
char *value_raw(const shmcfg_value *v);
/* `get`: as value_raw(), except a string that `set` would not read back as
 * itself (none, null in any case, or starting with a double quote) or that
 * holds a control (but a line break or tab) or a line separator, which is
 * quoted as value_text() does: null prints null, the text "null". */
char *value_plain(const shmcfg_value *v);
/* A value as a new jansson value (nan/inf as strings, like shmcfg_dump). */
json_t *value_json(const shmcfg_value *v);
/* "str", or "str?" for a nullable option. */
const char *type_label(shmcfg_type t, bool nullable, char *buf, size_t len);
/* ANSI colour code of a source. */
const char *source_color(shmcfg_source s);

/* Print a jansson value to stdout (indented unless compact), newline; frees it. */
int json_print(json_t *j, bool compact);

/* Aligned table on stdout. */
struct table;
struct table *table_new(size_t ncols, const char *const *headers);
/* Add a row: ncols strings (copied; NULL = ""). */
void table_row(struct table *t, const char *const *cells);
/* Colour of a cell of the last row added (an ANSI code, or NULL). */
void table_color(struct table *t, size_t col, const char *code);
/* Text printed on its own lines after the last row (indented; copied). */
void table_note(struct table *t, const char *text);
void table_note_lines(struct table *t, const char *text); /* a doc: its own lines kept */
/* Columns that may be cut to fit a terminal, with their minimum width. */
void table_shrink(struct table *t, size_t col, size_t min_width);
/* Print and free. */
void table_print(struct table *t);
/* Free without printing. */
void table_free(struct table *t);
size_t table_rows(const struct table *t);

/* Read a whole file ("-" = stdin). 0, or -errno. */
int read_file(const char *path, char **ret, size_t *len);
/* read_file's own errors: not a regular file (a FIFO, a device), over READ_FILE_MAX */
#define READ_NOT_REGULAR (-10001)
#define READ_TOO_BIG (-10002)
#define READ_FILE_MAX ((size_t)256 << 20)
/* read_file's error as text */
const char *read_file_error(int r);

/* Parse the running command's flags (of which only --json is acted on:
 * ls, hash, check, schema) and npos positionals into pos[]: 0, or -1 with
 * *exit_code set (help printed, or a usage error). */
int simple_args(int argc, char **argv, bool *json, const char **pos, int npos, int *exit_code);
/* The npos positionals after the options (argv[optind..]) into pos[]: 0, or
 * -1 with a usage error (missing or extra arguments). */
int take_positionals(int argc, char **argv, const char **pos, int npos, int *exit_code);

/* The used entries of a reader table (shmcfg_readers() with collect_reader). */
struct reader_list {
	shmcfg_reader *r;
	size_t n, cap;
};
void collect_reader(const shmcfg_reader *r, void *ud);

/* A user's name, or its number. */
const char *user_name(uid_t uid, char *buf, size_t len);

/*
 * The processes that have segment NAME mapped (shmcfg_attached_pids()), this
 * process left out, in ascending order. *exact is false when the count may
 * be a lower bound: the caller is not root and a process of a user other
 * than root that may open the segment (by its owner and mode) has a
 * /proc/PID/maps the caller cannot read. Returns the count (at most max
 * pids stored), or a negative code (-ENOENT...).
 */
int attached_processes(const char *name, pid_t *pids, size_t max, bool *exact);
/* "123, 456, 789" into buf (at most n pids; "..." when cut). */
void pid_list(const pid_t *pids, size_t n, char *buf, size_t len);
/*
 * Before a segment is removed (rm, create --force): warn on stderr naming
 * the live processes that have it attached, when the caller may remove it.
 * @p what: "removed" or "replaced".
 */
void warn_attached(const char *name, const char *what);
/* "  key           value" (coloured), for describe and stat; the value on
 * one line, its unsafe characters (termsafe.h) as \xNN. */
void kv(const char *key, const char *val, const char *col);

/* Every argv[first..] is OPTION=VALUE with a name: 0, or a usage error. */
int check_assignments(int argc, char **argv, int first);
/* resolve_option(), and the end of the option's alias chain (what a set
 * writes). 0 or EXIT_FAIL (printed). */
int resolve_final(shmcfg *h, const char *text, shmcfg_opt *opt, shmcfg_opt *final);
/* The error of a set of option FULL to VALUE (code r, the library's detail):
 * one line naming the option and the value. EXIT_FAIL. */
int fail_set(int r, const char *full, const char *value);

/* A generation argument (a number from 1): 0, or -1 with a usage error. */
int parse_generation(const char *text, uint64_t *gen, int *exit_code);
/* A snapshot of generation gen (0: the current one): a library code. */
int snapshot_of(shmcfg *h, uint64_t gen, shmcfg_snapshot **snap);
/* simple_args() that also takes --generation G (*gen 0 without it). */
int generation_args(int argc, char **argv, bool *json, uint64_t *gen, const char **pos, int npos,
		    int *exit_code);

/* ---- the commands: the handlers of the table --------------------------- */

int cmd_create(int argc, char **argv); /* shmctl-write.c */
int cmd_resize(int argc, char **argv);
int cmd_rm(int argc, char **argv);
int cmd_set(int argc, char **argv);
int cmd_reset(int argc, char **argv);
int cmd_load(int argc, char **argv);
int cmd_save(int argc, char **argv);
int cmd_gc(int argc, char **argv);
int cmd_ls(int argc, char **argv); /* shmctl-read.c */
int cmd_show(int argc, char **argv);
int cmd_get(int argc, char **argv);
int cmd_describe(int argc, char **argv);
int cmd_schema(int argc, char **argv);
/* shmctl __complete values NAME OPTION: the values the completion offers */
int complete_values(const char *seg, const char *option);
int cmd_stat(int argc, char **argv); /* shmctl-stat.c */
int cmd_hash(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_dump(int argc, char **argv);
int cmd_watch(int argc, char **argv);
int cmd_log(int argc, char **argv); /* shmctl-history.c */
int cmd_rollback(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_header(int argc, char **argv); /* shmctl-header.c */
int cl_set(int argc, char **argv);     /* shmctl-cluster.c */
int cl_reset(int argc, char **argv);
int cl_rollback(int argc, char **argv);
int cl_show(int argc, char **argv); /* shmctl-cluster-view.c */
int cl_log(int argc, char **argv);
int cl_diff(int argc, char **argv);
int cl_status(int argc, char **argv);
int cl_forget(int argc, char **argv);

#endif
