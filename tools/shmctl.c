/* SPDX-License-Identifier: MIT */
/*
 * shmctl: inspect and control shmcfg segments.
 *
 * This file: main and the command table. Each command is declared once
 * here, with its synopsis, summary, flags and help; the option parser
 * (next_opt), --help, the command list and the words the bash completion
 * offers (shmctl __complete) are made from it, and tests/cli/manpage.sh
 * checks shmctl.1 against it. Adding a command: doc/design.md. The
 * commands' files and the helpers they share: shmctl.h.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shmctl.h"

/* ---- flags that several commands take, with the same help ---------------- */

#define FLAG_JSON(what) {'J', "json", NULL, 0, NULL, what}
#define FLAG_QUIET {'q', "quiet", NULL, F_SHORT, NULL, "print nothing on success"}
#define FLAG_KNOB(what) {'K', "knob", NULL, 0, NULL, what}
#define FLAG_GENERATION(what) {'G', "generation", "G", F_SHORT, NULL, what}

/* ---- the local commands ------------------------------------------------- */

static const struct flag create_flags[] = {
	{'s', "schema", "FILE", F_SHORT, "@file",
	 "schema file (YAML, format 1); default: the embedded\ntorch.compiler.config schema"},
	{'k', "slots", "K", F_SHORT, NULL, "snapshot slots, 2-255 (default 8)"},
	{'S', "size", "BYTES", 0, NULL, "value heap: the layers set, all versions (K, M, G)"},
	{'R', "readers", "N", 0, NULL, "reader table entries (default 1024)"},
	{'H', "history", "N", 0, NULL, "commits the history keeps, 8-1048576 (default 1000)"},
	{'m', "mode", "OCTAL", F_SHORT, NULL, "permission bits (default 0600)"},
	{'g', "group", "GROUP", F_SHORT, "@group", "group of the object (name or number)"},
	{'E', "no-env", NULL, 0, NULL, "leave the environment layers empty"},
	{'f', "force", NULL, F_SHORT, NULL,
	 "replace a segment of that name: of the same schema, it\nkeeps its values, layers and history; its processes\n"
	 "follow the new one by themselves where they can open it\n(the others' reads fail, saying so)"},
	{'F', "fresh", NULL, 0, NULL,
	 "with --force: keep nothing of it (defaults, this\nenvironment's layers, a history of its own)"},
	{'e', "exist-ok", NULL, F_SHORT, NULL,
	 "keep a segment of that name and schema (its other\nsettings too) and load the files into it"},
	{'c', "conf", NULL, F_SHORT, NULL,
	 "the segment's configuration directory, $SHMCFG_CONF_DIR\nor /etc/shmcfg: NAME.yaml as the schema (unless\n"
	 "--schema), NAME.d as a --load-dir (each if it exists)"},
	{'l', "load", "FILE", F_SHORT, "@file", "load a dump, as shmctl load (- reads standard input)"},
	{'D', "load-dir", "DIR", 0, "@dir", "load DIR's *.json files in the order of their names"},
	FLAG_QUIET,
	{0},
};

static const struct flag resize_flags[] = {
	{'S', "size", "BYTES", 0, NULL, "value heap (K, M, G)"},
	{'H', "history", "N", 0, NULL, "commits the history keeps, 8-1048576"},
	{'R', "readers", "N", 0, NULL, "reader table entries, 1-65536"},
	{'k', "slots", "K", F_SHORT, NULL, "snapshot slots, 2-255"},
	FLAG_QUIET,
	{0},
};

static const struct flag rm_flags[] = {
	{'f', "force", NULL, F_SHORT, NULL, "ignore segments that do not exist"},
	{0},
};

static const struct flag ls_flags[] = {FLAG_JSON("print a JSON array"), {0}};

static const struct flag show_flags[] = {
	{0, "PATTERN", NULL, F_ARG, NULL,
	 "a glob (fnmatch: * ? [...]) on the full name or on a\ndotted suffix of it; without glob characters, a\nsubstring of the full name"},
	{'n', "non-default", NULL, F_SHORT, NULL, "only options that do not hold their default"},
	{'v', "verbose", NULL, F_SHORT, NULL, "print each option's doc under it"},
	FLAG_GENERATION("the values as of generation G (shmctl log)"),
	FLAG_JSON("print a JSON array of objects"),
	{'N', "names", NULL, F_HIDDEN, NULL, NULL}, /* the completion's option names */
	{0},
};

