/*
 * Schemas: the builder behind shmcfg_schema_add(), its serialisation into
 * the segment's schema region, validation of that region, name lookup and
 * option descriptions.
 */
#include "internal.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <xxhash.h>

/* One declared option, parsed. */
struct sopt {
	char *name, *doc, *knob, *deprecated, *alias, *implies;
	shmcfg_type type;
	unsigned flags;
	shmcfg_value def, min, max, choices, env_default, env_force;
};

struct shmcfg_schema {
	struct sopt *opts;
	uint32_t n, cap;
	uint32_t *byname; /* open-addressing hash of names -> id + 1 (0 = empty) */
	uint32_t byname_size;
};

static uint64_t name_hash(const char *s, size_t len)
{
	return XXH3_64bits(s, len);
}

int shmcfg_schema_new(shmcfg_schema **ret)
{
	SHMCFG_API_ENTRY;
	assert_return(ret, -EINVAL);
	*ret = calloc(1, sizeof **ret);
	return *ret ? 0 : -ENOMEM;
}

static void sopt_free(struct sopt *o)
{
	free(o->name);
	free(o->doc);
	free(o->knob);
	free(o->deprecated);
	free(o->alias);
	free(o->implies);
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
	free(s->opts);
	free(s->byname);
	free(s);
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
	for (uint64_t i = name_hash(name, strlen(name));; i++) {
		uint32_t *e = &s->byname[i & mask];
		if (*e == 0 || !strcmp(s->opts[*e - 1].name, name))
			return e;
	}
}

static int schema_find(const shmcfg_schema *s, const char *name)
{
	if (!s->byname_size)
		return -1;
	uint32_t *e = byname_slot(s, name);
	return *e ? (int)(*e - 1) : -1;
}

static int byname_grow(shmcfg_schema *s)
{
	uint32_t size = s->byname_size ? s->byname_size * 2 : 64;
	uint32_t *old = s->byname, old_size = s->byname_size;
	s->byname = calloc(size, sizeof *s->byname);
	if (!s->byname) {
		s->byname = old;
		return -ENOMEM;
	}
	s->byname_size = size;
	for (uint32_t i = 0; i < old_size; i++)
		if (old[i])
			*byname_slot(s, s->opts[old[i] - 1].name) = old[i];
	free(old);
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
		if (start && isdigit((unsigned char)*p))
			return "a dotted part starts with a digit";
		if (!(isalnum((unsigned char)*p) || *p == '_'))
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
	*dst = strdup(src);
	return *dst ? 0 : -ENOMEM;
}

/* The checks a value must pass for an option: shared by schema defaults,
 * transactions, environment values and loads. */
