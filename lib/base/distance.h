/* SPDX-License-Identifier: MIT */
/*
 * The edit distance behind every "did you mean" of shmcfg: the library's
 * option names (schema/optname.c) and shmctl's commands and flags
 * (tools/shmctl-util.c), shmcfg-sync's flags. Header-only, so the tools share it without the
 * library exporting a call that is no part of its job.
 */
#ifndef SHMCFG_DISTANCE_H
#define SHMCFG_DISTANCE_H

#include <stdint.h>
#include <string.h>

/* Longer texts are no typo of a name: their distance is SIZE_MAX. */
#define EDIT_DISTANCE_MAX_LEN 256

/*
 * Edits and swaps of neighbours ("shw", "sohw") between a and b: the
 * optimal string alignment distance, in three rows of its table.
 */
static inline size_t edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	if (la > EDIT_DISTANCE_MAX_LEN || lb > EDIT_DISTANCE_MAX_LEN)
		return SIZE_MAX;
	size_t rows[3][EDIT_DISTANCE_MAX_LEN + 1], *pp = rows[0], *p = rows[1], *c = rows[2];
	for (size_t j = 0; j <= lb; j++)
		p[j] = j;
	for (size_t i = 1; i <= la; i++) {
		c[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t best = p[j - 1] + (a[i - 1] != b[j - 1]);
			if (p[j] + 1 < best)
				best = p[j] + 1;
			if (c[j - 1] + 1 < best)
				best = c[j - 1] + 1;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && pp[j - 2] + 1 < best)
				best = pp[j - 2] + 1;
			c[j] = best;
		}
		size_t *t = pp;
		pp = p;
		p = c;
		c = t;
	}
	return p[lb];
}

/* The word of words[] closest to @p typed (a typo: a few edits or swapped
 * neighbours, or an abbreviation), NULL if none is close. */
static inline const char *closest_word(const char *typed, const char *const *words, size_t n)
{
	size_t tl = strlen(typed), limit = tl < 4 ? 1 : tl < 9 ? 2 : 3, best = SIZE_MAX;
	const char *pick = NULL;
	for (size_t i = 0; i < n; i++) {
		size_t d = edit_distance(typed, words[i]);
		/* a word the text begins (an abbreviation) is close too */
		if (d > limit && tl >= 2 && !strncmp(words[i], typed, tl))
			d = limit;
		if (d <= limit && d < best) {
			best = d;
			pick = words[i];
		}
	}
	return pick;
}

#endif
