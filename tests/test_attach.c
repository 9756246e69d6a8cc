/* SPDX-License-Identifier: MIT */
/*
 * Attach reads no option; the schema is copied and validated on first use
 * (issue 12; lib/schema/validate.c, doc/design.md "Creation and attach").
 *
 * Attach copies no page of a big schema region and validates no option:
 * each option is copied (madvise(MADV_POPULATE_WRITE) on a MAP_PRIVATE
 * mapping) and validated the first time it is used, and the copy never
 * changes again. A small region (up to 2 MiB) is copied whole at attach,
 * and its options validated at first use as well; this file has the test
 * copy of the library take the lazy path for every schema
 * (shmcfg__schema_eager_bytes = 0), but in test_small_schema_copied_at_attach.
 * So:
 *   - a descriptor spoiled by a writer after attach is refused on first use
 *     with SHMCFG_E_CORRUPT and one line of detail, through every door, and
 *     stays refused; the other options work;
 *   - bytes changed after they were first used change nothing;
 *   - string references may overlap (each is checked against the same
 *     frozen bytes); an unterminated one is refused;
 *   - a name index entry out of range is refused by the lookup that meets
 *     it, and an entry naming another option never makes a lookup return it;
 *     a name too long for the lookup's cache is found without it;
 *   - the orders (name order, implication order) are not read by a commit
 *     (only generation 1 and the check use them whole): when they are not
 *     permutations, commits work and the check reports them; the check
 *     reports ranks and dependents that disagree with them too;
 *   - an object truncated by a writer makes a first use fail, not SIGBUS;
 *   - threads using options for the first time at once agree (and are
 *     clean under ThreadSanitizer: .ci/run);
 *   - without MADV_POPULATE_WRITE (Linux < 5.14, simulated by the test copy
 *     of the library) the fallback gives the same results;
 *   - every option of a 100,000-option schema is found by its name;
 *   - a small schema is copied whole at attach, and a small segment's pages
 *     are mapped then: a first use copies and maps nothing, and what a
 *     writer spoils afterwards changes nothing.
 * Hostile cases run in children: a crash fails the test, not the runner.
 * Timings are never asserted; the count of copied pages is.
 */
#include "config.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include "common.h"
#include "faultsim.h"
#include "proc.h"
#include "internal.h"
#include "schema.h"

/* A failed check in a child: say where, and exit with the line number. */
#define CHILD_CHECK(cond, ...)                                                        \
	do {                                                                          \
		if (!(cond)) {                                                        \
			fprintf(stderr, "# child, line %d: ", __LINE__);              \
			fprintf(stderr, __VA_ARGS__);                                 \
			fprintf(stderr, " (%s)\n", shmcfg_errdetail());                \
			return __LINE__ % 250 + 1;                                    \
		}                                                                     \
	} while (0)

/* ------------------------------------------------------------------ */
/* The segment as a writer sees it                                    */
/* ------------------------------------------------------------------ */

/* A writable shared mapping of a segment: what a misbehaving writer has. */
struct writer {
	char *m;
	size_t size;
	struct seg_header *hd;
	char *schema;
	struct schema_hdr *sh;
};

