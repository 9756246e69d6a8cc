/* SPDX-License-Identifier: MIT */
/*
 * Option names as people type them: a full dotted name or a unique suffix
 * of one after a dot, with the ambiguity and did-you-mean rules that shmctl,
 * the Python binding and C programs share (shmcfg_resolve), and the shortest
 * such suffix of an option (shmcfg_short_name). shmcfg_lookup() stays the
 * exact, hashed lookup of hot code.
 */
#include "internal.h"
#include "distance.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/* A name in a detail: at most this many bytes of it (a 64 KiB name must not
 * push the reason out of the 512-byte detail). */
#define NAME_SHOWN 120

static const char *name_of(const shmcfg *h, uint32_t i)
{
	return sstr(h, opt_d(h, i)->name);
}

static uint32_t final_of(const shmcfg *h, uint32_t i)
{
	return opt_d(h, i)->alias_final;
}

/* Whether @p name ends in "." @p suffix (slen = strlen(suffix)). */
static bool ends_with_part(const shmcfg *h, uint32_t i, const char *suffix, size_t slen)
{
	const struct opt_desc *d = opt_d(h, i);
	const char *name = sstr(h, d->name);
	size_t n = d->name.len;
	return slen < n && name[n - slen - 1] == '.' && !memcmp(name + n - slen, suffix, slen);
}

/*
 * The options @p text may name: the one of that full name, else every one
 * whose name ends in "." text. Into ret (nopts entries); returns the count.
 * The caller passed shmcfg__schema_all().
 */
static size_t candidates(const shmcfg *h, const char *text, uint32_t *ret)
{
	uint32_t n = h->lay.nopts;
	size_t len = strlen(text), k = 0;
	for (uint32_t i = 0; i < n; i++)
		if (opt_d(h, i)->name.len == len && !memcmp(name_of(h, i), text, len)) {
			ret[0] = i;
			return 1;
		}
	for (uint32_t i = 0; i < n; i++)
		if (ends_with_part(h, i, text, len))
			ret[k++] = i;
	return k;
}

/*
 * One of the candidates if they are one option: after mapping each to the
 * end of its alias chain a single final target remains. The final target
 * itself if it is a candidate, else the first candidate.
 */
static bool collapse(const shmcfg *h, const uint32_t *c, size_t n, uint32_t *ret)
{
	if (n == 0)
		return false;
	uint32_t f = final_of(h, c[0]);
	for (size_t i = 1; i < n; i++)
		if (final_of(h, c[i]) != f)
			return false;
	for (size_t i = 0; i < n; i++)
		if (c[i] == f) {
			*ret = f;
			return true;
		}
	*ret = c[0];
	return true;
}

/* The shortest suffix of option i's name that resolves to it; c: scratch of
 * nopts entries. */
static const char *short_name(const shmcfg *h, uint32_t i, uint32_t *c)
{
	const char *name = name_of(h, i);
	for (const char *p = name + strlen(name); p > name; p--) {
		if (p[-1] != '.')
			continue;
		uint32_t got;
		size_t k = candidates(h, p, c);
		if (collapse(h, c, k, &got) && final_of(h, got) == final_of(h, i))
			return p;
	}
	return name;
}

const char *shmcfg_short_name(const shmcfg *h, shmcfg_opt opt)
{
	SHMCFG_API_ENTRY;
	if (!h) {
		shmcfg__err(-EINVAL, "shmcfg_short_name: invalid argument (h)");
		return NULL;
	}
	int r = shmcfg__opt_use(h, opt);
	if (!r)
		r = shmcfg__schema_all(h);
	if (r)
		return NULL;
	uint32_t *c = shmcfg__malloc((h->lay.nopts ? h->lay.nopts : 1) * sizeof *c);
	if (!c) {
		shmcfg__nomem();
		return NULL;
	}
	const char *s = short_name(h, opt, c);
	shmcfg__free(c);
	return s;
}

static const char *last_part(const char *name)
{
	const char *d = strrchr(name, '.');
	return d ? d + 1 : name;
}

struct near {
	size_t d;
	uint32_t opt;
	bool contained; /* near only by containing the text */
};

/*
 * Up to 3 options close to @p text, closest first, one per option after
 * aliases: by edit distance to the last part of each name (to the full name
 * when text has dots), within a third of its length (2 for short texts); a
 * name containing a text of 4 or more bytes counts as at the limit.
 */
