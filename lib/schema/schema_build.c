/* SPDX-License-Identifier: MIT */
/*
 * A schema into a segment: the built form (ids in declaration order, the
 * name index, ranks in implication order, dependents) and its serialisation
 * into the schema region, whose digest is the schema hash.
 */
#include "internal.h"
#include "schema.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include <xxhash.h>

struct built_schema {
	const shmcfg_schema *s;
	uint32_t *alias, *alias_final; /* per option */
	struct implies_ent *implies;   /* values' strings are indices into implies_vals */
	shmcfg_value *implies_vals;
	uint32_t nimplies;
	uint32_t *imp_first, *imp_n; /* per option: its run of implies entries */
	uint32_t *topo;              /* impliers before their targets: gives the ranks */
	uint32_t *rank;              /* per option: its position in topo */
	uint32_t *rdep_first, *rdep_n, *rdeps; /* per option: its dependents (RDEP_ALIAS) */
	uint32_t nrdeps;
	uint64_t strings_bytes;
	uint64_t bytes;
};

static uint64_t value_bytes(const shmcfg_value *v)
{
	if (v->is_null)
		return 0;
	if (v->type == SHMCFG_STR)
		return v->u.str.len + 1;
	if (v->type == SHMCFG_LIST || v->type == SHMCFG_SET)
		return v->u.list.bytes + 1;
	return 0;
}

void shmcfg__schema_built_free(struct built_schema *b)
{
	if (!b)
		return;
	for (uint32_t i = 0; i < b->nimplies; i++)
		shmcfg_value_clear(&b->implies_vals[i]);
	shmcfg__free(b->alias);
	shmcfg__free(b->alias_final);
	shmcfg__free(b->implies);
	shmcfg__free(b->implies_vals);
	shmcfg__free(b->topo);
	shmcfg__free(b->imp_first);
	shmcfg__free(b->imp_n);
	shmcfg__free(b->rank);
	shmcfg__free(b->rdep_first);
	shmcfg__free(b->rdep_n);
	shmcfg__free(b->rdeps);
	shmcfg__free(b);
}

/*
 * Each option's dependents, for resolving only what a commit changes: the
 * implications that target it, in the order a full resolution in topo order
 * meets them (their implier's rank, then their index: the first active one
 * wins), then the aliases whose final target it is. Implications declared
 * by an alias are not applied (aliases are not resolved themselves).
 */
static int build_rdeps(struct built_schema *b, uint32_t n)
{
	b->rank = shmcfg__malloc(n * sizeof(uint32_t));
	b->rdep_first = shmcfg__calloc(n, sizeof(uint32_t));
	b->rdep_n = shmcfg__calloc(n, sizeof(uint32_t));
	if (!b->rank || !b->rdep_first || !b->rdep_n)
		return shmcfg__nomem();
	for (uint32_t t = 0; t < n; t++)
		b->rank[b->topo[t]] = t;
	uint32_t total = 0;
	for (uint32_t k = 0; k < b->nimplies; k++)
		if (b->alias[b->implies[k].implier] == SHMCFG_NO_OPT)
			b->rdep_n[b->implies[k].target]++, total++;
	for (uint32_t i = 0; i < n; i++)
		if (b->alias[i] != SHMCFG_NO_OPT)
			b->rdep_n[b->alias_final[i]]++, total++;
	b->rdeps = shmcfg__malloc((total ? total : 1) * sizeof(uint32_t));
	uint32_t *fill = shmcfg__calloc(n, sizeof(uint32_t));
	if (!b->rdeps || !fill) {
		shmcfg__free(fill);
		return shmcfg__nomem();
	}
	for (uint32_t i = 0, pos = 0; i < n; i++) {
		b->rdep_first[i] = pos;
		pos += b->rdep_n[i];
	}
	/* impliers in topo order, each one's implications in index order */
	for (uint32_t t = 0; t < n; t++) {
		uint32_t p = b->topo[t];
		if (b->alias[p] != SHMCFG_NO_OPT)
			continue;
		for (uint32_t k = b->imp_first[p]; k < b->imp_first[p] + b->imp_n[p]; k++) {
			uint32_t tg = b->implies[k].target;
			b->rdeps[b->rdep_first[tg] + fill[tg]++] = k;
		}
	}
	for (uint32_t i = 0; i < n; i++)
		if (b->alias[i] != SHMCFG_NO_OPT) {
			uint32_t f = b->alias_final[i];
			b->rdeps[b->rdep_first[f] + fill[f]++] = i | RDEP_ALIAS;
		}
	b->nrdeps = total;
	shmcfg__free(fill);
	return 0;
}

