/* SPDX-License-Identifier: MIT */
/*
 * What attach checks before it trusts a segment, and the schema's copy and
 * validation on first use.
 *
 * Attach checks the header against the object's real size (every region
 * inside it, in order, within caps) and the schema's own header (counts,
 * every array inside the region): a constant amount of work. The schema
 * region is mapped privately (MAP_PRIVATE); a range of it is used only after
 * shmcfg__schema_pin() made its pages private (MADV_POPULATE_WRITE: the
 * kernel copies each page once, on that call, and the copy never changes
 * again, whatever anyone writes to the object later). An option is validated
 * on that copy the first time it is used (opt_d, shmcfg__opt_use): its
 * descriptor, every string and value it references, its alias and its
 * implications. What is used whole (validate_all.c) is checked whole the
 * first time it is used. doc/design.md, "Creation and attach", has the
 * argument.
 */
#include "internal.h"
#include "schema.h"
#include "history.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

/* ------------------------------------------------------------------ */
/* The private copy                                                   */
/* ------------------------------------------------------------------ */

/* Set once MADV_POPULATE_WRITE turned out to be unknown (Linux < 5.14). */
static _Atomic bool no_populate_write;

/*
 * Make the pages [p0, p1) of the private mapping private copies. With
 * MADV_POPULATE_WRITE the kernel breaks copy-on-write for each page that is
 * still the object's own: it copies the page as it is now, and from then on
 * the process sees only its copy. A page already copied is left as it is,
 * so the call is idempotent, and two threads may make it for the same page
 * at once (the kernel serialises the faults of one page). Pages past the
 * object's end (a writer truncated it) fail with EFAULT, not SIGBUS.
 *
 * Without MADV_POPULATE_WRITE, a compare-exchange of a byte of each page
 * with its own value takes the write fault (and the copy) without changing
 * anything; it can fail only while the page is still shared and someone
 * changes that byte, so it is retried a bounded number of times. On that
 * path a truncated object raises SIGBUS, as a read of the shared mapping
 * would.
 */
static int populate(const shmcfg *h, size_t p0, size_t p1)
{
	char *addr = h->priv + (p0 << h->page_shift);
	size_t len = (p1 - p0) << h->page_shift;
	if (!atomic_load_explicit(&no_populate_write, memory_order_relaxed)) {
		if (shmcfg__madvise(addr, len, MADV_POPULATE_WRITE) == 0)
			return 0;
		int e = errno;
		if (e == ENOMEM)
			return shmcfg__nomem();
		if (e == EFAULT)
			return shmcfg__err(SHMCFG_E_CORRUPT, "%s: the schema region cannot be read (the object shrank?)",
					   h->name);
		if (e != EINVAL)
			return shmcfg__err(-e, "%s: cannot copy the schema region: %s", h->name, strerror(e));
		atomic_store_explicit(&no_populate_write, true, memory_order_relaxed);
	}
	for (size_t o = 0; o < len; o += (size_t)1 << h->page_shift) {
		unsigned char *b = (unsigned char *)addr + o;
		unsigned char v = __atomic_load_n(b, __ATOMIC_RELAXED);
		for (int tries = 0; !__atomic_compare_exchange_n(b, &v, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);)
			if (++tries == 1000)
				return shmcfg__err(SHMCFG_E_CORRUPT, "%s: the schema region keeps changing", h->name);
	}
	return 0;
}

/* The pages of [a, a + len) of the private mapping not copied yet, copied
 * (shmcfg__schema_pin's slow path). */
static __attribute__((noinline)) int pin_pages(const shmcfg *h, uint64_t a, uint64_t len)
{
	size_t p = (size_t)(a >> h->page_shift), end = (size_t)((a + len - 1) >> h->page_shift) + 1;
	while (p < end) {
		/* acquire: pairs with the release store below, made by the thread
		 * that copied the page: its copy is what we read */
		if (__atomic_load_n(&h->page_ok[p], __ATOMIC_ACQUIRE)) {
			p++;
			continue;
		}
		size_t q = p + 1;
		while (q < end && !__atomic_load_n(&h->page_ok[q], __ATOMIC_RELAXED))
			q++;
		int r = populate(h, p, q);
		if (r)
			return r;
		/* release: the copies made by the call above come before */
		for (size_t k = p; k < q; k++)
			__atomic_store_n(&h->page_ok[k], 1, __ATOMIC_RELEASE);
		p = q;
	}
	return 0;
}

