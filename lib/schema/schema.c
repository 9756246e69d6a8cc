/* SPDX-License-Identifier: MIT */
/*
 * Declaring options: the schema builder behind shmcfg_schema_add(), with
 * the checks of each declaration, and the one value check (type, null,
 * range, choices) that declarations and written values share.
 */
#include "internal.h"
#include "schema.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <xxhash.h>

uint64_t shmcfg__name_hash(const char *s, size_t len)
{
	return XXH3_64bits(s, len);
}

int shmcfg_schema_new(shmcfg_schema **ret)
{
	SHMCFG_API_ENTRY;
	assert_return(ret, -EINVAL);
	*ret = shmcfg__calloc(1, sizeof **ret);
	return *ret ? 0 : shmcfg__nomem();
}

static void sopt_free(struct sopt *o)
{
	shmcfg__free(o->name);
	shmcfg__free(o->doc);
	shmcfg__free(o->knob);
	shmcfg__free(o->deprecated);
	shmcfg__free(o->alias);
	shmcfg__free(o->implies);
	shmcfg_value_clear(&o->def);
	shmcfg_value_clear(&o->min);
	shmcfg_value_clear(&o->max);
	shmcfg_value_clear(&o->choices);
	shmcfg_value_clear(&o->env_default);
	shmcfg_value_clear(&o->env_force);
}

shmcfg_schema *shmcfg_schema_free(shmcfg_schema *s)
{
	SHMCFG_API_KEEP;
	if (!s)
		return NULL;
	for (uint32_t i = 0; i < s->n; i++)
		sopt_free(&s->opts[i]);
	shmcfg__free(s->opts);
	shmcfg__free(s->byname);
	shmcfg__free(s->file);
	shmcfg__free(s);
	return NULL;
}

uint32_t shmcfg_schema_count(const shmcfg_schema *s)
{
	SHMCFG_API_KEEP;
	return s ? s->n : 0;
}

static uint32_t *byname_slot(const shmcfg_schema *s, const char *name)
{
	uint32_t mask = s->byname_size - 1;
	for (uint64_t i = shmcfg__name_hash(name, strlen(name));; i++) {
		uint32_t *e = &s->byname[i & mask];
		if (*e == 0 || !strcmp(s->opts[*e - 1].name, name))
			return e;
	}
}

int shmcfg__schema_find(const shmcfg_schema *s, const char *name)
{
	if (!s->byname_size)
		return -1;
	uint32_t *e = byname_slot(s, name);
	return *e ? (int)(*e - 1) : -1;
}

/*
 * The next item of an implies text "a=v;b=w" (a copy, cut in place), or
 * NULL at its end; empty items are skipped. An item ends at the next ';',
 * except inside the strings of a value in JSON (one that starts with '"' or
 * '[' after its '='): an implied string may hold a ';', and
 * shmcfg_value_format() writes strings in JSON.
 */
char *shmcfg__implies_item(char **rest)
{
	char *p = *rest + strspn(*rest, ";");
	if (!*p) {
		*rest = p;
		return NULL;
	}
	char *item = p, *eq = strchr(p, '=');
	size_t plain = strcspn(p, ";");
	if (eq && eq < p + plain) {
		char *v = eq + 1 + strspn(eq + 1, " \t\n\r\f\v");
		if (*v == '"' || *v == '[') {
			bool in_str = false;
			for (p = v; *p && (in_str || *p != ';'); p++) {
				if (in_str && *p == '\\' && p[1])
					p++; /* an escaped character: a quote or a backslash does not end the string */
				else if (*p == '"')
					in_str = !in_str;
			}
			plain = (size_t)(p - item);
		}
	}
	p = item + plain;
	if (*p)
		*p++ = 0;
	*rest = p;
	return item;
}

static int byname_grow(shmcfg_schema *s)
{
	uint32_t size = s->byname_size ? s->byname_size * 2 : 64;
	uint32_t *old = s->byname, old_size = s->byname_size;
	s->byname = shmcfg__calloc(size, sizeof *s->byname);
	if (!s->byname) {
		s->byname = old;
		return shmcfg__nomem();
	}
	s->byname_size = size;
	for (uint32_t i = 0; i < old_size; i++)
		if (old[i])
			*byname_slot(s, s->opts[old[i] - 1].name) = old[i];
	shmcfg__free(old);
	return 0;
}

/* Dotted name: parts of [A-Za-z_][A-Za-z0-9_]*, at most 255 bytes.
 * Returns why a name is not one, NULL if it is. */
