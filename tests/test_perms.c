/* SPDX-License-Identifier: MIT */
/* Permissions, names, symlinks, and readers that the pid does not describe.
 *
 *  1. Names: '/', '..', a leading '.', other characters and over-long names
 *     are refused with -EINVAL by create, attach and unlink.
 *  2. Modes and groups: the default mode is 0600 whatever the umask; an
 *     explicit mode is exact; the group option sets the object's group.
 *  3. Other users (as root, children drop to uid 65534 after setgroups(0)):
 *     mode 0600 keeps them out (-EACCES with a detail naming the segment);
 *     mode 0640 and the segment's group, or mode 0644, let them attach
 *     read-only and read whole generations (inline, copies, snapshots, waits)
 *     but change nothing: no read-write attach, no transaction, no gc, no
 *     forced re-creation, no unlink, no write through the file.
 *  4. Symlinks planted at /dev/shm/shmcfg.NAME are followed neither by create
 *     (the target is untouched, a dangling target is not created) nor by
 *     attach.
 *  5. Liveness is the OFD lock, not the pid: a dead reader's entry that
 *     carries the pid (and start time) of a live process is still reclaimed,
 *     by a commit and by gc; a reader in another pid namespace (pid 1 there)
 *     is neither reaped while it lives (its pin makes a commit fail with
 *     SHMCFG_E_BUSY naming "pid 1") nor kept once killed.
 *  6. A full reader table: attaches still work, snapshots copy; read-only attaches
 *     still work, and dead entries are reaped first.
 *
 * Tests that need root (2's group option, 3, 4 and the pid namespace) are
 * tests/test_perms_root, run by make regtest (main() lists each case's tier);
 * as another user it runs none and says so (a plan of 0, which automake's TAP
 * driver counts as a skip: cmocka's skip() prints "not ok # SKIP", which it
 * counts as a failure).
 *
 * Children never use cmocka: they report failure through their exit status
 * and a "# child ..." line on stderr; the parent asserts on the status.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>

#include "common.h"
#include "proc.h"
#include "internal.h" /* reader_at(): the pid-reuse test writes a reader entry */

#define NOBODY 65534
#define TEST_GID 4242 /* a group no process here belongs to */

static char paths[4][320]; /* files and links to remove */
static int npaths;

/* ------------------------------------------------------------------ */
/* Helpers                                                            */

/* A path removed by the teardown: /tmp/shmcfg-TAG-PID, or the given path. */
static const char *new_path(const char *tag, const char *path)
{
	assert_true(npaths < 4);
	if (path)
		snprintf(paths[npaths], sizeof paths[0], "%s", path);
	else
		snprintf(paths[npaths], sizeof paths[0], "/tmp/shmcfg-%s-%d", tag, (int)getpid());
	return paths[npaths++];
}









/* The shared teardown, and the files and links a test made. */
static int perms_teardown(void **state)
{
	while (npaths > 0)
		(void)unlink(paths[--npaths]);
	return teardown(state);
}






static void seg_path(const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "/dev/shm/shmcfg.%s", name);
}

/* Become uid/gid with no supplementary groups; 0 or an errno. */
static int drop_to(uid_t uid, gid_t gid)
{
	if (setgroups(0, NULL) < 0 || setgid(gid) < 0 || setuid(uid) < 0)
		return errno;
	if (geteuid() != uid || getegid() != gid || setuid(0) == 0)
		return EPERM; /* privileges not dropped for good */
	return 0;
}

/* Entries of the reader table. */
struct entries {
	int used, alive_with_pid, dead_with_pid, pins_gen_with_pid;
	pid_t pid;
	uint64_t gen;
	uint32_t index;   /* of the last entry with pid */
	uint64_t start;   /* its start time */
};

static void tally(const shmcfg_reader *r, void *ud)
{
	struct entries *e = ud;
	e->used++;
	if (r->pid != e->pid)
		return;
	e->index = r->index;
	e->start = r->start_time;
	if (r->alive)
		e->alive_with_pid++;
	else
		e->dead_with_pid++;
	for (int k = 0; k < 4; k++)
		if (e->gen && r->pins[k] == e->gen)
			e->pins_gen_with_pid++;
}

static struct entries entries_of(const shmcfg *h, pid_t pid, uint64_t gen)
{
	struct entries e = {.pid = pid, .gen = gen};
	int n = shmcfg_readers(h, tally, &e);
	assert_int_equal(n, e.used);
	return e;
}

/* ------------------------------------------------------------------ */
/* 1. Names                                                           */
/* ------------------------------------------------------------------ */

