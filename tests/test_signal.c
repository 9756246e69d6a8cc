/* SPDX-License-Identifier: MIT */
/* The async-signal-safe subset: the inline getters and shmcfg_generation(),
 * called from a signal handler that interrupts a thread (without patches)
 * in the middle of snapshots, commits and reads. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>

#include "common.h"

#define RUN_NS 1000000000ll /* the interrupted thread works at least this long */
#define MIN_HANDLED 100     /* ... and until this many signals were handled */
#define MIN_COMMITS 20      /* ... and it committed this many times */
#define GIVE_UP_NS 30000000000ll /* or until this long, on a machine too busy for both */
#define WATCHDOG_S 60       /* a deadlock ends the program here */
#define STR_(x) #x
#define STR(x) STR_(x)

static shmcfg *seg;

/* Written by the worker, read by the handler that interrupts it (lock-free
 * atomics, async-signal-safe). */
static atomic_llong committed; /* t.a of the last commit that returned */
static atomic_ullong committed_gen;

/* The handler's findings. */
static atomic_long handled;
static atomic_long bad;          /* reads that broke a rule */
static char bad_what[128];       /* the first of them (written once) */
static long long seen_a = -1;    /* only the handler touches these */
static uint64_t seen_gen;

static void note_bad(const char *what)
{
	if (atomic_fetch_add(&bad, 1) == 0) /* once; no stdio in a handler */
		for (size_t i = 0; i + 1 < sizeof bad_what && (bad_what[i] = what[i]); i++)
			;
}

/* Only the subset: no lock, no allocation, no call into the library. */
static void on_usr1(int sig)
{
	(void)sig;
	int saved = errno;
	long long floor_a = atomic_load(&committed);
	uint64_t floor_gen = atomic_load(&committed_gen);
	uint64_t g = shmcfg_generation(seg);
	int64_t a = -1;
	bool flag = false;
	double ratio = -1;
	if (shmcfg_get_int(seg, T_A, &a) != 0)
		note_bad("get_int failed");
	else if (a < floor_a || a < seen_a)
		note_bad("t.a went back"); /* a commit that returned is seen */
	else if (a > floor_a + 1)
		note_bad("t.a beyond the commit in progress");
	if (shmcfg_get_bool(seg, T_FLAG, &flag) != 0)
		note_bad("get_bool failed");
	if (shmcfg_get_float(seg, T_RATIO, &ratio) != 0)
		note_bad("get_float failed");
	else if (ratio != 0.25 && ratio != 0.5 && ratio != 0.75)
		note_bad("t.ratio holds a value never written");
	if (g < floor_gen || g < seen_gen)
		note_bad("the generation went back");
	seen_a = a > seen_a ? a : seen_a;
	seen_gen = g > seen_gen ? g : seen_gen;
	atomic_fetch_add(&handled, 1);
	errno = saved;
}

static void on_watchdog(int sig)
{
	(void)sig;
	static const char msg[] = "# test_signal: not done in " STR(WATCHDOG_S) " s: deadlock\n";
	(void)!write(2, msg, sizeof msg - 1);
	_exit(99);
}

struct work {
	atomic_bool stop; /* set by the signalling thread */
	atomic_bool done;
	long commits, snapshots, reads;
	int err;
	char why[256];
};

static long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

#define WORK_FAIL(w, r, what)                                                             \
	do {                                                                              \
		(w)->err = (r);                                                           \
		snprintf((w)->why, sizeof (w)->why, "%s: %s: %s", what, shmcfg_errname(r), \
			 shmcfg_errdetail());                                             \
		goto out;                                                                 \
	} while (0)

/* Snapshots, commits and reads, round and round: the handler lands anywhere
 * in them (inside an RCU read-side section, under the view or commit lock). */
