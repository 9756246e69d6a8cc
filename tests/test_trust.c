/* SPDX-License-Identifier: MIT */
/* Trust boundaries and lifecycle: what other users, strangers, forks, crowds
 * and removals may and may not do to the processes of a segment.
 *
 *  1. Read-only users stop or delay no one: the writer lock and reader
 *     liveness live on a companion lock object /dev/shm/shmcfg-lock.NAME
 *     that only the users who may write the segment can open (its mode is
 *     the segment's write classes), owned like the segment and removed with
 *     it; OFD read locks taken on the segment by a read-only user block no
 *     commit, no attach and no reclamation.
 *  2. Waits are bounded: a read-only user that requeues the futex word's
 *     waiters to a word of its own delays a waiter by at most a re-check.
 *  3. Strangers cannot hang or fool anyone: a FIFO, socket or directory of
 *     the segment's name is refused at once (SHMCFG_E_MAGIC); a segment owned
 *     by another user (not root) is refused (SHMCFG_E_OWNER) unless that
 *     owner is expected; another user's segment or lock object makes a
 *     creation fail clearly; a sparse object is refused before it can fill
 *     /dev/shm; a current slot that never validates fails reads at once.
 *  4. Lifecycle: removing or replacing a segment (shmcfg_unlink, a forced
 *     create, plain unlink(2)) retires it: waiters return SHMCFG_E_RETIRED,
 *     shmcfg_retired() says so, reads keep the last values, and
 *     shmcfg_reattach() moves to the new segment; shmcfg_attached_pids()
 *     names the processes that have a segment mapped.
 *  5. A crowd never locks anyone out: with 16 reader entries, 1,000
 *     processes attach read-write, hold whole snapshots across commits, and
 *     a writer commits while the table is full.
 *  6. Fork: a child's release of an inherited snapshot does not unpin the
 *     parent's; a forked child that never used shmcfg does not keep its dead
 *     parent's reader entry alive.
 *  7. A writer that dies between marking a slot busy and re-checking the pins
 *     does not let the next writer overwrite a snapshot in use (fault points
 *     commit.chosen and commit.busy, SHMCFG_FAULT=point[:n][:stop],...).
 *
 * Tests that need other users (root: children drop to uid 65534 or 65533
 * after setgroups(0)) are tests/test_trust_root, run by make regtest (main()
 * lists each case's tier); as another user it runs none and says so (a plan
 * of 0, which automake's TAP driver counts as a skip). The fault-point test
 * is left out of the TAP plan when the fault points are not compiled in:
 * cmocka's skip() prints "not ok # SKIP", which that driver counts as a
 * failure.
 *
 * The functions of the trust and lifecycle API are referenced weakly, so that
 * this program links against a library that does not have them yet and
 * reports their absence as a failure of the tests that use them.
 *
 * Children never use cmocka: they report failure through their exit status
 * and a "# child ..." line on stderr; the parent asserts on the status.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>

#include "common.h"
#include "proc.h"
#include "internal.h" /* the header's futex word, reader entries and slots */

#pragma weak shmcfg_attach_with
#pragma weak shmcfg_retired
#pragma weak shmcfg_reattach
#pragma weak shmcfg_attached_pids

#define NOBODY 65534
#define OTHER_UID 65533
#define TEST_GID 4242        /* a group no process here belongs to */
#define SHORT_TIMEOUT_MS 300 /* commit timeout where a commit is expected to fail */
#define TEST_ALARM_S 50      /* a test that hangs kills the program: the plan comes up short */

/* ------------------------------------------------------------------ */
/* Helpers                                                            */
/* ------------------------------------------------------------------ */

static char paths[8][320]; /* files, FIFOs, sockets and directories to remove */
static int npaths;
static pid_t mass[256];    /* the crowd of test 5: not in proc.h's small table */
static int nmass;
static mode_t saved_umask = (mode_t)-1;

static const char *add_path(const char *path)
{
	assert_true(npaths < 8);
	snprintf(paths[npaths], sizeof paths[0], "%s", path);
	return paths[npaths++];
}

static void seg_path(const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "/dev/shm/shmcfg.%.200s", name);
}

/* The lock object's path: /dev/shm/shmcfg-lock.NAME.INSTANCE, the instance
 * id read from the segment's header (a name nobody can know in advance).
 * Without a segment, a name no lock object has. */
static void lock_path(const char *name, char *buf, size_t len)
{
	char seg[256];
	seg_path(name, seg, sizeof seg);
	struct seg_header hd = {0};
	int fd = open(seg, O_RDONLY | O_NONBLOCK);
	if (fd >= 0) {
		if (pread(fd, &hd, sizeof hd, 0) != (ssize_t)sizeof hd)
			memset(&hd, 0, sizeof hd);
		close(fd);
	}
	char p[PATH_BYTES];
	shmcfg__lock_path(name, hd.instance, p);
	snprintf(buf, len, "%s", p);
}

static int trust_setup(void **state)
{
	(void)state;
	alarm(TEST_ALARM_S);
	return 0;
}

/* Kill what a failed test left, close, unlink segments and lock objects. */
static int trust_teardown(void **state)
{
	if (saved_umask != (mode_t)-1) {
		umask(saved_umask);
		saved_umask = (mode_t)-1;
	}
	while (nmass > 0) {
		pid_t pid = mass[--nmass];
		kill(pid, SIGKILL);
		(void)waitpid(pid, NULL, 0);
	}
	while (npaths > 0)
		(void)remove(paths[--npaths]);
	int n = nnames;
	teardown(state);
	for (int i = 0; i < n; i++) {
		char p[320];
		seg_path(names[i], p, sizeof p);
		(void)unlink(p);
		lock_path(names[i], p, sizeof p);
		(void)unlink(p);
	}
	alarm(0);
	return 0;
}