static void test_bad_names_rejected(void **state)
{
	(void)state;
	char longest[SEG_NAME_MAX + 2];
	memset(longest, 'n', sizeof longest);
	longest[SEG_NAME_MAX + 1] = 0; /* 201 characters */
	const char *bad[] = {"",     "a/b",   "/abs",  "../etc", "..",     ".",     ".hidden",
			     "a b",  "a\nb",  "a\\b",  "a*",     "é",      "x:y",   longest};
	shmcfg_schema *s = test_schema();
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		shmcfg *h = NULL;
		shmcfg_create_opts o = {.flags = SHMCFG_CREATE_NO_ENV};
		int r = shmcfg_create(bad[i], s, &o, &h);
		if (r != -EINVAL)
			fail_msg("create '%s': %d (%s), expected -EINVAL", bad[i], r, shmcfg_errname(r));
		assert_null(h);
		if (!strstr(shmcfg_errdetail(), "segment name"))
			fail_msg("create '%s': unclear detail: %s", bad[i], shmcfg_errdetail());
		assert_int_equal(shmcfg_attach(bad[i], 0, NULL, &h), -EINVAL);
		assert_int_equal(shmcfg_attach(bad[i], SHMCFG_ATTACH_RDONLY, NULL, &h), -EINVAL);
		assert_int_equal(shmcfg_unlink(bad[i]), -EINVAL);
	}
	shmcfg *h = NULL;
	assert_int_equal(shmcfg_attach(NULL, 0, NULL, &h), -EINVAL);
	assert_int_equal(shmcfg_unlink(NULL), -EINVAL);
	/* nothing was created under any of them */
	assert_int_equal(access("/dev/shm/shmcfg.", F_OK), -1);
	assert_int_equal(access("/dev/shm/shmcfg...", F_OK), -1);
	assert_int_equal(access("/dev/shm/shmcfg..hidden", F_OK), -1);
	/* the longest name allowed works: t<pid>nnn... of SEG_NAME_MAX characters */
	int k = snprintf(longest, sizeof longest, "t%d", (int)getpid());
	memset(longest + k, 'n', SEG_NAME_MAX - (size_t)k);
	longest[SEG_NAME_MAX] = 0;
	assert_int_equal(strlen(longest), SEG_NAME_MAX);
	shmcfg_create_opts o = {.flags = SHMCFG_CREATE_NO_ENV | SHMCFG_CREATE_FORCE};
	int r = shmcfg_create(longest, s, &o, &h);
	if (r)
		fail_msg("create with a %d-character name: %s: %s", SEG_NAME_MAX, shmcfg_strerror(r),
			 shmcfg_errdetail());
	shmcfg_close(h);
	assert_int_equal(shmcfg_unlink(longest), 0);
	shmcfg_schema_free(s);
}

/* ------------------------------------------------------------------ */
/* 2. Modes and groups                                                */
/* ------------------------------------------------------------------ */

static struct stat stat_of(const char *name)
{
	char p[300];
	seg_path(name, p, sizeof p);
	struct stat st;
	if (lstat(p, &st) < 0)
		fail_msg("lstat %s: %s", p, strerror(errno));
	return st;
}

static void test_modes_exact(void **state)
{
	(void)state;
	const char *name = new_name("perm-mode");
	mode_t old = umask(077);
	/* default 0600, under a umask that would allow less */
	shmcfg *h = keep(test_create(name, NULL));
	struct stat st = stat_of(name);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal(st.st_uid, geteuid());
	assert_int_equal(st.st_gid, getegid());
	drop(h);
	/* an explicit mode is exact: the umask does not narrow it */
	h = test_create(name, &(shmcfg_create_opts){.mode = 0644});
	assert_int_equal(stat_of(name).st_mode & 07777, 0644);
	shmcfg_close(h);
	h = test_create(name, &(shmcfg_create_opts){.mode = 0640});
	assert_int_equal(stat_of(name).st_mode & 07777, 0640);
	shmcfg_close(h);
	umask(old);
	/* bits beyond 0777 are refused, and nothing is created */
	(void)shmcfg_unlink(name);
	shmcfg_schema *s = test_schema();
	h = NULL;
	int r = shmcfg_create(name, s, &(shmcfg_create_opts){.mode = 04755, .flags = SHMCFG_CREATE_NO_ENV}, &h);
	assert_int_equal(r, -EINVAL);
	assert_null(h);
	char p[300];
	seg_path(name, p, sizeof p);
	assert_int_equal(access(p, F_OK), -1);
	shmcfg_schema_free(s);
}

/* The group option sets the object's group (root: any group). */
static void test_group_option(void **state)
{
	(void)state;
	const char *name = new_name("perm-gid");
	shmcfg *h = keep(test_create(name, &(shmcfg_create_opts){.mode = 0640, .gid = TEST_GID}));
	struct stat st = stat_of(name);
	assert_int_equal(st.st_gid, TEST_GID);
	assert_int_equal(st.st_mode & 07777, 0640);
	assert_int_equal(st.st_uid, 0);
	/* (gid_t)-1 means none: the creator's group */
	drop(h);
	h = keep(test_create(name, &(shmcfg_create_opts){.gid = (gid_t)-1}));
	assert_int_equal(stat_of(name).st_gid, getegid());
}

/* A creator that may not give the object a group fails cleanly: no object left. */
static int chown_denied_main(void *arg)
{
	const char *name = arg;
	int e = drop_to(NOBODY, NOBODY);
	CHECK(e == 0, 2, "drop privileges: %s", strerror(e));
	shmcfg_schema *s = NULL;
	CHECK(shmcfg_schema_new(&s) == 0, 3, "schema");
	shmcfg_optdef d = {.name = "x", .type = SHMCFG_INT};
	CHECK(shmcfg_schema_add(s, &d) == 0, 4, "schema_add");
	shmcfg *h = NULL;
	int r = shmcfg_create(name, s, &(shmcfg_create_opts){.gid = TEST_GID, .flags = SHMCFG_CREATE_NO_ENV}, &h);
	CHECK(r == -EPERM && h == NULL, 5, "create with a foreign group: %d (%s)", r, shmcfg_errname(r));
	CHECK(strstr(shmcfg_errdetail(), "group") != NULL, 6, "unclear detail");
	char p[300];
	seg_path(name, p, sizeof p);
	CHECK(access(p, F_OK) < 0 && errno == ENOENT, 7, "%s was left behind", p);
	shmcfg_schema_free(s);
	return 0;
}

