/* SPDX-License-Identifier: MIT */
/*
 * fuzz_dump: a dump document (shmcfg_dump()'s JSON: "format", "generation",
 * "config_hash", "schema_hash", "values") through every way a load reads
 * it, and what is made of it dumps and loads back.
 *
 * fuzz_load feeds text to shmcfg_load() in its default mode and reloads a
 * segment's own dump into it. This target covers the rest of lib/ops/dump.c's
 * readers, on a segment of the fuzz schema. The input goes to
 *  - shmcfg_load_ex() in each mode (0, SHMCFG_LOAD_STRICT,
 *    SHMCFG_LOAD_PARTIAL): accepted, with one new generation or none, or
 *    refused with the configuration untouched and a detail; and the modes
 *    agree: what a strict load takes a plain one takes, to the same config
 *    hash, and what a plain one takes a partial one takes to the same hash
 *    without skipping a value; a partial load is refused only for text that
 *    is no JSON object or at the commit, never for a value or a name; a
 *    strict load takes no dump of another schema, nor an unknown name;
 *  - shmcfg_txn_load(), twice in one transaction: the commit publishes what
 *    one load does, or nothing if the load is refused (a refused load
 *    poisons the transaction);
 *  - shmcfg_value_from_json() of each value of the values object: where the
 *    load was accepted, each parses and checks, and is what the user layer
 *    of its option holds;
 * and an accepted configuration is dumped (every option; then without the
 * save-ignored and private ones) and loaded strictly into a second, fresh
 * segment of the same schema, which then has the same config hash; the dump
 * names the generation, config hash and schema hash of the segment; the
 * codegen JSON of the non-default settings loads strictly too.
 */
#include "config.h"

#include <errno.h>
#include <jansson.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"

static char name1[64], name2[64];
static shmcfg *seg, *copy;
static uint8_t base_hash[16];
static char schema_hex[33];

static shmcfg *make_segment(const char *name)
{
	shmcfg_schema *s = fuzz_schema_new();
	shmcfg_create_opts o = {.slots = 8, .readers = 4, .heap_bytes = 8192,
				.flags = SHMCFG_CREATE_FORCE | SHMCFG_CREATE_NO_ENV};
	shmcfg *h;
	int r = shmcfg_create(name, s, &o, &h);
	FUZZ_ASSERT(r == 0, "create: %s", shmcfg_strerror(r));
	shmcfg_schema_free(s);
	shmcfg_set_commit_timeout(h, 1000);
	return h;
}

static void cleanup(void)
{
	seg = shmcfg_close(seg);
	copy = shmcfg_close(copy);
	(void)shmcfg_unlink(name1);
	(void)shmcfg_unlink(name2);
}

static void hex(const uint8_t *b, char out[33])
{
	for (int i = 0; i < 16; i++)
		snprintf(out + 2 * i, 3, "%02x", b[i]);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	snprintf(name1, sizeof name1, "fuzz-dump-%d", (int)getpid());
	snprintf(name2, sizeof name2, "fuzz-dump2-%d", (int)getpid());
	shmcfg_set_log(NULL, NULL);
	fuzz_clean_stale();
	seg = make_segment(name1);
	copy = make_segment(name2);
	(void)shmcfg_config_hash(seg, base_hash);
	uint8_t h2[16], sh[16];
	(void)shmcfg_config_hash(copy, h2);
	FUZZ_ASSERT(!memcmp(base_hash, h2, 16), "two fresh segments of one schema differ");
	shmcfg_schema_hash(seg, sh);
	hex(sh, schema_hex);
	atexit(cleanup);
	return 0;
}

/* Every user layer reset: the configuration of creation. */
static void reset(shmcfg *h)
{
	shmcfg_txn *t;
	FUZZ_ASSERT(shmcfg_txn_begin(h, &t) == 0, "txn_begin");
	for (shmcfg_opt o = 0; o < F_COUNT; o++)
		FUZZ_ASSERT(shmcfg_txn_reset(t, o) == 0, "reset %u", o);
	int r = shmcfg_txn_commit(t, NULL);
	FUZZ_ASSERT(r == 0, "reset commit: %s", shmcfg_strerror(r));
	uint8_t hh[16];
	(void)shmcfg_config_hash(h, hh);
	FUZZ_ASSERT(!memcmp(hh, base_hash, 16), "reset does not restore the config hash");
}

/* The warnings of one load. */
struct warns {
	size_t n, skipped_values, unknown, other_schema;
};