/*
 * Make bytes [off, off + len) of the schema region private, if they are not
 * yet: only then may they be read. Returns 0, SHMCFG_E_CORRUPT (past the
 * region, or past the object) or -ENOMEM (no verdict), with a detail.
 */
int shmcfg__schema_pin(const shmcfg *h, uint64_t off, uint64_t len)
{
	if (len == 0)
		return 0;
	if (off > h->lay.schema_size || len > h->lay.schema_size - off)
		return shmcfg__err(SHMCFG_E_CORRUPT, "%s: schema reference past the region", h->name);
	/* acquire: pairs with the release store below, made once every page
	 * was copied (a small schema's attach, SHMCFG_ATTACH_PREFAULT, a whole
	 * check): no page's state to look up then */
	if (__atomic_load_n(&h->whole_ok[WHOLE_PRIVATE], __ATOMIC_ACQUIRE))
		return 0;
	uint64_t a = h->lay.schema_off + off;
	/* most references are within a page copied already (acquire: as in
	 * pin_pages) */
	if ((a >> h->page_shift) == ((a + len - 1) >> h->page_shift) &&
	    __atomic_load_n(&h->page_ok[a >> h->page_shift], __ATOMIC_ACQUIRE))
		return 0;
	int r = pin_pages(h, a, len);
	if (!r && off == 0 && len == h->lay.schema_size)
		__atomic_store_n(&h->whole_ok[WHOLE_PRIVATE], 1, __ATOMIC_RELEASE);
	return r;
}

/* Up to this size (about 10,000 options) the private copy is made whole at
 * attach (doc/design.md, "Creation and attach"). The test copy of the
 * library lets tests/test_attach.c take the lazy path with a small schema. */
#define SCHEMA_EAGER_BYTES (2u << 20)
#ifdef SHMCFG_WITH_FAULTS
__attribute__((visibility("default"))) size_t shmcfg__schema_eager_bytes = SCHEMA_EAGER_BYTES;
#else
#define shmcfg__schema_eager_bytes SCHEMA_EAGER_BYTES
#endif

/* A schema copied whole by attach: up to SCHEMA_EAGER_BYTES (the schema's
 * size, not the copy's before it) */
static bool schema_small(const shmcfg *h)
{
	return SEG_HEADER_BYTES + h->lay.schema_size <= shmcfg__schema_eager_bytes;
}

/*
 * Attach: check the schema's header (read into h->sch_copy by the caller)
 * against the segment's header, map the region privately, and set up the
 * state of the lazy validation; copy a small region whole (its options are
 * validated at the end of attach: shmcfg__schema_warm).
 */