/* The parent's check that a function of the new API exists. */
#define NEED(fn)                                                                                 \
	do {                                                                                     \
		if (!(fn))                                                                       \
			fail_msg("%s() is not implemented by this library", #fn);               \
	} while (0)

/* Become uid/gid with no supplementary groups; 0 or an errno. */
static int drop_to(uid_t uid, gid_t gid)
{
	if (setgroups(0, NULL) < 0 || setgid(gid) < 0 || setuid(uid) < 0)
		return errno;
	if (geteuid() != uid || getegid() != gid || setuid(0) == 0)
		return EPERM; /* privileges not dropped for good */
	return 0;
}


static struct stat lstat_or_fail(const char *path)
{
	struct stat st;
	if (lstat(path, &st) < 0)
		fail_msg("lstat %s: %s", path, strerror(errno));
	return st;
}

static void assert_gone(const char *path, const char *what)
{
	if (access(path, F_OK) == 0 || errno != ENOENT)
		fail_msg("%s: %s is still there", what, path);
}

/* A child that is told what to do: the name, the user to become, pipes. */
struct other_arg {
	const char *name;
	uid_t uid;
	gid_t gid;
	int up, down; /* pipe ends: to the parent, from the parent */
	int mode;     /* what the child does, by test */
};

/* ------------------------------------------------------------------ */
/* 1. Read-only users stop or delay no one                            */
/* ------------------------------------------------------------------ */

static const struct {
	mode_t seg, lock;
} lock_modes[] = {{0644, 0600}, {0664, 0660}, {0666, 0666}, {0640, 0600}, {0600, 0600}};

/* The lock object: the segment's write classes, its owner and group; gone
 * with shmcfg_unlink. */
static void test_lock_object_modes_follow_writers(void **state)
{
	(void)state;
	const char *name = new_name("trust-lockmode");
	char sp[320], lp[320];
	seg_path(name, sp, sizeof sp);
	saved_umask = umask(077); /* must not narrow either mode */
	for (size_t i = 0; i < sizeof lock_modes / sizeof lock_modes[0]; i++) {
		gid_t gid = geteuid() == 0 ? TEST_GID : (gid_t)-1;
		shmcfg *h = keep(test_create(name, &(shmcfg_create_opts){.mode = lock_modes[i].seg, .gid = gid}));
		lock_path(name, lp, sizeof lp);
		struct stat seg = lstat_or_fail(sp);
		assert_int_equal(seg.st_mode & 07777, lock_modes[i].seg);
		struct stat lk;
		if (lstat(lp, &lk) < 0)
			fail_msg("segment of mode %03o: no lock object %s: %s", (unsigned)lock_modes[i].seg, lp,
				 strerror(errno));
		if (!S_ISREG(lk.st_mode))
			fail_msg("lock object %s is not a regular file (mode %o)", lp, (unsigned)lk.st_mode);
		if ((lk.st_mode & 07777) != lock_modes[i].lock)
			fail_msg("segment of mode %03o: lock object of mode %03o, expected %03o",
				 (unsigned)lock_modes[i].seg, (unsigned)(lk.st_mode & 07777),
				 (unsigned)lock_modes[i].lock);
		if (lk.st_uid != seg.st_uid || lk.st_gid != seg.st_gid)
			fail_msg("lock object owned by %d:%d, the segment by %d:%d", (int)lk.st_uid,
				 (int)lk.st_gid, (int)seg.st_uid, (int)seg.st_gid);
		drop(h);
	}
	umask(saved_umask);
	saved_umask = (mode_t)-1;
	assert_int_equal(shmcfg_unlink(name), 0);
	assert_gone(sp, "shmcfg_unlink");
	assert_gone(lp, "shmcfg_unlink left the lock object");
}

/* A read-only user: the segment opens, the lock object does not. */
static int lock_closed_main(void *p)
{
	struct other_arg *a = p;
	int e = drop_to(a->uid, a->gid);
	CHECK(e == 0, 2, "drop privileges: %s", strerror(e));
	char sp[320], lp[320];
	seg_path(a->name, sp, sizeof sp);
	lock_path(a->name, lp, sizeof lp);
	int fd = open(sp, O_RDONLY | O_NOFOLLOW);
	CHECK(fd >= 0, 3, "open %s O_RDONLY: %s", sp, strerror(errno));
	close(fd);
	const int flags[] = {O_RDONLY, O_RDWR, O_WRONLY};
	const char *fname[] = {"O_RDONLY", "O_RDWR", "O_WRONLY"};
	for (int i = 0; i < 3; i++) {
		fd = open(lp, flags[i] | O_NOFOLLOW);
		int err = errno;
		CHECK(fd < 0 && err == EACCES, 4 + i, "open %s %s as uid %d: %s", lp, fname[i], (int)a->uid,
		      fd >= 0 ? "succeeded" : strerror(err));
	}
	return 0;
}

static void test_lock_object_closed_to_readonly_users(void **state)
{
	(void)state;
	const char *name = new_name("trust-lockclosed");
	keep(test_create(name, &(shmcfg_create_opts){.mode = 0644}));
	struct other_arg a = {name, NOBODY, NOBODY, -1, -1, 0};
	assert_child_ok(spawn(lock_closed_main, &a));
	/* group readers of a 0640 segment are read-only users too */
	const char *name2 = new_name("trust-lockclosed-g");
	keep(test_create(name2, &(shmcfg_create_opts){.mode = 0640, .gid = TEST_GID}));
	struct other_arg b = {name2, NOBODY, TEST_GID, -1, -1, 0};
	assert_child_ok(spawn(lock_closed_main, &b));
}

/*
 * A read-only user takes OFD read locks on the whole segment file and holds
 * them. If a write lock on part of the file makes the whole-file lock fail
 * (today's library locks its reader entries there), it read-locks every
 * other byte a lock of the library can sit on: byte 0 and each 64-byte
 * boundary up to the slots. Reports 'L' (whole file) or 'P' (piecewise).
 */
static int read_locker_main(void *p)
{
	struct other_arg *a = p;
	int e = drop_to(a->uid, a->gid);
	CHECK(e == 0, 2, "drop privileges: %s", strerror(e));
	char sp[320];
	seg_path(a->name, sp, sizeof sp);
	int fd = open(sp, O_RDONLY | O_NOFOLLOW);
	CHECK(fd >= 0, 3, "open %s O_RDONLY: %s", sp, strerror(errno));
	struct flock fl = {.l_type = F_RDLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
	char m = 'L';
	if (fcntl(fd, F_OFD_SETLK, &fl) < 0) {
		CHECK(errno == EAGAIN, 4, "F_OFD_SETLK F_RDLCK: %s", strerror(errno));
		const struct seg_header *hd = mmap(NULL, SEG_HEADER_BYTES, PROT_READ, MAP_SHARED, fd, 0);
		CHECK(hd != MAP_FAILED, 5, "mmap: %s", strerror(errno));
		uint64_t end = hd->slots_off;
		for (uint64_t off = 0; off < end; off += 64) {
			fl.l_start = (off_t)off;
			fl.l_len = 1;
			(void)fcntl(fd, F_OFD_SETLK, &fl);
		}
		fl.l_start = (off_t)end;
		fl.l_len = 0;
		(void)fcntl(fd, F_OFD_SETLK, &fl);
		m = 'P';
	}
	CHECK(write_full(a->up, &m, 1) == 0, 6, "pipe");
	for (;;)
		pause();
}

/* Attach read-write, snapshot, send the generation up, sleep holding it. */
static int pin_sleep_main(void *p)
{
	struct other_arg *a = p;
	shmcfg *h = NULL;
	int r = shmcfg_attach(a->name, 0, NULL, &h);
	CHECK(r == 0, 2, "read-write attach: %s", shmcfg_strerror(r));
	shmcfg_snapshot *s;
	r = shmcfg_snapshot_acquire(h, &s);
	CHECK(r == 0, 3, "snapshot: %s", shmcfg_strerror(r));
	CHECK(snapshot_n(s) >= 0, 4, "torn snapshot (%" PRId64 ")", snapshot_n(s));
	uint64_t g = shmcfg_snapshot_generation(s);
	CHECK(write_full(a->up, &g, sizeof g) == 0, 5, "pipe");
	for (;;)
		pause();
}

static void test_readonly_read_locks_block_no_commit(void **state)
{
	(void)state;
	const char *name = new_name("trust-rdlock");
	shmcfg *h = keep(test_create(name, &(shmcfg_create_opts){.mode = 0644, .slots = 2}));
	shmcfg_set_commit_timeout(h, SHORT_TIMEOUT_MS);
	int up[2];
	assert_int_equal(pipe(up), 0);
	struct other_arg a = {name, NOBODY, NOBODY, up[1], -1, 0};
	pid_t locker = spawn(read_locker_main, &a);
	close(up[1]);
	char m = 0;
	if (read_full(up[0], &m, 1, CHILD_TIMEOUT_MS)) {
		assert_child_ok(locker);
		fail_msg("the read-only locker stopped early");
	}
	close(up[0]);
	if (m == 'P')
		fprintf(stderr, "# a write lock on the segment file kept the read-only user from locking "
				"all of it: it read-locked every other byte the library locks\n");
	/* the owner commits */
	uint64_t gen = 0;
	int r = commit_n(h, 1, &gen);
	if (r)
		fail_msg("commit while a read-only user holds OFD read locks on the segment: %s: %s",
			 shmcfg_strerror(r), shmcfg_errdetail());
	assert_int_equal(gen, 2);
	/* a new read-write attach and its snapshot, in another process */
	assert_int_equal(pipe(up), 0);
	struct other_arg b = {name, 0, 0, up[1], -1, 0};
	pid_t reader = spawn(pin_sleep_main, &b);
	close(up[1]);
	uint64_t rg = 0;
	if (read_full(up[0], &rg, sizeof rg, CHILD_TIMEOUT_MS)) {
		assert_child_ok(reader);
		fail_msg("the read-write reader stopped early");
	}
	close(up[0]);
	assert_int_equal(rg, 2);
	/* killed -9 holding its snapshot: gc reclaims its entry */
	assert_int_equal(kill(reader, SIGKILL), 0);
	assert_child_killed(reader);
	r = shmcfg_gc(h, NULL, NULL);
	if (r < 1)
		fail_msg("gc reclaimed %d entries of a reader killed -9, while a read-only user holds read "
			 "locks (%s)", r, r < 0 ? shmcfg_errdetail() : "its entry looks alive");
	/* generation 3 takes the free slot, 4 the one the dead reader pinned */
	for (int64_t n = 2; n <= 3; n++) {
		r = commit_n(h, n, &gen);
		if (r)
			fail_msg("commit %" PRId64 " after gc: %s: %s", n, shmcfg_strerror(r), shmcfg_errdetail());
	}
	assert_int_equal(gen, 4);
	assert_int_equal(get_i(h, T_A), 3);
	assert_int_equal(shmcfg_check(h, true, print_problem, NULL), 0);
}

/* ------------------------------------------------------------------ */
/* 2. Bounded futex waits                                             */
/* ------------------------------------------------------------------ */

/* Wait in a read-only handle for any commit after the current generation;
 * sends 'w' before the wait, then {result, generation}. */
struct wait_res {
	int32_t r;
	uint32_t pad;
	uint64_t gen;
};

static int futex_waiter_main(void *p)
{
	struct other_arg *a = p;
	alarm(30);
	shmcfg *h = NULL;
	int r = shmcfg_attach(a->name, SHMCFG_ATTACH_RDONLY, NULL, &h);
	CHECK(r == 0, 2, "attach: %s", shmcfg_strerror(r));
	uint64_t gen = shmcfg_generation(h);
	char m = 'w';
	CHECK(write_full(a->up, &m, 1) == 0, 3, "pipe");
	struct wait_res res = {0};
	res.r = shmcfg_wait(h, gen, -1, &res.gen);
	CHECK(write_full(a->up, &res, sizeof res) == 0, 4, "pipe");
	shmcfg_close(h);
	return 0;
}

/* A read-only user moves every waiter of the header's futex word to a word
 * of its own memory (FUTEX_CMP_REQUEUE) and wakes the word, in a loop; sends
 * 'r' once it has requeued a waiter. */
static int futex_thief_main(void *p)
{
	struct other_arg *a = p;
	int e = drop_to(a->uid, a->gid);
	CHECK(e == 0, 2, "drop privileges: %s", strerror(e));
	char sp[320];
	seg_path(a->name, sp, sizeof sp);
	int fd = open(sp, O_RDONLY | O_NOFOLLOW);
	CHECK(fd >= 0, 3, "open %s O_RDONLY: %s", sp, strerror(errno));
	struct seg_header *hd = mmap(NULL, SEG_HEADER_BYTES, PROT_READ, MAP_SHARED, fd, 0);
	CHECK(hd != MAP_FAILED, 4, "mmap: %s", strerror(errno));
	uint32_t *word = &hd->futex;
	static uint32_t mine; /* private memory: nobody ever wakes it */
	bool told = false;
	for (;;) {
		uint32_t v = __atomic_load_n(word, __ATOMIC_SEQ_CST);
		long n = syscall(SYS_futex, word, FUTEX_CMP_REQUEUE, 0, (void *)(long)INT_MAX, &mine, v);
		syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
		if (n > 0 && !told) {
			char m = 'r';
			CHECK(write_full(a->up, &m, 1) == 0, 5, "pipe");
			told = true;
		}
		sched_yield();
	}
}

static void test_stolen_futex_wakeups_delay_waiters_briefly(void **state)
{
	(void)state;
	const char *name = new_name("trust-futex");
	shmcfg *h = keep(test_create(name, &(shmcfg_create_opts){.mode = 0644}));
	int wup[2], tup[2];
	assert_int_equal(pipe(wup), 0);
	struct other_arg w = {name, 0, 0, wup[1], -1, 0};
	pid_t waiter = spawn(futex_waiter_main, &w);
	close(wup[1]);
	char m = 0;
	if (read_full(wup[0], &m, 1, CHILD_TIMEOUT_MS)) {
		assert_child_ok(waiter);
		fail_msg("the waiter stopped early");
	}
	assert_int_equal(pipe(tup), 0);
	struct other_arg t = {name, NOBODY, NOBODY, tup[1], -1, 0};
	pid_t thief = spawn(futex_thief_main, &t);
	close(tup[1]);
	if (read_full(tup[0], &m, 1, 5000)) {
		int st = waitpid(thief, NULL, WNOHANG);
		fail_msg("the read-only user requeued no waiter of the futex word within 5 s%s",
			 st == thief ? " (it died)" : "");
	}
	close(tup[0]);
	uint64_t gen = 0;
	assert_int_equal(commit_n(h, 5, &gen), 0);
	uint64_t t0 = mono_ms();
	struct wait_res res;
	if (read_full(wup[0], &res, sizeof res, 3000))
		fail_msg("the waiter did not return within 3 s of the commit: a read-only user's "
			 "FUTEX_CMP_REQUEUE stranded it");
	uint64_t dt = mono_ms() - t0;
	close(wup[0]);
	if (res.r != 0 || res.gen != gen)
		fail_msg("wait returned %d (%s), generation %" PRIu64 ", expected 0 and %" PRIu64, res.r,
			 shmcfg_errname(res.r), res.gen, gen);
	fprintf(stderr, "# the waiter returned %" PRIu64 " ms after the commit\n", dt);
	assert_child_ok(waiter);
}

/* Another user with read access only: wait for each of `mode` commits in a
 * read-only handle; 'w' before each wait, then {result, generation}. */
static int ro_user_waiter_main(void *p)
{
	struct other_arg *a = p;
	alarm(30);
	int e = drop_to(a->uid, a->gid);
	CHECK(e == 0, 2, "drop privileges: %s", strerror(e));
	shmcfg *h = NULL;
	int r = shmcfg_attach(a->name, SHMCFG_ATTACH_RDONLY, NULL, &h);
	CHECK(r == 0, 3, "attach: %s", shmcfg_strerror(r));
	CHECK(h->waiters == NULL, 4, "a user who may not write the segment counts itself as a waiter");
	for (int k = 0; k < a->mode; k++) {
		uint64_t gen = shmcfg_generation(h);
		char m = 'w';
		CHECK(write_full(a->up, &m, 1) == 0, 5, "pipe");
		struct wait_res res = {0};
		res.r = shmcfg_wait(h, gen, -1, &res.gen);
		CHECK(write_full(a->up, &res, sizeof res) == 0, 6, "pipe");
	}
	shmcfg_close(h);
	return 0;
}

/* Whether process pid is inside the futex system call now. */
static bool in_futex(pid_t pid)
{
	char path[64], buf[64] = "";
	snprintf(path, sizeof path, "/proc/%d/syscall", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	bool in = fgets(buf, sizeof buf, f) && atol(buf) == SYS_futex;
	fclose(f);
	return in;
}

/*
 * Writers wake waiters only when someone counted himself as waiting, or
 * when the segment's mode lets in readers who cannot count themselves (they
 * may not write the header). A writer attached while the mode was 0600,
 * then the owner opens the segment to other users' reading (0644): their
 * waits must still end at each commit, not at the end of a 100 ms slice.
 */
static void test_readers_let_in_by_chmod_are_woken(void **state)
{
	(void)state;
	const char *name = new_name("trust-chmodwake");
	shmcfg *h = keep(test_create(name, &(shmcfg_create_opts){.mode = 0600}));
	char sp[320];
	seg_path(name, sp, sizeof sp);
	assert_int_equal(chmod(sp, 0644), 0);
	usleep(1100 * 1000); /* the writers' view of the mode is at most 1 s old */
	enum { WAITS = 4 };
	int up[2];
	assert_int_equal(pipe(up), 0);
	struct other_arg a = {name, NOBODY, NOBODY, up[1], -1, WAITS};
	pid_t w = spawn(ro_user_waiter_main, &a);
	close(up[1]);
	uint64_t worst = 0;
	for (int k = 0; k < WAITS; k++) {
		char m = 0;
		if (read_full(up[0], &m, 1, CHILD_TIMEOUT_MS)) {
			assert_child_ok(w);
			fail_msg("the waiter stopped early");
		}
		/* commit as soon as the waiter sleeps in FUTEX_WAIT: unwoken, it
		 * would sleep out nearly the whole slice */
		uint64_t until = mono_ms() + 2000;
		while (!in_futex(w) && mono_ms() < until)
			usleep(100);
		usleep(2000);
		uint64_t gen = 0;
		assert_int_equal(commit_n(h, 10 + k, &gen), 0);
		uint64_t t0 = mono_ms();
		struct wait_res res;
		if (read_full(up[0], &res, sizeof res, 3000))
			fail_msg("the waiter did not return within 3 s of a commit");
		uint64_t dt = mono_ms() - t0;
		worst = dt > worst ? dt : worst;
		if (res.r != 0 || res.gen != gen)
			fail_msg("wait returned %d (%s), generation %" PRIu64 ", expected 0 and %" PRIu64, res.r,
				 shmcfg_errname(res.r), res.gen, gen);
	}
	close(up[0]);
	assert_child_ok(w);
	fprintf(stderr, "# a reader let in by chmod 0644 returned at most %" PRIu64 " ms after each commit\n", worst);
	if (worst >= 50)
		fail_msg("a read-only user's wait ended %" PRIu64 " ms after a commit: the writer, attached when the "
			 "mode was 0600, did not wake it", worst);
}

/* Whether this process maps the object at path writable (/proc/self/maps). */
static bool maps_writable(const char *path)
{
	FILE *f = fopen("/proc/self/maps", "re");
	if (!f)
		return false;
	char line[1024];
	bool w = false;
	size_t n = strlen(path);
	while (!w && fgets(line, sizeof line, f)) {
		char perms[8] = "";
		const char *p = strchr(line, '/');
		/* shared and writable: the schema's private copy (MAP_PRIVATE,
		 * validate.c) is writable too, but its writes reach nobody */
		if (sscanf(line, "%*s %7s", perms) == 1 && perms[1] == 'w' && perms[3] == 's' && p &&
		    strncmp(p, path, n) == 0 && (p[n] == '\n' || p[n] == ' '))
			w = true;
	}
	fclose(f);
	return w;
}

/* Root attaches read-only, reads, waits, then drops to uid 65534: reports
 * 'n' if it holds no writable mapping of the segment then, else writes the
 * retired flag through the one it holds and reports 'W'. */
static int ro_then_drop_main(void *p)
{
	struct other_arg *a = p;
	alarm(30);
	while (nhandles > 0) /* the parent's (read-write) handles: not ours */
		shmcfg_close(handles[--nhandles]);
	shmcfg *h = NULL;
	int r = shmcfg_attach(a->name, SHMCFG_ATTACH_RDONLY, NULL, &h);
	CHECK(r == 0, 2, "attach: %s", shmcfg_strerror(r));
	int64_t n = -1;
	CHECK(shmcfg_get_int(h, T_A, &n) == 0, 3, "read");
	uint64_t g = 0; /* a wait that sleeps (a counted one: root may write the header) */
	CHECK(shmcfg_wait(h, shmcfg_generation(h), 50, &g) == -ETIMEDOUT, 4, "wait");
	char sp[320];
	seg_path(a->name, sp, sizeof sp);
	int e = drop_to(a->uid, a->gid);
	CHECK(e == 0, 5, "drop privileges: %s", strerror(e));
	char m = 'n';
	if (maps_writable(sp)) {
		/* the handle's writable view of the header page, kept from root's
		 * days: shmcfg_unlink's retirement, by uid 65534 */
		FILE *f = fopen("/proc/self/maps", "re");
		char line[1024];
		while (f && fgets(line, sizeof line, f)) {
			unsigned long lo;
			char perms[8];
			const char *q = strchr(line, '/');
			if (sscanf(line, "%lx-%*x %7s", &lo, perms) == 2 && perms[1] == 'w' && perms[3] == 's' && q &&
			    strncmp(q, sp, strlen(sp)) == 0)
				__atomic_store_n(&((struct seg_header *)lo)->retired, 1, __ATOMIC_SEQ_CST);
		}
		if (f)
			fclose(f);
		m = 'W';
	}
	CHECK(write_full(a->up, &m, 1) == 0, 6, "pipe");
	shmcfg_close(h);
	return 0;
}

/*
 * A process that may write a segment (root, its owner) and attaches it
 * read-only must get a read-only handle: no writable mapping of any of it
 * kept beyond a call. Else a program that attaches read-only while
 * privileged and then drops its privileges (to parse untrusted input, say)
 * keeps write access to the segment's header: `current`, the writer state,
 * the retired flag.
 */
static void test_readonly_handle_keeps_no_write_access(void **state)
{
	(void)state;
	const char *name = new_name("trust-rodrop");
	shmcfg *h = keep(test_create(name, &(shmcfg_create_opts){.mode = 0644}));
	int up[2];
	assert_int_equal(pipe(up), 0);
	struct other_arg a = {name, NOBODY, NOBODY, up[1], -1, 0};
	pid_t pid = spawn(ro_then_drop_main, &a);
	close(up[1]);
	char m = 0;
	int rr = read_full(up[0], &m, 1, CHILD_TIMEOUT_MS);
	close(up[0]);
	assert_child_ok(pid);
	assert_int_equal(rr, 0);
	bool retired = __atomic_load_n(&h->hdr->retired, __ATOMIC_SEQ_CST) != 0;
	if (m == 'W')
		fail_msg("a read-only handle attached by root kept a writable mapping of the segment after the "
			 "process dropped to uid 65534, which then %s the segment of root (mode 0644)",
			 retired ? "retired" : "could write");
	assert_int_equal(m, 'n');
	assert_false(retired);
}

/* ------------------------------------------------------------------ */
/* 3. Strangers cannot hang or fool anyone                            */
/* ------------------------------------------------------------------ */

/* Attach read-write and read-only: SHMCFG_E_MAGIC, at once (an alarm
 * kills a child that blocks). "At once" allows 2 s, for a busy machine: a
 * blocked open never returns, and the one wait an attach may do (1 s for a
 * segment's creator) would end in SHMCFG_E_NOTREADY, not SHMCFG_E_MAGIC. */
#define AT_ONCE_MS 2000
static int nonreg_attach_main(void *p)
{
	const char *name = p;
	alarm(20);
	for (int pass = 0; pass < 2; pass++) {
		shmcfg *h = NULL;
		uint64_t t0 = mono_ms();
		int r = shmcfg_attach(name, pass ? SHMCFG_ATTACH_RDONLY : 0, NULL, &h);
		uint64_t dt = mono_ms() - t0;
		CHECK(r == SHMCFG_E_MAGIC && h == NULL, 2 + pass, "%s attach: %d (%s) after %" PRIu64 " ms",
		      pass ? "read-only" : "read-write", r, shmcfg_errname(r), dt);
		CHECK(dt < AT_ONCE_MS, 4 + pass, "%s attach took %" PRIu64 " ms", pass ? "read-only" : "read-write",
		      dt);
	}
	return 0;
}

static void test_non_regular_objects_refused_at_once(void **state)
{
	(void)state;
	const char *kinds[] = {"FIFO", "unix socket", "directory"};
	for (int k = 0; k < 3; k++) {
		char tag[32];
		snprintf(tag, sizeof tag, "trust-nonreg%d", k);
		const char *name = new_name(tag);
		char sp[320];
		seg_path(name, sp, sizeof sp);
		(void)remove(sp);
		add_path(sp);
		if (k == 0) {
			assert_int_equal(mkfifo(sp, 0666), 0);
		} else if (k == 1) {
			int fd = socket(AF_UNIX, SOCK_STREAM, 0);
			assert_true(fd >= 0);
			struct sockaddr_un sa = {.sun_family = AF_UNIX};
			assert_true(strlen(sp) < sizeof sa.sun_path);
			memcpy(sa.sun_path, sp, strlen(sp) + 1);
			assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
			close(fd);
		} else {
			assert_int_equal(mkdir(sp, 0777), 0);
		}
		pid_t pid = spawn(nonreg_attach_main, (void *)name);
		int st = reap_within(pid, 30000);
		if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM)
			fail_msg("attach of a %s at %s blocked (the child's 20 s alarm killed it)", kinds[k], sp);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			char t[64];
			status_text(st, t, sizeof t);
			fail_msg("attach of a %s at %s: the child %s", kinds[k], sp, t);
		}
	}
}

/* Create a segment of mode 0644 as a->uid, commit n = 5, exit. */
static int create_as_main(void *p)
{
	struct other_arg *a = p;
	int e = drop_to(a->uid, a->gid);
	CHECK(e == 0, 2, "drop privileges: %s", strerror(e));
	shmcfg_schema *s = NULL;
	CHECK(shmcfg_schema_new(&s) == 0, 3, "schema");
	for (int i = 0; i < T_COUNT; i++)
		CHECK(shmcfg_schema_add(s, &test_opts[i]) == 0, 3, "schema_add");
	shmcfg *h = NULL;
	int r = shmcfg_create(a->name, s,
			      &(shmcfg_create_opts){.mode = 0644, .flags = SHMCFG_CREATE_FORCE | SHMCFG_CREATE_NO_ENV},
			      &h);
	CHECK(r == 0, 4, "create as uid %d: %s", (int)a->uid, shmcfg_strerror(r));
	r = commit_n(h, 5, NULL);
	CHECK(r == 0, 5, "commit: %s", shmcfg_strerror(r));
	shmcfg_close(h);
	shmcfg_schema_free(s);
	return 0;
}

/* As uid 65534: a root-owned segment is trusted by a plain attach. */
static int trusts_root_main(void *p)
{
	struct other_arg *a = p;
	int e = drop_to(a->uid, a->gid);
	CHECK(e == 0, 2, "drop privileges: %s", strerror(e));
	shmcfg *h = NULL;
	int r = shmcfg_attach(a->name, SHMCFG_ATTACH_RDONLY, NULL, &h);
	CHECK(r == 0, 3, "uid %d attaching a root-owned segment: %d (%s)", (int)a->uid, r, shmcfg_errname(r));
	int64_t v = 0;
	CHECK(shmcfg_get_int(h, T_A, &v) == 0 && v == 5, 4, "a = %" PRId64, v);
	shmcfg_close(h);
	return 0;
}

static void test_foreign_owned_segment_refused_unless_expected(void **state)
{
	(void)state;
	const char *name = new_name("trust-owner");
	char sp[320];
	seg_path(name, sp, sizeof sp);
	struct other_arg a = {name, NOBODY, NOBODY, -1, -1, 0};
	assert_child_ok(spawn(create_as_main, &a));
	assert_int_equal(lstat_or_fail(sp).st_uid, NOBODY);
	/* root does not take a squatter's segment for its own */
	for (int pass = 0; pass < 2; pass++) {
		shmcfg *h = NULL;
		int r = shmcfg_attach(name, pass ? SHMCFG_ATTACH_RDONLY : 0, NULL, &h);
		if (r != SHMCFG_E_OWNER) {
			if (!r)
				shmcfg_close(h);
			fail_msg("%s attach of a segment owned by uid %d: %d (%s), expected SHMCFG_E_OWNER",
				 pass ? "read-only" : "read-write", NOBODY, r, shmcfg_errname(r));
		}
		assert_null(h);
		const char *d = shmcfg_errdetail();
		if (!strstr(d, "65534") && !strstr(d, "nobody"))
			fail_msg("the detail does not name the owner: %s", d);
	}
	/* unless that owner is the one expected */
	NEED(shmcfg_attach_with);
	for (int pass = 0; pass < 2; pass++) {
		shmcfg_attach_opts o = {.flags = SHMCFG_ATTACH_OWNER | (pass ? SHMCFG_ATTACH_RDONLY : 0),
					.owner = NOBODY};
		shmcfg *h = NULL;
		int r = shmcfg_attach_with(name, &o, &h);
		if (r)
			fail_msg("%s attach expecting owner %d: %s: %s", pass ? "read-only" : "read-write", NOBODY,
				 shmcfg_strerror(r), shmcfg_errdetail());
		assert_int_equal(get_i(h, T_A), 5);
		shmcfg_close(h);
	}
	/* and another expected owner is refused */
	shmcfg *h = NULL;
	int r = shmcfg_attach_with(name, &(shmcfg_attach_opts){.flags = SHMCFG_ATTACH_OWNER | SHMCFG_ATTACH_RDONLY,
							       .owner = OTHER_UID},
				   &h);
	assert_int_equal(r, SHMCFG_E_OWNER);
	/* root is trusted by everyone */
	const char *rname = new_name("trust-rootowned");
	shmcfg *rh = keep(test_create(rname, &(shmcfg_create_opts){.mode = 0644}));
	assert_int_equal(commit_n(rh, 5, NULL), 0);
	struct other_arg b = {rname, NOBODY, NOBODY, -1, -1, 0};
	assert_child_ok(spawn(trusts_root_main, &b));
}

/* As uid 65533: creating over another user's segment (mode 0) or lock
 * object (mode 1) fails with a clear error. */
static int create_over_main(void *p)
{
	struct other_arg *a = p;
	int e = drop_to(a->uid, a->gid);
	CHECK(e == 0, 2, "drop privileges: %s", strerror(e));
	shmcfg_schema *s = NULL;
	CHECK(shmcfg_schema_new(&s) == 0, 3, "schema");
	for (int i = 0; i < T_COUNT; i++)
		CHECK(shmcfg_schema_add(s, &test_opts[i]) == 0, 3, "schema_add");
	for (int pass = a->mode ? 0 : 1; pass < 2; pass++) {
		unsigned flags = SHMCFG_CREATE_NO_ENV | (pass ? SHMCFG_CREATE_FORCE : 0);
		shmcfg *h = NULL;
		int r = shmcfg_create(a->name, s, &(shmcfg_create_opts){.mode = 0644, .flags = flags}, &h);
		if (a->mode == 0)
			CHECK((r == -EPERM || r == -EACCES) && h == NULL, 4 + pass,
			      "forced create over uid %d's segment: %d (%s)", NOBODY, r, shmcfg_errname(r));
		else
			CHECK(r < 0 && h == NULL, 4 + pass,
			      "%screate with uid %d's lock object in place: %d (%s)", pass ? "forced " : "",
			      NOBODY, r, shmcfg_errname(r));
		CHECK(strstr(shmcfg_errdetail(), a->name) != NULL, 6 + pass, "the detail does not name the segment");
	}
	shmcfg_schema_free(s);
	return 0;
}

/* As uid 65534: squat the lock object of a name, open to everyone. */
static int squat_lock_main(void *p)
{
	struct other_arg *a = p;
	int e = drop_to(a->uid, a->gid);
	CHECK(e == 0, 2, "drop privileges: %s", strerror(e));
	char lp[320];
	lock_path(a->name, lp, sizeof lp);
	int fd = open(lp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, 0666);
	CHECK(fd >= 0, 3, "create %s: %s", lp, strerror(errno));
	CHECK(fchmod(fd, 0666) == 0, 4, "fchmod: %s", strerror(errno));
	CHECK(ftruncate(fd, 4096) == 0, 5, "ftruncate: %s", strerror(errno));
	close(fd);
	return 0;
}

/* A writer that may not replace the segment (another user, with write
 * access through the mode): its commit that does not fit the heap fails,
 * naming the resize to run; nothing changes, nothing is left behind. */
static int grow_refused_main(void *p)
{
	struct other_arg *a = p;
	int e = drop_to(a->uid, a->gid);
	CHECK(e == 0, 2, "drop privileges: %s", strerror(e));
	shmcfg *h;
	int r = shmcfg_attach(a->name, 0, NULL, &h);
	CHECK(r == 0, 3, "attach: %s", shmcfg_strerror(r));
	char big[6000], want[200];
	memset(big, 'x', sizeof big - 1);
	big[sizeof big - 1] = 0;
	uint64_t g = shmcfg_generation(h);
	r = commit_str(h, T_C, big, NULL);
	CHECK(r == SHMCFG_E_FULL, 4, "commit: %s", shmcfg_strerror(r));
	snprintf(want, sizeof want, "run `shmctl resize %s --size 8192`", a->name);
	CHECK(strstr(shmcfg_errdetail(), want) && strstr(shmcfg_errdetail(), "only its owner"), 5, "detail");
	CHECK(!shmcfg_retired(h) && shmcfg_generation(h) == g, 6, "the segment changed");
	shmcfg_close(h);
	return 0;
}

static void test_heap_growth_refused_to_other_users(void **state)
{
	(void)state;
	const char *name = new_name("trust-grow");
	keep(test_create(name, &(shmcfg_create_opts){.mode = 0666, .heap_bytes = 4096}));
	struct other_arg a = {name, NOBODY, NOBODY, -1, -1, 0};
	assert_child_ok(spawn(grow_refused_main, &a));
	char cmd[300];
	snprintf(cmd, sizeof cmd, "ls /dev/shm | grep -q 'shmcfg-new.%s'", name);
	assert_int_not_equal(system(cmd), 0);
}

static void test_squatted_names_do_not_capture_creation(void **state)
{
	(void)state;
	/* another user's segment: a forced create cannot replace it */
	const char *name = new_name("trust-squat-seg");
	char sp[320];
	seg_path(name, sp, sizeof sp);
	struct other_arg a = {name, NOBODY, NOBODY, -1, -1, 0};
	assert_child_ok(spawn(create_as_main, &a));
	struct stat before = lstat_or_fail(sp);
	struct other_arg b = {name, OTHER_UID, OTHER_UID, -1, -1, 0};
	assert_child_ok(spawn(create_over_main, &b));
	struct stat after = lstat_or_fail(sp);
	assert_int_equal(after.st_ino, before.st_ino);
	assert_int_equal(after.st_uid, NOBODY);
	/* a stranger's lock object planted under a guessed name: the lock
	 * object's name carries the segment's random instance id, so creation
	 * neither fails nor uses the stranger's file */
	const char *name2 = new_name("trust-squat-lock");
	char sp2[320], guess[320], lp2[320];
	seg_path(name2, sp2, sizeof sp2);
	lock_path(name2, guess, sizeof guess); /* no segment yet: the guess */
	(void)unlink(guess);
	struct other_arg c = {name2, NOBODY, NOBODY, -1, -1, 0};
	assert_child_ok(spawn(squat_lock_main, &c));
	add_path(guess);
	struct other_arg d = {name2, OTHER_UID, OTHER_UID, -1, -1, 0};
	assert_child_ok(spawn(create_as_main, &d));
	lock_path(name2, lp2, sizeof lp2);
	assert_string_not_equal(lp2, guess);
	assert_int_equal(lstat_or_fail(sp2).st_uid, OTHER_UID);
	assert_int_equal(lstat_or_fail(lp2).st_uid, OTHER_UID);
	assert_int_equal(lstat_or_fail(guess).st_uid, NOBODY); /* untouched */
	assert_int_equal(shmcfg_unlink(name2), 0);
	assert_gone(lp2, "shmcfg_unlink left the lock object");
}

/* Attach a sparse object read-write and read-only: SHMCFG_E_CORRUPT,
 * naming the cause. If an attach succeeds, use the segment as a program
 * would (deep check, snapshot, commit) and fail. */
static int sparse_attach_main(void *p)
{
	const char *name = p;
	alarm(20);
	int bad = 0;
	for (int pass = 0; pass < 2; pass++) {
		shmcfg *h = NULL;
		int r = shmcfg_attach(name, pass ? SHMCFG_ATTACH_RDONLY : 0, NULL, &h);
		const char *d = shmcfg_errdetail();
		if (r == SHMCFG_E_CORRUPT && (strstr(d, "sparse") || strstr(d, "allocated")))
			continue;
		fprintf(stderr, "# child: %s attach of a sparse object: %d (%s): %s\n",
			pass ? "read-only" : "read-write", r, shmcfg_errname(r), r ? d : "");
		bad = 2 + pass;
		if (r)
			continue;
		(void)shmcfg_check(h, true, NULL, NULL);
		shmcfg_snapshot *s;
		if (shmcfg_snapshot_acquire(h, &s) == 0)
			shmcfg_snapshot_release(s);
		if (!pass)
			(void)commit_n(h, 1, NULL);
		shmcfg_close(h);
	}
	return bad;
}

static void test_sparse_object_refused(void **state)
{
	(void)state;
	const char *real = new_name("trust-sparse-src");
	const char *name = new_name("trust-sparse");
	shmcfg *h = test_create(real, &(shmcfg_create_opts){.slots = 8, .heap_bytes = 32u << 20});
	uint64_t total = h->lay.total_size;
	uint64_t copy = h->lay.slots_off + 1024 * 1024; /* header, schema, log, readers, slot 0's start */
	copy = (copy + 4095) & ~(uint64_t)4095;
	assert_true(copy < total / 4);
	char src[320], dst[320];
	seg_path(real, src, sizeof src);
	seg_path(name, dst, sizeof dst);
	char *buf = malloc(copy);
	assert_non_null(buf);
	int fd = open(src, O_RDONLY | O_NOFOLLOW);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, buf, copy, 0), (ssize_t)copy);
	close(fd);
	shmcfg_close(h);
	assert_int_equal(shmcfg_unlink(real), 0);
	(void)unlink(dst);
	fd = open(dst, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)total), 0);
	assert_int_equal(pwrite(fd, buf, copy, 0), (ssize_t)copy);
	free(buf);
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	assert_true((uint64_t)st.st_blocks * 512 < total / 2); /* it is sparse */
	/* what the attaches cost /dev/shm: the blocks the object gained (not
	 * the file system's free space, which the tests running alongside
	 * change all the time) */
	uint64_t used0 = (uint64_t)st.st_blocks * 512;
	pid_t pid = spawn(sparse_attach_main, (void *)name);
	int cst = reap_within(pid, 30000);
	assert_int_equal(fstat(fd, &st), 0);
	close(fd);
	uint64_t used1 = (uint64_t)st.st_blocks * 512;
	uint64_t lost = used1 > used0 ? used1 - used0 : 0;
	char t[64];
	status_text(cst, t, sizeof t);
	if (WIFSIGNALED(cst))
		fail_msg("the process attaching a sparse object %s (/dev/shm lost %" PRIu64 " KiB)", t, lost >> 10);
	if (lost > 8u << 20)
		fail_msg("/dev/shm lost %" PRIu64 " MiB to a sparse object of %" PRIu64 " MiB (the child %s)",
			 lost >> 20, total >> 20, t);
	if (!WIFEXITED(cst) || WEXITSTATUS(cst) != 0)
		fail_msg("a sparse object was not refused with SHMCFG_E_CORRUPT naming the cause: child %s", t);
}

