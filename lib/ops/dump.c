/* SPDX-License-Identifier: MIT */
/*
 * The seed's whole-configuration operations: is_default, save (dump) and
 * codegen. Dumps are portable JSON written with jansson; load.c reads them.
 */
#include "internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <jansson.h>

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
	shmcfg__hex16(cfg, ch);
	shmcfg__hex16(h->lay.schema_hash, sh);
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