int shmcfg__schema_open(shmcfg *h)
{
	const struct schema_hdr *sh = h->sch = &h->sch_copy;
	uint64_t size = h->lay.schema_size, n = sh->nopts;
	if (n != h->lay.nopts)
		return shmcfg__err(SHMCFG_E_CORRUPT, "%s: schema: option count %llu disagrees with the header (%u)",
				   h->name, (unsigned long long)n, h->lay.nopts);
	/* the builder's size exactly: the lookup's cache (h->lk, 8 bytes a
	 * slot) is allocated for it */
	if (sh->index_size != schema_index_size(h->lay.nopts))
		return shmcfg__err(SHMCFG_E_CORRUPT, "%s: schema: index size %u is not %u for %u options", h->name,
				   sh->index_size, schema_index_size(h->lay.nopts), h->lay.nopts);
	struct {
		uint64_t off, bytes, align;
		const char *what;
	} regions[] = {
		{sh->desc_off, n * sizeof(struct opt_desc), 8, "descriptors"},
		{sh->implies_off, (uint64_t)sh->nimplies * sizeof(struct implies_ent), 8, "implications"},
		{sh->index_off, (uint64_t)sh->index_size * 4, 4, "index"},
		{sh->rdeps_off, (uint64_t)sh->nrdeps * 4, 4, "dependents"},
		{sh->strings_off, sh->strings_size, 1, "strings"},
	};
	for (size_t i = 0; i < sizeof regions / sizeof regions[0]; i++)
		if (regions[i].off < sizeof *sh || regions[i].off > size ||
		    regions[i].bytes > size - regions[i].off || (regions[i].off & (regions[i].align - 1)))
			return shmcfg__err(SHMCFG_E_CORRUPT, "%s: schema: %s region out of bounds", h->name,
					   regions[i].what);
	if (sh->strings_size == 0)
		return shmcfg__err(SHMCFG_E_CORRUPT, "%s: schema: empty strings region", h->name);
	long ps = sysconf(_SC_PAGESIZE);
	if (ps <= 0 || (ps & (ps - 1)))
		ps = 4096;
	h->page_shift = (unsigned)__builtin_ctzl((unsigned long)ps);
	h->priv_size = (size_t)(h->lay.schema_off + size);
	size_t npages = (h->priv_size + (size_t)ps - 1) >> h->page_shift;
	/* zero pages until touched: the state of options never used costs nothing */
	unsigned char *state = shmcfg__calloc(n + npages + WHOLE_N, 1);
	if (!state)
		return shmcfg__nomem();
	h->opt_ok = state;
	h->checked_bytes = 0;
	h->page_ok = h->opt_ok + n;
	h->whole_ok = h->page_ok + npages;
	/* zero pages until touched, like the state above */
	if (!(h->lk = shmcfg__calloc(sh->index_size, sizeof *h->lk)))
		return shmcfg__nomem(); /* schema_close frees state */
	/* this uid's validated copy of the schema, if it has one (vcopy.c):
	 * nothing to copy or check then */
	const char *base = shmcfg__vcopy_open(h);
	if (!base) {
		/* writable, private: MADV_POPULATE_WRITE copies pages; nothing writes them */
		h->priv = shmcfg__mmap(NULL, h->priv_size, PROT_READ | PROT_WRITE, MAP_PRIVATE, h->fd, 0);
		if (h->priv == MAP_FAILED) {
			h->priv = NULL;
			return shmcfg__err(-errno, "%s: mmap: %s", h->name, strerror(errno));
		}
		base = h->priv + h->lay.schema_off;
	}
	h->desc = (const struct opt_desc *)(base + sh->desc_off);
	h->implies = (const struct implies_ent *)(base + sh->implies_off);
	h->index_raw = (const uint32_t *)(base + sh->index_off);
	h->rdeps = (const uint32_t *)(base + sh->rdeps_off);
	h->strings = base + sh->strings_off;
	h->strings_size = sh->strings_size;
	/* a small schema is made private whole now: ~2 us a page on these VMs
	 * (a page fault each, batched or not), ~1 ms at SCHEMA_EAGER_BYTES,
	 * rather than page by page in a process's first commits and reads */
	return schema_small(h) ? shmcfg__schema_pin(h, 0, size) : 0;
}

void shmcfg__schema_close(shmcfg *h)
{
	if (h->priv)
		munmap(h->priv, h->priv_size);
	h->priv = NULL;
	shmcfg__free((void *)h->opt_ok);
	h->opt_ok = NULL;
	shmcfg__free(h->lk);
	h->lk = NULL;
}

/* ------------------------------------------------------------------ */
/* One option                                                         */
/* ------------------------------------------------------------------ */

/* The checks below return 0 (valid), 1 (invalid) or a negative error whose
 * detail is set (the copy could not be made: no verdict). */

/* Bytes of strings, values and runs the checks of this thread have read
 * since its scan started: validating an option reads every range it
 * references, and a writer can have every option reference one big range */
static __thread uint64_t scanned __attribute__((tls_model("initial-exec")));