/* Reads of a segment whose current slot never validates: each fails with
 * SHMCFG_E_CORRUPT, and 100 of each kind cost well under 1 s of CPU. */
static int corrupt_reads_main(void *p)
{
	const char *name = p;
	alarm(40);
	shmcfg *hs[2] = {NULL, NULL};
	int r = shmcfg_attach(name, 0, NULL, &hs[0]);
	CHECK(r == 0, 2, "read-write attach: %s", shmcfg_strerror(r));
	r = shmcfg_attach(name, SHMCFG_ATTACH_RDONLY, NULL, &hs[1]);
	CHECK(r == 0, 3, "read-only attach: %s", shmcfg_strerror(r));
	struct timespec c0, c1;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
	uint64_t w0 = mono_ms();
	int rounds = 0;
	for (; rounds < 100 && mono_ms() - w0 < 20000; rounds++) { /* wall time: a busy machine's */
		for (int k = 0; k < 2; k++) {
			shmcfg_value v;
			r = shmcfg_get(hs[k], T_C, &v);
			if (r == 0)
				shmcfg_value_clear(&v);
			CHECK(r == SHMCFG_E_CORRUPT, 4, "shmcfg_get (%s): %d (%s)", k ? "ro" : "rw", r, shmcfg_errname(r));
			int64_t x = 0;
			r = shmcfg_get_int(hs[k], T_A, &x);
			CHECK(r == SHMCFG_E_CORRUPT, 5, "shmcfg_get_int (%s): %d (%s)", k ? "ro" : "rw", r,
			      shmcfg_errname(r));
			shmcfg_snapshot *s = NULL;
			r = shmcfg_snapshot_acquire(hs[k], &s);
			if (r == 0)
				shmcfg_snapshot_release(s);
			CHECK(r == SHMCFG_E_CORRUPT, 6, "snapshot (%s): %d (%s)", k ? "ro" : "rw", r, shmcfg_errname(r));
		}
	}
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
	double cpu = (double)(c1.tv_sec - c0.tv_sec) + (double)(c1.tv_nsec - c0.tv_nsec) / 1e9;
	double wall = (double)(mono_ms() - w0) / 1e3;
	fprintf(stderr, "# child: %d rounds of 6 failing reads: %.3f s CPU, %.3f s wall\n", rounds, cpu, wall);
	CHECK(rounds == 100 && cpu < 1.0, 7,
	      "%d rounds of 6 reads (get, get_int, snapshot; rw and ro) took %.2f s of CPU (%.2f s wall)"
	      "%s",
	      rounds, cpu, wall, rounds < 100 ? ": stopped after 20 s" : "");
	shmcfg_close(hs[0]);
	shmcfg_close(hs[1]);
	return 0;
}

