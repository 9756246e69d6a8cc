/* SPDX-License-Identifier: MIT */
/*
 * shmctl: what the commands share (they call nothing of shmctl.c nor of
 * each other's files): numbers, sizes and times; files; option names
 * (resolved by the library: shmcfg_resolve); values as text and JSON;
 * aligned tables; processes attached; messages; the option parser and
 * --help, made from the running command's entry of the table (shmctl.c);
 * attaching segments; what set shares with cluster set; generations.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <pwd.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <dirent.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "distance.h"
#include "shmctl.h"

/* ------------------------------------------------------------------ */
/* Numbers, sizes, times                                              */
/* ------------------------------------------------------------------ */

bool parse_u64(const char *s, uint64_t *ret)
{
	if (!s || !*s || *s == '-' || *s == '+' || *s == ' ')
		return false;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end)
		return false;
	*ret = v;
	return true;
}

bool parse_size(const char *s, uint64_t *ret)
{
	if (!s || !*s || *s == '-' || *s == '+' || *s == ' ')
		return false;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s)
		return false;
	unsigned shift = 0;
	if (*end) {
		switch (*end) {
		case 'k': case 'K': shift = 10; break;
		case 'm': case 'M': shift = 20; break;
		case 'g': case 'G': shift = 30; break;
		default: return false;
		}
		end++;
		if (!strcmp(end, "iB") || !strcmp(end, "B") || !strcmp(end, "ib") || !strcmp(end, "b"))
			end += strlen(end);
		if (*end)
			return false;
	}
	if (shift && v > (UINT64_MAX >> shift))
		return false;
	*ret = (uint64_t)v << shift;
	return true;
}

/* The units of a duration, in seconds; plain numbers are seconds. */
static const struct {
	const char *suffix;
	double seconds;
} duration_units[] = {{"ms", 1e-3}, {"s", 1}, {"m", 60}, {"h", 3600}};

bool parse_duration(const char *s, double *ret)
{
	if (!s || !*s || !(('0' <= *s && *s <= '9') || *s == '.') || strpbrk(s, "xXpP"))
		return false; /* no sign, space, "inf", "nan" or hex */
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || !isfinite(v))
		return false;
	if (*end) {
		size_t u = 0, nu = sizeof duration_units / sizeof duration_units[0];
		while (u < nu && strcmp(end, duration_units[u].suffix))
			u++;
		if (u == nu)
			return false;
		v *= duration_units[u].seconds;
	}
	if (v > 1e7) /* 115 days: longer is a typo */
		return false;
	*ret = v;
	return true;
}

int duration_arg(const char *flag, const char *text, double *ret)
{
	if (parse_duration(text, ret))
		return 0;
	return usage_line("%s: bad duration '%s' (give 500ms, 5s, 2m, 1h or seconds)", flag, text);
}

void hex16(const uint8_t in[16], char out[33])
{
	static const char digits[] = "0123456789abcdef";
	for (int i = 0; i < 16; i++) {
		out[2 * i] = digits[in[i] >> 4];
		out[2 * i + 1] = digits[in[i] & 15];
	}
	out[32] = 0;
}

void human_size(uint64_t bytes, char *buf, size_t len)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	double v = (double)bytes;
	unsigned u = 0;
	while (v >= 1024 && u + 1 < sizeof units / sizeof units[0]) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%llu B", (unsigned long long)bytes);
	else
		snprintf(buf, len, "%.*f %s", v < 10 ? 1 : 0, v, units[u]);
}

void time_local(uint64_t ns, char *buf, size_t len)
{
	time_t t = (time_t)(ns / 1000000000ull);
	struct tm tm;
	if (!ns || !localtime_r(&t, &tm) || !strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm))
		snprintf(buf, len, "-");
}

void committer_text(const char *user, uint32_t uid, const char *process, int32_t pid, const char *who,
		    uint64_t cluster_rev, char *buf, size_t len)
{
	char u[96], p[48], o[96] = "", c[48] = "";
	if (user[0])
		snprintf(u, sizeof u, "%.64s (uid %u)", user, uid);
	else
		snprintf(u, sizeof u, "uid %u", uid);
	if (process[0])
		snprintf(p, sizeof p, "%.16s[%d]", process, (int)pid);
	else
		snprintf(p, sizeof p, "pid %d", (int)pid);
	if (who[0])
		snprintf(o, sizeof o, "  origin: %.64s", who);
	if (cluster_rev)
		snprintf(c, sizeof c, "  cluster revision %llu", (unsigned long long)cluster_rev);
	/* others chose the names: the library's check lets a line separator
	 * through (and a cut may split a character) */
	char line[320];
	snprintf(line, sizeof line, "%s  %s%s%s", u, p, o, c);
	term_escape(line, strlen(line), buf, len);
}

void time_utc(uint64_t ns, char *buf, size_t len)
{
	time_t t = (time_t)(ns / 1000000000ull);
	struct tm tm;
	char base[40];
	if (!gmtime_r(&t, &tm) || !strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm))
		snprintf(base, sizeof base, "?");
	snprintf(buf, len, "%s.%03uZ", base, (unsigned)(ns % 1000000000ull / 1000000ull));
}

const char *read_file_error(int r)
{
	return r == READ_NOT_REGULAR ? "not a regular file (a FIFO, a device or a socket)"
	       : r == READ_TOO_BIG   ? "over 256 MiB: not a configuration"
				     : strerror(-r);
}

