/* SPDX-License-Identifier: MIT */
/*
 * The library's side of the cluster layer: commits tagged with their origin
 * (cluster revision, who), the applied cluster revision of each generation,
 * the agent's record in the segment, and the two value helpers the agent and
 * `shmctl cluster set` check values with (from JSON, check without a
 * transaction).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "internal.h"

struct fx {
	shmcfg *h;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof *f);
	f->h = test_create(test_name("origin"), NULL);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	shmcfg_close(f->h);
	shmcfg_unlink(test_name("origin"));
	free(f);
	return 0;
}

/* One commit of the cluster layer, as shmcfg-sync makes it. */
static int cluster_commit(shmcfg *h, shmcfg_opt o, const char *text, uint64_t rev, const char *who,
			  uint64_t *gen)
{
	shmcfg_txn *t;
	int r = shmcfg_txn_begin(h, &t);
	if (r)
		return r;
	if ((r = shmcfg_txn_layer(t, SHMCFG_SRC_CLUSTER)) || (r = shmcfg_txn_origin(t, rev, who)) ||
	    (text && (r = shmcfg_txn_set_text(t, o, text)))) {
		shmcfg_txn_abort(t);
		return r;
	}
	return shmcfg_txn_commit(t, gen);
}

/* The revision and who go to the commit log and to the generation; a local
 * commit keeps the revision; the cluster layer sits under user. */
static void test_origin_in_log_and_generation(void **state)
{
	struct fx *f = *state;
	assert_int_equal(shmcfg_cluster_revision(f->h), 0);
	uint64_t g1, g2, g3;
	assert_int_equal(cluster_commit(f->h, T_A, "5", 41, "alice@h1 uid 1000", &g1), 0);
	assert_int_equal(get_i(f->h, T_A), 5);
	assert_int_equal(shmcfg_cluster_revision(f->h), 41);
	shmcfg_commit c;
	assert_int_equal(shmcfg_commit_info(f->h, g1, &c), 0);
	assert_int_equal(c.cluster_rev, 41);
	assert_string_equal(c.who, "alice@h1 uid 1000");
	assert_int_equal(c.nchanged, 3); /* t.a and its aliases t.alias_a, t.alias2 */

	/* a local user override wins, and keeps the revision */
	assert_int_equal(set_and_commit(f->h, T_A, "9", &g2), 0);
	assert_int_equal(get_i(f->h, T_A), 9);
	assert_int_equal(shmcfg_cluster_revision(f->h), 41);
	assert_int_equal(shmcfg_commit_info(f->h, g2, &c), 0);
	assert_int_equal(c.cluster_rev, 0);
	assert_string_equal(c.who, "");
	shmcfg_value v;
	shmcfg_snapshot *s;
	assert_int_equal(shmcfg_snapshot_acquire(f->h, &s), 0);
	assert_int_equal(shmcfg_snapshot_layer(s, T_A, SHMCFG_SRC_CLUSTER, &v), 0);
	assert_int_equal(v.u.i, 5);
	assert_int_equal(shmcfg_snapshot_get(s, T_A, &v), 0);
	assert_int_equal(v.source, SHMCFG_SRC_USER);
	assert_int_equal(shmcfg_snapshot_cluster_revision(s), 41);
	shmcfg_snapshot_release(s);

	/* the user's reset uncovers the cluster's value */
	shmcfg_txn *t;
	assert_int_equal(shmcfg_txn_begin(f->h, &t), 0);
	assert_int_equal(shmcfg_txn_reset(t, T_A), 0);
	assert_int_equal(shmcfg_txn_commit(t, &g3), 0);
	shmcfg_value got;
	assert_int_equal(shmcfg_get(f->h, T_A, &got), 0);
	assert_int_equal(got.u.i, 5);
	assert_int_equal(got.source, SHMCFG_SRC_CLUSTER);
	assert_string_equal(shmcfg_source_name(SHMCFG_SRC_CLUSTER), "cluster");
}

/* A revision that changes nothing here still publishes a generation (its
 * waiters see it); the same revision again publishes nothing. */
