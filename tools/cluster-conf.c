/* SPDX-License-Identifier: MIT */
/*
 * Endpoints and cluster of the cluster tools: flags, environment, or a
 * configuration file that only root or the caller can have written
 * (tools/cluster-conf.h).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cluster-conf.h"
#include "shmcfg.h"
#include "termsafe.h"

#define CONF_MAX (64 * 1024) /* a file of two settings: more is not ours */

static int set_err(char *err, size_t errlen, int code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int set_err(char *err, size_t errlen, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return code;
}

static const char *env_nonempty(const char *name)
{
	const char *v = getenv(name);
	return v && *v ? v : NULL;
}

bool key_element_ok(const char *s)
{
	size_t n = strlen(s);
	if (!n || n >= sizeof ((shmcfg_sync_info *)0)->cluster || !term_safe(s, n, ""))
		return false;
	for (; *s; s++)
		if (*s == '/' || *s == ' ')
			return false;
	return true;
}

static bool is_blank(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\r';
}

/* [s, e) without blanks at either end, NUL-terminated in place. */
static char *trim(char *s, char *e)
{
	while (s < e && is_blank(*s))
		s++;
	while (e > s && is_blank(e[-1]))
		e--;
	*e = 0;
	return s;
}

/*
 * Read the file into *text (malloc'd, NUL-terminated), if it is one we may
 * trust. 0, 1 (no such file), or CLUSTER_CONF_BAD with err.
 */
static int read_conf(const char *path, char **text, size_t *len, char *err, size_t errlen)
{
	*text = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0 && errno == ENOENT)
		return 1;
	if (fd < 0)
		return set_err(err, errlen, CLUSTER_CONF_BAD, "configuration file %s: %s", path, strerror(errno));
	/* checked on the open file: what is checked is what is read */
	struct stat st;
	int rc = 0;
	if (fstat(fd, &st) < 0)
		rc = set_err(err, errlen, CLUSTER_CONF_BAD, "configuration file %s: %s", path, strerror(errno));
	else if (!S_ISREG(st.st_mode))
		rc = set_err(err, errlen, CLUSTER_CONF_BAD, "configuration file %s is not a regular file: refused",
			     path);
	else if (st.st_uid != 0 && st.st_uid != geteuid())
		rc = set_err(err, errlen, CLUSTER_CONF_BAD,
			     "configuration file %s is owned by uid %lu, neither root nor you (uid %lu): refused", path,
			     (unsigned long)st.st_uid, (unsigned long)geteuid());
	else if (st.st_mode & (S_IWGRP | S_IWOTH))
		rc = set_err(err, errlen, CLUSTER_CONF_BAD,
			     "configuration file %s is writable by %s (mode %04o): refused", path,
			     st.st_mode & S_IWGRP ? st.st_mode & S_IWOTH ? "group and others" : "its group" : "others",
			     (unsigned)(st.st_mode & 07777));
	else if (st.st_size > CONF_MAX)
		rc = set_err(err, errlen, CLUSTER_CONF_BAD, "configuration file %s: over %d KiB: refused", path,
			     CONF_MAX / 1024);
	char *buf = rc ? NULL : malloc(CONF_MAX + 1);
	size_t n = 0;
	if (!rc && !buf)
		rc = set_err(err, errlen, CLUSTER_CONF_BAD, "out of memory");
	while (!rc) {
		ssize_t r = read(fd, buf + n, CONF_MAX + 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			rc = set_err(err, errlen, CLUSTER_CONF_BAD, "configuration file %s: %s", path, strerror(errno));
		else if (r == 0)
			break;
		else if ((n += (size_t)r) > CONF_MAX) /* it grew since fstat */
			rc = set_err(err, errlen, CLUSTER_CONF_BAD, "configuration file %s: over %d KiB: refused", path,
				     CONF_MAX / 1024);
	}
	close(fd);
	if (rc) {
		free(buf);
		return rc;
	}
	buf[n] = 0;
	*text = buf;
	*len = n;
	return 0;
}

/*
 * Parse "KEY = VALUE" lines: *ep and *cl (pointers into text) and their
 * line numbers; 0 or CLUSTER_CONF_BAD with err naming FILE:LINE.
 */
static int parse_conf(const char *path, char *text, size_t len, char **ep, int *ep_line, char **cl, int *cl_line,
		      char *err, size_t errlen)
{
	const char *nul = memchr(text, 0, len);
	int line = 1;
	for (const char *q = text; nul && q < nul; q++)
		line += *q == '\n';
	if (nul)
		return set_err(err, errlen, CLUSTER_CONF_BAD, "%s:%d: a NUL byte: not a text file", path, line);
	line = 0;
	for (char *s = text; *s;) {
		char *e = strchr(s, '\n'), *next = e ? e + 1 : s + strlen(s);
		if (!e)
			e = s + strlen(s);
		line++;
		char *l = trim(s, e);
		s = next;
		if (!*l || *l == '#')
			continue;
		char *eq = strchr(l, '=');
		if (!eq)
			return set_err(err, errlen, CLUSTER_CONF_BAD,
				       "%s:%d: not 'KEY = VALUE' (keys: endpoints, cluster): '%.60s'", path, line, l);
		char *key = trim(l, eq), *val = trim(eq + 1, eq + 1 + strlen(eq + 1));
		char **slot = !strcmp(key, "endpoints") ? ep : !strcmp(key, "cluster") ? cl : NULL;
		int *at = slot == ep ? ep_line : cl_line;
		if (!*key)
			return set_err(err, errlen, CLUSTER_CONF_BAD, "%s:%d: no key before '=' (keys: endpoints, cluster)",
				       path, line);
		if (!slot)
			return set_err(err, errlen, CLUSTER_CONF_BAD, "%s:%d: unknown key '%.40s' (keys: endpoints, cluster)",
				       path, line, key);
		if (!*val)
			return set_err(err, errlen, CLUSTER_CONF_BAD, "%s:%d: %s has no value", path, line, key);
		if (*slot)
			return set_err(err, errlen, CLUSTER_CONF_BAD, "%s:%d: %s given twice (first on line %d)", path,
				       line, key, *at);
		*slot = val;
		*at = line;
	}
	return 0;
}

void cluster_conf_free(struct cluster_conf *c)
{
	free(c->endpoints);
	free(c->cluster);
	c->endpoints = c->cluster = NULL;
}

int cluster_conf(const char *flag_endpoints, const char *flag_cluster, struct cluster_conf *ret, char *err,
		 size_t errlen)
{
	memset(ret, 0, sizeof *ret);
	const char *path = env_nonempty("SHMCFG_CLUSTER_CONF");
	if (path && strlen(path) >= sizeof ret->file) /* cut, it would name another file */
		return set_err(err, errlen, CLUSTER_CONF_BAD, "SHMCFG_CLUSTER_CONF: a path of %zu bytes (at most %zu)",
			       strlen(path), sizeof ret->file - 1);
	snprintf(ret->file, sizeof ret->file, "%s", path ? path : CLUSTER_CONF_PATH);
	const char *ep = flag_endpoints, *cl = flag_cluster;
	if (ep)
		snprintf(ret->endpoints_from, sizeof ret->endpoints_from, "--endpoints");
	else if ((ep = env_nonempty("SHMCFG_ETCD_ENDPOINTS")))
		snprintf(ret->endpoints_from, sizeof ret->endpoints_from, "SHMCFG_ETCD_ENDPOINTS");
	if (cl)
		snprintf(ret->cluster_from, sizeof ret->cluster_from, "--cluster");
	else if ((cl = env_nonempty("SHMCFG_CLUSTER")))
		snprintf(ret->cluster_from, sizeof ret->cluster_from, "SHMCFG_CLUSTER");
	/* the file only for what is still open: a bad file the flags make
	 * moot does not stop anyone */
	char *text = NULL;
	bool absent = false;
	if (!ep || !cl) {
		size_t len = 0;
		char *fep = NULL, *fcl = NULL;
		int fep_line = 0, fcl_line = 0;
		int r = read_conf(ret->file, &text, &len, err, errlen);
		if (r < 0)
			return r;
		absent = r == 1;
		if (!absent && (r = parse_conf(ret->file, text, len, &fep, &fep_line, &fcl, &fcl_line, err, errlen))) {
			free(text);
			return r;
		}
		if (!ep && fep) {
			ep = fep;
			snprintf(ret->endpoints_from, sizeof ret->endpoints_from, "%s:%d", ret->file, fep_line);
		}
		if (!cl && fcl) {
			cl = fcl;
			snprintf(ret->cluster_from, sizeof ret->cluster_from, "%s:%d", ret->file, fcl_line);
		}
	}
	int rc = 0;
	const char *none = absent ? " (there is no such file)" : "";
	if (!ep)
		rc = set_err(err, errlen, CLUSTER_CONF_MISSING,
			     "no etcd endpoints: give --endpoints URL[,URL], set SHMCFG_ETCD_ENDPOINTS, or write "
			     "'endpoints = URL[,URL]' in %s%s",
			     ret->file, none);
	else if (!cl)
		rc = set_err(err, errlen, CLUSTER_CONF_MISSING,
			     "no cluster name: give --cluster NAME, set SHMCFG_CLUSTER, or write 'cluster = NAME' in %s%s",
			     ret->file, none);
	else if (!key_element_ok(cl)) {
		char shown[330];
		term_escape(cl, strnlen(cl, 80), shown, sizeof shown);
		rc = set_err(err, errlen, CLUSTER_CONF_BAD,
			     "cluster name '%s' (from %s): 1 to %zu bytes of UTF-8, no '/', space or control character",
			     shown, ret->cluster_from, sizeof ((shmcfg_sync_info *)0)->cluster - 1);
	}
	else if (!(ret->endpoints = strdup(ep)) || !(ret->cluster = strdup(cl))) {
		cluster_conf_free(ret);
		rc = set_err(err, errlen, CLUSTER_CONF_BAD, "out of memory");
	}
	free(text);
	return rc;
}
