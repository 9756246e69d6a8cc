/* SPDX-License-Identifier: MIT */
/*
 * fuzz_segment: a reader never crashes, hangs or reads out of bounds,
 * whatever bytes the segment holds.
 *
 * The input is a whole segment image. It is written into a fresh shm object
 * (/dev/shm/shmcfg.fuzz-PID, sized to the input) and attached read-only and
 * read-write; every successful attach then goes through every read the API
 * offers (option info and lookup, shmcfg_get, the inline getters, snapshots
 * and layers, patches, the config hash, stat, readers, check, the commit
 * log, changes, dump, codegen, wait) and one commit.
 *
 * Two conveniences make mutations reach deeper than the header checks:
 *  - `ready` is always stored as initialised: a segment that is not waits
 *    1 s in attach (the creator may still be at work), which would make
 *    every such input a 1 s execution. That path is tested in test_crash.c.
 *  - The last byte of the header page (unused by the layout) holds flags for
 *    the harness: bit 0 recomputes the schema hash over the (mutated)
 *    schema region, so that the schema validation sees mutated schemas
 *    instead of stopping at the hash; bit 1 recomputes every slot's
 *    checksum, so that shmcfg_check(deep) goes on to the cells.
 *
 * A hostile `current` whose slot never carries its generation makes every
 * read fail with SHMCFG_E_CORRUPT (at once: `current` does not move). The
 * harness then checks each read API once rather than once per option (see
 * `stable` below).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>

#include "internal.h" /* the layout: struct seg_header, slot_hdr, SEG_READY */
#include "fuzz.h"

#define HARNESS_FLAGS_BYTE (SEG_HEADER_BYTES - 1)
#define FIX_SCHEMA_HASH 1u
#define FIX_CHECKSUMS 2u
#define MAX_IMAGE (4u << 20)

static char seg_name[64];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	snprintf(seg_name, sizeof seg_name, "fuzz-%d", (int)getpid());
	shmcfg_set_log(NULL, NULL);
	fuzz_clean_stale();
	return 0;
}

/* The harness's fix-ups, on the private copy of the input. */
static void fix_up(uint8_t *img, size_t size)
{
	struct seg_header hd;
	memcpy(&hd, img, sizeof hd);
	hd.ready = SEG_READY;
	unsigned flags = img[HARNESS_FLAGS_BYTE];
	if ((flags & FIX_SCHEMA_HASH) && hd.schema_off <= size && hd.schema_size <= size - hd.schema_off) {
		XXH128_canonical_t c;
		XXH128_canonicalFromHash(&c, XXH3_128bits(img + hd.schema_off, hd.schema_size));
		memcpy(hd.schema_hash, c.digest, 16);
	}
	if ((flags & FIX_CHECKSUMS) && hd.nslots <= SEG_MAX_SLOTS && hd.slots_off <= size &&
	    hd.slot_size <= size && hd.slot_size >= sizeof(struct slot_hdr) && hd.nopts <= SEG_MAX_OPTS && hd.cells_off <= hd.lrefs_off &&
	    hd.lrefs_off <= hd.slot_size && (uint64_t)hd.nopts * 4 <= hd.slot_size - hd.lrefs_off &&
	    (uint64_t)hd.nopts * 16 <= hd.lrefs_off - hd.cells_off &&
	    (uint64_t)hd.nslots * hd.slot_size <= size - hd.slots_off) {
		/* the checksum of lib/slot/hash.c: a sum of per-option mixes */
		for (uint32_t s = 0; s < hd.nslots; s++) {
			uint8_t *slot = img + hd.slots_off + (uint64_t)s * hd.slot_size;
			struct slot_hdr sl;
			memcpy(&sl, slot, sizeof sl);
			sl.checksum = 0;
			for (uint32_t i = 0; i < hd.nopts; i++) {
				uint64_t w[3];
				uint32_t lref;
				memcpy(w, slot + hd.cells_off + (uint64_t)i * 16, 16);
				memcpy(&lref, slot + hd.lrefs_off + (uint64_t)i * 4, 4);
				w[2] = lref;
				sl.checksum += XXH3_64bits_withSeed(w, sizeof w, i);
			}
			memcpy(slot, &sl, sizeof sl);
		}
	}
	memcpy(img, &hd, sizeof hd);
}