static void test_group_option_denied(void **state)
{
	(void)state;
	const char *name = new_name("perm-gid-denied");
	(void)shmcfg_unlink(name);
	assert_child_ok(spawn(chown_denied_main, (void *)name));
}

/* ------------------------------------------------------------------ */
/* 3. Other users                                                     */
/* ------------------------------------------------------------------ */

struct other_arg {
	const char *name;
	uid_t uid;
	gid_t gid;
	int up, down; /* pipe ends: to the parent, from the parent */
};

/* Mode 0600: another user cannot attach at all. */
static int shut_out_main(void *p)
{
	struct other_arg *a = p;
	int e = drop_to(a->uid, a->gid);
	CHECK(e == 0, 2, "drop privileges: %s", strerror(e));
	for (int pass = 0; pass < 2; pass++) {
		shmcfg *h = NULL;
		int r = shmcfg_attach(a->name, pass ? SHMCFG_ATTACH_RDONLY : 0, NULL, &h);
		CHECK(r == -EACCES && h == NULL, 3, "attach %s: %d (%s)", pass ? "read-only" : "read-write",
		      r, shmcfg_errname(r));
		CHECK(strstr(shmcfg_errdetail(), a->name) && strstr(shmcfg_errdetail(), "ermission"), 4,
		      "unclear detail");
	}
	return 0;
}

static void test_0600_shuts_out_others(void **state)
{
	(void)state;
	const char *name = new_name("perm-0600");
	keep(test_create(name, NULL));
	assert_int_equal(stat_of(name).st_mode & 07777, 0600);
	/* neither another user nor another user in the segment's group */
	struct other_arg a = {name, NOBODY, NOBODY, -1, -1};
	assert_child_ok(spawn(shut_out_main, &a));
	a.gid = getegid();
	assert_child_ok(spawn(shut_out_main, &a));
}

/*
 * A reader with read permission only: attaches read-only, reads whole
 * generations by every read path, waits for the parent's commit and reads
 * it, and can change nothing.
 */
