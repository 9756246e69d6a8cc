/* SPDX-License-Identifier: MIT */
/*
 * Schema files written: a schema as YAML, format 1 (doc/schema-format.md),
 * that schemafile.c reads back to the same schema hash; and an attached
 * segment's schema declared again as a shmcfg_schema, to write or to create
 * a segment like it. The one writer of schema files: shmctl schema, the
 * cluster agent's copy in etcd and the Python binding (shmcfg-import) call
 * it, so a file reads the same whoever wrote it.
 */
#include "internal.h"
#include "schema.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

/* ------------------------------------------------------------------ */
/* The text                                                           */
/* ------------------------------------------------------------------ */

/* The code point of the UTF-8 sequence at s (valid: the library checked it),
 * and its length in *n. */
static uint32_t utf8_at(const unsigned char *s, size_t *n)
{
	if (s[0] < 0x80)
		return *n = 1, s[0];
	if (s[0] < 0xe0)
		return *n = 2, (uint32_t)(s[0] & 0x1f) << 6 | (s[1] & 0x3f);
	if (s[0] < 0xf0)
		return *n = 3, (uint32_t)(s[0] & 0x0f) << 12 | (uint32_t)(s[1] & 0x3f) << 6 | (s[2] & 0x3f);
	return *n = 4, (uint32_t)(s[0] & 0x07) << 18 | (uint32_t)(s[1] & 0x3f) << 12 |
			       (uint32_t)(s[2] & 0x3f) << 6 | (s[3] & 0x3f);
}

/* What YAML cannot hold as it is (not "printable", or a line break inside
 * a scalar): C0 and C1 controls, DEL, U+2028/9, the BOM, U+FFFE/F. */
static bool unprintable(uint32_t c)
{
	return c < 0x20 || (c >= 0x7f && c <= 0x9f) || c == 0x2028 || c == 0x2029 || c == 0xfeff ||
	       c == 0xfffe || c == 0xffff;
}

/* A double-quoted scalar: the escapes YAML needs, UTF-8 kept as it is. */
static void put_dq(struct shmcfg__text *b, const char *s, size_t len)
{
	shmcfg__text_put(b, "\"");
	for (size_t i = 0, n; i < len; i += n) {
		uint32_t c = utf8_at((const unsigned char *)s + i, &n);
		if (n > len - i) /* cut short: not from the library, but never read past */
			break;
		if (c == '"' || c == '\\')
			shmcfg__text_printf(b, "\\%c", (char)c);
		else if (c == '\n' || c == '\t' || c == '\r')
			shmcfg__text_put(b, c == '\n' ? "\\n" : c == '\t' ? "\\t" : "\\r");
		else if (c < 0x20 || (c >= 0x7f && c <= 0x9f))
			shmcfg__text_printf(b, "\\x%02x", (unsigned)c);
		else if (unprintable(c))
			shmcfg__text_printf(b, "\\u%04x", (unsigned)c);
		else
			shmcfg__text_putn(b, s + i, n);
	}
	shmcfg__text_put(b, "\"");
}

/* A name or an environment variable: plain when YAML reads it back as that
 * string (a dotted name that is not one of YAML 1.1's booleans or null),
 * else double-quoted. */
static void put_name(struct shmcfg__text *b, const char *s)
{
	static const char *const words[] = {"y", "yes", "n", "no", "true", "false", "on", "off", "null"};
	bool ok = *s != 0, start = true;
	for (const char *p = s; ok && *p; p++) {
		if (*p == '.')
			ok = !start, start = true;
		else
			ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_' ||
			     (!start && *p >= '0' && *p <= '9'),
			start = false;
	}
	ok = ok && !start;
	for (size_t i = 0; ok && i < sizeof words / sizeof words[0]; i++)
		ok = strcasecmp(s, words[i]) != 0;
	if (ok)
		shmcfg__text_put(b, s);
	else
		put_dq(b, s, strlen(s));
}