static struct writer writer_open(const char *name)
{
	char path[128];
	snprintf(path, sizeof path, "/dev/shm/shmcfg.%s", name);
	int fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	struct writer w = {.size = (size_t)st.st_size};
	w.m = mmap(NULL, w.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	assert_true(w.m != MAP_FAILED);
	close(fd);
	w.hd = (struct seg_header *)w.m;
	w.schema = w.m + w.hd->schema_off;
	w.sh = (struct schema_hdr *)w.schema;
	return w;
}

static void writer_close(struct writer *w)
{
	munmap(w->m, w->size);
}

static struct opt_desc *wdesc(const struct writer *w, shmcfg_opt o)
{
	return (struct opt_desc *)(w->schema + w->sh->desc_off) + o;
}

static char *wstrings(const struct writer *w)
{
	return w->schema + w->sh->strings_off;
}

static uint32_t *windex(const struct writer *w)
{
	return (uint32_t *)(w->schema + w->sh->index_off);
}

/* The schema hash fixed up after a change, as a misbehaving writer can:
 * only shmcfg_check would notice otherwise. */
static void writer_rehash(struct writer *w)
{
	XXH128_canonical_t c;
	XXH128_canonicalFromHash(&c, XXH3_128bits(w->schema, w->hd->schema_size));
	memcpy(w->hd->schema_hash, c.digest, 16);
}

/* Pages of the handle's schema mapping copied so far. */
static size_t pages_copied(const shmcfg *h)
{
	size_t n = 0, pages = (h->priv_size + ((size_t)1 << h->page_shift) - 1) >> h->page_shift;
	for (size_t p = 0; p < pages; p++)
		n += __atomic_load_n(&h->page_ok[p], __ATOMIC_ACQUIRE) != 0;
	return n;
}

static size_t opts_validated(const shmcfg *h)
{
	size_t n = 0;
	for (uint32_t i = 0; i < h->lay.nopts; i++)
		n += __atomic_load_n(&h->opt_ok[i], __ATOMIC_ACQUIRE) != 0;
	return n;
}

static shmcfg *attach_rw(const char *name)
{
	shmcfg *h = NULL;
	int r = shmcfg_attach(name, 0, NULL, &h);
	if (r)
		fail_msg("attach %s: %s: %s", name, shmcfg_errname(r), shmcfg_errdetail());
	return keep(h);
}

/* A schema of n options: ints, every 7th a string with a doc, every 11th a
 * list; option 3 implies option 4 when true (a bool). */
static void big_name(char *buf, size_t len, uint32_t i)
{
	snprintf(buf, len, "group%03u.option_%06u", i / 1000, i);
}

static shmcfg *big_segment(const char *name, uint32_t n)
{
	shmcfg_schema *s;
	assert_int_equal(shmcfg_schema_new(&s), 0);
	for (uint32_t i = 0; i < n; i++) {
		char nm[64], def[64], doc[96], implies[96];
		big_name(nm, sizeof nm, i);
		shmcfg_optdef d = {.name = nm, .type = SHMCFG_INT, .def = def};
		snprintf(def, sizeof def, "%u", i);
		if (i == 3) {
			big_name(implies, sizeof implies, 4);
			strcat(implies, "=44");
			d.type = SHMCFG_BOOL, d.def = "false", d.implies = implies;
		} else if (i % 7 == 0) {
			snprintf(def, sizeof def, "\"value of %u\"", i);
			snprintf(doc, sizeof doc, "the string option number %u", i);
			d.type = SHMCFG_STR, d.doc = doc;
		} else if (i % 11 == 0) {
			snprintf(def, sizeof def, "[\"a%u\", \"b\"]", i);
			d.type = SHMCFG_LIST;
		}
		assert_int_equal(shmcfg_schema_add(s, &d), 0);
	}
	shmcfg_create_opts o = {.flags = SHMCFG_CREATE_FORCE | SHMCFG_CREATE_NO_ENV};
	shmcfg *h = NULL;
	int r = shmcfg_create(name, s, &o, &h);
	if (r)
		fail_msg("create %s: %s: %s", name, shmcfg_errname(r), shmcfg_errdetail());
	shmcfg_schema_free(s);
	return keep(h);
}

/* Option i of big_segment() as the schema declares it, read through every
 * door: 0, or the line of the first disagreement. */
static int big_option_ok(const shmcfg *h, uint32_t i)
{
	char nm[64];
	big_name(nm, sizeof nm, i);
	shmcfg_opt o;
	shmcfg_optinfo info;
	shmcfg_value v;
	if (shmcfg_lookup(h, nm, &o) || o != i)
		return __LINE__;
	if (shmcfg_opt_info(h, i, &info) || strcmp(info.name, nm))
		return __LINE__;
	if (shmcfg_get(h, i, &v))
		return __LINE__;
	int bad = 0;
	if (i == 3)
		bad = v.type != SHMCFG_BOOL || v.u.b;
	else if (i % 7 == 0) {
		char want[64], doc[96];
		snprintf(want, sizeof want, "value of %u", i);
		snprintf(doc, sizeof doc, "the string option number %u", i);
		bad = v.type != SHMCFG_STR || strcmp(v.u.str.ptr, want) || strcmp(info.doc, doc);
	} else if (i % 11 == 0)
		bad = v.type != SHMCFG_LIST || v.u.list.count != 2;
	else
		bad = v.type != SHMCFG_INT || v.u.i != (i == 4 ? 4 : (int64_t)i);
	shmcfg_value_clear(&v);
	return bad ? __LINE__ : 0;
}

/* ------------------------------------------------------------------ */
/* Attach at scale                                                    */
/* ------------------------------------------------------------------ */

/*
 * 100,000 options: attach copies no page and validates no option; one
 * lookup copies a handful of pages; every option is then found by its name
 * and reads its default; a commit (of an implier: its target follows) and a
 * dump work, and the check is clean.
 */
static void test_lookup_every_option_of_100k(void **state)
{
	(void)state;
	const uint32_t n = 100000;
	const char *name = new_name("attach100k");
	big_segment(name, n);
	shmcfg *h = attach_rw(name);
	assert_int_equal(shmcfg_count(h), n);
	size_t pages = (h->priv_size + ((size_t)1 << h->page_shift) - 1) >> h->page_shift;
	printf("# a schema of %u options in %zu pages: attach copied %zu, validated %zu options\n", n, pages,
	       pages_copied(h), opts_validated(h));
	assert_int_equal(pages_copied(h), 0);
	assert_int_equal(opts_validated(h), 0);
	assert_int_equal(big_option_ok(h, 77777), 0);
	printf("# one lookup and read: %zu pages copied, %zu options validated\n", pages_copied(h),
	       opts_validated(h));
	assert_true(pages_copied(h) <= 8);
	assert_true(opts_validated(h) <= 8);
	for (uint32_t i = 0; i < n; i++) {
		int line = big_option_ok(h, i);
		if (line)
			fail_msg("option %u: check at line %d: %s", i, line, shmcfg_errdetail());
	}
	assert_int_equal(opts_validated(h), n);
	/* a commit: the implication holds (option 3 implies option 4 = 44) */
	assert_int_equal(set_and_commit(h, 3, "true", NULL), 0);
	assert_int_equal(get_i(h, 4), 44);
	char *dump = NULL;
	assert_int_equal(shmcfg_dump(h, 0, &dump), 0);
	assert_non_null(strstr(dump, "\"group099.option_099999\": 99999"));
	free(dump);
	assert_int_equal(shmcfg_check(h, false, print_problem, NULL), 0);
	printf("# after every option, a commit and a dump: %zu of %zu pages copied\n", pages_copied(h), pages);
	drop(h);
}

/* ------------------------------------------------------------------ */
/* Changed after attach                                               */
/* ------------------------------------------------------------------ */

static const char *seg; /* the segment of the child tests below */

/*
 * A descriptor spoiled after attach, before its first use: refused through
 * every door, with one line of detail, and again on every later use; the
 * writer's repair does not reach the copy (a new attach sees it); the other
 * options work, commits of them too (a commit uses only the options it
 * changes and their dependents: issue 12).
 */
static int child_spoiled_after_attach(void *arg)
{
	(void)arg;
	shmcfg *h = NULL;
	CHILD_CHECK(shmcfg_attach(seg, 0, NULL, &h) == 0, "attach");
	struct writer w = writer_open(seg);
	struct opt_desc saved = *wdesc(&w, T_ITEMS);
	wdesc(&w, T_ITEMS)->name = (struct sref){(uint32_t)w.sh->strings_size - 2, 50};
	shmcfg_optinfo info;
	shmcfg_value v;
	shmcfg_opt o;
	CHILD_CHECK(shmcfg_opt_info(h, T_ITEMS, &info) == SHMCFG_E_CORRUPT, "opt_info of the spoiled option");
	const char *d = shmcfg_errdetail();
	CHILD_CHECK(strstr(d, seg) && strstr(d, "bad string reference") && !strchr(d, '\n'), "detail '%s'", d);
	CHILD_CHECK(shmcfg_get(h, T_ITEMS, &v) == SHMCFG_E_CORRUPT, "get");
	/* the slow path of a generated batched read says why, too */
	uint64_t bits, gen;
	bool null;
	CHILD_CHECK(shmcfg__get_slow_n(h, 1, &(shmcfg_opt){T_ITEMS}, &(shmcfg_type){SHMCFG_LIST}, &bits, &null,
				       &gen) == SHMCFG_E_CORRUPT,
		    "batched read");
	d = shmcfg_errdetail();
	CHILD_CHECK(strstr(d, "bad string reference") && !strchr(d, '\n'), "detail '%s'", d);
	CHILD_CHECK(shmcfg_lookup(h, "t.items", &o) == SHMCFG_E_CORRUPT, "lookup");
	CHILD_CHECK(shmcfg_is_default(h, T_ITEMS) == SHMCFG_E_CORRUPT, "is_default");
	shmcfg_txn *t;
	CHILD_CHECK(shmcfg_txn_begin(h, &t) == 0, "txn_begin");
	CHILD_CHECK(shmcfg_txn_set_text(t, T_ITEMS, "[\"z\"]") == SHMCFG_E_CORRUPT, "txn_set");
	shmcfg_txn_abort(t);
	CHILD_CHECK(shmcfg_patch_push(h) == 0, "patch_push");
	CHILD_CHECK(shmcfg_patch_set_text(h, T_ITEMS, "[\"z\"]") == SHMCFG_E_CORRUPT, "patch_set");
	CHILD_CHECK(shmcfg_patch_pop(h) == 0, "patch_pop");
	/* the others work, and commit */
	CHILD_CHECK(shmcfg_opt_info(h, T_A, &info) == 0 && !strcmp(info.name, "t.a"), "opt_info(t.a)");
	CHILD_CHECK(shmcfg_lookup(h, "t.mode", &o) == 0 && o == T_MODE, "lookup(t.mode)");
	CHILD_CHECK(set_and_commit(h, T_A, "5", NULL) == 0, "commit (%s)", shmcfg_errdetail());
	CHILD_CHECK(shmcfg_check(h, false, NULL, NULL) > 0, "check");
	/* repaired: this handle's copy keeps what it saw; a new one is sound */
	*wdesc(&w, T_ITEMS) = saved;
	CHILD_CHECK(shmcfg_opt_info(h, T_ITEMS, &info) == SHMCFG_E_CORRUPT, "opt_info after the repair");
	shmcfg *h2 = NULL;
	CHILD_CHECK(shmcfg_attach(seg, SHMCFG_ATTACH_RDONLY, NULL, &h2) == 0, "attach again");
	CHILD_CHECK(shmcfg_opt_info(h2, T_ITEMS, &info) == 0 && !strcmp(info.name, "t.items"), "new handle");
	CHILD_CHECK(shmcfg_check(h2, true, NULL, NULL) == 0, "check of the new handle");
	shmcfg_close(h2);
	shmcfg_close(h);
	writer_close(&w);
	return 0;
}

/*
 * Bytes changed after their first use change nothing: the option reads as
 * validated, and so does an option whose descriptor shares a page with it
 * (copied with it; the test schema's descriptors fit in one page).
 */
static int child_changed_after_first_use(void *arg)
{
	(void)arg;
	shmcfg *h = NULL;
	CHILD_CHECK(shmcfg_attach(seg, 0, NULL, &h) == 0, "attach");
	shmcfg_optinfo info;
	CHILD_CHECK(shmcfg_opt_info(h, T_MODE, &info) == 0, "first use of t.mode");
	struct writer w = writer_open(seg);
	struct opt_desc *dm = wdesc(&w, T_MODE), *db = wdesc(&w, T_B);
	CHILD_CHECK((char *)dm - w.schema < 4096 && (char *)db - w.schema < 4096, "descriptors on one page");
	/* t.mode: its name's bytes and terminator, its type; t.b: its type */
	memset(wstrings(&w) + dm->name.off, 'X', dm->name.len + 1);
	dm->type = 77;
	db->type = 99;
	writer_rehash(&w);
	CHILD_CHECK(shmcfg_opt_info(h, T_MODE, &info) == 0 && !strcmp(info.name, "t.mode") &&
			    info.type == SHMCFG_STR,
		    "t.mode after the change");
	shmcfg_value v;
	CHILD_CHECK(shmcfg_get(h, T_B, &v) == 0 && v.type == SHMCFG_INT, "t.b, first used after the change");
	shmcfg_opt o;
	CHILD_CHECK(shmcfg_lookup(h, "t.mode", &o) == 0 && o == T_MODE, "lookup");
	CHILD_CHECK(set_and_commit(h, T_MODE, "\"slow\"", NULL) == 0, "commit");
	/* a new handle copies the changed bytes: refused there */
	shmcfg *h2 = NULL;
	CHILD_CHECK(shmcfg_attach(seg, SHMCFG_ATTACH_RDONLY, NULL, &h2) == 0, "attach again");
	CHILD_CHECK(shmcfg_opt_info(h2, T_MODE, &info) == SHMCFG_E_CORRUPT, "t.mode on a new handle");
	CHILD_CHECK(shmcfg_opt_info(h2, T_B, &info) == SHMCFG_E_CORRUPT, "t.b on a new handle");
	shmcfg_close(h2);
	shmcfg_close(h);
	writer_close(&w);
	return 0;
}

/*
 * String references: two descriptors may name overlapping bytes (each is
 * checked against the same copy); a reference that does not end in NUL, or
 * runs over one, is refused; only the option that holds it is.
 */
static int child_overlapping_strings(void *arg)
{
	(void)arg;
	struct writer w = writer_open(seg);
	struct opt_desc *da = wdesc(&w, T_A), *db = wdesc(&w, T_B), *dc = wdesc(&w, T_C);
	struct sref adoc = da->doc; /* "a = n" */
	CHILD_CHECK(adoc.len == 5, "t.a's doc");
	/* t.b's name is the end of t.a's ("a"); t.c's default string is t.a's name */
	db->name = (struct sref){da->name.off + 2, da->name.len - 2};
	dc->def.val = da->name.off;
	dc->def.meta = SHMCFG_STR | (uint64_t)da->name.len << 32;
	writer_rehash(&w);
	shmcfg *h = NULL;
	CHILD_CHECK(shmcfg_attach(seg, SHMCFG_ATTACH_RDONLY, NULL, &h) == 0, "attach");
	shmcfg_optinfo ia, ib, ic;
	CHILD_CHECK(shmcfg_opt_info(h, T_B, &ib) == 0 && !strcmp(ib.name, "a"), "t.b named by the end of t.a's name");
	CHILD_CHECK(shmcfg_opt_info(h, T_A, &ia) == 0 && !strcmp(ia.name, "t.a") && ia.name + 2 == ib.name,
		    "t.a's name, the same bytes");
	CHILD_CHECK(shmcfg_opt_info(h, T_C, &ic) == 0 && ic.def.type == SHMCFG_STR &&
			    !strcmp(ic.def.u.str.ptr, "t.a"),
		    "t.c's default, t.a's name");
	CHILD_CHECK(shmcfg_check(h, false, NULL, NULL) > 0, "check: t.b is not found by its name");
	shmcfg_close(h);
	/* t.b's name is t.a's doc: in bounds and terminated, but no name */
	db->name = adoc;
	writer_rehash(&w);
	CHILD_CHECK(shmcfg_attach(seg, SHMCFG_ATTACH_RDONLY, NULL, &h) == 0, "attach");
	CHILD_CHECK(shmcfg_opt_info(h, T_B, &ib) == SHMCFG_E_CORRUPT, "t.b named 'a = n'");
	CHILD_CHECK(shmcfg_opt_info(h, T_A, &ia) == 0 && !strcmp(ia.doc, "a = n"), "t.a, whose doc it is");
	shmcfg_close(h);
	/* unterminated: one byte short of t.a's doc, or past its NUL */
	struct sref bad[] = {{adoc.off, adoc.len - 1}, {adoc.off + 1, adoc.len + 3}, {adoc.off, 0x7fffffff}};
	for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
		db->name = bad[k];
		writer_rehash(&w);
		CHILD_CHECK(shmcfg_attach(seg, SHMCFG_ATTACH_RDONLY, NULL, &h) == 0, "attach");
		CHILD_CHECK(shmcfg_opt_info(h, T_B, &ib) == SHMCFG_E_CORRUPT, "unterminated name %zu", k);
		CHILD_CHECK(shmcfg_opt_info(h, T_A, &ia) == 0 && !strcmp(ia.doc, "a = n"), "t.a beside it");
		shmcfg_close(h);
	}
	writer_close(&w);
	return 0;
}

/* shmcfg_check of a new handle on w's segment (rehashed): sound, or its
 * first problem starts with @p problem. */
static bool index_verdict(struct writer *w, const char *problem)
{
	writer_rehash(w);
	shmcfg *h = NULL;
	if (shmcfg_attach(seg, SHMCFG_ATTACH_RDONLY, NULL, &h) != 0)
		return false;
	int r = shmcfg_check(h, false, NULL, NULL);
	const char *d = shmcfg_errdetail(), *at = strstr(d, ": ");
	bool ok = problem ? r == 1 && at && strncmp(at + 2, problem, strlen(problem)) == 0 : r == 0;
	if (!ok)
		fprintf(stderr, "check: %d problems, '%s'\n", r, r ? d : "");
	shmcfg_close(h);
	return ok;
}

/* An index entry out of range, after attach; one naming another option;
 * shmcfg_check of the index: an option twice, one behind an empty entry,
 * two of one name. */
