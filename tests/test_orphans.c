/* SPDX-License-Identifier: MIT */
/*
 * Lock objects go with their segments (doc/reliability.md, "Orphaned lock
 * objects"): every removal the library makes takes the lock object with it,
 * a damaged segment's included; what other removals leave (rm, unlink(2)) is
 * found and removed by shmcfg_orphans(), which never touches the lock object
 * of a segment that exists or is being created, another incarnation's, a
 * file that is not ours, or (unless root) another user's.
 */
#include <fcntl.h>
#include <grp.h>
#include <sys/stat.h>

#include "common.h"
#include "proc.h"

static void seg_path(const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "/dev/shm/shmcfg.%s", name);
}

struct named_count {
	const char *name;
	int *n;
};

static void count_named(const shmcfg_orphan *o, void *ud)
{
	const struct named_count *c = ud;
	if (!strcmp(o->name, c->name))
		++*c->n;
}

static void count_orphan(const shmcfg_orphan *o, void *ud)
{
	(void)o;
	++*(int *)ud;
}

/* A header damaged as each test_layout case damages it, then shmcfg_unlink:
 * its lock object is gone too, though the header names no instance. */
enum damage { BAD_MAGIC, BAD_VERSION, TRUNCATED, ZEROED };

static void damaged_case(enum damage how)
{
	const char *name = new_name("orph-damaged");
	shmcfg *h = test_create(name, NULL);
	shmcfg_close(h);
	assert_int_equal(locks_of(name), 1);
	char p[300];
	seg_path(name, p, sizeof p);
	int fd = open(p, O_RDWR);
	assert_true(fd >= 0);
	uint64_t junk = 0x0123456789abcdefull;
	uint32_t ver = 9999;
	static const char zeros[4096];
	switch (how) {
	case BAD_MAGIC:
		assert_int_equal(pwrite(fd, &junk, sizeof junk, 0), (ssize_t)sizeof junk);
		break;
	case BAD_VERSION:
		assert_int_equal(pwrite(fd, &ver, sizeof ver, 8), (ssize_t)sizeof ver);
		break;
	case TRUNCATED:
		assert_int_equal(ftruncate(fd, 100), 0);
		break;
	case ZEROED:
		assert_int_equal(pwrite(fd, zeros, sizeof zeros, 0), (ssize_t)sizeof zeros);
		break;
	}
	close(fd);
	/* nobody can attach it, and it is no orphan while it is there */
	assert_int_equal(shmcfg_orphans(name, 0, NULL, NULL), 0);
	assert_int_equal(shmcfg_unlink(name), 0);
	assert_int_equal(access(p, F_OK), -1);
	assert_int_equal(locks_of(name), 0);
}

static void test_damaged_segment_removed_with_its_lock_object(void **state)
{
	(void)state;
	damaged_case(BAD_MAGIC);
	damaged_case(BAD_VERSION);
	damaged_case(TRUNCATED);
	damaged_case(ZEROED);
}

/* A damaged segment replaced by a forced create: one lock object is left,
 * the new segment's, and the segment works. */
static void test_forced_create_over_damaged_leaves_one(void **state)
{
	(void)state;
	const char *name = new_name("orph-force");
	shmcfg_close(test_create(name, NULL));
	char p[300];
	seg_path(name, p, sizeof p);
	int fd = open(p, O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 64), 0);
	close(fd);
	shmcfg *h = keep(test_create(name, NULL)); /* forces */
	assert_int_equal(locks_of(name), 1);
	assert_int_equal(commit_n(h, 4, NULL), 0);
	drop(h);
}

/* A segment removed with unlink(2): its lock object is listed, then removed;
 * a live segment's never is. */