static const struct flag get_flags[] = {
	FLAG_GENERATION("the value as of generation G (shmctl log)"),
	FLAG_JSON("print the value as JSON (strings quoted)"),
	{'r', "raw", NULL, F_SHORT, NULL, "print a string exactly as it is (one OPTION)"},
	{0},
};

static const struct flag describe_flags[] = {
	FLAG_GENERATION("the value as of generation G (shmctl log)"),
	FLAG_JSON("print a JSON object"),
	{0},
};

static const struct flag set_flags[] = {
	FLAG_KNOB("write the knob layer (options that declare a knob) instead\nof the user layer"),
	FLAG_QUIET,
	FLAG_JSON("print {generation, changes: [{name, layer, old, new}]}"),
	{0},
};

static const struct flag reset_flags[] = {
	{'a', "all", NULL, F_SHORT, NULL, "every option"},
	FLAG_KNOB("clear the knob layer instead of the user layer"),
	FLAG_QUIET,
	FLAG_JSON("print {generation, changes}, as set does"),
	{0},
};

static const struct flag stat_flags[] = {
	{'c', "commits", "N", F_SHORT, NULL, "how many recent commits to list (default 10)"},
	FLAG_JSON("print a JSON object (--format json)"),
	{'f', "format", "FMT", 0, "text json prometheus",
	 "text (the default), json, or prometheus: metrics of the\nNAMEs, or of every segment without one, in Prometheus'\n"
	 "text format (node_exporter's textfile collector reads it)"},
	{0},
};

static const struct flag watch_flags[] = {
	{0, "OPTION", NULL, F_ARG, NULL, "only commits that touch these options (and only\ntheir changes)"},
	{'c', "count", "N", F_SHORT, NULL, "stop after N commits shown (exit 0)"},
	{'t', "timeout", "DURATION", F_SHORT, NULL,
	 "stop after that long: 500ms, 5s, 2m, 1h or seconds\n(exit 1 if --count was given and not reached, else 0)"},
	FLAG_JSON("print one JSON object per commit"),
	{'q', "quiet", NULL, F_SHORT, NULL, "do not say on stderr when watching starts"},
	{0},
};

static const struct flag dump_flags[] = {
	{'a', "all", NULL, F_SHORT, NULL, "also save-ignored and private options"},
	{'J', "json", NULL, F_HIDDEN, NULL, NULL}, /* taken: a dump is JSON */
	{0},
};

static const struct flag load_flags[] = {
	{'p', "partial", NULL, F_SHORT, NULL,
	 "apply what fits: skip (with a warning each) unknown or\nambiguous names and refused values; load another schema's dump"},
	FLAG_QUIET,
	{0},
};

static const struct flag save_flags[] = {FLAG_QUIET, {0}};

static const struct flag diff_flags[] = {
	{'f', "format", "FMT", F_SHORT, "python shell json",
	 "python (default: as codegen_config()), shell (shmctl set\ncommands) or json"},
	FLAG_JSON("the same as --format json; with G1, a JSON object"),
	{0},
};

static const struct flag log_flags[] = {
	{0, "OPTION", NULL, F_ARG, NULL, "only commits that changed these options (names as set)"},
	{'n', "max-count", "N", F_SHORT, NULL, "at most N commits"},
	FLAG_JSON("print a JSON array: every field of each commit"),
	{0},
};

static const struct flag rollback_flags[] = {FLAG_KNOB("restore the knob layer too"), FLAG_QUIET, {0}};

static const struct flag schema_flags[] = {
	FLAG_JSON("print {name, schema_hash, options: [...]}, each option\nas describe --json without the values"),
	{0},
};
static const struct flag hash_flags[] = {FLAG_JSON("print {\"generation\": N, \"config_hash\": \"hex\"}"), {0}};

static const struct flag check_flags[] = {
	FLAG_JSON("print {\"ok\": bool, \"problems\": [...], \"notes\": [...]}"),
	{0},
};

static const struct flag gc_flags[] = {
	{'O', "orphans", NULL, 0, NULL,
	 "remove only the lock objects whose segment is gone (of NAME,\nor of every name): what a segment removed with "
	 "rm(1) or\nunlink(2) leaves; gc with no NAME does the same"},
	FLAG_JSON("print {\"name\", \"reclaimed\": [{\"index\", \"pid\"}...],\n\"orphans\": [{\"name\", \"path\", \"uid\"}...]}"),
	{0},
};