int read_file(const char *path, char **ret, size_t *len)
{
	/* a file, never a FIFO that blocks (opened non-blocking, refused) */
	int fd = strcmp(path, "-") ? open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC) : STDIN_FILENO;
	if (fd < 0)
		return -errno;
	struct stat st;
	int e = fd == STDIN_FILENO ? 0 : fstat(fd, &st) ? -errno : S_ISDIR(st.st_mode) ? -EISDIR
							   : !S_ISREG(st.st_mode) ? READ_NOT_REGULAR
							   : (uint64_t)st.st_size > READ_FILE_MAX ? READ_TOO_BIG : 0;
	if (e) {
		close(fd);
		return e;
	}
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap);
	int r = 0;
	for (;;) {
		if (!buf) {
			r = -ENOMEM;
			break;
		}
		if (n > READ_FILE_MAX) { /* /dev/stdin of /dev/zero, a file that grew */
			r = READ_TOO_BIG;
			break;
		}
		if (n + 1 >= cap) { /* never past the limit and a byte to see it passed */
			size_t ncap = cap * 2 < READ_FILE_MAX + 2 ? cap * 2 : READ_FILE_MAX + 2;
			char *nb = realloc(buf, ncap);
			if (!nb) {
				r = -ENOMEM;
				break;
			}
			buf = nb;
			cap = ncap;
		}
		/* at most one byte past the limit */
		size_t want = cap - n - 1 < READ_FILE_MAX + 1 - n ? cap - n - 1 : READ_FILE_MAX + 1 - n;
		ssize_t k = read(fd, buf + n, want);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			r = -errno;
			break;
		}
		if (k == 0)
			break;
		n += (size_t)k;
	}
	if (fd != STDIN_FILENO)
		close(fd);
	if (r) {
		free(buf);
		return r;
	}
	buf[n] = 0;
	*ret = buf;
	*len = n;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Shared by the read commands                                        */
/* ------------------------------------------------------------------ */

/* The running command's flags (--json acted on) and @p npos positionals. */
int simple_args(int argc, char **argv, bool *json, const char **pos, int npos, int *exit_code)
{
	int c;
	while ((c = next_opt(argc, argv, exit_code)) != -1) {
		if (c == -2)
			return -1;
		if (c == 'J')
			*json = true;
	}
	return take_positionals(argc, argv, pos, npos, exit_code);
}

int take_positionals(int argc, char **argv, const char **pos, int npos, int *exit_code)
{
	int n = argc - optind;
	if (n < npos) {
		*exit_code = usage_error("missing %s", n == 0 ? "segment NAME" : "OPTION");
		return -1;
	}
	if (n > npos) {
		*exit_code = usage_error("unexpected argument '%s'", argv[optind + npos]);
		return -1;
	}
	for (int i = 0; i < npos; i++)
		pos[i] = argv[optind + i];
	return 0;
}

/* shmcfg_readers() callback: append to a struct reader_list. */
void collect_reader(const shmcfg_reader *r, void *ud)
{
	struct reader_list *l = ud;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 8;
		shmcfg_reader *nr = realloc(l->r, cap * sizeof *nr);
		if (!nr)
			return;
		l->r = nr;
		l->cap = cap;
	}
	l->r[l->n++] = *r;
}

/* A user name, or the number. */
const char *user_name(uid_t uid, char *buf, size_t len)
{
	struct passwd *pw = getpwuid(uid);
	if (pw)
		snprintf(buf, len, "%s", pw->pw_name);
	else
		snprintf(buf, len, "%u", (unsigned)uid);
	return buf;
}

/* ------------------------------------------------------------------ */
/* Attached processes                                                 */
/* ------------------------------------------------------------------ */

#define SEG_PATH_FMT "/dev/shm/shmcfg.%s"

static int cmp_pid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
	return (x > y) - (x < y);
}

/*
 * Whether a process this one cannot see into (its /proc/PID/maps is not
 * readable: another user's) may have the segment mapped: one of a user
 * other than root whom the object's owner and mode let open it. Processes
 * of root are visible only to root (documented in shmctl(1)).
 */
static bool hidden_may_attach(const struct stat *seg)
{
	DIR *d = opendir("/proc");
	if (!d)
		return true;
	bool found = false;
	for (struct dirent *e; !found && (e = readdir(d));) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);
		if (*end || pid <= 0)
			continue;
		char path[64];
		snprintf(path, sizeof path, "/proc/%ld/maps", pid);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			close(fd);
			continue;
		}
		if (errno != EACCES && errno != EPERM)
			continue; /* gone */
		struct stat pst;
		snprintf(path, sizeof path, "/proc/%ld", pid);
		if (stat(path, &pst) < 0 || pst.st_uid == 0)
			continue;
		found = pst.st_uid == seg->st_uid ? (seg->st_mode & 0600) != 0 : (seg->st_mode & 0066) != 0;
	}
	closedir(d);
	return found;
}

int attached_processes(const char *name, pid_t *pids, size_t max, bool *exact)
{
	size_t cap = 64;
	pid_t *all = NULL;
	int n;
	for (;;) {
		pid_t *na = realloc(all, cap * sizeof *all);
		if (!na) {
			free(all);
			return -ENOMEM;
		}
		all = na;
		n = shmcfg_attached_pids(name, all, cap);
		if (n < 0 || (size_t)n <= cap)
			break;
		cap = (size_t)n + 64; /* more attached meanwhile: again */
	}
	if (n < 0) {
		free(all);
		return n;
	}
	size_t k = 0;
	pid_t self = getpid();
	for (int i = 0; i < n; i++)
		if (all[i] != self)
			all[k++] = all[i];
	qsort(all, k, sizeof *all, cmp_pid);
	memcpy(pids, all, (k < max ? k : max) * sizeof *pids);
	free(all);
	if (exact) {
		char path[300];
		struct stat st;
		snprintf(path, sizeof path, SEG_PATH_FMT, name);
		*exact = geteuid() == 0 || (lstat(path, &st) == 0 && !hidden_may_attach(&st));
	}
	return (int)k;
}

