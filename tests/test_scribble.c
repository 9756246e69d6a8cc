/* SPDX-License-Identifier: MIT */
/* A member of the writers' group scribbles on the segment: every field of
 * the writer state (wip, the heap's top, use and free lists, the ring's
 * head), of the slots (stamps, bases, cells, layer references), of the
 * chunks (tags, counts, free-list links, layer cells), of the commit log
 * (records and ring ids) and `current`, each set to hostile values in turn.
 * Then a fresh process commits (also after a forced sweep, as after a dead
 * writer), reads every option every way, takes snapshots, checks, dumps,
 * asks for changes; and shmctl looks at the segment. Commits may fail
 * (SHMCFG_E_CORRUPT is the expected answer to a damaged heap); nobody may
 * crash, hang or read or write out of bounds (run it under ASan: .ci/run).
 *
 * doc/reliability.md, threat model: "make the next writer write out of
 * bounds by scribbling on the writer state" is what writers cannot do. */

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/wait.h>

#include "internal.h"
#include "slot.h"

#include "common.h"
#include "proc.h"

enum { W4 = 4, W8 = 8 };

struct target {
	char what[64];
	uint64_t off; /* in the object */
	int width;
	const uint64_t *vals;
	size_t nvals;
};

#define MAX_TARGETS 96
static struct target targets[MAX_TARGETS];
static size_t ntargets;
static uint64_t v8[32], v4[32], vtag[32];
static size_t n8, n4, ntag;

static void add(const char *what, uint64_t off, int width, const uint64_t *vals, size_t nvals)
{
	assert_true(ntargets < MAX_TARGETS);
	struct target *t = &targets[ntargets++];
	snprintf(t->what, sizeof t->what, "%s", what);
	t->off = off;
	t->width = width;
	t->vals = vals;
	t->nvals = nvals;
}

/* A segment with some history: strings of several sizes, lists, chunks on
 * free lists, records in the log. */
static shmcfg *make(const char *name)
{
	shmcfg *h = test_create(name, &(shmcfg_create_opts){.slots = 3});
	char big[300];
	for (int k = 0; k < 5; k++) {
		memset(big, 'a' + k, sizeof big - 1);
		big[k % 2 ? 40 : 200] = 0;
		assert_int_equal(commit_str(h, T_C, big, NULL), 0);
		char items[64];
		snprintf(items, sizeof items, "[\"i%d\", \"j\"]", k);
		assert_int_equal(set_and_commit(h, T_ITEMS, items, NULL), 0);
		assert_int_equal(set_and_commit(h, T_A, k % 2 ? "7" : "8", NULL), 0);
	}
	return h;
}

/* The fields to scribble on, found in a freshly made segment (every
 * segment made by make() has the same layout and history). */