static void test_unvalidatable_current_fails_reads_fast(void **state)
{
	(void)state;
	const char *name = new_name("trust-badstamp");
	shmcfg *h = keep(test_create(name, NULL));
	uint64_t gen = 0;
	assert_int_equal(commit_n(h, 3, &gen), 0);
	/* as the owner: the stamp of the current slot names another generation */
	uint64_t cur = __atomic_load_n(&h->hdr->current, __ATOMIC_ACQUIRE);
	assert_int_equal(cur_gen(cur), gen);
	struct slot_hdr *sl = slot_at(h, cur_slot(cur));
	__atomic_store_n(&sl->gen, cur_gen(cur) + 1000, __ATOMIC_RELEASE);
	pid_t pid = spawn(corrupt_reads_main, (void *)name);
	assert_child_ok(pid);
}

/* ------------------------------------------------------------------ */
/* 4. Lifecycle: removal and replacement retire a segment             */
/* ------------------------------------------------------------------ */

enum { RETIRE_UNLINK, RETIRE_FORCE, RETIRE_PLAIN };

/*
 * Attached read-write to a segment of n = 3: send 'w', wait for a commit,
 * send {result, ms}; then (if retired) check shmcfg_retired() and that every
 * read answers n = 3; with RETIRE_FORCE, send 'R', wait for 'g', reattach and
 * read n = 9 from the new segment.
 */
struct retire_res {
	int32_t r;
	uint32_t ms;
};

