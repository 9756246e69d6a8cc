/* SPDX-License-Identifier: MIT */
/*
 * A segment replaced (shmctl resize, create --force) is followed by the
 * processes attached to it, by themselves (lib/segment/replace.c): inline reads,
 * the slow path, waits and commits of a process that only holds its old
 * handle; the values, layers (with who wrote them), history, cluster
 * revision and generations kept; a replacement of another schema followed
 * where the options still exist, refused at the next read of one that does
 * not, never read as stale values; threads that read inline
 * while the segment is replaced under them (also run under TSan).
 */
#include "config.h" /* _GNU_SOURCE: F_OFD_GETLK */

#include <errno.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>

#include "common.h"
#include "proc.h"
#include "layout.h" /* struct seg_header: a writer forges a successor's */

static uint64_t ms_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- a follower: another process, attached once, told what to do ---- */

/* no implicit padding: every byte written to the pipe is initialised (valgrind) */
struct msg {
	char op;       /* 'w' wait to read v inline, 's' slow read, 'c' commit v, 'g' wait after v, 'q' quit */
	char pad[7];
	int64_t v;
};
struct reply {
	int r;         /* 0 or the error */
	int pad;
	int64_t v;     /* the value read, the generation */
};

struct follower {
	pid_t pid;
	int to, from;
};

/* What a generated accessor of an int option reads: the accessors' copy,
 * else the slots, else the slow path (INT64_MIN: its default, on error). */
static int64_t accessor_int(const shmcfg *h, shmcfg_opt o)
{
	uint64_t bits;
	return shmcfg__read_proven(h, o, &bits) ? (int64_t)bits : shmcfg__proven_slow_int(h, o, INT64_MIN);
}

/* The accessors' fast path alone: o's block at the handle's SHMCFG__COPY_AT,
 * true with its word if the block is even (not frozen, not being written).
 * A handle that followed a replacement into the same schema reads the
 * successor's copy there; the replaced one's stays odd since its freeze. */
static bool copy_fast(const shmcfg *h, shmcfg_opt o, int64_t *v)
{
	/* 0.11's accessors load the view's `copy`: it names the same pages */
	assert_ptr_equal(((const struct shmcfg_view *)h)->copy, (const char *)h + SHMCFG__COPY_AT);
	const uint64_t *blk = (const uint64_t *)((const char *)h + SHMCFG__COPY_AT) + (o / SHMCFG__COPY_PER_BLOCK) * 8;
	uint64_t q = __atomic_load_n(&blk[0], __ATOMIC_ACQUIRE);
	*v = (int64_t)__atomic_load_n(&blk[1 + o % SHMCFG__COPY_PER_BLOCK], __ATOMIC_RELAXED);
	return !(q & 1);
}

static void serve(const char *name, int in, int out)
{
	shmcfg *ro, *rw;
	struct reply rp = {0};
	rp.r = shmcfg_attach(name, SHMCFG_ATTACH_RDONLY, NULL, &ro);
	if (!rp.r)
		rp.r = shmcfg_attach(name, 0, NULL, &rw);
	(void)!write(out, &rp, sizeof rp);
	if (rp.r)
		_exit(1);
	struct msg m;
	while (read(in, &m, sizeof m) == (ssize_t)sizeof m && m.op != 'q') {
		rp = (struct reply){0};
		uint64_t until = ms_now() + 10000;
		switch (m.op) {
		case 'w': /* nothing but inline reads: no call that could follow by itself */
			do
				rp.r = shmcfg_get_int(ro, T_A, &rp.v);
			while (!rp.r && rp.v != m.v && ms_now() < until);
			break;
		case 'a': /* nothing but a generated accessor's read: the accessors'
			   * copy, the slots, its slow path (which follows) */
			do
				rp.v = accessor_int(ro, T_A);
			while (rp.v != m.v && ms_now() < until);
			break;
		case 's': {
			shmcfg_value v;
			if (!(rp.r = shmcfg_get(ro, T_A, &v)))
				rp.v = v.u.i;
			break;
		}
		case 'c': {
			uint64_t g = 0;
			rp.r = commit_int(rw, T_A, m.v, &g);
			rp.v = (int64_t)g;
			break;
		}
		case 'g': {
			uint64_t g = 0;
			rp.r = shmcfg_wait(ro, (uint64_t)m.v, 10000, &g);
			rp.v = (int64_t)g;
			break;
		}
		}
		(void)!write(out, &rp, sizeof rp);
	}
	_exit(0);
}

static struct follower start_follower(const char *name)
{
	int a[2], b[2];
	assert_int_equal(pipe(a), 0);
	assert_int_equal(pipe(b), 0);
	struct follower f = {.pid = fork()};
	assert_true(f.pid >= 0);
	if (f.pid == 0) {
		close(a[1]);
		close(b[0]);
		serve(name, a[0], b[1]);
	}
	close(a[0]);
	close(b[1]);
	f.to = a[1];
	f.from = b[0];
	struct reply rp;
	assert_int_equal(read(f.from, &rp, sizeof rp), (ssize_t)sizeof rp);
	assert_int_equal(rp.r, 0);
	return f;
}

static struct reply ask(struct follower *f, char op, int64_t v)
{
	struct msg m = {.op = op, .v = v};
	struct reply rp = {.r = -EPIPE};
	assert_int_equal(write(f->to, &m, sizeof m), (ssize_t)sizeof m);
	assert_int_equal(read(f->from, &rp, sizeof rp), (ssize_t)sizeof rp);
	return rp;
}

