/* SPDX-License-Identifier: MIT */
/*
 * Values as text: the one JSON encoding of a value, the shortest float text
 * that reads back equal, and the display form (shmcfg_value_format()).
 */
#include "internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <jansson.h>

/*
 * The one JSON form of a value: dumps, loads, shmctl's --json output and the
 * Python binding all go through it (shmcfg_value_json()).
 */
json_t *shmcfg__value_json(const shmcfg_value *v)
{
	if (v->is_null)
		return json_null();
	switch (v->type) {
	case SHMCFG_BOOL:
		return json_boolean(v->u.b);
	case SHMCFG_INT:
		return json_integer(v->u.i);
	case SHMCFG_FLOAT:
		/* JSON has no NaN or infinity: strings, as Python's json and a
		 * load (load.c) read them back */
		if (!isfinite(v->u.f))
			return json_string(isnan(v->u.f) ? "nan" : v->u.f > 0 ? "inf" : "-inf");
		return json_real(v->u.f);
	case SHMCFG_STR: {
		/* values are checked UTF-8 when written; a hostile segment's bytes
		 * go out as they are rather than not at all */
		json_t *j = json_stringn(v->u.str.ptr, v->u.str.len);
		return j ? j : json_stringn_nocheck(v->u.str.ptr, v->u.str.len);
	}
	case SHMCFG_LIST:
	case SHMCFG_SET: {
		json_t *a = json_array();
		const char *it = NULL, *end = v->u.list.items + v->u.list.bytes;
		while (a && (it = shmcfg_list_next(v, it))) {
			/* bounded by the value: a snapshot's items are in shared
			 * memory, where a writer may remove the last NUL */
			size_t len = strnlen(it, (size_t)(end - it));
			json_t *s = json_stringn(it, len);
			/* an item that cannot be added fails the list: a list with
			 * an item missing would go out as the value */
			if (json_array_append_new(a, s ? s : json_stringn_nocheck(it, len))) {
				json_decref(a);
				return NULL;
			}
		}
		return a;
	}
	}
	return NULL;
}

/*
 * JSON text of j, as json_dumps(j, flags), into a buffer of ours whose first
 * failed write fails every later one: jansson 2.14's json_dumps ignores a
 * failed write of an object's key (dump.c, do_dump) and goes on, so that a
 * transient failure gives text with a key missing. Returns 0 or -ENOMEM.
 */
static int text_put(const char *bytes, size_t n, void *data)
{
	struct shmcfg__text *b = data;
	shmcfg__text_putn(b, bytes, n);
	return b->err ? -1 : 0;
}

int shmcfg__json_text(const json_t *j, size_t flags, char **ret)
{
	struct shmcfg__text b = {0};
	*ret = NULL;
	if (json_dump_callback(j, text_put, &b, flags) || b.err || !b.p) {
		shmcfg__free(b.p);
		return shmcfg__nomem();
	}
	*ret = b.p;
	return 0;
}

/* The shortest text that reads back as the same double, as Python's repr()
 * writes it: the fewest significant digits that read back (each count
 * rounded to nearest by printf), then positional notation for decimal
 * exponents -4 to 15, with ".0" when it would look like an integer (100.0,
 * 0.0001, 1e-05, 1e+16, -0.0). buf: 32 bytes. */