static int retiree_main(void *p)
{
	struct other_arg *a = p;
	alarm(30);
	shmcfg *h = NULL;
	int r = shmcfg_attach(a->name, 0, NULL, &h);
	CHECK(r == 0, 2, "attach: %s", shmcfg_strerror(r));
	uint64_t gen = shmcfg_generation(h);
	int64_t v = 0;
	CHECK(shmcfg_get_int(h, T_A, &v) == 0 && v == 3, 3, "a = %" PRId64, v);
	char m = 'w';
	CHECK(write_full(a->up, &m, 1) == 0, 4, "pipe");
	uint64_t t0 = mono_ms(), g = 0;
	struct retire_res res = {.r = shmcfg_wait(h, gen, 10000, &g)};
	res.ms = (uint32_t)(mono_ms() - t0);
	CHECK(write_full(a->up, &res, sizeof res) == 0, 5, "pipe");
	CHECK(res.r == SHMCFG_E_RETIRED, 6, "wait: %d (%s)", res.r, shmcfg_errname(res.r));
	CHECK(shmcfg_retired != NULL, 7, "shmcfg_retired() is not implemented");
	CHECK(shmcfg_retired(h), 8, "shmcfg_retired() is false after the wait returned SHMCFG_E_RETIRED");
	shmcfg_info info;
	CHECK(shmcfg_stat(h, &info) == 0 && info.retired, 9, "shmcfg_stat().retired is false");
	/* the last values, by every read path */
	CHECK(shmcfg_generation(h) == gen, 10, "generation %" PRIu64 ", was %" PRIu64, shmcfg_generation(h), gen);
	CHECK(shmcfg_get_int(h, T_A, &v) == 0 && v == 3, 11, "inline a = %" PRId64, v);
	CHECK(shmcfg_get_int(h, T_B, &v) == 0 && v == -3, 12, "inline b = %" PRId64, v);
	shmcfg_value c;
	CHECK(shmcfg_get(h, T_C, &c) == 0 && c.u.str.len == 1 && c.u.str.ptr[0] == '3', 13, "get c");
	shmcfg_value_clear(&c);
	shmcfg_snapshot *s;
	r = shmcfg_snapshot_acquire(h, &s);
	CHECK(r == 0, 14, "snapshot of a retired segment: %s", shmcfg_strerror(r));
	CHECK(shmcfg_snapshot_generation(s) == gen && snapshot_n(s) == 3, 15, "snapshot: generation %" PRIu64
	      " n %" PRId64, shmcfg_snapshot_generation(s), snapshot_n(s));
	shmcfg_snapshot_release(s);
	if (a->mode == RETIRE_FORCE) {
		m = 'R';
		CHECK(write_full(a->up, &m, 1) == 0, 16, "pipe");
		CHECK(read_full(a->down, &m, 1, CHILD_TIMEOUT_MS) == 0, 17, "no go");
		CHECK(shmcfg_reattach != NULL, 18, "shmcfg_reattach() is not implemented");
		r = shmcfg_reattach(&h);
		CHECK(r == 0, 19, "reattach: %s", shmcfg_strerror(r));
		CHECK(!shmcfg_retired(h), 20, "the new handle is retired");
		CHECK(shmcfg_get_int(h, T_A, &v) == 0 && v == 9, 21, "a = %" PRId64 " in the new segment", v);
		CHECK(shmcfg_generation(h) == 2, 22, "generation %" PRIu64, shmcfg_generation(h));
		r = shmcfg_snapshot_acquire(h, &s);
		CHECK(r == 0 && snapshot_n(s) == 9, 23, "snapshot of the new segment");
		shmcfg_snapshot_release(s);
	}
	shmcfg_close(h);
	return 0;
}

static void retire_case(int mode)
{
	const char *what[] = {"shmcfg_unlink", "a removal and a create", "unlink(2)"};
	const char *name = new_name("trust-retire");
	char sp[320];
	seg_path(name, sp, sizeof sp);
	shmcfg *h = keep(test_create(name, NULL));
	assert_int_equal(commit_n(h, 3, NULL), 0);
	int up[2], down[2];
	assert_int_equal(pipe(up), 0);
	assert_int_equal(pipe(down), 0);
	struct other_arg a = {name, 0, 0, up[1], down[0], mode};
	pid_t pid = spawn(retiree_main, &a);
	close(up[1]);
	close(down[0]);
	char m = 0;
	if (read_full(up[0], &m, 1, CHILD_TIMEOUT_MS)) {
		assert_child_ok(pid);
		fail_msg("the waiting child stopped early");
	}
	usleep(100000); /* into its futex wait */
	uint64_t t0 = mono_ms();
	shmcfg *h2 = NULL;
	if (mode == RETIRE_UNLINK) {
		assert_int_equal(shmcfg_unlink(name), 0);
	} else if (mode == RETIRE_PLAIN) {
		assert_int_equal(unlink(sp), 0);
	} else {
		/* removed, then created anew (a forced create is followed
		 * instead: tests/test_replace.c) */
		assert_int_equal(shmcfg_unlink(name), 0);
		h2 = keep(test_create(name, NULL));
		assert_int_equal(commit_n(h2, 9, NULL), 0);
	}
	/* the child's wait has a 10 s timeout: it answers within 15 s */
	struct retire_res res;
	if (read_full(up[0], &res, sizeof res, 15000))
		fail_msg("the child's shmcfg_wait did not return within 15 s of %s", what[mode]);
	uint64_t dt = mono_ms() - t0;
	if (res.r != SHMCFG_E_RETIRED)
		fail_msg("after %s the child's wait returned %d (%s) after %u ms, expected SHMCFG_E_RETIRED",
			 what[mode], res.r, shmcfg_errname(res.r), res.ms);
	/* promised within 1 s (one 100 ms wait slice and a wake-up); 5 s leaves
	 * room for a busy machine and still tells it from the 10 s timeout */
	if (dt > 5000)
		fail_msg("the child's wait returned SHMCFG_E_RETIRED %" PRIu64 " ms after %s", dt, what[mode]);
	if (mode == RETIRE_FORCE) {
		if (read_full(up[0], &m, 1, CHILD_TIMEOUT_MS)) {
			assert_child_ok(pid);
			fail_msg("the child stopped before reattaching");
		}
		assert_int_equal(write_full(down[1], "g", 1), 0);
	}
	assert_child_ok(pid);
	close(up[0]);
	close(down[1]);
	/* the parent's own handle of the old segment is retired too */
	NEED(shmcfg_retired);
	if (!shmcfg_retired(h))
		fail_msg("the parent's handle is not retired after %s", what[mode]);
	if (h2 && shmcfg_retired(h2))
		fail_msg("the new segment's handle is retired");
}

static void test_unlink_retires_waiters(void **state)
{
	(void)state;
	retire_case(RETIRE_UNLINK);
}

static void test_removed_and_created_retires_and_reattach_follows(void **state)
{
	(void)state;
	retire_case(RETIRE_FORCE);
}

static void test_plain_unlink_retires_waiters(void **state)
{
	(void)state;
	retire_case(RETIRE_PLAIN);
}

/* Attach (mode 0 read-write, 1 read-only, 2 not at all), send our pid,
 * wait for 'q'. */
static int attached_main(void *p)
{
	struct other_arg *a = p;
	shmcfg *h = NULL;
	if (a->mode < 2) {
		int r = shmcfg_attach(a->name, a->mode ? SHMCFG_ATTACH_RDONLY : 0, NULL, &h);
		CHECK(r == 0, 2, "attach: %s", shmcfg_strerror(r));
	}
	int32_t me = (int32_t)getpid();
	CHECK(write_full(a->up, &me, sizeof me) == 0, 3, "pipe");
	char m;
	CHECK(read_full(a->down, &m, 1, CHILD_TIMEOUT_MS) == 0, 4, "no 'q'");
	shmcfg_close(h);
	return 0;
}

/* shmcfg_attached_pids() once it counts `want` (or after 5 s): a tool that
 * lists every segment (a `shmctl ls` of a test running alongside) maps each
 * for an instant, and is rightly counted while it does. */
static int attached_pids_settled(const char *name, pid_t *pids, int max, int want)
{
	uint64_t deadline = mono_ms() + 5000;
	int n;
	while ((n = shmcfg_attached_pids(name, pids, max)) >= 0 && n != want && mono_ms() < deadline)
		usleep(10000);
	return n;
}

static bool has_pid(const pid_t *pids, int n, pid_t pid)
{
	for (int i = 0; i < n; i++)
		if (pids[i] == pid)
			return true;
	return false;
}

static void test_attached_pids_lists_attached_processes(void **state)
{
	(void)state;
	NEED(shmcfg_attached_pids);
	const char *name = new_name("trust-pids");
	/* the parent keeps no mapping: its children inherit none */
	shmcfg_close(test_create(name, NULL));
	int up[3][2], down[3][2];
	pid_t kid[3];
	struct other_arg a[3];
	for (int k = 0; k < 3; k++) {
		assert_int_equal(pipe(up[k]), 0);
		assert_int_equal(pipe(down[k]), 0);
		a[k] = (struct other_arg){name, 0, 0, up[k][1], down[k][0], k};
		kid[k] = spawn(attached_main, &a[k]);
		close(up[k][1]);
		close(down[k][0]);
		int32_t got = 0;
		if (read_full(up[k][0], &got, sizeof got, CHILD_TIMEOUT_MS)) {
			assert_child_ok(kid[k]);
			fail_msg("child %d stopped early", k);
		}
		assert_int_equal(got, kid[k]);
	}
	pid_t pids[64];
	int n = attached_pids_settled(name, pids, 64, 2);
	if (n < 0)
		fail_msg("shmcfg_attached_pids: %d (%s): %s", n, shmcfg_errname(n), shmcfg_errdetail());
	int got = n < 64 ? n : 64;
	if (!has_pid(pids, got, kid[0]) || !has_pid(pids, got, kid[1]))
		fail_msg("shmcfg_attached_pids found %d pids, not the read-write child %d (%s) and the "
			 "read-only child %d (%s)", n, (int)kid[0], has_pid(pids, got, kid[0]) ? "listed" : "missing",
			 (int)kid[1], has_pid(pids, got, kid[1]) ? "listed" : "missing");
	if (has_pid(pids, got, kid[2]) || has_pid(pids, got, getpid()))
		fail_msg("shmcfg_attached_pids lists a process that has not attached");
	assert_int_equal(n, 2);
	/* max bounds what is stored, not what is counted */
	pid_t one[1] = {0};
	assert_int_equal(attached_pids_settled(name, one, 1, 2), 2);
	assert_true(one[0] == kid[0] || one[0] == kid[1]);
	for (int k = 0; k < 3; k++) {
		assert_int_equal(write_full(down[k][1], "q", 1), 0);
		assert_child_ok(kid[k]);
		close(up[k][0]);
		close(down[k][1]);
	}
	assert_int_equal(attached_pids_settled(name, pids, 64, 0), 0);
	char absent[64];
	snprintf(absent, sizeof absent, "trust-absent-%d", (int)getpid());
	assert_int_equal(shmcfg_attached_pids(absent, pids, 64), -ENOENT);
}

/* ------------------------------------------------------------------ */
/* 5. A crowd never locks anyone out                                  */
/* ------------------------------------------------------------------ */

enum { CROWD = 1000, WAVE = 100, CROWD_READERS = 16 };

struct crowd_msg {
	char tag;  /* 'h' holding, 'd' done, 'x' failed */
	char code; /* where it failed */
	int16_t pad;
	int32_t err;
	uint64_t gen;
};

struct crowd_go {
	uint64_t gen;
	int64_t n;
};

static int crowd_fail(int up, int code, int err)
{
	struct crowd_msg m = {.tag = 'x', .code = (char)code, .err = err};
	(void)write_full(up, &m, sizeof m);
	return code;
}

/* One of the crowd: attach, hold a whole snapshot, report; on 'go', check it
 * did not change and that a new one shows the latest generation. */
static int crowd_main(const char *name, int up, int down)
{
	alarm(60);
	shmcfg *h = NULL;
	int r = shmcfg_attach(name, 0, NULL, &h);
	if (r)
		return crowd_fail(up, 2, r);
	shmcfg_snapshot *s;
	if ((r = shmcfg_snapshot_acquire(h, &s)))
		return crowd_fail(up, 3, r);
	uint64_t g0 = shmcfg_snapshot_generation(s);
	int64_t n0 = snapshot_n(s);
	if (n0 < 0)
		return crowd_fail(up, 4, (int)n0);
	struct crowd_msg m = {.tag = 'h', .gen = g0};
	if (write_full(up, &m, sizeof m))
		return 5;
	struct crowd_go go;
	if (read_full(down, &go, sizeof go, CHILD_TIMEOUT_MS))
		return 6;
	if (shmcfg_snapshot_generation(s) != g0 || snapshot_n(s) != n0)
		return crowd_fail(up, 7, (int)snapshot_n(s));
	shmcfg_snapshot_release(s);
	if ((r = shmcfg_snapshot_acquire(h, &s)))
		return crowd_fail(up, 8, r);
	if (shmcfg_snapshot_generation(s) != go.gen || snapshot_n(s) != go.n)
		return crowd_fail(up, 9, (int)shmcfg_snapshot_generation(s));
	shmcfg_snapshot_release(s);
	shmcfg_close(h);
	m = (struct crowd_msg){.tag = 'd'};
	return write_full(up, &m, sizeof m) ? 10 : 0;
}