static int child_index_entries(void *arg)
{
	(void)arg;
	shmcfg *h = NULL;
	CHILD_CHECK(shmcfg_attach(seg, SHMCFG_ATTACH_RDONLY, NULL, &h) == 0, "attach");
	struct writer w = writer_open(seg);
	uint32_t *idx = windex(&w), slot = UINT32_MAX;
	for (uint32_t k = 0; k < w.sh->index_size; k++)
		if (idx[k] == T_B)
			slot = k;
	CHILD_CHECK(slot != UINT32_MAX, "t.b in the index");
	idx[slot] = 4000000;
	shmcfg_opt o;
	CHILD_CHECK(shmcfg_lookup(h, "t.b", &o) == SHMCFG_E_CORRUPT, "lookup through an entry out of range");
	const char *d = shmcfg_errdetail();
	CHILD_CHECK(strstr(d, "index entry") && !strchr(d, '\n'), "detail '%s'", d);
	shmcfg_close(h);
	/* naming another option: t.b is not found, and never as t.c */
	idx[slot] = T_C;
	writer_rehash(&w);
	CHILD_CHECK(shmcfg_attach(seg, SHMCFG_ATTACH_RDONLY, NULL, &h) == 0, "attach");
	int r = shmcfg_lookup(h, "t.b", &o);
	CHILD_CHECK(r == SHMCFG_E_NOOPT, "lookup of t.b: %d, option %u", r, o);
	CHILD_CHECK(shmcfg_lookup(h, "t.c", &o) == 0 && o == T_C, "t.c");
	CHILD_CHECK(shmcfg_check(h, false, NULL, NULL) > 0, "check");
	shmcfg_close(h);
	/* put back: sound again (the check below finds what it should) */
	idx[slot] = T_B;
	writer_rehash(&w);
	CHILD_CHECK(index_verdict(&w, NULL), "the builder's index");
	/* in the index twice: t.b also in an empty entry */
	uint32_t mask = w.sh->index_size - 1, empty = slot;
	while (idx[empty] != UINT32_MAX)
		empty = (empty + 1) & mask;
	idx[empty] = T_B;
	CHILD_CHECK(index_verdict(&w, "t.b: in the name index twice"), "t.b twice");
	/* behind an empty entry: t.b moved from its home (emptied: it was
	 * there) to the end of the run of full entries after it, where a
	 * lookup from a full home would have reached it */
	idx[empty] = UINT32_MAX;
	uint32_t home = (uint32_t)shmcfg__name_hash("t.b", 3) & mask, end = (home + 1) & mask;
	CHILD_CHECK(slot == home, "t.b at %u, its home %u", slot, home);
	idx[slot] = UINT32_MAX;
	while (idx[end] != UINT32_MAX)
		end = (end + 1) & mask;
	idx[end] = T_B;
	CHILD_CHECK(index_verdict(&w, "t.b: not found by its name in the index"), "t.b behind an empty entry");
	idx[end] = UINT32_MAX;
	idx[slot] = T_B;
	/* two options of one name: t.c named t.b */
	struct sref cname = wdesc(&w, T_C)->name;
	wdesc(&w, T_C)->name = wdesc(&w, T_B)->name;
	CHILD_CHECK(index_verdict(&w, "t.b: two options have this name"), "two t.b");
	wdesc(&w, T_C)->name = cname;
	CHILD_CHECK(index_verdict(&w, NULL), "the builder's index, put back");
	writer_close(&w);
	return 0;
}

/*
 * A name of LK_LEN_MAX (1,024) bytes or more, which only a hostile
 * segment has (the builder refuses names over 255 bytes): t.other renamed
 * to t.long's doc, 1,024 bytes, and put at that name's home in the index.
 * Found, by the index path each time: the lookup's cache has no room for
 * its length and must not take it.
 */
static int child_long_name(void *arg)
{
	(void)arg;
	struct writer w = writer_open(seg);
	struct sref doc = wdesc(&w, 0)->doc;
	CHILD_CHECK(doc.len == LK_LEN_MAX, "t.long's doc: %u bytes", doc.len);
	wdesc(&w, 1)->name = doc;
	const char *name = wstrings(&w) + doc.off;
	uint32_t *idx = windex(&w), mask = w.sh->index_size - 1;
	uint64_t hv = shmcfg__name_hash(name, doc.len);
	while (idx[hv & mask] != UINT32_MAX)
		hv++;
	idx[hv & mask] = 1;
	writer_rehash(&w);
	shmcfg *h = NULL;
	CHILD_CHECK(shmcfg_attach(seg, SHMCFG_ATTACH_RDONLY, NULL, &h) == 0, "attach");
	for (int k = 0; k < 3; k++) {
		shmcfg_opt o = SHMCFG_NO_OPT;
		int r = shmcfg_lookup(h, name, &o);
		CHILD_CHECK(r == 0 && o == 1, "lookup %d of the 1,024-byte name: %d, option %u", k, r, o);
	}
	CHILD_CHECK(h->lk[hv & mask] == 0, "the long name's slot cached");
	shmcfg_close(h);
	writer_close(&w);
	return 0;
}

/*
 * A writer's index whose every entry names option 0 (each lookup of
 * another name walked the whole index, then said "no such option": 66 s
 * for `shmctl load` of 100,000 names): every option is found by its name
 * past LOOKUP_PROBES_MAX probes, a missing name is not, the check says
 * what is wrong; two options of one name then fail the lookups that get
 * that far, saying so.
 */
static uint32_t idx_n; /* the options of child_index_one_option's segment */

static int child_index_one_option(void *arg)
{
	(void)arg;
	uint32_t n = idx_n;
	struct writer w = writer_open(seg);
	uint32_t *idx = windex(&w);
	for (uint32_t k = 0; k < w.sh->index_size; k++)
		idx[k] = 0;
	writer_rehash(&w);
	shmcfg *h = NULL;
	CHILD_CHECK(shmcfg_attach(seg, SHMCFG_ATTACH_RDONLY, NULL, &h) == 0, "attach");
	for (uint32_t i = 0; i < n; i++) {
		int line = big_option_ok(h, i);
		CHILD_CHECK(line == 0, "option %u: check at line %d", i, line);
	}
	CHILD_CHECK(h->by_name, "the ids sorted by name, made");
	shmcfg_opt o;
	CHILD_CHECK(shmcfg_lookup(h, "group000.option_9999999", &o) == SHMCFG_E_NOOPT, "a missing name");
	CHILD_CHECK(shmcfg_check(h, false, NULL, NULL) > 0 && strstr(shmcfg_errdetail(), "in the name index twice"),
		    "check: '%s'", shmcfg_errdetail());
	shmcfg_close(h);
	/* option 2 named as option 1 */
	struct sref name2 = wdesc(&w, 2)->name;
	wdesc(&w, 2)->name = wdesc(&w, 1)->name;
	writer_rehash(&w);
	CHILD_CHECK(shmcfg_attach(seg, SHMCFG_ATTACH_RDONLY, NULL, &h) == 0, "attach");
	char nm[64];
	big_name(nm, sizeof nm, 5);
	CHILD_CHECK(shmcfg_lookup(h, nm, &o) == SHMCFG_E_CORRUPT, "a lookup beside two options of one name");
	const char *d = shmcfg_errdetail();
	CHILD_CHECK(strstr(d, "group000.option_000001") && strstr(d, "two options have this name") && !strchr(d, '\n'),
		    "detail '%s'", d);
	/* the verdict is kept: the next lookups fail without sorting again */
	CHILD_CHECK(h->by_name && !strcmp(h->by_name->why, d), "the verdict kept");
	big_name(nm, sizeof nm, 6);
	CHILD_CHECK(shmcfg_lookup(h, nm, &o) == SHMCFG_E_CORRUPT && !strcmp(shmcfg_errdetail(), h->by_name->why),
		    "a second lookup: '%s'", shmcfg_errdetail());
	shmcfg_close(h);
	/* a load says so too, strict or not: not "unknown option" (skipped) */
	char text[96];
	snprintf(text, sizeof text, "{\"%s\": 66}", nm);
	CHILD_CHECK(shmcfg_attach(seg, 0, NULL, &h) == 0, "attach read-write");
	for (unsigned flags = 0; flags <= SHMCFG_LOAD_STRICT; flags += SHMCFG_LOAD_STRICT) {
		int r = shmcfg_load_ex(h, text, strlen(text), flags, NULL, NULL, NULL, NULL);
		d = shmcfg_errdetail();
		CHILD_CHECK(r == SHMCFG_E_CORRUPT && strstr(d, "two options have this name"), "load (flags %u): %d '%s'",
			    flags, r, d);
	}
	shmcfg_close(h);
	/* option 7 spoiled instead (its name out of bounds): the lookups that
	 * get that far say so, and the verdict is kept */
	wdesc(&w, 2)->name = name2;
	struct sref name7 = wdesc(&w, 7)->name;
	wdesc(&w, 7)->name = (struct sref){(uint32_t)w.sh->strings_size - 2, 50};
	CHILD_CHECK(shmcfg_attach(seg, SHMCFG_ATTACH_RDONLY, NULL, &h) == 0, "attach");
	CHILD_CHECK(shmcfg_lookup(h, nm, &o) == SHMCFG_E_CORRUPT, "a lookup beside a spoiled option");
	d = shmcfg_errdetail();
	CHILD_CHECK(strstr(d, "bad string reference") && h->by_name && !strcmp(h->by_name->why, d), "detail '%s'", d);
	shmcfg_close(h);
	wdesc(&w, 7)->name = name7;
	writer_close(&w);
	return 0;
}

/* The ranks used whole, as the implication order (by generation 1 and the
 * check; a commit uses neither): the check reports them. */
static int child_orders(void *arg)
{
	(void)arg;
	struct writer w = writer_open(seg);
	for (int k = 0; k < 3; k++) {
		/* a rank given twice, one out of range, an implied option ranked
		 * before its implier */
		struct opt_desc *a = wdesc(&w, k == 2 ? T_FLAG : 5), *b = wdesc(&w, k == 2 ? T_DEBUG : 4);
		uint32_t sa = a->rank, sb = b->rank;
		if (k == 0)
			a->rank = b->rank;
		else if (k == 1)
			a->rank = 1000;
		else
			a->rank = sb, b->rank = sa;
		writer_rehash(&w);
		shmcfg *h = NULL;
		CHILD_CHECK(shmcfg_attach(seg, 0, NULL, &h) == 0, "attach");
		int64_t x;
		CHILD_CHECK(shmcfg_get_int(h, T_A, &x) == 0, "a read");
		char val[8];
		snprintf(val, sizeof val, "%d", 90 + k);
		CHILD_CHECK(set_and_commit(h, T_A, val, NULL) == 0, "commit with rank edit %d (%s)", k, shmcfg_errdetail());
		CHILD_CHECK(shmcfg_check(h, false, NULL, NULL) > 0, "check");
		CHILD_CHECK(strstr(shmcfg_errdetail(), k == 1 ? "rank" : "order"), "detail '%s'", shmcfg_errdetail());
		shmcfg_close(h);
		a->rank = sa;
		b->rank = sb;
	}
	writer_rehash(&w);
	writer_close(&w);
	return 0;
}

