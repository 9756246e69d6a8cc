/* SPDX-License-Identifier: MIT */
/*
 * Terminal-safe text: the one rule for what shmctl and shmcfg-sync print of
 * text that others choose (a segment's values and schema, names planted in
 * /dev/shm, etcd's keys and values, the sync record). Unsafe on a terminal:
 * a C0 control (but those the caller's line format allows), DEL, a C1
 * control U+0080..U+009F (U+009B is CSI), U+2028 and U+2029 (line breaks to
 * many readers), the bidirectional controls and invisible spaces (U+061C,
 * U+200B, U+200E, U+200F, U+202A..U+202E, U+2060, U+2066..U+2069, U+FEFF:
 * text that reads as other text), and each byte that starts no valid UTF-8 character (an
 * invalid, overlong or cut sequence, a surrogate: a lone 0x9b is CSI to an
 * 8-bit terminal). Printable UTF-8 (accents, CJK, emoji) is safe.
 */
#ifndef SHMCFG_TERMSAFE_H
#define SHMCFG_TERMSAFE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The character at p (n > 0 bytes there): its length in bytes (1 for a byte
 * that starts no valid character); *unsafe says whether it must not reach a
 * terminal as it is. allow: the C0 controls the caller prints raw (e.g.
 * "\n"), or "". */
size_t term_char(const char *p, size_t n, const char *allow, bool *unsafe);

/* Whether n bytes at p are valid UTF-8 (any character, controls too). */
bool term_utf8(const char *p, size_t n);

/* Whether n bytes at p hold no unsafe character. */
bool term_safe(const char *p, size_t n, const char *allow);

/* The code point of an unsafe character of len bytes at p (from
 * term_char), for an escape that names it; U+FFFD for an invalid byte. */
uint32_t term_codepoint(const char *p, size_t len);

/* n bytes at p as one line: each byte of an unsafe character (a newline
 * too) as \xNN, the rest as it is. Writes whole characters only, at most
 * size - 1 bytes and a NUL (size > 0); returns the length written. */
size_t term_escape(const char *p, size_t n, char *out, size_t size);

/* term_escape() into a malloc'd buffer that holds it all; NULL on ENOMEM. */
char *term_escaped(const char *p, size_t n);
/* ... but the C0 controls in allow (e.g. "\n": a doc's own lines) kept. */
char *term_escaped_allow(const char *p, size_t n, const char *allow);

#endif