/*
 * What checks read is bounded by the schema's size (E70), as an honest
 * schema's checks read about its size in all: the builder shares no
 * string, value or run between options. A writer's schema whose options
 * all reference one big range would be read once an option, and one
 * option's implications could all reference it (seconds to hours):
 *  - one option's check stops once its implications have read more than
 *    the schema's bytes (shmcfg__opt_check);
 *  - a handle validates options until those that passed have read twice
 *    the schema's bytes; past that every validation fails, saying why
 *    (opt_validate): a dump or any loop over the options is bounded so;
 *  - a scan of every option's checks (shmcfg_check: validate_all.c) stops
 *    once they have read twice the schema's bytes (shmcfg__scan_over).
 */
void shmcfg__scan_start(void)
{
	scanned = 0;
}

bool shmcfg__scan_over(const shmcfg *h)
{
	return scanned > 2 * h->lay.schema_size;
}
#define PIN(off, len)                                          \
	do {                                                   \
		int r_ = shmcfg__schema_pin(h, (off), (len));  \
		if (r_ == SHMCFG_E_CORRUPT)                    \
			return 1;                              \
		if (r_)                                        \
			return r_;                             \
	} while (0)

/* A string: in bounds, NUL-terminated, no NUL inside (an empty one is
 * never read: sstr() gives ""). */
static int str_ok(const shmcfg *h, struct sref r)
{
	if (r.len == 0)
		return 0;
	if (r.off >= h->strings_size || r.len >= h->strings_size - r.off)
		return 1;
	PIN(h->sch->strings_off + r.off, (uint64_t)r.len + 1);
	scanned += r.len;
	return h->strings[r.off + r.len] == 0 && memchr(h->strings + r.off, 0, r.len) == NULL ? 0 : 1;
}

/* An option name's bytes are those shmcfg_schema_add() allows (letters,
 * digits, '_', '.'): a name is printed and matched as it is. */
static bool name_chars_ok(const shmcfg *h, struct sref r)
{
	/* a table: a branch per byte was half of a full scan's checks */
	static const bool ok[256] = {
		['a' ... 'z'] = true, ['A' ... 'Z'] = true, ['0' ... '9'] = true, ['_'] = true, ['.'] = true,
	};
	const unsigned char *s = (const unsigned char *)h->strings + r.off;
	bool all = true;
	for (uint32_t k = 0; k < r.len; k++)
		all &= ok[s[k]];
	return all && r.len > 0;
}

/* A list of count NUL-terminated items (an empty one is never read:
 * sstr() gives ""). */
static int list_ok(const shmcfg *h, struct sref r, uint32_t count)
{
	if (count == 0 || r.len == 0)
		return count == 0 && r.len == 0 ? 0 : 1;
	if (r.off >= h->strings_size || r.len >= h->strings_size - r.off)
		return 1;
	PIN(h->sch->strings_off + r.off, (uint64_t)r.len + 1);
	scanned += r.len;
	const char *s = h->strings + r.off;
	if (s[r.len] != 0 || s[r.len - 1] != 0)
		return 1;
	uint32_t c = 0;
	for (uint32_t i = 0; i < r.len; i++)
		c += s[i] == 0;
	return c == count ? 0 : 1;
}

/* A value cell of the given type, its bytes (if any) in the strings area. */
int shmcfg__cell_check(const shmcfg *h, const struct shmcfg__cell *c, uint32_t type)
{
	uint64_t meta = c->meta, val = c->val;
	if (META_TYPE(meta) != type || type < SHMCFG_BOOL || type > SHMCFG_SET)
		return 1;
	/* a null or a scalar is whole in the cell: any bits are its value */
	if ((meta & META_NULL) || type < SHMCFG_STR)
		return 0;
	uint64_t off = CELL_OFF(val), len = META_LEN(meta);
	if (off >= h->strings_size || len >= h->strings_size - off)
		return 1;
	PIN(h->sch->strings_off + off, len + 1);
	scanned += len;
	shmcfg_value v;
	return shmcfg__value_from_cell(c, h->strings, h->strings_size, &v) == 0 ? 0 : 1;
}