/*
 * What a commit follows when an option's cell moves (resolve.c): the
 * option's dependents and its rank. First use checks only their bounds;
 * the check reports a dependent that is another option's implication, an
 * alias left out of its target's dependents, and a rank that is not the
 * option's place in the implication order.
 */
static int child_dependents(void *arg)
{
	(void)arg;
	struct writer w = writer_open(seg);
	uint32_t *rdeps = (uint32_t *)(w.schema + w.sh->rdeps_off);
	struct opt_desc *mode = wdesc(&w, T_MODE), *a = wdesc(&w, T_A), *flag = wdesc(&w, T_FLAG);
	CHILD_CHECK(mode->rdep_n == 2 && a->rdep_n == 2 && flag->rdep_n == 1, "the test schema's dependents");
	static const char *const want[] = {"dependent 0 is not", "missing from the dependents", "rank"};
	for (int k = 0; k < 3; k++) {
		struct opt_desc saved_mode = *mode, saved_a = *a;
		uint32_t saved = rdeps[mode->rdep_first];
		if (k == 0)
			rdeps[mode->rdep_first] = rdeps[flag->rdep_first]; /* t.debug's implication of t.flag */
		else if (k == 1)
			a->rdep_n--; /* one of t.a's two aliases */
		else
			mode->rank = flag->rank;
		writer_rehash(&w);
		shmcfg *h = NULL;
		CHILD_CHECK(shmcfg_attach(seg, SHMCFG_ATTACH_RDONLY, NULL, &h) == 0, "attach");
		CHILD_CHECK(shmcfg_check(h, false, NULL, NULL) > 0, "check, edit %d", k);
		CHILD_CHECK(strstr(shmcfg_errdetail(), want[k]), "edit %d: detail '%s'", k, shmcfg_errdetail());
		shmcfg_close(h);
		*mode = saved_mode;
		*a = saved_a;
		rdeps[mode->rdep_first] = saved;
	}
	/* an entry twice (a commit would walk it, and decode its value, as
	 * many times as a writer repeats it): refused at first use */
	uint32_t second = rdeps[mode->rdep_first + 1];
	rdeps[mode->rdep_first + 1] = rdeps[mode->rdep_first];
	writer_rehash(&w);
	shmcfg *h = NULL;
	CHILD_CHECK(shmcfg_attach(seg, SHMCFG_ATTACH_RDONLY, NULL, &h) == 0, "attach");
	shmcfg_optinfo info;
	CHILD_CHECK(shmcfg_opt_info(h, T_MODE, &info) == SHMCFG_E_CORRUPT &&
			    strstr(shmcfg_errdetail(), "t.mode: dependents not in their impliers' rank order"),
		    "t.mode with a dependent twice: '%s'", shmcfg_errdetail());
	shmcfg_close(h);
	rdeps[mode->rdep_first + 1] = second;
	writer_rehash(&w);
	CHILD_CHECK(shmcfg_attach(seg, SHMCFG_ATTACH_RDONLY, NULL, &h) == 0, "attach");
	CHILD_CHECK(shmcfg_check(h, true, NULL, NULL) == 0, "check after the repairs");
	shmcfg_close(h);
	writer_close(&w);
	return 0;
}

/* A writer truncates the object: a first use fails (EFAULT from the copy),
 * it does not raise SIGBUS. */
static int child_truncated(void *arg)
{
	(void)arg;
	shmcfg *h = NULL;
	CHILD_CHECK(shmcfg_attach(seg, SHMCFG_ATTACH_RDONLY, NULL, &h) == 0, "attach");
	uint32_t far = h->lay.nopts - 1;
	uint64_t cut = h->lay.schema_off + h->sch->desc_off + (uint64_t)far * sizeof(struct opt_desc);
	char path[128];
	snprintf(path, sizeof path, "/dev/shm/shmcfg.%s", seg);
	int fd = open(path, O_RDWR);
	CHILD_CHECK(fd >= 0 && ftruncate(fd, (off_t)(cut & ~4095ull)) == 0, "ftruncate");
	close(fd);
	shmcfg_optinfo info;
	CHILD_CHECK(shmcfg_opt_info(h, far, &info) == SHMCFG_E_CORRUPT, "first use past the end");
	CHILD_CHECK(shmcfg_check(h, false, NULL, NULL) > 0, "check");
	shmcfg_close(h);
	return 0;
}

static void run_child(int (*fn)(void *), const char *what)
{
	pid_t pid = spawn(fn, NULL);
	int st = reap(pid);
	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		char t[64];
		status_text(st, t, sizeof t);
		fail_msg("%s: the child %s", what, t);
	}
}

static void small_segment(void)
{
	seg = new_name("attach");
	keep(test_create(seg, NULL));
}

static void test_spoiled_after_attach_refused_on_first_use(void **state)
{
	(void)state;
	small_segment();
	run_child(child_spoiled_after_attach, "spoiled after attach");
}

static void test_changes_after_first_use_change_nothing(void **state)
{
	(void)state;
	small_segment();
	run_child(child_changed_after_first_use, "changed after first use");
}

static void test_overlapping_and_unterminated_strings(void **state)
{
	(void)state;
	small_segment();
	run_child(child_overlapping_strings, "overlapping strings");
}

static void test_index_entries_checked_by_lookup(void **state)
{
	(void)state;
	small_segment();
	run_child(child_index_entries, "index entries");
}

static void test_long_name_not_cached(void **state)
{
	(void)state;
	static char doc[LK_LEN_MAX + 1];
	memset(doc, 'y', LK_LEN_MAX);
	shmcfg_schema *s;
	assert_int_equal(shmcfg_schema_new(&s), 0);
	shmcfg_optdef d0 = {.name = "t.long", .type = SHMCFG_INT, .doc = doc};
	shmcfg_optdef d1 = {.name = "t.other", .type = SHMCFG_INT};
	assert_int_equal(shmcfg_schema_add(s, &d0), 0);
	assert_int_equal(shmcfg_schema_add(s, &d1), 0);
	seg = new_name("attachlong");
	shmcfg_create_opts o = {.flags = SHMCFG_CREATE_FORCE | SHMCFG_CREATE_NO_ENV};
	shmcfg *h = NULL;
	assert_int_equal(shmcfg_create(seg, s, &o, &h), 0);
	shmcfg_schema_free(s);
	keep(h);
	run_child(child_long_name, "a 1,024-byte name");
}

static void test_index_naming_one_option(void **state)
{
	(void)state;
	idx_n = 300; /* an index of 1,024 entries */
	seg = new_name("attachidx");
	big_segment(seg, idx_n);
	run_child(child_index_one_option, "an index naming one option");
}

/*
 * Honest names chosen to collide: 100 whose homes lie in the first 4 of
 * the index's 256 entries, one run of 100 full entries. Each is found
 * (past LOOKUP_PROBES_MAX probes by the ids sorted by name), a missing
 * name of the same homes is not, and the check finds nothing wrong.
 */
static void test_names_of_one_hash(void **state)
{
	(void)state;
	const uint32_t n = 100, mask = schema_index_size(n) - 1;
	char nms[100][24];
	shmcfg_schema *s;
	assert_int_equal(shmcfg_schema_new(&s), 0);
	char missing[24] = "";
	for (uint32_t u = 0, k = 0; k < n || !*missing; u++) {
		char nm[24];
		snprintf(nm, sizeof nm, "c.o%u", u);
		if ((shmcfg__name_hash(nm, strlen(nm)) & mask) >= 4)
			continue;
		if (k == n) {
			strcpy(missing, nm);
			continue;
		}
		strcpy(nms[k], nm);
		shmcfg_optdef d = {.name = nms[k], .type = SHMCFG_INT};
		assert_int_equal(shmcfg_schema_add(s, &d), 0);
		k++;
	}
	const char *name = new_name("attachhash");
	shmcfg_create_opts o = {.flags = SHMCFG_CREATE_FORCE | SHMCFG_CREATE_NO_ENV};
	shmcfg *c = NULL;
	assert_int_equal(shmcfg_create(name, s, &o, &c), 0);
	shmcfg_schema_free(s);
	keep(c);
	shmcfg *h = attach_rw(name);
	assert_int_equal(h->sch->index_size, mask + 1);
	for (uint32_t i = 0; i < n; i++) {
		shmcfg_opt got = SHMCFG_NO_OPT;
		if (shmcfg_lookup(h, nms[i], &got) || got != i)
			fail_msg("%s: option %u, not %u (%s)", nms[i], got, i, shmcfg_errdetail());
	}
	assert_non_null(h->by_name);
	shmcfg_opt got;
	assert_int_equal(shmcfg_lookup(h, missing, &got), SHMCFG_E_NOOPT);
	assert_int_equal(shmcfg_check(h, false, print_problem, NULL), 0);
	drop(h);
}

static void test_orders_checked_when_used_whole(void **state)
{
	(void)state;
	small_segment();
	run_child(child_orders, "orders");
}

static void test_dependents_and_ranks_checked(void **state)
{
	(void)state;
	small_segment();
	run_child(child_dependents, "dependents");
}

static void test_truncated_object_fails_first_use(void **state)
{
	(void)state;
	seg = new_name("attachcut");
	drop(big_segment(seg, 2000)); /* descriptors over 70 pages; no handle of ours maps it */
	run_child(child_truncated, "truncated");
}

/* Without MADV_POPULATE_WRITE, as on Linux before 5.14 (the test copy of the
 * library refuses the advice when SHMCFG_NO_POPULATE_WRITE is set): the
 * fallback (a compare-exchange of each page with itself) gives the same
 * results. */
static int child_fallback(void *arg)
{
	(void)arg;
	setenv("SHMCFG_NO_POPULATE_WRITE", "1", 1);
	int r = child_spoiled_after_attach(NULL);
	if (r)
		return r;
	r = child_changed_after_first_use(NULL);
	if (r)
		return r;
	shmcfg *h = NULL;
	CHILD_CHECK(shmcfg_attach(seg, SHMCFG_ATTACH_RDONLY, NULL, &h) == 0, "attach");
	CHILD_CHECK(shmcfg_check(h, false, NULL, NULL) > 0, "check (t.mode and t.b were spoiled)");
	shmcfg_close(h);
	return 0;
}

static void test_without_populate_write(void **state)
{
	(void)state;
	small_segment();
	run_child(child_fallback, "without MADV_POPULATE_WRITE");
}

/* ------------------------------------------------------------------ */
/* Threads                                                            */
/* ------------------------------------------------------------------ */

#define NTHREADS 8
#define THREAD_OPTS 3000
#define SPOILED_OPT 1234

struct first_use {
	shmcfg *h;
	pthread_barrier_t *start;
	const int *expect;  /* big_option_ok() of each option, one thread alone */
	int k;
	int differ;         /* options whose result differs from expect */
	int refused;        /* descriptions and reads of the spoiled option refused */
};

/* Every option once, in an order of the thread's own, all threads at once
 * on a handle that has used none: every copy and validation races. */