/* A float in the shortest text that reads back as it, spelled as Python's
 * repr() (positional for exponents -4 to 15), with a '.' in the mantissa so
 * that YAML 1.1 readers see a float too; YAML's .nan and .inf. */
static void put_float(struct shmcfg__text *b, double f)
{
	if (isnan(f) || isinf(f)) {
		shmcfg__text_put(b, isnan(f) ? ".nan" : f > 0 ? ".inf" : "-.inf");
		return;
	}
	char t[40], digits[24];
	int prec = 0;
	for (; prec < 17; prec++) {
		snprintf(t, sizeof t, "%.*e", prec, fabs(f));
		if (strtod(t, NULL) == fabs(f))
			break;
	}
	/* t is "d.ddde[+-]XX": its digits and the decimal point's place */
	size_t nd = 0;
	char *e = strchr(t, 'e');
	for (char *p = t; p < e; p++)
		if (*p != '.')
			digits[nd++] = *p;
	digits[nd] = 0;
	int decpt = atoi(e + 1) + 1;
	if (signbit(f))
		shmcfg__text_put(b, "-");
	if (decpt > -4 && decpt <= 16) {
		if (decpt <= 0) {
			shmcfg__text_put(b, "0.");
			for (int i = decpt; i < 0; i++)
				shmcfg__text_put(b, "0");
			shmcfg__text_put(b, digits);
		} else if ((size_t)decpt >= nd) {
			shmcfg__text_put(b, digits);
			for (size_t i = nd; i < (size_t)decpt; i++)
				shmcfg__text_put(b, "0");
			shmcfg__text_put(b, ".0");
		} else {
			shmcfg__text_putn(b, digits, (size_t)decpt);
			shmcfg__text_put(b, ".");
			shmcfg__text_put(b, digits + decpt);
		}
		return;
	}
	shmcfg__text_putn(b, digits, 1);
	shmcfg__text_put(b, ".");
	shmcfg__text_put(b, nd > 1 ? digits + 1 : "0");
	shmcfg__text_printf(b, "e%c%02d", decpt - 1 < 0 ? '-' : '+', abs(decpt - 1));
}

static void put_items(struct shmcfg__text *b, const char *items, size_t n, bool names)
{
	shmcfg__text_put(b, "[");
	for (size_t i = 0; i < n; i++) {
		shmcfg__text_put(b, i ? ", " : "");
		if (names)
			put_name(b, items);
		else
			put_dq(b, items, strlen(items));
		items += strlen(items) + 1;
	}
	shmcfg__text_put(b, "]");
}

/* A value in the spelling schemafile.c resolves by the option's type. */
static void put_value(struct shmcfg__text *b, const shmcfg_value *v)
{
	if (v->is_null) {
		shmcfg__text_put(b, "null");
		return;
	}
	switch (v->type) {
	case SHMCFG_BOOL:
		shmcfg__text_put(b, v->u.b ? "true" : "false");
		break;
	case SHMCFG_INT:
		shmcfg__text_printf(b, "%" PRId64, v->u.i);
		break;
	case SHMCFG_FLOAT:
		put_float(b, v->u.f);
		break;
	case SHMCFG_STR:
		put_dq(b, v->u.str.ptr, v->u.str.len);
		break;
	case SHMCFG_LIST:
	case SHMCFG_SET:
		put_items(b, v->u.list.items, v->u.list.count, false);
		break;
	}
}

/* Choices, kept as canonical texts: each as a value of the option's type
 * (a float's text is strtod's, exactly). */
static void put_choices(struct shmcfg__text *b, shmcfg_type type, const shmcfg_value *choices)
{
	shmcfg__text_put(b, "[");
	size_t i = 0;
	for (const char *c = NULL; (c = shmcfg_list_next(choices, c)); i++) {
		shmcfg__text_put(b, i ? ", " : "");
		if (type == SHMCFG_FLOAT)
			put_float(b, strtod(c, NULL));
		else if (type == SHMCFG_INT)
			shmcfg__text_put(b, c);
		else
			put_dq(b, c, strlen(c));
	}
	shmcfg__text_put(b, "]");
}

