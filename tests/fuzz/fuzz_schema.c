/* SPDX-License-Identifier: MIT */
/*
 * fuzz_schema: the schema-file parser (libyaml, lib/schema/schemafile.c) and the
 * schema builder never crash on any text; a schema that parses builds a
 * segment that reads back whole.
 *
 * The input is schema text for shmcfg_schema_load_text(). If it parses, a
 * segment is created from it (no environment), every option is read, the
 * dump is loaded back (a dump of a segment loads into it: promised by
 * shmcfg_load()), and the segment is created again with an environment that
 * sets every variable the schema names to its option's default text, which
 * runs the environment parser over the schema's types.
 */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"

static char seg_name[64];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	snprintf(seg_name, sizeof seg_name, "fuzz-schema-%d", (int)getpid());
	shmcfg_set_log(NULL, NULL);
	fuzz_clean_stale();
	return 0;
}

static void read_all(shmcfg *h)
{
	uint32_t n = shmcfg_count(h);
	for (uint32_t o = 0; o < n; o++) {
		shmcfg_value v;
		int r = shmcfg_get(h, o, &v);
		FUZZ_ASSERT(r == 0, "option %u of a fresh segment: %s", o, shmcfg_strerror(r));
		shmcfg_optinfo info;
		FUZZ_ASSERT(shmcfg_opt_info(h, o, &info) == 0, "opt_info");
		FUZZ_ASSERT(v.type == info.type, "option %s reads as type %d, declared %d", info.name,
			    v.type, info.type);
		shmcfg_opt found;
		r = shmcfg_lookup(h, info.name, &found);
		FUZZ_ASSERT(r == 0 && found == o, "lookup of %s: %d, %u (want %u)", info.name, r, found, o);
		shmcfg_value_clear(&v);
	}
	FUZZ_ASSERT(shmcfg_check(h, true, NULL, NULL) == 0, "a fresh segment fails its deep check");
}

/* "VAR=text" for every environment variable the schema names. */
static char **schema_env(shmcfg *h)
{
	uint32_t n = shmcfg_count(h);
	size_t cap = 16, k = 0;
	char **env = calloc(cap, sizeof *env);
	for (uint32_t o = 0; env && o < n; o++) {
		shmcfg_optinfo info;
		if (shmcfg_opt_info(h, o, &info))
			continue;
		char *text = NULL;
		if (info.def.is_null || shmcfg_value_format(&info.def, &text))
			continue;
		/* a str default without its JSON quotes, as a person would set it */
		if (info.type == SHMCFG_STR) {
			free(text);
			text = strndup(info.def.u.str.ptr, info.def.u.str.len);
		}
		for (int which = 0; which < 2 && text; which++) {
			const char *var = which ? info.env_force : info.env_default;
			size_t nv = which ? info.n_env_force : info.n_env_default;
			for (size_t j = 0; j < nv; j++, var += strlen(var) + 1) {
				if (k + 2 >= cap) {
					char **ne = realloc(env, 2 * cap * sizeof *env);
					if (!ne)
						break;
					env = ne;
					cap *= 2;
				}
				size_t len = strlen(var) + strlen(text) + 2;
				env[k] = malloc(len);
				if (env[k]) {
					snprintf(env[k], len, "%s=%s", var, text);
					k++;
				}
			}
		}
		free(text);
	}
	if (env)
		env[k] = NULL;
	return env;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!seg_name[0])
		LLVMFuzzerInitialize(NULL, NULL);
	if (size > (1u << 20))
		return 0;
	shmcfg_schema *s = NULL;
	int r = shmcfg_schema_load_text((const char *)data, size, "fuzz", &s);
	FUZZ_ASSERT((r == 0) == (s != NULL), "schema_load_text %d with schema %p", r, (void *)s);
	if (r && getenv("FUZZ_VERBOSE"))
		fprintf(stderr, "# schema: %s: %s\n", shmcfg_errname(r), shmcfg_errdetail());
	if (r) {
		FUZZ_ASSERT(r < 0, "schema_load_text returned %d", r);
		FUZZ_ASSERT(shmcfg_errdetail()[0], "schema_load_text failed (%s) without a detail",
			    shmcfg_strerror(r));
		return 0;
	}
	(void)shmcfg_schema_count(s);
	shmcfg_create_opts o = {.slots = 2, .readers = 2,
				.flags = SHMCFG_CREATE_FORCE | SHMCFG_CREATE_NO_ENV};
	shmcfg *h = NULL;
	r = shmcfg_create(seg_name, s, &o, &h);
	if (getenv("FUZZ_VERBOSE"))
		fprintf(stderr, "# %u options; create: %s %s\n", shmcfg_schema_count(s),
			r ? shmcfg_errname(r) : "ok", r ? shmcfg_errdetail() : "");
	if (r == 0) {
		read_all(h);
		char *dump = NULL;
		r = shmcfg_dump(h, SHMCFG_DUMP_ALL, &dump);
		FUZZ_ASSERT(r == 0, "dump: %s", shmcfg_strerror(r));
		uint64_t gen;
		r = shmcfg_load(h, dump, strlen(dump), NULL, NULL, &gen);
		FUZZ_ASSERT(r == 0 || r == 1, "loading the segment's own dump: %s\n%s",
				    shmcfg_strerror(r), dump);
		free(dump);
		if (r == 0)
			read_all(h);
		for (int fmt = SHMCFG_CODEGEN_PYTHON; fmt <= SHMCFG_CODEGEN_JSON; fmt++) {
			char *text = NULL;
			r = shmcfg_codegen(h, (shmcfg_codegen_format)fmt, &text);
			FUZZ_ASSERT(r == 0, "codegen %d: %s", fmt, shmcfg_strerror(r));
			free(text);
		}
		char **env = schema_env(h);
		h = shmcfg_close(h);
		if (env) {
			o.flags = SHMCFG_CREATE_FORCE;
			o.envp = env;
			if (shmcfg_create(seg_name, s, &o, &h) == 0) {
				read_all(h);
				h = shmcfg_close(h);
			}
			for (char **e = env; *e; e++)
				free(*e);
			free(env);
		}
		(void)shmcfg_unlink(seg_name);
	} else {
		FUZZ_ASSERT(r < 0 && h == NULL, "create: %d", r);
	}
	shmcfg_schema_free(s);
	return 0;
}