static const struct flag header_flags[] = {
	{0, "NAME", NULL, F_ARG, NULL, "a segment: its schema"},
	{'s', "schema", "FILE", F_SHORT, "@file",
	 "a schema file (YAML, format 1); without NAME or --schema,\nthe embedded default schema"},
	{'p', "prefix", "P", F_SHORT, NULL, "prefix of every name the header defines (default cfg)"},
	{'S', "strip", "PREFIX", 0, NULL, "leave PREFIX. out of the options' C names"},
	{'n', "only", "GLOB", 0, NULL,
	 "only the options whose full name matches GLOB (fnmatch;\nrepeatable; each must match one)"},
	{'o', "output", "FILE", F_SHORT, "@file", "write FILE (replaced only on success) instead of stdout"},
	{0},
};

/* ---- cluster: its subcommands ------------------------------------------ */

/* every subcommand: where etcd is */
static const struct flag cluster_connect_flags[] = {
	{'E', "endpoints", "URL[,URL]", 0, NULL,
	 "etcd: http://HOST:PORT or unix:PATH (default:\n$SHMCFG_ETCD_ENDPOINTS, else the configuration\nfile's endpoints)"},
	{'C', "cluster", "NAME", 0, NULL, "the cluster (default: $SHMCFG_CLUSTER, else the\nconfiguration file's cluster)"},
	{'T', "timeout", "DURATION", 0, NULL,
	 "retry etcd's transient errors (leader changes,\ntimeouts) this long, and end all etcd reads\nby then (default 10s)"},
	{0},
};
#define CLUSTER_SCHEMA_FLAG \
	{'S', "schema", "FILE", 0, "@file", \
	 "check values against this schema file instead of\nsegment NAME's (without --schema, a host that has\n" \
	 "no segment NAME uses the schema the agents keep in\netcd: the one most hosts report)"}
/* set, reset, rollback: the audited writes */
static const struct flag cluster_write_flags[] = {
	{'r', "reason", "TEXT", 0, NULL, "recorded in the audit record"},
	{'w', "wait", "[=DURATION]", F_OPTARG, NULL,
	 "return once this host's segment has applied the\nchange and its status key says so (default 10s;\n"
	 "500ms, 5s, 2m, 1h or seconds; exit 1 if not)"},
	{'w', "wait=all", "[:DURATION]", F_DOC, NULL,
	 "return once every host of the roster (cluster\nstatus) has applied it; exit 1 naming those that\n"
	 "have not, or that rejected a value of it"},
	CLUSTER_SCHEMA_FLAG,
	{0},
};
static const struct flag cluster_set_flags[] = {
	FLAG_KNOB("write knob/<the option's knob> instead of opt/"),
	{0},
};
static const struct flag cluster_reset_flags[] = {
	FLAG_KNOB("delete knob/<the option's knob> instead of opt/"),
	{0},
};
static const struct flag cluster_show_flags[] = {FLAG_JSON("print a JSON object"), CLUSTER_SCHEMA_FLAG, {0}};
static const struct flag cluster_json_flags[] = {FLAG_JSON("print a JSON object"), {0}};
static const struct flag cluster_rollback_flags[] = {
	{'f', "force", NULL, 0, NULL, "roll back keys that changed since the record too"},
	{0},
};
static const struct flag cluster_forget_flags[] = {
	{'f', "force", NULL, 0, NULL, "also a host whose agent still reports a status"},
	{0},
};

#define CONNECT_SYN " [--endpoints URL[,URL]] [--cluster NAME] [--timeout DURATION]"
#define CONNECT_NOTES \
	"The configuration file is /etc/shmcfg/cluster.conf, or $SHMCFG_CLUSTER_CONF:\n" \
	"lines 'endpoints = URL[,URL]' and 'cluster = NAME', owned by root or you and\n" \
	"writable by nobody else. The segment's agent record is never used for them.\n"