static void find_targets(shmcfg *h)
{
	const struct seg_header *hd = h->hdr;
	uint64_t hs = h->lay.heap_size, top = hd->heap_top, hoff = h->lay.heap_off;
	uint64_t cur = hd->current, g = cur_gen(cur);
	const void *cs = slot_at(h, cur_slot(cur));
	uint32_t lc = slot_lrefs(h, cs)[T_C], li = slot_lrefs(h, cs)[T_ITEMS];
	uint64_t free_chunk = 0;
	for (unsigned c = 0; c < HEAP_CLASSES && !free_chunk; c++)
		free_chunk = hd->heap_free[c];
	assert_true(lc && li && free_chunk);
	const uint64_t e8[] = {0, 1, 16, 63, 64, 65, 72, (uint64_t)li << LREF_SHIFT, free_chunk, top - 8, top,
			       top + 16, hs - 32, hs - 8, hs, hs + 64, UINT32_MAX, UINT64_MAX, SLOT_BUSY,
			       SLOT_BUSY | g, g + 1, g - 1, g + 100, 1ull << 40};
	n8 = sizeof e8 / sizeof e8[0];
	memcpy(v8, e8, sizeof e8);
	const uint64_t e4[] = {0, 1, 3, 4, 5, li, lc, (uint32_t)(free_chunk >> LREF_SHIFT), (uint32_t)(top >> LREF_SHIFT),
			       (uint32_t)(top >> LREF_SHIFT) - 1, (uint32_t)(hs >> LREF_SHIFT), UINT32_MAX, 0x7fffffff,
			       255, 256};
	n4 = sizeof e4 / sizeof e4[0];
	memcpy(v4, e4, sizeof e4);
	const uint64_t et[] = {0, CHUNK_MAGIC << 24, CHUNK_MAGIC << 24 | 0xf, CHUNK_MAGIC << 24 | 47 << 8 | 1,
			       CHUNK_MAGIC << 24 | 48 << 8 | 1, CHUNK_MAGIC << 24 | 255 << 8 | 0xf,
			       CHUNK_MAGIC << 24 | 14 << 8 | 0xf, CHUNK_MAGIC << 24 | 30 << 8 | 4, UINT32_MAX};
	ntag = sizeof et / sizeof et[0];
	memcpy(vtag, et, sizeof et);
	char w[64];
	/* the writer state */
	add("wip", offsetof(struct seg_header, wip), W8, v8, n8);
	add("heap_top", offsetof(struct seg_header, heap_top), W8, v8, n8);
	add("heap_live", offsetof(struct seg_header, heap_live), W8, v8, n8);
	for (unsigned c = 0; c < HEAP_CLASSES; c++)
		if (hd->heap_free[c] || c == 0 || c == 47) {
			snprintf(w, sizeof w, "heap_free[%u]", c);
			add(w, offsetof(struct seg_header, heap_free) + 8 * c, W8, v8, n8);
		}
	add("ring_head", offsetof(struct seg_header, ring_head), W8, v8, n8);
	add("current", offsetof(struct seg_header, current), W8, v8, n8);
	add("readers_hwm", offsetof(struct seg_header, readers_hwm), W4, v4, n4);
	/* the slots */
	for (uint32_t s = 0; s < h->lay.nslots; s++) {
		uint64_t so = h->lay.slots_off + s * h->lay.slot_size;
		snprintf(w, sizeof w, "slot %u gen", s);
		add(w, so + offsetof(struct slot_hdr, gen), W8, v8, n8);
		snprintf(w, sizeof w, "slot %u base", s);
		add(w, so + offsetof(struct slot_hdr, base), W8, v8, n8);
		shmcfg_opt opts[] = {T_A, T_C, T_ITEMS};
		for (size_t k = 0; k < 3; k++) {
			snprintf(w, sizeof w, "slot %u lref %u", s, opts[k]);
			add(w, so + h->lay.lrefs_off + 4 * opts[k], W4, v4, n4);
			snprintf(w, sizeof w, "slot %u cell %u val", s, opts[k]);
			add(w, so + h->lay.cells_off + 16 * opts[k], W8, v8, n8);
			snprintf(w, sizeof w, "slot %u cell %u meta", s, opts[k]);
			add(w, so + h->lay.cells_off + 16 * opts[k] + 8, W8, v8, n8);
		}
	}
	/* the chunks: of the current t.c and t.items, and a free one */
	uint64_t chunks[] = {(uint64_t)lc << LREF_SHIFT, (uint64_t)li << LREF_SHIFT, free_chunk};
	const char *cn[] = {"t.c's chunk", "t.items' chunk", "a free chunk"};
	for (size_t k = 0; k < 3; k++) {
		snprintf(w, sizeof w, "%s tag", cn[k]);
		add(w, hoff + chunks[k], W4, vtag, ntag);
		snprintf(w, sizeof w, "%s refs", cn[k]);
		add(w, hoff + chunks[k] + 4, W4, v4, n4);
		snprintf(w, sizeof w, "%s link/cell val", cn[k]);
		add(w, hoff + chunks[k] + 8, W8, v8, n8);
		snprintf(w, sizeof w, "%s cell meta", cn[k]);
		add(w, hoff + chunks[k] + 16, W8, v8, n8);
	}
	/* the commit log and the ring */
	for (uint64_t k = g - 2; k <= g; k++) {
		uint64_t lo = h->lay.log_off + (k % SEG_LOG_ENTRIES) * sizeof(struct log_ent);
		snprintf(w, sizeof w, "log %" PRIu64 " gen", k);
		add(w, lo + offsetof(struct log_ent, gen), W8, v8, n8);
		snprintf(w, sizeof w, "log %" PRIu64 " ring_start", k);
		add(w, lo + offsetof(struct log_ent, ring_start), W8, v8, n8);
		snprintf(w, sizeof w, "log %" PRIu64 " ring_n", k);
		add(w, lo + offsetof(struct log_ent, ring_n), W4, v4, n4);
		snprintf(w, sizeof w, "log %" PRIu64 " nids", k);
		add(w, lo + offsetof(struct log_ent, nids), W4, v4, n4);
	}
	uint64_t rh = hd->ring_head;
	add("ring id (last)", h->lay.ring_off + 4 * ((rh - 1) & (h->lay.ring_size - 1)), W4, v4, n4);
	assert_true(ntargets <= MAX_TARGETS);
}

