/*
 * shmctl: inspect and control shmcfg segments. Declarations shared by the
 * files of tools/shmctl*.c.
 *
 *   shmctl.c        main, subcommand table, usage, errors, attach, colour
 *   shmctl-util.c   argument parsing, option names, tables, values as
 *                   text and JSON
 *   shmctl-read.c   ls, show, get, describe
 *   shmctl-stat.c   stat, hash, check, dump, diff, watch
 *   shmctl-write.c  create, rm, set, reset, load, save, gc
 *   shmctl-header.c header (a C header of accessors for a schema)
 *   shmctl-cluster.c cluster set, reset, show, log, rollback, status (etcd)
 *   shmctl-history.c log, rollback, diff G1 [G2], show/get --generation
 *
 * Exit status: 0 success, 1 failure, 2 usage error.
 */
#ifndef SHMCTL_H
#define SHMCTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <jansson.h>

#include "shmcfg.h"

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

/* ---- shmctl.c ---------------------------------------------------------- */

/* One subcommand. */
struct command {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *synopsis; /* the lines after "usage: shmctl " (several separated by \n) */
	const char *summary;  /* one line for the command list */
	const char *help;     /* the options, for --help */
	bool attaches;        /* attaches a segment: takes --owner */
};

extern const struct command *cur_cmd; /* the running subcommand */
extern bool use_color;               /* colour on stdout */

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
/* A usage error of the running subcommand: message, synopsis, EXIT_USAGE. */
int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A usage error in one line ("shmctl: CMD: ..."), without the synopsis:
 * an unknown flag, a bad duration. EXIT_USAGE. */
int usage_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The word of words[] closest to @p typed (a typo: a few edits or swapped
 * neighbours, or an abbreviation), NULL if none is close. */
const char *closest_word(const char *typed, const char *const *words, size_t n);
/* Print the running subcommand's --help to stdout; returns EXIT_OK. */
int print_help(void);

/*
 * Parse the options shared by every subcommand (--help, --json) along with
 * the subcommand's own: a getopt_long loop. Returns the option character,
 * -1 at the end, or -2 after it printed help (exit 0) / a usage error
 * (*exit_code set).
 */
struct option;
int next_opt(int argc, char **argv, const char *shortopts, const struct option *longopts,
	     int *exit_code);

/*
 * --owner USER of the commands that attach (parsed by next_opt()): the uid
 * that must own the segments they attach. Without it the library trusts
 * segments owned by the caller or root only.
 */
extern bool have_owner;
extern uid_t owner_uid;
/* shmcfg_attach_with() with SHMCFG_ATTACH_RDONLY or not and --owner. */
int attach_segment(const char *name, bool rdonly, shmcfg **ret);
/* Attach a segment: read-only or read-write; prints the error. 0 or EXIT_FAIL. */
int open_segment(const char *name, bool rdonly, shmcfg **ret);
/* Print the error of a failed attach (code r, the library's detail); EXIT_FAIL. */
int attach_error(int r, const char *name, bool rdonly, const char *detail);

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

/* ---- shmctl-util.c ----------------------------------------------------- */

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

/* Resolve OPTION (full name or unique suffix: shmcfg_resolve). Prints the
 * library's error (ambiguous, unknown with suggestions). 0 or EXIT_FAIL. */
int resolve_option(shmcfg *h, const char *text, shmcfg_opt *ret);
/* resolve_option() without a word: 1 and *ret, 0 (no such option), -1
 * (ambiguous), -ENOMEM. */
int find_option(shmcfg *h, const char *text, shmcfg_opt *ret);
/* The option's name and the final target's descriptor. */
const char *opt_name(shmcfg *h, shmcfg_opt opt);

/* A value as JSON text (strings quoted), malloc'd; NULL on ENOMEM. */
char *value_text(const shmcfg_value *v);
/* As value_text() but strings raw (`get --raw`). */
char *value_raw(const shmcfg_value *v);
/* `get`: as value_raw(), except a string that `set` would not read back as
 * itself (none, null in any case, or starting with a double quote), which
 * is quoted as value_text() does: null prints null, the text "null". */
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

/* Parse "[--json] [--help]" and npos positionals into pos[]: 0, or -1 with
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
/* "  key           value" (coloured), for describe and stat. */
void kv(const char *key, const char *val, const char *col);

/* ---- shmctl-header.c ---------------------------------------------------- */

/* A private segment of @p schema (NULL: the embedded default), already
 * unlinked: only this process has it. What the library says of a schema
 * that is in no segment (its hash, its options) is read through one. */
int private_segment(const shmcfg_schema *schema, shmcfg **ret);

/* ---- shmctl-write.c: what set shares with cluster set ------------------ */

/* Every argv[first..] is OPTION=VALUE with a name: 0, or a usage error. */
int check_assignments(int argc, char **argv, int first);
/* resolve_option(), and the end of the option's alias chain (what a set
 * writes). 0 or EXIT_FAIL (printed). */
int resolve_final(shmcfg *h, const char *text, shmcfg_opt *opt, shmcfg_opt *final);
/* The error of a set of option FULL to VALUE (code r, the library's detail):
 * one line naming the option and the value. EXIT_FAIL. */
int fail_set(int r, const char *full, const char *value);

/* ---- shmctl-read.c ----------------------------------------------------- */

/* The names of /dev/shm's entries named like segments (shmcfg.NAME), sorted:
 * ls and stat --format prometheus list them. Each and the array are the
 * caller's to free. EXIT_OK or EXIT_FAIL (said). */
int list_segments(char ***names, size_t *n);

/* ---- the subcommands --------------------------------------------------- */

int cmd_create(int argc, char **argv);
int cmd_rm(int argc, char **argv);
int cmd_resize(int argc, char **argv);
int cmd_ls(int argc, char **argv);
int cmd_show(int argc, char **argv);
int cmd_get(int argc, char **argv);
int cmd_describe(int argc, char **argv);
int cmd_set(int argc, char **argv);
int cmd_reset(int argc, char **argv);
int cmd_stat(int argc, char **argv);
int cmd_watch(int argc, char **argv);
int cmd_dump(int argc, char **argv);
int cmd_schema(int argc, char **argv);
int cmd_load(int argc, char **argv);
int cmd_save(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_hash(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_gc(int argc, char **argv);
int cmd_header(int argc, char **argv);
int cmd_complete(int argc, char **argv); /* hidden: shmctl __complete (bash completion) */
int cmd_cluster(int argc, char **argv); /* shmctl-cluster.c */
int cmd_log(int argc, char **argv);     /* shmctl-history.c */
int cmd_rollback(int argc, char **argv);

/* ---- shmctl-history.c: --generation of show and get, diff G1 [G2] ------ */

/* A generation argument (a number from 1): 0, or -1 with a usage error. */
int parse_generation(const char *text, uint64_t *gen, int *exit_code);
/* A snapshot of generation gen (0: the current one): a library code. */
int snapshot_of(shmcfg *h, uint64_t gen, shmcfg_snapshot **snap);
/* simple_args() that also takes --generation G (*gen 0 without it). */
int generation_args(int argc, char **argv, bool *json, uint64_t *gen, const char **pos, int npos,
		    int *exit_code);
/* diff NAME G1 [G2]: what changed between two generations. An exit status. */
int diff_generations(const char *seg, const char *g1, const char *g2, bool json);

#endif