static const struct command cluster_subs[] = {
	{"cluster set", cl_set,
	 "cluster set NAME OPTION=VALUE... [--knob] [--reason TEXT] [--wait[=all|DURATION]] [--schema FILE]\n"
	 "       " CONNECT_SYN,
	 "set cluster values: one audited etcd transaction",
	 {cluster_set_flags, cluster_write_flags, cluster_connect_flags},
	 CONNECT_NOTES
	 "Every value is checked against segment NAME's schema first (as shmctl set\n"
	 "parses it; see --schema for a host without it); nothing is written if one is\n"
	 "refused. The segment itself is not written: its agent (shmcfg-sync) applies\n"
	 "the change, as on every host.\n",
	 true, "segment assign...", NULL},
	{"cluster reset", cl_reset,
	 "cluster reset NAME OPTION... [--knob] [--reason TEXT] [--wait[=all|DURATION]] [--schema FILE]\n"
	 "       " CONNECT_SYN,
	 "delete cluster values: one audited etcd transaction",
	 {cluster_reset_flags, cluster_write_flags, cluster_connect_flags}, CONNECT_NOTES, true, "segment option...", NULL},
	{"cluster show", cl_show, "cluster show NAME [--schema FILE] [--json]\n"
	 "       " CONNECT_SYN,
	 "print what etcd holds: every opt/ and knob/ key", {cluster_show_flags, cluster_connect_flags},
	 CONNECT_NOTES "A value that is not JSON, or that segment NAME's schema refuses, is marked.\n", true, "segment", NULL},
	{"cluster log", cl_log, "cluster log NAME [--json]\n"
	 "       " CONNECT_SYN,
	 "print the audit records: who changed what, when and why", {cluster_json_flags, cluster_connect_flags},
	 CONNECT_NOTES, true, "segment", NULL},
	{"cluster diff", cl_diff, "cluster diff NAME SEQ1 [SEQ2] [--json]\n"
	 "       " CONNECT_SYN,
	 "print the cluster values that differ after audit record SEQ1 and SEQ2 (or now)",
	 {cluster_json_flags, cluster_connect_flags},
	 CONNECT_NOTES "Reads etcd at the revisions of the two records: exit 1 if one was compacted.\n", true,
	 "segment - -", NULL},
	{"cluster rollback", cl_rollback,
	 "cluster rollback NAME SEQ [--force] [--reason TEXT] [--wait[=all|DURATION]] [--schema FILE]\n"
	 "       " CONNECT_SYN,
	 "apply an audit record's before values as a new audited change",
	 {cluster_rollback_flags, cluster_write_flags, cluster_connect_flags},
	 CONNECT_NOTES "Without --force a key whose value is no longer the record's after value is\n"
		       "refused, and nothing is written.\n",
	 true, "segment -", NULL},
	{"cluster status", cl_status, "cluster status NAME [--json]\n"
	 "       " CONNECT_SYN,
	 "print every host's applied revision, generation, config hash and error",
	 {cluster_json_flags, cluster_connect_flags},
	 CONNECT_NOTES "Every host the cluster expects (its roster: each agent adds its host) is\n"
		       "listed. Marked: hosts missing (no status: the agent stopped or cannot reach\n"
		       "etcd), behind the newest revision, out of sync, with a config hash other\n"
		       "than the majority's, and hosts whose local layers override a cluster value\n"
		       "(each option, layer and value, hash-ignored options included).\n",
	 true, "segment", NULL},
	{"cluster forget", cl_forget, "cluster forget NAME HOST... [--force]\n"
	 "       " CONNECT_SYN,
	 "take hosts out of the roster: the cluster no longer expects them",
	 {cluster_forget_flags, cluster_connect_flags},
	 CONNECT_NOTES "An agent puts its host (and segment NAME) in the roster when it starts; only\n"
		       "forget takes it out. A running agent puts it back within 30 s.\n",
	 true, "segment -...", NULL},
	{0},
};

/* ---- the table ------------------------------------------------------------ */