static void stop_follower(struct follower *f)
{
	struct msg m = {.op = 'q'};
	(void)!write(f->to, &m, sizeof m);
	int st;
	assert_int_equal(waitpid(f->pid, &st, 0), f->pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(f->to);
	close(f->from);
}

/* A layer written as the cluster agent writes it. */
static void cluster_set(shmcfg *h, shmcfg_opt o, shmcfg_source layer, const char *text, uint64_t rev)
{
	shmcfg_txn *t;
	assert_int_equal(shmcfg_txn_begin(h, &t), 0);
	assert_int_equal(shmcfg_txn_layer(t, layer), 0);
	assert_int_equal(shmcfg_txn_origin(t, rev, "agent@h1"), 0);
	assert_int_equal(shmcfg_txn_set_text(t, o, text), 0);
	assert_int_equal(shmcfg_txn_commit(t, NULL), 0);
}

static void assert_layers_kept(shmcfg *h)
{
	shmcfg_snapshot *s;
	shmcfg_value v;
	assert_int_equal(shmcfg_snapshot_acquire(h, &s), 0);
	assert_int_equal(shmcfg_snapshot_layer(s, T_B, SHMCFG_SRC_CLUSTER, &v), 0);
	assert_int_equal(v.u.i, 5);
	assert_int_equal(shmcfg_snapshot_layer_by_cluster(s, T_B, SHMCFG_SRC_CLUSTER), 1);
	assert_int_equal(shmcfg_snapshot_layer(s, T_KNOBBED, SHMCFG_SRC_KNOB, &v), 0);
	assert_true(v.u.b);
	assert_int_equal(shmcfg_snapshot_layer_by_cluster(s, T_KNOBBED, SHMCFG_SRC_KNOB), 1);
	assert_int_equal(shmcfg_snapshot_layer(s, T_A, SHMCFG_SRC_USER, &v), 0); /* a local value */
	assert_int_equal(shmcfg_snapshot_layer_by_cluster(s, T_A, SHMCFG_SRC_USER), 0);
	assert_int_equal(shmcfg_snapshot_cluster_revision(s), 41);
	shmcfg_snapshot_release(s);
}

static void test_follow_resize_and_force(void **state)
{
	(void)state;
	const char *name = test_name("replace");
	shmcfg *h = test_create(name, NULL);
	uint64_t g;
	assert_int_equal(commit_int(h, T_A, 1, &g), 0);
	cluster_set(h, T_B, SHMCFG_SRC_CLUSTER, "5", 41);
	cluster_set(h, T_KNOBBED, SHMCFG_SRC_KNOB, "true", 41);
	g = shmcfg_generation(h);
	struct follower f = start_follower(name);
	struct reply rp = ask(&f, 'w', 1);
	assert_int_equal(rp.r, 0);
	assert_int_equal(rp.v, 1);

	/* a resize: the same values, layers, history; generations go on */
	shmcfg *h2;
	shmcfg_create_opts o = {.heap_bytes = 1 << 20, .slots = 4};
	assert_int_equal(shmcfg_resize(name, &o, &h2), 0);
	assert_true(shmcfg_retired(h));
	assert_int_equal(shmcfg_generation(h2), g + 1);
	assert_int_equal(get_i(h2, T_A), 1);
	assert_layers_kept(h2);
	shmcfg_history_entry *e;
	assert_int_equal(shmcfg_history_get(h2, 2, &e), 0); /* A's commit */
	assert_int_equal(e->nchanges, 1);
	assert_int_equal(e->changes[0].opt, T_A);
	shmcfg_history_free(e);
	shmcfg_info info;
	assert_int_equal(shmcfg_stat(h2, &info), 0);
	assert_int_equal(info.nslots, 4);
	assert_int_equal(info.heap_bytes, 1 << 20);
	/* the old handle follows: its calls work on the new segment */
	assert_int_equal(get_i(h, T_A), 1);
	assert_int_equal(commit_int(h2, T_A, 7, &g), 0);
	assert_int_equal(get_i(h, T_A), 7); /* inline, on the old handle */
	int64_t cv;
	assert_true(copy_fast(h, T_A, &cv)); /* its accessors: the new segment's copy, mapped over the old */
	assert_int_equal(cv, 7);

	/* the follower, reading by its accessor only, then inline only, sees
	 * the new segment's values (the old one's copy went odd at the freeze) */
	rp = ask(&f, 'a', 7);
	assert_int_equal(rp.v, 7);
	rp = ask(&f, 'w', 7);
	assert_int_equal(rp.r, 0);
	assert_int_equal(rp.v, 7);
	/* its commit through its old read-write handle lands in the new one */
	rp = ask(&f, 'c', 9);
	assert_int_equal(rp.r, 0);
	assert_int_equal(get_i(h2, T_A), 9);
	assert_int_equal(shmcfg_generation(h2), (uint64_t)rp.v);

	/* create --force, keeping: the same again */
	shmcfg *h3;
	shmcfg_schema *s = test_schema();
	o = (shmcfg_create_opts){.flags = SHMCFG_CREATE_FORCE | SHMCFG_CREATE_KEEP | SHMCFG_CREATE_NO_ENV};
	assert_int_equal(shmcfg_create(name, s, &o, &h3), 0);
	assert_int_equal(shmcfg_generation(h3), (uint64_t)rp.v + 1);
	assert_int_equal(get_i(h3, T_A), 9);
	assert_layers_kept(h3);
	assert_int_equal(commit_int(h3, T_A, 11, NULL), 0);
	rp = ask(&f, 'a', 11);
	assert_int_equal(rp.v, 11);
	rp = ask(&f, 'w', 11);
	assert_int_equal(rp.v, 11);
	rp = ask(&f, 's', 0); /* the slow path */
	assert_int_equal(rp.r, 0);
	assert_int_equal(rp.v, 11);

	/* a wait across a replacement: woken by it, on the new generation */
	uint64_t g3 = shmcfg_generation(h3);
	struct msg m = {.op = 'g', .v = (int64_t)g3};
	assert_int_equal(write(f.to, &m, sizeof m), (ssize_t)sizeof m);
	shmcfg *h4;
	o = (shmcfg_create_opts){.history = 50};
	assert_int_equal(shmcfg_resize(name, &o, &h4), 0);
	assert_int_equal(read(f.from, &rp, sizeof rp), (ssize_t)sizeof rp);
	assert_int_equal(rp.r, 0);
	assert_int_equal(rp.v, g3 + 1);

	/* without KEEP: the defaults, followed all the same */
	shmcfg *h5;
	o = (shmcfg_create_opts){.flags = SHMCFG_CREATE_FORCE | SHMCFG_CREATE_NO_ENV};
	assert_int_equal(shmcfg_create(name, s, &o, &h5), 0);
	assert_int_equal(shmcfg_generation(h5), g3 + 2);
	assert_int_equal(get_i(h5, T_A), 0);
	rp = ask(&f, 'w', 0);
	assert_int_equal(rp.r, 0);
	assert_int_equal(rp.v, 0);

	/* another schema: the next read fails, naming why; never the old value */
	shmcfg_schema *other;
	assert_int_equal(shmcfg_schema_new(&other), 0);
	assert_int_equal(shmcfg_schema_add(other, &(shmcfg_optdef){.name = "x.only", .type = SHMCFG_INT, .def = "3"}), 0);
	shmcfg *h6;
	assert_int_equal(shmcfg_create(name, other, &o, &h6), 0);
	rp = ask(&f, 'w', 0);
	assert_int_equal(rp.r, SHMCFG_E_SCHEMA);
	rp = ask(&f, 's', 0);
	assert_int_equal(rp.r, SHMCFG_E_SCHEMA);
	rp = ask(&f, 'c', 1);
	assert_int_equal(rp.r, SHMCFG_E_SCHEMA);
	int64_t v;
	assert_int_equal(shmcfg_get_int(h, T_A, &v), SHMCFG_E_SCHEMA);
	assert_non_null(strstr(shmcfg_errdetail(), "replaced by one of another schema"));
	assert_int_equal(shmcfg_reattach(&h), 0); /* the program's move: the new schema */
	assert_int_equal(shmcfg_count(h), 1);
	stop_follower(&f);
	shmcfg_schema_free(other);
	shmcfg_schema_free(s);
	shmcfg_close(h6);
	shmcfg_close(h5);
	shmcfg_close(h4);
	shmcfg_close(h3);
	shmcfg_close(h2);
	shmcfg_close(h);
	shmcfg_unlink(name);
}

/* A schema of the options given as {name, type, default} (NULL-ended). */
static shmcfg_schema *schema_of(const shmcfg_optdef *defs)
{
	shmcfg_schema *s;
	assert_int_equal(shmcfg_schema_new(&s), 0);
	for (; defs->name; defs++)
		assert_int_equal(shmcfg_schema_add(s, defs), 0);
	return s;
}

/*
 * Copies made through a handle that followed a replacement into another
 * schema (a snapshot, a generation of the history) map the caller's
 * options through that handle: its close waits for their release, and one
 * released before the close leaves nothing to wait for.
 */
static void test_mapped_copies_outlive_close(void **state)
{
	(void)state;
	const char *name = test_name("remapcopy");
	shmcfg_schema *sx = schema_of((const shmcfg_optdef[]){{.name = "a.keep", .type = SHMCFG_INT, .def = "1"},
							       {0}});
	shmcfg_schema *sy = schema_of((const shmcfg_optdef[]){{.name = "b.new", .type = SHMCFG_BOOL},
							       {.name = "a.keep", .type = SHMCFG_INT, .def = "10"},
							       {0}});
	shmcfg_create_opts o = {.flags = SHMCFG_CREATE_NO_ENV};
	shmcfg *hx, *h, *hy;
	assert_int_equal(shmcfg_create(name, sx, &o, &hx), 0);
	shmcfg_close(hx);
	assert_int_equal(shmcfg_attach(name, 0, NULL, &h), 0);
	shmcfg_opt keep = opt_named(h, "a.keep");
	assert_int_equal(commit_int(h, keep, 5, NULL), 0);
	o.flags |= SHMCFG_CREATE_FORCE;
	assert_int_equal(shmcfg_create(name, sy, &o, &hy), 0);
	shmcfg_opt ykeep = opt_named(hy, "a.keep");
	uint64_t g1;
	assert_int_equal(commit_int(hy, ykeep, 42, &g1), 0);
	assert_int_equal(commit_int(hy, ykeep, 43, NULL), 0);
	assert_int_equal(get_i(h, keep), 43); /* h follows */

	shmcfg_snapshot *at, *cur, *gone;
	assert_int_equal(shmcfg_snapshot_at(h, g1, &gone), 0);
	shmcfg_snapshot_release(gone); /* released before the close: nothing to wait for */
	assert_int_equal(shmcfg_snapshot_at(h, g1, &at), 0);
	assert_int_equal(shmcfg_snapshot_acquire(h, &cur), 0);
	int mapped = maps_of(name);
	assert_true(mapped > 0);
	shmcfg_close(h);
	assert_int_equal(maps_of(name), mapped); /* h and its successor wait */
	int64_t v = 0;
	assert_int_equal(shmcfg_snapshot_get_int(at, keep, &v), 0);
	assert_int_equal(v, 42);
	assert_int_equal(shmcfg_snapshot_get_int(cur, keep, &v), 0);
	assert_int_equal(v, 43);
	shmcfg_snapshot_release(at);
	assert_int_equal(maps_of(name), mapped);
	shmcfg_snapshot_release(cur);
	if (maps_of(name) >= mapped)
		fail_msg("the close never ended: %d mappings of %s after the last release (%d before)", maps_of(name),
			 name, mapped);
	shmcfg_close(hy);
	assert_int_equal(maps_of(name), 0);
	shmcfg_schema_free(sx);
	shmcfg_schema_free(sy);
	shmcfg_unlink(name);
}

/*
 * A replacement of another schema (create --force with a new schema) is
 * followed: the handle keeps its own schema and option handles, and its
 * reads (inline ones through the slow path), snapshots, transactions and
 * change lists reach the new segment's options of the same name and type;
 * an option the new schema lacks, or has with another type, fails naming
 * it, never with the old value. A handle attached for one schema hash, or
 * a transaction begun before the replacement, does not follow.
 */
static void test_follow_another_schema(void **state)
{
	(void)state;
	const char *name = test_name("reschema");
	shmcfg_schema *sx = schema_of((const shmcfg_optdef[]){{.name = "a.keep", .type = SHMCFG_INT, .def = "1"},
							       {.name = "a.gone", .type = SHMCFG_INT, .def = "2"},
							       {.name = "a.retyped", .type = SHMCFG_INT, .def = "3"},
							       {.name = "a.text", .type = SHMCFG_STR, .def = "x"},
							       {0}});
	/* another order, more options (a change list sized by the old count
	 * must not overflow), one gone, one of another type */
	shmcfg_schema *sy = schema_of((const shmcfg_optdef[]){{.name = "b.new", .type = SHMCFG_BOOL},
							       {.name = "a.text", .type = SHMCFG_STR, .def = "y"},
							       {.name = "a.retyped", .type = SHMCFG_STR, .def = "s"},
							       {.name = "b.more", .type = SHMCFG_INT},
							       {.name = "b.most", .type = SHMCFG_INT},
							       {.name = "a.keep", .type = SHMCFG_INT, .def = "10"},
							       {0}});
	shmcfg_create_opts o = {.flags = SHMCFG_CREATE_NO_ENV};
	shmcfg *hx, *h, *pinned, *hy;
	assert_int_equal(shmcfg_create(name, sx, &o, &hx), 0);
	assert_int_equal(shmcfg_attach(name, 0, NULL, &h), 0);
	uint8_t hash[16];
	shmcfg_schema_hash(h, hash);
	assert_int_equal(shmcfg_attach(name, 0, hash, &pinned), 0);
	shmcfg_opt keep = opt_named(h, "a.keep"), gone = opt_named(h, "a.gone"), retyped = opt_named(h, "a.retyped"),
		   text = opt_named(h, "a.text");
	assert_int_equal(commit_int(h, keep, 5, NULL), 0);
	assert_int_equal(get_i(h, keep), 5);
	shmcfg_txn *early;
	assert_int_equal(shmcfg_txn_begin(h, &early), 0);
	assert_int_equal(shmcfg_txn_set_int(early, keep, 6), 0);

	o.flags |= SHMCFG_CREATE_FORCE;
	assert_int_equal(shmcfg_create(name, sy, &o, &hy), 0);
	shmcfg_opt ykeep = opt_named(hy, "a.keep");
	uint64_t g0 = shmcfg_generation(hy), g1;
	assert_int_equal(commit_int(hy, ykeep, 42, &g1), 0);

	/* reads: inline (the slow path maps), the new generation; a generated
	 * accessor's too, never the new schema's option of the same index
	 * from the new segment's copy (a.keep is b.new's index there) */
	int64_t v;
	assert_int_equal(shmcfg_get_int(h, keep, &v), 0);
	assert_int_equal(v, 42);
	assert_int_equal(accessor_int(h, keep), 42);
	assert_int_equal(accessor_int(h, gone), INT64_MIN); /* its slow path's SHMCFG_E_SCHEMA */
	assert_int_equal(shmcfg_generation(h), g1);
	shmcfg_value sv;
	assert_int_equal(shmcfg_get(h, text, &sv), 0);
	assert_string_equal(sv.u.str.ptr, "y");
	shmcfg_value_clear(&sv);
	assert_int_equal(shmcfg_get_int(h, gone, &v), SHMCFG_E_SCHEMA);
	assert_non_null(strstr(shmcfg_errdetail(), "replaced by one of another schema, without option a.gone"));
	/* several at once, of one generation (what generated headers call) */
	shmcfg_opt two[2] = {keep, keep};
	const shmcfg_type ints[2] = {SHMCFG_INT, SHMCFG_INT};
	uint64_t bits[2], gen;
	bool nulls[2];
	assert_int_equal(shmcfg__get_slow_n(h, 2, two, ints, bits, nulls, &gen), 0);
	assert_true(bits[0] == 42 && bits[1] == 42 && gen == g1);
	two[1] = gone;
	assert_int_equal(shmcfg__get_slow_n(h, 2, two, ints, bits, nulls, &gen), SHMCFG_E_SCHEMA);
	assert_int_equal(shmcfg_get_int(h, retyped, &v), SHMCFG_E_SCHEMA);
	assert_non_null(strstr(shmcfg_errdetail(), "a.retyped"));
	/* the handle keeps its schema */
	assert_int_equal(shmcfg_count(h), 4);
	assert_int_equal(opt_named(h, "a.keep"), keep);
	shmcfg_opt none;
	assert_int_equal(shmcfg_lookup(h, "b.new", &none), SHMCFG_E_NOOPT);

	/* a snapshot, and a change list of the handle's own count */
	shmcfg_snapshot *sn;
	assert_int_equal(shmcfg_snapshot_acquire(h, &sn), 0);
	assert_int_equal(shmcfg_snapshot_get(sn, keep, &sv), 0);
	assert_int_equal(sv.u.i, 42);
	assert_int_equal(shmcfg_snapshot_get(sn, gone, &sv), SHMCFG_E_SCHEMA);
	/* the typed getters map too: `text` is the caller's id of a.text, and
	 * in the new schema that id is b.more, an int that must not be read */
	v = 0;
	assert_int_equal(shmcfg_snapshot_get_int(sn, keep, &v), 0);
	assert_int_equal(v, 42);
	assert_int_equal(shmcfg_snapshot_get_int(sn, text, &v), SHMCFG_E_TYPE);
	assert_int_equal(shmcfg_snapshot_get_int(sn, gone, &v), SHMCFG_E_SCHEMA);
	assert_int_equal(shmcfg_snapshot_is_default(sn, keep), 0);
	shmcfg_snapshot_release(sn);
	bool *changed = calloc(shmcfg_count(h), sizeof *changed);
	assert_non_null(changed);
	/* the options the new schema lacks count as changed: a re-read says why */
	assert_int_equal(shmcfg_changes(h, g0, g1, changed), 3);
	assert_true(changed[keep] && changed[gone] && changed[retyped] && !changed[text]);
	free(changed);
	shmcfg_commit ci;
	assert_int_equal(shmcfg_commit_info(h, g1, &ci), 0);
	assert_int_equal(ci.nids, 1);
	assert_int_equal(ci.ids[0], keep);
	shmcfg_history_entry *he;
	assert_int_equal(shmcfg_history_get(h, g1, &he), 0);
	assert_true(he->nchanges == 1 && he->changes[0].opt == keep);
	shmcfg_history_free(he);
	assert_int_equal(shmcfg_is_default(h, keep), 0);
	assert_int_equal(shmcfg_is_default(h, gone), SHMCFG_E_SCHEMA);
	/* a load names the segment's options as a dump does: by name, once */
	shmcfg_txn *lt;
	assert_int_equal(shmcfg_txn_begin(h, &lt), 0);
	assert_int_equal(shmcfg_txn_load(lt, "{\"a.keep\": 11}", 14, 0, NULL, NULL), 0);
	assert_int_equal(shmcfg_txn_commit(lt, NULL), 0);
	assert_int_equal(get_i(hy, ykeep), 11);
	char *dump;
	assert_int_equal(shmcfg_dump(h, 0, &dump), 0);
	assert_int_equal(shmcfg_load_ex(h, dump, strlen(dump), SHMCFG_LOAD_STRICT, NULL, NULL, NULL, NULL), 0);
	free(dump);

	/* transactions begun now map too; one begun before does not follow */
	assert_int_equal(commit_int(h, keep, 7, NULL), 0);
	assert_int_equal(get_i(hy, ykeep), 7);
	shmcfg_txn *t;
	assert_int_equal(shmcfg_txn_begin(h, &t), 0);
	assert_int_equal(shmcfg_txn_set_int(t, gone, 1), SHMCFG_E_SCHEMA);
	shmcfg_txn_abort(t);
	assert_int_equal(shmcfg_txn_commit(early, NULL), SHMCFG_E_SCHEMA);
	assert_non_null(strstr(shmcfg_errdetail(), "during the transaction"));
	assert_int_equal(get_i(hy, ykeep), 7);

	/* attached for one schema: not followed, said; create-or-attach's
	 * handle is checked once, then follows as the creator's does */
	assert_int_equal(shmcfg_get_int(pinned, keep, &v), SHMCFG_E_SCHEMA);
	assert_non_null(strstr(shmcfg_errdetail(), "replaced by one of another schema"));
	/* ... by its accessors too: the slow path's error, never a word read
	 * from the view's private fields */
	assert_int_equal(accessor_int(pinned, keep), INT64_MIN);
	shmcfg *rank;
	shmcfg_create_opts eo = {.flags = SHMCFG_CREATE_EXIST_OK | SHMCFG_CREATE_NO_ENV};
	assert_int_equal(shmcfg_create(name, sy, &eo, &rank), 0);

	/* then a schema where a.keep was renamed (its old name an alias), then
	 * the first schema again: the maps go from the program's schema to the
	 * live one's, whatever came between */
	shmcfg_schema *sz = schema_of((const shmcfg_optdef[]){{.name = "c.kept", .type = SHMCFG_INT, .def = "20"},
							       {.name = "a.keep", .type = SHMCFG_INT, .alias = "c.kept"},
							       {.name = "b.new", .type = SHMCFG_INT},
							       {0}});
	shmcfg *hz, *hx2;
	assert_int_equal(shmcfg_create(name, sz, &o, &hz), 0);
	assert_int_equal(commit_int(h, keep, 21, NULL), 0);
	assert_int_equal(get_i(hz, opt_named(hz, "c.kept")), 21);
	assert_int_equal(shmcfg_is_default(h, keep), 0);
	assert_int_equal(get_i(rank, opt_named(rank, "a.keep")), 21); /* the rank's handle followed */
	assert_int_equal(shmcfg_create(name, sx, &o, &hx2), 0);
	assert_int_equal(get_i(h, gone), 2); /* the first schema's again: all of it */
	assert_int_equal(commit_int(hx2, gone, 3, NULL), 0);
	assert_int_equal(get_i(h, gone), 3);
	assert_int_equal(accessor_int(h, gone), 3); /* unmapped again: the copy's fast path */
	int64_t cv;
	assert_true(copy_fast(h, gone, &cv));
	assert_int_equal(cv, 3);
	shmcfg_close(hx2);
	shmcfg_close(hz);
	shmcfg_close(rank);
	shmcfg_schema_free(sz);
	assert_int_equal(shmcfg_reattach(&pinned), 0); /* the program's move to the schema now */
	assert_int_equal(get_i(pinned, gone), 3);
	shmcfg_close(pinned);
	shmcfg_close(h);
	shmcfg_close(hy);
	shmcfg_close(hx);
	shmcfg_schema_free(sx);
	shmcfg_schema_free(sy);
	shmcfg_unlink(name);
}

/* A resize whose heap cannot hold the values fails, and changes nothing. */
static void test_resize_too_small(void **state)
{
	(void)state;
	const char *name = test_name("small");
	shmcfg *h = test_create(name, NULL);
	char big[3000];
	memset(big, 'x', sizeof big - 1);
	big[sizeof big - 1] = 0;
	assert_int_equal(commit_str(h, T_C, big, NULL), 0);
	uint64_t g = shmcfg_generation(h);
	shmcfg *n = NULL;
	assert_int_equal(shmcfg_resize(name, &(shmcfg_create_opts){.heap_bytes = 2048}, &n), SHMCFG_E_FULL);
	assert_null(n);
	assert_false(shmcfg_retired(h));
	assert_int_equal(shmcfg_generation(h), g);
	assert_int_equal(commit_int(h, T_A, 3, NULL), 0); /* still the live segment */
	assert_int_equal(shmcfg_resize(name, &(shmcfg_create_opts){.flags = 1}, &n), -EINVAL);
	assert_int_equal(shmcfg_resize("test-nosuch-segment", NULL, &n), -ENOENT);
	/* an object there that is no segment: its attach error, not "none" */
	char junk[64], jpath[100];
	snprintf(junk, sizeof junk, "%s-junk", name);
	snprintf(jpath, sizeof jpath, "/dev/shm/shmcfg.%s", junk);
	FILE *jf = fopen(jpath, "w");
	assert_non_null(jf);
	fputs("not a segment", jf);
	fclose(jf);
	int jr = shmcfg_resize(junk, NULL, &n);
	assert_int_not_equal(jr, -ENOENT);
	assert_null(strstr(shmcfg_errdetail(), "no segment of that name"));
	unlink(jpath);
	shmcfg_close(h);
	shmcfg_unlink(name);
	/* nothing left behind: no temporary object, no lock object */
	char cmd[200];
	snprintf(cmd, sizeof cmd, "ls /dev/shm | grep -q -e '%s'", name);
	assert_int_not_equal(system(cmd), 0);
}

/* A commit that does not fit the value heap grows the segment (a resize
 * to twice the heap) and lands in the new incarnation; its readers follow. */
static void test_heap_grows(void **state)
{
	(void)state;
	const char *name = test_name("grow");
	shmcfg *h = test_create(name, &(shmcfg_create_opts){.heap_bytes = 4096});
	struct follower f = start_follower(name);
	char big[6000];
	memset(big, 'y', sizeof big - 1);
	big[sizeof big - 1] = 0;
	uint64_t g0 = shmcfg_generation(h), g;
	assert_int_equal(commit_str(h, T_C, big, &g), 0);
	assert_true(shmcfg_retired(h)); /* the one attached was replaced */
	assert_int_equal(g, g0 + 2);    /* the resize's generation, then the commit's */
	shmcfg_info info;
	assert_int_equal(shmcfg_stat(h, &info), 0); /* of the live incarnation */
	assert_true(info.heap_bytes >= 8192);
	shmcfg_value v;
	assert_int_equal(shmcfg_get(h, T_C, &v), 0);
	assert_int_equal(v.u.str.len, sizeof big - 1);
	shmcfg_value_clear(&v);
	assert_int_equal(commit_int(h, T_A, 5, NULL), 0);
	struct reply rp = ask(&f, 'w', 5);
	assert_int_equal(rp.r, 0);
	stop_follower(&f);
	shmcfg_close(h);
	shmcfg_unlink(name);
}

/* Only a segment's own successor is followed: one replaced, its successor
 * removed and another created under the name is not (that one has another
 * lineage), as for a removal: the handle keeps its last values. */
static void test_not_followed_into_another_lineage(void **state)
{
	(void)state;
	const char *name = test_name("lineage");
	shmcfg *h = test_create(name, NULL);
	assert_int_equal(commit_int(h, T_A, 4, NULL), 0);
	shmcfg *b;
	assert_int_equal(shmcfg_resize(name, &(shmcfg_create_opts){.slots = 3}, &b), 0); /* h has not read since */
	shmcfg_close(b);
	assert_int_equal(shmcfg_unlink(name), 0);
	shmcfg *c = test_create(name, NULL);
	for (int i = 0; i < 20; i++) /* its generations past h's */
		assert_int_equal(commit_int(c, T_A, 50 + i, NULL), 0);
	assert_int_equal(get_i(h, T_A), 4);
	shmcfg_value v;
	assert_int_equal(shmcfg_get(h, T_A, &v), 0);
	assert_int_equal(v.u.i, 4);
	assert_int_equal(shmcfg_reattach(&h), 0); /* the program's move */
	assert_int_equal(get_i(h, T_A), 69);
	shmcfg_close(c);
	shmcfg_close(h);
	shmcfg_unlink(name);
}

/* A replacer killed between its freeze and its rename: readers still read
 * the last values, the next writer finds the segment still at its name and
 * thaws it (its commit lands), `shmctl create --force` still replaces it,
 * and a removal of the frozen segment leaves its readers their values. */
static void test_replacer_killed_after_freeze(void **state)
{
	(void)state;
	const char *name = test_name("frozen");
	shmcfg *h = test_create(name, NULL);
	assert_int_equal(commit_int(h, T_A, 6, NULL), 0);
	for (int round = 0; round < 2; round++) {
		pid_t pid = fork();
		if (pid == 0) {
			setenv("SHMCFG_FAULT", "replace.frozen", 1);
			shmcfg *n;
			if (shmcfg_resize(name, &(shmcfg_create_opts){.slots = 4}, &n) == 0)
				_exit(1); /* not reached */
			_exit(0); /* not reached */
		}
		int st;
		assert_int_equal(waitpid(pid, &st, 0), pid);
		assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
		assert_int_equal(get_i(h, T_A), 6 + round); /* frozen: its last values */
		if (round == 0) {
			assert_int_equal(commit_int(h, T_A, 7, NULL), 0); /* thawed by the writer */
			assert_int_equal(get_i(h, T_A), 7);
		}
	}
	shmcfg *r; /* frozen again: replaced, followed */
	shmcfg_schema *s = test_schema();
	assert_int_equal(shmcfg_create(name, s, &(shmcfg_create_opts){.flags = SHMCFG_CREATE_FORCE | SHMCFG_CREATE_KEEP |
										SHMCFG_CREATE_NO_ENV}, &r), 0);
	shmcfg_schema_free(s);
	assert_int_equal(get_i(r, T_A), 7);
	assert_int_equal(commit_int(r, T_A, 8, NULL), 0);
	uint64_t until = ms_now() + 5000; /* a follow that failed is tried again a few ms later */
	while (get_i(h, T_A) != 8 && ms_now() < until)
		usleep(1000);
	assert_int_equal(get_i(h, T_A), 8);
	/* frozen, then removed: its readers keep its values, no error */
	pid_t pid = fork();
	if (pid == 0) {
		setenv("SHMCFG_FAULT", "replace.frozen", 1);
		shmcfg *n;
		if (shmcfg_resize(name, NULL, &n) == 0)
			_exit(1); /* not reached */
		_exit(0);
	}
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	assert_int_equal(shmcfg_unlink(name), 0);
	assert_int_equal(get_i(h, T_A), 8);
	assert_int_equal(get_i(r, T_A), 8);
	shmcfg_close(r);
	shmcfg_close(h);
	/* what the killed replacers left (their new objects, their lock
	 * objects, the removed segment's) goes with gc (shmctl gc), and nothing
	 * else: a replacement under way is never taken */
	assert_true(shmcfg_orphans(name, SHMCFG_ORPHANS_REMOVE, NULL, NULL) >= 3);
	char cmd[300];
	snprintf(cmd, sizeof cmd, "ls /dev/shm | grep -q -e 'shmcfg-new.%s\\.' -e 'shmcfg-lock.%s\\.'", name, name);
	assert_int_not_equal(system(cmd), 0);
}

/* A child resizing segment name to 5 slots, stopped at a fault point
 * ("replace.frozen:stop": between its freeze and its rename): its pid. */
static pid_t stopped_resizer(const char *name, const char *fault)
{
	pid_t pid = fork();
	if (pid == 0) {
		setenv("SHMCFG_FAULT", fault, 1);
		shmcfg *n;
		_exit(shmcfg_resize(name, &(shmcfg_create_opts){.slots = 5}, &n) == 0 ? 0 : 1);
	}
	int st;
	assert_int_equal(waitpid(pid, &st, WUNTRACED), pid);
	assert_true(WIFSTOPPED(st));
	return pid;
}

/* ... continued: it completed, and h follows it (then closed, the segment
 * removed). */
static void resize_completed(shmcfg *h, const char *name, pid_t pid)
{
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_int_equal(commit_int(h, T_A, 4, NULL), 0); /* lands in the new one */
	shmcfg_info info;
	assert_int_equal(shmcfg_stat(h, &info), 0);
	assert_int_equal(info.nslots, 5);
	shmcfg_close(h);
	shmcfg_unlink(name);
}

/* The path of the new object a replacement of segment name is building
 * (/dev/shm/shmcfg-new.NAME.RANDOM): false if there is none. */
static bool new_object_path(const char *name, char *path, size_t len)
{
	char cmd[400], tmp[300] = "";
	snprintf(cmd, sizeof cmd, "ls /dev/shm | grep -e '^shmcfg-new.%s\\.'", name);
	FILE *p = popen(cmd, "r");
	bool found = p && fgets(tmp, sizeof tmp, p);
	if (p)
		pclose(p);
	tmp[strcspn(tmp, "\n")] = 0;
	snprintf(path, len, "/dev/shm/%s", tmp);
	return found;
}

static int reader_open_main(void *arg)
{
	CHECK(setgroups(0, NULL) == 0 && setgid(65534) == 0 && setuid(65534) == 0, 2, "drop to 65534");
	int fd = open((const char *)arg, O_RDONLY | O_CLOEXEC);
	return fd < 0 && errno == EACCES ? 0 : 3;
}

/* A user who may read the segment (mode 0644) cannot open a new object
 * before its maker holds its build lock (a read lock held there would fail
 * the replacement, and the commit that grows a heap makes one): the object
 * is 0600 until then. Stopped right after its O_EXCL, then let go: it
 * completes. */
static void test_reader_cannot_open_a_new_object(void **state)
{
	(void)state;
	if (geteuid() != 0) {
		skip();
		return;
	}
	const char *name = test_name("excl");
	shmcfg *h = test_create(name, &(shmcfg_create_opts){.mode = 0644, .flags = SHMCFG_CREATE_NO_ENV});
	pid_t pid = stopped_resizer(name, "create.excl:stop");
	char path[400];
	bool found = new_object_path(name, path, sizeof path);
	pid_t reader = found ? spawn(reader_open_main, path) : -1;
	int st = -1;
	if (reader > 0)
		waitpid(reader, &st, 0);
	kill(pid, SIGCONT); /* before any verdict: a stopped child would hang the run */
	assert_true(found);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0); /* EACCES */
	resize_completed(h, name, pid);
}