static void *first_use_thread(void *arg)
{
	struct first_use *f = arg;
	pthread_barrier_wait(f->start);
	uint32_t step = 7 + 2 * (uint32_t)f->k; /* odd, prime to 3000 */
	while (THREAD_OPTS % step == 0 || step % 2 == 0 || step % 3 == 0 || step % 5 == 0)
		step++;
	for (uint32_t j = 0; j < THREAD_OPTS; j++) {
		uint32_t i = (uint32_t)((uint64_t)(j * step + (uint32_t)f->k * 101) % THREAD_OPTS);
		if (i == SPOILED_OPT) {
			shmcfg_optinfo info;
			shmcfg_value v;
			f->refused += shmcfg_opt_info(f->h, i, &info) == SHMCFG_E_CORRUPT;
			f->refused += shmcfg_get(f->h, i, &v) == SHMCFG_E_CORRUPT;
		}
		f->differ += big_option_ok(f->h, i) != f->expect[i];
	}
	return NULL;
}

static void test_concurrent_first_use(void **state)
{
	(void)state;
	const char *name = new_name("attachmt");
	big_segment(name, THREAD_OPTS);
	struct writer w = writer_open(name);
	wdesc(&w, SPOILED_OPT)->n_env_force = 3; /* a count without a list */
	writer_rehash(&w);
	writer_close(&w);
	/* what one thread alone sees: the spoiled option is refused, and so is
	 * the lookup of any name whose probes pass its index entry first */
	static int expect[THREAD_OPTS];
	shmcfg *ref = attach_rw(name);
	int refused = 0;
	for (uint32_t i = 0; i < THREAD_OPTS; i++) {
		expect[i] = big_option_ok(ref, i);
		if (expect[i]) {
			char nm[64];
			shmcfg_opt o;
			big_name(nm, sizeof nm, i);
			assert_int_equal(shmcfg_lookup(ref, nm, &o), SHMCFG_E_CORRUPT);
			refused++;
		}
	}
	assert_true(expect[SPOILED_OPT] != 0);
	assert_true(refused < 10);
	printf("# lookups refused (the spoiled option's, and names probing past it): %d\n", refused);
	uint64_t alone = ref->checked_bytes; /* what the validations read, one thread alone */
	assert_true(alone > 0 && alone <= ref->lay.schema_size);
	drop(ref);
	for (int round = 0; round < 3; round++) {
		shmcfg *h = NULL;
		assert_int_equal(shmcfg_attach(name, SHMCFG_ATTACH_RDONLY, NULL, &h), 0);
		pthread_barrier_t start;
		pthread_barrier_init(&start, NULL, NTHREADS);
		struct first_use f[NTHREADS];
		pthread_t th[NTHREADS];
		for (int k = 0; k < NTHREADS; k++) {
			f[k] = (struct first_use){.h = h, .start = &start, .expect = expect, .k = k};
			assert_int_equal(pthread_create(&th[k], NULL, first_use_thread, &f[k]), 0);
		}
		for (int k = 0; k < NTHREADS; k++) {
			pthread_join(th[k], NULL);
			if (f[k].differ || f[k].refused != 2)
				fail_msg("round %d, thread %d: %d options read otherwise than alone, the spoiled one refused %d times of 2",
					 round, k, f[k].differ, f[k].refused);
		}
		pthread_barrier_destroy(&start);
		/* the options refused at lookup were not used further; each one
		 * validated counts once in the handle's budget, however many
		 * threads checked it at once */
		assert_int_equal(opts_validated(h), THREAD_OPTS - refused);
		assert_int_equal(h->checked_bytes, alone);
		shmcfg_close(h);
	}
}

/* ------------------------------------------------------------------ */
/* A small schema: copied whole at attach                             */
/* ------------------------------------------------------------------ */

/* Resident pages of the mapping that starts at addr, from /proc/self/smaps
 * (shared pages count once they are mapped in this process). */
static long rss_pages_at(const void *addr)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	if (!f)
		return -1;
	char line[512];
	bool in = false;
	long kb = -1;
	while (fgets(line, sizeof line, f)) {
		unsigned long lo, hi;
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
			in = lo == (unsigned long)addr;
		else if (in && sscanf(line, "Rss: %ld kB", &kb) == 1)
			break;
	}
	fclose(f);
	return kb < 0 ? -1 : kb / 4;
}

static int child_small_schema(void *arg)
{
	(void)arg;
	shmcfg__schema_eager_bytes = 2u << 20; /* the library's own threshold */
	shmcfg *h = NULL;
	CHILD_CHECK(shmcfg_attach(seg, SHMCFG_ATTACH_RDONLY, NULL, &h) == 0, "attach");
	size_t pages = (h->priv_size + ((size_t)1 << h->page_shift) - 1) >> h->page_shift;
	size_t schema_pages = pages - (h->lay.schema_off >> h->page_shift);
	CHILD_CHECK(pages_copied(h) == schema_pages, "attach copied %zu of the schema's %zu pages", pages_copied(h),
		    schema_pages);
	CHILD_CHECK(opts_validated(h) == h->lay.nopts, "attach validated %zu of %u options", opts_validated(h),
		    h->lay.nopts);
	long rss = rss_pages_at(h->base);
	CHILD_CHECK(rss == (long)((h->size + 4095) / 4096), "%ld of the segment's %zu pages mapped after attach", rss,
		    (h->size + 4095) / 4096);
	/* a writer spoils a descriptor after attach: the copy keeps what it was */
	struct writer w = writer_open(seg);
	struct opt_desc saved = *wdesc(&w, T_ITEMS);
	wdesc(&w, T_ITEMS)->name = (struct sref){(uint32_t)w.sh->strings_size - 2, 50};
	shmcfg_optinfo info;
	shmcfg_opt o;
	CHILD_CHECK(shmcfg_opt_info(h, T_ITEMS, &info) == 0 && !strcmp(info.name, "t.items"), "opt_info");
	CHILD_CHECK(shmcfg_lookup(h, "t.items", &o) == 0 && o == T_ITEMS, "lookup");
	shmcfg_close(h);
	/* spoiled before attach: the attach works and validates the others; the
	 * spoiled one is refused by its uses, with their detail, as lazily */
	CHILD_CHECK(shmcfg_attach(seg, SHMCFG_ATTACH_RDONLY, NULL, &h) == 0 && !*shmcfg_errdetail(),
		    "attach of a schema with a spoiled option");
	CHILD_CHECK(opts_validated(h) == h->lay.nopts - 1, "attach validated %zu of %u options", opts_validated(h),
		    h->lay.nopts);
	CHILD_CHECK(shmcfg_opt_info(h, T_ITEMS, &info) == SHMCFG_E_CORRUPT &&
			    strstr(shmcfg_errdetail(), "bad string reference"),
		    "opt_info of the spoiled option");
	CHILD_CHECK(shmcfg_lookup(h, "t.items", &o) == SHMCFG_E_CORRUPT, "lookup of the spoiled option");
	CHILD_CHECK(shmcfg_opt_info(h, T_ITEMS + 1, &info) == 0, "opt_info of another");
	shmcfg_close(h);
	*wdesc(&w, T_ITEMS) = saved;
	writer_close(&w);
	return 0;
}

/*
 * A small schema (the test schema: a few pages) is copied whole by attach,
 * and its options validated then (a spoiled one left for its uses to
 * refuse); the small segment's pages are all mapped by attach. What a
 * writer spoils after attach changes nothing.
 */
static void test_small_schema_copied_at_attach(void **state)
{
	(void)state;
	small_segment();
	run_child(child_small_schema, "small schema");
}

/*
 * A writer points every option's doc at one long string (a valid one: each
 * option still validates): validating all of them would read it once per
 * option (1,000 x 200 KB here; a hostile review made an attach take 3.5 s
 * so). Attach stops validating once its checks have read twice the
 * schema's bytes; the others are validated on first use, and work. A full
 * scan stops there too, with the reason: shmcfg_check, a dump, and the
 * attach with SHMCFG_ATTACH_PREFAULT (the cluster agent's).
 */
#define WB_OPTS 1000
#define WB_DOC (200u << 10)
static int child_warm_bounded(void *arg)
{
	(void)arg;
	shmcfg__schema_eager_bytes = 2u << 20; /* the library's own threshold */
	struct writer w = writer_open(seg);
	struct sref doc = wdesc(&w, 0)->doc;
	CHILD_CHECK(doc.len == WB_DOC, "option 0's doc is %u bytes", doc.len);
	for (shmcfg_opt o = 1; o < WB_OPTS; o++)
		wdesc(&w, o)->doc = doc;
	writer_rehash(&w);
	shmcfg *h = NULL;
	CHILD_CHECK(shmcfg_attach(seg, SHMCFG_ATTACH_RDONLY, NULL, &h) == 0, "attach");
	CHILD_CHECK(SEG_HEADER_BYTES + h->lay.schema_size <= (2u << 20), "a schema of %llu bytes is not small",
		    (unsigned long long)h->lay.schema_size);
	size_t before = opts_validated(h);
	CHILD_CHECK(before >= 1 && before < 20, "attach validated %zu of %u options", before, WB_OPTS);
	shmcfg_optinfo info;
	CHILD_CHECK(shmcfg_opt_info(h, 777, &info) == 0 && strlen(info.doc) == WB_DOC, "the 777th option's doc");
	CHILD_CHECK(opts_validated(h) == before + 1, "first use validated %zu", opts_validated(h) - before);
	/* the full scans stop there too, and say why: the check, and the
	 * attach that validates every option */
	const char *why = "schema: its options reference more than twice its bytes";
	CHILD_CHECK(shmcfg_check(h, false, NULL, NULL) == 1 && strstr(shmcfg_errdetail(), why), "check: '%s'",
		    shmcfg_errdetail());
	/* a dump validates every option: the handle's budget stops it */
	char *dump = NULL;
	CHILD_CHECK(shmcfg_dump(h, 0, &dump) == SHMCFG_E_CORRUPT && strstr(shmcfg_errdetail(), why) && !dump,
		    "dump: '%s'", shmcfg_errdetail());
	shmcfg_close(h);
	h = NULL;
	CHILD_CHECK(shmcfg_attach(seg, SHMCFG_ATTACH_RDONLY | SHMCFG_ATTACH_PREFAULT, NULL, &h) == SHMCFG_E_CORRUPT &&
			    strstr(shmcfg_errdetail(), why) && !h,
		    "attach with SHMCFG_ATTACH_PREFAULT: '%s'", shmcfg_errdetail());
	writer_close(&w);
	return 0;
}