static void test_origin_only_commit(void **state)
{
	struct fx *f = *state;
	uint64_t g0 = shmcfg_generation(f->h), g1 = 0, g2 = 0;
	assert_int_equal(cluster_commit(f->h, 0, NULL, 7, "bob@h2", &g1), 0);
	assert_int_equal(g1, g0 + 1);
	assert_int_equal(shmcfg_cluster_revision(f->h), 7);
	shmcfg_commit c;
	assert_int_equal(shmcfg_commit_info(f->h, g1, &c), 0);
	assert_int_equal(c.nchanged, 0);
	assert_int_equal(c.cluster_rev, 7);
	assert_int_equal(cluster_commit(f->h, 0, NULL, 7, "bob@h2", &g2), 0);
	assert_int_equal(g2, g1);
	assert_int_equal(shmcfg_generation(f->h), g1);
	/* a value equal to what the layer holds, with a new revision: published */
	assert_int_equal(cluster_commit(f->h, T_B, "3", 8, NULL, &g2), 0);
	assert_int_equal(cluster_commit(f->h, T_B, "3", 9, NULL, &g2), 0);
	assert_int_equal(shmcfg_commit_info(f->h, g2, &c), 0);
	assert_int_equal(c.nchanged, 0);
	assert_int_equal(shmcfg_cluster_revision(f->h), 9);
}

/* who is truncated to its field, never overrun; a read-only handle reads the
 * revision and the log but writes neither. */
static void test_who_truncated_and_readonly(void **state)
{
	struct fx *f = *state;
	char longwho[300];
	memset(longwho, 'w', sizeof longwho - 1);
	longwho[sizeof longwho - 1] = 0;
	uint64_t g;
	assert_int_equal(cluster_commit(f->h, T_A, "1", 12, longwho, &g), 0);
	shmcfg *ro;
	assert_int_equal(shmcfg_attach(test_name("origin"), SHMCFG_ATTACH_RDONLY, NULL, &ro), 0);
	assert_int_equal(shmcfg_cluster_revision(ro), 12);
	shmcfg_commit c;
	assert_int_equal(shmcfg_commit_info(ro, g, &c), 0);
	assert_int_equal(strlen(c.who), SHMCFG_WHO_MAX - 1);
	assert_memory_equal(c.who, longwho, SHMCFG_WHO_MAX - 1);
	shmcfg_snapshot *s;
	assert_int_equal(shmcfg_snapshot_acquire(ro, &s), 0); /* a private copy */
	assert_int_equal(shmcfg_snapshot_cluster_revision(s), 12);
	shmcfg_snapshot_release(s);
	shmcfg_txn *t;
	assert_int_equal(shmcfg_txn_begin(ro, &t), SHMCFG_E_READONLY);
	shmcfg_sync_info info = {.pid = 1};
	assert_int_equal(shmcfg_sync_set(ro, &info), SHMCFG_E_READONLY);
	/* the layers a transaction may write: not the environment's */
	assert_int_equal(shmcfg_txn_begin(f->h, &t), 0);
	assert_int_equal(shmcfg_txn_layer(t, SHMCFG_SRC_ENV_DEFAULT), -EINVAL);
	shmcfg_txn_abort(t);
	/* a UTF-8 who is cut between characters, never inside one: 40 é
	 * (2 bytes each) keep 31, 62 bytes, not 31 and a lone lead byte */
	char utf[100] = "";
	for (int i = 0; i < 40; i++)
		strcat(utf, "\xc3\xa9");
	assert_int_equal(cluster_commit(f->h, T_A, "2", 13, utf, &g), 0);
	assert_int_equal(shmcfg_commit_info(ro, g, &c), 0);
	assert_int_equal(strlen(c.who), 62);
	assert_memory_equal(c.who, utf, 62);
	shmcfg_close(ro);
}

/* The agent's record: absent, written, read back (by a read-only handle
 * too), strings cut to their fields. */