const struct command shmctl_commands[] = {
	{"create", cmd_create,
	 "create NAME [--schema FILE] [--slots K] [--size BYTES] [--readers N]\n"
	 "       [--history N] [--mode OCTAL] [--group GROUP] [--no-env]\n"
	 "       [--force [--fresh] [--owner USER]|--exist-ok]\n"
	 "       [--conf] [--load FILE]... [--load-dir DIR]... [--quiet]",
	 "create a segment (the embedded default schema unless --schema)", {create_flags},
	 "The creating process's environment fills the env_default and env_force layers;\n"
	 "each variable applied is printed: VAR=value -> option (layer).\n"
	 "The files load strictly, in order (--conf's first), as one commit: a later\n"
	 "file's value of an option overrides an earlier one's. If one fails, a segment\n"
	 "created here is removed, an existing one is left unchanged.\n"
	 "--force over another user's segment (root only) keeps what it holds only with\n"
	 "--owner naming that user; with --fresh it is replaced with the defaults.\n",
	 true, "new", NULL},
	{"resize", cmd_resize, "resize NAME [--size BYTES] [--history N] [--readers N] [--slots K] [--quiet]",
	 "give a segment other sizes; it keeps everything else", {resize_flags},
	 "A new incarnation of the segment, with the same schema, values, layers,\n"
	 "history, mode and group, takes its place; every process attached to it\n"
	 "follows it by itself. A size not given stays as it is.\n",
	 true, "segment", NULL},
	{"rm", cmd_rm, "rm [--force] NAME...", "remove segments", {rm_flags},
	 "Attached processes keep the old segment (their last values) and learn it was\n"
	 "removed; a warning on stderr names them.\n",
	 false, "segment...", NULL},
	{"ls", cmd_ls, "ls [--json]", "list the segments of this host", {ls_flags},
	 "Lists /dev/shm/shmcfg.* with size, generation, options and attached processes\n"
	 "(those that have it mapped; N+ when processes of other users may be hidden).\n"
	 "A segment that cannot be read is listed with its error; an entry that is not\n"
	 "a segment (a FIFO, socket, directory, sparse object, another user's object)\n"
	 "with the reason.\n",
	 true, "", NULL},
	{"show", cmd_show, "show NAME [PATTERN] [--non-default] [-v] [--generation G] [--json]",
	 "show options: name, value, type, source, default", {show_flags}, NULL, true, "segment option", NULL},
	{"get", cmd_get, "get NAME OPTION... [--generation G] [--json|--raw]", "print options' values", {get_flags},
	 "One line per OPTION, in the order given, all of one generation. Null\n"
	 "prints as null. A string prints as it is, unless set would not read it\n"
	 "back as itself (none or null in any case, or a leading double quote), or\n"
	 "it holds a line break and several options are printed: then it prints as\n"
	 "a JSON string (\"None\").\n",
	 true, "segment option...", NULL},
	{"describe", cmd_describe, "describe NAME OPTION [--generation G] [--json]",
	 "print every attribute of an option and its doc", {describe_flags}, NULL, true, "segment option", NULL},
	{"set", cmd_set, "set NAME OPTION=VALUE... [--knob] [--quiet] [--json]", "set options, all in one commit",
	 {set_flags},
	 "VALUE is parsed by the option's type: bool true/false/1/0; int; float;\n"
	 "none or null for a nullable option (refused, unquoted, for a string that\n"
	 "cannot be null); list and set as a JSON array or comma-separated text; a\n"
	 "value in double quotes is a JSON string literal ('opt=\"None\"' is the text).\n"
	 "Prints each change, then the generation.\n",
	 true, "segment assign...", NULL},
	{"reset", cmd_reset,
	 "reset NAME OPTION... [--knob] [--quiet] [--json]\n       reset NAME --all [--knob] [--quiet] [--json]",
	 "clear the user (or knob) layer of options", {reset_flags}, NULL, true, "segment option...", NULL},
	{"stat", cmd_stat,
	 "stat NAME [--commits N] [--json | --format text|json]\n       stat [NAME...] --format prometheus",
	 "show the segment's header, attached processes, slots, readers and last commits", {stat_flags}, NULL, true,
	 "segment...", NULL},
	{"watch", cmd_watch, "watch NAME [OPTION...] [--count N] [--timeout DURATION] [--json] [--quiet]",
	 "print one line per commit", {watch_flags}, NULL, true, "segment option...", NULL},
	{"dump", cmd_dump, "dump NAME [--all]", "print the configuration as JSON", {dump_flags}, NULL, true, "segment", NULL},
	{"load", cmd_load, "load NAME FILE|- [--partial] [--quiet]", "load a JSON dump as one commit", {load_flags},
	 "FILE holds a dump (its \"values\") or a plain {name: value} object; - reads\n"
	 "standard input. Names resolve as in set. Without --partial a dump of another\n"
	 "schema, or any unknown name (all are listed), fails the load: nothing changes.\n",
	 true, "segment file", NULL},
	{"save", cmd_save, "save NAME FILE|- [--quiet]", "write the user layer to a file that load reads back",
	 {save_flags},
	 "Writes what set and load wrote (the user layer) as a dump without a schema\n"
	 "hash; - writes standard output. FILE is replaced at once (a temporary file,\n"
	 "then a rename), and only if it is a regular file.\n",
	 true, "segment file", NULL},
	{"diff", cmd_diff, "diff NAME [--format python|shell|json] [--json]\n       shmctl diff NAME G1 [G2] [--json]",
	 "print the non-default settings as code, or what changed between generations", {diff_flags},
	 "With G1: every option whose value or layers differ between generation G1 and\n"
	 "G2 (default: the current one), each layer that moved under it.\n",
	 true, "segment - -", NULL},
	{"log", cmd_log, "log NAME [OPTION...] [-n N] [--json]", "the segment's history: who changed what, newest first",
	 {log_flags},
	 "Each commit: generation, time, user, process and pid, origin, and each layer\n"
	 "it changed (old -> new). The segment keeps the last N commits (shmctl\n"
	 "create --history N).\n",
	 true, "segment option...", NULL},
	{"rollback", cmd_rollback, "rollback NAME G [--knob] [--quiet]",
	 "restore the user layer as it was at generation G, in one commit", {rollback_flags},
	 "Prints the changes the new commit made. G must still be rebuildable from\n"
	 "the history (shmctl log; exit 1 names the oldest one otherwise).\n",
	 true, "segment -", NULL},
	{"schema", cmd_schema, "schema NAME [--json]", "print the segment's schema as a schema file", {schema_flags},
	 "Writes YAML (format 1) that create --schema reads back to the same schema\n"
	 "hash: the segment's options, types, defaults, bounds, choices, variables,\n"
	 "knobs, aliases, implications and docs. --json: each option as describe\n"
	 "--json gives it, without the values.\n",
	 true, "segment", NULL},
	{"hash", cmd_hash, "hash NAME [--json]", "print the config hash", {hash_flags}, NULL, true, "segment", NULL},
	{"check", cmd_check, "check NAME [--json]", "verify header, bounds, checksums and the reader table",
	 {check_flags}, "Exit status 0 if the segment is sound, 1 with the problems listed.\n", true, "segment", NULL},
	{"gc", cmd_gc, "gc [NAME] [--orphans] [--json]",
	 "reclaim the reader entries of dead processes; remove orphaned lock objects", {gc_flags},
	 "With NAME: its dead readers' entries, then its orphaned lock objects.\n"
	 "Without: every orphaned lock object, and the validated schema copies\n"
	 "(/dev/shm/shmcfg-schema.HASH.UID) that no segment you can read uses.\n",
	 true, "segment", NULL},
	{"cluster", NULL, NULL, /* the synopsis: each subcommand's (print_synopsis) */
	 "the cluster layer kept in etcd: set, reset, show, log, diff, rollback, status, forget", {NULL},
	 "Each subcommand takes --endpoints URL[,URL] and --cluster NAME (defaults:\n"
	 "$SHMCFG_ETCD_ENDPOINTS and $SHMCFG_CLUSTER, else /etc/shmcfg/cluster.conf).\n"
	 "None needs segment NAME on this host: set and reset then check values\n"
	 "against the schema the agents keep in etcd, or --schema FILE.\n",
	 false, NULL, cluster_subs},
	{"header", cmd_header,
	 "header [NAME | --schema FILE] [--prefix P] [--strip PREFIX] [--only GLOB]...\n"
	 "       [-o FILE]",
	 "print a C header of inline accessors for a schema", {header_flags},
	 "The header holds the schema hash, P_attach() (which refuses a segment of\n"
	 "another schema), a handle per option, an inline accessor P_NAME() per bool, int\n"
	 "and float option, and P_read(), which reads them all from one generation.\n"
	 "Names: dots become underscores (torch.x.y -> P_torch_x_y).\n",
	 true, "segment|schema", NULL},
};