static void test_plain_unlink_leaves_an_orphan_that_is_found(void **state)
{
	(void)state;
	const char *gone = new_name("orph-gone"), *live = new_name("orph-live");
	shmcfg_close(test_create(gone, NULL));
	shmcfg *h = keep(test_create(live, NULL));
	char p[300];
	seg_path(gone, p, sizeof p);
	assert_int_equal(unlink(p), 0);
	assert_int_equal(locks_of(gone), 1);
	int n = 0;
	assert_int_equal(shmcfg_orphans(gone, 0, count_orphan, &n), 1);
	assert_int_equal(n, 1);
	assert_int_equal(shmcfg_orphans(live, 0, NULL, NULL), 0);
	/* every name's: ours is among them (other tests may have theirs) */
	int mine = 0;
	assert_true(shmcfg_orphans(NULL, 0, count_named, &(struct named_count){gone, &mine}) >= 1);
	assert_int_equal(mine, 1);
	/* listing removed nothing; removing reports it removed */
	assert_int_equal(locks_of(gone), 1);
	assert_int_equal(shmcfg_orphans(gone, SHMCFG_ORPHANS_REMOVE, NULL, NULL), 1);
	assert_int_equal(locks_of(gone), 0);
	assert_int_equal(shmcfg_orphans(gone, SHMCFG_ORPHANS_REMOVE, NULL, NULL), 0);
	/* the live one still works */
	assert_int_equal(locks_of(live), 1);
	assert_int_equal(commit_n(h, 5, NULL), 0);
	drop(h);
}

/* The name removed by hand and created again: only the old incarnation's
 * lock object is an orphan. */
static void test_only_the_old_incarnation_is_orphaned(void **state)
{
	(void)state;
	const char *name = new_name("orph-again");
	shmcfg_close(test_create(name, NULL));
	char p[300];
	seg_path(name, p, sizeof p);
	assert_int_equal(unlink(p), 0);
	shmcfg *h = NULL;
	shmcfg_schema *s = test_schema();
	assert_int_equal(shmcfg_create(name, s, &(shmcfg_create_opts){.flags = SHMCFG_CREATE_NO_ENV}, &h), 0);
	shmcfg_schema_free(s);
	keep(h);
	assert_int_equal(locks_of(name), 2);
	assert_int_equal(shmcfg_orphans(name, SHMCFG_ORPHANS_REMOVE, NULL, NULL), 1);
	assert_int_equal(locks_of(name), 1);
	/* the remaining one is the live segment's: commits and a second attach work */
	assert_int_equal(commit_n(h, 6, NULL), 0);
	shmcfg *h2 = NULL;
	assert_int_equal(shmcfg_attach(name, 0, NULL, &h2), 0);
	assert_int_equal(commit_n(h2, 7, NULL), 0);
	shmcfg_close(h2);
	drop(h);
}

struct creator_arg {
	const char *name, *point;
};

static int stopped_creator_main(void *p)
{
	const struct creator_arg *a = p;
	char spec[64];
	snprintf(spec, sizeof spec, "%s:stop", a->point);
	setenv("SHMCFG_FAULT", spec, 1);
	shmcfg *h = NULL;
	shmcfg_schema *s = test_schema();
	int r = shmcfg_create(a->name, s, &(shmcfg_create_opts){.flags = SHMCFG_CREATE_NO_ENV}, &h);
	CHECK(r == 0, 2, "create: %s", shmcfg_strerror(r));
	shmcfg_schema_free(s);
	shmcfg_close(h);
	return 0;
}

/* A creation stopped between its lock object and its header, with the
 * header written and not yet ready, and before `ready`: every scan leaves
 * its lock object alone, and the creation completes into a working segment. */
static void test_creation_under_way_is_left_alone(void **state)
{
	(void)state;
	const char *points[] = {"create.locked", "create.schema", "create.gen1"};
	const char *tags[] = {"orph-creating1", "orph-creating2", "orph-creating3"};
	for (int k = 0; k < 3; k++) {
		struct creator_arg a = {new_name(tags[k]), points[k]};
		pid_t pid = spawn(stopped_creator_main, &a);
		assert_child_stops(pid, points[k]);
		assert_int_equal(locks_of(a.name), 1);
		assert_int_equal(shmcfg_orphans(a.name, SHMCFG_ORPHANS_REMOVE, NULL, NULL), 0);
		/* nor among every name's (listed only: removing every orphan of
		 * the host would race the tests running alongside) */
		int mine = 0;
		assert_true(shmcfg_orphans(NULL, 0, count_named, &(struct named_count){a.name, &mine}) >= 0);
		assert_int_equal(mine, 0);
		assert_int_equal(locks_of(a.name), 1);
		assert_int_equal(kill(pid, SIGCONT), 0);
		assert_child_ok(pid);
		shmcfg *h = NULL;
		assert_int_equal(shmcfg_attach(a.name, 0, NULL, &h), 0);
		assert_int_equal(commit_n(h, 8, NULL), 0);
		shmcfg_close(h);
	}
}

/* Files under the lock prefix that are not our lock files (other bytes,
 * another instance than the name says, a directory) are never touched. */