static void test_sync_record(void **state)
{
	struct fx *f = *state;
	shmcfg_sync_info in, out;
	assert_int_equal(shmcfg_sync_get(f->h, &out), -ENOENT);
	memset(&in, 0, sizeof in);
	snprintf(in.endpoints, sizeof in.endpoints, "unix:/run/etcd.sock,http://10.0.0.1:2379");
	snprintf(in.cluster, sizeof in.cluster, "prod");
	snprintf(in.host, sizeof in.host, "h7");
	snprintf(in.error, sizeof in.error, "opt/t.ratio: 2 is above the maximum 1");
	in.pid = 4242;
	in.updated_ns = 123456789;
	in.applied_rev = 77;
	in.out_of_sync_ns = 5;
	in.nrejected = 1;
	assert_int_equal(shmcfg_sync_set(f->h, &in), 0);
	shmcfg *ro;
	assert_int_equal(shmcfg_attach(test_name("origin"), SHMCFG_ATTACH_RDONLY, NULL, &ro), 0);
	assert_int_equal(shmcfg_sync_get(ro, &out), 0);
	assert_memory_equal(&in, &out, sizeof in);
	/* unterminated strings given: cut to the field */
	memset(in.host, 'x', sizeof in.host);
	assert_int_equal(shmcfg_sync_set(f->h, &in), 0);
	assert_int_equal(shmcfg_sync_get(ro, &out), 0);
	assert_int_equal(strlen(out.host), sizeof out.host - 1);
	shmcfg_close(ro);
}

/* Someone with write access scribbles the record: readers still get
 * terminated strings; a writer that died mid-record (odd sequence) leaves no
 * stable record until the next one writes. */
static void test_sync_record_scribbled(void **state)
{
	struct fx *f = *state;
	shmcfg_sync_info in = {.pid = 1}, out;
	assert_int_equal(shmcfg_sync_set(f->h, &in), 0);
	struct seg_header *hd = f->h->hdr;
	memset(&hd->sync, 0xff, sizeof hd->sync);
	assert_int_equal(shmcfg_sync_get(f->h, &out), 0);
	assert_int_equal(strlen(out.endpoints), sizeof out.endpoints - 1);
	assert_int_equal(strlen(out.error), sizeof out.error - 1);
	hd->sync_seq |= 1; /* a writer died inside */
	assert_int_equal(shmcfg_sync_get(f->h, &out), -EAGAIN);
	in.applied_rev = 9;
	assert_int_equal(shmcfg_sync_set(f->h, &in), 0);
	assert_int_equal(shmcfg_sync_get(f->h, &out), 0);
	assert_int_equal(out.applied_rev, 9);
	assert_int_equal(out.pid, 1);
}

/* Values from JSON, by the rule of shmcfg_load(); checks without a
 * transaction, from a read-only handle. */
static void test_value_from_json_and_check(void **state)
{
	struct fx *f = *state;
	shmcfg *ro;
	assert_int_equal(shmcfg_attach(test_name("origin"), SHMCFG_ATTACH_RDONLY, NULL, &ro), 0);
	shmcfg_value v;
	assert_int_equal(shmcfg_value_from_json(ro, T_A, "42", 2, &v), 0);
	assert_int_equal(v.type, SHMCFG_INT);
	assert_int_equal(v.u.i, 42);
	assert_int_equal(shmcfg_value_check(ro, T_A, &v), 0);
	assert_int_equal(shmcfg_value_check(ro, T_ALIAS2, &v), 0); /* an alias: its final target */
	shmcfg_value_clear(&v);
	const char *s = "\"slow\"";
	assert_int_equal(shmcfg_value_from_json(ro, T_MODE, s, strlen(s), &v), 0);
	assert_int_equal(v.u.str.len, 4);
	assert_memory_equal(v.u.str.ptr, "slow", 4);
	assert_int_equal(shmcfg_value_check(ro, T_MODE, &v), 0);
	shmcfg_value_clear(&v);
	s = "\"medium\"";
	assert_int_equal(shmcfg_value_from_json(ro, T_MODE, s, strlen(s), &v), 0);
	assert_int_equal(shmcfg_value_check(ro, T_MODE, &v), SHMCFG_E_CHOICE);
	assert_non_null(strstr(shmcfg_errdetail(), "medium"));
	shmcfg_value_clear(&v);
	s = "[\"b\",\"a\"]";
	assert_int_equal(shmcfg_value_from_json(ro, T_TAGS, s, strlen(s), &v), 0);
	assert_int_equal(v.u.list.count, 2);
	shmcfg_value_clear(&v);
	assert_int_equal(shmcfg_value_from_json(ro, T_RATIO, "2", 1, &v), 0);
	assert_int_equal(shmcfg_value_check(ro, T_RATIO, &v), SHMCFG_E_RANGE);
	shmcfg_value_clear(&v);
	assert_int_equal(shmcfg_value_from_json(ro, T_A, "null", 4, &v), 0);
	assert_int_equal(shmcfg_value_check(ro, T_A, &v), SHMCFG_E_NULLVAL);
	shmcfg_value_clear(&v);
	assert_int_equal(shmcfg_value_from_json(ro, T_OPT_INT, "null", 4, &v), 0);
	assert_int_equal(shmcfg_value_check(ro, T_OPT_INT, &v), 0);
	shmcfg_value_clear(&v);
	/* errors name the option and the value */
	assert_int_equal(shmcfg_value_from_json(ro, T_A, "\"7\"", 3, &v), SHMCFG_E_TYPE);
	assert_non_null(strstr(shmcfg_errdetail(), "t.a"));
	assert_int_equal(shmcfg_value_from_json(ro, T_A, "{not json", 9, &v), SHMCFG_E_PARSE);
	assert_non_null(strstr(shmcfg_errdetail(), "t.a"));
	assert_int_equal(shmcfg_value_from_json(ro, T_A, "4 2", 3, &v), SHMCFG_E_PARSE);
	assert_int_equal(shmcfg_value_from_json(ro, T_A, "\xff", 1, &v), SHMCFG_E_PARSE);
	assert_int_equal(shmcfg_value_from_json(ro, T_COUNT + 5, "1", 1, &v), SHMCFG_E_NOOPT);
	shmcfg_value bad = {.type = SHMCFG_STR, .u.str = {"x", 1}};
	assert_int_equal(shmcfg_value_check(ro, T_A, &bad), SHMCFG_E_TYPE);
	assert_int_equal(shmcfg_value_check(ro, T_COUNT, &bad), SHMCFG_E_NOOPT);
	(void)f;
	shmcfg_close(ro);
}