void pid_list(const pid_t *pids, size_t n, char *buf, size_t len)
{
	size_t used = 0;
	buf[0] = 0;
	for (size_t i = 0; i < n && used < len; i++) {
		int w = snprintf(buf + used, len - used, "%s%d", i ? ", " : "", (int)pids[i]);
		if (w < 0 || (size_t)w >= len - used) {
			/* cut: end in "..." */
			if (len >= 4)
				strcpy(buf + (used + 4 <= len ? used : len - 4), "...");
			return;
		}
		used += (size_t)w;
	}
}

/* Whether this process may unlink PATH (in /dev/shm, normally sticky). */
static bool may_remove(const struct stat *st)
{
	struct stat dir;
	if (stat("/dev/shm", &dir) < 0)
		return false;
	if (access("/dev/shm", W_OK | X_OK) < 0)
		return false;
	uid_t me = geteuid();
	return !(dir.st_mode & S_ISVTX) || me == 0 || st->st_uid == me || dir.st_uid == me;
}

void warn_attached(const char *name, const char *what)
{
	char path[300];
	struct stat st;
	snprintf(path, sizeof path, SEG_PATH_FMT, name);
	if (lstat(path, &st) < 0 || !S_ISREG(st.st_mode) || !may_remove(&st))
		return;
	pid_t pids[32];
	int n = attached_processes(name, pids, 32, NULL);
	if (n <= 0)
		return;
	char list[400];
	pid_list(pids, n < 32 ? (size_t)n : 32, list, sizeof list);
	if (!strcmp(what, "replaced")) /* a note: they follow it (lib/read/follow.c), where they can open it */
		err_msg("%s is attached by pid%s %s%s: %s the new segment by %s if %s can open it (else %s reads fail, "
			"saying so)", name, n == 1 ? "" : "s", list, n > 32 ? ", ..." : "",
			n == 1 ? "it follows" : "they follow", n == 1 ? "itself" : "themselves", n == 1 ? "it" : "they",
			n == 1 ? "its" : "their");
	else
		warn_msg("%s is attached by pid%s %s%s: %s the old segment and learn%s it was %s (SHMCFG_E_RETIRED)",
			 name, n == 1 ? "" : "s", list, n > 32 ? ", ..." : "", n == 1 ? "it keeps" : "they keep",
			 n == 1 ? "s" : "", what);
}

/* "  key           value", for describe and stat. The value may quote text
 * others chose (a schema's doc and knob, the sync record any writer sets):
 * one line, its unsafe characters as \xNN as in messages. */
void kv(const char *key, const char *val, const char *col)
{
	char *shown = term_escaped(val, strlen(val));
	printf("  %s%-13s%s %s%s%s\n", color(C_BOLD), key, color(C_RESET), col ? color(col) : "",
	       shown ? shown : "?", col ? color(C_RESET) : "");
	free(shown);
}


/* ------------------------------------------------------------------ */
/* Option names                                                       */
/* ------------------------------------------------------------------ */

const char *opt_name(shmcfg *h, shmcfg_opt opt)
{
	shmcfg_optinfo oi;
	if (shmcfg_opt_info(h, opt, &oi))
		return "?";
	return oi.name;
}

/* The library resolves (shmcfg_resolve): its detail is the user's line. */

/*
 * For a load's keys: 1 and *ret when text names one option, -1 when it is
 * ambiguous, 0 when unknown (left for the load to refuse or skip, with the
 * other unknown names), -ENOMEM. The library's resolver decides; its detail
 * says which of the two refusals it was.
 */
int find_option(shmcfg *h, const char *text, shmcfg_opt *ret)
{
	int r = shmcfg_resolve(h, text, ret);
	if (!r)
		return 1;
	if (r == SHMCFG_E_NOOPT)
		return strstr(shmcfg_errdetail(), "' is ambiguous:") ? -1 : 0;
	return r == -ENOMEM ? -ENOMEM : 0;
}

int resolve_option(shmcfg *h, const char *text, shmcfg_opt *ret)
{
	int r = shmcfg_resolve(h, text, ret);
	return r ? fail_lib(r, NULL) : 0;
}

/* ------------------------------------------------------------------ */
/* Values                                                             */
/* ------------------------------------------------------------------ */

/* jansson escapes the C0 controls in strings, and its indented form breaks
 * lines: the rest of the unsafe characters (DEL, C1, U+2028/9) become \u
 * escapes, which JSON reads back as the same strings. A byte that is not
 * UTF-8 cannot be in JSON, but jansson writes what it was given unchecked (a
 * hostile segment's string: lib/values/json.c): it becomes \uFFFD, as a
 * decoder that replaces bad bytes would read it. */
char *json_for_terminal(char *text)
{
	size_t n = text ? strlen(text) : 0;
	if (!text || term_safe(text, n, "\n"))
		return text;
	char *out = malloc(n * 6 + 1), *o = out; /* a byte -> \uXXXX at most */
	for (size_t i = 0, len; out && i < n; i += len) {
		bool unsafe;
		len = term_char(text + i, n - i, "\n", &unsafe);
		if (unsafe)
			o += sprintf(o, "\\u%04X", (unsigned)term_codepoint(text + i, len));
		else
			memcpy(o, text + i, len), o += len;
	}
	if (out)
		*o = '\0';
	free(text);
	return out;
}

/* Text that others chose (a name planted in /dev/shm, a schema's texts
 * from a library before 0.11, which took any bytes) as a JSON string:
 * as it is when it is UTF-8; else term_escaped() (\xNN for each byte that
 * is none), since jansson takes only UTF-8 and json_string() would give
 * NULL: the field would go missing from its row. NULL on ENOMEM. */
json_t *json_foreign(const char *s)
{
	json_t *j = json_string(s);
	if (j)
		return j;
	char *e = term_escaped(s, strlen(s));
	j = e ? json_string(e) : NULL;
	free(e);
	return j;
}

/* A string or list value with bytes that are no UTF-8 (only a writer who
 * writes a segment's cells directly can store one; it has no JSON form):
 * its JSON, a string as term_escaped() text, list items as json_foreign().
 * NULL on ENOMEM. */