/* Option i's name for a message: printable, bounded, whatever the bytes. */
void shmcfg__opt_label(const shmcfg *h, uint32_t i, char out[96])
{
	const struct opt_desc *d = &h->desc[i];
	size_t k = 0;
	for (; k < d->name.len && k < 80; k++) {
		unsigned char c = (unsigned char)h->strings[d->name.off + k];
		out[k] = c < 0x20 || c >= 0x7f ? '?' : (char)c; /* names are ASCII */
	}
	if (k == 0)
		snprintf(out, 96, "option %u", i);
	else
		snprintf(out + k, 96 - k, "%s", d->name.len > 80 ? "..." : "");
}

/* Option i's descriptor, pinned. */
static int desc_pin(const shmcfg *h, uint32_t i)
{
	PIN(h->sch->desc_off + (uint64_t)i * sizeof(struct opt_desc), sizeof(struct opt_desc));
	return 0;
}

/*
 * Check option i on the private copy: its descriptor, strings, values, env
 * lists, alias and implications, each pinned before it is read. 0, a
 * negative error (detail set: no verdict), or 1 with the problem in msg.
 */
int shmcfg__opt_check(const shmcfg *h, uint32_t i, char *msg, size_t mlen)
{
	const struct schema_hdr *sh = h->sch;
	uint32_t n = h->lay.nopts;
	uint64_t start = scanned;
	int r = desc_pin(h, i);
	if (r) {
		if (r < 0)
			return r;
		snprintf(msg, mlen, "schema: descriptor %u cannot be read", i);
		return 1;
	}
	const struct opt_desc *d = &h->desc[i];
	if ((r = str_ok(h, d->name)) || (r = str_ok(h, d->doc)) || (r = str_ok(h, d->knob)) ||
	    (r = str_ok(h, d->deprecated))) {
		if (r < 0)
			return r;
		snprintf(msg, mlen, "schema: option %u has a bad string reference", i);
		return 1;
	}
	/* (texts that are no UTF-8 are not damage: a segment of a library that
	 * took them; the tools show them escaped) */
	if (!name_chars_ok(h, d->name)) {
		char label[96];
		shmcfg__opt_label(h, i, label);
		snprintf(msg, mlen, "schema: option %u's name '%s' has a character names may not have (not A-Z a-z 0-9 _ .)",
			 i, label);
		return 1;
	}
	/* the name, for a message: made when one is needed */
	char name[96];
#define NAME (shmcfg__opt_label(h, i, name), name)
	if (!shmcfg_type_name(d->type)) {
		snprintf(msg, mlen, "%s: unknown type %u", NAME, d->type);
		return 1;
	}
	if ((r = shmcfg__cell_check(h, &d->def, d->type)) || (r = shmcfg__cell_check(h, &d->choices, SHMCFG_LIST)) ||
	    ((d->flags & DESC_F_HAS_MIN) && (r = shmcfg__cell_check(h, &d->min, d->type))) ||
	    ((d->flags & DESC_F_HAS_MAX) && (r = shmcfg__cell_check(h, &d->max, d->type)))) {
		if (r < 0)
			return r;
		snprintf(msg, mlen, "%s: bad default, range or choices", NAME);
		return 1;
	}
	if ((r = list_ok(h, d->env_default, d->n_env_default)) || (r = list_ok(h, d->env_force, d->n_env_force))) {
		if (r < 0)
			return r;
		snprintf(msg, mlen, "%s: bad environment variable list", NAME);
		return 1;
	}
	/* the alias's final target: in range, not an alias, of the same type;
	 * an option that is no alias is its own final target */
	uint32_t f = d->alias_final;
	if ((d->alias != SHMCFG_NO_OPT && d->alias >= n) || f >= n || (d->alias == SHMCFG_NO_OPT && f != i) ||
	    (r = desc_pin(h, f)) || h->desc[f].alias != SHMCFG_NO_OPT || h->desc[f].type != d->type) {
		if (r < 0)
			return r;
		snprintf(msg, mlen, "%s: bad alias", NAME);
		return 1;
	}
	if (d->implies_first > sh->nimplies || d->implies_n > sh->nimplies - d->implies_first) {
		snprintf(msg, mlen, "%s: implications out of bounds", NAME);
		return 1;
	}
	r = shmcfg__schema_pin(h, sh->implies_off + (uint64_t)d->implies_first * sizeof(struct implies_ent),
			       (uint64_t)d->implies_n * sizeof(struct implies_ent));
	scanned += (uint64_t)d->implies_n * sizeof(struct implies_ent);
	if (r && r != SHMCFG_E_CORRUPT)
		return r;
	if (r) {
		snprintf(msg, mlen, "%s: implications cannot be read", NAME);
		return 1;
	}
	for (uint32_t k = d->implies_first; k < d->implies_first + d->implies_n; k++) {
		const struct implies_ent *e = &h->implies[k];
		uint32_t t = e->target;
		/* the target's type from its (pinned, immutable) descriptor: the
		 * same bytes the target's own validation will check */
		if (t >= n || e->implier != i || (r = desc_pin(h, t)) ||
		    (r = shmcfg__cell_check(h, &e->value, h->desc[t].type))) {
			if (r < 0)
				return r;
			snprintf(msg, mlen, "%s: implication %u is invalid", NAME, k);
			return 1;
		}
		if (scanned - start > h->lay.schema_size) {
			snprintf(msg, mlen, "%s: its implications reference more bytes than the schema holds", NAME);
			return 1;
		}
	}
	/* its dependents (resolve.c): implications that target it, aliases of it;
	 * each entry's own option is validated when the entry is used */
	if (d->rank >= n || d->rdep_first > sh->nrdeps || d->rdep_n > sh->nrdeps - d->rdep_first) {
		snprintf(msg, mlen, "%s: rank or dependents out of bounds", NAME);
		return 1;
	}
	r = shmcfg__schema_pin(h, sh->rdeps_off + (uint64_t)d->rdep_first * 4, (uint64_t)d->rdep_n * 4);
	scanned += (uint64_t)d->rdep_n * 4;
	if (r && r != SHMCFG_E_CORRUPT)
		return r;
	/* in the builder's order, so that no entry comes twice (a commit
	 * walks the run, and decodes each active implication's value):
	 * implications by their implier's rank, then index; aliases after them
	 * by index */
	uint64_t prev = 0;
	bool aliases = false, unordered = false;
	for (uint32_t j = d->rdep_first; !r && j < d->rdep_first + d->rdep_n; j++) {
		uint32_t e = h->rdeps[j], a = e & ~RDEP_ALIAS;
		uint64_t key;
		if (e & RDEP_ALIAS) {
			key = (uint64_t)1 << 63 | a;
			aliases = true;
			r = a >= n || a == i;
		} else if (aliases || e >= sh->nimplies) {
			r = 1;
			break;
		} else if ((r = shmcfg__schema_pin(h, sh->implies_off + (uint64_t)e * sizeof(struct implies_ent),
						   sizeof(struct implies_ent))) ||
			   h->implies[e].implier >= n || (r = desc_pin(h, h->implies[e].implier))) {
			r = r < 0 && r != SHMCFG_E_CORRUPT ? r : 1;
			break;
		} else {
			key = (uint64_t)h->desc[h->implies[e].implier].rank << 32 | e;
		}
		if (!r && j > d->rdep_first && key <= prev)
			r = unordered = 1;
		prev = key;
	}
	if (r < 0 && r != SHMCFG_E_CORRUPT)
		return r; /* no verdict */
	if (r) {
		snprintf(msg, mlen, unordered ? "%s: dependents not in their impliers' rank order (one twice?)"
					      : "%s: bad dependents", NAME);
		return 1;
	}
	return 0;
#undef NAME
}

