/* SPDX-License-Identifier: MIT */
/*
 * Values: type and source names, parsing from text and the environment,
 * equality, copies and canonical sets. Cells are in cell.c, text and JSON
 * in json.c.
 */
#include "internal.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <jansson.h>

/* The JSON values of one value: a list has at most as many items as bytes */
#define JSON_MAX_VALUE (SEG_MAX_VALUE_BYTES + 2)

static const char *const type_names[] = {NULL, "bool", "int", "float", "str", "list", "set"};
static const char *const source_names[] = {"default",   "knob",    "env_default", "cluster", "user",
					   "env_force", "implied", "alias",       "patch"};

const char *shmcfg_type_name(shmcfg_type t)
{
	SHMCFG_API_KEEP;
	return (unsigned)t < 7 ? type_names[t] : NULL;
}

const char *shmcfg_source_name(shmcfg_source s)
{
	SHMCFG_API_KEEP;
	return (unsigned)s < sizeof source_names / sizeof *source_names ? source_names[s] : "unknown";
}

void shmcfg_value_clear(shmcfg_value *v)
{
	SHMCFG_API_KEEP;
	if (!v)
		return;
	shmcfg__free(v->owned);
	memset(v, 0, sizeof *v);
	v->type = SHMCFG_BOOL;
	v->is_null = true;
}

const char *shmcfg_list_next(const shmcfg_value *v, const char *prev)
{
	SHMCFG_API_KEEP;
	if (!v || (v->type != SHMCFG_LIST && v->type != SHMCFG_SET) || v->is_null ||
	    v->u.list.count == 0)
		return NULL;
	/* bounded: the items may be in shared memory that changes under us */
	const char *end = v->u.list.items + v->u.list.bytes;
	const char *next = prev ? prev + strnlen(prev, (size_t)(end - prev)) + 1 : v->u.list.items;
	return next < end ? next : NULL;
}

int shmcfg__utf8_seq(const unsigned char *p, const unsigned char *e, uint32_t *cp)
{
	unsigned c = *p;
	int n;
	if (c < 0x80) {
		*cp = c;
		return 1;
	} else if ((c & 0xe0) == 0xc0) {
		n = 1, *cp = c & 0x1f;
	} else if ((c & 0xf0) == 0xe0) {
		n = 2, *cp = c & 0x0f;
	} else if ((c & 0xf8) == 0xf0) {
		n = 3, *cp = c & 0x07;
	} else {
		return 0;
	}
	if (e - p - 1 < n)
		return 0;
	for (int i = 1; i <= n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		*cp = *cp << 6 | (p[i] & 0x3f);
	}
	if ((n == 1 && *cp < 0x80) || (n == 2 && *cp < 0x800) || (n == 3 && *cp < 0x10000) ||
	    (*cp >= 0xd800 && *cp <= 0xdfff) || *cp > 0x10ffff)
		return 0;
	return n + 1;
}

bool shmcfg__utf8_valid(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s, *e = p + len;
	uint32_t cp;
	for (int n; p < e; p += n)
		if (!(n = shmcfg__utf8_seq(p, e, &cp)))
			return false;
	return true;
}

void shmcfg__printable(char *s)
{
	unsigned char *p = (unsigned char *)s, *e = p + strlen(s);
	uint32_t cp;
	for (int n; p < e; p += n) {
		n = shmcfg__utf8_seq(p, e, &cp);
		/* a byte that starts no character, a C0 or C1 control, DEL */
		if (!n || cp < 0x20 || (cp >= 0x7f && cp < 0xa0))
			memset(p, '?', n ? (size_t)n : 1), n = n ? n : 1;
	}
}

void shmcfg__line_text(const char *s, char *out, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t o = 0;
	while (*p) {
		/* a character: its bytes, if valid UTF-8 and not a control (C0, DEL, C1) */
		size_t n = *p < 0x80		  ? 1
			   : (*p & 0xe0) == 0xc0 ? 2
			   : (*p & 0xf0) == 0xe0 ? 3
			   : (*p & 0xf8) == 0xf0 ? 4
						 : 0;
		bool ok = n && strnlen((const char *)p, n) == n && shmcfg__utf8_valid((const char *)p, n) &&
			  !(n == 1 && (*p < 0x20 || *p == 0x7f)) && !(n == 2 && p[0] == 0xc2 && p[1] < 0xa0);
		size_t w = ok ? n : 4;
		if (o + w + 4 > len) { /* room for "..." and the NUL */
			if (o + 4 <= len)
				memcpy(out + o, "...", 3), o += 3;
			break;
		}
		if (ok)
			memcpy(out + o, p, n);
		else
			snprintf(out + o, 5, "\\x%02x", *p);
		o += w;
		p += ok ? n : 1;
	}
	out[o] = 0;
}

