/* SPDX-License-Identifier: MIT */
/*
 * Shared by the fuzz targets (tests/fuzz/fuzz_*.c), their corpus replay
 * (replay.c) and the seed generator (mkseeds.c). No cmocka here: the targets
 * are built with clang's libFuzzer as well as with the plain compiler.
 *
 * A target is one function, LLVMFuzzerTestOneInput(), and optionally
 * LLVMFuzzerInitialize(). libFuzzer calls them with generated inputs;
 * replay.c calls them once per file of the committed corpus, so that every
 * `make check` runs the corpus without clang.
 *
 * A finding is a crash: a sanitizer report, a signal, or FUZZ_ASSERT (an
 * invariant the library promises, checked on the result of a call).
 */
#ifndef SHMCFG_FUZZ_H
#define SHMCFG_FUZZ_H

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shmcfg.h"
#include "../test_schema.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* For results the harness does not look at (the API is warn_unused_result). */
#define IGNORE(call) ((void)!(call))
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* An invariant of the library broken: abort, which libFuzzer reports as a
 * crash with this message and the input that caused it. */
#define FUZZ_ASSERT(cond, ...)                                                         \
	do {                                                                           \
		if (!(cond)) {                                                         \
			fprintf(stderr, "fuzz invariant broken at %s:%d: %s: ", __FILE__, \
				__LINE__, #cond);                                      \
			fprintf(stderr, __VA_ARGS__);                                  \
			fprintf(stderr, " [detail: %s]\n", shmcfg_errdetail());        \
			abort();                                                       \
		}                                                                      \
	} while (0)

/*
 * Remove the segments of fuzz runs that died (a crash leaves its input in
 * /dev/shm/shmcfg.fuzz-PID, and a hostile segment there could upset a tool
 * that lists every segment). Only names of the targets' own forms whose PID
 * is gone are touched.
 */
static inline void fuzz_clean_stale(void)
{
	DIR *d = opendir("/dev/shm");
	if (!d)
		return;
	static const char *const forms[] = {"shmcfg.fuzz-load-", "shmcfg.fuzz-env-",
					    "shmcfg.fuzz-schema-", "shmcfg.fuzz-etcd-",
					    "shmcfg.fuzz-dump-", "shmcfg.fuzz-dump2-", "shmcfg.fuzz-",
					    "shmcfg-lock.fuzz-load-", "shmcfg-lock.fuzz-env-",
					    "shmcfg-lock.fuzz-schema-", "shmcfg-lock.fuzz-etcd-",
					    "shmcfg-lock.fuzz-dump-", "shmcfg-lock.fuzz-dump2-",
					    "shmcfg-lock.fuzz-"};
	struct dirent *e;
	while ((e = readdir(d))) {
		for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
			size_t n = strlen(forms[i]);
			if (strncmp(e->d_name, forms[i], n))
				continue;
			char *end;
			long pid = strtol(e->d_name + n, &end, 10);
			/* lock objects: shmcfg-lock.fuzz-PID.INSTANCE */
			if ((*end == 0 || *end == '.') && pid > 0 && kill((pid_t)pid, 0) < 0 && errno == ESRCH) {
				char path[300];
				snprintf(path, sizeof path, "/dev/shm/%s", e->d_name);
				(void)unlink(path);
			}
			break;
		}
	}
	closedir(d);
}

/*
 * The fuzz schema: tests/common.h's test schema (every type and attribute)
 * plus options that read environment variables of every type, so that the
 * environment parser is fuzzed too (fuzz_load).
 */
enum { F_ENV_S = T_COUNT, F_ENV_L, F_ENV_X, F_ENV_T, F_ENV_N, F_NFLOAT, F_COUNT };

static const shmcfg_optdef fuzz_extra_opts[F_COUNT - T_COUNT] = {
	{.name = "t.env_s", .type = SHMCFG_STR, .env_default = "T_ENVS", .flags = SHMCFG_F_NULLABLE},
	{.name = "t.env_l", .type = SHMCFG_LIST, .env_force = "T_ENVL"},
	{.name = "t.env_x", .type = SHMCFG_FLOAT, .def = "2.5", .min = "-10", .max = "10",
	 .env_default = "T_ENVX"},
	{.name = "t.env_t", .type = SHMCFG_SET, .env_default = "T_ENVT", .flags = SHMCFG_F_SAVE_IGNORED},
	{.name = "t.env_n", .type = SHMCFG_INT, .choices = "1,2,3", .def = "1", .env_force = "T_ENVN",
	 .deprecated = "use t.a"},
	{.name = "t._nfloat", .type = SHMCFG_FLOAT, .flags = SHMCFG_F_NULLABLE | SHMCFG_F_PRIVATE},
};

/* Option i of the fuzz schema. */
static inline const shmcfg_optdef *fuzz_opt(unsigned i)
{
	return i < T_COUNT ? &test_opts[i] : &fuzz_extra_opts[i - T_COUNT];
}

/* The environment variables the fuzz schema reads. */
static const char *const fuzz_env_vars[] = {"T_ENVD1", "T_ENVD2", "T_ENVF", "T_ENVS",
					    "T_ENVL", "T_ENVX", "T_ENVT", "T_ENVN"};
#define FUZZ_NENV (sizeof fuzz_env_vars / sizeof fuzz_env_vars[0])

/* The fuzz schema, or NULL (out of memory, or a library that rejects it:
 * both abort the caller, which cannot fuzz anything then). */
static inline shmcfg_schema *fuzz_schema_new(void)
{
	shmcfg_schema *s = NULL;
	if (shmcfg_schema_new(&s))
		abort();
	for (int i = 0; i < F_COUNT; i++) {
		int r = shmcfg_schema_add(s, fuzz_opt(i));
		if (r) {
			fprintf(stderr, "fuzz schema: %s: %s: %s\n", fuzz_opt(i)->name,
				shmcfg_strerror(r), shmcfg_errdetail());
			abort();
		}
	}
	return s;
}

#endif
