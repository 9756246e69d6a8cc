/* SPDX-License-Identifier: MIT */
/* Terminal-safe text (tools/termsafe.h). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "termsafe.h"

/* The valid shortest-form UTF-8 character at p (n > 0 bytes): its length
 * and code point, or 0 (overlong forms, surrogates and values past U+10FFFF
 * are none). */
static size_t utf8_char(const unsigned char *p, size_t n, uint32_t *cp)
{
	size_t len;
	uint32_t min;
	if (p[0] < 0x80) {
		*cp = p[0];
		return 1;
	} else if ((p[0] & 0xe0) == 0xc0) {
		len = 2, min = 0x80, *cp = p[0] & 0x1f;
	} else if ((p[0] & 0xf0) == 0xe0) {
		len = 3, min = 0x800, *cp = p[0] & 0x0f;
	} else if ((p[0] & 0xf8) == 0xf0) {
		len = 4, min = 0x10000, *cp = p[0] & 0x07;
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		*cp = *cp << 6 | (p[i] & 0x3f);
	}
	if (*cp < min || (*cp >= 0xd800 && *cp <= 0xdfff) || *cp > 0x10ffff)
		return 0;
	return len;
}

/* A character that reorders or hides text around it: the bidirectional
 * marks, embeddings, overrides and isolates (U+061C, U+200E, U+200F,
 * U+202A..U+202E, U+2066..U+2069: "Trojan Source" makes one line read as
 * another) and the invisible spaces (U+200B, U+2060, U+FEFF: two names
 * that look alike). The joiners U+200C and U+200D stay: scripts and emoji
 * need them, and they move nothing. */
static bool term_invisible(uint32_t cp)
{
	return cp == 0x061c || cp == 0x200b || cp == 0x200e || cp == 0x200f || (cp >= 0x202a && cp <= 0x202e) ||
	       cp == 0x2060 || (cp >= 0x2066 && cp <= 0x2069) || cp == 0xfeff;
}

size_t term_char(const char *p, size_t n, const char *allow, bool *unsafe)
{
	uint32_t cp;
	size_t len = utf8_char((const unsigned char *)p, n, &cp);
	if (!len) { /* a byte that starts no character */
		*unsafe = true;
		return 1;
	}
	*unsafe = (cp < 0x20 && !(cp && strchr(allow, (int)cp))) || (cp >= 0x7f && cp <= 0x9f) ||
		  cp == 0x2028 || cp == 0x2029 || term_invisible(cp);
	return len;
}

bool term_utf8(const char *p, size_t n)
{
	uint32_t cp;
	for (size_t i = 0, len; i < n; i += len)
		if (!(len = utf8_char((const unsigned char *)p + i, n - i, &cp)))
			return false;
	return true;
}

bool term_safe(const char *p, size_t n, const char *allow)
{
	bool unsafe = false;
	for (size_t i = 0; i < n && !unsafe;)
		i += term_char(p + i, n - i, allow, &unsafe);
	return !unsafe;
}

uint32_t term_codepoint(const char *p, size_t len)
{
	uint32_t cp;
	return utf8_char((const unsigned char *)p, len, &cp) == len ? cp : 0xfffd;
}

static size_t escape_allow(const char *p, size_t n, const char *allow, char *out, size_t size)
{
	size_t o = 0;
	for (size_t i = 0; i < n;) {
		bool unsafe;
		size_t len = term_char(p + i, n - i, allow, &unsafe);
		if (o + (unsafe ? 4 * len : len) >= size)
			break;
		for (size_t k = 0; unsafe && k < len; k++)
			o += (size_t)sprintf(out + o, "\\x%02x", (unsigned char)p[i + k]);
		if (!unsafe)
			memcpy(out + o, p + i, len), o += len;
		i += len;
	}
	out[o] = '\0';
	return o;
}

size_t term_escape(const char *p, size_t n, char *out, size_t size)
{
	return escape_allow(p, n, "", out, size);
}

char *term_escaped_allow(const char *p, size_t n, const char *allow)
{
	char *out = malloc(4 * n + 1); /* a byte -> \xNN at most */
	if (out)
		escape_allow(p, n, allow, out, 4 * n + 1);
	return out;
}

char *term_escaped(const char *p, size_t n)
{
	return term_escaped_allow(p, n, "");
}