/* Which knob values the agent wrote: a cluster commit's knob value is the
 * agent's, a local one (shmctl set --knob) takes it back, a reset leaves
 * nothing; the bit stays with the value across later commits of others. */
static void test_layer_by_cluster(void **state)
{
	struct fx *f = *state;
	shmcfg_snapshot *s;
	shmcfg_txn *t;
	uint64_t g;
	/* not set: no */
	assert_int_equal(shmcfg_snapshot_acquire(f->h, &s), 0);
	assert_int_equal(shmcfg_snapshot_layer_by_cluster(s, T_KNOBBED, SHMCFG_SRC_KNOB), 0);
	assert_int_equal(shmcfg_snapshot_layer_by_cluster(s, T_KNOBBED, SHMCFG_SRC_DEFAULT), SHMCFG_E_LAYER);
	assert_int_equal(shmcfg_snapshot_layer_by_cluster(s, 100000, SHMCFG_SRC_KNOB), SHMCFG_E_NOOPT);
	shmcfg_snapshot_release(s);
	/* the agent's commit: its knob and cluster values are its own */
	assert_int_equal(shmcfg_txn_begin(f->h, &t), 0);
	assert_int_equal(shmcfg_txn_origin(t, 12, "op"), 0);
	assert_int_equal(shmcfg_txn_layer(t, SHMCFG_SRC_KNOB), 0);
	assert_int_equal(shmcfg_txn_set_text(t, T_KNOBBED, "true"), 0);
	assert_int_equal(shmcfg_txn_layer(t, SHMCFG_SRC_CLUSTER), 0);
	assert_int_equal(shmcfg_txn_set_text(t, T_A, "4"), 0);
	assert_int_equal(shmcfg_txn_commit(t, &g), 0);
	/* someone else's commit of another option leaves them so */
	assert_int_equal(set_and_commit(f->h, T_B, "5", &g), 0);
	assert_int_equal(shmcfg_snapshot_acquire(f->h, &s), 0);
	assert_int_equal(shmcfg_snapshot_layer_by_cluster(s, T_KNOBBED, SHMCFG_SRC_KNOB), 1);
	assert_int_equal(shmcfg_snapshot_layer_by_cluster(s, T_A, SHMCFG_SRC_CLUSTER), 1);
	assert_int_equal(shmcfg_snapshot_layer_by_cluster(s, T_B, SHMCFG_SRC_USER), 0);
	shmcfg_snapshot_release(s);
	/* a local knob value of the same value takes it back */
	assert_int_equal(shmcfg_txn_begin(f->h, &t), 0);
	assert_int_equal(shmcfg_txn_layer(t, SHMCFG_SRC_KNOB), 0);
	assert_int_equal(shmcfg_txn_set_text(t, T_KNOBBED, "true"), 0);
	assert_int_equal(shmcfg_txn_commit(t, &g), 0);
	assert_true(g > 0);
	assert_int_equal(shmcfg_snapshot_acquire(f->h, &s), 0);
	assert_int_equal(shmcfg_snapshot_layer_by_cluster(s, T_KNOBBED, SHMCFG_SRC_KNOB), 0);
	shmcfg_value v;
	assert_int_equal(shmcfg_snapshot_layer(s, T_KNOBBED, SHMCFG_SRC_KNOB, &v), 0);
	assert_true(v.u.b);
	shmcfg_snapshot_release(s);
}