/* Build a list value from n strings given as pointers and lengths. */
static int list_build(shmcfg_type type, const char *const *items, const size_t *lens, size_t n,
		      shmcfg_value *ret)
{
	size_t bytes = 0;
	for (size_t i = 0; i < n; i++) {
		if (memchr(items[i], 0, lens[i]))
			return shmcfg__err(SHMCFG_E_PARSE, "value is not a valid %s: item %zu contains a NUL byte",
					   shmcfg_type_name(type), i);
		bytes += lens[i] + 1;
	}
	char *buf = shmcfg__malloc(bytes ? bytes : 1);
	if (!buf)
		return shmcfg__nomem();
	char *p = buf;
	for (size_t i = 0; i < n; i++) {
		memcpy(p, items[i], lens[i]);
		p[lens[i]] = 0;
		p += lens[i] + 1;
	}
	memset(ret, 0, sizeof *ret);
	ret->type = type;
	ret->owned = buf;
	ret->u.list.items = buf;
	ret->u.list.count = n;
	ret->u.list.bytes = bytes;
	int r = type == SHMCFG_SET ? shmcfg__canon_set(ret) : 0;
	if (r) /* a failed call returns nothing to clear */
		shmcfg_value_clear(ret);
	return r;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Sort a set's items bytewise and drop duplicates, in place. */
int shmcfg__canon_set(shmcfg_value *v)
{
	size_t n = v->u.list.count;
	if (n < 2)
		return 0;
	const char **items = shmcfg__malloc(n * sizeof *items);
	char *buf = shmcfg__malloc(v->u.list.bytes);
	if (!items || !buf) {
		shmcfg__free(items);
		shmcfg__free(buf);
		return shmcfg__nomem();
	}
	const char *it = NULL;
	for (size_t i = 0; (it = shmcfg_list_next(v, it)); i++)
		items[i] = it;
	qsort(items, n, sizeof *items, cmp_str);
	char *p = buf;
	size_t out = 0;
	for (size_t i = 0; i < n; i++) {
		if (i && strcmp(items[i], items[i - 1]) == 0)
			continue;
		size_t l = strlen(items[i]) + 1;
		memcpy(p, items[i], l);
		p += l;
		out++;
	}
	shmcfg__free(items);
	shmcfg__free(v->owned);
	v->owned = buf;
	v->u.list.items = buf;
	v->u.list.count = out;
	v->u.list.bytes = (size_t)(p - buf);
	return 0;
}

int shmcfg_value_list(shmcfg_type type, const char *const *items, size_t n, shmcfg_value *ret)
{
	SHMCFG_API_ENTRY;
	if ((type != SHMCFG_LIST && type != SHMCFG_SET) || !ret || (n && !items))
		return shmcfg__err(-EINVAL, "shmcfg_value_list: type must be list or set");
	size_t *lens = shmcfg__malloc((n ? n : 1) * sizeof *lens);
	if (!lens)
		return shmcfg__nomem();
	for (size_t i = 0; i < n; i++) {
		if (!items[i]) {
			shmcfg__free(lens);
			return shmcfg__err(-EINVAL, "shmcfg_value_list: item %zu is NULL", i);
		}
		lens[i] = strlen(items[i]);
	}
	int r = list_build(type, items, lens, n, ret);
	shmcfg__free(lens);
	return r;
}

static int parse_err(shmcfg_type type, const char *text, const char *why)
{
	return shmcfg__err(SHMCFG_E_PARSE, "value '%.80s' is not a valid %s: %s", text,
			   shmcfg_type_name(type), why);
}

static int parse_bool(const char *text, bool *out)
{
	if (!strcmp(text, "1") || !strcasecmp(text, "true")) {
		*out = true;
		return 0;
	}
	if (!strcmp(text, "0") || !strcasecmp(text, "false")) {
		*out = false;
		return 0;
	}
	return parse_err(SHMCFG_BOOL, text, "expected true, false, 1 or 0");
}

/* The digit d (0-9, a-z, A-Z) in base: its value, or -1. */
static int digit_in(char d, int base)
{
	int v = d >= '0' && d <= '9' ? d - '0' : d >= 'a' && d <= 'z' ? d - 'a' + 10 : d >= 'A' && d <= 'Z' ? d - 'A' + 10 : -1;
	return v < base ? v : -1;
}

/*
 * An integer as Python writes one (its int(text, 0), without blanks):
 * decimal, without leading zeros but for 0 itself, or 0x/0o/0b and its
 * digits; a sign; an underscore between digits, or after the prefix.
 */
static int parse_int(const char *text, int64_t *out)
{
	bool neg = *text == '-';
	const char *d = text + (*text == '-' || *text == '+');
	int base = 10;
	if (d[0] == '0' && (d[1] == 'x' || d[1] == 'X'))
		base = 16;
	else if (d[0] == '0' && (d[1] == 'o' || d[1] == 'O'))
		base = 8;
	else if (d[0] == '0' && (d[1] == 'b' || d[1] == 'B'))
		base = 2;
	const char *first = d += base == 10 ? 0 : 2;
	uint64_t u = 0;
	bool over = false;
	for (; *d; d++) {
		/* "_" after a digit, or right after the prefix, and before one */
		if (*d == '_' && (d > first || base != 10) && (d == first || d[-1] != '_') && d[1] && digit_in(d[1], base) >= 0)
			continue;
		int v = digit_in(*d, base);
		if (v < 0)
			return parse_err(SHMCFG_INT, text, "expected an integer");
		over |= u > (UINT64_MAX - (uint64_t)v) / (uint64_t)base;
		u = u * (uint64_t)base + (uint64_t)v;
	}
	if (d == first)
		return parse_err(SHMCFG_INT, text, "expected an integer");
	if (base == 10 && *first == '0' && u != 0)
		return parse_err(SHMCFG_INT, text, "leading zeros are not allowed");
	if (over || u > (neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX))
		return parse_err(SHMCFG_INT, text, "overflows a 64-bit integer");
	*out = neg ? (int64_t)(0 - u) : (int64_t)u;
	return 0;
}

static int parse_float(const char *text, double *out)
{
	if (!*text || isspace((unsigned char)*text))
		return parse_err(SHMCFG_FLOAT, text, "expected a number");
	char *end;
	errno = 0;
	double x = strtod(text, &end);
	if (*end)
		return parse_err(SHMCFG_FLOAT, text, "expected a number");
	if (errno == ERANGE && isinf(x))
		return parse_err(SHMCFG_FLOAT, text, "overflows a double");
	*out = x;
	return 0;
}

/*
 * Whether a failed json_load*() ran out of memory rather than met bad text:
 * jansson says so with json_error_out_of_memory, or says nothing at all (no
 * text) when it could not even start (its lexer's buffer).
 */
bool shmcfg__json_oom(const json_error_t *e)
{
	return json_error_code(e) == json_error_out_of_memory || !e->text[0];
}

/*
 * Untrusted JSON text parsed by jansson, which takes some 200 bytes a value:
 * text of more than max values is refused before it is parsed, so that what
 * a parse takes is bounded by what its caller can keep. Values are counted
 * as '{', '[', ',' and ':' outside strings (plus one), at least one for each
 * value jansson would make. e as json_loadb's, the place the limit was
 * passed for a refusal.
 */
json_t *shmcfg__json_parse(const char *text, size_t len, size_t max, size_t flags, json_error_t *e)
{
	size_t n = 1, line = 1, line_start = 0;
	bool in_str = false;
	for (size_t i = 0; i < len; i++) {
		char c = text[i];
		if (in_str) {
			i += c == '\\'; /* an escaped character, a quote too */
			in_str = c != '"';
		} else if (c == '"')
			in_str = true;
		else if (c == '\n')
			line++, line_start = i + 1;
		else if ((c == '{' || c == '[' || c == ',' || c == ':') && ++n > max) {
			memset(e, 0, sizeof *e);
			e->line = (int)(line < INT_MAX ? line : INT_MAX);
			e->column = (int)(i - line_start + 1 < INT_MAX ? i - line_start + 1 : INT_MAX);
			e->position = (int)(i < INT_MAX ? i : INT_MAX);
			snprintf(e->text, sizeof e->text, "more than %zu values: refused before parsing", max);
			e->text[JSON_ERROR_TEXT_LENGTH - 1] = (char)json_error_invalid_format; /* json_error_code() */
			return NULL;
		}
	}
	return shmcfg__json_loadb(text, len, flags, e);
}

/* A JSON array of strings, or comma-separated text. */
static int parse_list(shmcfg_type type, const char *text, shmcfg_value *ret)
{
	const char *t = text;
	while (isspace((unsigned char)*t))
		t++;
	if (*t == '[') {
		json_error_t e;
		json_t *a = shmcfg__json_parse(text, strlen(text), JSON_MAX_VALUE, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
		if (!a && shmcfg__json_oom(&e))
			return shmcfg__nomem();
		if (!a || !json_is_array(a)) {
			json_decref(a);
			return parse_err(type, text, a ? "expected a JSON array" : e.text);
		}
		size_t n = json_array_size(a);
		const char **items = shmcfg__malloc((n ? n : 1) * sizeof *items);
		size_t *lens = shmcfg__malloc((n ? n : 1) * sizeof *lens);
		int r = items && lens ? 0 : shmcfg__nomem();
		for (size_t i = 0; r == 0 && i < n; i++) {
			json_t *s = json_array_get(a, i);
			if (!json_is_string(s))
				r = parse_err(type, text, "items must be strings");
			else {
				items[i] = json_string_value(s);
				lens[i] = json_string_length(s);
			}
		}
		if (r == 0)
			r = list_build(type, items, lens, n, ret);
		shmcfg__free(items);
		shmcfg__free(lens);
		json_decref(a);
		return r;
	}
	if (!*t)
		return list_build(type, NULL, NULL, 0, ret);
	size_t n = 1;
	for (const char *p = text; *p; p++)
		n += *p == ',';
	const char **items = shmcfg__malloc(n * sizeof *items);
	size_t *lens = shmcfg__malloc(n * sizeof *lens);
	if (!items || !lens) {
		shmcfg__free(items);
		shmcfg__free(lens);
		return shmcfg__nomem();
	}
	size_t i = 0;
	for (const char *p = text;; i++) {
		const char *c = strchr(p, ',');
		size_t l = c ? (size_t)(c - p) : strlen(p);
		/* trim blanks around each item */
		while (l && isspace((unsigned char)*p))
			p++, l--;
		while (l && isspace((unsigned char)p[l - 1]))
			l--;
		items[i] = p;
		lens[i] = l;
		if (!c)
			break;
		p = c + 1;
	}
	int r = list_build(type, items, lens, n, ret);
	shmcfg__free(items);
	shmcfg__free(lens);
	return r;
}

static int parse_str(const char *text, shmcfg_value *ret)
{
	const char *s = text;
	size_t len = strlen(text);
	json_t *j = NULL;
	if (text[0] == '"') {
		json_error_t e;
		j = shmcfg__json_parse(text, strlen(text), JSON_MAX_VALUE, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
		if (!j && shmcfg__json_oom(&e))
			return shmcfg__nomem();
		if (!j || !json_is_string(j)) {
			json_decref(j);
			return parse_err(SHMCFG_STR, text, "bad JSON string literal");
		}
		s = json_string_value(j);
		len = json_string_length(j);
	}
	char *buf = shmcfg__malloc(len + 1);
	if (!buf) {
		json_decref(j);
		return shmcfg__nomem();
	}
	memcpy(buf, s, len);
	buf[len] = 0;
	json_decref(j);
	memset(ret, 0, sizeof *ret);
	ret->type = SHMCFG_STR;
	ret->owned = buf;
	ret->u.str.ptr = buf;
	ret->u.str.len = len;
	return 0;
}

int shmcfg_value_parse(shmcfg_type type, bool nullable, const char *text, shmcfg_value *ret)
{
	SHMCFG_API_ENTRY;
	if (!text || !ret || !shmcfg_type_name(type))
		return shmcfg__err(-EINVAL, "shmcfg_value_parse: bad argument");
	shmcfg_value v = {.type = type};
	if (nullable && (!strcasecmp(text, "none") || !strcmp(text, "null"))) {
		v.is_null = true;
		*ret = v;
		return 0;
	}
	int r = 0;
	switch (type) {
	case SHMCFG_BOOL:
		r = parse_bool(text, &v.u.b);
		break;
	case SHMCFG_INT:
		r = parse_int(text, &v.u.i);
		break;
	case SHMCFG_FLOAT:
		r = parse_float(text, &v.u.f);
		break;
	case SHMCFG_STR:
		return parse_str(text, ret);
	case SHMCFG_LIST:
	case SHMCFG_SET:
		return parse_list(type, text, ret);
	}
	if (r == 0)
		*ret = v;
	return r;
}

/*
 * An environment variable's text (doc/design.md): bools "1"/"0" as the seed,
 * and true/false in any case; strings keep their text exactly; ints and
 * floats parsed; lists and sets as shmcfg_value_parse(). Never null.
 */
int shmcfg__parse_env(shmcfg_type type, const char *var, const char *text, shmcfg_value *ret)
{
	int r;
	if (type == SHMCFG_STR) {
		char *buf = shmcfg__strdup(text);
		if (!buf)
			return shmcfg__nomem();
		memset(ret, 0, sizeof *ret);
		ret->type = SHMCFG_STR;
		ret->owned = buf;
		ret->u.str.ptr = buf;
		ret->u.str.len = strlen(buf);
		r = 0;
	} else
		r = shmcfg_value_parse(type, false, text, ret);
	if (r == SHMCFG_E_PARSE)
		return shmcfg__err(SHMCFG_E_ENV, "environment variable %s: %s", var,
				   shmcfg_errdetail());
	return r;
}

int shmcfg__parse_name_list(const char *text, shmcfg_value *ret)
{
	return shmcfg_value_parse(SHMCFG_LIST, false, text, ret);
}

bool shmcfg_value_equal(const shmcfg_value *a, const shmcfg_value *b)
{
	SHMCFG_API_KEEP;
	if (!a || !b) /* not a value: equal to none */
		return false;
	if (a->type != b->type || a->is_null != b->is_null)
		return false;
	if (a->is_null)
		return true;
	switch (a->type) {
	case SHMCFG_BOOL:
		return a->u.b == b->u.b;
	case SHMCFG_INT:
		return a->u.i == b->u.i;
	case SHMCFG_FLOAT:
		/* bitwise, so that NaN equals itself and -0.0 differs from 0.0 */
		return memcmp(&a->u.f, &b->u.f, sizeof(double)) == 0;
	/* bytes at NULL are not a value: equal to none, as a NULL argument */
	case SHMCFG_STR:
		return a->u.str.len == b->u.str.len &&
		       (!a->u.str.len || (a->u.str.ptr && b->u.str.ptr &&
					  memcmp(a->u.str.ptr, b->u.str.ptr, a->u.str.len) == 0));
	case SHMCFG_LIST:
	case SHMCFG_SET:
		return a->u.list.count == b->u.list.count && a->u.list.bytes == b->u.list.bytes &&
		       ((!a->u.list.bytes && !a->u.list.count) ||
			(a->u.list.items && b->u.list.items &&
			 memcmp(a->u.list.items, b->u.list.items, a->u.list.bytes) == 0));
	}
	return false;
}

int shmcfg__value_copy(const shmcfg_value *src, shmcfg_value *dst)
{
	char *b = NULL;
	if (!src->is_null && src->type == SHMCFG_STR) {
		if (!(b = shmcfg__malloc(src->u.str.len + 1)))
			return shmcfg__nomem();
		memcpy(b, src->u.str.ptr, src->u.str.len);
		b[src->u.str.len] = 0;
	} else if (!src->is_null && (src->type == SHMCFG_LIST || src->type == SHMCFG_SET)) {
		if (!(b = shmcfg__malloc(src->u.list.bytes ? src->u.list.bytes : 1)))
			return shmcfg__nomem();
		memcpy(b, src->u.list.items, src->u.list.bytes);
	}
	/* written in place (src may be dst): no local copy to read back */
	*dst = *src;
	dst->owned = b;
	if (b && src->type == SHMCFG_STR)
		dst->u.str.ptr = b;
	else if (b)
		dst->u.list.items = b;
	return 0;
}