/* Attach read-write while the reader table is full, commit n = 4242. */
static int crowd_writer_main(void *p)
{
	const char *name = p;
	shmcfg *h = NULL;
	int r = shmcfg_attach(name, 0, NULL, &h);
	CHECK(r == 0, 2, "read-write attach with the reader table full: %s", shmcfg_strerror(r));
	r = commit_n(h, 4242, NULL);
	CHECK(r == 0, 3, "commit with the reader table full: %s", shmcfg_strerror(r));
	shmcfg_close(h);
	return 0;
}

static const char *crowd_where(int code)
{
	switch (code) {
	case 2: return "read-write attach";
	case 3: return "snapshot";
	case 4: return "a torn snapshot";
	case 7: return "the held snapshot changed";
	case 8: return "the second snapshot";
	case 9: return "the second snapshot is not of the latest generation";
	default: return "?";
	}
}

static void test_crowd_of_readers_never_locked_out(void **state)
{
	(void)state;
	const char *name = new_name("trust-crowd");
	shmcfg *h = keep(test_create(name, &(shmcfg_create_opts){.readers = CROWD_READERS}));
	int64_t n = 1;
	uint64_t gen = 0;
	assert_int_equal(commit_n(h, n, &gen), 0);
	int attached = 0;
	for (int wave = 0; wave < CROWD / WAVE; wave++) {
		int up[2], down[2];
		assert_int_equal(pipe(up), 0);
		assert_int_equal(pipe(down), 0);
		fflush(NULL);
		for (int i = 0; i < WAVE; i++) {
			pid_t pid = fork();
			assert_true(pid >= 0);
			if (pid == 0) {
				int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
				for (size_t k = 0; k < sizeof sigs / sizeof sigs[0]; k++)
					signal(sigs[k], SIG_DFL);
				close(up[0]);
				close(down[1]);
				_exit(crowd_main(name, up[1], down[0]));
			}
			mass[nmass++] = pid;
		}
		close(up[1]);
		close(down[0]);
		/* every one holds a snapshot (or failed) */
		int holding = 0, failed = 0, code = 0, err = 0;
		for (int i = 0; i < WAVE; i++) {
			struct crowd_msg m;
			if (read_full(up[0], &m, sizeof m, CHILD_TIMEOUT_MS))
				fail_msg("wave %d: %d of %d children reported", wave, i, WAVE);
			if (m.tag == 'h') {
				holding++;
			} else if (!failed++) {
				code = m.code;
				err = m.err;
			}
		}
		/* a writer commits while they hold the whole table */
		if (wave == 0 && holding > CROWD_READERS)
			assert_child_ok(spawn(crowd_writer_main, (void *)name));
		/* commits while they hold their snapshots */
		shmcfg_set_commit_timeout(h, 2000);
		for (int k = 0; k < 3; k++) {
			int r = commit_n(h, ++n, &gen);
			if (r)
				fail_msg("wave %d: commit with %d snapshots held: %s: %s", wave, holding,
					 shmcfg_strerror(r), shmcfg_errdetail());
		}
		struct crowd_go go[WAVE];
		for (int i = 0; i < WAVE; i++)
			go[i] = (struct crowd_go){gen, n};
		assert_int_equal(write_full(down[1], go, sizeof go), 0);
		for (int i = 0; i < holding; i++) {
			struct crowd_msg m;
			if (read_full(up[0], &m, sizeof m, CHILD_TIMEOUT_MS))
				fail_msg("wave %d: %d of %d holders finished", wave, i, holding);
			if (m.tag != 'd' && !failed++) {
				code = m.code;
				err = m.err;
			}
		}
		int bad_exits = 0;
		while (nmass > 0) {
			int st = reap(mass[--nmass]);
			if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
				if (!bad_exits++ && !failed)
					code = WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st);
			}
		}
		close(up[0]);
		close(down[1]);
		if (failed || bad_exits)
			fail_msg("wave %d: %d of %d children failed (%d exited with an error); the first at %s "
				 "(code %d): %d (%s)", wave, failed, WAVE, bad_exits, crowd_where(code), code, err,
				 shmcfg_errname(err));
		attached += holding;
	}
	assert_int_equal(attached, CROWD);
	shmcfg_info info;
	assert_int_equal(shmcfg_stat(h, &info), 0);
	fprintf(stderr, "# %d processes attached, %d at a time: readers_hwm %u, copy_fallbacks %" PRIu64 "\n",
		attached, WAVE, info.readers_hwm, info.copy_fallbacks);
	if (info.readers_hwm > CROWD_READERS || info.copy_fallbacks == 0)
		fail_msg("shmcfg_stat: readers_hwm %u (at most %d), copy_fallbacks %" PRIu64 " (expected > 0)",
			 info.readers_hwm, CROWD_READERS, info.copy_fallbacks);
	assert_int_equal(shmcfg_check(h, true, print_problem, NULL), 0);
}

/* ------------------------------------------------------------------ */
/* 6. Fork                                                            */
/* ------------------------------------------------------------------ */

static int release_inherited_main(void *p)
{
	shmcfg_snapshot_release(p);
	return 0;
}

static void test_child_release_does_not_unpin_parent_snapshot(void **state)
{
	(void)state;
	const char *name = new_name("trust-forkrel");
	shmcfg *h = keep(test_create(name, &(shmcfg_create_opts){.slots = 2}));
	shmcfg_set_commit_timeout(h, SHORT_TIMEOUT_MS);
	uint64_t gen = 0;
	assert_int_equal(commit_n(h, 1, &gen), 0);
	shmcfg_snapshot *s;
	assert_int_equal(shmcfg_snapshot_acquire(h, &s), 0);
	assert_int_equal(shmcfg_snapshot_generation(s), 2);
	assert_int_equal(snapshot_n(s), 1);
	/* a child releases the snapshot it inherited */
	assert_child_ok(spawn(release_inherited_main, s));
	/* generation 3 takes the other slot; 4 would need the held one */
	int r = commit_n(h, 2, &gen);
	if (r)
		fail_msg("first commit: %s: %s", shmcfg_strerror(r), shmcfg_errdetail());
	int r2 = commit_n(h, 3, &gen);
	int64_t now = snapshot_n(s);
	uint64_t sg = shmcfg_snapshot_generation(s);
	shmcfg_snapshot_release(s); /* before any failure: the teardown closes the handle */
	if (sg != 2 || now != 1)
		fail_msg("the parent's held snapshot of generation 2 (n = 1) now reads n = %" PRId64
			 " after a child released its inherited copy and the second commit %s", now,
			 r2 ? shmcfg_strerror(r2) : "succeeded");
	if (r2 != 0 && r2 != SHMCFG_E_BUSY)
		fail_msg("second commit: %s: %s", shmcfg_strerror(r2), shmcfg_errdetail());
	if (r2 == 0)
		fail_msg("the second commit succeeded over the slot of a held snapshot");
	r = commit_n(h, 3, &gen);
	if (r)
		fail_msg("commit after the release: %s: %s", shmcfg_strerror(r), shmcfg_errdetail());
	assert_int_equal(shmcfg_check(h, true, print_problem, NULL), 0);
}

/* Attach, hold a snapshot, fork a child that only sleeps (and never calls
 * shmcfg); the child sends its pid up once fork() returned in it (after the
 * fork handlers ran), and sleeps. */
static int fork_holder_main(void *p)
{
	struct other_arg *a = p;
	shmcfg *h = NULL;
	int r = shmcfg_attach(a->name, 0, NULL, &h);
	CHECK(r == 0, 2, "attach: %s", shmcfg_strerror(r));
	shmcfg_snapshot *s;
	r = shmcfg_snapshot_acquire(h, &s);
	CHECK(r == 0, 3, "snapshot: %s", shmcfg_strerror(r));
	fflush(NULL);
	pid_t c = fork();
	CHECK(c >= 0, 4, "fork: %s", strerror(errno));
	if (c == 0) {
		int32_t me = (int32_t)getpid();
		(void)write_full(a->up, &me, sizeof me);
		for (;;)
			pause();
	}
	for (;;)
		pause();
}

struct find_pid {
	pid_t pid;
	int found, alive;
};

static void find_pid_cb(const shmcfg_reader *r, void *ud)
{
	struct find_pid *f = ud;
	if (r->pid == f->pid) {
		f->found++;
		f->alive += r->alive;
	}
}

static void test_dead_reader_reclaimed_despite_forked_child(void **state)
{
	(void)state;
	const char *name = new_name("trust-forkdead");
	shmcfg *h = keep(test_create(name, &(shmcfg_create_opts){.slots = 2}));
	shmcfg_set_commit_timeout(h, SHORT_TIMEOUT_MS);
	int up[2];
	assert_int_equal(pipe(up), 0);
	struct other_arg a = {name, 0, 0, up[1], -1, 0};
	pid_t holder = spawn(fork_holder_main, &a);
	close(up[1]);
	int32_t child = 0;
	if (read_full(up[0], &child, sizeof child, CHILD_TIMEOUT_MS)) {
		assert_child_ok(holder);
		fail_msg("the holder stopped early");
	}
	close(up[0]);
	assert_true(child > 0 && nkids < MAX_KIDS);
	kids[nkids++] = child; /* killed by the teardown */
	struct find_pid f = {.pid = holder};
	(void)shmcfg_readers(h, find_pid_cb, &f);
	assert_int_equal(f.alive, 1);
	/* the holder dies; its child, which never used shmcfg, lives on */
	assert_int_equal(kill(holder, SIGKILL), 0);
	assert_child_killed(holder);
	assert_int_equal(kill(child, 0), 0);
	int r = shmcfg_gc(h, NULL, NULL);
	if (r < 1)
		fail_msg("gc reclaimed %d entries: the dead holder's entry is kept alive by its child %d, "
			 "which never used shmcfg", r, (int)child);
	/* generation 2 takes the free slot, 3 the one the dead holder pinned */
	uint64_t gen = 0;
	for (int64_t n = 1; n <= 2; n++) {
		r = commit_n(h, n, &gen);
		if (r)
			fail_msg("commit %" PRId64 " with the dead holder's child alive: %s: %s", n,
				 shmcfg_strerror(r), shmcfg_errdetail());
	}
	assert_int_equal(gen, 3);
}

/* ------------------------------------------------------------------ */
/* 7. A writer that dies after its busy mark                          */
/* ------------------------------------------------------------------ */

#ifdef SHMCFG_WITH_FAULTS
static int stop_then_die_writer_main(void *p)
{
	const char *name = p;
	shmcfg *h = NULL;
	int r = shmcfg_attach(name, 0, NULL, &h);
	CHECK(r == 0, 2, "attach: %s", shmcfg_strerror(r));
	setenv("SHMCFG_FAULT", "commit.chosen:1:stop,commit.busy", 1);
	r = commit_n(h, 777, NULL);
	CHECK(false, 10, "commit returned %d (%s): the fault points commit.chosen:1:stop and commit.busy "
	      "never fired", r, shmcfg_strerror(r));
}