static int read_only_main(void *p)
{
	struct other_arg *a = p;
	int e = drop_to(a->uid, a->gid);
	CHECK(e == 0, 2, "drop privileges: %s", strerror(e));
	shmcfg *h = NULL;
	int r = shmcfg_attach(a->name, 0, NULL, &h);
	CHECK(r == -EACCES && h == NULL, 3, "read-write attach: %d (%s)", r, shmcfg_errname(r));
	CHECK(strstr(shmcfg_errdetail(), a->name) != NULL, 4, "detail does not name the segment");
	CHECK(strstr(shmcfg_errdetail(), "no write access to the segment (it may be read: attach it read-only)"),
	      4, "the detail does not say that a read-only attach would work: %s", shmcfg_errdetail());
	r = shmcfg_attach(a->name, SHMCFG_ATTACH_RDONLY, NULL, &h);
	CHECK(r == 0, 5, "read-only attach: %s", shmcfg_strerror(r));
	CHECK(shmcfg_readonly(h), 6, "handle not read-only");
	/* the parent committed n = 7 (generation 2) */
	int64_t v = 0;
	CHECK(shmcfg_get_int(h, T_A, &v) == 0 && v == 7, 7, "inline read a = %" PRId64, v);
	CHECK(shmcfg_get_int(h, T_B, &v) == 0 && v == -7, 8, "inline read b = %" PRId64, v);
	shmcfg_value c;
	CHECK(shmcfg_get(h, T_C, &c) == 0 && c.u.str.len == 1 && c.u.str.ptr[0] == '7', 9, "get c");
	shmcfg_value_clear(&c);
	shmcfg_snapshot *s;
	CHECK(shmcfg_snapshot_acquire(h, &s) == 0, 10, "snapshot");
	CHECK(shmcfg_snapshot_generation(s) == 2 && snapshot_n(s) == 7, 11, "snapshot shows %" PRId64,
	      snapshot_n(s));
	shmcfg_snapshot_release(s);
	uint8_t hash[16];
	CHECK(shmcfg_config_hash(h, hash) == 2, 12, "config hash generation");
	char *dump = NULL;
	CHECK(shmcfg_dump(h, 0, &dump) == 0 && strstr(dump, "\"t.a\""), 13, "dump");
	free(dump);
	CHECK(shmcfg_check(h, true, NULL, NULL) == 0, 14, "deep check from a read-only handle");
	/* the lock object is the writers': who holds the lock it cannot tell */
	shmcfg_info info;
	CHECK(shmcfg_stat(h, &info) == 0 && info.writer == SHMCFG_WRITER_UNKNOWN && info.writer_pid == 0 &&
		      info.writer_entry == UINT32_MAX,
	      35, "stat's writer lock: %u, pid %d", info.writer, (int)info.writer_pid);
	/* it can change nothing */
	shmcfg_txn *t = NULL;
	r = shmcfg_txn_begin(h, &t);
	CHECK(r == SHMCFG_E_READONLY && t == NULL, 15, "txn_begin: %d", r);
	CHECK(strstr(shmcfg_errdetail(), "read-only"), 16, "unclear detail");
	CHECK(shmcfg_gc(h, NULL, NULL) == SHMCFG_E_READONLY, 17, "gc");
	r = shmcfg_load(h, "{\"t.a\": 1}", 10, NULL, NULL, NULL);
	CHECK(r == SHMCFG_E_READONLY, 18, "load: %d", r);
	r = shmcfg_unlink(a->name);
	CHECK(r == -EPERM || r == -EACCES, 19, "unlink: %d", r);
	shmcfg *other = NULL;
	shmcfg_schema *sc = NULL;
	CHECK(shmcfg_schema_new(&sc) == 0, 20, "schema");
	shmcfg_optdef d = {.name = "x", .type = SHMCFG_INT};
	CHECK(shmcfg_schema_add(sc, &d) == 0, 21, "schema_add");
	r = shmcfg_create(a->name, sc, &(shmcfg_create_opts){.flags = SHMCFG_CREATE_FORCE | SHMCFG_CREATE_NO_ENV}, &other);
	CHECK((r == -EACCES || r == -EPERM || r == -EEXIST) && other == NULL, 22,
	      "forced create over it: %d (%s)", r, shmcfg_errname(r));
	CHECK(strstr(shmcfg_errdetail(), a->name) != NULL, 34, "detail does not name the segment");
	shmcfg_schema_free(sc);
	char path[300];
	seg_path(a->name, path, sizeof path);
	int fd = open(path, O_RDWR | O_NOFOLLOW);
	CHECK(fd < 0 && errno == EACCES, 23, "open O_RDWR: %s", fd < 0 ? strerror(errno) : "succeeded");
	fd = open(path, O_RDONLY | O_NOFOLLOW);
	CHECK(fd >= 0, 24, "open O_RDONLY: %s", strerror(errno));
	void *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(m == MAP_FAILED && errno == EACCES, 25, "writable mapping of a read-only descriptor");
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1};
	CHECK(fcntl(fd, F_OFD_SETLK, &fl) < 0 && errno == EBADF, 26, "writer lock taken: %s",
	      strerror(errno));
	close(fd);
	/* wait for the parent's next commit, then read it */
	char msg = 'r';
	CHECK(write_full(a->up, &msg, 1) == 0, 27, "pipe");
	uint64_t gen = 0;
	r = shmcfg_wait(h, 2, CHILD_TIMEOUT_MS, &gen);
	CHECK(r == 0 && gen == 3, 28, "wait: %d, generation %" PRIu64, r, gen);
	CHECK(shmcfg_get_int(h, T_A, &v) == 0 && v == 8, 29, "a = %" PRId64 " after the commit", v);
	CHECK(shmcfg_snapshot_acquire(h, &s) == 0, 30, "snapshot");
	CHECK(shmcfg_snapshot_generation(s) == 3 && snapshot_n(s) == 8, 31, "snapshot shows %" PRId64,
	      snapshot_n(s));
	shmcfg_snapshot_release(s);
	shmcfg_commit ci;
	CHECK(shmcfg_commit_info(h, 3, &ci) == 0 && ci.generation == 3 && ci.uid == 0, 32,
	      "commit record");
	/* hold the handle until the parent has looked at the reader table */
	CHECK(read_full(a->down, &msg, 1, CHILD_TIMEOUT_MS) == 0, 33, "parent");
	shmcfg_close(h);
	return 0;
}

static void run_read_only_child(const char *name, uid_t uid, gid_t gid)
{
	shmcfg *h = handles[nhandles - 1];
	uint64_t gen = 0;
	assert_int_equal(commit_n(h, 7, &gen), 0);
	assert_int_equal(gen, 2);
	int up[2], down[2];
	assert_int_equal(pipe(up), 0);
	assert_int_equal(pipe(down), 0);
	struct other_arg a = {name, uid, gid, up[1], down[0]};
	pid_t pid = spawn(read_only_main, &a);
	close(up[1]);
	close(down[0]);
	char m;
	if (read_full(up[0], &m, 1, CHILD_TIMEOUT_MS)) {
		assert_child_ok(pid); /* reports why it stopped */
		fail_msg("the read-only child stopped early");
	}
	assert_int_equal(commit_n(h, 8, &gen), 0);
	assert_int_equal(gen, 3);
	/* a read-only reader holds no entry of the reader table */
	struct entries e = entries_of(h, pid, 0);
	assert_int_equal(e.alive_with_pid + e.dead_with_pid, 0);
	assert_int_equal(write_full(down[1], "q", 1), 0);
	assert_child_ok(pid);
	close(up[0]);
	close(down[1]);
	/* and nothing it tried changed anything */
	assert_int_equal(shmcfg_generation(h), 3);
	assert_int_equal(get_i(h, T_A), 8);
	assert_int_equal(shmcfg_check(h, true, print_problem, NULL), 0);
	assert_int_equal(stat_of(name).st_uid, 0);
}

