/* SPDX-License-Identifier: MIT */
/*
 * mkseeds: writes the seed inputs of the fuzz targets, made by the library
 * itself, into DIR/fuzz_segment, DIR/fuzz_load and DIR/fuzz_dump:
 *  - segment images (the bytes of /dev/shm/shmcfg.NAME) of the fuzz schema
 *    and of the embedded default schema, fresh and after commits, with a
 *    pinned reader entry, and with the harness's fix-up flags set;
 *  - dumps and codegen output of those segments, and value texts;
 *  - dump documents (fuzz_dump): the dumps of the fuzz schema's segments,
 *    and dumps edited to be refused or skipped in part (another schema
 *    hash, unknown names, values of the wrong type or out of range).
 * The fuzz_schema seeds are files: the schemas/ YAML files and hand-written ones.
 *
 * Usage: tests/fuzz/mkseeds DIR  (`make fuzz-seeds`; the committed corpora
 * are these seeds plus what fuzzing found, minimised with -merge=1)
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "fuzz.h"

static const char *outdir;
static int written;

static void put(const char *target, const char *file, const void *data, size_t len)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", outdir, target);
	(void)mkdir(path, 0755);
	snprintf(path, sizeof path, "%s/%s/%s", outdir, target, file);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(data, 1, len, f) != len || fclose(f)) {
		fprintf(stderr, "mkseeds: %s: %s\n", path, strerror(errno));
		exit(1);
	}
	written++;
}

static void die(const char *what, int r)
{
	fprintf(stderr, "mkseeds: %s: %s: %s\n", what, shmcfg_strerror(r), shmcfg_errdetail());
	exit(1);
}

/* The segment's bytes, with the harness flags (last byte of the header page). */
static void image(shmcfg *h, const char *file, unsigned flags)
{
	char path[256];
	snprintf(path, sizeof path, "/dev/shm/shmcfg.%s", shmcfg_name(h));
	FILE *f = fopen(path, "rb");
	if (!f)
		die(path, -errno);
	fseek(f, 0, SEEK_END);
	long len = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *buf = malloc((size_t)len);
	if (!buf || fread(buf, 1, (size_t)len, f) != (size_t)len)
		die(path, -EIO);
	fclose(f);
	buf[SEG_HEADER_BYTES - 1] = (char)flags;
	put("fuzz_segment", file, buf, (size_t)len);
	free(buf);
}

static void text_seed(shmcfg *h, const char *file, int which)
{
	char *text = NULL;
	int r = which < 0 ? shmcfg_dump(h, which == -1 ? 0 : SHMCFG_DUMP_ALL, &text)
			  : shmcfg_codegen(h, (shmcfg_codegen_format)which, &text);
	if (r)
		die("dump", r);
	put("fuzz_load", file, text, strlen(text));
	/* the fuzz schema's dumps are fuzz_dump's seeds too */
	if (which < 0 && shmcfg_count(h) == F_COUNT)
		put("fuzz_dump", file, text, strlen(text));
	free(text);
}

/* Dumps of the fuzz schema written by hand around its schema hash: a load
 * refuses or skips some of each in one mode or another. */
static void dump_seeds(shmcfg *h)
{
	uint8_t b[16];
	char sh[33], text[1024];
	shmcfg_schema_hash(h, b);
	for (int i = 0; i < 16; i++)
		snprintf(sh + 2 * i, 3, "%02x", b[i]);
	static const char *const values[] = {
		"\"t.a\": 1, \"t.alias2\": 2",
		"\"t.ratio\": 2, \"t.c\": \"ok\"",
		"\"t.b\": \"x\", \"t.mode\": \"slow\", \"nope\": 1",
		"\"t.opt_int\": null, \"t.flag\": null, \"t.tags\": [\"b\", 1]",
		"\"t.debug\": true, \"t.safe\": true",
		"\"t.env_x\": \"-inf\", \"t._nfloat\": \"nan\", \"t.env_t\": [\"a\", \"a\"]",
		"\"t.items\": [\"\\u0000\"], \"t.c\": \"\\u00e9\"",
	};
	for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
		char file[32];
		int n = snprintf(text, sizeof text,
				 "{\"format\": \"shmcfg-dump/1\", \"generation\": %zu, \"config_hash\": "
				 "\"00000000000000000000000000000000\", \"schema_hash\": \"%s\", \"values\": {%s}}",
				 i + 2, i % 2 ? "0123456789abcdef0123456789abcdef" : sh, values[i]);
		snprintf(file, sizeof file, "edited-%02zu.json", i);
		put("fuzz_dump", file, text, (size_t)n);
	}
	int n = snprintf(text, sizeof text, "{\"values\": {\"t.a\": 3, \"unknown\": true}}");
	put("fuzz_dump", "values-only.json", text, (size_t)n);
	n = snprintf(text, sizeof text, "{\"format\": \"shmcfg-dump/1\", \"schema_hash\": 7, \"values\": {}}");
	put("fuzz_dump", "hash-not-string.json", text, (size_t)n);
}