static size_t suggest(const shmcfg *h, const char *text, struct near best[3])
{
	uint32_t n = h->lay.nopts;
	bool dotted = strchr(text, '.') != NULL;
	size_t tl = strlen(text);
	size_t limit = tl < 6 ? 2 : tl / 3 + 1;
	size_t nb = 0;
	for (uint32_t i = 0; i < n; i++) {
		const char *cand = dotted ? name_of(h, i) : last_part(name_of(h, i));
		size_t d = edit_distance(text, cand);
		bool contained = d > limit && tl >= 4 && strstr(cand, text);
		if (contained)
			d = limit;
		if (d > limit)
			continue;
		bool dup = false;
		for (size_t k = 0; k < nb; k++)
			if (final_of(h, best[k].opt) == final_of(h, i)) {
				dup = true;
				if (d < best[k].d || (d == best[k].d && i == final_of(h, i)))
					best[k] = (struct near){d, i, contained};
			}
		if (dup)
			continue;
		if (nb < 3) {
			best[nb++] = (struct near){d, i, contained};
			continue;
		}
		size_t worst = 0;
		for (size_t k = 1; k < nb; k++)
			if (best[k].d > best[worst].d)
				worst = k;
		if (d < best[worst].d)
			best[worst] = (struct near){d, i, contained};
	}
	for (size_t a = 0; a < nb; a++)
		for (size_t b = a + 1; b < nb; b++)
			if (best[b].d < best[a].d) {
				struct near t = best[a];
				best[a] = best[b];
				best[b] = t;
			}
	return nb;
}

/* Append ", " (unless first) and s to the detail being built in buf, if it
 * fits with room for a closing tail; false when it did not. */
static bool append(char *buf, size_t cap, size_t *used, bool first, const char *s)
{
	int w = snprintf(buf + *used, cap - *used, "%s%s", first ? "" : ", ", s);
	if (w < 0 || (size_t)w >= cap - *used - 24) {
		buf[*used] = 0;
		return false;
	}
	*used += (size_t)w;
	return true;
}

static int ambiguous(const shmcfg *h, const char *text, const uint32_t *c, size_t k)
{
	char list[400];
	size_t used = 0, i = 0;
	list[0] = 0;
	for (; i < k; i++)
		if (!append(list, sizeof list, &used, i == 0, name_of(h, c[i])))
			break;
	if (i < k)
		snprintf(list + used, sizeof list - used, ", ... (%zu options)", k);
	return shmcfg__err(SHMCFG_E_NOOPT, "'%.*s%s' is ambiguous: %s", NAME_SHOWN, text,
			   strlen(text) > NAME_SHOWN ? "..." : "", list);
}

static int unknown(const shmcfg *h, const char *text, uint32_t *c)
{
	struct near best[3];
	size_t nb = suggest(h, text, best);
	char list[400];
	size_t used = 0;
	list[0] = 0;
	for (size_t i = 0; i < nb; i++)
		if (!append(list, sizeof list, &used, i == 0, short_name(h, best[i].opt, c)))
			break;
	bool cut = strlen(text) > NAME_SHOWN;
	if (*list)
		return shmcfg__err(SHMCFG_E_NOOPT, "no option '%.*s%s' in segment '%s'; did you mean %s?",
				   NAME_SHOWN, text, cut ? "..." : "", h->name, list);
	return shmcfg__err(SHMCFG_E_NOOPT, "no option '%.*s%s' in segment '%s'", NAME_SHOWN, text,
			   cut ? "..." : "", h->name);
}

/*
 * " (did you mean FULL.NAME?)" of the option closest to text, or "": for a
 * name in a file (a dump's keys), where only a full name is taken. Only the
 * first few calls of a file (*tries counts them) look: each costs an edit
 * distance to every name. Only a typo is answered: one option closer than
 * any other, by edits that keep more than half of the text (not a part of
 * many names, "torch._dynamo"). buf holds NEAR_FULL_NAME_BYTES.
 */
void shmcfg__near_full_name(const shmcfg *h, const char *text, unsigned *tries, char buf[NEAR_FULL_NAME_BYTES])
{
	struct near best[3];
	buf[0] = 0;
	if (++*tries > 8 || shmcfg__schema_all(h))
		return;
	size_t nb = suggest(h, text, best);
	if (nb && !best[0].contained && best[0].d * 2 < strlen(text) && (nb == 1 || best[1].d > best[0].d))
		snprintf(buf, NEAR_FULL_NAME_BYTES, " (did you mean %s?)", name_of(h, best[0].opt)); /* an alias too */
}

int shmcfg_resolve(const shmcfg *h, const char *name, shmcfg_opt *ret)
{
	SHMCFG_API_ENTRY;
	assert_return(h && name && ret, -EINVAL);
	if (!*name)
		return shmcfg__err(SHMCFG_E_NOOPT, "empty option name");
	/* a full name: the hashed index, as hot code looks names up */
	int r = shmcfg_lookup(h, name, ret);
	if (r != SHMCFG_E_NOOPT)
		return r;
	if ((r = shmcfg__schema_all(h)))
		return r;
	uint32_t *c = shmcfg__malloc((h->lay.nopts ? h->lay.nopts : 1) * sizeof *c);
	if (!c)
		return shmcfg__nomem();
	size_t k = candidates(h, name, c);
	uint32_t got;
	if (collapse(h, c, k, &got)) {
		shmcfg__clear_err(); /* the lookup's "no such option" */
		shmcfg__warn_deprecated(h, got);
		*ret = got;
		r = 0;
	} else
		r = k > 1 ? ambiguous(h, name, c, k) : unknown(h, name, c);
	shmcfg__free(c);
	return r;
}