/* A replacer that forks as it builds (another thread's fork, say: the
 * child waits, keeping what it inherited open), then is killed: its
 * leftovers are gc's while the child lives (the child closed its copies of
 * the build locks; the old pid check was not fooled either). */
static void test_fork_during_a_build(void **state)
{
	(void)state;
	const char *name = test_name("forkbuild");
	shmcfg *h = test_create(name, NULL);
	pid_t pid = fork();
	if (pid == 0) {
		setpgid(0, 0); /* its forked child in its group, for the kill below */
		setenv("SHMCFG_FAULT", "lock.created:fork,create.locked", 1);
		shmcfg *n;
		_exit(shmcfg_resize(name, &(shmcfg_create_opts){.slots = 4}, &n) == 0 ? 1 : 2); /* not reached */
	}
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	int n = shmcfg_orphans(name, SHMCFG_ORPHANS_REMOVE, NULL, NULL);
	bool child_lived = kill(-pid, 0) == 0; /* the waiting child, still there */
	kill(-pid, SIGKILL);
	assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	assert_true(child_lived);
	assert_int_equal(n, 2); /* its new object and its lock object */
	assert_int_equal(commit_int(h, T_A, 6, NULL), 0);
	shmcfg_close(h);
	assert_int_equal(shmcfg_unlink(name), 0);
}