/* Whether `current` names a slot stamped with its generation in the image. */
static bool image_stable(const uint8_t *img, size_t size)
{
	struct seg_header hd;
	memcpy(&hd, img, sizeof hd);
	uint32_t s = (uint32_t)(hd.current & 0xff);
	uint64_t off = hd.slots_off + (uint64_t)s * hd.slot_size;
	if (s >= hd.nslots || hd.slots_off > size || hd.slot_size > size || off > size - 8)
		return false;
	uint64_t gen;
	memcpy(&gen, img + off, 8);
	return gen == hd.current >> 8;
}

static void touch_value(const shmcfg_value *v)
{
	char *text = NULL;
	if (shmcfg_value_format(v, &text) == 0)
		free(text);
	if (!v->is_null && (v->type == SHMCFG_LIST || v->type == SHMCFG_SET)) {
		size_t n = 0;
		for (const char *p = shmcfg_list_next(v, NULL); p; p = shmcfg_list_next(v, p))
			n++;
		FUZZ_ASSERT(n == v->u.list.count, "list walk gives %zu items, count %zu", n,
			    v->u.list.count);
	}
}

static void on_reader(const shmcfg_reader *r, void *ud)
{
	(void)r;
	++*(int *)ud;
}

static void on_problem(const char *problem, void *ud)
{
	(void)ud;
	FUZZ_ASSERT(problem && strlen(problem) < 4096, "problem text");
}