/* One agent per segment: a second claim (another handle, even of this
 * process) is refused and named from the record; a read-only handle sees
 * the claim and cannot take it; a holder killed with SIGKILL frees it. */
static void test_sync_claim(void **state)
{
	struct fx *f = *state;
	shmcfg *ro, *other;
	assert_int_equal(shmcfg_attach(test_name("origin"), SHMCFG_ATTACH_RDONLY, NULL, &ro), 0);
	assert_int_equal(shmcfg_attach(test_name("origin"), 0, NULL, &other), 0);
	assert_int_equal(shmcfg_sync_claimed(ro), 0);
	assert_int_equal(shmcfg_sync_claim(ro, 0), SHMCFG_E_READONLY);
	assert_int_equal(shmcfg_sync_claim(f->h, 0), 0);
	assert_int_equal(shmcfg_sync_claim(f->h, 0), 0); /* again: still ours */
	assert_int_equal(shmcfg_sync_claimed(f->h), 1);
	assert_int_equal(shmcfg_sync_claimed(ro), 1);
	shmcfg_sync_info in = {.pid = 4242};
	snprintf(in.cluster, sizeof in.cluster, "prod");
	snprintf(in.endpoints, sizeof in.endpoints, "unix:/run/etcd.sock");
	assert_int_equal(shmcfg_sync_set(f->h, &in), 0);
	assert_int_equal(shmcfg_sync_claim(other, 0), -EBUSY);
	assert_non_null(strstr(shmcfg_errdetail(), "pid 4242 (cluster 'prod', endpoints unix:/run/etcd.sock)"));
	shmcfg_close(f->h); /* the claim ends with its handle */
	f->h = NULL;
	assert_int_equal(shmcfg_sync_claimed(ro), 0);
	/* a holder that dies at once frees it */
	int pfd[2];
	char name[64];
	snprintf(name, sizeof name, "%s", test_name("origin")); /* the parent's pid in it */
	assert_int_equal(pipe(pfd), 0);
	pid_t pid = fork();
	if (pid == 0) {
		shmcfg *c;
		int r = shmcfg_attach(name, 0, NULL, &c);
		if (!r)
			r = shmcfg_sync_claim(c, 0);
		if (r)
			fprintf(stderr, "# child: %s: %s\n", shmcfg_strerror(r), shmcfg_errdetail());
		char ok = r == 0;
		(void)!write(pfd[1], &ok, 1);
		pause();
		_exit(0);
	}
	char ok = 0;
	assert_int_equal(read(pfd[0], &ok, 1), 1);
	if (!ok)
		kill(pid, SIGKILL);
	assert_true(ok);
	assert_int_equal(shmcfg_sync_claimed(ro), 1);
	assert_int_equal(shmcfg_sync_claim(other, 0), -EBUSY);
	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	assert_int_equal(shmcfg_sync_claim(other, 0), 0);
	assert_int_equal(shmcfg_sync_claimed(ro), 1);
	close(pfd[0]);
	close(pfd[1]);
	shmcfg_close(other);
	shmcfg_close(ro);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_origin_in_log_and_generation, setup, teardown),
		cmocka_unit_test_setup_teardown(test_origin_only_commit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_who_truncated_and_readonly, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sync_record, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sync_record_scribbled, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sync_claim, setup, teardown),
		cmocka_unit_test_setup_teardown(test_value_from_json_and_check, setup, teardown),
		cmocka_unit_test_setup_teardown(test_layer_by_cluster, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
