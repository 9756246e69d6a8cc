/* SPDX-License-Identifier: MIT */
/*
 * A segment's schema written back as a schema file (YAML, format 1), for
 * `shmctl schema` and for the copy each agent keeps in etcd (P schema/<hash>),
 * from which the cluster commands validate values on a host without the
 * segment. Loaded with shmcfg_schema_load_text(), it gives a segment of the
 * same schema hash: every attribute the loader reads is written, values in
 * the spelling it reads back exactly (strings and names as JSON string
 * literals, which YAML's double-quoted scalars are a superset of; floats
 * with 17 significant digits; YAML's .nan and .inf).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schema-text.h"

/* A string as a JSON (and YAML double-quoted) literal. */
static void put_str(FILE *f, const char *s, size_t len)
{
	json_t *j = json_stringn(s, len);
	char *t = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
	fputs(t ? t : "\"\"", f);
	if (!t)
		fputs("\x01", f); /* out of memory: poisons the text, which the caller checks */
	free(t);
	json_decref(j);
}

static void put_list(FILE *f, const char *items, size_t n)
{
	fputc('[', f);
	for (size_t i = 0; i < n; i++) {
		fputs(i ? ", " : "", f);
		put_str(f, items, strlen(items));
		items += strlen(items) + 1;
	}
	fputc(']', f);
}

/* A value in the spelling the loader resolves by the option's type. */
static void put_value(FILE *f, const shmcfg_value *v)
{
	if (v->is_null) {
		fputs("null", f);
		return;
	}
	switch (v->type) {
	case SHMCFG_BOOL:
		fputs(v->u.b ? "true" : "false", f);
		break;
	case SHMCFG_INT:
		fprintf(f, "%" PRId64, v->u.i);
		break;
	case SHMCFG_FLOAT:
		if (isnan(v->u.f))
			fputs(".nan", f);
		else if (isinf(v->u.f))
			fputs(v->u.f < 0 ? "-.inf" : ".inf", f);
		else
			fprintf(f, "%.17g", v->u.f);
		break;
	case SHMCFG_STR:
		put_str(f, v->u.str.ptr, v->u.str.len);
		break;
	case SHMCFG_LIST:
	case SHMCFG_SET:
		put_list(f, v->u.list.items, v->u.list.count);
		break;
	}
}

static int put_option(FILE *f, const shmcfg *h, shmcfg_opt o)
{
	shmcfg_optinfo oi;
	int r = shmcfg_opt_info(h, o, &oi);
	if (r)
		return r;
	fprintf(f, "  %s:\n    type: %s\n", oi.name, shmcfg_type_name(oi.type));
	static const struct {
		unsigned bit;
		const char *key;
	} flags[] = {{SHMCFG_F_NULLABLE, "nullable"},
		     {SHMCFG_F_HASH_IGNORED, "hash_ignored"},
		     {SHMCFG_F_SAVE_IGNORED, "save_ignored"},
		     {SHMCFG_F_PRIVATE, "private"}};
	for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
		if (oi.flags & flags[i].bit)
			fprintf(f, "    %s: true\n", flags[i].key);
	if (oi.alias != SHMCFG_NO_OPT) { /* the loader takes type, flags and doc of an alias */
		shmcfg_optinfo ai;
		if ((r = shmcfg_opt_info(h, oi.alias, &ai)))
			return r;
		fprintf(f, "    alias: %s", ai.name);
	} else {
		fputs("    default: ", f);
		put_value(f, &oi.def);
	}
	if (oi.has_min) {
		fputs("\n    min: ", f);
		put_value(f, &oi.min);
	}
	if (oi.has_max) {
		fputs("\n    max: ", f);
		put_value(f, &oi.max);
	}
	if (oi.choices.u.list.count) {
		fputs("\n    choices: ", f);
		put_list(f, oi.choices.u.list.items, oi.choices.u.list.count);
	}
	if (oi.n_env_default) {
		fputs("\n    env_default: ", f);
		put_list(f, oi.env_default, oi.n_env_default);
	}
	if (oi.n_env_force) {
		fputs("\n    env_force: ", f);
		put_list(f, oi.env_force, oi.n_env_force);
	}
	const char *texts[][2] = {{"knob", oi.knob}, {"deprecated", oi.deprecated}};
	for (size_t i = 0; i < 2; i++)
		if (texts[i][1]) {
			fprintf(f, "\n    %s: ", texts[i][0]);
			put_str(f, texts[i][1], strlen(texts[i][1]));
		}
	for (size_t i = 0; i < oi.n_implies; i++) {
		shmcfg_opt target;
		shmcfg_value v = {0};
		if ((r = shmcfg_opt_implies(h, o, i, &target, &v)))
			return r;
		shmcfg_optinfo ti;
		if ((r = shmcfg_opt_info(h, target, &ti)))
			return r;
		fprintf(f, "%s%s: ", i ? ", " : "\n    implies: {", ti.name);
		put_value(f, &v);
		if (i + 1 == oi.n_implies)
			fputc('}', f);
	}
	if (*oi.doc) {
		fputs("\n    doc: ", f);
		put_str(f, oi.doc, strlen(oi.doc));
	}
	fputc('\n', f);
	return 0;
}

int schema_text(const shmcfg *h, char **ret)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	if (!f)
		return -ENOMEM;
	uint8_t hash[16];
	shmcfg_schema_hash(h, hash);
	fputs("# shmcfg schema (format 1)\n# Written by shmctl from segment ", f);
	put_str(f, shmcfg_name(h), strlen(shmcfg_name(h)));
	fputs(", schema hash ", f);
	for (int i = 0; i < 16; i++)
		fprintf(f, "%02x", hash[i]);
	fputs(".\nformat: 1\noptions:\n", f);
	int r = 0;
	for (shmcfg_opt o = 0; !r && o < shmcfg_count(h); o++)
		r = put_option(f, h, o);
	bool bad = ferror(f);
	fclose(f);
	if (!r && (bad || !text || memchr(text, '\x01', len)))
		r = -ENOMEM;
	if (r) {
		free(text);
		return r;
	}
	*ret = text;
	return 0;
}
