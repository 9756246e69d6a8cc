/* SPDX-License-Identifier: MIT */
/* Attach validation: truncated objects, bad magic, another layout version,
 * another schema, uninitialised objects, forged schemas (refused when the
 * option, index entry or order they spoil is first used), and bytes
 * scribbled over a live segment. None may crash or read out of bounds (also
 * run under ASan). */
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "common.h"
#include "internal.h"
#include "seqlock.h"

#include <xxhash.h>

static char path[128];

static const char *seg_path(const char *name)
{
	snprintf(path, sizeof path, "/dev/shm/shmcfg.%s", name);
	return path;
}

static void poke(const char *name, off_t off, const void *bytes, size_t n)
{
	int fd = open(seg_path(name), O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, bytes, n, off), (ssize_t)n);
	close(fd);
}

static void truncate_to(const char *name, off_t size)
{
	int fd = open(seg_path(name), O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, size), 0);
	close(fd);
}

static shmcfg *fresh(const char *name)
{
	return test_create(name, NULL);
}

static void expect_attach(const char *name, const uint8_t *hash, int err, const char *detail)
{
	shmcfg *h = NULL;
	int r = shmcfg_attach(name, 0, hash, &h);
	if (r != err)
		fail_msg("attach %s: %s (%s), expected %s", name, shmcfg_errname(r), shmcfg_errdetail(),
			 shmcfg_errname(err));
	if (detail && !strstr(shmcfg_errdetail(), detail))
		fail_msg("detail '%s' lacks '%s'", shmcfg_errdetail(), detail);
	assert_null(h);
}

static void test_missing(void **state)
{
	(void)state;
	expect_attach(test_name("missing"), NULL, -ENOENT, "no such segment");
}

static void test_truncated(void **state)
{
	(void)state;
	const char *name = test_name("trunc");
	shmcfg *h = fresh(name);
	size_t size;
	{
		struct stat st;
		assert_int_equal(stat(seg_path(name), &st), 0);
		size = (size_t)st.st_size;
	}
	shmcfg_close(h);
	truncate_to(name, (off_t)size - 4096);
	expect_attach(name, NULL, SHMCFG_E_CORRUPT, "truncated");
	truncate_to(name, 100);
	expect_attach(name, NULL, SHMCFG_E_CORRUPT, "less than a header");
	shmcfg_unlink(name);
}

static void test_bad_magic(void **state)
{
	(void)state;
	const char *name = test_name("magic");
	shmcfg_close(fresh(name));
	uint64_t bad = 0x1122334455667788ull;
	poke(name, offsetof(struct seg_header, magic), &bad, 8);
	expect_attach(name, NULL, SHMCFG_E_MAGIC, NULL);
	/* a byte-swapped magic (another byte order) is bad magic too */
	uint64_t swapped = __builtin_bswap64(SEG_MAGIC);
	poke(name, offsetof(struct seg_header, magic), &swapped, 8);
	expect_attach(name, NULL, SHMCFG_E_MAGIC, NULL);
	shmcfg_unlink(name);
}

static void test_other_version(void **state)
{
	(void)state;
	const char *name = test_name("ver");
	shmcfg_close(fresh(name));
	uint32_t v = SEG_LAYOUT_VERSION + 1;
	poke(name, offsetof(struct seg_header, layout_version), &v, 4);
	/* the detail names both versions */
	char detail[96];
	snprintf(detail, sizeof detail, "layout version %u, this library reads version %u", v, SEG_LAYOUT_VERSION);
	expect_attach(name, NULL, SHMCFG_E_VERSION, detail);
	shmcfg_unlink(name);
}

static void test_other_schema(void **state)
{
	(void)state;
	const char *name = test_name("sch");
	shmcfg *h = fresh(name);
	uint8_t mine[16], other[16];
	shmcfg_schema_hash(h, mine);
	memcpy(other, mine, 16);
	other[0] ^= 0xff;
	shmcfg *h2;
	assert_int_equal(shmcfg_attach(name, 0, mine, &h2), 0);
	shmcfg_close(h2);
	char hex[33];
	for (int i = 0; i < 16; i++)
		snprintf(hex + 2 * i, 3, "%02x", other[i]);
	expect_attach(name, other, SHMCFG_E_SCHEMA, hex);
	shmcfg_close(h);
	shmcfg_unlink(name);
}