static void test_writer_death_after_busy_mark_spares_snapshot(void **state)
{
	(void)state;
	const char *name = new_name("trust-busydeath");
	setenv("SHMCFG_THREAD_PINS", "0", 1); /* the process's pins; test_tpin.c has the threads' */
	shmcfg *h = keep(test_create(name, &(shmcfg_create_opts){.slots = 2}));
	shmcfg_set_commit_timeout(h, SHORT_TIMEOUT_MS);
	/* P: a snapshot of generation 1 (slot A), released: idle, its pin stays */
	uint64_t cur = __atomic_load_n(&h->hdr->current, __ATOMIC_ACQUIRE);
	assert_int_equal(cur_gen(cur), 1);
	uint32_t A = cur_slot(cur);
	shmcfg_snapshot *s;
	assert_int_equal(shmcfg_snapshot_acquire(h, &s), 0);
	assert_int_equal(shmcfg_snapshot_generation(s), 1);
	shmcfg_snapshot_release(s);
	if (h->reader < 0)
		fail_msg("P holds no reader entry after a snapshot: the scenario cannot be built");
	struct reader_ent *e = reader_at(h, (uint32_t)h->reader);
	int pin1 = -1;
	for (unsigned k = 0; k < SEG_PINS; k++)
		if (__atomic_load_n(&e->pins[k], __ATOMIC_ACQUIRE) == (uint64_t)1 << PIN_TAG_SHIFT)
			pin1 = (int)k; /* tag 1, no snapshot held */
	if (pin1 < 0)
		fail_msg("P's idle entry does not pin generation 1: the scenario cannot be built");
	/* generation 2 in slot B */
	uint64_t gen = 0;
	assert_int_equal(commit_n(h, 2, &gen), 0);
	assert_int_equal(gen, 2);
	assert_int_not_equal(cur_slot(__atomic_load_n(&h->hdr->current, __ATOMIC_ACQUIRE)), A);
	/* W chooses slot A (P is idle) and stops there */
	pid_t w = spawn(stop_then_die_writer_main, (void *)name);
	int st = wait_stopped(w, 10000);
	if (!WIFSTOPPED(st)) {
		char t[64];
		status_text(st, t, sizeof t);
		fail_msg("the writer did not stop at commit.chosen: it %s (SHMCFG_FAULT lists and :stop, "
			 "or the fault point commit.chosen, are missing)", t);
	}
	/* P becomes a reader that loaded A's stamp just before W's busy mark:
	 * counted on its pin of generation 1 */
	__atomic_fetch_add(&e->pins[pin1], 1, __ATOMIC_SEQ_CST);
	const struct shmcfg__cell *cells = slot_cells(h, slot_at(h, A));
	assert_int_equal((int64_t)__atomic_load_n(&cells[T_A].val, __ATOMIC_RELAXED), 0);
	assert_int_equal((int64_t)__atomic_load_n(&cells[T_B].val, __ATOMIC_RELAXED), 0);
	/* W marks A busy and dies before its pin re-check */
	assert_int_equal(kill(w, SIGCONT), 0);
	assert_child_killed(w);
	/* the next writer must not take A */
	int r = commit_n(h, 3, &gen);
	int64_t a_now = (int64_t)__atomic_load_n(&cells[T_A].val, __ATOMIC_RELAXED);
	int64_t b_now = (int64_t)__atomic_load_n(&cells[T_B].val, __ATOMIC_RELAXED);
	if (r == 0 || a_now != 0 || b_now != 0)
		fail_msg("after a writer died between its busy mark and its pin check, the next commit "
			 "returned %d (%s) and slot %u, in use by a snapshot of generation 1 (a = b = 0), "
			 "now holds a = %" PRId64 ", b = %" PRId64, r, r ? shmcfg_errname(r) : "0", A, a_now,
			 b_now);
	assert_int_equal(r, SHMCFG_E_BUSY);
	shmcfg_info info;
	assert_int_equal(shmcfg_stat(h, &info), 0);
	if (info.slot_gen[A] != 1)
		fail_msg("shmcfg_stat: the busy slot %u shows generation %" PRIu64 ", not its old one (1)", A,
			 info.slot_gen[A]);
	/* P done reading: the slot is free again, and the segment sound */
	__atomic_fetch_sub(&e->pins[pin1], 1, __ATOMIC_SEQ_CST);
	r = commit_n(h, 4, &gen);
	if (r)
		fail_msg("commit after the reader finished: %s: %s", shmcfg_strerror(r), shmcfg_errdetail());
	assert_int_equal(gen, 3);
	assert_int_equal(get_i(h, T_A), 4);
	assert_int_equal(shmcfg_check(h, true, print_problem, NULL), 0);
}
#endif

/* ------------------------------------------------------------------ */
/* A co-tenant with write access overwrites this process's pin words    */
/* ------------------------------------------------------------------ */

struct scribble {
	const char *name;
	int reader, pin;
	uint64_t word;
};

/* Another process, attached read-write, stores word in entry reader's pin. */
static int scribble_main(void *arg)
{
	const struct scribble *sc = arg;
	shmcfg *h = NULL;
	int r = shmcfg_attach(sc->name, 0, NULL, &h);
	CHECK(r == 0, 2, "attach: %s", shmcfg_strerror(r));
	__atomic_store_n(&reader_at(h, (uint32_t)sc->reader)->pins[sc->pin], sc->word, __ATOMIC_SEQ_CST);
	shmcfg_close(h);
	return 0;
}

/* A log callback that keeps the last message in ud (512 bytes). */
static void log_into(int level, const char *msg, void *ud)
{
	(void)level;
	snprintf(ud, 512, "%s", msg);
}

static void scribble(const char *name, const shmcfg *h, int pin, uint64_t word)
{
	struct scribble sc = {name, h->reader, pin, word};
	assert_child_ok(spawn(scribble_main, &sc));
}

/*
 * A writer co-tenant overwrites the words of this process's reader entry.
 * A view's tag overwritten: the next snapshot makes a new view (it used to
 * trust the old view's generation, spin through every round and copy). A
 * count zeroed under a held snapshot: the release does not wrap the word
 * into its tag; it says what it found.
 */
static void test_overwritten_pin_words(void **state)
{
	(void)state;
	const char *name = new_name("trust-pinscribble");
	setenv("SHMCFG_THREAD_PINS", "0", 1); /* the process's pins; test_tpin.c has the threads' */
	shmcfg *h = keep(test_create(name, NULL));
	assert_int_equal(commit_n(h, 5, NULL), 0);
	shmcfg_snapshot *s;
	assert_int_equal(shmcfg_snapshot_acquire(h, &s), 0);
	int k = ((struct shmcfg_snapshot *)s)->pin;
	assert_true(k >= 0 && h->reader >= 0);
	uint64_t gen = shmcfg_snapshot_generation(s);
	shmcfg_snapshot_release(s);
	uint64_t *w = &reader_at(h, (uint32_t)h->reader)->pins[k];
	assert_int_equal(*w, GEN_TAG(gen) << PIN_TAG_SHIFT);

	scribble(name, h, k, (uint64_t)0xdead << PIN_TAG_SHIFT);
	assert_int_equal(shmcfg_snapshot_acquire(h, &s), 0);
	if (((struct shmcfg_snapshot *)s)->is_copy)
		fail_msg("with its view's tag overwritten, the snapshot was a copy, not a new view");
	assert_int_equal(shmcfg_snapshot_generation(s), gen);
	assert_int_equal(snapshot_n(s), 5);
	k = ((struct shmcfg_snapshot *)s)->pin;
	w = &reader_at(h, (uint32_t)h->reader)->pins[k];
	assert_int_equal(*w, GEN_TAG(gen) << PIN_TAG_SHIFT | 1);

	scribble(name, h, k, GEN_TAG(gen) << PIN_TAG_SHIFT); /* the count zeroed */
	shmcfg_opt none;
	assert_int_equal(shmcfg_lookup(h, "no.such.option", &none), SHMCFG_E_NOOPT);
	char detail[512];
	snprintf(detail, sizeof detail, "%s", shmcfg_errdetail());
	char logged[512] = "";
	shmcfg_set_log(log_into, logged);
	shmcfg_snapshot_release(s);
	shmcfg_set_log(NULL, NULL);
	if (*w != GEN_TAG(gen) << PIN_TAG_SHIFT)
		fail_msg("release of a count of 0 left the word %#" PRIx64 " (tag %#" PRIx64 ", count %" PRIu64
			 "), not %#" PRIx64, *w, PIN_TAG(*w), PIN_COUNT(*w), GEN_TAG(gen) << PIN_TAG_SHIFT);
	if (!strstr(logged, "counted no snapshot"))
		fail_msg("the release logged \"%s\"", logged);
	assert_string_equal(shmcfg_errdetail(), detail); /* a releaser keeps the detail */
	/* the entry is sound again: commits and snapshots go on */
	assert_int_equal(commit_n(h, 6, NULL), 0);
	assert_int_equal(shmcfg_snapshot_acquire(h, &s), 0);
	assert_int_equal(snapshot_n(s), 6);
	shmcfg_snapshot_release(s);
	assert_int_equal(commit_n(h, 7, NULL), 0);
}

/* ------------------------------------------------------------------ */

/* ------------------------------------------------------------------ */
/* fork() while snapshots are held (layout 9: while grace periods ran)  */
/* ------------------------------------------------------------------ */

struct holder {
	shmcfg *h;
	int go[2];      /* the main thread says when to release */
	int held[2];    /* the holder says it holds */
};

static void *hold_snapshot(void *p)
{
	struct holder *x = p;
	shmcfg_snapshot *s;
	char c = shmcfg_snapshot_acquire(x->h, &s) == 0 ? 'h' : 'e';
	if (write(x->held[1], &c, 1) != 1 || c != 'h')
		return NULL;
	(void)read(x->go[0], &c, 1);
	shmcfg_snapshot_release(s);
	return NULL;
}

/* In the child: attach anew, take snapshots, commit, close: must not hang
 * on the parent's state inherited mid-use. */
static int child_uses_shmcfg(void *arg)
{
	const char *name = arg;
	shmcfg *c = NULL;
	if (shmcfg_attach(name, 0, NULL, &c))
		return 2;
	for (int i = 0; i < 3; i++) {
		shmcfg_snapshot *s;
		if (shmcfg_snapshot_acquire(c, &s))
			return 3;
		shmcfg_snapshot_release(s);
		if (set_and_commit(c, T_A, i == 1 ? "7" : "8", NULL) < 0)
			return 4;
	}
	shmcfg_close(c);
	return 0;
}

/*
 * Another thread holds a snapshot while the main thread replaces the view
 * (layout 9: a grace period then waited for the holder), and forks. fork() must not wait for that snapshot (here the
 * holder releases only after fork() returned: waiting would deadlock, and
 * the alarm would fail the test), and the child must be able to use shmcfg
 * and close.
 */
static void test_fork_during_grace_period_neither_waits_nor_hangs_child(void **state)
{
	(void)state;
	const char *name = new_name("trust-forkgp");
	shmcfg *h = keep(test_create(name, NULL));
	struct holder x = {.h = h};
	assert_int_equal(pipe(x.go), 0);
	assert_int_equal(pipe(x.held), 0);
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, hold_snapshot, &x), 0);
	char c;
	assert_int_equal(read(x.held[0], &c, 1), 1);
	assert_int_equal(c, 'h');
	/* a commit, then a snapshot of it: a new view beside the held one */
	assert_int_equal(set_and_commit(h, T_A, "5", NULL), 0);
	shmcfg_snapshot *s;
	assert_int_equal(shmcfg_snapshot_acquire(h, &s), 0);
	shmcfg_snapshot_release(s);
	usleep(50000);
	pid_t pid = spawn(child_uses_shmcfg, (void *)name);
	c = 'g';
	assert_int_equal(write(x.go[1], &c, 1), 1);
	pthread_join(t, NULL);
	assert_child_ok(pid);
	close(x.go[0]), close(x.go[1]), close(x.held[0]), close(x.held[1]);
}

/* The forking thread itself holds snapshots of two generations: the
 * child can still attach, snapshot, commit and close. */
static void test_fork_holding_snapshots_child_can_close(void **state)
{
	(void)state;
	const char *name = new_name("trust-forksnap");
	shmcfg *h = keep(test_create(name, NULL));
	shmcfg_snapshot *s0, *s1;
	assert_int_equal(shmcfg_snapshot_acquire(h, &s0), 0);
	assert_int_equal(set_and_commit(h, T_A, "5", NULL), 0);
	assert_int_equal(shmcfg_snapshot_acquire(h, &s1), 0); /* a second view */
	pid_t pid = spawn(child_uses_shmcfg, (void *)name);
	assert_child_ok(pid);
	shmcfg_snapshot_release(s1);
	shmcfg_snapshot_release(s0);
}

/* Descriptors of this process open on segment name's objects. */
static int fds_of(const char *name)
{
	char want[300], path[300], target[512];
	snprintf(want, sizeof want, "/dev/shm/shmcfg.%s", name);
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return -1;
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		snprintf(path, sizeof path, "/proc/self/fd/%s", de->d_name);
		ssize_t len = readlink(path, target, sizeof target - 1);
		if (len > 0) {
			target[len] = 0;
			n += !strcmp(target, want);
		}
	}
	closedir(d);
	return n;
}

struct inherited {
	const char *name;
	shmcfg *h, *ro;
	shmcfg_snapshot *pinned, *copy;
};

/* The child closes both inherited handles, then reads and releases the
 * snapshots it inherited, in the order that once freed what they read. */