static json_t *value_json_escaped(const shmcfg_value *v)
{
	if (v->type == SHMCFG_STR) {
		char *e = term_escaped(v->u.str.ptr ? v->u.str.ptr : "", v->u.str.ptr ? v->u.str.len : 0);
		json_t *j = e ? json_string(e) : NULL;
		free(e);
		return j;
	}
	json_t *a = json_array();
	for (const char *it = NULL; a && (it = shmcfg_list_next(v, it));)
		if (json_array_append_new(a, json_foreign(it))) {
			json_decref(a);
			a = NULL;
		}
	return a;
}

/* The library's display form (shmcfg_value_format): floats as the shortest
 * text that reads back the same (0.1, 5.0, 1e+300, nan, inf); strings and
 * list items as JSON, safe for a terminal. */
char *value_text(const shmcfg_value *v)
{
	char *t = NULL;
	int r = shmcfg_value_format(v, &t);
	if (r == -EINVAL && !v->is_null && v->type >= SHMCFG_STR) {
		json_t *j = value_json_escaped(v);
		t = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
		json_decref(j);
	} else if (r) {
		return NULL;
	}
	return json_for_terminal(t);
}

char *value_raw(const shmcfg_value *v)
{
	if (!v->is_null && v->type == SHMCFG_STR)
		return strndup(v->u.str.ptr, v->u.str.len);
	return value_text(v);
}

char *value_plain(const shmcfg_value *v)
{
	if (v->is_null || v->type != SHMCFG_STR)
		return value_text(v);
	/* a text that `set` would not read back as itself: the words of null,
	 * and a JSON literal's opening quote; and one a terminal would act on
	 * (an escape sequence, a carriage return, a C1 control: whoever may
	 * write the value, etcd's writers too, would reach the reader's
	 * terminal), or one with a line separator: as JSON, escaped. --raw
	 * prints the bytes. */
	char *raw = value_raw(v);
	bool control = raw && !term_safe(raw, v->u.str.len, "\n\t");
	if (raw && (control || (strlen(raw) == v->u.str.len &&
				(!strcasecmp(raw, "none") || !strcasecmp(raw, "null") || raw[0] == '"')))) {
		free(raw);
		return value_text(v);
	}
	return raw;
}

/* The library's JSON of a value (shmcfg_value_json), as a jansson value. */
json_t *value_json(const shmcfg_value *v)
{
	char *text;
	int r = shmcfg_value_json(v, &text);
	if (r == -EINVAL && !v->is_null && v->type >= SHMCFG_STR) {
		json_t *j = value_json_escaped(v);
		return j ? j : json_null();
	}
	if (r)
		return json_null();
	json_t *j = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
	free(text);
	return j ? j : json_null();
}

const char *type_label(shmcfg_type t, bool nullable, char *buf, size_t len)
{
	const char *n = shmcfg_type_name(t);
	snprintf(buf, len, "%s%s", n ? n : "?", nullable ? "?" : "");
	return buf;
}

const char *source_color(shmcfg_source s)
{
	switch (s) {
	case SHMCFG_SRC_DEFAULT:
		return C_DIM;
	case SHMCFG_SRC_KNOB:
		return C_MAGENTA;
	case SHMCFG_SRC_ENV_DEFAULT:
	case SHMCFG_SRC_ENV_FORCE:
		return C_YELLOW;
	case SHMCFG_SRC_CLUSTER:
	case SHMCFG_SRC_USER:
		return C_GREEN;
	case SHMCFG_SRC_IMPLIED:
		return C_CYAN;
	case SHMCFG_SRC_ALIAS:
		return C_BLUE;
	default:
		return NULL;
	}
}

int json_print(json_t *j, bool compact)
{
	if (!j)
		return fail("out of memory");
	size_t flags = JSON_ENCODE_ANY | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17) |
		       (compact ? JSON_COMPACT : JSON_INDENT(2));
	char *text = json_for_terminal(json_dumps(j, flags));
	json_decref(j);
	if (!text)
		return fail("out of memory");
	puts(text);
	free(text);
	return EXIT_OK;
}

/* ------------------------------------------------------------------ */
/* Tables                                                             */
/* ------------------------------------------------------------------ */

struct cell {
	char *text;
	const char *color;
};

struct row {
	struct cell *cells;
	char *note;
};

struct table {
	size_t ncols, nrows, cap;
	struct row *rows;
	const char *const *headers;
	size_t *min_width; /* 0: not shrinkable */
};

struct table *table_new(size_t ncols, const char *const *headers)
{
	struct table *t = calloc(1, sizeof *t);
	if (!t)
		return NULL;
	t->ncols = ncols;
	t->headers = headers;
	t->min_width = calloc(ncols, sizeof *t->min_width);
	if (!t->min_width) {
		free(t);
		return NULL;
	}
	return t;
}

size_t table_rows(const struct table *t)
{
	return t ? t->nrows : 0;
}

void table_row(struct table *t, const char *const *cells)
{
	if (!t)
		return;
	if (t->nrows == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 16;
		struct row *nr = realloc(t->rows, cap * sizeof *nr);
		if (!nr)
			return;
		t->rows = nr;
		t->cap = cap;
	}
	struct row *r = &t->rows[t->nrows];
	r->note = NULL;
	r->cells = calloc(t->ncols, sizeof *r->cells);
	if (!r->cells)
		return;
	for (size_t i = 0; i < t->ncols; i++)
		r->cells[i].text = strdup(cells[i] ? cells[i] : "");
	t->nrows++;
}

void table_color(struct table *t, size_t col, const char *code)
{
	if (t && t->nrows && col < t->ncols)
		t->rows[t->nrows - 1].cells[col].color = code;
}