static void test_not_ready(void **state)
{
	(void)state;
	const char *name = test_name("ready");
	/* an object sized (its pages allocated, as shmcfg_create does first)
	 * but never marked initialised: its creator died */
	int fd = open(seg_path(name), O_RDWR | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	assert_int_equal(posix_fallocate(fd, 0, 8192), 0);
	expect_attach(name, NULL, SHMCFG_E_NOTREADY, "shmctl rm");
	/* a size with no pages (ftruncate): no creator leaves that, refused at
	 * once as sparse, not waited on */
	assert_int_equal(ftruncate(fd, 0), 0);
	assert_int_equal(ftruncate(fd, 8192), 0);
	close(fd);
	expect_attach(name, NULL, SHMCFG_E_CORRUPT, "object is sparse (0 of 8192 bytes allocated): not a segment");
	/* an empty one, as right after O_EXCL */
	truncate_to(name, 0);
	expect_attach(name, NULL, SHMCFG_E_NOTREADY, NULL);
	/* FORCE replaces it */
	shmcfg *h = fresh(name);
	assert_non_null(h);
	shmcfg_close(h);
	shmcfg_unlink(name);
}

static void test_bad_regions(void **state)
{
	(void)state;
	const char *name = test_name("regions");
	struct {
		size_t off;
		uint64_t val;
		int size;
		int err;
	} cases[] = {
		{offsetof(struct seg_header, schema_size), 1ull << 40, 8, SHMCFG_E_CORRUPT},
		{offsetof(struct seg_header, slots_off), 1ull << 62, 8, SHMCFG_E_CORRUPT},
		{offsetof(struct seg_header, slot_size), 1ull << 60, 8, SHMCFG_E_CORRUPT},
		{offsetof(struct seg_header, nslots), 1000, 4, SHMCFG_E_CORRUPT},
		{offsetof(struct seg_header, nreaders), 0, 4, SHMCFG_E_CORRUPT},
		{offsetof(struct seg_header, nopts), 3, 4, SHMCFG_E_CORRUPT},
		{offsetof(struct seg_header, heap_size), UINT32_MAX + 10ull, 8, SHMCFG_E_CORRUPT},
		{offsetof(struct seg_header, cells_off), 8, 8, SHMCFG_E_CORRUPT},
		{offsetof(struct seg_header, header_size), 12, 4, SHMCFG_E_CORRUPT},
		/* the history: its count, its index, its ring */
		{offsetof(struct seg_header, hist_n), 0, 4, SHMCFG_E_CORRUPT},
		{offsetof(struct seg_header, hist_n), 1u << 24, 4, SHMCFG_E_CORRUPT},
		{offsetof(struct seg_header, hist_off), 1ull << 50, 8, SHMCFG_E_CORRUPT},
		{offsetof(struct seg_header, hist_off), 8, 8, SHMCFG_E_CORRUPT},
		{offsetof(struct seg_header, hist_ring_off), 1ull << 40, 8, SHMCFG_E_CORRUPT},
		{offsetof(struct seg_header, hist_ring_size), 100, 8, SHMCFG_E_CORRUPT},
		{offsetof(struct seg_header, hist_ring_size), 1ull << 40, 8, SHMCFG_E_CORRUPT},
		/* the schema region after the accessors' copy, nowhere else */
		{offsetof(struct seg_header, schema_off), SEG_HEADER_BYTES, 8, SHMCFG_E_CORRUPT},
		{offsetof(struct seg_header, schema_off), SEG_SCHEMA_OFF(T_COUNT) + 64, 8, SHMCFG_E_CORRUPT},
		/* the schema's own header (read at attach) */
		{SEG_SCHEMA_OFF(T_COUNT) + offsetof(struct schema_hdr, nopts), 7, 4, SHMCFG_E_CORRUPT},
		{SEG_SCHEMA_OFF(T_COUNT) + offsetof(struct schema_hdr, index_size), 24, 4, SHMCFG_E_CORRUPT},
		{SEG_SCHEMA_OFF(T_COUNT) + offsetof(struct schema_hdr, desc_off), 1ull << 40, 8, SHMCFG_E_CORRUPT},
		{SEG_SCHEMA_OFF(T_COUNT) + offsetof(struct schema_hdr, desc_off), 76, 8, SHMCFG_E_CORRUPT},
		{SEG_SCHEMA_OFF(T_COUNT) + offsetof(struct schema_hdr, strings_size), 1ull << 40, 8, SHMCFG_E_CORRUPT},
		{SEG_SCHEMA_OFF(T_COUNT) + offsetof(struct schema_hdr, strings_size), 0, 8, SHMCFG_E_CORRUPT},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		shmcfg_close(fresh(name));
		poke(name, (off_t)cases[i].off, &cases[i].val, (size_t)cases[i].size);
		shmcfg *h = NULL;
		int r = shmcfg_attach(name, 0, NULL, &h);
		if (r != cases[i].err)
			fail_msg("case %zu: %s (%s)", i, shmcfg_errname(r), shmcfg_errdetail());
	}
	/* an index twice the builder's size, a power of two whose entries
	 * still lie in the region: refused (the lookup's cache, 8 bytes a
	 * slot, is allocated for it), naming both sizes */
	shmcfg *g = fresh(name);
	uint32_t isz = g->sch->index_size * 2;
	assert_true(g->sch->index_off + (uint64_t)isz * 4 <= g->lay.schema_size);
	shmcfg_close(g);
	poke(name, SEG_SCHEMA_OFF(T_COUNT) + offsetof(struct schema_hdr, index_size), &isz, 4);
	expect_attach(name, NULL, SHMCFG_E_CORRUPT, "index size");
	/* A byte inside the schema region, past its header: attach does not
	 * read the region (its hash is compared with the caller's, not
	 * recomputed), the option whose descriptor it spoils is refused on
	 * first use, the others work, and the check finds the region changed. */
	shmcfg_close(fresh(name));
	uint64_t v = 0x4141414141414141ull;
	/* option 0's deprecation text reference (descriptors follow the schema's header) */
	poke(name, SEG_SCHEMA_OFF(T_COUNT) + sizeof(struct schema_hdr) + offsetof(struct opt_desc, deprecated), &v, 8);
	shmcfg *h = NULL;
	assert_int_equal(shmcfg_attach(name, 0, NULL, &h), 0);
	shmcfg_optinfo info;
	assert_int_equal(shmcfg_opt_info(h, T_A, &info), SHMCFG_E_CORRUPT);
	assert_non_null(strstr(shmcfg_errdetail(), "bad string reference"));
	assert_int_equal(shmcfg_opt_info(h, T_B, &info), 0);
	assert_true(shmcfg_check(h, false, NULL, NULL) > 0);
	shmcfg_close(h);
	shmcfg_unlink(name);
}

/*
 * A schema region changed by someone who also fixed up its hash: every bad
 * reference in it is caught when it is first used, and by the check.
 * (Found by fuzzing: a list with a count but no bytes made validation index
 * strings[-1 mod 2^32].)
 */
static void forge_schema(const char *name, void (*edit)(struct schema_hdr *sh, char *base))
{
	int fd = open(seg_path(name), O_RDWR);
	assert_true(fd >= 0);
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	char *m = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	assert_true(m != MAP_FAILED);
	struct seg_header *hd = (struct seg_header *)m;
	char *base = m + hd->schema_off;
	edit((struct schema_hdr *)base, base);
	XXH128_canonical_t c;
	XXH128_canonicalFromHash(&c, XXH3_128bits(base, hd->schema_size));
	memcpy(hd->schema_hash, c.digest, 16);
	munmap(m, (size_t)st.st_size);
	close(fd);
}

static void edit_list_without_bytes(struct schema_hdr *sh, char *base)
{
	struct opt_desc *d = (struct opt_desc *)(base + sh->desc_off);
	d[T_ENV_D].env_default = (struct sref){0, 0};
	d[T_ENV_D].n_env_default = 1;
}

static void edit_name_past_end(struct schema_hdr *sh, char *base)
{
	struct opt_desc *d = (struct opt_desc *)(base + sh->desc_off);
	d[T_A].name = (struct sref){(uint32_t)sh->strings_size - 1, 40};
}

static void edit_alias_out_of_range(struct schema_hdr *sh, char *base)
{
	struct opt_desc *d = (struct opt_desc *)(base + sh->desc_off);
	d[T_ALIAS_A].alias = 9999;
}

static void edit_index_out_of_range(struct schema_hdr *sh, char *base)
{
	uint32_t *index = (uint32_t *)(base + sh->index_off);
	for (uint32_t i = 0; i < sh->index_size; i++)
		if (index[i] != UINT32_MAX) {
			index[i] = 12345;
			break;
		}
}

static void edit_implication_order(struct schema_hdr *sh, char *base)
{
	/* rank t.flag (implied by t.debug) before its implier */
	struct opt_desc *desc = (struct opt_desc *)(base + sh->desc_off);
	uint32_t rf = desc[T_FLAG].rank;
	desc[T_FLAG].rank = desc[T_DEBUG].rank;
	desc[T_DEBUG].rank = rf;
}

/* Lookups of every option's name: how many were refused as corrupt; none
 * finds another option. */
static int lookups_refused(const shmcfg *h)
{
	int refused = 0;
	for (shmcfg_opt i = 0; i < T_COUNT; i++) {
		shmcfg_opt o;
		int r = shmcfg_lookup(h, test_opts[i].name, &o);
		if (r == SHMCFG_E_CORRUPT)
			refused++;
		else if (r || o != i)
			fail_msg("lookup of %s: %s, option %u", test_opts[i].name, shmcfg_errname(r), o);
	}
	return refused;
}

static void test_forged_schema(void **state)
{
	(void)state;
	const char *name = test_name("forged");
	static const struct {
		void (*edit)(struct schema_hdr *, char *);
		shmcfg_opt spoiled;   /* refused on first use (T_COUNT: none) */
		bool index;           /* some lookup is refused (a spoiled option's own, too) */
	} edits[] = {
		{edit_list_without_bytes, T_ENV_D, true},
		{edit_name_past_end, T_A, true},
		{edit_alias_out_of_range, T_ALIAS_A, true},
		{edit_index_out_of_range, T_COUNT, true},
		/* t.debug now ranks after t.safe: t.mode's dependents (their
		 * implications of it) are out of their impliers' order */
		{edit_implication_order, T_MODE, true},
	};
	for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
		shmcfg_close(fresh(name));
		forge_schema(name, edits[i].edit);
		shmcfg *h = NULL;
		/* attach reads no option: it succeeds */
		int r = shmcfg_attach(name, 0, NULL, &h);
		if (r)
			fail_msg("edit %zu: attach: %s (%s)", i, shmcfg_errname(r), shmcfg_errdetail());
		shmcfg_optinfo info;
		for (shmcfg_opt o = 0; o < T_COUNT; o++) {
			r = shmcfg_opt_info(h, o, &info);
			/* an alias is refused with its final target (t.alias2's is t.a) */
			bool spoiled = o == edits[i].spoiled ||
				       (edits[i].spoiled == T_A && (o == T_ALIAS_A || o == T_ALIAS2));
			if (r != (spoiled ? SHMCFG_E_CORRUPT : 0))
				fail_msg("edit %zu: option %u: %s (%s)", i, o, shmcfg_errname(r), shmcfg_errdetail());
			if (spoiled && (!shmcfg_errdetail()[0] || strchr(shmcfg_errdetail(), '\n')))
				fail_msg("edit %zu: detail '%s'", i, shmcfg_errdetail());
		}
		int refused = lookups_refused(h);
		if ((refused > 0) != edits[i].index)
			fail_msg("edit %zu: %d lookups refused", i, refused);
		/* a commit touches only what it changes: one of t.b works, one of
		 * the spoiled option is refused */
		r = set_and_commit(h, T_B, "5", NULL);
		if (r)
			fail_msg("edit %zu: commit: %s (%s)", i, shmcfg_errname(r), shmcfg_errdetail());
		if (edits[i].spoiled < T_COUNT &&
		    (r = set_and_commit(h, edits[i].spoiled, "1", NULL)) != SHMCFG_E_CORRUPT)
			fail_msg("edit %zu: a commit of the spoiled option: %s (%s)", i, shmcfg_errname(r),
				 shmcfg_errdetail());
		/* the check validates everything */
		if (shmcfg_check(h, false, NULL, NULL) <= 0)
			fail_msg("edit %zu: the check finds nothing", i);
		shmcfg_close(h);
	}
	shmcfg_unlink(name);
}