static int child_closes_inherited(void *arg)
{
	struct inherited *x = arg;
	int fds = fds_of(x->name); /* the two handles' and the parent's writer's */
	shmcfg_close(x->ro);
	CHECK(snapshot_n(x->copy) == 5, 2, "the copy after its handle's close: %" PRId64, snapshot_n(x->copy));
	shmcfg_snapshot_release(x->copy);
	shmcfg_close(x->h);
	CHECK(snapshot_n(x->pinned) == 5, 3, "the pinned snapshot after its handle's close: %" PRId64,
	      snapshot_n(x->pinned));
	shmcfg_snapshot_release(x->pinned);
	CHECK(fds_of(x->name) == fds - 2, 4, "%d of %d descriptors of the segment left open", fds_of(x->name), fds);
	return 0;
}

/*
 * A child closes the handles it inherited while it still holds the
 * snapshots it inherited (a pinned one, a copy): they stay readable, their
 * release touches nothing freed (under ASan: nothing freed is read), and the
 * descriptors are closed. The parent's snapshots are its own throughout.
 */
static void test_child_closes_inherited_handles_holding_snapshots(void **state)
{
	(void)state;
	const char *name = new_name("trust-forkclose");
	shmcfg *w = keep(test_create(name, NULL));
	assert_int_equal(commit_n(w, 5, NULL), 0);
	struct inherited x = {.name = name};
	assert_int_equal(shmcfg_attach(name, 0, NULL, &x.h), 0);
	assert_int_equal(shmcfg_attach(name, SHMCFG_ATTACH_RDONLY, NULL, &x.ro), 0);
	assert_int_equal(shmcfg_snapshot_acquire(x.h, &x.pinned), 0);
	assert_int_equal(shmcfg_snapshot_acquire(x.ro, &x.copy), 0);
	assert_child_ok(spawn(child_closes_inherited, &x));
	assert_int_equal(commit_n(w, 6, NULL), 0);
	assert_int_equal(snapshot_n(x.pinned), 5);
	assert_int_equal(snapshot_n(x.copy), 5);
	shmcfg_snapshot_release(x.pinned);
	shmcfg_snapshot_release(x.copy);
	shmcfg_close(x.h);
	shmcfg_close(x.ro);
}

/* The child closes both inherited handles, of which nothing was held at the
 * fork: they detach (unmapped, no longer among the attached). */
static int child_closes_idle_inherited(void *arg)
{
	struct inherited *x = arg;
	int maps = maps_of(x->name);
	shmcfg_close(x->h);
	shmcfg_close(x->ro);
	CHECK(maps_of(x->name) <= maps - 2, 2, "%d of %d mappings left after closing two idle handles",
	      maps_of(x->name), maps);
	shmcfg *again;
	CHECK(shmcfg_attach(x->name, SHMCFG_ATTACH_RDONLY, NULL, &again) == 0, 3, "attach again");
	shmcfg_snapshot *c;
	CHECK(shmcfg_snapshot_acquire(again, &c) == 0 && snapshot_n(c) == 5, 4, "a copy of its own");
	shmcfg_close(again); /* with its own copy held: the close waits for it */
	CHECK(snapshot_n(c) == 5, 5, "the child's own copy after its handle's close");
	shmcfg_snapshot_release(c);
	CHECK(maps_of(x->name) <= maps - 2, 6, "the child's own handle stayed mapped");
	return 0;
}

/* A child of a process that held no snapshot of a handle when it forked
 * closes that handle as its parent would: it detaches. */
static void test_child_closes_idle_inherited_handles(void **state)
{
	(void)state;
	const char *name = new_name("trust-forkidle");
	shmcfg *w = keep(test_create(name, NULL));
	assert_int_equal(commit_n(w, 5, NULL), 0);
	struct inherited x = {.name = name};
	assert_int_equal(shmcfg_attach(name, 0, NULL, &x.h), 0);
	assert_int_equal(shmcfg_attach(name, SHMCFG_ATTACH_RDONLY, NULL, &x.ro), 0);
	shmcfg_snapshot *s;
	assert_int_equal(shmcfg_snapshot_acquire(x.h, &s), 0); /* views made, then let go */
	shmcfg_snapshot_release(s);
	assert_int_equal(shmcfg_snapshot_acquire(x.ro, &s), 0);
	shmcfg_snapshot_release(s);
	assert_child_ok(spawn(child_closes_idle_inherited, &x));
	shmcfg_close(x.h);
	shmcfg_close(x.ro);
}

struct churner {
	shmcfg *h;
	shmcfg_snapshot *_Atomic held; /* the snapshot it holds now, or NULL */
	atomic_int stop;
};

/* Takes and drops snapshots as fast as it can, publishing the one it holds. */
static void *churn_snapshots(void *arg)
{
	struct churner *c = arg;
	while (!atomic_load(&c->stop)) {
		shmcfg_snapshot *s;
		if (shmcfg_snapshot_acquire(c->h, &s))
			break;
		atomic_store(&c->held, s);
		for (volatile int i = 0; i < 200; i++)
			;
		atomic_store(&c->held, NULL);
		shmcfg_snapshot_release(s);
	}
	return NULL;
}

/* The child: the snapshot the other thread held at the fork (if any), read
 * after closing the handle: it must still be readable. */
static int child_reads_after_close(void *arg)
{
	struct churner *c = arg;
	shmcfg_snapshot *s = atomic_load(&c->held);
	shmcfg_close(c->h);
	CHECK(!s || snapshot_n(s) == 5, 2, "the inherited snapshot after the close: %" PRId64, snapshot_n(s));
	return 0;
}

/*
 * Another thread takes snapshots while this one forks: a snapshot taken
 * between the fork handler's look at the pin words and the fork itself is
 * in the child too, so the child's close must keep what it reads. Without
 * the handler's Dekker with the acquire (shmcfg__forking), about one child
 * in five closed and unmapped the handle under it (SIGSEGV).
 */
static void test_fork_while_other_thread_takes_snapshots(void **state)
{
	(void)state;
	const char *name = new_name("trust-forkchurn");
	shmcfg *w = keep(test_create(name, NULL));
	assert_int_equal(commit_n(w, 5, NULL), 0);
	struct churner c = {0};
	assert_int_equal(shmcfg_attach(name, 0, NULL, &c.h), 0);
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, churn_snapshots, &c), 0);
	for (int i = 0; i < 300; i++)
		assert_child_ok(spawn(child_reads_after_close, &c));
	atomic_store(&c.stop, 1);
	pthread_join(t, NULL);
	shmcfg_close(c.h);
}

struct lock_holder {
	shmcfg *h;
	int held[2], go[2];
};

/* Holds the handle's view_lock, as a follow does through a whole attach. */
static void *hold_view_lock(void *arg)
{
	struct lock_holder *l = arg;
	char c = 'h';
	pthread_mutex_lock(&l->h->view_lock);
	if (write(l->held[1], &c, 1) != 1 || read(l->go[0], &c, 1) != 1)
		c = 0;
	pthread_mutex_unlock(&l->h->view_lock);
	return NULL;
}

static int child_follows(void *arg)
{
	shmcfg *h = arg;
	int64_t n = get_i(h, T_A); /* follows the replacement: takes view_lock */
	CHECK(n == 9, 2, "read after the replacement: %" PRId64, n);
	shmcfg_snapshot *s;
	CHECK(shmcfg_snapshot_acquire(h, &s) == 0, 3, "snapshot");
	shmcfg_snapshot_release(s);
	shmcfg_close(h);
	return 0;
}

/*
 * fork() while another thread holds a handle's view_lock: the child's
 * first call that follows a replacement takes it, and must not wait for a
 * thread the child does not have (the child's mutexes start over).
 */
static void test_fork_while_view_lock_held(void **state)
{
	(void)state;
	const char *name = new_name("trust-forklock");
	shmcfg *w = keep(test_create(name, NULL));
	shmcfg *ro;
	assert_int_equal(shmcfg_attach(name, SHMCFG_ATTACH_RDONLY, NULL, &ro), 0);
	/* replaced (same schema), not yet followed: ro follows at its next read */
	shmcfg *w2 = test_create(name, NULL);
	assert_int_equal(commit_n(w2, 9, NULL), 0);
	struct lock_holder l = {.h = ro};
	assert_int_equal(pipe(l.held), 0);
	assert_int_equal(pipe(l.go), 0);
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, hold_view_lock, &l), 0);
	char c;
	assert_int_equal(read(l.held[0], &c, 1), 1);
	pid_t pid = spawn(child_follows, ro);
	assert_child_ok(pid); /* a hang is killed at CHILD_TIMEOUT_MS */
	c = 'g';
	assert_int_equal(write(l.go[1], &c, 1), 1);
	pthread_join(t, NULL);
	assert_int_equal(get_i(ro, T_A), 9);
	shmcfg_close(ro);
	shmcfg_close(w2);
	(void)w;
	close(l.held[0]), close(l.held[1]), close(l.go[0]), close(l.go[1]);
}


/*
 * Every case and its tier. This file builds two programs: tests/test_trust
 * (make check) runs the cases any user can run; tests/test_trust_root
 * (make regtest, -DTIER_ROOT) the ones with other users, and as another user
 * says so and runs none.
 */
enum { ANY_USER, ROOT_ONLY };
static const struct {
	struct CMUnitTest test;
	int who;
} all_tests[] = {
#define CASE(fn, who) {cmocka_unit_test_setup_teardown(fn, trust_setup, trust_teardown), who}
	CASE(test_lock_object_modes_follow_writers, ANY_USER),
	CASE(test_non_regular_objects_refused_at_once, ANY_USER),
	CASE(test_sparse_object_refused, ANY_USER),
	CASE(test_unvalidatable_current_fails_reads_fast, ANY_USER),
	CASE(test_unlink_retires_waiters, ANY_USER),
	CASE(test_removed_and_created_retires_and_reattach_follows, ANY_USER),
	CASE(test_plain_unlink_retires_waiters, ANY_USER),
	CASE(test_attached_pids_lists_attached_processes, ANY_USER),
	CASE(test_crowd_of_readers_never_locked_out, ANY_USER),
	CASE(test_child_release_does_not_unpin_parent_snapshot, ANY_USER),
	CASE(test_dead_reader_reclaimed_despite_forked_child, ANY_USER),
	CASE(test_fork_during_grace_period_neither_waits_nor_hangs_child, ANY_USER),
	CASE(test_fork_holding_snapshots_child_can_close, ANY_USER),
	CASE(test_overwritten_pin_words, ANY_USER),
	CASE(test_child_closes_inherited_handles_holding_snapshots, ANY_USER),
	CASE(test_child_closes_idle_inherited_handles, ANY_USER),
	CASE(test_fork_while_view_lock_held, ANY_USER),
	CASE(test_fork_while_other_thread_takes_snapshots, ANY_USER),
#ifdef SHMCFG_WITH_FAULTS
	CASE(test_writer_death_after_busy_mark_spares_snapshot, ANY_USER),
#endif
	CASE(test_lock_object_closed_to_readonly_users, ROOT_ONLY),
	CASE(test_readonly_read_locks_block_no_commit, ROOT_ONLY),
	CASE(test_stolen_futex_wakeups_delay_waiters_briefly, ROOT_ONLY),
	CASE(test_readers_let_in_by_chmod_are_woken, ROOT_ONLY),
	CASE(test_readonly_handle_keeps_no_write_access, ROOT_ONLY),
	CASE(test_foreign_owned_segment_refused_unless_expected, ROOT_ONLY),
	CASE(test_squatted_names_do_not_capture_creation, ROOT_ONLY),
	CASE(test_heap_growth_refused_to_other_users, ROOT_ONLY),
#undef CASE
};

int main(void)
{
	unsetenv("SHMCFG_FAULT");
	if (getenv("TEST_FILTER"))
		cmocka_set_test_filter(getenv("TEST_FILTER"));
#ifdef TIER_ROOT
	const int tier = ROOT_ONLY;
	if (geteuid() != 0) {
		/* automake's TAP driver counts a plan of 0 as a skip */
		printf("1..0 # SKIP not root: the tests of other users need root\n");
		return 0;
	}
#else
	const int tier = ANY_USER;
#ifndef SHMCFG_WITH_FAULTS
	fprintf(stderr, "# fault points not compiled in (--disable-fault-injection): "
			"test_writer_death_after_busy_mark_spares_snapshot left out\n");
#endif
#endif
	struct CMUnitTest tests[sizeof all_tests / sizeof all_tests[0]];
	size_t n = 0;
	for (size_t i = 0; i < sizeof all_tests / sizeof all_tests[0]; i++)
		if (all_tests[i].who == tier)
			tests[n++] = all_tests[i].test;
#ifdef TIER_ROOT
	return _cmocka_run_group_tests("test_trust_root", tests, n, NULL, NULL);
#else
	return _cmocka_run_group_tests("test_trust", tests, n, NULL, NULL);
#endif
}
