/* SPDX-License-Identifier: MIT */
/*
 * A text that grows in the heap, through the resource seam: what the
 * library writes out (dumps, code, schema files, JSON). The first failed
 * append keeps its error in err and makes every later one a no-op, so a
 * writer appends without checking and looks at err once, at the end; the
 * text is NUL-terminated whenever err is 0.
 */
#include "internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void shmcfg__text_putn(struct shmcfg__text *b, const char *s, size_t n)
{
	if (b->err)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->len + n + 1)
			cap *= 2;
		char *np = shmcfg__realloc(b->p, cap);
		if (!np) {
			b->err = shmcfg__nomem();
			return;
		}
		b->p = np;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = 0;
}

void shmcfg__text_put(struct shmcfg__text *b, const char *s)
{
	shmcfg__text_putn(b, s, strlen(s));
}

void shmcfg__text_printf(struct shmcfg__text *b, const char *fmt, ...)
{
	char small[128];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(small, sizeof small, fmt, ap);
	va_end(ap);
	if (b->err)
		return;
	if (n < 0) {
		b->err = shmcfg__err(-EINVAL, "a text that cannot be formatted (%s)", fmt);
		return;
	}
	if ((size_t)n < sizeof small) {
		shmcfg__text_putn(b, small, (size_t)n);
		return;
	}
	char *big = shmcfg__malloc((size_t)n + 1);
	if (!big) {
		b->err = shmcfg__nomem();
		return;
	}
	va_start(ap, fmt);
	vsnprintf(big, (size_t)n + 1, fmt, ap);
	va_end(ap);
	shmcfg__text_putn(b, big, (size_t)n);
	shmcfg__free(big);
}

void shmcfg__hex16(const uint8_t b[16], char out[33])
{
	for (int i = 0; i < 16; i++)
		snprintf(out + 2 * i, 3, "%02x", b[i]);
}