static const char *name_problem(const char *n)
{
	size_t len = strlen(n);
	if (len == 0)
		return "empty";
	if (len > 255)
		return "longer than 255 characters";
	bool start = true;
	for (const char *p = n; *p; p++) {
		if (*p == '.') {
			if (start)
				return "a dotted part is empty";
			start = true;
			continue;
		}
		/* ASCII whatever the locale (a Latin-1 locale's isalnum takes 0xe9) */
		unsigned char c = (unsigned char)*p;
		bool digit = c >= '0' && c <= '9', letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
		if (start && digit)
			return "a dotted part starts with a digit";
		if (!(letter || digit || c == '_'))
			return "only letters, digits, '_' and '.' are allowed";
		start = false;
	}
	return start ? "a dotted part is empty" : NULL;
}

static int dup_str(const char *src, char **dst)
{
	*dst = NULL;
	if (!src)
		return 0;
	*dst = shmcfg__strdup(src);
	return *dst ? 0 : shmcfg__nomem();
}

/* The checks a value must pass for an option: shared by schema defaults,
 * transactions, environment values and loads. */
int shmcfg__check_value(const char *name, shmcfg_type type, unsigned flags,
			   const shmcfg_value *min, const shmcfg_value *max,
			   const shmcfg_value *choices, const shmcfg_value *v)
{
	if (v->type != type && !(type == SHMCFG_FLOAT && v->type == SHMCFG_INT))
		return shmcfg__err(SHMCFG_E_TYPE, "%s: expected %s, got %s", name,
				   shmcfg_type_name(type), shmcfg_type_name(v->type) ?: "?");
	if (v->is_null)
		return flags & SHMCFG_F_NULLABLE
			       ? 0
			       : shmcfg__err(SHMCFG_E_NULLVAL, "%s: null is not allowed (not nullable)",
					     name);
	/* a hand-built value's pointer: NULL only for no bytes at all */
	if (type == SHMCFG_STR && !v->u.str.ptr && v->u.str.len)
		return shmcfg__err(-EINVAL, "%s: string of %zu bytes at NULL", name, v->u.str.len);
	if ((type == SHMCFG_LIST || type == SHMCFG_SET) && !v->u.list.items &&
	    (v->u.list.bytes || v->u.list.count))
		return shmcfg__err(-EINVAL, "%s: list of %zu items (%zu bytes) at NULL", name,
				   v->u.list.count, v->u.list.bytes);
	if (type == SHMCFG_INT) {
		if (min && !min->is_null && v->u.i < min->u.i)
			return shmcfg__err(SHMCFG_E_RANGE, "%s: value %lld is below the minimum %lld",
					   name, (long long)v->u.i, (long long)min->u.i);
		if (max && !max->is_null && v->u.i > max->u.i)
			return shmcfg__err(SHMCFG_E_RANGE, "%s: value %lld is above the maximum %lld",
					   name, (long long)v->u.i, (long long)max->u.i);
	}
	if (type == SHMCFG_FLOAT) {
		double f = v->type == SHMCFG_INT ? (double)v->u.i : v->u.f;
		if ((min && !min->is_null) || (max && !max->is_null)) {
			if (isnan(f))
				return shmcfg__err(SHMCFG_E_RANGE, "%s: NaN is outside the range", name);
			if (min && !min->is_null && f < min->u.f)
				return shmcfg__err(SHMCFG_E_RANGE, "%s: value %g is below the minimum %g",
						   name, f, min->u.f);
			if (max && !max->is_null && f > max->u.f)
				return shmcfg__err(SHMCFG_E_RANGE, "%s: value %g is above the maximum %g",
						   name, f, max->u.f);
		}
	}
	if (type == SHMCFG_STR) {
		if (v->u.str.len > SEG_MAX_VALUE_BYTES)
			return shmcfg__err(SHMCFG_E_RANGE, "%s: string of %zu bytes is too long (max %u)",
					   name, v->u.str.len, SEG_MAX_VALUE_BYTES);
		if (memchr(v->u.str.ptr, 0, v->u.str.len))
			return shmcfg__err(SHMCFG_E_PARSE, "%s: string contains a NUL byte", name);
		if (!shmcfg__utf8_valid(v->u.str.ptr, v->u.str.len))
			return shmcfg__err(SHMCFG_E_PARSE, "%s: string is not valid UTF-8", name);
	}
	if (type == SHMCFG_LIST || type == SHMCFG_SET) {
		if (v->u.list.bytes > SEG_MAX_VALUE_BYTES)
			return shmcfg__err(SHMCFG_E_RANGE, "%s: list of %zu bytes is too long (max %u)",
					   name, v->u.list.bytes, SEG_MAX_VALUE_BYTES);
		if (!shmcfg__utf8_valid(v->u.list.items, v->u.list.bytes))
			return shmcfg__err(SHMCFG_E_PARSE, "%s: list item is not valid UTF-8", name);
	}
	if (choices && choices->u.list.count) {
		char *text;
		int fr = shmcfg__format_canon(v, &text);
		if (fr)
			return fr;
		bool found = false;
		for (const char *c = NULL; !found && (c = shmcfg_list_next(choices, c));)
			found = strcmp(c, text) == 0;
		if (!found) {
			/* the value and the choices as the option's type writes them: a
			 * string quoted (an empty one shows), a number bare; each cut
			 * whole, with "..." */
			struct shmcfg__text val = {0}, all = {0};
			bool str = type == SHMCFG_STR;
			shmcfg__text_printf(&val, str ? "\"%.80s%s\"" : "%.80s%s", text, strlen(text) > 80 ? "..." : "");
			shmcfg__text_put(&all, "[");
			for (const char *c = NULL; all.len < 200 && (c = shmcfg_list_next(choices, c));)
				shmcfg__text_printf(&all, str ? "%s\"%s\"" : "%s%s", all.len > 1 ? ", " : "", c);
			shmcfg__text_put(&all, all.len < 200 ? "]" : ", ...]");
			shmcfg__err(SHMCFG_E_CHOICE, "%s: value %s is not one of %s", name, val.p ? val.p : "?",
				    all.p ? all.p : "the choices");
			shmcfg__free(val.p);
			shmcfg__free(all.p);
			shmcfg__free(text);
			return SHMCFG_E_CHOICE;
		}
		shmcfg__free(text);
	}
	return 0;
}