void shmcfg__float_text(double f, char *buf)
{
	if (!isfinite(f)) {
		strcpy(buf, isnan(f) ? "nan" : f > 0 ? "inf" : "-inf");
		return;
	}
	char e[40];
	for (int prec = 0; prec <= 16; prec++) { /* prec + 1 significant digits */
		snprintf(e, sizeof e, "%.*e", prec, f);
		if (strtod(e, NULL) == f)
			break;
	}
	/* e is [-]d[.ddd]e(+|-)XX */
	const char *p = e;
	char *o = buf, digits[20];
	int nd = 0;
	if (*p == '-')
		*o++ = *p++;
	for (; *p != 'e'; p++)
		if (*p != '.')
			digits[nd++] = *p;
	int exp10 = atoi(p + 1);
	while (nd > 1 && digits[nd - 1] == '0')
		nd--;
	if (exp10 < -4 || exp10 > 15) {
		*o++ = digits[0];
		if (nd > 1)
			*o++ = '.', memcpy(o, digits + 1, (size_t)nd - 1), o += nd - 1;
		sprintf(o, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
		return;
	}
	if (exp10 < 0) {
		*o++ = '0', *o++ = '.';
		for (int i = 0; i < -exp10 - 1; i++)
			*o++ = '0';
		memcpy(o, digits, (size_t)nd), o += nd;
	} else {
		for (int i = 0; i <= exp10; i++)
			*o++ = i < nd ? digits[i] : '0';
		*o++ = '.';
		if (nd > exp10 + 1)
			memcpy(o, digits + exp10 + 1, (size_t)(nd - exp10 - 1)), o += nd - exp10 - 1;
		else
			*o++ = '0';
	}
	*o = '\0';
}

int shmcfg_value_format(const shmcfg_value *v, char **ret)
{
	SHMCFG_API_ENTRY;
	assert_return(v && ret, -EINVAL);
	if (!v->is_null && v->type == SHMCFG_FLOAT && isfinite(v->u.f)) {
		char t[32];
		shmcfg__float_text(v->u.f, t);
		*ret = shmcfg__strdup(t);
		return *ret ? 0 : shmcfg__nomem();
	}
	/* JSON has no NaN or infinity: write them as Python and strtod read them */
	if (!v->is_null && v->type == SHMCFG_FLOAT && !isfinite(v->u.f)) {
		*ret = shmcfg__strdup(isnan(v->u.f) ? "nan" : v->u.f > 0 ? "inf" : "-inf");
		return *ret ? 0 : shmcfg__nomem();
	}
	return shmcfg_value_json(v, ret); /* everything else: its JSON */
}

/* The canonical text used for choices: as shmcfg_value_format(), but a
 * string is its raw text. */
int shmcfg__format_canon(const shmcfg_value *v, char **ret)
{
	if (!v->is_null && v->type == SHMCFG_STR) {
		*ret = shmcfg__strndup(v->u.str.ptr, v->u.str.len);
		return *ret ? 0 : shmcfg__nomem();
	}
	return shmcfg_value_format(v, ret);
}

/* A caller's value that has no JSON form: -EINVAL with a detail, or 0. Then
 * only an allocation can fail (jansson writes no invalid UTF-8). */
static int not_a_value(const shmcfg_value *v)
{
	if (!shmcfg_type_name(v->type))
		return shmcfg__err(-EINVAL, "a value of unknown type %d", (int)v->type);
	if (v->is_null)
		return 0;
	if (v->type == SHMCFG_STR && !v->u.str.ptr && v->u.str.len)
		return shmcfg__err(-EINVAL, "a string of %zu bytes at NULL", v->u.str.len);
	if (v->type == SHMCFG_STR && !shmcfg__utf8_valid(v->u.str.ptr, v->u.str.len))
		return shmcfg__err(-EINVAL, "a string that is not valid UTF-8");
	if (v->type < SHMCFG_LIST)
		return 0;
	/* a count that disagrees with the bytes is written as the bytes say: a
	 * snapshot's items may be rewritten meanwhile (test_races) */
	if (!v->u.list.items && (v->u.list.count || v->u.list.bytes))
		return shmcfg__err(-EINVAL, "a %s of %zu items (%zu bytes) at NULL", shmcfg_type_name(v->type),
				   v->u.list.count, v->u.list.bytes);
	if (!shmcfg__utf8_valid(v->u.list.items, v->u.list.bytes))
		return shmcfg__err(-EINVAL, "a %s item that is not valid UTF-8", shmcfg_type_name(v->type));
	return 0;
}

int shmcfg_value_json(const shmcfg_value *v, char **ret)
{
	SHMCFG_API_ENTRY;
	assert_return(v && ret, -EINVAL);
	int bad = not_a_value(v);
	if (bad)
		return bad;
	json_t *j = shmcfg__value_json(v);
	if (!j)
		return shmcfg__nomem();
	int r = shmcfg__json_text(j, JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(17), ret);
	json_decref(j);
	return r;
}