/* 0 once option i is validated; otherwise its error, with a detail. */
static int opt_validate(const shmcfg *h, uint32_t i)
{
	if (__atomic_load_n(&h->opt_ok[i], __ATOMIC_ACQUIRE))
		return 0;
	uint64_t *checked = &((shmcfg *)h)->checked_bytes;
	if (__atomic_load_n(checked, __ATOMIC_RELAXED) > 2 * h->lay.schema_size)
		return shmcfg__err(SHMCFG_E_CORRUPT, "%s: %s", h->name, SHMCFG__SCAN_OVER);
	uint64_t start = scanned;
	char msg[256];
	int r = shmcfg__opt_check(h, i, msg, sizeof msg);
	if (r > 0)
		return shmcfg__err(SHMCFG_E_CORRUPT, "%s: %s", h->name, msg);
	if (r < 0)
		return r;
	uint64_t read = scanned - start;
	/*
	 * Release: pairs with the acquire loads of opt_ok[i] (opt_d, above):
	 * a thread that sees 1 reads the descriptor and what it references
	 * after the pages were copied (shmcfg__schema_pin) and checked here.
	 * Two threads may check the same option at once: they read the same
	 * private bytes, which no longer change, reach the same verdict and
	 * store the same value. A corrupt option is not marked: each use
	 * checks it again and fails again, with its detail.
	 */
	const struct opt_desc *d = &h->desc[i];
	bool plain = d->alias == SHMCFG_NO_OPT && !(d->flags & SHMCFG_F_DEPRECATED);
	/* the thread whose exchange marks it first counts what it read: so
	 * many threads checking one option at once count it once (relaxed: a
	 * budget, not an order) */
	if (!__atomic_exchange_n(&h->opt_ok[i], OPT_OK | (plain ? OPT_PLAIN : 0), __ATOMIC_RELEASE))
		__atomic_fetch_add(checked, read, __ATOMIC_RELAXED);
	return 0;
}

