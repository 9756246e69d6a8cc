/* SPDX-License-Identifier: MIT */
/*
 * Options of an attached segment: lookup by name, descriptions, and the
 * checks every written value passes (type, null, range, choices), the same
 * for transactions and patches; deprecation warnings.
 */
#include "internal.h"
#include "schema.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

/* the lookup hashes with shmcfg__name_hash's XXH3_64bits inlined: a call
 * through the PLT cost ~1 ns of a lookup's ~15 (xxhash.h renames
 * its inline copies) */
#define XXH_INLINE_ALL
#include <xxhash.h>

/*
 * Probes of the name index a lookup makes before it takes the ids sorted
 * by name instead. The builder's index is at most half full: a lookup of
 * honest names of random hashes probes 2.5 entries on average, and a run
 * of 64 full entries is a writer's index (every entry naming one option:
 * each lookup would probe the whole index) or names chosen to collide.
 */
#define LOOKUP_PROBES_MAX 64

/* The option of @p name (len bytes) by binary search of the ids sorted by
 * name: O(log n) whatever the index holds. */
static int lookup_sorted(const shmcfg *h, const char *name, size_t len, uint32_t *ret)
{
	const uint32_t *ids;
	int r = shmcfg__schema_by_name(h, &ids);
	if (r)
		return r;
	size_t lo = 0, hi = h->lay.nopts;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		struct sref x = h->desc[ids[mid]].name;
		int c = memcmp(sstr(h, x), name, x.len < len ? x.len : len);
		if (!c)
			c = (x.len > len) - (x.len < len);
		if (!c) {
			*ret = ids[mid];
			return 0;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*ret = UINT32_MAX;
	return 0;
}

/*
 * Look @p name up; @p warn: say so if the option is deprecated (the
 * public call). A slot whose option was validated and is plain costs its
 * cache entry (h->lk) and, if the length matches, the name; any other
 * slot goes through the name index, validates its option and, if plain,
 * fills the slot's entry. Past LOOKUP_PROBES_MAX probes, the ids sorted
 * by name answer.
 */
static int lookup(const shmcfg *h, const char *name, shmcfg_opt *ret, bool warn)
{
	size_t len = strlen(name);
	uint32_t mask = h->sch->index_size - 1;
	uint64_t hv = XXH3_64bits(name, len); /* shmcfg__name_hash */
	for (uint32_t probe = 0; probe <= mask; probe++, hv++) {
		if (__builtin_expect(probe == LOOKUP_PROBES_MAX, 0)) {
			uint32_t id;
			int r = lookup_sorted(h, name, len, &id);
			if (r)
				return r;
			if (id == UINT32_MAX)
				break;
			if (warn && !(__atomic_load_n(&h->opt_ok[id], __ATOMIC_ACQUIRE) & OPT_PLAIN))
				shmcfg__warn_deprecated(h, id);
			*ret = id;
			return 0;
		}
		uint32_t slot = (uint32_t)(hv & mask);
		/* acquire: pairs with the release store below, made after the
		 * option was validated and its name's page copied */
		uint64_t e = __atomic_load_n(&h->lk[slot], __ATOMIC_ACQUIRE);
		if (e) {
			if (((e >> LK_ID_BITS) & (LK_LEN_MAX - 1)) == len && memcmp(h->strings + (e >> 32), name, len) == 0) {
				*ret = (uint32_t)e & ((1u << LK_ID_BITS) - 1);
				return 0;
			}
			continue;
		}
		/* each probe's id is range-checked, and its option validated
		 * before its name is compared */
		uint32_t id;
		int r = schema_index_at(h, slot, &id);
		if (r)
			return r;
		if (id == UINT32_MAX)
			break;
		/* validated, and an alias's final target too */
		if ((r = shmcfg__opt_use(h, id)))
			return r;
		/* its name's bytes lie in strings (copied) */
		const struct opt_desc *d = opt_d(h, id);
		unsigned char ok = __atomic_load_n(&h->opt_ok[id], __ATOMIC_ACQUIRE);
		if ((ok & OPT_PLAIN) && d->name.len && d->name.len < LK_LEN_MAX)
			/* release: pairs with the acquire load above; threads
			 * that fill one slot store the same word */
			__atomic_store_n(&h->lk[slot],
					 (uint64_t)d->name.off << 32 | (uint64_t)d->name.len << LK_ID_BITS | id,
					 __ATOMIC_RELEASE);
		if (d->name.len != len || (len && memcmp(h->strings + d->name.off, name, len) != 0))
			continue;
		if (warn && !(ok & OPT_PLAIN))
			shmcfg__warn_deprecated(h, id);
		*ret = id;
		return 0;
	}
	/* a suffix ("recompile_limit") is shmcfg_resolve()'s, which says "did you mean" */
	return shmcfg__err(SHMCFG_E_NOOPT, "%s: no such option in segment %s (a full name; shmcfg_resolve() also "
			   "takes a unique suffix)", name, h->name);
}

int shmcfg_lookup(const shmcfg *h, const char *name, shmcfg_opt *ret)
{
	SHMCFG_API_ENTRY;
	assert_return(h && name && ret, -EINVAL);
	return lookup(h, name, ret, true);
}

int shmcfg__lookup(const shmcfg *h, const char *name, shmcfg_opt *ret)
{
	return lookup(h, name, ret, false);
}

int shmcfg_opt_info(const shmcfg *h, shmcfg_opt opt, shmcfg_optinfo *ret)
{
	SHMCFG_API_ENTRY;
	assert_return(h && ret, -EINVAL);
	int r = shmcfg__opt_use(h, opt);
	if (r)
		return r;
	const struct opt_desc *d = opt_d(h, opt);
	memset(ret, 0, sizeof *ret);
	ret->name = sstr(h, d->name);
	ret->type = d->type;
	ret->flags = d->flags & 0xffff;
	ret->doc = sstr(h, d->doc);
	ret->env_default = sstr(h, d->env_default);
	ret->n_env_default = d->n_env_default;
	ret->env_force = sstr(h, d->env_force);
	ret->n_env_force = d->n_env_force;
	ret->knob = d->flags & DESC_F_HAS_KNOB ? sstr(h, d->knob) : NULL;
	ret->deprecated = d->flags & SHMCFG_F_DEPRECATED ? sstr(h, d->deprecated) : NULL;
	ret->alias = d->alias;
	ret->alias_final = d->alias_final;
	ret->has_min = d->flags & DESC_F_HAS_MIN;
	ret->has_max = d->flags & DESC_F_HAS_MAX;
	/* the cells were validated with the descriptor */
	if (ret->has_min)
		(void)shmcfg__value_from_cell(&d->min, h->strings, h->strings_size, &ret->min);
	if (ret->has_max)
		(void)shmcfg__value_from_cell(&d->max, h->strings, h->strings_size, &ret->max);
	(void)shmcfg__value_from_cell(&d->choices, h->strings, h->strings_size, &ret->choices);
	(void)shmcfg__value_from_cell(&d->def, h->strings, h->strings_size, &ret->def);
	ret->n_implies = d->implies_n;
	return 0;
}

int shmcfg_opt_implies(const shmcfg *h, shmcfg_opt opt, size_t i, shmcfg_opt *target,
		       shmcfg_value *value)
{
	SHMCFG_API_ENTRY;
	assert_return(h && target && value, -EINVAL);
	int r = shmcfg__opt_use(h, opt);
	if (r)
		return r;
	const struct opt_desc *d = opt_d(h, opt);
	if (i >= d->implies_n)
		return -ERANGE;
	const struct implies_ent *e = &h->implies[d->implies_first + i];
	*target = e->target;
	return shmcfg__value_from_cell(&e->value, h->strings, h->strings_size, value);
}

/* Validate a value for an option of an attached segment. */
int shmcfg__value_check(const shmcfg *h, shmcfg_opt opt, const shmcfg_value *v)
{
	const struct opt_desc *d = opt_d(h, opt);
	/* a bound or choices that are absent (or do not decode) are null: a
	 * constant, not three values zeroed for every set */
	static const shmcfg_value none = {.is_null = true};
	shmcfg_value min, max, choices;
	const shmcfg_value *pmin = &none, *pmax = &none, *pchoices = &none;
	if ((d->flags & DESC_F_HAS_MIN) && !shmcfg__value_from_cell(&d->min, h->strings, h->strings_size, &min))
		pmin = &min;
	if ((d->flags & DESC_F_HAS_MAX) && !shmcfg__value_from_cell(&d->max, h->strings, h->strings_size, &max))
		pmax = &max;
	/* no choices is the empty list: no bytes to decode */
	if (META_LEN(d->choices.meta) && !shmcfg__value_from_cell(&d->choices, h->strings, h->strings_size, &choices))
		pchoices = &choices;
	return shmcfg__check_value(sstr(h, d->name), d->type, d->flags, pmin, pmax, pchoices, v);
}

int shmcfg_verify_handles(const shmcfg *h, const char *const *names, const shmcfg_type *types,
			  size_t n)
{
	SHMCFG_API_ENTRY;
	assert_return(h && (names || !n) && (types || !n), -EINVAL);
	if (n > h->lay.nopts)
		return shmcfg__err(SHMCFG_E_SCHEMA, "%s: has %u options, the program expects %zu",
				   h->name, h->lay.nopts, n);
	for (size_t i = 0; i < n; i++) {
		if (!names[i])
			return shmcfg__err(-EINVAL, "shmcfg_verify_handles: names[%zu] is NULL", i);
		int r = shmcfg__opt_use(h, (shmcfg_opt)i);
		if (r)
			return r;
		const struct opt_desc *d = opt_d(h, i);
		if (strcmp(sstr(h, d->name), names[i]) != 0)
			return shmcfg__err(SHMCFG_E_SCHEMA, "%s: option %zu is %s, the program expects %s",
					   h->name, i, sstr(h, d->name), names[i]);
		if (d->type != (uint32_t)types[i])
			return shmcfg__err(SHMCFG_E_SCHEMA, "%s: %s is %s, the program expects %s", h->name,
					   names[i], shmcfg_type_name(d->type),
					   shmcfg_type_name(types[i]) ?: "?");
	}
	return 0;
}

/* A deprecated option, and each deprecated one its alias chain passes
 * (the seed's getattr warns at each module an alias leads to), warns once
 * per handle. The chain is as long as the schema at most. */
void shmcfg__warn_deprecated(const shmcfg *h, shmcfg_opt opt)
{
	for (uint32_t steps = 0; opt != SHMCFG_NO_OPT && steps <= h->lay.nopts; steps++) {
		if (shmcfg__opt_use(h, opt))
			return;
		const struct opt_desc *d = opt_d(h, opt);
		if ((d->flags & SHMCFG_F_DEPRECATED) && !atomic_exchange(&h->warned[opt], 1))
			shmcfg__log(SHMCFG_LOG_WARNING, "%s is deprecated: %s", sstr(h, d->name),
				    sstr(h, d->deprecated));
		opt = d->alias;
	}
}

/*
 * What every write of an option starts with (transactions and patches): the
 * handle in range, the option and its final target validated (on first
 * use), a deprecation warning, and the alias's final target, which is what
 * is written.
 */
int shmcfg__target_of(const shmcfg *h, shmcfg_opt opt, shmcfg_opt *final)
{
	int r = shmcfg__opt_use(h, opt);
	if (r)
		return r;
	const struct opt_desc *d = opt_d(h, opt);
	if ((d->flags & SHMCFG_F_DEPRECATED) || d->alias != SHMCFG_NO_OPT) /* else nothing to warn of */
		shmcfg__warn_deprecated(h, opt);
	*final = d->alias_final;
	return 0;
}

int shmcfg_value_check(const shmcfg *h, shmcfg_opt opt, const shmcfg_value *v)
{
	SHMCFG_API_ENTRY;
	assert_return(h && v, -EINVAL);
	shmcfg_opt f;
	int r = shmcfg__target_of(h, opt, &f);
	return r ? r : shmcfg__value_check(h, f, v);
}

/*
 * The one preparation of a value for a layer, for transactions and patches:
 * checked against the option (type, null, range, choices, a list's shape),
 * copied, an int given to a float option made a float, a set made canonical
 * (sorted, unique). *out is the caller's to clear.
 */
int shmcfg__prepare_value(const shmcfg *h, shmcfg_opt final, const shmcfg_value *v, shmcfg_value *out)
{
	const struct opt_desc *d = opt_d(h, final);
	if (!v->is_null && v->type == d->type && v->type >= SHMCFG_BOOL && v->type <= SHMCFG_FLOAT &&
	    !(d->flags & (DESC_F_HAS_MIN | DESC_F_HAS_MAX)) && !META_LEN(d->choices.meta)) {
		/* a bool, int or float of the option's type, no bound, no choices:
		 * valid as it is, and nothing to copy (most sets) */
		*out = *v;
		out->owned = NULL;
		return 0;
	}
	int r = shmcfg__value_check(h, final, v);
	if (r)
		return r;
	if (!shmcfg__list_ok(v))
		return shmcfg__err(SHMCFG_E_PARSE, "%s: malformed list value (count %zu, %zu bytes)",
				   sstr(h, opt_d(h, final)->name), v->u.list.count, v->u.list.bytes);
	if ((r = shmcfg__value_copy(v, out)))
		return r;
	if (!out->is_null && out->type == SHMCFG_INT && opt_d(h, final)->type == SHMCFG_FLOAT)
		out->u.f = (double)v->u.i;
	if (!out->is_null && out->type == SHMCFG_SET && (r = shmcfg__canon_set(out))) {
		shmcfg_value_clear(out);
		return r;
	}
	out->type = opt_d(h, final)->type;
	return 0;
}

/* Text for an option (its final target's type), a parse error naming it. */
int shmcfg__parse_for(const shmcfg *h, shmcfg_opt opt, const char *text, shmcfg_value *out)
{
	int r = shmcfg__opt_use(h, opt);
	if (r)
		return r;
	const struct opt_desc *d = opt_d(h, opt_d(h, opt)->alias_final);
	/* `=None` meant null, not the text "None" (which it silently became):
	 * a string option that cannot be null says so; the quoted literal
	 * "None" is the text */
	if (d->type == SHMCFG_STR && !(d->flags & SHMCFG_F_NULLABLE) &&
	    (!strcasecmp(text, "none") || !strcasecmp(text, "null")))
		return shmcfg__err(SHMCFG_E_NULLVAL,
				   "%s: %s: the option is not nullable (for the text, quote it as JSON: \"%s\")",
				   sstr(h, opt_d(h, opt)->name), text, text);
	r = shmcfg_value_parse(d->type, d->flags & SHMCFG_F_NULLABLE, text, out);
	if (r == SHMCFG_E_PARSE) {
		char why[400];
		snprintf(why, sizeof why, "%s", shmcfg_errdetail());
		r = shmcfg__err(r, "%s: %s", sstr(h, opt_d(h, opt)->name), why);
	}
	return r;
}

int shmcfg_value_parse_opt(const shmcfg *h, shmcfg_opt opt, const char *text, shmcfg_value *ret)
{
	SHMCFG_API_ENTRY;
	assert_return(h && text && ret, -EINVAL);
	return shmcfg__parse_for(h, opt, text, ret);
}