static void on_warn(const char *msg, void *ud)
{
	struct warns *w = ud;
	FUZZ_ASSERT(msg && msg[0], "empty warning");
	size_t len = strlen(msg);
	w->n++;
	if (len >= 9 && !strcmp(msg + len - 9, "; skipped"))
		w->skipped_values++;
	else if (!strncmp(msg, "unknown option '", 16))
		w->unknown++;
	else if (strstr(msg, "is not the segment's"))
		w->other_schema++;
	else
		FUZZ_ASSERT(0, "a warning of no known kind: %s", msg);
}

struct outcome {
	int r;
	uint8_t hash[16];
	struct warns w;
};

static bool value_error(int r)
{
	return r == SHMCFG_E_TYPE || r == SHMCFG_E_RANGE || r == SHMCFG_E_CHOICE || r == SHMCFG_E_NULLVAL;
}

/* A load in one mode, from the configuration of creation. */
static struct outcome load_mode(const uint8_t *data, size_t size, unsigned flags)
{
	struct outcome out = {0};
	uint8_t before[16];
	reset(seg);
	uint64_t g0 = shmcfg_config_hash(seg, before), gen = 0;
	bool published = true;
	out.r = shmcfg_load_ex(seg, (const char *)data, size, flags, on_warn, &out.w, &gen, &published);
	bool detail = shmcfg_errdetail()[0];
	uint64_t g1 = shmcfg_config_hash(seg, out.hash);
	if (out.r < 0) {
		FUZZ_ASSERT(detail, "load (flags %u) failed (%s) without a detail", flags, shmcfg_strerror(out.r));
		FUZZ_ASSERT(!published, "a refused load says it published");
		FUZZ_ASSERT(g1 == g0 && !memcmp(before, out.hash, 16),
			    "a refused load (flags %u: %s) changed the configuration", flags, shmcfg_strerror(out.r));
		FUZZ_ASSERT(out.r != -EINVAL, "load (flags %u): -EINVAL: %s", flags, shmcfg_errdetail());
		return out;
	}
	FUZZ_ASSERT(out.r == 0, "load returned %d", out.r);
	if (published)
		FUZZ_ASSERT(g1 == g0 + 1 && gen == g1, "load published %llu after %llu", (unsigned long long)gen,
			    (unsigned long long)g0);
	else
		FUZZ_ASSERT(g1 == g0 && gen == g0 && !memcmp(before, out.hash, 16), "a no-op load changed the segment");
	FUZZ_ASSERT(shmcfg_check(seg, true, NULL, NULL) == 0, "deep check after a load (flags %u)", flags);
	return out;
}

/* The values object a load reads, as lib/ops/dump.c finds it (NULL: none). */
static json_t *values_of(json_t *root)
{
	json_t *v = json_object_get(root, "values");
	if (json_is_object(root) && json_is_object(v) && (json_object_get(root, "format") || json_object_size(root) == 1))
		return v;
	return json_is_object(root) ? root : NULL;
}

/* Each known name's value parses alone as the load parsed it, and is what
 * the user layer holds after the accepted load (where one name alone sets
 * its option: aliases of one option in the same object are left out). */
static void check_values(json_t *values, bool accepted)
{
	unsigned count[F_COUNT] = {0};
	const char *key;
	json_t *j;
	json_object_foreach(values, key, j) {
		shmcfg_opt o;
		shmcfg_optinfo oi;
		if (!shmcfg_lookup(seg, key, &o) && !shmcfg_opt_info(seg, o, &oi))
			count[oi.alias_final]++;
	}
	shmcfg_snapshot *sn;
	FUZZ_ASSERT(shmcfg_snapshot_acquire(seg, &sn) == 0, "snapshot");
	json_object_foreach(values, key, j) {
		shmcfg_opt o;
		shmcfg_optinfo oi;
		if (shmcfg_lookup(seg, key, &o) || shmcfg_opt_info(seg, o, &oi))
			continue;
		char *text = json_dumps(j, JSON_ENCODE_ANY | JSON_COMPACT);
		FUZZ_ASSERT(text, "json_dumps");
		shmcfg_value v;
		int r = shmcfg_value_from_json(seg, o, text, strlen(text), &v);
		if (r) {
			FUZZ_ASSERT(r == SHMCFG_E_TYPE || r == SHMCFG_E_PARSE || r == -ENOMEM,
				    "value_from_json of %s: %s", key, shmcfg_strerror(r));
			FUZZ_ASSERT(!accepted || r == -ENOMEM, "%s: %s: refused alone (%s), taken by the load", key, text,
				    shmcfg_errdetail());
			free(text);
			continue;
		}
		r = shmcfg_value_check(seg, o, &v);
		FUZZ_ASSERT(!accepted || r == 0, "%s: %s: refused by its check (%s), taken by the load", key, text,
			    shmcfg_errdetail());
		FUZZ_ASSERT(r == 0 || value_error(r), "value_check of %s: %s", key, shmcfg_strerror(r));
		if (accepted && count[oi.alias_final] == 1) {
			shmcfg_value have;
			r = shmcfg_snapshot_layer(sn, oi.alias_final, SHMCFG_SRC_USER, &have);
			FUZZ_ASSERT(r == 0, "%s: the user layer is not set after a load that set it", key);
			FUZZ_ASSERT(shmcfg_value_equal(&have, &v), "%s: the user layer is not the value %s", key, text);
		}
		shmcfg_value_clear(&v);
		free(text);
	}
	shmcfg_snapshot_release(sn);
}