/* Whether a `|-` literal block gives back exactly this text: no leading
 * blank or line break (the block's indentation comes from its first line),
 * no final line break, no trailing blanks, nothing unprintable but '\n'. */
static bool literal_ok(const char *doc)
{
	if (!*doc || *doc == ' ' || *doc == '\n')
		return false;
	size_t len = strlen(doc);
	if (doc[len - 1] == '\n')
		return false;
	for (size_t i = 0, n; i < len; i += n) {
		uint32_t c = utf8_at((const unsigned char *)doc + i, &n);
		if (c == ' ' && (doc[i + 1] == '\n' || !doc[i + 1]))
			return false;
		if (c != '\n' && unprintable(c))
			return false;
	}
	return true;
}

static void put_doc(struct shmcfg__text *b, const char *doc)
{
	if (!literal_ok(doc)) {
		shmcfg__text_put(b, "    doc: ");
		put_dq(b, doc, strlen(doc));
		shmcfg__text_put(b, "\n");
		return;
	}
	shmcfg__text_put(b, "    doc: |-\n");
	for (const char *p = doc;;) {
		size_t n = strcspn(p, "\n");
		if (n) { /* an empty line stays empty: no trailing blanks */
			shmcfg__text_put(b, "      ");
			shmcfg__text_putn(b, p, n);
		}
		shmcfg__text_put(b, "\n");
		if (!p[n])
			break;
		p += n + 1;
	}
}

/* A text that YAML reads back as it is from a plain scalar in a flow
 * mapping (no indicator, no blank at either end, nothing unprintable). */
static bool plain_ok(const char *t)
{
	if (!*t || strchr(" ?:,[]{}#&*!|>'\"%@`", *t) || (*t == '-' && (!t[1] || t[1] == ' ')))
		return false;
	size_t len = strlen(t);
	if (t[len - 1] == ' ' || strpbrk(t, ":#,[]{}"))
		return false;
	/* what schemafile.c reads as null: its text is "none" */
	if (!strcmp(t, "null") || !strcmp(t, "Null") || !strcmp(t, "NULL"))
		return false;
	for (size_t i = 0, n; i < len; i += n)
		if (unprintable(utf8_at((const unsigned char *)t + i, &n)))
			return false;
	return true;
}

/* The final option an implication's target names, NULL if it is not
 * declared or its aliases loop (then the schema does not build). */
static const struct sopt *final_opt(const shmcfg_schema *s, const char *name)
{
	int t = shmcfg__schema_find(s, name);
	for (uint32_t steps = 0; t >= 0 && s->opts[t].alias && steps <= s->n; steps++)
		t = shmcfg__schema_find(s, s->opts[t].alias);
	return t >= 0 && !s->opts[t].alias ? &s->opts[t] : NULL;
}

/*
 * An implied value, given as shmcfg_value_parse() text. Of a declared
 * target: parsed by its type, as shmcfg__schema_build() will, and written as
 * a value of it (the round trip of every value). Of a target not declared (a
 * partial schema that shmcfg-import writes, to be merged): a JSON string or
 * list as YAML's, another text plain where YAML gives it back as it is;
 * else double-quoted (a string then: the rare text that cannot round-trip).
 */
static void put_implied(struct shmcfg__text *b, const shmcfg_schema *s, const char *target, const char *vt)
{
	const struct sopt *t = final_opt(s, target);
	shmcfg_value v;
	int r = -EINVAL;
	if (t)
		r = shmcfg_value_parse(t->type, t->flags & SHMCFG_F_NULLABLE, vt, &v);
	else if (*vt == '"' || *vt == '[')
		r = shmcfg_value_parse(*vt == '"' ? SHMCFG_STR : SHMCFG_LIST, false, vt, &v);
	if (r == -ENOMEM) {
		b->err = r;
		return;
	}
	if (r && (t || *vt == '"' || *vt == '['))
		shmcfg__clear_err(); /* a refusal written as it is: not this call's error */
	if (!r) {
		put_value(b, &v);
		shmcfg_value_clear(&v);
	} else if (!strcmp(vt, "none")) /* what schemafile.c makes of null */
		shmcfg__text_put(b, "null");
	else if (plain_ok(vt))
		shmcfg__text_put(b, vt);
	else
		put_dq(b, vt, strlen(vt));
}