/* Scribbling over a live segment's slots: reads fail cleanly or return some
 * value, never crash or read out of bounds; check reports the damage. */
static void test_scribbled_slots(void **state)
{
	(void)state;
	const char *name = test_name("scribble");
	shmcfg *h = fresh(name);
	assert_int_equal(set_and_commit(h, T_C, "a string value", NULL), 0);
	uint64_t cur = __atomic_load_n(&h->hdr->current, __ATOMIC_ACQUIRE);
	struct slot_hdr *sl = slot_at(h, cur_slot(cur));
	struct shmcfg__cell *cells = slot_cells(h, sl);
	/* a string cell pointing past the heap */
	cells[T_C].val = h->lay.heap_size - 2;
	cells[T_C].meta = (cells[T_C].meta & 0xffffffffull) | (1000ull << 32);
	shmcfg_value v;
	assert_int_equal(shmcfg_get(h, T_C, &v), SHMCFG_E_CORRUPT);
	shmcfg_snapshot *s;
	assert_int_equal(shmcfg_snapshot_acquire(h, &s), 0);
	assert_int_equal(shmcfg_snapshot_get(s, T_C, &v), SHMCFG_E_CORRUPT);
	shmcfg_snapshot_release(s);
	/* a cell of the wrong type */
	cells[T_A].meta = SHMCFG_STR;
	int64_t x;
	assert_int_equal(shmcfg_get_int(h, T_A, &x), SHMCFG_E_CORRUPT);
	/* a list cell with a lying count */
	cells[T_ITEMS].val = (cells[T_ITEMS].val & 0xffffffffull) | (77ull << 32);
	assert_int_equal(shmcfg_get(h, T_ITEMS, &v), SHMCFG_E_CORRUPT);
	int problems = shmcfg_check(h, true, NULL, NULL);
	assert_true(problems > 0);
	/* current naming a slot that does not exist */
	uint64_t saved = h->hdr->current;
	__atomic_store_n(&h->hdr->current, (saved & ~0xffull) | 200, __ATOMIC_RELEASE);
	assert_int_equal(shmcfg_get_int(h, T_B, &x), SHMCFG_E_CORRUPT);
	assert_int_equal(shmcfg_get(h, T_B, &v), SHMCFG_E_CORRUPT);
	assert_true(shmcfg_check(h, false, NULL, NULL) > 0);
	uint8_t hash[16];
	assert_int_equal(shmcfg_config_hash(h, hash), 0);
	/* a stamp that never matches: bounded retries, then an error, no hang */
	__atomic_store_n(&h->hdr->current, saved + (1ull << 8) * 1000, __ATOMIC_RELEASE);
	assert_int_equal(shmcfg_get_int(h, T_B, &x), SHMCFG_E_CORRUPT);
	__atomic_store_n(&h->hdr->current, saved, __ATOMIC_RELEASE);
	shmcfg_close(h);
	shmcfg_unlink(name);
}