/* Newlines, tabs and other control characters would break the columns, and
 * a terminal would act on some: one character each for them, a blank for a
 * C0 control or DEL, '?' for the rest (U+009B is CSI; a lone 0x9b byte too). */
static void flatten(char *s)
{
	size_t n = strlen(s), o = 0;
	for (size_t i = 0, len; i < n; i += len) {
		bool unsafe;
		len = term_char(s + i, n - i, "", &unsafe);
		if (unsafe)
			s[o++] = len == 1 && (unsigned char)s[i] < 0x80 ? ' ' : '?';
		else
			memmove(s + o, s + i, len), o += len;
	}
	s[o] = '\0';
}

/* A note under a row: one line, whatever a hostile name put in it (escape
 * sequences, newlines that would forge rows). */
void table_note(struct table *t, const char *text)
{
	if (t && t->nrows && text) {
		free(t->rows[t->nrows - 1].note);
		t->rows[t->nrows - 1].note = strdup(text);
		if (t->rows[t->nrows - 1].note)
			flatten(t->rows[t->nrows - 1].note);
	}
}

/* ... a note of its own lines (a doc), each printed indented, so that no
 * line of it reads as a row; every other unsafe character as \xNN, as
 * describe prints a doc. */
void table_note_lines(struct table *t, const char *text)
{
	if (!t || !t->nrows || !text)
		return;
	free(t->rows[t->nrows - 1].note);
	t->rows[t->nrows - 1].note = term_escaped_allow(text, strlen(text), "\n");
}

void table_shrink(struct table *t, size_t col, size_t min_width)
{
	if (t && col < t->ncols)
		t->min_width[col] = min_width ? min_width : 1;
}

/* Display width of UTF-8 text: code points, control characters as 1. */
static size_t text_width(const char *s)
{
	size_t w = 0;
	for (; *s; s++)
		if (((unsigned char)*s & 0xc0) != 0x80)
			w++;
	return w;
}

/* Cut text to width columns, ending in "...". In place. */
static void cut(char *s, size_t width)
{
	if (text_width(s) <= width)
		return;
	size_t keep = width > 3 ? width - 3 : 0, w = 0;
	char *p = s;
	for (; *p; p++) {
		if (((unsigned char)*p & 0xc0) != 0x80) {
			if (w == keep)
				break;
			w++;
		}
	}
	snprintf(p, 4, "%s", "...");
}

static size_t terminal_width(void)
{
	struct winsize ws;
	if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 20)
		return ws.ws_col;
	return 0;
}

void table_print(struct table *t)
{
	if (!t)
		return;
	size_t *w = calloc(t->ncols, sizeof *w);
	for (size_t r = 0; w && r < t->nrows; r++)
		for (size_t c = 0; c < t->ncols; c++) {
			if (!t->rows[r].cells[c].text)
				continue;
			flatten(t->rows[r].cells[c].text);
		}
	if (w) {
		for (size_t c = 0; c < t->ncols; c++)
			w[c] = t->headers ? text_width(t->headers[c]) : 0;
		for (size_t r = 0; r < t->nrows; r++)
			for (size_t c = 0; c < t->ncols; c++) {
				const char *s = t->rows[r].cells[c].text;
				size_t l = s ? text_width(s) : 0;
				if (l > w[c])
					w[c] = l;
			}
		/* on a terminal, cut the shrinkable columns to fit its width */
		size_t cols = terminal_width();
		size_t total = 0;
		for (size_t c = 0; c < t->ncols; c++)
			total += w[c] + (c ? 2 : 0);
		while (cols && total > cols) {
			size_t widest = t->ncols;
			for (size_t c = 0; c < t->ncols; c++)
				if (t->min_width[c] && w[c] > t->min_width[c] &&
				    (widest == t->ncols || w[c] > w[widest]))
					widest = c;
			if (widest == t->ncols)
				break;
			w[widest]--;
			total--;
		}
		for (size_t r = 0; r < t->nrows; r++)
			for (size_t c = 0; c < t->ncols; c++)
				if (t->rows[r].cells[c].text)
					cut(t->rows[r].cells[c].text, w[c]);
	}
	if (t->headers && w) {
		fputs(color(C_BOLD), stdout);
		for (size_t c = 0; c < t->ncols; c++) {
			bool last = c + 1 == t->ncols;
			printf("%s%-*s", c ? "  " : "", last ? 0 : (int)w[c], t->headers[c]);
		}
		printf("%s\n", color(C_RESET));
	}
	for (size_t r = 0; r < t->nrows; r++) {
		struct row *row = &t->rows[r];
		for (size_t c = 0; w && c < t->ncols; c++) {
			const char *s = row->cells[c].text ? row->cells[c].text : "";
			bool last = c + 1 == t->ncols;
			size_t pad = last ? 0 : w[c] - text_width(s);
			if (c)
				fputs("  ", stdout);
			if (row->cells[c].color && use_color)
				printf("%s%s%s", color(row->cells[c].color), s, color(C_RESET));
			else
				fputs(s, stdout);
			printf("%*s", (int)pad, "");
		}
		putchar('\n');
		if (row->note) {
			const char *p = row->note;
			fputs(color(C_DIM), stdout);
			while (*p) {
				const char *nl = strchr(p, '\n');
				size_t l = nl ? (size_t)(nl - p) : strlen(p);
				printf("    %.*s\n", (int)l, p);
				p += l + (nl ? 1 : 0);
			}
			fputs(color(C_RESET), stdout);
		}
	}
	free(w);
	table_free(t);
}

void table_free(struct table *t)
{
	if (!t)
		return;
	for (size_t r = 0; r < t->nrows; r++) {
		for (size_t c = 0; c < t->ncols; c++)
			free(t->rows[r].cells[c].text);
		free(t->rows[r].cells);
		free(t->rows[r].note);
	}
	free(t->rows);
	free(t->min_width);
	free(t);
}