/* An implies text "a=v;b=w" as a flow mapping: its items as
 * shmcfg__schema_build() cuts them (shmcfg__implies_item: empty items
 * skipped, blanks around the name and before the value dropped); targets as
 * declared (an alias stays one). */
static void put_implies(struct shmcfg__text *b, const shmcfg_schema *s, const char *name, const char *spec)
{
	char *copy = shmcfg__strdup(spec), *rest = copy;
	if (!copy) {
		b->err = shmcfg__nomem();
		return;
	}
	int k = 0;
	for (char *item; (item = shmcfg__implies_item(&rest)); k++) {
		char *eq = strchr(item, '=');
		while (isspace((unsigned char)*item))
			item++;
		if (!eq) { /* no file says it: the builder refuses it */
			b->err = shmcfg__err(SHMCFG_E_SCHEMADEF, "%s: implies '%s' lacks '='", name, item);
			break;
		}
		shmcfg__text_put(b, k ? ", " : "    implies: {");
		char *end = eq;
		while (end > item && isspace((unsigned char)end[-1]))
			end--;
		*end = 0;
		const char *vt = eq + 1;
		while (isspace((unsigned char)*vt))
			vt++;
		put_name(b, item);
		shmcfg__text_put(b, ": ");
		put_implied(b, s, item, vt);
	}
	shmcfg__text_put(b, k && !b->err ? "}\n" : "");
	shmcfg__free(copy);
}

static void put_option(struct shmcfg__text *b, const shmcfg_schema *s, uint32_t i)
{
	const struct sopt *o = &s->opts[i];
	shmcfg__text_put(b, "  ");
	put_name(b, o->name);
	shmcfg__text_put(b, ":\n    type: ");
	shmcfg__text_put(b, shmcfg_type_name(o->type));
	shmcfg__text_put(b, o->flags & SHMCFG_F_NULLABLE ? "\n    nullable: true\n" : "\n");
	if (o->alias) { /* it carries type, flags, doc and a deprecation only */
		shmcfg__text_put(b, "    alias: ");
		put_name(b, o->alias);
		shmcfg__text_put(b, "\n");
	} else {
		if (o->has_def) {
			shmcfg__text_put(b, "    default: ");
			put_value(b, &o->def);
			shmcfg__text_put(b, "\n");
		}
		const char *lists[] = {"env_default", "env_force"};
		const shmcfg_value *lv[] = {&o->env_default, &o->env_force};
		for (int k = 0; k < 2; k++)
			if (lv[k]->u.list.count) {
				shmcfg__text_printf(b, "    %s: ", lists[k]);
				put_items(b, lv[k]->u.list.items, lv[k]->u.list.count, true);
				shmcfg__text_put(b, "\n");
			}
		if (o->knob) {
			shmcfg__text_put(b, "    knob: ");
			put_dq(b, o->knob, strlen(o->knob));
			shmcfg__text_put(b, "\n");
		}
	}
	if (o->implies)
		put_implies(b, s, o->name, o->implies);
	if (o->deprecated) {
		shmcfg__text_put(b, "    deprecated: ");
		put_dq(b, o->deprecated, strlen(o->deprecated));
		shmcfg__text_put(b, "\n");
	}
	static const struct {
		unsigned bit;
		const char *line;
	} flags[] = {{SHMCFG_F_HASH_IGNORED, "    hash_ignored: true\n"},
		     {SHMCFG_F_SAVE_IGNORED, "    save_ignored: true\n"},
		     {SHMCFG_F_PRIVATE, "    private: true\n"}};
	for (size_t k = 0; k < sizeof flags / sizeof flags[0]; k++)
		if (o->flags & flags[k].bit)
			shmcfg__text_put(b, flags[k].line);
	const char *bounds[] = {"min", "max"};
	const shmcfg_value *bv[] = {&o->min, &o->max};
	for (int k = 0; k < 2; k++)
		if (!bv[k]->is_null) {
			shmcfg__text_printf(b, "    %s: ", bounds[k]);
			put_value(b, bv[k]);
			shmcfg__text_put(b, "\n");
		}
	if (o->choices.u.list.count) {
		shmcfg__text_put(b, "    choices: ");
		put_choices(b, o->type, &o->choices);
		shmcfg__text_put(b, "\n");
	}
	if (o->doc && *o->doc)
		put_doc(b, o->doc);
}

