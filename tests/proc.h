/* SPDX-License-Identifier: MIT */
/* Shared by the tests that fork processes (test_multiproc, test_crash):
 * children with bounded waits, pipes, and a teardown that kills and unlinks
 * whatever a failed test left. Include after common.h. */
#ifndef SHMCFG_TEST_PROC_H
#define SHMCFG_TEST_PROC_H

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>

#include "common.h"

#define CHILD_TIMEOUT_MS 30000 /* generous: only a hung child ever waits this long */
#define MAX_KIDS 16
#define MAX_NAMES 8
#define MAX_HANDLES 8

static pid_t kids[MAX_KIDS];
static int nkids;
static char names[MAX_NAMES][64];
static int nnames;
static shmcfg *handles[MAX_HANDLES];
static int nhandles;

/* A fresh segment name, unlinked by the teardown whatever happens. */
static inline const char *new_name(const char *tag)
{
	assert_true(nnames < MAX_NAMES);
	snprintf(names[nnames], sizeof names[0], "%s", test_name(tag));
	return names[nnames++];
}

/* A handle closed by the teardown (tests close theirs on success). */
static inline shmcfg *keep(shmcfg *h)
{
	assert_non_null(h);
	assert_true(nhandles < MAX_HANDLES);
	handles[nhandles++] = h;
	return h;
}

static inline void drop(shmcfg *h)
{
	for (int i = 0; i < nhandles; i++)
		if (handles[i] == h) {
			handles[i] = handles[--nhandles];
			break;
		}
	shmcfg_close(h);
}

static inline shmcfg *attach_ro(const char *name)
{
	shmcfg *ro = NULL;
	int r = shmcfg_attach(name, SHMCFG_ATTACH_RDONLY, NULL, &ro);
	if (r)
		fail_msg("attach %s read-only: %s: %s", name, shmcfg_strerror(r), shmcfg_errdetail());
	return keep(ro);
}

static inline uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Fork a child running fn(arg); its return value is its exit status. The
 * child leaves through _exit(): no cmocka, no atexit handlers, no flushing of
 * the parent's buffers. */
static inline pid_t spawn(int (*fn)(void *), void *arg)
{
	assert_true(nkids < MAX_KIDS);
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		/* not cmocka's handlers: a crash must end the child */
		int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
		for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
			signal(sigs[i], SIG_DFL);
		_exit(fn(arg));
	}
	kids[nkids++] = pid;
	return pid;
}

static inline void untrack(pid_t pid)
{
	for (int i = 0; i < nkids; i++)
		if (kids[i] == pid) {
			kids[i] = kids[--nkids];
			return;
		}
}

static inline int teardown(void **state)
{
	(void)state;
	while (nkids > 0) {
		pid_t pid = kids[--nkids];
		kill(pid, SIGKILL);
		(void)waitpid(pid, NULL, 0);
	}
	while (nhandles > 0)
		shmcfg_close(handles[--nhandles]);
	/* and the lock objects of segments a test removed by hand (unlink(2),
	 * a link planted over the name): make check leaves /dev/shm as it was */
	while (nnames > 0) {
		(void)shmcfg_unlink(names[--nnames]);
		(void)shmcfg_orphans(names[nnames], SHMCFG_ORPHANS_REMOVE, NULL, NULL);
	}
	return 0;
}

/* How many lock objects /dev/shm holds for the segment name (any instance). */
static inline int locks_of(const char *name)
{
	char prefix[300];
	int n = 0, plen = snprintf(prefix, sizeof prefix, "shmcfg-lock.%s.", name);
	DIR *d = opendir("/dev/shm");
	assert_non_null(d);
	for (struct dirent *e; (e = readdir(d));)
		if (!strncmp(e->d_name, prefix, (size_t)plen) && strlen(e->d_name + plen) == 32)
			n++;
	closedir(d);
	return n;
}