/* shmcfg_txn_load() twice in one transaction: as one load, or nothing. */
static void check_txn_load(const uint8_t *data, size_t size, const struct outcome *plain)
{
	reset(seg);
	uint8_t before[16], after[16];
	uint64_t g0 = shmcfg_config_hash(seg, before);
	shmcfg_txn *t;
	FUZZ_ASSERT(shmcfg_txn_begin(seg, &t) == 0, "txn_begin");
	int r1 = shmcfg_txn_load(t, (const char *)data, size, 0, NULL, NULL);
	int r2 = shmcfg_txn_load(t, (const char *)data, size, 0, NULL, NULL);
	uint64_t gen = 0;
	int rc = shmcfg_txn_commit(t, &gen);
	uint64_t g1 = shmcfg_config_hash(seg, after);
	if (r1 || r2) {
		FUZZ_ASSERT(r1 == r2 || r1 == -ENOMEM || r2 == -ENOMEM, "the same load twice: %d, then %d", r1, r2);
		FUZZ_ASSERT(rc < 0, "a transaction with a refused load (%s) committed", shmcfg_strerror(r1 ? r1 : r2));
		FUZZ_ASSERT(g1 == g0 && !memcmp(before, after, 16), "a poisoned transaction changed the configuration");
		FUZZ_ASSERT(plain->r < 0 || r1 == -ENOMEM || r2 == -ENOMEM,
			    "txn_load refused (%s) what shmcfg_load took", shmcfg_strerror(r1 ? r1 : r2));
		return;
	}
	/* both accepted: the commit is the load's commit */
	if (rc < 0) {
		FUZZ_ASSERT(plain->r < 0, "txn_load's commit failed (%s), shmcfg_load's did not", shmcfg_strerror(rc));
		FUZZ_ASSERT(g1 == g0 && !memcmp(before, after, 16), "a failed commit changed the configuration");
		return;
	}
	FUZZ_ASSERT(plain->r == 0, "txn_load took what shmcfg_load refused (%s)", shmcfg_strerror(plain->r));
	FUZZ_ASSERT(!memcmp(after, plain->hash, 16), "two txn_loads of a text differ from one load of it");
}

/* The dump of seg names its state, and loads strictly into a fresh segment
 * of the schema to the same config hash (all: every option is in it). */
static void round_trip(unsigned flags)
{
	char *dump = NULL;
	int r = shmcfg_dump(seg, flags, &dump);
	FUZZ_ASSERT(r == 0, "dump: %s", shmcfg_strerror(r));
	uint8_t h[16];
	char hh[33];
	uint64_t gen = shmcfg_config_hash(seg, h);
	hex(h, hh);
	json_error_t e;
	json_t *root = json_loads(dump, 0, &e);
	FUZZ_ASSERT(json_is_object(root), "the dump is not a JSON object: %s\n%s", e.text, dump);
	json_t *g = json_object_get(root, "generation");
	FUZZ_ASSERT(json_is_integer(g) && (uint64_t)json_integer_value(g) == gen, "the dump's generation");
	FUZZ_ASSERT(!strcmp(json_string_value(json_object_get(root, "format")) ?: "", "shmcfg-dump/1"), "format");
	FUZZ_ASSERT(!strcmp(json_string_value(json_object_get(root, "config_hash")) ?: "", hh), "config_hash");
	FUZZ_ASSERT(!strcmp(json_string_value(json_object_get(root, "schema_hash")) ?: "", schema_hex), "schema_hash");
	json_decref(root);
	reset(copy);
	struct warns w = {0};
	r = shmcfg_load_ex(copy, dump, strlen(dump), SHMCFG_LOAD_STRICT, on_warn, &w, NULL, NULL);
	FUZZ_ASSERT(r == 0, "a strict load of a dump (flags %u) into a segment of its schema: %s: %s\n%s", flags,
		    shmcfg_strerror(r), shmcfg_errdetail(), dump);
	FUZZ_ASSERT(w.n == 0, "a strict load of a dump warned");
	uint8_t h2[16];
	(void)shmcfg_config_hash(copy, h2);
	if (flags & SHMCFG_DUMP_ALL)
		FUZZ_ASSERT(!memcmp(h, h2, 16), "the copy loaded from the dump has another config hash\n%s", dump);
	free(dump);
}

