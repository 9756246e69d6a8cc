/* SPDX-License-Identifier: MIT */
/*
 * fuzz_load: bad input through the value doors never crashes and never
 * changes the configuration unless it is accepted whole.
 *
 * The input is text, fed to
 *  - shmcfg_load() into a segment of the fuzz schema: accepted (one new
 *    generation, or none when nothing changed) or refused with the
 *    configuration untouched (same generation, same config hash);
 *  - shmcfg_value_parse() for every type, nullable or not: a value that a
 *    transaction accepts formats to text that parses back to an equal value;
 *  - shmcfg_txn_set_text() and shmcfg_patch_set_text() of every option;
 *  - the environment parser: a segment created with every variable of the
 *    fuzz schema set to the text (creation succeeds or fails with
 *    SHMCFG_E_ENV naming the variable).
 */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"

static char seg_name[64], env_name[64];
static shmcfg *seg;
static uint8_t base_hash[16];
static uint64_t base_gen;

/* An option of each type that takes any value of it (no range, no choices). */
static const shmcfg_opt free_opt[7] = {0, T_FLAG, T_A, F_NFLOAT, F_ENV_S, T_ITEMS, T_TAGS};

static void make_segment(void)
{
	shmcfg_schema *s = fuzz_schema_new();
	shmcfg_create_opts o = {.slots = 8, .readers = 4, .heap_bytes = 8192,
				.flags = SHMCFG_CREATE_FORCE | SHMCFG_CREATE_NO_ENV};
	int r = shmcfg_create(seg_name, s, &o, &seg);
	FUZZ_ASSERT(r == 0, "create: %s", shmcfg_strerror(r));
	shmcfg_schema_free(s);
	shmcfg_set_commit_timeout(seg, 1000);
	base_gen = shmcfg_config_hash(seg, base_hash);
}

static void cleanup(void)
{
	seg = shmcfg_close(seg);
	(void)shmcfg_unlink(seg_name);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	snprintf(seg_name, sizeof seg_name, "fuzz-load-%d", (int)getpid());
	snprintf(env_name, sizeof env_name, "fuzz-env-%d", (int)getpid());
	shmcfg_set_log(NULL, NULL);
	fuzz_clean_stale();
	make_segment();
	atexit(cleanup);
	return 0;
}

/* Back to the state of creation: every user layer reset. */
static void reset_user_layer(void)
{
	shmcfg_txn *t;
	FUZZ_ASSERT(shmcfg_txn_begin(seg, &t) == 0, "txn_begin");
	for (shmcfg_opt o = 0; o < F_COUNT; o++)
		FUZZ_ASSERT(shmcfg_txn_reset(t, o) == 0, "reset %u", o);
	int r = shmcfg_txn_commit(t, NULL);
	FUZZ_ASSERT(r == 0, "reset commit: %s", shmcfg_strerror(r));
	uint8_t h[16];
	(void)shmcfg_config_hash(seg, h);
	FUZZ_ASSERT(memcmp(h, base_hash, 16) == 0, "reset does not restore the config hash");
}

static void on_warn(const char *msg, void *ud)
{
	(void)ud;
	FUZZ_ASSERT(msg && msg[0], "empty warning");
}

static void fuzz_shmcfg_load(const char *data, size_t size)
{
	uint8_t before[16], after[16];
	uint64_t g0 = shmcfg_config_hash(seg, before), gen = 0;
	bool published;
	int r = shmcfg_load_ex(seg, data, size, 0, on_warn, NULL, &gen, &published);
	bool detail = shmcfg_errdetail()[0]; /* the next call clears it */
	uint64_t g1 = shmcfg_config_hash(seg, after);
	if (r < 0) {
		FUZZ_ASSERT(detail, "load failed (%s) without a detail", shmcfg_strerror(r));
		FUZZ_ASSERT(g1 == g0 && memcmp(before, after, 16) == 0,
			    "a refused load (%s) changed the configuration: generation %llu -> %llu",
			    shmcfg_strerror(r), (unsigned long long)g0, (unsigned long long)g1);
		return;
	}
	FUZZ_ASSERT(r == 0, "load returned %d", r);
	if (!published)
		FUZZ_ASSERT(g1 == g0 && gen == g0, "a no-op load published %llu", (unsigned long long)g1);
	else
		FUZZ_ASSERT(g1 == g0 + 1 && gen == g1, "load published %llu after %llu",
			    (unsigned long long)gen, (unsigned long long)g0);
	/* whatever was accepted reads back, and dumps and loads again to nothing new */
	for (shmcfg_opt o = 0; o < F_COUNT; o++) {
		shmcfg_value v;
		r = shmcfg_get(seg, o, &v);
		FUZZ_ASSERT(r == 0, "option %s after a load: %s", fuzz_opt(o)->name, shmcfg_strerror(r));
		shmcfg_value_clear(&v);
	}
	FUZZ_ASSERT(shmcfg_check(seg, true, NULL, NULL) == 0, "deep check after a load");
	char *dump = NULL;
	FUZZ_ASSERT(shmcfg_dump(seg, SHMCFG_DUMP_ALL, &dump) == 0, "dump");
	r = shmcfg_load(seg, dump, strlen(dump), NULL, NULL, &gen);
	/* the dump writes every value to the user layer: it may publish once
	 * (layers that were unset become set), never fail, and the effective
	 * configuration stays what was dumped */
	FUZZ_ASSERT(r == 0, "reloading a dump: %s\n%s", shmcfg_strerror(r), dump);
	uint8_t h2[16];
	(void)shmcfg_config_hash(seg, h2);
	FUZZ_ASSERT(memcmp(after, h2, 16) == 0, "reloading its own dump changes the config hash\n%s", dump);
	free(dump);
	reset_user_layer();
}