static void test_warm_bounded(void **state)
{
	(void)state;
	seg = new_name("warm");
	shmcfg_schema *s;
	assert_int_equal(shmcfg_schema_new(&s), 0);
	char *doc = malloc(WB_DOC + 1);
	assert_non_null(doc);
	memset(doc, 'd', WB_DOC);
	doc[WB_DOC] = 0;
	for (uint32_t i = 0; i < WB_OPTS; i++) {
		char nm[64];
		big_name(nm, sizeof nm, i);
		shmcfg_optdef d = {.name = nm, .type = SHMCFG_INT, .def = "1", .doc = i ? NULL : doc};
		assert_int_equal(shmcfg_schema_add(s, &d), 0);
	}
	free(doc);
	shmcfg *h = NULL;
	shmcfg_create_opts o = {.flags = SHMCFG_CREATE_FORCE | SHMCFG_CREATE_NO_ENV};
	assert_int_equal(shmcfg_create(seg, s, &o, &h), 0);
	shmcfg_schema_free(s);
	keep(h);
	run_child(child_warm_bounded, "bounded validation at attach");
}

/*
 * One option's implications all reference one long list (each valid):
 * checking it would read the list once per implication (a hostile review
 * made a 4 MB schema's check, dump and prefaulting attach take 40 s so).
 * Its check stops once they have read the schema's bytes, and says so.
 */
static void problem_says_implications(const char *problem, void *ud)
{
	if (strstr(problem, "x.a: its implications reference more bytes than the schema holds"))
		*(bool *)ud = true;
}

#define IB_TARGETS 64
#define IB_DOC (256u << 10)
static int child_implications_bounded(void *arg)
{
	(void)arg;
	struct writer w = writer_open(seg);
	struct sref doc = wdesc(&w, 0)->doc; /* x.big's */
	CHILD_CHECK(doc.len == IB_DOC, "x.big's doc is %u bytes", doc.len);
	char *bytes = wstrings(&w) + doc.off;
	for (uint32_t k = 0; k < doc.len; k += 2) /* "a\0a\0...": a list of doc.len / 2 items */
		bytes[k] = 'a', bytes[k + 1] = 0;
	struct opt_desc *a = wdesc(&w, 1); /* x.a */
	CHILD_CHECK(a->implies_n == IB_TARGETS, "x.a implies %u", a->implies_n);
	struct implies_ent *imp = (struct implies_ent *)(w.schema + w.sh->implies_off);
	for (uint32_t k = a->implies_first; k < a->implies_first + a->implies_n; k++) {
		imp[k].value.val = doc.off | (uint64_t)(doc.len / 2) << 32;
		imp[k].value.meta = (imp[k].value.meta & 0xffffffffull) | (uint64_t)doc.len << 32;
	}
	writer_rehash(&w);
	shmcfg *h = NULL;
	CHILD_CHECK(shmcfg_attach(seg, SHMCFG_ATTACH_RDONLY, NULL, &h) == 0, "attach");
	shmcfg_optinfo info;
	CHILD_CHECK(shmcfg_opt_info(h, 1, &info) == SHMCFG_E_CORRUPT &&
			    strstr(shmcfg_errdetail(), "x.a: its implications reference more bytes than the schema holds"),
		    "x.a: '%s'", shmcfg_errdetail());
	/* the check says so too (after x.big's doc, no string now) */
	bool said = false;
	CHILD_CHECK(shmcfg_check(h, false, problem_says_implications, &said) >= 2 && said, "check: '%s'",
		    shmcfg_errdetail());
	shmcfg_close(h);
	writer_close(&w);
	return 0;
}

static void test_implications_bounded(void **state)
{
	(void)state;
	seg = new_name("implbound");
	shmcfg_schema *s;
	assert_int_equal(shmcfg_schema_new(&s), 0);
	char *doc = malloc(IB_DOC + 1), implies[IB_TARGETS * 24];
	assert_non_null(doc);
	memset(doc, 'd', IB_DOC);
	doc[IB_DOC] = 0;
	shmcfg_optdef big = {.name = "x.big", .type = SHMCFG_INT, .def = "0", .doc = doc};
	assert_int_equal(shmcfg_schema_add(s, &big), 0);
	size_t len = 0;
	for (int k = 0; k < IB_TARGETS; k++)
		len += (size_t)snprintf(implies + len, sizeof implies - len, "%sx.t%d=[\"a\"]", k ? "; " : "", k);
	shmcfg_optdef a = {.name = "x.a", .type = SHMCFG_BOOL, .def = "false", .implies = implies};
	assert_int_equal(shmcfg_schema_add(s, &a), 0);
	for (int k = 0; k < IB_TARGETS; k++) {
		char nm[32];
		snprintf(nm, sizeof nm, "x.t%d", k);
		shmcfg_optdef t = {.name = nm, .type = SHMCFG_LIST, .def = "[]"};
		assert_int_equal(shmcfg_schema_add(s, &t), 0);
	}
	free(doc);
	shmcfg *h = NULL;
	shmcfg_create_opts o = {.flags = SHMCFG_CREATE_FORCE | SHMCFG_CREATE_NO_ENV};
	assert_int_equal(shmcfg_create(seg, s, &o, &h), 0);
	shmcfg_schema_free(s);
	keep(h);
	run_child(child_implications_bounded, "one option's implications bounded");
}

/* ------------------------------------------------------------------ */
/* SHMCFG_ATTACH_PREFAULT: the first-use work done at attach          */
/* ------------------------------------------------------------------ */

/* Minor page faults of this thread so far. */
static long thread_faults(void)
{
	struct rusage u;
	getrusage(RUSAGE_THREAD, &u);
	return u.ru_minflt;
}

/* Of the segment below (over SEG_EAGER_BYTES, so attach maps it lazily by
 * default), the option the k-th commit changes: spread over the cells. */
#define PF_OPTS 30000
static shmcfg_opt pf_opt(int k)
{
	return (shmcfg_opt)(1 + (uint32_t)k * (PF_OPTS / 9));
}

static int child_prefault(void *arg)
{
	(void)arg;
	size_t page = (size_t)1 << 12;
	/* the default attach, as a control: lazy at this size */
	shmcfg *h0 = NULL;
	CHILD_CHECK(shmcfg_attach(seg, 0, NULL, &h0) == 0, "attach");
	CHILD_CHECK(h0->size > SEG_EAGER_BYTES, "a segment of %zu bytes is mapped whole by default", h0->size);
	long rss0 = rss_pages_at(h0->base);
	CHILD_CHECK(rss0 >= 0 && rss0 < (long)(h0->size / page / 2), "the default attach mapped %ld of %zu pages", rss0,
		    h0->size / page);
	CHILD_CHECK(pages_copied(h0) == 0 && opts_validated(h0) == 0, "the default attach copied %zu pages, validated %zu",
		    pages_copied(h0), opts_validated(h0));
	CHILD_CHECK(!h0->self_known, "the default attach looked up the committer's names");
	shmcfg_close(h0);

	for (int rdonly = 0; rdonly < 2; rdonly++) {
		shmcfg *h = NULL;
		CHILD_CHECK(shmcfg_attach(seg, SHMCFG_ATTACH_PREFAULT | (rdonly ? SHMCFG_ATTACH_RDONLY : 0), NULL, &h) ==
				    0,
			    "attach with SHMCFG_ATTACH_PREFAULT");
		/* every page of the segment up to the heap's carved chunks (its
		 * room never carved stays address space) but the schema's, whose
		 * bytes are read through the private copy, and of the accessors'
		 * copy mapped, the whole schema copied, every option validated */
		long rss = rss_pages_at(h->base), copy = rss_pages_at((char *)h + HANDLE_BYTES);
		/* but the schema region's whole pages, read through the copy */
		size_t used = (size_t)(h->lay.heap_off + h->hdr->heap_top + page - 1) / page -
			      ((size_t)(h->lay.schema_off + h->lay.schema_size) / page -
			       (size_t)(h->lay.schema_off + page - 1) / page);
		CHILD_CHECK(h->hdr->heap_top < h->lay.heap_size / 2, "a heap %llu of %llu bytes carved",
			    (unsigned long long)h->hdr->heap_top, (unsigned long long)h->lay.heap_size);
		CHILD_CHECK(rss >= (long)used && rss < (long)((h->size + page - 1) / page),
			    "%ld of the segment's %zu pages mapped, its %zu up to the heap's carved chunks", rss,
			    (h->size + page - 1) / page, used);
		CHILD_CHECK(copy == (long)(copy_map_bytes(h->lay.nopts) / page), "%ld of the copy's %zu pages mapped",
			    copy, copy_map_bytes(h->lay.nopts) / page);
		size_t pages = (h->priv_size + page - 1) / page, schema_pages = pages - (h->lay.schema_off / page);
		CHILD_CHECK(pages_copied(h) == schema_pages, "%zu of the schema's %zu pages copied", pages_copied(h),
			    schema_pages);
		CHILD_CHECK(opts_validated(h) == PF_OPTS, "%zu of %u options validated", opts_validated(h), PF_OPTS);
		/* a writer's names for the history known: its first commit
		 * does not look them up */
		CHILD_CHECK(h->self_known == !rdonly, "the committer's names %sknown", h->self_known ? "" : "not ");
		if (!rdonly) {
			/* so a writer's commits after its first (which makes the
			 * handle's transaction) take no page fault of the segment's;
			 * the process's own may take one: the first use of a libc
			 * routine faults in its code (seen: one fault-around of
			 * libc's text, in 3 runs of 25). Not asserted where a
			 * sanitizer's shadow memory faults on its own. */
			CHILD_CHECK(set_and_commit(h, pf_opt(0), "1", NULL) == 0, "commit");
			long f0 = thread_faults();
			for (int k = 1; k < 8; k++)
				CHILD_CHECK(set_and_commit(h, pf_opt(k), "1", NULL) == 0, "commit %d", k);
			long faults = thread_faults() - f0;
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
			CHILD_CHECK(faults <= 2, "commits 2-8 took %ld minor faults", faults);
#endif
		}
		shmcfg_close(h);
	}
	/* the control of that count: a default attach's commits fault, each on
	 * its option's cells and schema pages (27-30 in all, seen) */
	CHILD_CHECK(shmcfg_attach(seg, 0, NULL, &h0) == 0, "attach");
	CHILD_CHECK(set_and_commit(h0, pf_opt(0), "2", NULL) == 0, "commit");
	long f0 = thread_faults();
	for (int k = 1; k < 8; k++)
		CHILD_CHECK(set_and_commit(h0, pf_opt(k), "2", NULL) == 0, "commit %d", k);
	CHILD_CHECK(thread_faults() - f0 >= 14, "a default attach's commits 2-8 took %ld page faults, not 2 each",
		    thread_faults() - f0);
	shmcfg_close(h0);

	/* a spoiled option fails the attach, named, and changes nothing; the
	 * default attach still works, and its other options */
	struct writer w = writer_open(seg);
	struct opt_desc saved = *wdesc(&w, 29999);
	wdesc(&w, 29999)->name = (struct sref){(uint32_t)w.sh->strings_size - 2, 50};
	shmcfg *h = NULL;
	CHILD_CHECK(shmcfg_attach(seg, SHMCFG_ATTACH_PREFAULT, NULL, &h) == SHMCFG_E_CORRUPT && !h,
		    "attach of a spoiled schema with SHMCFG_ATTACH_PREFAULT");
	const char *d = shmcfg_errdetail();
	CHILD_CHECK(strstr(d, seg) && strstr(d, "option 29999") && !strchr(d, '\n'), "detail '%s'", d);
	CHILD_CHECK(shmcfg_attach(seg, 0, NULL, &h) == 0 && big_option_ok(h, 77) == 0, "the default attach");
	shmcfg_close(h);
	*wdesc(&w, 29999) = saved;
	writer_close(&w);
	/* a flag this library does not know */
	h = NULL;
	CHILD_CHECK(shmcfg_attach(seg, SHMCFG_ATTACH_PREFAULT << 1, NULL, &h) == -EINVAL && !h, "an unknown flag");
	return 0;
}