static void test_0640_group_reads_only(void **state)
{
	(void)state;
	const char *name = new_name("perm-0640");
	keep(test_create(name, &(shmcfg_create_opts){.mode = 0640, .gid = TEST_GID}));
	run_read_only_child(name, NOBODY, TEST_GID);
	/* the same user outside the group is shut out */
	struct other_arg a = {name, NOBODY, NOBODY, -1, -1};
	assert_child_ok(spawn(shut_out_main, &a));
}

static void test_0644_others_read_only(void **state)
{
	(void)state;
	const char *name = new_name("perm-0644");
	keep(test_create(name, &(shmcfg_create_opts){.mode = 0644}));
	run_read_only_child(name, NOBODY, NOBODY);
}

/* ------------------------------------------------------------------ */
/* 4. Symlinks                                                        */
/* ------------------------------------------------------------------ */

static const char precious[] = "precious: not a segment\n";

static void make_target(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write_full(fd, precious, sizeof precious - 1), 0);
	close(fd);
}

static void assert_target_untouched(const char *path)
{
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, (off_t)(sizeof precious - 1));
	assert_int_equal(st.st_mode & 07777, 0644);
	char buf[64] = "";
	int fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(read(fd, buf, sizeof buf), (ssize_t)(sizeof precious - 1));
	close(fd);
	assert_memory_equal(buf, precious, sizeof precious - 1);
}