static void commit(shmcfg *h, const char *const *sets)
{
	shmcfg_txn *t;
	int r = shmcfg_txn_begin(h, &t);
	if (r)
		die("txn_begin", r);
	for (; *sets; sets += 2) {
		shmcfg_opt o;
		if ((r = shmcfg_lookup(h, sets[0], &o)) || (r = shmcfg_txn_set_text(t, o, sets[1])))
			die(sets[0], r);
	}
	if ((r = shmcfg_txn_commit(t, NULL)) < 0)
		die("commit", r);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	outdir = argv[1];
	(void)mkdir(outdir, 0755);
	char name[64];
	snprintf(name, sizeof name, "mkseeds-%d", (int)getpid());
	shmcfg_set_log(NULL, NULL);

	/* the fuzz schema, as small as it gets */
	shmcfg_schema *s = fuzz_schema_new();
	char *env[] = {"T_ENVD2=7", "T_ENVF=1", "T_ENVS=from env", "T_ENVL=[\"p\",\"q\"]",
		       "T_ENVX=-1.5", "T_ENVT=z,y,z", "T_ENVN=2", NULL};
	shmcfg_create_opts o = {.slots = 2, .readers = 2, .heap_bytes = 1024,
				.flags = SHMCFG_CREATE_FORCE, .envp = env};
	shmcfg *h = NULL;
	int r = shmcfg_create(name, s, &o, &h);
	if (r)
		die("create", r);
	image(h, "test-gen1", 0);
	text_seed(h, "dump-gen1.json", -1);
	dump_seeds(h);
	commit(h, (const char *const[]){"t.a", "5", "t.b", "-5", "t.c", "5", "t.debug", "true",
					"t.items", "[\"one\",\"two\",\"\"]", "t.tags", "b,a,b",
					"t.opt_int", "null", "t._nfloat", "nan", NULL});
	image(h, "test-gen2-fix3", 3);
	text_seed(h, "dump-gen2-all.json", -2);
	text_seed(h, "codegen-python.txt", SHMCFG_CODEGEN_PYTHON);
	text_seed(h, "codegen-shell.txt", SHMCFG_CODEGEN_SHELL);
	text_seed(h, "codegen-json.json", SHMCFG_CODEGEN_JSON);
	commit(h, (const char *const[]){"t.ratio", "0.25", "t.mode", "slow", "t.debug", "false",
					"t.alias2", "9", "t.env_s", "\"quoted \\u00e9\"", NULL});
	image(h, "test-gen3-fix1", 1);
	shmcfg_close(h);

	/* three slots, four readers, a knob, a pinned snapshot and a thread patch */
	o = (shmcfg_create_opts){.slots = 3, .readers = 4, .heap_bytes = 1024,
				 .flags = SHMCFG_CREATE_FORCE | SHMCFG_CREATE_NO_ENV};
	if ((r = shmcfg_create(name, s, &o, &h)))
		die("create", r);
	shmcfg_txn *t;
	if ((r = shmcfg_txn_begin(h, &t)) || (r = shmcfg_txn_layer(t, SHMCFG_SRC_KNOB)) ||
	    (r = shmcfg_txn_set_bool(t, T_KNOBBED, true)) || (r = shmcfg_txn_commit(t, NULL)))
		die("knob", r);
	shmcfg_snapshot *snap;
	if ((r = shmcfg_snapshot_acquire(h, &snap)))
		die("snapshot", r);
	commit(h, (const char *const[]){"t.a", "-9223372036854775808", "t.safe", "true", NULL});
	image(h, "test-pinned-fix1", 1);
	text_seed(h, "dump-pinned.json", -1);
	shmcfg_snapshot_release(snap);
	shmcfg_close(h);
	shmcfg_schema_free(s);

	/* the embedded default schema: two slots, one reader, a heap just big
	 * enough (the schema region dominates the size) */
	o = (shmcfg_create_opts){.slots = 2, .readers = 1, .heap_bytes = 2048,
				 .flags = SHMCFG_CREATE_FORCE | SHMCFG_CREATE_NO_ENV};
	if ((r = shmcfg_create(name, NULL, &o, &h)))
		die("create default", r);
	image(h, "default-gen1", 0);
	text_seed(h, "dump-default.json", -1);
	shmcfg_close(h);
	(void)shmcfg_unlink(name);

	/* value texts */
	static const char *const texts[] = {
		"true", "False", "1", "0x7fffffffffffffff", "-0", "1e308", "-inf", "nan", "0.1",
		"\"a json \\\"string\\\"\"", "plain text", "a,b,,c", "[\"x\",\"y\"]", "[]", "",
		"none", "null", "{\"t.a\": 1, \"t.b\": -1, \"t.c\": \"1\"}",
		"{\"t.ratio\": \"nan\", \"t.opt_int\": null, \"unknown.key\": 3}",
		"{\"format\": \"shmcfg-dump/1\", \"values\": {\"t.tags\": [\"b\", \"a\"]}}",
		"{\"t.items\": [\"\\u0000\"]}", "{\"t.c\": \"\\u00ff\\ud800\"}",
	};
	for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
		char file[32];
		snprintf(file, sizeof file, "text-%02zu", i);
		put("fuzz_load", file, texts[i], strlen(texts[i]));
	}
	printf("mkseeds: %d files in %s\n", written, outdir);
	return 0;
}