/*
 * The public inline getter keeps its own copy of the seqlock's read side
 * (it is compiled into programs): for every stamp a slot can carry, its
 * verdict must be the library's (seqlock.h's seq_valid, behind shmcfg_get).
 * A stamp that does not validate while `current` stays put fails at once.
 */
static void test_inline_read_agrees_with_seqlock(void **state)
{
	(void)state;
	const char *name = test_name("seqagree");
	shmcfg *h = fresh(name);
	assert_int_equal(set_and_commit(h, T_A, "41", NULL), 0);
	uint64_t cur = __atomic_load_n(&h->hdr->current, __ATOMIC_ACQUIRE);
	uint64_t g = cur_gen(cur);
	struct slot_hdr *sl = slot_at(h, cur_slot(cur));
	struct shmcfg__cell *cell = slot_cells(h, sl) + T_A, saved = *cell;
	const uint64_t stamps[] = {g, SLOT_BUSY | g, g + 1, g - 1, 0, SLOT_BUSY | (g - 1), SLOT_BUSY, UINT64_MAX};
	for (size_t k = 0; k < sizeof stamps / sizeof stamps[0]; k++) {
		__atomic_store_n(&sl->gen, stamps[k], __ATOMIC_RELEASE);
		bool lib = seq_valid(&sl->gen, g);
		/* The inline getter's own verdict: the cell claims a float, the
		 * option is an int. Its fast path takes the cell when the stamp
		 * validates; otherwise the slow path answers SHMCFG_E_TYPE from
		 * the schema. So success means the inline check accepted. */
		double f = 0.5, got = 0;
		uint64_t bits;
		memcpy(&bits, &f, 8);
		*cell = (struct shmcfg__cell){bits, SHMCFG_FLOAT};
		int inl = shmcfg_get_float(h, T_A, &got);
		*cell = saved;
		shmcfg_value v;
		int slow = shmcfg_get(h, T_A, &v);
		if ((inl == 0) != lib || (slow == 0) != lib)
			fail_msg("stamp %#llx: seq_valid %d, inline getter %s, shmcfg_get %s",
				 (unsigned long long)stamps[k], lib, shmcfg_errname(inl), shmcfg_errname(slow));
		if (lib) {
			assert_true(got == 0.5);
			assert_int_equal(v.u.i, 41);
		} else {
			assert_int_equal(inl, SHMCFG_E_TYPE);
			assert_int_equal(slow, SHMCFG_E_CORRUPT); /* at once: `current` did not move */
		}
	}
	__atomic_store_n(&sl->gen, g, __ATOMIC_RELEASE);
	shmcfg_close(h);
	shmcfg_unlink(name);
}