/* An error of option i's declaration: from a schema file, it names the
 * file and the line where i is declared, as the file's parse errors do. */
static int decl_err(const shmcfg_schema *s, uint32_t i, int code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int decl_err(const shmcfg_schema *s, uint32_t i, int code, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (s->file && s->opts[i].line)
		return shmcfg__err(code, "%s:%u: %s", s->file, s->opts[i].line, msg);
	return shmcfg__err(code, "%s", msg);
}

/*
 * A cycle of options, cyc[0] -> cyc[1] -> ... -> cyc[n - 1] -> cyc[0], as
 * the seed names one ("config implication cycle: x -> z -> y -> x"), from
 * its first declared member, at that member's line. A cycle too long for
 * the detail text names its first members and how many more there are.
 */
static int cycle_err(const shmcfg_schema *s, const char *what, const uint32_t *cyc, uint32_t n)
{
	uint32_t first = 0;
	for (uint32_t k = 1; k < n; k++)
		if (cyc[k] < cyc[first])
			first = k;
	const char *start = s->opts[cyc[first]].name;
	char text[400];
	size_t len = 0;
	uint32_t k = 0;
	for (; k < n; k++) {
		const char *name = s->opts[cyc[(first + k) % n]].name;
		/* room for this name, and for "-> ... (N more) -> start" after it */
		if (k && len + strlen(name) + strlen(start) + 40 >= sizeof text)
			break;
		len += (size_t)snprintf(text + len, sizeof text - len, "%s -> ", name);
	}
	if (k < n)
		snprintf(text + len, sizeof text - len, "... (%u more) -> %s", n - k, start);
	else
		snprintf(text + len, sizeof text - len, "%s", start);
	return decl_err(s, cyc[first], SHMCFG_E_CYCLE, "config %s cycle: %s", what, text);
}

/*
 * After Kahn's sort stopped short, the options left (indeg > 0) are on a
 * cycle or downstream of one; each has an implier that was left too. So
 * walking from one to such an implier, again and again, must come back to
 * an option met before: the walk from there, reversed, is a cycle.
 */
static int implication_cycle(const shmcfg_schema *s, const struct built_schema *b, const uint32_t *indeg)
{
	uint32_t n = s->n, start = UINT32_MAX;
	uint32_t *pred = shmcfg__malloc(n * sizeof *pred), *seen = shmcfg__calloc(n, sizeof *seen);
	if (!pred || !seen) {
		shmcfg__free(pred);
		shmcfg__free(seen);
		return shmcfg__nomem();
	}
	for (uint32_t k = 0; k < b->nimplies; k++) {
		uint32_t p = b->implies[k].implier, t = b->implies[k].target;
		if (indeg[p] && indeg[t])
			pred[t] = p, start = t;
	}
	/* seen[i]: the step (from 1) at which the walk met option i */
	uint32_t i = start, step = 0;
	while (!seen[i]) {
		seen[i] = ++step;
		i = pred[i];
	}
	/* i, pred[i], ... back to i went against the implications: the cycle
	 * is that walk reversed (seen[] is free to hold it now) */
	uint32_t len = step + 1 - seen[i];
	for (uint32_t k = 0, a = i; k < len; k++, a = pred[a])
		seen[len - 1 - k] = a;
	int r = cycle_err(s, "implication", seen, len);
	shmcfg__free(pred);
	shmcfg__free(seen);
	return r;
}

/* Resolve aliases and implications, reject cycles, compute the orders. */
int shmcfg__schema_build(const shmcfg_schema *s, struct built_schema **ret)
{
	uint32_t n = s->n;
	if (n == 0)
		return shmcfg__err(SHMCFG_E_SCHEMADEF, "schema has no options");
	struct built_schema *b = shmcfg__calloc(1, sizeof *b);
	if (!b)
		return shmcfg__nomem();
	b->s = s;
	b->alias = shmcfg__malloc(n * sizeof(uint32_t));
	b->alias_final = shmcfg__malloc(n * sizeof(uint32_t));
	b->topo = shmcfg__malloc(n * sizeof(uint32_t));
	b->imp_first = shmcfg__calloc(n, sizeof(uint32_t));
	b->imp_n = shmcfg__calloc(n, sizeof(uint32_t));
	uint32_t *indeg = shmcfg__calloc(n, sizeof(uint32_t));
	int r = 0;
	if (!b->alias || !b->alias_final || !b->topo || !b->imp_first || !b->imp_n ||
	    !indeg) {
		r = shmcfg__nomem();
		goto fail;
	}
	for (uint32_t i = 0; i < n; i++) {
		const struct sopt *o = &s->opts[i];
		b->alias[i] = SHMCFG_NO_OPT;
		if (!o->alias)
			continue;
		int t = shmcfg__schema_find(s, o->alias);
		if (t < 0) {
			r = decl_err(s, i, SHMCFG_E_SCHEMADEF, "%s: alias target %s is not declared",
				     o->name, o->alias);
			goto fail;
		}
		b->alias[i] = (uint32_t)t;
	}
	for (uint32_t i = 0; i < n; i++) {
		uint32_t f = i, steps = 0;
		while (b->alias[f] != SHMCFG_NO_OPT) {
			f = b->alias[f];
			if (++steps > n) { /* f is on the cycle now: walk it once */
				uint32_t len = 1;
				for (uint32_t a = b->alias[f]; a != f; a = b->alias[a])
					b->topo[len++ - 1] = a; /* topo: scratch until Kahn below */
				b->topo[len - 1] = f;
				r = cycle_err(s, "alias", b->topo, len);
				goto fail;
			}
		}
		b->alias_final[i] = f;
		const struct sopt *o = &s->opts[i], *t = &s->opts[f];
		if (o->type != t->type ||
		    (o->flags & SHMCFG_F_NULLABLE) != (t->flags & SHMCFG_F_NULLABLE)) {
			r = decl_err(s, i, SHMCFG_E_SCHEMADEF, "%s: alias of %s must have its type %s%s",
				     o->name, t->name, t->flags & SHMCFG_F_NULLABLE ? "optional " : "",
				     shmcfg_type_name(t->type));
			goto fail;
		}
	}
	/* implications: "target=value;target2=value" */
	for (uint32_t i = 0; i < n; i++) {
		const char *spec = s->opts[i].implies;
		b->imp_first[i] = b->nimplies;
		if (!spec)
			continue;
		char *copy = shmcfg__strdup(spec), *rest = copy;
		if (!copy) {
			r = shmcfg__nomem();
			goto fail;
		}
		for (char *item; !r && (item = shmcfg__implies_item(&rest));) {
			char *eq = strchr(item, '=');
			while (isspace((unsigned char)*item))
				item++;
			if (!eq) {
				r = decl_err(s, i, SHMCFG_E_SCHEMADEF, "%s: implies '%s' lacks '='",
					     s->opts[i].name, item);
				break;
			}
			char *end = eq;
			while (end > item && isspace((unsigned char)end[-1]))
				end--;
			*end = 0;
			int t = shmcfg__schema_find(s, item);
			if (t < 0) {
				r = decl_err(s, i, SHMCFG_E_SCHEMADEF, "%s: implies unknown option %s",
					     s->opts[i].name, item);
				break;
			}
			uint32_t tf = b->alias_final[t];
			const struct sopt *to = &s->opts[tf];
			struct implies_ent *ie = shmcfg__realloc(b->implies, (b->nimplies + 1) * sizeof *ie);
			shmcfg_value *iv = ie ? shmcfg__realloc(b->implies_vals, (b->nimplies + 1) * sizeof *iv) : NULL;
			if (ie)
				b->implies = ie;
			if (!iv) {
				r = shmcfg__nomem();
				break;
			}
			b->implies_vals = iv;
			const char *vt = eq + 1;
			while (isspace((unsigned char)*vt))
				vt++;
			shmcfg_value v;
			r = shmcfg_value_parse(to->type, to->flags & SHMCFG_F_NULLABLE, vt, &v);
			if (!r) {
				r = shmcfg__check_value(to->name, to->type, to->flags, &to->min, &to->max,
						    &to->choices, &v);
				if (r) /* parsed, so v may own its text */
					shmcfg_value_clear(&v);
			}
			if (r == -ENOMEM)
				break;
			if (r) {
				r = decl_err(s, i, SHMCFG_E_SCHEMADEF, "%s: implies %s: %s", s->opts[i].name,
					     item, shmcfg_errdetail());
				break;
			}
			ie[b->nimplies] = (struct implies_ent){.target = tf, .implier = i};
			iv[b->nimplies++] = v;
			b->imp_n[i]++;
			indeg[tf]++;
		}
		shmcfg__free(copy);
		if (r)
			goto fail;
	}
	/* topological order (Kahn): impliers before their targets */
	uint32_t head = 0, tail = 0;
	for (uint32_t i = 0; i < n; i++)
		if (!indeg[i])
			b->topo[tail++] = i;
	while (head < tail) {
		uint32_t i = b->topo[head++];
		for (uint32_t k = b->imp_first[i]; k < b->imp_first[i] + b->imp_n[i]; k++)
			if (--indeg[b->implies[k].target] == 0)
				b->topo[tail++] = b->implies[k].target;
	}
	if (tail != n) {
		r = implication_cycle(s, b, indeg);
		goto fail;
	}
	if ((r = build_rdeps(b, n)))
		goto fail;

	uint64_t str = 1; /* offset 0 is the empty string */
	for (uint32_t i = 0; i < n; i++) {
		const struct sopt *o = &s->opts[i];
		str += strlen(o->name) + 1 + strlen(o->doc) + 1;
		str += o->knob ? strlen(o->knob) + 1 : 0;
		str += o->deprecated ? strlen(o->deprecated) + 1 : 0;
		str += value_bytes(&o->env_default) + value_bytes(&o->env_force);
		str += value_bytes(&o->def) + value_bytes(&o->choices);
	}
	for (uint32_t k = 0; k < b->nimplies; k++)
		str += value_bytes(&b->implies_vals[k]);
	b->strings_bytes = str;
	uint32_t index_size = schema_index_size(n);
	b->bytes = sizeof(struct schema_hdr) + (uint64_t)n * sizeof(struct opt_desc) +
		   (uint64_t)b->nimplies * sizeof(struct implies_ent) +
		   (uint64_t)index_size * 4 + (uint64_t)b->nrdeps * 4 + str;
	b->bytes = (b->bytes + 63) & ~63ull;
	shmcfg__free(indeg);
	*ret = b;
	return 0;
fail:
	shmcfg__free(indeg);
	shmcfg__schema_built_free(b);
	return r;
}

uint64_t shmcfg__schema_bytes(const struct built_schema *b)
{
	return b->bytes;
}

/* Heap room for one version of the layers of every string, list and set
 * option: a chunk with twice its default's bytes, or 32. */
uint64_t shmcfg__schema_value_bytes(const struct built_schema *b)
{
	uint64_t sum = 0;
	for (uint32_t i = 0; i < b->s->n; i++)
		if (b->s->opts[i].type >= SHMCFG_STR) {
			uint64_t d = 2 * value_bytes(&b->s->opts[i].def);
			sum += 32 + (d > 32 ? d : 32);
		}
	return sum;
}

uint32_t shmcfg__schema_nopts(const struct built_schema *b)
{
	return b->s->n;
}

struct writer {
	char *base;
	uint64_t pos;
};

static struct sref put_str(struct writer *w, const char *s)
{
	if (!s || !*s)
		return (struct sref){0, 0};
	size_t l = strlen(s);
	struct sref r = {(uint32_t)w->pos, (uint32_t)l};
	memcpy(w->base + w->pos, s, l + 1);
	w->pos += l + 1;
	return r;
}

/* Encode a value as a cell whose strings go to the writer's area (sized
 * beforehand by shmcfg__schema_build, so it cannot overflow). */
static struct shmcfg__cell put_value(struct writer *w, const shmcfg_value *v)
{
	struct shmcfg__cell c;
	(void)shmcfg__cell_encode(v, 0, w->base, UINT64_MAX, &w->pos, &c);
	return c;
}

static struct sref put_list(struct writer *w, const shmcfg_value *v, uint16_t *count)
{
	*count = (uint16_t)v->u.list.count; /* checked at schema_add (schema.c) */
	if (!v->u.list.count)
		return (struct sref){0, 0};
	struct shmcfg__cell c = put_value(w, v);
	return (struct sref){CELL_OFF(c.val), META_LEN(c.meta)};
}

/* Write the schema region; the schema hash covers it whole, so it names the
 * declaration order (handles are indices) as well as every attribute. */
void shmcfg__schema_write(const struct built_schema *b, void *dst, uint8_t hash_out[16])
{
	const shmcfg_schema *s = b->s;
	uint32_t n = s->n, index_size = schema_index_size(n);
	memset(dst, 0, b->bytes);
	struct schema_hdr *sh = dst;
	uint64_t pos = sizeof *sh;
	sh->nopts = n;
	sh->index_size = index_size;
	sh->nimplies = b->nimplies;
	sh->desc_off = pos;
	pos += (uint64_t)n * sizeof(struct opt_desc);
	sh->implies_off = pos;
	pos += (uint64_t)b->nimplies * sizeof(struct implies_ent);
	sh->index_off = pos;
	pos += (uint64_t)index_size * 4;
	sh->rdeps_off = pos;
	sh->nrdeps = b->nrdeps;
	pos += (uint64_t)b->nrdeps * 4;
	sh->strings_off = pos;
	sh->strings_size = b->strings_bytes;

	char *base = dst;
	struct opt_desc *desc = (struct opt_desc *)(base + sh->desc_off);
	struct implies_ent *imp = (struct implies_ent *)(base + sh->implies_off);
	uint32_t *index = (uint32_t *)(base + sh->index_off);
	struct writer w = {base + sh->strings_off, 1};
	memset(index, 0xff, (size_t)index_size * 4);
	for (uint32_t i = 0; i < n; i++) {
		const struct sopt *o = &s->opts[i];
		struct opt_desc *d = &desc[i];
		d->name = put_str(&w, o->name);
		d->doc = put_str(&w, o->doc);
		d->knob = put_str(&w, o->knob);
		d->deprecated = put_str(&w, o->deprecated);
		d->env_default = put_list(&w, &o->env_default, &d->n_env_default);
		d->env_force = put_list(&w, &o->env_force, &d->n_env_force);
		d->alias = b->alias[i];
		d->alias_final = b->alias_final[i];
		d->type = o->type;
		d->flags = o->flags | (o->knob ? DESC_F_HAS_KNOB : 0) |
			   (o->min.is_null ? 0 : DESC_F_HAS_MIN) | (o->max.is_null ? 0 : DESC_F_HAS_MAX);
		d->def = put_value(&w, &o->def);
		if (!o->min.is_null)
			d->min = put_value(&w, &o->min);
		if (!o->max.is_null)
			d->max = put_value(&w, &o->max);
		d->choices = put_value(&w, &o->choices);
		d->implies_first = b->imp_first[i];
		d->implies_n = b->imp_n[i];
		d->rank = b->rank[i];
		d->rdep_first = b->rdep_first[i];
		d->rdep_n = b->rdep_n[i];
		for (uint32_t k = d->implies_first; k < d->implies_first + d->implies_n; k++) {
			imp[k].target = b->implies[k].target;
			imp[k].implier = i;
			imp[k].value = put_value(&w, &b->implies_vals[k]);
		}
		uint32_t mask = index_size - 1;
		for (uint64_t h = shmcfg__name_hash(o->name, strlen(o->name));; h++)
			if (index[h & mask] == UINT32_MAX) {
				index[h & mask] = i;
				break;
			}
	}
	memcpy(base + sh->rdeps_off, b->rdeps, (size_t)b->nrdeps * 4);
	XXH128_hash_t hh = XXH3_128bits(dst, b->bytes);
	XXH128_canonical_t canon;
	XXH128_canonicalFromHash(&canon, hh);
	memcpy(hash_out, canon.digest, 16);
}
