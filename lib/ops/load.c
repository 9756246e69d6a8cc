/* SPDX-License-Identifier: MIT */
/*
 * A configuration read back: a dump, or a plain object of some options, loaded
 * into a transaction (strict, or partial with a warning per value left out),
 * and one value from its JSON form (shmcfg_value_from_json).
 */
#include "internal.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

/* The JSON values a text may hold (shmcfg__json_parse): one value's, at most
 * as many items as bytes; a load's, each option's key and value and the
 * items of two values of the greatest size */
#define JSON_MAX_VALUE (SEG_MAX_VALUE_BYTES + 2)
#define JSON_MAX_LOAD(h) (64 + 4 * (size_t)(h)->lay.nopts + 2 * (size_t)SEG_MAX_VALUE_BYTES)

static int json_type_err(const shmcfg *h, shmcfg_opt opt, json_t *j)
{
	char *text = NULL;
	(void)shmcfg__json_text(j, JSON_ENCODE_ANY | JSON_COMPACT, &text);
	shmcfg_type t = opt_d(h, opt_d(h, opt)->alias_final)->type;
	/* worded as a set's parse errors are, with what JSON the type takes */
	static const char *const json_of[] = {[SHMCFG_BOOL] = "true or false", [SHMCFG_INT] = "an integer",
					      [SHMCFG_FLOAT] = "a number", [SHMCFG_STR] = "a string",
					      [SHMCFG_LIST] = "an array of strings", [SHMCFG_SET] = "an array of strings"};
	int r = shmcfg__err(SHMCFG_E_TYPE, "%s: value %.80s is not a valid %s: expected %s", sstr(h, opt_d(h, opt)->name),
			    text ? text : "?", shmcfg_type_name(t),
			    (unsigned)t < sizeof json_of / sizeof *json_of && json_of[t] ? json_of[t] : "another type");
	shmcfg__free(text);
	return r;
}

/* A JSON value as a value of the option's type. */
static int from_json(const shmcfg *h, shmcfg_opt opt, json_t *j, shmcfg_value *out)
{
	shmcfg_type t = opt_d(h, opt_d(h, opt)->alias_final)->type;
	memset(out, 0, sizeof *out);
	out->type = t;
	if (json_is_null(j)) {
		out->is_null = true;
		return 0;
	}
	switch (t) {
	case SHMCFG_BOOL:
		if (!json_is_boolean(j))
			return json_type_err(h, opt, j);
		out->u.b = json_is_true(j);
		return 0;
	case SHMCFG_INT:
		if (!json_is_integer(j))
			return json_type_err(h, opt, j);
		out->u.i = json_integer_value(j);
		return 0;
	case SHMCFG_FLOAT:
		if (json_is_number(j))
			out->u.f = json_number_value(j);
		else if (json_is_string(j) && !strcmp(json_string_value(j), "nan"))
			out->u.f = NAN;
		else if (json_is_string(j) && !strcmp(json_string_value(j), "inf"))
			out->u.f = INFINITY;
		else if (json_is_string(j) && !strcmp(json_string_value(j), "-inf"))
			out->u.f = -INFINITY;
		else
			return json_type_err(h, opt, j);
		return 0;
	case SHMCFG_STR:
		if (!json_is_string(j))
			return json_type_err(h, opt, j);
		out->u.str.ptr = json_string_value(j);
		out->u.str.len = json_string_length(j);
		return 0;
	case SHMCFG_LIST:
	case SHMCFG_SET: {
		if (!json_is_array(j))
			return json_type_err(h, opt, j);
		size_t n = json_array_size(j);
		const char **items = shmcfg__malloc((n ? n : 1) * sizeof *items);
		if (!items)
			return shmcfg__nomem();
		for (size_t i = 0; i < n; i++) {
			json_t *it = json_array_get(j, i);
			if (!json_is_string(it) || memchr(json_string_value(it), 0, json_string_length(it))) {
				shmcfg__free(items);
				return json_type_err(h, opt, j);
			}
			items[i] = json_string_value(it);
		}
		int r = shmcfg_value_list(t, items, n, out);
		shmcfg__free(items);
		return r;
	}
	}
	return json_type_err(h, opt, j);
}

int shmcfg_value_from_json(const shmcfg *h, shmcfg_opt opt, const char *json, size_t len, shmcfg_value *ret)
{
	SHMCFG_API_ENTRY;
	assert_return(h && json && ret, -EINVAL);
	shmcfg_opt f; /* validates opt: from_json reads its descriptor */
	int r = shmcfg__target_of(h, opt, &f);
	if (r)
		return r;
	/* jansson stops at a NUL: "12\0" would read as 12 */
	const char *nul = memchr(json, 0, len);
	if (nul)
		return shmcfg__err(SHMCFG_E_PARSE, "%s: value %.*s holds a NUL byte at offset %zu",
				   sstr(h, opt_d(h, opt)->name), (int)((size_t)(nul - json) < 80 ? nul - json : 80), json,
				   (size_t)(nul - json));
	json_error_t e;
	json_t *j = shmcfg__json_parse(json, len, JSON_MAX_VALUE, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &e);
	if (!j && shmcfg__json_oom(&e))
		return shmcfg__nomem();
	if (!j)
		return shmcfg__err(SHMCFG_E_PARSE, "%s: value %.*s is not JSON: %s", sstr(h, opt_d(h, opt)->name),
				   (int)(len < 80 ? len : 80), json, e.text);
	shmcfg_value v;
	r = from_json(h, opt, j, &v);
	if (!r) { /* strings still point into j */
		r = shmcfg__value_copy(&v, ret);
		shmcfg_value_clear(&v);
	}
	json_decref(j);
	return r;
}

