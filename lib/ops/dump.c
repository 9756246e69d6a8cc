/* SPDX-License-Identifier: MIT */
/*
 * The seed's whole-configuration operations: is_default, save (dump), load
 * and codegen. Dumps are portable JSON written with jansson.
 */
#include "internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <jansson.h>

/* The JSON values a text may hold (shmcfg__json_parse): one value's, at most
 * as many items as bytes; a load's, each option's key and value and the
 * items of two values of the greatest size */
#define JSON_MAX_VALUE (SEG_MAX_VALUE_BYTES + 2)
#define JSON_MAX_LOAD(h) (64 + 4 * (size_t)(h)->lay.nopts + 2 * (size_t)SEG_MAX_VALUE_BYTES)

/*
 * The seed's _is_default(): an env layer holding a value other than the
 * default makes an option non-default; a user value does too, except that
 * for mutable types (list, set) a user value equal to the default does not.
 * A thread's patch counts as its user value, and so does the cluster's
 * value (torch has no cluster layer: someone set it, as a user does); the
 * knob layer does not count (torch's _is_default() ignores justknobs).
 */
/* The seed's rule on one snapshot: no environment, user or cluster layer
 * holds anything but the default (a list or set equal to it counts as
 * default). */
static int default_in(const shmcfg *h, const shmcfg_snapshot *s, shmcfg_opt opt, bool *mutable_type,
		      shmcfg_value *def, shmcfg_opt *final)
{
	int ur = shmcfg__opt_use(h, opt);
	if (ur)
		return ur;
	shmcfg_opt f = *final = opt_d(h, opt)->alias_final;
	const struct opt_desc *d = opt_d(h, f);
	shmcfg_value v;
	(void)shmcfg__value_from_cell(&d->def, h->strings, h->strings_size, def);
	/* torch asks the default's type: a list option whose default is None
	 * is immutable there (_IMMUTABLE_CONFIG_TYPES holds NoneType) */
	*mutable_type = (d->type == SHMCFG_LIST || d->type == SHMCFG_SET) && !def->is_null;
	static const shmcfg_source layers[] = {SHMCFG_SRC_ENV_DEFAULT, SHMCFG_SRC_ENV_FORCE, SHMCFG_SRC_USER,
					       SHMCFG_SRC_CLUSTER};
	for (int k = 0; k < 4; k++) {
		int r = shmcfg_snapshot_layer(s, f, layers[k], &v);
		if (r < 0) /* an option a successor of another schema lacks, say */
			return r;
		/* an env value other than the default; any user or cluster value, but a list or set equal to it */
		if (r == 0 && (k < 2 ? !shmcfg_value_equal(&v, def) : !(*mutable_type && shmcfg_value_equal(&v, def))))
			return 0;
	}
	return 1;
}

int shmcfg_snapshot_is_default(const shmcfg_snapshot *snap, shmcfg_opt opt)
{
	SHMCFG_API_ENTRY;
	assert_return(snap, -EINVAL);
	bool mutable_type;
	shmcfg_value def;
	shmcfg_opt f;
	/* of the caller's schema (snapshot_layer maps it) */
	return default_in(snap->origin ? snap->origin : snap->h, snap, opt, &mutable_type, &def, &f);
}

int shmcfg_is_default(const shmcfg *h, shmcfg_opt opt)
{
	SHMCFG_API_ENTRY;
	assert_return(h, -EINVAL);
	shmcfg_snapshot *s;
	int r = shmcfg_snapshot_acquire((shmcfg *)h, &s);
	if (r)
		return r;
	bool mutable_type;
	shmcfg_value def, v;
	shmcfg_opt f;
	int result = default_in(h, s, opt, &mutable_type, &def, &f);
	shmcfg_snapshot_release(s);
	if (result == 1 && shmcfg__tls_patched) {
		if ((r = shmcfg_get(h, f, &v)))
			return r;
		if (v.source == SHMCFG_SRC_PATCH && !(mutable_type && shmcfg_value_equal(&v, &def)))
			result = 0;
		shmcfg_value_clear(&v);
	}
	return result;
}

static void hex(const uint8_t *b, char out[33])
{
	for (int i = 0; i < 16; i++)
		snprintf(out + 2 * i, 3, "%02x", b[i]);
}