/* Every read of the API, on one handle. */
static void exercise(shmcfg *h, bool stable)
{
	uint32_t n = shmcfg_count(h);
	FUZZ_ASSERT(n > 0, "attached a segment of 0 options");
	uint8_t hash[16];
	(void)shmcfg_schema_hash(h, hash);
	(void)shmcfg_readonly(h);
	(void)shmcfg_name(h);

	/* options are validated on first use: a corrupt one is refused with
	 * SHMCFG_E_CORRUPT, every time, and the check then finds a problem */
	uint32_t corrupt = 0;
	for (uint32_t o = 0; o < n; o++) {
		shmcfg_optinfo info;
		int r = shmcfg_opt_info(h, o, &info);
		if (r == SHMCFG_E_CORRUPT) {
			FUZZ_ASSERT(shmcfg_errdetail()[0] && !strchr(shmcfg_errdetail(), '\n'),
				    "opt_info(%u): one line of detail", o);
			FUZZ_ASSERT(shmcfg_opt_info(h, o, &info) == SHMCFG_E_CORRUPT, "opt_info(%u) changed its verdict", o);
			shmcfg_opt tgt;
			shmcfg_value v;
			FUZZ_ASSERT(shmcfg_opt_implies(h, o, 0, &tgt, &v) == SHMCFG_E_CORRUPT, "opt_implies(%u)", o);
			corrupt++;
			continue;
		}
		FUZZ_ASSERT(r == 0, "opt_info(%u) of %u options: %d", o, n, r);
		FUZZ_ASSERT(info.name && info.doc, "opt_info strings");
		(void)strlen(info.name);
		(void)strlen(info.doc);
		if (info.knob)
			(void)strlen(info.knob);
		if (info.deprecated)
			(void)strlen(info.deprecated);
		const char *e = info.env_default;
		for (size_t k = 0; k < info.n_env_default; k++)
			e += strlen(e) + 1;
		e = info.env_force;
		for (size_t k = 0; k < info.n_env_force; k++)
			e += strlen(e) + 1;
		touch_value(&info.def);
		touch_value(&info.choices);
		if (info.has_min)
			touch_value(&info.min);
		if (info.has_max)
			touch_value(&info.max);
		for (size_t k = 0; k < info.n_implies + 1; k++) {
			shmcfg_opt tgt;
			shmcfg_value v;
			r = shmcfg_opt_implies(h, o, k, &tgt, &v);
			FUZZ_ASSERT((r == 0) == (k < info.n_implies), "opt_implies(%u, %zu): %d", o, k, r);
			if (r == 0) {
				FUZZ_ASSERT(tgt < n, "implication target %u of %u", tgt, n);
				touch_value(&v);
			}
		}
		shmcfg_opt found;
		r = shmcfg_lookup(h, info.name, &found);
		/* a probe may meet a corrupt option or index entry */
		FUZZ_ASSERT(r == 0 || r == SHMCFG_E_NOOPT || r == SHMCFG_E_CORRUPT, "lookup: %d", r);
		FUZZ_ASSERT(r != 0 || found < n, "lookup gave %u of %u", found, n);
		/* what it found has that name; again (the lookup's cache now), the same */
		shmcfg_optinfo fi;
		FUZZ_ASSERT(r != 0 || (shmcfg_opt_info(h, found, &fi) == 0 && !strcmp(fi.name, info.name)),
			    "lookup of %s gave option %u, of another name", info.name, found);
		shmcfg_opt again = SHMCFG_NO_OPT;
		int r2 = shmcfg_lookup(h, info.name, &again);
		FUZZ_ASSERT(r2 == r && (r != 0 || again == found), "lookup of %s again: %d, %u (was %d, %u)",
			    info.name, r2, again, r, found);
	}
	shmcfg_opt none;
	IGNORE(shmcfg_lookup(h, "no.such.option", &none));
	IGNORE(shmcfg_lookup(h, "", &none));
	(void)shmcfg_generation(h);
	(void)shmcfg_config_hash(h, hash);
	shmcfg_info st;
	FUZZ_ASSERT(shmcfg_stat(h, &st) == 0, "stat");
	int count = 0;
	int nr = shmcfg_readers(h, on_reader, &count);
	FUZZ_ASSERT(nr == count, "readers: %d reported, %d calls", nr, count);
	int problems = shmcfg_check(h, false, on_problem, NULL);
	FUZZ_ASSERT(!corrupt || problems > 0, "%u options refused on first use, and check finds %d problems", corrupt,
		    problems);
	IGNORE(shmcfg_check(h, true, on_problem, NULL));
	uint64_t gen = shmcfg_generation(h);
	for (uint64_t g = gen > 3 ? gen - 3 : 0; g <= gen + 1; g++) {
		shmcfg_commit c;
		if (shmcfg_commit_info(h, g, &c) == 0) {
			FUZZ_ASSERT(c.nids <= SHMCFG_LOG_IDS, "commit record lists %u ids", c.nids);
			for (uint32_t k = 0; k < c.nids; k++)
				FUZZ_ASSERT(c.ids[k] < n, "commit record names option %u of %u", c.ids[k], n);
		}
	}
	if (!stable) {
		/* `current` names a slot that does not hold its generation: every
		 * read of a value fails. Once each, then stop. */
		shmcfg_value v;
		int64_t i;
		int r = shmcfg_get(h, 0, &v);
		FUZZ_ASSERT(r == SHMCFG_E_CORRUPT, "get from an unstable segment: %d", r);
		/* (a slot index past the table makes the inline read read slot 0,
		 * by design: it may return what slot 0 validly holds) */
		IGNORE(shmcfg_get_int(h, 0, &i));
		shmcfg_snapshot *s = NULL;
		r = shmcfg_snapshot_acquire(h, &s);
		FUZZ_ASSERT(r == SHMCFG_E_CORRUPT, "snapshot of an unstable segment: %d", r);
		return;
	}

	for (uint32_t o = 0; o < n; o++) {
		shmcfg_value v;
		int r = shmcfg_get(h, o, &v);
		if (r == 0) {
			touch_value(&v);
			shmcfg_value_clear(&v);
		}
		bool b;
		int64_t i;
		double f;
		IGNORE(shmcfg_get_bool(h, o, &b));
		IGNORE(shmcfg_get_int(h, o, &i));
		IGNORE(shmcfg_get_float(h, o, &f));
		IGNORE(shmcfg_is_default(h, o));
	}
	/* out-of-range handles */
	{
		shmcfg_value v;
		int64_t i;
		FUZZ_ASSERT(shmcfg_get(h, n, &v) == SHMCFG_E_NOOPT, "get(n)");
		FUZZ_ASSERT(shmcfg_get_int(h, n, &i) == SHMCFG_E_NOOPT, "get_int(n)");
		FUZZ_ASSERT(shmcfg_get_int(h, SHMCFG_NO_OPT, &i) == SHMCFG_E_NOOPT, "get_int(-1)");
	}
	shmcfg_snapshot *s = NULL;
	if (shmcfg_snapshot_acquire(h, &s) == 0) {
		(void)shmcfg_snapshot_generation(s);
		shmcfg_snapshot_hash(s, hash);
		for (uint32_t o = 0; o < n; o++) {
			shmcfg_value v;
			if (shmcfg_snapshot_get(s, o, &v) == 0)
				touch_value(&v);
			for (int l = SHMCFG_SRC_DEFAULT; l <= SHMCFG_SRC_IMPLIED; l++)
				if (shmcfg_snapshot_layer(s, o, (shmcfg_source)l, &v) == 0)
					touch_value(&v);
		}
		/* a nested one */
		shmcfg_snapshot *s2 = NULL;
		if (shmcfg_snapshot_acquire(h, &s2) == 0)
			shmcfg_snapshot_release(s2);
		shmcfg_snapshot_release(s);
	}

	bool *changed = calloc(n, sizeof *changed);
	if (changed) {
		if (gen > 1) {
			IGNORE(shmcfg_changes(h, gen - 1, gen, changed));
			IGNORE(shmcfg_changes(h, 1, gen, changed));
		}
		IGNORE(shmcfg_changes(h, 0, gen + 1, changed));
		free(changed);
	}
	char *text = NULL;
	if (shmcfg_dump(h, 0, &text) == 0)
		free(text);
	if (shmcfg_dump(h, SHMCFG_DUMP_ALL, &text) == 0)
		free(text);
	for (int fmt = SHMCFG_CODEGEN_PYTHON; fmt <= SHMCFG_CODEGEN_JSON; fmt++)
		if (shmcfg_codegen(h, (shmcfg_codegen_format)fmt, &text) == 0)
			free(text);
	uint64_t seen;
	IGNORE(shmcfg_wait(h, gen, 0, &seen));

	/* a thread patch: reads resolve a private copy of the current slot */
	if (shmcfg_patch_push(h) == 0) {
		shmcfg_value v;
		if (shmcfg_get(h, 0, &v) == 0) {
			if (shmcfg_patch_set(h, 0, &v) == 0) {
				shmcfg_value w;
				for (uint32_t o = 0; o < n; o++)
					if (shmcfg_get(h, o, &w) == 0)
						shmcfg_value_clear(&w);
				int64_t i;
				IGNORE(shmcfg_get_int(h, 0, &i));
			}
			shmcfg_value_clear(&v);
		}
		FUZZ_ASSERT(shmcfg_patch_pop(h) == 0, "patch_pop");
	}
}