/* Parse a text field of a definition as a value of the option's type. */
static int parse_field(const shmcfg_optdef *d, const char *what, const char *text,
		       shmcfg_type type, bool nullable, shmcfg_value *out)
{
	int r = shmcfg_value_parse(type, nullable, text, out);
	if (r == SHMCFG_E_PARSE) {
		char why[256];
		snprintf(why, sizeof why, "%s", shmcfg_errdetail());
		return shmcfg__err(SHMCFG_E_SCHEMADEF, "%s: %s: %s", d->name, what, why);
	}
	return r;
}

/* Choices: each must parse as the option's type; kept as canonical texts
 * (shmcfg__format_canon) so that checking a value is one string compare. */
static int parse_choices(const shmcfg_optdef *d, shmcfg_value *out)
{
	shmcfg_value raw;
	int r = parse_field(d, "choices", d->choices, SHMCFG_LIST, false, &raw);
	if (r)
		return r;
	size_t n = raw.u.list.count, i = 0;
	char **texts = shmcfg__calloc(n ? n : 1, sizeof *texts);
	if (!texts)
		r = shmcfg__nomem();
	for (const char *c = NULL; !r && (c = shmcfg_list_next(&raw, c)); i++) {
		if (d->type == SHMCFG_STR) { /* raw text, even if it starts with a quote */
			texts[i] = shmcfg__strdup(c);
			r = texts[i] ? 0 : shmcfg__nomem();
			continue;
		}
		shmcfg_value cv;
		r = parse_field(d, "choices", c, d->type, false, &cv);
		if (!r) {
			r = shmcfg__format_canon(&cv, &texts[i]);
			shmcfg_value_clear(&cv);
		}
	}
	shmcfg_value list;
	if (!r)
		r = shmcfg_value_list(SHMCFG_LIST, (const char *const *)texts, n, &list);
	if (!r) {
		shmcfg_value_clear(out);
		*out = list;
	}
	for (i = 0; texts && i < n; i++)
		shmcfg__free(texts[i]);
	shmcfg__free(texts);
	shmcfg_value_clear(&raw);
	return r;
}

static void zero_value(shmcfg_type type, bool nullable, shmcfg_value *v)
{
	memset(v, 0, sizeof *v);
	v->type = type;
	v->is_null = nullable;
	if (type == SHMCFG_STR)
		v->u.str.ptr = "";
	if (type == SHMCFG_LIST || type == SHMCFG_SET)
		v->u.list.items = "";
}

/* min and max of a definition: a NaN bound would check nothing (every
 * comparison with it is false), and min > max would refuse every value. */