/* ------------------------------------------------------------------ */
/* Messages                                                           */
/* ------------------------------------------------------------------ */

const struct command *cur_cmd;
bool use_color;
bool have_owner;
uid_t owner_uid;

/* Every message is one line: unsafe characters (from a name, a value or a
 * schema's message someone else chose) are shown as \xNN (termsafe.h),
 * never sent to the terminal. */
static void vmsg(const char *prefix, const char *fmt, va_list ap)
{
	char *text = NULL;
	if (vasprintf(&text, fmt, ap) < 0)
		text = NULL;
	fflush(stdout);
	fputs("shmctl: ", stderr);
	if (prefix)
		fputs(prefix, stderr);
	char *shown = text ? term_escaped(text, strlen(text)) : NULL;
	fputs(shown ? shown : "out of memory", stderr);
	fputc('\n', stderr);
	free(shown);
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

/* A command of subcommands (cluster) has no synopsis of its own: each
 * subcommand's first line is its usage, from the one table. */
static void print_synopsis(FILE *f, const struct command *c)
{
	if (c->synopsis) {
		fprintf(f, "usage: shmctl %s\n", c->synopsis);
		return;
	}
	for (const struct command *sub = c->subs; sub && sub->name; sub++)
		fprintf(f, "%s%.*s\n", sub == c->subs ? "usage: shmctl " : "       ",
			(int)strcspn(sub->synopsis, "\n"), sub->synopsis);
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

/* ------------------------------------------------------------------ */
/* Flags and --help, from the running command's table entry           */
/* ------------------------------------------------------------------ */

int set_color(const char *when)
{
	if (!strcmp(when, "always"))
		use_color = true;
	else if (!strcmp(when, "never"))
		use_color = false;
	else if (!strcmp(when, "auto")) {
		const char *term = getenv("TERM");
		use_color = isatty(STDOUT_FILENO) && !getenv("NO_COLOR") && !(term && !strcmp(term, "dumb"));
	} else {
		err_msg("--color takes auto, always or never, not '%s'", when);
		return EXIT_USAGE;
	}
	return 0;
}

/* What a file that is not a regular one is: "a FIFO", "a directory", ... */
const char *file_kind(mode_t mode)
{
	return S_ISFIFO(mode)  ? "a FIFO"
	       : S_ISSOCK(mode) ? "a socket"
	       : S_ISDIR(mode)  ? "a directory"
	       : S_ISLNK(mode)  ? "a symbolic link"
	       : S_ISCHR(mode)  ? "a character device"
	       : S_ISBLK(mode)  ? "a block device"
				: "not a regular file";
}

int parse_owner(const char *user)
{
	struct passwd *pw = *user ? getpwnam(user) : NULL;
	uint64_t u;
	if (pw)
		owner_uid = pw->pw_uid;
	else if (parse_u64(user, &u) && u < (uid_t)-1)
		owner_uid = (uid_t)u;
	else
		return fail("no such user '%s' (--owner takes a user name or a uid)", user);
	have_owner = true;
	return 0;
}

/* The flags every command takes, after its own: their keys are no
 * command's (a command's keys are letters). */
enum { KEY_HELP = 'h', KEY_COLOR = 0x10c0, KEY_OWNER };
static const struct flag help_flag[] = {
	{KEY_HELP, "help", NULL, F_SHORT, NULL, "print this help"},
	{KEY_COLOR, "color", "[=WHEN]", F_OPTARG | F_NOHELP, "auto always never", NULL},
	{KEY_COLOR, "colour", "[=WHEN]", F_OPTARG | F_HIDDEN, NULL, NULL},
	{0},
};
static const struct flag owner_flag[] = {
	{KEY_OWNER, "owner", "USER", 0, "@user",
	 "trust the segment only if USER (a name or uid) owns it;\nwithout it, only segments of yours or root's"},
	{0},
};

int command_flags(const struct command *c, int (*fn)(const struct flag *f, void *ud), void *ud)
{
	const struct flag *lists[5] = {help_flag, c->flags[0], c->flags[1], c->flags[2], c->attaches ? owner_flag : NULL};
	for (size_t l = 0; l < 5; l++)
		for (const struct flag *f = lists[l]; f && f->name; f++) {
			int r = fn(f, ud);
			if (r)
				return r;
		}
	return 0;
}

/* The left column of a flag's --help line: "  -s, --schema FILE". */
static void flag_label(const struct flag *f, char *buf, size_t len)
{
	if (f->flags & F_ARG) {
		snprintf(buf, len, "  %s", f->name);
		return;
	}
	const char *m = f->metavar ? f->metavar : "";
	snprintf(buf, len, "  %c%c%s--%s%s%s", f->flags & F_SHORT ? '-' : ' ', f->flags & F_SHORT ? f->key : ' ',
		 f->flags & F_SHORT ? ", " : "  ", f->name, *m && *m != '[' ? " " : "", m);
}

static bool in_help(const struct flag *f)
{
	return f->help && !(f->flags & (F_NOHELP | F_HIDDEN));
}

struct help_layout {
	size_t width; /* of the left column */
	bool print;
};

static int help_row(const struct flag *f, void *ud)
{
	struct help_layout *l = ud;
	if (!in_help(f))
		return 0;
	char label[96];
	flag_label(f, label, sizeof label);
	size_t w = strlen(label) + 2;
	if (!l->print) {
		if (w > l->width)
			l->width = w;
		return 0;
	}
	printf("%-*s", (int)l->width, label);
	for (const char *p = f->help; *p;) {
		size_t n = strcspn(p, "\n");
		printf("%.*s\n", (int)n, p);
		p += n;
		if (*p == '\n' && *++p)
			printf("%*s", (int)l->width, "");
	}
	return 0;
}

int print_help(const struct command *c)
{
	print_synopsis(stdout, c);
	printf("\n%c%s.\n\n", c->summary[0] - ('a' <= c->summary[0] && c->summary[0] <= 'z' ? 32 : 0),
	       c->summary + 1);
	struct help_layout l = {.width = 14};
	command_flags(c, help_row, &l);
	l.print = true;
	/* --help, the positionals, the command's flags, --owner */
	help_row(&help_flag[0], &l);
	for (int pass = 0; pass < 2; pass++)
		for (size_t k = 0; k < 3; k++)
			for (const struct flag *f = c->flags[k]; f && f->name; f++)
				if ((f->flags & F_ARG) ? pass == 0 : pass == 1)
					help_row(f, &l);
	if (c->attaches)
		help_row(&owner_flag[0], &l);
	if (c->notes)
		printf("%s", c->notes);
	if (c->subs) {
		size_t plen = strlen(c->name) + 1, w = 0;
		for (const struct command *s = c->subs; s->name; s++)
			if (strlen(s->name) - plen + 4 > w)
				w = strlen(s->name) - plen + 4;
		printf("\n");
		for (const struct command *s = c->subs; s->name; s++)
			printf("  %-*s%s\n", (int)w, s->name + plen, s->summary);
		printf("\n'shmctl %s SUBCOMMAND --help' for each.\n", c->name);
	}
	printf("\nExit status: 0 success, 1 failure, 2 usage error. See shmctl(1).\n");
	return EXIT_OK;
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

/* The getopt_long tables of a command, built from its flags. */
struct getopt_tables {
	char shortopts[80];
	struct option longopts[64];
};

static int add_getopt(const struct flag *f, void *ud)
{
	struct getopt_tables *t = ud;
	if (f->flags & (F_ARG | F_DOC))
		return 0;
	int has_arg = !f->metavar ? no_argument : f->flags & F_OPTARG ? optional_argument : required_argument;
	size_t n = 0;
	while (t->longopts[n].name)
		n++;
	if (n + 1 >= sizeof t->longopts / sizeof t->longopts[0])
		return -1;
	t->longopts[n] = (struct option){f->name, has_arg, NULL, f->key};
	if (f->flags & F_SHORT) {
		size_t l = strlen(t->shortopts);
		if (l + 4 >= sizeof t->shortopts)
			return -1;
		snprintf(t->shortopts + l, sizeof t->shortopts - l, "%c%s", f->key,
			 has_arg == required_argument ? ":" : has_arg == optional_argument ? "::" : "");
	}
	return 0;
}

int next_opt(int argc, char **argv, int *exit_code)
{
	static const struct command *built_for;
	static struct getopt_tables t;
	if (built_for != cur_cmd) {
		memset(&t, 0, sizeof t);
		t.shortopts[0] = ':'; /* a missing argument is ':', not '?' */
		if (command_flags(cur_cmd, add_getopt, &t)) {
			/* a table too big for these arrays: a bug of the table */
			*exit_code = fail("%s: too many flags", cur_cmd->name);
			return -2;
		}
		built_for = cur_cmd;
	}
	for (;;) {
		opterr = 0;
		int c = getopt_long(argc, argv, t.shortopts, t.longopts, NULL);
		switch (c) {
		case KEY_HELP:
			*exit_code = print_help(cur_cmd);
			return -2;
		case '?':
			/* glibc: optopt is the val of a long option given a value it
			 * does not take, the character of an unknown short one */
			*exit_code = unknown_option(t.longopts, argv[optind - 1],
						    strncmp(argv[optind - 1], "--", 2) && optopt < 0x100 ? optopt : 0);
			return -2;
		case ':':
			if (optopt && (optopt < 0x100) && strncmp(argv[optind - 1], "--", 2))
				*exit_code = usage_error("option '-%c' needs an argument", optopt);
			else
				*exit_code = usage_error("option '%s' needs an argument", argv[optind - 1]);
			return -2;
		case KEY_COLOR:
			if ((*exit_code = set_color(optarg ? optarg : "always")))
				return -2;
			continue;
		case KEY_OWNER:
			if ((*exit_code = parse_owner(optarg)))
				return -2;
			continue;
		default:
			return c;
		}
	}
}

/* ------------------------------------------------------------------ */
/* Segments                                                           */
/* ------------------------------------------------------------------ */

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

/* A private segment of a schema: shmctl.h. Signals that would end the
 * process wait while the object has a name, so that none is left in
 * /dev/shm. */
int private_segment(const shmcfg_schema *schema, shmcfg **ret)
{
	shmcfg_create_opts o = {.slots = 2, .readers = 1, .mode = 0600, .flags = SHMCFG_CREATE_NO_ENV};
	sigset_t block, old;
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGHUP);
	sigaddset(&block, SIGQUIT);
	sigaddset(&block, SIGPIPE);
	int r = -EEXIST;
	for (int attempt = 0; r == -EEXIST && attempt < 16; attempt++) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		char name[96];
		snprintf(name, sizeof name, "shmctl-header-%ld-%llx", (long)getpid(),
			 (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec);
		sigprocmask(SIG_BLOCK, &block, &old);
		r = shmcfg_create(name, schema, &o, ret);
		if (r == 0)
			(void)shmcfg_unlink(name);
		sigprocmask(SIG_SETMASK, &old, NULL);
	}
	return r;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int list_segments(char ***ret, size_t *nret)
{
	char **names = NULL;
	size_t n = 0, cap = 0;
	DIR *d = opendir(SHM_DIR);
	if (!d && errno != ENOENT)
		return fail("%s: %s", SHM_DIR, strerror(errno));
	for (struct dirent *e; d && (e = readdir(d));) {
		if (strncmp(e->d_name, SHM_PREFIX, strlen(SHM_PREFIX)) || !e->d_name[strlen(SHM_PREFIX)])
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			char **nn = realloc(names, cap * sizeof *nn);
			if (!nn)
				break;
			names = nn;
		}
		names[n] = strdup(e->d_name + strlen(SHM_PREFIX));
		if (names[n])
			n++;
	}
	if (d)
		closedir(d);
	if (n)
		qsort(names, n, sizeof *names, cmp_str);
	*ret = names;
	*nret = n;
	return EXIT_OK;
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

/* ------------------------------------------------------------------ */
/* Assignments (set, cluster set), generations (show, get, describe)  */
/* ------------------------------------------------------------------ */

int check_assignments(int argc, char **argv, int first)
{
	for (int i = first; i < argc; i++) {
		const char *eq = strchr(argv[i], '=');
		if (!eq)
			return usage_error("'%s' is not OPTION=VALUE", argv[i]);
		if (eq == argv[i])
			return usage_error("'%s' has no option name", argv[i]);
	}
	return 0;
}

int resolve_final(shmcfg *h, const char *text, shmcfg_opt *opt, shmcfg_opt *final)
{
	int rc = resolve_option(h, text, opt);
	if (rc)
		return rc;
	shmcfg_optinfo oi;
	*final = shmcfg_opt_info(h, *opt, &oi) == 0 ? oi.alias_final : *opt;
	return 0;
}

int fail_set(int r, const char *full, const char *value)
{
	const char *d = shmcfg_errdetail();
	if (!d || !*d)
		d = shmcfg_strerror(r);
	size_t nl = strlen(full);
	if (!strncmp(d, full, nl) && d[nl] == ':' && d[nl + 1] == ' ')
		d += nl + 2;
	if (r == SHMCFG_E_LAYER)
		return fail("%s=%s: the option declares no knob (--knob)", full, value);
	/* an unquoted none/null for a string that cannot be null (the library
	 * refuses it): say how to write the text */
	if (r == SHMCFG_E_NULLVAL && (!strcasecmp(value, "none") || !strcasecmp(value, "null")))
		return fail("%s=%s: the option is not nullable; to store the text %s, quote it: '%s=\"%s\"'", full,
			    value, value, full, value);
	/* a detail that names the value ("value 11 is above ...", "value ''
	 * is not ...") needs the option's name alone before it */
	char shown[81]; /* details show at most 80 bytes of a value */
	snprintf(shown, sizeof shown, "%s", value);
	if (*value ? strstr(d, shown) != NULL : strstr(d, "''") || strstr(d, "\"\""))
		return fail("%s: %s", full, d);
	return fail("%s=%s: %s", full, value, d);
}

int parse_generation(const char *text, uint64_t *gen, int *exit_code)
{
	if (parse_u64(text, gen) && *gen > 0)
		return 0;
	*exit_code = usage_error("bad generation '%s' (a number from 1)", text);
	return -1;
}

int snapshot_of(shmcfg *h, uint64_t gen, shmcfg_snapshot **snap)
{
	return gen ? shmcfg_snapshot_at(h, gen, snap) : shmcfg_snapshot_acquire(h, snap);
}

int generation_args(int argc, char **argv, bool *json, uint64_t *gen, const char **pos, int npos,
		    int *exit_code)
{
	int c;
	*gen = 0;
	while ((c = next_opt(argc, argv, exit_code)) != -1) {
		if (c == -2)
			return -1;
		if (c == 'J')
			*json = true;
		if (c == 'G' && parse_generation(optarg, gen, exit_code))
			return -1;
	}
	return take_positionals(argc, argv, pos, npos, exit_code);
}

/*
 * Write @p len bytes of @p text to @p path through a hidden temporary file in the same
 * directory, fsync'd, then renamed over it, the directory fsync'd: a
 * reader, or the next boot, finds the old file or the new one, never a
 * part. Only a regular file is replaced (not a symbolic link, a directory,
 * a device); the new file keeps the old one's permission bits, else 0666
 * less the umask. 0, or EXIT_FAIL (printed).
 */
int write_file(const char *path, const char *text, size_t len)
{
	struct stat st;
	mode_t mode;
	if (lstat(path, &st) == 0) {
		if (!S_ISREG(st.st_mode))
			return fail("%s: not a regular file (%s); not replaced", path,
				    S_ISLNK(st.st_mode) ? "a symbolic link" :
				    S_ISDIR(st.st_mode) ? "a directory" : "a device, FIFO or socket");
		mode = st.st_mode & 07777;
	} else if (errno == ENOENT) {
		mode = umask(0);
		umask(mode);
		mode = 0666 & ~mode;
	} else
		return fail("%s: %s", path, strerror(errno));
	const char *base = strrchr(path, '/');
	int dl = base ? (int)(base - path) : 0;
	base = base ? base + 1 : path;
	char *tmp = NULL;
	if (asprintf(&tmp, "%.*s%s.%s.XXXXXX", dl, path, base == path ? "" : "/", base) < 0)
		return fail("out of memory");
	int fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		free(tmp);
		return fail("%s: %s", path, strerror(e)); /* its directory: missing, not ours */
	}
	size_t done = 0;
	int e = fchmod(fd, mode) ? errno : 0;
	while (!e && done < len) {
		ssize_t k = write(fd, text + done, len - done);
		if (k < 0 && errno != EINTR)
			e = errno;
		else if (k > 0)
			done += (size_t)k;
	}
	if (!e && fsync(fd))
		e = errno;
	if (close(fd) && !e)
		e = errno;
	if (!e && rename(tmp, path))
		e = errno;
	if (e) {
		unlink(tmp);
		free(tmp);
		return fail("%s: %s", path, strerror(e));
	}
	free(tmp);
	char *dir = dl ? strndup(path, (size_t)dl) : strdup(base == path ? "." : "/");
	int dfd = dir ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
	if (dfd >= 0) {
		(void)fsync(dfd);
		close(dfd);
	}
	free(dir);
	return 0;
}