/*
 * An option's stored value, the one the seed's save_config() and
 * codegen_config() write: its _get_dict() takes each option's env_force,
 * user override, env_default, justknob or default, the first that is set,
 * and never an implication. Here: the highest layer that is set (with
 * @patches, the thread's patch stands for the user layer), else the
 * default. So a load of the dump stores what the layers held, not what an
 * implication made of them, and the copy agrees with the original once the
 * implier is turned off. The value points into the snapshot or the
 * thread's patch frame.
 */
static int stored_value(const shmcfg *h, const shmcfg_snapshot *s, shmcfg_opt opt, bool patches,
			shmcfg_value *out)
{
	static const shmcfg_source order[] = {SHMCFG_SRC_ENV_FORCE, SHMCFG_SRC_USER, SHMCFG_SRC_CLUSTER,
					      SHMCFG_SRC_ENV_DEFAULT, SHMCFG_SRC_KNOB};
	const shmcfg_value *pv;
	for (size_t k = 0; k < sizeof order / sizeof order[0]; k++) {
		if (order[k] == SHMCFG_SRC_USER && patches && shmcfg__tls_patched &&
		    shmcfg__patch_value(h, opt, &pv)) {
			*out = *pv;
			out->source = SHMCFG_SRC_PATCH;
			return 0;
		}
		int r = shmcfg_snapshot_layer(s, opt, order[k], out);
		if (r != 1) /* set (0), or an error */
			return r;
	}
	return shmcfg_snapshot_layer(s, opt, SHMCFG_SRC_DEFAULT, out);
}

int shmcfg_get_stored(const shmcfg *h, shmcfg_opt opt, shmcfg_value *ret)
{
	SHMCFG_API_ENTRY;
	assert_return(h && ret, -EINVAL);
	SHMCFG_FOLLOW_OPT(h, opt);
	int r = shmcfg__opt_use(h, opt);
	if (r)
		return r;
	shmcfg_opt f = opt_d(h, opt)->alias_final;
	shmcfg_snapshot *s;
	if ((r = shmcfg_snapshot_acquire((shmcfg *)h, &s)))
		return r;
	shmcfg_value v;
	if (!(r = stored_value(h, s, f, true, &v)))
		r = shmcfg__value_copy(&v, ret); /* v points into the snapshot */
	shmcfg_snapshot_release(s);
	return r;
}

/* Options a dump or codegen leaves out, as the seed's save_config does. */
static bool skipped(const shmcfg *h, shmcfg_opt i, unsigned flags)
{
	const struct opt_desc *d = opt_d(h, i);
	if (d->alias != SHMCFG_NO_OPT)
		return true;
	return !(flags & SHMCFG_DUMP_ALL) && (d->flags & (SHMCFG_F_SAVE_IGNORED | SHMCFG_F_PRIVATE));
}