static int value_check_def(const char *name, shmcfg_type type, unsigned flags,
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
		if (shmcfg__format_canon(v, &text))
			return -ENOMEM;
		bool found = false;
		for (const char *c = NULL; !found && (c = shmcfg_list_next(choices, c));)
			found = strcmp(c, text) == 0;
		if (!found) {
			char *all = NULL;
			int r = shmcfg_value_format(choices, &all);
			shmcfg__err(SHMCFG_E_CHOICE, "%s: value %.80s is not one of %.200s", name, text,
				    r ? "the choices" : all);
			free(all);
			free(text);
			return SHMCFG_E_CHOICE;
		}
		free(text);
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
	char **texts = calloc(n ? n : 1, sizeof *texts);
	if (!texts)
		r = -ENOMEM;
	for (const char *c = NULL; !r && (c = shmcfg_list_next(&raw, c)); i++) {
		if (d->type == SHMCFG_STR) { /* raw text, even if it starts with a quote */
			texts[i] = strdup(c);
			r = texts[i] ? 0 : -ENOMEM;
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
		free(texts[i]);
	free(texts);
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
	int r = value_check_def(d->name, d->type, o->flags, &o->min, &o->max, &o->choices, &o->def);
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
		return -ENOMEM;
	if (!strncmp(why, "value ", 6) && (is = strstr(why, " is ")))
		r = shmcfg__err(SHMCFG_E_SCHEMADEF, "%s: no default, and the implicit %s%s; give a default",
				d->name, text, is);
	else
		r = shmcfg__err(SHMCFG_E_SCHEMADEF, "%s: no default, and the implicit %s fails: %s; give a default",
				d->name, text, why);
	free(text);
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
	if (schema_find(s, d->name) >= 0)
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
	if (!r && d->choices)
		r = parse_choices(d, &o.choices);
	if (!r) {
		if (d->def)
			r = parse_field(d, "default", d->def, d->type, nullable, &o.def);
		else
			zero_value(d->type, nullable, &o.def);
	}
	if (!r && !d->alias)
		r = check_default(d, &o);
	if (!r && s->n == s->cap) {
		uint32_t cap = s->cap ? s->cap * 2 : 16;
		struct sopt *opts = realloc(s->opts, cap * sizeof *opts);
		if (!opts)
			r = -ENOMEM;
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

/* ------------------------------------------------------------------ */
/* Serialisation                                                      */
/* ------------------------------------------------------------------ */

struct built_schema {
	const shmcfg_schema *s;
	uint32_t *alias, *alias_final; /* per option */
	struct implies_ent *implies;   /* values' strings are indices into implies_vals */
	shmcfg_value *implies_vals;
	uint32_t nimplies;
	uint32_t *imp_first, *imp_n; /* per option: its run of implies entries */
	uint32_t *order, *topo;
	uint64_t strings_bytes;
	uint64_t bytes;
};

/* qsort_r: the options travel as the argument, so that threads creating
 * segments at once do not share a sort context */
static int cmp_by_name(const void *a, const void *b, void *opts)
{
	const struct sopt *o = opts;
	return strcmp(o[*(const uint32_t *)a].name, o[*(const uint32_t *)b].name);
}

static uint64_t value_bytes(const shmcfg_value *v)
{
	if (v->is_null)
		return 0;
	if (v->type == SHMCFG_STR)
		return v->u.str.len + 1;
	if (v->type == SHMCFG_LIST || v->type == SHMCFG_SET)
		return v->u.list.bytes + 1;
	return 0;
}

void shmcfg__schema_built_free(struct built_schema *b)
{
	if (!b)
		return;
	for (uint32_t i = 0; i < b->nimplies; i++)
		shmcfg_value_clear(&b->implies_vals[i]);
	free(b->alias);
	free(b->alias_final);
	free(b->implies);
	free(b->implies_vals);
	free(b->order);
	free(b->topo);
	free(b->imp_first);
	free(b->imp_n);
	free(b);
}

/* Resolve aliases and implications, reject cycles, compute the orders. */
int shmcfg__schema_build(const shmcfg_schema *s, struct built_schema **ret)
{
	uint32_t n = s->n;
	if (n == 0)
		return shmcfg__err(SHMCFG_E_SCHEMADEF, "schema has no options");
	struct built_schema *b = calloc(1, sizeof *b);
	if (!b)
		return -ENOMEM;
	b->s = s;
	b->alias = malloc(n * sizeof(uint32_t));
	b->alias_final = malloc(n * sizeof(uint32_t));
	b->order = malloc(n * sizeof(uint32_t));
	b->topo = malloc(n * sizeof(uint32_t));
	b->imp_first = calloc(n, sizeof(uint32_t));
	b->imp_n = calloc(n, sizeof(uint32_t));
	uint32_t *indeg = calloc(n, sizeof(uint32_t));
	int r = 0;
	if (!b->alias || !b->alias_final || !b->order || !b->topo || !b->imp_first || !b->imp_n ||
	    !indeg) {
		r = -ENOMEM;
		goto fail;
	}
	for (uint32_t i = 0; i < n; i++) {
		const struct sopt *o = &s->opts[i];
		b->alias[i] = SHMCFG_NO_OPT;
		if (!o->alias)
			continue;
		int t = schema_find(s, o->alias);
		if (t < 0) {
			r = shmcfg__err(SHMCFG_E_SCHEMADEF, "%s: alias target %s is not declared",
					o->name, o->alias);
			goto fail;
		}
		b->alias[i] = (uint32_t)t;
	}
	for (uint32_t i = 0; i < n; i++) {
		uint32_t f = i, steps = 0;
		while (b->alias[f] != SHMCFG_NO_OPT) {
			f = b->alias[f];
			if (++steps > n) {
				r = shmcfg__err(SHMCFG_E_CYCLE, "%s: alias cycle", s->opts[i].name);
				goto fail;
			}
		}
		b->alias_final[i] = f;
		const struct sopt *o = &s->opts[i], *t = &s->opts[f];
		if (o->type != t->type ||
		    (o->flags & SHMCFG_F_NULLABLE) != (t->flags & SHMCFG_F_NULLABLE)) {
			r = shmcfg__err(SHMCFG_E_SCHEMADEF, "%s: alias of %s must have its type %s%s",
					o->name, t->name, t->flags & SHMCFG_F_NULLABLE ? "optional " : "",
					shmcfg_type_name(t->type));
			goto fail;
		}
	}
	/* implications: "target=value;target2=value" */
	for (uint32_t i = 0; i < n; i++) {
		const char *spec = s->opts[i].implies;
		b->imp_first[i] = b->nimplies;
		if (!spec)
			continue;
		char *copy = strdup(spec), *save = NULL;
		if (!copy) {
			r = -ENOMEM;
			goto fail;
		}
		for (char *item = strtok_r(copy, ";", &save); item && !r;
		     item = strtok_r(NULL, ";", &save)) {
			char *eq = strchr(item, '=');
			while (isspace((unsigned char)*item))
				item++;
			if (!eq) {
				r = shmcfg__err(SHMCFG_E_SCHEMADEF, "%s: implies '%s' lacks '='",
						s->opts[i].name, item);
				break;
			}
			char *end = eq;
			while (end > item && isspace((unsigned char)end[-1]))
				end--;
			*end = 0;
			int t = schema_find(s, item);
			if (t < 0) {
				r = shmcfg__err(SHMCFG_E_SCHEMADEF, "%s: implies unknown option %s",
						s->opts[i].name, item);
				break;
			}
			uint32_t tf = b->alias_final[t];
			const struct sopt *to = &s->opts[tf];
			struct implies_ent *ie = realloc(b->implies, (b->nimplies + 1) * sizeof *ie);
			shmcfg_value *iv = ie ? realloc(b->implies_vals, (b->nimplies + 1) * sizeof *iv) : NULL;
			if (ie)
				b->implies = ie;
			if (!iv) {
				r = -ENOMEM;
				break;
			}
			b->implies_vals = iv;
			const char *vt = eq + 1;
			while (isspace((unsigned char)*vt))
				vt++;
			shmcfg_value v;
			r = shmcfg_value_parse(to->type, to->flags & SHMCFG_F_NULLABLE, vt, &v);
			if (!r) {
				r = value_check_def(to->name, to->type, to->flags, &to->min, &to->max,
						    &to->choices, &v);
				if (r) /* parsed, so v may own its text */
					shmcfg_value_clear(&v);
			}
			if (r == -ENOMEM)
				break;
			if (r) {
				r = shmcfg__err(SHMCFG_E_SCHEMADEF, "%s: implies %s: %s", s->opts[i].name,
						item, shmcfg_errdetail());
				break;
			}
			ie[b->nimplies] = (struct implies_ent){.target = tf};
			iv[b->nimplies++] = v;
			b->imp_n[i]++;
			indeg[tf]++;
		}
		free(copy);
		if (r)
			goto fail;
	}
	/* topological order (Kahn): impliers before their targets */
	uint32_t head = 0, tail = 0;
	for (uint32_t i = 0; i < n; i++)
		if (!indeg[i])
			b->topo[tail++] = i;
	while (head < tail) {
		uint32_t i = b->topo[head++];
		for (uint32_t k = b->imp_first[i]; k < b->imp_first[i] + b->imp_n[i]; k++)
			if (--indeg[b->implies[k].target] == 0)
				b->topo[tail++] = b->implies[k].target;
	}
	if (tail != n) {
		for (uint32_t i = 0; i < n; i++)
			if (indeg[i]) {
				r = shmcfg__err(SHMCFG_E_CYCLE, "%s: implication cycle", s->opts[i].name);
				break;
			}
		goto fail;
	}
	for (uint32_t i = 0; i < n; i++)
		b->order[i] = i;
	qsort_r(b->order, n, sizeof(uint32_t), cmp_by_name, s->opts);

	uint64_t str = 1; /* offset 0 is the empty string */
	for (uint32_t i = 0; i < n; i++) {
		const struct sopt *o = &s->opts[i];
		str += strlen(o->name) + 1 + strlen(o->doc) + 1;
		str += o->knob ? strlen(o->knob) + 1 : 0;
		str += o->deprecated ? strlen(o->deprecated) + 1 : 0;
		str += value_bytes(&o->env_default) + value_bytes(&o->env_force);
		str += value_bytes(&o->def) + value_bytes(&o->choices);
	}
	for (uint32_t k = 0; k < b->nimplies; k++)
		str += value_bytes(&b->implies_vals[k]);
	b->strings_bytes = str;
	uint32_t index_size = 16;
	while (index_size < 2 * n)
		index_size *= 2;
	b->bytes = sizeof(struct schema_hdr) + (uint64_t)n * sizeof(struct opt_desc) +
		   (uint64_t)b->nimplies * sizeof(struct implies_ent) +
		   (uint64_t)index_size * 4 + (uint64_t)n * 8 + str;
	b->bytes = (b->bytes + 63) & ~63ull;
	free(indeg);
	*ret = b;
	return 0;
fail:
	free(indeg);
	shmcfg__schema_built_free(b);
	return r;
}

uint64_t shmcfg__schema_bytes(const struct built_schema *b)
{
	return b->bytes;
}

uint64_t shmcfg__schema_strings_bytes(const struct built_schema *b)
{
	return b->strings_bytes;
}

uint32_t shmcfg__schema_nopts(const struct built_schema *b)
{
	return b->s->n;
}

struct writer {
	char *base;
	uint64_t pos;
};

static struct sref put_str(struct writer *w, const char *s)
{
	if (!s || !*s)
		return (struct sref){0, 0};
	size_t l = strlen(s);
	struct sref r = {(uint32_t)w->pos, (uint32_t)l};
	memcpy(w->base + w->pos, s, l + 1);
	w->pos += l + 1;
	return r;
}

/* Encode a value as a cell whose strings go to the writer's area (sized
 * beforehand by shmcfg__schema_build, so it cannot overflow). */
static struct shmcfg__cell put_value(struct writer *w, const shmcfg_value *v)
{
	struct shmcfg__cell c;
	(void)shmcfg__cell_encode(v, 0, w->base, UINT64_MAX, &w->pos, &c);
	return c;
}

static struct sref put_list(struct writer *w, const shmcfg_value *v, uint32_t *count)
{
	*count = (uint32_t)v->u.list.count;
	if (!v->u.list.count)
		return (struct sref){0, 0};
	struct shmcfg__cell c = put_value(w, v);
	return (struct sref){CELL_OFF(c.val), META_LEN(c.meta)};
}

/* Write the schema region; the schema hash covers it whole, so it names the
 * declaration order (handles are indices) as well as every attribute. */
void shmcfg__schema_write(const struct built_schema *b, void *dst, uint8_t hash_out[16])
{
	const shmcfg_schema *s = b->s;
	uint32_t n = s->n, index_size = 16;
	while (index_size < 2 * n)
		index_size *= 2;
	memset(dst, 0, b->bytes);
	struct schema_hdr *sh = dst;
	uint64_t pos = sizeof *sh;
	sh->nopts = n;
	sh->index_size = index_size;
	sh->nimplies = b->nimplies;
	sh->desc_off = pos;
	pos += (uint64_t)n * sizeof(struct opt_desc);
	sh->implies_off = pos;
	pos += (uint64_t)b->nimplies * sizeof(struct implies_ent);
	sh->index_off = pos;
	pos += (uint64_t)index_size * 4;
	sh->order_off = pos;
	pos += (uint64_t)n * 4;
	sh->topo_off = pos;
	pos += (uint64_t)n * 4;
	sh->strings_off = pos;
	sh->strings_size = b->strings_bytes;

	char *base = dst;
	struct opt_desc *desc = (struct opt_desc *)(base + sh->desc_off);
	struct implies_ent *imp = (struct implies_ent *)(base + sh->implies_off);
	uint32_t *index = (uint32_t *)(base + sh->index_off);
	struct writer w = {base + sh->strings_off, 1};
	memset(index, 0xff, (size_t)index_size * 4);
	for (uint32_t i = 0; i < n; i++) {
		const struct sopt *o = &s->opts[i];
		struct opt_desc *d = &desc[i];
		d->name = put_str(&w, o->name);
		d->doc = put_str(&w, o->doc);
		d->knob = put_str(&w, o->knob);
		d->deprecated = put_str(&w, o->deprecated);
		d->env_default = put_list(&w, &o->env_default, &d->n_env_default);
		d->env_force = put_list(&w, &o->env_force, &d->n_env_force);
		d->alias = b->alias[i];
		d->alias_final = b->alias_final[i];
		d->type = o->type;
		d->flags = o->flags | (o->knob ? DESC_F_HAS_KNOB : 0) |
			   (o->min.is_null ? 0 : DESC_F_HAS_MIN) | (o->max.is_null ? 0 : DESC_F_HAS_MAX);
		d->def = put_value(&w, &o->def);
		if (!o->min.is_null)
			d->min = put_value(&w, &o->min);
		if (!o->max.is_null)
			d->max = put_value(&w, &o->max);
		d->choices = put_value(&w, &o->choices);
		d->implies_first = b->imp_first[i];
		d->implies_n = b->imp_n[i];
		for (uint32_t k = d->implies_first; k < d->implies_first + d->implies_n; k++) {
			imp[k].target = b->implies[k].target;
			imp[k].value = put_value(&w, &b->implies_vals[k]);
		}
		uint32_t mask = index_size - 1;
		for (uint64_t h = name_hash(o->name, strlen(o->name));; h++)
			if (index[h & mask] == UINT32_MAX) {
				index[h & mask] = i;
				break;
			}
	}
	memcpy(base + sh->order_off, b->order, (size_t)n * 4);
	memcpy(base + sh->topo_off, b->topo, (size_t)n * 4);
	XXH128_hash_t hh = XXH3_128bits(dst, b->bytes);
	XXH128_canonical_t canon;
	XXH128_canonicalFromHash(&canon, hh);
	memcpy(hash_out, canon.digest, 16);
}

/* ------------------------------------------------------------------ */
/* Validation of a schema region (a private copy, see segment.c)       */
/* ------------------------------------------------------------------ */

static bool sref_ok(const shmcfg *h, struct sref r)
{
	return r.off < h->strings_size && r.len < h->strings_size - r.off &&
	       h->strings[r.off + r.len] == 0 && memchr(h->strings + r.off, 0, r.len) == NULL;
}

static bool list_ok(const shmcfg *h, struct sref r, uint32_t count)
{
	if (count == 0 || r.len == 0)
		return count == 0 && r.len == 0;
	if (r.off >= h->strings_size || r.len >= h->strings_size - r.off ||
	    h->strings[r.off + r.len] != 0 || h->strings[r.off + r.len - 1] != 0)
		return false;
	uint32_t c = 0;
	for (uint32_t i = 0; i < r.len; i++)
		c += h->strings[r.off + i] == 0;
	return c == count;
}

static bool cell_ok(const shmcfg *h, const struct shmcfg__cell *c, shmcfg_type type)
{
	shmcfg_value v;
	return META_TYPE(c->meta) == (unsigned)type &&
	       shmcfg__value_from_cell(c, h->strings, h->strings_size, &v) == 0;
}

/* Report a problem; the first one is kept for the error detail. */
#define PROBLEM(...)                                              \
	do {                                                      \
		snprintf(msg, 256, __VA_ARGS__);                  \
		if (fn)                                           \
			fn(msg, ud);                              \
		if (!bad++)                                       \
			memcpy(first, msg, 256);                  \
	} while (0)

static int schema_check(shmcfg *h, void (*fn)(const char *, void *), void *ud, char *msg, char *first)
{
	int bad = 0;
	const struct schema_hdr *sh = h->sch;
	uint64_t size = h->lay.schema_size, n = sh->nopts;
	if (n != h->lay.nopts || n == 0 || n > SEG_MAX_OPTS) {
		PROBLEM("schema: option count %llu disagrees with the header (%u)",
			(unsigned long long)n, h->lay.nopts);
		return bad;
	}
	if (sh->index_size < 2 * n || (sh->index_size & (sh->index_size - 1)))
		PROBLEM("schema: index size %u is invalid", sh->index_size);
	struct {
		uint64_t off, bytes;
		const char *what;
	} regions[] = {
		{sh->desc_off, n * sizeof(struct opt_desc), "descriptors"},
		{sh->implies_off, (uint64_t)sh->nimplies * sizeof(struct implies_ent), "implications"},
		{sh->index_off, (uint64_t)sh->index_size * 4, "index"},
		{sh->order_off, n * 4, "order"},
		{sh->topo_off, n * 4, "topological order"},
		{sh->strings_off, sh->strings_size, "strings"},
	};
	for (size_t i = 0; i < sizeof regions / sizeof regions[0]; i++)
		if (regions[i].off < sizeof *sh || regions[i].off > size ||
		    regions[i].bytes > size - regions[i].off || (regions[i].off & 3))
			PROBLEM("schema: %s region out of bounds", regions[i].what);
	if (sh->strings_size == 0)
		PROBLEM("schema: empty strings region");
	if (bad)
		return bad;
	const char *base = (const char *)sh;
	h->desc = (const struct opt_desc *)(base + sh->desc_off);
	h->implies = (const struct implies_ent *)(base + sh->implies_off);
	h->index = (const uint32_t *)(base + sh->index_off);
	h->order = (const uint32_t *)(base + sh->order_off);
	h->topo = (const uint32_t *)(base + sh->topo_off);
	h->strings = base + sh->strings_off;
	h->strings_size = sh->strings_size;
	if (h->strings[h->strings_size - 1] != 0)
		PROBLEM("schema: strings region does not end in NUL");
	if (bad)
		return bad;
	for (uint32_t i = 0; i < n; i++) {
		const struct opt_desc *d = &h->desc[i];
		if (!sref_ok(h, d->name) || !sref_ok(h, d->doc) || !sref_ok(h, d->knob) ||
		    !sref_ok(h, d->deprecated)) {
			PROBLEM("schema: option %u has a bad string reference", i);
			continue;
		}
		const char *name = sstr(h, d->name);
		if (!shmcfg_type_name(d->type))
			PROBLEM("%s: unknown type %u", name, d->type);
		else if (!cell_ok(h, &d->def, d->type) || !cell_ok(h, &d->choices, SHMCFG_LIST) ||
			 ((d->flags & DESC_F_HAS_MIN) && !cell_ok(h, &d->min, d->type)) ||
			 ((d->flags & DESC_F_HAS_MAX) && !cell_ok(h, &d->max, d->type)))
			PROBLEM("%s: bad default, range or choices", name);
		if (!list_ok(h, d->env_default, d->n_env_default) ||
		    !list_ok(h, d->env_force, d->n_env_force))
			PROBLEM("%s: bad environment variable list", name);
		if ((d->alias != SHMCFG_NO_OPT && d->alias >= n) || d->alias_final >= n ||
		    h->desc[d->alias_final].alias != SHMCFG_NO_OPT ||
		    h->desc[d->alias_final].type != d->type)
			PROBLEM("%s: bad alias", name);
		if (d->implies_first > sh->nimplies || d->implies_n > sh->nimplies - d->implies_first)
			PROBLEM("%s: implications out of bounds", name);
		if (h->order[i] >= n || h->topo[i] >= n)
			PROBLEM("schema: order entry %u out of range", i);
	}
	for (uint32_t k = 0; k < sh->nimplies; k++)
		if (h->implies[k].target >= n ||
		    !cell_ok(h, &h->implies[k].value, h->desc[h->implies[k].target].type))
			PROBLEM("schema: implication %u is invalid", k);
	for (uint32_t k = 0; k < sh->index_size; k++)
		if (h->index[k] != UINT32_MAX && h->index[k] >= n)
			PROBLEM("schema: index entry %u out of range", k);
	if (bad)
		return bad;
	/* topo must be a permutation that puts each implier before its targets,
	 * else a commit could resolve a target before its implier */
	uint32_t *pos = malloc(n * sizeof *pos);
	if (!pos) {
		PROBLEM("out of memory checking the schema");
		return bad;
	}
	memset(pos, 0xff, n * sizeof *pos);
	for (uint32_t i = 0; i < n; i++) {
		if (pos[h->topo[i]] != UINT32_MAX)
			PROBLEM("schema: topological order repeats option %u", h->topo[i]);
		pos[h->topo[i]] = i;
	}
	for (uint32_t i = 0; !bad && i < n; i++)
		for (uint32_t k = 0; k < h->desc[i].implies_n; k++)
			if (pos[h->implies[h->desc[i].implies_first + k].target] <= pos[i])
				PROBLEM("%s: implication order is broken", sstr(h, h->desc[i].name));
	free(pos);
	return bad;
}
#undef PROBLEM

/*
 * Check the schema copy (h->sch ...) completely: every later use trusts it.
 * Returns the number of problems; each is reported through fn, and the first
 * becomes the error detail (the checks overwrite the detail as they go).
 */
int shmcfg__schema_validate(shmcfg *h, bool deep, void (*fn)(const char *, void *), void *ud)
{
	(void)deep; /* the schema is small and read once: always checked whole */
	char msg[256], first[256] = "";
	int bad = schema_check(h, fn, ud, msg, first);
	if (bad)
		shmcfg__err(SHMCFG_E_CORRUPT, "%s: %s", h->name, first);
	return bad;
}

/* ------------------------------------------------------------------ */
/* Lookup and description                                             */
/* ------------------------------------------------------------------ */

int shmcfg_lookup(const shmcfg *h, const char *name, shmcfg_opt *ret)
{
	SHMCFG_API_ENTRY;
	assert_return(h && name && ret, -EINVAL);
	size_t len = strlen(name);
	uint32_t mask = h->sch->index_size - 1;
	uint64_t hv = name_hash(name, len);
	for (uint32_t probe = 0; probe <= mask; probe++, hv++) {
		uint32_t id = h->index[hv & mask];
		if (id == UINT32_MAX)
			break;
		const struct opt_desc *d = &h->desc[id];
		if (d->name.len == len && memcmp(sstr(h, d->name), name, len) == 0) {
			shmcfg__warn_deprecated(h, id);
			*ret = id;
			return 0;
		}
	}
	return shmcfg__err(SHMCFG_E_NOOPT, "%s: no such option in segment %s", name, h->name);
}

int shmcfg_opt_info(const shmcfg *h, shmcfg_opt opt, shmcfg_optinfo *ret)
{
	SHMCFG_API_ENTRY;
	assert_return(h && ret, -EINVAL);
	if (opt >= h->lay.nopts)
		return shmcfg__err(SHMCFG_E_NOOPT, "option handle %u out of range", opt);
	const struct opt_desc *d = &h->desc[opt];
	memset(ret, 0, sizeof *ret);
	ret->name = sstr(h, d->name);
	ret->type = d->type;
	ret->flags = d->flags & 0xffff;
	ret->doc = sstr(h, d->doc);
	ret->env_default = sstr(h, d->env_default);
	ret->n_env_default = d->n_env_default;
	ret->env_force = sstr(h, d->env_force);
	ret->n_env_force = d->n_env_force;
	ret->knob = d->flags & DESC_F_HAS_KNOB ? sstr(h, d->knob) : NULL;
	ret->deprecated = d->flags & SHMCFG_F_DEPRECATED ? sstr(h, d->deprecated) : NULL;
	ret->alias = d->alias;
	ret->alias_final = d->alias_final;
	ret->has_min = d->flags & DESC_F_HAS_MIN;
	ret->has_max = d->flags & DESC_F_HAS_MAX;
	/* the cells were validated at attach */
	if (ret->has_min)
		(void)shmcfg__value_from_cell(&d->min, h->strings, h->strings_size, &ret->min);
	if (ret->has_max)
		(void)shmcfg__value_from_cell(&d->max, h->strings, h->strings_size, &ret->max);
	(void)shmcfg__value_from_cell(&d->choices, h->strings, h->strings_size, &ret->choices);
	(void)shmcfg__value_from_cell(&d->def, h->strings, h->strings_size, &ret->def);
	ret->n_implies = d->implies_n;
	return 0;
}

int shmcfg_opt_implies(const shmcfg *h, shmcfg_opt opt, size_t i, shmcfg_opt *target,
		       shmcfg_value *value)
{
	SHMCFG_API_ENTRY;
	assert_return(h && target && value, -EINVAL);
	if (opt >= h->lay.nopts)
		return shmcfg__err(SHMCFG_E_NOOPT, "option handle %u out of range", opt);
	const struct opt_desc *d = &h->desc[opt];
	if (i >= d->implies_n)
		return -ERANGE;
	const struct implies_ent *e = &h->implies[d->implies_first + i];
	*target = e->target;
	return shmcfg__value_from_cell(&e->value, h->strings, h->strings_size, value);
}

/* Validate a value for an option of an attached segment. */
int shmcfg__value_check(const shmcfg *h, shmcfg_opt opt, const shmcfg_value *v)
{
	const struct opt_desc *d = &h->desc[opt];
	shmcfg_value min = {.is_null = true}, max = {.is_null = true}, choices;
	if (d->flags & DESC_F_HAS_MIN)
		(void)shmcfg__value_from_cell(&d->min, h->strings, h->strings_size, &min);
	if (d->flags & DESC_F_HAS_MAX)
		(void)shmcfg__value_from_cell(&d->max, h->strings, h->strings_size, &max);
	(void)shmcfg__value_from_cell(&d->choices, h->strings, h->strings_size, &choices);
	return value_check_def(sstr(h, d->name), d->type, d->flags, &min, &max, &choices, v);
}

/* The embedded default: torch.compiler.config and the torch._dynamo.config
 * options its aliases point to (lib/default_schema.c, generated). */
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

int shmcfg_verify_handles(const shmcfg *h, const char *const *names, const shmcfg_type *types,
			  size_t n)
{
	SHMCFG_API_ENTRY;
	assert_return(h && (names || !n) && (types || !n), -EINVAL);
	if (n > h->lay.nopts)
		return shmcfg__err(SHMCFG_E_SCHEMA, "%s: has %u options, the program expects %zu",
				   h->name, h->lay.nopts, n);
	for (size_t i = 0; i < n; i++) {
		const struct opt_desc *d = &h->desc[i];
		if (strcmp(sstr(h, d->name), names[i]) != 0)
			return shmcfg__err(SHMCFG_E_SCHEMA, "%s: option %zu is %s, the program expects %s",
					   h->name, i, sstr(h, d->name), names[i]);
		if (d->type != (uint32_t)types[i])
			return shmcfg__err(SHMCFG_E_SCHEMA, "%s: %s is %s, the program expects %s", h->name,
					   names[i], shmcfg_type_name(d->type),
					   shmcfg_type_name(types[i]) ?: "?");
	}
	return 0;
}
