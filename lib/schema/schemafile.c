/* SPDX-License-Identifier: MIT */
/*
 * Schema files: YAML, format 1 (doc/schema-format.md), read with libyaml's
 * document API. Each option's attributes are turned into the text fields of
 * a shmcfg_optdef and go through shmcfg_schema_add(), so a file and a C
 * declaration are checked by the same code. Every error names file:line,
 * those found when the schema is built too (each option keeps its line).
 */
#include "internal.h"
#include "schema.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SCHEMA_FILE_MAX (64 << 20) /* bytes of a schema file: the torch schema is 100 KiB */

#include <jansson.h>
#include <yaml.h>

struct ctx {
	const char *label;
	yaml_document_t doc;
	yaml_node_t *opts; /* the options mapping, to find an implies target's type */
	char **bufs;       /* texts made for the current option: one per implication, no limit */
	size_t nbufs, cap;
	bool oom;          /* an allocation failed for the current option: its error is -ENOMEM */
};

static int err_at(struct ctx *c, const yaml_node_t *n, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int err_at(struct ctx *c, const yaml_node_t *n, const char *fmt, ...)
{
	char msg[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return shmcfg__err(SHMCFG_E_SCHEMADEF, "%s:%zu: %s", c->label,
			   n ? n->start_mark.line + 1 : 0, msg);
}

static const char *scalar(const yaml_node_t *n)
{
	return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static bool plain(const yaml_node_t *n)
{
	return n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
}

static yaml_node_t *node(struct ctx *c, int id)
{
	return yaml_document_get_node(&c->doc, id);
}

/* Keep a text made for the current option; NULL (a text that could not be
 * made) is out of memory. */
static char *keep(struct ctx *c, char *text)
{
	if (!text) {
		c->oom = true;
		return NULL;
	}
	if (c->nbufs == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 16;
		char **nb = shmcfg__realloc(c->bufs, cap * sizeof *nb);
		if (!nb) {
			shmcfg__free(text);
			c->oom = true;
			return NULL;
		}
		c->bufs = nb;
		c->cap = cap;
	}
	return c->bufs[c->nbufs++] = text;
}

/* JSON text of j (NULL: it could not be made), kept. */
static char *keep_json(struct ctx *c, json_t *j, size_t flags)
{
	char *t = NULL;
	if (j)
		(void)shmcfg__json_text(j, flags, &t);
	return keep(c, t);
}

static void drop_texts(struct ctx *c)
{
	while (c->nbufs)
		shmcfg__free(c->bufs[--c->nbufs]);
}

static const char *const types[] = {"bool", "int", "float", "str", "list", "set"};

/* The type named by an option's attributes (the last `type`, as option()
 * reads them), 0 if none or unknown. */
static shmcfg_type attrs_type(struct ctx *c, const yaml_node_t *attrs)
{
	shmcfg_type type = 0;
	if (!attrs || attrs->type != YAML_MAPPING_NODE)
		return 0;
	for (yaml_node_pair_t *p = attrs->data.mapping.pairs.start; p < attrs->data.mapping.pairs.top; p++) {
		const char *a = scalar(node(c, p->key)), *t = scalar(node(c, p->value));
		if (!a || strcmp(a, "type"))
			continue;
		type = 0;
		for (int i = 0; t && i < 6; i++)
			if (!strcmp(t, types[i]))
				type = (shmcfg_type)(i + 1);
	}
	return type;
}

/* The type of the option of that name declared in this file, 0 if none
 * (shmcfg_schema_add's checks then report it). */
static shmcfg_type opt_type(struct ctx *c, const char *name)
{
	if (!name || !c->opts || c->opts->type != YAML_MAPPING_NODE)
		return 0;
	for (yaml_node_pair_t *p = c->opts->data.mapping.pairs.start; p < c->opts->data.mapping.pairs.top; p++) {
		const char *k = scalar(node(c, p->key));
		if (k && !strcmp(k, name))
			return attrs_type(c, node(c, p->value));
	}
	return 0;
}

/* A plain YAML 1.1 float special (.nan, [-+].inf, in their three
 * spellings each: what tools/shmcfg-import writes) as the text strtod
 * reads; NULL for anything else. Callers map it only for a float value:
 * a plain scalar is resolved by the option's type, so a str keeps ".inf". */
static const char *float_special(const yaml_node_t *n)
{
	const char *s = scalar(n);
	if (!s || !plain(n))
		return NULL;
	if (!strcmp(s, ".nan") || !strcmp(s, ".NaN") || !strcmp(s, ".NAN"))
		return "nan";
	bool neg = *s == '-';
	if (*s == '-' || *s == '+')
		s++;
	if (!strcmp(s, ".inf") || !strcmp(s, ".Inf") || !strcmp(s, ".INF"))
		return neg ? "-inf" : "inf";
	return NULL;
}

/* A YAML value as shmcfg_value_parse() text for a value of @type (0 if
 * unknown): a quoted scalar becomes a JSON string literal (so "none" stays
 * the text none), a plain null is none, a plain float special of a float is
 * strtod's spelling, another plain scalar is kept, a sequence becomes a JSON
 * array of its items (float specials mapped the same way, for choices). */
static char *value_text(struct ctx *c, yaml_node_t *n, bool raw_strings, shmcfg_type type)
{
	bool is_float = type == SHMCFG_FLOAT;
	if (n->type == YAML_SCALAR_NODE) {
		const char *s = scalar(n);
		if (plain(n) && (!*s || !strcmp(s, "null") || !strcmp(s, "~") || !strcmp(s, "Null") ||
				 !strcmp(s, "NULL")))
			return keep(c, shmcfg__strdup("none"));
		if (is_float && float_special(n))
			return keep(c, shmcfg__strdup(float_special(n)));
		if (plain(n) || raw_strings)
			return keep(c, shmcfg__strdup(s));
		json_t *j = json_stringn(s, n->data.scalar.length);
		char *t = keep_json(c, j, JSON_ENCODE_ANY);
		json_decref(j);
		return t;
	}
	if (n->type == YAML_SEQUENCE_NODE) {
		json_t *a = json_array();
		for (yaml_node_item_t *it = n->data.sequence.items.start; a && it < n->data.sequence.items.top; it++) {
			yaml_node_t *item = node(c, *it);
			if (!scalar(item)) {
				json_decref(a);
				return NULL;
			}
			/* an item that could not be added must not go missing */
			if (json_array_append_new(a, is_float && float_special(item)
							     ? json_string(float_special(item))
							     : json_stringn(scalar(item), item->data.scalar.length))) {
				json_decref(a);
				c->oom = true;
				return NULL;
			}
		}
		char *t = keep_json(c, a, JSON_COMPACT);
		json_decref(a);
		return t;
	}
	return NULL;
}

static int want_bool(struct ctx *c, yaml_node_t *n, const char *key, bool *out)
{
	const char *s = scalar(n);
	if (s && plain(n) && (!strcmp(s, "true") || !strcmp(s, "True")))
		*out = true;
	else if (s && plain(n) && (!strcmp(s, "false") || !strcmp(s, "False")))
		*out = false;
	else
		return err_at(c, n, "%s must be true or false", key);
	return 0;
}

static int option(struct ctx *c, shmcfg_schema *s, yaml_node_t *key, yaml_node_t *attrs)
{
	shmcfg_optdef d = {.name = scalar(key)};
	if (!d.name)
		return err_at(c, key, "an option name must be a plain string");
	if (attrs->type != YAML_MAPPING_NODE)
		return err_at(c, attrs, "option %s: attributes must be a mapping", d.name);
	/* the type may come after the values that it resolves */
	shmcfg_type own_type = attrs_type(c, attrs);
	yaml_node_t *type_node = NULL;
	for (yaml_node_pair_t *p = attrs->data.mapping.pairs.start; p < attrs->data.mapping.pairs.top; p++) {
		yaml_node_t *k = node(c, p->key), *v = node(c, p->value);
		const char *a = scalar(k);
		if (!a)
			return err_at(c, k, "option %s: attribute names are strings", d.name);
		bool flag = false;
		int r = 0;
		const char **text_field = NULL;
		if (!strcmp(a, "type")) {
			const char *t = scalar(v);
			type_node = v;
			for (int i = 0; t && i < 6; i++)
				if (!strcmp(t, types[i]))
					d.type = (shmcfg_type)(i + 1);
			if (!d.type)
				return err_at(c, v, "option %s: type '%s' is not one of bool, int, float, str, list, set",
					      d.name, t ? t : "?");
		} else if (!strcmp(a, "nullable") || !strcmp(a, "hash_ignored") ||
			   !strcmp(a, "save_ignored") || !strcmp(a, "private")) {
			if ((r = want_bool(c, v, a, &flag)))
				return r;
			unsigned bit = !strcmp(a, "nullable")	    ? SHMCFG_F_NULLABLE
				       : !strcmp(a, "hash_ignored") ? SHMCFG_F_HASH_IGNORED
				       : !strcmp(a, "save_ignored") ? SHMCFG_F_SAVE_IGNORED
								    : SHMCFG_F_PRIVATE;
			if (flag)
				d.flags |= bit;
		} else if (!strcmp(a, "default"))
			text_field = &d.def;
		else if (!strcmp(a, "min"))
			text_field = &d.min;
		else if (!strcmp(a, "max"))
			text_field = &d.max;
		else if (!strcmp(a, "choices") || !strcmp(a, "env_default") || !strcmp(a, "env_force")) {
			const char **f = !strcmp(a, "choices") ? &d.choices : !strcmp(a, "env_default") ? &d.env_default : &d.env_force;
			shmcfg_type item_type = f == &d.choices ? own_type : SHMCFG_STR;
			if (v->type == YAML_SCALAR_NODE) { /* one name */
				const char *sp = item_type == SHMCFG_FLOAT ? float_special(v) : NULL;
				json_t *arr = json_pack("[s]", sp ? sp : scalar(v));
				*f = keep_json(c, arr, JSON_COMPACT);
				json_decref(arr);
			} else if (v->type == YAML_SEQUENCE_NODE)
				*f = value_text(c, v, true, item_type);
			if (!*f)
				return err_at(c, v, "option %s: %s must be a list of strings", d.name, a);
		} else if (!strcmp(a, "doc") || !strcmp(a, "knob") || !strcmp(a, "alias") ||
			   !strcmp(a, "deprecated")) {
			const char *t = scalar(v);
			if (!t)
				return err_at(c, v, "option %s: %s must be a string", d.name, a);
			if (!strcmp(a, "doc"))
				d.doc = t;
			else if (!strcmp(a, "knob"))
				d.knob = t;
			else if (!strcmp(a, "alias"))
				d.alias = t;
			else
				d.deprecated = t;
		} else if (!strcmp(a, "implies")) {
			if (v->type != YAML_MAPPING_NODE)
				return err_at(c, v, "option %s: implies must be a mapping option: value", d.name);
			size_t cap = 1;
			char *spec = shmcfg__calloc(1, 1);
			for (yaml_node_pair_t *q = v->data.mapping.pairs.start; spec && q < v->data.mapping.pairs.top; q++) {
				const char *target = scalar(node(c, q->key));
				yaml_node_t *vn = node(c, q->value);
				/* the target's type only matters for a float special */
				shmcfg_type tt = float_special(vn) ? opt_type(c, target) : 0;
				char *val = value_text(c, vn, false, tt);
				if (!target || !val) {
					shmcfg__free(spec);
					return err_at(c, node(c, q->key), "option %s: bad implies entry", d.name);
				}
				cap += strlen(target) + strlen(val) + 2;
				char *ns = shmcfg__realloc(spec, cap);
				if (!ns) {
					shmcfg__free(spec);
					spec = NULL;
					break;
				}
				spec = ns;
				strcat(strcat(strcat(spec, *spec ? ";" : ""), target), "=");
				strcat(spec, val);
			}
			if (!(d.implies = keep(c, spec)))
				return shmcfg__nomem();
		} else
			return err_at(c, k, "option %s: unknown attribute '%s'", d.name, a);
		if (text_field) {
			*text_field = value_text(c, v, false, own_type);
			if (!*text_field)
				return err_at(c, v, "option %s: %s must be a scalar or a list", d.name, a);
		}
	}
	if (!type_node)
		return err_at(c, key, "option %s: no type", d.name);
	int r = shmcfg_schema_add(s, &d);
	if (r && r != -ENOMEM) {
		char why[400];
		snprintf(why, sizeof why, "%s", shmcfg_errdetail());
		return err_at(c, key, "%s", why);
	}
	if (!r) /* for the checks between options, made when it is built */
		s->opts[s->n - 1].line = (uint32_t)key->start_mark.line + 1;
	return r;
}

#define SCHEMA_YAML_MAX_DEPTH 64 /* a schema nests a handful of levels */

/*
 * Aliases are refused: libyaml resolves each one to the node it names, which
 * option() then reads once per alias, so 180 KB of aliases of one long string
 * made gigabytes of texts. A schema needs none. This first pass reads the
 * events (bounded memory) and stops at the first alias; malformed YAML is
 * left to yaml_parser_load, which says where. It also refuses nesting past
 * SCHEMA_YAML_MAX_DEPTH (below). 0 or the error.
 */

static int refuse_aliases(struct ctx *c, const char *text, size_t len)
{
	yaml_parser_t p;
	if (!yaml_parser_initialize(&p))
		return shmcfg__nomem();
	yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
	int r = 0, depth = 0;
	for (bool done = false; !done && !r;) {
		yaml_event_t e;
		if (!yaml_parser_parse(&p, &e)) {
			r = p.error == YAML_MEMORY_ERROR ? shmcfg__nomem() : 0;
			break;
		}
		if (e.type == YAML_ALIAS_EVENT)
			r = shmcfg__err(SHMCFG_E_SCHEMADEF, "%s:%zu: YAML aliases are not allowed in a schema (*%.40s)",
					c->label, e.start_mark.line + 1, (const char *)e.data.alias.anchor);
		/* libyaml's scanner costs the depth of flow nesting per token: a
		 * file (or an etcd key) of 200 KB of '[' took a minute. A schema
		 * nests a handful of levels; stop long before that cost. */
		depth += e.type == YAML_SEQUENCE_START_EVENT || e.type == YAML_MAPPING_START_EVENT;
		depth -= e.type == YAML_SEQUENCE_END_EVENT || e.type == YAML_MAPPING_END_EVENT;
		if (!r && depth > SCHEMA_YAML_MAX_DEPTH)
			r = shmcfg__err(SHMCFG_E_SCHEMADEF, "%s:%zu: nested more than %d levels deep", c->label,
					e.start_mark.line + 1, SCHEMA_YAML_MAX_DEPTH);
		/* the first document: what yaml_parser_load reads */
		done = e.type == YAML_DOCUMENT_END_EVENT || e.type == YAML_STREAM_END_EVENT;
		yaml_event_delete(&e);
	}
	yaml_parser_delete(&p);
	return r;
}

int shmcfg_schema_load_text(const char *text, size_t len, const char *label, shmcfg_schema **ret)
{
	SHMCFG_API_ENTRY;
	assert_return(text && ret, -EINVAL);
	struct ctx c = {.label = label ? label : "<schema>"};
	int ar = refuse_aliases(&c, text, len);
	if (ar)
		return ar;
	yaml_parser_t parser;
	if (!yaml_parser_initialize(&parser))
		return shmcfg__nomem();
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	if (!yaml_parser_load(&parser, &c.doc)) {
		int r = parser.error == YAML_MEMORY_ERROR ? shmcfg__nomem() : shmcfg__err(SHMCFG_E_SCHEMADEF, "%s:%zu: %s", c.label, parser.problem_mark.line + 1,
				    parser.problem ? parser.problem : "malformed YAML");
		yaml_parser_delete(&parser);
		return r;
	}
	yaml_parser_delete(&parser);
	shmcfg_schema *s = NULL;
	int r = shmcfg_schema_new(&s);
	if (!r && !(s->file = shmcfg__strdup(c.label)))
		r = shmcfg__nomem();
	yaml_node_t *root = yaml_document_get_root_node(&c.doc);
	yaml_node_t *opts = NULL;
	if (!r && (!root || root->type != YAML_MAPPING_NODE))
		r = err_at(&c, root, "the top level must be a mapping with format and options");
	for (yaml_node_pair_t *p = r ? NULL : root->data.mapping.pairs.start; p && p < root->data.mapping.pairs.top && !r; p++) {
		yaml_node_t *k = node(&c, p->key), *v = node(&c, p->value);
		const char *key = scalar(k);
		if (key && !strcmp(key, "format")) {
			if (!scalar(v) || strcmp(scalar(v), "1"))
				r = err_at(&c, v, "format %s is not supported (this library reads format 1)",
					   scalar(v) ? scalar(v) : "?");
		} else if (key && !strcmp(key, "options"))
			opts = v;
		else
			r = err_at(&c, k, "unknown top-level key '%s'", key ? key : "?");
	}
	if (!r && (!opts || opts->type != YAML_MAPPING_NODE))
		r = err_at(&c, opts ? opts : root, "options must be a mapping of name: attributes");
	c.opts = opts;
	for (yaml_node_pair_t *p = r ? NULL : opts->data.mapping.pairs.start; p && p < opts->data.mapping.pairs.top && !r; p++) {
		c.oom = false;
		r = option(&c, s, node(&c, p->key), node(&c, p->value));
		if (r && c.oom) /* "must be a list", "bad implies entry": a text could not be made */
			r = shmcfg__nomem();
		drop_texts(&c);
	}
	shmcfg__free(c.bufs);
	yaml_document_delete(&c.doc);
	if (r) {
		shmcfg_schema_free(s);
		return r;
	}
	*ret = s;
	return 0;
}

/* The installed schemas, $(pkgdatadir)/schemas (Makefile.am) */
#ifndef SHMCFG_SCHEMADIR
#define SHMCFG_SCHEMADIR "/usr/local/share/shmcfg/schemas"
#endif

/* A schema named rather than given as a path ("torch"): no '/' and no '.'
 * ("torch.yaml", "s.yml" and "./torch" are files). */
static bool schema_is_name(const char *s)
{
	return *s && !strpbrk(s, "/.");
}

/*
 * The file of a named schema: NAME.yaml in the directories of
 * $SHMCFG_SCHEMA_PATH (colon-separated, empty entries ignored; not read by
 * a setuid or setgid process), then in SHMCFG_SCHEMADIR; the first that
 * exists. *ret is allocated. -ENOENT names every directory tried.
 */
static int schema_find(const char *name, char **ret)
{
	const char *env = secure_getenv("SHMCFG_SCHEMA_PATH");
	const char *dirs[] = {env ? env : "", SHMCFG_SCHEMADIR};
	/* the tried list: each entry and ", "; a path: an entry, '/', NAME.yaml */
	size_t cap = strlen(name) + strlen(SHMCFG_SCHEMADIR) + 3 * strlen(dirs[0]) + 16;
	char *path = shmcfg__malloc(cap), *tried = shmcfg__malloc(cap);
	if (!path || !tried) {
		shmcfg__free(path);
		shmcfg__free(tried);
		return shmcfg__nomem();
	}
	size_t used = 0;
	tried[0] = 0;
	for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
		for (const char *d = dirs[i]; *d;) {
			size_t len = strcspn(d, ":");
			if (len) {
				snprintf(path, cap, "%.*s/%s.yaml", (int)len, d, name);
				if (!access(path, F_OK)) {
					shmcfg__free(tried);
					*ret = path;
					return 0;
				}
				used += snprintf(tried + used, cap - used, "%s%.*s", used ? ", " : "",
						 (int)len, d);
			}
			d += len + (d[len] == ':');
		}
	}
	bool here = !access(name, F_OK);
	int r = shmcfg__err(-ENOENT, "no schema named '%s': no %s.yaml in %s%s%s%s%s", name, name, tried,
			    env ? "" : " (SHMCFG_SCHEMA_PATH adds directories)", here ? " (the file here: give ./" : "",
			    here ? name : "", here ? ")" : "");
	shmcfg__free(path);
	shmcfg__free(tried);
	return r;
}

int shmcfg_schema_load(const char *path, shmcfg_schema **ret)
{
	SHMCFG_API_ENTRY;
	assert_return(path && ret, -EINVAL);
	if (schema_is_name(path)) {
		char *found = NULL;
		int r = schema_find(path, &found);
		if (!r) {
			r = shmcfg_schema_load(found, ret);
			shmcfg__free(found);
		}
		return r;
	}
	/* a regular file of at most SCHEMA_FILE_MAX bytes: never a FIFO that
	 * blocks (opened non-blocking, refused), nor /dev/zero's endless bytes */
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return shmcfg__err(-errno, "%s: %s", path, strerror(errno));
	struct stat st;
	int r = fstat(fd, &st) ? -errno : 0;
	if (!r && !S_ISREG(st.st_mode))
		r = shmcfg__err(-EINVAL, "%s: is %s, not a schema file", path,
				S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO" : "a device or socket");
	else if (!r && st.st_size > SCHEMA_FILE_MAX)
		r = shmcfg__err(-EFBIG, "%s: %lld bytes: a schema file is at most %d MiB", path, (long long)st.st_size,
				SCHEMA_FILE_MAX >> 20);
	else if (r)
		r = shmcfg__err(r, "%s: %s", path, strerror(-r));
	char *buf = r ? NULL : shmcfg__malloc((size_t)st.st_size + 1);
	if (!r && !buf)
		r = shmcfg__nomem();
	size_t len = 0;
	while (!r && len <= (size_t)st.st_size) { /* one byte more: a file that grew is refused */
		ssize_t n = read(fd, buf + len, (size_t)st.st_size + 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			r = shmcfg__err(-errno, "%s: read: %s", path, strerror(errno));
		else if (n == 0)
			break;
		len += (size_t)(n > 0 ? n : 0);
	}
	close(fd);
	/* /proc and /sys files say 0 bytes and have more */
	if (!r && len > (size_t)st.st_size)
		r = st.st_size ? shmcfg__err(-EAGAIN, "%s: grew while it was read", path)
			       : shmcfg__err(-EINVAL, "%s: not a file of known size (it says 0 bytes)", path);
	if (!r)
		r = shmcfg_schema_load_text(buf, len, path, ret);
	shmcfg__free(buf);
	return r;
}

int shmcfg_schema_default(shmcfg_schema **ret)
{
	SHMCFG_API_ENTRY;
	assert_return(ret, -EINVAL);
	return shmcfg__default_schema(ret);
}