static int check_bounds(const char *name, const struct sopt *o)
{
	bool has_min = !o->min.is_null, has_max = !o->max.is_null;
	if (o->type == SHMCFG_FLOAT) {
		if (has_min && isnan(o->min.u.f))
			return shmcfg__err(SHMCFG_E_SCHEMADEF, "%s: min is NaN, which bounds nothing",
					   name);
		if (has_max && isnan(o->max.u.f))
			return shmcfg__err(SHMCFG_E_SCHEMADEF, "%s: max is NaN, which bounds nothing",
					   name);
		if (has_min && has_max && o->min.u.f > o->max.u.f)
			return shmcfg__err(SHMCFG_E_SCHEMADEF,
					   "%s: min %g is above max %g: no value fits", name,
					   o->min.u.f, o->max.u.f);
	}
	if (o->type == SHMCFG_INT && has_min && has_max && o->min.u.i > o->max.u.i)
		return shmcfg__err(SHMCFG_E_SCHEMADEF, "%s: min %lld is above max %lld: no value fits",
				   name, (long long)o->min.u.i, (long long)o->max.u.i);
	return 0;
}

/* The default against type, range and choices. An absent one is the
 * implicit null or false/0/""/[], which must pass too: the segment would
 * otherwise hold a value that it refuses as input (its own dump would not
 * load back). */
static int check_default(const shmcfg_optdef *d, const struct sopt *o)
{
	int r = shmcfg__check_value(d->name, d->type, o->flags, &o->min, &o->max, &o->choices, &o->def);
	if (!r || r == -ENOMEM)
		return r;
	/* the detail is "name: value V is below ...": drop the name */
	const char *why = shmcfg_errdetail(), *is;
	size_t nl = strlen(d->name);
	if (!strncmp(why, d->name, nl) && !strncmp(why + nl, ": ", 2))
		why += nl + 2;
	if (d->def)
		return shmcfg__err(SHMCFG_E_SCHEMADEF, "%s: default: %s", d->name, why);
	/* only range and choices can refuse an implicit value: show it as JSON
	 * (an empty string is invisible in the check's text) */
	char *text = NULL;
	if (shmcfg_value_format(&o->def, &text))
		return shmcfg__nomem();
	if (!strncmp(why, "value ", 6) && (is = strstr(why, " is ")))
		r = shmcfg__err(SHMCFG_E_SCHEMADEF, "%s: no default, and the implicit %s%s; give a default",
				d->name, text, is);
	else
		r = shmcfg__err(SHMCFG_E_SCHEMADEF, "%s: no default, and the implicit %s fails: %s; give a default",
				d->name, text, why);
	shmcfg__free(text);
	return r;
}