/*
 * The end of attach: a small schema's options validated (its copy was made
 * by schema_open), ~0.1 us each in a row rather than ~0.5 us in each first
 * use of a fresh process's commits and reads (issue 26). One that does not
 * validate is left unmarked, the detail cleared: its uses refuse it with
 * their detail, as if attach had not looked. While the checks that passed
 * read no more than the schema's size, as an honest schema's do (each
 * string referenced once): a writer's schema whose options all reference
 * one big range stops it there, and the rest wait for their first use, as
 * past this size, within the handle's budget (attach stays O(the schema's
 * bytes)).
 */
void shmcfg__schema_warm(const shmcfg *h)
{
	/* half the handle's budget: past it, first uses still have the rest */
	for (uint32_t i = 0; schema_small(h) && i < h->lay.nopts &&
			     __atomic_load_n(&h->checked_bytes, __ATOMIC_RELAXED) <= h->lay.schema_size;
	     i++)
		if (opt_validate(h, i))
			shmcfg__clear_err();
}

int shmcfg__opt_use(const shmcfg *h, shmcfg_opt opt)
{
	if (opt >= h->lay.nopts)
		return shmcfg__err(SHMCFG_E_NOOPT, "option handle %u out of range (%u options)", opt,
				   h->lay.nopts);
	/* acquire: as in opt_d() */
	int r = __atomic_load_n(&h->opt_ok[opt], __ATOMIC_ACQUIRE) ? 0 : opt_validate(h, opt);
	/* writes go to the final target, and reads show it: validated too */
	if (!r && h->desc[opt].alias_final != opt)
		r = opt_validate(h, h->desc[opt].alias_final);
	return r;
}

const struct opt_desc *shmcfg__opt_slow(const shmcfg *h, uint32_t i)
{
	static __thread struct opt_desc inert;
	if (opt_validate(h, i) == 0)
		return &h->desc[i];
	/* type 0: every type check refuses it; its references are empty
	 * (sstr() gives ""); it aliases nothing */
	inert = (struct opt_desc){.alias = SHMCFG_NO_OPT, .alias_final = i};
	return &inert;
}

int shmcfg__schema_index(const shmcfg *h, uint32_t slot, uint32_t *id)
{
	int r = shmcfg__schema_pin(h, h->sch->index_off + (uint64_t)(slot & (h->sch->index_size - 1)) * 4, 4);
	if (r)
		return r;
	uint32_t v = h->index_raw[slot & (h->sch->index_size - 1)];
	if (v != UINT32_MAX && v >= h->lay.nopts)
		return shmcfg__err(SHMCFG_E_CORRUPT, "%s: name index entry %u names option %u of %u", h->name, slot,
				   v, h->lay.nopts);
	*id = v;
	return 0;
}
#undef PIN