/* Whether no process holds a lock on the build byte of each object of
 * segment name in /dev/shm (its lock objects, a replacement's new object). */
static bool build_bytes_free(const char *name)
{
	char cmd[400], file[300];
	snprintf(cmd, sizeof cmd, "ls /dev/shm | grep -e '^shmcfg-new.%s\\.' -e '^shmcfg-lock.%s\\.'", name, name);
	FILE *p = popen(cmd, "r");
	bool all_free = p != NULL;
	int seen = 0;
	while (p && fgets(file, sizeof file, p)) {
		char path[400];
		file[strcspn(file, "\n")] = 0;
		snprintf(path, sizeof path, "/dev/shm/%s", file);
		int fd = open(path, O_RDWR | O_CLOEXEC);
		struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = LOCK_BUILD_BYTE, .l_len = 1};
		all_free &= fd >= 0 && fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type == F_UNLCK;
		seen += fd >= 0;
		if (fd >= 0)
			close(fd);
	}
	if (p)
		pclose(p);
	return all_free && seen == 3; /* the live lock object and a dead replacer's two */
}

/* A process forks while its scan for leftovers holds a read lock on one
 * (another thread's fork: here the test library's fault action ':fork',
 * in the scan). The child does not keep that lock: once the scan is done,
 * no process holds the build byte of any object, so a maker who takes it
 * next waits for nobody. */