static void poke(shmcfg *h, const struct target *t, uint64_t v)
{
	char *p = h->base + t->off;
	if (t->width == W8)
		__atomic_store_n((uint64_t *)p, v, __ATOMIC_SEQ_CST);
	else
		__atomic_store_n((uint32_t *)p, (uint32_t)v, __ATOMIC_SEQ_CST);
}

static void read_all(shmcfg *h)
{
	for (shmcfg_opt i = 0; i < T_COUNT; i++) {
		shmcfg_value v;
		if (shmcfg_get(h, i, &v) == 0) {
			char *txt = NULL;
			if (shmcfg_value_format(&v, &txt) == 0)
				free(txt);
			shmcfg_value_clear(&v);
		}
	}
	int64_t n;
	bool b;
	double f;
	(void)shmcfg_get_int(h, T_A, &n);
	(void)shmcfg_get_bool(h, T_FLAG, &b);
	(void)shmcfg_get_float(h, T_RATIO, &f);
	shmcfg_snapshot *s;
	if (shmcfg_snapshot_acquire(h, &s) == 0) {
		for (shmcfg_opt i = 0; i < T_COUNT; i++) {
			shmcfg_value v;
			char *txt = NULL;
			if (shmcfg_snapshot_get(s, i, &v) == 0 && shmcfg_value_format(&v, &txt) == 0)
				free(txt);
			for (shmcfg_source l = SHMCFG_SRC_KNOB; l <= SHMCFG_SRC_ENV_FORCE; l++)
				if (shmcfg_snapshot_layer(s, i, l, &v) == 0 && shmcfg_value_format(&v, &txt) == 0)
					free(txt);
		}
		shmcfg_snapshot_release(s);
	}
	uint8_t hash[16];
	(void)shmcfg_config_hash(h, hash);
	shmcfg_info info;
	int ignored = shmcfg_stat(h, &info);
	(void)shmcfg_check(h, true, NULL, NULL);
	uint64_t g = shmcfg_generation(h);
	bool changed[T_COUNT];
	if (g > 3)
		ignored += shmcfg_changes(h, g - 3, g, changed);
	shmcfg_commit ci;
	ignored += shmcfg_commit_info(h, g, &ci);
	char *txt = NULL;
	if (shmcfg_dump(h, 0, &txt) == 0)
		free(txt);
	if (shmcfg_codegen(h, SHMCFG_CODEGEN_PYTHON, &txt) == 0)
		free(txt);
	/* a patched thread resolves a private copy */
	if (shmcfg_patch_push(h) == 0) {
		ignored += shmcfg_patch_set_text(h, T_DEBUG, "true");
		ignored += shmcfg_patch_set_text(h, T_C, "\"patched\"");
		shmcfg_value v;
		if (shmcfg_get(h, T_MODE, &v) == 0)
			shmcfg_value_clear(&v);
		(void)shmcfg_get_int(h, T_A, &n);
		(void)shmcfg_patch_pop(h);
	}
	(void)ignored; /* any answer will do: nobody crashes or hangs */
}

struct case_arg {
	const char *name;
	bool sweep; /* as after a dead writer: wip set */
};

/* A fresh process: reads, commits (strings that reuse freed chunks and carve
 * new ones, lists, ints), reads again. */