int shmcfg_schema_add(shmcfg_schema *s, const shmcfg_optdef *d)
{
	SHMCFG_API_ENTRY;
	assert_return(s && d, -EINVAL);
	const char *why = d->name ? name_problem(d->name) : "missing";
	if (why)
		return shmcfg__err(SHMCFG_E_SCHEMADEF, "option name '%.80s%s' is invalid: %s",
				   d->name ? d->name : "(null)",
				   d->name && strlen(d->name) > 80 ? "..." : "", why);
	if (!shmcfg_type_name(d->type))
		return shmcfg__err(SHMCFG_E_SCHEMADEF, "%s: unknown type %d", d->name, d->type);
	if (shmcfg__schema_find(s, d->name) >= 0)
		return shmcfg__err(-EEXIST, "%s: option declared twice", d->name);
	if (s->n >= SEG_MAX_OPTS)
		return shmcfg__err(SHMCFG_E_SCHEMADEF, "%s: more than %u options", d->name,
				   SEG_MAX_OPTS);
	bool nullable = d->flags & SHMCFG_F_NULLABLE;
	bool numeric = d->type == SHMCFG_INT || d->type == SHMCFG_FLOAT;
	if ((d->min || d->max) && !numeric)
		return shmcfg__err(SHMCFG_E_SCHEMADEF, "%s: min/max need an int or float option",
				   d->name);
	if (d->knob && d->type != SHMCFG_BOOL && d->type != SHMCFG_INT)
		return shmcfg__err(SHMCFG_E_SCHEMADEF, "%s: a knob needs a bool or int option",
				   d->name);
	if (d->implies && d->type != SHMCFG_BOOL)
		return shmcfg__err(SHMCFG_E_SCHEMADEF, "%s: implies needs a bool option", d->name);
	if (d->alias && (d->def || d->env_default || d->env_force || d->knob || d->implies ||
			 d->min || d->max || d->choices))
		return shmcfg__err(SHMCFG_E_SCHEMADEF,
				   "%s: an alias takes only type, flags and doc", d->name);
	if (d->choices && (d->type == SHMCFG_LIST || d->type == SHMCFG_SET))
		return shmcfg__err(SHMCFG_E_SCHEMADEF, "%s: choices need a str, int or float option",
				   d->name);

	/* the texts are UTF-8, as the schema file's are (the tools' JSON and
	 * terminal output rely on it; validate.c checks the segment's again) */
	const char *const texts[][2] = {{"doc", d->doc},		 {"knob", d->knob},
					{"deprecated", d->deprecated}, {"alias", d->alias},
					{"implies", d->implies},	 {"default", d->def},
					{"min", d->min},		 {"max", d->max},
					{"choices", d->choices},	 {"env_default", d->env_default},
					{"env_force", d->env_force}};
	for (size_t k = 0; k < sizeof texts / sizeof texts[0]; k++)
		if (texts[k][1] && !shmcfg__utf8_valid(texts[k][1], strlen(texts[k][1])))
			return shmcfg__err(SHMCFG_E_SCHEMADEF, "%s: %s is not valid UTF-8", d->name, texts[k][0]);

	struct sopt o = {.type = d->type, .flags = d->flags & 0xffff};
	if (d->deprecated)
		o.flags |= SHMCFG_F_DEPRECATED;
	int r = 0;
	if (!r)
		r = dup_str(d->name, &o.name);
	if (!r)
		r = dup_str(d->doc ? d->doc : "", &o.doc);
	if (!r)
		r = dup_str(d->knob, &o.knob);
	if (!r)
		r = dup_str(d->deprecated, &o.deprecated);
	if (!r)
		r = dup_str(d->alias, &o.alias);
	if (!r)
		r = dup_str(d->implies, &o.implies);
	zero_value(SHMCFG_BOOL, true, &o.min);
	zero_value(SHMCFG_BOOL, true, &o.max);
	zero_value(SHMCFG_LIST, false, &o.choices);
	zero_value(SHMCFG_LIST, false, &o.env_default);
	zero_value(SHMCFG_LIST, false, &o.env_force);
	if (!r && d->min)
		r = parse_field(d, "min", d->min, d->type, false, &o.min);
	if (!r && d->max)
		r = parse_field(d, "max", d->max, d->type, false, &o.max);
	if (!r)
		r = check_bounds(d->name, &o);
	if (!r && d->env_default)
		r = parse_field(d, "env_default", d->env_default, SHMCFG_LIST, false, &o.env_default);
	if (!r && d->env_force)
		r = parse_field(d, "env_force", d->env_force, SHMCFG_LIST, false, &o.env_force);
	/* the descriptor counts them in 16 bits (layout.h) */
	if (!r && (o.env_default.u.list.count > UINT16_MAX || o.env_force.u.list.count > UINT16_MAX))
		r = shmcfg__err(SHMCFG_E_SCHEMADEF, "option %s: more than %u environment variable names", d->name,
				UINT16_MAX);
	if (!r && d->choices)
		r = parse_choices(d, &o.choices);
	if (!r) {
		o.has_def = d->def != NULL;
		if (d->def)
			r = parse_field(d, "default", d->def, d->type, nullable, &o.def);
		else
			zero_value(d->type, nullable, &o.def);
	}
	if (!r && !d->alias)
		r = check_default(d, &o);
	if (!r && s->n == s->cap) {
		uint32_t cap = s->cap ? s->cap * 2 : 16;
		struct sopt *opts = shmcfg__realloc(s->opts, cap * sizeof *opts);
		if (!opts)
			r = shmcfg__nomem();
		else
			s->opts = opts, s->cap = cap;
	}
	if (!r && (s->n + 1) * 2 > s->byname_size)
		r = byname_grow(s);
	if (r) {
		sopt_free(&o);
		return r;
	}
	s->opts[s->n] = o;
	*byname_slot(s, o.name) = ++s->n;
	return 0;
}

/* The embedded default: torch.compiler.config and the torch._dynamo.config
 * options its aliases point to (lib/schema/default_schema.c, generated). */
int shmcfg__default_schema(shmcfg_schema **ret)
{
	shmcfg_schema *s;
	int r = shmcfg_schema_new(&s);
	for (size_t i = 0; !r && i < shmcfg__default_nopts; i++)
		r = shmcfg_schema_add(s, &shmcfg__default_opts[i]);
	if (r) {
		shmcfg_schema_free(s);
		return r;
	}
	*ret = s;
	return 0;
}