static void test_fork_during_a_scan(void **state)
{
	(void)state;
	const char *name = test_name("forkscan");
	shmcfg *h = test_create(name, NULL);
	pid_t pid = fork();
	if (pid == 0) {
		setenv("SHMCFG_FAULT", "create.locked", 1); /* killed once its objects are made */
		shmcfg *n;
		_exit(shmcfg_resize(name, &(shmcfg_create_opts){.slots = 4}, &n) == 0 ? 1 : 2); /* not reached */
	}
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	assert_true(build_bytes_free(name));
	pid = fork();
	if (pid == 0) {
		setpgid(0, 0); /* its forked child in its group, for the kill below */
		setenv("SHMCFG_FAULT", "scan.locked:fork", 1);
		_exit(shmcfg_orphans(name, 0, NULL, NULL) == 2 ? 0 : 1); /* listed, not removed */
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	bool scan_ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
	bool child_lived = kill(-pid, 0) == 0; /* the scan's forked child, still there */
	bool free_after = build_bytes_free(name);
	kill(-pid, SIGKILL);
	assert_true(scan_ok);
	assert_true(child_lived);
	assert_true(free_after);
	assert_int_equal(shmcfg_orphans(name, SHMCFG_ORPHANS_REMOVE, NULL, NULL), 2);
	shmcfg_close(h);
	assert_int_equal(shmcfg_unlink(name), 0);
}

static int plant_copy_main(void *arg)
{
	const char *name = arg;
	CHECK(setgroups(0, NULL) == 0 && setgid(65534) == 0 && setuid(65534) == 0, 2, "drop to 65534");
	char from[300], to[300], page[4096];
	snprintf(from, sizeof from, "/dev/shm/shmcfg.%s", name);
	snprintf(to, sizeof to, "/dev/shm/shmcfg-new.%s.0", name);
	int a = open(from, O_RDONLY | O_CLOEXEC), b = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	CHECK(a >= 0 && b >= 0 && pread(a, page, sizeof page, 0) == (ssize_t)sizeof page &&
		      pwrite(b, page, sizeof page, 0) == (ssize_t)sizeof page, 3, "plant the copy");
	return 0;
}

/* A stranger who may read a segment plants what looks like a dead
 * replacer's new object: a copy of its header, the live instance in it.
 * Root's gc removes the planted file, and not the live segment's lock
 * object, which its header names (a lock object is judged on its own). */
static void test_planted_copy_spares_the_lock_object(void **state)
{
	(void)state;
	if (geteuid() != 0) {
		skip();
		return;
	}
	const char *name = test_name("plant");
	shmcfg *h = test_create(name, &(shmcfg_create_opts){.mode = 0644, .flags = SHMCFG_CREATE_NO_ENV});
	assert_child_ok(spawn(plant_copy_main, (void *)name));
	assert_int_equal(shmcfg_orphans(name, SHMCFG_ORPHANS_REMOVE, NULL, NULL), 1);
	char cmd[300];
	snprintf(cmd, sizeof cmd, "test $(ls /dev/shm | grep -c -e 'shmcfg-lock.%s\\.') = 1 && "
		 "test $(ls /dev/shm | grep -c -e 'shmcfg-new.%s\\.') = 0", name, name);
	assert_int_equal(system(cmd), 0);
	shmcfg *w;
	assert_int_equal(shmcfg_attach(name, 0, NULL, &w), 0); /* its lock object is there */
	assert_int_equal(commit_int(w, T_A, 9, NULL), 0);
	shmcfg_close(w);
	shmcfg_close(h);
	shmcfg_unlink(name);
}

/* gc while a replacement stands between its freeze and its rename (the
 * replacer stopped there): its new object and their lock objects are not
 * orphans; the replacement then completes, and is followed. */
static void test_gc_spares_a_replacement_under_way(void **state)
{
	(void)state;
	const char *name = test_name("gcrace");
	shmcfg *h = test_create(name, NULL);
	assert_int_equal(commit_int(h, T_A, 3, NULL), 0);
	pid_t pid = stopped_resizer(name, "replace.frozen:stop");
	int n = shmcfg_orphans(name, SHMCFG_ORPHANS_REMOVE, NULL, NULL);
	int64_t a = get_i(h, T_A);
	kill(pid, SIGCONT); /* before any verdict: a stopped child would hang the run */
	assert_int_equal(n, 0);
	assert_int_equal(a, 3); /* frozen meanwhile: its last values */
	resize_completed(h, name, pid);
}

/* A replacer killed as it made its objects, before it wrote them: its new
 * object empty (create.opened), then that and an empty lock object
 * (lock.created). gc takes both, and the segment lives on: a maker's
 * liveness is its build lock, not what it wrote. */
static void test_replacer_killed_before_writing(void **state)
{
	(void)state;
	static const char *const points[] = {"create.opened", "lock.created"};
	for (size_t k = 0; k < 2; k++) {
		const char *name = test_name(k ? "kill-lock" : "kill-open");
		shmcfg *h = test_create(name, NULL);
		assert_int_equal(commit_int(h, T_A, 5, NULL), 0);
		pid_t pid = fork();
		if (pid == 0) {
			setenv("SHMCFG_FAULT", points[k], 1);
			shmcfg *n;
			_exit(shmcfg_resize(name, &(shmcfg_create_opts){.slots = 4}, &n) == 0 ? 1 : 2); /* not reached */
		}
		int st;
		assert_int_equal(waitpid(pid, &st, 0), pid);
		assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
		char cmd[400];
		snprintf(cmd, sizeof cmd, "test $(ls /dev/shm | grep -c -e 'shmcfg-new.%s\\.') = 1 && "
			 "test $(ls /dev/shm | grep -c -e 'shmcfg-lock.%s\\.') = %zu", name, name, 1 + k);
		assert_int_equal(system(cmd), 0); /* what it left, as it left it */
		assert_int_equal(shmcfg_orphans(name, SHMCFG_ORPHANS_REMOVE, NULL, NULL), (int)(1 + k));
		snprintf(cmd, sizeof cmd, "test $(ls /dev/shm | grep -c -e 'shmcfg-new.%s\\.') = 0 && "
			 "test $(ls /dev/shm | grep -c -e 'shmcfg-lock.%s\\.') = 1", name, name);
		assert_int_equal(system(cmd), 0); /* the live segment's lock object stays */
		assert_int_equal(commit_int(h, T_A, 6, NULL), 0);
		assert_int_equal(get_i(h, T_A), 6);
		shmcfg_close(h);
		assert_int_equal(shmcfg_unlink(name), 0);
	}
}

/* gc while a replacement stands before its rename, its maker's pid not one
 * this process can see alive (a replacer in another pid namespace: its
 * header's pid is its own namespace's): nothing is taken, and the
 * replacement completes. */
static void test_gc_spares_a_replacer_of_another_pid_namespace(void **state)
{
	(void)state;
	const char *name = test_name("pidns");
	shmcfg *h = test_create(name, NULL);
	pid_t dead = fork(); /* a pid no process has now */
	if (dead == 0)
		_exit(0);
	assert_int_equal(waitpid(dead, NULL, 0), dead);
	pid_t pid = stopped_resizer(name, "replace.frozen:stop");
	char path[400];
	int fd = new_object_path(name, path, sizeof path) ? open(path, O_RDWR | O_CLOEXEC) : -1;
	int32_t pid32 = (int32_t)dead;
	bool forged = fd >= 0 && pwrite(fd, &pid32, sizeof pid32, offsetof(struct seg_header, create_pid)) ==
					 (ssize_t)sizeof pid32;
	if (fd >= 0)
		close(fd);
	int n = shmcfg_orphans(name, SHMCFG_ORPHANS_REMOVE, NULL, NULL);
	kill(pid, SIGCONT); /* before any verdict: a stopped child would hang the run */
	assert_true(forged);
	assert_int_equal(n, 0);
	resize_completed(h, name, pid);
}

/* Two replacers at once and a writer: no commit is lost (the writer's
 * handle always ends on the segment at the name), nothing is left behind. */
static void test_concurrent_replacers(void **state)
{
	(void)state;
	const char *name = test_name("racers");
	shmcfg *h = test_create(name, NULL);
	pid_t kid[2];
	for (int k = 0; k < 2; k++)
		if ((kid[k] = fork()) == 0) {
			for (int i = 0; i < 40; i++) {
				shmcfg *n;
				if (shmcfg_resize(name, &(shmcfg_create_opts){.slots = (uint32_t)(3 + (i + k) % 5)}, &n) == 0)
					shmcfg_close(n);
			}
			_exit(0);
		}
	for (int64_t v = 1; v <= 400; v++) {
		int r = commit_int(h, T_A, v, NULL);
		if (r)
			fail_msg("commit %lld: %s: %s", (long long)v, shmcfg_errname(r), shmcfg_errdetail());
	}
	for (int k = 0; k < 2; k++) {
		int st;
		assert_int_equal(waitpid(kid[k], &st, 0), kid[k]);
		assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	shmcfg *now;
	assert_int_equal(shmcfg_attach(name, SHMCFG_ATTACH_RDONLY, NULL, &now), 0);
	assert_int_equal(get_i(now, T_A), 400);
	shmcfg_close(now);
	shmcfg_close(h);
	char cmd[300];
	snprintf(cmd, sizeof cmd, "test $(ls /dev/shm | grep -c -e 'shmcfg-lock.%s\\.' -e 'shmcfg-new.%s\\.') = 1", name, name);
	assert_int_equal(system(cmd), 0);
	shmcfg_unlink(name);
}

/* Threads reading inline through one handle while a writer commits rising
 * values and the segment is resized three times: no value ever goes back,
 * and every thread ends on the last one. */
struct race {
	shmcfg *h;
	int64_t last;
	int bad;
};

static void *reader(void *arg)
{
	struct race *x = arg;
	int64_t prev = 0, v = 0;
	while (prev < __atomic_load_n(&x->last, __ATOMIC_ACQUIRE) || prev == 0) {
		int r = shmcfg_get_int(x->h, T_A, &v);
		if (r || v < prev) {
			__atomic_store_n(&x->bad, r ? r : 1, __ATOMIC_RELAXED);
			break;
		}
		prev = v;
		if (__atomic_load_n(&x->last, __ATOMIC_ACQUIRE) > 0 && v == __atomic_load_n(&x->last, __ATOMIC_ACQUIRE))
			break;
	}
	return NULL;
}

static void test_threads_follow(void **state)
{
	(void)state;
	const char *name = test_name("threads");
	shmcfg *h = test_create(name, NULL);
	shmcfg *w;
	assert_int_equal(shmcfg_attach(name, 0, NULL, &w), 0);
	struct race x = {.h = h};
	assert_int_equal(commit_int(w, T_A, 1, NULL), 0);
	pthread_t th[3];
	for (int i = 0; i < 3; i++)
		assert_int_equal(pthread_create(&th[i], NULL, reader, &x), 0);
	int64_t v = 1;
	shmcfg *n[3];
	for (int k = 0; k < 3; k++) {
		for (int i = 0; i < 50; i++)
			assert_int_equal(commit_int(w, T_A, ++v, NULL), 0); /* w follows too */
		assert_int_equal(shmcfg_resize(name, &(shmcfg_create_opts){.slots = (uint32_t)(3 + k)}, &n[k]), 0);
	}
	assert_int_equal(commit_int(w, T_A, ++v, NULL), 0);
	__atomic_store_n(&x.last, v, __ATOMIC_RELEASE);
	for (int i = 0; i < 3; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
	assert_int_equal(x.bad, 0);
	assert_int_equal(get_i(h, T_A), v);
	for (int k = 0; k < 3; k++)
		shmcfg_close(n[k]);
	shmcfg_close(w);
	shmcfg_close(h);
	shmcfg_unlink(name);
}

/* Attach, stopped (SHMCFG_FAULT) between opening the segment's lock object
 * and mapping it; then commit 7 and report what the name's segment holds. */
static int attach_across_main(void *p)
{
	const char *name = p;
	setenv("SHMCFG_FAULT", "attach.lock_opened:stop", 1);
	shmcfg *h = NULL;
	int r = shmcfg_attach(name, 0, NULL, &h);
	unsetenv("SHMCFG_FAULT");
	CHECK(r == 0, 2, "attach across a replacement: %s: %s", shmcfg_errname(r), shmcfg_errdetail());
	r = commit_int(h, T_A, 7, NULL);
	CHECK(r == 0, 3, "commit after it: %s: %s", shmcfg_errname(r), shmcfg_errdetail());
	shmcfg_close(h);
	return 0;
}

/* A segment replaced while a process attaches it, after it opened the lock
 * object and before it mapped it (a replacer removes the old one): the
 * attach succeeds, and the handle's commit lands on the segment now at the
 * name. (The mapping opened the lock object again by its name, and failed
 * with ENOENT: test_concurrent_replacers' commits saw it now and then.) */
static void test_attach_across_replacement(void **state)
{
	(void)state;
	const char *name = test_name("across");
	shmcfg *h = test_create(name, NULL);
	pid_t pid = spawn(attach_across_main, (void *)name);
	assert_child_stops(pid, "attach.lock_opened");
	shmcfg *n;
	assert_int_equal(shmcfg_resize(name, &(shmcfg_create_opts){.slots = 5}, &n), 0);
	shmcfg_close(n);
	assert_int_equal(kill(pid, SIGCONT), 0);
	assert_child_ok(pid);
	shmcfg *now;
	assert_int_equal(shmcfg_attach(name, SHMCFG_ATTACH_RDONLY, NULL, &now), 0);
	assert_int_equal(get_i(now, T_A), 7);
	shmcfg_close(now);
	shmcfg_close(h);
	shmcfg_unlink(name);
}

/*
 * A handle has room for its own segment's accessors' copy, not the largest
 * one: a process with little address space left (RLIMIT_AS; the same
 * bound as what mlockall(MCL_FUTURE) may lock without privilege) attaches
 * and follows a resize. A reservation of the largest copy (38 MiB a
 * handle, the first version) failed both.
 */
static int little_address_space_main(void *arg)
{
	const char *name = arg;
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	unsigned long vm_kib = 0;
	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "VmSize: %lu kB", &vm_kib) == 1)
			break;
	if (f)
		fclose(f);
	if (!vm_kib)
		return 2;
	/* 24 MiB to spare: a handle, its successor's, their mappings */
	struct rlimit rl = {.rlim_cur = (vm_kib << 10) + (24u << 20), .rlim_max = RLIM_INFINITY};
	if (setrlimit(RLIMIT_AS, &rl))
		return 3;
	shmcfg *h, *n;
	if (shmcfg_attach(name, 0, NULL, &h))
		return 4;
	if (shmcfg_resize(name, &(shmcfg_create_opts){.slots = 5}, &n))
		return 5;
	shmcfg_close(n);
	int64_t v;
	if (accessor_int(h, T_A) != 42 || !copy_fast(h, T_A, &v) || v != 42)
		return 6;
	shmcfg_close(h);
	return 0;
}

/* A segment whose T_A is 42, and a child fn(name) run on it */
static void child_on_a42(const char *tag, int (*fn)(void *))
{
	const char *name = test_name(tag);
	shmcfg *h = test_create(name, NULL);
	assert_int_equal(commit_int(h, T_A, 42, NULL), 0);
	assert_child_ok(spawn(fn, (void *)name));
	shmcfg_close(h);
	shmcfg_unlink(name);
}

static void test_little_address_space(void **state)
{
	(void)state;
	child_on_a42("littleas", little_address_space_main);
}

/* A process that exits with its handles open leaks nothing that LSan sees:
 * a handle is a mapping, which LSan does not scan, so what only it points
 * to (the schema's copy, the name) is registered as a root (segment.c).
 * Under ASan (make check-all's tier) the child's exit fails without it. */
static int exit_attached_main(void *arg)
{
	shmcfg *h, *ro;
	int64_t a = 0, b = 0;
	if (shmcfg_attach(arg, 0, NULL, &h) || shmcfg_attach(arg, SHMCFG_ATTACH_RDONLY, NULL, &ro) ||
	    shmcfg_get_int(h, T_A, &a) || shmcfg_get_int(ro, T_A, &b))
		return 4;
	/* exit(), not spawn's _exit(): the atexit handlers run, LSan's check
	 * among them (a leak makes the exit status non-zero) */
	exit(a == 42 && b == 42 ? 0 : 5);
}

static void test_exit_with_handles_open(void **state)
{
	(void)state;
	child_on_a42("exitopen", exit_attached_main);
}

/*
 * A writer forges a successor: another schema, fewer options, under the
 * header hash of the schema the readers attached with. It is not followed
 * (the program's option handles would index past its cells): reads fail
 * with SHMCFG_E_CORRUPT (its successor cannot be attached, and why), accessors
 * return their defaults, and the handle's copy stays the frozen one (the
 * first version of the mapped copy mapped its one page where 500 options'
 * blocks had been and unmapped the rest: an accessor of a later option
 * died of SIGSEGV).
 */
static int forged_successor_main(void *arg)
{
	const char *name = arg;
	shmcfg *h;
	if (shmcfg_attach(name, SHMCFG_ATTACH_RDONLY, NULL, &h))
		return 4;
	int64_t v;
	if (accessor_int(h, 499) != 5 || !copy_fast(h, 499, &v) || v != 5)
		return 5;
	/* tell the parent, wait for its forgery: a byte each way */
	char c = 'a';
	if (write(3, &c, 1) != 1 || read(4, &c, 1) != 1)
		return 6;
	/* the follow refuses it: its header lies about its schema */
	int r = shmcfg_get_int(h, 0, &v);
	if (r != SHMCFG_E_CORRUPT || !strstr(shmcfg_errdetail(), "its successor cannot be attached: segment is corrupt") ||
	    !strstr(shmcfg_errdetail(), "its successor claims its schema's hash for 1 options, not 500")) {
		fprintf(stderr, "# child: read after the forgery: %s (%s)\n", shmcfg_errname(r), shmcfg_errdetail());
		return 7;
	}
	for (shmcfg_opt o = 0; o < 500; o++)
		if (accessor_int(h, o) != INT64_MIN) /* the error's default: never a crash, nor a frozen value */
			return 8;
	if (copy_fast(h, 499, &v))
		return 9; /* the frozen copy: odd */
	shmcfg_close(h);
	return 0;
}

static void test_forged_successor_not_mapped(void **state)
{
	(void)state;
	const char *name = test_name("forged");
	shmcfg_schema *big;
	assert_int_equal(shmcfg_schema_new(&big), 0);
	for (int i = 0; i < 500; i++) {
		char nm[32];
		snprintf(nm, sizeof nm, "b.o%03d", i);
		assert_int_equal(shmcfg_schema_add(big, &(shmcfg_optdef){.name = nm, .type = SHMCFG_INT, .def = "1"}), 0);
	}
	shmcfg_create_opts o = {.flags = SHMCFG_CREATE_NO_ENV};
	shmcfg *h;
	assert_int_equal(shmcfg_create(name, big, &o, &h), 0);
	assert_int_equal(commit_int(h, 499, 5, NULL), 0);
	uint8_t hash[16];
	shmcfg_schema_hash(h, hash);
	int up[2], down[2];
	assert_int_equal(pipe(up), 0);
	assert_int_equal(pipe(down), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		signal(SIGSEGV, SIG_DFL); /* a crash is the child's exit status, not cmocka's to catch */
		signal(SIGBUS, SIG_DFL);
		dup2(up[1], 3);
		dup2(down[0], 4);
		_exit(forged_successor_main((void *)name));
	}
	char c;
	assert_int_equal(read(up[0], &c, 1), 1);
	/* the successor: one option, then the big schema's hash in its header */
	shmcfg_schema *small;
	assert_int_equal(shmcfg_schema_new(&small), 0);
	assert_int_equal(shmcfg_schema_add(small, &(shmcfg_optdef){.name = "s.one", .type = SHMCFG_INT, .def = "9"}), 0);
	o.flags |= SHMCFG_CREATE_FORCE;
	shmcfg *hs;
	assert_int_equal(shmcfg_create(name, small, &o, &hs), 0);
	char path[256];
	snprintf(path, sizeof path, "/dev/shm/shmcfg.%s", name);
	int fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	struct seg_header *hd = mmap(NULL, sizeof *hd, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	assert_true(hd != MAP_FAILED);
	close(fd);
	memcpy(hd->schema_hash, hash, 16);
	munmap(hd, sizeof *hd);
	assert_int_equal(write(down[1], "g", 1), 1);
	assert_child_ok(pid);
	close(up[0]);
	close(up[1]);
	close(down[0]);
	close(down[1]);
	shmcfg_close(hs);
	shmcfg_close(h);
	shmcfg_schema_free(small);
	shmcfg_schema_free(big);
	shmcfg_unlink(name);
}

int main(void)
{
	if (getenv("TEST_FILTER"))
		cmocka_set_test_filter(getenv("TEST_FILTER"));
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_follow_resize_and_force),
		cmocka_unit_test(test_follow_another_schema),
		cmocka_unit_test(test_mapped_copies_outlive_close),
		cmocka_unit_test(test_resize_too_small),
		cmocka_unit_test(test_heap_grows),
		cmocka_unit_test(test_not_followed_into_another_lineage),
		cmocka_unit_test(test_replacer_killed_after_freeze),
		cmocka_unit_test(test_gc_spares_a_replacement_under_way),
		cmocka_unit_test(test_replacer_killed_before_writing),
		cmocka_unit_test(test_gc_spares_a_replacer_of_another_pid_namespace),
		cmocka_unit_test(test_reader_cannot_open_a_new_object),
		cmocka_unit_test(test_planted_copy_spares_the_lock_object),
		cmocka_unit_test(test_fork_during_a_build),
		cmocka_unit_test(test_fork_during_a_scan),
		cmocka_unit_test(test_concurrent_replacers),
		cmocka_unit_test(test_threads_follow),
		cmocka_unit_test(test_attach_across_replacement),
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
		/* the sanitizers' shadow memory is address space: the plain build
		 * runs it. Left out, not skipped: cmocka's skip() prints "not ok #
		 * SKIP", a failure to automake's TAP driver. */
		cmocka_unit_test(test_little_address_space),
#endif
		cmocka_unit_test(test_exit_with_handles_open),
		cmocka_unit_test(test_forged_successor_not_mapped),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