static void test_files_not_ours_are_left(void **state)
{
	(void)state;
	const char *name = new_name("orph-fake");
	const char *hex = "00112233445566778899aabbccddeeff";
	char p1[300], p2[300], p3[300];
	snprintf(p1, sizeof p1, "/dev/shm/shmcfg-lock.%s.%s", name, hex);
	snprintf(p2, sizeof p2, "/dev/shm/shmcfg-lock.%s-b.%s", name, hex);
	snprintf(p3, sizeof p3, "/dev/shm/shmcfg-lock.%s-c.%s", name, hex);
	int fd = open(p1, O_RDWR | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "not a lock file, same size", 24), 24);
	close(fd);
	/* a lock file's magic, but another instance id than its name says */
	struct {
		uint64_t magic;
		uint8_t inst[16];
	} lf = {0x4b434f4c47464353ULL, {1, 2, 3}};
	fd = open(p2, O_RDWR | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, &lf, sizeof lf), (ssize_t)sizeof lf);
	assert_int_equal(ftruncate(fd, 4096), 0); /* a lock object's size (LOCK_FILE_BYTES) */
	close(fd);
	assert_int_equal(mkdir(p3, 0700), 0);
	char nb[100], nc[100];
	snprintf(nb, sizeof nb, "%s-b", name);
	snprintf(nc, sizeof nc, "%s-c", name);
	assert_int_equal(shmcfg_orphans(name, SHMCFG_ORPHANS_REMOVE, NULL, NULL), 0);
	assert_int_equal(shmcfg_orphans(nb, SHMCFG_ORPHANS_REMOVE, NULL, NULL), 0);
	assert_int_equal(shmcfg_orphans(nc, SHMCFG_ORPHANS_REMOVE, NULL, NULL), 0);
	int left = access(p1, F_OK) == 0 && access(p2, F_OK) == 0 && access(p3, F_OK) == 0;
	unlink(p1);
	unlink(p2);
	rmdir(p3);
	assert_true(left);
}

static int other_user_main(void *p)
{
	const char *name = p;
	CHECK(setgroups(0, NULL) == 0 && setgid(65534) == 0 && setuid(65534) == 0, 2, "drop to 65534");
	/* root's orphan: not ours, neither listed nor removed */
	int n = shmcfg_orphans(name, SHMCFG_ORPHANS_REMOVE, NULL, NULL);
	CHECK(n == 0, 3, "another user's orphan: %d found", n);
	return 0;
}

/* An orphan of root's survives another user's scan; root removes it. */
static void test_other_users_orphans_left(void **state)
{
	(void)state;
	if (geteuid() != 0) {
		skip();
		return;
	}
	const char *name = new_name("orph-root");
	shmcfg_close(test_create(name, NULL));
	char p[300];
	seg_path(name, p, sizeof p);
	assert_int_equal(unlink(p), 0);
	assert_child_ok(spawn(other_user_main, (void *)name));
	assert_int_equal(locks_of(name), 1);
	assert_int_equal(shmcfg_orphans(name, SHMCFG_ORPHANS_REMOVE, NULL, NULL), 1);
	assert_int_equal(locks_of(name), 0);
}

/* Bad arguments: one error each, nothing removed. */
static void test_bad_arguments(void **state)
{
	(void)state;
	assert_int_equal(shmcfg_orphans("../x", 0, NULL, NULL), -EINVAL);
	assert_int_equal(shmcfg_orphans(NULL, 0x2, NULL, NULL), -EINVAL);
	assert_non_null(strstr(shmcfg_errdetail(), "unknown bits"));
}

int main(void)
{
	unsetenv("SHMCFG_FAULT");
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_damaged_segment_removed_with_its_lock_object, teardown),
		cmocka_unit_test_teardown(test_forced_create_over_damaged_leaves_one, teardown),
		cmocka_unit_test_teardown(test_plain_unlink_leaves_an_orphan_that_is_found, teardown),
		cmocka_unit_test_teardown(test_only_the_old_incarnation_is_orphaned, teardown),
		cmocka_unit_test_teardown(test_creation_under_way_is_left_alone, teardown),
		cmocka_unit_test_teardown(test_files_not_ours_are_left, teardown),
		cmocka_unit_test_teardown(test_other_users_orphans_left, teardown),
		cmocka_unit_test(test_bad_arguments),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