const size_t shmctl_ncommands = sizeof shmctl_commands / sizeof shmctl_commands[0];

/* The flags before the command (main parses them: they end at the command).
 * --color, --json and --owner are taken after it too (next_opt; --json is
 * handed to the command as its first flag). */
static const struct flag global_flags[] = {
	{'c', "color", "[=WHEN]", F_OPTARG, "auto always never", NULL},
	{'c', "colour", "[=WHEN]", F_OPTARG | F_HIDDEN, NULL, NULL},
	{'J', "json", NULL, 0, NULL, NULL},
	{'O', "owner", "USER", 0, "@user", NULL},
	{'h', "help", NULL, F_SHORT, NULL, NULL},
	{'V', "version", NULL, F_SHORT, NULL, NULL},
	{0},
};

static void main_usage(FILE *f)
{
	fprintf(f, "usage: shmctl [--color[=auto|always|never]] [--json] [--owner USER] COMMAND [ARGS...]\n"
		   "       shmctl COMMAND --help\n"
		   "       shmctl --version\n\n"
		   "Inspect and control shmcfg segments (configuration in shared memory).\n\n"
		   "Commands:\n");
	for (size_t i = 0; i < shmctl_ncommands; i++)
		fprintf(f, "  %-9s %s\n", shmctl_commands[i].name, shmctl_commands[i].summary);
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

/* The name of a subcommand without its command's ("cluster set" -> "set"). */
static const char *sub_name(const struct command *s)
{
	const char *sp = strrchr(s->name, ' ');
	return sp ? sp + 1 : s->name;
}

/* The command (or subcommand of @p parent) named @p name; NULL if none. */
static const struct command *find_command(const struct command *parent, const char *name)
{
	if (parent) {
		for (const struct command *s = parent->subs; s->name; s++)
			if (!strcmp(sub_name(s), name))
				return s;
		return NULL;
	}
	for (size_t k = 0; k < shmctl_ncommands; k++)
		if (!strcmp(shmctl_commands[k].name, name))
			return &shmctl_commands[k];
	return NULL;
}

/* An unknown command: one line, with the closest command when one is close. */
static int unknown_command(const char *name)
{
	const char *names[shmctl_ncommands + 1];
	for (size_t k = 0; k < shmctl_ncommands; k++)
		names[k] = shmctl_commands[k].name;
	names[shmctl_ncommands] = "help";
	const char *near = closest_word(name, names, shmctl_ncommands + 1);
	if (near)
		err_msg("unknown command '%s'; did you mean '%s'?", name, near);
	else
		err_msg("unknown command '%s' (see 'shmctl --help')", name);
	return EXIT_USAGE;
}

/* The subcommands of @p c as "set, reset, ... or forget" (last "or" when
 * @p or), in buf. */
static const char *sub_list(const struct command *c, bool or, char *buf, size_t len)
{
	size_t used = 0, n = 0;
	buf[0] = 0;
	while (c->subs[n].name)
		n++;
	for (size_t k = 0; k < n && used < len; k++) {
		int w = snprintf(buf + used, len - used, "%s%s", k == 0 ? "" : or && k + 1 == n ? " or " : ", ",
				 sub_name(&c->subs[k]));
		if (w > 0)
			used += (size_t)w;
	}
	return buf;
}

/* A command of subcommands (cluster): the subcommand runs argv[1..]. */
static int run_subcommand(int argc, char **argv)
{
	const struct command *parent = cur_cmd;
	char list[256];
	if (argc < 2)
		return usage_error("missing subcommand: %s", sub_list(parent, true, list, sizeof list));
	const char *name = argv[1];
	if (!strcmp(name, "-h") || !strcmp(name, "--help"))
		return print_help(parent);
	const struct command *s = find_command(parent, name);
	if (s) {
		cur_cmd = s;
		optind = 1;
		return s->run(argc - 1, argv + 1);
	}
	const char *names[32];
	size_t n = 0;
	for (; parent->subs[n].name && n < 32; n++)
		names[n] = sub_name(&parent->subs[n]);
	const char *near = closest_word(name, names, n);
	if (near)
		return usage_line("unknown subcommand '%s'; did you mean '%s'?", name, near);
	return usage_line("unknown subcommand '%s' (%s)", name, sub_list(parent, false, list, sizeof list));
}

/* ---- shmctl __complete: what the bash completion asks ------------------- */

/* One flag as the completion reads it: "--name KIND [WORDS...]", KIND none,
 * optional, text, file, dir, user, group or words. */
static int complete_flag(const struct flag *f, void *ud)
{
	(void)ud;
	if (f->flags & (F_HIDDEN | F_ARG))
		return 0;
	const char *kind = !f->metavar || (f->flags & F_DOC) ? "none"
			   : f->flags & F_OPTARG		    ? "optional"
			   : !f->complete			    ? "text"
			   : f->complete[0] == '@'		    ? f->complete + 1
								    : "words";
	printf("--%s %s%s%s\n", f->name, kind, !strcmp(kind, "words") ? " " : "",
	       !strcmp(kind, "words") ? f->complete : "");
	if ((f->flags & F_SHORT) && f->metavar && !(f->flags & F_OPTARG))
		printf("-%c %s%s%s\n", f->key, kind, !strcmp(kind, "words") ? " " : "",
		       !strcmp(kind, "words") ? f->complete : "");
	return 0;
}

/*
 * shmctl __complete commands [CMD]: the commands (or CMD's subcommands);
 * __complete flags [CMD [SUB]]: the flags (before a command: the global
 * ones), one a line as complete_flag() prints them (the flags that take an
 * argument also by their short name, so that the completion can skip it);
 * __complete args CMD [SUB]: the positional arguments (struct command.args);
 * __complete values NAME OPTION: the values of an option. Exit 2, silently,
 * for anything else.
 */
static int cmd_complete(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "values"))
		return complete_values(argv[2], argv[3]);
	if (argc < 2 || argc > 4)
		return EXIT_USAGE;
	const char *what = argv[1];
	const struct command *c = argc > 2 ? find_command(NULL, argv[2]) : NULL;
	if (argc > 2 && !c)
		return EXIT_USAGE;
	if (argc > 3 && !(c->subs && (c = find_command(c, argv[3]))))
		return EXIT_USAGE;
	if (!strcmp(what, "commands") && argc <= 3) {
		if (c && c->subs)
			for (const struct command *s = c->subs; s->name; s++)
				puts(sub_name(s));
		else if (!c) {
			for (size_t k = 0; k < shmctl_ncommands; k++)
				puts(shmctl_commands[k].name);
			puts("help");
		}
		return EXIT_OK;
	}
	if (!strcmp(what, "flags")) {
		if (!c)
			for (const struct flag *f = global_flags; f->name; f++)
				complete_flag(f, NULL);
		else if (!c->subs)
			command_flags(c, complete_flag, NULL);
		return EXIT_OK;
	}
	if (!strcmp(what, "args") && c) {
		if (c->args && *c->args)
			puts(c->args);
		return EXIT_OK;
	}
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
			if (!user) {
				err_msg("option '--owner' needs an argument");
				return EXIT_USAGE;
			}
			if (parse_owner(user))
				return EXIT_FAIL;
		} else if (!strcmp(a, "--")) {
			i++;
			break;
		} else {
			char typed[80];
			snprintf(typed, sizeof typed, "%s", a + strspn(a, "-"));
			typed[strcspn(typed, "=")] = 0;
			const char *names[16];
			size_t n = 0;
			for (const struct flag *f = global_flags; f->name && n < 16; f++)
				names[n++] = f->name;
			const char *near = closest_word(typed, names, n);
			if (near)
				err_msg("unknown option '%s'; did you mean '--%s'?", a, near);
			else
				err_msg("unknown option '%s' (see 'shmctl --help')", a);
			return EXIT_USAGE;
		}
	}
	if (set_color(when))
		return EXIT_USAGE;
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
		if (!(cur_cmd = find_command(NULL, argv[i + 1])))
			return unknown_command(argv[i + 1]);
		return print_help(cur_cmd);
	}
	if (!strcmp(name, "__complete")) /* hidden: the bash completion's helper */
		return cmd_complete(argc - i, argv + i);
	if (!(cur_cmd = find_command(NULL, name)))
		return unknown_command(name);
	/* given before a command that attaches nothing it would be ignored: an
	 * operator who wrote it meant something */
	if (have_owner && !cur_cmd->attaches && !cur_cmd->subs) {
		err_msg("%s: --owner names whom to trust when attaching a segment; %s attaches none", name, name);
		return EXIT_USAGE;
	}
	shmcfg_set_log(log_cb, NULL);
	/* the command parses argv[i..]: argv[0] of its getopt is its name;
	 * a --json given before the command is its first flag (after the
	 * subcommand of a command of subcommands) */
	int sub_argc = argc - i;
	char **sub_argv = argv + i;
	if (json) {
		int at = cur_cmd->subs && sub_argc > 1 ? 2 : 1;
		sub_argv = calloc((size_t)sub_argc + 2, sizeof *sub_argv);
		if (!sub_argv)
			return fail("out of memory");
		memcpy(sub_argv, argv + i, (size_t)at * sizeof *sub_argv);
		sub_argv[at] = (char *)"--json";
		memcpy(sub_argv + at + 1, argv + i + at, (size_t)(sub_argc - at) * sizeof *sub_argv);
		sub_argc++;
	}
	optind = 1;
	int r = cur_cmd->subs ? run_subcommand(sub_argc, sub_argv) : cur_cmd->run(sub_argc, sub_argv);
	if (sub_argv != argv + i)
		free(sub_argv);
	if (fflush(stdout) == EOF || ferror(stdout)) {
		if (errno != EPIPE)
			fprintf(stderr, "shmctl: write error: %s\n", strerror(errno));
		return EXIT_FAIL;
	}
	return r;
}