/* The header comment, each line after "# ": refused if a line of it could
 * end early (a YAML line break) or hold what YAML cannot. */
static int put_comment(struct shmcfg__text *b, const char *comment)
{
	size_t len = strlen(comment);
	if (!shmcfg__utf8_valid(comment, len))
		return shmcfg__err(-EINVAL, "the schema file's comment is not valid UTF-8");
	for (size_t i = 0, n; i < len; i += n) {
		uint32_t c = utf8_at((const unsigned char *)comment + i, &n);
		if (c != '\n' && c != '\t' && unprintable(c))
			return shmcfg__err(-EINVAL, "the schema file's comment holds character U+%04X",
					   (unsigned)c);
	}
	for (const char *p = comment;;) {
		size_t n = strcspn(p, "\n");
		shmcfg__text_put(b, n ? "# " : "#");
		shmcfg__text_putn(b, p, n);
		shmcfg__text_put(b, "\n");
		if (!p[n])
			return 0;
		p += n + 1;
	}
}

int shmcfg_schema_write_yaml(const shmcfg_schema *s, const char *comment, char **ret)
{
	SHMCFG_API_ENTRY;
	assert_return(s && ret, -EINVAL);
	/* as declared, sound or not: shmcfg-import writes partial schemas, to
	 * be merged, whose references are checked when one is built */
	int r = 0;
	struct shmcfg__text b = {0};
	shmcfg__text_put(&b, "# shmcfg schema (format 1)\n");
	if (comment && *comment)
		r = put_comment(&b, comment);
	shmcfg__text_put(&b, s->n ? "format: 1\noptions:\n" : "format: 1\noptions: {}\n");
	for (uint32_t i = 0; !r && i < s->n; i++)
		put_option(&b, s, i);
	if (!r)
		r = b.err;
	if (r) {
		shmcfg__free(b.p);
		return r;
	}
	*ret = b.p;
	return 0;
}

/* ------------------------------------------------------------------ */
/* A segment's schema, declared again                                 */
/* ------------------------------------------------------------------ */

/* A value as shmcfg_value_parse() reads it back exactly: none, or its
 * shmcfg_value_format() text (strings as JSON, floats as strtod reads). */
static int parse_text(const shmcfg_value *v, char **ret)
{
	if (v->is_null) {
		*ret = shmcfg__strdup("none");
		return *ret ? 0 : shmcfg__nomem();
	}
	return shmcfg_value_format(v, ret);
}

/* n NUL-separated names as a JSON array (NULL: none) */
static int names_text(const char *items, size_t n, char **ret)
{
	*ret = NULL;
	if (!n)
		return 0;
	shmcfg_value v = {.type = SHMCFG_LIST, .u.list = {.items = items, .count = n}};
	for (size_t i = 0; i < n; i++)
		v.u.list.bytes += strlen(items + v.u.list.bytes) + 1;
	return shmcfg_value_json(&v, ret);
}