/*
 * The reads that generated headers use (shmcfg.h: shmcfg__read_proven,
 * shmcfg__read_proven_nullable, and the batched slow path
 * shmcfg__get_slow_n) take the same verdict as the library's seqlock for
 * every stamp a slot can carry; the batched slow path fails at once when the
 * stamp does not validate and `current` stays put, and checks the handles
 * and types it is given.
 */
static void test_proven_reads_agree_with_seqlock(void **state)
{
	(void)state;
	const char *name = test_name("provenagree");
	shmcfg *h = fresh(name);
	assert_int_equal(set_and_commit(h, T_A, "41", NULL), 0);
	uint64_t cur = __atomic_load_n(&h->hdr->current, __ATOMIC_ACQUIRE);
	uint64_t g = cur_gen(cur);
	struct slot_hdr *sl = slot_at(h, cur_slot(cur));
	const shmcfg_opt opts[] = {T_A, T_OPT_INT, T_FLAG};
	const shmcfg_type types[] = {SHMCFG_INT, SHMCFG_INT, SHMCFG_BOOL};
	/* a non-nullable option's read takes the accessors' copy while its
	 * seqlock is even (its word poked here, to tell it from the slot's),
	 * and the slots while it is odd: then the stamps below decide */
	uint64_t *blk = copy_block(h, T_A), *acc = &blk[COPY_WORD(T_A)], q = __atomic_load_n(blk, __ATOMIC_ACQUIRE);
	uint64_t word = 0;
	assert_int_equal(q & 1, 0);
	assert_int_equal(*acc, 41); /* the commit kept it */
	*acc = 4141;
	assert_true(shmcfg__read_proven(h, T_A, &word));
	assert_int_equal(word, 4141);
	__atomic_store_n(blk, q + 1, __ATOMIC_RELEASE);
	assert_true(shmcfg__read_proven(h, T_A, &word));
	assert_int_equal(word, 41);
	const uint64_t stamps[] = {g, SLOT_BUSY | g, g + 1, g - 1, 0, SLOT_BUSY | (g - 1), SLOT_BUSY, UINT64_MAX};
	for (size_t k = 0; k < sizeof stamps / sizeof stamps[0]; k++) {
		__atomic_store_n(&sl->gen, stamps[k], __ATOMIC_RELEASE);
		bool lib = seq_valid(&sl->gen, g);
		uint64_t a = 0, o = 0, bits[3] = {0}, gen = 0;
		bool nulls[3] = {false};
		bool proven = shmcfg__read_proven(h, T_A, &a);
		int nullable = shmcfg__read_proven_nullable(h, T_OPT_INT, &o);
		int slow = shmcfg__get_slow_n(h, 3, opts, types, bits, nulls, &gen);
		if (proven != lib || (nullable != -1) != lib || (slow == 0) != lib)
			fail_msg("stamp %#llx: seq_valid %d, proven %d, nullable %d, batched slow path %s",
				 (unsigned long long)stamps[k], lib, proven, nullable, shmcfg_errname(slow));
		if (lib) {
			assert_int_equal(a, 41);
			assert_int_equal(nullable, SHMCFG_NULL); /* t.opt_int: null by default */
			assert_int_equal(bits[0], 41);
			assert_true(!nulls[0] && nulls[1] && !nulls[2]);
			assert_int_equal(bits[2], 0);
			assert_int_equal(gen, g);
		} else {
			assert_int_equal(slow, SHMCFG_E_CORRUPT); /* at once: `current` did not move */
		}
	}
	__atomic_store_n(&sl->gen, g, __ATOMIC_RELEASE);
	uint64_t bits[3], gen;
	bool nulls[3];
	const shmcfg_opt bad_opt[] = {T_A, T_COUNT};
	assert_int_equal(shmcfg__get_slow_n(h, 2, bad_opt, types, bits, nulls, &gen), SHMCFG_E_NOOPT);
	const shmcfg_type bad_type[] = {SHMCFG_INT, SHMCFG_FLOAT};
	assert_int_equal(shmcfg__get_slow_n(h, 2, opts, bad_type, bits, nulls, &gen), SHMCFG_E_TYPE);
	assert_non_null(strstr(shmcfg_errdetail(), "t.opt_int"));
	/* the copy as it was: check compares it with the current slot */
	*acc = 41;
	__atomic_store_n(blk, q, __ATOMIC_RELEASE);
	assert_int_equal(shmcfg_check(h, true, NULL, NULL), 0);
	*acc = 4141;
	assert_int_equal(shmcfg_check(h, true, NULL, NULL), 1); /* ... and finds a word that is not */
	*acc = 41;
	shmcfg_close(h);
	shmcfg_unlink(name);
}