static void test_symlink_not_followed(void **state)
{
	(void)state;
	const char *name = new_name("perm-link");
	char link[300];
	seg_path(name, link, sizeof link);
	const char *target = new_path("target", NULL);
	make_target(target);
	(void)unlink(link);
	assert_int_equal(symlink(target, link), 0);
	new_path(NULL, link); /* removed by the teardown */
	shmcfg_schema *s = test_schema();
	shmcfg *h = NULL;
	/* create: O_EXCL on the link itself */
	int r = shmcfg_create(name, s, &(shmcfg_create_opts){.flags = SHMCFG_CREATE_NO_ENV}, &h);
	if (r != -EEXIST && r != -ELOOP)
		fail_msg("create over a symlink: %d (%s)", r, shmcfg_errname(r));
	assert_null(h);
	assert_target_untouched(target);
	/* attach: never through the link */
	r = shmcfg_attach(name, 0, NULL, &h);
	assert_int_equal(r, -ELOOP);
	r = shmcfg_attach(name, SHMCFG_ATTACH_RDONLY, NULL, &h);
	assert_int_equal(r, -ELOOP);
	assert_null(h);
	assert_target_untouched(target);
	/* a link to a real segment is not followed either */
	const char *real = new_name("perm-real");
	keep(test_create(real, NULL));
	char real_path[300];
	seg_path(real, real_path, sizeof real_path);
	assert_int_equal(unlink(link), 0);
	assert_int_equal(symlink(real_path, link), 0);
	assert_int_equal(shmcfg_attach(name, SHMCFG_ATTACH_RDONLY, NULL, &h), -ELOOP);
	/* a dangling link: its target is not created */
	const char *absent = new_path("absent", NULL);
	(void)unlink(absent);
	assert_int_equal(unlink(link), 0);
	assert_int_equal(symlink(absent, link), 0);
	r = shmcfg_create(name, s, &(shmcfg_create_opts){.flags = SHMCFG_CREATE_NO_ENV}, &h);
	if (r != -EEXIST && r != -ELOOP)
		fail_msg("create over a dangling symlink: %d (%s)", r, shmcfg_errname(r));
	assert_int_equal(access(absent, F_OK), -1);
	/* force replaces the link itself, never what it points to */
	assert_int_equal(unlink(link), 0);
	assert_int_equal(symlink(target, link), 0);
	r = shmcfg_create(name, s, &(shmcfg_create_opts){.flags = SHMCFG_CREATE_NO_ENV | SHMCFG_CREATE_FORCE}, &h);
	if (r)
		fail_msg("forced create over a symlink: %s: %s", shmcfg_strerror(r), shmcfg_errdetail());
	keep(h);
	struct stat st;
	assert_int_equal(lstat(link, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_target_untouched(target);
	shmcfg_schema_free(s);
}

/* ------------------------------------------------------------------ */
/* 5. Readers the pid does not describe                               */
/* ------------------------------------------------------------------ */

struct pin_arg {
	const char *name;
	int up;
};

/* Attach, pin the current generation with a snapshot, say so, and sleep
 * holding it until killed. */
static int pin_and_sleep_main(void *p)
{
	struct pin_arg *a = p;
	shmcfg *h = NULL;
	int r = shmcfg_attach(a->name, 0, NULL, &h);
	CHECK(r == 0, 2, "attach: %s", shmcfg_strerror(r));
	shmcfg_snapshot *s;
	CHECK(shmcfg_snapshot_acquire(h, &s) == 0, 3, "snapshot");
	int32_t me = (int32_t)getpid();
	CHECK(write_full(a->up, &me, sizeof me) == 0, 4, "pipe");
	for (;;)
		pause();
}

/* This process's start time, /proc/self/stat field 22. */
static uint64_t self_start_time(void)
{
	char buf[1024];
	FILE *f = fopen("/proc/self/stat", "re");
	assert_non_null(f);
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	char *p = strrchr(buf, ')');
	assert_non_null(p);
	for (int field = 2; *p; p++)
		if (*p == ' ' && ++field == 22)
			return strtoull(p + 1, NULL, 10);
	fail_msg("no start time in /proc/self/stat");
	return 0;
}

/* A dead child's entry made to look like a live process's: the parent's own
 * pid and start time. Returns the entry's index. */
/* A child that pins a snapshot of segment `name` and sleeps: its pid, once
 * it has reported its pin. */
static pid_t spawn_pinning_child(const char *name)
{
	int up[2];
	assert_int_equal(pipe(up), 0);
	struct pin_arg a = {name, up[1]};
	pid_t pid = spawn(pin_and_sleep_main, &a);
	close(up[1]);
	int32_t got;
	if (read_full(up[0], &got, sizeof got, CHILD_TIMEOUT_MS))
		fail_msg("the pinning child did not report");
	close(up[0]);
	assert_int_equal(got, pid);
	return pid;
}

static uint32_t dead_entry_with_live_pid(shmcfg *h, const char *name)
{
	pid_t pid = spawn_pinning_child(name);
	struct entries e = entries_of(h, pid, 1);
	assert_int_equal(e.alive_with_pid, 1);
	assert_int_equal(e.pins_gen_with_pid, 1);
	uint32_t idx = e.index;
	assert_int_equal(kill(pid, SIGKILL), 0);
	assert_child_killed(pid);
	/* pid reuse: the dead entry now names a live process (this one, which
	 * holds no entry: it took no snapshot), with its start time */
	struct reader_ent *ent = reader_at(h, idx);
	__atomic_store_n(&ent->pid, (int32_t)getpid(), __ATOMIC_RELAXED);
	__atomic_store_n(&ent->start_time, self_start_time(), __ATOMIC_RELAXED);
	e = entries_of(h, getpid(), 1);
	assert_int_equal(e.alive_with_pid, 0);
	assert_int_equal(e.dead_with_pid, 1);  /* the poked one: dead, whatever its pid says */
	assert_int_equal(e.pins_gen_with_pid, 1);
	return idx;
}

/* A read-only handle, which has no lock object to test a reader's liveness
 * on, reports a killed reader dead (its pid and start time no longer name a
 * process), a live one alive: shmctl stat and check as a read-only user. */
static void test_read_only_sees_a_dead_reader_dead(void **state)
{
	(void)state;
	const char *name = new_name("perm-rodead");
	shmcfg *h = keep(test_create(name, NULL));
	shmcfg *ro = NULL;
	assert_int_equal(shmcfg_attach(name, SHMCFG_ATTACH_RDONLY, NULL, &ro), 0);
	pid_t pid = spawn_pinning_child(name);
	struct entries e = entries_of(ro, pid, 1);
	assert_int_equal(e.alive_with_pid, 1);
	assert_int_equal(kill(pid, SIGKILL), 0);
	assert_child_killed(pid);
	e = entries_of(ro, pid, 1);
	assert_int_equal(e.alive_with_pid, 0);
	assert_int_equal(e.dead_with_pid, 1);
	/* the read-write handle's lock test agrees */
	e = entries_of(h, pid, 1);
	assert_int_equal(e.alive_with_pid, 0);
	assert_int_equal(e.dead_with_pid, 1);
	shmcfg_close(ro);
}

static void test_pid_reuse_commit_reclaims(void **state)
{
	(void)state;
	const char *name = new_name("perm-pidreuse");
	shmcfg *h = keep(test_create(name, &(shmcfg_create_opts){.slots = 2}));
	shmcfg_set_commit_timeout(h, 300);
	(void)dead_entry_with_live_pid(h, name);
	uint64_t gen = 0;
	assert_int_equal(commit_n(h, 1, &gen), 0); /* generation 2, the free slot */
	/* generation 3 needs the slot the dead entry pins */
	int r = commit_n(h, 2, &gen);
	if (r)
		fail_msg("commit over a dead entry carrying a live pid: %s: %s", shmcfg_strerror(r),
			 shmcfg_errdetail());
	assert_int_equal(gen, 3);
	struct entries e = entries_of(h, getpid(), 1);
	assert_int_equal(e.dead_with_pid, 0);
	assert_int_equal(e.pins_gen_with_pid, 0);
	/* the one left is the writer's own (its commits' lock owner: wlock.c) */
	assert_int_equal(e.used, 1);
	assert_int_equal(e.alive_with_pid, 1);
	assert_int_equal(shmcfg_check(h, true, print_problem, NULL), 0);
}

struct reaped {
	int n;
	pid_t pid;
	uint32_t index;
};

static void on_reaped(const shmcfg_reader *r, void *ud)
{
	struct reaped *x = ud;
	x->n++;
	x->pid = r->pid;
	x->index = r->index;
}

static void test_pid_reuse_gc_reclaims(void **state)
{
	(void)state;
	const char *name = new_name("perm-pidreuse-gc");
	shmcfg *h = keep(test_create(name, NULL));
	uint32_t idx = dead_entry_with_live_pid(h, name);
	struct reaped x = {0};
	assert_int_equal(shmcfg_gc(h, on_reaped, &x), 1);
	assert_int_equal(x.n, 1);
	assert_int_equal(x.pid, getpid()); /* reclaimed although its pid is alive */
	assert_int_equal(x.index, idx);
	struct entries e = entries_of(h, getpid(), 0);
	assert_int_equal(e.used, 0);
	assert_int_equal(e.dead_with_pid, 0);
	assert_int_equal(shmcfg_gc(h, NULL, NULL), 0);
}

/* In a new pid namespace: the child unshares, then forks the reader (pid 1
 * there), sends its outer pid up and waits for it. */
static int namespace_main(void *p)
{
	struct pin_arg *a = p;
	CHECK(unshare(CLONE_NEWPID) == 0, 2, "unshare(CLONE_NEWPID): %s", strerror(errno));
	pid_t g = fork();
	CHECK(g >= 0, 3, "fork: %s", strerror(errno));
	if (g == 0)
		_exit(pin_and_sleep_main(a));
	int32_t outer = (int32_t)g;
	CHECK(write_full(a->up, &outer, sizeof outer) == 0, 4, "pipe");
	int st;
	while (waitpid(g, &st, 0) < 0 && errno == EINTR)
		;
	return 0;
}

static void test_pid_namespace_reader(void **state)
{
	(void)state;
	const char *name = new_name("perm-pidns");
	shmcfg *h = keep(test_create(name, &(shmcfg_create_opts){.slots = 2}));
	shmcfg_set_commit_timeout(h, 300);
	int up[2];
	assert_int_equal(pipe(up), 0);
	struct pin_arg a = {name, up[1]};
	pid_t child = spawn(namespace_main, &a);
	close(up[1]);
	/* the child's message (the reader's outer pid) and the reader's (its
	 * own pid, inside the namespace), in either order */
	int32_t outer = 0, inner = 0;
	if (read_full(up[0], &outer, sizeof outer, CHILD_TIMEOUT_MS) ||
	    read_full(up[0], &inner, sizeof inner, CHILD_TIMEOUT_MS)) {
		assert_child_ok(child);
		fail_msg("the namespaced reader did not report");
	}
	close(up[0]);
	if (outer == 1) {
		outer = inner;
		inner = 1;
	}
	assert_int_equal(inner, 1); /* the first process of the new namespace */
	assert_true(outer > 1);
	assert_true(kids[nkids - 1] == child && nkids < MAX_KIDS);
	kids[nkids++] = outer; /* killed by the teardown if we fail */
	/* alive, by its OFD lock, under its namespace-local pid */
	struct entries e = entries_of(h, 1, 1);
	assert_int_equal(e.alive_with_pid, 1);
	assert_int_equal(e.pins_gen_with_pid, 1);
	assert_int_equal(entries_of(h, outer, 0).alive_with_pid, 0);
	/* not reaped while alive */
	assert_int_equal(shmcfg_gc(h, NULL, NULL), 0);
	uint64_t gen = 0;
	assert_int_equal(commit_n(h, 1, &gen), 0);
	assert_int_equal(gen, 2);
	int r = commit_n(h, 2, &gen);
	assert_int_equal(r, SHMCFG_E_BUSY);
	if (!strstr(shmcfg_errdetail(), "pid 1 ("))
		fail_msg("busy detail does not name pid 1: %s", shmcfg_errdetail());
	assert_int_equal(shmcfg_generation(h), 2);
	assert_int_equal(entries_of(h, 1, 1).alive_with_pid, 1);
	/* killed: not kept */
	assert_int_equal(kill(outer, SIGKILL), 0);
	untrack(outer);
	assert_child_ok(child); /* it waited for the reader: the reader is gone */
	r = commit_n(h, 2, &gen);
	if (r)
		fail_msg("commit after the namespaced reader died: %s: %s", shmcfg_strerror(r),
			 shmcfg_errdetail());
	assert_int_equal(gen, 3);
	e = entries_of(h, 1, 1);
	assert_int_equal(e.alive_with_pid + e.dead_with_pid, 0);
	assert_int_equal(shmcfg_check(h, true, print_problem, NULL), 0);
}

/* ------------------------------------------------------------------ */
/* 6. A full reader table                                             */
/* ------------------------------------------------------------------ */

static void test_full_reader_table_falls_back_to_copies(void **state)
{
	(void)state;
	enum { R = 3 };
	const char *name = new_name("perm-full");
	shmcfg *h = keep(test_create(name, &(shmcfg_create_opts){.readers = R, .slots = 2}));
	/* a child takes an entry and dies holding a pin */
	int up[2];
	assert_int_equal(pipe(up), 0);
	struct pin_arg a = {name, up[1]};
	pid_t pid = spawn(pin_and_sleep_main, &a);
	close(up[1]);
	int32_t got;
	if (read_full(up[0], &got, sizeof got, CHILD_TIMEOUT_MS))
		fail_msg("the pinning child did not report");
	close(up[0]);
	assert_int_equal(snapshot_once(h), 0);
	shmcfg *h2 = NULL;
	assert_int_equal(shmcfg_attach(name, 0, NULL, &h2), 0);
	assert_int_equal(snapshot_once(keep(h2)), 0);
	/* full of live entries: attach still works, its snapshots copy */
	shmcfg *extra = NULL;
	int r = shmcfg_attach(name, 0, NULL, &extra);
	if (r)
		fail_msg("attach with a full reader table: %s: %s", shmcfg_strerror(r), shmcfg_errdetail());
	keep(extra);
	shmcfg_snapshot *snap;
	assert_int_equal(shmcfg_snapshot_acquire(extra, &snap), 0);
	shmcfg_value v;
	assert_int_equal(shmcfg_snapshot_get(snap, T_A, &v), 0);
	assert_int_equal(v.u.i, 0);
	assert_string_equal(shmcfg_errdetail(), ""); /* copying is no error */
	shmcfg_info st;
	assert_int_equal(shmcfg_stat(h, &st), 0);
	assert_int_equal(st.copy_fallbacks, 1);
	assert_int_equal(st.readers_hwm, R);
	/* a writer needs no entry: the handle without one commits */
	uint64_t gen;
	assert_int_equal(commit_n(extra, 5, &gen), 0);
	assert_int_equal(gen, 2);
	/* and its held copy did not change */
	assert_int_equal(shmcfg_snapshot_generation(snap), 1);
	assert_int_equal(shmcfg_snapshot_get(snap, T_A, &v), 0);
	assert_int_equal(v.u.i, 0);
	shmcfg_snapshot_release(snap);
	/* read-only attaches need no entry */
	shmcfg *ro = NULL;
	assert_int_equal(shmcfg_attach(name, SHMCFG_ATTACH_RDONLY, NULL, &ro), 0);
	assert_int_equal(get_i(keep(ro), T_A), 5);
	/* the dead entry is reaped first: the next claim gets it, its pin gone */
	assert_int_equal(kill(pid, SIGKILL), 0);
	assert_child_killed(pid);
	shmcfg *h3 = NULL;
	assert_int_equal(shmcfg_attach(name, 0, NULL, &h3), 0);
	r = snapshot_once(keep(h3));
	if (r)
		fail_msg("snapshot over a dead entry: %s: %s", shmcfg_strerror(r), shmcfg_errdetail());
	struct entries e = entries_of(h, pid, 1);
	assert_int_equal(e.alive_with_pid + e.dead_with_pid, 0);
	assert_int_equal(shmcfg_stat(h, &st), 0);
	assert_int_equal(st.copy_fallbacks, 1); /* h3 found an entry */
	shmcfg_set_commit_timeout(h, 300);
	assert_int_equal(commit_n(h, 1, &gen), 0); /* needs the slot the dead child pinned */
	assert_int_equal(gen, 3);
}

/* ------------------------------------------------------------------ */

#ifdef TIER_ROOT
/* Whether this process may create pid namespaces (root, and not forbidden
 * by the container it runs in). */
static bool can_unshare_pid(void)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		return false;
	if (pid == 0)
		_exit(unshare(CLONE_NEWPID) == 0 ? 0 : 1);
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}
#endif

/*
 * Every case and its tier. This file builds two programs: tests/test_perms
 * (make check) runs the cases any user can run; tests/test_perms_root
 * (make regtest, -DTIER_ROOT) the ones that need root, and as another user
 * says so and runs none.
 */
enum { ANY_USER, ROOT_ONLY, ROOT_PIDNS };
static const struct {
	struct CMUnitTest test;
	int needs;
} all_tests[] = {
#define CASE(fn, who) {cmocka_unit_test_teardown(fn, perms_teardown), who}
	CASE(test_bad_names_rejected, ANY_USER),
	CASE(test_modes_exact, ANY_USER),
	CASE(test_read_only_sees_a_dead_reader_dead, ANY_USER),
	CASE(test_pid_reuse_commit_reclaims, ANY_USER),
	CASE(test_pid_reuse_gc_reclaims, ANY_USER),
	CASE(test_full_reader_table_falls_back_to_copies, ANY_USER),
	CASE(test_group_option, ROOT_ONLY),
	CASE(test_group_option_denied, ROOT_ONLY),
	CASE(test_0600_shuts_out_others, ROOT_ONLY),
	CASE(test_0640_group_reads_only, ROOT_ONLY),
	CASE(test_0644_others_read_only, ROOT_ONLY),
	CASE(test_symlink_not_followed, ROOT_ONLY),
	CASE(test_pid_namespace_reader, ROOT_PIDNS),
#undef CASE
};

int main(void)
{
	if (getenv("TEST_FILTER"))
		cmocka_set_test_filter(getenv("TEST_FILTER"));
#ifdef TIER_ROOT
	if (geteuid() != 0) {
		/* automake's TAP driver counts a plan of 0 as a skip */
		printf("1..0 # SKIP not root: the tests of other users, groups, symlinks and pid "
		       "namespaces need root\n");
		return 0;
	}
	const bool pidns = can_unshare_pid();
	if (!pidns)
		fprintf(stderr, "# unshare(CLONE_NEWPID) is not permitted here: "
				"test_pid_namespace_reader left out\n");
#endif
	struct CMUnitTest tests[sizeof all_tests / sizeof all_tests[0]];
	size_t n = 0;
	for (size_t i = 0; i < sizeof all_tests / sizeof all_tests[0]; i++) {
#ifdef TIER_ROOT
		if (all_tests[i].needs == ROOT_ONLY || (all_tests[i].needs == ROOT_PIDNS && pidns))
#else
		if (all_tests[i].needs == ANY_USER)
#endif
			tests[n++] = all_tests[i].test;
	}
#ifdef TIER_ROOT
	return _cmocka_run_group_tests("test_perms_root", tests, n, NULL, NULL);
#else
	return _cmocka_run_group_tests("test_perms", tests, n, NULL, NULL);
#endif
}