static int victim_main(void *p)
{
	struct case_arg *a = p;
	alarm(20); /* a hang ends as SIGALRM */
	shmcfg *ro = NULL, *h = NULL;
	if (shmcfg_attach(a->name, SHMCFG_ATTACH_RDONLY, NULL, &ro) == 0)
		read_all(ro);
	if (shmcfg_attach(a->name, 0, NULL, &h) != 0)
		return 0; /* refused at attach: fine */
	shmcfg_set_commit_timeout(h, 200);
	read_all(h);
	if (a->sweep)
		__atomic_store_n(&h->hdr->wip, 12345, __ATOMIC_SEQ_CST);
	char big[300];
	for (int k = 0; k < 6; k++) {
		memset(big, 'A' + k, sizeof big - 1);
		big[(k * 37) % 290 + 1] = 0;
		(void)commit_str(h, T_C, big, NULL);
		(void)set_and_commit(h, T_ITEMS, k % 2 ? "[\"x\"]" : "[\"p\", \"q\", \"r\"]", NULL);
		(void)set_and_commit(h, T_A, k % 2 ? "1" : "2", NULL);
		(void)set_and_commit(h, T_DEBUG, k % 2 ? "true" : "false", NULL);
	}
	(void)shmcfg__heap_verify(h);
	read_all(h);
	if (ro)
		read_all(ro);
	shmcfg_close(h);
	if (ro)
		shmcfg_close(ro);
	return 0;
}

static int shmctl(const char *args, const char *name)
{
	const char *b = getenv("top_builddir");
	char cmd[1024];
	/* sanitizers report with status 99, apart from shmctl's 0, 1 and 2 */
	snprintf(cmd, sizeof cmd,
		 "ASAN_OPTIONS=\"$ASAN_OPTIONS:exitcode=99\" UBSAN_OPTIONS=\"$UBSAN_OPTIONS:exitcode=99\" "
		 "timeout -s KILL 20 %s/tools/shmctl %s %s >/dev/null 2>&1",
		 b ? b : ".", args, name);
	int st = system(cmd);
	return st;
}

static void test_scribbles(void **state)
{
	(void)state;
	const char *name = new_name("scribble");
	shmcfg *h = make(name);
	find_targets(h);
	shmcfg_close(h);
	unsigned long cases = 0, ctl = 0;
	uint64_t t0 = mono_ms();
	for (size_t ti = 0; ti < ntargets; ti++) {
		const struct target *t = &targets[ti];
		for (size_t vi = 0; vi < t->nvals; vi++) {
			for (int sweep = 0; sweep < 2; sweep++) {
				h = make(name);
				poke(h, t, t->vals[vi]);
				shmcfg_close(h);
				struct case_arg a = {name, sweep};
				pid_t pid = spawn(victim_main, &a);
				int st = reap(pid);
				cases++;
				if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
					char txt[64];
					status_text(st, txt, sizeof txt);
					fail_msg("%s = %#" PRIx64 "%s: a process attaching, reading and committing %s",
						 t->what, t->vals[vi], sweep ? " (and wip set)" : "", txt);
				}
				/* shmctl: on a share of the cases (each run is an exec) */
				if (!sweep && vi % 8 == ti % 8) {
					static const char *cmds[] = {"show", "check", "stat", "set t.c=shmctl"};
					for (size_t k = 0; k < sizeof cmds / sizeof cmds[0]; k++) {
						int s2 = shmctl(cmds[k], name);
						ctl++;
						/* 0 or 1 (an error): anything else is a crash, a
						 * sanitizer's report or a hang */
						if (!WIFEXITED(s2) || WEXITSTATUS(s2) > 2)
							fail_msg("%s = %#" PRIx64 ": shmctl %s %s ended with status %#x",
								 t->what, t->vals[vi], cmds[k], name, s2);
					}
				}
				(void)shmcfg_unlink(name);
			}
		}
	}
	fprintf(stderr, "# %zu fields, %lu scribbled segments, %lu shmctl runs: no crash, no hang (%.1f s)\n", ntargets,
		cases, ctl, (double)(mono_ms() - t0) / 1000);
}

int main(void)
{
	unsetenv("SHMCFG_FAULT");
	shmcfg_set_log(NULL, NULL);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_scribbles, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