int shmcfg_dump(const shmcfg *h, unsigned flags, char **ret)
{
	SHMCFG_API_ENTRY;
	assert_return(h && ret, -EINVAL);
	SHMCFG_FOLLOW(h);
	shmcfg_snapshot *s;
	int r = shmcfg_snapshot_acquire((shmcfg *)h, &s);
	if (r)
		return r;
	json_t *values = json_object(), *root = NULL;
	for (uint32_t i = 0; values && !r && i < h->lay.nopts; i++) {
		if ((r = shmcfg__opt_use(h, i)))
			break;
		if (skipped(h, i, flags))
			continue;
		shmcfg_value v;
		if ((r = stored_value(h, s, i, false, &v)))
			break;
		json_t *j = shmcfg__value_json(&v);
		if (!j || json_object_set_new(values, sstr(h, opt_d(h, i)->name), j))
			r = shmcfg__nomem();
	}
	char ch[33], sh[33];
	uint8_t cfg[16];
	shmcfg_snapshot_hash(s, cfg);
	hex(cfg, ch);
	hex(h->lay.schema_hash, sh);
	uint64_t gen = shmcfg_snapshot_generation(s);
	shmcfg_snapshot_release(s);
	if (!r && values)
		root = json_pack("{s:s, s:I, s:s, s:s, s:O}", "format", "shmcfg-dump/1", "generation",
				 (json_int_t)gen, "config_hash", ch, "schema_hash", sh, "values", values);
	*ret = NULL;
	if (!r && root)
		r = shmcfg__json_text(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17), ret);
	json_decref(values);
	json_decref(root);
	if (!r && !*ret)
		r = shmcfg__nomem();
	return r;
}

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
	const char *key;
	json_t *j;
	json_object_foreach(values, key, j) {
		shmcfg_opt opt;
		if (!shmcfg_lookup(h, key, &opt))
			continue;
		n++;
		char name[96];
		shmcfg__name_text(key, name, sizeof name);
		int w = snprintf(list + used, sizeof list - used, "%s%s", shown ? ", " : "", name);
		if (w > 0 && used + (size_t)w < sizeof list - 1) {
			used += (size_t)w;
			shown++;
		} else
			list[used] = 0; /* whole names only */
	}
	if (!n)
		return 0;
	if (shown < n)
		return shmcfg__err(SHMCFG_E_NOOPT, "%zu unknown options: %s (and %zu more)", n, list, n - shown);
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
	hex(h->lay.schema_hash, mine);
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
	json_object_foreach(r ? NULL : values, key, j) {
		shmcfg_opt opt;
		if (shmcfg_lookup(h, key, &opt)) {
			char name[96];
			shmcfg__name_text(key, name, sizeof name);
			load_warn(warn, ud, "unknown option '%s' skipped", name);
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
			load_warn(warn, ud, "%s; skipped", shmcfg_errdetail());
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

/* ------------------------------------------------------------------ */
/* Codegen                                                            */
/* ------------------------------------------------------------------ */

/* A Python literal: True/False/None, ints, repr-like floats, str literals,
 * lists, and sets as set literals (set() when empty), as codegen_config(). */
static void python_literal(struct shmcfg__text *b, const shmcfg_value *v)
{
	if (v->is_null) {
		shmcfg__text_printf(b, "None");
		return;
	}
	switch (v->type) {
	case SHMCFG_BOOL:
		shmcfg__text_printf(b, v->u.b ? "True" : "False");
		return;
	case SHMCFG_INT:
		shmcfg__text_printf(b, "%lld", (long long)v->u.i);
		return;
	case SHMCFG_FLOAT:
		if (isnan(v->u.f))
			shmcfg__text_printf(b, "float('nan')");
		else if (isinf(v->u.f))
			shmcfg__text_printf(b, v->u.f > 0 ? "float('inf')" : "float('-inf')");
		else {
			char t[40];
			shmcfg__float_text(v->u.f, t);
			shmcfg__text_printf(b, "%s", t);
		}
		return;
	case SHMCFG_STR: {
		/* as Python's repr(): single quotes unless the text holds one and
		 * no double quote; backslash escapes for the quote, the backslash,
		 * controls (C1 too), U+2028/9 and a byte that is no UTF-8 (\udcNN,
		 * as surrogateescape reads it); other characters as they are */
		const char *p = v->u.str.ptr, *end = p + v->u.str.len;
		char q = memchr(p, '\'', v->u.str.len) && !memchr(p, '"', v->u.str.len) ? '"' : '\'';
		shmcfg__text_printf(b, "%c", q);
		for (int n; p < end; p += n) {
			unsigned char c = (unsigned char)*p;
			uint32_t cp = c;
			n = c < 0x80 ? 1 : shmcfg__utf8_seq((const unsigned char *)p, (const unsigned char *)end, &cp);
			if (!n)
				shmcfg__text_printf(b, "\\udc%02x", c), n = 1;
			else if (cp == (unsigned char)q || cp == '\\')
				shmcfg__text_printf(b, "\\%c", c);
			else if (cp == '\n' || cp == '\r' || cp == '\t')
				shmcfg__text_printf(b, "\\%c", cp == '\n' ? 'n' : cp == '\r' ? 'r' : 't');
			else if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp == 0x2028 || cp == 0x2029)
				shmcfg__text_printf(b, cp < 0x100 ? "\\x%02x" : "\\u%04x", (unsigned)cp);
			else
				shmcfg__text_printf(b, "%.*s", n, p);
		}
		shmcfg__text_printf(b, "%c", q);
		return;
	}
	case SHMCFG_LIST:
	case SHMCFG_SET: {
		bool set = v->type == SHMCFG_SET;
		if (set && v->u.list.count == 0) {
			shmcfg__text_printf(b, "set()");
			return;
		}
		shmcfg__text_printf(b, set ? "{" : "[");
		int k = 0;
		const char *end = v->u.list.items + v->u.list.bytes;
		for (const char *it = NULL; (it = shmcfg_list_next(v, it)); k++) {
			/* bounded: a snapshot's items are in shared memory */
			shmcfg_value s = {.type = SHMCFG_STR, .u.str = {it, strnlen(it, (size_t)(end - it))}};
			shmcfg__text_printf(b, k ? ", " : "");
			python_literal(b, &s);
		}
		shmcfg__text_printf(b, set ? "}" : "]");
		return;
	}
	}
}

/* 'text' for a POSIX shell: single quotes, each ' written as '\'' */
static void shell_quote(struct shmcfg__text *b, const char *s)
{
	shmcfg__text_printf(b, "'");
	for (; *s; s++)
		shmcfg__text_printf(b, *s == '\'' ? "'\\''" : "%c", *s);
	shmcfg__text_printf(b, "'");
}

int shmcfg_codegen(const shmcfg *h, shmcfg_codegen_format fmt, char **ret)
{
	SHMCFG_API_ENTRY;
	assert_return(h && ret, -EINVAL);
	if (fmt != SHMCFG_CODEGEN_PYTHON && fmt != SHMCFG_CODEGEN_SHELL && fmt != SHMCFG_CODEGEN_JSON)
		return shmcfg__err(-EINVAL, "unknown codegen format %d", (int)fmt);
	shmcfg_snapshot *snap;
	int r = shmcfg_snapshot_acquire((shmcfg *)h, &snap);
	if (r)
		return r;
	struct shmcfg__text b = {0};
	json_t *obj = fmt == SHMCFG_CODEGEN_JSON ? json_object() : NULL;
	if (fmt == SHMCFG_CODEGEN_JSON && !obj)
		r = shmcfg__nomem();
	shmcfg__text_printf(&b, "%s", "");
	for (uint32_t i = 0; !r && !b.err && i < h->lay.nopts; i++) {
		if ((r = shmcfg__opt_use(h, i)))
			break;
		if (skipped(h, i, 0))
			continue;
		int d = shmcfg_is_default(h, i);
		if (d < 0) { /* an error is not "default": the line would be missing */
			r = d;
			break;
		}
		if (d)
			continue;
		shmcfg_value v;
		if ((r = stored_value(h, snap, i, true, &v)))
			break;
		const char *name = sstr(h, opt_d(h, i)->name);
		if (fmt == SHMCFG_CODEGEN_PYTHON) {
			shmcfg__text_printf(&b, "%s = ", name);
			python_literal(&b, &v);
			shmcfg__text_printf(&b, "\n");
		} else if (fmt == SHMCFG_CODEGEN_SHELL) {
			char *text = NULL, *pair = NULL;
			if (!(r = shmcfg_value_format(&v, &text)) && shmcfg__asprintf(&pair, "%s=%s", name, text) < 0) {
				pair = NULL; /* undefined after a failure */
				r = shmcfg__nomem();
			}
			if (!r) {
				shmcfg__text_printf(&b, "shmctl set %s ", h->name);
				shell_quote(&b, pair);
				shmcfg__text_printf(&b, "\n");
			}
			shmcfg__free(text);
			shmcfg__free(pair);
		} else {
			json_t *j = shmcfg__value_json(&v);
			if (!j || json_object_set_new(obj, name, j))
				r = shmcfg__nomem();
		}
	}
	shmcfg_snapshot_release(snap);
	if (!r && !b.err && obj) {
		char *t = NULL;
		r = shmcfg__json_text(obj, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17), &t);
		b.len = 0;
		if (!r)
			shmcfg__text_printf(&b, "%s\n", t);
		shmcfg__free(t);
	}
	json_decref(obj);
	if (r || b.err) {
		shmcfg__free(b.p);
		return r ? r : b.err;
	}
	*ret = b.p;
	return 0;
}