/*
 * SHMCFG_ATTACH_PREFAULT on a segment the default attach maps lazily (over
 * SEG_EAGER_BYTES; the schema copied lazily too: the test copy's threshold
 * is 0): attach maps every page of the segment up to its heap's carved
 * chunks (not the heap's room beyond) and of the accessors' copy,
 * copies the whole schema and validates every option, read-write and
 * read-only; a writer's commits then take no page fault; a spoiled option
 * fails the attach with its name.
 */
static void test_prefault(void **state)
{
	(void)state;
	seg = new_name("prefault");
	big_segment(seg, PF_OPTS);
	run_child(child_prefault, "SHMCFG_ATTACH_PREFAULT");
}

/* ------------------------------------------------------------------ */
/* The validated copy (vcopy.c)                                       */
/* ------------------------------------------------------------------ */

/* Where this uid's validated copy of h's schema is. */
static void vcopy_path(const shmcfg *h, char *out, size_t len)
{
	uint8_t hash[16];
	char hex[33];
	shmcfg_schema_hash(h, hash);
	for (int i = 0; i < 16; i++)
		snprintf(hex + 2 * i, 3, "%02x", hash[i]);
	snprintf(out, len, "/dev/shm/shmcfg-schema.%s.%u", hex, (unsigned)geteuid());
}

/* Validated copies in /dev/shm, of any schema and user. */
static int copies_now(void)
{
	DIR *d = opendir("/dev/shm");
	assert_non_null(d);
	int n = 0;
	for (struct dirent *de; (de = readdir(d));)
		n += !strncmp(de->d_name, "shmcfg-schema.", 14);
	closedir(d);
	return n;
}

static int vcopy_teardown(void **state)
{
	shmcfg__vcopy_min_bytes = SIZE_MAX; /* this file's lazy path again */
	return teardown(state);
}

/* A segment of big_segment(n) named after tag, with copies made for every
 * schema size: its name and its copy's path. */
static shmcfg *copied_segment(const char *tag, uint32_t n, const char **name, char path[160])
{
	shmcfg__vcopy_min_bytes = 0;
	*name = new_name(tag);
	shmcfg *c = big_segment(*name, n);
	vcopy_path(c, path, 160);
	return c;
}

/* Every option of big_segment(n) as declared, through every door: 0, or
 * the line of the first disagreement. */
static int big_all_ok(const shmcfg *h, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		int r = big_option_ok(h, i);
		if (r) {
			printf("# option %u disagrees (line %d): %s\n", i, r, shmcfg_errdetail());
			return r;
		}
	}
	return 0;
}

/*
 * A created segment's schema gets a copy, the creator's uid's, mode 0400;
 * an attach by that uid maps it (read-only or not) and copies and validates
 * nothing: every option reads as declared, an implication and a commit
 * work, a forked child reads through it; the segment's removal removes it.
 */
static void test_validated_copy_made_and_used(void **state)
{
	(void)state;
	const uint32_t n = 300;
	const char *name;
	char path[160];
	shmcfg *c = copied_segment("vcopy", n, &name, path);
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0400);
	assert_int_equal(st.st_uid, geteuid());
	for (int rdonly = 1; rdonly >= 0; rdonly--) {
		shmcfg *h = NULL;
		assert_int_equal(shmcfg_attach(name, rdonly ? SHMCFG_ATTACH_RDONLY : 0, NULL, &h), 0);
		keep(h);
		assert_true(h->vcopy);
		assert_int_equal(h->priv_size, (size_t)st.st_size);
		assert_int_equal(pages_copied(h), 0);
		assert_int_equal(opts_validated(h), n); /* the copy's verdicts */
		assert_int_equal(big_all_ok(h, n), 0);
		if (!rdonly) {
			shmcfg_txn *t;
			assert_int_equal(shmcfg_txn_begin(h, &t), 0);
			assert_int_equal(shmcfg_txn_set_bool(t, 3, true), 0);
			assert_int_equal(shmcfg_txn_commit(t, NULL), 0);
			int64_t v = 0;
			assert_int_equal(shmcfg_get_int(h, 4, &v), 0);
			assert_int_equal(v, 44); /* option 3 implies it */
			pid_t pid = fork();
			assert_true(pid >= 0);
			if (pid == 0)
				_exit(big_option_ok(h, 77 % n) || shmcfg_get_int(h, 4, &v) || v != 44 ? 1 : 0);
			int ws;
			assert_int_equal(waitpid(pid, &ws, 0), pid);
			assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
		}
		drop(h);
	}
	shmcfg *h = attach_rw(name);
	assert_int_equal(shmcfg_check(h, true, print_problem, NULL), 0); /* the segment's schema its hash's */
	drop(h);
	/* a resize writes its schema from the copy, and keeps it */
	shmcfg *r = NULL;
	assert_int_equal(shmcfg_resize(name, &(shmcfg_create_opts){.heap_bytes = 1u << 20}, &r), 0);
	keep(r);
	for (uint32_t i = 5; i < n; i++)
		assert_int_equal(big_option_ok(r, i), 0);
	drop(r);
	h = attach_rw(name);
	assert_true(h->vcopy);
	drop(h);
	drop(c);
	assert_int_equal(shmcfg_unlink(name), 0);
	assert_int_equal(stat(path, &st), -1);
	assert_int_equal(errno, ENOENT);
}

/* Spoil the copy at path (as its own uid can): one of the ways below. */
enum { SP_MODE_GROUP, SP_MODE_RW, SP_MAGIC, SP_VERDICT, SP_SCHEMA_HDR, SP_HASH, SP_LIBVER, SP_SIZE, SP_N };
static void vcopy_spoil(const char *path, int how)
{
	assert_int_equal(chmod(path, 0600), 0);
	int fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	unsigned char b;
	/* the header: magic at 0, the hash at 32, the library's version at 48;
	 * the verdicts from 64; the region (its own header first) at the first
	 * 64-byte boundary after */
	off_t at = how == SP_MAGIC ? 0 : how == SP_HASH ? 32 : how == SP_LIBVER ? 48 : how == SP_VERDICT ? 64 + 5 : 0;
	if (how == SP_SCHEMA_HDR) {
		uint64_t schema_at;
		assert_int_equal(pread(fd, &schema_at, 8, 24), 8);
		at = (off_t)schema_at + 4; /* the region's index_size */
	}
	if (how == SP_MAGIC || how == SP_HASH || how == SP_LIBVER || how == SP_SCHEMA_HDR) {
		assert_int_equal(pread(fd, &b, 1, at), 1);
		b ^= 0x40;
		assert_int_equal(pwrite(fd, &b, 1, at), 1);
	} else if (how == SP_VERDICT) {
		b = 0; /* not validated */
		assert_int_equal(pwrite(fd, &b, 1, at), 1);
	} else if (how == SP_SIZE) {
		assert_int_equal(ftruncate(fd, st.st_size + 4096), 0);
	}
	close(fd);
	assert_int_equal(chmod(path, how == SP_MODE_GROUP ? 0440 : how == SP_MODE_RW ? 0600 : 0400), 0);
}

/*
 * A copy that is not as written (readable by others, writable, another
 * magic, a verdict not given, another schema header or hash, another
 * library's, another size)
 * is not used: the attach copies and validates by the page as without it,
 * and reads right; a prefaulting attach validates whole and writes nothing.
 * The segment created again writes a good copy in its place, which the next
 * attach uses.
 */
static void test_validated_copy_refused_unless_as_written(void **state)
{
	(void)state;
	const uint32_t n = 200;
	const char *name;
	char path[160];
	shmcfg *c = copied_segment("vcopybad", n, &name, path);
	for (int how = 0; how < SP_N; how++) {
		vcopy_spoil(path, how);
		shmcfg *h = attach_rw(name);
		if (h->vcopy)
			fail_msg("spoil %d: the copy was used", how);
		assert_int_equal(big_all_ok(h, n), 0);
		assert_true(pages_copied(h) > 0);
		drop(h);
		shmcfg *p = NULL;
		assert_int_equal(shmcfg_attach(name, SHMCFG_ATTACH_PREFAULT, NULL, &p), 0);
		keep(p);
		assert_false(p->vcopy);
		drop(p);
		drop(c);
		c = big_segment(name, n); /* --force: the same schema */
		h = attach_rw(name);
		if (!h->vcopy)
			fail_msg("spoil %d: no good copy written in its place", how);
		assert_int_equal(big_all_ok(h, n), 0);
		drop(h);
	}
}

/* big_segment(seg, 200), stopped (SIGSTOP) once its schema is written in
 * the object at its name, before its creator reads it back (and validates
 * it, and writes the copy). */
static int child_create_stopped(void *arg)
{
	(void)arg;
	setenv("SHMCFG_FAULT", "create.schema:stop", 1);
	big_segment(seg, 200);
	unsetenv("SHMCFG_FAULT");
	return 0;
}

/*
 * A copy holds only what its uid built: a prefaulting attach, which
 * validates the schema whole, writes none; and a creator whose segment a
 * writer changed between the schema's write and the creator's reading it
 * back (a default: still a valid schema, under the hash the creator built)
 * writes none, under either hash.
 */
static void test_copy_only_of_what_its_uid_built(void **state)
{
	(void)state;
	shmcfg__vcopy_min_bytes = 0;
	seg = new_name("vcopyown");
	shmcfg *c = big_segment(seg, 200);
	char path[160];
	vcopy_path(c, path, sizeof path);
	drop(c);
	assert_int_equal(unlink(path), 0);
	int before = copies_now();
	shmcfg *p = NULL;
	assert_int_equal(shmcfg_attach(seg, SHMCFG_ATTACH_PREFAULT, NULL, &p), 0);
	keep(p);
	assert_false(p->vcopy);
	assert_int_equal(opts_validated(p), 200);
	drop(p);
	assert_int_equal(copies_now(), before);

	seg = new_name("vcopyown2"); /* created, not replaced */
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(child_create_stopped(NULL));
	int st;
	assert_int_equal(waitpid(pid, &st, WUNTRACED), pid);
	if (!WIFSTOPPED(st)) {
		kill(pid, SIGKILL);
		fail_msg("the creator did not stop at create.schema (status %#x)", st);
	}
	struct writer w = writer_open(seg);
	uint8_t built[16];
	memcpy(built, w.hd->schema_hash, 16);
	wdesc(&w, 10)->def.val = 1010; /* still valid: an int default */
	XXH128_canonical_t changed_c;
	XXH128_canonicalFromHash(&changed_c, XXH3_128bits(w.schema, w.hd->schema_size));
	uint8_t changed[16];
	memcpy(changed, changed_c.digest, 16);
	writer_close(&w);
	assert_int_equal(kill(pid, SIGCONT), 0);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	for (int k = 0; k < 2; k++) {
		const uint8_t *hash = k ? changed : built;
		char hp[160];
		int at = snprintf(hp, sizeof hp, "/dev/shm/shmcfg-schema.");
		for (int i = 0; i < 16; i++)
			at += snprintf(hp + at, sizeof hp - (size_t)at, "%02x", hash[i]);
		snprintf(hp + at, sizeof hp - (size_t)at, ".%u", (unsigned)geteuid());
		struct stat sb;
		if (stat(hp, &sb) == 0)
			fail_msg("a copy under the %s hash", k ? "changed" : "built");
	}
}