static void check_codegen(void)
{
	char *text = NULL;
	int r = shmcfg_codegen(seg, SHMCFG_CODEGEN_JSON, &text);
	FUZZ_ASSERT(r == 0, "codegen: %s", shmcfg_strerror(r));
	reset(copy);
	r = shmcfg_load_ex(copy, text, strlen(text), SHMCFG_LOAD_STRICT, NULL, NULL, NULL, NULL);
	FUZZ_ASSERT(r == 0, "a strict load of the codegen JSON: %s: %s\n%s", shmcfg_strerror(r), shmcfg_errdetail(),
		    text);
	free(text);
	for (int f = SHMCFG_CODEGEN_PYTHON; f <= SHMCFG_CODEGEN_SHELL; f++) {
		r = shmcfg_codegen(seg, (shmcfg_codegen_format)f, &text);
		FUZZ_ASSERT(r == 0, "codegen %d: %s", f, shmcfg_strerror(r));
		free(text);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!seg)
		LLVMFuzzerInitialize(NULL, NULL);
	if (size > (1u << 20))
		return 0;
	struct outcome strict = load_mode(data, size, SHMCFG_LOAD_STRICT);
	struct outcome partial = load_mode(data, size, SHMCFG_LOAD_PARTIAL);
	struct outcome plain = load_mode(data, size, 0); /* the last: seg holds what it made */

	/* what the text is, as the load reads it */
	json_t *root = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, NULL);
	json_t *values = values_of(root);
	json_t *sh = values && values != root ? json_object_get(root, "schema_hash") : NULL;
	bool other_schema = sh && (!json_is_string(sh) || strcmp(json_string_value(sh), schema_hex));

	/* the modes agree */
	if (!values) {
		FUZZ_ASSERT(strict.r == SHMCFG_E_PARSE && partial.r == SHMCFG_E_PARSE && plain.r == SHMCFG_E_PARSE,
			    "no JSON object of values, loads gave %d %d %d", strict.r, partial.r, plain.r);
	}
	FUZZ_ASSERT(plain.r != SHMCFG_E_NOOPT && plain.r != SHMCFG_E_SCHEMA, "a plain load: %s",
		    shmcfg_strerror(plain.r));
	FUZZ_ASSERT(!value_error(partial.r) && partial.r != SHMCFG_E_NOOPT && partial.r != SHMCFG_E_SCHEMA,
		    "a partial load refused for a value or a name: %s: %s", shmcfg_strerror(partial.r),
		    shmcfg_errdetail());
	if (strict.r == 0) {
		FUZZ_ASSERT(!other_schema, "a strict load took a dump of another schema");
		FUZZ_ASSERT(strict.w.n == 0, "a strict load warned");
		FUZZ_ASSERT(plain.r == 0 && !memcmp(strict.hash, plain.hash, 16),
			    "a strict load took what a plain one did not (%s), or made another configuration",
			    shmcfg_strerror(plain.r));
	}
	if (plain.r == 0) {
		FUZZ_ASSERT(partial.r == 0 && !memcmp(partial.hash, plain.hash, 16) && !partial.w.skipped_values,
			    "a partial load refused (%s) or skipped (%zu) what a plain one took", shmcfg_strerror(partial.r),
			    partial.w.skipped_values);
		FUZZ_ASSERT(!plain.w.skipped_values && !plain.w.other_schema, "a plain load warned as a partial one");
		FUZZ_ASSERT(strict.r == 0 || strict.r == SHMCFG_E_NOOPT || strict.r == SHMCFG_E_SCHEMA,
			    "a strict load refused (%s) what a plain one took", shmcfg_strerror(strict.r));
		FUZZ_ASSERT(strict.r == SHMCFG_E_NOOPT || strict.r == SHMCFG_E_SCHEMA || !plain.w.unknown,
			    "a strict load took unknown names");
	}
	if (values)
		check_values(values, plain.r == 0);
	if (plain.r == 0) {
		round_trip(SHMCFG_DUMP_ALL);
		round_trip(0);
		check_codegen();
	}
	json_decref(root);
	check_txn_load(data, size, &plain);
	return 0;
}