/* One commit: the first option set to what it reads, the last one reset. */
static void try_commit(shmcfg *h)
{
	shmcfg_set_commit_timeout(h, 0);
	uint32_t n = shmcfg_count(h);
	shmcfg_txn *t;
	int r = shmcfg_txn_begin(h, &t);
	FUZZ_ASSERT(r == 0, "txn_begin on a read-write handle: %d", r);
	shmcfg_value v;
	if (shmcfg_get(h, 0, &v) == 0) {
		IGNORE(shmcfg_txn_set(t, 0, &v));
		shmcfg_value_clear(&v);
	}
	IGNORE(shmcfg_txn_reset(t, n - 1));
	uint64_t gen = 0, before = shmcfg_generation(h);
	r = shmcfg_txn_commit(t, &gen);
	if (r == 0) {
		FUZZ_ASSERT(gen == before + 1 && shmcfg_generation(h) == gen,
			    "commit published %llu after %llu", (unsigned long long)gen,
			    (unsigned long long)before);
		/* what was just published reads back whole */
		shmcfg_snapshot *s;
		if (shmcfg_snapshot_acquire(h, &s) == 0) {
			FUZZ_ASSERT(shmcfg_snapshot_generation(s) == gen, "snapshot after commit");
			for (uint32_t o = 0; o < n; o++) {
				r = shmcfg_snapshot_get(s, o, &v);
				FUZZ_ASSERT(r == 0, "option %u of the generation just committed: %d", o, r);
			}
			shmcfg_snapshot_release(s);
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!seg_name[0])
		LLVMFuzzerInitialize(NULL, NULL);
	/* an empty object waits for its creator (1 s): not a useful input */
	if (size == 0 || size > MAX_IMAGE)
		return 0;
	uint8_t *img = malloc(size);
	if (!img)
		return 0;
	memcpy(img, data, size);
	if (size >= SEG_HEADER_BYTES)
		fix_up(img, size);
	char path[96];
	snprintf(path, sizeof path, "/shmcfg.%s", seg_name);
	int fd = shm_open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	FUZZ_ASSERT(fd >= 0, "shm_open %s: %s", path, strerror(errno));
	FUZZ_ASSERT(ftruncate(fd, (off_t)size) == 0, "ftruncate");
	FUZZ_ASSERT(pwrite(fd, img, size, 0) == (ssize_t)size, "pwrite");
	close(fd);
	/* the lock object a creator would have made, tied to the image's
	 * instance id (a mismatch is one more thing attach must refuse) */
	char lock[PATH_BYTES];
	uint8_t inst[16] = {0};
	if (size >= SEG_HEADER_BYTES)
		memcpy(inst, ((const struct seg_header *)img)->instance, 16);
	shmcfg__lock_path(seg_name, inst, lock);
	int lfd = open(lock, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	FUZZ_ASSERT(lfd >= 0, "open %s: %s", lock, strerror(errno));
	union {
		struct lock_file lf;
		char page[LOCK_FILE_BYTES];
	} lu = {.lf = {.magic = LOCK_MAGIC}};
	if (size >= SEG_HEADER_BYTES)
		memcpy(lu.lf.instance, ((const struct seg_header *)img)->instance, 16);
	FUZZ_ASSERT(pwrite(lfd, lu.page, sizeof lu.page, 0) == (ssize_t)sizeof lu.page, "pwrite lock");
	close(lfd);
	bool stable = size >= SEG_HEADER_BYTES && image_stable(img, size);
	free(img);

	int rdonly_result = 1;
	for (int pass = 0; pass < 2; pass++) {
		shmcfg *h = NULL;
		int r = shmcfg_attach(seg_name, pass == 0 ? SHMCFG_ATTACH_RDONLY : 0, NULL, &h);
		FUZZ_ASSERT((r == 0) == (h != NULL), "attach: %d with handle %p", r, (void *)h);
		FUZZ_ASSERT(r <= 0, "attach returned %d", r);
		/* read-write validates exactly what read-only does, then opens
		 * the lock object */
		if (getenv("FUZZ_VERBOSE"))
			fprintf(stderr, "# attach %s: %s%s%s\n", pass == 0 ? "read-only" : "read-write",
				r ? shmcfg_errname(r) : "ok", r ? ": " : "", r ? shmcfg_errdetail() : "");
		if (pass == 0)
			rdonly_result = r;
		else
			FUZZ_ASSERT(r == rdonly_result, "read-only attach %d, read-write %d", rdonly_result, r);
		if (r)
			continue;
		FUZZ_ASSERT(shmcfg_readonly(h) == (pass == 0), "readonly flag");
		exercise(h, stable);
		if (pass == 0) {
			shmcfg_txn *t = NULL;
			FUZZ_ASSERT(shmcfg_txn_begin(h, &t) == SHMCFG_E_READONLY, "read-only txn");
			FUZZ_ASSERT(shmcfg_gc(h, NULL, NULL) == SHMCFG_E_READONLY, "read-only gc");
		} else {
			try_commit(h);
			(void)shmcfg_gc(h, NULL, NULL);
		}
		shmcfg_close(h);
	}
	(void)shm_unlink(path);
	(void)unlink(lock);
	return 0;
}
