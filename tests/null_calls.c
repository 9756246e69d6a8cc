/* SPDX-License-Identifier: MIT */
/*
 * Every function of the public API called with NULL arguments (issue 24):
 * the calls are generated from the header and the export list
 * (tests/gen-null-calls.py, which states the rule); this runs each in a
 * child of its own, on a real segment, and prints TAP, one line per
 * function. A crash, a hang (30 s) or a missing error fails it.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "null_calls.h"
#include "test_schema.h"

struct null_fixture fx;

static shmcfg_schema *schema_of_tests(void)
{
	shmcfg_schema *s;
	if (shmcfg_schema_new(&s))
		return NULL;
	for (int i = 0; i < T_COUNT; i++)
		if (shmcfg_schema_add(s, &test_opts[i])) {
			shmcfg_schema_free(s);
			return NULL;
		}
	return s;
}

/* In the child: every object a call may take, valid. */
static const char *set_up(void)
{
	static _Alignas(64) unsigned char out[1 << 16];
	fx.out = out;
	fx.opt = T_A;
	fx.opt_bool = T_FLAG;
	fx.opt_float = T_RATIO;
	fx.val = (shmcfg_value){.type = SHMCFG_INT, .u.i = 1};
	if (shmcfg_attach(fx.name, 0, NULL, &fx.h))
		return "shmcfg_attach";
	if (shmcfg_snapshot_acquire(fx.h, &fx.snap))
		return "shmcfg_snapshot_acquire";
	if (shmcfg_txn_begin(fx.h, &fx.txn))
		return "shmcfg_txn_begin";
	if (shmcfg_patcher_new(fx.h, &fx.pat))
		return "shmcfg_patcher_new";
	if (shmcfg_history_get(fx.h, shmcfg_generation(fx.h), &fx.hist))
		return "shmcfg_history_get";
	if (!(fx.schema = schema_of_tests()))
		return "the test schema";
	if (shmcfg_cluster_apply_begin(fx.h, 0, &fx.capply) ||
	    shmcfg_cluster_apply_key(fx.capply, SHMCFG_CLUSTER_KEY_OPT "t.a", "3", 1) ||
	    shmcfg_cluster_apply_key(fx.capply, SHMCFG_CLUSTER_KEY_KNOB "team/flag:knobbed", "true", 4))
		return "shmcfg_cluster_apply_begin";
	return NULL;
}

/* Runs one call in a child: NULL if it kept the rule, else what it did. */
static const char *run(const struct null_call *c, char *why, size_t len)
{
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0) {
		snprintf(why, len, "fork: %s", strerror(errno));
		return why;
	}
	if (pid == 0) {
		const char *failed = set_up();
		if (failed) {
			fprintf(stderr, "# fixture: %s: %s\n", failed, shmcfg_errdetail());
			_exit(3);
		}
		alarm(30);
		_exit(c->call());
	}
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR) {
			snprintf(why, len, "waitpid: %s", strerror(errno));
			return why;
		}
	if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM)
		snprintf(why, len, "%s: hung (30 s)", c->what);
	else if (WIFSIGNALED(st))
		snprintf(why, len, "%s: killed by signal %d (%s)", c->what, WTERMSIG(st),
			 strsignal(WTERMSIG(st)));
	else if (WEXITSTATUS(st) == 2)
		snprintf(why, len, "%s: no error returned", c->what);
	else if (WEXITSTATUS(st) == 3)
		snprintf(why, len, "%s: the fixture could not be set up", c->what);
	else if (WEXITSTATUS(st) != 0)
		snprintf(why, len, "%s: exit status %d", c->what, WEXITSTATUS(st));
	else
		return NULL;
	return why;
}

int main(void)
{
	static char name[64], absent[64], path[] = "/tmp/shmcfg-nullcalls-XXXXXX";
	snprintf(name, sizeof name, "nullcalls-%d", (int)getpid());
	snprintf(absent, sizeof absent, "nullcalls-absent-%d", (int)getpid());
	fx.name = name;
	fx.absent = absent;
	fx.schema_path = path;

	int fd = mkstemp(path);
	static const char yaml[] = "format: 1\noptions:\n  a.b:\n    type: int\n    default: 0\n";
	if (fd < 0 || write(fd, yaml, sizeof yaml - 1) != (ssize_t)sizeof yaml - 1 || close(fd)) {
		printf("Bail out! %s: %s\n", path, strerror(errno));
		return 1;
	}
	shmcfg_schema *s = schema_of_tests();
	shmcfg *h = NULL;
	shmcfg_create_opts o = {.flags = SHMCFG_CREATE_FORCE | SHMCFG_CREATE_NO_ENV};
	shmcfg_txn *t;
	if (!s || shmcfg_create(name, s, &o, &h) || shmcfg_txn_begin(h, &t) ||
	    shmcfg_txn_set_int(t, T_A, 7) || shmcfg_txn_commit(t, NULL)) {
		printf("Bail out! the test segment: %s\n", shmcfg_errdetail());
		return 1;
	}
	shmcfg_schema_free(s);

	size_t nfn = 0;
	for (size_t i = 0; null_calls[i].fn; i++)
		nfn += !null_calls[i + 1].fn || strcmp(null_calls[i].fn, null_calls[i + 1].fn);
	printf("1..%zu\n", nfn);
	int failed = 0;
	size_t n = 0;
	for (size_t i = 0; null_calls[i].fn;) {
		const char *fn = null_calls[i].fn;
		char whys[1024] = "", why[256];
		int calls = 0;
		for (; null_calls[i].fn && !strcmp(null_calls[i].fn, fn); i++, calls++) {
			const char *bad = run(&null_calls[i], why, sizeof why);
			if (bad)
				snprintf(whys + strlen(whys), sizeof whys - strlen(whys), "%s%s",
					 *whys ? "; " : "", bad);
		}
		if (*whys) {
			printf("not ok %zu - %s: %s\n", ++n, fn, whys);
			failed = 1;
		} else {
			printf("ok %zu - %s (%d calls)\n", ++n, fn, calls);
		}
	}
	shmcfg_close(h);
	shmcfg_unlink(name);
	shmcfg_unlink(absent);
	unlink(path);
	return failed;
}