static void fuzz_value_parse(const char *text)
{
	for (int t = SHMCFG_BOOL; t <= SHMCFG_SET; t++)
		for (int nullable = 0; nullable < 2; nullable++) {
			shmcfg_value v;
			int r = shmcfg_value_parse((shmcfg_type)t, nullable, text, &v);
			if (r) {
				FUZZ_ASSERT(r == SHMCFG_E_PARSE || r == -ENOMEM, "value_parse: %d", r);
				continue;
			}
			FUZZ_ASSERT(v.type == (shmcfg_type)t, "parsed type %d, asked %d", v.type, t);
			FUZZ_ASSERT(nullable || !v.is_null, "null from a non-nullable parse");
			/* values a transaction accepts round-trip through their text */
			shmcfg_txn *txn;
			FUZZ_ASSERT(shmcfg_txn_begin(seg, &txn) == 0, "txn_begin");
			bool accepted = shmcfg_txn_set(txn, free_opt[t], &v) == 0;
			shmcfg_txn_abort(txn);
			char *s = NULL;
			r = shmcfg_value_format(&v, &s);
			/* a value no transaction takes (invalid UTF-8) may be refused */
			FUZZ_ASSERT(r == 0 || r == -ENOMEM || (!accepted && r == -EINVAL), "format: %d", r);
			if (r == 0 && accepted) {
				shmcfg_value w;
				r = shmcfg_value_parse((shmcfg_type)t, nullable, s, &w);
				FUZZ_ASSERT(r == 0, "%s value formatted as '%s' does not parse back: %s",
					    shmcfg_type_name((shmcfg_type)t), s, shmcfg_errdetail());
				FUZZ_ASSERT(shmcfg_value_equal(&v, &w),
					    "%s value formatted as '%s' parses back different",
					    shmcfg_type_name((shmcfg_type)t), s);
				shmcfg_value_clear(&w);
			}
			free(s);
			shmcfg_value_clear(&v);
		}
}

static void fuzz_set_text(const char *text)
{
	shmcfg_txn *t;
	FUZZ_ASSERT(shmcfg_txn_begin(seg, &t) == 0, "txn_begin");
	for (shmcfg_opt o = 0; o < F_COUNT; o++)
		IGNORE(shmcfg_txn_set_text(t, o, text));
	shmcfg_txn_abort(t);
	if (shmcfg_patch_push(seg) == 0) {
		for (shmcfg_opt o = 0; o < F_COUNT; o++)
			if (shmcfg_patch_set_text(seg, o, text) == 0) {
				shmcfg_value v;
				int r = shmcfg_get(seg, o, &v);
				FUZZ_ASSERT(r == 0, "patched %s: %s", fuzz_opt(o)->name, shmcfg_strerror(r));
				shmcfg_value_clear(&v);
			}
		FUZZ_ASSERT(shmcfg_patch_pop(seg) == 0, "patch_pop");
	}
}

static void fuzz_env(const char *text)
{
	char *env[FUZZ_NENV + 1];
	for (size_t i = 0; i < FUZZ_NENV; i++) {
		size_t len = strlen(fuzz_env_vars[i]) + strlen(text) + 2;
		env[i] = malloc(len);
		FUZZ_ASSERT(env[i], "malloc");
		snprintf(env[i], len, "%s=%s", fuzz_env_vars[i], text);
	}
	env[FUZZ_NENV] = NULL;
	shmcfg_schema *s = fuzz_schema_new();
	shmcfg_create_opts o = {.slots = 2, .readers = 1, .heap_bytes = 8192,
				.flags = SHMCFG_CREATE_FORCE, .envp = env};
	shmcfg *h = NULL;
	int r = shmcfg_create(env_name, s, &o, &h);
	if (r == 0) {
		for (shmcfg_opt k = 0; k < F_COUNT; k++) {
			shmcfg_value v;
			r = shmcfg_get(h, k, &v);
			FUZZ_ASSERT(r == 0, "%s from the environment: %s", fuzz_opt(k)->name,
				    shmcfg_strerror(r));
			shmcfg_value_clear(&v);
		}
		FUZZ_ASSERT(shmcfg_check(h, true, NULL, NULL) == 0, "deep check");
		shmcfg_close(h);
		(void)shmcfg_unlink(env_name);
	} else {
		FUZZ_ASSERT(r == SHMCFG_E_ENV || r == SHMCFG_E_FULL || r == -ENOMEM,
			    "create with the environment: %s: %s", shmcfg_strerror(r), shmcfg_errdetail());
		FUZZ_ASSERT(strstr(shmcfg_errdetail(), "T_ENV") || r != SHMCFG_E_ENV,
			    "the error does not name the variable: %s", shmcfg_errdetail());
	}
	shmcfg_schema_free(s);
	for (size_t i = 0; i < FUZZ_NENV; i++)
		free(env[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!seg)
		LLVMFuzzerInitialize(NULL, NULL);
	if (size > (1u << 20))
		return 0;
	fuzz_shmcfg_load((const char *)data, size);
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = 0;
	fuzz_value_parse(text);
	fuzz_set_text(text);
	if (size < 4096)
		fuzz_env(text);
	free(text);
	return 0;
}