/* The values object of a load's text: a dump's "values", or the object
 * itself; *dump the dump around it (NULL for a plain object). */
static json_t *load_values(json_t *root, json_t **dump)
{
	json_t *fmt = json_object_get(root, "format");
	*dump = NULL;
	if (json_is_object(root) && json_is_object(json_object_get(root, "values")) &&
	    (fmt || json_object_size(root) == 1)) {
		*dump = root;
		return json_object_get(root, "values");
	}
	return root;
}

static void load_warn(shmcfg_warn_fn *warn, void *ud, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void load_warn(shmcfg_warn_fn *warn, void *ud, const char *fmt, ...)
{
	if (!warn)
		return;
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	warn(msg, ud);
}

/* A strict load refuses names the segment does not know, listing them all
 * (as many as the detail holds), before anything is applied. */
static int load_unknown_names(const shmcfg *h, json_t *values)
{
	char list[400] = "";
	size_t n = 0, shown = 0, used = 0;
	unsigned tries = 0;
	const char *key;
	json_t *j;
	json_object_foreach(values, key, j) {
		shmcfg_opt opt;
		int r = shmcfg_lookup(h, key, &opt);
		if (!r)
			continue;
		if (r != SHMCFG_E_NOOPT)
			return r; /* a segment the lookup refuses (its detail says why) */
		n++;
		char name[96], near[NEAR_FULL_NAME_BYTES];
		shmcfg__name_text(key, name, sizeof name);
		shmcfg__near_full_name(h, key, &tries, near);
		/* quoted as a partial load's warning: a name holding ", " reads as
		 * one, and the empty name shows */
		int w = snprintf(list + used, sizeof list - used, "%s'%s'%s", shown ? ", " : "", name, near);
		if (w > 0 && used + (size_t)w < sizeof list - 1) {
			used += (size_t)w;
			shown++;
		} else
			list[used] = 0; /* whole names only */
	}
	if (!n)
		return 0;
	if (shown < n)
		return shmcfg__err(SHMCFG_E_NOOPT, "%zu unknown option%s: %s (and %zu more)", n, n == 1 ? "" : "s", list,
				   n - shown);
	return shmcfg__err(SHMCFG_E_NOOPT, "%zu unknown option%s: %s", n, n == 1 ? "" : "s", list);
}

/*
 * A load's checks, then each value set in *t (begun here when NULL, after
 * the checks that need none): the body of shmcfg_load_ex() and
 * shmcfg_txn_load(). On error *t holds what was set so far.
 */
static int load_into(shmcfg *h, shmcfg_txn **t, const char *text, size_t len, unsigned flags,
		     shmcfg_warn_fn *warn, void *ud)
{
	if ((flags & ~(unsigned)(SHMCFG_LOAD_STRICT | SHMCFG_LOAD_PARTIAL)) ||
	    (flags & SHMCFG_LOAD_STRICT && flags & SHMCFG_LOAD_PARTIAL))
		return shmcfg__err(-EINVAL, "shmcfg_load_ex: bad flags %#x", flags);
	bool partial = flags & SHMCFG_LOAD_PARTIAL;
	json_error_t e;
	json_t *root = shmcfg__json_parse(text, len, JSON_MAX_LOAD(h), JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &e);
	if (!root && shmcfg__json_oom(&e))
		return shmcfg__nomem();
	if (!root)
		return shmcfg__err(SHMCFG_E_PARSE, "JSON line %d column %d: %s", e.line, e.column, e.text);
	json_t *dump, *values = load_values(root, &dump);
	int r = 0;
	if (!json_is_object(values))
		r = shmcfg__err(SHMCFG_E_PARSE, "a load takes a JSON object of option: value");
	/* a dump names the schema it was made with */
	json_t *sh = dump ? json_object_get(dump, "schema_hash") : NULL;
	char mine[33];
	shmcfg__hex16(h->lay.schema_hash, mine);
	char theirs[96] = "(not a string)";
	if (json_is_string(sh))
		shmcfg__name_text(json_string_value(sh), theirs, sizeof theirs);
	bool other_schema = sh && (!json_is_string(sh) || strcmp(json_string_value(sh), mine));
	if (!r && other_schema && flags & SHMCFG_LOAD_STRICT)
		r = shmcfg__err(SHMCFG_E_SCHEMA, "the dump's schema hash %s is not the segment's %s", theirs, mine);
	else if (!r && other_schema && partial)
		load_warn(warn, ud, "the dump's schema hash %s is not the segment's %s: loading what fits", theirs,
			  mine);
	if (!r && flags & SHMCFG_LOAD_STRICT)
		r = load_unknown_names(h, values);
	if (!r && !*t)
		r = shmcfg_txn_begin(h, t);
	const char *key;
	json_t *j;
	/* not partial: the first refusal fails the load; the values after it are
	 * set aside (dry), so that its detail names every refused one, in order */
	int first = 0;
	shmcfg_txn *dry = NULL;
	char first_detail[sizeof shmcfg__detail], more[200] = "";
	size_t nmore = 0, shown = 0, used = 0;
	unsigned tries = 0; /* did-you-mean lookups */
	json_object_foreach(r ? NULL : values, key, j) {
		shmcfg_opt opt;
		if ((r = shmcfg_lookup(h, key, &opt)) && r != SHMCFG_E_NOOPT)
			break; /* a segment the lookup refuses: not an unknown name to skip */
		if (r) {
			r = 0;
			char name[96], near[NEAR_FULL_NAME_BYTES];
			shmcfg__name_text(key, name, sizeof name);
			shmcfg__near_full_name(h, key, &tries, near);
			load_warn(warn, ud, "unknown option '%s'%s skipped", name, near);
			continue;
		}
		shmcfg_value v;
		if (!(r = from_json(h, opt, j, &v))) {
			if (first) /* the load fails already: checked only, to be named */
				r = dry ? shmcfg__txn_set_layer(dry, opt, dry->layer, &v) : shmcfg_value_check(h, opt, &v);
			else if (!partial)
				r = shmcfg__txn_refuse(*t, shmcfg__txn_set_layer(*t, opt, (*t)->layer, &v));
			/* partial: a value the set refuses is skipped, the transaction
			 * not poisoned (running out of memory is not skipped) */
			else if ((r = shmcfg__txn_set_layer(*t, opt, (*t)->layer, &v)) == -ENOMEM)
				r = shmcfg__txn_refuse(*t, r);
			shmcfg_value_clear(&v);
		}
		if (r && partial && r != -ENOMEM) {
			/* "skipped" last, whatever the detail's length: shmctl counts the
			 * values skipped by it */
			load_warn(warn, ud, "%.480s; skipped", shmcfg_errdetail());
			r = 0;
		}
		if (r == -ENOMEM)
			break;
		if (r && !first) {
			first = r;
			snprintf(first_detail, sizeof first_detail, "%s", shmcfg_errdetail());
			if ((dry = shmcfg__txn_new(h))) /* else: the values' own checks only */
				dry->layer = (*t)->layer;
		} else if (r) {
			int w = shown < nmore ? -1 : snprintf(more + used, sizeof more - used, "%s%s", shown ? ", " : "",
							     sstr(h, opt_d(h, opt)->name));
			if (w > 0 && used + (size_t)w < sizeof more - 1) /* whole names only */
				used += (size_t)w, shown++;
			more[used] = 0;
			nmore++;
		}
		r = 0;
	}
	shmcfg_txn_abort(dry);
	if (!r && first)
		r = nmore ? shmcfg__err(first, "%s; %zu more value%s refused: %s%s", first_detail, nmore,
					nmore == 1 ? "" : "s", more, shown < nmore ? ", ..." : "")
			  : shmcfg__err(first, "%s", first_detail);
	json_decref(root);
	return r;
}

int shmcfg_load_ex(shmcfg *h, const char *text, size_t len, unsigned flags, shmcfg_warn_fn *warn, void *ud,
		   uint64_t *gen_ret, bool *published)
{
	SHMCFG_API_ENTRY;
	if (published)
		*published = false;
	assert_return(h && text, -EINVAL);
	SHMCFG_FOLLOW(h); /* names, and the schema hash, of the segment now (as a dump's) */
	shmcfg_txn *t = NULL;
	int r = load_into(h, &t, text, len, flags, warn, ud);
	if (r) {
		shmcfg_txn_abort(t);
		return r;
	}
	return shmcfg_txn_commit_ex(t, gen_ret, published);
}

int shmcfg_txn_load(shmcfg_txn *t, const char *text, size_t len, unsigned flags, shmcfg_warn_fn *warn, void *ud)
{
	SHMCFG_API_ENTRY;
	if (!t || !text)
		return shmcfg__txn_refuse(t, shmcfg__err(-EINVAL, "shmcfg_txn_load: invalid argument"));
	return shmcfg__txn_refuse(t, load_into(t->h, &t, text, len, flags, warn, ud));
}

int shmcfg_load(shmcfg *h, const char *text, size_t len, shmcfg_warn_fn *warn, void *ud, uint64_t *gen_ret)
{
	SHMCFG_API_ENTRY;
	return shmcfg_load_ex(h, text, len, 0, warn, ud, gen_ret, NULL);
}