/* The layout module's two halves agree: every layout shmcfg__layout makes,
 * over the range of sizes creation accepts, passes the attach-time check of
 * a header against an object of its size; one byte less does not. */
static void test_layout_passes_its_check(void **state)
{
	(void)state;
	const uint32_t opts[] = {1, 2, 63, 1000, 100000, SEG_MAX_OPTS};
	const uint32_t slots[] = {2, 8, SEG_MAX_SLOTS};
	const uint32_t readers[] = {1, 1024, SEG_MAX_READERS};
	const uint32_t history[] = {8, 1000, 1u << 20};
	int checked = 0;
	for (size_t a = 0; a < sizeof opts / sizeof *opts; a++)
		for (size_t b = 0; b < sizeof slots / sizeof *slots; b++)
			for (size_t c = 0; c < sizeof readers / sizeof *readers; c++)
				for (size_t d = 0; d < sizeof history / sizeof *history; d++) {
					shmcfg_create_opts o = {.slots = slots[b], .readers = readers[c],
								.history = history[d]};
					struct seg_header lay;
					assert_int_equal(shmcfg__layout(opts[a], 4096 + 64ull * opts[a], 256, &o, &lay), 0);
					if (shmcfg__header_check(&lay, lay.total_size, "layout"))
						fail_msg("options %u slots %u readers %u history %u: %s", opts[a],
							 slots[b], readers[c], history[d], shmcfg_errdetail());
					assert_int_not_equal(shmcfg__header_check(&lay, lay.total_size - 1, "layout"), 0);
					checked++;
				}
	assert_int_equal(checked, 6 * 3 * 3 * 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_layout_passes_its_check),
		cmocka_unit_test(test_missing),     cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_bad_magic),   cmocka_unit_test(test_other_version),
		cmocka_unit_test(test_other_schema), cmocka_unit_test(test_not_ready),
		cmocka_unit_test(test_bad_regions), cmocka_unit_test(test_forged_schema),
		cmocka_unit_test(test_scribbled_slots),
		cmocka_unit_test(test_inline_read_agrees_with_seqlock),
		cmocka_unit_test(test_proven_reads_agree_with_seqlock),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