/* Read exactly len bytes, waiting at most timeout_ms; 0 or -1 (EOF, timeout). */
static inline int read_full(int fd, void *buf, size_t len, int timeout_ms)
{
	uint64_t deadline = mono_ms() + (uint64_t)timeout_ms;
	size_t got = 0;
	while (got < len) {
		uint64_t now = mono_ms();
		if (now >= deadline)
			return -1;
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int r = poll(&p, 1, (int)(deadline - now));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		ssize_t n = read(fd, (char *)buf + got, len - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	return 0;
}

static inline int write_full(int fd, const void *buf, size_t len)
{
	return write(fd, buf, len) == (ssize_t)len ? 0 : -1;
}

/* Child-side check: print what failed and return an exit status. */
#define CHECK(cond, code, ...)                                                                   \
	do {                                                                                     \
		if (!(cond)) {                                                                   \
			fprintf(stderr, "# child %d: %s:%d: %s: ", (int)getpid(), __FILE__,      \
				__LINE__, #cond);                                                \
			fprintf(stderr, __VA_ARGS__);                                            \
			fprintf(stderr, " [%s]\n", shmcfg_errdetail());                          \
			return (code);                                                           \
		}                                                                                \
	} while (0)

/* ------------------------------------------------------------------ */

static inline int commit_n(shmcfg *h, int64_t n, uint64_t *gen)
{
	char text[32];
	snprintf(text, sizeof text, "%" PRId64, n);
	shmcfg_txn *t;
	int r = shmcfg_txn_begin(h, &t);
	if (r)
		return r;
	if ((r = shmcfg_txn_set_int(t, T_A, n)) || (r = shmcfg_txn_set_int(t, T_B, -n)) ||
	    (r = shmcfg_txn_set_str(t, T_C, text))) {
		shmcfg_txn_abort(t);
		return r;
	}
	return shmcfg_txn_commit(t, gen);
}

/* Wait (bounded) for a child to end; a hung child is killed and fails the test. */
static inline int reap_within(pid_t pid, int timeout_ms)
{
	uint64_t deadline = mono_ms() + (uint64_t)timeout_ms;
	int st = 0;
	for (;;) {
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid)
			break;
		assert_true(r == 0 || errno == EINTR);
		if (mono_ms() > deadline) {
			kill(pid, SIGKILL);
			(void)waitpid(pid, &st, 0);
			untrack(pid);
			fail_msg("child %d did not finish within %d ms", (int)pid, timeout_ms);
		}
		usleep(1000);
	}
	untrack(pid);
	return st;
}

static inline int reap(pid_t pid)
{
	return reap_within(pid, CHILD_TIMEOUT_MS);
}

static inline void status_text(int st, char *buf, size_t len)
{
	if (WIFEXITED(st))
		snprintf(buf, len, "exited with status %d", WEXITSTATUS(st));
	else if (WIFSIGNALED(st))
		snprintf(buf, len, "killed by signal %d", WTERMSIG(st));
	else
		snprintf(buf, len, "status %#x", st);
}

/* Reap a child and assert that it exited with status 0. */
static inline void assert_child_ok(pid_t pid)
{
	int st = reap(pid);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		char t[64];
		status_text(st, t, sizeof t);
		fail_msg("child %d %s", (int)pid, t);
	}
}

/* Reap a child and assert that SIGKILL ended it. */
static inline void assert_child_killed(pid_t pid)
{
	int st = reap(pid);
	if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL) {
		char t[64];
		status_text(st, t, sizeof t);
		fail_msg("child %d should have died of SIGKILL but %s", (int)pid, t);
	}
}

/* Wait (bounded) until a child stops; returns its status (stopped, or ended:
 * then it is no longer tracked). */
static inline int wait_stopped(pid_t pid, int timeout_ms)
{
	uint64_t deadline = mono_ms() + (uint64_t)timeout_ms;
	for (;;) {
		int st;
		pid_t r = waitpid(pid, &st, WNOHANG | WUNTRACED);
		if (r == pid) {
			if (!WIFSTOPPED(st))
				untrack(pid);
			return st;
		}
		assert_true(r == 0 || errno == EINTR);
		if (mono_ms() > deadline)
			fail_msg("child %d neither stopped nor ended within %d ms", (int)pid, timeout_ms);
		usleep(1000);
	}
}

/* A child that stops itself at a fault point (NAME:stop): fail unless it does. */
static inline void assert_child_stops(pid_t pid, const char *point)
{
	int st = wait_stopped(pid, CHILD_TIMEOUT_MS);
	if (!WIFSTOPPED(st)) {
		char t[64];
		status_text(st, t, sizeof t);
		fail_msg("child %d never stopped at %s: it %s", (int)pid, point, t);
	}
}

/* Stop a child and wait (bounded) until it is stopped. */
static inline void stop_child(pid_t pid)
{
	assert_int_equal(kill(pid, SIGSTOP), 0);
	assert_true(WIFSTOPPED(wait_stopped(pid, CHILD_TIMEOUT_MS)));
}

/* A problem shmcfg_check() reports, as a TAP comment. */
static inline void print_problem(const char *problem, void *ud)
{
	(void)ud;
	fprintf(stderr, "# check: %s\n", problem);
}

/* Take and release one snapshot: claims the handle's reader entry. */
static inline int snapshot_once(shmcfg *h)
{
	shmcfg_snapshot *s;
	int r = shmcfg_snapshot_acquire(h, &s);
	if (!r)
		shmcfg_snapshot_release(s);
	return r;
}

/* The n of a snapshot whose options were committed together as a = n,
 * b = -n, c = str(n); -1 if they disagree (a torn generation), -2 on error. */
static inline int64_t snapshot_n(shmcfg_snapshot *s)
{
	shmcfg_value a, b, c;
	if (shmcfg_snapshot_get(s, T_A, &a) || shmcfg_snapshot_get(s, T_B, &b) ||
	    shmcfg_snapshot_get(s, T_C, &c))
		return -2;
	char want[32];
	snprintf(want, sizeof want, "%" PRId64, a.u.i);
	if (b.u.i != -a.u.i || c.u.str.len != strlen(want) || memcmp(c.u.str.ptr, want, c.u.str.len))
		return -1;
	return a.u.i;
}

#endif
