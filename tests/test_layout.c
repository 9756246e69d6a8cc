/* Attach validation: truncated objects, bad magic, another layout version,
 * another schema, uninitialised objects, and bytes scribbled over a live
 * segment. None may crash or read out of bounds (also run under ASan). */
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "common.h"
#include "internal.h"

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
	expect_attach(name, NULL, SHMCFG_E_VERSION, "layout version 2, this library reads version 1");
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
	/* an object sized but never marked initialised: its creator died */
	int fd = open(seg_path(name), O_RDWR | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 8192), 0);
	close(fd);
	expect_attach(name, NULL, SHMCFG_E_NOTREADY, "shmctl rm");
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
		{offsetof(struct seg_header, schema_hash), 0x5a5a, 8, SHMCFG_E_CORRUPT},
		/* a byte inside the schema region: its hash no longer matches */
		{SEG_HEADER_BYTES + 100, 0x4141414141414141ull, 8, SHMCFG_E_CORRUPT},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		shmcfg_close(fresh(name));
		poke(name, (off_t)cases[i].off, &cases[i].val, (size_t)cases[i].size);
		shmcfg *h = NULL;
		int r = shmcfg_attach(name, 0, NULL, &h);
		if (r != cases[i].err)
			fail_msg("case %zu: %s (%s)", i, shmcfg_errname(r), shmcfg_errdetail());
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_missing),     cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_bad_magic),   cmocka_unit_test(test_other_version),
		cmocka_unit_test(test_other_schema), cmocka_unit_test(test_not_ready),
		cmocka_unit_test(test_bad_regions), cmocka_unit_test(test_scribbled_slots),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