static void *worker(void *arg)
{
	struct work *w = arg;
	static const double ratios[] = {0.25, 0.5, 0.75};
	for (long long k = 1; !atomic_load(&w->stop); k++) {
		shmcfg_snapshot *s1, *s2;
		shmcfg_value v;
		int r;
		if ((r = shmcfg_snapshot_acquire(seg, &s1)))
			WORK_FAIL(w, r, "snapshot");
		if ((r = shmcfg_snapshot_get(s1, T_A, &v)) || v.u.i != k - 1) {
			shmcfg_snapshot_release(s1);
			WORK_FAIL(w, r ? r : -EPROTO, "snapshot_get");
		}
		if ((r = shmcfg_snapshot_acquire(seg, &s2))) { /* nested */
			shmcfg_snapshot_release(s1);
			WORK_FAIL(w, r, "nested snapshot");
		}
		shmcfg_snapshot_release(s2);
		shmcfg_snapshot_release(s1);
		w->snapshots += 2;

		shmcfg_txn *t;
		uint64_t gen;
		if ((r = shmcfg_txn_begin(seg, &t)))
			WORK_FAIL(w, r, "txn_begin");
		if ((r = shmcfg_txn_set_int(t, T_A, k)) || (r = shmcfg_txn_set_bool(t, T_FLAG, k & 1)) ||
		    (r = shmcfg_txn_set_float(t, T_RATIO, ratios[k % 3]))) {
			shmcfg_txn_abort(t);
			WORK_FAIL(w, r, "txn_set");
		}
		if ((r = shmcfg_txn_commit(t, &gen)))
			WORK_FAIL(w, r, "commit");
		atomic_store(&committed_gen, gen);
		atomic_store(&committed, k);
		w->commits++;

		int64_t a;
		if ((r = shmcfg_get(seg, T_C, &v)))
			WORK_FAIL(w, r, "get");
		shmcfg_value_clear(&v);
		if ((r = shmcfg_get_int(seg, T_A, &a)) || a != k)
			WORK_FAIL(w, r ? r : -EPROTO, "get_int");
		w->reads += 2;
	}
out:
	atomic_store(&w->done, true);
	return NULL;
}

/* A second thread sends SIGUSR1 to the worker as fast as it can for about a
 * second, and on until enough signals were handled amid enough commits (on a
 * busy machine pending signals coalesce while the worker waits for a CPU: a
 * fixed time could leave too few); the handler's reads must all be valid, and
 * the program must neither deadlock (the watchdog) nor crash. */
static void test_getters_in_signal_handler(void **state)
{
	(void)state;
	const char *name = test_name("signal");
	seg = test_create(name, NULL);
	struct sigaction sa = {.sa_handler = on_usr1, .sa_flags = SA_RESTART};
	sigemptyset(&sa.sa_mask);
	assert_int_equal(sigaction(SIGUSR1, &sa, NULL), 0);
	struct sigaction wd = {.sa_handler = on_watchdog};
	sigemptyset(&wd.sa_mask);
	assert_int_equal(sigaction(SIGALRM, &wd, NULL), 0);
	alarm(WATCHDOG_S);

	static struct work w;
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, worker, &w), 0);
	long sent = 0;
	struct timespec pause = {0, 20000}; /* 20 us */
	long long t0 = now_ns();
	while (!atomic_load(&w.done)) {
		long long dt = now_ns() - t0;
		if ((dt >= RUN_NS && atomic_load(&handled) >= MIN_HANDLED &&
		     atomic_load(&committed) >= MIN_COMMITS) || dt >= GIVE_UP_NS)
			atomic_store(&w.stop, true);
		if (pthread_kill(th, SIGUSR1) == 0)
			sent++;
		if (sent % 4 == 0)
			nanosleep(&pause, NULL);
	}
	assert_int_equal(pthread_join(th, NULL), 0);
	alarm(0);
	signal(SIGUSR1, SIG_IGN);
	print_message("# %ld signals sent, %ld handled; %ld commits, %ld snapshots, %ld reads\n", sent,
		      atomic_load(&handled), w.commits, w.snapshots, w.reads);
	if (w.err)
		fail_msg("the interrupted thread: %s", w.why);
	if (atomic_load(&bad))
		fail_msg("%ld reads in the handler broke a rule, the first: %s", atomic_load(&bad),
			 bad_what);
	/* enough of both for the test to mean something, even under sanitizers */
	assert_true(atomic_load(&handled) >= MIN_HANDLED);
	assert_true(w.commits >= MIN_COMMITS);
	shmcfg_close(seg);
	shmcfg_unlink(name);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_getters_in_signal_handler),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