/* The copy is written unnamed and linked whole: a creator killed before
 * the link leaves its segment, and no copy, no other object. */
static int child_copy_killed(void *arg)
{
	(void)arg;
	setenv("SHMCFG_FAULT", "vcopy.written", 1);
	big_segment(seg, 200);
	return 1; /* not reached: killed at the fault point */
}

static void test_copy_writer_killed_leaves_nothing(void **state)
{
	(void)state;
	shmcfg__vcopy_min_bytes = 0;
	seg = new_name("vcopykill");
	int before = copies_now();
	pid_t pid = spawn(child_copy_killed, NULL);
	int st = reap(pid);
	if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL)
		fail_msg("the creator was not killed at vcopy.written (status %#x)", st);
	shmcfg *h = attach_rw(seg); /* created, ready */
	assert_false(h->vcopy);
	char path[160];
	vcopy_path(h, path, sizeof path);
	struct stat sb;
	assert_int_equal(stat(path, &sb), -1);
	assert_int_equal(copies_now(), before);
	drop(h);
}

/*
 * A writer's attach with the copy maps what its commits' first uses touch:
 * 30,000 options (over SEG_EAGER_BYTES: mapped lazily without the copy),
 * eight commits of options spread over the cells after the first take no
 * page fault of the segment's or the schema's (getrusage: at most two, the
 * process's own, as in test_prefault).
 */
static int child_copy_commits_fault_nothing(void *arg)
{
	(void)arg;
	shmcfg *h = NULL;
	CHILD_CHECK(shmcfg_attach(seg, 0, NULL, &h) == 0, "attach");
	CHILD_CHECK(h->vcopy, "the copy was not used");
	CHILD_CHECK(h->size > SEG_EAGER_BYTES, "a segment of %zu bytes is mapped whole anyway", h->size);
	long before = 0;
	for (int k = 0; k < 9; k++) {
		if (k == 1)
			before = thread_faults();
		CHILD_CHECK(set_and_commit(h, pf_opt(k), "1", NULL) == 0, "commit %d", k);
	}
	long faults = thread_faults() - before;
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
	CHILD_CHECK(faults <= 2, "commits 2-9 took %ld page faults", faults); /* as test_prefault's */
#endif
	shmcfg_close(h);
	return 0;
}

static void test_copy_commits_fault_nothing(void **state)
{
	(void)state;
	shmcfg__vcopy_min_bytes = 0;
	seg = new_name("vcopyfault");
	big_segment(seg, PF_OPTS);
	run_child(child_copy_commits_fault_nothing, "commits with the validated copy");
}

/*
 * (root) A file of another uid under this uid's copy's name, even with the
 * copy's very bytes (another uid can write it): not used, and not replaced
 * by a creation; the segment's removal by root removes it.
 */
static void test_stranger_file_under_the_copy_name(void **state)
{
	(void)state;
	if (geteuid() != 0)
		skip();
	const uint32_t n = 200;
	const char *name;
	char path[160];
	shmcfg *c = copied_segment("vcopystr", n, &name, path);
	assert_int_equal(chown(path, 65534, 65534), 0);
	shmcfg *h = attach_rw(name);
	assert_false(h->vcopy);
	assert_int_equal(big_all_ok(h, n), 0);
	drop(h);
	drop(c);
	c = big_segment(name, n); /* created again: it would write the copy */
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_uid, 65534);
	drop(c);
	assert_int_equal(shmcfg_unlink(name), 0);
	assert_int_equal(stat(path, &st), -1);
}

/* shmcfg_orphans' finds that are validated copies. */
static void count_copy(const shmcfg_orphan *o, void *ud)
{
	if (strstr(o->path, "/shmcfg-schema."))
		++*(int *)ud;
}

/*
 * A segment removed by hand (rm) leaves its copy: shmcfg_orphans finds it
 * (shmctl gc), and removes it when asked; a copy whose segment is there is
 * no orphan.
 */
static void test_orphaned_copy_found_and_removed(void **state)
{
	(void)state;
	const char *name;
	char path[160], seg_path[160];
	shmcfg *c = copied_segment("vcopygc", 200, &name, path);
	int found = 0;
	assert_true(shmcfg_orphans(NULL, 0, count_copy, &found) >= 0);
	assert_int_equal(found, 0);
	snprintf(seg_path, sizeof seg_path, "/dev/shm/shmcfg.%s", name);
	assert_int_equal(unlink(seg_path), 0); /* rm */
	/* and something under a segment's name that cannot be opened (ENXIO):
	 * no segment of anyone's, and no reason to stop looking */
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof sa.sun_path, "/dev/shm/shmcfg.%ssock", name);
	int sk = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_true(sk >= 0);
	int bound = bind(sk, (struct sockaddr *)&sa, sizeof sa);
	int listed = 0, removed = 0;
	int r1 = shmcfg_orphans(NULL, 0, count_copy, &listed);
	struct stat st;
	int there = stat(path, &st);
	int r2 = shmcfg_orphans(NULL, SHMCFG_ORPHANS_REMOVE, count_copy, &removed);
	close(sk);
	(void)unlink(sa.sun_path); /* before any assertion: nothing left behind */
	assert_int_equal(bound, 0);
	assert_true(r1 >= 1 && r2 >= 1);
	assert_int_equal(listed, 1);
	assert_int_equal(there, 0);
	assert_int_equal(removed, 1);
	assert_int_equal(stat(path, &st), -1);
	drop(c);
}

/* A segment of n options whose every option's default is 0 + k: another
 * schema for each k. */
static shmcfg *other_segment(const char *name, uint32_t n, int k)
{
	shmcfg_schema *s;
	assert_int_equal(shmcfg_schema_new(&s), 0);
	for (uint32_t i = 0; i < n; i++) {
		char nm[64], def[24];
		big_name(nm, sizeof nm, i);
		snprintf(def, sizeof def, "%d", k);
		shmcfg_optdef d = {.name = nm, .type = SHMCFG_INT, .def = def};
		assert_int_equal(shmcfg_schema_add(s, &d), 0);
	}
	shmcfg_create_opts o = {.flags = SHMCFG_CREATE_FORCE | SHMCFG_CREATE_NO_ENV};
	shmcfg *h = NULL;
	assert_int_equal(shmcfg_create(name, s, &o, &h), 0);
	shmcfg_schema_free(s);
	return keep(h);
}

/*
 * A copy lives while a segment has its schema: two segments of one schema
 * share it, and the removal of one keeps it for the other; a segment
 * created again with another schema takes its old schema's copy with it
 * (when no other segment has that schema), and gets its new one.
 */
static void test_copy_kept_while_a_segment_has_its_schema(void **state)
{
	(void)state;
	shmcfg__vcopy_min_bytes = 0;
	const char *a = new_name("vcopya"), *b = new_name("vcopyb");
	shmcfg *ha = other_segment(a, 100, 1), *hb = other_segment(b, 100, 1);
	char path[160], path2[160];
	vcopy_path(ha, path, sizeof path);
	drop(ha);
	drop(hb);
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(shmcfg_unlink(a), 0);
	assert_int_equal(stat(path, &st), 0); /* b's still */
	shmcfg *h = attach_rw(b);
	assert_true(h->vcopy);
	drop(h);
	hb = other_segment(b, 100, 2); /* b with another schema */
	vcopy_path(hb, path2, sizeof path2);
	drop(hb);
	assert_int_equal(stat(path, &st), -1);
	assert_int_equal(stat(path2, &st), 0);
	h = attach_rw(b);
	assert_true(h->vcopy);
	drop(h);
	assert_int_equal(shmcfg_unlink(b), 0);
	assert_int_equal(stat(path2, &st), -1);
}

int main(void)
{
	shmcfg__schema_eager_bytes = 0; /* the lazy path, even for small schemas */
	shmcfg__vcopy_min_bytes = SIZE_MAX; /* ... and without validated copies, but in their tests */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_lookup_every_option_of_100k, teardown),
		cmocka_unit_test_teardown(test_concurrent_first_use, teardown),
		cmocka_unit_test_teardown(test_spoiled_after_attach_refused_on_first_use, teardown),
		cmocka_unit_test_teardown(test_changes_after_first_use_change_nothing, teardown),
		cmocka_unit_test_teardown(test_overlapping_and_unterminated_strings, teardown),
		cmocka_unit_test_teardown(test_index_entries_checked_by_lookup, teardown),
		cmocka_unit_test_teardown(test_long_name_not_cached, teardown),
		cmocka_unit_test_teardown(test_index_naming_one_option, teardown),
		cmocka_unit_test_teardown(test_names_of_one_hash, teardown),
		cmocka_unit_test_teardown(test_orders_checked_when_used_whole, teardown),
		cmocka_unit_test_teardown(test_dependents_and_ranks_checked, teardown),
		cmocka_unit_test_teardown(test_truncated_object_fails_first_use, teardown),
		cmocka_unit_test_teardown(test_without_populate_write, teardown),
		cmocka_unit_test_teardown(test_small_schema_copied_at_attach, teardown),
		cmocka_unit_test_teardown(test_warm_bounded, teardown),
		cmocka_unit_test_teardown(test_implications_bounded, teardown),
		cmocka_unit_test_teardown(test_prefault, teardown),
		cmocka_unit_test_teardown(test_validated_copy_made_and_used, vcopy_teardown),
		cmocka_unit_test_teardown(test_validated_copy_refused_unless_as_written, vcopy_teardown),
		cmocka_unit_test_teardown(test_copy_only_of_what_its_uid_built, vcopy_teardown),
		cmocka_unit_test_teardown(test_copy_writer_killed_leaves_nothing, vcopy_teardown),
		cmocka_unit_test_teardown(test_copy_commits_fault_nothing, vcopy_teardown),
		cmocka_unit_test_teardown(test_stranger_file_under_the_copy_name, vcopy_teardown),
		cmocka_unit_test_teardown(test_orphaned_copy_found_and_removed, vcopy_teardown),
		cmocka_unit_test_teardown(test_copy_kept_while_a_segment_has_its_schema, vcopy_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