/* "target=value;..." of option o's implications (NULL: none) */
static int implies_text(const shmcfg *h, shmcfg_opt o, size_t n, char **ret)
{
	struct shmcfg__text b = {0};
	int r = 0;
	for (size_t k = 0; !r && k < n; k++) {
		shmcfg_opt target;
		shmcfg_value v;
		shmcfg_optinfo ti;
		char *t = NULL;
		if (!(r = shmcfg_opt_implies(h, o, k, &target, &v)) && !(r = shmcfg_opt_info(h, target, &ti)) &&
		    !(r = parse_text(&v, &t))) {
			shmcfg__text_put(&b, k ? ";" : "");
			shmcfg__text_put(&b, ti.name);
			shmcfg__text_put(&b, "=");
			shmcfg__text_put(&b, t);
		}
		shmcfg__free(t);
	}
	if (!r)
		r = b.err;
	if (r)
		shmcfg__free(b.p), b.p = NULL;
	*ret = b.p;
	return r;
}

/* Option o declared again into s, through shmcfg_schema_add() as a file's
 * would be: the same checks, the same stored form. */
static int declare(const shmcfg *h, shmcfg_opt o, shmcfg_schema *s)
{
	shmcfg_optinfo oi, ai;
	int r = shmcfg_opt_info(h, o, &oi);
	if (r)
		return r;
	shmcfg_optdef d = {.name = oi.name, .type = oi.type, .doc = oi.doc, .knob = oi.knob,
			   .deprecated = oi.deprecated,
			   .flags = oi.flags & (SHMCFG_F_NULLABLE | SHMCFG_F_HASH_IGNORED |
						SHMCFG_F_SAVE_IGNORED | SHMCFG_F_PRIVATE)};
	char *t[7] = {0}; /* def, min, max, choices, env_default, env_force, implies */
	if (oi.alias != SHMCFG_NO_OPT) {
		if (!(r = shmcfg_opt_info(h, oi.alias, &ai)))
			d.alias = ai.name;
	} else {
		r = parse_text(&oi.def, &t[0]);
		if (!r && oi.has_min)
			r = parse_text(&oi.min, &t[1]);
		if (!r && oi.has_max)
			r = parse_text(&oi.max, &t[2]);
		if (!r && oi.choices.u.list.count)
			r = shmcfg_value_json(&oi.choices, &t[3]);
		if (!r)
			r = names_text(oi.env_default, oi.n_env_default, &t[4]);
		if (!r)
			r = names_text(oi.env_force, oi.n_env_force, &t[5]);
		if (!r && oi.n_implies)
			r = implies_text(h, o, oi.n_implies, &t[6]);
		d.def = t[0], d.min = t[1], d.max = t[2], d.choices = t[3];
		d.env_default = t[4], d.env_force = t[5], d.implies = t[6];
	}
	if (!r)
		r = shmcfg_schema_add(s, &d);
	for (int k = 0; k < 7; k++)
		shmcfg__free(t[k]);
	/* a text the schema cannot hold (one that is no UTF-8, which a library
	 * before 0.11 took): the message names the option */
	size_t nl = strlen(oi.name);
	if (r && r != -ENOMEM && (strncmp(shmcfg_errdetail(), oi.name, nl) || shmcfg_errdetail()[nl] != ':')) {
		char why[300];
		snprintf(why, sizeof why, "%s", shmcfg_errdetail());
		r = shmcfg__err(r == -EINVAL ? SHMCFG_E_SCHEMADEF : r, "%s: %s", oi.name, why);
	}
	return r;
}

int shmcfg_schema_of(const shmcfg *h, shmcfg_schema **ret)
{
	SHMCFG_API_ENTRY;
	assert_return(h && ret, -EINVAL);
	shmcfg_schema *s;
	int r = shmcfg_schema_new(&s);
	for (shmcfg_opt o = 0; !r && o < h->lay.nopts; o++)
		r = declare(h, o, s);
	if (r) {
		shmcfg_schema_free(s);
		return r;
	}
	*ret = s;
	return 0;
}
